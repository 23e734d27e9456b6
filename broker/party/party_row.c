/*  party_row.c — the row a party seals for its share of a new shared key
 *  (docs/SHARED-KEYS.md "Over the network", "The row"): KeyInfo of (N, e)
 *  with the generation's templates applied under the tenant's rules, home
 *  "shared", CKA_CS_SHARED TRUE, the share record as its sealed private
 *  material, and the generation's idempotency id recorded with it
 *  (party_idem.c).  Below party_gen.c, which calls it at the commit.
 */
#include <czmq.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/param_build.h>
#include <openssl/core_names.h>
#include "party_int.h"
#include "key_info.h"
#include "keyattrs.h"
#include "cryptoserver/pkcs11v.h"

/*  The public key (N, e) of share as an EVP_PKEY; caller frees.  */
static EVP_PKEY *
s_public_pkey (const cs_sk_share_t *share)
{
    unsigned char n [PARTY_MAX_N];
    size_t n_len = 0;
    unsigned long e = 0;
    EVP_PKEY *pkey = NULL;
    if (cs_sk_share_public (share, n, sizeof n, &n_len, &e))
        return NULL;
    OSSL_PARAM_BLD *bld = OSSL_PARAM_BLD_new ();
    BIGNUM *bn = BN_bin2bn (n, (int) n_len, NULL), *be = BN_new ();
    OSSL_PARAM *params = NULL;
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_name (NULL, "RSA", NULL);
    if (bld && bn && be && ctx && BN_set_word (be, e)
    &&  OSSL_PARAM_BLD_push_BN (bld, OSSL_PKEY_PARAM_RSA_N, bn)
    &&  OSSL_PARAM_BLD_push_BN (bld, OSSL_PKEY_PARAM_RSA_E, be)
    &&  (params = OSSL_PARAM_BLD_to_param (bld)) && EVP_PKEY_fromdata_init (ctx) > 0)
        (void) EVP_PKEY_fromdata (ctx, &pkey, EVP_PKEY_PUBLIC_KEY, params);
    OSSL_PARAM_free (params);
    OSSL_PARAM_BLD_free (bld);
    BN_free (bn);
    BN_free (be);
    EVP_PKEY_CTX_free (ctx);
    return pkey;
}

/*  The row's KeyInfo of (N, e): with the templates of gen->templ applied
 *  under the tenant's rules (keyjobs_info_new, docs/CONTRACTS.md "Attribute
 *  rules", "Usage separation"; the label of the session when the template
 *  has none), else the plain description of cryptoserver-admin's keys (no
 *  decryption).  NULL when a template is refused or out of memory.  */
static Cs__KeyInfo *
s_row_info (party_t *self, EVP_PKEY *pkey)
{
    party_gen_t *gen = self->gen;
    if (!gen->templ) {
        key_info_params_t params = { gen->ref, gen->label, NULL, 0, "shared", true };
        Cs__KeyInfo *info = key_info_from_pkey (pkey, &params);
        if (info)
            info->can_decrypt = false;
        return info;
    }
    Cs__GenerateKeyPairJob *job = cs__generate_key_pair_job__unpack (NULL, gen->templ_len, gen->templ);
    Cs__KeyInfo *info = NULL;
    keyattrs_usage_set ((cs_usage_policy_t) broker_config_usage (self->config, gen->tenant));
    CK_RV rv = job ? keyjobs_info_new (pkey, gen->ref, "shared", true, true, false, job->public_template,
                                       job->n_public_template, job->private_template, job->n_private_template,
                                       &info) : CKR_TEMPLATE_INCONSISTENT;
    if (rv != CKR_OK)
        zsys_error ("party: the template of \"%s\" for tenant %s is refused: 0x%lx", gen->label, gen->tenant,
                    (unsigned long) rv);
    if (info && !*info->label && keyattrs_string_take (&info->label, strdup (gen->label)) != CKR_OK) {
        cs__key_info__free_unpacked (info, NULL);
        info = NULL;
    }
    if (job)
        cs__generate_key_pair_job__free_unpacked (job, NULL);
    return info;
}

/*  The row itself (party_idem_put's `put`).  */
static int
s_put (party_t *self)
{
    party_gen_t *gen = self->gen;
    EVP_PKEY *pkey = s_public_pkey (gen->share);
    Cs__KeyInfo *info = pkey ? s_row_info (self, pkey) : NULL;
    unsigned char *rec = NULL;
    size_t rec_len = 0;
    int rc = -1;
    Cs__Attribute *attr = calloc (1, sizeof *attr);
    Cs__Attribute **list = info ? realloc (info->private_attributes,
                                           (info->n_private_attributes + 1) * sizeof *list) : NULL;
    if (list && attr) {
        info->private_attributes = list;
        cs__attribute__init (attr);
        attr->type = CKA_CS_SHARED;
        attr->value_case = CS__ATTRIBUTE__VALUE_FLAG;
        attr->flag = true;
        list [info->n_private_attributes++] = attr;
        attr = NULL;
        info->has_private = info->has_public = true;
        if (cs_sk_share_encode (gen->share, &rec, &rec_len) == 0)
            rc = keystore_key_put (self->ks, gen->tenant, info, rec, rec_len);
    }
    free (attr);
    if (rec) {
        OPENSSL_cleanse (rec, rec_len);
        free (rec);
    }
    if (info)
        cs__key_info__free_unpacked (info, NULL);
    EVP_PKEY_free (pkey);
    return rc;
}

int
party_row_store (party_t *self)
{
    party_gen_t *gen = self->gen;
    return party_idem_put (self, gen->tenant, gen->idem, gen->idem_len, gen->ref, s_put);
}
