/*  server.c — start and stop a whole broker in one process.  */
#include <openssl/crypto.h>
#include "board.h"
#include "cs_secmem.h"
#include "cs_util.h"
#include "cs_wire.h"
#include "frontend.h"
#include "health.h"
#include "keystore.h"
#include "metrics_http.h"
#include "party.h"
#include "pool_store.h"
#include "server.h"
#include "worker.h"

#define S_WRAPPED_MAX 1024          /* bytes of a wrapped master key (RSA-8192) */

size_t server_stuck_workers;

struct _server_t {
    const broker_config_t *config;
    party_t *party;             /* party.h, or NULL without a party section */
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
    metrics_t *metrics;
    metrics_http_t *metrics_http;
    health_t *health;               /* board health and worker call states (health.h) */
    size_t stuck;                   /* workers left behind in a driver call at destroy */
    size_t n_tenants;               /* the keystore's tenants at start (s_tenants_count) */
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

/*  The key that wraps the master key (keystore/master-key =
 *  board:NAME:LABEL): the (last) RSA key labelled LABEL on board NAME, or
 *  NULL; *board_p gets board NAME (or NULL).  */
static const cs_key_info_t *
s_wrap_key_find (server_t *self, board_t **board_p)
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
    *board_p = board;
    return wrap;
}

/*  Unwraps the master key with the board key labelled `label`: RSA-OAEP
 *  with SHA-256 and MGF1-SHA256, no label, on one session of that board.
 *  The wrapped file holds the raw ciphertext (modulus-sized).  */
