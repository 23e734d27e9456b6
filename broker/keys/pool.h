/*  pool.h — pre-generated RSA keys, per modulus size, kept in the broker's
 *  memory so that C_GenerateKeyPair of a token key returns at once while the
 *  pool has one (issue #3; the idea of seeds/002: key generation is slow,
 *  do it ahead of time on idle boards).  Only public exponent 65537.
 *
 *  A pure data structure (no threads): the frontend takes keys, queues
 *  refills as background work items and puts the results back.  Ready keys
 *  are PKCS#8 DER in locked, non-dumpable pages of their own (cs_secmem.h:
 *  never an mlock of heap pages), wiped when taken out or destroyed.
 */
#ifndef POOL_H_INCLUDED
#define POOL_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>

typedef struct _pool_t pool_t;

/*  Creates a pool keeping targets [i] keys of broker_pool_bits (i) bits
 *  (BROKER_POOL_SIZES entries).  NULL when out of memory.  Caller destroys.  */
pool_t *pool_new (const int *targets);

/*  Wipes and frees every key; NULL-safe; nulls *self_p.  */
void pool_destroy (pool_t **self_p);

/*  Takes a ready key of `bits`: returns its PKCS#8 DER (malloc'd, *len_p
 *  bytes; caller wipes with OPENSSL_cleanse and frees), or NULL when none.  */
unsigned char *pool_take (pool_t *self, unsigned bits, size_t *len_p);

/*  Adds a freshly generated key of `bits` and ends one refill of that size.
 *  Takes ownership of der (malloc'd): it is copied into locked memory, then
 *  wiped and freed (also when the size is full or unknown).  */
void pool_put (pool_t *self, unsigned bits, unsigned char *der, size_t len);

/*  Ends one refill of `bits` that produced no key.  */
void pool_refill_failed (pool_t *self, unsigned bits);

/*  Returns the size of a refill to start now (ready + running < target, at
 *  most max_running refills in all), counting it as running; 0 when none.  */
unsigned pool_next_refill (pool_t *self, size_t max_running);

/*  Keys ready of `bits` (0 for a size the pool does not keep).  */
size_t pool_ready (pool_t *self, unsigned bits);

/*  True when the pool keeps keys of `bits` (a target above 0).  */
bool pool_keeps (pool_t *self, unsigned bits);

/*  Room for how many more ready keys of `bits` (target - ready - running
 *  refills; 0 for a size the pool does not keep).  */
size_t pool_room (pool_t *self, unsigned bits);

/*  Adds a ready key of `bits` that no refill made (one restored from the
 *  keystore: pool_store.h).  der (len bytes) is copied into locked memory;
 *  the caller keeps and wipes its own.  Returns 0, or -1 when the size is
 *  not kept, full (pool_room) or out of locked memory.  */
int pool_add (pool_t *self, unsigned bits, const unsigned char *der, size_t len);

#endif
