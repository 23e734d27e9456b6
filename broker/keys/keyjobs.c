/*  keyjobs.c — key-management jobs on keystore rows (keyjobs.h): generation,
 *  import and descriptions of new keys, set, copy and destroy of stored
 *  ones.  Their templates go through keyattrs.c, under the one table of
 *  attribute rules the module follows too (common/cs_attr_rules.h).  */
#include <string.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/param_build.h>
#include <openssl/x509.h>
#include <czmq.h>
#include "cs_util.h"
#include "drv_keys.h"
#include "key_info.h"
#include "keyattrs.h"
#include "keyjobs.h"
#include "secretkeys.h"

/* ---- generation --------------------------------------------------------- */

CK_RV
keyjobs_keygen (const Cs__GenerateKeyPairJob *job, const keyjobs_rsa_range_t *rsa, cs_keygen_t *gen,
                CK_KEY_TYPE *key_type_p)
{
    memset (gen, 0, sizeof *gen);
    gen->mechanism = job->mechanism;
    switch (job->mechanism) {
        case CKM_RSA_PKCS_KEY_PAIR_GEN:
            if (job->modulus_bits == 0)
                return CKR_TEMPLATE_INCOMPLETE;
            if (!cs_mech_rsa_gen_ok (job->modulus_bits, rsa->policy_min, rsa->board_min, rsa->board_max))
                return CKR_KEY_SIZE_RANGE;
            if (job->public_exponent.len > 8)
                return CKR_ATTRIBUTE_VALUE_INVALID;
            gen->modulus_bits = job->modulus_bits;
            gen->public_exponent = job->public_exponent.len ? job->public_exponent.data : NULL;
            gen->public_exponent_len = job->public_exponent.len;
            *key_type_p = CKK_RSA;
            return CKR_OK;
        case CKM_EC_KEY_PAIR_GEN:
        case CKM_EC_EDWARDS_KEY_PAIR_GEN:
        case CKM_EC_MONTGOMERY_KEY_PAIR_GEN: {
            if (job->ec_params.len == 0)
                return CKR_TEMPLATE_INCOMPLETE;
            const char *curve = drv_curve_name (job->ec_params.data, job->ec_params.len);
            if (!curve || drv_curve_gen_mechanism (curve) != job->mechanism)
                return CKR_DOMAIN_PARAMS_INVALID;
            gen->ec_params = job->ec_params.data;
            gen->ec_params_len = job->ec_params.len;
            *key_type_p = job->mechanism == CKM_EC_EDWARDS_KEY_PAIR_GEN ? CKK_EC_EDWARDS
                        : job->mechanism == CKM_EC_MONTGOMERY_KEY_PAIR_GEN ? CKK_EC_MONTGOMERY : CKK_EC;
            return CKR_OK;
        }
        case CKM_ML_DSA_KEY_PAIR_GEN:
        case CKM_ML_KEM_KEY_PAIR_GEN:
            /*  PKCS#11 3.2: CKA_PARAMETER_SET of the public template is required;
                one that is no CKP_* of the mechanism is CKR_ATTRIBUTE_VALUE_INVALID
                (the driver answers the same, cs_driver.h).  */
            if (job->parameter_set == 0)
                return CKR_TEMPLATE_INCOMPLETE;
            if (job->parameter_set > 3)
                return CKR_ATTRIBUTE_VALUE_INVALID;
            gen->parameter_set = job->parameter_set;
            *key_type_p = job->mechanism == CKM_ML_DSA_KEY_PAIR_GEN ? CKK_ML_DSA : CKK_ML_KEM;
            return CKR_OK;
        default:
            return CKR_MECHANISM_INVALID;
    }
}

bool
keyjobs_default_exponent (const Cs__GenerateKeyPairJob *job)
{
    ProtobufCBinaryData e = keyattrs_strip (job->public_exponent);
    static const uint8_t f4 [] = { 0x01, 0x00, 0x01 };
    return job->public_exponent.len == 0 || (e.len == 3 && memcmp (e.data, f4, 3) == 0);
}

