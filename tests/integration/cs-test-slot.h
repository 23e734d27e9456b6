/*  cs-test-slot.h — for the test clients (cs-fork, cs-p11-shell,
 *  cs-session-key, cs-sym, cs-pq-kem, cs-async): the slot whose token has
 *  a given label, and a module's 3.2 function list.  */
#ifndef CS_TEST_SLOT_H_INCLUDED
#define CS_TEST_SLOT_H_INCLUDED

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <p11-kit/pkcs11.h>

/*  Finds the slot (of at most 64 with a token) whose token label is `label`
 *  (compared blank-padded to 32 bytes, PKCS#11 2.40 §3.2 CK_TOKEN_INFO) and
 *  stores it in *slot_p.  Returns CKR_OK, C_GetSlotList's error, or
 *  CKR_TOKEN_NOT_PRESENT when no token has that label.  */
static inline CK_RV
cs_test_slot (CK_FUNCTION_LIST *p11, const char *label, CK_SLOT_ID *slot_p)
{
    CK_SLOT_ID slots [64];
    CK_ULONG count = 64;
    char padded [33];
    snprintf (padded, sizeof padded, "%-32s", label);
    CK_RV rv = p11->C_GetSlotList (CK_TRUE, slots, &count);
    for (CK_ULONG i = 0; rv == CKR_OK && i < count; i++) {
        CK_TOKEN_INFO info;
        if (p11->C_GetTokenInfo (slots [i], &info) == CKR_OK && memcmp (info.label, padded, 32) == 0) {
            *slot_p = slots [i];
            return CKR_OK;
        }
    }
    return rv == CKR_OK ? CKR_TOKEN_NOT_PRESENT : rv;
}

#ifdef CKF_INTERFACE_FORK_SAFE          /* CK_INTERFACE: a 3.0 header, or cs_p11_3.h first */
/*  The PKCS#11 3.2 function list of the module at `path` (dlopened for the
 *  life of the process; C_GetInterface "PKCS 11" version 3.2): a
 *  CK_FUNCTION_LIST_3_2 * (cs_p11_3.h), or NULL when it cannot be loaded
 *  or has no 3.2 interface.  cs-pq-kem, cs-async.  */
static inline void *
cs_test_interface_3_2 (const char *path)
{
    void *dl = dlopen (path, RTLD_NOW | RTLD_LOCAL);
    CK_RV (*get) (CK_UTF8CHAR_PTR, CK_VERSION_PTR, CK_INTERFACE **, CK_FLAGS)
        = dl ? (CK_RV (*) (CK_UTF8CHAR_PTR, CK_VERSION_PTR, CK_INTERFACE **, CK_FLAGS)) dlsym (dl, "C_GetInterface")
             : NULL;
    CK_VERSION version = { 3, 2 };
    CK_INTERFACE *iface = NULL;
    return get && get ((CK_UTF8CHAR *) "PKCS 11", &version, &iface, 0) == CKR_OK && iface ? iface->pFunctionList
                                                                                          : NULL;
}
#endif

#endif
