/*  worker.c — worker threads: one driver session each, items by pointer.  */
#include <sched.h>
#include <unistd.h>
#include <sys/resource.h>
#include <openssl/crypto.h>
#include "cs_wire.h"            /* CS_WIRE_MAX_MODEXP_BYTES only */
#include "pq_work.h"
#include "verify.h"
#include "worker.h"

#define S_OUT_MAX 4864          /* bytes: an ML-DSA-87 signature (4627, FIPS 204 Table 2);
                                   a 16384-bit RSA result is 2048 */

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

/*  One driver call on the worker's own copies of the item's inputs: the
 *  reactor may abandon the item while the call runs (health.h), and then
 *  the call must not read or write memory the reactor frees.  */
typedef struct {
    work_kind_t kind;
    cs_drv_key_t key;                   /* points into id/ref/material below */
    unsigned char id [CS_KEY_ID_MAX];
    char ref [129];
    unsigned char *material;        /* copy of the PKCS#8, wiped */
    size_t material_len;
    cs_drv_mech_t mech;                 /* label points into label */
    unsigned char *label;
    unsigned char *in;              /* data to sign or decrypt, or the ECDH point */
    size_t in_len;
    cs_keygen_t gen;                /* pointers into gen_buf */
    unsigned char *gen_buf;
    cs_modexp_t modexp;             /* WORK_MODEXP: operands, pointers into modexp_buf */
    unsigned char *modexp_buf;      /* wiped: may hold a CRT private key */
    size_t modexp_buf_len;
    cs_sym_t sym;                   /* WORK_SYM: pointers into sym_buf */
    unsigned char *sym_buf;         /* wiped: holds the secret key */
    size_t sym_buf_len;
    CK_RV rv;
    unsigned char *out;             /* malloc'd result, wiped when discarded */
    size_t out_len;
    size_t out_cap;                 /* bytes allocated for out */
    cs_key_info_t generated;
    bool wrong;
    pq_work_inputs_t pq;            /* ML-DSA / ML-KEM: copies of the context, public key and
                                       signature (issue #23) */
    unsigned char *pub_out;         /* WORK_GENERATE of a PQ key pair: its public key */
    size_t pub_out_len;
} s_call_t;

/*  A malloc'd copy of len bytes (1 byte when len is 0), or NULL.  */
static unsigned char *
s_dup (const void *data, size_t len)
{
    unsigned char *copy = malloc (len ? len : 1);
    if (copy && len)
        memcpy (copy, data, len);
    return copy;
}

/*  Copies gen with its four borrowed buffers into one allocation.  */
static int
s_copy_gen (s_call_t *call, const cs_keygen_t *gen)
{
    size_t label_len = gen->label ? strlen (gen->label) + 1 : 0;
    size_t total = gen->public_exponent_len + gen->ec_params_len + gen->id_len + label_len;
    call->gen = *gen;
    if (!(call->gen_buf = malloc (total ? total : 1)))
        return -1;
    unsigned char *p = call->gen_buf;
    if (gen->public_exponent) {
        call->gen.public_exponent = memcpy (p, gen->public_exponent, gen->public_exponent_len);
        p += gen->public_exponent_len;
    }
    if (gen->ec_params) {
        call->gen.ec_params = memcpy (p, gen->ec_params, gen->ec_params_len);
        p += gen->ec_params_len;
    }
    if (gen->id) {
        call->gen.id = memcpy (p, gen->id, gen->id_len);
        p += gen->id_len;
    }
    if (gen->label)
        call->gen.label = memcpy (p, gen->label, label_len);
    return 0;
}

