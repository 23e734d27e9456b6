/*  cs-attr-rules.c — the attribute rules of key objects (PKCS#11 2.40
 *  §4.4 to §4.10, common/cs_attr_rules.h) through any PKCS#11 module, for
 *  tests/integration/attr-rules.sh.
 *
 *  usage: cs-attr-rules MODULE.so TOKEN PIN EC-KEY.der MESSAGE-FILE SIG-PREFIX AES-KEY.bin
 *
 *  Imports the P-256 private key EC-KEY.der (PKCS#8 DER, made by the test
 *  with OpenSSL) twice with C_CreateObject: as a session object and as a
 *  token object (a server-held key), each CKA_SENSITIVE FALSE,
 *  CKA_EXTRACTABLE TRUE and CKA_ALLOWED_MECHANISMS { CKM_ECDSA }.  On each:
 *  CKA_ALWAYS_SENSITIVE / CKA_NEVER_EXTRACTABLE FALSE and stay FALSE after
 *  CKA_SENSITIVE goes TRUE and CKA_EXTRACTABLE FALSE; CKA_SENSITIVE FALSE
 *  and CKA_EXTRACTABLE TRUE again are CKR_ATTRIBUTE_READ_ONLY, in
 *  C_SetAttributeValue and C_CopyObject; C_GetAttributeValue of
 *  { CKA_LABEL, CKA_VALUE } is CKR_ATTRIBUTE_SENSITIVE with the label
 *  filled and the value's length CK_UNAVAILABLE_INFORMATION; the list is
 *  returned and read-only; C_SignInit with CKM_ECDSA_SHA256 is
 *  CKR_MECHANISM_INVALID; CKM_ECDSA signs the SHA-256 digest of
 *  MESSAGE-FILE, written DER-encoded to SIG-PREFIX.session.sig and
 *  SIG-PREFIX.token.sig for OpenSSL to verify with the test's PEM.  The
 *  session key copied to the token (C_CopyObject, CKA_TOKEN TRUE) keeps
 *  its rules.  The token keys are destroyed at the end.  An AES-256
 *  session key (value AES-KEY.bin) follows the same rules with
 *  CKA_ALLOWED_MECHANISMS { CKM_AES_CBC_PAD }; its ciphertext of
 *  MESSAGE-FILE (IV of zeros) goes to SIG-PREFIX.aes.ct for openssl enc.  Links only OpenSSL; the module is
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
#include <openssl/x509.h>
#include <p11-kit/pkcs11.h>
#include "cs-test-slot.h"

static CK_FUNCTION_LIST *p11;
static CK_BBOOL s_yes = CK_TRUE, s_no = CK_FALSE;

#define CHECK(call, what) do { CK_RV rv_ = (call); if (rv_ != CKR_OK) { \
    fprintf (stderr, "cs-attr-rules: %s: CK_RV 0x%lx\n", what, (unsigned long) rv_); \
    exit (1); } } while (0)

static void
s_fail (const char *what)
{
    fprintf (stderr, "cs-attr-rules: FAIL: %s\n", what);
    exit (1);
}

/*  The call must answer exactly `want`.  */
static void
s_expect (CK_RV got, CK_RV want, const char *kind, const char *what)
{
    if (got != want) {
        fprintf (stderr, "cs-attr-rules: FAIL: %s key: %s: CK_RV 0x%lx, expected 0x%lx\n", kind, what,
                 (unsigned long) got, (unsigned long) want);
        exit (1);
    }
    printf ("%s key: %s: CK_RV 0x%lx as expected\n", kind, what, (unsigned long) got);
}

static CK_RV
s_set_flag (CK_SESSION_HANDLE session, CK_OBJECT_HANDLE key, CK_ATTRIBUTE_TYPE type, CK_BBOOL *value)
{
    CK_ATTRIBUTE attr = { type, value, 1 };
    return p11->C_SetAttributeValue (session, key, &attr, 1);
}

