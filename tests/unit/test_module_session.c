/*  test_module_session.c — session and login rules and the functions issue
 *  #10 asks the module to provide, on the built cryptoserver-pkcs11.so
 *  (dlopen) against the whole broker in-process (server.h) on
 *  tcp://127.0.0.1:! with one sim board holding RSA key 01:
 *  closing the last session logs out, also when it closes while C_Login
 *  waits on the broker (PKCS#11 2.40 §5.6); application mutex callbacks
 *  (§5.4); C_SeedRandom and C_GenerateRandom arguments (§5.15); C_DigestKey
 *  (§5.10); C_SignRecover / C_VerifyRecover with CKM_RSA_PKCS and
 *  CKM_RSA_X_509 (§5.13, §5.14), results checked with OpenSSL and the key
 *  this test made.  The module is $CRYPTOSERVER_MODULE_PATH, else
 *  $top_builddir/pkcs11-module/.libs/cryptoserver-pkcs11.so.
 */
#include <pthread.h>
#include <openssl/rand.h>
#include "test_module_fixture.h"
#include "cs_p11_3.h"
#include "test_run.h"

static char *s_dir;
static EVP_PKEY *s_key;                 /* the board's key 01, made here */
static broker_config_t *s_config;
static server_t *s_server;
static void *s_dl;
static CK_FUNCTION_LIST *p;
static CK_UTF8CHAR s_pin [] = "1234";
static const CK_BYTE s_id [] = { 0x01 };

/*  ---- fixture --------------------------------------------------------- */

static void s_mx_reset (void);

static void
s_setup (void)
{
    s_mx_reset ();             /* CK_FORK=no (make memcheck) runs the tests in one process */
    s_dir = th_tmpdir ();
    s_key = th_key_pem (s_dir, "board.pem", 2048);
    th_certs (s_dir, "app", "demo");
    th_keystore (s_dir);
    tb_conf_write (s_dir, "",
        "drivers\n"
        "    board\n        type = sim\n        key-file = board.pem\n        key-id = 01\n"
        "        threads = 2\n        tenant = demo\n");
    s_server = tb_start (s_dir, &s_config);
    tm_client_conf (s_dir, server_endpoint (s_server), 20000);
    s_dl = tm_module_open (&p);
}

static void
s_teardown (void)
{
    tm_module_close (&p, &s_dl);
    tb_stop (&s_server, &s_config);
    EVP_PKEY_free (s_key);
    th_tmpdir_remove (&s_dir);
}

/*  ---- helpers --------------------------------------------------------- */

/*  The object of `klass` with CKA_ID 01.  */
static CK_OBJECT_HANDLE
s_find (CK_SESSION_HANDLE h, CK_OBJECT_CLASS klass)
{
    CK_ATTRIBUTE tmpl [] = { { CKA_CLASS, &klass, sizeof klass }, { CKA_ID, (void *) s_id, 1 } };
    CK_OBJECT_HANDLE key = 0;
    CK_ULONG count = 0;
    ck_assert_uint_eq (p->C_FindObjectsInit (h, tmpl, 2), CKR_OK);
    ck_assert_uint_eq (p->C_FindObjects (h, &key, 1, &count), CKR_OK);
    ck_assert_uint_eq (p->C_FindObjectsFinal (h), CKR_OK);
    ck_assert_uint_eq (count, 1);
    return key;
}

/*  OpenSSL's RSA public operation with `padding` on sig, with the key this
 *  test made: the recovered bytes into out, their length returned (0 when
 *  OpenSSL refuses the signature).  */
static size_t
s_openssl_recover (int padding, const uint8_t *sig, size_t sig_len, uint8_t *out)
{
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new (s_key, NULL);
    size_t len = 512;
    bool ok = ctx && EVP_PKEY_verify_recover_init (ctx) > 0 && EVP_PKEY_CTX_set_rsa_padding (ctx, padding) > 0
           && EVP_PKEY_verify_recover (ctx, out, &len, sig, sig_len) > 0;
    EVP_PKEY_CTX_free (ctx);
    return ok ? len : 0;
}

/*  OpenSSL's PKCS#1 v1.5 type 1 signature of raw `data` (no DigestInfo).  */
static void
s_openssl_sign (const uint8_t *data, size_t len, uint8_t sig [256])
{
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new (s_key, NULL);
    size_t sig_len = 256;
    ck_assert (ctx && EVP_PKEY_sign_init (ctx) > 0 && EVP_PKEY_CTX_set_rsa_padding (ctx, RSA_PKCS1_PADDING) > 0
               && EVP_PKEY_sign (ctx, sig, &sig_len, data, len) > 0 && sig_len == 256);
    EVP_PKEY_CTX_free (ctx);
}

