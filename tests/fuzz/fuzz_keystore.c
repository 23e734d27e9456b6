/*  fuzz_keystore.c — libFuzzer target over what the keystore decodes from
 *  the rows of keystore.db (docs/FUZZING.md): the input becomes one row,
 *  written with SQLite behind the keystore's back (as a writer of the file
 *  would), then read through the keystore's own calls.
 *
 *  Input: a mode byte, then length-prefixed fields (2 bytes big-endian,
 *  then the bytes; a field running past the end takes the rest; missing
 *  fields are empty).  Mode bits:
 *    0-1  the table: 0 and 3 keys (3: bound as TEXT, not BLOB), 1 objects,
 *         2 tenants (row "other")
 *    2    the row carries its true MAC, computed here with the keystore's
 *         row key (row_mac.h): what only the master key can make, so the
 *         decoding after the MAC is reached; otherwise the MAC field is used
 *    3    the private field is sealed here under the master key with the
 *         row's associated data (ks_seal), so what follows the decryption
 *         (PKCS#8 or ObjectInfo decoding) is reached
 *    4    the row has no private blob (NULL)
 *  Keys and objects: fields ref, info, private, mac; tenants: user PIN, SO
 *  PIN, mac, then four 8-byte integers (failures user/SO, epochs user/SO).
 *
 *  Invariants (a broken one aborts): a key, object or tenant row whose MAC
 *  is not the true one is never returned (keystore_key_get,
 *  keystore_key_list, keystore_object_get/list, keystore_tenant_state,
 *  keystore_pin_epoch refuse it); a key row's private blob is returned
 *  only when it opens, and then as the bytes that were sealed; an object
 *  is returned only with its row's ref; a verified tenant row is returned
 *  with the counts and epochs written; the seed key (ks:seed, written by
 *  keystore_key_put) is listed after every input, and at most one more.
 *  (A key row's KeyInfo.ref is not compared with the row's ref: only a
 *  row with its true MAC can disagree, and the keystore writes none.)
 */
#include <sqlite3.h>
#include <czmq.h>
#include "fuzz_setup.h"
#include "key_info.h"
#include "keystore_int.h"
#include "row_mac.h"

#define S_SEED_REF "ks:seed"
#define S_KEY_AAD "cs-key-v1"           /* keystore/ks_keys.c KEY_AAD_PREFIX */
#define S_OBJ_AAD "cs-obj-v1"           /* keystore/ks_objects.c OBJ_AAD_PREFIX */

static struct {
    char *dir;
    keystore_t *ks;
    sqlite3 *db;                        /* the writer behind the keystore's back */
    uint8_t master [KEYSTORE_MASTER_KEY_LEN];
    uint8_t mac_key [32];
} s_fz;

/*  One field of the input.  */
typedef struct {
    const uint8_t *data;
    size_t len;
} s_field_t;

static s_field_t
s_next (const uint8_t **data_p, size_t *size_p)
{
    s_field_t field = { *data_p, 0 };
    if (*size_p < 2) {
        field.len = *size_p;
        *data_p += *size_p;
        *size_p = 0;
        return field;
    }
    size_t len = (size_t) (*data_p) [0] << 8 | (*data_p) [1];
    *data_p += 2;
    *size_p -= 2;
    field.data = *data_p;
    field.len = len < *size_p ? len : *size_p;
    *data_p += field.len;
    *size_p -= field.len;
    return field;
}

static int64_t
s_int (const uint8_t **data_p, size_t *size_p)
{
    uint64_t value = 0;
    for (int i = 0; i < 8 && *size_p > 0; i++, (*data_p)++, (*size_p)--)
        value = value << 8 | **data_p;
    return (int64_t) value;
}

/*  A NUL-terminated copy of field (caller frees).  */
static char *
s_text (s_field_t field)
{
    char *text = malloc (field.len + 1);
    fz_setup_check (text != NULL, "malloc");
    memcpy (text, field.data, field.len);
    text [field.len] = 0;
    return text;
}

static void
s_cleanup (void)
{
    keystore_destroy (&s_fz.ks);
    sqlite3_close (s_fz.db);
    OPENSSL_cleanse (s_fz.master, sizeof s_fz.master);
    OPENSSL_cleanse (s_fz.mac_key, sizeof s_fz.mac_key);
    if (s_fz.dir)
        fz_tmpdir_remove (s_fz.dir);
    free (s_fz.dir);
}

