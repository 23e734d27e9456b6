/*  cs-curves.c — the curves beyond P-256 and Ed25519 through the module, for
 *  tests/integration/curves.sh (issue #21).
 *
 *  usage: cs-curves MODULE.so TOKEN PIN
 *
 *  Ed448 (RFC 8032 §5.2): the "1 octet" vector of RFC 8032 §7.4 imported
 *  with C_CreateObject (CKA_EC_PARAMS the OID 1.3.101.113 on the private
 *  key, the printable "edwards448" on the public one) signs to the
 *  published bytes and C_Verify accepts them and refuses a flipped bit; a
 *  generated Ed448 pair signs and OpenSSL verifies with the CKA_EC_POINT
 *  read back.  X25519 and X448 (RFC 7748): Alice's private key of §6.1 and
 *  §6.2 imported (CKK_EC_MONTGOMERY) and C_DeriveKey (CKM_ECDH1_DERIVE,
 *  CKD_NULL) with Bob's public key gives the published shared secret as
 *  CKA_VALUE; a generated pair of each curve derives with an OpenSSL peer
 *  the secret OpenSSL derives from CKA_EC_POINT, and so do generated P-256,
 *  P-384 and P-521 pairs (ECDH on every listed curve).  A curve the token does not
 *  list (secp256k1) is
 *  CKR_CURVE_NOT_SUPPORTED (PKCS#11 3.0 §5.14).  Links OpenSSL; the module
 *  is dlopen'ed.  Exit 0 when all pass.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <p11-kit/pkcs11.h>
#include "cryptoserver/pkcs11v.h"
#include "cs-test-client.h"
#include "cs-test-slot.h"

static CK_FUNCTION_LIST *p11;
static CK_SESSION_HANDLE s;
static CK_BBOOL yes = CK_TRUE, no = CK_FALSE;

static const CK_BYTE s_oid_ed448 [] = { 0x06, 0x03, 0x2b, 0x65, 0x71 };        /* RFC 8410 */
static const CK_BYTE s_name_ed448 [] = "\x13\x0a" "edwards448";                /* PrintableString */
static const CK_BYTE s_oid_secp256k1 [] = { 0x06, 0x05, 0x2b, 0x81, 0x04, 0x00, 0x0a };

/*  RFC 8032 §7.4, "1 octet".  */
static const char s_ed448_sk [] =
    "c4eab05d357007c632f3dbb48489924d552b08fe0c353a0d4a1f00acda2c463a"
    "fbea67c5e8d2877c5e3bc397a659949ef8021e954e0a12274e";
static const char s_ed448_pk [] =
    "43ba28f430cdff456ae531545f7ecd0ac834a55d9358c0372bfa0c6c6798c086"
    "6aea01eb00742802b8438ea4cb82169c235160627b4c3a9480";
static const char s_ed448_sig [] =
    "26b8f91727bd62897af15e41eb43c377efb9c610d48f2335cb0bd0087810f435"
    "2541b143c4b981b7e18f62de8ccdf633fc1bf037ab7cd779805e0dbcc0aae1cb"
    "cee1afb2e027df36bc04dcecbf154336c19f0af7e0a6472905e799f1953d2a0f"
    "f3348ab21aa4adafd1d234441cf807c03a00";

static const CK_BYTE s_oid_x448 [] = { 0x06, 0x03, 0x2b, 0x65, 0x6f };         /* RFC 8410 */
static const CK_BYTE s_name_x25519 [] = "\x13\x0a" "curve25519";

/*  RFC 7748 §6.1 and §6.2: Alice's private key, Bob's public key, K.  */
static const struct {
    const char *name;
    const CK_BYTE *params;
    size_t params_len;
    const char *alice, *bob, *k;
} s_x_vectors [] = {
    { "X25519", s_name_x25519, sizeof s_name_x25519 - 1,
      "77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a",
      "de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f",
      "4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742" },
    { "X448", s_oid_x448, sizeof s_oid_x448,
      "9a8f4925d1519f5775cf46b04b5800d4ee9ee8bae8bc5565d498c28dd9c9baf574a9419744897391006382a6f127ab1d9ac2d8c0a598726b",
      "3eb7a829b0cd20f5bcfc0b599b6feccf6da4627107bdb0d4f345b43027d8b972fc3e34fb4232a13ca706dcb57aec3dae07bdc1c67bf33609",
      "07fff4181ac6cc95ec1c16a94a0f74d12da232ce40a77552281d282bb60c0b56fd2464c335543936521c24403085d59a449a5037514a879d" },
};