/*  The templates and rules on a new pair's KeyInfo (info, taken: freed on
 *  failure); as keyjobs_info_new.  */
static CK_RV
s_info_finish (Cs__KeyInfo *info, const char *home, bool generated, bool token, bool import,
               Cs__Attribute **public_template, size_t n_public,
               Cs__Attribute **private_template, size_t n_private, Cs__KeyInfo **info_p)
{
    keyattrs_limit_reset ();
    if (!info)
        return CKR_ATTRIBUTE_VALUE_INVALID;
    CK_RV rv = keyattrs_usage_defaults (info, public_template, n_public, private_template, n_private);
    if (rv == CKR_OK)
        rv = keyattrs_apply_all (info, false, public_template, n_public, KEYATTRS_CREATE, token, import);
    if (rv == CKR_OK)
        rv = keyattrs_apply_all (info, true, private_template, n_private, KEYATTRS_CREATE, token, import);
    if (rv == CKR_OK)
        rv = keyattrs_usage_create (info);          /* docs/CONTRACTS.md "Usage separation" */
    if (home && strncmp (home, "board:", 6) == 0)
        info->has_private = true;       /* the private half lives on the board */
    if (rv == CKR_OK && info->has_private)
        rv = keyattrs_origin (info, generated);
    if (rv == CKR_OK)
        rv = keyattrs_limits (info);
    if (rv != CKR_OK) {
        cs__key_info__free_unpacked (info, NULL);
        info = NULL;
    }
    *info_p = info;
    return rv;
}

CK_RV
keyjobs_info_new (EVP_PKEY *pkey, const char *ref, const char *home, bool generated,
                  bool token, bool import,
                  Cs__Attribute **public_template, size_t n_public,
                  Cs__Attribute **private_template, size_t n_private,
                  Cs__KeyInfo **info_p)
{
    key_info_params_t params = { ref, NULL, NULL, 0, home, generated };
    return s_info_finish (key_info_from_pkey (pkey, &params), home, generated, token, import,
                          public_template, n_public, private_template, n_private, info_p);
}

CK_RV
keyjobs_info_new_pq (CK_KEY_TYPE key_type, CK_ULONG parameter_set, const unsigned char *pub, size_t pub_len,
                     const char *home, bool token,
                     Cs__Attribute **public_template, size_t n_public,
                     Cs__Attribute **private_template, size_t n_private,
                     Cs__KeyInfo **info_p)
{
    key_info_params_t params = { NULL, NULL, NULL, 0, home, true };
    return s_info_finish (key_info_from_pq (key_type, parameter_set, pub, pub_len, &params), home, true, token,
                          false, public_template, n_public, private_template, n_private, info_p);
}

/*  Unwraps a DER OCTET STRING (CKA_EC_POINT) into *data_p and *len_p.  */
static int
s_octet_string (const unsigned char *der, size_t len, const unsigned char **data_p, size_t *len_p)
{
    const unsigned char *p = der;
    ASN1_OCTET_STRING *os = d2i_ASN1_OCTET_STRING (NULL, &p, (long) len);
    if (!os)
        return -1;
    size_t head = (size_t) (p - der) - (size_t) ASN1_STRING_length (os);
    *data_p = der + head;
    *len_p = (size_t) ASN1_STRING_length (os);
    ASN1_OCTET_STRING_free (os);
    return 0;
}

