/*  cs-sym.c — secret keys and symmetric mechanisms through the module under
 *  test (issue #10), every result checked by OpenSSL's EVP in this process
 *  (never by the project's code):
 *    - imported AES-128/192/256 keys (C_CreateObject, CKA_VALUE): AES-ECB,
 *      AES-CBC, AES-CBC-PAD (single- and multi-part) and AES-GCM with AAD
 *      give EVP's ciphertext, and decrypt back; a GCM tag flipped is
 *      CKR_ENCRYPTED_DATA_INVALID, a wrong CBC-PAD padding too;
 *    - an imported generic secret: CKM_SHA256_HMAC equals EVP's HMAC;
 *      C_Verify accepts it and refuses a flipped MAC (CKR_SIGNATURE_INVALID);
 *    - C_GenerateKey of AES-256 and of a 32-byte generic secret (session
 *      objects): CKA_VALUE is CKR_ATTRIBUTE_SENSITIVE, round trips work;
 *      a token generic secret (held by the broker, secret-token.sh) MACs
 *      and verifies by reference; a 20-byte AES key is
 *      CKR_ATTRIBUTE_VALUE_INVALID, as a session or a token object;
 *    - without a login a public session key (CKA_PRIVATE FALSE) encrypts
 *      (PKCS#11 3.0 §4.4, docs/CONTRACTS.md "Public session objects");
 *      after C_Logout a token secret key is CKR_USER_NOT_LOGGED_IN.
 *  It also writes, for the shell test's `openssl enc` check, OUTDIR/key.bin,
 *  iv.bin, plain.bin and ct.bin (AES-256-CBC-PAD by the module), and for its
 *  `openssl dgst -mac HMAC` check hmac-key.bin, hmac-msg.bin and hmac.bin.
 *
 *  usage: cs-sym MODULE.so TOKEN PIN OUTDIR
 *  The module is dlopen'ed.  Prints one line per step; exit 0 when all pass.
 */
#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <p11-kit/pkcs11.h>
#include "cs-test-client.h"
#include "cs-test-slot.h"

static CK_FUNCTION_LIST *p11;
static CK_SESSION_HANDLE s;

static CK_SLOT_ID
s_slot (const char *label)
{
    CK_SLOT_ID slot = 0;
    CK_RV rv = cs_test_slot (p11, label, &slot);
    if (rv == CKR_TOKEN_NOT_PRESENT)
        cs_test_fail ("no token with that label");
    CHECK (rv, "C_GetSlotList");
    return slot;
}

static CK_OBJECT_HANDLE
s_import (CK_KEY_TYPE type, const unsigned char *value, CK_ULONG len)
{
    CK_OBJECT_CLASS klass = CKO_SECRET_KEY;
    CK_BBOOL no = CK_FALSE, yes = CK_TRUE;
    CK_ATTRIBUTE tmpl [] = {
        { CKA_PRIVATE, &no, sizeof no },        /* usable before C_Login: the no-login check */
        { CKA_CLASS, &klass, sizeof klass }, { CKA_KEY_TYPE, &type, sizeof type },
        { CKA_TOKEN, &no, sizeof no }, { CKA_VALUE, (void *) value, len },
        { CKA_ENCRYPT, &yes, sizeof yes }, { CKA_DECRYPT, &yes, sizeof yes },
        { CKA_SIGN, &yes, sizeof yes }, { CKA_VERIFY, &yes, sizeof yes },
    };
    CK_OBJECT_HANDLE key;
    CHECK (p11->C_CreateObject (s, tmpl, sizeof tmpl / sizeof tmpl [0], &key), "C_CreateObject (secret key)");
    return key;
}

