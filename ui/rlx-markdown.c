#include "rlx-markdown.h"

#include <adwaita.h>
#include <glib/gi18n.h>
#include <gtksourceview/gtksource.h>
#include <md4c.h>
#include <string.h>

/* One block of a rendering: prose (Pango markup) or a code block. */
typedef struct {
    gboolean code;
    char *text; /* markup, or the code */
    char *lang; /* code only; nullable */
} Block;

static void block_free(Block *b)
{
    g_free(b->text);
    g_free(b->lang);
    g_free(b);
}

typedef struct {
    GPtrArray *blocks; /* Block *; NULL: markup only */
    GString *markup;
    GString *code; /* non-NULL inside a code block */
    char *code_lang;
    int list_depth;
    GArray *ol_next; /* per list level: next number, 0 for bullets */
    gboolean in_table_head;
    int table_col;
} Renderer;

/* Pango does not know GtkLabel's <a href>: check the markup with links as spans. */
static gboolean markup_valid(const char *markup)
{
    /* main thread only, kept for the life of the process */
    static GRegex *open_a, *close_a;
    if (!open_a) {
        open_a = g_regex_new("<a href=\"[^\"]*\">", G_REGEX_OPTIMIZE, 0, NULL);
        close_a = g_regex_new("</a>", G_REGEX_OPTIMIZE, 0, NULL);
    }
    g_autofree char *a = g_regex_replace_literal(open_a, markup, -1, 0, "<span>", 0, NULL);
    g_autofree char *b = a ? g_regex_replace_literal(close_a, a, -1, 0, "</span>", 0, NULL) : NULL;
    return b && pango_parse_markup(b, -1, 0, NULL, NULL, NULL, NULL);
}

static void flush_prose(Renderer *r)
{
    /* Trailing blank lines between blocks are spacing the box already gives. */
    while (r->markup->len && r->markup->str[r->markup->len - 1] == '\n')
        g_string_truncate(r->markup, r->markup->len - 1);
    if (!r->markup->len || !r->blocks)
        return;
    Block *b = g_new0(Block, 1);
    b->text = g_strdup(r->markup->str);
    g_ptr_array_add(r->blocks, b);
    g_string_truncate(r->markup, 0);
}

static void set_prose(GtkWidget *label, const char *markup)
{
    /* Unbalanced markup (a code block inside a quote) falls back to plain text. */
    if (markup_valid(markup))
        gtk_label_set_markup(GTK_LABEL(label), markup);
    else
        gtk_label_set_text(GTK_LABEL(label), markup);
    g_object_set_data_full(G_OBJECT(label), "rlx-markup", g_strdup(markup), g_free);
}

static GtkWidget *prose_new(const char *markup)
{
    GtkWidget *label = gtk_label_new(NULL);
    set_prose(label, markup);
    gtk_label_set_wrap(GTK_LABEL(label), TRUE);
    gtk_label_set_wrap_mode(GTK_LABEL(label), PANGO_WRAP_WORD_CHAR);
    gtk_label_set_selectable(GTK_LABEL(label), TRUE);
    gtk_label_set_xalign(GTK_LABEL(label), 0);
    gtk_widget_set_halign(label, GTK_ALIGN_FILL);
    gtk_widget_add_css_class(label, "rlx-prose");
    return label;
}

static void copy_clicked(GtkButton *button, GtkSourceBuffer *buffer)
{
    GtkTextIter a, b;
    gtk_text_buffer_get_bounds(GTK_TEXT_BUFFER(buffer), &a, &b);
    g_autofree char *text = gtk_text_buffer_get_text(GTK_TEXT_BUFFER(buffer), &a, &b, FALSE);
    gdk_clipboard_set_text(gtk_widget_get_clipboard(GTK_WIDGET(button)), text);
}

static void add_code_block(Renderer *r)
{
    if (!r->blocks)
        return;
    if (r->code->len && r->code->str[r->code->len - 1] == '\n')
        g_string_truncate(r->code, r->code->len - 1);
    Block *b = g_new0(Block, 1);
    b->code = TRUE;
    b->text = g_strdup(r->code->str);
    b->lang = r->code_lang && *r->code_lang ? g_strdup(r->code_lang) : NULL;
    g_ptr_array_add(r->blocks, b);
}

