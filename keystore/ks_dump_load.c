/*  ks_dump_load.c — a dump written into a keystore in one write
 *  transaction (keystore_dump_load, keystore_dump.h;
 *  cryptoserver-keystore(5) "Copies and backups").
 */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <czmq.h>
#include <openssl/evp.h>
#include "ks_dump.h"

//  The load's work: the target, the dump, what changed.
typedef struct {
    keystore_t *ks;
    const keystore_dump_t *dump;
    bool *touched;                      /* per dump tenant: its rows changed */
    keystore_dump_counts_t changed;
    uint64_t schema, counter;           /* the target's state record before the load */
} s_load_t;

//  The index of tenant `name` in the dump, or n.tenants.
static size_t
s_tenant_index (const keystore_dump_t *dump, const char *name)
{
    size_t i = 0;
    while (i < dump->n.tenants && !streq (dump->names [i], name))
        i++;
    return i;
}

static void
s_touch (s_load_t *self, const char *tenant)
{
    size_t i = s_tenant_index (self->dump, tenant);
    if (i < self->dump->n.tenants)
        self->touched [i] = true;
    ks_changes_touch (self->ks, tenant);
}

//  Tenant rows: a missing one inserted, a different one updated.
static int
s_load_tenants (s_load_t *self)
{
    keystore_t *ks = self->ks;
    for (size_t i = 0; i < self->dump->n.tenants; i++) {
        const char *name = self->dump->names [i];
        ks_tenant_rec_t cur, rec = self->dump->tenants [i];
        int got = ks->be->tenant_read (ks->store, name, true, &cur), rc = got < 0 ? -1 : 0;
        if (got == 0) {
            rec.keys_version = ks_version_next (ks);
            rc = rec.keys_version && ks->be->tenant_insert (ks->store, name, &rec) == 0 ? 0 : -1;
        }
        else
        if (got == 1 && !row_mac_equal (rec.mac, cur.mac, cur.mac_len))
            rc = ks->be->tenant_update (ks->store, name, &rec.row, rec.mac) == 1 ? 0 : -1;
        if (got == 0 || (got == 1 && !row_mac_equal (rec.mac, cur.mac, cur.mac_len))) {
            s_touch (self, name);
            self->changed.tenants++;
        }
        if (got == 1)
            ks_tenant_rec_free (&cur);
        if (rc != 0)
            return -1;
    }
    return 0;
}

//  Key (object: object) rows: a missing one inserted, a different one replaced.
static int
s_load_rows (s_load_t *self, bool object)
{
    keystore_t *ks = self->ks;
    const ks_dump_row_t *rows = object ? self->dump->objects : self->dump->keys;
    size_t n = object ? self->dump->n.objects : self->dump->n.keys;
    for (size_t i = 0; i < n; i++) {
        ks_key_rec_t cur;
        const char *tenant = rows [i].tenant, *ref = rows [i].rec.ref;
        int got = object ? ks->be->object_read (ks->store, tenant, ref, &cur)
                         : ks->be->key_read (ks->store, tenant, ref, true, &cur);
        if (got < 0)
            return -1;
        bool same = got == 1 && row_mac_equal (rows [i].rec.mac, cur.mac, cur.mac_len);
        if (got == 1)
            ks_key_rec_free (&cur);
        if (same)
            continue;
        int rc = object ? ks->be->object_put (ks->store, tenant, &rows [i].rec)
                        : (got == 1 && ks->be->key_delete (ks->store, tenant, ref) != 1) ? -1
                        : ks->be->key_insert (ks->store, tenant, &rows [i].rec);
        if (rc != 0)
            return -1;
        s_touch (self, tenant);
        if (object)
            self->changed.objects++;
        else
            self->changed.keys++;
    }
    return 0;
}

//  With mirror: tenant's keys (objects) the dump has not go.
static int
s_mirror_rows (s_load_t *self, const char *tenant, bool object)
{
    keystore_t *ks = self->ks;
    ks_key_rec_t *recs = NULL;
    size_t count = 0;
    int rc = object ? ks->be->object_list (ks->store, tenant, &recs, &count)
                    : ks->be->key_list (ks->store, tenant, &recs, &count);
    const ks_dump_row_t *rows = object ? self->dump->objects : self->dump->keys;
    size_t n = object ? self->dump->n.objects : self->dump->n.keys;
    for (size_t i = 0; i < count; i++) {
        size_t j = 0;
        while (j < n && !(streq (rows [j].tenant, tenant) && streq (rows [j].rec.ref, recs [i].ref)))
            j++;
        if (rc == 0 && j == n) {
            int gone = object ? ks->be->object_delete (ks->store, tenant, recs [i].ref)
                              : ks->be->key_delete (ks->store, tenant, recs [i].ref);
            rc = gone == 1 ? 0 : -1;
            s_touch (self, tenant);
            if (object)
                self->changed.objects++;
            else
                self->changed.keys++;
        }
        ks_key_rec_free (&recs [i]);
    }
    free (recs);
    return rc;
}