//  EVP's ciphertext (or plaintext) of `in` with AES of key_len bytes.
static int
s_evp (CK_MECHANISM_TYPE mech, bool enc, const unsigned char *key, size_t key_len, const unsigned char *iv,
       const unsigned char *in, int in_len, unsigned char *out)
{
    const EVP_CIPHER *c = NULL;
    bool ecb = mech == CKM_AES_ECB;
    if (key_len == 16) c = ecb ? EVP_aes_128_ecb () : EVP_aes_128_cbc ();
    if (key_len == 24) c = ecb ? EVP_aes_192_ecb () : EVP_aes_192_cbc ();
    if (key_len == 32) c = ecb ? EVP_aes_256_ecb () : EVP_aes_256_cbc ();
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new ();
    int len = 0, fin = 0;
    if (!EVP_CipherInit_ex (ctx, c, NULL, key, ecb ? NULL : iv, enc)
    ||  !EVP_CIPHER_CTX_set_padding (ctx, mech == CKM_AES_CBC_PAD)
    ||  !EVP_CipherUpdate (ctx, out, &len, in, in_len) || !EVP_CipherFinal_ex (ctx, out + len, &fin))
        cs_test_fail ("EVP");
    EVP_CIPHER_CTX_free (ctx);
    return len + fin;
}

static void
s_block_modes (const unsigned char *key, size_t key_len, unsigned char *iv)
{
    static const CK_MECHANISM_TYPE mechs [] = { CKM_AES_ECB, CKM_AES_CBC, CKM_AES_CBC_PAD };
    static const char *names [] = { "AES-ECB", "AES-CBC", "AES-CBC-PAD" };
    unsigned char plain [100], ct [160], want [160], back [160];
    RAND_bytes (plain, sizeof plain);
    CK_OBJECT_HANDLE k = s_import (CKK_AES, key, key_len);
    for (size_t m = 0; m < 3; m++) {
        CK_MECHANISM mech = { mechs [m], mechs [m] == CKM_AES_ECB ? NULL : iv, mechs [m] == CKM_AES_ECB ? 0 : 16 };
        CK_ULONG n = mechs [m] == CKM_AES_CBC_PAD ? 100 : 96, len = 0, part = 0;
        int wlen = s_evp (mechs [m], true, key, key_len, iv, plain, (int) n, want);
        CHECK (p11->C_EncryptInit (s, &mech, k), "C_EncryptInit");
        CHECK (p11->C_Encrypt (s, plain, n, NULL, &len), "C_Encrypt (length)");
        if (len < (CK_ULONG) wlen)
            cs_test_fail ("C_Encrypt length query too small");
        len = sizeof ct;
        CHECK (p11->C_Encrypt (s, plain, n, ct, &len), "C_Encrypt");
        if (len != (CK_ULONG) wlen || memcmp (ct, want, len))
            cs_test_fail ("ciphertext differs from OpenSSL's");
        CK_ULONG blen = sizeof back;
        CHECK (p11->C_DecryptInit (s, &mech, k), "C_DecryptInit");
        CHECK (p11->C_Decrypt (s, ct, len, back, &blen), "C_Decrypt");
        if (blen != n || memcmp (back, plain, n))
            cs_test_fail ("decryption does not give the plaintext back");
        /*  Multi-part: the whole blocks come from the updates, the rest from Final.  */
        CHECK (p11->C_EncryptInit (s, &mech, k), "C_EncryptInit (multi-part)");
        part = sizeof ct;
        CHECK (p11->C_EncryptUpdate (s, plain, 40, ct, &part), "C_EncryptUpdate");
        len = part;
        part = sizeof ct - len;
        CHECK (p11->C_EncryptUpdate (s, plain + 40, n - 40, ct + len, &part), "C_EncryptUpdate");
        len += part;
        part = sizeof ct - len;
        CHECK (p11->C_EncryptFinal (s, ct + len, &part), "C_EncryptFinal");
        len += part;
        if (len != (CK_ULONG) wlen || memcmp (ct, want, len))
            cs_test_fail ("multi-part ciphertext differs from OpenSSL's");
        /*  A single-part call after an update: the operation is refused and ended.  */
        CHECK (p11->C_EncryptInit (s, &mech, k), "C_EncryptInit (mixed)");
        part = sizeof ct;
        CHECK (p11->C_EncryptUpdate (s, plain, 16, ct, &part), "C_EncryptUpdate (mixed)");
        len = sizeof ct;
        EXPECT (p11->C_Encrypt (s, plain, n, ct, &len), CKR_OPERATION_ACTIVE, "C_Encrypt after C_EncryptUpdate");
        EXPECT (p11->C_EncryptFinal (s, ct, &len), CKR_OPERATION_NOT_INITIALIZED, "C_EncryptFinal after the refusal");
        printf ("%s-%zu: C_Encrypt and C_EncryptUpdate/Final equal OpenSSL's ciphertext; C_Decrypt gives the plaintext\n",
                names [m], key_len * 8);
    }
    /*  A wrong padding: the last block decrypts to garbage.  */
    CK_MECHANISM pad = { CKM_AES_CBC_PAD, iv, 16 };
    unsigned char junk [32], out [48];
    CK_ULONG olen = sizeof out;
    memset (junk, 0, sizeof junk);
    int jl = s_evp (CKM_AES_CBC, true, key, key_len, iv, junk, 32, out);   /* padding bytes 0: invalid */
    CHECK (p11->C_DecryptInit (s, &pad, k), "C_DecryptInit (bad padding)");
    olen = sizeof junk;
    EXPECT (p11->C_Decrypt (s, out, (CK_ULONG) jl, junk, &olen), CKR_ENCRYPTED_DATA_INVALID, "C_Decrypt (bad padding)");
    CHECK (p11->C_DestroyObject (s, k), "C_DestroyObject");
}

