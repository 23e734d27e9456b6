/*  test_keystore.c — the keystore (keystore/keystore.h) and key descriptions
 *  (keystore/key_info.c) against real SQLite files in a temporary directory:
 *  round trips, encryption at rest (no plaintext window in the file or its
 *  WAL), the master key check, associated data binding, PIN counters,
 *  flags and epochs, key versions, tenant removal, rows changed without the
 *  master key (refused), and the upgrade of a schema 1 file.
 *
 *  With CS_TEST_PG_URL set (tests/integration/keystore-pg.sh starts a
 *  private PostgreSQL cluster and sets it), the same tests run against the
 *  PostgreSQL back end too (test case "postgresql": rows changed with SQL
 *  behind the keystore's back, plaintext windows looked for in every file
 *  of the cluster's data directory CS_TEST_PG_DATA), with its own tests of
 *  schema versions and change notifications.
 */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif
#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <czmq.h>
#include <sqlite3.h>
#include <openssl/bn.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/x509.h>
#include "cs_util.h"
#include "cs_secmem.h"
#include "keystore.h"
#include "key_info.h"
#include "ks_sql.h"
#include "test_smaps.h"
#ifdef HAVE_LIBPQ
#include <libpq-fe.h>
#endif

#define WINDOW 16       /* bytes of plaintext that must never appear in a file */

static char s_dir [64];
static char s_path [1024];          /* the keystore's location: a file, or CS_TEST_PG_URL */
static uint8_t s_master [KEYSTORE_MASTER_KEY_LEN];
static const char *s_pg_url;        /* test case "postgresql": its database */

static void s_sql (const char *sql, int changes);

static void
s_setup (void)
{
    strcpy (s_dir, "/tmp/test_keystore.XXXXXX");
    ck_assert_ptr_nonnull (mkdtemp (s_dir));
    snprintf (s_path, sizeof s_path, "%s/keystore.db", s_dir);
    for (size_t i = 0; i < sizeof s_master; i++)
        s_master [i] = (uint8_t) (i * 7 + 1);
    s_pg_url = NULL;
}

//  The same for the PostgreSQL back end: an empty database.
static void __attribute__ ((unused))
s_setup_pg (void)
{
    s_setup ();
    s_pg_url = getenv ("CS_TEST_PG_URL");
    ck_assert_ptr_nonnull (s_pg_url);
    snprintf (s_path, sizeof s_path, "%s", s_pg_url);
    s_sql ("DROP SCHEMA public CASCADE; CREATE SCHEMA public", -1);
}

static void
s_teardown (void)
{
    char cmd [160];
    snprintf (cmd, sizeof cmd, "rm -rf '%s'", s_dir);
    ck_assert_int_eq (system (cmd), 0);
}

static EVP_PKEY *
s_keygen (const char *type, const char *param)
{
    EVP_PKEY *pkey = NULL;
    if (streq (type, "RSA"))
        pkey = EVP_PKEY_Q_keygen (NULL, NULL, "RSA", (size_t) atoi (param));
    else
    if (streq (type, "EC"))
        pkey = EVP_PKEY_Q_keygen (NULL, NULL, "EC", param);
    else
        pkey = EVP_PKEY_Q_keygen (NULL, NULL, type);
    ck_assert_ptr_nonnull (pkey);
    return pkey;
}

static keystore_t *
s_open_with_tenant (const char *tenant)
{
    keystore_t *ks = keystore_open (s_path, s_master);
    ck_assert_ptr_nonnull (ks);
    if (tenant)
        ck_assert_int_eq (keystore_tenant_add (ks, tenant, "1234", 4, "123456", 6), 0);
    return ks;
}

//  Stores pkey for tenant as label; returns its ref (caller frees).
static char *
s_put (keystore_t *ks, const char *tenant, EVP_PKEY *pkey, const char *label)
{
    key_info_params_t params = { .label = label, .generated = true };
    Cs__KeyInfo *info = key_info_from_pkey (pkey, &params);
    ck_assert_ptr_nonnull (info);
    size_t len = 0;
    uint8_t *der = cs_pkey_to_pkcs8 (pkey, &len);
    ck_assert_ptr_nonnull (der);
    ck_assert_int_eq (keystore_key_put (ks, tenant, info, der, len), 0);
    char *ref = strdup (info->ref);
    OPENSSL_cleanse (der, len);
    free (der);
    cs__key_info__free_unpacked (info, NULL);
    return ref;
}

//  True when some WINDOW-byte run of secret (len bytes) occurs in file path.
static bool
s_file_has_window (const char *path, const uint8_t *secret, size_t len)
{
    FILE *file = fopen (path, "rb");
    if (!file)
        return false;
    zchunk_t *chunk = zchunk_read (file, 64 * 1024 * 1024);
    fclose (file);
    bool found = false;
    const uint8_t *data = zchunk_data (chunk);
    size_t size = zchunk_size (chunk);
    for (size_t i = 0; i + WINDOW <= len && !found; i++)
        found = memmem (data, size, secret + i, WINDOW) != NULL;
    zchunk_destroy (&chunk);
    return found;
}

/*  The row layer's table descriptions (ks_tables.c) are those of the
 *  schema each back end makes (issue #20): every table and column they
 *  name exists in a new keystore, and every statement names only them.  */
START_TEST (test_table_descriptions)
{
    keystore_t *ks = s_open_with_tenant (NULL);
    keystore_destroy (&ks);
    const ks_backend_t *be = ks_backend_for (s_path);
    ck_assert_ptr_nonnull (be);
    ks_store_t *store = be->open (s_path);
    ck_assert_ptr_nonnull (store);
    ck_assert_int_eq (be->begin (store), 0);
    size_t tables = 0;
    for (const ks_table_t *t = ks_tables; t->name; t++, tables++) {
        ck_assert_msg (be->has (store, t->name, NULL) == 1, "table %s", t->name);
        for (const ks_col_t *c = t->cols; c->name; c++)
            ck_assert_msg (be->has (store, t->name, c->name) == 1, "column %s.%s", t->name, c->name);
    }
    ck_assert_uint_eq (tables, 7);
    for (int q = 0; q < KS_Q_COUNT; q++) {
        ck_assert_msg (ks_stmts [q].sql != NULL, "statement %d", q);
        const char *from = strstr (ks_stmts [q].sql, "FROM ") ? strstr (ks_stmts [q].sql, "FROM ") + 5
                         : strstr (ks_stmts [q].sql, "INTO ") ? strstr (ks_stmts [q].sql, "INTO ") + 5
                         : strstr (ks_stmts [q].sql, "UPDATE ") + 7;
        bool known = false;
        for (const ks_table_t *t = ks_tables; t->name && !known; t++)
            known = strncmp (from, t->name, strlen (t->name)) == 0
                 && (from [strlen (t->name)] == ' ' || !from [strlen (t->name)]);
        ck_assert_msg (known, "statement %d: %s", q, ks_stmts [q].sql);
    }
    ck_assert_int_eq (be->end (store, false), 0);
    be->close (&store);
}
END_TEST

/*  The master key rotation (issue #22 item 3): every sealed row, the data
 *  key and the check value under the new key in one transaction; the PINs
 *  and MACs unchanged; a handle of the old key has its writes refused; the
 *  old key no longer opens the keystore, and an old copy with the old key
 *  is refused by the counter file.  */
START_TEST (test_master_rotate)
{
    char counter [1100], old_copy [1100], cmd [2300];
    snprintf (counter, sizeof counter, "%s/" KEYSTORE_COUNTER_FILE, s_dir);
    snprintf (old_copy, sizeof old_copy, "%s/old.db", s_dir);
    uint8_t next [KEYSTORE_MASTER_KEY_LEN];
    for (size_t i = 0; i < sizeof next; i++)
        next [i] = (uint8_t) (i * 11 + 3);
    keystore_t *ks = keystore_open_counted (s_path, s_master, counter);
    ck_assert_ptr_nonnull (ks);
    ck_assert_int_eq (keystore_tenant_add (ks, "alice", "1234", 4, "123456", 6), 0);
    EVP_PKEY *pkey = s_keygen ("EC", "P-256");
    char *ref = s_put (ks, "alice", pkey, "k");
    size_t want_len = 0;
    uint8_t *want = cs_pkey_to_pkcs8 (pkey, &want_len);
    keystore_destroy (&ks);
    snprintf (cmd, sizeof cmd, "cp '%s' '%s'", s_path, old_copy);
    if (!s_pg_url)                      //  PostgreSQL: keystore-pg-rollback.sh's dumps
        ck_assert_int_eq (system (cmd), 0);

    keystore_t *other = keystore_open_counted (s_path, s_master, counter);     //  another broker
    ks = keystore_open_counted (s_path, s_master, counter);
    ck_assert_ptr_nonnull (other);
    ck_assert_ptr_nonnull (ks);
    ck_assert_int_eq (keystore_master_rotate (ks, next), 0);
    uint8_t *der = NULL;
    size_t len = 0;
    Cs__KeyInfo *info = NULL;
    ck_assert_int_eq (keystore_key_get (ks, "alice", ref, &info, &der, &len), 0);
    ck_assert (len == want_len && memcmp (der, want, len) == 0);
    cs__key_info__free_unpacked (info, NULL);
    OPENSSL_cleanse (der, len);
    free (der);
    ck_assert_int_ne (keystore_tenant_add (other, "bob", "1234", 4, "123456", 6), 0);
    keystore_destroy (&other);
    keystore_destroy (&ks);

    ck_assert_ptr_null (keystore_open_counted (s_path, s_master, counter));     //  the old key
    ks = keystore_open_counted (s_path, next, counter);
    ck_assert_ptr_nonnull (ks);
    ck_assert_int_eq (keystore_key_get (ks, "alice", ref, &info, &der, &len), 0);
    ck_assert (len == want_len && memcmp (der, want, len) == 0);
    cs__key_info__free_unpacked (info, NULL);
    OPENSSL_cleanse (der, len);
    free (der);
    ck_assert_uint_eq (keystore_pin_check (ks, "alice", CKU_USER, "1234", 4, NULL), CKR_OK);
    ck_assert_int_eq (keystore_tenant_add (ks, "bob", "1234", 4, "123456", 6), 0);
    keystore_destroy (&ks);
    //  The copy taken before, with the key it was made with.
    if (!s_pg_url)
        ck_assert_ptr_null (keystore_open_counted (old_copy, s_master, counter));
    OPENSSL_cleanse (want, want_len);
    free (want);
    free (ref);
    EVP_PKEY_free (pkey);
}
END_TEST

/*  A rotation never vouches for a row changed without the master key: one
 *  key row whose info was edited (its MAC column, and so the row digest,
 *  as before) makes the whole rotation roll back.  */
START_TEST (test_master_rotate_tampered)
{
    uint8_t next [KEYSTORE_MASTER_KEY_LEN];
    memset (next, 0x5a, sizeof next);
    keystore_t *ks = s_open_with_tenant ("alice");
    EVP_PKEY *pkey = s_keygen ("EC", "P-256");
    char *ref = s_put (ks, "alice", pkey, "k");
    keystore_destroy (&ks);
    s_sql ("UPDATE keys SET info = info || x'00'", 1);
    ks = keystore_open (s_path, s_master);
    ck_assert_ptr_nonnull (ks);
    ck_assert_int_eq (keystore_master_rotate (ks, next), -1);
    keystore_destroy (&ks);
    ck_assert_ptr_null (keystore_open (s_path, next));
    ks = keystore_open (s_path, s_master);
    ck_assert_ptr_nonnull (ks);
    keystore_destroy (&ks);
    free (ref);
    EVP_PKEY_free (pkey);
}
END_TEST

