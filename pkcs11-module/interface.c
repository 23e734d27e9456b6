/*  interface.c — the function lists (2.40, 3.0 and 3.2), the call-guard
 *  wrappers, C_GetFunctionList, C_GetInterfaceList, C_GetInterface, and
 *  the entry points the module does not provide.  See interface.h.
 *
 *  What we leave out, and why the specification allows it (each answers
 *  CKR_FUNCTION_NOT_SUPPORTED after the usual CKR_CRYPTOKI_NOT_INITIALIZED,
 *  which 2.40 §11 allows for any function a library does not support):
 *  C_InitToken (the token is the tenant's view of the broker, initialised
 *  with cryptoserver-admin), C_GetOperationState/C_SetOperationState (an
 *  operation holds key references and, for decryption, plaintext that must
 *  not leave the module), multi-part encryption and decryption (RSA is
 *  single-part, curr. mech. §2.1), the dual-function calls (no mechanism
 *  of ours has them), and the 3.0 message-based functions (no AEAD
 *  mechanism); of 3.2 (the KEM functions are kem.c's, the asynchronous
 *  ones async.c's), authenticated wrapping (no such mechanism); C_WrapKey and C_UnwrapKey are in wrap.c, 3.2's
 *  C_VerifySignature* in verify.c.
 *  C_GetFunctionStatus and C_CancelFunction answer CKR_FUNCTION_NOT_PARALLEL (2.40 §5.16, legacy);
 *  C_WaitForSlotEvent answers CKR_NO_EVENT with CKF_DONT_BLOCK (the one slot
 *  never changes) and CKR_FUNCTION_NOT_SUPPORTED when asked to block.
 */
#include <string.h>
#include "log.h"
#include "guard.h"
#include "module.h"
#include "session.h"
#include "token.h"
#include "verify.h"
#include "kem.h"
#include "async.h"
#include "interface.h"

/*  ---- the wrappers -------------------------------------------------------- */

