/*  ks_dump_file.c — a dump as one sealed backup file (keystore_dump_seal,
 *  keystore_dump_unseal: keystore_dump.h; cryptoserver-keystore(5)
 *  "Copies and backups").
 *
 *  The plaintext: "cs-dump-v1", then the state record's schema and
 *  counter, then each table as a count and its rows, every field a
 *  big-endian 8-byte integer or a 4-byte length and its bytes (length
 *  0xffffffff: NULL).  Sealed whole with AES-256-GCM (RFC 5116) under
 *  HKDF-SHA256 (RFC 5869) of the master key, so a file changed by one bit,
 *  cut short or made under another master key does not open.
 */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif
#include <stdlib.h>
#include <string.h>
#include <czmq.h>
#include <openssl/crypto.h>
#include "ks_dump.h"

#define DUMP_MAGIC      "cs-dump-v1"
#define FILE_MAGIC      "cs-backup-v1\n"
#define BACKUP_INFO     "cryptoserver keystore backup v1"   /* HKDF info */
#define NULL_LEN        0xffffffffu

//  A growing buffer (write) or a cursor (read); `bad` once anything failed.
typedef struct {
    uint8_t *data;
    size_t len, room;
    bool bad;
} s_buf_t;

static void
s_put (s_buf_t *b, const void *data, size_t len)
{
    if (!b->bad && b->len + len > b->room) {
        size_t room = 2 * b->room + len + 4096;
        uint8_t *grown = realloc (b->data, room);
        b->bad = !grown;
        b->data = grown ? grown : b->data;
        b->room = grown ? room : b->room;
    }
    if (!b->bad && len) {
        memcpy (b->data + b->len, data, len);
        b->len += len;
    }
}

static void
s_put_u64 (s_buf_t *b, uint64_t value)
{
    uint8_t be [8];
    for (int i = 0; i < 8; i++)
        be [i] = (uint8_t) (value >> (56 - 8 * i));
    s_put (b, be, 8);
}

static void
s_put_bytes (s_buf_t *b, const void *data, size_t len)
{
    uint32_t n = data ? (uint32_t) len : NULL_LEN;
    uint8_t be [4] = { (uint8_t) (n >> 24), (uint8_t) (n >> 16), (uint8_t) (n >> 8), (uint8_t) n };
    b->bad |= data && len >= NULL_LEN;
    s_put (b, be, 4);
    s_put (b, data, data ? len : 0);
}

static void
s_put_str (s_buf_t *b, const char *text)
{
    s_put_bytes (b, text, text ? strlen (text) : 0);
}

static uint64_t
s_get_u64 (s_buf_t *b)
{
    uint64_t value = 0;
    b->bad |= b->len - b->room < 8;
    for (int i = 0; !b->bad && i < 8; i++)
        value = value << 8 | b->data [b->room++];
    return value;
}

//  A malloc'd copy (NUL-terminated) of the next field, *len_p its length;
//  NULL for a NULL field or a failure (b->bad).
static uint8_t *
s_get_bytes (s_buf_t *b, size_t *len_p)
{
    uint32_t n = 0;
    b->bad |= b->len - b->room < 4;
    for (int i = 0; !b->bad && i < 4; i++)
        n = n << 8 | b->data [b->room++];
    *len_p = 0;
    if (b->bad || n == NULL_LEN)
        return NULL;
    b->bad |= b->len - b->room < n;
    uint8_t *copy = b->bad ? NULL : ks_dup (b->data + b->room, n);
    b->bad |= !copy;
    b->room += b->bad ? 0 : n;
    *len_p = n;
    return copy;
}

static char *
s_get_str (s_buf_t *b)
{
    size_t len;
    return (char *) s_get_bytes (b, &len);
}

//  The next field into fixed (size bytes); b->bad when it is not that long.
static void
s_get_fixed (s_buf_t *b, uint8_t *fixed, size_t size, size_t *len_p)
{
    size_t len = 0;
    uint8_t *copy = s_get_bytes (b, &len);
    b->bad |= !copy || len > size || (!len_p && len != size);
    if (!b->bad)
        memcpy (fixed, copy, len);
    if (len_p)
        *len_p = len;
    free (copy);
}

static void
s_put_rows (s_buf_t *b, const ks_dump_row_t *rows, size_t n)
{
    s_put_u64 (b, n);
    for (size_t i = 0; i < n; i++) {
        s_put_str (b, rows [i].tenant);
        s_put_str (b, rows [i].rec.ref);
        s_put_bytes (b, rows [i].rec.info, rows [i].rec.info_len);
        s_put_bytes (b, rows [i].rec.private, rows [i].rec.private_len);
        s_put_bytes (b, rows [i].rec.mac, rows [i].rec.mac_len);
    }
}

