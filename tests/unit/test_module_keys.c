/*  test_module_keys.c — the key life cycle in the module without a broker:
 *  templates → PKCS#8/SPKI and back (keys built from components sign, and
 *  OpenSSL verifies), C_GenerateKeyPair template checks, the attribute change
 *  rules of PKCS#11 2.40 §4.1.2 with their exact CK_RVs, per-request keys
 *  gone when their session closes, and a find over 1000 keys.  */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/rsa.h>
#include <openssl/x509.h>
#include "cs_attr_rules.h"
#include "keyder.h"
#include "keymgmt.h"
#include "object.h"
#include "login.h"
#include "token.h"

static CK_BBOOL s_true = CK_TRUE, s_false = CK_FALSE;
static const uint8_t s_p256 [] = { 0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07 };
static const uint8_t s_ed25519 [] = { 0x06, 0x03, 0x2b, 0x65, 0x70 };

static void
s_teardown (void)
{
    cs_object_reset_inlock ();
    cs_token_reset_inlock ();
}

static void
s_login (void)
{
    ck_assert_uint_eq (cs_token_login_store_inlock (CKU_USER, (const uint8_t *) "\x01t", 2), CKR_OK);
}

/*  Big-endian bytes of a BIGNUM parameter of pkey (static buffers by slot).  */
static CK_ATTRIBUTE
s_bn_attr (EVP_PKEY *pkey, const char *name, CK_ATTRIBUTE_TYPE type, uint8_t *buf)
{
    BIGNUM *bn = NULL;
    ck_assert (EVP_PKEY_get_bn_param (pkey, name, &bn));
    CK_ATTRIBUTE attr = { type, buf, (CK_ULONG) BN_bn2bin (bn, buf) };
    BN_free (bn);
    return attr;
}

/*  Signs `msg` with the PKCS#8 of `key` and verifies it with `pub`.  */
static void
s_sign_verify (const cs_key_t *key, EVP_PKEY *pub, const EVP_MD *md)
{
    const unsigned char *p = key->pkcs8, msg [] = "cryptoserver";
    unsigned char sig [1024];
    size_t sig_len = sizeof sig;
    EVP_PKEY *priv = d2i_AutoPrivateKey (NULL, &p, (long) key->pkcs8_len);
    EVP_MD_CTX *ctx = EVP_MD_CTX_new ();
    ck_assert_ptr_nonnull (priv);
    ck_assert_int_eq (EVP_DigestSignInit (ctx, NULL, md, NULL, priv), 1);
    ck_assert_int_eq (EVP_DigestSign (ctx, sig, &sig_len, msg, sizeof msg), 1);
    EVP_MD_CTX_free (ctx);
    ctx = EVP_MD_CTX_new ();
    ck_assert_int_eq (EVP_DigestVerifyInit (ctx, NULL, md, NULL, pub), 1);
    ck_assert_int_eq (EVP_DigestVerify (ctx, sig, sig_len, msg, sizeof msg), 1);
    EVP_MD_CTX_free (ctx);
    EVP_PKEY_free (priv);
}

START_TEST (test_rsa_components)
{
    static uint8_t bufs [8][512];
    static const char *names [] = { OSSL_PKEY_PARAM_RSA_N, OSSL_PKEY_PARAM_RSA_E, OSSL_PKEY_PARAM_RSA_D,
        OSSL_PKEY_PARAM_RSA_FACTOR1, OSSL_PKEY_PARAM_RSA_FACTOR2, OSSL_PKEY_PARAM_RSA_EXPONENT1,
        OSSL_PKEY_PARAM_RSA_EXPONENT2, OSSL_PKEY_PARAM_RSA_COEFFICIENT1 };
    static const CK_ATTRIBUTE_TYPE types [] = { CKA_MODULUS, CKA_PUBLIC_EXPONENT, CKA_PRIVATE_EXPONENT,
        CKA_PRIME_1, CKA_PRIME_2, CKA_EXPONENT_1, CKA_EXPONENT_2, CKA_COEFFICIENT };
    EVP_PKEY *orig = EVP_RSA_gen (2048);
    CK_ATTRIBUTE tmpl [8];
    cs_key_t *key = NULL, *pub = NULL;
    uint8_t *spki = NULL, prime [512];
    size_t spki_len = 0;
    const unsigned char *p;
    EVP_PKEY *back;
    for (int i = 0; i < 8; i++)
        tmpl [i] = s_bn_attr (orig, names [i], types [i], bufs [i]);
    ck_assert_uint_eq (cs_keyder_private_from_template (CKK_RSA, tmpl, 8, &key), CKR_OK);
    ck_assert_uint_eq (key->key_type, CKK_RSA);
    ck_assert_uint_eq (key->modulus_len, 256);
    ck_assert_mem_eq (key->modulus, bufs [0], 256);
    s_sign_verify (key, orig, EVP_sha256 ());
    ck_assert_uint_eq (cs_keyder_component (key, CKA_PRIME_1, prime, sizeof prime), tmpl [3].ulValueLen);
    ck_assert_mem_eq (prime, bufs [3], tmpl [3].ulValueLen);
    /*  PKCS#8 needs the CRT values: without them (or some of them) it is incomplete.  */
    cs_key_unref (&key);
    ck_assert_uint_eq (cs_keyder_private_from_template (CKK_RSA, tmpl, 3, &key), CKR_TEMPLATE_INCOMPLETE);
    ck_assert_uint_eq (cs_keyder_private_from_template (CKK_RSA, tmpl, 5, &key), CKR_TEMPLATE_INCOMPLETE);
    ck_assert_uint_eq (cs_keyder_private_from_template (CKK_RSA, tmpl, 2, &key), CKR_TEMPLATE_INCOMPLETE);
    /*  The public key as SPKI is the same key.  */
    ck_assert_uint_eq (cs_keyder_public_from_template (CKK_RSA, tmpl, 2, &pub, &spki, &spki_len), CKR_OK);
    p = spki;
    back = d2i_PUBKEY (NULL, &p, (long) spki_len);
    ck_assert_int_eq (EVP_PKEY_eq (back, orig), 1);
    EVP_PKEY_free (back);
    free (spki);
    cs_key_unref (&pub);
    EVP_PKEY_free (orig);
}
END_TEST

