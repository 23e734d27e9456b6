/*  cs-sym-mechs.c — the secret-key mechanisms of issue #10's second slice
 *  through the module under test, every result checked against OpenSSL's
 *  EVP in this process or a published vector (never the project's code):
 *    - C_GetMechanismList/Info: AES-CTR, AES key wrap (with and without
 *      padding, with CKF_WRAP/CKF_UNWRAP: wrap-keys.sh), AES-CMAC(_GENERAL), DES3-ECB/CBC/CBC-PAD,
 *      CKM_DES3_KEY_GEN, SHA-1/224/256/384/512 HMAC and _GENERAL, with key
 *      sizes in bytes equal to what import and generation accept;
 *    - known answers with imported keys (C_CreateObject, CKA_VALUE): the
 *      module's output equals EVP's, single- and multi-part, and decrypts
 *      back; RFC 3394 §4.1/§4.6 and RFC 5649 §6 key-wrap vectors, NIST SP
 *      800-38B CMAC examples, NIST SP 800-38A F.5.1 CTR;
 *    - refusals: wrong parameter blocks (CKR_MECHANISM_PARAM_INVALID),
 *      wrong input lengths (CKR_DATA_LEN_RANGE / CKR_ENCRYPTED_DATA_LEN_RANGE),
 *      a CTR counter that would wrap, a tampered key-wrap ciphertext
 *      (CKR_ENCRYPTED_DATA_INVALID), a wrong MAC (CKR_SIGNATURE_INVALID) or
 *      MAC length (CKR_SIGNATURE_LEN_RANGE), key types that do not match;
 *    - C_GenerateKey (CKM_DES3_KEY_GEN): 24 bytes with odd parity, usable.
 *  It writes for the shell test's `openssl enc` / `openssl mac` checks
 *  OUTDIR/{ctr,des3,hmac,cmac}-{key,iv,in,out}.bin.
 *
 *  usage: cs-sym-mechs MODULE.so TOKEN PIN OUTDIR
 *  The module is dlopen'ed.  Prints one line per step; exit 0 when all pass.
 */
#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <p11-kit/pkcs11.h>
#include "cs-sym-mechs.h"
#include "cs-test-slot.h"

CK_FUNCTION_LIST *p11;
CK_SESSION_HANDLE s;
static const char *s_outdir;
static unsigned char s_last [512];     /* the module's last single-part result */
static CK_ULONG s_last_len;

void
sm_fail (const char *what)
{
    fprintf (stderr, "cs-sym-mechs: FAIL: %s\n", what);
    exit (1);
}

static size_t
s_hex (const char *hex, unsigned char *out)
{
    size_t n = 0;
    unsigned v;
    for (; hex [0] && hex [1] && sscanf (hex, "%2x", &v) == 1; hex += 2)
        out [n++] = (unsigned char) v;
    return n;
}

void
sm_write (const char *name, const unsigned char *data, size_t len)
{
    char path [4096];
    snprintf (path, sizeof path, "%s/%s", s_outdir, name);
    FILE *f = fopen (path, "wb");
    if (!f || fwrite (data, 1, len, f) != len || fclose (f))
        sm_fail ("cannot write an output file");
}

CK_OBJECT_HANDLE
sm_import (CK_KEY_TYPE type, const unsigned char *value, CK_ULONG len, CK_RV want)
{
    CK_OBJECT_CLASS klass = CKO_SECRET_KEY;
    CK_BBOOL no = CK_FALSE, yes = CK_TRUE;
    CK_ATTRIBUTE tmpl [] = {
        { CKA_CLASS, &klass, sizeof klass }, { CKA_KEY_TYPE, &type, sizeof type },
        { CKA_TOKEN, &no, sizeof no }, { CKA_VALUE, (void *) value, len },
        { CKA_ENCRYPT, &yes, sizeof yes }, { CKA_DECRYPT, &yes, sizeof yes },
        { CKA_SIGN, &yes, sizeof yes }, { CKA_VERIFY, &yes, sizeof yes },
    };
    CK_OBJECT_HANDLE key = CK_INVALID_HANDLE;
    EXPECT (p11->C_CreateObject (s, tmpl, sizeof tmpl / sizeof tmpl [0], &key), want, "C_CreateObject (secret key)");
    return key;
}

