/*  worker.c — worker threads: one driver session each, items by pointer;
 *  each call runs on the worker's own copies of the item (worker_call.c).  */
#include <sched.h>
#include <unistd.h>
#include <sys/resource.h>
#include <openssl/crypto.h>
#include "cs_wire.h"            /* CS_WIRE_MAX_MODEXP_BYTES only */
#include "pq_work.h"
#include "verify.h"
#include "worker.h"
#include "worker_call.h"

struct _worker_t {
    zactor_t *actor;
};

typedef struct {
    board_t *board;
    size_t id;
    char *backend;
    metrics_t *metrics;
    health_t *health;
    int nice;                   /* added to the creating thread's nice; 0: unchanged */
} s_args_t;


/*  Sign, decrypt or derive into a fresh buffer.  */
static void
s_run_crypto (board_t *board, cs_drv_session_t *session, worker_call_t *call)
{
    size_t cap = call->kind == WORK_DERIVE ? 256 : WORKER_CALL_OUT_MAX;
    size_t out_len = cap;
    cs_drv_sign_key_fn *fn = call->kind == WORK_SIGN ? board->sign
                           : call->kind == WORK_DECRYPT ? board->decrypt : NULL;
    if (call->kind == WORK_DERIVE ? !board->derive : !fn) {
        call->rv = CKR_FUNCTION_NOT_SUPPORTED;
        return;
    }
    if (!(call->out = malloc (cap))) {
        call->rv = CKR_HOST_MEMORY;
        return;
    }
    call->out_cap = cap;
    call->rv = call->kind == WORK_DERIVE
             ? board->derive (session, &call->key, call->in, call->in_len, call->out, &out_len)
             : fn (session, &call->key, &call->mech, call->in, call->in_len, call->out, &out_len);
    if (call->rv == CKR_OK && (out_len > cap || (call->kind == WORK_DERIVE && out_len == 0)))
        call->rv = CKR_DEVICE_ERROR;
    call->out_len = call->rv == CKR_OK ? out_len : 0;
}

/*  Raw modexp (cs_driver.h CS_DRV_MODEXP) into a fresh buffer.  */
static void
s_run_modexp (board_t *board, cs_drv_session_t *session, worker_call_t *call)
{
    size_t cap = 2 * CS_WIRE_MAX_MODEXP_BYTES, out_len = cap;
    if (!board->modexp) {
        call->rv = CKR_FUNCTION_NOT_SUPPORTED;
        return;
    }
    if (!(call->out = malloc (cap))) {
        call->rv = CKR_HOST_MEMORY;
        return;
    }
    call->out_cap = cap;
    call->rv = board->modexp (session, &call->modexp, call->out, &out_len);
    if (call->rv == CKR_OK && (out_len == 0 || out_len > cap))
        call->rv = CKR_DEVICE_ERROR;
    call->out_len = call->rv == CKR_OK ? out_len : 0;
}

/*  A secret-key operation (cs_driver.h CS_DRV_SYMMETRIC) into a fresh buffer
 *  of the input's size and CS_SYM_OUT_EXTRA bytes more (a padding
 *  block, a GCM tag, a key-wrap block; a MAC up to HMAC-SHA512).  */
static void
s_run_sym (board_t *board, cs_drv_session_t *session, worker_call_t *call)
{
    size_t cap = call->sym.in_len + CS_SYM_OUT_EXTRA, out_len = cap;
    if (!board->symmetric) {
        call->rv = CKR_FUNCTION_NOT_SUPPORTED;
        return;
    }
    if (!(call->out = malloc (cap))) {
        call->rv = CKR_HOST_MEMORY;
        return;
    }
    call->out_cap = cap;
    call->rv = board->symmetric (session, &call->sym, call->out, &out_len);
    if (call->rv == CKR_OK && out_len > cap)
        call->rv = CKR_DEVICE_ERROR;
    call->out_len = call->rv == CKR_OK ? out_len : 0;
}

