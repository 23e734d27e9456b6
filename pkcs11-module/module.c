/*  module.c — C_GetFunctionList, C_Initialize, C_Finalize, C_GetInfo, the
 *  function table (PKCS#11 2.40), the library mutex and fork detection.
 *
 *  Fork: the pid is remembered at C_Initialize.  In a child every call
 *  returns CKR_CRYPTOKI_NOT_INITIALIZED until the child calls C_Initialize,
 *  which builds a fresh link; the parent's ZeroMQ context, sockets and I/O
 *  thread are never touched in the child (they are leaked on purpose).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <openssl/crypto.h>
#include "log.h"
#include "client_config.h"
#include "link.h"
#include "token.h"
#include "session.h"
#include "object.h"
#include "module.h"

static pthread_mutex_t s_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    volatile bool initialized;
    volatile pid_t pid;         /* process that ran C_Initialize */
    cs_client_config_t *config;
    cs_client_config_t *inherited_config;   /* the parent's, after fork (s_forget_parent) */
    cs_link_t *link;
} s_module;

CK_RV
cs_module_check (void)
{
    if (!s_module.initialized || s_module.pid != getpid ())
        return CKR_CRYPTOKI_NOT_INITIALIZED;
    return CKR_OK;
}

void
cs_module_lock (void)
{
    pthread_mutex_lock (&s_lock);
}

void
cs_module_unlock (void)
{
    pthread_mutex_unlock (&s_lock);
}

void
cs_module_pad (unsigned char *field, size_t size, const char *text)
{
    size_t len = text ? strlen (text) : 0;
    memset (field, ' ', size);
    memcpy (field, text, len < size ? len : size);
}

CK_RV
cs_module_run_job (Cs__Job *job, bool with_ticket, Cs__Reply **reply_p)
{
    CK_RV rv;
    uint8_t ticket [CS_WIRE_MAX_TICKET];
    Cs__Request req = CS__REQUEST__INIT;
    Cs__Job *jobs [1] = { job };
    cs_link_t *link;
    int64_t timeout_ms;
    *reply_p = NULL;
    cs_module_lock ();
    if ((rv = cs_module_check ()) != CKR_OK) {
        cs_module_unlock ();
        return rv;
    }
    link = s_module.link;
    timeout_ms = s_module.config->timeout_ms;
    req.ticket.len = with_ticket ? cs_token_ticket_copy (ticket, sizeof ticket) : 0;
    req.ticket.data = ticket;
    cs_module_unlock ();
    req.n_jobs = 1;
    req.jobs = jobs;
    rv = cs_link_call (link, &req, timeout_ms, reply_p);
    OPENSSL_cleanse (ticket, sizeof ticket);
    if (rv == CKR_OK)
        rv = (CK_RV) (*reply_p)->results [0]->rv;
    return rv;
}

/*  Validates CK_C_INITIALIZE_ARGS (PKCS#11 2.40 §5.4): we always lock with
 *  pthreads, so application mutex callbacks without CKF_OS_LOCKING_OK are
 *  refused with CKR_CANT_LOCK; we need our own I/O thread.  */
static CK_RV
s_check_init_args (CK_C_INITIALIZE_ARGS *args)
{
    int given;
    if (!args)
        return CKR_OK;
    if (args->pReserved)
        return CKR_ARGUMENTS_BAD;
    given = !!args->CreateMutex + !!args->DestroyMutex + !!args->LockMutex + !!args->UnlockMutex;
    if (given != 0 && given != 4)
        return CKR_ARGUMENTS_BAD;
    /*  §5.4 would have us answer CKR_NEED_TO_CREATE_THREADS, but GnuTLS
        (and so p11tool and every GnuTLS program) always sets this flag
        together with CKF_OS_LOCKING_OK.  Our one I/O thread never calls
        back into the application, so we go on, as p11-kit's remote module
        and OpenSC do.  */
    if (args->flags & CKF_LIBRARY_CANT_CREATE_OS_THREADS)
        cs_log_debug ("C_Initialize: CKF_LIBRARY_CANT_CREATE_OS_THREADS set; "
                      "using our own I/O thread anyway");
    if (given && !(args->flags & CKF_OS_LOCKING_OK))
        return CKR_CANT_LOCK;
    return CKR_OK;
}

