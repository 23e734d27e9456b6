/*  cs_keyfacts.h — the public facts of an OpenSSL key, in the DER forms
 *  PKCS#11 attributes carry: big-endian integers (CKA_MODULUS,
 *  CKA_PUBLIC_EXPONENT), the curve OID (CKA_EC_PARAMS) and the DER OCTET
 *  STRING around the public point (CKA_EC_POINT), plus PKCS#8 in and out.
 *  One copy for the module, the keystore and the drivers.  Returns 0/-1 or
 *  NULL on failure (any OpenSSL error is cleared); every buffer returned is
 *  malloc'd and the caller frees it.
 */
#ifndef CS_KEYFACTS_H_INCLUDED
#define CS_KEYFACTS_H_INCLUDED

#include <stddef.h>
#include <stdint.h>
#include <openssl/evp.h>
#include <p11-kit/pkcs11.h>

/*  The PKCS#11 key type of pkey: CKK_RSA, CKK_EC, CKK_EC_EDWARDS (Ed25519),
 *  or CKK_VENDOR_DEFINED for any other kind.  */
CK_KEY_TYPE cs_pkey_key_type (const EVP_PKEY *pkey);

/*  The security strength in bits of a key (NIST SP 800-57 Part 1 Rev. 5
 *  §5.6.1.1 table 2) of PKCS#11 type `type` and size `bits`: the modulus
 *  bits of CKK_RSA (under 2048: 80; 2048: 112; 3072: 128; 7680: 192;
 *  15360: 256), the field bits of CKK_EC, CKK_EC_EDWARDS and
 *  CKK_EC_MONTGOMERY (half of them, at most 256), 112 for three-key CKK_DES3
 *  and 56 for CKK_DES whatever `bits` says, and the value bits of any other
 *  (secret) key, at most 256.  The one rule the module and the broker judge
 *  "a key under a weaker key" by (docs/contracts/keys.md).  */
unsigned cs_key_strength (CK_KEY_TYPE type, size_t bits);

/*  cs_key_strength of an OpenSSL key: RSA by its modulus bits, EC by its
 *  curve's bits, Edwards and Montgomery keys by OpenSSL's own figure
 *  (EVP_PKEY_get_security_bits: 128 for the 25519 curves, 224 for the
 *  448 ones).  0 for a key OpenSSL gives no figure for.  */
unsigned cs_pkey_strength (const EVP_PKEY *pkey);

/*  Wraps len bytes of data in a DER OCTET STRING (X.690 §8.7; the form of
 *  CKA_EC_POINT, PKCS#11 2.40 curr. mech. §2.3.3).  Returns the encoding
 *  (*out_len bytes, caller frees), or NULL when out of memory or len is
 *  over 65535 bytes.  */
uint8_t *cs_der_octet_string (const uint8_t *data, size_t len, size_t *out_len);

/*  The DER encoding of the OBJECT IDENTIFIER of OpenSSL nid (X.690 §8.19),
 *  *len_p bytes, caller frees; NULL for an unknown nid or out of memory.  */
uint8_t *cs_der_oid (int nid, size_t *len_p);

/*  The big-endian bytes of BIGNUM parameter `name` of pkey
 *  (OSSL_PKEY_PARAM_RSA_N, OSSL_PKEY_PARAM_RSA_E ...) into *out_p
 *  (*len_p bytes, no leading zeros; caller frees).  Returns 0, or -1 when
 *  pkey lacks the parameter or out of memory.  */
int cs_pkey_bn (const EVP_PKEY *pkey, const char *name, uint8_t **out_p, size_t *len_p);

/*  CKA_EC_PARAMS of an EC or Ed25519 pkey: the DER OID of its named curve
 *  (id-Ed25519 of RFC 8410 §3 for Ed25519), *len_p bytes, caller frees.
 *  Returns NULL for another key kind, an unnamed curve or out of memory.  */
uint8_t *cs_pkey_ec_params (const EVP_PKEY *pkey, size_t *len_p);

/*  CKA_EC_POINT of an EC or Ed25519 pkey: the DER OCTET STRING around the
 *  X9.62 encoded point (EC) or the 32 raw public bytes (Ed25519, RFC 8032
 *  §5.1.5), *len_p bytes, caller frees.  NULL for another kind or out of
 *  memory.  */
uint8_t *cs_pkey_ec_point (const EVP_PKEY *pkey, size_t *len_p);

/*  Parses PKCS#8 PrivateKeyInfo DER (RFC 5208 §5; exactly len bytes, no
 *  trailing data, at most 65536) into a new EVP_PKEY (caller frees), or NULL.  */
EVP_PKEY *cs_pkey_from_pkcs8 (const uint8_t *der, size_t len);

/*  The PKCS#8 PrivateKeyInfo DER of a private pkey (RFC 5208 §5), *len_p
 *  bytes; the caller wipes (OPENSSL_cleanse) and frees it.  NULL when pkey
 *  is NULL, has no private part, or out of memory.  */
uint8_t *cs_pkey_to_pkcs8 (const EVP_PKEY *pkey, size_t *len_p);

#endif