/* A code block is a label (Pango markup made from GtkSourceView's
 * highlighting), not a GtkTextView: a text view outside a scrolled window
 * lays its lines out in idle steps and measures itself from what it laid out
 * so far, so one created while a conversation was opened measured a height
 * of its margins only and stayed an empty grey box until a resize. A label
 * lays out when it is measured. */
static void append_span(GString *out, GSList *tags, const char *text)
{
    GString *attrs = g_string_new(NULL);
    for (GSList *l = tags; l; l = l->next) {
        GtkTextTag *tag = l->data;
        gboolean fg_set = FALSE, weight_set = FALSE, style_set = FALSE, ul_set = FALSE;
        g_object_get(tag, "foreground-set", &fg_set, "weight-set", &weight_set, "style-set",
                     &style_set, "underline-set", &ul_set, NULL);
        if (fg_set) {
            GdkRGBA *c = NULL;
            g_object_get(tag, "foreground-rgba", &c, NULL);
            if (c) {
                g_string_append_printf(attrs, " foreground=\"#%02x%02x%02x\"",
                                       (int)(c->red * 255 + 0.5), (int)(c->green * 255 + 0.5),
                                       (int)(c->blue * 255 + 0.5));
                gdk_rgba_free(c);
            }
        }
        if (weight_set) {
            int w = 400;
            g_object_get(tag, "weight", &w, NULL);
            g_string_append_printf(attrs, " weight=\"%d\"", w);
        }
        if (style_set) {
            PangoStyle st = PANGO_STYLE_NORMAL;
            g_object_get(tag, "style", &st, NULL);
            if (st == PANGO_STYLE_ITALIC || st == PANGO_STYLE_OBLIQUE)
                g_string_append(attrs, " style=\"italic\"");
        }
        if (ul_set) {
            PangoUnderline u = PANGO_UNDERLINE_NONE;
            g_object_get(tag, "underline", &u, NULL);
            if (u != PANGO_UNDERLINE_NONE)
                g_string_append(attrs, " underline=\"single\"");
        }
    }
    g_autofree char *esc = g_markup_escape_text(text, -1);
    if (attrs->len)
        g_string_append_printf(out, "<span%s>%s</span>", attrs->str, esc);
    else
        g_string_append(out, esc);
    g_string_free(attrs, TRUE);
}

static char *highlighted_markup(GtkSourceBuffer *buffer)
{
    GtkTextBuffer *tb = GTK_TEXT_BUFFER(buffer);
    GtkTextIter it, end;
    gtk_text_buffer_get_bounds(tb, &it, &end);
    gtk_source_buffer_ensure_highlight(buffer, &it, &end);
    GString *out = g_string_new(NULL);
    while (!gtk_text_iter_equal(&it, &end)) {
        GtkTextIter next = it;
        if (!gtk_text_iter_forward_to_tag_toggle(&next, NULL))
            next = end;
        g_autofree char *text = gtk_text_iter_get_slice(&it, &next);
        GSList *tags = gtk_text_iter_get_tags(&it);
        append_span(out, tags, text);
        g_slist_free(tags);
        it = next;
    }
    return g_string_free(out, FALSE);
}

static void code_show(GtkLabel *label, GtkSourceBuffer *buffer)
{
    g_autofree char *markup = highlighted_markup(buffer);
    gtk_label_set_markup(label, markup);
}

static void code_restyle(AdwStyleManager *sm, GParamSpec *ps, GtkLabel *label)
{
    GtkSourceBuffer *buffer = g_object_get_data(G_OBJECT(label), "rlx-buffer");
    GtkSourceStyleSchemeManager *m = gtk_source_style_scheme_manager_get_default();
    gtk_source_buffer_set_style_scheme(
        buffer, gtk_source_style_scheme_manager_get_scheme(
                    m, adw_style_manager_get_dark(sm) ? "Adwaita-dark" : "Adwaita"));
    code_show(label, buffer);
}