/*  Stores the seed key ks:seed of tenant demo as the keystore writes keys.  */
static void
s_seed_key (void)
{
    EVP_PKEY *pkey = fz_key_pem (s_fz.dir, "seed.pem");
    key_info_params_t params = { .ref = S_SEED_REF, .label = "seed", .generated = true };
    Cs__KeyInfo *info = key_info_from_pkey (pkey, &params);
    size_t len = 0;
    uint8_t *pkcs8 = cs_pkey_to_pkcs8 (pkey, &len);
    fz_setup_check (info && pkcs8 && keystore_key_put (s_fz.ks, "demo", info, pkcs8, len) == 0, "seed key");
    cs__key_info__free_unpacked (info, NULL);
    OPENSSL_cleanse (pkcs8, len);
    free (pkcs8);
    EVP_PKEY_free (pkey);
}

int LLVMFuzzerInitialize (int *argc, char ***argv);
int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

int
LLVMFuzzerInitialize (int *argc, char ***argv)
{
    (void) argc;
    (void) argv;
    zsys_init ();
    zsys_set_logsystem (false);
    if (!getenv ("CS_FUZZ_VERBOSE"))
        zsys_set_logstream (fopen ("/dev/null", "w"));
    s_fz.dir = fz_tmpdir ();
    fz_keystore (s_fz.dir, s_fz.master);
    fz_setup_check (row_mac_derive (s_fz.master, ROW_MAC_INFO_ROWS, s_fz.mac_key) == 0, "row key");
    char path [4096];
    snprintf (path, sizeof path, "%s/keystore.db", s_fz.dir);
    s_fz.ks = keystore_open (path, s_fz.master);
    fz_setup_check (s_fz.ks != NULL, "keystore_open");
    s_seed_key ();
    fz_setup_check (sqlite3_open (path, &s_fz.db) == SQLITE_OK
                    && sqlite3_busy_timeout (s_fz.db, 5000) == SQLITE_OK
                    && sqlite3_exec (s_fz.db, "PRAGMA synchronous = OFF", NULL, NULL, NULL) == SQLITE_OK,
                    "sqlite3_open");
    atexit (s_cleanup);
    return 0;
}

/*  Runs sql with the binds of (tenant, ref, info, private, mac); info bound
 *  as text when as_text.  Returns true when SQLite took it.  */
static bool
s_write_row (const char *sql, const char *tenant, const char *ref, s_field_t info, bool as_text,
             const uint8_t *private, size_t private_len, const uint8_t *mac, size_t mac_len)
{
    sqlite3_stmt *stmt = NULL;
    if (sqlite3_prepare_v2 (s_fz.db, sql, -1, &stmt, NULL) != SQLITE_OK)
        fz_setup_check (false, sqlite3_errmsg (s_fz.db));
    sqlite3_bind_text (stmt, 1, tenant, -1, SQLITE_STATIC);
    sqlite3_bind_text (stmt, 2, ref, -1, SQLITE_STATIC);
    if (as_text)
        sqlite3_bind_text (stmt, 3, (const char *) info.data, (int) info.len, SQLITE_STATIC);
    else
        sqlite3_bind_blob (stmt, 3, info.data ? (const void *) info.data : "", (int) info.len, SQLITE_STATIC);
    if (private)
        sqlite3_bind_blob (stmt, 4, private, (int) private_len, SQLITE_STATIC);
    else
        sqlite3_bind_null (stmt, 4);
    sqlite3_bind_blob (stmt, 5, mac, (int) mac_len, SQLITE_STATIC);
    bool ok = sqlite3_step (stmt) == SQLITE_DONE;
    sqlite3_finalize (stmt);
    return ok;
}

