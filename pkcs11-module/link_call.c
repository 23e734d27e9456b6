/*  link_call.c — one call over the link (link.h): its frame, a call that
 *  blocks (cs_link_call), and calls that do not wait (cs_link_submit,
 *  cs_link_complete, cs_link_wait, cs_link_call_free: PKCS#11 3.2
 *  asynchronous sessions, issue #23; a key list's next page, issue #25).
 *
 *  A detached call sits in the same wait queue as blocking ones, so the
 *  wire stays multiplexed by request id: one thread may keep any number
 *  outstanding.  No thread sleeps on it: the frame leaves at once when
 *  nobody holds the token (the submitting thread makes one turn of the
 *  queue that does not block), or with the leader's next turn; its reply
 *  is handed over by whoever drives the link next (a leader, or
 *  cs_link_complete's own turn).  A detached call is never woken to lead,
 *  never counted among the callers C_Finalize waits for; it may share a
 *  frame with others like a blocking call (coalesce.h), which needs only
 *  its request's shape: the job count and a copy of the ticket, wiped with
 *  its frame when it ends.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>
#include "cs_p11_3.h"
#include "log.h"
#include "link_int.h"

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
        keyed += cs_waitq_key_management (req->jobs [i]) && !req->jobs [i]->idempotency_id.len;
    uint8_t *ids = keyed ? malloc (keyed * CS_LINK_IDEM_ID_LEN) : NULL;
    CK_RV rv = keyed && !ids ? CKR_HOST_MEMORY
             : keyed && RAND_bytes (ids, (int) (keyed * CS_LINK_IDEM_ID_LEN)) != 1 ? CKR_GENERAL_ERROR
             : CKR_OK;
    for (size_t i = 0, k = 0; rv == CKR_OK && i < req->n_jobs; i++)
        if (cs_waitq_key_management (req->jobs [i]) && !req->jobs [i]->idempotency_id.len)
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

/*  Fills req's header and encodes it into *frame_p (malloc'd).  */
static CK_RV
s_prepare (cs_link_t *self, Cs__Request *req, int64_t timeout_ms, uint8_t **frame_p, size_t *size_p)
{
    req->version_min = CS_PROTOCOL_VERSION_MIN;
    req->version_max = CS_PROTOCOL_VERSION;
    req->deadline_ms = (uint32_t) timeout_ms;
    req->request_id = cs_waitq_next_id (&self->queue);
    return s_encode (req, frame_p, size_p) == CKR_OK ? CKR_OK : CKR_HOST_MEMORY;
}

static void
s_cond_init (pthread_cond_t *cond)
{
    pthread_condattr_t attr;
    pthread_condattr_init (&attr);
    pthread_condattr_setclock (&attr, CLOCK_MONOTONIC);
    pthread_cond_init (cond, &attr);
    pthread_condattr_destroy (&attr);
}

/*  Link mutex held: why a new call cannot be queued, or CKR_OK.  */
static CK_RV
s_refusal (const cs_link_t *self)
{
    if (self->stopping)
        return CKR_CRYPTOKI_NOT_INITIALIZED;
    if (self->refused) {
        cs_log_debug ("link: failing fast: every broker refused this client's key");
        return CKR_DEVICE_ERROR;
    }
    return CKR_OK;
}

/*  The call's frame and ticket copy, wiped, and its condition.  */
static void
s_call_clear (cs_link_call_t *call)
{
    OPENSSL_cleanse (call->ticket, sizeof call->ticket);
    pthread_cond_destroy (&call->cond);
    if (call->base.frame)
        OPENSSL_cleanse (call->base.frame, call->base.frame_size);
    free (call->base.frame);
    call->base.frame = NULL;
}

/*  A done call's outcome: its rv, or the reply's request-level rv; on
 *  CKR_OK *reply_p takes the reply.  */
static CK_RV
s_outcome (cs_link_call_t *call, const Cs__Request *req, Cs__Reply **reply_p)
{
    CK_RV rv = call->base.rv;
    if (rv == CKR_OK && (rv = cs_link_reply_rv (req, call->base.reply)) == CKR_OK) {
        *reply_p = call->base.reply;
        call->base.reply = NULL;
    }
    cs_wire_reply_free (&call->base.reply);
    return rv;
}

