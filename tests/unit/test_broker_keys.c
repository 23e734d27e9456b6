/*  test_broker_keys.c — the keystore side of the broker (issue #3), whole
 *  broker in-process on tcp://127.0.0.1:! (a random free port) with one openssl board and a pool
 *  of two pre-generated RSA-2048 keys: generation from the pool (the pool
 *  drops, then refills when idle) and without it, keystore keys signing on
 *  the openssl board (verified with OpenSSL), per-request keys (no row
 *  left), import and attribute rules, tenant isolation of refs, PIN lock
 *  and C_InitPIN through the broker.  Two clients: alice (tenant demo) and
 *  eve (tenant other).  Needs CRYPTOSERVER_DRIVER_DIR (make check).
 */
#include <openssl/core_names.h>
#include <openssl/rsa.h>
#include <openssl/rand.h>
#include <openssl/param_build.h>
#include <openssl/x509.h>
#include <sqlite3.h>
#include "test_broker_fixture.h"
#include "test_run.h"

static char *s_dir;
static broker_config_t *s_config;
static server_t *s_server;
static zsock_t *s_alice, *s_eve;
static uint8_t *s_ticket;
static size_t s_ticket_len;

static void
s_setup (void)
{
    s_dir = th_tmpdir ();
    th_certs (s_dir, "alice", "demo");
    th_client_add (s_dir, "eve", "other");
    th_keystore (s_dir);
    tb_conf_write (s_dir, "",
        "keys\n    home = keystore\n    pool-rsa-2048 = 2\n"
        "drivers\n    cpu\n        type = openssl\n        threads = 2\n");
    s_server = tb_start (s_dir, &s_config);
    s_alice = th_dealer (s_dir, "alice", server_endpoint (s_server));
    s_eve = th_dealer (s_dir, "eve", server_endpoint (s_server));
    s_ticket = th_login_ok (s_alice, "1234", &s_ticket_len);
}

static void
s_teardown (void)
{
    zsock_destroy (&s_alice);
    zsock_destroy (&s_eve);
    tb_stop (&s_server, &s_config);
    free (s_ticket);
    th_tmpdir_remove (&s_dir);
}

/*  Waits (event-driven, no sleep) until the pool holds `count` RSA-2048
 *  keys; returns how many it holds.  count 0 answers at once.  */
static size_t
s_pool_wait (size_t count)
{
    zactor_t *frontend = server_frontend (s_server);
    char text [32];
    snprintf (text, sizeof text, "%zu", count);
    zstr_sendx (frontend, "POOL-WAIT", "2048", text, NULL);
    char *reply = zstr_recv (frontend);
    size_t ready = reply ? (size_t) atol (reply) : 0;
    zstr_free (&reply);
    return ready;
}

/*  A one-job request carrying alice's ticket.  */
static Cs__Request *
s_request (uint64_t id)
{
    Cs__Request *req = th_request (1, id);
    req->ticket = (ProtobufCBinaryData) { s_ticket_len, s_ticket };
    return req;
}

/*  Sends a one-job request and returns its only result's rv; the reply is
 *  kept in *reply_p (caller frees) when reply_p is given.  */
static uint64_t
s_call (zsock_t *client, Cs__Request *req, Cs__Reply **reply_p)
{
    Cs__Reply *reply = th_call (client, req);
    ck_assert_uint_eq (reply->rv, CKR_OK);
    ck_assert_uint_eq (reply->n_results, 1);
    uint64_t rv = reply->results [0]->rv;
    if (reply_p)
        *reply_p = reply;
    else
        cs__reply__free_unpacked (reply, NULL);
    return rv;
}

/*  A GenerateKeyPair job (fields of gen and templates are borrowed).  */
static void
s_job_generate (Cs__Job *job, Cs__GenerateKeyPairJob *gen)
{
    job->kind_case = CS__JOB__KIND_GENERATE_KEY_PAIR;
    job->generate_key_pair = gen;
}

static Cs__Attribute
s_flag (CK_ATTRIBUTE_TYPE type, bool value)
{
    Cs__Attribute attr = CS__ATTRIBUTE__INIT;
    attr.type = type;
    attr.value_case = CS__ATTRIBUTE__VALUE_FLAG;
    attr.flag = value;
    return attr;
}

static Cs__Attribute
s_bytes (CK_ATTRIBUTE_TYPE type, const char *text)
{
    Cs__Attribute attr = CS__ATTRIBUTE__INIT;
    attr.type = type;
    attr.value_case = CS__ATTRIBUTE__VALUE_BYTES;
    attr.bytes = (ProtobufCBinaryData) { strlen (text), (uint8_t *) text };
    return attr;
}

/*  The public key of a KeyInfo, for verification (caller frees).  */
static EVP_PKEY *
s_public (const Cs__KeyInfo *key)
{
    EVP_PKEY *pkey = NULL;
    if (key->key_type == CKK_EC_EDWARDS)
        return EVP_PKEY_new_raw_public_key (EVP_PKEY_ED25519, NULL, key->ec_point.data + 2, 32);
    OSSL_PARAM_BLD *bld = OSSL_PARAM_BLD_new ();
    BIGNUM *n = NULL, *e = NULL;
    if (key->key_type == CKK_RSA) {
        n = BN_bin2bn (key->modulus.data, (int) key->modulus.len, NULL);
        e = BN_bin2bn (key->public_exponent.data, (int) key->public_exponent.len, NULL);
        OSSL_PARAM_BLD_push_BN (bld, "n", n);
        OSSL_PARAM_BLD_push_BN (bld, "e", e);
    }
    else {
        OSSL_PARAM_BLD_push_utf8_string (bld, "group", key->bits == 256 ? "P-256" : "P-384", 0);
        OSSL_PARAM_BLD_push_octet_string (bld, "pub", key->ec_point.data + 2, key->ec_point.len - 2);
    }
    OSSL_PARAM *params = OSSL_PARAM_BLD_to_param (bld);
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_name (NULL, key->key_type == CKK_RSA ? "RSA" : "EC", NULL);
    ck_assert (ctx && EVP_PKEY_fromdata_init (ctx) > 0);
    ck_assert (EVP_PKEY_fromdata (ctx, &pkey, EVP_PKEY_PUBLIC_KEY, params) > 0);
    EVP_PKEY_CTX_free (ctx);
    OSSL_PARAM_free (params);
    OSSL_PARAM_BLD_free (bld);
    BN_free (n);
    BN_free (e);
    return pkey;
}

/*  Signs a DigestInfo with key ref (or a per-request PKCS#8 when der) as
 *  client; returns the rv and verifies an RSA signature with pub.  */
static uint64_t
s_sign_rsa (zsock_t *client, const char *ref, const uint8_t *der, size_t der_len, EVP_PKEY *pub)
{
    uint8_t di [51];
    th_digest_info ("keystore", di);
    Cs__Request *req = s_request (20);
    th_job_crypto (req->jobs [0], true, (const uint8_t *) ref, ref ? strlen (ref) : 0, CKM_RSA_PKCS, di, 51);
    if (der)
        req->jobs [0]->sign->key_pkcs8 = (ProtobufCBinaryData) { der_len, (uint8_t *) der };
    Cs__Reply *reply = NULL;
    uint64_t rv = s_call (client, req, &reply);
    if (rv == CKR_OK && pub)
        ck_assert (th_verify_rsa_pkcs1 (pub, di, 51, reply->results [0]->data.data,
                                        reply->results [0]->data.len));
    cs__reply__free_unpacked (reply, NULL);
    th_request_free (req);
    return rv;
}

/*  Number of keys alice's tenant lists.  */
static size_t
s_list_count (zsock_t *client)
{
    Cs__Request *req = th_request (1, 30);
    th_job_list_keys (req->jobs [0]);
    Cs__Reply *reply = NULL;
    ck_assert_uint_eq (s_call (client, req, &reply), CKR_OK);
    size_t count = reply->results [0]->keys->n_keys;
    cs__reply__free_unpacked (reply, NULL);
    th_request_free (req);
    return count;
}

