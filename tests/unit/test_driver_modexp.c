/*  test_driver_modexp.c — raw modular exponentiation (CS_DRV_MODEXP,
 *  issue #12) on the gmp, sim and openssl boards through their dispatch
 *  tables (dlopen), against known answers computed outside the project
 *  (python3 pow() on an openssl genpkey key: test_driver_modexp_kat.h):
 *  a base above an odd 1024-bit modulus, an even 2048-bit modulus, the
 *  exponent 0 and modulus 1, RSA CRT with and without e, and the refusals
 *  (modulus 0, over 8192 bits, a wrong qInv, a short buffer).  The gmp
 *  unit's fault injection (gmp_modexp.c, linked in) shows that a faulty
 *  CRT half is caught and not released.
 */
#include "test_driver_helpers.h"
#include "test_run.h"
#include "cs_util.h"
#include "gmp_modexp.h"
#include "test_driver_modexp_kat.h"

typedef td_board_t s_drv_t;

static char *s_dir;                     /* the sim board's key */
static const char *const s_types [] = { "gmp", "sim", "openssl" };
#define S_TYPES 3

static void
s_open (const char *type, s_drv_t *drv)
{
    zconfig_t *config = zconfig_new ("root", NULL);
    if (streq (type, "sim")) {
        zconfig_put (config, "key-file", "key.pem");
        zconfig_put (config, "key-id", "42");
        zconfig_put (config, "latency-ms", "1");
        zconfig_put (config, "threads", "1");
        zconfig_put (config, "coprocessors", "1");
    }
    td_open (drv, type, type, config, s_dir);
    zconfig_destroy (&config);
    ck_assert_msg (drv->modexp != NULL, "%s has no CS_DRV_MODEXP", type);
    cs_caps_t caps = { 0 };
    cs_drv_capabilities_fn *caps_fn = (cs_drv_capabilities_fn *) cs_driver_lookup (drv->driver, CS_DRV_CAPABILITIES);
    ck_assert_int_eq (caps_fn (drv->board, &caps), 0);
    ck_assert_msg (caps.flags & CS_CAP_MODEXP, "%s does not say CS_CAP_MODEXP", type);
}

/*  Hex to bytes (static buffers, one per slot).  */
typedef struct {
    unsigned char bytes [1100];
    size_t len;
} s_num_t;

static s_num_t
s_hex (const char *hex)
{
    s_num_t num = { { 0 }, 0 };
    long len = cs_hex_decode (hex, num.bytes, sizeof num.bytes);
    ck_assert_int_gt (len, 0);
    num.len = (size_t) len;
    return num;
}

/*  Runs op and compares the result with the expected hex.  */
static void
s_expect (s_drv_t *drv, const cs_modexp_t *op, const char *expected, const char *what)
{
    unsigned char out [2048];
    size_t out_len = sizeof out;
    s_num_t want = s_hex (expected);
    CK_RV rv = drv->modexp (drv->session, op, out, &out_len);
    ck_assert_msg (rv == CKR_OK, "%s: %s: %s", drv->driver->type, what, cs_rv_name (rv));
    ck_assert_msg (out_len == want.len && memcmp (out, want.bytes, want.len) == 0,
                   "%s: %s: wrong result (%zu bytes)", drv->driver->type, what, out_len);
}

static CK_RV
s_run (s_drv_t *drv, const cs_modexp_t *op, size_t capacity)
{
    unsigned char out [2048];
    size_t out_len = capacity;
    return drv->modexp (drv->session, op, out, &out_len);
}

static s_num_t s_p, s_q, s_dp, s_dq, s_qinv, s_e, s_c;

static cs_modexp_t
s_crt_op (bool with_e)
{
    return (cs_modexp_t) { .base = s_c.bytes, .base_len = s_c.len,
                           .p = s_p.bytes, .p_len = s_p.len, .q = s_q.bytes, .q_len = s_q.len,
                           .dp = s_dp.bytes, .dp_len = s_dp.len, .dq = s_dq.bytes, .dq_len = s_dq.len,
                           .qinv = s_qinv.bytes, .qinv_len = s_qinv.len,
                           .public_exponent = with_e ? s_e.bytes : NULL, .public_exponent_len = with_e ? s_e.len : 0 };
}

static void
s_crt_values (void)
{
    s_p = s_hex (S_P);
    s_q = s_hex (S_Q);
    s_dp = s_hex (S_DP);
    s_dq = s_hex (S_DQ);
    s_qinv = s_hex (S_QINV);
    s_e = s_hex (S_E);
    s_c = s_hex (S_C);
}

