/*  cs-pq-kem — the secret key of an ML-KEM encapsulation or decapsulation
 *  through the module is a secret key like any other (issue #23,
 *  tests/integration/pq-keys.sh): it MACs (CKM_SHA256_HMAC) and encrypts
 *  (CKM_AES_GCM) on the broker's boards, and OpenSSL, given the same secret
 *  read from an extractable twin, computes the same MAC and decrypts the
 *  same ciphertext; its attributes are those PKCS#11 3.2 gives a new key
 *  (CKA_SENSITIVE TRUE by default, CKA_VALUE then unreadable,
 *  CKA_ALWAYS_SENSITIVE, CKA_NEVER_EXTRACTABLE, CKA_LOCAL FALSE); the
 *  ciphertext length query; CKA_TOKEN TRUE refused.  Then session
 *  (per-request) ML-KEM and ML-DSA pairs: a KEM round trip, a signature
 *  that verifies and a changed one that does not.
 *
 *  cs-pq-kem MODULE TOKEN PIN LABEL   (LABEL: an ML-KEM-768 token key pair)
 *
 *  Prints one line per step; exit 0 when every step gave what it should,
 *  1 at the first that did not, 2 on bad usage or when the module cannot
 *  be loaded.
 */
#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include "cs_p11_3.h"
#include "cryptoserver/pkcs11v.h"
#include "cs-test-slot.h"

static CK_FUNCTION_LIST_3_2 *s_p11;
static CK_SESSION_HANDLE s_session;

#define S_CHECK(what, got, want) \
    do { CK_RV s_got = (got); \
         if (s_got != (want)) { printf ("cs-pq-kem: %s: 0x%lx, expected 0x%lx\n", what, s_got, (CK_RV) (want)); \
                                return 1; } \
         printf ("cs-pq-kem: %s: ok\n", what); } while (0)

/*  The object of `klass` labelled `label`, or CK_INVALID_HANDLE.  */
static CK_OBJECT_HANDLE
s_find (CK_OBJECT_CLASS klass, const char *label)
{
    CK_ATTRIBUTE tmpl [] = { { CKA_CLASS, &klass, sizeof klass }, { CKA_LABEL, (void *) label, strlen (label) } };
    CK_OBJECT_HANDLE object = CK_INVALID_HANDLE;
    CK_ULONG found = 0;
    if (s_p11->C_FindObjectsInit (s_session, tmpl, 2) == CKR_OK)
        s_p11->C_FindObjects (s_session, &object, 1, &found);
    s_p11->C_FindObjectsFinal (s_session);
    return found ? object : CK_INVALID_HANDLE;
}

/*  One CK_BBOOL attribute of `object`, or -1.  */
static int
s_flag (CK_OBJECT_HANDLE object, CK_ATTRIBUTE_TYPE type)
{
    CK_BBOOL value = 2;
    CK_ATTRIBUTE attr = { type, &value, 1 };
    return s_p11->C_GetAttributeValue (s_session, object, &attr, 1) == CKR_OK ? value : -1;
}

static int
s_load (const char *module, const char *token, const char *pin)
{
    CK_SLOT_ID slot;
    CK_C_INITIALIZE_ARGS args = { .flags = CKF_OS_LOCKING_OK };
    if (!(s_p11 = cs_test_interface_3_2 (module))) {
        printf ("cs-pq-kem: cannot load the 3.2 interface of %s\n", module);
        return 2;
    }
    if (s_p11->C_Initialize (&args) != CKR_OK || cs_test_slot ((CK_FUNCTION_LIST *) s_p11, token, &slot) != CKR_OK
    ||  s_p11->C_OpenSession (slot, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &s_session) != CKR_OK
    ||  s_p11->C_Login (s_session, CKU_USER, (CK_UTF8CHAR *) pin, strlen (pin)) != CKR_OK) {
        printf ("cs-pq-kem: cannot open a logged-in session on token %s\n", token);
        return 2;
    }
    return 0;
}

