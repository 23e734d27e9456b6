/*  cs-des-wrap.c — test client of des-wrap.sh (issue #21): single DES
 *  (legacy) and secret-key wrapping with CBC-PAD, through the module.
 *
 *    cs-des-wrap MODULE.so TOKEN PIN SOPIN OUTDIR [off|spec]
 *
 *  With `off` (the boards say legacy-des = false) it checks only that
 *  CKM_DES_ECB is refused with CKR_MECHANISM_INVALID.  With `spec` (the
 *  tenant's keys/usage-separation = spec) it runs only the CBC-PAD wrap
 *  round trips, which unwrap there; under the default strict policy a
 *  CBC-PAD C_UnwrapKey is CKR_MECHANISM_INVALID (a padding oracle,
 *  common/cs_usage.h cs_usage_unwrap_oracle).
 *  Single DES: CKM_DES_KEY_GEN sets odd parity; CKM_DES_ECB and CKM_DES_CBC
 *  give FIPS 81's published answers (appendix B, table B1 and C1: key
 *  0123456789abcdef, "Now is the time for all "); CKM_DES_CBC_PAD's
 *  ciphertext is written for `openssl enc -des-cbc` to recompute.
 *  Wrapping: a DES3 key wraps a DES3 key with CKM_DES3_CBC_PAD and an
 *  AES-256 key wraps an AES-128 key with CKM_AES_CBC_PAD (the wrapped
 *  bytes are written for `openssl enc`); under `spec` each unwraps back
 *  into a key that encrypts as the original and is CKA_SENSITIVE, and a
 *  damaged block is CKR_WRAPPED_KEY_INVALID; the strict
 *  usage-separation refusals (docs/CONTRACTS.md "Usage separation") with
 *  their exact CKR_ codes: AES-128 under DES3 (112 bits) is a key under a
 *  weaker one, a DES3 wrapping key does not encrypt, an AES key cannot
 *  unwrap with DES3-CBC-PAD.
 *  Published vectors: RFC 3394 §4.1 and §4.6, RFC 5649 §6 through
 *  C_WrapKey with session KEKs, byte for byte, and back with C_UnwrapKey.
 *  Private keys: OUTDIR/rsa.wrapped (`openssl enc -id-aes256-wrap-pad` of
 *  an RSA key's PKCS#8 under OUTDIR/kek.bin) unwraps, with a CKA_TRUSTED
 *  KEK the SO made, into a sensitive private key that signs
 *  (OUTDIR/rsa-sig.bin, verified by the shell) and wraps back
 *  (OUTDIR/rsa-rewrapped.bin); the strict refusals: a sensitive key under
 *  an untrusted KEK, an unwrap template with CKA_SENSITIVE FALSE, PKCS#8 of
 *  another key type.
 *  Writes OUTDIR/{des-key,des-iv,des-in,des-out,w3-key,w3-iv,w3-value,
 *  w3-wrapped,wa-key,wa-iv,wa-value,wa-wrapped}.bin.  Exit 0 when all pass.
 */
#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <p11-kit/pkcs11.h>
#include "cs-test-files.h"
#include "cs-test-slot.h"

static CK_FUNCTION_LIST *p11;
static CK_SESSION_HANDLE s;
static const char *s_dir;
static CK_BBOOL yes = CK_TRUE, no = CK_FALSE;
static CK_OBJECT_CLASS s_secret = CKO_SECRET_KEY;

#define CHECK(call, what) EXPECT (call, CKR_OK, what)
#define EXPECT(call, want, what) do { CK_RV rv_ = (call); if (rv_ != (CK_RV) (want)) { \
    fprintf (stderr, "cs-des-wrap: %s: CK_RV 0x%lx, expected 0x%lx\n", what, (unsigned long) rv_, \
             (unsigned long) (want)); exit (1); } printf ("ok: %s\n", what); } while (0)

static void
s_fail (const char *what)
{
    fprintf (stderr, "cs-des-wrap: %s\n", what);
    exit (1);
}

static size_t
s_read (const char *name, unsigned char *buf, size_t max)
{
    long n = cs_test_read (s_dir, name, buf, max);
    if (n <= 0 || (size_t) n == max)
        s_fail ("cannot read an input file");
    return (size_t) n;
}

