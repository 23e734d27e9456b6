/*  cs_p11_3.h — the few PKCS#11 3.0 declarations the module needs and
 *  p11-kit 0.24's 2.40 header lacks: CK_INTERFACE, CK_FUNCTION_LIST_3_0,
 *  the 3.0 function types, CKF_INTERFACE_FORK_SAFE, CKF_FIND_OBJECTS and
 *  CKR_OPERATION_CANCEL_FAILED; and the 3.2 function list with what its
 *  functions need.  Values and member order are those of the
 *  OASIS PKCS#11 3.0 headers (pkcs11t.h, pkcs11f.h; spec §3.6, §5.4).
 *  Each block is skipped when the system header already has it.
 */
#ifndef CS_MODULE_P11_3_H_INCLUDED
#define CS_MODULE_P11_3_H_INCLUDED

#include "cs_p11.h"

#ifndef CKF_INTERFACE_FORK_SAFE
#define CKF_INTERFACE_FORK_SAFE         0x00000001UL

/*  PKCS#11 3.0 §3.6: an interface is a name, a function list and flags.
 *  pFunctionList points to a CK_FUNCTION_LIST (2.x versions) or a
 *  CK_FUNCTION_LIST_3_0 (3.0); its first member is the CK_VERSION.  */
typedef struct CK_INTERFACE {
    CK_CHAR *pInterfaceName;
    CK_VOID_PTR pFunctionList;
    CK_FLAGS flags;
} CK_INTERFACE;
typedef CK_INTERFACE *CK_INTERFACE_PTR;
typedef CK_INTERFACE_PTR *CK_INTERFACE_PTR_PTR;

/*  The two exported 3.0 entry points (pkcs11f.h 3.0).  */
CK_RV C_GetInterfaceList (CK_INTERFACE_PTR pInterfacesList, CK_ULONG_PTR pulCount);
CK_RV C_GetInterface (CK_UTF8CHAR_PTR pInterfaceName, CK_VERSION_PTR pVersion,
                      CK_INTERFACE_PTR_PTR ppInterface, CK_FLAGS flags);

/*  PKCS#11 3.0 §3.6 CK_FUNCTION_LIST_3_0: the 2.40 list, then the 3.0
 *  functions in this order.  */
/*  The members of CK_FUNCTION_LIST_3_0 after `version`, in order (the
 *  2.40 list, then the 3.0 functions); CK_FUNCTION_LIST_3_2 repeats them.  */