/*  Runs the driver call of `call`.  */
static void
s_call_run (board_t *board, cs_drv_session_t *session, worker_call_t *call)
{
    switch (call->kind) {
        case WORK_SIGN:
        case WORK_DECRYPT:
        case WORK_DERIVE:
            s_run_crypto (board, session, call);
            break;
        case WORK_MODEXP:
            s_run_modexp (board, session, call);
            break;
        case WORK_SYM:
            s_run_sym (board, session, call);
            break;
        case WORK_GENERATE:
            call->rv = board->generate_material
                     ? board->generate_material (session, &call->gen, &call->out, &call->out_len)
                     : CKR_FUNCTION_NOT_SUPPORTED;
            call->out_cap = call->out_len;
            if (call->rv == CKR_OK && (call->gen.mechanism == CKM_ML_DSA_KEY_PAIR_GEN
                                       || call->gen.mechanism == CKM_ML_KEM_KEY_PAIR_GEN))
                call->rv = pq_work_public (board, session, call->out, call->out_len, &call->pub_out,
                                           &call->pub_out_len, &call->pq.parameter_set);
            break;
        case WORK_VERIFY:
        case WORK_ENCAPSULATE:
        case WORK_DECAPSULATE:
            call->rv = pq_work_run (board, session, call->kind, &call->key, &call->mech, &call->pq, call->in,
                                    call->in_len, &call->out, &call->out_len, &call->out_cap);
            break;
        case WORK_GENERATE_RESIDENT:
            call->rv = board->generate_resident
                     ? board->generate_resident (session, &call->gen, &call->generated)
                     : CKR_FUNCTION_NOT_SUPPORTED;
            break;
        case WORK_DESTROY_RESIDENT:
            call->rv = board->destroy_resident
                     ? board->destroy_resident (session, call->key.id, call->key.id_len)
                     : CKR_FUNCTION_NOT_SUPPORTED;
            break;
        default:
            call->rv = CKR_FUNCTION_NOT_SUPPORTED;
    }
}

/*  Checks a sign or decrypt result with the key's public half (verify.h;
 *  ML-DSA on the board's own verify, pq_work.h, with the row's public key);
 *  a wrong one is wiped and the call fails with CKR_DEVICE_ERROR.  */
static void
s_call_verify (verify_t *verify, board_t *board, cs_drv_session_t *session, worker_call_t *call)
{
    if (!verify || call->rv != CKR_OK || (call->kind != WORK_SIGN && call->kind != WORK_DECRYPT))
        return;
    if (call->kind == WORK_SIGN && pq_work_signs (call->mech.type)) {
        if (pq_work_sign_check (board, session, &call->key, &call->mech, call->pq.pub, call->pq.pub_len,
                                call->pq.parameter_set, call->in, call->in_len, call->out, call->out_len))
            return;                     /* ML-DSA: always checked (issue #23) */
    }
    else
    if (verify_result (verify, board, call->kind == WORK_SIGN, &call->key, &call->mech, call->in,
                       call->in_len, call->out, call->out_len) != VERIFY_WRONG)
        return;
    OPENSSL_cleanse (call->out, call->out_cap);
    free (call->out);
    call->out = NULL;
    call->out_len = 0;
    call->rv = CKR_DEVICE_ERROR;
    call->wrong = true;
}

/*  Runs item in the calling thread, verifying with `verify` (NULL: not);
 *  once its inputs are copied, tells `health` (NULL: nobody) that worker
 *  `id` reads the item no more (health_call_running).  */
