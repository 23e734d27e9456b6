/*  test_module_conformance.c — the built cryptoserver-pkcs11.so, loaded with
 *  dlopen() as applications load it, against the whole broker in-process
 *  (server.h) on tcp://127.0.0.1:! with two sim boards: "fast" (key 01, no
 *  latency) and "slow" (key 02, S_SLOW_MS per signature).  Asserts the exact
 *  CK_RVs of PKCS#11 2.40 §5 and 3.0 §5.4/§5.6 for the rules in
 *  man cryptoserver-pkcs11(7) "CONFORMANCE": initialisation, arguments,
 *  slots, sessions and their states, login rules, the two-call length
 *  convention, operation life cycles, read-only sessions, the interface
 *  list, application mutex callbacks, C_Finalize racing threads blocked on
 *  the broker, and fork.  The module is $CRYPTOSERVER_MODULE_PATH, else
 *  $top_builddir/pkcs11-module/.libs/cryptoserver-pkcs11.so (make check).
 *  No sleeps: waits are condition variables with deadlines.
 */
#include <errno.h>
#include <pthread.h>
#include <sys/wait.h>
#include <time.h>
#include <openssl/x509.h>
#include "test_module_fixture.h"
#include "cs_p11_3.h"
#include "cryptoserver/pkcs11v.h"
#include "test_run.h"

#define S_SLOW_MS 3000

static char *s_dir;
static EVP_PKEY *s_fast_key;
static broker_config_t *s_config;
static server_t *s_server;
static void *s_dl;
static CK_FUNCTION_LIST *p;             /* the 2.40 list */
static CK_RV (*s_get_interface_list) (CK_INTERFACE_PTR, CK_ULONG_PTR);
static CK_RV (*s_get_interface) (CK_UTF8CHAR_PTR, CK_VERSION_PTR, CK_INTERFACE_PTR_PTR, CK_FLAGS);
static CK_UTF8CHAR s_user_pin [] = "1234", s_so_pin [] = "123456";
static const CK_BYTE s_id_fast [] = { 0x01 }, s_id_slow [] = { 0x02 };

/*  ---- fixture --------------------------------------------------------- */

/*  The module and its 3.0 interface functions (C_GetFunctionList,
 *  C_GetInterfaceList and C_GetInterface are all it exports).  */
static void
s_load_module (void)
{
    s_dl = tm_module_open (&p);
    *(void **) &s_get_interface_list = dlsym (s_dl, "C_GetInterfaceList");
    *(void **) &s_get_interface = dlsym (s_dl, "C_GetInterface");
    ck_assert (s_get_interface_list && s_get_interface);
    ck_assert_ptr_null (dlsym (s_dl, "C_Sign"));            /* only the three are exported */
}

static void
s_setup (void)
{
    EVP_PKEY *slow;
    s_dir = th_tmpdir ();
    s_fast_key = th_key_pem (s_dir, "fast.pem", 2048);
    slow = th_key_pem (s_dir, "slow.pem", 2048);
    EVP_PKEY_free (slow);
    th_certs (s_dir, "app", "demo");
    th_keystore (s_dir);
    tb_conf_write (s_dir, "",
        "drivers\n"
        "    fast\n        type = sim\n        key-file = fast.pem\n        key-id = 01\n"
        "        threads = 2\n        tenant = demo\n"
        "    slow\n        type = sim\n        key-file = slow.pem\n        key-id = 02\n"
        "        latency-ms = %d\n        threads = 4\n        coprocessors = 4\n        tenant = demo\n",
        S_SLOW_MS);
    s_server = tb_start (s_dir, &s_config);
    tm_client_conf (s_dir, server_endpoint (s_server), 20000);
    s_load_module ();
}

static void
s_teardown (void)
{
    tm_module_close (&p, &s_dl);
    tb_stop (&s_server, &s_config);
    EVP_PKEY_free (s_fast_key);
    th_tmpdir_remove (&s_dir);
}

/*  ---- helpers --------------------------------------------------------- */

/*  The private key object with CKA_ID id (the user is logged in).  */
static CK_OBJECT_HANDLE
s_find_key (CK_SESSION_HANDLE h, const CK_BYTE *id)
{
    CK_OBJECT_CLASS klass = CKO_PRIVATE_KEY;
    CK_ATTRIBUTE tmpl [] = { { CKA_CLASS, &klass, sizeof klass }, { CKA_ID, (void *) id, 1 } };
    CK_OBJECT_HANDLE key = 0;
    CK_ULONG count = 0;
    ck_assert_uint_eq (p->C_FindObjectsInit (h, tmpl, 2), CKR_OK);
    ck_assert_uint_eq (p->C_FindObjectsInit (h, tmpl, 2), CKR_OPERATION_ACTIVE);
    ck_assert_uint_eq (p->C_FindObjects (h, &key, 1, &count), CKR_OK);
    ck_assert_uint_eq (count, 1);
    ck_assert_uint_eq (p->C_FindObjectsFinal (h), CKR_OK);
    ck_assert_uint_eq (p->C_FindObjectsFinal (h), CKR_OPERATION_NOT_INITIALIZED);
    ck_assert_uint_eq (p->C_FindObjects (h, &key, 1, &count), CKR_OPERATION_NOT_INITIALIZED);
    return key;
}

/*  A session RSA public key object made from `pkey`'s n and e.  */
static CK_OBJECT_HANDLE
s_public_key (CK_SESSION_HANDLE h, EVP_PKEY *pkey)
{
    static uint8_t n [512], e [8];
    BIGNUM *bn_n = NULL, *bn_e = NULL;
    CK_OBJECT_CLASS klass = CKO_PUBLIC_KEY;
    CK_KEY_TYPE type = CKK_RSA;
    CK_BBOOL yes = CK_TRUE, no = CK_FALSE;
    CK_OBJECT_HANDLE key = 0;
    ck_assert (EVP_PKEY_get_bn_param (pkey, "n", &bn_n) && EVP_PKEY_get_bn_param (pkey, "e", &bn_e));
    CK_ATTRIBUTE tmpl [] = {
        { CKA_CLASS, &klass, sizeof klass }, { CKA_KEY_TYPE, &type, sizeof type },
        { CKA_TOKEN, &no, sizeof no }, { CKA_VERIFY, &yes, sizeof yes },
        { CKA_MODULUS, n, (CK_ULONG) BN_bn2bin (bn_n, n) },
        { CKA_PUBLIC_EXPONENT, e, (CK_ULONG) BN_bn2bin (bn_e, e) },
    };
    BN_free (bn_n);
    BN_free (bn_e);
    ck_assert_uint_eq (p->C_CreateObject (h, tmpl, 6, &key), CKR_OK);
    return key;
}

/*  ---- initialisation -------------------------------------------------- */

/*  A representative call of each family before C_Initialize / after C_Finalize.  */
static void
s_assert_not_initialized (void)
{
    CK_INFO info;
    CK_ULONG count = 0;
    CK_SESSION_HANDLE h = 0;
    CK_SLOT_ID slot;
    CK_BYTE buf [8];
    CK_MECHANISM mech = { CKM_SHA256, NULL, 0 };
    ck_assert_uint_eq (p->C_GetInfo (&info), CKR_CRYPTOKI_NOT_INITIALIZED);
    ck_assert_uint_eq (p->C_GetSlotList (CK_TRUE, NULL, &count), CKR_CRYPTOKI_NOT_INITIALIZED);
    ck_assert_uint_eq (p->C_OpenSession (0, CKF_SERIAL_SESSION, NULL, NULL, &h), CKR_CRYPTOKI_NOT_INITIALIZED);
    ck_assert_uint_eq (p->C_CloseSession (1), CKR_CRYPTOKI_NOT_INITIALIZED);
    ck_assert_uint_eq (p->C_Login (1, CKU_USER, s_user_pin, 4), CKR_CRYPTOKI_NOT_INITIALIZED);
    ck_assert_uint_eq (p->C_DigestInit (1, &mech), CKR_CRYPTOKI_NOT_INITIALIZED);
    ck_assert_uint_eq (p->C_Sign (1, buf, 1, NULL, &count), CKR_CRYPTOKI_NOT_INITIALIZED);
    ck_assert_uint_eq (p->C_GenerateRandom (1, buf, sizeof buf), CKR_CRYPTOKI_NOT_INITIALIZED);
    ck_assert_uint_eq (p->C_GetOperationState (1, NULL, &count), CKR_CRYPTOKI_NOT_INITIALIZED);
    ck_assert_uint_eq (p->C_GetFunctionStatus (1), CKR_CRYPTOKI_NOT_INITIALIZED);
    ck_assert_uint_eq (p->C_WaitForSlotEvent (CKF_DONT_BLOCK, &slot, NULL), CKR_CRYPTOKI_NOT_INITIALIZED);
    ck_assert_uint_eq (p->C_Finalize (NULL), CKR_CRYPTOKI_NOT_INITIALIZED);
}

