/*  cs-context-login.c — keys with CKA_ALWAYS_AUTHENTICATE through the module
 *  under test (PKCS#11 2.40 §4.9, §5.6 C_Login with CKU_CONTEXT_SPECIFIC;
 *  docs/CONTRACTS.md "Context-specific login"):
 *    - a token P-256 key made with CKA_ALWAYS_AUTHENTICATE TRUE reads TRUE;
 *      C_Login (CKU_CONTEXT_SPECIFIC) without an operation is
 *      CKR_OPERATION_NOT_INITIALIZED; C_Sign after C_SignInit alone is
 *      CKR_USER_NOT_LOGGED_IN; a wrong PIN is CKR_PIN_INCORRECT; with the
 *      PIN the signature verifies (C_Verify, OpenSSL in the module); the
 *      next operation needs the PIN again; a key without the attribute
 *      signs with no context login;
 *    - a token RSA key (decrypt only) made likewise: C_Decrypt needs the
 *      context login, then gives the plaintext back;
 *    - no user login: CKR_USER_NOT_LOGGED_IN.
 *  It labels the keys cs-aa-ec, cs-aa-rsa and cs-plain-ec for the shell
 *  test's raw-wire checks.
 *
 *  usage: cs-context-login MODULE.so TOKEN PIN
 *  The module is dlopen'ed.  Prints one line per step; exit 0 when all pass.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <p11-kit/pkcs11.h>
#include "cs-test-client.h"
#include "cs-test-slot.h"

static CK_FUNCTION_LIST *p11;
static CK_SESSION_HANDLE s;
static CK_UTF8CHAR *s_pin;
static CK_ULONG s_pin_len;
static CK_BBOOL yes = CK_TRUE, no = CK_FALSE;

/*  A token P-256 pair labelled `label`, its private key with
 *  CKA_ALWAYS_AUTHENTICATE `always`.  */
static void
s_ec_pair (const char *label, CK_BBOOL always, CK_OBJECT_HANDLE *pub, CK_OBJECT_HANDLE *priv)
{
    static CK_BYTE p256 [] = { 0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07 };
    CK_MECHANISM gen = { CKM_EC_KEY_PAIR_GEN, NULL, 0 };
    CK_ATTRIBUTE pubt [] = { { CKA_TOKEN, &yes, 1 }, { CKA_VERIFY, &yes, 1 }, { CKA_EC_PARAMS, p256, sizeof p256 },
                             { CKA_LABEL, (void *) label, strlen (label) } };
    CK_ATTRIBUTE privt [] = { { CKA_TOKEN, &yes, 1 }, { CKA_SIGN, &yes, 1 }, { CKA_ALWAYS_AUTHENTICATE, &always, 1 },
                              { CKA_LABEL, (void *) label, strlen (label) } };
    CHECK (p11->C_GenerateKeyPair (s, &gen, pubt, 4, privt, 4, pub, priv), "C_GenerateKeyPair (P-256)");
}

static void
s_signing (void)
{
    CK_OBJECT_HANDLE pub, priv, plain_pub, plain;
    CK_MECHANISM ecdsa = { CKM_ECDSA, NULL, 0 };
    CK_BYTE digest [32], sig [64];
    CK_ULONG len = sizeof sig;
    CK_BBOOL value = CK_FALSE;
    for (int i = 0; i < 32; i++)
        digest [i] = (CK_BYTE) (i * 7 + 1);
    s_ec_pair ("cs-aa-ec", CK_TRUE, &pub, &priv);
    s_ec_pair ("cs-plain-ec", CK_FALSE, &plain_pub, &plain);
    CK_ATTRIBUTE read [] = { { CKA_ALWAYS_AUTHENTICATE, &value, sizeof value } };
    CHECK (p11->C_GetAttributeValue (s, priv, read, 1), "C_GetAttributeValue (CKA_ALWAYS_AUTHENTICATE)");
    if (value != CK_TRUE)
        cs_test_fail ("the key does not read CKA_ALWAYS_AUTHENTICATE TRUE");
    EXPECT (p11->C_Login (s, CKU_CONTEXT_SPECIFIC, s_pin, s_pin_len), CKR_OPERATION_NOT_INITIALIZED,
            "C_Login (CKU_CONTEXT_SPECIFIC) without an operation");
    CHECK (p11->C_SignInit (s, &ecdsa, priv), "C_SignInit");
    EXPECT (p11->C_Sign (s, digest, sizeof digest, sig, &len), CKR_USER_NOT_LOGGED_IN,
            "C_Sign without the context login");
    CHECK (p11->C_SignInit (s, &ecdsa, priv), "C_SignInit (again)");
    EXPECT (p11->C_Login (s, CKU_CONTEXT_SPECIFIC, (CK_UTF8CHAR_PTR) "0000", 4), CKR_PIN_INCORRECT,
            "C_Login (CKU_CONTEXT_SPECIFIC) with a wrong PIN");
    CHECK (p11->C_Login (s, CKU_CONTEXT_SPECIFIC, s_pin, s_pin_len), "C_Login (CKU_CONTEXT_SPECIFIC)");
    len = sizeof sig;
    CHECK (p11->C_Sign (s, digest, sizeof digest, sig, &len), "C_Sign after the context login");
    CHECK (p11->C_VerifyInit (s, &ecdsa, pub), "C_VerifyInit");
    CHECK (p11->C_Verify (s, digest, sizeof digest, sig, len), "C_Verify of the signature");
    CHECK (p11->C_SignInit (s, &ecdsa, priv), "C_SignInit (a second operation)");
    len = sizeof sig;
    EXPECT (p11->C_Sign (s, digest, sizeof digest, sig, &len), CKR_USER_NOT_LOGGED_IN,
            "C_Sign of a second operation without its own context login");
    CHECK (p11->C_SignInit (s, &ecdsa, plain), "C_SignInit (a key without the attribute)");
    EXPECT (p11->C_Login (s, CKU_CONTEXT_SPECIFIC, s_pin, s_pin_len), CKR_OPERATION_NOT_INITIALIZED,
            "C_Login (CKU_CONTEXT_SPECIFIC) for a key that needs none");
    len = sizeof sig;
    CHECK (p11->C_Sign (s, digest, sizeof digest, sig, &len), "C_Sign with a key without the attribute");
    printf ("P-256 with CKA_ALWAYS_AUTHENTICATE: C_Sign needs C_Login (CKU_CONTEXT_SPECIFIC) before each "
            "operation; wrong PIN refused; the signature verifies\n");
}

