/*  test_broker_fast.c — the frontend never blocks, and keystore keys are
 *  cached (issue #8, docs/DESIGN.md §5): the whole broker in-process with one
 *  openssl board and three RSA keystore keys of tenant demo; clients alice
 *  and bob (tenant demo).  The keystore's test hook (keystore.h) counts the
 *  broker's SQLite reads and holds a PIN check in the middle, so every
 *  check here is about order and counts, never about time:
 *    - while alice's PIN check runs, bob's hello and keystore signature are
 *      answered (the check runs in the slow pool, not in the frontend);
 *    - a job with a cached keystore key, and its ticket check, read nothing
 *      from SQLite; a key changed or destroyed through the broker, deleted
 *      behind its back with SQLite, or a PIN set by another keystore
 *      connection (cryptoserver-admin) is seen by the next job;
 *    - keystore/key-cache = 2 keeps two keys: the least recently used one is
 *      read again;
 *    - the fast lane (broker/frontend/fast_lane.c): ECDSA jobs of a keystore key on
 *      an openssl board run on the reactor once the board's service time
 *      is known (cryptoserver_fast_lane_jobs_total), every signature
 *      verified with OpenSSL; never with broker/fast-lane-us = 0 nor on a
 *      board whose ECDSA results are verified.
 *  Needs CRYPTOSERVER_DRIVER_DIR (make check).
 */
#include <pthread.h>
#include <sqlite3.h>
#include "test_broker_fixture.h"
#include "key_info.h"
#include "test_metrics_scrape.h"
#include "test_run.h"

#define S_KEYS 3

static char *s_dir;
static broker_config_t *s_config;
static server_t *s_server;
static zsock_t *s_alice, *s_bob;
static EVP_PKEY *s_pkey [S_KEYS];
static char s_ref [S_KEYS][64];
static uint8_t *s_ticket;           /* bob's */
static size_t s_ticket_len;

/* ---- the keystore hook ---------------------------------------------- */

static pthread_mutex_t s_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t s_cond = PTHREAD_COND_INITIALIZER;
static size_t s_key_gets, s_tenant_reads;   /* counted under s_mutex */
static bool s_hold;                 /* "pin_check" waits until s_hold is false */
static bool s_held;                 /* a PIN check is waiting */

/*  Counts reads; holds a PIN check while s_hold (at most 60 s, so that a
 *  broker that runs it in its frontend still ends).  */
static void
s_hook (const char *call)
{
    pthread_mutex_lock (&s_mutex);
    if (streq (call, "key_get"))
        s_key_gets++;
    if (streq (call, "tenant_read"))
        s_tenant_reads++;
    if (streq (call, "pin_check") && s_hold) {
        struct timespec until;
        clock_gettime (CLOCK_REALTIME, &until);
        until.tv_sec += 60;
        s_held = true;
        pthread_cond_broadcast (&s_cond);
        while (s_hold && pthread_cond_timedwait (&s_cond, &s_mutex, &until) == 0)
            ;
        s_held = false;
    }
    pthread_mutex_unlock (&s_mutex);
}

/*  The reads counted so far.  */
static void
s_reads (size_t *key_gets, size_t *tenant_reads)
{
    pthread_mutex_lock (&s_mutex);
    *key_gets = s_key_gets;
    *tenant_reads = s_tenant_reads;
    pthread_mutex_unlock (&s_mutex);
}

/* ---- set-up ----------------------------------------------------------- */

/*  Stores S_KEYS RSA keys of tenant demo.  */
static void
s_keys (void)
{
    keystore_t *ks = th_keystore_open (s_dir);
    for (size_t i = 0; i < S_KEYS; i++) {
        s_pkey [i] = EVP_RSA_gen (2048);
        key_info_params_t params = { .label = "fast" };
        Cs__KeyInfo *info = key_info_from_pkey (s_pkey [i], &params);
        size_t len = 0;
        uint8_t *der = th_pkcs8 (s_pkey [i], &len);
        ck_assert_int_eq (keystore_key_put (ks, "demo", info, der, len), 0);
        snprintf (s_ref [i], sizeof s_ref [i], "%s", info->ref);
        OPENSSL_cleanse (der, len);
        OPENSSL_free (der);
        cs__key_info__free_unpacked (info, NULL);
    }
    keystore_destroy (&ks);
}

