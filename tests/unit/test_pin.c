/*  test_pin.c — PIN hashes (common/cs_pin.c): keyed scrypt, the schema 1
 *  PBKDF2 forms and their wrapping; hex, paths and hex files (cs_util.c).  */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include "cs_pin.h"
#include "cs_util.h"
#include "test_run.h"

/*  The hash key of the tests (the keystore derives its own from the master
 *  key): bytes 00 01 .. 1f.  */
static uint8_t s_key [CS_PIN_KEY_LEN];

static void
s_setup (void)
{
    for (int i = 0; i < CS_PIN_KEY_LEN; i++)
        s_key [i] = (uint8_t) i;
}

START_TEST (test_pin_hash_verifies)
{
    char *stored = cs_pin_hash (s_key, "1234", 4);
    ck_assert_ptr_nonnull (stored);
    ck_assert_int_eq (strncmp (stored, "scrypt-hmac$", 12), 0);
    ck_assert (cs_pin_verify (stored, s_key, "1234", 4));
    ck_assert (cs_pin_current (stored));
    ck_assert (!cs_pin_verify (stored, s_key, "1235", 4));
    ck_assert (!cs_pin_verify (stored, s_key, "12345", 5));
    ck_assert (!cs_pin_verify (stored, s_key, "", 0));
    ck_assert (!cs_pin_verify (stored, s_key, NULL, 4));
    /*  Keyed: another key does not verify, so the stored form alone does
        not allow guessing PINs.  */
    uint8_t other [CS_PIN_KEY_LEN];
    memcpy (other, s_key, sizeof other);
    other [0] ^= 1;
    ck_assert (!cs_pin_verify (stored, other, "1234", 4));
    ck_assert (!cs_pin_verify (stored, NULL, "1234", 4));
    free (stored);
}
END_TEST

START_TEST (test_pin_salted)
{
    char *a = cs_pin_hash (s_key, "secret", 6), *b = cs_pin_hash (s_key, "secret", 6);
    ck_assert_str_ne (a, b);
    free (a);
    free (b);
}
END_TEST

START_TEST (test_pin_malformed_stored)
{
    ck_assert (!cs_pin_verify (NULL, s_key, "1234", 4));
    ck_assert (!cs_pin_verify ("", s_key, "1234", 4));
    ck_assert (!cs_pin_verify ("plain:1234", s_key, "1234", 4));
    ck_assert (!cs_pin_verify ("pbkdf2-sha256$1$00$00", s_key, "1234", 4));
    ck_assert (!cs_pin_verify ("pbkdf2-sha256$100000$zz$00", s_key, "1234", 4));
    ck_assert (!cs_pin_verify ("scrypt-hmac$9$8$1$00$00", s_key, "1234", 4));
    ck_assert (!cs_pin_current (NULL));
    ck_assert (!cs_pin_current ("scrypt-hmac$15$8$1$00$00"));
    ck_assert_ptr_null (cs_pin_wrap ("pbkdf2-sha256$100000$zz$00", s_key));
}
END_TEST

/*  Known answers, computed outside the project with python3 (hashlib, hmac),
 *  key = bytes (range (32)), salt = bytes (range (16)):
 *    pbkdf2-sha256:       hashlib.pbkdf2_hmac ("sha256", b"1234", salt, 100000, 32)
 *      (also: openssl kdf -keylen 32 -kdfopt digest:SHA256 -kdfopt pass:1234
 *       -kdfopt hexsalt:000102030405060708090a0b0c0d0e0f -kdfopt iter:100000 PBKDF2),
 *      and for b"correct horse battery staple" with 1000 iterations;
 *    pbkdf2-sha256-hmac:  hmac.new (key, <the PBKDF2 of 1234 above>, "sha256")
 *    scrypt-hmac:         hmac.new (key, hashlib.scrypt (b"1234", salt=salt,
 *                         n=2**15, r=8, p=1, maxmem=2**26, dklen=32), "sha256")
 *      (the scrypt part also: openssl kdf -keylen 32 -kdfopt pass:1234
 *       -kdfopt hexsalt:0001..0f -kdfopt n:32768 -kdfopt r:8 -kdfopt p:1 SCRYPT),
 *      and for b"correct horse battery staple" with n=2**10, r=4, p=2;
 *  written in the stored forms of cs_pin.h.  */