START_TEST (test_initialize)
{
    CK_C_INITIALIZE_ARGS args = { 0 };
    CK_INFO info;
    s_assert_not_initialized ();
    args.pReserved = &args;
    ck_assert_uint_eq (p->C_Initialize (&args), CKR_ARGUMENTS_BAD);
    args.pReserved = NULL;
    args.CreateMutex = (CK_CREATEMUTEX) 1;          /* one callback of four */
    ck_assert_uint_eq (p->C_Initialize (&args), CKR_ARGUMENTS_BAD);
    s_assert_not_initialized ();
    ck_assert_uint_eq (p->C_Initialize (NULL), CKR_OK);
    ck_assert_uint_eq (p->C_Initialize (NULL), CKR_CRYPTOKI_ALREADY_INITIALIZED);
    ck_assert_uint_eq (p->C_GetInfo (NULL), CKR_ARGUMENTS_BAD);
    ck_assert_uint_eq (p->C_GetInfo (&info), CKR_OK);
    ck_assert_uint_eq (info.cryptokiVersion.major, 2);
    ck_assert_uint_eq (info.cryptokiVersion.minor, 40);
    ck_assert_uint_eq (info.flags, 0);
    ck_assert_uint_eq (p->C_Finalize (&args), CKR_ARGUMENTS_BAD);
    ck_assert_uint_eq (p->C_Finalize (NULL), CKR_OK);
    s_assert_not_initialized ();
    ck_assert_uint_eq (p->C_Initialize (NULL), CKR_OK);    /* again, with a fresh link */
    ck_assert_uint_eq (p->C_GetInfo (&info), CKR_OK);
    ck_assert_uint_eq (p->C_Finalize (NULL), CKR_OK);
}
END_TEST

/*  ---- interfaces (PKCS#11 3.0 §5.4) ------------------------------------ */

START_TEST (test_interfaces)
{
    CK_INTERFACE list [4], *iface = NULL;
    CK_ULONG count = 0;
    CK_VERSION v240 = { 2, 40 }, v30 = { 3, 0 }, v31 = { 3, 1 };
    CK_FUNCTION_LIST_3_0 *p3;
    CK_INFO info;
    CK_SESSION_HANDLE h;
    CK_BYTE buf [4];
    /*  Before C_Initialize: the list, two calls.  */
    ck_assert_uint_eq (s_get_interface_list (NULL, NULL), CKR_ARGUMENTS_BAD);
    ck_assert_uint_eq (s_get_interface_list (NULL, &count), CKR_OK);
    ck_assert_uint_eq (count, 3);
    count = 2;
    ck_assert_uint_eq (s_get_interface_list (list, &count), CKR_BUFFER_TOO_SMALL);
    ck_assert_uint_eq (count, 3);
    count = 4;
    ck_assert_uint_eq (s_get_interface_list (list, &count), CKR_OK);
    ck_assert_uint_eq (count, 3);
    for (int i = 0; i < 3; i++) {
        ck_assert_str_eq ((char *) list [i].pInterfaceName, "PKCS 11");
        ck_assert_uint_eq (list [i].flags, 0);      /* not CKF_INTERFACE_FORK_SAFE */
    }
    ck_assert_uint_eq (((CK_VERSION *) list [0].pFunctionList)->major, 3);
    ck_assert_uint_eq (((CK_VERSION *) list [0].pFunctionList)->minor, 2);
    ck_assert_uint_eq (((CK_VERSION *) list [1].pFunctionList)->major, 3);
    ck_assert_uint_eq (((CK_VERSION *) list [1].pFunctionList)->minor, 0);
    ck_assert_ptr_eq (list [2].pFunctionList, p);
    ck_assert_uint_eq (p->version.major, 2);
    ck_assert_uint_eq (p->version.minor, 40);
    /*  C_GetInterface: default, by name and version, refusals.  */
    ck_assert_uint_eq (s_get_interface (NULL, NULL, NULL, 0), CKR_ARGUMENTS_BAD);
    ck_assert_uint_eq (s_get_interface (NULL, NULL, &iface, 0), CKR_OK);
    ck_assert_ptr_eq (iface->pFunctionList, list [0].pFunctionList);
    ck_assert_uint_eq (s_get_interface ((CK_UTF8CHAR_PTR) "PKCS 11", &v240, &iface, 0), CKR_OK);
    ck_assert_ptr_eq (iface->pFunctionList, p);
    ck_assert_uint_eq (s_get_interface ((CK_UTF8CHAR_PTR) "PKCS 11", &v30, &iface, 0), CKR_OK);
    p3 = iface->pFunctionList;
    ck_assert_uint_eq (s_get_interface ((CK_UTF8CHAR_PTR) "PKCS 11", &v31, &iface, 0), CKR_ARGUMENTS_BAD);
    ck_assert_uint_eq (s_get_interface ((CK_UTF8CHAR_PTR) "Vendor X", NULL, &iface, 0), CKR_ARGUMENTS_BAD);
    ck_assert_uint_eq (s_get_interface (NULL, NULL, &iface, CKF_INTERFACE_FORK_SAFE), CKR_ARGUMENTS_BAD);
    ck_assert_ptr_eq (p3->C_GetInterfaceList, s_get_interface_list);
    ck_assert_ptr_eq (p3->C_GetInterface, s_get_interface);
    /*  C_GetInfo reports the version of the list it is called through.  */
    ck_assert_uint_eq (p3->C_GetInfo (&info), CKR_CRYPTOKI_NOT_INITIALIZED);
    ck_assert_uint_eq (p3->C_SessionCancel (1, CKF_SIGN), CKR_CRYPTOKI_NOT_INITIALIZED);
    ck_assert_uint_eq (p3->C_Initialize (NULL), CKR_OK);
    ck_assert_uint_eq (p3->C_GetInfo (&info), CKR_OK);
    ck_assert_uint_eq (info.cryptokiVersion.major, 3);
    ck_assert_uint_eq (info.cryptokiVersion.minor, 0);
    ck_assert_uint_eq (p->C_GetInfo (&info), CKR_OK);
    ck_assert_uint_eq (info.cryptokiVersion.major, 2);
    ck_assert_uint_eq (info.cryptokiVersion.minor, 40);
    /*  3.0 functions.  */
    h = tm_open (p, 0);
    ck_assert_uint_eq (p3->C_MessageSignInit (h, NULL, 0), CKR_FUNCTION_NOT_SUPPORTED);
    ck_assert_uint_eq (p3->C_SignMessage (h, NULL, 0, buf, 1, buf, &count), CKR_FUNCTION_NOT_SUPPORTED);
    ck_assert_uint_eq (p3->C_EncryptMessage (h, NULL, 0, NULL, 0, buf, 1, buf, &count),
                       CKR_FUNCTION_NOT_SUPPORTED);
    ck_assert_uint_eq (p3->C_MessageVerifyFinal (h), CKR_FUNCTION_NOT_SUPPORTED);
    ck_assert_uint_eq (p3->C_LoginUser (h, CKU_USER, s_user_pin, 4, (CK_UTF8CHAR_PTR) "bob", 3),
                       CKR_ARGUMENTS_BAD);
    ck_assert_uint_eq (p3->C_LoginUser (h + 100, CKU_USER, s_user_pin, 4, NULL, 0), CKR_SESSION_HANDLE_INVALID);
    ck_assert_uint_eq (tm_state (p, h), CKS_RO_PUBLIC_SESSION);
    ck_assert_uint_eq (p3->C_LoginUser (h, CKU_USER, s_user_pin, 4, NULL, 0), CKR_OK);
    ck_assert_uint_eq (tm_state (p, h), CKS_RO_USER_FUNCTIONS);
    /*  C_SessionCancel ends what its flags name; other flags are ignored.  */
    CK_MECHANISM digest = { CKM_SHA256, NULL, 0 }, sign = { CKM_SHA256_RSA_PKCS, NULL, 0 };
    CK_OBJECT_HANDLE key = s_find_key (h, s_id_fast);
    ck_assert_uint_eq (p3->C_SessionCancel (h + 100, CKF_SIGN), CKR_SESSION_HANDLE_INVALID);
    ck_assert_uint_eq (p3->C_DigestInit (h, &digest), CKR_OK);
    ck_assert_uint_eq (p3->C_SignInit (h, &sign, key), CKR_OK);
    ck_assert_uint_eq (p3->C_SessionCancel (h, 0), CKR_OK);
    ck_assert_uint_eq (p3->C_SignInit (h, &sign, key), CKR_OPERATION_ACTIVE);
    ck_assert_uint_eq (p3->C_SessionCancel (h, CKF_SIGN | CKF_DECRYPT | CKF_SIGN_RECOVER), CKR_OK);
    ck_assert_uint_eq (p3->C_SignInit (h, &sign, key), CKR_OK);
    ck_assert_uint_eq (p3->C_DigestInit (h, &digest), CKR_OPERATION_ACTIVE);
    ck_assert_uint_eq (p3->C_SessionCancel (h, CKF_DIGEST | CKF_SIGN), CKR_OK);
    ck_assert_uint_eq (p3->C_DigestUpdate (h, buf, 1), CKR_OPERATION_NOT_INITIALIZED);
    ck_assert_uint_eq (p3->C_SignUpdate (h, buf, 1), CKR_OPERATION_NOT_INITIALIZED);
    ck_assert_uint_eq (p3->C_Finalize (NULL), CKR_OK);
    ck_assert_uint_eq (p3->C_MessageSignInit (h, NULL, 0), CKR_CRYPTOKI_NOT_INITIALIZED);
}
END_TEST

/*  ---- slots, sessions, login (PKCS#11 2.40 §5.5, §5.6) ------------------ */

/*  ---- PKCS#11 3.2 ------------------------------------------------------ */

/*  The 3.2 list: cryptokiVersion 3.2, signature-first verification
 *  (C_VerifySignature*: single and multi-part, a wrong signature, the two
 *  kinds of verification kept apart, a signature of an ended operation never
 *  reused), C_GetSessionValidationFlags, and the 3.2 refusals (asynchronous
 *  sessions, KEM, authenticated wrapping).  */
