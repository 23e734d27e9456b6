/*  metrics_int.h — the metrics registry's insides, shared by its two
 *  rooms (internal to broker/ops/): metrics.c records (the job path,
 *  relaxed atomics only), metrics_render.c formats when scraped.  */
#ifndef METRICS_INT_H_INCLUDED
#define METRICS_INT_H_INCLUDED

#include <stdatomic.h>
#include "metrics.h"

#define METRICS_MAX_BOARDS 64
#define METRICS_CLIENT_SLOTS 4096             /* power of two, > METRICS_CLIENTS_MAX */
#define METRICS_MECH_EMPTY UINT64_MAX         /* a free mechanism slot */
#define METRICS_R memory_order_relaxed      /* every counter: relaxed */

/*  Jobs of one mechanism on one board.  */
typedef struct {
    _Atomic uint64_t key;               /* the mechanism, METRICS_MECH_EMPTY while free */
    _Atomic uint64_t results [METRICS_RESULTS];
} metrics_mech_t;

/*  One histogram, on a cache line of its own: the reactor writes queue and
 *  total, the board's workers service.  */
typedef struct {
    _Alignas (64) _Atomic uint64_t buckets [METRICS_BUCKETS + 1];   /* not cumulative; last: > 10 s */
    _Atomic uint64_t sum_ns;
} metrics_histogram_t;

typedef struct {
    char *name;
    metrics_mech_t mechs [METRICS_MECH_SLOTS];    /* open addressing by mechanism */
    metrics_mech_t other;                         /* when the table is full */
    metrics_histogram_t stages [METRICS_STAGES];
    _Atomic uint64_t faults [METRICS_FAULTS];
    _Atomic bool down;                      /* cryptoserver_board_up = !down */
} metrics_board_t;

struct _metrics_client_t {
    char *client;
    char *tenant;
    uint64_t hash;
    _Atomic int64_t inflight;
};

struct _metrics_t {
    metrics_board_t *boards;
    size_t n_boards;
    _Atomic (metrics_client_t *) clients [METRICS_CLIENT_SLOTS];  /* set once each, never removed */
    _Atomic size_t n_clients;
    metrics_client_t other;                 /* past METRICS_CLIENTS_MAX */
    _Atomic bool other_used;
    _Atomic uint64_t queue [2];             /* client, background */
    _Atomic uint64_t cache [3];             /* hits, misses, dropped */
    _Atomic uint64_t audit_breaks;          /* cryptoserver_audit_chain_breaks_total */
    _Atomic uint64_t pool [METRICS_POOL_EVENTS];    /* metrics_pool_t */
    _Atomic uint64_t reruns;
    _Atomic uint64_t fast_lane;     /* items run on the reactor (fast_lane.c) */
    _Atomic uint64_t requests, request_jobs;    /* decoded requests, the jobs in them */
    _Atomic uint64_t cross_checks [METRICS_CROSS_RESULTS];  /* by metrics_cross_t */
    struct _metrics_quota_t *quota;        /* per-tenant quota counters (metrics_quota.h) */
};


#endif
