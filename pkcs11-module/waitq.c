/*  waitq.c — the link's wait queue and its send, retry and failover policy
 *  (waitq.h).  No sockets, no threads: link.c drives it under its mutex.
 *
 *  Coalescing (the paper's ARRAY RPC, coalesce.h): queued waiters whose
 *  requests may share a frame leave as one request with per-job replies to
 *  a broker that speaks protocol CS_PROTOCOL_PER_JOB; each waiter keeps its
 *  own frame, so a re-send (failover, per-attempt timeout, a request-level
 *  refusal of the batch) goes alone.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/crypto.h>
#include "log.h"
#include "coalesce.h"
#include "waitq.h"

void
cs_waitq_init (cs_waitq_t *self, cs_assoc_t *assocs, size_t n_assocs, int64_t attempt_ms,
               const cs_waitq_io_t *io)
{
    *self = (cs_waitq_t) { .assocs = assocs, .n_assocs = n_assocs, .attempt_ms = attempt_ms,
                           .io = *io };
}

uint64_t
cs_waitq_next_id (cs_waitq_t *self)
{
    return __atomic_add_fetch (&self->next_id, 1, __ATOMIC_SEQ_CST);
}

/*  Completes a waiter and tells its thread.  */
static void
s_finish (cs_waitq_t *self, cs_waiter_t *waiter, CK_RV rv, Cs__Reply *reply)
{
    waiter->done = true;
    waiter->rv = rv;
    waiter->reply = reply;
    self->io.finish (self->io.arg, waiter);
}

/*  Queued: on no broker, not done.  */
static bool
s_queued (const cs_waiter_t *waiter)
{
    return waiter->assoc < 0 && !waiter->done;
}

/*  Queued and free to share a frame with others.  */
static bool
s_coalescible (const cs_waiter_t *waiter)
{
    return s_queued (waiter) && waiter->frame && waiter->batchable && !waiter->alone;
}

bool
cs_waitq_key_management (const Cs__Job *job)
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
 *  management carries idempotency ids, so a second run replays the first
 *  one's result.  Logins (a wrong PIN is counted) and PIN changes are not
 *  re-sent once they left (docs/CONTRACTS.md "Failover").  *keyed_p tells
 *  whether a key-management job is in it.  */
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
                if (!cs_waitq_key_management (req->jobs [i]))
                    return false;
                *keyed_p = true;
        }
    return true;
}

void
cs_waiter_init (cs_waiter_t *waiter, const Cs__Request *req, uint8_t *frame, size_t size)
{
    waiter->request_id = req->request_id;
    waiter->assoc = -1;
    waiter->req = req;
    waiter->deadline_ms = req->deadline_ms;
    waiter->batchable = cs_coalesce_batchable (req);
    waiter->idempotent = s_idempotent (req, &waiter->keyed);
    waiter->frame = frame;
    waiter->frame_size = size;
}

void
cs_waitq_add (cs_waitq_t *self, cs_waiter_t *waiter, int64_t now_ms)
{
    cs_waiter_t **p = &self->waiters;
    waiter->queued_ms = now_ms;
    waiter->next = NULL;
    while (*p)
        p = &(*p)->next;
    *p = waiter;
}

void
cs_waitq_remove (cs_waitq_t *self, cs_waiter_t *waiter)
{
    for (cs_waiter_t **p = &self->waiters; *p; p = &(*p)->next)
        if (*p == waiter) {
            *p = waiter->next;
            return;
        }
}

bool
cs_waitq_want_send (const cs_waitq_t *self)
{
    if (self->hold_until_ms)
        return false;
    for (const cs_waiter_t *waiter = self->waiters; waiter; waiter = waiter->next)
        if (s_queued (waiter))
            return true;
    return false;
}

