/*  cs-attacks.c — the published PKCS#11 key-management attacks, scripted
 *  through the module under test (issue 19 item 3): Clulow, "On the
 *  security of PKCS#11", CHES 2003; Bortolozzo, Centenaro, Focardi, Steel,
 *  "Attacking and fixing PKCS#11 security tokens", CCS 2010 (Tookan); and
 *  the sign-raw attack of issue 19 (an unwrapping RSA key given CKA_SIGN,
 *  whose CKM_RSA_X_509 "signature" of a wrapped key is the key), and raw
 *  RSA on a key with one of its two roles (a decrypt-only key "decrypting"
 *  chosen data signs it).
 *
 *  usage: cs-attacks MODULE.so TOKEN PIN strict|spec DIR
 *
 *  strict (the default policy, docs/CONTRACTS.md "Usage separation"): each
 *  attack step is refused with its exact CKR_ code.  spec (PKCS#11 as
 *  SoftHSM has it): the combined-role keys are made and the sign-raw
 *  attack gives the wrapped value back, which is why strict is the
 *  default; CKA_SENSITIVE, CKA_EXTRACTABLE and CKA_ALLOWED_MECHANISMS hold
 *  under both.  The keys used by usage-separation.sh's wire client are
 *  left as token keys labelled cs-attack-*: cs-attack-unwrap (an RSA
 *  unwrapping key; DIR/oaep.bin is an OAEP (SHA-256) encryption of
 *  DIR/secret.bin under it), cs-attack-gcm (an AES key limited to
 *  CKM_AES_GCM), cs-attack-kek (an AES wrapping key), cs-attack-dec and
 *  cs-attack-sig (RSA keys that only decrypt, only sign).  Prints one line per
 *  step; exit 0 when all pass.
 */
#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/bn.h>
#include <openssl/evp.h>
#include <openssl/param_build.h>
#include <openssl/rand.h>
#include <openssl/rsa.h>
#include <p11-kit/pkcs11.h>
#include "cs-test-slot.h"

static CK_FUNCTION_LIST *p11;
static CK_SESSION_HANDLE s;
static CK_BBOOL yes = CK_TRUE, no = CK_FALSE;
static bool s_strict;
static const char *s_dir;

#define CHECK(call, what) do { CK_RV rv_ = (call); if (rv_ != CKR_OK) { \
    fprintf (stderr, "cs-attacks: %s: CK_RV 0x%lx\n", what, (unsigned long) rv_); exit (1); } } while (0)

static void
s_fail (const char *what)
{
    fprintf (stderr, "cs-attacks: FAIL: %s\n", what);
    exit (1);
}

/*  One attack step: `got` must be `want` (its name for the log).  */
static void
s_expect (CK_RV got, CK_RV want, const char *want_name, const char *what)
{
    if (got != want) {
        fprintf (stderr, "cs-attacks: FAIL: %s: CK_RV 0x%lx, expected %s (0x%lx)\n", what, (unsigned long) got,
                 want_name, (unsigned long) want);
        exit (1);
    }
    printf ("%s: %s -> %s\n", want == CKR_OK ? "allowed" : "refused", what, want_name);
}
#define EXPECT(call, want, what) s_expect ((call), (want), #want, what)
/*  Strict refuses with `want`; spec allows.  */
#define STRICT(call, want, what) (s_strict ? s_expect ((call), (want), #want, what) \
                                           : s_expect ((call), CKR_OK, "CKR_OK", what))

static void
s_write (const char *name, const unsigned char *data, size_t len)
{
    char path [4096];
    snprintf (path, sizeof path, "%s/%s", s_dir, name);
    FILE *file = fopen (path, "wb");
    if (!file || fwrite (data, 1, len, file) != len || fclose (file))
        s_fail ("cannot write a file in DIR");
}

/*  C_CreateObject of an AES key of `value` with flags (wrap, unwrap,
 *  encrypt, decrypt; -1: not in the template) and more attributes.  */
