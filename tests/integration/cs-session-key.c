/*  cs-session-key.c — a per-request key (session object, CKA_TOKEN=FALSE)
 *  through any PKCS#11 module, for tests/integration/keys-session.sh.
 *
 *  usage: cs-session-key MODULE.so TOKEN PIN [RSA-KEY.der]
 *
 *  In a second session: C_GenerateKeyPair of a P-256 session key pair, and
 *  (with RSA-KEY.der, PKCS#8 DER) C_CreateObject of that RSA private key as
 *  a session object; each signs a message (CKM_ECDSA over SHA-256,
 *  CKM_SHA256_RSA_PKCS) and OpenSSL verifies the signature with the public
 *  key read from the token (EC) or from the file (RSA).  Then the second
 *  session is closed and, from the first session, each handle must give
 *  CKR_OBJECT_HANDLE_INVALID (PKCS#11 2.40 §4.4: session objects are
 *  destroyed with their session).  Links only OpenSSL; the module is
 *  dlopen'ed.  Prints one line per step; exit 0 when all pass.
 */
#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/param_build.h>
#include <openssl/x509.h>
#include <p11-kit/pkcs11.h>
#include "cs-test-slot.h"

static CK_FUNCTION_LIST *p11;

#define CHECK(call, what) do { CK_RV rv_ = (call); if (rv_ != CKR_OK) { \
    fprintf (stderr, "cs-session-key: %s: CK_RV 0x%lx\n", what, (unsigned long) rv_); \
    exit (1); } } while (0)

static void
s_fail (const char *what)
{
    fprintf (stderr, "cs-session-key: FAIL: %s\n", what);
    exit (1);
}

//  The slot whose token label is `label` (blank-padded compare).
static CK_SLOT_ID
s_slot (const char *label)
{
    CK_SLOT_ID slot = 0;
    CK_RV rv = cs_test_slot (p11, label, &slot);
    if (rv == CKR_TOKEN_NOT_PRESENT)
        s_fail ("no token with that label");
    CHECK (rv, "C_GetSlotList");
    return slot;
}

//  Signs msg with `key`: CKM_SHA256_RSA_PKCS over msg, or CKM_ECDSA over
//  its SHA-256 digest (SoftHSM 2.6 has no CKM_ECDSA_SHA256, so the client
//  also runs against a board directly).  Returns the signature length.
static CK_ULONG
s_sign (CK_SESSION_HANDLE session, CK_OBJECT_HANDLE key, CK_MECHANISM_TYPE type,
        const char *msg, CK_BYTE *sig, CK_ULONG room)
{
    CK_MECHANISM mechanism = { type, NULL, 0 };
    CK_BYTE digest [32];
    CK_BYTE_PTR data = (CK_BYTE_PTR) msg;
    CK_ULONG len = strlen (msg);
    if (type == CKM_ECDSA) {
        EVP_Digest (msg, len, digest, NULL, EVP_sha256 (), NULL);
        data = digest;
        len = sizeof digest;
    }
    CHECK (p11->C_SignInit (session, &mechanism, key), "C_SignInit");
    CHECK (p11->C_Sign (session, data, len, sig, &room), "C_Sign");
    return room;
}

//  Verifies with OpenSSL: digest SHA-256; for EC, sig is raw r||s.
static bool
s_verify (EVP_PKEY *pub, const char *msg, const CK_BYTE *sig, CK_ULONG len, bool ec)
{
    unsigned char der [160];
    const unsigned char *to_check = sig;
    size_t check_len = len;
    if (ec) {               //  r||s -> DER ECDSA-Sig-Value (RFC 3279 §2.2.3)
        ECDSA_SIG *es = ECDSA_SIG_new ();
        ECDSA_SIG_set0 (es, BN_bin2bn (sig, (int) len / 2, NULL),
                        BN_bin2bn (sig + len / 2, (int) len / 2, NULL));
        unsigned char *cursor = der;
        check_len = (size_t) i2d_ECDSA_SIG (es, &cursor);
        ECDSA_SIG_free (es);
        to_check = der;
    }
    EVP_MD_CTX *ctx = EVP_MD_CTX_new ();
    bool ok = EVP_DigestVerifyInit (ctx, NULL, EVP_sha256 (), NULL, pub) == 1
           && EVP_DigestVerify (ctx, to_check, check_len, (const unsigned char *) msg, strlen (msg)) == 1;
    EVP_MD_CTX_free (ctx);
    return ok;
}

