#include "rlx-segment-pane.h"
#include "rlx-segmenter.h"
#include "rlx-toasts.h"

#include "backends/base/status.h"
#include "engine/image/image.h"

#include <math.h>
#include <string.h>

#include <glib/gi18n.h>

#define MAX_OBJECTS 16
#define DRAG_SLOP   4.0 /* px: a press that moves less is a click */

/* ---- state -------------------------------------------------------------------- */

/* One object being cut out: its prompt, the proposals the model gave for
 * the newest prompt, the chosen one, and its overlay. */
typedef struct {
    RlxSegmentPrompt prompt;
    GPtrArray *proposals; /* RlxSegmentProposal *, best first; NULL: none yet */
    guint shown_serial;   /* the serial of the prompt that gave them */
    guint chosen;
    GdkTexture *overlay; /* the chosen mask in the object's colour */
} Obj;

/* What undo and redo restore: every object's prompt and which is current,
 * and the masks that were shown for it (so a refined mask comes back as it
 * was, not decoded again from the points alone); proposals NULL where the
 * masks of that prompt had not arrived. */
typedef struct {
    RlxSegmentPrompt prompts[MAX_OBJECTS];
    GPtrArray *proposals[MAX_OBJECTS];
    guint chosen[MAX_OBJECTS];
    int n_objects, current;
} State;

static void state_clear(State *st)
{
    for (int i = 0; i < MAX_OBJECTS; i++)
        g_clear_pointer(&st->proposals[i], g_ptr_array_unref);
}

/* The newest states of an undo or redo stack keep their masks; older ones
 * keep only their prompts (decoded again when reached): a mask is the
 * picture's size, and a long session of clicks on a large photo would
 * otherwise hold gigabytes. */
#define UNDO_MASKS_KEPT 8

static void push_state(GArray *stack, State *st)
{
    g_array_append_val(stack, *st);
    if (stack->len > UNDO_MASKS_KEPT)
        state_clear(&g_array_index(stack, State, stack->len - 1 - UNDO_MASKS_KEPT));
}

#define RLX_TYPE_SEGMENT_VIEW (rlx_segment_view_get_type())
G_DECLARE_FINAL_TYPE(RlxSegmentView, rlx_segment_view, RLX, SEGMENT_VIEW, GtkWidget)

struct _RlxSegmentPane {
    GtkWidget parent_instance;

    GtkWidget *box; /* the only child */
    GtkButton *model_button;
    GtkLabel *status_label;
    GtkButton *proposal_button;
    GtkProgressBar *progress;
    GtkStack *stack;
    AdwStatusPage *empty_page;
    RlxSegmentView *view;
    AdwToastOverlay *toast_overlay;
    RlxToasts toasts;

    GSettings *settings; /* nullable */
    RlxSegmenter *segmenter;
    char *model;         /* the chosen model, or NULL */
    char *model_name;    /* "SAM vit_b", once loaded */
    char *image_path;    /* the open image, or NULL */
    GdkTexture *picture; /* as decoded */
    gboolean encoding, model_loading;
    gint64 busy_since_us;
    guint pulse;

    /* "segment everything": its masks (RlxSegmentProposal *, largest first),
     * the one picked with a click (-1: none) and their layers */
    GPtrArray *all;
    int all_picked;
    GdkTexture *all_overlay, *pick_overlay;
    gboolean all_running;

    /* "remove background" (an .onnx model): the picture with the model's
     * alpha, drawn over a checkerboard, and that alpha (width x height) */
    GdkTexture *cutout;
    GBytes *alpha;

    Obj objects[MAX_OBJECTS];
    int n_objects, current;
    guint serial;        /* of the newest prompt sent */
    GArray *undo, *redo; /* State */
};

G_DEFINE_FINAL_TYPE(RlxSegmentPane, rlx_segment_pane, GTK_TYPE_WIDGET)

enum { SIG_MEMORY, N_SIGNALS };
static guint signals[N_SIGNALS];

/* The objects' colours: a palette that reads on photos (Tango-ish). */
static const GdkRGBA palette[] = {
    {0.20f, 0.52f, 0.89f, 1}, {0.96f, 0.47f, 0.00f, 1}, {0.46f, 0.31f, 0.48f, 1},
    {0.93f, 0.20f, 0.29f, 1}, {0.31f, 0.60f, 0.02f, 1}, {0.76f, 0.49f, 0.07f, 1},
    {0.02f, 0.60f, 0.60f, 1}, {0.80f, 0.36f, 0.69f, 1},
};

static void toast(RlxSegmentPane *self, const char *text)
{
    rlx_toasts_show(&self->toasts, text, ADW_TOAST_PRIORITY_NORMAL, NULL, NULL);
}

static void toast_error(RlxSegmentPane *self, const char *text)
{
    rlx_toasts_show(&self->toasts, text, ADW_TOAST_PRIORITY_HIGH, NULL, NULL);
}

static void obj_clear_result(Obj *o)
{
    g_clear_pointer(&o->proposals, g_ptr_array_unref);
    g_clear_object(&o->overlay);
    o->chosen = 0;
}

/* ---- the picture ---------------------------------------------------------------- */

struct _RlxSegmentView {
    GtkWidget parent_instance;
    RlxSegmentPane *pane; /* not owned */
    double zoom;          /* 1: the picture fits */
    double pan_x, pan_y;  /* px */
    /* a press of the primary button: a click, a box, or (with Ctrl) a pan */
    gboolean pressing, boxing, panning;
    double x0, y0, x1, y1; /* widget px */
    double pan_x0, pan_y0;
};

G_DEFINE_FINAL_TYPE(RlxSegmentView, rlx_segment_view, GTK_TYPE_WIDGET)

/* Where the picture is drawn: scale (widget px per image px) and origin. */
static gboolean view_geometry(RlxSegmentView *v, double *scale, double *ox, double *oy)
{
    GdkTexture *t = v->pane ? v->pane->picture : NULL;
    if (!t)
        return FALSE;
    double W = gtk_widget_get_width(GTK_WIDGET(v)), H = gtk_widget_get_height(GTK_WIDGET(v));
    double iw = gdk_texture_get_width(t), ih = gdk_texture_get_height(t);
    if (W < 1 || H < 1)
        return FALSE;
    double fit = MIN(W / iw, H / ih);
    *scale = fit * v->zoom;
    *ox = (W - iw * *scale) / 2 + v->pan_x;
    *oy = (H - ih * *scale) / 2 + v->pan_y;
    return TRUE;
}

static void add_dot(GtkSnapshot *s, double x, double y, const GdkRGBA *fill)
{
    static const GdkRGBA white = {1, 1, 1, 1};
    GskRoundedRect rr;
    gsk_rounded_rect_init_from_rect(&rr, &GRAPHENE_RECT_INIT((float)x - 7, (float)y - 7, 14, 14),
                                    7);
    gtk_snapshot_push_rounded_clip(s, &rr);
    gtk_snapshot_append_color(s, fill, &rr.bounds);
    gtk_snapshot_pop(s);
    const float w[4] = {2, 2, 2, 2};
    const GdkRGBA c[4] = {white, white, white, white};
    gtk_snapshot_append_border(s, &rr, w, c);
}

static void add_frame(GtkSnapshot *s, double x0, double y0, double x1, double y1,
                      const GdkRGBA *colour)
{
    GskRoundedRect rr;
    gsk_rounded_rect_init_from_rect(&rr,
                                    &GRAPHENE_RECT_INIT((float)MIN(x0, x1), (float)MIN(y0, y1),
                                                        (float)fabs(x1 - x0), (float)fabs(y1 - y0)),
                                    0);
    const float w[4] = {2, 2, 2, 2};
    const GdkRGBA c[4] = {*colour, *colour, *colour, *colour};
    gtk_snapshot_append_border(s, &rr, w, c);
}

