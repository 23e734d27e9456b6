/*  test_broker_ticket.c — stateless login tickets (broker/ticket.c): known
 *  answers for the construction of docs/CONTRACTS.md "Login tickets", and
 *  that a ticket checks only for the (ticket key, client key, tenant, user
 *  type) it was made for.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <p11-kit/pkcs11.h>
#include "ticket.h"

/*  The ticket key of the vectors: bytes 00 01 .. 1f.  */
static unsigned char s_key [32];
/*  A client's CURVE public key in Z85 (40 characters).  */
static const char s_client [] = "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7";

static void
s_setup (void)
{
    for (int i = 0; i < 32; i++)
        s_key [i] = (unsigned char) i;
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

/*  Known answers for the ticket construction.  When the construction
 *  changes (for example an expiry or key epoch joins the MAC input), update
 *  the contract, the formula below and these vectors together.
 *
 *  ticket = user_type (1 byte) || HMAC-SHA256 (ticket_key, "cs-ticket-v1" ||
 *           client key (Z85, 40 chars; "" on a plaintext link) || tenant ||
 *           user_type byte)
 *
 *  Computed outside the project with python3:
 *    key = bytes (range (32))
 *    msg = b"cs-ticket-v1" + client.encode () + tenant.encode () + bytes ([ut])
 *    (bytes ([ut]) + hmac.new (key, msg, hashlib.sha256).digest ()).hex ()
 *  and the first MAC again with
 *    printf 'cs-ticket-v1<client>demo\x01' | openssl dgst -sha256 -mac HMAC
 *        -macopt hexkey:000102...1f  */
START_TEST (test_ticket_kat)
{
    static const struct {
        const char *client_key, *tenant;
        unsigned long user_type;
        const char *hex;
    } vectors [] = {
        { s_client, "demo", CKU_USER,
          "01b35060b8de53ca78062dd619b034309cf82c680e1e25f179a73f5630c72ef6c2" },
        { s_client, "demo", CKU_SO,
          "0085ef33eb0f0cce4a61de7be7a5d45d45b99ae130daca0effde87527cf1f55412" },
        { "", "demo", CKU_USER,
          "017b1999ced3b10b76a47ae2c4ee45ec8133bb191bbcd3dc423b7665db8815ca85" },
        { s_client, "other", CKU_USER,
          "011ec7448436eba854ed0c8696a72c590744d2d5223c487389bb10bba28c9dbab6" },
    };
    for (size_t i = 0; i < sizeof vectors / sizeof vectors [0]; i++) {
        unsigned char expect [TICKET_LEN], got [TICKET_LEN];
        s_unhex (vectors [i].hex, expect);
        ck_assert_int_eq (ticket_make (s_key, vectors [i].client_key, vectors [i].tenant,
                                       vectors [i].user_type, got), 0);
        ck_assert_msg (memcmp (got, expect, TICKET_LEN) == 0, "vector %zu differs", i);
        ck_assert (ticket_check (s_key, vectors [i].client_key, vectors [i].tenant,
                                 vectors [i].user_type, expect, TICKET_LEN));
    }
}
END_TEST

/*  A ticket is bound to every input: any other one, a changed byte or a
 *  wrong length fails the check.  */
START_TEST (test_ticket_binding)
{
    unsigned char ticket [TICKET_LEN + 1], other_key [32];
    static const char other_client [] = "Yne@$w-vo<fVvi]a<NY6T1ed:M$fCG*[IaLV{hID";
    memcpy (other_key, s_key, sizeof other_key);
    other_key [31] ^= 1;
    ck_assert_int_eq (ticket_make (s_key, s_client, "demo", CKU_USER, ticket), 0);
    ck_assert_uint_eq (ticket [0], CKU_USER);
    ck_assert (ticket_check (s_key, s_client, "demo", CKU_USER, ticket, TICKET_LEN));
    ck_assert (!ticket_check (other_key, s_client, "demo", CKU_USER, ticket, TICKET_LEN));
    ck_assert (!ticket_check (s_key, other_client, "demo", CKU_USER, ticket, TICKET_LEN));
    ck_assert (!ticket_check (s_key, "", "demo", CKU_USER, ticket, TICKET_LEN));
    ck_assert (!ticket_check (s_key, s_client, "demo2", CKU_USER, ticket, TICKET_LEN));
    ck_assert (!ticket_check (s_key, s_client, "demo", CKU_SO, ticket, TICKET_LEN));
    ck_assert (!ticket_check (s_key, s_client, "demo", CKU_USER, ticket, TICKET_LEN - 1));
    ticket [TICKET_LEN] = 0;
    ck_assert (!ticket_check (s_key, s_client, "demo", CKU_USER, ticket, TICKET_LEN + 1));
    for (size_t i = 0; i < TICKET_LEN; i++) {
        ticket [i] ^= 0x80;
        ck_assert_msg (!ticket_check (s_key, s_client, "demo", CKU_USER, ticket, TICKET_LEN),
                       "byte %zu changed and the ticket still checks", i);
        ticket [i] ^= 0x80;
    }
    /*  The user type is one byte on the wire.  */
    ck_assert_int_eq (ticket_make (s_key, s_client, "demo", 256, ticket), -1);
    ck_assert (!ticket_check (s_key, s_client, "demo", 256, ticket, TICKET_LEN));
}
END_TEST

int
main (void)
{
    Suite *suite = suite_create ("broker_ticket");
    TCase *tc = tcase_create ("ticket");
    tcase_add_checked_fixture (tc, s_setup, NULL);
    tcase_add_test (tc, test_ticket_kat);
    tcase_add_test (tc, test_ticket_binding);
    suite_add_tcase (suite, tc);
    SRunner *runner = srunner_create (suite);
    srunner_run_all (runner, CK_NORMAL);
    int failed = srunner_ntests_failed (runner);
    srunner_free (runner);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
