/*  ks_tenant.c — the keystore's tenants and their PINs (keystore.h):
 *  tenant rows and their MACs, adding, removing and listing tenants,
 *  checking and setting PINs (failure counts, locking, PIN epochs), the
 *  token flags they give, and the database-wide counter that hands out
 *  PIN epochs and key-list versions.  keystore_int.h has what it shares.
 */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <czmq.h>
#include "keystore_int.h"

#define TENANT_NAME_MAX  32             /* bytes: it is the token label */

/* ---- tenant rows (integrity) ------------------------------------------- */

//  Index of a user type in a tenant row: 0 CKU_USER, 1 CKU_SO, -1 other.
static int
s_role (CK_USER_TYPE user_type)
{
    return user_type == CKU_USER ? 0 : user_type == CKU_SO ? 1 : -1;
}

void
ks_tenant_row_free (ks_tenant_row_t *row)
{
    free (row->pin [0]);
    free (row->pin [1]);
    memset (row, 0, sizeof *row);
}

//  Reads tenant row `name` into *row (caller frees with ks_tenant_row_free)
//  and, when keys_version_p is not NULL, its keys_version (outside the
//  MAC).  With `verify`, its MAC must match (else an error line naming the
//  tenant).  `lock`: inside a write transaction, the row stays locked
//  until its end.  Returns 1 found, 0 unknown, -1 on a database error,
//  KEYSTORE_DAMAGED when it does not verify.
int
ks_tenant_read (keystore_t *self, const char *name, bool verify, bool lock, ks_tenant_row_t *row,
                uint64_t *keys_version_p)
{
    ks_tenant_rec_t rec;
    uint8_t mac [ROW_MAC_LEN];
    memset (row, 0, sizeof *row);
    memset (&rec, 0, sizeof rec);
    ks_hook ("tenant_read");
    int rc = self->be->tenant_read (self->store, name, lock, &rec);
    if (rc == 1 && verify
    &&  (row_mac_tenant (self->keys->mac_key, name, &rec.row, mac) != 0
         || !row_mac_equal (mac, rec.mac, rec.mac_len))) {
        zsys_error ("keystore %s: tenant %s: row does not verify (changed without the master "
                    "key): refused", ks_where (self), name);
        rc = KEYSTORE_DAMAGED;
    }
    if (rc == 1) {
        *row = rec.row;
        memset (&rec.row, 0, sizeof rec.row);
        if (keys_version_p)
            *keys_version_p = rec.keys_version;
    }
    ks_tenant_rec_free (&rec);
    return rc;
}

//  Writes the PIN columns of tenant row `name` and their MAC.  Call inside
//  a write transaction.  Returns 0, or -1 (also for an unknown tenant).
int
ks_tenant_write (keystore_t *self, const char *name, const ks_tenant_row_t *row)
{
    uint8_t mac [ROW_MAC_LEN];
    ks_tenant_rec_t old;
    if (row_mac_tenant (self->keys->mac_key, name, row, mac) != 0
    ||  self->be->tenant_read (self->store, name, true, &old) != 1)
        return -1;
    ks_digest_note (self, name, "tenants", old.mac, old.mac_len, mac, ROW_MAC_LEN);
    ks_tenant_rec_free (&old);
    return self->be->tenant_update (self->store, name, row, mac) == 1 ? 0 : -1;
}

//  Takes the next value of the database-wide version counter.  Returns
//  it, or 0 on failure.
uint64_t
ks_version_next (keystore_t *self)
{
    uint64_t value = 0;
    return self->be->counter_next (self->store, &value) == 0 ? value : 0;
}

//  A new PIN epoch after `old`: the next value of the database-wide
//  counter, and above `old` whatever that counter holds.  Call inside a
//  write transaction.  Returns 0 on failure.
int64_t
ks_epoch_next (keystore_t *self, int64_t old)
{
    uint64_t next = ks_version_next (self);
    if (next == 0 || next >= INT64_MAX)
        return 0;
    return (int64_t) next > old ? (int64_t) next : old + 1;
}

/* ---- tenants ------------------------------------------------------------- */

static bool
s_pin_len_ok (size_t len)
{
    return len >= CS_PIN_MIN_LEN && len <= CS_PIN_MAX_LEN;
}

