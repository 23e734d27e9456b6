/*  server.c — start and stop a whole broker in one process.  */
#include <openssl/crypto.h>
#include "board.h"
#include "cs_secmem.h"
#include "cs_util.h"
#include "cs_wire.h"
#include "frontend.h"
#include "keystore.h"
#include "server.h"
#include "worker.h"

#define S_WRAPPED_MAX 1024          /* bytes of a wrapped master key (RSA-8192) */

struct _server_t {
    const broker_config_t *config;
    board_t **boards;
    size_t n_boards;
    zactor_t *auth;
    zactor_t *frontend;
    frontend_args_t args;
    char backend [64];
    char *endpoint;
    worker_t **workers;
    size_t n_workers;
    keystore_t *keystore;
};

/*  Opens every configured board.  */
static int
s_boards_open (server_t *self)
{
    const broker_config_t *config = self->config;
    const char *dir = board_driver_dir (config);
    self->boards = calloc (config->n_boards, sizeof (board_t *));
    if (!self->boards)
        return -1;
    for (size_t i = 0; i < config->n_boards; i++) {
        self->boards [i] = board_new (&config->boards [i], dir, config->dir);
        if (!self->boards [i])
            return -1;
        self->n_boards++;
    }
    return 0;
}

/*  Reads a whole binary file of at most max bytes; returns its length or -1.  */
static long
s_read_file (const char *path, unsigned char *buf, size_t max)
{
    FILE *file = fopen (path, "rbe");
    if (!file)
        return -1;
    size_t len = fread (buf, 1, max, file);
    bool whole = len < max && feof (file);
    fclose (file);
    return whole ? (long) len : -1;
}

/*  Unwraps the master key with the board key labelled `label`: RSA-OAEP
 *  with SHA-256 and MGF1-SHA256, no label, on one session of that board.
 *  The wrapped file holds the raw ciphertext (modulus-sized).  */
static int
s_unwrap_master_key (server_t *self, uint8_t key [KEYSTORE_MASTER_KEY_LEN])
{
    const broker_config_t *config = self->config;
    board_t *board = NULL;
    for (size_t i = 0; i < self->n_boards; i++)
        if (streq (self->boards [i]->name, config->master_key_board))
            board = self->boards [i];
    const cs_key_info_t *wrap = NULL;
    for (size_t i = 0; board && i < board->n_keys; i++)
        if (board->keys [i].label && streq (board->keys [i].label, config->master_key_label)
        &&  board->keys [i].key_type == CKK_RSA)
            wrap = &board->keys [i];
    if (!wrap || !board->decrypt) {
        zsys_error ("keystore: master key: board %s has no RSA key labelled '%s'",
                    config->master_key_board, config->master_key_label);
        return -1;
    }
    unsigned char wrapped [S_WRAPPED_MAX], plain [512];
    size_t plain_len = sizeof plain;
    long len = s_read_file (config->master_key_wrapped, wrapped, sizeof wrapped);
    if (len <= 0) {
        zsys_error ("keystore: master-key-wrapped: cannot read %s", config->master_key_wrapped);
        return -1;
    }
    cs_session_t *session = board->session_open (board->handle);
    cs_key_t wrap_key = { wrap->id, wrap->id_len, NULL, 0, NULL };
    cs_mech_t mech = { CKM_RSA_PKCS_OAEP, CKM_SHA256, CKG_MGF1_SHA256, 0, NULL, 0 };
    CK_RV rv = session ? board->decrypt (session, &wrap_key, &mech, wrapped, (size_t) len, plain,
                                         &plain_len) : CKR_DEVICE_ERROR;
    board->session_close (&session);
    int rc = rv == CKR_OK && plain_len == KEYSTORE_MASTER_KEY_LEN ? 0 : -1;
    if (rc == 0)
        memcpy (key, plain, KEYSTORE_MASTER_KEY_LEN);
    else
        zsys_error ("keystore: master key: %s does not unwrap with key '%s' of board %s (%s)",
                    config->master_key_wrapped, config->master_key_label, board->name,
                    rv == CKR_OK ? "not 32 bytes" : cs_rv_name (rv));
    OPENSSL_cleanse (plain, sizeof plain);
    return rc;
}

/*  Gets the master key (file or board-wrapped) and opens the keystore; a
 *  wrong master key is a log line from keystore_open and a failed start.  */
