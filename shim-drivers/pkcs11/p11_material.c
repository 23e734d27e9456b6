/*  p11_material.c — key material on a pkcs11 board (p11_int.h): a keystore
 *  or per-request key (PKCS#8 DER) imported as a session object of the
 *  worker's session (PKCS#11 2.40 §2.1.3 RSA, §2.3.4 EC, 3.0 §2.3.8 EdDSA
 *  private key attributes), and the per-session cache of imported
 *  keystore keys (by ref, checked by a SHA-256 of the DER, LRU-evicted).
 */
#include <string.h>
#include <openssl/crypto.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include "cs_util.h"
#include "cs_wire.h"          /* cs_rv_name */
#include "p11_int.h"

/*  One attribute value made from the PKCS#8 key, wiped after import.  */
typedef struct {
    CK_ATTRIBUTE_TYPE type;
    unsigned char *value;
    size_t len;
} s_part_t;

#define S_PARTS_MAX 8

/*  Reads big-number parameter `name` of pkey into part (big-endian).  */
static int
s_part_bn (EVP_PKEY *pkey, const char *name, CK_ATTRIBUTE_TYPE type, s_part_t *part)
{
    BIGNUM *bn = NULL;
    part->type = type;
    if (!EVP_PKEY_get_bn_param (pkey, name, &bn))
        return -1;
    part->len = (size_t) BN_num_bytes (bn);
    part->value = OPENSSL_malloc (part->len ? part->len : 1);
    if (part->value)
        BN_bn2bin (bn, part->value);
    BN_clear_free (bn);
    return part->value ? 0 : -1;
}

/*  Copies bytes into part.  */
static int
s_part_bytes (const unsigned char *data, size_t len, CK_ATTRIBUTE_TYPE type, s_part_t *part)
{
    part->type = type;
    part->len = len;
    part->value = OPENSSL_memdup (data, len ? len : 1);
    return part->value ? 0 : -1;
}

/*  The RSA components of PKCS#11 2.40 §2.1.3 (CKK_RSA private key).  */
static int
s_parts_rsa (EVP_PKEY *pkey, s_part_t *parts, size_t *n)
{
    static const struct { const char *name; CK_ATTRIBUTE_TYPE type; } map [] = {
        { OSSL_PKEY_PARAM_RSA_N, CKA_MODULUS }, { OSSL_PKEY_PARAM_RSA_E, CKA_PUBLIC_EXPONENT },
        { OSSL_PKEY_PARAM_RSA_D, CKA_PRIVATE_EXPONENT }, { OSSL_PKEY_PARAM_RSA_FACTOR1, CKA_PRIME_1 },
        { OSSL_PKEY_PARAM_RSA_FACTOR2, CKA_PRIME_2 }, { OSSL_PKEY_PARAM_RSA_EXPONENT1, CKA_EXPONENT_1 },
        { OSSL_PKEY_PARAM_RSA_EXPONENT2, CKA_EXPONENT_2 },
        { OSSL_PKEY_PARAM_RSA_COEFFICIENT1, CKA_COEFFICIENT },
    };
    for (size_t i = 0; i < sizeof map / sizeof map [0]; i++)
        if (s_part_bn (pkey, map [i].name, map [i].type, &parts [(*n)++]))
            return -1;
    return 0;
}

/*  EC (§2.3.4: CKA_EC_PARAMS, CKA_VALUE = d) or EdDSA (3.0 §2.3.8: the raw
 *  private key as CKA_VALUE) components.  */
static int
s_parts_curve (EVP_PKEY *pkey, CK_KEY_TYPE type, s_part_t *parts, size_t *n)
{
    cs_key_info_t info = { 0 };
    int rc = drv_key_info_from_pkey (pkey, &info);
    if (rc == 0)
        rc = s_part_bytes (info.ec_params, info.ec_params_len, CKA_EC_PARAMS, &parts [(*n)++]);
    cs_key_info_free_members (&info);
    if (rc)
        return -1;
    if (type == CKK_EC) {
        if (s_part_bn (pkey, OSSL_PKEY_PARAM_PRIV_KEY, CKA_VALUE, &parts [*n]))
            return -1;
        (*n)++;
        return 0;
    }
    unsigned char raw [64];
    size_t raw_len = sizeof raw;
    rc = EVP_PKEY_get_raw_private_key (pkey, raw, &raw_len) ? 0 : -1;
    if (rc == 0)
        rc = s_part_bytes (raw, raw_len, CKA_VALUE, &parts [(*n)++]);
    OPENSSL_cleanse (raw, sizeof raw);
    return rc;
}

static void
s_parts_free (s_part_t *parts, size_t n)
{
    for (size_t i = 0; i < n; i++)
        OPENSSL_clear_free (parts [i].value, parts [i].len ? parts [i].len : 1);
}

/*  Imports key material as a session object: sensitive, not extractable,
 *  never on the token; EC keys with CKA_DERIVE (ECDH).  Sets *bits_p to the
 *  RSA modulus bits (0 for curves) and *type_p to the key type.
 *  Returns CKR_OK, CKR_KEY_HANDLE_INVALID (unparsable DER) or the board's rv.  */