START_TEST (test_ec_components)
{
    static const uint8_t printable [] = "\x13\x0aprime256v1";
    uint8_t scalar [66], encoded [160], value [66];
    size_t encoded_len = 0;
    EVP_PKEY *orig = EVP_EC_gen ("P-256");
    CK_ATTRIBUTE d = s_bn_attr (orig, OSSL_PKEY_PARAM_PRIV_KEY, CKA_VALUE, scalar);
    CK_ATTRIBUTE tmpl [] = { { CKA_EC_PARAMS, (void *) s_p256, sizeof s_p256 }, d };
    cs_key_t *key = NULL;
    const uint8_t *raw;
    size_t raw_len;
    ck_assert_uint_eq (cs_keyder_private_from_template (CKK_EC, tmpl, 2, &key), CKR_OK);
    ck_assert (EVP_PKEY_get_octet_string_param (orig, OSSL_PKEY_PARAM_ENCODED_PUBLIC_KEY,
                                                encoded, sizeof encoded, &encoded_len));
    ck_assert (cs_key_ec_point_raw (key, &raw, &raw_len));
    ck_assert_uint_eq (raw_len, encoded_len);
    ck_assert_mem_eq (raw, encoded, raw_len);          /* the public point was derived */
    ck_assert_uint_eq (cs_key_signature_len (key), 64);
    s_sign_verify (key, orig, EVP_sha256 ());
    ck_assert_uint_eq (cs_keyder_component (key, CKA_VALUE, value, sizeof value), d.ulValueLen);
    ck_assert_mem_eq (value, scalar, d.ulValueLen);
    cs_key_unref (&key);
    /*  The curve by its printable name.  */
    tmpl [0] = (CK_ATTRIBUTE) { CKA_EC_PARAMS, (void *) printable, sizeof printable - 1 };
    ck_assert_uint_eq (cs_keyder_private_from_template (CKK_EC, tmpl, 2, &key), CKR_OK);
    cs_key_unref (&key);
    EVP_PKEY_free (orig);
}
END_TEST

START_TEST (test_ed25519_components)
{
    static const uint8_t printable [] = "\x13\x0c" "edwards25519";
    uint8_t seed [32], point [34] = { 0x04, 0x20 };
    size_t len = sizeof seed;
    EVP_PKEY *orig = EVP_PKEY_Q_keygen (NULL, NULL, "ED25519");
    CK_ATTRIBUTE tmpl [] = { { CKA_EC_PARAMS, (void *) printable, sizeof printable - 1 },
                             { CKA_VALUE, seed, sizeof seed } };
    CK_ATTRIBUTE pub_tmpl [] = { { CKA_EC_PARAMS, (void *) s_ed25519, sizeof s_ed25519 },
                                 { CKA_EC_POINT, point, sizeof point } };
    cs_key_t *key = NULL, *pub = NULL;
    EVP_PKEY *pub_pkey;
    ck_assert (EVP_PKEY_get_raw_private_key (orig, seed, &len));
    len = 32;
    ck_assert (EVP_PKEY_get_raw_public_key (orig, point + 2, &len));
    ck_assert_uint_eq (cs_keyder_private_from_template (CKK_EC_EDWARDS, tmpl, 2, &key), CKR_OK);
    ck_assert_uint_eq (key->key_type, CKK_EC_EDWARDS);
    ck_assert_uint_eq (key->ec_point_len, 34);
    ck_assert_mem_eq (key->ec_point, point, 34);
    ck_assert_uint_eq (cs_key_signature_len (key), 64);
    s_sign_verify (key, orig, NULL);
    ck_assert_uint_eq (cs_keyder_public_from_template (CKK_EC_EDWARDS, pub_tmpl, 2, &pub, NULL, NULL), CKR_OK);
    pub_pkey = cs_keyder_public_pkey (pub);
    s_sign_verify (key, pub_pkey, NULL);
    /*  Ed25519 parameters do not make an ECDSA key.  */
    ck_assert_uint_eq (cs_keyder_private_from_template (CKK_EC, tmpl, 2, &key), CKR_TEMPLATE_INCONSISTENT);
    EVP_PKEY_free (pub_pkey);
    cs_key_unref (&pub);
    cs_key_unref (&key);
    EVP_PKEY_free (orig);
}
END_TEST

START_TEST (test_template_errors)
{
    static const uint8_t p224 [] = { 0x06, 0x05, 0x2b, 0x81, 0x04, 0x00, 0x21 };
    static const uint8_t junk [] = { 0x30, 0x03, 0x02, 0x01, 0x01 };
    uint8_t zero [32] = { 0 }, one [1] = { 1 };
    CK_ATTRIBUTE tmpl [] = { { CKA_EC_PARAMS, (void *) s_p256, sizeof s_p256 }, { CKA_VALUE, zero, 32 } };
    const cs_curve_t *curve;
    cs_key_t *key = NULL;
    ck_assert_uint_eq (cs_keyder_private_from_template (CKK_EC, tmpl, 2, &key), CKR_ATTRIBUTE_VALUE_INVALID);
    ck_assert_uint_eq (cs_keyder_private_from_template (CKK_EC, tmpl, 1, &key), CKR_TEMPLATE_INCOMPLETE);
    tmpl [1] = (CK_ATTRIBUTE) { CKA_VALUE, one, 1 };
    ck_assert_uint_eq (cs_keyder_private_from_template (CKK_EC, tmpl, 2, &key), CKR_OK);
    cs_key_unref (&key);
    ck_assert_uint_eq (cs_curve_parse (p224, sizeof p224, &curve), CKR_CURVE_NOT_SUPPORTED);
    ck_assert_uint_eq (cs_curve_parse (junk, sizeof junk, &curve), CKR_ATTRIBUTE_VALUE_INVALID);
    ck_assert_uint_eq (cs_curve_parse ((const uint8_t *) "\x13\x05P-384", 7, &curve), CKR_OK);
    ck_assert_uint_eq (curve->bits, 384);
    ck_assert_uint_eq (cs_curve_parse ((const uint8_t *) "\x06\x09\x2b\x06\x01\x04\x01\xda\x47\x0f\x01", 11,
                                       &curve), CKR_OK);
    ck_assert_uint_eq (curve->key_type, CKK_EC_EDWARDS);
}
END_TEST

/*  ---- C_GenerateKeyPair templates -------------------------------------- */