static CK_BBOOL
s_get_flag (CK_SESSION_HANDLE session, CK_OBJECT_HANDLE key, CK_ATTRIBUTE_TYPE type, const char *what)
{
    CK_BBOOL value = 0xff;
    CK_ATTRIBUTE attr = { type, &value, 1 };
    CHECK (p11->C_GetAttributeValue (session, key, &attr, 1), what);
    return value;
}

/*  C_CreateObject of the P-256 private key with the rules' template.  */
static CK_OBJECT_HANDLE
s_create (CK_SESSION_HANDLE session, EVP_PKEY *pkey, bool token)
{
    static CK_BYTE p256 [] = { 0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07 };
    CK_OBJECT_CLASS klass = CKO_PRIVATE_KEY;
    CK_KEY_TYPE type = CKK_EC;
    CK_MECHANISM_TYPE allowed [] = { CKM_ECDSA };
    CK_BYTE d [32];
    BIGNUM *bn = NULL;
    if (EVP_PKEY_get_bn_param (pkey, OSSL_PKEY_PARAM_PRIV_KEY, &bn) != 1 || BN_bn2binpad (bn, d, 32) != 32)
        s_fail ("the key is not a P-256 private key");
    BN_clear_free (bn);
    CK_ATTRIBUTE tmpl [] = {
        { CKA_CLASS, &klass, sizeof klass }, { CKA_KEY_TYPE, &type, sizeof type },
        { CKA_TOKEN, token ? &s_yes : &s_no, 1 }, { CKA_PRIVATE, &s_yes, 1 }, { CKA_SIGN, &s_yes, 1 },
        { CKA_SENSITIVE, &s_no, 1 }, { CKA_EXTRACTABLE, &s_yes, 1 },
        { CKA_LABEL, "attr-rules", 10 }, { CKA_EC_PARAMS, p256, sizeof p256 }, { CKA_VALUE, d, sizeof d },
        { CKA_ALLOWED_MECHANISMS, allowed, sizeof allowed } };
    CK_OBJECT_HANDLE key;
    CHECK (p11->C_CreateObject (session, tmpl, sizeof tmpl / sizeof tmpl [0], &key), "C_CreateObject");
    memset (d, 0, sizeof d);
    return key;
}

/*  CKM_ECDSA over SHA-256 of msg; the DER ECDSA-Sig-Value (RFC 3279
 *  §2.2.3) written to path.  */
static void
s_sign_to (CK_SESSION_HANDLE session, CK_OBJECT_HANDLE key, const unsigned char *msg, size_t msg_len,
           const char *path)
{
    CK_MECHANISM mechanism = { CKM_ECDSA, NULL, 0 };
    CK_BYTE digest [32], sig [64], der [80];
    CK_ULONG len = sizeof sig;
    EVP_Digest (msg, msg_len, digest, NULL, EVP_sha256 (), NULL);
    CHECK (p11->C_SignInit (session, &mechanism, key), "C_SignInit (CKM_ECDSA)");
    CHECK (p11->C_Sign (session, digest, sizeof digest, sig, &len), "C_Sign (CKM_ECDSA)");
    if (len != 64)
        s_fail ("a P-256 signature is not 64 bytes");
    ECDSA_SIG *es = ECDSA_SIG_new ();
    ECDSA_SIG_set0 (es, BN_bin2bn (sig, 32, NULL), BN_bin2bn (sig + 32, 32, NULL));
    unsigned char *cursor = der;
    int der_len = i2d_ECDSA_SIG (es, &cursor);
    ECDSA_SIG_free (es);
    FILE *file = fopen (path, "wb");
    if (!file || fwrite (der, 1, (size_t) der_len, file) != (size_t) der_len || fclose (file))
        s_fail ("cannot write the signature");
}