static GtkWidget *code_new(const Block *b)
{
    GtkSourceBuffer *buffer = gtk_source_buffer_new(NULL);
    gtk_text_buffer_set_text(GTK_TEXT_BUFFER(buffer), b->text, -1);
    GtkSourceLanguageManager *lm = gtk_source_language_manager_get_default();
    GtkSourceLanguage *lang =
        b->lang ? gtk_source_language_manager_get_language(lm, b->lang) : NULL;
    if (lang)
        gtk_source_buffer_set_language(buffer, lang);
    GtkSourceStyleSchemeManager *sm = gtk_source_style_scheme_manager_get_default();
    gboolean dark = adw_style_manager_get_dark(adw_style_manager_get_default());
    gtk_source_buffer_set_style_scheme(
        buffer, gtk_source_style_scheme_manager_get_scheme(sm, dark ? "Adwaita-dark" : "Adwaita"));

    GtkWidget *view = gtk_label_new(NULL);
    gtk_label_set_wrap(GTK_LABEL(view), TRUE);
    gtk_label_set_wrap_mode(GTK_LABEL(view), PANGO_WRAP_WORD_CHAR);
    gtk_label_set_selectable(GTK_LABEL(view), TRUE);
    gtk_label_set_xalign(GTK_LABEL(view), 0);
    gtk_widget_add_css_class(view, "monospace");
    gtk_widget_add_css_class(view, "rlx-code-text");
    gtk_widget_set_hexpand(view, TRUE);
    g_object_set_data_full(G_OBJECT(view), "rlx-buffer", g_object_ref(buffer), g_object_unref);
    code_show(GTK_LABEL(view), buffer);
    g_signal_connect_object(adw_style_manager_get_default(), "notify::dark",
                            G_CALLBACK(code_restyle), view, 0);

    GtkWidget *header = gtk_box_new(GTK_ORIENTATION_HORIZONTAL, 6);
    GtkWidget *lang_label = gtk_label_new(b->lang ? b->lang : "");
    gtk_widget_add_css_class(lang_label, "dim-label");
    gtk_widget_add_css_class(lang_label, "caption");
    gtk_widget_set_hexpand(lang_label, TRUE);
    gtk_label_set_xalign(GTK_LABEL(lang_label), 0);
    GtkWidget *copy = gtk_button_new_from_icon_name("edit-copy-symbolic");
    gtk_widget_set_tooltip_text(copy, _("Copy Code"));
    gtk_widget_add_css_class(copy, "flat");
    g_signal_connect_object(copy, "clicked", G_CALLBACK(copy_clicked), buffer, 0);
    gtk_box_append(GTK_BOX(header), lang_label);
    gtk_box_append(GTK_BOX(header), copy);

    GtkWidget *frame = gtk_box_new(GTK_ORIENTATION_VERTICAL, 0);
    gtk_widget_add_css_class(frame, "rlx-code");
    gtk_box_append(GTK_BOX(frame), header);
    gtk_box_append(GTK_BOX(frame), view);
    g_object_set_data_full(G_OBJECT(frame), "rlx-buffer", buffer, g_object_unref);
    g_object_set_data_full(G_OBJECT(frame), "rlx-lang", g_strdup(b->lang), g_free);
    g_object_set_data(G_OBJECT(frame), "rlx-code-label", view);
    return frame;
}

static void list_prefix(Renderer *r)
{
    for (int i = 1; i < r->list_depth; i++)
        g_string_append(r->markup, "    ");
    if (r->list_depth <= 0)
        return;
    int *next = &g_array_index(r->ol_next, int, r->list_depth - 1);
    if (*next > 0)
        g_string_append_printf(r->markup, "%d. ", (*next)++);
    else
        g_string_append(r->markup, "• ");
}

