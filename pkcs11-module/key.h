/*  key.h — the key type at the bottom of the module: one key's public
 *  facts and, for a per-request key, its private DER (or a secret key's
 *  value), reference counted.  Objects (object.h), operations and jobs hold
 *  references; keyder.h converts keys to and from DER and OpenSSL.  Nothing
 *  here needs the library mutex.
 */
#ifndef CS_MODULE_KEY_H_INCLUDED
#define CS_MODULE_KEY_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "cs_p11.h"
#include "cs_wire.h"
#include "cryptoserver/pkcs11v.h"

/*  One key's public facts and, for a per-request key, its private DER
 *  (for a secret key, its value).
 *  Immutable after creation and reference counted, so an operation can keep
 *  it while the table changes.  */
typedef struct {
    int refs;
    char *ref;                  /* token keys: KeyInfo.ref, or "board:<hex id>" from an
                                   older broker (legacy_id); NULL for session keys */
    bool legacy_id;             /* the broker sent no ref: jobs name the key by its id */
    uint8_t id [CS_WIRE_MAX_KEY_ID];
    size_t id_len;
    char *label;
    CK_KEY_TYPE key_type;       /* CKK_RSA, CKK_EC, CKK_EC_EDWARDS; CKK_AES, CKK_GENERIC_SECRET */
    CK_ULONG bits;              /* modulus bits, or curve bits */
    uint8_t *modulus;           /* RSA, big-endian without leading zeros */
    size_t modulus_len;         /* = k, the modulus length in bytes */
    uint8_t *exponent;
    size_t exponent_len;
    uint8_t *ec_params;         /* EC/EdDSA: DER named-curve OID (or printable name) */
    size_t ec_params_len;
    uint8_t *ec_point;          /* EC/EdDSA: DER OCTET STRING of the point */
    size_t ec_point_len;
    size_t field_len;           /* EC: bytes of one coordinate; Ed25519: 32 */
    bool can_sign;
    bool can_decrypt;
    uint8_t *pkcs8;             /* per-request key: PKCS#8 DER in locked memory, else NULL */
    size_t pkcs8_len;
    uint8_t *secret;            /* session secret key (CKO_SECRET_KEY): its CKA_VALUE in
                                   locked memory, else NULL (a token secret key: the
                                   broker holds it, jobs name it by ref) */
    size_t secret_len;          /* bytes = CKA_VALUE_LEN */
    CK_ULONG parameter_set;     /* CKK_ML_DSA, CKK_ML_KEM: CKA_PARAMETER_SET (CKP_*, 1..3) */
    uint8_t *value;             /* ... the public key's CKA_VALUE: FIPS 204 pk / FIPS 203 ek */
    size_t value_len;
} cs_key_t;

/*  Bytes of a signature by this key: k for RSA, 2 × field bytes for ECDSA
 *  (raw r||s, PKCS#11 2.40 curr. mech. §2.3.1), 64 for Ed25519; ML-DSA
 *  2420, 3309 or 4627 (FIPS 204 Table 2).  */
size_t cs_key_signature_len (const cs_key_t *key);

/*  The raw point inside the key's CKA_EC_POINT (a DER OCTET STRING; a bare
 *  point is accepted too): 04 || X || Y for EC, the 32-byte key for
 *  Ed25519.  Returns false when it is malformed.  *raw_p points into the key.  */
bool cs_key_ec_point_raw (const cs_key_t *key, const uint8_t **raw_p, size_t *len_p);

/*  The key id that jobs carry for a token key (ref, or the CKA_ID bytes of
 *  a legacy_id key), *len_p bytes, pointing into the key.  */
const uint8_t *cs_key_job_id (const cs_key_t *key, size_t *len_p);

/*  New reference to `key` (atomic).  */
cs_key_t *cs_key_ref (cs_key_t *key);

/*  Drops a reference and nulls *key_p; frees the key on the last one,
 *  wiping its PKCS#8.  */
void cs_key_unref (cs_key_t **key_p);

/*  Builds a key from a KeyInfo (its public facts and ref; for a token
 *  secret key, CKK_AES or CKK_GENERIC_SECRET, its ref and size only:
 *  secret_len = bits / 8, secret NULL).  Returns NULL when out of memory
 *  or when the KeyInfo is unusable (unknown type, missing public parts, a
 *  secret key without a ref).  Caller unrefs.  */
cs_key_t *cs_key_new (const Cs__KeyInfo *info);

/*  A new secret key (CKK_GENERIC_SECRET, CKK_AES ...) holding a copy of
 *  `value` (len bytes, 1..CS_MAX_RSA_BYTES) in locked memory (cs_secmem.h),
 *  wiped on the last unref.  NULL when out of memory or len is out of range.
 *  Caller unrefs.  PKCS#11 2.40 §4.10.  */
cs_key_t *cs_key_new_secret (CK_KEY_TYPE key_type, const uint8_t *value, size_t len);

/*  A new session key with the public facts of `key` only (no ref, no
 *  PKCS#8, empty id).  NULL when out of memory.  Caller unrefs.  */
cs_key_t *cs_key_public_only (const cs_key_t *key);

#endif
