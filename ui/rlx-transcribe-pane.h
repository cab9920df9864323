/* RlxTranscribePane: the Transcribe page. A recording (opened, dropped or
 * recorded from the microphone) goes through the Whisper runner
 * (RlxTranscriber) on the device the window's device menu selected; its
 * segments appear as they settle, each with its times, and a click on one
 * plays the recording from there. Transcripts are kept in a sidebar, one
 * JSON file each under $XDG_DATA_HOME/rlx-studio/transcripts/, written
 * atomically (temporary file + rename) before a new segment is drawn, so
 * kill -9 loses no segment that was on screen. Recordings made here are
 * saved as WAV under $XDG_DATA_HOME/rlx-studio/recordings/ first.
 *
 *   RlxTranscribePane *pane = ...;        // from the window's template
 *   rlx_transcribe_pane_setup(pane, settings);
 *   rlx_transcribe_pane_open(pane, file); // a recording, or a model
 *
 * Actions (group "transcribe"): open (Ctrl+O), new, record (Ctrl+R: starts
 * recording, or stops it and transcribes what was recorded), stop (the
 * transcription, keeping its segments), escape (Escape: stops whatever is
 * under way: recording, playback or transcription), resume (continues a
 * stopped or unfinished transcript after its last segment), copy
 * (Ctrl+Shift+C: every segment's text), export (string: "txt", "srt",
 * "vtt", "json"), export-menu (Ctrl+E: pops up the formats), delete,
 * model-file, model-folder. The keys work while the focus is in the page
 * (it moves there when the page is shown).
 *
 * Signal: memory (const RlxMemoryInfo *): what the loaded Whisper model
 * takes on its device (for the header bar, while this page is shown).
 *
 * Settings: whisper-model (the last model chosen), whisper-language,
 * whisper-translate; device, memory-budget-mib and threads as the Chat page
 * uses them.
 *
 * Thread safety: main thread only.
 */
#pragma once

#include <adwaita.h>

G_BEGIN_DECLS

#define RLX_TYPE_TRANSCRIBE_PANE (rlx_transcribe_pane_get_type())
G_DECLARE_FINAL_TYPE(RlxTranscribePane, rlx_transcribe_pane, RLX, TRANSCRIBE_PANE, GtkWidget)

/* settings may be NULL (no schema): defaults are used, nothing remembered. */
void rlx_transcribe_pane_setup(RlxTranscribePane *self, GSettings *settings);
/* A recording is transcribed; a Whisper model (a .bin file or a folder)
 * becomes the model. Errors come as toasts. */
void rlx_transcribe_pane_open(RlxTranscribePane *self, GFile *file);
/* Whether the file looks like a recording or a Whisper model (by its name
 * or type), for the window to route a drop to this page. */
gboolean rlx_transcribe_pane_wants_file(GFile *file);

G_END_DECLS