/*  ---- application mutex callbacks that count (tm_mx), with a hook ----- */

static struct {
    int hook_at;                        /* run the hook at this lock (counted from arming), 0: off */
    int armed_locks;
    CK_SESSION_HANDLE close;            /* the hook closes this session */
    bool fired;
} s_hook;

static void
s_mx_reset (void)
{
    tm_mx_reset ();
    memset (&s_hook, 0, sizeof s_hook);
}

/*  tm_mx.lock_hook: closes s_hook.close at the hook_at-th lock.  */
static void
s_lock_hook (void)
{
    if (s_hook.hook_at && ++s_hook.armed_locks == s_hook.hook_at) {
        s_hook.hook_at = 0;
        s_hook.fired = true;
        ck_assert_uint_eq (p->C_CloseSession (s_hook.close), CKR_OK);
    }
}

/*  Callbacks of an application with one global lock: CreateMutex makes a
 *  NULL handle, which the others ignore.  */
static pthread_mutex_t s_global = PTHREAD_MUTEX_INITIALIZER;

static CK_RV
s_global_create (CK_VOID_PTR_PTR mutex_p)
{
    __atomic_add_fetch (&tm_mx.created, 1, __ATOMIC_SEQ_CST);
    *mutex_p = NULL;
    return CKR_OK;
}

static CK_RV
s_global_destroy (CK_VOID_PTR mutex)
{
    __atomic_add_fetch (&tm_mx.destroyed, 1, __ATOMIC_SEQ_CST);
    return CKR_OK;
}

static CK_RV
s_global_lock (CK_VOID_PTR mutex)
{
    __atomic_add_fetch (&tm_mx.locked, 1, __ATOMIC_SEQ_CST);
    return pthread_mutex_lock (&s_global) == 0 ? CKR_OK : CKR_MUTEX_BAD;
}

static CK_RV
s_global_unlock (CK_VOID_PTR mutex)
{
    __atomic_add_fetch (&tm_mx.unlocked, 1, __ATOMIC_SEQ_CST);
    return pthread_mutex_unlock (&s_global) == 0 ? CKR_OK : CKR_MUTEX_NOT_LOCKED;
}

/*  ---- closing the last session logs out (PKCS#11 2.40 §5.6) ------------ */

START_TEST (test_last_session_logs_out)
{
    CK_SESSION_HANDLE a, b;
    ck_assert_uint_eq (p->C_Initialize (NULL), CKR_OK);
    a = tm_open (p, 0);
    b = tm_open (p, CKF_RW_SESSION);
    ck_assert_uint_eq (p->C_Login (a, CKU_USER, s_pin, 4), CKR_OK);
    ck_assert_uint_eq (p->C_CloseSession (a), CKR_OK);          /* not the last: still logged in */
    ck_assert_uint_eq (tm_state (p, b), CKS_RW_USER_FUNCTIONS);
    ck_assert_uint_eq (p->C_CloseSession (b), CKR_OK);          /* the last */
    a = tm_open (p, 0);
    ck_assert_uint_eq (tm_state (p, a), CKS_RO_PUBLIC_SESSION);
    ck_assert_uint_eq (p->C_Login (a, CKU_USER, s_pin, 4), CKR_OK);
    ck_assert_uint_eq (tm_state (p, a), CKS_RO_USER_FUNCTIONS);
    ck_assert_uint_eq (p->C_Finalize (NULL), CKR_OK);
}
END_TEST

/*  The session closes while C_Login is in the module, at each of its
 *  library-mutex acquisitions in turn (the hook of the application's
 *  LockMutex): whatever C_Login answers, the login does not outlive the
 *  last session.  One of the points is after the LoginJob came back, where
 *  C_Login must answer CKR_SESSION_CLOSED.  */
