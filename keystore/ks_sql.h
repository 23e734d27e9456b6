/*  ks_sql.h — the keystore's row layer (internal to keystore/): the tables
 *  described once (ks_tables.c: columns, types, key, MAC'd columns and
 *  every statement on them), the row functions of ks_backend.h written once
 *  over that description (ks_rows.c, ks_rows_history.c), and the one thing
 *  each back end adds: its dialect, which runs one statement (ks_sqlite.c,
 *  ks_pg.c).
 *
 *  A statement is written once with numbered placeholders `?N`; SQLite runs
 *  it as it is, PostgreSQL with `$N`; where the two dialects really differ
 *  (SQLite's rowid against PostgreSQL's seq column, INSERT OR IGNORE against
 *  ON CONFLICT DO NOTHING, FOR UPDATE) the statement carries the dialect's
 *  own text or the dialect adds the clause.
 */
#ifndef KS_SQL_H_INCLUDED
#define KS_SQL_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "ks_backend.h"

/*  A parameter or a result column.  Parameters: type KS_TEXT (data a
 *  NUL-terminated string, NULL: SQL NULL), KS_BLOB (data, len bytes; NULL:
 *  SQL NULL) or KS_INT (i).  Result columns: the type the statement says
 *  (ks_stmt_t.cols), or KS_NULL for SQL NULL (data "" and len 0); data
 *  points into the dialect's result and is valid during the row callback
 *  only.  */
typedef enum { KS_NULL, KS_TEXT, KS_BLOB, KS_INT } ks_type_t;

typedef struct {
    ks_type_t type;
    const void *data;
    size_t len;
    int64_t i;
} ks_val_t;

#define KS_V_TEXT(s)        ((ks_val_t) { .type = KS_TEXT, .data = (s) })
#define KS_V_BLOB(d, n)     ((ks_val_t) { .type = KS_BLOB, .data = (d), .len = (n) })
#define KS_V_INT(v)         ((ks_val_t) { .type = KS_INT, .i = (int64_t) (v) })

/*  When a read takes row locks (PostgreSQL FOR UPDATE; SQLite's BEGIN
 *  IMMEDIATE already holds the file's write lock): never, when the caller
 *  asks (the `lock` argument of tenant_read, key_read), or whenever the
 *  read is inside a write transaction (not a snapshot).  */
typedef enum { KS_LOCK_NEVER, KS_LOCK_ASKED, KS_LOCK_IN_WRITE } ks_lock_t;

/*  One statement on one table.  */
typedef struct {
    const char *sql;            /* both dialects, ?N placeholders */
    const char *sqlite;         /* SQLite's own text instead, or NULL */
    const char *pg;             /* PostgreSQL's own text instead (still ?N), or NULL */
    const char *cols;           /* result column types, one letter each: t text, b blob,
                                   i integer; NULL: a statement without result rows */
    const char *what;           /* SQLite's log word for a failed step ("read key"), NULL: none */
    int hot;                    /* > 0: SQLite keeps it prepared (its slot, 1..KS_HOT_SLOTS) */
    ks_lock_t lock;
} ks_stmt_t;

#define KS_HOT_SLOTS 4

/*  A column of a table, as both dialects store it.  */
enum { KS_COL_KEY = 1, KS_COL_MACD = 2, KS_COL_MAC = 4 };
typedef struct {
    const char *name;
    char type;                  /* 't' text, 'b' blob, 'i' integer (SQLite INTEGER, PostgreSQL bigint) */
    int role;                   /* KS_COL_*: part of the primary key; covered by the row MAC
                                   (cryptoserver-keystore(5), row_mac.h); the MAC itself */
} ks_col_t;

/*  A table: its name and columns (a NULL name ends them).  */
typedef struct {
    const char *name;
    ks_col_t cols [10];
} ks_table_t;

/*  Every table of the current schema, ending in a NULL name (ks_tables.c).  */
extern const ks_table_t ks_tables [];