/*  A key or object row from the input; then reads it back.  */
static void
s_key_or_object (unsigned mode, const uint8_t *data, size_t size)
{
    bool objects = (mode & 3) == 1, true_mac = mode & 4, seal = mode & 8, no_private = mode & 16;
    const char *tenant = "demo";
    s_field_t ref_f = s_next (&data, &size), info = s_next (&data, &size);
    s_field_t private_f = s_next (&data, &size), mac_f = s_next (&data, &size);
    char *ref = s_text (ref_f);
    if (strcmp (ref, S_SEED_REF) == 0 || strlen (ref) != ref_f.len) {
        free (ref);                     /* the seed stays; a ref with a NUL is not one SQLite keeps whole */
        return;
    }
    uint8_t *private = no_private ? NULL : (uint8_t *) (private_f.data ? private_f.data : (const uint8_t *) "");
    size_t private_len = no_private ? 0 : private_f.len;
    uint8_t *sealed = NULL;
    if (private && seal) {
        size_t aad_len = 0;
        uint8_t *aad = ks_row_aad (objects ? S_OBJ_AAD : S_KEY_AAD, tenant, ref, &aad_len);
        sealed = aad ? ks_seal (s_fz.master, aad, aad_len, private_f.data, private_f.len, &private_len) : NULL;
        free (aad);
        fz_setup_check (sealed != NULL, "ks_seal");
        private = sealed;
    }
    uint8_t mac [ROW_MAC_LEN];
    const uint8_t *row_mac = mac_f.data;
    size_t row_mac_len = mac_f.len;
    if (true_mac) {
        int rc = objects ? row_mac_object (s_fz.mac_key, tenant, ref, info.data, info.len, private, private_len, mac)
                         : row_mac_key (s_fz.mac_key, tenant, ref, info.data, info.len, private, private_len, mac);
        fz_setup_check (rc == 0, "row mac");
        row_mac = mac;
        row_mac_len = sizeof mac;
    }
    else
    if (mac_f.len == ROW_MAC_LEN) {     /* the fuzzer cannot make a true MAC: never take it for one */
        int rc = objects ? row_mac_object (s_fz.mac_key, tenant, ref, info.data, info.len, private, private_len, mac)
                         : row_mac_key (s_fz.mac_key, tenant, ref, info.data, info.len, private, private_len, mac);
        true_mac = rc == 0 && memcmp (mac, mac_f.data, ROW_MAC_LEN) == 0;
    }
    //  The previous input's row goes in the same commit: one commit per input.
    sqlite3_exec (s_fz.db, "BEGIN; DELETE FROM objects; DELETE FROM keys WHERE ref <> '" S_SEED_REF "'",
                  NULL, NULL, NULL);
    char sql [200];
    snprintf (sql, sizeof sql, "INSERT OR REPLACE INTO %s (tenant, ref, info, private, mac) VALUES (?1, ?2, ?3, ?4, ?5)",
              objects ? "objects" : "keys");
    bool written = s_write_row (sql, tenant, ref, info, (mode & 3) == 3, private, private_len, row_mac, row_mac_len);
    sqlite3_exec (s_fz.db, written ? "COMMIT" : "ROLLBACK", NULL, NULL, NULL);
    if (written) {
        if (objects) {
            Cs__ObjectInfo *got = NULL;
            int rc = keystore_object_get (s_fz.ks, tenant, ref, &got);
            if (rc == 0 && !true_mac)
                fz_fail ("object row %s without its MAC was returned", ref);
            if (rc == 0 && (!got || !got->ref || strcmp (got->ref, ref) != 0))
                fz_fail ("object row %s returned with another ref", ref);
            if (got)
                cs__object_info__free_unpacked (got, NULL);
            Cs__ObjectInfo **list = NULL;
            size_t count = 0;
            if (keystore_object_list (s_fz.ks, tenant, &list, &count) == 0) {
                if (count > 0 && !true_mac)
                    fz_fail ("an object row without its MAC was listed");
                for (size_t i = 0; i < count; i++)
                    cs__object_info__free_unpacked (list [i], NULL);
                free (list);
            }
        }
        else {
            Cs__KeyInfo *got = NULL;
            uint8_t *pkcs8 = NULL;
            size_t pkcs8_len = 0;
            int rc = keystore_key_get (s_fz.ks, tenant, ref, &got, &pkcs8, &pkcs8_len);
            if (rc == 0 && !true_mac)
                fz_fail ("key row %s without its MAC was returned", ref);
            if (rc == 0 && private && !(seal && pkcs8 && pkcs8_len == private_f.len
                                        && memcmp (pkcs8, private_f.data, pkcs8_len) == 0))
                fz_fail ("key row %s: a private blob that was not sealed for it was opened", ref);
            if (pkcs8) {
                EVP_PKEY_free (cs_pkey_from_pkcs8 (pkcs8, pkcs8_len));    /* as the broker loads it */
                OPENSSL_cleanse (pkcs8, pkcs8_len);
                free (pkcs8);
            }
            if (got)
                cs__key_info__free_unpacked (got, NULL);
            Cs__KeyInfo **list = NULL;
            size_t count = 0, seed = 0;
            fz_setup_check (keystore_key_list (s_fz.ks, tenant, &list, &count) == 0, "key list");
            for (size_t i = 0; i < count; i++) {
                seed += list [i]->ref && strcmp (list [i]->ref, S_SEED_REF) == 0;
                cs__key_info__free_unpacked (list [i], NULL);
            }
            free (list);
            if (count > 1 + (size_t) true_mac || seed < 1)
                fz_fail ("key list: %zu keys (%zu the seed) after a row %s its MAC", count, seed,
                         true_mac ? "with" : "without");
        }
    }
    free (sealed);
    free (ref);
}