START_TEST (test_login_while_last_session_closes)
{
    CK_C_INITIALIZE_ARGS args = *tm_mx_args ();
    CK_SESSION_HANDLE h;
    bool closed_seen = false;
    CK_RV rv;
    ck_assert_uint_eq (p->C_Initialize (&args), CKR_OK);
    tm_mx.lock_hook = s_lock_hook;
    for (int at = 1; at <= 6; at++) {
        h = tm_open (p, 0);
        s_hook.close = h;
        s_hook.fired = false;
        s_hook.armed_locks = 0;
        s_hook.hook_at = at;
        rv = p->C_Login (h, CKU_USER, s_pin, 4);
        s_hook.hook_at = 0;
        if (!s_hook.fired) {
            ck_assert_uint_eq (rv, CKR_OK);
            ck_assert_uint_eq (p->C_CloseSession (h), CKR_OK);
        }
        else
            ck_assert_msg (rv == CKR_SESSION_HANDLE_INVALID || rv == CKR_SESSION_CLOSED,
                           "C_Login, session closed at lock %d: 0x%lx", at, rv);
        closed_seen |= rv == CKR_SESSION_CLOSED;
        h = tm_open (p, 0);
        ck_assert_msg (tm_state (p, h) == CKS_RO_PUBLIC_SESSION, "closed at lock %d: still logged in", at);
        ck_assert_uint_eq (p->C_Login (h, CKU_USER, s_pin, 4), CKR_OK);
        ck_assert_uint_eq (p->C_CloseSession (h), CKR_OK);
    }
    ck_assert (closed_seen);
    ck_assert_uint_eq (p->C_Finalize (NULL), CKR_OK);
    ck_assert_int_eq (tm_mx.locked, tm_mx.unlocked);
}
END_TEST

/*  ---- application mutex callbacks (PKCS#11 2.40 §5.4) ------------------ */

START_TEST (test_mutex_callbacks)
{
    CK_C_INITIALIZE_ARGS args = *tm_mx_args (), some;
    CK_MECHANISM raw = { CKM_RSA_PKCS, NULL, 0 };
    CK_SESSION_HANDLE h;
    CK_INFO info;
    uint8_t di [51], sig [256];
    CK_ULONG len = sizeof sig;
    /*  Some callbacks but not all four: CKR_ARGUMENTS_BAD, with or without
        CKF_OS_LOCKING_OK, and nothing is created.  */
    for (int missing = 0; missing < 4; missing++)
        for (int os = 0; os < 2; os++) {
            some = args;
            some.flags = os ? CKF_OS_LOCKING_OK : 0;
            if (missing == 0) some.CreateMutex = NULL;
            if (missing == 1) some.DestroyMutex = NULL;
            if (missing == 2) some.LockMutex = NULL;
            if (missing == 3) some.UnlockMutex = NULL;
            ck_assert_uint_eq (p->C_Initialize (&some), CKR_ARGUMENTS_BAD);
        }
    ck_assert_int_eq (tm_mx.created, 0);
    ck_assert_uint_eq (p->C_GetInfo (&info), CKR_CRYPTOKI_NOT_INITIALIZED);
    /*  CreateMutex failing fails C_Initialize with its code.  */
    tm_mx.create_rv = CKR_HOST_MEMORY;
    ck_assert_uint_eq (p->C_Initialize (&args), CKR_HOST_MEMORY);
    ck_assert_uint_eq (p->C_GetInfo (&info), CKR_CRYPTOKI_NOT_INITIALIZED);
    tm_mx.create_rv = CKR_OK;
    /*  The callbacks are the library mutex: every state change goes
        through them, balanced, also around a job on the broker.  */
    ck_assert_uint_eq (p->C_Initialize (&args), CKR_OK);
    ck_assert_int_eq (tm_mx.created, 1);
    h = tm_open (p, 0);
    ck_assert_uint_eq (p->C_Login (h, CKU_USER, s_pin, 4), CKR_OK);
    th_digest_info ("mutex", di);
    int before = tm_mx.locked;
    ck_assert_uint_eq (p->C_SignInit (h, &raw, s_find (h, CKO_PRIVATE_KEY)), CKR_OK);
    ck_assert_uint_eq (p->C_Sign (h, di, 51, sig, &len), CKR_OK);
    ck_assert (th_verify_rsa_pkcs1 (s_key, di, 51, sig, len));
    ck_assert_int_gt (tm_mx.locked, before + 2);
    ck_assert_int_eq (tm_mx.locked, tm_mx.unlocked);
    ck_assert_uint_eq (p->C_Finalize (NULL), CKR_OK);
    ck_assert_int_eq (tm_mx.destroyed, 1);
    ck_assert_int_eq (tm_mx.locked, tm_mx.unlocked);
    /*  A NULL handle from CreateMutex is the application's business: its
        callbacks are used all the same (not CKR_CANT_LOCK).  */
    CK_C_INITIALIZE_ARGS global = { s_global_create, s_global_destroy, s_global_lock, s_global_unlock, 0, NULL };
    tm_mx_reset ();
    ck_assert_uint_eq (p->C_Initialize (&global), CKR_OK);
    h = tm_open (p, 0);
    ck_assert_uint_eq (p->C_Login (h, CKU_USER, s_pin, 4), CKR_OK);
    ck_assert_uint_eq (p->C_Finalize (NULL), CKR_OK);
    ck_assert_int_eq (tm_mx.created, 1);
    ck_assert_int_eq (tm_mx.destroyed, 1);
    ck_assert_int_gt (tm_mx.locked, 2);
    ck_assert_int_eq (tm_mx.locked, tm_mx.unlocked);
    /*  No callbacks, CKF_OS_LOCKING_OK: our own locking.  */
    CK_C_INITIALIZE_ARGS os = { NULL, NULL, NULL, NULL, CKF_OS_LOCKING_OK, NULL };
    tm_mx_reset ();
    ck_assert_uint_eq (p->C_Initialize (&os), CKR_OK);
    h = tm_open (p, 0);
    ck_assert_uint_eq (p->C_CloseSession (h), CKR_OK);
    ck_assert_uint_eq (p->C_Finalize (NULL), CKR_OK);
    ck_assert_int_eq (tm_mx.locked + tm_mx.created, 0);
}
END_TEST

