/*  frontend.c — the frontend actor: client ROUTER, allow-list, requests,
 *  work items to workers and replies back (the paper's Figure 3).  */
#include <dirent.h>
#include <inttypes.h>
#include <openssl/crypto.h>
#include <openssl/sha.h>
#include "cs_pin.h"
#include "cs_util.h"
#include "cs_wire.h"
#include "frontend.h"
#include "scheduler.h"
#include "ticket.h"

#define S_CLIENTS_RELOAD_MS 2000        /* allow-list re-read period */
#define S_ZAP_DOMAIN "cryptoserver"

bool frontend_verbose = false;

/*  One entry of the allow-list (clients.d).  */
typedef struct {
    char *name;
    char *tenant;
} s_client_t;

/*  The per-job storage of a request: its result and what the result points to.  */
typedef struct {
    Cs__Result result;
    work_item_t item;
    Cs__HelloResult hello;
    Cs__LoginResult login;
    Cs__ListKeysResult keys;
    unsigned char ticket [TICKET_LEN];
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
    s_slot_t *slots;
    Cs__Result **results;
    size_t pending;
} s_request_t;

typedef struct {
    const frontend_args_t *args;
    const broker_config_t *config;
    zsock_t *pipe;
    zsock_t *router;
    zsock_t *backend;
    zloop_t *loop;
    scheduler_t *scheduler;
    size_t n_workers;
    zhashx_t *clients;              /* Z85 key -> s_client_t */
    bool reading;                   /* the router is being polled */
    bool draining;
    size_t in_flight;               /* requests waiting for items */
    Cs__MechanismInfo *mechs;       /* Hello: union over boards */
    Cs__MechanismInfo **mech_ptrs;
    size_t n_mechs;
    Cs__KeyInfo *keys;              /* ListKeys: union over boards */
    Cs__KeyInfo **key_ptrs;
    size_t n_keys;
    char serial [17];
    char *endpoint;
} s_frontend_t;

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
        client->tenant = strdup (tenant ? tenant : self->config->tenants [0].name);
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
        if (!old || !zhashx_lookup (old, zhashx_cursor (fresh)))
            zsys_info ("client %s (tenant %s) allowed: %s", c->name, c->tenant,
                       (const char *) zhashx_cursor (fresh));
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

static int
s_on_clients_timer (zloop_t *loop, int timer_id, void *arg)
{
    s_clients_reload (arg);
    return 0;
}

/* ------------------------------------------------------------------ */
/*  Replies                                                            */

/*  Sends reply to the client at identity (kept by the caller).  */
static void
s_send_reply (s_frontend_t *self, zframe_t *identity, Cs__Reply *reply)
{
    size_t size = 0;
    uint8_t *data = cs_wire_encode (&reply->base, &size);
    if (!data) {
        zsys_error ("out of memory encoding a reply");
        return;
    }
    zframe_t *payload = zframe_new (data, size);
    OPENSSL_cleanse (data, size);           /* may hold decrypted plaintext */
    free (data);
    zframe_send (&identity, self->router, ZFRAME_MORE | ZFRAME_REUSE);
    zframe_send (&payload, self->router, 0);
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

static void
s_request_destroy (s_request_t **self_p)
{
    s_request_t *self = *self_p;
    if (!self)
        return;
    for (size_t i = 0; self->slots && i < self->req->n_jobs; i++) {
        work_item_t *item = &self->slots [i].item;
        if (item->out) {
            OPENSSL_cleanse (item->out, item->out_len);
            free (item->out);
        }
        OPENSSL_cleanse (self->slots [i].ticket, TICKET_LEN);
    }
    free (self->slots);
    free (self->results);
    if (self->req)
        cs__request__free_unpacked (self->req, NULL);
    zframe_destroy (&self->identity);
    free (self->client_key);
    free (self->name_copy);
    free (self->tenant);
    free (self);
    *self_p = NULL;
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
    s_send_reply (self, request->identity, &reply);
    s_request_destroy (request_p);
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
    if (self->draining && self->in_flight == 0)
        zstr_send (self->pipe, "DRAINED");
}

/* ------------------------------------------------------------------ */
/*  Work items                                                         */

/*  Stores an item's result in its request's slot and releases it.  */
static void
s_item_finish (s_frontend_t *self, work_item_t *item)
{
    s_request_t *request = item->request;
    Cs__Result *result = &request->slots [item->index].result;
    result->rv = item->rv;
    if (item->rv == CKR_OK) {
        result->kind_case = CS__RESULT__KIND_DATA;
        result->data.data = item->out;
        result->data.len = item->out_len;
    }
    s_request_release (self, request, true);
}

/*  Hands item to worker, or fails it unrun if its deadline passed (and then
 *  offers the worker the next waiting item).  */
static void
s_give (s_frontend_t *self, size_t worker, work_item_t *item)
{
    while (item && cs_clock_ms () > item->deadline) {
        item->rv = CKR_DEVICE_ERROR;
        if (frontend_verbose)
            zsys_debug ("job %zu of request %" PRIu64 ": deadline passed before a worker took it",
                        item->index, ((s_request_t *) item->request)->req->request_id);
        s_item_finish (self, item);
        item = scheduler_worker_ready (self->scheduler, worker);
    }
    if (item) {
        zstr_sendfm (self->backend, "w%zu", worker);
        zsock_send (self->backend, "p", item);
    }
}

/*  Resumes reading requests when the queue has room again.  */
static void
s_flow_control (s_frontend_t *self)
{
    bool full = scheduler_queued (self->scheduler) >= (size_t) self->config->max_queue;
    if (self->reading && (full || self->draining)) {
        zloop_reader_end (self->loop, self->router);
        self->reading = false;
    }
}

static int s_on_router (zloop_t *loop, zsock_t *reader, void *arg);

static void
s_flow_resume (s_frontend_t *self)
{
    bool full = scheduler_queued (self->scheduler) >= (size_t) self->config->max_queue;
    if (!self->reading && !full && !self->draining) {
        zloop_reader (self->loop, self->router, s_on_router, self);
        self->reading = true;
    }
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
    if (item) {
        scheduler_done (self->scheduler, item->board, item->rv != CKR_OK);
        s_item_finish (self, item);
    }
    s_give (self, (size_t) id, scheduler_worker_ready (self->scheduler, (size_t) id));
    s_flow_resume (self);
    return 0;
}

/* ------------------------------------------------------------------ */
/*  Jobs answered by the frontend                                      */

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
    slot->result.rv = CKR_OK;
    slot->result.kind_case = CS__RESULT__KIND_HELLO;
    slot->result.hello = hello;
}

