/*  keyder.c — templates ↔ OpenSSL keys ↔ DER (keyder.h).  */
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/objects.h>
#include <openssl/param_build.h>
#include <openssl/params.h>
#include <openssl/x509.h>
#include "attrs.h"
#include "log.h"
#include "cs_keyfacts.h"
#include "cs_secmem.h"
#include "keyder.h"

/*  ---- curves -------------------------------------------------------- */

static const uint8_t s_oid_p256 [] = { 0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07 };
static const uint8_t s_oid_p384 [] = { 0x06, 0x05, 0x2b, 0x81, 0x04, 0x00, 0x22 };
static const uint8_t s_oid_p521 [] = { 0x06, 0x05, 0x2b, 0x81, 0x04, 0x00, 0x23 };
static const uint8_t s_oid_ed25519 [] = { 0x06, 0x03, 0x2b, 0x65, 0x70 };       /* RFC 8410 */
static const uint8_t s_oid_ed448 [] = { 0x06, 0x03, 0x2b, 0x65, 0x71 };         /* RFC 8410 */
static const uint8_t s_oid_x25519 [] = { 0x06, 0x03, 0x2b, 0x65, 0x6e };        /* RFC 8410 */
static const uint8_t s_oid_x448 [] = { 0x06, 0x03, 0x2b, 0x65, 0x6f };          /* RFC 8410 */
static const uint8_t s_oid_ed25519_gnupg [] =                                   /* 1.3.6.1.4.1.11591.15.1 */
    { 0x06, 0x09, 0x2b, 0x06, 0x01, 0x04, 0x01, 0xda, 0x47, 0x0f, 0x01 };

static const cs_curve_t s_curves [] = {
    { "prime256v1", CKK_EC, s_oid_p256, sizeof s_oid_p256, 32, 256 },
    { "secp384r1", CKK_EC, s_oid_p384, sizeof s_oid_p384, 48, 384 },
    { "secp521r1", CKK_EC, s_oid_p521, sizeof s_oid_p521, 66, 521 },
    { "ED25519", CKK_EC_EDWARDS, s_oid_ed25519, sizeof s_oid_ed25519, 32, 256 },
    { "ED448", CKK_EC_EDWARDS, s_oid_ed448, sizeof s_oid_ed448, 57, 448 },  /* RFC 8032 §5.2 */
    { "X25519", CKK_EC_MONTGOMERY, s_oid_x25519, sizeof s_oid_x25519, 32, 255 },   /* RFC 7748 §5 */
    { "X448", CKK_EC_MONTGOMERY, s_oid_x448, sizeof s_oid_x448, 56, 448 },
};

/*  Printable names (PKCS#11 3.0 §2.3.3 allows them in CKA_EC_PARAMS).  */
static const struct { const char *name; size_t curve; } s_names [] = {
    { "prime256v1", 0 }, { "secp256r1", 0 }, { "P-256", 0 }, { "nistp256", 0 },
    { "secp384r1", 1 }, { "P-384", 1 }, { "nistp384", 1 },
    { "secp521r1", 2 }, { "P-521", 2 }, { "nistp521", 2 },
    { "edwards25519", 3 }, { "ed25519", 3 }, { "edwards448", 4 }, { "ed448", 4 },
    { "curve25519", 5 }, { "x25519", 5 }, { "curve448", 6 }, { "x448", 6 },
};

/*  The OpenSSL type of a curve whose keys are raw bytes (RFC 8410).  */
static int
s_raw_type (const cs_curve_t *curve)
{
    return strcmp (curve->group, "ED448") == 0 ? EVP_PKEY_ED448 : strcmp (curve->group, "X25519") == 0
         ? EVP_PKEY_X25519 : strcmp (curve->group, "X448") == 0 ? EVP_PKEY_X448 : EVP_PKEY_ED25519;
}

