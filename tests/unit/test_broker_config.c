/*  test_broker_config.c — broker.conf loading and validation
 *  (broker/ops/broker_config.h): a good config, defaults, and one bad value at
 *  a time, each reported as "FILE: PATH: problem".
 */
#include "test_broker_helpers.h"
#include "broker_config.h"
#include "cs_usage.h"
#include "cs_secmem.h"
#include "test_smaps.h"
#include "test_run.h"

static char *s_dir;

static void
s_setup (void)
{
    s_dir = th_tmpdir ();
    th_certs (s_dir, "alice", "demo");
    th_write (s_dir, "ticket.key", "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff\n");
}

static void
s_teardown (void)
{
    th_tmpdir_remove (&s_dir);
}

/*  Writes broker.conf = the standard head + extra broker keys + drivers, and
 *  loads it; returns the config or NULL with *error_p.  */
static broker_config_t *
s_load (const char *broker_extra, const char *drivers, char **error_p)
{
    char *head = th_conf_head_with (true, broker_extra), *text = NULL, path [4096];
    ck_assert_int_ge (asprintf (&text, "%s%s", head, drivers), 0);
    th_write (s_dir, "broker.conf", text);
    free (head);
    free (text);
    snprintf (path, sizeof path, "%s/broker.conf", s_dir);
    *error_p = NULL;
    return broker_config_load (path, error_p);
}

static const char *s_drivers =
    "drivers\n"
    "    board0\n        type = pkcs11\n        module = /usr/lib/softhsm/libsofthsm2.so\n"
    "        token = board0\n        pin-file = board.pin\n        threads = 4\n"
    "        tenant = demo\n"
    "    sim\n        type = sim\n";

START_TEST (test_good)
{
    char *error = NULL;
    broker_config_t *config = s_load ("    ticket-key = ticket.key\n    max-queue = 50\n"
                                      "    endpoint-file = ep.txt\n    driver-dir = drv\n",
                                      s_drivers, &error);
    ck_assert_msg (config != NULL, "%s", error ? error : "");
    ck_assert_str_eq (config->endpoint, "tcp://127.0.0.1:!");
    ck_assert_int_eq (config->max_queue, 50);
    ck_assert_int_eq (config->default_deadline_ms, 10000);
    ck_assert_int_eq (config->stats_interval_ms, 0);
    ck_assert_int_eq (config->ticket_lifetime_ms, 4 * 3600 * 1000);   /* 4 h: broker.conf(5) */
    ck_assert_int_eq (config->slow_threads, 1);                         /* broker.conf(5) */
    /*  broker.conf(5): "auto", the workers below the reactor only for two
     *  or more tenants (issue 19 item 6).  */
    ck_assert_int_eq (config->worker_nice, BROKER_WORKER_NICE_AUTO);
    ck_assert_int_eq (broker_config_worker_nice (config, 0), 0);
    ck_assert_int_eq (broker_config_worker_nice (config, 1), 0);
    ck_assert_int_eq (broker_config_worker_nice (config, 2), 10);
    ck_assert_int_eq (broker_config_worker_nice (config, 40), 10);
    ck_assert_int_eq (config->key_cache, 1024);
    ck_assert (config->curve);
    ck_assert (!config->ticket_key_random);
    ck_assert_uint_eq (config->ticket_key [0], 0x00);
    ck_assert_uint_eq (config->ticket_key [31], 0xff);
    char expect [4200];
    snprintf (expect, sizeof expect, "%s/ep.txt", s_dir);
    ck_assert_str_eq (config->endpoint_file, expect);
    snprintf (expect, sizeof expect, "%s/clients.d", s_dir);
    ck_assert_str_eq (config->clients_dir, expect);
    snprintf (expect, sizeof expect, "%s/drv", s_dir);
    ck_assert_str_eq (config->driver_dir, expect);
    snprintf (expect, sizeof expect, "%s/keystore.db", s_dir);
    ck_assert_str_eq (config->keystore_path, expect);
    snprintf (expect, sizeof expect, "%s/master.key", s_dir);
    ck_assert_str_eq (config->master_key_file, expect);
    ck_assert_ptr_null (config->master_key_board);
    ck_assert_str_eq (config->keys_home, "keystore");
    ck_assert_int_eq (config->pool_rsa [0], 0);
    ck_assert_int_eq (config->rsa_min_bits, 2048);
    ck_assert_ptr_nonnull (broker_config_board (config, "sim"));
    ck_assert_ptr_null (broker_config_board (config, "other"));
    ck_assert_uint_eq (config->n_boards, 2);
    ck_assert_str_eq (config->boards [0].tenant, "demo");
    ck_assert_ptr_null (config->boards [1].tenant);
    ck_assert_str_eq (config->boards [0].name, "board0");
    ck_assert_str_eq (config->boards [0].type, "pkcs11");
    ck_assert_int_eq (config->boards [0].threads, 4);
    ck_assert_int_eq (config->boards [1].threads, 1);
    ck_assert_str_eq (zconfig_get (config->boards [0].config, "token", ""), "board0");
    broker_config_destroy (&config);
    ck_assert_ptr_null (config);
    broker_config_destroy (&config);
}
END_TEST

