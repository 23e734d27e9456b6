/*  module.c — library-wide state: C_Initialize, C_Finalize, C_GetInfo, the
 *  library mutex, the call guard and fork detection (PKCS#11 2.40 §5.4, §6.6,
 *  DESIGN.md §5).  The function lists are in interface.c.
 *
 *  Threads.  The library mutex guards the session, object and token tables;
 *  it is the application's when C_Initialize gets mutex callbacks without
 *  CKF_OS_LOCKING_OK, a pthread mutex otherwise.  Every entry point of the
 *  function lists runs inside the call guard (cs_module_enter/leave, a
 *  count of calls in flight under a pthread mutex of our own that never
 *  calls the application).  C_Finalize closes the guard, stops the link
 *  (which wakes every thread waiting on the broker with
 *  CKR_CRYPTOKI_NOT_INITIALIZED), waits for the count to reach zero, and
 *  only then frees the tables, the link and the application's mutex: no
 *  call can touch freed state.  C_Initialize and C_Finalize are serialised
 *  by a second private mutex, so C_Initialize right after (or during) a
 *  C_Finalize waits for it and then works.
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
#include <openssl/crypto.h>
#include "log.h"
#include "client_config.h"
#include "link.h"
#include "runner.h"
#include "token.h"
#include "session.h"
#include "object.h"
#include "module.h"

static pthread_mutex_t s_lock = PTHREAD_MUTEX_INITIALIZER;        /* the library mutex (OS locking) */
static pthread_mutex_t s_init_lock = PTHREAD_MUTEX_INITIALIZER;   /* C_Initialize vs C_Finalize */
static pthread_mutex_t s_calls_lock = PTHREAD_MUTEX_INITIALIZER;  /* the call guard */
static pthread_cond_t s_calls_left = PTHREAD_COND_INITIALIZER;

static struct {
    bool initialized;           /* read and written with __atomic builtins: */
    pid_t pid;                  /* process that ran C_Initialize (likewise) */
    pid_t owner;                /* process whose state this is (0: none yet) */
    size_t calls;               /* guarded calls in flight (s_calls_lock) */
    CK_C_INITIALIZE_ARGS app;   /* the application's mutex callbacks */
    bool app_locking;           /* the library mutex is the application's (else s_lock) */
    void *app_mutex;            /* its handle, as CreateMutex made it (may be NULL) */
    cs_client_config_t *config;
    cs_client_config_t *inherited_config;   /* the parent's, after fork (s_forget_parent) */
    cs_link_t *link;
} s_module;

/*  The fast-path checks read these without the library mutex (C_Finalize
 *  may be changing them under the call guard): atomically, not volatile.  */
static bool
s_initialized (void)
{
    return __atomic_load_n (&s_module.initialized, __ATOMIC_SEQ_CST);
}

static pid_t
s_pid (void)
{
    return __atomic_load_n (&s_module.pid, __ATOMIC_SEQ_CST);
}

CK_RV
cs_module_check (void)
{
    if (!s_initialized () || s_pid () != getpid ())
        return CKR_CRYPTOKI_NOT_INITIALIZED;
    return CKR_OK;
}

void
cs_module_lock (void)
{
    if (s_module.app_locking) {
        if (s_module.app.LockMutex (s_module.app_mutex) != CKR_OK)
            cs_log_error ("the application's LockMutex failed");
    }
    else
        pthread_mutex_lock (&s_lock);
}

void
cs_module_unlock (void)
{
    if (s_module.app_locking) {
        if (s_module.app.UnlockMutex (s_module.app_mutex) != CKR_OK)
            cs_log_error ("the application's UnlockMutex failed");
    }
    else
        pthread_mutex_unlock (&s_lock);
}

CK_RV
cs_module_enter (void)
{
    CK_RV rv = CKR_OK;
    if (s_pid () != getpid ())
        return CKR_CRYPTOKI_NOT_INITIALIZED;    /* a child: never touch the parent's locks */
    pthread_mutex_lock (&s_calls_lock);
    if (!s_initialized ())
        rv = CKR_CRYPTOKI_NOT_INITIALIZED;
    else
        s_module.calls++;
    pthread_mutex_unlock (&s_calls_lock);
    return rv;
}

void
cs_module_leave (void)
{
    pthread_mutex_lock (&s_calls_lock);
    if (--s_module.calls == 0)
        pthread_cond_broadcast (&s_calls_left);
    pthread_mutex_unlock (&s_calls_lock);
}

void
cs_module_pad (unsigned char *field, size_t size, const char *text)
{
    size_t len = text ? strlen (text) : 0;
    memset (field, ' ', size);
    memcpy (field, text, len < size ? len : size);
}

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

/*  Makes the library mutex (PKCS#11 2.40 §5.4): with callbacks and without
 *  CKF_OS_LOCKING_OK (case 3) the application's own; otherwise (cases 1,
 *  2 and 4: with CKF_OS_LOCKING_OK we may pick either) our pthread mutex.
 *  The handle CreateMutex makes is the application's business: NULL is a
 *  handle like any other (an application with one global lock may use it).
 *  CreateMutex's error is C_Initialize's.  */