static CK_RV
s_aes (const unsigned char *value, CK_ULONG len, int wrap, int unwrap, int encrypt, int decrypt,
       const CK_ATTRIBUTE *more, CK_ULONG n_more, CK_OBJECT_HANDLE *key_p)
{
    static CK_OBJECT_CLASS klass = CKO_SECRET_KEY;
    static CK_KEY_TYPE type = CKK_AES;
    CK_ATTRIBUTE tmpl [16] = {
        { CKA_CLASS, &klass, sizeof klass }, { CKA_KEY_TYPE, &type, sizeof type }, { CKA_VALUE, (void *) value, len },
    };
    CK_ULONG n = 3;
    const int flags [] = { wrap, unwrap, encrypt, decrypt };
    const CK_ATTRIBUTE_TYPE types [] = { CKA_WRAP, CKA_UNWRAP, CKA_ENCRYPT, CKA_DECRYPT };
    for (int i = 0; i < 4; i++)
        if (flags [i] >= 0)
            tmpl [n++] = (CK_ATTRIBUTE) { types [i], flags [i] ? &yes : &no, 1 };
    for (CK_ULONG i = 0; i < n_more && n < 16; i++)
        tmpl [n++] = more [i];
    return p11->C_CreateObject (s, tmpl, n, key_p);
}

/*  A token RSA-2048 key pair: public CKA_WRAP `wrap`; private template
 *  `priv` (n_priv entries) plus its label.  */
static CK_RV
s_pair (const char *label, CK_BBOOL wrap, const CK_ATTRIBUTE *priv, CK_ULONG n_priv, CK_OBJECT_HANDLE *pub_p,
        CK_OBJECT_HANDLE *priv_p)
{
    static CK_ULONG bits = 2048;
    static CK_BYTE e [] = { 1, 0, 1 };
    CK_MECHANISM gen = { CKM_RSA_PKCS_KEY_PAIR_GEN, NULL, 0 };
    CK_ATTRIBUTE pub [] = {
        { CKA_TOKEN, &yes, 1 }, { CKA_MODULUS_BITS, &bits, sizeof bits }, { CKA_PUBLIC_EXPONENT, e, sizeof e },
        { CKA_WRAP, &wrap, 1 }, { CKA_LABEL, (void *) label, strlen (label) },
    };
    CK_ATTRIBUTE tmpl [12] = { { CKA_TOKEN, &yes, 1 }, { CKA_LABEL, (void *) label, strlen (label) } };
    CK_ULONG n = 2;
    for (CK_ULONG i = 0; i < n_priv && n < 12; i++)
        tmpl [n++] = priv [i];
    return p11->C_GenerateKeyPair (s, &gen, pub, sizeof pub / sizeof pub [0], tmpl, n, pub_p, priv_p);
}

static CK_RV
s_set (CK_OBJECT_HANDLE key, CK_ATTRIBUTE_TYPE type, CK_BBOOL value)
{
    CK_ATTRIBUTE attr = { type, &value, 1 };
    return p11->C_SetAttributeValue (s, key, &attr, 1);
}

static CK_RSA_PKCS_OAEP_PARAMS s_oaep_params = { CKM_SHA256, CKG_MGF1_SHA256, CKZ_DATA_SPECIFIED, NULL, 0 };
static CK_MECHANISM s_oaep = { CKM_RSA_PKCS_OAEP, &s_oaep_params, sizeof s_oaep_params };
static CK_MECHANISM s_kw = { CKM_AES_KEY_WRAP, NULL, 0 };
static CK_MECHANISM s_raw = { CKM_RSA_X_509, NULL, 0 };

/*  OAEP (SHA-256) encryption of value under the RSA public key object pub,
 *  with OpenSSL from its modulus (a "trusted" wrap done outside the token,
 *  as any holder of the public key can); out gets 256 bytes.  */