/*  In a forked child: drops the parent's state without touching its link.
 *  The parent's parsed config (with the client key) is kept for the child's
 *  C_Initialize: nginx clears its workers' environment and drops privileges
 *  after fork, so the child could neither find nor read the file again.  */
static void
s_forget_parent (void)
{
    pthread_mutex_init (&s_lock, NULL);  /* it may have been held at fork() */
    cs_link_abandon (&s_module.link);
    cs_client_config_destroy (&s_module.inherited_config);
    s_module.inherited_config = s_module.config;
    s_module.config = NULL;
    cs_session_reset_all ();
    cs_object_reset ();
    cs_token_reset ();
    s_module.initialized = false;
}

CK_RV
C_Initialize (CK_VOID_PTR init_args)
{
    CK_RV rv;
    cs_client_config_t *config = NULL;
    if ((rv = s_check_init_args (init_args)) != CKR_OK)
        return rv;
    if (s_module.initialized && s_module.pid != getpid ())
        s_forget_parent ();
    cs_module_lock ();
    if (s_module.initialized) {
        rv = CKR_CRYPTOKI_ALREADY_INITIALIZED;
        goto out;
    }
    cs_log_set_level (CS_LOG_WARNING);
    config = s_module.inherited_config;
    s_module.inherited_config = NULL;
    if (!config && !(config = cs_client_config_load (cs_client_config_path ()))) {
        rv = CKR_GENERAL_ERROR;
        goto out;
    }
    cs_log_set_level (config->log_level);
    if (!(s_module.link = cs_link_new (config, &rv)))
        goto out;
    s_module.config = config;
    config = NULL;
    s_module.pid = getpid ();
    s_module.initialized = true;
    cs_log_debug ("initialized from %s", s_module.config->path);
out:
    cs_module_unlock ();
    cs_client_config_destroy (&config);
    return rv;
}

CK_RV
C_Finalize (CK_VOID_PTR reserved)
{
    CK_RV rv;
    cs_link_t *link = NULL;
    return_val_if_fail (reserved == NULL, CKR_ARGUMENTS_BAD);
    cs_module_lock ();
    if ((rv = cs_module_check ()) == CKR_OK) {
        link = s_module.link;
        s_module.link = NULL;
        s_module.initialized = false;
        cs_session_reset_all ();
        cs_object_reset ();
        cs_token_reset ();
        cs_client_config_destroy (&s_module.config);
    }
    cs_module_unlock ();
    cs_link_destroy (&link);     /* joins the I/O thread: outside the lock */
    return rv;
}

CK_RV
C_GetInfo (CK_INFO_PTR info)
{
    CK_RV rv = cs_module_check ();
    if (rv != CKR_OK)
        return rv;
    return_val_if_fail (info != NULL, CKR_ARGUMENTS_BAD);
    memset (info, 0, sizeof *info);
    info->cryptokiVersion.major = CRYPTOKI_VERSION_MAJOR;
    info->cryptokiVersion.minor = CRYPTOKI_VERSION_MINOR;
    cs_module_pad (info->manufacturerID, sizeof info->manufacturerID, CS_MANUFACTURER);
    cs_module_pad (info->libraryDescription, sizeof info->libraryDescription, CS_LIBRARY_DESC);
    info->libraryVersion.major = 0;
    info->libraryVersion.minor = 1;
    return CKR_OK;
}

/*  The functions this module does not provide (yet).  */
#define S_NOT_SUPPORTED(name, args) \
    static CK_RV s_##name args { return cs_module_check () ?: CKR_FUNCTION_NOT_SUPPORTED; }