static void
s_write (const char *name, const unsigned char *data, size_t len)
{
    if (!cs_test_write (s_dir, name, data, len))
        s_fail ("cannot write an output file");
}

static void
s_hex (const char *hex, unsigned char *out)
{
    for (size_t i = 0; hex [2 * i]; i++)
        sscanf (hex + 2 * i, "%2hhx", &out [i]);
}

/*  C_CreateObject of a session secret key of known value and roles: its rv.  */
static CK_RV
s_key_rv (CK_KEY_TYPE type, const unsigned char *value, CK_ULONG len, CK_BBOOL crypt, CK_BBOOL wrap,
          CK_OBJECT_HANDLE *key_p)
{
    CK_ATTRIBUTE tmpl [] = {
        { CKA_CLASS, &s_secret, sizeof s_secret }, { CKA_KEY_TYPE, &type, sizeof type }, { CKA_TOKEN, &no, 1 },
        { CKA_VALUE, (void *) value, len }, { CKA_ENCRYPT, &crypt, 1 }, { CKA_DECRYPT, &crypt, 1 },
        { CKA_WRAP, &wrap, 1 }, { CKA_UNWRAP, &wrap, 1 }, { CKA_SENSITIVE, &no, 1 },
        { CKA_EXTRACTABLE, &yes, 1 },
    };
    return p11->C_CreateObject (s, tmpl, sizeof tmpl / sizeof tmpl [0], key_p);
}

static CK_OBJECT_HANDLE
s_key (CK_KEY_TYPE type, const unsigned char *value, CK_ULONG len, CK_BBOOL crypt, CK_BBOOL wrap)
{
    CK_OBJECT_HANDLE key;
    CHECK (s_key_rv (type, value, len, crypt, wrap, &key), "C_CreateObject (secret key)");
    return key;
}

/*  C_Encrypt in one part: *len in capacity, out length.  */
static CK_RV
s_encrypt (CK_MECHANISM *mech, CK_OBJECT_HANDLE key, const unsigned char *in, CK_ULONG n, unsigned char *out,
           CK_ULONG *len)
{
    CK_RV rv = p11->C_EncryptInit (s, mech, key);
    return rv != CKR_OK ? rv : p11->C_Encrypt (s, (CK_BYTE_PTR) in, n, out, len);
}

static void
s_expect_bytes (const unsigned char *got, CK_ULONG got_len, const unsigned char *want, CK_ULONG want_len,
                const char *what)
{
    if (got_len != want_len || memcmp (got, want, want_len))
        s_fail (what);
    printf ("ok: %s\n", what);
}

/*  ---- single DES (FIPS 46-3, FIPS 81) ------------------------------------ */