//  P-256 public key from the CKA_EC_POINT (DER OCTET STRING) of `object`.
static EVP_PKEY *
s_ec_public (CK_SESSION_HANDLE session, CK_OBJECT_HANDLE object)
{
    CK_BYTE point [200];
    CK_ATTRIBUTE attr = { CKA_EC_POINT, point, sizeof point };
    CHECK (p11->C_GetAttributeValue (session, object, &attr, 1), "C_GetAttributeValue(CKA_EC_POINT)");
    const CK_BYTE *raw = point;
    size_t raw_len = attr.ulValueLen;
    if (raw_len == 67 && point [0] == 0x04 && point [1] == 65) {
        raw += 2;
        raw_len -= 2;
    }
    OSSL_PARAM_BLD *bld = OSSL_PARAM_BLD_new ();
    OSSL_PARAM_BLD_push_utf8_string (bld, OSSL_PKEY_PARAM_GROUP_NAME, "prime256v1", 0);
    OSSL_PARAM_BLD_push_octet_string (bld, OSSL_PKEY_PARAM_PUB_KEY, raw, raw_len);
    OSSL_PARAM *params = OSSL_PARAM_BLD_to_param (bld);
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_name (NULL, "EC", NULL);
    EVP_PKEY *pkey = NULL;
    if (EVP_PKEY_fromdata_init (ctx) != 1
    ||  EVP_PKEY_fromdata (ctx, &pkey, EVP_PKEY_PUBLIC_KEY, params) != 1)
        s_fail ("CKA_EC_POINT is not a P-256 point");
    EVP_PKEY_CTX_free (ctx);
    OSSL_PARAM_free (params);
    OSSL_PARAM_BLD_free (bld);
    return pkey;
}

static CK_OBJECT_HANDLE
s_generate_ec (CK_SESSION_HANDLE session, CK_OBJECT_HANDLE *pub_p)
{
    static CK_BYTE p256 [] = { 0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07 };
    CK_BBOOL no = CK_FALSE, yes = CK_TRUE;
    CK_MECHANISM mechanism = { CKM_EC_KEY_PAIR_GEN, NULL, 0 };
    CK_ATTRIBUTE pub [] = { { CKA_TOKEN, &no, 1 }, { CKA_EC_PARAMS, p256, sizeof p256 },
                            { CKA_VERIFY, &yes, 1 } };
    CK_ATTRIBUTE priv [] = { { CKA_TOKEN, &no, 1 }, { CKA_SIGN, &yes, 1 },
                             { CKA_SENSITIVE, &yes, 1 }, { CKA_PRIVATE, &yes, 1 } };
    CK_OBJECT_HANDLE priv_key;
    CHECK (p11->C_GenerateKeyPair (session, &mechanism, pub, 3, priv, 4, pub_p, &priv_key),
           "C_GenerateKeyPair (CKA_TOKEN=FALSE)");
    return priv_key;
}

//  Big-endian bytes of an RSA parameter into buf; returns the length.
static CK_ULONG
s_bn (EVP_PKEY *pkey, const char *name, CK_BYTE *buf)
{
    BIGNUM *bn = NULL;
    if (EVP_PKEY_get_bn_param (pkey, name, &bn) != 1)
        s_fail ("RSA key lacks a CRT component");
    CK_ULONG len = (CK_ULONG) BN_bn2bin (bn, buf);
    BN_clear_free (bn);
    return len;
}

static CK_OBJECT_HANDLE
s_create_rsa (CK_SESSION_HANDLE session, EVP_PKEY *pkey)
{
    static const char *names [] = { "n", "e", "d", "rsa-factor1", "rsa-factor2",
                                    "rsa-exponent1", "rsa-exponent2", "rsa-coefficient1" };
    static const CK_ATTRIBUTE_TYPE types [] = { CKA_MODULUS, CKA_PUBLIC_EXPONENT,
        CKA_PRIVATE_EXPONENT, CKA_PRIME_1, CKA_PRIME_2, CKA_EXPONENT_1, CKA_EXPONENT_2, CKA_COEFFICIENT };
    static CK_BYTE values [8][512];
    CK_OBJECT_CLASS klass = CKO_PRIVATE_KEY;
    CK_KEY_TYPE type = CKK_RSA;
    CK_BBOOL no = CK_FALSE, yes = CK_TRUE;
    CK_ATTRIBUTE tmpl [14] = { { CKA_CLASS, &klass, sizeof klass }, { CKA_KEY_TYPE, &type, sizeof type },
                               { CKA_TOKEN, &no, 1 }, { CKA_SIGN, &yes, 1 },
                               { CKA_SENSITIVE, &yes, 1 }, { CKA_PRIVATE, &yes, 1 } };
    for (int i = 0; i < 8; i++)
        tmpl [6 + i] = (CK_ATTRIBUTE) { types [i], values [i], s_bn (pkey, names [i], values [i]) };
    CK_OBJECT_HANDLE key;
    CHECK (p11->C_CreateObject (session, tmpl, 14, &key), "C_CreateObject (CKA_TOKEN=FALSE)");
    memset (values, 0, sizeof values);
    return key;
}

