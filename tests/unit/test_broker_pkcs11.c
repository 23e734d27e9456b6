/*  test_broker_pkcs11.c — the pkcs11 driver for real: two SoftHSMv2 tokens
 *  (board0, board1) of one libsofthsm2.so in one process, the same RSA-2048
 *  and P-256 keys imported into both with pkcs11-tool, and the whole broker
 *  in-process answering CURVE clients: bob (tenant demo, the boards'
 *  tenant) and eve (tenant other).  Every signature and plaintext is
 *  checked with OpenSSL.  Also (issue #7) the refs a tenant may name with
 *  keys/home = board0, and a master key wrapped by a board key that no
 *  client may use.  Skipped (77) without SoftHSMv2 or pkcs11-tool.
 */
#include <dlfcn.h>
#include <openssl/param_build.h>
#include <openssl/x509.h>
#include "test_broker_fixture.h"
#include "key_info.h"
#include "test_run.h"

static char *s_dir;
static EVP_PKEY *s_rsa, *s_ec, *s_wrapper;
static broker_config_t *s_config;
static server_t *s_server;
static zsock_t *s_client, *s_eve;
static uint8_t *s_ticket;
static size_t s_ticket_len;
static const uint8_t s_rsa_id [] = "board:01", s_ec_id [] = "board:03";

/*  Runs a shell command in s_dir with SOFTHSM2_CONF set; asserts success.  */
static void
s_sh (const char *format, ...)
{
    char command [8192], body [7000];
    va_list args;
    va_start (args, format);
    vsnprintf (body, sizeof body, format, args);
    va_end (args);
    snprintf (command, sizeof command, "cd '%s' && (%s) >/dev/null 2>&1", s_dir, body);
    ck_assert_msg (system (command) == 0, "failed: %s", body);
}

/*  Two tokens, both holding rsa (id 01) and ec (id 03), private and public.  */
static void
s_tokens (void)
{
    const char *module = getenv ("SOFTHSM2_MODULE");
    s_sh ("mkdir tokens && printf 'directories.tokendir = %s/tokens\\nobjectstore.backend = file\\n"
          "log.level = ERROR\\n' > softhsm2.conf && (umask 077; echo 1234 > board.pin)", s_dir);
    for (int b = 0; b < 2; b++) {
        s_sh ("softhsm2-util --init-token --free --label board%d --pin 1234 --so-pin 123456", b);
        for (int k = 0; k < 2; k++) {
            const char *name = k ? "ec" : "rsa", *id = k ? "03" : "01";
            s_sh ("openssl pkey -in %s.pem -pubout -out %s.pub.pem", name, name);
            s_sh ("pkcs11-tool --module %s --token-label board%d --login --pin 1234 --write-object "
                  "%s.pem --type privkey --id %s --label %s --usage-sign --usage-decrypt",
                  module, b, name, id, name);
            s_sh ("pkcs11-tool --module %s --token-label board%d --login --pin 1234 --write-object "
                  "%s.pub.pem --type pubkey --id %s --label %s", module, b, name, id, name);
        }
    }
}

/*  A fresh directory: the two tokens, certs of bob (tenant demo) and eve
 *  (tenant other), the keystore.  */
static void
s_prepare (void)
{
    char path [4096];
    s_dir = th_tmpdir ();
    snprintf (path, sizeof path, "%s/softhsm2.conf", s_dir);
    setenv ("SOFTHSM2_CONF", path, 1);
    s_rsa = th_key_pem (s_dir, "rsa.pem", 2048);
    s_ec = th_key_pem (s_dir, "ec.pem", 0);
    s_tokens ();
    th_certs (s_dir, "bob", "demo");
    th_client_add (s_dir, "eve", "other");
    th_keystore (s_dir);
}

/*  Writes broker.conf (th_conf_head's broker and keystore sections):
 *  keys/home = board0, both boards (board1 of tenant board1_tenant, or of
 *  none when NULL), and the keystore/master-key line(s) master_key, or the
 *  file master.key when NULL.  */
static void
s_conf (const char *master_key, const char *board1_tenant)
{
    char *conf = NULL, tenant1 [64] = "";
    const char *module = getenv ("SOFTHSM2_MODULE");
    if (board1_tenant)
        snprintf (tenant1, sizeof tenant1, "        tenant = %s\n", board1_tenant);
    ck_assert_int_ge (asprintf (&conf,
        "broker\n    endpoint = tcp://127.0.0.1:!\n    stats-interval-ms = 0\n"
        "    curve\n        enabled = true\n        secret-key = broker.cert_secret\n"
        "        clients = clients.d\n"
        "keystore\n    path = keystore.db\n%s"
        "keys\n    home = board0\n" "drivers\n"
        "    board0\n        type = pkcs11\n        module = %s\n        token = board0\n"
        "        pin-file = board.pin\n        threads = 2\n        tenant = demo\n"
        "    board1\n        type = pkcs11\n        module = %s\n        token = board1\n"
        "        pin-file = board.pin\n        threads = 2\n%s",
        master_key ? master_key : "    master-key = master.key\n", module, module, tenant1), 0);
    th_write (s_dir, "broker.conf", conf);
    free (conf);
}

/*  Starts the broker of broker.conf; returns false when it refuses to start.  */
static bool
s_try_start (void)
{
    s_config = tb_config_load (s_dir);
    s_server = server_new (s_config, false);
    return s_server != NULL;
}

