/*  test_broker_metrics.c — the metrics registry and its text (broker/ops/metrics.h:
 *  exact Prometheus text for known counters, atomic updates from several
 *  threads, bounded label sets), the endpoint (broker/ops/metrics_http.h: URL
 *  rules, loopback only unless public, GET/HEAD/404/405 on a port chosen by
 *  the kernel), the config keys, and a whole broker in-process whose job
 *  counters and histograms must agree with the frontend's own STATS.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include "test_broker_fixture.h"
#include "metrics.h"
#include "metrics_quota.h"
#include "metrics_http.h"
#include "test_metrics_scrape.h"
#include "test_run.h"

/* ------------------------------------------------------------------ */
/*  A tiny HTTP/1.0 client for the endpoint                            */


/* ------------------------------------------------------------------ */
/*  The registry and its text                                          */

/*  The whole text for one board and known counters: every family with its
 *  HELP and TYPE, mechanisms in CKM order ("none" last), cumulative
 *  buckets with le in seconds, sums to the nanosecond, label escaping.  */
static const char *s_expected =
"# HELP cryptoserver_jobs_total Jobs given to a board's worker, by board, PKCS#11 mechanism and result "
"(ok, error: another CK_RV, expired: deadline passed in the queue, not run).\n"
"# TYPE cryptoserver_jobs_total counter\n"
"cryptoserver_jobs_total{board=\"board0\",mechanism=\"CKM_RSA_PKCS\",result=\"ok\"} 0\n"
"cryptoserver_jobs_total{board=\"board0\",mechanism=\"CKM_RSA_PKCS\",result=\"error\"} 1\n"
"cryptoserver_jobs_total{board=\"board0\",mechanism=\"CKM_RSA_PKCS\",result=\"expired\"} 0\n"
"cryptoserver_jobs_total{board=\"board0\",mechanism=\"CKM_ECDSA\",result=\"ok\"} 2\n"
"cryptoserver_jobs_total{board=\"board0\",mechanism=\"CKM_ECDSA\",result=\"error\"} 0\n"
"cryptoserver_jobs_total{board=\"board0\",mechanism=\"CKM_ECDSA\",result=\"expired\"} 0\n"
"cryptoserver_jobs_total{board=\"board0\",mechanism=\"none\",result=\"ok\"} 0\n"
"cryptoserver_jobs_total{board=\"board0\",mechanism=\"none\",result=\"error\"} 0\n"
"cryptoserver_jobs_total{board=\"board0\",mechanism=\"none\",result=\"expired\"} 1\n"
"# HELP cryptoserver_job_seconds Seconds of a job run by a board's worker, by board and stage (queue: "
"waiting for a worker; service: the driver call; total: from the request's arrival to the result back "
"at the frontend).\n"
"# TYPE cryptoserver_job_seconds histogram\n"
"cryptoserver_job_seconds_bucket{board=\"board0\",stage=\"queue\",le=\"0.00005\"} 2\n"
"cryptoserver_job_seconds_bucket{board=\"board0\",stage=\"queue\",le=\"0.0001\"} 2\n"
"cryptoserver_job_seconds_bucket{board=\"board0\",stage=\"queue\",le=\"0.00025\"} 2\n"
"cryptoserver_job_seconds_bucket{board=\"board0\",stage=\"queue\",le=\"0.0005\"} 2\n"
"cryptoserver_job_seconds_bucket{board=\"board0\",stage=\"queue\",le=\"0.001\"} 2\n"
"cryptoserver_job_seconds_bucket{board=\"board0\",stage=\"queue\",le=\"0.0025\"} 2\n"
"cryptoserver_job_seconds_bucket{board=\"board0\",stage=\"queue\",le=\"0.005\"} 2\n"
"cryptoserver_job_seconds_bucket{board=\"board0\",stage=\"queue\",le=\"0.01\"} 2\n"
"cryptoserver_job_seconds_bucket{board=\"board0\",stage=\"queue\",le=\"0.025\"} 2\n"
"cryptoserver_job_seconds_bucket{board=\"board0\",stage=\"queue\",le=\"0.05\"} 2\n"
"cryptoserver_job_seconds_bucket{board=\"board0\",stage=\"queue\",le=\"0.1\"} 2\n"
"cryptoserver_job_seconds_bucket{board=\"board0\",stage=\"queue\",le=\"0.25\"} 2\n"
"cryptoserver_job_seconds_bucket{board=\"board0\",stage=\"queue\",le=\"0.5\"} 2\n"
"cryptoserver_job_seconds_bucket{board=\"board0\",stage=\"queue\",le=\"1\"} 2\n"
"cryptoserver_job_seconds_bucket{board=\"board0\",stage=\"queue\",le=\"2.5\"} 2\n"
"cryptoserver_job_seconds_bucket{board=\"board0\",stage=\"queue\",le=\"5\"} 2\n"
"cryptoserver_job_seconds_bucket{board=\"board0\",stage=\"queue\",le=\"10\"} 2\n"
"cryptoserver_job_seconds_bucket{board=\"board0\",stage=\"queue\",le=\"+Inf\"} 2\n"
"cryptoserver_job_seconds_sum{board=\"board0\",stage=\"queue\"} 0.000050000\n"
"cryptoserver_job_seconds_count{board=\"board0\",stage=\"queue\"} 2\n"
"cryptoserver_job_seconds_bucket{board=\"board0\",stage=\"service\",le=\"0.00005\"} 0\n"
"cryptoserver_job_seconds_bucket{board=\"board0\",stage=\"service\",le=\"0.0001\"} 0\n"
"cryptoserver_job_seconds_bucket{board=\"board0\",stage=\"service\",le=\"0.00025\"} 0\n"
"cryptoserver_job_seconds_bucket{board=\"board0\",stage=\"service\",le=\"0.0005\"} 0\n"
"cryptoserver_job_seconds_bucket{board=\"board0\",stage=\"service\",le=\"0.001\"} 0\n"
"cryptoserver_job_seconds_bucket{board=\"board0\",stage=\"service\",le=\"0.0025\"} 1\n"
"cryptoserver_job_seconds_bucket{board=\"board0\",stage=\"service\",le=\"0.005\"} 1\n"
"cryptoserver_job_seconds_bucket{board=\"board0\",stage=\"service\",le=\"0.01\"} 1\n"
"cryptoserver_job_seconds_bucket{board=\"board0\",stage=\"service\",le=\"0.025\"} 1\n"
"cryptoserver_job_seconds_bucket{board=\"board0\",stage=\"service\",le=\"0.05\"} 1\n"
"cryptoserver_job_seconds_bucket{board=\"board0\",stage=\"service\",le=\"0.1\"} 1\n"
"cryptoserver_job_seconds_bucket{board=\"board0\",stage=\"service\",le=\"0.25\"} 1\n"
"cryptoserver_job_seconds_bucket{board=\"board0\",stage=\"service\",le=\"0.5\"} 1\n"
"cryptoserver_job_seconds_bucket{board=\"board0\",stage=\"service\",le=\"1\"} 1\n"
"cryptoserver_job_seconds_bucket{board=\"board0\",stage=\"service\",le=\"2.5\"} 1\n"
"cryptoserver_job_seconds_bucket{board=\"board0\",stage=\"service\",le=\"5\"} 1\n"
"cryptoserver_job_seconds_bucket{board=\"board0\",stage=\"service\",le=\"10\"} 1\n"
"cryptoserver_job_seconds_bucket{board=\"board0\",stage=\"service\",le=\"+Inf\"} 1\n"
"cryptoserver_job_seconds_sum{board=\"board0\",stage=\"service\"} 0.001500001\n"
"cryptoserver_job_seconds_count{board=\"board0\",stage=\"service\"} 1\n"
"cryptoserver_job_seconds_bucket{board=\"board0\",stage=\"total\",le=\"0.00005\"} 0\n"
"cryptoserver_job_seconds_bucket{board=\"board0\",stage=\"total\",le=\"0.0001\"} 0\n"
"cryptoserver_job_seconds_bucket{board=\"board0\",stage=\"total\",le=\"0.00025\"} 0\n"
"cryptoserver_job_seconds_bucket{board=\"board0\",stage=\"total\",le=\"0.0005\"} 0\n"
"cryptoserver_job_seconds_bucket{board=\"board0\",stage=\"total\",le=\"0.001\"} 0\n"
"cryptoserver_job_seconds_bucket{board=\"board0\",stage=\"total\",le=\"0.0025\"} 0\n"
"cryptoserver_job_seconds_bucket{board=\"board0\",stage=\"total\",le=\"0.005\"} 0\n"
"cryptoserver_job_seconds_bucket{board=\"board0\",stage=\"total\",le=\"0.01\"} 0\n"
"cryptoserver_job_seconds_bucket{board=\"board0\",stage=\"total\",le=\"0.025\"} 0\n"
"cryptoserver_job_seconds_bucket{board=\"board0\",stage=\"total\",le=\"0.05\"} 0\n"
"cryptoserver_job_seconds_bucket{board=\"board0\",stage=\"total\",le=\"0.1\"} 0\n"
"cryptoserver_job_seconds_bucket{board=\"board0\",stage=\"total\",le=\"0.25\"} 0\n"
"cryptoserver_job_seconds_bucket{board=\"board0\",stage=\"total\",le=\"0.5\"} 0\n"
"cryptoserver_job_seconds_bucket{board=\"board0\",stage=\"total\",le=\"1\"} 0\n"
"cryptoserver_job_seconds_bucket{board=\"board0\",stage=\"total\",le=\"2.5\"} 0\n"
"cryptoserver_job_seconds_bucket{board=\"board0\",stage=\"total\",le=\"5\"} 0\n"
"cryptoserver_job_seconds_bucket{board=\"board0\",stage=\"total\",le=\"10\"} 0\n"
"cryptoserver_job_seconds_bucket{board=\"board0\",stage=\"total\",le=\"+Inf\"} 1\n"
"cryptoserver_job_seconds_sum{board=\"board0\",stage=\"total\"} 20.000000000\n"
"cryptoserver_job_seconds_count{board=\"board0\",stage=\"total\"} 1\n"
"# HELP cryptoserver_queue_depth Work items waiting for a worker: client jobs and background jobs "
"(key pool refills, clean-ups).\n"
"# TYPE cryptoserver_queue_depth gauge\n"
"cryptoserver_queue_depth{queue=\"client\"} 3\n"
"cryptoserver_queue_depth{queue=\"background\"} 1\n"
"# HELP cryptoserver_board_up 1 when a board is in rotation, 0 while it is out after a fault (a failed "
"driver call, a call over its time limit or a wrong result) until a probe brings it back.\n"
"# TYPE cryptoserver_board_up gauge\n"
"cryptoserver_board_up{board=\"board0\"} 0\n"
"# HELP cryptoserver_wrong_results_total Results of a board that failed verification with the key's "
"public half and were not released (the job was re-run on another board or failed).\n"
"# TYPE cryptoserver_wrong_results_total counter\n"
"cryptoserver_wrong_results_total{board=\"board0\"} 2\n"
"# HELP cryptoserver_board_faults_total Faults of a board, by kind: error (a device- or session-class "
"error of the driver), timeout (a driver call over its time limit), wrong (a wrong result).\n"
"# TYPE cryptoserver_board_faults_total counter\n"
"cryptoserver_board_faults_total{board=\"board0\",kind=\"error\"} 0\n"
"cryptoserver_board_faults_total{board=\"board0\",kind=\"timeout\"} 1\n"
"cryptoserver_board_faults_total{board=\"board0\",kind=\"wrong\"} 2\n"
"# HELP cryptoserver_job_reruns_total Jobs re-run on another board after a board fault.\n"
"# TYPE cryptoserver_job_reruns_total counter\n"
"cryptoserver_job_reruns_total 3\n"
"# HELP cryptoserver_fast_lane_jobs_total Jobs run on the reactor thread instead of a worker "
"(broker/fast-lane-us): cheap jobs on an openssl board while nothing waited in the queue.\n"
"# TYPE cryptoserver_fast_lane_jobs_total counter\n"
"cryptoserver_fast_lane_jobs_total 2\n"
"# HELP cryptoserver_cross_checks_total Jobs run on two boards and compared (broker/cross-check), by "
"result: match, mismatch (a wrong result caught), skipped (the second run failed, ran on the same board, "
"or the results could not be compared).\n"
"# TYPE cryptoserver_cross_checks_total counter\n"
"cryptoserver_cross_checks_total{result=\"match\"} 2\n"
"cryptoserver_cross_checks_total{result=\"mismatch\"} 1\n"
"cryptoserver_cross_checks_total{result=\"skipped\"} 0\n"
"# HELP cryptoserver_requests_total Client requests decoded (a request carries one job or a batch of "
"them).\n"
"# TYPE cryptoserver_requests_total counter\n"
"cryptoserver_requests_total 2\n"
"# HELP cryptoserver_request_jobs_total Jobs in the client requests decoded; divided by "
"cryptoserver_requests_total, the mean jobs per request.\n"
"# TYPE cryptoserver_request_jobs_total counter\n"
"cryptoserver_request_jobs_total 33\n"
"# HELP cryptoserver_inflight_jobs Jobs of a client out with the boards' workers (queued or running), "
"by client (its certificate's name) and tenant; without the bearer token one line sums them "
"(client and tenant \"(all)\").\n"
"# TYPE cryptoserver_inflight_jobs gauge\n"
"cryptoserver_inflight_jobs{client=\"alice\",tenant=\"demo\"} 2\n"
"cryptoserver_inflight_jobs{client=\"b\\\"o\\\\b\\n\",tenant=\"other\"} 0\n"
"# HELP cryptoserver_tenant_throttled_total Jobs that waited at admission for their tenant's quota "
"(max-ops-per-s, max-inflight), by tenant and limit; without the bearer token one line per limit sums the "
"tenants.\n"
"# TYPE cryptoserver_tenant_throttled_total counter\n"
"cryptoserver_tenant_throttled_total{tenant=\"demo\",limit=\"ops-per-s\"} 3\n"
"cryptoserver_tenant_throttled_total{tenant=\"demo\",limit=\"inflight\"} 0\n"
"cryptoserver_tenant_throttled_total{tenant=\"demo\",limit=\"keys\"} 0\n"
"cryptoserver_tenant_throttled_total{tenant=\"demo\",limit=\"objects\"} 0\n"
"# HELP cryptoserver_tenant_quota_refused_total Jobs answered with an error because of their tenant's "
"quota: could not start within their deadline (ops-per-s, inflight) or a key or object over max-keys, "
"max-objects.\n"
"# TYPE cryptoserver_tenant_quota_refused_total counter\n"
"cryptoserver_tenant_quota_refused_total{tenant=\"demo\",limit=\"ops-per-s\"} 0\n"
"cryptoserver_tenant_quota_refused_total{tenant=\"demo\",limit=\"inflight\"} 0\n"
"cryptoserver_tenant_quota_refused_total{tenant=\"demo\",limit=\"keys\"} 1\n"
"cryptoserver_tenant_quota_refused_total{tenant=\"demo\",limit=\"objects\"} 0\n"
"# HELP cryptoserver_key_cache_hits_total Lookups of keystore keys found in the broker's key cache.\n"
"# TYPE cryptoserver_key_cache_hits_total counter\n"
"cryptoserver_key_cache_hits_total 1\n"
"# HELP cryptoserver_key_cache_misses_total Lookups of keystore keys not in the broker's key cache "
"(read and unsealed).\n"
"# TYPE cryptoserver_key_cache_misses_total counter\n"
"cryptoserver_key_cache_misses_total 2\n"
"# HELP cryptoserver_key_cache_dropped_total Keys dropped from the key cache because another writer "
"changed their tenant's rows.\n"
"# TYPE cryptoserver_key_cache_dropped_total counter\n"
"cryptoserver_key_cache_dropped_total 4\n"
"# HELP cryptoserver_audit_chain_breaks_total Changes of this broker's audit chain by another writer, seen "
"when it appended (audit verify).\n"
"# TYPE cryptoserver_audit_chain_breaks_total counter\n"
"cryptoserver_audit_chain_breaks_total 1\n"
"# HELP cryptoserver_pool_keys_taken_total RSA key generations served from the pre-generated pool.\n"
"# TYPE cryptoserver_pool_keys_taken_total counter\n"
"cryptoserver_pool_keys_taken_total 2\n"
"# HELP cryptoserver_pool_keys_missed_total RSA key generations of a size the pool keeps that found it "
"empty.\n"
"# TYPE cryptoserver_pool_keys_missed_total counter\n"
"cryptoserver_pool_keys_missed_total 1\n"
"# HELP cryptoserver_pool_keys_restored_total Pre-generated RSA keys restored from the keystore at start.\n"
"# TYPE cryptoserver_pool_keys_restored_total counter\n"
"cryptoserver_pool_keys_restored_total 16\n"
"# HELP process_cpu_seconds_total Total user and system CPU time of the broker process in seconds.\n"
"# TYPE process_cpu_seconds_total counter\n"
"process_cpu_seconds_total 1.000042\n";

