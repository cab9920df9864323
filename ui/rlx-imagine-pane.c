#include "rlx-imagine-pane.h"

#include "rlx-gallery.h"
#include "rlx-imaginer.h"
#include "rlx-toasts.h"

#include "backends/base/status.h"

#include <errno.h>
#include <string.h>

#include <glib/gstdio.h>

#include <glib/gi18n.h>

#define THUMB       88  /* px, a gallery thumbnail's side */
#define MAX_GALLERY 300 /* pictures shown; older ones stay on disk */
#define SEED_MAX    4294967295.0
#define PANEL_WIDTH 300

typedef struct {
    int w, h;
} Preset;

/* Square and the common photo shapes, all multiples of 16. */
static const Preset presets[] = {
    {512, 512}, {768, 768}, {1024, 1024}, {1024, 768}, {768, 1024}, {1344, 768}, {768, 1344},
};

struct _RlxImaginePane {
    GtkWidget parent_instance;

    GtkWidget *box; /* the only child */
    AdwToastOverlay *toast_overlay;
    RlxToasts toasts;

    /* the form */
    GtkButton *model_button;
    GtkTextView *prompt, *negative;
    GtkWidget *negative_box;
    GtkDropDown *size_preset;
    GtkSpinButton *width, *height, *steps, *seed, *guidance;
    GtkCheckButton *keep_seed;
    GtkWidget *guidance_row;
    GtkWidget *lora_row; /* shown with a LoRA */
    GtkLabel *lora_label;
    GtkSpinButton *lora_strength;
    guint lora_wait; /* the strength is written (and the model opened again) when it rests */
    GtkWidget *start_box;
    GtkPicture *start_picture;
    GtkLabel *start_label;
    GtkCheckButton *as_reference;
    GtkWidget *strength_row;
    GtkScale *strength;
    GtkButton *generate_button;
    GtkWidget *stop_button;

    /* the picture */
    GtkStack *stack;
    AdwStatusPage *empty_page, *error_page;
    GtkPicture *picture;
    GtkLabel *details;
    GtkWidget *details_bar;
    GtkLabel *status_label;
    GtkProgressBar *progress;
    GtkFlowBox *gallery;
    GtkWidget *gallery_scroll;

    GSettings *settings; /* nullable */
    RlxImaginer *imaginer;
    char *model;      /* the chosen model, or NULL */
    char *model_name; /* once loaded */
    gboolean model_loading, model_failed;
    char *start_path;         /* the dropped picture, or NULL */
    RlxGalleryItem *shown;    /* the gallery's picture shown, or NULL (borrowed from its child) */
    RlxImagineSettings *last; /* the last request, for Retry */
    char *retry_what;         /* "model" or "generate": what Retry does */
    gboolean running;
    gboolean syncing_size; /* the preset and the spin buttons follow each other */
    gint64 run_started_us;
    int step, n_steps;
    double seconds_left;
    gint64 left_at_us; /* when seconds_left was reported */
    const char *phase; /* "prompt", "steps", "decode" */
    guint tick;
    guint focus_idle;
    GtkWidget *main_page;   /* the picture's side of the leaflet */
    GtkWidget *back_button; /* to the form, when folded */
    GQueue thumbs_todo;     /* GtkPicture * (a reference each) still to load */
    guint thumbs_idle;
    char *variant;            /* the open model's, whose defaults the form has */
    GtkWidget *gallery_stack; /* the gallery, or a line saying it is empty */
};

G_DEFINE_FINAL_TYPE(RlxImaginePane, rlx_imagine_pane, GTK_TYPE_WIDGET)

enum { SIG_MEMORY, N_SIGNALS };
static guint signals[N_SIGNALS];

static void update_state(RlxImaginePane *self);
static void show_item(RlxImaginePane *self, RlxGalleryItem *it, GdkTexture *t);

static void toast(RlxImaginePane *self, const char *text)
{
    rlx_toasts_show(&self->toasts, text, ADW_TOAST_PRIORITY_NORMAL, NULL, NULL);
}

static void toast_error(RlxImaginePane *self, const char *text)
{
    rlx_toasts_show(&self->toasts, text, ADW_TOAST_PRIORITY_HIGH, NULL, NULL);
}

static char *text_of(GtkTextView *v)
{
    GtkTextBuffer *b = gtk_text_view_get_buffer(v);
    GtkTextIter s, e;
    gtk_text_buffer_get_bounds(b, &s, &e);
    char *t = gtk_text_buffer_get_text(b, &s, &e, FALSE);
    return g_strstrip(t);
}

static void set_text(GtkTextView *v, const char *t)
{
    gtk_text_buffer_set_text(gtk_text_view_get_buffer(v), t ? t : "", -1);
}

/* ---- the gallery on disk ------------------------------------------------------- */

/* Thumbnails load a few at a time from an idle, each scaled down as it is
 * decoded: a gallery of hundreds of 1024 x 1024 pictures would otherwise
 * hold gigabytes of textures and keep the window from showing. */
static gboolean load_thumbs(gpointer data)
{
    RlxImaginePane *self = data;
    GtkPicture *pic = g_queue_pop_head(&self->thumbs_todo);
    if (pic && gtk_widget_get_parent(GTK_WIDGET(pic))) {
        const char *png = g_object_get_data(G_OBJECT(pic), "rlx-png");
        GdkPixbuf *pb = gdk_pixbuf_new_from_file_at_scale(png, THUMB * 2, THUMB * 2, TRUE, NULL);
        if (pb) {
            GdkTexture *t = gdk_texture_new_for_pixbuf(pb);
            gtk_picture_set_paintable(pic, GDK_PAINTABLE(t));
            g_object_unref(t);
            g_object_unref(pb);
        }
    }
    g_clear_object(&pic);
    if (!g_queue_is_empty(&self->thumbs_todo))
        return G_SOURCE_CONTINUE;
    self->thumbs_idle = 0;
    return G_SOURCE_REMOVE;
}

static GtkWidget *thumb_new(RlxImaginePane *self, RlxGalleryItem *it, GdkTexture *t)
{
    GtkWidget *pic = gtk_picture_new();
    if (t) {
        gtk_picture_set_paintable(GTK_PICTURE(pic), GDK_PAINTABLE(t));
    } else {
        g_object_set_data_full(G_OBJECT(pic), "rlx-png", g_strdup(it->png), g_free);
        g_queue_push_tail(&self->thumbs_todo, g_object_ref(pic));
        if (!self->thumbs_idle)
            self->thumbs_idle = g_idle_add_full(G_PRIORITY_LOW, load_thumbs, self, NULL);
    }
    gtk_picture_set_can_shrink(GTK_PICTURE(pic), TRUE);
    gtk_picture_set_content_fit(GTK_PICTURE(pic), GTK_CONTENT_FIT_COVER);
    gtk_widget_set_size_request(pic, THUMB, THUMB);
    gtk_widget_set_tooltip_text(pic, it->s->prompt);
    gtk_widget_add_css_class(pic, "rlx-thumb");
    gtk_widget_set_margin_start(pic, 3);
    gtk_widget_set_margin_end(pic, 3);
    gtk_widget_set_margin_top(pic, 3);
    gtk_widget_set_margin_bottom(pic, 3);
    GtkWidget *child = gtk_flow_box_child_new();
    gtk_flow_box_child_set_child(GTK_FLOW_BOX_CHILD(child), pic);
    g_object_set_data_full(G_OBJECT(child), "rlx-item", it, (GDestroyNotify)rlx_gallery_item_free);
    return child;
}

static RlxGalleryItem *child_item(GtkFlowBoxChild *c)
{
    return c ? g_object_get_data(G_OBJECT(c), "rlx-item") : NULL;
}

static void load_gallery(RlxImaginePane *self)
{
    g_autofree char *dir = rlx_gallery_dir();
    GPtrArray *items = rlx_gallery_list(dir, MAX_GALLERY);
    g_ptr_array_set_free_func(items, NULL); /* the thumbnails own them */
    for (guint i = 0; i < items->len; i++)
        gtk_flow_box_append(self->gallery, thumb_new(self, items->pdata[i], NULL));
    g_debug("imagine gallery: %u pictures", items->len); /* for the UI tests */
    g_ptr_array_unref(items);
}

/* ---- showing ------------------------------------------------------------------- */

static char *describe(const RlxImagineSettings *s)
{
    GString *t = g_string_new(NULL);
    /* Translators: a picture's settings: size, steps, seed, guidance */
    g_string_append_printf(t, _("%d × %d · %d steps · seed %" G_GUINT64_FORMAT " · guidance %.1f"),
                           s->width, s->height, s->steps, s->seed, s->guidance);
    if (s->init)
        g_string_append_printf(t, _(" · from a picture, strength %.2f"), s->strength);
    if (s->ref)
        g_string_append(t, _(" · edited from a reference"));
    if (s->seconds > 0)
        g_string_append_printf(t, _(" · %.1f s"), s->seconds);
    if (s->model && *s->model)
        g_string_append_printf(t, " · %s", s->model);
    return g_string_free(t, FALSE);
}

static void show_item(RlxImaginePane *self, RlxGalleryItem *it, GdkTexture *t)
{
    self->shown = it;
    if (!it) {
        gtk_picture_set_paintable(self->picture, NULL);
        gtk_widget_set_visible(self->details_bar, FALSE);
        update_state(self);
        return;
    }
    if (t)
        gtk_picture_set_paintable(self->picture, GDK_PAINTABLE(t));
    else
        gtk_picture_set_filename(self->picture, it->png);
    g_autofree char *d = describe(it->s);
    g_autofree char *text = g_strdup_printf("%s\n%s", it->s->prompt, d);
    gtk_label_set_text(self->details, text);
    gtk_widget_set_tooltip_text(GTK_WIDGET(self->details), text);
    gtk_widget_set_visible(self->details_bar, TRUE);
    gtk_stack_set_visible_child_name(self->stack, "picture");
    update_state(self);
}

static void show_error(RlxImaginePane *self, const char *title, const char *message,
                       const char *retry)
{
    adw_status_page_set_title(self->error_page, title);
    /* the engine's sentences start in lower case, to follow a colon; here
     * it stands alone */
    g_autofree char *m = g_strdup(message ? message : "");
    if (g_ascii_islower(m[0]))
        m[0] = g_ascii_toupper(m[0]);
    adw_status_page_set_description(self->error_page, m);
    g_free(self->retry_what);
    g_free(self->variant);
    self->retry_what = g_strdup(retry);
    gtk_stack_set_visible_child_name(self->stack, "error");
    update_state(self);
}

