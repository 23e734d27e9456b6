/*  context_auth.h — context-specific logins (PKCS#11 2.40 §5.6 C_Login with
 *  CKU_CONTEXT_SPECIFIC; §4.9 CKA_ALWAYS_AUTHENTICATE): the ticket a
 *  C_Login (CKU_CONTEXT_SPECIFIC) earns for one key, and its check on the
 *  sign and decrypt jobs of that key (docs/CONTRACTS.md "Context-specific
 *  login").
 *
 *  A context ticket is a login ticket (ticket.h) of user type
 *  CKU_CONTEXT_SPECIFIC whose MAC binds "<tenant>\n<key ref>" where an
 *  ordinary ticket binds the tenant: it is good for that key of that tenant
 *  and client only, at the user PIN epoch it was made at, for
 *  CONTEXT_AUTH_LIFETIME_MS.  The broker keeps no state: within that time
 *  a client may use it again (the module uses it once).
 *
 *  Owns: nothing.  May call: ticket.h, keyattrs.h.
 */
#ifndef CONTEXT_AUTH_H_INCLUDED
#define CONTEXT_AUTH_H_INCLUDED

#include <stdint.h>
#include "cryptoserver.pb-c.h"
#include "cs_mech.h"
#include "ticket.h"

#define CONTEXT_AUTH_LIFETIME_MS 60000  /* a context ticket's life (ms) */
#define CONTEXT_AUTH_MAX_REF 64         /* bytes of a key ref in a LoginJob */

/*  Writes the TICKET_LEN-byte context ticket for key `ref` (ref_len bytes,
 *  1..CONTEXT_AUTH_MAX_REF) of `tenant` and the client with CURVE key
 *  `client_key`, at user PIN epoch `epoch`, expiring
 *  CONTEXT_AUTH_LIFETIME_MS after now_ms (Unix time).  0, or -1 (a ref too
 *  long, a MAC failure).  */
int context_auth_make (ticket_mac_t *mac, const char *client_key, const char *tenant, const uint8_t *ref,
                       size_t ref_len, uint64_t epoch, uint64_t now_ms, unsigned char out [TICKET_LEN]);

/*  Whether a sign or decrypt job may use keystore key `info` (ref `ref`):
 *  CKR_OK when the key's private object does not have CKA_ALWAYS_AUTHENTICATE
 *  TRUE, or `ticket` (ticket_len bytes; NULL for a job kind that carries
 *  none) is a valid, unexpired context ticket for this client, tenant and
 *  key at the tenant's user PIN epoch `user_epoch`; CKR_USER_NOT_LOGGED_IN
 *  otherwise.  */
CK_RV context_auth_check (ticket_mac_t *mac, const char *client_key, const char *tenant, const char *ref,
                          Cs__KeyInfo *info, const uint8_t *ticket, size_t ticket_len, uint64_t user_epoch,
                          uint64_t now_ms);

#endif