static void
s_gcm (void)
{
    unsigned char key [32], iv [12], aad [20], plain [77], ct [128], tag [16], out [128], back [128];
    RAND_bytes (key, sizeof key);
    RAND_bytes (iv, sizeof iv);
    RAND_bytes (aad, sizeof aad);
    RAND_bytes (plain, sizeof plain);
    CK_OBJECT_HANDLE k = s_import (CKK_AES, key, sizeof key);
    CK_GCM_PARAMS params = { iv, sizeof iv, 96, aad, sizeof aad, 128 };
    CK_MECHANISM mech = { CKM_AES_GCM, &params, sizeof params };
    int len = 0, fin = 0;
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new ();
    if (!EVP_EncryptInit_ex (ctx, EVP_aes_256_gcm (), NULL, NULL, NULL)
    ||  !EVP_CIPHER_CTX_ctrl (ctx, EVP_CTRL_GCM_SET_IVLEN, sizeof iv, NULL)
    ||  !EVP_EncryptInit_ex (ctx, NULL, NULL, key, iv)
    ||  !EVP_EncryptUpdate (ctx, NULL, &len, aad, sizeof aad)
    ||  !EVP_EncryptUpdate (ctx, ct, &len, plain, sizeof plain)
    ||  !EVP_EncryptFinal_ex (ctx, ct + len, &fin)
    ||  !EVP_CIPHER_CTX_ctrl (ctx, EVP_CTRL_GCM_GET_TAG, 16, tag))
        cs_test_fail ("EVP GCM");
    EVP_CIPHER_CTX_free (ctx);
    CK_ULONG olen = 10;         /* too small: the result is kept for the retry (PKCS#11 2.40 §5.2) */
    CHECK (p11->C_EncryptInit (s, &mech, k), "C_EncryptInit (GCM)");
    EXPECT (p11->C_Encrypt (s, plain, sizeof plain, out, &olen), CKR_BUFFER_TOO_SMALL, "C_Encrypt (GCM, short buffer)");
    if (olen != sizeof plain + 16)
        cs_test_fail ("C_Encrypt (GCM) does not name the size it needs");
    CHECK (p11->C_Encrypt (s, plain, sizeof plain, out, &olen), "C_Encrypt (GCM)");
    if (olen != sizeof plain + 16 || memcmp (out, ct, sizeof plain) || memcmp (out + sizeof plain, tag, 16))
        cs_test_fail ("GCM ciphertext || tag differs from OpenSSL's");
    CK_ULONG blen = sizeof back;
    CHECK (p11->C_DecryptInit (s, &mech, k), "C_DecryptInit (GCM)");
    CHECK (p11->C_Decrypt (s, out, olen, back, &blen), "C_Decrypt (GCM)");
    if (blen != sizeof plain || memcmp (back, plain, blen))
        cs_test_fail ("GCM decryption does not give the plaintext back");
    out [olen - 1] ^= 1;
    blen = sizeof back;
    CHECK (p11->C_DecryptInit (s, &mech, k), "C_DecryptInit (GCM, bad tag)");
    EXPECT (p11->C_Decrypt (s, out, olen, back, &blen), CKR_ENCRYPTED_DATA_INVALID, "C_Decrypt (GCM, bad tag)");
    params.ulTagBits = 64;
    EXPECT (p11->C_EncryptInit (s, &mech, k), CKR_MECHANISM_PARAM_INVALID, "C_EncryptInit (GCM, 64-bit tag)");
    printf ("AES-256-GCM: ciphertext || tag equal OpenSSL's; decrypts back; a flipped tag is refused\n");
    CHECK (p11->C_DestroyObject (s, k), "C_DestroyObject");
}

