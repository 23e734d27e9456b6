/*  metrics_render.c — the metrics registry in the Prometheus text format
 *  0.0.4 (metrics_render; cryptoserver-broker(8), METRICS), read on the
 *  scraping thread while metrics.c goes on counting.  */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include "cs_wire.h"
#include "metrics_int.h"
#include "metrics_quota.h"

static const char *s_bounds_le [METRICS_BUCKETS] = {
    "0.00005", "0.0001", "0.00025", "0.0005", "0.001", "0.0025", "0.005", "0.01", "0.025", "0.05",
    "0.1", "0.25", "0.5", "1", "2.5", "5", "10"
};
static const char *s_stage_names [METRICS_STAGES] = { "queue", "service", "total" };
static const char *s_result_names [METRICS_RESULTS] = { "ok", "error", "expired" };
static const char *s_fault_names [METRICS_FAULTS] = { "error", "timeout", "wrong" };

/*  A label value, escaped as the text format wants (\\, \", \n).  */
static void
s_label (FILE *out, const char *value)
{
    for (const char *c = value; *c; c++)
        if (*c == '\\' || *c == '"')
            fprintf (out, "\\%c", *c);
        else
        if (*c == '\n')
            fputs ("\\n", out);
        else
            fputc (*c, out);
}

static void
s_family (FILE *out, const char *name, const char *type, const char *help)
{
    fprintf (out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/*  Orders mechanism slots by mechanism, METRICS_MECH_NONE last.  */
static int
s_mech_order (const void *a, const void *b)
{
    uint64_t x = atomic_load_explicit (&(*(metrics_mech_t *const *) a)->key, METRICS_R);
    uint64_t y = atomic_load_explicit (&(*(metrics_mech_t *const *) b)->key, METRICS_R);
    return x < y ? -1 : x > y;
}

static void
s_mech_lines (FILE *out, const metrics_board_t *board, metrics_mech_t *slot, const char *mechanism)
{
    uint64_t key = atomic_load_explicit (&slot->key, METRICS_R);
    if (!mechanism)
        mechanism = key == METRICS_MECH_NONE ? "none" : cs_mech_name ((unsigned long) key);
    for (size_t r = 0; r < METRICS_RESULTS; r++) {
        fputs ("cryptoserver_jobs_total{board=\"", out);
        s_label (out, board->name);
        fprintf (out, "\",mechanism=\"%s\",result=\"%s\"} %" PRIu64 "\n", mechanism, s_result_names [r],
                 atomic_load_explicit (&slot->results [r], METRICS_R));
    }
}

static void
s_render_jobs (metrics_t *self, FILE *out)
{
    s_family (out, "cryptoserver_jobs_total", "counter",
              "Jobs given to a board's worker, by board, PKCS#11 mechanism and result "
              "(ok, error: another CK_RV, expired: deadline passed in the queue, not run).");
    for (size_t b = 0; b < self->n_boards; b++) {
        metrics_board_t *board = &self->boards [b];
        metrics_mech_t *used [METRICS_MECH_SLOTS];
        size_t n = 0;
        for (size_t m = 0; m < METRICS_MECH_SLOTS; m++)
            if (atomic_load_explicit (&board->mechs [m].key, METRICS_R) != METRICS_MECH_EMPTY)
                used [n++] = &board->mechs [m];
        qsort (used, n, sizeof used [0], s_mech_order);
        for (size_t i = 0; i < n; i++)
            s_mech_lines (out, board, used [i], NULL);
        uint64_t other = 0;
        for (size_t r = 0; r < METRICS_RESULTS; r++)
            other += atomic_load_explicit (&board->other.results [r], METRICS_R);
        if (other)
            s_mech_lines (out, board, &board->other, "other");
    }
}

/*  Nanoseconds as seconds with 9 decimals.  */
static void
s_seconds (FILE *out, uint64_t ns)
{
    fprintf (out, "%" PRIu64 ".%09" PRIu64, ns / 1000000000, ns % 1000000000);
}

static void
s_render_histograms (metrics_t *self, FILE *out)
{
    s_family (out, "cryptoserver_job_seconds", "histogram",
              "Seconds of a job run by a board's worker, by board and stage (queue: waiting for a "
              "worker; service: the driver call; total: from the request's arrival to the result "
              "back at the frontend).");
    for (size_t b = 0; b < self->n_boards; b++)
        for (size_t s = 0; s < METRICS_STAGES; s++) {
            metrics_histogram_t *histogram = &self->boards [b].stages [s];
            uint64_t count = 0;
            for (size_t i = 0; i <= METRICS_BUCKETS; i++) {
                count += atomic_load_explicit (&histogram->buckets [i], METRICS_R);
                fputs ("cryptoserver_job_seconds_bucket{board=\"", out);
                s_label (out, self->boards [b].name);
                fprintf (out, "\",stage=\"%s\",le=\"%s\"} %" PRIu64 "\n", s_stage_names [s],
                         i < METRICS_BUCKETS ? s_bounds_le [i] : "+Inf", count);
            }
            fputs ("cryptoserver_job_seconds_sum{board=\"", out);
            s_label (out, self->boards [b].name);
            fprintf (out, "\",stage=\"%s\"} ", s_stage_names [s]);
            s_seconds (out, atomic_load_explicit (&histogram->sum_ns, METRICS_R));
            fputs ("\ncryptoserver_job_seconds_count{board=\"", out);
            s_label (out, self->boards [b].name);
            fprintf (out, "\",stage=\"%s\"} %" PRIu64 "\n", s_stage_names [s], count);
        }
}

/*  Orders clients by tenant, then client.  */
static int
s_client_order (const void *a, const void *b)
{
    const metrics_client_t *x = *(metrics_client_t *const *) a, *y = *(metrics_client_t *const *) b;
    int by_tenant = strcmp (x->tenant, y->tenant);
    return by_tenant ? by_tenant : strcmp (x->client, y->client);
}

static void
s_client_line (FILE *out, metrics_client_t *client)
{
    fputs ("cryptoserver_inflight_jobs{client=\"", out);
    s_label (out, client->client);
    fputs ("\",tenant=\"", out);
    s_label (out, client->tenant);
    fprintf (out, "\"} %" PRId64 "\n", atomic_load_explicit (&client->inflight, METRICS_R));
}

/*  One line for all clients: their jobs in flight summed, no names.  */
static void
s_render_clients_aggregate (metrics_t *self, FILE *out)
{
    int64_t sum = atomic_load_explicit (&self->other.inflight, METRICS_R);
    for (size_t i = 0; i < METRICS_CLIENT_SLOTS; i++) {
        metrics_client_t *client = atomic_load_explicit (&self->clients [i], memory_order_acquire);
        if (client)
            sum += atomic_load_explicit (&client->inflight, METRICS_R);
    }
    fprintf (out, "cryptoserver_inflight_jobs{client=\"(all)\",tenant=\"(all)\"} %" PRId64 "\n", sum);
}

static int
s_render_clients (metrics_t *self, metrics_view_t view, FILE *out)
{
    s_family (out, "cryptoserver_inflight_jobs", "gauge",
              "Jobs of a client out with the boards' workers (queued or running), by client "
              "(its certificate's name) and tenant; without the bearer token one line sums them "
              "(client and tenant \"(all)\").");
    if (view != METRICS_VIEW_NAMES) {
        s_render_clients_aggregate (self, out);
        return 0;
    }
    metrics_client_t **list = calloc (METRICS_CLIENT_SLOTS, sizeof *list);
    size_t n = 0;
    if (!list)
        return -1;
    for (size_t i = 0; i < METRICS_CLIENT_SLOTS; i++) {
        metrics_client_t *client = atomic_load_explicit (&self->clients [i], memory_order_acquire);
        if (client)
            list [n++] = client;
    }
    qsort (list, n, sizeof list [0], s_client_order);
    for (size_t i = 0; i < n; i++)
        s_client_line (out, list [i]);
    if (atomic_load_explicit (&self->other_used, METRICS_R))
        s_client_line (out, &self->other);
    free (list);
    return 0;
}

/*  cryptoserver_board_up, _wrong_results_total, _board_faults_total,
 *  _job_reruns_total, _fast_lane_jobs_total and _cross_checks_total.  */
static void
s_render_health (metrics_t *self, FILE *out)
{
    s_family (out, "cryptoserver_board_up", "gauge",
              "1 when a board is in rotation, 0 while it is out after a fault (a failed driver call, "
              "a call over its time limit or a wrong result) until a probe brings it back.");
    for (size_t b = 0; b < self->n_boards; b++) {
        fputs ("cryptoserver_board_up{board=\"", out);
        s_label (out, self->boards [b].name);
        fprintf (out, "\"} %d\n", atomic_load_explicit (&self->boards [b].down, METRICS_R) ? 0 : 1);
    }
    s_family (out, "cryptoserver_wrong_results_total", "counter",
              "Results of a board that failed verification with the key's public half and were not "
              "released (the job was re-run on another board or failed).");
    for (size_t b = 0; b < self->n_boards; b++) {
        fputs ("cryptoserver_wrong_results_total{board=\"", out);
        s_label (out, self->boards [b].name);
        fprintf (out, "\"} %" PRIu64 "\n",
                 atomic_load_explicit (&self->boards [b].faults [METRICS_FAULT_WRONG], METRICS_R));
    }
    s_family (out, "cryptoserver_board_faults_total", "counter",
              "Faults of a board, by kind: error (a device- or session-class error of the driver), "
              "timeout (a driver call over its time limit), wrong (a wrong result).");
    for (size_t b = 0; b < self->n_boards; b++)
        for (size_t k = 0; k < METRICS_FAULTS; k++) {
            fputs ("cryptoserver_board_faults_total{board=\"", out);
            s_label (out, self->boards [b].name);
            fprintf (out, "\",kind=\"%s\"} %" PRIu64 "\n", s_fault_names [k],
                     atomic_load_explicit (&self->boards [b].faults [k], METRICS_R));
        }
    s_family (out, "cryptoserver_job_reruns_total", "counter",
              "Jobs re-run on another board after a board fault.");
    fprintf (out, "cryptoserver_job_reruns_total %" PRIu64 "\n", atomic_load_explicit (&self->reruns, METRICS_R));
    s_family (out, "cryptoserver_fast_lane_jobs_total", "counter",
              "Jobs run on the reactor thread instead of a worker (broker/fast-lane-us): cheap jobs "
              "on an openssl board while nothing waited in the queue.");
    fprintf (out, "cryptoserver_fast_lane_jobs_total %" PRIu64 "\n",
             atomic_load_explicit (&self->fast_lane, METRICS_R));
    static const char *const cross_names [METRICS_CROSS_RESULTS] = { "match", "mismatch", "skipped" };
    s_family (out, "cryptoserver_cross_checks_total", "counter",
              "Jobs run on two boards and compared (broker/cross-check), by result: match, mismatch "
              "(a wrong result caught), skipped (the second run failed, ran on the same board, or "
              "the results could not be compared).");
    for (size_t r = 0; r < METRICS_CROSS_RESULTS; r++)
        fprintf (out, "cryptoserver_cross_checks_total{result=\"%s\"} %" PRIu64 "\n", cross_names [r],
                 atomic_load_explicit (&self->cross_checks [r], METRICS_R));
}

char *
metrics_render_at (metrics_t *self, uint64_t cpu_us, metrics_view_t view, size_t *len_p)
{
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream (&text, &len);
    if (!out)
        return NULL;
    s_render_jobs (self, out);
    s_render_histograms (self, out);
    s_family (out, "cryptoserver_queue_depth", "gauge",
              "Work items waiting for a worker: client jobs and background jobs (key pool refills, "
              "clean-ups).");
    fprintf (out, "cryptoserver_queue_depth{queue=\"client\"} %" PRIu64 "\n"
                  "cryptoserver_queue_depth{queue=\"background\"} %" PRIu64 "\n",
             atomic_load_explicit (&self->queue [0], METRICS_R), atomic_load_explicit (&self->queue [1], METRICS_R));
    s_render_health (self, out);
    s_family (out, "cryptoserver_requests_total", "counter",
              "Client requests decoded (a request carries one job or a batch of them).");
    fprintf (out, "cryptoserver_requests_total %" PRIu64 "\n", atomic_load_explicit (&self->requests, METRICS_R));
    s_family (out, "cryptoserver_request_jobs_total", "counter",
              "Jobs in the client requests decoded; divided by cryptoserver_requests_total, the mean "
              "jobs per request.");
    fprintf (out, "cryptoserver_request_jobs_total %" PRIu64 "\n",
             atomic_load_explicit (&self->request_jobs, METRICS_R));
    int rc = s_render_clients (self, view, out);
    metrics_quota_render (self->quota, view, out);
    s_family (out, "cryptoserver_key_cache_hits_total", "counter",
              "Lookups of keystore keys found in the broker's key cache.");
    fprintf (out, "cryptoserver_key_cache_hits_total %" PRIu64 "\n", atomic_load_explicit (&self->cache [0], METRICS_R));
    s_family (out, "cryptoserver_key_cache_misses_total", "counter",
              "Lookups of keystore keys not in the broker's key cache (read and unsealed).");
    fprintf (out, "cryptoserver_key_cache_misses_total %" PRIu64 "\n", atomic_load_explicit (&self->cache [1], METRICS_R));
    s_family (out, "cryptoserver_key_cache_dropped_total", "counter",
              "Keys dropped from the key cache because another writer changed their tenant's rows.");
    fprintf (out, "cryptoserver_key_cache_dropped_total %" PRIu64 "\n", atomic_load_explicit (&self->cache [2], METRICS_R));
    s_family (out, "cryptoserver_audit_chain_breaks_total", "counter",
              "Changes of this broker's audit chain by another writer, seen when it appended (audit verify).");
    fprintf (out, "cryptoserver_audit_chain_breaks_total %" PRIu64 "\n",
             atomic_load_explicit (&self->audit_breaks, METRICS_R));
    static const char *const pool [METRICS_POOL_EVENTS][2] = {
        { "taken", "RSA key generations served from the pre-generated pool." },
        { "missed", "RSA key generations of a size the pool keeps that found it empty." },
        { "restored", "Pre-generated RSA keys restored from the keystore at start." } };
    for (size_t e = 0; e < METRICS_POOL_EVENTS; e++) {
        char name [64];
        snprintf (name, sizeof name, "cryptoserver_pool_keys_%s_total", pool [e][0]);
        s_family (out, name, "counter", pool [e][1]);
        fprintf (out, "%s %" PRIu64 "\n", name, atomic_load_explicit (&self->pool [e], METRICS_R));
    }
    s_family (out, "process_cpu_seconds_total", "counter",
              "Total user and system CPU time of the broker process in seconds.");
    fprintf (out, "process_cpu_seconds_total %" PRIu64 ".%06" PRIu64 "\n", cpu_us / 1000000, cpu_us % 1000000);
    if (fclose (out) || rc) {
        free (text);
        return NULL;
    }
    if (len_p)
        *len_p = len;
    return text;
}

char *
metrics_render (metrics_t *self, metrics_view_t view, size_t *len_p)
{
    struct rusage usage;
    uint64_t cpu_us = 0;
    if (getrusage (RUSAGE_SELF, &usage) == 0)
        cpu_us = (uint64_t) usage.ru_utime.tv_sec * 1000000 + (uint64_t) usage.ru_utime.tv_usec
               + (uint64_t) usage.ru_stime.tv_sec * 1000000 + (uint64_t) usage.ru_stime.tv_usec;
    return metrics_render_at (self, cpu_us, view, len_p);
}
