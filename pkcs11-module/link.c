/*  link.c — one DEALER association per process, owned by one I/O thread.
 *
 *  Waiters live on the calling thread's stack and sit in a FIFO list guarded
 *  by the link's own mutex; the I/O thread sends their frames, matches
 *  replies by request id and signals the waiter.  A waiter always removes
 *  itself, so the I/O thread never frees one.  See link.h.
 *
 *  Coalescing (the paper's ARRAY RPC, coalesce.h): when the I/O thread
 *  finds several queued waiters whose requests may share a frame, it sends
 *  them as one request with per-job replies to a broker that speaks
 *  protocol CS_PROTOCOL_PER_JOB, and completes each waiter from its own
 *  reply.  Each waiter keeps its own frame: a re-send (failover, per-attempt
 *  timeout, a request-level refusal of the batch) goes alone.
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
#include "association.h"
#include "coalesce.h"
#include "link.h"

typedef struct _cs_waiter_t {
    struct _cs_waiter_t *next;
    uint64_t request_id;
    uint8_t *frame;             /* encoded request while it may still be sent */
    size_t frame_size;
    bool idempotent;            /* may be re-sent after it left (s_idempotent) */
    bool keyed;                 /* ... because its key-management jobs carry idempotency ids */
    bool retried_same;          /* keyed: sent once more to the same broker after the
                                   per-attempt timeout (only one endpoint usable) */
    int assoc;                  /* the association it was sent on; -1 while queued */
    const Cs__Request *req;     /* the caller's request (lives while it waits) */
    uint32_t deadline_ms;       /* Request.deadline_ms of its frame */
    bool batchable;             /* cs_coalesce_batchable (req) */
    bool alone;                 /* never coalesced again: it is being re-sent */
    uint64_t batch_id;          /* request id of the coalesced request it is in; 0: none */
    uint32_t batch_job;         /* its Reply.job_number in that request */
    int64_t sent_ms;            /* monotonic ms of the last send */
    int64_t queued_ms;          /* monotonic ms when it was queued */
    bool attempt_checked;       /* its per-attempt timeout was handled */
    bool done;
    CK_RV rv;                   /* meaningful when done */
    Cs__Reply *reply;           /* set with rv CKR_OK */
    pthread_cond_t cond;
} cs_waiter_t;

struct _cs_link_t {
    void *ctx;
    cs_assoc_t *assocs;         /* one per endpoint; the I/O thread's alone */
    size_t n_assocs;
    int64_t attempt_ms;         /* client/attempt-timeout-ms */
    int wake_fd;                /* eventfd: app threads -> I/O thread */
    pthread_t thread;
    bool thread_started;
    pthread_mutex_t mutex;      /* guards everything below */
    pthread_cond_t drained;
    cs_waiter_t *waiters;
    size_t callers;
    bool stopping;
    bool refused;               /* every broker refused our CURVE handshake */
    uint64_t next_id;           /* atomic */
    int64_t hold_until_ms;      /* batchable waiters are held until then; 0: none */
    bool io_busy;               /* the I/O thread is not in (or entering) its poll: it
                                   looks at the queue before it polls again */
};

static void
s_wake (cs_link_t *self)
{
    uint64_t one = 1;
    if (write (self->wake_fd, &one, sizeof one) < 0 && errno != EAGAIN)
        cs_log_debug ("link: cannot wake the I/O thread: %s", strerror (errno));
}

/*  Completes a waiter (under the mutex) and wakes its thread.  */
static void
s_waiter_finish (cs_waiter_t *waiter, CK_RV rv, Cs__Reply *reply)
{
    waiter->done = true;
    waiter->rv = rv;
    waiter->reply = reply;
    pthread_cond_signal (&waiter->cond);
}

/*  Completes every pending waiter with `rv` (under the mutex); with
 *  `queued_only`, only those not on a broker.  */
static void
s_fail_all (cs_link_t *self, CK_RV rv, bool queued_only)
{
    for (cs_waiter_t *waiter = self->waiters; waiter; waiter = waiter->next)
        if (!waiter->done && (!queued_only || waiter->assoc < 0))
            s_waiter_finish (waiter, rv, NULL);
}