START_TEST (test_key_round_trip)
{
    keystore_t *ks = s_open_with_tenant ("alice");
    EVP_PKEY *pkey = s_keygen ("EC", "P-256");
    char *ref = s_put (ks, "alice", pkey, "my key");
    Cs__KeyInfo *info = NULL;
    uint8_t *der = NULL;
    size_t len = 0;
    ck_assert_int_eq (keystore_key_get (ks, "alice", ref, &info, &der, &len), 0);
    ck_assert_str_eq (info->label, "my key");
    ck_assert_str_eq (info->ref, ref);
    ck_assert_str_eq (info->home, "keystore");
    EVP_PKEY *back = cs_pkey_from_pkcs8 (der, len);
    ck_assert_ptr_nonnull (back);
    ck_assert_int_eq (EVP_PKEY_eq (back, pkey), 1);
    //  Unknown refs and tenants give -1.
    Cs__KeyInfo *none = NULL;
    ck_assert_int_eq (keystore_key_get (ks, "alice", "ks:nope", &none, NULL, NULL), -1);
    ck_assert_int_eq (keystore_key_get (ks, "bob", ref, &none, NULL, NULL), -1);
    ck_assert_ptr_null (none);
    //  A second put of the same ref is refused.
    ck_assert_int_eq (keystore_key_put (ks, "alice", info, der, len), -1);
    //  Update keeps the private key; list shows the new label.
    free (info->label);
    info->label = strdup ("renamed");
    ck_assert_int_eq (keystore_key_update (ks, "alice", info), 0);
    Cs__KeyInfo **infos = NULL;
    size_t count = 0;
    ck_assert_int_eq (keystore_key_list (ks, "alice", &infos, &count), 0);
    ck_assert_uint_eq (count, 1);
    ck_assert_str_eq (infos [0]->label, "renamed");
    cs__key_info__free_unpacked (infos [0], NULL);
    free (infos);
    ck_assert_int_eq (keystore_key_delete (ks, "alice", ref), 0);
    ck_assert_int_eq (keystore_key_delete (ks, "alice", ref), -1);
    ck_assert_int_eq (keystore_key_list (ks, "alice", &infos, &count), 0);
    ck_assert_uint_eq (count, 0);
    free (infos);
    OPENSSL_cleanse (der, len);
    free (der);
    cs__key_info__free_unpacked (info, NULL);
    EVP_PKEY_free (back);
    EVP_PKEY_free (pkey);
    free (ref);
    keystore_destroy (&ks);
    ck_assert_ptr_null (ks);
}
END_TEST

//  The private components of an RSA key (d, p, q, dP, dQ, qInv: RFC 8017
//  §3.2) as one buffer of big-endian numbers, *len_p bytes; caller frees.
//  The PKCS#8 also holds n and e, which are public and stored in the clear
//  (KeyInfo), so windows are looked for in the private numbers only.
static uint8_t *
s_rsa_private_numbers (EVP_PKEY *pkey, size_t *len_p)
{
    static const char *names [] = { "d", "rsa-factor1", "rsa-factor2", "rsa-exponent1",
                                    "rsa-exponent2", "rsa-coefficient1", NULL };
    uint8_t *out = malloc (4096);
    size_t len = 0;
    for (int i = 0; names [i]; i++) {
        BIGNUM *bn = NULL;
        ck_assert_int_eq (EVP_PKEY_get_bn_param (pkey, names [i], &bn), 1);
        len += (size_t) BN_bn2bin (bn, out + len);
        BN_clear_free (bn);
    }
    *len_p = len;
    return out;
}

START_TEST (test_no_plaintext_on_disk)
{
    keystore_t *ks = s_open_with_tenant ("alice");
    EVP_PKEY *pkey = s_keygen ("RSA", "2048");
    size_t len = 0, der_len = 0;
    uint8_t *secret = s_rsa_private_numbers (pkey, &len);
    uint8_t *der = cs_pkey_to_pkcs8 (pkey, &der_len);
    ck_assert_uint_gt (len, 5 * 128);
    char *ref = s_put (ks, "alice", pkey, "rsa");
    char wal [sizeof s_path + 8];
    snprintf (wal, sizeof wal, "%s-wal", s_path);
    //  While open, the row is in the WAL; after close, in the database.
    struct stat st;
    ck_assert_int_eq (stat (wal, &st), 0);
    ck_assert_int_gt (st.st_size, 0);
    ck_assert (!s_file_has_window (wal, secret, len));
    ck_assert (!s_file_has_window (s_path, secret, len));
    ck_assert (!s_file_has_window (wal, der + der_len - 200, 200));
    keystore_destroy (&ks);
    ck_assert (!s_file_has_window (s_path, secret, len));
    ck_assert (!s_file_has_window (wal, secret, len));
    //  The scan finds what is there: the public modulus is stored in the clear.
    ck_assert (s_file_has_window (s_path, der + 40, 64));
    //  The file is 0600.
    ck_assert_int_eq (stat (s_path, &st), 0);
    ck_assert_int_eq (st.st_mode & 0777, 0600);
    OPENSSL_cleanse (secret, len);
    OPENSSL_cleanse (der, der_len);
    free (secret);
    free (der);
    free (ref);
    EVP_PKEY_free (pkey);
}
END_TEST

START_TEST (test_wrong_master_key)
{
    keystore_t *ks = s_open_with_tenant ("alice");
    keystore_destroy (&ks);
    uint8_t other [KEYSTORE_MASTER_KEY_LEN];
    memcpy (other, s_master, sizeof other);
    other [31] ^= 1;
    ck_assert_ptr_null (keystore_open (s_path, other));
    ks = keystore_open (s_path, s_master);
    ck_assert_ptr_nonnull (ks);
    ck_assert (keystore_tenant_exists (ks, "alice"));
    keystore_destroy (&ks);
}
END_TEST

//  Copies the key row (tenant, ref) to (to_tenant, to_ref) behind the
//  keystore's back, as an attacker with write access to the file could.
static void
s_copy_row (const char *tenant, const char *ref, const char *to_tenant, const char *to_ref)
{
    char *sql = sqlite3_mprintf ("INSERT INTO keys (tenant, ref, info, private, mac) "
                                 "SELECT %Q, %Q, info, private, mac FROM keys WHERE tenant = %Q AND ref = %Q",
                                 to_tenant, to_ref, tenant, ref);
    s_sql (sql, 1);
    sqlite3_free (sql);
}

//  The SQL of the back end under test: SQLite's or PostgreSQL's.
static const char *
s_dialect (const char *sqlite, const char *pg)
{
    return s_pg_url ? pg : sqlite;
}

START_TEST (test_moved_row_does_not_decrypt)
{
    keystore_t *ks = s_open_with_tenant ("alice");
    ck_assert_int_eq (keystore_tenant_add (ks, "bob", "1234", 4, "123456", 6), 0);
    EVP_PKEY *pkey = s_keygen ("ED25519", NULL);
    char *ref = s_put (ks, "alice", pkey, "ed");
    s_copy_row ("alice", ref, "alice", "ks:00000000000000000000000000000000");
    s_copy_row ("alice", ref, "bob", ref);
    Cs__KeyInfo *info = NULL;
    uint8_t *der = NULL;
    size_t len = 0;
    ck_assert_int_eq (keystore_key_get (ks, "alice", "ks:00000000000000000000000000000000",
                                        &info, &der, &len), KEYSTORE_DAMAGED);
    ck_assert_int_eq (keystore_key_get (ks, "bob", ref, &info, &der, &len), KEYSTORE_DAMAGED);
    ck_assert_ptr_null (der);
    //  The row's MAC covers its identity: the public description of a moved
    //  row does not read either, and lists leave it out.
    ck_assert_int_eq (keystore_key_get (ks, "bob", ref, &info, NULL, NULL), KEYSTORE_DAMAGED);
    Cs__KeyInfo **infos = NULL;
    size_t count = 9;
    ck_assert_int_eq (keystore_key_list (ks, "bob", &infos, &count), 0);
    ck_assert_uint_eq (count, 0);
    free (infos);
    //  The original still works.
    ck_assert_int_eq (keystore_key_get (ks, "alice", ref, &info, &der, &len), 0);
    ck_assert_uint_gt (len, 0);
    OPENSSL_cleanse (der, len);
    free (der);
    cs__key_info__free_unpacked (info, NULL);
    free (ref);
    EVP_PKEY_free (pkey);
    keystore_destroy (&ks);
}
END_TEST

START_TEST (test_pin_counters_and_lock)
{
    keystore_t *ks = s_open_with_tenant ("alice");
    ck_assert_uint_eq (keystore_pin_flags (ks, "alice"), 0);
    ck_assert_uint_eq (keystore_pin_check (ks, "alice", CKU_USER, "1234", 4, NULL), CKR_OK);
    ck_assert_uint_eq (keystore_pin_check (ks, "alice", CKU_USER, "9999", 4, NULL), CKR_PIN_INCORRECT);
    ck_assert_uint_eq (keystore_pin_flags (ks, "alice"), CKF_USER_PIN_COUNT_LOW);
    //  A right PIN resets the count.
    ck_assert_uint_eq (keystore_pin_check (ks, "alice", CKU_USER, "1234", 4, NULL), CKR_OK);
    ck_assert_uint_eq (keystore_pin_flags (ks, "alice"), 0);
    //  5 wrong PINs in a row lock (cryptoserver-keystore(5); a literal, so
    //  that a change of KEYSTORE_PIN_MAX_FAILURES fails here): 4, the final try...
    for (int i = 1; i < 5; i++)
        ck_assert_uint_eq (keystore_pin_check (ks, "alice", CKU_USER, "9999", 4, NULL), CKR_PIN_INCORRECT);
    ck_assert_uint_eq (keystore_pin_flags (ks, "alice"), CKF_USER_PIN_COUNT_LOW | CKF_USER_PIN_FINAL_TRY);
    ck_assert_uint_eq (keystore_pin_check (ks, "alice", CKU_USER, "9999", 4, NULL), CKR_PIN_INCORRECT);
    ck_assert_uint_eq (keystore_pin_flags (ks, "alice"), CKF_USER_PIN_COUNT_LOW | CKF_USER_PIN_LOCKED);
    ck_assert_uint_eq (keystore_pin_check (ks, "alice", CKU_USER, "1234", 4, NULL), CKR_PIN_LOCKED);
    ck_assert_uint_eq (keystore_pin_check (ks, "alice", CKU_USER, "9999", 4, NULL), CKR_PIN_LOCKED);
    //  The count is durable: a new connection sees the lock.
    keystore_destroy (&ks);
    ks = keystore_open (s_path, s_master);
    ck_assert_uint_eq (keystore_pin_check (ks, "alice", CKU_USER, "1234", 4, NULL), CKR_PIN_LOCKED);
    //  The SO is not affected; one wrong SO PIN shows in the SO flags.
    ck_assert_uint_eq (keystore_pin_check (ks, "alice", CKU_SO, "123456", 6, NULL), CKR_OK);
    ck_assert_uint_eq (keystore_pin_check (ks, "alice", CKU_SO, "000000", 6, NULL), CKR_PIN_INCORRECT);
    ck_assert (keystore_pin_flags (ks, "alice") & CKF_SO_PIN_COUNT_LOW);
    //  C_InitPIN: a new user PIN unlocks.
    ck_assert_uint_eq (keystore_pin_set (ks, "alice", CKU_USER, "4321", 4, NULL), CKR_OK);
    ck_assert_uint_eq (keystore_pin_flags (ks, "alice") & 0xffff0000UL & ~(CKF_SO_PIN_COUNT_LOW), 0);
    ck_assert_uint_eq (keystore_pin_check (ks, "alice", CKU_USER, "1234", 4, NULL), CKR_PIN_INCORRECT);
    ck_assert_uint_eq (keystore_pin_check (ks, "alice", CKU_USER, "4321", 4, NULL), CKR_OK);
    //  Errors.
    ck_assert_uint_eq (keystore_pin_set (ks, "alice", CKU_USER, "12", 2, NULL), CKR_PIN_LEN_RANGE);
    ck_assert_uint_eq (keystore_pin_check (ks, "alice", 7, "1234", 4, NULL), CKR_USER_TYPE_INVALID);
    ck_assert_uint_eq (keystore_pin_check (ks, "nobody", CKU_USER, "1234", 4, NULL), CKR_DEVICE_ERROR);
    ck_assert_uint_eq (keystore_pin_set (ks, "nobody", CKU_USER, "1234", 4, NULL), CKR_DEVICE_ERROR);
    ck_assert_uint_eq (keystore_pin_flags (ks, "nobody"), 0);
    keystore_destroy (&ks);
}
END_TEST

