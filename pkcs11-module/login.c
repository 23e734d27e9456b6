/*  login.c — the login state and its ticket (login.h).  */
#include <string.h>
#include <openssl/crypto.h>
#include "cs_wire.h"
#include "log.h"
#include "guard.h"
#include "login.h"

static struct {
    bool user;                  /* CKU_USER logged in */
    bool so;                    /* CKU_SO logged in */
    uint8_t ticket [CS_WIRE_MAX_TICKET];
    size_t ticket_len;
} s_login;

bool
cs_login_user_logged_in_inlock (void)
{
    return s_login.user;
}

bool
cs_login_so_logged_in_inlock (void)
{
    return s_login.so;
}

bool
cs_login_so_logged_in (void)
{
    cs_lock ();
    bool so = s_login.so;
    cs_unlock ();
    return so;
}

size_t
cs_login_ticket_copy_inlock (uint8_t *out, size_t max)
{
    if ((!s_login.user && !s_login.so) || s_login.ticket_len > max)
        return 0;
    memcpy (out, s_login.ticket, s_login.ticket_len);
    return s_login.ticket_len;
}

CK_RV
cs_login_store_inlock (CK_USER_TYPE user_type, const uint8_t *ticket, size_t len)
{
    if (len == 0 || len > sizeof s_login.ticket)
        return CKR_DEVICE_ERROR;
    memcpy (s_login.ticket, ticket, len);
    s_login.ticket_len = len;
    s_login.user = user_type == CKU_USER;
    s_login.so = user_type == CKU_SO;
    return CKR_OK;
}

bool
cs_login_ticket_answer_inlock (const uint8_t *sent, size_t sent_len, const uint8_t *fresh,
                               size_t fresh_len, bool refused)
{
    if ((!s_login.user && !s_login.so) || sent_len != s_login.ticket_len
    ||  CRYPTO_memcmp (sent, s_login.ticket, sent_len) != 0)
        return false;
    if (refused) {
        cs_log_info ("the broker no longer accepts this login (expired, or the PIN was set or "
                     "locked): logged out");
        cs_login_logout_inlock ();
        return true;
    }
    if (fresh_len > 0 && fresh_len <= sizeof s_login.ticket) {
        memcpy (s_login.ticket, fresh, fresh_len);
        s_login.ticket_len = fresh_len;
    }
    return false;
}

void
cs_login_logout_inlock (void)
{
    OPENSSL_cleanse (s_login.ticket, sizeof s_login.ticket);
    s_login.ticket_len = 0;
    s_login.user = false;
    s_login.so = false;
}
