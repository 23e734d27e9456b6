/*  test_broker_limits.c — bounded input (issue #7 item 5): every limit of
 *  docs/CONTRACTS.md "Limits" gets its documented CK_RV at the wire, the
 *  broker stays up and keeps serving another client.  Whole broker
 *  in-process on tcp://127.0.0.1:! with CURVE; clients alice (tenant demo)
 *  and eve (tenant other).  Boards: an openssl board (per-request and
 *  keystore keys) and a sim board holding RSA key "board:01" of tenant demo,
 *  whose latency each test case sets (the sim board stands for a slow HSM:
 *  requests wait for it, which is what the queue limits bound).  Needs
 *  CRYPTOSERVER_DRIVER_DIR (make check).
 */
#include <openssl/core_names.h>
#include <openssl/param_build.h>
#include <openssl/x509.h>
#include "test_broker_fixture.h"
#include "frontend.h"
#include "keyjobs.h"
#include "test_run.h"

static char *s_dir;
static EVP_PKEY *s_key;                 /* the sim board's key */
static broker_config_t *s_config;
static server_t *s_server;
static zsock_t *s_alice, *s_eve;
static uint8_t *s_ticket;               /* alice's CKU_USER ticket */
static size_t s_ticket_len;
static const uint8_t s_board_ref [] = "board:01";

/*  Starts a broker with `extra` lines in its broker section and a sim
 *  board of latency_ms (threads workers), connects alice and eve and logs
 *  alice in.  */
static void
s_start (const char *extra, int latency_ms, int threads)
{
    s_dir = th_tmpdir ();
    s_key = th_key_pem (s_dir, "key.pem", 2048);
    th_certs (s_dir, "alice", "demo");
    th_client_add (s_dir, "eve", "other");
    th_keystore (s_dir);
    tb_conf_write (s_dir, extra,
        "drivers\n"
        "    cpu\n        type = openssl\n        threads = 2\n"
        "    sim\n        type = sim\n        key-file = key.pem\n        key-id = 01\n"
        "        latency-ms = %d\n        threads = %d\n        tenant = demo\n",
        latency_ms, threads);
    s_server = tb_start (s_dir, &s_config);
    s_alice = th_dealer (s_dir, "alice", server_endpoint (s_server));
    s_eve = th_dealer (s_dir, "eve", server_endpoint (s_server));
    s_ticket = th_login_ok (s_alice, "1234", &s_ticket_len);
}

static void
s_setup (void)
{
    s_start ("", 0, 1);
}

static void
s_teardown (void)
{
    frontend_max_reply = CS_WIRE_MAX_REPLY;     /* CK_FORK=no (make memcheck): one process */
    zsock_destroy (&s_alice);
    zsock_destroy (&s_eve);
    tb_stop (&s_server, &s_config);
    EVP_PKEY_free (s_key);
    free (s_ticket);
    th_tmpdir_remove (&s_dir);
}

/*  Eve's hello is answered: the broker is up and serves another client.  */
static void
s_eve_served (void)
{
    Cs__Request *req = th_request (1, 999);
    th_job_hello (req->jobs [0]);
    Cs__Reply *reply = th_call (s_eve, req);
    ck_assert_uint_eq (reply->rv, CKR_OK);
    ck_assert_uint_eq (reply->results [0]->rv, CKR_OK);
    ck_assert_str_eq (reply->results [0]->hello->token_label, "other");
    cs__reply__free_unpacked (reply, NULL);
    th_request_free (req);
}

/*  Sends req as alice and returns the reply's request-level rv, checking
 *  that the reply names the request (the module matches replies by id).  */
static uint64_t
s_request_rv (Cs__Request *req)
{
    th_send (s_alice, req);
    Cs__Reply *reply = th_recv (s_alice);
    ck_assert_uint_eq (reply->request_id, req->request_id);
    uint64_t rv = reply->rv;
    if (rv != CKR_OK)
        ck_assert_uint_eq (reply->n_results, 0);
    cs__reply__free_unpacked (reply, NULL);
    return rv;
}