/*  Every stateful entry point: name, parameters, arguments.  */
#define CS_GUARDED_ENTRIES(X) \
    X (C_GetSlotList, (CK_BBOOL a, CK_SLOT_ID_PTR b, CK_ULONG_PTR c), (a, b, c)) \
    X (C_GetSlotInfo, (CK_SLOT_ID a, CK_SLOT_INFO_PTR b), (a, b)) \
    X (C_GetTokenInfo, (CK_SLOT_ID a, CK_TOKEN_INFO_PTR b), (a, b)) \
    X (C_GetMechanismList, (CK_SLOT_ID a, CK_MECHANISM_TYPE_PTR b, CK_ULONG_PTR c), (a, b, c)) \
    X (C_GetMechanismInfo, (CK_SLOT_ID a, CK_MECHANISM_TYPE b, CK_MECHANISM_INFO_PTR c), (a, b, c)) \
    X (C_InitPIN, (CK_SESSION_HANDLE a, CK_UTF8CHAR_PTR b, CK_ULONG c), (a, b, c)) \
    X (C_SetPIN, (CK_SESSION_HANDLE a, CK_UTF8CHAR_PTR b, CK_ULONG c, CK_UTF8CHAR_PTR d, CK_ULONG e), \
       (a, b, c, d, e)) \
    X (C_OpenSession, (CK_SLOT_ID a, CK_FLAGS b, CK_VOID_PTR c, CK_NOTIFY d, CK_SESSION_HANDLE_PTR e), \
       (a, b, c, d, e)) \
    X (C_CloseSession, (CK_SESSION_HANDLE a), (a)) \
    X (C_CloseAllSessions, (CK_SLOT_ID a), (a)) \
    X (C_GetSessionInfo, (CK_SESSION_HANDLE a, CK_SESSION_INFO_PTR b), (a, b)) \
    X (C_Login, (CK_SESSION_HANDLE a, CK_USER_TYPE b, CK_UTF8CHAR_PTR c, CK_ULONG d), (a, b, c, d)) \
    X (C_Logout, (CK_SESSION_HANDLE a), (a)) \
    X (C_CreateObject, (CK_SESSION_HANDLE a, CK_ATTRIBUTE_PTR b, CK_ULONG c, CK_OBJECT_HANDLE_PTR d), \
       (a, b, c, d)) \
    X (C_CopyObject, (CK_SESSION_HANDLE a, CK_OBJECT_HANDLE b, CK_ATTRIBUTE_PTR c, CK_ULONG d, \
       CK_OBJECT_HANDLE_PTR e), (a, b, c, d, e)) \
    X (C_DestroyObject, (CK_SESSION_HANDLE a, CK_OBJECT_HANDLE b), (a, b)) \
    X (C_GetObjectSize, (CK_SESSION_HANDLE a, CK_OBJECT_HANDLE b, CK_ULONG_PTR c), (a, b, c)) \
    X (C_GetAttributeValue, (CK_SESSION_HANDLE a, CK_OBJECT_HANDLE b, CK_ATTRIBUTE_PTR c, CK_ULONG d), \
       (a, b, c, d)) \
    X (C_SetAttributeValue, (CK_SESSION_HANDLE a, CK_OBJECT_HANDLE b, CK_ATTRIBUTE_PTR c, CK_ULONG d), \
       (a, b, c, d)) \
    X (C_FindObjectsInit, (CK_SESSION_HANDLE a, CK_ATTRIBUTE_PTR b, CK_ULONG c), (a, b, c)) \
    X (C_FindObjects, (CK_SESSION_HANDLE a, CK_OBJECT_HANDLE_PTR b, CK_ULONG c, CK_ULONG_PTR d), (a, b, c, d)) \
    X (C_FindObjectsFinal, (CK_SESSION_HANDLE a), (a)) \
    X (C_EncryptInit, (CK_SESSION_HANDLE a, CK_MECHANISM_PTR b, CK_OBJECT_HANDLE c), (a, b, c)) \
    X (C_Encrypt, (CK_SESSION_HANDLE a, CK_BYTE_PTR b, CK_ULONG c, CK_BYTE_PTR d, CK_ULONG_PTR e), \
       (a, b, c, d, e)) \
    X (C_EncryptUpdate, (CK_SESSION_HANDLE a, CK_BYTE_PTR b, CK_ULONG c, CK_BYTE_PTR d, CK_ULONG_PTR e), \
       (a, b, c, d, e)) \
    X (C_EncryptFinal, (CK_SESSION_HANDLE a, CK_BYTE_PTR b, CK_ULONG_PTR c), (a, b, c)) \
    X (C_DecryptInit, (CK_SESSION_HANDLE a, CK_MECHANISM_PTR b, CK_OBJECT_HANDLE c), (a, b, c)) \
    X (C_Decrypt, (CK_SESSION_HANDLE a, CK_BYTE_PTR b, CK_ULONG c, CK_BYTE_PTR d, CK_ULONG_PTR e), \
       (a, b, c, d, e)) \
    X (C_DecryptUpdate, (CK_SESSION_HANDLE a, CK_BYTE_PTR b, CK_ULONG c, CK_BYTE_PTR d, CK_ULONG_PTR e), \
       (a, b, c, d, e)) \
    X (C_DecryptFinal, (CK_SESSION_HANDLE a, CK_BYTE_PTR b, CK_ULONG_PTR c), (a, b, c)) \
    X (C_GenerateKey, (CK_SESSION_HANDLE a, CK_MECHANISM_PTR b, CK_ATTRIBUTE_PTR c, CK_ULONG d, \
       CK_OBJECT_HANDLE_PTR e), (a, b, c, d, e)) \
    X (C_DigestInit, (CK_SESSION_HANDLE a, CK_MECHANISM_PTR b), (a, b)) \
    X (C_Digest, (CK_SESSION_HANDLE a, CK_BYTE_PTR b, CK_ULONG c, CK_BYTE_PTR d, CK_ULONG_PTR e), \
       (a, b, c, d, e)) \
    X (C_DigestUpdate, (CK_SESSION_HANDLE a, CK_BYTE_PTR b, CK_ULONG c), (a, b, c)) \
    X (C_DigestFinal, (CK_SESSION_HANDLE a, CK_BYTE_PTR b, CK_ULONG_PTR c), (a, b, c)) \
    X (C_SignInit, (CK_SESSION_HANDLE a, CK_MECHANISM_PTR b, CK_OBJECT_HANDLE c), (a, b, c)) \
    X (C_Sign, (CK_SESSION_HANDLE a, CK_BYTE_PTR b, CK_ULONG c, CK_BYTE_PTR d, CK_ULONG_PTR e), \
       (a, b, c, d, e)) \
    X (C_SignUpdate, (CK_SESSION_HANDLE a, CK_BYTE_PTR b, CK_ULONG c), (a, b, c)) \
    X (C_SignFinal, (CK_SESSION_HANDLE a, CK_BYTE_PTR b, CK_ULONG_PTR c), (a, b, c)) \
    X (C_VerifyInit, (CK_SESSION_HANDLE a, CK_MECHANISM_PTR b, CK_OBJECT_HANDLE c), (a, b, c)) \
    X (C_Verify, (CK_SESSION_HANDLE a, CK_BYTE_PTR b, CK_ULONG c, CK_BYTE_PTR d, CK_ULONG e), \
       (a, b, c, d, e)) \
    X (C_VerifyUpdate, (CK_SESSION_HANDLE a, CK_BYTE_PTR b, CK_ULONG c), (a, b, c)) \
    X (C_VerifyFinal, (CK_SESSION_HANDLE a, CK_BYTE_PTR b, CK_ULONG c), (a, b, c)) \
    X (C_GenerateKeyPair, (CK_SESSION_HANDLE a, CK_MECHANISM_PTR b, CK_ATTRIBUTE_PTR c, CK_ULONG d, \
       CK_ATTRIBUTE_PTR e, CK_ULONG f, CK_OBJECT_HANDLE_PTR g, CK_OBJECT_HANDLE_PTR h), (a, b, c, d, e, f, g, h)) \
    X (C_DeriveKey, (CK_SESSION_HANDLE a, CK_MECHANISM_PTR b, CK_OBJECT_HANDLE c, CK_ATTRIBUTE_PTR d, \
       CK_ULONG e, CK_OBJECT_HANDLE_PTR f), (a, b, c, d, e, f)) \
    X (C_DigestKey, (CK_SESSION_HANDLE a, CK_OBJECT_HANDLE b), (a, b)) \
    X (C_WrapKey, (CK_SESSION_HANDLE a, CK_MECHANISM_PTR b, CK_OBJECT_HANDLE c, CK_OBJECT_HANDLE d, \
       CK_BYTE_PTR e, CK_ULONG_PTR f), (a, b, c, d, e, f)) \
    X (C_UnwrapKey, (CK_SESSION_HANDLE a, CK_MECHANISM_PTR b, CK_OBJECT_HANDLE c, CK_BYTE_PTR d, CK_ULONG e, \
       CK_ATTRIBUTE_PTR f, CK_ULONG g, CK_OBJECT_HANDLE_PTR h), (a, b, c, d, e, f, g, h)) \
    X (C_SignRecoverInit, (CK_SESSION_HANDLE a, CK_MECHANISM_PTR b, CK_OBJECT_HANDLE c), (a, b, c)) \
    X (C_SignRecover, (CK_SESSION_HANDLE a, CK_BYTE_PTR b, CK_ULONG c, CK_BYTE_PTR d, CK_ULONG_PTR e), \
       (a, b, c, d, e)) \
    X (C_VerifyRecoverInit, (CK_SESSION_HANDLE a, CK_MECHANISM_PTR b, CK_OBJECT_HANDLE c), (a, b, c)) \
    X (C_VerifyRecover, (CK_SESSION_HANDLE a, CK_BYTE_PTR b, CK_ULONG c, CK_BYTE_PTR d, CK_ULONG_PTR e), \
       (a, b, c, d, e)) \
    X (C_SeedRandom, (CK_SESSION_HANDLE a, CK_BYTE_PTR b, CK_ULONG c), (a, b, c)) \
    X (C_GenerateRandom, (CK_SESSION_HANDLE a, CK_BYTE_PTR b, CK_ULONG c), (a, b, c)) \
    X (cs_token_login_user, (CK_SESSION_HANDLE a, CK_USER_TYPE b, CK_UTF8CHAR_PTR c, CK_ULONG d, \
       CK_UTF8CHAR_PTR e, CK_ULONG f), (a, b, c, d, e, f)) \
    X (cs_session_cancel, (CK_SESSION_HANDLE a, CK_FLAGS b), (a, b)) \
    X (C_VerifySignatureInit, (CK_SESSION_HANDLE a, CK_MECHANISM_PTR b, CK_OBJECT_HANDLE c, CK_BYTE_PTR d, \
       CK_ULONG e), (a, b, c, d, e)) \
    X (C_VerifySignature, (CK_SESSION_HANDLE a, CK_BYTE_PTR b, CK_ULONG c), (a, b, c)) \
    X (C_VerifySignatureUpdate, (CK_SESSION_HANDLE a, CK_BYTE_PTR b, CK_ULONG c), (a, b, c)) \
    X (C_VerifySignatureFinal, (CK_SESSION_HANDLE a), (a)) \
    X (C_GetSessionValidationFlags, (CK_SESSION_HANDLE a, CK_SESSION_VALIDATION_FLAGS_TYPE b, CK_FLAGS_PTR c), \
       (a, b, c)) \
    X (C_EncapsulateKey, (CK_SESSION_HANDLE a, CK_MECHANISM_PTR b, CK_OBJECT_HANDLE c, CK_ATTRIBUTE_PTR d, \
       CK_ULONG e, CK_BYTE_PTR f, CK_ULONG_PTR g, CK_OBJECT_HANDLE_PTR h), (a, b, c, d, e, f, g, h)) \
    X (C_DecapsulateKey, (CK_SESSION_HANDLE a, CK_MECHANISM_PTR b, CK_OBJECT_HANDLE c, CK_ATTRIBUTE_PTR d, \
       CK_ULONG e, CK_BYTE_PTR f, CK_ULONG g, CK_OBJECT_HANDLE_PTR h), (a, b, c, d, e, f, g, h)) \
    X (C_AsyncComplete, (CK_SESSION_HANDLE a, CK_UTF8CHAR_PTR b, CK_ASYNC_DATA_PTR c), (a, b, c)) \
    X (C_AsyncGetID, (CK_SESSION_HANDLE a, CK_UTF8CHAR_PTR b, CK_ULONG_PTR c), (a, b, c)) \
    X (C_AsyncJoin, (CK_SESSION_HANDLE a, CK_UTF8CHAR_PTR b, CK_ULONG c, CK_BYTE_PTR d, CK_ULONG e), \
       (a, b, c, d, e))