static void
s_oaep_encrypt (CK_OBJECT_HANDLE pub, const unsigned char *value, size_t len, unsigned char out [256])
{
    unsigned char n [256], e [8];
    CK_ATTRIBUTE get [] = { { CKA_MODULUS, n, sizeof n }, { CKA_PUBLIC_EXPONENT, e, sizeof e } };
    CHECK (p11->C_GetAttributeValue (s, pub, get, 2), "C_GetAttributeValue (modulus)");
    OSSL_PARAM_BLD *bld = OSSL_PARAM_BLD_new ();
    BIGNUM *bn = BN_bin2bn (n, (int) get [0].ulValueLen, NULL), *be = BN_bin2bn (e, (int) get [1].ulValueLen, NULL);
    OSSL_PARAM_BLD_push_BN (bld, "n", bn);
    OSSL_PARAM_BLD_push_BN (bld, "e", be);
    OSSL_PARAM *params = OSSL_PARAM_BLD_to_param (bld);
    EVP_PKEY_CTX *from = EVP_PKEY_CTX_new_from_name (NULL, "RSA", NULL);
    EVP_PKEY *pkey = NULL;
    size_t out_len = 256;
    if (!from || EVP_PKEY_fromdata_init (from) != 1 || EVP_PKEY_fromdata (from, &pkey, EVP_PKEY_PUBLIC_KEY, params) != 1)
        s_fail ("OpenSSL cannot make the public key");
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_pkey (NULL, pkey, NULL);
    if (!ctx || EVP_PKEY_encrypt_init (ctx) != 1 || EVP_PKEY_CTX_set_rsa_padding (ctx, RSA_PKCS1_OAEP_PADDING) != 1
    ||  EVP_PKEY_CTX_set_rsa_oaep_md (ctx, EVP_sha256 ()) != 1 || EVP_PKEY_CTX_set_rsa_mgf1_md (ctx, EVP_sha256 ()) != 1
    ||  EVP_PKEY_encrypt (ctx, out, &out_len, value, len) != 1 || out_len != 256)
        s_fail ("OpenSSL OAEP encryption");
    EVP_PKEY_CTX_free (ctx);
    EVP_PKEY_CTX_free (from);
    EVP_PKEY_free (pkey);
    OSSL_PARAM_free (params);
    OSSL_PARAM_BLD_free (bld);
    BN_free (bn);
    BN_free (be);
}

/*  Raw RSA is both a signature and a decryption (cs_usage_mech_check):
 *  under strict a decrypt-only key (cs-attack-dec) refuses a CKM_RSA_X_509
 *  decryption, which would sign chosen data, and a sign-only key
 *  (cs-attack-sig) a CKM_RSA_X_509 signature, which would decrypt a
 *  ciphertext; their padded mechanisms run.  Under spec the raw jobs
 *  start.  */
