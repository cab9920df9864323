/* RlxPreferences: the Preferences window, every row bound to a key of the
 * org.rlx.Studio schema: default device, memory budget, context length, CPU
 * threads and the colour scheme.
 *
 *   RlxPreferences *w = rlx_preferences_new(parent, settings);
 *   gtk_window_present(GTK_WINDOW(w));
 *
 * Thread safety: main thread only.
 */
#pragma once

#include <adwaita.h>

G_BEGIN_DECLS

#define RLX_TYPE_PREFERENCES (rlx_preferences_get_type())
G_DECLARE_FINAL_TYPE(RlxPreferences, rlx_preferences, RLX, PREFERENCES, AdwPreferencesWindow)

RlxPreferences *rlx_preferences_new(GtkWindow *parent, GSettings *settings);

/* Follow the color-scheme key (default, light, dark) with AdwStyleManager. */
void rlx_preferences_apply_color_scheme(GSettings *settings);

G_END_DECLS
