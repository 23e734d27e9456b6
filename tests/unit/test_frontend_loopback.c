/*  test_frontend_loopback.c — the frontend's request path without sockets
 *  (frontend_core_new, frontend.h), the way p11-kit tests its RPC through a
 *  loopback transport: request bytes in, reply bytes out, no CURVE, no TCP,
 *  no workers.  One sim board (sim0) holds board:01 of tenant demo and runs
 *  CKM_RSA_PKCS only.  Covers decode errors (request-level CK_RVs with the
 *  request's id), routing refusals (a key no board holds:
 *  CKR_KEY_HANDLE_INVALID; a mechanism none of the key's boards runs:
 *  CKR_MECHANISM_INVALID) and replies (a batch answered once, results in
 *  job order).  Frames over the job or template limits are refused before
 *  protobuf-c allocates anything for them (issue 19 item 5: counted through
 *  cs_wire_decode_alloc_hook), and the connection stays usable; jobs run on
 *  the board at once.  Needs
 *  CRYPTOSERVER_DRIVER_DIR.
 */
#include "test_broker_helpers.h"
#include "board.h"
#include "broker_config.h"
#include "frontend.h"
#include "health.h"

static char *s_dir;
static EVP_PKEY *s_key;
static broker_config_t *s_config;
static board_t *s_board;
static keystore_t *s_keystore;
static health_t *s_health;
static frontend_args_t s_args;
static frontend_core_t *s_core;
static zlistx_t *s_replies;             /* Cs__Reply *, in the order they were given */
static char s_peer [32];                /* the peer of the last reply */

static void
s_reply_free (void **item_p)
{
    cs__reply__free_unpacked (*item_p, NULL);
    *item_p = NULL;
}

static void
s_on_reply (void *arg, const void *peer, size_t peer_len, const uint8_t *reply, size_t size)
{
    (void) arg;
    snprintf (s_peer, sizeof s_peer, "%.*s", (int) peer_len, (const char *) peer);
    Cs__Reply *decoded = cs__reply__unpack (NULL, size, reply);
    ck_assert_ptr_nonnull (decoded);
    zlistx_add_end (s_replies, decoded);
}

static void
s_setup (void)
{
    s_dir = th_tmpdir ();
    s_key = th_key_pem (s_dir, "key.pem", 2048);
    th_keystore (s_dir);
    char *head = th_conf_head (false), *conf = NULL;
    ck_assert_int_ge (asprintf (&conf, "%s"
        "drivers\n"
        "    sim0\n        type = sim\n        key-file = key.pem\n        key-id = 01\n"
        "        threads = 1\n        tenant = demo\n        mechanisms = CKM_RSA_PKCS\n", head), 0);
    th_write (s_dir, "broker.conf", conf);
    free (head);
    free (conf);
    char path [4096], *error = NULL;
    snprintf (path, sizeof path, "%s/broker.conf", s_dir);
    s_config = broker_config_load (path, &error);
    ck_assert_msg (s_config != NULL, "config: %s", error ? error : "");
    ck_assert_int_eq ((int) s_config->n_boards, 1);
    s_board = board_new (&s_config->boards [0], board_driver_dir (s_config), s_config->dir);
    ck_assert_ptr_nonnull (s_board);
    uint8_t master [KEYSTORE_MASTER_KEY_LEN];
    snprintf (path, sizeof path, "%s/master.key", s_dir);
    ck_assert_int_eq (keystore_master_key_read (path, master), 0);
    s_keystore = keystore_open (s_config->keystore_path, master);
    OPENSSL_cleanse (master, sizeof master);
    ck_assert_ptr_nonnull (s_keystore);
    s_health = health_new (1, 1);
    ck_assert_ptr_nonnull (s_health);
    s_args = (frontend_args_t) { .config = s_config, .boards = &s_board, .n_boards = 1,
                                 .backend = "inproc://unused", .keystore = s_keystore, .health = s_health };
    s_replies = zlistx_new ();
    zlistx_set_destructor (s_replies, s_reply_free);
    s_core = frontend_core_new (&s_args, s_on_reply, NULL);
    ck_assert_ptr_nonnull (s_core);
}

