/*  link.c — the I/O thread, the leader/follower receive path and the life
 *  cycle of the link (link.h).
 *
 *  Waiters live on the calling thread's stack (or, detached, on the heap:
 *  link_call.c) and sit in the wait queue (waitq.h), guarded by the link's
 *  own mutex.  The DEALER sockets belong
 *  to whoever holds the token (`leader`, under the mutex): a waiting
 *  application thread that finds it free takes it, drives the queue's
 *  policy (what to send where, when to send again), polls the sockets
 *  itself and hands each reply to its waiter; it gives the token back when
 *  its own reply has come and wakes one waiter still undone to lead next
 *  (leader/follower, docs/DESIGN.md §5).  A lone thread therefore never
 *  wakes the I/O thread.  The I/O thread owns the monitor sockets only: it
 *  marks brokers up and down, gives a dead broker's jobs back, and
 *  interrupts the leader's poll so that it acts on that.  A waiter always
 *  removes itself (a detached one: whoever completes or frees it), so
 *  nobody else frees one.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <zmq.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>
#include "log.h"
#include "link_int.h"

static void
s_signal_fd (int fd)
{
    uint64_t one = 1;
    if (write (fd, &one, sizeof one) < 0 && errno != EAGAIN)
        cs_log_debug ("link: cannot wake a thread: %s", strerror (errno));
}

static void
s_drain_fd (int fd)
{
    uint64_t count;
    (void) !read (fd, &count, sizeof count);
}

/*  The queue's hooks (waitq.h), called under the mutex by the leader (send)
 *  or by anyone (finish).  */
static int
s_send_hook (void *arg, size_t assoc, const uint8_t *frame, size_t size)
{
    cs_link_t *self = arg;
    return cs_assoc_send (&self->assocs [assoc], frame, size);
}

static void
s_finish_hook (void *arg, cs_waiter_t *waiter)
{
    (void) arg;
    pthread_cond_signal (&((cs_link_call_t *) waiter)->cond);
}

/*  Wipes a received frame (a reply may carry a plaintext, an ECDH secret or
 *  a generated private key; its decoded copy is the caller's) and closes it.  */
static void
s_msg_wipe_close (zmq_msg_t *msg)
{
    if (zmq_msg_size (msg))
        OPENSSL_cleanse (zmq_msg_data (msg), zmq_msg_size (msg));
    zmq_msg_close (msg);
}

/*  Leader, mutex not held: hands one decoded reply from association `i` to
 *  its waiter, or drops it.  */
static void
s_deliver (cs_link_t *self, size_t i, Cs__Reply *reply)
{
    pthread_mutex_lock (&self->mutex);
    if (reply->rv == CKR_OK)                    /* errors say the lowest version */
        self->assocs [i].peer_version = reply->version;
    (void) cs_waitq_deliver (&self->queue, &reply);     /* re-queued ones go on our next turn */
    pthread_mutex_unlock (&self->mutex);
    if (reply) {
        cs_log_debug ("link: dropping late or unknown reply %llu",
                      (unsigned long long) reply->request_id);
        cs_wire_reply_free (&reply);        /* a late plaintext or private key */
    }
}

/*  Leader, mutex not held: reads every reply waiting on association `i`.
 *  A reply to a job re-sent elsewhere is taken from whichever broker
 *  answers first.  */
