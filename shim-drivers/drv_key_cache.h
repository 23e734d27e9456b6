/*  drv_key_cache.h — a worker session's cache of parsed keys (the openssl
 *  and gmp drivers): keyed by the job's key ref and checked against the
 *  SHA-256 of the PKCS#8 DER it was made from, so a ref that names other
 *  material is parsed again; bounded, least recently used evicted.
 *  Not thread-safe: one cache per driver session (one worker thread).
 */
#ifndef DRV_KEY_CACHE_H
#define DRV_KEY_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <openssl/sha.h>
#include "cs_driver.h"

typedef struct drv_key_cache drv_key_cache_t;

#define DRV_KEY_CACHE_DEFAULT 256       /* keys per session when cache-size is absent */
#define DRV_KEY_CACHE_MAX 100000        /* the largest cache-size a board accepts */

/*  Reads a board's cache-size option (keys per session, min ..
 *  DRV_KEY_CACHE_MAX; DRV_KEY_CACHE_DEFAULT when absent) from its config
 *  section into *size_p.  Returns 0, or -1 after logging "<driver> <board>:
 *  cache-size: must be min..max" for a value that is not a whole number in
 *  range.  See the driver man pages (man/cryptoserver-broker.conf.5).  */
int drv_key_cache_size (zconfig_t *config, const char *driver, const char *board, long min,
                        size_t *size_p);

/*  Frees (and wipes, as the driver's key type does) a cached value and
 *  nulls *value_p.  */
typedef void (drv_key_free_fn) (void **value_p);

/*  A cache of at most `size` keys (0: it keeps none) whose values free_fn
 *  frees.  NULL when out of memory.  Caller destroys.  */
drv_key_cache_t *drv_key_cache_new (size_t size, drv_key_free_fn *free_fn);

/*  Frees every cached value (free_fn), then the cache; NULL-safe, nulls
 *  *self_p.  */
void drv_key_cache_destroy (drv_key_cache_t **self_p);

/*  The value cached for key (by key->ref, when the DER's SHA-256, written to
 *  digest, matches), or NULL: not cacheable (no ref, size 0), not cached,
 *  or cached from other DER (that entry is freed).  The cache keeps
 *  ownership.  */
void *drv_key_cache_get (drv_key_cache_t *self, const cs_drv_key_t *key,
                         unsigned char digest [SHA256_DIGEST_LENGTH]);

/*  Caches value for key (digest from drv_key_cache_get), evicting the least
 *  recently used keys to stay within the size.  Returns true when the cache
 *  took ownership of value; false (the caller keeps it) when key is not
 *  cacheable or out of memory.  */
bool drv_key_cache_put (drv_key_cache_t *self, const cs_drv_key_t *key,
                        const unsigned char digest [SHA256_DIGEST_LENGTH], void *value);

/*  Makes a driver's parsed form of key (an EVP_PKEY, a GMP key ...) from its
 *  PKCS#8 DER; the caller owns the result and frees it with the cache's
 *  free_fn.  NULL with *rv_p set to the driver's error (CKR_KEY_HANDLE_INVALID
 *  when the DER does not parse, ...).  */
typedef void *(drv_key_parse_fn) (const cs_drv_key_t *key, CK_RV *rv_p);

/*  The parsed form of key: the cached one (*owned_p false; the cache keeps
 *  it), else a fresh one from parse, which the cache takes when it can
 *  (*owned_p false) or the caller frees with free_fn (*owned_p true).  NULL
 *  with *rv_p from parse when parsing fails; *rv_p is CKR_OK otherwise.  */
void *drv_key_cache_fetch (drv_key_cache_t *self, const cs_drv_key_t *key, drv_key_parse_fn *parse,
                           bool *owned_p, CK_RV *rv_p);

/*  The first member of the session of a driver that caches parsed keys
 *  (openssl, gmp): its board and its cache.  */
typedef struct {
    cs_board_t *board;
    drv_key_cache_t *cache;
} drv_session_head_t;

/*  A zeroed session of `size` bytes (the driver's struct, whose first member
 *  is a drv_session_head_t) on board, with a cache of cache_size keys that
 *  free_fn frees.  NULL when out of memory.  Caller destroys with
 *  drv_session_destroy.  */
void *drv_session_new (size_t size, cs_board_t *board, size_t cache_size, drv_key_free_fn *free_fn);

/*  Frees the cached keys and the session *session_p (a pointer to a
 *  driver's session pointer); NULL-safe, nulls *session_p.  */
void drv_session_destroy (void *session_p);

/*  How many keys are cached (tests).  */
size_t drv_key_cache_count (drv_key_cache_t *self);

#endif
