/*  cs-test-client.h — what the C test clients of tests/integration share
 *  (cs-copy, cs-context-login, cs-stream, cs-sym): the module under test
 *  loaded as applications load it, and the checks of its return codes.
 *  Each message starts with the program's name; a failed check exits 1.
 *  Links nothing of the project.
 */
#ifndef CS_TEST_CLIENT_H_INCLUDED
#define CS_TEST_CLIENT_H_INCLUDED

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <p11-kit/pkcs11.h>

/*  call must return CKR_OK; else prints `what` and the CK_RV, exits 1.  */
#define CHECK(call, what) do { CK_RV rv_ = (call); if (rv_ != CKR_OK) { \
    fprintf (stderr, "%s: %s: CK_RV 0x%lx\n", program_invocation_short_name, what, (unsigned long) rv_); \
    exit (1); } } while (0)

/*  call must return exactly `want` (the code the spec names).  */
#define EXPECT(call, want, what) do { CK_RV rv_ = (call); if (rv_ != (want)) { \
    fprintf (stderr, "%s: %s: CK_RV 0x%lx, expected 0x%lx\n", program_invocation_short_name, what, \
             (unsigned long) rv_, (unsigned long) (want)); exit (1); } } while (0)

/*  Prints "FAIL: what" and exits 1.  */
static inline void
cs_test_fail (const char *what)
{
    fprintf (stderr, "%s: FAIL: %s\n", program_invocation_short_name, what);
    exit (1);
}

/*  The 2.40 function list of the module at `path` (dlopen, as applications
 *  load it); exits 1 when it cannot be loaded.  */
static inline CK_FUNCTION_LIST *
cs_test_module (const char *path)
{
    CK_FUNCTION_LIST *list = NULL;
    void *dl = dlopen (path, RTLD_NOW | RTLD_LOCAL);
    CK_C_GetFunctionList get = dl ? (CK_C_GetFunctionList) dlsym (dl, "C_GetFunctionList") : NULL;
    if (!get || get (&list) != CKR_OK)
        cs_test_fail ("cannot load the module");
    return list;
}

#endif
