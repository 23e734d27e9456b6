/*  test_broker_perjob.c — per-job replies (Request.per_job_replies, the
 *  paper's ARRAY RPC; proto/cryptoserver.proto, issue #8): the whole broker
 *  in-process with two sim boards of tenant demo: "slow" holds board:01 and
 *  takes S_SLOW_MS (times CS_TIME_FACTOR) per operation, "fast" holds
 *  board:02 and takes no card time.  A request with a slow job first and a
 *  fast job second must get the fast job's reply (job_number 2) first and
 *  the slow one's after it; every signature is verified with the PEM the
 *  test made.  Without the flag, or from a protocol 1 client, the same
 *  request is answered once; a request refused as a whole (a limit) is
 *  answered once with job_number 0.  Needs CRYPTOSERVER_DRIVER_DIR.
 */
#include "test_broker_fixture.h"
#include "test_run.h"

#define S_SLOW_MS 1500

static char *s_dir;
static EVP_PKEY *s_slow_key, *s_fast_key;
static broker_config_t *s_config;
static server_t *s_server;
static zsock_t *s_client;
static uint8_t *s_ticket;
static size_t s_ticket_len;
static uint8_t s_di [2][51];

static int
s_time_factor (void)
{
    const char *env = getenv ("CS_TIME_FACTOR");
    return env && atoi (env) > 0 ? atoi (env) : 1;
}

static void
s_setup (void)
{
    s_dir = th_tmpdir ();
    s_slow_key = th_key_pem (s_dir, "slow.pem", 2048);
    s_fast_key = th_key_pem (s_dir, "fast.pem", 2048);
    th_certs (s_dir, "alice", "demo");
    th_keystore (s_dir);
    tb_conf_write (s_dir, "",
        "drivers\n"
        "    slow\n        type = sim\n        key-file = slow.pem\n        key-id = 01\n"
        "        threads = 1\n        tenant = demo\n        latency-ms = %d\n"
        "        call-timeout-ms = 600000\n"
        "    fast\n        type = sim\n        key-file = fast.pem\n        key-id = 02\n"
        "        threads = 1\n        tenant = demo\n        latency-ms = 0\n",
        S_SLOW_MS * s_time_factor ());
    s_server = tb_start (s_dir, &s_config);
    s_client = th_dealer (s_dir, "alice", server_endpoint (s_server));
    s_ticket = th_login_ok (s_client, "1234", &s_ticket_len);
    th_digest_info ("slow job", s_di [0]);
    th_digest_info ("fast job", s_di [1]);
}

static void
s_teardown (void)
{
    free (s_ticket);
    zsock_destroy (&s_client);
    tb_stop (&s_server, &s_config);
    EVP_PKEY_free (s_slow_key);
    EVP_PKEY_free (s_fast_key);
    th_tmpdir_remove (&s_dir);
}

/*  A request: a sign job on board:01 (slow), then one on board:02 (fast).  */
static Cs__Request *
s_slow_then_fast (uint64_t id, bool per_job)
{
    Cs__Request *req = th_request (2, id);
    req->ticket = (ProtobufCBinaryData) { s_ticket_len, s_ticket };
    req->per_job_replies = per_job;
    th_job_crypto (req->jobs [0], true, (const uint8_t *) "board:01", 8, CKM_RSA_PKCS, s_di [0], 51);
    th_job_crypto (req->jobs [1], true, (const uint8_t *) "board:02", 8, CKM_RSA_PKCS, s_di [1], 51);
    return req;
}

/*  Checks that result is a good signature of job `index` (0 slow, 1 fast).  */
static void
s_check_signature (const Cs__Result *result, size_t index)
{
    ck_assert_msg (result->rv == CKR_OK, "job %zu: 0x%lx", index, (unsigned long) result->rv);
    ck_assert_int_eq (result->kind_case, CS__RESULT__KIND_DATA);
    ck_assert (th_verify_rsa_pkcs1 (index ? s_fast_key : s_slow_key, s_di [index], 51,
                                    result->data.data, result->data.len));
}