/*  Starts the broker with keystore/key-cache = key_cache (-1: the default).  */
static void
s_setup_with (int key_cache)
{
    s_dir = th_tmpdir ();
    th_certs (s_dir, "alice", "demo");
    th_client_add (s_dir, "bob", "demo");
    th_keystore (s_dir);
    s_keys ();
    char line [64] = "";
    if (key_cache >= 0)
        snprintf (line, sizeof line, "    key-cache = %d\n", key_cache);
    tb_conf_write (s_dir, "", "%s"          /* key-cache goes into the keystore section */
        "drivers\n    cpu\n        type = openssl\n        threads = 1\n", line);
    s_config = tb_config_load (s_dir);
    ck_assert_int_eq (s_config->key_cache, key_cache >= 0 ? key_cache : 1024);
    ck_assert_int_eq (s_config->slow_threads, 1);
    s_hold = false;
    s_key_gets = s_tenant_reads = 0;
    keystore_set_test_hook (s_hook);
    s_server = tb_server_new (s_config);
    s_alice = th_dealer (s_dir, "alice", server_endpoint (s_server));
    s_bob = th_dealer (s_dir, "bob", server_endpoint (s_server));
    s_ticket = th_login_ok (s_bob, "1234", &s_ticket_len);
}

static void
s_setup (void)
{
    s_setup_with (-1);
}

static void
s_setup_two (void)
{
    s_setup_with (2);
}

static void
s_teardown (void)
{
    pthread_mutex_lock (&s_mutex);
    s_hold = false;
    pthread_cond_broadcast (&s_cond);
    pthread_mutex_unlock (&s_mutex);
    zsock_destroy (&s_alice);
    zsock_destroy (&s_bob);
    tb_stop (&s_server, &s_config);
    keystore_set_test_hook (NULL);
    for (size_t i = 0; i < S_KEYS; i++)
        EVP_PKEY_free (s_pkey [i]);
    free (s_ticket);
    th_tmpdir_remove (&s_dir);
}

/* ---- requests ----------------------------------------------------------- */

/*  A request with bob's ticket: a hello when `hello`, then a signature
 *  with key k.  The DigestInfo goes to di.  Caller frees.  */
static Cs__Request *
s_sign_request (bool hello, size_t k, uint8_t di [51])
{
    th_digest_info ("fast path", di);
    Cs__Request *req = th_request (hello ? 2 : 1, 20 + k);
    if (hello)
        th_job_hello (req->jobs [0]);
    th_job_crypto (req->jobs [hello ? 1 : 0], true, (const uint8_t *) s_ref [k], strlen (s_ref [k]),
                   CKM_RSA_PKCS, di, 51);
    req->ticket = (ProtobufCBinaryData) { s_ticket_len, s_ticket };
    return req;
}

/*  The rv of a reply's signature (its last result), verified with OpenSSL
 *  with key k when CKR_OK.  Frees the reply.  */
static uint64_t
s_signed (Cs__Reply *reply, size_t k, const uint8_t di [51])
{
    ck_assert_uint_eq (reply->rv, CKR_OK);
    const Cs__Result *result = reply->results [reply->n_results - 1];
    uint64_t rv = result->rv;
    if (rv == CKR_OK)
        ck_assert (th_verify_rsa_pkcs1 (s_pkey [k], di, 51, result->data.data, result->data.len));
    cs__reply__free_unpacked (reply, NULL);
    return rv;
}

/*  Bob signs with key k; returns the rv.  */
static uint64_t
s_sign (size_t k)
{
    uint8_t di [51];
    Cs__Request *req = s_sign_request (false, k, di);
    uint64_t rv = s_signed (th_call (s_bob, req), k, di);
    req->ticket = (ProtobufCBinaryData) { 0, NULL };
    th_request_free (req);
    return rv;
}

/*  Bob's key job on key k (job kind_case with its struct, borrowed).  */
static uint64_t
s_key_job (Cs__Job__KindCase kind, void *body)
{
    Cs__Request *req = th_request (1, 30);
    req->jobs [0]->kind_case = kind;
    req->jobs [0]->hello = body;            /* the union: any member */
    req->ticket = (ProtobufCBinaryData) { s_ticket_len, s_ticket };
    Cs__Reply *reply = th_call (s_bob, req);
    ck_assert_uint_eq (reply->rv, CKR_OK);
    uint64_t rv = reply->results [0]->rv;
    cs__reply__free_unpacked (reply, NULL);
    req->jobs [0]->hello = NULL;
    req->ticket = (ProtobufCBinaryData) { 0, NULL };
    th_request_free (req);
    return rv;
}

/* ---- tests ----------------------------------------------------------------- */

/*  A login does not stall other clients: alice's PIN check is held in the
 *  middle (the hook); meanwhile bob's request (hello + a keystore
 *  signature) is answered, and alice's only once the check goes on.  A
 *  frontend that checks PINs itself never answers bob while it waits.  */
