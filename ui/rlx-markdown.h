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

/* text as Pango markup, without code blocks' widgets (for tests). */
char *rlx_markdown_to_pango(const char *text);

G_END_DECLS
