/*  test_broker_login.c — login tickets end (issue #7): the whole broker
 *  in-process with one openssl board (broker/ticket-lifetime-ms = 1000 for
 *  the expiry test, the default for the others).
 *  A ticket past its expiry is refused with CKR_USER_NOT_LOGGED_IN and one
 *  used within its lifetime comes back renewed (Reply.ticket); C_InitPIN by
 *  the SO and a lockout end every user login of the tenant, C_SetPIN ends
 *  the others but keeps the caller's (a ticket at the new epoch); keystore
 *  rows changed without the master key are refused (CKR_DEVICE_ERROR).
 *  Clients alice, amy and sam are of tenant demo (sam acts as its SO), eve
 *  of tenant other.  Needs CRYPTOSERVER_DRIVER_DIR (make check).
 */
#include <sqlite3.h>
#include "test_broker_fixture.h"
#include "key_info.h"
#include "test_run.h"

/*  broker/ticket-lifetime-ms of the expiry test: 1 s, scaled like the reply
 *  timeout (make memcheck runs this under valgrind, 20 times slower).  */
#define S_LIFETIME_MS (1000 * (TH_TIMEOUT_MS > 15000 ? TH_TIMEOUT_MS / 15000 : 1))

static char *s_dir;
static broker_config_t *s_config;
static server_t *s_server;
static zsock_t *s_alice, *s_amy, *s_sam, *s_eve;
static EVP_PKEY *s_pkey;            /* demo's keystore key: signs, does not decrypt */
static char s_ref [64];

/*  Stores an RSA key for tenant demo with can_decrypt FALSE.  */
static void
s_demo_key (void)
{
    keystore_t *ks = th_keystore_open (s_dir);
    s_pkey = EVP_RSA_gen (2048);
    key_info_params_t params = { .label = "signer" };
    Cs__KeyInfo *info = key_info_from_pkey (s_pkey, &params);
    info->can_decrypt = false;
    size_t len = 0;
    uint8_t *der = th_pkcs8 (s_pkey, &len);
    ck_assert_int_eq (keystore_key_put (ks, "demo", info, der, len), 0);
    snprintf (s_ref, sizeof s_ref, "%s", info->ref);
    OPENSSL_cleanse (der, len);
    OPENSSL_free (der);
    cs__key_info__free_unpacked (info, NULL);
    keystore_destroy (&ks);
}

/*  Starts the broker with broker/ticket-lifetime-ms = lifetime_ms (0: the
 *  default, 4 h, for tests whose logins must not expire on a slow machine).  */
static void
s_setup (int lifetime_ms)
{
    s_dir = th_tmpdir ();
    th_certs (s_dir, "alice", "demo");
    th_client_add (s_dir, "amy", "demo");
    th_client_add (s_dir, "sam", "demo");
    th_client_add (s_dir, "eve", "other");
    th_keystore (s_dir);
    s_demo_key ();
    char line [64] = "";           /* the broker section gets the short lifetime */
    if (lifetime_ms)
        snprintf (line, sizeof line, "    ticket-lifetime-ms = %d\n", lifetime_ms);
    tb_conf_write (s_dir, line, "drivers\n    cpu\n        type = openssl\n        threads = 1\n");
    s_config = tb_config_load (s_dir);
    ck_assert_int_eq (s_config->ticket_lifetime_ms, lifetime_ms ? lifetime_ms : 4 * 3600 * 1000);
    s_server = tb_server_new (s_config);
    s_alice = th_dealer (s_dir, "alice", server_endpoint (s_server));
    s_amy = th_dealer (s_dir, "amy", server_endpoint (s_server));
    s_sam = th_dealer (s_dir, "sam", server_endpoint (s_server));
    s_eve = th_dealer (s_dir, "eve", server_endpoint (s_server));
}

static void
s_setup_short (void)
{
    s_setup (S_LIFETIME_MS);
}

static void
s_setup_default (void)
{
    s_setup (0);
}