static void
s_des (void)
{
    unsigned char key [8], iv [8], in [24], want [24], out [64], pad_in [21];
    CK_ULONG len = sizeof out;
    s_hex ("0123456789abcdef", key);
    s_hex ("1234567890abcdef", iv);
    memcpy (in, "Now is the time for all ", 24);
    CK_OBJECT_HANDLE k = s_key (CKK_DES, key, 8, CK_TRUE, CK_FALSE);

    CK_MECHANISM ecb = { CKM_DES_ECB, NULL, 0 };
    CHECK (s_encrypt (&ecb, k, in, 8, out, &len), "C_Encrypt (CKM_DES_ECB)");
    s_hex ("3fa40e8a984d4815", want);
    s_expect_bytes (out, len, want, 8, "CKM_DES_ECB gives FIPS 81 table B1's 3fa40e8a984d4815");

    CK_MECHANISM cbc = { CKM_DES_CBC, iv, 8 };
    len = sizeof out;
    CHECK (s_encrypt (&cbc, k, in, 24, out, &len), "C_Encrypt (CKM_DES_CBC)");
    s_hex ("e5c7cdde872bf27c43e934008c389c0f683788499a7c05f6", want);
    s_expect_bytes (out, len, want, 24, "CKM_DES_CBC gives FIPS 81 table C1's ciphertext");

    unsigned char back [64];
    CK_ULONG back_len = sizeof back;
    CHECK (p11->C_DecryptInit (s, &cbc, k), "C_DecryptInit (CKM_DES_CBC)");
    CHECK (p11->C_Decrypt (s, out, len, back, &back_len), "C_Decrypt (CKM_DES_CBC)");
    s_expect_bytes (back, back_len, in, 24, "CKM_DES_CBC decrypts FIPS 81's ciphertext");

    CK_MECHANISM cbc_pad = { CKM_DES_CBC_PAD, iv, 8 };
    memcpy (pad_in, "twenty-one bytes long", 21);
    len = sizeof out;
    CHECK (s_encrypt (&cbc_pad, k, pad_in, 21, out, &len), "C_Encrypt (CKM_DES_CBC_PAD)");
    if (len != 24)
        s_fail ("CKM_DES_CBC_PAD of 21 bytes is not 24 bytes");
    s_write ("des-key.bin", key, 8);
    s_write ("des-iv.bin", iv, 8);
    s_write ("des-in.bin", pad_in, 21);
    s_write ("des-out.bin", out, len);

    /*  CKM_DES_KEY_GEN: 8 bytes, each of odd parity (FIPS 46-3).  */
    CK_MECHANISM gen = { CKM_DES_KEY_GEN, NULL, 0 };
    CK_KEY_TYPE des = CKK_DES;
    CK_ATTRIBUTE tmpl [] = {
        { CKA_CLASS, &s_secret, sizeof s_secret }, { CKA_KEY_TYPE, &des, sizeof des }, { CKA_TOKEN, &no, 1 },
        { CKA_SENSITIVE, &no, 1 }, { CKA_EXTRACTABLE, &yes, 1 },
    };
    CK_OBJECT_HANDLE g;
    CHECK (p11->C_GenerateKey (s, &gen, tmpl, sizeof tmpl / sizeof tmpl [0], &g), "C_GenerateKey (CKM_DES_KEY_GEN)");
    unsigned char value [16];
    CK_ATTRIBUTE attr = { CKA_VALUE, value, sizeof value };
    CHECK (p11->C_GetAttributeValue (s, g, &attr, 1), "C_GetAttributeValue (DES CKA_VALUE)");
    if (attr.ulValueLen != 8)
        s_fail ("a generated DES key is not 8 bytes");
    for (int i = 0; i < 8; i++)
        if (__builtin_popcount (value [i]) % 2 == 0)
            s_fail ("a generated DES key byte has even parity");
    printf ("ok: CKM_DES_KEY_GEN makes 8 bytes of odd parity\n");
    len = sizeof out;
    CHECK (s_encrypt (&ecb, g, in, 8, out, &len), "C_Encrypt (CKM_DES_ECB, generated key)");
}

/*  ---- wrapping with CBC-PAD ---------------------------------------------- */

/*  Makes a `type` KEK of value `k` and a `type` data key of value `v`
 *  (*kek_p, *key_p), wraps the key under the KEK with `mech`, writes
 *  PREFIX-{key,iv,value,wrapped}.bin; `strict`: the unwrap is refused
 *  (CKR_MECHANISM_INVALID), else it unwraps and checks the new key is
 *  sensitive and encrypts (ECB `ecb`) as the original.  */
