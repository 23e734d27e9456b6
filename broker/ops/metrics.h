/*  metrics.h — the broker's metrics registry (issue #8, "Metrics you can
 *  scrape"): job counters, latency histograms, gauges.  The thread that
 *  observes an event updates them with relaxed C11 atomics (no locks on the
 *  job path: the reactor counts jobs, queue waits and totals, a worker its
 *  own service times); they are summed and formatted only when scraped
 *  (metrics_render, Prometheus text format 0.0.4).  The HTTP endpoint that
 *  serves the text is metrics_http.h; every name, label and unit is listed
 *  in cryptoserver-broker(8), METRICS.
 *
 *  Every recording function accepts a NULL registry and then does nothing,
 *  so code paths that run without one (tests) need no checks.
 */
#ifndef METRICS_H_INCLUDED
#define METRICS_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include "scheduler.h"

/*  The finite upper bounds of the latency histograms: 50 µs .. 10 s in
 *  1-2.5-5 steps (17 buckets, then +Inf).  */
#define METRICS_BUCKETS 17

/*  Distinct mechanisms counted per board; more go to mechanism="other".  */
#define METRICS_MECH_SLOTS 64

/*  Distinct (client, tenant) pairs of cryptoserver_inflight_jobs; more
 *  share the pair ("(other)", "(other)").  */
#define METRICS_CLIENTS_MAX 3072

/*  The "mechanism" of a job that has none (a resident key's removal).  */
#define METRICS_MECH_NONE (~0UL - 1)

/*  Stages of a work item, the "stage" label of cryptoserver_job_seconds.  */
typedef enum {
    METRICS_QUEUE = 0,              /* submitted to the scheduler -> handed to a worker */
    METRICS_SERVICE,                /* the worker's driver call (worker thread) */
    METRICS_TOTAL,                  /* request received (or background item submitted)
                                       -> result back at the reactor */
    METRICS_STAGES
} metrics_stage_t;

/*  The "result" label of cryptoserver_jobs_total.  */
typedef enum {
    METRICS_OK = 0,                 /* the board answered CKR_OK */
    METRICS_ERROR,                  /* it answered another CK_RV */
    METRICS_EXPIRED,                /* the deadline passed before a worker took it: not run */
    METRICS_RESULTS
} metrics_result_t;

typedef struct _metrics_t metrics_t;
typedef struct _metrics_client_t metrics_client_t;

/*  A registry for boards names[0..n_boards-1] (copied; at most 64, the
 *  board indexes of the scheduler).  NULL when out of memory.  Caller
 *  destroys, after every thread that records into it has stopped.  */
metrics_t *metrics_new (const char *const *names, size_t n_boards);

/*  NULL-safe; nulls *self_p.  */
void metrics_destroy (metrics_t **self_p);

