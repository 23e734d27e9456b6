/*  slow_link.c — the frontend's side of the slow pool (slow_pool.h,
 *  slow_jobs.h) and of the keystore cache (ks_cache.h): jobs handed off
 *  with a pending count on their request, and their results handed back to
 *  the completion (`done`) the room that made the job set; the cache held
 *  or dropped when another writer changed the keystore (file watch, or
 *  PostgreSQL LISTEN/NOTIFY).  It sits below the job rooms and calls none.
 *
 *  Owns: frontend_t.slow, .cache, .keystore_watch (fe_keystore_watch_t,
 *  private here), the audit log.
 *  May call: slow_pool.h, slow_jobs.h, ks_cache.h, ks_settle.h, ks_watch.h,
 *  quota.h, metrics_quota.h, audit.h.  */
#include "ks_watch.h"
#include "ks_settle.h"
#include "quota.h"
#include "metrics_quota.h"
#include "frontend_int.h"

/*  Who else changes the keystore: the watch of its file, or for a
 *  PostgreSQL keystore the listener of other writers' commits; neither:
 *  nothing is cached.  */
struct _fe_keystore_watch_t {
    ks_watch_t *file;               /* changes of the keystore file, or NULL */
    keystore_listener_t *listener;  /* PostgreSQL keystore: other writers' commits (instead of file) */
    uint64_t listener_seen;         /* keystore_listener_changes when the cache was last dropped */
};

/*  A slow job of `kind` for job `index` of request (NULL: a job of no
 *  request) whose completion is `done` (called with the frontend when the
 *  job is back), or NULL when out of memory.  Fill its inputs, then
 *  fe_slow_go.  */
slow_job_t *
fe_slow_new (frontend_t *self, fe_request_t *request, size_t index, slow_kind_t kind,
             fe_slow_done_fn *done)
{
    slow_job_t *job = slow_job_new (kind, request, index,
                                    request && index < request->req->n_jobs ? request->req->jobs [index] : NULL,
                                    request ? request->tenant : NULL);
    if (job) {
        job->done = done;
        job->done_arg = self;
    }
    return job;
}

/*  Hands a slow job to the pool; it comes back to its `done`.  A job of a
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

/*  SLOW_SETTLE is back (its completion): the tenants another writer
 *  changed are dropped (ks_cache_settle) and the cache is used again.  */
static void
s_settled (void *arg, slow_job_t *job)
{
    frontend_t *self = arg;
    metrics_key_cache_dropped (self->args->metrics,
                               ks_cache_settle (self->cache, job->rc, job->changes, job->n_changes,
                                                job->foreign));
}

/*  The keystore file is being written (ks_watch.h), or another process
 *  committed to the PostgreSQL keystore: the cache is held (not used)
 *  until a slow-pool thread got the write lock once, the writer having
 *  committed, and read the tenants' change epochs (SLOW_SETTLE,
 *  s_settled); the tenants whose epoch moved are dropped then
 *  (ks_cache_settle).  Called before every request looks at the cache: a change made
 *  before a request was sent is seen by it.  */
void
fe_keystore_check (frontend_t *self)
{
    fe_keystore_watch_t *watch = self->keystore_watch;
    if (!watch)
        return;
    if (watch->listener) {          /* PostgreSQL: notified after the commit */
        uint64_t changes = keystore_listener_changes (watch->listener), seen = watch->listener_seen;
        watch->listener_seen = changes;
        if (changes == seen)
            return;
    }
    else
    if (!watch->file || !ks_watch_changed (watch->file))
        return;
    slow_job_t *settle = self->settle ? fe_slow_new (self, NULL, 0, SLOW_SETTLE, s_settled) : NULL;
    if (settle)
        settle->settle = self->settle;
    else {
        ks_cache_drop_all (self->cache);
        return;
    }
    ks_cache_hold (self->cache);
    fe_slow_go (self, settle);
}

/*  A slow job is back (slow_pool.h): what its commits changed is counted
 *  (this broker's own), a quota refusal counted for its tenant, then its
 *  completion, set by its room.  */
static void
s_slow_back (slow_item_t *item, void *arg)
{
    frontend_t *self = arg;
    slow_job_t *job = (slow_job_t *) item;
    fe_request_t *request = job->request;
    metrics_key_cache_dropped (self->args->metrics,         /* this broker's own commits */
                               ks_cache_own_changes (self->cache, job->own, job->n_own));
    if (job->quota_refused && request)      /* a key or object over its tenant's quota */
        metrics_quota_count (metrics_quota_tenant (metrics_quota (self->args->metrics), request->tenant),
                             (metrics_quota_limit_t) (job->quota_refused - 1), true, 1);
    job->done (job->done_arg, job);
    slow_job_destroy (&job);
}

/*  A slow job that will not come back through s_slow_back (the frontend is
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
                                              s_slow_back, s_slow_discard, self) : NULL;
    if (!self->slow || !(self->keystore_watch = calloc (1, sizeof *self->keystore_watch))
    ||  fe_audit_start (self) != 0)
        return -1;
    fe_keystore_watch_t *watch = self->keystore_watch;
    if (keystore_is_url (self->config->keystore_path)) {
        //  A database other brokers share: LISTEN/NOTIFY, not inotify.
        watch->listener = keystore_listener_new (self->ks);
        watch->listener_seen = keystore_listener_changes (watch->listener);
    }
    else
        watch->file = ks_watch_new (self->config->keystore_path);
    keystore_change_t *changes = NULL;
    size_t n = 0;
    if ((watch->file || watch->listener) && (self->settle = ks_settle_new (self->ks, watch->listener, &changes, &n)))
        ks_cache_epochs_baseline (self->cache, changes, n);
    keystore_changes_free (&changes, n);
    if (!self->settle) {
        ks_watch_destroy (&watch->file);        /* nothing can tell what changed */
        keystore_listener_destroy (&watch->listener);
    }
    if (!watch->file && !watch->listener) {
        zsys_warning ("keystore %s: keys and tenant rows are not cached: every job reads its row",
                      self->config->keystore_name);
        ks_cache_hold (self->cache);            /* for good */
    }
    return 0;
}

/*  Stops watching the keystore for other writers (the frontend is ending).  */
void
fe_keystore_stop (frontend_t *self)
{
    if (!self->keystore_watch)
        return;
    ks_watch_destroy (&self->keystore_watch->file);
    keystore_listener_destroy (&self->keystore_watch->listener);
    free (self->keystore_watch);
    self->keystore_watch = NULL;
}

/* ---- the audit log (audit.h) ------------------------------------------- */

/*  SLOW_AUDIT is back: the batch was appended (or is kept for the next
 *  interval: audit.h).  */
static void
s_audit_back (void *arg, slow_job_t *job)
{
    frontend_t *self = arg;
    broker_audit_done (self->audit, job->audit);
    job->audit = NULL;
}

/*  Hands what the audit noted to the slow pool (at most one batch out).  */
static void
s_audit_flush (frontend_t *self)
{
    broker_audit_batch_t *batch = broker_audit_take (self->audit, false);
    slow_job_t *job = batch ? fe_slow_new (self, NULL, 0, SLOW_AUDIT, s_audit_back) : NULL;
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
