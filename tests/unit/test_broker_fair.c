/*  test_broker_fair.c — fair shares (issue #9): deficit round robin across
 *  tenants (broker/sched/fair_queue.h, broker/sched/scheduler.h), speed-aware placement
 *  (scheduler_service, scheduler_expected_ns), and the per-client caps of
 *  broker/sched/client_load.h (jobs in flight, backlog of deferred requests), and
 *  the slow pool's round robin of PIN checks across tenants
 *  (broker/keys/slow_pool.h, one pool thread).
 */
#include "test_broker_helpers.h"
#include "client_load.h"
#include "fair_queue.h"
#include "scheduler.h"
#include "slow_pool.h"
#include "test_run.h"

static const unsigned char s_shared [] = { 0x01 };     /* on both boards */
static const unsigned char s_only1 [] = { 0x02 };      /* on board 1 only */

/*  One board "b0" with one worker (id 0), busy until it is ready.  */
static scheduler_t *
s_one_busy_worker (void)
{
    scheduler_t *s = scheduler_new ();
    ck_assert_int_eq (scheduler_board_add (s, "b0"), 0);
    ck_assert_int_eq (scheduler_key_add (s, 0, s_shared, 1), 0);
    ck_assert_int_eq (scheduler_worker_add (s, 0), 0);
    return s;
}

static work_item_t
s_item (const char *tenant, size_t index)
{
    return (work_item_t) { .key_id = s_shared, .key_id_len = 1, .index = index, .tenant = tenant };
}

/*  The tenant of each item the worker takes, as a string ("AAB...").  */
static void
s_drain_order (scheduler_t *s, size_t worker, char *order, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        work_item_t *item = scheduler_worker_ready (s, worker);
        ck_assert_ptr_nonnull (item);
        order [i] = item->tenant [0];
    }
    order [n] = 0;
    ck_assert_ptr_null (scheduler_worker_ready (s, worker));
}

/*  A flood of one tenant queued first; another tenant's single item is
 *  taken next (a flow that had nothing waiting goes first), not after the
 *  flood (FIFO).  */
START_TEST (test_drr_flood_does_not_delay_other_tenant)
{
    scheduler_t *s = s_one_busy_worker ();
    work_item_t flood [32], single = s_item ("victim", 99);
    size_t worker;
    for (size_t i = 0; i < 32; i++) {
        flood [i] = s_item ("flooder", i);
        ck_assert_int_eq (scheduler_submit (s, &flood [i], &worker), SCHEDULER_QUEUED);
    }
    ck_assert_int_eq (scheduler_submit (s, &single, &worker), SCHEDULER_QUEUED);
    ck_assert_uint_eq (scheduler_queued (s), 33);
    ck_assert_uint_eq (scheduler_queued_tenant (s, "flooder"), 32);
    ck_assert_uint_eq (scheduler_queued_tenant (s, "victim"), 1);
    ck_assert_ptr_eq (scheduler_worker_ready (s, 0), &single);
    /*  Then the flood, in its own FIFO order.  */
    for (size_t i = 0; i < 32; i++)
        ck_assert_ptr_eq (scheduler_worker_ready (s, 0), &flood [i]);
    ck_assert_uint_eq (scheduler_queued (s), 0);
    scheduler_destroy (&s);
}
END_TEST

/*  Weights: A (weight 2) takes two items per round, B and C one; B and C,
 *  new when they joined, go first.  */
START_TEST (test_drr_weighted_order)
{
    scheduler_t *s = s_one_busy_worker ();
    ck_assert_int_eq (scheduler_tenant_weight (s, "A", 2), 0);
    ck_assert_int_eq (scheduler_tenant_weight (s, "A", 0), -1);
    ck_assert_int_eq (scheduler_tenant_weight (s, "A", FAIR_QUEUE_MAX_WEIGHT + 1), -1);
    work_item_t a [6], b [4], c [2];
    size_t worker;
    for (size_t i = 0; i < 6; i++) {
        a [i] = s_item ("A", i);
        ck_assert_int_eq (scheduler_submit (s, &a [i], &worker), SCHEDULER_QUEUED);
    }
    for (size_t i = 0; i < 4; i++) {
        b [i] = s_item ("B", i);
        ck_assert_int_eq (scheduler_submit (s, &b [i], &worker), SCHEDULER_QUEUED);
    }
    for (size_t i = 0; i < 2; i++) {
        c [i] = s_item ("C", i);
        ck_assert_int_eq (scheduler_submit (s, &c [i], &worker), SCHEDULER_QUEUED);
    }
    char order [13];
    s_drain_order (s, 0, order, 12);
    ck_assert_str_eq (order, "BCAABCAABAAB");
    scheduler_destroy (&s);
}
END_TEST

