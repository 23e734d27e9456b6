/*  ks_rows.c — the row functions of ks_backend.h written once (ks_sql.h):
 *  each builds the parameters of its statement (ks_tables.c), has the
 *  store's dialect run it, and turns the result columns into the records
 *  keystore.c gets.  What differs between SQLite and PostgreSQL is in the
 *  statements' texts and in the dialects, never here.
 */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif
#include <stdlib.h>
#include <string.h>
#include "ks_sql.h"

#define N(a) (sizeof (a) / sizeof (a) [0])

//  Every ks_store_t begins with its dialect (ks_sql.h).
static int
s_run (ks_store_t *store, ks_query_t q, const ks_val_t *params, size_t count, bool lock,
       ks_row_fn *row, void *arg)
{
    const ks_dialect_t *dialect = *(const ks_dialect_t *const *) store;
    return dialect->run (store, &ks_stmts [q], params, count, lock, row, arg);
}

//  A statement without result rows: the rows changed, or -1.
static int
s_write (ks_store_t *store, ks_query_t q, const ks_val_t *params, size_t count)
{
    return s_run (store, q, params, count, false, NULL, NULL);
}

//  1 when the statement changed a row, 0 when none, -1.
static int
s_changed (ks_store_t *store, ks_query_t q, const ks_val_t *params, size_t count)
{
    int changed = s_write (store, q, params, count);
    return changed < 0 ? -1 : changed > 0 ? 1 : 0;
}

//  A result column as a malloc'd copy with a spare NUL (ks_dup), NULL for
//  SQL NULL; *ok turns false when out of memory.
static uint8_t *
s_blob (const ks_val_t *v, size_t *len_p, bool *ok)
{
    *len_p = 0;
    if (v->type == KS_NULL)
        return NULL;
    uint8_t *copy = ks_dup (v->data, v->len);
    if (!copy)
        *ok = false;
    *len_p = v->len;
    return copy;
}

//  A text column as a malloc'd string ("" for SQL NULL), or NULL when out of memory.
static char *
s_text (const ks_val_t *v)
{
    return strndup (v->type == KS_NULL ? "" : (const char *) v->data, v->len);
}

//  A blob column into a fixed buffer of `room` bytes (zeros where it is
//  shorter); returns its stored length.
static size_t
s_fixed (const ks_val_t *v, uint8_t *out, size_t room)
{
    memset (out, 0, room);
    if (v->len && v->data)
        memcpy (out, v->data, v->len < room ? v->len : room);
    return v->len;
}

/* ---- meta rows ---------------------------------------------------------- */

typedef struct {
    uint8_t *value;
    size_t len;
} s_meta_t;

static int
s_meta_row (void *arg, const ks_val_t *cols)
{
    s_meta_t *meta = arg;
    meta->len = cols [0].len;
    meta->value = ks_dup (cols [0].data, cols [0].len);
    return meta->value ? 0 : -1;
}

int
ks_rows_meta_get (ks_store_t *store, const char *name, uint8_t **value_p, size_t *len_p)
{
    s_meta_t meta = { NULL, 0 };
    ks_val_t p [] = { KS_V_TEXT (name) };
    int rows = s_run (store, KS_Q_META_GET, p, N (p), false, s_meta_row, &meta);
    if (rows == 1) {
        *value_p = meta.value;
        *len_p = meta.len;
        return 1;
    }
    free (meta.value);
    return rows < 0 ? -1 : 0;
}

int
ks_rows_meta_put (ks_store_t *store, const char *name, const void *value, size_t len)
{
    ks_val_t p [] = { KS_V_TEXT (name), KS_V_BLOB (value, len) };
    return s_write (store, KS_Q_META_PUT, p, N (p)) == 1 ? 0 : -1;
}

/* ---- tenant rows ---------------------------------------------------------- */

static int
s_tenant_row (void *arg, const ks_val_t *cols)
{
    ks_tenant_rec_t *rec = arg;
    bool ok = true;
    for (int i = 0; i < 2; i++) {
        rec->row.pin [i] = s_text (&cols [i]);
        ok = ok && rec->row.pin [i];
        rec->row.failures [i] = cols [2 + i].i;
        rec->row.epoch [i] = cols [4 + i].i;
    }
    rec->mac = s_blob (&cols [6], &rec->mac_len, &ok);
    rec->keys_version = (uint64_t) cols [7].i;
    return ok ? 0 : -1;
}