//  With mirror: the tenants, keys and objects the dump has not go.
static int
s_mirror (s_load_t *self)
{
    keystore_t *ks = self->ks;
    char **names = ks->be->tenant_list (ks->store);
    int rc = names ? 0 : -1;
    for (size_t i = 0; names && names [i]; i++) {
        if (rc == 0 && s_tenant_index (self->dump, names [i]) == self->dump->n.tenants) {
            rc = ks->be->tenant_delete (ks->store, names [i]) == 1 ? 0 : -1;
            ks_changes_touch (ks, names [i]);
            self->changed.tenants++;
        }
        else
        if (rc == 0)
            rc = s_mirror_rows (self, names [i], false) == 0 && s_mirror_rows (self, names [i], true) == 0 ? 0 : -1;
        free (names [i]);
    }
    free (names);
    return rc;
}

//  Issued fingerprints and audit rows: only ever added.
static int
s_load_appends (s_load_t *self)
{
    keystore_t *ks = self->ks;
    for (size_t i = 0; i < self->dump->n.issued; i++) {
        const ks_dump_issued_t *row = &self->dump->issued [i];
        int got = ks->be->issued_insert (ks->store, row->fingerprint, row->tenant, row->created, row->mac);
        if (got < 0)
            return -1;
        self->changed.issued += (size_t) got;
    }
    for (size_t i = 0; i < self->dump->n.audit; i++) {
        const keystore_audit_row_t *row = &self->dump->audit [i];
        int64_t seq = 0;
        uint8_t hash [KEYSTORE_AUDIT_HASH_LEN];
        int got = ks->be->audit_head (ks->store, row->broker, &seq, hash);
        if (got < 0)
            return -1;
        if (got == 1 && row->seq <= seq)
            continue;
        if (ks->be->audit_insert (ks->store, row) != 0)
            return -1;
        self->changed.audit++;
    }
    return 0;
}

//  Without mirror (a copy): 0 unless the target is the same keystore
//  (identity) at a later counter than the dump and the dump would change
//  it (an older copy over a newer one): -1 after an E: line.  A re-run
//  over an unchanged target passes.
static int
s_not_older (s_load_t *self)
{
    keystore_t *ks = self->ks;
    keystore_dump_counts_t c = self->changed;
    uint8_t *check = NULL;
    size_t len = 0;
    uint64_t counter = self->counter;       //  read before the load (s_load_t)
    if (c.tenants + c.keys + c.objects + c.issued + c.audit == 0)
        return 0;
    if (ks->be->meta_get (ks->store, "master_check", &check, &len) != 1) {
        free (check);
        return -1;
    }
    bool same = len == self->dump->check_len && memcmp (check, self->dump->check, len) == 0;
    free (check);
    if (same && counter > self->dump->counter) {
        zsys_error ("keystore %s: the source is an older copy of it (counter %" PRIu64 " < %" PRIu64
                    "): not copied over it", ks_where (ks), self->dump->counter, counter);
        return -1;
    }
    return 0;
}

//  The target takes the source's identity (its master key check value,
//  to which the counter file, the state record and the change epochs are
//  bound: cryptoserver-keystore(5) "Rollback"): the copy is the same
//  keystore moved, and the counter file beside the master key goes on
//  guarding it.  Every tenant's change epoch is written again under it.
static int
s_identity (s_load_t *self)
{
    keystore_t *ks = self->ks;
    uint8_t *check = NULL;
    size_t len = 0;
    int got = ks->be->meta_get (ks->store, "master_check", &check, &len);
    bool same = got == 1 && len == self->dump->check_len && memcmp (check, self->dump->check, len) == 0;
    free (check);
    if (got != 1 || same)
        return got == 1 ? 0 : -1;
    if (ks->be->meta_put (ks->store, "master_check", self->dump->check, self->dump->check_len) != 0
    ||  EVP_Digest (self->dump->check, self->dump->check_len, ks->id, NULL, EVP_sha256 (), NULL) != 1)
        return -1;
    //  Schema 7: the identity is its own row (a rotated keystore's differs
    //  from its check value's hash).
    const keystore_dump_t *d = self->dump;
    if (d->identity && d->identity_len == sizeof ks->id)
        memcpy (ks->id, d->identity, sizeof ks->id);
    if (ks->be->meta_put (ks->store, "identity", ks->id, sizeof ks->id) != 0)
        return -1;
    char **names = ks->be->tenant_list (ks->store);
    for (size_t i = 0; names && names [i]; i++) {
        ks_changes_touch (ks, names [i]);
        free (names [i]);
    }
    free (names);
    return names ? 0 : -1;
}