/*  The keystore and keys sections: a board-wrapped master key, a board as
 *  keys/home, pool sizes.  */
START_TEST (test_keystore_and_keys)
{
    char *error = NULL, path [4096], expect [4200];
    char *text = NULL;
    ck_assert_int_ge (asprintf (&text, "broker\n    curve\n        secret-key = broker.cert_secret\n"
        "        clients = clients.d\n"
        "keystore\n"
        "    path = /var/lib/cs/ks.db\n"
        "    master-key = board:board0:wrapper\n"
        "    master-key-wrapped = master.wrapped\n"
        "keys\n    home = board0\n    pool-rsa-2048 = 8\n    pool-rsa-4096 = 1\n%s", s_drivers), 0);
    th_write (s_dir, "broker.conf", text);
    snprintf (path, sizeof path, "%s/broker.conf", s_dir);
    broker_config_t *config = broker_config_load (path, &error);
    ck_assert_msg (config != NULL, "%s", error ? error : "");
    ck_assert_str_eq (config->keystore_path, "/var/lib/cs/ks.db");
    ck_assert_str_eq (config->master_key_board, "board0");
    ck_assert_str_eq (config->master_key_label, "wrapper");
    snprintf (expect, sizeof expect, "%s/master.wrapped", s_dir);
    ck_assert_str_eq (config->master_key_wrapped, expect);
    ck_assert_ptr_null (config->master_key_file);
    ck_assert_str_eq (config->keys_home, "board0");
    ck_assert_int_eq (config->pool_rsa [0], 8);
    ck_assert_int_eq (config->pool_rsa [1], 0);
    ck_assert_int_eq (config->pool_rsa [2], 1);
    ck_assert_uint_eq (broker_pool_bits (2), 4096);
    /*  keys/usage-separation: strict by default, for every tenant.  */
    ck_assert_int_eq (broker_config_usage (config, "demo"), CS_USAGE_STRICT);
    broker_config_destroy (&config);
    free (text);
    //  keystore/url: a PostgreSQL URL kept as it is; logs name it without
    //  its password; not with keystore/path; nothing else is a URL.
    ck_assert_int_ge (asprintf (&text, "broker\n    curve\n        secret-key = broker.cert_secret\n"
        "        clients = clients.d\n"
        "keystore\n    url = \"postgresql://ks:s3cret@db1,db2/cs?target_session_attrs=read-write\"\n%s",
        s_drivers), 0);
    th_write (s_dir, "broker.conf", text);
    free (text);
    config = broker_config_load (path, &error);
    ck_assert_msg (config != NULL, "%s", error ? error : "");
    ck_assert_str_eq (config->keystore_path, "postgresql://ks:s3cret@db1,db2/cs?target_session_attrs=read-write");
    ck_assert_str_eq (config->keystore_name, "postgresql://ks:***@db1,db2/cs?target_session_attrs=read-write");
    broker_config_destroy (&config);
    ck_assert_int_ge (asprintf (&text, "broker\n    curve\n        secret-key = broker.cert_secret\n"
        "        clients = clients.d\n"
        "keystore\n    url = postgresql:///cs\n    path = ks.db\n%s", s_drivers), 0);
    th_write (s_dir, "broker.conf", text);
    free (text);
    error = NULL;
    ck_assert_ptr_null (broker_config_load (path, &error));
    ck_assert_ptr_nonnull (strstr (error, "keystore/url: give keystore/path (SQLite) or keystore/url"));
    free (error);
    ck_assert_int_ge (asprintf (&text, "broker\n    curve\n        secret-key = broker.cert_secret\n"
        "        clients = clients.d\n"
        "keystore\n    url = mysql://x\n%s", s_drivers), 0);
    th_write (s_dir, "broker.conf", text);
    free (text);
    error = NULL;
    ck_assert_ptr_null (broker_config_load (path, &error));
    ck_assert_ptr_nonnull (strstr (error, "keystore/url: must be a PostgreSQL URL"));
    free (error);
}
END_TEST

