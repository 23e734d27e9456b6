/*  test_broker_actor.c — the whole broker in-process (server.h: boards,
 *  zauth, frontend actor, workers) on tcp://127.0.0.1:! (a random free port) with two sim boards
 *  holding the same RSA key, CURVE on, and a DEALER client.  Needs
 *  CRYPTOSERVER_DRIVER_DIR (set by make check) to find sim.so.
 */
#include <dirent.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include "test_broker_fixture.h"
#include "test_run.h"

static char *s_dir;
static EVP_PKEY *s_key;
static broker_config_t *s_config;
static server_t *s_server;
static zsock_t *s_client;
static const uint8_t s_key_id [] = "board:01";   /* KeyInfo.ref of the resident key */

static void
s_setup (void)
{
    s_dir = th_tmpdir ();
    s_key = th_key_pem (s_dir, "key.pem", 2048);
    th_certs (s_dir, "alice", "demo");
    th_client_add (s_dir, "nobody", NULL);      /* a cert without tenant metadata */
    th_keystore (s_dir);
    tb_conf_write (s_dir, "    worker-nice = 10\n",     /* one tenant: "auto" would be 0 */
        "drivers\n"
        "    sim0\n        type = sim\n        key-file = key.pem\n        key-id = 01\n"
        "        latency-ms = 4\n        threads = 2\n        tenant = demo\n"
        "    sim1\n        type = sim\n        key-file = key.pem\n        key-id = 01\n"
        "        latency-ms = 4\n        threads = 2\n        tenant = demo\n");
    s_server = tb_start (s_dir, &s_config);
    ck_assert (strncmp (server_endpoint (s_server), "tcp://127.0.0.1:", 16) == 0);
    s_client = th_dealer (s_dir, "alice", server_endpoint (s_server));
}

static void
s_teardown (void)
{
    zsock_destroy (&s_client);
    tb_stop (&s_server, &s_config);
    EVP_PKEY_free (s_key);
    th_tmpdir_remove (&s_dir);
}

START_TEST (test_batch_of_50_signs)
{
    size_t ticket_len = 0;
    uint64_t rv = 0;
    uint8_t *ticket = th_login (s_client, "1234", &ticket_len, &rv);
    ck_assert_uint_eq (rv, CKR_OK);
    enum { N = 50 };
    static uint8_t di [N][51];
    Cs__Request *req = th_request (N, 42);
    req->ticket = (ProtobufCBinaryData) { ticket_len, ticket };
    for (size_t i = 0; i < N; i++) {
        char msg [32];
        snprintf (msg, sizeof msg, "message %zu", i);
        th_digest_info (msg, di [i]);
        th_job_crypto (req->jobs [i], true, s_key_id, 8, CKM_RSA_PKCS, di [i], 51);
    }
    Cs__Reply *reply = th_call (s_client, req);
    ck_assert_uint_eq (reply->rv, CKR_OK);
    ck_assert_uint_eq (reply->n_results, N);
    for (size_t i = 0; i < N; i++) {
        Cs__Result *result = reply->results [i];
        ck_assert_uint_eq (result->rv, CKR_OK);
        ck_assert_int_eq (result->kind_case, CS__RESULT__KIND_DATA);
        ck_assert_uint_eq (result->data.len, 256);
        ck_assert_msg (th_verify_rsa_pkcs1 (s_key, di [i], 51, result->data.data, result->data.len),
                       "signature %zu does not verify (results out of order?)", i);
    }
    /*  Answered once: nothing else is waiting on the socket.  */
    ck_assert_int_eq (zsock_events (s_client) & ZMQ_POLLIN, 0);
    uint64_t errors0 = 1, errors1 = 1;
    uint64_t jobs0 = th_board_jobs (server_frontend (s_server), "sim0", &errors0);
    uint64_t jobs1 = th_board_jobs (server_frontend (s_server), "sim1", &errors1);
    ck_assert_uint_gt (jobs0, 0);
    ck_assert_uint_gt (jobs1, 0);
    ck_assert_uint_eq (jobs0 + jobs1, N);
    ck_assert_uint_eq (errors0 + errors1, 0);
    cs__reply__free_unpacked (reply, NULL);
    th_request_free (req);
    free (ticket);
}
END_TEST