START_TEST (test_keygen_standard_templates)
{
    CK_ULONG bits = 2048;
    CK_BYTE exponent [] = { 0x01, 0x00, 0x01 };
    CK_OBJECT_CLASS pub_class = CKO_PUBLIC_KEY, priv_class = CKO_PRIVATE_KEY;
    CK_KEY_TYPE ec = CKK_EC;
    /*  pkcs11-tool --keypairgen --key-type rsa:2048 --id 10 --label k1  */
    CK_ATTRIBUTE rsa_pub [] = {
        { CKA_TOKEN, &s_true, 1 }, { CKA_ENCRYPT, &s_true, 1 }, { CKA_VERIFY, &s_true, 1 },
        { CKA_WRAP, &s_true, 1 }, { CKA_MODULUS_BITS, &bits, sizeof bits },
        { CKA_PUBLIC_EXPONENT, exponent, 3 }, { CKA_LABEL, "k1", 2 }, { CKA_ID, "\x10", 1 } };
    CK_ATTRIBUTE rsa_priv [] = {
        { CKA_TOKEN, &s_true, 1 }, { CKA_PRIVATE, &s_true, 1 }, { CKA_SENSITIVE, &s_true, 1 },
        { CKA_DECRYPT, &s_true, 1 }, { CKA_SIGN, &s_true, 1 }, { CKA_UNWRAP, &s_true, 1 },
        { CKA_LABEL, "k1", 2 }, { CKA_ID, "\x10", 1 } };
    /*  p11tool --generate-privkey ecdsa --curve secp256r1  */
    CK_ATTRIBUTE ec_pub [] = {
        { CKA_CLASS, &pub_class, sizeof pub_class }, { CKA_KEY_TYPE, &ec, sizeof ec },
        { CKA_TOKEN, &s_true, 1 }, { CKA_VERIFY, &s_true, 1 },
        { CKA_EC_PARAMS, (void *) s_p256, sizeof s_p256 }, { CKA_LABEL, "e", 1 } };
    CK_ATTRIBUTE ec_priv [] = {
        { CKA_CLASS, &priv_class, sizeof priv_class }, { CKA_TOKEN, &s_true, 1 },
        { CKA_PRIVATE, &s_true, 1 }, { CKA_SIGN, &s_true, 1 }, { CKA_SENSITIVE, &s_true, 1 },
        { CKA_EXTRACTABLE, &s_false, 1 }, { CKA_LABEL, "e", 1 } };
    /*  pkcs11-tool --key-type EC:edwards25519 (0.23: the GnuPG OID), session keys.  */
    CK_ATTRIBUTE ed_pub [] = {
        { CKA_TOKEN, &s_false, 1 },
        { CKA_EC_PARAMS, "\x06\x09\x2b\x06\x01\x04\x01\xda\x47\x0f\x01", 11 } };
    CK_MECHANISM rsa = { CKM_RSA_PKCS_KEY_PAIR_GEN, NULL, 0 }, ecgen = { CKM_EC_KEY_PAIR_GEN, NULL, 0 };
    CK_MECHANISM edgen = { CKM_EC_EDWARDS_KEY_PAIR_GEN, NULL, 0 };
    cs_keygen_t gen;
    /*  pkcs11-tool's default template asks for CKA_WRAP (public) and
        CKA_DECRYPT, CKA_SIGN, CKA_UNWRAP (private): a key role with data
        roles, which the strict usage separation (the default) refuses
        (docs/CONTRACTS.md "Usage separation"); spec takes it.  */
    ck_assert_uint_eq (cs_keygen_check (&rsa, rsa_pub, 8, rsa_priv, 8, &gen), CKR_TEMPLATE_INCONSISTENT);
    cs_object_usage_set (CS_USAGE_SPEC);
    ck_assert_uint_eq (cs_keygen_check (&rsa, rsa_pub, 8, rsa_priv, 8, &gen), CKR_OK);
    cs_object_usage_set (CS_USAGE_STRICT);
    ck_assert (gen.token && gen.private_private);
    ck_assert_uint_eq (gen.modulus_bits, 2048);
    ck_assert_uint_eq (gen.exponent_len, 3);
    ck_assert_uint_eq (cs_keygen_check (&ecgen, ec_pub, 6, ec_priv, 7, &gen), CKR_OK);
    ck_assert_uint_eq (gen.curve->bits, 256);
    ck_assert_uint_eq (cs_keygen_check (&edgen, ed_pub, 2, NULL, 0, &gen), CKR_OK);
    ck_assert (!gen.token);
    ck_assert_uint_eq (gen.curve->key_type, CKK_EC_EDWARDS);
    /*  Only the token flags in the private template count too.  */
    ck_assert_uint_eq (cs_keygen_check (&ecgen, ec_pub + 4, 1, ec_priv, 7, &gen), CKR_OK);
    ck_assert (gen.token);
}
END_TEST

START_TEST (test_keygen_errors)
{
    CK_ULONG bits = 2048, small = 1000, four = 4;
    CK_KEY_TYPE ec = CKK_EC;
    CK_OBJECT_CLASS priv_class = CKO_PRIVATE_KEY;
    CK_BYTE even [] = { 0x01, 0x00, 0x00 }, one [] = { 0x01 };
    CK_MECHANISM rsa = { CKM_RSA_PKCS_KEY_PAIR_GEN, NULL, 0 }, ecgen = { CKM_EC_KEY_PAIR_GEN, NULL, 0 };
    CK_MECHANISM aes = { CKM_AES_KEY_GEN, NULL, 0 };
    cs_keygen_t gen;
#define PUB(...) (CK_ATTRIBUTE []) { __VA_ARGS__ }, sizeof ((CK_ATTRIBUTE []) { __VA_ARGS__ }) / sizeof (CK_ATTRIBUTE)
    ck_assert_uint_eq (cs_keygen_check (&rsa, PUB ({ CKA_TOKEN, &s_true, 1 }), NULL, 0, &gen), CKR_TEMPLATE_INCOMPLETE);
    ck_assert_uint_eq (cs_keygen_check (&rsa, PUB ({ CKA_MODULUS_BITS, &small, sizeof small }), NULL, 0, &gen),
                       CKR_KEY_SIZE_RANGE);
    ck_assert_uint_eq (cs_keygen_check (&rsa, PUB ({ CKA_MODULUS_BITS, &bits, sizeof bits },
                                                   { CKA_PUBLIC_EXPONENT, even, 3 }), NULL, 0, &gen),
                       CKR_ATTRIBUTE_VALUE_INVALID);
    ck_assert_uint_eq (cs_keygen_check (&rsa, PUB ({ CKA_MODULUS_BITS, &bits, sizeof bits },
                                                   { CKA_PUBLIC_EXPONENT, one, 1 }), NULL, 0, &gen),
                       CKR_ATTRIBUTE_VALUE_INVALID);
    ck_assert_uint_eq (cs_keygen_check (&rsa, PUB ({ CKA_MODULUS_BITS, &bits, 4 }), NULL, 0, &gen),
                       CKR_ATTRIBUTE_VALUE_INVALID);
    ck_assert_uint_eq (cs_keygen_check (&rsa, PUB ({ CKA_MODULUS_BITS, &bits, sizeof bits },
                                                   { CKA_KEY_TYPE, &ec, sizeof ec }), NULL, 0, &gen),
                       CKR_TEMPLATE_INCONSISTENT);
    ck_assert_uint_eq (cs_keygen_check (&rsa, PUB ({ CKA_MODULUS_BITS, &bits, sizeof bits },
                                                   { CKA_CLASS, &priv_class, sizeof priv_class }), NULL, 0, &gen),
                       CKR_TEMPLATE_INCONSISTENT);
    ck_assert_uint_eq (cs_keygen_check (&rsa, PUB ({ CKA_MODULUS_BITS, &bits, sizeof bits },
                                                   { CKA_LOCAL, &s_true, 1 }), NULL, 0, &gen),
                       CKR_ATTRIBUTE_READ_ONLY);
    ck_assert_uint_eq (cs_keygen_check (&rsa, PUB ({ CKA_MODULUS_BITS, &bits, sizeof bits },
                                                   { CKA_SIGN, &four, sizeof four }), NULL, 0, &gen),
                       CKR_ATTRIBUTE_VALUE_INVALID);
    ck_assert_uint_eq (cs_keygen_check (&rsa, PUB ({ CKA_MODULUS_BITS, &bits, sizeof bits },
                                                   { CKA_VENDOR_DEFINED | 1, &s_true, 1 }), NULL, 0, &gen),
                       CKR_ATTRIBUTE_TYPE_INVALID);
    ck_assert_uint_eq (cs_keygen_check (&ecgen, PUB ({ CKA_TOKEN, &s_true, 1 }), NULL, 0, &gen),
                       CKR_TEMPLATE_INCOMPLETE);
    ck_assert_uint_eq (cs_keygen_check (&ecgen, PUB ({ CKA_EC_PARAMS, (void *) s_ed25519, sizeof s_ed25519 }),
                                        NULL, 0, &gen), CKR_TEMPLATE_INCONSISTENT);
    ck_assert_uint_eq (cs_keygen_check (&aes, NULL, 0, NULL, 0, &gen), CKR_MECHANISM_INVALID);
#undef PUB
}
END_TEST

