#include "rlx-keys.h"

void rlx_keys_global(GtkWidget *page, const RlxKey *keys, guint n)
{
    GtkEventController *c = gtk_shortcut_controller_new();
    gtk_shortcut_controller_set_scope(GTK_SHORTCUT_CONTROLLER(c), GTK_SHORTCUT_SCOPE_GLOBAL);
    for (guint i = 0; i < n; i++)
        gtk_shortcut_controller_add_shortcut(
            GTK_SHORTCUT_CONTROLLER(c),
            gtk_shortcut_new(gtk_keyval_trigger_new(keys[i].key, keys[i].mods),
                             gtk_named_action_new(keys[i].action)));
    gtk_widget_add_controller(page, c);
}
