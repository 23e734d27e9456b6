/*  admission.c — who may send and when a request may start: the
 *  allow-list (clients.d: CURVE key -> client name and tenant), the
 *  default tenant of plaintext mode, the bytes each client has queued
 *  (broker/max-client-bytes), and the per-client backlog with fair shares
 *  (broker/max-client-jobs, broker/max-queue: docs/CONTRACTS.md "Fair
 *  shares").
 *
 *  It charges (fe_admission_charge: a CK_RV that refuses) and decides
 *  with a verdict (fe_admission_verdict: the tenant's quota takes it,
 *  admit, queue); the request room (request.c) acts on it: admission
 *  starts no request.
 *
 *  Owns: fe_admission_t (private here: the allow-list, the default
 *  tenant, the watch of clients.d and their timers), frontend_t.load and
 *  the reading flag of the router (flow control).
 *  May call: job_kinds.c (which jobs go to a worker), quota_link.c (the
 *  tenant's quota), reply.c (fe_log_due), the scheduler's queue depth,
 *  client_load.h.  */
#include <dirent.h>
#include <inttypes.h>
#include "clients_watch.h"
#include "pool_store.h"
#include "frontend_int.h"

#define S_CLIENTS_RELOAD_MS 2000        /* allow-list re-read period without inotify */

/*  Who may send, and as which tenant.  */
struct _fe_admission_t {
    zhashx_t *clients;              /* Z85 key -> s_client_t */
    char *default_tenant;           /* first tenant by name, for plaintext clients only */
    clients_watch_t *watch;         /* changes of clients.d, or NULL: re-read on a timer */
};

/*  One entry of the allow-list (clients.d).  */
typedef struct {
    char *name;
    char *tenant;                   /* NULL: none, its requests are refused */
} s_client_t;

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
s_client_load (frontend_t *self, zhashx_t *map, const char *dir, const char *file)
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
s_clients_reload (frontend_t *self)
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
    s_clients_diff (self->admission->clients, map);
    zhashx_destroy (&self->admission->clients);
    self->admission->clients = map;
}

/*  Re-reads the default tenant: the first tenant of the keystore by name.  */
static void
s_default_tenant_reload (frontend_t *self)
{
    char **names = keystore_tenant_list (self->ks);
    size_t skip = 0;
    while (names && names [skip] && pool_store_reserved (names [skip]))
        skip++;
    char *first = names && names [skip] ? strdup (names [skip]) : NULL;
    for (size_t i = 0; names && names [i]; i++)
        free (names [i]);
    free (names);
    free (self->admission->default_tenant);
    self->admission->default_tenant = first;
}

/*  Re-reads clients.d when it changed (clients_watch.h): called before
 *  every request's sender is looked up, and when the watch is readable.  */
static void
s_clients_check (frontend_t *self)
{
    if (self->admission->watch && clients_watch_changed (self->admission->watch))
        s_clients_reload (self);
}

/*  Identifies the sender: its CURVE key must be in the current allow-list
 *  and its certificate must name its tenant (issue #7: no client falls back
 *  to some tenant; plaintext, a test-only mode, gets the first tenant by
 *  name).  Fills key, name and tenant; returns -1 (after logging, with the
 *  reason for the client in *why_p) when refused.  */
