/*  reply.c — the tail of a request's way through the frontend: its
 *  pending count (one per job out, one while its jobs are routed), the
 *  reply when the last count drops (in job order), or one reply per job
 *  with Request.per_job_replies, their encoding and send, and the free
 *  of the request with its secrets wiped.  The job rooms call down into it
 *  from their completions (the `done` of their slow jobs and work items);
 *  it calls no room (docs/FRONTEND.md).
 *
 *  Owns: fe_request_t and fe_slot_t storage (frontend_int.h), the reply
 *  frame (zero-copy, wiped: cs_wire_frame_free), frontend_t.in_flight's
 *  decrement and the DRAINED signal, the rate limit of log lines about a
 *  client (fe_log_due).
 *  May call: client_load.h, audit.h, metrics.h, the wire codec.  */
#include <inttypes.h>
#include "cs_wire.h"
#include "frontend_int.h"
#include "modexp_job.h"
#include "symjobs.h"

/*  Sends reply to the client at identity (kept by the caller).  The frame
 *  is zero-copy with a cleansing free function (cs_wire_frame_free): it may
 *  hold plaintexts, ECDH secrets or generated private keys, and libzmq
 *  wipes it when it is done with it; the loopback core (frontend_core_new)
 *  hands it to its reply function instead.  Returns 0; -1 when out of memory;
 *  -2, sending nothing, when the frame would be over frontend_max_reply.  */
static int
s_send_reply (frontend_t *self, zframe_t *identity, Cs__Reply *reply)
{
    size_t size = 0;
    uint8_t *data = cs_wire_encode (&reply->base, &size);
    zmq_msg_t payload;
    if (!data) {
        zsys_error ("out of memory encoding a reply");
        return -1;
    }
    if (size > frontend_max_reply) {
        cs_wire_frame_free (data, (void *) (uintptr_t) size);
        return -2;
    }
    if (self->reply_fn) {                       /* the loopback core: no socket */
        self->reply_fn (self->reply_arg, zframe_data (identity), zframe_size (identity), data, size);
        cs_wire_frame_free (data, (void *) (uintptr_t) size);
        return 0;
    }
    if (zmq_msg_init_data (&payload, data, size, cs_wire_frame_free, (void *) (uintptr_t) size)) {
        cs_wire_frame_free (data, (void *) (uintptr_t) size);
        return -1;
    }
    zframe_send (&identity, self->router, ZFRAME_MORE | ZFRAME_REUSE);
    if (zmq_msg_send (&payload, zsock_resolve (self->router), 0) < 0)
        zmq_msg_close (&payload);               /* calls cs_wire_frame_free */
    return 0;
}

/*  A request-level error of protocol `version`: no results, rv and a
 *  reason (no secrets).  */
void
fe_send_error_version (frontend_t *self, zframe_t *identity, uint64_t request_id, uint32_t version, CK_RV rv,
              const char *error)
{
    Cs__Reply reply = CS__REPLY__INIT;
    reply.version = version;
    reply.request_id = request_id;
    reply.rv = rv;
    reply.error = (char *) error;
    s_send_reply (self, identity, &reply);
}

/*  Sends a request-level error: no results, rv and a reason (no secrets).
 *  Its version is CS_PROTOCOL_VERSION_MIN, which every client this broker
 *  speaks with reads, so that a client of an older protocol still gets
 *  the limit's CK_RV rather than a version mismatch (docs/CONTRACTS.md
 *  "Wire"); a mismatch itself answers with the broker's highest.  */
void
fe_send_error (frontend_t *self, zframe_t *identity, uint64_t request_id, CK_RV rv,
              const char *error)
{
    fe_send_error_version (self, identity, request_id, CS_PROTOCOL_VERSION_MIN, rv, error);
}

/*  Wipes the secrets a request carries (per-request keys, imported keys,
 *  PINs) before protobuf-c frees it: they never outlive the request.  */
