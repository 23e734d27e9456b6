/*  ks_keys.c — the keystore's server-held keys (keystore.h): key rows
 *  (a packed cs.KeyInfo in the clear, the private key sealed under the
 *  master key as "cs-key-v1" || tenant || NUL || ref, a row MAC), storing,
 *  updating, reading, listing and deleting them, the tenant's key-list
 *  version, new key references, and idempotent operations (the results of
 *  key-management jobs by their ids, in the same transaction as their key
 *  writes).  keystore_int.h has what it shares.
 */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <czmq.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>
#include "keystore_int.h"
#include "cs_util.h"

#define KEY_AAD_PREFIX   "cs-key-v1"

/* ---- keys --------------------------------------------------------------- */

//  The MAC of a key row (row_mac_key) under the keystore's row key.
int
ks_key_mac (keystore_t *self, const char *tenant, const char *ref, const uint8_t *info,
            size_t info_len, const uint8_t *private, size_t private_len, uint8_t mac [ROW_MAC_LEN])
{
    return row_mac_key (self->keys->mac_key, tenant, ref, info, info_len, private, private_len, mac);
}

//  Gives the tenant a new keys_version.  Call inside a write transaction.
static int
s_version_bump (keystore_t *self, const char *tenant)
{
    uint64_t version = ks_version_next (self);
    return version && self->be->keys_version_set (self->store, tenant, version) == 1 ? 0 : -1;
}

//  Packs a KeyInfo into a malloc'd buffer of *len_p bytes (caller frees).
static uint8_t *
s_info_pack (const Cs__KeyInfo *info, size_t *len_p)
{
    size_t len = cs__key_info__get_packed_size (info);
    uint8_t *packed = malloc (len ? len : 1);
    if (packed)
        *len_p = cs__key_info__pack (info, packed);
    return packed;
}

//  True when key row rec of (tenant, ref) carries its MAC; otherwise logs
//  an error naming it.
static bool
s_key_row_verified (keystore_t *self, const ks_key_rec_t *rec, const char *tenant, const char *ref)
{
    uint8_t mac [ROW_MAC_LEN];
    if (ks_key_mac (self, tenant, ref, rec->info, rec->info_len, rec->private, rec->private_len, mac) == 0
    &&  row_mac_equal (mac, rec->mac, rec->mac_len))
        return true;
    zsys_error ("keystore %s: key %s of tenant %s: row does not verify (changed without the "
                "master key): refused", ks_where (self), ref, tenant);
    return false;
}

//  Begins a key write: a transaction of its own, or a part of the open
//  idempotent operation's (keystore_idem_begin).  Returns 0 or -1.
static int
s_key_write_begin (keystore_t *self)
{
    if (self->depth > 0) {
        self->depth++;
        return 0;
    }
    if (self->be->begin (self->store) != 0)
        return -1;
    self->depth = 1;
    self->doomed = false;
    return 0;
}

//  Ends a key write: bumps the tenant's version when rc is 0, commits
//  (rc 0) or rolls back; inside an idempotent operation only marks it to
//  roll back when rc is not 0 (keystore_idem_end ends it).  Returns rc,
//  or -1 when the commit fails.
static int
s_key_write_end (keystore_t *self, const char *tenant, int rc)
{
    if (rc == 0)
        rc = s_version_bump (self, tenant);
    if (self->depth > 1) {
        self->depth--;
        self->doomed = self->doomed || rc != 0;
        return rc;
    }
    self->depth = 0;
    if (ks_end (self, rc == 0) != 0 && rc == 0)
        rc = -1;
    return rc;
}

//  True when `ref` is a usable key reference.
bool
ks_ref_ok (const char *ref)
{
    return ref && *ref && strlen (ref) <= 128;
}