/*  Sends a one-job request as alice and returns the job's rv.  */
static uint64_t
s_job_rv (Cs__Request *req, Cs__Reply **reply_p)
{
    Cs__Reply *reply = th_call (s_alice, req);
    ck_assert_uint_eq (reply->rv, CKR_OK);
    ck_assert_uint_eq (reply->n_results, 1);
    uint64_t rv = reply->results [0]->rv;
    if (reply_p)
        *reply_p = reply;
    else
        cs__reply__free_unpacked (reply, NULL);
    return rv;
}

/*  A one-job request of alice with her ticket.  */
static Cs__Request *
s_request (uint64_t id)
{
    Cs__Request *req = th_request (1, id);
    req->ticket = (ProtobufCBinaryData) { s_ticket_len, s_ticket };
    return req;
}

/*  Frees a request whose job structs live on the caller's stack.  */
static void
s_request_free (Cs__Request *req)
{
    for (size_t i = 0; i < req->n_jobs; i++) {
        req->jobs [i]->kind_case = CS__JOB__KIND_HELLO;
        req->jobs [i]->hello = NULL;
    }
    th_request_free (req);
}

/*  An RSA key of `bits` with random (not prime) values: enough for the
 *  broker's size check, which must refuse it before any board computes with
 *  it.  private: PKCS#8 DER, else SPKI DER (caller frees with OPENSSL_free).  */
static uint8_t *
s_fake_rsa (unsigned bits, bool private, size_t *len_p)
{
    const char *names [] = { OSSL_PKEY_PARAM_RSA_N, OSSL_PKEY_PARAM_RSA_E, OSSL_PKEY_PARAM_RSA_D,
        OSSL_PKEY_PARAM_RSA_FACTOR1, OSSL_PKEY_PARAM_RSA_FACTOR2, OSSL_PKEY_PARAM_RSA_EXPONENT1,
        OSSL_PKEY_PARAM_RSA_EXPONENT2, OSSL_PKEY_PARAM_RSA_COEFFICIENT1 };
    BIGNUM *bn [8];
    OSSL_PARAM_BLD *bld = OSSL_PARAM_BLD_new ();
    size_t n = private ? 8 : 2;
    for (size_t i = 0; i < n; i++) {
        bn [i] = BN_new ();
        if (i == 1)
            BN_set_word (bn [i], 65537);
        else
            ck_assert (BN_rand (bn [i], i == 0 || i == 2 ? (int) bits : (int) bits / 2,
                                BN_RAND_TOP_ONE, BN_RAND_BOTTOM_ODD));
        ck_assert (OSSL_PARAM_BLD_push_BN (bld, names [i], bn [i]));
    }
    OSSL_PARAM *params = OSSL_PARAM_BLD_to_param (bld);
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_name (NULL, "RSA", NULL);
    EVP_PKEY *pkey = NULL;
    ck_assert (ctx && EVP_PKEY_fromdata_init (ctx) > 0);
    ck_assert (EVP_PKEY_fromdata (ctx, &pkey, private ? EVP_PKEY_KEYPAIR : EVP_PKEY_PUBLIC_KEY, params) > 0);
    uint8_t *der = NULL;
    if (private)
        der = th_pkcs8 (pkey, len_p);
    else {
        int len = i2d_PUBKEY (pkey, &der);
        ck_assert_int_gt (len, 0);
        *len_p = (size_t) len;
    }
    EVP_PKEY_free (pkey);
    EVP_PKEY_CTX_free (ctx);
    OSSL_PARAM_free (params);
    OSSL_PARAM_BLD_free (bld);
    for (size_t i = 0; i < n; i++)
        BN_free (bn [i]);
    return der;
}