static void
s_raw_attacks (void)
{
    CK_OBJECT_HANDLE dec_pub, dec, sig_pub, sig;
    CK_ATTRIBUTE decrypt_only [] = { { CKA_DECRYPT, &yes, 1 }, { CKA_SIGN, &no, 1 }, { CKA_SIGN_RECOVER, &no, 1 } };
    CK_ATTRIBUTE sign_only [] = { { CKA_SIGN, &yes, 1 }, { CKA_DECRYPT, &no, 1 } };
    CHECK (s_pair ("cs-attack-dec", CK_FALSE, decrypt_only, 3, &dec_pub, &dec), "C_GenerateKeyPair (decrypt-only key)");
    CHECK (s_pair ("cs-attack-sig", CK_FALSE, sign_only, 2, &sig_pub, &sig), "C_GenerateKeyPair (sign-only key)");
    STRICT (p11->C_DecryptInit (s, &s_raw, dec), CKR_KEY_FUNCTION_NOT_PERMITTED,
            "raw RSA: C_DecryptInit (CKM_RSA_X_509) with a decrypt-only key (it would sign)");
    STRICT (p11->C_SignInit (s, &s_raw, sig), CKR_KEY_FUNCTION_NOT_PERMITTED,
            "raw RSA: C_SignInit (CKM_RSA_X_509) with a sign-only key (it would decrypt)");
    if (!s_strict) {        /* spec: both operations started above */
        unsigned char block [256] = { 0 }, out [256];
        CK_ULONG len = sizeof out;
        block [255] = 2;
        CHECK (p11->C_Decrypt (s, block, sizeof block, out, &len), "spec: C_Decrypt (CKM_RSA_X_509)");
        len = sizeof out;
        CHECK (p11->C_Sign (s, block, sizeof block, out, &len), "spec: C_Sign (CKM_RSA_X_509)");
        printf ("spec: raw RSA runs on a decrypt-only and a sign-only key\n");
        return;
    }
    unsigned char secret [32], wrapped [256], out [256];
    CK_ULONG out_len = sizeof out;
    RAND_bytes (secret, sizeof secret);
    s_oaep_encrypt (dec_pub, secret, sizeof secret, wrapped);
    s_write ("dec-oaep.bin", wrapped, sizeof wrapped);
    CHECK (p11->C_DecryptInit (s, &s_oaep, dec), "C_DecryptInit (OAEP, decrypt-only key)");
    CHECK (p11->C_Decrypt (s, wrapped, sizeof wrapped, out, &out_len), "C_Decrypt (OAEP, decrypt-only key)");
    if (out_len != sizeof secret || memcmp (out, secret, sizeof secret))
        s_fail ("the decrypt-only key's OAEP decryption is wrong");
    CK_MECHANISM sha256 = { CKM_SHA256_RSA_PKCS, NULL, 0 };
    out_len = sizeof out;
    CHECK (p11->C_SignInit (s, &sha256, sig), "C_SignInit (CKM_SHA256_RSA_PKCS, sign-only key)");
    CHECK (p11->C_Sign (s, secret, sizeof secret, out, &out_len), "C_Sign (CKM_SHA256_RSA_PKCS, sign-only key)");
    printf ("allowed: the decrypt-only key decrypts OAEP and the sign-only key signs PKCS#1 v1.5\n");
}

/*  The sign-raw attack of issue 19 and the attribute changes on an RSA
 *  unwrapping key (token key: the broker checks every step again).  */
