/*  keystore_int.h — what the keystore's own files share (internal to
 *  keystore/, never installed): the keystore object and the helpers that
 *  more than one of its rooms use.  keystore.h stays the one public header.
 *
 *  The rooms: keystore.c (opening and closing, back ends, sealing, master
 *  key files, schema check and upgrade, the test hook), ks_tenant.c
 *  (tenants and PINs), ks_keys.c (keys and idempotent operations),
 *  ks_objects.c (certificates and data objects).  Every function here
 *  takes an open keystore and is used by one thread at a time.
 */
#ifndef KEYSTORE_INT_H_INCLUDED
#define KEYSTORE_INT_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "keystore.h"
#include "ks_backend.h"
#include "cs_pin.h"
#include "row_mac.h"

//  The keystore's secrets, kept together in one locked, no-dump page.
typedef struct {
    uint8_t master [KEYSTORE_MASTER_KEY_LEN];
    uint8_t mac_key [32];                   /* HKDF (master, ROW_MAC_INFO_ROWS) */
    uint8_t pin_key [CS_PIN_KEY_LEN];       /* HKDF (master, ROW_MAC_INFO_PINS) */
} ks_keys_t;

struct _keystore_t {
    const ks_backend_t *be;     /* where rows go */
    ks_store_t *store;          /* its connection */
    char *location;             /* path or URL as given (keystore_open_again) */
    ks_keys_t *keys;            /* the master key and the keys derived from it:
                                   one locked, no-dump page of its own (cs_secmem) */
    int depth;                  /* open key-write transactions: > 0 inside
                                   keystore_idem_begin .. keystore_idem_end */
    bool doomed;                /* a write inside it failed: it rolls back */
    char *idem_tenant;          /* the open idempotent operation's tenant and id */
    uint8_t idem_id [KEYSTORE_IDEM_ID_MAX];
    size_t idem_id_len;
};

/*  A tenant row's PIN columns as the keystore works on them.  */
typedef row_mac_tenant_t ks_tenant_row_t;

/* ---- keystore.c ---------------------------------------------------------- */

/*  Tells the test hook (keystore_set_test_hook), if any, that `call` is about to read.  */
void ks_hook (const char *call);
/*  What log lines call the database (the back end's `where`).  */
const char *ks_where (keystore_t *self);
/*  Seals plain under key with AES-256-GCM: malloc'd nonce || ciphertext || tag, or NULL.  */
uint8_t *ks_seal (const uint8_t *key, const void *aad, size_t aad_len,
                  const uint8_t *plain, size_t len, size_t *blob_len_p);
/*  Opens a ks_seal blob: malloc'd plaintext (caller wipes), or NULL when it does not verify.  */
uint8_t *ks_open (const uint8_t *key, const void *aad, size_t aad_len,
                  const uint8_t *blob, size_t blob_len, size_t *len_p);
/*  The associated data prefix || tenant || NUL || ref of a sealed row (malloc'd), or NULL.  */
uint8_t *ks_row_aad (const char *prefix, const char *tenant, const char *ref, size_t *len_p);

/* ---- ks_tenant.c --------------------------------------------------------- */

/*  Frees the PIN hashes of a tenant row and zeroes it.  */
void ks_tenant_row_free (ks_tenant_row_t *row);
/*  Reads (and with `verify` checks the MAC of) tenant row `name`: 1, 0 unknown, -1, KEYSTORE_DAMAGED.  */
int ks_tenant_read (keystore_t *self, const char *name, bool verify, bool lock, ks_tenant_row_t *row,
                    uint64_t *keys_version_p);
/*  Writes the PIN columns of tenant row `name` and their MAC (in a write transaction): 0 or -1.  */
int ks_tenant_write (keystore_t *self, const char *name, const ks_tenant_row_t *row);
/*  The next value of the database-wide version counter, or 0 on failure.  */
uint64_t ks_version_next (keystore_t *self);
/*  A new PIN epoch above `old` (in a write transaction), or 0 on failure.  */
int64_t ks_epoch_next (keystore_t *self, int64_t old);

/* ---- ks_keys.c ----------------------------------------------------------- */

/*  The MAC of a key row (row_mac_key) under the keystore's row key: 0 or -1.  */
int ks_key_mac (keystore_t *self, const char *tenant, const char *ref, const uint8_t *info,
                size_t info_len, const uint8_t *private, size_t private_len, uint8_t mac [ROW_MAC_LEN]);
/*  True when `ref` is a usable key or object reference (1..128 bytes).  */
bool ks_ref_ok (const char *ref);

#endif