/* The page without a run: the shown picture, else the empty page. */
static void show_rest(RlxImaginePane *self)
{
    if (self->shown) {
        show_item(self, self->shown, NULL);
    } else {
        gtk_picture_set_paintable(self->picture, NULL);
        gtk_stack_set_visible_child_name(self->stack, "empty");
    }
}

/* ---- the run's progress ------------------------------------------------------------ */

static char *clock_text(double s)
{
    int t = (int)(s + 0.5);
    return t >= 3600 ? g_strdup_printf("%d:%02d:%02d", t / 3600, t / 60 % 60, t % 60)
                     : g_strdup_printf("%d:%02d", t / 60, t % 60);
}

static void update_progress_text(RlxImaginePane *self)
{
    if (!self->running)
        return;
    double el = (double)(g_get_monotonic_time() - self->run_started_us) / 1e6;
    g_autofree char *elapsed = clock_text(el);
    g_autofree char *t = NULL;
    if (g_strcmp0(self->phase, "decode") == 0) {
        /* Translators: the steps are done; the full-size picture is being made */
        t = g_strdup_printf(_("Decoding the picture · %s"), elapsed);
    } else if (self->step == 0) {
        t = g_strdup_printf(_("Reading the prompt · %s"), elapsed);
    } else {
        double left = self->seconds_left;
        if (left >= 0)
            left = MAX(0, left - (double)(g_get_monotonic_time() - self->left_at_us) / 1e6);
        g_autofree char *lt = NULL;
        if (left >= 0) {
            int l = (int)(left + 0.999);
            lt = l >= 90 ? g_strdup_printf(_("about %d min left"), (l + 30) / 60)
                         : g_strdup_printf(ngettext("about %d s left", "about %d s left", l), l);
        }
        /* Translators: "Step 3 of 20 · 0:12 · about 40 s left" */
        t = lt ? g_strdup_printf(_("Step %d of %d · %s · %s"), self->step, self->n_steps, elapsed,
                                 lt)
               : g_strdup_printf(_("Step %d of %d · %s"), self->step, self->n_steps, elapsed);
    }
    gtk_label_set_text(self->status_label, t);
}

static gboolean tick(gpointer data)
{
    RlxImaginePane *self = data;
    if (self->step == 0 || g_strcmp0(self->phase, "decode") == 0)
        gtk_progress_bar_pulse(self->progress);
    update_progress_text(self);
    return G_SOURCE_CONTINUE;
}

static void set_running(RlxImaginePane *self, gboolean running)
{
    self->running = running;
    gtk_widget_set_visible(GTK_WIDGET(self->progress), running);
    if (running && !self->tick) {
        self->run_started_us = g_get_monotonic_time();
        self->tick = g_timeout_add(250, tick, self);
    } else if (!running) {
        g_clear_handle_id(&self->tick, g_source_remove);
        gtk_progress_bar_set_fraction(self->progress, 0);
    }
    update_state(self);
}

/* A short fingerprint of a picture, for the UI tests: previews that change
 * from step to step have different ones. */
static guint32 texture_hash(GdkTexture *t)
{
    int w = gdk_texture_get_width(t), h = gdk_texture_get_height(t);
    gsize stride = (gsize)w * 4;
    guchar *px = g_try_malloc(stride * (gsize)h);
    if (!px)
        return 0;
    gdk_texture_download(t, px, stride);
    guint32 x = 2166136261u;
    for (gsize i = 0; i < stride * (gsize)h; i += 61)
        x = (x ^ px[i]) * 16777619u;
    g_free(px);
    return x;
}

/* ---- the imaginer's reports ------------------------------------------------------ */

static void on_loading(RlxImaginer *im, const char *what, double fraction, RlxImaginePane *self)
{
    if (g_strcmp0(what, "model") == 0) {
        self->model_loading = TRUE;
        self->model_failed = FALSE;
        if (!self->running)
            gtk_label_set_text(self->status_label, _("Loading the model…"));
        g_debug("imagine loading the model"); /* for the UI tests */
    } else if (g_strcmp0(what, "prompt") == 0) {
        self->phase = "prompt";
        self->step = 0;
        self->seconds_left = -1;
        set_running(self, TRUE);
        update_progress_text(self);
    } else if (g_strcmp0(what, "decode") == 0) {
        self->phase = "decode";
        update_progress_text(self);
    }
    update_state(self);
}

static void on_model_ready(RlxImaginer *im, const RlxImagineInfo *info, RlxImaginePane *self)
{
    gboolean first = self->model_name == NULL;
    self->model_loading = FALSE;
    self->model_failed = FALSE;
    g_free(self->model_name);
    self->model_name = g_strdup(info->name);
    g_autofree char *tip = g_strdup_printf("%s (%s)\n%s", info->name, info->variant, self->model);
    gtk_widget_set_tooltip_text(GTK_WIDGET(self->model_button), tip);
    /* the model's own defaults, when it is another kind of model (not when
     * the same one opens again on another device) */
    if (g_strcmp0(self->variant, info->variant) != 0) {
        gtk_spin_button_set_value(self->steps, info->default_steps);
        gtk_spin_button_set_value(self->guidance, info->default_guidance);
        g_free(self->variant);
        self->variant = g_strdup(info->variant);
    }
    if (first) {
        g_autofree char *t = g_strdup_printf(_("%s is ready"), info->name);
        toast(self, t);
    }
    if (!self->running)
        gtk_label_set_text(self->status_label, "");
    if (gtk_stack_get_visible_child_name(self->stack) &&
        g_strcmp0(gtk_stack_get_visible_child_name(self->stack), "error") == 0 &&
        g_strcmp0(self->retry_what, "model") == 0)
        show_rest(self);
    g_debug("imagine model ready: %s, %d steps, negative %d, previews %d", info->variant,
            info->default_steps, info->uses_negative, info->has_preview); /* for the UI tests */
    update_state(self);
}

static void on_note(RlxImaginer *im, const char *text, RlxImaginePane *self)
{
    toast(self, text);
}

static void on_progress(RlxImaginer *im, int step, int steps, double seconds, double left,
                        GdkTexture *preview, RlxImaginePane *self)
{
    self->phase = "steps";
    self->step = step;
    self->n_steps = steps;
    self->seconds_left = left;
    self->left_at_us = g_get_monotonic_time();
    gtk_progress_bar_set_fraction(self->progress, steps ? (double)step / steps : 0);
    if (preview) {
        gtk_picture_set_paintable(self->picture, GDK_PAINTABLE(preview));
        gtk_widget_set_visible(self->details_bar, FALSE);
        gtk_stack_set_visible_child_name(self->stack, "picture");
    }
    update_progress_text(self);
    g_debug("imagine progress: step %d of %d, %.2f s, preview %dx%d hash %08x", step, steps,
            seconds, preview ? gdk_texture_get_width(preview) : 0,
            preview ? gdk_texture_get_height(preview) : 0,
            preview ? texture_hash(preview) : 0); /* for the UI tests */
}

static void on_finished(RlxImaginer *im, GdkTexture *image, const RlxImagineSettings *s,
                        RlxImaginePane *self)
{
    if (!rlx_imaginer_is_busy(self->imaginer))
        set_running(self, FALSE);
    RlxGalleryItem *it = g_new0(RlxGalleryItem, 1);
    it->s = rlx_imagine_settings_copy(s);
    it->time = g_get_real_time() / G_USEC_PER_SEC;
    if (s->out_png) {
        it->png = g_strdup(s->out_png);
        GError *e = NULL;
        if (!rlx_gallery_write_sidecar(it->png, s, it->time, &it->json, &e)) {
            g_autofree char *t = g_strdup_printf(_("Cannot keep the settings: %s"), e->message);
            toast_error(self, t);
            g_clear_error(&e);
        }
        GtkWidget *child = thumb_new(self, it, image);
        gtk_flow_box_insert(self->gallery, child, 0);
        gtk_flow_box_select_child(self->gallery, GTK_FLOW_BOX_CHILD(child));
        show_item(self, it, image);
    } else {
        /* not on disk (it could not be written): shown, not kept */
        gtk_picture_set_paintable(self->picture, GDK_PAINTABLE(image));
        gtk_stack_set_visible_child_name(self->stack, "picture");
        rlx_gallery_item_free(it);
    }
    g_autofree char *secs = g_strdup_printf("%.1f", s->seconds);
    /* Translators: the picture is done, in this many seconds */
    g_autofree char *t = g_strdup_printf(_("Done in %s s"), secs);
    gtk_label_set_text(self->status_label, t);
    g_debug("imagine finished: %s %dx%d seed %" G_GUINT64_FORMAT " steps %d in %.2f s",
            s->out_png ? s->out_png : "(not kept)", s->width, s->height, s->seed, s->steps,
            s->seconds); /* for the UI tests */
    update_state(self);
}

static void on_stopped(RlxImaginer *im, int step, int steps, RlxImaginePane *self)
{
    if (!rlx_imaginer_is_busy(self->imaginer))
        set_running(self, FALSE);
    g_autofree char *t = g_strdup_printf(
        ngettext("Stopped after %d step of %d", "Stopped after %d steps of %d", steps), step,
        steps);
    gtk_label_set_text(self->status_label, t);
    toast(self, t);
    show_rest(self);
    g_debug("imagine stopped: step %d of %d", step, steps); /* for the UI tests */
}

static void on_failed(RlxImaginer *im, int status, const char *what, const char *message,
                      RlxImaginePane *self)
{
    if (!rlx_imaginer_is_busy(self->imaginer))
        set_running(self, FALSE);
    g_autofree char *t = NULL;
    if (g_strcmp0(what, "model") == 0) {
        self->model_loading = FALSE;
        self->model_failed = TRUE;
        g_clear_pointer(&self->model_name, g_free);
        t = g_strdup_printf(_("Cannot open the model: %s"), message);
        show_error(self, _("Cannot Open the Model"), message, "model");
    } else if (g_strcmp0(what, "init") == 0) {
        t = g_strdup_printf(_("Cannot read the start picture: %s"), message);
        show_error(self, _("Cannot Read the Start Picture"), message, "generate");
    } else if (g_strcmp0(what, "save") == 0) {
        t = g_strdup_printf(_("The picture could not be kept: %s"), message);
    } else {
        t = g_strdup_printf(_("Cannot make the picture: %s"), message);
        show_error(self, _("Cannot Make the Picture"), message, "generate");
    }
    gtk_label_set_text(self->status_label, "");
    toast_error(self, t);
    g_debug("imagine failed: %s", t); /* for the UI tests */
    update_state(self);
}