START_TEST (test_keys_version)
{
    keystore_t *ks = s_open_with_tenant ("alice");
    ck_assert_int_eq (keystore_tenant_add (ks, "bob", "1234", 4, "123456", 6), 0);
    uint64_t v0 = keystore_keys_version (ks, "alice"), b0 = keystore_keys_version (ks, "bob");
    ck_assert_uint_gt (v0, 0);
    ck_assert_uint_eq (keystore_keys_version (ks, "nobody"), 0);
    EVP_PKEY *pkey = s_keygen ("EC", "P-384");
    char *ref = s_put (ks, "alice", pkey, "k");
    uint64_t v1 = keystore_keys_version (ks, "alice");
    ck_assert_uint_gt (v1, v0);
    ck_assert_uint_eq (keystore_keys_version (ks, "bob"), b0);
    Cs__KeyInfo *info = NULL;
    ck_assert_int_eq (keystore_key_get (ks, "alice", ref, &info, NULL, NULL), 0);
    ck_assert_int_eq (keystore_key_update (ks, "alice", info), 0);
    uint64_t v2 = keystore_keys_version (ks, "alice");
    ck_assert_uint_gt (v2, v1);
    ck_assert_int_eq (keystore_key_delete (ks, "alice", ref), 0);
    ck_assert_uint_gt (keystore_keys_version (ks, "alice"), v2);
    //  A failed change does not move the version.
    uint64_t v3 = keystore_keys_version (ks, "alice");
    ck_assert_int_eq (keystore_key_update (ks, "alice", info), -1);
    ck_assert_uint_eq (keystore_keys_version (ks, "alice"), v3);
    //  A tenant removed and added again never repeats a version.
    ck_assert_int_eq (keystore_tenant_remove (ks, "alice"), 0);
    ck_assert_int_eq (keystore_tenant_add (ks, "alice", "1234", 4, "123456", 6), 0);
    ck_assert_uint_gt (keystore_keys_version (ks, "alice"), v3);
    cs__key_info__free_unpacked (info, NULL);
    free (ref);
    EVP_PKEY_free (pkey);
    keystore_destroy (&ks);
}
END_TEST

/*  keystore_key_page (issue #25, docs/CONTRACTS.md "Key lists in pages"):
 *  pages of 10 over 25 keys are 10, 10, 5 keys in ref order, each key once,
 *  the same set as keystore_key_list; the cursor is the page's last ref;
 *  another tenant's keys never appear; bad arguments are -1.  */
START_TEST (test_key_page)
{
    keystore_t *ks = s_open_with_tenant ("alice");
    ck_assert_int_eq (keystore_tenant_add (ks, "bob", "1234", 4, "123456", 6), 0);
    EVP_PKEY *pkey = s_keygen ("EC", "P-256");
    zhash_t *refs = zhash_new ();
    for (int i = 0; i < 25; i++) {
        char label [16];
        snprintf (label, sizeof label, "k%d", i);
        char *ref = s_put (ks, "alice", pkey, label);
        zhash_insert (refs, ref, "alice");
        free (ref);
    }
    free (s_put (ks, "bob", pkey, "bob's"));
    char *after = strdup (""), *next = NULL;
    size_t sizes [4] = { 0 }, pages = 0;
    char last [129] = "";
    do {
        Cs__KeyInfo **infos = NULL;
        size_t n = 0;
        ck_assert_uint_lt (pages, 4);
        ck_assert_int_eq (keystore_key_page (ks, "alice", after, 10, &infos, &n, &next), 0);
        sizes [pages++] = n;
        for (size_t i = 0; i < n; i++) {
            ck_assert_str_gt (infos [i]->ref, last);                     //  ref order, no repeat
            snprintf (last, sizeof last, "%s", infos [i]->ref);
            ck_assert_ptr_nonnull (zhash_lookup (refs, infos [i]->ref));   //  alice's, listed once
            zhash_delete (refs, infos [i]->ref);
            cs__key_info__free_unpacked (infos [i], NULL);
        }
        free (infos);
        if (next)
            ck_assert_str_eq (next, last);
        free (after);
        after = next;
    } while (after);
    ck_assert_uint_eq (pages, 3);
    ck_assert_uint_eq (sizes [0], 10);
    ck_assert_uint_eq (sizes [1], 10);
    ck_assert_uint_eq (sizes [2], 5);
    ck_assert_uint_eq (zhash_size (refs), 0);
    Cs__KeyInfo **infos = NULL;
    size_t n = 9;
    ck_assert_int_eq (keystore_key_page (ks, "alice", "", 0, &infos, &n, &next), -1);
    ck_assert_int_eq (keystore_key_page (ks, "alice", NULL, 10, &infos, &n, &next), -1);
    ck_assert_int_eq (keystore_key_page (ks, "nobody", "", 10, &infos, &n, &next), 0);
    ck_assert_uint_eq (n, 0);
    ck_assert_ptr_null (next);
    free (infos);
    zhash_destroy (&refs);
    EVP_PKEY_free (pkey);
    keystore_destroy (&ks);
}
END_TEST

START_TEST (test_tenants)
{
    keystore_t *ks = s_open_with_tenant ("bob");
    ck_assert_int_eq (keystore_tenant_add (ks, "alice", "1234", 4, "123456", 6), 0);
    ck_assert_int_eq (keystore_tenant_add (ks, "alice", "1234", 4, "123456", 6), -1);
    ck_assert_int_eq (keystore_tenant_add (ks, "", "1234", 4, "123456", 6), -1);
    ck_assert_int_eq (keystore_tenant_add (ks, "x", "12", 2, "123456", 6), -1);
    ck_assert_int_eq (keystore_tenant_add (ks, "123456789012345678901234567890123",
                                           "1234", 4, "123456", 6), -1);
    char **names = keystore_tenant_list (ks);
    ck_assert_ptr_nonnull (names);
    ck_assert_str_eq (names [0], "alice");
    ck_assert_str_eq (names [1], "bob");
    ck_assert_ptr_null (names [2]);
    for (int i = 0; names [i]; i++)
        free (names [i]);
    free (names);
    //  Keys of a tenant go with it; the other tenant keeps its own.
    EVP_PKEY *pkey = s_keygen ("EC", "P-256");
    char *a = s_put (ks, "alice", pkey, "a"), *b = s_put (ks, "bob", pkey, "b");
    ck_assert_int_eq (keystore_tenant_remove (ks, "alice"), 0);
    ck_assert_int_eq (keystore_tenant_remove (ks, "alice"), -1);
    ck_assert (!keystore_tenant_exists (ks, "alice"));
    ck_assert_int_eq (keystore_tenant_add (ks, "alice", "1234", 4, "123456", 6), 0);
    Cs__KeyInfo **infos = NULL;
    size_t count = 9;
    ck_assert_int_eq (keystore_key_list (ks, "alice", &infos, &count), 0);
    ck_assert_uint_eq (count, 0);
    free (infos);
    Cs__KeyInfo *info = NULL;
    ck_assert_int_eq (keystore_key_get (ks, "alice", a, &info, NULL, NULL), -1);
    ck_assert_int_eq (keystore_key_get (ks, "bob", b, &info, NULL, NULL), 0);
    cs__key_info__free_unpacked (info, NULL);
    //  Keys need an existing tenant.
    key_info_params_t params = { .label = "x" };
    info = key_info_from_pkey (pkey, &params);
    ck_assert_int_eq (keystore_key_put (ks, "nobody", info, NULL, 0), -1);
    cs__key_info__free_unpacked (info, NULL);
    free (a);
    free (b);
    EVP_PKEY_free (pkey);
    keystore_destroy (&ks);
}
END_TEST

//  Runs sql on the keystore file behind the keystore's back (as an attacker
//  with write access to keystore.db but without the master key could);
//  fails the test unless exactly `changes` rows changed (-1: any).
static void
s_sql (const char *sql, int changes)
{
#ifdef HAVE_LIBPQ
    if (s_pg_url) {
        PGconn *conn = PQconnectdb (s_pg_url);
        ck_assert_int_eq (PQstatus (conn), CONNECTION_OK);
        PGresult *res = PQexec (conn, sql);
        ck_assert_msg (PQresultStatus (res) == PGRES_COMMAND_OK || PQresultStatus (res) == PGRES_TUPLES_OK,
                       "%s: %s", sql, PQerrorMessage (conn));
        if (changes >= 0)
            ck_assert_int_eq (atoi (PQcmdTuples (res)), changes);
        PQclear (res);
        PQfinish (conn);
        return;
    }
#endif
    sqlite3 *db = NULL;
    ck_assert_int_eq (sqlite3_open (s_path, &db), SQLITE_OK);
    sqlite3_busy_timeout (db, 5000);
    ck_assert_msg (sqlite3_exec (db, sql, NULL, NULL, NULL) == SQLITE_OK, "%s: %s", sql, sqlite3_errmsg (db));
    if (changes >= 0)
        ck_assert_int_eq (sqlite3_changes (db), changes);
    sqlite3_close (db);
}

//  The first column of the first row of a query on the file, as a malloc'd
//  string (caller frees), or NULL for SQL NULL or no row.
static char *
s_sql_text (const char *sql)
{
#ifdef HAVE_LIBPQ
    if (s_pg_url) {
        PGconn *conn = PQconnectdb (s_pg_url);
        ck_assert_int_eq (PQstatus (conn), CONNECTION_OK);
        PGresult *res = PQexec (conn, sql);
        ck_assert_msg (PQresultStatus (res) == PGRES_TUPLES_OK, "%s: %s", sql, PQerrorMessage (conn));
        char *text = PQntuples (res) > 0 && !PQgetisnull (res, 0, 0) ? strdup (PQgetvalue (res, 0, 0)) : NULL;
        PQclear (res);
        PQfinish (conn);
        return text;
    }
#endif
    sqlite3 *db = NULL;
    sqlite3_stmt *stmt = NULL;
    char *text = NULL;
    ck_assert_int_eq (sqlite3_open (s_path, &db), SQLITE_OK);
    ck_assert_int_eq (sqlite3_prepare_v2 (db, sql, -1, &stmt, NULL), SQLITE_OK);
    if (sqlite3_step (stmt) == SQLITE_ROW && sqlite3_column_type (stmt, 0) != SQLITE_NULL)
        text = strdup ((const char *) sqlite3_column_text (stmt, 0));
    sqlite3_finalize (stmt);
    sqlite3_close (db);
    return text;
}

//  The PIN epoch of a user type; fails the test when it does not read.
static uint64_t
s_epoch (keystore_t *ks, const char *tenant, CK_USER_TYPE user_type)
{
    uint64_t epoch = 0;
    ck_assert_int_eq (keystore_pin_epoch (ks, tenant, user_type, &epoch), 0);
    return epoch;
}

/*  PIN epochs (login tickets carry them, broker/keys/ticket.h): distinct per
 *  tenant and user type, moved by a set PIN and by a lock, not by a wrong
 *  PIN that does not lock nor by a right one, never repeated by a tenant
 *  removed and added again.  */