EVP_PKEY *
keyjobs_pkey_from_board_key (const cs_key_info_t *key)
{
    EVP_PKEY *pkey = NULL;
    const unsigned char *point = NULL;
    size_t point_len = 0;
    if (key->key_type == CKK_EC_EDWARDS || key->key_type == CKK_EC_MONTGOMERY)
        return s_octet_string (key->ec_point, key->ec_point_len, &point, &point_len) ? NULL
             : EVP_PKEY_new_raw_public_key (drv_raw_pkey_type (drv_curve_name (key->ec_params,
                                                                               key->ec_params_len)),
                                            NULL, point, point_len);
    OSSL_PARAM_BLD *bld = OSSL_PARAM_BLD_new ();
    BIGNUM *n = NULL, *e = NULL;
    const char *curve = NULL;
    bool ok = bld != NULL;
    if (ok && key->key_type == CKK_RSA) {
        n = BN_bin2bn (key->modulus, (int) key->modulus_len, NULL);
        e = BN_bin2bn (key->public_exponent, (int) key->public_exponent_len, NULL);
        ok = n && e && OSSL_PARAM_BLD_push_BN (bld, OSSL_PKEY_PARAM_RSA_N, n)
          && OSSL_PARAM_BLD_push_BN (bld, OSSL_PKEY_PARAM_RSA_E, e);
    }
    else
    if (ok && key->key_type == CKK_EC) {
        curve = drv_curve_name (key->ec_params, key->ec_params_len);
        ok = curve && !s_octet_string (key->ec_point, key->ec_point_len, &point, &point_len)
          && OSSL_PARAM_BLD_push_utf8_string (bld, OSSL_PKEY_PARAM_GROUP_NAME, curve, 0)
          && OSSL_PARAM_BLD_push_octet_string (bld, OSSL_PKEY_PARAM_PUB_KEY, point, point_len);
    }
    else
        ok = false;
    OSSL_PARAM *params = ok ? OSSL_PARAM_BLD_to_param (bld) : NULL;
    EVP_PKEY_CTX *ctx = params ? EVP_PKEY_CTX_new_from_name (NULL, key->key_type == CKK_RSA
                                                              ? "RSA" : "EC", NULL) : NULL;
    if (ctx && EVP_PKEY_fromdata_init (ctx) > 0)
        EVP_PKEY_fromdata (ctx, &pkey, EVP_PKEY_PUBLIC_KEY, params);
    EVP_PKEY_CTX_free (ctx);
    OSSL_PARAM_free (params);
    OSSL_PARAM_BLD_free (bld);
    BN_free (n);
    BN_free (e);
    ERR_clear_error ();
    return pkey;
}

/* ---- import, set, copy, destroy ---------------------------------------- */

/*  The CKA_CLASS a template names, or fallback.  */
static uint64_t
s_template_class (Cs__Attribute **attrs, size_t n, uint64_t fallback)
{
    for (size_t i = 0; i < n; i++)
        if (attrs [i]->type == CKA_CLASS && attrs [i]->value_case == CS__ATTRIBUTE__VALUE_NUMBER)
            return attrs [i]->number;
    return fallback;
}

CK_RV
keyjobs_import (keystore_t *ks, const char *tenant, const Cs__ImportKeyJob *job, Cs__KeyInfo **info_p)
{
    bool priv = job->private_pkcs8.len > 0;
    const unsigned char *p = job->public_spki.data;
    EVP_PKEY *pkey = priv ? cs_pkey_from_pkcs8 (job->private_pkcs8.data, job->private_pkcs8.len)
                          : d2i_PUBKEY (NULL, &p, (long) job->public_spki.len);
    Cs__KeyInfo *info = NULL;
    CK_RV rv = CKR_OK;
    *info_p = NULL;
    keyattrs_limit_reset ();
    ERR_clear_error ();
    if (!pkey)
        return CKR_ATTRIBUTE_VALUE_INVALID;
    if (s_template_class (job->template_, job->n_template_, priv ? CKO_PRIVATE_KEY : CKO_PUBLIC_KEY)
        != (priv ? CKO_PRIVATE_KEY : CKO_PUBLIC_KEY))
        rv = CKR_TEMPLATE_INCONSISTENT;
    if (rv == CKR_OK)
        rv = keyjobs_info_new (pkey, NULL, NULL, false, true, true,
                               priv ? NULL : job->template_, priv ? 0 : job->n_template_,
                               priv ? job->template_ : NULL, priv ? job->n_template_ : 0, &info);
    if (rv == CKR_OK && !priv)
        info->has_private = false;
    if (rv == CKR_OK && keystore_key_put (ks, tenant, info, priv ? job->private_pkcs8.data : NULL,
                                          priv ? job->private_pkcs8.len : 0))
        rv = CKR_DEVICE_ERROR;
    EVP_PKEY_free (pkey);
    if (rv != CKR_OK && info)
        cs__key_info__free_unpacked (info, NULL);
    else
        *info_p = info;
    return rv;
}

