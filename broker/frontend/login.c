/*  login.c — logins and PINs: C_Login, C_InitPIN and C_SetPIN go to the
 *  slow pool (keyed scrypt, ~70 ms) and come back here; login tickets are
 *  made, checked and renewed here (docs/CONTRACTS.md "Login tickets").
 *
 *  Owns: nothing of its own beyond the request's ticket fields.
 *  May call: ticket.h, context_auth.h, ks_cache.h (tenant rows), reply.c
 *  (the release when a PIN job is back), slow_link.c (fe_slow_new,
 *  fe_slow_go).  */
#include "context_auth.h"
#include "frontend_int.h"

/*  Makes a ticket for the request's client and tenant: user_type at PIN
 *  epoch `epoch`, expiring broker/ticket-lifetime-ms from now (wall clock:
 *  brokers sharing a ticket key accept each other's tickets).  0 or -1.  */
static int
s_ticket_make (frontend_t *self, fe_request_t *request, CK_USER_TYPE user_type, uint64_t epoch,
               unsigned char out [TICKET_LEN])
{
    ticket_claims_t claims = { user_type, epoch,
                               (uint64_t) zclock_time () + (uint64_t) self->config->ticket_lifetime_ms };
    return ticket_make (self->tickets, request->client_key, request->tenant, &claims, out);
}

/*  Logs a refused PIN (C_Login, or the old PIN of C_SetPIN) with the client
 *  that gave it and the tenant's count of wrong PINs in a row, and, when
 *  this one locked the PIN, an error line: one client can lock a whole
 *  tenant, never silently (cryptoserver-keystore(5) "Wrong PINs").  */
static void
s_pin_refused (fe_request_t *request, const char *what, CK_USER_TYPE user_type, CK_RV rv,
               const keystore_pin_state_t *state)
{
    const char *role = user_type == CKU_USER ? "user" : "SO";
    if (rv == CKR_PIN_INCORRECT)
        zsys_warning ("%s: CKR_PIN_INCORRECT as %s from client %s (tenant %s): %ld of %d wrong PINs "
                      "in a row", what, role, request->client_name, request->tenant, state->failures,
                      KEYSTORE_PIN_MAX_FAILURES);
    else
        zsys_warning ("%s: %s as %s from client %s (tenant %s)", what, cs_rv_name (rv), role,
                      request->client_name, request->tenant);
    if (rv == CKR_PIN_INCORRECT && state->failures >= KEYSTORE_PIN_MAX_FAILURES)
        zsys_error ("tenant %s: %s PIN locked after %d wrong PINs in a row, the last from client %s; "
                    "every %s login of the tenant ends until %s", request->tenant, role,
                    KEYSTORE_PIN_MAX_FAILURES, request->client_name, role,
                    user_type == CKU_USER ? "the SO sets a new PIN (C_InitPIN) or "
                                            "cryptoserver-admin tenant set-pin"
                                          : "cryptoserver-admin tenant set-pin --so");
}

/*  A PIN job of the slow pool is back: the tenant row it read may have
 *  changed (failure count, PIN epoch): the cached one goes unless it
 *  already holds what the check left (`pin` of user_type; NULL: the job
 *  set a PIN, the row changed).  */
static void
s_tenant_touched (frontend_t *self, const char *tenant, CK_USER_TYPE user_type,
                  const keystore_pin_state_t *pin)
{
    keystore_tenant_t cached;
    int role = user_type == CKU_SO ? 1 : 0;
    if (!pin || !ks_cache_tenant_get (self->cache, tenant, &cached)
    ||  cached.failures [role] != pin->failures || cached.epoch [role] != pin->epoch)
        ks_cache_tenant_drop (self->cache, tenant);
}

static CK_RV s_login_done (frontend_t *self, fe_request_t *request, fe_slot_t *slot, slow_job_t *check);
static CK_RV s_init_pin_done (frontend_t *self, fe_request_t *request, slow_job_t *set);
static CK_RV s_set_pin_done (frontend_t *self, fe_request_t *request, slow_job_t *set);

/*  A PIN job (SLOW_LOGIN, SLOW_INIT_PIN, SLOW_SET_PIN) is back from the
 *  slow pool: its result, then the request's count of it (fe_slow_go).  */
