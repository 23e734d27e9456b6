/*  test_pin.c — PBKDF2 PIN hashes (common/cs_pin.c).  */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <openssl/evp.h>
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

/*  Known answers, computed outside the project:
 *    python3 -c 'import hashlib; print (hashlib.pbkdf2_hmac ("sha256", b"1234",
 *        bytes (range (16)), 100000, 32).hex ())'
 *  (the same with openssl kdf -keylen 32 -kdfopt digest:SHA256 -kdfopt pass:1234
 *  -kdfopt hexsalt:000102030405060708090a0b0c0d0e0f -kdfopt iter:100000 PBKDF2),
 *  and for b"correct horse battery staple" with 1000 iterations; written in
 *  the stored form of cs_pin.h, "pbkdf2-sha256$ITERATIONS$SALT_HEX$HASH_HEX".  */
#define S_KAT_SALT "000102030405060708090a0b0c0d0e0f"
#define S_KAT_1234 "869e6c8350c5beb0acc399fbaac3b60d220433896b26a647734d0d8f1586e1fa"
#define S_KAT_HORSE "a69b179e3add3c1e0aaf227a0eb3aa2aa8645ab86fecf6ca00c17512697c719e"

START_TEST (test_pin_kat)
{
    static const char horse [] = "correct horse battery staple";
    ck_assert (cs_pin_verify ("pbkdf2-sha256$100000$" S_KAT_SALT "$" S_KAT_1234, "1234", 4));
    ck_assert (cs_pin_verify ("pbkdf2-sha256$1000$" S_KAT_SALT "$" S_KAT_HORSE, horse, strlen (horse)));
    ck_assert (!cs_pin_verify ("pbkdf2-sha256$100000$" S_KAT_SALT "$" S_KAT_1234, "1235", 4));
    /*  Each part of the stored form counts: iterations, salt, hash.  */
    ck_assert (!cs_pin_verify ("pbkdf2-sha256$100001$" S_KAT_SALT "$" S_KAT_1234, "1234", 4));
    ck_assert (!cs_pin_verify ("pbkdf2-sha256$1001$" S_KAT_SALT "$" S_KAT_HORSE, horse, strlen (horse)));
    ck_assert (!cs_pin_verify ("pbkdf2-sha256$100000$100102030405060708090a0b0c0d0e0f$" S_KAT_1234, "1234", 4));
    ck_assert (!cs_pin_verify ("pbkdf2-sha256$100000$" S_KAT_SALT
                               "$869e6c8350c5beb0acc399fbaac3b60d220433896b26a647734d0d8f1586e1fb", "1234", 4));
}
END_TEST

/*  cs_pin_hash writes the stored form with the documented 100000 iterations
 *  (cryptoserver-keystore(5)), a 16-byte salt and a 32-byte hash that
 *  OpenSSL's PBKDF2-HMAC-SHA256 (not the project's code) reproduces.  */
START_TEST (test_pin_stored_format)
{
    static const char head [] = "pbkdf2-sha256$100000$";
    char *stored = cs_pin_hash ("2468", 4);
    ck_assert_ptr_nonnull (stored);
    ck_assert_uint_eq (strlen (stored), strlen (head) + 32 + 1 + 64);
    ck_assert_int_eq (strncmp (stored, head, strlen (head)), 0);
    const char *salt_hex = stored + strlen (head), *hash_hex = salt_hex + 33;
    ck_assert_int_eq (salt_hex [32], '$');
    ck_assert_uint_eq (strspn (salt_hex, "0123456789abcdef"), 32);
    ck_assert_uint_eq (strspn (hash_hex, "0123456789abcdef"), 64);
    unsigned char salt [16], hash [32];
    char hex [65];
    for (int i = 0; i < 16; i++) {
        unsigned byte;
        ck_assert_int_eq (sscanf (salt_hex + 2 * i, "%2x", &byte), 1);
        salt [i] = (unsigned char) byte;
    }
    ck_assert_int_eq (PKCS5_PBKDF2_HMAC ("2468", 4, salt, 16, 100000, EVP_sha256 (), 32, hash), 1);
    for (int i = 0; i < 32; i++)
        snprintf (hex + 2 * i, 3, "%02x", hash [i]);
    ck_assert_str_eq (hash_hex, hex);
    free (stored);
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
    tcase_add_test (tc, test_pin_kat);
    tcase_add_test (tc, test_pin_stored_format);
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
