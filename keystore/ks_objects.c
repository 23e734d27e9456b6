/*  ks_objects.c — the keystore's certificates and data objects
 *  (keystore.h, schema 4): object rows (a packed cs.ObjectInfo; for a
 *  CKA_PRIVATE object only its ref, class and flag in the clear and the
 *  whole object sealed under the master key as "cs-obj-v1" || tenant ||
 *  NUL || ref; a row MAC), storing, reading, listing and deleting them,
 *  and new object references.  keystore_int.h has what it shares.
 */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <czmq.h>
#include <openssl/crypto.h>
#include "keystore_int.h"

#define OBJ_AAD_PREFIX   "cs-obj-v1"

/* ---- certificates and data objects (schema 4) ------------------------- */

static uint8_t *
s_obj_pack (const Cs__ObjectInfo *info, size_t *len_p)
{
    size_t len = cs__object_info__get_packed_size (info);
    uint8_t *packed = malloc (len ? len : 1);
    if (packed)
        *len_p = cs__object_info__pack (info, packed);
    return packed;
}

int
keystore_object_put (keystore_t *self, const char *tenant, const Cs__ObjectInfo *info)
{
    if (!self || !tenant || !info || !ks_ref_ok (info->ref))
        return -1;
    int exists = self->be->tenant_exists (self->store, tenant);
    if (exists != 1) {
        if (exists == 0)
            zsys_error ("keystore %s: no tenant %s", ks_where (self), tenant);
        return -1;
    }
    uint8_t *aad = NULL, *whole = NULL, mac [ROW_MAC_LEN];
    size_t aad_len = 0, whole_len = 0;
    ks_key_rec_t rec = { .ref = info->ref };
    int rc = -1;
    if (info->is_private) {
        //  Only what the broker needs to filter is in the clear.
        Cs__ObjectInfo stub = CS__OBJECT_INFO__INIT;
        stub.ref = info->ref;
        stub.object_class = info->object_class;
        stub.is_private = true;
        whole = s_obj_pack (info, &whole_len);
        aad = whole ? ks_row_aad (OBJ_AAD_PREFIX, tenant, info->ref, &aad_len) : NULL;
        rec.private = aad ? ks_seal (self->keys->master, aad, aad_len, whole, whole_len, &rec.private_len) : NULL;
        rec.info = rec.private ? s_obj_pack (&stub, &rec.info_len) : NULL;
    }
    else
        rec.info = s_obj_pack (info, &rec.info_len);
    if (!rec.info
    ||  row_mac_object (self->keys->mac_key, tenant, info->ref, rec.info, rec.info_len, rec.private,
                        rec.private_len, mac) != 0
    ||  self->be->begin (self->store) != 0)
        goto out;
    rec.mac = mac;
    rec.mac_len = ROW_MAC_LEN;
    ks_key_rec_t old;
    int had = self->be->object_read (self->store, tenant, info->ref, &old);
    if (had >= 0) {
        ks_digest_note (self, tenant, "objects", had == 1 ? old.mac : NULL, old.mac_len, mac, ROW_MAC_LEN);
        if (had == 1)
            ks_key_rec_free (&old);
        rc = self->be->object_put (self->store, tenant, &rec);
    }
    if (ks_end (self, rc == 0) != 0)
        rc = -1;
out:
    if (rc != 0)
        zsys_error ("keystore %s: cannot store object %s of tenant %s", ks_where (self), info->ref, tenant);
    if (whole)
        OPENSSL_cleanse (whole, whole_len);
    free (whole);
    free (aad);
    free (rec.private);
    free (rec.info);
    return rc;
}

//  The object of a row: verified, decoded, opened when sealed.  NULL after
//  an error log line naming it.
static Cs__ObjectInfo *
s_obj_from_row (keystore_t *self, const char *tenant, const ks_key_rec_t *rec)
{
    uint8_t mac [ROW_MAC_LEN], *aad = NULL, *plain = NULL;
    size_t aad_len = 0, plain_len = 0;
    Cs__ObjectInfo *info = NULL;
    const char *why = "row does not verify (changed without the master key)";
    if (row_mac_object (self->keys->mac_key, tenant, rec->ref, rec->info, rec->info_len, rec->private,
                        rec->private_len, mac) == 0
    &&  row_mac_equal (mac, rec->mac, rec->mac_len)) {
        why = "does not decode or decrypt";
        if (!rec->private)
            info = cs__object_info__unpack (NULL, rec->info_len, rec->info);
        else
        if ((aad = ks_row_aad (OBJ_AAD_PREFIX, tenant, rec->ref, &aad_len))
        &&  (plain = ks_open (self->keys->master, aad, aad_len, rec->private, rec->private_len, &plain_len)))
            info = cs__object_info__unpack (NULL, plain_len, plain);
        if (info && (!info->ref || strcmp (info->ref, rec->ref) != 0)) {
            cs__object_info__free_unpacked (info, NULL);
            info = NULL;
        }
    }
    if (plain)
        OPENSSL_cleanse (plain, plain_len);
    free (plain);
    free (aad);
    if (!info)
        zsys_error ("keystore %s: object %s of tenant %s: %s: refused", ks_where (self), rec->ref, tenant, why);
    return info;
}

int
keystore_object_get (keystore_t *self, const char *tenant, const char *ref, Cs__ObjectInfo **info_p)
{
    if (!self || !tenant || !ks_ref_ok (ref) || !info_p)
        return -1;
    ks_key_rec_t rec;
    int got = self->be->object_read (self->store, tenant, ref, &rec);
    if (got != 1)
        return got < 0 ? KEYSTORE_UNAVAILABLE : -1;
    *info_p = s_obj_from_row (self, tenant, &rec);
    ks_key_rec_free (&rec);
    return *info_p ? 0 : KEYSTORE_DAMAGED;
}

int
keystore_object_list (keystore_t *self, const char *tenant, Cs__ObjectInfo ***infos_p, size_t *count_p)
{
    if (!self || !tenant || !infos_p || !count_p)
        return -1;
    ks_key_rec_t *recs = NULL;
    size_t n = 0, count = 0;
    if (self->be->object_list (self->store, tenant, &recs, &n) != 0)
        return -1;
    Cs__ObjectInfo **infos = malloc ((n ? n : 1) * sizeof *infos);
    for (size_t i = 0; i < n; i++) {
        if (infos && (infos [count] = s_obj_from_row (self, tenant, &recs [i])))
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
keystore_object_delete (keystore_t *self, const char *tenant, const char *ref)
{
    if (!self || !tenant || !ks_ref_ok (ref) || self->be->begin (self->store) != 0)
        return -1;
    ks_key_rec_t old;
    int rc = self->be->object_read (self->store, tenant, ref, &old) == 1 ? 0 : -1;
    if (rc == 0) {
        ks_digest_note (self, tenant, "objects", old.mac, old.mac_len, NULL, 0);
        ks_key_rec_free (&old);
        rc = self->be->object_delete (self->store, tenant, ref) == 1 ? 0 : -1;
    }
    if (ks_end (self, rc == 0) != 0)
        rc = -1;
    return rc;
}

void
keystore_object_ref_new (char ref [37])
{
    char key_ref [36];
    keystore_ref_new (key_ref);             //  "ks:" + 32 hex
    memcpy (ref, "obj:", 4);
    memcpy (ref + 4, key_ref + 3, 33);
}