START_TEST (test_render_exact)
{
    const char *names [] = { "board0" };
    metrics_t *metrics = metrics_new (names, 1);
    ck_assert_ptr_nonnull (metrics);
    metrics_job (metrics, 0, CKM_ECDSA, METRICS_OK);
    metrics_job (metrics, 0, METRICS_MECH_NONE, METRICS_EXPIRED);
    metrics_job (metrics, 0, CKM_RSA_PKCS, METRICS_ERROR);
    metrics_job (metrics, 0, CKM_ECDSA, METRICS_OK);
    metrics_job (metrics, 1, CKM_ECDSA, METRICS_OK);                /* no such board: ignored */
    metrics_observe (metrics, 0, METRICS_QUEUE, 50000);             /* on a bound: le="0.00005" */
    metrics_observe (metrics, 0, METRICS_QUEUE, -7);                /* counts as 0 */
    metrics_observe (metrics, 0, METRICS_SERVICE, 1500001);         /* le="0.0025" */
    metrics_observe (metrics, 0, METRICS_TOTAL, 20000000000);       /* over 10 s: +Inf only */
    metrics_queue_depth (metrics, 3, 1);
    metrics_client_t *alice = metrics_client (metrics, "alice", "demo");
    metrics_client_t *odd = metrics_client (metrics, "b\"o\\b\n", "other");
    ck_assert_ptr_eq (metrics_client (metrics, "alice", "demo"), alice);
    ck_assert_ptr_ne (odd, alice);
    metrics_inflight_add (alice, 3);
    metrics_inflight_add (alice, -1);
    metrics_inflight_add (odd, 1);
    metrics_inflight_add (odd, -1);
    metrics_key_cache (metrics, true);
    metrics_key_cache (metrics, false);
    metrics_key_cache (metrics, false);
    metrics_pool (metrics, METRICS_POOL_TAKEN, 1);
    metrics_pool (metrics, METRICS_POOL_TAKEN, 1);
    metrics_pool (metrics, METRICS_POOL_MISSED, 1);
    metrics_pool (metrics, METRICS_POOL_RESTORED, 16);
    metrics_pool (NULL, METRICS_POOL_TAKEN, 1);                     /* NULL-safe */
    metrics_board_fault (metrics, 0, METRICS_FAULT_WRONG);
    metrics_board_fault (metrics, 0, METRICS_FAULT_WRONG);
    metrics_board_fault (metrics, 0, METRICS_FAULT_TIMEOUT);
    metrics_board_fault (metrics, 1, METRICS_FAULT_ERROR);          /* no such board: ignored */
    metrics_board_up (metrics, 0, true);
    metrics_board_up (metrics, 0, false);
    for (int i = 0; i < 3; i++)
        metrics_rerun (metrics);
    metrics_fast_lane (metrics);
    metrics_fast_lane (metrics);
    metrics_fast_lane (NULL);                                   /* NULL-safe */
    metrics_cross_check (metrics, METRICS_CROSS_MATCH);
    metrics_cross_check (metrics, METRICS_CROSS_MATCH);
    metrics_cross_check (metrics, METRICS_CROSS_MISMATCH);
    metrics_cross_check (metrics, METRICS_CROSS_RESULTS);      /* out of range: ignored */
    metrics_cross_check (NULL, METRICS_CROSS_MATCH);           /* NULL-safe */
    metrics_request (metrics, 1);
    metrics_request (metrics, 32);                              /* a coalesced request */
    metrics_request (NULL, 1);                                  /* NULL-safe */
    metrics_key_cache_dropped (metrics, 4);
    metrics_key_cache_dropped (NULL, 1);                        /* NULL-safe */
    metrics_audit_break (metrics);
    metrics_audit_break (NULL);                                 /* NULL-safe */
    metrics_tenant_t *demo = metrics_quota_tenant (metrics_quota (metrics), "demo");
    ck_assert_ptr_eq (metrics_quota_tenant (metrics_quota (metrics), "demo"), demo);
    metrics_quota_count (demo, METRICS_QUOTA_OPS, false, 3);
    metrics_quota_count (demo, METRICS_QUOTA_KEYS, true, 1);
    metrics_quota_count (NULL, METRICS_QUOTA_KEYS, true, 1);    /* NULL-safe */
    size_t len = 0;
    char *text = metrics_render_at (metrics, 1000042, METRICS_VIEW_NAMES, &len);
    ck_assert_ptr_nonnull (text);
    ck_assert_str_eq (text, s_expected);
    ck_assert_uint_eq (len, strlen (s_expected));
    free (text);
    /*  Without the names: the same text, the client lines summed into one
     *  that names nobody (issue #19, item 8).  */
    text = metrics_render_at (metrics, 1000042, METRICS_VIEW_AGGREGATE, &len);
    ck_assert_ptr_nonnull (text);
    ck_assert_ptr_null (strstr (text, "alice"));
    ck_assert_ptr_null (strstr (text, "tenant=\"demo\""));
    ck_assert_double_eq (tm_sample (text, "cryptoserver_inflight_jobs{client=\"(all)\",tenant=\"(all)\"}"), 2);
    const char *names_start = strstr (s_expected, "cryptoserver_inflight_jobs{client=\"alice\"");
    const char *names_end = strstr (s_expected, "# HELP cryptoserver_tenant_throttled_total");
    ck_assert_double_eq (tm_sample (text, "cryptoserver_tenant_throttled_total{tenant=\"(all)\",limit=\"ops-per-s\"}"), 3);
    ck_assert_double_eq (tm_sample (text, "cryptoserver_tenant_quota_refused_total{tenant=\"(all)\",limit=\"keys\"}"), 1);
    //  The tenant lines of the quota families say "(all)" instead of "demo": one byte more each.
    ck_assert_uint_eq (len, strlen (s_expected) - (size_t) (names_end - names_start)
                            + strlen ("cryptoserver_inflight_jobs{client=\"(all)\",tenant=\"(all)\"} 2\n") + 8);
    free (text);
    metrics_destroy (&metrics);
    ck_assert_ptr_null (metrics);
    metrics_destroy (&metrics);                                     /* NULL-safe */
}
END_TEST

