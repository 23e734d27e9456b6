/*  pool.c — pre-generated RSA keys (pool.h).  */
#include <stdlib.h>
#include <string.h>
#include <openssl/crypto.h>
#include "broker_config.h"
#include "cs_secmem.h"
#include "pool.h"

typedef struct {
    unsigned char *der;             /* cs_secmem block */
    size_t len;
} s_key_t;

typedef struct {
    unsigned bits;
    size_t target;
    s_key_t *keys;                  /* target slots, the first n_ready used */
    size_t n_ready;
    size_t running;                 /* refills in flight */
} s_size_t;

struct _pool_t {
    s_size_t sizes [BROKER_POOL_SIZES];
    size_t running;
};

pool_t *
pool_new (const int *targets)
{
    pool_t *self = calloc (1, sizeof *self);
    for (size_t i = 0; self && i < BROKER_POOL_SIZES; i++) {
        s_size_t *size = &self->sizes [i];
        size->bits = broker_pool_bits (i);
        size->target = targets [i] > 0 ? (size_t) targets [i] : 0;
        if (size->target && !(size->keys = calloc (size->target, sizeof (s_key_t))))
            pool_destroy (&self);
    }
    return self;
}

/*  Wipes and frees one malloc'd key buffer.  */
static void
s_wipe (unsigned char *der, size_t len)
{
    if (!der)
        return;
    OPENSSL_cleanse (der, len);
    free (der);
}

void
pool_destroy (pool_t **self_p)
{
    pool_t *self = self_p ? *self_p : NULL;
    if (!self)
        return;
    for (size_t i = 0; i < BROKER_POOL_SIZES; i++) {
        for (size_t k = 0; k < self->sizes [i].n_ready; k++)
            cs_secmem_free (self->sizes [i].keys [k].der, self->sizes [i].keys [k].len);
        free (self->sizes [i].keys);
    }
    free (self);
    *self_p = NULL;
}

static s_size_t *
s_size (pool_t *self, unsigned bits)
{
    for (size_t i = 0; i < BROKER_POOL_SIZES; i++)
        if (self->sizes [i].bits == bits && self->sizes [i].target)
            return &self->sizes [i];
    return NULL;
}

unsigned char *
pool_take (pool_t *self, unsigned bits, size_t *len_p)
{
    s_size_t *size = s_size (self, bits);
    if (!size || size->n_ready == 0)
        return NULL;
    s_key_t key = size->keys [size->n_ready - 1];
    unsigned char *copy = malloc (key.len);     /* the caller's copy is its business */
    if (!copy)
        return NULL;
    memcpy (copy, key.der, key.len);
    cs_secmem_free (key.der, key.len);
    size->keys [--size->n_ready] = (s_key_t) { NULL, 0 };
    *len_p = key.len;
    return copy;
}

/*  Ends one running refill of size.  */
static void
s_refill_end (pool_t *self, s_size_t *size)
{
    if (size && size->running > 0) {
        size->running--;
        self->running--;
    }
}

void
pool_put (pool_t *self, unsigned bits, unsigned char *der, size_t len)
{
    s_size_t *size = s_size (self, bits);
    s_refill_end (self, size);
    unsigned char *locked = size && size->n_ready < size->target ? cs_secmem_dup (der, len) : NULL;
    s_wipe (der, len);
    if (locked)
        size->keys [size->n_ready++] = (s_key_t) { locked, len };
}

void
pool_refill_failed (pool_t *self, unsigned bits)
{
    s_refill_end (self, s_size (self, bits));
}

unsigned
pool_next_refill (pool_t *self, size_t max_running)
{
    if (self->running >= max_running)
        return 0;
    /*  The emptiest size first (relative to its target).  */
    s_size_t *best = NULL;
    for (size_t i = 0; i < BROKER_POOL_SIZES; i++) {
        s_size_t *size = &self->sizes [i];
        if (size->n_ready + size->running >= size->target)
            continue;
        if (!best || (size->n_ready + size->running) * best->target
                   < (best->n_ready + best->running) * size->target)
            best = size;
    }
    if (!best)
        return 0;
    best->running++;
    self->running++;
    return best->bits;
}

size_t
pool_ready (pool_t *self, unsigned bits)
{
    s_size_t *size = s_size (self, bits);
    return size ? size->n_ready : 0;
}

size_t
pool_room (pool_t *self, unsigned bits)
{
    s_size_t *size = s_size (self, bits);
    return size && size->target > size->n_ready + size->running
           ? size->target - size->n_ready - size->running : 0;
}

int
pool_add (pool_t *self, unsigned bits, const unsigned char *der, size_t len)
{
    s_size_t *size = s_size (self, bits);
    if (!pool_room (self, bits))
        return -1;
    unsigned char *locked = cs_secmem_dup (der, len);
    if (!locked)
        return -1;
    size->keys [size->n_ready++] = (s_key_t) { locked, len };
    return 0;
}

bool
pool_keeps (pool_t *self, unsigned bits)
{
    return s_size (self, bits) != NULL;
}