static void view_snapshot(GtkWidget *w, GtkSnapshot *s)
{
    RlxSegmentView *v = RLX_SEGMENT_VIEW(w);
    RlxSegmentPane *p = v->pane;
    double sc, ox, oy;
    if (!view_geometry(v, &sc, &ox, &oy))
        return;
    double iw = gdk_texture_get_width(p->picture), ih = gdk_texture_get_height(p->picture);
    graphene_rect_t r =
        GRAPHENE_RECT_INIT((float)ox, (float)oy, (float)(iw * sc), (float)(ih * sc));
    gtk_snapshot_push_clip(s, &GRAPHENE_RECT_INIT(0, 0, (float)gtk_widget_get_width(w),
                                                  (float)gtk_widget_get_height(w)));
    if (p->cutout) {
        /* the cut-out over a checkerboard, as image editors show transparency */
        static const GdkRGBA light = {0.80f, 0.80f, 0.80f, 1}, dark = {0.60f, 0.60f, 0.60f, 1};
        const float sq = 10;
        gtk_snapshot_push_repeat(s, &r,
                                 &GRAPHENE_RECT_INIT(r.origin.x, r.origin.y, 2 * sq, 2 * sq));
        gtk_snapshot_append_color(s, &light,
                                  &GRAPHENE_RECT_INIT(r.origin.x, r.origin.y, 2 * sq, 2 * sq));
        gtk_snapshot_append_color(s, &dark, &GRAPHENE_RECT_INIT(r.origin.x, r.origin.y, sq, sq));
        gtk_snapshot_append_color(s, &dark,
                                  &GRAPHENE_RECT_INIT(r.origin.x + sq, r.origin.y + sq, sq, sq));
        gtk_snapshot_pop(s);
        gtk_snapshot_append_texture(s, p->cutout, &r);
        gtk_snapshot_pop(s);
        return;
    }
    gtk_snapshot_append_texture(s, p->picture, &r);
    if (p->all) {
        /* everything: every mask, the picked one over them; no points */
        if (p->all_overlay)
            gtk_snapshot_append_texture(s, p->all_overlay, &r);
        if (p->pick_overlay)
            gtk_snapshot_append_texture(s, p->pick_overlay, &r);
        gtk_snapshot_pop(s);
        return;
    }
    for (int i = 0; i < p->n_objects; i++)
        if (p->objects[i].overlay)
            gtk_snapshot_append_texture(s, p->objects[i].overlay, &r);
    static const GdkRGBA green = {0.15f, 0.70f, 0.25f, 1}, red = {0.85f, 0.15f, 0.15f, 1};
    for (int i = 0; i < p->n_objects; i++) {
        const RlxSegmentPrompt *pr = &p->objects[i].prompt;
        const GdkRGBA *col = &palette[i % G_N_ELEMENTS(palette)];
        if (pr->has_box)
            add_frame(s, ox + pr->box[0] * sc, oy + pr->box[1] * sc, ox + pr->box[2] * sc,
                      oy + pr->box[3] * sc, col);
        for (int k = 0; k < pr->n_points; k++)
            add_dot(s, ox + pr->points[k].x * sc, oy + pr->points[k].y * sc,
                    pr->points[k].positive ? &green : &red);
    }
    if (v->boxing)
        add_frame(s, v->x0, v->y0, v->x1, v->y1, &palette[p->current % G_N_ELEMENTS(palette)]);
    gtk_snapshot_pop(s);
}

static void prompt_changed(RlxSegmentPane *self, gboolean refine);
static void push_undo(RlxSegmentPane *self);
static void update_state(RlxSegmentPane *self);
static void set_busy(RlxSegmentPane *self, gboolean busy);

/* widget px -> image px, clamped into the picture; FALSE when outside */
static gboolean to_image(RlxSegmentView *v, double x, double y, double *ix, double *iy)
{
    double sc, ox, oy;
    if (!view_geometry(v, &sc, &ox, &oy))
        return FALSE;
    double iw = gdk_texture_get_width(v->pane->picture),
           ih = gdk_texture_get_height(v->pane->picture);
    *ix = (x - ox) / sc;
    *iy = (y - oy) / sc;
    gboolean in = *ix >= 0 && *iy >= 0 && *ix <= iw && *iy <= ih;
    *ix = CLAMP(*ix, 0, iw);
    *iy = CLAMP(*iy, 0, ih);
    return in;
}

static void pick(RlxSegmentPane *self, double x, double y);

static void add_point(RlxSegmentPane *self, double x, double y, gboolean positive)
{
    if (!self->picture)
        return;
    if (self->all) {
        pick(self, x, y);
        return;
    }
    if (rlx_segmenter_removes_background(self->segmenter)) {
        toast(self, _("This model removes the background by itself: no clicks needed"));
        return;
    }
    if (!rlx_segmenter_is_ready(self->segmenter)) {
        toast(self, self->model ? _("The picture is still being encoded: click again in a moment")
                                : _("Choose a Segment Anything model first"));
        return;
    }
    Obj *o = &self->objects[self->current];
    if (o->prompt.n_points >= RLX_SEGMENT_MAX_POINTS) {
        toast(self, _("That is as many points as one object takes: start a new object (N)"));
        return;
    }
    push_undo(self);
    o->prompt.points[o->prompt.n_points++] = (RlxSegmentPoint){x, y, positive};
    prompt_changed(self, TRUE);
}

static void set_box(RlxSegmentPane *self, double x0, double y0, double x1, double y1)
{
    if (!rlx_segmenter_is_ready(self->segmenter) || self->all ||
        rlx_segmenter_removes_background(self->segmenter))
        return;
    push_undo(self);
    Obj *o = &self->objects[self->current];
    o->prompt.has_box = TRUE;
    o->prompt.box[0] = MIN(x0, x1), o->prompt.box[1] = MIN(y0, y1);
    o->prompt.box[2] = MAX(x0, x1), o->prompt.box[3] = MAX(y0, y1);
    prompt_changed(self, TRUE);
}

static void drag_begin(GtkGestureDrag *g, double x, double y, RlxSegmentView *v)
{
    GdkModifierType mods = gtk_event_controller_get_current_event_state(GTK_EVENT_CONTROLLER(g));
    guint button = gtk_gesture_single_get_current_button(GTK_GESTURE_SINGLE(g));
    gtk_widget_grab_focus(GTK_WIDGET(v)); /* the page's keys follow a click on the picture */
    v->pressing = TRUE;
    v->panning = button == GDK_BUTTON_MIDDLE || (mods & GDK_CONTROL_MASK);
    v->boxing = FALSE;
    v->x0 = v->x1 = x;
    v->y0 = v->y1 = y;
    v->pan_x0 = v->pan_x;
    v->pan_y0 = v->pan_y;
}

static void drag_update(GtkGestureDrag *g, double dx, double dy, RlxSegmentView *v)
{
    if (!v->pressing)
        return;
    v->x1 = v->x0 + dx;
    v->y1 = v->y0 + dy;
    if (v->panning) {
        v->pan_x = v->pan_x0 + dx;
        v->pan_y = v->pan_y0 + dy;
    } else if (fabs(dx) > DRAG_SLOP || fabs(dy) > DRAG_SLOP) {
        v->boxing = TRUE;
    }
    gtk_widget_queue_draw(GTK_WIDGET(v));
}

static void drag_end(GtkGestureDrag *g, double dx, double dy, RlxSegmentView *v)
{
    if (!v->pressing)
        return;
    v->pressing = FALSE;
    GdkModifierType mods = gtk_event_controller_get_current_event_state(GTK_EVENT_CONTROLLER(g));
    guint button = gtk_gesture_single_get_current_button(GTK_GESTURE_SINGLE(g));
    if (v->panning) {
        v->panning = FALSE;
        return;
    }
    double ax, ay, bx, by;
    if (v->boxing) {
        v->boxing = FALSE;
        to_image(v, v->x0, v->y0, &ax, &ay);
        to_image(v, v->x0 + dx, v->y0 + dy, &bx, &by);
        if (fabs(bx - ax) >= 2 && fabs(by - ay) >= 2)
            set_box(v->pane, ax, ay, bx, by);
        gtk_widget_queue_draw(GTK_WIDGET(v));
        return;
    }
    if (!to_image(v, v->x0, v->y0, &ax, &ay))
        return; /* a click beside the picture */
    gboolean negative = button == GDK_BUTTON_SECONDARY || (mods & GDK_SHIFT_MASK);
    add_point(v->pane, ax, ay, !negative);
}

static void view_zoom(RlxSegmentView *v, double factor, double at_x, double at_y)
{
    double sc, ox, oy;
    if (!view_geometry(v, &sc, &ox, &oy))
        return;
    double z = CLAMP(v->zoom * factor, 1.0, 32.0);
    if (z == v->zoom)
        return;
    /* the image point under (at_x, at_y) stays there */
    double ix = (at_x - ox) / sc, iy = (at_y - oy) / sc;
    v->zoom = z;
    double sc2, ox2, oy2;
    view_geometry(v, &sc2, &ox2, &oy2);
    v->pan_x += at_x - (ox2 + ix * sc2);
    v->pan_y += at_y - (oy2 + iy * sc2);
    if (z == 1.0)
        v->pan_x = v->pan_y = 0;
    gtk_widget_queue_draw(GTK_WIDGET(v));
}

static gboolean on_scroll(GtkEventControllerScroll *c, double dx, double dy, RlxSegmentView *v)
{
    GdkModifierType mods = gtk_event_controller_get_current_event_state(GTK_EVENT_CONTROLLER(c));
    if (!(mods & GDK_CONTROL_MASK))
        return FALSE;
    double x = gtk_widget_get_width(GTK_WIDGET(v)) / 2.0,
           y = gtk_widget_get_height(GTK_WIDGET(v)) / 2.0;
    GdkEvent *e = gtk_event_controller_get_current_event(GTK_EVENT_CONTROLLER(c));
    double ex, ey;
    if (e && gdk_event_get_position(e, &ex, &ey)) {
        graphene_point_t pt;
        GtkNative *n = gtk_widget_get_native(GTK_WIDGET(v));
        double nx, ny;
        gtk_native_get_surface_transform(n, &nx, &ny);
        if (gtk_widget_compute_point(GTK_WIDGET(n), GTK_WIDGET(v),
                                     &GRAPHENE_POINT_INIT((float)(ex - nx), (float)(ey - ny)), &pt))
            x = pt.x, y = pt.y;
    }
    view_zoom(v, dy < 0 ? 1.25 : 0.8, x, y);
    return TRUE;
}