static const cs_curve_t *
s_curve_by_group (const char *group)
{
    for (size_t i = 0; group && i < sizeof s_curves / sizeof s_curves [0]; i++)
        if (strcasecmp (s_curves [i].group, group) == 0)
            return &s_curves [i];
    return NULL;
}

CK_RV
cs_curve_parse (const uint8_t *params, size_t len, const cs_curve_t **curve_p)
{
    const unsigned char *der = params;
    ASN1_OBJECT *oid;
    if (!params || len < 2 || (size_t) params [1] + 2 != len)
        return CKR_ATTRIBUTE_VALUE_INVALID;
    if (params [0] == 0x13) {       /* PrintableString */
        for (size_t i = 0; i < sizeof s_names / sizeof s_names [0]; i++)
            if (strlen (s_names [i].name) == len - 2
            &&  strncasecmp (s_names [i].name, (const char *) params + 2, len - 2) == 0) {
                *curve_p = &s_curves [s_names [i].curve];
                return CKR_OK;
            }
        return CKR_CURVE_NOT_SUPPORTED;
    }
    if (params [0] != 0x06)
        return CKR_ATTRIBUTE_VALUE_INVALID;
    if (len == sizeof s_oid_ed25519_gnupg && memcmp (params, s_oid_ed25519_gnupg, len) == 0) {
        *curve_p = &s_curves [3];
        return CKR_OK;
    }
    for (size_t i = 0; i < sizeof s_curves / sizeof s_curves [0]; i++)
        if (s_curves [i].oid_len == len && memcmp (s_curves [i].oid, params, len) == 0) {
            *curve_p = &s_curves [i];
            return CKR_OK;
        }
    if (!(oid = d2i_ASN1_OBJECT (NULL, &der, (long) len)))
        return CKR_ATTRIBUTE_VALUE_INVALID;
    ASN1_OBJECT_free (oid);
    return CKR_CURVE_NOT_SUPPORTED;
}

/*  ---- OpenSSL keys from facts -------------------------------------- */

/*  Frees a parameter array, wiping every value first (OpenSSL 3.0 has no
 *  OSSL_PARAM_clear_free).  */
static void
s_params_free (OSSL_PARAM *params)
{
    for (OSSL_PARAM *p = params; p && p->key; p++)
        if (p->data && p->data_size)
            OPENSSL_cleanse (p->data, p->data_size);
    OSSL_PARAM_free (params);
}

static EVP_PKEY *
s_fromdata (const char *type, OSSL_PARAM_BLD *bld, int selection)
{
    EVP_PKEY *pkey = NULL;
    OSSL_PARAM *params = OSSL_PARAM_BLD_to_param (bld);
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_name (NULL, type, NULL);
    if (!params || !ctx || EVP_PKEY_fromdata_init (ctx) <= 0
    ||  EVP_PKEY_fromdata (ctx, &pkey, selection, params) <= 0)
        pkey = NULL;
    EVP_PKEY_CTX_free (ctx);
    s_params_free (params);
    return pkey;
}

static EVP_PKEY *
s_public_rsa (const cs_key_t *key)
{
    EVP_PKEY *pkey = NULL;
    OSSL_PARAM_BLD *bld = OSSL_PARAM_BLD_new ();
    BIGNUM *n = BN_bin2bn (key->modulus, (int) key->modulus_len, NULL);
    BIGNUM *e = BN_bin2bn (key->exponent, (int) key->exponent_len, NULL);
    if (bld && n && e && OSSL_PARAM_BLD_push_BN (bld, OSSL_PKEY_PARAM_RSA_N, n)
    &&  OSSL_PARAM_BLD_push_BN (bld, OSSL_PKEY_PARAM_RSA_E, e))
        pkey = s_fromdata ("RSA", bld, EVP_PKEY_PUBLIC_KEY);
    BN_free (n);
    BN_free (e);
    OSSL_PARAM_BLD_free (bld);
    return pkey;
}

