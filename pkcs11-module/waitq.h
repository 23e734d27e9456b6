/*  waitq.h — the link's wait queue: the calls waiting for a broker, and the
 *  policy that decides where each goes (send, coalesce, hold for company),
 *  when it goes again (per-attempt timeout, failover when its broker dies)
 *  and how it ends (reply, deadline, failure).  docs/DESIGN.md §7 and
 *  docs/CONTRACTS.md "Failover".
 *
 *  Pure: no sockets, no threads, no clock.  Time comes in as `now_ms`
 *  (monotonic milliseconds), frames leave through the send hook and a
 *  finished waiter is announced through the finish hook; link.c supplies
 *  them (libzmq, a condition variable) and calls every function here under
 *  its own mutex.  The broker health it reads and marks (state, silent,
 *  last_rx_ms, peer_version) is the associations' plain data
 *  (association.h); no function here touches their sockets.
 */
#ifndef CS_MODULE_WAITQ_H_INCLUDED
#define CS_MODULE_WAITQ_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "cs_p11.h"
#include "cs_wire.h"
#include "association.h"

/*  One call waiting for its reply.  It lives on the caller's stack (link.c);
 *  the queue links it, never frees it.  */
typedef struct _cs_waiter_t {
    struct _cs_waiter_t *next;
    uint64_t request_id;
    uint8_t *frame;             /* encoded request while it may still be sent (the
                                   caller's; a non-idempotent one is wiped and freed
                                   here once sent: it may hold a PIN) */
    size_t frame_size;
    bool idempotent;            /* may be re-sent after it left (cs_waitq_idempotent) */
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
    Cs__Reply *reply;           /* set with rv CKR_OK; the caller's from then on */
} cs_waiter_t;

/*  What the queue does to the world.  send: hands `size` bytes of `frame`
 *  (only borrowed) to association `assoc` without blocking; returns 0, or
 *  -1 with errno (EAGAIN: that association cannot take it now).  finish:
 *  tells the waiter's thread that `waiter` is done.  */
typedef struct {
    int (*send) (void *arg, size_t assoc, const uint8_t *frame, size_t size);
    void (*finish) (void *arg, cs_waiter_t *waiter);
    void *arg;
} cs_waitq_io_t;

/*  The queue.  Embedded in the link; its fields are waitq.c's but for
 *  reading in tests.  */
typedef struct {
    cs_waiter_t *waiters;       /* FIFO */
    cs_assoc_t *assocs;         /* the link's associations (health read and marked here) */
    size_t n_assocs;
    int64_t attempt_ms;         /* client/attempt-timeout-ms */
    int64_t hold_until_ms;      /* batchable waiters are held until then; 0: none */
    uint64_t next_id;           /* the last request id handed out (atomic) */
    cs_waitq_io_t io;
} cs_waitq_t;

/*  Sets up an empty queue over `n_assocs` associations `assocs` (borrowed:
 *  they outlive the queue), with a per-attempt timeout of `attempt_ms`
 *  milliseconds and the hooks `io` (copied).  */
void cs_waitq_init (cs_waitq_t *self, cs_assoc_t *assocs, size_t n_assocs, int64_t attempt_ms,
                    const cs_waitq_io_t *io);

/*  A fresh request id (atomic: callable without the link's mutex).  */
uint64_t cs_waitq_next_id (cs_waitq_t *self);

/*  True for the key-management jobs (generate, import, destroy, set
 *  attributes, copy): each carries an idempotency id so that the broker
 *  runs it once however often it arrives (docs/CONTRACTS.md "Failover").  */
bool cs_waitq_key_management (const Cs__Job *job);

/*  Fills `waiter` for `req` (borrowed; its request_id is already set) and
 *  its encoded `frame` of `size` bytes (the caller's; see cs_waiter_t):
 *  queued nowhere yet, idempotent or not, batchable or not.  */
void cs_waiter_init (cs_waiter_t *waiter, const Cs__Request *req, uint8_t *frame, size_t size);

/*  Appends `waiter` (filled by cs_waiter_init) at `now_ms`.  */
void cs_waitq_add (cs_waitq_t *self, cs_waiter_t *waiter, int64_t now_ms);

/*  Unlinks `waiter`, done or not.  */
void cs_waitq_remove (cs_waitq_t *self, cs_waiter_t *waiter);

/*  True when a waiter is queued (on no broker, not done) and none is held
 *  for company: the I/O thread should watch for sockets it may write.  */
bool cs_waitq_want_send (const cs_waitq_t *self);

/*  True when the just-added batchable `waiter` may wait for the held ones
 *  (they leave at the hold's end or with the next reply) instead of waking
 *  the I/O thread: a hold is on and it does not complete a batch.  */
bool cs_waitq_joins_hold (const cs_waitq_t *self, const cs_waiter_t *waiter);

/*  Completes every pending waiter with `rv`; with `queued_only`, only those
 *  not on a broker.  */
void cs_waitq_fail_all (cs_waitq_t *self, CK_RV rv, bool queued_only);

/*  Sends queued frames, each to the usable broker with the fewest jobs in
 *  flight (not silent first), until every one would block.  Waiters that
 *  may share a frame (coalesce.h) go together when that broker speaks
 *  per-job replies; while it is busy they are held for company up to
 *  CS_COALESCE_HOLD_MS; a lone one goes as it is.  A send failing other than
 *  EAGAIN fails its waiter with CKR_DEVICE_ERROR.  */
void cs_waitq_send_queued (cs_waitq_t *self, int64_t now_ms);

/*  Association `i` went down (`why`: its cause, for the log): its
 *  idempotent jobs are queued again for another broker, alone; any other
 *  fails with CKR_DEVICE_ERROR (a login or PIN change may have taken
 *  effect).  */
void cs_waitq_broker_down (cs_waitq_t *self, size_t i, const char *why);

/*  Association `i` sent something at `now_ms`: it is not silent.  */
void cs_waitq_heard (cs_waitq_t *self, size_t i, int64_t now_ms);

/*  The per-attempt timeout: a job whose broker sent nothing for attempt_ms
 *  since the job left marks the broker silent; an idempotent job moves to
 *  another usable broker that is not silent; a key-management job that
 *  cannot move goes once more to the same broker (its idempotency id makes
 *  the second run replay the first); other jobs are not checked again.
 *  With one endpoint only key-management jobs are watched.  */
void cs_waitq_check_attempts (cs_waitq_t *self, int64_t now_ms);

/*  Milliseconds from `now_ms` until the queue wants the I/O thread again
 *  (a per-attempt timeout, or the end of a hold); 0 when overdue, -1 when
 *  never.  */
long cs_waitq_next_timeout (const cs_waitq_t *self, int64_t now_ms);

/*  Hands the decoded *reply_p to its waiter (a per-job reply to the waiter
 *  of that job of a coalesced request) and nulls *reply_p; a request-level
 *  refusal of a coalesced request queues each of its waiters again alone.
 *  Returns true when waiters were queued again (wake the I/O thread); a
 *  reply nobody waits for stays the caller's (it wipes and frees it).  */
bool cs_waitq_deliver (cs_waitq_t *self, Cs__Reply **reply_p);

/*  `waiter` reached its deadline of `timeout_ms` ms undone: it ends with
 *  CKR_DEVICE_REMOVED when it sat on no broker (none was up to take it,
 *  docs/DESIGN.md §6), CKR_DEVICE_ERROR when a broker took it and did not
 *  answer.  Logged.  */
void cs_waiter_expire (cs_waiter_t *waiter, int64_t timeout_ms);

#endif