/*  The recording functions do nothing without a registry.  */
START_TEST (test_null_registry)
{
    metrics_job (NULL, 0, CKM_ECDSA, METRICS_OK);
    metrics_observe (NULL, 0, METRICS_QUEUE, 1);
    metrics_queue_depth (NULL, 1, 1);
    metrics_key_cache (NULL, true);
    ck_assert_ptr_null (metrics_client (NULL, "a", "b"));
    metrics_inflight_add (NULL, 1);
}
END_TEST

/*  process_cpu_seconds_total comes from getrusage: it grows when this
 *  process burns CPU.  */
START_TEST (test_process_cpu)
{
    const char *names [] = { "b" };
    metrics_t *metrics = metrics_new (names, 1);
    char *before = metrics_render (metrics, METRICS_VIEW_NAMES, NULL);
    double start = tm_sample (before, "process_cpu_seconds_total");
    /*  Spin until the process has used 50 ms of CPU (not of wall time: on
     *  a loaded machine 50 ms of wall time may hold little CPU).  */
    volatile uint64_t spin = 0;
    struct timespec now;
    clock_gettime (CLOCK_PROCESS_CPUTIME_ID, &now);
    int64_t until = (int64_t) now.tv_sec * 1000000000 + now.tv_nsec + 50000000;
    do {
        spin++;
        clock_gettime (CLOCK_PROCESS_CPUTIME_ID, &now);
    } while ((int64_t) now.tv_sec * 1000000000 + now.tv_nsec < until);
    char *after = metrics_render (metrics, METRICS_VIEW_NAMES, NULL);
    ck_assert_double_ge (start, 0);
    ck_assert_double_ge (tm_sample (after, "process_cpu_seconds_total") - start, 0.04);
    free (before);
    free (after);
    metrics_destroy (&metrics);
}
END_TEST

