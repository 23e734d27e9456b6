/*  ks_master.c — the keystore's data key under the master key (schema 7,
 *  issue #22 item 3) and the master key's rotation.
 *
 *  The row, PIN and state keys come (HKDF, row_mac.h) from a 32-byte data
 *  key kept in meta data_key, sealed under the master key (AES-256-GCM,
 *  AAD "cs-data-key-v1"): random in a keystore made at schema 7, the
 *  master key itself in one upgraded from 5 or 6 (its PIN forms are HMACs
 *  of scrypt values that are not kept, so the key they are under cannot
 *  change).  So a new master key re-seals the data key, every private key
 *  and private object and the check value, and leaves every MAC and PIN
 *  form as it is (cryptoserver-keystore(5), "The master key").
 */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <czmq.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include "keystore_int.h"

#define DATA_KEY_AAD     "cs-data-key-v1"
#define CHECK_AAD        "cs-master-check-v1"           /* ks_schema.c's */
#define CHECK_PLAINTEXT  "cryptoserver keystore master key check value"
#define KEY_AAD_PREFIX   "cs-key-v1"                    /* ks_keys.c's */
#define OBJ_AAD_PREFIX   "cs-obj-v1"                    /* ks_objects.c's */

int
ks_keys_derive (ks_keys_t *keys, const uint8_t base [32])
{
    return row_mac_derive (base, ROW_MAC_INFO_ROWS, keys->mac_key) == 0
        && row_mac_derive (base, ROW_MAC_INFO_PINS, keys->pin_key) == 0
        && row_mac_derive (base, ROW_MAC_INFO_STATE, keys->state_key) == 0 ? 0 : -1;
}

int
ks_data_key_put (keystore_t *self, const uint8_t master [KEYSTORE_MASTER_KEY_LEN], const uint8_t key [32])
{
    size_t len = 0;
    uint8_t *sealed = ks_seal (master, DATA_KEY_AAD, strlen (DATA_KEY_AAD), key, 32, &len);
    int rc = sealed && self->be->meta_put (self->store, "data_key", sealed, len) == 0
                    && ks_keys_derive (self->keys, key) == 0 ? 0 : -1;
    free (sealed);
    return rc;
}

//  The data key of self opened under `master`: malloc'd 32 bytes (caller
//  wipes), or NULL after an E: line.
static uint8_t *
s_data_key (keystore_t *self, const uint8_t *master)
{
    uint8_t *sealed = NULL, *key = NULL;
    size_t len = 0, key_len = 0;
    int got = self->be->meta_get (self->store, "data_key", &sealed, &len);
    if (got == 0)
        zsys_error ("keystore %s: schema 7 without its data key (changed without the master key?): "
                    "refused", ks_where (self));
    if (got == 1 && !(key = ks_open (master, DATA_KEY_AAD, strlen (DATA_KEY_AAD), sealed, len, &key_len)))
        zsys_error ("keystore %s: its data key does not open under the master key (changed without "
                    "the master key): refused", ks_where (self));
    free (sealed);
    if (key && key_len != 32) {
        zsys_error ("keystore %s: its data key is not 32 bytes: refused", ks_where (self));
        OPENSSL_cleanse (key, key_len);
        free (key);
        key = NULL;
    }
    return key;
}

int
ks_data_key_load (keystore_t *self)
{
    uint8_t *key = s_data_key (self, self->keys->master);
    int rc = key ? ks_keys_derive (self->keys, key) : -1;
    if (key)
        OPENSSL_cleanse (key, 32);
    free (key);
    return rc;
}

/* ---- rotation ------------------------------------------------------------ */

//  Re-seals blob (AAD prefix || tenant || NUL || ref) from self's master
//  key to `master`: the new blob (malloc'd, *len_p), or NULL after a log.
static uint8_t *
s_reseal (keystore_t *self, const uint8_t *master, const char *prefix, const char *tenant,
          const ks_key_rec_t *rec, size_t *len_p)
{
    size_t aad_len = 0, plain_len = 0;
    uint8_t *aad = ks_row_aad (prefix, tenant, rec->ref, &aad_len), *blob = NULL;
    uint8_t *plain = aad ? ks_open (self->keys->master, aad, aad_len, rec->private, rec->private_len,
                                    &plain_len) : NULL;
    if (plain)
        blob = ks_seal (master, aad, aad_len, plain, plain_len, len_p);
    else
    if (aad)
        zsys_error ("keystore %s: %s %s of tenant %s does not open under the master key: not rotated",
                    ks_where (self), prefix, rec->ref, tenant);
    if (plain)
        OPENSSL_cleanse (plain, plain_len);
    free (plain);
    free (aad);
    return blob;
}