static void
s_teardown (void)
{
    frontend_core_destroy (&s_core);
    zlistx_destroy (&s_replies);
    health_destroy (&s_health);
    keystore_destroy (&s_keystore);
    board_destroy (&s_board);
    broker_config_destroy (&s_config);
    EVP_PKEY_free (s_key);
    free (s_dir);
}

/*  Sends req (encoded) from peer and returns the one reply it got, after
 *  the loop settled; fails the test if there is not exactly one.  */
static Cs__Reply *
s_call_raw (const char *peer, const uint8_t *data, size_t size)
{
    zlistx_purge (s_replies);
    frontend_core_handle (s_core, peer, strlen (peer), data, size);
    ck_assert_int_eq (frontend_core_settle (s_core, th_timeout_ms ()), 0);
    ck_assert_int_eq ((int) zlistx_size (s_replies), 1);
    ck_assert_str_eq (s_peer, peer);
    return zlistx_first (s_replies);
}

static Cs__Reply *
s_call (const char *peer, Cs__Request *req)
{
    size_t size = 0;
    uint8_t *data = cs_wire_encode (&req->base, &size);
    ck_assert_ptr_nonnull (data);
    Cs__Reply *reply = s_call_raw (peer, data, size);
    free (data);
    return reply;
}

/*  A USER ticket for tenant demo (plaintext mode: the first tenant).  */
static void
s_login (uint8_t ticket [256], size_t *len_p)
{
    Cs__Request *req = th_request (1, 1);
    th_job_login (req->jobs [0], CKU_USER, "1234");
    Cs__Reply *reply = s_call ("p1", req);
    ck_assert_uint_eq (reply->rv, CKR_OK);
    ck_assert_uint_eq (reply->results [0]->rv, CKR_OK);
    ck_assert_int_eq (reply->results [0]->kind_case, CS__RESULT__KIND_LOGIN);
    ProtobufCBinaryData t = reply->results [0]->login->ticket;
    ck_assert_uint_le (t.len, 256);
    memcpy (ticket, t.data, t.len);
    *len_p = t.len;
    th_request_free (req);
}

START_TEST (test_decode_errors)
{
    //  Garbage: a request-level error, id 0 (it does not parse).
    const uint8_t junk [] = { 0xff, 0xff, 0xff, 0xff, 0x0f };
    Cs__Reply *reply = s_call_raw ("p1", junk, sizeof junk);
    ck_assert_uint_ne (reply->rv, CKR_OK);
    ck_assert_uint_eq (reply->request_id, 0);
    ck_assert_uint_eq (reply->n_results, 0);
    //  No jobs: refused by cs_wire_request_check with the request's id.
    Cs__Request *req = th_request (0, 77);
    reply = s_call ("p1", req);
    ck_assert_uint_ne (reply->rv, CKR_OK);
    ck_assert_uint_eq (reply->request_id, 77);
    ck_assert_uint_eq (reply->n_results, 0);
    th_request_free (req);
    //  A protocol version the broker does not speak: CKR_DEVICE_ERROR.
    req = th_request (1, 78);
    th_job_hello (req->jobs [0]);
    req->version_min = req->version_max = CS_PROTOCOL_VERSION + 7;
    reply = s_call ("p1", req);
    ck_assert_uint_eq (reply->rv, CKR_DEVICE_ERROR);
    ck_assert_uint_eq (reply->request_id, 78);
    ck_assert_ptr_nonnull (strstr (reply->error, "protocol version"));
    th_request_free (req);
}
END_TEST

/* ---- work bounded before it is done (issue 19 item 5) ----------------- */

static size_t s_decode_bytes, s_decode_calls;   /* what the request decoder allocated */

static void
s_decode_count (size_t size)
{
    s_decode_bytes += size;
    s_decode_calls++;
}

/*  A Request frame (request id `id`) whose body is n empty jobs: field 6,
 *  length 0, two bytes each, as a raw-wire client can send them.  Caller
 *  frees.  */
