/*  test_module_config.c — the module's client config: good files, and bad
 *  ones that must fail with a log line naming the file and the key.  */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <czmq.h>
#include "client_config.h"
#include "log.h"

static char s_dir [64];
static zcert_t *s_broker, *s_client;

static void
s_write (const char *name, const char *text)
{
    char path [256];
    FILE *file;
    snprintf (path, sizeof path, "%s/%s", s_dir, name);
    file = fopen (path, "w");
    ck_assert_ptr_nonnull (file);
    fputs (text, file);
    fclose (file);
}

static char *
s_path (const char *name)
{
    static char path [256];
    snprintf (path, sizeof path, "%s/%s", s_dir, name);
    return path;
}

/*  Loads `text` as client.conf with stderr captured; returns the config
 *  and copies what was logged into `log` (size bytes).  */
static cs_client_config_t *
s_load (const char *text, char *log, size_t size)
{
    int saved = dup (2);
    FILE *capture = tmpfile ();
    cs_client_config_t *config;
    size_t got;
    s_write ("client.conf", text);
    fflush (stderr);
    dup2 (fileno (capture), 2);
    config = cs_client_config_load (s_path ("client.conf"));
    fflush (stderr);
    dup2 (saved, 2);
    close (saved);
    rewind (capture);
    got = fread (log, 1, size - 1, capture);
    log [got] = 0;
    fclose (capture);
    return config;
}

static void
s_setup (void)
{
    char cert [256];
    strcpy (s_dir, "/tmp/cs-test-config-XXXXXX");
    ck_assert_ptr_nonnull (mkdtemp (s_dir));
    s_broker = zcert_new ();
    s_client = zcert_new ();
    snprintf (cert, sizeof cert, "%s/broker.cert", s_dir);
    zcert_save_public (s_broker, cert);
    snprintf (cert, sizeof cert, "%s/client.cert", s_dir);
    zcert_save (s_client, cert);
    snprintf (cert, sizeof cert, "%s/public-only.cert", s_dir);
    zcert_save_public (s_client, cert);
}

static void
s_teardown (void)
{
    const char *names [] = { "client.conf", "broker.cert", "client.cert", "client.cert_secret",
                             "public-only.cert" };
    for (size_t i = 0; i < sizeof names / sizeof names [0]; i++)
        unlink (s_path (names [i]));
    rmdir (s_dir);
    zcert_destroy (&s_broker);
    zcert_destroy (&s_client);
}

#define GOOD_HEAD \
    "client\n" \
    "    endpoints = \"tcp://127.0.0.1:5555, ipc:///tmp/cs.sock\"\n" \
    "    broker-cert = broker.cert\n"

START_TEST (test_good)
{
    char log [1024];
    cs_client_config_t *config = s_load (GOOD_HEAD
        "    certificate = client.cert\n"
        "    timeout-ms = 2500\n"
        "    log-level = info\n", log, sizeof log);
    ck_assert_msg (config != NULL, "log: %s", log);
    ck_assert_uint_eq (config->n_endpoints, 2);
    ck_assert_str_eq (config->endpoints [0], "tcp://127.0.0.1:5555");
    ck_assert_str_eq (config->endpoints [1], "ipc:///tmp/cs.sock");
    ck_assert (config->curve);
    ck_assert_int_eq (config->timeout_ms, 2500);
    ck_assert_int_eq (config->log_level, CS_LOG_INFO);
    ck_assert_mem_eq (config->broker_key, zcert_public_key (s_broker), 32);
    ck_assert_mem_eq (config->public_key, zcert_public_key (s_client), 32);
    ck_assert_mem_eq (config->secret_key, zcert_secret_key (s_client), 32);
    cs_client_config_destroy (&config);
    ck_assert_ptr_null (config);
}
END_TEST

START_TEST (test_defaults)
{
    char log [1024];
    cs_client_config_t *config = s_load (GOOD_HEAD "    certificate = client.cert\n", log, sizeof log);
    ck_assert_ptr_nonnull (config);
    ck_assert_int_eq (config->timeout_ms, 10000);     /* cryptoserver-client.conf(5) */
    ck_assert_int_eq (config->log_level, CS_LOG_WARNING);
    cs_client_config_destroy (&config);
}
END_TEST

START_TEST (test_plaintext_needs_no_certs)
{
    char log [1024];
    cs_client_config_t *config = s_load ("client\n    endpoints = tcp://127.0.0.1:1\n    curve = false\n",
                                         log, sizeof log);
    ck_assert_ptr_nonnull (config);
    ck_assert (!config->curve);
    cs_client_config_destroy (&config);
}
END_TEST

/*  Each bad file: the key named in the log line.  */
static const struct { const char *text; const char *expect; } s_bad [] = {
    { GOOD_HEAD "    certificate = client.cert\n    timeout-ms = soon\n", "client/timeout-ms: not a number" },
    { GOOD_HEAD "    certificate = client.cert\n    timeout-ms = 0\n", "client/timeout-ms: out of range" },
    { GOOD_HEAD "    certificate = client.cert\n    log-level = loud\n", "client/log-level: not one of" },
    { GOOD_HEAD "    certificate = client.cert\n    curve = maybe\n", "client/curve: not a boolean" },
    { GOOD_HEAD "    certificate = missing.cert\n", "client/certificate: cannot load certificate" },
    { GOOD_HEAD "    certificate = public-only.cert\n", "client/certificate: no secret key" },
    { GOOD_HEAD, "client/certificate: missing" },
    { "client\n    broker-cert = broker.cert\n    certificate = client.cert\n", "client/endpoints: missing" },
    { "client\n    endpoints = localhost\n    curve = false\n", "client/endpoints: not an endpoint" },
    { "server\n    endpoints = tcp://127.0.0.1:1\n", "client: missing section" },
};

START_TEST (test_bad)
{
    char log [1024], expect [512];
    cs_client_config_t *config = s_load (s_bad [_i].text, log, sizeof log);
    ck_assert_ptr_null (config);
    snprintf (expect, sizeof expect, "cryptoserver-pkcs11: %s: %s", s_path ("client.conf"), s_bad [_i].expect);
    ck_assert_msg (strstr (log, expect) != NULL, "expected '%s' in log '%s'", expect, log);
}
END_TEST

START_TEST (test_missing_file)
{
    ck_assert_ptr_null (cs_client_config_load (s_path ("nope.conf")));
}
END_TEST

START_TEST (test_path_env)
{
    setenv ("CRYPTOSERVER_CONF", "/x/y.conf", 1);
    ck_assert_str_eq (cs_client_config_path (), "/x/y.conf");
    unsetenv ("CRYPTOSERVER_CONF");
    ck_assert_str_eq (cs_client_config_path (), "/etc/cryptoserver/client.conf");  /* docs/DESIGN.md §4 */
}
END_TEST

int
main (void)
{
    Suite *suite = suite_create ("module_config");
    TCase *tc = tcase_create ("config");
    SRunner *runner;
    int failed;
    tcase_add_checked_fixture (tc, s_setup, s_teardown);
    tcase_add_test (tc, test_good);
    tcase_add_test (tc, test_defaults);
    tcase_add_test (tc, test_plaintext_needs_no_certs);
    tcase_add_loop_test (tc, test_bad, 0, sizeof s_bad / sizeof s_bad [0]);
    tcase_add_test (tc, test_missing_file);
    tcase_add_test (tc, test_path_env);
    suite_add_tcase (suite, tc);
    runner = srunner_create (suite);
    srunner_run_all (runner, CK_NORMAL);
    failed = srunner_ntests_failed (runner);
    srunner_free (runner);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