static void
s_job_list_keys (s_frontend_t *self, s_request_t *request, s_slot_t *slot)
{
    cs__list_keys_result__init (&slot->keys);
    slot->keys.n_keys = self->n_keys;
    slot->keys.keys = self->key_ptrs;
    slot->result.rv = CKR_OK;
    slot->result.kind_case = CS__RESULT__KIND_KEYS;
    slot->result.keys = &slot->keys;
}

/*  Checks the PIN of the client's tenant (cs_pin.h, ~50 ms of PBKDF2 in
 *  this thread) and returns a ticket bound to the client key.  */
static CK_RV
s_login (s_frontend_t *self, s_request_t *request, const Cs__LoginJob *job, s_slot_t *slot)
{
    const broker_tenant_t *tenant = broker_config_tenant (self->config, request->tenant);
    if (job->user_type != CKU_USER && job->user_type != CKU_SO)
        return CKR_USER_TYPE_INVALID;
    if (!tenant) {
        zsys_warning ("login: client %s names tenant '%s', which is not configured",
                      request->client_name, request->tenant);
        return CKR_USER_PIN_NOT_INITIALIZED;
    }
    const char *stored = job->user_type == CKU_USER ? tenant->user_pin : tenant->so_pin;
    if (!stored)
        return CKR_USER_PIN_NOT_INITIALIZED;
    if (!cs_pin_verify (stored, job->pin.data, job->pin.len)) {
        zsys_warning ("login: wrong %s PIN from client %s (tenant %s)",
                      job->user_type == CKU_USER ? "user" : "SO", request->client_name, tenant->name);
        return CKR_PIN_INCORRECT;
    }
    if (ticket_make (self->config->ticket_key, request->client_key, tenant->name,
                     job->user_type, slot->ticket))
        return CKR_DEVICE_ERROR;
    zsys_info ("login: client %s (tenant %s) as %s", request->client_name, tenant->name,
               job->user_type == CKU_USER ? "user" : "SO");
    cs__login_result__init (&slot->login);
    slot->login.ticket.data = slot->ticket;
    slot->login.ticket.len = TICKET_LEN;
    slot->result.kind_case = CS__RESULT__KIND_LOGIN;
    slot->result.login = &slot->login;
    return CKR_OK;
}

