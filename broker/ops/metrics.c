/*  metrics.c — the metrics registry: lock-free counters and histograms
 *  written on the job path, read and formatted when scraped.  */
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include "cs_wire.h"
#include "metrics.h"
#include "metrics_quota.h"
#include "cryptoserver/pkcs11v.h"

#define S_MAX_BOARDS 64
#define S_CLIENT_SLOTS 4096             /* power of two, > METRICS_CLIENTS_MAX */
#define S_MECH_EMPTY UINT64_MAX         /* a free mechanism slot */
#define S_R memory_order_relaxed

/*  Upper bounds of the buckets in ns, and as the le label (seconds).  */
static const int64_t s_bounds_ns [METRICS_BUCKETS] = {
    50000, 100000, 250000, 500000, 1000000, 2500000, 5000000, 10000000, 25000000, 50000000,
    100000000, 250000000, 500000000, 1000000000, 2500000000, 5000000000, 10000000000
};
static const char *s_bounds_le [METRICS_BUCKETS] = {
    "0.00005", "0.0001", "0.00025", "0.0005", "0.001", "0.0025", "0.005", "0.01", "0.025", "0.05",
    "0.1", "0.25", "0.5", "1", "2.5", "5", "10"
};
static const char *s_stage_names [METRICS_STAGES] = { "queue", "service", "total" };
static const char *s_result_names [METRICS_RESULTS] = { "ok", "error", "expired" };
static const char *s_fault_names [METRICS_FAULTS] = { "error", "timeout", "wrong" };

/*  Jobs of one mechanism on one board.  */
typedef struct {
    _Atomic uint64_t key;               /* the mechanism, S_MECH_EMPTY while free */
    _Atomic uint64_t results [METRICS_RESULTS];
} s_mech_t;

/*  One histogram, on a cache line of its own: the reactor writes queue and
 *  total, the board's workers service.  */
typedef struct {
    _Alignas (64) _Atomic uint64_t buckets [METRICS_BUCKETS + 1];   /* not cumulative; last: > 10 s */
    _Atomic uint64_t sum_ns;
} s_histogram_t;

typedef struct {
    char *name;
    s_mech_t mechs [METRICS_MECH_SLOTS];    /* open addressing by mechanism */
    s_mech_t other;                         /* when the table is full */
    s_histogram_t stages [METRICS_STAGES];
    _Atomic uint64_t faults [METRICS_FAULTS];
    _Atomic bool down;                      /* cryptoserver_board_up = !down */
} s_board_t;

struct _metrics_client_t {
    char *client;
    char *tenant;
    uint64_t hash;
    _Atomic int64_t inflight;
};

struct _metrics_t {
    s_board_t *boards;
    size_t n_boards;
    _Atomic (metrics_client_t *) clients [S_CLIENT_SLOTS];  /* set once each, never removed */
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
    metrics_quota_t *quota;         /* per-tenant quota counters (metrics_quota.h) */
};

metrics_t *
metrics_new (const char *const *names, size_t n_boards)
{
    metrics_t *self = n_boards <= S_MAX_BOARDS ? calloc (1, sizeof *self) : NULL;
    if (!self)
        return NULL;
    self->boards = calloc (n_boards + 1, sizeof (s_board_t));
    self->other.client = strdup ("(other)");
    self->other.tenant = strdup ("(other)");
    self->quota = metrics_quota_new ();
    if (!self->boards || !self->other.client || !self->other.tenant || !self->quota) {
        metrics_destroy (&self);
        return NULL;
    }
    for (size_t b = 0; b < n_boards; b++) {
        if (!(self->boards [b].name = strdup (names [b]))) {
            metrics_destroy (&self);
            return NULL;
        }
        self->n_boards++;
        for (size_t m = 0; m < METRICS_MECH_SLOTS; m++)
            atomic_init (&self->boards [b].mechs [m].key, S_MECH_EMPTY);
    }
    return self;
}

void
metrics_destroy (metrics_t **self_p)
{
    metrics_t *self = self_p ? *self_p : NULL;
    if (!self)
        return;
    for (size_t i = 0; i < S_CLIENT_SLOTS; i++) {
        metrics_client_t *client = atomic_load (&self->clients [i]);
        if (client) {
            free (client->client);
            free (client->tenant);
            free (client);
        }
    }
    for (size_t b = 0; self->boards && b < self->n_boards; b++)
        free (self->boards [b].name);
    free (self->boards);
    free (self->other.client);
    free (self->other.tenant);
    metrics_quota_destroy (&self->quota);
    free (self);
    *self_p = NULL;
}

