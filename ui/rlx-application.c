#include "rlx-application.h"

#include "rlx-config.h"
#include "rlx-engine.h"
#include "rlx-preferences.h"
#include "rlx-window.h"

#include <glib/gi18n.h>

struct _RlxApplication {
    AdwApplication parent_instance;

    GSettingsSchema *schema; /* nullable */
    GSettings *settings;     /* nullable */
    char *model_path;        /* --model, until the window opens it */
};

G_DEFINE_FINAL_TYPE(RlxApplication, rlx_application, ADW_TYPE_APPLICATION)

enum {
    PROP_0,
    PROP_SETTINGS_SCHEMA,
    N_PROPS,
};

static GParamSpec *properties[N_PROPS];

static const char *const page_names[] = {"chat", "segment", "transcribe", "imagine"};

static char *rlx_application_debug_info(RlxApplication *self, GtkWindow *parent)
{
    GString *s = g_string_new(NULL);
    g_autofree char *os = g_get_os_info(G_OS_INFO_KEY_PRETTY_NAME);
    GdkDisplay *display = gdk_display_get_default();

    g_string_append_printf(s, "RLX Studio %s (%s)\n", RLX_VERSION, RLX_APP_ID);
    /* librlx has no run-time version call yet; the GUI is built in the same
     * tree as the library, so its configured version is the library's. */
    g_string_append_printf(s, "librlx %s\n", RLX_VERSION);
    g_string_append(s, "Backends built: CPU");
    if (RLX_HAVE_VULKAN)
        g_string_append(s, ", Vulkan");
    if (RLX_HAVE_CUDA)
        g_string_append(s, ", CUDA");
    g_string_append(s, "\n");
    /* every device the backends report, with its feature line (the CPU's
     * names its model, threads and the SIMD path the kernels took) */
    g_autoptr(GPtrArray) devices = rlx_engine_list_devices();
    g_string_append_printf(s, "Devices (%u):\n", devices->len);
    for (guint i = 0; i < devices->len; i++) {
        const RlxDevice *d = g_ptr_array_index(devices, i);
        g_autofree char *mem = g_format_size(d->total_memory);
        g_string_append_printf(s, "  %s: %s; memory %s; %s\n", d->id, d->label,
                               d->total_memory ? mem : "unknown", d->features ? d->features : "");
    }
    g_string_append(s, "\n");

    g_string_append_printf(s, "GTK %u.%u.%u (built against %d.%d.%d)\n", gtk_get_major_version(),
                           gtk_get_minor_version(), gtk_get_micro_version(), GTK_MAJOR_VERSION,
                           GTK_MINOR_VERSION, GTK_MICRO_VERSION);
    g_string_append_printf(s, "libadwaita %u.%u.%u (built against %d.%d.%d)\n",
                           adw_get_major_version(), adw_get_minor_version(),
                           adw_get_micro_version(), ADW_MAJOR_VERSION, ADW_MINOR_VERSION,
                           ADW_MICRO_VERSION);
    g_string_append_printf(s, "GLib %u.%u.%u\n", glib_major_version, glib_minor_version,
                           glib_micro_version);
    g_string_append_printf(s, "OS: %s\n", os ? os : "unknown");
    g_string_append_printf(s, "Display: %s\n", display ? G_OBJECT_TYPE_NAME(display) : "none");
    if (parent && gtk_native_get_renderer(GTK_NATIVE(parent)))
        g_string_append_printf(s, "Renderer: %s\n",
                               G_OBJECT_TYPE_NAME(gtk_native_get_renderer(GTK_NATIVE(parent))));
    g_string_append_printf(s, "Settings: %s\n",
                           self->settings ? "org.rlx.Studio schema found"
                                          : "no org.rlx.Studio schema, window size not kept");
    return g_string_free(s, FALSE);
}