START_TEST (test_generate_from_pool)
{
    ck_assert_uint_eq (s_pool_wait (2), 2);
    uint64_t jobs = th_board_jobs (server_frontend (s_server), "cpu", NULL);
    ck_assert_uint_eq (jobs, 2);                /* the two refills */
    Cs__Attribute label = s_bytes (CKA_LABEL, "pooled"), id = s_bytes (CKA_ID, "\x42");
    Cs__Attribute sensitive = s_flag (CKA_SENSITIVE, true), token = s_flag (CKA_TOKEN, true);
    Cs__Attribute *priv [] = { &label, &id, &sensitive, &token }, *pub [] = { &label, &id, &token };
    Cs__GenerateKeyPairJob gen = CS__GENERATE_KEY_PAIR_JOB__INIT;
    gen.mechanism = CKM_RSA_PKCS_KEY_PAIR_GEN;
    gen.modulus_bits = 2048;
    gen.token = true;
    gen.n_private_template = 4;
    gen.private_template = priv;
    gen.n_public_template = 3;
    gen.public_template = pub;
    Cs__Request *req = s_request (10);
    s_job_generate (req->jobs [0], &gen);
    Cs__Reply *reply = NULL;
    ck_assert_uint_eq (s_call (s_alice, req, &reply), CKR_OK);
    /*  Served from the pool: no worker ran a generation for it.  */
    ck_assert_uint_eq (th_board_jobs (server_frontend (s_server), "cpu", NULL), jobs);
    Cs__KeyInfo *key = reply->results [0]->generated->key;
    ck_assert_uint_eq (reply->results [0]->generated->private_pkcs8.len, 0);
    ck_assert_str_eq (key->label, "pooled");
    ck_assert (strncmp (key->ref, "ks:", 3) == 0);
    ck_assert_str_eq (key->home, "keystore");
    ck_assert_uint_eq (key->bits, 2048);
    ck_assert (key->has_private && key->has_public);
    const Cs__Attribute *local = NULL, *always = NULL;
    for (size_t i = 0; i < key->n_private_attributes; i++) {
        if (key->private_attributes [i]->type == CKA_LOCAL)
            local = key->private_attributes [i];
        if (key->private_attributes [i]->type == CKA_ALWAYS_SENSITIVE)
            always = key->private_attributes [i];
    }
    ck_assert (local && local->flag && always && always->flag);
    /*  The pool refills when idle, and the key signs on the openssl board.  */
    ck_assert_uint_eq (s_pool_wait (2), 2);
    EVP_PKEY *pub_key = s_public (key);
    ck_assert_uint_eq (s_sign_rsa (s_alice, key->ref, NULL, 0, pub_key), CKR_OK);
    ck_assert_uint_eq (s_list_count (s_alice), 1);
    EVP_PKEY_free (pub_key);
    cs__reply__free_unpacked (reply, NULL);
    req->jobs [0]->generate_key_pair = NULL;
    req->jobs [0]->kind_case = CS__JOB__KIND_HELLO;
    th_request_free (req);
}
END_TEST

/*  The first column of the first row of `sql` on DIR/keystore.db as an
 *  integer, after running `before` (NULL: nothing) on the same connection.  */
static long
s_keystore_int (const char *before, const char *sql)
{
    char path [4096];
    sqlite3 *db = NULL;
    sqlite3_stmt *stmt = NULL;
    snprintf (path, sizeof path, "%s/keystore.db", s_dir);
    ck_assert_int_eq (sqlite3_open (path, &db), SQLITE_OK);
    sqlite3_busy_timeout (db, 5000);
    if (before)
        ck_assert_msg (sqlite3_exec (db, before, NULL, NULL, NULL) == SQLITE_OK, "%s", sqlite3_errmsg (db));
    ck_assert_int_eq (sqlite3_prepare_v2 (db, sql, -1, &stmt, NULL), SQLITE_OK);
    ck_assert_int_eq (sqlite3_step (stmt), SQLITE_ROW);
    long value = (long) sqlite3_column_int64 (stmt, 0);
    sqlite3_finalize (stmt);
    sqlite3_close (db);
    return value;
}

/*  A session RSA-2048 generation by alice: its rv.  */
static uint64_t
s_generate_session (uint64_t id)
{
    Cs__GenerateKeyPairJob gen = CS__GENERATE_KEY_PAIR_JOB__INIT;
    gen.mechanism = CKM_RSA_PKCS_KEY_PAIR_GEN;
    gen.modulus_bits = 2048;
    Cs__Request *req = s_request (id);
    s_job_generate (req->jobs [0], &gen);
    uint64_t rv = s_call (s_alice, req, NULL);
    req->jobs [0]->generate_key_pair = NULL;
    req->jobs [0]->kind_case = CS__JOB__KIND_HELLO;
    th_request_free (req);
    return rv;
}

/*  Issue 19 item 7: a key served from the pool is recorded as issued (its
 *  fingerprint, the tenant) before the reply; one whose record cannot be
 *  written is not handed out (CKR_DEVICE_ERROR: fail closed).  */
START_TEST (test_pool_issue_recorded)
{
    ck_assert_uint_eq (s_pool_wait (2), 2);
    ck_assert_uint_eq (s_generate_session (30), CKR_OK);
    ck_assert_int_eq (s_keystore_int (NULL, "SELECT count (*) FROM issued WHERE tenant = 'demo'"), 1);
    ck_assert_int_eq (s_keystore_int ("CREATE TRIGGER no_issue BEFORE INSERT ON issued "
                                      "BEGIN SELECT RAISE (ABORT, 'refused by the test'); END",
                                      "SELECT 1"), 1);
    ck_assert_uint_ge (s_pool_wait (1), 1);
    ck_assert_uint_eq (s_generate_session (31), CKR_DEVICE_ERROR);
    ck_assert_int_eq (s_keystore_int (NULL, "SELECT count (*) FROM issued"), 1);
}
END_TEST

/*  Generates one key without the pool and signs a digest with it.  */
static void
s_generate_and_sign (uint64_t mechanism, const uint8_t *params, size_t params_len, uint64_t sign_mech)
{
    Cs__GenerateKeyPairJob gen = CS__GENERATE_KEY_PAIR_JOB__INIT;
    gen.mechanism = mechanism;
    gen.ec_params = (ProtobufCBinaryData) { params_len, (uint8_t *) params };
    gen.token = true;
    Cs__Request *req = s_request (11);
    s_job_generate (req->jobs [0], &gen);
    Cs__Reply *reply = NULL;
    ck_assert_uint_eq (s_call (s_alice, req, &reply), CKR_OK);
    Cs__KeyInfo *key = reply->results [0]->generated->key;
    EVP_PKEY *pub = s_public (key);
    uint8_t digest [32], sig [128];
    SHA256 ((const uint8_t *) "curve", 5, digest);
    Cs__Request *sreq = s_request (12);
    th_job_crypto (sreq->jobs [0], true, (const uint8_t *) key->ref, strlen (key->ref), sign_mech, digest, 32);
    Cs__Reply *sreply = NULL;
    ck_assert_uint_eq (s_call (s_alice, sreq, &sreply), CKR_OK);
    ProtobufCBinaryData s = sreply->results [0]->data;
    ck_assert_uint_le (s.len, sizeof sig);
    if (sign_mech == CKM_ECDSA)
        ck_assert (th_verify_ecdsa (pub, digest, 32, s.data, s.len));
    else {
        EVP_MD_CTX *ctx = EVP_MD_CTX_new ();
        ck_assert (EVP_DigestVerifyInit (ctx, NULL, NULL, NULL, pub) > 0);
        ck_assert_int_eq (EVP_DigestVerify (ctx, s.data, s.len, digest, 32), 1);
        EVP_MD_CTX_free (ctx);
    }
    EVP_PKEY_free (pub);
    cs__reply__free_unpacked (sreply, NULL);
    cs__reply__free_unpacked (reply, NULL);
    th_request_free (sreq);
    req->jobs [0]->kind_case = CS__JOB__KIND_HELLO;
    req->jobs [0]->hello = NULL;
    th_request_free (req);
}

START_TEST (test_generate_without_pool)
{
    static const uint8_t p256 [] = { 0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07 };
    static const uint8_t ed [] = { 0x06, 0x03, 0x2b, 0x65, 0x70 };
    s_generate_and_sign (CKM_EC_KEY_PAIR_GEN, p256, sizeof p256, CKM_ECDSA);
    s_generate_and_sign (CKM_EC_EDWARDS_KEY_PAIR_GEN, ed, sizeof ed, CKM_EDDSA);
    ck_assert_uint_eq (s_list_count (s_alice), 2);
    /*  A session key (token = FALSE, RSA-3072: no pool of that size): the
        private key comes back, nothing is stored.  */
    Cs__GenerateKeyPairJob gen = CS__GENERATE_KEY_PAIR_JOB__INIT;
    gen.mechanism = CKM_RSA_PKCS_KEY_PAIR_GEN;
    gen.modulus_bits = 3072;
    Cs__Request *req = s_request (13);
    s_job_generate (req->jobs [0], &gen);
    Cs__Reply *reply = NULL;
    ck_assert_uint_eq (s_call (s_alice, req, &reply), CKR_OK);
    ProtobufCBinaryData der = reply->results [0]->generated->private_pkcs8;
    ck_assert_uint_gt (der.len, 1000);
    ck_assert_str_eq (reply->results [0]->generated->key->ref, "");
    ck_assert_uint_eq (s_list_count (s_alice), 2);
    cs__reply__free_unpacked (reply, NULL);
    /*  Without a ticket a session pair is a public job (docs/CONTRACTS.md
        "Login tickets"): generated and returned, nothing stored; a token
        pair is stored: CKR_USER_NOT_LOGGED_IN.  Then a bad size.  */
    req->ticket = (ProtobufCBinaryData) { 0, NULL };
    ck_assert_uint_eq (s_call (s_alice, req, &reply), CKR_OK);
    ck_assert_uint_gt (reply->results [0]->generated->private_pkcs8.len, 1000);
    cs__reply__free_unpacked (reply, NULL);
    gen.token = true;
    ck_assert_uint_eq (s_call (s_alice, req, NULL), CKR_USER_NOT_LOGGED_IN);
    ck_assert_uint_eq (s_list_count (s_alice), 2);
    gen.token = false;
    req->ticket = (ProtobufCBinaryData) { s_ticket_len, s_ticket };
    gen.modulus_bits = 1000;
    ck_assert_uint_eq (s_call (s_alice, req, NULL), CKR_KEY_SIZE_RANGE);
    req->jobs [0]->kind_case = CS__JOB__KIND_HELLO;
    req->jobs [0]->hello = NULL;
    th_request_free (req);
}
END_TEST

