/*  runner.h — the job runner: sends jobs to the broker over the link that
 *  module.c made, with the login ticket, and feeds the broker's answer about
 *  the ticket back into the login state.
 *
 *  module.c starts the runner at C_Initialize with the link and the client's
 *  timeout it owns, and stops it at C_Finalize once no call is left inside
 *  the library; the runner never calls module.c (layer order: module.h).
 */
#ifndef CS_MODULE_RUNNER_H_INCLUDED
#define CS_MODULE_RUNNER_H_INCLUDED

#include <stdbool.h>
#include <stdint.h>
#include "cs_p11.h"
#include "cs_wire.h"
#include "link.h"

/*  Called by C_Initialize before the library opens its call guard: jobs go
 *  over `link` (borrowed: module.c keeps and destroys it) with `timeout_ms`
 *  each.  */
void cs_runner_start (cs_link_t *link, int64_t timeout_ms);

/*  Called by C_Finalize once every guarded call has left, and in a forked
 *  child: forgets the link.  */
void cs_runner_stop (void);

/*  Sends one job (borrowed) to the broker with the client's timeout, adding
 *  the login ticket when `with_ticket`, and waits for its result.  A ticket
 *  in the reply replaces the one sent; CKR_USER_NOT_LOGGED_IN for a job
 *  that carried a ticket ends the login (expired or revoked: the
 *  application logs in again).  See cs_login_ticket_answer_inlock.
 *  Must be called WITHOUT the library mutex.  Returns the job's own rv (as
 *  the broker set it) with *reply_p the whole reply, whose results[0] is the
 *  job's result (caller frees with cs__reply__free_unpacked, also when the
 *  rv is not CKR_OK); or a link error (CKR_DEVICE_ERROR, CKR_HOST_MEMORY,
 *  CKR_CRYPTOKI_NOT_INITIALIZED) with *reply_p NULL.  */
CK_RV cs_runner_run_job (Cs__Job *job, bool with_ticket, Cs__Reply **reply_p);

/*  cs_runner_run_job for a batch of n_jobs jobs (1..CS_WIRE_MAX_JOBS, all
 *  borrowed) in one request: the broker splits it into work items and
 *  answers once (docs/DESIGN.md §3).  Returns the link error, or the first job's
 *  rv that is not CKR_OK, or CKR_OK; *reply_p as for cs_runner_run_job,
 *  with results[i] for jobs[i].  */
CK_RV cs_runner_run_jobs (Cs__Job **jobs, size_t n_jobs, bool with_ticket, Cs__Reply **reply_p);

/*  A job sent without waiting (PKCS#11 3.2 asynchronous sessions, issue
 *  #23): the link's call and what the answer about the ticket needs.  */
typedef struct _cs_runner_pending_t cs_runner_pending_t;

/*  cs_runner_run_job without the wait: sends `job` (borrowed; it need not
 *  outlive this call) with the login ticket when `with_ticket` and returns.
 *  On CKR_OK *pending_p is the caller's (cs_runner_complete or
 *  cs_runner_pending_free end it).  Errors: cs_link_submit's.  Must be
 *  called WITHOUT the library mutex.  */
CK_RV cs_runner_submit (Cs__Job *job, bool with_ticket, cs_runner_pending_t **pending_p);

/*  Drives the link once without blocking: CKR_PENDING while the job is out
 *  (*pending_p stays the caller's); else the job is ended and *pending_p
 *  nulled, with cs_runner_run_job's outcome (the ticket answer applied).
 *  Must be called WITHOUT the library mutex.  */
CK_RV cs_runner_complete (cs_runner_pending_t **pending_p, Cs__Reply **reply_p);

/*  cs_runner_complete that blocks until the job's answer or its deadline
 *  (cs_link_wait); *pending_p is always ended and nulled.  Must be called
 *  WITHOUT the library mutex.  */
CK_RV cs_runner_wait (cs_runner_pending_t **pending_p, Cs__Reply **reply_p);

/*  Abandons a pending job (its reply is dropped when it comes).  Callable
 *  under the library mutex: no network I/O.  NULL-safe, nulls *pending_p.  */
void cs_runner_pending_free (cs_runner_pending_t **pending_p);

#endif