static void rlx_segment_view_init(RlxSegmentView *v)
{
    v->zoom = 1;
    gtk_widget_set_hexpand(GTK_WIDGET(v), TRUE);
    gtk_widget_set_vexpand(GTK_WIDGET(v), TRUE);
    gtk_widget_set_focusable(GTK_WIDGET(v), TRUE);
    gtk_widget_set_overflow(GTK_WIDGET(v), GTK_OVERFLOW_HIDDEN);
    GtkGesture *drag = gtk_gesture_drag_new();
    gtk_gesture_single_set_button(GTK_GESTURE_SINGLE(drag), 0); /* any button */
    g_signal_connect(drag, "drag-begin", G_CALLBACK(drag_begin), v);
    g_signal_connect(drag, "drag-update", G_CALLBACK(drag_update), v);
    g_signal_connect(drag, "drag-end", G_CALLBACK(drag_end), v);
    gtk_widget_add_controller(GTK_WIDGET(v), GTK_EVENT_CONTROLLER(drag));
    GtkEventController *scroll =
        gtk_event_controller_scroll_new(GTK_EVENT_CONTROLLER_SCROLL_VERTICAL);
    g_signal_connect(scroll, "scroll", G_CALLBACK(on_scroll), v);
    gtk_widget_add_controller(GTK_WIDGET(v), scroll);
    gtk_widget_set_cursor_from_name(GTK_WIDGET(v), "crosshair");
}

static void rlx_segment_view_class_init(RlxSegmentViewClass *klass)
{
    GTK_WIDGET_CLASS(klass)->snapshot = view_snapshot;
}

/* ---- masks ---------------------------------------------------------------------- */

/* The chosen proposal's mask as a translucent layer in the object's colour. */
static GdkTexture *overlay_texture(const RlxSegmentProposal *p, const GdkRGBA *c, gboolean current)
{
    gsize n = 0;
    const uint8_t *m = g_bytes_get_data(p->mask, &n);
    gsize npix = (gsize)p->width * (gsize)p->height;
    uint8_t *rgba = g_try_malloc(npix * 4);
    if (!rgba || n < npix)
        return g_free(rgba), NULL;
    float a = current ? 0.5f : 0.35f;
    uint8_t px[4] = {(uint8_t)(c->red * a * 255), (uint8_t)(c->green * a * 255),
                     (uint8_t)(c->blue * a * 255), (uint8_t)(a * 255)};
    uint32_t on, off = 0;
    memcpy(&on, px, 4);
    uint32_t *d = (uint32_t *)rgba;
    for (gsize i = 0; i < npix; i++)
        d[i] = m[i] ? on : off;
    GBytes *b = g_bytes_new_take(rgba, npix * 4);
    GdkTexture *t = gdk_memory_texture_new(p->width, p->height, GDK_MEMORY_R8G8B8A8_PREMULTIPLIED,
                                           b, (gsize)p->width * 4);
    g_bytes_unref(b);
    return t;
}

static void refresh_overlays(RlxSegmentPane *self)
{
    for (int i = 0; i < self->n_objects; i++) {
        Obj *o = &self->objects[i];
        g_clear_object(&o->overlay);
        if (o->proposals && o->chosen < o->proposals->len)
            o->overlay = overlay_texture(o->proposals->pdata[o->chosen],
                                         &palette[i % G_N_ELEMENTS(palette)], i == self->current);
    }
    gtk_widget_queue_draw(GTK_WIDGET(self->view));
}

static const RlxSegmentProposal *chosen(RlxSegmentPane *self, int i)
{
    const Obj *o = &self->objects[i];
    return o->proposals && o->chosen < o->proposals->len ? o->proposals->pdata[o->chosen] : NULL;
}

/* refine: the prompt grew by a point or a box, so the mask shown (the
 * chosen proposal's low-res logits) goes with it as the mask prompt, as
 * SAM's predictor is used interactively; otherwise (undo, clear, a new
 * embedding) the points alone are decoded. */
static void prompt_changed(RlxSegmentPane *self, gboolean refine)
{
    Obj *o = &self->objects[self->current];
    if (o->prompt.n_points == 0 && !o->prompt.has_box) {
        obj_clear_result(o);
        refresh_overlays(self);
        update_state(self);
        return;
    }
    o->prompt.serial = ++self->serial;
    const RlxSegmentProposal *shown = chosen(self, self->current);
    rlx_segmenter_prompt(self->segmenter, &o->prompt,
                         refine && shown && !self->all ? shown->low_res : NULL);
    gtk_widget_queue_draw(GTK_WIDGET(self->view));
    update_state(self);
}

/* For the UI tests (G_MESSAGES_DEBUG=RlxStudio). */
static void log_masks(RlxSegmentPane *self, int i, const char *how)
{
    const RlxSegmentProposal *p = chosen(self, i);
    g_debug("segment masks: object %d, %u proposals, area %" G_GINT64_FORMAT
            ", box %d,%d,%d,%d, iou %.3f%s",
            i, self->objects[i].proposals ? self->objects[i].proposals->len : 0, p ? p->area : 0,
            p ? p->box[0] : -1, p ? p->box[1] : -1, p ? p->box[2] : -1, p ? p->box[3] : -1,
            p ? (double)p->iou : 0.0, how);
}

static void on_masks(RlxSegmenter *s, guint serial, GPtrArray *props, RlxSegmentPane *self)
{
    for (int i = 0; i < self->n_objects; i++) {
        Obj *o = &self->objects[i];
        if (o->prompt.serial != serial)
            continue;
        obj_clear_result(o);
        o->proposals = g_ptr_array_ref(props);
        o->shown_serial = serial;
        refresh_overlays(self);
        log_masks(self, i, "");
        update_state(self);
        return;
    }
}

/* ---- everything ---------------------------------------------------------------- */

/* Every mask in its colour, the larger under the smaller. */
static GdkTexture *all_texture(GPtrArray *all)
{
    const RlxSegmentProposal *p0 = all->pdata[0];
    gsize npix = (gsize)p0->width * (gsize)p0->height;
    uint32_t *d = g_try_malloc0(npix * 4);
    if (!d)
        return NULL;
    for (guint k = 0; k < all->len; k++) {
        const RlxSegmentProposal *p = all->pdata[k];
        const GdkRGBA *c = &palette[k % G_N_ELEMENTS(palette)];
        float a = 0.45f;
        uint8_t px[4] = {(uint8_t)(c->red * a * 255), (uint8_t)(c->green * a * 255),
                         (uint8_t)(c->blue * a * 255), (uint8_t)(a * 255)};
        uint32_t on;
        memcpy(&on, px, 4);
        const uint8_t *m = g_bytes_get_data(p->mask, NULL);
        for (gsize i = 0; i < npix; i++)
            if (m[i])
                d[i] = on;
    }
    GBytes *b = g_bytes_new_take(d, npix * 4);
    GdkTexture *t = gdk_memory_texture_new(p0->width, p0->height, GDK_MEMORY_R8G8B8A8_PREMULTIPLIED,
                                           b, (gsize)p0->width * 4);
    g_bytes_unref(b);
    return t;
}

static const RlxSegmentProposal *picked(RlxSegmentPane *self)
{
    return self->all && self->all_picked >= 0 && (guint)self->all_picked < self->all->len
               ? self->all->pdata[self->all_picked]
               : NULL;
}

static void leave_everything(RlxSegmentPane *self)
{
    g_clear_pointer(&self->all, g_ptr_array_unref);
    g_clear_object(&self->all_overlay);
    g_clear_object(&self->pick_overlay);
    self->all_picked = -1;
}

/* A click while everything is shown picks the smallest mask under it. */
static void pick(RlxSegmentPane *self, double x, double y)
{
    const RlxSegmentProposal *p0 = self->all->len ? self->all->pdata[0] : NULL;
    if (!p0)
        return;
    int ix = CLAMP((int)x, 0, p0->width - 1), iy = CLAMP((int)y, 0, p0->height - 1);
    size_t at = (size_t)iy * (size_t)p0->width + (size_t)ix;
    int best = -1;
    for (guint k = 0; k < self->all->len; k++) {
        const RlxSegmentProposal *p = self->all->pdata[k];
        const uint8_t *m = g_bytes_get_data(p->mask, NULL);
        if (m[at] && (best < 0 || p->area < ((RlxSegmentProposal *)self->all->pdata[best])->area))
            best = (int)k;
    }
    self->all_picked = best;
    g_clear_object(&self->pick_overlay);
    if (best >= 0) {
        static const GdkRGBA white = {1, 1, 1, 1};
        self->pick_overlay = overlay_texture(self->all->pdata[best], &white, TRUE);
    }
    g_debug("segment picked: mask %d of %u", best + 1, self->all->len); /* for the UI tests */
    gtk_widget_queue_draw(GTK_WIDGET(self->view));
    update_state(self);
}

