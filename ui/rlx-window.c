#include "rlx-window.h"

#include "rlx-chat-pane.h"
#include "rlx-engine.h"
#include "rlx-imagine-pane.h"
#include "rlx-segment-pane.h"
#include "rlx-transcribe-pane.h"

#include <glib/gi18n.h>
#include <string.h>

struct _RlxWindow {
    AdwApplicationWindow parent_instance;

    AdwViewStack *stack;
    AdwToastOverlay *toasts;
    RlxChatPane *chat_pane;
    RlxTranscribePane *transcribe_pane;
    RlxSegmentPane *segment_pane;
    RlxImaginePane *imagine_pane;
    GtkDropDown *device_dropdown;
    GtkDrawingArea *memory_bar, *memory_mini;
    GtkLabel *memory_used;
    AdwViewSwitcherTitle *switcher_title;
    GtkWidget *memory_button;
    GtkLabel *memory_title;
    GtkGrid *memory_grid;
    GtkSpinButton *budget_spin;
    GSettings *settings; /* nullable */

    RlxEngine *engine;
    GPtrArray *devices; /* RlxDevice */
    RlxMemoryInfo mem;  /* shown: the visible page's */
    /* each page's model: the Chat page's LLM, the Transcribe page's Whisper */
    RlxMemoryInfo mem_chat, mem_transcribe, mem_segment, mem_imagine;
    GtkLabel *mem_labels[4];
    GtkLabel *mem_names[4];
    GtkLabel *layers_label; /* "3 of 28 layers on the GPU…", GPU devices only */
    char *device_id;        /* the device setting the window last applied */
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

/* Window actions in the action map (so also on D-Bus, which the UI tests use). */
static void show_memory(GSimpleAction *a, GVariant *p, gpointer data)
{
    RlxWindow *self = data;
    gtk_menu_button_popup(GTK_MENU_BUTTON(self->memory_button));
}

static void show_sampling(GSimpleAction *a, GVariant *p, gpointer data)
{
    RlxWindow *self = data;
    adw_view_stack_set_visible_child_name(self->stack, "chat");
    rlx_chat_pane_show_sampling(self->chat_pane);
}

static const GActionEntry win_actions[] = {
    {.name = "show-memory", .activate = show_memory},
    {.name = "show-sampling", .activate = show_sampling},
};

static void rlx_window_view_action(GtkWidget *widget, const char *action_name, GVariant *param)
{
    RlxWindow *self = RLX_WINDOW(widget);
    const char *name = g_variant_get_string(param, NULL);
    if (adw_view_stack_get_child_by_name(self->stack, name))
        adw_view_stack_set_visible_child_name(self->stack, name);
    else
        g_warning("win.view: no page named “%s”", name);
}

/* ---- devices and memory ------------------------------------------------ */

static const double mem_colors[3][3] = {
    {0.21, 0.52, 0.89}, /* weights: blue */
    {0.20, 0.82, 0.48}, /* KV cache: green */
    {1.00, 0.47, 0.00}, /* activations: orange */
};

static uint64_t memory_capacity(RlxWindow *self)
{
    const RlxMemoryInfo *m = &self->mem;
    uint64_t used = m->weights + m->kv_cache + m->activations;
    uint64_t cap = m->budget ? m->budget : m->device_total;
    if (!cap) {
        guint i = gtk_drop_down_get_selected(self->device_dropdown);
        if (self->devices && i < self->devices->len)
            cap = ((RlxDevice *)g_ptr_array_index(self->devices, i))->total_memory;
    }
    return MAX(cap, used);
}

/* The three coloured parts: weights, KV cache and activations, or a model
 * of parts' own (the Imagine page's text encoder, transformer and VAE). */
static void memory_parts(const RlxMemoryInfo *m, uint64_t parts[3])
{
    if (m->n_parts > 0) {
        for (int i = 0; i < 3; i++)
            parts[i] = i < m->n_parts ? m->parts[i] : 0;
        return;
    }
    parts[0] = m->weights;
    parts[1] = m->kv_cache;
    parts[2] = m->activations;
}

static void draw_memory(GtkDrawingArea *area, cairo_t *cr, int width, int height, gpointer data)
{
    RlxWindow *self = data;
    uint64_t parts[3];
    memory_parts(&self->mem, parts);
    uint64_t cap = memory_capacity(self);
    GdkRGBA fg;
    gtk_style_context_get_color(gtk_widget_get_style_context(GTK_WIDGET(area)), &fg);
    cairo_set_source_rgba(cr, fg.red, fg.green, fg.blue, 0.15);
    cairo_rectangle(cr, 0, 0, width, height);
    cairo_fill(cr);
    double x = 0;
    for (int i = 0; i < 3 && cap; i++) {
        double w = (double)width * (double)parts[i] / (double)cap;
        /* Even a small part stays visible. */
        if (parts[i] && w < 2)
            w = 2;
        cairo_set_source_rgb(cr, mem_colors[i][0], mem_colors[i][1], mem_colors[i][2]);
        cairo_rectangle(cr, x, 0, w, height);
        cairo_fill(cr);
        x += w;
    }
}

static void fmt_bytes(uint64_t b, char *buf, size_t cap)
{
    g_autofree char *s = g_format_size_full(b, G_FORMAT_SIZE_IEC_UNITS);
    g_strlcpy(buf, s, cap);
}

static gboolean narrow(RlxWindow *self);

static void update_memory_labels(RlxWindow *self)
{
    const RlxMemoryInfo *m = &self->mem;
    uint64_t used = m->weights + m->kv_cache + m->activations;
    uint64_t cap = memory_capacity(self);
    uint64_t p3[3];
    memory_parts(m, p3);
    uint64_t vals[4] = {p3[0], p3[1], p3[2], cap > used ? cap - used : 0};
    const char *names[3] = {_("Weights"), _("KV cache"), _("Activations")};
    const char *part_names[3] = {_("Text encoder"), _("Transformer"), _("VAE")};
    for (int i = 0; i < 3; i++)
        gtk_label_set_text(self->mem_names[i], m->n_parts ? part_names[i] : names[i]);
    for (int i = 0; i < 4; i++) {
        char buf[64];
        fmt_bytes(vals[i], buf, sizeof buf);
        gtk_label_set_text(self->mem_labels[i], buf);
    }
    char a[64], b[64];
    fmt_bytes(used, a, sizeof a);
    fmt_bytes(cap, b, sizeof b);
    /* Translators: memory in use of the budget, e.g. "1.2 GiB of 8.0 GiB" */
    g_autofree char *tip = g_strdup_printf(_("Memory: %s of %s"), a, b);
    gtk_widget_set_tooltip_text(self->memory_button, tip);
    gtk_widget_queue_draw(GTK_WIDGET(self->memory_bar));
    gtk_widget_queue_draw(GTK_WIDGET(self->memory_mini));
    /* At a glance beside the device: what the model takes there. */
    gtk_label_set_text(self->memory_used, a);
    gtk_widget_set_visible(GTK_WIDGET(self->memory_used), used > 0 && !narrow(self));

    gboolean show = m->on_gpu && m->n_layers > 0;
    gtk_widget_set_visible(GTK_WIDGET(self->layers_label), show);
    if (!show)
        return;
    g_autofree char *text = NULL;
    if (m->n_gpu_layers >= m->n_layers) {
        /* Translators: where the model runs; %d is its number of layers */
        text = g_strdup_printf(
            ngettext("All %d layer on the GPU", "All %d layers on the GPU", m->n_layers),
            m->n_layers);
    } else {
        char cpu[64];
        fmt_bytes(m->cpu_bytes, cpu, sizeof cpu);
        /* Translators: partial offload: "3 of 28 layers on the GPU", then the
         * memory the other layers take on the CPU */
        text = g_strdup_printf(ngettext("%d of %d layer on the GPU, the rest on the CPU (%s)",
                                        "%d of %d layers on the GPU, the rest on the CPU (%s)",
                                        m->n_layers),
                               m->n_gpu_layers, m->n_layers, cpu);
    }
    gtk_label_set_text(self->layers_label, text);
}

/* Narrow (a phone, half a laptop screen): the header bar has room for the
 * memory icon only, not its bar and figure. */
#define NARROW_WIDTH 600

static gboolean narrow(RlxWindow *self)
{
    int w = 0, h = 0;
    gtk_window_get_default_size(GTK_WINDOW(self), &w, &h); /* 4.8 needs both */
    return w > 0 && w < NARROW_WIDTH;
}

static void width_class_changed(GObject *o, GParamSpec *ps, RlxWindow *self)
{
    gboolean n = narrow(self);
    gtk_widget_set_visible(GTK_WIDGET(self->memory_mini), !n);
    gtk_widget_set_visible(GTK_WIDGET(self->memory_used),
                           !n && self->mem.weights + self->mem.kv_cache + self->mem.activations);
}

/* The window is named after the model (general.name, else its file name),
 * in the window list as in the header bar. */
static void on_model_loaded(RlxEngine *e, RlxWindow *self)
{
    const RlxModelInfo *i = rlx_engine_get_model_info(e);
    /* Translators: the window title: the model's name, then the app's */
    g_autofree char *title = g_strdup_printf(_("%s — RLX Studio"), i->name);
    gtk_window_set_title(GTK_WINDOW(self), title);
    adw_view_switcher_title_set_subtitle(self->switcher_title, i->name);
}

/* The header bar's memory is the visible page's model's: the Transcribe
 * page's Whisper model there, the Segment page's SAM model there, the chat
 * model elsewhere. */
static void show_page_memory(RlxWindow *self)
{
    const char *page = adw_view_stack_get_visible_child_name(self->stack);
    self->mem = g_strcmp0(page, "transcribe") == 0 ? self->mem_transcribe
                : g_strcmp0(page, "segment") == 0  ? self->mem_segment
                : g_strcmp0(page, "imagine") == 0  ? self->mem_imagine
                                                   : self->mem_chat;
    update_memory_labels(self);
}

static gboolean memory_same(const RlxMemoryInfo *a, const RlxMemoryInfo *b)
{
    return a->weights == b->weights && a->kv_cache == b->kv_cache &&
           a->activations == b->activations && a->budget == b->budget &&
           a->device_total == b->device_total && !a->on_gpu == !b->on_gpu &&
           a->n_gpu_layers == b->n_gpu_layers && a->n_layers == b->n_layers &&
           a->cpu_bytes == b->cpu_bytes && a->n_parts == b->n_parts &&
           memcmp(a->parts, b->parts, sizeof a->parts) == 0;
}

/* A page's figures, as its worker reports them (a few times a second while
 * it runs). The same figures again change nothing on screen, so they draw
 * nothing: while a reply streams on a slow renderer, each redraw of the
 * header is a frame of its own, taken from the engine's cores. */
static void page_memory(RlxWindow *self, RlxMemoryInfo *slot, const RlxMemoryInfo *m)
{
    if (memory_same(slot, m))
        return;
    *slot = *m;
    show_page_memory(self);
}

static void on_memory(RlxEngine *e, const RlxMemoryInfo *m, RlxWindow *self)
{
    (void)e;
    page_memory(self, &self->mem_chat, m);
}

static void on_transcribe_memory(RlxTranscribePane *p, const RlxMemoryInfo *m, RlxWindow *self)
{
    (void)p;
    page_memory(self, &self->mem_transcribe, m);
}

static void on_segment_memory(RlxSegmentPane *p, const RlxMemoryInfo *m, RlxWindow *self)
{
    (void)p;
    page_memory(self, &self->mem_segment, m);
}

static void on_imagine_memory(RlxImaginePane *p, const RlxMemoryInfo *m, RlxWindow *self)
{
    (void)p;
    page_memory(self, &self->mem_imagine, m);
}

static void on_page_changed(AdwViewStack *stack, GParamSpec *pspec, RlxWindow *self)
{
    (void)stack;
    (void)pspec;
    show_page_memory(self);
    /* the shortcuts window opens on the visible page's section */
    GtkShortcutsWindow *help =
        gtk_application_window_get_help_overlay(GTK_APPLICATION_WINDOW(self));
    const char *page = adw_view_stack_get_visible_child_name(self->stack);
    if (help && page)
        g_object_set(help, "section-name", g_strcmp0(page, "chat") == 0 ? "shortcuts" : "jobs",
                     NULL);
}

static void build_memory_grid(RlxWindow *self)
{
    const char *names[4] = {_("Weights"), _("KV cache"), _("Activations"), _("Free")};
    for (int i = 0; i < 4; i++) {
        GtkWidget *swatch = gtk_label_new("■");
        if (i < 3) {
            g_autofree char *markup = g_strdup_printf(
                "<span foreground=\"#%02x%02x%02x\">■</span>", (int)(mem_colors[i][0] * 255),
                (int)(mem_colors[i][1] * 255), (int)(mem_colors[i][2] * 255));
            gtk_label_set_markup(GTK_LABEL(swatch), markup);
        } else {
            gtk_widget_add_css_class(swatch, "dim-label");
        }
        GtkWidget *name = gtk_label_new(names[i]);
        self->mem_names[i] = GTK_LABEL(name);
        gtk_label_set_xalign(GTK_LABEL(name), 0);
        gtk_widget_set_hexpand(name, TRUE);
        char zero[64];
        fmt_bytes(0, zero, sizeof zero);
        GtkWidget *value = gtk_label_new(zero);
        gtk_label_set_xalign(GTK_LABEL(value), 1);
        gtk_widget_add_css_class(value, "numeric");
        self->mem_labels[i] = GTK_LABEL(value);
        gtk_grid_attach(self->memory_grid, swatch, 0, i, 1, 1);
        gtk_grid_attach(self->memory_grid, name, 1, i, 1, 1);
        gtk_grid_attach(self->memory_grid, value, 2, i, 1, 1);
    }
    GtkWidget *layers = gtk_label_new(NULL);
    gtk_label_set_xalign(GTK_LABEL(layers), 0);
    gtk_label_set_wrap(GTK_LABEL(layers), TRUE);
    gtk_label_set_max_width_chars(GTK_LABEL(layers), 32);
    gtk_widget_add_css_class(layers, "dim-label");
    gtk_widget_set_margin_top(layers, 6);
    gtk_widget_set_visible(layers, FALSE);
    self->layers_label = GTK_LABEL(layers);
    gtk_grid_attach(self->memory_grid, layers, 0, 4, 3, 1);
}

static void device_selected(GtkDropDown *dd, GParamSpec *ps, RlxWindow *self)
{
    guint i = gtk_drop_down_get_selected(dd);
    if (!self->devices || i >= self->devices->len || !self->settings)
        return;
    RlxDevice *d = g_ptr_array_index(self->devices, i);
    g_autofree char *old = g_settings_get_string(self->settings, "device");
    const char *cur = *old ? old : "cpu";
    if (g_strcmp0(cur, d->id) == 0)
        return;
    /* the setting's "changed" reloads the model (device_setting_changed) */
    g_settings_set_string(self->settings, "device", d->id);
    update_memory_labels(self);
}

/* The device setting changed, here or in Preferences: select it in the
 * header bar and load the chat pane's model (if one was opened) again on it,
 * with progress in the pane. */
static void device_setting_changed(GSettings *s, const char *key, RlxWindow *self)
{
    g_autofree char *id = g_settings_get_string(s, "device");
    const char *dev = *id ? id : "cpu";
    for (guint i = 0; self->devices && i < self->devices->len; i++) {
        RlxDevice *d = g_ptr_array_index(self->devices, i);
        if (g_strcmp0(d->id, dev) == 0) {
            gtk_drop_down_set_selected(self->device_dropdown, i);
            break;
        }
    }
    gboolean first = self->device_id == NULL;
    if (!first && g_strcmp0(self->device_id, dev) == 0)
        return;
    g_free(self->device_id);
    self->device_id = g_strdup(dev);
    /* also after a failed load: the model may fit the new device */
    if (!first)
        rlx_chat_pane_reload_model(self->chat_pane);
}

static void setup_label_item(GtkSignalListItemFactory *f, GtkListItem *item, gpointer compact)
{
    GtkWidget *label = gtk_label_new(NULL);
    gtk_label_set_xalign(GTK_LABEL(label), 0);
    if (compact) {
        gtk_label_set_ellipsize(GTK_LABEL(label), PANGO_ELLIPSIZE_END);
        gtk_label_set_width_chars(GTK_LABEL(label), 4);
        gtk_label_set_max_width_chars(GTK_LABEL(label), 14);
    }
    gtk_list_item_set_child(item, label);
}

static void bind_label_item(GtkSignalListItemFactory *f, GtkListItem *item, gpointer data)
{
    GtkStringObject *s = gtk_list_item_get_item(item);
    gtk_label_set_text(GTK_LABEL(gtk_list_item_get_child(item)), gtk_string_object_get_string(s));
}

/* The button shows a short name ("CPU", "vulkan:0"); the list the full one. */
static void bind_short_item(GtkSignalListItemFactory *f, GtkListItem *item, gpointer data)
{
    RlxWindow *self = data;
    guint i = gtk_list_item_get_position(item);
    if (!self->devices || i >= self->devices->len)
        return;
    RlxDevice *d = g_ptr_array_index(self->devices, i);
    const char *short_name = g_strcmp0(d->id, "cpu") == 0 ? _("CPU") : d->id;
    gtk_label_set_text(GTK_LABEL(gtk_list_item_get_child(item)), short_name);
    g_autofree char *tip = d->features && *d->features
                               ? g_strdup_printf("%s\n%s", d->label, d->features)
                               : g_strdup(d->label);
    gtk_widget_set_tooltip_text(GTK_WIDGET(self->device_dropdown), tip);
    /* Translators: the memory popover's title; %s is a device, "CPU" or "vulkan:0" */
    g_autofree char *title = g_strdup_printf(_("Memory on %s"), short_name);
    gtk_label_set_text(self->memory_title, title);
}

static GtkListItemFactory *label_factory(RlxWindow *self, gboolean compact)
{
    GtkListItemFactory *f = gtk_signal_list_item_factory_new();
    g_signal_connect(f, "setup", G_CALLBACK(setup_label_item), GINT_TO_POINTER(compact));
    if (compact)
        g_signal_connect(f, "bind", G_CALLBACK(bind_short_item), self);
    else
        g_signal_connect(f, "bind", G_CALLBACK(bind_label_item), NULL);
    return f;
}

static void setup_devices(RlxWindow *self)
{
    self->devices = rlx_engine_list_devices();
    GtkStringList *names = gtk_string_list_new(NULL);
    for (guint i = 0; i < self->devices->len; i++)
        gtk_string_list_append(names, ((RlxDevice *)g_ptr_array_index(self->devices, i))->label);
    g_autoptr(GtkListItemFactory) compact = label_factory(self, TRUE);
    g_autoptr(GtkListItemFactory) full = label_factory(self, FALSE);
    gtk_drop_down_set_factory(self->device_dropdown, compact);
    gtk_drop_down_set_list_factory(self->device_dropdown, full);
    gtk_drop_down_set_model(self->device_dropdown, G_LIST_MODEL(names));
    g_object_unref(names);
    if (self->settings) {
        device_setting_changed(self->settings, "device", self);
        g_signal_connect_object(self->settings, "changed::device",
                                G_CALLBACK(device_setting_changed), self, 0);
        g_settings_bind(self->settings, "memory-budget-mib", self->budget_spin, "value",
                        G_SETTINGS_BIND_DEFAULT);
    }
    g_signal_connect(self->device_dropdown, "notify::selected", G_CALLBACK(device_selected), self);
}

/* The popover opens with the keyboard focus on itself, not in the budget's
 * spin button (GTK's first focusable child), where the first digit typed
 * would replace the selected budget. Tab still reaches the spin button. */
static void memory_popover_shown(GtkWidget *popover, RlxWindow *self)
{
    gtk_widget_grab_focus(popover);
}

/* ---- drag and drop -------------------------------------------------------- */

static gboolean on_drop(GtkDropTarget *target, const GValue *value, double x, double y,
                        RlxWindow *self)
{
    if (!G_VALUE_HOLDS(value, G_TYPE_FILE))
        return FALSE;
    rlx_window_open_file(self, g_value_get_object(value));
    return TRUE;
}

void rlx_window_open_file(RlxWindow *self, GFile *file)
{
    g_return_if_fail(RLX_IS_WINDOW(self));
    /* A picture or a SAM checkpoint goes to the Segment page, a recording or
     * a Whisper model to the Transcribe page (each page also takes its own
     * drops), anything else to the Chat page as a model. */
    if (rlx_segment_pane_wants_file(file)) {
        adw_view_stack_set_visible_child_name(self->stack, "segment");
        rlx_segment_pane_open(self->segment_pane, file);
    } else if (rlx_transcribe_pane_wants_file(file)) {
        adw_view_stack_set_visible_child_name(self->stack, "transcribe");
        rlx_transcribe_pane_open(self->transcribe_pane, file);
    } else {
        rlx_window_open_model(self, file);
    }
}

void rlx_window_open_model(RlxWindow *self, GFile *file)
{
    g_return_if_fail(RLX_IS_WINDOW(self));
    adw_view_stack_set_visible_child_name(self->stack, "chat");
    rlx_chat_pane_open_model(self->chat_pane, file);
}

static void rlx_window_constructed(GObject *object)
{
    RlxWindow *self = RLX_WINDOW(object);
    G_OBJECT_CLASS(rlx_window_parent_class)->constructed(object);
    rlx_window_restore_state(self);
    width_class_changed(object, NULL, self);
    setup_devices(self);
    rlx_chat_pane_setup(self->chat_pane, self->engine, self->settings);
    rlx_transcribe_pane_setup(self->transcribe_pane, self->settings);
    rlx_segment_pane_setup(self->segment_pane, self->settings);
    rlx_imagine_pane_setup(self->imagine_pane, self->settings);
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
    gtk_widget_dispose_template(GTK_WIDGET(object), RLX_TYPE_WINDOW);
    /* After the pane let go: the last reference joins the engine thread. */
    if (self->engine)
        g_signal_handlers_disconnect_by_data(self->engine, self);
    g_clear_object(&self->engine);
    g_clear_pointer(&self->devices, g_ptr_array_unref);
    g_clear_pointer(&self->device_id, g_free);
    g_clear_object(&self->settings);
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
    gtk_widget_class_bind_template_child(widget_class, RlxWindow, toasts);
    gtk_widget_class_bind_template_child(widget_class, RlxWindow, chat_pane);
    gtk_widget_class_bind_template_child(widget_class, RlxWindow, transcribe_pane);
    gtk_widget_class_bind_template_child(widget_class, RlxWindow, segment_pane);
    gtk_widget_class_bind_template_child(widget_class, RlxWindow, imagine_pane);
    gtk_widget_class_bind_template_child(widget_class, RlxWindow, device_dropdown);
    gtk_widget_class_bind_template_child(widget_class, RlxWindow, memory_bar);
    gtk_widget_class_bind_template_child(widget_class, RlxWindow, memory_mini);
    gtk_widget_class_bind_template_child(widget_class, RlxWindow, memory_used);
    gtk_widget_class_bind_template_child(widget_class, RlxWindow, switcher_title);
    gtk_widget_class_bind_template_child(widget_class, RlxWindow, memory_button);
    gtk_widget_class_bind_template_child(widget_class, RlxWindow, memory_title);
    gtk_widget_class_bind_template_child(widget_class, RlxWindow, memory_grid);
    gtk_widget_class_bind_template_child(widget_class, RlxWindow, budget_spin);

    gtk_widget_class_install_action(widget_class, "win.view", "s", rlx_window_view_action);
}

static void rlx_window_init(RlxWindow *self)
{
    g_type_ensure(RLX_TYPE_CHAT_PANE);
    g_type_ensure(RLX_TYPE_TRANSCRIBE_PANE);
    g_type_ensure(RLX_TYPE_SEGMENT_PANE);
    g_type_ensure(RLX_TYPE_IMAGINE_PANE);
    gtk_widget_init_template(GTK_WIDGET(self));
    self->engine = rlx_engine_new();
    g_signal_connect(self->engine, "memory", G_CALLBACK(on_memory), self);
    g_signal_connect(self->transcribe_pane, "memory", G_CALLBACK(on_transcribe_memory), self);
    g_signal_connect(self->segment_pane, "memory", G_CALLBACK(on_segment_memory), self);
    g_signal_connect(self->imagine_pane, "memory", G_CALLBACK(on_imagine_memory), self);
    g_signal_connect(self->stack, "notify::visible-child-name", G_CALLBACK(on_page_changed), self);
    gtk_drawing_area_set_draw_func(self->memory_bar, draw_memory, self, NULL);
    gtk_drawing_area_set_draw_func(self->memory_mini, draw_memory, self, NULL);
    g_signal_connect(self->engine, "model-loaded", G_CALLBACK(on_model_loaded), self);
    g_signal_connect(self, "notify::default-width", G_CALLBACK(width_class_changed), self);
    build_memory_grid(self);
    GtkPopover *memory_popover = gtk_menu_button_get_popover(GTK_MENU_BUTTON(self->memory_button));
    gtk_widget_set_focusable(GTK_WIDGET(memory_popover), TRUE);
    g_signal_connect_after(memory_popover, "show", G_CALLBACK(memory_popover_shown), self);

    g_action_map_add_action_entries(G_ACTION_MAP(self), win_actions, G_N_ELEMENTS(win_actions),
                                    self);

    GtkDropTarget *drop = gtk_drop_target_new(G_TYPE_FILE, GDK_ACTION_COPY);
    g_signal_connect(drop, "drop", G_CALLBACK(on_drop), self);
    gtk_widget_add_controller(GTK_WIDGET(self), GTK_EVENT_CONTROLLER(drop));
}

void rlx_window_toast(RlxWindow *self, const char *text)
{
    g_return_if_fail(RLX_IS_WINDOW(self));
    adw_toast_overlay_add_toast(self->toasts, adw_toast_new(text));
}

RlxWindow *rlx_window_new(RlxApplication *app, GSettings *settings)
{
    g_return_val_if_fail(RLX_IS_APPLICATION(app), NULL);
    g_return_val_if_fail(settings == NULL || G_IS_SETTINGS(settings), NULL);
    return g_object_new(RLX_TYPE_WINDOW, "application", app, "settings", settings, NULL);
}
