#include "rlx-toasts.h"

#include <glib/gi18n.h>

/* Toasts have one line: at 800 px about 70 characters show. */
#define TOAST_CHARS 64

void rlx_toasts_init(RlxToasts *t, AdwToastOverlay *overlay, GtkWidget *owner)
{
    t->overlay = overlay;
    t->owner = owner;
    g_queue_init(&t->pending);
    t->last = NULL;
    t->shown_us = 0;
    t->later = 0;
    g_clear_handle_id(&t->later, g_source_remove);
}

static gboolean flush_later(gpointer data)
{
    RlxToasts *t = data;
    t->later = 0;
    rlx_toasts_flush(t);
    return G_SOURCE_REMOVE;
}

void rlx_toasts_flush(RlxToasts *t)
{
    GtkWidget *overlay = GTK_WIDGET(t->overlay);
    if (!overlay || !gtk_widget_get_mapped(overlay) || g_queue_is_empty(&t->pending))
        return;
    gint64 now = g_get_monotonic_time(), age_ms = (now - t->shown_us) / 1000;
    if (t->last && age_ms < RLX_TOASTS_SHOW_MS) {
        if (!t->later)
            t->later = g_timeout_add((guint)(RLX_TOASTS_SHOW_MS - age_ms + 1), flush_later, t);
        return;
    }
    t->shown_us = now;
    for (AdwToast *x; (x = g_queue_pop_head(&t->pending));) {
        if (t->last) {
            g_object_remove_weak_pointer(G_OBJECT(t->last), (gpointer *)&t->last);
            adw_toast_dismiss(t->last);
        }
        t->last = x;
        g_object_add_weak_pointer(G_OBJECT(x), (gpointer *)&t->last);
        adw_toast_overlay_add_toast(t->overlay, x);
    }
}

static void show_details(AdwToast *toast, GtkWidget *owner)
{
    GtkRoot *root = gtk_widget_get_root(owner);
    AdwMessageDialog *d = ADW_MESSAGE_DIALOG(
        adw_message_dialog_new(GTK_IS_WINDOW(root) ? GTK_WINDOW(root) : NULL, NULL,
                               g_object_get_data(G_OBJECT(toast), "rlx-details")));
    adw_message_dialog_add_response(d, "close", _("_Close"));
    gtk_window_present(GTK_WINDOW(d));
}

void rlx_toasts_show(RlxToasts *t, const char *text, AdwToastPriority priority, const char *button,
                     const char *action)
{
    g_message("%s", text);
    AdwToast *x = adw_toast_new(text);
    adw_toast_set_timeout(x, 6);
    adw_toast_set_priority(x, priority);
    if (button) {
        adw_toast_set_button_label(x, button);
        adw_toast_set_action_name(x, action);
    } else if (g_utf8_strlen(text, -1) > TOAST_CHARS) {
        adw_toast_set_button_label(x, _("Details"));
        g_object_set_data_full(G_OBJECT(x), "rlx-details", g_strdup(text), g_free);
        g_signal_connect_object(x, "button-clicked", G_CALLBACK(show_details), t->owner, 0);
    }
    /* one still waiting for the overlay is replaced like one on screen */
    g_queue_clear_full(&t->pending, g_object_unref);
    g_queue_push_tail(&t->pending, x);
    rlx_toasts_flush(t);
}

void rlx_toasts_clear(RlxToasts *t)
{
    g_queue_clear_full(&t->pending, g_object_unref);
    if (t->last)
        g_object_remove_weak_pointer(G_OBJECT(t->last), (gpointer *)&t->last);
    t->last = NULL;
    g_clear_handle_id(&t->later, g_source_remove);
}