/*  ---- attribute rules ---------------------------------------------------- */

/*  A session P-256 private key of session 7, not sensitive, extractable.  */
static CK_OBJECT_HANDLE
s_session_ec_key (CK_SESSION_HANDLE session, uint8_t *scalar, size_t *scalar_len)
{
    EVP_PKEY *orig = EVP_EC_gen ("P-256");
    CK_ATTRIBUTE d = s_bn_attr (orig, OSSL_PKEY_PARAM_PRIV_KEY, CKA_VALUE, scalar);
    CK_OBJECT_CLASS klass = CKO_PRIVATE_KEY;
    CK_KEY_TYPE type = CKK_EC;
    CK_ATTRIBUTE tmpl [] = {
        { CKA_CLASS, &klass, sizeof klass }, { CKA_KEY_TYPE, &type, sizeof type },
        { CKA_EC_PARAMS, (void *) s_p256, sizeof s_p256 }, d,
        { CKA_SENSITIVE, &s_false, 1 }, { CKA_EXTRACTABLE, &s_true, 1 }, { CKA_LABEL, "mine", 4 } };
    CK_OBJECT_HANDLE handle = 0;
    cs_attrs_t attrs = { 0 };
    cs_key_t *key = NULL;
    bool token = true;
    ck_assert_uint_eq (cs_keymgmt_create_check (tmpl, 7, &klass, &type, &token), CKR_OK);
    ck_assert (!token);
    ck_assert_uint_eq (cs_keyder_private_from_template (CKK_EC, tmpl, 7, &key), CKR_OK);
    ck_assert_int_eq (cs_keymgmt_session_attrs (CKO_PRIVATE_KEY, tmpl, 7, CK_UNAVAILABLE_INFORMATION, &attrs), 0);
    ck_assert_uint_eq (cs_object_add_session_inlock (session, CKO_PRIVATE_KEY, key, &attrs, &handle), CKR_OK);
    cs_key_unref (&key);
    *scalar_len = d.ulValueLen;
    EVP_PKEY_free (orig);
    return handle;
}

static CK_RV
s_set (CK_OBJECT_HANDLE handle, CK_ATTRIBUTE_TYPE type, const void *value, CK_ULONG len)
{
    CK_ATTRIBUTE attr = { type, (void *) value, len };
    CK_RV rv = cs_object_check_change_inlock (handle, &attr, 1, false);
    return rv == CKR_OK ? cs_object_set_local_inlock (handle, &attr, 1) : rv;
}

START_TEST (test_attribute_rules)
{
    uint8_t scalar [66], value [66];
    size_t scalar_len = 0;
    CK_OBJECT_CLASS klass = CKO_PUBLIC_KEY;
    CK_ULONG mech = 0;
    CK_BBOOL local = CK_TRUE, always = CK_TRUE, never = CK_TRUE;
    CK_ATTRIBUTE get [] = {
        { CKA_VALUE, value, sizeof value }, { CKA_LOCAL, &local, 1 }, { CKA_ALWAYS_SENSITIVE, &always, 1 },
        { CKA_NEVER_EXTRACTABLE, &never, 1 }, { CKA_KEY_GEN_MECHANISM, &mech, sizeof mech } };
    CK_OBJECT_HANDLE handle;
    s_login ();
    handle = s_session_ec_key (7, scalar, &scalar_len);
    /*  A local, non-sensitive, extractable key shows its value; imported-key semantics.  */
    ck_assert_uint_eq (cs_object_get_attributes_inlock (handle, get, 5), CKR_OK);
    ck_assert_uint_eq (get [0].ulValueLen, scalar_len);
    ck_assert_mem_eq (value, scalar, scalar_len);
    ck_assert (!local && !always && !never);
    ck_assert_uint_eq (mech, CK_UNAVAILABLE_INFORMATION);
    /*  Free attributes.  */
    ck_assert_uint_eq (s_set (handle, CKA_LABEL, "renamed", 7), CKR_OK);
    ck_assert_uint_eq (s_set (handle, CKA_ID, "\x42", 1), CKR_OK);
    ck_assert_uint_eq (s_set (handle, CKA_SIGN, &s_false, 1), CKR_OK);
    CK_ATTRIBUTE label = { CKA_LABEL, value, sizeof value };
    ck_assert_uint_eq (cs_object_get_attributes_inlock (handle, &label, 1), CKR_OK);
    ck_assert_uint_eq (label.ulValueLen, 7);
    ck_assert_mem_eq (value, "renamed", 7);
    /*  Read-only ones.  */
    ck_assert_uint_eq (s_set (handle, CKA_CLASS, &klass, sizeof klass), CKR_ATTRIBUTE_READ_ONLY);
    ck_assert_uint_eq (s_set (handle, CKA_KEY_TYPE, &klass, sizeof klass), CKR_ATTRIBUTE_READ_ONLY);
    ck_assert_uint_eq (s_set (handle, CKA_EC_PARAMS, s_ed25519, sizeof s_ed25519), CKR_ATTRIBUTE_READ_ONLY);
    ck_assert_uint_eq (s_set (handle, CKA_LOCAL, &s_true, 1), CKR_ATTRIBUTE_READ_ONLY);
    ck_assert_uint_eq (s_set (handle, CKA_ALWAYS_SENSITIVE, &s_true, 1), CKR_ATTRIBUTE_READ_ONLY);
    ck_assert_uint_eq (s_set (handle, CKA_NEVER_EXTRACTABLE, &s_true, 1), CKR_ATTRIBUTE_READ_ONLY);
    ck_assert_uint_eq (s_set (handle, CKA_KEY_GEN_MECHANISM, &mech, sizeof mech), CKR_ATTRIBUTE_READ_ONLY);
    ck_assert_uint_eq (s_set (handle, CKA_VALUE, scalar, scalar_len), CKR_ATTRIBUTE_READ_ONLY);
    ck_assert_uint_eq (s_set (handle, CKA_TOKEN, &s_true, 1), CKR_ATTRIBUTE_READ_ONLY);
    CK_ATTRIBUTE to_token = { CKA_TOKEN, &s_true, 1 };
    ck_assert_uint_eq (cs_object_check_change_inlock (handle, &to_token, 1, true), CKR_OK);   /* a copy may */
    /*  Types the object does not have; a bad value.  */
    ck_assert_uint_eq (s_set (handle, CKA_VERIFY, &s_true, 1), CKR_ATTRIBUTE_TYPE_INVALID);
    ck_assert_uint_eq (s_set (handle, CKA_VALUE_LEN, &mech, sizeof mech), CKR_ATTRIBUTE_TYPE_INVALID);
    ck_assert_uint_eq (s_set (handle, CKA_SIGN, &mech, sizeof mech), CKR_ATTRIBUTE_VALUE_INVALID);
    /*  CKA_EXTRACTABLE TRUE→FALSE only; CKA_SENSITIVE FALSE→TRUE only.  */
    ck_assert_uint_eq (s_set (handle, CKA_EXTRACTABLE, &s_true, 1), CKR_OK);      /* unchanged */
    ck_assert_uint_eq (s_set (handle, CKA_SENSITIVE, &s_true, 1), CKR_OK);
    get [0].ulValueLen = sizeof value;
    ck_assert_uint_eq (cs_object_get_attributes_inlock (handle, get, 1), CKR_ATTRIBUTE_SENSITIVE);
    ck_assert_uint_eq (get [0].ulValueLen, CK_UNAVAILABLE_INFORMATION);
    ck_assert_uint_eq (s_set (handle, CKA_SENSITIVE, &s_false, 1), CKR_ATTRIBUTE_READ_ONLY);
    ck_assert_uint_eq (s_set (handle, CKA_EXTRACTABLE, &s_false, 1), CKR_OK);
    ck_assert_uint_eq (s_set (handle, CKA_EXTRACTABLE, &s_true, 1), CKR_ATTRIBUTE_READ_ONLY);
    /*  A handle that never was: invalid.  */
    ck_assert_uint_eq (s_set (4242, CKA_LABEL, "x", 1), CKR_OBJECT_HANDLE_INVALID);
}
END_TEST