static EVP_PKEY *
s_public_ec (const cs_key_t *key, const cs_curve_t *curve)
{
    EVP_PKEY *pkey = NULL;
    const uint8_t *point;
    size_t point_len;
    OSSL_PARAM_BLD *bld;
    if (!cs_key_ec_point_raw (key, &point, &point_len))
        return NULL;
    if (curve->key_type == CKK_EC_EDWARDS || curve->key_type == CKK_EC_MONTGOMERY)
        return EVP_PKEY_new_raw_public_key (s_raw_type (curve), NULL, point, point_len);
    if (!(bld = OSSL_PARAM_BLD_new ()))
        return NULL;
    if (OSSL_PARAM_BLD_push_utf8_string (bld, OSSL_PKEY_PARAM_GROUP_NAME, curve->group, 0)
    &&  OSSL_PARAM_BLD_push_octet_string (bld, OSSL_PKEY_PARAM_PUB_KEY, point, point_len))
        pkey = s_fromdata ("EC", bld, EVP_PKEY_PUBLIC_KEY);
    OSSL_PARAM_BLD_free (bld);
    return pkey;
}

EVP_PKEY *
cs_keyder_public_pkey (const cs_key_t *key)
{
    const cs_curve_t *curve = NULL;
    EVP_PKEY *pkey = NULL;
    if (key->key_type == CKK_RSA)
        pkey = s_public_rsa (key);
    else
    if (cs_curve_parse (key->ec_params, key->ec_params_len, &curve) == CKR_OK
    &&  curve->key_type == key->key_type)
        pkey = s_public_ec (key, curve);
    if (!pkey)
        cs_log_warning ("cannot build an OpenSSL public key for '%s'", key->label ? key->label : "");
    return pkey;
}

/*  ---- facts from OpenSSL keys -------------------------------------- */

/*  The curve facts of an EC or Ed25519 pkey: type and size from the curve
 *  table (which also limits the curves), CKA_EC_POINT from cs_keyfacts.h.  */
static int
s_describe_ec (const EVP_PKEY *pkey, Cs__KeyInfo *info)
{
    char group [64] = "ED25519";
    const cs_curve_t *curve;
    int id = EVP_PKEY_get_base_id (pkey);
    bool edwards = id == EVP_PKEY_ED25519 || id == EVP_PKEY_ED448 || id == EVP_PKEY_X25519 || id == EVP_PKEY_X448;
    if (id == EVP_PKEY_ED448 || id == EVP_PKEY_X25519 || id == EVP_PKEY_X448)
        strcpy (group, id == EVP_PKEY_ED448 ? "ED448" : id == EVP_PKEY_X25519 ? "X25519" : "X448");
    if (!edwards && !EVP_PKEY_get_utf8_string_param (pkey, OSSL_PKEY_PARAM_GROUP_NAME, group, sizeof group, NULL))
        return -1;
    if (!(curve = s_curve_by_group (group)))
        return -1;
    info->key_type = curve->key_type;
    info->bits = (uint32_t) curve->bits;
    info->ec_params.data = (uint8_t *) curve->oid;  /* static: not freed */
    info->ec_params.len = curve->oid_len;
    info->ec_point.data = cs_pkey_ec_point (pkey, &info->ec_point.len);
    return info->ec_point.data ? 0 : -1;
}

/*  The public facts of `pkey` as a KeyInfo, then a key (caller unrefs).  */
static cs_key_t *
s_key_from_pkey (const EVP_PKEY *pkey)
{
    Cs__KeyInfo info = CS__KEY_INFO__INIT;
    cs_key_t *key = NULL;
    int rc;
    if (EVP_PKEY_get_base_id (pkey) == EVP_PKEY_RSA) {
        info.key_type = CKK_RSA;
        info.bits = (uint32_t) EVP_PKEY_get_bits (pkey);
        rc = cs_pkey_bn (pkey, OSSL_PKEY_PARAM_RSA_N, &info.modulus.data, &info.modulus.len)
           | cs_pkey_bn (pkey, OSSL_PKEY_PARAM_RSA_E, &info.public_exponent.data,
                         &info.public_exponent.len);
        info.can_decrypt = true;
    }
    else
        rc = s_describe_ec (pkey, &info);
    info.can_sign = true;
    info.label = "";
    if (rc == 0)
        key = cs_key_new (&info);
    free (info.modulus.data);
    free (info.public_exponent.data);
    free (info.ec_point.data);
    return key;
}

