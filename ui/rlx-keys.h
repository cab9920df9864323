/* A page's keys that work wherever the focus is in the window: after a click
 * in the header bar, in a popover, or when the focused row went away with
 * the rows it belonged to. The root runs these global shortcuts after the
 * focused widget and its parents declined the key (an entry or a popover
 * gets its own Escape first), and only those of a page that is mapped, so
 * the pages of the window's stack can share keys.
 *
 *     static const RlxKey keys[] = {{GDK_KEY_Escape, 0, "chat.stop"}, ...};
 *     rlx_keys_global(GTK_WIDGET(self), keys, G_N_ELEMENTS(keys));
 */
#ifndef RLX_UI_KEYS_H
#define RLX_UI_KEYS_H

#include <gtk/gtk.h>

typedef struct RlxKey {
    guint key;
    GdkModifierType mods;
    const char *action; /* a named action the page (or a parent) has */
} RlxKey;

void rlx_keys_global(GtkWidget *page, const RlxKey *keys, guint n);

#endif
