/*  test_broker_lane.c — the fast lane's admission rule
 *  (scheduler_lane_fits, scheduler.h; broker/frontend/fast_lane.c) and the reactor
 *  share of each tenant (fair_queue_lane_charge / _spent, fair_queue.h):
 *  issue 19 item 6, "no tenant gets the reactor to itself".  Without
 *  threads, sockets or clocks: service times and times are given.
 */
#include <check.h>
#include <czmq.h>
#include "fair_queue.h"
#include "scheduler.h"
#include "test_run.h"

#define S_LIMIT_NS 100000               /* broker/fast-lane-us = 100 (its default) */
#define S_NOW_NS (INT64_C (1000) * FAIR_QUEUE_LANE_PERIOD_NS)  /* the start of a period */

/*  One board (an openssl board of the lane) with one worker.  */
static scheduler_t *
s_board (void)
{
    scheduler_t *s = scheduler_new ();
    ck_assert_ptr_nonnull (s);
    ck_assert_int_eq (scheduler_board_add (s, "cpu"), 0);
    ck_assert_int_eq (scheduler_worker_add (s, 0), 0);
    return s;
}

/*  A symmetric session-key item of tenant over `bytes` of data.  */
static work_item_t
s_sym (CK_MECHANISM_TYPE mechanism, size_t bytes, const char *tenant)
{
    static const unsigned char data [64 * 1024];
    work_item_t item = { .kind = WORK_SYM, .tenant = tenant, .boards = 1, .submitted_ns = S_NOW_NS };
    item.sym = (cs_sym_t) { .mechanism = mechanism, .in = data, .in_len = bytes };
    return item;
}

/*  Feeds board 0's estimate of item's class with `n` samples of ns each.  */
static void
s_measured (scheduler_t *s, work_item_t item, int64_t ns, int n)
{
    item.board = 0;
    item.rv = CKR_OK;
    item.given_ns = S_NOW_NS - ns;
    for (int i = 0; i < n; i++)
        scheduler_service (s, &item, ns);
}

/*  The cost of a symmetric job is per mechanism and data length: AES-ECB
 *  over 16 bytes measured at 2 us says nothing of AES-CBC over 64 KiB,
 *  which the lane refuses (over SCHEDULER_LANE_MAX_BYTES) even when its
 *  class was measured fast; a class not measured is not known, so not on
 *  the lane either.  Before issue 19 every symmetric job was one class:
 *  a stream of cheap ECB jobs let 64 KiB CBC jobs run on the reactor.  */
START_TEST (test_lane_cost_per_size_class)
{
    scheduler_t *s = s_board ();
    work_item_t ecb = s_sym (CKM_AES_ECB, 16, "flood"), cbc = s_sym (CKM_AES_CBC, 64 * 1024, "flood");
    ck_assert (!scheduler_lane_fits (s, 0, &ecb, S_LIMIT_NS, S_NOW_NS));     /* not measured yet */
    s_measured (s, ecb, 2000, 8);
    ck_assert (scheduler_lane_fits (s, 0, &ecb, S_LIMIT_NS, S_NOW_NS));
    ck_assert (!scheduler_lane_fits (s, 0, &cbc, S_LIMIT_NS, S_NOW_NS));
    ck_assert_double_eq (scheduler_expected_ns (s, 0, &cbc), 0);             /* its own class */
    //  Measured fast (a fast board), 64 KiB is still not a lane job.
    s_measured (s, cbc, 50000, 8);
    ck_assert (!scheduler_lane_fits (s, 0, &cbc, S_LIMIT_NS, S_NOW_NS));
    //  The size classes: 256 B, 1 KiB, 4 KiB, ... ; 16 B ECB and 200 B ECB
    //  share one, 4 KiB + 1 B does not fit the lane.
    work_item_t small = s_sym (CKM_AES_ECB, 200, "flood"), page = s_sym (CKM_AES_ECB, 4096, "flood");
    work_item_t over = s_sym (CKM_AES_ECB, 4097, "flood");
    ck_assert_uint_eq (scheduler_size_class (&ecb), 0);
    ck_assert_uint_eq (scheduler_size_class (&small), 0);
    ck_assert_uint_eq (scheduler_size_class (&page), 2);
    ck_assert_uint_eq (scheduler_size_class (&cbc), 4);
    ck_assert (scheduler_lane_fits (s, 0, &small, S_LIMIT_NS, S_NOW_NS));
    ck_assert (!scheduler_lane_fits (s, 0, &page, S_LIMIT_NS, S_NOW_NS));   /* not measured */
    s_measured (s, page, 8000, 8);
    ck_assert (scheduler_lane_fits (s, 0, &page, S_LIMIT_NS, S_NOW_NS));
    s_measured (s, over, 8000, 8);
    ck_assert (!scheduler_lane_fits (s, 0, &over, S_LIMIT_NS, S_NOW_NS));
    //  Another mechanism over the same length is another class.
    work_item_t gcm = s_sym (CKM_AES_GCM, 16, "flood");
    ck_assert (!scheduler_lane_fits (s, 0, &gcm, S_LIMIT_NS, S_NOW_NS));
    //  A class measured over the limit stays off the lane.
    work_item_t cbc4k = s_sym (CKM_AES_CBC, 4096, "flood");
    s_measured (s, cbc4k, 3 * S_LIMIT_NS, 8);
    ck_assert (!scheduler_lane_fits (s, 0, &cbc4k, S_LIMIT_NS, S_NOW_NS));
    scheduler_destroy (&s);
}
END_TEST

