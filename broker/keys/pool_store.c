/*  pool_store.c — the key pool sealed in the keystore across restarts
 *  (pool_store.h).  */
#include <stdlib.h>
#include <string.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <czmq.h>
#include "broker_config.h"
#include "cs_util.h"
#include "key_info.h"
#include "pool_store.h"

bool
pool_store_reserved (const char *tenant)
{
    return tenant && tenant [0] == '@';
}

/*  True when the key of a sealed row (PKCS#8 der) was issued before (its
 *  fingerprint is in the keystore's issued table, or that row does not
 *  verify): logged, and the row is deleted so that it is never restored.  */
int
pool_store_fingerprint (const uint8_t *der, size_t len, uint8_t fp [32], char hex [17])
{
    EVP_PKEY *pkey = cs_pkey_from_pkcs8 (der, len);
    int rc = pkey ? key_info_fingerprint (pkey, fp, hex) : -1;
    EVP_PKEY_free (pkey);
    if (pkey)
        return rc;
    if (EVP_Digest (der, len, fp, NULL, EVP_sha256 (), NULL) != 1)
        return -1;
    for (int i = 0; i < 8; i++)
        snprintf (hex + 2 * i, 3, "%02x", fp [i]);
    return 0;
}

static bool
s_issued_before (keystore_t *ks, const char *ref, const uint8_t *der, size_t len)
{
    uint8_t fp [32];
    char hex [17];
    int issued = pool_store_fingerprint (der, len, fp, hex) == 0 ? keystore_issued_check (ks, fp) : -1;
    if (issued == 0)
        return false;
    if (issued < 0 && issued != KEYSTORE_DAMAGED) {
        zsys_error ("pool: key %s of %s: cannot check whether it was issued: not restored", ref,
                    POOL_STORE_TENANT);
        return true;
    }
    zsys_error ("pool: key %s of %s was issued before (public key SHA-256 %s...): a replayed row or "
                "a restored backup: refused and deleted", ref, POOL_STORE_TENANT, hex);
    keystore_key_delete (ks, POOL_STORE_TENANT, ref);
    return true;
}

int
pool_store_restore (keystore_t *ks, pool_t *pool, size_t *restored_p)
{
    Cs__KeyInfo **infos = NULL;
    size_t count = 0;
    int rc = 0;
    *restored_p = 0;
    if (!keystore_tenant_exists (ks, POOL_STORE_TENANT))
        return 0;
    if (keystore_key_list (ks, POOL_STORE_TENANT, &infos, &count))
        return -1;
    for (size_t i = 0; i < count; i++) {
        Cs__KeyInfo *info = NULL;
        uint8_t *der = NULL;
        size_t len = 0;
        if (!pool_keeps (pool, infos [i]->bits))
            ;       /* a size not kept: the row stays */
        else
        if (keystore_key_get (ks, POOL_STORE_TENANT, infos [i]->ref, &info, &der, &len) || !der)
            rc = -1;
        else
        if (s_issued_before (ks, infos [i]->ref, der, len))
            ;       /* never given out twice (issue 19) */
        else
        if (pool_room (pool, infos [i]->bits) == 0)
            ;       /* full: the row stays */
        else
        /*  Durably out of the keystore before it can be given out.  */
        if (keystore_key_delete (ks, POOL_STORE_TENANT, infos [i]->ref) == 0
        &&  pool_add (pool, infos [i]->bits, der, len) == 0)
            (*restored_p)++;
        if (der) {
            OPENSSL_cleanse (der, len);
            free (der);
        }
        if (info)
            cs__key_info__free_unpacked (info, NULL);
        cs__key_info__free_unpacked (infos [i], NULL);
    }
    free (infos);
    return rc;
}

/*  Creates the reserved tenant with random PINs that nobody keeps.  */
static int
s_tenant_ensure (keystore_t *ks)
{
    unsigned char random [2][24];
    char pins [2][49];
    if (keystore_tenant_exists (ks, POOL_STORE_TENANT))
        return 0;
    if (RAND_bytes (&random [0][0], sizeof random) != 1)
        return -1;
    cs_hex_encode (random [0], sizeof random [0], pins [0]);
    cs_hex_encode (random [1], sizeof random [1], pins [1]);
    int rc = keystore_tenant_add (ks, POOL_STORE_TENANT, pins [0], 48, pins [1], 48);
    OPENSSL_cleanse (random, sizeof random);
    OPENSSL_cleanse (pins, sizeof pins);
    return rc;
}

/*  Seals one key of `bits` under a fresh ref.  */
static int
s_seal (keystore_t *ks, unsigned bits, const unsigned char *der, size_t len)
{
    char ref [36];
    Cs__KeyInfo info = CS__KEY_INFO__INIT;
    keystore_ref_new (ref);
    info.ref = ref;
    info.label = (char *) "pool";
    info.key_type = CKK_RSA;
    info.bits = bits;
    info.home = (char *) "keystore";
    info.has_private = true;
    return keystore_key_put (ks, POOL_STORE_TENANT, &info, der, len);
}

int
pool_store_seal (keystore_t *ks, pool_t *pool, size_t *sealed_p)
{
    int rc = 0;
    *sealed_p = 0;
    for (size_t i = 0; i < BROKER_POOL_SIZES; i++) {
        unsigned bits = broker_pool_bits (i);
        if (pool_ready (pool, bits) == 0)
            continue;
        if (rc == 0 && s_tenant_ensure (ks))
            rc = -1;
        unsigned char *der;
        size_t len = 0;
        while ((der = pool_take (pool, bits, &len)) != NULL) {
            if (rc == 0 && s_seal (ks, bits, der, len) == 0)
                (*sealed_p)++;
            else
                rc = -1;
            OPENSSL_cleanse (der, len);
            free (der);
        }
    }
    return rc;
}