int
ks_rows_tenant_read (ks_store_t *store, const char *name, bool lock, ks_tenant_rec_t *rec)
{
    ks_val_t p [] = { KS_V_TEXT (name) };
    memset (rec, 0, sizeof *rec);
    int rows = s_run (store, KS_Q_TENANT_READ, p, N (p), lock, s_tenant_row, rec);
    if (rows != 1)
        ks_tenant_rec_free (rec);
    return rows < 0 ? -1 : rows > 0 ? 1 : 0;
}

int
ks_rows_tenant_insert (ks_store_t *store, const char *name, const ks_tenant_rec_t *rec)
{
    ks_val_t p [] = { KS_V_TEXT (name), KS_V_TEXT (rec->row.pin [0]), KS_V_TEXT (rec->row.pin [1]),
                      KS_V_INT (rec->keys_version), KS_V_INT (rec->row.epoch [0]),
                      KS_V_INT (rec->row.epoch [1]), KS_V_BLOB (rec->mac, rec->mac_len) };
    return s_write (store, KS_Q_TENANT_INSERT, p, N (p)) == 1 ? 0 : -1;
}

int
ks_rows_tenant_update (ks_store_t *store, const char *name, const row_mac_tenant_t *row,
                       const uint8_t mac [ROW_MAC_LEN])
{
    ks_val_t p [] = { KS_V_TEXT (name), KS_V_TEXT (row->pin [0]), KS_V_TEXT (row->pin [1]),
                      KS_V_INT (row->failures [0]), KS_V_INT (row->failures [1]),
                      KS_V_INT (row->epoch [0]), KS_V_INT (row->epoch [1]), KS_V_BLOB (mac, ROW_MAC_LEN) };
    return s_write (store, KS_Q_TENANT_UPDATE, p, N (p));
}

int
ks_rows_tenant_delete (ks_store_t *store, const char *name)
{
    ks_val_t p [] = { KS_V_TEXT (name) };
    return s_changed (store, KS_Q_TENANT_DELETE, p, N (p));
}

int
ks_rows_tenant_exists (ks_store_t *store, const char *name)
{
    ks_val_t p [] = { KS_V_TEXT (name) };
    int rows = s_run (store, KS_Q_TENANT_EXISTS, p, N (p), false, NULL, NULL);
    return rows < 0 ? -1 : rows > 0 ? 1 : 0;
}

typedef struct {
    char **names;               /* NULL-terminated */
    size_t count, room;
} s_names_t;

static int
s_name_row (void *arg, const ks_val_t *cols)
{
    s_names_t *list = arg;
    if (list->count == list->room) {
        size_t room = 2 * list->room + 8;
        char **grown = realloc (list->names, (room + 1) * sizeof *grown);
        if (!grown)
            return -1;
        list->names = grown;
        list->room = room;
    }
    list->names [list->count] = s_text (&cols [0]);
    list->names [list->count + 1] = NULL;
    return list->names [list->count++] ? 0 : -1;
}

char **
ks_rows_tenant_list (ks_store_t *store)
{
    s_names_t list = { calloc (1, sizeof (char *)), 0, 0 };
    if (list.names && s_run (store, KS_Q_TENANT_LIST, NULL, 0, false, s_name_row, &list) >= 0)
        return list.names;
    for (size_t i = 0; list.names && list.names [i]; i++)
        free (list.names [i]);
    free (list.names);
    return NULL;
}

static int
s_int_row (void *arg, const ks_val_t *cols)
{
    *(int64_t *) arg = cols [0].i;
    return 0;
}

int
ks_rows_keys_version_get (ks_store_t *store, const char *tenant, uint64_t *version_p)
{
    int64_t version = 0;
    ks_val_t p [] = { KS_V_TEXT (tenant) };
    int rows = s_run (store, KS_Q_KEYS_VERSION_GET, p, N (p), false, s_int_row, &version);
    if (rows > 0)
        *version_p = (uint64_t) version;
    return rows < 0 ? -1 : rows > 0 ? 1 : 0;
}

