/*  test_keystore_state.c — the keystore's authenticated state (issue 19,
 *  keystore/ks_state.c; cryptoserver-keystore(5) "Schema", "Rollback",
 *  "Issued pool keys"): a schema downgrade by a writer of the file is
 *  refused at open and by the operator's upgrade, an older copy of the
 *  file put back is refused until the operator accepts it, an issued key's
 *  fingerprint is recorded once.  SQLite; the sqlite3 library plays the
 *  attacker with write access to keystore.db and no master key.
 */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>
#include <sqlite3.h>
#include <czmq.h>
#include "keystore.h"

/*  An unkeyed PBKDF2 PIN hash of schema 1 (tests/unit/keystore-v1.sql,
 *  tenant bob's user PIN "5678"): what an attacker writes.  */
#define FORGED_PIN "5678"
#define FORGED_HASH "pbkdf2-sha256$100000$0d9fd968ed5a2ddcf787959d0bb221a6$" \
                    "4ef3f09a4c2194b788fd5a12102f277c48c09b05bf1a8d8cc61df4817288c587"

static char s_dir [64];
static char s_path [128];
static char s_counter [128];
static uint8_t s_master [KEYSTORE_MASTER_KEY_LEN];

static void
s_setup (void)
{
    strcpy (s_dir, "/tmp/test_ks_state.XXXXXX");
    ck_assert_ptr_nonnull (mkdtemp (s_dir));
    snprintf (s_path, sizeof s_path, "%s/keystore.db", s_dir);
    snprintf (s_counter, sizeof s_counter, "%s/" KEYSTORE_COUNTER_FILE, s_dir);
    for (size_t i = 0; i < sizeof s_master; i++)
        s_master [i] = (uint8_t) (i * 7 + 1);
}

static void
s_teardown (void)
{
    char cmd [160];
    snprintf (cmd, sizeof cmd, "rm -rf '%s'", s_dir);
    ck_assert_int_eq (system (cmd), 0);
}

//  Runs sql on the file behind the keystore's back.
static void
s_sql (const char *sql)
{
    sqlite3 *db = NULL;
    ck_assert_int_eq (sqlite3_open (s_path, &db), SQLITE_OK);
    sqlite3_busy_timeout (db, 5000);
    ck_assert_msg (sqlite3_exec (db, sql, NULL, NULL, NULL) == SQLITE_OK, "%s: %s", sql, sqlite3_errmsg (db));
    sqlite3_close (db);
}

//  Copies file `from` to `to` (the keystore closed: no WAL left).
static void
s_copy (const char *from, const char *to)
{
    char cmd [400];
    snprintf (cmd, sizeof cmd, "cp '%s' '%s' && rm -f '%s-wal' '%s-shm'", from, to, to, to);
    ck_assert_int_eq (system (cmd), 0);
}

static keystore_t *
s_open (void)
{
    return keystore_open_counted (s_path, s_master, s_counter);
}

//  The attack of issue 19: the MAC and epoch columns dropped, schema set
//  back to 1, an unkeyed PBKDF2 hash of the attacker's PIN written.  Before
//  the fix the next open "upgraded" the file and MACed the forged row.
START_TEST (test_schema_downgrade_refused)
{
    keystore_t *ks = s_open ();
    ck_assert_ptr_nonnull (ks);
    ck_assert_int_eq (keystore_tenant_add (ks, "alice", "1234", 4, "123456", 6), 0);
    keystore_destroy (&ks);
    s_sql ("ALTER TABLE tenants DROP COLUMN mac; ALTER TABLE tenants DROP COLUMN user_epoch;"
           "ALTER TABLE tenants DROP COLUMN so_epoch; ALTER TABLE keys DROP COLUMN mac;"
           "UPDATE meta SET value = '1' WHERE name = 'schema';"
           "UPDATE tenants SET user_pin = '" FORGED_HASH "', user_failures = 0 WHERE name = 'alice'");
    ck_assert_ptr_null (s_open ());                     //  the state record says 6
    ck_assert_int_eq (keystore_upgrade (s_path, s_master, s_counter), -1);
    s_sql ("DELETE FROM meta WHERE name = 'state'");
    ck_assert_ptr_null (s_open ());                     //  not authenticated
    ck_assert_ptr_null (keystore_open (s_path, s_master));
    //  Its tables show schema 6: not an old keystore, no upgrade either.
    ck_assert_int_eq (keystore_upgrade (s_path, s_master, s_counter), -1);
    //  Every later table dropped too, so that it looks like schema 1: its
    //  counter file shows it was at schema 5 or later; without the file, its keyed
    //  SO PIN hash does.
    s_sql ("DROP TABLE idempotency; DROP TABLE objects; DROP TABLE issued; DROP TABLE audit");
    ck_assert_int_eq (keystore_upgrade (s_path, s_master, s_counter), -1);
    ck_assert_int_eq (unlink (s_counter), 0);
    ck_assert_int_eq (keystore_upgrade (s_path, s_master, s_counter), -1);
    ck_assert_ptr_null (s_open ());
    //  A MAC column missing under an authenticated schema 6 is refused too.
    s_teardown ();
    s_setup ();
    ks = s_open ();
    ck_assert_ptr_nonnull (ks);
    keystore_destroy (&ks);
    s_sql ("ALTER TABLE objects DROP COLUMN mac");
    ck_assert_ptr_null (s_open ());
    ck_assert_int_eq (keystore_upgrade (s_path, s_master, s_counter), -1);
}
END_TEST

