/* A reply that failed, in the words a person reads where the reply would
 * be: what could not run, on which device, what to do; the engine's own
 * message (instruction numbers, values, buffers) only as details for a bug
 * report.
 *
 *   RlxFailure *f = rlx_failure_describe(error, "vulkan:0");
 *   ... f->heading, f->sentence, f->advice, f->details ...
 *   rlx_failure_free(f);
 *
 * Thread safety: any thread; no shared state.
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef struct {
    char *heading, *sentence, *advice;
    char *details;      /* the engine's own words, for a bug report; nullable */
    gboolean offer_cpu; /* it ran on a GPU: switching to the CPU may help */
} RlxFailure;

/* error: an RlxEngine "error" (domain RLX_ENGINE_ERROR); device: the id the
 * model ran on ("cpu", "vulkan:0"; NULL: the CPU). */
RlxFailure *rlx_failure_describe(const GError *error, const char *device);
void rlx_failure_free(RlxFailure *f);

/* "the CPU", "the GPU (vulkan:0)": how the sentences name a device. */
char *rlx_device_phrase(const char *device);

G_END_DECLS
