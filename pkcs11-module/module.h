/*  module.h — the library's life: C_Initialize, C_Finalize (module.c),
 *  C_GetInfo, fork detection.  module.c sits at the top of the module's
 *  units; jobs run through runner.h, the mutex and call guard are guard.h's.
 *
 *  Layers.  A file includes only module headers of a lower rank, or of its
 *  own unit, so nothing calls upward (tests/integration/module-layers.sh
 *  holds the same list and checks it):
 *
 *     0-1  cs_p11, cs_p11_3, log, keymgmt_int (types only)
 *       2  key, attrs                 the key type and attribute values, at the bottom
 *       2  mechanism, client_config, coalesce
 *       3  keyder, association
 *       4  waitq                      the calls waiting for a broker: send, retry, failover
 *       5  link, link_call, link_int  the connection to the brokers: I/O thread, life
 *                                     cycle; a call, blocking or not (3.2 async)
 *       6  guard                      library mutex and call guard
 *       7  login                      logged-in flags and the login ticket
 *     8-9  dataobj_int, dataobj       the certificate and data object table
 *      10  object, objattr, object_int   the key object table
 *      11  session                    the session table (its last close logs out)
 *      12  runner                     jobs to the broker, ticket in, answer out
 *      13  token, find, keyop, secret_token, modexp, dataobj_jobs
 *      13  async                      3.2 asynchronous sessions: calls in flight, C_Async*
 *      14  derive, secret, secret_key, digest
 *      15  sign
 *      16  decrypt, wrap, local, recover, keymgmt, keymgmt_check, kem
 *      17  module, verify_sig         C_Initialize, C_Finalize, C_GetInfo; 3.2 verify
 *      18  interface                  the function lists
 *
 *  The internal headers (dataobj_int.h, object_int.h, keymgmt_int.h) are
 *  shared by the files of one unit only.
 *
 *  Rule (docs/DESIGN.md §5): the library mutex guards the session, object, login
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
