/*  ticket.c — HMAC-SHA256 login tickets with an expiry and a PIN epoch
 *  (ticket.h).  */
#include <stdlib.h>
#include <string.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include "ticket.h"

#define S_TAG "cs-ticket-v2"
#define S_HEAD_LEN 18           /* format, user type, epoch, expiry */
#define S_MAC_LEN 32

static void
s_put_be (unsigned char *out, uint64_t value, size_t len)
{
    for (size_t i = 0; i < len; i++)
        out [i] = (unsigned char) (value >> (8 * (len - 1 - i)));
}

static uint64_t
s_get_be (const unsigned char *in, size_t len)
{
    uint64_t value = 0;
    for (size_t i = 0; i < len; i++)
        value = value << 8 | in [i];
    return value;
}

//  The MAC of head (S_HEAD_LEN bytes) for (client_key, tenant) into mac.
static bool
s_mac (const unsigned char key [32], const char *client_key, const char *tenant,
       const unsigned char head [S_HEAD_LEN], unsigned char mac [S_MAC_LEN])
{
    size_t tag_len = strlen (S_TAG), key_len = strlen (client_key), tenant_len = strlen (tenant);
    size_t len = tag_len + 4 + key_len + 4 + tenant_len + S_HEAD_LEN;
    unsigned char *msg = key_len <= UINT32_MAX && tenant_len <= UINT32_MAX ? malloc (len) : NULL;
    unsigned char *at = msg;
    unsigned int mac_len = 0;
    if (!msg)
        return false;
    memcpy (at, S_TAG, tag_len);
    at += tag_len;
    s_put_be (at, key_len, 4);
    memcpy (at + 4, client_key, key_len);
    at += 4 + key_len;
    s_put_be (at, tenant_len, 4);
    memcpy (at + 4, tenant, tenant_len);
    at += 4 + tenant_len;
    memcpy (at, head, S_HEAD_LEN);
    bool ok = HMAC (EVP_sha256 (), key, 32, msg, len, mac, &mac_len) && mac_len == S_MAC_LEN;
    free (msg);
    return ok;
}

int
ticket_make (const unsigned char key [32], const char *client_key, const char *tenant,
             const ticket_claims_t *claims, unsigned char out [TICKET_LEN])
{
    if (!claims || claims->user_type > 255)
        return -1;
    out [0] = TICKET_FORMAT;
    out [1] = (unsigned char) claims->user_type;
    s_put_be (out + 2, claims->epoch, 8);
    s_put_be (out + 10, claims->expires_ms, 8);
    return s_mac (key, client_key, tenant, out, out + S_HEAD_LEN) ? 0 : -1;
}

ticket_status_t
ticket_check (const unsigned char key [32], const char *client_key, const char *tenant,
              const unsigned char *ticket, size_t len, uint64_t now_ms, ticket_claims_t *claims)
{
    unsigned char mac [S_MAC_LEN];
    if (!ticket || len != TICKET_LEN || ticket [0] != TICKET_FORMAT
    ||  !s_mac (key, client_key, tenant, ticket, mac))
        return TICKET_INVALID;
    bool ok = CRYPTO_memcmp (mac, ticket + S_HEAD_LEN, S_MAC_LEN) == 0;
    OPENSSL_cleanse (mac, sizeof mac);
    if (!ok)
        return TICKET_INVALID;
    ticket_claims_t got = { ticket [1], s_get_be (ticket + 2, 8), s_get_be (ticket + 10, 8) };
    if (claims)
        *claims = got;
    return now_ms < got.expires_ms ? TICKET_VALID : TICKET_EXPIRED;
}