/*  Turns a sign or decrypt job into a work item and routes it.  */
static void
s_job_crypto (s_frontend_t *self, s_request_t *request, size_t index)
{
    s_slot_t *slot = &request->slots [index];
    const Cs__Job *job = request->req->jobs [index];
    work_item_t *item = &slot->item;
    ProtobufCBinaryData key_id = job->kind_case == CS__JOB__KIND_SIGN
                               ? job->sign->key_id : job->decrypt->key_id;
    if (!request->ticket_ok) {
        slot->result.rv = CKR_USER_NOT_LOGGED_IN;
        return;
    }
    *item = (work_item_t) { .request = request, .index = index, .job = job,
                            .key_id = key_id.data, .key_id_len = key_id.len,
                            .deadline = request->deadline };
    size_t worker = 0;
    request->pending++;
    scheduler_outcome_t outcome = scheduler_submit (self->scheduler, item, &worker);
    if (outcome == SCHEDULER_ASSIGNED)
        s_give (self, worker, item);
    else
    if (outcome == SCHEDULER_NO_BOARD) {
        request->pending--;
        slot->result.rv = CKR_KEY_HANDLE_INVALID;
    }
}

static void
s_job (s_frontend_t *self, s_request_t *request, size_t index)
{
    s_slot_t *slot = &request->slots [index];
    const Cs__Job *job = request->req->jobs [index];
    cs__result__init (&slot->result);
    request->results [index] = &slot->result;
    switch (job->kind_case) {
        case CS__JOB__KIND_HELLO:
            s_job_hello (self, request, slot);
            break;
        case CS__JOB__KIND_LOGIN:
            slot->result.rv = s_login (self, request, job->login, slot);
            break;
        case CS__JOB__KIND_LIST_KEYS:
            s_job_list_keys (self, request, slot);
            break;
        case CS__JOB__KIND_SIGN:
        case CS__JOB__KIND_DECRYPT:
            s_job_crypto (self, request, index);
            break;
        default:
            slot->result.rv = CKR_FUNCTION_NOT_SUPPORTED;      /* cs_wire rejects these */
    }
}

/* ------------------------------------------------------------------ */
/*  Requests                                                           */

/*  Identifies the sender: its CURVE key must be in the current allow-list.
 *  Fills key, name and tenant; returns -1 (after logging) when refused.  */
static int
s_identify (s_frontend_t *self, zframe_t *body, s_request_t *request)
{
    if (!self->config->curve) {
        request->client_key = strdup ("");
        request->name_copy = strdup ("plaintext");
        request->tenant = strdup (self->config->tenants [0].name);
    }
    else {
        const char *key = zframe_meta (body, "User-Id");
        s_client_t *client = key ? zhashx_lookup (self->clients, key) : NULL;
        if (!client) {
            zsys_warning ("request refused: client key %s is not in the allow-list %s",
                          key ? key : "(none)", self->config->clients_dir);
            return -1;
        }
        request->client_key = strdup (key);
        request->name_copy = strdup (client->name);
        request->tenant = strdup (client->tenant);
    }
    request->client_name = request->name_copy;
    return request->client_key && request->name_copy && request->tenant ? 0 : -1;
}

/*  Decodes and checks the request; on failure replies with an error.  */
static int
s_request_decode (s_frontend_t *self, zframe_t *body, s_request_t *request)
{
    const char *why = NULL;
    request->req = cs_wire_request_decode (zframe_data (body), zframe_size (body), &why);
    if (!request->req) {
        zsys_warning ("bad request from client %s: %s", request->client_name, why);
        s_send_error (self, request->identity, 0, CKR_DEVICE_ERROR, why);
        return -1;
    }
    Cs__Request *req = request->req;
    request->version = cs_wire_version_choose (req->version_min, req->version_max);
    if (request->version == 0) {
        char error [160];
        snprintf (error, sizeof error, "protocol version mismatch: client speaks %u..%u, "
                  "broker speaks %u..%u", req->version_min, req->version_max,
                  CS_PROTOCOL_VERSION_MIN, CS_PROTOCOL_VERSION);
        zsys_warning ("client %s: %s", request->client_name, error);
        s_send_error (self, request->identity, req->request_id, CKR_DEVICE_ERROR, error);
        return -1;
    }
    return 0;
}

/*  Prepares the per-job storage, deadline and ticket check.  */
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
    request->deadline = cs_clock_ms ()
                      + (req->deadline_ms ? (int64_t) req->deadline_ms : (int64_t) self->config->default_deadline_ms);
    request->ticket_ok = ticket_check (self->config->ticket_key, request->client_key,
                                       request->tenant, CKU_USER, req->ticket.data, req->ticket.len);
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

/*  Handles one request: identity, decode, then every job; answers at once
 *  unless items are out with workers.  */
