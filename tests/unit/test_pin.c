/*  test_pin.c — PBKDF2 PIN hashes (common/cs_pin.c).  */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include "cs_pin.h"
#include "cs_util.h"

START_TEST (test_pin_hash_verifies)
{
    char *stored = cs_pin_hash ("1234", 4);
    ck_assert_ptr_nonnull (stored);
    ck_assert_int_eq (strncmp (stored, "pbkdf2-sha256$", 14), 0);
    ck_assert (cs_pin_verify (stored, "1234", 4));
    ck_assert (!cs_pin_verify (stored, "1235", 4));
    ck_assert (!cs_pin_verify (stored, "12345", 5));
    ck_assert (!cs_pin_verify (stored, "", 0));
    free (stored);
}
END_TEST

START_TEST (test_pin_salted)
{
    char *a = cs_pin_hash ("secret", 6), *b = cs_pin_hash ("secret", 6);
    ck_assert_str_ne (a, b);
    free (a);
    free (b);
}
END_TEST

START_TEST (test_pin_malformed_stored)
{
    ck_assert (!cs_pin_verify (NULL, "1234", 4));
    ck_assert (!cs_pin_verify ("", "1234", 4));
    ck_assert (!cs_pin_verify ("plain:1234", "1234", 4));
    ck_assert (!cs_pin_verify ("pbkdf2-sha256$1$00$00", "1234", 4));
    ck_assert (!cs_pin_verify ("pbkdf2-sha256$100000$zz$00", "1234", 4));
}
END_TEST

START_TEST (test_hex)
{
    unsigned char bytes [] = { 0x00, 0x7f, 0xff }, back [3];
    char hex [7];
    cs_hex_encode (bytes, 3, hex);
    ck_assert_str_eq (hex, "007fff");
    ck_assert_int_eq (cs_hex_decode ("007FfF", back, 3), 3);
    ck_assert_mem_eq (back, bytes, 3);
    ck_assert_int_eq (cs_hex_decode ("0", back, 3), -1);
    ck_assert_int_eq (cs_hex_decode ("0g", back, 3), -1);
    ck_assert_int_eq (cs_hex_decode ("00000000", back, 3), -1);
}
END_TEST

START_TEST (test_paths)
{
    char *p = cs_path_resolve ("/etc/cs", "client.conf");
    ck_assert_str_eq (p, "/etc/cs/client.conf");
    free (p);
    p = cs_path_resolve ("/etc/cs", "/abs/x");
    ck_assert_str_eq (p, "/abs/x");
    free (p);
    p = cs_path_dirname ("dir/sub/file.conf");
    ck_assert_str_eq (p, "dir/sub");
    free (p);
    p = cs_path_dirname ("file.conf");
    ck_assert_str_eq (p, ".");
    free (p);
}
END_TEST

int
main (void)
{
    Suite *suite = suite_create ("pin");
    TCase *tc = tcase_create ("pin");
    tcase_add_test (tc, test_pin_hash_verifies);
    tcase_add_test (tc, test_pin_salted);
    tcase_add_test (tc, test_pin_malformed_stored);
    tcase_add_test (tc, test_hex);
    tcase_add_test (tc, test_paths);
    suite_add_tcase (suite, tc);
    SRunner *runner = srunner_create (suite);
    srunner_run_all (runner, CK_NORMAL);
    int failed = srunner_ntests_failed (runner);
    srunner_free (runner);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
