/*  ks_backend.h — the storage back ends of the keystore (internal to
 *  keystore/): SQLite (ks_sqlite.c, one file, the default) and PostgreSQL
 *  (ks_pg.c, a database several brokers share).
 *
 *  keystore.c and its rooms (keystore_int.h: ks_tenant.c, ks_keys.c,
 *  ks_objects.c) do everything that needs the master key (sealing private
 *  keys, row MACs, PIN hashing) and the rules of the public API; a back end
 *  stores and returns rows exactly as it is given them: it never sees a key
 *  or a PIN in the clear, only sealed blobs, keyed PIN hashes and MACs.  The
 *  tables and their meaning are the same in both (cryptoserver-keystore(5)):
 *  meta (name -> value), tenants, keys, idempotency (the results of
 *  key-management jobs by their ids), objects, issued (fingerprints of
 *  issued pool keys), audit, and a counter for key-list versions and PIN
 *  epochs.  The row slots (meta_get .. audit_sigs) are the row layer's
 *  (ks_sql.h: KS_ROWS_SLOTS), the same in both; the rest is each back
 *  end's own.
 *
 *  Every function returns 0 (or 1 "found/changed", 0 "absent/unchanged"
 *  where it says so) or -1 after a log line naming the database (its
 *  `where`).  A store is used by one thread at a time.
 */
#ifndef KS_BACKEND_H_INCLUDED
#define KS_BACKEND_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "row_mac.h"
#include "keystore_audit.h"

typedef struct _ks_store_t ks_store_t;
typedef struct _keystore_listener_t keystore_listener_t;

/*  A tenant row as stored.  row's strings are malloc'd (ks_tenant_rec_free).  */
typedef struct {
    row_mac_tenant_t row;       /* PIN forms, failure counts, PIN epochs */
    uint64_t keys_version;      /* outside the MAC */
    uint8_t *mac;               /* NULL: the row has none */
    size_t mac_len;
} ks_tenant_rec_t;

/*  A key row as stored; every pointer malloc'd (ks_key_rec_free).  */
typedef struct {
    char *ref;
    uint8_t *info;              /* packed cs.KeyInfo */
    size_t info_len;
    uint8_t *private;           /* sealed PKCS#8, or NULL: none */
    size_t private_len;
    uint8_t *mac;               /* NULL: none */
    size_t mac_len;
} ks_key_rec_t;

/*  An idempotency row as stored (keystore_idem_begin); pointers malloc'd
 *  (ks_idem_rec_free).  */
typedef struct {
    uint8_t *result;            /* packed cs.Result of the job */
    size_t result_len;
    int64_t created;            /* seconds since the epoch */
    uint8_t *mac;               /* NULL: none */
    size_t mac_len;
} ks_idem_rec_t;

void ks_tenant_rec_free (ks_tenant_rec_t *rec);
void ks_key_rec_free (ks_key_rec_t *rec);
void ks_idem_rec_free (ks_idem_rec_t *rec);

/*  Copies len bytes into a malloc'd buffer with a spare NUL byte (NULL on
 *  out of memory).  */
uint8_t *ks_dup (const void *data, size_t len);