static uint8_t *
s_empty_jobs_frame (size_t n, uint64_t id, size_t *size_p)
{
    Cs__Request req = CS__REQUEST__INIT;
    req.version_min = CS_PROTOCOL_VERSION_MIN;
    req.version_max = CS_PROTOCOL_VERSION;
    req.request_id = id;
    size_t head = 0;
    uint8_t *head_bytes = cs_wire_encode (&req.base, &head);
    uint8_t *frame = malloc (head + 2 * n);
    ck_assert_ptr_nonnull (head_bytes);
    ck_assert_ptr_nonnull (frame);
    memcpy (frame, head_bytes, head);
    for (size_t i = 0; i < n; i++) {
        frame [head + 2 * i] = (6 << 3) | 2;
        frame [head + 2 * i + 1] = 0;
    }
    free (head_bytes);
    *size_p = head + 2 * n;
    return frame;
}

/*  A one-job request (id `id`) setting n empty attributes on a key: a
 *  template bomb inside one job.  Caller frees.  */
static uint8_t *
s_template_bomb (size_t n, uint64_t id, size_t *size_p)
{
    Cs__Attribute empty = CS__ATTRIBUTE__INIT;
    Cs__Attribute **attributes = malloc (n * sizeof *attributes);
    ck_assert_ptr_nonnull (attributes);
    for (size_t i = 0; i < n; i++)
        attributes [i] = &empty;
    Cs__SetKeyAttributesJob set = CS__SET_KEY_ATTRIBUTES_JOB__INIT;
    set.ref = "board:01";
    set.n_attributes = n;
    set.attributes = attributes;
    Cs__Job job = CS__JOB__INIT, *jobs [1] = { &job };
    job.kind_case = CS__JOB__KIND_SET_KEY_ATTRIBUTES;
    job.set_key_attributes = &set;
    Cs__Request req = CS__REQUEST__INIT;
    req.version_min = CS_PROTOCOL_VERSION_MIN;
    req.version_max = CS_PROTOCOL_VERSION;
    req.request_id = id;
    req.n_jobs = 1;
    req.jobs = jobs;
    uint8_t *frame = cs_wire_encode (&req.base, size_p);
    ck_assert_ptr_nonnull (frame);
    free (attributes);
    return frame;
}

/*  Sends a frame the limits refuse from peer: one request-level reply with
 *  rv and the request's id, and the decoder allocated nothing for it.  */
static void
s_refused_unallocated (const char *peer, const uint8_t *frame, size_t size, uint64_t id, CK_RV rv)
{
    s_decode_bytes = s_decode_calls = 0;
    cs_wire_decode_alloc_hook = s_decode_count;
    Cs__Reply *reply = s_call_raw (peer, frame, size);
    cs_wire_decode_alloc_hook = NULL;
    ck_assert_uint_eq (reply->rv, rv);
    ck_assert_uint_eq (reply->request_id, id);
    ck_assert_uint_eq (reply->n_results, 0);
    ck_assert_msg (s_decode_calls == 0 && s_decode_bytes == 0,
                   "the decoder allocated %zu bytes in %zu calls for a refused frame",
                   s_decode_bytes, s_decode_calls);
}

