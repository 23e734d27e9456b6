/*  cs_keyfacts.c — the public facts of an OpenSSL key in PKCS#11's DER
 *  forms (cs_keyfacts.h).  OpenSSL 3 parameter API only.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/objects.h>
#include <openssl/x509.h>
#include "cs_keyfacts.h"
#include "cryptoserver/pkcs11v.h"

#define S_POINT_MAX 256         /* bytes: P-521 uncompressed is 133 */
#define S_PKCS8_MAX 65536       /* bytes: an RSA-8192 PKCS#8 is about 4.7 KiB */

/*  A key whose public half is a raw string (RFC 8032, RFC 7748 §5).  */
static bool
s_raw_key (const EVP_PKEY *pkey)
{
    return EVP_PKEY_is_a (pkey, "ED25519") || EVP_PKEY_is_a (pkey, "ED448")
        || EVP_PKEY_is_a (pkey, "X25519") || EVP_PKEY_is_a (pkey, "X448");
}

CK_KEY_TYPE
cs_pkey_key_type (const EVP_PKEY *pkey)
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

unsigned
cs_key_strength (CK_KEY_TYPE type, size_t bits)
{
    if (type == CKK_DES3 || type == CKK_DES)
        return type == CKK_DES3 ? 112 : 56;             /* three-key TDEA: 112 */
    if (type == CKK_RSA)
        return bits >= 15360 ? 256 : bits >= 7680 ? 192 : bits >= 3072 ? 128 : bits >= 2048 ? 112 : 80;
    if (type == CKK_EC || type == CKK_EC_EDWARDS || type == CKK_EC_MONTGOMERY)
        bits /= 2;                                      /* half the field bits */
    return bits > 256 ? 256 : (unsigned) bits;
}

unsigned
cs_pkey_strength (const EVP_PKEY *pkey)
{
    CK_KEY_TYPE type = cs_pkey_key_type (pkey);
    if (type == CKK_RSA || type == CKK_EC)
        return cs_key_strength (type, (size_t) EVP_PKEY_get_bits (pkey));
    int bits = EVP_PKEY_get_security_bits (pkey);
    return bits > 0 ? (unsigned) bits : 0;
}

uint8_t *
cs_der_octet_string (const uint8_t *data, size_t len, size_t *out_len)
{
    size_t head = len < 128 ? 2 : len < 256 ? 3 : 4;
    uint8_t *out = len <= 65535 ? malloc (head + len) : NULL;
    if (!out)
        return NULL;
    out [0] = 0x04;
    if (len < 128)
        out [1] = (uint8_t) len;
    else
    if (len < 256) {
        out [1] = 0x81;
        out [2] = (uint8_t) len;
    }
    else {
        out [1] = 0x82;
        out [2] = (uint8_t) (len >> 8);
        out [3] = (uint8_t) len;
    }
    if (len)
        memcpy (out + head, data, len);
    *out_len = head + len;
    return out;
}

uint8_t *
cs_der_oid (int nid, size_t *len_p)
{
    const ASN1_OBJECT *oid = nid != NID_undef ? OBJ_nid2obj (nid) : NULL;
    int len = oid ? i2d_ASN1_OBJECT (oid, NULL) : -1;
    uint8_t *der = len > 0 ? malloc ((size_t) len) : NULL, *p = der;
    if (der)
        *len_p = (size_t) i2d_ASN1_OBJECT (oid, &p);
    ERR_clear_error ();
    return der;
}

int
cs_pkey_bn (const EVP_PKEY *pkey, const char *name, uint8_t **out_p, size_t *len_p)
{
    BIGNUM *bn = NULL;
    if (EVP_PKEY_get_bn_param (pkey, name, &bn) != 1) {
        ERR_clear_error ();
        return -1;
    }
    *len_p = (size_t) BN_num_bytes (bn);
    *out_p = malloc (*len_p ? *len_p : 1);
    if (*out_p)
        BN_bn2bin (bn, *out_p);
    BN_free (bn);
    return *out_p ? 0 : -1;
}

uint8_t *
cs_pkey_ec_params (const EVP_PKEY *pkey, size_t *len_p)
{
    char group [80];
    int nid = NID_undef;
    if (s_raw_key (pkey))                       /* Ed25519, Ed448, X25519, X448: RFC 8410 OIDs */
        nid = EVP_PKEY_get_base_id (pkey);      /* EVP_PKEY_ED448 == NID_ED448 ... */
    else
    if (EVP_PKEY_is_a (pkey, "EC")
    &&  EVP_PKEY_get_utf8_string_param (pkey, OSSL_PKEY_PARAM_GROUP_NAME, group, sizeof group, NULL) == 1) {
        //  OpenSSL names groups by short name ("prime256v1") or NIST name ("P-256").
        nid = OBJ_txt2nid (group);
        if (nid == NID_undef)
            nid = EC_curve_nist2nid (group);
    }
    ERR_clear_error ();
    return cs_der_oid (nid, len_p);
}

uint8_t *
cs_pkey_ec_point (const EVP_PKEY *pkey, size_t *len_p)
{
    uint8_t raw [S_POINT_MAX];
    size_t raw_len = sizeof raw;
    int ok = s_raw_key (pkey)
           ? EVP_PKEY_get_raw_public_key (pkey, raw, &raw_len)
           : EVP_PKEY_is_a (pkey, "EC")
           ? EVP_PKEY_get_octet_string_param (pkey, OSSL_PKEY_PARAM_ENCODED_PUBLIC_KEY,
                                              raw, sizeof raw, &raw_len)
           : 0;
    ERR_clear_error ();
    return ok == 1 && raw_len > 0 ? cs_der_octet_string (raw, raw_len, len_p) : NULL;
}

EVP_PKEY *
cs_pkey_from_pkcs8 (const uint8_t *der, size_t len)
{
    const unsigned char *p = der;
    if (!der || len == 0 || len > S_PKCS8_MAX)
        return NULL;
    PKCS8_PRIV_KEY_INFO *p8 = d2i_PKCS8_PRIV_KEY_INFO (NULL, &p, (long) len);
    EVP_PKEY *pkey = p8 && p == der + len ? EVP_PKCS82PKEY (p8) : NULL;
    PKCS8_PRIV_KEY_INFO_free (p8);      //  OpenSSL wipes its private copy
    ERR_clear_error ();
    return pkey;
}

uint8_t *
cs_pkey_to_pkcs8 (const EVP_PKEY *pkey, size_t *len_p)
{
    PKCS8_PRIV_KEY_INFO *p8 = pkey ? EVP_PKEY2PKCS8 (pkey) : NULL;
    int len = p8 ? i2d_PKCS8_PRIV_KEY_INFO (p8, NULL) : -1;
    uint8_t *der = len > 0 ? malloc ((size_t) len) : NULL;
    if (der) {
        unsigned char *cursor = der;
        if (i2d_PKCS8_PRIV_KEY_INFO (p8, &cursor) == len)
            *len_p = (size_t) len;
        else {
            OPENSSL_cleanse (der, (size_t) len);
            free (der);
            der = NULL;
        }
    }
    PKCS8_PRIV_KEY_INFO_free (p8);      //  OpenSSL wipes its private copy
    ERR_clear_error ();
    return der;
}
