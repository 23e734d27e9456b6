/*  cs-async.c — PKCS#11 3.2 asynchronous sessions through the module
 *  (tests/integration/async.sh, issue #23):
 *
 *    cs-async MODULE TOKEN PIN sign N PUBPEM   N CKM_ECDSA_SHA256 signatures with key
 *                                              "p256" in flight at once from this one
 *                                              thread (N async sessions), each checked
 *                                              by OpenSSL against PUBPEM
 *    cs-async MODULE TOKEN PIN misuse          the exact CKR_* of misuse
 *    cs-async MODULE TOKEN PIN keygen LABEL    starts a token P-256 generation, prints
 *                                              "id HEX" (C_AsyncGetID), C_Finalize, exits
 *    cs-async MODULE TOKEN PIN kem             with a pq board: an ML-KEM-768 session pair,
 *                                              then C_EncapsulateKey and C_DecapsulateKey
 *                                              each CKR_PENDING and completed, the two
 *                                              secrets equal
 *    cs-async MODULE TOKEN PIN join HEX LABEL  C_AsyncJoin of that ID in a new process,
 *                                              the key then signs (checked by OpenSSL with
 *                                              its CKA_EC_POINT) and is the only one so
 *                                              labelled
 *
 *  Prints "cs-async: every step as expected" and exits 0, or says which
 *  step failed and exits 1 (2: setup).  Polls C_AsyncComplete without
 *  sleeping, bounded by a deadline.  */
#include <dlfcn.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/param_build.h>
#include <openssl/pem.h>
#include "cs_p11_3.h"
#include "cryptoserver/pkcs11v.h"
#include "cs-test-slot.h"

#define S_MAX_INFLIGHT 256
#define S_DEADLINE_S 60

static CK_FUNCTION_LIST_3_2 *s_p11;
static CK_SLOT_ID s_slot;
static const char *s_pin;

#define S_CHECK(what, got, want) \
    do { CK_RV s_got = (got); \
         if (s_got != (want)) { printf ("cs-async: %s: 0x%lx, expected 0x%lx\n", what, s_got, (CK_RV) (want)); \
                                return 1; } \
         printf ("cs-async: %s: ok\n", what); } while (0)