#define S_GUARDED(name, params, args) \
    static CK_RV g_##name params \
    { \
        CK_RV rv = cs_guard_enter (); \
        if (rv != CKR_OK) \
            return rv; \
        rv = name args; \
        cs_guard_leave (); \
        return rv; \
    }

CS_GUARDED_ENTRIES (S_GUARDED)

/*  ---- what we do not provide (file head) ----------------------------- */

#define S_NOT_SUPPORTED(name, params) \
    static CK_RV s_##name params { return cs_guard_check () ?: CKR_FUNCTION_NOT_SUPPORTED; }

S_NOT_SUPPORTED (C_InitToken, (CK_SLOT_ID a, CK_UTF8CHAR_PTR b, CK_ULONG c, CK_UTF8CHAR_PTR d))
S_NOT_SUPPORTED (C_GetOperationState, (CK_SESSION_HANDLE a, CK_BYTE_PTR b, CK_ULONG_PTR c))
S_NOT_SUPPORTED (C_SetOperationState, (CK_SESSION_HANDLE a, CK_BYTE_PTR b, CK_ULONG c, CK_OBJECT_HANDLE d,
                                       CK_OBJECT_HANDLE e))
S_NOT_SUPPORTED (C_DigestEncryptUpdate, (CK_SESSION_HANDLE a, CK_BYTE_PTR b, CK_ULONG c, CK_BYTE_PTR d,
                                         CK_ULONG_PTR e))