/* ------------------------------------------------------------------ */
/*  Recording (the job path: relaxed atomics only)                     */

/*  The slot of `mechanism` on board, claimed with a CAS when new.  */
static s_mech_t *
s_mech (s_board_t *board, unsigned long mechanism)
{
    uint64_t key = mechanism;
    if (key == S_MECH_EMPTY)
        return &board->other;
    size_t start = (size_t) ((key * UINT64_C (0x9E3779B97F4A7C15)) >> 58);     /* 6 bits */
    for (size_t probe = 0; probe < METRICS_MECH_SLOTS; probe++) {
        s_mech_t *slot = &board->mechs [(start + probe) % METRICS_MECH_SLOTS];
        uint64_t current = atomic_load_explicit (&slot->key, S_R);
        if (current == S_MECH_EMPTY
        &&  (atomic_compare_exchange_strong_explicit (&slot->key, &current, key, S_R, S_R)))
            return slot;
        if (current == key)
            return slot;
    }
    return &board->other;
}

void
metrics_job (metrics_t *self, size_t board, unsigned long mechanism, metrics_result_t result)
{
    if (!self || board >= self->n_boards || result >= METRICS_RESULTS)
        return;
    atomic_fetch_add_explicit (&s_mech (&self->boards [board], mechanism)->results [result], 1, S_R);
}

void
metrics_observe (metrics_t *self, size_t board, metrics_stage_t stage, int64_t ns)
{
    if (!self || board >= self->n_boards || stage >= METRICS_STAGES)
        return;
    s_histogram_t *histogram = &self->boards [board].stages [stage];
    if (ns < 0)
        ns = 0;
    size_t i = 0;
    while (i < METRICS_BUCKETS && ns > s_bounds_ns [i])
        i++;
    atomic_fetch_add_explicit (&histogram->buckets [i], 1, S_R);
    atomic_fetch_add_explicit (&histogram->sum_ns, (uint64_t) ns, S_R);
}

void
metrics_queue_depth (metrics_t *self, size_t client, size_t background)
{
    if (!self)
        return;
    atomic_store_explicit (&self->queue [0], client, S_R);
    atomic_store_explicit (&self->queue [1], background, S_R);
}

/*  FNV-1a over "client\0tenant\0".  */
static uint64_t
s_client_hash (const char *client, const char *tenant)
{
    uint64_t hash = UINT64_C (14695981039346656037);
    for (const char *text [2] = { client, tenant }, **t = text; t < text + 2; t++)
        for (const unsigned char *c = (const unsigned char *) *t;; c++) {
            hash = (hash ^ *c) * UINT64_C (1099511628211);
            if (!*c)
                break;
        }
    return hash;
}

static metrics_client_t *
s_client_new (const char *client, const char *tenant, uint64_t hash)
{
    metrics_client_t *self = calloc (1, sizeof *self);
    if (self && (self->client = strdup (client)) && (self->tenant = strdup (tenant))) {
        self->hash = hash;
        return self;
    }
    if (self)
        free (self->client);
    free (self);
    return NULL;
}

static bool
s_client_is (const metrics_client_t *entry, uint64_t hash, const char *client, const char *tenant)
{
    return entry->hash == hash && strcmp (entry->client, client) == 0 && strcmp (entry->tenant, tenant) == 0;
}

/*  The shared counter of the clients that have no slot of their own.  */
static metrics_client_t *
s_client_other (metrics_t *self)
{
    atomic_store_explicit (&self->other_used, true, S_R);
    return &self->other;
}

metrics_client_t *
metrics_client (metrics_t *self, const char *client, const char *tenant)
{
    if (!self)
        return NULL;
    client = client ? client : "";
    tenant = tenant ? tenant : "";
    uint64_t hash = s_client_hash (client, tenant);
    for (size_t probe = 0; probe < S_CLIENT_SLOTS; probe++) {
        _Atomic (metrics_client_t *) *slot = &self->clients [(hash + probe) % S_CLIENT_SLOTS];
        metrics_client_t *entry = atomic_load_explicit (slot, memory_order_acquire);
        if (!entry) {
            if (atomic_load_explicit (&self->n_clients, S_R) >= METRICS_CLIENTS_MAX)
                return s_client_other (self);
            metrics_client_t *fresh = s_client_new (client, tenant, hash);
            if (!fresh)
                return s_client_other (self);
            if (atomic_compare_exchange_strong_explicit (slot, &entry, fresh, memory_order_acq_rel,
                                                         memory_order_acquire)) {
                atomic_fetch_add_explicit (&self->n_clients, 1, S_R);
                return fresh;
            }
            free (fresh->client);       /* another thread took the slot: entry is theirs */
            free (fresh->tenant);
            free (fresh);
        }
        if (s_client_is (entry, hash, client, tenant))
            return entry;
    }
    return s_client_other (self);
}