static void on_memory(RlxImaginer *im, const RlxMemoryInfo *m, RlxImaginePane *self)
{
    g_signal_emit(self, signals[SIG_MEMORY], 0, m);
}

/* ---- the model ----------------------------------------------------------------- */

static char *setting(RlxImaginePane *self, const char *key)
{
    return self->settings ? g_settings_get_string(self->settings, key) : g_strdup("");
}

static void apply_model(RlxImaginePane *self)
{
    if (!self->model)
        return;
    g_autofree char *dev = setting(self, "device");
    g_autofree char *te = setting(self, "imagine-text-encoder");
    g_autofree char *vae = setting(self, "imagine-vae");
    g_autofree char *prev = setting(self, "imagine-preview-decoder");
    g_autofree char *lora = setting(self, "imagine-lora");
    gboolean folder = g_file_test(self->model, G_FILE_TEST_IS_DIR);
    RlxImagineModel m = {
        .model = self->model,
        /* a folder has its own; a single transformer file needs them */
        .text_encoder = folder ? NULL : te,
        .vae = folder ? NULL : vae,
        .preview_decoder = prev,
        .lora = lora,
        .lora_strength =
            self->settings ? g_settings_get_double(self->settings, "imagine-lora-strength") : 1.0,
        .device = dev && *dev ? dev : "cpu",
        .n_threads = self->settings ? g_settings_get_int(self->settings, "threads") : 0,
        .budget = self->settings
                      ? (uint64_t)g_settings_get_int(self->settings, "memory-budget-mib") << 20
                      : 0,
    };
    rlx_imaginer_set_model(self->imaginer, &m);
}

static void set_model(RlxImaginePane *self, const char *path)
{
    g_free(self->model);
    self->model = g_strdup(path);
    g_clear_pointer(&self->model_name, g_free);
    self->model_failed = FALSE;
    if (self->settings)
        g_settings_set_string(self->settings, "imagine-model", path ? path : "");
    apply_model(self);
    update_state(self);
}

/* The LoRA row: shown with a LoRA, its file's name and strength. */
static void lora_refresh(RlxImaginePane *self)
{
    g_autofree char *lora = setting(self, "imagine-lora");
    gtk_widget_set_visible(self->lora_row, lora && *lora);
    g_autofree char *base = lora && *lora ? g_path_get_basename(lora) : g_strdup("");
    gtk_label_set_text(self->lora_label, base);
    gtk_widget_set_tooltip_text(GTK_WIDGET(self->lora_label), lora);
    if (self->settings && !self->lora_wait)
        gtk_spin_button_set_value(self->lora_strength,
                                  g_settings_get_double(self->settings, "imagine-lora-strength"));
}

static void settings_changed(GSettings *s, const char *key, RlxImaginePane *self)
{
    if (g_str_has_prefix(key, "imagine-lora"))
        lora_refresh(self);
    apply_model(self); /* opened again only when something it uses changed */
}

static gboolean lora_rested(gpointer data)
{
    RlxImaginePane *self = data;
    self->lora_wait = 0;
    if (self->settings)
        g_settings_set_double(self->settings, "imagine-lora-strength",
                              gtk_spin_button_get_value(self->lora_strength));
    return G_SOURCE_REMOVE;
}

static void lora_strength_changed(GtkSpinButton *sb, RlxImaginePane *self)
{
    if (self->settings && gtk_spin_button_get_value(sb) ==
                              g_settings_get_double(self->settings, "imagine-lora-strength"))
        return;
    g_clear_handle_id(&self->lora_wait, g_source_remove);
    self->lora_wait = g_timeout_add(600, lora_rested, self);
}

/* ---- the form --------------------------------------------------------------------- */

static void show_form(RlxImaginePane *self)
{
    adw_leaflet_navigate(ADW_LEAFLET(self->box), ADW_NAVIGATION_DIRECTION_BACK);
}

/* Folded (a narrow window), the picture comes forward when there is one to
 * watch. */
static void show_picture_page(RlxImaginePane *self)
{
    if (adw_leaflet_get_folded(ADW_LEAFLET(self->box)))
        adw_leaflet_set_visible_child(ADW_LEAFLET(self->box), self->main_page);
}

static void update_state(RlxImaginePane *self)
{
    g_autofree char *prompt = text_of(self->prompt);
    gboolean empty = !*prompt;
    gboolean can = !empty && self->model && !self->model_failed;
    GtkWidget *w = GTK_WIDGET(self);
    gtk_widget_action_set_enabled(w, "imagine.generate", can);
    gtk_widget_set_tooltip_text(GTK_WIDGET(self->generate_button),
                                !self->model         ? _("Choose a model first")
                                : self->model_failed ? _("The model could not be opened")
                                : empty              ? _("Type a prompt first")
                                                     : _("Make the picture (Ctrl+Enter)"));
    gtk_button_set_label(self->generate_button,
                         self->running ? _("_Queue Another") : _("_Generate"));
    gtk_widget_set_visible(self->stop_button, self->running);
    gtk_widget_action_set_enabled(w, "imagine.stop", self->running);
    gboolean shown = self->shown != NULL &&
                     g_strcmp0(gtk_stack_get_visible_child_name(self->stack), "picture") == 0;
    gtk_widget_action_set_enabled(w, "imagine.reuse", shown);
    gtk_widget_action_set_enabled(w, "imagine.save", shown);
    gtk_widget_action_set_enabled(w, "imagine.copy", shown);
    gtk_widget_action_set_enabled(w, "imagine.delete", shown);

    gtk_stack_set_visible_child_name(
        GTK_STACK(self->gallery_stack),
        gtk_widget_get_first_child(GTK_WIDGET(self->gallery)) ? "gallery" : "none");

    if (self->back_button)
        gtk_widget_set_visible(self->back_button, adw_leaflet_get_folded(ADW_LEAFLET(self->box)));

    const RlxImagineInfo *info = rlx_imaginer_get_info(self->imaginer);
    gtk_widget_set_visible(self->negative_box, info && info->uses_negative);
    /* guidance means something to a model with classifier-free guidance
     * or a guidance embedding; the distilled ones take none */
    gboolean guided = !info || info->uses_negative || info->guidance_embedded;
    gtk_widget_set_sensitive(self->guidance_row, guided);
    gtk_widget_set_tooltip_text(self->guidance_row,
                                guided ? _("How closely the picture follows the prompt")
                                       : _("This model is distilled: it takes no guidance"));

    g_autofree char *model_text = self->model_loading ? g_strdup(_("Loading the model…"))
                                  : self->model_name  ? g_strdup(self->model_name)
                                  : self->model       ? g_path_get_basename(self->model)
                                                      : g_strdup(_("Choose a Model…"));
    gtk_button_set_label(self->model_button, model_text);

    gboolean start = self->start_path != NULL;
    gtk_widget_set_visible(self->start_box, start);
    gtk_widget_set_visible(self->strength_row,
                           start && !gtk_check_button_get_active(self->as_reference));
    if (!self->model)
        adw_status_page_set_description(
            self->empty_page, _("Choose a FLUX.2 model (a diffusers folder, or a transformer "
                                ".safetensors or .gguf with its text encoder and VAE), then type "
                                "a prompt and press Generate."));
    else
        adw_status_page_set_description(
            self->empty_page, _("Type a prompt and press Generate. Drop a picture here to start "
                                "from it."));
}

static void prompt_changed(GtkTextBuffer *b, RlxImaginePane *self)
{
    update_state(self);
}

static void size_spin_changed(GtkSpinButton *sb, RlxImaginePane *self)
{
    if (self->syncing_size)
        return;
    int w = gtk_spin_button_get_value_as_int(self->width);
    int h = gtk_spin_button_get_value_as_int(self->height);
    guint sel = G_N_ELEMENTS(presets); /* custom */
    for (guint i = 0; i < G_N_ELEMENTS(presets); i++)
        if (presets[i].w == w && presets[i].h == h)
            sel = i;
    self->syncing_size = TRUE;
    gtk_drop_down_set_selected(self->size_preset, sel);
    self->syncing_size = FALSE;
    if (self->settings) {
        g_settings_set_int(self->settings, "imagine-width", w);
        g_settings_set_int(self->settings, "imagine-height", h);
    }
}

static void preset_selected(GtkDropDown *dd, GParamSpec *ps, RlxImaginePane *self)
{
    guint i = gtk_drop_down_get_selected(dd);
    if (self->syncing_size || i >= G_N_ELEMENTS(presets))
        return;
    self->syncing_size = TRUE;
    gtk_spin_button_set_value(self->width, presets[i].w);
    gtk_spin_button_set_value(self->height, presets[i].h);
    self->syncing_size = FALSE;
    size_spin_changed(self->width, self);
}

static int round16(int v)
{
    int r = (v + 8) / 16 * 16;
    return CLAMP(r, 64, 2048);
}

static void roll_seed(RlxImaginePane *self)
{
    gtk_spin_button_set_value(self->seed, (double)g_random_int());
}