static void
s_round_trip (CK_MECHANISM *mech, CK_KEY_TYPE type, const unsigned char *k, CK_ULONG k_len, const unsigned char *v,
              CK_ULONG v_len, CK_MECHANISM *ecb, const char *prefix, CK_OBJECT_HANDLE *kek_p, CK_OBJECT_HANDLE *key_p,
              bool strict)
{
    unsigned char wrapped [128], a [32], b [32], block [16] = "0123456789abcdef";
    CK_ULONG len = 0, a_len = sizeof a, b_len = sizeof b;
    CK_OBJECT_HANDLE kek = *kek_p = s_key (type, k, k_len, CK_FALSE, CK_TRUE);
    CK_OBJECT_HANDLE key = *key_p = s_key (type, v, v_len, CK_TRUE, CK_FALSE);
    char name [64];
    snprintf (name, sizeof name, "%s-key.bin", prefix);
    s_write (name, k, k_len);
    snprintf (name, sizeof name, "%s-iv.bin", prefix);
    s_write (name, mech->pParameter, mech->ulParameterLen);
    snprintf (name, sizeof name, "%s-value.bin", prefix);
    s_write (name, v, v_len);
    CHECK (p11->C_WrapKey (s, mech, kek, key, NULL, &len), "C_WrapKey (length query)");
    CHECK (p11->C_WrapKey (s, mech, kek, key, wrapped, &len), "C_WrapKey (CBC-PAD)");
    snprintf (name, sizeof name, "%s-wrapped.bin", prefix);
    s_write (name, wrapped, len);

    CK_ATTRIBUTE tmpl [] = {
        { CKA_CLASS, &s_secret, sizeof s_secret }, { CKA_KEY_TYPE, &type, sizeof type }, { CKA_TOKEN, &no, 1 },
        { CKA_ENCRYPT, &yes, 1 },
    };
    CK_OBJECT_HANDLE back;
    if (strict) {
        EXPECT (p11->C_UnwrapKey (s, mech, kek, wrapped, len, tmpl, 4, &back), CKR_MECHANISM_INVALID,
                "C_UnwrapKey with CBC-PAD (a padding oracle) under the strict policy");
        return;
    }
    CHECK (p11->C_UnwrapKey (s, mech, kek, wrapped, len, tmpl, 4, &back), "C_UnwrapKey (CBC-PAD)");
    CK_BBOOL sensitive = 0;
    CK_ATTRIBUTE attr = { CKA_SENSITIVE, &sensitive, 1 };
    CHECK (p11->C_GetAttributeValue (s, back, &attr, 1), "C_GetAttributeValue (unwrapped CKA_SENSITIVE)");
    if (sensitive != CK_TRUE)
        s_fail ("an unwrapped key is not CKA_SENSITIVE");
    CHECK (s_encrypt (ecb, key, block, 16, a, &a_len), "C_Encrypt (original key)");
    CHECK (s_encrypt (ecb, back, block, 16, b, &b_len), "C_Encrypt (unwrapped key)");
    s_expect_bytes (b, b_len, a, a_len, "the unwrapped key encrypts as the original");
    wrapped [len - 1] ^= 0x55;          /* the padding no longer checks */
    EXPECT (p11->C_UnwrapKey (s, mech, kek, wrapped, len, tmpl, 4, &back), CKR_WRAPPED_KEY_INVALID,
            "C_UnwrapKey of a damaged CBC-PAD block");
}

static void
s_wraps (bool strict)
{
    unsigned char k3 [24], v3 [24], iv3 [8], ka [32], va [16], iva [16], out [128];
    CK_ULONG len = sizeof out;
    for (int i = 0; i < 24; i++) {
        k3 [i] = (unsigned char) (0x10 + 7 * i);
        v3 [i] = (unsigned char) (0xa1 ^ (13 * i));
    }
    for (int i = 0; i < 32; i++)
        ka [i] = (unsigned char) (3 * i + 1);
    for (int i = 0; i < 16; i++) {
        va [i] = (unsigned char) (0xf0 - i);
        iva [i] = (unsigned char) i;
    }
    memcpy (iv3, "\x01\x23\x45\x67\x89\xab\xcd\xef", 8);

    /*  DES3 wraps DES3 (112 bits each) with CKM_DES3_CBC_PAD; AES-256
        wraps AES-128 with CKM_AES_CBC_PAD.  */
    CK_OBJECT_HANDLE kek3, key3, keka, keya;
    CK_MECHANISM des3_pad = { CKM_DES3_CBC_PAD, iv3, 8 }, des3_ecb = { CKM_DES3_ECB, NULL, 0 };
    s_round_trip (&des3_pad, CKK_DES3, k3, 24, v3, 24, &des3_ecb, "w3", &kek3, &key3, strict);
    CK_MECHANISM aes_pad = { CKM_AES_CBC_PAD, iva, 16 }, aes_ecb = { CKM_AES_ECB, NULL, 0 };
    s_round_trip (&aes_pad, CKK_AES, ka, 32, va, 16, &aes_ecb, "wa", &keka, &keya, strict);
    if (!strict)
        return;

    /*  Strict usage separation (docs/CONTRACTS.md "Usage separation").  */
    EXPECT (p11->C_WrapKey (s, &des3_pad, kek3, keya, out, &len), CKR_WRAPPING_KEY_SIZE_RANGE,
            "AES-128 under DES3 (a key under a weaker one)");
    len = sizeof out;
    EXPECT (s_encrypt (&des3_pad, kek3, va, 16, out, &len), CKR_KEY_FUNCTION_NOT_PERMITTED,
            "a DES3 wrapping key encrypts data");
    CK_OBJECT_HANDLE both;
    EXPECT (s_key_rv (CKK_DES3, k3, 24, CK_TRUE, CK_TRUE, &both), CKR_TEMPLATE_INCONSISTENT,
            "a DES3 key that both wraps and encrypts");
    len = sizeof out;
    EXPECT (p11->C_WrapKey (s, &des3_pad, keka, key3, out, &len), CKR_WRAPPING_KEY_TYPE_INCONSISTENT,
            "CKM_DES3_CBC_PAD with an AES wrapping key");
}