/*  ---- random (PKCS#11 2.40 §5.15) --------------------------------------- */

START_TEST (test_random)
{
    CK_SESSION_HANDLE h;
    uint8_t seed [32] = "seed material", a [32] = { 0 }, b [32] = { 0 };
    ck_assert_uint_eq (p->C_SeedRandom (1, seed, 4), CKR_CRYPTOKI_NOT_INITIALIZED);
    ck_assert_uint_eq (p->C_Initialize (NULL), CKR_OK);
    h = tm_open (p, 0);
    ck_assert_uint_eq (p->C_SeedRandom (h, seed, sizeof seed), CKR_OK);
    ck_assert_uint_eq (p->C_SeedRandom (h, NULL, 0), CKR_OK);
    ck_assert_uint_eq (p->C_SeedRandom (h, NULL, 4), CKR_ARGUMENTS_BAD);
    ck_assert_uint_eq (p->C_SeedRandom (h + 100, seed, 4), CKR_SESSION_HANDLE_INVALID);
    ck_assert_uint_eq (p->C_GenerateRandom (h, NULL, 4), CKR_ARGUMENTS_BAD);
    ck_assert_uint_eq (p->C_GenerateRandom (h + 100, a, 4), CKR_SESSION_HANDLE_INVALID);
    ck_assert_uint_eq (p->C_GenerateRandom (h, NULL, 0), CKR_OK);
    ck_assert_uint_eq (p->C_GenerateRandom (h, a, sizeof a), CKR_OK);
    ck_assert_uint_eq (p->C_GenerateRandom (h, b, sizeof b), CKR_OK);
    ck_assert_mem_ne (a, b, sizeof a);
    ck_assert_uint_eq (p->C_CloseSession (h), CKR_OK);
    ck_assert_uint_eq (p->C_SeedRandom (h, seed, 4), CKR_SESSION_HANDLE_INVALID);
    ck_assert_uint_eq (p->C_Finalize (NULL), CKR_OK);
}
END_TEST

/*  ---- C_DigestKey (PKCS#11 2.40 §5.10) ---------------------------------- */

/*  The board's keys are asymmetric: not a secret key's value, so
 *  CKR_KEY_INDIGESTIBLE (which ends the digest, as an error of
 *  C_DigestUpdate does); a bad handle CKR_KEY_HANDLE_INVALID.  A digest
 *  interleaving C_DigestUpdate with a refused C_DigestKey starts again
 *  and then gives the digest of the data.  (A secret key's value is
 *  digested in tests/integration/clients/pykcs11_test.py, with an ECDH key.)  */