static void
s_teardown (void)
{
    zsock_destroy (&s_alice);
    zsock_destroy (&s_amy);
    zsock_destroy (&s_sam);
    zsock_destroy (&s_eve);
    tb_stop (&s_server, &s_config);
    EVP_PKEY_free (s_pkey);
    th_tmpdir_remove (&s_dir);
}

/*  A ticket as bytes with its length.  */
typedef struct {
    uint8_t data [CS_WIRE_MAX_TICKET];
    size_t len;
} s_ticket_t;

/*  Logs client in as user_type with pin; returns the job's rv and the
 *  ticket in *ticket.  */
static uint64_t
s_login (zsock_t *client, unsigned long user_type, const char *pin, s_ticket_t *ticket)
{
    Cs__Request *req = th_request (1, 1);
    th_job_login (req->jobs [0], user_type, pin);
    Cs__Reply *reply = th_call (client, req);
    ck_assert_uint_eq (reply->rv, CKR_OK);
    uint64_t rv = reply->results [0]->rv;
    ticket->len = 0;
    if (rv == CKR_OK) {
        ck_assert_int_eq (reply->results [0]->kind_case, CS__RESULT__KIND_LOGIN);
        ticket->len = reply->results [0]->login->ticket.len;
        ck_assert_uint_le (ticket->len, sizeof ticket->data);
        memcpy (ticket->data, reply->results [0]->login->ticket.data, ticket->len);
    }
    cs__reply__free_unpacked (reply, NULL);
    th_request_free (req);
    return rv;
}

/*  Sends req with ticket (may be NULL) and returns its one result's rv; a
 *  renewed ticket of the reply goes to *fresh (len 0 when none) if given.  */
static uint64_t
s_call (zsock_t *client, Cs__Request *req, const s_ticket_t *ticket, s_ticket_t *fresh)
{
    req->ticket = ticket ? (ProtobufCBinaryData) { ticket->len, (uint8_t *) ticket->data }
                         : (ProtobufCBinaryData) { 0, NULL };
    Cs__Reply *reply = th_call (client, req);
    ck_assert_uint_eq (reply->rv, CKR_OK);
    ck_assert_uint_eq (reply->n_results, 1);
    uint64_t rv = reply->results [0]->rv;
    if (fresh) {
        fresh->len = reply->ticket.len;
        ck_assert_uint_le (fresh->len, sizeof fresh->data);
        memcpy (fresh->data, reply->ticket.data, fresh->len);
    }
    cs__reply__free_unpacked (reply, NULL);
    return rv;
}

/*  Signs a DigestInfo with demo's key as client with ticket; an OK
 *  signature is verified with OpenSSL.  Returns the rv.  */
static uint64_t
s_sign (zsock_t *client, const s_ticket_t *ticket, s_ticket_t *fresh)
{
    uint8_t di [51];
    th_digest_info ("login tickets", di);
    Cs__Request *req = th_request (1, 2);
    th_job_crypto (req->jobs [0], true, (const uint8_t *) s_ref, strlen (s_ref), CKM_RSA_PKCS, di, 51);
    req->ticket = (ProtobufCBinaryData) { ticket->len, (uint8_t *) ticket->data };
    Cs__Reply *reply = th_call (client, req);
    uint64_t rv = reply->results [0]->rv;
    if (rv == CKR_OK)
        ck_assert (th_verify_rsa_pkcs1 (s_pkey, di, 51, reply->results [0]->data.data,
                                        reply->results [0]->data.len));
    if (fresh) {
        fresh->len = reply->ticket.len;
        memcpy (fresh->data, reply->ticket.data, fresh->len);
    }
    cs__reply__free_unpacked (reply, NULL);
    th_request_free (req);
    return rv;
}

