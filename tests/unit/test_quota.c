/*  test_quota.c — per-tenant quotas (broker/ops/quota.h), without a broker:
 *    - the token bucket admits `burst` at once, then `rate` per second,
 *      tells each caller the exact wait for its reserved token (first come,
 *      first served), gives back a refund, never exceeds its burst after
 *      an idle time, and adds nothing when the clock goes back;
 *    - at 50/s over 10 simulated seconds, 8 callers that go when told get
 *      50 per second (plus the first burst);
 *    - limits are read from tenants/NAME/max-* of a broker.conf, absent
 *      ones are 0 (none), a bad value is named.
 */
#include <check.h>
#include <czmq.h>
#include "quota.h"
#include "test_run.h"

START_TEST (test_bucket_basics)
{
    quota_bucket_t b;
    quota_bucket_init (&b, 10, 5, 1000);
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq (quota_bucket_reserve (&b, 1000, 1), 0);
    ck_assert_int_eq (quota_bucket_reserve (&b, 1000, 1), 100);    /* 10/s: one token per 100 ms */
    ck_assert_int_eq (quota_bucket_reserve (&b, 1000, 1), 200);    /* behind the one that waits */
    quota_bucket_refund (&b, 1);                                    /* that one was refused */
    ck_assert_int_eq (quota_bucket_reserve (&b, 1050, 1), 150);
    ck_assert_int_eq (quota_bucket_reserve (&b, 900, 1), 250);     /* the clock went back: nothing added */
    for (int i = 0; i < 5; i++)                                     /* idle 60 s: full, not 600 tokens */
        ck_assert_int_eq (quota_bucket_reserve (&b, 61100, 1), 0);
    ck_assert_int_gt (quota_bucket_reserve (&b, 61100, 1), 0);
    quota_bucket_init (&b, 50, 0, 0);                               /* default burst: 50 / 10 */
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq (quota_bucket_reserve (&b, 0, 1), 0);
    ck_assert_int_eq (quota_bucket_reserve (&b, 0, 1), 20);
    quota_bucket_init (&b, 5, 0, 0);                                /* at least 1 */
    ck_assert_int_eq (quota_bucket_reserve (&b, 0, 1), 0);
    ck_assert_int_eq (quota_bucket_reserve (&b, 0, 3), 600);       /* a batch of 3 jobs */
}
END_TEST

START_TEST (test_bucket_rate)
{
    quota_bucket_t b;
    int64_t next [8] = { 0 };
    bool reserved [8] = { false };
    long done = 0;
    quota_bucket_init (&b, 50, 0, 0);
    //  8 callers: each reserves a token, runs when told (next), and reserves
    //  again at once; 10 simulated seconds in 1 ms steps.
    for (int64_t now = 0; now < 10000; now++)
        for (int c = 0; c < 8; c++)
            if (now >= next [c]) {
                done += reserved [c];
                next [c] = now + quota_bucket_reserve (&b, now, 1);
                reserved [c] = true;
            }
    ck_assert_int_ge (done, 50 * 10 - 8);
    ck_assert_int_le (done, 50 * 10 + 5 + 8);               /* the first burst; those in progress */
}
END_TEST

START_TEST (test_limits_read)
{
    zconfig_t *root = zconfig_str_load ("tenants\n    alpha\n        max-ops-per-s = 50\n"
                                        "        max-keys = 2\n    beta\n        max-inflight = x\n");
    ck_assert (root);
    quota_limits_t limits;
    const char *why = NULL;
    ck_assert_int_eq (quota_limits_read (root, "alpha", &limits, &why), 0);
    ck_assert_int_eq (limits.max_ops_per_s, 50);
    ck_assert_int_eq (limits.max_keys, 2);
    ck_assert_int_eq (limits.max_inflight, 0);
    ck_assert_int_eq (limits.max_objects, 0);
    ck_assert_int_eq (quota_limits_read (root, "gamma", &limits, &why), 0);
    ck_assert_int_eq (limits.max_ops_per_s + limits.max_keys, 0);
    ck_assert_int_eq (quota_limits_read (root, "beta", &limits, &why), -1);
    ck_assert_str_eq (why, "max-inflight");
    zconfig_destroy (&root);
}
END_TEST

int
main (void)
{
    Suite *suite = suite_create ("quota");
    TCase *tc = tcase_create ("quota");
    tcase_add_test (tc, test_bucket_basics);
    tcase_add_test (tc, test_bucket_rate);
    tcase_add_test (tc, test_limits_read);
    suite_add_tcase (suite, tc);
    return tr_run (suite);
}