//  An older copy of the file put back after a PIN change, a wrong PIN and
//  a key destroy is refused (its counter is below the file's); the
//  operator's accept-rollback makes it open again.
//  Another process stopped or stuck while it holds the counter file's lock
//  (a broker under SIGSTOP in keys-idempotent.sh hung every admin command):
//  an open that needs no raise does not wait for it, a write that does waits
//  a bounded time and goes on, and the next write after the lock is free
//  raises the file, so a later open still checks against it.
START_TEST (test_counter_lock_bounded)
{
    keystore_t *ks = s_open ();
    ck_assert_ptr_nonnull (ks);
    ck_assert_int_eq (keystore_tenant_add (ks, "alice", "1234", 4, "123456", 6), 0);
    ck_assert_uint_eq (keystore_pin_set (ks, "alice", CKU_USER, "4321", 4, NULL), CKR_OK);
    keystore_destroy (&ks);
    //  The database is ahead of the file: the next open raises the file,
    //  and "another process" holds the lock meanwhile.
    int dfd = open (s_dir, O_RDONLY | O_DIRECTORY);
    ck_assert_int_ge (dfd, 0);
    ck_assert_int_eq (flock (dfd, LOCK_EX), 0);
    ks = s_open ();
    ck_assert_ptr_nonnull (ks);
    keystore_destroy (&ks);
    ck_assert_int_eq (flock (dfd, LOCK_UN), 0);
    close (dfd);
    ck_assert_ptr_nonnull (ks = s_open ());             //  raises the file now
    ck_assert_uint_eq (keystore_pin_set (ks, "alice", CKU_USER, "5432", 4, NULL), CKR_OK);
    keystore_destroy (&ks);
    ck_assert_ptr_nonnull (ks = s_open ());
    keystore_destroy (&ks);
}
END_TEST

START_TEST (test_rollback_refused)
{
    char old [160];
    snprintf (old, sizeof old, "%s/old.db", s_dir);
    keystore_t *ks = s_open ();
    ck_assert_ptr_nonnull (ks);
    ck_assert_int_eq (keystore_tenant_add (ks, "alice", "1234", 4, "123456", 6), 0);
    keystore_destroy (&ks);
    ck_assert_int_eq (access (s_counter, F_OK), 0);
    s_copy (s_path, old);
    //  1. A PIN change.
    ks = s_open ();
    ck_assert_ptr_nonnull (ks);
    ck_assert_uint_eq (keystore_pin_set (ks, "alice", CKU_USER, "4321", 4, NULL), CKR_OK);
    keystore_destroy (&ks);
    s_copy (old, s_path);
    ck_assert_ptr_null (s_open ());
    ck_assert_ptr_nonnull (ks = keystore_open (s_path, s_master));   //  no counter file: no check
    keystore_destroy (&ks);
    uint64_t counter = 0;
    ck_assert_int_eq (keystore_accept_rollback (s_path, s_master, s_counter, &counter), 0);
    ck_assert_uint_gt (counter, 2);
    ks = s_open ();
    ck_assert_ptr_nonnull (ks);
    ck_assert_uint_eq (keystore_pin_check (ks, "alice", CKU_USER, "1234", 4, NULL), CKR_OK);
    keystore_destroy (&ks);
    //  2. One wrong PIN (a counter bump per failure), then the copy back.
    s_copy (s_path, old);
    ks = s_open ();
    ck_assert_uint_eq (keystore_pin_check (ks, "alice", CKU_USER, "0000", 4, NULL), CKR_PIN_INCORRECT);
    keystore_destroy (&ks);
    s_copy (old, s_path);
    ck_assert_ptr_null (s_open ());
    ck_assert_int_eq (keystore_accept_rollback (s_path, s_master, s_counter, NULL), 0);
    //  3. A key destroyed; a successful read writes nothing (no bump).
    ks = s_open ();
    ck_assert_ptr_nonnull (ks);
    ck_assert_uint_eq (keystore_pin_check (ks, "alice", CKU_USER, "1234", 4, NULL), CKR_OK);
    keystore_destroy (&ks);
    s_copy (s_path, old);
    ks = s_open ();
    ck_assert_uint_eq (keystore_pin_check (ks, "alice", CKU_USER, "1234", 4, NULL), CKR_OK);
    keystore_destroy (&ks);
    s_copy (old, s_path);
    ck_assert_ptr_nonnull (ks = s_open ());             //  nothing changed: no rollback
    ck_assert_int_eq (keystore_tenant_remove (ks, "alice"), 0);
    keystore_destroy (&ks);
    s_copy (old, s_path);
    ck_assert_ptr_null (s_open ());
    //  A counter file that does not verify is refused, and accepted by the operator.
    FILE *file = fopen (s_counter, "w");
    fputs ("cs-counter-v1 1 00\n", file);
    fclose (file);
    ck_assert_ptr_null (s_open ());
    ck_assert_int_eq (keystore_accept_rollback (s_path, s_master, s_counter, NULL), 0);
    ck_assert_ptr_nonnull (ks = s_open ());
    ck_assert (keystore_tenant_exists (ks, "alice"));
    keystore_destroy (&ks);
}
END_TEST