/*  C_InitPIN (new user PIN) with ticket.  */
static uint64_t
s_init_pin (zsock_t *client, const s_ticket_t *ticket, const char *pin)
{
    Cs__InitPinJob init = CS__INIT_PIN_JOB__INIT;
    init.pin = (ProtobufCBinaryData) { strlen (pin), (uint8_t *) pin };
    Cs__Request *req = th_request (1, 3);
    req->jobs [0]->kind_case = CS__JOB__KIND_INIT_PIN;
    req->jobs [0]->init_pin = &init;
    uint64_t rv = s_call (client, req, ticket, NULL);
    req->jobs [0]->init_pin = NULL;
    th_request_free (req);
    return rv;
}

/*  C_SetPIN of user_type with ticket (may be NULL); the reply's ticket in
 *  *fresh.  */
static uint64_t
s_set_pin (zsock_t *client, const s_ticket_t *ticket, unsigned long user_type, const char *old_pin,
           const char *new_pin, s_ticket_t *fresh)
{
    Cs__SetPinJob set = CS__SET_PIN_JOB__INIT;
    set.user_type = user_type;
    set.old_pin = (ProtobufCBinaryData) { strlen (old_pin), (uint8_t *) old_pin };
    set.new_pin = (ProtobufCBinaryData) { strlen (new_pin), (uint8_t *) new_pin };
    Cs__Request *req = th_request (1, 4);
    req->jobs [0]->kind_case = CS__JOB__KIND_SET_PIN;
    req->jobs [0]->set_pin = &set;
    uint64_t rv = s_call (client, req, ticket, fresh);
    req->jobs [0]->set_pin = NULL;
    th_request_free (req);
    return rv;
}

/*  Sleeps until `ms` after `since` (zclock_mono): the bounded waits of the
 *  expiry test (at most 1.1 s, scaled with S_LIFETIME_MS).  */
static void
s_sleep_until (int64_t since, int64_t ms)
{
    int64_t left = since + ms - zclock_mono ();
    if (left > 0)
        zclock_sleep ((int) left);
}

/*  A ticket used within its lifetime is renewed once less than half of it
 *  is left, so a login in use does not end; an unused one expires and is
 *  refused with CKR_USER_NOT_LOGGED_IN (docs/CONTRACTS.md "Login tickets").  */
START_TEST (test_ticket_expires_and_renews)
{
    s_ticket_t first, fresh, none;
    ck_assert_uint_eq (s_login (s_alice, CKU_USER, "1234", &first), CKR_OK);
    int64_t issued = zclock_mono ();
    ck_assert_uint_eq (s_sign (s_alice, &first, &none), CKR_OK);
    ck_assert_uint_eq (none.len, 0);                /* most of the lifetime left: no renewal */
    s_sleep_until (issued, S_LIFETIME_MS * 6 / 10);
    ck_assert_uint_eq (s_sign (s_alice, &first, &fresh), CKR_OK);
    ck_assert_uint_eq (fresh.len, first.len);       /* less than half left: renewed */
    ck_assert_mem_ne (fresh.data, first.data, first.len);
    s_sleep_until (issued, S_LIFETIME_MS * 11 / 10);
    ck_assert_uint_eq (s_sign (s_alice, &first, NULL), CKR_USER_NOT_LOGGED_IN);
    ck_assert_uint_eq (s_sign (s_alice, &fresh, &none), CKR_OK);
    /*  The renewed ticket is alice's only: another client's or another
        tenant's link does not accept it.  */
    ck_assert_uint_eq (s_sign (s_amy, &fresh, NULL), CKR_USER_NOT_LOGGED_IN);
    ck_assert_uint_eq (s_sign (s_eve, &fresh, NULL), CKR_USER_NOT_LOGGED_IN);
}
END_TEST

/*  C_InitPIN by the SO ends every user login of the tenant (a new PIN
 *  epoch), not the SO's own, nor another tenant's logins.  */
