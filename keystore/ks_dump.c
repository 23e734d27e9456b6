/*  ks_dump.c — every row of a keystore read in one snapshot and checked
 *  (keystore_dump.h; cryptoserver-keystore(5) "Copies and backups").
 */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif
#include <stdlib.h>
#include <string.h>
#include <czmq.h>
#include "ks_dump.h"

void *
ks_dump_grow (void *array_p, size_t n, size_t size)
{
    void **array = (void **) array_p;
    uint8_t *grown = realloc (*array, (n + 1) * size);
    if (!grown)
        return NULL;
    *array = grown;
    memset (grown + n * size, 0, size);
    return grown + n * size;
}

void
keystore_dump_destroy (keystore_dump_t **self_p)
{
    keystore_dump_t *self = self_p ? *self_p : NULL;
    if (!self)
        return;
    for (size_t i = 0; i < self->n.tenants; i++) {
        free (self->names [i]);
        ks_tenant_rec_free (&self->tenants [i]);
    }
    for (size_t i = 0; i < self->n.keys; i++) {
        free (self->keys [i].tenant);
        ks_key_rec_free (&self->keys [i].rec);
    }
    for (size_t i = 0; i < self->n.objects; i++) {
        free (self->objects [i].tenant);
        ks_key_rec_free (&self->objects [i].rec);
    }
    for (size_t i = 0; i < self->n.issued; i++)
        free (self->issued [i].tenant);
    keystore_audit_rows_free (self->audit, self->n.audit);
    free (self->check);
    free (self->data_key);
    free (self->identity);
    free (self->names);
    free (self->tenants);
    free (self->keys);
    free (self->objects);
    free (self->issued);
    free (self);
    *self_p = NULL;
}

uint64_t
keystore_dump_counter (const keystore_dump_t *self)
{
    return self ? self->counter : 0;
}

keystore_dump_counts_t
keystore_dump_counts (const keystore_dump_t *self)
{
    keystore_dump_counts_t none = { 0 };
    return self ? self->n : none;
}

//  Moves recs (count, from a back end's list) into *rows_p as tenant's.
static int
s_rows_take (ks_dump_row_t **rows_p, size_t *n_p, const char *tenant, ks_key_rec_t *recs, size_t count)
{
    int rc = 0;
    for (size_t i = 0; i < count; i++) {
        ks_dump_row_t *row = rc == 0 ? ks_dump_grow (rows_p, *n_p, sizeof **rows_p) : NULL;
        if (row && (row->tenant = strdup (tenant))) {
            row->rec = recs [i];
            (*n_p)++;
            continue;
        }
        rc = -1;
        ks_key_rec_free (&recs [i]);
    }
    free (recs);
    return rc;
}

//  Reads tenant `name`'s row, keys and objects into self.
static int
s_read_tenant (keystore_t *ks, keystore_dump_t *self, char *name)
{
    ks_tenant_rec_t *rec = ks_dump_grow (&self->tenants, self->n.tenants, sizeof *rec);
    char **slot = rec ? ks_dump_grow (&self->names, self->n.tenants, sizeof *slot) : NULL;
    if (!slot || ks->be->tenant_read (ks->store, name, false, rec) != 1) {
        free (name);
        return -1;
    }
    *slot = name;
    self->n.tenants++;
    ks_key_rec_t *recs = NULL;
    size_t count = 0;
    if (ks->be->key_list (ks->store, name, &recs, &count) != 0
    ||  s_rows_take (&self->keys, &self->n.keys, name, recs, count) != 0)
        return -1;
    recs = NULL, count = 0;
    if (ks->be->object_list (ks->store, name, &recs, &count) != 0
    ||  s_rows_take (&self->objects, &self->n.objects, name, recs, count) != 0)
        return -1;
    return 0;
}

//  Reads the issued rows into self.
static int
s_read_issued (keystore_t *ks, keystore_dump_t *self)
{
    uint8_t *macs = NULL, *fps = NULL;
    size_t count = 0;
    int rc = ks->be->issued_macs (ks->store, &macs, &fps, &count);
    for (size_t i = 0; rc == 0 && i < count; i++) {
        ks_dump_issued_t *row = ks_dump_grow (&self->issued, self->n.issued, sizeof *row);
        uint8_t *mac = NULL;
        size_t mac_len = 0;
        if (!row || ks->be->issued_read (ks->store, fps + 32 * i, &row->tenant, &row->created, &mac,
                                         &mac_len) != 1) {
            rc = -1;
            break;
        }
        memcpy (row->fingerprint, fps + 32 * i, 32);
        if (mac && mac_len == ROW_MAC_LEN)
            memcpy (row->mac, mac, ROW_MAC_LEN);
        free (mac);
        self->n.issued++;
    }
    free (macs);
    free (fps);
    return rc;
}

//  Reads everything inside the snapshot transaction.
static int
s_read (keystore_t *ks, keystore_dump_t *self)
{
    uint8_t digest [32];
    if (ks_state_get (ks, &self->schema, &self->counter, digest) != 1
    ||  ks->be->meta_get (ks->store, "master_check", &self->check, &self->check_len) != 1
    ||  ks->be->meta_get (ks->store, "data_key", &self->data_key, &self->data_key_len) < 0
    ||  ks->be->meta_get (ks->store, "identity", &self->identity, &self->identity_len) < 0)
        return -1;
    char **names = ks->be->tenant_list (ks->store);
    int rc = names ? 0 : -1;
    for (size_t i = 0; names && names [i]; i++)
        if (rc == 0)
            rc = s_read_tenant (ks, self, names [i]);
        else
            free (names [i]);
    free (names);
    if (rc == 0)
        rc = s_read_issued (ks, self);
    if (rc == 0)
        rc = ks->be->audit_list (ks->store, &self->audit, &self->n.audit);
    return rc;
}