START_TEST (test_interface_3_2)
{
    CK_VERSION v32 = { 3, 2 };
    CK_INTERFACE *iface = NULL;
    CK_FUNCTION_LIST_3_2 *p32;
    CK_INFO info;
    CK_SESSION_HANDLE h, async = 0;
    CK_MECHANISM sha256_rsa = { CKM_SHA256_RSA_PKCS, NULL, 0 };
    CK_BYTE msg [] = "signature first", other [] = "signature fiRst", sig [256], wrong [256], ct [8];
    CK_ULONG sig_len = sizeof sig, ct_len = sizeof ct;
    CK_FLAGS flags = 99;
    CK_OBJECT_HANDLE priv, pub, secret = 0;
    ck_assert_uint_eq (s_get_interface (NULL, NULL, &iface, 0), CKR_OK);
    ck_assert_uint_eq (((CK_VERSION *) iface->pFunctionList)->minor, 2);    /* the default */
    ck_assert_uint_eq (s_get_interface ((CK_UTF8CHAR_PTR) "PKCS 11", &v32, &iface, 0), CKR_OK);
    p32 = iface->pFunctionList;
    ck_assert_uint_eq (p32->C_VerifySignature (1, msg, 1), CKR_CRYPTOKI_NOT_INITIALIZED);
    ck_assert_uint_eq (p32->C_Initialize (NULL), CKR_OK);
    ck_assert_uint_eq (p32->C_GetInfo (&info), CKR_OK);
    ck_assert_uint_eq (info.cryptokiVersion.major, 3);
    ck_assert_uint_eq (info.cryptokiVersion.minor, 2);
    ck_assert_uint_eq (p32->C_OpenSession (0, CKF_SERIAL_SESSION | CKF_ASYNC_SESSION, NULL, NULL, &async),
                       CKR_OK);                 /* 3.2 asynchronous sessions (async.h) */
    ck_assert_uint_eq (p32->C_AsyncComplete (async, (CK_UTF8CHAR_PTR) "C_Sign", NULL), CKR_OPERATION_NOT_INITIALIZED);
    ck_assert_uint_eq (p32->C_CloseSession (async), CKR_OK);
    h = tm_open (p, 0);
    ck_assert_uint_eq (p32->C_Login (h, CKU_USER, s_user_pin, 4), CKR_OK);
    priv = s_find_key (h, s_id_fast);
    pub = s_public_key (h, s_fast_key);
    ck_assert_uint_eq (p32->C_SignInit (h, &sha256_rsa, priv), CKR_OK);
    ck_assert_uint_eq (p32->C_Sign (h, msg, sizeof msg, sig, &sig_len), CKR_OK);
    memcpy (wrong, sig, sizeof wrong);
    wrong [100] ^= 1;
    /*  Single part.  */
    ck_assert_uint_eq (p32->C_VerifySignature (h, msg, sizeof msg), CKR_OPERATION_NOT_INITIALIZED);
    ck_assert_uint_eq (p32->C_VerifySignatureInit (h, &sha256_rsa, pub, NULL, 4), CKR_ARGUMENTS_BAD);
    ck_assert_uint_eq (p32->C_VerifySignatureInit (h, &sha256_rsa, pub, sig, sig_len), CKR_OK);
    ck_assert_uint_eq (p32->C_VerifySignatureInit (h, &sha256_rsa, pub, sig, sig_len), CKR_OPERATION_ACTIVE);
    ck_assert_uint_eq (p32->C_VerifySignature (h, NULL, 4), CKR_ARGUMENTS_BAD);
    ck_assert_uint_eq (p32->C_VerifySignature (h, msg, sizeof msg), CKR_OK);
    ck_assert_uint_eq (p32->C_VerifySignature (h, msg, sizeof msg), CKR_OPERATION_NOT_INITIALIZED);
    ck_assert_uint_eq (p32->C_VerifySignatureInit (h, &sha256_rsa, pub, sig, sig_len), CKR_OK);
    ck_assert_uint_eq (p32->C_VerifySignature (h, other, sizeof other), CKR_SIGNATURE_INVALID);
    ck_assert_uint_eq (p32->C_VerifySignatureInit (h, &sha256_rsa, pub, wrong, sig_len), CKR_OK);
    ck_assert_uint_eq (p32->C_VerifySignature (h, msg, sizeof msg), CKR_SIGNATURE_INVALID);
    ck_assert_uint_eq (p32->C_VerifySignatureInit (h, &sha256_rsa, pub, sig, 128), CKR_OK);
    ck_assert_uint_eq (p32->C_VerifySignature (h, msg, sizeof msg), CKR_SIGNATURE_LEN_RANGE);
    /*  Multi-part.  */
    ck_assert_uint_eq (p32->C_VerifySignatureUpdate (h, msg, 4), CKR_OPERATION_NOT_INITIALIZED);
    ck_assert_uint_eq (p32->C_VerifySignatureFinal (h), CKR_OPERATION_NOT_INITIALIZED);
    ck_assert_uint_eq (p32->C_VerifySignatureInit (h, &sha256_rsa, pub, sig, sig_len), CKR_OK);
    ck_assert_uint_eq (p32->C_VerifySignatureUpdate (h, msg, 4), CKR_OK);
    ck_assert_uint_eq (p32->C_VerifySignatureUpdate (h, msg + 4, sizeof msg - 4), CKR_OK);
    ck_assert_uint_eq (p32->C_VerifySignatureFinal (h), CKR_OK);
    ck_assert_uint_eq (p32->C_VerifySignatureFinal (h), CKR_OPERATION_NOT_INITIALIZED);
    ck_assert_uint_eq (p32->C_VerifySignatureInit (h, &sha256_rsa, pub, sig, sig_len), CKR_OK);
    ck_assert_uint_eq (p32->C_VerifySignatureUpdate (h, other, sizeof other), CKR_OK);
    ck_assert_uint_eq (p32->C_VerifySignatureFinal (h), CKR_SIGNATURE_INVALID);
    /*  An operation begun with C_VerifyInit has no signature to check: it
     *  stays for C_Verify.  */
    ck_assert_uint_eq (p32->C_VerifyInit (h, &sha256_rsa, pub), CKR_OK);
    ck_assert_uint_eq (p32->C_VerifySignature (h, msg, sizeof msg), CKR_OPERATION_NOT_INITIALIZED);
    ck_assert_uint_eq (p32->C_Verify (h, msg, sizeof msg, sig, sig_len), CKR_OK);
    /*  The signature of a cancelled, or otherwise ended, signature-first
     *  operation is never taken for a later C_VerifyInit's.  */
    ck_assert_uint_eq (p32->C_VerifySignatureInit (h, &sha256_rsa, pub, sig, sig_len), CKR_OK);
    ck_assert_uint_eq (p32->C_SessionCancel (h, CKF_VERIFY), CKR_OK);
    ck_assert_uint_eq (p32->C_VerifySignature (h, msg, sizeof msg), CKR_OPERATION_NOT_INITIALIZED);
    ck_assert_uint_eq (p32->C_VerifySignatureInit (h, &sha256_rsa, pub, sig, sig_len), CKR_OK);
    ck_assert_uint_eq (p32->C_VerifyFinal (h, wrong, sig_len), CKR_SIGNATURE_INVALID);  /* ends it */
    ck_assert_uint_eq (p32->C_VerifyInit (h, &sha256_rsa, pub), CKR_OK);
    ck_assert_uint_eq (p32->C_VerifySignature (h, msg, sizeof msg), CKR_OPERATION_NOT_INITIALIZED);
    ck_assert_uint_eq (p32->C_SessionCancel (h, CKF_VERIFY), CKR_OK);
    /*  Validation flags: no validation object, so none.  */
    ck_assert_uint_eq (p32->C_GetSessionValidationFlags (h, CKS_LAST_VALIDATION_OK, &flags), CKR_OK);
    ck_assert_uint_eq (flags, 0);
    ck_assert_uint_eq (p32->C_GetSessionValidationFlags (h, CKS_LAST_VALIDATION_OK, NULL), CKR_ARGUMENTS_BAD);
    ck_assert_uint_eq (p32->C_GetSessionValidationFlags (h, 7, &flags), CKR_ARGUMENTS_BAD);
    ck_assert_uint_eq (p32->C_GetSessionValidationFlags (h + 100, CKS_LAST_VALIDATION_OK, &flags),
                       CKR_SESSION_HANDLE_INVALID);
    /*  The KEM functions take CKM_ML_KEM only (issue #23, kem.h).  */
    ck_assert_uint_eq (p32->C_EncapsulateKey (h, &sha256_rsa, pub, NULL, 0, ct, &ct_len, &secret),
                       CKR_MECHANISM_INVALID);
    /*  A session that waits joins nothing (async.h).  */
    ck_assert_uint_eq (p32->C_AsyncJoin (h, (CK_UTF8CHAR_PTR) "C_Sign", 1, NULL, 0), CKR_SESSION_ASYNC_NOT_SUPPORTED);
    ck_assert_uint_eq (p32->C_Finalize (NULL), CKR_OK);
    ck_assert_uint_eq (p32->C_GetSessionValidationFlags (h, CKS_LAST_VALIDATION_OK, &flags),
                       CKR_CRYPTOKI_NOT_INITIALIZED);
}
END_TEST