/*  Attaches the PKCS#8 DER of `pkey` (locked memory) to `key`.  */
static CK_RV
s_attach_pkcs8 (cs_key_t *key, EVP_PKEY *pkey)
{
    CK_RV rv = CKR_HOST_MEMORY;
    PKCS8_PRIV_KEY_INFO *p8 = EVP_PKEY2PKCS8 (pkey);
    unsigned char *p;
    int len = p8 ? i2d_PKCS8_PRIV_KEY_INFO (p8, NULL) : -1;
    if (len > 0 && len <= CS_WIRE_MAX_KEY_DER && (key->pkcs8 = cs_secmem_alloc ((size_t) len))) {
        p = key->pkcs8;
        key->pkcs8_len = (size_t) i2d_PKCS8_PRIV_KEY_INFO (p8, &p);
        rv = CKR_OK;
    }
    else
    if (len > CS_WIRE_MAX_KEY_DER)
        rv = CKR_KEY_SIZE_RANGE;
    PKCS8_PRIV_KEY_INFO_free (p8);
    return rv;
}

/*  Completes a private key: the public facts and the PKCS#8.  */
static CK_RV
s_private_key (EVP_PKEY *pkey, cs_key_t **key_p)
{
    CK_RV rv;
    cs_key_t *key = s_key_from_pkey (pkey);
    if (!key)
        return CKR_ATTRIBUTE_VALUE_INVALID;
    if ((rv = s_attach_pkcs8 (key, pkey)) != CKR_OK) {
        cs_key_unref (&key);
        return rv;
    }
    *key_p = key;
    return CKR_OK;
}

cs_key_t *
cs_keyder_key_from_pkcs8 (const uint8_t *der, size_t len)
{
    const unsigned char *p = der;
    cs_key_t *key = NULL;
    EVP_PKEY *pkey = len <= CS_WIRE_MAX_KEY_DER ? d2i_AutoPrivateKey (NULL, &p, (long) len) : NULL;
    if (pkey && (key = s_key_from_pkey (pkey)) && !(key->pkcs8 = cs_secmem_dup (der, len)))
        cs_key_unref (&key);
    if (key)
        key->pkcs8_len = len;
    EVP_PKEY_free (pkey);
    return key;
}

uint8_t *
cs_keyder_spki (const cs_key_t *key, size_t *len_p)
{
    EVP_PKEY *pkey = cs_keyder_public_pkey (key);
    unsigned char *der = NULL, *p;
    int len = pkey ? i2d_PUBKEY (pkey, NULL) : -1;
    if (len > 0 && (der = malloc ((size_t) len))) {
        p = der;
        *len_p = (size_t) i2d_PUBKEY (pkey, &p);
    }
    EVP_PKEY_free (pkey);
    return der;
}

/*  ---- templates ------------------------------------------------------ */

/*  A BIGNUM from a template value (secure heap when it is secret); NULL
 *  when absent or empty.  */
static BIGNUM *
s_bn (const CK_ATTRIBUTE *tmpl, CK_ULONG count, CK_ATTRIBUTE_TYPE type)
{
    const CK_ATTRIBUTE *attr = cs_template_find (tmpl, count, type);
    BIGNUM *bn;
    if (!attr || !attr->ulValueLen || attr->ulValueLen > CS_MAX_RSA_BYTES)
        return NULL;
    bn = cs_attr_kind (type) == CS_ATTR_SECRET ? BN_secure_new () : BN_new ();
    if (bn && !BN_bin2bn (attr->pValue, (int) attr->ulValueLen, bn)) {
        BN_clear_free (bn);
        bn = NULL;
    }
    return bn;
}