/*  Copies the operands of a raw modexp item into one allocation.  */
static CK_RV
s_copy_modexp (s_call_t *call, const cs_modexp_t *modexp)
{
    const unsigned char **parts [] = { &call->modexp.base, &call->modexp.exponent, &call->modexp.modulus,
                                       &call->modexp.p, &call->modexp.q, &call->modexp.dp, &call->modexp.dq,
                                       &call->modexp.qinv, &call->modexp.public_exponent };
    size_t *lens [] = { &call->modexp.base_len, &call->modexp.exponent_len, &call->modexp.modulus_len,
                        &call->modexp.p_len, &call->modexp.q_len, &call->modexp.dp_len, &call->modexp.dq_len,
                        &call->modexp.qinv_len, &call->modexp.public_exponent_len };
    size_t total = 0;
    call->modexp = *modexp;
    for (size_t i = 0; i < sizeof parts / sizeof parts [0]; i++)
        total += *parts [i] ? *lens [i] : 0;
    if (!(call->modexp_buf = malloc (total ? total : 1)))
        return CKR_HOST_MEMORY;
    call->modexp_buf_len = total;
    unsigned char *at = call->modexp_buf;
    for (size_t i = 0; i < sizeof parts / sizeof parts [0]; i++) {
        if (!*parts [i])
            continue;
        memcpy (at, *parts [i], *lens [i]);
        *parts [i] = at;
        at += *lens [i];
    }
    return CKR_OK;
}

/*  Copies a secret-key operation (key, IV, AAD, input) into one allocation.  */
static CK_RV
s_copy_sym (s_call_t *call, const cs_sym_t *sym)
{
    const unsigned char **parts [] = { &call->sym.key, &call->sym.iv, &call->sym.aad, &call->sym.in };
    size_t *lens [] = { &call->sym.key_len, &call->sym.iv_bytes, &call->sym.aad_bytes, &call->sym.in_len };
    size_t total = 0;
    call->sym = *sym;
    for (size_t i = 0; i < 4; i++)
        total += *parts [i] ? *lens [i] : 0;
    if (!(call->sym_buf = malloc (total ? total : 1)))
        return CKR_HOST_MEMORY;
    call->sym_buf_len = total;
    unsigned char *at = call->sym_buf;
    for (size_t i = 0; i < 4; i++) {
        if (!*parts [i])
            continue;
        memcpy (at, *parts [i], *lens [i]);
        *parts [i] = at;
        at += *lens [i];
    }
    return CKR_OK;
}

/*  Copies the inputs of a sign/decrypt/derive/verify item (mechanism, OAEP
 *  label, ML-DSA context and keys, input or peer point).  */
static CK_RV
s_copy_job (s_call_t *call, const work_item_t *item)
{
    if (item->kind != WORK_DERIVE) {
        call->mech = item->mech;
        call->mech.label = NULL;
        if (item->mech.label_len) {
            if (!(call->label = s_dup (item->mech.label, item->mech.label_len)))
                return CKR_HOST_MEMORY;
            call->mech.label = call->label;
        }
        if (pq_work_inputs_copy (&call->pq, item))
            return CKR_HOST_MEMORY;
        call->mech.context = call->pq.context;
    }
    call->in_len = item->in_len;
    return (call->in = s_dup (item->in, item->in_len)) ? CKR_OK : CKR_HOST_MEMORY;
}

/*  Fills call with copies of item's inputs.  Returns CKR_OK, or the CK_RV
 *  the item fails with unrun.  */
static CK_RV
s_call_prepare (s_call_t *call, const work_item_t *item)
{
    memset (call, 0, sizeof *call);
    call->kind = item->kind;
    call->key = item->key;
    if (item->key.id) {
        memcpy (call->id, item->key.id, item->key.id_len <= CS_KEY_ID_MAX ? item->key.id_len : 0);
        call->key.id = call->id;
    }
    if (item->key.ref) {
        snprintf (call->ref, sizeof call->ref, "%s", item->key.ref);
        call->key.ref = call->ref;
    }
    if (item->key.pkcs8) {
        if (!(call->material = s_dup (item->key.pkcs8, item->key.pkcs8_len)))
            return CKR_HOST_MEMORY;
        call->material_len = item->key.pkcs8_len;
        call->key.pkcs8 = call->material;
    }
    switch (item->kind) {
        case WORK_SIGN:
        case WORK_DECRYPT:
        case WORK_DERIVE:
        case WORK_VERIFY:
        case WORK_ENCAPSULATE:
        case WORK_DECAPSULATE:
            return s_copy_job (call, item);
        case WORK_GENERATE:
        case WORK_GENERATE_RESIDENT:
            return s_copy_gen (call, &item->gen) ? CKR_HOST_MEMORY : CKR_OK;
        case WORK_MODEXP:
            return s_copy_modexp (call, &item->modexp);
        case WORK_SYM:
            return s_copy_sym (call, &item->sym);
        default:
            return CKR_OK;
    }
}