/*  One encryption (enc) or decryption through the module: single-part
 *  (with a length query first that must not be below the result) or
 *  multi-part (three updates, then a length query and Final).  Returns the
 *  first error; *len the output length.  */
CK_RV
sm_crypt (bool enc, CK_MECHANISM *mech, CK_OBJECT_HANDLE k, const unsigned char *in, CK_ULONG n,
         unsigned char *out, CK_ULONG *len, bool multi)
{
    CK_RV (*init) (CK_SESSION_HANDLE, CK_MECHANISM_PTR, CK_OBJECT_HANDLE) = enc ? p11->C_EncryptInit
                                                                                : p11->C_DecryptInit;
    CK_RV (*one) (CK_SESSION_HANDLE, CK_BYTE_PTR, CK_ULONG, CK_BYTE_PTR, CK_ULONG_PTR) = enc ? p11->C_Encrypt
                                                                                              : p11->C_Decrypt;
    CK_RV (*update) (CK_SESSION_HANDLE, CK_BYTE_PTR, CK_ULONG, CK_BYTE_PTR, CK_ULONG_PTR)
        = enc ? p11->C_EncryptUpdate : p11->C_DecryptUpdate;
    CK_RV (*final) (CK_SESSION_HANDLE, CK_BYTE_PTR, CK_ULONG_PTR) = enc ? p11->C_EncryptFinal : p11->C_DecryptFinal;
    CK_ULONG cap = *len, query = 0, part;
    CK_RV rv = init (s, mech, k);
    if (rv != CKR_OK)
        return rv;
    if (!multi) {
        if ((rv = one (s, (CK_BYTE_PTR) in, n, NULL, &query)) != CKR_OK)
            return rv;
        *len = cap;
        rv = one (s, (CK_BYTE_PTR) in, n, out, len);
    }
    else {
        /*  Updates return the whole blocks they complete (block modes stream:
         *  docs/CONTRACTS.md "Multi-part streams"), each after a length query
         *  that must answer exactly what the call then returns.  */
        CK_ULONG cuts [] = { 0, n / 3, n / 3 + 1 < n ? n / 3 + 1 : n, n }, done = 0;
        for (int i = 0; i < 3 && rv == CKR_OK; i++) {
            CK_ULONG ask = 0;
            if ((rv = update (s, (CK_BYTE_PTR) in + cuts [i], cuts [i + 1] - cuts [i], NULL, &ask)) != CKR_OK)
                break;
            part = cap - done;
            rv = update (s, (CK_BYTE_PTR) in + cuts [i], cuts [i + 1] - cuts [i], out + done, &part);
            if (rv == CKR_OK && part != ask)
                sm_fail ("an update's length query differs from its output");
            done += rv == CKR_OK ? part : 0;
        }
        if (rv != CKR_OK || (rv = final (s, NULL, &query)) != CKR_OK)
            return rv;
        *len = cap - done;
        rv = final (s, out + done, len);
        *len += done;
        query += done;
    }
    if (rv == CKR_OK && query < *len)
        sm_fail ("the length query answered less than the result");
    return rv;
}

/*  EVP's result of cipher `name` (NULL output on failure).  */
int
sm_evp (const char *name, bool enc, bool pad, const unsigned char *key, const unsigned char *iv,
       const unsigned char *in, int n, unsigned char *out)
{
    EVP_CIPHER *c = EVP_CIPHER_fetch (NULL, name, NULL);
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new ();
    int len = 0, fin = 0;
    EVP_CIPHER_CTX_set_flags (ctx, EVP_CIPHER_CTX_FLAG_WRAP_ALLOW);
    if (!c || !EVP_CipherInit_ex (ctx, c, NULL, key, iv, enc) || !EVP_CIPHER_CTX_set_padding (ctx, pad)
    ||  EVP_CipherUpdate (ctx, out, &len, in, n) <= 0 || !EVP_CipherFinal_ex (ctx, out + len, &fin))
        sm_fail (name);
    EVP_CIPHER_CTX_free (ctx);
    EVP_CIPHER_free (c);
    return len + fin;
}

