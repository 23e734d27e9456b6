/*  quota_link.c — the frontend's side of per-tenant quotas (quota.h; issue
 *  22 item 2; docs/CONTRACTS.md "Tenant quotas"): at admission, before a
 *  request joins its client's backlog or starts, its jobs take their
 *  tenant's room in flight (max-inflight) and their tokens
 *  (max-ops-per-s).  A request that must wait for either waits here,
 *  decoded and charged, and is admitted when its turn comes; one that
 *  cannot start within its deadline is answered with request-level
 *  CKR_DEVICE_ERROR and a W: line.  Counted per tenant in
 *  cryptoserver_tenant_throttled_total and _quota_refused_total.
 *
 *  Owns: frontend_t.quota.  A request that waited goes back to the
 *  request room through the `pass` function it gave (fe_quota_admit); the
 *  room in flight a request holds is given back by its on_free hook when
 *  reply.c frees it.
 *  May call: reply.c (fe_send_error, fe_request_destroy, fe_log_due,
 *  fe_drained_check), quota.h, metrics_quota.h.  */
#include <inttypes.h>
#include "quota.h"
#include "metrics_quota.h"
#include "frontend_int.h"

struct _fe_quota_tenant_t {
    fe_quota_t *owner;
    quota_limits_t limits;
    quota_bucket_t bucket;
    size_t inflight;                /* jobs admitted and not answered (with max-inflight) */
    zlistx_t *waiting;              /* requests waiting for room in flight, oldest first */
    metrics_tenant_t *metrics;
};

/*  A request waiting for its reserved tokens.  */
typedef struct {
    fe_quota_t *owner;
    fe_request_t *request;
    int timer;
} s_timed_t;

struct _fe_quota_t {
    frontend_t *fe;
    fe_quota_pass_fn *pass;         /* the request room's admission step (fe_quota_admit) */
    zhashx_t *tenants;              /* name -> fe_quota_tenant_t */
    zlistx_t *timed;                /* s_timed_t waiting for tokens */
    fe_request_t *passing;          /* being admitted again after its wait */
    int wake_timer;                 /* waiters re-examined, or -1 */
};

static void
s_tenant_destroy (void **item_p)
{
    fe_quota_tenant_t *tenant = *item_p;
    if (tenant) {
        zlistx_destroy (&tenant->waiting);
        free (tenant);
    }
    *item_p = NULL;
}

//  The state of tenant `name`, made on first sight with its limits from
//  broker.conf, or NULL (out of memory, or limits that do not parse:
//  logged once, as none).
static fe_quota_tenant_t *
s_tenant (fe_quota_t *self, const char *name)
{
    fe_quota_tenant_t *tenant = zhashx_lookup (self->tenants, name);
    if (tenant)
        return tenant;
    const char *bad = NULL;
    if (!(tenant = calloc (1, sizeof *tenant)) || !(tenant->waiting = zlistx_new ())) {
        s_tenant_destroy ((void **) &tenant);
        return NULL;
    }
    tenant->owner = self;
    if (quota_limits_read (self->fe->config->root, name, &tenant->limits, &bad) != 0) {
        zsys_error ("tenants/%s/%s in broker.conf is not a number in 0..4294967295: no quota applied",
                    name, bad);
        memset (&tenant->limits, 0, sizeof tenant->limits);
    }
    quota_bucket_init (&tenant->bucket, tenant->limits.max_ops_per_s, 0, cs_clock_ms ());
    tenant->metrics = metrics_quota_tenant (metrics_quota (self->fe->args->metrics), name);
    zhashx_insert (self->tenants, name, tenant);
    return tenant;
}

//  The request's jobs, as the limits count them (at least 1).
static size_t
s_jobs (const fe_request_t *request)
{
    return request->req->n_jobs ? request->req->n_jobs : 1;
}

static bool
s_fits (const fe_quota_tenant_t *tenant, size_t n)
{
    return tenant->inflight == 0 || tenant->inflight + n <= tenant->limits.max_inflight;
}