S_NOT_SUPPORTED (C_DecryptDigestUpdate, (CK_SESSION_HANDLE a, CK_BYTE_PTR b, CK_ULONG c, CK_BYTE_PTR d,
                                         CK_ULONG_PTR e))
S_NOT_SUPPORTED (C_SignEncryptUpdate, (CK_SESSION_HANDLE a, CK_BYTE_PTR b, CK_ULONG c, CK_BYTE_PTR d,
                                       CK_ULONG_PTR e))
S_NOT_SUPPORTED (C_DecryptVerifyUpdate, (CK_SESSION_HANDLE a, CK_BYTE_PTR b, CK_ULONG c, CK_BYTE_PTR d,
                                         CK_ULONG_PTR e))
/*  3.0 message-based functions (3.0 §5.x "Message-based ..."): no AEAD mechanism.  */
S_NOT_SUPPORTED (C_MessageEncryptInit, (CK_SESSION_HANDLE a, CK_MECHANISM_PTR b, CK_OBJECT_HANDLE c))
S_NOT_SUPPORTED (C_EncryptMessage, (CK_SESSION_HANDLE a, CK_VOID_PTR b, CK_ULONG c, CK_BYTE_PTR d, CK_ULONG e,
                                    CK_BYTE_PTR f, CK_ULONG g, CK_BYTE_PTR h, CK_ULONG_PTR i))