static void generate(RlxImaginePane *self)
{
    g_autofree char *prompt = text_of(self->prompt);
    if (!*prompt) {
        toast(self, _("Type a prompt first"));
        return;
    }
    if (!self->model) {
        toast(self, _("Choose a model first"));
        return;
    }
    /* commit what is typed in a spin button but not yet applied */
    gtk_spin_button_update(self->width);
    gtk_spin_button_update(self->height);
    gtk_spin_button_update(self->steps);
    gtk_spin_button_update(self->seed);
    gtk_spin_button_update(self->guidance);
    int w = gtk_spin_button_get_value_as_int(self->width);
    int h = gtk_spin_button_get_value_as_int(self->height);
    int rw = round16(w), rh = round16(h);
    if (rw != w || rh != h) {
        gtk_spin_button_set_value(self->width, rw);
        gtk_spin_button_set_value(self->height, rh);
        /* Translators: the size used instead of the one asked for */
        g_autofree char *t =
            g_strdup_printf(_("Rounded to %d × %d: the sides are multiples of 16"), rw, rh);
        toast(self, t);
        g_debug("imagine size rounded: %dx%d to %dx%d", w, h, rw, rh); /* for the UI tests */
    }
    if (!gtk_check_button_get_active(self->keep_seed) && self->last)
        roll_seed(self);
    g_autofree char *negative = text_of(self->negative);
    gtk_stack_set_visible_child_name(
        GTK_STACK(self->gallery_stack),
        gtk_widget_get_first_child(GTK_WIDGET(self->gallery)) ? "gallery" : "none");

    const RlxImagineInfo *info = rlx_imaginer_get_info(self->imaginer);
    gboolean ref = self->start_path && gtk_check_button_get_active(self->as_reference);
    RlxImagineSettings s = {
        .prompt = prompt,
        .negative = info && info->uses_negative ? negative : NULL,
        .width = rw,
        .height = rh,
        .steps = gtk_spin_button_get_value_as_int(self->steps),
        .seed = (uint64_t)gtk_spin_button_get_value(self->seed),
        .guidance = gtk_spin_button_get_value(self->guidance),
        .init = self->start_path && !ref ? self->start_path : NULL,
        .strength = gtk_range_get_value(GTK_RANGE(self->strength)),
        .ref = ref ? self->start_path : NULL,
    };
    g_autofree char *dir = rlx_gallery_dir();
    g_autofree char *out = rlx_gallery_new_png_path(dir, s.seed);
    s.out_png = out;
    rlx_imagine_settings_free(self->last);
    self->last = rlx_imagine_settings_copy(&s);
    g_debug("imagine generate: %dx%d, %d steps, seed %" G_GUINT64_FORMAT, s.width, s.height,
            s.steps, s.seed); /* for the UI tests */
    rlx_imaginer_generate(self->imaginer, &s);
    show_picture_page(self);
    if (!self->running) {
        self->phase = "prompt";
        self->step = 0;
        self->seconds_left = -1;
        set_running(self, TRUE);
        update_progress_text(self);
    }
}

static void retry(RlxImaginePane *self)
{
    /* a model that failed is opened again first (the thread takes it
     * before the next request): its failure may have been the request's */
    if (self->model_failed || g_strcmp0(self->retry_what, "model") == 0) {
        self->model_failed = FALSE;
        g_clear_pointer(&self->model_name, g_free);
        apply_model(self);
    }
    if (g_strcmp0(self->retry_what, "generate") == 0 && self->last) {
        RlxImagineSettings s = *self->last;
        g_autofree char *dir = rlx_gallery_dir();
        g_autofree char *out = rlx_gallery_new_png_path(dir, s.seed);
        s.out_png = out;
        rlx_imaginer_generate(self->imaginer, &s);
        self->phase = "prompt";
        self->step = 0;
        self->seconds_left = -1;
        set_running(self, TRUE);
    }
    show_rest(self);
    update_state(self);
}

/* The shown picture's settings back into the form. */
static void reuse(RlxImaginePane *self)
{
    if (!self->shown)
        return;
    const RlxImagineSettings *s = self->shown->s;
    set_text(self->prompt, s->prompt);
    set_text(self->negative, s->negative);
    gtk_spin_button_set_value(self->width, s->width);
    gtk_spin_button_set_value(self->height, s->height);
    gtk_spin_button_set_value(self->steps, s->steps);
    gtk_spin_button_set_value(self->seed, (double)s->seed);
    gtk_spin_button_set_value(self->guidance, s->guidance);
    if (s->init)
        gtk_range_set_value(GTK_RANGE(self->strength), s->strength);
    /* the same picture again: the seed stays */
    gtk_check_button_set_active(self->keep_seed, TRUE);
    toast(self, _("The form has this picture's settings"));
    g_debug("imagine reuse: seed %" G_GUINT64_FORMAT, s->seed); /* for the UI tests */
}

/* ---- files ------------------------------------------------------------------------ */

static gboolean is_image_name(const char *lower)
{
    return g_str_has_suffix(lower, ".png") || g_str_has_suffix(lower, ".jpg") ||
           g_str_has_suffix(lower, ".jpeg") || g_str_has_suffix(lower, ".jpe");
}

static void set_start(RlxImaginePane *self, const char *path)
{
    if (!path) {
        g_clear_pointer(&self->start_path, g_free);
        gtk_picture_set_paintable(self->start_picture, NULL);
        update_state(self);
        return;
    }
    GError *e = NULL;
    GdkTexture *t = gdk_texture_new_from_filename(path, &e);
    g_autofree char *base = g_path_get_basename(path);
    if (!t) {
        g_autofree char *msg = g_strdup_printf(_("Cannot read %s: it is not a picture"), base);
        toast_error(self, msg);
        g_debug("imagine failed: %s", msg); /* for the UI tests */
        g_clear_error(&e);
        return;
    }
    g_free(self->start_path);
    self->start_path = g_strdup(path);
    gtk_picture_set_paintable(self->start_picture, GDK_PAINTABLE(t));
    g_object_unref(t);
    gtk_label_set_text(self->start_label, base);
    g_debug("imagine start picture: %s", base); /* for the UI tests */
    update_state(self);
    /* the form scrolls to the start picture's choices */
    gtk_widget_grab_focus(GTK_WIDGET(self->as_reference));
}

void rlx_imagine_pane_open(RlxImaginePane *self, GFile *file)
{
    g_autofree char *path = g_file_get_path(file);
    if (!path) {
        toast_error(self, _("Only files on this computer can be opened"));
        return;
    }
    g_autofree char *base = g_file_get_basename(file);
    g_autofree char *lower = g_ascii_strdown(base, -1);
    if (g_file_test(path, G_FILE_TEST_IS_DIR) || g_str_has_suffix(lower, ".safetensors") ||
        g_str_has_suffix(lower, ".gguf")) {
        set_model(self, path);
        return;
    }
    if (is_image_name(lower)) {
        set_start(self, path);
        return;
    }
    g_autofree char *t = g_strdup_printf(
        _("%s is neither a picture (PNG, JPEG) nor a FLUX.2 model (folder, .safetensors, .gguf)"),
        base);
    toast_error(self, t);
}

static void add_filter(GtkFileChooser *c, const char *name, const char *const *patterns)
{
    GtkFileFilter *f = gtk_file_filter_new();
    gtk_file_filter_set_name(f, name);
    for (; *patterns; patterns++)
        gtk_file_filter_add_pattern(f, *patterns);
    gtk_file_chooser_add_filter(c, f);
    g_object_unref(f);
}

static void chooser_done(GtkNativeDialog *d, int response, RlxImaginePane *self)
{
    if (response == GTK_RESPONSE_ACCEPT) {
        g_autoptr(GFile) f = gtk_file_chooser_get_file(GTK_FILE_CHOOSER(d));
        g_autofree char *p = f ? g_file_get_path(f) : NULL;
        const char *key = g_object_get_data(G_OBJECT(d), "rlx-key");
        if (p && g_strcmp0(key, "imagine-model") == 0) {
            /* a diffusers folder can be chosen by its model_index.json */
            if (g_str_has_suffix(p, "/model_index.json")) {
                g_autofree char *dir = g_path_get_dirname(p);
                set_model(self, dir);
            } else {
                set_model(self, p);
            }
        } else if (p && key && self->settings) {
            g_settings_set_string(self->settings, key, p); /* "changed" opens it again */
            g_autofree char *base = g_path_get_basename(p);
            toast(self, base);
        }
    }
    g_object_unref(d);
}

static void choose(RlxImaginePane *self, const char *key, const char *title, gboolean folder)
{
    GtkFileChooserNative *d = gtk_file_chooser_native_new(
        title, GTK_WINDOW(gtk_widget_get_root(GTK_WIDGET(self))),
        folder ? GTK_FILE_CHOOSER_ACTION_SELECT_FOLDER : GTK_FILE_CHOOSER_ACTION_OPEN, _("_Open"),
        _("_Cancel"));
    g_object_set_data_full(G_OBJECT(d), "rlx-key", g_strdup(key), g_free);
    gtk_native_dialog_set_modal(GTK_NATIVE_DIALOG(d), TRUE);
    if (!folder && g_strcmp0(key, "imagine-model") == 0) {
        static const char *const pats[] = {"*.safetensors", "*.gguf", "model_index.json", NULL};
        add_filter(GTK_FILE_CHOOSER(d), _("FLUX.2 transformers, diffusers folders"), pats);
    } else if (!folder && g_strcmp0(key, "imagine-text-encoder") == 0) {
        static const char *const pats[] = {"*.gguf", "*.safetensors", NULL};
        add_filter(GTK_FILE_CHOOSER(d), _("Qwen3 text encoders"), pats);
    } else if (!folder) {
        static const char *const pats[] = {"*.safetensors", NULL};
        add_filter(GTK_FILE_CHOOSER(d), _("Safetensors"), pats);
    }
    g_signal_connect(d, "response", G_CALLBACK(chooser_done), self);
    gtk_native_dialog_show(GTK_NATIVE_DIALOG(d));
}

static void save_done(GtkNativeDialog *d, int response, RlxImaginePane *self)
{
    const char *src = g_object_get_data(G_OBJECT(d), "rlx-src");
    if (response == GTK_RESPONSE_ACCEPT && src) {
        g_autoptr(GFile) to = gtk_file_chooser_get_file(GTK_FILE_CHOOSER(d));
        g_autoptr(GFile) from = g_file_new_for_path(src);
        GError *e = NULL;
        /* the chooser asked about replacing an existing file already; a
         * copy keeps the PNG's parameters chunk */
        if (!to || !g_file_copy(from, to, G_FILE_COPY_OVERWRITE, NULL, NULL, NULL, &e)) {
            g_autofree char *t =
                g_strdup_printf(_("Cannot save: %s"), e ? e->message : _("no file chosen"));
            toast_error(self, t);
            g_clear_error(&e);
        } else {
            g_autofree char *path = g_file_get_path(to);
            g_autofree char *base = g_file_get_basename(to);
            g_autofree char *t = g_strdup_printf(_("Saved %s"), base);
            toast(self, t);
            g_debug("imagine saved: %s", path); /* for the UI tests */
        }
    }
    g_object_unref(d);
}