//  Answers a request that cannot start within its deadline, and frees it.
static void
s_refuse (fe_quota_t *self, fe_quota_tenant_t *tenant, fe_request_t *request, metrics_quota_limit_t limit)
{
    const char *name = limit == METRICS_QUOTA_OPS ? "max-ops-per-s" : "max-inflight";
    uint32_t value = limit == METRICS_QUOTA_OPS ? tenant->limits.max_ops_per_s : tenant->limits.max_inflight;
    char why [200];
    metrics_quota_count (tenant->metrics, limit, true, s_jobs (request));
    if (fe_log_due (self->fe, request, "quota refused"))
        zsys_warning ("client %s (tenant %s): request %" PRIu64 " cannot start within its deadline under "
                      "the tenant's quota %s = %u: answered with CKR_DEVICE_ERROR", request->client_name,
                      request->tenant, request->req->request_id, name, value);
    snprintf (why, sizeof why, "tenant over its quota %s = %u: the request could not start within its deadline",
              name, value);
    fe_send_error (self->fe, request->identity, request->req->request_id, CKR_DEVICE_ERROR, why);
    fe_request_destroy (&request);
}

//  Admits a request that waited here (its in_flight count ends).
static void
s_pass (fe_quota_t *self, fe_request_t *request)
{
    self->fe->in_flight--;
    self->passing = request;
    self->pass (self->fe, request);
    self->passing = NULL;
    fe_drained_check (self->fe);
}

static int
s_on_tokens (zloop_t *loop, int timer_id, void *arg)
{
    s_timed_t *timed = arg;
    fe_quota_t *self = timed->owner;
    fe_request_t *request = timed->request;
    void *handle = zlistx_find (self->timed, timed);
    if (handle)
        zlistx_delete (self->timed, handle);
    free (timed);
    s_pass (self, request);
    return 0;
}

//  The rate step of a request that has its room in flight: 0 to go now,
//  1 when it waits for its tokens (counted in in_flight unless
//  `counted`), -1 when it was refused (and freed).
static int
s_rate (fe_quota_t *self, fe_quota_tenant_t *tenant, fe_request_t *request, bool counted)
{
    if (!tenant->limits.max_ops_per_s)
        return 0;
    size_t n = s_jobs (request);
    int64_t now = cs_clock_ms ();
    int64_t wait = quota_bucket_reserve (&tenant->bucket, now, (uint32_t) n);
    if (wait == 0)
        return 0;
    s_timed_t *timed = now + wait <= request->deadline ? calloc (1, sizeof *timed) : NULL;
    if (timed) {
        *timed = (s_timed_t) { .owner = self, .request = request };
        timed->timer = zloop_timer (self->fe->loop, (size_t) wait, 1, s_on_tokens, timed);
    }
    if (!timed || timed->timer < 0 || !zlistx_add_end (self->timed, timed)) {
        if (timed && timed->timer >= 0)
            zloop_timer_end (self->fe->loop, timed->timer);
        free (timed);
        quota_bucket_refund (&tenant->bucket, (uint32_t) n);
        if (counted)
            self->fe->in_flight--;
        s_refuse (self, tenant, request, METRICS_QUOTA_OPS);
        return -1;
    }
    if (!counted)
        self->fe->in_flight++;
    metrics_quota_count (tenant->metrics, METRICS_QUOTA_OPS, false, n);
    if (fe_log_due (self->fe, request, "max-ops-per-s"))
        zsys_info ("client %s (tenant %s): its jobs wait for the tenant's quota max-ops-per-s = %u",
                   request->client_name, request->tenant, tenant->limits.max_ops_per_s);
    return 1;
}

static void s_release (void *arg);

//  Takes room in flight for the request (given back by s_release, its
//  on_free hook, when the request is freed).
static void
s_hold (fe_quota_tenant_t *tenant, fe_request_t *request)
{
    if (!tenant->limits.max_inflight)
        return;
    request->quota_jobs = s_jobs (request);
    tenant->inflight += request->quota_jobs;
    request->quota_tenant = tenant;
    request->on_free = s_release;
}

/*  The tenant's quota step of admission (docs/CONTRACTS.md "Tenant
 *  quotas"): false when the request goes on now (no quota, room and tokens
 *  are there: it holds them); true when it waits here (decoded, charged,
 *  counted in in_flight) until `pass` gets it back, or could not start
 *  within its deadline and was answered (request-level CKR_DEVICE_ERROR)
 *  and freed.  */
