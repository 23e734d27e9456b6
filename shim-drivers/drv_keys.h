/*  drv_keys.h — a driver key's public description from an
 *  EVP_PKEY, curve names of CKA_EC_PARAMS, key generation with OpenSSL.
 *  Compiled into each driver module (and the broker), never exported.
 */
#ifndef DRV_KEYS_H_INCLUDED
#define DRV_KEYS_H_INCLUDED

#include <stddef.h>
#include <openssl/evp.h>
#include "cs_driver.h"

/*  Fills key's type, bits and public attributes (modulus and exponent, or
 *  CKA_EC_PARAMS and CKA_EC_POINT) from pkey; id and label are left alone.
 *  Members are malloc'd (cs_key_info_free_members).  Returns 0, or -1.  */
int drv_key_info_from_pkey (EVP_PKEY *pkey, cs_key_info_t *key);

/*  Maps a DER CKA_EC_PARAMS (named-curve OID, or the PrintableString
 *  "edwards25519" of PKCS#11 3.0 §2.3.10) to an OpenSSL group name
 *  ("P-256", "P-384", "P-521", "ED25519", "ED448", "X25519", "X448"; the RFC
 *  8410 OIDs 1.3.101.110/111/113 or "curve25519", "curve448", "edwards448");
 *  NULL when unsupported.  */
const char *drv_curve_name (const unsigned char *ec_params, size_t len);

/*  The OpenSSL key type (EVP_PKEY_ED25519, EVP_PKEY_ED448) of a curve name of
 *  drv_curve_name whose keys are raw byte strings (RFC 8410); 0 for the
 *  others and for NULL.  */
int drv_raw_pkey_type (const char *curve);

/*  The key-pair generation mechanism of a curve name of drv_curve_name:
 *  CKM_EC_EDWARDS_KEY_PAIR_GEN (Ed25519, Ed448), CKM_EC_MONTGOMERY_KEY_PAIR_GEN
 *  (X25519, X448; PKCS#11 3.0 §2.3.7) or CKM_EC_KEY_PAIR_GEN (the others).  */
CK_MECHANISM_TYPE drv_curve_gen_mechanism (const char *curve);

/*  Generates the key pair of gen with OpenSSL (RSA 1024..8192 with an odd
 *  exponent >= 3 of at most 8 bytes; P-256/384/521; Ed25519, Ed448; X25519, X448) and returns its
 *  PKCS#8 DER in *der_p (malloc'd, *len_p bytes; caller wipes and frees).
 *  Returns CKR_OK, CKR_MECHANISM_INVALID, CKR_KEY_SIZE_RANGE,
 *  CKR_ATTRIBUTE_VALUE_INVALID, CKR_DOMAIN_PARAMS_INVALID or CKR_DEVICE_ERROR.  */
CK_RV drv_evp_generate (const cs_keygen_t *gen, unsigned char **der_p, size_t *len_p);

#endif