static void save_as(RlxImaginePane *self)
{
    if (!self->shown)
        return;
    GtkFileChooserNative *d = gtk_file_chooser_native_new(
        _("Save the Picture"), GTK_WINDOW(gtk_widget_get_root(GTK_WIDGET(self))),
        GTK_FILE_CHOOSER_ACTION_SAVE, _("_Save"), _("_Cancel"));
    gtk_native_dialog_set_modal(GTK_NATIVE_DIALOG(d), TRUE);
    g_object_set_data_full(G_OBJECT(d), "rlx-src", g_strdup(self->shown->png), g_free);
    g_autofree char *base = g_path_get_basename(self->shown->png);
    gtk_file_chooser_set_current_name(GTK_FILE_CHOOSER(d), base);
    g_signal_connect(d, "response", G_CALLBACK(save_done), self);
    gtk_native_dialog_show(GTK_NATIVE_DIALOG(d));
}

static void copy_picture(RlxImaginePane *self)
{
    GdkPaintable *p = gtk_picture_get_paintable(self->picture);
    if (!self->shown || !GDK_IS_TEXTURE(p))
        return;
    gdk_clipboard_set_texture(gtk_widget_get_clipboard(GTK_WIDGET(self)), GDK_TEXTURE(p));
    toast(self, _("The picture is on the clipboard"));
    g_debug("imagine copied"); /* for the UI tests */
}

static void delete_shown(RlxImaginePane *self)
{
    if (!self->shown)
        return;
    RlxGalleryItem *it = self->shown;
    for (GtkWidget *c = gtk_widget_get_first_child(GTK_WIDGET(self->gallery)); c;
         c = gtk_widget_get_next_sibling(c)) {
        if (child_item(GTK_FLOW_BOX_CHILD(c)) != it)
            continue;
        if (g_unlink(it->png) != 0 && errno != ENOENT) {
            g_autofree char *t =
                g_strdup_printf(_("Cannot delete the picture: %s"), g_strerror(errno));
            toast_error(self, t);
            return;
        }
        g_unlink(it->json);
        g_debug("imagine deleted: %s", it->png); /* for the UI tests */
        self->shown = NULL;
        gtk_flow_box_remove(self->gallery, c);
        toast(self, _("The picture is deleted"));
        break;
    }
    show_rest(self);
    update_state(self);
}

static void on_child_activated(GtkFlowBox *fb, GtkFlowBoxChild *c, RlxImaginePane *self)
{
    RlxGalleryItem *it = child_item(c);
    if (!it || self->running)
        return;
    show_item(self, it, NULL);
    g_debug("imagine shown: %s", it->png); /* for the UI tests */
}

/* ---- actions ------------------------------------------------------------------------ */

static void act(GtkWidget *w, const char *name, GVariant *param)
{
    RlxImaginePane *self = RLX_IMAGINE_PANE(w);
    if (!strcmp(name, "imagine.generate")) {
        generate(self);
    } else if (!strcmp(name, "imagine.stop")) {
        if (self->running) {
            rlx_imaginer_stop(self->imaginer);
            g_debug("imagine stop asked"); /* for the UI tests */
        }
    } else if (!strcmp(name, "imagine.model")) {
        choose(self, "imagine-model", _("Choose a FLUX.2 Model"), FALSE);
    } else if (!strcmp(name, "imagine.model-folder")) {
        choose(self, "imagine-model", _("Choose a FLUX.2 Model Folder"), TRUE);
    } else if (!strcmp(name, "imagine.text-encoder")) {
        choose(self, "imagine-text-encoder", _("Choose the Text Encoder"), FALSE);
    } else if (!strcmp(name, "imagine.vae")) {
        choose(self, "imagine-vae", _("Choose the VAE"), FALSE);
    } else if (!strcmp(name, "imagine.lora")) {
        choose(self, "imagine-lora", _("Choose a LoRA"), FALSE);
    } else if (!strcmp(name, "imagine.lora-none")) {
        if (self->settings)
            g_settings_set_string(self->settings, "imagine-lora", "");
    } else if (!strcmp(name, "imagine.preview-decoder")) {
        choose(self, "imagine-preview-decoder", _("Choose the Preview Decoder (TAEF2)"), FALSE);
    } else if (!strcmp(name, "imagine.dice")) {
        roll_seed(self);
    } else if (!strcmp(name, "imagine.reuse")) {
        reuse(self);
    } else if (!strcmp(name, "imagine.save")) {
        save_as(self);
    } else if (!strcmp(name, "imagine.copy")) {
        copy_picture(self);
    } else if (!strcmp(name, "imagine.delete")) {
        delete_shown(self);
    } else if (!strcmp(name, "imagine.clear-start")) {
        set_start(self, NULL);
    } else if (!strcmp(name, "imagine.retry")) {
        retry(self);
    }
}

/* Ctrl+Enter in a prompt generates instead of starting a new line. */
static gboolean prompt_key(GtkEventControllerKey *k, guint keyval, guint code, GdkModifierType mods,
                           RlxImaginePane *self)
{
    if ((keyval == GDK_KEY_Return || keyval == GDK_KEY_KP_Enter) && (mods & GDK_CONTROL_MASK)) {
        gtk_widget_activate_action(GTK_WIDGET(self), "imagine.generate", NULL);
        return TRUE;
    }
    return FALSE;
}

static gboolean on_drop(GtkDropTarget *t, const GValue *value, double x, double y,
                        RlxImaginePane *self)
{
    if (!G_VALUE_HOLDS(value, G_TYPE_FILE))
        return FALSE;
    rlx_imagine_pane_open(self, g_value_get_object(value));
    return TRUE;
}

/* ---- the widget ------------------------------------------------------------------- */

void rlx_imagine_pane_setup(RlxImaginePane *self, GSettings *settings)
{
    load_gallery(self);
    if (!settings) {
        update_state(self);
        return;
    }
    self->settings = g_object_ref(settings);
    int w = g_settings_get_int(settings, "imagine-width");
    int h = g_settings_get_int(settings, "imagine-height");
    gtk_spin_button_set_value(self->width, w);
    gtk_spin_button_set_value(self->height, h);
    lora_refresh(self);
    g_autofree char *model = g_settings_get_string(settings, "imagine-model");
    if (model && *model) {
        /* a model that went away: the page says so where it is asked for */
        self->model = g_strdup(model);
        apply_model(self);
    }
    static const char *const keys[] = {"device",
                                       "threads",
                                       "memory-budget-mib",
                                       "imagine-text-encoder",
                                       "imagine-vae",
                                       "imagine-preview-decoder",
                                       "imagine-lora",
                                       "imagine-lora-strength"};
    for (size_t i = 0; i < G_N_ELEMENTS(keys); i++) {
        g_autofree char *sig = g_strconcat("changed::", keys[i], NULL);
        g_signal_connect(settings, sig, G_CALLBACK(settings_changed), self);
    }
    update_state(self);
}

static GtkWidget *heading(const char *text)
{
    GtkWidget *l = gtk_label_new(text);
    gtk_label_set_xalign(GTK_LABEL(l), 0);
    gtk_widget_add_css_class(l, "heading");
    return l;
}

/* "Label ........ widget" */
static GtkWidget *row(const char *label, GtkWidget *w, const char *tip)
{
    GtkWidget *b = gtk_box_new(GTK_ORIENTATION_HORIZONTAL, 8);
    GtkWidget *l = gtk_label_new_with_mnemonic(label);
    gtk_label_set_xalign(GTK_LABEL(l), 0);
    gtk_widget_set_hexpand(l, TRUE);
    gtk_label_set_mnemonic_widget(GTK_LABEL(l), w);
    gtk_box_append(GTK_BOX(b), l);
    gtk_box_append(GTK_BOX(b), w);
    if (tip)
        gtk_widget_set_tooltip_text(b, tip);
    return b;
}

static GtkTextView *prompt_view(RlxImaginePane *self, GtkWidget *box, int height, const char *name)
{
    GtkWidget *tv = gtk_text_view_new();
    gtk_text_view_set_wrap_mode(GTK_TEXT_VIEW(tv), GTK_WRAP_WORD_CHAR);
    gtk_text_view_set_accepts_tab(GTK_TEXT_VIEW(tv), FALSE);
    gtk_text_view_set_top_margin(GTK_TEXT_VIEW(tv), 6);
    gtk_text_view_set_bottom_margin(GTK_TEXT_VIEW(tv), 6);
    gtk_text_view_set_left_margin(GTK_TEXT_VIEW(tv), 6);
    gtk_text_view_set_right_margin(GTK_TEXT_VIEW(tv), 6);
    gtk_widget_set_name(tv, name);
    gtk_accessible_update_property(GTK_ACCESSIBLE(tv), GTK_ACCESSIBLE_PROPERTY_LABEL, name, -1);
    GtkEventController *k = gtk_event_controller_key_new();
    gtk_event_controller_set_propagation_phase(k, GTK_PHASE_CAPTURE);
    g_signal_connect(k, "key-pressed", G_CALLBACK(prompt_key), self);
    gtk_widget_add_controller(tv, k);
    GtkWidget *sc = gtk_scrolled_window_new();
    gtk_scrolled_window_set_policy(GTK_SCROLLED_WINDOW(sc), GTK_POLICY_NEVER, GTK_POLICY_AUTOMATIC);
    gtk_scrolled_window_set_child(GTK_SCROLLED_WINDOW(sc), tv);
    gtk_widget_set_size_request(sc, -1, height);
    GtkWidget *frame = gtk_frame_new(NULL);
    gtk_frame_set_child(GTK_FRAME(frame), sc);
    gtk_box_append(GTK_BOX(box), frame);
    return GTK_TEXT_VIEW(tv);
}

static GtkSpinButton *spin(double lo, double hi, double step, int digits)
{
    GtkWidget *s = gtk_spin_button_new_with_range(lo, hi, step);
    gtk_spin_button_set_digits(GTK_SPIN_BUTTON(s), (guint)digits);
    gtk_spin_button_set_numeric(GTK_SPIN_BUTTON(s), TRUE);
    gtk_widget_set_valign(s, GTK_ALIGN_CENTER);
    return GTK_SPIN_BUTTON(s);
}

