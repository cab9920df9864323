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

/* --model FILE is the same as a FILE argument: "open" in whichever process is
 * the primary instance, this one or one already running. */
static gint rlx_application_handle_local_options(GApplication *app, GVariantDict *options)
{
    g_autofree char *model = NULL;
    if (!g_variant_dict_lookup(options, "model", "^ay", &model))
        return -1;
    g_autoptr(GError) error = NULL;
    if (!g_application_register(app, NULL, &error)) {
        g_printerr("rlx-studio: %s\n", error->message);
        return 1;
    }
    g_autoptr(GFile) f = g_file_new_for_commandline_arg(model);
    g_application_open(app, &f, 1, "");
    /* Here the window is open: go on into the main loop (activate presents it). */
    return g_application_get_is_remote(app) ? 0 : -1;
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

/* The main window (the active window may be Preferences or About), made if need be. */
static RlxWindow *rlx_application_window(RlxApplication *self)
{
    RlxWindow *window = NULL;
    for (GList *l = gtk_application_get_windows(GTK_APPLICATION(self)); l && !window; l = l->next)
        if (RLX_IS_WINDOW(l->data))
            window = l->data;
    if (!window)
        window = rlx_window_new(self, self->settings);
    gtk_window_present(GTK_WINDOW(window));
    return window;
}

static void rlx_application_activate(GApplication *app)
{
    rlx_application_window(RLX_APPLICATION(app));
}

/* rlx-studio FILE, --model FILE, or the file manager; also from a second
 * launch, over D-Bus. One model at a time: the first file. */
static void rlx_application_open(GApplication *app, GFile **files, gint n_files, const char *hint)
{
    RlxWindow *window = rlx_application_window(RLX_APPLICATION(app));
    if (n_files > 1)
        g_message("%d files given; a model is opened one at a time, so only the first", n_files);
    if (n_files > 0)
        rlx_window_open_file(window, files[0]);
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
    app_class->open = rlx_application_open;
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
                        G_APPLICATION_HANDLES_OPEN, "resource-base-path", "/org/rlx/Studio",
                        "settings-schema", schema, NULL);
}

GSettings *rlx_application_get_settings(RlxApplication *self)
{
    g_return_val_if_fail(RLX_IS_APPLICATION(self), NULL);
    return self->settings;
}