/*  EVP_MAC's MAC ("HMAC" with digest `alg`, "CMAC" with cipher `alg`).  */
static size_t
s_evp_mac (const char *mac_name, const char *alg, const unsigned char *key, size_t key_len,
           const unsigned char *in, size_t n, unsigned char *out)
{
    EVP_MAC *mac = EVP_MAC_fetch (NULL, mac_name, NULL);
    EVP_MAC_CTX *ctx = mac ? EVP_MAC_CTX_new (mac) : NULL;
    OSSL_PARAM params [] = {
        OSSL_PARAM_construct_utf8_string (strcmp (mac_name, "CMAC") ? OSSL_MAC_PARAM_DIGEST : OSSL_MAC_PARAM_CIPHER,
                                          (char *) alg, 0),
        OSSL_PARAM_construct_end ()
    };
    size_t len = 0;
    if (!ctx || !EVP_MAC_init (ctx, key, key_len, params) || !EVP_MAC_update (ctx, in, n)
    ||  !EVP_MAC_final (ctx, out, &len, 64))
        sm_fail (mac_name);
    EVP_MAC_CTX_free (ctx);
    EVP_MAC_free (mac);
    return len;
}

/*  The module's result of `mech` equals `want`, single- and multi-part,
 *  and decrypts back to `in` both ways.  */
static void
s_cipher_kat (CK_MECHANISM *mech, CK_OBJECT_HANDLE k, const unsigned char *in, CK_ULONG n,
              const unsigned char *want, CK_ULONG want_len, const char *what)
{
    unsigned char out [512], back [512];
    for (int multi = 0; multi < 2; multi++) {
        CK_ULONG len = sizeof out, blen = sizeof back;
        CHECK (sm_crypt (true, mech, k, in, n, out, &len, multi), what);
        if (len != want_len || memcmp (out, want, len))
            sm_fail (what);
        if (!multi) {
            memcpy (s_last, out, len);
            s_last_len = len;
        }
        CHECK (sm_crypt (false, mech, k, out, len, back, &blen, multi), what);
        if (blen != n || memcmp (back, in, n))
            sm_fail (what);
    }
    printf ("%s: equals the reference, single- and multi-part, and decrypts back\n", what);
}

