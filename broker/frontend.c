/*  frontend.c — the frontend actor: client ROUTER, allow-list, requests,
 *  work items to workers and replies back (the paper's Figure 3), and the
 *  jobs cheap enough to answer here (hello, key lists from the cache).  It
 *  never blocks (DESIGN.md §5): PIN checks, keystore reads and writes and
 *  the descriptions of generated keys go to the slow pool (slow_jobs.h)
 *  and rejoin the request when done; keystore keys and tenant rows come
 *  from its cache (ks_cache.h) once read.  Key generation runs on workers
 *  (or comes from the pre-generated pool).  */
#include <dirent.h>
#include <inttypes.h>
#include <openssl/crypto.h>
#include <openssl/objects.h>
#include <openssl/sha.h>
#include <openssl/x509.h>
#include "board_watch.h"
#include "cross_check.h"
#include "client_load.h"
#include "cs_pin.h"
#include "cs_util.h"
#include "cs_wire.h"
#include "frontend.h"
#include "clients_watch.h"
#include "key_info.h"
#include "keyjobs.h"
#include "ks_cache.h"
#include "ks_watch.h"
#include "modexp_job.h"
#include "symjobs.h"
#include "pool.h"
#include "pool_store.h"
#include "scheduler.h"
#include "slow_jobs.h"
#include "ticket.h"

#define S_CLIENTS_RELOAD_MS 2000        /* allow-list re-read period without inotify */
#define S_ZAP_DOMAIN "cryptoserver"
#define S_REF_MAX 128                   /* bytes of a ref (CS_WIRE_MAX_REF) */
/*  A job's result while it waits for the slow pool: never sent (the request
 *  is answered only when no job is pending), never a PKCS#11 value.  */
#define S_CKR_PENDING (CKR_VENDOR_DEFINED | 0x5105u)

bool frontend_verbose = false;
size_t frontend_max_reply = CS_WIRE_MAX_REPLY;

/*  One entry of the allow-list (clients.d).  */
typedef struct {
    char *name;
    char *tenant;                   /* NULL: none, its requests are refused */
} s_client_t;

/*  The per-job storage of a request: its result and what the result points to.  */
typedef struct {
    Cs__Result result;
    work_item_t item;
    Cs__HelloResult hello;
    Cs__LoginResult login;
    Cs__ListKeysResult keys;
    Cs__GenerateKeyPairResult generated;
    Cs__ImportKeyResult imported;
    Cs__KeyResult key_result;
    Cs__KeyInfo *info;              /* owned: a key made or changed by the job */
    Cs__KeyInfo **listed;           /* owned: keystore rows of a key list */
    size_t n_listed;
    Cs__KeyInfo *public_view;       /* owned array of shallow copies: a key list
                                       without a login (s_list_public_view) */
    unsigned char *private_pkcs8;   /* owned: a generated session key, wiped */
    size_t private_pkcs8_len;
    char ref [36];                  /* a resident key's ref while it is generated */
    unsigned char ticket [TICKET_LEN];
    objjobs_out_t objects;          /* owned: what an object job made (objjobs.h) */
} s_slot_t;

/*  One request in flight: answered once, when pending drops to 0.  */
typedef struct {
    zframe_t *identity;             /* ROUTER routing id of the client */
    Cs__Request *req;
    char *client_key;               /* Z85 public key, "" on plaintext */
    const char *client_name;        /* owned by the allow-list copy below */
    char *name_copy;
    char *tenant;                   /* the client's tenant name */
    uint32_t version;
    int64_t deadline;               /* cs_clock_ms () */
    bool ticket_ok;                 /* a valid CKU_USER ticket came with it */
    bool so_ok;                     /* a valid CKU_SO ticket came with it */
    bool renewed;                   /* Reply.ticket: renewed_ticket replaces the request's */
    unsigned char renewed_ticket [TICKET_LEN];
    s_slot_t *slots;
    Cs__Result **results;
    size_t pending;
    client_load_t *load;            /* charged with `charged` bytes of `load_key`, or NULL */
    char *load_key;
    size_t charged;
    int64_t received_ns;            /* metrics_now_ns () when it arrived */
    metrics_client_t *metrics_client;   /* its in-flight counter, once it has a job out */
    keystore_tenant_t tenant_state; /* the tenant's row (cache or slow pool), when has_state */
    bool has_state;
    bool keystore_down;             /* its tenant row could not be read: the database is unreachable */
} s_request_t;

/*  What a job that needs a login answers without one: CKR_USER_NOT_LOGGED_IN,
 *  or CKR_DEVICE_ERROR when the ticket could not be checked because the
 *  keystore database is unreachable (the login is not over:
 *  docs/CONTRACTS.md "Keystore database").  */
static CK_RV
s_no_login_rv (const s_request_t *request)
{
    return request->keystore_down ? CKR_DEVICE_ERROR : CKR_USER_NOT_LOGGED_IN;
}

/*  A resident board key as listed to its tenant: the only board keys a
 *  client job may name (docs/CONTRACTS.md "Key refs and routing").  */
typedef struct {
    Cs__KeyInfo info;
    const char *tenant;             /* the board's tenant (owned by the board) */
    uint64_t boards;                /* the boards of that tenant holding it (bit per board) */
} s_board_key_t;

typedef struct {
    const frontend_args_t *args;
    const broker_config_t *config;
    keystore_t *ks;                 /* owned by the server; used by this thread only */
    zsock_t *pipe;
    zsock_t *router;
    zsock_t *backend;
    zloop_t *loop;
    scheduler_t *scheduler;
    board_watch_t *watch_boards;    /* time limits, faults, probes (board_watch.h) */
    cross_check_t *cross;           /* broker/cross-check (cross_check.h) */
    size_t n_workers;
    zhashx_t *clients;              /* Z85 key -> s_client_t */
    char *default_tenant;           /* first tenant by name, for plaintext clients only */
    bool reading;                   /* the router is being polled */
    bool draining;
    bool drained;                   /* DRAINED was sent */
    size_t in_flight;               /* requests waiting for items */
    size_t background_out;          /* background items with workers (pool refills, clean-ups) */
    Cs__MechanismInfo *mechs;       /* Hello: union over boards */
    Cs__MechanismInfo **mech_ptrs;
    size_t n_mechs;
    keyjobs_rsa_range_t rsa_range;  /* what RSA generation accepts (cs_mech_rsa_gen_range) */
    s_board_key_t *board_keys;      /* ListKeys: resident keys, one per (tenant, CKA_ID) */
    size_t n_board_keys;
    Cs__Attribute resident_attrs [8];   /* their private object's flags */
    Cs__Attribute *resident_attr_ptrs [8];
    size_t n_resident_attrs;
    pool_t *pool;                   /* pre-generated RSA keys, or NULL */
    size_t pool_max_running;        /* refills at once */
    unsigned pool_wait_bits;        /* "POOL-WAIT": reply when this size ... */
    size_t pool_wait_count;         /* ... has this many keys */
    bool pool_waiting;
    int home_board;                 /* keys/home board index, -1 = keystore */
    char serial [17];
    char *endpoint;
    client_load_t *load;            /* bytes queued per client (broker/max-client-bytes) */
    slow_pool_t *slow;              /* PIN checks, keystore reads and writes (slow_jobs.h) */
    ks_cache_t *cache;              /* keystore keys and tenant rows (keystore/key-cache) */
    ks_watch_t *watch;              /* changes of the keystore file, or NULL: nothing cached */
    clients_watch_t *clients_watch; /* changes of clients.d, or NULL: re-read on a timer */
    keystore_listener_t *listener;  /* PostgreSQL keystore: other writers' commits (instead of watch) */
    uint64_t listener_seen;         /* keystore_listener_changes when the cache was last dropped */
} s_frontend_t;

static void s_pool_refill (s_frontend_t *self);
static void s_background_done (s_frontend_t *self, work_item_t *item);

/* ------------------------------------------------------------------ */
/*  Allow-list                                                         */

static void
s_client_destroy (s_client_t **self_p)
{
    if (*self_p) {
        free ((*self_p)->name);
        free ((*self_p)->tenant);
        free (*self_p);
        *self_p = NULL;
    }
}

/*  Loads one client cert into map; skips files that are not certs.  */
static void
s_client_load (s_frontend_t *self, zhashx_t *map, const char *dir, const char *file)
{
    char path [4096];
    snprintf (path, sizeof path, "%s/%s", dir, file);
    zcert_t *cert = zcert_load (path);
    if (!cert)
        return;
    s_client_t *client = calloc (1, sizeof *client);
    const char *name = zcert_meta (cert, "name");
    const char *tenant = zcert_meta (cert, "tenant");
    if (client) {
        client->name = strdup (name ? name : file);
        /*  A tenant the broker reserves (pool_store.h) serves no client.  */
        client->tenant = tenant && *tenant && !pool_store_reserved (tenant) ? strdup (tenant) : NULL;
        if (zhashx_insert (map, zcert_public_txt (cert), client))
            s_client_destroy (&client);
    }
    zcert_destroy (&cert);
}

/*  Logs who joined or left the allow-list between two loads.  */
static void
s_clients_diff (zhashx_t *old, zhashx_t *fresh)
{
    for (s_client_t *c = zhashx_first (fresh); c; c = zhashx_next (fresh))
        if (old && zhashx_lookup (old, zhashx_cursor (fresh)))
            ;
        else
        if (c->tenant)
            zsys_info ("client %s (tenant %s) allowed: %s", c->name, c->tenant,
                       (const char *) zhashx_cursor (fresh));
        else
            zsys_warning ("client %s has no tenant in its certificate: its requests are refused: %s",
                          c->name, (const char *) zhashx_cursor (fresh));
    for (s_client_t *c = old ? zhashx_first (old) : NULL; c; c = zhashx_next (old))
        if (!zhashx_lookup (fresh, zhashx_cursor (old)))
            zsys_info ("client %s removed from the allow-list: %s", c->name,
                       (const char *) zhashx_cursor (old));
}

/*  Re-reads clients.d into a fresh map and swaps it in.  */
static void
s_clients_reload (s_frontend_t *self)
{
    const char *dir = self->config->clients_dir;
    DIR *handle = opendir (dir);
    if (!handle) {
        zsys_warning ("allow-list: cannot read %s; keeping the previous list", dir);
        return;
    }
    zhashx_t *map = zhashx_new ();
    zhashx_set_destructor (map, (zhashx_destructor_fn *) s_client_destroy);
    for (struct dirent *entry = readdir (handle); entry; entry = readdir (handle)) {
        size_t len = strlen (entry->d_name);
        if (entry->d_name [0] == '.' || (len > 7 && streq (entry->d_name + len - 7, "_secret")))
            continue;
        s_client_load (self, map, dir, entry->d_name);
    }
    closedir (handle);
    s_clients_diff (self->clients, map);
    zhashx_destroy (&self->clients);
    self->clients = map;
}

/*  Re-reads the default tenant: the first tenant of the keystore by name.  */
static void
s_default_tenant_reload (s_frontend_t *self)
{
    char **names = keystore_tenant_list (self->ks);
    size_t skip = 0;
    while (names && names [skip] && pool_store_reserved (names [skip]))
        skip++;
    char *first = names && names [skip] ? strdup (names [skip]) : NULL;
    for (size_t i = 0; names && names [i]; i++)
        free (names [i]);
    free (names);
    free (self->default_tenant);
    self->default_tenant = first;
}

static int
s_on_clients_timer (zloop_t *loop, int timer_id, void *arg)
{
    s_clients_reload (arg);
    return 0;
}

/*  Re-reads clients.d when it changed (clients_watch.h): called before
 *  every request's sender is looked up, and when the watch is readable.  */
static void
s_clients_check (s_frontend_t *self)
{
    if (self->clients_watch && clients_watch_changed (self->clients_watch))
        s_clients_reload (self);
}

static int
s_on_clients_watch (zloop_t *loop, zmq_pollitem_t *item, void *arg)
{
    s_clients_check (arg);
    return 0;
}

/* ------------------------------------------------------------------ */
/*  Replies                                                            */

/*  Sends reply to the client at identity (kept by the caller).  The frame
 *  is zero-copy with a cleansing free function (cs_wire_frame_free): it may
 *  hold plaintexts, ECDH secrets or generated private keys, and libzmq
 *  wipes it when it is done with it.  Returns 0; -1 when out of memory;
 *  -2, sending nothing, when the frame would be over frontend_max_reply.  */
static int
s_send_reply (s_frontend_t *self, zframe_t *identity, Cs__Reply *reply)
{
    size_t size = 0;
    uint8_t *data = cs_wire_encode (&reply->base, &size);
    zmq_msg_t payload;
    if (!data) {
        zsys_error ("out of memory encoding a reply");
        return -1;
    }
    if (size > frontend_max_reply) {
        cs_wire_frame_free (data, (void *) (uintptr_t) size);
        return -2;
    }
    if (zmq_msg_init_data (&payload, data, size, cs_wire_frame_free, (void *) (uintptr_t) size)) {
        cs_wire_frame_free (data, (void *) (uintptr_t) size);
        return -1;
    }
    zframe_send (&identity, self->router, ZFRAME_MORE | ZFRAME_REUSE);
    if (zmq_msg_send (&payload, zsock_resolve (self->router), 0) < 0)
        zmq_msg_close (&payload);               /* calls cs_wire_frame_free */
    return 0;
}

/*  Sends a request-level error: no results, rv and a reason (no secrets).  */
static void
s_send_error (s_frontend_t *self, zframe_t *identity, uint64_t request_id, CK_RV rv,
              const char *error)
{
    Cs__Reply reply = CS__REPLY__INIT;
    reply.version = CS_PROTOCOL_VERSION;
    reply.request_id = request_id;
    reply.rv = rv;
    reply.error = (char *) error;
    s_send_reply (self, identity, &reply);
}

/*  Wipes the secrets a request carries (per-request keys, imported keys,
 *  PINs) before protobuf-c frees it: they never outlive the request.  */
static void
s_request_wipe (Cs__Request *req)
{
    for (size_t i = 0; i < req->n_jobs; i++) {
        const Cs__Job *job = req->jobs [i];
        ProtobufCBinaryData secrets [2] = { { 0 }, { 0 } };
        switch (job->kind_case) {
            case CS__JOB__KIND_SIGN: secrets [0] = job->sign->key_pkcs8; break;
            case CS__JOB__KIND_DECRYPT: secrets [0] = job->decrypt->key_pkcs8; break;
            case CS__JOB__KIND_DERIVE: secrets [0] = job->derive->key_pkcs8; break;
            case CS__JOB__KIND_IMPORT_KEY: secrets [0] = job->import_key->private_pkcs8; break;
            case CS__JOB__KIND_LOGIN: secrets [0] = job->login->pin; break;
            case CS__JOB__KIND_INIT_PIN: secrets [0] = job->init_pin->pin; break;
            case CS__JOB__KIND_SET_PIN:
                secrets [0] = job->set_pin->old_pin;
                secrets [1] = job->set_pin->new_pin;
                break;
            default: break;
        }
        for (size_t k = 0; k < 2; k++)
            if (secrets [k].data)
                OPENSSL_cleanse (secrets [k].data, secrets [k].len);
    }
    modexp_job_wipe (req);
    symjob_wipe (req);
}