int
ks_rows_keys_version_set (ks_store_t *store, const char *tenant, uint64_t version)
{
    ks_val_t p [] = { KS_V_TEXT (tenant), KS_V_INT (version) };
    return s_write (store, KS_Q_KEYS_VERSION_SET, p, N (p));
}

/* ---- key and object rows (the same columns) ------------------------------ */

//  Columns ref, info, private, mac into *rec: 0, or -1 when out of memory.
static int
s_key_columns (const ks_val_t *cols, ks_key_rec_t *rec)
{
    bool ok = true;
    memset (rec, 0, sizeof *rec);
    rec->ref = s_text (&cols [0]);
    rec->info = s_blob (&cols [1], &rec->info_len, &ok);
    if (!rec->info && ok)               //  NOT NULL: SQL NULL reads as empty
        rec->info = ks_dup ("", 0);
    rec->private = s_blob (&cols [2], &rec->private_len, &ok);
    rec->mac = s_blob (&cols [3], &rec->mac_len, &ok);
    if (ok && rec->ref && rec->info)
        return 0;
    ks_key_rec_free (rec);
    return -1;
}

static int
s_key_row (void *arg, const ks_val_t *cols)
{
    return s_key_columns (cols, arg);
}

//  Reads row (tenant, ref) of keys or objects: 1, 0 none, -1.
static int
s_row_read (ks_store_t *store, ks_query_t q, const char *tenant, const char *ref, bool lock,
            ks_key_rec_t *rec)
{
    ks_val_t p [] = { KS_V_TEXT (tenant), KS_V_TEXT (ref) };
    memset (rec, 0, sizeof *rec);
    int rows = s_run (store, q, p, N (p), lock, s_key_row, rec);
    return rows < 0 ? -1 : rows > 0 ? 1 : 0;
}

typedef struct {
    ks_key_rec_t *recs;
    size_t count, room;
} s_recs_t;

static int
s_list_row (void *arg, const ks_val_t *cols)
{
    s_recs_t *list = arg;
    if (list->count == list->room) {
        size_t room = 2 * list->room + 16;
        ks_key_rec_t *grown = realloc (list->recs, room * sizeof *grown);
        if (!grown)
            return -1;
        list->recs = grown;
        list->room = room;
    }
    if (s_key_columns (cols, &list->recs [list->count]) != 0)
        return -1;
    list->count++;
    return 0;
}

//  The rows a listing statement selects, as key_list returns them.
static int
s_rows_list (ks_store_t *store, ks_query_t q, const ks_val_t *params, size_t count,
             ks_key_rec_t **recs_p, size_t *count_p)
{
    s_recs_t list = { calloc (1, sizeof (ks_key_rec_t)), 0, 1 };
    if (list.recs && s_run (store, q, params, count, false, s_list_row, &list) >= 0) {
        *recs_p = list.recs;
        *count_p = list.count;
        return 0;
    }
    for (size_t i = 0; i < list.count; i++)
        ks_key_rec_free (&list.recs [i]);
    free (list.recs);
    return -1;
}

//  Writes the whole row (tenant, rec) of keys or objects: 0, or -1.
static int
s_row_put (ks_store_t *store, ks_query_t q, const char *tenant, const ks_key_rec_t *rec)
{
    ks_val_t p [] = { KS_V_TEXT (tenant), KS_V_TEXT (rec->ref), KS_V_BLOB (rec->info, rec->info_len),
                      KS_V_BLOB (rec->private, rec->private_len), KS_V_BLOB (rec->mac, rec->mac_len) };
    return s_write (store, q, p, N (p)) == 1 ? 0 : -1;
}

//  Deletes row (tenant, ref) of keys or objects: 1, 0 none, -1.
static int
s_row_delete (ks_store_t *store, ks_query_t q, const char *tenant, const char *ref)
{
    ks_val_t p [] = { KS_V_TEXT (tenant), KS_V_TEXT (ref) };
    return s_changed (store, q, p, N (p));
}