#define S_KAT_SALT "000102030405060708090a0b0c0d0e0f"
#define S_KAT_1234 "869e6c8350c5beb0acc399fbaac3b60d220433896b26a647734d0d8f1586e1fa"
#define S_KAT_HORSE "a69b179e3add3c1e0aaf227a0eb3aa2aa8645ab86fecf6ca00c17512697c719e"
#define S_KAT_1234_WRAPPED "c62277237cee9ab5a9fce4f6013d8022199f27929b170bcf38deed5834514ff9"
#define S_KAT_SCRYPT_1234 "50886129292b5533fbd71f91828aa4a37dd5ebb9ecd92f1bc1a26525b27243d9"
#define S_KAT_SCRYPT_HORSE "48825367efb28627faf1028d65896c001c8ca1a1f8f325629bcb4ddcf3a1c4b0"

/*  Schema 1 hashes (unkeyed PBKDF2) still verify, for the keystore upgrade
 *  and the re-hash at the next right PIN.  */
START_TEST (test_pin_kat_pbkdf2)
{
    static const char horse [] = "correct horse battery staple";
    ck_assert (cs_pin_verify ("pbkdf2-sha256$100000$" S_KAT_SALT "$" S_KAT_1234, s_key, "1234", 4));
    ck_assert (cs_pin_verify ("pbkdf2-sha256$1000$" S_KAT_SALT "$" S_KAT_HORSE, s_key, horse, strlen (horse)));
    ck_assert (!cs_pin_verify ("pbkdf2-sha256$100000$" S_KAT_SALT "$" S_KAT_1234, s_key, "1235", 4));
    ck_assert (!cs_pin_current ("pbkdf2-sha256$100000$" S_KAT_SALT "$" S_KAT_1234));
    /*  Each part of the stored form counts: iterations, salt, hash.  */
    ck_assert (!cs_pin_verify ("pbkdf2-sha256$100001$" S_KAT_SALT "$" S_KAT_1234, s_key, "1234", 4));
    ck_assert (!cs_pin_verify ("pbkdf2-sha256$1001$" S_KAT_SALT "$" S_KAT_HORSE, s_key, horse, strlen (horse)));
    ck_assert (!cs_pin_verify ("pbkdf2-sha256$100000$100102030405060708090a0b0c0d0e0f$" S_KAT_1234,
                               s_key, "1234", 4));
    ck_assert (!cs_pin_verify ("pbkdf2-sha256$100000$" S_KAT_SALT
                               "$869e6c8350c5beb0acc399fbaac3b60d220433896b26a647734d0d8f1586e1fb",
                               s_key, "1234", 4));
}
END_TEST

/*  The upgrade wraps a schema 1 hash under the key without the PIN; the
 *  wrapped form verifies the same PIN, and only with that key.  */
START_TEST (test_pin_kat_wrap)
{
    static const char wrapped [] = "pbkdf2-sha256-hmac$100000$" S_KAT_SALT "$" S_KAT_1234_WRAPPED;
    char *got = cs_pin_wrap ("pbkdf2-sha256$100000$" S_KAT_SALT "$" S_KAT_1234, s_key);
    ck_assert_ptr_nonnull (got);
    ck_assert_str_eq (got, wrapped);
    free (got);
    ck_assert (cs_pin_verify (wrapped, s_key, "1234", 4));
    ck_assert (!cs_pin_verify (wrapped, s_key, "1235", 4));
    ck_assert (!cs_pin_current (wrapped));
    uint8_t other [CS_PIN_KEY_LEN] = { 0 };
    ck_assert (!cs_pin_verify (wrapped, other, "1234", 4));
    /*  Forms that are keyed already come back unchanged.  */
    got = cs_pin_wrap (wrapped, s_key);
    ck_assert_str_eq (got, wrapped);
    free (got);
}
END_TEST