S_NOT_SUPPORTED (C_InitToken, (CK_SLOT_ID a, CK_UTF8CHAR_PTR b, CK_ULONG c, CK_UTF8CHAR_PTR d))
S_NOT_SUPPORTED (C_GetOperationState, (CK_SESSION_HANDLE a, CK_BYTE_PTR b, CK_ULONG_PTR c))
S_NOT_SUPPORTED (C_SetOperationState, (CK_SESSION_HANDLE a, CK_BYTE_PTR b, CK_ULONG c, CK_OBJECT_HANDLE d, CK_OBJECT_HANDLE e))
S_NOT_SUPPORTED (C_GetObjectSize, (CK_SESSION_HANDLE a, CK_OBJECT_HANDLE b, CK_ULONG_PTR c))
S_NOT_SUPPORTED (C_EncryptUpdate, (CK_SESSION_HANDLE a, CK_BYTE_PTR b, CK_ULONG c, CK_BYTE_PTR d, CK_ULONG_PTR e))
S_NOT_SUPPORTED (C_EncryptFinal, (CK_SESSION_HANDLE a, CK_BYTE_PTR b, CK_ULONG_PTR c))
S_NOT_SUPPORTED (C_DecryptUpdate, (CK_SESSION_HANDLE a, CK_BYTE_PTR b, CK_ULONG c, CK_BYTE_PTR d, CK_ULONG_PTR e))
S_NOT_SUPPORTED (C_DecryptFinal, (CK_SESSION_HANDLE a, CK_BYTE_PTR b, CK_ULONG_PTR c))
S_NOT_SUPPORTED (C_DigestKey, (CK_SESSION_HANDLE a, CK_OBJECT_HANDLE b))
S_NOT_SUPPORTED (C_SignRecoverInit, (CK_SESSION_HANDLE a, CK_MECHANISM_PTR b, CK_OBJECT_HANDLE c))
S_NOT_SUPPORTED (C_SignRecover, (CK_SESSION_HANDLE a, CK_BYTE_PTR b, CK_ULONG c, CK_BYTE_PTR d, CK_ULONG_PTR e))
S_NOT_SUPPORTED (C_VerifyRecoverInit, (CK_SESSION_HANDLE a, CK_MECHANISM_PTR b, CK_OBJECT_HANDLE c))
S_NOT_SUPPORTED (C_VerifyRecover, (CK_SESSION_HANDLE a, CK_BYTE_PTR b, CK_ULONG c, CK_BYTE_PTR d, CK_ULONG_PTR e))
S_NOT_SUPPORTED (C_DigestEncryptUpdate, (CK_SESSION_HANDLE a, CK_BYTE_PTR b, CK_ULONG c, CK_BYTE_PTR d, CK_ULONG_PTR e))
S_NOT_SUPPORTED (C_DecryptDigestUpdate, (CK_SESSION_HANDLE a, CK_BYTE_PTR b, CK_ULONG c, CK_BYTE_PTR d, CK_ULONG_PTR e))
S_NOT_SUPPORTED (C_SignEncryptUpdate, (CK_SESSION_HANDLE a, CK_BYTE_PTR b, CK_ULONG c, CK_BYTE_PTR d, CK_ULONG_PTR e))
S_NOT_SUPPORTED (C_DecryptVerifyUpdate, (CK_SESSION_HANDLE a, CK_BYTE_PTR b, CK_ULONG c, CK_BYTE_PTR d, CK_ULONG_PTR e))
S_NOT_SUPPORTED (C_GenerateKey, (CK_SESSION_HANDLE a, CK_MECHANISM_PTR b, CK_ATTRIBUTE_PTR c, CK_ULONG d, CK_OBJECT_HANDLE_PTR e))
S_NOT_SUPPORTED (C_WrapKey, (CK_SESSION_HANDLE a, CK_MECHANISM_PTR b, CK_OBJECT_HANDLE c, CK_OBJECT_HANDLE d, CK_BYTE_PTR e, CK_ULONG_PTR f))
S_NOT_SUPPORTED (C_UnwrapKey, (CK_SESSION_HANDLE a, CK_MECHANISM_PTR b, CK_OBJECT_HANDLE c, CK_BYTE_PTR d, CK_ULONG e, CK_ATTRIBUTE_PTR f, CK_ULONG g, CK_OBJECT_HANDLE_PTR h))
S_NOT_SUPPORTED (C_DeriveKey, (CK_SESSION_HANDLE a, CK_MECHANISM_PTR b, CK_OBJECT_HANDLE c, CK_ATTRIBUTE_PTR d, CK_ULONG e, CK_OBJECT_HANDLE_PTR f))
S_NOT_SUPPORTED (C_WaitForSlotEvent, (CK_FLAGS a, CK_SLOT_ID_PTR b, CK_VOID_PTR c))