START_TEST (test_pin_epochs)
{
    keystore_t *ks = s_open_with_tenant ("alice");
    keystore_pin_state_t state;
    uint64_t user = s_epoch (ks, "alice", CKU_USER), so = s_epoch (ks, "alice", CKU_SO), set = 0;
    ck_assert_uint_gt (user, 0);
    ck_assert_uint_ne (user, so);
    ck_assert_uint_eq (keystore_pin_check (ks, "alice", CKU_USER, "1234", 4, &state), CKR_OK);
    ck_assert_int_eq (state.failures, 0);
    ck_assert_uint_eq (state.epoch, user);
    ck_assert_uint_eq (keystore_pin_check (ks, "alice", CKU_USER, "9999", 4, &state), CKR_PIN_INCORRECT);
    ck_assert_int_eq (state.failures, 1);
    ck_assert_uint_eq (s_epoch (ks, "alice", CKU_USER), user);
    //  C_SetPIN / C_InitPIN: a new epoch, told to the caller; the other
    //  user type keeps its own.
    ck_assert_uint_eq (keystore_pin_set (ks, "alice", CKU_USER, "4321", 4, &set), CKR_OK);
    ck_assert_uint_gt (set, user);
    ck_assert_uint_eq (s_epoch (ks, "alice", CKU_USER), set);
    ck_assert_uint_eq (s_epoch (ks, "alice", CKU_SO), so);
    //  The wrong PIN that locks moves it, and says it locked.
    for (int i = 1; i <= 4; i++) {
        ck_assert_uint_eq (keystore_pin_check (ks, "alice", CKU_USER, "0000", 4, &state), CKR_PIN_INCORRECT);
        ck_assert_int_eq (state.failures, i);
        ck_assert_uint_eq (s_epoch (ks, "alice", CKU_USER), set);
    }
    ck_assert_uint_eq (keystore_pin_check (ks, "alice", CKU_USER, "0000", 4, &state), CKR_PIN_INCORRECT);
    ck_assert_int_eq (state.failures, 5);
    ck_assert_uint_gt (state.epoch, set);
    ck_assert_uint_eq (s_epoch (ks, "alice", CKU_USER), state.epoch);
    uint64_t locked = state.epoch;
    ck_assert_uint_eq (keystore_pin_check (ks, "alice", CKU_USER, "4321", 4, &state), CKR_PIN_LOCKED);
    ck_assert_uint_eq (s_epoch (ks, "alice", CKU_USER), locked);
    //  Removed and added again: epochs above every earlier one.
    ck_assert_int_eq (keystore_tenant_remove (ks, "alice"), 0);
    ck_assert_int_eq (keystore_pin_epoch (ks, "alice", CKU_USER, &set), -1);
    ck_assert_int_eq (keystore_tenant_add (ks, "alice", "1234", 4, "123456", 6), 0);
    ck_assert_uint_gt (s_epoch (ks, "alice", CKU_USER), locked);
    ck_assert_uint_gt (s_epoch (ks, "alice", CKU_SO), locked);
    ck_assert_int_eq (keystore_pin_epoch (ks, "alice", 7, &set), -1);
    keystore_destroy (&ks);
}
END_TEST

/*  A tenant row changed without the master key is refused (CKR_DEVICE_ERROR,
 *  flags 0, no epoch) and never rewritten: a failure counter reset, a PIN
 *  hash copied from another tenant whose PIN the attacker knows, a PIN hash
 *  the attacker made (the schema 1 form needs no key), an epoch rolled back
 *  to an earlier value.  */
START_TEST (test_tampered_tenant_row)
{
    keystore_t *ks = s_open_with_tenant ("alice");
    uint64_t epoch = 0;
    ck_assert_int_eq (keystore_tenant_add (ks, "bob", "5678", 4, "567890", 6), 0);
    for (int i = 0; i < 4; i++)
        ck_assert_uint_eq (keystore_pin_check (ks, "alice", CKU_USER, "9999", 4, NULL), CKR_PIN_INCORRECT);
    ck_assert (keystore_pin_flags (ks, "alice") & CKF_USER_PIN_FINAL_TRY);
    //  1. The failure counter reset to 0.
    s_sql ("UPDATE tenants SET user_failures = 0 WHERE name = 'alice'", 1);
    ck_assert_uint_eq (keystore_pin_check (ks, "alice", CKU_USER, "1234", 4, NULL), CKR_DEVICE_ERROR);
    ck_assert_uint_eq (keystore_pin_check (ks, "alice", CKU_USER, "9999", 4, NULL), CKR_DEVICE_ERROR);
    ck_assert_uint_eq (keystore_pin_check (ks, "alice", CKU_SO, "123456", 6, NULL), CKR_DEVICE_ERROR);
    ck_assert_uint_eq (keystore_pin_set (ks, "alice", CKU_USER, "4321", 4, NULL), CKR_DEVICE_ERROR);
    ck_assert_uint_eq (keystore_pin_flags (ks, "alice"), 0);
    ck_assert_int_eq (keystore_pin_epoch (ks, "alice", CKU_USER, &epoch), -1);
    char *failures = s_sql_text ("SELECT user_failures FROM tenants WHERE name = 'alice'");
    ck_assert_str_eq (failures, "0");       //  refused, not rewritten
    free (failures);
    //  Put back as it was: it verifies again.
    s_sql ("UPDATE tenants SET user_failures = 4 WHERE name = 'alice'", 1);
    ck_assert (keystore_pin_flags (ks, "alice") & CKF_USER_PIN_FINAL_TRY);
    ck_assert_uint_eq (keystore_pin_check (ks, "alice", CKU_USER, "1234", 4, NULL), CKR_OK);
    //  2. Bob's user PIN hash (PIN 5678) copied into alice's row.
    s_sql ("UPDATE tenants SET user_pin = (SELECT user_pin FROM tenants WHERE name = 'bob') "
           "WHERE name = 'alice'", 1);
    ck_assert_uint_eq (keystore_pin_check (ks, "alice", CKU_USER, "5678", 4, NULL), CKR_DEVICE_ERROR);
    ck_assert_uint_eq (keystore_pin_check (ks, "bob", CKU_USER, "5678", 4, NULL), CKR_OK);
    //  3. A hash of PIN 0000 made without the key, in the schema 1 form
    //  (python3: hashlib.pbkdf2_hmac ("sha256", b"0000", bytes (range (16)), 1000, 32)).
    s_sql ("UPDATE tenants SET user_pin = 'pbkdf2-sha256$1000$000102030405060708090a0b0c0d0e0f$"
           "481773e9f3dad48d00246e7123f67f22d9a183dd6dcd647fcc05be5cddfae1c3' WHERE name = 'bob'", 1);
    ck_assert_uint_eq (keystore_pin_check (ks, "bob", CKU_USER, "5678", 4, NULL), CKR_DEVICE_ERROR);
    ck_assert_uint_eq (keystore_pin_check (ks, "bob", CKU_USER, "0000", 4, NULL), CKR_DEVICE_ERROR);
    keystore_destroy (&ks);
    //  4. An epoch rolled back (a new connection: nothing is cached).
    ks = s_open_with_tenant ("carol");
    ck_assert_uint_eq (keystore_pin_set (ks, "carol", CKU_USER, "1111", 4, &epoch), CKR_OK);
    char *sql = sqlite3_mprintf ("UPDATE tenants SET user_epoch = %llu WHERE name = 'carol'",
                                 (unsigned long long) epoch - 1);
    s_sql (sql, 1);
    sqlite3_free (sql);
    ck_assert_int_eq (keystore_pin_epoch (ks, "carol", CKU_USER, &epoch), -1);
    //  5. A row without its MAC.
    s_sql ("UPDATE tenants SET mac = NULL WHERE name = 'carol'", 1);
    ck_assert_uint_eq (keystore_pin_check (ks, "carol", CKU_SO, "123456", 6, NULL), CKR_DEVICE_ERROR);
    keystore_destroy (&ks);
}
END_TEST

/*  POSIX locks (/proc/locks) this process holds on the file at path.  */
static int
s_locks_held (const char *path)
{
    struct stat st;
    ck_assert_int_eq (stat (path, &st), 0);
    FILE *locks = fopen ("/proc/locks", "re");
    ck_assert_ptr_nonnull (locks);
    char line [256], type [16];
    int held = 0, pid = 0;
    unsigned long inode = 0;
    while (fgets (line, sizeof line, locks))
        if (sscanf (line, "%*d: %15s %*s %*s %d %*x:%*x:%lu", type, &pid, &inode) == 3
        &&  streq (type, "POSIX") && pid == getpid () && inode == (unsigned long) st.st_ino)
            held++;
    fclose (locks);
    return held;
}

/*  A second connection of this process (keystore_open_again, as the
 *  broker's slow pool makes) leaves the first one's POSIX locks on
 *  keystore.db in place: closing any descriptor of the file drops them all
 *  (fcntl(2)), and then another process (cryptoserver-admin, sqlite3) that
 *  reads the file takes it for unused when it closes, checkpoints it and
 *  deletes the -wal file under the open connections, which stop seeing
 *  later writes (a tampered row read as it was).  */
START_TEST (test_open_again_keeps_locks)
{
    keystore_t *ks = s_open_with_tenant ("alice");
    keystore_tenant_t state;
    ck_assert_int_eq (keystore_tenant_state (ks, "alice", &state), 0);
    ck_assert_int_gt (s_locks_held (s_path), 0);
    keystore_t *again = keystore_open_again (ks);
    ck_assert_ptr_nonnull (again);
    ck_assert_int_gt (s_locks_held (s_path), 0);
    ck_assert_int_eq (keystore_tenant_state (again, "alice", &state), 0);
    ck_assert_int_eq (state.failures [0], 0);
    s_sql ("UPDATE tenants SET user_failures = 3 WHERE name = 'alice'", 1);
    ck_assert_int_eq (keystore_tenant_state (again, "alice", &state), KEYSTORE_DAMAGED);
    ck_assert_int_eq (keystore_tenant_state (ks, "alice", &state), KEYSTORE_DAMAGED);
    keystore_destroy (&again);
    keystore_destroy (&ks);
}
END_TEST

/*  keystore_settle tells the commits of other connections (another
 *  keystore object, another process) from the connection's own.  */
START_TEST (test_settle)
{
    keystore_t *ks = s_open_with_tenant (NULL);
    ck_assert_int_eq (keystore_settle (ks), 0);
    ck_assert_int_eq (keystore_tenant_add (ks, "alice", "1234", 4, "123456", 6), 0);
    ck_assert_int_eq (keystore_settle (ks), 0);             /* its own commit */
    keystore_t *other = keystore_open_again (ks);
    ck_assert_uint_eq (keystore_pin_set (other, "alice", CKU_USER, "4321", 4, NULL), CKR_OK);
    ck_assert_int_eq (keystore_settle (ks), 1);
    ck_assert_int_eq (keystore_settle (ks), 0);             /* told once */
    s_sql ("UPDATE tenants SET user_failures = 1 WHERE name = 'alice'", 1);
    ck_assert_int_eq (keystore_settle (ks), 1);
    keystore_destroy (&other);
    keystore_destroy (&ks);
}
END_TEST

/*  A key row changed without the master key is refused (KEYSTORE_DAMAGED)
 *  and left out of lists, while the tenant's other keys stay usable: a
 *  usage flag flipped in the description (can_decrypt, protobuf field 10,
 *  appended: the last value wins), the private blob removed, the MAC
 *  removed.  */
