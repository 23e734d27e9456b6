/*  link.h — the module's associations with the broker(s).
 *
 *  One ZeroMQ context per process and one association per configured
 *  endpoint (association.h: a DEALER, CURVE client, with heartbeats, a
 *  monitor and its own health).  cs_link_call queues an encoded request and
 *  waits for the reply with the same request id, or for its deadline, as
 *  leader/follower: the one waiting thread that holds the token polls the
 *  DEALERs itself, sends, and hands each reply to its waiter; the others
 *  sleep on their own condition variable (CLOCK_MONOTONIC) until their
 *  reply is handed over or they are woken to lead next.  An I/O thread
 *  watches the monitors only (brokers up, down, refusing).  The queue of
 *  waiting calls and the send, retry and failover policy below are
 *  waitq.h's; this unit drives it and the life cycle.  docs/DESIGN.md §1,
 *  §3, §5, §7.
 *
 *  Failover (docs/CONTRACTS.md "Failover"): each job goes to a healthy
 *  broker with the fewest jobs in flight.  When a broker's connection drops
 *  (kill, crash, heartbeat timeout) or it stays silent for the per-attempt
 *  timeout (client/attempt-timeout-ms) with a job in flight, its idempotent
 *  jobs (sign, decrypt, derive, list keys, hello) are sent again to another
 *  healthy broker, and so are key-management jobs (generate, import,
 *  destroy, set attributes, copy): each carries an idempotency id, the
 *  same on every attempt, and the broker runs a job once per id (the
 *  keystore records the result).  A key-management job whose broker stays
 *  silent with no other broker to take it is sent once more to the same
 *  broker (its reply may have been lost).  Logins and PIN changes fail
 *  with CKR_DEVICE_ERROR once they left, since they may have taken effect.
 *
 *  The raw libzmq API is used, never zsock/zactor: CZMQ's global zsys state
 *  must not be started inside a library that nginx or a JVM loads.
 */
#ifndef CS_MODULE_LINK_H_INCLUDED
#define CS_MODULE_LINK_H_INCLUDED

#include <stdint.h>
#include "cs_p11.h"
#include "cs_wire.h"
#include "client_config.h"

typedef struct _cs_link_t cs_link_t;
typedef struct _cs_link_call_t cs_link_call_t;      /* a call that does not wait (cs_link_submit) */

#define CS_LINK_IDEM_ID_LEN 16          /* bytes of a key-management job's idempotency id */

/*  Creates one association per endpoint of `config` (the connections come
 *  up in the background) and starts the I/O thread.  Returns the link, or
 *  NULL with *rv_p set: CKR_HOST_MEMORY, CKR_GENERAL_ERROR (bad endpoint,
 *  socket or thread failure; logged).  `config` is only read.  */
cs_link_t *cs_link_new (const cs_client_config_t *config, CK_RV *rv_p);

/*  Wakes every call waiting on the link with CKR_CRYPTOKI_NOT_INITIALIZED
 *  and makes later calls fail at once with it; the I/O thread keeps running
 *  until cs_link_destroy.  Used by C_Finalize before it waits for the calls
 *  in flight to leave.  NULL-safe.  */
void cs_link_stop (cs_link_t *self);

/*  Stops the I/O thread, fails every waiting call with
 *  CKR_CRYPTOKI_NOT_INITIALIZED, waits until the callers have left, closes
 *  the socket and terminates the context.  NULL-safe, nulls *self_p.  */
void cs_link_destroy (cs_link_t **self_p);

/*  Forgets a link inherited over fork() without touching it: the parent's
 *  context, sockets and thread belong to the parent (a leak, on purpose).  */
void cs_link_abandon (cs_link_t **self_p);

/*  Sends `req` (its request_id, version range and deadline_ms are filled in
 *  here; the caller keeps ownership of req) and waits at most `timeout_ms`
 *  milliseconds for its reply, re-sending it to another broker when its
 *  broker drops or goes silent and the request is idempotent (above).  On
 *  CKR_OK *reply_p is the decoded reply, whose request-level rv is CKR_OK
 *  and which has one result per job (caller frees with
 *  cs__reply__free_unpacked).  Errors: CKR_DEVICE_REMOVED at the deadline
 *  when no broker was up to take the request; CKR_DEVICE_ERROR at the
 *  deadline when a broker took it and did not answer, at once when a
 *  non-idempotent request's broker dropped, and at once while every broker
 *  refuses our CURVE key; protocol version mismatch; a request-level failure as
 *  cs_link_reply_rv maps it (all logged); CKR_HOST_MEMORY;
 *  CKR_CRYPTOKI_NOT_INITIALIZED while the link is being destroyed.  A reply
 *  arriving after the deadline is dropped, its secrets wiped; the received
 *  frame is wiped once decoded.  */