static void on_everything(RlxSegmenter *s, GPtrArray *all, RlxSegmentPane *self)
{
    self->all_running = FALSE;
    self->encoding = FALSE;
    set_busy(self, FALSE);
    leave_everything(self);
    self->all = g_ptr_array_ref(all);
    if (all->len)
        self->all_overlay = all_texture(all);
    g_debug("segment everything: %u masks", all->len); /* for the UI tests */
    if (!all->len) {
        /* nothing to pick from: back to clicking */
        leave_everything(self);
        toast(self, _("No object stood out clearly enough: click on one instead"));
    }
    gtk_widget_queue_draw(GTK_WIDGET(self->view));
    update_state(self);
}

/* ---- undo ----------------------------------------------------------------------- */

static State snapshot_state(RlxSegmentPane *self)
{
    State st = {.n_objects = self->n_objects, .current = self->current};
    for (int i = 0; i < self->n_objects; i++) {
        const Obj *o = &self->objects[i];
        st.prompts[i] = o->prompt;
        if (o->proposals && o->shown_serial == o->prompt.serial) {
            st.proposals[i] = g_ptr_array_ref(o->proposals);
            st.chosen[i] = o->chosen;
        }
    }
    return st;
}

static void push_undo(RlxSegmentPane *self)
{
    State st = snapshot_state(self);
    push_state(self->undo, &st);
    g_array_set_size(self->redo, 0);
}

/* Put a state back: objects whose prompt changed run again. */
static void restore(RlxSegmentPane *self, const State *st)
{
    for (int i = st->n_objects; i < self->n_objects; i++)
        obj_clear_result(&self->objects[i]);
    int old_n = self->n_objects;
    self->n_objects = st->n_objects;
    self->current = st->current;
    for (int i = 0; i < st->n_objects; i++) {
        Obj *o = &self->objects[i];
        gboolean same = i < old_n && o->prompt.n_points == st->prompts[i].n_points &&
                        o->prompt.has_box == st->prompts[i].has_box &&
                        memcmp(o->prompt.points, st->prompts[i].points,
                               sizeof(RlxSegmentPoint) * (size_t)o->prompt.n_points) == 0 &&
                        memcmp(o->prompt.box, st->prompts[i].box, sizeof o->prompt.box) == 0;
        if (same)
            continue;
        o->prompt = st->prompts[i];
        if (st->proposals[i]) {
            /* the masks shown then; a decode still running for the prompt
             * left behind is ignored (its serial no longer matches) */
            obj_clear_result(o);
            o->prompt.serial = o->shown_serial = ++self->serial;
            o->proposals = g_ptr_array_ref(st->proposals[i]);
            o->chosen = st->chosen[i] < o->proposals->len ? st->chosen[i] : 0;
            log_masks(self, i, " (as shown before)");
            continue;
        }
        o->prompt.serial = ++self->serial;
        int keep = self->current;
        self->current = i;
        prompt_changed(self, FALSE);
        self->current = keep;
    }
    refresh_overlays(self);
    update_state(self);
}

static void undo_or_redo(RlxSegmentPane *self, GArray *from, GArray *to)
{
    if (!from->len)
        return;
    State now = snapshot_state(self);
    push_state(to, &now);
    State st = g_array_index(from, State, from->len - 1);
    /* st owns its references now; the array's clear function sees none */
    memset(&g_array_index(from, State, from->len - 1), 0, sizeof(State));
    g_array_set_size(from, from->len - 1);
    restore(self, &st);
    state_clear(&st);
}

/* ---- the page's state ----------------------------------------------------------- */

static gboolean pulse(gpointer data)
{
    RlxSegmentPane *self = data;
    if (!self->all_running)
        gtk_progress_bar_pulse(self->progress);
    if (self->encoding) {
        int s = (int)((g_get_monotonic_time() - self->busy_since_us) / 1000000);
        g_autofree char *t =
            rlx_segmenter_removes_background(self->segmenter)
                ? g_strdup_printf(ngettext("Removing the background… %d second",
                                           "Removing the background… %d seconds", s),
                                  s)
                : g_strdup_printf(ngettext("Encoding the picture… %d second",
                                           "Encoding the picture… %d seconds", s),
                                  s);
        gtk_label_set_text(self->status_label, t);
    }
    return G_SOURCE_CONTINUE;
}

static void set_busy(RlxSegmentPane *self, gboolean busy)
{
    gtk_widget_set_visible(GTK_WIDGET(self->progress), busy);
    if (busy && !self->pulse) {
        self->busy_since_us = g_get_monotonic_time();
        self->pulse = g_timeout_add(150, pulse, self);
    } else if (!busy) {
        g_clear_handle_id(&self->pulse, g_source_remove);
    }
}

static void update_state(RlxSegmentPane *self)
{
    gboolean ready = rlx_segmenter_is_ready(self->segmenter);
    gboolean bg = rlx_segmenter_removes_background(self->segmenter);
    gtk_stack_set_visible_child_name(self->stack, self->picture ? "view" : "empty");
    g_autofree char *model_text = self->model_loading ? g_strdup(_("Loading the model…"))
                                  : self->model_name  ? g_strdup(self->model_name)
                                  : self->model       ? g_path_get_basename(self->model)
                                                      : g_strdup(_("Choose a Model…"));
    gtk_button_set_label(self->model_button, model_text);
    Obj *o = &self->objects[self->current];
    const RlxSegmentProposal *p = chosen(self, self->current);
    guint n = o->proposals ? o->proposals->len : 0;
    gtk_widget_set_visible(GTK_WIDGET(self->proposal_button), n > 1);
    if (n > 1) {
        /* Translators: which of the model's proposals is shown, "2 / 3" */
        g_autofree char *t = g_strdup_printf(_("Proposal %u / %u"), o->chosen + 1, n);
        gtk_button_set_label(self->proposal_button, t);
    }
    const RlxSegmentProposal *pk = picked(self);
    if (self->all_running) {
        /* the status is the progress's */
    } else if (self->all && !self->encoding) {
        g_autofree char *status =
            pk ? g_strdup_printf(
                     _("Mask %d of %u · predicted IoU %.2f · stability %.2f · %" G_GINT64_FORMAT
                       " pixels. Escape goes back to clicking."),
                     self->all_picked + 1, self->all->len, (double)pk->iou, (double)pk->stability,
                     pk->area)
               : g_strdup_printf(ngettext("%u mask. Click one to pick it; Escape goes back to "
                                          "clicking objects.",
                                          "%u masks. Click one to pick it; Escape goes back to "
                                          "clicking objects.",
                                          self->all->len),
                                 self->all->len);
        gtk_label_set_text(self->status_label, status);
    } else if (!self->encoding && bg) {
        g_autofree char *status = NULL;
        if (!self->picture)
            status = g_strdup(_("Open or drop a photo: its background is removed."));
        else if (self->alpha) {
            gsize npix = 0;
            const uint8_t *a = g_bytes_get_data(self->alpha, &npix);
            gsize fg = 0;
            for (gsize i = 0; i < npix; i++)
                fg += a[i] >= 128;
            /* Translators: after background removal; the share of the picture kept */
            status = g_strdup_printf(_("Background removed · the foreground is %.0f %% of the "
                                       "picture. Save or copy the cut-out."),
                                     npix ? 100.0 * (double)fg / (double)npix : 0.0);
        } else
            status = g_strdup("");
        gtk_label_set_text(self->status_label, status);
    } else if (!self->encoding) {
        g_autofree char *status = NULL;
        if (!self->model)
            status = g_strdup(_("Choose a Segment Anything model (.pth, .safetensors or a "
                                "Hugging Face folder) or a background-removal model (.onnx) "
                                "to start."));
        else if (!self->picture)
            status = g_strdup(_("Open or drop a photo."));
        else if (!ready)
            status = g_strdup(self->model_loading ? _("Loading the model…") : "");
        else if (p)
            /* Translators: object number, then the model's predicted quality */
            status = g_strdup_printf(
                _("Object %d · predicted IoU %.2f · stability %.2f · %" G_GINT64_FORMAT " pixels"),
                self->current + 1, (double)p->iou, (double)p->stability, p->area);
        else
            status = g_strdup(_("Click on an object. Right-click (or Shift+click) marks what is "
                                "not part of it; drag to draw a box."));
        gtk_label_set_text(self->status_label, status);
    }
    GtkWidget *w = GTK_WIDGET(self);
    gboolean any = FALSE;
    for (int i = 0; i < self->n_objects; i++)
        any = any || chosen(self, i);
    gtk_widget_action_set_enabled(w, "segment.undo", self->undo->len > 0);
    gtk_widget_action_set_enabled(w, "segment.redo", self->redo->len > 0);
    gtk_widget_action_set_enabled(w, "segment.clear",
                                  self->all || o->prompt.n_points > 0 || o->prompt.has_box);
    gtk_widget_action_set_enabled(w, "segment.everything", ready && !self->all_running && !bg);
    gtk_widget_action_set_enabled(w, "segment.new-object",
                                  self->n_objects < MAX_OBJECTS && chosen(self, self->current) &&
                                      !bg);
    gtk_widget_action_set_enabled(w, "segment.next-proposal", n > 1);
    if (self->all)
        any = pk != NULL, p = pk;
    if (bg)
        any = self->alpha != NULL, p = NULL;
    gtk_widget_action_set_enabled(w, "segment.save-mask", p != NULL || any);
    gtk_widget_action_set_enabled(w, "segment.save-cutout", any);
    gtk_widget_action_set_enabled(w, "segment.copy-cutout", any);
}