static void
s_ciphers (void)
{
    unsigned char key [32], cb [16], data [100], want [160], iv [8];
    char what [96];
    RAND_bytes (data, sizeof data);
    for (size_t kl = 16; kl <= 32; kl += 8) {
        RAND_bytes (key, sizeof key);
        RAND_bytes (cb, sizeof cb);
        CK_OBJECT_HANDLE k = sm_import (CKK_AES, key, kl, CKR_OK);
        char name [32];
        CK_AES_CTR_PARAMS ctr = { 128, { 0 } };
        memcpy (ctr.cb, cb, 16);
        CK_MECHANISM m = { CKM_AES_CTR, &ctr, sizeof ctr };
        snprintf (name, sizeof name, "AES-%zu-CTR", kl * 8);
        int wl = sm_evp (name, true, false, key, cb, data, 99, want);
        snprintf (what, sizeof what, "CKM_AES_CTR AES-%zu, 99 bytes, vs EVP", kl * 8);
        s_cipher_kat (&m, k, data, 99, want, (CK_ULONG) wl, what);
        m = (CK_MECHANISM) { CKM_AES_KEY_WRAP, NULL, 0 };
        snprintf (name, sizeof name, "AES-%zu-WRAP", kl * 8);
        wl = sm_evp (name, true, false, key, NULL, data, 40, want);
        snprintf (what, sizeof what, "CKM_AES_KEY_WRAP AES-%zu, 40 bytes, vs EVP", kl * 8);
        s_cipher_kat (&m, k, data, 40, want, (CK_ULONG) wl, what);
        m = (CK_MECHANISM) { CKM_AES_KEY_WRAP_PAD, NULL, 0 };
        snprintf (name, sizeof name, "AES-%zu-WRAP-PAD", kl * 8);
        wl = sm_evp (name, true, false, key, NULL, data, 21, want);
        snprintf (what, sizeof what, "CKM_AES_KEY_WRAP_PAD AES-%zu, 21 bytes, vs EVP", kl * 8);
        s_cipher_kat (&m, k, data, 21, want, (CK_ULONG) wl, what);
        CHECK (p11->C_DestroyObject (s, k), "C_DestroyObject");
    }
    /*  Triple-DES, three modes.  */
    unsigned char dkey [24];
    RAND_bytes (dkey, sizeof dkey);
    RAND_bytes (iv, sizeof iv);
    CK_OBJECT_HANDLE k = sm_import (CKK_DES3, dkey, 24, CKR_OK);
    CK_MECHANISM ecb = { CKM_DES3_ECB, NULL, 0 }, cbc = { CKM_DES3_CBC, iv, 8 }, pad = { CKM_DES3_CBC_PAD, iv, 8 };
    int wl = sm_evp ("DES-EDE3-ECB", true, false, dkey, NULL, data, 48, want);
    s_cipher_kat (&ecb, k, data, 48, want, (CK_ULONG) wl, "CKM_DES3_ECB, 48 bytes, vs EVP DES-EDE3-ECB");
    wl = sm_evp ("DES-EDE3-CBC", true, false, dkey, iv, data, 48, want);
    s_cipher_kat (&cbc, k, data, 48, want, (CK_ULONG) wl, "CKM_DES3_CBC, 48 bytes, vs EVP DES-EDE3-CBC");
    wl = sm_evp ("DES-EDE3-CBC", true, true, dkey, iv, data, 45, want);
    s_cipher_kat (&pad, k, data, 45, want, (CK_ULONG) wl, "CKM_DES3_CBC_PAD, 45 bytes, vs EVP DES-EDE3-CBC");
    CK_ULONG len = sizeof want;
    CHECK (sm_crypt (true, &pad, k, data, 45, want, &len, false), "C_Encrypt (DES3-CBC-PAD)");
    sm_write ("des3-key.bin", dkey, 24);
    sm_write ("des3-iv.bin", iv, 8);
    sm_write ("des3-in.bin", data, 45);
    sm_write ("des3-out.bin", want, len);
    CHECK (p11->C_DestroyObject (s, k), "C_DestroyObject");
}