START_TEST (test_init_pin_ends_user_logins)
{
    s_ticket_t alice, amy, so, eve;
    ck_assert_uint_eq (s_login (s_alice, CKU_USER, "1234", &alice), CKR_OK);
    ck_assert_uint_eq (s_login (s_amy, CKU_USER, "1234", &amy), CKR_OK);
    ck_assert_uint_eq (s_login (s_eve, CKU_USER, "5678", &eve), CKR_OK);
    ck_assert_uint_eq (s_login (s_sam, CKU_SO, "123456", &so), CKR_OK);
    ck_assert_uint_eq (s_sign (s_alice, &alice, NULL), CKR_OK);
    ck_assert_uint_eq (s_init_pin (s_sam, &so, "4321"), CKR_OK);
    ck_assert_uint_eq (s_sign (s_alice, &alice, NULL), CKR_USER_NOT_LOGGED_IN);
    ck_assert_uint_eq (s_sign (s_amy, &amy, NULL), CKR_USER_NOT_LOGGED_IN);
    ck_assert_uint_eq (s_init_pin (s_sam, &so, "2222"), CKR_OK);       /* the SO is still in */
    ck_assert_uint_eq (s_login (s_alice, CKU_USER, "4321", &alice), CKR_PIN_INCORRECT);
    ck_assert_uint_eq (s_login (s_alice, CKU_USER, "2222", &alice), CKR_OK);
    ck_assert_uint_eq (s_sign (s_alice, &alice, NULL), CKR_OK);
    /*  Tenant other: untouched (an eve job with a demo key ref is refused as
        a handle, not as a login).  */
    ck_assert_uint_eq (s_sign (s_eve, &eve, NULL), CKR_KEY_HANDLE_INVALID);
}
END_TEST

/*  C_SetPIN ends the logins made with the old PIN everywhere, but the
 *  caller's session stays logged in (PKCS#11 2.40 §5.6): the reply carries
 *  its ticket at the new epoch.  Without a login, no ticket comes back.  */
START_TEST (test_set_pin_keeps_caller)
{
    s_ticket_t alice, amy, fresh;
    ck_assert_uint_eq (s_login (s_alice, CKU_USER, "1234", &alice), CKR_OK);
    ck_assert_uint_eq (s_login (s_amy, CKU_USER, "1234", &amy), CKR_OK);
    ck_assert_uint_eq (s_set_pin (s_alice, &alice, CKU_USER, "1234", "2468", &fresh), CKR_OK);
    ck_assert_uint_eq (fresh.len, alice.len);
    ck_assert_uint_eq (s_sign (s_alice, &fresh, NULL), CKR_OK);
    ck_assert_uint_eq (s_sign (s_alice, &alice, NULL), CKR_USER_NOT_LOGGED_IN);
    ck_assert_uint_eq (s_sign (s_amy, &amy, NULL), CKR_USER_NOT_LOGGED_IN);
    ck_assert_uint_eq (s_set_pin (s_amy, NULL, CKU_USER, "2468", "1357", &fresh), CKR_OK);
    ck_assert_uint_eq (fresh.len, 0);
    ck_assert_uint_eq (s_login (s_amy, CKU_USER, "1357", &amy), CKR_OK);
    ck_assert_uint_eq (s_sign (s_amy, &amy, NULL), CKR_OK);
}
END_TEST

/*  Locking the user PIN (5 wrong PINs from any client of the tenant) ends
 *  every user login of the tenant.  */
START_TEST (test_lockout_ends_logins)
{
    s_ticket_t alice, none;
    ck_assert_uint_eq (s_login (s_alice, CKU_USER, "1234", &alice), CKR_OK);
    for (int i = 0; i < 4; i++)
        ck_assert_uint_eq (s_login (s_amy, CKU_USER, "0000", &none), CKR_PIN_INCORRECT);
    ck_assert_uint_eq (s_sign (s_alice, &alice, NULL), CKR_OK);          /* not yet */
    ck_assert_uint_eq (s_login (s_amy, CKU_USER, "0000", &none), CKR_PIN_INCORRECT);
    ck_assert_uint_eq (s_sign (s_alice, &alice, NULL), CKR_USER_NOT_LOGGED_IN);
    ck_assert_uint_eq (s_login (s_alice, CKU_USER, "1234", &alice), CKR_PIN_LOCKED);
}
END_TEST