int
keystore_key_put (keystore_t *self, const char *tenant, const Cs__KeyInfo *info,
                  const uint8_t *pkcs8, size_t pkcs8_len)
{
    if (!self || !tenant || !info || !ks_ref_ok (info->ref) || (pkcs8 && !pkcs8_len))
        return -1;
    int exists = self->be->tenant_exists (self->store, tenant);
    if (exists != 1) {
        if (exists == 0)
            zsys_error ("keystore %s: no tenant %s", ks_where (self), tenant);
        return -1;          //  or a database failure, logged
    }
    uint8_t *aad = NULL, mac [ROW_MAC_LEN];
    size_t aad_len = 0;
    ks_key_rec_t rec = { .ref = info->ref };
    int rc = -1;
    if (pkcs8) {
        aad = ks_row_aad (KEY_AAD_PREFIX, tenant, info->ref, &aad_len);
        rec.private = aad ? ks_seal (self->keys->master, aad, aad_len, pkcs8, pkcs8_len, &rec.private_len)
                          : NULL;
        if (!rec.private)
            goto out;
    }
    rec.info = s_info_pack (info, &rec.info_len);
    if (!rec.info
    ||  ks_key_mac (self, tenant, info->ref, rec.info, rec.info_len, rec.private, rec.private_len, mac) != 0
    ||  s_key_write_begin (self) != 0)
        goto out;
    rec.mac = mac;
    rec.mac_len = ROW_MAC_LEN;
    ks_digest_note (self, tenant, "keys", NULL, 0, mac, ROW_MAC_LEN);
    rc = s_key_write_end (self, tenant, self->be->key_insert (self->store, tenant, &rec));
out:
    if (rc != 0)
        zsys_error ("keystore %s: cannot store key %s of tenant %s", ks_where (self), info->ref, tenant);
    free (aad);
    free (rec.private);     //  ciphertext: no wipe needed
    free (rec.info);
    return rc;
}

int
keystore_key_update (keystore_t *self, const char *tenant, const Cs__KeyInfo *info)
{
    if (!self || !tenant || !info || !ks_ref_ok (info->ref))
        return -1;
    size_t packed_len = 0;
    uint8_t *packed = s_info_pack (info, &packed_len), mac [ROW_MAC_LEN];
    ks_key_rec_t rec;
    memset (&rec, 0, sizeof rec);
    if (!packed || s_key_write_begin (self) != 0) {
        free (packed);
        return -1;
    }
    //  The stored row must verify; the new MAC covers its private blob.
    int rc = self->be->key_read (self->store, tenant, info->ref, true, &rec) == 1 ? 0 : -1;
    if (rc == 0 && !s_key_row_verified (self, &rec, tenant, info->ref))
        rc = KEYSTORE_DAMAGED;
    if (rc == 0
    &&  (ks_key_mac (self, tenant, info->ref, packed, packed_len, rec.private, rec.private_len, mac) != 0
         || self->be->key_update (self->store, tenant, info->ref, packed, packed_len, mac) != 1))
        rc = -1;
    if (rc == 0)
        ks_digest_note (self, tenant, "keys", rec.mac, rec.mac_len, mac, ROW_MAC_LEN);
    rc = s_key_write_end (self, tenant, rc);
    ks_key_rec_free (&rec);
    free (packed);
    return rc;
}

int
keystore_key_delete (keystore_t *self, const char *tenant, const char *ref)
{
    ks_key_rec_t rec;
    if (!self || !tenant || !ks_ref_ok (ref) || s_key_write_begin (self) != 0)
        return -1;
    int rc = self->be->key_read (self->store, tenant, ref, true, &rec) == 1 ? 0 : -1;
    if (rc == 0) {
        ks_digest_note (self, tenant, "keys", rec.mac, rec.mac_len, NULL, 0);
        ks_key_rec_free (&rec);
        rc = self->be->key_delete (self->store, tenant, ref) == 1 ? 0 : -1;
    }
    return s_key_write_end (self, tenant, rc);
}