enum { S_THREADS = 4, S_ROUNDS = 200000 };

static void *
s_hammer (void *arg)
{
    metrics_t *metrics = arg;
    metrics_client_t *client = metrics_client (metrics, "shared", "t");
    for (int i = 0; i < S_ROUNDS; i++) {
        metrics_job (metrics, 0, 0x80000000UL + (unsigned long) (i % 3), METRICS_OK);
        metrics_observe (metrics, 0, METRICS_SERVICE, 1000);
        metrics_inflight_add (client, 1);
        metrics_inflight_add (client, i % 2 ? -2 : 0);
    }
    return client;
}

/*  Several threads recording into the same counters lose nothing, and
 *  find the same client entry.  */
START_TEST (test_threads)
{
    const char *names [] = { "b" };
    metrics_t *metrics = metrics_new (names, 1);
    pthread_t threads [S_THREADS];
    void *clients [S_THREADS];
    for (int i = 0; i < S_THREADS; i++)
        ck_assert_int_eq (pthread_create (&threads [i], NULL, s_hammer, metrics), 0);
    for (int i = 0; i < S_THREADS; i++)
        ck_assert_int_eq (pthread_join (threads [i], &clients [i]), 0);
    for (int i = 1; i < S_THREADS; i++)
        ck_assert_ptr_eq (clients [i], clients [0]);
    char *text = metrics_render (metrics, METRICS_VIEW_NAMES, NULL);
    double jobs = 0;
    for (int m = 0; m < 3; m++) {
        char series [256];
        snprintf (series, sizeof series, "cryptoserver_jobs_total{board=\"b\",mechanism=\"CKM_0x8000000%d\","
                  "result=\"ok\"}", m);
        jobs += tm_sample (text, series);
    }
    ck_assert_double_eq (jobs, S_THREADS * S_ROUNDS);
    ck_assert_double_eq (tm_sample (text, "cryptoserver_job_seconds_count{board=\"b\",stage=\"service\"}"),
                         S_THREADS * S_ROUNDS);
    ck_assert_double_eq_tol (tm_sample (text, "cryptoserver_job_seconds_sum{board=\"b\",stage=\"service\"}"),
                             S_THREADS * S_ROUNDS * 1e-6, 1e-9);
    ck_assert_double_eq (tm_sample (text, "cryptoserver_inflight_jobs{client=\"shared\",tenant=\"t\"}"), 0);
    free (text);
    metrics_destroy (&metrics);
}
END_TEST