/*  A tenant that joins while others wait goes next (before A, whose turn
 *  it was), then the round goes on: A and B alternate.  */
START_TEST (test_drr_late_joiner)
{
    scheduler_t *s = s_one_busy_worker ();
    work_item_t a [4], b [4], late = s_item ("Z", 0);
    size_t worker;
    for (size_t i = 0; i < 4; i++) {
        a [i] = s_item ("A", i);
        b [i] = s_item ("B", i);
        ck_assert_int_eq (scheduler_submit (s, &a [i], &worker), SCHEDULER_QUEUED);
        ck_assert_int_eq (scheduler_submit (s, &b [i], &worker), SCHEDULER_QUEUED);
    }
    ck_assert_ptr_eq (scheduler_worker_ready (s, 0), &b [0]);        /* B joined second: new */
    ck_assert_int_eq (scheduler_submit (s, &late, &worker), SCHEDULER_QUEUED);
    char order [9];
    s_drain_order (s, 0, order, 8);
    ck_assert_str_eq (order, "ZABABABA");
    scheduler_destroy (&s);
}
END_TEST

/*  A worker takes only items its board can run: a tenant whose items are
 *  all for another board loses its turn, never the item.  Background
 *  items go only when no client item for the board waits.  */
START_TEST (test_drr_board_filter_and_background)
{
    scheduler_t *s = scheduler_new ();
    ck_assert_int_eq (scheduler_board_add (s, "b0"), 0);
    ck_assert_int_eq (scheduler_board_add (s, "b1"), 1);
    scheduler_key_add (s, 0, s_shared, 1);
    scheduler_key_add (s, 1, s_shared, 1);
    scheduler_key_add (s, 1, s_only1, 1);
    ck_assert_int_eq (scheduler_worker_add (s, 0), 0);
    ck_assert_int_eq (scheduler_worker_add (s, 1), 1);
    work_item_t only1 [2], shared [2], low = { .key_id = s_shared, .key_id_len = 1, .low = true };
    size_t worker;
    for (size_t i = 0; i < 2; i++) {
        only1 [i] = (work_item_t) { .key_id = s_only1, .key_id_len = 1, .tenant = "A" };
        shared [i] = s_item ("B", i);
        ck_assert_int_eq (scheduler_submit (s, &only1 [i], &worker), SCHEDULER_QUEUED);
    }
    ck_assert_int_eq (scheduler_submit (s, &low, &worker), SCHEDULER_QUEUED);
    for (size_t i = 0; i < 2; i++)
        ck_assert_int_eq (scheduler_submit (s, &shared [i], &worker), SCHEDULER_QUEUED);
    /*  A's turn, but board 0 cannot run A's items: B's first item.  */
    ck_assert_ptr_eq (scheduler_worker_ready (s, 0), &shared [0]);
    ck_assert_uint_eq (shared [0].board, 0);
    ck_assert_ptr_eq (scheduler_worker_ready (s, 1), &only1 [0]);
    ck_assert_ptr_eq (scheduler_worker_ready (s, 1), &shared [1]);
    ck_assert_ptr_eq (scheduler_worker_ready (s, 1), &only1 [1]);
    /*  No client item left: the background item.  */
    ck_assert_ptr_eq (scheduler_worker_ready (s, 0), &low);
    ck_assert_ptr_null (scheduler_worker_ready (s, 1));
    ck_assert_ptr_null (scheduler_worker_ready (s, 0));
    ck_assert_uint_eq (scheduler_queued (s), 0);
    ck_assert_uint_eq (scheduler_queued_low (s), 0);
    scheduler_destroy (&s);
}
END_TEST

/*  fair_queue on its own (the slow pool's queue of PIN checks): owners
 *  that join while "logins" waits go first, in the order they joined; NULL
 *  is an owner of its own.  */
