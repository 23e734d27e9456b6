/*  drv_key_cache.c — a worker session's LRU cache of parsed keys
 *  (drv_key_cache.h), shared by the openssl and gmp drivers.
 */
#include <stdlib.h>
#include <string.h>
#include <czmq.h>
#include <openssl/crypto.h>
#include "drv_key_cache.h"

typedef struct {
    void *value;
    drv_key_free_fn *free_fn;
    unsigned char digest [SHA256_DIGEST_LENGTH];    /* of the PKCS#8 DER */
    uint64_t used;                  /* the cache's tick at the last use */
} s_entry_t;

struct drv_key_cache {
    zhashx_t *entries;              /* ref -> s_entry_t */
    size_t size;
    drv_key_free_fn *free_fn;
    uint64_t tick;
};

static void
s_entry_destroy (s_entry_t **self_p)
{
    if (*self_p) {
        (*self_p)->free_fn (&(*self_p)->value);
        free (*self_p);
        *self_p = NULL;
    }
}

drv_key_cache_t *
drv_key_cache_new (size_t size, drv_key_free_fn *free_fn)
{
    drv_key_cache_t *self = calloc (1, sizeof *self);
    if (!self || !(self->entries = zhashx_new ())) {
        free (self);
        return NULL;
    }
    zhashx_set_destructor (self->entries, (zhashx_destructor_fn *) s_entry_destroy);
    self->size = size;
    self->free_fn = free_fn;
    return self;
}

void
drv_key_cache_destroy (drv_key_cache_t **self_p)
{
    drv_key_cache_t *self = self_p ? *self_p : NULL;
    if (!self)
        return;
    zhashx_destroy (&self->entries);
    free (self);
    *self_p = NULL;
}

static bool
s_cacheable (const drv_key_cache_t *self, const cs_drv_key_t *key)
{
    return key->ref && *key->ref && self->size > 0;
}

void *
drv_key_cache_get (drv_key_cache_t *self, const cs_drv_key_t *key, unsigned char digest [SHA256_DIGEST_LENGTH])
{
    if (!s_cacheable (self, key))
        return NULL;
    SHA256 (key->pkcs8, key->pkcs8_len, digest);
    s_entry_t *entry = zhashx_lookup (self->entries, key->ref);
    if (entry && CRYPTO_memcmp (entry->digest, digest, SHA256_DIGEST_LENGTH) == 0) {
        entry->used = ++self->tick;
        return entry->value;
    }
    if (entry)
        zhashx_delete (self->entries, key->ref);       /* same ref, other DER: parse again */
    return NULL;
}

/*  Evicts the least recently used entry (a scan: only on a miss when full).  */
static void
s_evict (drv_key_cache_t *self)
{
    const char *oldest = NULL;
    uint64_t oldest_tick = UINT64_MAX;
    for (s_entry_t *e = zhashx_first (self->entries); e; e = zhashx_next (self->entries))
        if (e->used < oldest_tick) {
            oldest_tick = e->used;
            oldest = zhashx_cursor (self->entries);
        }
    if (oldest) {
        char *copy = strdup (oldest);
        if (copy)
            zhashx_delete (self->entries, copy);
        free (copy);
    }
}

bool
drv_key_cache_put (drv_key_cache_t *self, const cs_drv_key_t *key,
                   const unsigned char digest [SHA256_DIGEST_LENGTH], void *value)
{
    s_entry_t *entry = s_cacheable (self, key) && value ? calloc (1, sizeof *entry) : NULL;
    if (!entry)
        return false;
    while (zhashx_size (self->entries) >= self->size)
        s_evict (self);
    entry->value = value;
    entry->free_fn = self->free_fn;
    memcpy (entry->digest, digest, SHA256_DIGEST_LENGTH);
    entry->used = ++self->tick;
    if (zhashx_insert (self->entries, key->ref, entry) == 0)
        return true;
    free (entry);
    return false;
}

void *
drv_key_cache_fetch (drv_key_cache_t *self, const cs_drv_key_t *key, drv_key_parse_fn *parse,
                     bool *owned_p, CK_RV *rv_p)
{
    unsigned char digest [SHA256_DIGEST_LENGTH];
    void *value = drv_key_cache_get (self, key, digest);
    *rv_p = CKR_OK;
    *owned_p = value == NULL;
    if (value)
        return value;
    value = parse (key, rv_p);
    if (value && drv_key_cache_put (self, key, digest, value))
        *owned_p = false;
    return value;
}

void *
drv_session_new (size_t size, cs_board_t *board, size_t cache_size, drv_key_free_fn *free_fn)
{
    drv_session_head_t *self = size >= sizeof *self ? calloc (1, size) : NULL;
    if (!self)
        return NULL;
    self->board = board;
    if (!(self->cache = drv_key_cache_new (cache_size, free_fn))) {
        free (self);
        return NULL;
    }
    return self;
}

void
drv_session_destroy (void *session_p)
{
    drv_session_head_t **self_p = session_p;
    if (!self_p || !*self_p)
        return;
    drv_key_cache_destroy (&(*self_p)->cache);
    free (*self_p);
    *self_p = NULL;
}

int
drv_key_cache_size (zconfig_t *config, const char *driver, const char *board, long min,
                    size_t *size_p)
{
    const char *size = zconfig_get (config, "cache-size", NULL);
    char *end = NULL;
    long value = size ? strtol (size, &end, 10) : DRV_KEY_CACHE_DEFAULT;
    if ((size && (end == size || *end)) || value < min || value > DRV_KEY_CACHE_MAX) {
        zsys_error ("%s %s: cache-size: must be %ld..%d", driver, board, min, DRV_KEY_CACHE_MAX);
        return -1;
    }
    *size_p = (size_t) value;
    return 0;
}

size_t
drv_key_cache_count (drv_key_cache_t *self)
{
    return zhashx_size (self->entries);
}