static int enter_block(MD_BLOCKTYPE type, void *detail, void *user)
{
    Renderer *r = user;
    switch (type) {
    case MD_BLOCK_H: {
        static const char *const sizes[] = {"xx-large", "x-large", "large",
                                            "medium",   "medium",  "medium"};
        unsigned level = ((MD_BLOCK_H_DETAIL *)detail)->level;
        g_string_append_printf(r->markup, "<span size=\"%s\" weight=\"bold\">",
                               sizes[CLAMP(level, 1, 6) - 1]);
        break;
    }
    case MD_BLOCK_UL:
    case MD_BLOCK_OL: {
        int start = type == MD_BLOCK_OL ? (int)((MD_BLOCK_OL_DETAIL *)detail)->start : 0;
        if (type == MD_BLOCK_OL && start == 0)
            start = 1;
        if (r->list_depth > 0 && r->markup->len && r->markup->str[r->markup->len - 1] != '\n')
            g_string_append_c(r->markup, '\n');
        g_array_append_val(r->ol_next, start);
        r->list_depth++;
        break;
    }
    case MD_BLOCK_LI:
        list_prefix(r);
        break;
    case MD_BLOCK_QUOTE:
        g_string_append(r->markup, "<i>");
        break;
    case MD_BLOCK_CODE: {
        flush_prose(r);
        MD_BLOCK_CODE_DETAIL *d = detail;
        g_free(r->code_lang);
        r->code_lang = d->lang.text ? g_strndup(d->lang.text, d->lang.size) : NULL;
        r->code = g_string_new(NULL);
        break;
    }
    case MD_BLOCK_HR:
        g_string_append(r->markup, "──────────\n\n");
        break;
    case MD_BLOCK_THEAD:
        r->in_table_head = TRUE;
        break;
    case MD_BLOCK_TR:
        r->table_col = 0;
        break;
    case MD_BLOCK_TH:
    case MD_BLOCK_TD:
        if (r->table_col++ > 0)
            g_string_append(r->markup, " │ ");
        if (type == MD_BLOCK_TH)
            g_string_append(r->markup, "<b>");
        break;
    default:
        break;
    }
    return 0;
}

static int leave_block(MD_BLOCKTYPE type, void *detail, void *user)
{
    Renderer *r = user;
    switch (type) {
    case MD_BLOCK_H:
        g_string_append(r->markup, "</span>\n\n");
        break;
    case MD_BLOCK_P:
        g_string_append(r->markup, r->list_depth > 0 ? "\n" : "\n\n");
        break;
    case MD_BLOCK_UL:
    case MD_BLOCK_OL:
        r->list_depth--;
        g_array_set_size(r->ol_next, (guint)r->list_depth);
        if (r->list_depth == 0)
            g_string_append_c(r->markup, '\n');
        break;
    case MD_BLOCK_LI:
        if (r->markup->len && r->markup->str[r->markup->len - 1] != '\n')
            g_string_append_c(r->markup, '\n');
        break;
    case MD_BLOCK_QUOTE:
        while (r->markup->len && r->markup->str[r->markup->len - 1] == '\n')
            g_string_truncate(r->markup, r->markup->len - 1);
        g_string_append(r->markup, "</i>\n\n");
        break;
    case MD_BLOCK_CODE:
        add_code_block(r);
        g_string_free(r->code, TRUE);
        r->code = NULL;
        break;
    case MD_BLOCK_TH:
        g_string_append(r->markup, "</b>");
        break;
    case MD_BLOCK_TR:
        g_string_append_c(r->markup, '\n');
        break;
    case MD_BLOCK_THEAD:
        r->in_table_head = FALSE;
        break;
    case MD_BLOCK_TABLE:
        g_string_append_c(r->markup, '\n');
        break;
    default:
        break;
    }
    return 0;
}

static int span(MD_SPANTYPE type, void *detail, void *user, gboolean enter)
{
    Renderer *r = user;
    const char *tag = NULL;
    switch (type) {
    case MD_SPAN_EM:
        tag = "i";
        break;
    case MD_SPAN_STRONG:
        tag = "b";
        break;
    case MD_SPAN_CODE:
        tag = "tt";
        break;
    case MD_SPAN_DEL:
        tag = "s";
        break;
    case MD_SPAN_U:
        tag = "u";
        break;
    case MD_SPAN_A:
        if (enter) {
            MD_SPAN_A_DETAIL *a = detail;
            g_autofree char *href = g_strndup(a->href.text, a->href.size);
            g_autofree char *esc = g_markup_escape_text(href, -1);
            g_string_append_printf(r->markup, "<a href=\"%s\">", esc);
        } else {
            g_string_append(r->markup, "</a>");
        }
        return 0;
    default:
        return 0;
    }
    g_string_append_printf(r->markup, enter ? "<%s>" : "</%s>", tag);
    return 0;
}

