/*  test_broker_ticket.c — stateless login tickets (broker/keys/ticket.c): known
 *  answers for the construction of docs/CONTRACTS.md "Login tickets", that
 *  a ticket checks only for the (ticket key, client key, tenant) it was made
 *  for with the claims (user type, epoch, expiry) it was made with, and
 *  that it expires.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <p11-kit/pkcs11.h>
#include "ticket.h"
#include "test_run.h"

/*  The ticket key of the vectors: bytes 00 01 .. 1f; made ready for MACs.  */
static unsigned char s_key_bytes [32];
static ticket_mac_t *s_key;
/*  A client's CURVE public key in Z85 (40 characters).  */
static const char s_client [] = "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7";

static void
s_setup (void)
{
    for (int i = 0; i < 32; i++)
        s_key_bytes [i] = (unsigned char) i;
    s_key = ticket_mac_new (s_key_bytes);
    ck_assert_ptr_nonnull (s_key);
}

static void
s_teardown (void)
{
    ticket_mac_destroy (&s_key);
    ck_assert_ptr_null (s_key);
}

/*  Decodes 2 * TICKET_LEN lower-case hex digits into out.  */
static void
s_unhex (const char *hex, unsigned char out [TICKET_LEN])
{
    ck_assert_uint_eq (strlen (hex), 2 * TICKET_LEN);
    for (size_t i = 0; i < TICKET_LEN; i++) {
        unsigned byte = 0;
        ck_assert_int_eq (sscanf (hex + 2 * i, "%2x", &byte), 1);
        out [i] = (unsigned char) byte;
    }
}

/*  2026-01-01T00:00:00Z in ms: the expiry of the vectors.  */
#define S_EXPIRES UINT64_C (1767225600000)

/*  Known answers for the ticket construction of docs/CONTRACTS.md "Login
 *  tickets".  When the construction changes, update the contract, the
 *  formula below and these vectors together.
 *
 *  head   = 0x02 || user_type (1) || epoch (8, BE) || expires_ms (8, BE)
 *  ticket = head || HMAC-SHA256 (ticket_key, "cs-ticket-v2" ||
 *           len32 (client key) || client key || len32 (tenant) || tenant || head)
 *  (len32: 4-byte big-endian length; client key Z85, "" on a plaintext link)
 *
 *  Computed outside the project with python3:
 *    key = bytes (range (32))
 *    head = bytes ([2, ut]) + struct.pack (">QQ", epoch, expires)
 *    c, t = client.encode (), tenant.encode ()
 *    msg = (b"cs-ticket-v2" + struct.pack (">I", len (c)) + c
 *           + struct.pack (">I", len (t)) + t + head)
 *    (head + hmac.new (key, msg, hashlib.sha256).digest ()).hex ()
 *  and the first MAC again with
 *    { printf 'cs-ticket-v2\x00\x00\x00\x28%s\x00\x00\x00\x04demo' "$client";
 *      printf '\x02\x01\x00\x00\x00\x00\x00\x00\x00\x07\x00\x00\x01\x9b\x76\xda\xa8\x00'; }
 *    | openssl dgst -sha256 -mac HMAC -macopt hexkey:000102...1f  */
START_TEST (test_ticket_kat)
{
    static const struct {
        const char *client_key, *tenant;
        ticket_claims_t claims;
        const char *hex;
    } vectors [] = {
        { s_client, "demo", { CKU_USER, 7, S_EXPIRES },
          "020100000000000000070000019b76daa800"
          "c11beb12248fde87ae49e61814ebdd69743662e4b5dec0123bdcd0dec6f88130" },
        { s_client, "demo", { CKU_SO, 8, S_EXPIRES },
          "020000000000000000080000019b76daa800"
          "188da4b4b9ac52802416768f0fefe3bb34fad785a3faf0246f6f847031256a32" },
        { "", "demo", { CKU_USER, 7, S_EXPIRES },
          "020100000000000000070000019b76daa800"
          "cdb1f5dcf586ba920920c228a16a5225c82752cdf68b6394dfed058e702b67bd" },
        { s_client, "other", { CKU_USER, 1, S_EXPIRES },
          "020100000000000000010000019b76daa800"
          "bfeee3e3a3425a6100fee6de35861220d75ef6a1eb4b8f238af71a8fcd8f1f51" },
        { s_client, "demo", { CKU_USER, UINT64_C (0x0102030405060708), UINT64_C (0xfffffffffffffffe) },
          "02010102030405060708fffffffffffffffe"
          "308c7941043b001a2b2c2f81462f226161cf257a1bbf0ba5de85a4f4096bc0eb" },
    };
    for (size_t i = 0; i < sizeof vectors / sizeof vectors [0]; i++) {
        unsigned char expect [TICKET_LEN], got [TICKET_LEN];
        ticket_claims_t claims;
        s_unhex (vectors [i].hex, expect);
        ck_assert_int_eq (ticket_make (s_key, vectors [i].client_key, vectors [i].tenant,
                                       &vectors [i].claims, got), 0);
        ck_assert_msg (memcmp (got, expect, TICKET_LEN) == 0, "vector %zu differs", i);
        ck_assert_int_eq (ticket_check (s_key, vectors [i].client_key, vectors [i].tenant, expect,
                                        TICKET_LEN, S_EXPIRES - 1, &claims), TICKET_VALID);
        ck_assert_uint_eq (claims.user_type, vectors [i].claims.user_type);
        ck_assert_uint_eq (claims.epoch, vectors [i].claims.epoch);
        ck_assert_uint_eq (claims.expires_ms, vectors [i].claims.expires_ms);
    }
}
END_TEST

/*  A ticket is bound to every input: any other one, a changed byte or a
 *  wrong length fails the check.  */