START_TEST (test_bounded_before_decode)
{
    //  ~1 MB of 500,000 empty jobs, without a login: refused with the
    //  job-limit CK_RV before protobuf-c allocates anything.
    size_t size = 0;
    uint8_t *frame = s_empty_jobs_frame (500000, 4242, &size);
    ck_assert_uint_le (size, CS_WIRE_MAX_MESSAGE);
    s_refused_unallocated ("p3", frame, size, 4242, CKR_DEVICE_MEMORY);
    free (frame);
    //  One job over the limit is refused the same way.
    frame = s_empty_jobs_frame (CS_WIRE_MAX_JOBS + 1, 4243, &size);
    s_refused_unallocated ("p3", frame, size, 4243, CKR_DEVICE_MEMORY);
    free (frame);
    //  A template of 200,000 attributes in one job: the template limit.
    frame = s_template_bomb (200000, 4244, &size);
    s_refused_unallocated ("p3", frame, size, 4244, CKR_TEMPLATE_INCONSISTENT);
    free (frame);
    //  The connection stays usable, and a request within the limits is
    //  decoded once, under CS_WIRE_MAX_DECODED.
    Cs__Request *req = th_request (CS_WIRE_MAX_JOBS, 4245);
    for (size_t i = 0; i < CS_WIRE_MAX_JOBS; i++)
        th_job_hello (req->jobs [i]);
    s_decode_bytes = s_decode_calls = 0;
    cs_wire_decode_alloc_hook = s_decode_count;
    Cs__Reply *reply = s_call ("p3", req);
    cs_wire_decode_alloc_hook = NULL;
    ck_assert_uint_eq (reply->rv, CKR_OK);
    ck_assert_uint_eq (reply->request_id, 4245);
    ck_assert_uint_eq (reply->n_results, CS_WIRE_MAX_JOBS);
    ck_assert_uint_eq (reply->results [CS_WIRE_MAX_JOBS - 1]->rv, CKR_OK);
    ck_assert_uint_gt (s_decode_calls, CS_WIRE_MAX_JOBS);
    ck_assert_uint_le (s_decode_bytes, CS_WIRE_MAX_DECODED);
    th_request_free (req);
}
END_TEST

START_TEST (test_routing_refusals)
{
    uint8_t ticket [256];
    size_t ticket_len = 0;
    s_login (ticket, &ticket_len);
    const uint8_t data [32] = { 1 };
    const char *held = "board:01", *unheld = "board:02", *unknown = "ks:no-such-key";
    Cs__Request *req = th_request (4, 2);
    req->ticket = (ProtobufCBinaryData) { ticket_len, ticket };
    th_job_crypto (req->jobs [0], true, (const uint8_t *) unheld, strlen (unheld), CKM_RSA_PKCS, data, 32);
    th_job_crypto (req->jobs [1], true, (const uint8_t *) held, strlen (held), CKM_RSA_PKCS_PSS, data, 32);
    th_job_crypto (req->jobs [2], false, (const uint8_t *) held, strlen (held), CKM_RSA_PKCS_OAEP, data, 32);
    th_job_crypto (req->jobs [3], true, (const uint8_t *) unknown, strlen (unknown), CKM_RSA_PKCS, data, 32);
    Cs__Reply *reply = s_call ("p2", req);
    ck_assert_uint_eq (reply->rv, CKR_OK);
    ck_assert_uint_eq (reply->request_id, 2);
    ck_assert_uint_eq (reply->n_results, 4);
    ck_assert_uint_eq (reply->results [0]->rv, CKR_KEY_HANDLE_INVALID);     /* no board holds it */
    ck_assert_uint_eq (reply->results [1]->rv, CKR_MECHANISM_INVALID);      /* sim0: CKM_RSA_PKCS only */
    ck_assert_uint_eq (reply->results [2]->rv, CKR_MECHANISM_INVALID);
    ck_assert_uint_eq (reply->results [3]->rv, CKR_KEY_HANDLE_INVALID);     /* read by the slow pool: none */
    th_request_free (req);
    //  Without the ticket: not logged in, before any routing.
    req = th_request (1, 3);
    th_job_crypto (req->jobs [0], true, (const uint8_t *) held, strlen (held), CKM_RSA_PKCS, data, 32);
    reply = s_call ("p2", req);
    ck_assert_uint_eq (reply->results [0]->rv, CKR_USER_NOT_LOGGED_IN);
    th_request_free (req);
}
END_TEST

