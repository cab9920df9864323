/* Markdown (CommonMark + GitHub tables and strikethrough, through md4c) shown
 * as GTK widgets: prose as wrapped, selectable labels with Pango markup, each
 * fenced or indented code block as a GtkSourceView with a copy button.
 *
 *   rlx_markdown_render(GTK_BOX(body), "# Title\n\nSome *text*.\n");
 *
 * Thread safety: main thread only.
 */
#pragma once

#include <gtk/gtk.h>

G_BEGIN_DECLS

/* Replace the children of box by the rendering of text (UTF-8). */
void rlx_markdown_render(GtkBox *box, const char *text);

/* A text that grows (a streaming reply) shown in a box. The text is cut into
 * chunks at blank lines after which nothing can change how the text before
 * is read; a finished chunk is rendered once and kept, only the last (open)
 * one is parsed again on each update, and its widgets are updated in place
 * (a label's markup, the new end of a code block). The box's children are
 * one box per chunk.
 *
 *   RlxMarkdownStream *s = rlx_markdown_stream_new(box);
 *   rlx_markdown_stream_update(s, reply, reply_len);  // again as it grows
 *   rlx_markdown_stream_free(s);                      // the widgets stay
 *
 * A text that is not a continuation of the last is rendered anew. */
typedef struct RlxMarkdownStream RlxMarkdownStream;
RlxMarkdownStream *rlx_markdown_stream_new(GtkBox *box);
void rlx_markdown_stream_update(RlxMarkdownStream *s, const char *text, gsize len);
/* While live (set by the caller while the text streams in), a paragraph
 * longer than RLX_MARKDOWN_SOFT_CUT_BYTES is also cut, after a sentence or a
 * word in its newest half (in text without spaces, such as Chinese, before
 * a character where a line may break), so that laying out what is still
 * open costs the same however long the paragraph grows (1 KiB: shaping
 * the open piece was a quarter of each showing's time at 2 KiB); Markdown
 * that spans such a cut shows as written until the stream settles. Setting it not live again lays
 * out anew, whole, what was cut so. A new stream is not live. */
#define RLX_MARKDOWN_SOFT_CUT_BYTES 1024
void rlx_markdown_stream_set_live(RlxMarkdownStream *s, gboolean live);
/* Bytes of the text in finished chunks (never rendered again). */
gsize rlx_markdown_stream_finished_bytes(const RlxMarkdownStream *s);
void rlx_markdown_stream_free(RlxMarkdownStream *s);

/* The chunking alone (no widgets; for the tests): feed the whole text so far
 * each time; returns the offset up to which it is finished chunks. */
typedef struct {
    gsize scanned, stable;
    char fence; /* inside a fence opened with this character */
    gsize fence_len;
    gboolean prev_blank;
} RlxMarkdownChunker;
void rlx_markdown_chunker_init(RlxMarkdownChunker *c);
gsize rlx_markdown_chunker_feed(RlxMarkdownChunker *c, const char *text, gsize len);
/* Where a live stream cuts the open piece text[from, len) of the block that
 * starts at text[block] when the piece is longer than limit bytes: after the
 * last sentence end (". ", "! ", "。", …) in its newest half, else after its
 * last space there, else before its last Han, Kana or Hangul character
 * there, else, once the piece is over twice the limit, at its last character
 * boundary (not before a combining mark); 0: no cut (short, or the block is
 * not prose). */
gsize rlx_markdown_soft_cut(const char *text, gsize block, gsize from, gsize len, gsize limit);

/* text as Pango markup, without code blocks' widgets (for tests). */
char *rlx_markdown_to_pango(const char *text);

G_END_DECLS