START_TEST (test_fair_queue_round_robin)
{
    fair_queue_t *q = fair_queue_new ();
    int items [10];
    for (int i = 0; i < 8; i++)
        ck_assert_int_eq (fair_queue_add (q, "logins", &items [i]), 0);
    ck_assert_int_eq (fair_queue_add (q, "other", &items [8]), 0);
    ck_assert_int_eq (fair_queue_add (q, NULL, &items [9]), 0);
    ck_assert_uint_eq (fair_queue_size (q), 10);
    ck_assert_uint_eq (fair_queue_active (q), 3);
    ck_assert_ptr_eq (fair_queue_take (q, NULL, NULL), &items [8]);
    ck_assert_ptr_eq (fair_queue_take (q, NULL, NULL), &items [9]);
    for (int i = 0; i < 8; i++)
        ck_assert_ptr_eq (fair_queue_take (q, NULL, NULL), &items [i]);
    ck_assert_ptr_null (fair_queue_take (q, NULL, NULL));
    ck_assert_uint_eq (fair_queue_active (q), 0);
    ck_assert_uint_eq (fair_queue_weight (q, "other"), 1);
    fair_queue_destroy (&q);
    fair_queue_destroy (&q);
    ck_assert_ptr_null (q);
}
END_TEST

/*  Tenants that empty their queue and come back at once (one request at a
 *  time each) do not starve a backlogged tenant: an emptied flow stays in
 *  the round until its next turn, so it comes back as a new flow at most
 *  once per round.  Three such tenants and a flood: the flood gets one
 *  item in every four.  */
START_TEST (test_fair_queue_sparse_flows_do_not_starve)
{
    fair_queue_t *q = fair_queue_new ();
    const char *sparse [3] = { "s0", "s1", "s2" };
    int flood [40], one [3];
    for (int i = 0; i < 40; i++)
        ck_assert_int_eq (fair_queue_add (q, "flood", &flood [i]), 0);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq (fair_queue_add (q, sparse [i], &one [i]), 0);
    size_t flood_taken = 0;
    for (int step = 0; step < 40; step++) {
        int *item = fair_queue_take (q, NULL, NULL);
        ck_assert_ptr_nonnull (item);
        if (item >= flood && item < flood + 40)
            flood_taken++;
        else                                    /* its owner sends the next one at once */
            ck_assert_int_eq (fair_queue_add (q, sparse [item - one], item), 0);
    }
    ck_assert_uint_ge (flood_taken, 9);
    ck_assert_uint_le (flood_taken, 11);
    fair_queue_destroy (&q);
}
END_TEST

/*  fair_queue against a model, 20,000 random steps (fixed seed): a take
 *  with a board filter returns NULL only when no waiting item matches, and
 *  otherwise the oldest matching item of its flow.  */
typedef struct {
    int flow;
    int mask;                       /* boards (bits 0..1) that may take it */
    long seq;
    bool waiting;
} s_model_item_t;

static bool
s_model_match (void *item, void *arg)
{
    return (((s_model_item_t *) item)->mask & *(int *) arg) != 0;
}

START_TEST (test_fair_queue_model)
{
    enum { N = 128 };
    static s_model_item_t items [N];
    const char *flows [3] = { "x", "y", "z" };
    fair_queue_t *q = fair_queue_new ();
    size_t used = 0, waiting = 0;
    unsigned seed = 12345;
    for (long step = 0; step < 20000; step++) {
        seed = seed * 1103515245u + 12345u;
        unsigned r = seed >> 8;
        if (r % 2 && used < N) {
            s_model_item_t *item = &items [used++];
            *item = (s_model_item_t) { (int) (r / 2 % 3), (int) (r / 6 % 3) + 1, step, true };
            ck_assert_int_eq (fair_queue_add (q, flows [item->flow], item), 0);
            waiting++;
            continue;
        }
        int board = 1 << (r / 2 % 2);
        s_model_item_t *got = fair_queue_take (q, s_model_match, &board);
        if (!got) {
            for (size_t i = 0; i < used; i++)
                ck_assert (!items [i].waiting || !(items [i].mask & board));
            continue;
        }
        ck_assert (got->waiting && (got->mask & board));
        for (size_t i = 0; i < used; i++)       /* no older matching item of its flow */
            ck_assert (!(items [i].waiting && items [i].flow == got->flow && (items [i].mask & board)
                         && items [i].seq < got->seq));
        got->waiting = false;
        waiting--;
        if (used == N && waiting == 0)
            used = 0;
    }
    ck_assert_uint_eq (fair_queue_size (q), waiting);
    fair_queue_destroy (&q);
}
END_TEST