START_TEST (test_random_ticket_key_and_plaintext)
{
    char *error = NULL;
    broker_config_t *config = s_load ("", "drivers\n    b\n        type = sim\n", &error);
    ck_assert_ptr_nonnull (config);
    ck_assert (config->ticket_key_random);
    broker_config_destroy (&config);
}
END_TEST

/*  Board health settings (issue #9): defaults, values, and refusals.  */
START_TEST (test_board_health)
{
    char *error = NULL;
    broker_config_t *config = s_load ("", "drivers\n    a\n        type = sim\n"
                                      "    b\n        type = sim\n        trusted = false\n"
                                      "    c\n        type = sim\n        verify = sample 10%\n"
                                      "        call-timeout-ms = 750\n        generate-timeout-ms = 9000\n"
                                      "        probe-min-ms = 20\n        probe-max-ms = 400\n", &error);
    ck_assert_msg (config != NULL, "%s", error ? error : "");
    const broker_board_conf_t *a = &config->boards [0], *b = &config->boards [1], *c = &config->boards [2];
    ck_assert (a->trusted && !b->trusted);
    ck_assert_int_eq (a->verify_rsa, 100);
    ck_assert_int_eq (a->verify_ec, 0);
    ck_assert_int_eq (b->verify_ec, 100);
    ck_assert_int_eq (c->verify_rsa, 10);
    ck_assert_int_eq (c->verify_ec, 10);
    ck_assert_int_eq (a->call_timeout_ms, 0);
    ck_assert_int_eq (a->generate_timeout_ms, 300000);
    ck_assert_int_eq (a->probe_min_ms, 100);
    ck_assert_int_eq (a->probe_max_ms, 30000);
    ck_assert_int_eq (c->call_timeout_ms, 750);
    ck_assert_int_eq (c->generate_timeout_ms, 9000);
    ck_assert_int_eq (c->probe_min_ms, 20);
    ck_assert_int_eq (c->probe_max_ms, 400);
    broker_config_destroy (&config);
    static const char *bad [] = {
        "        verify = sometimes\n", "        verify = sample 101%\n", "        verify = sample 5\n",
        "        trusted = maybe\n", "        call-timeout-ms = -1\n",
        "        probe-min-ms = 500\n        probe-max-ms = 100\n" };
    for (size_t i = 0; i < sizeof bad / sizeof bad [0]; i++) {
        char drivers [256];
        snprintf (drivers, sizeof drivers, "drivers\n    a\n        type = sim\n%s", bad [i]);
        free (error);
        error = NULL;
        ck_assert_msg (s_load ("", drivers, &error) == NULL, "accepted: %s", bad [i]);
        ck_assert_ptr_nonnull (strstr (error, "drivers/a/"));
    }
    free (error);
}
END_TEST