/*  AES-256-GCM decryption with OpenSSL (12-byte IV, 16-byte tag at the end).  */
static bool
s_gcm_open (const unsigned char *key, const unsigned char *iv, const unsigned char *in, int len,
            unsigned char *out)
{
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new ();
    int n = 0, m = 0;
    bool ok = ctx && len >= 16 && EVP_DecryptInit_ex (ctx, EVP_aes_256_gcm (), NULL, key, iv)
           && EVP_DecryptUpdate (ctx, out, &n, in, len - 16)
           && EVP_CIPHER_CTX_ctrl (ctx, EVP_CTRL_GCM_SET_TAG, 16, (void *) (in + len - 16))
           && EVP_DecryptFinal_ex (ctx, out + n, &m) == 1;
    EVP_CIPHER_CTX_free (ctx);
    return ok;
}

/*  Session (per-request) key pairs: the module holds the private key and
 *  sends it with each job (docs/DESIGN.md §1).  An ML-KEM-512 pair
 *  decapsulates what it encapsulated; an ML-DSA-44 pair signs (with a
 *  context) and its signature verifies, a changed one does not.  */
static int
s_session_pairs (void)
{
    CK_ULONG kem_set = CKP_ML_KEM_512, dsa_set = CKP_ML_DSA_44, ct_len = 1568, sig_len = 2420;
    CK_BBOOL yes = CK_TRUE, no = CK_FALSE;
    CK_OBJECT_CLASS secret = CKO_SECRET_KEY;
    CK_KEY_TYPE generic = CKK_GENERIC_SECRET;
    CK_ATTRIBUTE kem_pub [] = { { CKA_TOKEN, &no, 1 }, { CKA_PARAMETER_SET, &kem_set, sizeof kem_set } };
    CK_ATTRIBUTE dsa_pub [] = { { CKA_TOKEN, &no, 1 }, { CKA_PARAMETER_SET, &dsa_set, sizeof dsa_set } };
    CK_ATTRIBUTE priv [] = { { CKA_TOKEN, &no, 1 } };
    CK_ATTRIBUTE twin [] = { { CKA_CLASS, &secret, sizeof secret }, { CKA_KEY_TYPE, &generic, sizeof generic },
                             { CKA_SENSITIVE, &no, 1 }, { CKA_EXTRACTABLE, &yes, 1 } };
    CK_MECHANISM kem_gen = { CKM_ML_KEM_KEY_PAIR_GEN, NULL, 0 }, dsa_gen = { CKM_ML_DSA_KEY_PAIR_GEN, NULL, 0 };
    CK_MECHANISM kem = { CKM_ML_KEM, NULL, 0 };
    unsigned char ctx [] = "session", msg [] = "a per-request ML-DSA key", ct [1568], sig [2420], a [32], b [32];
    CK_SIGN_ADDITIONAL_CONTEXT param = { CKH_HEDGE_REQUIRED, ctx, sizeof ctx - 1 };
    CK_MECHANISM dsa = { CKM_ML_DSA, &param, sizeof param };
    CK_OBJECT_HANDLE pub, prv, k1, k2;
    CK_ATTRIBUTE read1 = { CKA_VALUE, a, sizeof a }, read2 = { CKA_VALUE, b, sizeof b };
    S_CHECK ("session ML-KEM-512 pair", s_p11->C_GenerateKeyPair (s_session, &kem_gen, kem_pub, 2, priv, 1, &pub, &prv),
             CKR_OK);
    S_CHECK ("its C_EncapsulateKey", s_p11->C_EncapsulateKey (s_session, &kem, pub, twin, 4, ct, &ct_len, &k1), CKR_OK);
    S_CHECK ("its C_DecapsulateKey (the key travels)", s_p11->C_DecapsulateKey (s_session, &kem, prv, twin, 4, ct,
                                                                                 ct_len, &k2), CKR_OK);
    S_CHECK ("both secrets read", s_p11->C_GetAttributeValue (s_session, k1, &read1, 1)
                                  | s_p11->C_GetAttributeValue (s_session, k2, &read2, 1), CKR_OK);
    S_CHECK ("the same secret", (CK_RV) (memcmp (a, b, 32) == 0), 1);
    OPENSSL_cleanse (a, sizeof a);
    OPENSSL_cleanse (b, sizeof b);
    S_CHECK ("session ML-DSA-44 pair", s_p11->C_GenerateKeyPair (s_session, &dsa_gen, dsa_pub, 2, priv, 1, &pub, &prv),
             CKR_OK);
    S_CHECK ("C_SignInit with a context", s_p11->C_SignInit (s_session, &dsa, prv), CKR_OK);
    S_CHECK ("C_Sign (checked by the broker with the public key the board derives)",
             s_p11->C_Sign (s_session, msg, sizeof msg, sig, &sig_len), CKR_OK);
    S_CHECK ("C_VerifyInit", s_p11->C_VerifyInit (s_session, &dsa, pub), CKR_OK);
    S_CHECK ("C_Verify", s_p11->C_Verify (s_session, msg, sizeof msg, sig, sig_len), CKR_OK);
    sig [100] ^= 1;
    S_CHECK ("C_VerifyInit", s_p11->C_VerifyInit (s_session, &dsa, pub), CKR_OK);
    S_CHECK ("C_Verify of a changed signature", s_p11->C_Verify (s_session, msg, sizeof msg, sig, sig_len),
             CKR_SIGNATURE_INVALID);
    return 0;
}

