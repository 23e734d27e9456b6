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

/*  The k-byte block of an RSA signature around a raw private-key operation
 *  (k = the modulus length, modulus_bits its bit length): CKM_RSA_PKCS
 *  EMSA-PKCS1-v1_5 type 1 around the given DigestInfo (RFC 8017 §9.2 step
 *  5), CKM_RSA_PKCS_PSS EMSA-PSS over a digest (drv_pss_encode), CKM_RSA_X_509
 *  the input left-padded with zeros.  Returns CKR_OK, CKR_DATA_LEN_RANGE,
 *  CKR_MECHANISM_INVALID (another mechanism), drv_pss_encode's errors or
 *  CKR_FUNCTION_FAILED.  */
CK_RV drv_rsa_sign_block (const cs_drv_mech_t *mech, const unsigned char *in, size_t in_len,
                          size_t modulus_bits, unsigned char *em, size_t k);

/*  Removes the padding of em, the k-byte result of a raw RSA decryption,
 *  into out (*out_len: capacity in, bytes written out): CKM_RSA_PKCS_OAEP
 *  (drv_oaep_unpad), CKM_RSA_X_509 (the k bytes), else EME-PKCS1-v1_5 (RFC
 *  8017 §7.2.2).  Every padding failure is the same CKR_ENCRYPTED_DATA_INVALID
 *  from OpenSSL's constant-time checks; only a message that decoded and does
 *  not fit gives CKR_BUFFER_TOO_SMALL (PKCS#11 2.40 §5.2).  */
CK_RV drv_rsa_unpad (const cs_drv_mech_t *mech, const unsigned char *em, size_t k,
                     unsigned char *out, size_t *out_len);

#endif
