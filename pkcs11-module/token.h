/*  token.h — the one slot (CS_SLOT_ID = 0) and its token: token info and
 *  mechanisms from the broker's HelloResult (fetched lazily, cached), and
 *  C_Login / C_Logout, which write the login state (login.h).
 */
#ifndef CS_MODULE_TOKEN_H_INCLUDED
#define CS_MODULE_TOKEN_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "cs_p11.h"

/*  Records a successful login of `user_type` (CKU_USER or CKU_SO) with its
 *  `ticket` (len bytes, 1..256, copied) and marks the key list stale.
 *  Returns CKR_OK, or CKR_DEVICE_ERROR for an unusable ticket.  The state
 *  itself is login.h's.  */
CK_RV cs_token_login_store_inlock (CK_USER_TYPE user_type, const uint8_t *ticket, size_t len);

/*  Without the mutex: CKR_OK when the broker offers application mechanism
 *  `type` (then *info, if given, describes it), CKR_MECHANISM_INVALID when
 *  not, or the error of fetching the hello.  */
CK_RV cs_token_mechanism (CK_MECHANISM_TYPE type, CK_MECHANISM_INFO *info);

/*  PKCS#11 3.0 §5.6 C_LoginUser (the 3.0 list runs it in the call guard):
 *  C_Login when `username` is NULL or empty; CKR_ARGUMENTS_BAD otherwise
 *  (the token has no named users); CKR_SESSION_HANDLE_INVALID first.  */
CK_RV cs_token_login_user (CK_SESSION_HANDLE handle, CK_USER_TYPE user_type, CK_UTF8CHAR_PTR pin,
                           CK_ULONG pin_len, CK_UTF8CHAR_PTR username, CK_ULONG username_len);

/*  Forgets everything: login state and the cached HelloResult.  */
void cs_token_reset_inlock (void);

#endif
