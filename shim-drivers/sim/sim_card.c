/*  sim_card.c — the simulated card of the sim driver: its parameters from
 *  the board config (presets, per-kind latency tables scaled by the cube of
 *  the key size) and its queue in virtual time.  See sim_card.h.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "sim_card.h"

/*  One entry of a latency or rate table: key size and value.  */
typedef struct {
    unsigned long bits;
    double value;
} s_entry_t;

#define S_TABLE_MAX 16

typedef struct {
    s_entry_t entry [S_TABLE_MAX];
    size_t count;
} s_table_t;

/*  The paper's boards (Berson et al.): Table 2 (single-operation latency,
 *  1024-bit), §5 (rated throughput: AXL200 265/s without CRT; nFast 300
 *  300/s with CRT, 93/s without), §5.1 (26 and about 10 coprocessors).  */
typedef struct {
    const char *name;
    long coprocessors;
    double modexp_ms, modexp_rate;
    double crt_ms, crt_rate;        /* 0: no CRT figures */
} s_preset_t;

static const s_preset_t s_presets [] = {
    { "axl200", 26, 92.19, 265.0, 0, 0 },
    { "nfast300", 10, 85.68, 93.0, 27.03, 300.0 },
};

struct _sim_card_t {
    pthread_mutex_t lock;
    int64_t service_ns;             /* latency of one operation */
    int64_t interface_ns;           /* 1 / max-rate, part of the latency */
    double jitter;                  /* fraction, 0..1 */
    int64_t interface_free;         /* when the interface takes the next operation */
    size_t n;                       /* coprocessors */
    int64_t free [];                /* when each coprocessor is next free */
};

/*  Adds or replaces the entry for `bits`.  Returns 0, or -1 when full.  */
static int
s_table_put (s_table_t *table, unsigned long bits, double value)
{
    for (size_t i = 0; i < table->count; i++)
        if (table->entry [i].bits == bits) {
            table->entry [i].value = value;
            return 0;
        }
    if (table->count == S_TABLE_MAX)
        return -1;
    table->entry [table->count++] = (s_entry_t) { bits, value };
    return 0;
}

/*  The value for `bits`: the entry of the nearest size by ratio, scaled by
 *  (bits / size)^power.  0 when the table is empty.  */
static double
s_table_get (const s_table_t *table, unsigned long bits, double power)
{
    const s_entry_t *best = NULL;
    double best_distance = 0;
    for (size_t i = 0; i < table->count; i++) {
        double distance = fabs (log ((double) bits / (double) table->entry [i].bits));
        if (!best || distance < best_distance) {
            best = &table->entry [i];
            best_distance = distance;
        }
    }
    return best ? best->value * pow ((double) bits / (double) best->bits, power) : 0;
}

/*  Parses a decimal number in [min, max].  Returns 0, or -1.  */
static int
s_number (const char *text, double min, double max, double *value)
{
    char *end = NULL;
    double parsed = text ? strtod (text, &end) : 0;
    if (!text || end == text || *end || !isfinite (parsed) || parsed < min || parsed > max)
        return -1;
    *value = parsed;
    return 0;
}

typedef struct {
    s_table_t latency [2];          /* [0] modexp, [1] crt, milliseconds */
    s_table_t rate [2];             /* operations per second */
} s_tables_t;

/*  Reads one "latency-KIND-BITS-ms" or "max-rate-KIND-BITS" key into the
 *  tables.  Returns 0 (also for keys of other names), or -1 with err.  */
static int
s_table_key (s_tables_t *tables, const char *name, const char *value, char *err, size_t err_size)
{
    bool latency = strncmp (name, "latency-", 8) == 0;
    bool rate = strncmp (name, "max-rate-", 9) == 0;
    if ((!latency && !rate) || streq (name, "latency-ms"))
        return 0;
    char kind [8] = "", tail [4] = "";
    unsigned long bits = 0;
    int fields = sscanf (name + (latency ? 8 : 9), "%7[a-z]-%lu%3s", kind, &bits, tail);
    bool ok = fields >= 2 && (streq (kind, "modexp") || streq (kind, "crt"))
           && bits >= 256 && bits <= 16384
           && (latency ? fields == 3 && streq (tail, "-ms") : fields == 2);
    double number = 0;
    if (ok)
        ok = latency ? s_number (value, 0, SIM_CARD_MAX_LATENCY_MS, &number) == 0
                     : s_number (value, 0.001, 1e9, &number) == 0;
    if (!ok) {
        snprintf (err, err_size, "%s: not a valid %s (latency-modexp|crt-BITS-ms = 0..%.0f ms, "
                  "max-rate-modexp|crt-BITS = operations per second)", name,
                  latency ? "latency" : "rated throughput", SIM_CARD_MAX_LATENCY_MS);
        return -1;
    }
    s_table_t *table = latency ? &tables->latency [streq (kind, "crt")]
                               : &tables->rate [streq (kind, "crt")];
    if (s_table_put (table, bits, number)) {
        snprintf (err, err_size, "%s: at most %d sizes per table", name, S_TABLE_MAX);
        return -1;
    }
    return 0;
}

/*  Fills the tables and coprocessor count from the preset named in config.
 *  Returns 0, or -1 with err for an unknown preset.  */
static int
s_preset (zconfig_t *config, s_tables_t *tables, sim_card_params_t *params, char *err, size_t err_size)
{
    const char *name = zconfig_get (config, "preset", NULL);
    if (!name)
        return 0;
    for (size_t i = 0; i < sizeof s_presets / sizeof s_presets [0]; i++) {
        const s_preset_t *preset = &s_presets [i];
        if (!streq (name, preset->name))
            continue;
        params->preset = preset->name;
        params->coprocessors = preset->coprocessors;
        s_table_put (&tables->latency [0], 1024, preset->modexp_ms);
        s_table_put (&tables->rate [0], 1024, preset->modexp_rate);
        if (preset->crt_ms > 0) {
            s_table_put (&tables->latency [1], 1024, preset->crt_ms);
            s_table_put (&tables->rate [1], 1024, preset->crt_rate);
        }
        return 0;
    }
    snprintf (err, err_size, "preset: unknown preset '%s' (axl200, nfast300)", name);
    return -1;
}

