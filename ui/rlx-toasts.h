/* One toast at a time over a pane: a new toast replaces the one shown
 * (AdwToastOverlay would queue it behind, so that an error came back after
 * a later success), and one given before the overlay is on screen waits for
 * it. A text longer than one line gets a Details button with the whole text,
 * unless the toast has a button of its own.
 *
 * Usage (in a pane):
 *     RlxToasts toasts;                 // a field of the pane
 *     rlx_toasts_init(&self->toasts, self->toast_overlay, GTK_WIDGET(self));
 *     rlx_toasts_show(&self->toasts, text, ADW_TOAST_PRIORITY_HIGH, NULL, NULL);
 *     // in the pane's map handler: rlx_toasts_flush(&self->toasts);
 *     // in dispose: rlx_toasts_clear(&self->toasts);
 *
 * Thread safety: the main thread only. */
#ifndef RLX_UI_RLX_TOASTS_H
#define RLX_UI_RLX_TOASTS_H

#include <adwaita.h>

typedef struct {
    AdwToastOverlay *overlay; /* borrowed */
    GtkWidget *owner;         /* borrowed: the Details dialog's parent window */
    GQueue pending;           /* AdwToast *, until the overlay is mapped */
    AdwToast *last;           /* weak: the one on screen or due */
} RlxToasts;

void rlx_toasts_init(RlxToasts *t, AdwToastOverlay *overlay, GtkWidget *owner);
/* button and action (nullable): a button that runs an action. The text also
 * goes to the log (g_message), for whoever reads it and for the UI tests. */
void rlx_toasts_show(RlxToasts *t, const char *text, AdwToastPriority priority, const char *button,
                     const char *action);
/* Show what waited for the overlay to be mapped. */
void rlx_toasts_flush(RlxToasts *t);
void rlx_toasts_clear(RlxToasts *t);

#endif
