/*  test_broker_cross_check.c — the cross-check (broker/boards/cross_check.h): the
 *  comparison rule for every combination, and pairs run through the module
 *  as the frontend runs them: a match releases the primary's result; a
 *  flipped signature on either side releases the right one and takes the
 *  wrong board out of rotation; a failed twin skips the check; an
 *  undecidable decryption mismatch asks for a third board that then decides.
 *  Results are made with OpenSSL here, not by a board.
 */
#include <openssl/rsa.h>
#include "test_broker_helpers.h"
#include "board_watch.h"
#include "cross_check.h"
#include "health.h"

START_TEST (test_verdict)
{
    const verify_outcome_t S = VERIFY_SKIPPED, O = VERIFY_OK, W = VERIFY_WRONG;
    /*  Deterministic: equal bytes match whatever else.  */
    ck_assert_int_eq (cross_check_verdict (false, true, W, W), CROSS_MATCH);
    ck_assert_int_eq (cross_check_verdict (false, true, S, S), CROSS_MATCH);
    /*  Deterministic mismatch: the one that verifies wins.  */
    ck_assert_int_eq (cross_check_verdict (false, false, O, W), CROSS_A);
    ck_assert_int_eq (cross_check_verdict (false, false, W, O), CROSS_B);
    ck_assert_int_eq (cross_check_verdict (false, false, O, S), CROSS_A);
    ck_assert_int_eq (cross_check_verdict (false, false, S, O), CROSS_B);
    /*  ... neither can be told right: a third board.  */
    ck_assert_int_eq (cross_check_verdict (false, false, S, S), CROSS_UNDECIDED);
    ck_assert_int_eq (cross_check_verdict (false, false, W, W), CROSS_UNDECIDED);
    ck_assert_int_eq (cross_check_verdict (false, false, S, W), CROSS_UNDECIDED);
    ck_assert_int_eq (cross_check_verdict (false, false, O, O), CROSS_UNDECIDED);
    /*  Randomised: compared by verification only; bytes never equal.  */
    ck_assert_int_eq (cross_check_verdict (true, false, O, O), CROSS_MATCH);
    ck_assert_int_eq (cross_check_verdict (true, true, O, O), CROSS_MATCH);
    ck_assert_int_eq (cross_check_verdict (true, false, O, W), CROSS_A);
    ck_assert_int_eq (cross_check_verdict (true, false, W, O), CROSS_B);
    ck_assert_int_eq (cross_check_verdict (true, true, W, O), CROSS_B);
    ck_assert_int_eq (cross_check_verdict (true, false, W, W), CROSS_UNDECIDED);
    ck_assert_int_eq (cross_check_verdict (true, false, S, W), CROSS_UNDECIDED);
    ck_assert_int_eq (cross_check_verdict (true, false, S, S), CROSS_SKIP);
    ck_assert_int_eq (cross_check_verdict (true, false, O, S), CROSS_SKIP);
    ck_assert (cross_check_randomised (CKM_RSA_PKCS_PSS) && cross_check_randomised (CKM_ECDSA));
    ck_assert (!cross_check_randomised (CKM_RSA_PKCS) && !cross_check_randomised (CKM_EDDSA));
}
END_TEST

/*  Three boards, their health, a scheduler, a watch and a cross-check of
 *  every job; an RSA-2048 key as material.  */
static board_t s_boards [3], *s_board_ptrs [3];
static health_t *s_health;
static scheduler_t *s_scheduler;
static board_watch_t *s_watch;
static cross_check_t *s_cross;
static EVP_PKEY *s_rsa;
static uint8_t *s_der;
static size_t s_der_len;

static void
s_setup (void)
{
    const char *names [3] = { "a", "b", "c" };
    s_scheduler = scheduler_new ();
    ck_assert_ptr_nonnull (s_scheduler);
    for (size_t b = 0; b < 3; b++) {
        s_boards [b] = (board_t) { .name = (char *) names [b], .probe_min_ms = 100, .probe_max_ms = 1000,
                                   .call_timeout_ms = 1000 };
        s_board_ptrs [b] = &s_boards [b];
        ck_assert_int_eq (scheduler_board_add (s_scheduler, names [b]), (int) b);
        ck_assert_int_ge (scheduler_worker_add (s_scheduler, b), 0);
    }
    s_health = health_new (3, 3);
    s_watch = board_watch_new (s_health, s_scheduler, NULL, s_board_ptrs, 3, 3);
    s_cross = cross_check_new (100, s_board_ptrs, 3, s_watch, NULL);
    ck_assert (s_health && s_watch && s_cross);
    s_rsa = EVP_RSA_gen (2048);
    ck_assert_ptr_nonnull (s_rsa);
    s_der = th_pkcs8 (s_rsa, &s_der_len);
}