static bool
s_has_queued (cs_link_t *self)
{
    for (cs_waiter_t *waiter = self->waiters; waiter; waiter = waiter->next)
        if (waiter->assoc < 0 && !waiter->done)
            return true;
    return false;
}

/*  Key-management jobs: each carries an idempotency id (Job.idempotency_id)
 *  so that the broker runs it once however often it arrives.  */
static bool
s_key_management (const Cs__Job *job)
{
    switch (job->kind_case) {
        case CS__JOB__KIND_GENERATE_KEY_PAIR: case CS__JOB__KIND_IMPORT_KEY: case CS__JOB__KIND_GENERATE_KEY:
        case CS__JOB__KIND_DESTROY_KEY: case CS__JOB__KIND_SET_KEY_ATTRIBUTES:
        case CS__JOB__KIND_COPY_KEY:
            return true;
        default:
            return false;
    }
}

/*  Sign, decrypt, derive, key lists and hello change nothing on the broker
 *  (docs/DESIGN.md §1: jobs are stateless), so they may run twice; key
 *  management carries idempotency ids (s_key_management), so a second run
 *  replays the first one's result.  Logins (a wrong PIN is counted) and PIN
 *  changes are not re-sent once they left (docs/CONTRACTS.md "Failover").
 *  *keyed_p tells whether a key-management job is in it.  */
static bool
s_idempotent (const Cs__Request *req, bool *keyed_p)
{
    *keyed_p = false;
    for (size_t i = 0; i < req->n_jobs; i++)
        switch (req->jobs [i]->kind_case) {
            case CS__JOB__KIND_HELLO: case CS__JOB__KIND_LIST_KEYS: case CS__JOB__KIND_SIGN:
            case CS__JOB__KIND_DECRYPT: case CS__JOB__KIND_DERIVE: case CS__JOB__KIND_LIST_OBJECTS:
                break;
            default:
                if (!s_key_management (req->jobs [i]))
                    return false;
                *keyed_p = true;
        }
    return true;
}

/*  The association to send to (under the mutex): a usable one not tried
 *  yet (bit i of `tried`) with the fewest jobs in flight (`load`),
 *  preferring one that is not silent.  -1 when there is none.  */
static int
s_pick (cs_link_t *self, const size_t *load, uint32_t tried)
{
    for (int allow_silent = 0; allow_silent < 2; allow_silent++) {
        int best = -1;
        for (size_t i = 0; i < self->n_assocs; i++)
            if (!(tried & (1u << i)) && cs_assoc_usable (&self->assocs [i], allow_silent)
            &&  (best < 0 || load [i] < load [best]))
                best = (int) i;
        if (best >= 0)
            return best;
    }
    return -1;
}

/*  Sends one queued waiter (under the mutex) to the best association that
 *  takes it.  Returns false when none could (all would block).  */
static bool
s_send_one (cs_link_t *self, cs_waiter_t *waiter, size_t *load)
{
    uint32_t tried = 0;
    int i;
    while ((i = s_pick (self, load, tried)) >= 0) {
        tried |= 1u << i;
        if (cs_assoc_send (&self->assocs [i], waiter->frame, waiter->frame_size) == 0) {
            cs_log_debug ("link: request %llu sent to %s", (unsigned long long) waiter->request_id,
                          self->assocs [i].endpoint);
            waiter->assoc = i;
            waiter->sent_ms = cs_assoc_now_ms ();
            waiter->attempt_checked = false;
            load [i]++;
            if (!waiter->idempotent && !waiter->batchable) {   /* never re-sent: no copy kept
                                                                   (may hold a PIN) */
                OPENSSL_cleanse (waiter->frame, waiter->frame_size);
                free (waiter->frame);
                waiter->frame = NULL;
            }
            return true;
        }
        if (errno != EAGAIN) {
            cs_log_error ("link: cannot send request to %s: %s", self->assocs [i].endpoint,
                          zmq_strerror (errno));
            s_waiter_finish (waiter, CKR_DEVICE_ERROR, NULL);
            return true;
        }
    }
    return false;
}

/*  True when `other`, queued, may join a batch led by `lead`.  */
static bool
s_joins (const cs_waiter_t *lead, const cs_waiter_t *other)
{
    return other->assoc < 0 && !other->done && other->frame && other->batchable && !other->alone
        && cs_coalesce_compatible (lead->req, other->req);
}

