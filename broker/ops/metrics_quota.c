/*  metrics_quota.c — per-tenant quota counters (metrics_quota.h): a fixed
 *  table of tenants, each set once under a mutex and never removed, read
 *  by the scrape with atomic loads.  */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include "metrics_quota.h"

#define S_R memory_order_relaxed

static const char *const s_limits [METRICS_QUOTA_LIMITS] = { "ops-per-s", "inflight", "keys", "objects" };

struct _metrics_tenant_t {
    char *name;
    _Atomic uint64_t counts [2][METRICS_QUOTA_LIMITS];     /* [refused][limit] */
};

struct _metrics_quota_t {
    pthread_mutex_t lock;               /* taken to add a tenant */
    _Atomic (metrics_tenant_t *) tenants [METRICS_QUOTA_TENANTS];
    metrics_tenant_t other;
};

metrics_quota_t *
metrics_quota_new (void)
{
    metrics_quota_t *self = calloc (1, sizeof *self);
    if (self && !(self->other.name = strdup ("(other)"))) {
        free (self);
        self = NULL;
    }
    if (self)
        pthread_mutex_init (&self->lock, NULL);
    return self;
}

void
metrics_quota_destroy (metrics_quota_t **self_p)
{
    metrics_quota_t *self = *self_p;
    if (!self)
        return;
    for (size_t i = 0; i < METRICS_QUOTA_TENANTS; i++) {
        metrics_tenant_t *tenant = atomic_load (&self->tenants [i]);
        if (tenant) {
            free (tenant->name);
            free (tenant);
        }
    }
    free (self->other.name);
    pthread_mutex_destroy (&self->lock);
    free (self);
    *self_p = NULL;
}

metrics_tenant_t *
metrics_quota_tenant (metrics_quota_t *self, const char *name)
{
    if (!self || !name)
        return NULL;
    metrics_tenant_t *found = NULL;
    pthread_mutex_lock (&self->lock);
    size_t i = 0;
    for (; i < METRICS_QUOTA_TENANTS && !found; i++) {
        metrics_tenant_t *tenant = atomic_load_explicit (&self->tenants [i], memory_order_acquire);
        if (!tenant)
            break;
        if (strcmp (tenant->name, name) == 0)
            found = tenant;
    }
    if (!found && i < METRICS_QUOTA_TENANTS && (found = calloc (1, sizeof *found))) {
        if ((found->name = strdup (name)))
            atomic_store_explicit (&self->tenants [i], found, memory_order_release);
        else {
            free (found);
            found = NULL;
        }
    }
    pthread_mutex_unlock (&self->lock);
    return found ? found : &self->other;
}

void
metrics_quota_count (metrics_tenant_t *tenant, metrics_quota_limit_t limit, bool refused, size_t n)
{
    if (tenant && limit < METRICS_QUOTA_LIMITS)
        atomic_fetch_add_explicit (&tenant->counts [refused][limit], n, S_R);
}

//  One family: a line per tenant and limit, or per limit summed.
static void
s_family (metrics_quota_t *self, metrics_view_t view, FILE *out, int refused, const char *name,
          const char *help)
{
    fprintf (out, "# HELP %s %s\n# TYPE %s counter\n", name, help, name);
    uint64_t sums [METRICS_QUOTA_LIMITS] = { 0 };
    for (size_t i = 0; i <= METRICS_QUOTA_TENANTS; i++) {
        metrics_tenant_t *tenant = i < METRICS_QUOTA_TENANTS
                                 ? atomic_load_explicit (&self->tenants [i], memory_order_acquire) : &self->other;
        if (!tenant)
            continue;
        for (int l = 0; l < METRICS_QUOTA_LIMITS; l++) {
            uint64_t value = atomic_load_explicit (&tenant->counts [refused][l], S_R);
            sums [l] += value;
            if (view == METRICS_VIEW_NAMES && (value || tenant != &self->other))
                fprintf (out, "%s{tenant=\"%s\",limit=\"%s\"} %" PRIu64 "\n", name, tenant->name,
                         s_limits [l], value);
        }
    }
    if (view != METRICS_VIEW_NAMES)
        for (int l = 0; l < METRICS_QUOTA_LIMITS; l++)
            fprintf (out, "%s{tenant=\"(all)\",limit=\"%s\"} %" PRIu64 "\n", name, s_limits [l], sums [l]);
}

void
metrics_quota_render (metrics_quota_t *self, metrics_view_t view, FILE *out)
{
    if (!self)
        return;
    s_family (self, view, out, 0, "cryptoserver_tenant_throttled_total",
              "Jobs that waited at admission for their tenant's quota (max-ops-per-s, max-inflight), "
              "by tenant and limit; without the bearer token one line per limit sums the tenants.");
    s_family (self, view, out, 1, "cryptoserver_tenant_quota_refused_total",
              "Jobs answered with an error because of their tenant's quota: could not start within "
              "their deadline (ops-per-s, inflight) or a key or object over max-keys, max-objects.");
}
