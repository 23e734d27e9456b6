/*  interface.h — the function lists the module offers: the PKCS#11 2.40
 *  CK_FUNCTION_LIST (C_GetFunctionList) and the "PKCS 11" interface in
 *  versions 3.0 and 2.40 (C_GetInterfaceList, C_GetInterface; PKCS#11 3.0
 *  §5.4).  These three are the library's only exported symbols
 *  (cryptoserver-pkcs11.map).
 *
 *  Every stateful entry point in the lists is a wrapper that runs the real
 *  function inside the call guard (module.h cs_guard_enter/leave), which
 *  is what makes C_Finalize safe while other threads are inside calls.
 *
 *  Interface flags are 0: we do not claim CKF_INTERFACE_FORK_SAFE, which
 *  (3.0 §3.6) promises that a child keeps its copy of the sessions, login
 *  state and object handles.  Ours gets CKR_CRYPTOKI_NOT_INITIALIZED until it
 *  calls C_Initialize (2.40 §6.6.1), because the association with the
 *  broker (a ZeroMQ context with its threads) cannot be shared over fork().
 */
#ifndef CS_MODULE_INTERFACE_H_INCLUDED
#define CS_MODULE_INTERFACE_H_INCLUDED

#include "cs_p11_3.h"

/*  The name of our one interface (3.0 §5.4).  */
#define CS_INTERFACE_NAME "PKCS 11"

#endif
