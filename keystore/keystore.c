/*  keystore.c — the broker's store of server-held keys and tenants (keystore.h).
 *
 *  One SQLite file in WAL mode with synchronous=FULL and secure_delete, three
 *  tables (meta, tenants, keys; schema below).  Private keys are sealed with
 *  AES-256-GCM (NIST SP 800-38D, RFC 5116 AEAD_AES_256_GCM) under the master
 *  key: blob = nonce (12) || ciphertext || tag (16), associated data
 *  "cs-key-v1" || tenant || NUL || ref.  Tenant and key rows carry an
 *  HMAC-SHA256 (row_mac.h) under a key derived from the master key; PIN
 *  hashes are keyed with another derived key (cs_pin.h).  man
 *  cryptoserver-keystore(5) is the user-facing description of the file.
 */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <czmq.h>
#include <sqlite3.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include "keystore.h"
#include "cs_pin.h"
#include "row_mac.h"
#include "cs_secmem.h"
#include "cs_util.h"

#define SCHEMA_VERSION   2              /* 1: no row MACs, epochs, keyed PIN hashes */
#define BUSY_TIMEOUT_MS  5000           /* admin and broker share the file */
#define GCM_NONCE_LEN    12             /* bytes, RFC 5116 §5.1 N_MIN = N_MAX */
#define GCM_TAG_LEN      16             /* bytes */
#define TENANT_NAME_MAX  32             /* bytes: it is the token label */
#define KEY_AAD_PREFIX   "cs-key-v1"
#define CHECK_AAD        "cs-master-check-v1"
#define CHECK_PLAINTEXT  "cryptoserver keystore master key check value"

//  The keystore's secrets, kept together in one locked, no-dump page.
typedef struct {
    uint8_t master [KEYSTORE_MASTER_KEY_LEN];
    uint8_t mac_key [32];                   /* HKDF (master, ROW_MAC_INFO_ROWS) */
    uint8_t pin_key [CS_PIN_KEY_LEN];       /* HKDF (master, ROW_MAC_INFO_PINS) */
} s_keys_t;

//  The statements of the hot reads, prepared once per connection and
//  reset after each use (s_stmt, s_stmt_done): a key job or a ticket check
//  must not compile SQL every time.
enum { S_STMT_TENANT, S_STMT_KEY, S_STMT_KEYS_VERSION, S_STMT_TENANT_EXISTS, S_STMTS };

struct _keystore_t {
    sqlite3 *db;
    char *path;
    s_keys_t *keys;             /* the master key and the keys derived from it:
                                   one locked, no-dump page of its own (cs_secmem) */
    sqlite3_stmt *stmts [S_STMTS];  /* prepared hot reads, or NULL until first use */
    int64_t data_version;           /* PRAGMA data_version at open or at the last settle */
};

static keystore_hook_fn *s_test_hook;   /* keystore_set_test_hook; atomic */

void
keystore_set_test_hook (keystore_hook_fn *hook)
{
    __atomic_store_n (&s_test_hook, hook, __ATOMIC_SEQ_CST);
}

//  Tells the test hook, when there is one, that `call` is about to read.
static void
s_hook (const char *call)
{
    keystore_hook_fn *hook = __atomic_load_n (&s_test_hook, __ATOMIC_SEQ_CST);
    if (hook)
        hook (call);
}

//  The schema (version 2).  Lock state is derived from the counters: a PIN
//  is locked when its failure count reaches KEYSTORE_PIN_MAX_FAILURES.
//  keys_version and the PIN epochs take their values from meta
//  'version_seq', a counter over the whole file, so a tenant removed and
//  added again never repeats an old version or epoch.  `mac` is the row's
//  HMAC (row_mac.h); keys_version is outside it: it only tells clients when
//  to fetch the key list again.  Version 1 had no epochs and no mac
//  columns (s_upgrade_1_to_2 adds them).
static const char *s_schema =
    "CREATE TABLE IF NOT EXISTS meta ("
    "  name TEXT PRIMARY KEY, value BLOB NOT NULL);"
    "CREATE TABLE IF NOT EXISTS tenants ("
    "  name TEXT PRIMARY KEY,"
    "  user_pin TEXT NOT NULL, so_pin TEXT NOT NULL,"
    "  user_failures INTEGER NOT NULL DEFAULT 0,"
    "  so_failures INTEGER NOT NULL DEFAULT 0,"
    "  keys_version INTEGER NOT NULL,"
    "  user_epoch INTEGER NOT NULL DEFAULT 0,"
    "  so_epoch INTEGER NOT NULL DEFAULT 0,"
    "  mac BLOB);"
    "CREATE TABLE IF NOT EXISTS keys ("
    "  tenant TEXT NOT NULL REFERENCES tenants (name) ON DELETE CASCADE,"
    "  ref TEXT NOT NULL,"
    "  info BLOB NOT NULL,"
    "  private BLOB,"
    "  mac BLOB,"
    "  PRIMARY KEY (tenant, ref));";

/* ---- small helpers ---------------------------------------------------- */

//  Logs a SQLite failure of `what` with the database's message.
static void
s_db_error (keystore_t *self, const char *what)
{
    zsys_error ("keystore %s: %s: %s", self->path, what, sqlite3_errmsg (self->db));
}

//  Prepares `sql`.  Returns the statement (caller finalizes) or NULL after a log.
static sqlite3_stmt *
s_prepare (keystore_t *self, const char *sql)
{
    sqlite3_stmt *stmt = NULL;
    if (sqlite3_prepare_v2 (self->db, sql, -1, &stmt, NULL) != SQLITE_OK) {
        s_db_error (self, "prepare");
        sqlite3_finalize (stmt);
        return NULL;
    }
    return stmt;
}

//  The prepared statement `which` of `sql` (prepared at its first use and
//  kept; its bindings are clear).  Returns it, or NULL after a log.  Give it
//  back with s_stmt_done, never sqlite3_finalize.
static sqlite3_stmt *
s_stmt (keystore_t *self, int which, const char *sql)
{
    if (!self->stmts [which])
        self->stmts [which] = s_prepare (self, sql);
    return self->stmts [which];
}

//  Ends the use of a statement: a kept one (s_stmt) is reset, so that it
//  holds no read transaction open, and its bindings cleared; any other is
//  finalized.  NULL-safe.
static void
s_stmt_done (keystore_t *self, sqlite3_stmt *stmt)
{
    for (int i = 0; stmt && i < S_STMTS; i++)
        if (self->stmts [i] == stmt) {
            sqlite3_reset (stmt);
            sqlite3_clear_bindings (stmt);
            return;
        }
    sqlite3_finalize (stmt);
}

//  Runs statements without results.  Returns 0, or -1 after a log.
static int
s_exec (keystore_t *self, const char *sql)
{
    if (sqlite3_exec (self->db, sql, NULL, NULL, NULL) == SQLITE_OK)
        return 0;
    s_db_error (self, sql);
    return -1;
}

//  PRAGMA data_version of the connection into *version_p: it moves when
//  another connection commits, never for this one's own commits.  0 or -1.
static int
s_data_version (keystore_t *self, int64_t *version_p)
{
    sqlite3_stmt *stmt = s_prepare (self, "PRAGMA data_version");
    int rc = stmt && sqlite3_step (stmt) == SQLITE_ROW ? 0 : -1;
    if (rc == 0)
        *version_p = sqlite3_column_int64 (stmt, 0);
    else
        s_db_error (self, "data_version");
    sqlite3_finalize (stmt);
    return rc;
}