static void
s_request_wipe (Cs__Request *req)
{
    for (size_t i = 0; i < req->n_jobs; i++) {
        const Cs__Job *job = req->jobs [i];
        ProtobufCBinaryData secrets [2] = { { 0 }, { 0 } };
        switch (job->kind_case) {
            case CS__JOB__KIND_IMPORT_KEY:
                secrets [0] = job->import_key->private_pkcs8;
                secrets [1] = job->import_key->secret_value;
                break;
            case CS__JOB__KIND_SIGN: secrets [0] = job->sign->key_pkcs8; break;
            case CS__JOB__KIND_DECRYPT: secrets [0] = job->decrypt->key_pkcs8; break;
            case CS__JOB__KIND_DERIVE: secrets [0] = job->derive->key_pkcs8; break;
            case CS__JOB__KIND_DECAPSULATE: secrets [0] = job->decapsulate->key_pkcs8; break;
            case CS__JOB__KIND_LOGIN: secrets [0] = job->login->pin; break;
            case CS__JOB__KIND_INIT_PIN: secrets [0] = job->init_pin->pin; break;
            case CS__JOB__KIND_SET_PIN:
                secrets [0] = job->set_pin->old_pin;
                secrets [1] = job->set_pin->new_pin;
                break;
            default: break;
        }
        for (size_t k = 0; k < 2; k++)
            if (secrets [k].data)
                OPENSSL_cleanse (secrets [k].data, secrets [k].len);
    }
    modexp_job_wipe (req);
    symjob_wipe (req);
}

/*  Frees what one slot owns, wiping key material.  */
static void
s_slot_free (fe_slot_t *slot)
{
    work_item_t *item = &slot->item;
    if (item->out) {
        OPENSSL_cleanse (item->out, item->out_len);
        free (item->out);
    }
    if (item->material) {
        OPENSSL_cleanse (item->material, item->material_len);
        free (item->material);
    }
    cs_key_info_free_members (&item->generated);
    free (item->pub_out);
    if (slot->private_pkcs8) {
        OPENSSL_cleanse (slot->private_pkcs8, slot->private_pkcs8_len);
        free (slot->private_pkcs8);
    }
    if (slot->info)
        cs__key_info__free_unpacked (slot->info, NULL);
    for (size_t i = 0; i < slot->n_listed; i++)
        cs__key_info__free_unpacked (slot->listed [i], NULL);
    free (slot->listed);
    free (slot->next);
    free (slot->public_view);
    free (slot->keys.keys);
    objjobs_out_free (&slot->objects);
    OPENSSL_cleanse (slot->ticket, TICKET_LEN);
}

void
fe_request_destroy (fe_request_t **self_p)
{
    fe_request_t *self = *self_p;
    if (!self)
        return;
    for (size_t i = 0; self->slots && i < self->req->n_jobs; i++)
        s_slot_free (&self->slots [i]);
    free (self->slots);
    free (self->results);
    if (self->req) {
        s_request_wipe (self->req);
        cs__request__free_unpacked (self->req, NULL);
    }
    if (self->load)
        client_load_release (self->load, self->load_key, self->charged);
    if (self->on_free)
        self->on_free (self);                   /* e.g. its tenant's room in flight (quota_link.c) */
    free (self->load_key);
    zframe_destroy (&self->identity);
    OPENSSL_cleanse (self->renewed_ticket, TICKET_LEN);
    free (self->client_key);
    free (self->name_copy);
    free (self->tenant);
    free (self);
    *self_p = NULL;
}

/*  True when a log line about this request's client over `limit` (a static
 *  name) is due (at most one a minute per client and limit: client_load.h).  */
bool
fe_log_due (frontend_t *self, fe_request_t *request, const char *limit)
{
    const char *client = request->load_key ? request->load_key : request->client_key;
    return !client || client_load_log_due (self->load, client, limit, cs_clock_ms ());
}

/*  Logs (rate-limited) a key job refused by a bound of keyjobs.h: `why`
 *  is the slow job's keyjobs_limit_problem, or NULL.  */
void
fe_key_limit_log (frontend_t *self, fe_request_t *request, CK_RV rv, const char *why)
{
    if (why && fe_log_due (self, request, why))
        zsys_warning ("client %s (tenant %s): key refused: %s: answered with %s", request->client_name,
                      request->tenant, why, cs_rv_name (rv));
}