/*  The rules of common/cs_attr_rules.h on a session key: the computed
 *  flags stay right, a copy cannot undo a latch, CKA_WRAP_WITH_TRUSTED
 *  latches, a sensitive value is CKR_ATTRIBUTE_SENSITIVE with the other
 *  entries filled (PKCS#11 2.40 §5.7), CKA_ALLOWED_MECHANISMS is stored,
 *  returned, read-only and checked (cs_object_mech_allowed_inlock).  */
START_TEST (test_attribute_rules_table)
{
    uint8_t scalar [66], value [66], label [8];
    size_t scalar_len = 0;
    CK_BBOOL always = CK_TRUE, never = CK_TRUE;
    CK_ATTRIBUTE flags [] = { { CKA_ALWAYS_SENSITIVE, &always, 1 }, { CKA_NEVER_EXTRACTABLE, &never, 1 } };
    CK_OBJECT_HANDLE handle;
    s_login ();
    handle = s_session_ec_key (7, scalar, &scalar_len);
    /*  SENSITIVE FALSE → TRUE, EXTRACTABLE TRUE → FALSE: the computed
        flags stay FALSE (the key was not always sensitive).  */
    ck_assert_uint_eq (s_set (handle, CKA_SENSITIVE, &s_true, 1), CKR_OK);
    ck_assert_uint_eq (s_set (handle, CKA_EXTRACTABLE, &s_false, 1), CKR_OK);
    ck_assert_uint_eq (cs_object_get_attributes_inlock (handle, flags, 2), CKR_OK);
    ck_assert (!always && !never);
    /*  A copy may not undo them either.  */
    CK_ATTRIBUTE insensitive = { CKA_SENSITIVE, &s_false, 1 }, extractable = { CKA_EXTRACTABLE, &s_true, 1 };
    CK_ATTRIBUTE always_true = { CKA_ALWAYS_SENSITIVE, &s_true, 1 };
    ck_assert_uint_eq (cs_object_check_change_inlock (handle, &insensitive, 1, true), CKR_ATTRIBUTE_READ_ONLY);
    ck_assert_uint_eq (cs_object_check_change_inlock (handle, &extractable, 1, true), CKR_ATTRIBUTE_READ_ONLY);
    ck_assert_uint_eq (cs_object_check_change_inlock (handle, &always_true, 1, true), CKR_ATTRIBUTE_READ_ONLY);
    /*  CKA_WRAP_WITH_TRUSTED latches to TRUE.  */
    ck_assert_uint_eq (s_set (handle, CKA_WRAP_WITH_TRUSTED, &s_true, 1), CKR_OK);
    ck_assert_uint_eq (s_set (handle, CKA_WRAP_WITH_TRUSTED, &s_false, 1), CKR_ATTRIBUTE_READ_ONLY);
    /*  One sensitive entry: CKR_ATTRIBUTE_SENSITIVE, the others filled.  */
    CK_ATTRIBUTE get [] = { { CKA_LABEL, label, sizeof label }, { CKA_VALUE, value, sizeof value },
                            { CKA_SENSITIVE, &always, 1 } };
    ck_assert_uint_eq (cs_object_get_attributes_inlock (handle, get, 3), CKR_ATTRIBUTE_SENSITIVE);
    ck_assert_uint_eq (get [0].ulValueLen, 4);
    ck_assert_mem_eq (label, "mine", 4);
    ck_assert_uint_eq (get [1].ulValueLen, CK_UNAVAILABLE_INFORMATION);
    ck_assert_uint_eq (get [2].ulValueLen, 1);
    ck_assert (always);
    /*  CKA_ALLOWED_MECHANISMS: empty by default (every mechanism) ...  */
    CK_MECHANISM_TYPE mechs [2] = { 0, 0 };
    CK_ATTRIBUTE allowed = { CKA_ALLOWED_MECHANISMS, mechs, sizeof mechs };
    ck_assert_uint_eq (cs_object_get_attributes_inlock (handle, &allowed, 1), CKR_OK);
    ck_assert_uint_eq (allowed.ulValueLen, 0);
    ck_assert (cs_object_mech_allowed_inlock (handle, CKM_ECDSA_SHA256));
    /*  ... read-only after creation, given at creation.  */
    mechs [0] = CKM_ECDSA;
    ck_assert_uint_eq (s_set (handle, CKA_ALLOWED_MECHANISMS, mechs, sizeof mechs [0]), CKR_ATTRIBUTE_READ_ONLY);
    CK_OBJECT_CLASS klass = CKO_PRIVATE_KEY;
    CK_KEY_TYPE type = CKK_EC;
    CK_ATTRIBUTE tmpl [] = { { CKA_CLASS, &klass, sizeof klass }, { CKA_KEY_TYPE, &type, sizeof type },
                             { CKA_ALLOWED_MECHANISMS, mechs, sizeof mechs [0] } };
    cs_attrs_t attrs = { 0 };
    cs_key_t *key = NULL;
    bool token = true;
    ck_assert_uint_eq (cs_keymgmt_create_check (tmpl, 3, &klass, &type, &token), CKR_OK);
    tmpl [2].ulValueLen = 3;
    ck_assert_uint_eq (cs_keymgmt_create_check (tmpl, 3, &klass, &type, &token), CKR_ATTRIBUTE_VALUE_INVALID);
    tmpl [2].ulValueLen = sizeof mechs [0];
    cs_object_info_t info;
    ck_assert_uint_eq (cs_object_info_inlock (handle, &info), CKR_OK);
    key = cs_key_ref (info.key);
    cs_object_info_clear (&info);
    ck_assert_int_eq (cs_keymgmt_session_attrs (CKO_PRIVATE_KEY, tmpl, 3, CK_UNAVAILABLE_INFORMATION, &attrs), 0);
    CK_OBJECT_HANDLE limited = 0;
    ck_assert_uint_eq (cs_object_add_session_inlock (7, CKO_PRIVATE_KEY, key, &attrs, &limited), CKR_OK);
    cs_key_unref (&key);
    mechs [0] = mechs [1] = 0;
    allowed.ulValueLen = sizeof mechs;
    ck_assert_uint_eq (cs_object_get_attributes_inlock (limited, &allowed, 1), CKR_OK);
    ck_assert_uint_eq (allowed.ulValueLen, sizeof mechs [0]);
    ck_assert_uint_eq (mechs [0], CKM_ECDSA);
    ck_assert (cs_object_mech_allowed_inlock (limited, CKM_ECDSA));
    ck_assert (!cs_object_mech_allowed_inlock (limited, CKM_ECDSA_SHA256));
    ck_assert (!cs_object_mech_allowed_inlock (limited, CKM_ECDH1_DERIVE));
    /*  Only the SO gives CKA_TRUSTED TRUE (here at creation of a public key).  */
    CK_OBJECT_CLASS pub = CKO_PUBLIC_KEY;
    CK_ATTRIBUTE trusted [] = { { CKA_CLASS, &pub, sizeof pub }, { CKA_KEY_TYPE, &type, sizeof type },
                                { CKA_TRUSTED, &s_true, 1 } };
    ck_assert_uint_eq (cs_keymgmt_create_check (trusted, 3, &klass, &type, &token), CKR_ATTRIBUTE_READ_ONLY);
}
END_TEST