static void rlx_application_about(GSimpleAction *action, GVariant *param, gpointer user_data)
{
    RlxApplication *self = RLX_APPLICATION(user_data);
    GtkWindow *parent = gtk_application_get_active_window(GTK_APPLICATION(self));
    g_autofree char *debug_info = rlx_application_debug_info(self, parent);
    const char *developers[] = {_("The RLX Studio developers"), NULL};

    GtkWidget *about = g_object_new(
        ADW_TYPE_ABOUT_WINDOW, "transient-for", parent, "modal", TRUE, "application-name",
        _("RLX Studio"), "application-icon", RLX_APP_ID, "developer-name",
        _("The RLX Studio developers"), "developers", developers, "version", RLX_VERSION,
        "comments",
        _("Chat with language models, segment images, transcribe recordings and imagine "
          "pictures, on your own computer."),
        "website", RLX_HOMEPAGE, "issue-url", RLX_ISSUE_URL, "copyright",
        _("© 2026 The RLX Studio developers"), "license-type", GTK_LICENSE_MIT_X11, "debug-info",
        debug_info, "debug-info-filename", "rlx-studio-debug-info.txt", NULL);

    /* Translators: your names, one per line, shown in the About window. */
    const char *translators = _("translator-credits");
    if (g_strcmp0(translators, "translator-credits") != 0)
        adw_about_window_set_translator_credits(ADW_ABOUT_WINDOW(about), translators);

    gtk_window_present(GTK_WINDOW(about));
}

static void rlx_application_quit(GSimpleAction *action, GVariant *param, gpointer user_data)
{
    GtkApplication *app = GTK_APPLICATION(user_data);
    /* Close rather than destroy, so each window saves its state. */
    GList *windows = g_list_copy(gtk_application_get_windows(app));
    for (GList *l = windows; l; l = l->next)
        gtk_window_close(GTK_WINDOW(l->data));
    g_list_free(windows);
    g_application_quit(G_APPLICATION(app));
}

static void rlx_application_preferences(GSimpleAction *action, GVariant *param, gpointer user_data)
{
    RlxApplication *self = RLX_APPLICATION(user_data);
    GtkWindow *parent = gtk_application_get_active_window(GTK_APPLICATION(self));
    if (!self->settings) {
        if (RLX_IS_WINDOW(parent))
            rlx_window_toast(RLX_WINDOW(parent),
                             _("No settings schema is installed; preferences cannot be kept"));
        return;
    }
    gtk_window_present(GTK_WINDOW(rlx_preferences_new(parent, self->settings)));
}

static void color_scheme_changed(GSettings *settings, const char *key, gpointer data)
{
    rlx_preferences_apply_color_scheme(settings);
}

static gint rlx_application_handle_local_options(GApplication *app, GVariantDict *options)
{
    RlxApplication *self = RLX_APPLICATION(app);
    g_autofree char *model = NULL;
    if (g_variant_dict_lookup(options, "model", "^ay", &model)) {
        g_autoptr(GFile) f = g_file_new_for_commandline_arg(model);
        g_free(self->model_path);
        self->model_path = g_file_get_path(f);
    }
    return -1;
}

static const GActionEntry app_actions[] = {
    {.name = "about", .activate = rlx_application_about},
    {.name = "preferences", .activate = rlx_application_preferences},
    {.name = "quit", .activate = rlx_application_quit},
};

static void rlx_application_startup(GApplication *app)
{
    G_APPLICATION_CLASS(rlx_application_parent_class)->startup(app);

    g_action_map_add_action_entries(G_ACTION_MAP(app), app_actions, G_N_ELEMENTS(app_actions), app);
    gtk_application_set_accels_for_action(GTK_APPLICATION(app), "app.quit",
                                          (const char *[]){"<Control>q", NULL});
    gtk_application_set_accels_for_action(GTK_APPLICATION(app), "app.preferences",
                                          (const char *[]){"<Control>comma", NULL});
    RlxApplication *self = RLX_APPLICATION(app);
    if (self->settings) {
        rlx_preferences_apply_color_scheme(self->settings);
        g_signal_connect(self->settings, "changed::color-scheme", G_CALLBACK(color_scheme_changed),
                         NULL);
    }
    for (guint i = 0; i < G_N_ELEMENTS(page_names); i++) {
        g_autofree char *detailed = g_strdup_printf("win.view::%s", page_names[i]);
        g_autofree char *accel = g_strdup_printf("<Alt>%u", i + 1);
        gtk_application_set_accels_for_action(GTK_APPLICATION(app), detailed,
                                              (const char *[]){accel, NULL});
    }
}

