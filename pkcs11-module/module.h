/*  module.h — library-wide state of the PKCS#11 module: initialisation, the
 *  one library mutex, fork detection.  Jobs run through runner.h.
 *
 *  Rule (DESIGN.md §5): the library mutex guards the session, object and
 *  token tables; no network I/O happens under it.  Entry points copy what
 *  they need under the lock, release it, then call cs_runner_run_job.
 */
#ifndef CS_MODULE_MODULE_H_INCLUDED
#define CS_MODULE_MODULE_H_INCLUDED

#include <stdbool.h>
#include "cs_p11.h"
#include "cs_wire.h"

/*  Returns CKR_OK when C_Initialize has run in this process and C_Finalize
 *  has not; CKR_CRYPTOKI_NOT_INITIALIZED otherwise, including in a child
 *  after fork() until it calls C_Initialize (PKCS#11 2.40 §6.6.1).  */
CK_RV cs_module_check (void);

/*  Take and release the library mutex: the application's, made with its
 *  CreateMutex callback, when C_Initialize got mutex callbacks without
 *  CKF_OS_LOCKING_OK (PKCS#11 2.40 §5.4 case 3); a pthread mutex otherwise.  */
void cs_module_lock (void);
void cs_module_unlock (void);

/*  The call guard around every entry point of the function lists
 *  (interface.c).  cs_module_enter returns CKR_CRYPTOKI_NOT_INITIALIZED
 *  (before C_Initialize, during and after C_Finalize, in a forked child)
 *  or CKR_OK, and then the caller must call cs_module_leave once it is done
 *  with the library's state.  C_Finalize waits until every guarded call has
 *  left before it frees anything, so it is safe while other threads are
 *  inside calls (they are woken with CKR_CRYPTOKI_NOT_INITIALIZED).  */
CK_RV cs_module_enter (void);
void cs_module_leave (void);

/*  Fills CK_INFO (PKCS#11 2.40 §5.4 C_GetInfo) with cryptokiVersion
 *  major.minor: the version of the interface it is called through.
 *  CKR_CRYPTOKI_NOT_INITIALIZED, CKR_ARGUMENTS_BAD, CKR_OK.  */
CK_RV cs_module_info (CK_INFO_PTR info, CK_BYTE major, CK_BYTE minor);

/*  Copies `text` into a blank-padded, not terminated PKCS#11 string field of
 *  `size` bytes (truncating).  */
void cs_module_pad (unsigned char *field, size_t size, const char *text);

#endif