static GtkWidget *build_form(RlxImaginePane *self)
{
    GtkWidget *form = gtk_box_new(GTK_ORIENTATION_VERTICAL, 10);
    gtk_widget_set_margin_start(form, 12);
    gtk_widget_set_margin_end(form, 12);
    gtk_widget_set_margin_top(form, 12);
    gtk_widget_set_margin_bottom(form, 12);

    /* the model, and its parts in a menu */
    GtkWidget *mrow = gtk_box_new(GTK_ORIENTATION_HORIZONTAL, 0);
    gtk_widget_add_css_class(mrow, "linked");
    self->model_button = GTK_BUTTON(gtk_button_new_with_label(_("Choose a Model…")));
    gtk_widget_set_hexpand(GTK_WIDGET(self->model_button), TRUE);
    GtkWidget *ml = gtk_button_get_child(self->model_button);
    if (GTK_IS_LABEL(ml))
        gtk_label_set_ellipsize(GTK_LABEL(ml), PANGO_ELLIPSIZE_END);
    gtk_widget_set_tooltip_text(GTK_WIDGET(self->model_button),
                                _("The FLUX.2 model: a transformer file (.safetensors, .gguf) or "
                                  "the model_index.json of a diffusers folder"));
    gtk_actionable_set_action_name(GTK_ACTIONABLE(self->model_button), "imagine.model");
    gtk_box_append(GTK_BOX(mrow), GTK_WIDGET(self->model_button));
    GMenu *menu = g_menu_new();
    g_menu_append(menu, _("Choose a Model _Folder…"), "imagine.model-folder");
    g_menu_append(menu, _("Choose a _Transformer File…"), "imagine.model");
    GMenu *parts = g_menu_new();
    g_menu_append(parts, _("_Text Encoder (for a single file)…"), "imagine.text-encoder");
    g_menu_append(parts, _("_VAE (for a single file)…"), "imagine.vae");
    g_menu_append(parts, _("_Preview Decoder (TAEF2)…"), "imagine.preview-decoder");
    g_menu_append_section(menu, NULL, G_MENU_MODEL(parts));
    g_object_unref(parts);
    GMenu *loras = g_menu_new();
    g_menu_append(loras, _("_LoRA…"), "imagine.lora");
    g_menu_append(loras, _("_No LoRA"), "imagine.lora-none");
    g_menu_append_section(menu, NULL, G_MENU_MODEL(loras));
    g_object_unref(loras);
    GtkWidget *mb = gtk_menu_button_new();
    gtk_menu_button_set_menu_model(GTK_MENU_BUTTON(mb), G_MENU_MODEL(menu));
    gtk_widget_set_tooltip_text(mb, _("The model's parts"));
    g_object_unref(menu);
    gtk_box_append(GTK_BOX(mrow), mb);
    gtk_box_append(GTK_BOX(form), mrow);

    gtk_box_append(GTK_BOX(form), heading(_("Prompt")));
    self->prompt = prompt_view(self, form, 96, _("Prompt"));
    g_signal_connect(gtk_text_view_get_buffer(self->prompt), "changed", G_CALLBACK(prompt_changed),
                     self);

    self->negative_box = gtk_box_new(GTK_ORIENTATION_VERTICAL, 6);
    gtk_box_append(GTK_BOX(self->negative_box), heading(_("Negative Prompt")));
    self->negative = prompt_view(self, self->negative_box, 56, _("Negative prompt"));
    gtk_box_append(GTK_BOX(form), self->negative_box);

    /* size */
    GtkStringList *names = gtk_string_list_new(NULL);
    for (guint i = 0; i < G_N_ELEMENTS(presets); i++) {
        g_autofree char *n = g_strdup_printf("%d × %d", presets[i].w, presets[i].h);
        gtk_string_list_append(names, n);
    }
    gtk_string_list_append(names, _("Custom"));
    self->size_preset = GTK_DROP_DOWN(gtk_drop_down_new(G_LIST_MODEL(names), NULL));
    gtk_widget_set_valign(GTK_WIDGET(self->size_preset), GTK_ALIGN_CENTER);
    gtk_box_append(GTK_BOX(form), row(_("_Size"), GTK_WIDGET(self->size_preset), NULL));
    GtkWidget *wh = gtk_box_new(GTK_ORIENTATION_HORIZONTAL, 6);
    self->width = spin(64, 2048, 16, 0);
    self->height = spin(64, 2048, 16, 0);
    gtk_widget_set_tooltip_text(GTK_WIDGET(self->width), _("Width in pixels (a multiple of 16)"));
    gtk_widget_set_tooltip_text(GTK_WIDGET(self->height), _("Height in pixels (a multiple of 16)"));
    gtk_spin_button_set_value(self->width, 1024);
    gtk_spin_button_set_value(self->height, 1024);
    GtkWidget *x = gtk_label_new("×");
    GtkWidget *spacer = gtk_box_new(GTK_ORIENTATION_HORIZONTAL, 0);
    gtk_widget_set_hexpand(spacer, TRUE);
    gtk_box_append(GTK_BOX(wh), spacer);
    gtk_box_append(GTK_BOX(wh), GTK_WIDGET(self->width));
    gtk_box_append(GTK_BOX(wh), x);
    gtk_box_append(GTK_BOX(wh), GTK_WIDGET(self->height));
    gtk_box_append(GTK_BOX(form), wh);
    g_signal_connect(self->width, "value-changed", G_CALLBACK(size_spin_changed), self);
    g_signal_connect(self->height, "value-changed", G_CALLBACK(size_spin_changed), self);
    g_signal_connect(self->size_preset, "notify::selected", G_CALLBACK(preset_selected), self);
    size_spin_changed(self->width, self);

    self->steps = spin(1, 200, 1, 0);
    gtk_spin_button_set_value(self->steps, 4);
    gtk_box_append(GTK_BOX(form),
                   row(_("S_teps"), GTK_WIDGET(self->steps),
                       _("Denoising steps: the distilled models need about 4, the base ones 50")));

    /* seed: a number, a dice, and whether it stays */
    GtkWidget *sb = gtk_box_new(GTK_ORIENTATION_HORIZONTAL, 6);
    self->seed = spin(0, SEED_MAX, 1, 0);
    gtk_widget_set_tooltip_text(GTK_WIDGET(self->seed), _("The same seed and settings make the "
                                                          "same picture"));
    gtk_spin_button_set_value(self->seed, (double)g_random_int());
    /* room for every 32-bit seed: the form keeps its width as seeds change */
    gtk_editable_set_width_chars(GTK_EDITABLE(self->seed), 10);
    GtkWidget *dice = gtk_button_new_from_icon_name("media-playlist-shuffle-symbolic");
    gtk_widget_set_tooltip_text(dice, _("A random seed"));
    gtk_actionable_set_action_name(GTK_ACTIONABLE(dice), "imagine.dice");
    gtk_widget_set_valign(dice, GTK_ALIGN_CENTER);
    gtk_box_append(GTK_BOX(sb), GTK_WIDGET(self->seed));
    gtk_box_append(GTK_BOX(sb), dice);
    gtk_box_append(GTK_BOX(form), row(_("S_eed"), sb, NULL));
    self->keep_seed = GTK_CHECK_BUTTON(gtk_check_button_new_with_mnemonic(_("_Keep the seed")));
    gtk_widget_set_tooltip_text(GTK_WIDGET(self->keep_seed),
                                _("Off: every picture gets a new random seed"));
    gtk_box_append(GTK_BOX(form), GTK_WIDGET(self->keep_seed));

    self->guidance = spin(0, 30, 0.5, 1);
    gtk_spin_button_set_value(self->guidance, 1);
    self->guidance_row = row(_("_Guidance"), GTK_WIDGET(self->guidance), NULL);
    gtk_box_append(GTK_BOX(form), self->guidance_row);

    /* the LoRA (chosen in the model's menu) and its strength */
    self->lora_strength = spin(-4, 4, 0.05, 2);
    gtk_spin_button_set_value(self->lora_strength, 1);
    self->lora_label = GTK_LABEL(gtk_label_new(NULL));
    gtk_label_set_ellipsize(self->lora_label, PANGO_ELLIPSIZE_MIDDLE);
    gtk_label_set_max_width_chars(self->lora_label, 18);
    gtk_widget_add_css_class(GTK_WIDGET(self->lora_label), "dim-label");
    GtkWidget *lb = gtk_box_new(GTK_ORIENTATION_HORIZONTAL, 6);
    gtk_box_append(GTK_BOX(lb), GTK_WIDGET(self->lora_label));
    gtk_box_append(GTK_BOX(lb), GTK_WIDGET(self->lora_strength));
    self->lora_row =
        row(_("_LoRA"), lb, _("How strongly the LoRA applies: 1 as trained, 0 not at all"));
    gtk_label_set_mnemonic_widget(GTK_LABEL(gtk_widget_get_first_child(self->lora_row)),
                                  GTK_WIDGET(self->lora_strength));
    gtk_widget_set_visible(self->lora_row, FALSE);
    g_signal_connect(self->lora_strength, "value-changed", G_CALLBACK(lora_strength_changed), self);
    gtk_box_append(GTK_BOX(form), self->lora_row);

    /* the dropped picture */
    self->start_box = gtk_box_new(GTK_ORIENTATION_VERTICAL, 6);
    gtk_box_append(GTK_BOX(self->start_box), heading(_("Start Picture")));
    GtkWidget *sp = gtk_box_new(GTK_ORIENTATION_HORIZONTAL, 8);
    self->start_picture = GTK_PICTURE(gtk_picture_new());
    gtk_picture_set_can_shrink(self->start_picture, TRUE);
    gtk_picture_set_content_fit(self->start_picture, GTK_CONTENT_FIT_COVER);
    gtk_widget_set_size_request(GTK_WIDGET(self->start_picture), 56, 56);
    self->start_label = GTK_LABEL(gtk_label_new(NULL));
    gtk_label_set_ellipsize(self->start_label, PANGO_ELLIPSIZE_MIDDLE);
    gtk_label_set_xalign(self->start_label, 0);
    gtk_widget_set_hexpand(GTK_WIDGET(self->start_label), TRUE);
    GtkWidget *clear = gtk_button_new_from_icon_name("window-close-symbolic");
    gtk_widget_add_css_class(clear, "flat");
    gtk_widget_set_valign(clear, GTK_ALIGN_CENTER);
    gtk_widget_set_tooltip_text(clear, _("Start from noise again"));
    gtk_actionable_set_action_name(GTK_ACTIONABLE(clear), "imagine.clear-start");
    gtk_box_append(GTK_BOX(sp), GTK_WIDGET(self->start_picture));
    gtk_box_append(GTK_BOX(sp), GTK_WIDGET(self->start_label));
    gtk_box_append(GTK_BOX(sp), clear);
    gtk_box_append(GTK_BOX(self->start_box), sp);
    self->as_reference =
        GTK_CHECK_BUTTON(gtk_check_button_new_with_mnemonic(_("Use as _reference (edit)")));
    gtk_widget_set_tooltip_text(GTK_WIDGET(self->as_reference),
                                _("On: the prompt says how to change this picture. Off: the "
                                  "picture is the start of the new one"));
    g_signal_connect_swapped(self->as_reference, "toggled", G_CALLBACK(update_state), self);
    gtk_box_append(GTK_BOX(self->start_box), GTK_WIDGET(self->as_reference));
    self->strength = GTK_SCALE(gtk_scale_new_with_range(GTK_ORIENTATION_HORIZONTAL, 0, 1, 0.05));
    gtk_range_set_value(GTK_RANGE(self->strength), 0.6);
    gtk_scale_set_digits(self->strength, 2);
    gtk_scale_set_draw_value(self->strength, TRUE);
    gtk_widget_set_size_request(GTK_WIDGET(self->strength), 140, -1);
    self->strength_row = row(_("St_rength"), GTK_WIDGET(self->strength),
                             _("How much changes: 0 keeps the start picture, 1 ignores it"));
    gtk_box_append(GTK_BOX(self->start_box), self->strength_row);
    gtk_box_append(GTK_BOX(form), self->start_box);

    return form;
}