/*  The limits of issue #7: defaults and set values.  */
START_TEST (test_limits)
{
    char *error = NULL;
    broker_config_t *config = s_load ("", s_drivers, &error);
    ck_assert_msg (config != NULL, "%s", error ? error : "");
    ck_assert_int_eq (config->max_deadline_ms, 60000);
    ck_assert_int_eq (config->max_client_bytes, 16 * 1024 * 1024);
    ck_assert_int_eq (config->router_rcvhwm, 100);
    ck_assert_int_eq (config->router_sndhwm, 1000);
    ck_assert_int_eq (config->max_client_jobs, 256);                    /* broker.conf(5) */
    ck_assert_int_eq (config->cross_check, 0);                          /* broker.conf(5): off */
    ck_assert_ptr_null (config->tenant_weights);
    broker_config_destroy (&config);
    config = s_load ("    max-deadline-ms = 2000\n    default-deadline-ms = 1500\n"
                     "    max-client-bytes = 4096\n    router-rcvhwm = 7\n    router-sndhwm = 9\n"
                     "    max-client-jobs = 3\n    cross-check = 25%\n    tenant-weight\n        gold = 4\n        demo = 1\n",
                     s_drivers, &error);
    ck_assert_msg (config != NULL, "%s", error ? error : "");
    ck_assert_int_eq (config->max_deadline_ms, 2000);
    ck_assert_int_eq (config->default_deadline_ms, 1500);
    ck_assert_int_eq (config->max_client_bytes, 4096);
    ck_assert_int_eq (config->router_rcvhwm, 7);
    ck_assert_int_eq (config->router_sndhwm, 9);
    ck_assert_int_eq (config->max_client_jobs, 3);
    ck_assert_int_eq (config->cross_check, 25);
    ck_assert_ptr_nonnull (config->tenant_weights);
    ck_assert_str_eq (zconfig_get (config->tenant_weights, "gold", ""), "4");
    broker_config_destroy (&config);
    /*  A number is kept whatever the tenants: 0 for a host shared with
     *  clients, or the workers lowered for one tenant too.  */
    config = s_load ("    worker-nice = 0\n", s_drivers, &error);
    ck_assert_msg (config != NULL, "%s", error ? error : "");
    ck_assert_int_eq (broker_config_worker_nice (config, 5), 0);
    broker_config_destroy (&config);
    config = s_load ("    worker-nice = 7\n", s_drivers, &error);
    ck_assert_msg (config != NULL, "%s", error ? error : "");
    ck_assert_int_eq (broker_config_worker_nice (config, 1), 7);
    broker_config_destroy (&config);
    /*  A default deadline over 60 s raises the cap's default with it.  */
    config = s_load ("    default-deadline-ms = 90000\n", s_drivers, &error);
    ck_assert_msg (config != NULL, "%s", error ? error : "");
    ck_assert_int_eq (config->max_deadline_ms, 90000);
    broker_config_destroy (&config);
}
END_TEST

/*  Secret files that group or others can read are refused, with the fix in
 *  the message (issue #7 item 7).  */
START_TEST (test_secret_file_modes)
{
    char *error = NULL, path [4200];
    snprintf (path, sizeof path, "%s/ticket.key", s_dir);
    ck_assert_int_eq (chmod (path, 0640), 0);
    ck_assert_ptr_null (s_load ("    ticket-key = ticket.key\n", s_drivers, &error));
    ck_assert_msg (strstr (error, "broker/ticket-key: ") && strstr (error, "/ticket.key can be read by group "
                   "or others (mode 0640): chmod 600 "), "got \"%s\"", error);
    free (error);
    ck_assert_int_eq (chmod (path, 0604), 0);
    ck_assert_ptr_null (s_load ("    ticket-key = ticket.key\n", s_drivers, &error));
    ck_assert_ptr_nonnull (strstr (error, "(mode 0604): chmod 600"));
    free (error);
    ck_assert_int_eq (chmod (path, 0600), 0);
    snprintf (path, sizeof path, "%s/broker.cert_secret", s_dir);
    ck_assert_int_eq (chmod (path, 0644), 0);
    ck_assert_ptr_null (s_load ("    ticket-key = ticket.key\n", s_drivers, &error));
    ck_assert_msg (strstr (error, "broker/curve/secret-key: ") && strstr (error, "/broker.cert_secret can be read "
                   "by group or others (mode 0644): chmod 600 "), "got \"%s\"", error);
    free (error);
    ck_assert_int_eq (chmod (path, 0600), 0);
    broker_config_t *config = s_load ("    ticket-key = ticket.key\n", s_drivers, &error);
    ck_assert_msg (config != NULL, "%s", error ? error : "");
    broker_config_destroy (&config);
}
END_TEST