/*  Starts the broker, connects bob and eve, logs bob in.  */
static void
s_start (void)
{
    ck_assert (s_try_start ());
    s_client = th_dealer (s_dir, "bob", server_endpoint (s_server));
    s_eve = th_dealer (s_dir, "eve", server_endpoint (s_server));
    s_ticket = th_login_ok (s_client, "1234", &s_ticket_len);
}

static void
s_stop (void)
{
    zsock_destroy (&s_client);
    zsock_destroy (&s_eve);
    tb_stop (&s_server, &s_config);
    free (s_ticket);
    s_ticket = NULL;
}

static void
s_setup (void)
{
    s_prepare ();
    s_conf (NULL, "demo");
    s_start ();
}

static void
s_teardown (void)
{
    s_stop ();
    EVP_PKEY_free (s_rsa);
    EVP_PKEY_free (s_ec);
    EVP_PKEY_free (s_wrapper);
    s_wrapper = NULL;
    th_tmpdir_remove (&s_dir);
}

/*  Issue #9: the tokens lose their login (the test logs the application out
 *  of both, as a token reset would): the jobs fail on both boards (out of
 *  rotation), the workers reopen their sessions, the pkcs11 driver logs in
 *  again, and the probes bring the boards back: signatures work again
 *  within a few seconds and verify.  */
START_TEST (test_login_lost)
{
    void *dl = dlopen (getenv ("SOFTHSM2_MODULE"), RTLD_NOW | RTLD_NOLOAD);
    ck_assert_ptr_nonnull (dl);             /* the driver's instance */
    CK_C_GetFunctionList get = (CK_C_GetFunctionList) dlsym (dl, "C_GetFunctionList");
    CK_FUNCTION_LIST_PTR fl = NULL;
    ck_assert (get && get (&fl) == CKR_OK);
    CK_SLOT_ID slots [8];
    CK_ULONG n_slots = 8;
    ck_assert_uint_eq (fl->C_GetSlotList (CK_TRUE, slots, &n_slots), CKR_OK);
    for (CK_ULONG i = 0; i < n_slots; i++) {
        CK_SESSION_HANDLE session;
        if (fl->C_OpenSession (slots [i], CKF_SERIAL_SESSION, NULL, NULL, &session) != CKR_OK)
            continue;
        fl->C_Logout (session);
        fl->C_CloseSession (session);
    }
    uint8_t di [51];
    th_digest_info ("after the logout", di);
    int64_t end = zclock_mono () + 5000;
    CK_RV rv = CKR_GENERAL_ERROR;
    int tries = 0;
    while (rv != CKR_OK && zclock_mono () < end) {
        Cs__Request *req = th_request (1, 100 + (uint64_t) tries++);
        req->ticket = (ProtobufCBinaryData) { s_ticket_len, s_ticket };
        th_job_crypto (req->jobs [0], true, s_rsa_id, 8, CKM_RSA_PKCS, di, 51);
        Cs__Reply *reply = th_call (s_client, req);
        rv = reply->results [0]->rv;
        if (rv == CKR_OK)
            ck_assert (th_verify_rsa_pkcs1 (s_rsa, di, 51, reply->results [0]->data.data,
                                            reply->results [0]->data.len));
        cs__reply__free_unpacked (reply, NULL);
        th_request_free (req);
        if (rv != CKR_OK)
            zclock_sleep (50);
    }
    ck_assert_msg (rv == CKR_OK, "no signature within 5 s of the logout (last %s)", cs_rv_name (rv));
    dlclose (dl);
}
END_TEST

START_TEST (test_list_keys)
{
    Cs__Request *req = th_request (2, 1);
    th_job_list_keys (req->jobs [0]);
    th_job_hello (req->jobs [1]);
    Cs__Reply *reply = th_call (s_client, req);
    Cs__ListKeysResult *keys = reply->results [0]->keys;
    ck_assert_uint_eq (keys->n_keys, 2);
    for (size_t i = 0; i < 2; i++) {
        Cs__KeyInfo *key = keys->keys [i];
        ck_assert_uint_eq (key->boards, 2);
        ck_assert (key->can_sign && key->can_decrypt);
        if (key->key_type == CKK_RSA) {
            ck_assert_uint_eq (key->bits, 2048);
            ck_assert_uint_eq (key->modulus.len, 256);
        }
        else {
            ck_assert_uint_eq (key->key_type, CKK_EC);
            ck_assert_uint_eq (key->bits, 256);
            ck_assert_uint_eq (key->ec_point.len, 67);      /* 04 41 04 X Y */
            ck_assert_uint_eq (key->ec_params.len, 10);
        }
    }
    Cs__HelloResult *hello = reply->results [1]->hello;
    ck_assert_str_eq (hello->token_label, "demo");
    bool oaep = false;
    for (size_t i = 0; i < hello->n_mechanisms; i++)
        oaep |= hello->mechanisms [i]->type == CKM_RSA_PKCS_OAEP;
    ck_assert (oaep);
    cs__reply__free_unpacked (reply, NULL);
    th_request_free (req);
}
END_TEST