/*  Loads a key of the tenant with or without its material; a ref the
 *  tenant does not have is CKR_OBJECT_HANDLE_INVALID, a row that does not
 *  verify CKR_DEVICE_ERROR (cryptoserver-keystore(5)).  */
static CK_RV
s_load (keystore_t *ks, const char *tenant, const char *ref, uint64_t object, Cs__KeyInfo **info_p,
        uint8_t **pkcs8_p, size_t *len_p)
{
    if (object != CKO_PRIVATE_KEY && object != CKO_PUBLIC_KEY && object != CKO_SECRET_KEY)
        return CKR_OBJECT_HANDLE_INVALID;
    int got = keystore_key_get (ks, tenant, ref, info_p, pkcs8_p, len_p);
    if (got)
        return got == KEYSTORE_DAMAGED || got == KEYSTORE_UNAVAILABLE ? CKR_DEVICE_ERROR
                                                                       : CKR_OBJECT_HANDLE_INVALID;
    bool priv = object != CKO_PUBLIC_KEY;       /* a secret key's object is its "private" side */
    if (secretkeys_type ((*info_p)->key_type) != (object == CKO_SECRET_KEY)
    ||  !(priv ? (*info_p)->has_private : (*info_p)->has_public)) {
        cs__key_info__free_unpacked (*info_p, NULL);
        *info_p = NULL;
        if (pkcs8_p && *pkcs8_p) {
            OPENSSL_cleanse (*pkcs8_p, *len_p);
            free (*pkcs8_p);
            *pkcs8_p = NULL;
        }
        return CKR_OBJECT_HANDLE_INVALID;
    }
    return CKR_OK;
}

CK_RV
keyjobs_set (keystore_t *ks, const char *tenant, const Cs__SetKeyAttributesJob *job,
             Cs__KeyInfo **info_p)
{
    bool priv = job->object != CKO_PUBLIC_KEY;
    Cs__KeyInfo *info = NULL;
    CK_RV rv = s_load (ks, tenant, job->ref, job->object, &info, NULL, NULL);
    *info_p = NULL;
    keyattrs_limit_reset ();
    if (rv != CKR_OK)
        return rv;
    if (!keyattrs_flag (info, priv, CKA_MODIFIABLE, true))
        rv = CKR_ACTION_PROHIBITED;
    unsigned roles = keyattrs_roles (info);
    if (rv == CKR_OK)
        rv = keyattrs_apply_all (info, priv, job->attributes, job->n_attributes, KEYATTRS_SET, true, false);
    if (rv == CKR_OK)
        rv = keyattrs_usage_change (roles, info);   /* docs/CONTRACTS.md "Usage separation" */
    if (rv == CKR_OK)
        rv = keyattrs_follow (info);
    if (rv == CKR_OK)
        rv = keyattrs_limits (info);
    if (rv == CKR_OK && keystore_key_update (ks, tenant, info))
        rv = CKR_DEVICE_ERROR;
    if (rv == CKR_OK)
        *info_p = info;
    else
        cs__key_info__free_unpacked (info, NULL);
    return rv;
}