/*  Hex into bytes; returns the byte count.  */
static size_t
s_hex (const char *hex, CK_BYTE *out)
{
    size_t n = strlen (hex) / 2;
    for (size_t i = 0; i < n; i++)
        sscanf (hex + 2 * i, "%2hhx", &out [i]);
    return n;
}

/*  A DER OCTET STRING around raw (CKA_EC_POINT); raw is under 128 bytes.  */
static CK_ULONG
s_octet_string (const CK_BYTE *raw, size_t len, CK_BYTE *out)
{
    out [0] = 0x04;
    out [1] = (CK_BYTE) len;
    memcpy (out + 2, raw, len);
    return (CK_ULONG) len + 2;
}

/*  C_CreateObject of a session key of class `klass`, type `kt`, curve
 *  `params`; `value` is CKA_VALUE (private) or CKA_EC_POINT (public).  */
static CK_OBJECT_HANDLE
s_create (CK_OBJECT_CLASS klass, CK_KEY_TYPE kt, const CK_BYTE *params, size_t params_len,
          CK_BYTE *value, CK_ULONG value_len, CK_ATTRIBUTE_TYPE usage)
{
    CK_ATTRIBUTE tmpl [] = {
        { CKA_CLASS, &klass, sizeof klass }, { CKA_KEY_TYPE, &kt, sizeof kt },
        { CKA_TOKEN, &no, sizeof no }, { CKA_EC_PARAMS, (void *) params, params_len },
        { klass == CKO_PRIVATE_KEY ? CKA_VALUE : CKA_EC_POINT, value, value_len },
        { usage, &yes, sizeof yes },
    };
    CK_OBJECT_HANDLE key = 0;
    CHECK (p11->C_CreateObject (s, tmpl, sizeof tmpl / sizeof tmpl [0], &key), "C_CreateObject");
    return key;
}

/*  CKM_EDDSA over msg; checks the length query first.  Returns the length.  */
static CK_ULONG
s_eddsa_sign (CK_OBJECT_HANDLE key, const CK_BYTE *msg, CK_ULONG len, CK_BYTE *sig, CK_ULONG want)
{
    CK_MECHANISM mech = { CKM_EDDSA, NULL, 0 };
    CK_ULONG sig_len = 0;
    CHECK (p11->C_SignInit (s, &mech, key), "C_SignInit (CKM_EDDSA)");
    CHECK (p11->C_Sign (s, (CK_BYTE_PTR) msg, len, NULL, &sig_len), "C_Sign (length)");
    if (sig_len != want)
        cs_test_fail ("the signature length query is not 2 * 57 bytes");
    CHECK (p11->C_Sign (s, (CK_BYTE_PTR) msg, len, sig, &sig_len), "C_Sign (CKM_EDDSA)");
    return sig_len;
}

static CK_RV
s_eddsa_verify (CK_OBJECT_HANDLE key, const CK_BYTE *msg, CK_ULONG len, CK_BYTE *sig, CK_ULONG sig_len)
{
    CK_MECHANISM mech = { CKM_EDDSA, NULL, 0 };
    CHECK (p11->C_VerifyInit (s, &mech, key), "C_VerifyInit (CKM_EDDSA)");
    return p11->C_Verify (s, (CK_BYTE_PTR) msg, len, sig, sig_len);
}

/*  RFC 8032 §7.4 through C_CreateObject, C_Sign and C_Verify.  */
static void
s_ed448_vector (void)
{
    CK_BYTE sk [57], pk [57], want [114], sig [114], point [64], msg [1] = { 0x03 };
    s_hex (s_ed448_sk, sk);
    s_hex (s_ed448_pk, pk);
    s_hex (s_ed448_sig, want);
    CK_OBJECT_HANDLE priv = s_create (CKO_PRIVATE_KEY, CKK_EC_EDWARDS, s_oid_ed448, sizeof s_oid_ed448,
                                      sk, sizeof sk, CKA_SIGN);
    CK_OBJECT_HANDLE pub = s_create (CKO_PUBLIC_KEY, CKK_EC_EDWARDS, s_name_ed448, sizeof s_name_ed448 - 1,
                                     point, s_octet_string (pk, sizeof pk, point), CKA_VERIFY);
    CK_ULONG len = s_eddsa_sign (priv, msg, sizeof msg, sig, sizeof want);
    if (len != sizeof want || memcmp (sig, want, sizeof want))
        cs_test_fail ("the Ed448 signature differs from RFC 8032 §7.4");
    CHECK (s_eddsa_verify (pub, msg, sizeof msg, sig, len), "C_Verify (RFC 8032 §7.4)");
    sig [10] ^= 0x01;
    EXPECT (s_eddsa_verify (pub, msg, sizeof msg, sig, len), CKR_SIGNATURE_INVALID, "C_Verify (a flipped bit)");
    printf ("Ed448: RFC 8032 §7.4 signature equal, C_Verify accepts it and refuses a flipped bit\n");
}