/*  A key row whose can_decrypt was flipped in keystore.db is refused for
 *  every job (CKR_DEVICE_ERROR), where it would otherwise decrypt.  */
START_TEST (test_tampered_key_refused)
{
    s_ticket_t alice;
    uint8_t ct [256];
    ck_assert_uint_eq (s_login (s_alice, CKU_USER, "1234", &alice), CKR_OK);
    size_t ct_len = th_rsa_encrypt (s_pkey, NULL, NULL, "secret", ct, sizeof ct);
    Cs__Request *req = th_request (1, 5);
    th_job_crypto (req->jobs [0], false, (const uint8_t *) s_ref, strlen (s_ref), CKM_RSA_PKCS, ct, ct_len);
    ck_assert_uint_eq (s_call (s_alice, req, &alice, NULL), CKR_KEY_FUNCTION_NOT_PERMITTED);
    char *sql = sqlite3_mprintf ("UPDATE keys SET info = CAST (info || x'5001' AS BLOB) WHERE ref = %Q", s_ref);
    tb_keystore_sql (s_dir, sql);
    sqlite3_free (sql);
    ck_assert_uint_eq (s_call (s_alice, req, &alice, NULL), CKR_DEVICE_ERROR);
    th_request_free (req);
    ck_assert_uint_eq (s_sign (s_alice, &alice, NULL), CKR_DEVICE_ERROR);
    /*  Listing leaves it out.  */
    req = th_request (1, 6);
    th_job_list_keys (req->jobs [0]);
    Cs__Reply *reply = th_call (s_alice, req);
    ck_assert_uint_eq (reply->results [0]->rv, CKR_OK);
    ck_assert_uint_eq (reply->results [0]->keys->n_keys, 0);
    cs__reply__free_unpacked (reply, NULL);
    th_request_free (req);
}
END_TEST

/*  A tenant row changed in keystore.db (its failure counter reset) is
 *  refused: C_Login gives CKR_DEVICE_ERROR, and tickets of the tenant no
 *  longer check (its epoch cannot be trusted).  */
START_TEST (test_tampered_tenant_refused)
{
    s_ticket_t alice, none;
    ck_assert_uint_eq (s_login (s_alice, CKU_USER, "1234", &alice), CKR_OK);
    ck_assert_uint_eq (s_login (s_amy, CKU_USER, "0000", &none), CKR_PIN_INCORRECT);
    tb_keystore_sql (s_dir, "UPDATE tenants SET user_failures = 0 WHERE name = 'demo'");
    ck_assert_uint_eq (s_login (s_amy, CKU_USER, "1234", &none), CKR_DEVICE_ERROR);
    ck_assert_uint_eq (s_sign (s_alice, &alice, NULL), CKR_USER_NOT_LOGGED_IN);
    /*  Tenant other is not concerned.  */
    ck_assert_uint_eq (s_login (s_eve, CKU_USER, "5678", &none), CKR_OK);
}
END_TEST

int
main (void)
{
    Suite *suite = suite_create ("broker_login");
    TCase *expiry = tr_tcase ("expiry", s_setup_short, s_teardown);
    tcase_add_test (expiry, test_ticket_expires_and_renews);
    suite_add_tcase (suite, expiry);
    TCase *tc = tr_tcase ("login", s_setup_default, s_teardown);
    tcase_add_test (tc, test_init_pin_ends_user_logins);
    tcase_add_test (tc, test_set_pin_keeps_caller);
    tcase_add_test (tc, test_lockout_ends_logins);
    tcase_add_test (tc, test_tampered_key_refused);
    tcase_add_test (tc, test_tampered_tenant_refused);
    suite_add_tcase (suite, tc);
    return tr_run (suite);
}