START_TEST (test_tampered_key_row)
{
    keystore_t *ks = s_open_with_tenant ("alice");
    EVP_PKEY *pkey = s_keygen ("RSA", "2048");
    key_info_params_t params = { .label = "signer" };
    Cs__KeyInfo *info = key_info_from_pkey (pkey, &params);
    ck_assert_ptr_nonnull (info);
    info->can_decrypt = false;
    size_t len = 0;
    uint8_t *der = cs_pkey_to_pkcs8 (pkey, &len);
    ck_assert_int_eq (keystore_key_put (ks, "alice", info, der, len), 0);
    char *ref = strdup (info->ref), *other = s_put (ks, "alice", pkey, "other");
    Cs__KeyInfo *got = NULL, **infos = NULL;
    size_t count = 0;
    uint8_t *pkcs8 = NULL;
    size_t pkcs8_len = 0;
    char *sql = sqlite3_mprintf (s_dialect ("UPDATE keys SET info = CAST (info || x'5001' AS BLOB) WHERE ref = %Q",
                                            "UPDATE keys SET info = info || '\\x5001'::bytea WHERE ref = %Q"), ref);
    s_sql (sql, 1);
    sqlite3_free (sql);
    //  The flip itself reads as can_decrypt = TRUE to anyone who trusts it.
    sql = sqlite3_mprintf (s_dialect ("SELECT hex (substr (info, -2)) FROM keys WHERE ref = %Q AND typeof (info) = 'blob'",
                                      "SELECT encode (substring (info from length (info) - 1), 'hex') FROM keys "
                                      "WHERE ref = %Q"), ref);
    char *hex = s_sql_text (sql);
    sqlite3_free (sql);
    ck_assert_str_eq (hex, "5001");
    free (hex);
    sql = sqlite3_mprintf (s_dialect ("SELECT hex (info) FROM keys WHERE ref = %Q",
                                      "SELECT encode (info, 'hex') FROM keys WHERE ref = %Q"), ref);
    hex = s_sql_text (sql);
    sqlite3_free (sql);
    uint8_t raw [4096];
    long raw_len = cs_hex_decode (hex, raw, sizeof raw);
    ck_assert_int_gt (raw_len, 0);
    Cs__KeyInfo *flipped = cs__key_info__unpack (NULL, (size_t) raw_len, raw);
    ck_assert_ptr_nonnull (flipped);
    ck_assert (flipped->can_decrypt && flipped->can_sign);
    cs__key_info__free_unpacked (flipped, NULL);
    free (hex);
    ck_assert_int_eq (keystore_key_get (ks, "alice", ref, &got, &pkcs8, &pkcs8_len), KEYSTORE_DAMAGED);
    ck_assert_ptr_null (pkcs8);
    ck_assert_int_eq (keystore_key_get (ks, "alice", ref, &got, NULL, NULL), KEYSTORE_DAMAGED);
    ck_assert_int_eq (keystore_key_update (ks, "alice", info), KEYSTORE_DAMAGED);
    ck_assert_int_eq (keystore_key_list (ks, "alice", &infos, &count), 0);
    ck_assert_uint_eq (count, 1);
    ck_assert_str_eq (infos [0]->ref, other);
    cs__key_info__free_unpacked (infos [0], NULL);
    free (infos);
    //  The other key still works; the damaged one can still be deleted.
    ck_assert_int_eq (keystore_key_get (ks, "alice", other, &got, &pkcs8, &pkcs8_len), 0);
    OPENSSL_cleanse (pkcs8, pkcs8_len);
    free (pkcs8);
    cs__key_info__free_unpacked (got, NULL);
    ck_assert_int_eq (keystore_key_delete (ks, "alice", ref), 0);
    //  The private blob removed; the MAC removed.
    sql = sqlite3_mprintf ("UPDATE keys SET private = NULL WHERE ref = %Q", other);
    s_sql (sql, 1);
    sqlite3_free (sql);
    ck_assert_int_eq (keystore_key_get (ks, "alice", other, &got, NULL, NULL), KEYSTORE_DAMAGED);
    ck_assert_int_eq (keystore_key_put (ks, "alice", info, der, len), 0);
    sql = sqlite3_mprintf ("UPDATE keys SET mac = NULL WHERE ref = %Q", ref);
    s_sql (sql, 1);
    sqlite3_free (sql);
    ck_assert_int_eq (keystore_key_get (ks, "alice", ref, &got, NULL, NULL), KEYSTORE_DAMAGED);
    OPENSSL_cleanse (der, len);
    free (der);
    cs__key_info__free_unpacked (info, NULL);
    free (ref);
    free (other);
    EVP_PKEY_free (pkey);
    keystore_destroy (&ks);
}
END_TEST

/*  Certificates and data objects (issue #10): a public object stored in
 *  the clear and MAC'd, a CKA_PRIVATE one sealed; both come back whole,
 *  replace works, tenants are apart; a row changed with SQL (its label, or
 *  a key row's MAC copied over) is refused and left out of the list.  */
static Cs__ObjectInfo *
s_object_new (uint64_t klass, bool is_private, const char *label, const char *value)
{
    Cs__ObjectInfo *info = calloc (1, sizeof *info);
    cs__object_info__init (info);
    char ref [37];
    keystore_object_ref_new (ref);
    info->ref = strdup (ref);
    info->object_class = klass;
    info->is_private = is_private;
    info->n_attributes = 2;
    info->attributes = calloc (2, sizeof *info->attributes);
    const char *values [2] = { label, value };
    uint64_t types [2] = { CKA_LABEL, CKA_VALUE };
    for (int i = 0; i < 2; i++) {
        Cs__Attribute *attr = calloc (1, sizeof *attr);
        cs__attribute__init (attr);
        attr->type = types [i];
        attr->value_case = CS__ATTRIBUTE__VALUE_BYTES;
        attr->bytes.data = (uint8_t *) strdup (values [i]);
        attr->bytes.len = strlen (values [i]);
        info->attributes [i] = attr;
    }
    return info;
}

static void
s_object_free (Cs__ObjectInfo *info)
{
    for (size_t i = 0; i < info->n_attributes; i++) {
        free (info->attributes [i]->bytes.data);
        free (info->attributes [i]);
    }
    free (info->attributes);
    free (info->ref);
    free (info);
}

//  The bytes of attribute type of info as a string ("" when absent).
static const char *
s_object_attr (const Cs__ObjectInfo *info, uint64_t type)
{
    static char text [256];
    text [0] = 0;
    for (size_t i = 0; i < info->n_attributes; i++)
        if (info->attributes [i]->type == type && info->attributes [i]->bytes.len < sizeof text) {
            memcpy (text, info->attributes [i]->bytes.data, info->attributes [i]->bytes.len);
            text [info->attributes [i]->bytes.len] = 0;
        }
    return text;
}

START_TEST (test_objects)
{
    keystore_t *ks = s_open_with_tenant ("alice");
    ck_assert_int_eq (keystore_tenant_add (ks, "bob", "1234", 4, "123456", 6), 0);
    const char *secret = "a private data object that must never be on disk in the clear";
    Cs__ObjectInfo *cert = s_object_new (CKO_CERTIFICATE, false, "rsa2048", "certificate DER bytes");
    Cs__ObjectInfo *data = s_object_new (CKO_DATA, true, "mydata", secret);
    Cs__ObjectInfo *got = NULL, **infos = NULL;
    size_t count = 0;
    ck_assert_int_eq (keystore_object_put (ks, "alice", cert), 0);
    ck_assert_int_eq (keystore_object_put (ks, "alice", data), 0);
    ck_assert_int_eq (keystore_object_put (ks, "nobody", cert), -1);
    ck_assert_int_eq (keystore_object_get (ks, "alice", data->ref, &got), 0);
    ck_assert (got->is_private);
    ck_assert_uint_eq (got->object_class, CKO_DATA);
    ck_assert_str_eq (s_object_attr (got, CKA_VALUE), secret);
    cs__object_info__free_unpacked (got, NULL);
    ck_assert_int_eq (keystore_object_get (ks, "bob", data->ref, &got), -1);
    ck_assert_int_eq (keystore_object_list (ks, "bob", &infos, &count), 0);
    ck_assert_uint_eq (count, 0);
    free (infos);
    //  Replace: the label changes, the row count does not.
    free (cert->attributes [0]->bytes.data);
    cert->attributes [0]->bytes.data = (uint8_t *) strdup ("renamed");
    cert->attributes [0]->bytes.len = 7;
    ck_assert_int_eq (keystore_object_put (ks, "alice", cert), 0);
    ck_assert_int_eq (keystore_object_list (ks, "alice", &infos, &count), 0);
    ck_assert_uint_eq (count, 2);
    ck_assert_str_eq (infos [0]->ref, cert->ref);
    ck_assert_str_eq (s_object_attr (infos [0], CKA_LABEL), "renamed");
    ck_assert_str_eq (s_object_attr (infos [0], CKA_VALUE), "certificate DER bytes");
    ck_assert_str_eq (s_object_attr (infos [1], CKA_VALUE), secret);
    for (size_t i = 0; i < count; i++)
        cs__object_info__free_unpacked (infos [i], NULL);
    free (infos);
    if (!s_pg_url) {
        keystore_destroy (&ks);
        ck_assert (!s_file_has_window (s_path, (const uint8_t *) secret, strlen (secret)));
        ks = keystore_open (s_path, s_master);
        ck_assert_ptr_nonnull (ks);
    }
    //  Tampered with SQL: the certificate's info changed (a byte appended),
    //  then the data object's sealed blob given the certificate's MAC.
    char *sql = sqlite3_mprintf (s_dialect ("UPDATE objects SET info = CAST (info || x'00' AS BLOB) WHERE ref = %Q",
                                            "UPDATE objects SET info = info || '\\x00'::bytea WHERE ref = %Q"),
                                 cert->ref);
    s_sql (sql, 1);
    sqlite3_free (sql);
    ck_assert_int_eq (keystore_object_get (ks, "alice", cert->ref, &got), KEYSTORE_DAMAGED);
    ck_assert_int_eq (keystore_object_list (ks, "alice", &infos, &count), 0);
    ck_assert_uint_eq (count, 1);
    ck_assert_str_eq (infos [0]->ref, data->ref);
    cs__object_info__free_unpacked (infos [0], NULL);
    free (infos);
    //  A row moved to another tenant does not verify either.
    sql = sqlite3_mprintf ("UPDATE objects SET tenant = 'bob' WHERE ref = %Q", data->ref);
    s_sql (sql, 1);
    sqlite3_free (sql);
    ck_assert_int_eq (keystore_object_get (ks, "bob", data->ref, &got), KEYSTORE_DAMAGED);
    //  Delete: the damaged row can go; an unknown ref cannot.
    ck_assert_int_eq (keystore_object_delete (ks, "alice", cert->ref), 0);
    ck_assert_int_eq (keystore_object_delete (ks, "alice", cert->ref), -1);
    ck_assert_int_eq (keystore_object_get (ks, "alice", cert->ref, &got), -1);
    //  Removing a tenant removes its objects.
    ck_assert_int_eq (keystore_object_put (ks, "alice", cert), 0);
    char *rows = s_sql_text ("SELECT count(*) FROM objects WHERE tenant = 'alice'");
    ck_assert_str_eq (rows, "1");
    free (rows);
    ck_assert_int_eq (keystore_tenant_remove (ks, "alice"), 0);
    rows = s_sql_text ("SELECT count(*) FROM objects WHERE tenant = 'alice'");
    ck_assert_str_eq (rows, "0");
    free (rows);
    s_object_free (cert);
    s_object_free (data);
    keystore_destroy (&ks);
}
END_TEST

/*  A schema 3 file (before certificates and data objects, issued keys and
 *  the state record): refused as it is (issue 19: never upgraded at an
 *  open); the operator's keystore_upgrade brings it to schema 7 and its keys
 *  still work.  */
START_TEST (test_upgrade_objects)
{
    keystore_t *ks = s_open_with_tenant ("alice");
    EVP_PKEY *pkey = s_keygen ("EC", "P-256");
    char *ref = s_put (ks, "alice", pkey, "k");
    keystore_destroy (&ks);
    s_sql ("DROP TABLE objects; DROP TABLE issued; DROP TABLE audit; DELETE FROM meta WHERE name = 'state';"
           "UPDATE meta SET value = '3' WHERE name = 'schema'", -1);
    ck_assert_ptr_null (keystore_open (s_path, s_master));
    ck_assert_int_eq (keystore_upgrade (s_path, s_master, NULL), 3);
    ck_assert_int_eq (keystore_upgrade (s_path, s_master, NULL), 0);       //  once
    ks = keystore_open (s_path, s_master);
    ck_assert_ptr_nonnull (ks);
    char *schema = s_sql_text ("SELECT CAST (value AS TEXT) FROM meta WHERE name = 'schema'");
    ck_assert_str_eq (schema, "7");
    free (schema);
    Cs__KeyInfo *info = NULL;
    ck_assert_int_eq (keystore_key_get (ks, "alice", ref, &info, NULL, NULL), 0);
    cs__key_info__free_unpacked (info, NULL);
    Cs__ObjectInfo **infos = NULL;
    size_t count = 1;
    ck_assert_int_eq (keystore_object_list (ks, "alice", &infos, &count), 0);
    ck_assert_uint_eq (count, 0);
    free (infos);
    keystore_destroy (&ks);
    //  A later schema is refused (its state record says 7).
    s_sql ("UPDATE meta SET value = '8' WHERE name = 'schema'", 1);
    ck_assert_ptr_null (keystore_open (s_path, s_master));
    ck_assert_int_eq (keystore_upgrade (s_path, s_master, NULL), -1);
    free (ref);
    EVP_PKEY_free (pkey);
}
END_TEST

