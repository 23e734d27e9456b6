/*  test_broker_mechroute.c — routing by (key, mechanism) (docs/CONTRACTS.md
 *  "Routing"): the whole broker in-process with three sim boards.  sim0 and
 *  sim1 hold the same RSA key (board:01); sim0 has only CKM_RSA_PKCS
 *  (the sim driver's "mechanisms"), so a PSS or OAEP job on board:01 must
 *  never reach it.  sim2 holds board:02 and has only CKM_RSA_PKCS: a PSS or
 *  OAEP job there has no board and is CKR_MECHANISM_INVALID without reaching
 *  it.  Also keys/rsa-min-bits (3072 here): reported in HelloResult and
 *  enforced on GenerateKeyPair jobs; secret-key jobs (SymJob) only on boards
 *  that run them.  Needs CRYPTOSERVER_DRIVER_DIR.
 */
#include "test_broker_fixture.h"
#include "test_run.h"

static char *s_dir;
static EVP_PKEY *s_key;
static broker_config_t *s_config;
static server_t *s_server;
static zsock_t *s_client;
static uint8_t *s_ticket;
static size_t s_ticket_len;

static void
s_setup (void)
{
    s_dir = th_tmpdir ();
    s_key = th_key_pem (s_dir, "key.pem", 2048);
    th_certs (s_dir, "alice", "demo");
    th_keystore (s_dir);
    tb_conf_write (s_dir, "",
        "keys\n    rsa-min-bits = 3072\n"
        "drivers\n"
        "    sim0\n        type = sim\n        key-file = key.pem\n        key-id = 01\n"
        "        threads = 2\n        tenant = demo\n        mechanisms = CKM_RSA_PKCS\n"
        "    sim1\n        type = sim\n        key-file = key.pem\n        key-id = 01\n"
        "        threads = 2\n        tenant = demo\n"
        "    sim2\n        type = sim\n        key-file = key.pem\n        key-id = 02\n"
        "        threads = 1\n        tenant = demo\n        mechanisms = CKM_RSA_PKCS\n");
    s_server = tb_start (s_dir, &s_config);
    s_client = th_dealer (s_dir, "alice", server_endpoint (s_server));
    s_ticket = th_login_ok (s_client, "1234", &s_ticket_len);
}

static void
s_teardown (void)
{
    free (s_ticket);
    zsock_destroy (&s_client);
    tb_stop (&s_server, &s_config);
    EVP_PKEY_free (s_key);
    th_tmpdir_remove (&s_dir);
}

static uint64_t
s_jobs (const char *board)
{
    return th_board_jobs (server_frontend (s_server), board, NULL);
}

/*  PSS on board:01: every job runs on sim1 and verifies; sim0 gets none.
 *  CKM_RSA_PKCS on board:01 still uses both boards.  */
START_TEST (test_pss_skips_the_board_without_it)
{
    enum { N = 24 };
    static uint8_t digest [N][32], di [N][51];
    Cs__Request *req = th_request (2 * N, 50);
    req->ticket = (ProtobufCBinaryData) { s_ticket_len, s_ticket };
    for (size_t i = 0; i < N; i++) {
        char msg [32];
        snprintf (msg, sizeof msg, "message %zu", i);
        SHA256 ((const uint8_t *) msg, strlen (msg), digest [i]);
        Cs__Mechanism *pss = th_job_crypto (req->jobs [i], true, (const uint8_t *) "board:01", 8,
                                            CKM_RSA_PKCS_PSS, digest [i], 32);
        pss->hash = CKM_SHA256; pss->mgf = CKG_MGF1_SHA256; pss->salt_len = 32;
        th_digest_info (msg, di [i]);
        th_job_crypto (req->jobs [N + i], true, (const uint8_t *) "board:01", 8, CKM_RSA_PKCS, di [i], 51);
    }
    Cs__Reply *reply = th_call (s_client, req);
    ck_assert_uint_eq (reply->rv, CKR_OK);
    ck_assert_uint_eq (reply->n_results, 2 * N);
    for (size_t i = 0; i < N; i++) {
        ck_assert_msg (reply->results [i]->rv == CKR_OK, "PSS job %zu: 0x%lx", i,
                       (unsigned long) reply->results [i]->rv);
        ck_assert (th_verify_rsa_pss (s_key, digest [i], reply->results [i]->data.data,
                                      reply->results [i]->data.len));
        ck_assert_uint_eq (reply->results [N + i]->rv, CKR_OK);
        ck_assert (th_verify_rsa_pkcs1 (s_key, di [i], 51, reply->results [N + i]->data.data,
                                        reply->results [N + i]->data.len));
    }
    uint64_t errors0 = 1, errors1 = 1;
    uint64_t jobs0 = th_board_jobs (server_frontend (s_server), "sim0", &errors0);
    uint64_t jobs1 = th_board_jobs (server_frontend (s_server), "sim1", &errors1);
    ck_assert_uint_eq (errors0 + errors1, 0);
    ck_assert_uint_ge (jobs1, N);               /* all PSS jobs */
    ck_assert_uint_eq (jobs0 + jobs1, 2 * N);
    ck_assert_uint_le (jobs0, N);               /* only CKM_RSA_PKCS jobs */
    cs__reply__free_unpacked (reply, NULL);
    th_request_free (req);
}
END_TEST