static void forget_objects(RlxSegmentPane *self)
{
    for (int i = 0; i < MAX_OBJECTS; i++) {
        obj_clear_result(&self->objects[i]);
        memset(&self->objects[i].prompt, 0, sizeof self->objects[i].prompt);
    }
    self->n_objects = 1;
    self->current = 0;
    g_array_set_size(self->undo, 0);
    g_array_set_size(self->redo, 0);
}

/* ---- the runner's reports ------------------------------------------------------- */

static void on_loading(RlxSegmenter *s, const char *what, double fraction, RlxSegmentPane *self)
{
    if (g_strcmp0(what, "model") == 0)
        self->model_loading = TRUE;
    if (g_strcmp0(what, "encoding") == 0)
        self->encoding = TRUE;
    set_busy(self, TRUE);
    if (g_strcmp0(what, "everything") == 0) {
        self->all_running = TRUE;
        gtk_progress_bar_set_fraction(self->progress, fraction);
        /* Translators: segment everything's progress */
        g_autofree char *t =
            g_strdup_printf(_("Segmenting everything… %d %%"), (int)(fraction * 100 + 0.5));
        gtk_label_set_text(self->status_label, t);
        update_state(self);
        return;
    }
    if (g_strcmp0(what, "model") == 0)
        gtk_label_set_text(self->status_label, _("Loading the model…"));
    else if (g_strcmp0(what, "image") == 0)
        gtk_label_set_text(self->status_label, _("Reading the picture…"));
    update_state(self);
}

static void clear_cutout(RlxSegmentPane *self)
{
    g_clear_object(&self->cutout);
    g_clear_pointer(&self->alpha, g_bytes_unref);
    gtk_widget_queue_draw(GTK_WIDGET(self->view));
}

static void on_cutout(RlxSegmenter *s, GdkTexture *cutout, GBytes *alpha, double seconds,
                      RlxSegmentPane *self)
{
    g_set_object(&self->cutout, cutout);
    g_clear_pointer(&self->alpha, g_bytes_unref);
    self->alpha = g_bytes_ref(alpha);
    g_debug("segment cutout: %dx%d in %.2f s", gdk_texture_get_width(cutout),
            gdk_texture_get_height(cutout), seconds); /* for the UI tests */
    gtk_widget_queue_draw(GTK_WIDGET(self->view));
    update_state(self);
}

static void on_model_ready(RlxSegmenter *s, const char *variant, RlxSegmentPane *self)
{
    self->model_loading = FALSE;
    g_free(self->model_name);
    if (rlx_segmenter_removes_background(s))
        /* Translators: the model's name, then what it does */
        self->model_name = g_strdup_printf(_("%s · Remove Background"), variant);
    else
        /* Translators: the model's kind, e.g. "SAM vit_b" */
        self->model_name = g_strdup_printf(_("SAM %s"), variant);
    /* a SAM model after a background remover: back to the picture; a
     * background remover after SAM: its clicks and masks are gone */
    if (!rlx_segmenter_removes_background(s)) {
        clear_cutout(self);
    } else {
        forget_objects(self);
        leave_everything(self);
        self->all_running = FALSE;
        gtk_widget_queue_draw(GTK_WIDGET(self->view));
    }
    if (!self->picture)
        set_busy(self, FALSE);
    g_autofree char *t = g_strdup_printf(_("%s is ready"), self->model_name);
    toast(self, t);
    update_state(self);
}

static void on_image_ready(RlxSegmenter *s, GdkTexture *t, RlxSegmentPane *self)
{
    g_set_object(&self->picture, t);
    clear_cutout(self);
    forget_objects(self);
    leave_everything(self);
    self->all_running = FALSE;
    self->view->zoom = 1;
    self->view->pan_x = self->view->pan_y = 0;
    if (!self->model)
        set_busy(self, FALSE);
    update_state(self);
    gtk_widget_queue_draw(GTK_WIDGET(self->view));
    gtk_widget_grab_focus(GTK_WIDGET(self->view));
}

static void on_encoded(RlxSegmenter *s, double seconds, RlxSegmentPane *self)
{
    self->encoding = FALSE;
    set_busy(self, FALSE);
    g_debug("segment encoded in %.2f s", seconds); /* for the UI tests */
    update_state(self);
    /* a prompt made before a device change runs again on the new embedding */
    for (int i = 0; i < self->n_objects; i++) {
        Obj *o = &self->objects[i];
        if (o->prompt.n_points || o->prompt.has_box) {
            int keep = self->current;
            self->current = i;
            prompt_changed(self, FALSE);
            self->current = keep;
        }
    }
}

static void on_failed(RlxSegmenter *s, int status, const char *what, const char *message,
                      RlxSegmentPane *self)
{
    g_autofree char *t = NULL;
    if (g_strcmp0(what, "model") == 0) {
        self->model_loading = FALSE;
        g_clear_pointer(&self->model_name, g_free);
        t = g_strdup_printf(_("Cannot load the model: %s"), message);
    } else if (g_strcmp0(what, "image") == 0) {
        t = g_strdup_printf(_("Cannot open the picture: %s"), message);
    } else if (g_strcmp0(what, "everything") == 0) {
        self->all_running = FALSE;
        t = g_strdup_printf(_("Cannot segment everything: %s"), message);
    } else if (g_strcmp0(what, "encode") == 0 && rlx_segmenter_removes_background(s)) {
        t = g_strdup_printf(_("Cannot remove the background: %s"), message);
    } else if (g_strcmp0(what, "encode") == 0) {
        t = g_strdup_printf(_("Cannot encode the picture: %s"), message);
    } else {
        t = g_strdup_printf(_("Cannot segment: %s"), message);
    }
    self->encoding = FALSE;
    set_busy(self, FALSE);
    toast_error(self, t);
    g_debug("segment failed: %s", t); /* for the UI tests */
    update_state(self);
}

static void on_memory(RlxSegmenter *s, const RlxMemoryInfo *m, RlxSegmentPane *self)
{
    g_signal_emit(self, signals[SIG_MEMORY], 0, m);
}

/* ---- model and image ------------------------------------------------------------ */

static void apply_model(RlxSegmentPane *self)
{
    if (!self->model)
        return;
    g_autofree char *dev = self->settings ? g_settings_get_string(self->settings, "device") : NULL;
    uint64_t budget = self->settings
                          ? (uint64_t)g_settings_get_int(self->settings, "memory-budget-mib") << 20
                          : 0;
    int threads = self->settings ? g_settings_get_int(self->settings, "threads") : 0;
    rlx_segmenter_set_model(self->segmenter, self->model, dev && *dev ? dev : "cpu", threads,
                            budget);
}

static void set_model(RlxSegmentPane *self, const char *path)
{
    g_free(self->model);
    self->model = g_strdup(path);
    g_clear_pointer(&self->model_name, g_free);
    if (self->settings)
        g_settings_set_string(self->settings, "sam-model", path ? path : "");
    apply_model(self);
    update_state(self);
}

static gboolean is_image_name(const char *name)
{
    static const char *const ext[] = {".png", ".jpg", ".jpeg", ".jpe"};
    for (size_t i = 0; i < G_N_ELEMENTS(ext); i++)
        if (g_str_has_suffix(name, ext[i]))
            return TRUE;
    return FALSE;
}

static gboolean is_model_name(const char *name)
{
    return g_str_has_suffix(name, ".pth") || g_str_has_suffix(name, ".pt") ||
           g_str_has_suffix(name, ".onnx");
}

gboolean rlx_segment_pane_wants_file(GFile *file)
{
    g_autofree char *base = g_file_get_basename(file);
    g_autofree char *lower = base ? g_ascii_strdown(base, -1) : NULL;
    return lower && (is_image_name(lower) || is_model_name(lower));
}