/*  Signs a DigestInfo as alice with a per-request key; returns the job's rv.  */
static uint64_t
s_sign_per_request (const uint8_t *der, size_t len)
{
    uint8_t di [51];
    th_digest_info ("limits", di);
    Cs__Request *req = s_request (20);
    th_job_crypto (req->jobs [0], true, NULL, 0, CKM_RSA_PKCS, di, 51);
    req->jobs [0]->sign->key_pkcs8 = (ProtobufCBinaryData) { len, (uint8_t *) der };
    uint64_t rv = s_job_rv (req, NULL);
    th_request_free (req);
    return rv;
}

/* ------------------------------------------------------------------ */

START_TEST (test_per_request_rsa_bits)
{
    /*  9000 bits: its DER (~2.6 KB) is under CS_WIRE_MAX_KEY_DER, its size
        is over CS_WIRE_MAX_RSA_BITS.  */
    size_t len = 0;
    uint8_t *der = s_fake_rsa (9000, true, &len);
    ck_assert_uint_le (len, CS_WIRE_MAX_KEY_DER);
    ck_assert_uint_eq (s_sign_per_request (der, len), CKR_KEY_SIZE_RANGE);
    OPENSSL_free (der);
    /*  A real key still signs, and eve is served.  */
    EVP_PKEY *pkey = EVP_RSA_gen (2048);
    der = th_pkcs8 (pkey, &len);
    ck_assert_uint_eq (s_sign_per_request (der, len), CKR_OK);
    OPENSSL_free (der);
    EVP_PKEY_free (pkey);
    s_eve_served ();
}
END_TEST

START_TEST (test_import_rsa_bits)
{
    size_t len = 0;
    uint8_t *der = s_fake_rsa (9000, false, &len);
    Cs__ImportKeyJob imp = CS__IMPORT_KEY_JOB__INIT;
    imp.public_spki = (ProtobufCBinaryData) { len, der };
    Cs__Request *req = s_request (21);
    req->jobs [0]->kind_case = CS__JOB__KIND_IMPORT_KEY;
    req->jobs [0]->import_key = &imp;
    ck_assert_uint_eq (s_job_rv (req, NULL), CKR_KEY_SIZE_RANGE);
    s_request_free (req);
    OPENSSL_free (der);
    s_eve_served ();
}
END_TEST

START_TEST (test_key_der_size)
{
    static uint8_t big [CS_WIRE_MAX_KEY_DER + 1];
    memset (big, 0x30, sizeof big);
    uint8_t di [51];
    th_digest_info ("der", di);
    Cs__Request *req = s_request (22);
    th_job_crypto (req->jobs [0], true, NULL, 0, CKM_RSA_PKCS, di, 51);
    req->jobs [0]->sign->key_pkcs8 = (ProtobufCBinaryData) { sizeof big, big };
    ck_assert_uint_eq (s_request_rv (req), CKR_KEY_SIZE_RANGE);
    th_request_free (req);
    s_eve_served ();
}
END_TEST

START_TEST (test_jobs_per_request)
{
    Cs__Request *req = th_request (CS_WIRE_MAX_JOBS + 1, 23);
    for (size_t i = 0; i < req->n_jobs; i++)
        th_job_hello (req->jobs [i]);
    ck_assert_uint_eq (s_request_rv (req), CKR_DEVICE_MEMORY);
    req->n_jobs = CS_WIRE_MAX_JOBS;         /* the limit itself is fine */
    ck_assert_uint_eq (s_request_rv (req), CKR_OK);
    req->n_jobs = CS_WIRE_MAX_JOBS + 1;
    th_request_free (req);
    s_eve_served ();
}
END_TEST

/*  Byte-array attributes a public key may change, any length
 *  (common/cs_attr_rules.h).  */
static const CK_ATTRIBUTE_TYPE s_storable [] = { CKA_SUBJECT, CKA_START_DATE, CKA_END_DATE };

/*  A set-attributes job on alice's ref: n attributes of `size` bytes each,
 *  types s_storable [first ...], or CKA_VENDOR_DEFINED + i when first is
 *  CKA_VENDOR_DEFINED; returns the rv at request level when the wire
 *  refuses it, else the job's rv.  */