/*  Nanoseconds on the monotonic clock: the time base of every stamp.  */
static inline int64_t
metrics_now_ns (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/*  Counts one job of `mechanism` (a CK_MECHANISM_TYPE, or
 *  METRICS_MECH_NONE) on board `board` with `result`.  Any thread.  A board
 *  index out of range is ignored.  */
void metrics_job (metrics_t *self, size_t board, unsigned long mechanism, metrics_result_t result);

/*  Adds one observation of `ns` nanoseconds (negative counts as 0) to the
 *  histogram of (board, stage).  Any thread.  */
void metrics_observe (metrics_t *self, size_t board, metrics_stage_t stage, int64_t ns);

/*  Sets cryptoserver_queue_depth: work items waiting for a worker, client
 *  items and background items (pool refills, clean-ups).  Reactor.  */
void metrics_queue_depth (metrics_t *self, size_t client, size_t background);

/*  The in-flight counter of (client, tenant), made on first use and kept
 *  until the registry goes (so a pointer may be cached, e.g. per request);
 *  past METRICS_CLIENTS_MAX pairs, or when out of memory, the shared
 *  "(other)" counter.  Lock-free; any thread.  NULL only when self is.  */
metrics_client_t *metrics_client (metrics_t *self, const char *client, const char *tenant);

/*  Adds delta (+1 when a job goes out to a worker, -1 when it is back) to a
 *  client's in-flight jobs.  NULL-safe.  */
void metrics_inflight_add (metrics_client_t *client, long delta);

/*  Counts one lookup of the broker's key cache: cryptoserver_key_cache_hits_total
 *  when hit, else cryptoserver_key_cache_misses_total.  For the cache that
 *  keeps unsealed keystore keys; both stay 0 until it calls this.  Any thread.  */
void metrics_key_cache (metrics_t *self, bool hit);

/*  Counts n keys dropped from the key cache because another writer changed
 *  their tenant's rows (cryptoserver_key_cache_dropped_total; ks_cache.h).
 *  Any thread.  */
void metrics_key_cache_dropped (metrics_t *self, size_t n);

/*  Counts one change of this broker's audit chain by another writer, seen
 *  at an append (cryptoserver_audit_chain_breaks_total; broker/ops/audit.c).
 *  Any thread; NULL-safe.  */
void metrics_audit_break (metrics_t *self);

/*  Events of the pre-generated RSA key pool (pool.h, pool_store.h).  */
typedef enum {
    METRICS_POOL_TAKEN = 0,         /* a generation served from the pool */
    METRICS_POOL_MISSED,            /* a generation of a pooled size that found it empty */
    METRICS_POOL_RESTORED,          /* keys restored from the keystore at start */
    METRICS_POOL_EVENTS
} metrics_pool_t;

/*  Adds n to cryptoserver_pool_keys_taken_total, _missed_total or
 *  _restored_total.  Any thread; NULL-safe.  */
void metrics_pool (metrics_t *self, metrics_pool_t event, size_t n);

/*  The mechanism a work item runs, for metrics_job: the wire mechanism of
 *  a sign or decrypt job, CKM_ECDH1_DERIVE, the generation mechanism, or
 *  METRICS_MECH_NONE.  */
unsigned long metrics_item_mechanism (const work_item_t *item);

/*  A work item came back from a worker (reactor): counts its job (ok or
 *  error) and observes its queue wait (item->given_ns - item->submitted_ns)
 *  and total time (now - received_ns, or - item->submitted_ns when
 *  received_ns is 0: a background item).  */
void metrics_item_done (metrics_t *self, const work_item_t *item, int64_t received_ns);

/*  A work item failed unrun because its deadline passed in the queue.  */
void metrics_item_expired (metrics_t *self, const work_item_t *item);

/*  Board health (issue #9; health.h): the kind of a board fault, the
 *  "kind" label of cryptoserver_board_faults_total.  */
typedef enum {
    METRICS_FAULT_ERROR = 0,        /* a device- or session-class CK_RV from the driver */
    METRICS_FAULT_TIMEOUT,          /* a driver call over its time limit */
    METRICS_FAULT_WRONG,            /* a result that failed verification (verify.h) */
    METRICS_FAULTS
} metrics_fault_t;

/*  Counts one fault of board `board` (a wrong result also counts in
 *  cryptoserver_wrong_results_total).  Any thread.  */
void metrics_board_fault (metrics_t *self, size_t board, metrics_fault_t kind);

/*  Sets cryptoserver_board_up of board `board`: 1 in rotation, 0 out.
 *  Boards start at 1.  Reactor.  */
void metrics_board_up (metrics_t *self, size_t board, bool up);

/*  Counts one work item re-run on another board after a board fault
 *  (cryptoserver_job_reruns_total).  Reactor.  */
void metrics_rerun (metrics_t *self);

/*  Counts one work item run on the reactor thread by the fast lane
 *  (cryptoserver_fast_lane_jobs_total; broker/frontend/fast_lane.c).  Reactor.  */
void metrics_fast_lane (metrics_t *self);

/*  Counts one decoded request of n_jobs jobs (cryptoserver_requests_total,
 *  cryptoserver_request_jobs_total: their ratio is the mean batch, e.g.
 *  the module's coalescing).  Reactor; NULL-safe.  */
void metrics_request (metrics_t *self, size_t n_jobs);

/*  The result of a cross-check (cross_check.h), the "result" label of
 *  cryptoserver_cross_checks_total.  */
typedef enum {
    METRICS_CROSS_MATCH = 0,        /* both boards' results agree */
    METRICS_CROSS_MISMATCH,         /* they disagree: a board was wrong */
    METRICS_CROSS_SKIPPED,          /* not compared (second run failed, same board, ...) */
    METRICS_CROSS_RESULTS
} metrics_cross_t;

/*  Counts one cross-check (cryptoserver_cross_checks_total).  Any thread;
 *  NULL-safe.  */
void metrics_cross_check (metrics_t *self, metrics_cross_t result);

/*  What a scrape may see of the clients: their names (a scraper with the
 *  bearer token, metrics_http.h), or one line summing them all.  */
typedef enum {
    METRICS_VIEW_AGGREGATE,     /* cryptoserver_inflight_jobs{client="(all)",tenant="(all)"} */
    METRICS_VIEW_NAMES          /* one cryptoserver_inflight_jobs line per client and tenant */
} metrics_view_t;

/*  The registry in the Prometheus text format (version 0.0.4, with # HELP
 *  and # TYPE lines), process_cpu_seconds_total from getrusage (2), the
 *  clients as `view` allows: malloc'd, NUL-terminated, *len_p bytes
 *  (without the NUL); caller frees.  NULL when out of memory.  Safe while
 *  other threads record (each number is read once, atomically; the set is
 *  not a snapshot).  */
char *metrics_render (metrics_t *self, metrics_view_t view, size_t *len_p);

/*  metrics_render with process_cpu_seconds_total = cpu_us microseconds:
 *  the same text for the same counters (tests).  */
char *metrics_render_at (metrics_t *self, uint64_t cpu_us, metrics_view_t view, size_t *len_p);

#endif