static void rlx_application_activate(GApplication *app)
{
    RlxApplication *self = RLX_APPLICATION(app);
    GtkWindow *window = gtk_application_get_active_window(GTK_APPLICATION(app));
    if (!window)
        window = GTK_WINDOW(rlx_window_new(self, self->settings));
    gtk_window_present(window);
    if (self->model_path) {
        g_autoptr(GFile) f = g_file_new_for_path(self->model_path);
        rlx_window_open_model(RLX_WINDOW(window), f);
        g_clear_pointer(&self->model_path, g_free);
    }
}

static void rlx_application_constructed(GObject *object)
{
    RlxApplication *self = RLX_APPLICATION(object);
    G_OBJECT_CLASS(rlx_application_parent_class)->constructed(object);
    if (self->schema)
        self->settings = g_settings_new_full(self->schema, NULL, NULL);
    else
        g_message("GSettings schema %s not found; the window size will not be remembered",
                  RLX_APP_ID);
}

static void rlx_application_set_property(GObject *object, guint prop_id, const GValue *value,
                                         GParamSpec *pspec)
{
    RlxApplication *self = RLX_APPLICATION(object);
    switch (prop_id) {
    case PROP_SETTINGS_SCHEMA:
        g_clear_pointer(&self->schema, g_settings_schema_unref);
        self->schema = g_value_dup_boxed(value);
        break;
    default:
        G_OBJECT_WARN_INVALID_PROPERTY_ID(object, prop_id, pspec);
    }
}

static void rlx_application_get_property(GObject *object, guint prop_id, GValue *value,
                                         GParamSpec *pspec)
{
    RlxApplication *self = RLX_APPLICATION(object);
    switch (prop_id) {
    case PROP_SETTINGS_SCHEMA:
        g_value_set_boxed(value, self->schema);
        break;
    default:
        G_OBJECT_WARN_INVALID_PROPERTY_ID(object, prop_id, pspec);
    }
}

static void rlx_application_finalize(GObject *object)
{
    RlxApplication *self = RLX_APPLICATION(object);
    g_clear_object(&self->settings);
    g_clear_pointer(&self->schema, g_settings_schema_unref);
    g_free(self->model_path);
    G_OBJECT_CLASS(rlx_application_parent_class)->finalize(object);
}

static void rlx_application_class_init(RlxApplicationClass *klass)
{
    GObjectClass *object_class = G_OBJECT_CLASS(klass);
    GApplicationClass *app_class = G_APPLICATION_CLASS(klass);

    object_class->constructed = rlx_application_constructed;
    object_class->set_property = rlx_application_set_property;
    object_class->get_property = rlx_application_get_property;
    object_class->finalize = rlx_application_finalize;
    app_class->startup = rlx_application_startup;
    app_class->activate = rlx_application_activate;
    app_class->handle_local_options = rlx_application_handle_local_options;

    properties[PROP_SETTINGS_SCHEMA] =
        g_param_spec_boxed("settings-schema", NULL, NULL, G_TYPE_SETTINGS_SCHEMA,
                           G_PARAM_READWRITE | G_PARAM_CONSTRUCT_ONLY | G_PARAM_STATIC_STRINGS);
    g_object_class_install_properties(object_class, N_PROPS, properties);
}

static void rlx_application_init(RlxApplication *self)
{
    const GOptionEntry entries[] = {
        {"model", 'm', 0, G_OPTION_ARG_FILENAME, NULL, N_("Open this GGUF model in Chat"),
         N_("FILE")},
        {NULL},
    };
    g_application_add_main_option_entries(G_APPLICATION(self), entries);
}

RlxApplication *rlx_application_new(GSettingsSchema *schema)
{
    return g_object_new(RLX_TYPE_APPLICATION, "application-id", RLX_APP_ID, "flags",
                        G_APPLICATION_DEFAULT_FLAGS, "resource-base-path", "/org/rlx/Studio",
                        "settings-schema", schema, NULL);
}

GSettings *rlx_application_get_settings(RlxApplication *self)
{
    g_return_val_if_fail(RLX_IS_APPLICATION(self), NULL);
    return self->settings;
}