#define CS_P11_MEMBERS_3_0 \
    CK_RV (*C_Initialize) (CK_VOID_PTR);                                                                            \
    CK_RV (*C_Finalize) (CK_VOID_PTR);                                                                              \
    CK_RV (*C_GetInfo) (CK_INFO_PTR);                                                                               \
    CK_RV (*C_GetFunctionList) (CK_FUNCTION_LIST_PTR_PTR);                                                          \
    CK_RV (*C_GetSlotList) (CK_BBOOL, CK_SLOT_ID_PTR, CK_ULONG_PTR);                                                \
    CK_RV (*C_GetSlotInfo) (CK_SLOT_ID, CK_SLOT_INFO_PTR);                                                          \
    CK_RV (*C_GetTokenInfo) (CK_SLOT_ID, CK_TOKEN_INFO_PTR);                                                        \
    CK_RV (*C_GetMechanismList) (CK_SLOT_ID, CK_MECHANISM_TYPE_PTR, CK_ULONG_PTR);                                  \
    CK_RV (*C_GetMechanismInfo) (CK_SLOT_ID, CK_MECHANISM_TYPE, CK_MECHANISM_INFO_PTR);                             \
    CK_RV (*C_InitToken) (CK_SLOT_ID, CK_UTF8CHAR_PTR, CK_ULONG, CK_UTF8CHAR_PTR);                                  \
    CK_RV (*C_InitPIN) (CK_SESSION_HANDLE, CK_UTF8CHAR_PTR, CK_ULONG);                                              \
    CK_RV (*C_SetPIN) (CK_SESSION_HANDLE, CK_UTF8CHAR_PTR, CK_ULONG, CK_UTF8CHAR_PTR, CK_ULONG);                    \
    CK_RV (*C_OpenSession) (CK_SLOT_ID, CK_FLAGS, CK_VOID_PTR, CK_NOTIFY, CK_SESSION_HANDLE_PTR);                   \
    CK_RV (*C_CloseSession) (CK_SESSION_HANDLE);                                                                    \
    CK_RV (*C_CloseAllSessions) (CK_SLOT_ID);                                                                       \
    CK_RV (*C_GetSessionInfo) (CK_SESSION_HANDLE, CK_SESSION_INFO_PTR);                                             \
    CK_RV (*C_GetOperationState) (CK_SESSION_HANDLE, CK_BYTE_PTR, CK_ULONG_PTR);                                    \
    CK_RV (*C_SetOperationState) (CK_SESSION_HANDLE, CK_BYTE_PTR, CK_ULONG, CK_OBJECT_HANDLE, CK_OBJECT_HANDLE);    \
    CK_RV (*C_Login) (CK_SESSION_HANDLE, CK_USER_TYPE, CK_UTF8CHAR_PTR, CK_ULONG);                                  \
    CK_RV (*C_Logout) (CK_SESSION_HANDLE);                                                                          \
    CK_RV (*C_CreateObject) (CK_SESSION_HANDLE, CK_ATTRIBUTE_PTR, CK_ULONG, CK_OBJECT_HANDLE_PTR);                  \
    CK_RV (*C_CopyObject) (CK_SESSION_HANDLE, CK_OBJECT_HANDLE, CK_ATTRIBUTE_PTR, CK_ULONG, CK_OBJECT_HANDLE_PTR);  \
    CK_RV (*C_DestroyObject) (CK_SESSION_HANDLE, CK_OBJECT_HANDLE);                                                 \
    CK_RV (*C_GetObjectSize) (CK_SESSION_HANDLE, CK_OBJECT_HANDLE, CK_ULONG_PTR);                                   \
    CK_RV (*C_GetAttributeValue) (CK_SESSION_HANDLE, CK_OBJECT_HANDLE, CK_ATTRIBUTE_PTR, CK_ULONG);                 \
    CK_RV (*C_SetAttributeValue) (CK_SESSION_HANDLE, CK_OBJECT_HANDLE, CK_ATTRIBUTE_PTR, CK_ULONG);                 \
    CK_RV (*C_FindObjectsInit) (CK_SESSION_HANDLE, CK_ATTRIBUTE_PTR, CK_ULONG);                                     \
    CK_RV (*C_FindObjects) (CK_SESSION_HANDLE, CK_OBJECT_HANDLE_PTR, CK_ULONG, CK_ULONG_PTR);                       \
    CK_RV (*C_FindObjectsFinal) (CK_SESSION_HANDLE);                                                                \
    CK_RV (*C_EncryptInit) (CK_SESSION_HANDLE, CK_MECHANISM_PTR, CK_OBJECT_HANDLE);                                 \
    CK_RV (*C_Encrypt) (CK_SESSION_HANDLE, CK_BYTE_PTR, CK_ULONG, CK_BYTE_PTR, CK_ULONG_PTR);                       \
    CK_RV (*C_EncryptUpdate) (CK_SESSION_HANDLE, CK_BYTE_PTR, CK_ULONG, CK_BYTE_PTR, CK_ULONG_PTR);                 \
    CK_RV (*C_EncryptFinal) (CK_SESSION_HANDLE, CK_BYTE_PTR, CK_ULONG_PTR);                                         \
    CK_RV (*C_DecryptInit) (CK_SESSION_HANDLE, CK_MECHANISM_PTR, CK_OBJECT_HANDLE);                                 \
    CK_RV (*C_Decrypt) (CK_SESSION_HANDLE, CK_BYTE_PTR, CK_ULONG, CK_BYTE_PTR, CK_ULONG_PTR);                       \
    CK_RV (*C_DecryptUpdate) (CK_SESSION_HANDLE, CK_BYTE_PTR, CK_ULONG, CK_BYTE_PTR, CK_ULONG_PTR);                 \
    CK_RV (*C_DecryptFinal) (CK_SESSION_HANDLE, CK_BYTE_PTR, CK_ULONG_PTR);                                         \
    CK_RV (*C_DigestInit) (CK_SESSION_HANDLE, CK_MECHANISM_PTR);                                                    \
    CK_RV (*C_Digest) (CK_SESSION_HANDLE, CK_BYTE_PTR, CK_ULONG, CK_BYTE_PTR, CK_ULONG_PTR);                        \
    CK_RV (*C_DigestUpdate) (CK_SESSION_HANDLE, CK_BYTE_PTR, CK_ULONG);                                             \
    CK_RV (*C_DigestKey) (CK_SESSION_HANDLE, CK_OBJECT_HANDLE);                                                     \
    CK_RV (*C_DigestFinal) (CK_SESSION_HANDLE, CK_BYTE_PTR, CK_ULONG_PTR);                                          \
    CK_RV (*C_SignInit) (CK_SESSION_HANDLE, CK_MECHANISM_PTR, CK_OBJECT_HANDLE);                                    \
    CK_RV (*C_Sign) (CK_SESSION_HANDLE, CK_BYTE_PTR, CK_ULONG, CK_BYTE_PTR, CK_ULONG_PTR);                          \
    CK_RV (*C_SignUpdate) (CK_SESSION_HANDLE, CK_BYTE_PTR, CK_ULONG);                                               \
    CK_RV (*C_SignFinal) (CK_SESSION_HANDLE, CK_BYTE_PTR, CK_ULONG_PTR);                                            \
    CK_RV (*C_SignRecoverInit) (CK_SESSION_HANDLE, CK_MECHANISM_PTR, CK_OBJECT_HANDLE);                             \
    CK_RV (*C_SignRecover) (CK_SESSION_HANDLE, CK_BYTE_PTR, CK_ULONG, CK_BYTE_PTR, CK_ULONG_PTR);                   \
    CK_RV (*C_VerifyInit) (CK_SESSION_HANDLE, CK_MECHANISM_PTR, CK_OBJECT_HANDLE);                                  \
    CK_RV (*C_Verify) (CK_SESSION_HANDLE, CK_BYTE_PTR, CK_ULONG, CK_BYTE_PTR, CK_ULONG);                            \
    CK_RV (*C_VerifyUpdate) (CK_SESSION_HANDLE, CK_BYTE_PTR, CK_ULONG);                                             \
    CK_RV (*C_VerifyFinal) (CK_SESSION_HANDLE, CK_BYTE_PTR, CK_ULONG);                                              \
    CK_RV (*C_VerifyRecoverInit) (CK_SESSION_HANDLE, CK_MECHANISM_PTR, CK_OBJECT_HANDLE);                           \
    CK_RV (*C_VerifyRecover) (CK_SESSION_HANDLE, CK_BYTE_PTR, CK_ULONG, CK_BYTE_PTR, CK_ULONG_PTR);                 \
    CK_RV (*C_DigestEncryptUpdate) (CK_SESSION_HANDLE, CK_BYTE_PTR, CK_ULONG, CK_BYTE_PTR, CK_ULONG_PTR);           \
    CK_RV (*C_DecryptDigestUpdate) (CK_SESSION_HANDLE, CK_BYTE_PTR, CK_ULONG, CK_BYTE_PTR, CK_ULONG_PTR);           \
    CK_RV (*C_SignEncryptUpdate) (CK_SESSION_HANDLE, CK_BYTE_PTR, CK_ULONG, CK_BYTE_PTR, CK_ULONG_PTR);             \
    CK_RV (*C_DecryptVerifyUpdate) (CK_SESSION_HANDLE, CK_BYTE_PTR, CK_ULONG, CK_BYTE_PTR, CK_ULONG_PTR);           \
    CK_RV (*C_GenerateKey) (CK_SESSION_HANDLE, CK_MECHANISM_PTR, CK_ATTRIBUTE_PTR, CK_ULONG, CK_OBJECT_HANDLE_PTR); \
    CK_RV (*C_GenerateKeyPair) (CK_SESSION_HANDLE, CK_MECHANISM_PTR, CK_ATTRIBUTE_PTR, CK_ULONG,                    \
                                CK_ATTRIBUTE_PTR, CK_ULONG, CK_OBJECT_HANDLE_PTR, CK_OBJECT_HANDLE_PTR);            \
    CK_RV (*C_WrapKey) (CK_SESSION_HANDLE, CK_MECHANISM_PTR, CK_OBJECT_HANDLE, CK_OBJECT_HANDLE,                    \
                        CK_BYTE_PTR, CK_ULONG_PTR);                                                                 \
    CK_RV (*C_UnwrapKey) (CK_SESSION_HANDLE, CK_MECHANISM_PTR, CK_OBJECT_HANDLE, CK_BYTE_PTR, CK_ULONG,             \
                          CK_ATTRIBUTE_PTR, CK_ULONG, CK_OBJECT_HANDLE_PTR);                                        \
    CK_RV (*C_DeriveKey) (CK_SESSION_HANDLE, CK_MECHANISM_PTR, CK_OBJECT_HANDLE, CK_ATTRIBUTE_PTR, CK_ULONG,        \
                          CK_OBJECT_HANDLE_PTR);                                                                    \
    CK_RV (*C_SeedRandom) (CK_SESSION_HANDLE, CK_BYTE_PTR, CK_ULONG);                                               \
    CK_RV (*C_GenerateRandom) (CK_SESSION_HANDLE, CK_BYTE_PTR, CK_ULONG);                                           \
    CK_RV (*C_GetFunctionStatus) (CK_SESSION_HANDLE);                                                               \
    CK_RV (*C_CancelFunction) (CK_SESSION_HANDLE);                                                                  \
    CK_RV (*C_WaitForSlotEvent) (CK_FLAGS, CK_SLOT_ID_PTR, CK_VOID_PTR);                                            \
    CK_RV (*C_GetInterfaceList) (CK_INTERFACE_PTR, CK_ULONG_PTR);                                                   \
    CK_RV (*C_GetInterface) (CK_UTF8CHAR_PTR, CK_VERSION_PTR, CK_INTERFACE_PTR_PTR, CK_FLAGS);                      \
    CK_RV (*C_LoginUser) (CK_SESSION_HANDLE, CK_USER_TYPE, CK_UTF8CHAR_PTR, CK_ULONG, CK_UTF8CHAR_PTR, CK_ULONG);   \
    CK_RV (*C_SessionCancel) (CK_SESSION_HANDLE, CK_FLAGS);                                                         \
    CK_RV (*C_MessageEncryptInit) (CK_SESSION_HANDLE, CK_MECHANISM_PTR, CK_OBJECT_HANDLE);                          \
    CK_RV (*C_EncryptMessage) (CK_SESSION_HANDLE, CK_VOID_PTR, CK_ULONG, CK_BYTE_PTR, CK_ULONG,                     \
                               CK_BYTE_PTR, CK_ULONG, CK_BYTE_PTR, CK_ULONG_PTR);                                   \
    CK_RV (*C_EncryptMessageBegin) (CK_SESSION_HANDLE, CK_VOID_PTR, CK_ULONG, CK_BYTE_PTR, CK_ULONG);               \
    CK_RV (*C_EncryptMessageNext) (CK_SESSION_HANDLE, CK_VOID_PTR, CK_ULONG, CK_BYTE_PTR, CK_ULONG,                 \
                                   CK_BYTE_PTR, CK_ULONG_PTR, CK_FLAGS);                                            \
    CK_RV (*C_MessageEncryptFinal) (CK_SESSION_HANDLE);                                                             \
    CK_RV (*C_MessageDecryptInit) (CK_SESSION_HANDLE, CK_MECHANISM_PTR, CK_OBJECT_HANDLE);                          \
    CK_RV (*C_DecryptMessage) (CK_SESSION_HANDLE, CK_VOID_PTR, CK_ULONG, CK_BYTE_PTR, CK_ULONG,                     \
                               CK_BYTE_PTR, CK_ULONG, CK_BYTE_PTR, CK_ULONG_PTR);                                   \
    CK_RV (*C_DecryptMessageBegin) (CK_SESSION_HANDLE, CK_VOID_PTR, CK_ULONG, CK_BYTE_PTR, CK_ULONG);               \
    CK_RV (*C_DecryptMessageNext) (CK_SESSION_HANDLE, CK_VOID_PTR, CK_ULONG, CK_BYTE_PTR, CK_ULONG,                 \
                                   CK_BYTE_PTR, CK_ULONG_PTR, CK_FLAGS);                                            \
    CK_RV (*C_MessageDecryptFinal) (CK_SESSION_HANDLE);                                                             \
    CK_RV (*C_MessageSignInit) (CK_SESSION_HANDLE, CK_MECHANISM_PTR, CK_OBJECT_HANDLE);                             \
    CK_RV (*C_SignMessage) (CK_SESSION_HANDLE, CK_VOID_PTR, CK_ULONG, CK_BYTE_PTR, CK_ULONG,                        \
                            CK_BYTE_PTR, CK_ULONG_PTR);                                                             \
    CK_RV (*C_SignMessageBegin) (CK_SESSION_HANDLE, CK_VOID_PTR, CK_ULONG);                                         \
    CK_RV (*C_SignMessageNext) (CK_SESSION_HANDLE, CK_VOID_PTR, CK_ULONG, CK_BYTE_PTR, CK_ULONG,                    \
                                CK_BYTE_PTR, CK_ULONG_PTR);                                                         \
    CK_RV (*C_MessageSignFinal) (CK_SESSION_HANDLE);                                                                \
    CK_RV (*C_MessageVerifyInit) (CK_SESSION_HANDLE, CK_MECHANISM_PTR, CK_OBJECT_HANDLE);                           \
    CK_RV (*C_VerifyMessage) (CK_SESSION_HANDLE, CK_VOID_PTR, CK_ULONG, CK_BYTE_PTR, CK_ULONG,                      \
                              CK_BYTE_PTR, CK_ULONG);                                                               \
    CK_RV (*C_VerifyMessageBegin) (CK_SESSION_HANDLE, CK_VOID_PTR, CK_ULONG);                                       \
    CK_RV (*C_VerifyMessageNext) (CK_SESSION_HANDLE, CK_VOID_PTR, CK_ULONG, CK_BYTE_PTR, CK_ULONG,                  \
                                  CK_BYTE_PTR, CK_ULONG);                                                           \
    CK_RV (*C_MessageVerifyFinal) (CK_SESSION_HANDLE);