START_TEST (test_per_request_key)
{
    EVP_PKEY *pkey = EVP_RSA_gen (2048);
    size_t len = 0;
    uint8_t *der = th_pkcs8 (pkey, &len);
    size_t before = s_list_count (s_alice);
    for (int i = 0; i < 3; i++)
        ck_assert_uint_eq (s_sign_rsa (s_alice, NULL, der, len, pkey), CKR_OK);
    ck_assert_uint_eq (s_list_count (s_alice), before);
    /*  Garbage as a key.  */
    uint8_t junk [] = { 0x30, 0x03, 0x02, 0x01, 0x00 };
    ck_assert_uint_eq (s_sign_rsa (s_alice, NULL, junk, sizeof junk, NULL), CKR_KEY_HANDLE_INVALID);
    OPENSSL_free (der);
    EVP_PKEY_free (pkey);
}
END_TEST

/*  A key job on ref as client (destroy when attrs is NULL).  */
static uint64_t
s_key_job (zsock_t *client, const uint8_t *ticket, size_t ticket_len, const char *ref,
           uint64_t object, Cs__Attribute **attrs, size_t n)
{
    Cs__DestroyKeyJob destroy = CS__DESTROY_KEY_JOB__INIT;
    Cs__SetKeyAttributesJob set = CS__SET_KEY_ATTRIBUTES_JOB__INIT;
    Cs__Request *req = th_request (1, 40);
    req->ticket = (ProtobufCBinaryData) { ticket_len, (uint8_t *) ticket };
    if (attrs) {
        set.ref = (char *) ref;
        set.object = object;
        set.n_attributes = n;
        set.attributes = attrs;
        req->jobs [0]->kind_case = CS__JOB__KIND_SET_KEY_ATTRIBUTES;
        req->jobs [0]->set_key_attributes = &set;
    }
    else {
        destroy.ref = (char *) ref;
        destroy.object = object;
        req->jobs [0]->kind_case = CS__JOB__KIND_DESTROY_KEY;
        req->jobs [0]->destroy_key = &destroy;
    }
    uint64_t rv = s_call (client, req, NULL);
    req->jobs [0]->kind_case = CS__JOB__KIND_HELLO;
    req->jobs [0]->hello = NULL;
    th_request_free (req);
    return rv;
}

START_TEST (test_import_attributes_and_isolation)
{
    EVP_PKEY *pkey = EVP_RSA_gen (2048);
    size_t len = 0;
    uint8_t *der = th_pkcs8 (pkey, &len);
    Cs__Attribute label = s_bytes (CKA_LABEL, "imported"), cls = CS__ATTRIBUTE__INIT;
    cls.type = CKA_CLASS;
    cls.value_case = CS__ATTRIBUTE__VALUE_NUMBER;
    cls.number = CKO_PRIVATE_KEY;
    Cs__Attribute *tmpl [] = { &label, &cls };
    Cs__ImportKeyJob imp = CS__IMPORT_KEY_JOB__INIT;
    imp.private_pkcs8 = (ProtobufCBinaryData) { len, der };
    imp.n_template_ = 2;
    imp.template_ = tmpl;
    Cs__Request *req = s_request (41);
    req->jobs [0]->kind_case = CS__JOB__KIND_IMPORT_KEY;
    req->jobs [0]->import_key = &imp;
    Cs__Reply *reply = NULL;
    ck_assert_uint_eq (s_call (s_alice, req, &reply), CKR_OK);
    char *ref = strdup (reply->results [0]->imported->key->ref);
    ck_assert_str_eq (reply->results [0]->imported->key->label, "imported");
    cs__reply__free_unpacked (reply, NULL);
    ck_assert_uint_eq (s_sign_rsa (s_alice, ref, NULL, 0, pkey), CKR_OK);
    /*  A class that does not match the key sent.  */
    cls.number = CKO_PUBLIC_KEY;
    ck_assert_uint_eq (s_call (s_alice, req, NULL), CKR_TEMPLATE_INCONSISTENT);
    req->jobs [0]->kind_case = CS__JOB__KIND_HELLO;
    req->jobs [0]->hello = NULL;
    th_request_free (req);
    /*  Eve (tenant other) neither sees, uses nor destroys alice's key.  */
    size_t eve_len = 0;
    uint64_t rv = 0;
    uint8_t *eve = th_login (s_eve, "5678", &eve_len, &rv);
    ck_assert_uint_eq (rv, CKR_OK);
    ck_assert_uint_eq (s_list_count (s_eve), 0);
    uint8_t di [51];
    th_digest_info ("x", di);
    Cs__Request *sreq = th_request (1, 42);
    sreq->ticket = (ProtobufCBinaryData) { eve_len, eve };
    th_job_crypto (sreq->jobs [0], true, (const uint8_t *) ref, strlen (ref), CKM_RSA_PKCS, di, 51);
    ck_assert_uint_eq (s_call (s_eve, sreq, NULL), CKR_KEY_HANDLE_INVALID);
    th_request_free (sreq);
    ck_assert_uint_eq (s_key_job (s_eve, eve, eve_len, ref, CKO_PRIVATE_KEY, NULL, 0),
                       CKR_OBJECT_HANDLE_INVALID);
    /*  Attribute rules: label may change; CKA_SENSITIVE may not go back to
        FALSE; CKA_LOCAL is read-only.  */
    Cs__Attribute relabel = s_bytes (CKA_LABEL, "renamed"), insensitive = s_flag (CKA_SENSITIVE, false);
    Cs__Attribute local = s_flag (CKA_LOCAL, true);
    Cs__Attribute *a1 [] = { &relabel }, *a2 [] = { &insensitive }, *a3 [] = { &local };
    ck_assert_uint_eq (s_key_job (s_alice, s_ticket, s_ticket_len, ref, CKO_PRIVATE_KEY, a1, 1), CKR_OK);
    ck_assert_uint_eq (s_key_job (s_alice, s_ticket, s_ticket_len, ref, CKO_PRIVATE_KEY, a2, 1),
                       CKR_ATTRIBUTE_READ_ONLY);
    ck_assert_uint_eq (s_key_job (s_alice, s_ticket, s_ticket_len, ref, CKO_PRIVATE_KEY, a3, 1),
                       CKR_ATTRIBUTE_READ_ONLY);
    /*  Destroy the private half (the public stays listed), then the public.  */
    ck_assert_uint_eq (s_key_job (s_alice, s_ticket, s_ticket_len, ref, CKO_PRIVATE_KEY, NULL, 0), CKR_OK);
    ck_assert_uint_eq (s_sign_rsa (s_alice, ref, NULL, 0, NULL), CKR_KEY_HANDLE_INVALID);
    ck_assert_uint_eq (s_list_count (s_alice), 1);
    ck_assert_uint_eq (s_key_job (s_alice, s_ticket, s_ticket_len, ref, CKO_PUBLIC_KEY, NULL, 0), CKR_OK);
    ck_assert_uint_eq (s_list_count (s_alice), 0);
    free (ref);
    free (eve);
    OPENSSL_free (der);
    EVP_PKEY_free (pkey);
}
END_TEST

/*  Imports pkey as alice with a template; the job's rv, the reply's key in
 *  *reply_p (caller frees) when CKR_OK.  */
static uint64_t
s_import_with (EVP_PKEY *pkey, Cs__Attribute **tmpl, size_t n, Cs__Reply **reply_p)
{
    size_t len = 0;
    uint8_t *der = th_pkcs8 (pkey, &len);
    Cs__ImportKeyJob imp = CS__IMPORT_KEY_JOB__INIT;
    imp.private_pkcs8 = (ProtobufCBinaryData) { len, der };
    imp.n_template_ = n;
    imp.template_ = tmpl;
    Cs__Request *req = s_request (52);
    req->jobs [0]->kind_case = CS__JOB__KIND_IMPORT_KEY;
    req->jobs [0]->import_key = &imp;
    uint64_t rv = s_call (s_alice, req, reply_p);
    req->jobs [0]->kind_case = CS__JOB__KIND_HELLO;
    req->jobs [0]->hello = NULL;
    th_request_free (req);
    OPENSSL_free (der);
    return rv;
}

/*  A CopyKeyJob of alice's ref with a template.  */
static uint64_t
s_copy_job (const char *ref, uint64_t object, Cs__Attribute **attrs, size_t n)
{
    Cs__CopyKeyJob copy = CS__COPY_KEY_JOB__INIT;
    copy.ref = (char *) ref;
    copy.object = object;
    copy.attributes = attrs;
    copy.n_attributes = n;
    Cs__Request *req = s_request (53);
    req->jobs [0]->kind_case = CS__JOB__KIND_COPY_KEY;
    req->jobs [0]->copy_key = &copy;
    uint64_t rv = s_call (s_alice, req, NULL);
    req->jobs [0]->kind_case = CS__JOB__KIND_HELLO;
    req->jobs [0]->copy_key = NULL;
    th_request_free (req);
    return rv;
}

/*  A sign (or decrypt) job with alice's keystore ref and wire mechanism;
 *  the rv.  */
static uint64_t
s_crypto_mech (const char *ref, bool sign, CK_MECHANISM_TYPE mech)
{
    uint8_t data [256] = { 0 };
    th_digest_info ("allowed", data);
    Cs__Request *req = s_request (54);
    th_job_crypto (req->jobs [0], sign, (const uint8_t *) ref, strlen (ref), mech, data, sign ? 51 : 256);
    uint64_t rv = s_call (s_alice, req, NULL);
    th_request_free (req);
    return rv;
}

