/*  secret_token.h — token secret keys (issue #10): C_GenerateKey and
 *  C_CreateObject of a CKO_SECRET_KEY with CKA_TOKEN TRUE.
 *
 *  The broker holds these keys (broker/keys/secretkeys.h): it draws a generated
 *  value itself, seals it in the tenant's keystore and never returns it;
 *  an imported value (C_CreateObject with CKA_VALUE) crosses the link once,
 *  in the ImportKeyJob.  The module keeps the key's ref and attributes as a
 *  token object (object.h) and names it by ref in each SymJob (secret.c).
 *  Both are key-management jobs: they need a R/W session and a CKU_USER
 *  login (PKCS#11 2.40 §5.7) and carry an idempotency id (link.c).
 */
#ifndef CS_MODULE_SECRET_TOKEN_H_INCLUDED
#define CS_MODULE_SECRET_TOKEN_H_INCLUDED

#include "cs_p11.h"

/*  C_GenerateKey of a token secret key with mechanism `mech`
 *  (CKM_AES_KEY_GEN, CKM_GENERIC_SECRET_KEY_GEN) of len bytes (checked by
 *  the caller) and the application's template.  Without the mutex.
 *  CKR_OK with *key_p the new object's handle; CKR_SESSION_HANDLE_INVALID,
 *  CKR_SESSION_READ_ONLY, CKR_USER_NOT_LOGGED_IN, CKR_HOST_MEMORY, or the
 *  broker's CK_RV (the template's rules: broker/keys/keyjobs.h).  */
CK_RV cs_secret_token_generate (CK_SESSION_HANDLE handle, CK_MECHANISM_TYPE mech, CK_ULONG len,
                                const CK_ATTRIBUTE *tmpl, CK_ULONG count, CK_OBJECT_HANDLE_PTR key_p);

/*  C_CreateObject of a token secret key whose template's CKA_VALUE (checked
 *  by the caller) is sent once and wiped by the broker after sealing; the
 *  rest of the template travels without it.  Errors as above.  */
CK_RV cs_secret_token_import (CK_SESSION_HANDLE handle, const CK_ATTRIBUTE *tmpl, CK_ULONG count,
                              CK_OBJECT_HANDLE_PTR key_p);

#endif