static CK_RV
s_private_rsa (const CK_ATTRIBUTE *tmpl, CK_ULONG count, EVP_PKEY **pkey_p)
{
    static const struct { CK_ATTRIBUTE_TYPE type; const char *param; } parts [] = {
        { CKA_MODULUS, OSSL_PKEY_PARAM_RSA_N }, { CKA_PUBLIC_EXPONENT, OSSL_PKEY_PARAM_RSA_E },
        { CKA_PRIVATE_EXPONENT, OSSL_PKEY_PARAM_RSA_D }, { CKA_PRIME_1, OSSL_PKEY_PARAM_RSA_FACTOR1 },
        { CKA_PRIME_2, OSSL_PKEY_PARAM_RSA_FACTOR2 }, { CKA_EXPONENT_1, OSSL_PKEY_PARAM_RSA_EXPONENT1 },
        { CKA_EXPONENT_2, OSSL_PKEY_PARAM_RSA_EXPONENT2 }, { CKA_COEFFICIENT, OSSL_PKEY_PARAM_RSA_COEFFICIENT1 },
    };
    BIGNUM *bn [8] = { NULL };
    OSSL_PARAM_BLD *bld = OSSL_PARAM_BLD_new ();
    CK_RV rv = bld ? CKR_OK : CKR_HOST_MEMORY;
    int given = 0;
    for (int i = 0; i < 8; i++)
        given += !!(bn [i] = s_bn (tmpl, count, parts [i].type));
    if (rv == CKR_OK && given != 8)      /* PKCS#8 (RFC 8017 A.1.2) needs the CRT values */
        rv = CKR_TEMPLATE_INCOMPLETE;
    for (int i = 0; rv == CKR_OK && i < given; i++)
        if (!OSSL_PARAM_BLD_push_BN (bld, parts [i].param, bn [i]))
            rv = CKR_HOST_MEMORY;
    if (rv == CKR_OK && !(*pkey_p = s_fromdata ("RSA", bld, EVP_PKEY_KEYPAIR)))
        rv = CKR_ATTRIBUTE_VALUE_INVALID;
    for (int i = 0; i < 8; i++)
        BN_clear_free (bn [i]);
    OSSL_PARAM_BLD_free (bld);
    return rv;
}

/*  Q = d·G on the curve (SEC 1 §3.2.1), uncompressed, into point (max).  */
static size_t
s_ec_public (const char *group_name, const BIGNUM *d, uint8_t *point, size_t max)
{
    EC_GROUP *group = EC_GROUP_new_by_curve_name (OBJ_sn2nid (group_name));
    EC_POINT *q = group ? EC_POINT_new (group) : NULL;
    size_t len = 0;
    if (q && !BN_is_zero (d) && !BN_is_negative (d) && BN_cmp (d, EC_GROUP_get0_order (group)) < 0
    &&  EC_POINT_mul (group, q, d, NULL, NULL, NULL))
        len = EC_POINT_point2oct (group, q, POINT_CONVERSION_UNCOMPRESSED, point, max, NULL);
    EC_POINT_free (q);
    EC_GROUP_free (group);
    return len;
}