/*  Sends `lead` and the queued waiters after it that may join it (s_joins;
 *  at most CS_COALESCE_MAX_JOBS, within CS_WIRE_MAX_MESSAGE) as one request
 *  with per-job replies on association `i` (under the mutex).  Returns how
 *  many left: 0 when the send failed (errno) or fewer than two could go,
 *  then nothing was sent.  */
static size_t
s_send_batch (cs_link_t *self, cs_waiter_t *lead, int i, size_t *load)
{
    cs_waiter_t *batch [CS_COALESCE_MAX_JOBS];
    const uint8_t *frames [CS_COALESCE_MAX_JOBS];
    size_t sizes [CS_COALESCE_MAX_JOBS], n = 0, total = CS_COALESCE_TRAILER_MAX, size = 0;
    uint32_t deadline_ms = 0;
    for (cs_waiter_t *waiter = lead; waiter && n < CS_COALESCE_MAX_JOBS; waiter = waiter->next)
        if ((waiter == lead || s_joins (lead, waiter))
        &&  total + waiter->frame_size <= CS_WIRE_MAX_MESSAGE) {
            batch [n] = waiter;
            frames [n] = waiter->frame;
            sizes [n] = waiter->frame_size;
            total += waiter->frame_size;
            if (waiter->deadline_ms > deadline_ms)
                deadline_ms = waiter->deadline_ms;
            n++;
        }
    if (n < 2)
        return 0;
    uint64_t id = __atomic_add_fetch (&self->next_id, 1, __ATOMIC_SEQ_CST);
    uint8_t *frame = cs_coalesce_frame (frames, sizes, n, id, deadline_ms, &size);
    int rc = frame ? cs_assoc_send (&self->assocs [i], frame, size) : -1;
    if (frame) {
        OPENSSL_cleanse (frame, size);
        free (frame);
    }
    if (rc != 0)
        return 0;
    cs_log_debug ("link: requests %llu.. as request %llu of %zu jobs to %s",
                  (unsigned long long) lead->request_id, (unsigned long long) id, n,
                  self->assocs [i].endpoint);
    int64_t now = cs_assoc_now_ms ();
    for (size_t k = 0; k < n; k++) {
        batch [k]->assoc = i;
        batch [k]->sent_ms = now;
        batch [k]->attempt_checked = false;
        batch [k]->batch_id = id;
        batch [k]->batch_job = (uint32_t) k + 1;
    }
    load [i] += n;
    return n;
}

/*  True when batchable waiters queued now should wait for company (under
 *  the mutex): the least loaded usable broker speaks per-job replies and
 *  has CS_COALESCE_LOW_JOBS or more jobs of ours (it is busy: a job sent
 *  now would queue there), fewer than CS_COALESCE_MAX_JOBS are queued, and
 *  the oldest has waited less than CS_COALESCE_HOLD_MS.  Sets
 *  self->hold_until_ms.  A lone thread never waits: its broker is idle.  */
static bool
s_hold (cs_link_t *self, const size_t *load)
{
    const cs_waiter_t *oldest = NULL;
    size_t queued = 0;
    int i = s_pick (self, load, 0);
    self->hold_until_ms = 0;
    if (i < 0 || load [i] < CS_COALESCE_LOW_JOBS || self->assocs [i].peer_version < CS_PROTOCOL_PER_JOB)
        return false;
    for (const cs_waiter_t *waiter = self->waiters; waiter; waiter = waiter->next)
        if (waiter->assoc < 0 && !waiter->done && waiter->frame && waiter->batchable && !waiter->alone) {
            oldest = oldest ? oldest : waiter;
            queued++;
        }
    if (!oldest || queued >= CS_COALESCE_MAX_JOBS || cs_assoc_now_ms () >= oldest->queued_ms + CS_COALESCE_HOLD_MS)
        return false;
    self->hold_until_ms = oldest->queued_ms + CS_COALESCE_HOLD_MS;
    return true;
}

/*  I/O thread: sends queued frames, each to the healthy broker with the
 *  fewest jobs in flight, until every usable socket would block.  Waiters
 *  that may share a frame go together when that broker speaks per-job
 *  replies; while it is busy they wait for company (s_hold); a lone one
 *  goes as it is.  */