bool
cs_waitq_joins_hold (const cs_waitq_t *self, const cs_waiter_t *waiter)
{
    size_t queued = 0;
    if (!self->hold_until_ms || !waiter->batchable)
        return false;
    for (const cs_waiter_t *other = self->waiters; other; other = other->next)
        queued += s_queued (other) && other->batchable && !other->alone;
    return queued < CS_COALESCE_MAX_JOBS;
}

void
cs_waitq_fail_all (cs_waitq_t *self, CK_RV rv, bool queued_only)
{
    for (cs_waiter_t *waiter = self->waiters; waiter; waiter = waiter->next)
        if (!waiter->done && (!queued_only || waiter->assoc < 0))
            s_finish (self, waiter, rv, NULL);
}

/*  The association to send to: a usable one not tried yet (bit i of
 *  `tried`) with the fewest jobs in flight (`load`), preferring one that is
 *  not silent.  -1 when there is none.  */
static int
s_pick (const cs_waitq_t *self, const size_t *load, uint32_t tried)
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

/*  Marks `waiter` as sent on association `i` at `now_ms`.  */
static void
s_sent (cs_waiter_t *waiter, int i, int64_t now_ms)
{
    waiter->assoc = i;
    waiter->sent_ms = now_ms;
    waiter->attempt_checked = false;
}

/*  Sends one queued waiter to the best association that takes it.  Returns
 *  false when none could (all would block).  */
static bool
s_send_one (cs_waitq_t *self, cs_waiter_t *waiter, size_t *load, int64_t now_ms)
{
    uint32_t tried = 0;
    int i;
    while ((i = s_pick (self, load, tried)) >= 0) {
        tried |= 1u << i;
        if (self->io.send (self->io.arg, (size_t) i, waiter->frame, waiter->frame_size) == 0) {
            cs_log_debug ("link: request %llu sent to %s", (unsigned long long) waiter->request_id,
                          self->assocs [i].endpoint);
            s_sent (waiter, i, now_ms);
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
                          strerror (errno));
            s_finish (self, waiter, CKR_DEVICE_ERROR, NULL);
            return true;
        }
    }
    return false;
}

/*  Sends `lead` and the queued waiters after it that may join it (at most
 *  CS_COALESCE_MAX_JOBS, within CS_WIRE_MAX_MESSAGE) as one request with
 *  per-job replies on association `i`.  Returns how many left: 0 when the
 *  send failed or fewer than two could go, then nothing was sent.  */