void
metrics_inflight_add (metrics_client_t *client, long delta)
{
    if (client)
        atomic_fetch_add_explicit (&client->inflight, delta, S_R);
}

void
metrics_key_cache (metrics_t *self, bool hit)
{
    if (self)
        atomic_fetch_add_explicit (&self->cache [hit ? 0 : 1], 1, S_R);
}

metrics_quota_t *
metrics_quota (metrics_t *self)
{
    return self ? self->quota : NULL;
}

void
metrics_key_cache_dropped (metrics_t *self, size_t n)
{
    if (self && n)
        atomic_fetch_add_explicit (&self->cache [2], n, S_R);
}

void
metrics_audit_break (metrics_t *self)
{
    if (self)
        atomic_fetch_add_explicit (&self->audit_breaks, 1, S_R);
}

void
metrics_pool (metrics_t *self, metrics_pool_t event, size_t n)
{
    if (self && event < METRICS_POOL_EVENTS)
        atomic_fetch_add_explicit (&self->pool [event], n, S_R);
}

unsigned long
metrics_item_mechanism (const work_item_t *item)
{
    switch (item->kind) {
        case WORK_SIGN:
        case WORK_DECRYPT: return item->mech.type ? item->mech.type : METRICS_MECH_NONE;
        case WORK_DERIVE: return CKM_ECDH1_DERIVE;
        case WORK_MODEXP: return item->modexp.modulus ? CKM_CS_MODEXP : CKM_CS_RSA_CRT;
        case WORK_SYM: return item->sym.mechanism;
        case WORK_GENERATE:
        case WORK_GENERATE_RESIDENT: return item->gen.mechanism;
        default: return METRICS_MECH_NONE;
    }
}

void
metrics_item_done (metrics_t *self, const work_item_t *item, int64_t received_ns)
{
    if (!self)
        return;
    int64_t now = metrics_now_ns ();
    metrics_job (self, item->board, metrics_item_mechanism (item), item->rv == CKR_OK ? METRICS_OK : METRICS_ERROR);
    metrics_observe (self, item->board, METRICS_QUEUE, item->given_ns - item->submitted_ns);
    metrics_observe (self, item->board, METRICS_TOTAL, now - (received_ns ? received_ns : item->submitted_ns));
}

void
metrics_item_expired (metrics_t *self, const work_item_t *item)
{
    metrics_job (self, item->board, metrics_item_mechanism (item), METRICS_EXPIRED);
}

/* ------------------------------------------------------------------ */
/*  Rendering (the scraping thread)                                    */

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
    uint64_t x = atomic_load_explicit (&(*(s_mech_t *const *) a)->key, S_R);
    uint64_t y = atomic_load_explicit (&(*(s_mech_t *const *) b)->key, S_R);
    return x < y ? -1 : x > y;
}

static void
s_mech_lines (FILE *out, const s_board_t *board, s_mech_t *slot, const char *mechanism)
{
    uint64_t key = atomic_load_explicit (&slot->key, S_R);
    if (!mechanism)
        mechanism = key == METRICS_MECH_NONE ? "none" : cs_mech_name ((unsigned long) key);
    for (size_t r = 0; r < METRICS_RESULTS; r++) {
        fputs ("cryptoserver_jobs_total{board=\"", out);
        s_label (out, board->name);
        fprintf (out, "\",mechanism=\"%s\",result=\"%s\"} %" PRIu64 "\n", mechanism, s_result_names [r],
                 atomic_load_explicit (&slot->results [r], S_R));
    }
}

