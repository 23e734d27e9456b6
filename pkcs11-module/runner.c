/*  runner.c — the job runner (runner.h): one request to the broker per call,
 *  the login ticket copied under the library mutex, the link call without
 *  it (docs/DESIGN.md §5), the broker's answer about the ticket applied under it
 *  again.
 */
#include <stdlib.h>
#include <string.h>
#include <openssl/crypto.h>
#include "log.h"
#include "guard.h"
#include "login.h"
#include "object.h"
#include "runner.h"

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

CK_RV
cs_runner_run_jobs (Cs__Job **jobs, size_t n_jobs, bool with_ticket, Cs__Reply **reply_p)
{
    CK_RV rv;
    uint8_t ticket [CS_WIRE_MAX_TICKET];
    Cs__Request req = CS__REQUEST__INIT;
    cs_link_t *link;
    int64_t timeout_ms;
    *reply_p = NULL;
    cs_lock ();
    if ((rv = cs_guard_check ()) != CKR_OK) {
        cs_unlock ();
        return rv;
    }
    link = s_runner.link;
    timeout_ms = s_runner.timeout_ms;
    req.ticket.len = with_ticket ? cs_login_ticket_copy_inlock (ticket, sizeof ticket) : 0;
    req.ticket.data = ticket;
    cs_unlock ();
    req.n_jobs = n_jobs;
    req.jobs = jobs;
    rv = cs_link_call (link, &req, timeout_ms, reply_p);
    for (size_t i = 0; rv == CKR_OK && i < n_jobs; i++)
        rv = (CK_RV) (*reply_p)->results [i]->rv;
    if (req.ticket.len && *reply_p) {
        /*  A refused key list does not end the login here: the next
            private operation does, with CKR_USER_NOT_LOGGED_IN, which
            C_FindObjectsInit may not return (find.c).  */
        bool refused = rv == CKR_USER_NOT_LOGGED_IN && jobs [0]->kind_case != CS__JOB__KIND_LIST_KEYS
                    && !s_context_job (jobs [0]);
        cs_lock ();
        if (cs_login_ticket_answer_inlock (ticket, req.ticket.len, (*reply_p)->ticket.data,
                                           (*reply_p)->ticket.len, refused))
            cs_object_logged_out_inlock ();        /* as C_Logout */
        cs_unlock ();
    }
    OPENSSL_cleanse (ticket, sizeof ticket);
    return rv;
}

CK_RV
cs_runner_run_job (Cs__Job *job, bool with_ticket, Cs__Reply **reply_p)
{
    Cs__Job *jobs [1] = { job };
    return cs_runner_run_jobs (jobs, 1, with_ticket, reply_p);
}