//  Every row of the tenant in keys or objects, in the order stored.
static int
s_tenant_rows (ks_store_t *store, ks_query_t q, const char *tenant, ks_key_rec_t **recs_p, size_t *count_p)
{
    ks_val_t p [] = { KS_V_TEXT (tenant) };
    return s_rows_list (store, q, p, N (p), recs_p, count_p);
}

int
ks_rows_key_read (ks_store_t *store, const char *tenant, const char *ref, bool lock, ks_key_rec_t *rec)
{
    return s_row_read (store, KS_Q_KEY_READ, tenant, ref, lock, rec);
}

int
ks_rows_key_insert (ks_store_t *store, const char *tenant, const ks_key_rec_t *rec)
{
    return s_row_put (store, KS_Q_KEY_INSERT, tenant, rec);
}

int
ks_rows_key_update (ks_store_t *store, const char *tenant, const char *ref, const uint8_t *info,
                    size_t info_len, const uint8_t mac [ROW_MAC_LEN])
{
    ks_val_t p [] = { KS_V_TEXT (tenant), KS_V_TEXT (ref), KS_V_BLOB (info, info_len),
                      KS_V_BLOB (mac, ROW_MAC_LEN) };
    return s_write (store, KS_Q_KEY_UPDATE, p, N (p));
}

int
ks_rows_key_delete (ks_store_t *store, const char *tenant, const char *ref)
{
    return s_row_delete (store, KS_Q_KEY_DELETE, tenant, ref);
}

int
ks_rows_key_list (ks_store_t *store, const char *tenant, ks_key_rec_t **recs_p, size_t *count_p)
{
    return s_tenant_rows (store, KS_Q_KEY_LIST, tenant, recs_p, count_p);
}

int
ks_rows_key_page (ks_store_t *store, const char *tenant, const char *after, size_t limit,
                  ks_key_rec_t **recs_p, size_t *count_p)
{
    ks_val_t p [] = { KS_V_TEXT (tenant), KS_V_TEXT (after), KS_V_INT (limit > INT64_MAX ? INT64_MAX : limit) };
    return s_rows_list (store, KS_Q_KEY_PAGE, p, N (p), recs_p, count_p);
}

int
ks_rows_object_read (ks_store_t *store, const char *tenant, const char *ref, ks_key_rec_t *rec)
{
    return s_row_read (store, KS_Q_OBJECT_READ, tenant, ref, false, rec);
}

int
ks_rows_object_put (ks_store_t *store, const char *tenant, const ks_key_rec_t *rec)
{
    return s_row_put (store, KS_Q_OBJECT_PUT, tenant, rec);
}

int
ks_rows_object_delete (ks_store_t *store, const char *tenant, const char *ref)
{
    return s_row_delete (store, KS_Q_OBJECT_DELETE, tenant, ref);
}

int
ks_rows_object_list (ks_store_t *store, const char *tenant, ks_key_rec_t **recs_p, size_t *count_p)
{
    return s_tenant_rows (store, KS_Q_OBJECT_LIST, tenant, recs_p, count_p);
}

/* ---- idempotency rows ------------------------------------------------------ */

static int
s_idem_row (void *arg, const ks_val_t *cols)
{
    ks_idem_rec_t *rec = arg;
    bool ok = true;
    rec->result = s_blob (&cols [0], &rec->result_len, &ok);
    rec->created = cols [1].i;
    rec->mac = s_blob (&cols [2], &rec->mac_len, &ok);
    return ok && rec->result ? 0 : -1;
}

int
ks_rows_idem_read (ks_store_t *store, const char *tenant, const uint8_t *id, size_t id_len,
                   ks_idem_rec_t *rec)
{
    ks_val_t p [] = { KS_V_TEXT (tenant), KS_V_BLOB (id, id_len) };
    memset (rec, 0, sizeof *rec);
    int rows = s_run (store, KS_Q_IDEM_READ, p, N (p), false, s_idem_row, rec);
    if (rows < 0)
        ks_idem_rec_free (rec);
    return rows < 0 ? -1 : rows > 0 ? 1 : 0;
}

