/*  drv_evp.c — sign, decrypt and derive with an OpenSSL EVP_PKEY on the
 *  broker's cores (drv_evp.h).  */
#include <string.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/rsa.h>
#include "cs_keyfacts.h"
#include "cryptoserver/pkcs11v.h"
#include "cs_mech.h"
#include "drv_evp.h"
#include "drv_pad.h"

#define S_BLOCK_MAX 1024        /* bytes: an RSA-8192 block */

/*  Sets PSS parameters: the hash of the digest, MGF1 hash and salt length.  */
static CK_RV
s_set_pss (EVP_PKEY_CTX *ctx, const cs_drv_mech_t *mech, size_t in_len)
{
    const EVP_MD *md = cs_mech_md (mech->hash);
    const EVP_MD *mgf1 = cs_mech_mgf_md (mech->mgf);
    if (!md || !mgf1 || mech->salt_len > 1024)
        return CKR_MECHANISM_PARAM_INVALID;
    if (in_len != (size_t) EVP_MD_get_size (md))
        return CKR_DATA_LEN_RANGE;
    return EVP_PKEY_CTX_set_rsa_padding (ctx, RSA_PKCS1_PSS_PADDING) > 0
        && EVP_PKEY_CTX_set_signature_md (ctx, md) > 0
        && EVP_PKEY_CTX_set_rsa_mgf1_md (ctx, mgf1) > 0
        && EVP_PKEY_CTX_set_rsa_pss_saltlen (ctx, (int) mech->salt_len) > 0
           ? CKR_OK : CKR_MECHANISM_PARAM_INVALID;
}

/*  Sets OAEP parameters: hash, MGF1 hash and label (copied into ctx).  */
static CK_RV
s_set_oaep (EVP_PKEY_CTX *ctx, const cs_drv_mech_t *mech)
{
    const EVP_MD *md = cs_mech_md (mech->hash);
    const EVP_MD *mgf1 = cs_mech_mgf_md (mech->mgf);
    if (!md || !mgf1)
        return CKR_MECHANISM_PARAM_INVALID;
    unsigned char *label = mech->label_len ? OPENSSL_memdup (mech->label, mech->label_len) : NULL;
    if (EVP_PKEY_CTX_set_rsa_padding (ctx, RSA_PKCS1_OAEP_PADDING) <= 0
    ||  EVP_PKEY_CTX_set_rsa_oaep_md (ctx, md) <= 0
    ||  EVP_PKEY_CTX_set_rsa_mgf1_md (ctx, mgf1) <= 0
    ||  (label && EVP_PKEY_CTX_set0_rsa_oaep_label (ctx, label, (int) mech->label_len) <= 0)) {
        OPENSSL_free (label);
        return CKR_MECHANISM_PARAM_INVALID;
    }
    return CKR_OK;
}

/*  RSA signatures: PKCS#1 v1.5 over the given DigestInfo, PSS, raw.  */
static CK_RV
s_rsa_sign (EVP_PKEY *pkey, const cs_drv_mech_t *mech, const unsigned char *in, size_t in_len,
            unsigned char *out, size_t *out_len)
{
    size_t k = (size_t) EVP_PKEY_get_size (pkey);
    unsigned char block [S_BLOCK_MAX];
    CK_RV rv = CKR_OK;
    if (*out_len < k)
        return CKR_BUFFER_TOO_SMALL;
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new (pkey, NULL);
    if (!ctx || EVP_PKEY_sign_init (ctx) <= 0)
        rv = CKR_FUNCTION_FAILED;
    else
    if (mech->type == CKM_RSA_PKCS)
        rv = in_len + 11 > k ? CKR_DATA_LEN_RANGE
           : EVP_PKEY_CTX_set_rsa_padding (ctx, RSA_PKCS1_PADDING) > 0 ? CKR_OK : CKR_FUNCTION_FAILED;
    else
    if (mech->type == CKM_RSA_PKCS_PSS)
        rv = s_set_pss (ctx, mech, in_len);
    else {                                  /* CKM_RSA_X_509: left-pad to k bytes */
        rv = in_len > k || k > sizeof block ? CKR_DATA_LEN_RANGE
           : EVP_PKEY_CTX_set_rsa_padding (ctx, RSA_NO_PADDING) > 0 ? CKR_OK : CKR_FUNCTION_FAILED;
        if (rv == CKR_OK) {
            memset (block, 0, k - in_len);
            memcpy (block + k - in_len, in, in_len);
            in = block;
            in_len = k;
        }
    }
    if (rv == CKR_OK && EVP_PKEY_sign (ctx, out, out_len, in, in_len) <= 0)
        rv = mech->type == CKM_RSA_X_509 ? CKR_DATA_INVALID : CKR_FUNCTION_FAILED;
    EVP_PKEY_CTX_free (ctx);
    OPENSSL_cleanse (block, sizeof block);
    return rv;
}