static void
s_pin_job_back (void *arg, slow_job_t *job)
{
    frontend_t *self = arg;
    fe_request_t *request = job->request;
    fe_slot_t *slot = &request->slots [job->index];
    slot->result.rv = job->kind == SLOW_LOGIN ? s_login_done (self, request, slot, job)
                    : job->kind == SLOW_INIT_PIN ? s_init_pin_done (self, request, job)
                    : s_set_pin_done (self, request, job);
    fe_request_release (self, request, true);
}

/*  Hands PIN job `index` of `kind` for `user_type` to the slow pool
 *  (s_pin_job_back): its result is FE_CKR_PENDING, CKR_USER_TYPE_INVALID
 *  (neither CKU_USER nor CKU_SO) or CKR_HOST_MEMORY.  */
static void
s_pin_job_go (frontend_t *self, fe_request_t *request, size_t index, slow_kind_t kind, CK_USER_TYPE user_type)
{
    CK_RV *rv = &request->slots [index].result.rv;
    slow_job_t *job = NULL;
    if (user_type != CKU_USER && user_type != CKU_SO)
        *rv = CKR_USER_TYPE_INVALID;
    else
        *rv = (job = fe_slow_new (self, request, index, kind, s_pin_job_back)) ? fe_slow_go (self, job)
                                                                               : CKR_HOST_MEMORY;
}

/*  Checks the PIN of the client's tenant in the keystore (keyed scrypt,
 *  ~70 ms, in the slow pool; failures counted, CKR_PIN_LOCKED after too
 *  many): FE_CKR_PENDING, then s_login_done.  */
void
fe_job_login (frontend_t *self, fe_request_t *request, size_t index)
{
    const Cs__LoginJob *job = request->req->jobs [index]->login;
    if (job->user_type == CKU_CONTEXT_SPECIFIC) {
        CK_RV *rv = &request->slots [index].result.rv;
        if (!request->ticket_ok)
            *rv = fe_no_login_rv (request);     /* again the user's PIN, in a user login */
        else
        if (job->key_id.len == 0 || job->key_id.len > CONTEXT_AUTH_MAX_REF)
            *rv = CKR_ARGUMENTS_BAD;
        else
            s_pin_job_go (self, request, index, SLOW_LOGIN, CKU_USER);
        return;
    }
    s_pin_job_go (self, request, index, SLOW_LOGIN, job->user_type);
}

/*  The PIN check is back: a ticket bound to the client key, at the PIN
 *  epoch the check saw, expiring after broker/ticket-lifetime-ms unless
 *  renewed.  */
static CK_RV
s_login_done (frontend_t *self, fe_request_t *request, fe_slot_t *slot, slow_job_t *check)
{
    const Cs__LoginJob *job = check->job->login;
    CK_USER_TYPE role = job->user_type == CKU_CONTEXT_SPECIFIC ? CKU_USER : job->user_type;
    CK_RV rv = check->rv;
    //  CKR_DEVICE_ERROR wrote nothing (the database is unreachable, the row
    //  does not verify, the tenant is unknown): the cached row stays, so the
    //  tenant's sessions keep signing during a database outage.
    if (rv != CKR_DEVICE_ERROR)
        s_tenant_touched (self, request->tenant, role, &check->pin);
    if (rv != CKR_OK) {
        s_pin_refused (request, "login", role, rv, &check->pin);
        return rv;
    }
    if (job->user_type == CKU_CONTEXT_SPECIFIC
        ? context_auth_make (self->tickets, request->client_key, request->tenant, job->key_id.data,
                             job->key_id.len, check->pin.epoch, (uint64_t) zclock_time (), slot->ticket)
        : s_ticket_make (self, request, job->user_type, check->pin.epoch, slot->ticket))
        return CKR_DEVICE_ERROR;
    if (job->user_type == CKU_CONTEXT_SPECIFIC)
        zsys_info ("login: client %s (tenant %s) context-specific for key %.*s", request->client_name,
                   request->tenant, (int) job->key_id.len, (const char *) job->key_id.data);
    else
        zsys_info ("login: client %s (tenant %s) as %s", request->client_name, request->tenant,
                   job->user_type == CKU_USER ? "user" : "SO");
    cs__login_result__init (&slot->login);
    slot->login.ticket.data = slot->ticket;
    slot->login.ticket.len = TICKET_LEN;
    slot->result.kind_case = CS__RESULT__KIND_LOGIN;
    slot->result.login = &slot->login;
    return CKR_OK;
}

