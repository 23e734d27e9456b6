/*  ks_rows.c — the row functions of ks_backend.h written once (ks_sql.h)
 *  for the rows that hold state: meta, tenants, keys and objects (the
 *  tables that record what happened are ks_rows_history.c's).  Each builds
 *  the parameters of its statement (ks_tables.c), has the store's dialect
 *  run it, and turns the result columns into the records keystore.c gets.
 *  What differs between SQLite and PostgreSQL is in the statements' texts
 *  and in the dialects, never here.
 */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif
#include <stdlib.h>
#include <string.h>
#include "ks_sql.h"

#define N(a) (sizeof (a) / sizeof (a) [0])

//  Every ks_store_t begins with its dialect (ks_sql.h).
int
ks_rows_run (ks_store_t *store, ks_query_t q, const ks_val_t *params, size_t count, bool lock,
             ks_row_fn *row, void *arg)
{
    const ks_dialect_t *dialect = *(const ks_dialect_t *const *) store;
    return dialect->run (store, &ks_stmts [q], params, count, lock, row, arg);
}

//  A statement without result rows: the rows changed, or -1.
int
ks_rows_write (ks_store_t *store, ks_query_t q, const ks_val_t *params, size_t count)
{
    return ks_rows_run (store, q, params, count, false, NULL, NULL);
}

//  1 when the statement changed a row, 0 when none, -1.
int
ks_rows_changed (ks_store_t *store, ks_query_t q, const ks_val_t *params, size_t count)
{
    int changed = ks_rows_write (store, q, params, count);
    return changed < 0 ? -1 : changed > 0 ? 1 : 0;
}

//  A result column as a malloc'd copy with a spare NUL (ks_dup), NULL for
//  SQL NULL; *ok turns false when out of memory.
uint8_t *
ks_rows_blob (const ks_val_t *v, size_t *len_p, bool *ok)
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
char *
ks_rows_text (const ks_val_t *v)
{
    return strndup (v->type == KS_NULL ? "" : (const char *) v->data, v->len);
}

//  A blob column into a fixed buffer of `room` bytes (zeros where it is
//  shorter); returns its stored length.
size_t
ks_rows_fixed (const ks_val_t *v, uint8_t *out, size_t room)
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
    int rows = ks_rows_run (store, KS_Q_META_GET, p, N (p), false, s_meta_row, &meta);
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
    return ks_rows_write (store, KS_Q_META_PUT, p, N (p)) == 1 ? 0 : -1;
}

/* ---- tenant rows ---------------------------------------------------------- */

static int
s_tenant_row (void *arg, const ks_val_t *cols)
{
    ks_tenant_rec_t *rec = arg;
    bool ok = true;
    for (int i = 0; i < 2; i++) {
        rec->row.pin [i] = ks_rows_text (&cols [i]);
        ok = ok && rec->row.pin [i];
        rec->row.failures [i] = cols [2 + i].i;
        rec->row.epoch [i] = cols [4 + i].i;
    }
    rec->mac = ks_rows_blob (&cols [6], &rec->mac_len, &ok);
    rec->keys_version = (uint64_t) cols [7].i;
    return ok ? 0 : -1;
}

int
ks_rows_tenant_read (ks_store_t *store, const char *name, bool lock, ks_tenant_rec_t *rec)
{
    ks_val_t p [] = { KS_V_TEXT (name) };
    memset (rec, 0, sizeof *rec);
    int rows = ks_rows_run (store, KS_Q_TENANT_READ, p, N (p), lock, s_tenant_row, rec);
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
    return ks_rows_write (store, KS_Q_TENANT_INSERT, p, N (p)) == 1 ? 0 : -1;
}

int
ks_rows_tenant_update (ks_store_t *store, const char *name, const row_mac_tenant_t *row,
                       const uint8_t mac [ROW_MAC_LEN])
{
    ks_val_t p [] = { KS_V_TEXT (name), KS_V_TEXT (row->pin [0]), KS_V_TEXT (row->pin [1]),
                      KS_V_INT (row->failures [0]), KS_V_INT (row->failures [1]),
                      KS_V_INT (row->epoch [0]), KS_V_INT (row->epoch [1]), KS_V_BLOB (mac, ROW_MAC_LEN) };
    return ks_rows_write (store, KS_Q_TENANT_UPDATE, p, N (p));
}