/*  The flag `type` among a KeyInfo's private attributes, or -1.  */
static int
s_private_flag (const Cs__KeyInfo *info, CK_ATTRIBUTE_TYPE type)
{
    for (size_t i = 0; i < info->n_private_attributes; i++)
        if (info->private_attributes [i]->type == type)
            return info->private_attributes [i]->flag;
    return -1;
}

/*  The broker applies the one table of attribute rules
 *  (common/cs_attr_rules.h) to server-held keys whatever the module
 *  checked: these jobs come straight from a client, no module between.  */
START_TEST (test_attribute_rules_table)
{
    EVP_PKEY *pkey = EVP_RSA_gen (2048);
    Cs__Reply *reply = NULL;
    Cs__Attribute label = s_bytes (CKA_LABEL, "rules");
    Cs__Attribute *tmpl [] = { &label };
    ck_assert_uint_eq (s_import_with (pkey, tmpl, 1, &reply), CKR_OK);
    char *ref = strdup (reply->results [0]->imported->key->ref);
    ck_assert_int_eq (s_private_flag (reply->results [0]->imported->key, CKA_ALWAYS_SENSITIVE), 0);
    cs__reply__free_unpacked (reply, NULL);
    /*  CKA_SENSITIVE is TRUE by default (the module shows TRUE): it cannot
        go FALSE, by set or by copy.  */
    Cs__Attribute insensitive = s_flag (CKA_SENSITIVE, false), extractable = s_flag (CKA_EXTRACTABLE, true);
    Cs__Attribute trusted = s_flag (CKA_TRUSTED, true), always = s_flag (CKA_ALWAYS_SENSITIVE, true);
    Cs__Attribute vendor = s_bytes (CKA_VENDOR_DEFINED | 7, "x"), sensitive = s_flag (CKA_SENSITIVE, true);
    Cs__Attribute *a_insensitive [] = { &insensitive }, *a_extractable [] = { &extractable };
    Cs__Attribute *a_trusted [] = { &trusted }, *a_always [] = { &always }, *a_vendor [] = { &vendor };
    Cs__Attribute *a_sensitive [] = { &sensitive };
    ck_assert_uint_eq (s_key_job (s_alice, s_ticket, s_ticket_len, ref, CKO_PRIVATE_KEY, a_insensitive, 1),
                       CKR_ATTRIBUTE_READ_ONLY);
    ck_assert_uint_eq (s_copy_job (ref, CKO_PRIVATE_KEY, a_insensitive, 1), CKR_ATTRIBUTE_READ_ONLY);
    ck_assert_uint_eq (s_key_job (s_alice, s_ticket, s_ticket_len, ref, CKO_PRIVATE_KEY, a_extractable, 1),
                       CKR_ATTRIBUTE_READ_ONLY);
    ck_assert_uint_eq (s_copy_job (ref, CKO_PRIVATE_KEY, a_extractable, 1), CKR_ATTRIBUTE_READ_ONLY);
    /*  Computed flags, SO-only CKA_TRUSTED, types no key has.  */
    ck_assert_uint_eq (s_key_job (s_alice, s_ticket, s_ticket_len, ref, CKO_PRIVATE_KEY, a_always, 1),
                       CKR_ATTRIBUTE_READ_ONLY);
    ck_assert_uint_eq (s_key_job (s_alice, s_ticket, s_ticket_len, ref, CKO_PUBLIC_KEY, a_trusted, 1),
                       CKR_ATTRIBUTE_READ_ONLY);
    ck_assert_uint_eq (s_key_job (s_alice, s_ticket, s_ticket_len, ref, CKO_PUBLIC_KEY, a_insensitive, 1),
                       CKR_ATTRIBUTE_TYPE_INVALID);
    ck_assert_uint_eq (s_key_job (s_alice, s_ticket, s_ticket_len, ref, CKO_PRIVATE_KEY, a_vendor, 1),
                       CKR_ATTRIBUTE_TYPE_INVALID);
    ck_assert_uint_eq (s_import_with (pkey, a_always, 1, NULL), CKR_ATTRIBUTE_READ_ONLY);
    /*  An imported key made sensitive later is not CKA_ALWAYS_SENSITIVE.  */
    Cs__Attribute *a_plain [] = { &label, &insensitive, &extractable };
    ck_assert_uint_eq (s_import_with (pkey, a_plain, 3, &reply), CKR_OK);
    char *plain = strdup (reply->results [0]->imported->key->ref);
    cs__reply__free_unpacked (reply, NULL);
    ck_assert_uint_eq (s_key_job (s_alice, s_ticket, s_ticket_len, plain, CKO_PRIVATE_KEY, a_sensitive, 1),
                       CKR_OK);
    ck_assert_uint_eq (s_key_job (s_alice, s_ticket, s_ticket_len, plain, CKO_PRIVATE_KEY, a_insensitive, 1),
                       CKR_ATTRIBUTE_READ_ONLY);
    Cs__Request *list = s_request (55);
    th_job_list_keys (list->jobs [0]);
    ck_assert_uint_eq (s_call (s_alice, list, &reply), CKR_OK);
    th_request_free (list);
    bool seen = false;
    for (size_t i = 0; i < reply->results [0]->keys->n_keys; i++)
        if (streq (reply->results [0]->keys->keys [i]->ref, plain)) {
            ck_assert_int_eq (s_private_flag (reply->results [0]->keys->keys [i], CKA_SENSITIVE), 1);
            ck_assert_int_eq (s_private_flag (reply->results [0]->keys->keys [i], CKA_ALWAYS_SENSITIVE), 0);
            seen = true;
        }
    ck_assert (seen);
    cs__reply__free_unpacked (reply, NULL);
    free (plain);
    free (ref);
    EVP_PKEY_free (pkey);
}
END_TEST

/*  CKA_ALLOWED_MECHANISMS of a keystore key, enforced by the broker on the
 *  job's wire mechanism and direction (a client without the module).  */
START_TEST (test_allowed_mechanisms)
{
    EVP_PKEY *pkey = EVP_RSA_gen (2048);
    static const uint8_t sha256_rsa [8] = { 0x40 };         /* CKM_SHA256_RSA_PKCS, little-endian */
    static const uint8_t oaep [8] = { 0x09 };               /* CKM_RSA_PKCS_OAEP */
    Cs__Attribute allowed = CS__ATTRIBUTE__INIT;
    allowed.type = CKA_ALLOWED_MECHANISMS;
    allowed.value_case = CS__ATTRIBUTE__VALUE_BYTES;
    allowed.bytes = (ProtobufCBinaryData) { 8, (uint8_t *) sha256_rsa };
    Cs__Attribute *tmpl [] = { &allowed };
    Cs__Reply *reply = NULL;
    ck_assert_uint_eq (s_import_with (pkey, tmpl, 1, &reply), CKR_OK);
    char *ref = strdup (reply->results [0]->imported->key->ref);
    cs__reply__free_unpacked (reply, NULL);
    /*  Signing with the DigestInfo (how the module sends CKM_SHA256_RSA_PKCS):
        allowed and verified; decryption and PSS: not.  */
    ck_assert_uint_eq (s_sign_rsa (s_alice, ref, NULL, 0, pkey), CKR_OK);
    ck_assert_uint_eq (s_crypto_mech (ref, false, CKM_RSA_PKCS), CKR_MECHANISM_INVALID);
    ck_assert_uint_eq (s_crypto_mech (ref, true, CKM_RSA_PKCS_PSS), CKR_MECHANISM_INVALID);
    /*  Read-only after creation; a list that is not whole is refused.  */
    allowed.bytes.data = (uint8_t *) oaep;
    ck_assert_uint_eq (s_key_job (s_alice, s_ticket, s_ticket_len, ref, CKO_PRIVATE_KEY, tmpl, 1),
                       CKR_ATTRIBUTE_READ_ONLY);
    allowed.bytes.len = 7;
    ck_assert_uint_eq (s_import_with (pkey, tmpl, 1, NULL), CKR_ATTRIBUTE_VALUE_INVALID);
    /*  Decryption only: signing is refused.  */
    allowed.bytes.len = 8;
    ck_assert_uint_eq (s_import_with (pkey, tmpl, 1, &reply), CKR_OK);
    char *decrypting = strdup (reply->results [0]->imported->key->ref);
    cs__reply__free_unpacked (reply, NULL);
    ck_assert_uint_eq (s_crypto_mech (decrypting, true, CKM_RSA_PKCS), CKR_MECHANISM_INVALID);
    free (decrypting);
    free (ref);
    EVP_PKEY_free (pkey);
}
END_TEST

/*  ECDH with alice's keystore ref and the peer's uncompressed point; the rv.  */
static uint64_t
s_derive (const char *ref, EVP_PKEY *peer)
{
    uint8_t point [65];
    size_t point_len = 0;
    ck_assert (EVP_PKEY_get_octet_string_param (peer, OSSL_PKEY_PARAM_PUB_KEY, point, sizeof point, &point_len));
    Cs__DeriveJob derive = CS__DERIVE_JOB__INIT;
    /*  Positional: p11-kit's header #defines the name of the point field.  */
    derive = (Cs__DeriveJob) { derive.base, { strlen (ref), (uint8_t *) ref }, { 0, NULL }, { point_len, point } };
    Cs__Request *req = s_request (56);
    req->jobs [0]->kind_case = CS__JOB__KIND_DERIVE;
    req->jobs [0]->derive = &derive;
    uint64_t rv = s_call (s_alice, req, NULL);
    req->jobs [0]->kind_case = CS__JOB__KIND_HELLO;
    req->jobs [0]->derive = NULL;
    th_request_free (req);
    return rv;
}