/*  C_InitPIN: the SO sets the user PIN (PKCS#11 2.40 §5.6), which also
 *  clears its lock and ends every user login of the tenant (a new PIN
 *  epoch); the SO's own login goes on (a CKU_SO ticket: its row in
 *  job_kinds.c).  In the slow pool (s_init_pin_done).  */
void
fe_job_init_pin (frontend_t *self, fe_request_t *request, size_t index)
{
    s_pin_job_go (self, request, index, SLOW_INIT_PIN, CKU_USER);
}

static CK_RV
s_init_pin_done (frontend_t *self, fe_request_t *request, slow_job_t *set)
{
    s_tenant_touched (self, request->tenant, CKU_USER, NULL);
    zsys_info ("init-pin: tenant %s by client %s: %s", request->tenant, request->client_name,
               cs_rv_name (set->rv));
    return set->rv;
}

/*  C_SetPIN: the old PIN (counted like a login) then the new one, which
 *  moves the PIN epoch: logins made with the old PIN end, anywhere.  The
 *  caller's own login of that user type goes on (PKCS#11 2.40 §5.6: the
 *  session stays logged in): it gets a ticket at the new epoch in
 *  Reply.ticket.  In the slow pool (s_set_pin_done).  */
void
fe_job_set_pin (frontend_t *self, fe_request_t *request, size_t index)
{
    s_pin_job_go (self, request, index, SLOW_SET_PIN, request->req->jobs [index]->set_pin->user_type);
}

static CK_RV
s_set_pin_done (frontend_t *self, fe_request_t *request, slow_job_t *set)
{
    const Cs__SetPinJob *job = set->job->set_pin;
    const char *role = job->user_type == CKU_USER ? "user" : "SO";
    bool logged_in = job->user_type == CKU_USER ? request->ticket_ok : request->so_ok;
    CK_RV rv = set->rv;
    s_tenant_touched (self, request->tenant, job->user_type, NULL);
    if (set->refused) {
        s_pin_refused (request, "set-pin", job->user_type, rv, &set->pin);
        return rv;
    }
    if (rv == CKR_OK && logged_in) {
        request->renewed = s_ticket_make (self, request, job->user_type, set->epoch,
                                          request->renewed_ticket) == 0;
        if (!request->renewed)
            rv = CKR_DEVICE_ERROR;
    }
    zsys_info ("set-pin: tenant %s (%s) by client %s: %s", request->tenant, role, request->client_name,
               cs_rv_name (rv));
    return rv;
}

/*  Checks the request's login ticket (docs/CONTRACTS.md "Login tickets"):
 *  its MAC for this client and tenant, its expiry, and its epoch against
 *  the tenant's PIN epoch of its user type (the tenant row the request
 *  got before its jobs: fe_request_start).  Sets
 *  ticket_ok (CKU_USER) or so_ok (CKU_SO).  A valid ticket with less than
 *  half of broker/ticket-lifetime-ms left is renewed: the reply carries a
 *  fresh one (Reply.ticket), so a login in use never expires and the broker
 *  keeps no session state.  */
void
fe_ticket_check (frontend_t *self, fe_request_t *request)
{
    const Cs__Request *req = request->req;
    ticket_claims_t claims;
    uint64_t now = (uint64_t) zclock_time (), epoch = 0;
    if (req->ticket.len == 0)
        return;
    ticket_status_t status = ticket_check (self->tickets, request->client_key, request->tenant,
                                           req->ticket.data, req->ticket.len, now, &claims);
    const char *why = status == TICKET_INVALID ? "not valid" : status == TICKET_EXPIRED ? "expired" : NULL;
    if (!why && (!request->has_state || (claims.user_type != CKU_USER && claims.user_type != CKU_SO)
                 || (epoch = request->tenant_state.epoch [claims.user_type == CKU_SO]) != claims.epoch))
        why = "revoked (the PIN was set or locked since)";
    if (why) {
        if (frontend_verbose)
            zsys_debug ("client %s (tenant %s): login ticket %s", request->client_name, request->tenant, why);
        return;
    }
    request->ticket_ok = claims.user_type == CKU_USER;
    request->so_ok = claims.user_type == CKU_SO;
    if (claims.expires_ms - now < (uint64_t) self->config->ticket_lifetime_ms / 2)
        request->renewed = s_ticket_make (self, request, claims.user_type, epoch,
                                          request->renewed_ticket) == 0;
}
