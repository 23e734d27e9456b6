/*  worker.c — worker threads: one driver session each, items by pointer.  */
#include <openssl/crypto.h>
#include "cs_wire.h"
#include "worker.h"

/*  p11-kit's compatibility names: its header maps public_data to
 *  pPublicData, which would hide DeriveJob.public_data.  */
#undef public_data

#define S_OUT_MAX 2048          /* bytes: a 16384-bit RSA result */

struct _worker_t {
    zactor_t *actor;
};

typedef struct {
    board_t *board;
    size_t id;
    char *backend;
    metrics_t *metrics;
} s_args_t;

/*  Copies a wire mechanism into the driver ABI's form.  */
static void
s_mech (const Cs__Mechanism *wire, cs_mech_t *mech)
{
    mech->type = wire->type;
    mech->hash = wire->hash;
    mech->mgf = wire->mgf;
    mech->salt_len = wire->salt_len;
    mech->label = wire->oaep_label.len ? wire->oaep_label.data : NULL;
    mech->label_len = wire->oaep_label.len;
}

/*  Sign or decrypt with item->key.  */
static void
s_run_crypto (board_t *board, cs_session_t *session, work_item_t *item)
{
    const Cs__Job *job = item->job;
    bool sign = item->kind == WORK_SIGN;
    const Cs__Mechanism *wire = sign ? job->sign->mechanism : job->decrypt->mechanism;
    ProtobufCBinaryData in = sign ? job->sign->data : job->decrypt->data;
    cs_drv_sign_key_fn *fn = sign ? board->sign : board->decrypt;
    cs_mech_t mech = { 0 };
    size_t out_len = S_OUT_MAX;
    if (!wire) {
        item->rv = CKR_MECHANISM_INVALID;
        return;
    }
    if (!fn) {
        item->rv = CKR_FUNCTION_NOT_SUPPORTED;
        return;
    }
    s_mech (wire, &mech);
    unsigned char *out = malloc (S_OUT_MAX);
    if (!out) {
        item->rv = CKR_HOST_MEMORY;
        return;
    }
    item->rv = fn (session, &item->key, &mech, in.data, in.len, out, &out_len);
    if (item->rv == CKR_OK && out_len <= S_OUT_MAX) {
        item->out = out;
        item->out_len = out_len;
        return;
    }
    if (item->rv == CKR_OK)
        item->rv = CKR_DEVICE_ERROR;
    OPENSSL_cleanse (out, S_OUT_MAX);
    free (out);
}

/*  ECDH with item->key: the raw Z (cs_driver.h CS_DRV_DERIVE_KEY).  */
static void
s_run_derive (board_t *board, cs_session_t *session, work_item_t *item)
{
    const Cs__DeriveJob *derive = item->job->derive;
    size_t out_len = 256;
    unsigned char *out;
    if (!board->derive) {
        item->rv = CKR_FUNCTION_NOT_SUPPORTED;
        return;
    }
    if (!(out = malloc (out_len))) {
        item->rv = CKR_HOST_MEMORY;
        return;
    }
    item->rv = board->derive (session, &item->key, derive->public_data.data, derive->public_data.len,
                              out, &out_len);
    if (item->rv == CKR_OK && out_len > 0 && out_len <= 256) {
        item->out = out;
        item->out_len = out_len;
        return;
    }
    if (item->rv == CKR_OK)
        item->rv = CKR_DEVICE_ERROR;
    OPENSSL_cleanse (out, 256);
    free (out);
}

/*  Raw modexp (cs_driver.h CS_DRV_MODEXP): the result into out.  */
static void
s_run_modexp (board_t *board, cs_session_t *session, work_item_t *item)
{
    size_t max = 2 * CS_WIRE_MAX_MODEXP_BYTES, out_len = max;
    unsigned char *out;
    if (!board->modexp) {
        item->rv = CKR_FUNCTION_NOT_SUPPORTED;
        return;
    }
    if (!(out = malloc (max))) {
        item->rv = CKR_HOST_MEMORY;
        return;
    }
    item->rv = board->modexp (session, &item->modexp, out, &out_len);
    if (item->rv == CKR_OK && out_len > 0 && out_len <= max) {
        item->out = out;
        item->out_len = out_len;
        return;
    }
    if (item->rv == CKR_OK)
        item->rv = CKR_DEVICE_ERROR;
    OPENSSL_cleanse (out, max);
    free (out);
}

void
worker_run_item (board_t *board, cs_session_t *session, work_item_t *item)
{
    item->out = NULL;
    item->out_len = 0;
    switch (item->kind) {
        case WORK_SIGN:
        case WORK_DECRYPT:
            s_run_crypto (board, session, item);
            break;
        case WORK_DERIVE:
            s_run_derive (board, session, item);
            break;
        case WORK_MODEXP:
            s_run_modexp (board, session, item);
            break;
        case WORK_GENERATE:
            item->rv = board->generate_material
                     ? board->generate_material (session, &item->gen, &item->out, &item->out_len)
                     : CKR_FUNCTION_NOT_SUPPORTED;
            break;
        case WORK_GENERATE_RESIDENT:
            item->rv = board->generate_resident
                     ? board->generate_resident (session, &item->gen, &item->generated)
                     : CKR_FUNCTION_NOT_SUPPORTED;
            break;
        case WORK_DESTROY_RESIDENT:
            item->rv = board->destroy_resident
                     ? board->destroy_resident (session, item->key.id, item->key.id_len)
                     : CKR_FUNCTION_NOT_SUPPORTED;
            break;
        default:
            item->rv = CKR_FUNCTION_NOT_SUPPORTED;
    }
}

/*  The worker loop: announce readiness, then run items until $TERM.  */
static void
s_serve (zsock_t *pipe, zsock_t *dealer, s_args_t *args, cs_session_t *session)
{
    zpoller_t *poller = zpoller_new (pipe, dealer, NULL);
    /*  SIGINT/SIGTERM mean drain (main.c): the worker keeps serving the
        queued items until the server sends $TERM.  */
    if (poller)
        zpoller_set_nonstop (poller, true);
    zsock_send (dealer, "ip", (int) args->id, NULL);
    while (poller) {
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
        if (zsock_recv (dealer, "p", &item) == 0 && item) {
            int64_t started = metrics_now_ns ();
            worker_run_item (args->board, session, item);
            item->service_ns = metrics_now_ns () - started;
            metrics_observe (args->metrics, item->board, METRICS_SERVICE, item->service_ns);
            zsock_send (dealer, "ip", (int) args->id, item);
        }
    }
    zpoller_destroy (&poller);
}

/*  Actor body: opens the session in this thread, reports "OK" or "FAIL".  */
static void
s_worker_actor (zsock_t *pipe, void *arg)
{
    s_args_t *args = arg;
    board_t *board = args->board;
    cs_session_t *session = board->session_open (board->handle);
    zsock_signal (pipe, 0);
    zstr_send (pipe, session ? "OK" : "FAIL");
    if (session) {
        zsock_t *dealer = zsock_new (ZMQ_DEALER);
        char identity [32];
        snprintf (identity, sizeof identity, "w%zu", args->id);
        zsock_set_identity (dealer, identity);
        if (zsock_connect (dealer, "%s", args->backend) == 0)
            s_serve (pipe, dealer, args, session);
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
worker_new (board_t *board, size_t id, const char *backend, metrics_t *metrics)
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
