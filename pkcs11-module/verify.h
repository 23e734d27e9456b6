/*  verify.h — verification (verify.c).  PKCS#11 3.2 signature-first verification: C_VerifySignatureInit
 *  takes the signature, then C_VerifySignature (single-part) or
 *  C_VerifySignatureUpdate ... C_VerifySignatureFinal (multi-part) take the
 *  data.  The same mechanisms and keys as C_VerifyInit (public keys here,
 *  MACs through secret.c): an operation of the session's CS_OP_VERIFY slot
 *  whose signature the session keeps (session.h).  Entry points of the 3.2
 *  function list (interface.c).
 */
#ifndef CS_MODULE_VERIFY_H_INCLUDED
#define CS_MODULE_VERIFY_H_INCLUDED

#include "cs_p11_3.h"

/*  Starts the operation as C_VerifyInit does and keeps a copy of the
 *  `sig_len` bytes of `sig`.  Errors: those of C_VerifyInit
 *  (CKR_OPERATION_ACTIVE when any verification is active,
 *  CKR_MECHANISM_INVALID, CKR_KEY_HANDLE_INVALID, CKR_KEY_FUNCTION_NOT_PERMITTED,
 *  ...), CKR_ARGUMENTS_BAD (sig NULL with a length), CKR_HOST_MEMORY.  */
CK_RV C_VerifySignatureInit (CK_SESSION_HANDLE handle, CK_MECHANISM_PTR mech, CK_OBJECT_HANDLE key,
                             CK_BYTE_PTR sig, CK_ULONG sig_len);

/*  Verifies the kept signature over `len` bytes of `data` and ends the
 *  operation.  CKR_OK, CKR_SIGNATURE_INVALID, CKR_SIGNATURE_LEN_RANGE, the
 *  errors of C_Verify; CKR_OPERATION_NOT_INITIALIZED when no
 *  C_VerifySignatureInit is active (an operation begun with C_VerifyInit
 *  included); CKR_ARGUMENTS_BAD (data NULL with a length: the operation
 *  stays active).  */
CK_RV C_VerifySignature (CK_SESSION_HANDLE handle, CK_BYTE_PTR data, CK_ULONG len);

/*  One more part of the data (as C_VerifyUpdate).  Errors: those of
 *  C_VerifyUpdate, CKR_OPERATION_NOT_INITIALIZED as above.  */
CK_RV C_VerifySignatureUpdate (CK_SESSION_HANDLE handle, CK_BYTE_PTR part, CK_ULONG len);

/*  Verifies the kept signature over the parts and ends the operation.
 *  Returns as C_VerifySignature.  */
CK_RV C_VerifySignatureFinal (CK_SESSION_HANDLE handle);

#endif