/*  ECDSA over a digest; the DER signature becomes raw r||s.  */
static CK_RV
s_ecdsa_sign (EVP_PKEY *pkey, const unsigned char *in, size_t in_len,
              unsigned char *out, size_t *out_len)
{
    unsigned char der [160];
    size_t der_len = sizeof der;
    size_t half = ((size_t) EVP_PKEY_get_bits (pkey) + 7) / 8;
    CK_RV rv = CKR_OK;
    if (in_len == 0 || in_len > 64)
        return CKR_DATA_LEN_RANGE;
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new (pkey, NULL);
    if (!ctx || EVP_PKEY_sign_init (ctx) <= 0
    ||  EVP_PKEY_sign (ctx, der, &der_len, in, in_len) <= 0)
        rv = CKR_FUNCTION_FAILED;
    if (rv == CKR_OK)
        rv = drv_ecdsa_der_to_raw (der, der_len, half, out, out_len);
    EVP_PKEY_CTX_free (ctx);
    return rv;
}

/*  Pure Ed25519 or Ed448 over the whole message (RFC 8032 §5.1.6, §5.2.6:
 *  64 or 114 bytes), no context.  */
static CK_RV
s_eddsa_sign (EVP_PKEY *pkey, const unsigned char *in, size_t in_len,
              unsigned char *out, size_t *out_len)
{
    if (*out_len < (size_t) EVP_PKEY_get_size (pkey))
        return CKR_BUFFER_TOO_SMALL;
    EVP_MD_CTX *ctx = EVP_MD_CTX_new ();
    CK_RV rv = ctx && EVP_DigestSignInit (ctx, NULL, NULL, NULL, pkey) > 0
            && EVP_DigestSign (ctx, out, out_len, in, in_len) > 0 ? CKR_OK : CKR_FUNCTION_FAILED;
    EVP_MD_CTX_free (ctx);
    return rv;
}

CK_RV
drv_evp_sign (EVP_PKEY *pkey, const cs_drv_mech_t *mech, const unsigned char *in, size_t in_len,
              unsigned char *out, size_t *out_len)
{
    CK_KEY_TYPE type = cs_pkey_key_type (pkey);
    CK_RV rv;
    switch (mech->type) {
        case CKM_RSA_PKCS:
        case CKM_RSA_PKCS_PSS:
        case CKM_RSA_X_509:
            rv = type == CKK_RSA ? s_rsa_sign (pkey, mech, in, in_len, out, out_len)
                                 : CKR_KEY_TYPE_INCONSISTENT;
            break;
        case CKM_ECDSA:
            rv = type == CKK_EC ? s_ecdsa_sign (pkey, in, in_len, out, out_len)
                                : CKR_KEY_TYPE_INCONSISTENT;
            break;
        case CKM_EDDSA:
            rv = type == CKK_EC_EDWARDS ? s_eddsa_sign (pkey, in, in_len, out, out_len)
                                        : CKR_KEY_TYPE_INCONSISTENT;
            break;
        default:
            rv = CKR_MECHANISM_INVALID;
    }
    ERR_clear_error ();
    return rv;
}

CK_RV
drv_evp_decrypt (EVP_PKEY *pkey, const cs_drv_mech_t *mech, const unsigned char *in,
                 size_t in_len, unsigned char *out, size_t *out_len)
{
    if (mech->type != CKM_RSA_PKCS && mech->type != CKM_RSA_PKCS_OAEP && mech->type != CKM_RSA_X_509)
        return mech->type == CKM_ECDSA || mech->type == CKM_EDDSA || mech->type == CKM_RSA_PKCS_PSS
               ? CKR_KEY_FUNCTION_NOT_PERMITTED : CKR_MECHANISM_INVALID;
    if (cs_pkey_key_type (pkey) != CKK_RSA)
        return CKR_KEY_TYPE_INCONSISTENT;
    size_t k = (size_t) EVP_PKEY_get_size (pkey);
    if (in_len != k || k > S_BLOCK_MAX)
        return CKR_ENCRYPTED_DATA_LEN_RANGE;
    unsigned char buf [S_BLOCK_MAX];
    size_t len = sizeof buf;
    CK_RV rv = CKR_OK;
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new (pkey, NULL);
    if (!ctx || EVP_PKEY_decrypt_init (ctx) <= 0)
        rv = CKR_DEVICE_ERROR;
    else
    if (mech->type == CKM_RSA_PKCS_OAEP)
        rv = s_set_oaep (ctx, mech);
    else
        rv = EVP_PKEY_CTX_set_rsa_padding (ctx, mech->type == CKM_RSA_PKCS ? RSA_PKCS1_PADDING
                                           : RSA_NO_PADDING) > 0 ? CKR_OK : CKR_DEVICE_ERROR;
    if (rv == CKR_OK && EVP_PKEY_decrypt (ctx, buf, &len, in, in_len) <= 0)
        rv = CKR_ENCRYPTED_DATA_INVALID;
    if (rv == CKR_OK && len > *out_len)
        rv = CKR_BUFFER_TOO_SMALL;
    if (rv == CKR_OK) {
        memcpy (out, buf, len);
        *out_len = len;
    }
    OPENSSL_cleanse (buf, sizeof buf);
    ERR_clear_error ();
    EVP_PKEY_CTX_free (ctx);
    return rv;
}