void rlx_segment_pane_open(RlxSegmentPane *self, GFile *file)
{
    g_autofree char *path = g_file_get_path(file);
    if (!path) {
        toast_error(self, _("Only files on this computer can be opened"));
        return;
    }
    g_autofree char *base = g_file_get_basename(file);
    g_autofree char *lower = g_ascii_strdown(base, -1);
    gboolean dir = g_file_test(path, G_FILE_TEST_IS_DIR);
    if (dir || is_model_name(lower) || g_str_has_suffix(lower, ".safetensors")) {
        set_model(self, path);
        return;
    }
    g_free(self->image_path);
    self->image_path = g_strdup(path);
    rlx_segmenter_open_image(self->segmenter, path);
}

/* ---- files ----------------------------------------------------------------------- */

static void chooser_done(GtkNativeDialog *d, int response, RlxSegmentPane *self)
{
    if (response == GTK_RESPONSE_ACCEPT) {
        g_autoptr(GFile) f = gtk_file_chooser_get_file(GTK_FILE_CHOOSER(d));
        const char *kind = g_object_get_data(G_OBJECT(d), "rlx-kind");
        if (f && g_strcmp0(kind, "model") == 0) {
            g_autofree char *p = g_file_get_path(f);
            if (p)
                set_model(self, p);
        } else if (f) {
            rlx_segment_pane_open(self, f);
        }
    }
    g_object_unref(d);
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

static void choose(RlxSegmentPane *self, const char *kind)
{
    gboolean model = g_strcmp0(kind, "model") == 0;
    GtkFileChooserNative *d = gtk_file_chooser_native_new(
        model ? _("Choose a Segment Anything or Background-Removal Model") : _("Open a Picture"),
        GTK_WINDOW(gtk_widget_get_root(GTK_WIDGET(self))), GTK_FILE_CHOOSER_ACTION_OPEN, _("_Open"),
        _("_Cancel"));
    g_object_set_data_full(G_OBJECT(d), "rlx-kind", g_strdup(kind), g_free);
    gtk_native_dialog_set_modal(GTK_NATIVE_DIALOG(d), TRUE);
    if (model) {
        static const char *const pats[] = {"*.pth", "*.pt", "*.safetensors", "*.onnx", NULL};
        add_filter(GTK_FILE_CHOOSER(d), _("Segment Anything checkpoints, ONNX models"), pats);
    } else {
        static const char *const pats[] = {"*.png", "*.jpg",  "*.jpeg", "*.PNG",
                                           "*.JPG", "*.JPEG", NULL};
        add_filter(GTK_FILE_CHOOSER(d), _("Pictures (PNG, JPEG)"), pats);
    }
    g_signal_connect(d, "response", G_CALLBACK(chooser_done), self);
    gtk_native_dialog_show(GTK_NATIVE_DIALOG(d));
}

/* The union of every object's chosen mask. */
static uint8_t *union_mask(RlxSegmentPane *self, int *w, int *h)
{
    *w = gdk_texture_get_width(self->picture);
    *h = gdk_texture_get_height(self->picture);
    gsize npix = (gsize)*w * (gsize)*h;
    uint8_t *m = g_try_malloc0(npix);
    if (self->alpha) {
        gsize n = 0;
        const uint8_t *a = g_bytes_get_data(self->alpha, &n);
        if (m && n == npix)
            memcpy(m, a, npix);
        return m;
    }
    if (self->all) {
        const RlxSegmentProposal *p = picked(self);
        if (m && p && p->width == *w && p->height == *h)
            memcpy(m, g_bytes_get_data(p->mask, NULL), npix);
        return m;
    }
    for (int i = 0; m && i < self->n_objects; i++) {
        const RlxSegmentProposal *p = chosen(self, i);
        if (!p || p->width != *w || p->height != *h)
            continue;
        const uint8_t *a = g_bytes_get_data(p->mask, NULL);
        for (gsize k = 0; k < npix; k++)
            m[k] |= a[k];
    }
    return m;
}

/* The picture's pixels with alpha from mask: RGBA, straight alpha. */
static uint8_t *cutout_rgba(RlxSegmentPane *self, const uint8_t *mask, int w, int h)
{
    gsize stride = (gsize)w * 4, npix = (gsize)w * (gsize)h;
    uint8_t *px = g_try_malloc(npix * 4);
    if (!px)
        return NULL;
    /* cairo's ARGB32 (premultiplied; the decoded picture is opaque) */
    gdk_texture_download(self->picture, px, stride);
    for (gsize i = 0; i < npix; i++) {
        uint8_t b = px[4 * i], g = px[4 * i + 1], r = px[4 * i + 2];
        px[4 * i] = r, px[4 * i + 1] = g, px[4 * i + 2] = b, px[4 * i + 3] = mask[i];
    }
    return px;
}

static void save_done(GtkNativeDialog *d, int response, RlxSegmentPane *self)
{
    if (response == GTK_RESPONSE_ACCEPT) {
        g_autoptr(GFile) f = gtk_file_chooser_get_file(GTK_FILE_CHOOSER(d));
        g_autofree char *path = f ? g_file_get_path(f) : NULL;
        gboolean cutout = GPOINTER_TO_INT(g_object_get_data(G_OBJECT(d), "rlx-cutout"));
        int w, h;
        uint8_t *mask = NULL;
        if (cutout || self->alpha) {
            mask = union_mask(self, &w, &h);
        } else if (self->all ? picked(self) != NULL : chosen(self, self->current) != NULL) {
            const RlxSegmentProposal *p = self->all ? picked(self) : chosen(self, self->current);
            w = p->width, h = p->height;
            mask = g_memdup2(g_bytes_get_data(p->mask, NULL), (gsize)w * (gsize)h);
        }
        rlx_error *err = NULL;
        rlx_status st = RLX_OK;
        if (!path || !mask) {
            st = rlx_error_set(&err, RLX_ERR_NO_MEMORY, "out of memory");
        } else if (cutout) {
            uint8_t *rgba = cutout_rgba(self, mask, w, h);
            /* the chooser asked about replacing an existing file already */
            st = rgba ? rlx_image_write_png(path, rgba, w, h, 4, TRUE, &err)
                      : rlx_error_set(&err, RLX_ERR_NO_MEMORY, "out of memory");
            g_free(rgba);
        } else {
            st = rlx_image_write_mask_png(path, mask, w, h, TRUE, &err);
        }
        g_free(mask);
        if (st != RLX_OK) {
            g_autofree char *t = g_strdup_printf(_("Cannot save: %s"), rlx_error_message(err));
            toast_error(self, t);
        } else {
            g_autofree char *base = g_path_get_basename(path);
            g_autofree char *t = g_strdup_printf(_("Saved %s"), base);
            toast(self, t);
            g_debug("segment saved: %s", path); /* for the UI tests */
        }
        rlx_error_free(err);
    }
    g_object_unref(d);
}

static void save(RlxSegmentPane *self, gboolean cutout)
{
    GtkFileChooserNative *d =
        gtk_file_chooser_native_new(cutout ? _("Save the Cut-Out") : _("Save the Mask"),
                                    GTK_WINDOW(gtk_widget_get_root(GTK_WIDGET(self))),
                                    GTK_FILE_CHOOSER_ACTION_SAVE, _("_Save"), _("_Cancel"));
    gtk_native_dialog_set_modal(GTK_NATIVE_DIALOG(d), TRUE);
    g_object_set_data(G_OBJECT(d), "rlx-cutout", GINT_TO_POINTER(cutout));
    g_autofree char *stem = NULL;
    if (self->image_path) {
        g_autofree char *base = g_path_get_basename(self->image_path);
        char *dot = strrchr(base, '.');
        if (dot)
            *dot = 0;
        stem = g_strdup(base);
    }
    g_autofree char *name =
        g_strdup_printf("%s-%s.png", stem ? stem : "picture", cutout ? "cutout" : "mask");
    gtk_file_chooser_set_current_name(GTK_FILE_CHOOSER(d), name);
    g_signal_connect(d, "response", G_CALLBACK(save_done), self);
    gtk_native_dialog_show(GTK_NATIVE_DIALOG(d));
}

static void copy_cutout(RlxSegmentPane *self)
{
    int w, h;
    g_autofree uint8_t *mask = union_mask(self, &w, &h);
    uint8_t *rgba = mask ? cutout_rgba(self, mask, w, h) : NULL;
    if (!rgba) {
        toast_error(self, _("Cannot copy: out of memory"));
        return;
    }
    GBytes *b = g_bytes_new_take(rgba, (gsize)w * (gsize)h * 4);
    GdkTexture *t = gdk_memory_texture_new(w, h, GDK_MEMORY_R8G8B8A8, b, (gsize)w * 4);
    g_bytes_unref(b);
    gdk_clipboard_set_texture(gtk_widget_get_clipboard(GTK_WIDGET(self)), t);
    g_object_unref(t);
    toast(self, _("The cut-out is on the clipboard"));
}

/* ---- actions --------------------------------------------------------------------- */

static void act(GtkWidget *w, const char *name, GVariant *param)
{
    RlxSegmentPane *self = RLX_SEGMENT_PANE(w);
    Obj *o = &self->objects[self->current];
    if (!strcmp(name, "segment.open")) {
        choose(self, "image");
    } else if (!strcmp(name, "segment.model")) {
        choose(self, "model");
    } else if (!strcmp(name, "segment.undo")) {
        undo_or_redo(self, self->undo, self->redo);
    } else if (!strcmp(name, "segment.redo")) {
        undo_or_redo(self, self->redo, self->undo);
    } else if (!strcmp(name, "segment.everything")) {
        if (!rlx_segmenter_is_ready(self->segmenter) || self->all_running)
            return;
        self->all_running = TRUE;
        rlx_segmenter_segment_all(
            self->segmenter,
            self->settings ? g_settings_get_int(self->settings, "sam-points-per-side") : 16);
        update_state(self);
    } else if (!strcmp(name, "segment.clear") && self->all) {
        leave_everything(self);
        gtk_widget_queue_draw(GTK_WIDGET(self->view));
        update_state(self);
    } else if (!strcmp(name, "segment.clear")) {
        if (!o->prompt.n_points && !o->prompt.has_box)
            return;
        push_undo(self);
        o->prompt.n_points = 0;
        o->prompt.has_box = FALSE;
        prompt_changed(self, FALSE);
    } else if (!strcmp(name, "segment.new-object")) {
        if (self->n_objects >= MAX_OBJECTS || !chosen(self, self->current))
            return;
        push_undo(self);
        self->current = self->n_objects++;
        memset(&self->objects[self->current].prompt, 0, sizeof(RlxSegmentPrompt));
        obj_clear_result(&self->objects[self->current]);
        refresh_overlays(self);
        update_state(self);
    } else if (!strcmp(name, "segment.next-proposal")) {
        if (o->proposals && o->proposals->len > 1) {
            o->chosen = (o->chosen + 1) % o->proposals->len;
            refresh_overlays(self);
            log_masks(self, self->current, " (the next proposal)");
            update_state(self);
        }
    } else if (!strcmp(name, "segment.save-mask")) {
        save(self, FALSE);
    } else if (!strcmp(name, "segment.save-cutout")) {
        save(self, TRUE);
    } else if (!strcmp(name, "segment.copy-cutout")) {
        copy_cutout(self);
    } else if (!strcmp(name, "segment.zoom-in") || !strcmp(name, "segment.zoom-out")) {
        RlxSegmentView *v = self->view;
        view_zoom(v, !strcmp(name, "segment.zoom-in") ? 1.25 : 0.8,
                  gtk_widget_get_width(GTK_WIDGET(v)) / 2.0,
                  gtk_widget_get_height(GTK_WIDGET(v)) / 2.0);
    } else if (!strcmp(name, "segment.zoom-fit")) {
        self->view->zoom = 1;
        self->view->pan_x = self->view->pan_y = 0;
        gtk_widget_queue_draw(GTK_WIDGET(self->view));
    }
}

static void device_changed(GSettings *s, const char *key, RlxSegmentPane *self)
{
    apply_model(self); /* loads it again there, and encodes the picture again */
}

/* ---- drops ----------------------------------------------------------------------- */

static gboolean on_drop(GtkDropTarget *t, const GValue *value, double x, double y,
                        RlxSegmentPane *self)
{
    if (!G_VALUE_HOLDS(value, G_TYPE_FILE))
        return FALSE;
    rlx_segment_pane_open(self, g_value_get_object(value));
    return TRUE;
}

/* ---- the widget ------------------------------------------------------------------- */

void rlx_segment_pane_setup(RlxSegmentPane *self, GSettings *settings)
{
    if (!settings)
        return;
    self->settings = g_object_ref(settings);
    g_autofree char *model = g_settings_get_string(settings, "sam-model");
    if (model && *model && g_file_test(model, G_FILE_TEST_EXISTS)) {
        self->model = g_strdup(model);
        apply_model(self);
    }
    g_signal_connect(settings, "changed::device", G_CALLBACK(device_changed), self);
    g_signal_connect(settings, "changed::threads", G_CALLBACK(device_changed), self);
    g_signal_connect(settings, "changed::memory-budget-mib", G_CALLBACK(device_changed), self);
    update_state(self);
}

static GtkWidget *icon_button(const char *icon, const char *tip, const char *action)
{
    GtkWidget *b = gtk_button_new_from_icon_name(icon);
    gtk_widget_set_tooltip_text(b, tip);
    gtk_actionable_set_action_name(GTK_ACTIONABLE(b), action);
    gtk_widget_add_css_class(b, "flat");
    return b;
}

static void rlx_segment_pane_init(RlxSegmentPane *self)
{
    self->undo = g_array_new(FALSE, FALSE, sizeof(State));
    self->redo = g_array_new(FALSE, FALSE, sizeof(State));
    g_array_set_clear_func(self->undo, (GDestroyNotify)state_clear);
    g_array_set_clear_func(self->redo, (GDestroyNotify)state_clear);
    self->n_objects = 1;
    self->segmenter = rlx_segmenter_new();
    g_signal_connect(self->segmenter, "loading", G_CALLBACK(on_loading), self);
    g_signal_connect(self->segmenter, "model-ready", G_CALLBACK(on_model_ready), self);
    g_signal_connect(self->segmenter, "image-ready", G_CALLBACK(on_image_ready), self);
    g_signal_connect(self->segmenter, "encoded", G_CALLBACK(on_encoded), self);
    g_signal_connect(self->segmenter, "masks", G_CALLBACK(on_masks), self);
    g_signal_connect(self->segmenter, "memory", G_CALLBACK(on_memory), self);
    g_signal_connect(self->segmenter, "failed", G_CALLBACK(on_failed), self);
    g_signal_connect(self->segmenter, "everything", G_CALLBACK(on_everything), self);
    g_signal_connect(self->segmenter, "cutout", G_CALLBACK(on_cutout), self);
    self->all_picked = -1;

    self->box = gtk_box_new(GTK_ORIENTATION_VERTICAL, 0);
    gtk_widget_set_parent(self->box, GTK_WIDGET(self));

    GtkWidget *bar = gtk_box_new(GTK_ORIENTATION_HORIZONTAL, 6);
    gtk_widget_set_margin_start(bar, 12);
    gtk_widget_set_margin_end(bar, 12);
    gtk_widget_set_margin_top(bar, 6);
    gtk_widget_set_margin_bottom(bar, 6);
    self->model_button = GTK_BUTTON(gtk_button_new_with_label(_("Choose a Model…")));
    gtk_widget_set_tooltip_text(GTK_WIDGET(self->model_button),
                                _("The Segment Anything model (.pth, .safetensors or a folder), "
                                  "or a background-removal model (.onnx)"));
    gtk_actionable_set_action_name(GTK_ACTIONABLE(self->model_button), "segment.model");
    gtk_box_append(GTK_BOX(bar), GTK_WIDGET(self->model_button));
    GtkWidget *open = gtk_button_new_with_mnemonic(_("_Open Picture…"));
    gtk_actionable_set_action_name(GTK_ACTIONABLE(open), "segment.open");
    gtk_box_append(GTK_BOX(bar), open);
    GtkWidget *spacer = gtk_box_new(GTK_ORIENTATION_HORIZONTAL, 0);
    gtk_widget_set_hexpand(spacer, TRUE);
    gtk_box_append(GTK_BOX(bar), spacer);
    self->proposal_button = GTK_BUTTON(gtk_button_new_with_label(""));
    gtk_widget_set_tooltip_text(GTK_WIDGET(self->proposal_button),
                                _("The next of the model's proposals (Tab)"));
    gtk_actionable_set_action_name(GTK_ACTIONABLE(self->proposal_button), "segment.next-proposal");
    gtk_widget_add_css_class(GTK_WIDGET(self->proposal_button), "flat");
    gtk_box_append(GTK_BOX(bar), GTK_WIDGET(self->proposal_button));
    GtkWidget *every = gtk_button_new_with_mnemonic(_("Segment _Everything"));
    gtk_widget_set_tooltip_text(every, _("Find every object in the picture (Ctrl+E)"));
    gtk_actionable_set_action_name(GTK_ACTIONABLE(every), "segment.everything");
    gtk_widget_add_css_class(every, "flat");
    gtk_box_append(GTK_BOX(bar), every);
    gtk_box_append(GTK_BOX(bar),
                   icon_button("edit-undo-symbolic", _("Undo (Ctrl+Z)"), "segment.undo"));
    gtk_box_append(GTK_BOX(bar),
                   icon_button("edit-redo-symbolic", _("Redo (Ctrl+Shift+Z)"), "segment.redo"));
    gtk_box_append(GTK_BOX(bar), icon_button("edit-clear-symbolic", _("Clear this object (Escape)"),
                                             "segment.clear"));
    gtk_box_append(GTK_BOX(bar),
                   icon_button("list-add-symbolic", _("Another object (N)"), "segment.new-object"));
    GMenu *menu = g_menu_new();
    g_menu_append(menu, _("Save the Mask…"), "segment.save-mask");
    g_menu_append(menu, _("Save the Cut-Out…"), "segment.save-cutout");
    g_menu_append(menu, _("Copy the Cut-Out"), "segment.copy-cutout");
    GtkWidget *export = gtk_menu_button_new();
    gtk_menu_button_set_icon_name(GTK_MENU_BUTTON(export), "document-save-symbolic");
    gtk_menu_button_set_menu_model(GTK_MENU_BUTTON(export), G_MENU_MODEL(menu));
    gtk_widget_set_tooltip_text(export, _("Save or copy"));
    g_object_unref(menu);
    gtk_box_append(GTK_BOX(bar), export);
    /* a narrow window scrolls the tool bar instead of being held wide by it */
    GtkWidget *bar_scroll = gtk_scrolled_window_new();
    gtk_scrolled_window_set_policy(GTK_SCROLLED_WINDOW(bar_scroll), GTK_POLICY_EXTERNAL,
                                   GTK_POLICY_NEVER);
    gtk_scrolled_window_set_propagate_natural_height(GTK_SCROLLED_WINDOW(bar_scroll), TRUE);
    gtk_scrolled_window_set_child(GTK_SCROLLED_WINDOW(bar_scroll), bar);
    gtk_box_append(GTK_BOX(self->box), bar_scroll);

    GtkWidget *status = gtk_box_new(GTK_ORIENTATION_VERTICAL, 4);
    gtk_widget_set_margin_start(status, 12);
    gtk_widget_set_margin_end(status, 12);
    gtk_widget_set_margin_bottom(status, 6);
    self->status_label = GTK_LABEL(gtk_label_new(NULL));
    gtk_label_set_xalign(self->status_label, 0);
    gtk_label_set_wrap(self->status_label, TRUE);
    gtk_widget_add_css_class(GTK_WIDGET(self->status_label), "dim-label");
    gtk_box_append(GTK_BOX(status), GTK_WIDGET(self->status_label));
    self->progress = GTK_PROGRESS_BAR(gtk_progress_bar_new());
    gtk_widget_set_visible(GTK_WIDGET(self->progress), FALSE);
    gtk_box_append(GTK_BOX(status), GTK_WIDGET(self->progress));
    gtk_box_append(GTK_BOX(self->box), status);

    self->stack = GTK_STACK(gtk_stack_new());
    gtk_widget_set_vexpand(GTK_WIDGET(self->stack), TRUE);
    self->empty_page = ADW_STATUS_PAGE(adw_status_page_new());
    adw_status_page_set_icon_name(self->empty_page, "rlx-segment-symbolic");
    adw_status_page_set_title(self->empty_page, _("Segment"));
    adw_status_page_set_description(
        self->empty_page, _("Open or drop a photo, then click on what you want to cut out."));
    GtkWidget *eb = gtk_box_new(GTK_ORIENTATION_VERTICAL, 12);
    gtk_widget_set_halign(eb, GTK_ALIGN_CENTER);
    GtkWidget *b1 = gtk_button_new_with_mnemonic(_("_Open Picture…"));
    gtk_actionable_set_action_name(GTK_ACTIONABLE(b1), "segment.open");
    gtk_widget_add_css_class(b1, "pill");
    gtk_widget_add_css_class(b1, "suggested-action");
    GtkWidget *b2 = gtk_button_new_with_mnemonic(_("_Choose a Model…"));
    gtk_actionable_set_action_name(GTK_ACTIONABLE(b2), "segment.model");
    gtk_widget_add_css_class(b2, "pill");
    gtk_box_append(GTK_BOX(eb), b1);
    gtk_box_append(GTK_BOX(eb), b2);
    adw_status_page_set_child(self->empty_page, eb);
    gtk_stack_add_named(self->stack, GTK_WIDGET(self->empty_page), "empty");
    self->view = g_object_new(RLX_TYPE_SEGMENT_VIEW, NULL);
    self->view->pane = self;
    gtk_stack_add_named(self->stack, GTK_WIDGET(self->view), "view");
    self->toast_overlay = ADW_TOAST_OVERLAY(adw_toast_overlay_new());
    adw_toast_overlay_set_child(self->toast_overlay, GTK_WIDGET(self->stack));
    gtk_box_append(GTK_BOX(self->box), GTK_WIDGET(self->toast_overlay));
    rlx_toasts_init(&self->toasts, self->toast_overlay, GTK_WIDGET(self));

    GtkDropTarget *drop = gtk_drop_target_new(G_TYPE_FILE, GDK_ACTION_COPY);
    g_signal_connect(drop, "drop", G_CALLBACK(on_drop), self);
    gtk_widget_add_controller(GTK_WIDGET(self), GTK_EVENT_CONTROLLER(drop));
    update_state(self);
}

static void rlx_segment_pane_dispose(GObject *o)
{
    RlxSegmentPane *self = RLX_SEGMENT_PANE(o);
    if (self->settings)
        g_signal_handlers_disconnect_by_data(self->settings, self);
    if (self->segmenter) {
        g_signal_handlers_disconnect_by_data(self->segmenter, self);
        g_clear_object(&self->segmenter);
    }
    g_clear_handle_id(&self->pulse, g_source_remove);
    rlx_toasts_clear(&self->toasts);
    g_clear_pointer(&self->box, gtk_widget_unparent);
    G_OBJECT_CLASS(rlx_segment_pane_parent_class)->dispose(o);
}

static void rlx_segment_pane_finalize(GObject *o)
{
    RlxSegmentPane *self = RLX_SEGMENT_PANE(o);
    for (int i = 0; i < MAX_OBJECTS; i++)
        obj_clear_result(&self->objects[i]);
    leave_everything(self);
    g_clear_object(&self->cutout);
    g_clear_pointer(&self->alpha, g_bytes_unref);
    g_clear_object(&self->picture);
    g_clear_object(&self->settings);
    g_free(self->model);
    g_free(self->model_name);
    g_free(self->image_path);
    g_array_unref(self->undo);
    g_array_unref(self->redo);
    G_OBJECT_CLASS(rlx_segment_pane_parent_class)->finalize(o);
}

static void rlx_segment_pane_class_init(RlxSegmentPaneClass *klass)
{
    GObjectClass *oc = G_OBJECT_CLASS(klass);
    GtkWidgetClass *wc = GTK_WIDGET_CLASS(klass);
    oc->dispose = rlx_segment_pane_dispose;
    oc->finalize = rlx_segment_pane_finalize;
    gtk_widget_class_set_layout_manager_type(wc, GTK_TYPE_BIN_LAYOUT);
    static const char *const actions[] = {
        "segment.open",        "segment.model",       "segment.undo",          "segment.redo",
        "segment.clear",       "segment.new-object",  "segment.next-proposal", "segment.save-mask",
        "segment.save-cutout", "segment.copy-cutout", "segment.zoom-in",       "segment.zoom-out",
        "segment.zoom-fit",    "segment.everything"};
    for (size_t i = 0; i < G_N_ELEMENTS(actions); i++)
        gtk_widget_class_install_action(wc, actions[i], NULL, act);
    const struct {
        guint key;
        GdkModifierType mods;
        const char *action;
    } keys[] = {
        {GDK_KEY_o, GDK_CONTROL_MASK, "segment.open"},
        {GDK_KEY_z, GDK_CONTROL_MASK, "segment.undo"},
        {GDK_KEY_Z, GDK_CONTROL_MASK | GDK_SHIFT_MASK, "segment.redo"},
        {GDK_KEY_y, GDK_CONTROL_MASK, "segment.redo"},
        {GDK_KEY_Escape, 0, "segment.clear"},
        {GDK_KEY_n, 0, "segment.new-object"},
        {GDK_KEY_e, GDK_CONTROL_MASK, "segment.everything"},
        {GDK_KEY_Tab, 0, "segment.next-proposal"},
        {GDK_KEY_s, GDK_CONTROL_MASK, "segment.save-mask"},
        {GDK_KEY_S, GDK_CONTROL_MASK | GDK_SHIFT_MASK, "segment.save-cutout"},
        {GDK_KEY_c, GDK_CONTROL_MASK, "segment.copy-cutout"},
        {GDK_KEY_plus, 0, "segment.zoom-in"},
        {GDK_KEY_equal, 0, "segment.zoom-in"},
        {GDK_KEY_minus, 0, "segment.zoom-out"},
        {GDK_KEY_0, 0, "segment.zoom-fit"},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(keys); i++)
        gtk_widget_class_add_binding_action(wc, keys[i].key, keys[i].mods, keys[i].action, NULL);
    signals[SIG_MEMORY] = g_signal_new("memory", G_TYPE_FROM_CLASS(klass), G_SIGNAL_RUN_LAST, 0,
                                       NULL, NULL, NULL, G_TYPE_NONE, 1, G_TYPE_POINTER);
}
