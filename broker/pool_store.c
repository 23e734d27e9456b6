/*  pool_store.c — the key pool sealed in the keystore across restarts
 *  (pool_store.h).  */
#include <stdlib.h>
#include <string.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <czmq.h>
#include "broker_config.h"
#include "cs_util.h"
#include "pool_store.h"

bool
pool_store_reserved (const char *tenant)
{
    return tenant && tenant [0] == '@';
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
        if (pool_room (pool, infos [i]->bits) == 0)
            ;       /* a size not kept, or full: the row stays */
        else
        if (keystore_key_get (ks, POOL_STORE_TENANT, infos [i]->ref, &info, &der, &len) || !der)
            rc = -1;
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