/*  The rules on one key (kind "session" or "token").  */
static void
s_rules (CK_SESSION_HANDLE session, CK_OBJECT_HANDLE key, const char *kind, const unsigned char *msg,
         size_t msg_len, const char *sig_path)
{
    /*  Made not sensitive and extractable: the computed flags are FALSE.  */
    if (s_get_flag (session, key, CKA_ALWAYS_SENSITIVE, "CKA_ALWAYS_SENSITIVE") != CK_FALSE
    ||  s_get_flag (session, key, CKA_NEVER_EXTRACTABLE, "CKA_NEVER_EXTRACTABLE") != CK_FALSE)
        s_fail ("an imported, non-sensitive key claims CKA_ALWAYS_SENSITIVE or CKA_NEVER_EXTRACTABLE");
    /*  The list of allowed mechanisms comes back; it is read-only.  */
    CK_MECHANISM_TYPE mechs [4] = { 0 };
    CK_ATTRIBUTE allowed = { CKA_ALLOWED_MECHANISMS, mechs, sizeof mechs };
    CHECK (p11->C_GetAttributeValue (session, key, &allowed, 1), "C_GetAttributeValue (CKA_ALLOWED_MECHANISMS)");
    if (allowed.ulValueLen != sizeof mechs [0] || mechs [0] != CKM_ECDSA)
        s_fail ("CKA_ALLOWED_MECHANISMS is not { CKM_ECDSA }");
    printf ("%s key: CKA_ALLOWED_MECHANISMS = { CKM_ECDSA }\n", kind);
    allowed.ulValueLen = sizeof mechs;
    mechs [1] = CKM_ECDSA_SHA256;
    s_expect (p11->C_SetAttributeValue (session, key, &allowed, 1), CKR_ATTRIBUTE_READ_ONLY,
              kind, "C_SetAttributeValue (CKA_ALLOWED_MECHANISMS)");
    /*  CKA_SENSITIVE FALSE → TRUE, never back; CKA_ALWAYS_SENSITIVE stays FALSE.  */
    CHECK (s_set_flag (session, key, CKA_SENSITIVE, &s_yes), "C_SetAttributeValue (CKA_SENSITIVE TRUE)");
    if (s_get_flag (session, key, CKA_ALWAYS_SENSITIVE, "CKA_ALWAYS_SENSITIVE") != CK_FALSE)
        s_fail ("CKA_ALWAYS_SENSITIVE became TRUE after CKA_SENSITIVE did");
    printf ("%s key: CKA_SENSITIVE TRUE, CKA_ALWAYS_SENSITIVE still FALSE\n", kind);
    s_expect (s_set_flag (session, key, CKA_SENSITIVE, &s_no), CKR_ATTRIBUTE_READ_ONLY,
              kind, "C_SetAttributeValue (CKA_SENSITIVE FALSE after TRUE)");
    /*  CKA_EXTRACTABLE TRUE → FALSE, never back; CKA_NEVER_EXTRACTABLE stays FALSE.  */
    CHECK (s_set_flag (session, key, CKA_EXTRACTABLE, &s_no), "C_SetAttributeValue (CKA_EXTRACTABLE FALSE)");
    if (s_get_flag (session, key, CKA_NEVER_EXTRACTABLE, "CKA_NEVER_EXTRACTABLE") != CK_FALSE)
        s_fail ("CKA_NEVER_EXTRACTABLE became TRUE after CKA_EXTRACTABLE went FALSE");
    s_expect (s_set_flag (session, key, CKA_EXTRACTABLE, &s_yes), CKR_ATTRIBUTE_READ_ONLY,
              kind, "C_SetAttributeValue (CKA_EXTRACTABLE TRUE after FALSE)");
    s_expect (s_set_flag (session, key, CKA_ALWAYS_SENSITIVE, &s_yes), CKR_ATTRIBUTE_READ_ONLY,
              kind, "C_SetAttributeValue (CKA_ALWAYS_SENSITIVE)");
    /*  A copy cannot undo them.  */
    CK_OBJECT_HANDLE copy = CK_INVALID_HANDLE;
    CK_ATTRIBUTE insensitive = { CKA_SENSITIVE, &s_no, 1 }, extractable = { CKA_EXTRACTABLE, &s_yes, 1 };
    s_expect (p11->C_CopyObject (session, key, &insensitive, 1, &copy), CKR_ATTRIBUTE_READ_ONLY,
              kind, "C_CopyObject (CKA_SENSITIVE FALSE)");
    s_expect (p11->C_CopyObject (session, key, &extractable, 1, &copy), CKR_ATTRIBUTE_READ_ONLY,
              kind, "C_CopyObject (CKA_EXTRACTABLE TRUE)");
    /*  The value is sensitive now; the other entry is filled (§5.7).  */
    CK_BYTE label [32], value [64];
    CK_ATTRIBUTE get [] = { { CKA_LABEL, label, sizeof label }, { CKA_VALUE, value, sizeof value } };
    s_expect (p11->C_GetAttributeValue (session, key, get, 2), CKR_ATTRIBUTE_SENSITIVE,
              kind, "C_GetAttributeValue (CKA_LABEL, CKA_VALUE)");
    if (get [0].ulValueLen != 10 || memcmp (label, "attr-rules", 10) || get [1].ulValueLen != CK_UNAVAILABLE_INFORMATION)
        s_fail ("C_GetAttributeValue did not fill CKA_LABEL or gave a length for CKA_VALUE");
    /*  Only CKM_ECDSA: CKM_ECDSA_SHA256 is refused; CKM_ECDSA signs.  */
    CK_MECHANISM hashed = { CKM_ECDSA_SHA256, NULL, 0 };
    s_expect (p11->C_SignInit (session, &hashed, key), CKR_MECHANISM_INVALID,
              kind, "C_SignInit (CKM_ECDSA_SHA256, not allowed)");
    s_sign_to (session, key, msg, msg_len, sig_path);
    printf ("%s key: CKM_ECDSA signature written to %s\n", kind, sig_path);
}

