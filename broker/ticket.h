/*  ticket.h — stateless login tickets (docs/CONTRACTS.md "Login tickets").
 *
 *  ticket = user_type (1 byte) || HMAC-SHA256 (ticket_key, "cs-ticket-v1" ||
 *  client public key (Z85, 40 chars; "" on a plaintext link) || tenant name ||
 *  user_type byte).  The broker keeps no session table: it recomputes the MAC.
 */
#ifndef TICKET_H_INCLUDED
#define TICKET_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TICKET_LEN 33           /* bytes */

/*  Writes the TICKET_LEN-byte ticket for (client_key, tenant, user_type) made
 *  with the 32-byte key into out.  Returns 0, or -1 if HMAC fails.  */
int ticket_make (const unsigned char key [32], const char *client_key, const char *tenant,
                 unsigned long user_type, unsigned char out [TICKET_LEN]);

/*  Returns true when ticket (len bytes) is the ticket of (client_key, tenant,
 *  user_type) under key; compares in constant time.  */
bool ticket_check (const unsigned char key [32], const char *client_key, const char *tenant,
                   unsigned long user_type, const unsigned char *ticket, size_t len);

#endif