static void
s_rsa_attacks (void)
{
    CK_OBJECT_HANDLE pub, priv, other_pub, other_priv;
    CK_ATTRIBUTE unwrap_only [] = { { CKA_UNWRAP, &yes, 1 } };
    CK_ATTRIBUTE decrypts [] = { { CKA_DECRYPT, &yes, 1 }, { CKA_SIGN, &no, 1 } };
    CK_ATTRIBUTE unwrap_signs [] = { { CKA_UNWRAP, &yes, 1 }, { CKA_SIGN, &yes, 1 } };
    /*  Tookan wrap/decrypt with one pair: public half CKA_WRAP, private
        half CKA_DECRYPT (the broker sees both templates).  */
    STRICT (s_pair ("cs-attack-pair", CK_TRUE, decrypts, 2, &other_pub, &other_priv), CKR_TEMPLATE_INCONSISTENT,
            "Tookan wrap/decrypt: a key pair with CKA_WRAP (public) and CKA_DECRYPT (private)");
    STRICT (s_pair ("cs-attack-pair2", CK_FALSE, unwrap_signs, 2, &other_pub, &other_priv), CKR_TEMPLATE_INCONSISTENT,
            "sign-raw: a private key with CKA_UNWRAP and CKA_SIGN");
    /*  The key: unwrap only (CKA_DECRYPT, CKA_SIGN default FALSE
        under strict; spec: the template says so).  */
    CK_ATTRIBUTE spec_unwrap [] = { { CKA_UNWRAP, &yes, 1 }, { CKA_DECRYPT, &no, 1 }, { CKA_SIGN, &no, 1 },
                                    { CKA_SIGN_RECOVER, &no, 1 } };
    CHECK (s_pair ("cs-attack-unwrap", CK_FALSE, s_strict ? unwrap_only : spec_unwrap, s_strict ? 1 : 4, &pub, &priv),
           "C_GenerateKeyPair (unwrapping key)");
    unsigned char secret [32], wrapped [256], out [512];
    CK_ULONG out_len = sizeof out;
    RAND_bytes (secret, sizeof secret);
    s_oaep_encrypt (pub, secret, sizeof secret, wrapped);
    s_write ("secret.bin", secret, sizeof secret);
    s_write ("oaep.bin", wrapped, sizeof wrapped);
    EXPECT (p11->C_SignInit (s, &s_raw, priv), CKR_KEY_FUNCTION_NOT_PERMITTED,
            "sign-raw: C_SignInit (CKM_RSA_X_509) with the unwrapping key");
    STRICT (s_set (priv, CKA_SIGN, CK_TRUE), CKR_ATTRIBUTE_READ_ONLY, "sign-raw: CKA_SIGN FALSE -> TRUE");
    STRICT (s_set (priv, CKA_SIGN_RECOVER, CK_TRUE), CKR_ATTRIBUTE_READ_ONLY,
            "sign-raw: CKA_SIGN_RECOVER FALSE -> TRUE");
    STRICT (p11->C_SignInit (s, &s_raw, priv), CKR_KEY_FUNCTION_NOT_PERMITTED,
            "sign-raw: C_SignInit (CKM_RSA_X_509) after the change");
    if (!s_strict) {        /* spec: the attack works, the OAEP block holds the key */
        CHECK (p11->C_Sign (s, wrapped, sizeof wrapped, out, &out_len), "C_Sign (CKM_RSA_X_509)");
        printf ("spec: the unwrapping key's raw \"signature\" is the OAEP block (%lu bytes): the attack "
                "strict stops\n", (unsigned long) out_len);
    }
    STRICT (s_set (priv, CKA_DECRYPT, CK_TRUE), CKR_ATTRIBUTE_READ_ONLY,
            "Tookan wrap/decrypt: CKA_DECRYPT FALSE -> TRUE on the unwrapping key");
    STRICT (p11->C_DecryptInit (s, &s_oaep, priv), CKR_KEY_FUNCTION_NOT_PERMITTED,
            "Tookan wrap/decrypt: C_DecryptInit with the unwrapping key");
    if (!s_strict) {        /* spec: the wrapped key decrypts */
        out_len = sizeof out;
        CHECK (p11->C_Decrypt (s, wrapped, sizeof wrapped, out, &out_len), "C_Decrypt (OAEP)");
        if (out_len != sizeof secret || memcmp (out, secret, sizeof secret))
            s_fail ("spec: C_Decrypt of the wrapped key does not give it");
        printf ("spec: the unwrapping key given CKA_DECRYPT decrypts the wrapped key: the attack strict stops\n");
    }
    if (s_strict) {
        CK_OBJECT_HANDLE copy;
        CK_ATTRIBUTE sign_on = { CKA_SIGN, &yes, 1 };
        EXPECT (p11->C_CopyObject (s, priv, &sign_on, 1, &copy), CKR_ATTRIBUTE_READ_ONLY,
                "sign-raw: C_CopyObject of the unwrapping key with CKA_SIGN TRUE");
        CK_OBJECT_HANDLE spare_pub, spare;
        CHECK (s_pair ("cs-attack-spare", CK_FALSE, unwrap_only, 1, &spare_pub, &spare), "C_GenerateKeyPair (spare)");
        EXPECT (s_set (spare, CKA_UNWRAP, CK_FALSE), CKR_OK, "CKA_UNWRAP TRUE -> FALSE (a role goes off)");
        EXPECT (s_set (spare, CKA_DECRYPT, CK_TRUE), CKR_ATTRIBUTE_READ_ONLY,
                "Tookan wrap/decrypt: CKA_DECRYPT TRUE after CKA_UNWRAP went off");
    }
}