/*  board:02 lives only on sim2, which lacks PSS and OAEP: those jobs are
 *  CKR_MECHANISM_INVALID and never reach it; CKM_RSA_PKCS works.  */
START_TEST (test_no_board_runs_it)
{
    uint8_t digest [32], di [51], ct [256];
    SHA256 ((const uint8_t *) "x", 1, digest);
    th_digest_info ("x", di);
    size_t ct_len = th_rsa_encrypt (s_key, EVP_sha256 (), NULL, "oaep secret", ct, sizeof ct);
    Cs__Request *req = th_request (3, 51);
    req->ticket = (ProtobufCBinaryData) { s_ticket_len, s_ticket };
    Cs__Mechanism *pss = th_job_crypto (req->jobs [0], true, (const uint8_t *) "board:02", 8,
                                        CKM_RSA_PKCS_PSS, digest, 32);
    pss->hash = CKM_SHA256; pss->mgf = CKG_MGF1_SHA256; pss->salt_len = 32;
    Cs__Mechanism *oaep = th_job_crypto (req->jobs [1], false, (const uint8_t *) "board:02", 8,
                                         CKM_RSA_PKCS_OAEP, ct, ct_len);
    oaep->hash = CKM_SHA256; oaep->mgf = CKG_MGF1_SHA256;
    th_job_crypto (req->jobs [2], true, (const uint8_t *) "board:02", 8, CKM_RSA_PKCS, di, 51);
    Cs__Reply *reply = th_call (s_client, req);
    ck_assert_uint_eq (reply->n_results, 3);
    ck_assert_uint_eq (reply->results [0]->rv, CKR_MECHANISM_INVALID);
    ck_assert_uint_eq (reply->results [1]->rv, CKR_MECHANISM_INVALID);
    ck_assert_uint_eq (reply->results [2]->rv, CKR_OK);
    ck_assert (th_verify_rsa_pkcs1 (s_key, di, 51, reply->results [2]->data.data, reply->results [2]->data.len));
    ck_assert_uint_eq (s_jobs ("sim2"), 1);     /* only the CKM_RSA_PKCS job reached it */
    cs__reply__free_unpacked (reply, NULL);
    th_request_free (req);
}
END_TEST

/*  A SymJob (issue #10) goes only to boards whose driver runs secret-key
 *  mechanisms (CS_DRV_SYMMETRIC) and lists the mechanism: no sim board
 *  does, so a valid job is CKR_MECHANISM_INVALID and reaches no board; the
 *  broker's own checks (symjobs.h) answer bad sizes first, and a job
 *  without a ticket is CKR_USER_NOT_LOGGED_IN.  */