static void
s_run_item (board_t *board, cs_drv_session_t **session_p, verify_t *verify, work_item_t *item, worker_call_t *call,
            health_t *health, size_t id)
{
    item->out = NULL;
    item->out_len = 0;
    item->wrong = false;
    CK_RV rv = worker_call_prepare (call, item);
    if (rv != CKR_OK) {
        worker_call_clear (call);
        call->rv = rv;
        return;
    }
    if (health)
        health_call_running (health, id);
    if (!*session_p)                        /* reopened after a session-class error */
        *session_p = board->session_open (board->handle);
    if (!*session_p)
        call->rv = CKR_DEVICE_ERROR;        /* the session could not be reopened */
    else {
        s_call_run (board, *session_p, call);
        s_call_verify (verify, board, *session_p, call);
    }
}

void
worker_run_item (board_t *board, cs_drv_session_t *session, work_item_t *item)
{
    worker_call_t call;
    cs_drv_session_t *used = session;
    s_run_item (board, &used, NULL, item, &call, NULL, 0);
    if (used != session)
        board->session_close (&used);       /* opened for this call only */
    worker_call_finish (&call, item);
}

/*  Reopens the worker's driver session (after a session-class error):
 *  a pkcs11 board opens a new PKCS#11 session (and logs in again when the
 *  token lost its login, driver_pkcs11.c).  NULL when it cannot.  */
static cs_drv_session_t *
s_session_reopen (s_args_t *args, cs_drv_session_t *session)
{
    board_t *board = args->board;
    board->session_close (&session);
    session = board->session_open (board->handle);
    if (session)
        zsys_info ("board %s: worker %zu reopened its driver session", board->name, args->id);
    return session;
}

/*  Runs one item from the reactor and hands it back, unless the reactor
 *  abandoned it meanwhile (health.h): then the results are dropped and the
 *  worker reports back with no item.  */
static void
s_serve_item (zsock_t *dealer, s_args_t *args, cs_drv_session_t **session_p, verify_t *verify, work_item_t *item)
{
    size_t board_index = item->board;
    worker_call_t call;
    int64_t started = metrics_now_ns ();
    s_run_item (args->board, session_p, verify, item, &call, args->health, args->id);
    int64_t service_ns = metrics_now_ns () - started;
    metrics_observe (args->metrics, board_index, METRICS_SERVICE, service_ns);
    bool reopen = health_rv_needs_session (call.rv);
    if (health_call_end (args->health, args->id)) {
        worker_call_finish (&call, item);
        item->service_ns = service_ns;      /* the scheduler's speed estimate (scheduler.h) */
        zsock_send (dealer, "ip", (int) args->id, item);
    }
    else {
        worker_call_clear (&call);
        zsock_send (dealer, "ip", (int) args->id, NULL);
    }
    if (reopen && *session_p)
        *session_p = s_session_reopen (args, *session_p);
}

/*  The worker loop: announce readiness, then run items until $TERM.  */
static void
s_serve (zsock_t *pipe, zsock_t *dealer, s_args_t *args, cs_drv_session_t **session_p)
{
    zpoller_t *poller = zpoller_new (pipe, dealer, NULL);
    /*  SIGINT/SIGTERM mean drain (main.c): the worker keeps serving the
        queued items until the server sends $TERM.  */
    if (poller)
        zpoller_set_nonstop (poller, true);
    verify_t *verify = verify_new ();
    zsock_send (dealer, "ip", (int) args->id, NULL);
    while (poller && verify) {
        void *which = zpoller_wait (poller, -1);
        if (which == pipe || !which) {
            char *command = zstr_recv (pipe);
            bool term = !command || streq (command, "$TERM");
            zstr_free (&command);
            if (term || !which)
                break;
            continue;
        }
        work_item_t *item = NULL;
        if (zsock_recv (dealer, "p", &item) == 0 && item)
            s_serve_item (dealer, args, session_p, verify, item);
    }
    verify_destroy (&verify);
    zpoller_destroy (&poller);
}

/*  Lowers the calling thread below the reactor (broker/worker-nice): its
 *  nice value goes up by `nice` (at most 19) and it runs under SCHED_BATCH,
 *  which never preempts on wake-up (sched(7)).  A worker's wake-up should
 *  not take the CPU from the reactor (or libzmq's I/O thread) while a
 *  Hello of another tenant waits there: with two cores shared by a flood's
 *  workers the Hello p50 went from 35 us to 650-930 us (issue 19 item 6).
 *  Raising one's own nice needs no privilege; on a failure the worker logs
 *  a warning and runs on.  */
