/*  test_module_fixture.h — the built cryptoserver-pkcs11.so, loaded with
 *  dlopen() as applications load it, pointed at a broker the test runs
 *  in-process (test_broker_fixture.h).  The module is
 *  $CRYPTOSERVER_MODULE_PATH, else
 *  $top_builddir/pkcs11-module/.libs/cryptoserver-pkcs11.so (make check).
 *  Header-only (static).
 */
#ifndef TEST_MODULE_FIXTURE_H_INCLUDED
#define TEST_MODULE_FIXTURE_H_INCLUDED

#include <dlfcn.h>
#include <pthread.h>
#include "test_broker_fixture.h"

/*  Writes DIR/client.conf for client "app" of a th_certs (dir, "app", ...)
 *  deployment: the broker at endpoint, CURVE on, timeout_ms per request;
 *  CRYPTOSERVER_CONF names it (cryptoserver-client.conf(5)).  */
static inline void
tm_client_conf (const char *dir, const char *endpoint, int timeout_ms)
{
    char *text = NULL, path [4096];
    ck_assert_int_ge (asprintf (&text,
        "client\n"
        "    endpoints = %s\n"
        "    broker-cert = broker.cert\n"
        "    certificate = app.cert\n"
        "    curve = true\n"
        "    timeout-ms = %d\n", endpoint, timeout_ms), 0);
    th_write (dir, "client.conf", text);
    free (text);
    snprintf (path, sizeof path, "%s/client.conf", dir);
    setenv ("CRYPTOSERVER_CONF", path, 1);
}

/*  dlopen()s the module (RTLD_NOW | RTLD_LOCAL) and gets its 2.40 function
 *  list into *list_p with C_GetFunctionList; fails the test when any step
 *  fails.  Returns the dlopen handle (tm_module_close).  */
static inline void *
tm_module_open (CK_FUNCTION_LIST **list_p)
{
    char path [4096];
    const char *env = getenv ("CRYPTOSERVER_MODULE_PATH"), *top = getenv ("top_builddir");
    CK_RV (*get_list) (CK_FUNCTION_LIST_PTR_PTR);
    if (env)
        snprintf (path, sizeof path, "%s", env);
    else
        snprintf (path, sizeof path, "%s/pkcs11-module/.libs/cryptoserver-pkcs11.so", top ? top : ".");
    void *dl = dlopen (path, RTLD_NOW | RTLD_LOCAL);
    ck_assert_msg (dl != NULL, "dlopen %s: %s", path, dlerror ());
    *(void **) &get_list = dlsym (dl, "C_GetFunctionList");
    ck_assert_ptr_nonnull (get_list);
    ck_assert_uint_eq (get_list (list_p), CKR_OK);
    return dl;
}

/*  C_Finalize (its answer ignored: the test may have finalized) when
 *  *list_p, dlclose when *dl_p; nulls both.  */
static inline void
tm_module_close (CK_FUNCTION_LIST **list_p, void **dl_p)
{
    if (*list_p)
        (*list_p)->C_Finalize (NULL);
    if (*dl_p)
        dlclose (*dl_p);
    *dl_p = NULL;
    *list_p = NULL;
}

/*  C_OpenSession on slot 0 (the module's one slot) with CKF_SERIAL_SESSION
 *  | flags, no callback; fails the test unless CKR_OK.  Returns the
 *  handle.  */
static inline CK_SESSION_HANDLE
tm_open (CK_FUNCTION_LIST *p, CK_FLAGS flags)
{
    CK_SESSION_HANDLE h = 0;
    ck_assert_uint_eq (p->C_OpenSession (0, CKF_SERIAL_SESSION | flags, NULL, NULL, &h), CKR_OK);
    return h;
}

/*  The state of session h (C_GetSessionInfo, which must answer CKR_OK and
 *  name slot 0).  */
static inline CK_STATE
tm_state (CK_FUNCTION_LIST *p, CK_SESSION_HANDLE h)
{
    CK_SESSION_INFO info;
    ck_assert_uint_eq (p->C_GetSessionInfo (h, &info), CKR_OK);
    ck_assert_uint_eq (info.slotID, 0);
    return info.state;
}

/*  What the counting application mutex callbacks (tm_mx_args) saw and
 *  do.  */
typedef struct {
    int created, destroyed, locked, unlocked;   /* calls, counted atomically */
    CK_RV create_rv;                /* CreateMutex answers this when not CKR_OK */
    void (*lock_hook) (void);       /* LockMutex calls it first, when set */
} tm_mx_t;

static tm_mx_t tm_mx __attribute__ ((unused));

/*  Zeroes tm_mx (CK_FORK=no, make memcheck, runs the tests in one process).  */
static inline void
tm_mx_reset (void)
{
    memset (&tm_mx, 0, sizeof tm_mx);
}

static inline CK_RV
tm_mx_create (CK_VOID_PTR_PTR mutex_p)
{
    pthread_mutex_t *mutex;
    if (tm_mx.create_rv != CKR_OK)
        return tm_mx.create_rv;
    if (!(mutex = malloc (sizeof *mutex)))
        return CKR_HOST_MEMORY;
    pthread_mutex_init (mutex, NULL);
    __atomic_add_fetch (&tm_mx.created, 1, __ATOMIC_SEQ_CST);
    *mutex_p = mutex;
    return CKR_OK;
}

static inline CK_RV
tm_mx_destroy (CK_VOID_PTR mutex)
{
    pthread_mutex_destroy (mutex);
    free (mutex);
    __atomic_add_fetch (&tm_mx.destroyed, 1, __ATOMIC_SEQ_CST);
    return CKR_OK;
}

/*  The hook runs before the lock is taken, in the thread that asks for it
 *  (which does not hold it): another call into the module, as another
 *  thread could make at that moment.  */
static inline CK_RV
tm_mx_lock (CK_VOID_PTR mutex)
{
    if (tm_mx.lock_hook)
        tm_mx.lock_hook ();
    __atomic_add_fetch (&tm_mx.locked, 1, __ATOMIC_SEQ_CST);
    return pthread_mutex_lock (mutex) == 0 ? CKR_OK : CKR_MUTEX_BAD;
}

static inline CK_RV
tm_mx_unlock (CK_VOID_PTR mutex)
{
    __atomic_add_fetch (&tm_mx.unlocked, 1, __ATOMIC_SEQ_CST);
    return pthread_mutex_unlock (mutex) == 0 ? CKR_OK : CKR_MUTEX_NOT_LOCKED;
}

/*  C_Initialize arguments with the four counting callbacks (PKCS#11 2.40
 *  §5.4), flags 0.  Shared: copy it to change the flags.  */
static inline CK_C_INITIALIZE_ARGS *
tm_mx_args (void)
{
    static CK_C_INITIALIZE_ARGS args = { tm_mx_create, tm_mx_destroy, tm_mx_lock, tm_mx_unlock, 0, NULL };
    return &args;
}

#endif