START_TEST (test_sign)
{
    enum { N = 24 };
    static uint8_t di [N][51], digest [32];
    SHA256 ((const uint8_t *) "hello", 5, digest);
    Cs__Request *req = th_request (N + 2, 2);
    req->ticket = (ProtobufCBinaryData) { s_ticket_len, s_ticket };
    for (size_t i = 0; i < N; i++) {
        char msg [32];
        snprintf (msg, sizeof msg, "m%zu", i);
        th_digest_info (msg, di [i]);
        th_job_crypto (req->jobs [i], true, s_rsa_id, 8, CKM_RSA_PKCS, di [i], 51);
    }
    Cs__Mechanism *pss = th_job_crypto (req->jobs [N], true, s_rsa_id, 8, CKM_RSA_PKCS_PSS, digest, 32);
    pss->hash = CKM_SHA256; pss->mgf = CKG_MGF1_SHA256; pss->salt_len = 32;
    th_job_crypto (req->jobs [N + 1], true, s_ec_id, 8, CKM_ECDSA, digest, 32);
    Cs__Reply *reply = th_call (s_client, req);
    ck_assert_uint_eq (reply->n_results, N + 2);
    for (size_t i = 0; i < N; i++) {
        ck_assert_uint_eq (reply->results [i]->rv, CKR_OK);
        ck_assert (th_verify_rsa_pkcs1 (s_rsa, di [i], 51, reply->results [i]->data.data,
                                        reply->results [i]->data.len));
    }
    ck_assert_uint_eq (reply->results [N]->rv, CKR_OK);
    ck_assert (th_verify_rsa_pss (s_rsa, digest, reply->results [N]->data.data, reply->results [N]->data.len));
    ck_assert_uint_eq (reply->results [N + 1]->rv, CKR_OK);
    ck_assert_uint_eq (reply->results [N + 1]->data.len, 64);
    ck_assert (th_verify_ecdsa (s_ec, digest, 32, reply->results [N + 1]->data.data, 64));
    ck_assert_uint_gt (th_board_jobs (server_frontend (s_server), "board0", NULL), 0);
    ck_assert_uint_gt (th_board_jobs (server_frontend (s_server), "board1", NULL), 0);
    cs__reply__free_unpacked (reply, NULL);
    th_request_free (req);
}
END_TEST

START_TEST (test_decrypt)
{
    uint8_t ct [5][256];
    size_t len [5];
    len [0] = th_rsa_encrypt (s_rsa, NULL, NULL, "pkcs1 plain", ct [0], 256);
    len [1] = th_rsa_encrypt (s_rsa, EVP_sha1 (), NULL, "oaep sha1", ct [1], 256);
    len [2] = th_rsa_encrypt (s_rsa, EVP_sha256 (), "label", "oaep sha256", ct [2], 256);
    len [3] = th_rsa_encrypt (s_rsa, EVP_sha256 (), NULL, "oaep sha256 nolabel", ct [3], 256);
    memcpy (ct [4], ct [2], 256);
    len [4] = len [2];
    ct [4][7] ^= 0x40;
    Cs__Request *req = th_request (6, 3);
    req->ticket = (ProtobufCBinaryData) { s_ticket_len, s_ticket };
    th_job_crypto (req->jobs [0], false, s_rsa_id, 8, CKM_RSA_PKCS, ct [0], len [0]);
    Cs__Mechanism *m = th_job_crypto (req->jobs [1], false, s_rsa_id, 8, CKM_RSA_PKCS_OAEP, ct [1], len [1]);
    m->hash = CKM_SHA_1; m->mgf = CKG_MGF1_SHA1;
    m = th_job_crypto (req->jobs [2], false, s_rsa_id, 8, CKM_RSA_PKCS_OAEP, ct [2], len [2]);
    m->hash = CKM_SHA256; m->mgf = CKG_MGF1_SHA256;
    m->oaep_label = (ProtobufCBinaryData) { 5, (uint8_t *) "label" };
    m = th_job_crypto (req->jobs [3], false, s_rsa_id, 8, CKM_RSA_PKCS_OAEP, ct [3], len [3]);
    m->hash = CKM_SHA256; m->mgf = CKG_MGF1_SHA256;
    m = th_job_crypto (req->jobs [4], false, s_rsa_id, 8, CKM_RSA_PKCS_OAEP, ct [4], len [4]);
    m->hash = CKM_SHA256; m->mgf = CKG_MGF1_SHA256;
    m->oaep_label = (ProtobufCBinaryData) { 5, (uint8_t *) "label" };
    m = th_job_crypto (req->jobs [5], false, s_rsa_id, 8, CKM_RSA_PKCS_OAEP, ct [2], len [2]);
    m->hash = CKM_SHA256; m->mgf = CKG_MGF1_SHA256;     /* wrong (missing) label */
    Cs__Reply *reply = th_call (s_client, req);
    static const char *expect [] = { "pkcs1 plain", "oaep sha1", "oaep sha256", "oaep sha256 nolabel" };
    for (size_t i = 0; i < 4; i++) {
        ck_assert_msg (reply->results [i]->rv == CKR_OK, "job %zu: %s", i,
                       cs_rv_name (reply->results [i]->rv));
        ck_assert_uint_eq (reply->results [i]->data.len, strlen (expect [i]));
        ck_assert (memcmp (reply->results [i]->data.data, expect [i], strlen (expect [i])) == 0);
    }
    ck_assert_uint_eq (reply->results [4]->rv, CKR_ENCRYPTED_DATA_INVALID);
    ck_assert_uint_eq (reply->results [5]->rv, CKR_ENCRYPTED_DATA_INVALID);
    cs__reply__free_unpacked (reply, NULL);
    th_request_free (req);
}
END_TEST