static uint64_t
s_set_attributes (const char *ref, size_t n, size_t size, unsigned long first)
{
    Cs__Attribute *attrs = calloc (n, sizeof *attrs), **ptrs = calloc (n, sizeof *ptrs);
    uint8_t *value = calloc (1, size ? size : 1);
    memset (value, 'v', size);
    for (size_t i = 0; i < n; i++) {
        cs__attribute__init (&attrs [i]);
        attrs [i].type = first == CKA_VENDOR_DEFINED ? CKA_VENDOR_DEFINED + i : s_storable [first + i];
        attrs [i].value_case = CS__ATTRIBUTE__VALUE_BYTES;
        attrs [i].bytes = (ProtobufCBinaryData) { size, value };
        ptrs [i] = &attrs [i];
    }
    Cs__SetKeyAttributesJob set = CS__SET_KEY_ATTRIBUTES_JOB__INIT;
    set.ref = (char *) ref;
    set.object = CKO_PUBLIC_KEY;
    set.n_attributes = n;
    set.attributes = ptrs;
    Cs__Request *req = s_request (24);
    req->jobs [0]->kind_case = CS__JOB__KIND_SET_KEY_ATTRIBUTES;
    req->jobs [0]->set_key_attributes = &set;
    th_send (s_alice, req);
    Cs__Reply *reply = th_recv (s_alice);
    ck_assert_uint_eq (reply->request_id, 24);
    uint64_t rv = reply->rv != CKR_OK ? reply->rv : reply->results [0]->rv;
    cs__reply__free_unpacked (reply, NULL);
    s_request_free (req);
    free (value);
    free (attrs);
    free (ptrs);
    return rv;
}

/*  Imports a P-256 public key as alice with `n` attributes (CKA_SUBJECT,
 *  CKA_START_DATE, CKA_END_DATE, CKA_PUBLIC_KEY_INFO, CKA_ALLOWED_MECHANISMS,
 *  in that order) of `size` bytes each; the job's rv, the ref in *ref_p
 *  (caller frees) when CKR_OK.  */
static uint64_t
s_import_public_with (size_t n, size_t size, char **ref_p)
{
    static const CK_ATTRIBUTE_TYPE types [] = { CKA_SUBJECT, CKA_START_DATE, CKA_END_DATE,
                                                CKA_PUBLIC_KEY_INFO, CKA_ALLOWED_MECHANISMS };
    Cs__Attribute attrs [5], *ptrs [5];
    uint8_t *value = calloc (1, size ? size : 1);
    EVP_PKEY *pkey = EVP_EC_gen ("P-256");
    uint8_t *der = NULL;
    int len = i2d_PUBKEY (pkey, &der);
    ck_assert_uint_le (n, 5);
    for (size_t i = 0; i < n; i++) {
        cs__attribute__init (&attrs [i]);
        attrs [i].type = types [i];
        attrs [i].value_case = CS__ATTRIBUTE__VALUE_BYTES;
        attrs [i].bytes = (ProtobufCBinaryData) { size, value };
        ptrs [i] = &attrs [i];
    }
    Cs__ImportKeyJob imp = CS__IMPORT_KEY_JOB__INIT;
    imp.public_spki = (ProtobufCBinaryData) { (size_t) len, der };
    imp.template_ = ptrs;
    imp.n_template_ = n;
    Cs__Request *req = s_request (25);
    req->jobs [0]->kind_case = CS__JOB__KIND_IMPORT_KEY;
    req->jobs [0]->import_key = &imp;
    Cs__Reply *reply = NULL;
    uint64_t rv = s_job_rv (req, &reply);
    if (rv == CKR_OK)
        *ref_p = strdup (reply->results [0]->imported->key->ref);
    if (reply)
        cs__reply__free_unpacked (reply, NULL);
    s_request_free (req);
    OPENSSL_free (der);
    EVP_PKEY_free (pkey);
    free (value);
    return rv;
}