S_NOT_SUPPORTED (C_EncryptMessageBegin, (CK_SESSION_HANDLE a, CK_VOID_PTR b, CK_ULONG c, CK_BYTE_PTR d,
                                         CK_ULONG e))
S_NOT_SUPPORTED (C_EncryptMessageNext, (CK_SESSION_HANDLE a, CK_VOID_PTR b, CK_ULONG c, CK_BYTE_PTR d,
                                        CK_ULONG e, CK_BYTE_PTR f, CK_ULONG_PTR g, CK_FLAGS h))
S_NOT_SUPPORTED (C_MessageEncryptFinal, (CK_SESSION_HANDLE a))
S_NOT_SUPPORTED (C_MessageDecryptInit, (CK_SESSION_HANDLE a, CK_MECHANISM_PTR b, CK_OBJECT_HANDLE c))
S_NOT_SUPPORTED (C_DecryptMessage, (CK_SESSION_HANDLE a, CK_VOID_PTR b, CK_ULONG c, CK_BYTE_PTR d, CK_ULONG e,
                                    CK_BYTE_PTR f, CK_ULONG g, CK_BYTE_PTR h, CK_ULONG_PTR i))
S_NOT_SUPPORTED (C_DecryptMessageBegin, (CK_SESSION_HANDLE a, CK_VOID_PTR b, CK_ULONG c, CK_BYTE_PTR d,
                                         CK_ULONG e))
S_NOT_SUPPORTED (C_DecryptMessageNext, (CK_SESSION_HANDLE a, CK_VOID_PTR b, CK_ULONG c, CK_BYTE_PTR d,
                                        CK_ULONG e, CK_BYTE_PTR f, CK_ULONG_PTR g, CK_FLAGS h))
