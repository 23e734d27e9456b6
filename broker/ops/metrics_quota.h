/*  metrics_quota.h — the per-tenant quota counters of the metrics registry
 *  (metrics.h; issue 22 item 2): jobs that waited for, and jobs answered
 *  with an error because of, a tenant's quota (quota.h), by tenant and
 *  limit.  Tenant names only for a scraper with the bearer token
 *  (METRICS_VIEW_NAMES), one summed line per limit otherwise.
 *
 *    cryptoserver_tenant_throttled_total{tenant,limit}  counter
 *    cryptoserver_tenant_quota_refused_total{tenant,limit}  counter
 *
 *  limit is "ops-per-s", "inflight", "keys" or "objects".
 */
#ifndef METRICS_QUOTA_H_INCLUDED
#define METRICS_QUOTA_H_INCLUDED

#include <stdio.h>
#include "metrics.h"

typedef enum {
    METRICS_QUOTA_OPS = 0,      /* max-ops-per-s */
    METRICS_QUOTA_INFLIGHT,     /* max-inflight */
    METRICS_QUOTA_KEYS,         /* max-keys */
    METRICS_QUOTA_OBJECTS,      /* max-objects */
    METRICS_QUOTA_LIMITS
} metrics_quota_limit_t;

typedef struct _metrics_quota_t metrics_quota_t;
typedef struct _metrics_tenant_t metrics_tenant_t;

/*  The counters of tenants (at most METRICS_QUOTA_TENANTS named ones, the
 *  rest counted as tenant "(other)").  NULL when out of memory.  Caller
 *  destroys (metrics_destroy does for its own).  */
#define METRICS_QUOTA_TENANTS 256
metrics_quota_t *metrics_quota_new (void);
void metrics_quota_destroy (metrics_quota_t **self_p);

/*  The counters of `tenant`, made on first use and kept until the registry
 *  goes (a pointer may be kept).  NULL-safe (NULL in, NULL out).  Any
 *  thread.  */
metrics_tenant_t *metrics_quota_tenant (metrics_quota_t *self, const char *tenant);

/*  Counts n jobs that waited for (`refused` false) or were refused because
 *  of (`refused` true) a limit.  NULL-safe.  Any thread.  */
void metrics_quota_count (metrics_tenant_t *tenant, metrics_quota_limit_t limit, bool refused, size_t n);

/*  Writes both families in the Prometheus text format, names as `view`
 *  allows.  */
void metrics_quota_render (metrics_quota_t *self, metrics_view_t view, FILE *out);

/*  The registry's quota counters (metrics_new made them), or NULL.  */
metrics_quota_t *metrics_quota (metrics_t *self);

#endif