/*  ---- published vectors through C_WrapKey ---------------------------------- */

/*  RFC 3394 §4.1 and §4.6, RFC 5649 §6 (the 20-byte key): a session KEK
 *  of the vector's value wraps a session key of the vector's value; the
 *  bytes must be the RFC's, and they unwrap back.  */
static void
s_vectors (void)
{
    static const struct {
        CK_MECHANISM_TYPE mech;
        CK_KEY_TYPE type;               /* of the wrapped key */
        const char *kek, *key, *wrapped, *what;
    } v [] = {
        { CKM_AES_KEY_WRAP, CKK_AES, "000102030405060708090a0b0c0d0e0f", "00112233445566778899aabbccddeeff",
          "1fa68b0a8112b447aef34bd8fb5a7b829d3e862371d2cfe5", "RFC 3394 4.1 (128-bit KEK, 128-bit key)" },
        { CKM_AES_KEY_WRAP, CKK_AES, "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f",
          "00112233445566778899aabbccddeeff000102030405060708090a0b0c0d0e0f",
          "28c9f404c4b810f4cbccb35cfb87f8263f5786e2d80ed326cbc7f0e71a99f43bfb988b9b7a02dd21",
          "RFC 3394 4.6 (256-bit KEK, 256-bit key)" },
        { CKM_AES_KEY_WRAP_PAD, CKK_GENERIC_SECRET, "5840df6e29b02af1ab493b705bf16ea1ae8338f4dcc176a8",
          "c37b7e6492584340bed12207808941155068f738",
          "138bdeaa9b8fa7fc61f97742e72248ee5ae6ae5360d1ae6a5f54f373fa543b6a", "RFC 5649 6 (20-byte key)" },
    };
    for (size_t i = 0; i < sizeof v / sizeof v [0]; i++) {
        unsigned char kek [32], key [32], want [48], out [64];
        CK_ULONG kek_len = strlen (v [i].kek) / 2, key_len = strlen (v [i].key) / 2, want_len = strlen (v [i].wrapped) / 2;
        CK_ULONG len = sizeof out;
        s_hex (v [i].kek, kek);
        s_hex (v [i].key, key);
        s_hex (v [i].wrapped, want);
        CK_MECHANISM mech = { v [i].mech, NULL, 0 };
        CK_OBJECT_HANDLE w = s_key (CKK_AES, kek, kek_len, CK_FALSE, CK_TRUE);
        CK_OBJECT_HANDLE k = s_key (v [i].type, key, key_len, CK_FALSE, CK_FALSE);
        CHECK (p11->C_WrapKey (s, &mech, w, k, out, &len), v [i].what);
        s_expect_bytes (out, len, want, want_len, v [i].what);
        CK_ATTRIBUTE tmpl [] = {
            { CKA_CLASS, &s_secret, sizeof s_secret }, { CKA_KEY_TYPE, (void *) &v [i].type, sizeof v [i].type },
            { CKA_TOKEN, &no, 1 }, { CKA_EXTRACTABLE, &yes, 1 },
        };
        CK_OBJECT_HANDLE back;
        CK_ATTRIBUTE attr = { CKA_VALUE_LEN, &len, sizeof len };
        CHECK (p11->C_UnwrapKey (s, &mech, w, want, want_len, tmpl, 4, &back), "C_UnwrapKey (published vector)");
        CHECK (p11->C_GetAttributeValue (s, back, &attr, 1), "C_GetAttributeValue (CKA_VALUE_LEN)");
        if (len != key_len)
            s_fail ("an unwrapped vector key has another length");
    }
}

