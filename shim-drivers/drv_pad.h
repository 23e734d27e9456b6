/*  drv_pad.h — the encodings around raw private-key
 *  operations: ECDSA DER to PKCS#11 r||s, EME-OAEP decoding, EMSA-PSS encoding.
 *  Compiled into each driver module (and the broker), never exported.
 */
#ifndef DRV_PAD_H_INCLUDED
#define DRV_PAD_H_INCLUDED

#include <stddef.h>
#include <openssl/evp.h>
#include "cs_driver.h"

/*  Converts a DER ECDSA-Sig-Value (der_len bytes) into PKCS#11's raw r||s,
 *  each half `half` bytes (the curve's field size, PKCS#11 v2.40 §2.3.1).
 *  *out_len: capacity in, bytes written out.  Returns CKR_OK,
 *  CKR_BUFFER_TOO_SMALL or CKR_FUNCTION_FAILED.  */
CK_RV drv_ecdsa_der_to_raw (const unsigned char *der, size_t der_len, size_t half,
                            unsigned char *out, size_t *out_len);

/*  Removes EME-OAEP padding (RFC 8017 §7.1.2) from em, the k-byte result of a
 *  raw RSA decryption (k = modulus bytes), with the hash, MGF1 hash and label
 *  of mech.  Constant time in the padding check (OpenSSL).  *out_len:
 *  capacity in, bytes written out.  Returns CKR_OK, CKR_MECHANISM_PARAM_INVALID
 *  (unknown hash) or CKR_ENCRYPTED_DATA_INVALID on any padding failure.  */
CK_RV drv_oaep_unpad (const unsigned char *em, size_t k, const cs_drv_mech_t *mech,
                      unsigned char *out, size_t *out_len);

/*  EMSA-PSS encoding (RFC 8017 §9.1.1) of `digest` (the hash of mech->hash)
 *  with MGF1 of mech->mgf and salt mech->salt_len, into em (k bytes, k = the
 *  modulus length, modulus_bits its bit length), ready for a raw RSA
 *  (CKM_RSA_X_509) private-key operation: the fallback of boards that lack
 *  CKM_RSA_PKCS_PSS for a hash/MGF pair.  Returns CKR_OK,
 *  CKR_MECHANISM_PARAM_INVALID (unknown hash or MGF, salt too long),
 *  CKR_DATA_LEN_RANGE (digest length is not the hash's) or
 *  CKR_FUNCTION_FAILED.  */
CK_RV drv_pss_encode (const cs_drv_mech_t *mech, const unsigned char *digest, size_t digest_len,
                      size_t modulus_bits, unsigned char *em, size_t k);

#endif
