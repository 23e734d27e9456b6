/*  cs-copy.c — C_CopyObject of every kind of token object through the module
 *  under test (PKCS#11 2.40 §5.7), each copy checked by what it does:
 *    - a token AES key made without a label, copied with a new CKA_LABEL:
 *      the copy has the label, encrypts to the original's ciphertext
 *      (AES-CBC-PAD), and the original keeps no label (the broker once freed
 *      the absent label of the row it copied: a crash any tenant user could
 *      cause with a standard call);
 *    - a token generic secret (HMAC-SHA256: the copy's MAC equals the
 *      original's), a token EC key pair (the private copy signs, the
 *      original public key verifies with OpenSSL in the module), a token
 *      data object (same CKA_VALUE);
 *    - CKA_COPYABLE FALSE: CKR_ACTION_PROHIBITED; a token secret key copied
 *      into a session object: CKR_TEMPLATE_INCONSISTENT (its value stays
 *      with the broker);
 *    - the session is still served after all of it (the broker is alive).
 *
 *  usage: cs-copy MODULE.so TOKEN PIN
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
static CK_BBOOL yes = CK_TRUE, no = CK_FALSE;

/*  C_CopyObject of `object` with CKA_LABEL `label`; checks the copy's label.  */
static CK_OBJECT_HANDLE
s_copy (CK_OBJECT_HANDLE object, const char *label)
{
    CK_ATTRIBUTE tmpl [] = { { CKA_LABEL, (void *) label, strlen (label) } };
    CK_OBJECT_HANDLE copy = 0;
    char got [64] = "";
    CHECK (p11->C_CopyObject (s, object, tmpl, 1, &copy), "C_CopyObject");
    CK_ATTRIBUTE read [] = { { CKA_LABEL, got, sizeof got - 1 } };
    CHECK (p11->C_GetAttributeValue (s, copy, read, 1), "C_GetAttributeValue (the copy's CKA_LABEL)");
    if (read [0].ulValueLen != strlen (label) || memcmp (got, label, strlen (label)))
        cs_test_fail ("the copy does not have its new label");
    return copy;
}

/*  The output of one single-part operation (init + run) with `key`.  */
static CK_ULONG
s_run (CK_RV (*init) (CK_SESSION_HANDLE, CK_MECHANISM_PTR, CK_OBJECT_HANDLE),
       CK_RV (*run) (CK_SESSION_HANDLE, CK_BYTE_PTR, CK_ULONG, CK_BYTE_PTR, CK_ULONG_PTR),
       CK_MECHANISM *mech, CK_OBJECT_HANDLE key, CK_BYTE *in, CK_ULONG n, CK_BYTE *out, const char *what)
{
    CK_ULONG len = 256;
    CHECK (init (s, mech, key), what);
    CHECK (run (s, in, n, out, &len), what);
    return len;
}

static void
s_secret_keys (void)
{
    CK_OBJECT_CLASS sk = CKO_SECRET_KEY;
    CK_KEY_TYPE aes = CKK_AES, gen = CKK_GENERIC_SECRET;
    CK_ULONG len32 = 32;
    CK_MECHANISM kg = { CKM_AES_KEY_GEN, NULL, 0 };
    CK_BYTE iv [16] = { 3 }, msg [40] = "copied keys do what their originals do", a [256], b [256];
    CK_MECHANISM cbc = { CKM_AES_CBC_PAD, iv, sizeof iv }, hmac = { CKM_SHA256_HMAC, NULL, 0 };
    CK_ATTRIBUTE t [] = {
        { CKA_CLASS, &sk, sizeof sk }, { CKA_KEY_TYPE, &aes, sizeof aes }, { CKA_VALUE_LEN, &len32, sizeof len32 },
        { CKA_TOKEN, &yes, 1 }, { CKA_ENCRYPT, &yes, 1 }, { CKA_DECRYPT, &yes, 1 },
    };
    CK_OBJECT_HANDLE k, c;
    CHECK (p11->C_GenerateKey (s, &kg, t, 6, &k), "C_GenerateKey (token AES, no label)");
    c = s_copy (k, "aes-copy");
    CK_ULONG la = s_run (p11->C_EncryptInit, p11->C_Encrypt, &cbc, k, msg, sizeof msg, a, "encrypt (original)");
    CK_ULONG lb = s_run (p11->C_EncryptInit, p11->C_Encrypt, &cbc, c, msg, sizeof msg, b, "encrypt (copy)");
    if (la != lb || memcmp (a, b, la))
        cs_test_fail ("the AES copy encrypts to another ciphertext");
    char label [8];
    CK_ATTRIBUTE read [] = { { CKA_LABEL, label, sizeof label } };
    CHECK (p11->C_GetAttributeValue (s, k, read, 1), "C_GetAttributeValue (the original's CKA_LABEL)");
    if (read [0].ulValueLen != 0)
        cs_test_fail ("the original got a label");
    CK_ATTRIBUTE to_session [] = { { CKA_TOKEN, &no, 1 } };
    EXPECT (p11->C_CopyObject (s, k, to_session, 1, &c), CKR_TEMPLATE_INCONSISTENT,
            "C_CopyObject (a token secret key into a session object)");
    printf ("token AES key without a label: copied with a label, same ciphertext; no session copy\n");
    CK_BYTE value [32];
    memset (value, 0x42, sizeof value);
    CK_ATTRIBUTE g [] = {
        { CKA_CLASS, &sk, sizeof sk }, { CKA_KEY_TYPE, &gen, sizeof gen }, { CKA_VALUE, value, sizeof value },
        { CKA_TOKEN, &yes, 1 }, { CKA_SIGN, &yes, 1 }, { CKA_VERIFY, &yes, 1 }, { CKA_COPYABLE, &no, 1 },
    };
    CHECK (p11->C_CreateObject (s, g, 6, &k), "C_CreateObject (token generic secret)");
    c = s_copy (k, "hmac-copy");
    la = s_run (p11->C_SignInit, p11->C_Sign, &hmac, k, msg, sizeof msg, a, "HMAC (original)");
    lb = s_run (p11->C_SignInit, p11->C_Sign, &hmac, c, msg, sizeof msg, b, "HMAC (copy)");
    if (la != 32 || la != lb || memcmp (a, b, la))
        cs_test_fail ("the generic secret's copy MACs differently");
    CHECK (p11->C_CreateObject (s, g, 7, &k), "C_CreateObject (token generic secret, not copyable)");
    EXPECT (p11->C_CopyObject (s, k, read, 0, &c), CKR_ACTION_PROHIBITED, "C_CopyObject (CKA_COPYABLE FALSE)");
    printf ("token generic secret: the copy's HMAC equals the original's; CKA_COPYABLE FALSE is refused\n");
}