START_TEST (test_digest_key)
{
    CK_SESSION_HANDLE h;
    CK_MECHANISM sha = { CKM_SHA256, NULL, 0 };
    CK_OBJECT_HANDLE priv, pub;
    uint8_t digest [32], expect [32];
    CK_ULONG len = sizeof digest;
    ck_assert_uint_eq (p->C_Initialize (NULL), CKR_OK);
    h = tm_open (p, 0);
    ck_assert_uint_eq (p->C_Login (h, CKU_USER, s_pin, 4), CKR_OK);
    priv = s_find (h, CKO_PRIVATE_KEY);
    pub = s_find (h, CKO_PUBLIC_KEY);
    ck_assert_uint_eq (p->C_DigestKey (h, pub), CKR_OPERATION_NOT_INITIALIZED);
    ck_assert_uint_eq (p->C_DigestKey (h + 100, pub), CKR_SESSION_HANDLE_INVALID);
    ck_assert_uint_eq (p->C_DigestInit (h, &sha), CKR_OK);
    ck_assert_uint_eq (p->C_DigestUpdate (h, (CK_BYTE_PTR) "ab", 2), CKR_OK);
    ck_assert_uint_eq (p->C_DigestKey (h, priv), CKR_KEY_INDIGESTIBLE);
    ck_assert_uint_eq (p->C_DigestUpdate (h, (CK_BYTE_PTR) "c", 1), CKR_OPERATION_NOT_INITIALIZED);
    ck_assert_uint_eq (p->C_DigestInit (h, &sha), CKR_OK);
    ck_assert_uint_eq (p->C_DigestKey (h, pub), CKR_KEY_INDIGESTIBLE);
    ck_assert_uint_eq (p->C_DigestInit (h, &sha), CKR_OK);
    ck_assert_uint_eq (p->C_DigestKey (h, 999999), CKR_KEY_HANDLE_INVALID);
    ck_assert_uint_eq (p->C_DigestFinal (h, digest, &len), CKR_OPERATION_NOT_INITIALIZED);
    ck_assert_uint_eq (p->C_DigestInit (h, &sha), CKR_OK);
    ck_assert_uint_eq (p->C_DigestUpdate (h, (CK_BYTE_PTR) "ab", 2), CKR_OK);
    ck_assert_uint_eq (p->C_DigestUpdate (h, (CK_BYTE_PTR) "c", 1), CKR_OK);
    ck_assert_uint_eq (p->C_DigestFinal (h, digest, &len), CKR_OK);
    SHA256 ((const uint8_t *) "abc", 3, expect);
    ck_assert_mem_eq (digest, expect, 32);
    ck_assert_uint_eq (p->C_Finalize (NULL), CKR_OK);
}
END_TEST

/*  ---- signatures with recovery (PKCS#11 2.40 §5.13, §5.14) ---------------- */