static int enter_span(MD_SPANTYPE type, void *detail, void *user)
{
    return span(type, detail, user, TRUE);
}

static int leave_span(MD_SPANTYPE type, void *detail, void *user)
{
    return span(type, detail, user, FALSE);
}

static int text(MD_TEXTTYPE type, const MD_CHAR *t, MD_SIZE size, void *user)
{
    Renderer *r = user;
    if (r->code) {
        g_string_append_len(r->code, t, size);
        return 0;
    }
    switch (type) {
    case MD_TEXT_BR:
        g_string_append_c(r->markup, '\n');
        break;
    case MD_TEXT_SOFTBR:
        g_string_append_c(r->markup, ' ');
        break;
    case MD_TEXT_NULLCHAR:
        g_string_append(r->markup, "\xEF\xBF\xBD");
        break;
    case MD_TEXT_ENTITY: {
        /* The few entities worth honouring; anything else is shown as written. */
        g_autofree char *ent = g_strndup(t, size);
        if (!g_strcmp0(ent, "&nbsp;"))
            g_string_append(r->markup, "\xC2\xA0");
        else {
            g_autofree char *esc = g_markup_escape_text(ent, -1);
            g_string_append(r->markup, esc);
        }
        break;
    }
    default: {
        g_autofree char *esc = g_markup_escape_text(t, (gssize)size);
        g_string_append(r->markup, esc);
        break;
    }
    }
    return 0;
}

static void render(Renderer *r, const char *src, gsize len)
{
    MD_PARSER parser = {
        .abi_version = 0,
        .flags =
            MD_FLAG_TABLES | MD_FLAG_STRIKETHROUGH | MD_FLAG_PERMISSIVEAUTOLINKS | MD_FLAG_NOHTML,
        .enter_block = enter_block,
        .leave_block = leave_block,
        .enter_span = enter_span,
        .leave_span = leave_span,
        .text = text,
    };
    r->markup = g_string_new(NULL);
    r->ol_next = g_array_new(FALSE, TRUE, sizeof(int));
    md_parse(src, (MD_SIZE)len, &parser, r);
    /* An unterminated fence while streaming: md4c closes it for us. */
    if (r->code) {
        add_code_block(r);
        g_string_free(r->code, TRUE);
        r->code = NULL;
    }
    flush_prose(r);
    g_array_unref(r->ol_next);
    g_free(r->code_lang);
}

/* ---- chunks ------------------------------------------------------------------ */

/* A line that opens or closes a fence: up to 3 spaces, then 3 or more ` or ~. */
static gboolean fence_line(const char *l, const char *end, char *ch, gsize *n)
{
    int indent = 0;
    while (l < end && *l == ' ' && indent < 4) {
        l++;
        indent++;
    }
    if (indent > 3 || l >= end || (*l != '`' && *l != '~'))
        return FALSE;
    char c = *l;
    gsize k = 0;
    while (l < end && *l == c) {
        l++;
        k++;
    }
    if (k < 3)
        return FALSE;
    *ch = c;
    *n = k;
    return TRUE;
}

static gboolean blank_line(const char *l, const char *end)
{
    for (; l < end; l++)
        if (*l != ' ' && *l != '\t' && *l != '\r' && *l != '\n')
            return FALSE;
    return TRUE;
}

/* Whether a block that starts with this line, after a blank line, can never
 * belong to the blocks before it: it starts at column 0 and is not a list
 * item, a quote, an indented line, a thematic break, a setext underline or a
 * link reference definition (each of those may continue or change what came
 * before, so the text before them stays open). */
static gboolean starts_fresh(const char *l)
{
    switch (*l) {
    case ' ':
    case '\t':
    case '-':
    case '*':
    case '+':
    case '_':
    case '=':
    case '>':
    case '[':
    case '\r':
    case '\n':
        return FALSE;
    default:
        return !g_ascii_isdigit(*l);
    }
}