//  Unpacks a stored description (caller frees with
//  cs__key_info__free_unpacked), or NULL after a log when it is damaged.
static Cs__KeyInfo *
s_info_unpack (keystore_t *self, const ks_key_rec_t *rec)
{
    Cs__KeyInfo *info = cs__key_info__unpack (NULL, rec->info_len, rec->info);
    if (!info)
        zsys_error ("keystore %s: a key description does not decode", ks_where (self));
    return info;
}

//  Decrypts the private blob of rec into *pkcs8_p / *len_p (NULL and 0
//  when the row has none).  Returns 0, or -1 after a log when it does not
//  decrypt.
static int
s_private_open (keystore_t *self, const ks_key_rec_t *rec, const char *tenant, const char *ref,
                uint8_t **pkcs8_p, size_t *len_p)
{
    *pkcs8_p = NULL;
    *len_p = 0;
    if (!rec->private)
        return 0;
    size_t aad_len = 0;
    uint8_t *aad = ks_row_aad (KEY_AAD_PREFIX, tenant, ref, &aad_len);
    if (aad)
        *pkcs8_p = ks_open (self->keys->master, aad, aad_len, rec->private, rec->private_len, len_p);
    free (aad);
    if (*pkcs8_p)
        return 0;
    zsys_error ("keystore %s: key %s of tenant %s does not decrypt (changed, moved, "
                "or another master key)", ks_where (self), ref, tenant);
    return -1;
}

int
keystore_key_get (keystore_t *self, const char *tenant, const char *ref,
                  Cs__KeyInfo **info_p, uint8_t **pkcs8_p, size_t *pkcs8_len_p)
{
    if (!self || !tenant || !ks_ref_ok (ref) || !info_p)
        return -1;
    ks_hook ("key_get");
    ks_key_rec_t rec;
    memset (&rec, 0, sizeof rec);
    Cs__KeyInfo *info = NULL;
    int rc = -1;
    int got = self->be->key_read (self->store, tenant, ref, false, &rec);
    if (got != 1) {
        rc = got < 0 ? KEYSTORE_UNAVAILABLE : -1;
        goto out;
    }
    rc = KEYSTORE_DAMAGED;
    if (!s_key_row_verified (self, &rec, tenant, ref) || !(info = s_info_unpack (self, &rec)))
        goto out;
    if (pkcs8_p && s_private_open (self, &rec, tenant, ref, pkcs8_p, pkcs8_len_p) != 0)
        goto out;
    *info_p = info;
    info = NULL;
    rc = 0;
out:
    if (info)
        cs__key_info__free_unpacked (info, NULL);
    ks_key_rec_free (&rec);
    return rc;
}

/*  The verified rows of recs (n, all freed here) as KeyInfos into *infos_p
 *  (malloc'd) and *count_p; a row that does not verify or decode is left
 *  out (logged).  Returns 0 or -1.  */
static int
s_infos_of (keystore_t *self, const char *tenant, ks_key_rec_t *recs, size_t n,
            Cs__KeyInfo ***infos_p, size_t *count_p)
{
    size_t count = 0;
    Cs__KeyInfo **infos = malloc ((n ? n : 1) * sizeof *infos);
    for (size_t i = 0; i < n; i++) {
        if (infos && s_key_row_verified (self, &recs [i], tenant, recs [i].ref)
        &&  (infos [count] = s_info_unpack (self, &recs [i])))
            count++;
        ks_key_rec_free (&recs [i]);
    }
    free (recs);
    if (!infos)
        return -1;
    *infos_p = infos;
    *count_p = count;
    return 0;
}

int
keystore_key_list (keystore_t *self, const char *tenant,
                   Cs__KeyInfo ***infos_p, size_t *count_p)
{
    if (!self || !tenant || !infos_p || !count_p)
        return -1;
    ks_hook ("key_list");
    ks_key_rec_t *recs = NULL;
    size_t n = 0;
    if (self->be->key_list (self->store, tenant, &recs, &n) != 0)
        return -1;
    return s_infos_of (self, tenant, recs, n, infos_p, count_p);
}