//  Steps a statement that returns no row.  Returns 0, or -1 after a log.
static int
s_step_done (keystore_t *self, sqlite3_stmt *stmt)
{
    if (sqlite3_step (stmt) == SQLITE_DONE)
        return 0;
    s_db_error (self, "write");
    return -1;
}

//  Binds text (NUL-terminated) at position `index`.
static void
s_bind_text (sqlite3_stmt *stmt, int index, const char *text)
{
    sqlite3_bind_text (stmt, index, text, -1, SQLITE_TRANSIENT);
}

/* ---- AES-256-GCM (RFC 5116) ------------------------------------------ */

//  Seals plain (len bytes) with `key` and associated data aad (aad_len
//  bytes).  Returns a malloc'd blob nonce || ciphertext || tag of
//  *blob_len_p bytes (caller frees), or NULL on failure.
static uint8_t *
s_seal (const uint8_t *key, const void *aad, size_t aad_len,
        const uint8_t *plain, size_t len, size_t *blob_len_p)
{
    size_t blob_len = GCM_NONCE_LEN + len + GCM_TAG_LEN;
    uint8_t *blob = malloc (blob_len);
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new ();
    int out_len = 0, final_len = 0;
    bool ok = blob && ctx && len <= INT_MAX && aad_len <= INT_MAX
           && RAND_bytes (blob, GCM_NONCE_LEN) == 1
           && EVP_EncryptInit_ex (ctx, EVP_aes_256_gcm (), NULL, key, blob) == 1
           && EVP_EncryptUpdate (ctx, NULL, &out_len, aad, (int) aad_len) == 1
           && EVP_EncryptUpdate (ctx, blob + GCM_NONCE_LEN, &out_len, plain, (int) len) == 1
           && EVP_EncryptFinal_ex (ctx, blob + GCM_NONCE_LEN + out_len, &final_len) == 1
           && (size_t) (out_len + final_len) == len
           && EVP_CIPHER_CTX_ctrl (ctx, EVP_CTRL_GCM_GET_TAG, GCM_TAG_LEN,
                                   blob + GCM_NONCE_LEN + len) == 1;
    EVP_CIPHER_CTX_free (ctx);
    if (!ok) {
        if (blob)
            OPENSSL_cleanse (blob, blob_len);
        free (blob);
        return NULL;
    }
    *blob_len_p = blob_len;
    return blob;
}

//  Opens a blob made by s_seal.  Returns the malloc'd plaintext of
//  *len_p bytes (caller wipes and frees; one spare NUL byte follows it), or
//  NULL when the blob is short, was sealed under another key or other
//  associated data, or was changed (the GCM tag does not verify).
static uint8_t *
s_open (const uint8_t *key, const void *aad, size_t aad_len,
        const uint8_t *blob, size_t blob_len, size_t *len_p)
{
    if (blob_len < GCM_NONCE_LEN + GCM_TAG_LEN || blob_len > INT_MAX || aad_len > INT_MAX)
        return NULL;
    size_t len = blob_len - GCM_NONCE_LEN - GCM_TAG_LEN;
    uint8_t *plain = malloc (len + 1);
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new ();
    int out_len = 0, final_len = 0;
    bool ok = plain && ctx
           && EVP_DecryptInit_ex (ctx, EVP_aes_256_gcm (), NULL, key, blob) == 1
           && EVP_DecryptUpdate (ctx, NULL, &out_len, aad, (int) aad_len) == 1
           && EVP_DecryptUpdate (ctx, plain, &out_len, blob + GCM_NONCE_LEN, (int) len) == 1
           && EVP_CIPHER_CTX_ctrl (ctx, EVP_CTRL_GCM_SET_TAG, GCM_TAG_LEN,
                                   (void *) (blob + GCM_NONCE_LEN + len)) == 1
           && EVP_DecryptFinal_ex (ctx, plain + out_len, &final_len) == 1;
    EVP_CIPHER_CTX_free (ctx);
    if (!ok) {
        if (plain)
            OPENSSL_cleanse (plain, len + 1);
        free (plain);
        return NULL;
    }
    plain [len] = 0;
    *len_p = len;
    return plain;
}

//  Builds the associated data of a key row: "cs-key-v1" || tenant || NUL ||
//  ref, into a malloc'd buffer of *len_p bytes (caller frees).
static uint8_t *
s_key_aad (const char *tenant, const char *ref, size_t *len_p)
{
    size_t prefix = strlen (KEY_AAD_PREFIX), tlen = strlen (tenant), rlen = strlen (ref);
    uint8_t *aad = malloc (prefix + tlen + 1 + rlen);
    if (!aad)
        return NULL;
    memcpy (aad, KEY_AAD_PREFIX, prefix);
    memcpy (aad + prefix, tenant, tlen);
    aad [prefix + tlen] = 0;
    memcpy (aad + prefix + tlen + 1, ref, rlen);
    *len_p = prefix + tlen + 1 + rlen;
    return aad;
}

/* ---- meta rows -------------------------------------------------------- */

//  Reads meta row `name` into a malloc'd buffer (*len_p bytes; caller
//  frees).  Returns 1 found, 0 absent, -1 on error.
static int
s_meta_get (keystore_t *self, const char *name, uint8_t **value_p, size_t *len_p)
{
    sqlite3_stmt *stmt = s_prepare (self, "SELECT value FROM meta WHERE name = ?1");
    int rc = -1;
    if (!stmt)
        return -1;
    s_bind_text (stmt, 1, name);
    int step = sqlite3_step (stmt);
    if (step == SQLITE_DONE)
        rc = 0;
    else
    if (step == SQLITE_ROW) {
        size_t len = (size_t) sqlite3_column_bytes (stmt, 0);
        *value_p = malloc (len + 1);
        if (*value_p) {
            memcpy (*value_p, sqlite3_column_blob (stmt, 0), len);
            (*value_p) [len] = 0;
            *len_p = len;
            rc = 1;
        }
    }
    else
        s_db_error (self, "read meta");
    sqlite3_finalize (stmt);
    return rc;
}

//  Writes meta row `name`.  Returns 0 or -1.
static int
s_meta_put (keystore_t *self, const char *name, const void *value, size_t len)
{
    sqlite3_stmt *stmt = s_prepare (self, "INSERT OR REPLACE INTO meta (name, value) VALUES (?1, ?2)");
    if (!stmt)
        return -1;
    s_bind_text (stmt, 1, name);
    sqlite3_bind_blob (stmt, 2, value, (int) len, SQLITE_TRANSIENT);
    int rc = s_step_done (self, stmt);
    sqlite3_finalize (stmt);
    return rc;
}

//  Takes the next value of the file-wide version counter (meta
//  'version_seq').  Call inside a write transaction.  Returns it, or 0 on
//  failure.
static uint64_t
s_version_next (keystore_t *self)
{
    if (s_exec (self, "UPDATE meta SET value = CAST (value AS INTEGER) + 1 "
                      "WHERE name = 'version_seq'") != 0)
        return 0;
    sqlite3_stmt *stmt = s_prepare (self, "SELECT CAST (value AS INTEGER) FROM meta "
                                          "WHERE name = 'version_seq'");
    uint64_t version = 0;
    if (stmt && sqlite3_step (stmt) == SQLITE_ROW)
        version = (uint64_t) sqlite3_column_int64 (stmt, 0);
    sqlite3_finalize (stmt);
    return version;
}