/*  CKA_ALLOWED_MECHANISMS of an EC keystore key with CKA_DERIVE: the
 *  broker's derive jobs need CKM_ECDH1_DERIVE in a non-empty list.  */
START_TEST (test_allowed_mechanisms_derive)
{
    EVP_PKEY *pkey = EVP_EC_gen ("P-256"), *peer = EVP_EC_gen ("P-256");
    static const uint8_t ecdsa [8] = { 0x41, 0x10 }, ecdh [8] = { 0x50, 0x10 };   /* CKM_ECDSA, CKM_ECDH1_DERIVE */
    Cs__Attribute derive = s_flag (CKA_DERIVE, true), allowed = CS__ATTRIBUTE__INIT;
    allowed.type = CKA_ALLOWED_MECHANISMS;
    allowed.value_case = CS__ATTRIBUTE__VALUE_BYTES;
    allowed.bytes = (ProtobufCBinaryData) { 8, (uint8_t *) ecdsa };
    Cs__Attribute *tmpl [] = { &derive, &allowed };
    Cs__Reply *reply = NULL;
    ck_assert_uint_eq (s_import_with (pkey, tmpl, 2, &reply), CKR_OK);
    char *signing = strdup (reply->results [0]->imported->key->ref);
    cs__reply__free_unpacked (reply, NULL);
    ck_assert_uint_eq (s_derive (signing, peer), CKR_MECHANISM_INVALID);
    allowed.bytes.data = (uint8_t *) ecdh;
    ck_assert_uint_eq (s_import_with (pkey, tmpl, 2, &reply), CKR_OK);
    char *deriving = strdup (reply->results [0]->imported->key->ref);
    cs__reply__free_unpacked (reply, NULL);
    ck_assert_uint_eq (s_derive (deriving, peer), CKR_OK);
    ck_assert_uint_eq (s_crypto_mech (deriving, true, CKM_ECDSA), CKR_MECHANISM_INVALID);
    free (signing);
    free (deriving);
    EVP_PKEY_free (pkey);
    EVP_PKEY_free (peer);
}
END_TEST

/*  One DecryptJob (CKM_RSA_PKCS) with the keystore key ref as alice,
 *  `unwrap` as DecryptJob.unwrap; the plaintext's length in *out_len_p
 *  (compared with want when the job succeeds).  */
static uint64_t
s_decrypt_mech (const char *ref, CK_MECHANISM_TYPE mech, const uint8_t *cipher, size_t len, bool unwrap,
                const uint8_t *want, size_t want_len)
{
    Cs__Request *req = s_request (61);
    Cs__Reply *reply = NULL;
    Cs__Mechanism *m = th_job_crypto (req->jobs [0], false, (const uint8_t *) ref, strlen (ref), mech, cipher, len);
    if (mech == CKM_RSA_PKCS_OAEP) {
        m->hash = CKM_SHA256;
        m->mgf = CKG_MGF1_SHA256;
    }
    req->jobs [0]->decrypt->unwrap = unwrap;
    uint64_t rv = s_call (s_alice, req, &reply);
    if (rv == CKR_OK)
        ck_assert (reply->results [0]->data.len == want_len
                   && memcmp (reply->results [0]->data.data, want, want_len) == 0);
    cs__reply__free_unpacked (reply, NULL);
    th_request_free (req);
    return rv;
}

/*  s_decrypt_mech with CKM_RSA_PKCS_OAEP (SHA-256, MGF1-SHA-256): the
 *  mechanism of C_UnwrapKey.  */
static uint64_t
s_decrypt (const char *ref, const uint8_t *cipher, size_t len, bool unwrap, const uint8_t *want, size_t want_len)
{
    return s_decrypt_mech (ref, CKM_RSA_PKCS_OAEP, cipher, len, unwrap, want, want_len);
}

/*  Usage separation on the broker, strict (docs/CONTRACTS.md "Usage
 *  separation", common/cs_usage.h), as a client skipping the module: a
 *  keystore key with CKA_UNWRAP TRUE runs unwrap jobs (DecryptJob.unwrap)
 *  and no plain decryption; its data roles default FALSE and never come
 *  on: the sign-raw attack of issue 19 (CKA_SIGN set TRUE, then a
 *  CKM_RSA_X_509 "signature" of the wrapped key, which is its decryption)
 *  is refused at the change (CKR_ATTRIBUTE_READ_ONLY) and at the sign job
 *  (CKR_KEY_FUNCTION_NOT_PERMITTED); CKA_UNWRAP may go off, and then the
 *  key does nothing.  A template that combines the roles is
 *  CKR_TEMPLATE_INCONSISTENT.  */
START_TEST (test_unwrap_policy)
{
    EVP_PKEY *pkey = EVP_RSA_gen (2048);
    size_t len = 0;
    uint8_t *der = th_pkcs8 (pkey, &len);
    Cs__Attribute label = s_bytes (CKA_LABEL, "unwrapper"), cls = CS__ATTRIBUTE__INIT;
    Cs__Attribute unwrap = s_flag (CKA_UNWRAP, true), decrypt = s_flag (CKA_DECRYPT, false);
    cls.type = CKA_CLASS;
    cls.value_case = CS__ATTRIBUTE__VALUE_NUMBER;
    cls.number = CKO_PRIVATE_KEY;
    Cs__Attribute *tmpl [] = { &label, &cls, &unwrap, &decrypt };
    Cs__ImportKeyJob imp = CS__IMPORT_KEY_JOB__INIT;
    imp.private_pkcs8 = (ProtobufCBinaryData) { len, der };
    imp.n_template_ = 4;
    imp.template_ = tmpl;
    Cs__Request *req = s_request (60);
    req->jobs [0]->kind_case = CS__JOB__KIND_IMPORT_KEY;
    req->jobs [0]->import_key = &imp;
    Cs__Reply *reply = NULL;
    ck_assert_uint_eq (s_call (s_alice, req, &reply), CKR_OK);
    char *ref = strdup (reply->results [0]->imported->key->ref);
    cs__reply__free_unpacked (reply, NULL);
    req->jobs [0]->kind_case = CS__JOB__KIND_HELLO;
    req->jobs [0]->hello = NULL;
    th_request_free (req);
    /*  A 16-byte key value encrypted by OpenSSL.  */
    uint8_t value [16], cipher [256];
    size_t cipher_len = sizeof cipher;
    RAND_bytes (value, sizeof value);
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_pkey (NULL, pkey, NULL);
    ck_assert (ctx && EVP_PKEY_encrypt_init (ctx) == 1
               && EVP_PKEY_CTX_set_rsa_padding (ctx, RSA_PKCS1_OAEP_PADDING) == 1
               && EVP_PKEY_CTX_set_rsa_oaep_md (ctx, EVP_sha256 ()) == 1
               && EVP_PKEY_CTX_set_rsa_mgf1_md (ctx, EVP_sha256 ()) == 1
               && EVP_PKEY_encrypt (ctx, cipher, &cipher_len, value, sizeof value) == 1);
    EVP_PKEY_CTX_free (ctx);
    ck_assert_uint_eq (s_decrypt (ref, cipher, cipher_len, false, NULL, 0), CKR_KEY_FUNCTION_NOT_PERMITTED);
    ck_assert_uint_eq (s_decrypt (ref, cipher, cipher_len, true, value, sizeof value), CKR_OK);
    /*  An unwrap job is C_UnwrapKey's OAEP only: no raw RSA, no PKCS#1 v1.5 oracle.  */
    ck_assert_uint_eq (s_decrypt_mech (ref, CKM_RSA_X_509, cipher, cipher_len, true, NULL, 0), CKR_MECHANISM_INVALID);
    ck_assert_uint_eq (s_decrypt_mech (ref, CKM_RSA_PKCS, cipher, cipher_len, true, NULL, 0), CKR_MECHANISM_INVALID);
    Cs__Attribute unwrap_off = s_flag (CKA_UNWRAP, false), decrypt_on = s_flag (CKA_DECRYPT, true);
    Cs__Attribute sign_on = s_flag (CKA_SIGN, true), recover_on = s_flag (CKA_SIGN_RECOVER, true);
    Cs__Attribute *a1 [] = { &unwrap_off }, *a2 [] = { &decrypt_on }, *a3 [] = { &sign_on }, *a4 [] = { &recover_on };
    /*  The sign-raw attack: CKA_SIGN (or CKA_SIGN_RECOVER) on, then raw RSA.  */
    ck_assert_uint_eq (s_crypto_mech (ref, true, CKM_RSA_X_509), CKR_KEY_FUNCTION_NOT_PERMITTED);
    ck_assert_uint_eq (s_key_job (s_alice, s_ticket, s_ticket_len, ref, CKO_PRIVATE_KEY, a3, 1),
                       CKR_ATTRIBUTE_READ_ONLY);
    ck_assert_uint_eq (s_key_job (s_alice, s_ticket, s_ticket_len, ref, CKO_PRIVATE_KEY, a4, 1),
                       CKR_ATTRIBUTE_READ_ONLY);
    ck_assert_uint_eq (s_key_job (s_alice, s_ticket, s_ticket_len, ref, CKO_PRIVATE_KEY, a2, 1),
                       CKR_ATTRIBUTE_READ_ONLY);
    ck_assert_uint_eq (s_crypto_mech (ref, true, CKM_RSA_X_509), CKR_KEY_FUNCTION_NOT_PERMITTED);
    /*  CKA_UNWRAP off: allowed, and the key does nothing after it.  */
    ck_assert_uint_eq (s_key_job (s_alice, s_ticket, s_ticket_len, ref, CKO_PRIVATE_KEY, a1, 1), CKR_OK);
    ck_assert_uint_eq (s_key_job (s_alice, s_ticket, s_ticket_len, ref, CKO_PRIVATE_KEY, a2, 1),
                       CKR_ATTRIBUTE_READ_ONLY);
    ck_assert_uint_eq (s_decrypt (ref, cipher, cipher_len, false, NULL, 0), CKR_KEY_FUNCTION_NOT_PERMITTED);
    ck_assert_uint_eq (s_decrypt (ref, cipher, cipher_len, true, NULL, 0), CKR_KEY_FUNCTION_NOT_PERMITTED);
    /*  Wrap/decrypt and wrap/sign in one template: refused.  */
    Cs__Attribute decrypt_true = s_flag (CKA_DECRYPT, true);
    Cs__Attribute *combined [] = { &cls, &unwrap, &decrypt_true }, *signing [] = { &cls, &unwrap, &sign_on };
    Cs__Reply *none = NULL;
    ck_assert_uint_eq (s_import_with (pkey, combined, 3, &none), CKR_TEMPLATE_INCONSISTENT);
    cs__reply__free_unpacked (none, NULL);
    none = NULL;
    ck_assert_uint_eq (s_import_with (pkey, signing, 3, &none), CKR_TEMPLATE_INCONSISTENT);
    cs__reply__free_unpacked (none, NULL);
    free (ref);
    OPENSSL_free (der);
    EVP_PKEY_free (pkey);
}
END_TEST

