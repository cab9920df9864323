#include "rlx-sampling-popover.h"

#include <glib/gi18n.h>

struct _RlxSamplingPopover {
    GtkPopover parent_instance;

    GtkSpinButton *temperature_spin, *top_k_spin, *top_p_spin, *min_p_spin;
    GtkSpinButton *repeat_penalty_spin, *seed_spin, *max_tokens_spin, *context_length_spin;
    GtkSwitch *thinking_switch;
    GtkLabel *thinking_label, *thinking_note;
    gboolean have_settings;
};

G_DEFINE_FINAL_TYPE(RlxSamplingPopover, rlx_sampling_popover, GTK_TYPE_POPOVER)

void rlx_sampling_popover_bind(RlxSamplingPopover *self, GSettings *settings)
{
    g_return_if_fail(RLX_IS_SAMPLING_POPOVER(self));
    const struct {
        const char *key;
        GtkSpinButton *spin;
    } rows[] = {
        {"temperature", self->temperature_spin},
        {"top-k", self->top_k_spin},
        {"top-p", self->top_p_spin},
        {"min-p", self->min_p_spin},
        {"repeat-penalty", self->repeat_penalty_spin},
        {"seed", self->seed_spin},
        {"max-tokens", self->max_tokens_spin},
        {"context-length", self->context_length_spin},
    };
    for (guint i = 0; i < G_N_ELEMENTS(rows); i++) {
        if (settings)
            g_settings_bind(settings, rows[i].key, rows[i].spin, "value", G_SETTINGS_BIND_DEFAULT);
        else
            gtk_widget_set_sensitive(GTK_WIDGET(rows[i].spin), FALSE);
    }
    self->have_settings = settings != NULL;
    if (settings)
        g_settings_bind(settings, "thinking", self->thinking_switch, "active",
                        G_SETTINGS_BIND_DEFAULT);
    rlx_sampling_popover_set_thinking_switch(self, FALSE, FALSE);
}

void rlx_sampling_popover_set_thinking_switch(RlxSamplingPopover *self, gboolean loaded,
                                              gboolean available)
{
    g_return_if_fail(RLX_IS_SAMPLING_POPOVER(self));
    gboolean on = available && self->have_settings;
    gtk_widget_set_sensitive(GTK_WIDGET(self->thinking_switch), on);
    gtk_widget_set_sensitive(GTK_WIDGET(self->thinking_label), on);
    gtk_label_set_text(self->thinking_note,
                       !loaded     ? _("Whether a reasoning model may think first depends on "
                                           "the model; open one to see.")
                       : available ? _("Off: the model answers at once, without reasoning.")
                                   : _("This model's chat template has no thinking switch."));
}

static void rlx_sampling_popover_dispose(GObject *object)
{
    gtk_widget_dispose_template(GTK_WIDGET(object), RLX_TYPE_SAMPLING_POPOVER);
    G_OBJECT_CLASS(rlx_sampling_popover_parent_class)->dispose(object);
}

static void rlx_sampling_popover_class_init(RlxSamplingPopoverClass *klass)
{
    GtkWidgetClass *widget_class = GTK_WIDGET_CLASS(klass);
    G_OBJECT_CLASS(klass)->dispose = rlx_sampling_popover_dispose;
    gtk_widget_class_set_template_from_resource(widget_class,
                                                "/org/rlx/Studio/rlx-sampling-popover.ui");
    gtk_widget_class_bind_template_child(widget_class, RlxSamplingPopover, temperature_spin);
    gtk_widget_class_bind_template_child(widget_class, RlxSamplingPopover, top_k_spin);
    gtk_widget_class_bind_template_child(widget_class, RlxSamplingPopover, top_p_spin);
    gtk_widget_class_bind_template_child(widget_class, RlxSamplingPopover, min_p_spin);
    gtk_widget_class_bind_template_child(widget_class, RlxSamplingPopover, repeat_penalty_spin);
    gtk_widget_class_bind_template_child(widget_class, RlxSamplingPopover, seed_spin);
    gtk_widget_class_bind_template_child(widget_class, RlxSamplingPopover, max_tokens_spin);
    gtk_widget_class_bind_template_child(widget_class, RlxSamplingPopover, context_length_spin);
    gtk_widget_class_bind_template_child(widget_class, RlxSamplingPopover, thinking_switch);
    gtk_widget_class_bind_template_child(widget_class, RlxSamplingPopover, thinking_label);
    gtk_widget_class_bind_template_child(widget_class, RlxSamplingPopover, thinking_note);
}

static void rlx_sampling_popover_init(RlxSamplingPopover *self)
{
    gtk_widget_init_template(GTK_WIDGET(self));
}