static void
s_serialise (s_buf_t *b, const keystore_dump_t *self)
{
    s_put (b, DUMP_MAGIC, strlen (DUMP_MAGIC));
    s_put_u64 (b, self->schema);
    s_put_u64 (b, self->counter);
    s_put_bytes (b, self->check, self->check_len);
    s_put_u64 (b, self->n.tenants);
    for (size_t i = 0; i < self->n.tenants; i++) {
        const ks_tenant_rec_t *t = &self->tenants [i];
        s_put_str (b, self->names [i]);
        for (int r = 0; r < 2; r++) {
            s_put_str (b, t->row.pin [r]);
            s_put_u64 (b, (uint64_t) t->row.failures [r]);
            s_put_u64 (b, (uint64_t) t->row.epoch [r]);
        }
        s_put_bytes (b, t->mac, t->mac_len);
    }
    s_put_rows (b, self->keys, self->n.keys);
    s_put_rows (b, self->objects, self->n.objects);
    s_put_u64 (b, self->n.issued);
    for (size_t i = 0; i < self->n.issued; i++) {
        s_put_bytes (b, self->issued [i].fingerprint, 32);
        s_put_str (b, self->issued [i].tenant);
        s_put_u64 (b, (uint64_t) self->issued [i].created);
        s_put_bytes (b, self->issued [i].mac, ROW_MAC_LEN);
    }
    s_put_u64 (b, self->n.audit);
    for (size_t i = 0; i < self->n.audit; i++) {
        const keystore_audit_row_t *row = &self->audit [i];
        s_put_str (b, row->broker);
        s_put_u64 (b, (uint64_t) row->seq);
        s_put_str (b, row->record);
        s_put_bytes (b, row->prev, row->prev_len);
        s_put_bytes (b, row->hash, row->hash_len);
        s_put_bytes (b, row->sig, row->sig_len);
    }
    //  Last, so that a backup written before schema 7 (without it) parses.
    if (self->data_key) {
        s_put_bytes (b, self->data_key, self->data_key_len);
        s_put_bytes (b, self->identity, self->identity ? self->identity_len : 0);
    }
}

//  A count of rows that the rest of the buffer can hold (each >= 4 bytes).
static size_t
s_get_count (s_buf_t *b)
{
    uint64_t n = s_get_u64 (b);
    b->bad |= n > (b->len - b->room) / 4;
    return b->bad ? 0 : (size_t) n;
}

static void
s_get_rows (s_buf_t *b, ks_dump_row_t **rows_p, size_t *n_p)
{
    size_t n = s_get_count (b);
    for (size_t i = 0; i < n && !b->bad; i++) {
        ks_dump_row_t *row = ks_dump_grow (rows_p, *n_p, sizeof *row);
        if (!(b->bad |= !row))
            (*n_p)++;
        if (b->bad)
            break;
        row->tenant = s_get_str (b);
        row->rec.ref = s_get_str (b);
        row->rec.info = s_get_bytes (b, &row->rec.info_len);
        size_t len = 0;
        uint8_t *private = s_get_bytes (b, &len);
        row->rec.private = private;
        row->rec.private_len = len;
        row->rec.mac = s_get_bytes (b, &row->rec.mac_len);
        b->bad |= !row->tenant || !row->rec.ref || !row->rec.info || !row->rec.mac;
    }
}

static void
s_get_tenants (s_buf_t *b, keystore_dump_t *self)
{
    size_t n = s_get_count (b);
    for (size_t i = 0; i < n && !b->bad; i++) {
        ks_tenant_rec_t *t = ks_dump_grow (&self->tenants, self->n.tenants, sizeof *t);
        char **name = t ? ks_dump_grow (&self->names, self->n.tenants, sizeof *name) : NULL;
        if ((b->bad |= !name))
            break;
        self->n.tenants++;
        *name = s_get_str (b);
        for (int r = 0; r < 2; r++) {
            t->row.pin [r] = s_get_str (b);
            t->row.failures [r] = (int64_t) s_get_u64 (b);
            t->row.epoch [r] = (int64_t) s_get_u64 (b);
        }
        t->mac = s_get_bytes (b, &t->mac_len);
        b->bad |= !*name || !t->row.pin [0] || !t->row.pin [1] || !t->mac;
    }
}