/*  A schema 1 file made by the code before row MACs (keystore-v1.sql) is
 *  refused as it is and upgraded by the operator's keystore_upgrade, once, its PINs, failure counts
 *  and key still work, its unkeyed PIN hashes are wrapped at once and
 *  re-hashed with scrypt at the next right PIN, and from then on its rows
 *  are protected like new ones.  */
START_TEST (test_upgrade_from_schema_1)
{
    static const char ref [] = "ks:fc6748718455138a690dddbd54a54c57";
    zchunk_t *dump = NULL;
    FILE *file = fopen (CS_TEST_DATA_DIR "/keystore-v1.sql", "r");
    ck_assert_ptr_nonnull (file);
    dump = zchunk_read (file, 1024 * 1024);
    fclose (file);
    char *sql = strndup ((const char *) zchunk_data (dump), zchunk_size (dump));
    zchunk_destroy (&dump);
    s_sql (sql, -1);
    free (sql);
    char *schema = s_sql_text ("SELECT CAST (value AS TEXT) FROM meta WHERE name = 'schema'");
    ck_assert_str_eq (schema, "1");
    free (schema);
    //  Refused as it is (issue 19): only the operator's upgrade MACs its rows.
    ck_assert_ptr_null (keystore_open (s_path, s_master));
    ck_assert_int_eq (keystore_upgrade (s_path, s_master, NULL), 1);
    keystore_t *ks = keystore_open (s_path, s_master);
    ck_assert_ptr_nonnull (ks);
    schema = s_sql_text ("SELECT CAST (value AS TEXT) FROM meta WHERE name = 'schema'");
    ck_assert_str_eq (schema, "7");
    free (schema);
    //  Wrapped under the key: the file alone no longer allows offline guesses.
    char *pin = s_sql_text ("SELECT user_pin FROM tenants WHERE name = 'alice'");
    ck_assert_int_eq (strncmp (pin, "pbkdf2-sha256-hmac$100000$", 26), 0);
    free (pin);
    //  Counts and epochs survive; bob's wrong PIN is still counted.
    ck_assert_uint_eq (keystore_pin_flags (ks, "bob"), CKF_USER_PIN_COUNT_LOW);
    ck_assert_uint_gt (s_epoch (ks, "alice", CKU_USER), 0);
    ck_assert_uint_ne (s_epoch (ks, "alice", CKU_USER), s_epoch (ks, "bob", CKU_USER));
    ck_assert_uint_eq (keystore_pin_check (ks, "alice", CKU_USER, "9999", 4, NULL), CKR_PIN_INCORRECT);
    ck_assert_uint_eq (keystore_pin_check (ks, "alice", CKU_USER, "1234", 4, NULL), CKR_OK);
    pin = s_sql_text ("SELECT user_pin FROM tenants WHERE name = 'alice'");
    ck_assert_int_eq (strncmp (pin, "scrypt-hmac$15$8$1$", 19), 0);        //  re-hashed
    free (pin);
    pin = s_sql_text ("SELECT so_pin FROM tenants WHERE name = 'alice'");
    ck_assert_int_eq (strncmp (pin, "pbkdf2-sha256-hmac$", 19), 0);        //  not yet
    free (pin);
    ck_assert_uint_eq (keystore_pin_check (ks, "alice", CKU_USER, "1234", 4, NULL), CKR_OK);
    ck_assert_uint_eq (keystore_pin_check (ks, "alice", CKU_SO, "123456", 6, NULL), CKR_OK);
    ck_assert_uint_eq (keystore_pin_check (ks, "bob", CKU_USER, "5678", 4, NULL), CKR_OK);
    //  The key decrypts and matches its description.
    Cs__KeyInfo *info = NULL;
    uint8_t *der = NULL;
    size_t len = 0;
    ck_assert_int_eq (keystore_key_get (ks, "alice", ref, &info, &der, &len), 0);
    ck_assert_str_eq (info->label, "old-ec");
    const uint8_t *p = der;
    EVP_PKEY *pkey = d2i_AutoPrivateKey (NULL, &p, (long) len);
    ck_assert_ptr_nonnull (pkey);
    key_info_params_t params = { .label = "x" };
    Cs__KeyInfo *again = key_info_from_pkey (pkey, &params);
    ck_assert_uint_eq (again->ec_point.len, info->ec_point.len);
    ck_assert_mem_eq (again->ec_point.data, info->ec_point.data, info->ec_point.len);
    cs__key_info__free_unpacked (again, NULL);
    EVP_PKEY_free (pkey);
    OPENSSL_cleanse (der, len);
    free (der);
    cs__key_info__free_unpacked (info, NULL);
    keystore_destroy (&ks);
    //  Opened again: no second upgrade; rows are protected now.
    ks = keystore_open (s_path, s_master);
    ck_assert_ptr_nonnull (ks);
    s_sql ("UPDATE keys SET info = CAST (info || x'5001' AS BLOB)", 1);
    ck_assert_int_eq (keystore_key_get (ks, "alice", ref, &info, NULL, NULL), KEYSTORE_DAMAGED);
    ck_assert_uint_eq (keystore_pin_check (ks, "bob", CKU_USER, "0000", 4, NULL), CKR_PIN_INCORRECT);
    s_sql ("UPDATE tenants SET user_failures = 0 WHERE name = 'bob'", 1);
    ck_assert_uint_eq (keystore_pin_check (ks, "bob", CKU_USER, "5678", 4, NULL), CKR_DEVICE_ERROR);
    keystore_destroy (&ks);
}
END_TEST

START_TEST (test_master_key_files)
{
    char path [160];
    snprintf (path, sizeof path, "%s/master.key", s_dir);
    uint8_t key [KEYSTORE_MASTER_KEY_LEN], back [KEYSTORE_MASTER_KEY_LEN];
    ck_assert_int_eq (keystore_master_key_create (path, key), 0);
    struct stat st;
    ck_assert_int_eq (stat (path, &st), 0);
    ck_assert_int_eq (st.st_mode & 0777, 0600);
    ck_assert_int_eq (st.st_size, 65);
    ck_assert_int_eq (keystore_master_key_read (path, back), 0);
    ck_assert_mem_eq (key, back, sizeof key);
    ck_assert_int_eq (keystore_master_key_create (path, back), -1);     //  no overwrite
    ck_assert_int_eq (chmod (path, 0640), 0);
    ck_assert_int_eq (keystore_master_key_read (path, back), -1);       //  group-readable
    ck_assert_int_eq (chmod (path, 0600), 0);
    FILE *file = fopen (path, "w");
    fputs ("0123\n", file);
    fclose (file);
    ck_assert_int_eq (keystore_master_key_read (path, back), -1);       //  malformed
    ck_assert_int_eq (keystore_master_key_read ("/nonexistent/master.key", back), -1);
}
END_TEST

//  The master key lives in a page of its own, excluded from core dumps and
//  locked (when RLIMIT_MEMLOCK allows), and nothing else gets locked.
START_TEST (test_master_key_in_locked_page)
{
    long page_kb = sysconf (_SC_PAGESIZE) / 1024;
    size_t failures = cs_secmem_lock_failures ();
    ts_locked_t before = ts_locked ();
    keystore_t *ks = keystore_open (s_path, s_master);
    ck_assert_ptr_nonnull (ks);
    ts_locked_t open = ts_locked ();
    ck_assert_int_eq (open.secret_kb, before.secret_kb + page_kb);
    if (cs_secmem_lock_failures () == failures)
        ck_assert_int_eq (open.secret_locked_kb, before.secret_locked_kb + page_kb);
    ck_assert_int_eq (open.other_locked_kb, before.other_locked_kb);
    keystore_destroy (&ks);
    ts_locked_t closed = ts_locked ();
    ck_assert_int_eq (closed.secret_kb, before.secret_kb);
    ck_assert_int_eq (closed.secret_locked_kb, before.secret_locked_kb);
}
END_TEST

//  Checks the flag or number attribute `type` of a KeyInfo side.
static void
s_expect_attr (const Cs__KeyInfo *info, bool private_side, CK_ATTRIBUTE_TYPE type, uint64_t value)
{
    const Cs__Attribute *attr = key_info_attribute (info, private_side, type);
    ck_assert_ptr_nonnull (attr);
    if (attr->value_case == CS__ATTRIBUTE__VALUE_FLAG)
        ck_assert_uint_eq (attr->flag, value);
    else
        ck_assert_uint_eq (attr->number, value);
}

START_TEST (test_key_info_types)
{
    EVP_PKEY *rsa = s_keygen ("RSA", "2048");
    key_info_params_t params = { .label = "r", .generated = true };
    Cs__KeyInfo *info = key_info_from_pkey (rsa, &params);
    ck_assert_uint_eq (info->key_type, CKK_RSA);
    ck_assert_uint_eq (info->bits, 2048);
    ck_assert_uint_eq (info->modulus.len, 256);
    ck_assert_uint_eq (info->public_exponent.len, 3);
    ck_assert (info->can_sign && info->can_decrypt && info->has_private && info->has_public);
    ck_assert_uint_eq (info->id.len, 20);              /* SHA-1 of the key (cryptoserver-admin(1)) */
    ck_assert_int_eq (strncmp (info->ref, "ks:", 3), 0);
    ck_assert_uint_eq (strlen (info->ref), 35);
    s_expect_attr (info, true, CKA_SENSITIVE, 1);
    s_expect_attr (info, true, CKA_EXTRACTABLE, 0);
    s_expect_attr (info, true, CKA_ALWAYS_SENSITIVE, 1);
    s_expect_attr (info, true, CKA_NEVER_EXTRACTABLE, 1);
    s_expect_attr (info, true, CKA_LOCAL, 1);
    s_expect_attr (info, true, CKA_KEY_GEN_MECHANISM, CKM_RSA_PKCS_KEY_PAIR_GEN);
    s_expect_attr (info, false, CKA_LOCAL, 1);
    cs__key_info__free_unpacked (info, NULL);

    static const uint8_t p256_oid [] = { 0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07 };
    EVP_PKEY *ec = s_keygen ("EC", "P-256");
    uint8_t id [3] = { 1, 2, 3 };
    params = (key_info_params_t) { .label = "e", .id = id, .id_len = 3, .ref = "ks:fixed" };
    info = key_info_from_pkey (ec, &params);
    ck_assert_uint_eq (info->key_type, CKK_EC);
    ck_assert_uint_eq (info->bits, 256);
    ck_assert_mem_eq (info->ec_params.data, p256_oid, sizeof p256_oid);
    ck_assert_uint_eq (info->ec_point.len, 67);
    ck_assert_uint_eq (info->ec_point.data [0], 0x04);
    ck_assert_uint_eq (info->ec_point.data [1], 65);
    ck_assert_uint_eq (info->ec_point.data [2], 0x04);
    ck_assert (!info->can_decrypt);
    ck_assert_mem_eq (info->id.data, id, 3);
    ck_assert_str_eq (info->ref, "ks:fixed");
    s_expect_attr (info, true, CKA_ALWAYS_SENSITIVE, 0);
    s_expect_attr (info, true, CKA_LOCAL, 0);
    s_expect_attr (info, true, CKA_KEY_GEN_MECHANISM, CK_UNAVAILABLE_INFORMATION);
    cs__key_info__free_unpacked (info, NULL);

    EVP_PKEY *p521 = s_keygen ("EC", "P-521");
    info = key_info_from_pkey (p521, NULL);
    ck_assert_uint_eq (info->bits, 521);
    ck_assert_uint_eq (info->ec_point.len, 3 + 133);
    ck_assert_uint_eq (info->ec_point.data [1], 0x81);
    cs__key_info__free_unpacked (info, NULL);

    static const uint8_t ed_oid [] = { 0x06, 0x03, 0x2b, 0x65, 0x70 };
    EVP_PKEY *ed = s_keygen ("ED25519", NULL);
    info = key_info_from_pkey (ed, NULL);
    ck_assert_uint_eq (info->key_type, CKK_EC_EDWARDS);
    ck_assert_mem_eq (info->ec_params.data, ed_oid, sizeof ed_oid);
    ck_assert_uint_eq (info->ec_point.len, 34);
    ck_assert_uint_eq (info->ec_point.data [1], 32);
    ck_assert_str_eq (info->label, "");
    ck_assert_str_eq (info->home, "keystore");
    cs__key_info__free_unpacked (info, NULL);

    //  A public key alone: has_private FALSE; same derived id as its private key.
    unsigned char *spki = NULL;
    int spki_len = i2d_PUBKEY (ec, &spki);
    const unsigned char *cursor = spki;
    EVP_PKEY *pub = d2i_PUBKEY (NULL, &cursor, spki_len);
    info = key_info_from_pkey (pub, NULL);
    ck_assert (!info->has_private);
    uint8_t a [KEY_INFO_ID_LEN], b [KEY_INFO_ID_LEN];
    ck_assert_int_eq (key_info_derive_id (ec, a), 0);
    ck_assert_int_eq (key_info_derive_id (pub, b), 0);
    ck_assert_mem_eq (a, b, sizeof a);
    ck_assert_mem_eq (info->id.data, a, sizeof a);
    ck_assert_ptr_null (cs_pkey_to_pkcs8 (pub, &(size_t) { 0 }));
    cs__key_info__free_unpacked (info, NULL);
    OPENSSL_free (spki);
    EVP_PKEY_free (pub);
    EVP_PKEY_free (rsa);
    EVP_PKEY_free (ec);
    EVP_PKEY_free (p521);
    EVP_PKEY_free (ed);
}
END_TEST

