/*  ticket.h — stateless login tickets (docs/CONTRACTS.md "Login tickets").
 *
 *  ticket = 0x02 || user_type (1 byte) || epoch (8 bytes, big-endian) ||
 *           expires (8 bytes, big-endian, Unix time in ms) || mac (32 bytes)
 *  mac    = HMAC-SHA256 (ticket_key, "cs-ticket-v2" ||
 *           len32 (client key) || client key || len32 (tenant) || tenant ||
 *           the first 18 bytes of the ticket)
 *  len32 is a 4-byte big-endian byte count; the client key is its CURVE
 *  public key in Z85 (40 characters), "" on a plaintext link.  The broker
 *  keeps no session table: it recomputes the MAC, compares the expiry with
 *  its clock and the epoch with the tenant's PIN epoch of that user type
 *  in the keystore (keystore_pin_epoch), which C_InitPIN, C_SetPIN, an
 *  administrator's set-pin and a lockout change.
 */
#ifndef TICKET_H_INCLUDED
#define TICKET_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TICKET_FORMAT 2
#define TICKET_LEN 50           /* bytes */

/*  What a ticket says about its login.  */
typedef struct {
    unsigned long user_type;    /* CKU_USER or CKU_SO (one byte on the wire) */
    uint64_t epoch;             /* the tenant's PIN epoch of user_type when issued */
    uint64_t expires_ms;        /* Unix time in ms; refused from then on */
} ticket_claims_t;

typedef enum {
    TICKET_VALID,               /* the MAC checks and it has not expired */
    TICKET_INVALID,             /* wrong length, format, MAC, client key or tenant */
    TICKET_EXPIRED              /* the MAC checks, but now_ms >= expires_ms */
} ticket_status_t;

/*  The ticket key made ready for MACs: an HMAC-SHA256 context with the
 *  32-byte key set (OpenSSL EVP_MAC), restarted for each ticket, so a
 *  ticket costs no algorithm fetch and no key schedule (issue #8: HMAC()
 *  fetched both for every request).  The context holds key-derived state
 *  on the ordinary heap, cleansed when destroyed.  Not thread-safe: one
 *  per thread (the broker's reactor).  NULL when out of memory or OpenSSL
 *  fails.  Caller destroys.  */
typedef struct _ticket_mac_t ticket_mac_t;
ticket_mac_t *ticket_mac_new (const unsigned char key [32]);

/*  Destroys it (cleansing the key state); NULL-safe, nulls *self_p.  */
void ticket_mac_destroy (ticket_mac_t **self_p);

/*  Writes the TICKET_LEN-byte ticket of `claims` for (client_key, tenant)
 *  made with key (ticket_mac_new) into out.  Returns 0, or -1 when
 *  user_type does not fit a byte or HMAC fails.  */
int ticket_make (ticket_mac_t *key, const char *client_key, const char *tenant,
                 const ticket_claims_t *claims, unsigned char out [TICKET_LEN]);

/*  Checks ticket (len bytes) for (client_key, tenant) under key
 *  (ticket_mac_new) at Unix time
 *  now_ms; compares the MAC in constant time.  Fills *claims (when not
 *  NULL) for TICKET_VALID and TICKET_EXPIRED.  The epoch is the caller's to
 *  compare.  */
ticket_status_t ticket_check (ticket_mac_t *key, const char *client_key,
                              const char *tenant, const unsigned char *ticket, size_t len,
                              uint64_t now_ms, ticket_claims_t *claims);

#endif
