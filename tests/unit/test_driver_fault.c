/*  test_driver_fault.c — the fault driver (shim-drivers/fault) over an
 *  openssl board, through its dispatch table as the broker loads it: results
 *  pass through and verify; flip-every spoils exactly every Nth result;
 *  fail and fail-file fail with CKR_DEVICE_ERROR (the latter only while the
 *  file exists); hang-after blocks a call until the board is closed;
 *  die-after: the dying call blocks, every other call of every session
 *  answers CKR_DEVICE_REMOVED at once and no session opens;
 *  stuck-every fails every Nth call with CKR_DEVICE_ERROR and leaves its
 *  session answering CKR_OPERATION_ACTIVE until it is closed;
 *  delay-ms slows a call; bad settings stop the board.
 */
#include <pthread.h>
#include "test_driver_helpers.h"
#include "test_run.h"

static void *s_dl;
static const cs_driver_t *s_driver;
static EVP_PKEY *s_pkey;
static unsigned char *s_der;
static size_t s_der_len;

static void
s_setup (void)
{
    s_driver = td_load ("fault", &s_dl);
    s_pkey = EVP_RSA_gen (1024);
    ck_assert_ptr_nonnull (s_pkey);
    s_der = th_pkcs8 (s_pkey, &s_der_len);
}

static void
s_teardown (void)
{
    OPENSSL_free (s_der);
    EVP_PKEY_free (s_pkey);
    dlclose (s_dl);
}

/*  Opens a fault board over openssl with settings "k=v" pairs (NULL-ended);
 *  returns NULL when the driver refuses them.  */
static cs_board_t *
s_open (const char *first, ...)
{
    zconfig_t *config = zconfig_new ("root", NULL);
    zconfig_put (config, "inner/type", "openssl");
    va_list args;
    va_start (args, first);
    for (const char *pair = first; pair; pair = va_arg (args, const char *)) {
        char key [64];
        const char *eq = strchr (pair, '=');
        snprintf (key, sizeof key, "%.*s", (int) (eq - pair), pair);
        zconfig_put (config, key, eq + 1);
    }
    va_end (args);
    cs_board_t *board = NULL;
    cs_drv_board_open_fn *open = (cs_drv_board_open_fn *) cs_driver_lookup (s_driver, CS_DRV_BOARD_OPEN);
    int rc = open ("flaky", config, "/tmp", &board);
    zconfig_destroy (&config);
    ck_assert (rc == 0 ? board != NULL : board == NULL);
    return board;
}

static cs_drv_session_t *
s_session (cs_board_t *board)
{
    cs_drv_session_t *session = ((cs_drv_session_open_fn *) cs_driver_lookup (s_driver, CS_DRV_SESSION_OPEN)) (board);
    ck_assert_ptr_nonnull (session);
    return session;
}

static void
s_close (cs_board_t **board, cs_drv_session_t **session)
{
    ((cs_drv_session_close_fn *) cs_driver_lookup (s_driver, CS_DRV_SESSION_CLOSE)) (session);
    ((cs_drv_board_close_fn *) cs_driver_lookup (s_driver, CS_DRV_BOARD_CLOSE)) (board);
    ck_assert (!*board && !*session);
}

/*  Signs a DigestInfo with CKM_RSA_PKCS; sets *ok when OpenSSL verifies.  */
static CK_RV
s_sign (cs_drv_session_t *session, bool *ok)
{
    cs_drv_sign_key_fn *sign = (cs_drv_sign_key_fn *) cs_driver_lookup (s_driver, CS_DRV_SIGN_KEY);
    cs_drv_key_t key = { NULL, 0, s_der, s_der_len, "ks:t" };
    cs_drv_mech_t mech = { .type = CKM_RSA_PKCS };
    uint8_t di [51], sig [512];
    size_t di_len = th_digest_info ("fault", di), sig_len = sizeof sig;
    CK_RV rv = sign (session, &key, &mech, di, di_len, sig, &sig_len);
    *ok = rv == CKR_OK && th_verify_rsa_pkcs1 (s_pkey, di, di_len, sig, sig_len);
    return rv;
}

START_TEST (test_pass_through)
{
    cs_board_t *board = s_open (NULL);
    cs_drv_session_t *session = s_session (board);
    cs_caps_t caps;
    ck_assert_int_eq (((cs_drv_capabilities_fn *) cs_driver_lookup (s_driver, CS_DRV_CAPABILITIES)) (board, &caps), 0);
    ck_assert (caps.flags & CS_CAP_KEY_MATERIAL);
    for (int i = 0; i < 5; i++) {
        bool ok = false;
        ck_assert_uint_eq (s_sign (session, &ok), CKR_OK);
        ck_assert (ok);
    }
    s_close (&board, &session);
}
END_TEST