/* ---- PostgreSQL only ------------------------------------------------------ */

#ifdef HAVE_LIBPQ
//  True when some run of WINDOW bytes of secret (len bytes), at every
//  offset that is a multiple of 4 (so any plaintext copy of WINDOW + 3
//  bytes or more is found), occurs in a file under dir (recursive).
static bool
s_tree_has_window (const char *dir, const uint8_t *secret, size_t len)
{
    DIR *d = opendir (dir);
    ck_assert_msg (d != NULL, "%s: cannot read", dir);
    bool found = false;
    struct dirent *entry;
    while (!found && (entry = readdir (d))) {
        if (streq (entry->d_name, ".") || streq (entry->d_name, ".."))
            continue;
        char path [2048];
        struct stat st;
        snprintf (path, sizeof path, "%s/%s", dir, entry->d_name);
        if (lstat (path, &st) != 0)
            continue;                   //  gone meanwhile (a temporary file)
        if (S_ISDIR (st.st_mode))
            found = s_tree_has_window (path, secret, len);
        else
        if (S_ISREG (st.st_mode) && st.st_size > 0) {
            FILE *file = fopen (path, "rb");
            zchunk_t *chunk = file ? zchunk_read (file, (size_t) st.st_size) : NULL;
            if (file)
                fclose (file);
            for (size_t i = 0; chunk && i + WINDOW <= len && !found; i += 4)
                found = memmem (zchunk_data (chunk), zchunk_size (chunk), secret + i, WINDOW) != NULL;
            zchunk_destroy (&chunk);
        }
    }
    closedir (d);
    return found;
}

/*  No window of a stored private key in any file of the cluster (tables,
 *  WAL) after a checkpoint; the scan finds the public modulus, which is
 *  stored in the clear.  */
START_TEST (test_pg_no_plaintext_on_disk)
{
    const char *data = getenv ("CS_TEST_PG_DATA");
    ck_assert_ptr_nonnull (data);
    keystore_t *ks = s_open_with_tenant ("alice");
    EVP_PKEY *pkey = s_keygen ("RSA", "2048");
    size_t len = 0, der_len = 0;
    uint8_t *secret = s_rsa_private_numbers (pkey, &len);
    uint8_t *der = cs_pkey_to_pkcs8 (pkey, &der_len);
    char *ref = s_put (ks, "alice", pkey, "rsa");
    s_sql ("CHECKPOINT", -1);
    ck_assert (!s_tree_has_window (data, secret, len));
    ck_assert (!s_tree_has_window (data, der + der_len - 200, 200));
    ck_assert (s_tree_has_window (data, der + 40, 64));
    keystore_destroy (&ks);
    OPENSSL_cleanse (secret, len);
    OPENSSL_cleanse (der, der_len);
    free (secret);
    free (der);
    free (ref);
    EVP_PKEY_free (pkey);
}
END_TEST

/*  Migrations are recorded in schema_version, run once, and a database of
 *  a later schema is refused, not changed.  A database that cannot be
 *  reached gives NULL.  */
START_TEST (test_pg_schema_version)
{
    keystore_t *ks = s_open_with_tenant ("alice");
    keystore_destroy (&ks);
    char *versions = s_sql_text ("SELECT string_agg (version::text, ',' ORDER BY version) FROM schema_version");
    ck_assert_str_eq (versions, "2,3,4,5,6,7");
    free (versions);
    ks = keystore_open (s_path, s_master);
    ck_assert_ptr_nonnull (ks);
    ck_assert (keystore_tenant_exists (ks, "alice"));
    keystore_destroy (&ks);
    versions = s_sql_text ("SELECT string_agg (version::text, ',' ORDER BY version) FROM schema_version");
    ck_assert_str_eq (versions, "2,3,4,5,6,7");
    free (versions);
    s_sql ("INSERT INTO schema_version (version, description) VALUES (8, 'from a later version')", 1);
    ck_assert_ptr_null (keystore_open (s_path, s_master));
    s_sql ("DELETE FROM schema_version WHERE version = 8", 1);
    //  Issue 19: a version taken back (its state record says 7) is refused too.
    s_sql ("DELETE FROM schema_version WHERE version = 7", 1);
    ck_assert_ptr_null (keystore_open (s_path, s_master));
    ck_assert_int_eq (keystore_upgrade (s_path, s_master, NULL), -1);
    s_sql ("INSERT INTO schema_version (version, description) VALUES (7, 'put back')", 1);
    ks = keystore_open (s_path, s_master);
    ck_assert_ptr_nonnull (ks);
    ck_assert_str_eq (keystore_where (ks), s_path);
    keystore_destroy (&ks);
    ck_assert_ptr_null (keystore_open ("postgresql:///nothing?host=/nonexistent", s_master));
    ck_assert (keystore_is_url ("postgresql://u@h/db") && keystore_is_url ("postgres:///db"));
    ck_assert (!keystore_is_url ("keystore.db"));
}
END_TEST

//  Waits up to 10 s until the listener counted more than `than` changes.
static uint64_t
s_changes_above (keystore_listener_t *listener, uint64_t than)
{
    for (int i = 0; i < 1000 && keystore_listener_changes (listener) <= than; i++)
        zclock_sleep (10);
    return keystore_listener_changes (listener);
}

/*  The listener counts every commit of another process (a forked writer,
 *  psql), and none of its own process's.  */
START_TEST (test_pg_listener)
{
    keystore_t *ks = s_open_with_tenant ("alice");
    ck_assert_ptr_null (keystore_listener_new (NULL));
    keystore_listener_t *listener = keystore_listener_new (ks);
    ck_assert_ptr_nonnull (listener);
    ck_assert (keystore_listener_connected (listener));
    uint64_t start = keystore_listener_changes (listener);
    //  Our own commit, then another process's.
    ck_assert_uint_eq (keystore_pin_set (ks, "alice", CKU_USER, "4321", 4, NULL), CKR_OK);
    pid_t child = fork ();
    ck_assert_int_ge (child, 0);
    if (child == 0) {
        keystore_t *other = keystore_open (s_path, s_master);
        int rc = other && keystore_pin_set (other, "alice", CKU_USER, "1234", 4, NULL) == CKR_OK ? 0 : 1;
        keystore_destroy (&other);
        _exit (rc);
    }
    int status = -1;
    ck_assert_int_eq (waitpid (child, &status, 0), child);
    ck_assert_int_eq (status, 0);
    ck_assert_uint_eq (s_changes_above (listener, start), start + 1);
    //  A row changed with SQL (no origin) counts too.
    s_sql ("UPDATE tenants SET user_failures = 1 WHERE name = 'alice'", 1);
    ck_assert_uint_eq (s_changes_above (listener, start + 1), start + 2);
    //  Our own key writes do not.
    EVP_PKEY *pkey = s_keygen ("EC", "P-256");
    s_sql ("UPDATE tenants SET user_failures = 0 WHERE name = 'alice'", 1);
    ck_assert_uint_eq (s_changes_above (listener, start + 2), start + 3);
    char *ref = s_put (ks, "alice", pkey, "k");
    ck_assert_int_eq (keystore_key_delete (ks, "alice", ref), 0);
    s_sql ("UPDATE tenants SET user_failures = 0 WHERE name = 'alice'", 1);
    ck_assert_uint_eq (s_changes_above (listener, start + 3), start + 4);
    keystore_listener_destroy (&listener);
    ck_assert_ptr_null (listener);
    free (ref);
    EVP_PKEY_free (pkey);
    keystore_destroy (&ks);
}
END_TEST
#endif

/* ---- idempotency (keystore_idem_begin / _end) ----------------------------- */

//  The number of rows of `table` (a count query on the database).
static int
s_rows (const char *table)
{
    char sql [128];
    snprintf (sql, sizeof sql, "SELECT count (*) FROM %s", table);
    char *text = s_sql_text (sql);
    ck_assert_ptr_nonnull (text);
    int rows = atoi (text);
    free (text);
    return rows;
}

//  Begins an operation with `id` that must not be recorded yet.
static void
s_idem_new (keystore_t *ks, const char *tenant, const char *id)
{
    uint8_t *recorded = NULL;
    size_t len = 0;
    ck_assert_int_eq (keystore_idem_begin (ks, tenant, (const uint8_t *) id, strlen (id), &recorded, &len), 0);
    ck_assert_ptr_null (recorded);
}

//  `id` must be recorded with `result` (a string).
static void
s_idem_recorded (keystore_t *ks, const char *tenant, const char *id, const char *result)
{
    uint8_t *recorded = NULL;
    size_t len = 0;
    ck_assert_int_eq (keystore_idem_begin (ks, tenant, (const uint8_t *) id, strlen (id), &recorded, &len), 1);
    ck_assert_uint_eq (len, strlen (result));
    ck_assert_int_eq (memcmp (recorded, result, len), 0);
    free (recorded);
}

/*  An operation with an id runs once: its key writes and the record of its
 *  result commit together; the id replays the result (per tenant); a
 *  failed operation rolls back every write in it and records nothing; a
 *  changed row is refused (row MAC); rows expire after KEYSTORE_IDEM_TTL_S.  */