/*  Imports pkey into alice's tenant as a token key; returns its ref (caller frees).  */
static char *
s_import (EVP_PKEY *pkey, const char *label_text)
{
    size_t len = 0;
    uint8_t *der = th_pkcs8 (pkey, &len);
    Cs__Attribute label = s_bytes (CKA_LABEL, label_text);
    Cs__Attribute *tmpl [] = { &label };
    Cs__ImportKeyJob imp = CS__IMPORT_KEY_JOB__INIT;
    imp.private_pkcs8 = (ProtobufCBinaryData) { len, der };
    imp.n_template_ = 1;
    imp.template_ = tmpl;
    Cs__Request *req = s_request (51);
    req->jobs [0]->kind_case = CS__JOB__KIND_IMPORT_KEY;
    req->jobs [0]->import_key = &imp;
    Cs__Reply *reply = NULL;
    ck_assert_uint_eq (s_call (s_alice, req, &reply), CKR_OK);
    char *ref = strdup (reply->results [0]->imported->key->ref);
    cs__reply__free_unpacked (reply, NULL);
    req->jobs [0]->kind_case = CS__JOB__KIND_HELLO;
    req->jobs [0]->hello = NULL;
    th_request_free (req);
    OPENSSL_free (der);
    return ref;
}

/*  ListKeys with known_version as alice; returns the result (in *reply_p,
 *  caller frees).  */
static Cs__ListKeysResult *
s_list (uint64_t known_version, Cs__Reply **reply_p)
{
    Cs__Request *req = s_request (50);
    th_job_list_keys (req->jobs [0]);
    req->jobs [0]->list_keys->known_version = known_version;
    ck_assert_uint_eq (s_call (s_alice, req, reply_p), CKR_OK);
    th_request_free (req);
    Cs__ListKeysResult *keys = (*reply_p)->results [0]->keys;
    ck_assert_ptr_nonnull (keys);
    return keys;
}

/*  True when the list holds a key with this ref.  */
static bool
s_listed (const Cs__ListKeysResult *keys, const char *ref)
{
    for (size_t i = 0; i < keys->n_keys; i++)
        if (streq (keys->keys [i]->ref, ref))
            return true;
    return false;
}

/*  The list version contract (docs/CONTRACTS.md, ListKeysJob): the current
 *  known_version gets `unchanged` and no keys; after any key change the same
 *  known_version gets the whole new list and a new version.  */
START_TEST (test_list_version_unchanged)
{
    EVP_PKEY *a = EVP_EC_gen ("P-256"), *b = EVP_EC_gen ("P-256");
    char *ref_a = s_import (a, "a");
    Cs__Reply *reply = NULL;
    /*  No known version: the whole list, with the key.  */
    Cs__ListKeysResult *keys = s_list (0, &reply);
    ck_assert (!keys->unchanged);
    ck_assert_uint_eq (keys->n_keys, 1);
    ck_assert_str_eq (keys->keys [0]->ref, ref_a);
    uint64_t v1 = keys->version;
    ck_assert_uint_ne (v1, 0);
    cs__reply__free_unpacked (reply, NULL);
    /*  The current version: unchanged, no keys.  */
    keys = s_list (v1, &reply);
    ck_assert (keys->unchanged);
    ck_assert_uint_eq (keys->n_keys, 0);
    ck_assert_uint_eq (keys->version, v1);
    cs__reply__free_unpacked (reply, NULL);
    /*  A key added: v1 is stale, the list has both keys.  */
    char *ref_b = s_import (b, "b");
    keys = s_list (v1, &reply);
    ck_assert (!keys->unchanged);
    ck_assert_uint_eq (keys->n_keys, 2);
    ck_assert (s_listed (keys, ref_a) && s_listed (keys, ref_b));
    uint64_t v2 = keys->version;
    ck_assert_uint_ne (v2, v1);
    cs__reply__free_unpacked (reply, NULL);
    keys = s_list (v2, &reply);
    ck_assert (keys->unchanged);
    ck_assert_uint_eq (keys->n_keys, 0);
    cs__reply__free_unpacked (reply, NULL);
    /*  Half a key deleted (its private object: a row update), then the rest
        (the row goes): each change makes the version before it stale.  */
    ck_assert_uint_eq (s_key_job (s_alice, s_ticket, s_ticket_len, ref_a, CKO_PRIVATE_KEY, NULL, 0), CKR_OK);
    keys = s_list (v2, &reply);
    ck_assert (!keys->unchanged);
    ck_assert_uint_eq (keys->n_keys, 2);
    for (size_t i = 0; i < 2; i++)
        ck_assert (streq (keys->keys [i]->ref, ref_a) ? !keys->keys [i]->has_private
                                                      : keys->keys [i]->has_private);
    uint64_t v3 = keys->version;
    ck_assert (v3 != v2 && v3 != v1);
    cs__reply__free_unpacked (reply, NULL);
    ck_assert_uint_eq (s_key_job (s_alice, s_ticket, s_ticket_len, ref_a, CKO_PUBLIC_KEY, NULL, 0), CKR_OK);
    keys = s_list (v3, &reply);
    ck_assert (!keys->unchanged);
    ck_assert_uint_eq (keys->n_keys, 1);
    ck_assert_str_eq (keys->keys [0]->ref, ref_b);
    ck_assert (keys->version != v3 && keys->version != v2 && keys->version != v1);
    cs__reply__free_unpacked (reply, NULL);
    free (ref_a);
    free (ref_b);
    EVP_PKEY_free (a);
    EVP_PKEY_free (b);
}
END_TEST

/*  Issue #7: without a login a key list holds only public objects: a key
 *  pair's public key (never its private key), and not a public key whose
 *  CKA_PRIVATE is TRUE.  Logged in, everything.  */
START_TEST (test_list_without_login)
{
    EVP_PKEY *pkey = EVP_EC_gen ("P-256");
    char *plain = s_import (pkey, "plain");
    Cs__Attribute private_flag = s_flag (CKA_PRIVATE, true), token = s_flag (CKA_TOKEN, true);
    Cs__Attribute *pub [] = { &private_flag, &token };
    static const uint8_t p256 [] = { 0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07 };
    Cs__GenerateKeyPairJob gen = CS__GENERATE_KEY_PAIR_JOB__INIT;
    gen.mechanism = CKM_EC_KEY_PAIR_GEN;
    gen.ec_params = (ProtobufCBinaryData) { sizeof p256, (uint8_t *) p256 };
    gen.token = true;
    gen.n_public_template = 2;
    gen.public_template = pub;
    Cs__Request *req = s_request (70);
    s_job_generate (req->jobs [0], &gen);
    Cs__Reply *reply = NULL;
    ck_assert_uint_eq (s_call (s_alice, req, &reply), CKR_OK);
    char *hidden = strdup (reply->results [0]->generated->key->ref);
    cs__reply__free_unpacked (reply, NULL);
    req->jobs [0]->kind_case = CS__JOB__KIND_HELLO;
    req->jobs [0]->hello = NULL;
    th_request_free (req);
    /*  Logged in: both keys, both halves.  */
    Cs__ListKeysResult *keys = s_list (0, &reply);
    ck_assert_uint_eq (keys->n_keys, 2);
    for (size_t i = 0; i < 2; i++)
        ck_assert (keys->keys [i]->has_private && keys->keys [i]->has_public);
    cs__reply__free_unpacked (reply, NULL);
    /*  Not logged in: no ticket gives the public view; a forged ticket is
        refused with CKR_USER_NOT_LOGGED_IN (CONTRACTS.md "Key lists").  */
    uint8_t forged [33] = { CKU_USER };
    req = th_request (1, 71);
    th_job_list_keys (req->jobs [0]);
    req->ticket = (ProtobufCBinaryData) { sizeof forged, forged };
    ck_assert_uint_eq (s_call (s_alice, req, &reply), CKR_USER_NOT_LOGGED_IN);
    cs__reply__free_unpacked (reply, NULL);
    th_request_free (req);
    req = th_request (1, 71);
    th_job_list_keys (req->jobs [0]);
    ck_assert_uint_eq (s_call (s_alice, req, &reply), CKR_OK);
    keys = reply->results [0]->keys;
    ck_assert_uint_eq (keys->n_keys, 1);
    ck_assert_str_eq (keys->keys [0]->ref, plain);
    ck_assert (keys->keys [0]->has_public);
    ck_assert_msg (!keys->keys [0]->has_private, "a private key object listed without a login");
    ck_assert_uint_eq (keys->keys [0]->n_private_attributes, 0);
    cs__reply__free_unpacked (reply, NULL);
    th_request_free (req);
    ck_assert_uint_eq (s_list_count (s_eve), 0);
    free (plain);
    free (hidden);
    EVP_PKEY_free (pkey);
}
END_TEST