START_TEST (test_batch_in_order)
{
    uint8_t ticket [256];
    size_t ticket_len = 0;
    s_login (ticket, &ticket_len);
    //  Jobs answered at once (Hello), after the slow pool (ListKeys rows, a
    //  keystore key read) and refused (routing), mixed: one reply, in order.
    const uint8_t data [32] = { 1 };
    const char *unheld = "board:02", *unknown = "ks:missing";
    Cs__Request *req = th_request (5, 9);
    req->ticket = (ProtobufCBinaryData) { ticket_len, ticket };
    th_job_crypto (req->jobs [0], true, (const uint8_t *) unknown, strlen (unknown), CKM_RSA_PKCS, data, 32);
    th_job_hello (req->jobs [1]);
    th_job_list_keys (req->jobs [2]);
    th_job_crypto (req->jobs [3], true, (const uint8_t *) unheld, strlen (unheld), CKM_RSA_PKCS, data, 32);
    th_job_hello (req->jobs [4]);
    Cs__Reply *reply = s_call ("p3", req);
    ck_assert_uint_eq (reply->rv, CKR_OK);
    ck_assert_uint_eq (reply->request_id, 9);
    ck_assert_uint_eq (reply->n_results, 5);
    ck_assert_uint_eq (reply->results [0]->rv, CKR_KEY_HANDLE_INVALID);
    ck_assert_uint_eq (reply->results [1]->rv, CKR_OK);
    ck_assert_int_eq (reply->results [1]->kind_case, CS__RESULT__KIND_HELLO);
    ck_assert_str_eq (reply->results [1]->hello->token_label, "demo");
    ck_assert_str_eq (reply->results [1]->hello->serial, "loopback");
    ck_assert_uint_eq (reply->results [1]->hello->boards, 1);
    ck_assert_uint_eq (reply->results [2]->rv, CKR_OK);
    ck_assert_int_eq (reply->results [2]->kind_case, CS__RESULT__KIND_KEYS);
    ck_assert_uint_eq (reply->results [2]->keys->n_keys, 1);                  /* board:01 of sim0 */
    ck_assert_str_eq (reply->results [2]->keys->keys [0]->ref, "board:01");
    ck_assert_uint_eq (reply->results [3]->rv, CKR_KEY_HANDLE_INVALID);
    ck_assert_int_eq (reply->results [4]->kind_case, CS__RESULT__KIND_HELLO);
    th_request_free (req);
}
END_TEST

/*  docs/CONTRACTS.md "Login tickets": a job that carries its key (sign with
 *  key_pkcs8, a SymJob with key_value) or generates a session pair (token
 *  FALSE) needs no ticket and gets past the login to routing (the sim board
 *  takes no key material and runs no secret-key or generation job: the
 *  routing answers); a ticket that does not hold is CKR_USER_NOT_LOGGED_IN
 *  for them too; a job naming a server-held key (ks:, board:) or storing a
 *  key (token TRUE) without the ticket is CKR_USER_NOT_LOGGED_IN.  */