/*  Frees what one slot owns, wiping key material.  */
static void
s_slot_free (s_slot_t *slot)
{
    work_item_t *item = &slot->item;
    if (item->out) {
        OPENSSL_cleanse (item->out, item->out_len);
        free (item->out);
    }
    if (item->material) {
        OPENSSL_cleanse (item->material, item->material_len);
        free (item->material);
    }
    cs_key_info_free_members (&item->generated);
    if (slot->private_pkcs8) {
        OPENSSL_cleanse (slot->private_pkcs8, slot->private_pkcs8_len);
        free (slot->private_pkcs8);
    }
    if (slot->info)
        cs__key_info__free_unpacked (slot->info, NULL);
    for (size_t i = 0; i < slot->n_listed; i++)
        cs__key_info__free_unpacked (slot->listed [i], NULL);
    free (slot->listed);
    free (slot->public_view);
    free (slot->keys.keys);
    objjobs_out_free (&slot->objects);
    OPENSSL_cleanse (slot->ticket, TICKET_LEN);
}

static void
s_request_destroy (s_request_t **self_p)
{
    s_request_t *self = *self_p;
    if (!self)
        return;
    for (size_t i = 0; self->slots && i < self->req->n_jobs; i++)
        s_slot_free (&self->slots [i]);
    free (self->slots);
    free (self->results);
    if (self->req) {
        s_request_wipe (self->req);
        cs__request__free_unpacked (self->req, NULL);
    }
    if (self->load)
        client_load_release (self->load, self->load_key, self->charged);
    free (self->load_key);
    zframe_destroy (&self->identity);
    OPENSSL_cleanse (self->renewed_ticket, TICKET_LEN);
    free (self->client_key);
    free (self->name_copy);
    free (self->tenant);
    free (self);
    *self_p = NULL;
}

/*  True when a log line about this request's client over `limit` (a static
 *  name) is due (at most one a minute per client and limit: client_load.h).  */
static bool
s_log_due (s_frontend_t *self, s_request_t *request, const char *limit)
{
    const char *client = request->load_key ? request->load_key : request->client_key;
    return !client || client_load_log_due (self->load, client, limit, cs_clock_ms ());
}

/*  Logs (rate-limited) a key job refused by a bound of keyjobs.h: `why`
 *  is the slow job's keyjobs_limit_problem, or NULL.  */
static void
s_key_limit_log (s_frontend_t *self, s_request_t *request, CK_RV rv, const char *why)
{
    if (why && s_log_due (self, request, why))
        zsys_warning ("client %s (tenant %s): key refused: %s: answered with %s", request->client_name,
                      request->tenant, why, cs_rv_name (rv));
}

/*  Answers the request with all its results, in job order, and frees it.  */
static void
s_request_answer (s_frontend_t *self, s_request_t **request_p)
{
    s_request_t *request = *request_p;
    Cs__Reply reply = CS__REPLY__INIT;
    reply.version = request->version;
    reply.request_id = request->req->request_id;
    reply.rv = CKR_OK;
    reply.n_results = request->req->n_jobs;
    reply.results = request->results;
    if (request->renewed)
        reply.ticket = (ProtobufCBinaryData) { TICKET_LEN, request->renewed_ticket };
    if (s_send_reply (self, request->identity, &reply) == -2) {
        if (s_log_due (self, request, "max-reply"))
            zsys_warning ("client %s (tenant %s): reply to request %" PRIu64 " over %zu bytes: "
                          "answered with CKR_DEVICE_MEMORY", request->client_name, request->tenant,
                          reply.request_id, frontend_max_reply);
        s_send_error (self, request->identity, reply.request_id, CKR_DEVICE_MEMORY,
                      "reply over the module's frame limit (CS_WIRE_MAX_REPLY)");
    }
    s_request_destroy (request_p);
}

/*  While draining: DRAINED (once) when no request and no background item
 *  is out.  A background item still with a worker when the workers stop
 *  would never come back, and its key material would leak.  */
static void
s_drained_check (s_frontend_t *self)
{
    if (self->draining && !self->drained && self->in_flight == 0 && self->background_out == 0) {
        self->drained = true;
        zstr_send (self->pipe, "DRAINED");
    }
}

/*  Drops one pending count; the last one answers the request.  */
static void
s_request_release (s_frontend_t *self, s_request_t *request, bool counted)
{
    assert (request->pending > 0);
    if (--request->pending > 0)
        return;
    s_request_answer (self, &request);
    if (!counted)
        return;
    self->in_flight--;
    s_drained_check (self);
}

/* ------------------------------------------------------------------ */
/*  Work items                                                         */

static void s_generate_finish (s_frontend_t *self, s_request_t *request, s_slot_t *slot);

/*  Counts the request's jobs out with workers (cryptoserver_inflight_jobs):
 *  delta +1 when one goes out, -1 when it is back.  */
static void
s_metrics_inflight (s_frontend_t *self, s_request_t *request, long delta)
{
    if (request && !request->metrics_client)
        request->metrics_client = metrics_client (self->args->metrics, request->client_name, request->tenant);
    if (request)
        metrics_inflight_add (request->metrics_client, delta);
}

/*  Wipes and frees the key material an item carried, or unpins the cached
 *  key it used.  */
static void
s_item_wipe_material (s_frontend_t *self, work_item_t *item)
{
    ks_cache_key_release (self->cache, (ks_key_t **) &item->cached);
    if (item->material) {
        OPENSSL_cleanse (item->material, item->material_len);
        free (item->material);
        item->material = NULL;
        item->material_len = 0;
    }
    item->key.pkcs8 = NULL;
    item->key.pkcs8_len = 0;
}

static void s_item_rerun (s_frontend_t *self, work_item_t *item);

/*  Stores an item's result in its request's slot and releases it;
 *  background items (no request) go to s_background_done.  A member of a
 *  cross-check pair goes through cross_check_back first: answered once the
 *  pair is decided, or re-run on a third board.  */
static void
s_item_finish (s_frontend_t *self, work_item_t *item)
{
    bool third = false;
    if (item->cross && !(item = cross_check_back (self->cross, item, &third)))
        return;                             /* the other run of a cross-check is still out */
    if (third) {
        s_item_rerun (self, item);          /* two boards disagree: a third decides */
        return;
    }
    s_request_t *request = item->request;
    if (!request) {
        s_background_done (self, item);
        return;
    }
    s_slot_t *slot = &request->slots [item->index];
    Cs__Result *result = &slot->result;
    s_metrics_inflight (self, request, -1);
    client_load_jobs_add (self->load, request->load_key, -1);
    s_item_wipe_material (self, item);
    if (item->kind == WORK_GENERATE || item->kind == WORK_GENERATE_RESIDENT)
        s_generate_finish (self, request, slot);        /* goes on in the slow pool, or failed */
    else {
        result->rv = item->rv;
        if (item->rv == CKR_OK) {
            result->kind_case = CS__RESULT__KIND_DATA;
            result->data.data = item->out;
            result->data.len = item->out_len;
        }
    }
    s_request_release (self, request, true);
}

static void s_give (s_frontend_t *self, size_t worker, work_item_t *item);

/*  Answers an item that did not run (or whose result is dropped) with
 *  CKR_DEVICE_ERROR; `expired`: its deadline passed (counted so).  */
static void
s_item_fail (s_frontend_t *self, work_item_t *item, bool expired)
{
    if (item->out) {
        OPENSSL_cleanse (item->out, item->out_len);
        free (item->out);
    }
    item->out = NULL;
    item->out_len = 0;
    item->rv = CKR_DEVICE_ERROR;
    if (expired)
        metrics_item_expired (self->args->metrics, item);
    s_item_finish (self, item);
}

/*  Re-runs an item whose board failed it on another board that may run it
 *  (jobs are stateless, DESIGN.md §1), or answers it with CKR_DEVICE_ERROR
 *  when there is none or its deadline passed (docs/CONTRACTS.md).  */
static void
s_item_rerun (s_frontend_t *self, work_item_t *item)
{
    size_t worker = 0;
    if (cross_check_is_twin (item)) {       /* a twin is not re-run: the check is skipped */
        s_item_fail (self, item, false);
        return;
    }
    item->tried |= UINT64_C (1) << item->board;
    item->wrong = false;
    if (item->out) {
        OPENSSL_cleanse (item->out, item->out_len);
        free (item->out);
        item->out = NULL;
        item->out_len = 0;
    }
    cs_key_info_free_members (&item->generated);
    scheduler_outcome_t outcome = cs_clock_ms () > item->deadline ? SCHEDULER_NO_BOARD
                                : scheduler_submit (self->scheduler, item, &worker);
    if (outcome == SCHEDULER_ASSIGNED || outcome == SCHEDULER_QUEUED)
        metrics_rerun (self->args->metrics);
    if (outcome == SCHEDULER_ASSIGNED)
        s_give (self, worker, item);
    else
    if (outcome != SCHEDULER_QUEUED)
        s_item_fail (self, item, false);
}

/*  Answers queued items that no board in rotation may run any more.  */
static void
s_fail_stranded (s_frontend_t *self)
{
    for (work_item_t *item; (item = scheduler_take_stranded (self->scheduler)); )
        s_item_fail (self, item, false);
}

/*  Hands item to worker, or fails it unrun if its deadline passed (and then
 *  offers the worker the next waiting item).  */
static void
s_give (s_frontend_t *self, size_t worker, work_item_t *item)
{
    while (item && cs_clock_ms () > item->deadline) {
        item->rv = CKR_DEVICE_ERROR;
        metrics_item_expired (self->args->metrics, item);
        if (frontend_verbose)
            zsys_debug ("job %zu of request %" PRIu64 ": deadline passed before a worker took it",
                        item->index, ((s_request_t *) item->request)->req->request_id);
        s_item_finish (self, item);
        item = scheduler_worker_ready (self->scheduler, worker);
    }
    if (item) {
        if (!item->request)
            self->background_out++;
        item->given_ns = metrics_now_ns ();
        board_watch_given (self->watch_boards, worker, item);
        zstr_sendfm (self->backend, "w%zu", worker);
        zsock_send (self->backend, "p", item);
        work_item_t *twin = cross_check_twin (self->cross, item);
        scheduler_outcome_t outcome = twin ? scheduler_submit (self->scheduler, twin, &worker) : SCHEDULER_QUEUED;
        if (outcome == SCHEDULER_ASSIGNED)
            s_give (self, worker, twin);    /* both run at once (cross_check.h) */
        else
        if (outcome != SCHEDULER_QUEUED)
            cross_check_unrun (self->cross, twin);
    }
}

/*  Stops reading requests when the broker drains.  A full queue
 *  (broker/max-queue) or a client at its caps does not stop the reading:
 *  such requests wait in their client's backlog (s_request_admit), so only
 *  the flooding client is slowed (issue #9).  */
static void
s_flow_control (s_frontend_t *self)
{
    metrics_queue_depth (self->args->metrics, scheduler_queued (self->scheduler),
                         scheduler_queued_low (self->scheduler));
    if (self->reading && self->draining) {
        zloop_reader_end (self->loop, self->router);
        self->reading = false;
    }
}

static void s_backlog_run (s_frontend_t *self);

/*  Jobs came back: deferred requests whose client is under its cap start,
 *  round robin across clients, while the queue has room.  */
static void
s_flow_resume (s_frontend_t *self)
{
    s_backlog_run (self);
    metrics_queue_depth (self->args->metrics, scheduler_queued (self->scheduler),
                         scheduler_queued_low (self->scheduler));
}

/*  A worker is ready ("ip" id, NULL) or returns an item ("ip" id, item).  */
static int
s_on_backend (zloop_t *loop, zsock_t *reader, void *arg)
{
    s_frontend_t *self = arg;
    char *identity = NULL;
    int id = -1;
    work_item_t *item = NULL;
    if (zsock_recv (self->backend, "sip", &identity, &id, &item) || id < 0
    ||  (size_t) id >= self->n_workers) {
        zstr_free (&identity);
        return 0;
    }
    zstr_free (&identity);
    bool rerun = board_watch_back (self->watch_boards, (size_t) id, item);
    if (item) {
        scheduler_done (self->scheduler, item->board, item->rv != CKR_OK);
        scheduler_service (self->scheduler, item, item->service_ns);
        metrics_item_done (self->args->metrics, item,
                           item->request ? ((s_request_t *) item->request)->received_ns : 0);
        if (rerun)
            s_item_rerun (self, item);
        else
            s_item_finish (self, item);
    }
    s_give (self, (size_t) id, scheduler_worker_ready (self->scheduler, (size_t) id));
    if (rerun)
        s_fail_stranded (self);
    s_flow_resume (self);
    return 0;
}

/*  The reactor's sweep (every BOARD_WATCH_TICK_MS): calls over their time
 *  limit or deadline are abandoned (re-run or answered), queued items whose
 *  deadline passed are answered at once, boards whose back-off passed are
 *  probed (issue #9).  */
static int
s_on_watch_timer (zloop_t *loop, int timer_id, void *arg)
{
    (void) loop;
    (void) timer_id;
    s_frontend_t *self = arg;
    int64_t now = cs_clock_ms ();
    bool fault = false, stranded = false;
    for (work_item_t *item; (item = board_watch_overrun (self->watch_boards, now, &fault)); ) {
        item->rv = CKR_DEVICE_ERROR;            /* counted as a failed job of its board */
        scheduler_done (self->scheduler, item->board, true);
        metrics_item_done (self->args->metrics, item,
                           item->request ? ((s_request_t *) item->request)->received_ns : 0);
        if (fault) {
            s_item_rerun (self, item);
            stranded = true;
        }
        else
            s_item_fail (self, item, true);
    }
    for (work_item_t *item; (item = scheduler_take_expired (self->scheduler, now)); )
        s_item_fail (self, item, true);
    if (stranded)
        s_fail_stranded (self);
    uint64_t back = board_watch_probe (self->watch_boards, now);
    for (size_t b = 0; back; b++, back >>= 1) {
        size_t worker = 0;
        for (work_item_t *item; (back & 1) && (item = scheduler_board_kick (self->scheduler, b, &worker)); )
            s_give (self, worker, item);
    }
    s_flow_resume (self);
    return 0;
}

