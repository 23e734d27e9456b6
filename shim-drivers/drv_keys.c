/*  drv_keys.c — key facts and key generation for the shim drivers
 *  (drv_keys.h), over the shared key facts of cs_keyfacts.h.  */
#include <string.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/objects.h>
#include <openssl/param_build.h>
#include <openssl/x509.h>
#include "cs_keyfacts.h"
#include "cryptoserver/pkcs11v.h"
#include "drv_keys.h"

int
drv_key_info_from_pkey (EVP_PKEY *pkey, cs_key_info_t *key)
{
    key->key_type = cs_pkey_key_type (pkey);
    key->bits = (CK_ULONG) EVP_PKEY_get_bits (pkey);
    switch (key->key_type) {
        case CKK_RSA:
            return cs_pkey_bn (pkey, OSSL_PKEY_PARAM_RSA_N, &key->modulus, &key->modulus_len)
                || cs_pkey_bn (pkey, OSSL_PKEY_PARAM_RSA_E, &key->public_exponent,
                               &key->public_exponent_len) ? -1 : 0;
        case CKK_EC:
        case CKK_EC_EDWARDS:
        case CKK_EC_MONTGOMERY: {
            /*  Ed25519, Ed448, X25519, X448: the curve's size (RFC 8032, RFC 7748).  */
            int id = EVP_PKEY_get_base_id (pkey);
            if (key->key_type != CKK_EC)
                key->bits = id == EVP_PKEY_ED448 || id == EVP_PKEY_X448 ? 448 : id == EVP_PKEY_X25519 ? 255 : 256;
            key->ec_params = cs_pkey_ec_params (pkey, &key->ec_params_len);
            key->ec_point = cs_pkey_ec_point (pkey, &key->ec_point_len);
            return key->ec_params && key->ec_point ? 0 : -1;
        }
        default:
            return -1;
    }
}

/* ---- generation -------------------------------------------------------- */

const char *
drv_curve_name (const unsigned char *ec_params, size_t len)
{
    static const unsigned char gnupg_ed25519 [] = {     /* 1.3.6.1.4.1.11591.15.1 */
        0x06, 0x09, 0x2b, 0x06, 0x01, 0x04, 0x01, 0xda, 0x47, 0x0f, 0x01 };
    char text [32] = "";
    if (!ec_params || len < 2 || len > 64)
        return NULL;
    if (ec_params [0] == 0x06) {
        if (len == sizeof gnupg_ed25519 && !memcmp (ec_params, gnupg_ed25519, len))
            return "ED25519";
        const unsigned char *p = ec_params;
        ASN1_OBJECT *oid = d2i_ASN1_OBJECT (NULL, &p, (long) len);
        int nid = oid && p == ec_params + len ? OBJ_obj2nid (oid) : NID_undef;
        ASN1_OBJECT_free (oid);
        ERR_clear_error ();
        return nid == NID_X9_62_prime256v1 ? "P-256" : nid == NID_secp384r1 ? "P-384"
             : nid == NID_secp521r1 ? "P-521" : nid == NID_ED25519 ? "ED25519"
             : nid == NID_ED448 ? "ED448" : nid == NID_X25519 ? "X25519" : nid == NID_X448 ? "X448" : NULL;
    }
    if (ec_params [0] == 0x13 && ec_params [1] == len - 2 && len - 2 < sizeof text)
        memcpy (text, ec_params + 2, len - 2);          /* DER PrintableString */
    else
    if (len < sizeof text)
        memcpy (text, ec_params, len);                  /* the bare name */
    if (!strcmp (text, "edwards25519") || !strcmp (text, "Ed25519") || !strcmp (text, "ED25519"))
        return "ED25519";
    if (!strcmp (text, "edwards448") || !strcmp (text, "Ed448") || !strcmp (text, "ED448"))
        return "ED448";
    if (!strcmp (text, "curve25519") || !strcmp (text, "X25519"))
        return "X25519";
    if (!strcmp (text, "curve448") || !strcmp (text, "X448"))
        return "X448";
    if (!strcmp (text, "prime256v1") || !strcmp (text, "secp256r1") || !strcmp (text, "P-256"))
        return "P-256";
    if (!strcmp (text, "secp384r1") || !strcmp (text, "P-384"))
        return "P-384";
    if (!strcmp (text, "secp521r1") || !strcmp (text, "P-521"))
        return "P-521";
    return NULL;
}

