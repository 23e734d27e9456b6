/*  kem.h — the PKCS#11 3.2 key encapsulation functions (kem.c) with
 *  CKM_ML_KEM (FIPS 203): C_EncapsulateKey to an ML-KEM public key and
 *  C_DecapsulateKey with a private key, each one job to the broker (the
 *  module has no ML-KEM code), each making a session secret key of the
 *  32-byte shared secret.  Issue #23.
 */
#ifndef CS_MODULE_KEM_H_INCLUDED
#define CS_MODULE_KEM_H_INCLUDED

#include "cs_p11.h"

/*  PKCS#11 3.2 C_EncapsulateKey: a fresh shared secret for the holder of the
 *  public key `key` (CKK_ML_KEM, CKA_ENCAPSULATE TRUE), its ciphertext into
 *  ct (*ct_len_p bytes on entry; 768, 1088 or 1568 written), and a new
 *  session secret key of the secret in *key_p, made by `tmpl` as C_DeriveKey
 *  makes one (cs_derive_check_template_inlock: CKO_SECRET_KEY,
 *  CKK_GENERIC_SECRET (default, 32 bytes) or CKK_AES with CKA_VALUE_LEN 16,
 *  24 or 32: the first bytes of the secret; CKA_SENSITIVE default TRUE,
 *  CKA_EXTRACTABLE default FALSE; CKA_ALWAYS_SENSITIVE = CKA_SENSITIVE and
 *  CKA_NEVER_EXTRACTABLE = !CKA_EXTRACTABLE: the secret was never
 *  outside the token).  ct NULL: only *ct_len_p is set, no job, no key; a
 *  too-small buffer: CKR_BUFFER_TOO_SMALL with the size.  Errors:
 *  CKR_MECHANISM_INVALID (not CKM_ML_KEM, or no board offers it),
 *  CKR_MECHANISM_PARAM_INVALID (a parameter), CKR_KEY_HANDLE_INVALID,
 *  CKR_KEY_TYPE_INCONSISTENT (not ML-KEM), CKR_KEY_FUNCTION_NOT_PERMITTED
 *  (CKA_ENCAPSULATE FALSE), the template's errors, the broker's.  In a
 *  PKCS#11 3.2 async session (async.h) the job leaves and CKR_PENDING comes
 *  back; C_AsyncComplete ("C_EncapsulateKey") then writes ct and gives the
 *  key in hObject, the ciphertext in pValue/ulValue (*ct_len_p and *key_p
 *  are not written then).  */
CK_RV C_EncapsulateKey (CK_SESSION_HANDLE handle, CK_MECHANISM_PTR mech, CK_OBJECT_HANDLE key,
                        CK_ATTRIBUTE_PTR tmpl, CK_ULONG count, CK_BYTE_PTR ct, CK_ULONG_PTR ct_len_p,
                        CK_OBJECT_HANDLE_PTR key_p);

/*  PKCS#11 3.2 C_DecapsulateKey: the shared secret in ciphertext ct (ct_len
 *  bytes) for the private key `key` (CKK_ML_KEM, CKA_DECAPSULATE TRUE; a
 *  token key needs the CKU_USER login), as a new session secret key in
 *  *key_p made as by C_EncapsulateKey, with CKA_ALWAYS_SENSITIVE and
 *  CKA_NEVER_EXTRACTABLE also those of the private key.  A changed
 *  ciphertext yields FIPS 203's implicit-rejection secret (CKR_OK); one of
 *  the wrong size is CKR_ENCRYPTED_DATA_LEN_RANGE.  Other errors as
 *  C_EncapsulateKey (CKA_DECAPSULATE), and CKR_USER_NOT_LOGGED_IN.  In an
 *  async session: CKR_PENDING, then C_AsyncComplete ("C_DecapsulateKey")
 *  gives the key in hObject.  */
CK_RV C_DecapsulateKey (CK_SESSION_HANDLE handle, CK_MECHANISM_PTR mech, CK_OBJECT_HANDLE key,
                        CK_ATTRIBUTE_PTR tmpl, CK_ULONG count, CK_BYTE_PTR ct, CK_ULONG ct_len,
                        CK_OBJECT_HANDLE_PTR key_p);

#endif