START_TEST (test_slots_and_sessions)
{
    CK_SLOT_ID slots [2];
    CK_ULONG count = 0, n_mechs = 0;
    CK_SLOT_INFO slot_info;
    CK_TOKEN_INFO token_info;
    CK_SESSION_HANDLE ro, rw, h;
    CK_MECHANISM_TYPE mechs [64];
    CK_MECHANISM_INFO mech_info;
    ck_assert_uint_eq (p->C_Initialize (NULL), CKR_OK);
    /*  Slot list, two calls.  */
    ck_assert_uint_eq (p->C_GetSlotList (CK_TRUE, NULL, NULL), CKR_ARGUMENTS_BAD);
    ck_assert_uint_eq (p->C_GetSlotList (CK_TRUE, NULL, &count), CKR_OK);
    ck_assert_uint_eq (count, 1);
    count = 0;
    ck_assert_uint_eq (p->C_GetSlotList (CK_FALSE, slots, &count), CKR_BUFFER_TOO_SMALL);
    ck_assert_uint_eq (count, 1);
    count = 2;
    ck_assert_uint_eq (p->C_GetSlotList (CK_FALSE, slots, &count), CKR_OK);
    ck_assert_uint_eq (count, 1);
    ck_assert_uint_eq (slots [0], 0);
    /*  Slot ids and NULL outputs.  */
    ck_assert_uint_eq (p->C_GetSlotInfo (7, &slot_info), CKR_SLOT_ID_INVALID);
    ck_assert_uint_eq (p->C_GetSlotInfo (0, NULL), CKR_ARGUMENTS_BAD);
    ck_assert_uint_eq (p->C_GetTokenInfo (7, &token_info), CKR_SLOT_ID_INVALID);
    ck_assert_uint_eq (p->C_GetTokenInfo (0, NULL), CKR_ARGUMENTS_BAD);
    ck_assert_uint_eq (p->C_GetTokenInfo (0, &token_info), CKR_OK);
    ck_assert (token_info.flags & CKF_TOKEN_INITIALIZED);
    ck_assert_uint_eq (p->C_GetMechanismList (7, NULL, &n_mechs), CKR_SLOT_ID_INVALID);
    ck_assert_uint_eq (p->C_GetMechanismList (0, NULL, NULL), CKR_ARGUMENTS_BAD);
    ck_assert_uint_eq (p->C_GetMechanismList (0, NULL, &n_mechs), CKR_OK);
    ck_assert_uint_gt (n_mechs, 1);
    ck_assert_uint_le (n_mechs, 64);
    count = n_mechs - 1;
    ck_assert_uint_eq (p->C_GetMechanismList (0, mechs, &count), CKR_BUFFER_TOO_SMALL);
    ck_assert_uint_eq (count, n_mechs);
    ck_assert_uint_eq (p->C_GetMechanismList (0, mechs, &count), CKR_OK);
    ck_assert_uint_eq (p->C_GetMechanismInfo (0, mechs [0], NULL), CKR_ARGUMENTS_BAD);
    ck_assert_uint_eq (p->C_GetMechanismInfo (7, mechs [0], &mech_info), CKR_SLOT_ID_INVALID);
    ck_assert_uint_eq (p->C_GetMechanismInfo (0, CKM_VENDOR_DEFINED + 5, &mech_info), CKR_MECHANISM_INVALID);
    /*  Opening sessions.  */
    ck_assert_uint_eq (p->C_OpenSession (7, CKF_SERIAL_SESSION, NULL, NULL, &h), CKR_SLOT_ID_INVALID);
    ck_assert_uint_eq (p->C_OpenSession (0, 0, NULL, NULL, &h), CKR_SESSION_PARALLEL_NOT_SUPPORTED);
    ck_assert_uint_eq (p->C_OpenSession (0, CKF_SERIAL_SESSION, NULL, NULL, NULL), CKR_ARGUMENTS_BAD);
    ck_assert_uint_eq (p->C_CloseAllSessions (7), CKR_SLOT_ID_INVALID);
    ro = tm_open (p, 0);
    rw = tm_open (p, CKF_RW_SESSION);
    CK_SESSION_INFO session_info;
    ck_assert_uint_eq (p->C_GetSessionInfo (rw + 100, &session_info), CKR_SESSION_HANDLE_INVALID);
    ck_assert_uint_eq (p->C_GetSessionInfo (rw, NULL), CKR_ARGUMENTS_BAD);
    ck_assert_uint_eq (p->C_CloseSession (rw + 100), CKR_SESSION_HANDLE_INVALID);
    ck_assert_uint_eq (tm_state (p, ro), CKS_RO_PUBLIC_SESSION);
    ck_assert_uint_eq (tm_state (p, rw), CKS_RW_PUBLIC_SESSION);
    ck_assert_uint_eq (p->C_GetTokenInfo (0, &token_info), CKR_OK);
    ck_assert_uint_eq (token_info.ulSessionCount, 2);
    ck_assert_uint_eq (token_info.ulRwSessionCount, 1);
    /*  Login rules.  */
    ck_assert_uint_eq (p->C_Logout (ro), CKR_USER_NOT_LOGGED_IN);
    ck_assert_uint_eq (p->C_Login (ro, 77, s_user_pin, 4), CKR_USER_TYPE_INVALID);
    ck_assert_uint_eq (p->C_Login (ro, CKU_USER, NULL, 4), CKR_ARGUMENTS_BAD);
    ck_assert_uint_eq (p->C_Login (ro, CKU_USER, (CK_UTF8CHAR_PTR) "9999", 4), CKR_PIN_INCORRECT);
    ck_assert_uint_eq (p->C_Login (ro + 100, CKU_USER, s_user_pin, 4), CKR_SESSION_HANDLE_INVALID);
    ck_assert_uint_eq (p->C_Login (ro, CKU_SO, s_so_pin, 6), CKR_SESSION_READ_ONLY_EXISTS);
    ck_assert_uint_eq (p->C_Login (ro, CKU_USER, s_user_pin, 4), CKR_OK);
    ck_assert_uint_eq (tm_state (p, ro), CKS_RO_USER_FUNCTIONS);
    ck_assert_uint_eq (tm_state (p, rw), CKS_RW_USER_FUNCTIONS);
    ck_assert_uint_eq (p->C_Login (rw, CKU_USER, s_user_pin, 4), CKR_USER_ALREADY_LOGGED_IN);
    ck_assert_uint_eq (p->C_Login (rw, CKU_SO, s_so_pin, 6), CKR_USER_ANOTHER_ALREADY_LOGGED_IN);
    ck_assert_uint_eq (p->C_Logout (rw), CKR_OK);
    ck_assert_uint_eq (tm_state (p, ro), CKS_RO_PUBLIC_SESSION);
    /*  The SO: only without R/O sessions, and then no R/O session opens.  */
    ck_assert_uint_eq (p->C_CloseSession (ro), CKR_OK);
    ck_assert_uint_eq (p->C_CloseSession (ro), CKR_SESSION_HANDLE_INVALID);
    ck_assert_uint_eq (p->C_Login (rw, CKU_SO, s_so_pin, 6), CKR_OK);
    ck_assert_uint_eq (tm_state (p, rw), CKS_RW_SO_FUNCTIONS);
    ck_assert_uint_eq (p->C_OpenSession (0, CKF_SERIAL_SESSION, NULL, NULL, &h), CKR_SESSION_READ_WRITE_SO_EXISTS);
    ck_assert_uint_eq (p->C_Login (rw, CKU_USER, s_user_pin, 4), CKR_USER_ANOTHER_ALREADY_LOGGED_IN);
    /*  Closing the last session logs out (§5.6 C_CloseSession).  */
    ck_assert_uint_eq (p->C_CloseAllSessions (0), CKR_OK);
    rw = tm_open (p, CKF_RW_SESSION);
    ck_assert_uint_eq (tm_state (p, rw), CKS_RW_PUBLIC_SESSION);
    ck_assert_uint_eq (p->C_Finalize (NULL), CKR_OK);
}
END_TEST

/*  ---- R/O sessions (PKCS#11 2.40 §5.6, §5.7) ---------------------------- */

