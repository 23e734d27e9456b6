/*  test_keystore_audit.c — the audit chain (keystore/keystore_audit.h,
 *  cryptoserver-audit(5)): records appended in batches with signed
 *  checkpoints verify; an edited, deleted, repeated or swapped record, a
 *  checkpoint signed by another key, a signature moved to another record,
 *  and a record that names another broker are each caught at the first
 *  broken record; two brokers keep their own chains; a schema 5 keystore
 *  gets its audit table only from the operator's upgrade; a chain cut back
 *  behind a checkpoint is refused by the state record.
 */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sqlite3.h>
#include <czmq.h>
#include <openssl/evp.h>
#include "keystore.h"
#include "keystore_audit.h"
#include "../../keystore/keystore_int.h"

static char s_dir [64];
static char s_path [128];
static uint8_t s_master [KEYSTORE_MASTER_KEY_LEN];
static EVP_PKEY *s_key, *s_other;

static void
s_setup (void)
{
    strcpy (s_dir, "/tmp/test_ks_audit.XXXXXX");
    ck_assert_ptr_nonnull (mkdtemp (s_dir));
    snprintf (s_path, sizeof s_path, "%s/keystore.db", s_dir);
    for (size_t i = 0; i < sizeof s_master; i++)
        s_master [i] = (uint8_t) (i * 5 + 3);
    s_key = EVP_PKEY_Q_keygen (NULL, NULL, "ED25519");
    s_other = EVP_PKEY_Q_keygen (NULL, NULL, "ED25519");
    ck_assert_ptr_nonnull (s_key);
    ck_assert_ptr_nonnull (s_other);
}

static void
s_teardown (void)
{
    char cmd [160];
    snprintf (cmd, sizeof cmd, "rm -rf '%s'", s_dir);
    ck_assert_int_eq (system (cmd), 0);
    EVP_PKEY_free (s_key);
    EVP_PKEY_free (s_other);
}

static void
s_sql (const char *sql)
{
    sqlite3 *db = NULL;
    ck_assert_int_eq (sqlite3_open (s_path, &db), SQLITE_OK);
    sqlite3_busy_timeout (db, 5000);
    ck_assert_msg (sqlite3_exec (db, sql, NULL, NULL, NULL) == SQLITE_OK, "%s: %s", sql, sqlite3_errmsg (db));
    sqlite3_close (db);
}

//  Appends n records "i" of broker to ks, with a checkpoint when asked.
static void
s_append (keystore_t *ks, const char *broker, int n, bool checkpoint)
{
    char *bodies [16];
    ck_assert_int_le (n, 16);
    for (int i = 0; i < n; i++)
        ck_assert_int_ge (asprintf (&bodies [i], "\"time\":\"2026-11-28T04:00:00.000Z\",\"broker\":\"%s\","
                                    "\"tenant\":\"t\",\"action\":\"login\",\"object\":\"o%d\","
                                    "\"result\":\"CKR_OK\"", broker, i), 0);
    ck_assert_int_eq (keystore_audit_append (ks, broker, bodies, (size_t) n, s_key, checkpoint, NULL, NULL, NULL), 0);
    for (int i = 0; i < n; i++)
        free (bodies [i]);
}

//  Verifies the rows: returns the why text ("" when they verify).
static char s_why [2048];
static const char *
s_verify (keystore_audit_row_t *rows, size_t count, EVP_PKEY *pub, keystore_audit_summary_t *sum)
{
    int rc = keystore_audit_verify (rows, count, pub, s_why, sizeof s_why, sum);
    ck_assert_int_eq (rc, s_why [0] ? -1 : 0);
    return s_why;
}

static keystore_audit_row_t *
s_read (size_t *count_p)
{
    keystore_audit_row_t *rows = NULL;
    ck_assert_int_eq (keystore_audit_read (s_path, &rows, count_p), 0);
    return rows;
}

START_TEST (test_chain_verifies)
{
    keystore_t *ks = keystore_open (s_path, s_master);
    ck_assert_ptr_nonnull (ks);
    s_append (ks, "a", 3, true);            //  a: 1 2 3 ckpt4
    s_append (ks, "b", 2, false);           //  b: 1 2
    s_append (ks, "a", 2, false);           //  a: 5 6
    s_append (ks, "b", 1, true);            //  b: 3 ckpt4
    keystore_destroy (&ks);
    size_t count = 0;
    keystore_audit_row_t *rows = s_read (&count);
    ck_assert_uint_eq (count, 10);
    ck_assert_str_eq (rows [0].broker, "a");
    ck_assert_int_eq (rows [3].seq, 4);
    ck_assert_ptr_nonnull (rows [3].sig);
    ck_assert_msg (strncmp (rows [1].record, "{\"seq\":2,\"prev\":\"", 17) == 0, "%s", rows [1].record);
    char *action = keystore_audit_field (rows [3].record, "action");
    ck_assert_str_eq (action, "checkpoint");
    free (action);
    keystore_audit_summary_t sum;
    ck_assert_str_eq (s_verify (rows, count, s_key, &sum), "");
    ck_assert_uint_eq (sum.brokers, 2);
    ck_assert_uint_eq (sum.records, 10);
    ck_assert_uint_eq (sum.checkpoints, 2);
    ck_assert_uint_eq (sum.unsigned_tail, 2);           //  a's 5 and 6
    //  Under another key, a's first checkpoint (record 4) is the break.
    ck_assert_str_eq (s_verify (rows, count, s_other, NULL),
                      "broker a record 4: checkpoint signature does not verify under the audit public key\n"
                      "broker b record 4: checkpoint signature does not verify under the audit public key");
    keystore_audit_rows_free (rows, count);
}
END_TEST