/*  Label sets are bounded: past METRICS_MECH_SLOTS mechanisms a board
 *  counts mechanism="other", past METRICS_CLIENTS_MAX clients they share
 *  ("(other)", "(other)").  */
START_TEST (test_bounded_labels)
{
    const char *names [] = { "b" };
    metrics_t *metrics = metrics_new (names, 1);
    for (unsigned long m = 0; m < METRICS_MECH_SLOTS + 5; m++)
        metrics_job (metrics, 0, 0x80000000UL + m, METRICS_OK);
    char name [64];
    metrics_client_t *first = NULL;
    for (int i = 0; i < METRICS_CLIENTS_MAX; i++) {
        snprintf (name, sizeof name, "client%d", i);
        metrics_client_t *client = metrics_client (metrics, name, "t");
        first = first ? first : client;
        metrics_inflight_add (client, 1);
    }
    metrics_client_t *late = metrics_client (metrics, "late", "t");
    ck_assert_ptr_eq (metrics_client (metrics, "later", "t"), late);
    ck_assert_ptr_eq (metrics_client (metrics, "client0", "t"), first);
    metrics_inflight_add (late, 2);
    char *text = metrics_render (metrics, METRICS_VIEW_NAMES, NULL);
    ck_assert_double_eq (tm_sample (text, "cryptoserver_jobs_total{board=\"b\",mechanism=\"other\",result=\"ok\"}"), 5);
    ck_assert_double_eq (tm_sample (text, "cryptoserver_jobs_total{board=\"b\",mechanism=\"CKM_0x80000000\",result=\"ok\"}"), 1);
    ck_assert_double_eq (tm_sample (text, "cryptoserver_inflight_jobs{client=\"(other)\",tenant=\"(other)\"}"), 2);
    ck_assert_double_eq (tm_sample (text, "cryptoserver_inflight_jobs{client=\"client3071\",tenant=\"t\"}"), 1);
    ck_assert_double_eq (tm_sample (text, "cryptoserver_inflight_jobs{client=\"late\",tenant=\"t\"}"), -1);
    free (text);
    metrics_destroy (&metrics);
}
END_TEST

/* ------------------------------------------------------------------ */
/*  URLs, config, endpoint                                             */