/*  Legacy parallel functions: PKCS#11 2.40 §5.16.  */
static CK_RV
s_C_GetFunctionStatus (CK_SESSION_HANDLE session)
{
    return cs_module_check () ?: CKR_FUNCTION_NOT_PARALLEL;
}

static CK_RV
s_C_CancelFunction (CK_SESSION_HANDLE session)
{
    return cs_module_check () ?: CKR_FUNCTION_NOT_PARALLEL;
}

static CK_FUNCTION_LIST s_function_list = {
    { CRYPTOKI_VERSION_MAJOR, CRYPTOKI_VERSION_MINOR },
    C_Initialize, C_Finalize, C_GetInfo, C_GetFunctionList,
    C_GetSlotList, C_GetSlotInfo, C_GetTokenInfo, C_GetMechanismList, C_GetMechanismInfo,
    s_C_InitToken, C_InitPIN, C_SetPIN,
    C_OpenSession, C_CloseSession, C_CloseAllSessions, C_GetSessionInfo,
    s_C_GetOperationState, s_C_SetOperationState, C_Login, C_Logout,
    C_CreateObject, C_CopyObject, C_DestroyObject, s_C_GetObjectSize,
    C_GetAttributeValue, C_SetAttributeValue,
    C_FindObjectsInit, C_FindObjects, C_FindObjectsFinal,
    C_EncryptInit, C_Encrypt, s_C_EncryptUpdate, s_C_EncryptFinal,
    C_DecryptInit, C_Decrypt, s_C_DecryptUpdate, s_C_DecryptFinal,
    C_DigestInit, C_Digest, C_DigestUpdate, s_C_DigestKey, C_DigestFinal,
    C_SignInit, C_Sign, C_SignUpdate, C_SignFinal, s_C_SignRecoverInit, s_C_SignRecover,
    C_VerifyInit, C_Verify, C_VerifyUpdate, C_VerifyFinal, s_C_VerifyRecoverInit, s_C_VerifyRecover,
    s_C_DigestEncryptUpdate, s_C_DecryptDigestUpdate, s_C_SignEncryptUpdate, s_C_DecryptVerifyUpdate,
    s_C_GenerateKey, C_GenerateKeyPair, s_C_WrapKey, s_C_UnwrapKey, s_C_DeriveKey,
    C_SeedRandom, C_GenerateRandom,
    s_C_GetFunctionStatus, s_C_CancelFunction, s_C_WaitForSlotEvent,
};

/*  The one exported symbol (cryptoserver-pkcs11.map).  Works before
 *  C_Initialize, as PKCS#11 2.40 §5.2 requires.  */
CK_RV
C_GetFunctionList (CK_FUNCTION_LIST_PTR_PTR list_p)
{
    return_val_if_fail (list_p != NULL, CKR_ARGUMENTS_BAD);
    *list_p = &s_function_list;
    return CKR_OK;
}
