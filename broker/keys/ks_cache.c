/*  ks_cache.c — the frontend's cache of keystore keys and tenant rows
 *  (ks_cache.h): a hash and an LRU list of keys whose private parts live in
 *  an arena of locked slabs, and a hash of tenant rows.  */
#include <czmq.h>
#include <openssl/crypto.h>
#include "cs_secmem.h"
#include "ks_cache.h"

#define S_SLAB_LEN  65536           /* bytes of one locked slab (16 pages) */
#define S_SLOT_MIN  256             /* the smallest slot; classes double up to KS_CACHE_MAX_DER */
#define S_CLASSES   6               /* 256, 512, ..., 8192 */
#define S_SLOTS_MAX (S_SLAB_LEN / S_SLOT_MIN)

/*  A slab: S_SLAB_LEN bytes of cs_secmem memory cut into slots of one size.  */
typedef struct s_slab_s {
    struct s_slab_s *next;
    uint8_t *base;
    size_t used;                    /* slots in use */
    uint64_t busy [S_SLOTS_MAX / 64];   /* a bit per slot */
} s_slab_t;

struct _ks_key_t {
    char *name;                     /* the hash key (s_key_name) */
    Cs__KeyInfo *info;
    uint8_t *pkcs8;                 /* a slot of the arena, or NULL */
    size_t len;
    size_t pins;
    bool dropped;                   /* out of the cache; freed at the last release */
    ks_key_t *newer, *older;        /* LRU list while cached, the limbo list once dropped */
};

struct _ks_cache_t {
    size_t max_keys;
    zhashx_t *keys;                 /* name -> ks_key_t (not owned by the hash) */
    ks_key_t *newest, *oldest;
    ks_key_t *limbo;                /* dropped keys still pinned (linked by `older`) */
    zhashx_t *tenants;              /* tenant -> keystore_tenant_t (owned) */
    zhashx_t *epochs;               /* tenant -> uint64_t, its change epoch last seen (owned) */
    uint64_t generation;            /* moves at every drop; tokens compare with it */
    size_t holds;
    s_slab_t *slabs [S_CLASSES];
    bool lock_warned;               /* the warning of an unlocked slab is logged once */
};

/* ------------------------------------------------------------------ */
/*  The arena                                                          */

/*  The class of a slot for len bytes, or -1 when too big.  */
static int
s_class (size_t len)
{
    size_t slot = S_SLOT_MIN;
    for (int c = 0; c < S_CLASSES; c++, slot *= 2)
        if (len <= slot)
            return c;
    return -1;
}

/*  A free slot of class c (S_SLOT_MIN << c bytes, zeroed), or NULL.  */
static uint8_t *
s_slot_alloc (ks_cache_t *self, int c)
{
    size_t size = (size_t) S_SLOT_MIN << c, slots = S_SLAB_LEN / size;
    s_slab_t *slab = self->slabs [c];
    while (slab && slab->used == slots)
        slab = slab->next;
    if (!slab) {
        size_t failures = cs_secmem_lock_failures ();
        slab = calloc (1, sizeof *slab);
        if (!slab || !(slab->base = cs_secmem_alloc (S_SLAB_LEN))) {
            free (slab);
            return NULL;
        }
        if (cs_secmem_lock_failures () > failures && !self->lock_warned) {
            self->lock_warned = true;
            zsys_warning ("keystore/key-cache: %d KiB of cached keys could not be locked in memory: "
                          "raise RLIMIT_MEMLOCK (ulimit -l, systemd LimitMEMLOCK=)", S_SLAB_LEN / 1024);
        }
        slab->next = self->slabs [c];
        self->slabs [c] = slab;
    }
    for (size_t i = 0; i < slots; i++)
        if (!(slab->busy [i / 64] & (UINT64_C (1) << (i % 64)))) {
            slab->busy [i / 64] |= UINT64_C (1) << (i % 64);
            slab->used++;
            return slab->base + i * size;
        }
    return NULL;                    /* not reached: used < slots */
}

/*  Wipes slot p of class c and gives it back; an empty slab is unmapped.  */
static void
s_slot_free (ks_cache_t *self, uint8_t *p, int c)
{
    size_t size = (size_t) S_SLOT_MIN << c;
    s_slab_t **link = &self->slabs [c];
    while (*link && !(p >= (*link)->base && p < (*link)->base + S_SLAB_LEN))
        link = &(*link)->next;
    assert (*link);
    s_slab_t *slab = *link;
    size_t i = (size_t) (p - slab->base) / size;
    OPENSSL_cleanse (p, size);
    slab->busy [i / 64] &= ~(UINT64_C (1) << (i % 64));
    if (--slab->used == 0) {
        *link = slab->next;
        cs_secmem_free (slab->base, S_SLAB_LEN);
        free (slab);
    }
}