static const struct {
    const char *url;
    int rc;
    bool loopback;
    unsigned port;
    const char *path;
} s_urls [] = {
    { "http://127.0.0.1:9464/metrics", 0, true, 9464, "/metrics" },
    { "http://127.0.0.1:0/metrics", 0, true, 0, "/metrics" },
    { "http://127.0.0.1:*/m", 0, true, 0, "/m" },
    { "http://127.1.2.3", 0, true, 9464, "/metrics" },
    { "http://localhost:80/", 0, true, 80, "/" },
    { "http://[::1]:9000/metrics", 0, true, 9000, "/metrics" },
    { "http://[::ffff:127.0.0.1]:1/x", 0, true, 1, "/x" },
    { "http://0.0.0.0:9464/metrics", 0, false, 9464, "/metrics" },
    { "http://192.168.1.10:9464/metrics", 0, false, 9464, "/metrics" },
    { "http://[::]:9464/metrics", 0, false, 9464, "/metrics" },
    { "https://127.0.0.1:9464/metrics", -1, false, 0, NULL },
    { "http://example.com:9464/metrics", -1, false, 0, NULL },
    { "http://127.0.0.1:65536/metrics", -1, false, 0, NULL },
    { "http://127.0.0.1:/metrics", -1, false, 0, NULL },
    { "http://127.0.0.1:9x/metrics", -1, false, 0, NULL },
    { "http://127.0.0.1:9464/met rics", -1, false, 0, NULL },
    { "http://127.0.0.1:9464/metrics?x", -1, false, 0, NULL },
    { "http://[::1/metrics", -1, false, 0, NULL },
    { "http://:9464/metrics", -1, false, 0, NULL },
};

START_TEST (test_url_parse)
{
    metrics_http_url_t url;
    char why [512] = "";
    int rc = metrics_http_url_parse (s_urls [_i].url, &url, why, sizeof why);
    ck_assert_msg (rc == s_urls [_i].rc, "%s: rc %d (%s)", s_urls [_i].url, rc, why);
    if (rc) {
        ck_assert_msg (*why, "%s: no reason", s_urls [_i].url);
        return;
    }
    ck_assert_msg (url.loopback == s_urls [_i].loopback, "%s: loopback", s_urls [_i].url);
    unsigned port = url.addr.ss_family == AF_INET ? ntohs (((struct sockaddr_in *) &url.addr)->sin_port)
                                                  : ntohs (((struct sockaddr_in6 *) &url.addr)->sin6_port);
    ck_assert_uint_eq (port, s_urls [_i].port);
    ck_assert_str_eq (url.path, s_urls [_i].path);
}
END_TEST

static char *s_dir;

static void
s_dir_setup (void)
{
    s_dir = th_tmpdir ();
}

static void
s_dir_teardown (void)
{
    th_tmpdir_remove (&s_dir);
}

/*  Loads a plaintext broker.conf with broker keys `extra`.  */
static broker_config_t *
s_config (const char *extra, char **error_p)
{
    char *text = NULL, path [4096];
    ck_assert_int_ge (asprintf (&text, "broker\n%s    curve\n        enabled = false\n"
                                "drivers\n    b\n        type = sim\n", extra), 0);
    th_write (s_dir, "broker.conf", text);
    free (text);
    snprintf (path, sizeof path, "%s/broker.conf", s_dir);
    *error_p = NULL;
    return broker_config_load (path, error_p);
}

/*  broker/metrics: off by default; a loopback URL; any other address only
 *  with metrics-public = true (a config error otherwise: exit 2).  */
START_TEST (test_config)
{
    char *error = NULL, expect [4200];
    broker_config_t *config = s_config ("", &error);
    ck_assert_msg (config != NULL, "%s", error ? error : "");
    ck_assert_ptr_null (config->metrics_url);
    ck_assert (!config->metrics_public);
    broker_config_destroy (&config);
    config = s_config ("    metrics = http://127.0.0.1:0/metrics\n    metrics-file = m.url\n", &error);
    ck_assert_msg (config != NULL, "%s", error ? error : "");
    ck_assert_str_eq (config->metrics_url, "http://127.0.0.1:0/metrics");
    snprintf (expect, sizeof expect, "%s/m.url", s_dir);
    ck_assert_str_eq (config->metrics_file, expect);
    broker_config_destroy (&config);
    ck_assert_ptr_null (s_config ("    metrics = http://0.0.0.0:9464/metrics\n", &error));
    ck_assert_msg (strstr (error, "broker/metrics: http://0.0.0.0:9464/metrics is not a loopback address")
                   && strstr (error, "broker/metrics-public = true"), "%s", error);
    free (error);
    ck_assert_ptr_null (s_config ("    metrics = http://10.1.2.3:9464/metrics\n"
                                  "    metrics-public = false\n", &error));
    ck_assert_ptr_nonnull (strstr (error, "is not a loopback address"));
    free (error);
    config = s_config ("    metrics = http://10.1.2.3:9464/metrics\n    metrics-public = true\n", &error);
    ck_assert_msg (config != NULL, "%s", error ? error : "");
    ck_assert (config->metrics_public);
    ck_assert_ptr_null (config->metrics_token);
    broker_config_destroy (&config);
    /*  broker/metrics-token-file: private, 16..256 printable characters.  */
    th_write (s_dir, "token", "0123456789abcdef0123456789abcdef\n");
    config = s_config ("    metrics = http://127.0.0.1:0/metrics\n    metrics-token-file = token\n", &error);
    ck_assert_msg (config != NULL, "%s", error ? error : "");
    ck_assert_str_eq (config->metrics_token, "0123456789abcdef0123456789abcdef");
    broker_config_destroy (&config);
    snprintf (expect, sizeof expect, "%s/token", s_dir);
    ck_assert_int_eq (chmod (expect, 0644), 0);
    ck_assert_ptr_null (s_config ("    metrics-token-file = token\n", &error));
    ck_assert_msg (strstr (error, "broker/metrics-token-file") && strstr (error, "chmod 600"), "%s", error);
    free (error);
    th_write (s_dir, "short", "too short\n");
    ck_assert_ptr_null (s_config ("    metrics-token-file = short\n", &error));
    ck_assert_msg (strstr (error, "16..256 printable characters without spaces"), "%s", error);
    free (error);
    ck_assert_ptr_null (s_config ("    metrics-token-file = absent\n", &error));
    ck_assert_ptr_nonnull (strstr (error, "broker/metrics-token-file"));
    free (error);
    config = s_config ("", &error);
    ck_assert_msg (config != NULL, "%s", error ? error : "");
    broker_config_destroy (&config);
    ck_assert_ptr_null (s_config ("    metrics = http://broker.example:9464/metrics\n", &error));
    ck_assert_ptr_nonnull (strstr (error, "broker/metrics: host \"broker.example\" must be an IP address"));
    free (error);
    ck_assert_ptr_null (s_config ("    metrics = http://127.0.0.1/\n    metrics-public = sometimes\n", &error));
    ck_assert_ptr_nonnull (strstr (error, "broker/metrics-public: must be true or false"));
    free (error);
}
END_TEST

