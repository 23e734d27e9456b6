/*  guard.c — the library mutex and the call guard (guard.h).
 *
 *  The library mutex is the application's when C_Initialize gets mutex
 *  callbacks without CKF_OS_LOCKING_OK, a pthread mutex otherwise.  The
 *  call guard is a count of calls in flight under a pthread mutex of our
 *  own that never calls the application; module.c's C_Finalize closes it,
 *  stops the link, waits for the count to reach zero and only then frees
 *  the tables: no call can touch freed state.
 */
#include <pthread.h>
#include <string.h>
#include <unistd.h>
#include "log.h"
#include "guard.h"

static pthread_mutex_t s_lock = PTHREAD_MUTEX_INITIALIZER;        /* the library mutex (OS locking) */
static pthread_mutex_t s_calls_lock = PTHREAD_MUTEX_INITIALIZER;  /* the call guard */
static pthread_cond_t s_calls_left = PTHREAD_COND_INITIALIZER;

static struct {
    bool initialized;           /* read and written with __atomic builtins: */
    pid_t pid;                  /* process that ran C_Initialize (likewise) */
    size_t calls;               /* guarded calls in flight (s_calls_lock) */
    CK_C_INITIALIZE_ARGS app;   /* the application's mutex callbacks */
    bool app_locking;           /* the library mutex is the application's (else s_lock) */
    void *app_mutex;            /* its handle, as CreateMutex made it (may be NULL) */
} s_guard;

/*  The fast-path checks read these without the library mutex (C_Finalize
 *  may be changing them under the call guard): atomically, not volatile.  */
static bool
s_initialized (void)
{
    return __atomic_load_n (&s_guard.initialized, __ATOMIC_SEQ_CST);
}

static pid_t
s_pid (void)
{
    return __atomic_load_n (&s_guard.pid, __ATOMIC_SEQ_CST);
}

CK_RV
cs_guard_check (void)
{
    if (!s_initialized () || s_pid () != getpid ())
        return CKR_CRYPTOKI_NOT_INITIALIZED;
    return CKR_OK;
}

void
cs_lock (void)
{
    if (s_guard.app_locking) {
        if (s_guard.app.LockMutex (s_guard.app_mutex) != CKR_OK)
            cs_log_error ("the application's LockMutex failed");
    }
    else
        pthread_mutex_lock (&s_lock);
}

void
cs_unlock (void)
{
    if (s_guard.app_locking) {
        if (s_guard.app.UnlockMutex (s_guard.app_mutex) != CKR_OK)
            cs_log_error ("the application's UnlockMutex failed");
    }
    else
        pthread_mutex_unlock (&s_lock);
}

CK_RV
cs_guard_enter (void)
{
    CK_RV rv = CKR_OK;
    if (s_pid () != getpid ())
        return CKR_CRYPTOKI_NOT_INITIALIZED;    /* a child: never touch the parent's locks */
    pthread_mutex_lock (&s_calls_lock);
    if (!s_initialized ())
        rv = CKR_CRYPTOKI_NOT_INITIALIZED;
    else
        s_guard.calls++;
    pthread_mutex_unlock (&s_calls_lock);
    return rv;
}

void
cs_guard_leave (void)
{
    pthread_mutex_lock (&s_calls_lock);
    if (--s_guard.calls == 0)
        pthread_cond_broadcast (&s_calls_left);
    pthread_mutex_unlock (&s_calls_lock);
}

CK_RV
cs_guard_mutex_create (const CK_C_INITIALIZE_ARGS *args)
{
    CK_RV rv;
    void *mutex = NULL;
    if (!args || !args->CreateMutex || (args->flags & CKF_OS_LOCKING_OK))
        return CKR_OK;
    if ((rv = args->CreateMutex (&mutex)) != CKR_OK)
        return rv;
    s_guard.app = *args;
    s_guard.app_mutex = mutex;
    s_guard.app_locking = true;
    return CKR_OK;
}

void
cs_guard_mutex_destroy (void)
{
    void *mutex = s_guard.app_mutex;
    bool app_locking = s_guard.app_locking;
    s_guard.app_mutex = NULL;
    s_guard.app_locking = false;
    if (app_locking && s_guard.app.DestroyMutex (mutex) != CKR_OK)
        cs_log_warning ("the application's DestroyMutex failed");
    memset (&s_guard.app, 0, sizeof s_guard.app);
}

bool
cs_guard_app_locking (void)
{
    return s_guard.app_locking;
}

void
cs_guard_open (void)
{
    pthread_mutex_lock (&s_calls_lock);     /* publishes the state to cs_guard_enter */
    __atomic_store_n (&s_guard.pid, getpid (), __ATOMIC_SEQ_CST);
    __atomic_store_n (&s_guard.initialized, true, __ATOMIC_SEQ_CST);
    pthread_mutex_unlock (&s_calls_lock);
}

bool
cs_guard_close (void)
{
    bool was_open;
    pthread_mutex_lock (&s_calls_lock);
    was_open = s_initialized ();
    __atomic_store_n (&s_guard.initialized, false, __ATOMIC_SEQ_CST);  /* no new guarded call gets in */
    pthread_mutex_unlock (&s_calls_lock);
    return was_open;
}

void
cs_guard_wait_idle (void)
{
    pthread_mutex_lock (&s_calls_lock);
    while (s_guard.calls > 0)
        pthread_cond_wait (&s_calls_left, &s_calls_lock);
    pthread_mutex_unlock (&s_calls_lock);
}

void
cs_guard_after_fork (void)
{
    pthread_mutex_init (&s_lock, NULL);
    pthread_mutex_init (&s_calls_lock, NULL);
    pthread_cond_init (&s_calls_left, NULL);
    s_guard.calls = 0;
    s_guard.app_mutex = NULL;
    s_guard.app_locking = false;
    memset (&s_guard.app, 0, sizeof s_guard.app);
    __atomic_store_n (&s_guard.initialized, false, __ATOMIC_SEQ_CST);
}