START_TEST (test_sym_needs_a_board_that_runs_it)
{
    static uint8_t key [32], iv [16], data [32];
    Cs__Request *req = th_request (4, 52);
    Cs__SymJob *sym [4];
    for (size_t i = 0; i < 4; i++) {
        sym [i] = calloc (1, sizeof *sym [i]);
        cs__sym_job__init (sym [i]);
        sym [i]->mechanism = CKM_AES_CBC;
        sym [i]->operation = 1;
        sym [i]->key_value = (ProtobufCBinaryData) { sizeof key, key };
        sym [i]->iv = (ProtobufCBinaryData) { sizeof iv, iv };
        sym [i]->data = (ProtobufCBinaryData) { sizeof data, data };
        req->jobs [i]->kind_case = CS__JOB__KIND_SYM;
        req->jobs [i]->sym = sym [i];
    }
    sym [1]->key_value.len = 20;                /* no AES key size */
    sym [2]->iv.len = 8;                        /* CBC needs 16 bytes */
    sym [3]->mechanism = CKM_SHA256_HMAC;       /* MAC: operation 3 only */
    req->ticket = (ProtobufCBinaryData) { s_ticket_len, s_ticket };
    Cs__Reply *reply = th_call (s_client, req);
    ck_assert_uint_eq (reply->n_results, 4);
    ck_assert_uint_eq (reply->results [0]->rv, CKR_MECHANISM_INVALID);
    ck_assert_uint_eq (reply->results [1]->rv, CKR_KEY_SIZE_RANGE);
    ck_assert_uint_eq (reply->results [2]->rv, CKR_MECHANISM_PARAM_INVALID);
    ck_assert_uint_eq (reply->results [3]->rv, CKR_MECHANISM_INVALID);
    cs__reply__free_unpacked (reply, NULL);
    /*  Without a ticket the same: a job that carries its key value is a
     *  public session-object job (docs/CONTRACTS.md "Login tickets").  */
    req->ticket = (ProtobufCBinaryData) { 0, NULL };
    req->request_id = 53;
    reply = th_call (s_client, req);
    ck_assert_uint_eq (reply->results [0]->rv, CKR_MECHANISM_INVALID);
    cs__reply__free_unpacked (reply, NULL);
    ck_assert_uint_eq (s_jobs ("sim0") + s_jobs ("sim1") + s_jobs ("sim2"), 0);
    th_request_free (req);
}
END_TEST

/*  keys/rsa-min-bits = 3072: in HelloResult, and a 2048-bit GenerateKeyPair
 *  job is CKR_KEY_SIZE_RANGE (3072 passes the size check; no sim board
 *  generates, so it has no board).  */
START_TEST (test_rsa_min_bits)
{
    Cs__GenerateKeyPairJob gen = CS__GENERATE_KEY_PAIR_JOB__INIT;
    Cs__Request *req = th_request (2, 52);
    req->ticket = (ProtobufCBinaryData) { s_ticket_len, s_ticket };
    th_job_hello (req->jobs [0]);
    gen.mechanism = CKM_RSA_PKCS_KEY_PAIR_GEN;
    gen.modulus_bits = 2048;
    req->jobs [1]->kind_case = CS__JOB__KIND_GENERATE_KEY_PAIR;
    req->jobs [1]->generate_key_pair = &gen;
    Cs__Reply *reply = th_call (s_client, req);
    ck_assert_uint_eq (reply->n_results, 2);
    ck_assert_int_eq (reply->results [0]->kind_case, CS__RESULT__KIND_HELLO);
    ck_assert_uint_eq (reply->results [0]->hello->rsa_min_bits, 3072);
    ck_assert_uint_eq (reply->results [1]->rv, CKR_KEY_SIZE_RANGE);
    cs__reply__free_unpacked (reply, NULL);
    gen.modulus_bits = 3072;
    reply = th_call (s_client, req);
    ck_assert_uint_ne (reply->results [1]->rv, CKR_KEY_SIZE_RANGE);
    cs__reply__free_unpacked (reply, NULL);
    req->jobs [1]->generate_key_pair = NULL;
    th_request_free (req);
}
END_TEST

int
main (void)
{
    if (!tr_driver_dir_set ())
        return 77;
    zsys_init ();
    Suite *suite = suite_create ("broker_mechroute");
    TCase *tc = tr_tcase ("routing", s_setup, s_teardown);
    tcase_add_test (tc, test_pss_skips_the_board_without_it);
    tcase_add_test (tc, test_no_board_runs_it);
    tcase_add_test (tc, test_rsa_min_bits);
    tcase_add_test (tc, test_sym_needs_a_board_that_runs_it);
    suite_add_tcase (suite, tc);
    return tr_run (suite);
}
