#include "rlx-failure.h"

#include "backends/base/status.h"
#include "rlx-engine.h"

#include <glib/gi18n.h>

void rlx_failure_free(RlxFailure *f)
{
    if (!f)
        return;
    g_free(f->heading);
    g_free(f->sentence);
    g_free(f->advice);
    g_free(f->details);
    g_free(f);
}

/* "the CPU", "the GPU vulkan:0": what the sentences name the device by. */
char *rlx_device_phrase(const char *device)
{
    if (!device || g_strcmp0(device, "cpu") == 0)
        return g_strdup(_("the CPU"));
    /* Translators: %s is a device id such as "vulkan:0" */
    return g_strdup_printf(_("the GPU (%s)"), device);
}

/* The engine's error in words a person reads; its own text goes to the
 * details (instruction numbers, values and buffers mean nothing to a
 * person, and everything to whoever fixes the bug). */
RlxFailure *rlx_failure_describe(const GError *error, const char *device)
{
    RlxFailure *f = g_new0(RlxFailure, 1);
    gboolean gpu = device && g_strcmp0(device, "cpu") != 0;
    g_autofree char *dev = rlx_device_phrase(device);
    f->details = g_strdup(error->message);
    f->offer_cpu = gpu;
    switch (error->code) {
    case RLX_ENGINE_ERROR_CONTEXT_FULL:
        f->heading = g_strdup(_("The conversation is too long"));
        /* the bridge's own sentence, written for a person */
        f->sentence = g_strdup(error->message);
        f->advice = g_strdup(_("Start a new conversation (Ctrl+N), or raise the context length "
                               "in Preferences (it applies when the model is loaded again) and "
                               "retry."));
        g_clear_pointer(&f->details, g_free);
        f->offer_cpu = FALSE;
        break;
    case RLX_ERR_NO_MEMORY:
    case RLX_ERR_BUDGET:
        f->heading = g_strdup(_("Not enough memory for the reply"));
        /* Translators: %s is "the CPU" or "the GPU (vulkan:0)" */
        f->sentence =
            g_strdup_printf(_("Writing the reply needed more memory than %s has left."), dev);
        f->advice = g_strdup(gpu ? _("Switch to the CPU, or lower the GPU layers or the context "
                                     "length in Preferences, then retry.")
                                 : _("Lower the context length in Preferences or close other "
                                     "programs, then retry."));
        break;
    case RLX_ERR_UNSUPPORTED:
        f->heading = g_strdup(_("This device cannot run the model"));
        /* Translators: %s is "the CPU" or "the GPU (vulkan:0)" */
        f->sentence = g_strdup_printf(_("The model needs a step that %s cannot run yet."), dev);
        f->advice = g_strdup(gpu ? _("Switch to the CPU and retry.")
                                 : _("This model cannot be used for chat in this version."));
        break;
    default:
        f->heading = g_strdup(_("The reply could not be written"));
        /* Translators: %s is "the CPU" or "the GPU (vulkan:0)" */
        f->sentence = g_strdup_printf(
            gpu ? _("Running the model on %s failed, so the reply stopped.")
                : _("Running the model on %s failed because of a problem in RLX Studio."),
            dev);
        f->advice = g_strdup(gpu ? _("Switch to the CPU and retry. If it happens again, please "
                                     "report it with the details below.")
                                 : _("Retry. If it happens again, please report it with the "
                                     "details below."));
        break;
    }
    return f;
}