bool
fe_quota_admit (frontend_t *fe, fe_request_t *request, fe_quota_pass_fn *pass)
{
    fe_quota_t *self = fe->quota;
    if (!self || request == self->passing || !request->tenant)
        return false;
    self->pass = pass;
    fe_quota_tenant_t *tenant = s_tenant (self, request->tenant);
    if (!tenant || (!tenant->limits.max_ops_per_s && !tenant->limits.max_inflight))
        return false;
    size_t n = s_jobs (request);
    if (tenant->limits.max_inflight && (zlistx_size (tenant->waiting) || !s_fits (tenant, n))) {
        if (!zlistx_add_end (tenant->waiting, request)) {
            s_refuse (self, tenant, request, METRICS_QUOTA_INFLIGHT);
            return true;
        }
        fe->in_flight++;
        metrics_quota_count (tenant->metrics, METRICS_QUOTA_INFLIGHT, false, n);
        if (fe_log_due (fe, request, "max-inflight"))
            zsys_info ("client %s (tenant %s): its jobs wait for the tenant's quota max-inflight = %u",
                       request->client_name, request->tenant, tenant->limits.max_inflight);
        return true;
    }
    s_hold (tenant, request);
    return s_rate (self, tenant, request, false) != 0;
}

//  Waiters whose room in flight is there go on (oldest first); those whose
//  deadline passed are refused.
static int
s_on_wake (zloop_t *loop, int timer_id, void *arg)
{
    fe_quota_t *self = arg;
    self->wake_timer = -1;
    for (fe_quota_tenant_t *tenant = zhashx_first (self->tenants); tenant; tenant = zhashx_next (self->tenants))
        while (zlistx_size (tenant->waiting)) {
            fe_request_t *request = zlistx_first (tenant->waiting);
            if (!s_fits (tenant, s_jobs (request)))
                break;
            zlistx_delete (tenant->waiting, zlistx_cursor (tenant->waiting));
            if (cs_clock_ms () > request->deadline) {
                self->fe->in_flight--;
                s_refuse (self, tenant, request, METRICS_QUOTA_INFLIGHT);
                fe_drained_check (self->fe);
                continue;
            }
            s_hold (tenant, request);
            int rc = s_rate (self, tenant, request, true);
            if (rc == 0)
                s_pass (self, request);
            else
            if (rc < 0)
                fe_drained_check (self->fe);
        }
    return 0;
}

//  A request that held room in flight is freed (its on_free hook, called
//  by fe_request_destroy): the room goes back, waiters are woken.
static void
s_release (void *arg)
{
    fe_request_t *request = arg;
    fe_quota_tenant_t *tenant = request->quota_tenant;
    if (!tenant)
        return;
    tenant->inflight -= request->quota_jobs;
    request->quota_tenant = NULL;
    fe_quota_t *self = tenant->owner;
    //  Not inline: this runs inside fe_request_destroy.  No loop: the
    //  frontend is ending (s_frontend_free), the waiters are freed.
    if (zlistx_size (tenant->waiting) && self->wake_timer < 0 && self->fe->loop)
        self->wake_timer = zloop_timer (self->fe->loop, 1, 1, s_on_wake, self);
}

int
fe_quota_start (frontend_t *fe)
{
    fe_quota_t *self = calloc (1, sizeof *self);
    if (!self || !(self->tenants = zhashx_new ()) || !(self->timed = zlistx_new ())) {
        if (self)
            zhashx_destroy (&self->tenants);
        free (self);
        return -1;
    }
    zhashx_set_destructor (self->tenants, s_tenant_destroy);
    self->fe = fe;
    self->wake_timer = -1;
    fe->quota = self;
    return 0;
}

void
fe_quota_free (frontend_t *fe)
{
    fe_quota_t *self = fe->quota;
    if (!self)
        return;
    for (s_timed_t *timed = zlistx_first (self->timed); timed; timed = zlistx_next (self->timed)) {
        fe_request_destroy (&timed->request);           //  waiting, never started
        free (timed);
    }
    zlistx_destroy (&self->timed);
    for (fe_quota_tenant_t *tenant = zhashx_first (self->tenants); tenant; tenant = zhashx_next (self->tenants))
        for (fe_request_t *request = zlistx_first (tenant->waiting); request; request = zlistx_next (tenant->waiting))
            fe_request_destroy (&request);
    zhashx_destroy (&self->tenants);
    free (self);
    fe->quota = NULL;
}