static void
s_request_handle (s_frontend_t *self, zframe_t **identity_p, zframe_t *body, bool extra_frames)
{
    s_request_t *request = calloc (1, sizeof *request);
    if (!request)
        return;
    request->identity = *identity_p;
    *identity_p = NULL;
    if (s_identify (self, body, request)) {
        s_send_error (self, request->identity, s_peek_request_id (body), CKR_DEVICE_ERROR,
                      "client key not allowed");
        goto done;
    }
    if (extra_frames) {
        zsys_warning ("bad request from client %s: more than one frame", request->client_name);
        s_send_error (self, request->identity, s_peek_request_id (body), CKR_DEVICE_ERROR,
                      "request must be one frame");
        goto done;
    }
    if (s_request_decode (self, body, request) || s_request_prepare (self, request))
        goto done;
    request->pending = 1;                   /* held while jobs are routed */
    for (size_t i = 0; i < request->req->n_jobs; i++)
        s_job (self, request, i);
    if (request->pending > 1)
        self->in_flight++;
    s_request_release (self, request, request->pending > 1);
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
        zsys_info ("draining: no new requests; %zu in flight", self->in_flight);
        if (self->in_flight == 0)
            zstr_send (self->pipe, "DRAINED");
    }
    else
    if (streq (command, "STATS"))
        s_stats (self, true);
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
    return 0;
}

/*  Adds key (from a board) to the ListKeys union, counting boards.  */
static void
s_key_merge (s_frontend_t *self, const cs_key_info_t *key)
{
    for (size_t i = 0; i < self->n_keys; i++)
        if (self->keys [i].id.len == key->id_len && !memcmp (self->keys [i].id.data, key->id, key->id_len)) {
            self->keys [i].boards++;
            return;
        }
    Cs__KeyInfo *out = &self->keys [self->n_keys];
    cs__key_info__init (out);
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
    self->key_ptrs [self->n_keys++] = out;
}

/*  Registers boards, their keys and workers with the scheduler and builds
 *  the ListKeys union (pointing into the boards' key arrays).  */
static int
s_build_routing (s_frontend_t *self)
{
    size_t max = 0;
    for (size_t b = 0; b < self->args->n_boards; b++)
        max += self->args->boards [b]->n_keys;
    self->keys = calloc (max + 1, sizeof (Cs__KeyInfo));
    self->key_ptrs = calloc (max + 1, sizeof (Cs__KeyInfo *));
    if (!self->keys || !self->key_ptrs || !(self->scheduler = scheduler_new ()))
        return -1;
    for (size_t b = 0; b < self->args->n_boards; b++) {
        board_t *board = self->args->boards [b];
        if (scheduler_board_add (self->scheduler, board->name) != (int) b)
            return -1;
        for (size_t k = 0; k < board->n_keys; k++) {
            scheduler_key_add (self->scheduler, b, board->keys [k].id, board->keys [k].id_len);
            s_key_merge (self, &board->keys [k]);
        }
        for (int t = 0; t < board->threads; t++)
            if (scheduler_worker_add (self->scheduler, b) != (int) self->n_workers++)
                return -1;
    }
    return 0;
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
s_start (s_frontend_t *self)
{
    if (s_build_mechs (self) || s_build_routing (self) || s_router_bind (self))
        return -1;
    self->backend = zsock_new (ZMQ_ROUTER);
    if (!self->backend || zsock_bind (self->backend, "%s", self->args->backend) < 0) {
        zsys_error ("cannot bind the worker endpoint %s", self->args->backend);
        return -1;
    }
    if (self->config->curve)
        s_clients_reload (self);
    self->loop = zloop_new ();
    zloop_set_nonstop (self->loop, true);    /* SIGINT means drain, not stop */
    zloop_reader (self->loop, self->pipe, s_on_pipe, self);
    zloop_reader (self->loop, self->backend, s_on_backend, self);
    zloop_reader (self->loop, self->router, s_on_router, self);
    self->reading = true;
    if (self->config->curve)
        zloop_timer (self->loop, S_CLIENTS_RELOAD_MS, 0, s_on_clients_timer, self);
    if (self->config->stats_interval_ms > 0)
        zloop_timer (self->loop, (size_t) self->config->stats_interval_ms, 0, s_on_stats_timer, self);
    return 0;
}

static void
s_frontend_free (s_frontend_t *self)
{
    zloop_destroy (&self->loop);
    zsock_destroy (&self->router);
    zsock_destroy (&self->backend);
    scheduler_destroy (&self->scheduler);
    zhashx_destroy (&self->clients);
    free (self->mechs);
    free (self->mech_ptrs);
    free (self->keys);
    free (self->key_ptrs);
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