/*  A job the board must refuse reaches the client with the CK_RV PKCS#11
 *  names for it, on resident keys and on key material alike:
 *    PSS over a 20-byte input when the hash is SHA-256: the input must be
 *    one hash long (curr. mech. "PKCS #1 RSA PSS"), C_Sign gives
 *    CKR_DATA_LEN_RANGE (native PSS and the raw-RSA fallback path);
 *    ECDSA with an RSA key, RSA with an EC key: C_SignInit gives
 *    CKR_KEY_TYPE_INCONSISTENT (PKCS#11 2.40 §5.11).
 *  SoftHSM 2.6 itself answers CKR_GENERAL_ERROR to the first two.  */
START_TEST (test_board_errors_pass_through)
{
    enum { N = 8 };
    uint8_t short_digest [20] = { 0 }, digest [32] = { 0 }, di [51];
    size_t rsa_len = 0, ec_len = 0;
    uint8_t *rsa = th_pkcs8 (s_rsa, &rsa_len), *ec = th_pkcs8 (s_ec, &ec_len);
    th_digest_info ("wrong key", di);
    Cs__Request *req = th_request (N, 4);
    req->ticket = (ProtobufCBinaryData) { s_ticket_len, s_ticket };
    Cs__Mechanism *pss = th_job_crypto (req->jobs [0], true, s_rsa_id, 8, CKM_RSA_PKCS_PSS,
                                        short_digest, 20);
    pss->hash = CKM_SHA256; pss->mgf = CKG_MGF1_SHA256; pss->salt_len = 32;
    pss = th_job_crypto (req->jobs [1], true, s_rsa_id, 8, CKM_RSA_PKCS_PSS, short_digest, 20);
    pss->hash = CKM_SHA256; pss->mgf = CKG_MGF1_SHA1; pss->salt_len = 32;      /* the raw path */
    th_job_crypto (req->jobs [2], true, s_rsa_id, 8, CKM_ECDSA, digest, 32);
    th_job_crypto (req->jobs [3], true, s_ec_id, 8, CKM_RSA_PKCS, di, 51);
    /*  The same on per-request key material.  */
    pss = th_job_crypto (req->jobs [4], true, NULL, 0, CKM_RSA_PKCS_PSS, short_digest, 20);
    pss->hash = CKM_SHA256; pss->mgf = CKG_MGF1_SHA256; pss->salt_len = 32;
    req->jobs [4]->sign->key_pkcs8 = (ProtobufCBinaryData) { rsa_len, rsa };
    th_job_crypto (req->jobs [5], true, NULL, 0, CKM_ECDSA, digest, 32);
    req->jobs [5]->sign->key_pkcs8 = (ProtobufCBinaryData) { rsa_len, rsa };
    th_job_crypto (req->jobs [6], true, NULL, 0, CKM_RSA_PKCS, di, 51);
    req->jobs [6]->sign->key_pkcs8 = (ProtobufCBinaryData) { ec_len, ec };
    /*  And a right job in the same batch still signs.  */
    th_job_crypto (req->jobs [7], true, s_ec_id, 8, CKM_ECDSA, digest, 32);
    static const CK_RV expect [N] = {
        CKR_DATA_LEN_RANGE, CKR_DATA_LEN_RANGE, CKR_KEY_TYPE_INCONSISTENT, CKR_KEY_TYPE_INCONSISTENT,
        CKR_DATA_LEN_RANGE, CKR_KEY_TYPE_INCONSISTENT, CKR_KEY_TYPE_INCONSISTENT, CKR_OK };
    Cs__Reply *reply = th_call (s_client, req);
    ck_assert_uint_eq (reply->n_results, N);
    for (size_t i = 0; i < N; i++)
        ck_assert_msg (reply->results [i]->rv == expect [i], "job %zu: %s, want %s", i,
                       cs_rv_name (reply->results [i]->rv), cs_rv_name (expect [i]));
    ck_assert (th_verify_ecdsa (s_ec, digest, 32, reply->results [7]->data.data, reply->results [7]->data.len));
    cs__reply__free_unpacked (reply, NULL);
    th_request_free (req);
    OPENSSL_free (rsa);
    OPENSSL_free (ec);
}
END_TEST

/*  Jobs with empty data (NULL in protobuf-c) leave no operation active on
 *  a worker's board session: SoftHSM 2.6 keeps one after C_Sign (NULL, 0),
 *  and every later job of that worker failed with CKR_OPERATION_ACTIVE
 *  (found by tests/fuzz/cs-fuzz-frames).  32 empty jobs reach all four
 *  workers; then 16 valid signatures must all verify.  */
START_TEST (test_empty_data_leaves_no_operation)
{
    enum { EMPTY = 32, VALID = 16 };
    static uint8_t di [VALID][51];
    Cs__Request *req = th_request (EMPTY, 5);
    req->ticket = (ProtobufCBinaryData) { s_ticket_len, s_ticket };
    for (size_t i = 0; i < EMPTY; i++)
        th_job_crypto (req->jobs [i], i % 2 == 0, s_rsa_id, 8, CKM_RSA_PKCS, NULL, 0);
    Cs__Reply *reply = th_call (s_client, req);
    ck_assert_uint_eq (reply->n_results, EMPTY);
    cs__reply__free_unpacked (reply, NULL);
    th_request_free (req);
    req = th_request (VALID, 6);
    req->ticket = (ProtobufCBinaryData) { s_ticket_len, s_ticket };
    for (size_t i = 0; i < VALID; i++) {
        char msg [32];
        snprintf (msg, sizeof msg, "after empty %zu", i);
        th_digest_info (msg, di [i]);
        th_job_crypto (req->jobs [i], true, s_rsa_id, 8, CKM_RSA_PKCS, di [i], 51);
    }
    reply = th_call (s_client, req);
    ck_assert_uint_eq (reply->n_results, VALID);
    for (size_t i = 0; i < VALID; i++) {
        ck_assert_msg (reply->results [i]->rv == CKR_OK, "job %zu: %s", i,
                       cs_rv_name (reply->results [i]->rv));
        ck_assert (th_verify_rsa_pkcs1 (s_rsa, di [i], 51, reply->results [i]->data.data,
                                        reply->results [i]->data.len));
    }
    cs__reply__free_unpacked (reply, NULL);
    th_request_free (req);
}
END_TEST