int
ks_rows_idem_insert (ks_store_t *store, const char *tenant, const uint8_t *id, size_t id_len,
                     const ks_idem_rec_t *rec)
{
    ks_val_t p [] = { KS_V_TEXT (tenant), KS_V_BLOB (id, id_len), KS_V_BLOB (rec->result, rec->result_len),
                      KS_V_INT (rec->created), KS_V_BLOB (rec->mac, rec->mac_len) };
    return s_changed (store, KS_Q_IDEM_INSERT, p, N (p));
}

int
ks_rows_idem_expire (ks_store_t *store, int64_t before)
{
    ks_val_t p [] = { KS_V_INT (before) };
    return s_write (store, KS_Q_IDEM_EXPIRE, p, N (p));
}

/* ---- issued pool keys --------------------------------------------------------- */

int
ks_rows_issued_insert (ks_store_t *store, const uint8_t fingerprint [32], const char *tenant,
                       int64_t created, const uint8_t mac [ROW_MAC_LEN])
{
    ks_val_t p [] = { KS_V_BLOB (fingerprint, 32), KS_V_TEXT (tenant), KS_V_INT (created),
                      KS_V_BLOB (mac, ROW_MAC_LEN) };
    return s_changed (store, KS_Q_ISSUED_INSERT, p, N (p));
}

typedef struct {
    char *tenant;
    int64_t created;
    uint8_t *mac;
    size_t mac_len;
} s_issued_t;

static int
s_issued_row (void *arg, const ks_val_t *cols)
{
    s_issued_t *rec = arg;
    bool ok = true;
    rec->tenant = s_text (&cols [0]);
    rec->created = cols [1].i;
    rec->mac = s_blob (&cols [2], &rec->mac_len, &ok);
    return ok && rec->tenant ? 0 : -1;
}

int
ks_rows_issued_read (ks_store_t *store, const uint8_t fingerprint [32], char **tenant_p,
                     int64_t *created_p, uint8_t **mac_p, size_t *mac_len_p)
{
    s_issued_t rec = { NULL, 0, NULL, 0 };
    ks_val_t p [] = { KS_V_BLOB (fingerprint, 32) };
    int rows = s_run (store, KS_Q_ISSUED_READ, p, N (p), false, s_issued_row, &rec);
    if (rows == 1) {
        *tenant_p = rec.tenant;
        *created_p = rec.created;
        *mac_p = rec.mac;
        *mac_len_p = rec.mac_len;
        return 1;
    }
    free (rec.tenant);
    free (rec.mac);
    return rows < 0 ? -1 : 0;
}

//  Fixed-size entries of one or two columns of every row (the row digest's
//  MACs and signatures, ks_state.c): a short or missing entry reads as zeros.
typedef struct {
    uint8_t *a, *b;
    size_t a_len, b_len;        /* entry sizes; b_len 0: one column */
    size_t count, room;
} s_fixed_t;

static int
s_fixed_row (void *arg, const ks_val_t *cols)
{
    s_fixed_t *list = arg;
    if (list->count == list->room) {
        size_t room = 2 * list->room + 16;
        uint8_t *a = realloc (list->a, room * list->a_len);
        if (a)
            list->a = a;
        uint8_t *b = a && list->b_len ? realloc (list->b, room * list->b_len) : NULL;
        if (b)
            list->b = b;
        if (!a || (list->b_len && !b))
            return -1;
        list->room = room;
    }
    uint8_t *a = list->a + list->count * list->a_len;
    memset (a, 0, list->a_len);
    if (cols [0].len == list->a_len)
        memcpy (a, cols [0].data, list->a_len);
    if (list->b_len) {
        uint8_t *b = list->b + list->count * list->b_len;
        memset (b, 0, list->b_len);
        if (cols [1].len == list->b_len)
            memcpy (b, cols [1].data, list->b_len);
    }
    list->count++;
    return 0;
}