/*  The symmetric attacks: one key that wraps and decrypts (wrap/decrypt),
 *  unwraps and encrypts (encrypt/unwrap, Clulow's trojan key), the
 *  weaker-key wrap, re-import as non-sensitive, sensitive-off,
 *  extractable-on, CKA_ALLOWED_MECHANISMS.  */
static void
s_aes_attacks (void)
{
    unsigned char k16 [16], k32 [32], blob [64];
    CK_OBJECT_HANDLE key, kek, big, sensitive, data;
    CK_ULONG blob_len = sizeof blob;
    CK_ATTRIBUTE readable [] = { { CKA_SENSITIVE, &no, 1 }, { CKA_EXTRACTABLE, &yes, 1 } };
    CK_ATTRIBUTE locked [] = { { CKA_SENSITIVE, &yes, 1 }, { CKA_EXTRACTABLE, &no, 1 } };
    RAND_bytes (k16, sizeof k16);
    RAND_bytes (k32, sizeof k32);
    STRICT (s_aes (k16, 16, 1, -1, -1, 1, NULL, 0, &key), CKR_TEMPLATE_INCONSISTENT,
            "Tookan wrap/decrypt: an AES key with CKA_WRAP and CKA_DECRYPT");
    STRICT (s_aes (k16, 16, -1, 1, 1, -1, NULL, 0, &key), CKR_TEMPLATE_INCONSISTENT,
            "Clulow trojan key / Tookan encrypt/unwrap: an AES key with CKA_UNWRAP and CKA_ENCRYPT");
    CHECK (s_aes (k16, 16, 1, 1, s_strict ? -1 : 0, s_strict ? -1 : 0, NULL, 0, &kek), "C_CreateObject (KEK)");
    STRICT (s_set (kek, CKA_DECRYPT, CK_TRUE), CKR_ATTRIBUTE_READ_ONLY,
            "Tookan wrap/decrypt: CKA_DECRYPT FALSE -> TRUE on the KEK");
    CHECK (s_aes (k32, 32, -1, -1, -1, -1, readable, 2, &big), "C_CreateObject (AES-256, readable)");
    STRICT (p11->C_WrapKey (s, &s_kw, kek, big, blob, &blob_len), CKR_WRAPPING_KEY_SIZE_RANGE,
            "Tookan weaker key: AES-256 wrapped under AES-128");
    CHECK (s_aes (k16, 16, -1, -1, -1, -1, readable, 2, &data), "C_CreateObject (AES-128, readable)");
    STRICT (s_set (data, CKA_WRAP, CK_TRUE), CKR_ATTRIBUTE_READ_ONLY, "a data key given CKA_WRAP");
    STRICT (s_set (data, CKA_UNWRAP, CK_TRUE), CKR_ATTRIBUTE_READ_ONLY, "a data key given CKA_UNWRAP");
    blob_len = sizeof blob;
    CHECK (p11->C_WrapKey (s, &s_kw, kek, data, blob, &blob_len), "C_WrapKey (AES-128 under AES-128)");
    static CK_OBJECT_CLASS klass = CKO_SECRET_KEY;
    static CK_KEY_TYPE type = CKK_AES;
    CK_ATTRIBUTE as_readable [] = {
        { CKA_CLASS, &klass, sizeof klass }, { CKA_KEY_TYPE, &type, sizeof type }, { CKA_SENSITIVE, &no, 1 },
    };
    STRICT (p11->C_UnwrapKey (s, &s_kw, kek, blob, blob_len, as_readable, 3, &key), CKR_TEMPLATE_INCONSISTENT,
            "Tookan wrap/unwrap: unwrapping as CKA_SENSITIVE FALSE");
    CHECK (s_aes (k16, 16, -1, -1, -1, -1, locked, 2, &sensitive), "C_CreateObject (AES-128, sensitive)");
    EXPECT (s_set (sensitive, CKA_SENSITIVE, CK_FALSE), CKR_ATTRIBUTE_READ_ONLY, "CKA_SENSITIVE TRUE -> FALSE");
    EXPECT (s_set (sensitive, CKA_EXTRACTABLE, CK_TRUE), CKR_ATTRIBUTE_READ_ONLY, "CKA_EXTRACTABLE FALSE -> TRUE");
    EXPECT (p11->C_WrapKey (s, &s_kw, kek, sensitive, blob, &blob_len), CKR_KEY_UNEXTRACTABLE,
            "wrapping a CKA_EXTRACTABLE FALSE key");
    CK_OBJECT_HANDLE sens_ext;
    CK_ATTRIBUTE sens_extractable [] = { { CKA_SENSITIVE, &yes, 1 }, { CKA_EXTRACTABLE, &yes, 1 } };
    CHECK (s_aes (k16, 16, -1, -1, -1, -1, sens_extractable, 2, &sens_ext), "C_CreateObject (sensitive, extractable)");
    blob_len = sizeof blob;
    STRICT (p11->C_WrapKey (s, &s_kw, kek, sens_ext, blob, &blob_len), CKR_KEY_NOT_WRAPPABLE,
            "Tookan wrap/decrypt: a sensitive key under an untrusted KEK");
    /*  CKA_ALLOWED_MECHANISMS, both policies: a token AES key for GCM only
        answers no ECB (ECB of a zero block is GCM's hash key).  */
    CK_MECHANISM_TYPE gcm_only [] = { CKM_AES_GCM };
    CK_ATTRIBUTE token_gcm [] = {
        { CKA_TOKEN, &yes, 1 }, { CKA_ALLOWED_MECHANISMS, gcm_only, sizeof gcm_only },
        { CKA_LABEL, "cs-attack-gcm", 13 },
    };
    CK_OBJECT_HANDLE gcm;
    CHECK (s_aes (k16, 16, -1, -1, -1, -1, token_gcm, 3, &gcm), "C_CreateObject (token AES, GCM only)");
    CK_MECHANISM ecb = { CKM_AES_ECB, NULL, 0 };
    EXPECT (p11->C_EncryptInit (s, &ecb, gcm), CKR_MECHANISM_INVALID, "CKM_AES_ECB with a GCM-only key");
    CK_ATTRIBUTE token_kek [] = { { CKA_TOKEN, &yes, 1 }, { CKA_LABEL, "cs-attack-kek", 13 } };
    CHECK (s_aes (k16, 16, 1, 1, s_strict ? -1 : 0, s_strict ? -1 : 0, token_kek, 2, &key), "C_CreateObject (token KEK)");
}