/*  RSA key generation with the given bits and exponent.  */
static CK_RV
s_generate_rsa (const cs_keygen_t *gen, EVP_PKEY **pkey_p)
{
    if (gen->modulus_bits < 1024 || gen->modulus_bits > 8192)
        return CKR_KEY_SIZE_RANGE;
    if (gen->public_exponent_len > 8)
        return CKR_ATTRIBUTE_VALUE_INVALID;
    BIGNUM *e = gen->public_exponent_len
              ? BN_bin2bn (gen->public_exponent, (int) gen->public_exponent_len, NULL) : BN_new ();
    if (!e)
        return CKR_HOST_MEMORY;
    if (BN_is_zero (e))
        BN_set_word (e, 65537);             /* empty = the default, 65537 */
    CK_RV rv = CKR_OK;
    if (!BN_is_odd (e) || BN_cmp (e, BN_value_one ()) <= 0)
        rv = CKR_ATTRIBUTE_VALUE_INVALID;
    EVP_PKEY_CTX *ctx = rv == CKR_OK ? EVP_PKEY_CTX_new_from_name (NULL, "RSA", NULL) : NULL;
    if (rv == CKR_OK
    &&  (!ctx || EVP_PKEY_keygen_init (ctx) <= 0
    ||   EVP_PKEY_CTX_set_rsa_keygen_bits (ctx, (int) gen->modulus_bits) <= 0
    ||   EVP_PKEY_CTX_set1_rsa_keygen_pubexp (ctx, e) <= 0
    ||   EVP_PKEY_generate (ctx, pkey_p) <= 0))
        rv = CKR_DEVICE_ERROR;
    EVP_PKEY_CTX_free (ctx);
    BN_free (e);
    return rv;
}

int
drv_raw_pkey_type (const char *curve)
{
    return !curve ? 0 : !strcmp (curve, "ED25519") ? EVP_PKEY_ED25519
         : !strcmp (curve, "ED448") ? EVP_PKEY_ED448 : !strcmp (curve, "X25519") ? EVP_PKEY_X25519
         : !strcmp (curve, "X448") ? EVP_PKEY_X448 : 0;
}

CK_MECHANISM_TYPE
drv_curve_gen_mechanism (const char *curve)
{
    int type = drv_raw_pkey_type (curve);
    return type == EVP_PKEY_ED25519 || type == EVP_PKEY_ED448 ? CKM_EC_EDWARDS_KEY_PAIR_GEN
         : type ? CKM_EC_MONTGOMERY_KEY_PAIR_GEN : CKM_EC_KEY_PAIR_GEN;
}

/*  EC (NIST curves), Ed25519/Ed448 or X25519/X448 key generation.  */
static CK_RV
s_generate_curve (const cs_keygen_t *gen, EVP_PKEY **pkey_p)
{
    const char *curve = drv_curve_name (gen->ec_params, gen->ec_params_len);
    if (!curve || drv_curve_gen_mechanism (curve) != gen->mechanism)
        return CKR_DOMAIN_PARAMS_INVALID;
    *pkey_p = drv_raw_pkey_type (curve) ? EVP_PKEY_Q_keygen (NULL, NULL, curve)
                      : EVP_PKEY_Q_keygen (NULL, NULL, "EC", curve);
    return *pkey_p ? CKR_OK : CKR_DEVICE_ERROR;
}

CK_RV
drv_evp_generate (const cs_keygen_t *gen, unsigned char **der_p, size_t *len_p)
{
    EVP_PKEY *pkey = NULL;
    CK_RV rv = gen->mechanism == CKM_RSA_PKCS_KEY_PAIR_GEN ? s_generate_rsa (gen, &pkey)
             : gen->mechanism == CKM_EC_KEY_PAIR_GEN || gen->mechanism == CKM_EC_EDWARDS_KEY_PAIR_GEN
               || gen->mechanism == CKM_EC_MONTGOMERY_KEY_PAIR_GEN
             ? s_generate_curve (gen, &pkey) : CKR_MECHANISM_INVALID;
    PKCS8_PRIV_KEY_INFO *p8 = rv == CKR_OK ? EVP_PKEY2PKCS8 (pkey) : NULL;
    unsigned char *der = NULL;
    int len = p8 ? i2d_PKCS8_PRIV_KEY_INFO (p8, &der) : -1;
    if (rv == CKR_OK && len <= 0)
        rv = CKR_DEVICE_ERROR;
    if (rv == CKR_OK && !(*der_p = malloc ((size_t) len)))
        rv = CKR_HOST_MEMORY;
    if (rv == CKR_OK) {
        memcpy (*der_p, der, (size_t) len);
        *len_p = (size_t) len;
    }
    if (der)
        OPENSSL_clear_free (der, (size_t) len);
    PKCS8_PRIV_KEY_INFO_free (p8);
    EVP_PKEY_free (pkey);
    ERR_clear_error ();
    return rv;
}