START_TEST (test_login_does_not_stall_others)
{
    uint8_t di [51];
    Cs__Request *req = s_sign_request (true, 0, di);
    ck_assert_uint_eq (s_signed (th_call (s_bob, req), 0, di), CKR_OK);     /* tenant row, key cached */
    pthread_mutex_lock (&s_mutex);
    s_hold = true;
    pthread_mutex_unlock (&s_mutex);
    Cs__Request *login = th_request (1, 40);
    th_job_login (login->jobs [0], CKU_USER, "1234");
    th_send (s_alice, login);
    pthread_mutex_lock (&s_mutex);
    struct timespec until;
    clock_gettime (CLOCK_REALTIME, &until);
    until.tv_sec += TH_TIMEOUT_MS / 1000;
    while (!s_held && pthread_cond_timedwait (&s_cond, &s_mutex, &until) == 0)
        ;
    bool held = s_held;
    pthread_mutex_unlock (&s_mutex);
    ck_assert_msg (held, "alice's PIN check did not start");

    Cs__Reply *reply = th_call (s_bob, req);        /* fails after TH_TIMEOUT_MS when stalled */
    ck_assert_uint_eq (reply->n_results, 2);
    ck_assert_uint_eq (reply->results [0]->rv, CKR_OK);
    ck_assert_int_eq (reply->results [0]->kind_case, CS__RESULT__KIND_HELLO);
    ck_assert_uint_eq (s_signed (reply, 0, di), CKR_OK);
    zpoller_t *poller = zpoller_new (s_alice, NULL);
    ck_assert_ptr_null (zpoller_wait (poller, 0));      /* alice's PIN check is still held */
    zpoller_destroy (&poller);

    pthread_mutex_lock (&s_mutex);
    s_hold = false;
    pthread_cond_broadcast (&s_cond);
    pthread_mutex_unlock (&s_mutex);
    reply = th_recv (s_alice);
    ck_assert_uint_eq (reply->request_id, 40);
    ck_assert_uint_eq (reply->results [0]->rv, CKR_OK);
    ck_assert_int_eq (reply->results [0]->kind_case, CS__RESULT__KIND_LOGIN);
    cs__reply__free_unpacked (reply, NULL);
    th_request_free (login);
    req->ticket = (ProtobufCBinaryData) { 0, NULL };
    th_request_free (req);
}
END_TEST

/*  A job with a cached keystore key reads neither the key's row nor the
 *  tenant's (the ticket check): the first job of a key reads both once.  */
START_TEST (test_cached_key_reads_nothing)
{
    size_t gets0, tenants0, gets1, tenants1, gets2, tenants2;
    s_reads (&gets0, &tenants0);
    ck_assert_uint_eq (s_sign (1), CKR_OK);
    s_reads (&gets1, &tenants1);
    ck_assert_uint_eq (gets1 - gets0, 1);           /* the first job reads the row */
    ck_assert_uint_le (tenants1 - tenants0, 1);     /* and the tenant row, unless cached */
    for (int i = 0; i < 5; i++)
        ck_assert_uint_eq (s_sign (1), CKR_OK);
    s_reads (&gets2, &tenants2);
    ck_assert_uint_eq (gets2, gets1);
    ck_assert_uint_eq (tenants2, tenants1);
}
END_TEST

/*  What the broker changes, and what others change in the file, is seen
 *  by the next job: CKA_SIGN set FALSE through the broker, the key
 *  destroyed through the broker, a row deleted with SQLite, the user PIN
 *  set by another keystore connection (as cryptoserver-admin tenant
 *  set-pin does: every login ends).  */