static uint8_t s_point [67] = { 0x04, 65, 0x04 };

static Cs__KeyInfo *
s_ec_info (Cs__KeyInfo *info, const char *ref, const char *label, const uint8_t *id, size_t id_len)
{
    cs__key_info__init (info);
    info->ref = (char *) ref;
    info->label = (char *) label;
    info->id = (ProtobufCBinaryData) { id_len, (uint8_t *) id };
    info->key_type = CKK_EC;
    info->ec_params = (ProtobufCBinaryData) { sizeof s_p256, (uint8_t *) s_p256 };
    info->ec_point = (ProtobufCBinaryData) { sizeof s_point, s_point };
    info->can_sign = true;
    info->has_private = info->has_public = true;
    return info;
}

static CK_OBJECT_HANDLE
s_find_one (CK_OBJECT_CLASS klass, const void *id, size_t id_len)
{
    CK_ATTRIBUTE tmpl [] = { { CKA_CLASS, &klass, sizeof klass }, { CKA_ID, (void *) id, id_len } };
    CK_OBJECT_HANDLE *handles = NULL, handle = 0;
    size_t count = 0;
    ck_assert_uint_eq (cs_object_find_inlock (tmpl, 2, &handles, &count), CKR_OK);
    ck_assert_uint_eq (count, 1);
    handle = handles [0];
    free (handles);
    return handle;
}

/*  How many objects of klass have CKA_ID id.  */
static size_t
s_count_id (CK_OBJECT_CLASS klass, const void *id, size_t id_len)
{
    CK_ATTRIBUTE tmpl [] = { { CKA_CLASS, &klass, sizeof klass }, { CKA_ID, (void *) id, id_len } };
    CK_OBJECT_HANDLE *handles = NULL;
    size_t count = 99;
    ck_assert_uint_eq (cs_object_find_inlock (tmpl, 2, &handles, &count), CKR_OK);
    free (handles);
    return count;
}