static void
s_teardown (void)
{
    cross_check_destroy (&s_cross);
    ck_assert_ptr_null (s_cross);
    board_watch_destroy (&s_watch);
    health_destroy (&s_health);
    scheduler_destroy (&s_scheduler);
    EVP_PKEY_free (s_rsa);
    OPENSSL_free (s_der);
}

/*  An RSA private operation with OpenSSL into a malloc'd buffer.  */
static uint8_t *
s_rsa_op (bool sign, const uint8_t *in, size_t in_len, size_t *len_p)
{
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new (s_rsa, NULL);
    uint8_t *out = malloc (512);
    *len_p = 512;
    ck_assert (ctx && out && (sign ? EVP_PKEY_sign_init (ctx) : EVP_PKEY_encrypt_init (ctx)) > 0
               && EVP_PKEY_CTX_set_rsa_padding (ctx, RSA_PKCS1_PADDING) > 0);
    ck_assert_int_gt (sign ? EVP_PKEY_sign (ctx, out, len_p, in, in_len)
                           : EVP_PKEY_encrypt (ctx, out, len_p, in, in_len), 0);
    EVP_PKEY_CTX_free (ctx);
    return out;
}

static uint8_t *
s_copy (const uint8_t *data, size_t len, bool flip)
{
    uint8_t *copy = malloc (len);
    ck_assert_ptr_nonnull (copy);
    memcpy (copy, data, len);
    if (flip)
        copy [len / 2] ^= 0x01;
    return copy;
}

/*  The item of a test: CKM_RSA_PKCS sign or decrypt of `data`.  */
typedef struct {
    work_item_t item;
} s_job_t;

static void
s_job_init (s_job_t *j, bool sign, const uint8_t *data, size_t len)
{
    memset (j, 0, sizeof *j);
    j->item.request = j;                /* a client item */
    j->item.kind = sign ? WORK_SIGN : WORK_DECRYPT;
    j->item.mech.type = CKM_RSA_PKCS;
    j->item.in = data;
    j->item.in_len = len;
    j->item.key = (cs_drv_key_t) { NULL, 0, s_der, s_der_len, NULL };
    j->item.board = 0;
}

/*  Runs a pair: the primary on board a with result pa, the twin on board b
 *  with result pb (NULL: the twin failed); the primary comes back first
 *  when primary_first.  Returns what cross_check_back handed back.  */
static work_item_t *
s_pair (s_job_t *j, uint8_t *pa, size_t la, uint8_t *pb, size_t lb, bool primary_first, bool *rerun_p)
{
    work_item_t *twin = cross_check_twin (s_cross, &j->item);
    ck_assert_ptr_nonnull (twin);
    ck_assert (cross_check_is_twin (twin) && !cross_check_is_twin (&j->item));
    ck_assert (twin->tried == 1 && twin->key.pkcs8 == s_der && twin->request == j);
    ck_assert_ptr_null (cross_check_twin (s_cross, &j->item));    /* one twin only */
    twin->board = 1;
    j->item.rv = CKR_OK;
    j->item.out = pa;
    j->item.out_len = la;
    twin->rv = pb ? CKR_OK : CKR_DEVICE_ERROR;
    twin->out = pb;
    twin->out_len = pb ? lb : 0;
    bool rerun = true;
    work_item_t *back;
    if (primary_first) {
        ck_assert_ptr_null (cross_check_back (s_cross, &j->item, &rerun));
        back = cross_check_back (s_cross, twin, &rerun);
    }
    else {
        ck_assert_ptr_null (cross_check_back (s_cross, twin, &rerun));
        back = cross_check_back (s_cross, &j->item, &rerun);
    }
    ck_assert_ptr_eq (back, &j->item);
    *rerun_p = rerun;
    return back;
}

