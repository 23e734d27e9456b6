/*  slow_link.c — the frontend's side of the slow pool (slow_pool.h,
 *  slow_jobs.h) and of the keystore cache (ks_cache.h): jobs handed off
 *  with a pending count on their request, and their results routed back to
 *  the room that asked; the cache held or dropped when another writer
 *  changed the keystore (file watch, or PostgreSQL LISTEN/NOTIFY).
 *
 *  Owns: frontend_t.slow, .cache, .watch, .listener.
 *  May call: request.c (fe_request_run, fe_request_release), route.c
 *  (fe_key_read_done), inventory.c (fe_list_keys_done), keymgmt_jobs.c
 *  (fe_key_job_done, fe_generated_done), login.c (*_done).  */
#include "ks_watch.h"
#include "ks_settle.h"
#include "quota.h"
#include "metrics_quota.h"
#include "frontend_int.h"

/*  A slow job of `kind` for job `index` of request (NULL: a job of no
 *  request), or NULL when out of memory.  Fill its inputs, then fe_slow_go.  */
slow_job_t *
fe_slow_new (fe_request_t *request, size_t index, slow_kind_t kind)
{
    return slow_job_new (kind, request, index,
                         request && index < request->req->n_jobs ? request->req->jobs [index] : NULL,
                         request ? request->tenant : NULL);
}

/*  Hands a slow job to the pool; it comes back to fe_slow_done.  A job of a
 *  request job holds one more pending count of the request until then
 *  (its result waits as FE_CKR_PENDING).  */
CK_RV
fe_slow_go (frontend_t *self, slow_job_t *job)
{
    fe_request_t *request = job->request;
    quota_limits_t limits = { 0 };
    const char *bad = NULL;
    if (request) {      /* key jobs follow the tenant's usage rules (keyattrs_usage_set) and quotas */
        job->usage = broker_config_usage (self->config, request->tenant);
        if (quota_limits_read (self->config->root, request->tenant, &limits, &bad) == 0) {
            job->max_keys = limits.max_keys;
            job->max_objects = limits.max_objects;
        }
    }
    if (request && job->kind != SLOW_TENANT) {
        request->pending++;
        request->slots [job->index].result.rv = FE_CKR_PENDING;
    }
    slow_pool_submit (self->slow, &job->base);
    return FE_CKR_PENDING;
}

/*  The keystore file is being written (ks_watch.h), or another process
 *  committed to the PostgreSQL keystore: the cache is held (not used)
 *  until a slow-pool thread got the write lock once, the writer having
 *  committed, and read the tenants' change epochs (SLOW_SETTLE,
 *  fe_slow_done); the tenants whose epoch moved are dropped then
 *  (ks_cache_settle).  Called before every request looks at the cache: a change made
 *  before a request was sent is seen by it.  */
void
fe_keystore_check (frontend_t *self)
{
    if (self->listener) {           /* PostgreSQL: notified after the commit */
        uint64_t changes = keystore_listener_changes (self->listener), seen = self->listener_seen;
        self->listener_seen = changes;
        if (changes == seen)
            return;
    }
    else
    if (!self->watch || !ks_watch_changed (self->watch))
        return;
    slow_job_t *settle = self->settle ? fe_slow_new (NULL, 0, SLOW_SETTLE) : NULL;
    if (settle)
        settle->settle = self->settle;
    else {
        ks_cache_drop_all (self->cache);
        return;
    }
    ks_cache_hold (self->cache);
    fe_slow_go (self, settle);
}

/*  A slow job is back (slow_pool.h): its result goes to its job, and the
 *  request is released (a keystore key read goes on to a worker).  */
void
fe_slow_done (slow_item_t *item, void *arg)
{
    frontend_t *self = arg;
    slow_job_t *job = (slow_job_t *) item;
    fe_request_t *request = job->request;
    fe_slot_t *slot = request ? &request->slots [job->index] : NULL;
    metrics_key_cache_dropped (self->args->metrics,         /* this broker's own commits */
                               ks_cache_own_changes (self->cache, job->own, job->n_own));
    if (job->quota_refused && request)      /* a key or object over its tenant's quota */
        metrics_quota_count (metrics_quota_tenant (metrics_quota (self->args->metrics), request->tenant),
                             (metrics_quota_limit_t) (job->quota_refused - 1), true, 1);
    switch (job->kind) {
        case SLOW_AUDIT:
            broker_audit_done (self->audit, job->audit);
            job->audit = NULL;
            break;
        case SLOW_SETTLE:       /* the tenants another writer changed are dropped (ks_cache.h) */
            metrics_key_cache_dropped (self->args->metrics,
                                       ks_cache_settle (self->cache, job->rc, job->changes, job->n_changes,
                                                        job->foreign));
            break;
        case SLOW_TENANT:
            request->keystore_down = job->rc == KEYSTORE_UNAVAILABLE;
            if (job->rc == 0) {
                ks_cache_tenant_put (self->cache, job->token, request->tenant, &job->state);
                request->tenant_state = job->state;
                request->has_state = true;
            }
            fe_request_run (self, request, true);
            break;
        case SLOW_KEY:
            fe_key_read_done (self, request, job);
            break;
        case SLOW_LIST_KEYS:
            fe_list_keys_done (self, request, slot, job);
            fe_request_release (self, request, true);
            break;
        case SLOW_KEY_JOB:
            fe_key_job_done (self, request, slot, job);
            fe_request_release (self, request, true);
            break;
        case SLOW_GENERATED:
            fe_generated_done (self, request, slot, job);
            fe_request_release (self, request, true);
            break;
        case SLOW_OBJECT_JOB:
            objjobs_result (&slot->result, job->rv, &slot->objects, &job->objects);
            fe_request_release (self, request, true);
            break;
        default:
            slot->result.rv = job->kind == SLOW_LOGIN ? fe_login_done (self, request, slot, job)
                            : job->kind == SLOW_INIT_PIN ? fe_init_pin_done (self, request, job)
                            : fe_set_pin_done (self, request, job);
            fe_request_release (self, request, true);
    }
    slow_job_destroy (&job);
}

