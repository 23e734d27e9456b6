/*  drv_evp.h — sign, decrypt and derive with an OpenSSL
 *  EVP_PKEY, for the drivers that compute on the broker's cores.
 *  Compiled into each driver module (and the broker), never exported.
 */
#ifndef DRV_EVP_H_INCLUDED
#define DRV_EVP_H_INCLUDED

#include <stddef.h>
#include <openssl/evp.h>
#include "cs_driver.h"

/*  Signs `in` with pkey under a raw mechanism on the broker's cores:
 *  CKM_RSA_PKCS (in = DigestInfo, PKCS#1 v1.5 type 1 padding, no hashing),
 *  CKM_RSA_PKCS_PSS (in = digest of mech->hash; any hash, MGF1, salt),
 *  CKM_RSA_X_509 (in = at most k bytes, left-padded with zeros; raw RSA),
 *  CKM_ECDSA (in = digest; out = raw r||s, PKCS#11 2.40 §2.3.1),
 *  CKM_EDDSA (in = the whole message; Ed25519 pure, RFC 8032).
 *  *out_len: capacity in, bytes written out.  Returns CKR_OK,
 *  CKR_KEY_TYPE_INCONSISTENT, CKR_MECHANISM_INVALID, CKR_MECHANISM_PARAM_INVALID,
 *  CKR_DATA_LEN_RANGE, CKR_BUFFER_TOO_SMALL or CKR_FUNCTION_FAILED.
 *  Thread-safe: pkey is only read.  */
CK_RV drv_evp_sign (EVP_PKEY *pkey, const cs_drv_mech_t *mech, const unsigned char *in, size_t in_len,
                    unsigned char *out, size_t *out_len);

/*  Decrypts with an RSA pkey: CKM_RSA_PKCS, CKM_RSA_PKCS_OAEP (any SHA-1/SHA-2
 *  hash and MGF1, optional label), CKM_RSA_X_509 (raw, k bytes out).
 *  Returns CKR_OK, CKR_KEY_TYPE_INCONSISTENT, CKR_MECHANISM_INVALID,
 *  CKR_MECHANISM_PARAM_INVALID, CKR_ENCRYPTED_DATA_LEN_RANGE,
 *  CKR_ENCRYPTED_DATA_INVALID or CKR_BUFFER_TOO_SMALL.  */
CK_RV drv_evp_decrypt (EVP_PKEY *pkey, const cs_drv_mech_t *mech, const unsigned char *in,
                       size_t in_len, unsigned char *out, size_t *out_len);

/*  The raw ECDH shared secret Z (SEC 1 §3.3.1, the X coordinate, field-size
 *  bytes) of an EC private pkey and the peer point `point` (uncompressed
 *  04 || X || Y, point_len bytes) on the same curve; OpenSSL checks the peer
 *  key (EVP_PKEY_derive_set_peer validates it).  *out_len: capacity in,
 *  bytes written out; the caller wipes out.  Returns CKR_OK,
 *  CKR_KEY_TYPE_INCONSISTENT, CKR_MECHANISM_PARAM_INVALID (bad or off-curve
 *  point), CKR_BUFFER_TOO_SMALL or CKR_DEVICE_ERROR.  PKCS#11 2.40 curr.
 *  mech. §2.3.14.  */
CK_RV drv_evp_derive (EVP_PKEY *pkey, const unsigned char *point, size_t point_len,
                      unsigned char *out, size_t *out_len);

#endif