/*  Logs (rate-limited) a reply over frontend_max_reply, answered instead
 *  with CKR_DEVICE_MEMORY.  */
static void
s_log_over_max (frontend_t *self, fe_request_t *request, uint64_t request_id)
{
    if (fe_log_due (self, request, "max-reply"))
        zsys_warning ("client %s (tenant %s): reply to request %" PRIu64 " over %zu bytes: "
                      "answered with CKR_DEVICE_MEMORY", request->client_name, request->tenant,
                      request_id, frontend_max_reply);
}

/*  A reply of the request (all results, or one with job_number) with its
 *  version, id and renewed ticket.  */
static Cs__Reply
s_reply_of (fe_request_t *request)
{
    Cs__Reply reply = CS__REPLY__INIT;
    reply.version = request->version;
    reply.request_id = request->req->request_id;
    reply.rv = CKR_OK;
    if (request->renewed)
        reply.ticket = (ProtobufCBinaryData) { TICKET_LEN, request->renewed_ticket };
    return reply;
}

/*  Request.per_job_replies: sends the one reply of job `index` (its result
 *  is final) unless it left already; the paper's ARRAY RPC answers each
 *  item as it finishes (issue #8).  A result over the frame limit becomes
 *  CKR_DEVICE_MEMORY for that job alone.  */
static void
s_job_answer (frontend_t *self, fe_request_t *request, size_t index)
{
    fe_slot_t *slot = &request->slots [index];
    if (slot->answered)
        return;
    slot->answered = true;
    Cs__Reply reply = s_reply_of (request);
    Cs__Result *results [1] = { request->results [index] };
    reply.job_number = (uint32_t) index + 1;
    reply.n_results = 1;
    reply.results = results;
    if (s_send_reply (self, request->identity, &reply) == -2) {
        s_log_over_max (self, request, reply.request_id);
        Cs__Result failed = CS__RESULT__INIT;
        failed.rv = CKR_DEVICE_MEMORY;
        results [0] = &failed;
        s_send_reply (self, request->identity, &reply);
    }
}

void
fe_request_job_done (frontend_t *self, fe_request_t *request, size_t index)
{
    if (request->req->per_job_replies && index < request->req->n_jobs)
        s_job_answer (self, request, index);
}

/*  Answers the request with all its results, in job order (with
 *  per_job_replies: every job not answered yet, one reply each), and frees
 *  it.  */
static void
s_request_answer (frontend_t *self, fe_request_t **request_p)
{
    fe_request_t *request = *request_p;
    for (size_t i = 0; self->audit && i < request->req->n_jobs; i++)
        broker_audit_job (self->audit, request->client_name, request->client_key, request->tenant,
                          request->req->jobs [i], request->results [i]);
    if (request->req->per_job_replies) {
        for (size_t i = 0; i < request->req->n_jobs; i++)
            s_job_answer (self, request, i);
        fe_request_destroy (request_p);
        return;
    }
    Cs__Reply reply = s_reply_of (request);
    reply.n_results = request->req->n_jobs;
    reply.results = request->results;
    if (s_send_reply (self, request->identity, &reply) == -2) {
        s_log_over_max (self, request, reply.request_id);
        fe_send_error (self, request->identity, reply.request_id, CKR_DEVICE_MEMORY,
                      "reply over the module's frame limit (CS_WIRE_MAX_REPLY)");
    }
    fe_request_destroy (request_p);
}

/*  Drops one pending count; the last one answers the request.  */
void
fe_request_release (frontend_t *self, fe_request_t *request, bool counted)
{
    assert (request->pending > 0);
    if (--request->pending > 0)
        return;
    s_request_answer (self, &request);
    if (!counted)
        return;
    self->in_flight--;
    fe_drained_check (self);
}

/*  While draining: DRAINED (once) when no request and no background item
 *  is out.  A background item still with a worker when the workers stop
 *  would never come back, and its key material would leak.  */
void
fe_drained_check (frontend_t *self)
{
    if (self->draining && !self->drained && self->in_flight == 0 && self->background_out == 0) {
        self->drained = true;
        zstr_send (self->pipe, "DRAINED");
    }
}