START_TEST (test_cache_sees_changes)
{
    ck_assert_uint_eq (s_sign (0), CKR_OK);
    ck_assert_uint_eq (s_sign (1), CKR_OK);
    ck_assert_uint_eq (s_sign (2), CKR_OK);
    /*  C_SetAttributeValue (CKA_SIGN FALSE) through the broker.  */
    Cs__Attribute no_sign = CS__ATTRIBUTE__INIT, *attrs [] = { &no_sign };
    no_sign.type = CKA_SIGN;
    no_sign.value_case = CS__ATTRIBUTE__VALUE_FLAG;
    no_sign.flag = false;
    Cs__SetKeyAttributesJob set = CS__SET_KEY_ATTRIBUTES_JOB__INIT;
    set.ref = s_ref [0];
    set.object = CKO_PRIVATE_KEY;
    set.n_attributes = 1;
    set.attributes = attrs;
    ck_assert_uint_eq (s_key_job (CS__JOB__KIND_SET_KEY_ATTRIBUTES, &set), CKR_OK);
    ck_assert_uint_eq (s_sign (0), CKR_KEY_FUNCTION_NOT_PERMITTED);
    /*  C_DestroyObject of both halves through the broker.  */
    Cs__DestroyKeyJob destroy = CS__DESTROY_KEY_JOB__INIT;
    destroy.ref = s_ref [1];
    destroy.object = CKO_PRIVATE_KEY;
    ck_assert_uint_eq (s_key_job (CS__JOB__KIND_DESTROY_KEY, &destroy), CKR_OK);
    ck_assert_uint_eq (s_sign (1), CKR_KEY_HANDLE_INVALID);
    /*  The row deleted by another writer (cryptoserver-admin, another
        broker): a raw SQL delete would now be refused as tampering at the
        next open (cryptoserver-keystore(5), "Rollback").  */
    keystore_t *ks = th_keystore_open (s_dir);
    ck_assert_int_eq (keystore_key_delete (ks, "demo", s_ref [2]), 0);
    ck_assert_uint_eq (s_sign (2), CKR_KEY_HANDLE_INVALID);
    /*  A new user PIN set by another connection ends bob's login.  */
    ck_assert_uint_eq (keystore_pin_set (ks, "demo", CKU_USER, "4321", 4, NULL), CKR_OK);
    keystore_destroy (&ks);
    uint8_t di [51];
    Cs__Request *req = s_sign_request (false, 0, di);
    ck_assert_uint_eq (s_signed (th_call (s_bob, req), 0, di), CKR_USER_NOT_LOGGED_IN);
    req->ticket = (ProtobufCBinaryData) { 0, NULL };
    th_request_free (req);
}
END_TEST

/*  keystore/key-cache = 2: after keys 0, 1, 2 the least recently used one
 *  (0) is out and read again; the two others are not.  */
START_TEST (test_cache_bound)
{
    size_t gets0, gets1, gets2, tenants;
    for (size_t k = 0; k < S_KEYS; k++)
        ck_assert_uint_eq (s_sign (k), CKR_OK);
    s_reads (&gets0, &tenants);
    ck_assert_uint_eq (s_sign (2), CKR_OK);
    ck_assert_uint_eq (s_sign (1), CKR_OK);
    s_reads (&gets1, &tenants);
    ck_assert_uint_eq (gets1, gets0);               /* 1 and 2 are cached */
    ck_assert_uint_eq (s_sign (0), CKR_OK);
    s_reads (&gets2, &tenants);
    ck_assert_uint_eq (gets2, gets1 + 1);           /* 0 was evicted */
}
END_TEST

/* ---- the fast lane ------------------------------------------------------ */

static EVP_PKEY *s_ec;
static char s_ec_ref [64];

/*  A broker with metrics, broker/fast-lane-us = lane_us, one openssl board
 *  (threads = 1, board_lines added) and an EC P-256 keystore key of tenant
 *  demo; bob logged in.  */
static void
s_lane_setup (int lane_us, const char *board_lines)
{
    s_dir = th_tmpdir ();
    th_certs (s_dir, "alice", "demo");
    th_client_add (s_dir, "bob", "demo");
    th_keystore (s_dir);
    keystore_t *ks = th_keystore_open (s_dir);
    s_ec = EVP_EC_gen ("P-256");
    key_info_params_t params = { .label = "lane" };
    Cs__KeyInfo *info = key_info_from_pkey (s_ec, &params);
    size_t len = 0;
    uint8_t *der = th_pkcs8 (s_ec, &len);
    ck_assert_int_eq (keystore_key_put (ks, "demo", info, der, len), 0);
    snprintf (s_ec_ref, sizeof s_ec_ref, "%s", info->ref);
    OPENSSL_cleanse (der, len);
    OPENSSL_free (der);
    cs__key_info__free_unpacked (info, NULL);
    keystore_destroy (&ks);
    char broker [256];
    snprintf (broker, sizeof broker, "    metrics = \"http://127.0.0.1:0/metrics\"\n    fast-lane-us = %d\n", lane_us);
    tb_conf_write (s_dir, broker, "drivers\n    cpu\n        type = openssl\n        threads = 1\n%s",
                   board_lines);
    s_config = tb_config_load (s_dir);
    ck_assert_int_eq (s_config->fast_lane_us, lane_us);
    s_server = tb_server_new (s_config);
    s_bob = th_dealer (s_dir, "bob", server_endpoint (s_server));
    s_ticket = th_login_ok (s_bob, "1234", &s_ticket_len);
}