/*  Key material on SoftHSM boards: a per-request RSA key and EC key are
 *  imported as session objects for the job (and destroyed after).  */
START_TEST (test_per_request_keys)
{
    size_t rsa_len = 0, ec_len = 0;
    uint8_t *rsa = th_pkcs8 (s_rsa, &rsa_len), *ec = th_pkcs8 (s_ec, &ec_len);
    uint8_t di [51], digest [32];
    th_digest_info ("per-request", di);
    SHA256 ((const uint8_t *) "per-request", 11, digest);
    Cs__Request *req = th_request (8, 5);
    req->ticket = (ProtobufCBinaryData) { s_ticket_len, s_ticket };
    for (size_t i = 0; i < 8; i++) {
        bool is_rsa = i % 2 == 0;
        th_job_crypto (req->jobs [i], true, NULL, 0, is_rsa ? CKM_RSA_PKCS : CKM_ECDSA,
                       is_rsa ? di : digest, is_rsa ? 51 : 32);
        req->jobs [i]->sign->key_pkcs8 = is_rsa ? (ProtobufCBinaryData) { rsa_len, rsa }
                                                : (ProtobufCBinaryData) { ec_len, ec };
    }
    Cs__Reply *reply = th_call (s_client, req);
    for (size_t i = 0; i < 8; i++) {
        ProtobufCBinaryData sig = reply->results [i]->data;
        ck_assert_msg (reply->results [i]->rv == CKR_OK, "job %zu: %s", i,
                       cs_rv_name (reply->results [i]->rv));
        ck_assert (i % 2 == 0 ? th_verify_rsa_pkcs1 (s_rsa, di, 51, sig.data, sig.len)
                              : th_verify_ecdsa (s_ec, digest, 32, sig.data, sig.len));
    }
    cs__reply__free_unpacked (reply, NULL);
    th_request_free (req);
    OPENSSL_free (rsa);
    OPENSSL_free (ec);
}
END_TEST

/*  keys/home = board0: a token key generated on the board (C_GenerateKeyPair,
 *  a random internal CKA_ID), described by a keystore row, signs there.  */
START_TEST (test_generate_resident)
{
    Cs__Attribute label = CS__ATTRIBUTE__INIT;
    label.type = CKA_LABEL;
    label.value_case = CS__ATTRIBUTE__VALUE_BYTES;
    label.bytes = (ProtobufCBinaryData) { 8, (uint8_t *) "resident" };
    Cs__Attribute *tmpl [] = { &label };
    Cs__GenerateKeyPairJob gen = CS__GENERATE_KEY_PAIR_JOB__INIT;
    gen.mechanism = CKM_RSA_PKCS_KEY_PAIR_GEN;
    gen.modulus_bits = 2048;
    gen.token = true;
    gen.n_private_template = 1;
    gen.private_template = tmpl;
    Cs__Request *req = th_request (1, 6);
    req->ticket = (ProtobufCBinaryData) { s_ticket_len, s_ticket };
    req->jobs [0]->kind_case = CS__JOB__KIND_GENERATE_KEY_PAIR;
    req->jobs [0]->generate_key_pair = &gen;
    Cs__Reply *reply = th_call (s_client, req);
    ck_assert_msg (reply->results [0]->rv == CKR_OK, "%s", cs_rv_name (reply->results [0]->rv));
    Cs__KeyInfo *key = reply->results [0]->generated->key;
    ck_assert_str_eq (key->home, "board:board0");
    ck_assert_str_eq (key->label, "resident");
    ck_assert (key->has_private && key->modulus.len == 256);
    /*  Sign with its ref; verify with the modulus it reported.  */
    BIGNUM *n = BN_bin2bn (key->modulus.data, (int) key->modulus.len, NULL);
    BIGNUM *e = BN_bin2bn (key->public_exponent.data, (int) key->public_exponent.len, NULL);
    OSSL_PARAM_BLD *bld = OSSL_PARAM_BLD_new ();
    OSSL_PARAM_BLD_push_BN (bld, "n", n);
    OSSL_PARAM_BLD_push_BN (bld, "e", e);
    OSSL_PARAM *params = OSSL_PARAM_BLD_to_param (bld);
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_name (NULL, "RSA", NULL);
    EVP_PKEY *pub = NULL;
    ck_assert (EVP_PKEY_fromdata_init (ctx) > 0 && EVP_PKEY_fromdata (ctx, &pub, EVP_PKEY_PUBLIC_KEY, params) > 0);
    uint8_t di [51];
    th_digest_info ("resident", di);
    Cs__Request *sreq = th_request (1, 7);
    sreq->ticket = (ProtobufCBinaryData) { s_ticket_len, s_ticket };
    th_job_crypto (sreq->jobs [0], true, (const uint8_t *) key->ref, strlen (key->ref), CKM_RSA_PKCS, di, 51);
    Cs__Reply *sreply = th_call (s_client, sreq);
    ck_assert_uint_eq (sreply->results [0]->rv, CKR_OK);
    ck_assert (th_verify_rsa_pkcs1 (pub, di, 51, sreply->results [0]->data.data, sreply->results [0]->data.len));
    cs__reply__free_unpacked (sreply, NULL);
    th_request_free (sreq);
    EVP_PKEY_free (pub);
    EVP_PKEY_CTX_free (ctx);
    OSSL_PARAM_free (params);
    OSSL_PARAM_BLD_free (bld);
    BN_free (n);
    BN_free (e);
    cs__reply__free_unpacked (reply, NULL);
    req->jobs [0]->kind_case = CS__JOB__KIND_HELLO;
    req->jobs [0]->hello = NULL;
    th_request_free (req);
}
END_TEST

