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

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/markdown/inline", test_inline);
    g_test_add_func("/markdown/blocks", test_blocks);
    g_test_add_func("/markdown/valid-markup", test_valid_markup);
    return g_test_run();
}
