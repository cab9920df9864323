/* RlxApplication: the rlx-studio AdwApplication (app id org.rlx.Studio).
 *
 *   g_autoptr(GSettingsSchema) schema = ...; // may be NULL
 *   g_autoptr(RlxApplication) app = rlx_application_new(schema);
 *   return g_application_run(G_APPLICATION(app), argc, argv);
 *
 * Actions: app.quit (<Ctrl>Q) and app.about. Window state is kept in the
 * org.rlx.Studio GSettings schema when one was found; without it the app runs
 * and simply forgets the window size.
 *
 * Thread safety: main thread only, like every GTK object.
 */
#pragma once

#include <adwaita.h>

G_BEGIN_DECLS

#define RLX_TYPE_APPLICATION (rlx_application_get_type())
G_DECLARE_FINAL_TYPE(RlxApplication, rlx_application, RLX, APPLICATION, AdwApplication)

/* schema: the org.rlx.Studio schema, or NULL when none was found. Borrowed;
 * the application takes its own reference. */
RlxApplication *rlx_application_new(GSettingsSchema *schema);

/* The application's settings, or NULL when it runs without a schema.
 * Owned by the application. */
GSettings *rlx_application_get_settings(RlxApplication *self);

G_END_DECLS