/*  The fast job's reply leaves as it finishes, before the slow job of the
 *  same request is done; then the slow one's, and nothing more.  */
START_TEST (test_fast_job_answered_first)
{
    Cs__Request *req = s_slow_then_fast (60, true);
    th_send (s_client, req);
    Cs__Reply *first = th_recv (s_client);
    ck_assert_uint_eq (first->request_id, 60);
    ck_assert_uint_eq (first->rv, CKR_OK);
    ck_assert_uint_eq (first->job_number, 2);       /* the fast job, while the slow one runs */
    ck_assert_uint_eq (first->n_results, 1);
    s_check_signature (first->results [0], 1);
    Cs__Reply *second = th_recv (s_client);
    ck_assert_uint_eq (second->request_id, 60);
    ck_assert_uint_eq (second->job_number, 1);
    ck_assert_uint_eq (second->n_results, 1);
    s_check_signature (second->results [0], 0);
    cs__reply__free_unpacked (first, NULL);
    cs__reply__free_unpacked (second, NULL);
    /*  The request is over: the next reply is the next request's.  */
    Cs__Request *hello = th_request (1, 61);
    th_job_hello (hello->jobs [0]);
    Cs__Reply *reply = th_call (s_client, hello);
    ck_assert_uint_eq (reply->job_number, 0);
    ck_assert_uint_eq (reply->n_results, 1);
    cs__reply__free_unpacked (reply, NULL);
    th_request_free (hello);
    th_request_free (req);
}
END_TEST

/*  Without the flag, and from a client of protocol 1 with it, the broker
 *  answers once with both results in job order.  */
START_TEST (test_one_reply_without_the_flag)
{
    for (int old = 0; old < 2; old++) {
        Cs__Request *req = s_slow_then_fast (70 + (uint64_t) old, old);
        if (old)
            req->version_min = req->version_max = 1;
        Cs__Reply *reply = th_call (s_client, req);
        ck_assert_uint_eq (reply->rv, CKR_OK);
        ck_assert_uint_eq (reply->job_number, 0);
        ck_assert_uint_eq (reply->n_results, 2);
        s_check_signature (reply->results [0], 0);
        s_check_signature (reply->results [1], 1);
        cs__reply__free_unpacked (reply, NULL);
        th_request_free (req);
    }
}
END_TEST

/*  A request refused as a whole (a job's data over CS_WIRE_MAX_DATA) gets
 *  one reply for all its jobs, job_number 0, with the limit's CK_RV; its
 *  version is one a client of protocol 1 reads (it maps the limit's CK_RV
 *  instead of seeing a version mismatch: docs/CONTRACTS.md "Wire").  */
START_TEST (test_refused_request_answered_once)
{
    static uint8_t big [CS_WIRE_MAX_DATA + 1];
    for (int old = 0; old < 2; old++) {
        Cs__Request *req = s_slow_then_fast (80 + (uint64_t) old, true);
        if (old)
            req->version_min = req->version_max = 1;
        req->jobs [1]->sign->data = (ProtobufCBinaryData) { sizeof big, big };
        Cs__Reply *reply = th_call (s_client, req);
        ck_assert_uint_eq (reply->rv, CKR_DATA_LEN_RANGE);
        ck_assert_uint_eq (reply->job_number, 0);
        ck_assert_uint_eq (reply->n_results, 0);
        ck_assert_uint_ge (reply->version, req->version_min);
        ck_assert_uint_le (reply->version, req->version_max);
        cs__reply__free_unpacked (reply, NULL);
        th_request_free (req);
    }
}
END_TEST

int
main (void)
{
    if (!tr_driver_dir_set ())
        return 77;
    zsys_init ();
    Suite *suite = suite_create ("broker_perjob");
    TCase *tc = tr_tcase ("per-job replies", s_setup, s_teardown);
    tcase_add_test (tc, test_fast_job_answered_first);
    tcase_add_test (tc, test_one_reply_without_the_flag);
    tcase_add_test (tc, test_refused_request_answered_once);
    suite_add_tcase (suite, tc);
    return tr_run (suite);
}