CK_RV
cs_link_call (cs_link_t *self, Cs__Request *req, int64_t timeout_ms, Cs__Reply **reply_p)
{
    CK_RV rv;
    cs_link_call_t call = { 0 };
    uint8_t *frame = NULL;
    size_t size = 0;
    return_val_if_fail (self && req && reply_p && timeout_ms > 0, CKR_ARGUMENTS_BAD);
    *reply_p = NULL;
    if ((rv = s_prepare (self, req, timeout_ms, &frame, &size)) != CKR_OK)
        return rv;
    cs_waiter_init (&call.base, req, frame, size);
    s_cond_init (&call.cond);
    pthread_mutex_lock (&self->mutex);
    if ((rv = s_refusal (self)) == CKR_OK)
        cs_link_int_wait (self, &call, timeout_ms);
    else
        call.base = (cs_waiter_t) { .frame = frame, .frame_size = size, .done = true, .rv = rv };
    pthread_mutex_unlock (&self->mutex);
    s_call_clear (&call);
    return s_outcome (&call, req, reply_p);
}

CK_RV
cs_link_submit (cs_link_t *self, Cs__Request *req, int64_t timeout_ms, cs_link_call_t **call_p)
{
    CK_RV rv;
    cs_link_call_t *call;
    uint8_t *frame = NULL;
    size_t size = 0;
    return_val_if_fail (self && req && call_p && timeout_ms > 0, CKR_ARGUMENTS_BAD);
    *call_p = NULL;
    if (!(call = calloc (1, sizeof *call)))
        return CKR_HOST_MEMORY;
    if ((rv = s_prepare (self, req, timeout_ms, &frame, &size)) != CKR_OK) {
        free (call);
        return rv;
    }
    cs_waiter_init (&call->base, req, frame, size);
    call->shape = (Cs__Request) CS__REQUEST__INIT;
    call->shape.n_jobs = req->n_jobs;       /* req does not live on: its shape does */
    if (req->ticket.len <= sizeof call->ticket && req->ticket.len) {
        memcpy (call->ticket, req->ticket.data, req->ticket.len);
        call->shape.ticket = (ProtobufCBinaryData) { req->ticket.len, call->ticket };
    }
    else
        call->base.batchable &= !req->ticket.len;
    call->base.req = &call->shape;
    call->detached = true;
    call->link = self;
    call->timeout_ms = timeout_ms;
    call->deadline_at = cs_assoc_now_ms () + timeout_ms;
    s_cond_init (&call->cond);
    pthread_mutex_lock (&self->mutex);
    if ((rv = s_refusal (self)) == CKR_OK) {
        cs_waitq_add (&self->queue, &call->base, cs_assoc_now_ms ());
        cs_link_int_queued (self, call);
        cs_link_int_drive (self);           /* off at once when nobody leads */
    }
    pthread_mutex_unlock (&self->mutex);
    if (rv != CKR_OK) {
        s_call_clear (call);
        free (call);
        return rv;
    }
    *call_p = call;
    return CKR_OK;
}

CK_RV
cs_link_complete (cs_link_call_t **call_p, Cs__Reply **reply_p)
{
    cs_link_call_t *call = call_p ? *call_p : NULL;
    cs_link_t *self;
    CK_RV rv;
    return_val_if_fail (call && call->detached && reply_p, CKR_ARGUMENTS_BAD);
    *reply_p = NULL;
    self = call->link;
    pthread_mutex_lock (&self->mutex);
    if (!call->base.done)
        cs_link_int_drive (self);
    if (!call->base.done && cs_assoc_now_ms () >= call->deadline_at)
        cs_waiter_expire (&call->base, call->timeout_ms);
    if (!call->base.done) {
        pthread_mutex_unlock (&self->mutex);
        return CKR_PENDING;
    }
    cs_waitq_remove (&self->queue, &call->base);
    pthread_mutex_unlock (&self->mutex);
    s_call_clear (call);
    rv = s_outcome (call, &call->shape, reply_p);
    free (call);
    *call_p = NULL;
    return rv;
}

CK_RV
cs_link_wait (cs_link_call_t **call_p, Cs__Reply **reply_p)
{
    cs_link_call_t *call = call_p ? *call_p : NULL;
    return_val_if_fail (call && call->detached && reply_p, CKR_ARGUMENTS_BAD);
    pthread_mutex_lock (&call->link->mutex);
    if (!call->base.done)
        cs_link_int_wait_detached (call->link, call);
    pthread_mutex_unlock (&call->link->mutex);
    return cs_link_complete (call_p, reply_p);
}

void
cs_link_call_free (cs_link_call_t **call_p)
{
    cs_link_call_t *call = call_p ? *call_p : NULL;
    if (!call)
        return;
    if (!call->link->abandoned) {           /* a forked child leaves the parent's mutex alone */
        pthread_mutex_lock (&call->link->mutex);
        cs_waitq_remove (&call->link->queue, &call->base);
        pthread_mutex_unlock (&call->link->mutex);
    }
    s_call_clear (call);
    cs_wire_reply_free (&call->base.reply);
    free (call);
    *call_p = NULL;
}
