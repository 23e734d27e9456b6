/*  ticket.c — HMAC-SHA256 login tickets with an expiry and a PIN epoch
 *  (ticket.h).  */
#include <stdlib.h>
#include <string.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/core_names.h>
#include <openssl/params.h>
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

struct _ticket_mac_t {
    EVP_MAC_CTX *ctx;               /* HMAC-SHA256 with the ticket key set */
};

ticket_mac_t *
ticket_mac_new (const unsigned char key [32])
{
    ticket_mac_t *self = calloc (1, sizeof *self);
    EVP_MAC *hmac = self ? EVP_MAC_fetch (NULL, "HMAC", NULL) : NULL;
    OSSL_PARAM params [] = {
        OSSL_PARAM_construct_utf8_string (OSSL_MAC_PARAM_DIGEST, (char *) "SHA256", 0),
        OSSL_PARAM_construct_end ()
    };
    if (hmac)
        self->ctx = EVP_MAC_CTX_new (hmac);
    EVP_MAC_free (hmac);                    /* the context keeps its own reference */
    if (!self || !self->ctx || !EVP_MAC_init (self->ctx, key, 32, params)) {
        ticket_mac_destroy (&self);
        return NULL;
    }
    return self;
}

void
ticket_mac_destroy (ticket_mac_t **self_p)
{
    ticket_mac_t *self = self_p ? *self_p : NULL;
    if (!self)
        return;
    EVP_MAC_CTX_free (self->ctx);           /* cleanses the key state */
    free (self);
    *self_p = NULL;
}

//  Feeds len32 (len) || bytes into the MAC.
static bool
s_mac_field (EVP_MAC_CTX *ctx, const char *bytes)
{
    size_t len = strlen (bytes);
    unsigned char be [4];
    if (len > UINT32_MAX)
        return false;
    s_put_be (be, len, 4);
    return EVP_MAC_update (ctx, be, 4) && EVP_MAC_update (ctx, (const unsigned char *) bytes, len);
}

//  The MAC of head (S_HEAD_LEN bytes) for (client_key, tenant) into mac.
//  The context starts again from the key it was set up with (EVP_MAC_init
//  with no key: no algorithm fetch, no key schedule per ticket).
static bool
s_mac (ticket_mac_t *self, const char *client_key, const char *tenant,
       const unsigned char head [S_HEAD_LEN], unsigned char mac [S_MAC_LEN])
{
    size_t mac_len = 0;
    return EVP_MAC_init (self->ctx, NULL, 0, NULL)
        && EVP_MAC_update (self->ctx, (const unsigned char *) S_TAG, strlen (S_TAG))
        && s_mac_field (self->ctx, client_key) && s_mac_field (self->ctx, tenant)
        && EVP_MAC_update (self->ctx, head, S_HEAD_LEN)
        && EVP_MAC_final (self->ctx, mac, &mac_len, S_MAC_LEN) && mac_len == S_MAC_LEN;
}

int
ticket_make (ticket_mac_t *key, const char *client_key, const char *tenant,
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
ticket_check (ticket_mac_t *key, const char *client_key, const char *tenant,
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
