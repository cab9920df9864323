#include "rlx-preferences.h"

#include "rlx-engine.h"

#include <glib/gi18n.h>

struct _RlxPreferences {
    AdwPreferencesWindow parent_instance;

    AdwComboRow *device_row, *scheme_row;
    GtkSpinButton *budget_spin, *context_spin, *threads_spin;

    GSettings *settings;
    GPtrArray *devices; /* RlxDevice */
};

G_DEFINE_FINAL_TYPE(RlxPreferences, rlx_preferences, ADW_TYPE_PREFERENCES_WINDOW)

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

static void device_chosen(AdwComboRow *row, GParamSpec *ps, RlxPreferences *self)
{
    guint i = adw_combo_row_get_selected(row);
    if (i < self->devices->len)
        g_settings_set_string(self->settings, "device",
                              ((RlxDevice *)g_ptr_array_index(self->devices, i))->id);
}

static void scheme_chosen(AdwComboRow *row, GParamSpec *ps, RlxPreferences *self)
{
    guint i = adw_combo_row_get_selected(row);
    if (i < G_N_ELEMENTS(schemes))
        g_settings_set_string(self->settings, "color-scheme", schemes[i]);
}

RlxPreferences *rlx_preferences_new(GtkWindow *parent, GSettings *settings)
{
    g_return_val_if_fail(G_IS_SETTINGS(settings), NULL);
    RlxPreferences *self = g_object_new(RLX_TYPE_PREFERENCES, "transient-for", parent, NULL);
    self->settings = g_object_ref(settings);

    GtkStringList *names = gtk_string_list_new(NULL);
    g_autofree char *cur = g_settings_get_string(settings, "device");
    guint selected = 0;
    for (guint i = 0; i < self->devices->len; i++) {
        RlxDevice *d = g_ptr_array_index(self->devices, i);
        gtk_string_list_append(names, d->label);
        if (g_strcmp0(d->id, *cur ? cur : "cpu") == 0)
            selected = i;
    }
    adw_combo_row_set_model(self->device_row, G_LIST_MODEL(names));
    g_object_unref(names);
    adw_combo_row_set_selected(self->device_row, selected);
    g_signal_connect(self->device_row, "notify::selected", G_CALLBACK(device_chosen), self);

    g_autofree char *cs = g_settings_get_string(settings, "color-scheme");
    for (guint i = 0; i < G_N_ELEMENTS(schemes); i++)
        if (!g_strcmp0(cs, schemes[i]))
            adw_combo_row_set_selected(self->scheme_row, i);
    g_signal_connect(self->scheme_row, "notify::selected", G_CALLBACK(scheme_chosen), self);

    g_settings_bind(settings, "memory-budget-mib", self->budget_spin, "value",
                    G_SETTINGS_BIND_DEFAULT);
    g_settings_bind(settings, "context-length", self->context_spin, "value",
                    G_SETTINGS_BIND_DEFAULT);
    g_settings_bind(settings, "threads", self->threads_spin, "value", G_SETTINGS_BIND_DEFAULT);
    return self;
}

static void rlx_preferences_dispose(GObject *object)
{
    RlxPreferences *self = RLX_PREFERENCES(object);
    gtk_widget_dispose_template(GTK_WIDGET(object), RLX_TYPE_PREFERENCES);
    g_clear_object(&self->settings);
    g_clear_pointer(&self->devices, g_ptr_array_unref);
    G_OBJECT_CLASS(rlx_preferences_parent_class)->dispose(object);
}

static void rlx_preferences_class_init(RlxPreferencesClass *klass)
{
    GtkWidgetClass *widget_class = GTK_WIDGET_CLASS(klass);
    G_OBJECT_CLASS(klass)->dispose = rlx_preferences_dispose;
    gtk_widget_class_set_template_from_resource(widget_class, "/org/rlx/Studio/rlx-preferences.ui");
    gtk_widget_class_bind_template_child(widget_class, RlxPreferences, device_row);
    gtk_widget_class_bind_template_child(widget_class, RlxPreferences, scheme_row);
    gtk_widget_class_bind_template_child(widget_class, RlxPreferences, budget_spin);
    gtk_widget_class_bind_template_child(widget_class, RlxPreferences, context_spin);
    gtk_widget_class_bind_template_child(widget_class, RlxPreferences, threads_spin);
}

static void rlx_preferences_init(RlxPreferences *self)
{
    gtk_widget_init_template(GTK_WIDGET(self));
    self->devices = rlx_engine_list_devices();
}
