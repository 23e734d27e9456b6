/*  pool_store.h — the pre-generated RSA keys survive restarts (seed 002:
 *  key generation is slow, so do it ahead of time, and keep what was done).
 *
 *  They are sealed in the keystore like any key (AES-256-GCM under the
 *  master key, keystore.h), as rows of a tenant the broker reserves for
 *  itself, POOL_STORE_TENANT ("@pool": no client can be mapped to a tenant
 *  whose name starts with '@', and its PINs are random and forgotten, so no
 *  one can log in to it).  A key lives either in the broker's memory or in
 *  the keystore, never in both: at start the broker reads the rows into the
 *  pool and deletes them (each delete durable before the key can be given
 *  out), at a clean stop it seals what the pool holds.  So no key is ever
 *  given to two callers, also after a crash; a crash loses the keys that
 *  were in memory (they are made again).  A key is issued once, ever
 *  (issue 19): the fingerprint of every pool key handed out is recorded in
 *  the keystore (keystore_issued_record, by the slow pool before the
 *  reply), and a sealed row whose key was issued before (a replayed @pool
 *  row, a restored backup) is refused at restore with the E: line "pool:
 *  key REF of @pool was issued before (public key SHA-256 HEX...): a
 *  replayed row or a restored backup: refused and deleted".  Keystore calls go through its
 *  public API only; they run in the frontend's thread at start and at stop,
 *  never while it serves.
 */
#ifndef POOL_STORE_H_INCLUDED
#define POOL_STORE_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "keystore.h"
#include "pool.h"

#define POOL_STORE_TENANT "@pool"

/*  True for a tenant name the broker reserves for itself (starts with '@'):
 *  no client certificate may name it.  */
bool pool_store_reserved (const char *tenant);

/*  Moves the sealed keys of the sizes the pool keeps, as far as it has room,
 *  from the keystore into the pool; rows of other sizes, or beyond the
 *  room, stay; a row whose key was issued before is deleted (logged).
 *  *restored_p gets the count.  Returns 0, or -1 after a log (a row that
 *  does not verify or decrypt is left alone and skipped).  */
int pool_store_restore (keystore_t *ks, pool_t *pool, size_t *restored_p);

/*  The fingerprint a pool key is recorded by (keystore_issued_record): the
 *  SHA-256 of its public key (key_info_fingerprint) when der is a PKCS#8
 *  key, else of der as it is; hex gets its first 8 bytes for log lines.
 *  Returns 0 or -1.  */
int pool_store_fingerprint (const uint8_t *der, size_t len, uint8_t fp [32], char hex [17]);

/*  Seals every ready key of the pool into the keystore (creating the
 *  reserved tenant when needed) and takes it out of the pool.
 *  *sealed_p gets the count.  Returns 0, or -1 after a log (keys that could
 *  not be sealed are wiped: they are made again).  */
int pool_store_seal (keystore_t *ks, pool_t *pool, size_t *sealed_p);

#endif
