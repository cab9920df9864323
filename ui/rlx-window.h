/* RlxWindow: the main window, a header bar with a view switcher over one page
 * per job (Chat, Segment, Transcribe, Imagine).
 *
 *   RlxWindow *win = rlx_window_new(app, rlx_application_get_settings(app));
 *   gtk_window_present(GTK_WINDOW(win));
 *
 * Action: win.view (string: chat, segment, transcribe, imagine) shows a page;
 * <Alt>1 to <Alt>4. The size and maximized state are restored from and saved
 * to settings (keys window-width, window-height, window-maximized).
 * win.show-memory and win.show-sampling pop up the memory and sampling
 * popovers. The header bar's device selector writes the "device" key and
 * reloads a loaded model there; a GGUF dropped on the window is opened (a
 * recording or a Whisper model goes to the Transcribe page).
 *
 * Thread safety: main thread only.
 */
#pragma once

#include "rlx-application.h"

G_BEGIN_DECLS

#define RLX_TYPE_WINDOW (rlx_window_get_type())
G_DECLARE_FINAL_TYPE(RlxWindow, rlx_window, RLX, WINDOW, AdwApplicationWindow)

/* settings: may be NULL (the window size is then not remembered). */
RlxWindow *rlx_window_new(RlxApplication *app, GSettings *settings);

/* Show the Chat page and load file (a GGUF) there; errors come as toasts. */
void rlx_window_open_model(RlxWindow *self, GFile *file);
/* A file from the command line or a drop, routed by what it is: a picture
 * or a SAM checkpoint to the Segment page, a recording or a Whisper model
 * to the Transcribe page, anything else to the Chat page as a model. */
void rlx_window_open_file(RlxWindow *self, GFile *file);
void rlx_window_toast(RlxWindow *self, const char *text);

G_END_DECLS