CK_RV cs_link_call (cs_link_t *self, Cs__Request *req, int64_t timeout_ms, Cs__Reply **reply_p);

/*  Queues `req` like cs_link_call (its header filled in here; the caller
 *  keeps req, which need not outlive this call: only its encoded frame
 *  does) and returns without waiting for the reply: the frame leaves now
 *  when no thread is driving the link, else with the driver's next turn.
 *  Any number may be outstanding from one thread; the wire is multiplexed
 *  by request id (PKCS#11 3.2 asynchronous sessions, issue #23).  On CKR_OK
 *  *call_p is the call (the caller's: cs_link_complete or
 *  cs_link_call_free end it).  Errors: CKR_CRYPTOKI_NOT_INITIALIZED while
 *  the link stops, CKR_DEVICE_ERROR while every broker refuses our key,
 *  CKR_HOST_MEMORY, CKR_ARGUMENTS_BAD.  */
CK_RV cs_link_submit (cs_link_t *self, Cs__Request *req, int64_t timeout_ms, cs_link_call_t **call_p);

/*  Drives the link once without blocking (sends what is queued, takes the
 *  replies that came, when no other thread does) and tells how *call_p
 *  stands: CKR_PENDING while it waits (the call stays the caller's), else
 *  it is ended and *call_p nulled: CKR_OK with *reply_p as cs_link_call
 *  gives it (caller frees with cs__reply__free_unpacked), or one of
 *  cs_link_call's errors, the deadline included (counted from
 *  cs_link_submit).  */
CK_RV cs_link_complete (cs_link_call_t **call_p, Cs__Reply **reply_p);

/*  cs_link_complete that blocks: waits (leading the link when nobody
 *  does, as cs_link_call) until *call_p is done or its deadline, counted
 *  from cs_link_submit, passes; then ends it as cs_link_complete does:
 *  CKR_OK with *reply_p (caller frees with cs__reply__free_unpacked) or
 *  one of cs_link_call's errors; *call_p nulled.  Only the call's owner
 *  may wait on it, and only from one thread.  CKR_ARGUMENTS_BAD for no
 *  call.  Issue #25: a key list's next page, asked for ahead.  */
CK_RV cs_link_wait (cs_link_call_t **call_p, Cs__Reply **reply_p);

/*  Abandons a call from cs_link_submit: out of the queue, its frame and any
 *  reply wiped; a reply arriving later is dropped as late.  The link must
 *  still exist (C_Finalize frees the calls before cs_link_destroy); on a
 *  link abandoned over fork() only our memory is freed.  NULL-safe, nulls
 *  *call_p.  */
void cs_link_call_free (cs_link_call_t **call_p);

/*  The CK_RV of a reply to req at request level: CKR_OK when reply->rv is
 *  CKR_OK and there is one result per job; a broken broker limit (reply->rv
 *  CKR_DEVICE_MEMORY, CKR_KEY_SIZE_RANGE, CKR_DATA_LEN_RANGE,
 *  CKR_ENCRYPTED_DATA_LEN_RANGE, CKR_TEMPLATE_INCONSISTENT,
 *  CKR_ATTRIBUTE_VALUE_INVALID, CKR_PIN_LEN_RANGE,
 *  CKR_MECHANISM_PARAM_INVALID, CKR_DOMAIN_PARAMS_INVALID,
 *  CKR_KEY_HANDLE_INVALID, CKR_OBJECT_HANDLE_INVALID: docs/CONTRACTS.md
 *  "Limits") as is; anything else, a version mismatch or a wrong result
 *  count, CKR_DEVICE_ERROR.  Logs every failure.  */
CK_RV cs_link_reply_rv (const Cs__Request *req, const Cs__Reply *reply);

/*  How often the I/O thread has woken since cs_link_new (monitor events,
 *  destroy).  For tests: a call made while no other is waiting must not
 *  add to it (docs/DESIGN.md §5, leader/follower).  0 for NULL.  */
uint64_t cs_link_io_wakeups (cs_link_t *self);

#endif