static CK_RV
s_private_ec (const cs_curve_t *curve, const CK_ATTRIBUTE *value, EVP_PKEY **pkey_p)
{
    uint8_t point [160];
    size_t point_len;
    CK_RV rv = CKR_HOST_MEMORY;
    BIGNUM *d = BN_secure_new ();
    OSSL_PARAM_BLD *bld = OSSL_PARAM_BLD_new ();
    if (!d || !bld || !BN_bin2bn (value->pValue, (int) value->ulValueLen, d))
        goto out;
    rv = CKR_ATTRIBUTE_VALUE_INVALID;
    if (!(point_len = s_ec_public (curve->group, d, point, sizeof point)))
        goto out;
    if (!OSSL_PARAM_BLD_push_utf8_string (bld, OSSL_PKEY_PARAM_GROUP_NAME, curve->group, 0)
    ||  !OSSL_PARAM_BLD_push_BN (bld, OSSL_PKEY_PARAM_PRIV_KEY, d)
    ||  !OSSL_PARAM_BLD_push_octet_string (bld, OSSL_PKEY_PARAM_PUB_KEY, point, point_len))
        rv = CKR_HOST_MEMORY;
    else
    if ((*pkey_p = s_fromdata ("EC", bld, EVP_PKEY_KEYPAIR)))
        rv = CKR_OK;
out:
    BN_clear_free (d);
    OSSL_PARAM_BLD_free (bld);
    return rv;
}

/*  CKA_EC_PARAMS of a template: the curve, which must be of `key_type`.  */
static CK_RV
s_template_curve (CK_KEY_TYPE key_type, const CK_ATTRIBUTE *tmpl, CK_ULONG count, const cs_curve_t **curve_p)
{
    const CK_ATTRIBUTE *params = cs_template_find (tmpl, count, CKA_EC_PARAMS);
    CK_RV rv;
    if (!params)
        return CKR_TEMPLATE_INCOMPLETE;
    if ((rv = cs_curve_parse (params->pValue, params->ulValueLen, curve_p)) != CKR_OK)
        return rv;
    return (*curve_p)->key_type == key_type ? CKR_OK : CKR_TEMPLATE_INCONSISTENT;
}

CK_RV
cs_keyder_private_from_template (CK_KEY_TYPE key_type, const CK_ATTRIBUTE *tmpl, CK_ULONG count,
                                 cs_key_t **key_p)
{
    const cs_curve_t *curve = NULL;
    const CK_ATTRIBUTE *value = cs_template_find (tmpl, count, CKA_VALUE);
    EVP_PKEY *pkey = NULL;
    CK_RV rv;
    if (key_type == CKK_RSA)
        rv = s_private_rsa (tmpl, count, &pkey);
    else
    if (key_type != CKK_EC && key_type != CKK_EC_EDWARDS && key_type != CKK_EC_MONTGOMERY)
        rv = CKR_ATTRIBUTE_VALUE_INVALID;
    else
    if ((rv = s_template_curve (key_type, tmpl, count, &curve)) != CKR_OK)
        ;
    else
    if (!value || !value->ulValueLen)
        rv = CKR_TEMPLATE_INCOMPLETE;
    else
    if (value->ulValueLen > curve->field_len)
        rv = CKR_ATTRIBUTE_VALUE_INVALID;
    else
    if (key_type == CKK_EC)
        rv = s_private_ec (curve, value, &pkey);
    else
    if (value->ulValueLen != curve->field_len)
        rv = CKR_ATTRIBUTE_VALUE_INVALID;
    else
    if (!(pkey = EVP_PKEY_new_raw_private_key (s_raw_type (curve), NULL, value->pValue, curve->field_len)))
        rv = CKR_ATTRIBUTE_VALUE_INVALID;
    if (rv == CKR_OK)
        rv = s_private_key (pkey, key_p);
    EVP_PKEY_free (pkey);
    return rv;
}