/*  C_GenerateKeyPair of session keys on the curve `params`.  */
static CK_RV
s_generate (CK_MECHANISM_TYPE type, const CK_BYTE *params, size_t params_len, CK_ATTRIBUTE_TYPE use_pub,
            CK_ATTRIBUTE_TYPE use_priv, CK_OBJECT_HANDLE *pub_p, CK_OBJECT_HANDLE *priv_p)
{
    CK_MECHANISM mech = { type, NULL, 0 };
    CK_ATTRIBUTE pub [] = {
        { CKA_TOKEN, &no, sizeof no }, { CKA_EC_PARAMS, (void *) params, params_len },
        { use_pub, &yes, sizeof yes },
    };
    CK_ATTRIBUTE priv [] = { { CKA_TOKEN, &no, sizeof no }, { use_priv, &yes, sizeof yes } };
    return p11->C_GenerateKeyPair (s, &mech, pub, 3, priv, 2, pub_p, priv_p);
}

/*  A generated Ed448 pair: signs; OpenSSL verifies with CKA_EC_POINT.  */
static void
s_ed448_generated (void)
{
    CK_OBJECT_HANDLE pub = 0, priv = 0;
    CK_BYTE point [80], sig [114];
    const CK_BYTE msg [] = "a message for Ed448";
    CHECK (s_generate (CKM_EC_EDWARDS_KEY_PAIR_GEN, s_name_ed448, sizeof s_name_ed448 - 1, CKA_VERIFY, CKA_SIGN,
                       &pub, &priv), "C_GenerateKeyPair (Ed448)");
    CK_ULONG len = s_eddsa_sign (priv, msg, sizeof msg - 1, sig, sizeof sig);
    CHECK (s_eddsa_verify (pub, msg, sizeof msg - 1, sig, len), "C_Verify (generated Ed448)");
    CK_ATTRIBUTE read [] = { { CKA_EC_POINT, point, sizeof point } };
    CHECK (p11->C_GetAttributeValue (s, pub, read, 1), "C_GetAttributeValue (CKA_EC_POINT)");
    if (read [0].ulValueLen != 59 || point [0] != 0x04 || point [1] != 57)
        cs_test_fail ("CKA_EC_POINT of an Ed448 key is not a 57-byte OCTET STRING");
    EVP_PKEY *pkey = EVP_PKEY_new_raw_public_key (EVP_PKEY_ED448, NULL, point + 2, 57);
    EVP_MD_CTX *ctx = EVP_MD_CTX_new ();
    int ok = pkey && ctx && EVP_DigestVerifyInit (ctx, NULL, NULL, NULL, pkey) == 1
          && EVP_DigestVerify (ctx, sig, len, msg, sizeof msg - 1) == 1;
    EVP_MD_CTX_free (ctx);
    EVP_PKEY_free (pkey);
    if (!ok)
        cs_test_fail ("OpenSSL does not verify the generated Ed448 key's signature");
    printf ("Ed448: a generated pair signs, C_Verify and OpenSSL verify\n");
}

/*  C_DeriveKey (CKM_ECDH1_DERIVE, CKD_NULL) of `base` with the raw peer
 *  point into an extractable session generic secret; its CKA_VALUE into
 *  out (room for 80 bytes).  Returns the value's length.  */
static CK_ULONG
s_derive (CK_OBJECT_HANDLE base, CK_BYTE *peer, CK_ULONG peer_len, CK_BYTE *out)
{
    CK_ECDH1_DERIVE_PARAMS params = { CKD_NULL, 0, NULL, peer_len, peer };
    CK_MECHANISM mech = { CKM_ECDH1_DERIVE, &params, sizeof params };
    CK_OBJECT_CLASS klass = CKO_SECRET_KEY;
    CK_KEY_TYPE kt = CKK_GENERIC_SECRET;
    CK_ATTRIBUTE tmpl [] = {
        { CKA_CLASS, &klass, sizeof klass }, { CKA_KEY_TYPE, &kt, sizeof kt },
        { CKA_TOKEN, &no, sizeof no }, { CKA_SENSITIVE, &no, sizeof no },
        { CKA_EXTRACTABLE, &yes, sizeof yes },
    };
    CK_OBJECT_HANDLE key = 0;
    CHECK (p11->C_DeriveKey (s, &mech, base, tmpl, sizeof tmpl / sizeof tmpl [0], &key),
           "C_DeriveKey (CKM_ECDH1_DERIVE)");
    CK_ATTRIBUTE read [] = { { CKA_VALUE, out, 80 } };
    CHECK (p11->C_GetAttributeValue (s, key, read, 1), "C_GetAttributeValue (the derived CKA_VALUE)");
    return read [0].ulValueLen;
}

