/* RlxSamplingPopover: the Chat page's Sampling popover (temperature, top-k,
 * top-p, min-p, repetition penalty, seed, max tokens, context length, thinking). Its
 * rows live in rlx-sampling-popover.ui; each spin button is bound to the
 * org.rlx.Studio key of the same name.
 *
 *   // in a template: <object class="RlxSamplingPopover" id="sampling_popover"/>
 *   rlx_sampling_popover_bind(popover, settings); // settings may be NULL
 *
 * Thread safety: main thread only.
 */
#pragma once

#include <gtk/gtk.h>

G_BEGIN_DECLS

#define RLX_TYPE_SAMPLING_POPOVER (rlx_sampling_popover_get_type())
G_DECLARE_FINAL_TYPE(RlxSamplingPopover, rlx_sampling_popover, RLX, SAMPLING_POPOVER, GtkPopover)

/* Bind every spin button to its key (G_SETTINGS_BIND_DEFAULT). Without
 * settings (no schema) the spin buttons stay insensitive. */
void rlx_sampling_popover_bind(RlxSamplingPopover *self, GSettings *settings);
/* The Thinking switch (key "thinking") is sensitive only for a loaded model
 * whose chat template reads enable_thinking. */
void rlx_sampling_popover_set_thinking_switch(RlxSamplingPopover *self, gboolean loaded,
                                              gboolean available);

G_END_DECLS