/*  Issue #7: eve (tenant other) probing alice's keystore ref, in every job
 *  kind, gets the answers of a ref that does not exist.  */
START_TEST (test_foreign_refs_unknown)
{
    EVP_PKEY *pkey = EVP_EC_gen ("P-256");
    char *ref = s_import (pkey, "alice's");
    size_t eve_len = 0;
    uint64_t rv = 0;
    uint8_t *eve = th_login (s_eve, "5678", &eve_len, &rv);
    ck_assert_uint_eq (rv, CKR_OK);
    th_probe_unknown (s_eve, eve, eve_len, ref, "ks:00112233445566778899aabbccddeeff");
    th_probe_unknown (s_eve, eve, eve_len, "board:01", "board:99");
    th_probe_unknown (s_eve, eve, eve_len, "something else", "ks:");
    /*  And alice's key is still whole.  */
    Cs__Reply *reply = NULL;
    Cs__ListKeysResult *keys = s_list (0, &reply);
    ck_assert_uint_eq (keys->n_keys, 1);
    ck_assert_str_eq (keys->keys [0]->label, "alice's");
    cs__reply__free_unpacked (reply, NULL);
    free (eve);
    free (ref);
    EVP_PKEY_free (pkey);
}
END_TEST

/*  Token flags of eve's tenant from Hello.  */
static uint64_t
s_eve_flags (void)
{
    Cs__Request *req = th_request (1, 60);
    th_job_hello (req->jobs [0]);
    Cs__Reply *reply = NULL;
    ck_assert_uint_eq (s_call (s_eve, req, &reply), CKR_OK);
    ck_assert_str_eq (reply->results [0]->hello->token_label, "other");
    uint64_t flags = reply->results [0]->hello->token_flags;
    cs__reply__free_unpacked (reply, NULL);
    th_request_free (req);
    return flags;
}

START_TEST (test_pin_lock_and_init_pin)
{
    size_t len = 0;
    uint64_t rv = 0;
    for (int i = 0; i < 5; i++) {      /* 5 wrong PINs lock (cryptoserver-keystore(5)) */
        ck_assert_ptr_null (th_login (s_eve, "0000", &len, &rv));
        ck_assert_uint_eq (rv, CKR_PIN_INCORRECT);
    }
    /*  Locked now: even the right PIN is refused.  */
    ck_assert_ptr_null (th_login (s_eve, "5678", &len, &rv));
    ck_assert_uint_eq (rv, CKR_PIN_LOCKED);
    ck_assert (s_eve_flags () & CKF_USER_PIN_LOCKED);
    /*  InitPIN needs an SO ticket; then the new PIN works.  */
    Cs__InitPinJob init = CS__INIT_PIN_JOB__INIT;
    init.pin = (ProtobufCBinaryData) { 4, (uint8_t *) "9999" };
    Cs__Request *req = th_request (1, 61);
    req->jobs [0]->kind_case = CS__JOB__KIND_INIT_PIN;
    req->jobs [0]->init_pin = &init;
    ck_assert_uint_eq (s_call (s_eve, req, NULL), CKR_USER_NOT_LOGGED_IN);
    Cs__Request *login = th_request (1, 62);
    th_job_login (login->jobs [0], CKU_SO, "567890");
    Cs__Reply *reply = NULL;
    ck_assert_uint_eq (s_call (s_eve, login, &reply), CKR_OK);
    req->ticket = reply->results [0]->login->ticket;
    ck_assert_uint_eq (s_call (s_eve, req, NULL), CKR_OK);
    cs__reply__free_unpacked (reply, NULL);
    th_request_free (login);
    req->jobs [0]->kind_case = CS__JOB__KIND_HELLO;
    req->jobs [0]->hello = NULL;
    th_request_free (req);
    ck_assert (!(s_eve_flags () & CKF_USER_PIN_LOCKED));
    uint8_t *ticket = th_login (s_eve, "9999", &len, &rv);
    ck_assert_uint_eq (rv, CKR_OK);
    free (ticket);
}
END_TEST

/*  A job whose deadline has already passed when it is routed (here behind
 *  a login, about 70 ms of scrypt, in a request with a 1 ms deadline) while
 *  a worker is idle fails at once with CKR_DEVICE_ERROR, and the request is
 *  still answered once, with every result, after all its jobs are routed.
 *  Before, the frontend answered and freed the request from inside the
 *  routing of that job and went on routing the next jobs into freed memory
 *  (a crash any client could cause), and a key generation that failed so
 *  was reported as CKR_OK.  */
START_TEST (test_deadline_passed_when_routed)
{
    ck_assert_uint_eq (s_pool_wait (2), 2);            /* the pool is full: both workers idle */
    EVP_PKEY *pkey = EVP_EC_gen ("P-256");
    size_t der_len = 0;
    uint8_t *der = th_pkcs8 (pkey, &der_len), digest [32] = { 1 };
    Cs__GenerateKeyPairJob gen = CS__GENERATE_KEY_PAIR_JOB__INIT;
    gen.mechanism = CKM_RSA_PKCS_KEY_PAIR_GEN;
    gen.modulus_bits = 3072;                            /* no pool of that size: a worker's job */
    for (int round = 0; round < 2; round++) {
        Cs__Request *req = th_request (3, 70 + (uint64_t) round);
        req->ticket = (ProtobufCBinaryData) { s_ticket_len, s_ticket };
        req->deadline_ms = 1;
        th_job_login (req->jobs [0], CKU_USER, "1234");
        if (round == 0)
            s_job_generate (req->jobs [1], &gen);
        else {
            th_job_crypto (req->jobs [1], true, NULL, 0, CKM_ECDSA, digest, sizeof digest);
            req->jobs [1]->sign->key_pkcs8 = (ProtobufCBinaryData) { der_len, der };
        }
        th_job_hello (req->jobs [2]);
        Cs__Reply *reply = th_call (s_alice, req);
        ck_assert_uint_eq (reply->rv, CKR_OK);
        ck_assert_uint_eq (reply->n_results, 3);
        ck_assert_uint_eq (reply->results [0]->rv, CKR_OK);
        /*  Since logins run on the slow pool (issue #8) the jobs of a
            request are routed at once, so job 1 may also beat its 1 ms
            deadline: then it must carry its real result (a generated key,
            a signature), never a bare CKR_OK.  */
        const Cs__Result *r1 = reply->results [1];
        if (r1->rv == CKR_OK && round == 0)
            ck_assert_msg (r1->kind_case == CS__RESULT__KIND_GENERATED && r1->generated,
                           "round 0: a key generation answered CKR_OK without a key");
        else
        if (r1->rv == CKR_OK)
            ck_assert_msg (r1->kind_case == CS__RESULT__KIND_DATA && r1->data.len == 64,
                           "round 1: a signature answered CKR_OK without one");
        else
            ck_assert_msg (r1->rv == CKR_DEVICE_ERROR, "round %d: job 1 answered %s", round,
                           cs_rv_name (r1->rv));
        ck_assert_uint_eq (reply->results [2]->rv, CKR_OK);
        cs__reply__free_unpacked (reply, NULL);
        if (round == 0) {
            req->jobs [1]->kind_case = CS__JOB__KIND_HELLO;     /* gen is on the stack */
            req->jobs [1]->hello = NULL;
        }
        th_request_free (req);
    }
    uint64_t rv = 0;                                    /* and the broker goes on */
    free (th_login (s_alice, "1234", &(size_t) { 0 }, &rv));
    ck_assert_uint_eq (rv, CKR_OK);
    OPENSSL_free (der);
    EVP_PKEY_free (pkey);
}
END_TEST

/*  Certificates and data objects (issue #10, broker/keys/objjobs.c): writing
 *  and destroying need a user ticket; a list without one leaves out the
 *  private objects (the broker filters, not only the module); another
 *  tenant sees none and cannot destroy or replace them; a replace keeps
 *  the class.  */
static uint8_t *s_obj_ticket;       /* the ticket s_object_job sends (with_ticket) */
static size_t s_obj_ticket_len;