static void s_write (const char *dir, const char *name, const unsigned char *data, size_t len);
static const char *s_outdir;

static void
s_hmac (CK_OBJECT_HANDLE k, const unsigned char *key, size_t key_len)
{
    unsigned char msg [300], mac [64], want [32];
    unsigned int wlen = 0;
    RAND_bytes (msg, sizeof msg);
    CK_MECHANISM mech = { CKM_SHA256_HMAC, NULL, 0 };
    CK_ULONG len = sizeof mac;
    CHECK (p11->C_SignInit (s, &mech, k), "C_SignInit (HMAC)");
    CHECK (p11->C_Sign (s, msg, sizeof msg, mac, &len), "C_Sign (HMAC)");
    if (key) {
        HMAC (EVP_sha256 (), key, (int) key_len, msg, sizeof msg, want, &wlen);
        if (len != 32 || wlen != 32 || memcmp (mac, want, 32))
            cs_test_fail ("HMAC differs from OpenSSL's");
        s_write (s_outdir, "hmac-key.bin", key, key_len);       /* for `openssl dgst -mac HMAC` */
        s_write (s_outdir, "hmac-msg.bin", msg, sizeof msg);
        s_write (s_outdir, "hmac.bin", mac, len);
    }
    CHECK (p11->C_VerifyInit (s, &mech, k), "C_VerifyInit (HMAC)");
    CHECK (p11->C_VerifyUpdate (s, msg, 100), "C_VerifyUpdate (HMAC)");
    CHECK (p11->C_VerifyUpdate (s, msg + 100, sizeof msg - 100), "C_VerifyUpdate (HMAC)");
    CHECK (p11->C_VerifyFinal (s, mac, len), "C_VerifyFinal (HMAC)");
    mac [5] ^= 0x40;
    CHECK (p11->C_VerifyInit (s, &mech, k), "C_VerifyInit (HMAC)");
    EXPECT (p11->C_Verify (s, msg, sizeof msg, mac, len), CKR_SIGNATURE_INVALID, "C_Verify (flipped MAC)");
}

static CK_OBJECT_HANDLE
s_generate (CK_MECHANISM_TYPE type, CK_ULONG len, CK_BBOOL token, CK_RV want)
{
    CK_MECHANISM mech = { type, NULL, 0 };
    CK_ATTRIBUTE tmpl [] = { { CKA_VALUE_LEN, &len, sizeof len }, { CKA_TOKEN, &token, sizeof token } };
    CK_OBJECT_HANDLE key = CK_INVALID_HANDLE;
    EXPECT (p11->C_GenerateKey (s, &mech, tmpl, 2, &key), want, "C_GenerateKey");
    return key;
}

