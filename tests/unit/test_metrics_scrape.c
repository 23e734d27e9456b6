/*  test_metrics_scrape.c — the tools' reader of a broker's metrics
 *  (tools/cs_metrics_scrape.c): sample lines, labels with escapes, exact
 *  series, and a fetch from a port where nothing listens.  */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <unistd.h>
#include "cs_metrics_scrape.h"
#include "test_run.h"

static const char *s_text =
    "# HELP cryptoserver_jobs_total Jobs.\n"
    "# TYPE cryptoserver_jobs_total counter\n"
    "cryptoserver_jobs_total{board=\"hsm \\\"a\\\"\\\\1\",mechanism=\"CKM_ECDSA\",result=\"ok\"} 12\n"
    "\n"
    "cryptoserver_queue_depth{queue=\"client\"} 3\n"
    "cryptoserver_queue_depth{queue=\"background\"} 0\n"
    "broken{board=\"x\" 1\n"
    "process_cpu_seconds_total 1.250000\n"
    "cryptoserver_inflight_jobs{client=\"web,1\",tenant=\"shop\"} 2";

START_TEST (test_scrape_samples)
{
    const char *cursor = s_text;
    cs_metrics_sample_t sample;
    char value [64];
    ck_assert (cs_metrics_next (&cursor, &sample));
    ck_assert_str_eq (sample.name, "cryptoserver_jobs_total");
    ck_assert (sample.value == 12);
    ck_assert (cs_metrics_label (sample.labels, "board", value, sizeof value));
    ck_assert_str_eq (value, "hsm \"a\"\\1");
    ck_assert (cs_metrics_label (sample.labels, "result", value, sizeof value));
    ck_assert_str_eq (value, "ok");
    ck_assert (!cs_metrics_label (sample.labels, "stage", value, sizeof value));
    ck_assert (cs_metrics_label (sample.labels, "board", value, 4));     /* truncated */
    ck_assert_str_eq (value, "hsm");
    ck_assert (cs_metrics_next (&cursor, &sample));
    ck_assert_str_eq (sample.labels, "queue=\"client\"");
    ck_assert (sample.value == 3);
    ck_assert (cs_metrics_next (&cursor, &sample));
    ck_assert (sample.value == 0);
    ck_assert (cs_metrics_next (&cursor, &sample));     /* the broken line is skipped */
    ck_assert_str_eq (sample.name, "process_cpu_seconds_total");
    ck_assert_str_eq (sample.labels, "");
    ck_assert (sample.value == 1.25);
    ck_assert (cs_metrics_next (&cursor, &sample));     /* last line, no newline */
    ck_assert (cs_metrics_label (sample.labels, "client", value, sizeof value));
    ck_assert_str_eq (value, "web,1");
    ck_assert (cs_metrics_label (sample.labels, "tenant", value, sizeof value));
    ck_assert_str_eq (value, "shop");
    ck_assert (!cs_metrics_next (&cursor, &sample));
}
END_TEST

START_TEST (test_scrape_series)
{
    double value = -1;
    ck_assert (cs_metrics_value (s_text, "cryptoserver_queue_depth{queue=\"client\"}", &value));
    ck_assert (value == 3);
    ck_assert (cs_metrics_value (s_text, "process_cpu_seconds_total", &value));
    ck_assert (value == 1.25);
    ck_assert (!cs_metrics_value (s_text, "cryptoserver_queue_depth", &value));   /* exact series only */
    ck_assert (!cs_metrics_value (s_text, "process_cpu_seconds", &value));
}
END_TEST

START_TEST (test_scrape_unreachable)
{
    /*  A port bound but not listening: the connection is refused.  */
    int fd = socket (AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in addr = { .sin_family = AF_INET, .sin_addr.s_addr = htonl (INADDR_LOOPBACK) };
    socklen_t len = sizeof addr;
    ck_assert (bind (fd, (struct sockaddr *) &addr, sizeof addr) == 0);
    ck_assert (getsockname (fd, (struct sockaddr *) &addr, &len) == 0);
    char url [64], err [256] = "";
    snprintf (url, sizeof url, "http://127.0.0.1:%d/metrics", ntohs (addr.sin_port));
    ck_assert_ptr_null (cs_metrics_fetch (url, NULL, err, sizeof err));
    ck_assert_ptr_nonnull (strstr (err, "Connection refused"));
    close (fd);
    ck_assert_ptr_null (cs_metrics_fetch ("https://127.0.0.1/metrics", NULL, err, sizeof err));
    ck_assert_ptr_nonnull (strstr (err, "not http://"));
}
END_TEST

int
main (void)
{
    Suite *suite = suite_create ("metrics_scrape");
    TCase *tc = tcase_create ("scrape");
    tcase_add_test (tc, test_scrape_samples);
    tcase_add_test (tc, test_scrape_series);
    tcase_add_test (tc, test_scrape_unreachable);
    suite_add_tcase (suite, tc);
    return tr_run (suite);
}