//  One row put back to an earlier copy of itself (its MAC valid) after a
//  PIN change, a destroyed key's row put back, an issued row deleted: the
//  rows no longer match the state record's digest: refused at open.
START_TEST (test_row_replay_refused)
{
    keystore_t *ks = s_open ();
    ck_assert_ptr_nonnull (ks);
    ck_assert_int_eq (keystore_tenant_add (ks, "alice", "1234", 4, "123456", 6), 0);
    ck_assert_int_eq (keystore_tenant_add (ks, "bob", "5678", 4, "567890", 6), 0);
    keystore_destroy (&ks);
    s_sql ("CREATE TABLE saved AS SELECT * FROM tenants WHERE name = 'alice'");
    ks = s_open ();
    ck_assert_uint_eq (keystore_pin_set (ks, "alice", CKU_USER, "4321", 4, NULL), CKR_OK);
    keystore_destroy (&ks);
    s_sql ("UPDATE tenants SET (user_pin, user_failures, user_epoch, mac) = "
           "(SELECT user_pin, user_failures, user_epoch, mac FROM saved) WHERE name = 'alice'");
    ck_assert_ptr_null (s_open ());
    ck_assert_ptr_null (keystore_open (s_path, s_master));          //  no counter file needed
    ck_assert_int_eq (keystore_accept_rollback (s_path, s_master, s_counter, NULL), 0);
    ck_assert_ptr_nonnull (ks = s_open ());
    ck_assert_uint_eq (keystore_pin_check (ks, "alice", CKU_USER, "1234", 4, NULL), CKR_OK);
    //  A key destroyed, its row put back.
    Cs__KeyInfo info = CS__KEY_INFO__INIT;
    char ref [36];
    keystore_ref_new (ref);
    info.ref = ref;
    info.label = (char *) "k";
    ck_assert_int_eq (keystore_key_put (ks, "bob", &info, NULL, 0), 0);
    keystore_destroy (&ks);
    s_sql ("DROP TABLE saved; CREATE TABLE saved AS SELECT * FROM keys WHERE tenant = 'bob'");
    ks = s_open ();
    ck_assert_int_eq (keystore_key_delete (ks, "bob", ref), 0);
    keystore_destroy (&ks);
    s_sql ("INSERT INTO keys SELECT * FROM saved");
    ck_assert_ptr_null (s_open ());
    s_sql ("DELETE FROM keys WHERE tenant = 'bob'");
    ck_assert_ptr_nonnull (ks = s_open ());
    //  An issued row deleted.
    uint8_t fp [32];
    memset (fp, 7, sizeof fp);
    ck_assert_int_eq (keystore_issued_record (ks, "bob", fp), 0);
    keystore_destroy (&ks);
    s_sql ("DELETE FROM issued");
    ck_assert_ptr_null (s_open ());
}
END_TEST

//  A fingerprint is recorded once; a row changed without the master key
//  still counts as issued.
START_TEST (test_issued_once)
{
    uint8_t fp [32], other [32];
    memset (fp, 0xa5, sizeof fp);
    memset (other, 0x5a, sizeof other);
    keystore_t *ks = s_open ();
    ck_assert_ptr_nonnull (ks);
    ck_assert_int_eq (keystore_tenant_add (ks, "alice", "1234", 4, "123456", 6), 0);
    ck_assert_int_eq (keystore_issued_check (ks, fp), 0);
    ck_assert_int_eq (keystore_issued_record (ks, "alice", fp), 0);
    ck_assert_int_eq (keystore_issued_record (ks, "bob", fp), 1);
    ck_assert_int_eq (keystore_issued_check (ks, fp), 1);
    ck_assert_int_eq (keystore_issued_check (ks, other), 0);
    s_sql ("UPDATE issued SET tenant = 'mallory'");
    ck_assert_int_eq (keystore_issued_check (ks, fp), KEYSTORE_DAMAGED);
    keystore_destroy (&ks);
}
END_TEST

int
main (void)
{
    Suite *suite = suite_create ("keystore_state");
    TCase *tc = tcase_create ("sqlite");
    tcase_add_checked_fixture (tc, s_setup, s_teardown);
    tcase_set_timeout (tc, 120);
    tcase_add_test (tc, test_schema_downgrade_refused);
    tcase_add_test (tc, test_rollback_refused);
    tcase_add_test (tc, test_counter_lock_bounded);
    tcase_add_test (tc, test_issued_once);
    tcase_add_test (tc, test_row_replay_refused);
    suite_add_tcase (suite, tc);
    SRunner *runner = srunner_create (suite);
    srunner_run_all (runner, CK_NORMAL);
    int failed = srunner_ntests_failed (runner);
    srunner_free (runner);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