int
keystore_key_page (keystore_t *self, const char *tenant, const char *after, size_t limit,
                   Cs__KeyInfo ***infos_p, size_t *count_p, char **next_p)
{
    if (!self || !tenant || !after || limit == 0 || limit == SIZE_MAX || !infos_p || !count_p || !next_p)
        return -1;
    ks_hook ("key_list");
    ks_key_rec_t *recs = NULL;
    size_t n = 0;
    *next_p = NULL;
    if (self->be->key_page (self->store, tenant, after, limit + 1, &recs, &n) != 0)
        return -1;
    //  One row more than asked says whether another page follows; the
    //  cursor is the last row of this page, verified or not.
    if (n > limit) {
        ks_key_rec_free (&recs [limit]);
        n = limit;
        if (!(*next_p = strdup (recs [n - 1].ref))) {
            for (size_t i = 0; i < n; i++)
                ks_key_rec_free (&recs [i]);
            free (recs);
            return -1;
        }
    }
    if (s_infos_of (self, tenant, recs, n, infos_p, count_p) == 0)
        return 0;
    free (*next_p);
    *next_p = NULL;
    return -1;
}

uint64_t
keystore_keys_version (keystore_t *self, const char *tenant)
{
    uint64_t version = 0;
    if (!self || !tenant)
        return 0;
    ks_hook ("keys_version");
    return self->be->keys_version_get (self->store, tenant, &version) == 1 ? version : 0;
}

void
keystore_ref_new (char ref [36])
{
    uint8_t random [16];
    if (RAND_bytes (random, sizeof random) != 1) {
        //  Practically never; refs must still differ, so fall back to
        //  time and counter rather than returning a constant.
        static uint64_t counter;
        uint64_t now = (uint64_t) zclock_time (), next = ++counter;
        memcpy (random, &now, 8);
        memcpy (random + 8, &next, 8);
    }
    memcpy (ref, "ks:", 3);
    cs_hex_encode (random, sizeof random, ref + 3);
}

/* ---- idempotent operations --------------------------------------------- */

//  Reads the idempotency row (tenant, id) of self's open operation and
//  verifies its MAC.  Returns 1 (*result_p malloc'd), 0 absent, -1, or
//  KEYSTORE_DAMAGED after an error log line.
static int
s_idem_read (keystore_t *self, uint8_t **result_p, size_t *len_p)
{
    ks_idem_rec_t rec;
    uint8_t mac [ROW_MAC_LEN];
    int got = self->be->idem_read (self->store, self->idem_tenant, self->idem_id, self->idem_id_len, &rec);
    if (got != 1)
        return got;
    if (row_mac_idem (self->keys->mac_key, self->idem_tenant, self->idem_id, self->idem_id_len,
                      rec.result, rec.result_len, rec.created, mac) != 0
    ||  !row_mac_equal (mac, rec.mac, rec.mac_len)) {
        zsys_error ("keystore %s: an idempotency row of tenant %s does not verify (changed without "
                    "the master key): refused", ks_where (self), self->idem_tenant);
        ks_idem_rec_free (&rec);
        return KEYSTORE_DAMAGED;
    }
    *result_p = rec.result;
    *len_p = rec.result_len;
    rec.result = NULL;
    ks_idem_rec_free (&rec);
    return 1;
}

int
keystore_idem_begin (keystore_t *self, const char *tenant, const uint8_t *id, size_t id_len,
                     uint8_t **result_p, size_t *result_len_p)
{
    if (!self || !tenant || !id || id_len == 0 || id_len > KEYSTORE_IDEM_ID_MAX || !result_p
    ||  !result_len_p || self->depth > 0)
        return -1;
    *result_p = NULL;
    *result_len_p = 0;
    free (self->idem_tenant);
    self->idem_tenant = strdup (tenant);
    memcpy (self->idem_id, id, id_len);
    self->idem_id_len = id_len;
    if (!self->idem_tenant || self->be->begin (self->store) != 0)
        return -1;
    int got = s_idem_read (self, result_p, result_len_p);
    if (got != 0) {
        self->be->end (self->store, false);
        return got;
    }
    self->depth = 1;
    self->doomed = false;
    return 0;
}