START_TEST (test_read_only)
{
    CK_SESSION_HANDLE ro;
    CK_OBJECT_HANDLE key, pub, created = 0;
    static uint8_t n [256] = { 0xc1 }, e [3] = { 1, 0, 1 };
    CK_OBJECT_CLASS klass = CKO_PUBLIC_KEY;
    CK_KEY_TYPE type = CKK_RSA;
    CK_BBOOL yes = CK_TRUE;
    CK_UTF8CHAR label [] = "x";
    CK_ATTRIBUTE tmpl [] = {
        { CKA_CLASS, &klass, sizeof klass }, { CKA_KEY_TYPE, &type, sizeof type },
        { CKA_TOKEN, &yes, sizeof yes }, { CKA_MODULUS, n, sizeof n }, { CKA_PUBLIC_EXPONENT, e, sizeof e },
    };
    CK_ATTRIBUTE set [] = { { CKA_LABEL, label, 1 } };
    n [255] = 1;
    ck_assert_uint_eq (p->C_Initialize (NULL), CKR_OK);
    ro = tm_open (p, 0);
    ck_assert_uint_eq (p->C_InitPIN (ro, s_user_pin, 4), CKR_SESSION_READ_ONLY);
    ck_assert_uint_eq (p->C_SetPIN (ro, s_user_pin, 4, (CK_UTF8CHAR_PTR) "5555", 4), CKR_SESSION_READ_ONLY);
    ck_assert_uint_eq (p->C_Login (ro, CKU_USER, s_user_pin, 4), CKR_OK);
    key = s_find_key (ro, s_id_fast);
    ck_assert_uint_eq (p->C_CreateObject (ro, tmpl, 5, &created), CKR_SESSION_READ_ONLY);
    ck_assert_uint_eq (p->C_DestroyObject (ro, key), CKR_SESSION_READ_ONLY);
    ck_assert_uint_eq (p->C_SetAttributeValue (ro, key, set, 1), CKR_SESSION_READ_ONLY);
    CK_MECHANISM gen = { CKM_RSA_PKCS_KEY_PAIR_GEN, NULL, 0 };
    CK_ULONG bits = 2048;
    CK_ATTRIBUTE pub_tmpl [] = { { CKA_TOKEN, &yes, sizeof yes }, { CKA_MODULUS_BITS, &bits, sizeof bits } };
    CK_ATTRIBUTE priv_tmpl [] = { { CKA_TOKEN, &yes, sizeof yes } };
    CK_OBJECT_HANDLE gen_pub = 0, gen_priv = 0;
    ck_assert_uint_eq (p->C_GenerateKeyPair (ro, &gen, pub_tmpl, 2, priv_tmpl, 1, &gen_pub, &gen_priv),
                       CKR_SESSION_READ_ONLY);
    /*  Session objects are fine in a R/O session; making one a token object is not.  */
    pub = s_public_key (ro, s_fast_key);
    ck_assert_uint_eq (p->C_CopyObject (ro, pub, &tmpl [2], 1, &created), CKR_SESSION_READ_ONLY);
    ck_assert_uint_eq (created, 0);
    ck_assert_uint_eq (p->C_DestroyObject (ro, pub), CKR_OK);
    ck_assert_uint_eq (p->C_Finalize (NULL), CKR_OK);
}
END_TEST

/*  ---- certificates and data objects (issue #10; 2.40 §4.4-§4.6, §5.7) ------- */

//  n objects found with template tmpl (count entries) in session h.
static CK_ULONG
s_count (CK_SESSION_HANDLE h, CK_ATTRIBUTE *tmpl, CK_ULONG count, CK_OBJECT_HANDLE *first)
{
    CK_OBJECT_HANDLE found [8];
    CK_ULONG n = 0;
    ck_assert_uint_eq (p->C_FindObjectsInit (h, tmpl, count), CKR_OK);
    ck_assert_uint_eq (p->C_FindObjects (h, found, 8, &n), CKR_OK);
    ck_assert_uint_eq (p->C_FindObjectsFinal (h), CKR_OK);
    if (first && n)
        *first = found [0];
    return n;
}

START_TEST (test_certificate_objects)
{
    EVP_PKEY *pkey = EVP_PKEY_Q_keygen (NULL, NULL, "EC", "P-256");
    X509 *x509 = X509_new ();
    X509_NAME *name = X509_NAME_new ();
    X509_NAME_add_entry_by_txt (name, "CN", MBSTRING_ASC, (const unsigned char *) "conformance", -1, -1, 0);
    X509_set_subject_name (x509, name);
    X509_set_issuer_name (x509, name);
    X509_gmtime_adj (X509_getm_notBefore (x509), 0);
    X509_gmtime_adj (X509_getm_notAfter (x509), 3600);
    X509_set_pubkey (x509, pkey);
    ck_assert_int_gt (X509_sign (x509, pkey, EVP_sha256 ()), 0);
    unsigned char *der = NULL;
    int der_len = i2d_X509 (x509, &der);
    ck_assert_int_gt (der_len, 0);
    CK_OBJECT_CLASS cert = CKO_CERTIFICATE, data = CKO_DATA;
    CK_CERTIFICATE_TYPE x509_type = CKC_X_509;
    CK_BBOOL yes = CK_TRUE, no = CK_FALSE;
    CK_OBJECT_HANDLE c1 = 0, c2 = 0, d1 = 0, d2 = 0, found = 0;
    CK_ATTRIBUTE ctmpl [] = {
        { CKA_CLASS, &cert, sizeof cert }, { CKA_CERTIFICATE_TYPE, &x509_type, sizeof x509_type },
        { CKA_VALUE, der, (CK_ULONG) der_len }, { CKA_LABEL, "c1", 2 }, { CKA_COPYABLE, &no, 1 },
        { CKA_DESTROYABLE, &no, 1 },
    };
    CK_ATTRIBUTE dtmpl [] = {
        { CKA_CLASS, &data, sizeof data }, { CKA_LABEL, "d1", 2 }, { CKA_VALUE, "v1", 2 },
        { CKA_MODIFIABLE, &no, 1 },
    };
    ck_assert_uint_eq (p->C_Initialize (NULL), CKR_OK);
    CK_SESSION_HANDLE rw = tm_open (p, CKF_RW_SESSION), other = tm_open (p, 0);
    ck_assert_uint_eq (p->C_CreateObject (rw, ctmpl, 6, &c1), CKR_OK);
    ck_assert_uint_eq (p->C_CreateObject (rw, dtmpl, 4, &d1), CKR_OK);
    //  The flags: not copyable, not destroyable, not modifiable.
    CK_ATTRIBUTE tok [] = { { CKA_TOKEN, &yes, 1 }, { CKA_LABEL, "c2", 2 } };
    ck_assert_uint_eq (p->C_CopyObject (rw, c1, tok, 2, &c2), CKR_ACTION_PROHIBITED);
    ck_assert_uint_eq (p->C_DestroyObject (rw, c1), CKR_ACTION_PROHIBITED);
    CK_ATTRIBUTE relabel [] = { { CKA_LABEL, "dx", 2 } };
    ck_assert_uint_eq (p->C_SetAttributeValue (rw, d1, relabel, 1), CKR_ACTION_PROHIBITED);
    CK_ATTRIBUTE copyable [] = { { CKA_COPYABLE, &yes, 1 } };
    ck_assert_uint_eq (p->C_SetAttributeValue (rw, c1, copyable, 1), CKR_ATTRIBUTE_READ_ONLY);
    //  A copy to a token object needs a login; then another session finds it.
    CK_ATTRIBUTE tok_data [] = { { CKA_TOKEN, &yes, 1 }, { CKA_LABEL, "d2", 2 }, { CKA_MODIFIABLE, &yes, 1 } };
    ck_assert_uint_eq (p->C_CopyObject (rw, d1, tok_data, 3, &d2), CKR_USER_NOT_LOGGED_IN);
    ck_assert_uint_eq (p->C_Login (rw, CKU_USER, s_user_pin, 4), CKR_OK);
    ck_assert_uint_eq (p->C_CopyObject (other, d1, tok_data, 3, &d2), CKR_SESSION_READ_ONLY);
    ck_assert_uint_eq (p->C_CopyObject (rw, d1, tok_data, 3, &d2), CKR_OK);
    CK_ATTRIBUTE by_label [] = { { CKA_LABEL, "d2", 2 } };
    ck_assert_uint_eq (s_count (other, by_label, 1, &found), 1);
    ck_assert_uint_eq (found, d2);
    CK_BBOOL is_token = CK_FALSE;
    char value [4];
    CK_ATTRIBUTE get [] = { { CKA_TOKEN, &is_token, 1 }, { CKA_VALUE, value, sizeof value } };
    ck_assert_uint_eq (p->C_GetAttributeValue (other, d2, get, 2), CKR_OK);
    ck_assert (is_token && get [1].ulValueLen == 2 && memcmp (value, "v1", 2) == 0);
    //  A copy of the certificate may not change CKA_VALUE.
    CK_OBJECT_HANDLE c3 = 0;
    CK_ATTRIBUTE cert_tmpl [] = {
        { CKA_CLASS, &cert, sizeof cert }, { CKA_CERTIFICATE_TYPE, &x509_type, sizeof x509_type },
        { CKA_VALUE, der, (CK_ULONG) der_len }, { CKA_TOKEN, &yes, 1 }, { CKA_LABEL, "c3", 2 },
    };
    ck_assert_uint_eq (p->C_CreateObject (rw, cert_tmpl, 5, &c3), CKR_OK);
    CK_ATTRIBUTE new_value [] = { { CKA_VALUE, "x", 1 } };
    ck_assert_uint_eq (p->C_CopyObject (rw, c3, new_value, 1, &c2), CKR_ATTRIBUTE_READ_ONLY);
    CK_ATTRIBUTE to_session [] = { { CKA_TOKEN, &no, 1 }, { CKA_LABEL, "c4", 2 } };
    ck_assert_uint_eq (p->C_CopyObject (rw, c3, to_session, 2, &c2), CKR_OK);
    CK_ATTRIBUTE c4 [] = { { CKA_LABEL, "c4", 2 }, { CKA_TOKEN, &no, 1 } };
    ck_assert_uint_eq (s_count (other, c4, 2, NULL), 1);
    //  Logout: token objects stay, this application's private objects would go.
    ck_assert_uint_eq (p->C_DestroyObject (rw, d2), CKR_OK);
    ck_assert_uint_eq (p->C_DestroyObject (rw, c3), CKR_OK);
    ck_assert_uint_eq (s_count (other, by_label, 1, NULL), 0);
    ck_assert_uint_eq (p->C_Finalize (NULL), CKR_OK);
    OPENSSL_free (der);
    X509_NAME_free (name);
    X509_free (x509);
    EVP_PKEY_free (pkey);
}
END_TEST

/*  ---- operations (PKCS#11 2.40 §5.10-§5.12) ----------------------------- */

