/* RlxTranscriber: the Transcribe page's bridge to the Whisper runner
 * (models/whisper/whisper.h). One worker thread creates the runner and
 * transcribes files; what it reports arrives on the main loop as signals.
 *
 *   RlxTranscriber *t = rlx_transcriber_new();
 *   g_signal_connect(t, "segment", G_CALLBACK(on_segment), pane);
 *   RlxTranscribeJob job = {.model = "ggml-base.bin", .device = "cpu",
 *                           .audio = "talk.wav", .language = "auto"};
 *   rlx_transcriber_start(t, &job);
 *   rlx_transcriber_cancel(t);    // "finished" follows with RLX_ERR_CANCELLED
 *   g_object_unref(t);            // cancels what runs, joins the thread
 *
 * Signals (main thread, in the order the runner produced them):
 *   loading (const char *stage, double fraction)   the model loads
 *   started (const char *kind, gboolean multilingual)  the model is ready
 *   language (const char *code, double p)
 *   segment (gint64 t0_ms, gint64 t1_ms, const char *text)
 *   progress (double done_s, double total_s)   done_s <= total_s
 *   memory (const RlxMemoryInfo *)   what the model takes, once it is loaded
 *   finished (int status, const char *message)    status: an rlx_status
 *            (0, RLX_ERR_CANCELLED, or a failure and its sentence)
 *
 * Batching: the thread queues events under a mutex and at most one idle
 * source is pending on the main context; adjacent progress reports keep the
 * latest only. The runner stays loaded between jobs with the same model,
 * device, threads and budget.
 *
 * Thread safety: main thread only.
 */
#pragma once

#include <gio/gio.h>
#include <stdint.h>

#include "rlx-engine.h" /* RlxMemoryInfo */

G_BEGIN_DECLS

typedef struct {
    const char *model;    /* a whisper.cpp .bin file or a Hugging Face folder */
    const char *device;   /* "cpu", "vulkan:0"; NULL = "cpu" */
    int n_threads;        /* 0 = one per core */
    uint64_t budget;      /* bytes; 0 = the device's memory */
    const char *audio;    /* the recording */
    const char *language; /* "auto" or NULL: detect; "en", "de", ... */
    gboolean translate;   /* into English */
    gint64 offset_ms;     /* start this far into the recording (to continue one) */
} RlxTranscribeJob;

#define RLX_TYPE_TRANSCRIBER (rlx_transcriber_get_type())
G_DECLARE_FINAL_TYPE(RlxTranscriber, rlx_transcriber, RLX, TRANSCRIBER, GObject)

RlxTranscriber *rlx_transcriber_new(void);

/* Queue a transcription (the job is copied); FALSE, and nothing queued, while
 * one runs ("finished" not yet emitted). */
gboolean rlx_transcriber_start(RlxTranscriber *self, const RlxTranscribeJob *job);
/* Stop the running job after its current step (loading stops too); the
 * segments already reported stay reported. */
void rlx_transcriber_cancel(RlxTranscriber *self);
gboolean rlx_transcriber_is_busy(RlxTranscriber *self);

G_END_DECLS
