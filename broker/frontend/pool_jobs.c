/*  pool_jobs.c — the pool of pre-generated RSA keys (pool.h): restore at
 *  start and seal at stop (pool_store.h), background refills on idle
 *  workers, the background items that come back (refills, resident-key
 *  clean-ups), and the pipe's POOL-WAIT.
 *
 *  Owns: fe_pool_t (private here: the pool, refills at once, POOL-WAIT).
 *  May call: inventory.c (fe_boards_that, fe_board_index), dispatch.c
 *  (fe_submit), reply.c (fe_drained_check), pool.h, pool_store.h.  */
#include "pool_store.h"
#include "frontend_int.h"

/*  The pool and what goes with it; frontend_t.pool is NULL without one.  */
struct _fe_pool_t {
    pool_t *keys;                   /* pre-generated RSA keys */
    size_t max_running;             /* refills at once */
    unsigned wait_bits;             /* "POOL-WAIT": reply when this size ... */
    size_t wait_count;              /* ... has this many keys */
    bool waiting;
};

/*  Answers a "POOL-WAIT" once the pool has the keys it waits for.  */
static void
s_pool_waiter (frontend_t *self)
{
    if (self->pool->waiting && pool_ready (self->pool->keys, self->pool->wait_bits) >= self->pool->wait_count) {
        self->pool->waiting = false;
        zstr_sendf (self->pipe, "%zu", pool_ready (self->pool->keys, self->pool->wait_bits));
    }
}

static void s_refill_back (void *arg, work_item_t *item);

/*  Queues background refills while the pool lacks keys (workers take them
 *  only when no client item waits: scheduler.h).  */
void
fe_pool_refill (frontend_t *self)
{
    /*  No refills while draining: a worker that is shutting down would
        never hand the item back, and its key material would leak.  */
    uint64_t boards = self->pool && !self->draining ? fe_boards_that (self, FE_CAN_GENERATE, CKK_RSA, 0, NULL) : 0;
    unsigned bits;
    while (boards && (bits = pool_next_refill (self->pool->keys, self->pool->max_running)) != 0) {
        work_item_t *item = calloc (1, sizeof *item);
        if (!item) {
            pool_refill_failed (self->pool->keys, bits);
            return;
        }
        item->kind = WORK_GENERATE;
        item->low = true;
        item->bits = bits;
        item->gen = (cs_keygen_t) { .mechanism = CKM_RSA_PKCS_KEY_PAIR_GEN, .modulus_bits = bits };
        item->boards = boards;
        item->deadline = INT64_MAX;
        item->done = s_refill_back;
        item->done_arg = self;
        if (fe_submit (self, item)) {
            pool_refill_failed (self->pool->keys, bits);
            free (item);
            return;
        }
    }
}

/*  A refill came back (its completion, called by dispatch.c): its key
 *  goes to the pool, or the refill is counted failed; the item is freed
 *  and the next refills go out.  */
static void
s_refill_back (void *arg, work_item_t *item)
{
    frontend_t *self = arg;
    if (self->pool) {
        if (item->rv == CKR_OK) {
            pool_put (self->pool->keys, item->bits, item->out, item->out_len);
            item->out = NULL;
        }
        else {
            zsys_warning ("pool: RSA-%u generation failed: %s", item->bits, cs_rv_name (item->rv));
            pool_refill_failed (self->pool->keys, item->bits);
        }
        s_pool_waiter (self);
    }
    if (item->out) {
        OPENSSL_cleanse (item->out, item->out_len);
        free (item->out);
    }
    free (item);
    fe_pool_refill (self);
    fe_drained_check (self);
}

/*  keys/home and the pool of pre-generated RSA keys (when configured and a
 *  board can generate RSA material).  */
int
fe_keys_start (frontend_t *self)
{
    const broker_config_t *config = self->config;
    size_t gen_workers = 0;
    bool any = false;
    self->home_board = streq (config->keys_home, "keystore") ? -1 : fe_board_index (self, config->keys_home);
    for (size_t i = 0; i < BROKER_POOL_SIZES; i++)
        any |= config->pool_rsa [i] > 0;
    for (size_t b = 0; b < self->args->n_boards; b++)
        if (board_generates (self->args->boards [b], CKK_RSA, false))
            gen_workers += (size_t) self->args->boards [b]->threads;
    if (!any)
        return 0;
    if (gen_workers == 0) {
        zsys_warning ("keys/pool-rsa-*: no board generates RSA keys as material: no pool");
        return 0;
    }
    if (!(self->pool = calloc (1, sizeof *self->pool)) || !(self->pool->keys = pool_new (config->pool_rsa)))
        return -1;
    self->pool->max_running = gen_workers > 1 ? gen_workers / 2 : 1;
    size_t restored = 0;
    if (self->args->keystore && pool_store_restore (self->args->keystore, self->pool->keys, &restored))
        zsys_warning ("pool: some keys sealed in the keystore could not be restored (see above)");
    if (restored)
        zsys_info ("pool: %zu pre-generated RSA keys restored from the keystore", restored);
    metrics_pool (self->args->metrics, METRICS_POOL_RESTORED, restored);
    return 0;
}

/*  Seals the pool's ready keys in the keystore at a stop (pool_store.h)
 *  and frees the pool.  */
void
fe_pool_stop (frontend_t *self)
{
    size_t sealed = 0;
    if (!self->pool)
        return;
    if (self->args->keystore && pool_store_seal (self->args->keystore, self->pool->keys, &sealed))
        zsys_warning ("pool: not every pre-generated key could be sealed in the keystore (see above)");
    if (sealed)
        zsys_info ("pool: %zu pre-generated RSA keys sealed in the keystore for the next start", sealed);
    pool_destroy (&self->pool->keys);
    free (self->pool);
    self->pool = NULL;
}

/*  A pre-generated key for a generation job of key type `type` (PKCS#8,
 *  *len_p bytes, owned by the caller, to be wiped), with a refill queued;
 *  NULL when the pool does not keep that size and exponent, or is empty
 *  (counted: cryptoserver_pool_keys_missed_total).  */
unsigned char *
fe_pool_take (frontend_t *self, const Cs__GenerateKeyPairJob *job, CK_KEY_TYPE type, size_t *len_p)
{
    bool pooled = type == CKK_RSA && self->pool && keyjobs_default_exponent (job)
               && pool_keeps (self->pool->keys, job->modulus_bits);
    unsigned char *pkcs8 = pooled ? pool_take (self->pool->keys, job->modulus_bits, len_p) : NULL;
    if (pooled)
        metrics_pool (self->args->metrics, pkcs8 ? METRICS_POOL_TAKEN : METRICS_POOL_MISSED, 1);
    if (pkcs8)
        fe_pool_refill (self);
    return pkcs8;
}

/*  "POOL-WAIT" BITS COUNT: replies the number of ready keys of BITS once it
 *  is at least COUNT ("0" at once when the pool does not keep that size).  */
void
fe_pipe_pool_wait (frontend_t *self)
{
    char *bits = zstr_recv (self->pipe), *count = bits ? zstr_recv (self->pipe) : NULL;
    unsigned wait_bits = bits ? (unsigned) atoi (bits) : 0;
    size_t wait_count = count ? (size_t) atol (count) : 0;
    zstr_free (&bits);
    zstr_free (&count);
    if (!self->pool) {
        zstr_send (self->pipe, "0");
        return;
    }
    self->pool->wait_bits = wait_bits;
    self->pool->wait_count = wait_count;
    self->pool->waiting = true;
    s_pool_waiter (self);
}