/*  Published vectors through the module.  */
static void
s_vectors (void)
{
    static const struct {
        CK_MECHANISM_TYPE mech;
        const char *kek, *in, *out, *what;
    } wraps [] = {
        { CKM_AES_KEY_WRAP, "000102030405060708090a0b0c0d0e0f", "00112233445566778899aabbccddeeff",
          "1fa68b0a8112b447aef34bd8fb5a7b829d3e862371d2cfe5", "RFC 3394 4.1" },
        { CKM_AES_KEY_WRAP, "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f",
          "00112233445566778899aabbccddeeff000102030405060708090a0b0c0d0e0f",
          "28c9f404c4b810f4cbccb35cfb87f8263f5786e2d80ed326cbc7f0e71a99f43bfb988b9b7a02dd21", "RFC 3394 4.6" },
        { CKM_AES_KEY_WRAP_PAD, "5840df6e29b02af1ab493b705bf16ea1ae8338f4dcc176a8",
          "c37b7e6492584340bed12207808941155068f738",
          "138bdeaa9b8fa7fc61f97742e72248ee5ae6ae5360d1ae6a5f54f373fa543b6a", "RFC 5649 6 (20 bytes)" },
        { CKM_AES_KEY_WRAP_PAD, "5840df6e29b02af1ab493b705bf16ea1ae8338f4dcc176a8", "466f7250617369",
          "afbeb0f07dfbf5419200f2ccb50bb24f", "RFC 5649 6 (7 bytes)" },
    };
    unsigned char kek [32], in [64], out [64], got [80];
    for (size_t i = 0; i < sizeof wraps / sizeof wraps [0]; i++) {
        size_t kl = s_hex (wraps [i].kek, kek), n = s_hex (wraps [i].in, in), ol = s_hex (wraps [i].out, out);
        CK_OBJECT_HANDLE k = sm_import (CKK_AES, kek, kl, CKR_OK);
        CK_MECHANISM m = { wraps [i].mech, NULL, 0 };
        s_cipher_kat (&m, k, in, n, out, ol, wraps [i].what);
        out [ol - 1] ^= 1;
        CK_ULONG len = sizeof got;
        EXPECT (sm_crypt (false, &m, k, out, ol, got, &len, false), CKR_ENCRYPTED_DATA_INVALID, "tampered key wrap");
        CHECK (p11->C_DestroyObject (s, k), "C_DestroyObject");
    }
    printf ("key wrap: a tampered ciphertext is CKR_ENCRYPTED_DATA_INVALID\n");
    /*  SP 800-38A F.5.1 with a 32-bit counter field: fcfdfeff + 3 fits.  */
    unsigned char key [32], m64 [64], ct [64];
    s_hex ("2b7e151628aed2a6abf7158809cf4f3c", key);
    s_hex ("6bc1bee22e409f96e93d7e117393172aae2d8a571e03ac9c9eb76fac45af8e51"
           "30c81c46a35ce411e5fbc1191a0a52eff69f2445df4f9b17ad2b417be66c3710", m64);
    s_hex ("874d6191b620e3261bef6864990db6ce9806f66b7970fdff8617187bb9fffdff"
           "5ae4df3edbd5d35e5b4f09020db03eab1e031dda2fbe03d1792170a0f3009cee", ct);
    CK_AES_CTR_PARAMS ctr = { 32, { 0 } };
    s_hex ("f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff", ctr.cb);
    CK_MECHANISM m = { CKM_AES_CTR, &ctr, sizeof ctr };
    CK_OBJECT_HANDLE k = sm_import (CKK_AES, key, 16, CKR_OK);
    s_cipher_kat (&m, k, m64, 64, ct, 64, "SP 800-38A F.5.1 CTR-AES128 (ulCounterBits 32)");
    sm_write ("ctr-key.bin", key, 16);
    sm_write ("ctr-iv.bin", ctr.cb, 16);
    sm_write ("ctr-in.bin", m64, 64);
    sm_write ("ctr-out.bin", s_last, s_last_len);
    /*  SP 800-38B D.1 examples 1-4 (AES-128).  */
    static const char *tags [] = { "bb1d6929e95937287fa37d129b756746", "070a16b46b4d4144f79bdd9dd04a287c",
                                   "dfa66747de9ae63030ca32611497c827", "51f0bebf7e3b9d92fc49741779363cfe" };
    static const CK_ULONG lens [] = { 0, 16, 40, 64 };
    for (int i = 0; i < 4; i++) {
        unsigned char tag [16], mac [16];
        CK_MECHANISM cm = { CKM_AES_CMAC, NULL, 0 };
        CK_ULONG len = sizeof mac;
        s_hex (tags [i], tag);
        CHECK (p11->C_SignInit (s, &cm, k), "C_SignInit (CMAC)");
        CHECK (p11->C_Sign (s, m64, lens [i], mac, &len), "C_Sign (CMAC)");
        if (len != 16 || memcmp (mac, tag, 16))
            sm_fail ("CMAC differs from SP 800-38B");
        CHECK (p11->C_VerifyInit (s, &cm, k), "C_VerifyInit (CMAC)");
        CHECK (p11->C_Verify (s, m64, lens [i], tag, 16), "C_Verify (CMAC)");
    }
    printf ("SP 800-38B D.1 CMAC-AES128 examples 1-4: C_Sign equals, C_Verify accepts\n");
    CHECK (p11->C_DestroyObject (s, k), "C_DestroyObject");
}