/* ------------------------------------------------------------------ */
/*  Keys                                                               */

/*  The hash key of (tenant, ref): "<length of tenant>:" tenant ref, which no
 *  other pair shares whatever bytes the names hold.  Written into buf
 *  (size bytes) when it fits, else malloc'd.  Returns it (free it when it
 *  is not buf) or NULL when out of memory.  */
static char *
s_key_name (const char *tenant, const char *ref, char *buf, size_t size)
{
    int len = snprintf (buf, size, "%zu:%s%s", strlen (tenant), tenant, ref);
    char *name = NULL;
    if (len >= 0 && (size_t) len < size)
        return buf;
    return asprintf (&name, "%zu:%s%s", strlen (tenant), tenant, ref) < 0 ? NULL : name;
}

/*  Frees a hash key made by s_key_name unless it is buf.  */
static void
s_key_name_free (char *name, char *buf)
{
    if (name != buf)
        free (name);
}

/*  Wipes and frees a key that is out of the cache.  */
static void
s_key_free (ks_cache_t *self, ks_key_t *key)
{
    if (key->pkcs8)
        s_slot_free (self, key->pkcs8, s_class (key->len));
    if (key->info)
        cs__key_info__free_unpacked (key->info, NULL);
    free (key->name);
    free (key);
}

/*  Takes key out of the LRU list.  */
static void
s_lru_unlink (ks_cache_t *self, ks_key_t *key)
{
    if (key->newer)
        key->newer->older = key->older;
    else
        self->newest = key->older;
    if (key->older)
        key->older->newer = key->newer;
    else
        self->oldest = key->newer;
    key->newer = key->older = NULL;
}

/*  Puts key first in the LRU list.  */
static void
s_lru_front (ks_cache_t *self, ks_key_t *key)
{
    key->older = self->newest;
    key->newer = NULL;
    if (self->newest)
        self->newest->newer = key;
    self->newest = key;
    if (!self->oldest)
        self->oldest = key;
}

/*  Takes a key out of the cache: freed now, or kept in limbo until its
 *  last release.  */
static void
s_key_out (ks_cache_t *self, ks_key_t *key)
{
    zhashx_delete (self->keys, key->name);
    s_lru_unlink (self, key);
    key->dropped = true;
    if (key->pins == 0) {
        s_key_free (self, key);
        return;
    }
    key->older = self->limbo;
    if (self->limbo)
        self->limbo->newer = key;
    self->limbo = key;
}

/*  Takes a dropped key out of limbo.  */
static void
s_limbo_unlink (ks_cache_t *self, ks_key_t *key)
{
    if (key->newer)
        key->newer->older = key->older;
    else
        self->limbo = key->older;
    if (key->older)
        key->older->newer = key->newer;
    key->newer = key->older = NULL;
}

static void
s_free (void **item_p)
{
    free (*item_p);
    *item_p = NULL;
}

/*  Makes room for one more key: evicts the least recently used unpinned
 *  key when full.  Returns false when every key is pinned.  */
static bool
s_room (ks_cache_t *self)
{
    if (zhashx_size (self->keys) < self->max_keys)
        return true;
    ks_key_t *victim = self->oldest;
    while (victim && victim->pins)
        victim = victim->newer;
    if (!victim)
        return false;
    s_key_out (self, victim);
    return true;
}

ks_cache_t *
ks_cache_new (size_t max_keys)
{
    ks_cache_t *self = calloc (1, sizeof *self);
    if (!self)
        return NULL;
    self->max_keys = max_keys;
    self->generation = 1;
    self->keys = zhashx_new ();
    self->tenants = zhashx_new ();
    self->epochs = zhashx_new ();
    if (!self->keys || !self->tenants || !self->epochs) {
        ks_cache_destroy (&self);
        return NULL;
    }
    zhashx_set_destructor (self->tenants, s_free);
    zhashx_set_destructor (self->epochs, s_free);
    return self;
}

void
ks_cache_destroy (ks_cache_t **self_p)
{
    ks_cache_t *self = *self_p;
    if (!self)
        return;
    while (self->newest) {
        ks_key_t *key = self->newest;
        s_lru_unlink (self, key);
        s_key_free (self, key);
    }
    while (self->limbo) {           /* pinned by items that will never come back */
        ks_key_t *key = self->limbo;
        s_limbo_unlink (self, key);
        s_key_free (self, key);
    }
    zhashx_destroy (&self->keys);
    zhashx_destroy (&self->tenants);
    zhashx_destroy (&self->epochs);
    free (self);
    *self_p = NULL;
}

