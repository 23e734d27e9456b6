/*  drv_util.h — helpers shared by the shim drivers (compiled into each
 *  driver module, never exported): PKCS#11 hash ids to OpenSSL digests,
 *  ECDSA DER to raw r||s, OAEP unpadding after a raw RSA decrypt.
 */
#ifndef DRV_UTIL_H_INCLUDED
#define DRV_UTIL_H_INCLUDED

#include <stddef.h>
#include <openssl/evp.h>
#include "cs_driver.h"

/*  Returns the OpenSSL digest of a PKCS#11 hash mechanism (CKM_SHA_1,
 *  CKM_SHA224 ... CKM_SHA512), or NULL when unknown.  */
const EVP_MD *drv_md_from_ckm (CK_MECHANISM_TYPE hash);

/*  Returns the OpenSSL digest of an MGF1 id (CKG_MGF1_SHA1 ... CKG_MGF1_SHA512),
 *  or NULL when unknown.  */
const EVP_MD *drv_md_from_mgf (CK_RSA_PKCS_MGF_TYPE mgf);

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
CK_RV drv_oaep_unpad (const unsigned char *em, size_t k, const cs_mech_t *mech,
                      unsigned char *out, size_t *out_len);

/*  Returns the string value of `path` under config node `config`, or
 *  `fallback` when the key is absent.  The result is owned by the config.  */
const char *drv_config_get (zconfig_t *config, const char *path, const char *fallback);

#endif
