/* ui/rlx-markdown.c: Markdown to Pango markup (no display needed). */
#include "rlx-markdown.h"

#include <pango/pango.h>
#include <string.h>

static void check(const char *md, const char *expected)
{
    g_autofree char *out = rlx_markdown_to_pango(md);
    g_assert_cmpstr(out, ==, expected);
}

static void test_inline(void)
{
    check("Some *em* and **strong** and `code` and ~~gone~~.\n",
          "Some <i>em</i> and <b>strong</b> and <tt>code</tt> and <s>gone</s>.\n\n");
    /* Text is escaped: a model's "<" or "&" never breaks the markup. */
    check("a < b && c > d\n", "a &lt; b &amp;&amp; c &gt; d\n\n");
    check("[docs](https://example.org/?a=1&b=2)\n",
          "<a href=\"https://example.org/?a=1&amp;b=2\">docs</a>\n\n");
}

static void test_blocks(void)
{
    check("# Title\n", "<span size=\"xx-large\" weight=\"bold\">Title</span>\n\n");
    check("1. one\n2. two\n", "1. one\n2. two\n\n");
    check("- a\n- b\n", "• a\n• b\n\n");
    check("3. three\n4. four\n", "3. three\n4. four\n\n");
    check("> quoted\n", "<i>quoted</i>\n\n");
}

static void test_valid_markup(void)
{
    /* Everything a model might write comes out as markup Pango accepts. */
    const char *inputs[] = {
        "**unclosed *emphasis\n",
        "<script>alert(1)</script>\n",
        "| a | b |\n|---|---|\n| 1 | 2 |\n",
        "- [x] done\n  1. nested\n",
        "&amp; &nbsp; &bogus;\n",
        "",
    };
    for (size_t i = 0; i < G_N_ELEMENTS(inputs); i++) {
        g_autofree char *out = rlx_markdown_to_pango(inputs[i]);
        g_assert_true(pango_parse_markup(out, -1, 0, NULL, NULL, NULL, NULL));
    }
}

/* Texts a model writes, each cut into chunks by the streaming renderer. */
static const char *const samples[] = {
    "# Plan\n\nFirst *this*.\n\nThen **that**, and `code`.\n\nDone.\n",
    "Steps:\n\n1. one\n2. two\n\n3. three, after a blank line (one loose list)\n\nAfter.\n",
    "- a\n- b\n\n  still b\n\nNot the list.\n",
    "> quoted\n\n> quoted again\n\nplain\n",
    "```c\nint x;\n\nint y; /* a blank line inside the fence */\n\nz\n```\n\nAfter the "
    "code.\n",
    "~~~\nA\n\n```\nstill inside the tilde fence\n~~~\n\nout\n",
    "| a | b |\n|---|---|\n| 1 | 2 |\n\nText after the table.\n",
    "Title\n=====\n\nSetext heading above.\n\n---\n\nAfter a rule.\n",
    "    indented code\n\n    more of it\n\nText.\n",
};

/* Fed a byte at a time, the chunker finds the same chunks as fed whole. */
static void test_chunks_incremental(void)
{
    for (size_t i = 0; i < G_N_ELEMENTS(samples); i++) {
        const char *t = samples[i];
        gsize n = strlen(t);
        RlxMarkdownChunker whole, bytes;
        rlx_markdown_chunker_init(&whole);
        rlx_markdown_chunker_init(&bytes);
        gsize stable = 0;
        for (gsize k = 1; k <= n; k++) {
            gsize s = rlx_markdown_chunker_feed(&bytes, t, k);
            g_assert_cmpuint(s, >=, stable); /* a finished chunk stays finished */
            g_assert_cmpuint(s, <=, k);
            stable = s;
        }
        g_assert_cmpuint(rlx_markdown_chunker_feed(&whole, t, n), ==, stable);
    }
}

/* Rendering the chunks one by one gives the markup of the whole text: a
 * cut never changes how the text before or after it reads. */
static void test_chunks_render_the_same(void)
{
    for (size_t i = 0; i < G_N_ELEMENTS(samples); i++) {
        const char *t = samples[i];
        gsize n = strlen(t);
        GString *joined = g_string_new(NULL);
        gsize from = 0;
        RlxMarkdownChunker c;
        rlx_markdown_chunker_init(&c);
        for (gsize k = 1; k <= n; k++) {
            gsize s = rlx_markdown_chunker_feed(&c, t, k);
            if (s > from) {
                g_autofree char *chunk = g_strndup(t + from, s - from);
                g_autofree char *m = rlx_markdown_to_pango(chunk);
                g_string_append(joined, m);
                from = s;
            }
        }
        g_autofree char *rest = g_strdup(t + from);
        g_autofree char *m = rlx_markdown_to_pango(rest);
        g_string_append(joined, m);
        g_autofree char *whole = rlx_markdown_to_pango(t);
        g_assert_cmpstr(joined->str, ==, whole);
        g_string_free(joined, TRUE);
    }
}

/* The cuts fall where expected: after each paragraph, never inside a
 * fence, nor before a list item or a quote that may continue. */