/*  Resident keys found on boards cannot be destroyed or changed.  */
START_TEST (test_board_keys_prohibited)
{
    Cs__DestroyKeyJob destroy = CS__DESTROY_KEY_JOB__INIT;
    destroy.ref = (char *) "board:01";
    destroy.object = CKO_PRIVATE_KEY;
    Cs__Request *req = th_request (1, 8);
    req->ticket = (ProtobufCBinaryData) { s_ticket_len, s_ticket };
    req->jobs [0]->kind_case = CS__JOB__KIND_DESTROY_KEY;
    req->jobs [0]->destroy_key = &destroy;
    Cs__Reply *reply = th_call (s_client, req);
    ck_assert_uint_eq (reply->results [0]->rv, CKR_ACTION_PROHIBITED);
    cs__reply__free_unpacked (reply, NULL);
    destroy.ref = (char *) "board:77";
    req->request_id = 9;
    reply = th_call (s_client, req);
    ck_assert_uint_eq (reply->results [0]->rv, CKR_OBJECT_HANDLE_INVALID);
    cs__reply__free_unpacked (reply, NULL);
    req->jobs [0]->kind_case = CS__JOB__KIND_HELLO;
    req->jobs [0]->hello = NULL;
    th_request_free (req);
}
END_TEST

/*  True when client's key list (with its ticket) has a key with CKA_ID
 *  id (len bytes) or with the ref `ref`.  */
static bool
s_listed (zsock_t *client, const uint8_t *ticket, size_t ticket_len, const uint8_t *id, size_t len,
          const char *ref)
{
    Cs__Request *req = th_request (1, 20);
    req->ticket = (ProtobufCBinaryData) { ticket_len, (uint8_t *) ticket };
    th_job_list_keys (req->jobs [0]);
    Cs__Reply *reply = th_call (client, req);
    ck_assert_uint_eq (reply->results [0]->rv, CKR_OK);
    bool found = false;
    Cs__ListKeysResult *keys = reply->results [0]->keys;
    for (size_t i = 0; i < keys->n_keys; i++)
        found |= (keys->keys [i]->id.len == len && memcmp (keys->keys [i]->id.data, id, len) == 0)
              || (ref && streq (keys->keys [i]->ref, ref));
    cs__reply__free_unpacked (reply, NULL);
    th_request_free (req);
    return found;
}

/*  Signs a DigestInfo with ref as client; returns the rv.  */
static uint64_t
s_sign_ref (zsock_t *client, const uint8_t *ticket, size_t ticket_len, const char *ref)
{
    uint8_t di [51];
    th_digest_info ("ref", di);
    Cs__Request *req = th_request (1, 21);
    req->ticket = (ProtobufCBinaryData) { ticket_len, (uint8_t *) ticket };
    th_job_crypto (req->jobs [0], true, (const uint8_t *) ref, strlen (ref), CKM_RSA_PKCS, di, 51);
    Cs__Reply *reply = th_call (client, req);
    uint64_t rv = reply->results [0]->rv;
    cs__reply__free_unpacked (reply, NULL);
    th_request_free (req);
    return rv;
}

/*  Issue #7: with keys/home = board0 (tenant demo), tenant other's token key
 *  lives on board0 as a "ks:" object.  After a restart the broker finds it
 *  in board0's key list; demo, the board's tenant, must not reach it by
 *  "board:<its CKA_ID>", nor any tenant by any ref it does not own: every
 *  job kind answers exactly as for a ref that does not exist.  */