/*  The endpoint: a free port, the rendered text on GET, headers only on
 *  HEAD, 404 elsewhere, 405 for other methods; a non-loopback address is
 *  refused without `public`; a port in use fails the start.  */
START_TEST (test_http)
{
    const char *names [] = { "board0" };
    metrics_t *metrics = metrics_new (names, 1);
    metrics_job (metrics, 0, CKM_ECDSA, METRICS_OK);
    metrics_client_t *alice = metrics_client (metrics, "alice", "acme");
    metrics_inflight_add (alice, 3);
    metrics_http_t *http = metrics_http_new (metrics, "http://127.0.0.1:*/scrape/me", false,
                                             "0123456789abcdef0123456789abcdef");
    ck_assert_ptr_nonnull (http);
    const char *url = metrics_http_url (http);
    ck_assert_msg (strncmp (url, "http://127.0.0.1:", 17) == 0 && strstr (url, "/scrape/me"), "%s", url);
    unsigned port = tm_url_port (url);
    ck_assert_uint_gt (port, 0);
    int status = 0;
    char *response = tm_http (port, "GET", "/scrape/me", &status);
    ck_assert_int_eq (status, 200);
    ck_assert_ptr_nonnull (strcasestr (response, "Content-Type: text/plain; version=0.0.4"));
    ck_assert_double_eq (tm_sample (tm_body (response),
                                   "cryptoserver_jobs_total{board=\"board0\",mechanism=\"CKM_ECDSA\",result=\"ok\"}"), 1);
    ck_assert_double_ge (tm_sample (tm_body (response), "process_cpu_seconds_total"), 0);
    /*  No token: no client or tenant names, the sum only.  */
    ck_assert_ptr_null (strstr (tm_body (response), "alice"));
    ck_assert_ptr_null (strstr (tm_body (response), "acme"));
    ck_assert_double_eq (tm_sample (tm_body (response), "cryptoserver_inflight_jobs{client=\"(all)\",tenant=\"(all)\"}"), 3);
    free (response);
    /*  The bearer token (RFC 6750): the names.  */
    response = tm_http_header (port, "GET", "/scrape/me",
                               "Authorization: Bearer 0123456789abcdef0123456789abcdef", &status);
    ck_assert_int_eq (status, 200);
    ck_assert_double_eq (tm_sample (tm_body (response), "cryptoserver_inflight_jobs{client=\"alice\",tenant=\"acme\"}"), 3);
    ck_assert_double_eq (tm_sample (tm_body (response), "cryptoserver_inflight_jobs{client=\"(all)\",tenant=\"(all)\"}"), -1);
    free (response);
    /*  A wrong token (one character off, a prefix, another scheme): 401, no metrics.  */
    const char *wrong [] = { "Authorization: Bearer 0123456789abcdef0123456789abcdeF",
                             "Authorization: Bearer 0123456789abcdef",
                             "Authorization: Basic MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=" };
    for (size_t i = 0; i < sizeof wrong / sizeof wrong [0]; i++) {
        response = tm_http_header (port, "GET", "/scrape/me", wrong [i], &status);
        ck_assert_int_eq (status, 401);
        ck_assert_ptr_null (strstr (tm_body (response), "cryptoserver_"));
        free (response);
    }
    response = tm_http (port, "HEAD", "/scrape/me", &status);
    ck_assert_int_eq (status, 200);
    ck_assert_str_eq (tm_body (response), "");
    free (response);
    response = tm_http (port, "GET", "/metrics", &status);
    ck_assert_int_eq (status, 404);
    free (response);
    response = tm_http (port, "POST", "/scrape/me", &status);
    ck_assert_int_eq (status, 405);
    ck_assert_ptr_nonnull (strcasestr (response, "Allow: GET, HEAD"));
    free (response);
    char busy [128];
    snprintf (busy, sizeof busy, "http://127.0.0.1:%u/metrics", port);
    ck_assert_ptr_null (metrics_http_new (metrics, busy, false, NULL));          /* port in use */
    ck_assert_ptr_null (metrics_http_new (metrics, "http://0.0.0.0:0/metrics", false, NULL));
    metrics_http_destroy (&http);
    ck_assert_ptr_null (http);
    metrics_http_destroy (&http);
    metrics_destroy (&metrics);
}
END_TEST

/* ------------------------------------------------------------------ */
/*  A whole broker                                                     */

/*  Two sim boards holding one key, metrics on a free port: a batch of
 *  signatures, a request whose deadline passes while most of its jobs
 *  wait, and a decryption that fails on the board.  The scraped counters
 *  agree with the frontend's STATS per board, every job is counted once,
 *  each histogram has as many observations as its board ran jobs, and no
 *  job stays in flight.  */
