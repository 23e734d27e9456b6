/*  key_info.c — cs.KeyInfo from an OpenSSL EVP_PKEY, and PKCS#8 encoding
 *  (key_info.h).  OpenSSL 3 parameter API only (no deprecated RSA/EC_KEY).
 */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/objects.h>
#include <openssl/sha.h>
#include <openssl/x509.h>
#include "cs_keyfacts.h"
#include "key_info.h"
#include "keystore.h"
#include "cryptoserver/pkcs11v.h"



//  Copies len bytes into a malloc'd ProtobufCBinaryData.  Returns 0 or -1.
static int
s_bytes_set (ProtobufCBinaryData *field, const void *data, size_t len)
{
    field->data = malloc (len ? len : 1);
    if (!field->data)
        return -1;
    memcpy (field->data, data, len);
    field->len = len;
    return 0;
}

//  Appends a flag or number attribute to a repeated field.  Returns 0 or -1.
static int
s_attr_add (size_t *count, Cs__Attribute ***list, CK_ATTRIBUTE_TYPE type,
            Cs__Attribute__ValueCase kind, uint64_t value)
{
    Cs__Attribute **grown = realloc (*list, (*count + 1) * sizeof *grown);
    if (!grown)
        return -1;
    *list = grown;
    Cs__Attribute *attr = malloc (sizeof *attr);
    if (!attr)
        return -1;
    cs__attribute__init (attr);
    attr->type = type;
    attr->value_case = kind;
    if (kind == CS__ATTRIBUTE__VALUE_FLAG)
        attr->flag = value != 0;
    else
        attr->number = value;
    (*list) [(*count)++] = attr;
    return 0;
}

//  ec_params (the curve OID) and ec_point (DER OCTET STRING around the
//  public point) of an EC or Ed25519 key (cs_keyfacts.h).
static int
s_ec_fields (EVP_PKEY *pkey, Cs__KeyInfo *info)
{
    info->ec_params.data = cs_pkey_ec_params (pkey, &info->ec_params.len);
    info->ec_point.data = cs_pkey_ec_point (pkey, &info->ec_point.len);
    return info->ec_params.data && info->ec_point.data ? 0 : -1;
}

//  Fills the type-specific public fields; *mechanism_p gets the key pair
//  generation mechanism of the type.  Returns 0, or -1 for another type.
static int
s_public_fields (EVP_PKEY *pkey, Cs__KeyInfo *info, CK_MECHANISM_TYPE *mechanism_p)
{
    if (EVP_PKEY_is_a (pkey, "RSA")) {
        info->key_type = CKK_RSA;
        info->bits = (uint32_t) EVP_PKEY_get_bits (pkey);
        info->can_decrypt = true;
        *mechanism_p = CKM_RSA_PKCS_KEY_PAIR_GEN;
        return cs_pkey_bn (pkey, OSSL_PKEY_PARAM_RSA_N, &info->modulus.data, &info->modulus.len) == 0
            && cs_pkey_bn (pkey, OSSL_PKEY_PARAM_RSA_E, &info->public_exponent.data,
                           &info->public_exponent.len) == 0 ? 0 : -1;
    }
    if (EVP_PKEY_is_a (pkey, "EC")) {
        info->key_type = CKK_EC;
        info->bits = (uint32_t) EVP_PKEY_get_bits (pkey);
        *mechanism_p = CKM_EC_KEY_PAIR_GEN;
        return s_ec_fields (pkey, info);
    }
    if (EVP_PKEY_is_a (pkey, "ED25519") || EVP_PKEY_is_a (pkey, "ED448")) {
        bool ed448 = EVP_PKEY_is_a (pkey, "ED448");
        info->key_type = CKK_EC_EDWARDS;
        info->bits = ed448 ? 448 : 256;
        *mechanism_p = CKM_EC_EDWARDS_KEY_PAIR_GEN;
        return s_ec_fields (pkey, info);
    }
    if (EVP_PKEY_is_a (pkey, "X25519") || EVP_PKEY_is_a (pkey, "X448")) {
        bool x448 = EVP_PKEY_is_a (pkey, "X448");
        info->key_type = CKK_EC_MONTGOMERY;        /* PKCS#11 3.0 §2.3.7 */
        info->bits = x448 ? 448 : 255;
        *mechanism_p = CKM_EC_MONTGOMERY_KEY_PAIR_GEN;
        return s_ec_fields (pkey, info);
    }
    return -1;
}

