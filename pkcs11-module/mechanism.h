/*  mechanism.h — the mechanisms the module offers to applications (the rows
 *  of common/cs_mech.h, the one table) and how each maps to a job mechanism
 *  on the wire (docs/CONTRACTS.md "Wire"):
 *  hash-and-sign mechanisms are hashed here and travel as the raw mechanism
 *  with the digest (RSA PKCS#1 v1.5: the DER DigestInfo, RFC 8017 §9.2).
 *  CKM_RSA_X_509 (raw RSA) travels as itself with the data left-padded with
 *  zeros to k bytes.  CKM_ECDH1_DERIVE is C_DeriveKey only (derive.h): the
 *  board returns Z and the module applies the KDF.
 *  CKM_EDDSA (PKCS#11 3.0 §2.3.14; the 2.40 header has the number) signs the
 *  whole message: no hash here, at most CS_WIRE_MAX_DATA bytes.  The key-pair
 *  generation mechanisms map to themselves and run as GenerateKeyPairJob.
 *  Also: PSS and OAEP parameter checks (PKCS#11 2.40 curr. mech. §2.1.14,
 *  §2.1.8) and key type checks.
 */
#ifndef CS_MODULE_MECHANISM_H_INCLUDED
#define CS_MODULE_MECHANISM_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <openssl/evp.h>
#include "cs_p11.h"
#include "cs_mech.h"

/*  Parameters of a PSS, OAEP or ML-DSA operation, validated.  */
typedef struct {
    CK_MECHANISM_TYPE hash;     /* hashAlg */
    CK_RSA_PKCS_MGF_TYPE mgf;   /* CKG_MGF1_* */
    CK_ULONG salt_len;          /* PSS sLen, bytes */
    uint8_t *label;             /* OAEP label (owned, may be NULL) */
    size_t label_len;
    CK_ULONG hedge;             /* CKM_ML_DSA: CK_SIGN_ADDITIONAL_CONTEXT hedgeVariant */
    uint8_t *context;           /* ... its context string (owned, may be NULL), */
    size_t context_len;         /*     0..255 bytes (FIPS 204 §5.2) */
} cs_mech_params_t;

/*  The DER DigestInfo prefix of RFC 8017 §9.2 note 1 for `hash` (static
 *  bytes, *len_p bytes), or NULL for an unknown hash.  */
const uint8_t *cs_mech_digest_info_prefix (CK_MECHANISM_TYPE hash, size_t *len_p);

/*  Writes prefix || digest into out (max bytes).  Returns the length, or 0
 *  when the hash is unknown, the digest length is wrong, or out is too small.  */
size_t cs_mech_digest_info (CK_MECHANISM_TYPE hash, const uint8_t *digest, size_t digest_len,
                            uint8_t *out, size_t max);

/*  Validates an application's mechanism for `entry` with a key of
 *  `key_type` whose modulus is `modulus_bytes` long (0 for EC), and fills
 *  *params (caller clears it with cs_mech_params_clear).  Returns CKR_OK,
 *  CKR_KEY_TYPE_INCONSISTENT, or CKR_MECHANISM_PARAM_INVALID for a bad
 *  parameter block: wrong size; unknown hashAlg (for CKM_SHAx_RSA_PKCS_PSS it
 *  must be that hash); unknown MGF; sLen > k - hLen - 2; OAEP source other
 *  than CKZ_DATA_SPECIFIED; a label over CS_WIRE_MAX_LABEL bytes; for CKM_ML_DSA
 *  (PKCS#11 3.2) a parameter that is neither absent nor a
 *  CK_SIGN_ADDITIONAL_CONTEXT, a hedge variant other than the three CKH_*
 *  values, a context over 255 bytes or a NULL context of non-zero length.  */
CK_RV cs_mech_check (const cs_mech_row_t *entry, const CK_MECHANISM *mech, CK_KEY_TYPE key_type,
                     size_t modulus_bytes, cs_mech_params_t *params);

/*  Frees the label and zeroes *params.  NULL-safe.  */
void cs_mech_params_clear (cs_mech_params_t *params);

#endif