static void
s_write (const char *dir, const char *name, const unsigned char *data, size_t len)
{
    char path [4096];
    snprintf (path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen (path, "wb");
    if (!f || fwrite (data, 1, len, f) != len || fclose (f))
        cs_test_fail ("cannot write an output file");
}

int
main (int argc, char **argv)
{
    if (argc != 5) {
        fprintf (stderr, "usage: cs-sym MODULE.so TOKEN PIN OUTDIR\n");
        return 2;
    }
    p11 = cs_test_module (argv [1]);
    s_outdir = argv [4];
    CHECK (p11->C_Initialize (NULL), "C_Initialize");
    CK_SLOT_ID slot = s_slot (argv [2]);
    CHECK (p11->C_OpenSession (slot, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &s), "C_OpenSession");

    /*  The mechanisms are listed (the first complaint: "not supported").  */
    CK_MECHANISM_INFO info;
    CHECK (p11->C_GetMechanismInfo (slot, CKM_AES_KEY_GEN, &info), "C_GetMechanismInfo (AES_KEY_GEN)");
    if (!(info.flags & CKF_GENERATE) || info.ulMinKeySize != 16 || info.ulMaxKeySize != 32)
        cs_test_fail ("CKM_AES_KEY_GEN info");
    CHECK (p11->C_GetMechanismInfo (slot, CKM_AES_GCM, &info), "C_GetMechanismInfo (AES_GCM)");
    if (!(info.flags & CKF_ENCRYPT) || !(info.flags & CKF_DECRYPT) || info.ulMaxKeySize != 32)
        cs_test_fail ("CKM_AES_GCM info");
    CHECK (p11->C_GetMechanismInfo (slot, CKM_SHA256_HMAC, &info), "C_GetMechanismInfo (SHA256_HMAC)");

    /*  Without a login: a public session key works (the broker runs a job
        that carries its key without a ticket).  */
    unsigned char key [32], iv [16];
    RAND_bytes (key, sizeof key);
    RAND_bytes (iv, sizeof iv);
    CK_OBJECT_HANDLE k = s_import (CKK_AES, key, 32);
    CK_MECHANISM cbc = { CKM_AES_CBC_PAD, iv, sizeof iv };
    unsigned char one [16] = { 7 }, one_ct [32];
    CK_ULONG one_len = sizeof one_ct;
    CHECK (p11->C_EncryptInit (s, &cbc, k), "C_EncryptInit (no login, public session key)");
    CHECK (p11->C_Encrypt (s, one, sizeof one, one_ct, &one_len), "C_Encrypt (no login, public session key)");
    if (one_len != 32)
        cs_test_fail ("CBC-PAD of 16 bytes without a login is not 32 bytes");
    CHECK (p11->C_DestroyObject (s, k), "C_DestroyObject");
    CHECK (p11->C_Login (s, CKU_USER, (CK_UTF8CHAR_PTR) argv [3], strlen (argv [3])), "C_Login");

    for (size_t key_len = 16; key_len <= 32; key_len += 8) {
        RAND_bytes (key, sizeof key);
        s_block_modes (key, key_len, iv);
    }
    s_gcm ();

    /*  AES-256-CBC-PAD for the shell's `openssl enc` check.  */
    unsigned char plain [1000], ct [1100];
    CK_ULONG len = sizeof ct;
    RAND_bytes (key, sizeof key);
    RAND_bytes (plain, sizeof plain);
    k = s_import (CKK_AES, key, 32);
    CHECK (p11->C_EncryptInit (s, &cbc, k), "C_EncryptInit");
    CHECK (p11->C_Encrypt (s, plain, sizeof plain, ct, &len), "C_Encrypt");
    s_write (argv [4], "key.bin", key, sizeof key);
    s_write (argv [4], "iv.bin", iv, sizeof iv);
    s_write (argv [4], "plain.bin", plain, sizeof plain);
    s_write (argv [4], "ct.bin", ct, len);

    /*  HMAC-SHA256 with an imported generic secret.  */
    unsigned char hkey [40];
    RAND_bytes (hkey, sizeof hkey);
    s_hmac (s_import (CKK_GENERIC_SECRET, hkey, sizeof hkey), hkey, sizeof hkey);
    printf ("SHA256-HMAC: equals OpenSSL's HMAC; C_Verify accepts it and refuses a flipped MAC\n");

    /*  Generated session keys: not readable, usable.  */
    k = s_generate (CKM_AES_KEY_GEN, 32, CK_FALSE, CKR_OK);
    unsigned char value [64];
    CK_ATTRIBUTE get_value = { CKA_VALUE, value, sizeof value };
    EXPECT (p11->C_GetAttributeValue (s, k, &get_value, 1), CKR_ATTRIBUTE_SENSITIVE, "CKA_VALUE of a generated key");
    CK_ULONG vlen = 0;
    CK_ATTRIBUTE get_len = { CKA_VALUE_LEN, &vlen, sizeof vlen };
    CHECK (p11->C_GetAttributeValue (s, k, &get_len, 1), "CKA_VALUE_LEN");
    if (vlen != 32)
        cs_test_fail ("CKA_VALUE_LEN of a generated AES-256 key");
    unsigned char back [1100];
    CK_ULONG blen = sizeof back;
    len = sizeof ct;
    CHECK (p11->C_EncryptInit (s, &cbc, k), "C_EncryptInit (generated)");
    CHECK (p11->C_Encrypt (s, plain, sizeof plain, ct, &len), "C_Encrypt (generated)");
    CHECK (p11->C_DecryptInit (s, &cbc, k), "C_DecryptInit (generated)");
    CHECK (p11->C_Decrypt (s, ct, len, back, &blen), "C_Decrypt (generated)");
    if (blen != sizeof plain || memcmp (back, plain, blen) || (len == sizeof plain + 16 && !memcmp (ct, plain, 16)))
        cs_test_fail ("a generated AES key does not round-trip");
    s_generate (CKM_AES_KEY_GEN, 20, CK_FALSE, CKR_ATTRIBUTE_VALUE_INVALID);
    s_generate (CKM_AES_KEY_GEN, 20, CK_TRUE, CKR_ATTRIBUTE_VALUE_INVALID);
    s_hmac (s_generate (CKM_GENERIC_SECRET_KEY_GEN, 32, CK_FALSE, CKR_OK), NULL, 0);
    k = s_generate (CKM_GENERIC_SECRET_KEY_GEN, 32, CK_TRUE, CKR_OK);
    s_hmac (k, NULL, 0);
    CHECK (p11->C_DestroyObject (s, k), "C_DestroyObject (token generic secret)");
    printf ("C_GenerateKey: AES-256 and generic-secret session keys, CKA_VALUE sensitive, usable; "
            "a token generic secret MACs by reference; a 20-byte AES key refused\n");

    /*  A token key after C_Logout: the broker holds it, a login is needed.  */
    k = s_generate (CKM_GENERIC_SECRET_KEY_GEN, 32, CK_TRUE, CKR_OK);
    CK_MECHANISM hmac = { CKM_SHA256_HMAC, NULL, 0 };
    CHECK (p11->C_Logout (s), "C_Logout");
    EXPECT (p11->C_SignInit (s, &hmac, k), CKR_USER_NOT_LOGGED_IN, "C_SignInit (token key, logged out)");
    CHECK (p11->C_Login (s, CKU_USER, (CK_UTF8CHAR_PTR) argv [3], strlen (argv [3])), "C_Login (again)");
    CHECK (p11->C_DestroyObject (s, k), "C_DestroyObject (token generic secret)");
    printf ("a public session key encrypts without a login; a token key after C_Logout: "
            "CKR_USER_NOT_LOGGED_IN\n");
    CHECK (p11->C_Logout (s), "C_Logout");
    CHECK (p11->C_CloseSession (s), "C_CloseSession");
    CHECK (p11->C_Finalize (NULL), "C_Finalize");
    printf ("all secret-key checks passed\n");
    return 0;
}