//  True when pkey holds private material (not only a public key).
static bool
s_has_private (EVP_PKEY *pkey)
{
    BIGNUM *d = NULL;
    uint8_t raw [64];
    size_t len = 0;
    bool has = EVP_PKEY_get_bn_param (pkey, OSSL_PKEY_PARAM_RSA_D, &d) == 1
            || EVP_PKEY_get_bn_param (pkey, OSSL_PKEY_PARAM_PRIV_KEY, &d) == 1
            || EVP_PKEY_get_octet_string_param (pkey, OSSL_PKEY_PARAM_PRIV_KEY, raw, sizeof raw, &len) == 1;
    BN_clear_free (d);
    OPENSSL_cleanse (raw, sizeof raw);
    return has;
}

//  The PKCS#11 2.40 §4.7 / §4.9 attributes that the KeyInfo fields do not
//  carry, for both objects of the pair.
static int
s_attributes (Cs__KeyInfo *info, bool generated, CK_MECHANISM_TYPE mechanism)
{
    uint64_t gen = generated ? mechanism : CK_UNAVAILABLE_INFORMATION;
    Cs__Attribute__ValueCase flag = CS__ATTRIBUTE__VALUE_FLAG, number = CS__ATTRIBUTE__VALUE_NUMBER;
    size_t *pc = &info->n_private_attributes, *uc = &info->n_public_attributes;
    Cs__Attribute ***pl = &info->private_attributes, ***ul = &info->public_attributes;
    return s_attr_add (pc, pl, CKA_SENSITIVE, flag, true)
         | s_attr_add (pc, pl, CKA_EXTRACTABLE, flag, false)
         | s_attr_add (pc, pl, CKA_ALWAYS_SENSITIVE, flag, generated)
         | s_attr_add (pc, pl, CKA_NEVER_EXTRACTABLE, flag, generated)
         | s_attr_add (pc, pl, CKA_LOCAL, flag, generated)
         | s_attr_add (pc, pl, CKA_KEY_GEN_MECHANISM, number, gen)
         | s_attr_add (uc, ul, CKA_LOCAL, flag, generated)
         | s_attr_add (uc, ul, CKA_KEY_GEN_MECHANISM, number, gen);
}

//  Sets ref, label, home and id from params (defaults per key_info.h).
//  Sets ref, label, home and id from params (defaults per key_info.h);
//  `derived` (KEY_INFO_ID_LEN bytes) is the CKA_ID when params gives none.
static int
s_names (const uint8_t *derived, Cs__KeyInfo *info, const key_info_params_t *params)
{
    char ref [36];
    if (!params->ref)
        keystore_ref_new (ref);
    info->ref = strdup (params->ref ? params->ref : ref);
    info->label = strdup (params->label ? params->label : "");
    info->home = strdup (params->home ? params->home : "keystore");
    if (!info->ref || !info->label || !info->home)
        return -1;
    if (params->id)
        return s_bytes_set (&info->id, params->id, params->id_len);
    return derived ? s_bytes_set (&info->id, derived, KEY_INFO_ID_LEN) : -1;
}

//  A new empty KeyInfo (NULL when out of memory); *params_p NULL becomes
//  the defaults (every field zero).
static Cs__KeyInfo *
s_info_new (const key_info_params_t **params_p)
{
    static const key_info_params_t defaults = { 0 };
    Cs__KeyInfo *info = malloc (sizeof *info);
    *params_p = *params_p ? *params_p : &defaults;
    if (info)
        cs__key_info__init (info);
    return info;
}