static void
s_decrypting (void)
{
    CK_MECHANISM gen = { CKM_RSA_PKCS_KEY_PAIR_GEN, NULL, 0 }, pkcs = { CKM_RSA_PKCS, NULL, 0 };
    CK_ULONG bits = 2048;
    CK_BYTE e [] = { 1, 0, 1 }, msg [] = "opened only with the PIN again", ct [256], back [256];
    CK_ULONG ct_len = sizeof ct, back_len = sizeof back;
    CK_OBJECT_HANDLE pub, priv;
    CK_ATTRIBUTE pubt [] = { { CKA_TOKEN, &yes, 1 }, { CKA_ENCRYPT, &yes, 1 }, { CKA_VERIFY, &no, 1 },
                             { CKA_MODULUS_BITS, &bits, sizeof bits }, { CKA_PUBLIC_EXPONENT, e, sizeof e },
                             { CKA_LABEL, "cs-aa-rsa", 9 } };
    CK_ATTRIBUTE privt [] = { { CKA_TOKEN, &yes, 1 }, { CKA_DECRYPT, &yes, 1 }, { CKA_SIGN, &no, 1 },
                              { CKA_ALWAYS_AUTHENTICATE, &yes, 1 }, { CKA_LABEL, "cs-aa-rsa", 9 } };
    CHECK (p11->C_GenerateKeyPair (s, &gen, pubt, 6, privt, 5, &pub, &priv), "C_GenerateKeyPair (RSA-2048)");
    CHECK (p11->C_EncryptInit (s, &pkcs, pub), "C_EncryptInit");
    CHECK (p11->C_Encrypt (s, msg, sizeof msg, ct, &ct_len), "C_Encrypt");
    CHECK (p11->C_DecryptInit (s, &pkcs, priv), "C_DecryptInit");
    EXPECT (p11->C_Decrypt (s, ct, ct_len, back, &back_len), CKR_USER_NOT_LOGGED_IN,
            "C_Decrypt without the context login");
    CHECK (p11->C_DecryptInit (s, &pkcs, priv), "C_DecryptInit (again)");
    CHECK (p11->C_Login (s, CKU_CONTEXT_SPECIFIC, s_pin, s_pin_len), "C_Login (CKU_CONTEXT_SPECIFIC)");
    back_len = sizeof back;
    CHECK (p11->C_Decrypt (s, ct, ct_len, back, &back_len), "C_Decrypt after the context login");
    if (back_len != sizeof msg || memcmp (back, msg, sizeof msg))
        cs_test_fail ("the decryption does not give the message back");
    printf ("RSA-2048 with CKA_ALWAYS_AUTHENTICATE: C_Decrypt needs the context login, then decrypts\n");
}

int
main (int argc, char **argv)
{
    if (argc != 4) {
        fprintf (stderr, "usage: cs-context-login MODULE.so TOKEN PIN\n");
        return 2;
    }
    CK_SLOT_ID slot = 0;
    p11 = cs_test_module (argv [1]);
    s_pin = (CK_UTF8CHAR *) argv [3];
    s_pin_len = strlen (argv [3]);
    CHECK (p11->C_Initialize (NULL), "C_Initialize");
    CHECK (cs_test_slot (p11, argv [2], &slot), "the token");
    CHECK (p11->C_OpenSession (slot, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &s), "C_OpenSession");
    EXPECT (p11->C_Login (s, CKU_CONTEXT_SPECIFIC, s_pin, s_pin_len), CKR_USER_NOT_LOGGED_IN,
            "C_Login (CKU_CONTEXT_SPECIFIC) without a user login");
    CHECK (p11->C_Login (s, CKU_USER, s_pin, s_pin_len), "C_Login");
    s_signing ();
    s_decrypting ();
    CHECK (p11->C_Logout (s), "C_Logout");
    CHECK (p11->C_Finalize (NULL), "C_Finalize");
    return 0;
}