static void
s_render_jobs (metrics_t *self, FILE *out)
{
    s_family (out, "cryptoserver_jobs_total", "counter",
              "Jobs given to a board's worker, by board, PKCS#11 mechanism and result "
              "(ok, error: another CK_RV, expired: deadline passed in the queue, not run).");
    for (size_t b = 0; b < self->n_boards; b++) {
        s_board_t *board = &self->boards [b];
        s_mech_t *used [METRICS_MECH_SLOTS];
        size_t n = 0;
        for (size_t m = 0; m < METRICS_MECH_SLOTS; m++)
            if (atomic_load_explicit (&board->mechs [m].key, S_R) != S_MECH_EMPTY)
                used [n++] = &board->mechs [m];
        qsort (used, n, sizeof used [0], s_mech_order);
        for (size_t i = 0; i < n; i++)
            s_mech_lines (out, board, used [i], NULL);
        uint64_t other = 0;
        for (size_t r = 0; r < METRICS_RESULTS; r++)
            other += atomic_load_explicit (&board->other.results [r], S_R);
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
            s_histogram_t *histogram = &self->boards [b].stages [s];
            uint64_t count = 0;
            for (size_t i = 0; i <= METRICS_BUCKETS; i++) {
                count += atomic_load_explicit (&histogram->buckets [i], S_R);
                fputs ("cryptoserver_job_seconds_bucket{board=\"", out);
                s_label (out, self->boards [b].name);
                fprintf (out, "\",stage=\"%s\",le=\"%s\"} %" PRIu64 "\n", s_stage_names [s],
                         i < METRICS_BUCKETS ? s_bounds_le [i] : "+Inf", count);
            }
            fputs ("cryptoserver_job_seconds_sum{board=\"", out);
            s_label (out, self->boards [b].name);
            fprintf (out, "\",stage=\"%s\"} ", s_stage_names [s]);
            s_seconds (out, atomic_load_explicit (&histogram->sum_ns, S_R));
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
    fprintf (out, "\"} %" PRId64 "\n", atomic_load_explicit (&client->inflight, S_R));
}

/*  One line for all clients: their jobs in flight summed, no names.  */
static void
s_render_clients_aggregate (metrics_t *self, FILE *out)
{
    int64_t sum = atomic_load_explicit (&self->other.inflight, S_R);
    for (size_t i = 0; i < S_CLIENT_SLOTS; i++) {
        metrics_client_t *client = atomic_load_explicit (&self->clients [i], memory_order_acquire);
        if (client)
            sum += atomic_load_explicit (&client->inflight, S_R);
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
    metrics_client_t **list = calloc (S_CLIENT_SLOTS, sizeof *list);
    size_t n = 0;
    if (!list)
        return -1;
    for (size_t i = 0; i < S_CLIENT_SLOTS; i++) {
        metrics_client_t *client = atomic_load_explicit (&self->clients [i], memory_order_acquire);
        if (client)
            list [n++] = client;
    }
    qsort (list, n, sizeof list [0], s_client_order);
    for (size_t i = 0; i < n; i++)
        s_client_line (out, list [i]);
    if (atomic_load_explicit (&self->other_used, S_R))
        s_client_line (out, &self->other);
    free (list);
    return 0;
}

void
metrics_board_fault (metrics_t *self, size_t board, metrics_fault_t kind)
{
    if (self && board < self->n_boards && kind < METRICS_FAULTS)
        atomic_fetch_add_explicit (&self->boards [board].faults [kind], 1, S_R);
}

void
metrics_board_up (metrics_t *self, size_t board, bool up)
{
    if (self && board < self->n_boards)
        atomic_store_explicit (&self->boards [board].down, !up, S_R);
}

void
metrics_rerun (metrics_t *self)
{
    if (self)
        atomic_fetch_add_explicit (&self->reruns, 1, S_R);
}

void
metrics_fast_lane (metrics_t *self)
{
    if (self)
        atomic_fetch_add_explicit (&self->fast_lane, 1, S_R);
}

void
metrics_request (metrics_t *self, size_t n_jobs)
{
    if (!self)
        return;
    atomic_fetch_add_explicit (&self->requests, 1, S_R);
    atomic_fetch_add_explicit (&self->request_jobs, n_jobs, S_R);
}

void
metrics_cross_check (metrics_t *self, metrics_cross_t result)
{
    if (self && result < METRICS_CROSS_RESULTS)
        atomic_fetch_add_explicit (&self->cross_checks [result], 1, S_R);
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
        fprintf (out, "\"} %d\n", atomic_load_explicit (&self->boards [b].down, S_R) ? 0 : 1);
    }
    s_family (out, "cryptoserver_wrong_results_total", "counter",
              "Results of a board that failed verification with the key's public half and were not "
              "released (the job was re-run on another board or failed).");
    for (size_t b = 0; b < self->n_boards; b++) {
        fputs ("cryptoserver_wrong_results_total{board=\"", out);
        s_label (out, self->boards [b].name);
        fprintf (out, "\"} %" PRIu64 "\n",
                 atomic_load_explicit (&self->boards [b].faults [METRICS_FAULT_WRONG], S_R));
    }
    s_family (out, "cryptoserver_board_faults_total", "counter",
              "Faults of a board, by kind: error (a device- or session-class error of the driver), "
              "timeout (a driver call over its time limit), wrong (a wrong result).");
    for (size_t b = 0; b < self->n_boards; b++)
        for (size_t k = 0; k < METRICS_FAULTS; k++) {
            fputs ("cryptoserver_board_faults_total{board=\"", out);
            s_label (out, self->boards [b].name);
            fprintf (out, "\",kind=\"%s\"} %" PRIu64 "\n", s_fault_names [k],
                     atomic_load_explicit (&self->boards [b].faults [k], S_R));
        }
    s_family (out, "cryptoserver_job_reruns_total", "counter",
              "Jobs re-run on another board after a board fault.");
    fprintf (out, "cryptoserver_job_reruns_total %" PRIu64 "\n", atomic_load_explicit (&self->reruns, S_R));
    s_family (out, "cryptoserver_fast_lane_jobs_total", "counter",
              "Jobs run on the reactor thread instead of a worker (broker/fast-lane-us): cheap jobs "
              "on an openssl board while nothing waited in the queue.");
    fprintf (out, "cryptoserver_fast_lane_jobs_total %" PRIu64 "\n",
             atomic_load_explicit (&self->fast_lane, S_R));
    static const char *const cross_names [METRICS_CROSS_RESULTS] = { "match", "mismatch", "skipped" };
    s_family (out, "cryptoserver_cross_checks_total", "counter",
              "Jobs run on two boards and compared (broker/cross-check), by result: match, mismatch "
              "(a wrong result caught), skipped (the second run failed, ran on the same board, or "
              "the results could not be compared).");
    for (size_t r = 0; r < METRICS_CROSS_RESULTS; r++)
        fprintf (out, "cryptoserver_cross_checks_total{result=\"%s\"} %" PRIu64 "\n", cross_names [r],
                 atomic_load_explicit (&self->cross_checks [r], S_R));
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
             atomic_load_explicit (&self->queue [0], S_R), atomic_load_explicit (&self->queue [1], S_R));
    s_render_health (self, out);
    s_family (out, "cryptoserver_requests_total", "counter",
              "Client requests decoded (a request carries one job or a batch of them).");
    fprintf (out, "cryptoserver_requests_total %" PRIu64 "\n", atomic_load_explicit (&self->requests, S_R));
    s_family (out, "cryptoserver_request_jobs_total", "counter",
              "Jobs in the client requests decoded; divided by cryptoserver_requests_total, the mean "
              "jobs per request.");
    fprintf (out, "cryptoserver_request_jobs_total %" PRIu64 "\n",
             atomic_load_explicit (&self->request_jobs, S_R));
    int rc = s_render_clients (self, view, out);
    metrics_quota_render (self->quota, view, out);
    s_family (out, "cryptoserver_key_cache_hits_total", "counter",
              "Lookups of keystore keys found in the broker's key cache.");
    fprintf (out, "cryptoserver_key_cache_hits_total %" PRIu64 "\n", atomic_load_explicit (&self->cache [0], S_R));
    s_family (out, "cryptoserver_key_cache_misses_total", "counter",
              "Lookups of keystore keys not in the broker's key cache (read and unsealed).");
    fprintf (out, "cryptoserver_key_cache_misses_total %" PRIu64 "\n", atomic_load_explicit (&self->cache [1], S_R));
    s_family (out, "cryptoserver_key_cache_dropped_total", "counter",
              "Keys dropped from the key cache because another writer changed their tenant's rows.");
    fprintf (out, "cryptoserver_key_cache_dropped_total %" PRIu64 "\n", atomic_load_explicit (&self->cache [2], S_R));
    s_family (out, "cryptoserver_audit_chain_breaks_total", "counter",
              "Changes of this broker's audit chain by another writer, seen when it appended (audit verify).");
    fprintf (out, "cryptoserver_audit_chain_breaks_total %" PRIu64 "\n",
             atomic_load_explicit (&self->audit_breaks, S_R));
    static const char *const pool [METRICS_POOL_EVENTS][2] = {
        { "taken", "RSA key generations served from the pre-generated pool." },
        { "missed", "RSA key generations of a size the pool keeps that found it empty." },
        { "restored", "Pre-generated RSA keys restored from the keystore at start." } };
    for (size_t e = 0; e < METRICS_POOL_EVENTS; e++) {
        char name [64];
        snprintf (name, sizeof name, "cryptoserver_pool_keys_%s_total", pool [e][0]);
        s_family (out, name, "counter", pool [e][1]);
        fprintf (out, "%s %" PRIu64 "\n", name, atomic_load_explicit (&self->pool [e], S_R));
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
