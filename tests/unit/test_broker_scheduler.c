/*  test_broker_scheduler.c — routing and queueing of work items
 *  (broker/scheduler.h), without threads or sockets.
 */
#include <check.h>
#include <czmq.h>
#include "scheduler.h"

static const unsigned char s_shared [] = { 0x01 };     /* on both boards */
static const unsigned char s_only1 [] = { 0x02 };      /* on board 1 only */
static const unsigned char s_nowhere [] = { 0x09 };

/*  Two boards with two workers each (ids 0,1 on board 0; 2,3 on board 1),
 *  all ready.  */
static scheduler_t *
s_two_boards (void)
{
    scheduler_t *s = scheduler_new ();
    ck_assert_int_eq (scheduler_board_add (s, "b0"), 0);
    ck_assert_int_eq (scheduler_board_add (s, "b1"), 1);
    ck_assert_int_eq (scheduler_key_add (s, 0, s_shared, 1), 0);
    ck_assert_int_eq (scheduler_key_add (s, 1, s_shared, 1), 0);
    ck_assert_int_eq (scheduler_key_add (s, 1, s_only1, 1), 0);
    for (int w = 0; w < 4; w++)
        ck_assert_int_eq (scheduler_worker_add (s, w < 2 ? 0 : 1), w);
    for (size_t w = 0; w < 4; w++)
        ck_assert_ptr_null (scheduler_worker_ready (s, w));
    ck_assert_uint_eq (scheduler_idle (s, 0), 2);
    ck_assert_uint_eq (scheduler_idle (s, 1), 2);
    return s;
}

static work_item_t
s_item (const unsigned char *key, size_t index)
{
    return (work_item_t) { .key_id = key, .key_id_len = 1, .index = index };
}

START_TEST (test_spread_over_boards)
{
    scheduler_t *s = s_two_boards ();
    work_item_t items [4];
    size_t per_board [2] = { 0, 0 }, worker;
    bool used [4] = { false };
    for (size_t i = 0; i < 4; i++) {
        items [i] = s_item (s_shared, i);
        ck_assert_int_eq (scheduler_submit (s, &items [i], &worker), SCHEDULER_ASSIGNED);
        ck_assert_uint_lt (worker, 4);
        ck_assert (!used [worker]);
        used [worker] = true;
        ck_assert_uint_eq (items [i].board, worker < 2 ? 0 : 1);
        per_board [items [i].board]++;
    }
    ck_assert_uint_eq (per_board [0], 2);
    ck_assert_uint_eq (per_board [1], 2);
    /*  Alternates: the first two go to different boards.  */
    ck_assert_uint_ne (items [0].board, items [1].board);
    ck_assert_uint_eq (scheduler_queued (s), 0);
    scheduler_destroy (&s);
    ck_assert_ptr_null (s);
}
END_TEST

START_TEST (test_route_only_to_key_holders)
{
    scheduler_t *s = s_two_boards ();
    work_item_t items [3] = { s_item (s_only1, 0), s_item (s_only1, 1), s_item (s_only1, 2) };
    size_t worker;
    for (size_t i = 0; i < 2; i++) {
        ck_assert_int_eq (scheduler_submit (s, &items [i], &worker), SCHEDULER_ASSIGNED);
        ck_assert_uint_eq (items [i].board, 1);
        ck_assert_uint_ge (worker, 2);
    }
    /*  Board 1 is busy; board 0 has idle workers but not the key.  */
    ck_assert_int_eq (scheduler_submit (s, &items [2], &worker), SCHEDULER_QUEUED);
    ck_assert_uint_eq (scheduler_idle (s, 0), 2);
    work_item_t unknown = s_item (s_nowhere, 9);
    ck_assert_int_eq (scheduler_submit (s, &unknown, &worker), SCHEDULER_NO_BOARD);
    ck_assert (!scheduler_has_key (s, s_nowhere, 1));
    ck_assert (scheduler_has_key (s, s_only1, 1));
    /*  A board-1 worker finishing takes the waiting item.  */
    ck_assert_ptr_eq (scheduler_worker_ready (s, 2), &items [2]);
    ck_assert_uint_eq (items [2].board, 1);
    ck_assert_uint_eq (items [2].worker, 2);
    scheduler_destroy (&s);
}
END_TEST