keystore_dump_t *
keystore_dump_new (keystore_t *ks)
{
    keystore_dump_t *self = ks ? calloc (1, sizeof *self) : NULL;
    if (!self || ks->be->snapshot (ks->store) != 0) {
        free (self);
        return NULL;
    }
    int rc = s_read (ks, self);
    ks->be->end (ks->store, false);
    if (rc != 0)
        zsys_error ("keystore %s: its rows could not be read in one snapshot", ks_where (ks));
    if (rc != 0 || keystore_dump_verify (ks, self) != 0)
        keystore_dump_destroy (&self);
    return self;
}

//  True when a key or object row's MAC verifies (objects: row_mac_object).
static bool
s_row_ok (keystore_t *ks, const ks_dump_row_t *row, bool object)
{
    uint8_t mac [ROW_MAC_LEN];
    const ks_key_rec_t *rec = &row->rec;
    int rc = object ? row_mac_object (ks->keys->mac_key, row->tenant, rec->ref, rec->info, rec->info_len,
                                      rec->private, rec->private_len, mac)
                    : row_mac_key (ks->keys->mac_key, row->tenant, rec->ref, rec->info, rec->info_len,
                                   rec->private, rec->private_len, mac);
    return rc == 0 && row_mac_equal (mac, rec->mac, rec->mac_len);
}

int
keystore_dump_verify (keystore_t *ks, const keystore_dump_t *self)
{
    uint8_t mac [ROW_MAC_LEN];
    for (size_t i = 0; i < self->n.tenants; i++)
        if (row_mac_tenant (ks->keys->mac_key, self->names [i], &self->tenants [i].row, mac) != 0
        ||  !row_mac_equal (mac, self->tenants [i].mac, self->tenants [i].mac_len)) {
            zsys_error ("keystore %s: tenant %s: its row MAC does not verify", ks_where (ks), self->names [i]);
            return -1;
        }
    for (size_t i = 0; i < self->n.keys; i++)
        if (!s_row_ok (ks, &self->keys [i], false)) {
            zsys_error ("keystore %s: key %s of tenant %s: its row MAC does not verify", ks_where (ks),
                        self->keys [i].rec.ref, self->keys [i].tenant);
            return -1;
        }
    for (size_t i = 0; i < self->n.objects; i++)
        if (!s_row_ok (ks, &self->objects [i], true)) {
            zsys_error ("keystore %s: object %s of tenant %s: its row MAC does not verify", ks_where (ks),
                        self->objects [i].rec.ref, self->objects [i].tenant);
            return -1;
        }
    for (size_t i = 0; i < self->n.issued; i++) {
        const ks_dump_issued_t *row = &self->issued [i];
        if (row_mac_issued (ks->keys->mac_key, row->fingerprint, row->tenant, row->created, mac) != 0
        ||  !row_mac_equal (mac, row->mac, ROW_MAC_LEN)) {
            zsys_error ("keystore %s: an issued pool key row of tenant %s: its MAC does not verify",
                        ks_where (ks), row->tenant);
            return -1;
        }
    }
    return 0;
}

//  1 when row (tenant, ref, MAC) is among rows (n), else 0.
static int
s_has_row (const ks_dump_row_t *rows, size_t n, const ks_dump_row_t *row)
{
    for (size_t i = 0; i < n; i++)
        if (streq (rows [i].tenant, row->tenant) && streq (rows [i].rec.ref, row->rec.ref))
            return row_mac_equal (row->rec.mac, rows [i].rec.mac, rows [i].rec.mac_len);
    return 0;
}

//  The first row of `want` (n) missing from `have` (m): its index, or n.
static size_t
s_first_missing (const ks_dump_row_t *want, size_t n, const ks_dump_row_t *have, size_t m)
{
    size_t i = 0;
    while (i < n && s_has_row (have, m, &want [i]))
        i++;
    return i;
}

int
keystore_dump_check (keystore_t *ks, const keystore_dump_t *want, bool exact)
{
    keystore_dump_t *have = keystore_dump_new (ks);
    const char *what = NULL, *tenant = "", *ref = "";
    if (!have)
        return -1;
    size_t i = s_first_missing (want->keys, want->n.keys, have->keys, have->n.keys);
    if (i < want->n.keys)
        what = "key", tenant = want->keys [i].tenant, ref = want->keys [i].rec.ref;
    i = s_first_missing (want->objects, want->n.objects, have->objects, have->n.objects);
    if (!what && i < want->n.objects)
        what = "object", tenant = want->objects [i].tenant, ref = want->objects [i].rec.ref;
    if (!what && (have->n.tenants < want->n.tenants || have->n.issued < want->n.issued
               || have->n.audit < want->n.audit))
        what = "count of tenants, issued or audit rows";
    if (!what && exact && (have->n.tenants != want->n.tenants || have->n.keys != want->n.keys
                        || have->n.objects != want->n.objects))
        what = "count of tenants, keys or objects";
    if (what)
        zsys_error ("keystore %s: after the copy, its %s %s%s%s differs from the source", ks_where (ks),
                    what, tenant, *tenant ? "/" : "", ref);
    keystore_dump_destroy (&have);
    return what ? -1 : 0;
}