static CK_RV
s_mutex_create (const CK_C_INITIALIZE_ARGS *args)
{
    CK_RV rv;
    void *mutex = NULL;
    if (!args || !args->CreateMutex || (args->flags & CKF_OS_LOCKING_OK))
        return CKR_OK;
    if ((rv = args->CreateMutex (&mutex)) != CKR_OK)
        return rv;
    s_module.app = *args;
    s_module.app_mutex = mutex;
    s_module.app_locking = true;
    return CKR_OK;
}

/*  Destroys the application's mutex once nobody can use it.  */
static void
s_mutex_destroy (void)
{
    void *mutex = s_module.app_mutex;
    bool app_locking = s_module.app_locking;
    s_module.app_mutex = NULL;
    s_module.app_locking = false;
    if (app_locking && s_module.app.DestroyMutex (mutex) != CKR_OK)
        cs_log_warning ("the application's DestroyMutex failed");
    memset (&s_module.app, 0, sizeof s_module.app);
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
    pthread_mutex_init (&s_lock, NULL);
    pthread_mutex_init (&s_init_lock, NULL);
    pthread_mutex_init (&s_calls_lock, NULL);
    pthread_cond_init (&s_calls_left, NULL);
    s_module.calls = 0;
    s_module.app_mutex = NULL;
    s_module.app_locking = false;
    memset (&s_module.app, 0, sizeof s_module.app);
    cs_runner_stop ();
    cs_link_abandon (&s_module.link);
    if (s_module.config) {
        cs_client_config_destroy (&s_module.inherited_config);
        s_module.inherited_config = s_module.config;
        s_module.config = NULL;
    }
    cs_session_reset_all ();
    cs_object_reset ();
    cs_token_reset ();
    __atomic_store_n (&s_module.initialized, false, __ATOMIC_SEQ_CST);
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
    if (s_initialized ()) {
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
    if ((rv = s_mutex_create (init_args)) != CKR_OK)
        goto out;
    if (!(s_module.link = cs_link_new (config, &rv))) {
        s_mutex_destroy ();
        goto out;
    }
    s_module.config = config;
    config = NULL;
    cs_runner_start (s_module.link, s_module.config->timeout_ms);
    pthread_mutex_lock (&s_calls_lock);     /* publishes the state to cs_module_enter */
    __atomic_store_n (&s_module.pid, getpid (), __ATOMIC_SEQ_CST);
    __atomic_store_n (&s_module.initialized, true, __ATOMIC_SEQ_CST);
    pthread_mutex_unlock (&s_calls_lock);
    cs_log_debug ("initialized from %s%s", s_module.config->path,
                  s_module.app_locking ? " (application mutex callbacks)" : "");
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
    if (s_module.owner != getpid () || cs_module_check () != CKR_OK)
        return CKR_CRYPTOKI_NOT_INITIALIZED;
    return_val_if_fail (reserved == NULL, CKR_ARGUMENTS_BAD);
    pthread_mutex_lock (&s_init_lock);
    pthread_mutex_lock (&s_calls_lock);
    if (!s_initialized ()) {            /* another C_Finalize won */
        pthread_mutex_unlock (&s_calls_lock);
        pthread_mutex_unlock (&s_init_lock);
        return CKR_CRYPTOKI_NOT_INITIALIZED;
    }
    __atomic_store_n (&s_module.initialized, false, __ATOMIC_SEQ_CST);  /* no new guarded call gets in */
    pthread_mutex_unlock (&s_calls_lock);
    link = s_module.link;
    cs_link_stop (link);                    /* wakes the threads waiting on the broker */
    pthread_mutex_lock (&s_calls_lock);
    while (s_module.calls > 0)
        pthread_cond_wait (&s_calls_left, &s_calls_lock);
    pthread_mutex_unlock (&s_calls_lock);
    /*  Nobody else is inside the library now.  */
    cs_runner_stop ();
    s_module.link = NULL;
    cs_module_lock ();
    cs_session_reset_all ();
    cs_object_reset ();
    cs_token_reset ();
    cs_module_unlock ();
    cs_client_config_destroy (&s_module.config);
    cs_link_destroy (&link);                /* joins the I/O thread */
    s_mutex_destroy ();
    pthread_mutex_unlock (&s_init_lock);
    return CKR_OK;
}

CK_RV
cs_module_info (CK_INFO_PTR info, CK_BYTE major, CK_BYTE minor)
{
    CK_RV rv = cs_module_check ();
    if (rv != CKR_OK)
        return rv;
    return_val_if_fail (info != NULL, CKR_ARGUMENTS_BAD);
    memset (info, 0, sizeof *info);
    info->cryptokiVersion.major = major;
    info->cryptokiVersion.minor = minor;
    cs_module_pad (info->manufacturerID, sizeof info->manufacturerID, CS_MANUFACTURER);
    cs_module_pad (info->libraryDescription, sizeof info->libraryDescription, CS_LIBRARY_DESC);
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