/*  RFC 7748 §6.1, §6.2 through C_CreateObject and C_DeriveKey.  */
static void
s_x_vector (size_t i)
{
    CK_BYTE alice [56], bob [56], k [56], got [80];
    size_t len = s_hex (s_x_vectors [i].alice, alice);
    s_hex (s_x_vectors [i].bob, bob);
    s_hex (s_x_vectors [i].k, k);
    CK_OBJECT_HANDLE priv = s_create (CKO_PRIVATE_KEY, CKK_EC_MONTGOMERY, s_x_vectors [i].params,
                                      s_x_vectors [i].params_len, alice, len, CKA_DERIVE);
    if (s_derive (priv, bob, len, got) != len || memcmp (got, k, len))
        cs_test_fail ("the shared secret differs from RFC 7748 §6");
    printf ("%s: RFC 7748 §6 shared secret equal\n", s_x_vectors [i].name);
}

/*  A generated pair of curve i derives with an OpenSSL key the secret
 *  OpenSSL derives with CKA_EC_POINT.  */
static void
s_x_generated (size_t i)
{
    CK_OBJECT_HANDLE pub = 0, priv = 0;
    CK_BYTE point [80], peer [56], got [80], want [80];
    size_t peer_len = sizeof peer, want_len = sizeof want;
    CHECK (s_generate (CKM_EC_MONTGOMERY_KEY_PAIR_GEN, s_x_vectors [i].params, s_x_vectors [i].params_len,
                       CKA_DERIVE, CKA_DERIVE, &pub, &priv), "C_GenerateKeyPair (CKM_EC_MONTGOMERY_KEY_PAIR_GEN)");
    CK_ATTRIBUTE read [] = { { CKA_EC_POINT, point, sizeof point } };
    CHECK (p11->C_GetAttributeValue (s, pub, read, 1), "C_GetAttributeValue (CKA_EC_POINT)");
    EVP_PKEY *mine = EVP_PKEY_Q_keygen (NULL, NULL, s_x_vectors [i].name);
    EVP_PKEY *token = read [0].ulValueLen > 2 && point [0] == 0x04 && point [1] == read [0].ulValueLen - 2
                    ? EVP_PKEY_new_raw_public_key (EVP_PKEY_get_base_id (mine), NULL, point + 2, point [1]) : NULL;
    EVP_PKEY_CTX *ctx = token ? EVP_PKEY_CTX_new (mine, NULL) : NULL;
    if (!ctx || EVP_PKEY_derive_init (ctx) != 1 || EVP_PKEY_derive_set_peer (ctx, token) != 1
    ||  EVP_PKEY_derive (ctx, want, &want_len) != 1 || !EVP_PKEY_get_raw_public_key (mine, peer, &peer_len))
        cs_test_fail ("OpenSSL cannot derive with the token's CKA_EC_POINT");
    EVP_PKEY_CTX_free (ctx);
    EVP_PKEY_free (token);
    EVP_PKEY_free (mine);
    if (s_derive (priv, peer, peer_len, got) != want_len || memcmp (got, want, want_len))
        cs_test_fail ("the derived secret differs from OpenSSL's");
    printf ("%s: a generated pair derives the secret OpenSSL derives\n", s_x_vectors [i].name);
}

/*  The uncompressed point inside a DER OCTET STRING (short or 0x81 form).  */
static const CK_BYTE *
s_ec_point_raw (const CK_BYTE *der, CK_ULONG len, size_t *raw_len)
{
    size_t header = len > 2 && der [1] == 0x81 ? 3 : 2;
    *raw_len = len > header ? len - header : 0;
    return der [0] == 0x04 && *raw_len == der [header - 1] ? der + header : NULL;
}

/*  ECDH of a generated EC pair on `group` with an OpenSSL peer: the derived
 *  CKA_VALUE equals OpenSSL's Z (SEC 1 §3.3.1).  */
