/* rlx-studio: the GTK front end. Everything lives in RlxApplication (ui/);
 * this file sets up gettext and finds the GSettings schema. */
#include "rlx-config.h"
#include "rlx-application.h"

#include <glib/gi18n.h>
#include <locale.h>
#include <stdlib.h>

/* True when this binary is the one in the meson build directory, so that an
 * uninstalled run uses the schema compiled next to it, not an older installed one. */
static gboolean running_from_build_tree(void)
{
    g_autofree char *exe = g_file_read_link("/proc/self/exe", NULL);
    char *root = realpath(RLX_BUILD_ROOT, NULL);
    gboolean inside = exe && root && g_str_has_prefix(exe, root) && exe[strlen(root)] == '/';
    free(root);
    return inside;
}

static GSettingsSchema *lookup_build_tree_schema(GSettingsSchemaSource *parent)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(GSettingsSchemaSource) source =
        g_settings_schema_source_new_from_directory(RLX_BUILD_SCHEMA_DIR, parent, FALSE, &error);
    if (!source) {
        g_debug("no compiled schema in %s: %s", RLX_BUILD_SCHEMA_DIR, error->message);
        return NULL;
    }
    return g_settings_schema_source_lookup(source, RLX_APP_ID, FALSE);
}

/* The installed schema (or one under $GSETTINGS_SCHEMA_DIR), else the one
 * meson compiled into the build tree; NULL when there is neither. */
static GSettingsSchema *find_settings_schema(void)
{
    GSettingsSchemaSource *installed = g_settings_schema_source_get_default();
    GSettingsSchema *schema = NULL;
    gboolean from_build = running_from_build_tree();

    if (from_build)
        schema = lookup_build_tree_schema(installed);
    if (!schema && installed)
        schema = g_settings_schema_source_lookup(installed, RLX_APP_ID, TRUE);
    if (!schema && !from_build)
        schema = lookup_build_tree_schema(installed);
    return schema;
}

int main(int argc, char *argv[])
{
    setlocale(LC_ALL, "");
    bindtextdomain(GETTEXT_PACKAGE, RLX_LOCALEDIR);
    bind_textdomain_codeset(GETTEXT_PACKAGE, "UTF-8");
    textdomain(GETTEXT_PACKAGE);

    g_autoptr(GSettingsSchema) schema = find_settings_schema();
    g_autoptr(RlxApplication) app = rlx_application_new(schema);
    return g_application_run(G_APPLICATION(app), argc, argv);
}