START_TEST (test_pss_and_decrypt)
{
    size_t ticket_len = 0;
    uint64_t rv = 0;
    uint8_t *ticket = th_login (s_client, "1234", &ticket_len, &rv);
    uint8_t digest [32], ct1 [256], ct2 [256], ct3 [256];
    SHA256 ((const uint8_t *) "pss", 3, digest);
    size_t len1 = th_rsa_encrypt (s_key, NULL, NULL, "pkcs1 secret", ct1, sizeof ct1);
    size_t len2 = th_rsa_encrypt (s_key, EVP_sha256 (), "lbl", "oaep secret", ct2, sizeof ct2);
    memcpy (ct3, ct2, sizeof ct3);
    ct3 [100] ^= 1;
    Cs__Request *req = th_request (4, 43);
    req->ticket = (ProtobufCBinaryData) { ticket_len, ticket };
    Cs__Mechanism *pss = th_job_crypto (req->jobs [0], true, s_key_id, 8, CKM_RSA_PKCS_PSS, digest, 32);
    pss->hash = CKM_SHA256; pss->mgf = CKG_MGF1_SHA256; pss->salt_len = 32;
    th_job_crypto (req->jobs [1], false, s_key_id, 8, CKM_RSA_PKCS, ct1, len1);
    Cs__Mechanism *oaep = th_job_crypto (req->jobs [2], false, s_key_id, 8, CKM_RSA_PKCS_OAEP, ct2, len2);
    oaep->hash = CKM_SHA256; oaep->mgf = CKG_MGF1_SHA256;
    oaep->oaep_label = (ProtobufCBinaryData) { 3, (uint8_t *) "lbl" };
    Cs__Mechanism *bad = th_job_crypto (req->jobs [3], false, s_key_id, 8, CKM_RSA_PKCS_OAEP, ct3, len2);
    bad->hash = CKM_SHA256; bad->mgf = CKG_MGF1_SHA256;
    bad->oaep_label = (ProtobufCBinaryData) { 3, (uint8_t *) "lbl" };
    Cs__Reply *reply = th_call (s_client, req);
    ck_assert_uint_eq (reply->n_results, 4);
    ck_assert_uint_eq (reply->results [0]->rv, CKR_OK);
    ck_assert (th_verify_rsa_pss (s_key, digest, reply->results [0]->data.data, reply->results [0]->data.len));
    ck_assert_uint_eq (reply->results [1]->rv, CKR_OK);
    ck_assert_uint_eq (reply->results [1]->data.len, 12);
    ck_assert (memcmp (reply->results [1]->data.data, "pkcs1 secret", 12) == 0);
    ck_assert_uint_eq (reply->results [2]->rv, CKR_OK);
    ck_assert (memcmp (reply->results [2]->data.data, "oaep secret", 11) == 0);
    ck_assert_uint_eq (reply->results [3]->rv, CKR_ENCRYPTED_DATA_INVALID);
    cs__reply__free_unpacked (reply, NULL);
    th_request_free (req);
    free (ticket);
}
END_TEST

/*  The broker process is not dumpable once a server runs (no core file, no
 *  ptrace attach by the same user: issue #7 item 7).  */
START_TEST (test_not_dumpable)
{
    ck_assert_int_eq (prctl (PR_GET_DUMPABLE, 0, 0, 0, 0), 0);
    struct rlimit core;
    ck_assert_int_eq (getrlimit (RLIMIT_CORE, &core), 0);
    ck_assert_uint_eq (core.rlim_cur, 0);
}
END_TEST

/*  Reply frames are wiped before libzmq frees them: every frame the broker
 *  releases is all zeros by then, the login ticket's and the plaintext's
 *  included (cs_wire_frame_free).  */
static size_t s_frames;                 /* atomic: frames released */
static size_t s_dirty_frames;           /* atomic: of which not wiped */

static void
s_frame_check (void *data, size_t size)
{
    bool zero = true;
    for (size_t i = 0; i < size; i++)
        zero &= ((uint8_t *) data) [i] == 0;
    if (!zero)
        __atomic_add_fetch (&s_dirty_frames, 1, __ATOMIC_SEQ_CST);
    __atomic_add_fetch (&s_frames, 1, __ATOMIC_SEQ_CST);
    free (data);
}

