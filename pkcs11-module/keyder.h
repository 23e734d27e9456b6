/*  keyder.h — keys between PKCS#11 templates, OpenSSL 3 and DER.
 *
 *  C_CreateObject gives key components as attributes (PKCS#11 2.40 §2.1.3,
 *  §2.1.4 RSA, §2.3.3, §2.3.4 EC, curr. mech.; Ed25519 as in PKCS#11 3.0
 *  §2.3.5/6); the wire wants PKCS#8 PrivateKeyInfo (RFC 5208) or
 *  SubjectPublicKeyInfo (RFC 5280 §4.1.2.7) DER.  The keys are built with
 *  OSSL_PARAM_BLD + EVP_PKEY_fromdata; private DER lands in locked memory
 *  (cs_secmem.h) and every intermediate copy of a private value is cleared.
 *  Curves: P-256, P-384, P-521 and Ed25519, named by DER OID or, as PKCS#11
 *  3.0 allows, by a PrintableString curve name.
 */
#ifndef CS_MODULE_KEYDER_H_INCLUDED
#define CS_MODULE_KEYDER_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <openssl/evp.h>
#include "cs_p11.h"
#include "key.h"

typedef struct {
    const char *group;          /* OpenSSL group name, or "ED25519" */
    CK_KEY_TYPE key_type;       /* CKK_EC or CKK_EC_EDWARDS */
    const uint8_t *oid;         /* canonical CKA_EC_PARAMS: DER OBJECT IDENTIFIER */
    size_t oid_len;
    size_t field_len;           /* bytes of one coordinate (Ed25519: of the key) */
    CK_ULONG bits;
} cs_curve_t;

/*  Parses CKA_EC_PARAMS (a DER OID, or a DER PrintableString such as
 *  "prime256v1", "secp384r1", "P-521", "edwards25519").  Returns CKR_OK with
 *  *curve_p set; CKR_CURVE_NOT_SUPPORTED for a well-formed other curve;
 *  CKR_ATTRIBUTE_VALUE_INVALID for anything else.  */
CK_RV cs_curve_parse (const uint8_t *params, size_t len, const cs_curve_t **curve_p);

/*  An OpenSSL public key for `key` (caller frees), or NULL.  */
EVP_PKEY *cs_keyder_public_pkey (const cs_key_t *key);

/*  Builds the private key of a C_CreateObject template of `key_type`
 *  (CKK_RSA: CKA_MODULUS, CKA_PUBLIC_EXPONENT, CKA_PRIVATE_EXPONENT and the
 *  five CRT values, which RSAPrivateKey (RFC 8017 A.1.2) needs; CKK_EC: CKA_EC_PARAMS, CKA_VALUE, the
 *  public point derived here; CKK_EC_EDWARDS: CKA_EC_PARAMS, CKA_VALUE of 32
 *  bytes).  On CKR_OK *key_p is a new key (caller unrefs) holding the PKCS#8
 *  DER in locked memory and its public facts.  Errors: CKR_TEMPLATE_INCOMPLETE,
 *  CKR_ATTRIBUTE_VALUE_INVALID (values that make no key), CKR_CURVE_NOT_SUPPORTED,
 *  CKR_KEY_SIZE_RANGE (modulus over 8192 bits), CKR_HOST_MEMORY.  */
CK_RV cs_keyder_private_from_template (CK_KEY_TYPE key_type, const CK_ATTRIBUTE *tmpl, CK_ULONG count,
                                       cs_key_t **key_p);

/*  The same for a public key (CKA_MODULUS + CKA_PUBLIC_EXPONENT, or
 *  CKA_EC_PARAMS + CKA_EC_POINT).  On CKR_OK *key_p is a new key and, when
 *  spki_p is given, *spki_p the SubjectPublicKeyInfo DER (malloc'd,
 *  *spki_len_p bytes; caller frees).  */
CK_RV cs_keyder_public_from_template (CK_KEY_TYPE key_type, const CK_ATTRIBUTE *tmpl, CK_ULONG count,
                                      cs_key_t **key_p, uint8_t **spki_p, size_t *spki_len_p);

/*  A key from PKCS#8 DER (a per-request key from GenerateKeyPairResult): the
 *  DER is copied into locked memory, the public facts derived.  Returns the
 *  new key (caller unrefs), or NULL (bad DER, unsupported type, OOM).  */
cs_key_t *cs_keyder_key_from_pkcs8 (const uint8_t *der, size_t len);

/*  SubjectPublicKeyInfo DER of a key's public half (malloc'd, caller frees),
 *  or NULL.  */
uint8_t *cs_keyder_spki (const cs_key_t *key, size_t *len_p);

/*  A private component (CKA_PRIVATE_EXPONENT, CKA_PRIME_1, CKA_PRIME_2,
 *  CKA_EXPONENT_1, CKA_EXPONENT_2, CKA_COEFFICIENT for RSA; CKA_VALUE for EC
 *  and Ed25519) of a key holding PKCS#8, big-endian, into out (max bytes).
 *  Returns the length, or 0 when the key has no such component.  The caller
 *  wipes `out`.  */
size_t cs_keyder_component (const cs_key_t *key, CK_ATTRIBUTE_TYPE type, uint8_t *out, size_t max);

#endif