static void
s_send_queued (cs_link_t *self)
{
    size_t load [CS_CLIENT_MAX_ENDPOINTS] = { 0 };
    pthread_mutex_lock (&self->mutex);
    for (cs_waiter_t *waiter = self->waiters; waiter; waiter = waiter->next)
        if (!waiter->done && waiter->assoc >= 0)
            load [waiter->assoc]++;
    bool hold = s_hold (self, load);
    for (cs_waiter_t *waiter = self->waiters; waiter; waiter = waiter->next) {
        if (waiter->assoc >= 0 || waiter->done || !waiter->frame)
            continue;
        if (waiter->batchable && !waiter->alone) {
            if (hold)
                continue;
            int i = s_pick (self, load, 0);
            if (i >= 0 && self->assocs [i].peer_version >= CS_PROTOCOL_PER_JOB
            &&  s_send_batch (self, waiter, i, load) > 0)
                continue;
        }
        if (!s_send_one (self, waiter, load))
            break;
    }
    pthread_mutex_unlock (&self->mutex);
}

/*  Puts a waiter that left back in the queue (under the mutex): it goes
 *  alone, in its own frame, under its own request id.  */
static void
s_requeue (cs_waiter_t *waiter)
{
    waiter->assoc = -1;
    waiter->alone = true;
    waiter->batch_id = 0;
}

/*  Takes the jobs in flight on association `i` back (under the mutex): an
 *  idempotent one is queued again for another broker, any other fails with
 *  CKR_DEVICE_ERROR (it may have taken effect).  `why` names the cause.  */
static void
s_take_back (cs_link_t *self, size_t i, const char *why)
{
    for (cs_waiter_t *waiter = self->waiters; waiter; waiter = waiter->next) {
        if (waiter->done || waiter->assoc != (int) i)
            continue;
        if (waiter->idempotent) {
            cs_log_info ("link: %s %s; re-sending request %llu to another broker", self->assocs [i].endpoint,
                         why, (unsigned long long) waiter->request_id);
            s_requeue (waiter);
        }
        else {
            cs_log_error ("the broker %s %s with request %llu in flight; a login or PIN job "
                          "is not re-sent", self->assocs [i].endpoint, why,
                          (unsigned long long) waiter->request_id);
            s_waiter_finish (waiter, CKR_DEVICE_ERROR, NULL);
        }
    }
}

/*  When the per-attempt timeout of a waiter on a broker falls: once the
 *  broker has sent nothing for attempt_ms since the job left.  */
static int64_t
s_attempt_due (cs_link_t *self, const cs_waiter_t *waiter)
{
    int64_t last_rx = self->assocs [waiter->assoc].last_rx_ms;
    return (last_rx > waiter->sent_ms ? last_rx : waiter->sent_ms) + self->attempt_ms;
}

/*  True when the per-attempt timeout is watched for `waiter`: with several
 *  endpoints, or for a key-management job not yet sent again.  */
static bool
s_attempt_watched (cs_link_t *self, const cs_waiter_t *waiter)
{
    return !waiter->done && waiter->assoc >= 0 && !waiter->attempt_checked
        && (self->n_assocs > 1 || (waiter->keyed && !waiter->retried_same));
}

/*  I/O thread: a job in flight on a broker that sent nothing at all for the
 *  per-attempt timeout: the broker is silent (one replying to other jobs
 *  is busy, not silent); its idempotent jobs move to another usable broker
 *  that is not silent, if there is one.  A key-management job (its reply
 *  may have been lost) that cannot move is sent once more to the same
 *  broker; its idempotency id makes the second run replay the first.  A
 *  job that cannot move is not checked again: heartbeats and its deadline
 *  apply.  With one endpoint only key-management jobs are checked.  */