START_TEST (test_flip_every)
{
    cs_board_t *board = s_open ("flip-every=3", NULL);
    cs_drv_session_t *session = s_session (board);
    for (int i = 1; i <= 9; i++) {
        bool ok = false;
        ck_assert_uint_eq (s_sign (session, &ok), CKR_OK);
        ck_assert_msg (ok == (i % 3 != 0), "result %d: verified %d", i, ok);
    }
    s_close (&board, &session);
}
END_TEST

/*  stuck-every=3: calls 1 and 2 sign; call 3 fails and leaves its session
 *  stuck (CKR_OPERATION_ACTIVE from then on); another session of the board
 *  still works, and so does a fresh one after the stuck one is closed.  */
START_TEST (test_stuck_every)
{
    cs_board_t *board = s_open ("stuck-every=3", NULL);
    cs_drv_session_t *session = s_session (board), *other = s_session (board);
    bool ok = false;
    ck_assert_uint_eq (s_sign (session, &ok), CKR_OK);
    ck_assert (ok);
    ck_assert_uint_eq (s_sign (session, &ok), CKR_OK);
    ck_assert_uint_eq (s_sign (session, &ok), CKR_DEVICE_ERROR);
    for (int i = 0; i < 4; i++)
        ck_assert_uint_eq (s_sign (session, &ok), CKR_OPERATION_ACTIVE);
    ck_assert_uint_eq (s_sign (other, &ok), CKR_OK);                /* call 4 */
    ck_assert (ok);
    ((cs_drv_session_close_fn *) cs_driver_lookup (s_driver, CS_DRV_SESSION_CLOSE)) (&session);
    session = s_session (board);
    ck_assert_uint_eq (s_sign (session, &ok), CKR_OK);              /* call 5 */
    ck_assert (ok);
    ((cs_drv_session_close_fn *) cs_driver_lookup (s_driver, CS_DRV_SESSION_CLOSE)) (&other);
    s_close (&board, &session);
    ck_assert_ptr_null (s_open ("stuck-every=-2", NULL));
}
END_TEST

START_TEST (test_fail_and_fail_file)
{
    bool ok = true;
    cs_board_t *board = s_open ("fail=true", NULL);
    cs_drv_session_t *session = s_session (board);
    ck_assert_uint_eq (s_sign (session, &ok), CKR_DEVICE_ERROR);
    s_close (&board, &session);

    char *dir = th_tmpdir (), path [4200];
    snprintf (path, sizeof path, "%s/fail", dir);
    char setting [4300];
    snprintf (setting, sizeof setting, "fail-file=%s", path);
    board = s_open (setting, NULL);
    session = s_session (board);
    ck_assert_uint_eq (s_sign (session, &ok), CKR_OK);
    ck_assert (ok);
    th_write (dir, "fail", "");
    ck_assert_uint_eq (s_sign (session, &ok), CKR_DEVICE_ERROR);
    ck_assert_int_eq (unlink (path), 0);
    ck_assert_uint_eq (s_sign (session, &ok), CKR_OK);
    ck_assert (ok);
    s_close (&board, &session);
    rmdir (dir);
    free (dir);
}
END_TEST

typedef struct {
    cs_drv_session_t *session;
    CK_RV rv;
    volatile bool done;
} s_call_t;

static void *
s_call_thread (void *arg)
{
    s_call_t *call = arg;
    bool ok;
    call->rv = s_sign (call->session, &ok);
    call->done = true;
    return NULL;
}

START_TEST (test_hang_after)
{
    bool ok = false;
    cs_board_t *board = s_open ("hang-after=1", NULL);
    cs_drv_session_t *session = s_session (board);
    ck_assert_uint_eq (s_sign (session, &ok), CKR_OK);
    ck_assert (ok);
    s_call_t call = { session, CKR_OK, false };
    pthread_t thread;
    ck_assert_int_eq (pthread_create (&thread, NULL, s_call_thread, &call), 0);
    zclock_sleep (200);
    ck_assert (!call.done);                     /* blocked */
    ((cs_drv_board_close_fn *) cs_driver_lookup (s_driver, CS_DRV_BOARD_CLOSE)) (&board);
    pthread_join (thread, NULL);
    ck_assert (call.done);
    ck_assert_uint_eq (call.rv, CKR_DEVICE_REMOVED);
    /*  The session outlives the board's close; its close ends the board.  */
    ((cs_drv_session_close_fn *) cs_driver_lookup (s_driver, CS_DRV_SESSION_CLOSE)) (&session);
}
END_TEST