/*  The ticket key lives in a page of its own, excluded from core dumps and
 *  locked when RLIMIT_MEMLOCK allows.  */
START_TEST (test_ticket_key_in_locked_page)
{
    long page_kb = sysconf (_SC_PAGESIZE) / 1024;
    size_t failures = cs_secmem_lock_failures ();
    ts_locked_t before = ts_locked ();
    char *error = NULL;
    broker_config_t *config = s_load ("    ticket-key = ticket.key\n", s_drivers, &error);
    ck_assert_msg (config != NULL, "%s", error ? error : "");
    ts_locked_t loaded = ts_locked ();
    ck_assert_int_eq (loaded.secret_kb, before.secret_kb + page_kb);
    if (cs_secmem_lock_failures () == failures)
        ck_assert_int_eq (loaded.secret_locked_kb, before.secret_locked_kb + page_kb);
    ck_assert_int_eq (loaded.other_locked_kb, before.other_locked_kb);
    broker_config_destroy (&config);
    ck_assert_int_eq (ts_locked ().secret_kb, before.secret_kb);
}
END_TEST

/*  One bad value each: the expected "PATH: problem" fragment.  */
static const struct {
    const char *broker_extra;
    const char *drivers;
    const char *expect;
} s_bad [] = {
    { "", "drivers\n    board0\n        type = sim\n        threads = 0\n",
      "broker.conf: drivers/board0/threads: must be 1..256" },
    { "", "drivers\n    board0\n        type = sim\n        threads = 300\n",
      "drivers/board0/threads: must be 1..256" },
    { "", "drivers\n    board0\n        type = sim\n        threads = four\n",
      "drivers/board0/threads: must be 1..256" },
    { "", "drivers\n    board0\n        module = x.so\n", "drivers/board0/type: required" },
    { "", "drivers\n    board0\n        type = ../evil\n", "drivers/board0/type: required" },
    { "", "", "drivers: must name 1..64 boards" },
    { "    max-queue = 0\n", NULL, "broker/max-queue: must be 1..1000000" },
    { "    max-client-jobs = 0\n", NULL, "broker/max-client-jobs: must be 1..1000000" },
    { "    cross-check = 101%\n", NULL, "broker/cross-check: must be N% with N 0..100" },
    { "    cross-check = some\n", NULL, "broker/cross-check: must be N% with N 0..100" },
    { "    cross-check = 5%%\n", NULL, "broker/cross-check: must be N% with N 0..100" },
    { "    tenant-weight\n        gold = 1001\n", NULL, "broker/tenant-weight/gold: must be 1..1000" },
    { "    tenant-weight\n        gold = x\n", NULL, "broker/tenant-weight/gold: must be 1..1000" },
    { "    tenant-weight\n        gold\n", NULL, "broker/tenant-weight/gold: must be a weight 1..1000" },
    { "    default-deadline-ms = -5\n", NULL, "broker/default-deadline-ms: must be" },
    { "    stats-interval-ms = x\n", NULL, "broker/stats-interval-ms: must be" },
    { "    ticket-lifetime-ms = 999\n", NULL, "broker/ticket-lifetime-ms: must be 1000..604800000" },
    { "    ticket-lifetime-ms = 604800001\n", NULL, "broker/ticket-lifetime-ms: must be 1000..604800000" },
    { "    ticket-key = missing.key\n", NULL, "broker/ticket-key: cannot read" },
    { "    ticket-key = broker.cert\n", NULL, "broker/ticket-key:" },
    { "    endpoint = udp://x\n", NULL, "broker/endpoint: must start with" },
    { "    max-client-bytes = 100\n", NULL, "broker/max-client-bytes: must be 4096..2147483647" },
    { "    max-deadline-ms = 0\n", NULL, "broker/max-deadline-ms: must be 1..3600000" },
    { "    max-deadline-ms = 5000\n    default-deadline-ms = 6000\n", NULL,
      "broker/default-deadline-ms: must not exceed broker/max-deadline-ms (5000)" },
    { "    router-rcvhwm = 0\n", NULL, "broker/router-rcvhwm: must be 1..100000" },
    { "    router-sndhwm = 100001\n", NULL, "broker/router-sndhwm: must be 1..100000" },
    { "    slow-threads = 0\n", NULL, "broker/slow-threads: must be 1..16" },
    { "    slow-threads = 17\n", NULL, "broker/slow-threads: must be 1..16" },
    { "    worker-nice = 20\n", NULL, "broker/worker-nice: must be auto or 0..19" },
    { "    worker-nice = -1\n", NULL, "broker/worker-nice: must be auto or 0..19" },
    { "    worker-nice = +5\n", NULL, "broker/worker-nice: must be auto or 0..19" },
    { "    worker-nice = always\n", NULL, "broker/worker-nice: must be auto or 0..19" },
    { "", "keys\n    home = nowhere\n" "drivers\n    b\n        type = sim\n",
      "keys/home: must be keystore or a board name" },
    { "", "keys\n    pool-rsa-3072 = 5000\n" "drivers\n    b\n        type = sim\n",
      "keys/pool-rsa-3072: must be 0..1000" },
    { "", "keys\n    rsa-min-bits = 512\n" "drivers\n    b\n        type = sim\n",
      "keys/rsa-min-bits: must be 1024..4096" },
    { "", "keys\n    rsa-min-bits = 2050\n" "drivers\n    b\n        type = sim\n",
      "keys/rsa-min-bits: must be a multiple of 8" },
    { "", "keys\n    usage-separation = loose\n" "drivers\n    b\n        type = sim\n",
      "keys/usage-separation: must be strict or spec (got \"loose\")" },
    { "", "keys\n    usage-separation = strict\n        legacy = off\n" "drivers\n    b\n        type = sim\n",
      "keys/usage-separation/legacy: must be strict or spec (got \"off\")" },
};

