/*  keystore_int.h — what the keystore's own files share (internal to
 *  keystore/, never installed): the keystore object and the helpers that
 *  more than one of its rooms use.  keystore.h stays the one public header.
 *
 *  The rooms: keystore.c (opening and closing, back ends, sealing, master
 *  key files, schema check and upgrade, the test hook), ks_tenant.c
 *  (tenants and PINs), ks_keys.c (keys and idempotent operations),
 *  ks_objects.c (certificates and data objects), ks_schema.c (opening:
 *  schema checks, the operator's upgrade), ks_state.c (the
 *  authenticated state record, the row digest, the counter file: issue
 *  19), ks_changes.c (each tenant's change epoch: issue 19 item 8).  Every function here
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
    uint8_t mac_key [32];                   /* HKDF (base, ROW_MAC_INFO_ROWS) */
    uint8_t pin_key [CS_PIN_KEY_LEN];       /* HKDF (base, ROW_MAC_INFO_PINS) */
    uint8_t state_key [32];                 /* HKDF (base, ROW_MAC_INFO_STATE); base: the
                                               data key (schema 7, ks_master.c), before it
                                               the master key */
} ks_keys_t;

/*  How keystore_open treats a keystore (ks_state.c): as it is (refusing
 *  any unauthenticated schema or rollback), or as the operator's explicit
 *  upgrade or acceptance of a rollback.  */
typedef enum { KS_OPEN_NORMAL, KS_OPEN_UPGRADE, KS_OPEN_ACCEPT_ROLLBACK } ks_open_mode_t;

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
    char *counter_path;         /* the sealed counter file, or NULL: none (ks_state.c) */
    uint8_t id [32];            /* SHA-256 of the master key check value */
    uint64_t counter;           /* the state counter this connection last wrote or read */
    uint8_t digest [32];        /* the row digest of the state record read at open */
    uint8_t delta [32];         /* the open write transaction's change to the row digest */
    keystore_change_t *touched; /* tenants whose rows the open write transaction changes
                                   (prev, epoch: set by ks_changes_write) */
    size_t n_touched;
    keystore_change_t *own;     /* committed since keystore_own_changes_take */
    size_t n_own;
    bool touch_lost;            /* out of memory noting one: the commit is refused */
    int upgraded_from;          /* keystore_upgrade: the schema it found (0: none done) */
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

/* ---- ks_state.c ---------------------------------------------------------- */

/*  The schema this code writes and reads.  */
#define KS_SCHEMA_VERSION KEYSTORE_SCHEMA
/*  The schema the database says (*stored_p), the highest schema its
 *  tables and columns show (*shows_p), and the first table or column of
 *  schema <= want that is missing ("column tenants.mac", "" when none;
 *  `size` bytes).  Read only.  0 or -1.  */
int ks_schema_inspect (keystore_t *self, int want, int *stored_p, int *shows_p, char *missing, size_t size);
/*  The state record (needs self->id): 1 verified (*schema_p, *counter_p),
 *  0 absent, -1, KEYSTORE_DAMAGED after the E: line.  */
int ks_state_get (keystore_t *self, uint64_t *schema_p, uint64_t *counter_p, uint8_t digest [32]);
/*  Writes the state record.  0 or -1.  */
int ks_state_put (keystore_t *self, uint64_t schema, uint64_t counter, const uint8_t digest [32]);
/*  The row digest of the database as it is (every tenant, key, object and
 *  issued row's MAC: XOR of SHA-256 ("cs-digest-v1" || table || NUL ||
 *  MAC)).  0 or -1.  */
int ks_digest_compute (keystore_t *self, uint8_t digest [32]);
/*  In a write transaction: a row of `table` of `tenant` (NULL: of no
 *  tenant) changes from MAC old (NULL: none) to MAC new (NULL: deleted);
 *  the state record's digest and the tenant's change epoch follow at
 *  ks_end.  */
void ks_digest_note (keystore_t *self, const char *tenant, const char *table, const uint8_t *old,
                     size_t old_len, const uint8_t *new, size_t new_len);
/*  The counter file's value when it verifies, else 0 (no file: 0).  0, or
 *  -1 after a log when it cannot be read.  */
int ks_counter_base (keystore_t *self, uint64_t *base_p);
/*  At open, inside the opening transaction: the rows against the state
 *  record's digest, the database's counter against the counter file's (E:
 *  line naming both when it is lower or the file does not verify).
 *  KS_OPEN_ACCEPT_ROLLBACK: records the rows as they are and raises the
 *  database's counter above both instead (logged).  0 or -1.  */
int ks_counter_check (keystore_t *self, uint64_t schema, uint64_t counter, const uint8_t digest [32],
                      ks_open_mode_t mode);
/*  After the opening transaction committed: the counter file follows
 *  self->counter (lowered too after an accepted rollback).  0 or -1.  */
int ks_state_opened (keystore_t *self, ks_open_mode_t mode);
/*  Ends a write transaction: on commit, the state counter goes up by one
 *  first (refused when the counter file is already past it: a rollback
 *  while open), then after the commit the counter file follows.  Returns
 *  0, or -1 (rolled back, or the commit failed).  */
int ks_end (keystore_t *self, bool commit);

/* ---- ks_master.c --------------------------------------------------------- */

/*  Derives the row, PIN and state keys of keys from base (32 bytes: the
 *  data key, or the master key of a keystore before schema 7).  0 or -1.  */
int ks_keys_derive (ks_keys_t *keys, const uint8_t base [32]);
/*  Seals the data key `key` (32 bytes) under master into meta data_key and
 *  derives self's keys from it.  Inside a write transaction.  0 or -1.  */
int ks_data_key_put (keystore_t *self, const uint8_t master [KEYSTORE_MASTER_KEY_LEN], const uint8_t key [32]);
/*  Reads meta data_key, opens it under self's master key and derives
 *  self's keys from it: 0, or -1 after an E: line (missing, or it does not
 *  open: refused).  */
int ks_data_key_load (keystore_t *self);
/*  In a write transaction: 0 when the master key check value still opens
 *  under self's master key, else -1 after an E: line (rotated by another
 *  process: the write is refused).  */
int ks_master_current (keystore_t *self);

/* ---- ks_changes.c -------------------------------------------------------- */

/*  In a write transaction: tenant's rows change (its change epoch moves at
 *  the commit).  */
void ks_changes_touch (keystore_t *self, const char *tenant);
/*  Inside the committing transaction (ks_end): every touched tenant's
 *  change epoch becomes `counter` (the new state counter).  0 or -1.  */
int ks_changes_write (keystore_t *self, uint64_t counter);
/*  The transaction ended: the touched tenants go to the own changes when
 *  it `committed`, else are forgotten.  */
void ks_changes_reset (keystore_t *self, bool committed);

/* ---- ks_schema.c --------------------------------------------------------- */

/*  Inside one write transaction of its own: makes a new database, or
 *  checks an existing one as it is (KS_OPEN_NORMAL, KS_OPEN_ACCEPT_ROLLBACK)
 *  or upgrades it (KS_OPEN_UPGRADE: self->upgraded_from gets the schema it
 *  found); then the counter file follows.  0, or -1 after the E: line
 *  (the documented "master key does not match" line included).  */
int ks_schema_open (keystore_t *self, ks_open_mode_t mode);

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