/*  A slow job that will not come back through fe_slow_done (the frontend is
 *  ending): freed, wiping what it holds; its request is left unanswered.  */
static void
s_slow_discard (slow_item_t *item, void *arg)
{
    frontend_t *self = arg;
    slow_job_t *job = (slow_job_t *) item;
    if (job->kind == SLOW_AUDIT) {          //  kept for the last flush (fe_audit_stop)
        broker_audit_done (self->audit, job->audit);
        job->audit = NULL;
    }
    slow_job_destroy (&job);
}

/*  The slow pool (broker/slow-threads, each with its own keystore
 *  connection), the cache of keys and tenant rows (keystore/key-cache) and
 *  the watch of the keystore file, or for a PostgreSQL keystore the
 *  listener of other writers' commits: without either nothing is cached (a
 *  change by cryptoserver-admin or another broker would go unseen).  */
int
fe_keystore_start (frontend_t *self)
{
    self->cache = ks_cache_new ((size_t) self->config->key_cache);
    self->slow = self->cache ? slow_pool_new (self->ks, (size_t) self->config->slow_threads, self->loop,
                                              fe_slow_done, s_slow_discard, self) : NULL;
    if (!self->slow || fe_audit_start (self) != 0)
        return -1;
    if (keystore_is_url (self->config->keystore_path)) {
        //  A database other brokers share: LISTEN/NOTIFY, not inotify.
        self->listener = keystore_listener_new (self->ks);
        self->listener_seen = keystore_listener_changes (self->listener);
    }
    else
        self->watch = ks_watch_new (self->config->keystore_path);
    keystore_change_t *changes = NULL;
    size_t n = 0;
    if ((self->watch || self->listener) && (self->settle = ks_settle_new (self->ks, self->listener, &changes, &n)))
        ks_cache_epochs_baseline (self->cache, changes, n);
    keystore_changes_free (&changes, n);
    if (!self->settle) {
        ks_watch_destroy (&self->watch);        /* nothing can tell what changed */
        keystore_listener_destroy (&self->listener);
    }
    if (!self->watch && !self->listener) {
        zsys_warning ("keystore %s: keys and tenant rows are not cached: every job reads its row",
                      self->config->keystore_name);
        ks_cache_hold (self->cache);            /* for good */
    }
    return 0;
}

/* ---- the audit log (audit.h) ------------------------------------------- */

/*  Hands what the audit noted to the slow pool (at most one batch out).  */
static void
s_audit_flush (frontend_t *self)
{
    broker_audit_batch_t *batch = broker_audit_take (self->audit, false);
    slow_job_t *job = batch ? fe_slow_new (NULL, 0, SLOW_AUDIT) : NULL;
    if (batch && !job)
        broker_audit_done (self->audit, batch);         //  kept for the next interval
    if (job) {
        job->audit = batch;
        fe_slow_go (self, job);
    }
}

static int
s_on_audit_timer (zloop_t *loop, int timer_id, void *arg)
{
    s_audit_flush ((frontend_t *) arg);
    return 0;
}

/*  The audit (the audit section of broker.conf), its "broker-start" record and its
 *  flush timer; off when the config says so.  0, or -1 after the E: line.  */
int
fe_audit_start (frontend_t *self)
{
    bool off = false;
    self->audit = broker_audit_new (self->config, self->args->metrics, &off);
    if (!self->audit)
        return off ? 0 : -1;
    broker_audit_event (self->audit, NULL, NULL, NULL, "broker-start", NULL, NULL, CKR_OK);
    if (zloop_timer (self->loop, broker_audit_interval_ms (self->audit), 0, s_on_audit_timer, self) < 0)
        return -1;
    return 0;
}

/*  After the slow pool stopped: the "broker-stop" record and what is left,
 *  with a final checkpoint, appended with the frontend's own keystore.  */
void
fe_audit_stop (frontend_t *self)
{
    if (!self->audit)
        return;
    broker_audit_event (self->audit, NULL, NULL, NULL, "broker-stop", NULL, NULL, CKR_OK);
    broker_audit_batch_t *batch = broker_audit_take (self->audit, true);
    if (batch && self->ks) {
        broker_audit_run (batch, self->ks);
        broker_audit_done (self->audit, batch);
    }
    else
        broker_audit_done (NULL, batch);
    broker_audit_destroy (&self->audit);
}