/*  ---- private keys (PKCS#8) under a secret key ------------------------------ */

static void
s_private (const char *pin, const char *so_pin)
{
    unsigned char kek [64], wrapped [4096], out [4096], sig [512];
    size_t kek_len = s_read ("kek.bin", kek, sizeof kek), wrapped_len = s_read ("rsa.wrapped", wrapped, sizeof wrapped);
    CK_KEY_TYPE aes = CKK_AES, rsa = CKK_RSA, ec = CKK_EC;
    CK_OBJECT_CLASS priv_class = CKO_PRIVATE_KEY;
    CK_MECHANISM kwp = { CKM_AES_KEY_WRAP_PAD, NULL, 0 };

    /*  The SO's CKA_TRUSTED KEK (PKCS#11 2.40 §4.10 table 37 footnote), a
        public session object the user's session then sees.  */
    CHECK (p11->C_Logout (s), "C_Logout (user)");
    CHECK (p11->C_Login (s, CKU_SO, (CK_UTF8CHAR_PTR) so_pin, strlen (so_pin)), "C_Login (SO)");
    CK_ATTRIBUTE kt [] = {
        { CKA_CLASS, &s_secret, sizeof s_secret }, { CKA_KEY_TYPE, &aes, sizeof aes }, { CKA_TOKEN, &no, 1 },
        { CKA_PRIVATE, &no, 1 }, { CKA_VALUE, kek, kek_len }, { CKA_WRAP, &yes, 1 }, { CKA_UNWRAP, &yes, 1 },
        { CKA_ENCRYPT, &no, 1 }, { CKA_DECRYPT, &no, 1 }, { CKA_TRUSTED, &yes, 1 },
    };
    CK_OBJECT_HANDLE trusted;
    CHECK (p11->C_CreateObject (s, kt, sizeof kt / sizeof kt [0], &trusted), "C_CreateObject (SO's trusted KEK)");
    CHECK (p11->C_Logout (s), "C_Logout (SO)");
    CHECK (p11->C_Login (s, CKU_USER, (CK_UTF8CHAR_PTR) pin, strlen (pin)), "C_Login (user again)");

    CK_ATTRIBUTE pt [] = {
        { CKA_CLASS, &priv_class, sizeof priv_class }, { CKA_KEY_TYPE, &rsa, sizeof rsa }, { CKA_TOKEN, &no, 1 },
        { CKA_SIGN, &yes, 1 }, { CKA_EXTRACTABLE, &yes, 1 }, { CKA_SENSITIVE, &no, 1 },
    };
    CK_OBJECT_HANDLE key;
    EXPECT (p11->C_UnwrapKey (s, &kwp, trusted, wrapped, wrapped_len, pt, 6, &key), CKR_TEMPLATE_INCONSISTENT,
            "C_UnwrapKey of a private key with CKA_SENSITIVE FALSE (strict)");
    pt [1] = (CK_ATTRIBUTE) { CKA_KEY_TYPE, &ec, sizeof ec };
    EXPECT (p11->C_UnwrapKey (s, &kwp, trusted, wrapped, wrapped_len, pt, 5, &key), CKR_WRAPPED_KEY_INVALID,
            "C_UnwrapKey of RSA PKCS#8 as CKK_EC");
    pt [1] = (CK_ATTRIBUTE) { CKA_KEY_TYPE, &rsa, sizeof rsa };
    CHECK (p11->C_UnwrapKey (s, &kwp, trusted, wrapped, wrapped_len, pt, 5, &key),
           "C_UnwrapKey (RSA PKCS#8, CKM_AES_KEY_WRAP_PAD)");
    CK_BBOOL sensitive = 0;
    CK_ATTRIBUTE attr = { CKA_SENSITIVE, &sensitive, 1 };
    CHECK (p11->C_GetAttributeValue (s, key, &attr, 1), "C_GetAttributeValue (unwrapped private CKA_SENSITIVE)");
    if (sensitive != CK_TRUE)
        s_fail ("an unwrapped private key is not CKA_SENSITIVE");

    CK_MECHANISM sha256 = { CKM_SHA256_RSA_PKCS, NULL, 0 };
    CK_ULONG sig_len = sizeof sig;
    CHECK (p11->C_SignInit (s, &sha256, key), "C_SignInit (unwrapped RSA key)");
    CHECK (p11->C_Sign (s, (CK_BYTE_PTR) "unwrapped and signed", 20, sig, &sig_len), "C_Sign (unwrapped RSA key)");
    s_write ("rsa-sig.bin", sig, sig_len);

    CK_ULONG len = sizeof out;
    CHECK (p11->C_WrapKey (s, &kwp, trusted, key, out, &len), "C_WrapKey (RSA private key, trusted KEK)");
    s_write ("rsa-rewrapped.bin", out, len);
    CK_OBJECT_HANDLE untrusted = s_key (CKK_AES, kek, kek_len, CK_FALSE, CK_TRUE);
    len = sizeof out;
    EXPECT (p11->C_WrapKey (s, &kwp, untrusted, key, out, &len), CKR_KEY_NOT_WRAPPABLE,
            "a sensitive private key under an untrusted KEK (strict)");
}