static int
s_unwrap_master_key (server_t *self, uint8_t key [KEYSTORE_MASTER_KEY_LEN])
{
    const broker_config_t *config = self->config;
    board_t *board = NULL;
    const cs_key_info_t *wrap = s_wrap_key_find (self, &board);
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
    cs_drv_session_t *session = board->session_open (board->handle);
    cs_drv_key_t wrap_key = { wrap->id, wrap->id_len, NULL, 0, NULL };
    cs_drv_mech_t mech = { CKM_RSA_PKCS_OAEP, CKM_SHA256, CKG_MGF1_SHA256, 0, NULL, 0 };
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

/*  Big-endian unsigned integers a and b are equal, whatever their leading
 *  zero bytes (PKCS#11 CKA_MODULUS may keep them, OpenSSL drops them).  */
static bool
s_unsigned_eq (const unsigned char *a, size_t a_len, const unsigned char *b, size_t b_len)
{
    while (a_len && !*a) {
        a++;
        a_len--;
    }
    while (b_len && !*b) {
        b++;
        b_len--;
    }
    return a_len == b_len && (a_len == 0 || memcmp (a, b, a_len) == 0);
}

/*  True when an RSA key with modulus n and exponent e is the wrapping key
 *  (same public key); never for a wrapping key whose board reported no
 *  modulus.  */
static bool
s_wrap_key_is (const cs_key_info_t *wrap, CK_KEY_TYPE type, const unsigned char *n, size_t n_len,
               const unsigned char *e, size_t e_len)
{
    return type == CKK_RSA && wrap->modulus_len > 0
        && s_unsigned_eq (wrap->modulus, wrap->modulus_len, n, n_len)
        && s_unsigned_eq (wrap->public_exponent, wrap->public_exponent_len, e, e_len);
}

/*  The key that wraps the master key serves the broker only (issue #7: a
 *  client that could decrypt master.key.wrapped would get the master key,
 *  and with keystore.db every tenant's keys).  Reserved (board_key_reserve:
 *  never listed, never routed, whatever the tenant): on board NAME every key
 *  labelled LABEL and every key sharing the wrapping key's CKA_ID (board
 *  jobs name keys by CKA_ID), and every copy of it (the same RSA public key)
 *  on a board without a tenant.  A copy on a board with a tenant is a client
 *  key of that tenant: an error line each and -1 (the broker does not
 *  start).  */
static int
s_wrap_key_reserve (server_t *self, const board_t *home, const cs_key_info_t *wrap)
{
    const char *label = self->config->master_key_label;
    int rc = 0;
    for (size_t b = 0; b < self->n_boards; b++) {
        board_t *board = self->boards [b];
        for (size_t k = 0; k < board->n_keys; k++) {
            const cs_key_info_t *key = &board->keys [k];
            bool designated = board == home
                           && ((key->label && streq (key->label, label))
                               || (key->id_len == wrap->id_len && !memcmp (key->id, wrap->id, wrap->id_len)));
            bool copy = !designated && s_wrap_key_is (wrap, key->key_type, key->modulus, key->modulus_len,
                                                      key->public_exponent, key->public_exponent_len);
            char hex [2 * CS_KEY_ID_MAX + 1];
            cs_hex_encode (key->id, key->id_len, hex);
            if (copy && board->tenant) {
                zsys_error ("keystore: master key: board %s holds a copy of the wrapping key '%s' of "
                            "board %s (CKA_ID %s), a client key of tenant %s there: remove that copy, "
                            "or wrap the master key with a key of its own", board->name, label,
                            home->name, hex, board->tenant);
                rc = -1;
            }
            else
            if (designated || copy) {
                if (board_key_reserve (board, k))
                    rc = -1;
                zsys_info ("keystore: master key: key '%s' (CKA_ID %s) of board %s is reserved for "
                           "unwrapping the master key: no client lists or uses it",
                           key->label ? key->label : "", hex, board->name);
            }
        }
    }
    return rc;
}

/*  A keystore row (of any tenant) holding the wrapping key's private key
 *  would give that tenant the master key: an error line each and -1 (the
 *  broker does not start).  */
static int
s_wrap_key_not_in_keystore (server_t *self, const board_t *home, const cs_key_info_t *wrap)
{
    char **tenants = keystore_tenant_list (self->keystore);
    int rc = tenants ? 0 : -1;
    for (size_t t = 0; tenants && tenants [t]; t++) {
        Cs__KeyInfo **keys = NULL;
        size_t n = 0;
        if (keystore_key_list (self->keystore, tenants [t], &keys, &n))
            rc = -1;
        for (size_t i = 0; i < n; i++) {
            const Cs__KeyInfo *key = keys [i];
            if (key->has_private && s_wrap_key_is (wrap, key->key_type, key->modulus.data, key->modulus.len,
                                                   key->public_exponent.data, key->public_exponent.len)) {
                zsys_error ("keystore: master key: key %s of tenant %s is the wrapping key '%s' of board "
                            "%s: a client of that tenant could unwrap the master key; remove that key",
                            key->ref, tenants [t], self->config->master_key_label, home->name);
                rc = -1;
            }
            cs__key_info__free_unpacked (keys [i], NULL);
        }
        free (keys);
        free (tenants [t]);
    }
    free (tenants);
    return rc;
}

/*  Gets the master key (file or board-wrapped) and opens the keystore
 *  with the sealed counter file beside the master key file (or the
 *  wrapped one: keystore_counter_path); a wrong master key, a schema that
 *  is not authenticated or a rolled-back keystore is an E: line from
 *  keystore_open_counted and a failed start (cryptoserver-keystore(5)).
 *  A board-wrapped master key's wrapping key is then reserved for the
 *  broker (s_wrap_key_reserve, s_wrap_key_not_in_keystore).  */
static int
s_keystore_open (server_t *self)
{
    const broker_config_t *config = self->config;
    uint8_t key [KEYSTORE_MASTER_KEY_LEN];
    int rc = config->master_key_board ? s_unwrap_master_key (self, key)
           : keystore_master_key_read (config->master_key_file, key);
    if (rc)
        zsys_error ("keystore %s: no usable master key (%s)", config->keystore_name,
                    config->master_key_board ? "board-wrapped" : config->master_key_file);
    char *counter = rc ? NULL : keystore_counter_path (config->master_key_board ? config->master_key_wrapped
                                                                                 : config->master_key_file);
    if (rc == 0 && (!counter || !(self->keystore = keystore_open_counted (config->keystore_path, key, counter))))
        rc = -1;
    free (counter);
    OPENSSL_cleanse (key, sizeof key);
    board_t *home = NULL;
    const cs_key_info_t *wrap = rc == 0 && config->master_key_board ? s_wrap_key_find (self, &home) : NULL;
    if (wrap && (s_wrap_key_reserve (self, home, wrap) | s_wrap_key_not_in_keystore (self, home, wrap)))
        rc = -1;
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

/*  The metrics registry (always: recording costs a few atomic adds) and,
 *  with broker/metrics, its HTTP endpoint.  */
static int
s_metrics_start (server_t *self)
{
    const char *names [BROKER_MAX_BOARDS];
    for (size_t b = 0; b < self->n_boards; b++)
        names [b] = self->boards [b]->name;
    if (!(self->metrics = metrics_new (names, self->n_boards)))
        return -1;
    if (!self->config->metrics_url)
        return 0;
    self->metrics_http = metrics_http_new (self->metrics, self->config->metrics_url,
                                           self->config->metrics_public, self->config->metrics_token);
    return self->metrics_http ? 0 : -1;
}

/*  Counts the keystore's tenants once, at start, into self->n_tenants (a
 *  tenant added later counts from the next start), not counting the
 *  broker's own (@pool, which holds the key pool's sealed keys once a broker
 *  has stored them: pool_store_reserved); 0 when they cannot be listed.
 *  The fast lane's share and broker/worker-nice auto both go by it.
 *  Returns 0.  */
static int
s_tenants_count (server_t *self)
{
    char **tenants = keystore_tenant_list (self->keystore);
    for (size_t t = 0; tenants && tenants [t]; t++) {
        self->n_tenants += !pool_store_reserved (tenants [t]);
        free (tenants [t]);
    }
    free (tenants);
    return 0;
}

static int
s_frontend_start (server_t *self)
{
    snprintf (self->backend, sizeof self->backend, "inproc://cs-backend-%p", (void *) self);
    size_t workers = 0;
    for (size_t b = 0; b < self->n_boards; b++)
        workers += (size_t) self->boards [b]->threads;
    if (!(self->health = health_new (self->n_boards, workers)))
        return -1;
    self->args = (frontend_args_t) { self->config, self->boards, self->n_boards, self->backend,
                                     self->keystore };
    self->args.metrics = self->metrics;
    self->args.health = self->health;
    self->args.one_tenant = self->n_tenants == 1;
    self->frontend = zactor_new (frontend_actor, &self->args);
    char *endpoint = self->frontend ? zstr_recv (self->frontend) : NULL;
    if (endpoint && *endpoint) {
        self->endpoint = endpoint;
        return 0;
    }
    zstr_free (&endpoint);
    return -1;
}

/*  The workers' nice steps below the reactor (broker_config_worker_nice):
 *  for "auto", from the number of the keystore's tenants at start.  Logs
 *  the choice.  */
static int
s_worker_nice (server_t *self)
{
    bool counted = self->config->worker_nice == BROKER_WORKER_NICE_AUTO;
    int nice = broker_config_worker_nice (self->config, self->n_tenants);
    if (counted)
        zsys_info ("workers: %d nice steps below the reactor (broker/worker-nice auto, %zu tenants)", nice,
                   self->n_tenants);
    else
        zsys_info ("workers: %d nice steps below the reactor (broker/worker-nice)", nice);
    return nice;
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
    int nice = s_worker_nice (self);
    for (size_t b = 0; b < self->n_boards; b++)
        for (int t = 0; t < self->boards [b]->threads; t++) {
            worker_t *worker = worker_new (self->boards [b], self->n_workers, self->backend, self->metrics,
                                           self->health, nice);
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
    if (s_boards_open (self) || s_keystore_open (self) || s_tenants_count (self) || s_auth_start (self, verbose)
    ||  s_metrics_start (self) || s_frontend_start (self) || s_workers_start (self)
    ||  (party_configured (config) && !(self->party = party_new (config, self->keystore))))
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

const char *
server_metrics_url (server_t *self)
{
    return self->metrics_http ? metrics_http_url (self->metrics_http) : NULL;
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

/*  The board of worker `worker` (workers are numbered in board order).  */
static size_t
s_worker_board (server_t *self, size_t worker)
{
    size_t b = 0;
    for (size_t first = 0; b < self->n_boards; b++) {
        if (worker < first + (size_t) self->boards [b]->threads)
            break;
        first += (size_t) self->boards [b]->threads;
    }
    return b;
}

/*  Stops every worker while the frontend still runs: a worker in a call
 *  that overruns its time limit is abandoned by the frontend (health.h),
 *  and is then left behind here (its board marked in stuck_board).  */
static void
s_workers_stop (server_t *self, bool *stuck_board)
{
    for (size_t i = 0; i < self->n_workers; i++)
        worker_stop (self->workers [i]);
    size_t left = self->n_workers;
    int64_t grace_end = zclock_mono () + 1000;     /* a lost call may be about to return */
    while (left) {
        left = 0;
        for (size_t i = 0; i < self->n_workers; i++) {
            if (!self->workers [i])
                continue;
            if (worker_stopped (self->workers [i], 0))
                worker_destroy (&self->workers [i]);
            else
            if (self->health && health_worker_lost (self->health, i) && zclock_mono () > grace_end) {
                size_t b = s_worker_board (self, i);
                zsys_warning ("board %s: worker %zu is stuck in a driver call; the broker stops without it",
                              b < self->n_boards ? self->boards [b]->name : "?", i);
                worker_abandon (&self->workers [i]);
                if (stuck_board && b < self->n_boards)
                    stuck_board [b] = true;
                self->stuck++;
            }
            else
                left++;
        }
        if (left)
            zclock_sleep (20);
    }
}

void
server_destroy (server_t **self_p)
{
    server_t *self = self_p ? *self_p : NULL;
    if (!self)
        return;
    metrics_http_destroy (&self->metrics_http);
    bool *stuck_board = calloc (self->n_boards + 1, sizeof (bool));
    s_workers_stop (self, stuck_board);
    zactor_destroy (&self->frontend);
    zactor_destroy (&self->auth);
    party_destroy (&self->party);           /* issue #24: the shared-key party service */
    keystore_destroy (&self->keystore);
    for (size_t i = 0; i < self->n_boards; i++)
        if (!stuck_board || !stuck_board [i])
            board_destroy (&self->boards [i]);      /* a stuck thread still runs in the others */
    free (stuck_board);
    if (!self->stuck)
        health_destroy (&self->health);
    free (self->workers);
    free (self->boards);
    if (!self->stuck)
        metrics_destroy (&self->metrics);       /* a stuck worker records into it when it returns */
    zstr_free (&self->endpoint);
    if (self->stuck)
        server_stuck_workers = self->stuck;
    free (self);
    *self_p = NULL;
}