/*  Tenant row "other" from the input; then reads it back.  */
static void
s_tenant (unsigned mode, const uint8_t *data, size_t size)
{
    s_field_t user_f = s_next (&data, &size), so_f = s_next (&data, &size), mac_f = s_next (&data, &size);
    row_mac_tenant_t row = { .pin = { s_text (user_f), s_text (so_f) } };
    for (int i = 0; i < 2; i++)
        row.failures [i] = s_int (&data, &size);
    for (int i = 0; i < 2; i++)
        row.epoch [i] = s_int (&data, &size);
    uint8_t mac [ROW_MAC_LEN];
    fz_setup_check (row_mac_tenant (s_fz.mac_key, "other", &row, mac) == 0, "tenant mac");
    bool true_mac = (mode & 4) || (mac_f.len == ROW_MAC_LEN && memcmp (mac, mac_f.data, ROW_MAC_LEN) == 0);
    sqlite3_stmt *stmt = NULL;
    fz_setup_check (sqlite3_prepare_v2 (s_fz.db, "UPDATE tenants SET user_pin = ?1, so_pin = ?2, user_failures = ?3, "
                                        "so_failures = ?4, user_epoch = ?5, so_epoch = ?6, mac = ?7 "
                                        "WHERE name = 'other'", -1, &stmt, NULL) == SQLITE_OK, "prepare");
    sqlite3_bind_text (stmt, 1, row.pin [0], -1, SQLITE_STATIC);
    sqlite3_bind_text (stmt, 2, row.pin [1], -1, SQLITE_STATIC);
    for (int i = 0; i < 2; i++) {
        sqlite3_bind_int64 (stmt, 3 + i, row.failures [i]);
        sqlite3_bind_int64 (stmt, 5 + i, row.epoch [i]);
    }
    if (mode & 4)
        sqlite3_bind_blob (stmt, 7, mac, ROW_MAC_LEN, SQLITE_STATIC);
    else
        sqlite3_bind_blob (stmt, 7, mac_f.data ? (const void *) mac_f.data : "", (int) mac_f.len, SQLITE_STATIC);
    bool written = sqlite3_step (stmt) == SQLITE_DONE;
    sqlite3_finalize (stmt);
    if (written) {
        keystore_tenant_t state;
        int rc = keystore_tenant_state (s_fz.ks, "other", &state);
        if (rc == 0 && !true_mac)
            fz_fail ("tenant row without its MAC was returned");
        if (rc == 0 && true_mac
        &&  (state.failures [0] != row.failures [0] || state.failures [1] != row.failures [1]
             || state.epoch [0] != (uint64_t) row.epoch [0] || state.epoch [1] != (uint64_t) row.epoch [1]))
            fz_fail ("tenant row returned with other counts or epochs than written");
        uint64_t epoch = 0;
        if (keystore_pin_epoch (s_fz.ks, "other", CKU_USER, &epoch) == 0 && !true_mac)
            fz_fail ("PIN epoch of a tenant row without its MAC was returned");
        (void) keystore_pin_flags (s_fz.ks, "other");
    }
    free (row.pin [0]);
    free (row.pin [1]);
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    unsigned mode = data [0];
    if ((mode & 3) == 2)
        s_tenant (mode, data + 1, size - 1);
    else
        s_key_or_object (mode, data + 1, size - 1);
    return 0;
}