int
ks_rows_issued_macs (ks_store_t *store, uint8_t **macs_p, uint8_t **fps_p, size_t *count_p)
{
    s_fixed_t list = { .a_len = ROW_MAC_LEN, .b_len = 32 };
    if (s_run (store, KS_Q_ISSUED_MACS, NULL, 0, false, s_fixed_row, &list) < 0) {
        free (list.a);
        free (list.b);
        return -1;
    }
    *macs_p = list.count ? list.a : NULL;
    if (fps_p)
        *fps_p = list.count ? list.b : NULL;
    if (!fps_p || !list.count)
        free (list.b);
    if (!list.count)
        free (list.a);
    *count_p = list.count;
    return 0;
}

/* ---- audit chains ------------------------------------------------------------- */

typedef struct {
    int64_t seq;
    uint8_t *hash;
} s_head_t;

static int
s_head_row (void *arg, const ks_val_t *cols)
{
    s_head_t *head = arg;
    head->seq = cols [0].i;
    memset (head->hash, 0, KEYSTORE_AUDIT_HASH_LEN);
    if (cols [1].len == KEYSTORE_AUDIT_HASH_LEN)
        memcpy (head->hash, cols [1].data, KEYSTORE_AUDIT_HASH_LEN);
    return 0;
}

int
ks_rows_audit_head (ks_store_t *store, const char *broker, int64_t *seq_p,
                    uint8_t hash [KEYSTORE_AUDIT_HASH_LEN])
{
    const ks_dialect_t *dialect = *(const ks_dialect_t *const *) store;
    s_head_t head = { 0, hash };
    ks_val_t p [] = { KS_V_TEXT (broker) };
    if (dialect->chain_lock && dialect->chain_lock (store, broker) != 0)
        return -1;
    int rows = s_run (store, KS_Q_AUDIT_HEAD, p, N (p), false, s_head_row, &head);
    if (rows > 0)
        *seq_p = head.seq;
    return rows < 0 ? -1 : rows > 0 ? 1 : 0;
}

int
ks_rows_audit_insert (ks_store_t *store, const keystore_audit_row_t *row)
{
    ks_val_t p [] = { KS_V_TEXT (row->broker), KS_V_INT (row->seq), KS_V_TEXT (row->record),
                      KS_V_BLOB (row->prev, KEYSTORE_AUDIT_HASH_LEN),
                      KS_V_BLOB (row->hash, KEYSTORE_AUDIT_HASH_LEN),
                      KS_V_BLOB (row->sig, row->sig ? row->sig_len : 0) };
    return s_write (store, KS_Q_AUDIT_INSERT, p, N (p)) == 1 ? 0 : -1;
}

typedef struct {
    keystore_audit_row_t **rows_p;
    size_t *count_p, room;
} s_audit_t;

static int
s_audit_row (void *arg, const ks_val_t *cols)
{
    s_audit_t *list = arg;
    keystore_audit_row_t *row = ks_audit_row_add (list->rows_p, list->count_p, &list->room);
    bool ok = row && (row->broker = s_text (&cols [0])) && (row->record = s_text (&cols [2]));
    if (!ok)
        return -1;
    row->seq = cols [1].i;
    row->prev_len = s_fixed (&cols [3], row->prev, sizeof row->prev);
    row->hash_len = s_fixed (&cols [4], row->hash, sizeof row->hash);
    row->sig = s_blob (&cols [5], &row->sig_len, &ok);
    return ok ? 0 : -1;
}

int
ks_rows_audit_list (ks_store_t *store, keystore_audit_row_t **rows_p, size_t *count_p)
{
    s_audit_t list = { rows_p, count_p, 0 };
    return s_run (store, KS_Q_AUDIT_LIST, NULL, 0, false, s_audit_row, &list) < 0 ? -1 : 0;
}

int
ks_rows_audit_sigs (ks_store_t *store, uint8_t **sigs_p, size_t *count_p)
{
    s_fixed_t list = { .a_len = KEYSTORE_AUDIT_SIG_LEN };
    if (s_run (store, KS_Q_AUDIT_SIGS, NULL, 0, false, s_fixed_row, &list) < 0) {
        free (list.a);
        return -1;
    }
    *sigs_p = list.count ? list.a : NULL;
    if (!list.count)
        free (list.a);
    *count_p = list.count;
    return 0;
}