/* ---- tenant rows (integrity) ------------------------------------------- */

typedef row_mac_tenant_t s_tenant_row_t;

//  Index of a user type in a tenant row: 0 CKU_USER, 1 CKU_SO, -1 other.
static int
s_role (CK_USER_TYPE user_type)
{
    return user_type == CKU_USER ? 0 : user_type == CKU_SO ? 1 : -1;
}

static void
s_tenant_row_free (s_tenant_row_t *row)
{
    free (row->pin [0]);
    free (row->pin [1]);
    memset (row, 0, sizeof *row);
}

//  Reads tenant row `name` into *row (caller frees with s_tenant_row_free)
//  and, when keys_version_p is not NULL, its keys_version (outside the
//  MAC).  With `verify`, its MAC must match (else an error line naming the
//  tenant).  Returns 1 found, 0 unknown, -1 on a database error,
//  KEYSTORE_DAMAGED when it does not verify.
static int
s_tenant_read (keystore_t *self, const char *name, bool verify, s_tenant_row_t *row,
               uint64_t *keys_version_p)
{
    sqlite3_stmt *stmt = s_stmt (self, S_STMT_TENANT, "SELECT user_pin, so_pin, user_failures, "
                                 "so_failures, user_epoch, so_epoch, mac, keys_version FROM tenants "
                                 "WHERE name = ?1");
    uint8_t mac [ROW_MAC_LEN];
    int rc = -1;
    memset (row, 0, sizeof *row);
    s_hook ("tenant_read");
    if (!stmt)
        return -1;
    s_bind_text (stmt, 1, name);
    int step = sqlite3_step (stmt);
    if (step == SQLITE_DONE)
        rc = 0;
    else
    if (step != SQLITE_ROW)
        s_db_error (self, "read tenant");
    else {
        const char *user_pin = (const char *) sqlite3_column_text (stmt, 0);
        const char *so_pin = (const char *) sqlite3_column_text (stmt, 1);
        row->pin [0] = strdup (user_pin ? user_pin : "");
        row->pin [1] = strdup (so_pin ? so_pin : "");
        for (int i = 0; i < 2; i++) {
            row->failures [i] = sqlite3_column_int64 (stmt, 2 + i);
            row->epoch [i] = sqlite3_column_int64 (stmt, 4 + i);
        }
        if (keys_version_p)
            *keys_version_p = (uint64_t) sqlite3_column_int64 (stmt, 7);
        rc = row->pin [0] && row->pin [1] ? 1 : -1;
        if (rc == 1 && verify
        &&  (row_mac_tenant (self->keys->mac_key, name, row, mac) != 0
             || !row_mac_equal (mac, sqlite3_column_blob (stmt, 6), (size_t) sqlite3_column_bytes (stmt, 6)))) {
            zsys_error ("keystore %s: tenant %s: row does not verify (changed without the master "
                        "key): refused", self->path, name);
            rc = KEYSTORE_DAMAGED;
        }
    }
    s_stmt_done (self, stmt);
    if (rc != 1)
        s_tenant_row_free (row);
    return rc;
}

//  Writes the PIN columns of tenant row `name` and their MAC.  Call inside
//  a write transaction.  Returns 0, or -1 (also for an unknown tenant).
static int
s_tenant_write (keystore_t *self, const char *name, const s_tenant_row_t *row)
{
    uint8_t mac [ROW_MAC_LEN];
    if (row_mac_tenant (self->keys->mac_key, name, row, mac) != 0)
        return -1;
    sqlite3_stmt *stmt = s_prepare (self, "UPDATE tenants SET user_pin = ?2, so_pin = ?3, "
                                          "user_failures = ?4, so_failures = ?5, user_epoch = ?6, "
                                          "so_epoch = ?7, mac = ?8 WHERE name = ?1");
    if (!stmt)
        return -1;
    s_bind_text (stmt, 1, name);
    s_bind_text (stmt, 2, row->pin [0]);
    s_bind_text (stmt, 3, row->pin [1]);
    for (int i = 0; i < 2; i++) {
        sqlite3_bind_int64 (stmt, 4 + i, row->failures [i]);
        sqlite3_bind_int64 (stmt, 6 + i, row->epoch [i]);
    }
    sqlite3_bind_blob (stmt, 8, mac, ROW_MAC_LEN, SQLITE_TRANSIENT);
    int rc = s_step_done (self, stmt);
    if (rc == 0 && sqlite3_changes (self->db) != 1)
        rc = -1;
    sqlite3_finalize (stmt);
    return rc;
}

//  A new PIN epoch after `old`: the next value of the file-wide counter,
//  and above `old` whatever that counter holds.  Call inside a write
//  transaction.  Returns 0 on failure.
static int64_t
s_epoch_next (keystore_t *self, int64_t old)
{
    uint64_t next = s_version_next (self);
    if (next == 0 || next >= INT64_MAX)
        return 0;
    return (int64_t) next > old ? (int64_t) next : old + 1;
}

//  The MAC of a key row (row_mac_key) under the keystore's row key.
static int
s_key_mac (keystore_t *self, const char *tenant, const char *ref, const uint8_t *info,
           size_t info_len, const uint8_t *private, size_t private_len, uint8_t mac [ROW_MAC_LEN])
{
    return row_mac_key (self->keys->mac_key, tenant, ref, info, info_len, private, private_len, mac);
}

/* ---- opening ------------------------------------------------------------ */

//  Creates the file with mode 0600 when it does not exist yet, so SQLite
//  (which gives its -wal and -shm files the database's mode) never makes a
//  world-readable keystore.  An existing file is not opened here: closing
//  a descriptor of it would drop every POSIX lock this process holds on it
//  (fcntl(2)), those of the connections already open included (the broker
//  opens one per slow-pool thread), and another process could then take
//  the database for unused, checkpoint it and delete the -wal file under
//  them.  Returns 0 or -1 after a log.
static int
s_file_create (const char *path)
{
    int fd = open (path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0 && errno == EEXIST)
        return 0;
    if (fd < 0) {
        zsys_error ("keystore %s: cannot open: %s", path, strerror (errno));
        return -1;
    }
    close (fd);
    return 0;
}

//  Sets the connection up: busy timeout, WAL, synchronous=FULL (a commit
//  is on disk when it returns), foreign keys (tenant removal cascades),
//  secure_delete (deleted rows are overwritten in the file).
static int
s_pragmas (keystore_t *self)
{
    sqlite3_busy_timeout (self->db, BUSY_TIMEOUT_MS);
    return s_exec (self, "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL;"
                         " PRAGMA foreign_keys = ON; PRAGMA secure_delete = ON;");
}