static int
s_keystore_open (server_t *self)
{
    const broker_config_t *config = self->config;
    uint8_t key [KEYSTORE_MASTER_KEY_LEN];
    int rc = config->master_key_board ? s_unwrap_master_key (self, key)
           : keystore_master_key_read (config->master_key_file, key);
    if (rc)
        zsys_error ("keystore %s: no usable master key (%s)", config->keystore_path,
                    config->master_key_board ? "board-wrapped" : config->master_key_file);
    else
    if (!(self->keystore = keystore_open (config->keystore_path, key)))
        rc = -1;
    OPENSSL_cleanse (key, sizeof key);
    return rc;
}

/*  Starts zauth with the CURVE allow-list of the clients directory.  */
static int
s_auth_start (server_t *self, bool verbose)
{
    if (!self->config->curve)
        return 0;
    self->auth = zactor_new (zauth, NULL);
    if (!self->auth)
        return -1;
    (void) verbose;     /* zauth is always verbose: it is the log of refused keys */
    zstr_send (self->auth, "VERBOSE");
    zsock_wait (self->auth);
    zstr_sendx (self->auth, "CURVE", self->config->clients_dir, NULL);
    zsock_wait (self->auth);
    return 0;
}

static int
s_frontend_start (server_t *self)
{
    snprintf (self->backend, sizeof self->backend, "inproc://cs-backend-%p", (void *) self);
    self->args = (frontend_args_t) { self->config, self->boards, self->n_boards, self->backend,
                                     self->keystore };
    self->frontend = zactor_new (frontend_actor, &self->args);
    char *endpoint = self->frontend ? zstr_recv (self->frontend) : NULL;
    if (endpoint && *endpoint) {
        self->endpoint = endpoint;
        return 0;
    }
    zstr_free (&endpoint);
    return -1;
}

/*  Starts board->threads workers per board, ids in board order (the same
 *  order the frontend registers them with the scheduler).  */
static int
s_workers_start (server_t *self)
{
    size_t total = 0;
    for (size_t b = 0; b < self->n_boards; b++)
        total += (size_t) self->boards [b]->threads;
    self->workers = calloc (total, sizeof (worker_t *));
    if (!self->workers)
        return -1;
    for (size_t b = 0; b < self->n_boards; b++)
        for (int t = 0; t < self->boards [b]->threads; t++) {
            worker_t *worker = worker_new (self->boards [b], self->n_workers, self->backend);
            if (!worker)
                return -1;
            self->workers [self->n_workers++] = worker;
        }
    return 0;
}

server_t *
server_new (const broker_config_t *config, bool verbose)
{
    server_t *self = calloc (1, sizeof *self);
    if (!self)
        return NULL;
    self->config = config;
    frontend_verbose = verbose;
    if (cs_secmem_protect_process ())
        zsys_warning ("cannot make the broker process non-dumpable: %s", strerror (errno));
    if (s_boards_open (self) || s_keystore_open (self) || s_auth_start (self, verbose)
    ||  s_frontend_start (self) || s_workers_start (self))
        server_destroy (&self);
    else {
        if (cs_secmem_lock_failures ())
            zsys_warning ("%zu secrets (master key, ticket key) could not be locked in memory: "
                          "raise RLIMIT_MEMLOCK (ulimit -l, systemd LimitMEMLOCK=)",
                          cs_secmem_lock_failures ());
        zsys_info ("listening on %s", self->endpoint);
    }
    return self;
}

const char *
server_endpoint (server_t *self)
{
    return self->endpoint;
}

zactor_t *
server_frontend (server_t *self)
{
    return self->frontend;
}

int
server_drain (server_t *self, int timeout_ms)
{
    zpoller_t *poller = zpoller_new (self->frontend, NULL);
    int64_t end = zclock_mono () + timeout_ms;
    int rc = -1;
    zpoller_set_nonstop (poller, true);
    zstr_send (self->frontend, "DRAIN");
    while (rc && zclock_mono () < end) {
        if (!zpoller_wait (poller, (int) (end - zclock_mono ())))
            continue;
        char *reply = zstr_recv (self->frontend);
        if (reply && streq (reply, "DRAINED"))
            rc = 0;
        zstr_free (&reply);
    }
    zpoller_destroy (&poller);
    return rc;
}

void
server_destroy (server_t **self_p)
{
    server_t *self = self_p ? *self_p : NULL;
    if (!self)
        return;
    for (size_t i = 0; i < self->n_workers; i++)
        worker_destroy (&self->workers [i]);
    zactor_destroy (&self->frontend);
    zactor_destroy (&self->auth);
    keystore_destroy (&self->keystore);
    for (size_t i = 0; i < self->n_boards; i++)
        board_destroy (&self->boards [i]);
    free (self->workers);
    free (self->boards);
    zstr_free (&self->endpoint);
    free (self);
    *self_p = NULL;
}