void rlx_markdown_chunker_init(RlxMarkdownChunker *c)
{
    memset(c, 0, sizeof *c);
}

gsize rlx_markdown_chunker_feed(RlxMarkdownChunker *c, const char *text, gsize len)
{
    /* Only whole lines are read; the last, unfinished one waits. */
    while (c->scanned < len) {
        const char *l = text + c->scanned;
        const char *nl = memchr(l, '\n', len - c->scanned);
        if (!nl)
            break;
        const char *end = nl + 1;
        char ch;
        gsize n;
        if (c->fence) {
            if (fence_line(l, end, &ch, &n) && ch == c->fence && n >= c->fence_len &&
                blank_line(l + strspn(l, " ") + n, end))
                c->fence = 0;
            c->prev_blank = FALSE;
        } else {
            gboolean blank = blank_line(l, end);
            if (!blank && c->prev_blank && c->scanned > c->stable && starts_fresh(l))
                c->stable = c->scanned;
            if (fence_line(l, end, &ch, &n)) {
                c->fence = ch;
                c->fence_len = n;
            }
            c->prev_blank = blank;
        }
        c->scanned = (gsize)(end - text);
    }
    return c->stable;
}

/* ---- widgets ------------------------------------------------------------------ */

/* Make box's children show blocks, keeping the widgets that already do: a
 * label whose markup is the same stays, a code block whose text grew gets
 * only the new text. */
static void reconcile(GtkBox *box, GPtrArray *blocks)
{
    GtkWidget *w = gtk_widget_get_first_child(GTK_WIDGET(box));
    guint i = 0;
    for (; i < blocks->len && w; i++) {
        const Block *b = g_ptr_array_index(blocks, i);
        GtkSourceBuffer *buffer = g_object_get_data(G_OBJECT(w), "rlx-buffer");
        if (!b->code && GTK_IS_LABEL(w)) {
            if (g_strcmp0(g_object_get_data(G_OBJECT(w), "rlx-markup"), b->text) != 0)
                set_prose(w, b->text);
        } else if (b->code && buffer &&
                   g_strcmp0(g_object_get_data(G_OBJECT(w), "rlx-lang"), b->lang) == 0) {
            GtkTextBuffer *tb = GTK_TEXT_BUFFER(buffer);
            GtkTextIter a, e;
            gtk_text_buffer_get_bounds(tb, &a, &e);
            g_autofree char *old = gtk_text_buffer_get_text(tb, &a, &e, TRUE);
            gsize n = strlen(old);
            if (strcmp(b->text, old) != 0) {
                if (strncmp(b->text, old, n) == 0)
                    gtk_text_buffer_insert(tb, &e, b->text + n, -1);
                else
                    gtk_text_buffer_set_text(tb, b->text, -1);
                code_show(g_object_get_data(G_OBJECT(w), "rlx-code-label"), buffer);
            }
        } else {
            break;
        }
        w = gtk_widget_get_next_sibling(w);
    }
    while (w) {
        GtkWidget *next = gtk_widget_get_next_sibling(w);
        gtk_box_remove(box, w);
        w = next;
    }
    for (; i < blocks->len; i++) {
        const Block *b = g_ptr_array_index(blocks, i);
        gtk_box_append(box, b->code ? code_new(b) : prose_new(b->text));
    }
}

static void render_into(GtkBox *box, const char *src, gsize len)
{
    Renderer r = {.blocks = g_ptr_array_new_with_free_func((GDestroyNotify)block_free)};
    render(&r, src, len);
    g_string_free(r.markup, TRUE);
    reconcile(box, r.blocks);
    g_ptr_array_unref(r.blocks);
}

/* Scripts written without spaces (Han, Kana, Hangul, fullwidth forms):
 * a line may break before any of their characters (Unicode's line breaking
 * rules, class ID). */
static gboolean breaks_before(gunichar c)
{
    return (c >= 0x2E80 && c <= 0x9FFF) || (c >= 0xAC00 && c <= 0xD7AF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0xFF00 && c <= 0xFFEF) || c >= 0x20000;
}

