/*  derive.h — C_DeriveKey with CKM_ECDH1_DERIVE (PKCS#11 2.40 curr. mech.
 *  §2.3.14 and §2.3.11 table of CK_ECDH1_DERIVE_PARAMS; ANSI X9.63 for the
 *  KDFs).
 *
 *  The board computes only the raw shared secret Z with the private key
 *  (one DeriveJob, docs/CONTRACTS.md); the module applies the KDF (CKD_NULL
 *  or CKD_SHA1/224/256/384/512_KDF with optional shared data), wipes Z, and
 *  keeps the derived key as a CKO_SECRET_KEY session object (object.h) of
 *  the template's CKA_KEY_TYPE (CKK_GENERIC_SECRET by default, or CKK_AES)
 *  and CKA_VALUE_LEN.  The pure checks and the KDF are exposed for the unit
 *  tests.
 */
#ifndef CS_MODULE_DERIVE_H_INCLUDED
#define CS_MODULE_DERIVE_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "cs_p11.h"
#include "attrs.h"

#define CS_DERIVE_MAX_SHARED  1024          /* bytes of KDF shared data we accept */
#define CS_DERIVE_MAX_POINT   133           /* bytes of an uncompressed P-521 point */
#define CS_DERIVE_MAX_VALUE   CS_MAX_RSA_BYTES  /* bytes of a derived key */

/*  Checked CK_ECDH1_DERIVE_PARAMS.  Pointers go into the application's block.  */
typedef struct {
    CK_ULONG kdf;                 /* CKD_NULL, CKD_SHA1_KDF ... CKD_SHA512_KDF */
    const uint8_t *shared;              /* KDF shared data (SharedInfo), may be NULL */
    size_t shared_len;
    const uint8_t *point;               /* the peer point 04 || X || Y (DER unwrapped) */
    size_t point_len;                   /* = 2 * field_len + 1 */
} cs_derive_params_t;

/*  What the derived key will be, from a checked template.  */
typedef struct {
    CK_KEY_TYPE key_type;               /* CKK_GENERIC_SECRET or CKK_AES */
    size_t value_len;                   /* bytes */
    bool sensitive;                     /* CKA_SENSITIVE (default TRUE) */
    bool extractable;                   /* CKA_EXTRACTABLE (default FALSE) */
} cs_derive_key_t;

/*  Checks a CKM_ECDH1_DERIVE mechanism for a base key whose field is
 *  `field_len` bytes (32, 48, 66; X25519 32, X448 56 when `montgomery`, a
 *  CKK_EC_MONTGOMERY key).  CKR_MECHANISM_INVALID for another
 *  mechanism; CKR_MECHANISM_PARAM_INVALID for: no or a wrong-sized
 *  CK_ECDH1_DERIVE_PARAMS; a kdf other than CKD_NULL and CKD_SHA*_KDF;
 *  shared data with CKD_NULL, a NULL pointer with a length, or more than
 *  CS_DERIVE_MAX_SHARED bytes; a public point that is neither the raw
 *  uncompressed point of the key's curve nor a DER OCTET STRING holding one
 *  (compressed points are not supported); for `montgomery`, the raw
 *  u-coordinate of field_len bytes (PKCS#11 3.0 §2.3.7, RFC 7748 §5) or an
 *  OCTET STRING of it.  Fills *params on CKR_OK.  */
CK_RV cs_derive_check_params (const CK_MECHANISM *mech, size_t field_len, bool montgomery,
                              cs_derive_params_t *params);

/*  Checks the template of the derived key (PKCS#11 2.40 §5.14 C_DeriveKey,
 *  §4.10) for `kdf` with a Z of z_len bytes: the template's own errors
 *  (cs_template_check); CKR_TEMPLATE_INCONSISTENT for a class other than
 *  CKO_SECRET_KEY, a key type other than CKK_GENERIC_SECRET or CKK_AES, or
 *  key-pair attributes; CKR_ATTRIBUTE_READ_ONLY for CKA_VALUE, CKA_LOCAL,
 *  CKA_ALWAYS_SENSITIVE, CKA_NEVER_EXTRACTABLE, CKA_KEY_GEN_MECHANISM;
 *  CKR_ATTRIBUTE_VALUE_INVALID for CKA_TOKEN TRUE (derived keys are session
 *  objects only) or a CKA_VALUE_LEN out of range (0, over
 *  CS_DERIVE_MAX_VALUE, over z_len with CKD_NULL, not 16/24/32 for AES);
 *  CKR_TEMPLATE_INCOMPLETE for an AES key without CKA_VALUE_LEN.  Without
 *  CKA_VALUE_LEN a generic secret is z_len bytes (CKD_NULL) or the KDF's
 *  hash length.  Fills *key on CKR_OK.  */
CK_RV cs_derive_check_template_inlock (const CK_ATTRIBUTE *tmpl, CK_ULONG count, CK_ULONG kdf,
                                size_t z_len, cs_derive_key_t *key);

/*  Applies `kdf` to Z (z_len bytes) with shared data (shared_len bytes, may
 *  be NULL when 0) into out (out_len bytes, 1..CS_DERIVE_MAX_VALUE).
 *  CKD_NULL: the trailing out_len bytes of Z (out_len <= z_len; as SoftHSM
 *  truncates).  CKD_SHAx_KDF: the ANSI X9.63 KDF (SEC 1 §3.6.1):
 *  Hash(Z || counter (32-bit big-endian, from 1) || shared) blocks,
 *  concatenated and truncated.  Returns 0, or -1 for an unknown kdf or
 *  out-of-range lengths (out is then wiped).  */
int cs_derive_kdf (CK_ULONG kdf, const uint8_t *z, size_t z_len, const uint8_t *shared,
                   size_t shared_len, uint8_t *out, size_t out_len);

/*  The attributes stored with a derived key: the template's (non-secret,
 *  not key material, not CKA_TOKEN/CKA_VALUE_LEN), CKA_SENSITIVE and
 *  CKA_EXTRACTABLE as decided, CKA_LOCAL FALSE, CKA_ALWAYS_SENSITIVE =
 *  base's CKA_ALWAYS_SENSITIVE && CKA_SENSITIVE and CKA_NEVER_EXTRACTABLE =
 *  base's CKA_NEVER_EXTRACTABLE && !CKA_EXTRACTABLE (PKCS#11 2.40 §5.14).
 *  0 or -1 (out of memory).  */
int cs_derive_attrs (const CK_ATTRIBUTE *tmpl, CK_ULONG count, const cs_derive_key_t *key,
                     bool base_always_sensitive, bool base_never_extractable, cs_attrs_t *attrs);

#endif