CK_RV
p11_import (cs_drv_session_t *self, const cs_drv_key_t *key, CK_OBJECT_HANDLE *obj_p, size_t *bits_p,
          CK_KEY_TYPE *type_p)
{
    EVP_PKEY *pkey = cs_pkey_from_pkcs8 (key->pkcs8, key->pkcs8_len);
    CK_KEY_TYPE type = pkey ? cs_pkey_key_type (pkey) : CKK_VENDOR_DEFINED;
    if (!pkey || !(cs_kt_bit (type) & self->board->caps.material_types)) {
        EVP_PKEY_free (pkey);
        return CKR_KEY_HANDLE_INVALID;
    }
    s_part_t parts [S_PARTS_MAX] = { { 0 } };
    size_t n = 0;
    int rc = type == CKK_RSA ? s_parts_rsa (pkey, parts, &n) : s_parts_curve (pkey, type, parts, &n);
    *bits_p = type == CKK_RSA ? (size_t) EVP_PKEY_get_bits (pkey) : 0;
    *type_p = type;
    EVP_PKEY_free (pkey);
    CK_OBJECT_CLASS cls = CKO_PRIVATE_KEY;
    CK_BBOOL yes = CK_TRUE, no = CK_FALSE, decrypt = type == CKK_RSA ? CK_TRUE : CK_FALSE;
    CK_BBOOL derive = type == CKK_EC ? CK_TRUE : CK_FALSE;
    CK_ATTRIBUTE tmpl [9 + S_PARTS_MAX] = {
        { CKA_CLASS, &cls, sizeof cls }, { CKA_KEY_TYPE, &type, sizeof type },
        { CKA_TOKEN, &no, sizeof no }, { CKA_PRIVATE, &yes, sizeof yes },
        { CKA_SENSITIVE, &yes, sizeof yes }, { CKA_EXTRACTABLE, &no, sizeof no },
        { CKA_SIGN, &yes, sizeof yes }, { CKA_DECRYPT, &decrypt, sizeof decrypt },
        { CKA_DERIVE, &derive, sizeof derive },
    };
    for (size_t i = 0; i < n; i++)
        tmpl [9 + i] = (CK_ATTRIBUTE) { parts [i].type, parts [i].value, parts [i].len };
    CK_RV rv = rc ? CKR_KEY_HANDLE_INVALID
             : self->board->fl->C_CreateObject (self->handle, tmpl, 9 + n, obj_p);
    s_parts_free (parts, n);
    if (rv != CKR_OK && rc == 0)
        zsys_warning ("pkcs11 %s: cannot import a key as a session object: %s",
                      self->board->name, cs_rv_name (rv));
    return rv;
}

/*  Evicts the least recently used imported key, destroying its object.  */
static void
s_import_evict (cs_drv_session_t *self)
{
    const char *oldest = NULL;
    p11_import_t *victim = NULL;
    for (p11_import_t *e = zhashx_first (self->imports); e; e = zhashx_next (self->imports))
        if (!victim || e->used < victim->used) {
            victim = e;
            oldest = zhashx_cursor (self->imports);
        }
    if (!victim)
        return;
    self->board->fl->C_DestroyObject (self->handle, victim->handle);
    char *copy = strdup (oldest);
    if (copy)
        zhashx_delete (self->imports, copy);
    free (copy);
}

/*  Returns the session object of a keystore key, importing it on a miss.  */
CK_RV
p11_import_cached (cs_drv_session_t *self, const cs_drv_key_t *key, CK_OBJECT_HANDLE *obj_p, size_t *bits_p,
                 CK_KEY_TYPE *type_p)
{
    unsigned char digest [SHA256_DIGEST_LENGTH];
    SHA256 (key->pkcs8, key->pkcs8_len, digest);
    p11_import_t *entry = zhashx_lookup (self->imports, key->ref);
    if (entry && CRYPTO_memcmp (entry->digest, digest, sizeof digest) == 0) {
        entry->used = ++self->tick;
        *obj_p = entry->handle;
        *bits_p = entry->bits;
        *type_p = entry->type;
        return CKR_OK;
    }
    if (entry) {
        self->board->fl->C_DestroyObject (self->handle, entry->handle);
        zhashx_delete (self->imports, key->ref);
    }
    CK_RV rv = p11_import (self, key, obj_p, bits_p, type_p);
    if (rv != CKR_OK)
        return rv;
    while (zhashx_size (self->imports) >= self->board->cache_size)
        s_import_evict (self);
    if (!(entry = calloc (1, sizeof *entry)))
        return CKR_OK;                      /* used uncached: destroyed with the session */
    *entry = (p11_import_t) { *obj_p, *bits_p, *type_p, { 0 }, ++self->tick };
    memcpy (entry->digest, digest, sizeof digest);
    if (zhashx_insert (self->imports, key->ref, entry))
        free (entry);
    return CKR_OK;
}