static void
s_receive_all (cs_link_t *self, size_t i)
{
    cs_assoc_t *assoc = &self->assocs [i];
    while (true) {
        zmq_msg_t msg;
        const char *why = NULL;
        Cs__Reply *reply;
        zmq_msg_init (&msg);
        if (zmq_msg_recv (&msg, assoc->socket, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close (&msg);
            return;
        }
        pthread_mutex_lock (&self->mutex);
        cs_waitq_heard (&self->queue, i, cs_assoc_now_ms ());
        pthread_mutex_unlock (&self->mutex);
        if (zmq_msg_more (&msg)) {
            cs_log_warning ("link: dropping a multi-frame message from %s", assoc->endpoint);
            s_msg_wipe_close (&msg);
            continue;
        }
        reply = cs_wire_reply_decode (zmq_msg_data (&msg), zmq_msg_size (&msg), &why);
        s_msg_wipe_close (&msg);
        if (!reply)
            cs_log_warning ("link: dropping a bad reply from %s: %s", assoc->endpoint, why);
        else
            s_deliver (self, i, reply);
    }
}

/*  I/O thread: one monitor event of association `i`.  A broker gone or
 *  refusing gives its jobs back; when every broker refuses us, queued
 *  calls fail at once (CKR_DEVICE_ERROR) rather than at their deadline.
 *  The leader is interrupted: a broker up or down changes what it sends.  */
static void
s_monitor_event (cs_link_t *self, size_t i)
{
    bool refused = true;
    pthread_mutex_lock (&self->mutex);
    if (cs_assoc_event (&self->assocs [i]) == CS_ASSOC_WENT_DOWN)
        cs_waitq_broker_down (&self->queue, i, self->assocs [i].state == CS_ASSOC_REFUSED
                              ? "refused the handshake" : "dropped the connection");
    for (size_t j = 0; j < self->n_assocs; j++)
        refused &= self->assocs [j].state == CS_ASSOC_REFUSED;
    self->refused = refused;
    if (refused)
        cs_waitq_fail_all (&self->queue, CKR_DEVICE_ERROR, true);
    if (self->leader_polling)
        s_signal_fd (self->leader_fd);
    pthread_mutex_unlock (&self->mutex);
}

/*  The I/O thread: the monitor sockets only, so it sleeps while calls come
 *  and go (their threads poll the DEALERs themselves).  */
static void *
s_io_thread (void *arg)
{
    cs_link_t *self = arg;
    size_t n = self->n_assocs;
    zmq_pollitem_t items [CS_CLIENT_MAX_ENDPOINTS + 1];
    for (size_t i = 0; i < n; i++)
        items [i] = (zmq_pollitem_t) { self->assocs [i].monitor, 0, ZMQ_POLLIN, 0 };
    items [n] = (zmq_pollitem_t) { NULL, self->wake_fd, ZMQ_POLLIN, 0 };
    while (true) {
        bool stopping;
        pthread_mutex_lock (&self->mutex);
        stopping = self->stopping;
        pthread_mutex_unlock (&self->mutex);
        if (stopping)
            break;
        if (zmq_poll (items, (int) (n + 1), -1) < 0) {
            if (errno == EINTR)
                continue;
            cs_log_error ("link: poll failed: %s", zmq_strerror (errno));
            break;
        }
        __atomic_add_fetch (&self->io_wakeups, 1, __ATOMIC_RELAXED);
        if (items [n].revents & ZMQ_POLLIN)
            s_drain_fd (self->wake_fd);
        for (size_t i = 0; i < n; i++)
            if (items [i].revents & ZMQ_POLLIN)
                s_monitor_event (self, i);
    }
    return NULL;
}

/*  Creates the context and one association per endpoint and starts the
 *  I/O thread; the caller blocks signals.  */
static CK_RV
s_open (cs_link_t *self, const cs_client_config_t *config)
{
    if (config->n_endpoints < 1 || config->n_endpoints > CS_CLIENT_MAX_ENDPOINTS)
        return CKR_GENERAL_ERROR;
    if (!(self->ctx = zmq_ctx_new ()))
        return CKR_GENERAL_ERROR;
    zmq_ctx_set (self->ctx, ZMQ_IO_THREADS, 1);
    zmq_ctx_set (self->ctx, ZMQ_BLOCKY, 0);
    if (!(self->assocs = calloc (config->n_endpoints, sizeof *self->assocs)))
        return CKR_HOST_MEMORY;
    self->n_assocs = config->n_endpoints;
    cs_waitq_init (&self->queue, self->assocs, self->n_assocs,
                   config->attempt_timeout_ms > 0 ? config->attempt_timeout_ms : (config->timeout_ms + 3) / 4,
                   &(cs_waitq_io_t) { s_send_hook, s_finish_hook, self });
    for (size_t i = 0; i < config->n_endpoints; i++)
        if (cs_assoc_open (&self->assocs [i], self->ctx, config, i) != 0)
            return CKR_GENERAL_ERROR;
    if ((self->wake_fd = eventfd (0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0
    ||  (self->leader_fd = eventfd (0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0)
        return CKR_GENERAL_ERROR;
    if (pthread_create (&self->thread, NULL, s_io_thread, self) != 0) {
        cs_log_error ("link: cannot start the I/O thread");
        return CKR_GENERAL_ERROR;
    }
    self->thread_started = true;
    return CKR_OK;
}

cs_link_t *
cs_link_new (const cs_client_config_t *config, CK_RV *rv_p)
{
    CK_RV rv = CKR_HOST_MEMORY;
    sigset_t all, old;
    cs_link_t *self = calloc (1, sizeof *self);
    if (!self)
        goto out;
    self->wake_fd = -1;
    self->leader_fd = -1;
    pthread_mutex_init (&self->mutex, NULL);
    pthread_cond_init (&self->drained, NULL);
    /*  Threads started here (ours and libzmq's) must not take the
     *  application's signals: nginx and JVMs rely on that.  */
    sigfillset (&all);
    pthread_sigmask (SIG_BLOCK, &all, &old);
    rv = s_open (self, config);
    pthread_sigmask (SIG_SETMASK, &old, NULL);
    if (rv != CKR_OK)
        cs_link_destroy (&self);
out:
    if (rv_p)
        *rv_p = rv;
    return self;
}

void
cs_link_stop (cs_link_t *self)
{
    if (!self)
        return;
    pthread_mutex_lock (&self->mutex);
    self->stopping = true;
    cs_waitq_fail_all (&self->queue, CKR_CRYPTOKI_NOT_INITIALIZED, false);
    if (self->leader_polling)
        s_signal_fd (self->leader_fd);          /* it leaves its poll and the sockets */
    pthread_mutex_unlock (&self->mutex);
}

void
cs_link_destroy (cs_link_t **self_p)
{
    cs_link_t *self = self_p ? *self_p : NULL;
    if (!self)
        return;
    cs_link_stop (self);
    if (self->thread_started) {
        s_signal_fd (self->wake_fd);
        pthread_join (self->thread, NULL);
    }
    pthread_mutex_lock (&self->mutex);
    while (self->callers > 0)
        pthread_cond_wait (&self->drained, &self->mutex);
    pthread_mutex_unlock (&self->mutex);
    for (size_t i = 0; self->assocs && i < self->n_assocs; i++)
        cs_assoc_close (&self->assocs [i]);
    free (self->assocs);
    if (self->ctx)
        zmq_ctx_term (self->ctx);
    if (self->wake_fd >= 0)
        close (self->wake_fd);
    if (self->leader_fd >= 0)
        close (self->leader_fd);
    pthread_cond_destroy (&self->drained);
    pthread_mutex_destroy (&self->mutex);
    free (self);
    *self_p = NULL;
}

/*  Links abandoned in forked children: kept reachable, never freed (their
 *  I/O thread and sockets belong to the parent), so leak checkers see them
 *  as still referenced rather than lost.  */
static cs_link_t *s_abandoned [8];

void
cs_link_abandon (cs_link_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    (*self_p)->abandoned = true;        /* its detached calls are freed without it */
    for (size_t i = 0; i < sizeof s_abandoned / sizeof s_abandoned [0]; i++)
        if (!s_abandoned [i]) {
            s_abandoned [i] = *self_p;
            break;
        }
    *self_p = NULL;
}

static void
s_deadline (int64_t timeout_ms, struct timespec *ts)
{
    clock_gettime (CLOCK_MONOTONIC, ts);
    ts->tv_sec += timeout_ms / 1000;
    ts->tv_nsec += (timeout_ms % 1000) * 1000000;
    if (ts->tv_nsec >= 1000000000) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000;
    }
}

/*  Leader, mutex held: wakes one blocking waiter still undone to take the
 *  token, when nobody holds it (a leader gone with its reply, or a promoted
 *  thread that found its call done); a detached call has no thread to
 *  wake.  */
void
cs_link_int_promote (cs_link_t *self)
{
    if (self->leader)
        return;
    for (cs_waiter_t *w = self->queue.waiters; w; w = w->next)
        if (!w->done && !((cs_link_call_t *) w)->detached) {
            pthread_cond_signal (&((cs_link_call_t *) w)->cond);
            return;
        }
}

/*  Leader, mutex held on entry and on return: one turn of the queue's
 *  policy, then a poll of the DEALERs (mutex released) for at most the
 *  queue's next timer or `left_ms`, and the replies that came.  */
static void
s_lead_turn (cs_link_t *self, int64_t left_ms)
{
    size_t n = self->n_assocs;
    zmq_pollitem_t items [CS_CLIENT_MAX_ENDPOINTS + 1];
    int64_t now = cs_assoc_now_ms ();
    cs_waitq_check_attempts (&self->queue, now);
    cs_waitq_send_queued (&self->queue, now);
    bool want_out = cs_waitq_want_send (&self->queue);
    for (size_t i = 0; i < n; i++) {
        bool out = want_out && cs_assoc_usable (&self->assocs [i], true);
        items [i] = (zmq_pollitem_t) { self->assocs [i].socket, 0,
                                       (short) (ZMQ_POLLIN | (out ? ZMQ_POLLOUT : 0)), 0 };
    }
    items [n] = (zmq_pollitem_t) { NULL, self->leader_fd, ZMQ_POLLIN, 0 };
    long timeout = cs_waitq_next_timeout (&self->queue, now);
    if (timeout < 0 || timeout > left_ms)
        timeout = (long) left_ms;
    self->leader_polling = true;
    pthread_mutex_unlock (&self->mutex);
    if (zmq_poll (items, (int) (n + 1), timeout) < 0) {
        if (errno != EINTR)
            cs_log_error ("link: poll failed: %s", zmq_strerror (errno));
        for (size_t i = 0; i <= n; i++)
            items [i].revents = 0;
    }
    pthread_mutex_lock (&self->mutex);
    self->leader_polling = false;               /* from here on it sees new frames itself */
    pthread_mutex_unlock (&self->mutex);
    if (items [n].revents & ZMQ_POLLIN)
        s_drain_fd (self->leader_fd);
    for (size_t i = 0; i < n; i++)
        if (items [i].revents & ZMQ_POLLIN)
            s_receive_all (self, i);
    pthread_mutex_lock (&self->mutex);
}

/*  Mutex held: `call` takes the token and leads until it is done (its own
 *  reply, a failure, or its deadline `deadline_at` in monotonic ms), then
 *  gives the token back and wakes the next leader.  */
static void
s_lead (cs_link_t *self, cs_link_call_t *call, int64_t deadline_at, int64_t timeout_ms)
{
    self->leader = true;
    while (!call->base.done) {
        int64_t left = deadline_at - cs_assoc_now_ms ();
        if (left <= 0)
            cs_waiter_expire (&call->base, timeout_ms);
        else
            s_lead_turn (self, left);
    }
    self->leader = false;
    cs_link_int_promote (self);
}

/*  Queues the call and blocks until it is done or its deadline passes:
 *  as the leader when nobody holds the token, else as a follower on its
 *  condition variable (woken by its reply, a failure, or to lead next).  A
 *  follower that adds a frame interrupts the leader's poll, unless the
 *  leader is out of it (it sends what is queued before it polls again) or
 *  the frame joins waiters held for company (cs_waitq_joins_hold).  Called with the mutex
 *  held.  */
/*  Mutex held, `call` queued and counted among the callers: blocks until
 *  it is done or `deadline_at` (monotonic ms) passes, as the leader when
 *  nobody holds the token, else on its condition variable.  */
static void
s_wait_done (cs_link_t *self, cs_link_call_t *call, int64_t deadline_at, int64_t timeout_ms)
{
    struct timespec deadline;
    int64_t left = deadline_at - cs_assoc_now_ms ();
    s_deadline (left > 0 ? left : 0, &deadline);
    while (!call->base.done)
        if (!self->leader)
            s_lead (self, call, deadline_at, timeout_ms);
        else
        if (pthread_cond_timedwait (&call->cond, &self->mutex, &deadline) == ETIMEDOUT
        &&  !call->base.done)
            cs_waiter_expire (&call->base, timeout_ms);
}

//  Mutex held: one caller fewer; the last one wakes a stopping C_Finalize.
static void
s_caller_gone (cs_link_t *self)
{
    if (--self->callers == 0 && self->stopping)
        pthread_cond_broadcast (&self->drained);
}

void
cs_link_int_wait (cs_link_t *self, cs_link_call_t *call, int64_t timeout_ms)
{
    int64_t deadline_at = cs_assoc_now_ms () + timeout_ms;
    cs_waitq_add (&self->queue, &call->base, cs_assoc_now_ms ());
    self->callers++;
    cs_link_int_queued (self, call);
    s_wait_done (self, call, deadline_at, timeout_ms);
    cs_waitq_remove (&self->queue, &call->base);
    cs_link_int_promote (self);
    s_caller_gone (self);
}

void
cs_link_int_wait_detached (cs_link_t *self, cs_link_call_t *call)
{
    self->callers++;
    call->detached = false;             /* a thread sleeps on it now: it may be woken to lead */
    s_wait_done (self, call, call->deadline_at, call->timeout_ms);
    call->detached = true;
    cs_link_int_promote (self);
    s_caller_gone (self);
}

void
cs_link_int_queued (cs_link_t *self, cs_link_call_t *call)
{
    if (self->leader_polling && !cs_waitq_joins_hold (&self->queue, &call->base))
        s_signal_fd (self->leader_fd);
}

/*  Token held, mutex held: nothing to send, no timer due and no reply
 *  waiting on any DEALER (ZMQ_EVENTS, no system call when libzmq has
 *  nothing new), so a turn would only cost a poll.  */
static bool
s_idle (cs_link_t *self)
{
    if (cs_waitq_want_send (&self->queue) || cs_waitq_next_timeout (&self->queue, cs_assoc_now_ms ()) == 0)
        return false;
    for (size_t i = 0; i < self->n_assocs; i++) {
        int events = 0;
        size_t len = sizeof events;
        if (!self->assocs [i].socket || zmq_getsockopt (self->assocs [i].socket, ZMQ_EVENTS, &events, &len) != 0
        ||  (events & ZMQ_POLLIN))
            return false;
    }
    return true;
}

void
cs_link_int_drive (cs_link_t *self)
{
    if (self->leader)
        return;
    self->leader = true;
    if (!s_idle (self))
        s_lead_turn (self, 0);
    self->leader = false;
    cs_link_int_promote (self);
}

uint64_t
cs_link_io_wakeups (cs_link_t *self)
{
    return self ? __atomic_load_n (&self->io_wakeups, __ATOMIC_RELAXED) : 0;
}