START_TEST (test_die_after)
{
    bool ok = false;
    cs_board_t *board = s_open ("die-after=1", NULL);
    cs_drv_session_t *session = s_session (board), *other = s_session (board);
    ck_assert_uint_eq (s_sign (session, &ok), CKR_OK);
    ck_assert (ok);
    s_call_t call = { session, CKR_OK, false };
    pthread_t thread;
    ck_assert_int_eq (pthread_create (&thread, NULL, s_call_thread, &call), 0);
    zclock_sleep (200);
    ck_assert (!call.done);                     /* the dying call never returns */
    ck_assert_uint_eq (s_sign (other, &ok), CKR_DEVICE_REMOVED);   /* the device is gone */
    ck_assert (!ok);
    ck_assert_ptr_null (((cs_drv_session_open_fn *) cs_driver_lookup (s_driver, CS_DRV_SESSION_OPEN)) (board));
    ((cs_drv_session_close_fn *) cs_driver_lookup (s_driver, CS_DRV_SESSION_CLOSE)) (&other);
    ((cs_drv_board_close_fn *) cs_driver_lookup (s_driver, CS_DRV_BOARD_CLOSE)) (&board);
    pthread_join (thread, NULL);                /* a test may close the board to end it */
    ck_assert (call.done);
    ck_assert_uint_eq (call.rv, CKR_DEVICE_REMOVED);
    ((cs_drv_session_close_fn *) cs_driver_lookup (s_driver, CS_DRV_SESSION_CLOSE)) (&session);
    /*  die = true: the first call dies.  */
    board = s_open ("die=true", NULL);
    session = s_session (board);
    call = (s_call_t) { session, CKR_OK, false };
    ck_assert_int_eq (pthread_create (&thread, NULL, s_call_thread, &call), 0);
    zclock_sleep (200);
    ck_assert (!call.done);
    ((cs_drv_board_close_fn *) cs_driver_lookup (s_driver, CS_DRV_BOARD_CLOSE)) (&board);
    pthread_join (thread, NULL);
    ck_assert_uint_eq (call.rv, CKR_DEVICE_REMOVED);
    ((cs_drv_session_close_fn *) cs_driver_lookup (s_driver, CS_DRV_SESSION_CLOSE)) (&session);
}
END_TEST

START_TEST (test_delay)
{
    bool ok = false;
    cs_board_t *board = s_open ("delay-ms=120", NULL);
    cs_drv_session_t *session = s_session (board);
    int64_t start = zclock_mono ();
    ck_assert_uint_eq (s_sign (session, &ok), CKR_OK);
    ck_assert (ok);
    ck_assert_int_ge (zclock_mono () - start, 120);
    s_close (&board, &session);
}
END_TEST

START_TEST (test_bad_settings)
{
    ck_assert_ptr_null (s_open ("flip-every=-1", NULL));
    ck_assert_ptr_null (s_open ("fail=maybe", NULL));
    ck_assert_ptr_null (s_open ("hang-after=x", NULL));
    ck_assert_ptr_null (s_open ("die=sometimes", NULL));
    ck_assert_ptr_null (s_open ("die-after=-2", NULL));
    ck_assert_ptr_null (s_open ("inner/type=fault", NULL));
    ck_assert_ptr_null (s_open ("inner/type=nosuchdriver", NULL));
}
END_TEST

int
main (void)
{
    if (!tr_driver_dir_set ())
        return 77;
    Suite *suite = suite_create ("driver_fault");
    TCase *tc = tr_tcase ("fault", s_setup, s_teardown);
    tcase_add_test (tc, test_pass_through);
    tcase_add_test (tc, test_flip_every);
    tcase_add_test (tc, test_stuck_every);
    tcase_add_test (tc, test_fail_and_fail_file);
    tcase_add_test (tc, test_hang_after);
    tcase_add_test (tc, test_die_after);
    tcase_add_test (tc, test_delay);
    tcase_add_test (tc, test_bad_settings);
    suite_add_tcase (suite, tc);
    return tr_run (suite);
}
