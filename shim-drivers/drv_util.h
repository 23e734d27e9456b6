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
CK_RV drv_evp_sign (EVP_PKEY *pkey, const cs_mech_t *mech, const unsigned char *in, size_t in_len,
                    unsigned char *out, size_t *out_len);

/*  Decrypts with an RSA pkey: CKM_RSA_PKCS, CKM_RSA_PKCS_OAEP (any SHA-1/SHA-2
 *  hash and MGF1, optional label), CKM_RSA_X_509 (raw, k bytes out).
 *  Returns CKR_OK, CKR_KEY_TYPE_INCONSISTENT, CKR_MECHANISM_INVALID,
 *  CKR_MECHANISM_PARAM_INVALID, CKR_ENCRYPTED_DATA_LEN_RANGE,
 *  CKR_ENCRYPTED_DATA_INVALID or CKR_BUFFER_TOO_SMALL.  */
CK_RV drv_evp_decrypt (EVP_PKEY *pkey, const cs_mech_t *mech, const unsigned char *in,
                       size_t in_len, unsigned char *out, size_t *out_len);

/*  The raw ECDH shared secret Z (SEC 1 §3.3.1, the X coordinate, field-size
 *  bytes) of an EC private pkey and the peer point `point` (uncompressed
 *  04 || X || Y, point_len bytes) on the same curve; OpenSSL checks the peer
 *  key (EVP_PKEY_derive_set_peer validates it).  *out_len: capacity in,
 *  bytes written out; the caller wipes out.  Returns CKR_OK,
 *  CKR_KEY_TYPE_INCONSISTENT, CKR_MECHANISM_PARAM_INVALID (bad or off-curve
 *  point), CKR_BUFFER_TOO_SMALL or CKR_DEVICE_ERROR.  PKCS#11 2.40 curr.
 *  mech. §2.3.14.  An X25519 or X448 pkey takes the peer's raw u-coordinate
 *  (32 or 56 bytes) and gives a secret as long (RFC 7748 §6; OpenSSL
 *  refuses the all-zero secret of a small-order point).  */
CK_RV drv_evp_derive (EVP_PKEY *pkey, const unsigned char *point, size_t point_len,
                      unsigned char *out, size_t *out_len);

/*  EMSA-PSS encoding (RFC 8017 §9.1.1) of `digest` (the hash of mech->hash)
 *  with MGF1 of mech->mgf and salt mech->salt_len, into em (k bytes, k = the
 *  modulus length, modulus_bits its bit length), ready for a raw RSA
 *  (CKM_RSA_X_509) private-key operation: the fallback of boards that lack
 *  CKM_RSA_PKCS_PSS for a hash/MGF pair.  Returns CKR_OK,
 *  CKR_MECHANISM_PARAM_INVALID (unknown hash or MGF, salt too long),
 *  CKR_DATA_LEN_RANGE (digest length is not the hash's) or
 *  CKR_FUNCTION_FAILED.  */
CK_RV drv_pss_encode (const cs_mech_t *mech, const unsigned char *digest, size_t digest_len,
                      size_t modulus_bits, unsigned char *em, size_t k);

/*  Wraps data in a DER OCTET STRING (CKA_EC_POINT's form): malloc'd, *out_len
 *  bytes, caller frees; NULL when out of memory or over 65535 bytes.  */
unsigned char *drv_der_octet_string (const unsigned char *data, size_t len, size_t *out_len);

/*  The PKCS#11 key type of pkey (CKK_RSA, CKK_EC, CKK_EC_EDWARDS for
 *  Ed25519), or CKK_VENDOR_DEFINED when unsupported.  */
CK_KEY_TYPE drv_evp_key_type (const EVP_PKEY *pkey);

/*  Fills key's type, bits and public attributes (modulus and exponent, or
 *  CKA_EC_PARAMS and CKA_EC_POINT) from pkey; id and label are left alone.
 *  Members are malloc'd (cs_key_info_free_members).  Returns 0, or -1.  */
int drv_key_info_from_pkey (EVP_PKEY *pkey, cs_key_info_t *key);

/*  Parses PKCS#8 DER (len bytes) into a new EVP_PKEY (caller frees), or NULL.  */
EVP_PKEY *drv_pkey_from_pkcs8 (const unsigned char *der, size_t len);

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

/*  Returns the string value of `path` under config node `config`, or
 *  `fallback` when the key is absent.  The result is owned by the config.  */
const char *drv_config_get (zconfig_t *config, const char *path, const char *fallback);

#endif