/* ------------------------------------------------------------------ */
/*  Routing: which boards may run a job                                */

/*  Boards that sign/decrypt with key material of key_type.  */
static uint64_t
s_material_boards (s_frontend_t *self, CK_KEY_TYPE key_type)
{
    uint64_t set = 0;
    for (size_t b = 0; b < self->args->n_boards; b++)
        if (board_takes_material (self->args->boards [b], key_type))
            set |= UINT64_C (1) << b;
    return set;
}

/*  Boards that run ECDH with resident keys (material false) or with EC key
 *  material (material true).  */
static uint64_t
s_derive_boards (s_frontend_t *self, bool material)
{
    uint64_t set = 0;
    for (size_t b = 0; b < self->args->n_boards; b++)
        if (board_derives (self->args->boards [b], material))
            set |= UINT64_C (1) << b;
    return set;
}

/*  Boards that generate key_type as material.  */
static uint64_t
s_generating_boards (s_frontend_t *self, CK_KEY_TYPE key_type)
{
    uint64_t set = 0;
    for (size_t b = 0; b < self->args->n_boards; b++)
        if (board_generates (self->args->boards [b], key_type, false))
            set |= UINT64_C (1) << b;
    return set;
}

/*  Boards that run raw modexp (CS_CAP_MODEXP).  */
static uint64_t
s_modexp_boards (s_frontend_t *self)
{
    uint64_t set = 0;
    for (size_t b = 0; b < self->args->n_boards; b++)
        if (board_modexps (self->args->boards [b]))
            set |= UINT64_C (1) << b;
    return set;
}

/*  Boards that run the job mechanism of a crypto item (board_runs).  */
static uint64_t
s_mech_boards (s_frontend_t *self, const work_item_t *item)
{
    const Cs__Job *job = item->job;
    const Cs__Mechanism *mech = item->kind == WORK_SIGN ? job->sign->mechanism
                              : item->kind == WORK_DECRYPT ? job->decrypt->mechanism : NULL;
    CK_MECHANISM_TYPE type = item->kind == WORK_DERIVE ? CKM_ECDH1_DERIVE : mech ? mech->type : 0;
    CK_FLAGS flag = item->kind == WORK_SIGN ? CKF_SIGN : item->kind == WORK_DECRYPT ? CKF_DECRYPT : CKF_DERIVE;
    uint64_t set = 0;
    for (size_t b = 0; b < self->args->n_boards; b++)
        if (board_runs (self->args->boards [b], type, flag))
            set |= UINT64_C (1) << b;
    return set;
}

/*  Index of the board called name, or -1.  */
static int
s_board_index (s_frontend_t *self, const char *name)
{
    for (size_t b = 0; b < self->args->n_boards; b++)
        if (streq (self->args->boards [b]->name, name))
            return (int) b;
    return -1;
}

/*  The modulus bits of an RSAPrivateKey (RFC 8017 A.1.2: SEQUENCE {
 *  version INTEGER, modulus INTEGER, ... }) read from its DER header, with
 *  no big-number parsing; 0 when it does not parse that far.  */
static unsigned
s_rsa_modulus_bits (const unsigned char *der, long len)
{
    const unsigned char *p = der, *end = der + len;
    long item = 0;
    int tag = 0, xclass = 0;
    if (ASN1_get_object (&p, &item, &tag, &xclass, len) & 0x80 || tag != V_ASN1_SEQUENCE)
        return 0;
    if (ASN1_get_object (&p, &item, &tag, &xclass, end - p) & 0x80 || tag != V_ASN1_INTEGER)
        return 0;
    p += item;                                  /* version */
    if (ASN1_get_object (&p, &item, &tag, &xclass, end - p) & 0x80 || tag != V_ASN1_INTEGER)
        return 0;
    while (item > 0 && *p == 0) {               /* leading zeros */
        p++;
        item--;
    }
    if (item <= 0)
        return 0;
    unsigned bits = (unsigned) (item - 1) * 8;
    for (unsigned top = *p; top; top >>= 1)
        bits++;
    return bits;
}

/*  The key type in a PKCS#8 key's algorithm identifier, and for RSA the
 *  modulus bits (*rsa_bits_p, 0 when unknown), without parsing the key
 *  itself; CKK_VENDOR_DEFINED when unknown or malformed.  */
static CK_KEY_TYPE
s_pkcs8_key_type (const uint8_t *der, size_t len, unsigned *rsa_bits_p)
{
    const unsigned char *p = der, *pk = NULL;
    int pk_len = 0;
    const ASN1_OBJECT *oid = NULL;
    PKCS8_PRIV_KEY_INFO *p8 = d2i_PKCS8_PRIV_KEY_INFO (NULL, &p, (long) len);
    int nid = p8 && PKCS8_pkey_get0 (&oid, &pk, &pk_len, NULL, p8) ? OBJ_obj2nid (oid) : NID_undef;
    bool rsa = nid == NID_rsaEncryption || nid == NID_rsassaPss;
    *rsa_bits_p = rsa ? s_rsa_modulus_bits (pk, pk_len) : 0;
    PKCS8_PRIV_KEY_INFO_free (p8);
    return rsa ? CKK_RSA : nid == NID_X9_62_id_ecPublicKey ? CKK_EC : nid == NID_ED25519 ? CKK_EC_EDWARDS
         : CKK_VENDOR_DEFINED;
}

/*  Copies a ref from the wire (bytes) into a C string; -1 if too long.  */
static int
s_ref_copy (ProtobufCBinaryData ref, char out [S_REF_MAX + 1])
{
    if (ref.len == 0 || ref.len > S_REF_MAX || memchr (ref.data, 0, ref.len))
        return -1;
    memcpy (out, ref.data, ref.len);
    out [ref.len] = 0;
    return 0;
}

/*  Submits a prepared item: given to a worker now, queued, or failed with
 *  `none_rv` when no board may run it.  Returns 0 when it is out.  A client
 *  item counts in its request's `pending` before it can be given: s_give
 *  finishes at once an item whose deadline has passed, and that must not
 *  answer (and free) the request while its jobs are still being routed.  */
static int
s_submit (s_frontend_t *self, work_item_t *item)
{
    s_request_t *request = item->request;
    size_t worker = 0;
    item->submitted_ns = metrics_now_ns ();
    item->tenant = request ? request->tenant : NULL;
    scheduler_outcome_t outcome = scheduler_submit (self->scheduler, item, &worker);
    if (outcome == SCHEDULER_NO_BOARD)
        return -1;
    if (outcome == SCHEDULER_NO_BOARD_UP)
        return -2;
    if (request) {
        request->pending++;
        client_load_jobs_add (self->load, request->load_key, 1);
    }
    s_metrics_inflight (self, request, 1);
    if (outcome == SCHEDULER_ASSIGNED)
        s_give (self, worker, item);
    return 0;
}

/* ------------------------------------------------------------------ */
/*  Sign and decrypt                                                   */

/*  A per-request key: any board that takes material of its type (and, for
 *  ECDH, derives with EC material).  An RSA key over CS_WIRE_MAX_RSA_BITS
 *  is CKR_KEY_SIZE_RANGE: its cost on a board grows with the cube of its
 *  size.  */
static CK_RV
s_route_per_request (s_frontend_t *self, s_request_t *request, work_item_t *item, ProtobufCBinaryData der)
{
    unsigned bits = 0;
    CK_KEY_TYPE type = s_pkcs8_key_type (der.data, der.len, &bits);
    if (type == CKK_VENDOR_DEFINED)
        return CKR_KEY_HANDLE_INVALID;
    if (bits > CS_WIRE_MAX_RSA_BITS) {
        if (s_log_due (self, request, "max-rsa-bits"))
            zsys_warning ("client %s (tenant %s): per-request RSA key of %u bits over the %d-bit limit: "
                          "answered with CKR_KEY_SIZE_RANGE", request->client_name, request->tenant, bits,
                          CS_WIRE_MAX_RSA_BITS);
        return CKR_KEY_SIZE_RANGE;
    }
    if (item->kind == WORK_DERIVE && type != CKK_EC)
        return CKR_KEY_TYPE_INCONSISTENT;
    item->key = (cs_key_t) { NULL, 0, der.data, der.len, NULL };
    item->bits = bits;
    item->boards = item->kind == WORK_DERIVE ? s_derive_boards (self, true) : s_material_boards (self, type);
    return item->boards ? CKR_OK : CKR_KEY_TYPE_INCONSISTENT;
}

/*  The resident key "board:<hex CKA_ID>" as listed to tenant, or NULL: a
 *  key on one of the tenant's boards, neither a keystore key kept there
 *  (its board label is a "ks:" ref of some tenant) nor a key the broker
 *  reserved (the master key's wrapping key).  Any other ref, whatever it
 *  names, is unknown to the tenant (issue #7).  id gets the CKA_ID
 *  (*id_len_p bytes).  */
static const s_board_key_t *
s_board_key_find (s_frontend_t *self, const char *tenant, const char *ref, unsigned char id [CS_KEY_ID_MAX],
                  size_t *id_len_p)
{
    long len = strncmp (ref, "board:", 6) == 0 ? cs_hex_decode (ref + 6, id, CS_KEY_ID_MAX) : -1;
    for (size_t i = 0; len > 0 && i < self->n_board_keys; i++) {
        const s_board_key_t *key = &self->board_keys [i];
        if (streq (key->tenant, tenant) && key->info.id.len == (size_t) len
        &&  memcmp (key->info.id.data, id, (size_t) len) == 0) {
            *id_len_p = (size_t) len;
            return key;
        }
    }
    return NULL;
}

/*  "board:<hex CKA_ID>": the tenant's boards holding that listed key.  */
static CK_RV
s_route_board_ref (s_frontend_t *self, s_request_t *request, work_item_t *item, const char *ref)
{
    size_t len = 0;
    const s_board_key_t *key = s_board_key_find (self, request->tenant, ref, item->id, &len);
    if (!key)
        return CKR_KEY_HANDLE_INVALID;
    item->key = (cs_key_t) { item->id, len, NULL, 0, NULL };
    item->bits = key->info.bits;
    item->boards = key->boards;
    if (item->boards && item->kind == WORK_DERIVE) {
        item->boards &= s_derive_boards (self, false);
        return item->boards ? CKR_OK : CKR_KEY_FUNCTION_NOT_PERMITTED;    /* no board derives */
    }
    return item->boards ? CKR_OK : CKR_KEY_HANDLE_INVALID;
}

/*  ECDH with a keystore key: an EC key whose private object has CKA_DERIVE
 *  TRUE (PKCS#11 2.40 §4.7: the default is FALSE).  */
static CK_RV
s_derive_permitted (const Cs__KeyInfo *info)
{
    if (info->key_type != CKK_EC)
        return CKR_KEY_TYPE_INCONSISTENT;
    for (size_t i = 0; i < info->n_private_attributes; i++)
        if (info->private_attributes [i]->type == CKA_DERIVE
        &&  info->private_attributes [i]->value_case == CS__ATTRIBUTE__VALUE_FLAG)
            return info->private_attributes [i]->flag ? CKR_OK : CKR_KEY_FUNCTION_NOT_PERMITTED;
    return CKR_KEY_FUNCTION_NOT_PERMITTED;
}

/*  A keystore row of the tenant (info, and its private key: pkcs8, len
 *  bytes, borrowed from item->cached or item->material until the item is
 *  back): its material goes with the item (home keystore) or its resident
 *  copy is used (home board:NAME).  */
static CK_RV
s_route_keystore_key (s_frontend_t *self, s_request_t *request, work_item_t *item, const char *ref,
                      const Cs__KeyInfo *info, const uint8_t *pkcs8, size_t len)
{
    CK_RV rv = CKR_OK;
    item->bits = info->bits;
    if (!info->has_private)
        rv = CKR_KEY_HANDLE_INVALID;
    else
    if (item->kind == WORK_DERIVE ? (rv = s_derive_permitted (info)) != CKR_OK
                                  : item->kind == WORK_SIGN ? !info->can_sign : !info->can_decrypt) {
        if (rv == CKR_OK)
            rv = CKR_KEY_FUNCTION_NOT_PERMITTED;
    }
    else
    if (strncmp (info->home, "board:", 6) == 0) {
        int board = s_board_index (self, info->home + 6);
        if (board < 0 || keyjobs_resident_id (ref, item->id)
        ||  board_id_reserved (self->args->boards [board], item->id, 16))
            rv = CKR_KEY_HANDLE_INVALID;
        item->key = (cs_key_t) { item->id, 16, NULL, 0, NULL };
        item->boards = board >= 0 ? UINT64_C (1) << board : 0;
        if (item->kind == WORK_DERIVE)
            item->boards &= s_derive_boards (self, false);
        if (rv == CKR_OK && !item->boards)
            rv = CKR_KEY_FUNCTION_NOT_PERMITTED;
    }
    else {
        snprintf (item->ref, sizeof item->ref, "%s", ref);
        item->key = (cs_key_t) { NULL, 0, pkcs8, len, item->ref };
        item->boards = !pkcs8 ? 0 : item->kind == WORK_DERIVE ? s_derive_boards (self, true)
                     : s_material_boards (self, info->key_type);
        if (rv == CKR_OK && !item->boards) {
            zsys_warning ("key %s of tenant %s: no board takes keys of its type", ref, request->tenant);
            rv = CKR_DEVICE_ERROR;
        }
    }
    return rv;
}

/*  "ks:...": the tenant's keystore row from the cache, pinned by the item
 *  (s_route_keystore_key); S_CKR_PENDING with the ref in item->ref when
 *  it is not cached (the slow pool reads it: s_key_read_done).  */
static CK_RV
s_route_keystore_ref (s_frontend_t *self, s_request_t *request, work_item_t *item, const char *ref)
{
    ks_key_t *key = ks_cache_key_get (self->cache, request->tenant, ref);
    size_t len = 0;
    metrics_key_cache (self->args->metrics, key != NULL);
    if (!key) {
        snprintf (item->ref, sizeof item->ref, "%s", ref);
        return S_CKR_PENDING;
    }
    item->cached = key;
    const uint8_t *pkcs8 = ks_key_pkcs8 (key, &len);
    return s_route_keystore_key (self, request, item, ref, ks_key_info (key), pkcs8, len);
}

/*  Routes a sign/decrypt/derive job by its key: per-request key, board ref
 *  or keystore ref (docs/CONTRACTS.md "Routing").  */
