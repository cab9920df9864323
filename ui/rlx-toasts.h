/* One toast at a time over a pane: a new toast replaces the one shown
 * (AdwToastOverlay would queue it behind, so that an error came back after
 * a later success), and one given before the overlay is on screen waits for
 * it. A text longer than one line gets a Details button with the whole text,
 * unless the toast has a button of its own. A toast that comes less than
 * RLX_TOASTS_SHOW_MS after the one before waits for that one's show
 * animation to end: libadwaita 1.2 crashes (a double unref in
 * AdwToastOverlay) when a toast is dismissed during it.
 *
 * Usage (in a pane):
 *     RlxToasts toasts;                 // a field of the pane
 *     rlx_toasts_init(&self->toasts, self->toast_overlay, GTK_WIDGET(self));
 *     rlx_toasts_show(&self->toasts, text, ADW_TOAST_PRIORITY_HIGH, NULL, NULL);
 *     // in the pane's map handler: rlx_toasts_flush(&self->toasts);
 *     // in dispose (it stops a waiting flush): rlx_toasts_clear(&self->toasts);
 *
 * Thread safety: the main thread only. */
#ifndef RLX_UI_RLX_TOASTS_H
#define RLX_UI_RLX_TOASTS_H

#include <adwaita.h>

#define RLX_TOASTS_SHOW_MS 400 /* longer than AdwToastOverlay's show animation */

typedef struct {
    AdwToastOverlay *overlay; /* borrowed */
    GtkWidget *owner;         /* borrowed: the Details dialog's parent window */
    GQueue pending;           /* AdwToast *, until the overlay is mapped */
    AdwToast *last;           /* weak: the one on screen or due */
    gint64 shown_us;          /* when last was added */
    guint later;              /* a flush waiting for last's show animation */
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
