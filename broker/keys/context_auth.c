/*  context_auth.c — context-specific logins (context_auth.h).  */
#include <stdio.h>
#include <string.h>
#include "context_auth.h"
#include "keyattrs.h"

/*  "<tenant>\n<ref>", what a context ticket binds in place of the tenant.
 *  0, or -1 when it does not fit `size` bytes.  */
static int
s_binding (const char *tenant, const uint8_t *ref, size_t ref_len, char *out, size_t size)
{
    if (ref_len == 0 || ref_len > CONTEXT_AUTH_MAX_REF || memchr (ref, 0, ref_len))
        return -1;
    int n = snprintf (out, size, "%s\n%.*s", tenant, (int) ref_len, (const char *) ref);
    return n > 0 && (size_t) n < size ? 0 : -1;
}

int
context_auth_make (ticket_mac_t *mac, const char *client_key, const char *tenant, const uint8_t *ref,
                   size_t ref_len, uint64_t epoch, uint64_t now_ms, unsigned char out [TICKET_LEN])
{
    char binding [512];
    ticket_claims_t claims = { CKU_CONTEXT_SPECIFIC, epoch, now_ms + CONTEXT_AUTH_LIFETIME_MS };
    if (s_binding (tenant, ref, ref_len, binding, sizeof binding))
        return -1;
    return ticket_make (mac, client_key, binding, &claims, out);
}

CK_RV
context_auth_check (ticket_mac_t *mac, const char *client_key, const char *tenant, const char *ref,
                    Cs__KeyInfo *info, const uint8_t *ticket, size_t ticket_len, uint64_t user_epoch,
                    uint64_t now_ms)
{
    char binding [512];
    ticket_claims_t claims;
    if (!keyattrs_flag (info, true, CKA_ALWAYS_AUTHENTICATE, false))
        return CKR_OK;
    if (!ticket || s_binding (tenant, (const uint8_t *) ref, strlen (ref), binding, sizeof binding)
    ||  ticket_check (mac, client_key, binding, ticket, ticket_len, now_ms, &claims) != TICKET_VALID
    ||  claims.user_type != CKU_CONTEXT_SPECIFIC || claims.epoch != user_epoch)
        return CKR_USER_NOT_LOGGED_IN;
    return CKR_OK;
}
