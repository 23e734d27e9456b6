/*  guard.h — the library mutex and the call guard (PKCS#11 2.40 §5.4, §6.6,
 *  docs/DESIGN.md §5).  The bottom of the module's layers (module.h): it calls
 *  nothing of the module but log.h.
 *
 *  Rule: the library mutex guards the session, object, login and token
 *  tables; no network I/O happens under it.  It is taken and released in
 *  the same function, in the entry points (C_* and their direct helpers);
 *  a function that must be called with it held is named *_inlock.
 */
#ifndef CS_MODULE_GUARD_H_INCLUDED
#define CS_MODULE_GUARD_H_INCLUDED

#include <stdbool.h>
#include "cs_p11.h"

/*  Returns CKR_OK when C_Initialize has run in this process and C_Finalize
 *  has not; CKR_CRYPTOKI_NOT_INITIALIZED otherwise, including in a child
 *  after fork() until it calls C_Initialize (PKCS#11 2.40 §6.6.1).  Without
 *  the mutex (an atomic read); call it before cs_lock in an entry point, as
 *  a forked child must not touch the parent's mutex.  */
CK_RV cs_guard_check (void);

/*  Take and release the library mutex: the application's, made with its
 *  CreateMutex callback, when C_Initialize got mutex callbacks without
 *  CKF_OS_LOCKING_OK (PKCS#11 2.40 §5.4 case 3); a pthread mutex otherwise.
 *  Always as a pair in one function.  */
void cs_lock (void);
void cs_unlock (void);

/*  The entry-point prologue and its end, as a pair (after p11-kit's
 *  BEGIN_CALL / END_CALL): CS_BEGIN_CALL (rv) sets `rv` (a CK_RV of the
 *  caller) to cs_guard_check () and returns it from the calling function
 *  unless it is CKR_OK, then takes the library mutex; CS_END_CALL ()
 *  releases it, once on every path that leaves the locked part (an early
 *  return included).  The variants that also find the session are
 *  session.h's.  tests/integration/module-layers.sh counts a CS_BEGIN_*
 *  as a cs_lock and CS_END_CALL as a cs_unlock, and fails a function that
 *  opens a pair it does not close (docs/DESIGN.md §5).  */
#define CS_BEGIN_CALL(rv) \
    do { \
        if (((rv) = cs_guard_check ()) != CKR_OK) \
            return (rv); \
        cs_lock (); \
    } while (0)
#define CS_END_CALL() cs_unlock ()

/*  The call guard around every entry point of the function lists
 *  (interface.c).  cs_guard_enter returns CKR_CRYPTOKI_NOT_INITIALIZED
 *  (before C_Initialize, during and after C_Finalize, in a forked child)
 *  or CKR_OK, and then the caller must call cs_guard_leave once it is done
 *  with the library's state.  C_Finalize waits (cs_guard_wait_idle) until
 *  every guarded call has left before it frees anything.  */
CK_RV cs_guard_enter (void);
void cs_guard_leave (void);

/*  ---- for module.c (C_Initialize, C_Finalize, fork) -------------------- */

/*  Makes the library mutex (PKCS#11 2.40 §5.4): with callbacks and without
 *  CKF_OS_LOCKING_OK (case 3) the application's own; otherwise (cases 1,
 *  2 and 4: with CKF_OS_LOCKING_OK we may pick either) our pthread mutex.
 *  The handle CreateMutex makes is the application's business: NULL is a
 *  handle like any other.  Returns CKR_OK or CreateMutex's error.  */
CK_RV cs_guard_mutex_create (const CK_C_INITIALIZE_ARGS *args);

/*  Destroys the application's mutex once nobody can use it (logs a failing
 *  DestroyMutex).  */
void cs_guard_mutex_destroy (void);

/*  True when the library mutex is the application's.  */
bool cs_guard_app_locking (void);

/*  Opens the guard for this process: from now on cs_guard_check and
 *  cs_guard_enter answer CKR_OK.  */
void cs_guard_open (void);

/*  Closes the guard: no new guarded call gets in.  Returns false when it
 *  was already closed (another C_Finalize won).  */
bool cs_guard_close (void);

/*  Waits until every guarded call has left (after cs_guard_close).  */
void cs_guard_wait_idle (void);

/*  In a forked child: re-initialises our mutexes (a parent thread may have
 *  held them at fork()), forgets the parent's application mutex without
 *  touching it, and closes the guard.  */
void cs_guard_after_fork (void);

#endif