/*  The largest limit: on a loaded machine a P-256 signature stays far below it.  */
static void s_lane_on (void) { s_lane_setup (10000, ""); }
static void s_lane_off (void) { s_lane_setup (0, ""); }
static void s_lane_verified (void) { s_lane_setup (10000, "        verify = always\n"); }

static void
s_lane_teardown (void)
{
    zsock_destroy (&s_bob);
    tb_stop (&s_server, &s_config);
    EVP_PKEY_free (s_ec);
    s_ec = NULL;
    free (s_ticket);
    th_tmpdir_remove (&s_dir);
}

/*  Bob signs n SHA-256 digests with CKM_ECDSA and the keystore key; each
 *  signature verified with OpenSSL.  */
static void
s_lane_sign (size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint8_t digest [32];
        char msg [32];
        snprintf (msg, sizeof msg, "lane %zu", i);
        SHA256 ((const uint8_t *) msg, strlen (msg), digest);
        Cs__Request *req = th_request (1, 100 + i);
        th_job_crypto (req->jobs [0], true, (const uint8_t *) s_ec_ref, strlen (s_ec_ref), CKM_ECDSA,
                       digest, sizeof digest);
        req->ticket = (ProtobufCBinaryData) { s_ticket_len, s_ticket };
        Cs__Reply *reply = th_call (s_bob, req);
        ck_assert_uint_eq (reply->rv, CKR_OK);
        ck_assert_uint_eq (reply->results [0]->rv, CKR_OK);
        ck_assert (th_verify_ecdsa (s_ec, digest, sizeof digest, reply->results [0]->data.data,
                                    reply->results [0]->data.len));
        cs__reply__free_unpacked (reply, NULL);
        req->ticket = (ProtobufCBinaryData) { 0, NULL };
        th_request_free (req);
    }
}

/*  cryptoserver_fast_lane_jobs_total as the metrics endpoint serves it.  */
static double
s_lane_jobs (void)
{
    const char *url = server_metrics_url (s_server);
    ck_assert_ptr_nonnull (url);
    int status = 0;
    char *response = tm_http (tm_url_port (url), "GET", "/metrics", &status);
    ck_assert_int_eq (status, 200);
    double jobs = tm_sample (tm_body (response), "cryptoserver_fast_lane_jobs_total");
    free (response);
    return jobs;
}

/*  The first job is measured on the worker; later ones run on the reactor.  */
START_TEST (test_fast_lane_runs)
{
    s_lane_sign (40);
    double jobs = s_lane_jobs ();
    ck_assert_msg (jobs >= 30 && jobs <= 39, "fast lane jobs: %g of 40", jobs);
}
END_TEST

/*  broker/fast-lane-us = 0, or a board whose ECDSA results are verified
 *  (the check runs in workers): every job goes to the worker.  */
START_TEST (test_fast_lane_not_taken)
{
    s_lane_sign (20);
    ck_assert_msg (s_lane_jobs () == 0, "fast lane jobs: %g", s_lane_jobs ());
}
END_TEST

int
main (void)
{
    Suite *suite = suite_create ("broker_fast");
    TCase *tc = tcase_create ("fast");
    tcase_add_checked_fixture (tc, s_setup, s_teardown);
    tcase_set_timeout (tc, 120);
    tcase_add_test (tc, test_login_does_not_stall_others);
    tcase_add_test (tc, test_cached_key_reads_nothing);
    tcase_add_test (tc, test_cache_sees_changes);
    suite_add_tcase (suite, tc);
    TCase *bound = tcase_create ("bound");
    tcase_add_checked_fixture (bound, s_setup_two, s_teardown);
    tcase_set_timeout (bound, 120);
    tcase_add_test (bound, test_cache_bound);
    suite_add_tcase (suite, bound);
    TCase *lane = tcase_create ("fast_lane");
    tcase_add_checked_fixture (lane, s_lane_on, s_lane_teardown);
    tcase_set_timeout (lane, 120);
    tcase_add_test (lane, test_fast_lane_runs);
    suite_add_tcase (suite, lane);
    TCase *no_lane = tcase_create ("fast_lane_off");
    tcase_add_checked_fixture (no_lane, s_lane_off, s_lane_teardown);
    tcase_set_timeout (no_lane, 120);
    tcase_add_test (no_lane, test_fast_lane_not_taken);
    suite_add_tcase (suite, no_lane);
    TCase *verified = tcase_create ("fast_lane_verified");
    tcase_add_checked_fixture (verified, s_lane_verified, s_lane_teardown);
    tcase_set_timeout (verified, 120);
    tcase_add_test (verified, test_fast_lane_not_taken);
    suite_add_tcase (suite, verified);
    return tr_run (suite);
}