/*  Two boards holding the same key, both idle: board "slow" measured at
 *  100 ms, board "fast" at 10 ms.  The item goes to the fast one, though
 *  the old rule (most idle workers) would pick the slow one.  */
START_TEST (test_speed_idle_fast_beats_idle_slow)
{
    scheduler_t *s = scheduler_new ();
    ck_assert_int_eq (scheduler_board_add (s, "slow"), 0);
    ck_assert_int_eq (scheduler_board_add (s, "fast"), 1);
    scheduler_key_add (s, 0, s_shared, 1);
    scheduler_key_add (s, 1, s_shared, 1);
    for (int w = 0; w < 3; w++)             /* slow: workers 0..2, fast: 3 */
        ck_assert_int_eq (scheduler_worker_add (s, w < 2 ? 0 : w == 2 ? 0 : 1), w);
    ck_assert_int_eq (scheduler_worker_add (s, 1), 3);
    for (size_t w = 0; w < 4; w++)
        ck_assert_ptr_null (scheduler_worker_ready (s, w));
    work_item_t done = s_item ("A", 0), item = s_item ("A", 1);
    done.bits = item.bits = 2048;
    done.rv = CKR_OK;
    /*  Unmeasured: the old rule, most idle workers (slow has 3).  */
    ck_assert_double_eq (scheduler_expected_ns (s, 0, &item), 0);
    size_t worker;
    ck_assert_int_eq (scheduler_submit (s, &item, &worker), SCHEDULER_ASSIGNED);
    ck_assert_uint_eq (item.board, 0);
    ck_assert_ptr_null (scheduler_worker_ready (s, worker));
    /*  Measured: the EWMA of each board.  */
    for (int i = 0; i < 5; i++) {
        done.board = 0;
        scheduler_service (s, &done, 100000000);
        done.board = 1;
        scheduler_service (s, &done, 10000000);
    }
    ck_assert_double_eq_tol (scheduler_expected_ns (s, 0, &item), 1e8, 1);
    ck_assert_double_eq_tol (scheduler_expected_ns (s, 1, &item), 1e7, 1);
    /*  A failed item says nothing about speed (a board that fails fast).  */
    done.rv = CKR_DEVICE_ERROR;
    done.board = 0;
    scheduler_service (s, &done, 1000);
    ck_assert_double_eq_tol (scheduler_expected_ns (s, 0, &item), 1e8, 1);
    ck_assert_int_eq (scheduler_submit (s, &item, &worker), SCHEDULER_ASSIGNED);
    ck_assert_uint_eq (item.board, 1);
    ck_assert_uint_eq (worker, 3);
    /*  The fast board busy: waiting for it is expected to finish sooner
     *  (10 ms * (1 + 1 / 1 worker) = 20 ms, against 100 ms on the idle
     *  slow board; issue #8): the item waits and the fast worker takes it.  */
    work_item_t next = s_item ("A", 2);
    next.bits = 2048;
    ck_assert_int_eq (scheduler_submit (s, &next, &worker), SCHEDULER_QUEUED);
    ck_assert_ptr_null (scheduler_rebalance (s, 0, &worker));
    ck_assert_ptr_eq (scheduler_worker_ready (s, 3), &next);
    ck_assert_uint_eq (next.board, 1);
    /*  EWMA: one sample of 20 ms moves the fast board by 1/8 of the gap.  */
    done.rv = CKR_OK;
    done.board = 1;
    scheduler_service (s, &done, 20000000);
    ck_assert_double_eq_tol (scheduler_expected_ns (s, 1, &item), 1.125e7, 1);
    /*  No sample of 4096 bits: scaled from 2048 by the cube (x 8).  */
    work_item_t big = s_item ("A", 3);
    big.bits = 4096;
    ck_assert_double_eq_tol (scheduler_expected_ns (s, 0, &big), 8e8, 1);
    scheduler_destroy (&s);
}
END_TEST