static size_t
s_send_batch (cs_waitq_t *self, cs_waiter_t *lead, int i, size_t *load, int64_t now_ms)
{
    cs_waiter_t *batch [CS_COALESCE_MAX_JOBS];
    const uint8_t *frames [CS_COALESCE_MAX_JOBS];
    size_t sizes [CS_COALESCE_MAX_JOBS], n = 0, total = CS_COALESCE_TRAILER_MAX, size = 0;
    uint32_t deadline_ms = 0;
    for (cs_waiter_t *waiter = lead; waiter && n < CS_COALESCE_MAX_JOBS; waiter = waiter->next)
        if ((waiter == lead || (s_coalescible (waiter) && cs_coalesce_compatible (lead->req, waiter->req)))
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
    uint64_t id = cs_waitq_next_id (self);
    uint8_t *frame = cs_coalesce_frame (frames, sizes, n, id, deadline_ms, &size);
    int rc = frame ? self->io.send (self->io.arg, (size_t) i, frame, size) : -1;
    if (frame) {
        OPENSSL_cleanse (frame, size);
        free (frame);
    }
    if (rc != 0)
        return 0;
    cs_log_debug ("link: requests %llu.. as request %llu of %zu jobs to %s",
                  (unsigned long long) lead->request_id, (unsigned long long) id, n,
                  self->assocs [i].endpoint);
    for (size_t k = 0; k < n; k++) {
        s_sent (batch [k], i, now_ms);
        batch [k]->batch_id = id;
        batch [k]->batch_job = (uint32_t) k + 1;
    }
    load [i] += n;
    return n;
}

/*  True when batchable waiters queued now should wait for company: the
 *  least loaded usable broker speaks per-job replies and has
 *  CS_COALESCE_LOW_JOBS or more jobs of ours (it is busy: a job sent now
 *  would queue there), fewer than CS_COALESCE_MAX_JOBS are queued, and the
 *  oldest has waited less than CS_COALESCE_HOLD_MS.  Sets hold_until_ms.
 *  A lone thread never waits: its broker is idle.  */
static bool
s_hold (cs_waitq_t *self, const size_t *load, int64_t now_ms)
{
    const cs_waiter_t *oldest = NULL;
    size_t queued = 0;
    int i = s_pick (self, load, 0);
    self->hold_until_ms = 0;
    if (i < 0 || load [i] < CS_COALESCE_LOW_JOBS || self->assocs [i].peer_version < CS_PROTOCOL_PER_JOB)
        return false;
    for (const cs_waiter_t *waiter = self->waiters; waiter; waiter = waiter->next)
        if (s_coalescible (waiter)) {
            oldest = oldest ? oldest : waiter;
            queued++;
        }
    if (!oldest || queued >= CS_COALESCE_MAX_JOBS || now_ms >= oldest->queued_ms + CS_COALESCE_HOLD_MS)
        return false;
    self->hold_until_ms = oldest->queued_ms + CS_COALESCE_HOLD_MS;
    return true;
}

void
cs_waitq_send_queued (cs_waitq_t *self, int64_t now_ms)
{
    size_t load [CS_CLIENT_MAX_ENDPOINTS] = { 0 };
    for (cs_waiter_t *waiter = self->waiters; waiter; waiter = waiter->next)
        if (!waiter->done && waiter->assoc >= 0)
            load [waiter->assoc]++;
    bool hold = s_hold (self, load, now_ms);
    for (cs_waiter_t *waiter = self->waiters; waiter; waiter = waiter->next) {
        if (!s_queued (waiter) || !waiter->frame)
            continue;
        if (waiter->batchable && !waiter->alone) {
            if (hold)
                continue;
            int i = s_pick (self, load, 0);
            if (i >= 0 && self->assocs [i].peer_version >= CS_PROTOCOL_PER_JOB
            &&  s_send_batch (self, waiter, i, load, now_ms) > 0)
                continue;
        }
        if (!s_send_one (self, waiter, load, now_ms))
            break;
    }
}

/*  Puts a waiter that left back in the queue: it goes alone, in its own
 *  frame, under its own request id.  */
static void
s_requeue (cs_waiter_t *waiter)
{
    waiter->assoc = -1;
    waiter->alone = true;
    waiter->batch_id = 0;
}

void
cs_waitq_broker_down (cs_waitq_t *self, size_t i, const char *why)
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
            s_finish (self, waiter, CKR_DEVICE_ERROR, NULL);
        }
    }
}

void
cs_waitq_heard (cs_waitq_t *self, size_t i, int64_t now_ms)
{
    self->assocs [i].last_rx_ms = now_ms;
    self->assocs [i].silent = false;
}

/*  Since when the broker of `waiter` owes it an answer: the later of its
 *  send and the broker's last word.  */
static int64_t
s_owed_since (const cs_waitq_t *self, const cs_waiter_t *waiter)
{
    int64_t last_rx = self->assocs [waiter->assoc].last_rx_ms;
    return last_rx > waiter->sent_ms ? last_rx : waiter->sent_ms;
}

/*  True when the per-attempt timeout is watched for `waiter`: with several
 *  endpoints, or for a key-management job not yet sent again.  */
static bool
s_attempt_watched (const cs_waitq_t *self, const cs_waiter_t *waiter)
{
    return !waiter->done && waiter->assoc >= 0 && !waiter->attempt_checked
        && (self->n_assocs > 1 || (waiter->keyed && !waiter->retried_same));
}