/*  A public EC key on pkey's curve at `point`; NULL when it is malformed.  */
static EVP_PKEY *
s_ec_peer (EVP_PKEY *pkey, const unsigned char *point, size_t point_len)
{
    char group [64];
    EVP_PKEY *peer = NULL;
    OSSL_PARAM params [3];
    EVP_PKEY_CTX *ctx = NULL;
    if (!EVP_PKEY_get_utf8_string_param (pkey, OSSL_PKEY_PARAM_GROUP_NAME, group, sizeof group, NULL))
        return NULL;
    params [0] = OSSL_PARAM_construct_utf8_string (OSSL_PKEY_PARAM_GROUP_NAME, group, 0);
    params [1] = OSSL_PARAM_construct_octet_string (OSSL_PKEY_PARAM_PUB_KEY, (void *) point, point_len);
    params [2] = OSSL_PARAM_construct_end ();
    if (!(ctx = EVP_PKEY_CTX_new_from_name (NULL, "EC", NULL))
    ||  EVP_PKEY_fromdata_init (ctx) <= 0
    ||  EVP_PKEY_fromdata (ctx, &peer, EVP_PKEY_PUBLIC_KEY, params) <= 0)
        peer = NULL;
    EVP_PKEY_CTX_free (ctx);
    return peer;
}

CK_RV
drv_evp_derive (EVP_PKEY *pkey, const unsigned char *point, size_t point_len,
                unsigned char *out, size_t *out_len)
{
    CK_KEY_TYPE type = cs_pkey_key_type (pkey);
    if (type != CKK_EC && type != CKK_EC_MONTGOMERY)
        return CKR_KEY_TYPE_INCONSISTENT;
    bool montgomery = type == CKK_EC_MONTGOMERY;
    /*  X25519 and X448: the raw u-coordinate, and a secret as long (RFC 7748 §5, §6).  */
    size_t field = montgomery ? (size_t) EVP_PKEY_get_size (pkey) : ((size_t) EVP_PKEY_get_bits (pkey) + 7) / 8;
    if (!point || (montgomery ? point_len != field : point_len != 2 * field + 1 || point [0] != 0x04))
        return CKR_MECHANISM_PARAM_INVALID;
    if (*out_len < field)
        return CKR_BUFFER_TOO_SMALL;
    EVP_PKEY *peer = montgomery ? EVP_PKEY_new_raw_public_key (EVP_PKEY_get_base_id (pkey), NULL, point, point_len)
                                : s_ec_peer (pkey, point, point_len);
    EVP_PKEY_CTX *ctx = peer ? EVP_PKEY_CTX_new (pkey, NULL) : NULL;
    size_t len = *out_len;
    CK_RV rv = CKR_OK;
    if (!peer)
        rv = CKR_MECHANISM_PARAM_INVALID;
    else
    if (!ctx || EVP_PKEY_derive_init (ctx) <= 0)
        rv = CKR_DEVICE_ERROR;
    else
    if (EVP_PKEY_derive_set_peer (ctx, peer) <= 0)
        rv = CKR_MECHANISM_PARAM_INVALID;       /* not on the curve, or the point at infinity */
    else
    if (EVP_PKEY_derive (ctx, out, &len) <= 0 || len != field)
        rv = CKR_DEVICE_ERROR;
    if (rv == CKR_OK)
        *out_len = len;
    else
        OPENSSL_cleanse (out, *out_len);
    EVP_PKEY_CTX_free (ctx);
    EVP_PKEY_free (peer);
    ERR_clear_error ();
    return rv;
}