/*  Boards within SCHEDULER_SPEED_SLACK of each other count as equal: the
 *  load still spreads over them.  */
START_TEST (test_speed_equal_boards_share)
{
    scheduler_t *s = scheduler_new ();
    scheduler_board_add (s, "b0");
    scheduler_board_add (s, "b1");
    scheduler_key_add (s, 0, s_shared, 1);
    scheduler_key_add (s, 1, s_shared, 1);
    for (size_t w = 0; w < 4; w++) {
        ck_assert_int_eq (scheduler_worker_add (s, w % 2), (int) w);
        ck_assert_ptr_null (scheduler_worker_ready (s, w));
    }
    work_item_t done = s_item ("A", 0);
    done.rv = CKR_OK;
    done.board = 0;
    scheduler_service (s, &done, 10000000);
    done.board = 1;
    scheduler_service (s, &done, 11000000);
    work_item_t items [2] = { s_item ("A", 1), s_item ("A", 2) };
    size_t worker;
    ck_assert_int_eq (scheduler_submit (s, &items [0], &worker), SCHEDULER_ASSIGNED);
    ck_assert_int_eq (scheduler_submit (s, &items [1], &worker), SCHEDULER_ASSIGNED);
    ck_assert_uint_ne (items [0].board, items [1].board);
    scheduler_destroy (&s);
}
END_TEST

/*  Per-client caps: a client at max_jobs jobs out defers its requests,
 *  keeping their order; others start at once; backlogs are served round
 *  robin across clients as jobs come back; bytes stay capped (the backlog
 *  is bounded by max_bytes).  */
START_TEST (test_client_caps_and_backlog)
{
    client_load_t *load = client_load_new (1000, 2);
    int r [6];
    ck_assert (client_load_may_start (load, "flood"));
    ck_assert_int_eq (client_load_jobs_add (load, "flood", 1), 0);
    ck_assert_int_eq (client_load_jobs_add (load, "flood", 1), 0);
    ck_assert_uint_eq (client_load_jobs (load, "flood"), 2);
    ck_assert (!client_load_may_start (load, "flood"));
    ck_assert (client_load_may_start (load, "quiet"));
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq (client_load_defer (load, "flood", &r [i]), 0);
    ck_assert_int_eq (client_load_jobs_add (load, "quiet", 1), 0);
    ck_assert_int_eq (client_load_jobs_add (load, "quiet", 1), 0);
    ck_assert_int_eq (client_load_defer (load, "quiet", &r [3]), 0);
    ck_assert_uint_eq (client_load_deferred (load), 4);
    ck_assert_uint_eq (client_load_client_deferred (load, "flood"), 3);
    /*  Both at their cap: nothing starts.  */
    ck_assert_ptr_null (client_load_next (load));
    /*  One job of each back: flood's oldest, then quiet's.  */
    client_load_jobs_add (load, "flood", -1);
    client_load_jobs_add (load, "quiet", -1);
    ck_assert_ptr_eq (client_load_next (load), &r [0]);
    client_load_jobs_add (load, "flood", 1);     /* r [0]'s job went out */
    ck_assert_ptr_eq (client_load_next (load), &r [3]);
    client_load_jobs_add (load, "quiet", 1);
    ck_assert_ptr_null (client_load_next (load));
    /*  A new request of flood waits behind its backlog even under the cap.  */
    client_load_jobs_add (load, "flood", -1);
    client_load_jobs_add (load, "flood", -1);
    ck_assert (!client_load_may_start (load, "flood"));
    ck_assert_ptr_eq (client_load_next (load), &r [1]);
    ck_assert_ptr_eq (client_load_next (load), &r [2]);
    ck_assert_ptr_null (client_load_next (load));
    ck_assert (client_load_may_start (load, "flood"));
    ck_assert_uint_eq (client_load_deferred (load), 0);
    /*  Bytes: the backlog is charged, capped per client.  */
    ck_assert_int_eq (client_load_charge (load, "flood", 600), 0);
    ck_assert_int_eq (client_load_charge (load, "flood", 600), -1);
    ck_assert_int_eq (client_load_charge (load, "quiet", 600), 0);
    client_load_release (load, "flood", 600);
    client_load_release (load, "quiet", 600);
    ck_assert_uint_eq (client_load_total (load), 0);
    client_load_jobs_add (load, "quiet", -1);
    client_load_jobs_add (load, "quiet", -1);
    /*  pop drains any backlog at shutdown.  */
    client_load_jobs_add (load, "x", 1);
    client_load_jobs_add (load, "x", 1);
    ck_assert_int_eq (client_load_defer (load, "x", &r [4]), 0);
    ck_assert_ptr_null (client_load_next (load));
    ck_assert_ptr_eq (client_load_pop (load), &r [4]);
    ck_assert_ptr_null (client_load_pop (load));
    client_load_destroy (&load);
    ck_assert_ptr_null (load);
}
END_TEST