CK_RV
cs_keyder_public_from_template (CK_KEY_TYPE key_type, const CK_ATTRIBUTE *tmpl, CK_ULONG count,
                                cs_key_t **key_p, uint8_t **spki_p, size_t *spki_len_p)
{
    Cs__KeyInfo info = CS__KEY_INFO__INIT;
    const CK_ATTRIBUTE *a, *b;
    const cs_curve_t *curve = NULL;
    cs_key_t *key;
    EVP_PKEY *pkey;
    CK_RV rv = CKR_OK;
    bool rsa = key_type == CKK_RSA;
    if (!rsa && key_type != CKK_EC && key_type != CKK_EC_EDWARDS && key_type != CKK_EC_MONTGOMERY)
        return CKR_ATTRIBUTE_VALUE_INVALID;
    if (!rsa && (rv = s_template_curve (key_type, tmpl, count, &curve)) != CKR_OK)
        return rv;
    a = cs_template_find (tmpl, count, rsa ? CKA_MODULUS : CKA_EC_PARAMS);
    b = cs_template_find (tmpl, count, rsa ? CKA_PUBLIC_EXPONENT : CKA_EC_POINT);
    if (!a || !b || !a->ulValueLen || !b->ulValueLen)
        return CKR_TEMPLATE_INCOMPLETE;
    info.key_type = key_type;
    info.label = "";
    info.can_decrypt = rsa;
    info.bits = curve ? (uint32_t) curve->bits : 0;
    *(rsa ? &info.modulus : &info.ec_params) = (ProtobufCBinaryData) { a->ulValueLen, a->pValue };
    *(rsa ? &info.public_exponent : &info.ec_point) = (ProtobufCBinaryData) { b->ulValueLen, b->pValue };
    if (rsa && a->ulValueLen > CS_MAX_RSA_BYTES)
        return CKR_KEY_SIZE_RANGE;
    if (!(key = cs_key_new (&info)))
        return CKR_ATTRIBUTE_VALUE_INVALID;
    if (!(pkey = cs_keyder_public_pkey (key)))
        rv = CKR_ATTRIBUTE_VALUE_INVALID;
    EVP_PKEY_free (pkey);
    if (rv == CKR_OK && spki_p && !(*spki_p = cs_keyder_spki (key, spki_len_p)))
        rv = CKR_HOST_MEMORY;
    if (rv == CKR_OK)
        *key_p = key;
    else
        cs_key_unref (&key);
    return rv;
}

/*  ---- components ---------------------------------------------------- */

static const char *
s_rsa_param (CK_ATTRIBUTE_TYPE type)
{
    switch (type) {
        case CKA_PRIVATE_EXPONENT: return OSSL_PKEY_PARAM_RSA_D;
        case CKA_PRIME_1:          return OSSL_PKEY_PARAM_RSA_FACTOR1;
        case CKA_PRIME_2:          return OSSL_PKEY_PARAM_RSA_FACTOR2;
        case CKA_EXPONENT_1:       return OSSL_PKEY_PARAM_RSA_EXPONENT1;
        case CKA_EXPONENT_2:       return OSSL_PKEY_PARAM_RSA_EXPONENT2;
        case CKA_COEFFICIENT:      return OSSL_PKEY_PARAM_RSA_COEFFICIENT1;
        default:                   return NULL;
    }
}

size_t
cs_keyder_component (const cs_key_t *key, CK_ATTRIBUTE_TYPE type, uint8_t *out, size_t max)
{
    const unsigned char *p = key->pkcs8;
    EVP_PKEY *pkey = key->pkcs8 ? d2i_AutoPrivateKey (NULL, &p, (long) key->pkcs8_len) : NULL;
    const char *param = key->key_type == CKK_RSA ? s_rsa_param (type)
                      : type == CKA_VALUE && key->key_type == CKK_EC ? OSSL_PKEY_PARAM_PRIV_KEY : NULL;
    BIGNUM *bn = NULL;
    size_t len = 0;
    if (pkey && (key->key_type == CKK_EC_EDWARDS || key->key_type == CKK_EC_MONTGOMERY) && type == CKA_VALUE) {
        len = max;
        if (!EVP_PKEY_get_raw_private_key (pkey, out, &len))
            len = 0;
    }
    else
    if (pkey && param && EVP_PKEY_get_bn_param (pkey, param, &bn) && (size_t) BN_num_bytes (bn) <= max)
        len = (size_t) BN_bn2bin (bn, out);
    BN_clear_free (bn);
    EVP_PKEY_free (pkey);
    return len;
}