START_TEST (test_operations)
{
    CK_SESSION_HANDLE h;
    CK_OBJECT_HANDLE key, pub;
    CK_MECHANISM raw = { CKM_RSA_PKCS, NULL, 0 }, hashed = { CKM_SHA256_RSA_PKCS, NULL, 0 };
    CK_MECHANISM sha = { CKM_SHA256, NULL, 0 };
    uint8_t di [51], sig [256], digest [32], big [300] = { 0 }, expect [32];
    CK_BYTE msg [] = "conformance";
    CK_ULONG len = 0, size = 0;
    CK_SLOT_ID slot;
    ck_assert_uint_eq (p->C_Initialize (NULL), CKR_OK);
    h = tm_open (p, CKF_RW_SESSION);
    th_digest_info ("conformance", di);
    /*  Private-key operations need the user: no private key is visible
        before the login, and a token key found then is
        CKR_USER_NOT_LOGGED_IN once logged out (docs/CONTRACTS.md "Public
        session objects").  */
    ck_assert_uint_eq (p->C_SignInit (h, &raw, 1), CKR_KEY_HANDLE_INVALID);
    ck_assert_uint_eq (p->C_Login (h, CKU_USER, s_user_pin, 4), CKR_OK);
    key = s_find_key (h, s_id_fast);
    ck_assert_uint_eq (p->C_Logout (h), CKR_OK);
    ck_assert_uint_eq (p->C_SignInit (h, &raw, key), CKR_USER_NOT_LOGGED_IN);
    ck_assert_uint_eq (p->C_Login (h, CKU_USER, s_user_pin, 4), CKR_OK);
    ck_assert_uint_eq (p->C_SignInit (h, NULL, key), CKR_ARGUMENTS_BAD);
    ck_assert_uint_eq (p->C_SignInit (h + 100, &raw, key), CKR_SESSION_HANDLE_INVALID);
    ck_assert_uint_eq (p->C_Sign (h, di, 51, sig, &len), CKR_OPERATION_NOT_INITIALIZED);
    ck_assert_uint_eq (p->C_SignFinal (h, sig, &len), CKR_OPERATION_NOT_INITIALIZED);
    ck_assert_uint_eq (p->C_SignUpdate (h, di, 1), CKR_OPERATION_NOT_INITIALIZED);
    /*  Two-call convention: the query and CKR_BUFFER_TOO_SMALL keep the operation.  */
    ck_assert_uint_eq (p->C_SignInit (h, &raw, key), CKR_OK);
    ck_assert_uint_eq (p->C_SignInit (h, &raw, key), CKR_OPERATION_ACTIVE);
    ck_assert_uint_eq (p->C_Sign (h, di, 51, NULL, &len), CKR_OK);
    ck_assert_uint_eq (len, 256);
    len = 255;
    ck_assert_uint_eq (p->C_Sign (h, di, 51, sig, &len), CKR_BUFFER_TOO_SMALL);
    ck_assert_uint_eq (len, 256);
    ck_assert_uint_eq (p->C_Sign (h, di, 51, sig, &len), CKR_OK);
    ck_assert_uint_eq (len, 256);
    ck_assert (th_verify_rsa_pkcs1 (s_fast_key, di, 51, sig, len));
    ck_assert_uint_eq (p->C_Sign (h, di, 51, sig, &len), CKR_OPERATION_NOT_INITIALIZED);
    /*  An error ends the operation.  */
    ck_assert_uint_eq (p->C_SignInit (h, &raw, key), CKR_OK);
    ck_assert_uint_eq (p->C_Sign (h, big, sizeof big, sig, &len), CKR_DATA_LEN_RANGE);
    ck_assert_uint_eq (p->C_Sign (h, di, 51, sig, &len), CKR_OPERATION_NOT_INITIALIZED);
    /*  Multi-part, with the length query on the final call.  */
    ck_assert_uint_eq (p->C_SignInit (h, &hashed, key), CKR_OK);
    ck_assert_uint_eq (p->C_SignUpdate (h, msg, 4), CKR_OK);
    ck_assert_uint_eq (p->C_SignUpdate (h, msg + 4, sizeof msg - 5), CKR_OK);
    ck_assert_uint_eq (p->C_SignFinal (h, NULL, &len), CKR_OK);
    ck_assert_uint_eq (len, 256);
    len = 10;
    ck_assert_uint_eq (p->C_SignFinal (h, sig, &len), CKR_BUFFER_TOO_SMALL);
    ck_assert_uint_eq (p->C_SignFinal (h, sig, &len), CKR_OK);
    ck_assert (th_verify_rsa_pkcs1 (s_fast_key, di, 51, sig, len));
    ck_assert_uint_eq (p->C_SignFinal (h, sig, &len), CKR_OPERATION_NOT_INITIALIZED);
    /*  Verify, single and multi-part: every outcome ends the operation.  */
    pub = s_public_key (h, s_fast_key);
    ck_assert_uint_eq (p->C_VerifyUpdate (h, msg, 1), CKR_OPERATION_NOT_INITIALIZED);
    ck_assert_uint_eq (p->C_VerifyFinal (h, sig, 256), CKR_OPERATION_NOT_INITIALIZED);
    ck_assert_uint_eq (p->C_VerifyInit (h, &hashed, pub), CKR_OK);
    ck_assert_uint_eq (p->C_VerifyInit (h, &hashed, pub), CKR_OPERATION_ACTIVE);
    ck_assert_uint_eq (p->C_VerifyUpdate (h, msg, sizeof msg - 1), CKR_OK);
    ck_assert_uint_eq (p->C_VerifyFinal (h, sig, 256), CKR_OK);
    ck_assert_uint_eq (p->C_VerifyFinal (h, sig, 256), CKR_OPERATION_NOT_INITIALIZED);
    ck_assert_uint_eq (p->C_VerifyInit (h, &hashed, pub), CKR_OK);
    ck_assert_uint_eq (p->C_VerifyUpdate (h, msg, 3), CKR_OK);
    ck_assert_uint_eq (p->C_VerifyFinal (h, sig, 256), CKR_SIGNATURE_INVALID);
    ck_assert_uint_eq (p->C_VerifyUpdate (h, msg, 1), CKR_OPERATION_NOT_INITIALIZED);
    ck_assert_uint_eq (p->C_VerifyInit (h, &hashed, pub), CKR_OK);
    ck_assert_uint_eq (p->C_VerifyFinal (h, sig, 100), CKR_SIGNATURE_LEN_RANGE);
    ck_assert_uint_eq (p->C_VerifyFinal (h, sig, 256), CKR_OPERATION_NOT_INITIALIZED);
    ck_assert_uint_eq (p->C_VerifyInit (h, &raw, pub), CKR_OK);
    ck_assert_uint_eq (p->C_Verify (h, di, 51, sig, 256), CKR_OK);
    ck_assert_uint_eq (p->C_Verify (h, di, 51, sig, 256), CKR_OPERATION_NOT_INITIALIZED);
    /*  Digest, two calls, multi-part.  */
    SHA256 (msg, sizeof msg - 1, expect);
    ck_assert_uint_eq (p->C_DigestUpdate (h, msg, 1), CKR_OPERATION_NOT_INITIALIZED);
    ck_assert_uint_eq (p->C_DigestFinal (h, digest, &len), CKR_OPERATION_NOT_INITIALIZED);
    ck_assert_uint_eq (p->C_DigestInit (h, NULL), CKR_ARGUMENTS_BAD);
    ck_assert_uint_eq (p->C_DigestInit (h, &raw), CKR_MECHANISM_INVALID);
    ck_assert_uint_eq (p->C_DigestInit (h, &sha), CKR_OK);
    ck_assert_uint_eq (p->C_DigestInit (h, &sha), CKR_OPERATION_ACTIVE);
    ck_assert_uint_eq (p->C_DigestUpdate (h, msg, 4), CKR_OK);
    ck_assert_uint_eq (p->C_DigestUpdate (h, msg + 4, sizeof msg - 5), CKR_OK);
    ck_assert_uint_eq (p->C_DigestFinal (h, NULL, &len), CKR_OK);
    ck_assert_uint_eq (len, 32);
    len = 31;
    ck_assert_uint_eq (p->C_DigestFinal (h, digest, &len), CKR_BUFFER_TOO_SMALL);
    ck_assert_uint_eq (len, 32);
    ck_assert_uint_eq (p->C_DigestFinal (h, digest, &len), CKR_OK);
    ck_assert_mem_eq (digest, expect, 32);
    ck_assert_uint_eq (p->C_DigestFinal (h, digest, &len), CKR_OPERATION_NOT_INITIALIZED);
    ck_assert_uint_eq (p->C_DigestInit (h, &sha), CKR_OK);
    ck_assert_uint_eq (p->C_Digest (h, msg, sizeof msg - 1, NULL, &len), CKR_OK);
    ck_assert_uint_eq (p->C_Digest (h, msg, sizeof msg - 1, digest, &len), CKR_OK);
    ck_assert_mem_eq (digest, expect, 32);
    /*  What the module leaves out says so.  */
    ck_assert_uint_eq (p->C_GetOperationState (h, NULL, &len), CKR_FUNCTION_NOT_SUPPORTED);
    ck_assert_uint_eq (p->C_SetOperationState (h, digest, 4, 0, 0), CKR_FUNCTION_NOT_SUPPORTED);
    ck_assert_uint_eq (p->C_GetFunctionStatus (h), CKR_FUNCTION_NOT_PARALLEL);
    ck_assert_uint_eq (p->C_CancelFunction (h), CKR_FUNCTION_NOT_PARALLEL);
    ck_assert_uint_eq (p->C_WaitForSlotEvent (CKF_DONT_BLOCK, &slot, NULL), CKR_NO_EVENT);
    ck_assert_uint_eq (p->C_WaitForSlotEvent (0, &slot, NULL), CKR_FUNCTION_NOT_SUPPORTED);
    ck_assert_uint_eq (p->C_WaitForSlotEvent (CKF_DONT_BLOCK, NULL, NULL), CKR_ARGUMENTS_BAD);
    ck_assert_uint_eq (p->C_InitToken (0, s_so_pin, 6, (CK_UTF8CHAR_PTR) "x"), CKR_FUNCTION_NOT_SUPPORTED);
    /*  C_DigestKey, recovery and random: test_module_session.c.  */
    /*  C_GetObjectSize: an estimate.  */
    ck_assert_uint_eq (p->C_GetObjectSize (h, key, NULL), CKR_ARGUMENTS_BAD);
    ck_assert_uint_eq (p->C_GetObjectSize (h, 999999, &size), CKR_OBJECT_HANDLE_INVALID);
    ck_assert_uint_eq (p->C_GetObjectSize (h + 100, key, &size), CKR_SESSION_HANDLE_INVALID);
    ck_assert_uint_eq (p->C_GetObjectSize (h, pub, &size), CKR_OK);
    ck_assert_uint_ge (size, 256);
    ck_assert_uint_eq (p->C_Finalize (NULL), CKR_OK);
}
END_TEST

