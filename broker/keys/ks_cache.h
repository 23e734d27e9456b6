/*  ks_cache.h — what the broker's frontend keeps of the keystore, so that a
 *  sign, decrypt or derive job with a keystore key and the ticket check of
 *  its request touch neither SQLite nor AES-GCM (docs/DESIGN.md §5):
 *    - keys: (tenant, ref) -> the row's description and its private key
 *      (PKCS#8 DER, decrypted) in locked, non-dumpable memory: slabs of
 *      cs_secmem pages cut into slots of 256..8192 bytes; at most max_keys
 *      keys, the least recently used one out first; a slot is wiped when
 *      its key leaves and a slab unmapped when it empties;
 *    - tenant rows: PIN epochs, failure counts, key-list version
 *      (keystore_tenant_t).
 *
 *  Used by one thread, the frontend's.  A key handed to a work item is
 *  pinned (ks_cache_key_get/_put) until the item is back
 *  (ks_cache_key_release): a dropped or evicted key that is pinned leaves
 *  the cache at once but is wiped only at its last release.
 *
 *  Staleness is ruled out by dropping, not by expiry: this broker drops
 *  what its own keystore writes change (ks_cache_key_drop,
 *  ks_cache_tenant_drop), and a change by anyone else (cryptoserver-admin,
 *  another broker) drops the keys and row of the tenants it changed: each
 *  tenant has a change epoch in the keystore (keystore_tenant_changes) and
 *  the cache keeps the one it last saw, so one tenant's write storm leaves
 *  the others' keys cached (issue 19 item 8).  The frontend learns of
 *  writes from ks_watch.h as they start (SQLite) or from the listener's
 *  notifications after the commit (PostgreSQL): it holds the cache
 *  (ks_cache_hold: every lookup misses, nothing is put) until a slow-pool
 *  thread got the write lock once and could tell whether someone else
 *  committed, and read the epochs then (ks_cache_settle drops the tenants
 *  whose epoch moved, or everything when that is unknown).  A read made
 *  while a drop happened must not be cached: the caller takes a token
 *  before it reads (ks_cache_token) and puts with it; a put whose token is
 *  older than the last drop, or was taken on hold, is refused.  Another
 *  source of invalidation (a multi-broker notification) needs only
 *  ks_cache_drop_all or the two drop calls.
 */
#ifndef KS_CACHE_H_INCLUDED
#define KS_CACHE_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "keystore.h"

#define KS_CACHE_MAX_DER 8192       /* bytes: bigger private keys are never cached */

typedef struct _ks_cache_t ks_cache_t;
typedef struct _ks_key_t ks_key_t;

/*  A cache of at most max_keys keys (0: keys are never cached; tenant rows
 *  still are).  NULL when out of memory.  Caller destroys.  */
ks_cache_t *ks_cache_new (size_t max_keys);

/*  Wipes and frees every key, pinned or not (at shutdown, when no item
 *  will come back), and the tenant rows.  NULL-safe; nulls *self_p.  */
void ks_cache_destroy (ks_cache_t **self_p);

/*  A token for a keystore read about to start (the current generation), or
 *  0 while on hold: a put with 0 is always refused.  */
uint64_t ks_cache_token (ks_cache_t *self);

/*  The key (tenant, ref), pinned and made the most recently used, or NULL
 *  (also while on hold).  Release it with ks_cache_key_release.  */
ks_key_t *ks_cache_key_get (ks_cache_t *self, const char *tenant, const char *ref);

/*  Caches a key read with `token`: takes *info_p (nulled) and copies pkcs8
 *  (len bytes, NULL for a row without private material; the caller wipes
 *  its copy) into locked memory, evicting the least recently used unpinned
 *  key when full.  Returns the new key, pinned; NULL (*info_p untouched)
 *  when the token is stale, the cache holds no keys, every key is pinned,
 *  the DER is over KS_CACHE_MAX_DER, or out of memory.  Replaces an entry
 *  of the same (tenant, ref).  */
ks_key_t *ks_cache_key_put (ks_cache_t *self, uint64_t token, const char *tenant, const char *ref,
                            Cs__KeyInfo **info_p, const uint8_t *pkcs8, size_t len);

/*  Unpins a key; the last release of a dropped key wipes and frees it.
 *  NULL-safe; nulls *key_p.  */
void ks_cache_key_release (ks_cache_t *self, ks_key_t **key_p);

/*  A cached key's description, and its PKCS#8 DER (*len_p bytes; NULL and
 *  0 for a row without private material).  Both stay valid while the key
 *  is pinned.  */
const Cs__KeyInfo *ks_key_info (const ks_key_t *key);
const uint8_t *ks_key_pkcs8 (const ks_key_t *key, size_t *len_p);

/*  Drops the key (tenant, ref), if cached.  */
void ks_cache_key_drop (ks_cache_t *self, const char *tenant, const char *ref);

/*  Keys cached now (pinned dropped keys excluded).  */
size_t ks_cache_keys (ks_cache_t *self);

/*  Copies the cached row of tenant into *state; false when not cached (or
 *  on hold).  */
bool ks_cache_tenant_get (ks_cache_t *self, const char *tenant, keystore_tenant_t *state);

/*  Caches a tenant row read with `token` (refused when stale).  */
void ks_cache_tenant_put (ks_cache_t *self, uint64_t token, const char *tenant,
                          const keystore_tenant_t *state);

/*  Drops the row of tenant, if cached.  */
void ks_cache_tenant_drop (ks_cache_t *self, const char *tenant);

/*  Drops every key and tenant row.  */
void ks_cache_drop_all (ks_cache_t *self);

/*  Holds the cache: until as many ks_cache_unhold calls, lookups miss,
 *  tokens are 0 and nothing is put (the keystore file is being written and
 *  its writer may not have committed yet: ks_watch.h).  ks_cache_unhold
 *  with `drop` drops everything first (someone else did commit).  */
void ks_cache_hold (ks_cache_t *self);
void ks_cache_unhold (ks_cache_t *self, bool drop);

/*  The tenants' change epochs (n of them; NULL: unknown) as the keystore
 *  held them when the cache started (before anything is cached; after the
 *  watch or listener started): later ones are compared with them.  When
 *  they are unknown, the first settle drops every tenant once.  */
void ks_cache_epochs_baseline (ks_cache_t *self, const keystore_change_t *changes, size_t n);

/*  Ends one hold (ks_cache_hold) after a look (ks_settle_look) that said
 *  `rc` (1: another connection committed, 0: none did, -1: failed) and, for
 *  1, read `changes` (n tenants' epochs; NULL: could not be read) and
 *  whether the commit was `foreign` (it raised no state counter: made
 *  without the master key, e.g. with sqlite3 or psql, or unknown): drops
 *  the keys and row of every tenant whose epoch moved (the broker's own
 *  writes included) or that is gone; everything when rc is -1, the epochs
 *  are unknown or the commit was foreign (the rows are read again, and
 *  refused when they do not verify).  Returns the keys dropped (the
 *  cryptoserver_key_cache_dropped_total metric).  */
size_t ks_cache_settle (ks_cache_t *self, int rc, const keystore_change_t *changes, size_t n,
                        bool foreign);

/*  This broker's own commits are back (keystore_own_changes_take of the
 *  slow-pool connection that made them): a tenant whose last seen epoch
 *  is the one a commit replaced now has the commit's (its job already
 *  dropped what it changed); otherwise someone else wrote between, and the
 *  tenant's keys and row are dropped.  Returns the keys dropped.  */
size_t ks_cache_own_changes (ks_cache_t *self, const keystore_change_t *changes, size_t n);

#endif