//  Schema 1 to 2, inside the open's write transaction: adds the epoch and
//  mac columns, gives every tenant fresh epochs, wraps its unkeyed PBKDF2
//  hashes under the PIN key (cs_pin_wrap: a copy of the file no longer
//  allows guessing them offline), and MACs every tenant and key row as it
//  is now (trust on first use: the upgrade cannot tell an earlier change).
//  Returns 0, or -1 after a log.
static int
s_upgrade_1_to_2 (keystore_t *self)
{
    char **names = NULL;
    sqlite3_stmt *stmt = NULL;
    int rc = -1;
    if (s_exec (self, "ALTER TABLE tenants ADD COLUMN user_epoch INTEGER NOT NULL DEFAULT 0;"
                      "ALTER TABLE tenants ADD COLUMN so_epoch INTEGER NOT NULL DEFAULT 0;"
                      "ALTER TABLE tenants ADD COLUMN mac BLOB;"
                      "ALTER TABLE keys ADD COLUMN mac BLOB;") != 0
    ||  !(names = keystore_tenant_list (self)))
        goto out;
    for (size_t i = 0; names [i]; i++) {
        s_tenant_row_t row;
        if (s_tenant_read (self, names [i], false, &row, NULL) != 1)
            goto out;
        bool ok = true;
        for (int role = 0; role < 2 && ok; role++) {
            char *wrapped = cs_pin_wrap (row.pin [role], self->keys->pin_key);
            free (row.pin [role]);
            row.pin [role] = wrapped;
            row.epoch [role] = s_epoch_next (self, 0);
            ok = wrapped && row.epoch [role] > 0;
        }
        ok = ok && s_tenant_write (self, names [i], &row) == 0;
        s_tenant_row_free (&row);
        if (!ok) {
            zsys_error ("keystore %s: upgrade: tenant %s has a malformed PIN hash", self->path, names [i]);
            goto out;
        }
    }
    stmt = s_prepare (self, "SELECT rowid, tenant, ref, info, private FROM keys");
    //  Rows change only after the scan (a statement reading a table that
    //  is being updated may see rows twice).
    size_t count = 0;
    int64_t *rowids = NULL;
    uint8_t (*macs) [ROW_MAC_LEN] = NULL;
    int step = SQLITE_ERROR;
    while (stmt && (step = sqlite3_step (stmt)) == SQLITE_ROW) {
        int64_t *grown_ids = realloc (rowids, (count + 1) * sizeof *rowids);
        rowids = grown_ids ? grown_ids : rowids;
        uint8_t (*grown_macs) [ROW_MAC_LEN] = realloc (macs, (count + 1) * sizeof *macs);
        macs = grown_macs ? grown_macs : macs;
        if (!grown_ids || !grown_macs)
            break;
        bool has_private = sqlite3_column_type (stmt, 4) != SQLITE_NULL;
        rowids [count] = sqlite3_column_int64 (stmt, 0);
        if (s_key_mac (self, (const char *) sqlite3_column_text (stmt, 1),
                       (const char *) sqlite3_column_text (stmt, 2), sqlite3_column_blob (stmt, 3),
                       (size_t) sqlite3_column_bytes (stmt, 3),
                       has_private ? sqlite3_column_blob (stmt, 4) : NULL,
                       (size_t) sqlite3_column_bytes (stmt, 4), macs [count]) != 0)
            break;
        count++;
    }
    sqlite3_finalize (stmt);
    stmt = step == SQLITE_DONE ? s_prepare (self, "UPDATE keys SET mac = ?2 WHERE rowid = ?1") : NULL;
    size_t done = 0;
    while (stmt && done < count) {
        sqlite3_reset (stmt);
        sqlite3_bind_int64 (stmt, 1, rowids [done]);
        sqlite3_bind_blob (stmt, 2, macs [done], ROW_MAC_LEN, SQLITE_TRANSIENT);
        if (s_step_done (self, stmt) != 0)
            break;
        done++;
    }
    if (stmt && done == count)
        rc = 0;
    free (rowids);
    free (macs);
    if (rc == 0)
        rc = s_meta_put (self, "schema", "2", 1);
    if (rc == 0)
        zsys_info ("keystore %s: upgraded from schema 1 to 2 (row MACs, PIN epochs, keyed PIN "
                   "hashes; %zu key rows)", self->path, count);
out:
    sqlite3_finalize (stmt);
    for (size_t i = 0; names && names [i]; i++)
        free (names [i]);
    free (names);
    return rc;
}

//  Checks the schema version row; on a new file writes it, the version
//  counter and the master key check value; a schema 1 file is upgraded.
//  Returns 0, or -1 after a log (the documented "master key does not
//  match" line included).
static int
s_check_or_init (keystore_t *self)
{
    if (s_exec (self, "BEGIN IMMEDIATE") != 0)
        return -1;
    uint8_t *value = NULL, *plain = NULL;
    size_t len = 0, plain_len = 0;
    int rc = -1;
    if (s_exec (self, s_schema) != 0)
        goto out;
    int found = s_meta_get (self, "master_check", &value, &len);
    if (found < 0)
        goto out;
    if (found == 0) {                           //  a new keystore
        char version [16];
        snprintf (version, sizeof version, "%d", SCHEMA_VERSION);
        uint8_t *check = s_seal (self->keys->master, CHECK_AAD, strlen (CHECK_AAD),
                                 (const uint8_t *) CHECK_PLAINTEXT, strlen (CHECK_PLAINTEXT), &len);
        rc = check && s_meta_put (self, "schema", version, strlen (version)) == 0
                   && s_meta_put (self, "version_seq", "0", 1) == 0
                   && s_meta_put (self, "master_check", check, len) == 0 ? 0 : -1;
        free (check);
        goto out;
    }
    plain = s_open (self->keys->master, CHECK_AAD, strlen (CHECK_AAD), value, len, &plain_len);
    if (!plain || plain_len != strlen (CHECK_PLAINTEXT) || memcmp (plain, CHECK_PLAINTEXT, plain_len)) {
        zsys_error ("keystore %s: master key does not match", self->path);
        goto out;
    }
    free (value);
    value = NULL;
    int schema = s_meta_get (self, "schema", &value, &len) == 1 ? atoi ((char *) value) : 0;
    if (schema == 1)
        rc = s_upgrade_1_to_2 (self);
    else
    if (schema != SCHEMA_VERSION)
        zsys_error ("keystore %s: schema version %s is not %d (made by another version?)",
                    self->path, value ? (char *) value : "?", SCHEMA_VERSION);
    else
        rc = 0;
out:
    free (value);
    free (plain);
    s_exec (self, rc == 0 ? "COMMIT" : "ROLLBACK");
    return rc;
}