/*  ---- application mutex callbacks (PKCS#11 2.40 §5.4) -------------------- */

/*  The counting callbacks: tm_mx_args (test_module_fixture.h).  */

START_TEST (test_mutex_callbacks)
{
    CK_C_INITIALIZE_ARGS os = *tm_mx_args ();
    CK_SESSION_HANDLE h;
    CK_TOKEN_INFO info;
    /*  Callbacks without CKF_OS_LOCKING_OK: they are the library mutex.  */
    ck_assert_uint_eq (p->C_Initialize (tm_mx_args ()), CKR_OK);
    ck_assert_int_eq (tm_mx.created, 1);
    h = tm_open (p, 0);
    ck_assert_uint_eq (p->C_GetTokenInfo (0, &info), CKR_OK);
    ck_assert_uint_eq (p->C_Login (h, CKU_USER, s_user_pin, 4), CKR_OK);
    ck_assert_uint_eq (p->C_CloseSession (h), CKR_OK);
    ck_assert_int_gt (tm_mx.locked, 4);
    ck_assert_int_eq (tm_mx.locked, tm_mx.unlocked);
    ck_assert_int_eq (tm_mx.destroyed, 0);
    ck_assert_uint_eq (p->C_Finalize (NULL), CKR_OK);
    ck_assert_int_eq (tm_mx.destroyed, 1);
    ck_assert_int_eq (tm_mx.locked, tm_mx.unlocked);
    /*  With CKF_OS_LOCKING_OK we may choose: we use our own (documented).  */
    tm_mx_reset ();
    os.flags = CKF_OS_LOCKING_OK;
    ck_assert_uint_eq (p->C_Initialize (&os), CKR_OK);
    h = tm_open (p, 0);
    ck_assert_uint_eq (p->C_GetTokenInfo (0, &info), CKR_OK);
    ck_assert_uint_eq (p->C_Finalize (NULL), CKR_OK);
    ck_assert_int_eq (tm_mx.created + tm_mx.locked + tm_mx.destroyed, 0);
}
END_TEST

/*  ---- C_Finalize while threads wait on the broker -------------------------- */

enum { S_RACERS = 4 };

static struct {
    pthread_mutex_t mutex;
    pthread_cond_t cond;
    int started;
} s_race = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0 };

typedef struct {
    pthread_t thread;
    CK_SESSION_HANDLE session;
    CK_RV rv;
} s_racer_t;

static void *
s_racer (void *arg)
{
    s_racer_t *self = arg;
    uint8_t di [51], sig [256];
    CK_ULONG len = sizeof sig;
    th_digest_info ("race", di);
    pthread_mutex_lock (&s_race.mutex);
    s_race.started++;
    pthread_cond_broadcast (&s_race.cond);
    pthread_mutex_unlock (&s_race.mutex);
    self->rv = p->C_Sign (self->session, di, 51, sig, &len);
    return NULL;
}