START_TEST (test_public_jobs)
{
    PKCS8_PRIV_KEY_INFO *p8 = EVP_PKEY2PKCS8 (s_key);
    uint8_t *der = NULL;
    int der_len = p8 ? i2d_PKCS8_PRIV_KEY_INFO (p8, &der) : -1;
    PKCS8_PRIV_KEY_INFO_free (p8);
    ck_assert_int_gt (der_len, 0);
    const uint8_t data [32] = { 1 }, aes [16] = { 2 }, forged [33] = { CKU_USER };
    const char *held = "board:01", *stored = "ks:any";
    for (int pass = 0; pass < 2; pass++) {
        Cs__Request *req = th_request (6, 20 + (uint64_t) pass);
        if (pass)
            req->ticket = (ProtobufCBinaryData) { sizeof forged, (uint8_t *) forged };
        th_job_crypto (req->jobs [0], true, NULL, 0, CKM_RSA_PKCS, data, 32);
        req->jobs [0]->sign->key_pkcs8 = (ProtobufCBinaryData) { (size_t) der_len, der };
        th_job_crypto (req->jobs [1], true, (const uint8_t *) held, strlen (held), CKM_RSA_PKCS, data, 32);
        Cs__SymJob *sym [2];
        for (int i = 0; i < 2; i++) {
            sym [i] = calloc (1, sizeof (Cs__SymJob));
            cs__sym_job__init (sym [i]);
            sym [i]->mechanism = CKM_AES_ECB;
            sym [i]->operation = 1;
            sym [i]->data = (ProtobufCBinaryData) { 16, (uint8_t *) aes };
            req->jobs [2 + i]->kind_case = CS__JOB__KIND_SYM;
            req->jobs [2 + i]->sym = sym [i];
        }
        sym [0]->key_value = (ProtobufCBinaryData) { 16, (uint8_t *) aes };
        sym [1]->key_id = (ProtobufCBinaryData) { strlen (stored), (uint8_t *) stored };
        for (int i = 0; i < 2; i++) {
            Cs__GenerateKeyPairJob *gen = calloc (1, sizeof *gen);
            cs__generate_key_pair_job__init (gen);
            gen->mechanism = CKM_RSA_PKCS_KEY_PAIR_GEN;
            gen->modulus_bits = 2048;
            gen->token = i == 1;
            req->jobs [4 + i]->kind_case = CS__JOB__KIND_GENERATE_KEY_PAIR;
            req->jobs [4 + i]->generate_key_pair = gen;
        }
        Cs__Reply *reply = s_call ("p4", req);
        ck_assert_uint_eq (reply->rv, CKR_OK);
        ck_assert_uint_eq (reply->n_results, 6);
        CK_RV open = pass ? CKR_USER_NOT_LOGGED_IN : CKR_KEY_TYPE_INCONSISTENT;
        ck_assert_uint_eq (reply->results [0]->rv, open);                   /* no board takes material */
        ck_assert_uint_eq (reply->results [1]->rv, CKR_USER_NOT_LOGGED_IN);
        open = pass ? CKR_USER_NOT_LOGGED_IN : CKR_MECHANISM_INVALID;
        ck_assert_uint_eq (reply->results [2]->rv, open);                   /* no board runs CKM_AES_ECB */
        ck_assert_uint_eq (reply->results [3]->rv, CKR_USER_NOT_LOGGED_IN);
        ck_assert_uint_eq (reply->results [4]->rv, open);                   /* no board generates */
        ck_assert_uint_eq (reply->results [5]->rv, CKR_USER_NOT_LOGGED_IN);
        req->ticket = (ProtobufCBinaryData) { 0, NULL };
        th_request_free (req);
    }
    OPENSSL_free (der);
}
END_TEST

/*  A job that reaches a board runs there at once (frontend.h: the core has
 *  no worker threads), and the next one too: the board's worker is free
 *  again after each.  */
START_TEST (test_board_jobs_run)
{
    uint8_t ticket [256];
    size_t ticket_len = 0;
    s_login (ticket, &ticket_len);
    uint8_t di [51];
    size_t di_len = th_digest_info ("loopback", di);
    const char *held = "board:01";
    for (uint64_t id = 20; id < 23; id++) {
        Cs__Request *req = th_request (1, id);
        req->ticket = (ProtobufCBinaryData) { ticket_len, ticket };
        th_job_crypto (req->jobs [0], true, (const uint8_t *) held, strlen (held), CKM_RSA_PKCS, di, di_len);
        Cs__Reply *reply = s_call ("p4", req);
        ck_assert_uint_eq (reply->rv, CKR_OK);
        ck_assert_uint_eq (reply->request_id, id);
        ck_assert_uint_eq (reply->n_results, 1);
        ck_assert_uint_eq (reply->results [0]->rv, CKR_OK);
        ck_assert_int_eq (reply->results [0]->kind_case, CS__RESULT__KIND_DATA);
        ck_assert (th_verify_rsa_pkcs1 (s_key, di, di_len, reply->results [0]->data.data,
                                        reply->results [0]->data.len));
        th_request_free (req);
    }
}
END_TEST

int
main (void)
{
    Suite *suite = suite_create ("frontend_loopback");
    TCase *tc = tcase_create ("core");
    tcase_set_timeout (tc, 60);
    tcase_add_checked_fixture (tc, s_setup, s_teardown);
    tcase_add_test (tc, test_decode_errors);
    tcase_add_test (tc, test_routing_refusals);
    tcase_add_test (tc, test_batch_in_order);
    tcase_add_test (tc, test_bounded_before_decode);
    tcase_add_test (tc, test_public_jobs);
    tcase_add_test (tc, test_board_jobs_run);
    suite_add_tcase (suite, tc);
    SRunner *runner = srunner_create (suite);
    srunner_run_all (runner, CK_NORMAL);
    int failed = srunner_ntests_failed (runner);
    srunner_free (runner);
    return failed ? 1 : 0;
}