static double
s_now (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int
s_load (const char *module, const char *token)
{
    CK_C_INITIALIZE_ARGS args = { .flags = CKF_OS_LOCKING_OK };
    if (!(s_p11 = cs_test_interface_3_2 (module))) {
        printf ("cs-async: cannot load the 3.2 interface of %s\n", module);
        return 2;
    }
    if (s_p11->C_Initialize (&args) != CKR_OK || cs_test_slot ((CK_FUNCTION_LIST *) s_p11, token, &s_slot) != CKR_OK) {
        printf ("cs-async: cannot find token %s\n", token);
        return 2;
    }
    return 0;
}

/*  A session (async when `async`), R/W, logged in (the login is shared).  */
static CK_RV
s_open (bool async, CK_SESSION_HANDLE *session_p)
{
    CK_RV rv = s_p11->C_OpenSession (s_slot, CKF_SERIAL_SESSION | CKF_RW_SESSION | (async ? CKF_ASYNC_SESSION : 0),
                                     NULL, NULL, session_p);
    if (rv == CKR_OK) {
        rv = s_p11->C_Login (*session_p, CKU_USER, (CK_UTF8CHAR *) s_pin, strlen (s_pin));
        rv = rv == CKR_USER_ALREADY_LOGGED_IN ? CKR_OK : rv;
    }
    return rv;
}

/*  The first object of `klass` labelled `label`; *count_p how many there are.  */
static CK_OBJECT_HANDLE
s_find (CK_SESSION_HANDLE session, CK_OBJECT_CLASS klass, const char *label, CK_ULONG *count_p)
{
    CK_ATTRIBUTE tmpl [] = { { CKA_CLASS, &klass, sizeof klass }, { CKA_LABEL, (void *) label, strlen (label) } };
    CK_OBJECT_HANDLE objects [8] = { 0 };
    CK_ULONG found = 0;
    if (s_p11->C_FindObjectsInit (session, tmpl, 2) == CKR_OK)
        s_p11->C_FindObjects (session, objects, 8, &found);
    s_p11->C_FindObjectsFinal (session);
    if (count_p)
        *count_p = found;
    return found ? objects [0] : CK_INVALID_HANDLE;
}

/*  OpenSSL's verdict on a raw r||s P-256 signature of `msg` by `pkey`.  */
static bool
s_verify (EVP_PKEY *pkey, const unsigned char *msg, size_t msg_len, const unsigned char *sig, size_t sig_len)
{
    ECDSA_SIG *es = ECDSA_SIG_new ();
    BIGNUM *r = BN_bin2bn (sig, (int) sig_len / 2, NULL), *s = BN_bin2bn (sig + sig_len / 2, (int) sig_len / 2, NULL);
    unsigned char der [80], *p = der;
    int der_len = 0;
    bool ok = false;
    EVP_MD_CTX *md = EVP_MD_CTX_new ();
    if (es && r && s && sig_len == 64 && ECDSA_SIG_set0 (es, r, s) == 1) {
        r = s = NULL;
        der_len = i2d_ECDSA_SIG (es, &p);
    }
    ok = md && der_len > 0 && EVP_DigestVerifyInit (md, NULL, EVP_sha256 (), NULL, pkey) == 1
      && EVP_DigestVerify (md, der, (size_t) der_len, msg, msg_len) == 1;
    EVP_MD_CTX_free (md);
    ECDSA_SIG_free (es);
    BN_free (r);
    BN_free (s);
    return ok;
}

/*  Polls C_AsyncComplete for `name` in `session` until it is not pending
 *  (bounded).  */
static CK_RV
s_complete (CK_SESSION_HANDLE session, const char *name, CK_ASYNC_DATA *result)
{
    double until = s_now () + S_DEADLINE_S;
    CK_RV rv;
    while ((rv = s_p11->C_AsyncComplete (session, (CK_UTF8CHAR_PTR) name, result)) == CKR_PENDING && s_now () < until)
        sched_yield ();
    return rv;
}

/*  N signatures in flight from this thread, then each completed and
 *  verified.  */
static int
s_sign (int n, const char *pem)
{
    static CK_SESSION_HANDLE sessions [S_MAX_INFLIGHT];
    static unsigned char msgs [S_MAX_INFLIGHT][32], sigs [S_MAX_INFLIGHT][64];
    static CK_ULONG sig_lens [S_MAX_INFLIGHT];
    static bool done [S_MAX_INFLIGHT];
    CK_MECHANISM mech = { CKM_ECDSA_SHA256, NULL, 0 };
    FILE *f = fopen (pem, "r");
    EVP_PKEY *pkey = f ? PEM_read_PUBKEY (f, NULL, NULL, NULL) : NULL;
    int pending = 0, verified = 0, left;
    double until;
    if (f)
        fclose (f);
    if (!pkey || n < 1 || n > S_MAX_INFLIGHT) {
        printf ("cs-async: cannot read %s (or N out of 1..%d)\n", pem, S_MAX_INFLIGHT);
        return 2;
    }
    for (int i = 0; i < n; i++) {
        CK_OBJECT_HANDLE key;
        CK_RV rv;
        if (s_open (true, &sessions [i]) != CKR_OK || !(key = s_find (sessions [i], CKO_PRIVATE_KEY, "p256", NULL))
        ||  s_p11->C_SignInit (sessions [i], &mech, key) != CKR_OK) {
            printf ("cs-async: cannot start signature %d\n", i);
            return 1;
        }
        snprintf ((char *) msgs [i], sizeof msgs [i], "async message %d", i);
        sig_lens [i] = sizeof sigs [i];
        if ((rv = s_p11->C_Sign (sessions [i], msgs [i], sizeof msgs [i], sigs [i], &sig_lens [i])) != CKR_PENDING) {
            printf ("cs-async: C_Sign %d in an async session: 0x%lx, expected CKR_PENDING\n", i, rv);
            return 1;
        }
        pending++;
    }
    printf ("cs-async: %d signatures in flight from one thread: ok\n", pending);
    until = s_now () + S_DEADLINE_S;
    for (left = n; left > 0 && s_now () < until; sched_yield ())
        for (int i = 0; i < n; i++) {
            CK_ASYNC_DATA result = { 0 };
            CK_RV rv;
            if (done [i] || (rv = s_p11->C_AsyncComplete (sessions [i], (CK_UTF8CHAR_PTR) "C_Sign", &result)) == CKR_PENDING)
                continue;
            done [i] = true;
            left--;
            if (rv != CKR_OK || result.pValue != sigs [i] || result.ulValue != 64) {
                printf ("cs-async: signature %d: 0x%lx, %lu bytes at %p (buffer %p)\n", i, rv, result.ulValue,
                        (void *) result.pValue, (void *) sigs [i]);
                return 1;
            }
            verified += s_verify (pkey, msgs [i], sizeof msgs [i], sigs [i], result.ulValue);
        }
    EVP_PKEY_free (pkey);
    if (verified != n) {
        printf ("cs-async: %d of %d signatures completed and verified by OpenSSL\n", verified, n);
        return 1;
    }
    printf ("cs-async: %d signatures completed, each verified by OpenSSL: ok\n", n);
    S_CHECK ("C_AsyncComplete after the end: CKR_OPERATION_NOT_INITIALIZED",
             s_p11->C_AsyncComplete (sessions [0], (CK_UTF8CHAR_PTR) "C_Sign", NULL), CKR_OPERATION_NOT_INITIALIZED);
    return 0;
}

/*  The template of a token P-256 pair labelled `label`.  */
#define S_P256_TEMPLATES(label) \
    static const CK_BYTE p256 [] = { 0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07 }; \
    CK_BBOOL yes = CK_TRUE; \
    CK_ATTRIBUTE pub [] = { { CKA_TOKEN, &yes, 1 }, { CKA_EC_PARAMS, (void *) p256, sizeof p256 }, \
                            { CKA_VERIFY, &yes, 1 }, { CKA_LABEL, (void *) (label), strlen (label) } }; \
    CK_ATTRIBUTE priv [] = { { CKA_TOKEN, &yes, 1 }, { CKA_SIGN, &yes, 1 }, \
                             { CKA_LABEL, (void *) (label), strlen (label) } }; \
    CK_MECHANISM gen = { CKM_EC_KEY_PAIR_GEN, NULL, 0 }

static int
s_misuse (void)
{
    CK_SESSION_HANDLE sync, async;
    CK_OBJECT_HANDLE key, a = 0, b = 0;
    CK_MECHANISM mech = { CKM_ECDSA_SHA256, NULL, 0 };
    unsigned char msg [] = "misuse", sig [64];
    CK_ULONG sig_len = sizeof sig, id = 0;
    CK_TOKEN_INFO info;
    S_P256_TEMPLATES ("cs-async-misuse");
    if (s_open (false, &sync) != CKR_OK || s_open (true, &async) != CKR_OK
    ||  !(key = s_find (sync, CKO_PRIVATE_KEY, "p256", NULL))) {
        printf ("cs-async: cannot open the sessions\n");
        return 2;
    }
    S_CHECK ("C_GetTokenInfo", s_p11->C_GetTokenInfo (s_slot, &info), CKR_OK);
    S_CHECK ("CKF_ASYNC_SESSION_SUPPORTED", info.flags & CKF_ASYNC_SESSION_SUPPORTED ? CKR_OK : CKR_GENERAL_ERROR, CKR_OK);
    S_CHECK ("C_AsyncComplete in a session that waits: CKR_OPERATION_NOT_INITIALIZED",
             s_p11->C_AsyncComplete (sync, (CK_UTF8CHAR_PTR) "C_Sign", NULL), CKR_OPERATION_NOT_INITIALIZED);
    S_CHECK ("C_AsyncGetID in a session that waits: CKR_OPERATION_NOT_INITIALIZED",
             s_p11->C_AsyncGetID (sync, (CK_UTF8CHAR_PTR) "C_GenerateKeyPair", &id), CKR_OPERATION_NOT_INITIALIZED);
    S_CHECK ("C_AsyncJoin in a session that waits: CKR_SESSION_ASYNC_NOT_SUPPORTED",
             s_p11->C_AsyncJoin (sync, (CK_UTF8CHAR_PTR) "C_GenerateKeyPair", 1, NULL, 0), CKR_SESSION_ASYNC_NOT_SUPPORTED);
    S_CHECK ("C_AsyncComplete of an unknown function: CKR_ARGUMENTS_BAD",
             s_p11->C_AsyncComplete (async, (CK_UTF8CHAR_PTR) "C_Frobnicate", NULL), CKR_ARGUMENTS_BAD);
    S_CHECK ("C_AsyncComplete of a NULL name: CKR_ARGUMENTS_BAD",
             s_p11->C_AsyncComplete (async, NULL, NULL), CKR_ARGUMENTS_BAD);
    S_CHECK ("C_AsyncComplete with nothing in flight: CKR_OPERATION_NOT_INITIALIZED",
             s_p11->C_AsyncComplete (async, (CK_UTF8CHAR_PTR) "C_Sign", NULL), CKR_OPERATION_NOT_INITIALIZED);
    S_CHECK ("C_AsyncJoin of an unknown ID: CKR_SAVED_STATE_INVALID",
             s_p11->C_AsyncJoin (async, (CK_UTF8CHAR_PTR) "C_GenerateKeyPair", 0x1234567, NULL, 0), CKR_SAVED_STATE_INVALID);
    S_CHECK ("C_AsyncJoin of a C_Sign: CKR_SAVED_STATE_INVALID",
             s_p11->C_AsyncJoin (async, (CK_UTF8CHAR_PTR) "C_Sign", 1, NULL, 0), CKR_SAVED_STATE_INVALID);
    /*  A sign in flight: a second of its kind, and its ID.  */
    S_CHECK ("C_SignInit", s_p11->C_SignInit (async, &mech, key), CKR_OK);
    S_CHECK ("C_Sign length query: answered at once", s_p11->C_Sign (async, msg, sizeof msg, NULL, &sig_len), CKR_OK);
    sig_len = 10;
    S_CHECK ("C_Sign into a small buffer: CKR_BUFFER_TOO_SMALL, never pending",
             s_p11->C_Sign (async, msg, sizeof msg, sig, &sig_len), CKR_BUFFER_TOO_SMALL);
    sig_len = sizeof sig;
    S_CHECK ("C_Sign: CKR_PENDING", s_p11->C_Sign (async, msg, sizeof msg, sig, &sig_len), CKR_PENDING);
    S_CHECK ("C_SignInit while C_Sign is in flight: CKR_OPERATION_ACTIVE",
             s_p11->C_SignInit (async, &mech, key), CKR_OPERATION_ACTIVE);
    S_CHECK ("C_Sign while C_Sign is in flight: CKR_OPERATION_ACTIVE",
             s_p11->C_Sign (async, msg, sizeof msg, sig, &sig_len), CKR_OPERATION_ACTIVE);
    S_CHECK ("C_AsyncGetID of a C_Sign: CKR_STATE_UNSAVEABLE",
             s_p11->C_AsyncGetID (async, (CK_UTF8CHAR_PTR) "C_Sign", &id), CKR_STATE_UNSAVEABLE);
    S_CHECK ("C_AsyncComplete (C_Sign)", s_complete (async, "C_Sign", NULL), CKR_OK);
    S_CHECK ("C_SignInit after it ended", s_p11->C_SignInit (async, &mech, key), CKR_OK);
    S_CHECK ("C_SessionCancel", s_p11->C_SessionCancel (async, CKF_SIGN), CKR_OK);
    /*  Two generations in one session.  */
    S_CHECK ("C_GenerateKeyPair: CKR_PENDING", s_p11->C_GenerateKeyPair (async, &gen, pub, 4, priv, 3, &a, &b), CKR_PENDING);
    S_CHECK ("a second C_GenerateKeyPair in the session: CKR_OPERATION_ACTIVE",
             s_p11->C_GenerateKeyPair (async, &gen, pub, 4, priv, 3, &a, &b), CKR_OPERATION_ACTIVE);
    S_CHECK ("C_AsyncJoin while one is in flight: CKR_OPERATION_ACTIVE", s_p11->C_AsyncGetID (async,
             (CK_UTF8CHAR_PTR) "C_GenerateKeyPair", &id) == CKR_OK
             ? s_p11->C_AsyncJoin (async, (CK_UTF8CHAR_PTR) "C_GenerateKeyPair", id, NULL, 0) : CKR_GENERAL_ERROR,
             CKR_OPERATION_ACTIVE);
    CK_ASYNC_DATA result = { 0 };
    S_CHECK ("C_AsyncComplete (C_GenerateKeyPair)", s_complete (async, "C_GenerateKeyPair", &result), CKR_OK);
    S_CHECK ("two new handles", result.hObject && result.hAdditionalObject && result.hObject != result.hAdditionalObject
             ? CKR_OK : CKR_GENERAL_ERROR, CKR_OK);
    S_CHECK ("C_AsyncJoin once it ended: CKR_SAVED_STATE_INVALID (its file is gone)",
             s_p11->C_AsyncJoin (async, (CK_UTF8CHAR_PTR) "C_GenerateKeyPair", id, NULL, 0), CKR_SAVED_STATE_INVALID);
    S_CHECK ("C_DestroyObject", s_p11->C_DestroyObject (sync, result.hAdditionalObject), CKR_OK);
    S_CHECK ("C_DestroyObject", s_p11->C_DestroyObject (sync, result.hObject), CKR_OK);
    /*  A sign in flight when its session closes, and at C_Finalize.  */
    S_CHECK ("C_SignInit", s_p11->C_SignInit (async, &mech, key), CKR_OK);
    S_CHECK ("C_Sign: CKR_PENDING", s_p11->C_Sign (async, msg, sizeof msg, sig, &sig_len), CKR_PENDING);
    S_CHECK ("C_CloseSession with a call in flight", s_p11->C_CloseSession (async), CKR_OK);
    S_CHECK ("C_AsyncComplete on the closed session: CKR_SESSION_HANDLE_INVALID",
             s_p11->C_AsyncComplete (async, (CK_UTF8CHAR_PTR) "C_Sign", NULL), CKR_SESSION_HANDLE_INVALID);
    S_CHECK ("another async session", s_open (true, &async), CKR_OK);
    S_CHECK ("C_SignInit", s_p11->C_SignInit (async, &mech, key), CKR_OK);
    S_CHECK ("C_Sign: CKR_PENDING", s_p11->C_Sign (async, msg, sizeof msg, sig, &sig_len), CKR_PENDING);
    return 0;
}

/*  Starts a token generation, saves it, and leaves before it completes.  */
static int
s_keygen (const char *label)
{
    CK_SESSION_HANDLE session;
    CK_OBJECT_HANDLE a = 0, b = 0;
    CK_ULONG id = 0;
    S_P256_TEMPLATES (label);
    S_CHECK ("an async session", s_open (true, &session), CKR_OK);
    S_CHECK ("C_GenerateKeyPair: CKR_PENDING", s_p11->C_GenerateKeyPair (session, &gen, pub, 4, priv, 3, &a, &b),
             CKR_PENDING);
    S_CHECK ("C_AsyncGetID", s_p11->C_AsyncGetID (session, (CK_UTF8CHAR_PTR) "C_GenerateKeyPair", &id), CKR_OK);
    printf ("id %lx\n", id);
    S_CHECK ("C_Finalize with the generation in flight", s_p11->C_Finalize (NULL), CKR_OK);
    s_p11 = NULL;
    return 0;
}

/*  The public key of `object` (its CKA_EC_POINT, a DER OCTET STRING of the
 *  uncompressed point) as an OpenSSL P-256 key, or NULL.  */
static EVP_PKEY *
s_public (CK_SESSION_HANDLE session, CK_OBJECT_HANDLE object)
{
    unsigned char der [80];
    CK_ATTRIBUTE attr = { CKA_EC_POINT, der, sizeof der };
    EVP_PKEY *pkey = NULL;
    OSSL_PARAM_BLD *bld = OSSL_PARAM_BLD_new ();
    OSSL_PARAM *params = NULL;
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_name (NULL, "EC", NULL);
    if (s_p11->C_GetAttributeValue (session, object, &attr, 1) == CKR_OK && attr.ulValueLen == 67 && der [0] == 0x04
    &&  bld && ctx && OSSL_PARAM_BLD_push_utf8_string (bld, OSSL_PKEY_PARAM_GROUP_NAME, "prime256v1", 0)
    &&  OSSL_PARAM_BLD_push_octet_string (bld, OSSL_PKEY_PARAM_PUB_KEY, der + 2, 65)
    &&  (params = OSSL_PARAM_BLD_to_param (bld)) && EVP_PKEY_fromdata_init (ctx) == 1)
        (void) EVP_PKEY_fromdata (ctx, &pkey, EVP_PKEY_PUBLIC_KEY, params);
    OSSL_PARAM_free (params);
    OSSL_PARAM_BLD_free (bld);
    EVP_PKEY_CTX_free (ctx);
    return pkey;
}

/*  Joins generation `id` and uses the key.  */
static int
s_join (const char *hex, const char *label)
{
    CK_SESSION_HANDLE session, sync;
    CK_ULONG id = strtoul (hex, NULL, 16), count = 0;
    CK_ASYNC_DATA result = { 0 };
    CK_MECHANISM mech = { CKM_ECDSA_SHA256, NULL, 0 };
    unsigned char msg [] = "signed by a joined key", sig [64];
    CK_ULONG sig_len = sizeof sig;
    EVP_PKEY *pkey;
    S_CHECK ("an async session in a new process", s_open (true, &session), CKR_OK);
    S_CHECK ("C_AsyncJoin", s_p11->C_AsyncJoin (session, (CK_UTF8CHAR_PTR) "C_GenerateKeyPair", id, NULL, 0), CKR_OK);
    S_CHECK ("C_AsyncComplete (C_GenerateKeyPair)", s_complete (session, "C_GenerateKeyPair", &result), CKR_OK);
    S_CHECK ("a session that waits", s_open (false, &sync), CKR_OK);
    (void) s_find (sync, CKO_PRIVATE_KEY, label, &count);
    S_CHECK ("one private key so labelled (the first run's, replayed)", count == 1 ? CKR_OK : CKR_GENERAL_ERROR, CKR_OK);
    S_CHECK ("C_SignInit with the joined key", s_p11->C_SignInit (sync, &mech, result.hAdditionalObject), CKR_OK);
    S_CHECK ("C_Sign", s_p11->C_Sign (sync, msg, sizeof msg, sig, &sig_len), CKR_OK);
    pkey = s_public (sync, result.hObject);
    S_CHECK ("the signature verified by OpenSSL with the joined public key",
             pkey && s_verify (pkey, msg, sizeof msg, sig, sig_len) ? CKR_OK : CKR_SIGNATURE_INVALID, CKR_OK);
    EVP_PKEY_free (pkey);
    S_CHECK ("C_AsyncJoin again: CKR_SAVED_STATE_INVALID",
             s_p11->C_AsyncJoin (session, (CK_UTF8CHAR_PTR) "C_GenerateKeyPair", id, NULL, 0), CKR_SAVED_STATE_INVALID);
    S_CHECK ("C_DestroyObject", s_p11->C_DestroyObject (sync, result.hAdditionalObject), CKR_OK);
    S_CHECK ("C_DestroyObject", s_p11->C_DestroyObject (sync, result.hObject), CKR_OK);
    return 0;
}

/*  The CKA_VALUE of a readable secret key (32 bytes), into value.  */
static CK_RV
s_value (CK_SESSION_HANDLE session, CK_OBJECT_HANDLE key, unsigned char *value)
{
    CK_ATTRIBUTE attr = { CKA_VALUE, value, 32 };
    CK_RV rv = s_p11->C_GetAttributeValue (session, key, &attr, 1);
    return rv == CKR_OK && attr.ulValueLen != 32 ? CKR_GENERAL_ERROR : rv;
}

/*  Both KEM calls in flight and completed; the two secrets agree.  */
static int
s_kem (void)
{
    CK_SESSION_HANDLE session;
    CK_ULONG set = CKP_ML_KEM_768, ct_len = 0;
    CK_BBOOL yes = CK_TRUE, no = CK_FALSE;
    CK_OBJECT_CLASS secret = CKO_SECRET_KEY;
    CK_KEY_TYPE generic = CKK_GENERIC_SECRET;
    CK_ATTRIBUTE pub_tmpl [] = { { CKA_TOKEN, &no, 1 }, { CKA_PARAMETER_SET, &set, sizeof set } };
    CK_ATTRIBUTE priv_tmpl [] = { { CKA_TOKEN, &no, 1 } };
    CK_ATTRIBUTE twin [] = { { CKA_CLASS, &secret, sizeof secret }, { CKA_KEY_TYPE, &generic, sizeof generic },
                             { CKA_SENSITIVE, &no, 1 }, { CKA_EXTRACTABLE, &yes, 1 } };
    CK_MECHANISM gen = { CKM_ML_KEM_KEY_PAIR_GEN, NULL, 0 }, kem = { CKM_ML_KEM, NULL, 0 };
    CK_OBJECT_HANDLE pub = 0, priv = 0, k1 = 0, k2 = 0;
    unsigned char ct [1088], a [32], b [32];
    CK_ASYNC_DATA result = { 0 };
    S_CHECK ("an async session", s_open (true, &session), CKR_OK);
    S_CHECK ("an ML-KEM-768 session pair (made at once: nothing to join)",
             s_p11->C_GenerateKeyPair (session, &gen, pub_tmpl, 2, priv_tmpl, 1, &pub, &priv), CKR_OK);
    S_CHECK ("C_EncapsulateKey length query: answered at once",
             s_p11->C_EncapsulateKey (session, &kem, pub, twin, 4, NULL, &ct_len, &k1), CKR_OK);
    S_CHECK ("the ciphertext length", ct_len == sizeof ct ? CKR_OK : CKR_GENERAL_ERROR, CKR_OK);
    S_CHECK ("C_EncapsulateKey: CKR_PENDING", s_p11->C_EncapsulateKey (session, &kem, pub, twin, 4, ct, &ct_len, &k1),
             CKR_PENDING);
    S_CHECK ("a second C_EncapsulateKey in flight: CKR_OPERATION_ACTIVE",
             s_p11->C_EncapsulateKey (session, &kem, pub, twin, 4, ct, &ct_len, &k1), CKR_OPERATION_ACTIVE);
    S_CHECK ("C_AsyncComplete (C_EncapsulateKey)", s_complete (session, "C_EncapsulateKey", &result), CKR_OK);
    S_CHECK ("the ciphertext in the buffer given, and a key", result.pValue == ct && result.ulValue == sizeof ct
             && result.hObject ? CKR_OK : CKR_GENERAL_ERROR, CKR_OK);
    k1 = result.hObject;
    result = (CK_ASYNC_DATA) { 0 };
    S_CHECK ("C_DecapsulateKey: CKR_PENDING", s_p11->C_DecapsulateKey (session, &kem, priv, twin, 4, ct, sizeof ct, &k2),
             CKR_PENDING);
    S_CHECK ("C_AsyncComplete (C_DecapsulateKey)", s_complete (session, "C_DecapsulateKey", &result), CKR_OK);
    k2 = result.hObject;
    S_CHECK ("the encapsulated secret", s_value (session, k1, a), CKR_OK);
    S_CHECK ("the decapsulated secret", s_value (session, k2, b), CKR_OK);
    S_CHECK ("the two secrets agree", memcmp (a, b, sizeof a) == 0 ? CKR_OK : CKR_GENERAL_ERROR, CKR_OK);
    return 0;
}

int
main (int argc, char **argv)
{
    int status;
    if (argc < 5) {
        fprintf (stderr, "usage: cs-async MODULE TOKEN PIN sign N PUBPEM | misuse | kem | keygen LABEL | join HEX LABEL\n");
        return 2;
    }
    s_pin = argv [3];
    if ((status = s_load (argv [1], argv [2])) != 0)
        return status;
    if (strcmp (argv [4], "sign") == 0 && argc == 7)
        status = s_sign (atoi (argv [5]), argv [6]);
    else
    if (strcmp (argv [4], "misuse") == 0)
        status = s_misuse ();
    else
    if (strcmp (argv [4], "kem") == 0)
        status = s_kem ();
    else
    if (strcmp (argv [4], "keygen") == 0 && argc == 6)
        status = s_keygen (argv [5]);
    else
    if (strcmp (argv [4], "join") == 0 && argc == 7)
        status = s_join (argv [5], argv [6]);
    else
        status = 2;
    if (s_p11 && s_p11->C_Finalize (NULL) != CKR_OK && status == 0) {
        printf ("cs-async: C_Finalize failed\n");
        status = 1;
    }
    if (status == 0)
        printf ("cs-async: every step as expected\n");
    return status;
}