Cs__KeyInfo *
key_info_from_pq (CK_KEY_TYPE key_type, CK_ULONG parameter_set, const uint8_t *pub, size_t pub_len,
                  const key_info_params_t *params)
{
    if (!pub || !pub_len || (key_type != CKK_ML_DSA && key_type != CKK_ML_KEM)
    ||  parameter_set < 1 || parameter_set > 3)
        return NULL;
    Cs__KeyInfo *info = s_info_new (&params);
    if (!info)
        return NULL;
    info->key_type = key_type;
    info->parameter_set = parameter_set;
    bool dsa = key_type == CKK_ML_DSA;
    uint8_t id [KEY_INFO_ID_LEN];
    SHA1 (pub, pub_len, id);            /* RFC 5280 §4.2.1.2 method 1 over the raw key (RFC 9881 §4) */
    if (s_bytes_set (&info->public_value, pub, pub_len) != 0
    ||  s_names (id, info, params) != 0
    ||  s_attributes (info, params->generated, dsa ? CKM_ML_DSA_KEY_PAIR_GEN : CKM_ML_KEM_KEY_PAIR_GEN) != 0) {
        cs__key_info__free_unpacked (info, NULL);
        return NULL;
    }
    /*  An ML-KEM pair's KEM roles, stored so that both sides read them
        (PKCS#11 3.2 CKA_ENCAPSULATE, CKA_DECAPSULATE; the template may
        turn them off).  */
    if (!dsa && (s_attr_add (&info->n_private_attributes, &info->private_attributes, CKA_DECAPSULATE,
                             CS__ATTRIBUTE__VALUE_FLAG, true)
                 || s_attr_add (&info->n_public_attributes, &info->public_attributes, CKA_ENCAPSULATE,
                                CS__ATTRIBUTE__VALUE_FLAG, true))) {
        cs__key_info__free_unpacked (info, NULL);
        return NULL;
    }
    info->can_sign = dsa;
    info->has_private = true;
    info->has_public = true;
    return info;
}

Cs__KeyInfo *
key_info_from_pkey (EVP_PKEY *pkey, const key_info_params_t *params)
{
    Cs__KeyInfo *info = pkey ? s_info_new (&params) : NULL;
    if (!info)
        return NULL;
    CK_MECHANISM_TYPE mechanism = CK_UNAVAILABLE_INFORMATION;
    uint8_t id [KEY_INFO_ID_LEN];
    bool derived = params->id || key_info_derive_id (pkey, id) == 0;
    if (s_public_fields (pkey, info, &mechanism) != 0
    ||  s_names (derived ? id : NULL, info, params) != 0
    ||  s_attributes (info, params->generated, mechanism) != 0) {
        cs__key_info__free_unpacked (info, NULL);
        return NULL;
    }
    info->can_sign = true;
    info->has_private = s_has_private (pkey);
    info->has_public = true;
    return info;
}

int
key_info_derive_id (EVP_PKEY *pkey, uint8_t id [KEY_INFO_ID_LEN])
{
    X509_PUBKEY *xpk = NULL;
    const unsigned char *bits = NULL;
    int len = 0, rc = -1;
    if (X509_PUBKEY_set (&xpk, pkey) == 1
    &&  X509_PUBKEY_get0_param (NULL, &bits, &len, NULL, xpk) == 1 && len > 0) {
        SHA1 (bits, (size_t) len, id);
        rc = 0;
    }
    X509_PUBKEY_free (xpk);
    return rc;
}

int
key_info_fingerprint (EVP_PKEY *pkey, uint8_t out [32], char *hex)
{
    unsigned char *der = NULL;
    int len = pkey ? i2d_PUBKEY (pkey, &der) : -1;
    unsigned int out_len = 0;
    int rc = len > 0 && EVP_Digest (der, (size_t) len, out, &out_len, EVP_sha256 (), NULL) == 1
          && out_len == 32 ? 0 : -1;
    OPENSSL_free (der);
    if (rc == 0 && hex)
        for (int i = 0; i < 8; i++)
            snprintf (hex + 2 * i, 3, "%02x", out [i]);
    return rc;
}

const Cs__Attribute *
key_info_attribute (const Cs__KeyInfo *info, bool private_side, CK_ATTRIBUTE_TYPE type)
{
    size_t count = private_side ? info->n_private_attributes : info->n_public_attributes;
    Cs__Attribute **list = private_side ? info->private_attributes : info->public_attributes;
    for (size_t i = 0; i < count; i++)
        if (list [i]->type == type)
            return list [i];
    return NULL;
}