/*  Every statement the row layer runs, by name (ks_tables.c).  */
typedef enum {
    KS_Q_META_GET, KS_Q_META_PUT,
    KS_Q_TENANT_READ, KS_Q_TENANT_INSERT, KS_Q_TENANT_UPDATE, KS_Q_TENANT_DELETE,
    KS_Q_TENANT_EXISTS, KS_Q_TENANT_LIST, KS_Q_KEYS_VERSION_GET, KS_Q_KEYS_VERSION_SET,
    KS_Q_KEY_READ, KS_Q_KEY_INSERT, KS_Q_KEY_UPDATE, KS_Q_KEY_RESEAL, KS_Q_KEY_DELETE, KS_Q_KEY_LIST, KS_Q_KEY_PAGE,
    KS_Q_OBJECT_READ, KS_Q_OBJECT_PUT, KS_Q_OBJECT_DELETE, KS_Q_OBJECT_LIST,
    KS_Q_IDEM_READ, KS_Q_IDEM_INSERT, KS_Q_IDEM_EXPIRE,
    KS_Q_ISSUED_INSERT, KS_Q_ISSUED_READ, KS_Q_ISSUED_MACS,
    KS_Q_AUDIT_HEAD, KS_Q_AUDIT_INSERT, KS_Q_AUDIT_LIST, KS_Q_AUDIT_SIGS,
    KS_Q_COUNT
} ks_query_t;

extern const ks_stmt_t ks_stmts [KS_Q_COUNT];

/*  Called for each result row with its columns (as many as stmt->cols
 *  has letters): 0 to go on, -1 to stop (out of memory: the run fails
 *  without a log line).  */
typedef int (ks_row_fn) (void *arg, const ks_val_t *cols);

/*  A back end's dialect.  Every ks_store_t begins with a pointer to its
 *  dialect, so that the row layer reaches it from the store alone.  */
typedef struct {
    /*  Runs stmt with count parameters (at most 8); for a statement with
     *  result columns calls row (arg) for each row and returns how many
     *  there were, else returns the rows changed; -1 after a log line (or
     *  when row stopped it).  lock_asked: the caller's `lock`.  */
    int (*run) (ks_store_t *store, const ks_stmt_t *stmt, const ks_val_t *params, size_t count,
                bool lock_asked, ks_row_fn *row, void *arg);
    /*  Serialises the writers of one audit chain until the transaction
     *  ends (PostgreSQL: an advisory lock), or NULL when the write
     *  transaction already does (SQLite).  0 or -1 after a log.  */
    int (*chain_lock) (ks_store_t *store, const char *broker);
} ks_dialect_t;

/*  The row functions of ks_backend.h, the same for every dialect
 *  (ks_rows.c, ks_rows_history.c; their contracts are the slots' in
 *  ks_backend.h).  */
int ks_rows_meta_get (ks_store_t *store, const char *name, uint8_t **value_p, size_t *len_p);
int ks_rows_meta_put (ks_store_t *store, const char *name, const void *value, size_t len);
int ks_rows_tenant_read (ks_store_t *store, const char *name, bool lock, ks_tenant_rec_t *rec);
int ks_rows_tenant_insert (ks_store_t *store, const char *name, const ks_tenant_rec_t *rec);
int ks_rows_tenant_update (ks_store_t *store, const char *name, const row_mac_tenant_t *row,
                           const uint8_t mac [ROW_MAC_LEN]);
int ks_rows_tenant_delete (ks_store_t *store, const char *name);
int ks_rows_tenant_exists (ks_store_t *store, const char *name);
char **ks_rows_tenant_list (ks_store_t *store);
int ks_rows_keys_version_get (ks_store_t *store, const char *tenant, uint64_t *version_p);
int ks_rows_keys_version_set (ks_store_t *store, const char *tenant, uint64_t version);
int ks_rows_key_read (ks_store_t *store, const char *tenant, const char *ref, bool lock, ks_key_rec_t *rec);
int ks_rows_key_insert (ks_store_t *store, const char *tenant, const ks_key_rec_t *rec);
int ks_rows_key_update (ks_store_t *store, const char *tenant, const char *ref, const uint8_t *info,
                        size_t info_len, const uint8_t mac [ROW_MAC_LEN]);
int ks_rows_key_reseal (ks_store_t *store, const char *tenant, const char *ref, const uint8_t *private,
                        size_t private_len, const uint8_t mac [ROW_MAC_LEN]);
int ks_rows_key_delete (ks_store_t *store, const char *tenant, const char *ref);
int ks_rows_key_list (ks_store_t *store, const char *tenant, ks_key_rec_t **recs_p, size_t *count_p);
int ks_rows_key_page (ks_store_t *store, const char *tenant, const char *after, size_t limit,
                      ks_key_rec_t **recs_p, size_t *count_p);
int ks_rows_object_read (ks_store_t *store, const char *tenant, const char *ref, ks_key_rec_t *rec);
int ks_rows_object_put (ks_store_t *store, const char *tenant, const ks_key_rec_t *rec);
int ks_rows_object_delete (ks_store_t *store, const char *tenant, const char *ref);
int ks_rows_object_list (ks_store_t *store, const char *tenant, ks_key_rec_t **recs_p, size_t *count_p);
int ks_rows_idem_read (ks_store_t *store, const char *tenant, const uint8_t *id, size_t id_len,
                       ks_idem_rec_t *rec);
