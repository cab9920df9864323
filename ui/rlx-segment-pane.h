/* RlxSegmentPane: the Segment page. A photo (opened or dropped) is encoded
 * once by a Segment Anything model (RlxSegmenter) on the device the window's
 * device menu selected; then each click runs only the prompt encoder and the
 * mask decoder, and the mask over the picture follows it.
 *
 *   RlxSegmentPane *pane = ...;          // from the window's template
 *   rlx_segment_pane_setup(pane, settings);
 *   rlx_segment_pane_open(pane, file);   // an image, or a SAM model
 *
 * In the picture: a click marks the object (green), a right-click or
 * Shift+click marks what is not (red), a drag draws a box. One click alone
 * gives three proposals (Tab cycles them); the page keeps several objects,
 * each in its colour (N starts the next). Ctrl+Z / Ctrl+Shift+Z undo and
 * redo, Escape clears the object. Ctrl+scroll (or +/-) zooms, a drag with the
 * middle button (or with Ctrl) pans, 0 fits the picture again.
 *
 * Actions (group "segment"): open (Ctrl+O, an image), model (choose a SAM
 * model), everything (Ctrl+E), undo, redo, clear, new-object, next-proposal, save-mask
 * (Ctrl+S), save-cutout (Ctrl+Shift+S), copy-cutout (Ctrl+C), zoom-in,
 * zoom-out, zoom-fit.
 *
 * Signal: memory (const RlxMemoryInfo *): what the loaded model takes.
 * Settings: sam-model (the last model chosen), sam-points-per-side (the
 * grid of Segment Everything); device, memory-budget-mib and
 * threads as the other pages use them.
 *
 * Thread safety: main thread only.
 */
#pragma once

#include <adwaita.h>

G_BEGIN_DECLS

#define RLX_TYPE_SEGMENT_PANE (rlx_segment_pane_get_type())
G_DECLARE_FINAL_TYPE(RlxSegmentPane, rlx_segment_pane, RLX, SEGMENT_PANE, GtkWidget)

/* settings may be NULL (no schema): nothing remembered. */
void rlx_segment_pane_setup(RlxSegmentPane *self, GSettings *settings);
/* A PNG or JPEG is opened; a SAM checkpoint (.pth, .pt, .safetensors or a
 * folder) becomes the model. Errors come as toasts. */
void rlx_segment_pane_open(RlxSegmentPane *self, GFile *file);
/* Whether the file looks like an image or a SAM checkpoint, for the window
 * to route a drop to this page. */
gboolean rlx_segment_pane_wants_file(GFile *file);

G_END_DECLS
