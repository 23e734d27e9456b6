/*  test_pin.c — PBKDF2 PIN hashes (common/cs_pin.c).  */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
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

/*  Writes text to a fresh temporary file; returns its path (static).  */
static const char *
s_temp_file (const char *text)
{
    static char path [] = "/tmp/cs-test-hex-XXXXXX";
    strcpy (path, "/tmp/cs-test-hex-XXXXXX");
    int fd = mkstemp (path);
    ck_assert_int_ge (fd, 0);
    ck_assert_int_eq (write (fd, text, strlen (text)), (ssize_t) strlen (text));
    close (fd);
    return path;
}

START_TEST (test_file_read_hex)
{
    unsigned char key [4];
    const char *path = s_temp_file ("00a1B2ff\n");
    ck_assert_int_eq (cs_file_read_hex (path, key, sizeof key), 0);
    ck_assert_mem_eq (key, "\x00\xa1\xb2\xff", 4);
    unlink (path);
    path = s_temp_file ("00a1b2\n");                  /* too short */
    ck_assert_int_eq (cs_file_read_hex (path, key, sizeof key), -2);
    ck_assert_mem_eq (key, "\0\0\0\0", 4);          /* wiped on failure */
    unlink (path);
    path = s_temp_file ("00a1b2fg");                   /* not hex */
    ck_assert_int_eq (cs_file_read_hex (path, key, sizeof key), -2);
    unlink (path);
    ck_assert_int_eq (cs_file_read_hex ("/nonexistent/cs-key", key, sizeof key), -1);
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
    tcase_add_test (tc, test_file_read_hex);
    suite_add_tcase (suite, tc);
    SRunner *runner = srunner_create (suite);
    srunner_run_all (runner, CK_NORMAL);
    int failed = srunner_ntests_failed (runner);
    srunner_free (runner);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
