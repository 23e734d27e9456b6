/*  request.c — one request's life in the frontend: decode and checks
 *  (cs_wire_request_check, protocol version), per-job storage and deadline,
 *  the dispatch of each job to its room, the pending count and the one
 *  reply (in job order) when the last job is back — or, when the request
 *  asks for per_job_replies, one reply per job as it finishes — and their
 *  encoding and send.  It never blocks.
 *
 *  Owns: fe_request_t and fe_slot_t (frontend_int.h), the reply frame
 *  (zero-copy, wiped: cs_wire_frame_free), the rate limit of log lines
 *  about a client (fe_log_due).
 *  May call: admission.c (identity, charge, admit), login.c (tickets, PIN
 *  jobs), inventory.c (Hello, ListKeys), route.c (sign/decrypt/derive,
 *  modexp), keymgmt_jobs.c (generate, import/destroy/set/copy),
 *  slow_link.c (tenant row reads), frontend.c (fe_drained_check).  */
#include <inttypes.h>
#include "cs_wire.h"
#include "frontend_int.h"
#include "modexp_job.h"
#include "symjobs.h"

static uint64_t s_peek_request_id (zframe_t *body);

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

/*  A request-level error of protocol `version`: no results.  */
static void
s_send_error (frontend_t *self, zframe_t *identity, uint64_t request_id, uint32_t version, CK_RV rv,
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
    s_send_error (self, identity, request_id, CS_PROTOCOL_VERSION_MIN, rv, error);
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
    fe_quota_release (self);                    /* its tenant's room in flight (quota_link.c) */
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

static void
s_job (frontend_t *self, fe_request_t *request, size_t index)
{
    fe_slot_t *slot = &request->slots [index];
    const Cs__Job *job = request->req->jobs [index];
    cs__result__init (&slot->result);
    request->results [index] = &slot->result;
    slot->item.index = index;
    switch (job->kind_case) {
        case CS__JOB__KIND_HELLO:
            fe_job_hello (self, request, slot);
            break;
        case CS__JOB__KIND_LOGIN:
            slot->result.rv = fe_login (self, request, job->login, slot);
            break;
        case CS__JOB__KIND_LIST_KEYS:
            fe_job_list_keys (self, request, job->list_keys, slot);
            break;
        case CS__JOB__KIND_SIGN:
        case CS__JOB__KIND_DECRYPT:
        case CS__JOB__KIND_DERIVE:
            fe_job_crypto (self, request, index);
            break;
        case CS__JOB__KIND_GENERATE_KEY_PAIR:
            fe_job_generate (self, request, index);
            break;
        case CS__JOB__KIND_MODEXP:
            fe_job_modexp (self, request, index);
            break;
        case CS__JOB__KIND_SYM:
            fe_job_sym (self, request, index);
            break;
        case CS__JOB__KIND_IMPORT_KEY:
        case CS__JOB__KIND_GENERATE_KEY:
        case CS__JOB__KIND_DESTROY_KEY:
        case CS__JOB__KIND_SET_KEY_ATTRIBUTES:
        case CS__JOB__KIND_COPY_KEY:
            fe_job_key (self, request, job, slot);
            break;
        case CS__JOB__KIND_PUT_OBJECT:
        case CS__JOB__KIND_LIST_OBJECTS:
        case CS__JOB__KIND_DESTROY_OBJECT:
            fe_job_object (self, request, job, slot);
            break;
        case CS__JOB__KIND_INIT_PIN:
            slot->result.rv = fe_init_pin (self, request, index);
            break;
        case CS__JOB__KIND_SET_PIN:
            slot->result.rv = fe_set_pin (self, request, index, job->set_pin);
            break;
        default:
            slot->result.rv = CKR_FUNCTION_NOT_SUPPORTED;      /* cs_wire rejects these */
    }
}

/*  Decodes and checks the request; on failure replies with the CK_RV of the
 *  broken limit (cs_wire_request_check) and the request's id, so that the
 *  client's waiter gets it; the log line is rate-limited (fe_log_due).  */
static int
s_request_decode (frontend_t *self, zframe_t *body, fe_request_t *request)
{
    const char *why = NULL;
    unsigned long rv = CKR_DEVICE_ERROR;
    request->req = cs_wire_request_check (zframe_data (body), zframe_size (body), &why, &rv);
    if (!request->req) {
        if (fe_log_due (self, request, why))
            zsys_warning ("bad request from client %s: %s: answered with %s", request->client_name, why,
                          cs_rv_name (rv));
        fe_send_error (self, request->identity, s_peek_request_id (body), rv, why);
        return -1;
    }
    Cs__Request *req = request->req;
    request->version = cs_wire_version_choose (req->version_min, req->version_max);
    if (request->version == 0) {
        char error [160];
        snprintf (error, sizeof error, "protocol version mismatch: client speaks %u..%u, "
                  "broker speaks %u..%u", req->version_min, req->version_max,
                  CS_PROTOCOL_VERSION_MIN, CS_PROTOCOL_VERSION);
        if (fe_log_due (self, request, "protocol version"))
            zsys_warning ("client %s: %s", request->client_name, error);
        s_send_error (self, request->identity, req->request_id, CS_PROTOCOL_VERSION, CKR_DEVICE_ERROR, error);
        return -1;
    }
    if (request->version < CS_PROTOCOL_PER_JOB)
        req->per_job_replies = false;           /* a protocol 1 peer gets one reply */
    metrics_request (self->args->metrics, req->n_jobs);
    return 0;
}

/*  Prepares the per-job storage and deadline.  */
static int
s_request_prepare (frontend_t *self, fe_request_t *request)
{
    Cs__Request *req = request->req;
    request->slots = calloc (req->n_jobs, sizeof (fe_slot_t));
    request->results = calloc (req->n_jobs, sizeof (Cs__Result *));
    if (!request->slots || !request->results) {
        fe_send_error (self, request->identity, req->request_id, CKR_HOST_MEMORY, "out of memory");
        return -1;
    }
    int64_t budget = req->deadline_ms ? (int64_t) req->deadline_ms : (int64_t) self->config->default_deadline_ms;
    if (budget > self->config->max_deadline_ms) {
        if (fe_log_due (self, request, "max-deadline-ms"))
            zsys_warning ("client %s (tenant %s): deadline of %" PRId64 " ms capped at "
                          "broker/max-deadline-ms %d", request->client_name, request->tenant, budget,
                          self->config->max_deadline_ms);
        budget = self->config->max_deadline_ms;
    }
    request->deadline = cs_clock_ms () + budget;
    return 0;
}

/*  The request id of a frame we refuse, so the client can match the error
 *  reply, read from its top-level fields (the frame is decoded at most
 *  once, by cs_wire_request_check); 0 when it does not parse.  */
static uint64_t
s_peek_request_id (zframe_t *body)
{
    if (zframe_size (body) == 0 || zframe_size (body) > CS_WIRE_MAX_MESSAGE)
        return 0;
    return cs_wire_request_id (zframe_data (body), zframe_size (body));     /* no second decode */
}

/*  Runs the jobs of a request whose tenant row is known (or cannot be):
 *  the ticket check, then every job; answers at once unless jobs are out
 *  with workers or the slow pool.  `counted`: the request is in in_flight
 *  already (it waited for its tenant row).  */
void
fe_request_run (frontend_t *self, fe_request_t *request, bool counted)
{
    fe_ticket_check (self, request);
    for (size_t i = 0; i < request->req->n_jobs; i++)
        s_job (self, request, i);
    if (!counted && request->pending > 1) {
        self->in_flight++;
        counted = true;
    }
    fe_request_release (self, request, counted);
}

/*  True when the request needs its tenant's row before its jobs: the PIN
 *  epoch of its ticket, Hello's token flags, ListKeys' version.  */
static bool
s_needs_tenant (const Cs__Request *req)
{
    if (req->ticket.len)
        return true;
    for (size_t i = 0; i < req->n_jobs; i++)
        if (req->jobs [i]->kind_case == CS__JOB__KIND_HELLO || req->jobs [i]->kind_case == CS__JOB__KIND_LIST_KEYS)
            return true;
    return false;
}

/*  Starts a decoded request: its tenant row from the cache, or read in the
 *  slow pool first (fe_slow_done runs it then), and its jobs.  `counted`:
 *  it is in in_flight already (it waited in its client's backlog).  */
void
fe_request_start (frontend_t *self, fe_request_t *request, bool counted)
{
    request->pending = 1;                   /* held while jobs are routed */
    fe_keystore_check (self);
    if (s_needs_tenant (request->req)) {
        request->has_state = ks_cache_tenant_get (self->cache, request->tenant, &request->tenant_state);
        slow_job_t *read = request->has_state ? NULL : fe_slow_new (request, 0, SLOW_TENANT);
        if (read) {
            read->token = ks_cache_token (self->cache);
            fe_slow_go (self, read);
            if (!counted)
                self->in_flight++;
            return;
        }
    }
    fe_request_run (self, request, counted);
}

/*  Handles one request: identity, decode, then every job; answers at once
 *  unless items are out with workers.  */
void
fe_request_handle (frontend_t *self, zframe_t **identity_p, zframe_t *body, bool extra_frames)
{
    fe_request_t *request = calloc (1, sizeof *request);
    if (!request)
        return;
    request->received_ns = metrics_now_ns ();
    request->identity = *identity_p;
    *identity_p = NULL;
    const char *why = NULL;
    if (fe_identify (self, body, request, &why)) {
        fe_send_error (self, request->identity, s_peek_request_id (body), CKR_DEVICE_ERROR, why);
        goto done;
    }
    if (extra_frames) {
        if (fe_log_due (self, request, "more than one frame"))
            zsys_warning ("bad request from client %s: more than one frame", request->client_name);
        fe_send_error (self, request->identity, s_peek_request_id (body), CKR_DEVICE_ERROR,
                      "request must be one frame");
        goto done;
    }
    if (s_request_decode (self, body, request) || fe_request_charge (self, body, request)
    ||  s_request_prepare (self, request))
        goto done;
    fe_request_admit (self, request);
    return;
done:
    fe_request_destroy (&request);
}
