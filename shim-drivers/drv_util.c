/*  drv_util.c — helpers shared by the shim drivers.  */
/*  RSA_padding_check_PKCS1_OAEP_mgf1 is deprecated in OpenSSL 3.0 but is the
 *  only public constant-time OAEP decoder that works on a raw block.  */
#define OPENSSL_SUPPRESS_DEPRECATED 1
#include <string.h>
#include <openssl/ecdsa.h>
#include <openssl/rsa.h>
#include <openssl/bn.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/core_names.h>
#include <openssl/objects.h>
#include <openssl/x509.h>
#include <openssl/param_build.h>
#include "drv_util.h"

#define S_BLOCK_MAX 1024        /* bytes: an RSA-8192 block */

const EVP_MD *
drv_md_from_ckm (CK_MECHANISM_TYPE hash)
{
    switch (hash) {
        case CKM_SHA_1: return EVP_sha1 ();
        case CKM_SHA224: return EVP_sha224 ();
        case CKM_SHA256: return EVP_sha256 ();
        case CKM_SHA384: return EVP_sha384 ();
        case CKM_SHA512: return EVP_sha512 ();
        default: return NULL;
    }
}

const EVP_MD *
drv_md_from_mgf (CK_RSA_PKCS_MGF_TYPE mgf)
{
    switch (mgf) {
        case CKG_MGF1_SHA1: return EVP_sha1 ();
        case CKG_MGF1_SHA224: return EVP_sha224 ();
        case CKG_MGF1_SHA256: return EVP_sha256 ();
        case CKG_MGF1_SHA384: return EVP_sha384 ();
        case CKG_MGF1_SHA512: return EVP_sha512 ();
        default: return NULL;
    }
}

CK_RV
drv_ecdsa_der_to_raw (const unsigned char *der, size_t der_len, size_t half,
                      unsigned char *out, size_t *out_len)
{
    CK_RV rv = CKR_FUNCTION_FAILED;
    const unsigned char *p = der;
    ECDSA_SIG *sig = d2i_ECDSA_SIG (NULL, &p, (long) der_len);
    if (!sig)
        goto out;
    if (*out_len < 2 * half) {
        rv = CKR_BUFFER_TOO_SMALL;
        goto out;
    }
    if (BN_bn2binpad (ECDSA_SIG_get0_r (sig), out, (int) half) < 0
    ||  BN_bn2binpad (ECDSA_SIG_get0_s (sig), out + half, (int) half) < 0)
        goto out;
    *out_len = 2 * half;
    rv = CKR_OK;
out:
    ECDSA_SIG_free (sig);
    return rv;
}

CK_RV
drv_oaep_unpad (const unsigned char *em, size_t k, const cs_mech_t *mech,
                unsigned char *out, size_t *out_len)
{
    const EVP_MD *md = drv_md_from_ckm (mech->hash);
    const EVP_MD *mgf1 = drv_md_from_mgf (mech->mgf);
    if (!md || !mgf1)
        return CKR_MECHANISM_PARAM_INVALID;
    if (k == 0 || k > 2048)
        return CKR_ENCRYPTED_DATA_INVALID;
    unsigned char buf [2048];
    int len = RSA_padding_check_PKCS1_OAEP_mgf1 (buf, (int) sizeof buf, em, (int) k, (int) k,
                                                 mech->label, (int) mech->label_len, md, mgf1);
    ERR_clear_error ();
    if (len < 0) {
        OPENSSL_cleanse (buf, sizeof buf);
        return CKR_ENCRYPTED_DATA_INVALID;
    }
    CK_RV rv = CKR_OK;
    if ((size_t) len > *out_len)
        rv = CKR_BUFFER_TOO_SMALL;
    else {
        memcpy (out, buf, (size_t) len);
        *out_len = (size_t) len;
    }
    OPENSSL_cleanse (buf, sizeof buf);
    return rv;
}

/* ---- sign and decrypt with an EVP_PKEY ------------------------------ */

CK_KEY_TYPE
drv_evp_key_type (const EVP_PKEY *pkey)
{
    if (EVP_PKEY_is_a (pkey, "RSA"))
        return CKK_RSA;
    if (EVP_PKEY_is_a (pkey, "EC"))
        return CKK_EC;
    if (EVP_PKEY_is_a (pkey, "ED25519") || EVP_PKEY_is_a (pkey, "ED448"))
        return CKK_EC_EDWARDS;
    if (EVP_PKEY_is_a (pkey, "X25519") || EVP_PKEY_is_a (pkey, "X448"))
        return CKK_EC_MONTGOMERY;
    return CKK_VENDOR_DEFINED;
}