int
keystore_idem_end (keystore_t *self, const uint8_t *result, size_t result_len,
                   uint8_t **recorded_p, size_t *recorded_len_p)
{
    if (!self || self->depth != 1)
        return -1;
    self->depth = 0;
    if (!result || self->doomed) {
        ks_end (self, false);
        return result ? -1 : 0;
    }
    ks_idem_rec_t rec = { .result = (uint8_t *) result, .result_len = result_len,
                          .created = (int64_t) time (NULL) };
    uint8_t mac [ROW_MAC_LEN];
    rec.mac = mac;
    rec.mac_len = ROW_MAC_LEN;
    int rc = row_mac_idem (self->keys->mac_key, self->idem_tenant, self->idem_id, self->idem_id_len,
                           result, result_len, rec.created, mac);
    int inserted = rc == 0 ? self->be->idem_insert (self->store, self->idem_tenant, self->idem_id,
                                                    self->idem_id_len, &rec) : -1;
    if (inserted == 1 && self->be->idem_expire (self->store, rec.created - KEYSTORE_IDEM_TTL_S) < 0)
        inserted = -1;
    if (ks_end (self, inserted == 1) != 0 || inserted < 0) {
        if (inserted == 1)
            zsys_error ("keystore %s: cannot record an idempotent operation of tenant %s",
                        ks_where (self), self->idem_tenant);
        return -1;
    }
    if (inserted == 1)
        return 0;
    //  Another connection recorded the id first (its transaction committed
    //  while this one ran): this one rolled back; the first one's result stands.
    if (!recorded_p || !recorded_len_p)
        return 1;
    int got = s_idem_read (self, recorded_p, recorded_len_p);
    return got == 1 ? 1 : got == 0 ? -1 : got;
}

int
keystore_idem_expire (keystore_t *self, int64_t now)
{
    if (!self || self->depth > 0)
        return -1;
    return self->be->idem_expire (self->store, now - KEYSTORE_IDEM_TTL_S);
}

/* ---- issued pool keys (schema 5) ----------------------------------------- */

int
keystore_issued_record (keystore_t *self, const char *tenant, const uint8_t fingerprint [32])
{
    uint8_t mac [ROW_MAC_LEN];
    int64_t created = (int64_t) time (NULL);
    if (!self || !tenant || !fingerprint
    ||  row_mac_issued (self->keys->mac_key, fingerprint, tenant, created, mac) != 0
    ||  s_key_write_begin (self) != 0)
        return -1;
    int inserted = self->be->issued_insert (self->store, fingerprint, tenant, created, mac);
    if (inserted == 1)
        ks_digest_note (self, NULL, "issued", NULL, 0, mac, ROW_MAC_LEN);
    //  No keys_version to bump: s_key_write_end's tenant bump is harmless
    //  (the tenant's list did not change, a client fetches it once more).
    int rc = s_key_write_end (self, tenant, inserted == 1 ? 0 : -1);
    return inserted == 0 ? 1 : rc == 0 ? 0 : -1;
}

int
keystore_issued_check (keystore_t *self, const uint8_t fingerprint [32])
{
    char *tenant = NULL;
    int64_t created = 0;
    uint8_t *stored = NULL, mac [ROW_MAC_LEN];
    size_t stored_len = 0;
    if (!self || !fingerprint)
        return -1;
    int got = self->be->issued_read (self->store, fingerprint, &tenant, &created, &stored, &stored_len);
    if (got == 1
    &&  (row_mac_issued (self->keys->mac_key, fingerprint, tenant, created, mac) != 0
         || !row_mac_equal (mac, stored, stored_len))) {
        zsys_error ("keystore %s: an issued-key row does not verify (changed without the master "
                    "key): its key counts as issued", ks_where (self));
        got = KEYSTORE_DAMAGED;
    }
    free (tenant);
    free (stored);
    return got;
}