START_TEST (test_token_attributes)
{
    Cs__KeyInfo board, stored, *keys [2] = { &board, &stored };
    Cs__ListKeysResult list = CS__LIST_KEYS_RESULT__INIT;
    Cs__Attribute sensitive = CS__ATTRIBUTE__INIT, gen = CS__ATTRIBUTE__INIT, modifiable = CS__ATTRIBUTE__INIT;
    Cs__Attribute *priv_attrs [] = { &sensitive, &gen, &modifiable };
    CK_ULONG mech = 0;
    CK_BBOOL flag = CK_FALSE, token = CK_FALSE;
    CK_ATTRIBUTE get [] = { { CKA_KEY_GEN_MECHANISM, &mech, sizeof mech }, { CKA_LOCAL, &flag, 1 },
                            { CKA_TOKEN, &token, 1 } };
    CK_OBJECT_HANDLE handle;
    s_ec_info (&board, "board:01", "b", (const uint8_t *) "\x01", 1);
    s_ec_info (&stored, "ks:00112233445566778899aabbccddeeff", "s", (const uint8_t *) "\x02", 1);
    stored.has_public = false;
    sensitive.type = CKA_LOCAL;
    sensitive.value_case = CS__ATTRIBUTE__VALUE_FLAG;
    sensitive.flag = true;
    gen.type = CKA_KEY_GEN_MECHANISM;
    gen.value_case = CS__ATTRIBUTE__VALUE_NUMBER;
    gen.number = CKM_EC_KEY_PAIR_GEN;
    modifiable.type = CKA_MODIFIABLE;
    modifiable.value_case = CS__ATTRIBUTE__VALUE_FLAG;
    modifiable.flag = true;
    stored.private_attributes = priv_attrs;
    stored.n_private_attributes = 3;
    list.keys = keys;
    list.n_keys = 2;
    list.version = 7;
    ck_assert_uint_eq (cs_object_load_inlock (&list), CKR_OK);
    s_login ();
    /*  A board key: defaults, not modifiable.  */
    handle = s_find_one (CKO_PRIVATE_KEY, "\x01", 1);
    ck_assert_uint_eq (cs_object_get_attributes_inlock (handle, get, 3), CKR_OK);
    ck_assert_uint_eq (mech, CK_UNAVAILABLE_INFORMATION);
    ck_assert (!flag && token);
    ck_assert_uint_eq (s_set (handle, CKA_LABEL, "x", 1), CKR_ACTION_PROHIBITED);
    /*  A keystore key: the broker's attributes; no public object.  */
    handle = s_find_one (CKO_PRIVATE_KEY, "\x02", 1);
    ck_assert_uint_eq (cs_object_get_attributes_inlock (handle, get, 2), CKR_OK);
    ck_assert_uint_eq (mech, CKM_EC_KEY_PAIR_GEN);
    ck_assert (flag);
    ck_assert_uint_eq (cs_object_check_change_inlock (handle, (CK_ATTRIBUTE []) { { CKA_LABEL, "y", 1 } }, 1, false), CKR_OK);
    /*  No stored CKA_SENSITIVE: TRUE by the table's default, so it cannot
        go FALSE; CKA_ALLOWED_MECHANISMS from its wire form.  */
    ck_assert_uint_eq (cs_object_check_change_inlock (handle, (CK_ATTRIBUTE []) { { CKA_SENSITIVE, &s_false, 1 } }, 1,
                                               false), CKR_ATTRIBUTE_READ_ONLY);
    CK_MECHANISM_TYPE mechs [2] = { 0, 0 };
    CK_ATTRIBUTE allowed = { CKA_ALLOWED_MECHANISMS, mechs, sizeof mechs };
    ck_assert_uint_eq (cs_object_get_attributes_inlock (handle, &allowed, 1), CKR_OK);
    ck_assert_uint_eq (allowed.ulValueLen, 0);
    ck_assert (cs_object_mech_allowed_inlock (handle, CKM_ECDSA_SHA256));
    /*  The module's defaults of flags a token key does not store are the
        table's, which the broker reads for its own checks.  */
    size_t n_rules = 0;
    const cs_attr_rule_t *rules = cs_attr_rules (&n_rules);
    for (size_t i = 0; i < n_rules; i++) {
        if (rules [i].dflt < 0 || !cs_attr_rule_has (CKO_PRIVATE_KEY, rules [i].type)
        ||  rules [i].type == CKA_TOKEN || rules [i].type == CKA_LOCAL || rules [i].type == CKA_MODIFIABLE)
            continue;                           /* a token object; stored above */
        CK_BBOOL shown = 0xff;
        CK_ATTRIBUTE one = { rules [i].type, &shown, 1 };
        ck_assert_uint_eq (cs_object_get_attributes_inlock (handle, &one, 1), CKR_OK);
        ck_assert_msg (shown == (CK_BBOOL) rules [i].dflt, "%s: module default %d, table default %d",
                       rules [i].name, shown, rules [i].dflt);
    }
    CK_OBJECT_CLASS pub = CKO_PUBLIC_KEY;
    CK_ATTRIBUTE by_id [] = { { CKA_CLASS, &pub, sizeof pub }, { CKA_ID, "\x02", 1 } };
    CK_OBJECT_HANDLE *handles = NULL;
    size_t count = 9;
    ck_assert_uint_eq (cs_object_find_inlock (by_id, 2, &handles, &count), CKR_OK);
    ck_assert_uint_eq (count, 0);
    free (handles);
    /*  A key change reply puts the key at once; the handle is the same.  */
    stored.label = "s2";
    static const uint8_t ecdsa_wire [8] = { 0x41, 0x10 };      /* CKM_ECDSA, 8 bytes little-endian */
    Cs__Attribute wire_mechs = CS__ATTRIBUTE__INIT;
    wire_mechs.type = CKA_ALLOWED_MECHANISMS;
    wire_mechs.value_case = CS__ATTRIBUTE__VALUE_BYTES;
    wire_mechs.bytes = (ProtobufCBinaryData) { 8, (uint8_t *) ecdsa_wire };
    Cs__Attribute *with_mechs [] = { &sensitive, &gen, &modifiable, &wire_mechs };
    stored.private_attributes = with_mechs;
    stored.n_private_attributes = 4;
    CK_OBJECT_HANDLE again = 0;
    ck_assert_uint_eq (cs_object_put_inlock (&stored, CKO_PRIVATE_KEY, &again), CKR_OK);
    ck_assert_uint_eq (again, handle);
    allowed.ulValueLen = sizeof mechs;
    ck_assert_uint_eq (cs_object_get_attributes_inlock (handle, &allowed, 1), CKR_OK);
    ck_assert_uint_eq (allowed.ulValueLen, sizeof mechs [0]);
    ck_assert_uint_eq (mechs [0], CKM_ECDSA);
    ck_assert (cs_object_mech_allowed_inlock (handle, CKM_ECDSA));
    ck_assert (!cs_object_mech_allowed_inlock (handle, CKM_ECDSA_SHA256));
    /*  An unchanged list keeps the cache; a destroyed key's handle goes stale.  */
    Cs__ListKeysResult same = CS__LIST_KEYS_RESULT__INIT;
    same.unchanged = true;
    same.version = 7;
    ck_assert_uint_eq (cs_object_load_inlock (&same), CKR_OK);
    ck_assert_uint_eq (s_find_one (CKO_PRIVATE_KEY, "\x02", 1), handle);
    cs_object_forget_inlock (handle);
    ck_assert_uint_eq (cs_object_get_attributes_inlock (handle, get, 1), CKR_OBJECT_HANDLE_INVALID);
}
END_TEST

/*  ---- per-request keys and sessions --------------------------------------- */

START_TEST (test_session_close_wipes)
{
    uint8_t scalar [66];
    size_t scalar_len;
    CK_OBJECT_HANDLE mine, other;
    CK_ATTRIBUTE label = { CKA_LABEL, NULL, 0 };
    cs_object_info_t info;
    cs_key_t *key;
    s_login ();
    mine = s_session_ec_key (5, scalar, &scalar_len);
    other = s_session_ec_key (6, scalar, &scalar_len);
    ck_assert_uint_ne (mine, other);
    ck_assert_uint_eq (cs_object_get_attributes_inlock (mine, &label, 1), CKR_OK);
    ck_assert_uint_eq (cs_object_info_inlock (mine, &info), CKR_OK);
    ck_assert (!info.token);
    ck_assert_ptr_nonnull (info.key->pkcs8);
    cs_object_info_clear (&info);
    /*  An operation keeps the key alive on its own reference.  */
    ck_assert_uint_eq (cs_object_use_inlock (mine, CKF_SIGN, &key), CKR_OK);
    ck_assert_int_eq (key->refs, 2);
    cs_object_session_closed_inlock (5);
    ck_assert_int_eq (key->refs, 1);
    cs_key_unref (&key);
    ck_assert_uint_eq (cs_object_get_attributes_inlock (mine, &label, 1), CKR_OBJECT_HANDLE_INVALID);
    ck_assert_uint_eq (cs_object_info_inlock (mine, &info), CKR_OBJECT_HANDLE_INVALID);
    ck_assert_uint_eq (cs_object_use_inlock (mine, CKF_SIGN, &key), CKR_KEY_HANDLE_INVALID);
    ck_assert_uint_eq (cs_object_get_attributes_inlock (other, &label, 1), CKR_OK);
    ck_assert_uint_eq (cs_object_destroy_local_inlock (other), CKR_OK);
    ck_assert_uint_eq (cs_object_get_attributes_inlock (other, &label, 1), CKR_OBJECT_HANDLE_INVALID);
    /*  Private session objects hide after logout.  */
    other = s_session_ec_key (6, scalar, &scalar_len);
    cs_login_logout_inlock ();
    ck_assert_uint_eq (cs_object_get_attributes_inlock (other, &label, 1), CKR_OBJECT_HANDLE_INVALID);
}
END_TEST

