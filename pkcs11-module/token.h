/*  token.h — the one slot (CS_SLOT_ID = 0) and its token: token info and
 *  mechanisms from the broker's HelloResult (fetched lazily, cached), and the
 *  login state with its ticket (docs/CONTRACTS.md "Login tickets").  The
 *  state functions below run under the library mutex.
 */
#ifndef CS_MODULE_TOKEN_H_INCLUDED
#define CS_MODULE_TOKEN_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "cs_p11.h"

/*  True while CKU_USER is logged in.  */
bool cs_token_user_logged_in (void);

/*  True while CKU_SO is logged in.  */
bool cs_token_so_logged_in (void);

/*  Copies the ticket of the current login (CKU_USER or CKU_SO) into out
 *  (max bytes).  Returns its length, 0 when not logged in or when it does not
 *  fit.  The caller wipes `out`.  */
size_t cs_token_ticket_copy (uint8_t *out, size_t max);

/*  Records a successful login of `user_type` (CKU_USER or CKU_SO) with its
 *  `ticket` (len bytes, 1..256, copied) and marks the key list stale.
 *  Returns CKR_OK, or CKR_DEVICE_ERROR for an unusable ticket.  */
CK_RV cs_token_login_store (CK_USER_TYPE user_type, const uint8_t *ticket, size_t len);

/*  What the broker said about the ticket `sent` (sent_len bytes) a job
 *  carried: `fresh` (fresh_len bytes, 0 = none; Reply.ticket) replaces it,
 *  the login renewed or, after C_SetPIN, under the new PIN; `refused` (the
 *  job got CKR_USER_NOT_LOGGED_IN) ends the login as C_Logout does: the
 *  ticket expired or its PIN epoch passed (docs/CONTRACTS.md "Login
 *  tickets").  Acts only while `sent` is still the current ticket, so a
 *  late answer never undoes a newer login.  */
void cs_token_ticket_answer (const uint8_t *sent, size_t sent_len, const uint8_t *fresh,
                             size_t fresh_len, bool refused);

/*  Without the mutex: CKR_OK when the broker offers application mechanism
 *  `type` (then *info, if given, describes it), CKR_MECHANISM_INVALID when
 *  not, or the error of fetching the hello.  */
CK_RV cs_token_mechanism (CK_MECHANISM_TYPE type, CK_MECHANISM_INFO *info);

/*  PKCS#11 3.0 §5.6 C_LoginUser (the 3.0 list runs it in the call guard):
 *  C_Login when `username` is NULL or empty; CKR_ARGUMENTS_BAD otherwise
 *  (the token has no named users); CKR_SESSION_HANDLE_INVALID first.  */
CK_RV cs_token_login_user (CK_SESSION_HANDLE handle, CK_USER_TYPE user_type, CK_UTF8CHAR_PTR pin,
                           CK_ULONG pin_len, CK_UTF8CHAR_PTR username, CK_ULONG username_len);

/*  Ends the login state and wipes the ticket (last session closed, logout).  */
void cs_token_logout (void);

/*  Forgets everything: login state and the cached HelloResult.  */
void cs_token_reset (void);

#endif