/*  A MAC mechanism: C_Sign single and multi-part equals `want` (cut to
 *  `len` bytes), the length query answers `len`, C_Verify accepts it and
 *  refuses a flipped bit and another length.  */
static void
s_mac_kat (CK_MECHANISM *mech, CK_OBJECT_HANDLE k, const unsigned char *msg, CK_ULONG n, const unsigned char *want,
           CK_ULONG want_len, const char *what)
{
    unsigned char mac [80];
    CK_ULONG len = 0;
    CHECK (p11->C_SignInit (s, mech, k), "C_SignInit");
    CHECK (p11->C_Sign (s, (CK_BYTE_PTR) msg, n, NULL, &len), "C_Sign (length)");
    if (len != want_len)
        sm_fail ("the MAC length query");
    CHECK (p11->C_Sign (s, (CK_BYTE_PTR) msg, n, mac, &len), "C_Sign");
    if (len != want_len || memcmp (mac, want, len))
        sm_fail (what);
    memcpy (s_last, mac, len);
    s_last_len = len;
    CHECK (p11->C_SignInit (s, mech, k), "C_SignInit (multi-part)");
    CHECK (p11->C_SignUpdate (s, (CK_BYTE_PTR) msg, 7), "C_SignUpdate");
    CHECK (p11->C_SignUpdate (s, (CK_BYTE_PTR) msg + 7, n - 7), "C_SignUpdate");
    len = sizeof mac;
    CHECK (p11->C_SignFinal (s, mac, &len), "C_SignFinal");
    if (len != want_len || memcmp (mac, want, len))
        sm_fail (what);
    CHECK (p11->C_VerifyInit (s, mech, k), "C_VerifyInit");
    CHECK (p11->C_Verify (s, (CK_BYTE_PTR) msg, n, mac, len), "C_Verify");
    mac [len - 1] ^= 1;
    CHECK (p11->C_VerifyInit (s, mech, k), "C_VerifyInit");
    EXPECT (p11->C_Verify (s, (CK_BYTE_PTR) msg, n, mac, len), CKR_SIGNATURE_INVALID, "C_Verify (flipped MAC)");
    CHECK (p11->C_VerifyInit (s, mech, k), "C_VerifyInit");
    CHECK (p11->C_VerifyUpdate (s, (CK_BYTE_PTR) msg, n), "C_VerifyUpdate");
    EXPECT (p11->C_VerifyFinal (s, mac, len - 1), CKR_SIGNATURE_LEN_RANGE, "C_VerifyFinal (short MAC)");
    printf ("%s: equals EVP_MAC, single- and multi-part; C_Verify refuses a flipped bit and a short MAC\n", what);
}