START_TEST (test_fifo_when_none_idle)
{
    scheduler_t *s = s_two_boards ();
    work_item_t busy [4], waiting [5];
    size_t worker;
    for (size_t i = 0; i < 4; i++) {
        busy [i] = s_item (s_shared, i);
        ck_assert_int_eq (scheduler_submit (s, &busy [i], &worker), SCHEDULER_ASSIGNED);
    }
    for (size_t i = 0; i < 5; i++) {
        waiting [i] = s_item (i == 1 ? s_only1 : s_shared, 10 + i);
        ck_assert_int_eq (scheduler_submit (s, &waiting [i], &worker), SCHEDULER_QUEUED);
    }
    ck_assert_uint_eq (scheduler_queued (s), 5);
    /*  Board 0 cannot run waiting [1] (key on board 1 only): it skips it.  */
    ck_assert_ptr_eq (scheduler_worker_ready (s, 0), &waiting [0]);
    ck_assert_ptr_eq (scheduler_worker_ready (s, 1), &waiting [2]);
    ck_assert_ptr_eq (scheduler_worker_ready (s, 2), &waiting [1]);
    ck_assert_ptr_eq (scheduler_worker_ready (s, 0), &waiting [3]);
    ck_assert_ptr_eq (scheduler_worker_ready (s, 3), &waiting [4]);
    ck_assert_uint_eq (scheduler_queued (s), 0);
    ck_assert_ptr_null (scheduler_worker_ready (s, 1));
    ck_assert_uint_eq (scheduler_idle (s, 0), 1);
    scheduler_destroy (&s);
}
END_TEST

START_TEST (test_counters)
{
    scheduler_t *s = s_two_boards ();
    scheduler_done (s, 0, false);
    scheduler_done (s, 0, true);
    scheduler_done (s, 1, false);
    ck_assert_uint_eq (scheduler_jobs (s, 0), 2);
    ck_assert_uint_eq (scheduler_errors (s, 0), 1);
    ck_assert_uint_eq (scheduler_jobs (s, 1), 1);
    ck_assert_uint_eq (scheduler_errors (s, 1), 0);
    ck_assert_str_eq (scheduler_board_name (s, 1), "b1");
    ck_assert_uint_eq (scheduler_boards (s), 2);
    ck_assert_ptr_null (scheduler_board_name (s, 7));
    scheduler_destroy (&s);
    scheduler_destroy (&s);         /* NULL-safe */
}
END_TEST

START_TEST (test_limits)
{
    scheduler_t *s = scheduler_new ();
    char name [16];
    for (int i = 0; i < 64; i++) {
        snprintf (name, sizeof name, "b%d", i);
        ck_assert_int_eq (scheduler_board_add (s, name), i);
    }
    ck_assert_int_eq (scheduler_board_add (s, "one-too-many"), -1);
    ck_assert_int_eq (scheduler_key_add (s, 63, s_shared, 1), 0);
    ck_assert_int_eq (scheduler_key_add (s, 64, s_shared, 1), -1);
    ck_assert_int_eq (scheduler_worker_add (s, 64), -1);
    ck_assert_int_eq (scheduler_worker_add (s, 63), 0);
    ck_assert_ptr_null (scheduler_worker_ready (s, 0));
    work_item_t item = s_item (s_shared, 0);
    size_t worker = 99;
    ck_assert_int_eq (scheduler_submit (s, &item, &worker), SCHEDULER_ASSIGNED);
    ck_assert_uint_eq (worker, 0);
    ck_assert_uint_eq (item.board, 63);
    scheduler_destroy (&s);
}
END_TEST

int
main (void)
{
    Suite *suite = suite_create ("broker_scheduler");
    TCase *tc = tcase_create ("scheduler");
    tcase_add_test (tc, test_spread_over_boards);
    tcase_add_test (tc, test_route_only_to_key_holders);
    tcase_add_test (tc, test_fifo_when_none_idle);
    tcase_add_test (tc, test_counters);
    tcase_add_test (tc, test_limits);
    suite_add_tcase (suite, tc);
    SRunner *runner = srunner_create (suite);
    srunner_run_all (runner, CK_NORMAL);
    int failed = srunner_ntests_failed (runner);
    srunner_free (runner);
    return failed ? 1 : 0;
}