static uint64_t
s_object_job (zsock_t *client, bool with_ticket, Cs__Job__KindCase kind, Cs__ObjectInfo *object,
              const char *ref, Cs__Reply **reply_p)
{
    static uint64_t id = 9000;
    Cs__Request *req = th_request (1, ++id);
    if (with_ticket)
        req->ticket = (ProtobufCBinaryData) { s_obj_ticket_len, s_obj_ticket };
    Cs__Job *job = req->jobs [0];
    job->kind_case = kind;
    if (kind == CS__JOB__KIND_PUT_OBJECT) {
        job->put_object = calloc (1, sizeof *job->put_object);
        cs__put_object_job__init (job->put_object);
        job->put_object->object = object;
    }
    else
    if (kind == CS__JOB__KIND_DESTROY_OBJECT) {
        job->destroy_object = calloc (1, sizeof *job->destroy_object);
        cs__destroy_object_job__init (job->destroy_object);
        job->destroy_object->ref = (char *) ref;
    }
    else {
        job->list_objects = calloc (1, sizeof *job->list_objects);
        cs__list_objects_job__init (job->list_objects);
    }
    uint64_t rv = s_call (client, req, reply_p);
    th_request_free (req);
    return rv;
}

//  How many objects a list gives (its rv must be CKR_OK).
static size_t
s_objects_listed (zsock_t *client, bool with_ticket)
{
    Cs__Reply *reply = NULL;
    ck_assert_uint_eq (s_object_job (client, with_ticket, CS__JOB__KIND_LIST_OBJECTS, NULL, NULL, &reply), CKR_OK);
    ck_assert_int_eq (reply->results [0]->kind_case, CS__RESULT__KIND_OBJECTS);
    size_t n = reply->results [0]->objects->n_objects;
    cs__reply__free_unpacked (reply, NULL);
    return n;
}

START_TEST (test_objects)
{
    Cs__Attribute value = CS__ATTRIBUTE__INIT;
    Cs__Attribute *attrs [] = { &value };
    value.type = CKA_VALUE;
    value.value_case = CS__ATTRIBUTE__VALUE_BYTES;
    value.bytes = (ProtobufCBinaryData) { 6, (uint8_t *) "secret" };
    Cs__ObjectInfo cert = CS__OBJECT_INFO__INIT, data = CS__OBJECT_INFO__INIT;
    cert.object_class = CKO_CERTIFICATE;
    data.object_class = CKO_DATA;
    data.is_private = true;
    data.attributes = attrs;
    data.n_attributes = 1;
    Cs__Reply *reply = NULL;
    s_obj_ticket = s_ticket;
    s_obj_ticket_len = s_ticket_len;
    ck_assert_uint_eq (s_object_job (s_alice, false, CS__JOB__KIND_PUT_OBJECT, &cert, NULL, NULL),
                       CKR_USER_NOT_LOGGED_IN);
    ck_assert_uint_eq (s_object_job (s_alice, true, CS__JOB__KIND_PUT_OBJECT, &cert, NULL, &reply), CKR_OK);
    ck_assert_int_eq (reply->results [0]->kind_case, CS__RESULT__KIND_OBJECT);
    char *cert_ref = strdup (reply->results [0]->object->ref);
    ck_assert_int_eq (strncmp (cert_ref, "obj:", 4), 0);
    cs__reply__free_unpacked (reply, NULL);
    ck_assert_uint_eq (s_object_job (s_alice, true, CS__JOB__KIND_PUT_OBJECT, &data, NULL, &reply), CKR_OK);
    char *data_ref = strdup (reply->results [0]->object->ref);
    cs__reply__free_unpacked (reply, NULL);
    ck_assert_uint_eq (s_objects_listed (s_alice, true), 2);
    ck_assert_uint_eq (s_objects_listed (s_alice, false), 1);      /* the private one is left out */
    ck_assert_uint_eq (s_objects_listed (s_eve, false), 0);
    //  eve (tenant other), logged in, can neither destroy nor replace alice's object.
    uint64_t eve_rv = 0;
    size_t eve_len = 0;
    uint8_t *eve = th_login (s_eve, "5678", &eve_len, &eve_rv);
    ck_assert_uint_eq (eve_rv, CKR_OK);
    s_obj_ticket = eve;
    s_obj_ticket_len = eve_len;
    ck_assert_uint_eq (s_objects_listed (s_eve, true), 0);
    ck_assert_uint_eq (s_object_job (s_eve, true, CS__JOB__KIND_DESTROY_OBJECT, NULL, cert_ref, NULL),
                       CKR_OBJECT_HANDLE_INVALID);
    cert.ref = cert_ref;
    ck_assert_uint_eq (s_object_job (s_eve, true, CS__JOB__KIND_PUT_OBJECT, &cert, NULL, NULL),
                       CKR_OBJECT_HANDLE_INVALID);
    free (eve);
    s_obj_ticket = s_ticket;
    s_obj_ticket_len = s_ticket_len;
    ck_assert_uint_eq (s_objects_listed (s_alice, true), 2);
    //  A replace needs an object of the tenant, of the same class.
    cert.ref = "obj:00000000000000000000000000000000";
    ck_assert_uint_eq (s_object_job (s_alice, true, CS__JOB__KIND_PUT_OBJECT, &cert, NULL, NULL),
                       CKR_OBJECT_HANDLE_INVALID);
    data.ref = cert_ref;
    ck_assert_uint_eq (s_object_job (s_alice, true, CS__JOB__KIND_PUT_OBJECT, &data, NULL, NULL),
                       CKR_TEMPLATE_INCONSISTENT);
    //  The attribute rules of common/cs_obj_rules.h (issue #19): a
    //  certificate's value never changes, CKA_TRUSTED is the SO's, a label
    //  changes freely; an object made undestroyable stays.
    cert.ref = cert_ref;
    cert.attributes = attrs;
    cert.n_attributes = 1;
    ck_assert_uint_eq (s_object_job (s_alice, true, CS__JOB__KIND_PUT_OBJECT, &cert, NULL, NULL),
                       CKR_ATTRIBUTE_READ_ONLY);
    Cs__Attribute label = CS__ATTRIBUTE__INIT, flag = CS__ATTRIBUTE__INIT;
    label.type = CKA_LABEL;
    label.value_case = CS__ATTRIBUTE__VALUE_BYTES;
    label.bytes = (ProtobufCBinaryData) { 4, (uint8_t *) "cert" };
    Cs__Attribute *labelled [] = { &label }, *flagged [] = { &flag };
    cert.attributes = labelled;
    ck_assert_uint_eq (s_object_job (s_alice, true, CS__JOB__KIND_PUT_OBJECT, &cert, NULL, NULL), CKR_OK);
    ck_assert_uint_eq (s_objects_listed (s_alice, true), 2);
    flag.type = CKA_TRUSTED;
    flag.value_case = CS__ATTRIBUTE__VALUE_FLAG;
    flag.flag = true;
    Cs__ObjectInfo anchor = CS__OBJECT_INFO__INIT;
    anchor.object_class = CKO_CERTIFICATE;
    anchor.attributes = flagged;
    anchor.n_attributes = 1;
    ck_assert_uint_eq (s_object_job (s_alice, true, CS__JOB__KIND_PUT_OBJECT, &anchor, NULL, NULL),
                       CKR_ATTRIBUTE_READ_ONLY);
    flag.type = CKA_DESTROYABLE;
    flag.flag = false;
    anchor.object_class = CKO_DATA;
    ck_assert_uint_eq (s_object_job (s_alice, true, CS__JOB__KIND_PUT_OBJECT, &anchor, NULL, &reply), CKR_OK);
    char *pinned_ref = strdup (reply->results [0]->object->ref);
    cs__reply__free_unpacked (reply, NULL);
    ck_assert_uint_eq (s_object_job (s_alice, true, CS__JOB__KIND_DESTROY_OBJECT, NULL, pinned_ref, NULL),
                       CKR_ACTION_PROHIBITED);
    free (pinned_ref);
    ck_assert_uint_eq (s_objects_listed (s_alice, true), 3);
    ck_assert_uint_eq (s_object_job (s_alice, true, CS__JOB__KIND_DESTROY_OBJECT, NULL, data_ref, NULL), CKR_OK);
    ck_assert_uint_eq (s_object_job (s_alice, true, CS__JOB__KIND_DESTROY_OBJECT, NULL, data_ref, NULL),
                       CKR_OBJECT_HANDLE_INVALID);
    ck_assert_uint_eq (s_objects_listed (s_alice, true), 2);
    free (cert_ref);
    free (data_ref);
}
END_TEST

static Suite *
s_suite (void)
{
    Suite *suite = suite_create ("broker_keys");
    TCase *tc = tcase_create ("keys");
    tcase_add_checked_fixture (tc, s_setup, s_teardown);
    tcase_set_timeout (tc, 120);
    tcase_add_test (tc, test_generate_from_pool);
    tcase_add_test (tc, test_pool_issue_recorded);
    tcase_add_test (tc, test_generate_without_pool);
    tcase_add_test (tc, test_per_request_key);
    tcase_add_test (tc, test_import_attributes_and_isolation);
    tcase_add_test (tc, test_unwrap_policy);
    tcase_add_test (tc, test_attribute_rules_table);
    tcase_add_test (tc, test_allowed_mechanisms);
    tcase_add_test (tc, test_allowed_mechanisms_derive);
    tcase_add_test (tc, test_list_version_unchanged);
    tcase_add_test (tc, test_pin_lock_and_init_pin);
    tcase_add_test (tc, test_list_without_login);
    tcase_add_test (tc, test_foreign_refs_unknown);
    tcase_add_test (tc, test_deadline_passed_when_routed);
    tcase_add_test (tc, test_objects);
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