/*  A session key copied to the token (an import by the broker) keeps its
 *  rules: CKA_SENSITIVE TRUE, CKA_ALWAYS_SENSITIVE FALSE (the broker
 *  computes it), CKA_ALLOWED_MECHANISMS enforced.  */
static void
s_copy_to_token (CK_SESSION_HANDLE session, CK_OBJECT_HANDLE key)
{
    CK_ATTRIBUTE to_token = { CKA_TOKEN, &s_yes, 1 };
    CK_OBJECT_HANDLE copy = CK_INVALID_HANDLE;
    CHECK (p11->C_CopyObject (session, key, &to_token, 1, &copy), "C_CopyObject (CKA_TOKEN TRUE)");
    if (s_get_flag (session, copy, CKA_TOKEN, "CKA_TOKEN") != CK_TRUE
    ||  s_get_flag (session, copy, CKA_SENSITIVE, "CKA_SENSITIVE") != CK_TRUE
    ||  s_get_flag (session, copy, CKA_ALWAYS_SENSITIVE, "CKA_ALWAYS_SENSITIVE") != CK_FALSE)
        s_fail ("the token copy lost CKA_SENSITIVE or claims CKA_ALWAYS_SENSITIVE");
    CK_MECHANISM hashed = { CKM_ECDSA_SHA256, NULL, 0 };
    s_expect (p11->C_SignInit (session, &hashed, copy), CKR_MECHANISM_INVALID,
              "token copy of the session", "C_SignInit (CKM_ECDSA_SHA256, not allowed)");
    CHECK (p11->C_DestroyObject (session, copy), "C_DestroyObject (copy)");
}

/*  An AES-256 session key (C_CreateObject, value from the test) under the
 *  same rules, CKA_ALLOWED_MECHANISMS { CKM_AES_CBC_PAD }: CKM_AES_ECB is
 *  refused, CKM_AES_CBC_PAD (IV of zeros) encrypts msg into ct_path for
 *  openssl enc; a template with a computed attribute or CKA_TRUSTED TRUE
 *  (user, not SO) makes no key.  */