/* The full stops of those scripts, after which a cut needs no space. */
static gboolean wide_sentence_end(gunichar c)
{
    return c == 0x3002 || c == 0xFF01 || c == 0xFF1F || c == 0xFF1B || c == 0xFF0E;
}

/* Combining marks belong to the character before them: never cut before one. */
static gboolean combining(gunichar c)
{
    GUnicodeType t = g_unichar_type(c);
    return t == G_UNICODE_NON_SPACING_MARK || t == G_UNICODE_SPACING_MARK ||
           t == G_UNICODE_ENCLOSING_MARK || c == 0x200D || (c >= 0xFE00 && c <= 0xFE0F);
}

gsize rlx_markdown_soft_cut(const char *text, gsize block, gsize from, gsize len, gsize limit)
{
    if (len - from <= limit)
        return 0;
    /* Only a paragraph of prose: what starts like a heading, a table, HTML,
     * a list, a quote or indented code is left whole. */
    unsigned char c0 = (unsigned char)text[block];
    if (!starts_fresh(text + block) || c0 == '#' || c0 == '|' || c0 == '<')
        return 0;
    /* Look in the newest half, from its end: after a sentence's end, else
     * after a space, else (text without spaces, as Chinese or Japanese)
     * before a character a line may break before; never inside a UTF-8
     * character. The piece's work per showing stays bounded only if some
     * cut is found, so a piece twice the limit with none of these (one
     * endless "word") is cut at its newest character boundary that does
     * not split a character from its combining marks. */
    gsize lo = from + limit / 2, space = 0, wide = 0, any = 0;
    for (gsize i = len - 1; i > lo; i--) {
        unsigned char b = (unsigned char)text[i];
        if ((b & 0xC0) == 0x80)
            continue; /* inside a character */
        char a = text[i - 1];
        if (b == ' ' || b == '\n') {
            if (a == '.' || a == '!' || a == '?' || a == ':' || a == ';')
                return i + 1;
            if (!space)
                space = i + 1;
            continue;
        }
        gunichar c = g_utf8_get_char_validated(text + i, (gssize)(len - i));
        if (c == (gunichar)-1 || c == (gunichar)-2 || combining(c))
            continue;
        const char *p = g_utf8_find_prev_char(text + lo, text + i);
        gunichar prev = p ? g_utf8_get_char_validated(p, (gssize)(text + i - p)) : 0;
        if (prev != (gunichar)-1 && prev != (gunichar)-2 && wide_sentence_end(prev))
            return i;
        if (!wide && breaks_before(c))
            wide = i;
        if (!any)
            any = i;
    }
    if (space)
        return space;
    if (wide)
        return wide;
    return len - from > 2 * limit ? any : 0;
}

struct RlxMarkdownStream {
    GtkBox *box; /* not owned */
    GString *src;
    RlxMarkdownChunker chunker;
    gsize open_from; /* where the open chunk starts in src */
    GtkBox *open;    /* its box: the last child of box (or of run) */
    gboolean live;   /* soft cuts allowed (rlx_markdown_stream_set_live) */
    gboolean cut;    /* a soft cut was made: settle renders anew */
    GtkBox *run;     /* the box of the soft-cut pieces of the open paragraph */
    gsize run_from;  /* where that paragraph starts in src */
};

static GtkBox *chunk_box(void)
{
    return GTK_BOX(gtk_box_new(GTK_ORIENTATION_VERTICAL, 8));
}

RlxMarkdownStream *rlx_markdown_stream_new(GtkBox *box)
{
    RlxMarkdownStream *s = g_new0(RlxMarkdownStream, 1);
    s->box = box;
    s->src = g_string_new(NULL);
    rlx_markdown_chunker_init(&s->chunker);
    return s;
}

void rlx_markdown_stream_free(RlxMarkdownStream *s)
{
    if (!s)
        return;
    g_string_free(s->src, TRUE);
    g_free(s);
}

static void stream_reset(RlxMarkdownStream *s)
{
    GtkWidget *child;
    while ((child = gtk_widget_get_first_child(GTK_WIDGET(s->box))))
        gtk_box_remove(s->box, child);
    g_string_truncate(s->src, 0);
    rlx_markdown_chunker_init(&s->chunker);
    s->open_from = 0;
    s->open = NULL;
    s->run = NULL;
    s->cut = FALSE;
}

