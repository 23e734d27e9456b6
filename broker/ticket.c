/*  ticket.c — HMAC-SHA256 login tickets.  */
#include <string.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include "ticket.h"

int
ticket_make (const unsigned char key [32], const char *client_key, const char *tenant,
             unsigned long user_type, unsigned char out [TICKET_LEN])
{
    static const char tag [] = "cs-ticket-v1";
    size_t key_len = strlen (client_key), tenant_len = strlen (tenant);
    size_t len = sizeof tag - 1 + key_len + tenant_len + 1;
    unsigned char *msg = malloc (len);
    unsigned int mac_len = 0;
    if (!msg || user_type > 255) {
        free (msg);
        return -1;
    }
    memcpy (msg, tag, sizeof tag - 1);
    memcpy (msg + sizeof tag - 1, client_key, key_len);
    memcpy (msg + sizeof tag - 1 + key_len, tenant, tenant_len);
    msg [len - 1] = (unsigned char) user_type;
    out [0] = (unsigned char) user_type;
    bool ok = HMAC (EVP_sha256 (), key, 32, msg, len, out + 1, &mac_len) && mac_len == 32;
    free (msg);
    return ok ? 0 : -1;
}

bool
ticket_check (const unsigned char key [32], const char *client_key, const char *tenant,
              unsigned long user_type, const unsigned char *ticket, size_t len)
{
    unsigned char expected [TICKET_LEN];
    if (len != TICKET_LEN || ticket_make (key, client_key, tenant, user_type, expected))
        return false;
    bool ok = CRYPTO_memcmp (expected, ticket, TICKET_LEN) == 0;
    OPENSSL_cleanse (expected, sizeof expected);
    return ok;
}