int
main (int argc, char **argv)
{
    if (argc != 6 && (argc != 7 || (strcmp (argv [6], "off") && strcmp (argv [6], "spec")))) {
        fprintf (stderr, "usage: cs-des-wrap MODULE.so TOKEN PIN SOPIN OUTDIR [off|spec]\n");
        return 2;
    }
    void *dl = dlopen (argv [1], RTLD_NOW);
    CK_C_GetFunctionList get = dl ? (CK_C_GetFunctionList) dlsym (dl, "C_GetFunctionList") : NULL;
    if (!get || get (&p11) != CKR_OK)
        s_fail ("cannot load the module");
    s_dir = argv [5];
    CHECK (p11->C_Initialize (NULL), "C_Initialize");
    CK_SLOT_ID slot = 0;
    CHECK (cs_test_slot (p11, argv [2], &slot), "the token's slot");
    CHECK (p11->C_OpenSession (slot, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &s), "C_OpenSession");
    CHECK (p11->C_Login (s, CKU_USER, (CK_UTF8CHAR_PTR) argv [3], strlen (argv [3])), "C_Login");
    /*  CKF_UNWRAP only where a CBC-PAD unwrap runs (spec).  */
    CK_MECHANISM_INFO info;
    bool spec = argc == 7 && strcmp (argv [6], "spec") == 0;
    CHECK (p11->C_GetMechanismInfo (slot, CKM_DES3_CBC_PAD, &info), "C_GetMechanismInfo (DES3-CBC-PAD)");
    if (!(info.flags & CKF_WRAP) || !(info.flags & CKF_UNWRAP) != !spec)
        s_fail (spec ? "CKM_DES3_CBC_PAD does not advertise CKF_WRAP and CKF_UNWRAP under spec"
                     : "CKM_DES3_CBC_PAD advertises CKF_UNWRAP under strict, or no CKF_WRAP");
    if (spec) {
        s_wraps (false);
        CHECK (p11->C_Finalize (NULL), "C_Finalize");
        return 0;
    }
    if (argc == 7) {
        unsigned char key [8] = "\x01\x23\x45\x67\x89\xab\xcd\xef", out [16];
        CK_ULONG len = sizeof out;
        CK_MECHANISM ecb = { CKM_DES_ECB, NULL, 0 };
        EXPECT (s_encrypt (&ecb, s_key (CKK_DES, key, 8, CK_TRUE, CK_FALSE), key, 8, out, &len),
                CKR_MECHANISM_INVALID, "CKM_DES_ECB with legacy-des = false");
        CHECK (p11->C_Finalize (NULL), "C_Finalize");
        return 0;
    }
    s_des ();
    s_wraps (true);
    s_vectors ();
    s_private (argv [3], argv [4]);
    CHECK (p11->C_Logout (s), "C_Logout");
    CHECK (p11->C_Finalize (NULL), "C_Finalize");
    printf ("cs-des-wrap: all passed\n");
    return 0;
}