START_TEST (test_pairs)
{
    uint8_t di [51];
    size_t di_len = th_digest_info ("cross", di), len = 0;
    uint8_t *right = s_rsa_op (true, di, di_len, &len);
    s_job_t j;
    bool rerun;
    /*  Both right: released as it is, both boards stay.  */
    s_job_init (&j, true, di, di_len);
    s_pair (&j, s_copy (right, len, false), len, s_copy (right, len, false), len, true, &rerun);
    ck_assert (!rerun && j.item.rv == CKR_OK && j.item.out_len == len && !memcmp (j.item.out, right, len));
    ck_assert_ptr_null (j.item.cross);
    free (j.item.out);
    ck_assert (scheduler_board_up (s_scheduler, 0) && scheduler_board_up (s_scheduler, 1));
    /*  The twin failed: skipped, the primary's result unchanged.  */
    s_job_init (&j, true, di, di_len);
    uint8_t *mine = s_copy (right, len, false);
    s_pair (&j, mine, len, NULL, 0, false, &rerun);
    ck_assert (!rerun && j.item.rv == CKR_OK && j.item.out == mine);
    free (mine);
    ck_assert (scheduler_board_up (s_scheduler, 0) && scheduler_board_up (s_scheduler, 1));
    /*  The twin's board flipped a bit: the primary's goes out, board b is out.  */
    s_job_init (&j, true, di, di_len);
    s_pair (&j, s_copy (right, len, false), len, s_copy (right, len, true), len, true, &rerun);
    ck_assert (!rerun && j.item.rv == CKR_OK && !memcmp (j.item.out, right, len));
    free (j.item.out);
    ck_assert (scheduler_board_up (s_scheduler, 0) && !scheduler_board_up (s_scheduler, 1));
    /*  The primary's board flipped it: the twin's right result goes out
        instead (a wrong result is never released), board a is out.  */
    s_job_init (&j, true, di, di_len);
    s_pair (&j, s_copy (right, len, true), len, s_copy (right, len, false), len, false, &rerun);
    ck_assert (!rerun && j.item.rv == CKR_OK && j.item.out_len == len && !memcmp (j.item.out, right, len));
    free (j.item.out);
    ck_assert (!scheduler_board_up (s_scheduler, 0));
    free (right);
}
END_TEST

START_TEST (test_third_board)
{
    uint8_t secret [32] = { 1, 2, 3 };
    size_t ct_len = 0;
    uint8_t *ct = s_rsa_op (false, secret, sizeof secret, &ct_len);
    s_job_t j;
    bool rerun;
    /*  A PKCS#1 v1.5 decryption cannot be verified: a mismatch asks for a
        third board, never a or b, and nothing is released meanwhile.  */
    s_job_init (&j, false, ct, ct_len);
    work_item_t *item = s_pair (&j, s_copy (secret, 32, true), 32, s_copy (secret, 32, false), 32, true, &rerun);
    ck_assert (rerun);
    ck_assert_ptr_null (item->out);
    ck_assert_uint_eq (item->tried & 2, 2);     /* b; the frontend's re-run adds a */
    ck_assert_ptr_nonnull (item->cross);
    ck_assert (scheduler_board_up (s_scheduler, 0) && scheduler_board_up (s_scheduler, 1));
    /*  Board c agrees with b: released, board a was wrong.  */
    item->board = 2;
    item->rv = CKR_OK;
    item->out = s_copy (secret, 32, false);
    item->out_len = 32;
    ck_assert_ptr_eq (cross_check_back (s_cross, item, &rerun), item);
    ck_assert (!rerun && item->rv == CKR_OK && !memcmp (item->out, secret, 32) && !item->cross);
    free (item->out);
    ck_assert (!scheduler_board_up (s_scheduler, 0) && scheduler_board_up (s_scheduler, 1));
    /*  No third board (the re-run failed): CKR_DEVICE_ERROR, nothing out.  */
    s_job_init (&j, false, ct, ct_len);
    item = s_pair (&j, s_copy (secret, 32, false), 32, s_copy (secret, 32, true), 32, true, &rerun);
    ck_assert (rerun);
    item->rv = CKR_DEVICE_ERROR;
    ck_assert_ptr_eq (cross_check_back (s_cross, item, &rerun), item);
    ck_assert (!rerun && item->rv == CKR_DEVICE_ERROR && !item->out && !item->cross);
    /*  A third result that agrees with neither: CKR_DEVICE_ERROR.  */
    s_job_init (&j, false, ct, ct_len);
    item = s_pair (&j, s_copy (secret, 32, false), 32, s_copy (secret, 32, true), 32, true, &rerun);
    item->board = 2;
    item->rv = CKR_OK;
    item->out = s_copy (secret, 31, false);
    item->out_len = 31;
    ck_assert_ptr_eq (cross_check_back (s_cross, item, &rerun), item);
    ck_assert (!rerun && item->rv == CKR_DEVICE_ERROR && !item->cross);
    free (ct);
}
END_TEST

int
main (void)
{
    Suite *suite = suite_create ("broker_cross_check");
    TCase *tc = tcase_create ("cross_check");
    tcase_add_checked_fixture (tc, s_setup, s_teardown);
    tcase_set_timeout (tc, 60);
    tcase_add_test (tc, test_verdict);
    tcase_add_test (tc, test_pairs);
    tcase_add_test (tc, test_third_board);
    suite_add_tcase (suite, tc);
    SRunner *runner = srunner_create (suite);
    srunner_run_all (runner, CK_NORMAL);
    int failed = srunner_ntests_failed (runner);
    srunner_free (runner);
    return failed ? 1 : 0;
}
