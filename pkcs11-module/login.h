/*  login.h — the login state of the one token: who is logged in (CKU_USER
 *  or CKU_SO, PKCS#11 2.40 §5.6) and the ticket every job of that login
 *  carries (docs/CONTRACTS.md "Login tickets").  Below the object and
 *  session tables, which read it; C_Login and C_Logout (token.c) write it,
 *  the job runner copies the ticket and applies the broker's answer.
 *  Everything here runs under the library mutex (guard.h).
 */
#ifndef CS_MODULE_LOGIN_H_INCLUDED
#define CS_MODULE_LOGIN_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "cs_p11.h"

/*  True while CKU_USER is logged in.  */
bool cs_login_user_logged_in_inlock (void);

/*  True while CKU_SO is logged in.  */
bool cs_login_so_logged_in_inlock (void);

/*  cs_login_so_logged_in_inlock for callers that do not hold the mutex:
 *  takes and releases it.  */
bool cs_login_so_logged_in (void);

/*  Copies the ticket of the current login (CKU_USER or CKU_SO) into out
 *  (max bytes).  Returns its length, 0 when not logged in or when it does not
 *  fit.  The caller wipes `out`.  */
size_t cs_login_ticket_copy_inlock (uint8_t *out, size_t max);

/*  Records a successful login of `user_type` (CKU_USER or CKU_SO) with its
 *  `ticket` (len bytes, 1..CS_WIRE_MAX_TICKET, copied).  Returns CKR_OK, or
 *  CKR_DEVICE_ERROR for an unusable ticket (the state is then unchanged).
 *  The key list going stale is the caller's business
 *  (cs_token_login_store_inlock).  */
CK_RV cs_login_store_inlock (CK_USER_TYPE user_type, const uint8_t *ticket, size_t len);

/*  What the broker said about the ticket `sent` (sent_len bytes) a job
 *  carried: `fresh` (fresh_len bytes, 0 = none; Reply.ticket) replaces it,
 *  the login renewed or, after C_SetPIN, under the new PIN; `refused` (the
 *  job got CKR_USER_NOT_LOGGED_IN) ends the login as C_Logout does: the
 *  ticket expired or its PIN epoch passed (docs/CONTRACTS.md "Login
 *  tickets").  Acts only while `sent` is still the current ticket, so a
 *  late answer never undoes a newer login.  Returns true when it ended the
 *  login: the caller then destroys the private session objects
 *  (cs_object_logged_out_inlock), as C_Logout does.  */
bool cs_login_ticket_answer_inlock (const uint8_t *sent, size_t sent_len, const uint8_t *fresh,
                                    size_t fresh_len, bool refused);

/*  Ends the login state and wipes the ticket (last session closed, logout,
 *  C_Finalize, fork).  */
void cs_login_logout_inlock (void);

#endif
