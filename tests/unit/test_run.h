/*  test_run.h — the end of a Check test's main (): run the suite, give
 *  make check its exit status.  Header-only (static).
 */
#ifndef TEST_RUN_H_INCLUDED
#define TEST_RUN_H_INCLUDED

#include <check.h>

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