CK_RV
keyjobs_copy (keystore_t *ks, const char *tenant, const Cs__CopyKeyJob *job, Cs__KeyInfo **info_p)
{
    bool priv = job->object != CKO_PUBLIC_KEY;
    Cs__KeyInfo *info = NULL;
    uint8_t *pkcs8 = NULL;
    size_t len = 0;
    char ref [36];
    CK_RV rv = s_load (ks, tenant, job->ref, job->object, &info, &pkcs8, &len);
    *info_p = NULL;
    keyattrs_limit_reset ();
    if (rv != CKR_OK)
        return rv;
    if (!keyattrs_flag (info, priv, CKA_COPYABLE, true) || strcmp (info->home, "keystore"))
        rv = CKR_ACTION_PROHIBITED;
    if (rv == CKR_OK && !priv) {            /* a copy of the public object alone */
        info->has_private = false;
        OPENSSL_cleanse (pkcs8, len);
        free (pkcs8);
        pkcs8 = NULL;
        len = 0;
    }
    keystore_ref_new (ref);
    if (rv == CKR_OK)
        rv = keyattrs_string_take (&info->ref, strdup (ref));
    unsigned roles = keyattrs_roles (info);
    if (rv == CKR_OK)
        rv = keyattrs_apply_all (info, priv, job->attributes, job->n_attributes, KEYATTRS_COPY, true, false);
    if (rv == CKR_OK)
        rv = keyattrs_usage_change (roles, info);   /* docs/CONTRACTS.md "Usage separation" */
    if (rv == CKR_OK)
        rv = keyattrs_follow (info);
    if (rv == CKR_OK)
        rv = keyattrs_limits (info);
    if (rv == CKR_OK && keystore_key_put (ks, tenant, info, pkcs8, len))
        rv = CKR_DEVICE_ERROR;
    if (pkcs8) {
        OPENSSL_cleanse (pkcs8, len);
        free (pkcs8);
    }
    if (rv == CKR_OK)
        *info_p = info;
    else
        cs__key_info__free_unpacked (info, NULL);
    return rv;
}

/*  Drops the private half: the row is stored again without its material.  */
static CK_RV
s_drop_private (keystore_t *ks, const char *tenant, Cs__KeyInfo *info)
{
    info->has_private = false;
    if (keystore_key_delete (ks, tenant, info->ref) || keystore_key_put (ks, tenant, info, NULL, 0))
        return CKR_DEVICE_ERROR;
    return CKR_OK;
}

CK_RV
keyjobs_destroy (keystore_t *ks, const char *tenant, const Cs__DestroyKeyJob *job,
                 Cs__KeyInfo **info_p, char **resident_board_p)
{
    bool priv = job->object != CKO_PUBLIC_KEY;
    Cs__KeyInfo *info = NULL;
    CK_RV rv = s_load (ks, tenant, job->ref, job->object, &info, NULL, NULL);
    *info_p = NULL;
    *resident_board_p = NULL;
    if (rv != CKR_OK)
        return rv;
    bool other = priv ? info->has_public : info->has_private;
    bool on_board = priv && strncmp (info->home, "board:", 6) == 0;
    if (!keyattrs_flag (info, priv, CKA_DESTROYABLE, true))
        rv = CKR_ACTION_PROHIBITED;
    else
    if (!other)
        rv = keystore_key_delete (ks, tenant, info->ref) ? CKR_DEVICE_ERROR : CKR_OK;
    else
    if (priv)
        rv = s_drop_private (ks, tenant, info);
    else {
        info->has_public = false;
        rv = keystore_key_update (ks, tenant, info) ? CKR_DEVICE_ERROR : CKR_OK;
    }
    if (rv == CKR_OK && on_board)
        *resident_board_p = strdup (info->home + 6);
    if (rv == CKR_OK && other)
        *info_p = info;
    else
        cs__key_info__free_unpacked (info, NULL);
    return rv;
}

int
keyjobs_resident_id (const char *ref, unsigned char id [16])
{
    if (!ref || strncmp (ref, "ks:", 3) || strlen (ref) != 35)
        return -1;
    return cs_hex_decode (ref + 3, id, 16) == 16 ? 0 : -1;
}