//  The target takes the source's data key (schema 7, ks_master.c: the
//  rows' MACs and PIN forms are under keys made from it), sealed under the
//  master key both share; a dump without one (a backup made at schema 6)
//  had the master key itself as its base.  Before any row is compared:
//  the target's own state record was read (s_load_t.schema, counter).
static int
s_data_key (s_load_t *self)
{
    keystore_t *ks = self->ks;
    if (!self->dump->data_key)
        return ks_data_key_put (ks, ks->keys->master, ks->keys->master);
    return ks->be->meta_put (ks->store, "data_key", self->dump->data_key, self->dump->data_key_len) == 0
        && ks_data_key_load (ks) == 0 ? 0 : -1;
}

//  The state record vouches for the rows as they now are, at a counter
//  not below the target's, the dump's or the counter file's (ks_end then
//  raises it by one and the file follows).
static int
s_vouch (s_load_t *self)
{
    keystore_t *ks = self->ks;
    uint64_t schema = self->schema, counter = self->counter, file = 0;
    uint8_t rows [32];
    if (s_identity (self) != 0
    ||  ks_counter_base (ks, &file) != 0
    ||  ks_digest_compute (ks, rows) != 0)
        return -1;
    for (size_t i = 0; i < self->dump->n.tenants; i++)
        if (self->touched [i]) {
            uint64_t version = ks_version_next (ks);
            if (!version || ks->be->keys_version_set (ks->store, self->dump->names [i], version) < 0)
                return -1;
        }
    uint64_t base = counter;
    if (self->dump->counter > base)
        base = self->dump->counter;
    if (file > base)
        base = file;
    memset (ks->delta, 0, sizeof ks->delta);
    return ks_state_put (ks, schema, base, rows);
}

int
keystore_dump_load (keystore_t *ks, const keystore_dump_t *dump, bool mirror, const char *counter_path,
                    keystore_dump_counts_t *changed_p)
{
    s_load_t self = { .ks = ks, .dump = dump };
    if (!ks || !dump)
        return -1;
    if (counter_path && !ks->counter_path && !(ks->counter_path = strdup (counter_path)))
        return -1;
    self.touched = calloc (dump->n.tenants + 1, sizeof *self.touched);
    if (!self.touched || ks->be->begin (ks->store) != 0) {
        free (self.touched);
        return -1;
    }
    uint8_t digest [32];
    int rc = ks_state_get (ks, &self.schema, &self.counter, digest) == 1 && s_data_key (&self) == 0
          && s_load_tenants (&self) == 0 && s_load_rows (&self, false) == 0 && s_load_rows (&self, true) == 0
          && (!mirror || s_mirror (&self) == 0) && s_load_appends (&self) == 0
          && (mirror || s_not_older (&self) == 0) && s_vouch (&self) == 0 ? 0 : -1;
    if (ks_end (ks, rc == 0) != 0 || rc != 0) {
        zsys_error ("keystore %s: the rows were not written (rolled back)", ks_where (ks));
        rc = -1;
    }
    else
        zsys_notice ("keystore %s: %zu tenant, %zu key, %zu object, %zu issued and %zu audit rows "
                     "written by the operator; its counter is %" PRIu64 " now", ks_where (ks),
                     self.changed.tenants, self.changed.keys, self.changed.objects, self.changed.issued,
                     self.changed.audit, ks->counter);
    if (changed_p)
        *changed_p = self.changed;
    free (self.touched);
    return rc;
}

int
keystore_counter_file (keystore_t *self, uint64_t *value_p)
{
    *value_p = 0;
    return self ? ks_counter_base (self, value_p) : -1;
}
