#include "rlx-preferences.h"

#include "rlx-engine.h"

#include <glib/gi18n.h>

static const char *const schemes[] = {"default", "light", "dark"};

void rlx_preferences_apply_color_scheme(GSettings *settings)
{
    g_autofree char *v = g_settings_get_string(settings, "color-scheme");
    AdwColorScheme cs = ADW_COLOR_SCHEME_DEFAULT;
    if (!g_strcmp0(v, "light"))
        cs = ADW_COLOR_SCHEME_FORCE_LIGHT;
    else if (!g_strcmp0(v, "dark"))
        cs = ADW_COLOR_SCHEME_FORCE_DARK;
    adw_style_manager_set_color_scheme(adw_style_manager_get_default(), cs);
}

static GtkWidget *spin_row(GSettings *settings, const char *key, const char *title,
                           const char *subtitle, double hi, double step)
{
    GtkWidget *row = adw_action_row_new();
    adw_preferences_row_set_title(ADW_PREFERENCES_ROW(row), title);
    adw_action_row_set_subtitle(ADW_ACTION_ROW(row), subtitle);
    GtkWidget *spin = gtk_spin_button_new_with_range(0, hi, step);
    gtk_widget_set_valign(spin, GTK_ALIGN_CENTER);
    g_settings_bind(settings, key, spin, "value", G_SETTINGS_BIND_DEFAULT);
    adw_action_row_add_suffix(ADW_ACTION_ROW(row), spin);
    adw_action_row_set_activatable_widget(ADW_ACTION_ROW(row), spin);
    return row;
}

typedef struct {
    GSettings *settings;
    GPtrArray *devices;
} DeviceRow;

static void device_row_free(gpointer data)
{
    DeviceRow *d = data;
    g_object_unref(d->settings);
    g_ptr_array_unref(d->devices);
    g_free(d);
}

static void device_chosen(AdwComboRow *row, GParamSpec *ps, DeviceRow *d)
{
    guint i = adw_combo_row_get_selected(row);
    if (i < d->devices->len)
        g_settings_set_string(d->settings, "device",
                              ((RlxDevice *)g_ptr_array_index(d->devices, i))->id);
}

static void scheme_chosen(AdwComboRow *row, GParamSpec *ps, GSettings *settings)
{
    guint i = adw_combo_row_get_selected(row);
    if (i < G_N_ELEMENTS(schemes))
        g_settings_set_string(settings, "color-scheme", schemes[i]);
}

GtkWindow *rlx_preferences_new(GtkWindow *parent, GSettings *settings)
{
    GtkWidget *win = adw_preferences_window_new();
    gtk_window_set_transient_for(GTK_WINDOW(win), parent);
    gtk_window_set_modal(GTK_WINDOW(win), TRUE);
    gtk_window_set_default_size(GTK_WINDOW(win), 560, 560);

    GtkWidget *page = adw_preferences_page_new();
    adw_preferences_page_set_title(ADW_PREFERENCES_PAGE(page), _("General"));
    adw_preferences_page_set_icon_name(ADW_PREFERENCES_PAGE(page), "preferences-system-symbolic");

    GtkWidget *engine = adw_preferences_group_new();
    adw_preferences_group_set_title(ADW_PREFERENCES_GROUP(engine), _("Engine"));
    adw_preferences_group_set_description(ADW_PREFERENCES_GROUP(engine),
                                          _("Changes apply when a model is loaded."));

    DeviceRow *d = g_new0(DeviceRow, 1);
    d->settings = g_object_ref(settings);
    d->devices = rlx_engine_list_devices();
    GtkStringList *names = gtk_string_list_new(NULL);
    g_autofree char *cur = g_settings_get_string(settings, "device");
    guint selected = 0;
    for (guint i = 0; i < d->devices->len; i++) {
        RlxDevice *dev = g_ptr_array_index(d->devices, i);
        gtk_string_list_append(names, dev->label);
        if (g_strcmp0(dev->id, *cur ? cur : "cpu") == 0)
            selected = i;
    }
    GtkWidget *device = adw_combo_row_new();
    adw_preferences_row_set_title(ADW_PREFERENCES_ROW(device), _("Default device"));
    adw_combo_row_set_model(ADW_COMBO_ROW(device), G_LIST_MODEL(names));
    g_object_unref(names);
    adw_combo_row_set_selected(ADW_COMBO_ROW(device), selected);
    g_signal_connect_data(device, "notify::selected", G_CALLBACK(device_chosen), d,
                          (GClosureNotify)(void (*)(void))device_row_free, 0);
    adw_preferences_group_add(ADW_PREFERENCES_GROUP(engine), device);
    adw_preferences_group_add(ADW_PREFERENCES_GROUP(engine),
                              spin_row(settings, "memory-budget-mib", _("Memory budget (MiB)"),
                                       _("0 uses all of the device's memory"), 16777216, 256));
    adw_preferences_group_add(ADW_PREFERENCES_GROUP(engine),
                              spin_row(settings, "context-length", _("Context length (tokens)"),
                                       _("0 uses the model's own, at most 4096"), 1048576, 256));
    adw_preferences_group_add(ADW_PREFERENCES_GROUP(engine),
                              spin_row(settings, "threads", _("CPU threads"),
                                       _("0 uses one per physical core"), 1024, 1));

    GtkWidget *look = adw_preferences_group_new();
    adw_preferences_group_set_title(ADW_PREFERENCES_GROUP(look), _("Appearance"));
    GtkStringList *scheme_names =
        gtk_string_list_new((const char *[]){_("Follow System"), _("Light"), _("Dark"), NULL});
    GtkWidget *scheme = adw_combo_row_new();
    adw_preferences_row_set_title(ADW_PREFERENCES_ROW(scheme), _("Colour scheme"));
    adw_combo_row_set_model(ADW_COMBO_ROW(scheme), G_LIST_MODEL(scheme_names));
    g_object_unref(scheme_names);
    g_autofree char *cs = g_settings_get_string(settings, "color-scheme");
    for (guint i = 0; i < G_N_ELEMENTS(schemes); i++)
        if (!g_strcmp0(cs, schemes[i]))
            adw_combo_row_set_selected(ADW_COMBO_ROW(scheme), i);
    g_signal_connect_object(scheme, "notify::selected", G_CALLBACK(scheme_chosen), settings, 0);
    adw_preferences_group_add(ADW_PREFERENCES_GROUP(look), scheme);

    adw_preferences_page_add(ADW_PREFERENCES_PAGE(page), ADW_PREFERENCES_GROUP(engine));
    adw_preferences_page_add(ADW_PREFERENCES_PAGE(page), ADW_PREFERENCES_GROUP(look));
    adw_preferences_window_add(ADW_PREFERENCES_WINDOW(win), ADW_PREFERENCES_PAGE(page));
    return GTK_WINDOW(win);
}