static void
s_secret_rules (CK_SESSION_HANDLE session, const unsigned char *value, size_t value_len,
                const unsigned char *msg, size_t msg_len, const char *ct_path)
{
    const char *kind = "AES session";
    CK_OBJECT_CLASS klass = CKO_SECRET_KEY;
    CK_KEY_TYPE type = CKK_AES;
    CK_MECHANISM_TYPE allowed [] = { CKM_AES_CBC_PAD };
    CK_ATTRIBUTE tmpl [] = {
        { CKA_CLASS, &klass, sizeof klass }, { CKA_KEY_TYPE, &type, sizeof type },
        { CKA_TOKEN, &s_no, 1 }, { CKA_ENCRYPT, &s_yes, 1 }, { CKA_DECRYPT, &s_yes, 1 },
        { CKA_SENSITIVE, &s_no, 1 }, { CKA_EXTRACTABLE, &s_yes, 1 }, { CKA_LABEL, "attr-rules", 10 },
        { CKA_VALUE, (void *) value, value_len }, { CKA_ALLOWED_MECHANISMS, allowed, sizeof allowed },
        { CKA_TRUSTED, &s_yes, 1 } };
    CK_OBJECT_HANDLE key = CK_INVALID_HANDLE, copy = CK_INVALID_HANDLE;
    s_expect (p11->C_CreateObject (session, tmpl, 11, &key), CKR_ATTRIBUTE_READ_ONLY,
              kind, "C_CreateObject (CKA_TRUSTED TRUE by the user)");
    CHECK (p11->C_CreateObject (session, tmpl, 10, &key), "C_CreateObject (AES key)");
    CHECK (s_set_flag (session, key, CKA_SENSITIVE, &s_yes), "C_SetAttributeValue (CKA_SENSITIVE TRUE)");
    s_expect (s_set_flag (session, key, CKA_SENSITIVE, &s_no), CKR_ATTRIBUTE_READ_ONLY,
              kind, "C_SetAttributeValue (CKA_SENSITIVE FALSE after TRUE)");
    CHECK (s_set_flag (session, key, CKA_EXTRACTABLE, &s_no), "C_SetAttributeValue (CKA_EXTRACTABLE FALSE)");
    s_expect (s_set_flag (session, key, CKA_EXTRACTABLE, &s_yes), CKR_ATTRIBUTE_READ_ONLY,
              kind, "C_SetAttributeValue (CKA_EXTRACTABLE TRUE after FALSE)");
    if (s_get_flag (session, key, CKA_ALWAYS_SENSITIVE, "CKA_ALWAYS_SENSITIVE") != CK_FALSE
    ||  s_get_flag (session, key, CKA_NEVER_EXTRACTABLE, "CKA_NEVER_EXTRACTABLE") != CK_FALSE)
        s_fail ("an imported AES key claims CKA_ALWAYS_SENSITIVE or CKA_NEVER_EXTRACTABLE");
    CK_ATTRIBUTE insensitive = { CKA_SENSITIVE, &s_no, 1 };
    s_expect (p11->C_CopyObject (session, key, &insensitive, 1, &copy), CKR_ATTRIBUTE_READ_ONLY,
              kind, "C_CopyObject (CKA_SENSITIVE FALSE)");
    CK_BYTE back [64];
    CK_ATTRIBUTE get = { CKA_VALUE, back, sizeof back };
    s_expect (p11->C_GetAttributeValue (session, key, &get, 1), CKR_ATTRIBUTE_SENSITIVE,
              kind, "C_GetAttributeValue (CKA_VALUE)");
    CK_BYTE iv [16] = { 0 }, ct [4096 + 16];
    CK_MECHANISM ecb = { CKM_AES_ECB, NULL, 0 }, cbc = { CKM_AES_CBC_PAD, iv, sizeof iv };
    s_expect (p11->C_EncryptInit (session, &ecb, key), CKR_MECHANISM_INVALID,
              kind, "C_EncryptInit (CKM_AES_ECB, not allowed)");
    CK_ULONG ct_len = sizeof ct;
    if (msg_len > 4096)
        s_fail ("the message is over 4096 bytes");
    CHECK (p11->C_EncryptInit (session, &cbc, key), "C_EncryptInit (CKM_AES_CBC_PAD)");
    CHECK (p11->C_Encrypt (session, (CK_BYTE_PTR) msg, msg_len, ct, &ct_len), "C_Encrypt (CKM_AES_CBC_PAD)");
    FILE *file = fopen (ct_path, "wb");
    if (!file || fwrite (ct, 1, ct_len, file) != ct_len || fclose (file))
        s_fail ("cannot write the ciphertext");
    printf ("%s key: CKM_AES_CBC_PAD ciphertext written to %s\n", kind, ct_path);
    CHECK (p11->C_DestroyObject (session, key), "C_DestroyObject (AES key)");
    /*  C_GenerateKey: computed attributes are the token's.  */
    CK_ULONG len = 32;
    CK_MECHANISM gen = { CKM_AES_KEY_GEN, NULL, 0 };
    CK_ATTRIBUTE gen_tmpl [] = { { CKA_VALUE_LEN, &len, sizeof len }, { CKA_ALWAYS_SENSITIVE, &s_yes, 1 } };
    s_expect (p11->C_GenerateKey (session, &gen, gen_tmpl, 2, &key), CKR_ATTRIBUTE_READ_ONLY,
              "generated AES", "C_GenerateKey (CKA_ALWAYS_SENSITIVE in the template)");
}