/*  keys/usage-separation with per-tenant children (cs_usage.h).  */
START_TEST (test_usage_separation)
{
    char *error = NULL, path [4096], *text = NULL;
    ck_assert_int_ge (asprintf (&text, "broker\n    curve\n        secret-key = broker.cert_secret\n"
                                "        clients = clients.d\n"
                                "keys\n    usage-separation = spec\n        bank = strict\n"
                                "        shop = spec\n%s", s_drivers), 0);
    th_write (s_dir, "broker.conf", text);
    snprintf (path, sizeof path, "%s/broker.conf", s_dir);
    broker_config_t *config = broker_config_load (path, &error);
    ck_assert_msg (config != NULL, "%s", error ? error : "");
    ck_assert_int_eq (broker_config_usage (config, "bank"), CS_USAGE_STRICT);
    ck_assert_int_eq (broker_config_usage (config, "shop"), CS_USAGE_SPEC);
    ck_assert_int_eq (broker_config_usage (config, "other"), CS_USAGE_SPEC);
    ck_assert_int_eq (broker_config_usage (config, NULL), CS_USAGE_SPEC);
    broker_config_destroy (&config);
    free (text);
}
END_TEST

START_TEST (test_bad)
{
    char *error = NULL;
    broker_config_t *config = s_load (s_bad [_i].broker_extra,
                                      s_bad [_i].drivers ? s_bad [_i].drivers : s_drivers, &error);
    ck_assert_ptr_null (config);
    ck_assert_ptr_nonnull (error);
    ck_assert_msg (strstr (error, s_bad [_i].expect) != NULL, "case %d: got \"%s\"", _i, error);
    free (error);
}
END_TEST

