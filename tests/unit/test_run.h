/*  test_run.h — what a Check test's main () shares: the driver folder
 *  check, a test case, running the suite for make check's exit status.
 *  Header-only (static).
 */
#ifndef TEST_RUN_H_INCLUDED
#define TEST_RUN_H_INCLUDED

#include <check.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

/*  For main () of a test that loads drivers: false, after saying so on
 *  stderr, when CRYPTOSERVER_DRIVER_DIR is not set (make check sets it;
 *  main then returns 77, "skipped").  */
static inline bool
tr_driver_dir_set (void)
{
    if (getenv ("CRYPTOSERVER_DRIVER_DIR"))
        return true;
    fprintf (stderr, "CRYPTOSERVER_DRIVER_DIR is not set: run through make check\n");
    return false;
}

/*  A test case with the fixture setup/teardown run around each test
 *  (checked: in the forked test process) and a 60 s time limit per test;
 *  the caller adds the tests and adds it to its suite.  */
static inline TCase *
tr_tcase (const char *name, SFun setup, SFun teardown)
{
    TCase *tc = tcase_create (name);
    tcase_add_checked_fixture (tc, setup, teardown);
    tcase_set_timeout (tc, 60);
    return tc;
}

/*  Runs every test of suite (CK_NORMAL output) and frees it; returns the
 *  exit status for make check: 0 when all passed, else 1.  */
static inline int
tr_run (Suite *suite)
{
    SRunner *runner = srunner_create (suite);
    srunner_run_all (runner, CK_NORMAL);
    int failed = srunner_ntests_failed (runner);
    srunner_free (runner);
    return failed ? 1 : 0;
}

#endif