static unsigned char *
s_read (const char *path, size_t *len_p)
{
    FILE *file = fopen (path, "rb");
    static unsigned char buf [65536];
    if (!file)
        s_fail ("cannot open an input file");
    *len_p = fread (buf, 1, sizeof buf, file);
    fclose (file);
    return buf;
}

int
main (int argc, char **argv)
{
    if (argc != 8) {
        fprintf (stderr, "usage: cs-attr-rules MODULE.so TOKEN PIN EC-KEY.der MESSAGE-FILE SIG-PREFIX "
                 "AES-KEY.bin\n");
        return 2;
    }
    void *dl = dlopen (argv [1], RTLD_NOW | RTLD_LOCAL);
    CK_C_GetFunctionList get = dl ? (CK_C_GetFunctionList) dlsym (dl, "C_GetFunctionList") : NULL;
    if (!get || get (&p11) != CKR_OK)
        s_fail ("cannot load the module");
    CHECK (p11->C_Initialize (NULL), "C_Initialize");
    CK_SLOT_ID slot = 0;
    CK_RV rv = cs_test_slot (p11, argv [2], &slot);
    if (rv == CKR_TOKEN_NOT_PRESENT)
        s_fail ("no token with that label");
    CHECK (rv, "C_GetSlotList");
    CK_SESSION_HANDLE session;
    CHECK (p11->C_OpenSession (slot, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &session), "C_OpenSession");
    CHECK (p11->C_Login (session, CKU_USER, (CK_UTF8CHAR_PTR) argv [3], strlen (argv [3])), "C_Login");

    size_t key_len = 0, msg_len = 0;
    const unsigned char *der = s_read (argv [4], &key_len);
    EVP_PKEY *pkey = d2i_PrivateKey (EVP_PKEY_EC, NULL, &der, (long) key_len);
    if (!pkey)
        s_fail ("EC-KEY.der is not an EC private key (PKCS#8 DER)");
    unsigned char *msg = s_read (argv [5], &msg_len);
    char path [4096];
    static const bool tokens [] = { false, true };
    for (int i = 0; i < 2; i++) {
        const char *kind = tokens [i] ? "token" : "session";
        CK_OBJECT_HANDLE key = s_create (session, pkey, tokens [i]);
        snprintf (path, sizeof path, "%s.%s.sig", argv [6], kind);
        s_rules (session, key, kind, msg, msg_len, path);
        if (!tokens [i])
            s_copy_to_token (session, key);
        CHECK (p11->C_DestroyObject (session, key), "C_DestroyObject");
    }
    EVP_PKEY_free (pkey);
    static unsigned char aes [32];
    size_t aes_len = 0;
    memcpy (aes, s_read (argv [7], &aes_len), sizeof aes);
    if (aes_len != 32)
        s_fail ("AES-KEY.bin is not 32 bytes");
    msg = s_read (argv [5], &msg_len);
    snprintf (path, sizeof path, "%s.aes.ct", argv [6]);
    s_secret_rules (session, aes, aes_len, msg, msg_len, path);
    memset (aes, 0, sizeof aes);
    p11->C_Logout (session);
    p11->C_CloseSession (session);
    p11->C_Finalize (NULL);
    printf ("ok\n");
    return 0;
}
