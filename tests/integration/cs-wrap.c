/*  cs-wrap.c — C_WrapKey and C_UnwrapKey through the module under test
 *  (issue #10), with RSA key pairs the shell test made with OpenSSL
 *  (DIR/wrap.pem: the token's unwrapping pair; DIR/attack.pem: the
 *  attacker's pair), imported here with C_CreateObject:
 *    - an AES-128 key of known value is wrapped (CKM_RSA_PKCS_OAEP,
 *      SHA-256) with the wrap.pem public key: length query, CKR_BUFFER_TOO_SMALL,
 *      then DIR/k1.wrapped for the shell's `openssl pkeyutl -decrypt`;
 *    - DIR/k2.wrapped (OpenSSL's OAEP of the AES key DIR/k2.bin) is
 *      unwrapped with the wrap.pem private key (a keystore key with
 *      CKA_UNWRAP TRUE, CKA_DECRYPT FALSE: the DecryptJob runs on the
 *      broker), and the new key encrypts DIR/plain.bin to DIR/k2-ecb.bin
 *      and DIR/k2-cbc.bin for the shell's `openssl enc`; unwrapped again as
 *      a token key (sealed by the broker) to DIR/k2-ecb-token.bin;
 *    - every refusal of the wrapping rules gives its exact CKR_ code, and
 *      the Tookan attacks (wrap/decrypt, wrap/unwrap, attribute changes)
 *      fail with the attribute that stops each named.
 *  It also writes DIR/k1.bin (the known value) and DIR/k3.bin, k3.wrapped
 *  (a sensitive key wrapped with the SO's trusted key), and leaves the
 *  keystore key (CKA_ID "cs-wrap-unwrap") for the shell's pkcs11-tool.
 *
 *  usage: cs-wrap MODULE.so TOKEN PIN SOPIN DIR
 *  Prints one line per step; exit 0 when all pass.
 */
#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <p11-kit/pkcs11.h>
#include "cs-test-files.h"
#include "cs-test-slot.h"

static CK_FUNCTION_LIST *p11;
static CK_SESSION_HANDLE s;
static const char *s_dir;

#define CHECK(call, what) do { CK_RV rv_ = (call); if (rv_ != CKR_OK) { \
    fprintf (stderr, "cs-wrap: %s: CK_RV 0x%lx\n", what, (unsigned long) rv_); \
    exit (1); } } while (0)