START_TEST (test_server)
{
    EVP_PKEY *key = th_key_pem (s_dir, "key.pem", 2048);
    th_certs (s_dir, "alice", "demo");
    th_keystore (s_dir);
    th_write (s_dir, "metrics.token", "0123456789abcdef0123456789abcdef\n");
    tb_conf_write (s_dir, "    metrics = http://127.0.0.1:0/metrics\n    metrics-token-file = metrics.token\n",
        "drivers\n"
        "    sim0\n        type = sim\n        key-file = key.pem\n        key-id = 01\n"
        "        latency-ms = 2\n        threads = 2\n        tenant = demo\n"
        "    sim1\n        type = sim\n        key-file = key.pem\n        key-id = 01\n"
        "        latency-ms = 2\n        threads = 2\n        tenant = demo\n");
    broker_config_t *config = NULL;
    server_t *server = tb_start (s_dir, &config);
    ck_assert_ptr_nonnull (server_metrics_url (server));
    unsigned port = tm_url_port (server_metrics_url (server));
    zsock_t *client = th_dealer (s_dir, "alice", server_endpoint (server));
    size_t ticket_len = 0;
    uint8_t *ticket = th_login_ok (client, "1234", &ticket_len);
    static const uint8_t key_id [] = "board:01";
    enum { N = 30, LATE = 40 };
    static uint8_t di [N][51], zero [256];
    Cs__Request *req = th_request (N, 1);
    req->ticket = (ProtobufCBinaryData) { ticket_len, ticket };
    for (size_t i = 0; i < N; i++) {
        char msg [32];
        snprintf (msg, sizeof msg, "message %zu", i);
        th_digest_info (msg, di [i]);
        th_job_crypto (req->jobs [i], true, key_id, 8, CKM_RSA_PKCS, di [i], 51);
    }
    Cs__Reply *reply = th_call (client, req);
    for (size_t i = 0; i < N; i++)
        ck_assert_uint_eq (reply->results [i]->rv, CKR_OK);
    cs__reply__free_unpacked (reply, NULL);
    th_request_free (req);
    /*  LATE jobs of 2 ms on 4 workers with a 1 ms deadline: the first ones
        run, most expire in the queue (each is still counted once).  */
    req = th_request (LATE, 2);
    req->ticket = (ProtobufCBinaryData) { ticket_len, ticket };
    req->deadline_ms = 1;
    for (size_t i = 0; i < LATE; i++)
        th_job_crypto (req->jobs [i], true, key_id, 8, CKM_RSA_PKCS, di [0], 51);
    reply = th_call (client, req);
    cs__reply__free_unpacked (reply, NULL);
    th_request_free (req);
    req = th_request (1, 3);
    req->ticket = (ProtobufCBinaryData) { ticket_len, ticket };
    th_job_crypto (req->jobs [0], false, key_id, 8, CKM_RSA_PKCS, zero, sizeof zero);
    reply = th_call (client, req);
    ck_assert_uint_ne (reply->results [0]->rv, CKR_OK);
    cs__reply__free_unpacked (reply, NULL);
    th_request_free (req);

    int status = 0;
    char *response = tm_http_header (port, "GET", "/metrics",
                                     "Authorization: Bearer 0123456789abcdef0123456789abcdef", &status);
    ck_assert_int_eq (status, 200);
    const char *text = tm_body (response);
    double ok = 0, expired = 0, errors = 0;
    for (int b = 0; b < 2; b++) {
        char series [256];
        const char *board = b ? "sim1" : "sim0";
        double sum [METRICS_RESULTS] = { 0 };
        const char *results [] = { "ok", "error", "expired" };
        for (int r = 0; r < METRICS_RESULTS; r++) {
            snprintf (series, sizeof series, "cryptoserver_jobs_total{board=\"%s\",mechanism=\"CKM_RSA_PKCS\","
                      "result=\"%s\"}", board, results [r]);
            sum [r] = tm_sample (text, series) > 0 ? tm_sample (text, series) : 0;
        }
        ok += sum [0];
        errors += sum [1];
        expired += sum [2];
        uint64_t stats_errors = 0, stats_jobs = th_board_jobs (server_frontend (server), board, &stats_errors);
        ck_assert_double_eq (sum [0] + sum [1], (double) stats_jobs);          /* run by its workers */
        ck_assert_double_eq (sum [1], (double) stats_errors);
        for (int s = 0; s < METRICS_STAGES; s++) {
            const char *stage = s == 0 ? "queue" : s == 1 ? "service" : "total";
            snprintf (series, sizeof series, "cryptoserver_job_seconds_count{board=\"%s\",stage=\"%s\"}",
                      board, stage);
            ck_assert_msg (tm_sample (text, series) == (double) stats_jobs, "%s: %g, %" PRIu64 " jobs",
                           series, tm_sample (text, series), stats_jobs);
            snprintf (series, sizeof series, "cryptoserver_job_seconds_bucket{board=\"%s\",stage=\"%s\","
                      "le=\"+Inf\"}", board, stage);
            ck_assert_double_eq (tm_sample (text, series), (double) stats_jobs);
        }
    }
    ck_assert_double_ge (ok, N);
    ck_assert_double_ge (expired, 1);
    ck_assert_double_eq (ok + expired, N + LATE);
    ck_assert_double_eq (errors, 1);
    ck_assert_double_eq (tm_sample (text, "cryptoserver_inflight_jobs{client=\"alice\",tenant=\"demo\"}"), 0);
    ck_assert_double_eq (tm_sample (text, "cryptoserver_queue_depth{queue=\"client\"}"), 0);
    free (response);
    free (ticket);
    zsock_destroy (&client);
    tb_stop (&server, &config);
    EVP_PKEY_free (key);
}
END_TEST

int
main (void)
{
    Suite *suite = suite_create ("metrics");
    TCase *tc = tcase_create ("registry");
    tcase_add_test (tc, test_render_exact);
    tcase_add_test (tc, test_null_registry);
    tcase_add_test (tc, test_process_cpu);
    tcase_add_test (tc, test_threads);
    tcase_add_test (tc, test_bounded_labels);
    tcase_add_loop_test (tc, test_url_parse, 0, sizeof s_urls / sizeof s_urls [0]);
    tcase_add_test (tc, test_http);
    suite_add_tcase (suite, tc);
    TCase *files = tcase_create ("config and broker");
    tcase_add_checked_fixture (files, s_dir_setup, s_dir_teardown);
    tcase_add_test (files, test_config);
    tcase_add_test (files, test_server);
    suite_add_tcase (suite, files);
    return tr_run (suite);
}