int
keystore_tenant_add (keystore_t *self, const char *name,
                     const void *user_pin, size_t user_pin_len,
                     const void *so_pin, size_t so_pin_len)
{
    if (!self || !name || !*name || strlen (name) > TENANT_NAME_MAX
    ||  !user_pin || !so_pin || !s_pin_len_ok (user_pin_len) || !s_pin_len_ok (so_pin_len)) {
        zsys_error ("keystore: tenant name must be 1..%d bytes and PINs %d..%d bytes",
                    TENANT_NAME_MAX, CS_PIN_MIN_LEN, CS_PIN_MAX_LEN);
        return -1;
    }
    if (keystore_tenant_exists (self, name)) {
        zsys_error ("keystore %s: tenant %s exists", ks_where (self), name);
        return -1;
    }
    ks_tenant_rec_t rec = { .row = { { cs_pin_hash (self->keys->pin_key, user_pin, user_pin_len),
                                       cs_pin_hash (self->keys->pin_key, so_pin, so_pin_len) } } };
    uint8_t mac [ROW_MAC_LEN];
    int rc = -1;
    if (!rec.row.pin [0] || !rec.row.pin [1] || self->be->begin (self->store) != 0)
        goto out;
    rec.keys_version = ks_version_next (self);
    rec.row.epoch [0] = ks_epoch_next (self, 0);
    rec.row.epoch [1] = ks_epoch_next (self, 0);
    if (rec.keys_version && rec.row.epoch [0] && rec.row.epoch [1]
    &&  row_mac_tenant (self->keys->mac_key, name, &rec.row, mac) == 0) {
        rec.mac = mac;
        rec.mac_len = ROW_MAC_LEN;
        rc = self->be->tenant_insert (self->store, name, &rec);
        ks_digest_note (self, name, "tenants", NULL, 0, mac, ROW_MAC_LEN);
        rec.mac = NULL;
    }
    if (ks_end (self, rc == 0) != 0)
        rc = -1;
out:
    ks_tenant_rec_free (&rec);
    return rc;
}

//  The tenant row, its keys and objects leave the row digest (the delete
//  cascades to them).  0, or -1 (also for an unknown tenant).
static int
s_rows_leave (keystore_t *self, const char *name)
{
    ks_tenant_rec_t rec;
    ks_key_rec_t *recs = NULL;
    size_t count = 0;
    if (self->be->tenant_read (self->store, name, true, &rec) != 1)
        return -1;
    ks_digest_note (self, name, "tenants", rec.mac, rec.mac_len, NULL, 0);
    ks_tenant_rec_free (&rec);
    for (int table = 0; table < 2; table++) {
        int got = table == 0 ? self->be->key_list (self->store, name, &recs, &count)
                             : self->be->object_list (self->store, name, &recs, &count);
        if (got != 0)
            return -1;
        for (size_t i = 0; i < count; i++) {
            ks_digest_note (self, name, table == 0 ? "keys" : "objects", recs [i].mac, recs [i].mac_len, NULL, 0);
            ks_key_rec_free (&recs [i]);
        }
        free (recs);
    }
    return 0;
}

int
keystore_tenant_remove (keystore_t *self, const char *name)
{
    if (!self || !name || self->be->begin (self->store) != 0)
        return -1;
    int rc = s_rows_leave (self, name) == 0 && self->be->tenant_delete (self->store, name) == 1 ? 0 : -1;
    return ks_end (self, rc == 0) == 0 ? rc : -1;
}

char **
keystore_tenant_list (keystore_t *self)
{
    return self ? self->be->tenant_list (self->store) : NULL;
}

bool
keystore_tenant_exists (keystore_t *self, const char *name)
{
    return self && name && self->be->tenant_exists (self->store, name) == 1;
}

/* ---- PINs ------------------------------------------------------------- */

//  Ends a PIN transaction: COMMIT when `commit` (the row was written), else
//  ROLLBACK.  Returns rv, or CKR_DEVICE_ERROR when the commit fails.
static CK_RV
s_pin_end (keystore_t *self, CK_RV rv, bool commit)
{
    if (ks_end (self, commit) != 0 && commit)
        return CKR_DEVICE_ERROR;
    return rv;
}

CK_RV
keystore_pin_check (keystore_t *self, const char *tenant, CK_USER_TYPE user_type,
                    const void *pin, size_t pin_len, keystore_pin_state_t *state_p)
{
    int role = s_role (user_type);
    ks_tenant_row_t row;
    if (state_p)
        *state_p = (keystore_pin_state_t) { 0, 0 };
    if (role < 0)
        return CKR_USER_TYPE_INVALID;
    ks_hook ("pin_check");
    //  One write transaction around read, hash and update (the tenant row
    //  locked): two concurrent wrong PINs (two brokers, or the broker and
    //  the administrator) both count, and the row written is the row verified.
    if (!self || !tenant || self->be->begin (self->store) != 0)
        return CKR_DEVICE_ERROR;
    if (ks_tenant_read (self, tenant, true, true, &row, NULL) != 1)
        return s_pin_end (self, CKR_DEVICE_ERROR, false);
    CK_RV rv = CKR_PIN_LOCKED;
    bool changed = false;
    if (row.failures [role] < KEYSTORE_PIN_MAX_FAILURES) {
        bool match = cs_pin_verify (row.pin [role], self->keys->pin_key, pin, pin_len);
        char *rehash = match && !cs_pin_current (row.pin [role])
                     ? cs_pin_hash (self->keys->pin_key, pin, pin_len) : NULL;
        changed = !match || row.failures [role] != 0 || rehash;
        if (rehash) {
            free (row.pin [role]);
            row.pin [role] = rehash;
        }
        row.failures [role] = match ? 0 : row.failures [role] + 1;
        bool locks = row.failures [role] >= KEYSTORE_PIN_MAX_FAILURES;
        if (locks)          //  every login ticket of this user type ends
            row.epoch [role] = ks_epoch_next (self, row.epoch [role]);
        rv = match ? CKR_OK : CKR_PIN_INCORRECT;
        if ((locks && row.epoch [role] == 0) || (changed && ks_tenant_write (self, tenant, &row) != 0))
            rv = CKR_DEVICE_ERROR;
    }
    if (state_p)
        *state_p = (keystore_pin_state_t) { (long) row.failures [role], (uint64_t) row.epoch [role] };
    ks_tenant_row_free (&row);
    return s_pin_end (self, rv, changed && rv != CKR_DEVICE_ERROR);
}