uint64_t
ks_cache_token (ks_cache_t *self)
{
    return self->holds ? 0 : self->generation;
}

ks_key_t *
ks_cache_key_get (ks_cache_t *self, const char *tenant, const char *ref)
{
    char buf [256];
    char *name = self->max_keys && !self->holds ? s_key_name (tenant, ref, buf, sizeof buf) : NULL;
    ks_key_t *key = name ? zhashx_lookup (self->keys, name) : NULL;
    s_key_name_free (name, buf);
    if (key) {
        s_lru_unlink (self, key);
        s_lru_front (self, key);
        key->pins++;
    }
    return key;
}

ks_key_t *
ks_cache_key_put (ks_cache_t *self, uint64_t token, const char *tenant, const char *ref,
                  Cs__KeyInfo **info_p, const uint8_t *pkcs8, size_t len)
{
    int c = pkcs8 ? s_class (len) : 0;
    if (token == 0 || token != self->generation || self->max_keys == 0 || c < 0 || !*info_p)
        return NULL;
    ks_key_t *key = calloc (1, sizeof *key);
    if (!key || !(key->name = s_key_name (tenant, ref, NULL, 0)))
        goto fail;
    ks_key_t *old = zhashx_lookup (self->keys, key->name);
    if (old)
        s_key_out (self, old);
    if (!s_room (self) || (pkcs8 && !(key->pkcs8 = s_slot_alloc (self, c))))
        goto fail;
    if (pkcs8)
        memcpy (key->pkcs8, pkcs8, len);
    key->len = pkcs8 ? len : 0;
    if (zhashx_insert (self->keys, key->name, key))
        goto fail;
    key->info = *info_p;
    *info_p = NULL;
    key->pins = 1;
    s_lru_front (self, key);
    return key;
fail:
    if (key && key->pkcs8)
        s_slot_free (self, key->pkcs8, c);
    if (key)
        free (key->name);
    free (key);
    return NULL;
}

void
ks_cache_key_release (ks_cache_t *self, ks_key_t **key_p)
{
    ks_key_t *key = *key_p;
    if (!key)
        return;
    assert (key->pins > 0);
    if (--key->pins == 0 && key->dropped) {
        s_limbo_unlink (self, key);
        s_key_free (self, key);
    }
    *key_p = NULL;
}

const Cs__KeyInfo *
ks_key_info (const ks_key_t *key)
{
    return key->info;
}

const uint8_t *
ks_key_pkcs8 (const ks_key_t *key, size_t *len_p)
{
    *len_p = key->len;
    return key->pkcs8;
}

void
ks_cache_key_drop (ks_cache_t *self, const char *tenant, const char *ref)
{
    char buf [256];
    char *name = s_key_name (tenant, ref, buf, sizeof buf);
    ks_key_t *key = name ? zhashx_lookup (self->keys, name) : NULL;
    s_key_name_free (name, buf);
    if (key)
        s_key_out (self, key);
    self->generation++;
}

size_t
ks_cache_keys (ks_cache_t *self)
{
    return zhashx_size (self->keys);
}

/* ------------------------------------------------------------------ */
/*  Tenant rows, and everything                                        */

bool
ks_cache_tenant_get (ks_cache_t *self, const char *tenant, keystore_tenant_t *state)
{
    const keystore_tenant_t *cached = self->holds ? NULL : zhashx_lookup (self->tenants, tenant);
    if (cached)
        *state = *cached;
    return cached != NULL;
}

void
ks_cache_tenant_put (ks_cache_t *self, uint64_t token, const char *tenant,
                     const keystore_tenant_t *state)
{
    if (token == 0 || token != self->generation)
        return;
    keystore_tenant_t *copy = malloc (sizeof *copy);
    if (!copy)
        return;
    *copy = *state;
    zhashx_update (self->tenants, tenant, copy);
}

void
ks_cache_tenant_drop (ks_cache_t *self, const char *tenant)
{
    zhashx_delete (self->tenants, tenant);
    self->generation++;
}

void
ks_cache_drop_all (ks_cache_t *self)
{
    while (self->newest)
        s_key_out (self, self->newest);
    zhashx_purge (self->tenants);
    self->generation++;
}

void
ks_cache_hold (ks_cache_t *self)
{
    self->holds++;
}

void
ks_cache_unhold (ks_cache_t *self, bool drop)
{
    assert (self->holds > 0);
    if (drop)
        ks_cache_drop_all (self);
    self->holds--;
}