typedef struct CK_FUNCTION_LIST_3_0 {
    CK_VERSION version;
    CS_P11_MEMBERS_3_0
} CK_FUNCTION_LIST_3_0;
typedef CK_FUNCTION_LIST_3_0 *CK_FUNCTION_LIST_3_0_PTR;
#endif /* CKF_INTERFACE_FORK_SAFE */

/*  PKCS#11 3.2 (OASIS Committee Specification, 2025): the types, flags and
 *  return values of the 3.2 functions, and CK_FUNCTION_LIST_3_2, the 3.0
 *  list followed by the twelve 3.2 functions in this order (3.2 pkcs11f.h;
 *  spec §3.6 "CK_FUNCTION_LIST_3_2").  Values are those of the OASIS 3.2
 *  pkcs11t.h.  Skipped when the system header is 3.2 already.  */
/*  cryptoserver/pkcs11v.h, included first, may have defined the
 *  asynchronous-session values and CK_ASYNC_DATA for a pre-3.2 header
 *  (CS_PKCS11V_ASYNC, CS_P11_ASYNC_DATA): the rest of 3.2 is still ours.  */
#if !defined (CKR_PENDING) || defined (CS_PKCS11V_ASYNC)
#ifndef CS_P11_MEMBERS_3_0
#error "cs_p11_3.h: a system header with 3.0 but not 3.2 needs its 3.0 members here"
#endif
#ifndef CKR_PENDING
#define CKF_ASYNC_SESSION                   0x00000008UL    /* C_OpenSession flags */
#define CKF_ASYNC_SESSION_SUPPORTED         0x04000000UL    /* CK_TOKEN_INFO flags */
#define CKR_PENDING                         0x00000204UL
#define CKR_SESSION_ASYNC_NOT_SUPPORTED     0x00000205UL
#endif
#define CKS_LAST_VALIDATION_OK              0x00000001UL    /* CK_SESSION_VALIDATION_FLAGS_TYPE */
#define CKR_OPERATION_NOT_VALIDATED         0x00000207UL