void
cs_waitq_check_attempts (cs_waitq_t *self, int64_t now_ms)
{
    size_t load [CS_CLIENT_MAX_ENDPOINTS] = { 0 };
    for (cs_waiter_t *waiter = self->waiters; waiter; waiter = waiter->next) {
        if (!s_attempt_watched (self, waiter) || now_ms < s_owed_since (self, waiter) + self->attempt_ms)
            continue;
        cs_assoc_t *assoc = &self->assocs [waiter->assoc];
        if (!assoc->silent)
            cs_log_warning ("the broker %s sent nothing for %lld ms with a job in flight; %s",
                            assoc->endpoint, (long long) (now_ms - s_owed_since (self, waiter)),
                            self->n_assocs > 1 ? "sending new jobs to other brokers"
                                               : "its key-management job goes once more");
        assoc->silent = true;
        int other = s_pick (self, load, 1u << waiter->assoc);
        if (waiter->idempotent && other >= 0 && !self->assocs [other].silent) {
            cs_log_info ("link: re-sending request %llu to another broker",
                         (unsigned long long) waiter->request_id);
            s_requeue (waiter);
        }
        else
        if (waiter->keyed && !waiter->retried_same && waiter->frame) {
            cs_log_info ("link: re-sending request %llu to the same broker (its reply may be lost)",
                         (unsigned long long) waiter->request_id);
            if (self->io.send (self->io.arg, (size_t) waiter->assoc, waiter->frame, waiter->frame_size) == 0)
                waiter->sent_ms = now_ms;
            waiter->retried_same = true;
            waiter->attempt_checked = true;
        }
        else
            waiter->attempt_checked = true;
    }
}

long
cs_waitq_next_timeout (const cs_waitq_t *self, int64_t now_ms)
{
    int64_t next = -1;
    for (const cs_waiter_t *waiter = self->waiters; waiter; waiter = waiter->next)
        if (s_attempt_watched (self, waiter)) {
            int64_t left = s_owed_since (self, waiter) + self->attempt_ms - now_ms;
            if (next < 0 || left < next)
                next = left > 0 ? left : 0;
        }
    if (self->hold_until_ms) {
        int64_t hold = self->hold_until_ms - now_ms;
        hold = hold > 0 ? hold : 0;
        next = next < 0 || hold < next ? hold : next;
    }
    return (long) next;
}

/*  A reply to a whole coalesced request (job_number 0: a request-level
 *  refusal such as a limit; no job ran) sends each of its waiters again
 *  alone, so that each gets its own answer.  True when the reply was for a
 *  batch.  */
static bool
s_batch_refused (cs_waitq_t *self, const Cs__Reply *reply)
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

bool
cs_waitq_deliver (cs_waitq_t *self, Cs__Reply **reply_p)
{
    Cs__Reply *reply = *reply_p;
    cs_waiter_t *waiter;
    for (waiter = self->waiters; waiter; waiter = waiter->next)
        if (!waiter->done
        &&  (reply->job_number ? waiter->batch_id == reply->request_id && waiter->batch_job == reply->job_number
                               : waiter->request_id == reply->request_id && !waiter->batch_id))
            break;
    if (waiter) {
        s_finish (self, waiter, CKR_OK, reply);
        *reply_p = NULL;
        return false;
    }
    return !reply->job_number && s_batch_refused (self, reply);
}

void
cs_waiter_expire (cs_waiter_t *waiter, int64_t timeout_ms)
{
    /*  A job not on any broker at its deadline found none up to take it
        (ZMQ_IMMEDIATE: a send needs a connection), so every broker is gone
        (docs/DESIGN.md §6).  Otherwise a broker took the job and did not
        answer in time.  */
    bool gone = waiter->assoc < 0;
    cs_log_error ("no reply from the broker within %lld ms (request %llu)%s",
                  (long long) timeout_ms, (unsigned long long) waiter->request_id,
                  gone ? "; no broker connection is up" : "");
    waiter->done = true;
    waiter->rv = gone ? CKR_DEVICE_REMOVED : CKR_DEVICE_ERROR;
}