static void
s_key_pair_and_data (void)
{
    static CK_BYTE p256 [] = { 0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07 };
    CK_MECHANISM ec = { CKM_EC_KEY_PAIR_GEN, NULL, 0 }, ecdsa = { CKM_ECDSA_SHA256, NULL, 0 };
    CK_ATTRIBUTE pubt [] = { { CKA_TOKEN, &yes, 1 }, { CKA_VERIFY, &yes, 1 }, { CKA_EC_PARAMS, p256, sizeof p256 } };
    CK_ATTRIBUTE privt [] = { { CKA_TOKEN, &yes, 1 }, { CKA_SIGN, &yes, 1 }, { CKA_PRIVATE, &yes, 1 } };
    CK_OBJECT_HANDLE pub, priv, c;
    CK_BYTE msg [] = "signed by a copy", sig [256];
    CHECK (p11->C_GenerateKeyPair (s, &ec, pubt, 3, privt, 3, &pub, &priv), "C_GenerateKeyPair (token P-256)");
    c = s_copy (priv, "ec-copy");
    CK_ULONG len = s_run (p11->C_SignInit, p11->C_Sign, &ecdsa, c, msg, sizeof msg, sig, "sign (private copy)");
    CHECK (p11->C_VerifyInit (s, &ecdsa, pub), "C_VerifyInit (original public key)");
    CHECK (p11->C_Verify (s, msg, sizeof msg, sig, len), "C_Verify of the copy's signature");
    s_copy (pub, "ec-pub-copy");
    printf ("token P-256 pair: the private copy's signature verifies with the original public key\n");
    CK_OBJECT_CLASS dc = CKO_DATA;
    CK_ATTRIBUTE dt [] = { { CKA_CLASS, &dc, sizeof dc }, { CKA_TOKEN, &yes, 1 }, { CKA_VALUE, "hello", 5 } };
    CK_OBJECT_HANDLE d;
    char value [8];
    CHECK (p11->C_CreateObject (s, dt, 3, &d), "C_CreateObject (token data object)");
    c = s_copy (d, "data-copy");
    CK_ATTRIBUTE read [] = { { CKA_VALUE, value, sizeof value } };
    CHECK (p11->C_GetAttributeValue (s, c, read, 1), "C_GetAttributeValue (the data copy's CKA_VALUE)");
    if (read [0].ulValueLen != 5 || memcmp (value, "hello", 5))
        cs_test_fail ("the data object's copy has another value");
    printf ("token data object: the copy holds the same value\n");
}

int
main (int argc, char **argv)
{
    if (argc != 4) {
        fprintf (stderr, "usage: cs-copy MODULE.so TOKEN PIN\n");
        return 2;
    }
    CK_SLOT_ID slot = 0;
    p11 = cs_test_module (argv [1]);
    CHECK (p11->C_Initialize (NULL), "C_Initialize");
    CHECK (cs_test_slot (p11, argv [2], &slot), "the token");
    CHECK (p11->C_OpenSession (slot, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &s), "C_OpenSession");
    CHECK (p11->C_Login (s, CKU_USER, (CK_UTF8CHAR_PTR) argv [2 + 1], strlen (argv [3])), "C_Login");
    s_secret_keys ();
    s_key_pair_and_data ();
    CK_SESSION_INFO info;
    CHECK (p11->C_GetSessionInfo (s, &info), "C_GetSessionInfo");
    CK_BYTE random [16];
    CHECK (p11->C_GenerateRandom (s, random, sizeof random), "C_GenerateRandom (the broker still serves)");
    CHECK (p11->C_Logout (s), "C_Logout");
    CHECK (p11->C_Finalize (NULL), "C_Finalize");
    return 0;
}