static void
s_get_appends (s_buf_t *b, keystore_dump_t *self)
{
    size_t n = s_get_count (b);
    for (size_t i = 0; i < n && !b->bad; i++) {
        ks_dump_issued_t *row = ks_dump_grow (&self->issued, self->n.issued, sizeof *row);
        if ((b->bad |= !row))
            break;
        self->n.issued++;
        s_get_fixed (b, row->fingerprint, 32, NULL);
        row->tenant = s_get_str (b);
        row->created = (int64_t) s_get_u64 (b);
        s_get_fixed (b, row->mac, ROW_MAC_LEN, NULL);
        b->bad |= !row->tenant;
    }
    n = s_get_count (b);
    size_t room = 0;
    for (size_t i = 0; i < n && !b->bad; i++) {
        keystore_audit_row_t *row = ks_audit_row_add (&self->audit, &self->n.audit, &room);
        if ((b->bad |= !row))
            break;
        row->broker = s_get_str (b);
        row->seq = (int64_t) s_get_u64 (b);
        row->record = s_get_str (b);
        s_get_fixed (b, row->prev, KEYSTORE_AUDIT_HASH_LEN, &row->prev_len);
        s_get_fixed (b, row->hash, KEYSTORE_AUDIT_HASH_LEN, &row->hash_len);
        row->sig = s_get_bytes (b, &row->sig_len);
        b->bad |= !row->broker || !row->record;
    }
}

static keystore_dump_t *
s_parse (uint8_t *plain, size_t len)
{
    s_buf_t b = { .data = plain, .len = len, .room = strlen (DUMP_MAGIC) };
    keystore_dump_t *self = calloc (1, sizeof *self);
    b.bad = !self || len < b.room || memcmp (plain, DUMP_MAGIC, b.room) != 0;
    if (self) {
        self->schema = s_get_u64 (&b);
        self->counter = s_get_u64 (&b);
        self->check = s_get_bytes (&b, &self->check_len);
        b.bad |= !self->check;
        s_get_tenants (&b, self);
        s_get_rows (&b, &self->keys, &self->n.keys);
        s_get_rows (&b, &self->objects, &self->n.objects);
        s_get_appends (&b, self);
        if (!b.bad && b.room < b.len) {
            b.bad |= !(self->data_key = s_get_bytes (&b, &self->data_key_len));
            self->identity = s_get_bytes (&b, &self->identity_len);     //  NULL: none
        }
    }
    if (b.bad || b.room != b.len)
        keystore_dump_destroy (&self);
    return self;
}

uint8_t *
keystore_dump_seal (keystore_t *ks, const keystore_dump_t *self, size_t *len_p)
{
    s_buf_t b = { 0 };
    uint8_t key [32], *blob = NULL, *image = NULL;
    size_t blob_len = 0, magic = strlen (FILE_MAGIC);
    if (!ks || !self)
        return NULL;
    s_serialise (&b, self);
    if (!b.bad && row_mac_derive (ks->keys->master, BACKUP_INFO, key) == 0)
        blob = ks_seal (key, FILE_MAGIC, magic, b.data, b.len, &blob_len);
    OPENSSL_cleanse (key, sizeof key);
    if (b.data)
        OPENSSL_cleanse (b.data, b.len);
    free (b.data);
    if (blob && (image = malloc (magic + blob_len))) {
        memcpy (image, FILE_MAGIC, magic);
        memcpy (image + magic, blob, blob_len);
        *len_p = magic + blob_len;
    }
    free (blob);
    return image;
}

keystore_dump_t *
keystore_dump_unseal (keystore_t *ks, const uint8_t *image, size_t len)
{
    uint8_t key [32], *plain = NULL;
    size_t magic = strlen (FILE_MAGIC), plain_len = 0;
    keystore_dump_t *self = NULL;
    if (!ks || !image)
        return NULL;
    if (len > magic && memcmp (image, FILE_MAGIC, magic) == 0
    &&  row_mac_derive (ks->keys->master, BACKUP_INFO, key) == 0)
        plain = ks_open (key, FILE_MAGIC, magic, image + magic, len - magic, &plain_len);
    OPENSSL_cleanse (key, sizeof key);
    if (plain) {
        self = s_parse (plain, plain_len);
        OPENSSL_cleanse (plain, plain_len);
        free (plain);
    }
    if (!self)
        zsys_error ("keystore %s: the backup does not verify (changed, cut short, not a backup, or "
                    "made under another master key): refused", ks_where (ks));
    else
    if (keystore_dump_verify (ks, self) != 0)
        keystore_dump_destroy (&self);
    return self;
}