static void
s_macs (void)
{
    static const struct {
        CK_MECHANISM_TYPE mech, general;
        const char *digest;
    } hmacs [] = {
        { CKM_SHA_1_HMAC, CKM_SHA_1_HMAC_GENERAL, "SHA1" }, { CKM_SHA224_HMAC, CKM_SHA224_HMAC_GENERAL, "SHA224" },
        { CKM_SHA256_HMAC, CKM_SHA256_HMAC_GENERAL, "SHA256" }, { CKM_SHA384_HMAC, CKM_SHA384_HMAC_GENERAL, "SHA384" },
        { CKM_SHA512_HMAC, CKM_SHA512_HMAC_GENERAL, "SHA512" },
    };
    unsigned char key [40], msg [300], want [64];
    char what [96];
    RAND_bytes (key, sizeof key);
    RAND_bytes (msg, sizeof msg);
    CK_OBJECT_HANDLE k = sm_import (CKK_GENERIC_SECRET, key, sizeof key, CKR_OK);
    for (size_t i = 0; i < sizeof hmacs / sizeof hmacs [0]; i++) {
        size_t wl = s_evp_mac ("HMAC", hmacs [i].digest, key, sizeof key, msg, sizeof msg, want);
        CK_MECHANISM m = { hmacs [i].mech, NULL, 0 };
        snprintf (what, sizeof what, "HMAC-%s", hmacs [i].digest);
        s_mac_kat (&m, k, msg, sizeof msg, want, wl, what);
        if (hmacs [i].mech == CKM_SHA512_HMAC) {
            sm_write ("hmac-key.bin", key, sizeof key);
            sm_write ("hmac-in.bin", msg, sizeof msg);
            sm_write ("hmac-out.bin", s_last, s_last_len);
        }
        CK_ULONG cut = 10;
        m = (CK_MECHANISM) { hmacs [i].general, &cut, sizeof cut };
        snprintf (what, sizeof what, "HMAC-%s_GENERAL (10 bytes)", hmacs [i].digest);
        s_mac_kat (&m, k, msg, sizeof msg, want, cut, what);
        cut = wl + 1;
        EXPECT (p11->C_SignInit (s, &m, k), CKR_MECHANISM_PARAM_INVALID, "_HMAC_GENERAL longer than the hash");
    }
    CHECK (p11->C_DestroyObject (s, k), "C_DestroyObject");
    for (size_t kl = 16; kl <= 32; kl += 8) {
        char cipher [32];
        snprintf (cipher, sizeof cipher, "AES-%zu-CBC", kl * 8);
        RAND_bytes (key, sizeof key);
        k = sm_import (CKK_AES, key, kl, CKR_OK);
        size_t wl = s_evp_mac ("CMAC", cipher, key, kl, msg, 77, want);
        CK_MECHANISM m = { CKM_AES_CMAC, NULL, 0 };
        snprintf (what, sizeof what, "CMAC AES-%zu", kl * 8);
        s_mac_kat (&m, k, msg, 77, want, wl, what);
        if (kl == 16) {
            sm_write ("cmac-key.bin", key, kl);
            sm_write ("cmac-in.bin", msg, 77);
            sm_write ("cmac-out.bin", s_last, s_last_len);
        }
        CK_ULONG cut = 8;
        m = (CK_MECHANISM) { CKM_AES_CMAC_GENERAL, &cut, sizeof cut };
        snprintf (what, sizeof what, "CMAC_GENERAL AES-%zu (8 bytes)", kl * 8);
        s_mac_kat (&m, k, msg, 77, want, cut, what);
        CHECK (p11->C_DestroyObject (s, k), "C_DestroyObject");
    }
}

int
main (int argc, char **argv)
{
    if (argc != 5) {
        fprintf (stderr, "usage: cs-sym-mechs MODULE.so TOKEN PIN OUTDIR\n");
        return 2;
    }
    void *dl = dlopen (argv [1], RTLD_NOW | RTLD_LOCAL);
    CK_C_GetFunctionList get = dl ? (CK_C_GetFunctionList) dlsym (dl, "C_GetFunctionList") : NULL;
    if (!get || get (&p11) != CKR_OK)
        sm_fail ("cannot load the module");
    s_outdir = argv [4];
    CHECK (p11->C_Initialize (NULL), "C_Initialize");
    CK_SLOT_ID slot = 0;
    CHECK (cs_test_slot (p11, argv [2], &slot), "the token's slot");
    CHECK (p11->C_OpenSession (slot, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &s), "C_OpenSession");
    CHECK (p11->C_Login (s, CKU_USER, (CK_UTF8CHAR_PTR) argv [3], strlen (argv [3])), "C_Login");
    sm_infos (slot);
    s_ciphers ();
    s_vectors ();
    s_macs ();
    sm_refusals ();
    sm_des3_keygen ();
    CHECK (p11->C_Logout (s), "C_Logout");
    CHECK (p11->C_CloseSession (s), "C_CloseSession");
    CHECK (p11->C_Finalize (NULL), "C_Finalize");
    printf ("all secret-key mechanism checks passed\n");
    return 0;
}