/*  Curve settings and tenants need their own files.  */
static broker_config_t *
s_load_text (const char *text, char **error_p)
{
    char path [4096];
    th_write (s_dir, "broker.conf", text);
    snprintf (path, sizeof path, "%s/broker.conf", s_dir);
    *error_p = NULL;
    return broker_config_load (path, error_p);
}

START_TEST (test_bad_curve_and_tenants)
{
    char *error = NULL;
    ck_assert_ptr_null (s_load_text ("broker\n    curve\n        enabled = maybe\n", &error));
    ck_assert_ptr_nonnull (strstr (error, "broker/curve/enabled: must be true or false"));
    free (error);
    ck_assert_ptr_null (s_load_text ("broker\n    curve\n        secret-key = nope\n", &error));
    ck_assert_ptr_nonnull (strstr (error, "broker/curve/secret-key: "));
    free (error);
    ck_assert_ptr_null (s_load_text ("broker\n    curve\n        secret-key = broker.cert_secret\n"
                                     "        clients = nodir\n", &error));
    ck_assert_ptr_nonnull (strstr (error, "broker/curve/clients: "));
    free (error);
    ck_assert_ptr_null (s_load_text ("broker\n    curve\n        enabled = false\n"
                                     "keystore\n    master-key = board:x\n"
                                     "drivers\n    b\n        type = sim\n", &error));
    ck_assert_ptr_nonnull (strstr (error, "keystore/master-key: must be FILE or board:NAME:LABEL"));
    free (error);
    ck_assert_ptr_null (s_load_text ("broker\n    curve\n        enabled = false\n"
                                     "keystore\n    master-key = board:b:wrap\n"
                                     "drivers\n    b\n        type = sim\n", &error));
    ck_assert_ptr_nonnull (strstr (error, "keystore/master-key-wrapped: required"));
    free (error);
    ck_assert_ptr_null (s_load_text ("broker\n    curve\n        enabled = false\n"
                                     "keystore\n    master-key = board:nope:wrap\n"
                                     "    master-key-wrapped = w.bin\n"
                                     "drivers\n    b\n        type = sim\n", &error));
    ck_assert_ptr_nonnull (strstr (error, "keystore/master-key: no board named \"nope\""));
    free (error);
    ck_assert_ptr_null (s_load_text ("broker\n    curve\n        enabled = false\n"
                                     "keystore\n    key-cache = -1\n"
                                     "drivers\n    b\n        type = sim\n", &error));
    ck_assert_ptr_nonnull (strstr (error, "keystore/key-cache: must be 0..1000000"));
    free (error);
    ck_assert_ptr_null (s_load_text ("broker\n  this is not ZPL\n\t\tbroken = \"\n", &error));
    ck_assert_ptr_nonnull (error);
    free (error);
    char missing [4200];
    snprintf (missing, sizeof missing, "%s/none.conf", s_dir);
    ck_assert_ptr_null (broker_config_load (missing, &error));
    ck_assert_ptr_nonnull (strstr (error, "none.conf: cannot read"));
    free (error);
}
END_TEST

int
main (void)
{
    Suite *suite = suite_create ("broker_config");
    TCase *tc = tcase_create ("config");
    tcase_add_checked_fixture (tc, s_setup, s_teardown);
    tcase_add_test (tc, test_good);
    tcase_add_test (tc, test_keystore_and_keys);
    tcase_add_test (tc, test_random_ticket_key_and_plaintext);
    tcase_add_test (tc, test_usage_separation);
    tcase_add_loop_test (tc, test_bad, 0, (int) (sizeof s_bad / sizeof s_bad [0]));
    tcase_add_test (tc, test_bad_curve_and_tenants);
    tcase_add_test (tc, test_limits);
    tcase_add_test (tc, test_secret_file_modes);
    tcase_add_test (tc, test_ticket_key_in_locked_page);
    tcase_add_test (tc, test_board_health);
    suite_add_tcase (suite, tc);
    return tr_run (suite);
}