static CK_RV
s_route_crypto (s_frontend_t *self, s_request_t *request, work_item_t *item)
{
    const Cs__Job *job = item->job;
    ProtobufCBinaryData key_id = item->kind == WORK_SIGN ? job->sign->key_id
                               : item->kind == WORK_DECRYPT ? job->decrypt->key_id : job->derive->key_id;
    ProtobufCBinaryData der = item->kind == WORK_SIGN ? job->sign->key_pkcs8
                            : item->kind == WORK_DECRYPT ? job->decrypt->key_pkcs8 : job->derive->key_pkcs8;
    char ref [S_REF_MAX + 1];
    if (der.len)
        return s_route_per_request (self, request, item, der);
    if (s_ref_copy (key_id, ref))
        return CKR_KEY_HANDLE_INVALID;
    if (strncmp (ref, "board:", 6) == 0)
        return s_route_board_ref (self, request, item, ref);
    if (strncmp (ref, "ks:", 3) == 0)
        return s_route_keystore_ref (self, request, item, ref);
    return CKR_KEY_HANDLE_INVALID;
}

/*  Submits a routed crypto item (rv: its routing), or sets the job's
 *  result when it cannot run.  Only boards that run its mechanism may take
 *  it: CKR_MECHANISM_INVALID when none of the key's boards does (PKCS#11
 *  2.40 §5.11 C_SignInit).  Returns true when the item is out.  */
static bool
s_crypto_submit (s_frontend_t *self, s_slot_t *slot, CK_RV rv)
{
    work_item_t *item = &slot->item;
    if (rv == CKR_OK && !(item->boards &= s_mech_boards (self, item)))
        rv = CKR_MECHANISM_INVALID;
    int submitted = rv == CKR_OK ? s_submit (self, item) : 0;
    if (submitted)      /* no board holds the key, or every one is out of rotation */
        rv = submitted == -2 ? CKR_DEVICE_ERROR : CKR_KEY_HANDLE_INVALID;
    if (rv == CKR_OK)
        return true;
    s_item_wipe_material (self, item);
    slot->result.rv = rv;
    return false;
}

/*  A slow job of `kind` for job `index` of request (NULL: a job of no
 *  request), or NULL when out of memory.  Fill its inputs, then s_slow_go.  */
static slow_job_t *
s_slow_new (s_request_t *request, size_t index, slow_kind_t kind)
{
    return slow_job_new (kind, request, index,
                         request && index < request->req->n_jobs ? request->req->jobs [index] : NULL,
                         request ? request->tenant : NULL);
}

/*  Hands a slow job to the pool; it comes back to s_slow_done.  A job of a
 *  request job holds one more pending count of the request until then
 *  (its result waits as S_CKR_PENDING).  */
static CK_RV
s_slow_go (s_frontend_t *self, slow_job_t *job)
{
    s_request_t *request = job->request;
    if (request && job->kind != SLOW_TENANT) {
        request->pending++;
        request->slots [job->index].result.rv = S_CKR_PENDING;
    }
    slow_pool_submit (self->slow, &job->base);
    return S_CKR_PENDING;
}

/*  Makes a work item of a sign or decrypt job and routes it; a keystore
 *  key that is not cached is read by the slow pool first.  */
static void
s_job_crypto (s_frontend_t *self, s_request_t *request, size_t index)
{
    s_slot_t *slot = &request->slots [index];
    work_item_t *item = &slot->item;
    *item = (work_item_t) { .request = request, .index = index, .job = request->req->jobs [index],
                            .deadline = request->deadline };
    item->kind = item->job->kind_case == CS__JOB__KIND_SIGN ? WORK_SIGN
               : item->job->kind_case == CS__JOB__KIND_DECRYPT ? WORK_DECRYPT : WORK_DERIVE;
    CK_RV rv = request->ticket_ok ? s_route_crypto (self, request, item) : s_no_login_rv (request);
    if (rv == S_CKR_PENDING) {
        slow_job_t *read = s_slow_new (request, index, SLOW_KEY);
        if (read) {
            snprintf (read->ref, sizeof read->ref, "%s", item->ref);
            read->token = ks_cache_token (self->cache);
            s_slow_go (self, read);
            return;
        }
        rv = CKR_HOST_MEMORY;
    }
    s_crypto_submit (self, slot, rv);     /* an item out counts itself in pending (s_submit) */
}

/*  A raw modexp job (issue #12): a USER ticket, then one work item on any
 *  board that runs modexp (modexp_job.h).  */
static void
s_job_modexp (s_frontend_t *self, s_request_t *request, size_t index)
{
    s_slot_t *slot = &request->slots [index];
    work_item_t *item = &slot->item;
    *item = (work_item_t) { .request = request, .index = index, .job = request->req->jobs [index],
                            .kind = WORK_MODEXP, .deadline = request->deadline };
    CK_RV rv = request->ticket_ok ? modexp_job_operands (request->req, index, &item->modexp)
                                  : CKR_USER_NOT_LOGGED_IN;
    item->boards = s_modexp_boards (self);
    if (rv == CKR_OK && !item->boards)
        rv = CKR_MECHANISM_INVALID;
    if (rv == CKR_OK && s_submit (self, item))
        rv = CKR_MECHANISM_INVALID;
    if (rv != CKR_OK)
        slot->result.rv = rv;
}

/*  A secret-key job (issue #10, symjobs.h): a USER ticket, then one work
 *  item on any board that runs the mechanism.  */
static void
s_job_sym (s_frontend_t *self, s_request_t *request, size_t index)
{
    s_slot_t *slot = &request->slots [index];
    work_item_t *item = &slot->item;
    *item = (work_item_t) { .request = request, .index = index, .job = request->req->jobs [index],
                            .kind = WORK_SYM, .deadline = request->deadline };
    CK_RV rv = request->ticket_ok ? symjob_prepare (item->job->sym, &item->sym) : CKR_USER_NOT_LOGGED_IN;
    for (size_t b = 0; rv == CKR_OK && b < self->args->n_boards; b++)
        if (board_runs_sym (self->args->boards [b], item->sym.mechanism))
            item->boards |= UINT64_C (1) << b;
    if (rv == CKR_OK && (!item->boards || s_submit (self, item)))
        rv = CKR_MECHANISM_INVALID;
    if (rv != CKR_OK)
        slot->result.rv = rv;
}

/*  The slow pool read a keystore key for a crypto job: cached (unless a
 *  drop happened meanwhile: then the item owns the copy), routed and
 *  submitted; or the job fails.  */
static void
s_key_read_done (s_frontend_t *self, s_request_t *request, slow_job_t *job)
{
    s_slot_t *slot = &request->slots [job->index];
    work_item_t *item = &slot->item;
    CK_RV rv = job->rc == KEYSTORE_DAMAGED || job->rc == KEYSTORE_UNAVAILABLE ? CKR_DEVICE_ERROR
                                                                              : CKR_KEY_HANDLE_INVALID;
    if (job->rc == 0) {
        ks_key_t *key = ks_cache_key_put (self->cache, job->token, request->tenant, job->ref, &job->info,
                                          job->pkcs8, job->pkcs8_len);
        const Cs__KeyInfo *info = job->info;
        const uint8_t *pkcs8 = job->pkcs8;
        size_t len = job->pkcs8_len;
        if (key) {
            item->cached = key;
            info = ks_key_info (key);
            pkcs8 = ks_key_pkcs8 (key, &len);
        }
        else {                      /* the item owns the read copy */
            item->material = job->pkcs8;
            item->material_len = job->pkcs8_len;
            job->pkcs8 = NULL;
        }
        rv = s_route_keystore_key (self, request, item, job->ref, info, pkcs8, len);
    }
    s_crypto_submit (self, slot, rv);     /* an item out counts itself in pending (s_submit) */
    s_request_release (self, request, true);      /* the slow read's count (s_slow_go) */
}

/* ------------------------------------------------------------------ */
/*  Hello, login, PINs                                                 */

static void
s_job_hello (s_frontend_t *self, s_request_t *request, s_slot_t *slot)
{
    Cs__HelloResult *hello = &slot->hello;
    cs__hello_result__init (hello);
    hello->version = request->version;
    hello->token_label = request->tenant;
    hello->manufacturer = (char *) "cryptoserver";
    hello->model = (char *) "broker";
    hello->serial = self->serial;
    hello->n_mechanisms = self->n_mechs;
    hello->mechanisms = self->mech_ptrs;
    hello->boards = (uint32_t) self->args->n_boards;
    hello->min_pin_len = CS_PIN_MIN_LEN;
    hello->max_pin_len = CS_PIN_MAX_LEN;
    hello->token_flags = request->has_state ? keystore_tenant_flags (&request->tenant_state) : 0;
    hello->rsa_min_bits = (uint32_t) self->config->rsa_min_bits;
    slot->result.rv = CKR_OK;
    slot->result.kind_case = CS__RESULT__KIND_HELLO;
    slot->result.hello = hello;
}

/*  Makes a ticket for the request's client and tenant: user_type at PIN
 *  epoch `epoch`, expiring broker/ticket-lifetime-ms from now (wall clock:
 *  brokers sharing a ticket key accept each other's tickets).  0 or -1.  */
static int
s_ticket_make (s_frontend_t *self, s_request_t *request, CK_USER_TYPE user_type, uint64_t epoch,
               unsigned char out [TICKET_LEN])
{
    ticket_claims_t claims = { user_type, epoch,
                               (uint64_t) zclock_time () + (uint64_t) self->config->ticket_lifetime_ms };
    return ticket_make (self->config->ticket_key, request->client_key, request->tenant, &claims, out);
}

/*  Logs a refused PIN (C_Login, or the old PIN of C_SetPIN) with the client
 *  that gave it and the tenant's count of wrong PINs in a row, and, when
 *  this one locked the PIN, an error line: one client can lock a whole
 *  tenant, never silently (cryptoserver-keystore(5) "Wrong PINs").  */