START_TEST (test_recover)
{
    CK_SESSION_HANDLE h;
    CK_OBJECT_HANDLE priv, pub;
    CK_MECHANISM pkcs = { CKM_RSA_PKCS, NULL, 0 }, x509 = { CKM_RSA_X_509, NULL, 0 };
    CK_MECHANISM hashed = { CKM_SHA256_RSA_PKCS, NULL, 0 };
    CK_MECHANISM_INFO info;
    uint8_t msg [20] = "recover me, please!", sig [256], out [256], block [256], big [246] = { 0 };
    CK_ULONG len = 0;
    ck_assert_uint_eq (p->C_Initialize (NULL), CKR_OK);
    ck_assert_uint_eq (p->C_GetMechanismInfo (0, CKM_RSA_PKCS, &info), CKR_OK);
    ck_assert_uint_eq (info.flags & (CKF_SIGN_RECOVER | CKF_VERIFY_RECOVER), CKF_SIGN_RECOVER | CKF_VERIFY_RECOVER);
    ck_assert_uint_eq (p->C_GetMechanismInfo (0, CKM_RSA_X_509, &info), CKR_OK);
    ck_assert_uint_eq (info.flags & (CKF_SIGN_RECOVER | CKF_VERIFY_RECOVER), CKF_SIGN_RECOVER | CKF_VERIFY_RECOVER);
    ck_assert_uint_eq (p->C_GetMechanismInfo (0, CKM_SHA256_RSA_PKCS, &info), CKR_OK);
    ck_assert_uint_eq (info.flags & (CKF_SIGN_RECOVER | CKF_VERIFY_RECOVER), 0);
    h = tm_open (p, 0);
    pub = s_find (h, CKO_PUBLIC_KEY);
    ck_assert_uint_eq (p->C_SignRecoverInit (h, &pkcs, pub), CKR_USER_NOT_LOGGED_IN);
    ck_assert_uint_eq (p->C_Login (h, CKU_USER, s_pin, 4), CKR_OK);
    priv = s_find (h, CKO_PRIVATE_KEY);
    /*  Sign with recovery, CKM_RSA_PKCS: the two-call convention, then
        OpenSSL recovers the data with the test's own key.  */
    ck_assert_uint_eq (p->C_SignRecover (h, msg, sizeof msg, sig, &len), CKR_OPERATION_NOT_INITIALIZED);
    ck_assert_uint_eq (p->C_SignRecoverInit (h, &hashed, priv), CKR_MECHANISM_INVALID);
    ck_assert_uint_eq (p->C_SignRecoverInit (h, &pkcs, pub), CKR_KEY_FUNCTION_NOT_PERMITTED);
    ck_assert_uint_eq (p->C_SignRecoverInit (h, &pkcs, priv), CKR_OK);
    ck_assert_uint_eq (p->C_SignRecoverInit (h, &pkcs, priv), CKR_OPERATION_ACTIVE);
    ck_assert_uint_eq (p->C_SignRecover (h, msg, sizeof msg, NULL, &len), CKR_OK);
    ck_assert_uint_eq (len, 256);
    len = 255;
    ck_assert_uint_eq (p->C_SignRecover (h, msg, sizeof msg, sig, &len), CKR_BUFFER_TOO_SMALL);
    ck_assert_uint_eq (p->C_SignRecover (h, msg, sizeof msg, sig, &len), CKR_OK);
    ck_assert_uint_eq (len, 256);
    ck_assert_uint_eq (s_openssl_recover (RSA_PKCS1_PADDING, sig, len, out), sizeof msg);
    ck_assert_mem_eq (out, msg, sizeof msg);
    ck_assert_uint_eq (p->C_SignRecover (h, msg, sizeof msg, sig, &len), CKR_OPERATION_NOT_INITIALIZED);
    ck_assert_uint_eq (p->C_SignRecoverInit (h, &pkcs, priv), CKR_OK);
    ck_assert_uint_eq (p->C_SignRecover (h, big, sizeof big, sig, &len), CKR_DATA_LEN_RANGE);   /* > k - 11 */
    ck_assert_uint_eq (p->C_SignRecover (h, msg, sizeof msg, sig, &len), CKR_OPERATION_NOT_INITIALIZED);
    /*  CKM_RSA_X_509: the data as a k-byte integer, sig = data^d mod n.  */
    RAND_bytes (block, sizeof block);
    block [0] = 0x01;                   /* below the modulus */
    ck_assert_uint_eq (p->C_SignRecoverInit (h, &x509, priv), CKR_OK);
    ck_assert_uint_eq (p->C_SignRecover (h, block, sizeof block, sig, &len), CKR_OK);
    ck_assert_uint_eq (s_openssl_recover (RSA_NO_PADDING, sig, len, out), 256);
    ck_assert_mem_eq (out, block, 256);
    /*  Verify with recovery, CKM_RSA_X_509: the k-byte integer back.  */
    ck_assert_uint_eq (p->C_VerifyRecoverInit (h, &x509, priv), CKR_KEY_FUNCTION_NOT_PERMITTED);
    ck_assert_uint_eq (p->C_VerifyRecoverInit (h, &x509, pub), CKR_OK);
    len = sizeof out;
    memset (out, 0, sizeof out);
    ck_assert_uint_eq (p->C_VerifyRecover (h, sig, 256, out, &len), CKR_OK);
    ck_assert_uint_eq (len, 256);
    ck_assert_mem_eq (out, block, 256);
    /*  CKM_RSA_PKCS on a signature OpenSSL made: the query gives the
        bound k - 11, a short buffer the exact length and keeps the
        operation.  */
    s_openssl_sign (msg, sizeof msg, sig);
    ck_assert_uint_eq (p->C_VerifyRecover (h, sig, 256, out, &len), CKR_OPERATION_NOT_INITIALIZED);
    ck_assert_uint_eq (p->C_VerifyRecoverInit (h, &pkcs, pub), CKR_OK);
    ck_assert_uint_eq (p->C_VerifyRecoverInit (h, &pkcs, pub), CKR_OPERATION_ACTIVE);
    ck_assert_uint_eq (p->C_VerifyRecover (h, sig, 256, NULL, &len), CKR_OK);
    ck_assert_uint_eq (len, 245);
    len = 5;
    ck_assert_uint_eq (p->C_VerifyRecover (h, sig, 256, out, &len), CKR_BUFFER_TOO_SMALL);
    ck_assert_uint_eq (len, sizeof msg);
    ck_assert_uint_eq (p->C_VerifyRecover (h, sig, 256, out, &len), CKR_OK);
    ck_assert_uint_eq (len, sizeof msg);
    ck_assert_mem_eq (out, msg, sizeof msg);
    ck_assert_uint_eq (p->C_VerifyRecover (h, sig, 256, out, &len), CKR_OPERATION_NOT_INITIALIZED);
    /*  A wrong signature and a short one end the operation with the
        spec's codes.  */
    sig [100] ^= 0x40;
    len = sizeof out;
    ck_assert_uint_eq (p->C_VerifyRecoverInit (h, &pkcs, pub), CKR_OK);
    ck_assert_uint_eq (p->C_VerifyRecover (h, sig, 256, out, &len), CKR_SIGNATURE_INVALID);
    ck_assert_uint_eq (p->C_VerifyRecover (h, sig, 256, out, &len), CKR_OPERATION_NOT_INITIALIZED);
    ck_assert_uint_eq (p->C_VerifyRecoverInit (h, &pkcs, pub), CKR_OK);
    ck_assert_uint_eq (p->C_VerifyRecover (h, sig, 128, out, &len), CKR_SIGNATURE_LEN_RANGE);
    ck_assert_uint_eq (p->C_VerifyRecover (h, sig, 256, out, &len), CKR_OPERATION_NOT_INITIALIZED);
    ck_assert_uint_eq (p->C_VerifyRecoverInit (h, &pkcs, pub), CKR_OK);
    ck_assert_uint_eq (p->C_VerifyRecover (h, sig, 256, out, NULL), CKR_ARGUMENTS_BAD);
    ck_assert_uint_eq (p->C_VerifyRecover (h, sig, 256, out, &len), CKR_OPERATION_NOT_INITIALIZED);
    /*  PKCS#11 3.0 C_SessionCancel ends them by their flags.  */
    CK_RV (*get_interface) (CK_UTF8CHAR_PTR, CK_VERSION_PTR, CK_INTERFACE_PTR_PTR, CK_FLAGS);
    CK_VERSION v30 = { 3, 0 };
    CK_INTERFACE *iface = NULL;
    *(void **) &get_interface = dlsym (s_dl, "C_GetInterface");
    ck_assert_uint_eq (get_interface ((CK_UTF8CHAR_PTR) "PKCS 11", &v30, &iface, 0), CKR_OK);
    CK_FUNCTION_LIST_3_0 *p3 = iface->pFunctionList;
    ck_assert_uint_eq (p->C_VerifyRecoverInit (h, &pkcs, pub), CKR_OK);
    ck_assert_uint_eq (p->C_SignRecoverInit (h, &pkcs, priv), CKR_OK);
    ck_assert_uint_eq (p3->C_SessionCancel (h, CKF_SIGN | CKF_VERIFY), CKR_OK);
    ck_assert_uint_eq (p->C_SignRecoverInit (h, &pkcs, priv), CKR_OPERATION_ACTIVE);
    ck_assert_uint_eq (p3->C_SessionCancel (h, CKF_SIGN_RECOVER | CKF_VERIFY_RECOVER), CKR_OK);
    ck_assert_uint_eq (p->C_VerifyRecover (h, sig, 256, out, &len), CKR_OPERATION_NOT_INITIALIZED);
    ck_assert_uint_eq (p->C_SignRecover (h, msg, sizeof msg, sig, &len), CKR_OPERATION_NOT_INITIALIZED);
    ck_assert_uint_eq (p->C_Finalize (NULL), CKR_OK);
}
END_TEST

int
main (void)
{
    Suite *suite = suite_create ("module_session");
    TCase *tc = tr_tcase ("session", s_setup, s_teardown);
    tcase_add_test (tc, test_last_session_logs_out);
    tcase_add_test (tc, test_login_while_last_session_closes);
    tcase_add_test (tc, test_mutex_callbacks);
    tcase_add_test (tc, test_random);
    tcase_add_test (tc, test_digest_key);
    tcase_add_test (tc, test_recover);
    suite_add_tcase (suite, tc);
    return tr_run (suite);
}