START_TEST (test_plain_known_answers)
{
    s_drv_t drv = { 0 };
    s_open (s_types [_i], &drv);
    s_num_t m = s_hex (S_M), x = s_hex (S_X), b = s_hex (S_B);
    cs_modexp_t op = { .base = b.bytes, .base_len = b.len, .exponent = x.bytes, .exponent_len = x.len,
                       .modulus = m.bytes, .modulus_len = m.len };
    s_expect (&drv, &op, S_R, "1024-bit odd modulus, base above it");
    s_num_t me = s_hex (S_ME), xe = s_hex (S_XE), be = s_hex (S_BE);
    op = (cs_modexp_t) { .base = be.bytes, .base_len = be.len, .exponent = xe.bytes, .exponent_len = xe.len,
                         .modulus = me.bytes, .modulus_len = me.len };
    s_expect (&drv, &op, S_RE, "2048-bit even modulus");
    /*  Small cases: 2^10 mod 1000 = 24 in the modulus' 2 bytes; x^0 = 1;
        anything mod 1 = 0; a modulus with leading zeros counts its
        significant bytes only.  */
    unsigned char two = 2, ten = 10, thousand [] = { 0x00, 0x03, 0xe8 }, one = 1;
    op = (cs_modexp_t) { .base = &two, .base_len = 1, .exponent = &ten, .exponent_len = 1,
                         .modulus = thousand, .modulus_len = 3 };
    s_expect (&drv, &op, "0018", "2^10 mod 1000");
    op.exponent_len = 0;
    op.exponent = (const unsigned char *) "";
    s_expect (&drv, &op, "0001", "2^0 mod 1000");
    op = (cs_modexp_t) { .base = &two, .base_len = 1, .exponent = &ten, .exponent_len = 1,
                         .modulus = &one, .modulus_len = 1 };
    s_expect (&drv, &op, "00", "2^10 mod 1");
    td_close (&drv);
}
END_TEST

START_TEST (test_plain_refusals)
{
    s_drv_t drv = { 0 };
    s_open (s_types [_i], &drv);
    unsigned char two = 2, zero [2] = { 0, 0 }, big [1025];
    memset (big, 0xff, sizeof big);
    cs_modexp_t op = { .base = &two, .base_len = 1, .exponent = &two, .exponent_len = 1,
                       .modulus = zero, .modulus_len = 2 };
    ck_assert_uint_eq (s_run (&drv, &op, 2048), CKR_MECHANISM_PARAM_INVALID);
    op.modulus = big;
    op.modulus_len = sizeof big;            /* 8200 bits */
    ck_assert_uint_eq (s_run (&drv, &op, 2048), CKR_DATA_LEN_RANGE);
    op.modulus_len = 1024;                  /* 8192 bits: taken */
    ck_assert_uint_eq (s_run (&drv, &op, 1023), CKR_BUFFER_TOO_SMALL);
    ck_assert_uint_eq (s_run (&drv, &op, 1024), CKR_OK);
    td_close (&drv);
}
END_TEST

START_TEST (test_crt_known_answers)
{
    s_drv_t drv = { 0 };
    s_open (s_types [_i], &drv);
    s_crt_values ();
    cs_modexp_t op = s_crt_op (true);
    s_expect (&drv, &op, S_CRT, "RSA-1024 CRT, checked with e");
    op = s_crt_op (false);
    s_expect (&drv, &op, S_CRT, "RSA-1024 CRT, checked per prime");
    /*  A wrong qInv: the recombination is wrong, and the check says so.  */
    s_qinv.bytes [s_qinv.len - 1] ^= 2;
    op = s_crt_op (true);
    ck_assert_uint_eq (s_run (&drv, &op, 2048), CKR_DEVICE_ERROR);
    op = s_crt_op (false);
    ck_assert_uint_eq (s_run (&drv, &op, 2048), CKR_MECHANISM_PARAM_INVALID);
    s_qinv.bytes [s_qinv.len - 1] ^= 2;
    /*  An even "prime" is not an RSA key.  */
    s_p.bytes [s_p.len - 1] ^= 1;
    op = s_crt_op (false);
    ck_assert_uint_eq (s_run (&drv, &op, 2048), CKR_MECHANISM_PARAM_INVALID);
    s_p.bytes [s_p.len - 1] ^= 1;
    op = s_crt_op (true);
    ck_assert_uint_eq (s_run (&drv, &op, 127), CKR_BUFFER_TOO_SMALL);
    td_close (&drv);
}
END_TEST

/*  gmp_modexp.c linked in: a bit flipped in the mod-p half after its
 *  exponentiation is caught by either check and nothing is written.  */
START_TEST (test_gmp_fault_caught)
{
    s_crt_values ();
    for (int with_e = 0; with_e < 2; with_e++) {
        unsigned char out [128];
        size_t out_len = sizeof out;
        memset (out, 0xa5, sizeof out);
        cs_modexp_t op = s_crt_op (with_e);
        CK_RV rv = gmp_modexp_fault (&op, out, &out_len);
        ck_assert_uint_eq (rv, with_e ? CKR_DEVICE_ERROR : CKR_MECHANISM_PARAM_INVALID);
        for (size_t i = 0; i < sizeof out; i++)
            ck_assert_uint_eq (out [i], 0xa5);
        out_len = sizeof out;
        ck_assert_uint_eq (gmp_modexp (&op, "test", out, &out_len), CKR_OK);
        ck_assert_uint_eq (out_len, 128);
    }
}
END_TEST

static void
s_setup (void)
{
    s_dir = th_tmpdir ();
    EVP_PKEY_free (th_key_pem (s_dir, "key.pem", 1024));
}

static void
s_teardown (void)
{
    th_tmpdir_remove (&s_dir);
}

int
main (void)
{
    if (!tr_driver_dir_set ())
        return 77;
    Suite *suite = suite_create ("driver_modexp");
    TCase *tc = tcase_create ("modexp");
    tcase_add_unchecked_fixture (tc, s_setup, s_teardown);
    tcase_set_timeout (tc, 60);
    tcase_add_loop_test (tc, test_plain_known_answers, 0, S_TYPES);
    tcase_add_loop_test (tc, test_plain_refusals, 0, S_TYPES);
    tcase_add_loop_test (tc, test_crt_known_answers, 0, S_TYPES);
    tcase_add_test (tc, test_gmp_fault_caught);
    suite_add_tcase (suite, tc);
    return tr_run (suite);
}