static void
s_pin_refused (s_request_t *request, const char *what, CK_USER_TYPE user_type, CK_RV rv,
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
s_tenant_touched (s_frontend_t *self, const char *tenant, CK_USER_TYPE user_type,
                  const keystore_pin_state_t *pin)
{
    keystore_tenant_t cached;
    int role = user_type == CKU_SO ? 1 : 0;
    if (!pin || !ks_cache_tenant_get (self->cache, tenant, &cached)
    ||  cached.failures [role] != pin->failures || cached.epoch [role] != pin->epoch)
        ks_cache_tenant_drop (self->cache, tenant);
}

/*  Checks the PIN of the client's tenant in the keystore (keyed scrypt,
 *  ~70 ms, in the slow pool; failures counted, CKR_PIN_LOCKED after too
 *  many): S_CKR_PENDING, then s_login_done.  */
static CK_RV
s_login (s_frontend_t *self, s_request_t *request, const Cs__LoginJob *job, s_slot_t *slot)
{
    if (job->user_type != CKU_USER && job->user_type != CKU_SO)
        return CKR_USER_TYPE_INVALID;
    slow_job_t *check = s_slow_new (request, slot->item.index, SLOW_LOGIN);
    return check ? s_slow_go (self, check) : CKR_HOST_MEMORY;
}

/*  The PIN check is back: a ticket bound to the client key, at the PIN
 *  epoch the check saw, expiring after broker/ticket-lifetime-ms unless
 *  renewed.  */
static CK_RV
s_login_done (s_frontend_t *self, s_request_t *request, s_slot_t *slot, slow_job_t *check)
{
    const Cs__LoginJob *job = check->job->login;
    CK_RV rv = check->rv;
    //  CKR_DEVICE_ERROR wrote nothing (the database is unreachable, the row
    //  does not verify, the tenant is unknown): the cached row stays, so the
    //  tenant's sessions keep signing during a database outage.
    if (rv != CKR_DEVICE_ERROR)
        s_tenant_touched (self, request->tenant, job->user_type, &check->pin);
    if (rv != CKR_OK) {
        s_pin_refused (request, "login", job->user_type, rv, &check->pin);
        return rv;
    }
    if (s_ticket_make (self, request, job->user_type, check->pin.epoch, slot->ticket))
        return CKR_DEVICE_ERROR;
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
 *  epoch); the SO's own login goes on.  In the slow pool (s_init_pin_done).  */
static CK_RV
s_init_pin (s_frontend_t *self, s_request_t *request, size_t index)
{
    if (!request->so_ok)
        return s_no_login_rv (request);
    slow_job_t *set = s_slow_new (request, index, SLOW_INIT_PIN);
    return set ? s_slow_go (self, set) : CKR_HOST_MEMORY;
}

static CK_RV
s_init_pin_done (s_frontend_t *self, s_request_t *request, slow_job_t *set)
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
static CK_RV
s_set_pin (s_frontend_t *self, s_request_t *request, size_t index, const Cs__SetPinJob *job)
{
    if (job->user_type != CKU_USER && job->user_type != CKU_SO)
        return CKR_USER_TYPE_INVALID;
    slow_job_t *set = s_slow_new (request, index, SLOW_SET_PIN);
    return set ? s_slow_go (self, set) : CKR_HOST_MEMORY;
}

static CK_RV
s_set_pin_done (s_frontend_t *self, s_request_t *request, slow_job_t *set)
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

/* ------------------------------------------------------------------ */
/*  Key lists                                                          */

/*  A 32-bit FNV-1a over the CKA_IDs of the tenant's resident board keys: the
 *  board inventory part of ListKeysResult.version.  */
static uint32_t
s_inventory_hash (s_frontend_t *self, const char *tenant)
{
    uint32_t hash = 0;
    for (size_t i = 0; i < self->n_board_keys; i++) {
        if (!streq (self->board_keys [i].tenant, tenant))
            continue;
        if (hash == 0)
            hash = 2166136261u;
        const Cs__KeyInfo *key = &self->board_keys [i].info;
        for (size_t k = 0; k < key->id.len; k++)
            hash = (hash ^ key->id.data [k]) * 16777619u;
        hash = (hash ^ key->boards) * 16777619u;
    }
    return hash;
}

/*  The CKA_PRIVATE flag among attrs, or dflt.  */
static bool
s_private_flag (Cs__Attribute **attrs, size_t n, bool dflt)
{
    for (size_t i = 0; i < n; i++)
        if (attrs [i]->type == CKA_PRIVATE && attrs [i]->value_case == CS__ATTRIBUTE__VALUE_FLAG)
            return attrs [i]->flag;
    return dflt;
}

/*  Without a CKU_USER ticket a key list holds public objects only (issue
 *  #7; PKCS#11 2.40 §4.4: objects with CKA_PRIVATE TRUE need a login): the
 *  public key objects whose CKA_PRIVATE is FALSE (a public key's default),
 *  and never a private key object, whatever its CKA_PRIVATE (every job with
 *  a private key needs the login anyway).  Rewrites keys->keys to shallow
 *  copies in slot->public_view without their private half; the originals
 *  stay with their owners.  Returns 0 or -1 (out of memory).  */
static int
s_list_public_view (s_slot_t *slot, Cs__ListKeysResult *keys)
{
    slot->public_view = calloc (keys->n_keys + 1, sizeof (Cs__KeyInfo));
    if (!slot->public_view)
        return -1;
    size_t n = 0;
    for (size_t i = 0; i < keys->n_keys; i++) {
        const Cs__KeyInfo *key = keys->keys [i];
        if (!key->has_public || s_private_flag (key->public_attributes, key->n_public_attributes, false))
            continue;
        Cs__KeyInfo *copy = &slot->public_view [n];
        *copy = *key;
        copy->has_private = false;
        copy->n_private_attributes = 0;
        copy->private_attributes = NULL;
        keys->keys [n++] = copy;
    }
    keys->n_keys = n;
    return 0;
}

/*  ListKeys: the tenant's keystore rows and the resident keys of its
 *  boards, only their public objects without a login (s_list_public_view,
 *  a list of its own version: the top bit flipped); "unchanged" when the
 *  client's version is current.  */
static uint64_t
s_list_version (s_frontend_t *self, s_request_t *request, uint64_t keys_version)
{
    uint64_t version = ((uint64_t) s_inventory_hash (self, request->tenant) << 32)
                     | (keys_version & 0xffffffffu);
    return request->ticket_ok ? version : version ^ (UINT64_C (1) << 63);
}

/*  ListKeys (see s_list_version): answered here when the client's version
 *  is current (the tenant's keys_version from its row), else the rows are
 *  read in the slow pool (s_list_keys_done).  */
static void
s_job_list_keys (s_frontend_t *self, s_request_t *request, const Cs__ListKeysJob *job, s_slot_t *slot)
{
    Cs__ListKeysResult *keys = &slot->keys;
    uint64_t version = s_list_version (self, request, request->has_state ? request->tenant_state.keys_version
                                                                         : 0);
    if (request->req->ticket.len && !request->ticket_ok && !request->so_ok) {
        /*  A ticket that is no longer valid (expired, revoked, forged):
            say that the login is gone, rather than answer with the public
            view as if the client had never logged in (CONTRACTS.md).  */
        slot->result.rv = s_no_login_rv (request);
        return;
    }
    cs__list_keys_result__init (keys);
    keys->version = version;
    slot->result.kind_case = CS__RESULT__KIND_KEYS;
    slot->result.keys = keys;
    slot->result.rv = CKR_OK;
    if (job->known_version && job->known_version == version) {
        keys->unchanged = true;
        return;
    }
    slow_job_t *list = s_slow_new (request, slot->item.index, SLOW_LIST_KEYS);
    slot->result.rv = list ? s_slow_go (self, list) : CKR_HOST_MEMORY;
}

/*  The tenant's keystore rows are back (at the keys_version read just
 *  before them): the list is them and the resident keys of its boards.  */
static void
s_list_keys_done (s_frontend_t *self, s_request_t *request, s_slot_t *slot, slow_job_t *list)
{
    Cs__ListKeysResult *keys = &slot->keys;
    slot->listed = list->listed;
    slot->n_listed = list->n_listed;
    list->listed = NULL;
    list->n_listed = 0;
    keys->version = s_list_version (self, request, list->keys_version);
    slot->result.rv = list->rc ? CKR_DEVICE_ERROR : CKR_OK;
    if (list->rc)
        return;
    keys->keys = calloc (slot->n_listed + self->n_board_keys + 1, sizeof (Cs__KeyInfo *));
    if (!keys->keys) {
        slot->result.rv = CKR_HOST_MEMORY;
        return;
    }
    for (size_t i = 0; i < self->n_board_keys; i++)
        if (streq (self->board_keys [i].tenant, request->tenant))
            keys->keys [keys->n_keys++] = &self->board_keys [i].info;
    for (size_t i = 0; i < slot->n_listed; i++)
        keys->keys [keys->n_keys++] = slot->listed [i];
    if (!request->ticket_ok && s_list_public_view (slot, keys)) {
        keys->n_keys = 0;
        slot->result.rv = CKR_HOST_MEMORY;
    }
}

/* ------------------------------------------------------------------ */
/*  Key generation                                                     */

/*  The CKA_xxx flag of a template, or fallback.  */
static bool
s_template_flag (Cs__Attribute **attrs, size_t n, CK_ATTRIBUTE_TYPE type, bool fallback)
{
    for (size_t i = 0; i < n; i++)
        if (attrs [i]->type == type && attrs [i]->value_case == CS__ATTRIBUTE__VALUE_FLAG)
            return attrs [i]->flag;
    return fallback;
}

/*  A generated key's description is back from the slow pool (a token key
 *  stored durably first: keystore_key_put before the reply; a session key
 *  with its PKCS#8 for the reply, no ref).  */
static void s_destroy_resident (s_frontend_t *self, const char *board_name, const char *ref);

static void
s_generated_done (s_frontend_t *self, s_request_t *request, s_slot_t *slot, slow_job_t *described)
{
    const Cs__GenerateKeyPairJob *job = described->job->generate_key_pair;
    s_key_limit_log (self, request, described->rv, described->limit);
    if (described->resident_board)      /* a replayed generation: this attempt's board key goes */
        s_destroy_resident (self, described->resident_board, described->resident_ref);
    slot->info = described->info;
    described->info = NULL;
    slot->result.rv = described->rv;
    //  A failed generation stored nothing (its transaction rolled back): the
    //  cached tenant row stays, so that signing goes on while the keystore
    //  database is unreachable (docs/CONTRACTS.md "Keystore database").
    if (job->token && slot->result.rv == CKR_OK)
        ks_cache_tenant_drop (self->cache, request->tenant);        /* keys_version */
    if (slot->result.rv != CKR_OK)
        return;
    if (!job->token) {
        slot->private_pkcs8 = described->pkcs8;
        slot->private_pkcs8_len = described->pkcs8_len;
        described->pkcs8 = NULL;
    }
    Cs__KeyInfo *info = slot->info;
    cs__generate_key_pair_result__init (&slot->generated);
    slot->generated.key = info;
    slot->generated.private_pkcs8 = (ProtobufCBinaryData) { slot->private_pkcs8_len, slot->private_pkcs8 };
    slot->result.kind_case = CS__RESULT__KIND_GENERATED;
    slot->result.generated = &slot->generated;
    zsys_info ("generate: %s key %s for tenant %s (%s)", job->token ? "token" : "session",
               job->token ? info->ref : "-", request->tenant, job->token ? info->home : "returned");
}

/*  Hands generated material (PKCS#8, owned: taken) to the slow pool for its
 *  description (s_generated_done).  Returns true when it went, false when
 *  the job failed here (its result is set).  */
static bool
s_generated_material (s_frontend_t *self, s_request_t *request, s_slot_t *slot,
                      unsigned char *pkcs8, size_t len)
{
    slow_job_t *describe = s_slow_new (request, slot->item.index, SLOW_GENERATED);
    if (!describe) {
        OPENSSL_cleanse (pkcs8, len);
        free (pkcs8);
        slot->result.rv = CKR_HOST_MEMORY;
        return false;
    }
    describe->pkcs8 = pkcs8;
    describe->pkcs8_len = len;
    s_slow_go (self, describe);
    return true;
}

/*  Hands a key generated on a board to the slow pool for its description
 *  and its row (s_generated_done).  Returns as s_generated_material.  */
static bool
s_generated_resident (s_frontend_t *self, s_request_t *request, s_slot_t *slot)
{
    work_item_t *item = &slot->item;
    slow_job_t *describe = s_slow_new (request, item->index, SLOW_GENERATED);
    if (!describe) {
        slot->result.rv = CKR_HOST_MEMORY;
        return false;
    }
    snprintf (describe->home, sizeof describe->home, "board:%s", self->args->boards [item->board]->name);
    describe->board_key = &item->generated;
    describe->resident_ref = slot->ref;
    s_slow_go (self, describe);
    return true;
}

/*  A generation item came back from a worker: the key goes to the slow
 *  pool for its description (that job holds the request), or the job
 *  failed.  */
static void
s_generate_finish (s_frontend_t *self, s_request_t *request, s_slot_t *slot)
{
    work_item_t *item = &slot->item;
    if (item->rv != CKR_OK)
        slot->result.rv = item->rv;
    else
    if (item->kind == WORK_GENERATE) {
        unsigned char *pkcs8 = item->out;
        item->out = NULL;
        s_generated_material (self, request, slot, pkcs8, item->out_len);
    }
    else
        s_generated_resident (self, request, slot);
}

/*  Token key on the board of keys/home: a fresh ref whose random bytes are
 *  the key's CKA_ID there (its user-visible CKA_ID/label live in the row).  */
static CK_RV
s_generate_on_board (s_frontend_t *self, s_request_t *request, s_slot_t *slot, CK_KEY_TYPE type)
{
    const Cs__GenerateKeyPairJob *job = slot->item.job->generate_key_pair;
    work_item_t *item = &slot->item;
    board_t *board = self->args->boards [self->home_board];
    if (!board_generates (board, type, true)) {
        zsys_warning ("generate: board %s (keys/home) cannot generate this key type", board->name);
        return CKR_MECHANISM_INVALID;
    }
    keystore_ref_new (slot->ref);
    keyjobs_resident_id (slot->ref, item->id);
    item->kind = WORK_GENERATE_RESIDENT;
    item->gen.id = item->id;
    item->gen.id_len = 16;
    item->gen.label = slot->ref;
    item->gen.can_sign = s_template_flag (job->private_template, job->n_private_template, CKA_SIGN, true);
    item->gen.can_decrypt = s_template_flag (job->private_template, job->n_private_template,
                                             CKA_DECRYPT, type == CKK_RSA);
    item->boards = UINT64_C (1) << self->home_board;
    return s_submit (self, item) ? CKR_DEVICE_ERROR : CKR_OK;
}

/*  C_GenerateKeyPair (issue #3): from the pool, on a worker as material, or
 *  resident on the keys/home board.  */
static void
s_job_generate (s_frontend_t *self, s_request_t *request, size_t index)
{
    s_slot_t *slot = &request->slots [index];
    work_item_t *item = &slot->item;
    const Cs__GenerateKeyPairJob *job = request->req->jobs [index]->generate_key_pair;
    CK_KEY_TYPE type = CKK_RSA;
    *item = (work_item_t) { .request = request, .index = index, .job = request->req->jobs [index],
                            .kind = WORK_GENERATE, .deadline = request->deadline };
    CK_RV rv = request->ticket_ok ? keyjobs_keygen (job, &self->rsa_range, &item->gen, &type) : s_no_login_rv (request);
    if (rv == CKR_OK && job->token && self->home_board >= 0)
        rv = s_generate_on_board (self, request, slot, type);
    else
    if (rv == CKR_OK) {
        size_t len = 0;
        bool pooled = type == CKK_RSA && self->pool && keyjobs_default_exponent (job)
                   && pool_keeps (self->pool, job->modulus_bits);
        unsigned char *pkcs8 = pooled ? pool_take (self->pool, job->modulus_bits, &len) : NULL;
        if (pooled)
            metrics_pool (self->args->metrics, pkcs8 ? METRICS_POOL_TAKEN : METRICS_POOL_MISSED, 1);
        if (pkcs8) {
            s_generated_material (self, request, slot, pkcs8, len);     /* pending, or failed */
            s_pool_refill (self);
            return;
        }
        item->boards = s_generating_boards (self, type);
        rv = item->boards && s_submit (self, item) == 0 ? CKR_OK : CKR_MECHANISM_INVALID;
    }
    if (rv != CKR_OK)           /* else the item sets it (s_generate_finish), maybe already */
        slot->result.rv = rv;
}

/* ------------------------------------------------------------------ */
/*  Import and life cycle of keystore rows                             */

/*  Sets a key job's result: the key after the change (NULL: gone).  */
static void
s_key_result (s_slot_t *slot, CK_RV rv, Cs__KeyInfo *info, bool import)
{
    slot->result.rv = rv;
    slot->info = info;
    if (rv != CKR_OK)
        return;
    if (import) {
        cs__import_key_result__init (&slot->imported);
        slot->imported.key = info;
        slot->result.kind_case = CS__RESULT__KIND_IMPORTED;
        slot->result.imported = &slot->imported;
        return;
    }
    cs__key_result__init (&slot->key_result);
    slot->key_result.key = info;
    slot->result.kind_case = CS__RESULT__KIND_KEY;
    slot->result.key = &slot->key_result;
}

/*  Refs of key jobs: a keystore row of the tenant, or a resident key found
 *  on one of its boards (those cannot change: CKR_ACTION_PROHIBITED).  */
static CK_RV
s_key_ref_check (s_frontend_t *self, s_request_t *request, const char *ref)
{
    if (strncmp (ref, "ks:", 3) == 0)
        return CKR_OK;
    unsigned char id [CS_KEY_ID_MAX];
    size_t len = 0;
    return s_board_key_find (self, request->tenant, ref, id, &len) ? CKR_ACTION_PROHIBITED
                                                                   : CKR_OBJECT_HANDLE_INVALID;
}

/*  Destroys the resident copy of a keystore key on its board, in the
 *  background (the row is already gone; failures are logged).  */
static void
s_destroy_resident (s_frontend_t *self, const char *board_name, const char *ref)
{
    int board = s_board_index (self, board_name);
    work_item_t *item = board >= 0 ? calloc (1, sizeof *item) : NULL;
    if (!item || keyjobs_resident_id (ref, item->id)
    ||  board_id_reserved (self->args->boards [board], item->id, 16)) {
        zsys_warning ("destroy: cannot remove key %s from board %s", ref, board_name);
        free (item);
        return;
    }
    item->kind = WORK_DESTROY_RESIDENT;
    item->low = true;
    item->key = (cs_key_t) { item->id, 16, NULL, 0, NULL };
    item->boards = UINT64_C (1) << board;
    item->deadline = INT64_MAX;
    if (s_submit (self, item))
        free (item);
}

/*  The ref a key job names ("ks:" for an import).  */
static const char *
s_key_job_ref (const Cs__Job *job)
{
    return job->kind_case == CS__JOB__KIND_DESTROY_KEY ? job->destroy_key->ref
         : job->kind_case == CS__JOB__KIND_SET_KEY_ATTRIBUTES ? job->set_key_attributes->ref
         : job->kind_case == CS__JOB__KIND_COPY_KEY ? job->copy_key->ref : "ks:";
}

/*  Import, destroy, set attributes, copy: a USER ticket and a key ref of
 *  the tenant; the rows change in the slow pool (s_key_job_done).  */
static void
s_job_key (s_frontend_t *self, s_request_t *request, const Cs__Job *job, s_slot_t *slot)
{
    CK_RV rv = request->ticket_ok ? s_key_ref_check (self, request, s_key_job_ref (job))
                                  : s_no_login_rv (request);
    slow_job_t *change = rv == CKR_OK ? s_slow_new (request, slot->item.index, SLOW_KEY_JOB) : NULL;
    if (rv == CKR_OK)
        rv = change ? s_slow_go (self, change) : CKR_HOST_MEMORY;
    if (rv != S_CKR_PENDING)
        s_key_result (slot, rv, NULL, false);
}

/*  A key job is back from the slow pool: what it changed leaves the cache
 *  (the key, and the tenant's keys_version), the resident copy of a
 *  destroyed key goes from its board.  */
static void
s_key_job_done (s_frontend_t *self, s_request_t *request, s_slot_t *slot, slow_job_t *change)
{
    const Cs__Job *job = change->job;
    const char *ref = s_key_job_ref (job);
    CK_RV rv = change->rv;
    Cs__KeyInfo *info = change->info;
    change->info = NULL;
    ks_cache_key_drop (self->cache, request->tenant, ref);
    ks_cache_tenant_drop (self->cache, request->tenant);
    s_key_limit_log (self, request, rv, change->limit);
    if (change->resident_board)
        s_destroy_resident (self, change->resident_board, ref);
    if (rv == CKR_OK || frontend_verbose)
        zsys_info ("key job %d on %s (tenant %s): %s", (int) job->kind_case,
                   info ? info->ref : ref, request->tenant, cs_rv_name (rv));
    s_key_result (slot, rv, info, job->kind_case == CS__JOB__KIND_IMPORT_KEY);
}

/*  Certificates and data objects (objjobs.h): run in the slow pool.  A
 *  ticket that no longer holds ends the login, as for key lists.  */
static void
s_job_object (s_frontend_t *self, s_request_t *request, const Cs__Job *job, s_slot_t *slot)
{
    bool stale = request->req->ticket.len && !request->ticket_ok && !request->so_ok;
    CK_RV rv = stale ? s_no_login_rv (request) : objjobs_admit (job, request->ticket_ok);
    slow_job_t *run = rv == CKR_OK ? s_slow_new (request, slot->item.index, SLOW_OBJECT_JOB) : NULL;
    if (rv == CKR_USER_NOT_LOGGED_IN)
        rv = s_no_login_rv (request);
    if (run)
        run->user = request->ticket_ok;
    slot->result.rv = rv != CKR_OK ? rv : run ? s_slow_go (self, run) : CKR_HOST_MEMORY;
}

/* ------------------------------------------------------------------ */
/*  Background work: pool refills, clean-ups                           */

/*  Answers a "POOL-WAIT" once the pool has the keys it waits for.  */
static void
s_pool_waiter (s_frontend_t *self)
{
    if (self->pool_waiting && pool_ready (self->pool, self->pool_wait_bits) >= self->pool_wait_count) {
        self->pool_waiting = false;
        zstr_sendf (self->pipe, "%zu", pool_ready (self->pool, self->pool_wait_bits));
    }
}

/*  Queues background refills while the pool lacks keys (workers take them
 *  only when no client item waits: scheduler.h).  */
static void
s_pool_refill (s_frontend_t *self)
{
    /*  No refills while draining: a worker that is shutting down would
        never hand the item back, and its key material would leak.  */
    uint64_t boards = self->pool && !self->draining ? s_generating_boards (self, CKK_RSA) : 0;
    unsigned bits;
    while (boards && (bits = pool_next_refill (self->pool, self->pool_max_running)) != 0) {
        work_item_t *item = calloc (1, sizeof *item);
        if (!item) {
            pool_refill_failed (self->pool, bits);
            return;
        }
        item->kind = WORK_GENERATE;
        item->low = true;
        item->bits = bits;
        item->gen = (cs_keygen_t) { .mechanism = CKM_RSA_PKCS_KEY_PAIR_GEN, .modulus_bits = bits };
        item->boards = boards;
        item->deadline = INT64_MAX;
        if (s_submit (self, item)) {
            pool_refill_failed (self->pool, bits);
            free (item);
            return;
        }
    }
}

/*  A background item came back.  */
static void
s_background_done (s_frontend_t *self, work_item_t *item)
{
    assert (self->background_out > 0);
    self->background_out--;
    if (item->kind == WORK_GENERATE && self->pool) {
        if (item->rv == CKR_OK) {
            pool_put (self->pool, item->bits, item->out, item->out_len);
            item->out = NULL;
        }
        else {
            zsys_warning ("pool: RSA-%u generation failed: %s", item->bits, cs_rv_name (item->rv));
            pool_refill_failed (self->pool, item->bits);
        }
        s_pool_waiter (self);
    }
    else
    if (item->kind == WORK_DESTROY_RESIDENT && item->rv != CKR_OK)
        zsys_warning ("destroy: board %s could not remove a resident key: %s",
                      self->args->boards [item->board]->name, cs_rv_name (item->rv));
    if (item->out) {
        OPENSSL_cleanse (item->out, item->out_len);
        free (item->out);
    }
    free (item);
    s_pool_refill (self);
    s_drained_check (self);
}

/* ------------------------------------------------------------------ */
/*  One job                                                            */

static void
s_job (s_frontend_t *self, s_request_t *request, size_t index)
{
    s_slot_t *slot = &request->slots [index];
    const Cs__Job *job = request->req->jobs [index];
    cs__result__init (&slot->result);
    request->results [index] = &slot->result;
    slot->item.index = index;
    switch (job->kind_case) {
        case CS__JOB__KIND_HELLO:
            s_job_hello (self, request, slot);
            break;
        case CS__JOB__KIND_LOGIN:
            slot->result.rv = s_login (self, request, job->login, slot);
            break;
        case CS__JOB__KIND_LIST_KEYS:
            s_job_list_keys (self, request, job->list_keys, slot);
            break;
        case CS__JOB__KIND_SIGN:
        case CS__JOB__KIND_DECRYPT:
        case CS__JOB__KIND_DERIVE:
            s_job_crypto (self, request, index);
            break;
        case CS__JOB__KIND_GENERATE_KEY_PAIR:
            s_job_generate (self, request, index);
            break;
        case CS__JOB__KIND_MODEXP:
            s_job_modexp (self, request, index);
            break;
        case CS__JOB__KIND_SYM:
            s_job_sym (self, request, index);
            break;
        case CS__JOB__KIND_IMPORT_KEY:
        case CS__JOB__KIND_DESTROY_KEY:
        case CS__JOB__KIND_SET_KEY_ATTRIBUTES:
        case CS__JOB__KIND_COPY_KEY:
            s_job_key (self, request, job, slot);
            break;
        case CS__JOB__KIND_PUT_OBJECT:
        case CS__JOB__KIND_LIST_OBJECTS:
        case CS__JOB__KIND_DESTROY_OBJECT:
            s_job_object (self, request, job, slot);
            break;
        case CS__JOB__KIND_INIT_PIN:
            slot->result.rv = s_init_pin (self, request, index);
            break;
        case CS__JOB__KIND_SET_PIN:
            slot->result.rv = s_set_pin (self, request, index, job->set_pin);
            break;
        default:
            slot->result.rv = CKR_FUNCTION_NOT_SUPPORTED;      /* cs_wire rejects these */
    }
}

/* ------------------------------------------------------------------ */
/*  Requests                                                           */

/*  Identifies the sender: its CURVE key must be in the current allow-list
 *  and its certificate must name its tenant (issue #7: no client falls back
 *  to some tenant; plaintext, a test-only mode, gets the first tenant by
 *  name).  Fills key, name and tenant; returns -1 (after logging, with the
 *  reason for the client in *why_p) when refused.  */
static int
s_identify (s_frontend_t *self, zframe_t *body, s_request_t *request, const char **why_p)
{
    *why_p = "client key not allowed";
    if (!self->config->curve) {
        request->client_key = strdup ("");
        request->name_copy = strdup ("plaintext");
        request->tenant = strdup (self->default_tenant ? self->default_tenant : "");
    }
    else {
        const char *key = zframe_meta (body, "User-Id");
        s_clients_check (self);
        s_client_t *client = key ? zhashx_lookup (self->clients, key) : NULL;
        if (!client) {
            zsys_warning ("request refused: client key %s is not in the allow-list %s",
                          key ? key : "(none)", self->config->clients_dir);
            return -1;
        }
        if (!client->tenant) {
            zsys_warning ("request refused: client %s has no tenant in its certificate (key %s, in %s)",
                          client->name, key, self->config->clients_dir);
            *why_p = "client has no tenant: its certificate in the broker's allow-list names none";
            return -1;
        }
        request->client_key = strdup (key);
        request->name_copy = strdup (client->name);
        request->tenant = strdup (client->tenant);
    }
    request->client_name = request->name_copy;
    return request->client_key && request->name_copy && request->tenant ? 0 : -1;
}

static uint64_t s_peek_request_id (zframe_t *body);

/*  Decodes and checks the request; on failure replies with the CK_RV of the
 *  broken limit (cs_wire_request_check) and the request's id, so that the
 *  client's waiter gets it; the log line is rate-limited (s_log_due).  */
static int
s_request_decode (s_frontend_t *self, zframe_t *body, s_request_t *request)
{
    const char *why = NULL;
    unsigned long rv = CKR_DEVICE_ERROR;
    request->req = cs_wire_request_check (zframe_data (body), zframe_size (body), &why, &rv);
    if (!request->req) {
        if (s_log_due (self, request, why))
            zsys_warning ("bad request from client %s: %s: answered with %s", request->client_name, why,
                          cs_rv_name (rv));
        s_send_error (self, request->identity, s_peek_request_id (body), rv, why);
        return -1;
    }
    Cs__Request *req = request->req;
    request->version = cs_wire_version_choose (req->version_min, req->version_max);
    if (request->version == 0) {
        char error [160];
        snprintf (error, sizeof error, "protocol version mismatch: client speaks %u..%u, "
                  "broker speaks %u..%u", req->version_min, req->version_max,
                  CS_PROTOCOL_VERSION_MIN, CS_PROTOCOL_VERSION);
        if (s_log_due (self, request, "protocol version"))
            zsys_warning ("client %s: %s", request->client_name, error);
        s_send_error (self, request->identity, req->request_id, CKR_DEVICE_ERROR, error);
        return -1;
    }
    return 0;
}

/*  Checks the request's login ticket (docs/CONTRACTS.md "Login tickets"):
 *  its MAC for this client and tenant, its expiry, and its epoch against
 *  the tenant's PIN epoch of its user type (the tenant row the request
 *  got before its jobs: s_request_start).  Sets
 *  ticket_ok (CKU_USER) or so_ok (CKU_SO).  A valid ticket with less than
 *  half of broker/ticket-lifetime-ms left is renewed: the reply carries a
 *  fresh one (Reply.ticket), so a login in use never expires and the broker
 *  keeps no session state.  */
static void
s_ticket_check (s_frontend_t *self, s_request_t *request)
{
    const Cs__Request *req = request->req;
    ticket_claims_t claims;
    uint64_t now = (uint64_t) zclock_time (), epoch = 0;
    if (req->ticket.len == 0)
        return;
    ticket_status_t status = ticket_check (self->config->ticket_key, request->client_key, request->tenant,
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

/*  The bytes a decoded request holds while it waits: its frame's size (the
 *  decoded copy is about as big) and the per-job bookkeeping.  */
static size_t
s_request_weight (zframe_t *body, const Cs__Request *req)
{
    return zframe_size (body) + sizeof (s_request_t)
         + req->n_jobs * (sizeof (s_slot_t) + sizeof (Cs__Result *) + sizeof (Cs__Job));
}

/*  Charges the request to its client (broker/max-client-bytes); over the
 *  limit, answers CKR_DEVICE_MEMORY and logs (rate-limited) who it was.  */
static int
s_request_charge (s_frontend_t *self, zframe_t *body, s_request_t *request)
{
    size_t weight = s_request_weight (body, request->req);
    char hex [2 * 256 + 1];
    const char *client = request->client_key;
    if (!*client) {             /* plaintext: the connection is the client */
        size_t len = zframe_size (request->identity) < 256 ? zframe_size (request->identity) : 256;
        cs_hex_encode (zframe_data (request->identity), len, hex);
        client = hex;
    }
    if (!(request->load_key = strdup (client))) {
        s_send_error (self, request->identity, request->req->request_id, CKR_HOST_MEMORY, "out of memory");
        return -1;
    }
    if (client_load_charge (self->load, client, weight) == 0) {
        request->load = self->load;
        request->charged = weight;
        return 0;
    }
    if (s_log_due (self, request, "max-client-bytes"))
        zsys_warning ("client %s (tenant %s): %zu bytes queued, request %" PRIu64 " of %zu bytes "
                      "over broker/max-client-bytes %d: answered with CKR_DEVICE_MEMORY",
                      request->client_name, request->tenant, client_load_bytes (self->load, client),
                      request->req->request_id, weight, self->config->max_client_bytes);
    s_send_error (self, request->identity, request->req->request_id, CKR_DEVICE_MEMORY,
                  "client over its queued-bytes limit (broker/max-client-bytes)");
    return -1;
}

/*  Prepares the per-job storage and deadline.  */
static int
s_request_prepare (s_frontend_t *self, s_request_t *request)
{
    Cs__Request *req = request->req;
    request->slots = calloc (req->n_jobs, sizeof (s_slot_t));
    request->results = calloc (req->n_jobs, sizeof (Cs__Result *));
    if (!request->slots || !request->results) {
        s_send_error (self, request->identity, req->request_id, CKR_HOST_MEMORY, "out of memory");
        return -1;
    }
    int64_t budget = req->deadline_ms ? (int64_t) req->deadline_ms : (int64_t) self->config->default_deadline_ms;
    if (budget > self->config->max_deadline_ms) {
        if (s_log_due (self, request, "max-deadline-ms"))
            zsys_warning ("client %s (tenant %s): deadline of %" PRId64 " ms capped at "
                          "broker/max-deadline-ms %d", request->client_name, request->tenant, budget,
                          self->config->max_deadline_ms);
        budget = self->config->max_deadline_ms;
    }
    request->deadline = cs_clock_ms () + budget;
    return 0;
}

/*  The request id of a frame we refuse before decoding it with limits, so
 *  the client can match the error reply; 0 when it does not parse.  */
static uint64_t
s_peek_request_id (zframe_t *body)
{
    if (zframe_size (body) == 0 || zframe_size (body) > CS_WIRE_MAX_MESSAGE)
        return 0;
    Cs__Request *req = cs__request__unpack (NULL, zframe_size (body), zframe_data (body));
    uint64_t id = req ? req->request_id : 0;
    if (req)
        cs__request__free_unpacked (req, NULL);
    return id;
}

/*  Runs the jobs of a request whose tenant row is known (or cannot be):
 *  the ticket check, then every job; answers at once unless jobs are out
 *  with workers or the slow pool.  `counted`: the request is in in_flight
 *  already (it waited for its tenant row).  */
static void
s_request_run (s_frontend_t *self, s_request_t *request, bool counted)
{
    s_ticket_check (self, request);
    for (size_t i = 0; i < request->req->n_jobs; i++)
        s_job (self, request, i);
    if (!counted && request->pending > 1) {
        self->in_flight++;
        counted = true;
    }
    s_request_release (self, request, counted);
}

/*  True when the request needs its tenant's row before its jobs: the PIN
 *  epoch of its ticket, Hello's token flags, ListKeys' version.  */
static bool
s_needs_tenant (const Cs__Request *req)
{
    if (req->ticket.len)
        return true;
    for (size_t i = 0; i < req->n_jobs; i++)
        if (req->jobs [i]->kind_case == CS__JOB__KIND_HELLO || req->jobs [i]->kind_case == CS__JOB__KIND_LIST_KEYS)
            return true;
    return false;
}

/*  The keystore file is being written (ks_watch.h): the cache is held
 *  (not used) until a slow-pool thread got the write lock once, the writer
 *  having committed (SLOW_SETTLE, s_slow_done); it is dropped then unless
 *  the only writer was this broker, whose own changes were dropped one by
 *  one.  Called before every request looks at the cache: a change made
 *  before a request was sent is seen by it.  */
static void
s_keystore_check (s_frontend_t *self)
{
    if (self->listener) {           /* PostgreSQL: notified after the commit */
        uint64_t changes = keystore_listener_changes (self->listener);
        if (changes != self->listener_seen)
            ks_cache_drop_all (self->cache);
        self->listener_seen = changes;
        return;
    }
    if (!self->watch || !ks_watch_changed (self->watch))
        return;
    slow_job_t *settle = s_slow_new (NULL, 0, SLOW_SETTLE);
    if (!settle) {
        ks_cache_drop_all (self->cache);
        return;
    }
    ks_cache_hold (self->cache);
    s_slow_go (self, settle);
}

/*  Starts a decoded request: its tenant row from the cache, or read in the
 *  slow pool first (s_slow_done runs it then), and its jobs.  `counted`:
 *  it is in in_flight already (it waited in its client's backlog).  */
static void
s_request_start (s_frontend_t *self, s_request_t *request, bool counted)
{
    request->pending = 1;                   /* held while jobs are routed */
    s_keystore_check (self);
    if (s_needs_tenant (request->req)) {
        request->has_state = ks_cache_tenant_get (self->cache, request->tenant, &request->tenant_state);
        slow_job_t *read = request->has_state ? NULL : s_slow_new (request, 0, SLOW_TENANT);
        if (read) {
            read->token = ks_cache_token (self->cache);
            s_slow_go (self, read);
            if (!counted)
                self->in_flight++;
            return;
        }
    }
    s_request_run (self, request, counted);
}

/*  A slow job is back (slow_pool.h): its result goes to its job, and the
 *  request is released (a keystore key read goes on to a worker).  */
static void
s_slow_done (slow_item_t *item, void *arg)
{
    s_frontend_t *self = arg;
    slow_job_t *job = (slow_job_t *) item;
    s_request_t *request = job->request;
    s_slot_t *slot = request ? &request->slots [job->index] : NULL;
    switch (job->kind) {
        case SLOW_SETTLE:
            ks_cache_unhold (self->cache, job->rc != 0);   /* someone else committed, or unknown */
            break;
        case SLOW_TENANT:
            request->keystore_down = job->rc == KEYSTORE_UNAVAILABLE;
            if (job->rc == 0) {
                ks_cache_tenant_put (self->cache, job->token, request->tenant, &job->state);
                request->tenant_state = job->state;
                request->has_state = true;
            }
            s_request_run (self, request, true);
            break;
        case SLOW_KEY:
            s_key_read_done (self, request, job);
            break;
        case SLOW_LIST_KEYS:
            s_list_keys_done (self, request, slot, job);
            s_request_release (self, request, true);
            break;
        case SLOW_KEY_JOB:
            s_key_job_done (self, request, slot, job);
            s_request_release (self, request, true);
            break;
        case SLOW_GENERATED:
            s_generated_done (self, request, slot, job);
            s_request_release (self, request, true);
            break;
        case SLOW_OBJECT_JOB:
            objjobs_result (&slot->result, job->rv, &slot->objects, &job->objects);
            s_request_release (self, request, true);
            break;
        default:
            slot->result.rv = job->kind == SLOW_LOGIN ? s_login_done (self, request, slot, job)
                            : job->kind == SLOW_INIT_PIN ? s_init_pin_done (self, request, job)
                            : s_set_pin_done (self, request, job);
            s_request_release (self, request, true);
    }
    slow_job_destroy (&job);
}

/*  A slow job that will not come back through s_slow_done (the frontend is
 *  ending): freed, wiping what it holds; its request is left unanswered.  */
static void
s_slow_discard (slow_item_t *item, void *arg)
{
    slow_job_t *job = (slow_job_t *) item;
    slow_job_destroy (&job);
}

/*  True when the request has a job that goes to a worker.  */
static bool
s_needs_worker (const Cs__Request *req)
{
    for (size_t i = 0; i < req->n_jobs; i++)
        switch (req->jobs [i]->kind_case) {
            case CS__JOB__KIND_SIGN:
            case CS__JOB__KIND_DECRYPT:
            case CS__JOB__KIND_DERIVE:
            case CS__JOB__KIND_GENERATE_KEY_PAIR:
            case CS__JOB__KIND_SYM:
                return true;
            default:
                break;
        }
    return false;
}

/*  True when the job queue is at broker/max-queue.  */
static bool
s_queue_full (s_frontend_t *self)
{
    return scheduler_queued (self->scheduler) >= (size_t) self->config->max_queue;
}

/*  Starts a charged request now, or keeps it in its client's backlog when
 *  the client has broker/max-client-jobs jobs out or older requests
 *  waiting, or when it needs a worker and the queue is at max-queue
 *  (docs/CONTRACTS.md "Fair shares").  A deferred request counts in
 *  in_flight (a drain waits for it).  */
static void
s_request_admit (s_frontend_t *self, s_request_t *request)
{
    if (client_load_may_start (self->load, request->load_key)
    &&  !(s_queue_full (self) && s_needs_worker (request->req))) {
        s_request_start (self, request, false);
        return;
    }
    if (client_load_defer (self->load, request->load_key, request)) {
        s_send_error (self, request->identity, request->req->request_id, CKR_HOST_MEMORY, "out of memory");
        s_request_destroy (&request);
        return;
    }
    self->in_flight++;
    if (s_log_due (self, request, "max-client-jobs"))
        zsys_info ("client %s (tenant %s): %zu jobs out, %zu requests waiting: its requests wait "
                   "(broker/max-client-jobs %d, broker/max-queue %d)", request->client_name, request->tenant,
                   client_load_jobs (self->load, request->load_key),
                   client_load_client_deferred (self->load, request->load_key),
                   self->config->max_client_jobs, self->config->max_queue);
}

static void
s_backlog_run (s_frontend_t *self)
{
    while (client_load_deferred (self->load) > 0 && !s_queue_full (self)) {
        s_request_t *request = client_load_next (self->load);
        if (!request)
            break;
        s_request_start (self, request, true);
    }
}

/*  Handles one request: identity, decode, then every job; answers at once
 *  unless items are out with workers.  */
static void
s_request_handle (s_frontend_t *self, zframe_t **identity_p, zframe_t *body, bool extra_frames)
{
    s_request_t *request = calloc (1, sizeof *request);
    if (!request)
        return;
    request->received_ns = metrics_now_ns ();
    request->identity = *identity_p;
    *identity_p = NULL;
    const char *why = NULL;
    if (s_identify (self, body, request, &why)) {
        s_send_error (self, request->identity, s_peek_request_id (body), CKR_DEVICE_ERROR, why);
        goto done;
    }
    if (extra_frames) {
        if (s_log_due (self, request, "more than one frame"))
            zsys_warning ("bad request from client %s: more than one frame", request->client_name);
        s_send_error (self, request->identity, s_peek_request_id (body), CKR_DEVICE_ERROR,
                      "request must be one frame");
        goto done;
    }
    if (s_request_decode (self, body, request) || s_request_charge (self, body, request)
    ||  s_request_prepare (self, request))
        goto done;
    s_request_admit (self, request);
    return;
done:
    s_request_destroy (&request);
}

static int
s_on_router (zloop_t *loop, zsock_t *reader, void *arg)
{
    s_frontend_t *self = arg;
    zmsg_t *msg = zmsg_recv (self->router);
    if (!msg)
        return 0;
    zframe_t *identity = zmsg_pop (msg);
    zframe_t *body = zmsg_pop (msg);
    if (identity && body)
        s_request_handle (self, &identity, body, zmsg_size (msg) > 0);
    if (body)       /* the raw frame may hold PINs and per-request keys */
        OPENSSL_cleanse (zframe_data (body), zframe_size (body));
    zframe_destroy (&identity);
    zframe_destroy (&body);
    zmsg_destroy (&msg);
    s_flow_control (self);
    return 0;
}

/* ------------------------------------------------------------------ */
/*  Stats, pipe                                                        */

/*  Logs "stats board=NAME jobs=N errors=N" per board; if reply, also sends
 *  the lines to the pipe, one frame each.  */
static void
s_stats (s_frontend_t *self, bool reply)
{
    zmsg_t *msg = reply ? zmsg_new () : NULL;
    for (size_t i = 0; i < scheduler_boards (self->scheduler); i++) {
        char line [256];
        snprintf (line, sizeof line, "board=%s jobs=%" PRIu64 " errors=%" PRIu64,
                  scheduler_board_name (self->scheduler, i), scheduler_jobs (self->scheduler, i),
                  scheduler_errors (self->scheduler, i));
        zsys_info ("stats %s", line);
        if (msg)
            zmsg_addstr (msg, line);
    }
    if (msg)
        zmsg_send (&msg, self->pipe);
}

static int
s_on_stats_timer (zloop_t *loop, int timer_id, void *arg)
{
    s_stats (arg, false);
    return 0;
}

/*  "POOL-WAIT" BITS COUNT: replies the number of ready keys of BITS once it
 *  is at least COUNT ("0" at once when the pool does not keep that size).  */
static void
s_pipe_pool_wait (s_frontend_t *self)
{
    char *bits = zstr_recv (self->pipe), *count = bits ? zstr_recv (self->pipe) : NULL;
    self->pool_wait_bits = bits ? (unsigned) atoi (bits) : 0;
    self->pool_wait_count = count ? (size_t) atol (count) : 0;
    zstr_free (&bits);
    zstr_free (&count);
    if (!self->pool) {
        zstr_send (self->pipe, "0");
        return;
    }
    self->pool_waiting = true;
    s_pool_waiter (self);
}

static int
s_on_pipe (zloop_t *loop, zsock_t *reader, void *arg)
{
    s_frontend_t *self = arg;
    char *command = zstr_recv (self->pipe);
    int rc = 0;
    if (!command || streq (command, "$TERM")) {
        s_stats (self, false);
        rc = -1;
    }
    else
    if (streq (command, "DRAIN")) {
        self->draining = true;
        s_flow_control (self);
        zsys_info ("draining: no new requests; %zu in flight, %zu background items with workers",
                   self->in_flight, self->background_out);
        s_drained_check (self);
    }
    else
    if (streq (command, "STATS"))
        s_stats (self, true);
    else
    if (streq (command, "POOL-WAIT"))
        s_pipe_pool_wait (self);
    else
    if (streq (command, "LOAD")) {
        zstr_sendfm (self->pipe, "%zu", client_load_total (self->load));
        zstr_sendf (self->pipe, "%zu", client_load_peak (self->load));
    }
    zstr_free (&command);
    return rc;
}

/* ------------------------------------------------------------------ */
/*  Start-up: capabilities, sockets                                    */

/*  Merges every board's mechanisms into one list for Hello.  */
static int
s_build_mechs (s_frontend_t *self)
{
    size_t max = 0;
    for (size_t b = 0; b < self->args->n_boards; b++)
        max += self->args->boards [b]->n_mechs;
    self->mechs = calloc (max + 1, sizeof (Cs__MechanismInfo));
    self->mech_ptrs = calloc (max + 1, sizeof (Cs__MechanismInfo *));
    if (!self->mechs || !self->mech_ptrs)
        return -1;
    for (size_t b = 0; b < self->args->n_boards; b++)
        for (size_t m = 0; m < self->args->boards [b]->n_mechs; m++) {
            const cs_mech_info_t *info = &self->args->boards [b]->mechs [m];
            size_t i = 0;
            while (i < self->n_mechs && self->mechs [i].type != info->type)
                i++;
            Cs__MechanismInfo *out = &self->mechs [i];
            if (i == self->n_mechs) {
                cs__mechanism_info__init (out);
                out->type = info->type;
                out->min_key_bits = (uint32_t) info->min_key_bits;
                out->max_key_bits = (uint32_t) info->max_key_bits;
                out->flags = info->flags;
                self->mech_ptrs [self->n_mechs++] = out;
                continue;
            }
            if (info->min_key_bits < out->min_key_bits)
                out->min_key_bits = (uint32_t) info->min_key_bits;
            if (info->max_key_bits > out->max_key_bits)
                out->max_key_bits = (uint32_t) info->max_key_bits;
            out->flags |= info->flags;
        }
    self->rsa_range.policy_min = (CK_ULONG) self->config->rsa_min_bits;
    for (size_t i = 0; i < self->n_mechs; i++)
        if (self->mechs [i].type == CKM_RSA_PKCS_KEY_PAIR_GEN) {
            self->rsa_range.board_min = self->mechs [i].min_key_bits;
            self->rsa_range.board_max = self->mechs [i].max_key_bits;
        }
    return 0;
}

/*  Adds key k of board b (with a tenant) to the ListKeys union of that
 *  tenant, counting boards; returns true when it is listed (and so
 *  routable).  Keys generated for keystore rows (their board label is the
 *  "ks:" ref, of any tenant) are listed and routed through their rows
 *  instead, and reserved keys (board_key_reserve) not at all.  */
static bool
s_key_merge (s_frontend_t *self, size_t b, size_t k)
{
    board_t *board = self->args->boards [b];
    const cs_key_info_t *key = &board->keys [k];
    if (!board->tenant || (key->label && strncmp (key->label, "ks:", 3) == 0)
    ||  board_id_reserved (board, key->id, key->id_len))
        return false;
    for (size_t i = 0; i < self->n_board_keys; i++) {
        s_board_key_t *known = &self->board_keys [i];
        if (streq (known->tenant, board->tenant) && known->info.id.len == key->id_len
        &&  !memcmp (known->info.id.data, key->id, key->id_len)) {
            if (!(known->boards & (UINT64_C (1) << b)))
                known->info.boards++;
            known->boards |= UINT64_C (1) << b;
            return true;
        }
    }
    s_board_key_t *entry = &self->board_keys [self->n_board_keys];
    Cs__KeyInfo *out = &entry->info;
    char hex [2 * CS_KEY_ID_MAX + 1];
    cs_hex_encode (key->id, key->id_len, hex);
    cs__key_info__init (out);
    entry->tenant = board->tenant;
    entry->boards = UINT64_C (1) << b;
    out->id = (ProtobufCBinaryData) { key->id_len, (uint8_t *) key->id };
    out->label = key->label ? key->label : (char *) "";
    out->key_type = key->key_type;
    out->bits = (uint32_t) key->bits;
    out->modulus = (ProtobufCBinaryData) { key->modulus_len, key->modulus };
    out->public_exponent = (ProtobufCBinaryData) { key->public_exponent_len, key->public_exponent };
    out->ec_params = (ProtobufCBinaryData) { key->ec_params_len, key->ec_params };
    out->ec_point = (ProtobufCBinaryData) { key->ec_point_len, key->ec_point };
    out->can_sign = key->can_sign;
    out->can_decrypt = key->can_decrypt;
    out->boards = 1;
    out->has_private = true;
    out->has_public = true;
    if (asprintf (&out->ref, "board:%s", hex) < 0)
        out->ref = NULL;
    if (asprintf (&out->home, "board:%s", board->name) < 0)
        out->home = NULL;
    out->n_private_attributes = self->n_resident_attrs
                              - (key->can_derive && board_derives (board, false) ? 0 : 1);
    out->private_attributes = self->resident_attr_ptrs;
    if (!out->ref || !out->home) {
        free (out->ref);
        free (out->home);
        return false;
    }
    self->n_board_keys++;
    return true;
}

/*  What a resident board key's private object says about itself.  */
static void
s_resident_attrs (s_frontend_t *self)
{
    static const struct { CK_ATTRIBUTE_TYPE type; bool value; } flags [] = {
        { CKA_SENSITIVE, true }, { CKA_EXTRACTABLE, false }, { CKA_PRIVATE, true },
        { CKA_MODIFIABLE, false }, { CKA_DESTROYABLE, false }, { CKA_COPYABLE, false },
        { CKA_DERIVE, true },       /* last: only for keys whose board derives with them */
    };
    for (size_t i = 0; i < sizeof flags / sizeof flags [0]; i++) {
        Cs__Attribute *attr = &self->resident_attrs [i];
        cs__attribute__init (attr);
        attr->type = flags [i].type;
        attr->value_case = CS__ATTRIBUTE__VALUE_FLAG;
        attr->flag = flags [i].value;
        self->resident_attr_ptrs [i] = attr;
    }
    self->n_resident_attrs = sizeof flags / sizeof flags [0];
}

/*  Registers boards, their keys and workers with the scheduler and builds
 *  the ListKeys entries of resident keys (pointing into the boards' arrays).  */
static int
s_build_routing (s_frontend_t *self)
{
    size_t max = 0;
    for (size_t b = 0; b < self->args->n_boards; b++)
        max += self->args->boards [b]->n_keys;
    self->board_keys = calloc (max + 1, sizeof (s_board_key_t));
    if (!self->board_keys || !(self->scheduler = scheduler_new ()))
        return -1;
    s_resident_attrs (self);
    zconfig_t *weights = self->config->tenant_weights;
    for (zconfig_t *w = weights ? zconfig_child (weights) : NULL; w; w = zconfig_next (w))
        if (scheduler_tenant_weight (self->scheduler, zconfig_name (w), (unsigned) atoi (zconfig_value (w))))
            return -1;
    for (size_t b = 0; b < self->args->n_boards; b++) {
        board_t *board = self->args->boards [b];
        if (scheduler_board_add (self->scheduler, board->name) != (int) b)
            return -1;
        for (size_t k = 0; k < board->n_keys; k++)
            if (s_key_merge (self, b, k))
                scheduler_key_add (self->scheduler, b, board->keys [k].id, board->keys [k].id_len);
        for (int t = 0; t < board->threads; t++)
            if (scheduler_worker_add (self->scheduler, b) != (int) self->n_workers++)
                return -1;
    }
    return 0;
}

/*  keys/home and the pool of pre-generated RSA keys (when configured and a
 *  board can generate RSA material).  */
static int
s_keys_start (s_frontend_t *self)
{
    const broker_config_t *config = self->config;
    size_t gen_workers = 0;
    bool any = false;
    self->home_board = streq (config->keys_home, "keystore") ? -1 : s_board_index (self, config->keys_home);
    for (size_t i = 0; i < BROKER_POOL_SIZES; i++)
        any |= config->pool_rsa [i] > 0;
    for (size_t b = 0; b < self->args->n_boards; b++)
        if (board_generates (self->args->boards [b], CKK_RSA, false))
            gen_workers += (size_t) self->args->boards [b]->threads;
    if (!any)
        return 0;
    if (gen_workers == 0) {
        zsys_warning ("keys/pool-rsa-*: no board generates RSA keys as material: no pool");
        return 0;
    }
    self->pool = pool_new (config->pool_rsa);
    self->pool_max_running = gen_workers > 1 ? gen_workers / 2 : 1;
    if (!self->pool)
        return -1;
    size_t restored = 0;
    if (self->args->keystore && pool_store_restore (self->args->keystore, self->pool, &restored))
        zsys_warning ("pool: some keys sealed in the keystore could not be restored (see above)");
    if (restored)
        zsys_info ("pool: %zu pre-generated RSA keys restored from the keystore", restored);
    metrics_pool (self->args->metrics, METRICS_POOL_RESTORED, restored);
    return 0;
}

/*  Seals the pool's ready keys in the keystore at a stop (pool_store.h).  */
static void
s_pool_seal (s_frontend_t *self)
{
    size_t sealed = 0;
    if (!self->pool || !self->args->keystore)
        return;
    if (pool_store_seal (self->args->keystore, self->pool, &sealed))
        zsys_warning ("pool: not every pre-generated key could be sealed in the keystore (see above)");
    if (sealed)
        zsys_info ("pool: %zu pre-generated RSA keys sealed in the keystore for the next start", sealed);
}

/*  Creates, secures and binds the client ROUTER.  */
static int
s_router_bind (s_frontend_t *self)
{
    const broker_config_t *config = self->config;
    self->router = zsock_new (ZMQ_ROUTER);
    if (!self->router)
        return -1;
    zsock_set_maxmsgsize (self->router, CS_WIRE_MAX_MESSAGE);
    zsock_set_linger (self->router, 1000);
    /*  Per connection: at most rcvhwm requests wait inside libzmq while the
        frontend does not read (max-queue), then TCP pushes back on the
        client; at most sndhwm replies wait for a client that does not read,
        then further replies to it are dropped (ROUTER).  */
    zsock_set_rcvhwm (self->router, config->router_rcvhwm);
    zsock_set_sndhwm (self->router, config->router_sndhwm);
    if (config->curve) {
        zcert_t *cert = zcert_load (config->secret_key);
        if (!cert)
            return -1;
        zcert_apply (cert, self->router);
        zsock_set_curve_server (self->router, 1);
        zsock_set_zap_domain (self->router, S_ZAP_DOMAIN);
        /*  The serial is the first 8 bytes of the broker key, in hex: stable
            and printable (CK_TOKEN_INFO.serialNumber is 16 characters).  */
        cs_hex_encode (zcert_public_key (cert), 8, self->serial);
        zcert_destroy (&cert);
    }
    else {
        zsys_warning ("*** CURVE IS DISABLED (broker/curve/enabled = false): requests, PINs and "
                      "plaintexts travel UNENCRYPTED and any peer can connect ***");
        snprintf (self->serial, sizeof self->serial, "plaintext");
    }
    if (zsock_bind (self->router, "%s", config->endpoint) < 0) {
        zsys_error ("cannot bind %s: %s", config->endpoint, zmq_strerror (zmq_errno ()));
        return -1;
    }
    const char *bound = zsock_endpoint (self->router);
    self->endpoint = strdup (bound ? bound : config->endpoint);
    return self->endpoint ? 0 : -1;
}

static int
s_on_tenant_timer (zloop_t *loop, int timer_id, void *arg)
{
    s_default_tenant_reload (arg);
    return 0;
}

/*  The slow pool (broker/slow-threads, each with its own keystore
 *  connection), the cache of keys and tenant rows (keystore/key-cache) and
 *  the watch of the keystore file, or for a PostgreSQL keystore the
 *  listener of other writers' commits: without either nothing is cached (a
 *  change by cryptoserver-admin or another broker would go unseen).  */
static int
s_keystore_start (s_frontend_t *self)
{
    self->cache = ks_cache_new ((size_t) self->config->key_cache);
    self->slow = self->cache ? slow_pool_new (self->ks, (size_t) self->config->slow_threads, self->loop,
                                              s_slow_done, s_slow_discard, self) : NULL;
    if (!self->slow)
        return -1;
    if (keystore_is_url (self->config->keystore_path)) {
        //  A database other brokers share: LISTEN/NOTIFY, not inotify.
        self->listener = keystore_listener_new (self->ks);
        self->listener_seen = keystore_listener_changes (self->listener);
    }
    else
        self->watch = ks_watch_new (self->config->keystore_path);
    if (!self->watch && !self->listener) {
        zsys_warning ("keystore %s: keys and tenant rows are not cached: every job reads its row",
                      self->config->keystore_name);
        ks_cache_hold (self->cache);            /* for good */
    }
    return 0;
}

static int
s_start (s_frontend_t *self)
{
    self->ks = self->args->keystore;
    if (!(self->load = client_load_new ((size_t) self->config->max_client_bytes,
                                        (size_t) self->config->max_client_jobs)))
        return -1;
    if (s_build_mechs (self) || s_build_routing (self) || s_keys_start (self) || s_router_bind (self))
        return -1;
    if (!self->args->health
    ||  !(self->watch_boards = board_watch_new (self->args->health, self->scheduler, self->args->metrics,
                                                self->args->boards, self->args->n_boards, self->n_workers))
    ||  !(self->cross = cross_check_new (self->config->cross_check, self->args->boards, self->args->n_boards,
                                         self->watch_boards, self->args->metrics)))
        return -1;
    if (!self->config->curve)
        s_default_tenant_reload (self);
    self->backend = zsock_new (ZMQ_ROUTER);
    if (!self->backend || zsock_bind (self->backend, "%s", self->args->backend) < 0) {
        zsys_error ("cannot bind the worker endpoint %s", self->args->backend);
        return -1;
    }
    if (self->config->curve) {
        self->clients_watch = clients_watch_new (self->config->clients_dir);   /* before the read */
        s_clients_reload (self);
    }
    self->loop = zloop_new ();
    zloop_set_nonstop (self->loop, true);    /* SIGINT means drain, not stop */
    if (s_keystore_start (self))
        return -1;
    zloop_reader (self->loop, self->pipe, s_on_pipe, self);
    zloop_reader (self->loop, self->backend, s_on_backend, self);
    zloop_reader (self->loop, self->router, s_on_router, self);
    self->reading = true;
    if (self->clients_watch) {
        zmq_pollitem_t item = { NULL, clients_watch_fd (self->clients_watch), ZMQ_POLLIN, 0 };
        zloop_poller (self->loop, &item, s_on_clients_watch, self);
    }
    else
    if (self->config->curve)
        zloop_timer (self->loop, S_CLIENTS_RELOAD_MS, 0, s_on_clients_timer, self);
    if (self->config->stats_interval_ms > 0)
        zloop_timer (self->loop, (size_t) self->config->stats_interval_ms, 0, s_on_stats_timer, self);
    zloop_timer (self->loop, BOARD_WATCH_TICK_MS, 0, s_on_watch_timer, self);
    if (!self->config->curve)
        zloop_timer (self->loop, S_CLIENTS_RELOAD_MS, 0, s_on_tenant_timer, self);
    s_pool_refill (self);
    return 0;
}

static void
s_frontend_free (s_frontend_t *self)
{
    slow_pool_destroy (&self->slow);            /* before the loop it reads in */
    zloop_destroy (&self->loop);
    zsock_destroy (&self->router);
    zsock_destroy (&self->backend);
    for (work_item_t *item; self->scheduler && (item = scheduler_pop_low (self->scheduler)); ) {
        if (item->out) {
            OPENSSL_cleanse (item->out, item->out_len);
            free (item->out);
        }
        free (item);
    }
    for (s_request_t *request; self->load && (request = client_load_pop (self->load)); )
        s_request_destroy (&request);           /* deferred, never started */
    scheduler_destroy (&self->scheduler);
    cross_check_destroy (&self->cross);
    board_watch_destroy (&self->watch_boards);
    zhashx_destroy (&self->clients);
    free (self->mechs);
    free (self->mech_ptrs);
    for (size_t i = 0; i < self->n_board_keys; i++) {
        free (self->board_keys [i].info.ref);
        free (self->board_keys [i].info.home);
    }
    free (self->board_keys);
    s_pool_seal (self);
    pool_destroy (&self->pool);
    ks_watch_destroy (&self->watch);
    clients_watch_destroy (&self->clients_watch);
    keystore_listener_destroy (&self->listener);
    ks_cache_destroy (&self->cache);
    client_load_destroy (&self->load);
    free (self->default_tenant);
    free (self->endpoint);
}

void
frontend_actor (zsock_t *pipe, void *arg)
{
    s_frontend_t self = { .args = arg, .config = ((frontend_args_t *) arg)->config, .pipe = pipe };
    int rc = s_start (&self);
    zsock_signal (pipe, 0);
    zstr_send (pipe, rc == 0 ? self.endpoint : "");
    if (rc == 0)
        zloop_start (self.loop);
    else {
        char *command = zstr_recv (pipe);       /* wait for $TERM */
        zstr_free (&command);
    }
    s_frontend_free (&self);
}