//  One sealed key (objects false) or object row of tenant re-sealed under
//  master with its new MAC, once its MAC verifies as it is (a rotation
//  never vouches for a row changed without the master key).  0 or -1.
static int
s_rotate_row (keystore_t *self, const char *tenant, bool objects, const ks_key_rec_t *rec,
              const uint8_t *master)
{
    int (*mac_of) (const uint8_t [32], const char *, const char *, const uint8_t *, size_t,
                   const uint8_t *, size_t, uint8_t [ROW_MAC_LEN]) = objects ? row_mac_object : row_mac_key;
    uint8_t mac [ROW_MAC_LEN];
    if (mac_of (self->keys->mac_key, tenant, rec->ref, rec->info, rec->info_len, rec->private,
                rec->private_len, mac) != 0
    ||  !row_mac_equal (mac, rec->mac, rec->mac_len)) {
        zsys_error ("keystore %s: %s %s of tenant %s: row does not verify (changed without the master "
                    "key): not rotated", ks_where (self), objects ? "object" : "key", rec->ref, tenant);
        return -1;
    }
    size_t len = 0;
    uint8_t *blob = s_reseal (self, master, objects ? OBJ_AAD_PREFIX : KEY_AAD_PREFIX, tenant, rec, &len);
    ks_key_rec_t out = { .ref = rec->ref, .info = rec->info, .info_len = rec->info_len,
                         .private = blob, .private_len = len, .mac = mac, .mac_len = ROW_MAC_LEN };
    int rc = blob && mac_of (self->keys->mac_key, tenant, rec->ref, rec->info, rec->info_len, blob, len,
                             mac) == 0 ? 0 : -1;
    if (rc == 0)
        rc = objects ? self->be->object_put (self->store, tenant, &out)
                     : self->be->key_reseal (self->store, tenant, rec->ref, blob, len, mac) == 1 ? 0 : -1;
    free (blob);                        //  ciphertext: no wipe needed
    return rc;
}

//  Every sealed key or object row of tenant re-sealed (s_rotate_row).
static int
s_rotate_rows (keystore_t *self, const char *tenant, bool objects, const uint8_t *master)
{
    ks_key_rec_t *recs = NULL;
    size_t n = 0;
    int rc = objects ? self->be->object_list (self->store, tenant, &recs, &n)
                     : self->be->key_list (self->store, tenant, &recs, &n);
    for (size_t i = 0; rc == 0 && i < n; i++)
        if (recs [i].private)
            rc = s_rotate_row (self, tenant, objects, &recs [i], master);
    for (size_t i = 0; i < n; i++)
        ks_key_rec_free (&recs [i]);
    free (recs);
    return rc;
}

//  The data key and the check value under master.  The keystore's
//  identity (meta identity, schema 7) stays: the state record, the counter
//  file and the change epochs are bound to it, not to the key.
static int
s_rotate_meta (keystore_t *self, const uint8_t *master)
{
    size_t len = 0;
    uint8_t *key = s_data_key (self, self->keys->master);
    uint8_t *check = key ? ks_seal (master, CHECK_AAD, strlen (CHECK_AAD), (const uint8_t *) CHECK_PLAINTEXT,
                                    strlen (CHECK_PLAINTEXT), &len) : NULL;
    int rc = check && ks_data_key_put (self, master, key) == 0
                   && self->be->meta_put (self->store, "master_check", check, len) == 0 ? 0 : -1;
    if (key)
        OPENSSL_cleanse (key, 32);
    free (key);
    free (check);
    return rc;
}

int
ks_master_current (keystore_t *self)
{
    uint8_t *value = NULL, *plain = NULL;
    size_t len = 0, plain_len = 0;
    int got = self->be->meta_get (self->store, "master_check", &value, &len);
    if (got == 1)
        plain = ks_open (self->keys->master, CHECK_AAD, strlen (CHECK_AAD), value, len, &plain_len);
    free (value);
    free (plain);                       //  a fixed string: nothing to wipe
    if (got == 1 && !plain)
        zsys_error ("keystore %s: the master key was rotated (this process holds the old one): write "
                    "refused; restart with the new key", ks_where (self));
    return got == 1 && plain ? 0 : -1;
}

int
keystore_master_rotate (keystore_t *self, const uint8_t new_master [KEYSTORE_MASTER_KEY_LEN])
{
    uint64_t schema = 0, counter = 0, file = 0;
    uint8_t old [32], rows [32];
    if (!self || !new_master || self->be->begin (self->store) != 0)
        return -1;
    char **names = self->be->tenant_list (self->store);
    int rc = names && ks_state_get (self, &schema, &counter, old) == 1 ? 0 : -1;
    //  No tenant's change epoch moves: what the rows say is unchanged, so
    //  running brokers keep the keys they hold (cryptoserver-keystore(5)).
    for (size_t i = 0; rc == 0 && names [i]; i++)
        rc = s_rotate_rows (self, names [i], false, new_master) == 0
          && s_rotate_rows (self, names [i], true, new_master) == 0 ? 0 : -1;
    //  The state record vouches for the rows as they now are, at the counter
    //  it had (or the file's, if ahead); ks_end raises it by one.
    rc = rc == 0 && ks_counter_base (self, &file) == 0 && s_rotate_meta (self, new_master) == 0
      && ks_digest_compute (self, rows) == 0 ? 0 : -1;
    memset (self->delta, 0, sizeof self->delta);
    if (rc == 0)
        rc = ks_state_put (self, schema, counter > file ? counter : file, rows);
    for (size_t i = 0; names && names [i]; i++)
        free (names [i]);
    free (names);
    //  ks_end checks that this process holds the current key: the new one.
    uint8_t before [KEYSTORE_MASTER_KEY_LEN];
    memcpy (before, self->keys->master, sizeof before);
    memcpy (self->keys->master, new_master, KEYSTORE_MASTER_KEY_LEN);
    if (ks_end (self, rc == 0) != 0 || rc != 0) {
        memcpy (self->keys->master, before, sizeof before);
        OPENSSL_cleanse (before, sizeof before);
        zsys_error ("keystore %s: master key not rotated (rolled back)", ks_where (self));
        return -1;
    }
    OPENSSL_cleanse (before, sizeof before);
    zsys_notice ("keystore %s: master key rotated by the operator; its counter is %" PRIu64 " now",
                 ks_where (self), self->counter);
    return 0;
}