START_TEST (test_tamper_caught)
{
    keystore_t *ks = keystore_open (s_path, s_master);
    ck_assert_ptr_nonnull (ks);
    s_append (ks, "a", 5, true);            //  1..5, ckpt 6
    keystore_destroy (&ks);
    size_t count = 0;
    keystore_audit_row_t *rows = s_read (&count);
    ck_assert_uint_eq (count, 6);

    //  An edited record: its own hash.
    rows [2].record [strlen (rows [2].record) - 3] ^= 1;
    ck_assert_str_eq (s_verify (rows, count, s_key, NULL),
                      "broker a record 3: its hash does not match its contents (edited)");
    rows [2].record [strlen (rows [2].record) - 3] ^= 1;
    ck_assert_str_eq (s_verify (rows, count, s_key, NULL), "");

    //  A record deleted: a gap.
    ck_assert_str_eq (s_verify (rows + 1, count - 1, s_key, NULL), "broker a record 1: missing (deleted)");
    keystore_audit_row_t copy [6];
    memcpy (copy, rows, sizeof copy);
    memmove (copy + 2, copy + 3, 3 * sizeof copy [0]);
    ck_assert_str_eq (s_verify (copy, 5, s_key, NULL), "broker a record 3: missing (deleted)");

    //  ... and the later ones renumbered: the chain of hashes.
    memcpy (copy, rows, sizeof copy);
    memmove (copy + 2, copy + 3, 3 * sizeof copy [0]);
    for (int i = 2; i < 5; i++)
        copy [i].seq--;
    ck_assert_str_eq (s_verify (copy, 5, s_key, NULL),
                      "broker a record 3: its previous-record hash is not the hash of the record before "
                      "(a record before it deleted, edited or reordered)");

    //  Two records swapped, with their sequence numbers as they were.
    memcpy (copy, rows, sizeof copy);
    copy [1] = rows [2];
    copy [2] = rows [1];
    ck_assert_str_eq (s_verify (copy, 6, s_key, NULL), "broker a record 2: missing (deleted)");
    //  ... or renumbered to their new places.
    copy [1].seq = 2;
    copy [2].seq = 3;
    ck_assert_str_eq (s_verify (copy, 6, s_key, NULL),
                      "broker a record 2: its previous-record hash is not the hash of the record before "
                      "(a record before it deleted, edited or reordered)");

    //  The whole chain moved to another broker's name.
    memcpy (copy, rows, sizeof copy);
    for (int i = 0; i < 6; i++)
        copy [i].broker = (char *) "b";
    ck_assert_str_eq (s_verify (copy, 6, s_key, NULL),
                      "broker b record 1: its record does not name its own sequence number, previous hash "
                      "and broker (moved or edited)");

    //  A checkpoint's signature removed, or put on a record.
    memcpy (copy, rows, sizeof copy);
    copy [5].sig = NULL;
    ck_assert_str_eq (s_verify (copy, 6, s_key, NULL), "broker a record 6: a checkpoint without its signature");
    memcpy (copy, rows, sizeof copy);
    copy [4].sig = rows [5].sig;
    copy [4].sig_len = rows [5].sig_len;
    ck_assert_str_eq (s_verify (copy, 6, s_key, NULL),
                      "broker a record 5: a signature on a record that is no checkpoint");
    keystore_audit_rows_free (rows, count);
}
END_TEST

//  The signature binds broker, sequence number and hash.
START_TEST (test_checkpoint_binding)
{
    uint8_t hash [KEYSTORE_AUDIT_HASH_LEN] = { 1, 2, 3 }, sig [KEYSTORE_AUDIT_SIG_LEN];
    ck_assert_int_eq (keystore_audit_sign (s_key, "a", 7, hash, sig), 0);
    ck_assert (keystore_audit_check (s_key, "a", 7, hash, sig, sizeof sig));
    ck_assert (!keystore_audit_check (s_key, "b", 7, hash, sig, sizeof sig));
    ck_assert (!keystore_audit_check (s_key, "a", 8, hash, sig, sizeof sig));
    hash [0] ^= 1;
    ck_assert (!keystore_audit_check (s_key, "a", 7, hash, sig, sizeof sig));
    hash [0] ^= 1;
    ck_assert (!keystore_audit_check (s_other, "a", 7, hash, sig, sizeof sig));
    ck_assert (!keystore_audit_check (s_key, "a", 7, hash, sig, sizeof sig - 1));
}
END_TEST