CK_RV
keystore_pin_set (keystore_t *self, const char *tenant, CK_USER_TYPE user_type,
                  const void *pin, size_t pin_len, uint64_t *epoch_p)
{
    int role = s_role (user_type);
    ks_tenant_row_t row;
    if (role < 0)
        return CKR_USER_TYPE_INVALID;
    if (!pin || !s_pin_len_ok (pin_len))
        return CKR_PIN_LEN_RANGE;
    char *hash = self && tenant ? cs_pin_hash (self->keys->pin_key, pin, pin_len) : NULL;
    if (!hash || self->be->begin (self->store) != 0) {
        free (hash);
        return CKR_DEVICE_ERROR;
    }
    if (ks_tenant_read (self, tenant, true, true, &row, NULL) != 1) {
        free (hash);
        return s_pin_end (self, CKR_DEVICE_ERROR, false);
    }
    free (row.pin [role]);
    row.pin [role] = hash;
    row.failures [role] = 0;
    row.epoch [role] = ks_epoch_next (self, row.epoch [role]);
    CK_RV rv = row.epoch [role] && ks_tenant_write (self, tenant, &row) == 0 ? CKR_OK : CKR_DEVICE_ERROR;
    if (rv == CKR_OK && epoch_p)
        *epoch_p = (uint64_t) row.epoch [role];
    ks_tenant_row_free (&row);
    return s_pin_end (self, rv, rv == CKR_OK);
}

int
keystore_pin_epoch (keystore_t *self, const char *tenant, CK_USER_TYPE user_type, uint64_t *epoch_p)
{
    int role = s_role (user_type);
    ks_tenant_row_t row;
    if (role < 0 || !self || !tenant || ks_tenant_read (self, tenant, true, false, &row, NULL) != 1)
        return -1;
    *epoch_p = (uint64_t) row.epoch [role];
    ks_tenant_row_free (&row);
    return 0;
}

//  The PKCS#11 2.40 §5.4 CK_TOKEN_INFO flags for `failures` wrong PINs in a
//  row: COUNT_LOW after one, FINAL_TRY when one try is left, LOCKED at the
//  maximum.
static CK_FLAGS
s_pin_flags (long failures, CK_FLAGS count_low, CK_FLAGS final_try, CK_FLAGS locked)
{
    CK_FLAGS flags = 0;
    if (failures >= 1)
        flags |= count_low;
    if (failures == KEYSTORE_PIN_MAX_FAILURES - 1)
        flags |= final_try;
    if (failures >= KEYSTORE_PIN_MAX_FAILURES)
        flags |= locked;
    return flags;
}

CK_FLAGS
keystore_pin_flags (keystore_t *self, const char *tenant)
{
    keystore_tenant_t state;
    return keystore_tenant_state (self, tenant, &state) == 0 ? keystore_tenant_flags (&state) : 0;
}

CK_FLAGS
keystore_tenant_flags (const keystore_tenant_t *state)
{
    return s_pin_flags (state->failures [0], CKF_USER_PIN_COUNT_LOW, CKF_USER_PIN_FINAL_TRY,
                        CKF_USER_PIN_LOCKED)
         | s_pin_flags (state->failures [1], CKF_SO_PIN_COUNT_LOW, CKF_SO_PIN_FINAL_TRY,
                        CKF_SO_PIN_LOCKED);
}

int
keystore_tenant_state (keystore_t *self, const char *tenant, keystore_tenant_t *state)
{
    ks_tenant_row_t row;
    uint64_t keys_version = 0;
    memset (state, 0, sizeof *state);
    int got = self && tenant ? ks_tenant_read (self, tenant, true, false, &row, &keys_version) : 0;
    if (got != 1)
        return got == KEYSTORE_DAMAGED ? KEYSTORE_DAMAGED : got < 0 ? KEYSTORE_UNAVAILABLE : -1;
    for (int i = 0; i < 2; i++) {
        state->epoch [i] = (uint64_t) row.epoch [i];
        state->failures [i] = (long) row.failures [i];
    }
    state->keys_version = keys_version;
    ks_tenant_row_free (&row);
    return 0;
}
