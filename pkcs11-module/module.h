/*  module.h — the library's life: C_Initialize, C_Finalize (module.c),
 *  C_GetInfo, fork detection.  module.c sits at the top of the module's
 *  units; jobs run through runner.h, the mutex and call guard are guard.h's.
 *
 *  Layers.  A unit includes only headers of its own layer or below; nothing
 *  calls upward (tests/integration/module-layers.sh checks it):
 *
 *    0  log, client_config, association, coalesce, link, mechanism
 *    1  key, attrs, keyder          the key type and attribute values
 *    2  guard                       library mutex and call guard
 *    3  login                       logged-in flags and the login ticket
 *    4  dataobj, object            the object tables
 *    5  session                     the session table
 *    6  runner                      jobs to the broker (ticket in, answer out)
 *    7  token, find, keyop, sign, decrypt, wrap, local, recover, derive,
 *       modexp, secret_token, secret, keymgmt, dataobj_jobs   entry points
 *    8  module                      C_Initialize, C_Finalize, C_GetInfo
 *    9  interface                   the function lists
 *
 *  Rule (DESIGN.md §5): the library mutex guards the session, object, login
 *  and token tables; no network I/O happens under it.  An entry point takes
 *  the mutex and releases it in the same function (cs_lock / cs_unlock),
 *  copies what it needs, then calls cs_runner_run_job without it; every
 *  function that must be called with the mutex held is named *_inlock.
 */
#ifndef CS_MODULE_MODULE_H_INCLUDED
#define CS_MODULE_MODULE_H_INCLUDED

#include <stdbool.h>
#include "cs_p11.h"
#include "cs_wire.h"

/*  Fills CK_INFO (PKCS#11 2.40 §5.4 C_GetInfo) with cryptokiVersion
 *  major.minor: the version of the interface it is called through.
 *  CKR_CRYPTOKI_NOT_INITIALIZED, CKR_ARGUMENTS_BAD, CKR_OK.  */
CK_RV cs_module_info (CK_INFO_PTR info, CK_BYTE major, CK_BYTE minor);

#endif