int ks_rows_idem_insert (ks_store_t *store, const char *tenant, const uint8_t *id, size_t id_len,
                         const ks_idem_rec_t *rec);
int ks_rows_idem_expire (ks_store_t *store, int64_t before);
int ks_rows_issued_insert (ks_store_t *store, const uint8_t fingerprint [32], const char *tenant,
                           int64_t created, const uint8_t mac [ROW_MAC_LEN]);
int ks_rows_issued_read (ks_store_t *store, const uint8_t fingerprint [32], char **tenant_p,
                         int64_t *created_p, uint8_t **mac_p, size_t *mac_len_p);
int ks_rows_issued_macs (ks_store_t *store, uint8_t **macs_p, uint8_t **fps_p, size_t *count_p);
int ks_rows_audit_head (ks_store_t *store, const char *broker, int64_t *seq_p,
                        uint8_t hash [KEYSTORE_AUDIT_HASH_LEN]);
int ks_rows_audit_insert (ks_store_t *store, const keystore_audit_row_t *row);
int ks_rows_audit_list (ks_store_t *store, keystore_audit_row_t **rows_p, size_t *count_p);
int ks_rows_audit_sigs (ks_store_t *store, uint8_t **sigs_p, size_t *count_p);

/*  What the row rooms (ks_rows.c, ks_rows_history.c) share.  ks_rows_run
 *  runs statement q through the store's dialect (ks_dialect_t.run, the
 *  same returns); ks_rows_write one without result rows (the rows
 *  changed, or -1); ks_rows_changed gives 1 when it changed a row, 0 when
 *  none, -1.  ks_rows_blob: a result column as a malloc'd copy with a
 *  spare NUL (ks_dup), NULL for SQL NULL, *ok turned false when out of
 *  memory; ks_rows_text: a malloc'd string ("" for SQL NULL), NULL when
 *  out of memory; ks_rows_fixed: a blob column into `room` bytes (zeros
 *  where it is shorter), returning its stored length.  */
int ks_rows_run (ks_store_t *store, ks_query_t q, const ks_val_t *params, size_t count, bool lock,
                 ks_row_fn *row, void *arg);
int ks_rows_write (ks_store_t *store, ks_query_t q, const ks_val_t *params, size_t count);
int ks_rows_changed (ks_store_t *store, ks_query_t q, const ks_val_t *params, size_t count);
uint8_t *ks_rows_blob (const ks_val_t *v, size_t *len_p, bool *ok);
char *ks_rows_text (const ks_val_t *v);
size_t ks_rows_fixed (const ks_val_t *v, uint8_t *out, size_t room);

/*  The row slots of a ks_backend_t, for a back end's table.  */
#define KS_ROWS_SLOTS \
    .meta_get = ks_rows_meta_get, .meta_put = ks_rows_meta_put, \
    .tenant_read = ks_rows_tenant_read, .tenant_insert = ks_rows_tenant_insert, \
    .tenant_update = ks_rows_tenant_update, .tenant_delete = ks_rows_tenant_delete, \
    .tenant_exists = ks_rows_tenant_exists, .tenant_list = ks_rows_tenant_list, \
    .keys_version_get = ks_rows_keys_version_get, .keys_version_set = ks_rows_keys_version_set, \
    .key_read = ks_rows_key_read, .key_insert = ks_rows_key_insert, .key_update = ks_rows_key_update, \
    .key_reseal = ks_rows_key_reseal, \
    .key_delete = ks_rows_key_delete, .key_list = ks_rows_key_list, .key_page = ks_rows_key_page, \
    .object_read = ks_rows_object_read, .object_put = ks_rows_object_put, \
    .object_delete = ks_rows_object_delete, .object_list = ks_rows_object_list, \
    .idem_read = ks_rows_idem_read, .idem_insert = ks_rows_idem_insert, \
    .idem_expire = ks_rows_idem_expire, \
    .issued_insert = ks_rows_issued_insert, .issued_read = ks_rows_issued_read, \
    .issued_macs = ks_rows_issued_macs, \
    .audit_head = ks_rows_audit_head, .audit_insert = ks_rows_audit_insert, \
    .audit_list = ks_rows_audit_list, .audit_sigs = ks_rows_audit_sigs

#endif
