/*  test_broker_pkcs11.c — the pkcs11 driver for real: two SoftHSMv2 tokens
 *  (board0, board1) of one libsofthsm2.so in one process, the same RSA-2048
 *  and P-256 keys imported into both with pkcs11-tool, and the whole broker
 *  in-process answering a CURVE client.  Every signature and plaintext is
 *  checked with OpenSSL.  Skipped (77) without SoftHSMv2 or pkcs11-tool.
 */
#include "test_broker_helpers.h"
#include "broker_config.h"
#include "server.h"

static char *s_dir;
static EVP_PKEY *s_rsa, *s_ec;
static broker_config_t *s_config;
static server_t *s_server;
static zsock_t *s_client;
static uint8_t *s_ticket;
static size_t s_ticket_len;
static const uint8_t s_rsa_id [] = { 0x01 }, s_ec_id [] = { 0x03 };

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
          "log.level = ERROR\\n' > softhsm2.conf && echo 1234 > board.pin", s_dir);
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

static void
s_setup (void)
{
    char path [4096], *error = NULL, *conf = NULL;
    s_dir = th_tmpdir ();
    snprintf (path, sizeof path, "%s/softhsm2.conf", s_dir);
    setenv ("SOFTHSM2_CONF", path, 1);
    s_rsa = th_key_pem (s_dir, "rsa.pem", 2048);
    s_ec = th_key_pem (s_dir, "ec.pem", 0);
    s_tokens ();
    th_certs (s_dir, "bob", NULL);          /* no tenant: the first one */
    char *head = th_conf_head (true);
    const char *module = getenv ("SOFTHSM2_MODULE");
    ck_assert_int_ge (asprintf (&conf, "%sdrivers\n"
        "    board0\n        type = pkcs11\n        module = %s\n        token = board0\n"
        "        pin-file = board.pin\n        threads = 2\n"
        "    board1\n        type = pkcs11\n        module = %s\n        token = board1\n"
        "        pin-file = board.pin\n        threads = 2\n", head, module, module), 0);
    th_write (s_dir, "broker.conf", conf);
    free (head);
    free (conf);
    snprintf (path, sizeof path, "%s/broker.conf", s_dir);
    s_config = broker_config_load (path, &error);
    ck_assert_msg (s_config != NULL, "config: %s", error ? error : "");
    s_server = server_new (s_config, false);
    ck_assert_ptr_nonnull (s_server);
    s_client = th_dealer (s_dir, "bob", server_endpoint (s_server));
    uint64_t rv = 0;
    s_ticket = th_login (s_client, "1234", &s_ticket_len, &rv);
    ck_assert_uint_eq (rv, CKR_OK);
}

static void
s_teardown (void)
{
    zsock_destroy (&s_client);
    server_destroy (&s_server);
    broker_config_destroy (&s_config);
    EVP_PKEY_free (s_rsa);
    EVP_PKEY_free (s_ec);
    free (s_ticket);
    s_sh ("rm -rf '%s'", s_dir);
    free (s_dir);
}

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
        th_job_crypto (req->jobs [i], true, s_rsa_id, 1, CKM_RSA_PKCS, di [i], 51);
    }
    Cs__Mechanism *pss = th_job_crypto (req->jobs [N], true, s_rsa_id, 1, CKM_RSA_PKCS_PSS, digest, 32);
    pss->hash = CKM_SHA256; pss->mgf = CKG_MGF1_SHA256; pss->salt_len = 32;
    th_job_crypto (req->jobs [N + 1], true, s_ec_id, 1, CKM_ECDSA, digest, 32);
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
    th_job_crypto (req->jobs [0], false, s_rsa_id, 1, CKM_RSA_PKCS, ct [0], len [0]);
    Cs__Mechanism *m = th_job_crypto (req->jobs [1], false, s_rsa_id, 1, CKM_RSA_PKCS_OAEP, ct [1], len [1]);
    m->hash = CKM_SHA_1; m->mgf = CKG_MGF1_SHA1;
    m = th_job_crypto (req->jobs [2], false, s_rsa_id, 1, CKM_RSA_PKCS_OAEP, ct [2], len [2]);
    m->hash = CKM_SHA256; m->mgf = CKG_MGF1_SHA256;
    m->oaep_label = (ProtobufCBinaryData) { 5, (uint8_t *) "label" };
    m = th_job_crypto (req->jobs [3], false, s_rsa_id, 1, CKM_RSA_PKCS_OAEP, ct [3], len [3]);
    m->hash = CKM_SHA256; m->mgf = CKG_MGF1_SHA256;
    m = th_job_crypto (req->jobs [4], false, s_rsa_id, 1, CKM_RSA_PKCS_OAEP, ct [4], len [4]);
    m->hash = CKM_SHA256; m->mgf = CKG_MGF1_SHA256;
    m->oaep_label = (ProtobufCBinaryData) { 5, (uint8_t *) "label" };
    m = th_job_crypto (req->jobs [5], false, s_rsa_id, 1, CKM_RSA_PKCS_OAEP, ct [2], len [2]);
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

START_TEST (test_board_errors_pass_through)
{
    uint8_t short_digest [20] = { 0 };
    Cs__Request *req = th_request (2, 4);
    req->ticket = (ProtobufCBinaryData) { s_ticket_len, s_ticket };
    Cs__Mechanism *pss = th_job_crypto (req->jobs [0], true, s_rsa_id, 1, CKM_RSA_PKCS_PSS,
                                        short_digest, 20);
    pss->hash = CKM_SHA256; pss->mgf = CKG_MGF1_SHA256; pss->salt_len = 32;
    th_job_crypto (req->jobs [1], true, s_rsa_id, 1, CKM_ECDSA, short_digest, 20);
    Cs__Reply *reply = th_call (s_client, req);
    ck_assert_uint_ne (reply->results [0]->rv, CKR_OK);
    ck_assert_uint_ne (reply->results [1]->rv, CKR_OK);
    cs__reply__free_unpacked (reply, NULL);
    th_request_free (req);
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
    tcase_add_test (tc, test_decrypt);
    tcase_add_test (tc, test_board_errors_pass_through);
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
    SRunner *runner = srunner_create (s_suite ());
    srunner_run_all (runner, CK_NORMAL);
    int failed = srunner_ntests_failed (runner);
    srunner_free (runner);
    return failed ? 1 : 0;
}
