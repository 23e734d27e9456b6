/*  test_keystore.c — the keystore (keystore/keystore.c) and key descriptions
 *  (keystore/key_info.c) against real SQLite files in a temporary directory:
 *  round trips, encryption at rest (no plaintext window in the file or its
 *  WAL), the master key check, associated data binding, PIN counters and
 *  flags, key versions, tenant removal.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <czmq.h>
#include <sqlite3.h>
#include <openssl/bn.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/x509.h>
#include "cs_secmem.h"
#include "keystore.h"
#include "key_info.h"
#include "test_smaps.h"

#define WINDOW 16       /* bytes of plaintext that must never appear in a file */

static char s_dir [64];
static char s_path [128];
static uint8_t s_master [KEYSTORE_MASTER_KEY_LEN];

static void
s_setup (void)
{
    strcpy (s_dir, "/tmp/test_keystore.XXXXXX");
    ck_assert_ptr_nonnull (mkdtemp (s_dir));
    snprintf (s_path, sizeof s_path, "%s/keystore.db", s_dir);
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
    uint8_t *der = key_info_pkcs8 (pkey, &len);
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
    EVP_PKEY *back = key_info_pkey_from_pkcs8 (der, len);
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
    uint8_t *der = key_info_pkcs8 (pkey, &der_len);
    ck_assert_uint_gt (len, 5 * 128);
    char *ref = s_put (ks, "alice", pkey, "rsa");
    char wal [160];
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
    sqlite3 *db = NULL;
    ck_assert_int_eq (sqlite3_open (s_path, &db), SQLITE_OK);
    char *sql = sqlite3_mprintf ("INSERT INTO keys (tenant, ref, info, private) "
                                 "SELECT %Q, %Q, info, private FROM keys WHERE tenant = %Q AND ref = %Q",
                                 to_tenant, to_ref, tenant, ref);
    ck_assert_int_eq (sqlite3_exec (db, sql, NULL, NULL, NULL), SQLITE_OK);
    ck_assert_int_eq (sqlite3_changes (db), 1);
    sqlite3_free (sql);
    sqlite3_close (db);
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
                                        &info, &der, &len), -1);
    ck_assert_int_eq (keystore_key_get (ks, "bob", ref, &info, &der, &len), -1);
    ck_assert_ptr_null (der);
    //  The public description alone still reads (no decryption needed).
    ck_assert_int_eq (keystore_key_get (ks, "bob", ref, &info, NULL, NULL), 0);
    cs__key_info__free_unpacked (info, NULL);
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
    ck_assert_uint_eq (keystore_pin_check (ks, "alice", CKU_USER, "1234", 4), CKR_OK);
    ck_assert_uint_eq (keystore_pin_check (ks, "alice", CKU_USER, "9999", 4), CKR_PIN_INCORRECT);
    ck_assert_uint_eq (keystore_pin_flags (ks, "alice"), CKF_USER_PIN_COUNT_LOW);
    //  A right PIN resets the count.
    ck_assert_uint_eq (keystore_pin_check (ks, "alice", CKU_USER, "1234", 4), CKR_OK);
    ck_assert_uint_eq (keystore_pin_flags (ks, "alice"), 0);
    //  5 wrong PINs in a row lock (cryptoserver-keystore(5); a literal, so
    //  that a change of KEYSTORE_PIN_MAX_FAILURES fails here): 4, the final try...
    for (int i = 1; i < 5; i++)
        ck_assert_uint_eq (keystore_pin_check (ks, "alice", CKU_USER, "9999", 4), CKR_PIN_INCORRECT);
    ck_assert_uint_eq (keystore_pin_flags (ks, "alice"), CKF_USER_PIN_COUNT_LOW | CKF_USER_PIN_FINAL_TRY);
    ck_assert_uint_eq (keystore_pin_check (ks, "alice", CKU_USER, "9999", 4), CKR_PIN_INCORRECT);
    ck_assert_uint_eq (keystore_pin_flags (ks, "alice"), CKF_USER_PIN_COUNT_LOW | CKF_USER_PIN_LOCKED);
    ck_assert_uint_eq (keystore_pin_check (ks, "alice", CKU_USER, "1234", 4), CKR_PIN_LOCKED);
    ck_assert_uint_eq (keystore_pin_check (ks, "alice", CKU_USER, "9999", 4), CKR_PIN_LOCKED);
    //  The count is durable: a new connection sees the lock.
    keystore_destroy (&ks);
    ks = keystore_open (s_path, s_master);
    ck_assert_uint_eq (keystore_pin_check (ks, "alice", CKU_USER, "1234", 4), CKR_PIN_LOCKED);
    //  The SO is not affected; one wrong SO PIN shows in the SO flags.
    ck_assert_uint_eq (keystore_pin_check (ks, "alice", CKU_SO, "123456", 6), CKR_OK);
    ck_assert_uint_eq (keystore_pin_check (ks, "alice", CKU_SO, "000000", 6), CKR_PIN_INCORRECT);
    ck_assert (keystore_pin_flags (ks, "alice") & CKF_SO_PIN_COUNT_LOW);
    //  C_InitPIN: a new user PIN unlocks.
    ck_assert_uint_eq (keystore_pin_set (ks, "alice", CKU_USER, "4321", 4), CKR_OK);
    ck_assert_uint_eq (keystore_pin_flags (ks, "alice") & 0xffff0000UL & ~(CKF_SO_PIN_COUNT_LOW), 0);
    ck_assert_uint_eq (keystore_pin_check (ks, "alice", CKU_USER, "1234", 4), CKR_PIN_INCORRECT);
    ck_assert_uint_eq (keystore_pin_check (ks, "alice", CKU_USER, "4321", 4), CKR_OK);
    //  Errors.
    ck_assert_uint_eq (keystore_pin_set (ks, "alice", CKU_USER, "12", 2), CKR_PIN_LEN_RANGE);
    ck_assert_uint_eq (keystore_pin_check (ks, "alice", 7, "1234", 4), CKR_USER_TYPE_INVALID);
    ck_assert_uint_eq (keystore_pin_check (ks, "nobody", CKU_USER, "1234", 4), CKR_DEVICE_ERROR);
    ck_assert_uint_eq (keystore_pin_set (ks, "nobody", CKU_USER, "1234", 4), CKR_DEVICE_ERROR);
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
    ck_assert_ptr_null (key_info_pkcs8 (pub, &(size_t) { 0 }));
    cs__key_info__free_unpacked (info, NULL);
    OPENSSL_free (spki);
    EVP_PKEY_free (pub);
    EVP_PKEY_free (rsa);
    EVP_PKEY_free (ec);
    EVP_PKEY_free (p521);
    EVP_PKEY_free (ed);
}
END_TEST

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
    tcase_add_test (tc, test_tenants);
    tcase_add_test (tc, test_master_key_files);
    tcase_add_test (tc, test_master_key_in_locked_page);
    tcase_add_test (tc, test_key_info_types);
    suite_add_tcase (suite, tc);
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