static void
s_check_attempts (cs_link_t *self)
{
    int64_t now = cs_assoc_now_ms ();
    size_t load [CS_CLIENT_MAX_ENDPOINTS] = { 0 };
    int other;
    pthread_mutex_lock (&self->mutex);
    for (cs_waiter_t *waiter = self->waiters; waiter; waiter = waiter->next) {
        if (!s_attempt_watched (self, waiter) || now < s_attempt_due (self, waiter))
            continue;
        cs_assoc_t *assoc = &self->assocs [waiter->assoc];
        if (!assoc->silent)
            cs_log_warning ("the broker %s sent nothing for %lld ms with a job in flight; %s",
                            assoc->endpoint, (long long) (now - (assoc->last_rx_ms > waiter->sent_ms
                                                                 ? assoc->last_rx_ms : waiter->sent_ms)),
                            self->n_assocs > 1 ? "sending new jobs to other brokers"
                                               : "its key-management job goes once more");
        assoc->silent = true;
        other = s_pick (self, load, 1u << waiter->assoc);
        if (waiter->idempotent && other >= 0 && !self->assocs [other].silent) {
            cs_log_info ("link: re-sending request %llu to another broker",
                         (unsigned long long) waiter->request_id);
            s_requeue (waiter);
        }
        else
        if (waiter->keyed && !waiter->retried_same && waiter->frame) {
            cs_log_info ("link: re-sending request %llu to the same broker (its reply may be lost)",
                         (unsigned long long) waiter->request_id);
            if (cs_assoc_send (assoc, waiter->frame, waiter->frame_size) == 0)
                waiter->sent_ms = cs_assoc_now_ms ();
            waiter->retried_same = true;
            waiter->attempt_checked = true;
        }
        else
            waiter->attempt_checked = true;
    }
    pthread_mutex_unlock (&self->mutex);
}

/*  Milliseconds until the next per-attempt timeout (-1: none).  */
static long
s_next_attempt (cs_link_t *self)
{
    int64_t next = -1, now = cs_assoc_now_ms ();
    pthread_mutex_lock (&self->mutex);
    for (cs_waiter_t *waiter = self->waiters; waiter; waiter = waiter->next)
        if (s_attempt_watched (self, waiter)) {
            int64_t left = s_attempt_due (self, waiter) - now;
            if (next < 0 || left < next)
                next = left > 0 ? left : 0;
        }
    pthread_mutex_unlock (&self->mutex);
    return (long) next;
}

/*  A reply to a whole coalesced request (job_number 0: a request-level
 *  refusal such as a limit; no job ran) sends each of its waiters again
 *  alone, so that each gets its own answer (under the mutex).  True when
 *  the reply was for a batch.  */
static bool
s_batch_refused (cs_link_t *self, const Cs__Reply *reply)
{
    bool found = false;
    for (cs_waiter_t *waiter = self->waiters; waiter; waiter = waiter->next)
        if (!waiter->done && waiter->batch_id == reply->request_id) {
            cs_log_debug ("link: request %llu refused as a whole (%s); request %llu goes alone",
                          (unsigned long long) reply->request_id, cs_rv_name (reply->rv),
                          (unsigned long long) waiter->request_id);
            s_requeue (waiter);
            found = true;
        }
    return found;
}

/*  I/O thread: hands one decoded reply to its waiter (a per-job reply to
 *  the waiter of that job of a coalesced request), or drops it.  */
static void
s_deliver (cs_link_t *self, Cs__Reply *reply)
{
    cs_waiter_t *waiter;
    pthread_mutex_lock (&self->mutex);
    for (waiter = self->waiters; waiter; waiter = waiter->next)
        if (!waiter->done
        &&  (reply->job_number ? waiter->batch_id == reply->request_id && waiter->batch_job == reply->job_number
                               : waiter->request_id == reply->request_id && !waiter->batch_id))
            break;
    if (waiter) {
        s_waiter_finish (waiter, CKR_OK, reply);
        reply = NULL;
    }
    else
    if (!reply->job_number && s_batch_refused (self, reply))
        s_wake (self);                          /* send them on the next turn */
    pthread_mutex_unlock (&self->mutex);
    if (reply) {
        cs_log_debug ("link: dropping late or unknown reply %llu",
                      (unsigned long long) reply->request_id);
        cs_wire_reply_free (&reply);        /* a late plaintext or private key */
    }
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

/*  I/O thread: reads every reply waiting on association `assoc`.  A reply
 *  to a job re-sent elsewhere is taken from whichever broker answers first.  */
static void
s_receive_all (cs_link_t *self, cs_assoc_t *assoc)
{
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
        assoc->last_rx_ms = cs_assoc_now_ms ();
        assoc->silent = false;
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
        else {
            if (reply->rv == CKR_OK)                    /* errors say the lowest version */
                assoc->peer_version = reply->version;   /* the I/O thread's alone */
            s_deliver (self, reply);
        }
    }
}