START_TEST (test_reply_frames_wiped)
{
    void (*saved) (void *, size_t) = cs_wire_frame_release;
    cs_wire_frame_release = s_frame_check;      /* before any reply is sent */
    size_t ticket_len = 0;
    uint64_t rv = 0;
    uint8_t *ticket = th_login (s_client, "1234", &ticket_len, &rv);
    ck_assert_uint_eq (rv, CKR_OK);
    uint8_t ct [256];
    size_t len = th_rsa_encrypt (s_key, NULL, NULL, "wipe me", ct, sizeof ct);
    Cs__Request *req = th_request (1, 44);
    req->ticket = (ProtobufCBinaryData) { ticket_len, ticket };
    th_job_crypto (req->jobs [0], false, s_key_id, 8, CKM_RSA_PKCS, ct, len);
    Cs__Reply *reply = th_call (s_client, req);
    ck_assert_uint_eq (reply->results [0]->rv, CKR_OK);
    ck_assert_mem_eq (reply->results [0]->data.data, "wipe me", 7);
    cs__reply__free_unpacked (reply, NULL);
    /*  CURVE encrypts a frame into a new one and releases ours before the
        bytes are on the wire; wait a little in case it is still queued.  */
    for (int tries = 0; tries < 200 && __atomic_load_n (&s_frames, __ATOMIC_SEQ_CST) < 2; tries++)
        zclock_sleep (5);
    ck_assert_uint_ge (__atomic_load_n (&s_frames, __ATOMIC_SEQ_CST), 2);
    ck_assert_uint_eq (__atomic_load_n (&s_dirty_frames, __ATOMIC_SEQ_CST), 0);
    th_request_free (req);
    free (ticket);
    server_destroy (&s_server);             /* no frame in flight, then the hook goes */
    cs_wire_frame_release = saved;
}
END_TEST

START_TEST (test_wrong_pin)
{
    size_t ticket_len = 0;
    uint64_t rv = 0;
    uint8_t *ticket = th_login (s_client, "9999", &ticket_len, &rv);
    ck_assert_ptr_null (ticket);
    ck_assert_uint_eq (rv, CKR_PIN_INCORRECT);
}
END_TEST

START_TEST (test_sign_without_ticket)
{
    uint8_t di [51];
    th_digest_info ("x", di);
    Cs__Request *req = th_request (2, 44);
    th_job_crypto (req->jobs [0], true, s_key_id, 8, CKM_RSA_PKCS, di, 51);
    th_job_hello (req->jobs [1]);
    Cs__Reply *reply = th_call (s_client, req);
    ck_assert_uint_eq (reply->rv, CKR_OK);
    ck_assert_uint_eq (reply->results [0]->rv, CKR_USER_NOT_LOGGED_IN);
    ck_assert_uint_eq (reply->results [1]->rv, CKR_OK);
    cs__reply__free_unpacked (reply, NULL);
    /*  A forged ticket is no better.  */
    uint8_t forged [33] = { CKU_USER };
    req->ticket = (ProtobufCBinaryData) { sizeof forged, forged };
    req->request_id = 45;
    reply = th_call (s_client, req);
    ck_assert_uint_eq (reply->results [0]->rv, CKR_USER_NOT_LOGGED_IN);
    cs__reply__free_unpacked (reply, NULL);
    th_request_free (req);
}
END_TEST

START_TEST (test_unknown_key)
{
    size_t ticket_len = 0;
    uint64_t rv = 0;
    uint8_t *ticket = th_login (s_client, "1234", &ticket_len, &rv);
    uint8_t di [51], other [] = "board:99";
    th_digest_info ("x", di);
    Cs__Request *req = th_request (1, 46);
    req->ticket = (ProtobufCBinaryData) { ticket_len, ticket };
    th_job_crypto (req->jobs [0], true, other, 8, CKM_RSA_PKCS, di, 51);
    Cs__Reply *reply = th_call (s_client, req);
    ck_assert_uint_eq (reply->results [0]->rv, CKR_KEY_HANDLE_INVALID);
    cs__reply__free_unpacked (reply, NULL);
    th_request_free (req);
    free (ticket);
}
END_TEST