static int64_t
s_now_ms (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

START_TEST (test_finalize_race)
{
    s_racer_t racers [S_RACERS];
    CK_MECHANISM raw = { CKM_RSA_PKCS, NULL, 0 };
    CK_OBJECT_HANDLE key;
    CK_TOKEN_INFO info;
    CK_INFO ck_info;
    struct timespec deadline;
    int64_t start;
    ck_assert_uint_eq (p->C_Initialize (tm_mx_args ()), CKR_OK);   /* with the application's mutex too */
    for (int i = 0; i < S_RACERS; i++)
        racers [i].session = tm_open (p, 0);
    ck_assert_uint_eq (p->C_Login (racers [0].session, CKU_USER, s_user_pin, 4), CKR_OK);
    key = s_find_key (racers [0].session, s_id_slow);
    for (int i = 0; i < S_RACERS; i++)
        ck_assert_uint_eq (p->C_SignInit (racers [i].session, &raw, key), CKR_OK);
    start = s_now_ms ();
    for (int i = 0; i < S_RACERS; i++)
        ck_assert_int_eq (pthread_create (&racers [i].thread, NULL, s_racer, &racers [i]), 0);
    clock_gettime (CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 10;
    pthread_mutex_lock (&s_race.mutex);
    while (s_race.started < S_RACERS)
        ck_assert_int_ne (pthread_cond_timedwait (&s_race.cond, &s_race.mutex, &deadline), ETIMEDOUT);
    pthread_mutex_unlock (&s_race.mutex);
    /*  The boards take S_SLOW_MS per signature; C_Finalize must not wait for them.  */
    ck_assert_uint_eq (p->C_Finalize (NULL), CKR_OK);
    for (int i = 0; i < S_RACERS; i++) {
        ck_assert_int_eq (pthread_timedjoin_np (racers [i].thread, NULL, &deadline), 0);
        ck_assert_uint_eq (racers [i].rv, CKR_CRYPTOKI_NOT_INITIALIZED);
    }
    ck_assert_int_lt (s_now_ms () - start, S_SLOW_MS);
    ck_assert_int_eq (tm_mx.created, tm_mx.destroyed);
    ck_assert_int_eq (tm_mx.locked, tm_mx.unlocked);
    ck_assert_uint_eq (p->C_GetInfo (&ck_info), CKR_CRYPTOKI_NOT_INITIALIZED);
    /*  And the library comes back.  */
    ck_assert_uint_eq (p->C_Initialize (NULL), CKR_OK);
    ck_assert_uint_eq (p->C_GetTokenInfo (0, &info), CKR_OK);
    ck_assert_uint_eq (p->C_Finalize (NULL), CKR_OK);
}
END_TEST

/*  ---- fork (PKCS#11 2.40 §6.6.1) ------------------------------------------ */

/*  The child's steps; returns 0 or the number of the step that failed.  */
static int
s_child (void)
{
    CK_INFO info;
    CK_TOKEN_INFO token;
    CK_SESSION_HANDLE h = 0;
    CK_SESSION_INFO session;
    if (p->C_GetInfo (&info) != CKR_CRYPTOKI_NOT_INITIALIZED)
        return 1;
    if (p->C_OpenSession (0, CKF_SERIAL_SESSION, NULL, NULL, &h) != CKR_CRYPTOKI_NOT_INITIALIZED)
        return 2;
    if (p->C_GetSessionInfo (1, &session) != CKR_CRYPTOKI_NOT_INITIALIZED)
        return 3;
    if (p->C_Finalize (NULL) != CKR_CRYPTOKI_NOT_INITIALIZED)
        return 4;
    if (p->C_Initialize (tm_mx_args ()) != CKR_OK)
        return 5;
    if (p->C_GetTokenInfo (0, &token) != CKR_OK)
        return 6;
    if (p->C_OpenSession (0, CKF_SERIAL_SESSION, NULL, NULL, &h) != CKR_OK)
        return 7;
    if (p->C_GetSessionInfo (h, &session) != CKR_OK || session.state != CKS_RO_PUBLIC_SESSION)
        return 8;       /* the parent's login is not inherited */
    if (p->C_Login (h, CKU_USER, s_user_pin, 4) != CKR_OK)
        return 9;
    if (p->C_Finalize (NULL) != CKR_OK)
        return 10;
    return 0;
}

START_TEST (test_fork)
{
    CK_SESSION_HANDLE h;
    CK_MECHANISM raw = { CKM_RSA_PKCS, NULL, 0 };
    CK_OBJECT_HANDLE key;
    uint8_t di [51], sig [256];
    CK_ULONG len = sizeof sig;
    int status = 0;
    pid_t pid;
    ck_assert_uint_eq (p->C_Initialize (tm_mx_args ()), CKR_OK);
    h = tm_open (p, 0);
    ck_assert_uint_eq (p->C_Login (h, CKU_USER, s_user_pin, 4), CKR_OK);
    key = s_find_key (h, s_id_fast);
    ck_assert_uint_eq (p->C_SignInit (h, &raw, key), CKR_OK);
    /*  The child reports its result through a pipe, not its exit status:
        under valgrind a forked child's exit status is valgrind's verdict on
        the parent's memory it inherited.  */
    int fds [2], step = -1;
    ck_assert_int_eq (pipe (fds), 0);
    pid = fork ();
    ck_assert_int_ge (pid, 0);
    if (pid == 0) {
        step = s_child ();
        if (write (fds [1], &step, sizeof step) != sizeof step)
            _exit (2);
        _exit (0);
    }
    close (fds [1]);
    ck_assert_int_eq (read (fds [0], &step, sizeof step), (ssize_t) sizeof step);
    close (fds [0]);
    ck_assert_int_eq (waitpid (pid, &status, 0), pid);
    ck_assert_msg (step == 0, "the child failed at step %d", step);
    /*  The parent is unaffected: its login, its operation, its link.  */
    ck_assert_uint_eq (tm_state (p, h), CKS_RO_USER_FUNCTIONS);
    th_digest_info ("parent", di);
    ck_assert_uint_eq (p->C_Sign (h, di, 51, sig, &len), CKR_OK);
    ck_assert (th_verify_rsa_pkcs1 (s_fast_key, di, 51, sig, len));
    ck_assert_uint_eq (p->C_Finalize (NULL), CKR_OK);
}
END_TEST

/*  Every broker gone: a job that no connection could take fails at its
 *  deadline with CKR_DEVICE_REMOVED, not CKR_DEVICE_ERROR (docs/DESIGN.md §6),
 *  and never hangs.  The first attempts may still meet the dying
 *  connection (CKR_DEVICE_ERROR); a bounded retry (30 s) waits for the
 *  link to notice.  */
START_TEST (test_broker_gone)
{
    CK_TOKEN_INFO token;
    CK_SESSION_HANDLE h;
    CK_RV rv = CKR_OK;
    tm_client_conf (s_dir, server_endpoint (s_server), 1000);
    ck_assert_uint_eq (p->C_Initialize (NULL), CKR_OK);
    ck_assert_uint_eq (p->C_GetTokenInfo (0, &token), CKR_OK);
    h = tm_open (p, 0);
    server_destroy (&s_server);
    /*  An attempt ends at its 1 s deadline, or at once with
        CKR_DEVICE_ERROR while the endpoint counts as refusing (the broker's
        listener, closing, may have cut two handshakes short: link.h): so
        the bound is 30 s of time, not a count of attempts.  A loaded
        machine (make -j) may take several seconds to notice.  */
    int64_t until = zclock_mono () + 30000;
    while (rv != CKR_DEVICE_REMOVED && zclock_mono () < until) {
        rv = p->C_Login (h, CKU_USER, s_user_pin, 4);
        ck_assert_msg (rv == CKR_DEVICE_REMOVED || rv == CKR_DEVICE_ERROR,
                       "C_Login with no broker returned 0x%lx", rv);
        if (rv == CKR_DEVICE_ERROR)
            zclock_sleep (100);
    }
    ck_assert_uint_eq (rv, CKR_DEVICE_REMOVED);
}
END_TEST

/*  The vendor raw modexp mechanisms (cryptoserver-pkcs11(7) "Vendor
 *  mechanisms") on the sim boards: listed with CKF_HW | CKF_DIGEST and the
 *  largest modulus; a CKU_USER login first; the parameter checked at init;
 *  the two-call convention answered locally; single-part and multi-part
 *  (C_DigestUpdate/C_DigestFinal) arrays.  Known answers: 2^10 mod 1000 = 24,
 *  3^4 mod 1000 = 81, 7^4 mod 1000 = 401, 5^3 mod 7 = 6, 7^0 mod 1000 = 1.  */
START_TEST (test_vendor_modexp)
{
    CK_SESSION_HANDLE h;
    CK_BYTE e [] = { 10 }, m [] = { 0x03, 0xe8 }, out [8], base2 [] = { 2 };
    CK_CS_MODEXP_PARAMS params = { e, 1, m, 2 };
    CK_MECHANISM mech = { CKM_CS_MODEXP, &params, sizeof params };
    CK_MECHANISM array = { CKM_CS_MODEXP_ARRAY, &params, sizeof params };
    CK_MECHANISM bad = { CKM_CS_MODEXP, NULL, 0 };
    CK_MECHANISM_INFO info;
    CK_ULONG len = 0;
    ck_assert_uint_eq (p->C_Initialize (NULL), CKR_OK);
    ck_assert_uint_eq (p->C_GetMechanismInfo (0, CKM_CS_MODEXP, &info), CKR_OK);
    ck_assert_uint_eq (info.flags, CKF_HW | CKF_DIGEST);
    ck_assert_uint_eq (info.ulMinKeySize, 1);
    ck_assert_uint_eq (info.ulMaxKeySize, 8192);
    h = tm_open (p, CKF_RW_SESSION);
    ck_assert_uint_eq (p->C_DigestInit (h, &mech), CKR_USER_NOT_LOGGED_IN);
    ck_assert_uint_eq (p->C_Login (h, CKU_USER, s_user_pin, 4), CKR_OK);
    ck_assert_uint_eq (p->C_DigestInit (h, &bad), CKR_MECHANISM_PARAM_INVALID);
    ck_assert_uint_eq (p->C_DigestInit (h, &mech), CKR_OK);
    ck_assert_uint_eq (p->C_DigestInit (h, &mech), CKR_OPERATION_ACTIVE);
    e [0] = 99;                 /* the parameter was copied at init */
    ck_assert_uint_eq (p->C_Digest (h, base2, 1, NULL, &len), CKR_OK);
    ck_assert_uint_eq (len, 2);
    len = 1;
    ck_assert_uint_eq (p->C_Digest (h, base2, 1, out, &len), CKR_BUFFER_TOO_SMALL);
    len = sizeof out;
    ck_assert_uint_eq (p->C_Digest (h, base2, 1, out, &len), CKR_OK);
    ck_assert_uint_eq (len, 2);
    ck_assert (out [0] == 0 && out [1] == 24);
    ck_assert_uint_eq (p->C_Digest (h, base2, 1, out, &len), CKR_OPERATION_NOT_INITIALIZED);
    /*  Array, multi-part: bases 3 and 7 of 2 bytes each, exponent 4.  */
    CK_BYTE bases [] = { 0x00, 0x03, 0x00, 0x07 };
    e [0] = 4;
    ck_assert_uint_eq (p->C_DigestInit (h, &array), CKR_OK);
    ck_assert_uint_eq (p->C_DigestUpdate (h, bases, 3), CKR_OK);
    ck_assert_uint_eq (p->C_DigestUpdate (h, bases + 3, 1), CKR_OK);
    len = sizeof out;
    ck_assert_uint_eq (p->C_DigestFinal (h, out, &len), CKR_OK);
    ck_assert_uint_eq (len, 4);
    ck_assert (out [0] == 0 && out [1] == 81 && out [2] == 0x01 && out [3] == 0x91);     /* 7^4 mod 1000 = 401 */
    /*  Bad data ends the operation: 3 bytes are not whole 2-byte bases.  */
    ck_assert_uint_eq (p->C_DigestInit (h, &array), CKR_OK);
    ck_assert_uint_eq (p->C_Digest (h, bases, 3, out, &len), CKR_DATA_LEN_RANGE);
    ck_assert_uint_eq (p->C_Digest (h, bases, 4, out, &len), CKR_OPERATION_NOT_INITIALIZED);
    /*  MULTI: 5^3 mod 7 and 7^0 mod 1000.  */
    CK_BYTE three [] = { 3 }, seven [] = { 7 }, multi_data [] = { 5, 0x00, 0x07 };
    CK_CS_MODEXP_PARAMS items [2] = { { three, 1, seven, 1 }, { NULL, 0, m, 2 } };
    CK_CS_MULTI_MODEXP_PARAMS multi = { 2, items };
    CK_MECHANISM multi_mech = { CKM_CS_MULTI_MODEXP_ARRAY, &multi, sizeof multi };
    ck_assert_uint_eq (p->C_DigestInit (h, &multi_mech), CKR_OK);
    len = sizeof out;
    ck_assert_uint_eq (p->C_Digest (h, multi_data, 3, out, &len), CKR_OK);
    ck_assert_uint_eq (len, 3);
    ck_assert (out [0] == 6 && out [1] == 0 && out [2] == 1);
    ck_assert_uint_eq (p->C_Logout (h), CKR_OK);
    ck_assert_uint_eq (p->C_DigestInit (h, &mech), CKR_USER_NOT_LOGGED_IN);
    ck_assert_uint_eq (p->C_Finalize (NULL), CKR_OK);
}
END_TEST

int
main (void)
{
    Suite *suite = suite_create ("module_conformance");
    TCase *tc = tr_tcase ("conformance", s_setup, s_teardown);
    tcase_add_test (tc, test_initialize);
    tcase_add_test (tc, test_interfaces);
    tcase_add_test (tc, test_interface_3_2);
    tcase_add_test (tc, test_slots_and_sessions);
    tcase_add_test (tc, test_read_only);
    tcase_add_test (tc, test_operations);
    tcase_add_test (tc, test_mutex_callbacks);
    tcase_add_test (tc, test_finalize_race);
    tcase_add_test (tc, test_fork);
    tcase_add_test (tc, test_broker_gone);
    tcase_add_test (tc, test_vendor_modexp);
    tcase_add_test (tc, test_certificate_objects);
    suite_add_tcase (suite, tc);
    return tr_run (suite);
}
