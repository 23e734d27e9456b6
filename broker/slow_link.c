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
    if (request)        /* key jobs follow the tenant's usage rules (keyattrs_usage_set) */
        job->usage = broker_config_usage (self->config, request->tenant);
    if (request && job->kind != SLOW_TENANT) {
        request->pending++;
        request->slots [job->index].result.rv = FE_CKR_PENDING;
    }
    slow_pool_submit (self->slow, &job->base);
    return FE_CKR_PENDING;
}

/*  The keystore file is being written (ks_watch.h): the cache is held
 *  (not used) until a slow-pool thread got the write lock once, the writer
 *  having committed (SLOW_SETTLE, fe_slow_done); it is dropped then unless
 *  the only writer was this broker, whose own changes were dropped one by
 *  one.  Called before every request looks at the cache: a change made
 *  before a request was sent is seen by it.  */
void
fe_keystore_check (frontend_t *self)
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
    slow_job_t *settle = fe_slow_new (NULL, 0, SLOW_SETTLE);
    if (!settle) {
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
    slow_job_t *job = (slow_job_t *) item;
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