/*  The slow pool's heavy items (PIN checks) of one tenant's batch do not
 *  hold up another tenant's: one thread, a running item, then 4 items of
 *  tenant "batch" and one of "other": other's runs next, not last.  */
typedef struct {
    slow_item_t base;
    char tag;
} s_slow_t;

static char s_slow_order [16];
static size_t s_slow_done_count;

static void
s_slow_run (slow_item_t *item, keystore_t *ks)
{
    (void) ks;
    zclock_sleep (5);
    s_slow_order [strlen (s_slow_order)] = ((s_slow_t *) item)->tag;
}

static void
s_slow_back (slow_item_t *item, void *arg)
{
    (void) item;
    (void) arg;
    s_slow_done_count++;
}

static int
s_slow_timer (zloop_t *loop, int timer_id, void *arg)
{
    (void) loop;
    (void) timer_id;
    return s_slow_done_count >= *(size_t *) arg ? -1 : 0;
}

START_TEST (test_slow_pool_round_robin_tenants)
{
    char *dir = th_tmpdir ();
    th_keystore (dir);
    keystore_t *ks = th_keystore_open (dir);
    zloop_t *loop = zloop_new ();
    slow_pool_t *pool = slow_pool_new (ks, 1, loop, s_slow_back, s_slow_back, NULL);
    ck_assert_ptr_nonnull (pool);
    static s_slow_t items [6];
    const char *owners [6] = { "batch", "batch", "batch", "batch", "batch", "other" };
    const char tags [6] = { 'r', 'b', 'b', 'b', 'b', 'o' };
    memset (s_slow_order, 0, sizeof s_slow_order);
    s_slow_done_count = 0;
    for (size_t i = 0; i < 6; i++) {
        items [i] = (s_slow_t) { { s_slow_run, true, owners [i] }, tags [i] };
        slow_pool_submit (pool, &items [i].base);
    }
    ck_assert_uint_eq (slow_pool_busy (pool), 1);
    ck_assert_uint_eq (slow_pool_queued (pool), 5);
    size_t want = 6;
    zloop_timer (loop, 5, 0, s_slow_timer, &want);
    zloop_start (loop);
    ck_assert_str_eq (s_slow_order, "robbbb");
    slow_pool_destroy (&pool);
    zloop_destroy (&loop);
    keystore_destroy (&ks);
    th_tmpdir_remove (&dir);
}
END_TEST

int
main (void)
{
    Suite *suite = suite_create ("broker_fair");
    TCase *tc = tcase_create ("drr");
    tcase_set_timeout (tc, 60);
    tcase_add_test (tc, test_drr_flood_does_not_delay_other_tenant);
    tcase_add_test (tc, test_drr_weighted_order);
    tcase_add_test (tc, test_drr_late_joiner);
    tcase_add_test (tc, test_drr_board_filter_and_background);
    tcase_add_test (tc, test_fair_queue_round_robin);
    tcase_add_test (tc, test_fair_queue_model);
    tcase_add_test (tc, test_fair_queue_sparse_flows_do_not_starve);
    suite_add_tcase (suite, tc);
    tcase_add_test (tc, test_client_caps_and_backlog);
    tcase_add_test (tc, test_slow_pool_round_robin_tenants);
    tc = tcase_create ("speed");
    tcase_add_test (tc, test_speed_idle_fast_beats_idle_slow);
    tcase_add_test (tc, test_speed_equal_boards_share);
    suite_add_tcase (suite, tc);
    return tr_run (suite);
}