START_TEST (test_garbage_then_hello)
{
    static const uint8_t garbage [] = { 0xff, 0xff, 0xff, 0x01, 0x02, 0x03, 0x04 };
    th_send_raw (s_client, garbage, sizeof garbage);
    Cs__Reply *reply = th_recv (s_client);
    ck_assert_uint_eq (reply->rv, CKR_DEVICE_ERROR);
    ck_assert_uint_eq (reply->request_id, 0);
    ck_assert (reply->error && *reply->error);
    cs__reply__free_unpacked (reply, NULL);
    /*  Version mismatch: a clear error naming both ranges.  */
    Cs__Request *req = th_request (1, 47);
    th_job_hello (req->jobs [0]);
    req->version_min = 90;
    req->version_max = 99;
    reply = th_call (s_client, req);
    ck_assert_uint_eq (reply->rv, CKR_DEVICE_ERROR);
    ck_assert_uint_eq (reply->version, CS_PROTOCOL_VERSION);
    ck_assert_ptr_nonnull (strstr (reply->error, "90..99"));
    cs__reply__free_unpacked (reply, NULL);
    /*  Still answering, with the tenant as token label and both boards up.  */
    req->version_min = CS_PROTOCOL_VERSION_MIN;
    req->version_max = CS_PROTOCOL_VERSION;
    req->request_id = 48;
    reply = th_call (s_client, req);
    ck_assert_uint_eq (reply->rv, CKR_OK);
    ck_assert_int_eq (reply->results [0]->kind_case, CS__RESULT__KIND_HELLO);
    ck_assert_str_eq (reply->results [0]->hello->token_label, "demo");
    ck_assert_uint_eq (reply->results [0]->hello->boards, 2);
    ck_assert_uint_ge (reply->results [0]->hello->n_mechanisms, 3);
    cs__reply__free_unpacked (reply, NULL);
    th_request_free (req);
}
END_TEST

/*  Issue #7: without a user ticket a key list holds public objects only
 *  (the resident key's public half); with one, the private object too.  */
START_TEST (test_list_keys)
{
    Cs__Request *req = th_request (1, 49);
    th_job_list_keys (req->jobs [0]);
    Cs__Reply *reply = th_call (s_client, req);
    ck_assert_uint_eq (reply->results [0]->rv, CKR_OK);
    Cs__ListKeysResult *keys = reply->results [0]->keys;
    ck_assert_uint_eq (keys->n_keys, 1);
    ck_assert_uint_eq (keys->keys [0]->boards, 2);
    ck_assert_uint_eq (keys->keys [0]->bits, 2048);
    ck_assert_uint_eq (keys->keys [0]->modulus.len, 256);
    ck_assert_uint_eq (keys->keys [0]->key_type, CKK_RSA);
    ck_assert (keys->keys [0]->has_public);
    ck_assert_msg (!keys->keys [0]->has_private, "a private key object listed without a login");
    ck_assert_uint_eq (keys->keys [0]->n_private_attributes, 0);
    uint64_t public_version = keys->version;
    cs__reply__free_unpacked (reply, NULL);
    /*  Logged in: the private object too, under another list version (a
        client holding the public list must not get "unchanged").  */
    size_t ticket_len = 0;
    uint64_t rv = 0;
    uint8_t *ticket = th_login (s_client, "1234", &ticket_len, &rv);
    ck_assert_uint_eq (rv, CKR_OK);
    req->ticket = (ProtobufCBinaryData) { ticket_len, ticket };
    req->jobs [0]->list_keys->known_version = public_version;
    reply = th_call (s_client, req);
    keys = reply->results [0]->keys;
    ck_assert (!keys->unchanged);
    ck_assert_uint_ne (keys->version, public_version);
    ck_assert_uint_eq (keys->n_keys, 1);
    ck_assert (keys->keys [0]->has_public && keys->keys [0]->has_private);
    ck_assert_uint_gt (keys->keys [0]->n_private_attributes, 0);
    cs__reply__free_unpacked (reply, NULL);
    /*  A forged ticket is no login, and the broker says so
        (CONTRACTS.md "Key lists"): no keys at all.  */
    uint8_t forged [33] = { CKU_USER };
    req->ticket = (ProtobufCBinaryData) { sizeof forged, forged };
    req->jobs [0]->list_keys->known_version = 0;
    reply = th_call (s_client, req);
    ck_assert_uint_eq (reply->results [0]->rv, CKR_USER_NOT_LOGGED_IN);
    ck_assert_int_ne (reply->results [0]->kind_case, CS__RESULT__KIND_KEYS);
    cs__reply__free_unpacked (reply, NULL);
    th_request_free (req);
    free (ticket);
}
END_TEST

/*  Issue #7: a client whose certificate names no tenant is refused (a
 *  request-level error naming the reason), not mapped to the keystore's
 *  first tenant.  */