/*  coprocessors, crt, jitter-pct.  Returns 0, or -1 with err.  */
static int
s_scalars (zconfig_t *config, sim_card_params_t *params, char *err, size_t err_size)
{
    double number = 0;
    const char *coprocessors = zconfig_get (config, "coprocessors", NULL);
    const char *threads = zconfig_get (config, "threads", "1");
    if (!coprocessors && !params->preset)
        coprocessors = threads;
    if (coprocessors) {
        if (s_number (coprocessors, 1, SIM_CARD_MAX_COPROCESSORS, &number) || number != floor (number)) {
            snprintf (err, err_size, "coprocessors: must be 1..%d", SIM_CARD_MAX_COPROCESSORS);
            return -1;
        }
        params->coprocessors = (long) number;
    }
    const char *crt = zconfig_get (config, "crt", "false");
    params->crt = streq (crt, "true") || streq (crt, "yes") || streq (crt, "1");
    if (!params->crt && !streq (crt, "false") && !streq (crt, "no") && !streq (crt, "0")) {
        snprintf (err, err_size, "crt: must be true or false");
        return -1;
    }
    if (s_number (zconfig_get (config, "jitter-pct", "0"), 0, 100, &params->jitter_pct)) {
        snprintf (err, err_size, "jitter-pct: must be 0..100");
        return -1;
    }
    return 0;
}

int
sim_card_params_resolve (zconfig_t *config, CK_KEY_TYPE key_type, unsigned long bits,
                         sim_card_params_t *params, char *err, size_t err_size)
{
    s_tables_t tables;
    memset (&tables, 0, sizeof tables);
    memset (params, 0, sizeof *params);
    params->coprocessors = 1;
    if (s_preset (config, &tables, params, err, err_size) || s_scalars (config, params, err, err_size))
        return -1;
    for (zconfig_t *item = zconfig_child (config); item; item = zconfig_next (item))
        if (s_table_key (&tables, zconfig_name (item), zconfig_value (item), err, err_size))
            return -1;
    const char *fixed = zconfig_get (config, "latency-ms", NULL);
    double fixed_ms = 0;
    if (fixed && s_number (fixed, 0, SIM_CARD_MAX_LATENCY_MS, &fixed_ms)) {
        snprintf (err, err_size, "latency-ms: must be 0..%.0f", SIM_CARD_MAX_LATENCY_MS);
        return -1;
    }
    //  The kind of a private-key operation: RSA with or without CRT (a card
    //  without CRT figures runs the private exponent directly), else other.
    size_t kind = params->crt && tables.latency [1].count ? 1 : 0;
    params->kind = key_type != CKK_RSA ? "other" : kind ? "crt" : "modexp";
    if (key_type == CKK_RSA) {
        params->latency_ms = s_table_get (&tables.latency [kind], bits, 3.0);
        params->max_rate = s_table_get (&tables.rate [kind], bits, -3.0);
    }
    if (fixed)
        params->latency_ms = fixed_ms;
    if (params->latency_ms > SIM_CARD_MAX_LATENCY_MS) {
        snprintf (err, err_size, "%lu-bit key: the scaled latency %.0f ms is over %.0f ms",
                  bits, params->latency_ms, SIM_CARD_MAX_LATENCY_MS);
        return -1;
    }
    return 0;
}

sim_card_t *
sim_card_new (const sim_card_params_t *params)
{
    if (params->coprocessors < 1 || params->coprocessors > SIM_CARD_MAX_COPROCESSORS)
        return NULL;
    size_t n = (size_t) params->coprocessors;
    sim_card_t *self = calloc (1, sizeof *self + n * sizeof (int64_t));
    if (!self)
        return NULL;
    if (pthread_mutex_init (&self->lock, NULL)) {
        free (self);
        return NULL;
    }
    self->n = n;
    self->service_ns = (int64_t) llround (params->latency_ms * 1e6);
    self->interface_ns = params->max_rate > 0 ? (int64_t) llround (1e9 / params->max_rate) : 0;
    self->jitter = params->jitter_pct / 100.0;
    return self;
}

void
sim_card_destroy (sim_card_t **self_p)
{
    if (self_p && *self_p) {
        pthread_mutex_destroy (&(*self_p)->lock);
        free (*self_p);
        *self_p = NULL;
    }
}

int64_t
sim_card_reserve (sim_card_t *self, int64_t now_ns, double u)
{
    double factor = 1.0 + (u < -1 ? -1 : u > 1 ? 1 : u) * self->jitter;
    int64_t service = (int64_t) llround ((double) self->service_ns * factor);
    int64_t interface = self->interface_ns < service ? self->interface_ns : service;
    pthread_mutex_lock (&self->lock);
    //  The interface passes one operation at a time, in the order they came.
    int64_t passed = (now_ns > self->interface_free ? now_ns : self->interface_free) + interface;
    self->interface_free = passed;
    //  Then the coprocessor that is free first runs the rest of the latency.
    size_t first = 0;
    for (size_t i = 1; i < self->n; i++)
        if (self->free [i] < self->free [first])
            first = i;
    int64_t start = passed > self->free [first] ? passed : self->free [first];
    int64_t done = start + (service - interface);
    self->free [first] = done;
    pthread_mutex_unlock (&self->lock);
    return done;
}