keystore_t *
keystore_open (const char *path, const uint8_t master_key [KEYSTORE_MASTER_KEY_LEN])
{
    if (!path || !master_key)
        return NULL;
    keystore_t *self = calloc (1, sizeof *self);
    if (!self)
        return NULL;
    self->path = strdup (path);
    self->keys = cs_secmem_alloc (sizeof *self->keys);
    if (self->keys)
        memcpy (self->keys->master, master_key, KEYSTORE_MASTER_KEY_LEN);
    if (!self->path || !self->keys
    ||  row_mac_derive (self->keys->master, ROW_MAC_INFO_ROWS, self->keys->mac_key) != 0
    ||  row_mac_derive (self->keys->master, ROW_MAC_INFO_PINS, self->keys->pin_key) != 0
    ||  s_file_create (path) != 0)
        goto fail;
    if (sqlite3_open_v2 (path, &self->db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK) {
        zsys_error ("keystore %s: cannot open: %s", path,
                    self->db ? sqlite3_errmsg (self->db) : "out of memory");
        goto fail;
    }
    if (s_pragmas (self) != 0 || s_check_or_init (self) != 0
    ||  s_data_version (self, &self->data_version) != 0)
        goto fail;
    return self;
fail:
    keystore_destroy (&self);
    return NULL;
}

keystore_t *
keystore_open_again (keystore_t *self)
{
    return self ? keystore_open (self->path, self->keys->master) : NULL;
}

int
keystore_settle (keystore_t *self)
{
    int64_t version = 0;
    if (s_exec (self, "BEGIN IMMEDIATE") != 0)
        return -1;
    int rc = s_data_version (self, &version);
    if (s_exec (self, "ROLLBACK") != 0 || rc != 0)
        return -1;
    rc = version != self->data_version ? 1 : 0;
    self->data_version = version;
    return rc;
}

void
keystore_destroy (keystore_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    keystore_t *self = *self_p;
    for (int i = 0; i < S_STMTS; i++)
        sqlite3_finalize (self->stmts [i]);
    sqlite3_close_v2 (self->db);
    if (self->keys)
        cs_secmem_free (self->keys, sizeof *self->keys);
    free (self->path);
    free (self);
    *self_p = NULL;
}

/* ---- master key files ---------------------------------------------------- */

int
keystore_master_key_read (const char *path, uint8_t key [KEYSTORE_MASTER_KEY_LEN])
{
    char why [512];
    if (cs_file_check_private (path, why, sizeof why)) {
        zsys_error ("master key: %s", why);
        return -1;
    }
    int got = cs_file_read_hex (path, key, KEYSTORE_MASTER_KEY_LEN);
    if (got == -1)
        zsys_error ("master key %s: cannot read", path);
    else
    if (got == -2)
        zsys_error ("master key %s: not %d hex digits", path, 2 * KEYSTORE_MASTER_KEY_LEN);
    return got == 0 ? 0 : -1;
}

//  Writes all of data to fd.  Returns 0 or -1.
static int
s_write_all (int fd, const char *data, size_t len)
{
    while (len > 0) {
        ssize_t n = write (fd, data, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        data += n;
        len -= (size_t) n;
    }
    return 0;
}

int
keystore_master_key_create (const char *path, uint8_t key [KEYSTORE_MASTER_KEY_LEN])
{
    char hex [2 * KEYSTORE_MASTER_KEY_LEN + 2];
    int rc = -1;
    int fd = open (path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        zsys_error ("master key %s: cannot create: %s", path, strerror (errno));
        return -1;
    }
    if (RAND_bytes (key, KEYSTORE_MASTER_KEY_LEN) != 1)
        zsys_error ("master key %s: no random bytes", path);
    else {
        cs_hex_encode (key, KEYSTORE_MASTER_KEY_LEN, hex);
        strcat (hex, "\n");
        if (fchmod (fd, 0600) == 0 && s_write_all (fd, hex, strlen (hex)) == 0 && fsync (fd) == 0)
            rc = 0;
        else
            zsys_error ("master key %s: write failed: %s", path, strerror (errno));
    }
    if (close (fd) != 0)
        rc = -1;
    OPENSSL_cleanse (hex, sizeof hex);
    if (rc != 0) {
        OPENSSL_cleanse (key, KEYSTORE_MASTER_KEY_LEN);
        unlink (path);
    }
    return rc;
}

/* ---- tenants ------------------------------------------------------------- */

static bool
s_pin_len_ok (size_t len)
{
    return len >= CS_PIN_MIN_LEN && len <= CS_PIN_MAX_LEN;
}

int
keystore_tenant_add (keystore_t *self, const char *name,
                     const void *user_pin, size_t user_pin_len,
                     const void *so_pin, size_t so_pin_len)
{
    if (!self || !name || !*name || strlen (name) > TENANT_NAME_MAX
    ||  !user_pin || !so_pin || !s_pin_len_ok (user_pin_len) || !s_pin_len_ok (so_pin_len)) {
        zsys_error ("keystore: tenant name must be 1..%d bytes and PINs %d..%d bytes",
                    TENANT_NAME_MAX, CS_PIN_MIN_LEN, CS_PIN_MAX_LEN);
        return -1;
    }
    if (keystore_tenant_exists (self, name)) {
        zsys_error ("keystore %s: tenant %s exists", self->path, name);
        return -1;
    }
    s_tenant_row_t row = { { cs_pin_hash (self->keys->pin_key, user_pin, user_pin_len),
                             cs_pin_hash (self->keys->pin_key, so_pin, so_pin_len) } };
    uint8_t mac [ROW_MAC_LEN];
    sqlite3_stmt *stmt = NULL;
    int rc = -1;
    if (!row.pin [0] || !row.pin [1] || s_exec (self, "BEGIN IMMEDIATE") != 0)
        goto out;
    uint64_t version = s_version_next (self);
    row.epoch [0] = s_epoch_next (self, 0);
    row.epoch [1] = s_epoch_next (self, 0);
    stmt = s_prepare (self, "INSERT INTO tenants (name, user_pin, so_pin, keys_version, user_epoch, "
                            "so_epoch, mac) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)");
    if (version && row.epoch [0] && row.epoch [1] && stmt
    &&  row_mac_tenant (self->keys->mac_key, name, &row, mac) == 0) {
        s_bind_text (stmt, 1, name);
        s_bind_text (stmt, 2, row.pin [0]);
        s_bind_text (stmt, 3, row.pin [1]);
        sqlite3_bind_int64 (stmt, 4, (sqlite3_int64) version);
        sqlite3_bind_int64 (stmt, 5, row.epoch [0]);
        sqlite3_bind_int64 (stmt, 6, row.epoch [1]);
        sqlite3_bind_blob (stmt, 7, mac, ROW_MAC_LEN, SQLITE_TRANSIENT);
        rc = s_step_done (self, stmt);
    }
    if (s_exec (self, rc == 0 ? "COMMIT" : "ROLLBACK") != 0)
        rc = -1;
out:
    sqlite3_finalize (stmt);
    s_tenant_row_free (&row);
    return rc;
}

int
keystore_tenant_remove (keystore_t *self, const char *name)
{
    sqlite3_stmt *stmt = s_prepare (self, "DELETE FROM tenants WHERE name = ?1");
    if (!stmt)
        return -1;
    s_bind_text (stmt, 1, name);
    int rc = s_step_done (self, stmt);
    if (rc == 0 && sqlite3_changes (self->db) == 0)
        rc = -1;
    sqlite3_finalize (stmt);
    return rc;
}

char **
keystore_tenant_list (keystore_t *self)
{
    sqlite3_stmt *stmt = s_prepare (self, "SELECT name FROM tenants ORDER BY name");
    if (!stmt)
        return NULL;
    size_t count = 0, room = 8;
    char **names = calloc (room + 1, sizeof *names);
    int step;
    while (names && (step = sqlite3_step (stmt)) == SQLITE_ROW) {
        if (count == room) {
            char **grown = realloc (names, (2 * room + 1) * sizeof *names);
            if (!grown)
                break;
            names = grown;
            room *= 2;
        }
        names [count] = strdup ((const char *) sqlite3_column_text (stmt, 0));
        names [++count] = NULL;
        if (!names [count - 1])
            break;
    }
    bool ok = names && step == SQLITE_DONE;
    sqlite3_finalize (stmt);
    if (!ok && names) {
        for (size_t i = 0; names [i]; i++)
            free (names [i]);
        free (names);
        names = NULL;
    }
    return names;
}

bool
keystore_tenant_exists (keystore_t *self, const char *name)
{
    sqlite3_stmt *stmt = name ? s_stmt (self, S_STMT_TENANT_EXISTS, "SELECT 1 FROM tenants WHERE name = ?1")
                              : NULL;
    if (!stmt)
        return false;
    s_bind_text (stmt, 1, name);
    bool exists = sqlite3_step (stmt) == SQLITE_ROW;
    s_stmt_done (self, stmt);
    return exists;
}

/* ---- PINs ------------------------------------------------------------- */

//  Ends a PIN transaction: COMMIT when `commit` (the row was written), else
//  ROLLBACK.  Returns rv, or CKR_DEVICE_ERROR when the commit fails.
static CK_RV
s_pin_end (keystore_t *self, CK_RV rv, bool commit)
{
    if (s_exec (self, commit ? "COMMIT" : "ROLLBACK") != 0 && commit)
        return CKR_DEVICE_ERROR;
    return rv;
}

CK_RV
keystore_pin_check (keystore_t *self, const char *tenant, CK_USER_TYPE user_type,
                    const void *pin, size_t pin_len, keystore_pin_state_t *state_p)
{
    int role = s_role (user_type);
    s_tenant_row_t row;
    if (state_p)
        *state_p = (keystore_pin_state_t) { 0, 0 };
    if (role < 0)
        return CKR_USER_TYPE_INVALID;
    s_hook ("pin_check");
    //  One write transaction around read, hash and update: two concurrent
    //  wrong PINs (two brokers, or the broker and the administrator) both
    //  count, and the row written is the row verified.
    if (!self || !tenant || s_exec (self, "BEGIN IMMEDIATE") != 0)
        return CKR_DEVICE_ERROR;
    if (s_tenant_read (self, tenant, true, &row, NULL) != 1)
        return s_pin_end (self, CKR_DEVICE_ERROR, false);
    CK_RV rv = CKR_PIN_LOCKED;
    bool changed = false;
    if (row.failures [role] < KEYSTORE_PIN_MAX_FAILURES) {
        bool match = cs_pin_verify (row.pin [role], self->keys->pin_key, pin, pin_len);
        char *rehash = match && !cs_pin_current (row.pin [role])
                     ? cs_pin_hash (self->keys->pin_key, pin, pin_len) : NULL;
        changed = !match || row.failures [role] != 0 || rehash;
        if (rehash) {
            free (row.pin [role]);
            row.pin [role] = rehash;
        }
        row.failures [role] = match ? 0 : row.failures [role] + 1;
        bool locks = row.failures [role] >= KEYSTORE_PIN_MAX_FAILURES;
        if (locks)          //  every login ticket of this user type ends
            row.epoch [role] = s_epoch_next (self, row.epoch [role]);
        rv = match ? CKR_OK : CKR_PIN_INCORRECT;
        if ((locks && row.epoch [role] == 0) || (changed && s_tenant_write (self, tenant, &row) != 0))
            rv = CKR_DEVICE_ERROR;
    }
    if (state_p)
        *state_p = (keystore_pin_state_t) { (long) row.failures [role], (uint64_t) row.epoch [role] };
    s_tenant_row_free (&row);
    return s_pin_end (self, rv, changed && rv != CKR_DEVICE_ERROR);
}

CK_RV
keystore_pin_set (keystore_t *self, const char *tenant, CK_USER_TYPE user_type,
                  const void *pin, size_t pin_len, uint64_t *epoch_p)
{
    int role = s_role (user_type);
    s_tenant_row_t row;
    if (role < 0)
        return CKR_USER_TYPE_INVALID;
    if (!pin || !s_pin_len_ok (pin_len))
        return CKR_PIN_LEN_RANGE;
    char *hash = self && tenant ? cs_pin_hash (self->keys->pin_key, pin, pin_len) : NULL;
    if (!hash || s_exec (self, "BEGIN IMMEDIATE") != 0) {
        free (hash);
        return CKR_DEVICE_ERROR;
    }
    if (s_tenant_read (self, tenant, true, &row, NULL) != 1) {
        free (hash);
        return s_pin_end (self, CKR_DEVICE_ERROR, false);
    }
    free (row.pin [role]);
    row.pin [role] = hash;
    row.failures [role] = 0;
    row.epoch [role] = s_epoch_next (self, row.epoch [role]);
    CK_RV rv = row.epoch [role] && s_tenant_write (self, tenant, &row) == 0 ? CKR_OK : CKR_DEVICE_ERROR;
    if (rv == CKR_OK && epoch_p)
        *epoch_p = (uint64_t) row.epoch [role];
    s_tenant_row_free (&row);
    return s_pin_end (self, rv, rv == CKR_OK);
}

int
keystore_pin_epoch (keystore_t *self, const char *tenant, CK_USER_TYPE user_type, uint64_t *epoch_p)
{
    int role = s_role (user_type);
    s_tenant_row_t row;
    if (role < 0 || !self || !tenant || s_tenant_read (self, tenant, true, &row, NULL) != 1)
        return -1;
    *epoch_p = (uint64_t) row.epoch [role];
    s_tenant_row_free (&row);
    return 0;
}

//  The PKCS#11 2.40 §5.4 CK_TOKEN_INFO flags for `failures` wrong PINs in a
//  row: COUNT_LOW after one, FINAL_TRY when one try is left, LOCKED at the
//  maximum.
static CK_FLAGS
s_pin_flags (long failures, CK_FLAGS count_low, CK_FLAGS final_try, CK_FLAGS locked)
{
    CK_FLAGS flags = 0;
    if (failures >= 1)
        flags |= count_low;
    if (failures == KEYSTORE_PIN_MAX_FAILURES - 1)
        flags |= final_try;
    if (failures >= KEYSTORE_PIN_MAX_FAILURES)
        flags |= locked;
    return flags;
}

CK_FLAGS
keystore_pin_flags (keystore_t *self, const char *tenant)
{
    keystore_tenant_t state;
    return keystore_tenant_state (self, tenant, &state) == 0 ? keystore_tenant_flags (&state) : 0;
}

CK_FLAGS
keystore_tenant_flags (const keystore_tenant_t *state)
{
    return s_pin_flags (state->failures [0], CKF_USER_PIN_COUNT_LOW, CKF_USER_PIN_FINAL_TRY,
                        CKF_USER_PIN_LOCKED)
         | s_pin_flags (state->failures [1], CKF_SO_PIN_COUNT_LOW, CKF_SO_PIN_FINAL_TRY,
                        CKF_SO_PIN_LOCKED);
}

int
keystore_tenant_state (keystore_t *self, const char *tenant, keystore_tenant_t *state)
{
    s_tenant_row_t row;
    uint64_t keys_version = 0;
    memset (state, 0, sizeof *state);
    int got = self && tenant ? s_tenant_read (self, tenant, true, &row, &keys_version) : -1;
    if (got != 1)
        return got == KEYSTORE_DAMAGED ? KEYSTORE_DAMAGED : -1;
    for (int i = 0; i < 2; i++) {
        state->epoch [i] = (uint64_t) row.epoch [i];
        state->failures [i] = (long) row.failures [i];
    }
    state->keys_version = keys_version;
    s_tenant_row_free (&row);
    return 0;
}

/* ---- keys --------------------------------------------------------------- */

//  Gives the tenant a new keys_version.  Call inside a write transaction.
static int
s_version_bump (keystore_t *self, const char *tenant)
{
    uint64_t version = s_version_next (self);
    sqlite3_stmt *stmt = version
        ? s_prepare (self, "UPDATE tenants SET keys_version = ?2 WHERE name = ?1") : NULL;
    if (!stmt)
        return -1;
    s_bind_text (stmt, 1, tenant);
    sqlite3_bind_int64 (stmt, 2, (sqlite3_int64) version);
    int rc = s_step_done (self, stmt);
    if (rc == 0 && sqlite3_changes (self->db) != 1)
        rc = -1;
    sqlite3_finalize (stmt);
    return rc;
}

//  Packs a KeyInfo into a malloc'd buffer of *len_p bytes (caller frees).
static uint8_t *
s_info_pack (const Cs__KeyInfo *info, size_t *len_p)
{
    size_t len = cs__key_info__get_packed_size (info);
    uint8_t *packed = malloc (len ? len : 1);
    if (packed)
        *len_p = cs__key_info__pack (info, packed);
    return packed;
}

//  True when the key row in the current result row of stmt (tenant, ref,
//  info in column col, private in col + 1, mac in col + 2) carries its MAC;
//  otherwise logs an error naming it.
static bool
s_key_row_verified (keystore_t *self, sqlite3_stmt *stmt, int col, const char *tenant, const char *ref)
{
    uint8_t mac [ROW_MAC_LEN];
    bool has_private = sqlite3_column_type (stmt, col + 1) != SQLITE_NULL;
    const uint8_t *info = sqlite3_column_blob (stmt, col);
    size_t info_len = (size_t) sqlite3_column_bytes (stmt, col);
    const uint8_t *private = has_private ? sqlite3_column_blob (stmt, col + 1) : NULL;
    size_t private_len = (size_t) sqlite3_column_bytes (stmt, col + 1);
    if (s_key_mac (self, tenant, ref, info, info_len, private, private_len, mac) == 0
    &&  row_mac_equal (mac, sqlite3_column_blob (stmt, col + 2), (size_t) sqlite3_column_bytes (stmt, col + 2)))
        return true;
    zsys_error ("keystore %s: key %s of tenant %s: row does not verify (changed without the "
                "master key): refused", self->path, ref, tenant);
    return false;
}

//  The MAC of the stored private blob of key (tenant, ref) with a new
//  description (packed, len bytes), after verifying the stored row.  Call
//  inside a write transaction.  Returns 0, -1 when unknown or on error,
//  KEYSTORE_DAMAGED (logged) when the stored row does not verify.
static int
s_key_remac (keystore_t *self, const char *tenant, const char *ref, const uint8_t *packed,
             size_t len, uint8_t mac [ROW_MAC_LEN])
{
    sqlite3_stmt *stmt = s_prepare (self, "SELECT info, private, mac FROM keys "
                                          "WHERE tenant = ?1 AND ref = ?2");
    int rc = -1;
    if (!stmt)
        return -1;
    s_bind_text (stmt, 1, tenant);
    s_bind_text (stmt, 2, ref);
    if (sqlite3_step (stmt) == SQLITE_ROW) {
        bool has_private = sqlite3_column_type (stmt, 1) != SQLITE_NULL;
        if (!s_key_row_verified (self, stmt, 0, tenant, ref))
            rc = KEYSTORE_DAMAGED;
        else
        if (s_key_mac (self, tenant, ref, packed, len, has_private ? sqlite3_column_blob (stmt, 1) : NULL,
                       (size_t) sqlite3_column_bytes (stmt, 1), mac) == 0)
            rc = 0;
    }
    sqlite3_finalize (stmt);
    return rc;
}

//  Runs one key write (`sql` with ?1 tenant, ?2 ref, ?3 info, ?4 private,
//  ?5 the row's MAC) and bumps the tenant's version, in one transaction.
//  `keep_private`: the row keeps its stored private blob, which must
//  verify (an update of the description); otherwise the MAC covers `blob`.
//  Fails when no row changed.  Returns 0 (durable), -1, or KEYSTORE_DAMAGED.
static int
s_key_write (keystore_t *self, const char *sql, const char *tenant, const char *ref,
             const Cs__KeyInfo *info, const uint8_t *blob, size_t blob_len, bool keep_private)
{
    size_t packed_len = 0;
    uint8_t *packed = info ? s_info_pack (info, &packed_len) : NULL;
    uint8_t mac [ROW_MAC_LEN];
    sqlite3_stmt *stmt = NULL;
    int rc = -1;
    if ((info && !packed) || s_exec (self, "BEGIN IMMEDIATE") != 0)
        goto out;
    if (info)
        rc = keep_private ? s_key_remac (self, tenant, ref, packed, packed_len, mac)
                          : s_key_mac (self, tenant, ref, packed, packed_len, blob, blob_len, mac);
    stmt = !info || rc == 0 ? s_prepare (self, sql) : NULL;
    if (stmt) {
        s_bind_text (stmt, 1, tenant);
        s_bind_text (stmt, 2, ref);
        if (packed) {
            sqlite3_bind_blob (stmt, 3, packed, (int) packed_len, SQLITE_TRANSIENT);
            sqlite3_bind_blob (stmt, 5, mac, ROW_MAC_LEN, SQLITE_TRANSIENT);
        }
        if (blob)
            sqlite3_bind_blob (stmt, 4, blob, (int) blob_len, SQLITE_TRANSIENT);
        rc = s_step_done (self, stmt);
    }
    if (rc == 0 && sqlite3_changes (self->db) != 1)
        rc = -1;
    if (rc == 0)
        rc = s_version_bump (self, tenant);
    if (s_exec (self, rc == 0 ? "COMMIT" : "ROLLBACK") != 0 && rc == 0)
        rc = -1;
out:
    sqlite3_finalize (stmt);
    free (packed);
    return rc;
}

//  True when `ref` is a usable key reference.
static bool
s_ref_ok (const char *ref)
{
    return ref && *ref && strlen (ref) <= 128;
}

int
keystore_key_put (keystore_t *self, const char *tenant, const Cs__KeyInfo *info,
                  const uint8_t *pkcs8, size_t pkcs8_len)
{
    if (!self || !tenant || !info || !s_ref_ok (info->ref) || (pkcs8 && !pkcs8_len))
        return -1;
    if (!keystore_tenant_exists (self, tenant)) {
        zsys_error ("keystore %s: no tenant %s", self->path, tenant);
        return -1;
    }
    uint8_t *aad = NULL, *blob = NULL;
    size_t aad_len = 0, blob_len = 0;
    int rc = -1;
    if (pkcs8) {
        aad = s_key_aad (tenant, info->ref, &aad_len);
        blob = aad ? s_seal (self->keys->master, aad, aad_len, pkcs8, pkcs8_len, &blob_len) : NULL;
        if (!blob)
            goto out;
    }
    rc = s_key_write (self, "INSERT INTO keys (tenant, ref, info, private, mac) "
                            "VALUES (?1, ?2, ?3, ?4, ?5)", tenant, info->ref, info, blob, blob_len, false);
    if (rc != 0)
        zsys_error ("keystore %s: cannot store key %s of tenant %s", self->path, info->ref, tenant);
out:
    free (aad);
    free (blob);        //  ciphertext: no wipe needed
    return rc;
}

int
keystore_key_update (keystore_t *self, const char *tenant, const Cs__KeyInfo *info)
{
    if (!self || !tenant || !info || !s_ref_ok (info->ref))
        return -1;
    return s_key_write (self, "UPDATE keys SET info = ?3, mac = ?5 WHERE tenant = ?1 AND ref = ?2",
                        tenant, info->ref, info, NULL, 0, true);
}

int
keystore_key_delete (keystore_t *self, const char *tenant, const char *ref)
{
    if (!self || !tenant || !s_ref_ok (ref))
        return -1;
    return s_key_write (self, "DELETE FROM keys WHERE tenant = ?1 AND ref = ?2",
                        tenant, ref, NULL, NULL, 0, false);
}

//  Unpacks column `col` of the current row as a KeyInfo (caller frees with
//  cs__key_info__free_unpacked), or NULL after a log when it is damaged.
static Cs__KeyInfo *
s_info_column (keystore_t *self, sqlite3_stmt *stmt, int col)
{
    const uint8_t *data = sqlite3_column_blob (stmt, col);
    size_t len = (size_t) sqlite3_column_bytes (stmt, col);
    Cs__KeyInfo *info = cs__key_info__unpack (NULL, len, data);
    if (!info)
        zsys_error ("keystore %s: a key description does not decode", self->path);
    return info;
}

//  Decrypts the private blob in column `col` of the current row into
//  *pkcs8_p / *len_p (NULL and 0 when the row has none).  Returns 0, or -1
//  after a log when it does not decrypt.
static int
s_private_column (keystore_t *self, sqlite3_stmt *stmt, int col, const char *tenant,
                  const char *ref, uint8_t **pkcs8_p, size_t *len_p)
{
    *pkcs8_p = NULL;
    *len_p = 0;
    if (sqlite3_column_type (stmt, col) == SQLITE_NULL)
        return 0;
    size_t aad_len = 0;
    uint8_t *aad = s_key_aad (tenant, ref, &aad_len);
    if (aad)
        *pkcs8_p = s_open (self->keys->master, aad, aad_len, sqlite3_column_blob (stmt, col),
                           (size_t) sqlite3_column_bytes (stmt, col), len_p);
    free (aad);
    if (*pkcs8_p)
        return 0;
    zsys_error ("keystore %s: key %s of tenant %s does not decrypt (changed, moved, "
                "or another master key)", self->path, ref, tenant);
    return -1;
}

int
keystore_key_get (keystore_t *self, const char *tenant, const char *ref,
                  Cs__KeyInfo **info_p, uint8_t **pkcs8_p, size_t *pkcs8_len_p)
{
    if (!self || !tenant || !s_ref_ok (ref) || !info_p)
        return -1;
    s_hook ("key_get");
    sqlite3_stmt *stmt = s_stmt (self, S_STMT_KEY, "SELECT info, private, mac FROM keys "
                                                   "WHERE tenant = ?1 AND ref = ?2");
    Cs__KeyInfo *info = NULL;
    int rc = -1;
    if (!stmt)
        return -1;
    s_bind_text (stmt, 1, tenant);
    s_bind_text (stmt, 2, ref);
    if (sqlite3_step (stmt) != SQLITE_ROW)
        goto out;
    rc = KEYSTORE_DAMAGED;
    if (!s_key_row_verified (self, stmt, 0, tenant, ref) || !(info = s_info_column (self, stmt, 0)))
        goto out;
    if (pkcs8_p && s_private_column (self, stmt, 1, tenant, ref, pkcs8_p, pkcs8_len_p) != 0)
        goto out;
    *info_p = info;
    info = NULL;
    rc = 0;
out:
    if (info)
        cs__key_info__free_unpacked (info, NULL);
    s_stmt_done (self, stmt);
    return rc;
}

//  Frees the first `count` entries of infos and the array.
static void
s_infos_free (Cs__KeyInfo **infos, size_t count)
{
    for (size_t i = 0; infos && i < count; i++)
        cs__key_info__free_unpacked (infos [i], NULL);
    free (infos);
}

int
keystore_key_list (keystore_t *self, const char *tenant,
                   Cs__KeyInfo ***infos_p, size_t *count_p)
{
    if (!self || !tenant || !infos_p || !count_p)
        return -1;
    s_hook ("key_list");
    sqlite3_stmt *stmt = s_prepare (self, "SELECT ref, info, private, mac FROM keys "
                                          "WHERE tenant = ?1 ORDER BY rowid");
    if (!stmt)
        return -1;
    s_bind_text (stmt, 1, tenant);
    size_t count = 0, room = 16;
    Cs__KeyInfo **infos = malloc (room * sizeof *infos);
    int step = SQLITE_ERROR;
    while (infos && (step = sqlite3_step (stmt)) == SQLITE_ROW) {
        if (count == room) {
            Cs__KeyInfo **grown = realloc (infos, 2 * room * sizeof *infos);
            if (!grown)
                break;
            infos = grown;
            room *= 2;
        }
        if (!s_key_row_verified (self, stmt, 1, tenant, (const char *) sqlite3_column_text (stmt, 0)))
            continue;       //  left out, logged
        infos [count] = s_info_column (self, stmt, 1);
        if (!infos [count])
            continue;       //  verified, yet it does not decode: logged
        count++;
    }
    sqlite3_finalize (stmt);
    if (step != SQLITE_DONE) {
        if (infos)
            s_db_error (self, "list keys");
        s_infos_free (infos, count);
        return -1;
    }
    *infos_p = infos;
    *count_p = count;
    return 0;
}

uint64_t
keystore_keys_version (keystore_t *self, const char *tenant)
{
    sqlite3_stmt *stmt = self && tenant
        ? s_stmt (self, S_STMT_KEYS_VERSION, "SELECT keys_version FROM tenants WHERE name = ?1") : NULL;
    if (!stmt)
        return 0;
    s_hook ("keys_version");
    s_bind_text (stmt, 1, tenant);
    uint64_t version = 0;
    if (sqlite3_step (stmt) == SQLITE_ROW)
        version = (uint64_t) sqlite3_column_int64 (stmt, 0);
    s_stmt_done (self, stmt);
    return version;
}

void
keystore_ref_new (char ref [36])
{
    uint8_t random [16];
    if (RAND_bytes (random, sizeof random) != 1) {
        //  Practically never; refs must still differ, so fall back to
        //  time and counter rather than returning a constant.
        static uint64_t counter;
        uint64_t now = (uint64_t) zclock_time (), next = ++counter;
        memcpy (random, &now, 8);
        memcpy (random + 8, &next, 8);
    }
    memcpy (ref, "ks:", 3);
    cs_hex_encode (random, sizeof random, ref + 3);
}