static GtkWidget *icon_button(const char *icon, const char *tip, const char *action)
{
    GtkWidget *b = gtk_button_new_from_icon_name(icon);
    gtk_widget_set_tooltip_text(b, tip);
    gtk_actionable_set_action_name(GTK_ACTIONABLE(b), action);
    gtk_widget_add_css_class(b, "flat");
    gtk_accessible_update_property(GTK_ACCESSIBLE(b), GTK_ACCESSIBLE_PROPERTY_LABEL, tip, -1);
    return b;
}

static GtkWidget *flat_button(const char *mnemonic, const char *action, const char *tip)
{
    GtkWidget *b = gtk_button_new_with_mnemonic(mnemonic);
    gtk_actionable_set_action_name(GTK_ACTIONABLE(b), action);
    gtk_widget_add_css_class(b, "flat");
    if (tip)
        gtk_widget_set_tooltip_text(b, tip);
    return b;
}

static void rlx_imagine_pane_init(RlxImaginePane *self)
{
    self->seconds_left = -1;
    g_queue_init(&self->thumbs_todo);
    self->imaginer = rlx_imaginer_new();
    g_signal_connect(self->imaginer, "loading", G_CALLBACK(on_loading), self);
    g_signal_connect(self->imaginer, "model-ready", G_CALLBACK(on_model_ready), self);
    g_signal_connect(self->imaginer, "note", G_CALLBACK(on_note), self);
    g_signal_connect(self->imaginer, "progress", G_CALLBACK(on_progress), self);
    g_signal_connect(self->imaginer, "finished", G_CALLBACK(on_finished), self);
    g_signal_connect(self->imaginer, "stopped", G_CALLBACK(on_stopped), self);
    g_signal_connect(self->imaginer, "failed", G_CALLBACK(on_failed), self);
    g_signal_connect(self->imaginer, "memory", G_CALLBACK(on_memory), self);

    /* the form beside the picture; in a window too narrow for both (the
     * window goes down to 360 px), one at a time */
    self->box = adw_leaflet_new();
    adw_leaflet_set_can_navigate_back(ADW_LEAFLET(self->box), TRUE);
    adw_leaflet_set_can_unfold(ADW_LEAFLET(self->box), TRUE);
    g_signal_connect_swapped(self->box, "notify::folded", G_CALLBACK(update_state), self);
    gtk_widget_set_parent(self->box, GTK_WIDGET(self));

    /* left: the form, scrolled, with Generate and Stop under it */
    GtkWidget *side = gtk_box_new(GTK_ORIENTATION_VERTICAL, 0);
    gtk_widget_set_size_request(side, PANEL_WIDTH, -1);
    /* the picture takes the room, not the form (whose buttons expand) */
    gtk_widget_set_hexpand(side, FALSE);
    gtk_widget_add_css_class(side, "rlx-imagine-form");
    GtkWidget *form_scroll = gtk_scrolled_window_new();
    gtk_scrolled_window_set_policy(GTK_SCROLLED_WINDOW(form_scroll), GTK_POLICY_NEVER,
                                   GTK_POLICY_AUTOMATIC);
    gtk_widget_set_vexpand(form_scroll, TRUE);
    gtk_scrolled_window_set_child(GTK_SCROLLED_WINDOW(form_scroll), build_form(self));
    gtk_box_append(GTK_BOX(side), form_scroll);
    GtkWidget *buttons = gtk_box_new(GTK_ORIENTATION_HORIZONTAL, 8);
    gtk_widget_set_margin_start(buttons, 12);
    gtk_widget_set_margin_end(buttons, 12);
    gtk_widget_set_margin_top(buttons, 8);
    gtk_widget_set_margin_bottom(buttons, 12);
    self->generate_button = GTK_BUTTON(gtk_button_new_with_mnemonic(_("_Generate")));
    gtk_actionable_set_action_name(GTK_ACTIONABLE(self->generate_button), "imagine.generate");
    gtk_widget_add_css_class(GTK_WIDGET(self->generate_button), "suggested-action");
    gtk_widget_add_css_class(GTK_WIDGET(self->generate_button), "pill");
    gtk_widget_set_hexpand(GTK_WIDGET(self->generate_button), TRUE);
    self->stop_button = gtk_button_new_with_mnemonic(_("_Stop"));
    gtk_actionable_set_action_name(GTK_ACTIONABLE(self->stop_button), "imagine.stop");
    gtk_widget_add_css_class(self->stop_button, "destructive-action");
    gtk_widget_add_css_class(self->stop_button, "pill");
    gtk_widget_set_tooltip_text(self->stop_button, _("Stop after this step (Escape)"));
    gtk_box_append(GTK_BOX(buttons), GTK_WIDGET(self->generate_button));
    gtk_box_append(GTK_BOX(buttons), self->stop_button);
    gtk_box_append(GTK_BOX(side), buttons);
    adw_leaflet_append(ADW_LEAFLET(self->box), side);
    AdwLeafletPage *sep =
        adw_leaflet_append(ADW_LEAFLET(self->box), gtk_separator_new(GTK_ORIENTATION_VERTICAL));
    adw_leaflet_page_set_navigatable(sep, FALSE);

    /* right: the picture, its progress and details, the gallery */
    GtkWidget *main = gtk_box_new(GTK_ORIENTATION_VERTICAL, 0);
    gtk_widget_set_hexpand(main, TRUE);
    self->stack = GTK_STACK(gtk_stack_new());
    gtk_widget_set_vexpand(GTK_WIDGET(self->stack), TRUE);
    self->empty_page = ADW_STATUS_PAGE(adw_status_page_new());
    adw_status_page_set_icon_name(self->empty_page, "rlx-imagine-symbolic");
    adw_status_page_set_title(self->empty_page, _("Imagine"));
    gtk_widget_add_css_class(GTK_WIDGET(self->empty_page), "rlx-placeholder");
    gtk_widget_add_css_class(GTK_WIDGET(self->empty_page), "compact");
    gtk_stack_add_named(self->stack, GTK_WIDGET(self->empty_page), "empty");

    GtkWidget *pic_box = gtk_box_new(GTK_ORIENTATION_VERTICAL, 6);
    self->picture = GTK_PICTURE(gtk_picture_new());
    gtk_picture_set_can_shrink(self->picture, TRUE);
    gtk_picture_set_content_fit(self->picture, GTK_CONTENT_FIT_CONTAIN);
    gtk_widget_set_vexpand(GTK_WIDGET(self->picture), TRUE);
    gtk_widget_set_margin_start(GTK_WIDGET(self->picture), 12);
    gtk_widget_set_margin_end(GTK_WIDGET(self->picture), 12);
    gtk_widget_set_margin_top(GTK_WIDGET(self->picture), 12);
    gtk_box_append(GTK_BOX(pic_box), GTK_WIDGET(self->picture));
    self->details_bar = gtk_box_new(GTK_ORIENTATION_VERTICAL, 4);
    gtk_widget_set_margin_start(self->details_bar, 12);
    gtk_widget_set_margin_end(self->details_bar, 12);
    self->details = GTK_LABEL(gtk_label_new(NULL));
    gtk_label_set_xalign(self->details, 0);
    gtk_label_set_wrap(self->details, TRUE);
    gtk_label_set_lines(self->details, 3);
    gtk_label_set_ellipsize(self->details, PANGO_ELLIPSIZE_END);
    gtk_widget_add_css_class(GTK_WIDGET(self->details), "caption");
    gtk_box_append(GTK_BOX(self->details_bar), GTK_WIDGET(self->details));
    GtkWidget *acts = gtk_box_new(GTK_ORIENTATION_HORIZONTAL, 4);
    gtk_box_append(GTK_BOX(acts), flat_button(_("_Use These Settings Again"), "imagine.reuse",
                                              _("Put this picture's prompt and settings in the "
                                                "form")));
    /* icons with their names as tooltips: the row fits an 800-pixel window */
    gtk_box_append(GTK_BOX(acts), icon_button("document-save-as-symbolic", _("Save As… (Ctrl+S)"),
                                              "imagine.save"));
    gtk_box_append(
        GTK_BOX(acts),
        icon_button("edit-copy-symbolic", _("Copy the Picture (Ctrl+Shift+C)"), "imagine.copy"));
    gtk_box_append(GTK_BOX(acts),
                   icon_button("user-trash-symbolic", _("Delete the Picture from the Gallery"),
                               "imagine.delete"));
    /* a narrow window scrolls the buttons instead of being held wide */
    GtkWidget *acts_scroll = gtk_scrolled_window_new();
    gtk_scrolled_window_set_policy(GTK_SCROLLED_WINDOW(acts_scroll), GTK_POLICY_EXTERNAL,
                                   GTK_POLICY_NEVER);
    gtk_scrolled_window_set_propagate_natural_height(GTK_SCROLLED_WINDOW(acts_scroll), TRUE);
    gtk_scrolled_window_set_child(GTK_SCROLLED_WINDOW(acts_scroll), acts);
    gtk_box_append(GTK_BOX(self->details_bar), acts_scroll);
    gtk_widget_set_visible(self->details_bar, FALSE);
    gtk_box_append(GTK_BOX(pic_box), self->details_bar);
    gtk_stack_add_named(self->stack, pic_box, "picture");

    self->error_page = ADW_STATUS_PAGE(adw_status_page_new());
    adw_status_page_set_icon_name(self->error_page, "dialog-warning-symbolic");
    gtk_widget_add_css_class(GTK_WIDGET(self->error_page), "compact");
    GtkWidget *retry_b = gtk_button_new_with_mnemonic(_("_Retry"));
    gtk_actionable_set_action_name(GTK_ACTIONABLE(retry_b), "imagine.retry");
    gtk_widget_add_css_class(retry_b, "pill");
    gtk_widget_set_halign(retry_b, GTK_ALIGN_CENTER);
    adw_status_page_set_child(self->error_page, retry_b);
    gtk_stack_add_named(self->stack, GTK_WIDGET(self->error_page), "error");
    gtk_stack_set_visible_child_name(self->stack, "empty");

    self->toast_overlay = ADW_TOAST_OVERLAY(adw_toast_overlay_new());
    adw_toast_overlay_set_child(self->toast_overlay, GTK_WIDGET(self->stack));
    gtk_widget_set_vexpand(GTK_WIDGET(self->toast_overlay), TRUE);
    gtk_box_append(GTK_BOX(main), GTK_WIDGET(self->toast_overlay));
    rlx_toasts_init(&self->toasts, self->toast_overlay, GTK_WIDGET(self));

    GtkWidget *status_row = gtk_box_new(GTK_ORIENTATION_HORIZONTAL, 6);
    self->back_button = gtk_button_new_from_icon_name("go-previous-symbolic");
    gtk_widget_set_tooltip_text(self->back_button, _("The prompt and settings"));
    gtk_widget_add_css_class(self->back_button, "flat");
    gtk_widget_set_valign(self->back_button, GTK_ALIGN_CENTER);
    gtk_widget_set_margin_start(self->back_button, 6);
    g_signal_connect_swapped(self->back_button, "clicked", G_CALLBACK(show_form), self);
    gtk_box_append(GTK_BOX(status_row), self->back_button);
    GtkWidget *status = gtk_box_new(GTK_ORIENTATION_VERTICAL, 4);
    gtk_widget_set_hexpand(status, TRUE);
    gtk_box_append(GTK_BOX(status_row), status);
    gtk_widget_set_margin_start(status, 12);
    gtk_widget_set_margin_end(status, 12);
    gtk_widget_set_margin_top(status, 6);
    gtk_widget_set_margin_bottom(status, 6);
    self->status_label = GTK_LABEL(gtk_label_new(NULL));
    gtk_label_set_xalign(self->status_label, 0);
    gtk_label_set_ellipsize(self->status_label, PANGO_ELLIPSIZE_END);
    gtk_widget_add_css_class(GTK_WIDGET(self->status_label), "dim-label");
    gtk_widget_add_css_class(GTK_WIDGET(self->status_label), "numeric");
    gtk_box_append(GTK_BOX(status), GTK_WIDGET(self->status_label));
    self->progress = GTK_PROGRESS_BAR(gtk_progress_bar_new());
    gtk_widget_set_visible(GTK_WIDGET(self->progress), FALSE);
    gtk_box_append(GTK_BOX(status), GTK_WIDGET(self->progress));
    gtk_box_append(GTK_BOX(main), status_row);

    /* the gallery: one row of thumbnails, newest first, scrolled sideways */
    self->gallery = GTK_FLOW_BOX(gtk_flow_box_new());
    gtk_orientable_set_orientation(GTK_ORIENTABLE(self->gallery), GTK_ORIENTATION_VERTICAL);
    gtk_flow_box_set_min_children_per_line(self->gallery, 1);
    gtk_flow_box_set_max_children_per_line(self->gallery, 1);
    gtk_flow_box_set_selection_mode(self->gallery, GTK_SELECTION_SINGLE);
    gtk_flow_box_set_activate_on_single_click(self->gallery, TRUE);
    gtk_flow_box_set_column_spacing(self->gallery, 6);
    gtk_widget_set_halign(GTK_WIDGET(self->gallery), GTK_ALIGN_START);
    gtk_widget_add_css_class(GTK_WIDGET(self->gallery), "rlx-gallery");
    g_signal_connect(self->gallery, "child-activated", G_CALLBACK(on_child_activated), self);
    self->gallery_scroll = gtk_scrolled_window_new();
    gtk_scrolled_window_set_policy(GTK_SCROLLED_WINDOW(self->gallery_scroll), GTK_POLICY_AUTOMATIC,
                                   GTK_POLICY_NEVER);
    gtk_scrolled_window_set_child(GTK_SCROLLED_WINDOW(self->gallery_scroll),
                                  GTK_WIDGET(self->gallery));
    gtk_widget_set_size_request(self->gallery_scroll, -1, THUMB + 30);
    self->gallery_stack = gtk_stack_new();
    GtkWidget *none = gtk_label_new(_("The pictures you make are kept here."));
    gtk_label_set_wrap(GTK_LABEL(none), TRUE);
    gtk_label_set_justify(GTK_LABEL(none), GTK_JUSTIFY_CENTER);
    gtk_widget_add_css_class(none, "dim-label");
    gtk_stack_add_named(GTK_STACK(self->gallery_stack), none, "none");
    gtk_stack_add_named(GTK_STACK(self->gallery_stack), self->gallery_scroll, "gallery");
    gtk_box_append(GTK_BOX(main), gtk_separator_new(GTK_ORIENTATION_HORIZONTAL));
    gtk_box_append(GTK_BOX(main), self->gallery_stack);
    adw_leaflet_append(ADW_LEAFLET(self->box), main);
    self->main_page = main;

    GtkDropTarget *drop = gtk_drop_target_new(G_TYPE_FILE, GDK_ACTION_COPY);
    g_signal_connect(drop, "drop", G_CALLBACK(on_drop), self);
    gtk_widget_add_controller(GTK_WIDGET(self), GTK_EVENT_CONTROLLER(drop));
    update_state(self);
}