int
ks_rows_tenant_delete (ks_store_t *store, const char *name)
{
    ks_val_t p [] = { KS_V_TEXT (name) };
    return ks_rows_changed (store, KS_Q_TENANT_DELETE, p, N (p));
}

int
ks_rows_tenant_exists (ks_store_t *store, const char *name)
{
    ks_val_t p [] = { KS_V_TEXT (name) };
    int rows = ks_rows_run (store, KS_Q_TENANT_EXISTS, p, N (p), false, NULL, NULL);
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
    list->names [list->count] = ks_rows_text (&cols [0]);
    list->names [list->count + 1] = NULL;
    return list->names [list->count++] ? 0 : -1;
}

char **
ks_rows_tenant_list (ks_store_t *store)
{
    s_names_t list = { calloc (1, sizeof (char *)), 0, 0 };
    if (list.names && ks_rows_run (store, KS_Q_TENANT_LIST, NULL, 0, false, s_name_row, &list) >= 0)
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
    int rows = ks_rows_run (store, KS_Q_KEYS_VERSION_GET, p, N (p), false, s_int_row, &version);
    if (rows > 0)
        *version_p = (uint64_t) version;
    return rows < 0 ? -1 : rows > 0 ? 1 : 0;
}

int
ks_rows_keys_version_set (ks_store_t *store, const char *tenant, uint64_t version)
{
    ks_val_t p [] = { KS_V_TEXT (tenant), KS_V_INT (version) };
    return ks_rows_write (store, KS_Q_KEYS_VERSION_SET, p, N (p));
}

/* ---- key and object rows (the same columns) ------------------------------ */

//  Columns ref, info, private, mac into *rec: 0, or -1 when out of memory.
static int
s_key_columns (const ks_val_t *cols, ks_key_rec_t *rec)
{
    bool ok = true;
    memset (rec, 0, sizeof *rec);
    rec->ref = ks_rows_text (&cols [0]);
    rec->info = ks_rows_blob (&cols [1], &rec->info_len, &ok);
    if (!rec->info && ok)               //  NOT NULL: SQL NULL reads as empty
        rec->info = ks_dup ("", 0);
    rec->private = ks_rows_blob (&cols [2], &rec->private_len, &ok);
    rec->mac = ks_rows_blob (&cols [3], &rec->mac_len, &ok);
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
    int rows = ks_rows_run (store, q, p, N (p), lock, s_key_row, rec);
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
    if (list.recs && ks_rows_run (store, q, params, count, false, s_list_row, &list) >= 0) {
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
    return ks_rows_write (store, q, p, N (p)) == 1 ? 0 : -1;
}

//  Deletes row (tenant, ref) of keys or objects: 1, 0 none, -1.
static int
s_row_delete (ks_store_t *store, ks_query_t q, const char *tenant, const char *ref)
{
    ks_val_t p [] = { KS_V_TEXT (tenant), KS_V_TEXT (ref) };
    return ks_rows_changed (store, q, p, N (p));
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

//  Sets one blob column of key row (tenant, ref) and its MAC (statement
//  q: KS_Q_KEY_UPDATE info, KS_Q_KEY_RESEAL private): 1, 0 none, -1.
static int
s_key_set (ks_store_t *store, ks_query_t q, const char *tenant, const char *ref, const uint8_t *blob,
           size_t len, const uint8_t mac [ROW_MAC_LEN])
{
    ks_val_t p [] = { KS_V_TEXT (tenant), KS_V_TEXT (ref), KS_V_BLOB (blob, len), KS_V_BLOB (mac, ROW_MAC_LEN) };
    return ks_rows_write (store, q, p, N (p));
}

int
ks_rows_key_update (ks_store_t *store, const char *tenant, const char *ref, const uint8_t *info,
                    size_t info_len, const uint8_t mac [ROW_MAC_LEN])
{
    return s_key_set (store, KS_Q_KEY_UPDATE, tenant, ref, info, info_len, mac);
}

int
ks_rows_key_reseal (ks_store_t *store, const char *tenant, const char *ref, const uint8_t *private,
                    size_t private_len, const uint8_t mac [ROW_MAC_LEN])
{
    return s_key_set (store, KS_Q_KEY_RESEAL, tenant, ref, private, private_len, mac);
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