/* ------------------------------------------------------------------ */
/*  Tenants' change epochs (keystore_tenant_changes, issue 19 item 8)  */

/*  Drops every key of tenant and its row.  Returns the keys dropped.  */
static size_t
s_tenant_out (ks_cache_t *self, const char *tenant)
{
    char buf [256];
    char *prefix = s_key_name (tenant, "", buf, sizeof buf);
    size_t len = prefix ? strlen (prefix) : 0, dropped = 0;
    ks_key_t *key = self->oldest;
    while (key) {
        ks_key_t *next = key->newer;
        if (!prefix || strncmp (key->name, prefix, len) == 0) {     //  no memory: all of them
            s_key_out (self, key);
            dropped++;
        }
        key = next;
    }
    s_key_name_free (prefix, buf);
    zhashx_delete (self->tenants, tenant);
    self->generation++;
    return dropped;
}

//  Records tenant's epoch as read by a look; true when it moved (or was
//  not known).  Epochs only grow (state counter values): one below the
//  known one was read before it and says nothing new (UINT64_MAX: a record
//  that does not verify, always a move).
static bool
s_epoch_moved (ks_cache_t *self, const char *tenant, uint64_t epoch)
{
    uint64_t *known = zhashx_lookup (self->epochs, tenant);
    if (known && (*known == epoch || (epoch < *known && *known != UINT64_MAX)))
        return false;
    if (!known && (known = malloc (sizeof *known)) && zhashx_insert (self->epochs, tenant, known) != 0) {
        free (known);
        known = NULL;
    }
    if (known)
        *known = epoch;
    return true;
}

//  True when tenant is in changes.
static bool
s_listed (const char *tenant, const keystore_change_t *changes, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp (changes [i].tenant, tenant) == 0)
            return true;
    return false;
}

void
ks_cache_epochs_baseline (ks_cache_t *self, const keystore_change_t *changes, size_t n)
{
    for (size_t i = 0; changes && i < n; i++)
        s_epoch_moved (self, changes [i].tenant, changes [i].epoch);
}

size_t
ks_cache_settle (ks_cache_t *self, int rc, const keystore_change_t *changes, size_t n, bool foreign)
{
    size_t dropped = 0;
    if (rc == 0) {
        ks_cache_unhold (self, false);
        return 0;
    }
    if (foreign && changes)
        zsys_info ("keystore/key-cache: a commit that raised no state counter (made without the master "
                   "key, or while change notifications were lost): every cached key and tenant row dropped");
    if (rc < 0 || !changes || foreign) {        //  unknown: every tenant may have changed
        dropped = zhashx_size (self->keys);
        ks_cache_drop_all (self);
        zhashx_purge (self->epochs);
        ks_cache_epochs_baseline (self, changes, n);    //  what is read from now on is of these
    }
    else {
        for (size_t i = 0; i < n; i++)
            if (s_epoch_moved (self, changes [i].tenant, changes [i].epoch)) {
                size_t out = s_tenant_out (self, changes [i].tenant);
                if (out)
                    zsys_info ("keystore/key-cache: tenant %s changed in the keystore: its %zu cached "
                               "keys dropped", changes [i].tenant, out);
                dropped += out;
            }
        //  Tenants gone from the keystore.
        zlistx_t *known = zhashx_keys (self->epochs);
        for (const char *tenant = known ? zlistx_first (known) : NULL; tenant; tenant = zlistx_next (known))
            if (!s_listed (tenant, changes, n)) {
                dropped += s_tenant_out (self, tenant);
                zhashx_delete (self->epochs, tenant);
            }
        if (!known) {
            dropped += zhashx_size (self->keys);
            ks_cache_drop_all (self);
        }
        zlistx_destroy (&known);
    }
    ks_cache_unhold (self, false);
    return dropped;
}

size_t
ks_cache_own_changes (ks_cache_t *self, const keystore_change_t *changes, size_t n)
{
    size_t dropped = 0;
    for (size_t i = 0; changes && i < n; i++) {
        uint64_t *known = zhashx_lookup (self->epochs, changes [i].tenant);
        if (known && *known != UINT64_MAX && *known >= changes [i].epoch)
            continue;                           //  a look saw it, or later
        if (known && *known == changes [i].prev && changes [i].prev != UINT64_MAX) {
            *known = changes [i].epoch;         //  nobody else wrote between: follow it
            continue;
        }
        dropped += s_tenant_out (self, changes [i].tenant);
        s_epoch_moved (self, changes [i].tenant, changes [i].epoch);
    }
    return dropped;
}
