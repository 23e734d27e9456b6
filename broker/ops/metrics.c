/*  metrics.c — the metrics registry: lock-free counters and histograms
 *  written on the job path (relaxed atomics only); metrics_render.c reads
 *  and formats them when scraped.  */
#include <stdlib.h>
#include <string.h>
#include "cs_wire.h"
#include "metrics_int.h"
#include "metrics_quota.h"
#include "cryptoserver/pkcs11v.h"

/*  Upper bounds of the buckets in ns, and as the le label (seconds).  */
static const int64_t s_bounds_ns [METRICS_BUCKETS] = {
    50000, 100000, 250000, 500000, 1000000, 2500000, 5000000, 10000000, 25000000, 50000000,
    100000000, 250000000, 500000000, 1000000000, 2500000000, 5000000000, 10000000000
};

metrics_t *
metrics_new (const char *const *names, size_t n_boards)
{
    metrics_t *self = n_boards <= METRICS_MAX_BOARDS ? calloc (1, sizeof *self) : NULL;
    if (!self)
        return NULL;
    self->boards = calloc (n_boards + 1, sizeof (metrics_board_t));
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
            atomic_init (&self->boards [b].mechs [m].key, METRICS_MECH_EMPTY);
    }
    return self;
}

void
metrics_destroy (metrics_t **self_p)
{
    metrics_t *self = self_p ? *self_p : NULL;
    if (!self)
        return;
    for (size_t i = 0; i < METRICS_CLIENT_SLOTS; i++) {
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

/*  The slot of `mechanism` on board, claimed with a CAS when new.  */
static metrics_mech_t *
s_mech (metrics_board_t *board, unsigned long mechanism)
{
    uint64_t key = mechanism;
    if (key == METRICS_MECH_EMPTY)
        return &board->other;
    size_t start = (size_t) ((key * UINT64_C (0x9E3779B97F4A7C15)) >> 58);     /* 6 bits */
    for (size_t probe = 0; probe < METRICS_MECH_SLOTS; probe++) {
        metrics_mech_t *slot = &board->mechs [(start + probe) % METRICS_MECH_SLOTS];
        uint64_t current = atomic_load_explicit (&slot->key, METRICS_R);
        if (current == METRICS_MECH_EMPTY
        &&  (atomic_compare_exchange_strong_explicit (&slot->key, &current, key, METRICS_R, METRICS_R)))
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
    atomic_fetch_add_explicit (&s_mech (&self->boards [board], mechanism)->results [result], 1, METRICS_R);
}

void
metrics_observe (metrics_t *self, size_t board, metrics_stage_t stage, int64_t ns)
{
    if (!self || board >= self->n_boards || stage >= METRICS_STAGES)
        return;
    metrics_histogram_t *histogram = &self->boards [board].stages [stage];
    if (ns < 0)
        ns = 0;
    size_t i = 0;
    while (i < METRICS_BUCKETS && ns > s_bounds_ns [i])
        i++;
    atomic_fetch_add_explicit (&histogram->buckets [i], 1, METRICS_R);
    atomic_fetch_add_explicit (&histogram->sum_ns, (uint64_t) ns, METRICS_R);
}

void
metrics_queue_depth (metrics_t *self, size_t client, size_t background)
{
    if (!self)
        return;
    atomic_store_explicit (&self->queue [0], client, METRICS_R);
    atomic_store_explicit (&self->queue [1], background, METRICS_R);
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
    atomic_store_explicit (&self->other_used, true, METRICS_R);
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
    for (size_t probe = 0; probe < METRICS_CLIENT_SLOTS; probe++) {
        _Atomic (metrics_client_t *) *slot = &self->clients [(hash + probe) % METRICS_CLIENT_SLOTS];
        metrics_client_t *entry = atomic_load_explicit (slot, memory_order_acquire);
        if (!entry) {
            if (atomic_load_explicit (&self->n_clients, METRICS_R) >= METRICS_CLIENTS_MAX)
                return s_client_other (self);
            metrics_client_t *fresh = s_client_new (client, tenant, hash);
            if (!fresh)
                return s_client_other (self);
            if (atomic_compare_exchange_strong_explicit (slot, &entry, fresh, memory_order_acq_rel,
                                                         memory_order_acquire)) {
                atomic_fetch_add_explicit (&self->n_clients, 1, METRICS_R);
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
        atomic_fetch_add_explicit (&client->inflight, delta, METRICS_R);
}

void
metrics_key_cache (metrics_t *self, bool hit)
{
    if (self)
        atomic_fetch_add_explicit (&self->cache [hit ? 0 : 1], 1, METRICS_R);
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
        atomic_fetch_add_explicit (&self->cache [2], n, METRICS_R);
}

void
metrics_audit_break (metrics_t *self)
{
    if (self)
        atomic_fetch_add_explicit (&self->audit_breaks, 1, METRICS_R);
}

void
metrics_pool (metrics_t *self, metrics_pool_t event, size_t n)
{
    if (self && event < METRICS_POOL_EVENTS)
        atomic_fetch_add_explicit (&self->pool [event], n, METRICS_R);
}

unsigned long
metrics_item_mechanism (const work_item_t *item)
{
    switch (item->kind) {
        case WORK_SIGN:
        case WORK_DECRYPT:
        case WORK_VERIFY:
        case WORK_ENCAPSULATE:
        case WORK_DECAPSULATE: return item->mech.type ? item->mech.type : METRICS_MECH_NONE;
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

void
metrics_board_fault (metrics_t *self, size_t board, metrics_fault_t kind)
{
    if (self && board < self->n_boards && kind < METRICS_FAULTS)
        atomic_fetch_add_explicit (&self->boards [board].faults [kind], 1, METRICS_R);
}

void
metrics_board_up (metrics_t *self, size_t board, bool up)
{
    if (self && board < self->n_boards)
        atomic_store_explicit (&self->boards [board].down, !up, METRICS_R);
}

void
metrics_rerun (metrics_t *self)
{
    if (self)
        atomic_fetch_add_explicit (&self->reruns, 1, METRICS_R);
}

void
metrics_fast_lane (metrics_t *self)
{
    if (self)
        atomic_fetch_add_explicit (&self->fast_lane, 1, METRICS_R);
}

void
metrics_request (metrics_t *self, size_t n_jobs)
{
    if (!self)
        return;
    atomic_fetch_add_explicit (&self->requests, 1, METRICS_R);
    atomic_fetch_add_explicit (&self->request_jobs, n_jobs, METRICS_R);
}

void
metrics_cross_check (metrics_t *self, metrics_cross_t result)
{
    if (self && result < METRICS_CROSS_RESULTS)
        atomic_fetch_add_explicit (&self->cross_checks [result], 1, METRICS_R);
}
