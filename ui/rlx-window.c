#include "rlx-window.h"

struct _RlxWindow {
    AdwApplicationWindow parent_instance;

    AdwViewStack *stack;
    GSettings *settings; /* nullable */
};

G_DEFINE_FINAL_TYPE(RlxWindow, rlx_window, ADW_TYPE_APPLICATION_WINDOW)

enum {
    PROP_0,
    PROP_SETTINGS,
    N_PROPS,
};

static GParamSpec *properties[N_PROPS];

/* Smallest size the template allows (width-request / height-request). */
#define MIN_WIDTH  360
#define MIN_HEIGHT 294

static void rlx_window_restore_state(RlxWindow *self)
{
    if (!self->settings)
        return;
    int width = g_settings_get_int(self->settings, "window-width");
    int height = g_settings_get_int(self->settings, "window-height");
    gtk_window_set_default_size(GTK_WINDOW(self), MAX(width, MIN_WIDTH), MAX(height, MIN_HEIGHT));
    if (g_settings_get_boolean(self->settings, "window-maximized"))
        gtk_window_maximize(GTK_WINDOW(self));
}

static void rlx_window_save_state(RlxWindow *self)
{
    if (!self->settings)
        return;
    int width = 0, height = 0;
    /* While maximized GTK keeps the unmaximized size as the default size,
     * which is the one worth restoring. */
    gtk_window_get_default_size(GTK_WINDOW(self), &width, &height);
    g_settings_delay(self->settings);
    if (width > 0 && height > 0) {
        g_settings_set_int(self->settings, "window-width", width);
        g_settings_set_int(self->settings, "window-height", height);
    }
    g_settings_set_boolean(self->settings, "window-maximized",
                           gtk_window_is_maximized(GTK_WINDOW(self)));
    g_settings_apply(self->settings);
}

static gboolean rlx_window_close_request(GtkWindow *window)
{
    rlx_window_save_state(RLX_WINDOW(window));
    return GTK_WINDOW_CLASS(rlx_window_parent_class)->close_request(window);
}

static void rlx_window_view_action(GtkWidget *widget, const char *action_name, GVariant *param)
{
    RlxWindow *self = RLX_WINDOW(widget);
    const char *name = g_variant_get_string(param, NULL);
    if (adw_view_stack_get_child_by_name(self->stack, name))
        adw_view_stack_set_visible_child_name(self->stack, name);
    else
        g_warning("win.view: no page named “%s”", name);
}

static void rlx_window_constructed(GObject *object)
{
    G_OBJECT_CLASS(rlx_window_parent_class)->constructed(object);
    rlx_window_restore_state(RLX_WINDOW(object));
}

static void rlx_window_set_property(GObject *object, guint prop_id, const GValue *value,
                                    GParamSpec *pspec)
{
    RlxWindow *self = RLX_WINDOW(object);
    switch (prop_id) {
    case PROP_SETTINGS:
        g_set_object(&self->settings, g_value_get_object(value));
        break;
    default:
        G_OBJECT_WARN_INVALID_PROPERTY_ID(object, prop_id, pspec);
    }
}

static void rlx_window_get_property(GObject *object, guint prop_id, GValue *value,
                                    GParamSpec *pspec)
{
    RlxWindow *self = RLX_WINDOW(object);
    switch (prop_id) {
    case PROP_SETTINGS:
        g_value_set_object(value, self->settings);
        break;
    default:
        G_OBJECT_WARN_INVALID_PROPERTY_ID(object, prop_id, pspec);
    }
}

static void rlx_window_dispose(GObject *object)
{
    RlxWindow *self = RLX_WINDOW(object);
    g_clear_object(&self->settings);
    gtk_widget_dispose_template(GTK_WIDGET(object), RLX_TYPE_WINDOW);
    G_OBJECT_CLASS(rlx_window_parent_class)->dispose(object);
}

static void rlx_window_class_init(RlxWindowClass *klass)
{
    GObjectClass *object_class = G_OBJECT_CLASS(klass);
    GtkWidgetClass *widget_class = GTK_WIDGET_CLASS(klass);
    GtkWindowClass *window_class = GTK_WINDOW_CLASS(klass);

    object_class->constructed = rlx_window_constructed;
    object_class->set_property = rlx_window_set_property;
    object_class->get_property = rlx_window_get_property;
    object_class->dispose = rlx_window_dispose;
    window_class->close_request = rlx_window_close_request;

    properties[PROP_SETTINGS] =
        g_param_spec_object("settings", NULL, NULL, G_TYPE_SETTINGS,
                            G_PARAM_READWRITE | G_PARAM_CONSTRUCT_ONLY | G_PARAM_STATIC_STRINGS);
    g_object_class_install_properties(object_class, N_PROPS, properties);

    gtk_widget_class_set_template_from_resource(widget_class, "/org/rlx/Studio/rlx-window.ui");
    gtk_widget_class_bind_template_child(widget_class, RlxWindow, stack);

    gtk_widget_class_install_action(widget_class, "win.view", "s", rlx_window_view_action);
}

static void rlx_window_init(RlxWindow *self)
{
    gtk_widget_init_template(GTK_WIDGET(self));
}

RlxWindow *rlx_window_new(RlxApplication *app, GSettings *settings)
{
    g_return_val_if_fail(RLX_IS_APPLICATION(app), NULL);
    g_return_val_if_fail(settings == NULL || G_IS_SETTINGS(settings), NULL);
    return g_object_new(RLX_TYPE_WINDOW, "application", app, "settings", settings, NULL);
}
