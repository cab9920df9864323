/* RlxMailbox: how a worker thread's reports reach the main loop, for the
 * pages' workers (RlxSegmenter, RlxImaginer, RlxTranscriber). Reports are
 * queued under a lock; one idle source on the main context (at default
 * priority, so a progress bar drawing every frame does not hold them back)
 * hands them, in order, to the owner's deliver function, with the owner
 * referenced meanwhile. A report may replace the last one still queued
 * (a newer figure of the same kind).
 *
 *   rlx_mailbox_init(&self->mail, G_OBJECT(self), deliver, event_free, replaces);
 *   rlx_mailbox_post(&self->mail, e);     // any thread; e is the mailbox's
 *   rlx_mailbox_clear(&self->mail);       // finalize: the queued ones freed
 *
 * Thread safety: post from any thread; init, clear and the delivery on the
 * thread whose default main context was current at init. */
#pragma once

#include <glib-object.h>

G_BEGIN_DECLS

/* Called on the main context, for each report in order; the mailbox frees
 * the report afterwards. */
typedef void (*RlxMailboxDeliver)(GObject *owner, gpointer report);
/* Called under the lock: TRUE when `newer` replaces `last` (the last one
 * queued, not delivered yet), which is then freed; it may take what it
 * wants from `last` first. NULL: nothing is replaced. */
typedef gboolean (*RlxMailboxReplaces)(gpointer last, gpointer newer);

typedef struct {
    GMutex lock;
    GQueue queue;
    GSource *source; /* the one pending delivery, or NULL */
    GMainContext *main;
    GObject *owner; /* not referenced: it owns the mailbox */
    RlxMailboxDeliver deliver;
    GDestroyNotify free_report;
    RlxMailboxReplaces replaces;
} RlxMailbox;

void rlx_mailbox_init(RlxMailbox *m, GObject *owner, RlxMailboxDeliver deliver,
                      GDestroyNotify free_report, RlxMailboxReplaces replaces);
void rlx_mailbox_post(RlxMailbox *m, gpointer report);
void rlx_mailbox_clear(RlxMailbox *m);

G_END_DECLS