#define EXPECT(call, want, what) do { CK_RV rv_ = (call); if (rv_ != (want)) { \
    fprintf (stderr, "cs-wrap: %s: CK_RV 0x%lx, expected %s (0x%lx)\n", what, (unsigned long) rv_, #want, \
             (unsigned long) (want)); exit (1); } \
    printf ("refused as expected: %s -> %s\n", what, #want); } while (0)

static void
s_fail (const char *what)
{
    fprintf (stderr, "cs-wrap: FAIL: %s\n", what);
    exit (1);
}

static size_t
s_read (const char *name, unsigned char *buf, size_t max)
{
    long len = cs_test_read (s_dir, name, buf, max);
    if (len < 0)
        s_fail (name);
    return (size_t) len;
}

static void
s_write (const char *name, const unsigned char *data, size_t len)
{
    if (!cs_test_write (s_dir, name, data, len))
        s_fail (name);
}

/*  An RSA key pair's components (big-endian), from a PEM the shell made.  */
typedef struct {
    unsigned char v [8][1024];
    CK_ULONG len [8];           /* n e d p q dP dQ qInv */
} s_rsa_t;

static void
s_rsa_load (const char *name, s_rsa_t *rsa)
{
    static const char *params [8] = {
        OSSL_PKEY_PARAM_RSA_N, OSSL_PKEY_PARAM_RSA_E, OSSL_PKEY_PARAM_RSA_D, OSSL_PKEY_PARAM_RSA_FACTOR1,
        OSSL_PKEY_PARAM_RSA_FACTOR2, OSSL_PKEY_PARAM_RSA_EXPONENT1, OSSL_PKEY_PARAM_RSA_EXPONENT2,
        OSSL_PKEY_PARAM_RSA_COEFFICIENT1,
    };
    char path [4096];
    snprintf (path, sizeof path, "%s/%s", s_dir, name);
    FILE *file = fopen (path, "r");
    EVP_PKEY *pkey = file ? PEM_read_PrivateKey (file, NULL, NULL, NULL) : NULL;
    if (file)
        fclose (file);
    if (!pkey)
        s_fail (path);
    for (int i = 0; i < 8; i++) {
        BIGNUM *bn = NULL;
        if (!EVP_PKEY_get_bn_param (pkey, params [i], &bn) || BN_num_bytes (bn) > 1024)
            s_fail ("RSA component");
        rsa->len [i] = (CK_ULONG) BN_bn2bin (bn, rsa->v [i]);
        BN_clear_free (bn);
    }
    EVP_PKEY_free (pkey);
}

static CK_BBOOL yes = CK_TRUE, no = CK_FALSE;

/*  A session RSA public key with CKA_WRAP `wrap` and CKA_TRUSTED `trusted`
 *  (CKA_PRIVATE FALSE: it outlives the SO's login).  */
static CK_OBJECT_HANDLE
s_public (const s_rsa_t *rsa, CK_BBOOL wrap, CK_BBOOL trusted)
{
    CK_OBJECT_CLASS klass = CKO_PUBLIC_KEY;
    CK_KEY_TYPE type = CKK_RSA;
    CK_ATTRIBUTE tmpl [] = {
        { CKA_CLASS, &klass, sizeof klass }, { CKA_KEY_TYPE, &type, sizeof type },
        { CKA_TOKEN, &no, 1 }, { CKA_PRIVATE, &no, 1 }, { CKA_WRAP, &wrap, 1 }, { CKA_ENCRYPT, &yes, 1 },
        { CKA_MODULUS, (void *) rsa->v [0], rsa->len [0] }, { CKA_PUBLIC_EXPONENT, (void *) rsa->v [1], rsa->len [1] },
        { CKA_TRUSTED, &trusted, 1 },
    };
    CK_OBJECT_HANDLE key;
    CHECK (p11->C_CreateObject (s, tmpl, trusted ? 9 : 8, &key), "C_CreateObject (RSA public key)");
    return key;
}

/*  C_CreateObject of an RSA private key with CKA_UNWRAP `unwrap`,
 *  CKA_DECRYPT `decrypt`, a keystore key when `token`: its rv.  */
static CK_RV
s_private_rv (const s_rsa_t *rsa, CK_BBOOL token, CK_BBOOL unwrap, CK_BBOOL decrypt, const char *id,
              CK_OBJECT_HANDLE *key_p)
{
    CK_OBJECT_CLASS klass = CKO_PRIVATE_KEY;
    CK_KEY_TYPE type = CKK_RSA;
    CK_ATTRIBUTE tmpl [] = {
        { CKA_CLASS, &klass, sizeof klass }, { CKA_KEY_TYPE, &type, sizeof type },
        { CKA_TOKEN, &token, 1 }, { CKA_PRIVATE, &yes, 1 }, { CKA_SENSITIVE, &yes, 1 },
        { CKA_UNWRAP, &unwrap, 1 }, { CKA_DECRYPT, &decrypt, 1 }, { CKA_SIGN, &no, 1 },
        { CKA_ID, (void *) id, strlen (id) }, { CKA_LABEL, (void *) id, strlen (id) },
        { CKA_MODULUS, (void *) rsa->v [0], rsa->len [0] }, { CKA_PUBLIC_EXPONENT, (void *) rsa->v [1], rsa->len [1] },
        { CKA_PRIVATE_EXPONENT, (void *) rsa->v [2], rsa->len [2] }, { CKA_PRIME_1, (void *) rsa->v [3], rsa->len [3] },
        { CKA_PRIME_2, (void *) rsa->v [4], rsa->len [4] }, { CKA_EXPONENT_1, (void *) rsa->v [5], rsa->len [5] },
        { CKA_EXPONENT_2, (void *) rsa->v [6], rsa->len [6] }, { CKA_COEFFICIENT, (void *) rsa->v [7], rsa->len [7] },
    };
    return p11->C_CreateObject (s, tmpl, sizeof tmpl / sizeof tmpl [0], key_p);
}

/*  As s_private_rv; the key must be made.  */
static CK_OBJECT_HANDLE
s_private (const s_rsa_t *rsa, CK_BBOOL token, CK_BBOOL unwrap, CK_BBOOL decrypt, const char *id)
{
    CK_OBJECT_HANDLE key;
    CHECK (s_private_rv (rsa, token, unwrap, decrypt, id, &key), "C_CreateObject (RSA private key)");
    return key;
}

/*  A session AES key of known value.  */
static CK_OBJECT_HANDLE
s_aes (const unsigned char *value, CK_ULONG len, CK_BBOOL sensitive, CK_BBOOL extractable, CK_BBOOL with_trusted)
{
    CK_OBJECT_CLASS klass = CKO_SECRET_KEY;
    CK_KEY_TYPE type = CKK_AES;
    CK_ATTRIBUTE tmpl [] = {
        { CKA_CLASS, &klass, sizeof klass }, { CKA_KEY_TYPE, &type, sizeof type }, { CKA_TOKEN, &no, 1 },
        { CKA_VALUE, (void *) value, len }, { CKA_SENSITIVE, &sensitive, 1 },
        { CKA_EXTRACTABLE, &extractable, 1 }, { CKA_WRAP_WITH_TRUSTED, &with_trusted, 1 },
    };
    CK_OBJECT_HANDLE key;
    CHECK (p11->C_CreateObject (s, tmpl, sizeof tmpl / sizeof tmpl [0], &key), "C_CreateObject (AES key)");
    return key;
}

static CK_RSA_PKCS_OAEP_PARAMS s_oaep_params = { CKM_SHA256, CKG_MGF1_SHA256, CKZ_DATA_SPECIFIED, NULL, 0 };
static CK_MECHANISM s_oaep = { CKM_RSA_PKCS_OAEP, &s_oaep_params, sizeof s_oaep_params };

static CK_RV
s_wrap (CK_OBJECT_HANDLE wrapping, CK_OBJECT_HANDLE key, unsigned char *out, CK_ULONG *len_p)
{
    return p11->C_WrapKey (s, &s_oaep, wrapping, key, out, len_p);
}

static CK_RV
s_wrap_any (CK_OBJECT_HANDLE wrapping, CK_OBJECT_HANDLE key)
{
    unsigned char out [1024];
    CK_ULONG len = sizeof out;
    return s_wrap (wrapping, key, out, &len);
}

static CK_OBJECT_CLASS s_secret = CKO_SECRET_KEY;
static CK_KEY_TYPE s_aes_type = CKK_AES;

/*  C_UnwrapKey with the usual template plus `extra` (may be NULL).  */
static CK_RV
s_unwrap (CK_MECHANISM *mech, CK_OBJECT_HANDLE unwrapping, const unsigned char *wrapped, CK_ULONG len,
          const CK_ATTRIBUTE *extra, CK_ULONG n_extra, CK_OBJECT_HANDLE *key_p)
{
    CK_ATTRIBUTE tmpl [8] = {
        { CKA_CLASS, &s_secret, sizeof s_secret }, { CKA_KEY_TYPE, &s_aes_type, sizeof s_aes_type },
        { CKA_TOKEN, &no, 1 }, { CKA_ENCRYPT, &yes, 1 },
    };
    CK_ULONG n = 4;
    for (CK_ULONG i = 0; i < n_extra && n < 8; i++) {
        CK_ULONG j = 0;
        while (j < n && tmpl [j].type != extra [i].type)
            j++;
        tmpl [j] = extra [i];           /* replaces or appends */
        if (j == n)
            n++;
    }
    return p11->C_UnwrapKey (s, mech, unwrapping, (CK_BYTE_PTR) wrapped, len, tmpl, n, key_p);
}

static bool
s_flag (CK_OBJECT_HANDLE key, CK_ATTRIBUTE_TYPE type)
{
    CK_BBOOL value = 2;
    CK_ATTRIBUTE attr = { type, &value, 1 };
    CHECK (p11->C_GetAttributeValue (s, key, &attr, 1), "C_GetAttributeValue (flag)");
    return value == CK_TRUE;
}

static void
s_encrypt (CK_OBJECT_HANDLE key, CK_MECHANISM *mech, const unsigned char *in, CK_ULONG len, const char *out_name)
{
    unsigned char out [256];
    CK_ULONG out_len = sizeof out;
    CHECK (p11->C_EncryptInit (s, mech, key), "C_EncryptInit (unwrapped key)");
    CHECK (p11->C_Encrypt (s, (CK_BYTE_PTR) in, len, out, &out_len), "C_Encrypt (unwrapped key)");
    s_write (out_name, out, out_len);
}

/*  ---- AES key wrap (CKM_AES_KEY_WRAP, RFC 3394; CKM_AES_KEY_WRAP_PAD,
    RFC 5649) as C_WrapKey/C_UnwrapKey mechanisms.  */

/*  C_CreateObject of a session AES key of known value with the given usage
 *  flags: its rv.  */
static CK_RV
s_aes_kek_rv (const unsigned char *value, CK_ULONG len, CK_BBOOL wrap, CK_BBOOL unwrap, CK_BBOOL encrypt,
              CK_BBOOL decrypt, CK_OBJECT_HANDLE *key_p)
{
    CK_OBJECT_CLASS klass = CKO_SECRET_KEY;
    CK_KEY_TYPE type = CKK_AES;
    CK_ATTRIBUTE tmpl [] = {
        { CKA_CLASS, &klass, sizeof klass }, { CKA_KEY_TYPE, &type, sizeof type }, { CKA_TOKEN, &no, 1 },
        { CKA_VALUE, (void *) value, len }, { CKA_WRAP, &wrap, 1 }, { CKA_UNWRAP, &unwrap, 1 },
        { CKA_ENCRYPT, &encrypt, 1 }, { CKA_DECRYPT, &decrypt, 1 },
    };
    return p11->C_CreateObject (s, tmpl, sizeof tmpl / sizeof tmpl [0], key_p);
}

/*  As s_aes_kek_rv; the key must be made.  */
static CK_OBJECT_HANDLE
s_aes_kek (const unsigned char *value, CK_ULONG len, CK_BBOOL wrap, CK_BBOOL unwrap, CK_BBOOL encrypt,
           CK_BBOOL decrypt)
{
    CK_OBJECT_HANDLE key;
    CHECK (s_aes_kek_rv (value, len, wrap, unwrap, encrypt, decrypt, &key), "C_CreateObject (AES KEK)");
    return key;
}

static CK_MECHANISM s_kw = { CKM_AES_KEY_WRAP, NULL, 0 }, s_kwp = { CKM_AES_KEY_WRAP_PAD, NULL, 0 };

static CK_RV
s_kw_any (CK_OBJECT_HANDLE wrapping, CK_OBJECT_HANDLE key)
{
    unsigned char out [1024];
    CK_ULONG len = sizeof out;
    return p11->C_WrapKey (s, &s_kw, wrapping, key, out, &len);
}

/*  RFC 3394 §4.1: the 128-bit key data wrapped with a 128-bit KEK.  */
static const unsigned char s_rfc_kek [16] = {
    0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f };
static const unsigned char s_rfc_key [16] = {
    0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff };
static const unsigned char s_rfc_wrapped [24] = {
    0x1f, 0xa6, 0x8b, 0x0a, 0x81, 0x12, 0xb4, 0x47, 0xae, 0xf3, 0x4b, 0xd8, 0xfb, 0x5a, 0x7b, 0x82,
    0x9d, 0x3e, 0x86, 0x23, 0x71, 0xd2, 0xcf, 0xe5 };

static void
s_aes_wrap_checks (CK_SLOT_ID slot, const unsigned char *in, CK_ULONG in_len)
{
    CK_MECHANISM_INFO info;
    CK_MECHANISM ecb = { CKM_AES_ECB, NULL, 0 };
    unsigned char out [1024];
    CK_ULONG len = 0;
    CK_OBJECT_HANDLE key = 0;
    CHECK (p11->C_GetMechanismInfo (slot, CKM_AES_KEY_WRAP, &info), "C_GetMechanismInfo (AES key wrap)");
    if (!(info.flags & CKF_WRAP) || !(info.flags & CKF_UNWRAP))
        s_fail ("CKM_AES_KEY_WRAP does not advertise CKF_WRAP and CKF_UNWRAP");
    CHECK (p11->C_GetMechanismInfo (slot, CKM_AES_KEY_WRAP_PAD, &info), "C_GetMechanismInfo (AES key wrap pad)");
    if (!(info.flags & CKF_WRAP) || !(info.flags & CKF_UNWRAP))
        s_fail ("CKM_AES_KEY_WRAP_PAD does not advertise CKF_WRAP and CKF_UNWRAP");

    /*  The RFC's vector: length query, CKR_BUFFER_TOO_SMALL, the bytes.  */
    CK_OBJECT_HANDLE kek = s_aes_kek (s_rfc_kek, 16, CK_TRUE, CK_TRUE, CK_FALSE, CK_FALSE);
    CK_OBJECT_HANDLE rfc_key = s_aes (s_rfc_key, 16, CK_FALSE, CK_TRUE, CK_FALSE);
    CHECK (p11->C_WrapKey (s, &s_kw, kek, rfc_key, NULL, &len), "C_WrapKey (AES key wrap, length query)");
    if (len != 24)
        s_fail ("the AES key wrap length query does not answer 24");
    len = 10;
    EXPECT (p11->C_WrapKey (s, &s_kw, kek, rfc_key, out, &len), CKR_BUFFER_TOO_SMALL, "C_WrapKey (AES) into 10 bytes");
    if (len != 24)
        s_fail ("CKR_BUFFER_TOO_SMALL does not give 24");
    len = sizeof out;
    CHECK (p11->C_WrapKey (s, &s_kw, kek, rfc_key, out, &len), "C_WrapKey (CKM_AES_KEY_WRAP)");
    if (len != sizeof s_rfc_wrapped || memcmp (out, s_rfc_wrapped, len) != 0)
        s_fail ("CKM_AES_KEY_WRAP does not give RFC 3394 §4.1's ciphertext");
    s_write ("kw.wrapped", out, len);
    len = sizeof out;
    CHECK (p11->C_WrapKey (s, &s_kwp, kek, rfc_key, out, &len), "C_WrapKey (CKM_AES_KEY_WRAP_PAD)");
    s_write ("kwp.wrapped", out, len);
    printf ("C_WrapKey: CKM_AES_KEY_WRAP gives RFC 3394 §4.1's 24 bytes\n");

    /*  Unwrapped back into a session key that encrypts (the shell: openssl enc).  */
    CK_ULONG k16 = 16;
    CK_ATTRIBUTE len16 = { CKA_VALUE_LEN, &k16, sizeof k16 };
    CHECK (s_unwrap (&s_kw, kek, s_rfc_wrapped, sizeof s_rfc_wrapped, &len16, 1, &key), "C_UnwrapKey (AES key wrap)");
    if (s_flag (key, CKA_LOCAL) || s_flag (key, CKA_ALWAYS_SENSITIVE) || !s_flag (key, CKA_SENSITIVE))
        s_fail ("the AES-unwrapped key's CKA_LOCAL, CKA_ALWAYS_SENSITIVE or CKA_SENSITIVE");
    s_encrypt (key, &ecb, in, in_len, "kw-ecb.bin");
    unsigned char bad [sizeof s_rfc_wrapped];
    memcpy (bad, s_rfc_wrapped, sizeof bad);
    bad [5] ^= 0x01;
    EXPECT (s_unwrap (&s_kw, kek, bad, sizeof bad, NULL, 0, &key), CKR_WRAPPED_KEY_INVALID,
            "C_UnwrapKey (AES key wrap) of a flipped ciphertext");
    EXPECT (s_unwrap (&s_kw, kek, s_rfc_wrapped, 20, NULL, 0, &key), CKR_WRAPPED_KEY_LEN_RANGE,
            "C_UnwrapKey (AES key wrap) of 20 bytes");
    EXPECT (s_unwrap (&s_oaep, kek, s_rfc_wrapped, 24, NULL, 0, &key), CKR_UNWRAPPING_KEY_TYPE_INCONSISTENT,
            "C_UnwrapKey with OAEP and an AES key");
    printf ("C_UnwrapKey: RFC 3394 §4.1's bytes became a session AES key that encrypts\n");

    /*  The rules.  */
    CK_OBJECT_HANDLE nowrap = s_aes_kek (s_rfc_kek, 16, CK_FALSE, CK_TRUE, CK_FALSE, CK_FALSE);
    EXPECT (s_kw_any (nowrap, rfc_key), CKR_KEY_FUNCTION_NOT_PERMITTED, "AES wrapping key without CKA_WRAP");
    unsigned char kx [16];
    RAND_bytes (kx, sizeof kx);
    EXPECT (s_kw_any (kek, s_aes (kx, 16, CK_FALSE, CK_FALSE, CK_FALSE)), CKR_KEY_UNEXTRACTABLE,
            "AES-wrapping a CKA_EXTRACTABLE FALSE key");
    EXPECT (s_kw_any (kek, s_aes (kx, 16, CK_TRUE, CK_TRUE, CK_FALSE)), CKR_KEY_NOT_WRAPPABLE,
            "Tookan wrap/decrypt: a CKA_SENSITIVE key with an untrusted AES key");
    /*  Tookan wrap/decrypt and encrypt/unwrap with one symmetric key (it
        would wrap, then C_Decrypt the bytes; or encrypt a value, then
        unwrap it): under the strict usage separation (docs/CONTRACTS.md)
        such a key cannot be made, and the wrapping key never gains a data
        role (the combined keys of `spec`: cs-attacks).  */
    CK_OBJECT_HANDLE combined;
    EXPECT (s_aes_kek_rv (s_rfc_kek, 16, CK_TRUE, CK_FALSE, CK_TRUE, CK_TRUE, &combined), CKR_TEMPLATE_INCONSISTENT,
            "Tookan wrap/decrypt: an AES key with CKA_WRAP and CKA_DECRYPT");
    EXPECT (s_aes_kek_rv (s_rfc_kek, 16, CK_FALSE, CK_TRUE, CK_TRUE, CK_FALSE, &combined), CKR_TEMPLATE_INCONSISTENT,
            "Tookan encrypt/unwrap: an AES key with CKA_UNWRAP and CKA_ENCRYPT");
    EXPECT (p11->C_DecryptInit (s, &s_kw, kek), CKR_KEY_FUNCTION_NOT_PERMITTED,
            "Tookan wrap/decrypt: C_DecryptInit with an AES wrapping key");
    CK_ATTRIBUTE decrypt_on = { CKA_DECRYPT, &yes, 1 };
    EXPECT (p11->C_SetAttributeValue (s, kek, &decrypt_on, 1), CKR_ATTRIBUTE_READ_ONLY,
            "CKA_DECRYPT FALSE -> TRUE on an AES wrapping key");

    /*  A token AES wrapping key (made by the broker) wraps and unwraps a
        session key: one SymJob each, by ref.  */
    CK_ULONG k32 = 32;
    CK_OBJECT_CLASS klass = CKO_SECRET_KEY;
    CK_KEY_TYPE type = CKK_AES;
    CK_ATTRIBUTE gen [] = {
        { CKA_CLASS, &klass, sizeof klass }, { CKA_KEY_TYPE, &type, sizeof type }, { CKA_TOKEN, &yes, 1 },
        { CKA_VALUE_LEN, &k32, sizeof k32 }, { CKA_WRAP, &yes, 1 }, { CKA_UNWRAP, &yes, 1 },
        { CKA_ENCRYPT, &no, 1 }, { CKA_DECRYPT, &no, 1 }, { CKA_ID, "cs-wrap-kek", 11 },
    };
    CK_MECHANISM keygen = { CKM_AES_KEY_GEN, NULL, 0 };
    CK_OBJECT_HANDLE token_kek;
    CHECK (p11->C_GenerateKey (s, &keygen, gen, sizeof gen / sizeof gen [0], &token_kek),
           "C_GenerateKey (token AES wrapping key)");
    CK_ULONG wlen = sizeof out;
    CHECK (p11->C_WrapKey (s, &s_kwp, token_kek, rfc_key, out, &wlen), "C_WrapKey (token AES key, KWP)");
    if (wlen != 24 || memcmp (out, s_rfc_wrapped, 8) == 0)
        s_fail ("the token key's wrapped bytes");
    CHECK (s_unwrap (&s_kwp, token_kek, out, wlen, &len16, 1, &key), "C_UnwrapKey (token AES key, KWP)");
    s_encrypt (key, &ecb, in, in_len, "kw-token-ecb.bin");
    out [3] ^= 0x80;
    EXPECT (s_unwrap (&s_kwp, token_kek, out, wlen, NULL, 0, &key), CKR_WRAPPED_KEY_INVALID,
            "C_UnwrapKey (token AES key, KWP) of a flipped ciphertext");
    EXPECT (p11->C_EncryptInit (s, &ecb, token_kek), CKR_KEY_FUNCTION_NOT_PERMITTED,
            "C_EncryptInit with the token wrapping key");
    CHECK (p11->C_DestroyObject (s, token_kek), "C_DestroyObject (token AES wrapping key)");
    printf ("a token AES wrapping key wraps and unwraps a session key (KWP) that then encrypts\n");
}

int
main (int argc, char **argv)
{
    if (argc != 6) {
        fprintf (stderr, "usage: cs-wrap MODULE.so TOKEN PIN SOPIN DIR\n");
        return 2;
    }
    void *dl = dlopen (argv [1], RTLD_NOW);
    CK_C_GetFunctionList get = dl ? (CK_C_GetFunctionList) dlsym (dl, "C_GetFunctionList") : NULL;
    if (!get || get (&p11) != CKR_OK)
        s_fail ("cannot load the module");
    s_dir = argv [5];
    CHECK (p11->C_Initialize (NULL), "C_Initialize");
    CK_SLOT_ID slot = 0;
    CK_RV rv = cs_test_slot (p11, argv [2], &slot);
    if (rv == CKR_TOKEN_NOT_PRESENT)
        s_fail ("no token with that label");
    CHECK (rv, "C_GetSlotList");
    CHECK (p11->C_OpenSession (slot, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &s), "C_OpenSession");

    CK_MECHANISM_INFO info;
    CHECK (p11->C_GetMechanismInfo (slot, CKM_RSA_PKCS_OAEP, &info), "C_GetMechanismInfo (OAEP)");
    if (!(info.flags & CKF_WRAP) || !(info.flags & CKF_UNWRAP))
        s_fail ("CKM_RSA_PKCS_OAEP does not advertise CKF_WRAP and CKF_UNWRAP");
    printf ("CKM_RSA_PKCS_OAEP advertises CKF_WRAP and CKF_UNWRAP\n");

    s_rsa_t *wrap = calloc (1, sizeof *wrap), *attack = calloc (1, sizeof *attack);
    if (!wrap || !attack)
        s_fail ("out of memory");
    s_rsa_load ("wrap.pem", wrap);
    s_rsa_load ("attack.pem", attack);

    /*  Without a login, nothing is wrapped.  */
    EXPECT (s_wrap_any (1, 2), CKR_USER_NOT_LOGGED_IN, "C_WrapKey without a login");

    /*  The SO makes the trusted wrapping keys (CKA_TRUSTED is the SO's:
        PKCS#11 2.40 §4.8 table 31 footnote).  */
    CHECK (p11->C_Login (s, CKU_SO, (CK_UTF8CHAR_PTR) argv [4], strlen (argv [4])), "C_Login (SO)");
    CK_OBJECT_HANDLE trusted = s_public (wrap, CK_TRUE, CK_TRUE);
    CK_OBJECT_HANDLE trusted_attack = s_public (attack, CK_TRUE, CK_TRUE);
    CHECK (p11->C_Logout (s), "C_Logout (SO)");
    CHECK (p11->C_Login (s, CKU_USER, (CK_UTF8CHAR_PTR) argv [3], strlen (argv [3])), "C_Login");

    CK_OBJECT_HANDLE pub = s_public (wrap, CK_TRUE, CK_FALSE);
    CK_OBJECT_HANDLE pub_nowrap = s_public (wrap, CK_FALSE, CK_FALSE);
    CK_OBJECT_HANDLE unwrapper = s_private (wrap, CK_TRUE, CK_TRUE, CK_FALSE, "cs-wrap-unwrap");

    /*  ---- C_WrapKey: the value, checked by the shell with openssl pkeyutl.  */
    unsigned char k1 [16], out [1024];
    CK_ULONG len = 0;
    RAND_bytes (k1, sizeof k1);
    CK_OBJECT_HANDLE key1 = s_aes (k1, sizeof k1, CK_FALSE, CK_TRUE, CK_FALSE);
    CHECK (s_wrap (pub, key1, NULL, &len), "C_WrapKey (length query)");
    if (len != wrap->len [0])
        s_fail ("the length query does not answer the modulus length");
    len = 100;
    EXPECT (s_wrap (pub, key1, out, &len), CKR_BUFFER_TOO_SMALL, "C_WrapKey into 100 bytes");
    if (len != wrap->len [0])
        s_fail ("CKR_BUFFER_TOO_SMALL does not give the length");
    len = sizeof out;
    CHECK (s_wrap (pub, key1, out, &len), "C_WrapKey");
    if (len != wrap->len [0])
        s_fail ("the wrapped key is not k bytes");
    s_write ("k1.bin", k1, sizeof k1);
    s_write ("k1.wrapped", out, len);
    printf ("C_WrapKey: an extractable AES-128 key wrapped with OAEP (SHA-256), %lu bytes\n", (unsigned long) len);

    /*  ---- C_WrapKey refusals.  */
    CK_MECHANISM pkcs1 = { CKM_RSA_PKCS, NULL, 0 };
    len = sizeof out;
    EXPECT (p11->C_WrapKey (s, &pkcs1, pub, key1, out, &len), CKR_MECHANISM_INVALID, "C_WrapKey with CKM_RSA_PKCS");
    EXPECT (s_wrap_any (pub_nowrap, key1), CKR_KEY_FUNCTION_NOT_PERMITTED, "wrapping key without CKA_WRAP");
    EXPECT (s_wrap_any (unwrapper, key1), CKR_WRAPPING_KEY_TYPE_INCONSISTENT, "a private key as wrapping key");
    EXPECT (s_wrap_any (0x7fffff, key1), CKR_WRAPPING_KEY_HANDLE_INVALID, "no such wrapping key");
    EXPECT (s_wrap_any (pub, 0x7fffff), CKR_KEY_HANDLE_INVALID, "no such key to wrap");
    EXPECT (s_wrap_any (pub, pub_nowrap), CKR_KEY_NOT_WRAPPABLE, "wrapping a public key");
    unsigned char kx [16];
    RAND_bytes (kx, sizeof kx);
    CK_OBJECT_HANDLE unextractable = s_aes (kx, sizeof kx, CK_FALSE, CK_FALSE, CK_FALSE);
    EXPECT (s_wrap_any (pub, unextractable), CKR_KEY_UNEXTRACTABLE, "wrapping a CKA_EXTRACTABLE FALSE key");
    CK_OBJECT_HANDLE with_trusted = s_aes (kx, sizeof kx, CK_FALSE, CK_TRUE, CK_TRUE);
    EXPECT (s_wrap_any (pub, with_trusted), CKR_KEY_NOT_WRAPPABLE,
            "wrapping a CKA_WRAP_WITH_TRUSTED key with an untrusted key");
    CHECK (s_wrap_any (trusted, with_trusted), "wrapping a CKA_WRAP_WITH_TRUSTED key with a CKA_TRUSTED key");
    printf ("a CKA_WRAP_WITH_TRUSTED key is wrapped by the SO's CKA_TRUSTED key only\n");

    /*  ---- The Tookan wrap/decrypt attack: the attacker's key pair (public
        half CKA_WRAP, private half CKA_DECRYPT) wraps a sensitive key, then
        C_Decrypt of the wrapped bytes would give its value.  */
    CK_OBJECT_HANDLE a_pub = s_public (attack, CK_TRUE, CK_FALSE);
    CK_OBJECT_HANDLE a_priv = s_private (attack, CK_FALSE, CK_FALSE, CK_TRUE, "cs-wrap-attacker");
    /*  The path is real: a readable key does go through it.  */
    unsigned char plain [1024];
    CK_ULONG plain_len = sizeof plain;
    len = sizeof out;
    CHECK (s_wrap (a_pub, key1, out, &len), "C_WrapKey (readable key, attacker's key)");
    CHECK (p11->C_DecryptInit (s, &s_oaep, a_priv), "C_DecryptInit (attacker's key)");
    CHECK (p11->C_Decrypt (s, out, len, plain, &plain_len), "C_Decrypt (attacker's key)");
    if (plain_len != sizeof k1 || memcmp (plain, k1, sizeof k1) != 0)
        s_fail ("wrap then decrypt of a readable key does not give its value");
    unsigned char k3 [32];
    RAND_bytes (k3, sizeof k3);
    CK_OBJECT_HANDLE sensitive = s_aes (k3, sizeof k3, CK_TRUE, CK_TRUE, CK_FALSE);
    EXPECT (s_wrap_any (a_pub, sensitive), CKR_KEY_NOT_WRAPPABLE,
            "Tookan wrap/decrypt: a CKA_SENSITIVE key with the attacker's untrusted key");
    EXPECT (s_wrap_any (trusted_attack, sensitive), CKR_KEY_NOT_WRAPPABLE,
            "Tookan wrap/decrypt: a CKA_SENSITIVE key with a trusted key whose private half decrypts");
    len = sizeof out;
    CHECK (s_wrap (trusted, sensitive, out, &len), "C_WrapKey (sensitive key, trusted key, unwrap-only half)");
    s_write ("k3.bin", k3, sizeof k3);
    s_write ("k3.wrapped", out, len);
    CK_ULONG k3_wrapped_len = len;
    unsigned char k3_wrapped [1024];
    memcpy (k3_wrapped, out, len);
    EXPECT (p11->C_DecryptInit (s, &s_oaep, unwrapper), CKR_KEY_FUNCTION_NOT_PERMITTED,
            "Tookan wrap/decrypt: C_DecryptInit with the unwrapping key");
    CK_ATTRIBUTE decrypt_on = { CKA_DECRYPT, &yes, 1 }, sign_on = { CKA_SIGN, &yes, 1 };
    EXPECT (p11->C_SetAttributeValue (s, unwrapper, &decrypt_on, 1), CKR_ATTRIBUTE_READ_ONLY,
            "Tookan attribute change: CKA_DECRYPT FALSE -> TRUE on the unwrapping key");
    EXPECT (p11->C_SetAttributeValue (s, unwrapper, &sign_on, 1), CKR_ATTRIBUTE_READ_ONLY,
            "sign-raw attack: CKA_SIGN FALSE -> TRUE on the unwrapping key");
    CK_OBJECT_HANDLE key = 0;
    if (s_flag (unwrapper, CKA_DECRYPT) || !s_flag (unwrapper, CKA_UNWRAP))
        s_fail ("the unwrapping key's CKA_DECRYPT is not FALSE, or its CKA_UNWRAP not TRUE");
    printf ("Tookan wrap/decrypt: stopped by CKA_SENSITIVE (untrusted wrapping key) and by CKA_UNWRAP "
            "(the trusted key's private half never decrypts)\n");

    /*  ---- The Tookan wrap/unwrap attack: unwrap the sensitive key's
        wrapped bytes as a readable key.  */
    CK_ATTRIBUTE readable [] = { { CKA_SENSITIVE, &no, 1 }, { CKA_EXTRACTABLE, &yes, 1 } };
    CK_ULONG k32 = 32;
    CK_ATTRIBUTE len32 = { CKA_VALUE_LEN, &k32, sizeof k32 };
    EXPECT (s_unwrap (&s_oaep, unwrapper, k3_wrapped, k3_wrapped_len, readable, 2, &key),
            CKR_TEMPLATE_INCONSISTENT, "Tookan wrap/unwrap: unwrapping as CKA_SENSITIVE FALSE");
    CHECK (s_unwrap (&s_oaep, unwrapper, k3_wrapped, k3_wrapped_len, &len32, 1, &key), "C_UnwrapKey (k3)");
    unsigned char value [64];
    CK_ATTRIBUTE get_value = { CKA_VALUE, value, sizeof value };
    EXPECT (p11->C_GetAttributeValue (s, key, &get_value, 1), CKR_ATTRIBUTE_SENSITIVE,
            "Tookan wrap/unwrap: CKA_VALUE of the unwrapped copy");
    CK_ATTRIBUTE trusted_on = { CKA_TRUSTED, &yes, 1 };
    EXPECT (s_unwrap (&s_oaep, unwrapper, k3_wrapped, k3_wrapped_len, &trusted_on, 1, &key),
            CKR_ATTRIBUTE_READ_ONLY, "unwrapping as CKA_TRUSTED TRUE");

    /*  ---- C_UnwrapKey of OpenSSL's ciphertext; the shell checks the
        encryptions with openssl enc.  */
    unsigned char wrapped [1024], in [64], iv [16];
    CK_ULONG wrapped_len = s_read ("k2.wrapped", wrapped, sizeof wrapped);
    CK_ULONG in_len = s_read ("plain.bin", in, sizeof in);
    s_read ("iv.bin", iv, sizeof iv);
    CK_ULONG k16 = 16;
    CK_ATTRIBUTE len16 = { CKA_VALUE_LEN, &k16, sizeof k16 };
    CHECK (s_unwrap (&s_oaep, unwrapper, wrapped, wrapped_len, &len16, 1, &key), "C_UnwrapKey");
    if (s_flag (key, CKA_LOCAL) || s_flag (key, CKA_ALWAYS_SENSITIVE) || s_flag (key, CKA_NEVER_EXTRACTABLE)
    ||  !s_flag (key, CKA_SENSITIVE) || !s_flag (key, CKA_EXTRACTABLE) || s_flag (key, CKA_TOKEN))
        s_fail ("the unwrapped key's CKA_LOCAL, CKA_ALWAYS_SENSITIVE, CKA_NEVER_EXTRACTABLE, CKA_SENSITIVE, "
                "CKA_EXTRACTABLE or CKA_TOKEN");
    CK_ULONG vlen = 0;
    CK_ATTRIBUTE get_len = { CKA_VALUE_LEN, &vlen, sizeof vlen };
    CHECK (p11->C_GetAttributeValue (s, key, &get_len, 1), "CKA_VALUE_LEN");
    if (vlen != 16)
        s_fail ("CKA_VALUE_LEN of the unwrapped key");
    CK_MECHANISM ecb = { CKM_AES_ECB, NULL, 0 }, cbc = { CKM_AES_CBC, iv, sizeof iv };
    s_encrypt (key, &ecb, in, in_len, "k2-ecb.bin");
    s_encrypt (key, &cbc, in, in_len, "k2-cbc.bin");
    printf ("C_UnwrapKey: OpenSSL's OAEP ciphertext became a session AES-128 key (CKA_LOCAL, "
            "CKA_ALWAYS_SENSITIVE, CKA_NEVER_EXTRACTABLE FALSE) that encrypts\n");

    /*  ---- A generic secret round trip: wrapped by the module, unwrapped by
        the module, both keys give the same HMAC; one too long for OAEP
        (k - 2hLen - 2 = 190 bytes here) is CKR_KEY_SIZE_RANGE.  */
    CK_KEY_TYPE generic = CKK_GENERIC_SECRET;
    CK_OBJECT_CLASS secret_class = CKO_SECRET_KEY;
    unsigned char gs [200];
    RAND_bytes (gs, sizeof gs);
    CK_ATTRIBUTE gs_tmpl [] = {
        { CKA_CLASS, &secret_class, sizeof secret_class }, { CKA_KEY_TYPE, &generic, sizeof generic },
        { CKA_TOKEN, &no, 1 }, { CKA_VALUE, gs, 32 }, { CKA_SENSITIVE, &no, 1 }, { CKA_EXTRACTABLE, &yes, 1 },
        { CKA_SIGN, &yes, 1 },
    };
    CK_OBJECT_HANDLE gs_key, gs_long, gs_back;
    CHECK (p11->C_CreateObject (s, gs_tmpl, 7, &gs_key), "C_CreateObject (generic secret)");
    gs_tmpl [3].ulValueLen = sizeof gs;
    CHECK (p11->C_CreateObject (s, gs_tmpl, 7, &gs_long), "C_CreateObject (200-byte generic secret)");
    EXPECT (s_wrap_any (pub, gs_long), CKR_KEY_SIZE_RANGE, "wrapping a 200-byte key with OAEP SHA-256 and 2048 bits");
    len = sizeof out;
    CHECK (s_wrap (pub, gs_key, out, &len), "C_WrapKey (generic secret)");
    CK_ATTRIBUTE gs_unwrap [] = {
        { CKA_CLASS, &secret_class, sizeof secret_class }, { CKA_KEY_TYPE, &generic, sizeof generic },
        { CKA_TOKEN, &no, 1 }, { CKA_SIGN, &yes, 1 },
    };
    CHECK (p11->C_UnwrapKey (s, &s_oaep, unwrapper, out, len, gs_unwrap, 4, &gs_back), "C_UnwrapKey (generic secret)");
    CK_MECHANISM hmac = { CKM_SHA256_HMAC, NULL, 0 };
    unsigned char mac1 [32], mac2 [32], msg [] = "wrapped and unwrapped";
    CK_ULONG mac1_len = sizeof mac1, mac2_len = sizeof mac2;
    CHECK (p11->C_SignInit (s, &hmac, gs_key), "C_SignInit (original)");
    CHECK (p11->C_Sign (s, msg, sizeof msg, mac1, &mac1_len), "C_Sign (original)");
    CHECK (p11->C_SignInit (s, &hmac, gs_back), "C_SignInit (unwrapped)");
    CHECK (p11->C_Sign (s, msg, sizeof msg, mac2, &mac2_len), "C_Sign (unwrapped)");
    if (mac1_len != 32 || mac2_len != 32 || memcmp (mac1, mac2, 32) != 0)
        s_fail ("the unwrapped generic secret's HMAC differs from the original's");
    printf ("a 32-byte generic secret wrapped and unwrapped by the module gives the same HMAC\n");

    /*  ---- C_UnwrapKey refusals.  */
    CK_OBJECT_HANDLE both;
    EXPECT (s_private_rv (attack, CK_FALSE, CK_TRUE, CK_TRUE, "cs-wrap-both", &both), CKR_TEMPLATE_INCONSISTENT,
            "a session key with CKA_UNWRAP and CKA_DECRYPT");
    EXPECT (s_unwrap (&s_oaep, a_priv, wrapped, wrapped_len, NULL, 0, &key), CKR_KEY_FUNCTION_NOT_PERMITTED,
            "C_UnwrapKey with a key without CKA_UNWRAP");
    EXPECT (s_unwrap (&s_oaep, pub, wrapped, wrapped_len, NULL, 0, &key), CKR_UNWRAPPING_KEY_TYPE_INCONSISTENT,
            "C_UnwrapKey with a public key");
    EXPECT (s_unwrap (&s_oaep, 0x7fffff, wrapped, wrapped_len, NULL, 0, &key), CKR_UNWRAPPING_KEY_HANDLE_INVALID,
            "C_UnwrapKey with no such key");
    EXPECT (s_unwrap (&pkcs1, unwrapper, wrapped, wrapped_len, NULL, 0, &key), CKR_MECHANISM_INVALID,
            "C_UnwrapKey with CKM_RSA_PKCS");
    EXPECT (s_unwrap (&s_oaep, unwrapper, wrapped, wrapped_len, &len32, 1, &key), CKR_TEMPLATE_INCONSISTENT,
            "C_UnwrapKey of 16 bytes with CKA_VALUE_LEN 32");
    /*  Into a token secret key (sealed by the broker): it encrypts as the
        session one did; the shell compares with openssl enc.  */
    CK_ATTRIBUTE token [] = { { CKA_TOKEN, &yes, 1 }, { CKA_ID, "cs-wrap-token", 13 } };
    CHECK (s_unwrap (&s_oaep, unwrapper, wrapped, wrapped_len, token, 2, &key), "C_UnwrapKey (token key)");
    if (!s_flag (key, CKA_TOKEN) || !s_flag (key, CKA_SENSITIVE) || s_flag (key, CKA_LOCAL)
    ||  s_flag (key, CKA_ALWAYS_SENSITIVE) || s_flag (key, CKA_NEVER_EXTRACTABLE))
        s_fail ("the unwrapped token key's CKA_TOKEN, CKA_SENSITIVE, CKA_LOCAL, CKA_ALWAYS_SENSITIVE or "
                "CKA_NEVER_EXTRACTABLE");
    s_encrypt (key, &ecb, in, in_len, "k2-ecb-token.bin");
    EXPECT (s_wrap_any (trusted, key), CKR_KEY_NOT_WRAPPABLE, "wrapping a token secret key (its value is the broker's)");
    CHECK (p11->C_DestroyObject (s, key), "C_DestroyObject (unwrapped token key)");
    printf ("C_UnwrapKey: the same ciphertext became a token AES-128 key that encrypts\n");
    CK_OBJECT_CLASS pub_class = CKO_PUBLIC_KEY;
    CK_ATTRIBUTE bad_class = { CKA_CLASS, &pub_class, sizeof pub_class };
    EXPECT (s_unwrap (&s_oaep, unwrapper, wrapped, wrapped_len, &bad_class, 1, &key), CKR_TEMPLATE_INCONSISTENT,
            "C_UnwrapKey with CKA_CLASS CKO_PUBLIC_KEY");
    CK_ATTRIBUTE local = { CKA_LOCAL, &yes, 1 };
    EXPECT (s_unwrap (&s_oaep, unwrapper, wrapped, wrapped_len, &local, 1, &key), CKR_ATTRIBUTE_READ_ONLY,
            "C_UnwrapKey with CKA_LOCAL");
    CK_ATTRIBUTE no_type [] = { { CKA_CLASS, &s_secret, sizeof s_secret } };
    EXPECT (p11->C_UnwrapKey (s, &s_oaep, unwrapper, wrapped, wrapped_len, no_type, 1, &key), CKR_TEMPLATE_INCOMPLETE,
            "C_UnwrapKey without CKA_KEY_TYPE");
    EXPECT (s_unwrap (&s_oaep, unwrapper, wrapped, 100, NULL, 0, &key), CKR_WRAPPED_KEY_LEN_RANGE,
            "C_UnwrapKey of 100 bytes");
    unsigned char w20 [1024];
    CK_ULONG w20_len = s_read ("k20.wrapped", w20, sizeof w20);
    EXPECT (s_unwrap (&s_oaep, unwrapper, w20, w20_len, NULL, 0, &key), CKR_WRAPPED_KEY_INVALID,
            "C_UnwrapKey of a 20-byte AES key");
    wrapped [wrapped_len / 2] ^= 0x01;
    EXPECT (s_unwrap (&s_oaep, unwrapper, wrapped, wrapped_len, NULL, 0, &key), CKR_WRAPPED_KEY_INVALID,
            "C_UnwrapKey of a flipped ciphertext");
    /*  Other OAEP parameters (MGF1-SHA1; not SHA-1 with MGF1-SHA1 and no
        label, which a SoftHSM board decrypts natively and then answers
        CKR_GENERAL_ERROR for bad padding, as for C_Decrypt).  */
    CK_RSA_PKCS_OAEP_PARAMS mgf1 = { CKM_SHA256, CKG_MGF1_SHA1, CKZ_DATA_SPECIFIED, NULL, 0 };
    CK_MECHANISM oaep_mgf1 = { CKM_RSA_PKCS_OAEP, &mgf1, sizeof mgf1 };
    wrapped [wrapped_len / 2] ^= 0x01;
    EXPECT (s_unwrap (&oaep_mgf1, unwrapper, wrapped, wrapped_len, NULL, 0, &key), CKR_WRAPPED_KEY_INVALID,
            "C_UnwrapKey of MGF1-SHA256 OAEP bytes as MGF1-SHA1");

    s_aes_wrap_checks (slot, in, in_len);

    CHECK (p11->C_Logout (s), "C_Logout");
    CHECK (p11->C_CloseSession (s), "C_CloseSession");
    CHECK (p11->C_Finalize (NULL), "C_Finalize");
    OPENSSL_cleanse (wrap, sizeof *wrap);
    OPENSSL_cleanse (attack, sizeof *attack);
    free (wrap);
    free (attack);
    printf ("all wrapping checks passed\n");
    return 0;
}