typedef struct {
    const char *name;                       /* "sqlite", "postgresql" */
    /*  Opens a connection to location (a path, or a postgresql:// URL).
     *  Caller closes.  */
    ks_store_t *(*open) (const char *location);
    void (*close) (ks_store_t **store_p);
    /*  What log lines call the database (the path; the URL without its
     *  password).  */
    const char *(*where) (ks_store_t *store);
    /*  A write transaction: SQLite BEGIN IMMEDIATE (the file's write lock);
     *  PostgreSQL BEGIN, and reads with `lock` take row locks (FOR UPDATE)
     *  until its end.  end commits (commit) or rolls back.  */
    int (*begin) (ks_store_t *store);
    int (*end) (ks_store_t *store, bool commit);
    /*  A read-only transaction that sees one snapshot of the whole
     *  database until end (the operator's copy and backup,
     *  keystore_dump.h): SQLite BEGIN (its reads see one snapshot; WAL
     *  writers go on), PostgreSQL BEGIN ISOLATION LEVEL REPEATABLE READ
     *  READ ONLY.  */
    int (*snapshot) (ks_store_t *store);
    /*  Inside the opening transaction, only for a new database or an
     *  operator's upgrade (keystore_upgrade): creates what is missing and
     *  brings the tables to the current schema's columns; *found_p gets 0
     *  for a new database, else the version keystore.c still has to deal
     *  with: 1 (SQLite schema 1: rows need their MACs), or the version the
     *  database was at.  */
    int (*migrate) (ks_store_t *store, int *found_p);
    /*  Read only, inside the opening transaction (PostgreSQL: it takes the
     *  migrations' advisory lock first): 1 when table `table` (with
     *  `column` NULL) or its column `column` exists, 0 when not.  */
    int (*has) (ks_store_t *store, const char *table, const char *column);
    /*  The schema version the database says it is at (SQLite meta
     *  'schema', PostgreSQL max (schema_version.version)); 0 when it says
     *  none.  Not authenticated: keystore.c compares it with the state
     *  record (ks_state.c).  */
    int (*version_get) (ks_store_t *store, int *version_p);
    /*  Records that the database now is at schema `version`.  */
    int (*version_set) (ks_store_t *store, int version);
    /*  meta rows: get returns 1 (found: *value_p malloc'd, NUL-terminated),
     *  0 absent, -1.  */
    int (*meta_get) (ks_store_t *store, const char *name, uint8_t **value_p, size_t *len_p);
    int (*meta_put) (ks_store_t *store, const char *name, const void *value, size_t len);
    /*  The next value of the database-wide counter (> 0, never repeated).  */
    int (*counter_next) (ks_store_t *store, uint64_t *value_p);
    /*  Tenant rows.  read: 1 found (*rec filled), 0 unknown.  update
     *  writes the PIN columns and the MAC: 1 changed, 0 unknown.  */
    int (*tenant_read) (ks_store_t *store, const char *name, bool lock, ks_tenant_rec_t *rec);
    int (*tenant_insert) (ks_store_t *store, const char *name, const ks_tenant_rec_t *rec);
    int (*tenant_update) (ks_store_t *store, const char *name, const row_mac_tenant_t *row,
                          const uint8_t mac [ROW_MAC_LEN]);
    int (*tenant_delete) (ks_store_t *store, const char *name);        /* 1 / 0 unknown */
    int (*tenant_exists) (ks_store_t *store, const char *name);        /* 1 / 0 */
    /*  A NULL-terminated malloc'd array of malloc'd names in name order, or NULL.  */
    char **(*tenant_list) (ks_store_t *store);
    int (*keys_version_get) (ks_store_t *store, const char *tenant, uint64_t *version_p); /* 1 / 0 */
    int (*keys_version_set) (ks_store_t *store, const char *tenant, uint64_t version);    /* 1 / 0 */
    /*  Key rows.  read: 1 found, 0 unknown.  insert fails on a duplicate.
     *  update replaces info and mac: 1 changed, 0 unknown.  */
    int (*key_read) (ks_store_t *store, const char *tenant, const char *ref, bool lock,
                     ks_key_rec_t *rec);
    int (*key_insert) (ks_store_t *store, const char *tenant, const ks_key_rec_t *rec);
    int (*key_update) (ks_store_t *store, const char *tenant, const char *ref, const uint8_t *info,
                       size_t info_len, const uint8_t mac [ROW_MAC_LEN]);
    int (*key_delete) (ks_store_t *store, const char *tenant, const char *ref);    /* 1 / 0 */
    /*  Replaces private and mac (a master key rotation, ks_master.c): 1
     *  changed, 0 unknown.  */
    int (*key_reseal) (ks_store_t *store, const char *tenant, const char *ref, const uint8_t *private,
                       size_t private_len, const uint8_t mac [ROW_MAC_LEN]);
    /*  The tenant's key rows in the order they were stored: *recs_p a
     *  malloc'd array of *count_p (free each with ks_key_rec_free).  */
    int (*key_list) (ks_store_t *store, const char *tenant, ks_key_rec_t **recs_p, size_t *count_p);
    /*  One page of them in ref byte order (keyset pagination, issue #25):
     *  at most `limit` (> 0) rows whose ref sorts after `after` ("" for the
     *  first page); like key_list otherwise.  */
    int (*key_page) (ks_store_t *store, const char *tenant, const char *after, size_t limit,
                     ks_key_rec_t **recs_p, size_t *count_p);
    /*  Idempotency rows (tenant, id): read: 1 found (*rec filled), 0
     *  unknown.  insert: 1 inserted, 0 the id is already recorded (by a
     *  transaction that committed meanwhile: nothing written, no log).
     *  expire deletes the rows created before `before` (seconds since the
     *  epoch): the count deleted, or -1.  */
    int (*idem_read) (ks_store_t *store, const char *tenant, const uint8_t *id, size_t id_len,
                      ks_idem_rec_t *rec);
    int (*idem_insert) (ks_store_t *store, const char *tenant, const uint8_t *id, size_t id_len,
                        const ks_idem_rec_t *rec);
    int (*idem_expire) (ks_store_t *store, int64_t before);

    /*  Object rows (certificates, data objects: table objects, schema 4;
     *  the same columns as key rows, private holding the sealed object of
     *  a CKA_PRIVATE one).  read: 1 found, 0 unknown.  put inserts or
     *  replaces the row (tenant, rec->ref).  delete: 1 / 0 unknown.  list:
     *  like key_list.  */
    int (*object_read) (ks_store_t *store, const char *tenant, const char *ref, ks_key_rec_t *rec);
    int (*object_put) (ks_store_t *store, const char *tenant, const ks_key_rec_t *rec);
    int (*object_delete) (ks_store_t *store, const char *tenant, const char *ref);
    int (*object_list) (ks_store_t *store, const char *tenant, ks_key_rec_t **recs_p, size_t *count_p);
    /*  Issued pool keys (schema 5, table issued): insert: 1 inserted, 0
     *  the fingerprint is already there (nothing written, no log).  read:
     *  1 found (*tenant_p and *mac_p malloc'd), 0 unknown.  count: the rows.  */
    int (*issued_insert) (ks_store_t *store, const uint8_t fingerprint [32], const char *tenant,
                          int64_t created, const uint8_t mac [ROW_MAC_LEN]);
    int (*issued_read) (ks_store_t *store, const uint8_t fingerprint [32], char **tenant_p,
                        int64_t *created_p, uint8_t **mac_p, size_t *mac_len_p);
    /*  The MACs of every issued row (the row digest, ks_state.c): a
     *  malloc'd array of *count_p ROW_MAC_LEN-byte entries (a missing or
     *  short MAC reads as zeros), NULL when there are none; with fps_p
     *  non-NULL, their fingerprints too (32 bytes each, the same order).  */
    int (*issued_macs) (ks_store_t *store, uint8_t **macs_p, uint8_t **fps_p, size_t *count_p);
    /*  The audit chain (schema 6, table audit; keystore_audit.h).  head:
     *  1 and broker's last row's seq and hash, 0 no row.  insert: 0 or -1
     *  (a duplicate (broker, seq) too).  list: every row ordered by broker
     *  and seq (keystore_audit_rows_free).  */
    int (*audit_head) (ks_store_t *store, const char *broker, int64_t *seq_p,
                       uint8_t hash [KEYSTORE_AUDIT_HASH_LEN]);
    int (*audit_insert) (ks_store_t *store, const keystore_audit_row_t *row);
    int (*audit_list) (ks_store_t *store, keystore_audit_row_t **rows_p, size_t *count_p);
    /*  The signatures of every checkpoint of every chain (the row digest,
     *  ks_state.c): a malloc'd array of *count_p KEYSTORE_AUDIT_SIG_LEN-byte
     *  entries (a short one reads as zeros), NULL when there are none.  */
    int (*audit_sigs) (ks_store_t *store, uint8_t **sigs_p, size_t *count_p);
    /*  keystore_settle.  */
    int (*settle) (ks_store_t *store);
    /*  keystore_listener_new; NULL in a back end without notifications.  */
    keystore_listener_t *(*listen) (ks_store_t *store);
} ks_backend_t;

extern const ks_backend_t ks_sqlite_backend;
#ifdef HAVE_LIBPQ
extern const ks_backend_t ks_pg_backend;
#endif

/*  The back end of a location (a path or a URL), or NULL after a log.  */
const ks_backend_t *ks_backend_for (const char *location);
/*  Appends a zeroed row to *rows_p (growing it): the new row, or NULL.  */
keystore_audit_row_t *ks_audit_row_add (keystore_audit_row_t **rows_p, size_t *count_p, size_t *room_p);

/*  The listener of a back end (ks_pg.c); keystore.c forwards to these.  */
uint64_t ks_listener_changes (keystore_listener_t *self);
uint64_t ks_listener_foreign (keystore_listener_t *self);
bool ks_listener_connected (keystore_listener_t *self);
void ks_listener_destroy (keystore_listener_t **self_p);

#endif