/*  Time on the reactor counts against the tenant's share: after a tenant
 *  spent its share this period, its next cheap job goes to the workers,
 *  while another tenant's cheap job still runs on the lane; the next
 *  period starts every tenant afresh.  A tenant's weight scales its share,
 *  up to half the period.  */
START_TEST (test_lane_tenant_share)
{
    scheduler_t *s = s_board ();
    work_item_t flood = s_sym (CKM_AES_ECB, 16, "flood"), quiet = s_sym (CKM_AES_ECB, 16, "quiet");
    s_measured (s, flood, 2000, 8);
    int64_t share = FAIR_QUEUE_LANE_PERIOD_NS / FAIR_QUEUE_LANE_SHARE;
    ck_assert (scheduler_lane_fits (s, 0, &flood, S_LIMIT_NS, S_NOW_NS));
    scheduler_lane_charge (s, "flood", share - 1, S_NOW_NS + 10);
    ck_assert (scheduler_lane_fits (s, 0, &flood, S_LIMIT_NS, S_NOW_NS + 20));
    scheduler_lane_charge (s, "flood", 1, S_NOW_NS + 30);
    ck_assert (!scheduler_lane_fits (s, 0, &flood, S_LIMIT_NS, S_NOW_NS + 40));
    ck_assert (scheduler_lane_fits (s, 0, &quiet, S_LIMIT_NS, S_NOW_NS + 40));
    ck_assert (!scheduler_lane_fits (s, 0, &flood, S_LIMIT_NS, S_NOW_NS + FAIR_QUEUE_LANE_PERIOD_NS - 1));
    ck_assert (scheduler_lane_fits (s, 0, &flood, S_LIMIT_NS, S_NOW_NS + FAIR_QUEUE_LANE_PERIOD_NS));
    //  Weights (broker/tenant-weight/TENANT) scale the share, capped at
    //  half the period.
    ck_assert_int_eq (scheduler_tenant_weight (s, "quiet", 3), 0);
    scheduler_lane_charge (s, "quiet", 3 * share - 1, S_NOW_NS + 50);
    ck_assert (scheduler_lane_fits (s, 0, &quiet, S_LIMIT_NS, S_NOW_NS + 60));
    scheduler_lane_charge (s, "quiet", 1, S_NOW_NS + 70);
    ck_assert (!scheduler_lane_fits (s, 0, &quiet, S_LIMIT_NS, S_NOW_NS + 80));
    fair_queue_t *q = fair_queue_new ();
    ck_assert_int_eq (fair_queue_weight_set (q, "big", FAIR_QUEUE_MAX_WEIGHT), 0);
    fair_queue_lane_charge (q, "big", FAIR_QUEUE_LANE_PERIOD_NS / 2, S_NOW_NS);
    ck_assert (fair_queue_lane_spent (q, "big", S_NOW_NS + 1));
    ck_assert (!fair_queue_lane_spent (q, "never-seen", S_NOW_NS + 1));
    fair_queue_destroy (&q);
    scheduler_destroy (&s);
}
END_TEST

/*  A broker serving one tenant caps no one (scheduler_lane_share false):
 *  past its share the tenant's cheap jobs still take the lane; turned on
 *  again, the charge made meanwhile counts.  */
START_TEST (test_lane_one_tenant)
{
    scheduler_t *s = s_board ();
    work_item_t only = s_sym (CKM_AES_ECB, 16, "only");
    s_measured (s, only, 2000, 8);
    scheduler_lane_share (s, false);
    scheduler_lane_charge (s, "only", FAIR_QUEUE_LANE_PERIOD_NS, S_NOW_NS + 10);
    ck_assert (scheduler_lane_fits (s, 0, &only, S_LIMIT_NS, S_NOW_NS + 20));
    scheduler_lane_share (s, true);
    ck_assert (!scheduler_lane_fits (s, 0, &only, S_LIMIT_NS, S_NOW_NS + 30));
    scheduler_destroy (&s);
}
END_TEST

int
main (void)
{
    Suite *suite = suite_create ("broker_lane");
    TCase *tc = tcase_create ("lane");
    tcase_add_test (tc, test_lane_cost_per_size_class);
    tcase_add_test (tc, test_lane_tenant_share);
    tcase_add_test (tc, test_lane_one_tenant);
    suite_add_tcase (suite, tc);
    return tr_run (suite);
}