/*  Imports a P-256 public key as alice; returns its ref (caller frees).  */
static char *
s_import_public (void)
{
    EVP_PKEY *pkey = EVP_EC_gen ("P-256");
    uint8_t *der = NULL;
    int len = i2d_PUBKEY (pkey, &der);
    Cs__ImportKeyJob imp = CS__IMPORT_KEY_JOB__INIT;
    imp.public_spki = (ProtobufCBinaryData) { (size_t) len, der };
    Cs__Request *req = s_request (25);
    req->jobs [0]->kind_case = CS__JOB__KIND_IMPORT_KEY;
    req->jobs [0]->import_key = &imp;
    Cs__Reply *reply = NULL;
    ck_assert_uint_eq (s_job_rv (req, &reply), CKR_OK);
    char *ref = strdup (reply->results [0]->imported->key->ref);
    cs__reply__free_unpacked (reply, NULL);
    s_request_free (req);
    OPENSSL_free (der);
    EVP_PKEY_free (pkey);
    return ref;
}

/*  ListKeys as alice: the request-level rv (CKR_OK: *n_p keys).  */
static uint64_t
s_list_keys (size_t *n_p)
{
    Cs__Request *req = th_request (1, 26);
    th_job_list_keys (req->jobs [0]);
    th_send (s_alice, req);
    Cs__Reply *reply = th_recv (s_alice);
    ck_assert_uint_eq (reply->request_id, 26);
    uint64_t rv = reply->rv;
    if (rv == CKR_OK && n_p)
        *n_p = reply->results [0]->keys->n_keys;
    cs__reply__free_unpacked (reply, NULL);
    th_request_free (req);
    return rv;
}

START_TEST (test_template_limits)
{
    char *ref = s_import_public ();
    /*  One template: at the wire, before any key is touched.  */
    ck_assert_uint_eq (s_set_attributes (ref, CS_WIRE_MAX_ATTRIBUTES + 1, 1, CKA_VENDOR_DEFINED),
                       CKR_TEMPLATE_INCONSISTENT);
    ck_assert_uint_eq (s_set_attributes (ref, 1, CS_WIRE_MAX_ATTR_BYTES + 1, 0), CKR_ATTRIBUTE_VALUE_INVALID);
    /*  Types no key object has are refused (common/cs_attr_rules.h), so
        the count of attributes per object stays far below
        KEYJOBS_MAX_ATTRIBUTES.  */
    ck_assert_uint_eq (s_set_attributes (ref, 40, 1, CKA_VENDOR_DEFINED), CKR_ATTRIBUTE_TYPE_INVALID);
    /*  One key: its attribute bytes add up; over KEYJOBS_MAX_ATTR_BYTES
        at import.  */
    ck_assert_uint_eq (s_set_attributes (ref, 3, CS_WIRE_MAX_ATTR_BYTES, 0), CKR_OK);
    char *big = NULL;
    ck_assert_uint_eq (s_import_public_with (5, CS_WIRE_MAX_ATTR_BYTES, &big), CKR_ATTRIBUTE_VALUE_INVALID);
    ck_assert_uint_eq (s_import_public_with (3, CS_WIRE_MAX_ATTR_BYTES, &big), CKR_OK);
    /*  Nothing of the refused jobs was stored; the keys still list.  */
    size_t n = 0;
    ck_assert_uint_eq (s_list_keys (&n), CKR_OK);
    ck_assert_uint_eq (n, 3);               /* board:01 and the imported keys */
    ck_assert_uint_eq (s_set_attributes (ref, 1, 1, 0), CKR_OK);
    free (big);
    free (ref);
    s_eve_served ();
}
END_TEST

START_TEST (test_pin_length)
{
    char pin [CS_WIRE_MAX_PIN + 2];
    memset (pin, '1', sizeof pin - 1);
    pin [sizeof pin - 1] = 0;
    Cs__Request *req = th_request (1, 27);
    th_job_login (req->jobs [0], CKU_USER, pin);
    ck_assert_uint_eq (s_request_rv (req), CKR_PIN_LEN_RANGE);
    th_request_free (req);
    s_eve_served ();
}
END_TEST