static void rlx_imagine_pane_dispose(GObject *o)
{
    RlxImaginePane *self = RLX_IMAGINE_PANE(o);
    if (self->settings)
        g_signal_handlers_disconnect_by_data(self->settings, self);
    if (self->imaginer) {
        g_signal_handlers_disconnect_by_data(self->imaginer, self);
        g_clear_object(&self->imaginer);
    }
    if (self->box)
        g_signal_handlers_disconnect_by_data(self->box, self);
    g_clear_handle_id(&self->tick, g_source_remove);
    g_clear_handle_id(&self->focus_idle, g_source_remove);
    g_clear_handle_id(&self->lora_wait, g_source_remove);
    g_clear_handle_id(&self->thumbs_idle, g_source_remove);
    g_queue_clear_full(&self->thumbs_todo, g_object_unref);
    rlx_toasts_clear(&self->toasts);
    self->shown = NULL;
    g_clear_pointer(&self->box, gtk_widget_unparent);
    G_OBJECT_CLASS(rlx_imagine_pane_parent_class)->dispose(o);
}

static void rlx_imagine_pane_finalize(GObject *o)
{
    RlxImaginePane *self = RLX_IMAGINE_PANE(o);
    g_clear_object(&self->settings);
    g_free(self->model);
    g_free(self->model_name);
    g_free(self->start_path);
    g_free(self->retry_what);
    rlx_imagine_settings_free(self->last);
    G_OBJECT_CLASS(rlx_imagine_pane_parent_class)->finalize(o);
}

static gboolean focus_prompt(gpointer data)
{
    RlxImaginePane *self = data;
    self->focus_idle = 0;
    GtkWidget *focus = gtk_root_get_focus(gtk_widget_get_root(GTK_WIDGET(self)));
    if (gtk_widget_get_mapped(GTK_WIDGET(self)) &&
        (!focus || !gtk_widget_is_ancestor(focus, GTK_WIDGET(self->prompt))))
        gtk_widget_grab_focus(GTK_WIDGET(self->prompt));
    return G_SOURCE_REMOVE;
}

static void on_map(GtkWidget *w)
{
    RlxImaginePane *self = RLX_IMAGINE_PANE(w);
    GTK_WIDGET_CLASS(rlx_imagine_pane_parent_class)->map(w);
    rlx_toasts_flush(&self->toasts);
    /* the page opens ready for its prompt; after the stack's own focus
     * move, which comes once the page is shown */
    if (!self->focus_idle)
        self->focus_idle = g_idle_add(focus_prompt, self);
}

static void rlx_imagine_pane_class_init(RlxImaginePaneClass *klass)
{
    GObjectClass *oc = G_OBJECT_CLASS(klass);
    GtkWidgetClass *wc = GTK_WIDGET_CLASS(klass);
    oc->dispose = rlx_imagine_pane_dispose;
    oc->finalize = rlx_imagine_pane_finalize;
    wc->map = on_map;
    gtk_widget_class_set_layout_manager_type(wc, GTK_TYPE_BIN_LAYOUT);
    static const char *const actions[] = {
        "imagine.generate",     "imagine.stop",  "imagine.model", "imagine.model-folder",
        "imagine.text-encoder", "imagine.vae",   "imagine.dice",  "imagine.preview-decoder",
        "imagine.reuse",        "imagine.save",  "imagine.copy",  "imagine.delete",
        "imagine.clear-start",  "imagine.retry", "imagine.lora",  "imagine.lora-none",
    };
    for (size_t i = 0; i < G_N_ELEMENTS(actions); i++)
        gtk_widget_class_install_action(wc, actions[i], NULL, act);
    gtk_widget_class_add_binding_action(wc, GDK_KEY_Return, GDK_CONTROL_MASK, "imagine.generate",
                                        NULL);
    gtk_widget_class_add_binding_action(wc, GDK_KEY_KP_Enter, GDK_CONTROL_MASK, "imagine.generate",
                                        NULL);
    gtk_widget_class_add_binding_action(wc, GDK_KEY_Escape, 0, "imagine.stop", NULL);
    gtk_widget_class_add_binding_action(wc, GDK_KEY_s, GDK_CONTROL_MASK, "imagine.save", NULL);
    gtk_widget_class_add_binding_action(wc, GDK_KEY_C, GDK_CONTROL_MASK | GDK_SHIFT_MASK,
                                        "imagine.copy", NULL);
    signals[SIG_MEMORY] = g_signal_new("memory", G_TYPE_FROM_CLASS(klass), G_SIGNAL_RUN_LAST, 0,
                                       NULL, NULL, NULL, G_TYPE_NONE, 1, G_TYPE_POINTER);
}
