/* RlxChatPane: the Chat page. A sidebar of conversations (kept as one JSON
 * file each under $XDG_DATA_HOME/rlx-studio/conversations/), the loaded
 * model's name and figures, the messages rendered as Markdown, and an entry
 * whose replies stream in from the engine.
 *
 *   RlxChatPane *pane = ...;               // from the window's template
 *   rlx_chat_pane_setup(pane, engine, settings);
 *   rlx_chat_pane_open_model(pane, file); // a GGUF: loads it on the engine
 *
 * Actions (group "chat"): new (Ctrl+N), open (Ctrl+O), send, stop (Escape),
 * regenerate (Ctrl+R), retry (the failure card's button: regenerate), search
 * (Ctrl+F: the sidebar's filter; Enter opens the first match), rename (F2),
 * delete (Delete in the list of conversations), export (string: "md"
 * (Ctrl+Shift+E) or "json" (Ctrl+Shift+J)). Escape, Ctrl+N, Ctrl+O, Ctrl+R
 * and Ctrl+F work wherever the focus is in the window.
 *
 * A reply that fails shows a card where it would be (what failed, on which
 * device, what to do, Retry; the engine's own words under Details). A reply
 * that reasons first (<think>…</think>) shows its reasoning folded, with its
 * token count and time; the conversation file keeps the text as written.
 * Toasts show over the messages, one at a time (the newest).
 *
 * A conversation is written atomically (temp file + rename) after every user
 * message, at least twice a second while a reply streams, and when it ends,
 * so killing the app loses at most the last half second of a reply.
 *
 * Thread safety: main thread only.
 */
#pragma once

#include "rlx-engine.h"

#include <adwaita.h>

G_BEGIN_DECLS

#define RLX_TYPE_CHAT_PANE (rlx_chat_pane_get_type())
G_DECLARE_FINAL_TYPE(RlxChatPane, rlx_chat_pane, RLX, CHAT_PANE, GtkWidget)

/* settings may be NULL (no schema): defaults are used. */
void rlx_chat_pane_setup(RlxChatPane *self, RlxEngine *engine, GSettings *settings);
void rlx_chat_pane_open_model(RlxChatPane *self, GFile *file);
/* Load the current model again (after the device or budget changed). */
void rlx_chat_pane_reload_model(RlxChatPane *self);
/* Pop up the sampling settings. */
void rlx_chat_pane_show_sampling(RlxChatPane *self);

G_END_DECLS