typedef CK_ULONG CK_SESSION_VALIDATION_FLAGS_TYPE;
typedef CK_FLAGS *CK_FLAGS_PTR;

/*  3.2 CK_ASYNC_DATA (spec §3.6 beside CK_INTERFACE): what C_AsyncComplete
 *  hands back; ulVersion 0.  */
#ifndef CS_P11_ASYNC_DATA
#define CS_P11_ASYNC_DATA 1
typedef struct CK_ASYNC_DATA {
    CK_ULONG ulVersion;
    CK_BYTE_PTR pValue;
    CK_ULONG ulValue;
    CK_OBJECT_HANDLE hObject;
    CK_OBJECT_HANDLE hAdditionalObject;
} CK_ASYNC_DATA;
typedef CK_ASYNC_DATA *CK_ASYNC_DATA_PTR;
#endif

typedef struct CK_FUNCTION_LIST_3_2 {
    CK_VERSION version;
    CS_P11_MEMBERS_3_0
    CK_RV (*C_EncapsulateKey) (CK_SESSION_HANDLE, CK_MECHANISM_PTR, CK_OBJECT_HANDLE, CK_ATTRIBUTE_PTR,
                               CK_ULONG, CK_BYTE_PTR, CK_ULONG_PTR, CK_OBJECT_HANDLE_PTR);
    CK_RV (*C_DecapsulateKey) (CK_SESSION_HANDLE, CK_MECHANISM_PTR, CK_OBJECT_HANDLE, CK_ATTRIBUTE_PTR,
                               CK_ULONG, CK_BYTE_PTR, CK_ULONG, CK_OBJECT_HANDLE_PTR);
    CK_RV (*C_VerifySignatureInit) (CK_SESSION_HANDLE, CK_MECHANISM_PTR, CK_OBJECT_HANDLE, CK_BYTE_PTR,
                                    CK_ULONG);
    CK_RV (*C_VerifySignature) (CK_SESSION_HANDLE, CK_BYTE_PTR, CK_ULONG);
    CK_RV (*C_VerifySignatureUpdate) (CK_SESSION_HANDLE, CK_BYTE_PTR, CK_ULONG);
    CK_RV (*C_VerifySignatureFinal) (CK_SESSION_HANDLE);
    CK_RV (*C_GetSessionValidationFlags) (CK_SESSION_HANDLE, CK_SESSION_VALIDATION_FLAGS_TYPE, CK_FLAGS_PTR);
    CK_RV (*C_AsyncComplete) (CK_SESSION_HANDLE, CK_UTF8CHAR_PTR, CK_ASYNC_DATA_PTR);
    CK_RV (*C_AsyncGetID) (CK_SESSION_HANDLE, CK_UTF8CHAR_PTR, CK_ULONG_PTR);
    CK_RV (*C_AsyncJoin) (CK_SESSION_HANDLE, CK_UTF8CHAR_PTR, CK_ULONG, CK_BYTE_PTR, CK_ULONG);
    CK_RV (*C_WrapKeyAuthenticated) (CK_SESSION_HANDLE, CK_MECHANISM_PTR, CK_OBJECT_HANDLE, CK_OBJECT_HANDLE,
                                     CK_BYTE_PTR, CK_ULONG, CK_BYTE_PTR, CK_ULONG_PTR);
    CK_RV (*C_UnwrapKeyAuthenticated) (CK_SESSION_HANDLE, CK_MECHANISM_PTR, CK_OBJECT_HANDLE, CK_BYTE_PTR,
                                       CK_ULONG, CK_ATTRIBUTE_PTR, CK_ULONG, CK_BYTE_PTR, CK_ULONG,
                                       CK_OBJECT_HANDLE_PTR);
} CK_FUNCTION_LIST_3_2;
typedef CK_FUNCTION_LIST_3_2 *CK_FUNCTION_LIST_3_2_PTR;
#endif /* CKR_PENDING */

#ifndef CKF_FIND_OBJECTS
#define CKF_FIND_OBJECTS                0x00000040UL    /* C_SessionCancel only */
#endif
#ifndef CKR_OPERATION_CANCEL_FAILED
#define CKR_OPERATION_CANCEL_FAILED     0x00000202UL
#endif

#endif