int
main (int argc, char **argv)
{
    if (argc != 6 || (strcmp (argv [4], "strict") && strcmp (argv [4], "spec"))) {
        fprintf (stderr, "usage: cs-attacks MODULE.so TOKEN PIN strict|spec DIR\n");
        return 2;
    }
    s_strict = strcmp (argv [4], "strict") == 0;
    s_dir = argv [5];
    void *dl = dlopen (argv [1], RTLD_NOW | RTLD_LOCAL);
    CK_C_GetFunctionList get = dl ? (CK_C_GetFunctionList) dlsym (dl, "C_GetFunctionList") : NULL;
    if (!get || get (&p11) != CKR_OK)
        s_fail ("cannot load the module");
    CHECK (p11->C_Initialize (NULL), "C_Initialize");
    CK_SLOT_ID slot = 0;
    CHECK (cs_test_slot (p11, argv [2], &slot), "the token's slot");
    CHECK (p11->C_OpenSession (slot, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &s), "C_OpenSession");
    CHECK (p11->C_Login (s, CKU_USER, (CK_UTF8CHAR_PTR) argv [3], strlen (argv [3])), "C_Login");
    s_rsa_attacks ();
    s_raw_attacks ();
    s_aes_attacks ();
    CHECK (p11->C_Logout (s), "C_Logout");
    CHECK (p11->C_Finalize (NULL), "C_Finalize");
    printf ("cs-attacks: every %s step answered as expected\n", argv [4]);
    return 0;
}
