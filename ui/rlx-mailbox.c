#include "rlx-mailbox.h"

static gboolean deliver_all(gpointer data)
{
    RlxMailbox *m = data;
    GObject *owner = g_object_ref(m->owner);
    g_mutex_lock(&m->lock);
    GQueue q = m->queue;
    g_queue_init(&m->queue);
    g_clear_pointer(&m->source, g_source_unref);
    g_mutex_unlock(&m->lock);
    for (gpointer r; (r = g_queue_pop_head(&q));) {
        m->deliver(owner, r);
        m->free_report(r);
    }
    g_object_unref(owner);
    return G_SOURCE_REMOVE;
}

void rlx_mailbox_init(RlxMailbox *m, GObject *owner, RlxMailboxDeliver deliver,
                      GDestroyNotify free_report, RlxMailboxReplaces replaces)
{
    g_mutex_init(&m->lock);
    g_queue_init(&m->queue);
    m->source = NULL;
    m->main = g_main_context_ref_thread_default();
    m->owner = owner;
    m->deliver = deliver;
    m->free_report = free_report;
    m->replaces = replaces;
}

void rlx_mailbox_post(RlxMailbox *m, gpointer report)
{
    g_mutex_lock(&m->lock);
    gpointer last = g_queue_peek_tail(&m->queue);
    if (last && m->replaces && m->replaces(last, report)) {
        g_queue_pop_tail(&m->queue);
        m->free_report(last);
    }
    g_queue_push_tail(&m->queue, report);
    if (!m->source) {
        m->source = g_idle_source_new();
        g_source_set_priority(m->source, G_PRIORITY_DEFAULT);
        g_source_set_callback(m->source, deliver_all, m, NULL);
        g_source_attach(m->source, m->main);
    }
    g_mutex_unlock(&m->lock);
}

void rlx_mailbox_clear(RlxMailbox *m)
{
    if (m->source) {
        g_source_destroy(m->source);
        g_clear_pointer(&m->source, g_source_unref);
    }
    g_queue_clear_full(&m->queue, m->free_report);
    g_clear_pointer(&m->main, g_main_context_unref);
    g_mutex_clear(&m->lock);
}
