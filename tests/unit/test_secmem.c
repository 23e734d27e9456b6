/*  test_secmem.c — locked, non-dumpable memory for secrets and the
 *  protection of a daemon's process (common/cs_secmem.h), as the kernel
 *  reports them (/proc/self/smaps, prctl).  */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include "cs_secmem.h"
#include "test_smaps.h"
#include "test_run.h"

START_TEST (test_block_locked_and_not_dumped)
{
    long page_kb = sysconf (_SC_PAGESIZE) / 1024;
    ts_locked_t before = ts_locked ();
    uint8_t *block = cs_secmem_dup ("a secret", 8);
    ck_assert_ptr_nonnull (block);
    ck_assert_mem_eq (block, "a secret", 8);
    char flags [256] = "";
    long locked_kb = -1;
    ck_assert (ts_mapping_of (block, flags, sizeof flags, &locked_kb));
    ck_assert_msg (strstr (flags, " dd"), "the block is dumpable (VmFlags:%s)", flags);
    if (cs_secmem_lock_failures () == 0) {          /* RLIMIT_MEMLOCK allowed it */
        ck_assert_msg (strstr (flags, " lo"), "the block is not locked (VmFlags:%s)", flags);
        ck_assert_int_ge (locked_kb, page_kb);
    }
    ts_locked_t during = ts_locked ();
    ck_assert_int_eq (during.secret_kb, before.secret_kb + page_kb);
    if (cs_secmem_lock_failures () == 0)
        ck_assert_int_eq (during.secret_locked_kb, before.secret_locked_kb + page_kb);
    ck_assert_int_eq (during.other_locked_kb, before.other_locked_kb);
    cs_secmem_free (block, 8);
    ts_locked_t after = ts_locked ();
    ck_assert_int_eq (after.secret_kb, before.secret_kb);
    ck_assert_int_eq (after.secret_locked_kb, before.secret_locked_kb);
    ck_assert (!ts_mapping_of (block, flags, sizeof flags, &locked_kb));    /* unmapped */
}
END_TEST

START_TEST (test_blocks_do_not_share_pages)
{
    /*  Freeing one secret must not unlock (or unmap) another one's page.  */
    uint8_t *one = cs_secmem_alloc (16), *two = cs_secmem_alloc (16);
    ck_assert (one && two);
    long page = sysconf (_SC_PAGESIZE);
    ck_assert ((uintptr_t) one / (uintptr_t) page != (uintptr_t) two / (uintptr_t) page);
    memset (two, 0x5a, 16);
    cs_secmem_free (one, 16);
    char flags [256] = "";
    long locked_kb = -1;
    ck_assert (ts_mapping_of (two, flags, sizeof flags, &locked_kb));
    if (cs_secmem_lock_failures () == 0)
        ck_assert_msg (strstr (flags, " lo"), "freeing one block unlocked the other (VmFlags:%s)", flags);
    ck_assert_uint_eq (two [15], 0x5a);
    cs_secmem_free (two, 16);
    ck_assert_ptr_null (cs_secmem_alloc (0));
}
END_TEST

START_TEST (test_protect_process)
{
    ck_assert_int_eq (prctl (PR_GET_DUMPABLE, 0, 0, 0, 0), 1);
    ck_assert_int_eq (cs_secmem_protect_process (), 0);
    ck_assert_int_eq (prctl (PR_GET_DUMPABLE, 0, 0, 0, 0), 0);
    struct rlimit core;
    ck_assert_int_eq (getrlimit (RLIMIT_CORE, &core), 0);
    ck_assert_uint_eq (core.rlim_cur, 0);
}
END_TEST

int
main (void)
{
    Suite *suite = suite_create ("secmem");
    TCase *tc = tcase_create ("secmem");
    tcase_add_test (tc, test_block_locked_and_not_dumped);
    tcase_add_test (tc, test_blocks_do_not_share_pages);
    tcase_add_test (tc, test_protect_process);
    suite_add_tcase (suite, tc);
    return tr_run (suite);
}