START_TEST (test_board_refs_stay_in_tenant)
{
    size_t eve_len = 0;
    uint8_t *eve = th_login_ok (s_eve, "5678", &eve_len);
    Cs__GenerateKeyPairJob gen = CS__GENERATE_KEY_PAIR_JOB__INIT;
    gen.mechanism = CKM_RSA_PKCS_KEY_PAIR_GEN;
    gen.modulus_bits = 2048;
    gen.token = true;
    Cs__Request *req = th_request (1, 22);
    req->ticket = (ProtobufCBinaryData) { eve_len, eve };
    req->jobs [0]->kind_case = CS__JOB__KIND_GENERATE_KEY_PAIR;
    req->jobs [0]->generate_key_pair = &gen;
    Cs__Reply *reply = th_call (s_eve, req);
    ck_assert_msg (reply->results [0]->rv == CKR_OK, "%s", cs_rv_name (reply->results [0]->rv));
    ck_assert_str_eq (reply->results [0]->generated->key->home, "board:board0");
    char *ref = strdup (reply->results [0]->generated->key->ref);
    cs__reply__free_unpacked (reply, NULL);
    req->jobs [0]->kind_case = CS__JOB__KIND_HELLO;
    req->jobs [0]->hello = NULL;
    th_request_free (req);
    free (eve);
    /*  A restart: board0's key list now holds eve's key (label = its ref,
        CKA_ID = the ref's 16 random bytes).  */
    s_stop ();
    s_start ();
    eve = th_login_ok (s_eve, "5678", &eve_len);
    char board_ref [64];
    uint8_t id [16];
    snprintf (board_ref, sizeof board_ref, "board:%s", ref + 3);
    ck_assert_int_eq (cs_hex_decode (ref + 3, id, sizeof id), 16);
    /*  demo (bob), the tenant of board0, neither lists nor reaches it.  */
    ck_assert (!s_listed (s_client, s_ticket, s_ticket_len, id, sizeof id, ref));
    th_probe_unknown (s_client, s_ticket, s_ticket_len, board_ref, "board:00112233445566778899aabbccddeeff");
    th_probe_unknown (s_client, s_ticket, s_ticket_len, ref, "ks:00112233445566778899aabbccddeeff");
    /*  Nor does eve by a board ref (she owns no board), nor demo's board keys.  */
    th_probe_unknown (s_eve, eve, eve_len, board_ref, "board:00112233445566778899aabbccddeeff");
    th_probe_unknown (s_eve, eve, eve_len, "board:01", "board:99");
    th_probe_unknown (s_eve, eve, eve_len, "board:03", "board:99");
    ck_assert (!s_listed (s_eve, eve, eve_len, (const uint8_t *) "\x01", 1, "board:01"));
    /*  The owners still use their keys: eve by her ref, bob his board key.  */
    ck_assert (s_listed (s_eve, eve, eve_len, NULL, 0, ref));
    ck_assert_uint_eq (s_sign_ref (s_eve, eve, eve_len, ref), CKR_OK);
    ck_assert_uint_eq (s_sign_ref (s_client, s_ticket, s_ticket_len, (const char *) s_rsa_id), CKR_OK);
    free (eve);
    free (ref);
}
END_TEST

/* ---- a master key wrapped by a board key (issue #7) ---------------------- */

/*  Imports wrapper.pem (private and public) into `board` as CKA_ID 77,
 *  label "wrapper", for decryption.  */
static void
s_wrapper_import (const char *board)
{
    const char *module = getenv ("SOFTHSM2_MODULE");
    s_sh ("openssl pkey -in wrapper.pem -pubout -out wrapper.pub.pem");
    s_sh ("pkcs11-tool --module %s --token-label %s --login --pin 1234 --write-object wrapper.pem "
          "--type privkey --id 77 --label wrapper --usage-decrypt", module, board);
    s_sh ("pkcs11-tool --module %s --token-label %s --login --pin 1234 --write-object wrapper.pub.pem "
          "--type pubkey --id 77 --label wrapper", module, board);
}

/*  As `cryptoserver-admin master-key wrap`: master.key encrypted with
 *  RSA-OAEP (SHA-256, MGF1-SHA256) under a fresh RSA key "wrapper" (CKA_ID
 *  77) of board0, into master.key.wrapped (kept in wrapped / *len_p);
 *  broker.conf names board:board0:wrapper, board1 of board1_tenant.  */
static void
s_wrap (const char *board1_tenant, uint8_t wrapped [256], size_t *len_p)
{
    char path [4096];
    uint8_t key [KEYSTORE_MASTER_KEY_LEN];
    s_wrapper = th_key_pem (s_dir, "wrapper.pem", 2048);
    s_wrapper_import ("board0");
    snprintf (path, sizeof path, "%s/master.key", s_dir);
    ck_assert_int_eq (keystore_master_key_read (path, key), 0);
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new (s_wrapper, NULL);
    *len_p = 256;
    ck_assert (ctx && EVP_PKEY_encrypt_init (ctx) > 0
               && EVP_PKEY_CTX_set_rsa_padding (ctx, RSA_PKCS1_OAEP_PADDING) > 0
               && EVP_PKEY_CTX_set_rsa_oaep_md (ctx, EVP_sha256 ()) > 0
               && EVP_PKEY_CTX_set_rsa_mgf1_md (ctx, EVP_sha256 ()) > 0
               && EVP_PKEY_encrypt (ctx, wrapped, len_p, key, sizeof key) > 0);
    EVP_PKEY_CTX_free (ctx);
    OPENSSL_cleanse (key, sizeof key);
    snprintf (path, sizeof path, "%s/master.key.wrapped", s_dir);
    FILE *file = fopen (path, "wb");
    ck_assert (file && fwrite (wrapped, 1, *len_p, file) == *len_p);
    fclose (file);
    s_conf ("    master-key = board:board0:wrapper\n    master-key-wrapped = master.key.wrapped\n",
            board1_tenant);
}

static void
s_wrap_setup (void)
{
    s_prepare ();
}

/*  The wrapping key unwraps the master key at start, then serves no
 *  client: not listed, and every job naming it, even by its board's tenant,
 *  answers as for an unknown key; the board's other keys still work.  */
