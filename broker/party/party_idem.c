/*  party_idem.c — a shared generation's idempotency id (Job.idempotency_id
 *  of the module's C_GenerateKeyPair), recorded with its row in each
 *  party's own keystore (docs/SHARED-KEYS.md "Through PKCS#11",
 *  cryptoserver-keystore(5) "idempotency"), as the slow pool records it
 *  for other keys: a module that sends the job again to another of the
 *  three brokers (its failover) gets the key the first attempt made, not a
 *  second one.  Below party_gen.c, which calls it.
 */
#include <czmq.h>
#include <openssl/crypto.h>
#include "party_int.h"

int
party_idem_ref (party_t *self, const char *tenant, const uint8_t *id, size_t id_len, char ref [PARTY_REF_LEN])
{
    uint8_t *recorded = NULL;
    size_t len = 0;
    int got = keystore_idem_begin (self->ks, tenant, id, id_len, &recorded, &len);
    if (got == 0)
        (void) keystore_idem_end (self->ks, NULL, 0, NULL, NULL);     /* nothing recorded: roll back */
    if (got != 1) {
        free (recorded);
        return got == 0 ? 0 : -1;
    }
    Cs__KeyInfo *info = NULL;
    int rc = len > 0 && len < PARTY_REF_LEN && !memchr (recorded, 0, len) ? 1 : -1;
    if (rc == 1) {
        memcpy (ref, recorded, len);
        ref [len] = 0;
        if (keystore_key_get (self->ks, tenant, ref, &info, NULL, NULL) != 0 || !streq (info->home, "shared"))
            rc = 0;                         /* the row was undone (an ABORT after the commit) */
    }
    if (info)
        cs__key_info__free_unpacked (info, NULL);
    free (recorded);
    return rc;
}

int
party_idem_put (party_t *self, const char *tenant, const uint8_t *id, size_t id_len, const char *ref,
                int (*put) (party_t *self))
{
    if (!id_len)
        return put (self);
    uint8_t *recorded = NULL;
    size_t len = 0;
    int got = keystore_idem_begin (self->ks, tenant, id, id_len, &recorded, &len);
    free (recorded);
    if (got == 1) {
        zsys_warning ("party: the idempotency id of shared key %s of tenant %s names an undone key; "
                      "stored without it", ref, tenant);
        return put (self);
    }
    if (got != 0)
        return -1;
    if (put (self)) {
        (void) keystore_idem_end (self->ks, NULL, 0, NULL, NULL);
        return -1;
    }
    return keystore_idem_end (self->ks, (const uint8_t *) ref, strlen (ref), NULL, NULL) == 0 ? 0 : -1;
}