static EVP_PKEY *
s_read_der (const char *path)
{
    FILE *file = fopen (path, "rb");
    if (!file)
        s_fail ("cannot open the RSA key file");
    EVP_PKEY *pkey = d2i_PrivateKey_fp (file, NULL);
    fclose (file);
    if (!pkey)
        s_fail ("the RSA key file is not DER");
    return pkey;
}

//  After C_CloseSession the handle must be invalid.
static void
s_expect_gone (CK_SESSION_HANDLE session, CK_OBJECT_HANDLE object, const char *what)
{
    CK_KEY_TYPE type;
    CK_ATTRIBUTE attr = { CKA_KEY_TYPE, &type, sizeof type };
    CK_RV rv = p11->C_GetAttributeValue (session, object, &attr, 1);
    if (rv != CKR_OBJECT_HANDLE_INVALID) {
        fprintf (stderr, "cs-session-key: %s after C_CloseSession: CK_RV 0x%lx, not "
                 "CKR_OBJECT_HANDLE_INVALID\n", what, (unsigned long) rv);
        exit (1);
    }
    printf ("%s: gone after C_CloseSession (CKR_OBJECT_HANDLE_INVALID)\n", what);
}

int
main (int argc, char **argv)
{
    if (argc != 4 && argc != 5) {
        fprintf (stderr, "usage: cs-session-key MODULE.so TOKEN PIN [RSA-KEY.der]\n");
        return 2;
    }
    void *dl = dlopen (argv [1], RTLD_NOW | RTLD_LOCAL);
    CK_C_GetFunctionList get = dl ? (CK_C_GetFunctionList) dlsym (dl, "C_GetFunctionList") : NULL;
    if (!get || get (&p11) != CKR_OK)
        s_fail ("cannot load the module");
    CHECK (p11->C_Initialize (NULL), "C_Initialize");
    CK_SLOT_ID slot = s_slot (argv [2]);
    CK_SESSION_HANDLE keep, work;
    CK_FLAGS flags = CKF_SERIAL_SESSION | CKF_RW_SESSION;
    CHECK (p11->C_OpenSession (slot, flags, NULL, NULL, &keep), "C_OpenSession");
    CHECK (p11->C_Login (keep, CKU_USER, (CK_UTF8CHAR_PTR) argv [3], strlen (argv [3])), "C_Login");
    CHECK (p11->C_OpenSession (slot, flags, NULL, NULL, &work), "C_OpenSession (second)");

    const char *msg = "a message signed with a per-request key";
    CK_BYTE sig [1024];
    CK_OBJECT_HANDLE ec_pub, ec = s_generate_ec (work, &ec_pub);
    EVP_PKEY *ec_key = s_ec_public (work, ec_pub);
    CK_ULONG len = s_sign (work, ec, CKM_ECDSA, msg, sig, sizeof sig);
    if (!s_verify (ec_key, msg, sig, len, true))
        s_fail ("the session EC key's signature does not verify");
    printf ("generated P-256 session key: ECDSA (SHA-256) signature verified by OpenSSL\n");

    CK_OBJECT_HANDLE rsa = CK_INVALID_HANDLE;
    EVP_PKEY *rsa_key = NULL;
    if (argc == 5) {
        rsa_key = s_read_der (argv [4]);
        rsa = s_create_rsa (work, rsa_key);
        len = s_sign (work, rsa, CKM_SHA256_RSA_PKCS, msg, sig, sizeof sig);
        if (!s_verify (rsa_key, msg, sig, len, false))
            s_fail ("the session RSA key's signature does not verify");
        printf ("created RSA session key: SHA256-RSA-PKCS signature verified by OpenSSL\n");
    }
    CHECK (p11->C_CloseSession (work), "C_CloseSession");
    s_expect_gone (keep, ec, "generated EC private key");
    s_expect_gone (keep, ec_pub, "generated EC public key");
    if (rsa != CK_INVALID_HANDLE)
        s_expect_gone (keep, rsa, "created RSA private key");
    p11->C_CloseSession (keep);
    p11->C_Finalize (NULL);
    EVP_PKEY_free (ec_key);
    EVP_PKEY_free (rsa_key);
    printf ("ok\n");
    return 0;
}