static void
s_ec_generated (const char *group, const CK_BYTE *oid, size_t oid_len)
{
    CK_OBJECT_HANDLE pub = 0, priv = 0;
    CK_BYTE der [160], peer [140], got [80], want [80];
    size_t peer_len = sizeof peer, want_len = sizeof want, raw_len = 0;
    CHECK (s_generate (CKM_EC_KEY_PAIR_GEN, oid, oid_len, CKA_DERIVE, CKA_DERIVE, &pub, &priv),
           "C_GenerateKeyPair (CKM_EC_KEY_PAIR_GEN)");
    CK_ATTRIBUTE read [] = { { CKA_EC_POINT, der, sizeof der } };
    CHECK (p11->C_GetAttributeValue (s, pub, read, 1), "C_GetAttributeValue (CKA_EC_POINT)");
    const CK_BYTE *raw = s_ec_point_raw (der, read [0].ulValueLen, &raw_len);
    EVP_PKEY *mine = EVP_PKEY_Q_keygen (NULL, NULL, "EC", group), *token = NULL;
    OSSL_PARAM params [] = {
        OSSL_PARAM_utf8_string (OSSL_PKEY_PARAM_GROUP_NAME, (char *) group, 0),
        OSSL_PARAM_octet_string (OSSL_PKEY_PARAM_PUB_KEY, (void *) raw, raw_len), OSSL_PARAM_END };
    EVP_PKEY_CTX *from = EVP_PKEY_CTX_new_from_name (NULL, "EC", NULL);
    if (!raw || !from || EVP_PKEY_fromdata_init (from) != 1
    ||  EVP_PKEY_fromdata (from, &token, EVP_PKEY_PUBLIC_KEY, params) != 1)
        cs_test_fail ("OpenSSL cannot read the token's CKA_EC_POINT");
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new (mine, NULL);
    if (!ctx || EVP_PKEY_derive_init (ctx) != 1 || EVP_PKEY_derive_set_peer (ctx, token) != 1
    ||  EVP_PKEY_derive (ctx, want, &want_len) != 1
    ||  !EVP_PKEY_get_octet_string_param (mine, OSSL_PKEY_PARAM_ENCODED_PUBLIC_KEY, peer, sizeof peer, &peer_len))
        cs_test_fail ("OpenSSL cannot derive with the token's CKA_EC_POINT");
    EVP_PKEY_CTX_free (ctx);
    EVP_PKEY_CTX_free (from);
    EVP_PKEY_free (token);
    EVP_PKEY_free (mine);
    if (s_derive (priv, peer, peer_len, got) != want_len || memcmp (got, want, want_len))
        cs_test_fail ("the derived secret differs from OpenSSL's");
    printf ("%s: a generated pair derives the secret OpenSSL derives\n", group);
}

/*  A curve the token does not list.  */
static void
s_unlisted (void)
{
    CK_OBJECT_HANDLE pub = 0, priv = 0;
    EXPECT (s_generate (CKM_EC_KEY_PAIR_GEN, s_oid_secp256k1, sizeof s_oid_secp256k1, CKA_VERIFY, CKA_SIGN,
                        &pub, &priv), CKR_CURVE_NOT_SUPPORTED, "C_GenerateKeyPair (secp256k1)");
    printf ("secp256k1: CKR_CURVE_NOT_SUPPORTED\n");
}

int
main (int argc, char **argv)
{
    if (argc != 4) {
        fprintf (stderr, "usage: cs-curves MODULE.so TOKEN PIN\n");
        return 2;
    }
    CK_SLOT_ID slot = 0;
    p11 = cs_test_module (argv [1]);
    CHECK (p11->C_Initialize (NULL), "C_Initialize");
    CHECK (cs_test_slot (p11, argv [2], &slot), "the token");
    CHECK (p11->C_OpenSession (slot, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &s), "C_OpenSession");
    CHECK (p11->C_Login (s, CKU_USER, (CK_UTF8CHAR_PTR) argv [3], strlen (argv [3])), "C_Login");
    s_ed448_vector ();
    s_ed448_generated ();
    for (size_t i = 0; i < sizeof s_x_vectors / sizeof s_x_vectors [0]; i++) {
        s_x_vector (i);
        s_x_generated (i);
    }
    static const CK_BYTE p256 [] = { 0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07 };
    static const CK_BYTE p384 [] = { 0x06, 0x05, 0x2b, 0x81, 0x04, 0x00, 0x22 };
    static const CK_BYTE p521 [] = { 0x06, 0x05, 0x2b, 0x81, 0x04, 0x00, 0x23 };
    s_ec_generated ("P-256", p256, sizeof p256);
    s_ec_generated ("P-384", p384, sizeof p384);
    s_ec_generated ("P-521", p521, sizeof p521);
    s_unlisted ();
    CHECK (p11->C_Logout (s), "C_Logout");
    CHECK (p11->C_Finalize (NULL), "C_Finalize");
    return 0;
}