START_TEST (test_pin_kat_scrypt)
{
    static const char horse [] = "correct horse battery staple";
#define S_STORED "scrypt-hmac$15$8$1$" S_KAT_SALT "$" S_KAT_SCRYPT_1234
    static const char stored [] = S_STORED;
    ck_assert (cs_pin_verify (stored, s_key, "1234", 4));
    ck_assert (cs_pin_current (stored));
    ck_assert (cs_pin_verify ("scrypt-hmac$10$4$2$" S_KAT_SALT "$" S_KAT_SCRYPT_HORSE, s_key,
                              horse, strlen (horse)));
    ck_assert (!cs_pin_current ("scrypt-hmac$10$4$2$" S_KAT_SALT "$" S_KAT_SCRYPT_HORSE));
    ck_assert (!cs_pin_verify (stored, s_key, "1235", 4));
    /*  Each cost parameter counts.  */
    ck_assert (!cs_pin_verify ("scrypt-hmac$10$4$1$" S_KAT_SALT "$" S_KAT_SCRYPT_HORSE, s_key,
                               horse, strlen (horse)));
    ck_assert (!cs_pin_verify ("scrypt-hmac$10$3$2$" S_KAT_SALT "$" S_KAT_SCRYPT_HORSE, s_key,
                               horse, strlen (horse)));
    ck_assert (!cs_pin_verify ("scrypt-hmac$11$4$2$" S_KAT_SALT "$" S_KAT_SCRYPT_HORSE, s_key,
                               horse, strlen (horse)));
    ck_assert (!cs_pin_verify (S_STORED "0", s_key, "1234", 4));   /* trailing text */
#undef S_STORED
}
END_TEST

/*  cs_pin_hash writes the stored form with the documented cost
 *  (cryptoserver-keystore(5): scrypt N = 2^15, r = 8, p = 1), a 16-byte
 *  salt and a tag that OpenSSL's scrypt and HMAC (not the project's code)
 *  reproduce.  */
START_TEST (test_pin_stored_format)
{
    static const char head [] = "scrypt-hmac$15$8$1$";
    char *stored = cs_pin_hash (s_key, "2468", 4);
    ck_assert_ptr_nonnull (stored);
    ck_assert_uint_eq (strlen (stored), strlen (head) + 32 + 1 + 64);
    ck_assert_int_eq (strncmp (stored, head, strlen (head)), 0);
    const char *salt_hex = stored + strlen (head), *tag_hex = salt_hex + 33;
    ck_assert_int_eq (salt_hex [32], '$');
    ck_assert_uint_eq (strspn (salt_hex, "0123456789abcdef"), 32);
    ck_assert_uint_eq (strspn (tag_hex, "0123456789abcdef"), 64);
    unsigned char salt [16], raw [32], tag [32];
    unsigned int tag_len = 0;
    char hex [65];
    for (int i = 0; i < 16; i++) {
        unsigned byte;
        ck_assert_int_eq (sscanf (salt_hex + 2 * i, "%2x", &byte), 1);
        salt [i] = (unsigned char) byte;
    }
    ck_assert_int_eq (EVP_PBE_scrypt ("2468", 4, salt, 16, 32768, 8, 1, 64 << 20, raw, 32), 1);
    ck_assert_ptr_nonnull (HMAC (EVP_sha256 (), s_key, 32, raw, 32, tag, &tag_len));
    for (int i = 0; i < 32; i++)
        snprintf (hex + 2 * i, 3, "%02x", tag [i]);
    ck_assert_str_eq (tag_hex, hex);
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
    tcase_add_checked_fixture (tc, s_setup, NULL);
    tcase_add_test (tc, test_pin_hash_verifies);
    tcase_add_test (tc, test_pin_salted);
    tcase_add_test (tc, test_pin_malformed_stored);
    tcase_add_test (tc, test_pin_kat_pbkdf2);
    tcase_add_test (tc, test_pin_kat_wrap);
    tcase_add_test (tc, test_pin_kat_scrypt);
    tcase_add_test (tc, test_pin_stored_format);
    tcase_add_test (tc, test_hex);
    tcase_add_test (tc, test_paths);
    tcase_add_test (tc, test_file_read_hex);
    suite_add_tcase (suite, tc);
    return tr_run (suite);
}