/*  Frees the call's copies (wiping key material and any result left).  */
static void
s_call_clear (s_call_t *call)
{
    if (call->material) {
        OPENSSL_cleanse (call->material, call->material_len);
        free (call->material);
    }
    if (call->out) {
        OPENSSL_cleanse (call->out, call->out_cap);
        free (call->out);
    }
    if (call->modexp_buf) {
        OPENSSL_cleanse (call->modexp_buf, call->modexp_buf_len);
        free (call->modexp_buf);
    }
    if (call->sym_buf) {
        OPENSSL_cleanse (call->sym_buf, call->sym_buf_len);
        free (call->sym_buf);
    }
    cs_key_info_free_members (&call->generated);
    pq_work_inputs_clear (&call->pq);
    free (call->pub_out);
    free (call->label);
    free (call->in);
    free (call->gen_buf);
    memset (call, 0, sizeof *call);
}

/*  Sign, decrypt or derive into a fresh buffer.  */
static void
s_run_crypto (board_t *board, cs_drv_session_t *session, s_call_t *call)
{
    size_t cap = call->kind == WORK_DERIVE ? 256 : S_OUT_MAX;
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
s_run_modexp (board_t *board, cs_drv_session_t *session, s_call_t *call)
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
s_run_sym (board_t *board, cs_drv_session_t *session, s_call_t *call)
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
s_call_run (board_t *board, cs_drv_session_t *session, s_call_t *call)
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
s_call_verify (verify_t *verify, board_t *board, cs_drv_session_t *session, s_call_t *call)
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

/*  Moves the call's results into item and frees the rest.  */
static void
s_call_finish (s_call_t *call, work_item_t *item)
{
    item->rv = call->rv;
    item->wrong = call->wrong;
    if (call->rv == CKR_OK) {
        item->out = call->out;
        item->out_len = call->out_len;
        item->generated = call->generated;
        item->pub_out = call->pub_out;
        item->pub_out_len = call->pub_out_len;
        if (call->pub_out)
            item->parameter_set = call->pq.parameter_set;
        call->pub_out = NULL;
        call->out = NULL;
        memset (&call->generated, 0, sizeof call->generated);
    }
    s_call_clear (call);
}

/*  Runs item in the calling thread, verifying with `verify` (NULL: not);
 *  once its inputs are copied, tells `health` (NULL: nobody) that worker
 *  `id` reads the item no more (health_call_running).  */
static void
s_run_item (board_t *board, cs_drv_session_t **session_p, verify_t *verify, work_item_t *item, s_call_t *call,
            health_t *health, size_t id)
{
    item->out = NULL;
    item->out_len = 0;
    item->wrong = false;
    CK_RV rv = s_call_prepare (call, item);
    if (rv != CKR_OK) {
        s_call_clear (call);
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
    s_call_t call;
    cs_drv_session_t *used = session;
    s_run_item (board, &used, NULL, item, &call, NULL, 0);
    if (used != session)
        board->session_close (&used);       /* opened for this call only */
    s_call_finish (&call, item);
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
    s_call_t call;
    int64_t started = metrics_now_ns ();
    s_run_item (args->board, session_p, verify, item, &call, args->health, args->id);
    int64_t service_ns = metrics_now_ns () - started;
    metrics_observe (args->metrics, board_index, METRICS_SERVICE, service_ns);
    bool reopen = health_rv_needs_session (call.rv);
    if (health_call_end (args->health, args->id)) {
        s_call_finish (&call, item);
        item->service_ns = service_ns;      /* the scheduler's speed estimate (scheduler.h) */
        zsock_send (dealer, "ip", (int) args->id, item);
    }
    else {
        s_call_clear (&call);
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
