/*  key_info.h — the public description (cs.KeyInfo) of a private key, built
 *  from an OpenSSL EVP_PKEY in exactly one place: cryptoserver-admin (key
 *  generate/import) and the broker (keys generated or imported through the
 *  module) both call key_info_from_pkey, so every keystore key carries the
 *  same attributes.  Also the PKCS#8 encoding stored in the keystore.
 */
#ifndef CS_KEY_INFO_H_INCLUDED
#define CS_KEY_INFO_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <openssl/evp.h>
#include <p11-kit/pkcs11.h>
#include "cryptoserver.pb-c.h"
#include "cs_keyfacts.h"       /* cs_pkey_to_pkcs8, cs_pkey_from_pkcs8 */

#define KEY_INFO_ID_LEN 20              /* bytes of a derived CKA_ID (SHA-1) */

/*  How the key came to be and what to call it.  Every field may be zero/NULL.  */
typedef struct {
    const char *ref;            /* KeyInfo.ref; NULL = a fresh "ks:..." (keystore_ref_new) */
    const char *label;          /* CKA_LABEL (UTF-8); NULL = "" */
    const uint8_t *id;          /* CKA_ID, id_len bytes; NULL = key_info_derive_id */
    size_t id_len;
    const char *home;           /* KeyInfo.home; NULL = "keystore" */
    bool generated;             /* made by us (C_GenerateKeyPair, admin key generate):
                                   CKA_LOCAL, CKA_ALWAYS_SENSITIVE, CKA_NEVER_EXTRACTABLE
                                   TRUE and CKA_KEY_GEN_MECHANISM set; FALSE for imports */
} key_info_params_t;

/*  Builds the KeyInfo of `pkey` (RSA, EC on a named curve, or Ed25519; a
 *  private or public key) per PKCS#11 2.40 §2.1 (RSA), §2.3 (EC) and 3.0
 *  §2.3.5 (Edwards):
 *    key_type CKK_RSA / CKK_EC / CKK_EC_EDWARDS; bits = modulus bits, curve
 *    bits, or 256 for Ed25519;
 *    RSA: modulus, public_exponent (big-endian, no leading zeros);
 *    EC:  ec_params = DER OID of the named curve, ec_point = DER OCTET STRING
 *         of the uncompressed point (X9.62);
 *    Ed25519: ec_params = DER OID 1.3.101.112 (RFC 8410), ec_point = DER
 *         OCTET STRING of the 32-byte public key (RFC 8032);
 *    can_sign TRUE, can_decrypt TRUE for RSA only; has_private (when pkey
 *    holds a private key), has_public TRUE; home, ref, label, id from params;
 *    private_attributes: CKA_SENSITIVE TRUE, CKA_EXTRACTABLE FALSE,
 *      CKA_ALWAYS_SENSITIVE and CKA_NEVER_EXTRACTABLE = generated,
 *      CKA_LOCAL = generated, CKA_KEY_GEN_MECHANISM (CKM_RSA_PKCS_KEY_PAIR_GEN,
 *      CKM_EC_KEY_PAIR_GEN, CKM_EC_EDWARDS_KEY_PAIR_GEN, or
 *      CK_UNAVAILABLE_INFORMATION when not generated);
 *    public_attributes: CKA_LOCAL and CKA_KEY_GEN_MECHANISM likewise.
 *  The caller may change fields afterwards (e.g. can_decrypt from a template).
 *  Returns the KeyInfo, every field malloc'd, so the caller frees it with
 *  cs__key_info__free_unpacked (info, NULL); NULL for another key type, a
 *  curve without a name, or out of memory.  pkey is only read.  */
Cs__KeyInfo *key_info_from_pkey (EVP_PKEY *pkey, const key_info_params_t *params);

/*  Builds the KeyInfo of a post-quantum key pair (issue #23; PKCS#11 3.2):
 *  key_type CKK_ML_DSA (FIPS 204) or CKK_ML_KEM (FIPS 203), parameter_set
 *  its CKP_* (1..3, CKA_PARAMETER_SET), public_value a copy of pub (pub_len
 *  bytes: the raw pk / ek, CKA_VALUE of the public object), bits 0 (these
 *  keys have no size in bits); can_sign for ML-DSA, can_decrypt never;
 *  has_private and has_public TRUE; CKA_ID (unless params gives one) the
 *  SHA-1 of pub, as key_info_derive_id does with a SPKI's key bits;
 *  private and public attributes as key_info_from_pkey, with
 *  CKA_KEY_GEN_MECHANISM CKM_ML_DSA_KEY_PAIR_GEN / CKM_ML_KEM_KEY_PAIR_GEN.
 *  Returns the KeyInfo (caller frees with cs__key_info__free_unpacked), or
 *  NULL for another type, a parameter set out of 1..3, no pub, or out of
 *  memory.  */
Cs__KeyInfo *key_info_from_pq (CK_KEY_TYPE key_type, CK_ULONG parameter_set, const uint8_t *pub, size_t pub_len,
                               const key_info_params_t *params);

/*  Writes the derived CKA_ID of `pkey` into id (KEY_INFO_ID_LEN bytes): the
 *  SHA-1 of the subjectPublicKey BIT STRING contents (RFC 5280 §4.2.1.2
 *  method 1), i.e. the Subject Key Identifier that `openssl x509` and most
 *  CAs put in a certificate for this key, so certificates pair with keys by
 *  CKA_ID.  Returns 0 or -1.  */
int key_info_derive_id (EVP_PKEY *pkey, uint8_t id [KEY_INFO_ID_LEN]);

/*  The fingerprint of pkey's public key: SHA-256 of its DER
 *  SubjectPublicKeyInfo (RFC 5280 §4.1.2.7), 32 bytes into out, and its
 *  first 8 bytes as 16 hex digits into hex (17 bytes with the NUL; NULL:
 *  none) for log lines.  What keystore_issued_record records (issue 19).
 *  Returns 0 or -1.  */
int key_info_fingerprint (EVP_PKEY *pkey, uint8_t out [32], char *hex);

/*  The value of attribute `type` among info's private (private_side) or
 *  public attributes, or NULL when it is not there.  Borrowed.  */
const Cs__Attribute *key_info_attribute (const Cs__KeyInfo *info, bool private_side, CK_ATTRIBUTE_TYPE type);

#endif
