/*  slow_pool.c — threads with a keystore connection each, fed by the
 *  frontend's thread (slow_pool.h).  An item goes to an idle thread as a
 *  pointer frame over the thread's actor pipe and comes back the same way.  */
#include "broker_config.h"
#include "fair_queue.h"
#include "slow_pool.h"

#define S_DRAIN_MS 5000             /* destroy waits this long for running items */

/*  One thread and what the pool knows of it.  */
typedef struct {
    slow_pool_t *pool;
    zactor_t *actor;
    keystore_t *ks;                 /* its connection; used only by its thread */
    slow_item_t *running;           /* the item it has, or NULL when idle */
} s_thread_t;

struct _slow_pool_t {
    zloop_t *loop;
    s_thread_t *threads;
    size_t n_threads;
    size_t busy;
    zlistx_t *light;                /* waiting items, FIFO */
    fair_queue_t *heavy;            /* waiting heavy items, per owner */
    slow_done_fn *done;
    slow_done_fn *discard;
    void *arg;
};

/*  The thread body: runs each item it gets, sends it back; "$TERM" ends.  */
static void
s_thread_run (zsock_t *pipe, void *arg)
{
    keystore_t *ks = arg;
    zsock_signal (pipe, 0);
    while (true) {
        zmsg_t *msg = zmsg_recv (pipe);
        zframe_t *frame = msg ? zmsg_first (msg) : NULL;
        if (!frame || zframe_streq (frame, "$TERM")) {
            zmsg_destroy (&msg);
            break;
        }
        slow_item_t *item = NULL;
        if (zframe_size (frame) == sizeof item)
            memcpy (&item, zframe_data (frame), sizeof item);
        zmsg_destroy (&msg);
        if (item) {
            item->run (item, ks);
            zsock_send (pipe, "p", item);
        }
    }
}

/*  Hands item to idle thread t.  */
static void
s_give (slow_pool_t *self, s_thread_t *t, slow_item_t *item)
{
    t->running = item;
    self->busy++;
    zsock_send (t->actor, "p", item);
}

/*  The next waiting item, light ones first, or NULL.  */
static slow_item_t *
s_next (slow_pool_t *self)
{
    slow_item_t *item = zlistx_first (self->light);
    if (item)
        return zlistx_detach_cur (self->light);
    return fair_queue_take (self->heavy, NULL, NULL);
}

/*  Takes back the item thread t sent: NULL when the frame is not one.  */
static slow_item_t *
s_take_back (slow_pool_t *self, s_thread_t *t)
{
    void *item = NULL;
    if (zsock_recv (t->actor, "p", &item) || !item || item != t->running)
        return NULL;
    t->running = NULL;
    self->busy--;
    return item;
}

/*  A thread sent its item back: the next waiting one goes to it, then the
 *  frontend gets the finished one (its callback may submit more).  */
static int
s_on_thread (zloop_t *loop, zsock_t *reader, void *arg)
{
    s_thread_t *t = arg;
    slow_pool_t *self = t->pool;
    slow_item_t *item = s_take_back (self, t);
    if (!item)
        return 0;
    slow_item_t *next = s_next (self);
    if (next)
        s_give (self, t, next);
    self->done (item, self->arg);
    return 0;
}

slow_pool_t *
slow_pool_new (keystore_t *ks, size_t threads, zloop_t *loop, slow_done_fn *done,
               slow_done_fn *discard, void *arg)
{
    assert (threads >= 1 && threads <= BROKER_MAX_SLOW_THREADS);
    slow_pool_t *self = calloc (1, sizeof *self);
    if (!self)
        return NULL;
    *self = (slow_pool_t) { .loop = loop, .done = done, .discard = discard, .arg = arg,
                            .light = zlistx_new (), .heavy = fair_queue_new (),
                            .threads = calloc (threads, sizeof (s_thread_t)) };
    if (!self->light || !self->heavy || !self->threads)
        goto fail;
    for (size_t i = 0; i < threads; i++) {
        s_thread_t *t = &self->threads [i];
        t->pool = self;
        if (!(t->ks = keystore_open_again (ks)))
            goto fail;
        if (!(t->actor = zactor_new (s_thread_run, t->ks))) {
            keystore_destroy (&t->ks);
            goto fail;
        }
        self->n_threads++;
        zloop_reader (loop, zactor_sock (t->actor), s_on_thread, t);
    }
    return self;
fail:
    zsys_error ("slow pool: cannot start thread %zu of %zu (keystore connection or thread)",
                self->n_threads + 1, threads);
    slow_pool_destroy (&self);
    return NULL;
}

/*  Waits up to S_DRAIN_MS for the running items and discards them.  */
static void
s_drain (slow_pool_t *self)
{
    zpoller_t *poller = zpoller_new (NULL);
    for (size_t i = 0; poller && i < self->n_threads; i++)
        zpoller_add (poller, zactor_sock (self->threads [i].actor));
    int64_t end = zclock_mono () + S_DRAIN_MS;
    while (poller && self->busy > 0 && zclock_mono () < end) {
        void *which = zpoller_wait (poller, (int) (end - zclock_mono ()));
        for (size_t i = 0; which && i < self->n_threads; i++)
            if (which == zactor_sock (self->threads [i].actor)) {
                slow_item_t *item = s_take_back (self, &self->threads [i]);
                if (item)
                    self->discard (item, self->arg);
            }
    }
    zpoller_destroy (&poller);
}

void
slow_pool_destroy (slow_pool_t **self_p)
{
    slow_pool_t *self = *self_p;
    if (!self)
        return;
    for (size_t i = 0; i < self->n_threads; i++)
        zloop_reader_end (self->loop, zactor_sock (self->threads [i].actor));
    s_drain (self);
    for (size_t i = 0; i < self->n_threads; i++) {
        zactor_destroy (&self->threads [i].actor);      /* an item still running is lost */
        keystore_destroy (&self->threads [i].ks);
    }
    for (slow_item_t *item; self->light && self->heavy && (item = s_next (self)); )
        self->discard (item, self->arg);
    zlistx_destroy (&self->light);
    fair_queue_destroy (&self->heavy);
    free (self->threads);
    free (self);
    *self_p = NULL;
}

void
slow_pool_submit (slow_pool_t *self, slow_item_t *item)
{
    for (size_t i = 0; i < self->n_threads; i++)
        if (!self->threads [i].running) {
            s_give (self, &self->threads [i], item);
            return;
        }
    if (!item->heavy)
        zlistx_add_end (self->light, item);     /* CZMQ aborts on OOM */
    else
    if (fair_queue_add (self->heavy, item->owner, item))
        self->discard (item, self->arg);        /* out of memory: its request is left unanswered */
}

size_t
slow_pool_queued (slow_pool_t *self)
{
    return zlistx_size (self->light) + fair_queue_size (self->heavy);
}

size_t
slow_pool_busy (slow_pool_t *self)
{
    return self->busy;
}