START_TEST (test_idempotency)
{
    keystore_t *ks = s_open_with_tenant ("alice");
    ck_assert_int_eq (keystore_tenant_add (ks, "bob", "1234", 4, "123456", 6), 0);
    EVP_PKEY *pkey = s_keygen ("EC", "P-256");
    uint8_t *recorded = NULL;
    size_t len = 0;
    ck_assert_int_eq (keystore_idem_begin (ks, "alice", NULL, 0, &recorded, &len), -1);
    ck_assert_int_eq (keystore_idem_end (ks, (const uint8_t *) "x", 1, NULL, NULL), -1);   //  none open

    //  1. Recorded with the key it made; the second attempt replays.
    s_idem_new (ks, "alice", "op-1");
    ck_assert_int_eq (keystore_idem_begin (ks, "alice", (const uint8_t *) "op-9", 4, &recorded, &len), -1);
    char *ref = s_put (ks, "alice", pkey, "made-once");
    ck_assert_int_eq (keystore_idem_end (ks, (const uint8_t *) "result-1", 8, NULL, NULL), 0);
    s_idem_recorded (ks, "alice", "op-1", "result-1");
    ck_assert_int_eq (s_rows ("keys"), 1);
    ck_assert_int_eq (s_rows ("idempotency"), 1);
    //  Per tenant: bob's op-1 is another operation.
    s_idem_new (ks, "bob", "op-1");
    ck_assert_int_eq (keystore_idem_end (ks, NULL, 0, NULL, NULL), 0);

    //  2. A failed operation: its writes roll back, nothing recorded.
    s_idem_new (ks, "alice", "op-2");
    char *gone = s_put (ks, "alice", pkey, "rolled-back");
    ck_assert_int_eq (keystore_key_delete (ks, "alice", ref), 0);
    ck_assert_int_eq (keystore_idem_end (ks, NULL, 0, NULL, NULL), 0);
    Cs__KeyInfo *info = NULL;
    ck_assert_int_eq (keystore_key_get (ks, "alice", gone, &info, NULL, NULL), -1);
    ck_assert_int_eq (keystore_key_get (ks, "alice", ref, &info, NULL, NULL), 0);      //  not deleted
    cs__key_info__free_unpacked (info, NULL);
    //  A write that fails inside dooms the operation: its other writes roll back.
    s_idem_new (ks, "alice", "op-2");
    ck_assert_int_eq (keystore_key_delete (ks, "alice", ref), 0);
    ck_assert_int_eq (keystore_key_delete (ks, "alice", "ks:unknown"), -1);
    ck_assert_int_eq (keystore_idem_end (ks, (const uint8_t *) "ok", 2, NULL, NULL), -1);
    ck_assert_int_eq (keystore_key_get (ks, "alice", ref, &info, NULL, NULL), 0);
    cs__key_info__free_unpacked (info, NULL);
    s_idem_new (ks, "alice", "op-2");                   //  still not recorded
    ck_assert_int_eq (keystore_idem_end (ks, NULL, 0, NULL, NULL), 0);
    ck_assert_int_eq (s_rows ("keys"), 1);
    //  Outside an operation, key writes commit on their own as before.
    ck_assert_int_eq (keystore_key_delete (ks, "alice", ref), 0);
    ck_assert_int_eq (s_rows ("keys"), 0);

    //  3. A recorded result changed without the master key is refused.
    s_sql ("UPDATE idempotency SET created = created + 1", 1);
    ck_assert_int_eq (keystore_idem_begin (ks, "alice", (const uint8_t *) "op-1", 4, &recorded, &len),
                      KEYSTORE_DAMAGED);
    s_sql ("UPDATE idempotency SET created = created - 1", 1);
    s_idem_recorded (ks, "alice", "op-1", "result-1");

    //  4. Expiry: a row older than the TTL goes at the next record; all of
    //  them go with keystore_idem_expire at a later time.
    char sql [128];
    snprintf (sql, sizeof sql, "UPDATE idempotency SET created = created - %d", KEYSTORE_IDEM_TTL_S + 1);
    s_sql (sql, 1);
    s_idem_new (ks, "bob", "op-3");
    ck_assert_int_eq (keystore_idem_end (ks, (const uint8_t *) "result-3", 8, NULL, NULL), 0);
    ck_assert_int_eq (s_rows ("idempotency"), 1);
    s_idem_new (ks, "alice", "op-1");                   //  expired: a new operation
    ck_assert_int_eq (keystore_idem_end (ks, NULL, 0, NULL, NULL), 0);
    ck_assert_int_eq (keystore_idem_expire (ks, (int64_t) time (NULL)), 0);
    ck_assert_int_eq (keystore_idem_expire (ks, (int64_t) time (NULL) + KEYSTORE_IDEM_TTL_S + 2), 1);
    ck_assert_int_eq (s_rows ("idempotency"), 0);
    //  A tenant removed takes its rows along.
    s_idem_new (ks, "bob", "op-4");
    ck_assert_int_eq (keystore_idem_end (ks, (const uint8_t *) "r", 1, NULL, NULL), 0);
    ck_assert_int_eq (keystore_tenant_remove (ks, "bob"), 0);
    ck_assert_int_eq (s_rows ("idempotency"), 0);
    free (gone);
    free (ref);
    EVP_PKEY_free (pkey);
    keystore_destroy (&ks);
}
END_TEST

/*  A schema 2 keystore (before the idempotency, objects and issued tables
 *  and the state record) is refused as it is; the operator's
 *  keystore_upgrade adds the tables and records the version, rows kept.  */
START_TEST (test_upgrade_from_schema_2)
{
    keystore_t *ks = s_open_with_tenant ("alice");
    keystore_destroy (&ks);
    s_sql ("DROP TABLE idempotency; DROP TABLE objects; DROP TABLE issued; DROP TABLE audit;"
           "DELETE FROM meta WHERE name = 'state'", -1);
    if (s_pg_url)
        s_sql ("DELETE FROM schema_version WHERE version >= 3", 5);
    else
        s_sql ("UPDATE meta SET value = '2' WHERE name = 'schema'", 1);
    ck_assert_ptr_null (keystore_open (s_path, s_master));
    ck_assert_int_eq (keystore_upgrade (s_path, s_master, NULL), 2);
    ks = keystore_open (s_path, s_master);
    ck_assert_ptr_nonnull (ks);
    ck_assert (keystore_tenant_exists (ks, "alice"));
    char *version = s_sql_text (s_pg_url ? "SELECT max (version)::text FROM schema_version"
                                         : "SELECT CAST (value AS TEXT) FROM meta WHERE name = 'schema'");
    ck_assert_str_eq (version, "7");
    free (version);
    s_idem_new (ks, "alice", "after-upgrade");
    ck_assert_int_eq (keystore_idem_end (ks, (const uint8_t *) "r", 1, NULL, NULL), 0);
    s_idem_recorded (ks, "alice", "after-upgrade", "r");
    keystore_destroy (&ks);
}
END_TEST

#ifdef HAVE_LIBPQ
/*  Two brokers on one database run the same operation at once (a re-sent
 *  job while the first attempt still runs): both see the id unrecorded,
 *  both write a key; the first to commit wins, the second rolls back and
 *  gets the first one's result.  Exactly one key stays.  */
START_TEST (test_pg_idempotency_race)
{
    keystore_t *a = s_open_with_tenant ("alice");
    EVP_PKEY *pkey = s_keygen ("EC", "P-256");
    int ready [2];
    ck_assert_int_eq (pipe (ready), 0);
    s_idem_new (a, "alice", "same");
    char *ref_a = s_put (a, "alice", pkey, "from-a");
    pid_t child = fork ();
    ck_assert_int_ge (child, 0);
    if (child == 0) {
        //  The other broker: begins while a's transaction is open (the id is
        //  not visible yet), writes its key (waiting for a's row locks),
        //  and loses at its record.
        keystore_t *b = keystore_open (s_path, s_master);
        uint8_t *recorded = NULL;
        size_t len = 0;
        int rc = b && keystore_idem_begin (b, "alice", (const uint8_t *) "same", 4, &recorded, &len) == 0 ? 0 : 1;
        if (write (ready [1], "x", 1) != 1)
            rc = 2;
        key_info_params_t params = { .label = "from-b", .generated = true };
        Cs__KeyInfo *info = rc ? NULL : key_info_from_pkey (pkey, &params);
        if (!rc && (!info || keystore_key_put (b, "alice", info, NULL, 0) != 0))
            rc = 3;
        if (!rc && keystore_idem_end (b, (const uint8_t *) "b-lost", 6, &recorded, &len) != 1)
            rc = 4;
        if (!rc && (len != 5 || memcmp (recorded, "a-won", 5) != 0))
            rc = 5;
        if (info)
            cs__key_info__free_unpacked (info, NULL);
        free (recorded);
        keystore_destroy (&b);
        _exit (rc);
    }
    char byte;
    ck_assert_int_eq (read (ready [0], &byte, 1), 1);
    zclock_sleep (200);                 //  b reaches its key write and waits
    ck_assert_int_eq (keystore_idem_end (a, (const uint8_t *) "a-won", 5, NULL, NULL), 0);
    int status = -1;
    ck_assert_int_eq (waitpid (child, &status, 0), child);
    ck_assert_int_eq (status, 0);
    ck_assert_int_eq (s_rows ("keys"), 1);
    Cs__KeyInfo *info = NULL;
    ck_assert_int_eq (keystore_key_get (a, "alice", ref_a, &info, NULL, NULL), 0);
    ck_assert_str_eq (info->label, "from-a");
    cs__key_info__free_unpacked (info, NULL);
    s_idem_recorded (a, "alice", "same", "a-won");
    close (ready [0]);
    close (ready [1]);
    free (ref_a);
    EVP_PKEY_free (pkey);
    keystore_destroy (&a);
}
END_TEST
#endif

static Suite *
s_suite (void)
{
    Suite *suite = suite_create ("keystore");
    TCase *tc = tcase_create ("keystore");
    tcase_add_checked_fixture (tc, s_setup, s_teardown);
    tcase_set_timeout (tc, 60);
    tcase_add_test (tc, test_key_round_trip);
    tcase_add_test (tc, test_no_plaintext_on_disk);
    tcase_add_test (tc, test_wrong_master_key);
    tcase_add_test (tc, test_moved_row_does_not_decrypt);
    tcase_add_test (tc, test_pin_counters_and_lock);
    tcase_add_test (tc, test_keys_version);
    tcase_add_test (tc, test_key_page);
    tcase_add_test (tc, test_tenants);
    tcase_add_test (tc, test_pin_epochs);
    tcase_add_test (tc, test_tampered_tenant_row);
    tcase_add_test (tc, test_open_again_keeps_locks);
    tcase_add_test (tc, test_settle);
    tcase_add_test (tc, test_tampered_key_row);
    tcase_add_test (tc, test_upgrade_from_schema_1);
    tcase_add_test (tc, test_master_key_files);
    tcase_add_test (tc, test_master_key_in_locked_page);
    tcase_add_test (tc, test_key_info_types);
    tcase_add_test (tc, test_idempotency);
    tcase_add_test (tc, test_objects);
    tcase_add_test (tc, test_upgrade_objects);
    tcase_add_test (tc, test_upgrade_from_schema_2);
    tcase_add_test (tc, test_table_descriptions);
    tcase_add_test (tc, test_master_rotate);
    tcase_add_test (tc, test_master_rotate_tampered);
    suite_add_tcase (suite, tc);
#ifdef HAVE_LIBPQ
    //  The same assertions against PostgreSQL (tests/integration/keystore-pg.sh);
    //  the SQLite file's own (locks, data_version, schema 1, WAL file) and the
    //  back end independent ones (master key files, key descriptions) are not
    //  repeated.
    if (getenv ("CS_TEST_PG_URL")) {
        tc = tcase_create ("postgresql");
        tcase_add_checked_fixture (tc, s_setup_pg, s_teardown);
        tcase_set_timeout (tc, 120);
        tcase_add_test (tc, test_key_round_trip);
        tcase_add_test (tc, test_pg_no_plaintext_on_disk);
        tcase_add_test (tc, test_wrong_master_key);
        tcase_add_test (tc, test_moved_row_does_not_decrypt);
        tcase_add_test (tc, test_pin_counters_and_lock);
        tcase_add_test (tc, test_keys_version);
    tcase_add_test (tc, test_key_page);
        tcase_add_test (tc, test_tenants);
        tcase_add_test (tc, test_pin_epochs);
        tcase_add_test (tc, test_tampered_tenant_row);
        tcase_add_test (tc, test_tampered_key_row);
        tcase_add_test (tc, test_pg_schema_version);
        tcase_add_test (tc, test_objects);
        tcase_add_test (tc, test_pg_listener);
        tcase_add_test (tc, test_master_key_in_locked_page);
        tcase_add_test (tc, test_idempotency);
        tcase_add_test (tc, test_upgrade_from_schema_2);
        tcase_add_test (tc, test_pg_idempotency_race);
        tcase_add_test (tc, test_table_descriptions);
        tcase_add_test (tc, test_master_rotate);
        suite_add_tcase (suite, tc);
    }
#endif
    return suite;
}

int
main (void)
{
    zsys_init ();
    SRunner *runner = srunner_create (s_suite ());
    srunner_run_all (runner, CK_NORMAL);
    int failed = srunner_ntests_failed (runner);
    srunner_free (runner);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