/*  Sets PSS parameters: the hash of the digest, MGF1 hash and salt length.  */
static CK_RV
s_set_pss (EVP_PKEY_CTX *ctx, const cs_mech_t *mech, size_t in_len)
{
    const EVP_MD *md = drv_md_from_ckm (mech->hash);
    const EVP_MD *mgf1 = drv_md_from_mgf (mech->mgf);
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
s_set_oaep (EVP_PKEY_CTX *ctx, const cs_mech_t *mech)
{
    const EVP_MD *md = drv_md_from_ckm (mech->hash);
    const EVP_MD *mgf1 = drv_md_from_mgf (mech->mgf);
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
s_rsa_sign (EVP_PKEY *pkey, const cs_mech_t *mech, const unsigned char *in, size_t in_len,
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
drv_evp_sign (EVP_PKEY *pkey, const cs_mech_t *mech, const unsigned char *in, size_t in_len,
              unsigned char *out, size_t *out_len)
{
    CK_KEY_TYPE type = drv_evp_key_type (pkey);
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
drv_evp_decrypt (EVP_PKEY *pkey, const cs_mech_t *mech, const unsigned char *in,
                 size_t in_len, unsigned char *out, size_t *out_len)
{
    if (mech->type != CKM_RSA_PKCS && mech->type != CKM_RSA_PKCS_OAEP && mech->type != CKM_RSA_X_509)
        return mech->type == CKM_ECDSA || mech->type == CKM_EDDSA || mech->type == CKM_RSA_PKCS_PSS
               ? CKR_KEY_FUNCTION_NOT_PERMITTED : CKR_MECHANISM_INVALID;
    if (drv_evp_key_type (pkey) != CKK_RSA)
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

/* ---- ECDH and PSS encoding ---------------------------------------------- */

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
    CK_KEY_TYPE type = drv_evp_key_type (pkey);
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

CK_RV
drv_pss_encode (const cs_mech_t *mech, const unsigned char *digest, size_t digest_len,
                size_t modulus_bits, unsigned char *em, size_t k)
{
    const EVP_MD *md = drv_md_from_ckm (mech->hash);
    const EVP_MD *mgf1 = drv_md_from_mgf (mech->mgf);
    if (!md || !mgf1 || k == 0 || k > S_BLOCK_MAX || (modulus_bits + 7) / 8 != k)
        return CKR_MECHANISM_PARAM_INVALID;
    if (digest_len != (size_t) EVP_MD_get_size (md))
        return CKR_DATA_LEN_RANGE;
    /*  emLen = ceil((modBits - 1) / 8), RFC 8017 §8.1.1; sLen <= emLen - hLen - 2.  */
    size_t em_len = (modulus_bits - 1 + 7) / 8;
    if (mech->salt_len + digest_len + 2 > em_len)
        return CKR_MECHANISM_PARAM_INVALID;
    RSA *rsa = RSA_new ();
    BIGNUM *n = BN_new (), *e = BN_new ();
    CK_RV rv = CKR_FUNCTION_FAILED;
    /*  Only the modulus size matters to the encoder: a dummy modulus of
     *  modulus_bits bits (top bit set).  */
    if (rsa && n && e && BN_set_bit (n, (int) modulus_bits - 1) && BN_set_bit (n, 0)
    &&  BN_set_word (e, 65537) && RSA_set0_key (rsa, n, e, NULL)) {
        n = e = NULL;
        if (RSA_padding_add_PKCS1_PSS_mgf1 (rsa, em, digest, md, mgf1, (int) mech->salt_len) == 1)
            rv = CKR_OK;
    }
    BN_free (n);
    BN_free (e);
    RSA_free (rsa);
    ERR_clear_error ();
    return rv;
}

/* ---- public attributes ------------------------------------------------ */

unsigned char *
drv_der_octet_string (const unsigned char *data, size_t len, size_t *out_len)
{
    size_t head = len < 128 ? 2 : len < 256 ? 3 : 4;
    unsigned char *out = malloc (head + len);
    if (!out || len > 65535) {
        free (out);
        return NULL;
    }
    out [0] = 0x04;
    if (len < 128)
        out [1] = (unsigned char) len;
    else
    if (len < 256) {
        out [1] = 0x81;
        out [2] = (unsigned char) len;
    }
    else {
        out [1] = 0x82;
        out [2] = (unsigned char) (len >> 8);
        out [3] = (unsigned char) len;
    }
    memcpy (out + head, data, len);
    *out_len = head + len;
    return out;
}

/*  Stores a big-number parameter of pkey as big-endian bytes.  */
static int
s_bn_param (EVP_PKEY *pkey, const char *name, unsigned char **out_p, size_t *len_p)
{
    BIGNUM *bn = NULL;
    if (!EVP_PKEY_get_bn_param (pkey, name, &bn))
        return -1;
    *len_p = (size_t) BN_num_bytes (bn);
    *out_p = malloc (*len_p ? *len_p : 1);
    if (*out_p)
        BN_bn2bin (bn, *out_p);
    BN_free (bn);
    return *out_p ? 0 : -1;
}

/*  DER of the OID of nid into a malloc'd buffer.  */
static unsigned char *
s_oid_der (int nid, size_t *len_p)
{
    ASN1_OBJECT *oid = OBJ_nid2obj (nid);
    int len = oid ? i2d_ASN1_OBJECT (oid, NULL) : -1;
    unsigned char *der = len > 0 ? malloc ((size_t) len) : NULL, *p = der;
    if (der)
        *len_p = (size_t) i2d_ASN1_OBJECT (oid, &p);
    return der;
}

static int
s_ec_info (EVP_PKEY *pkey, cs_key_info_t *key)
{
    char group [64];
    unsigned char point [256];
    size_t point_len = 0;
    if (!EVP_PKEY_get_utf8_string_param (pkey, OSSL_PKEY_PARAM_GROUP_NAME, group, sizeof group, NULL)
    ||  !EVP_PKEY_get_octet_string_param (pkey, OSSL_PKEY_PARAM_PUB_KEY, point, sizeof point,
                                          &point_len))
        return -1;
    key->ec_params = s_oid_der (OBJ_sn2nid (group), &key->ec_params_len);
    key->ec_point = drv_der_octet_string (point, point_len, &key->ec_point_len);
    return key->ec_params && key->ec_point ? 0 : -1;
}

/*  Ed25519, Ed448, X25519 or X448: the RFC 8410 OID and the raw point
 *  (RFC 8032, RFC 7748 §5).  */
static int
s_raw_info (EVP_PKEY *pkey, cs_key_info_t *key)
{
    unsigned char point [57];
    size_t point_len = sizeof point;
    int id = EVP_PKEY_get_base_id (pkey);       /* EVP_PKEY_X25519 == NID_X25519 ... */
    if (!EVP_PKEY_get_raw_public_key (pkey, point, &point_len))
        return -1;
    key->ec_params = s_oid_der (id, &key->ec_params_len);
    key->ec_point = drv_der_octet_string (point, point_len, &key->ec_point_len);
    key->bits = id == EVP_PKEY_ED448 || id == EVP_PKEY_X448 ? 448 : id == EVP_PKEY_X25519 ? 255 : 256;
    return key->ec_params && key->ec_point ? 0 : -1;
}

int
drv_key_info_from_pkey (EVP_PKEY *pkey, cs_key_info_t *key)
{
    key->key_type = drv_evp_key_type (pkey);
    key->bits = (CK_ULONG) EVP_PKEY_get_bits (pkey);
    switch (key->key_type) {
        case CKK_RSA:
            return s_bn_param (pkey, OSSL_PKEY_PARAM_RSA_N, &key->modulus, &key->modulus_len)
                || s_bn_param (pkey, OSSL_PKEY_PARAM_RSA_E, &key->public_exponent,
                               &key->public_exponent_len) ? -1 : 0;
        case CKK_EC:
            return s_ec_info (pkey, key);
        case CKK_EC_EDWARDS:
        case CKK_EC_MONTGOMERY:
            return s_raw_info (pkey, key);
        default:
            return -1;
    }
}

EVP_PKEY *
drv_pkey_from_pkcs8 (const unsigned char *der, size_t len)
{
    const unsigned char *p = der;
    if (!der || len == 0 || len > 65536)
        return NULL;
    PKCS8_PRIV_KEY_INFO *p8 = d2i_PKCS8_PRIV_KEY_INFO (NULL, &p, (long) len);
    EVP_PKEY *pkey = p8 && p == der + len ? EVP_PKCS82PKEY (p8) : NULL;
    PKCS8_PRIV_KEY_INFO_free (p8);
    ERR_clear_error ();
    return pkey;
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

const char *
drv_config_get (zconfig_t *config, const char *path, const char *fallback)
{
    return zconfig_get (config, path, fallback);
}