S_NOT_SUPPORTED (C_MessageDecryptFinal, (CK_SESSION_HANDLE a))
S_NOT_SUPPORTED (C_MessageSignInit, (CK_SESSION_HANDLE a, CK_MECHANISM_PTR b, CK_OBJECT_HANDLE c))
S_NOT_SUPPORTED (C_SignMessage, (CK_SESSION_HANDLE a, CK_VOID_PTR b, CK_ULONG c, CK_BYTE_PTR d, CK_ULONG e,
                                 CK_BYTE_PTR f, CK_ULONG_PTR g))
S_NOT_SUPPORTED (C_SignMessageBegin, (CK_SESSION_HANDLE a, CK_VOID_PTR b, CK_ULONG c))
S_NOT_SUPPORTED (C_SignMessageNext, (CK_SESSION_HANDLE a, CK_VOID_PTR b, CK_ULONG c, CK_BYTE_PTR d, CK_ULONG e,
                                     CK_BYTE_PTR f, CK_ULONG_PTR g))
S_NOT_SUPPORTED (C_MessageSignFinal, (CK_SESSION_HANDLE a))
S_NOT_SUPPORTED (C_MessageVerifyInit, (CK_SESSION_HANDLE a, CK_MECHANISM_PTR b, CK_OBJECT_HANDLE c))
S_NOT_SUPPORTED (C_VerifyMessage, (CK_SESSION_HANDLE a, CK_VOID_PTR b, CK_ULONG c, CK_BYTE_PTR d, CK_ULONG e,
                                   CK_BYTE_PTR f, CK_ULONG g))
S_NOT_SUPPORTED (C_VerifyMessageBegin, (CK_SESSION_HANDLE a, CK_VOID_PTR b, CK_ULONG c))
S_NOT_SUPPORTED (C_VerifyMessageNext, (CK_SESSION_HANDLE a, CK_VOID_PTR b, CK_ULONG c, CK_BYTE_PTR d,
                                       CK_ULONG e, CK_BYTE_PTR f, CK_ULONG g))
S_NOT_SUPPORTED (C_MessageVerifyFinal, (CK_SESSION_HANDLE a))
/*  3.2: no authenticated key wrapping mechanism.  */
S_NOT_SUPPORTED (C_WrapKeyAuthenticated, (CK_SESSION_HANDLE a, CK_MECHANISM_PTR b, CK_OBJECT_HANDLE c,
                                          CK_OBJECT_HANDLE d, CK_BYTE_PTR e, CK_ULONG f, CK_BYTE_PTR g,
                                          CK_ULONG_PTR h))
S_NOT_SUPPORTED (C_UnwrapKeyAuthenticated, (CK_SESSION_HANDLE a, CK_MECHANISM_PTR b, CK_OBJECT_HANDLE c,
                                            CK_BYTE_PTR d, CK_ULONG e, CK_ATTRIBUTE_PTR f, CK_ULONG g,
                                            CK_BYTE_PTR h, CK_ULONG i, CK_OBJECT_HANDLE_PTR j))

/*  Legacy parallel functions: PKCS#11 2.40 §5.16.  */
static CK_RV
s_C_GetFunctionStatus (CK_SESSION_HANDLE session)
{
    return cs_guard_check () ?: CKR_FUNCTION_NOT_PARALLEL;
}

static CK_RV
s_C_CancelFunction (CK_SESSION_HANDLE session)
{
    return cs_guard_check () ?: CKR_FUNCTION_NOT_PARALLEL;
}

/*  PKCS#11 2.40 §5.5: the one slot always holds its token, so there is never
 *  an event.  Blocking would wait forever: not supported.  */
static CK_RV
s_C_WaitForSlotEvent (CK_FLAGS flags, CK_SLOT_ID_PTR slot_p, CK_VOID_PTR reserved)
{
    CK_RV rv = cs_guard_check ();
    if (rv != CKR_OK)
        return rv;
    return_val_if_fail (slot_p != NULL && reserved == NULL, CKR_ARGUMENTS_BAD);
    return (flags & CKF_DONT_BLOCK) ? CKR_NO_EVENT : CKR_FUNCTION_NOT_SUPPORTED;
}