/* ------------------------------------------------------------------ */
/*  Reply size: frontend_max_reply lowered to 14000 bytes, so that two keys
 *  with 12 KiB and 4 KiB of attributes overflow a key list, while each
 *  set-attributes reply (one key) still fits.  */

static void
s_setup_small_replies (void)
{
    frontend_max_reply = 14000;
    s_start ("", 0, 1);
}

START_TEST (test_reply_size)
{
    char *ref1 = s_import_public (), *ref2 = s_import_public ();
    ck_assert_uint_eq (s_set_attributes (ref1, 3, CS_WIRE_MAX_ATTR_BYTES, 0), CKR_OK);
    ck_assert_uint_eq (s_list_keys (NULL), CKR_OK);                 /* ~12.5 KB */
    ck_assert_uint_eq (s_set_attributes (ref2, 1, CS_WIRE_MAX_ATTR_BYTES, 0), CKR_OK);
    ck_assert_uint_eq (s_list_keys (NULL), CKR_DEVICE_MEMORY);      /* ~16.7 KB */
    free (ref1);
    free (ref2);
    s_eve_served ();
}
END_TEST

/* ------------------------------------------------------------------ */
/*  Deadlines: a request asking for more than broker/max-deadline-ms gets
 *  that much.  The sim board takes 1000 ms a job with one worker: the
 *  second job of a request waits that long, past a 250 ms cap.  */

static void
s_setup_deadline (void)
{
    s_start ("    default-deadline-ms = 250\n    max-deadline-ms = 250\n", 1000, 1);
}

START_TEST (test_deadline_cap)
{
    uint8_t di [51];
    th_digest_info ("deadline", di);
    Cs__Request *req = th_request (2, 28);
    req->ticket = (ProtobufCBinaryData) { s_ticket_len, s_ticket };
    req->deadline_ms = 3600000;
    th_job_crypto (req->jobs [0], true, s_board_ref, 8, CKM_RSA_PKCS, di, 51);
    th_job_crypto (req->jobs [1], true, s_board_ref, 8, CKM_RSA_PKCS, di, 51);
    Cs__Reply *reply = th_call (s_alice, req);
    ck_assert_uint_eq (reply->rv, CKR_OK);
    ck_assert_uint_eq (reply->results [0]->rv, CKR_OK);
    ck_assert_uint_eq (reply->results [1]->rv, CKR_DEVICE_ERROR);     /* expired in the queue */
    cs__reply__free_unpacked (reply, NULL);
    th_request_free (req);
    s_eve_served ();
}
END_TEST

/*  Issue #9: a queued job whose deadline passes is answered at once by the
 *  reactor's sweep, not when a worker frees.  Request A holds the one
 *  worker for 1000 ms; request B, queued behind it with a 250 ms deadline,
 *  gets CKR_DEVICE_ERROR first, within 250 ms + the sweep (50 ms) + slack.  */
START_TEST (test_deadline_sweep)
{
    uint8_t di [51];
    th_digest_info ("sweep", di);
    Cs__Request *a = th_request (1, 40), *b = th_request (1, 41);
    a->ticket = b->ticket = (ProtobufCBinaryData) { s_ticket_len, s_ticket };
    th_job_crypto (a->jobs [0], true, s_board_ref, 8, CKM_RSA_PKCS, di, 51);
    th_job_crypto (b->jobs [0], true, s_board_ref, 8, CKM_RSA_PKCS, di, 51);
    int64_t start = zclock_mono ();
    th_send (s_alice, a);
    th_send (s_alice, b);
    Cs__Reply *first = th_recv (s_alice);
    int64_t elapsed = zclock_mono () - start;
    ck_assert_uint_eq (first->request_id, 41);
    ck_assert_uint_eq (first->results [0]->rv, CKR_DEVICE_ERROR);
    ck_assert_int_lt (elapsed, 800);
    Cs__Reply *second = th_recv (s_alice);
    ck_assert_uint_eq (second->request_id, 40);
    ck_assert_uint_eq (second->results [0]->rv, CKR_OK);       /* late, within its time limit */
    cs__reply__free_unpacked (first, NULL);
    cs__reply__free_unpacked (second, NULL);
    th_request_free (a);
    th_request_free (b);
    s_eve_served ();
}
END_TEST