int
fe_identify (frontend_t *self, zframe_t *body, fe_request_t *request, const char **why_p)
{
    *why_p = "client key not allowed";
    if (!self->config->curve) {
        request->client_key = strdup ("");
        request->name_copy = strdup ("plaintext");
        request->tenant = strdup (self->admission->default_tenant ? self->admission->default_tenant : "");
    }
    else {
        const char *key = zframe_meta (body, "User-Id");
        s_clients_check (self);
        s_client_t *client = key ? zhashx_lookup (self->admission->clients, key) : NULL;
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

/*  The bytes a decoded request holds while it waits: its frame's size (the
 *  decoded copy is about as big) and the per-job bookkeeping.  */
static size_t
s_request_weight (zframe_t *body, const Cs__Request *req)
{
    return zframe_size (body) + sizeof (fe_request_t)
         + req->n_jobs * (sizeof (fe_slot_t) + sizeof (Cs__Result *) + sizeof (Cs__Job));
}

/*  Charges the request to its client (broker/max-client-bytes): the first
 *  part of admission, before its per-job storage is made.  CKR_OK;
 *  CKR_HOST_MEMORY; or over the limit CKR_DEVICE_MEMORY, logged
 *  (rate-limited) with who it was: the caller refuses the request with it
 *  and *why_p (static), the reason for the client's error reply.  */
CK_RV
fe_admission_charge (frontend_t *self, zframe_t *body, fe_request_t *request, const char **why_p)
{
    size_t weight = s_request_weight (body, request->req);
    char hex [2 * 256 + 1];
    const char *client = request->client_key;
    if (!*client) {             /* plaintext: the connection is the client */
        size_t len = zframe_size (request->identity) < 256 ? zframe_size (request->identity) : 256;
        cs_hex_encode (zframe_data (request->identity), len, hex);
        client = hex;
    }
    *why_p = "out of memory";
    if (!(request->load_key = strdup (client)))
        return CKR_HOST_MEMORY;
    if (client_load_charge (self->load, client, weight) == 0) {
        request->load = self->load;
        request->charged = weight;
        return CKR_OK;
    }
    if (fe_log_due (self, request, "max-client-bytes"))
        zsys_warning ("client %s (tenant %s): %zu bytes queued, request %" PRIu64 " of %zu bytes "
                      "over broker/max-client-bytes %d: answered with CKR_DEVICE_MEMORY",
                      request->client_name, request->tenant, client_load_bytes (self->load, client),
                      request->req->request_id, weight, self->config->max_client_bytes);
    *why_p = "client over its queued-bytes limit (broker/max-client-bytes)";
    return CKR_DEVICE_MEMORY;
}

/*  True when the job queue is at broker/max-queue.  */
static bool
s_queue_full (frontend_t *self)
{
    return scheduler_queued (self->scheduler) >= (size_t) self->config->max_queue;
}

/*  Admission's verdict on a charged and prepared request: FE_QUOTA when
 *  its tenant's quota took it (it waits for room in flight or tokens, and
 *  `pass` gets it back when its turn comes; or it could not start within
 *  its deadline and was answered and freed: quota_link.c), FE_ADMIT (start
 *  it now), or FE_QUEUE when the client has broker/max-client-jobs jobs
 *  out or older requests waiting, or when it needs a worker and the queue
 *  is at max-queue (docs/CONTRACTS.md "Fair shares").  The caller acts on
 *  FE_ADMIT and FE_QUEUE: starts or holds (fe_admission_hold) it.  */
fe_verdict_t
fe_admission_verdict (frontend_t *self, fe_request_t *request, fe_quota_pass_fn *pass)
{
    if (fe_quota_admit (self, request, pass))
        return FE_QUOTA;
    if (client_load_may_start (self->load, request->load_key)
    &&  !(s_queue_full (self) && fe_jobs_any (request->req, FE_KIND_WORKER)))
        return FE_ADMIT;
    return FE_QUEUE;
}

/*  Keeps a request of verdict FE_QUEUE in its client's backlog (it counts
 *  in in_flight: a drain waits for it) until fe_admission_next gives it
 *  back.  0; -1 when out of memory (the request is not kept: the caller
 *  refuses it).  */
int
fe_admission_hold (frontend_t *self, fe_request_t *request)
{
    if (client_load_defer (self->load, request->load_key, request))
        return -1;
    self->in_flight++;
    if (fe_log_due (self, request, "max-client-jobs"))
        zsys_info ("client %s (tenant %s): %zu jobs out, %zu requests waiting: its requests wait "
                   "(broker/max-client-jobs %d, broker/max-queue %d)", request->client_name, request->tenant,
                   client_load_jobs (self->load, request->load_key),
                   client_load_client_deferred (self->load, request->load_key),
                   self->config->max_client_jobs, self->config->max_queue);
    return 0;
}

/*  The next held request that may start now (its client under its cap,
 *  round robin across clients, while the queue has room), taken from the
 *  backlog (it is still counted in in_flight); NULL when none.  */
fe_request_t *
fe_admission_next (frontend_t *self)
{
    if (client_load_deferred (self->load) == 0 || s_queue_full (self))
        return NULL;
    return client_load_next (self->load);
}

/*  Stops reading requests when the broker drains.  A full queue
 *  (broker/max-queue) or a client at its caps does not stop the reading:
 *  such requests wait in their client's backlog (fe_admission_hold), so
 *  only the flooding client is slowed (issue #9).  */
void
fe_flow_control (frontend_t *self)
{
    fe_flow_depth (self);
    if (self->reading && self->draining) {
        zloop_reader_end (self->loop, self->router);
        self->reading = false;
    }
}

/*  The queue depth gauges (metrics.h), after jobs came back.  */
void
fe_flow_depth (frontend_t *self)
{
    metrics_queue_depth (self->args->metrics, scheduler_queued (self->scheduler),
                         scheduler_queued_low (self->scheduler));
}

static int
s_on_clients_timer (zloop_t *loop, int timer_id, void *arg)
{
    s_clients_reload (arg);
    return 0;
}

static int
s_on_clients_watch (zloop_t *loop, zmq_pollitem_t *item, void *arg)
{
    s_clients_check (arg);
    return 0;
}

static int
s_on_tenant_timer (zloop_t *loop, int timer_id, void *arg)
{
    s_default_tenant_reload (arg);
    return 0;
}

/*  Reads who may send: with CURVE the allow-list (clients.d), re-read when
 *  its watch says it changed or every S_CLIENTS_RELOAD_MS without one;
 *  without CURVE the default tenant (the first by name), re-read on the
 *  same period.  Registers its poller and timers on self->loop.  0, or -1
 *  when out of memory.  */
int
fe_admission_start (frontend_t *self)
{
    if (!(self->admission = calloc (1, sizeof *self->admission)))
        return -1;
    if (!self->config->curve) {
        s_default_tenant_reload (self);
        zloop_timer (self->loop, S_CLIENTS_RELOAD_MS, 0, s_on_tenant_timer, self);
        return 0;
    }
    self->admission->watch = clients_watch_new (self->config->clients_dir);     /* before the read */
    s_clients_reload (self);
    if (self->admission->watch) {
        zmq_pollitem_t item = { NULL, clients_watch_fd (self->admission->watch), ZMQ_POLLIN, 0 };
        zloop_poller (self->loop, &item, s_on_clients_watch, self);
    }
    else
        zloop_timer (self->loop, S_CLIENTS_RELOAD_MS, 0, s_on_clients_timer, self);
    return 0;
}

void
fe_admission_free (frontend_t *self)
{
    if (!self->admission)
        return;
    zhashx_destroy (&self->admission->clients);
    clients_watch_destroy (&self->admission->watch);
    free (self->admission->default_tenant);
    free (self->admission);
    self->admission = NULL;
}