START_TEST (test_find_1000)
{
    enum { N = 1000 };
    static Cs__KeyInfo infos [N];
    static Cs__KeyInfo *keys [N];
    static char refs [N][40], labels [N][16];
    static uint8_t ids [N][2];
    Cs__ListKeysResult list = CS__LIST_KEYS_RESULT__INIT;
    CK_OBJECT_CLASS pub = CKO_PUBLIC_KEY;
    CK_ATTRIBUTE all_pub [] = { { CKA_CLASS, &pub, sizeof pub } };
    CK_ATTRIBUTE by_label [] = { { CKA_LABEL, "key-501", 7 } };
    CK_ATTRIBUTE label = { CKA_LABEL, NULL, 0 };
    CK_OBJECT_HANDLE *handles = NULL, h777, h777_pub, h500, h501_pub, h999;
    size_t count = 0;
    for (int i = 0; i < N; i++) {
        snprintf (refs [i], sizeof refs [i], "ks:%032x", i);
        snprintf (labels [i], sizeof labels [i], "key-%d", i);
        ids [i][0] = (uint8_t) (i >> 8);
        ids [i][1] = (uint8_t) i;
        keys [i] = s_ec_info (&infos [i], refs [i], labels [i], ids [i], 2);
        infos [i].has_public = i % 10 != 0;
    }
    list.keys = keys;
    list.n_keys = N;
    list.version = 1;
    ck_assert_uint_eq (cs_object_load_inlock (&list), CKR_OK);
    s_login ();
    h777 = s_find_one (CKO_PRIVATE_KEY, ids [777], 2);
    h777_pub = s_find_one (CKO_PUBLIC_KEY, ids [777], 2);
    h500 = s_find_one (CKO_PRIVATE_KEY, ids [500], 2);
    h501_pub = s_find_one (CKO_PUBLIC_KEY, ids [501], 2);          /* 500 has none */
    h999 = s_find_one (CKO_PRIVATE_KEY, ids [999], 2);
    ck_assert_uint_ne (h500, h777);
    ck_assert_uint_ne (h500, h501_pub);
    ck_assert_uint_eq (cs_object_find_inlock (all_pub, 1, &handles, &count), CKR_OK);
    ck_assert_uint_eq (count, 900);
    free (handles);
    ck_assert_uint_eq (cs_object_find_inlock (by_label, 1, &handles, &count), CKR_OK);
    ck_assert_uint_eq (count, 2);
    free (handles);
    ck_assert_uint_eq (cs_object_find_inlock (NULL, 0, &handles, &count), CKR_OK);
    ck_assert_uint_eq (count, 1900);
    free (handles);
    /*  A new version of the list without key 777 (its slot now repeats key
        778, and the first of duplicate refs wins): 777's two objects go and
        their handles stop working; every other key keeps the handle it had
        before the reload.  */
    infos [777] = infos [778];
    list.version = 2;
    ck_assert_uint_eq (cs_object_load_inlock (&list), CKR_OK);
    ck_assert_uint_eq (cs_object_get_attributes_inlock (h777, &label, 1), CKR_OBJECT_HANDLE_INVALID);
    ck_assert_uint_eq (cs_object_get_attributes_inlock (h777_pub, &label, 1), CKR_OBJECT_HANDLE_INVALID);
    ck_assert_uint_eq (s_count_id (CKO_PRIVATE_KEY, ids [777], 2), 0);
    ck_assert_uint_eq (s_count_id (CKO_PUBLIC_KEY, ids [777], 2), 0);
    ck_assert_uint_eq (s_find_one (CKO_PRIVATE_KEY, ids [500], 2), h500);
    ck_assert_uint_eq (s_find_one (CKO_PUBLIC_KEY, ids [501], 2), h501_pub);
    ck_assert_uint_eq (s_find_one (CKO_PRIVATE_KEY, ids [999], 2), h999);
    ck_assert_uint_eq (cs_object_get_attributes_inlock (h500, &label, 1), CKR_OK);
    ck_assert_uint_eq (label.ulValueLen, 7);                  /* "key-500" */
    ck_assert_uint_eq (cs_object_find_inlock (NULL, 0, &handles, &count), CKR_OK);
    ck_assert_uint_eq (count, 1898);
    free (handles);
    /*  Key 777 comes back (same ref, same class): it gets its old handles.  */
    s_ec_info (&infos [777], refs [777], labels [777], ids [777], 2);
    list.version = 3;
    ck_assert_uint_eq (cs_object_load_inlock (&list), CKR_OK);
    ck_assert_uint_eq (s_find_one (CKO_PRIVATE_KEY, ids [777], 2), h777);
    ck_assert_uint_eq (s_find_one (CKO_PUBLIC_KEY, ids [777], 2), h777_pub);
    ck_assert_uint_eq (s_find_one (CKO_PRIVATE_KEY, ids [500], 2), h500);
    ck_assert_uint_eq (cs_object_find_inlock (NULL, 0, &handles, &count), CKR_OK);
    ck_assert_uint_eq (count, 1900);
    free (handles);
}
END_TEST

int
main (void)
{
    Suite *suite = suite_create ("module_keys");
    TCase *tc = tcase_create ("keys");
    SRunner *runner;
    int failed;
    tcase_add_checked_fixture (tc, NULL, s_teardown);
    tcase_add_test (tc, test_rsa_components);
    tcase_add_test (tc, test_ec_components);
    tcase_add_test (tc, test_ed25519_components);
    tcase_add_test (tc, test_template_errors);
    tcase_add_test (tc, test_keygen_standard_templates);
    tcase_add_test (tc, test_keygen_errors);
    tcase_add_test (tc, test_attribute_rules);
    tcase_add_test (tc, test_attribute_rules_table);
    tcase_add_test (tc, test_token_attributes);
    tcase_add_test (tc, test_session_close_wipes);
    tcase_add_test (tc, test_find_1000);
    suite_add_tcase (suite, tc);
    runner = srunner_create (suite);
    srunner_run_all (runner, CK_NORMAL);
    failed = srunner_ntests_failed (runner);
    srunner_free (runner);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
