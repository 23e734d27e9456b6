/*  runner.c — the job runner (runner.h): one request to the broker per call,
 *  the login ticket copied under the library mutex, the link call without
 *  it (docs/DESIGN.md §5), the broker's answer about the ticket applied under it
 *  again.
 */
#include <stdlib.h>
#include <string.h>
#include <openssl/crypto.h>
#include "cs_p11_3.h"
#include "log.h"
#include "guard.h"
#include "login.h"
#include "object.h"
#include "runner.h"

struct _cs_runner_pending_t {
    cs_link_call_t *call;
    uint8_t ticket [CS_WIRE_MAX_TICKET];    /* the login ticket sent, wiped at the end */
    size_t ticket_len;
    bool list_or_context;                   /* a refusal says nothing of the login */
};

static struct {
    cs_link_t *link;            /* borrowed from module.c; under the library mutex */
    int64_t timeout_ms;
} s_runner;

/*  A context-specific login, or a job that carries its context ticket: a
 *  refusal (the context ticket expired, or a wrong PIN of a context login)
 *  says nothing of the user's login, which stands (docs/CONTRACTS.md
 *  "Context-specific login").  */
static bool
s_context_job (const Cs__Job *job)
{
    return (job->kind_case == CS__JOB__KIND_LOGIN && job->login->user_type == CKU_CONTEXT_SPECIFIC)
        || (job->kind_case == CS__JOB__KIND_SIGN && job->sign->context_ticket.len)
        || (job->kind_case == CS__JOB__KIND_DECRYPT && job->decrypt->context_ticket.len);
}

void
cs_runner_start (cs_link_t *link, int64_t timeout_ms)
{
    s_runner.link = link;
    s_runner.timeout_ms = timeout_ms;
}

void
cs_runner_stop (void)
{
    s_runner.link = NULL;
    s_runner.timeout_ms = 0;
}

/*  Copies the login ticket (when `with_ticket`) into `ticket` (which holds
 *  CS_WIRE_MAX_TICKET bytes) and the link; CKR_OK or cs_guard_check's.  */
static CK_RV
s_begin (bool with_ticket, uint8_t *ticket, size_t *ticket_len_p, cs_link_t **link_p, int64_t *timeout_p)
{
    CK_RV rv;
    cs_lock ();
    if ((rv = cs_guard_check ()) == CKR_OK) {
        *link_p = s_runner.link;
        *timeout_p = s_runner.timeout_ms;
        *ticket_len_p = with_ticket ? cs_login_ticket_copy_inlock (ticket, CS_WIRE_MAX_TICKET) : 0;
    }
    cs_unlock ();
    return rv;
}

/*  The broker's answer about the ticket sent (ticket_len bytes of
 *  `ticket`), for a job whose rv is `rv`: the reply's ticket replaces it;
 *  CKR_USER_NOT_LOGGED_IN ends the login unless `list_or_context`.  */
static void
s_answer (const uint8_t *ticket, size_t ticket_len, const Cs__Reply *reply, CK_RV rv, bool list_or_context)
{
    /*  A refused key list does not end the login here: the next
        private operation does, with CKR_USER_NOT_LOGGED_IN, which
        C_FindObjectsInit may not return (find.c).  */
    bool refused = rv == CKR_USER_NOT_LOGGED_IN && !list_or_context;
    if (!ticket_len || !reply)
        return;
    cs_lock ();
    if (cs_login_ticket_answer_inlock (ticket, ticket_len, reply->ticket.data, reply->ticket.len, refused))
        cs_object_logged_out_inlock ();        /* as C_Logout */
    cs_unlock ();
}

static bool
s_list_or_context (const Cs__Job *job)
{
    return job->kind_case == CS__JOB__KIND_LIST_KEYS || s_context_job (job);
}

CK_RV
cs_runner_run_jobs (Cs__Job **jobs, size_t n_jobs, bool with_ticket, Cs__Reply **reply_p)
{
    CK_RV rv;
    uint8_t ticket [CS_WIRE_MAX_TICKET];
    Cs__Request req = CS__REQUEST__INIT;
    cs_link_t *link = NULL;
    int64_t timeout_ms = 0;
    *reply_p = NULL;
    if ((rv = s_begin (with_ticket, ticket, &req.ticket.len, &link, &timeout_ms)) != CKR_OK)
        return rv;
    req.ticket.data = ticket;
    req.n_jobs = n_jobs;
    req.jobs = jobs;
    rv = cs_link_call (link, &req, timeout_ms, reply_p);
    for (size_t i = 0; rv == CKR_OK && i < n_jobs; i++)
        rv = (CK_RV) (*reply_p)->results [i]->rv;
    s_answer (ticket, req.ticket.len, *reply_p, rv, s_list_or_context (jobs [0]));
    OPENSSL_cleanse (ticket, sizeof ticket);
    return rv;
}

CK_RV
cs_runner_submit (Cs__Job *job, bool with_ticket, cs_runner_pending_t **pending_p)
{
    CK_RV rv;
    Cs__Job *jobs [1] = { job };
    Cs__Request req = CS__REQUEST__INIT;
    cs_link_t *link = NULL;
    int64_t timeout_ms = 0;
    cs_runner_pending_t *self = calloc (1, sizeof *self);
    *pending_p = NULL;
    if (!self)
        return CKR_HOST_MEMORY;
    if ((rv = s_begin (with_ticket, self->ticket, &self->ticket_len, &link, &timeout_ms)) == CKR_OK) {
        req.ticket = (ProtobufCBinaryData) { self->ticket_len, self->ticket };
        req.n_jobs = 1;
        req.jobs = jobs;
        self->list_or_context = s_list_or_context (job);
        rv = cs_link_submit (link, &req, timeout_ms, &self->call);
    }
    if (rv != CKR_OK)
        cs_runner_pending_free (&self);
    *pending_p = self;
    return rv;
}

/*  cs_runner_complete and cs_runner_wait: the job's end by `end`
 *  (cs_link_complete or cs_link_wait).  */
static CK_RV
s_end (cs_runner_pending_t **pending_p, Cs__Reply **reply_p, CK_RV (*end) (cs_link_call_t **, Cs__Reply **))
{
    cs_runner_pending_t *self = *pending_p;
    CK_RV rv = end (&self->call, reply_p);
    if (rv == CKR_PENDING)
        return rv;
    if (rv == CKR_OK)
        rv = (CK_RV) (*reply_p)->results [0]->rv;
    s_answer (self->ticket, self->ticket_len, *reply_p, rv, self->list_or_context);
    cs_runner_pending_free (pending_p);
    return rv;
}

CK_RV
cs_runner_complete (cs_runner_pending_t **pending_p, Cs__Reply **reply_p)
{
    return s_end (pending_p, reply_p, cs_link_complete);
}

CK_RV
cs_runner_wait (cs_runner_pending_t **pending_p, Cs__Reply **reply_p)
{
    return s_end (pending_p, reply_p, cs_link_wait);
}

void
cs_runner_pending_free (cs_runner_pending_t **pending_p)
{
    cs_runner_pending_t *self = pending_p ? *pending_p : NULL;
    if (!self)
        return;
    cs_link_call_free (&self->call);
    OPENSSL_cleanse (self->ticket, sizeof self->ticket);
    free (self);
    *pending_p = NULL;
}

CK_RV
cs_runner_run_job (Cs__Job *job, bool with_ticket, Cs__Reply **reply_p)
{
    Cs__Job *jobs [1] = { job };
    return cs_runner_run_jobs (jobs, 1, with_ticket, reply_p);
}