static void
s_lower_priority (int nice)
{
    if (nice <= 0)
        return;
    pid_t tid = gettid ();
    errno = 0;
    int now = getpriority (PRIO_PROCESS, (id_t) tid);
    int want = (errno ? 0 : now) + nice;
    struct sched_param param = { .sched_priority = 0 };
    if (setpriority (PRIO_PROCESS, (id_t) tid, want > 19 ? 19 : want)
    ||  sched_setscheduler (0, SCHED_BATCH, &param))
        zsys_warning ("worker: cannot lower this thread's priority (broker/worker-nice %d): %s", nice,
                      strerror (errno));
}

/*  Actor body: opens the session in this thread, reports "OK" or "FAIL".  */
static void
s_worker_actor (zsock_t *pipe, void *arg)
{
    s_args_t *args = arg;
    board_t *board = args->board;
    s_lower_priority (args->nice);
    cs_drv_session_t *session = board->session_open (board->handle);
    zsock_signal (pipe, 0);
    zstr_send (pipe, session ? "OK" : "FAIL");
    if (session) {
        zsock_t *dealer = zsock_new (ZMQ_DEALER);
        char identity [32];
        snprintf (identity, sizeof identity, "w%zu", args->id);
        zsock_set_identity (dealer, identity);
        if (zsock_connect (dealer, "%s", args->backend) == 0)
            s_serve (pipe, dealer, args, &session);
        zsock_destroy (&dealer);
        board->session_close (&session);
    }
    else {
        char *command = zstr_recv (pipe);       /* wait for $TERM */
        zstr_free (&command);
    }
    free (args->backend);
    free (args);
}

worker_t *
worker_new (board_t *board, size_t id, const char *backend, metrics_t *metrics, health_t *health,
            int nice)
{
    worker_t *self = calloc (1, sizeof *self);
    s_args_t *args = calloc (1, sizeof *args);
    if (!self || !args || !(args->backend = strdup (backend))) {
        free (self);
        free (args);
        return NULL;
    }
    args->board = board;
    args->id = id;
    args->metrics = metrics;
    args->health = health;
    args->nice = nice;
    self->actor = zactor_new (s_worker_actor, args);
    char *status = self->actor ? zstr_recv (self->actor) : NULL;
    bool ok = status && streq (status, "OK");
    zstr_free (&status);
    if (!ok) {
        zsys_error ("board %s: worker %zu could not open a driver session", board->name, id);
        worker_destroy (&self);
    }
    return self;
}

void
worker_destroy (worker_t **self_p)
{
    worker_t *self = self_p ? *self_p : NULL;
    if (!self)
        return;
    zactor_destroy (&self->actor);
    free (self);
    *self_p = NULL;
}

void
worker_abandon (worker_t **self_p)
{
    worker_t *self = self_p ? *self_p : NULL;
    if (!self)
        return;
    /*  The actor, its pipe and its args stay: the stuck thread may still
        return into them.  The process exits next (main.c).  */
    free (self);
    *self_p = NULL;
}

void
worker_stop (worker_t *self)
{
    if (!self || !self->actor)
        return;
    zsock_set_sndtimeo (self->actor, 0);
    zstr_send (self->actor, "$TERM");
}

bool
worker_stopped (worker_t *self, int timeout_ms)
{
    if (!self || !self->actor)
        return true;
    zpoller_t *poller = zpoller_new (self->actor, NULL);
    if (poller)
        zpoller_set_nonstop (poller, true);     /* SIGTERM brought us here */
    bool done = poller && zpoller_wait (poller, timeout_ms) != NULL;
    zpoller_destroy (&poller);
    return done;
}