/*  C_GetInfo per list: cryptokiVersion is the version of the interface.  */
static CK_RV
s_C_GetInfo_2_40 (CK_INFO_PTR info)
{
    return cs_module_info (info, 2, 40);
}

static CK_RV
s_C_GetInfo_3_0 (CK_INFO_PTR info)
{
    return cs_module_info (info, 3, 0);
}

static CK_RV
s_C_GetInfo_3_2 (CK_INFO_PTR info)
{
    return cs_module_info (info, 3, 2);
}

/*  ---- the lists ------------------------------------------------------------- */

#define S_LIST_2_40(get_info) \
    C_Initialize, C_Finalize, get_info, C_GetFunctionList, \
    g_C_GetSlotList, g_C_GetSlotInfo, g_C_GetTokenInfo, g_C_GetMechanismList, g_C_GetMechanismInfo, \
    s_C_InitToken, g_C_InitPIN, g_C_SetPIN, \
    g_C_OpenSession, g_C_CloseSession, g_C_CloseAllSessions, g_C_GetSessionInfo, \
    s_C_GetOperationState, s_C_SetOperationState, g_C_Login, g_C_Logout, \
    g_C_CreateObject, g_C_CopyObject, g_C_DestroyObject, g_C_GetObjectSize, \
    g_C_GetAttributeValue, g_C_SetAttributeValue, \
    g_C_FindObjectsInit, g_C_FindObjects, g_C_FindObjectsFinal, \
    g_C_EncryptInit, g_C_Encrypt, g_C_EncryptUpdate, g_C_EncryptFinal, \
    g_C_DecryptInit, g_C_Decrypt, g_C_DecryptUpdate, g_C_DecryptFinal, \
    g_C_DigestInit, g_C_Digest, g_C_DigestUpdate, g_C_DigestKey, g_C_DigestFinal, \
    g_C_SignInit, g_C_Sign, g_C_SignUpdate, g_C_SignFinal, g_C_SignRecoverInit, g_C_SignRecover, \
    g_C_VerifyInit, g_C_Verify, g_C_VerifyUpdate, g_C_VerifyFinal, g_C_VerifyRecoverInit, g_C_VerifyRecover, \
    s_C_DigestEncryptUpdate, s_C_DecryptDigestUpdate, s_C_SignEncryptUpdate, s_C_DecryptVerifyUpdate, \
    g_C_GenerateKey, g_C_GenerateKeyPair, g_C_WrapKey, g_C_UnwrapKey, g_C_DeriveKey, \
    g_C_SeedRandom, g_C_GenerateRandom, \
    s_C_GetFunctionStatus, s_C_CancelFunction, s_C_WaitForSlotEvent

static CK_FUNCTION_LIST s_list_2_40 = {
    { 2, 40 },
    S_LIST_2_40 (s_C_GetInfo_2_40)
};

#define S_LIST_3_0(get_info) \
    S_LIST_2_40 (get_info), \
    C_GetInterfaceList, C_GetInterface, g_cs_token_login_user, g_cs_session_cancel, \
    s_C_MessageEncryptInit, s_C_EncryptMessage, s_C_EncryptMessageBegin, s_C_EncryptMessageNext, \
    s_C_MessageEncryptFinal, \
    s_C_MessageDecryptInit, s_C_DecryptMessage, s_C_DecryptMessageBegin, s_C_DecryptMessageNext, \
    s_C_MessageDecryptFinal, \
    s_C_MessageSignInit, s_C_SignMessage, s_C_SignMessageBegin, s_C_SignMessageNext, s_C_MessageSignFinal, \
    s_C_MessageVerifyInit, s_C_VerifyMessage, s_C_VerifyMessageBegin, s_C_VerifyMessageNext, \
    s_C_MessageVerifyFinal

