/*  ks_rows_history.c — the row functions (ks_sql.h) of the tables that
 *  record what happened, rows added and never changed: idempotency (the
 *  results of key-management jobs), issued (pool keys handed out), audit
 *  (the hash chains).  Written once for both back ends, like ks_rows.c.
 */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif
#include <stdlib.h>
#include <string.h>
#include "ks_sql.h"

#define N(a) (sizeof (a) / sizeof (a) [0])

/* ---- idempotency rows ------------------------------------------------------ */

static int
s_idem_row (void *arg, const ks_val_t *cols)
{
    ks_idem_rec_t *rec = arg;
    bool ok = true;
    rec->result = ks_rows_blob (&cols [0], &rec->result_len, &ok);
    rec->created = cols [1].i;
    rec->mac = ks_rows_blob (&cols [2], &rec->mac_len, &ok);
    return ok && rec->result ? 0 : -1;
}

int
ks_rows_idem_read (ks_store_t *store, const char *tenant, const uint8_t *id, size_t id_len,
                   ks_idem_rec_t *rec)
{
    ks_val_t p [] = { KS_V_TEXT (tenant), KS_V_BLOB (id, id_len) };
    memset (rec, 0, sizeof *rec);
    int rows = ks_rows_run (store, KS_Q_IDEM_READ, p, N (p), false, s_idem_row, rec);
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
    return ks_rows_changed (store, KS_Q_IDEM_INSERT, p, N (p));
}

int
ks_rows_idem_expire (ks_store_t *store, int64_t before)
{
    ks_val_t p [] = { KS_V_INT (before) };
    return ks_rows_write (store, KS_Q_IDEM_EXPIRE, p, N (p));
}

/* ---- issued pool keys --------------------------------------------------------- */

int
ks_rows_issued_insert (ks_store_t *store, const uint8_t fingerprint [32], const char *tenant,
                       int64_t created, const uint8_t mac [ROW_MAC_LEN])
{
    ks_val_t p [] = { KS_V_BLOB (fingerprint, 32), KS_V_TEXT (tenant), KS_V_INT (created),
                      KS_V_BLOB (mac, ROW_MAC_LEN) };
    return ks_rows_changed (store, KS_Q_ISSUED_INSERT, p, N (p));
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
    rec->tenant = ks_rows_text (&cols [0]);
    rec->created = cols [1].i;
    rec->mac = ks_rows_blob (&cols [2], &rec->mac_len, &ok);
    return ok && rec->tenant ? 0 : -1;
}

int
ks_rows_issued_read (ks_store_t *store, const uint8_t fingerprint [32], char **tenant_p,
                     int64_t *created_p, uint8_t **mac_p, size_t *mac_len_p)
{
    s_issued_t rec = { NULL, 0, NULL, 0 };
    ks_val_t p [] = { KS_V_BLOB (fingerprint, 32) };
    int rows = ks_rows_run (store, KS_Q_ISSUED_READ, p, N (p), false, s_issued_row, &rec);
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
    if (ks_rows_run (store, KS_Q_ISSUED_MACS, NULL, 0, false, s_fixed_row, &list) < 0) {
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
    int rows = ks_rows_run (store, KS_Q_AUDIT_HEAD, p, N (p), false, s_head_row, &head);
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
    return ks_rows_write (store, KS_Q_AUDIT_INSERT, p, N (p)) == 1 ? 0 : -1;
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
    bool ok = row && (row->broker = ks_rows_text (&cols [0])) && (row->record = ks_rows_text (&cols [2]));
    if (!ok)
        return -1;
    row->seq = cols [1].i;
    row->prev_len = ks_rows_fixed (&cols [3], row->prev, sizeof row->prev);
    row->hash_len = ks_rows_fixed (&cols [4], row->hash, sizeof row->hash);
    row->sig = ks_rows_blob (&cols [5], &row->sig_len, &ok);
    return ok ? 0 : -1;
}

int
ks_rows_audit_list (ks_store_t *store, keystore_audit_row_t **rows_p, size_t *count_p)
{
    s_audit_t list = { rows_p, count_p, 0 };
    return ks_rows_run (store, KS_Q_AUDIT_LIST, NULL, 0, false, s_audit_row, &list) < 0 ? -1 : 0;
}

int
ks_rows_audit_sigs (ks_store_t *store, uint8_t **sigs_p, size_t *count_p)
{
    s_fixed_t list = { .a_len = KEYSTORE_AUDIT_SIG_LEN };
    if (ks_rows_run (store, KS_Q_AUDIT_SIGS, NULL, 0, false, s_fixed_row, &list) < 0) {
        free (list.a);
        return -1;
    }
    *sigs_p = list.count ? list.a : NULL;
    if (!list.count)
        free (list.a);
    *count_p = list.count;
    return 0;
}
