/* RlxImaginePane: the Imagine page. A person types a prompt, presses
 * Generate, watches the picture form step by step (a TAEF2 preview after
 * each step, then the full decode) and keeps the result with the settings
 * that made it, in a gallery on disk. The FLUX.2 pipeline runs on an
 * RlxImaginer's thread, on the device the window's device menu selected.
 *
 *   RlxImaginePane *pane = ...;          // from the window's template
 *   rlx_imagine_pane_setup(pane, settings);
 *   rlx_imagine_pane_open(pane, file);   // a start picture, or a model
 *
 * The gallery lives in g_get_user_data_dir()/rlx-studio/imagine/: each
 * picture a PNG (its settings also in a "parameters" text chunk) with a JSON
 * sidecar of the same name (prompt, negative, width, height, steps, seed,
 * guidance, strength, model, time, seconds).
 *
 * Actions (group "imagine"): generate (Ctrl+Enter, also in the prompt),
 * stop (Escape), model (a model folder or transformer file), model-folder,
 * text-encoder, vae, preview-decoder (each a file chooser), dice (a random
 * seed), reuse (the shown picture's settings back into the form), save
 * (Ctrl+S, save as…), copy (Ctrl+Shift+C), delete (the shown picture),
 * clear-start (forget the dropped picture), retry (after an error).
 *
 * A picture dropped on the page starts image-to-image (with a strength), or
 * with "Use as reference" on, is sent as a reference to edit.
 *
 * Signal: memory (const RlxMemoryInfo *): what the model takes, its parts.
 * Settings: imagine-model, imagine-text-encoder, imagine-vae,
 * imagine-preview-decoder, imagine-width, imagine-height; device,
 * memory-budget-mib and threads as the other pages use them.
 *
 * Thread safety: main thread only.
 */
#pragma once

#include <adwaita.h>

G_BEGIN_DECLS

#define RLX_TYPE_IMAGINE_PANE (rlx_imagine_pane_get_type())
G_DECLARE_FINAL_TYPE(RlxImaginePane, rlx_imagine_pane, RLX, IMAGINE_PANE, GtkWidget)

/* settings may be NULL (no schema): nothing remembered. */
void rlx_imagine_pane_setup(RlxImaginePane *self, GSettings *settings);
/* A PNG or JPEG becomes the start picture; a folder, .safetensors or .gguf
 * the model. Errors come as toasts. */
void rlx_imagine_pane_open(RlxImaginePane *self, GFile *file);

G_END_DECLS