int
main (int argc, char **argv)
{
    if (argc != 5) {
        fprintf (stderr, "usage: cs-pq-kem MODULE TOKEN PIN LABEL\n");
        return 2;
    }
    int status = s_load (argv [1], argv [2], argv [3]);
    if (status)
        return status;
    CK_OBJECT_HANDLE pub = s_find (CKO_PUBLIC_KEY, argv [4]), priv = s_find (CKO_PRIVATE_KEY, argv [4]);
    if (pub == CK_INVALID_HANDLE || priv == CK_INVALID_HANDLE) {
        printf ("cs-pq-kem: no key pair %s\n", argv [4]);
        return 1;
    }
    CK_MECHANISM kem = { CKM_ML_KEM, NULL, 0 };
    CK_OBJECT_CLASS secret = CKO_SECRET_KEY;
    CK_KEY_TYPE generic = CKK_GENERIC_SECRET, aes = CKK_AES;
    CK_ULONG len32 = 32, ct_len = 0;
    CK_BBOOL yes = CK_TRUE, no = CK_FALSE;
    unsigned char ct [1568], value [64], data [] = "the KEM secret is an ordinary secret key", mac [32], mac2 [32];
    CK_OBJECT_HANDLE hmac_key, aes_key, twin, unused;
    /*  The length query, then a sensitive HMAC key (the defaults).  */
    CK_ATTRIBUTE hmac_tmpl [] = { { CKA_CLASS, &secret, sizeof secret }, { CKA_KEY_TYPE, &generic, sizeof generic },
                                  { CKA_SIGN, &yes, 1 } };
    S_CHECK ("C_EncapsulateKey length query", s_p11->C_EncapsulateKey (s_session, &kem, pub, hmac_tmpl, 3, NULL,
                                                                        &ct_len, &unused), CKR_OK);
    S_CHECK ("ciphertext length 1088 (ML-KEM-768)", ct_len, 1088);
    ct_len = 100;
    S_CHECK ("C_EncapsulateKey, short buffer", s_p11->C_EncapsulateKey (s_session, &kem, pub, hmac_tmpl, 3, ct,
                                                                         &ct_len, &unused), CKR_BUFFER_TOO_SMALL);
    ct_len = sizeof ct;
    S_CHECK ("C_EncapsulateKey", s_p11->C_EncapsulateKey (s_session, &kem, pub, hmac_tmpl, 3, ct, &ct_len, &hmac_key),
             CKR_OK);
    CK_ATTRIBUTE read = { CKA_VALUE, value, sizeof value };
    S_CHECK ("CKA_VALUE of the sensitive secret", s_p11->C_GetAttributeValue (s_session, hmac_key, &read, 1),
             CKR_ATTRIBUTE_SENSITIVE);
    S_CHECK ("its CKA_SENSITIVE, CKA_EXTRACTABLE, CKA_ALWAYS_SENSITIVE, CKA_NEVER_EXTRACTABLE, CKA_LOCAL",
             (CK_RV) (s_flag (hmac_key, CKA_SENSITIVE) << 4 | s_flag (hmac_key, CKA_EXTRACTABLE) << 3
                      | s_flag (hmac_key, CKA_ALWAYS_SENSITIVE) << 2 | s_flag (hmac_key, CKA_NEVER_EXTRACTABLE) << 1
                      | s_flag (hmac_key, CKA_LOCAL)), 0x16);
    /*  An AES key and an extractable twin of the same secret, by decapsulation.  */
    CK_ATTRIBUTE aes_tmpl [] = { { CKA_CLASS, &secret, sizeof secret }, { CKA_KEY_TYPE, &aes, sizeof aes },
                                 { CKA_VALUE_LEN, &len32, sizeof len32 }, { CKA_ENCRYPT, &yes, 1 },
                                 { CKA_DECRYPT, &yes, 1 } };
    CK_ATTRIBUTE twin_tmpl [] = { { CKA_CLASS, &secret, sizeof secret }, { CKA_KEY_TYPE, &generic, sizeof generic },
                                  { CKA_SENSITIVE, &no, 1 }, { CKA_EXTRACTABLE, &yes, 1 } };
    CK_ATTRIBUTE token_tmpl [] = { { CKA_CLASS, &secret, sizeof secret }, { CKA_TOKEN, &yes, 1 } };
    S_CHECK ("C_DecapsulateKey to an AES key", s_p11->C_DecapsulateKey (s_session, &kem, priv, aes_tmpl, 5, ct, ct_len,
                                                                         &aes_key), CKR_OK);
    S_CHECK ("C_DecapsulateKey to an extractable twin", s_p11->C_DecapsulateKey (s_session, &kem, priv, twin_tmpl, 4,
                                                                                  ct, ct_len, &twin), CKR_OK);
    S_CHECK ("C_DecapsulateKey with CKA_TOKEN TRUE", s_p11->C_DecapsulateKey (s_session, &kem, priv, token_tmpl, 2,
                                                                               ct, ct_len, &unused),
             CKR_ATTRIBUTE_VALUE_INVALID);
    read.ulValueLen = sizeof value;
    S_CHECK ("the twin's CKA_VALUE", s_p11->C_GetAttributeValue (s_session, twin, &read, 1), CKR_OK);
    S_CHECK ("32 bytes", read.ulValueLen, 32);
    S_CHECK ("the twin is not CKA_ALWAYS_SENSITIVE", (CK_RV) s_flag (twin, CKA_ALWAYS_SENSITIVE), 0);
    /*  HMAC-SHA256 on the board = OpenSSL's with the secret.  */
    CK_MECHANISM hmac = { CKM_SHA256_HMAC, NULL, 0 };
    CK_ULONG mac_len = sizeof mac;
    unsigned int mac2_len = 0;
    S_CHECK ("C_SignInit CKM_SHA256_HMAC", s_p11->C_SignInit (s_session, &hmac, hmac_key), CKR_OK);
    S_CHECK ("C_Sign", s_p11->C_Sign (s_session, data, sizeof data, mac, &mac_len), CKR_OK);
    HMAC (EVP_sha256 (), value, 32, data, sizeof data, mac2, &mac2_len);
    S_CHECK ("the encapsulated secret MACs as the decapsulated one (OpenSSL HMAC)",
             (CK_RV) (mac_len == 32 && mac2_len == 32 && CRYPTO_memcmp (mac, mac2, 32) == 0), 1);
    /*  AES-256-GCM on the board, decrypted by OpenSSL.  */
    unsigned char iv [12] = { 1, 2, 3 }, sealed [sizeof data + 16], opened [sizeof data];
    CK_GCM_PARAMS gcm = { iv, sizeof iv, sizeof iv * 8, NULL, 0, 128 };
    CK_MECHANISM aes_gcm = { CKM_AES_GCM, &gcm, sizeof gcm };
    CK_ULONG sealed_len = sizeof sealed;
    S_CHECK ("C_EncryptInit CKM_AES_GCM", s_p11->C_EncryptInit (s_session, &aes_gcm, aes_key), CKR_OK);
    S_CHECK ("C_Encrypt", s_p11->C_Encrypt (s_session, data, sizeof data, sealed, &sealed_len), CKR_OK);
    S_CHECK ("OpenSSL opens it with the secret",
             (CK_RV) s_gcm_open (value, iv, sealed, (int) sealed_len, opened), 1);
    S_CHECK ("the same plaintext", (CK_RV) (memcmp (opened, data, sizeof data) == 0), 1);
    OPENSSL_cleanse (value, sizeof value);
    status = s_session_pairs ();
    if (status)
        return status;
    s_p11->C_Finalize (NULL);
    printf ("cs-pq-kem: every step as expected\n");
    return 0;
}