/*  I/O thread: one monitor event of association `i`.  A broker gone or
 *  refusing gives its jobs back; when every broker refuses us, queued
 *  calls fail at once (CKR_DEVICE_ERROR) rather than at their deadline.  */
static void
s_monitor_event (cs_link_t *self, size_t i)
{
    bool refused = true;
    pthread_mutex_lock (&self->mutex);
    if (cs_assoc_event (&self->assocs [i]) == CS_ASSOC_WENT_DOWN)
        s_take_back (self, i, self->assocs [i].state == CS_ASSOC_REFUSED
                              ? "refused the handshake" : "dropped the connection");
    for (size_t j = 0; j < self->n_assocs; j++)
        refused &= self->assocs [j].state == CS_ASSOC_REFUSED;
    self->refused = refused;
    if (refused)
        s_fail_all (self, CKR_DEVICE_ERROR, true);
    pthread_mutex_unlock (&self->mutex);
}

static void *
s_io_thread (void *arg)
{
    cs_link_t *self = arg;
    size_t n = self->n_assocs;
    zmq_pollitem_t items [2 * CS_CLIENT_MAX_ENDPOINTS + 1];
    while (true) {
        bool stopping, want_out;
        uint64_t count;
        pthread_mutex_lock (&self->mutex);
        self->io_busy = false;                  /* from here on, new waiters wake us */
        stopping = self->stopping;
        want_out = s_has_queued (self) && !self->hold_until_ms;
        for (size_t i = 0; i < n; i++) {
            bool out = want_out && cs_assoc_usable (&self->assocs [i], true);
            items [2 * i] = (zmq_pollitem_t) { self->assocs [i].socket, 0,
                                               (short) (ZMQ_POLLIN | (out ? ZMQ_POLLOUT : 0)), 0 };
            items [2 * i + 1] = (zmq_pollitem_t) { self->assocs [i].monitor, 0, ZMQ_POLLIN, 0 };
        }
        pthread_mutex_unlock (&self->mutex);
        if (stopping)
            break;
        items [2 * n] = (zmq_pollitem_t) { NULL, self->wake_fd, ZMQ_POLLIN, 0 };
        long timeout = s_next_attempt (self);
        if (self->hold_until_ms) {
            long hold = (long) (self->hold_until_ms - cs_assoc_now_ms ());
            hold = hold > 0 ? hold : 0;
            timeout = timeout < 0 || hold < timeout ? hold : timeout;
        }
        if (zmq_poll (items, (int) (2 * n + 1), timeout) < 0) {
            if (errno == EINTR)
                continue;
            cs_log_error ("link: poll failed: %s", zmq_strerror (errno));
            break;
        }
        pthread_mutex_lock (&self->mutex);
        self->io_busy = true;                   /* s_send_queued sees what comes now */
        pthread_mutex_unlock (&self->mutex);
        if (items [2 * n].revents & ZMQ_POLLIN)
            (void) !read (self->wake_fd, &count, sizeof count);
        for (size_t i = 0; i < n; i++)          /* replies before a disconnect first */
            if (items [2 * i].revents & ZMQ_POLLIN)
                s_receive_all (self, &self->assocs [i]);
        for (size_t i = 0; i < n; i++)
            if (items [2 * i + 1].revents & ZMQ_POLLIN)
                s_monitor_event (self, i);
        s_check_attempts (self);
        s_send_queued (self);
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
    self->attempt_ms = config->attempt_timeout_ms > 0 ? config->attempt_timeout_ms
                                                      : (config->timeout_ms + 3) / 4;
    for (size_t i = 0; i < config->n_endpoints; i++)
        if (cs_assoc_open (&self->assocs [i], self->ctx, config, i) != 0)
            return CKR_GENERAL_ERROR;
    if ((self->wake_fd = eventfd (0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0)
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
    s_fail_all (self, CKR_CRYPTOKI_NOT_INITIALIZED, false);
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
        s_wake (self);
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

static void
s_unlink_waiter (cs_link_t *self, cs_waiter_t *waiter)
{
    for (cs_waiter_t **p = &self->waiters; *p; p = &(*p)->next)
        if (*p == waiter) {
            *p = waiter->next;
            return;
        }
}

static void
s_append_waiter (cs_link_t *self, cs_waiter_t *waiter)
{
    cs_waiter_t **p = &self->waiters;
    while (*p)
        p = &(*p)->next;
    *p = waiter;
}

/*  True when a new waiter need not wake the I/O thread (under the mutex):
 *  it is busy and looks at the queue before it polls again, or the waiter
 *  is batchable and joins others held for company (s_hold) that leave at
 *  the hold's end or with the next reply, unless it completes a batch.  */
static bool
s_wake_needless (cs_link_t *self, const cs_waiter_t *waiter)
{
    if (self->io_busy)
        return true;
    if (!self->hold_until_ms || !waiter->batchable)
        return false;
    size_t queued = 0;
    for (const cs_waiter_t *other = self->waiters; other; other = other->next)
        queued += other->assoc < 0 && !other->done && other->batchable && !other->alone;
    return queued < CS_COALESCE_MAX_JOBS;
}

/*  Queues the waiter and blocks until it is done or its deadline passes.
 *  Called with the mutex held.  */
static void
s_wait (cs_link_t *self, cs_waiter_t *waiter, int64_t timeout_ms)
{
    struct timespec deadline;
    s_deadline (timeout_ms, &deadline);
    waiter->queued_ms = cs_assoc_now_ms ();
    s_append_waiter (self, waiter);
    self->callers++;
    if (!s_wake_needless (self, waiter))
        s_wake (self);
    while (!waiter->done)
        if (pthread_cond_timedwait (&waiter->cond, &self->mutex, &deadline) == ETIMEDOUT
        &&  !waiter->done) {
            /*  A job not on any broker at its deadline found none up to
                take it (ZMQ_IMMEDIATE: a send needs a connection), so every
                broker is gone (docs/DESIGN.md §6).  Otherwise a broker took the
                job and did not answer in time.  */
            bool gone = waiter->assoc < 0;
            cs_log_error ("no reply from the broker within %lld ms (request %llu)%s",
                          (long long) timeout_ms, (unsigned long long) waiter->request_id,
                          gone ? "; no broker connection is up" : "");
            waiter->done = true;
            waiter->rv = gone ? CKR_DEVICE_REMOVED : CKR_DEVICE_ERROR;
        }
    s_unlink_waiter (self, waiter);
    if (--self->callers == 0 && self->stopping)
        pthread_cond_broadcast (&self->drained);
}

CK_RV
cs_link_reply_rv (const Cs__Request *req, const Cs__Reply *reply)
{
    if (reply->rv != CKR_OK) {
        if (reply->version < CS_PROTOCOL_VERSION_MIN || reply->version > CS_PROTOCOL_VERSION) {
            cs_log_error ("protocol version mismatch: this module speaks %u..%u, the broker speaks %u (%s)",
                          CS_PROTOCOL_VERSION_MIN, CS_PROTOCOL_VERSION, reply->version,
                          reply->error ? reply->error : "");
            return CKR_DEVICE_ERROR;
        }
        cs_log_error ("the broker failed the request: %s%s%s", cs_rv_name (reply->rv),
                      reply->error && *reply->error ? ": " : "", reply->error ? reply->error : "");
        switch (reply->rv) {                /* the broker's limits (docs/CONTRACTS.md "Limits") */
            case CKR_DEVICE_MEMORY: case CKR_KEY_SIZE_RANGE: case CKR_DATA_LEN_RANGE:
            case CKR_ENCRYPTED_DATA_LEN_RANGE: case CKR_TEMPLATE_INCONSISTENT:
            case CKR_ATTRIBUTE_VALUE_INVALID: case CKR_PIN_LEN_RANGE: case CKR_MECHANISM_PARAM_INVALID:
            case CKR_DOMAIN_PARAMS_INVALID: case CKR_KEY_HANDLE_INVALID: case CKR_OBJECT_HANDLE_INVALID:
                return (CK_RV) reply->rv;
            default:
                return CKR_DEVICE_ERROR;
        }
    }
    if (reply->n_results != req->n_jobs) {
        cs_log_error ("the broker sent %zu results for %zu jobs", reply->n_results, req->n_jobs);
        return CKR_DEVICE_ERROR;
    }
    return CKR_OK;
}

/*  Encodes req into a malloc'd frame.  Each key-management job without an
 *  idempotency id gets a fresh one (CS_LINK_IDEM_ID_LEN random bytes) in
 *  the frame only: every attempt of this call re-sends that frame, so the
 *  id is the same on each; req itself is left as it was.  Returns CKR_OK,
 *  CKR_HOST_MEMORY, or CKR_GENERAL_ERROR when no random bytes come.  */
static CK_RV
s_encode (Cs__Request *req, uint8_t **frame_p, size_t *size_p)
{
    size_t keyed = 0;
    for (size_t i = 0; i < req->n_jobs; i++)
        keyed += s_key_management (req->jobs [i]) && !req->jobs [i]->idempotency_id.len;
    uint8_t *ids = keyed ? malloc (keyed * CS_LINK_IDEM_ID_LEN) : NULL;
    CK_RV rv = keyed && !ids ? CKR_HOST_MEMORY
             : keyed && RAND_bytes (ids, (int) (keyed * CS_LINK_IDEM_ID_LEN)) != 1 ? CKR_GENERAL_ERROR
             : CKR_OK;
    for (size_t i = 0, k = 0; rv == CKR_OK && i < req->n_jobs; i++)
        if (s_key_management (req->jobs [i]) && !req->jobs [i]->idempotency_id.len)
            req->jobs [i]->idempotency_id = (ProtobufCBinaryData) { CS_LINK_IDEM_ID_LEN,
                                                                    ids + CS_LINK_IDEM_ID_LEN * k++ };
    *frame_p = rv == CKR_OK ? cs_wire_encode (&req->base, size_p) : NULL;
    for (size_t i = 0; ids && i < req->n_jobs; i++)
        if (req->jobs [i]->idempotency_id.data >= ids
        &&  req->jobs [i]->idempotency_id.data < ids + keyed * CS_LINK_IDEM_ID_LEN)
            req->jobs [i]->idempotency_id = (ProtobufCBinaryData) { 0, NULL };
    free (ids);
    return rv != CKR_OK ? rv : *frame_p ? CKR_OK : CKR_HOST_MEMORY;
}

CK_RV
cs_link_call (cs_link_t *self, Cs__Request *req, int64_t timeout_ms, Cs__Reply **reply_p)
{
    CK_RV rv = CKR_OK;
    cs_waiter_t waiter = { 0 };
    pthread_condattr_t attr;
    return_val_if_fail (self && req && reply_p && timeout_ms > 0, CKR_ARGUMENTS_BAD);
    *reply_p = NULL;
    req->version_min = CS_PROTOCOL_VERSION_MIN;
    req->version_max = CS_PROTOCOL_VERSION;
    req->deadline_ms = (uint32_t) timeout_ms;
    req->request_id = waiter.request_id = __atomic_add_fetch (&self->next_id, 1, __ATOMIC_SEQ_CST);
    waiter.assoc = -1;
    waiter.req = req;
    waiter.deadline_ms = req->deadline_ms;
    waiter.batchable = cs_coalesce_batchable (req);
    waiter.idempotent = s_idempotent (req, &waiter.keyed);
    if (s_encode (req, &waiter.frame, &waiter.frame_size) != CKR_OK)
        return CKR_HOST_MEMORY;
    pthread_condattr_init (&attr);
    pthread_condattr_setclock (&attr, CLOCK_MONOTONIC);
    pthread_cond_init (&waiter.cond, &attr);
    pthread_condattr_destroy (&attr);
    pthread_mutex_lock (&self->mutex);
    if (self->stopping)
        rv = CKR_CRYPTOKI_NOT_INITIALIZED;
    else
    if (self->refused) {
        cs_log_debug ("link: failing fast: every broker refused this client's key");
        rv = CKR_DEVICE_ERROR;
    }
    else {
        s_wait (self, &waiter, timeout_ms);
        rv = waiter.rv;
    }
    pthread_mutex_unlock (&self->mutex);
    pthread_cond_destroy (&waiter.cond);
    if (waiter.frame)
        OPENSSL_cleanse (waiter.frame, waiter.frame_size);
    free (waiter.frame);
    if (rv == CKR_OK && (rv = cs_link_reply_rv (req, waiter.reply)) != CKR_OK)
        goto out;
    *reply_p = waiter.reply;
    waiter.reply = NULL;
out:
    cs_wire_reply_free (&waiter.reply);
    return rv;
}