//  The audit key file: 64 hex digits in a private file.
START_TEST (test_key_file)
{
    char path [160], why [400];
    snprintf (path, sizeof path, "%s/audit.key", s_dir);
    FILE *file = fopen (path, "w");
    ck_assert_ptr_nonnull (file);
    fprintf (file, "%s\n", "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60");   //  RFC 8032 7.1 test 1
    fclose (file);
    ck_assert_int_eq (chmod (path, 0644), 0);
    ck_assert_ptr_null (keystore_audit_key_read (path, why, sizeof why));
    ck_assert_msg (strstr (why, "can be read by group or others (mode 0644): chmod 600"), "%s", why);
    ck_assert_int_eq (chmod (path, 0600), 0);
    EVP_PKEY *key = keystore_audit_key_read (path, why, sizeof why);
    ck_assert_ptr_nonnull (key);
    uint8_t pub [32];
    size_t len = sizeof pub;
    ck_assert_int_eq (EVP_PKEY_get_raw_public_key (key, pub, &len), 1);
    ck_assert_uint_eq (pub [0], 0xd7);          //  RFC 8032 7.1 test 1: d75a9801...
    ck_assert_uint_eq (pub [1], 0x5a);
    EVP_PKEY_free (key);
    file = fopen (path, "w");
    fprintf (file, "not hex\n");
    fclose (file);
    ck_assert_ptr_null (keystore_audit_key_read (path, why, sizeof why));
    ck_assert_msg (strstr (why, "must hold 64 hex digits"), "%s", why);
}
END_TEST

//  A keystore at schema 5 (its state record says so) is refused as it is
//  and gets the audit table from keystore_upgrade, once.
START_TEST (test_upgrade_5_to_6)
{
    keystore_t *ks = keystore_open (s_path, s_master);
    ck_assert_ptr_nonnull (ks);
    ck_assert_int_eq (keystore_tenant_add (ks, "alice", "1234", 4, "123456", 6), 0);
    uint64_t schema = 0, counter = 0;
    uint8_t digest [32];
    ck_assert_int_eq (ks_state_get (ks, &schema, &counter, digest), 1);
    ck_assert_uint_eq (schema, 7);
    ck_assert_int_eq (ks->be->begin (ks->store), 0);
    ck_assert_int_eq (ks_state_put (ks, 5, counter, digest), 0);
    ck_assert_int_eq (ks->be->version_set (ks->store, 5), 0);
    ck_assert_int_eq (ks->be->end (ks->store, true), 0);
    keystore_destroy (&ks);
    s_sql ("DROP TABLE audit");
    ck_assert_ptr_null (keystore_open (s_path, s_master));
    keystore_audit_row_t *rows = NULL;
    size_t count = 0;
    ck_assert_int_eq (keystore_audit_read (s_path, &rows, &count), -1);       //  no table
    ck_assert_int_eq (keystore_upgrade (s_path, s_master, NULL), 5);
    ck_assert_int_eq (keystore_upgrade (s_path, s_master, NULL), 0);
    ks = keystore_open (s_path, s_master);
    ck_assert_ptr_nonnull (ks);
    ck_assert_int_eq (keystore_pin_check (ks, "alice", CKU_USER, "1234", 4, NULL), CKR_OK);
    s_append (ks, "a", 1, true);
    keystore_destroy (&ks);
    rows = s_read (&count);
    ck_assert_uint_eq (count, 2);
    ck_assert_str_eq (s_verify (rows, count, s_key, NULL), "");
    keystore_audit_rows_free (rows, count);
}
END_TEST

//  The state record vouches for every checkpoint: a chain cut back behind
//  one (its checkpoint row deleted) no longer opens; records after the last
//  checkpoint are not covered (cryptoserver-audit(5)).
START_TEST (test_cut_back_refused)
{
    keystore_t *ks = keystore_open (s_path, s_master);
    ck_assert_ptr_nonnull (ks);
    s_append (ks, "a", 2, true);            //  1 2 ckpt3
    s_append (ks, "a", 2, false);           //  4 5
    keystore_destroy (&ks);
    s_sql ("DELETE FROM audit WHERE seq > 3");
    ks = keystore_open (s_path, s_master);
    ck_assert_ptr_nonnull (ks);             //  the unsigned tail: not caught
    keystore_destroy (&ks);
    s_sql ("DELETE FROM audit WHERE seq = 3");
    ck_assert_ptr_null (keystore_open (s_path, s_master));
}
END_TEST

int
main (void)
{
    Suite *suite = suite_create ("keystore_audit");
    TCase *tc = tcase_create ("sqlite");
    tcase_add_checked_fixture (tc, s_setup, s_teardown);
    tcase_set_timeout (tc, 60);
    tcase_add_test (tc, test_chain_verifies);
    tcase_add_test (tc, test_tamper_caught);
    tcase_add_test (tc, test_checkpoint_binding);
    tcase_add_test (tc, test_key_file);
    tcase_add_test (tc, test_upgrade_5_to_6);
    tcase_add_test (tc, test_cut_back_refused);
    suite_add_tcase (suite, tc);
    SRunner *runner = srunner_create (suite);
    srunner_run_all (runner, CK_NORMAL);
    int failed = srunner_ntests_failed (runner);
    srunner_free (runner);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