START_TEST (test_wrap_key_reserved)
{
    uint8_t wrapped [256];
    size_t len = 0;
    s_wrap ("demo", wrapped, &len);
    s_start ();
    ck_assert (!s_listed (s_client, s_ticket, s_ticket_len, (const uint8_t *) "\x77", 1, "board:77"));
    ck_assert (s_listed (s_client, s_ticket, s_ticket_len, (const uint8_t *) "\x01", 1, "board:01"));
    /*  The attack: decrypt master.key.wrapped with the wrapping key.  */
    Cs__Request *req = th_request (1, 30);
    req->ticket = (ProtobufCBinaryData) { s_ticket_len, s_ticket };
    Cs__Mechanism *m = th_job_crypto (req->jobs [0], false, (const uint8_t *) "board:77", 8,
                                      CKM_RSA_PKCS_OAEP, wrapped, len);
    m->hash = CKM_SHA256;
    m->mgf = CKG_MGF1_SHA256;
    Cs__Reply *reply = th_call (s_client, req);
    ck_assert_msg (reply->results [0]->rv == CKR_KEY_HANDLE_INVALID, "decrypting the wrapped master key: %s",
                   cs_rv_name (reply->results [0]->rv));
    ck_assert_uint_eq (reply->results [0]->data.len, 0);
    cs__reply__free_unpacked (reply, NULL);
    th_request_free (req);
    th_probe_unknown (s_client, s_ticket, s_ticket_len, "board:77", "board:99");
    size_t eve_len = 0;
    uint8_t *eve = th_login_ok (s_eve, "5678", &eve_len);
    th_probe_unknown (s_eve, eve, eve_len, "board:77", "board:99");
    free (eve);
    ck_assert_uint_eq (s_sign_ref (s_client, s_ticket, s_ticket_len, (const char *) s_rsa_id), CKR_OK);
}
END_TEST

/*  A copy of the wrapping key on a board with a tenant is a client key of
 *  that tenant: the broker refuses to start.  */
START_TEST (test_wrap_key_copy_refused)
{
    uint8_t wrapped [256];
    size_t len = 0;
    s_wrap ("demo", wrapped, &len);
    s_wrapper_import ("board1");
    ck_assert_msg (!s_try_start (), "the broker started with the wrapping key usable on board1");
}
END_TEST

/*  On a board without a tenant a copy serves nobody: the broker starts and
 *  reserves it too.  */
START_TEST (test_wrap_key_copy_on_tenantless_board)
{
    uint8_t wrapped [256];
    size_t len = 0;
    s_wrap (NULL, wrapped, &len);
    s_wrapper_import ("board1");
    s_start ();
    th_probe_unknown (s_client, s_ticket, s_ticket_len, "board:77", "board:99");
}
END_TEST

/*  A keystore key of any tenant holding the wrapping key's private key:
 *  the broker refuses to start.  */
START_TEST (test_wrap_key_in_keystore_refused)
{
    uint8_t wrapped [256];
    size_t len = 0, der_len = 0;
    s_wrap ("demo", wrapped, &len);
    keystore_t *ks = th_keystore_open (s_dir);
    key_info_params_t params = { .label = "imported" };
    Cs__KeyInfo *info = key_info_from_pkey (s_wrapper, &params);
    uint8_t *der = th_pkcs8 (s_wrapper, &der_len);
    ck_assert_int_eq (keystore_key_put (ks, "other", info, der, der_len), 0);
    OPENSSL_cleanse (der, der_len);
    OPENSSL_free (der);
    cs__key_info__free_unpacked (info, NULL);
    keystore_destroy (&ks);
    ck_assert_msg (!s_try_start (), "the broker started with the wrapping key in tenant other's keystore");
}
END_TEST

static Suite *
s_suite (void)
{
    Suite *suite = suite_create ("broker_pkcs11");
    TCase *tc = tcase_create ("softhsm");
    tcase_add_checked_fixture (tc, s_setup, s_teardown);
    tcase_set_timeout (tc, 120);
    tcase_add_test (tc, test_list_keys);
    tcase_add_test (tc, test_sign);
    tcase_add_test (tc, test_login_lost);
    tcase_add_test (tc, test_decrypt);
    tcase_add_test (tc, test_board_errors_pass_through);
    tcase_add_test (tc, test_empty_data_leaves_no_operation);
    tcase_add_test (tc, test_per_request_keys);
    tcase_add_test (tc, test_generate_resident);
    tcase_add_test (tc, test_board_keys_prohibited);
    tcase_add_test (tc, test_board_refs_stay_in_tenant);
    suite_add_tcase (suite, tc);
    tc = tcase_create ("wrap");
    tcase_add_checked_fixture (tc, s_wrap_setup, s_teardown);
    tcase_set_timeout (tc, 120);
    tcase_add_test (tc, test_wrap_key_reserved);
    tcase_add_test (tc, test_wrap_key_copy_refused);
    tcase_add_test (tc, test_wrap_key_copy_on_tenantless_board);
    tcase_add_test (tc, test_wrap_key_in_keystore_refused);
    suite_add_tcase (suite, tc);
    return suite;
}

int
main (void)
{
    const char *module = getenv ("SOFTHSM2_MODULE");
    if (!getenv ("CRYPTOSERVER_DRIVER_DIR") || !module || !*module
    ||  system ("command -v softhsm2-util >/dev/null && command -v pkcs11-tool >/dev/null")) {
        fprintf (stderr, "needs make check's environment, SoftHSMv2 and pkcs11-tool: skipped\n");
        return 77;
    }
    return tr_run (s_suite ());
}