/* ------------------------------------------------------------------ */
/*  Bytes queued per client: alice floods requests for a slow board; past
 *  64 KiB queued she gets CKR_DEVICE_MEMORY at once, and eve is answered
 *  while alice's accepted requests still wait.  */

#define S_FLOOD_BYTES 65536
#define S_FLOOD_REQUESTS 100
#define S_FLOOD_JOBS 8

static void
s_setup_flood (void)
{
    s_start ("    max-client-bytes = 65536\n", 20, 1);
}

/*  The frontend's LOAD counters: bytes queued now, and the peak of one client.  */
static void
s_load (size_t *now_p, size_t *peak_p)
{
    zactor_t *frontend = server_frontend (s_server);
    zstr_send (frontend, "LOAD");
    char *now = zstr_recv (frontend), *peak = zstr_recv (frontend);
    *now_p = (size_t) atol (now);
    *peak_p = (size_t) atol (peak);
    zstr_free (&now);
    zstr_free (&peak);
}

/*  Waits (bounded) until some client has bytes queued.  */
static void
s_load_wait (size_t *now_p, size_t *peak_p)
{
    *now_p = 0;
    for (int tries = 0; *now_p == 0 && tries < 1000; tries++) {
        s_load (now_p, peak_p);
        if (*now_p == 0)
            zclock_sleep (5);
    }
    ck_assert_uint_gt (*now_p, 0);
}

START_TEST (test_client_bytes_flood)
{
    static uint8_t di [S_FLOOD_JOBS][51];
    Cs__Request *req = th_request (S_FLOOD_JOBS, 0);
    req->ticket = (ProtobufCBinaryData) { s_ticket_len, s_ticket };
    for (size_t j = 0; j < S_FLOOD_JOBS; j++) {
        char msg [16];
        snprintf (msg, sizeof msg, "flood %zu", j);
        th_digest_info (msg, di [j]);
        th_job_crypto (req->jobs [j], true, s_board_ref, 8, CKM_RSA_PKCS, di [j], 51);
    }
    zsock_set_sndhwm (s_alice, 0);
    for (uint64_t i = 0; i < S_FLOOD_REQUESTS; i++) {
        req->request_id = 1000 + i;
        th_send (s_alice, req);
    }
    /*  Once alice has requests queued, eve is answered while they wait.  */
    size_t now = 0, peak = 0;
    s_load_wait (&now, &peak);
    s_eve_served ();
    s_load (&now, &peak);
    ck_assert_uint_gt (now, 0);
    ck_assert_uint_le (peak, S_FLOOD_BYTES);
    /*  Every request of alice is answered: refused at once, or done.  */
    size_t refused = 0, done = 0;
    for (size_t i = 0; i < S_FLOOD_REQUESTS; i++) {
        Cs__Reply *reply = th_recv (s_alice);
        if (reply->rv == CKR_DEVICE_MEMORY)
            refused++;
        else {
            ck_assert_uint_eq (reply->rv, CKR_OK);
            for (size_t j = 0; j < S_FLOOD_JOBS; j++)
                ck_assert_uint_eq (reply->results [j]->rv, CKR_OK);
            done++;
        }
        cs__reply__free_unpacked (reply, NULL);
    }
    ck_assert_uint_gt (refused, 0);
    ck_assert_uint_gt (done, 0);
    ck_assert_uint_eq (refused + done, S_FLOOD_REQUESTS);
    s_load (&now, &peak);
    ck_assert_uint_eq (now, 0);             /* all given back */
    ck_assert_uint_le (peak, S_FLOOD_BYTES);
    th_request_free (req);
}
END_TEST