START_TEST (test_ticket_binding)
{
    unsigned char ticket [TICKET_LEN + 1], other_bytes [32];
    static const char other_client [] = "Yne@$w-vo<fVvi]a<NY6T1ed:M$fCG*[IaLV{hID";
    const ticket_claims_t claims = { CKU_USER, 42, S_EXPIRES };
    const uint64_t now = S_EXPIRES - 1000;
    memcpy (other_bytes, s_key_bytes, sizeof other_bytes);
    other_bytes [31] ^= 1;
    ticket_mac_t *other_key = ticket_mac_new (other_bytes);
    ck_assert_int_eq (ticket_make (s_key, s_client, "demo", &claims, ticket), 0);
    ck_assert_uint_eq (ticket [0], TICKET_FORMAT);
    ck_assert_uint_eq (ticket [1], CKU_USER);
    ck_assert_int_eq (ticket_check (s_key, s_client, "demo", ticket, TICKET_LEN, now, NULL), TICKET_VALID);
    ck_assert_int_eq (ticket_check (other_key, s_client, "demo", ticket, TICKET_LEN, now, NULL), TICKET_INVALID);
    ticket_mac_destroy (&other_key);
    ck_assert_int_eq (ticket_check (s_key, other_client, "demo", ticket, TICKET_LEN, now, NULL), TICKET_INVALID);
    ck_assert_int_eq (ticket_check (s_key, "", "demo", ticket, TICKET_LEN, now, NULL), TICKET_INVALID);
    ck_assert_int_eq (ticket_check (s_key, s_client, "demo2", ticket, TICKET_LEN, now, NULL), TICKET_INVALID);
    ck_assert_int_eq (ticket_check (s_key, s_client, "demo", ticket, TICKET_LEN - 1, now, NULL), TICKET_INVALID);
    ck_assert_int_eq (ticket_check (s_key, s_client, "demo", NULL, TICKET_LEN, now, NULL), TICKET_INVALID);
    ticket [TICKET_LEN] = 0;
    ck_assert_int_eq (ticket_check (s_key, s_client, "demo", ticket, TICKET_LEN + 1, now, NULL), TICKET_INVALID);
    /*  Every byte counts: format, user type, epoch, expiry and MAC.  */
    for (size_t i = 0; i < TICKET_LEN; i++) {
        ticket [i] ^= 0x80;
        ck_assert_msg (ticket_check (s_key, s_client, "demo", ticket, TICKET_LEN, now, NULL) == TICKET_INVALID,
                       "byte %zu changed and the ticket still checks", i);
        ticket [i] ^= 0x80;
    }
    /*  The user type is one byte on the wire.  */
    const ticket_claims_t wide = { 256, 42, S_EXPIRES };
    ck_assert_int_eq (ticket_make (s_key, s_client, "demo", &wide, ticket), -1);
}
END_TEST

/*  Client key and tenant are length-prefixed: with a plain concatenation,
 *  ("ab", "c") and ("a", "bc") (an empty client key on a plaintext link and
 *  a tenant that starts with another client's key, for instance) would
 *  share their tickets.  */
START_TEST (test_ticket_no_ambiguity)
{
    unsigned char ticket [TICKET_LEN];
    const ticket_claims_t claims = { CKU_USER, 1, S_EXPIRES };
    ck_assert_int_eq (ticket_make (s_key, "ab", "c", &claims, ticket), 0);
    ck_assert_int_eq (ticket_check (s_key, "ab", "c", ticket, TICKET_LEN, 0, NULL), TICKET_VALID);
    ck_assert_int_eq (ticket_check (s_key, "a", "bc", ticket, TICKET_LEN, 0, NULL), TICKET_INVALID);
    ck_assert_int_eq (ticket_make (s_key, "", "rqdemo", &claims, ticket), 0);
    ck_assert_int_eq (ticket_check (s_key, "rq", "demo", ticket, TICKET_LEN, 0, NULL), TICKET_INVALID);
}
END_TEST

/*  A ticket is valid strictly before its expiry and expired from it on;
 *  an expired ticket still tells its claims (for the log), never valid.  */
START_TEST (test_ticket_expiry)
{
    unsigned char ticket [TICKET_LEN];
    ticket_claims_t claims = { CKU_SO, 9, 5000 }, got = { 0 };
    ck_assert_int_eq (ticket_make (s_key, s_client, "demo", &claims, ticket), 0);
    ck_assert_int_eq (ticket_check (s_key, s_client, "demo", ticket, TICKET_LEN, 0, &got), TICKET_VALID);
    ck_assert_int_eq (ticket_check (s_key, s_client, "demo", ticket, TICKET_LEN, 4999, &got), TICKET_VALID);
    ck_assert_int_eq (ticket_check (s_key, s_client, "demo", ticket, TICKET_LEN, 5000, &got), TICKET_EXPIRED);
    ck_assert_int_eq (ticket_check (s_key, s_client, "demo", ticket, TICKET_LEN, UINT64_MAX, &got),
                      TICKET_EXPIRED);
    ck_assert_uint_eq (got.user_type, CKU_SO);
    ck_assert_uint_eq (got.epoch, 9);
    ck_assert_uint_eq (got.expires_ms, 5000);
}
END_TEST

int
main (void)
{
    Suite *suite = suite_create ("broker_ticket");
    TCase *tc = tcase_create ("ticket");
    tcase_add_checked_fixture (tc, s_setup, s_teardown);
    tcase_add_test (tc, test_ticket_kat);
    tcase_add_test (tc, test_ticket_binding);
    tcase_add_test (tc, test_ticket_no_ambiguity);
    tcase_add_test (tc, test_ticket_expiry);
    suite_add_tcase (suite, tc);
    return tr_run (suite);
}
