/*  module.c — the library's life: C_Initialize, C_Finalize, C_GetInfo and
 *  fork detection (PKCS#11 2.40 §5.4, §6.6, docs/DESIGN.md §5).  The top of the
 *  module's layers (module.h): it owns the client config and the link,
 *  starts and stops the job runner, and resets the tables below it.  The
 *  library mutex and the call guard are guard.c's; the function lists are
 *  in interface.c.
 *
 *  Threads.  C_Finalize closes the call guard, stops the link (which wakes
 *  every thread waiting on the broker with CKR_CRYPTOKI_NOT_INITIALIZED),
 *  waits until no guarded call is left, and only then frees the tables,
 *  the link and the application's mutex: no call can touch freed state.
 *  C_Initialize and C_Finalize are serialised by a private mutex, so
 *  C_Initialize right after (or during) a C_Finalize waits for it and then
 *  works.
 *
 *  Fork.  The pid is remembered at C_Initialize.  In a child every call
 *  returns CKR_CRYPTOKI_NOT_INITIALIZED until the child calls C_Initialize,
 *  which builds a fresh link; the parent's ZeroMQ context, sockets and I/O
 *  thread, and the application mutex it made, are never touched in the
 *  child (they are leaked on purpose), and our private mutexes, which a
 *  parent thread may have held at fork(), are re-initialised.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "log.h"
#include "attrs.h"
#include "client_config.h"
#include "guard.h"
#include "link.h"
#include "runner.h"
#include "token.h"
#include "session.h"
#include "object.h"
#include "module.h"

static pthread_mutex_t s_init_lock = PTHREAD_MUTEX_INITIALIZER;   /* C_Initialize vs C_Finalize */

static struct {
    pid_t owner;                /* process whose state this is (0: none yet) */
    cs_client_config_t *config;
    cs_client_config_t *inherited_config;   /* the parent's, after fork (s_forget_parent) */
    cs_link_t *link;
} s_module;

/*  Validates CK_C_INITIALIZE_ARGS (PKCS#11 2.40 §5.4): pReserved NULL, the
 *  four mutex callbacks all given or none.  */
static CK_RV
s_check_init_args (const CK_C_INITIALIZE_ARGS *args)
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
    return CKR_OK;
}

/*  In a forked child: drops the parent's state without touching its link
 *  or its application mutex, and re-initialises our own mutexes (a parent
 *  thread may have held them at fork()).  The parent's parsed config (with
 *  the client key) is kept for the child's C_Initialize: nginx clears its
 *  workers' environment and drops privileges after fork, so the child
 *  could neither find nor read the file again.  */
static void
s_forget_parent (void)
{
    cs_guard_after_fork ();
    pthread_mutex_init (&s_init_lock, NULL);
    cs_runner_stop ();
    cs_link_abandon (&s_module.link);
    if (s_module.config) {
        cs_client_config_destroy (&s_module.inherited_config);
        s_module.inherited_config = s_module.config;
        s_module.config = NULL;
    }
    cs_lock ();                             /* our fresh mutex: nobody else is here */
    cs_session_reset_all_inlock ();
    cs_object_reset_inlock ();
    cs_token_reset_inlock ();
    cs_unlock ();
    s_module.owner = getpid ();
}

/*  PKCS#11 2.40 §5.4.  CKR_CRYPTOKI_ALREADY_INITIALIZED, CKR_ARGUMENTS_BAD,
 *  the application's CreateMutex error, CKR_GENERAL_ERROR (config or link:
 *  logged), CKR_HOST_MEMORY, CKR_OK.  */
CK_RV
C_Initialize (CK_VOID_PTR init_args)
{
    CK_RV rv;
    cs_client_config_t *config = NULL;
    if ((rv = s_check_init_args (init_args)) != CKR_OK)
        return rv;
    if (s_module.owner != getpid ())
        s_forget_parent ();
    pthread_mutex_lock (&s_init_lock);
    if (cs_guard_check () == CKR_OK) {
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
    if ((rv = cs_guard_mutex_create (init_args)) != CKR_OK)
        goto out;
    if (!(s_module.link = cs_link_new (config, &rv))) {
        cs_guard_mutex_destroy ();
        goto out;
    }
    s_module.config = config;
    config = NULL;
    cs_runner_start (s_module.link, s_module.config->timeout_ms);
    cs_object_list_page_set ((uint32_t) s_module.config->list_page);
    cs_guard_open ();
    cs_log_debug ("initialized from %s%s", s_module.config->path,
                  cs_guard_app_locking () ? " (application mutex callbacks)" : "");
out:
    pthread_mutex_unlock (&s_init_lock);
    cs_client_config_destroy (&config);
    return rv;
}

/*  PKCS#11 2.40 §5.4, safe while other threads are inside calls (module.c
 *  head).  CKR_CRYPTOKI_NOT_INITIALIZED, CKR_ARGUMENTS_BAD, CKR_OK.  */
CK_RV
C_Finalize (CK_VOID_PTR reserved)
{
    cs_link_t *link;
    if (s_module.owner != getpid () || cs_guard_check () != CKR_OK)
        return CKR_CRYPTOKI_NOT_INITIALIZED;
    return_val_if_fail (reserved == NULL, CKR_ARGUMENTS_BAD);
    pthread_mutex_lock (&s_init_lock);
    if (!cs_guard_close ()) {           /* another C_Finalize won */
        pthread_mutex_unlock (&s_init_lock);
        return CKR_CRYPTOKI_NOT_INITIALIZED;
    }
    link = s_module.link;
    cs_link_stop (link);                    /* wakes the threads waiting on the broker */
    cs_guard_wait_idle ();
    /*  Nobody else is inside the library now.  */
    cs_runner_stop ();
    s_module.link = NULL;
    cs_lock ();
    cs_session_reset_all_inlock ();
    cs_object_reset_inlock ();
    cs_token_reset_inlock ();
    cs_unlock ();
    cs_client_config_destroy (&s_module.config);
    cs_link_destroy (&link);                /* joins the I/O thread */
    cs_guard_mutex_destroy ();
    pthread_mutex_unlock (&s_init_lock);
    return CKR_OK;
}

CK_RV
cs_module_info (CK_INFO_PTR info, CK_BYTE major, CK_BYTE minor)
{
    CK_RV rv = cs_guard_check ();
    if (rv != CKR_OK)
        return rv;
    return_val_if_fail (info != NULL, CKR_ARGUMENTS_BAD);
    memset (info, 0, sizeof *info);
    info->cryptokiVersion.major = major;
    info->cryptokiVersion.minor = minor;
    cs_pad (info->manufacturerID, sizeof info->manufacturerID, CS_MANUFACTURER);
    cs_pad (info->libraryDescription, sizeof info->libraryDescription, CS_LIBRARY_DESC);
    info->libraryVersion.major = 0;
    info->libraryVersion.minor = 1;
    return CKR_OK;
}

/*  The 2.40 entry point, for callers that link the units directly (the
 *  unit tests); the function lists use their own per-version C_GetInfo.  */
CK_RV
C_GetInfo (CK_INFO_PTR info)
{
    return cs_module_info (info, CRYPTOKI_VERSION_MAJOR, CRYPTOKI_VERSION_MINOR);
}