/* ------------------------------------------------------------------ */
/*  A full job queue slows only the client that filled it (issue #9): with
 *  max-queue = 1 and alice's second job queued behind a 1.5 s board job,
 *  the frontend keeps reading: eve's Hello is answered at once (before,
 *  the frontend stopped reading for everyone until the queue drained), and
 *  alice's next request waits in her backlog, then runs.  */

/*  The board's latency: 1.5 s, 5 s under make memcheck (its timeout is
 *  300 s, but alice's three jobs must end within their 60 s deadline).  */
#define S_FULL_LATENCY_MS (TH_TIMEOUT_MS / 10 < 5000 ? TH_TIMEOUT_MS / 10 : 5000)

static void
s_setup_full (void)
{
    s_start ("    max-queue = 1\n", S_FULL_LATENCY_MS, 1);
}

START_TEST (test_queue_full_keeps_reading)
{
    uint8_t di [51];
    th_digest_info ("full", di);
    Cs__Request *req = th_request (2, 29), *next = th_request (1, 30);
    req->ticket = next->ticket = (ProtobufCBinaryData) { s_ticket_len, s_ticket };
    req->deadline_ms = next->deadline_ms = 60000;
    th_job_crypto (req->jobs [0], true, s_board_ref, 8, CKM_RSA_PKCS, di, 51);
    th_job_crypto (req->jobs [1], true, s_board_ref, 8, CKM_RSA_PKCS, di, 51);
    th_job_crypto (next->jobs [0], true, s_board_ref, 8, CKM_RSA_PKCS, di, 51);
    th_send (s_alice, req);
    size_t now = 0, peak = 0;
    s_load_wait (&now, &peak);              /* charged: its second job is queued */
    th_send (s_alice, next);
    int64_t start = zclock_mono ();
    s_eve_served ();
    int64_t waited = zclock_mono () - start;
    ck_assert_msg (waited < S_FULL_LATENCY_MS / 2, "eve waited %" PRId64 " ms behind alice's full queue", waited);
    zpoller_t *poller = zpoller_new (s_alice, NULL);
    ck_assert_ptr_null (zpoller_wait (poller, 0));      /* alice's jobs still run */
    zpoller_destroy (&poller);
    for (uint64_t id = 29; id <= 30; id++) {
        Cs__Reply *reply = th_recv (s_alice);
        ck_assert_uint_eq (reply->request_id, id);
        ck_assert_uint_eq (reply->rv, CKR_OK);
        for (size_t j = 0; j < reply->n_results; j++)
            ck_assert_uint_eq (reply->results [j]->rv, CKR_OK);
        cs__reply__free_unpacked (reply, NULL);
    }
    th_request_free (req);
    th_request_free (next);
}
END_TEST


static Suite *
s_suite (void)
{
    Suite *suite = suite_create ("broker-limits");
    TCase *tc = tr_tcase ("wire", s_setup, s_teardown);
    tcase_add_test (tc, test_per_request_rsa_bits);
    tcase_add_test (tc, test_import_rsa_bits);
    tcase_add_test (tc, test_key_der_size);
    tcase_add_test (tc, test_jobs_per_request);
    tcase_add_test (tc, test_template_limits);
    tcase_add_test (tc, test_pin_length);
    suite_add_tcase (suite, tc);
    tc = tr_tcase ("reply", s_setup_small_replies, s_teardown);
    tcase_add_test (tc, test_reply_size);
    suite_add_tcase (suite, tc);
    tc = tr_tcase ("deadline", s_setup_deadline, s_teardown);
    tcase_add_test (tc, test_deadline_cap);
    tcase_add_test (tc, test_deadline_sweep);
    suite_add_tcase (suite, tc);
    tc = tr_tcase ("flood", s_setup_flood, s_teardown);
    tcase_add_test (tc, test_client_bytes_flood);
    suite_add_tcase (suite, tc);
    tc = tr_tcase ("full", s_setup_full, s_teardown);
    tcase_add_test (tc, test_queue_full_keeps_reading);
    suite_add_tcase (suite, tc);
    return suite;
}

int
main (void)
{
    return tr_run (s_suite ());
}