void rlx_markdown_stream_update(RlxMarkdownStream *s, const char *text, gsize len)
{
    if (len < s->src->len || memcmp(text, s->src->str, s->src->len) != 0) {
        stream_reset(s); /* not a continuation: start over */
    } else if (len == s->src->len && s->open) {
        return;
    }
    g_string_append_len(s->src, text + s->src->len, (gssize)(len - s->src->len));
    if (!s->open) {
        s->open = chunk_box();
        gtk_box_append(s->box, GTK_WIDGET(s->open));
    }
    gsize stable = rlx_markdown_chunker_feed(&s->chunker, s->src->str, s->src->len);
    if (stable > s->open_from) {
        /* The open chunk is finished: rendered once more, whole, and kept. */
        render_into(s->open, s->src->str + s->open_from, stable - s->open_from);
        s->open_from = stable;
        s->open = chunk_box();
        s->run = NULL;
        gtk_box_append(s->box, GTK_WIDGET(s->open));
    }
    gsize cut = s->live && !s->chunker.fence
                    ? rlx_markdown_soft_cut(s->src->str, s->run ? s->run_from : s->open_from,
                                            s->open_from, s->src->len, RLX_MARKDOWN_SOFT_CUT_BYTES)
                    : 0;
    if (cut) {
        /* A paragraph that keeps growing: its first part is kept as it is,
         * in a run of boxes without spacing (so it reads as one paragraph
         * broken at a sentence), and only the rest is laid out again. */
        if (!s->run) {
            s->run = GTK_BOX(gtk_box_new(GTK_ORIENTATION_VERTICAL, 0));
            s->run_from = s->open_from;
            gtk_box_insert_child_after(s->box, GTK_WIDGET(s->run), GTK_WIDGET(s->open));
            g_object_ref(s->open);
            gtk_box_remove(s->box, GTK_WIDGET(s->open));
            gtk_box_append(s->run, GTK_WIDGET(s->open));
            g_object_unref(s->open);
        }
        render_into(s->open, s->src->str + s->open_from, cut - s->open_from);
        s->open_from = cut;
        s->open = chunk_box();
        gtk_box_append(s->run, GTK_WIDGET(s->open));
        s->cut = TRUE;
    }
    render_into(s->open, s->src->str + s->open_from, s->src->len - s->open_from);
}

void rlx_markdown_stream_set_live(RlxMarkdownStream *s, gboolean live)
{
    if (s->live == live)
        return;
    s->live = live;
    if (live || !s->cut)
        return;
    /* Settled: the paragraphs cut while they grew are laid out whole, so
     * what stays on screen reads exactly as the text does. */
    gsize n = s->src->len;
    g_autofree char *text = g_string_free(s->src, FALSE);
    s->src = g_string_new(NULL);
    stream_reset(s);
    rlx_markdown_stream_update(s, text, n);
}

gsize rlx_markdown_stream_finished_bytes(const RlxMarkdownStream *s)
{
    return s->open_from;
}

void rlx_markdown_render(GtkBox *box, const char *src)
{
    RlxMarkdownStream *s = rlx_markdown_stream_new(box);
    src = src ? src : "";
    rlx_markdown_stream_update(s, src, strlen(src));
    rlx_markdown_stream_free(s);
}

char *rlx_markdown_to_pango(const char *src)
{
    Renderer r = {0};
    r.markup = g_string_new(NULL);
    r.ol_next = g_array_new(FALSE, TRUE, sizeof(int));
    MD_PARSER parser = {
        .flags = MD_FLAG_TABLES | MD_FLAG_STRIKETHROUGH | MD_FLAG_NOHTML,
        .enter_block = enter_block,
        .leave_block = leave_block,
        .enter_span = enter_span,
        .leave_span = leave_span,
        .text = text,
    };
    md_parse(src, (MD_SIZE)strlen(src), &parser, &r);
    if (r.code)
        g_string_free(r.code, TRUE);
    g_array_unref(r.ol_next);
    g_free(r.code_lang);
    return g_string_free(r.markup, FALSE);
}
