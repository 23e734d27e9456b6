/*  request.c — the head of a request's way through the frontend: identity
 *  and the admission verdict (admission.c), decode and checks
 *  (cs_wire_request_check, protocol version), per-job storage and
 *  deadline, the tenant row (cache or slow pool), the login ticket, then
 *  each job handed to its room.  The way back is reply.c, reached from the
 *  rooms' completions; nothing below calls up into this file
 *  (docs/FRONTEND.md).  It never blocks.
 *
 *  Owns: the decision to start, queue or refuse a request (acting on
 *  admission's verdict) and the start of queued ones (fe_request_backlog_run).
 *  Each job goes to the start function of its kind's row (job_kinds.c),
 *  after the login its row needs; no switch on the kind here.
 *  May call: admission.c (identity, charge, verdict, backlog), job_kinds.c
 *  (the table), login.c (fe_ticket_check), slow_link.c (tenant row reads),
 *  reply.c.  */
#include <inttypes.h>
#include "cs_wire.h"
#include "frontend_int.h"

static uint64_t s_peek_request_id (zframe_t *body);


/*  What the request's login gives a job that needs `needs`
 *  (docs/CONTRACTS.md "Login tickets"): CKR_OK, or what the job answers
 *  without it (fe_no_login_rv).  A public job (one that carries its own key
 *  material or generates a key pair it returns, and so reaches no
 *  server-held key and stores nothing: PKCS#11 3.0 §4.4, public session
 *  objects need no login) runs without a ticket or with a valid CKU_USER
 *  or CKU_SO one; a ticket that does not hold (expired, revoked, forged)
 *  ends the login as for key lists.  A PIN job checks its PIN itself.  */
static CK_RV
s_login_gate (const fe_request_t *request, fe_needs_t needs)
{
    bool stale = request->req->ticket.len && !request->ticket_ok && !request->so_ok;
    switch (needs) {
        case FE_NEEDS_USER: return request->ticket_ok ? CKR_OK : fe_no_login_rv (request);
        case FE_NEEDS_SO: return request->so_ok ? CKR_OK : fe_no_login_rv (request);
        case FE_NEEDS_PUBLIC: return stale ? fe_no_login_rv (request) : CKR_OK;
        default: return CKR_OK;
    }
}

/*  Job `index`: its result slot, its login (s_login_gate), then its room's
 *  start function from its row (job_kinds.c).  */
static void
s_job (frontend_t *self, fe_request_t *request, size_t index)
{
    fe_slot_t *slot = &request->slots [index];
    const Cs__Job *job = request->req->jobs [index];
    const fe_job_kind_t *kind = fe_job_kind (job);
    cs__result__init (&slot->result);
    request->results [index] = &slot->result;
    slot->item.index = index;
    slot->result.rv = kind ? s_login_gate (request, fe_job_needs (kind, job))
                           : CKR_FUNCTION_NOT_SUPPORTED;       /* cs_wire rejects these */
    if (slot->result.rv == CKR_OK)
        kind->start (self, request, index);
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
        fe_send_error_version (self, request->identity, req->request_id, CS_PROTOCOL_VERSION, CKR_DEVICE_ERROR, error);
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
 *  epoch of its ticket, or a job whose row says so (Hello's token flags,
 *  ListKeys' version).  */
static bool
s_needs_tenant (const Cs__Request *req)
{
    return req->ticket.len || fe_jobs_any (req, FE_KIND_TENANT_ROW);
}

/*  The tenant row of a request is back from the slow pool (SLOW_TENANT,
 *  the job's completion): cached, and the request's jobs run.  */
static void
s_tenant_read (void *arg, slow_job_t *job)
{
    frontend_t *self = arg;
    fe_request_t *request = job->request;
    request->keystore_down = job->rc == KEYSTORE_UNAVAILABLE;
    if (job->rc == 0) {
        ks_cache_tenant_put (self->cache, job->token, request->tenant, &job->state);
        request->tenant_state = job->state;
        request->has_state = true;
    }
    fe_request_run (self, request, true);
}

/*  Starts a decoded request: its tenant row from the cache, or read in the
 *  slow pool first (s_tenant_read runs it then), and its jobs.  `counted`:
 *  it is in in_flight already (it waited in its client's backlog).  */
void
fe_request_start (frontend_t *self, fe_request_t *request, bool counted)
{
    request->pending = 1;                   /* held while jobs are routed */
    fe_keystore_check (self);
    if (s_needs_tenant (request->req)) {
        request->has_state = ks_cache_tenant_get (self->cache, request->tenant, &request->tenant_state);
        slow_job_t *read = request->has_state ? NULL : fe_slow_new (self, request, 0, SLOW_TENANT, s_tenant_read);
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

/*  Jobs came back: requests waiting in their clients' backlogs start as
 *  admission gives them (fe_admission_next: round robin across clients,
 *  while the queue has room).  Called by the reactor after a worker's
 *  hand-back and after the board sweep.  */
void
fe_request_backlog_run (frontend_t *self)
{
    for (fe_request_t *request; (request = fe_admission_next (self)); )
        fe_request_start (self, request, true);
    fe_flow_depth (self);
}

/*  Admits a charged and prepared request (again, when its tenant's quota
 *  hands it back: quota_link.c calls this as its `pass`): acts on
 *  admission's verdict: its tenant's quota keeps it for now, start it now,
 *  keep it in its client's backlog (fe_admission_hold; it counts in
 *  in_flight), or refuse it with CKR_HOST_MEMORY when it cannot be kept.  */
static void
s_request_admit (frontend_t *self, fe_request_t *request)
{
    fe_verdict_t verdict = fe_admission_verdict (self, request, s_request_admit);
    if (verdict == FE_QUOTA)
        return;
    if (verdict == FE_ADMIT)
        fe_request_start (self, request, false);
    else
    if (verdict == FE_QUEUE && fe_admission_hold (self, request) == 0)
        return;
    else {
        fe_send_error (self, request->identity, request->req->request_id, CKR_HOST_MEMORY, "out of memory");
        fe_request_destroy (&request);
    }
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
    if (s_request_decode (self, body, request))
        goto done;
    CK_RV rv = fe_admission_charge (self, body, request, &why);
    if (rv != CKR_OK) {                     /* admission refuses it */
        fe_send_error (self, request->identity, request->req->request_id, rv, why);
        goto done;
    }
    if (s_request_prepare (self, request))
        goto done;
    s_request_admit (self, request);
    return;
done:
    fe_request_destroy (&request);
}