static void test_chunk_points(void)
{
    RlxMarkdownChunker c;
    const char *t = samples[0];
    rlx_markdown_chunker_init(&c);
    /* "# Plan\n\nFirst *this*.\n\nThen ...\n\nDone.\n": the last cut is before "Done." */
    g_assert_cmpuint(rlx_markdown_chunker_feed(&c, t, strlen(t)), ==,
                     (gsize)(strstr(t, "Done.") - t));
    t = samples[4];
    rlx_markdown_chunker_init(&c);
    g_assert_cmpuint(rlx_markdown_chunker_feed(&c, t, strlen(t)), ==,
                     (gsize)(strstr(t, "After the") - t));
    t = samples[1];
    rlx_markdown_chunker_init(&c);
    g_assert_cmpuint(rlx_markdown_chunker_feed(&c, t, strlen(t)), ==,
                     (gsize)(strstr(t, "After.") - t));
}

/* A live stream cuts a long paragraph after a sentence, else a word, in
 * its newest half, and leaves other blocks and short pieces whole. */
static void test_soft_cut(void)
{
    GString *t = g_string_new(NULL);
    while (t->len < 100)
        g_string_append(t, "word ");
    gsize len = t->len;
    g_assert_cmpuint(rlx_markdown_soft_cut(t->str, 0, 0, len, len), ==, 0); /* not longer */
    /* no sentence end: after the last space */
    g_assert_cmpuint(rlx_markdown_soft_cut(t->str, 0, 0, len, 40), ==, len);
    g_string_truncate(t, len - 1); /* ends "word" */
    g_assert_cmpuint(rlx_markdown_soft_cut(t->str, 0, 0, t->len, 40), ==, t->len - 4);
    /* a sentence end in the newest half wins over a later space */
    g_string_truncate(t, 60);
    g_string_append(t, "Done. More words here");
    const char *end = strstr(t->str, "Done. ") + 6;
    g_assert_cmpuint(rlx_markdown_soft_cut(t->str, 0, 0, t->len, 40), ==, (gsize)(end - t->str));
    /* ... but not one in the older half: then the last space */
    GString *o = g_string_new("Done. ");
    while (o->len < 150)
        g_string_append(o, "word ");
    g_string_append(o, "end");
    g_assert_cmpuint(rlx_markdown_soft_cut(o->str, 0, 0, o->len, 100), ==, o->len - 3);
    g_string_free(o, TRUE);
    /* a later piece of the same block: the block's start decides */
    gsize from = 20;
    g_assert_cmpuint(rlx_markdown_soft_cut(t->str, 0, from, t->len, 40), ==, (gsize)(end - t->str));
    /* not prose: a list, a table, a heading, a quote, indented code */
    const char *starts[] = {"- ", "| ", "# ", "> ", "    ", "1. "};
    for (size_t i = 0; i < G_N_ELEMENTS(starts); i++) {
        g_autofree char *u = g_strconcat(starts[i], t->str, NULL);
        g_assert_cmpuint(rlx_markdown_soft_cut(u, 0, 0, strlen(u), 40), ==, 0);
    }
    /* no space in the newest half (one long word): no cut while the piece
     * is under twice the limit, then at its newest character boundary */
    g_autofree char *w = g_strnfill(200, 'x');
    g_assert_cmpuint(rlx_markdown_soft_cut(w, 0, 0, 70, 40), ==, 0);
    g_assert_cmpuint(rlx_markdown_soft_cut(w, 0, 0, 200, 40), ==, 199);
    g_string_free(t, TRUE);
}

/* Text without spaces (a Chinese reply): cut before a Han character in the
 * newest half, or right after a full stop 。, never inside a character and
 * never between a letter and its combining mark. */
static void test_soft_cut_wide(void)
{
    GString *t = g_string_new(NULL);
    while (t->len < 300)
        g_string_append(t, "\u642d\u914d"); /* 搭配, 3 bytes each */
    gsize cut = rlx_markdown_soft_cut(t->str, 0, 0, t->len, 100);
    g_assert_cmpuint(cut, >, 50);
    g_assert_cmpuint(cut, <, t->len);
    g_assert_true(g_utf8_validate(t->str, (gssize)cut, NULL));
    g_assert_cmpuint(cut % 3, ==, 0);
    /* a full stop in the newest half: the cut follows it */
    gsize stop = t->len - 30;
    g_string_insert(t, (gssize)stop, "\u3002");
    g_assert_cmpuint(rlx_markdown_soft_cut(t->str, 0, 0, t->len, 100), ==, stop + 3);
    g_string_free(t, TRUE);
    /* a letter and its combining acute accent (e + U+0301) stay together */
    GString *e = g_string_new(NULL);
    while (e->len < 300)
        g_string_append(e, "e\u0301");
    cut = rlx_markdown_soft_cut(e->str, 0, 0, e->len, 100);
    g_assert_cmpuint(cut, >, 0);
    g_assert_cmpint(e->str[cut], ==, 'e');
    g_string_free(e, TRUE);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/markdown/inline", test_inline);
    g_test_add_func("/markdown/blocks", test_blocks);
    g_test_add_func("/markdown/valid-markup", test_valid_markup);
    g_test_add_func("/markdown/chunks-incremental", test_chunks_incremental);
    g_test_add_func("/markdown/chunks-render-the-same", test_chunks_render_the_same);
    g_test_add_func("/markdown/chunk-points", test_chunk_points);
    g_test_add_func("/markdown/soft-cut", test_soft_cut);
    g_test_add_func("/markdown/soft-cut-wide", test_soft_cut_wide);
    return g_test_run();
}