START_TEST (test_client_without_tenant)
{
    zsock_t *nobody = th_dealer (s_dir, "nobody", server_endpoint (s_server));
    Cs__Request *req = th_request (1, 50);
    th_job_hello (req->jobs [0]);
    Cs__Reply *reply = th_call (nobody, req);
    ck_assert_uint_eq (reply->rv, CKR_DEVICE_ERROR);
    ck_assert_uint_eq (reply->n_results, 0);
    ck_assert_ptr_nonnull (strstr (reply->error, "no tenant"));
    cs__reply__free_unpacked (reply, NULL);
    size_t len = 0;
    uint64_t rv = 0;
    th_request_free (req);
    req = th_request (1, 51);
    th_job_login (req->jobs [0], CKU_USER, "1234");
    reply = th_call (nobody, req);
    ck_assert_uint_eq (reply->rv, CKR_DEVICE_ERROR);
    ck_assert_uint_eq (reply->n_results, 0);
    cs__reply__free_unpacked (reply, NULL);
    th_request_free (req);
    zsock_destroy (&nobody);
    /*  The client with a tenant still logs in.  */
    uint8_t *ticket = th_login (s_client, "1234", &len, &rv);
    ck_assert_uint_eq (rv, CKR_OK);
    free (ticket);
}
END_TEST

/*  Reads the nice value (proc(5) stat field 19) and scheduling policy
 *  (field 41) of thread `tid` of this process; false when unreadable.  */
static bool
s_thread_sched (const char *tid, int *nice, int *policy)
{
    char path [64], line [1024];
    snprintf (path, sizeof path, "/proc/self/task/%s/stat", tid);
    FILE *file = fopen (path, "r");
    bool ok = file && fgets (line, sizeof line, file);
    if (file)
        fclose (file);
    char *field = ok ? strrchr (line, ')') : NULL;         /* the name may hold spaces */
    if (!field)
        return false;
    strtok (field + 1, " ");                                /* field 3, the state */
    for (int n = 4; n <= 41 && (field = strtok (NULL, " ")); n++) {
        if (n == 19)
            *nice = atoi (field);
        if (n == 41)
            *policy = atoi (field);
    }
    return field != NULL;
}

/*  broker/worker-nice = 10: the 4 worker threads (2 sim boards of
 *  2) run 10 nice steps below the thread that started the server and under
 *  SCHED_BATCH, and no other thread does — the reactor keeps its CPU
 *  against a flood's workers (issue 19 item 6).  */
START_TEST (test_workers_below_reactor)
{
    errno = 0;
    int base = getpriority (PRIO_PROCESS, 0);
    ck_assert_int_eq (errno, 0);
    int want = base + 10 > 19 ? 19 : base + 10;
    DIR *dir = opendir ("/proc/self/task");
    ck_assert_ptr_nonnull (dir);
    size_t threads = 0, lowered = 0, batch = 0;
    for (struct dirent *entry; (entry = readdir (dir)); ) {
        int nice = 0, policy = -1;
        if (entry->d_name [0] == '.' || !s_thread_sched (entry->d_name, &nice, &policy))
            continue;
        threads++;
        lowered += nice == want && policy == SCHED_BATCH;
        batch += policy == SCHED_BATCH;
    }
    closedir (dir);
    ck_assert_uint_gt (threads, 4);
    ck_assert_uint_eq (lowered, 4);
    ck_assert_uint_eq (batch, 4);
}
END_TEST

START_TEST (test_drain)
{
    ck_assert_int_eq (server_drain (s_server, 5000), 0);
}
END_TEST

static Suite *
s_suite (void)
{
    Suite *suite = suite_create ("broker_actor");
    TCase *tc = tr_tcase ("actor", s_setup, s_teardown);
    tcase_add_test (tc, test_batch_of_50_signs);
    tcase_add_test (tc, test_pss_and_decrypt);
    tcase_add_test (tc, test_not_dumpable);
    tcase_add_test (tc, test_reply_frames_wiped);
    tcase_add_test (tc, test_wrong_pin);
    tcase_add_test (tc, test_sign_without_ticket);
    tcase_add_test (tc, test_unknown_key);
    tcase_add_test (tc, test_garbage_then_hello);
    tcase_add_test (tc, test_list_keys);
    tcase_add_test (tc, test_client_without_tenant);
    tcase_add_test (tc, test_workers_below_reactor);
    tcase_add_test (tc, test_drain);
    suite_add_tcase (suite, tc);
    return suite;
}

int
main (void)
{
    if (!tr_driver_dir_set ())
        return 77;
    zsys_init ();
    return tr_run (s_suite ());
}