static CK_FUNCTION_LIST_3_0 s_list_3_0 = {
    { 3, 0 },
    S_LIST_3_0 (s_C_GetInfo_3_0)
};

static CK_FUNCTION_LIST_3_2 s_list_3_2 = {
    { 3, 2 },
    S_LIST_3_0 (s_C_GetInfo_3_2),
    g_C_EncapsulateKey, g_C_DecapsulateKey,
    g_C_VerifySignatureInit, g_C_VerifySignature, g_C_VerifySignatureUpdate, g_C_VerifySignatureFinal,
    g_C_GetSessionValidationFlags, g_C_AsyncComplete, g_C_AsyncGetID, g_C_AsyncJoin,
    s_C_WrapKeyAuthenticated, s_C_UnwrapKeyAuthenticated,
};

/*  The default (the newest, 3.2) first; an application that asks for no
 *  version gets a superset of what it knows (3.2 §5.4 C_GetInterface).  */
static CK_INTERFACE s_interfaces [] = {
    { (CK_CHAR *) CS_INTERFACE_NAME, &s_list_3_2, 0 },
    { (CK_CHAR *) CS_INTERFACE_NAME, &s_list_3_0, 0 },
    { (CK_CHAR *) CS_INTERFACE_NAME, &s_list_2_40, 0 },
};
#define S_N_INTERFACES (sizeof s_interfaces / sizeof s_interfaces [0])

/*  ---- the exported entry points -------------------------------------------- */

/*  PKCS#11 2.40 §5.4: the 2.40 list; works before C_Initialize.  */
CK_RV
C_GetFunctionList (CK_FUNCTION_LIST_PTR_PTR list_p)
{
    return_val_if_fail (list_p != NULL, CKR_ARGUMENTS_BAD);
    *list_p = &s_list_2_40;
    return CKR_OK;
}

/*  PKCS#11 3.0 §5.4 C_GetInterfaceList: the two-call length convention;
 *  works before C_Initialize.  CKR_ARGUMENTS_BAD, CKR_BUFFER_TOO_SMALL
 *  (with *count_p set), CKR_OK.  */
CK_RV
C_GetInterfaceList (CK_INTERFACE_PTR list, CK_ULONG_PTR count_p)
{
    CK_RV rv = CKR_OK;
    return_val_if_fail (count_p != NULL, CKR_ARGUMENTS_BAD);
    if (list && *count_p < S_N_INTERFACES)
        rv = CKR_BUFFER_TOO_SMALL;
    else
    if (list)
        memcpy (list, s_interfaces, sizeof s_interfaces);
    *count_p = S_N_INTERFACES;
    return rv;
}

/*  PKCS#11 3.0 §5.4 C_GetInterface: name NULL or "PKCS 11", version NULL
 *  (the default, 3.2) or 3.2, 3.0 or 2.40, and `flags` that the interface must
 *  all have (ours have none).  No match, or ppInterface NULL:
 *  CKR_ARGUMENTS_BAD.  Works before C_Initialize.  */
CK_RV
C_GetInterface (CK_UTF8CHAR_PTR name, CK_VERSION_PTR version, CK_INTERFACE_PTR_PTR interface_p, CK_FLAGS flags)
{
    return_val_if_fail (interface_p != NULL, CKR_ARGUMENTS_BAD);
    for (size_t i = 0; i < S_N_INTERFACES; i++) {
        const CK_VERSION *have = s_interfaces [i].pFunctionList;   /* each list starts with it */
        if (name && strcmp ((const char *) name, CS_INTERFACE_NAME) != 0)
            continue;
        if (version && (version->major != have->major || version->minor != have->minor))
            continue;
        if ((s_interfaces [i].flags & flags) != flags)
            continue;
        *interface_p = &s_interfaces [i];
        return CKR_OK;
    }
    return CKR_ARGUMENTS_BAD;
}
