/*  ks_sqlite.c — the SQLite back end of the keystore (ks_backend.h): one
 *  file in WAL mode with synchronous=FULL and secure_delete, six tables
 *  (meta, tenants, keys, objects, idempotency, issued; schema below), the schema version in meta
 *  'schema' and the version counter in meta 'version_seq'.  The default:
 *  one broker (and cryptoserver-admin, SQLite locks make that safe) per
 *  file.
 */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <czmq.h>
#include <sqlite3.h>
#include "ks_backend.h"

#define BUSY_TIMEOUT_MS  5000           /* admin and broker share the file */

//  The statements of the hot reads, prepared once per connection and
//  reset after each use (s_stmt, s_stmt_done): a key job or a ticket check
//  must not compile SQL every time.
enum { S_STMT_TENANT, S_STMT_KEY, S_STMT_KEYS_VERSION, S_STMT_TENANT_EXISTS, S_STMTS };

struct _ks_store_t {
    sqlite3 *db;
    char *path;
    sqlite3_stmt *stmts [S_STMTS];  /* prepared hot reads, or NULL until first use */
    int64_t data_version;           /* PRAGMA data_version at open or at the last settle */
};

//  The schema (version 2).  Lock state is derived from the counters: a PIN
//  is locked when its failure count reaches KEYSTORE_PIN_MAX_FAILURES.
//  keys_version and the PIN epochs take their values from meta
//  'version_seq', a counter over the whole file, so a tenant removed and
//  added again never repeats an old version or epoch.  `mac` is the row's
//  HMAC (row_mac.h); keys_version is outside it: it only tells clients when
//  to fetch the key list again.  Version 1 had no epochs and no mac
//  columns (s_migrate adds them); version 3 adds the table idempotency,
//  4 objects, 5 issued and the state record (meta 'state', ks_state.c).
//  Tables are created or changed only for a new file or by an operator's
//  upgrade (keystore_upgrade), never when an existing file is opened.
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
    "  PRIMARY KEY (tenant, ref));"
    "CREATE TABLE IF NOT EXISTS objects ("     //  schema 4: certificates, data objects
    "  tenant TEXT NOT NULL REFERENCES tenants (name) ON DELETE CASCADE,"
    "  ref TEXT NOT NULL,"
    "  info BLOB NOT NULL,"
    "  private BLOB,"
    "  mac BLOB,"
    "  PRIMARY KEY (tenant, ref));"
    "CREATE TABLE IF NOT EXISTS idempotency ("
    "  tenant TEXT NOT NULL REFERENCES tenants (name) ON DELETE CASCADE,"
    "  id BLOB NOT NULL,"
    "  result BLOB NOT NULL,"
    "  created INTEGER NOT NULL,"
    "  mac BLOB,"
    "  PRIMARY KEY (tenant, id));"
    "CREATE INDEX IF NOT EXISTS idempotency_created ON idempotency (created);"
    "CREATE TABLE IF NOT EXISTS issued ("     //  schema 5: pool keys handed out
    "  fingerprint BLOB PRIMARY KEY,"
    "  tenant TEXT NOT NULL,"
    "  created INTEGER NOT NULL,"
    "  mac BLOB);"
    "CREATE TABLE IF NOT EXISTS audit ("      //  schema 6: the audit chains (keystore_audit.h)
    "  broker TEXT NOT NULL,"
    "  seq INTEGER NOT NULL,"
    "  record TEXT NOT NULL,"
    "  prev BLOB NOT NULL,"
    "  hash BLOB NOT NULL,"
    "  sig BLOB,"
    "  PRIMARY KEY (broker, seq));"
    "INSERT OR IGNORE INTO meta (name, value) VALUES ('version_seq', '0');";

/* ---- small helpers ---------------------------------------------------- */

//  Logs a SQLite failure of `what` with the database's message.
static void
s_db_error (ks_store_t *self, const char *what)
{
    zsys_error ("keystore %s: %s: %s", self->path, what, sqlite3_errmsg (self->db));
}

//  Prepares `sql`.  Returns the statement (caller finalizes) or NULL after a log.
static sqlite3_stmt *
s_prepare (ks_store_t *self, const char *sql)
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
s_stmt (ks_store_t *self, int which, const char *sql)
{
    if (!self->stmts [which])
        self->stmts [which] = s_prepare (self, sql);
    return self->stmts [which];
}

//  Ends the use of a statement: a kept one (s_stmt) is reset, so that it
//  holds no read transaction open, and its bindings cleared; any other is
//  finalized.  NULL-safe.
static void
s_stmt_done (ks_store_t *self, sqlite3_stmt *stmt)
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
s_exec (ks_store_t *self, const char *sql)
{
    if (sqlite3_exec (self->db, sql, NULL, NULL, NULL) == SQLITE_OK)
        return 0;
    s_db_error (self, sql);
    return -1;
}

//  PRAGMA data_version of the connection into *version_p: it moves when
//  another connection commits, never for this one's own commits.  0 or -1.
static int
s_data_version (ks_store_t *self, int64_t *version_p)
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

//  Steps a statement that returns no row and finalizes it.  Returns the
//  number of rows changed, or -1 after a log.
static int
s_step_done (ks_store_t *self, sqlite3_stmt *stmt)
{
    int rc = -1;
    if (stmt && sqlite3_step (stmt) == SQLITE_DONE)
        rc = sqlite3_changes (self->db);
    else
    if (stmt)
        s_db_error (self, "write");
    sqlite3_finalize (stmt);
    return rc;
}

//  Binds text (NUL-terminated) at position `index`.
static void
s_bind_text (sqlite3_stmt *stmt, int index, const char *text)
{
    sqlite3_bind_text (stmt, index, text, -1, SQLITE_TRANSIENT);
}

//  Binds a blob, or NULL when data is NULL.
static void
s_bind_blob (sqlite3_stmt *stmt, int index, const void *data, size_t len)
{
    if (data)
        sqlite3_bind_blob (stmt, index, data, (int) len, SQLITE_TRANSIENT);
    else
        sqlite3_bind_null (stmt, index);
}

//  Column col of the current row as a malloc'd copy (*len_p bytes), or
//  NULL with length 0 for SQL NULL.  *ok turns false when out of memory.
static uint8_t *
s_column_blob (sqlite3_stmt *stmt, int col, size_t *len_p, bool *ok)
{
    *len_p = 0;
    if (sqlite3_column_type (stmt, col) == SQLITE_NULL)
        return NULL;
    size_t len = (size_t) sqlite3_column_bytes (stmt, col);
    uint8_t *copy = ks_dup (sqlite3_column_blob (stmt, col), len);
    if (!copy)
        *ok = false;
    *len_p = len;
    return copy;
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

static void
s_close (ks_store_t **self_p)
{
    ks_store_t *self = *self_p;
    if (!self)
        return;
    for (int i = 0; i < S_STMTS; i++)
        sqlite3_finalize (self->stmts [i]);
    sqlite3_close_v2 (self->db);
    free (self->path);
    free (self);
    *self_p = NULL;
}

//  Opens the file and sets the connection up: busy timeout, WAL,
//  synchronous=FULL (a commit is on disk when it returns), foreign keys
//  (tenant removal cascades), secure_delete (deleted rows are overwritten
//  in the file).
static ks_store_t *
s_open (const char *path)
{
    ks_store_t *self = calloc (1, sizeof *self);
    if (!self || !(self->path = strdup (path)) || s_file_create (path) != 0)
        goto fail;
    if (sqlite3_open_v2 (path, &self->db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK) {
        zsys_error ("keystore %s: cannot open: %s", path,
                    self->db ? sqlite3_errmsg (self->db) : "out of memory");
        goto fail;
    }
    sqlite3_busy_timeout (self->db, BUSY_TIMEOUT_MS);
    //  mmap_size: reads map the file instead of a pread(2) copy per page;
    //  a tenant's 100,000-key list read in pages took 1.43 s over the wire
    //  with pread, 0.82 s mapped (issue #25).  Writes still go through the
    //  WAL; the rows' secrets are encrypted either way.
    if (s_exec (self, "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL;"
                      " PRAGMA foreign_keys = ON; PRAGMA secure_delete = ON;"
                      " PRAGMA mmap_size = 268435456;") != 0
    ||  s_data_version (self, &self->data_version) != 0)
        goto fail;
    return self;
fail:
    s_close (&self);
    return NULL;
}

static const char *
s_where (ks_store_t *self)
{
    return self->path;
}

static int
s_begin (ks_store_t *self)
{
    return s_exec (self, "BEGIN IMMEDIATE");
}

static int
s_end (ks_store_t *self, bool commit)
{
    return s_exec (self, commit ? "COMMIT" : "ROLLBACK");
}

static int
s_snapshot (ks_store_t *self)
{
    return s_exec (self, "BEGIN");
}

/* ---- meta rows -------------------------------------------------------- */

static int
s_meta_get (ks_store_t *self, const char *name, uint8_t **value_p, size_t *len_p)
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
        *len_p = (size_t) sqlite3_column_bytes (stmt, 0);
        *value_p = ks_dup (sqlite3_column_blob (stmt, 0), *len_p);
        rc = *value_p ? 1 : -1;
    }
    else
        s_db_error (self, "read meta");
    sqlite3_finalize (stmt);
    return rc;
}

static int
s_meta_put (ks_store_t *self, const char *name, const void *value, size_t len)
{
    sqlite3_stmt *stmt = s_prepare (self, "INSERT OR REPLACE INTO meta (name, value) VALUES (?1, ?2)");
    if (stmt) {
        s_bind_text (stmt, 1, name);
        sqlite3_bind_blob (stmt, 2, value, (int) len, SQLITE_TRANSIENT);
    }
    return s_step_done (self, stmt) == 1 ? 0 : -1;
}

//  Creates the tables (IF NOT EXISTS) and adds the columns schema 1 did
//  not have; *found_p gets meta 'schema' as it was (0: a new file).
static int
s_migrate (ks_store_t *self, int *found_p)
{
    uint8_t *value = NULL;
    size_t len = 0;
    if (s_exec (self, s_schema) != 0)
        return -1;
    int got = s_meta_get (self, "schema", &value, &len);
    *found_p = got == 1 ? atoi ((char *) value) : 0;
    free (value);
    if (got < 0)
        return -1;
    if (*found_p == 1)
        return s_exec (self, "ALTER TABLE tenants ADD COLUMN user_epoch INTEGER NOT NULL DEFAULT 0;"
                             "ALTER TABLE tenants ADD COLUMN so_epoch INTEGER NOT NULL DEFAULT 0;"
                             "ALTER TABLE tenants ADD COLUMN mac BLOB;"
                             "ALTER TABLE keys ADD COLUMN mac BLOB;");
    return 0;
}

static int
s_has (ks_store_t *self, const char *table, const char *column)
{
    sqlite3_stmt *stmt = column
        ? s_prepare (self, "SELECT 1 FROM pragma_table_info (?1) WHERE name = ?2")
        : s_prepare (self, "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1");
    if (!stmt)
        return -1;
    s_bind_text (stmt, 1, table);
    if (column)
        s_bind_text (stmt, 2, column);
    int step = sqlite3_step (stmt);
    if (step != SQLITE_ROW && step != SQLITE_DONE)
        s_db_error (self, "schema");
    sqlite3_finalize (stmt);
    return step == SQLITE_ROW ? 1 : step == SQLITE_DONE ? 0 : -1;
}

static int
s_version_get (ks_store_t *self, int *version_p)
{
    uint8_t *value = NULL;
    size_t len = 0;
    *version_p = 0;
    int has = s_has (self, "meta", NULL);
    int got = has == 1 ? s_meta_get (self, "schema", &value, &len) : has;
    if (got == 1)
        *version_p = atoi ((char *) value);
    free (value);
    return got < 0 ? -1 : 0;
}

static int
s_version_set (ks_store_t *self, int version)
{
    char text [16];
    snprintf (text, sizeof text, "%d", version);
    return s_meta_put (self, "schema", text, strlen (text));
}

static int
s_counter_next (ks_store_t *self, uint64_t *value_p)
{
    if (s_exec (self, "UPDATE meta SET value = CAST (value AS INTEGER) + 1 "
                      "WHERE name = 'version_seq'") != 0)
        return -1;
    sqlite3_stmt *stmt = s_prepare (self, "SELECT CAST (value AS INTEGER) FROM meta "
                                          "WHERE name = 'version_seq'");
    *value_p = 0;
    if (stmt && sqlite3_step (stmt) == SQLITE_ROW)
        *value_p = (uint64_t) sqlite3_column_int64 (stmt, 0);
    sqlite3_finalize (stmt);
    return *value_p ? 0 : -1;
}

/* ---- tenant rows ------------------------------------------------------ */

static int
s_tenant_read (ks_store_t *self, const char *name, bool lock, ks_tenant_rec_t *rec)
{
    sqlite3_stmt *stmt = s_stmt (self, S_STMT_TENANT, "SELECT user_pin, so_pin, user_failures, "
                                 "so_failures, user_epoch, so_epoch, mac, keys_version FROM tenants "
                                 "WHERE name = ?1");
    int rc = -1;
    memset (rec, 0, sizeof *rec);
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
        bool ok = true;
        for (int i = 0; i < 2; i++) {
            const char *pin = (const char *) sqlite3_column_text (stmt, i);
            rec->row.pin [i] = strdup (pin ? pin : "");
            ok = ok && rec->row.pin [i];
            rec->row.failures [i] = sqlite3_column_int64 (stmt, 2 + i);
            rec->row.epoch [i] = sqlite3_column_int64 (stmt, 4 + i);
        }
        rec->mac = s_column_blob (stmt, 6, &rec->mac_len, &ok);
        rec->keys_version = (uint64_t) sqlite3_column_int64 (stmt, 7);
        rc = ok ? 1 : -1;
    }
    s_stmt_done (self, stmt);
    if (rc != 1)
        ks_tenant_rec_free (rec);
    return rc;
}

static int
s_tenant_insert (ks_store_t *self, const char *name, const ks_tenant_rec_t *rec)
{
    sqlite3_stmt *stmt = s_prepare (self, "INSERT INTO tenants (name, user_pin, so_pin, keys_version, "
                                          "user_epoch, so_epoch, mac) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)");
    if (stmt) {
        s_bind_text (stmt, 1, name);
        s_bind_text (stmt, 2, rec->row.pin [0]);
        s_bind_text (stmt, 3, rec->row.pin [1]);
        sqlite3_bind_int64 (stmt, 4, (sqlite3_int64) rec->keys_version);
        sqlite3_bind_int64 (stmt, 5, rec->row.epoch [0]);
        sqlite3_bind_int64 (stmt, 6, rec->row.epoch [1]);
        s_bind_blob (stmt, 7, rec->mac, rec->mac_len);
    }
    return s_step_done (self, stmt) == 1 ? 0 : -1;
}

static int
s_tenant_update (ks_store_t *self, const char *name, const row_mac_tenant_t *row,
                 const uint8_t mac [ROW_MAC_LEN])
{
    sqlite3_stmt *stmt = s_prepare (self, "UPDATE tenants SET user_pin = ?2, so_pin = ?3, "
                                          "user_failures = ?4, so_failures = ?5, user_epoch = ?6, "
                                          "so_epoch = ?7, mac = ?8 WHERE name = ?1");
    if (stmt) {
        s_bind_text (stmt, 1, name);
        s_bind_text (stmt, 2, row->pin [0]);
        s_bind_text (stmt, 3, row->pin [1]);
        for (int i = 0; i < 2; i++) {
            sqlite3_bind_int64 (stmt, 4 + i, row->failures [i]);
            sqlite3_bind_int64 (stmt, 6 + i, row->epoch [i]);
        }
        sqlite3_bind_blob (stmt, 8, mac, ROW_MAC_LEN, SQLITE_TRANSIENT);
    }
    return s_step_done (self, stmt);
}

static int
s_tenant_delete (ks_store_t *self, const char *name)
{
    sqlite3_stmt *stmt = s_prepare (self, "DELETE FROM tenants WHERE name = ?1");
    if (stmt)
        s_bind_text (stmt, 1, name);
    int changed = s_step_done (self, stmt);
    return changed < 0 ? -1 : changed > 0 ? 1 : 0;
}

static int
s_tenant_exists (ks_store_t *self, const char *name)
{
    sqlite3_stmt *stmt = s_stmt (self, S_STMT_TENANT_EXISTS, "SELECT 1 FROM tenants WHERE name = ?1");
    if (!stmt)
        return -1;
    s_bind_text (stmt, 1, name);
    int step = sqlite3_step (stmt);
    s_stmt_done (self, stmt);
    return step == SQLITE_ROW ? 1 : step == SQLITE_DONE ? 0 : -1;
}

static char **
s_tenant_list (ks_store_t *self)
{
    sqlite3_stmt *stmt = s_prepare (self, "SELECT name FROM tenants ORDER BY name");
    if (!stmt)
        return NULL;
    size_t count = 0, room = 8;
    char **names = calloc (room + 1, sizeof *names);
    int step = SQLITE_ERROR;
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

static int
s_keys_version_get (ks_store_t *self, const char *tenant, uint64_t *version_p)
{
    sqlite3_stmt *stmt = s_stmt (self, S_STMT_KEYS_VERSION, "SELECT keys_version FROM tenants WHERE name = ?1");
    if (!stmt)
        return -1;
    s_bind_text (stmt, 1, tenant);
    int step = sqlite3_step (stmt);
    if (step == SQLITE_ROW)
        *version_p = (uint64_t) sqlite3_column_int64 (stmt, 0);
    s_stmt_done (self, stmt);
    return step == SQLITE_ROW ? 1 : step == SQLITE_DONE ? 0 : -1;
}

static int
s_keys_version_set (ks_store_t *self, const char *tenant, uint64_t version)
{
    sqlite3_stmt *stmt = s_prepare (self, "UPDATE tenants SET keys_version = ?2 WHERE name = ?1");
    if (stmt) {
        s_bind_text (stmt, 1, tenant);
        sqlite3_bind_int64 (stmt, 2, (sqlite3_int64) version);
    }
    return s_step_done (self, stmt);
}

/* ---- key rows --------------------------------------------------------- */

//  The key row in the current result of stmt (ref in column col, info,
//  private and mac after it) into *rec.  Returns 1, or -1 when out of memory.
static int
s_key_columns (sqlite3_stmt *stmt, int col, ks_key_rec_t *rec)
{
    bool ok = true;
    const char *ref = (const char *) sqlite3_column_text (stmt, col);
    rec->ref = strdup (ref ? ref : "");
    rec->info = s_column_blob (stmt, col + 1, &rec->info_len, &ok);
    if (!rec->info)                     //  NOT NULL, but empty reads as NULL
        rec->info = ks_dup ("", 0);
    rec->private = s_column_blob (stmt, col + 2, &rec->private_len, &ok);
    rec->mac = s_column_blob (stmt, col + 3, &rec->mac_len, &ok);
    if (ok && rec->ref && rec->info)
        return 1;
    ks_key_rec_free (rec);
    return -1;
}

static int
s_key_read (ks_store_t *self, const char *tenant, const char *ref, bool lock, ks_key_rec_t *rec)
{
    sqlite3_stmt *stmt = s_stmt (self, S_STMT_KEY, "SELECT ref, info, private, mac FROM keys "
                                                   "WHERE tenant = ?1 AND ref = ?2");
    memset (rec, 0, sizeof *rec);
    if (!stmt)
        return -1;
    s_bind_text (stmt, 1, tenant);
    s_bind_text (stmt, 2, ref);
    int step = sqlite3_step (stmt), rc = -1;
    if (step == SQLITE_ROW)
        rc = s_key_columns (stmt, 0, rec);
    else
    if (step == SQLITE_DONE)
        rc = 0;
    else
        s_db_error (self, "read key");
    s_stmt_done (self, stmt);
    return rc;
}

static int
s_key_insert (ks_store_t *self, const char *tenant, const ks_key_rec_t *rec)
{
    sqlite3_stmt *stmt = s_prepare (self, "INSERT INTO keys (tenant, ref, info, private, mac) "
                                          "VALUES (?1, ?2, ?3, ?4, ?5)");
    if (stmt) {
        s_bind_text (stmt, 1, tenant);
        s_bind_text (stmt, 2, rec->ref);
        sqlite3_bind_blob (stmt, 3, rec->info, (int) rec->info_len, SQLITE_TRANSIENT);
        s_bind_blob (stmt, 4, rec->private, rec->private_len);
        s_bind_blob (stmt, 5, rec->mac, rec->mac_len);
    }
    return s_step_done (self, stmt) == 1 ? 0 : -1;
}

static int
s_key_update (ks_store_t *self, const char *tenant, const char *ref, const uint8_t *info,
              size_t info_len, const uint8_t mac [ROW_MAC_LEN])
{
    sqlite3_stmt *stmt = s_prepare (self, "UPDATE keys SET info = ?3, mac = ?4 WHERE tenant = ?1 AND ref = ?2");
    if (stmt) {
        s_bind_text (stmt, 1, tenant);
        s_bind_text (stmt, 2, ref);
        sqlite3_bind_blob (stmt, 3, info, (int) info_len, SQLITE_TRANSIENT);
        sqlite3_bind_blob (stmt, 4, mac, ROW_MAC_LEN, SQLITE_TRANSIENT);
    }
    return s_step_done (self, stmt);
}

/*  Deletes row (tenant, ref) of `table` (keys or objects): 1, 0 when there
 *  is none, -1 on failure.  */
static int
s_row_delete (ks_store_t *self, const char *table, const char *tenant, const char *ref)
{
    char sql [64];
    snprintf (sql, sizeof sql, "DELETE FROM %s WHERE tenant = ?1 AND ref = ?2", table);
    sqlite3_stmt *stmt = s_prepare (self, sql);
    if (stmt) {
        s_bind_text (stmt, 1, tenant);
        s_bind_text (stmt, 2, ref);
    }
    int changed = s_step_done (self, stmt);
    return changed < 0 ? -1 : changed > 0 ? 1 : 0;
}

static int
s_key_delete (ks_store_t *self, const char *tenant, const char *ref)
{
    return s_row_delete (self, "keys", tenant, ref);
}

/*  The rows that stmt (bound) selects, as key_list returns them; `what`
 *  names them in a log line.  Finalizes stmt.  */
static int
s_rows_read (ks_store_t *self, sqlite3_stmt *stmt, const char *what, ks_key_rec_t **recs_p, size_t *count_p)
{
    size_t count = 0, room = 16;
    ks_key_rec_t *recs = calloc (room, sizeof *recs);
    int step = SQLITE_ERROR;
    while (recs && (step = sqlite3_step (stmt)) == SQLITE_ROW) {
        if (count == room) {
            ks_key_rec_t *grown = realloc (recs, 2 * room * sizeof *recs);
            if (!grown)
                break;
            recs = grown;
            room *= 2;
        }
        memset (&recs [count], 0, sizeof *recs);
        if (s_key_columns (stmt, 0, &recs [count]) != 1)
            break;
        count++;
    }
    sqlite3_finalize (stmt);
    if (step != SQLITE_DONE) {
        if (recs)
            s_db_error (self, what);
        for (size_t i = 0; recs && i < count; i++)
            ks_key_rec_free (&recs [i]);
        free (recs);
        return -1;
    }
    *recs_p = recs;
    *count_p = count;
    return 0;
}

/*  The rows of `table` (keys or objects: the same columns) of the tenant in
 *  the order stored, as key_list returns them; `what` names them in a log
 *  line.  */
static int
s_rows_list (ks_store_t *self, const char *table, const char *what, const char *tenant,
             ks_key_rec_t **recs_p, size_t *count_p)
{
    char sql [96];
    snprintf (sql, sizeof sql, "SELECT ref, info, private, mac FROM %s WHERE tenant = ?1 ORDER BY rowid", table);
    sqlite3_stmt *stmt = s_prepare (self, sql);
    if (!stmt)
        return -1;
    s_bind_text (stmt, 1, tenant);
    return s_rows_read (self, stmt, what, recs_p, count_p);
}

static int
s_key_list (ks_store_t *self, const char *tenant, ks_key_rec_t **recs_p, size_t *count_p)
{
    return s_rows_list (self, "keys", "list keys", tenant, recs_p, count_p);
}

/*  Keyset pagination over the primary key (tenant, ref): one index range
 *  scan of `limit` rows whatever the page's place.  */
static int
s_key_page (ks_store_t *self, const char *tenant, const char *after, size_t limit,
            ks_key_rec_t **recs_p, size_t *count_p)
{
    sqlite3_stmt *stmt = s_prepare (self, "SELECT ref, info, private, mac FROM keys "
                                          "WHERE tenant = ?1 AND ref > ?2 ORDER BY ref LIMIT ?3");
    if (!stmt)
        return -1;
    s_bind_text (stmt, 1, tenant);
    s_bind_text (stmt, 2, after);
    sqlite3_bind_int64 (stmt, 3, limit > INT64_MAX ? INT64_MAX : (sqlite3_int64) limit);
    return s_rows_read (self, stmt, "list a page of keys", recs_p, count_p);
}

static int
s_idem_read (ks_store_t *self, const char *tenant, const uint8_t *id, size_t id_len, ks_idem_rec_t *rec)
{
    sqlite3_stmt *stmt = s_prepare (self, "SELECT result, created, mac FROM idempotency "
                                          "WHERE tenant = ?1 AND id = ?2");
    memset (rec, 0, sizeof *rec);
    if (!stmt)
        return -1;
    s_bind_text (stmt, 1, tenant);
    sqlite3_bind_blob (stmt, 2, id, (int) id_len, SQLITE_TRANSIENT);
    int rc = -1, step = sqlite3_step (stmt);
    bool ok = true;
    if (step == SQLITE_ROW) {
        rec->result = s_column_blob (stmt, 0, &rec->result_len, &ok);
        rec->created = sqlite3_column_int64 (stmt, 1);
        rec->mac = s_column_blob (stmt, 2, &rec->mac_len, &ok);
        rc = ok && rec->result ? 1 : -1;
        if (rc < 0)
            ks_idem_rec_free (rec);
    }
    else
    if (step == SQLITE_DONE)
        rc = 0;
    else
        s_db_error (self, "read idempotency");
    sqlite3_finalize (stmt);
    return rc;
}

static int
s_idem_insert (ks_store_t *self, const char *tenant, const uint8_t *id, size_t id_len,
               const ks_idem_rec_t *rec)
{
    sqlite3_stmt *stmt = s_prepare (self, "INSERT OR IGNORE INTO idempotency (tenant, id, result, "
                                          "created, mac) VALUES (?1, ?2, ?3, ?4, ?5)");
    if (stmt) {
        s_bind_text (stmt, 1, tenant);
        sqlite3_bind_blob (stmt, 2, id, (int) id_len, SQLITE_TRANSIENT);
        sqlite3_bind_blob (stmt, 3, rec->result, (int) rec->result_len, SQLITE_TRANSIENT);
        sqlite3_bind_int64 (stmt, 4, rec->created);
        s_bind_blob (stmt, 5, rec->mac, rec->mac_len);
    }
    int changed = s_step_done (self, stmt);
    return changed < 0 ? -1 : changed > 0 ? 1 : 0;
}

static int
s_idem_expire (ks_store_t *self, int64_t before)
{
    sqlite3_stmt *stmt = s_prepare (self, "DELETE FROM idempotency WHERE created < ?1");
    if (stmt)
        sqlite3_bind_int64 (stmt, 1, before);
    return s_step_done (self, stmt);
}

/* ---- issued pool keys (schema 5) --------------------------------------- */

static int
s_issued_insert (ks_store_t *self, const uint8_t fingerprint [32], const char *tenant,
                 int64_t created, const uint8_t mac [ROW_MAC_LEN])
{
    sqlite3_stmt *stmt = s_prepare (self, "INSERT OR IGNORE INTO issued (fingerprint, tenant, "
                                          "created, mac) VALUES (?1, ?2, ?3, ?4)");
    if (stmt) {
        sqlite3_bind_blob (stmt, 1, fingerprint, 32, SQLITE_TRANSIENT);
        s_bind_text (stmt, 2, tenant);
        sqlite3_bind_int64 (stmt, 3, created);
        sqlite3_bind_blob (stmt, 4, mac, ROW_MAC_LEN, SQLITE_TRANSIENT);
    }
    int changed = s_step_done (self, stmt);
    return changed < 0 ? -1 : changed > 0 ? 1 : 0;
}

static int
s_issued_read (ks_store_t *self, const uint8_t fingerprint [32], char **tenant_p,
               int64_t *created_p, uint8_t **mac_p, size_t *mac_len_p)
{
    sqlite3_stmt *stmt = s_prepare (self, "SELECT tenant, created, mac FROM issued WHERE fingerprint = ?1");
    if (!stmt)
        return -1;
    sqlite3_bind_blob (stmt, 1, fingerprint, 32, SQLITE_TRANSIENT);
    int step = sqlite3_step (stmt), rc = -1;
    bool ok = true;
    if (step == SQLITE_ROW) {
        const char *tenant = (const char *) sqlite3_column_text (stmt, 0);
        *tenant_p = strdup (tenant ? tenant : "");
        *created_p = sqlite3_column_int64 (stmt, 1);
        *mac_p = s_column_blob (stmt, 2, mac_len_p, &ok);
        rc = ok && *tenant_p ? 1 : -1;
    }
    else
    if (step == SQLITE_DONE)
        rc = 0;
    else
        s_db_error (self, "read issued");
    sqlite3_finalize (stmt);
    return rc;
}

static int
s_issued_macs (ks_store_t *self, uint8_t **macs_p, uint8_t **fps_p, size_t *count_p)
{
    sqlite3_stmt *stmt = s_prepare (self, "SELECT mac, fingerprint FROM issued");
    size_t count = 0, room = 0;
    uint8_t *macs = NULL, *fps = NULL;
    int step = SQLITE_ERROR;
    while (stmt && (step = sqlite3_step (stmt)) == SQLITE_ROW) {
        if (count == room) {
            room = 2 * room + 16;
            uint8_t *grown = realloc (macs, room * ROW_MAC_LEN), *fgrown = grown ? realloc (fps, room * 32) : NULL;
            macs = grown ? grown : macs;
            fps = fgrown ? fgrown : fps;
            if (!fgrown) {
                step = SQLITE_NOMEM;
                break;
            }
        }
        memset (macs + count * ROW_MAC_LEN, 0, ROW_MAC_LEN);
        memset (fps + count * 32, 0, 32);
        if (sqlite3_column_bytes (stmt, 0) == ROW_MAC_LEN)
            memcpy (macs + count * ROW_MAC_LEN, sqlite3_column_blob (stmt, 0), ROW_MAC_LEN);
        if (sqlite3_column_bytes (stmt, 1) == 32)
            memcpy (fps + count * 32, sqlite3_column_blob (stmt, 1), 32);
        count++;
    }
    sqlite3_finalize (stmt);
    if (step != SQLITE_DONE) {
        free (macs);
        free (fps);
        return -1;
    }
    *macs_p = macs;
    if (fps_p)
        *fps_p = fps;
    else
        free (fps);
    *count_p = count;
    return 0;
}

/* ---- audit chains (schema 6) -------------------------------------------- */

static int
s_audit_head (ks_store_t *self, const char *broker, int64_t *seq_p, uint8_t hash [KEYSTORE_AUDIT_HASH_LEN])
{
    sqlite3_stmt *stmt = s_prepare (self, "SELECT seq, hash FROM audit WHERE broker = ?1 "
                                          "ORDER BY seq DESC LIMIT 1");
    if (!stmt)
        return -1;
    s_bind_text (stmt, 1, broker);
    int step = sqlite3_step (stmt), rc = step == SQLITE_DONE ? 0 : -1;
    if (step == SQLITE_ROW) {
        *seq_p = sqlite3_column_int64 (stmt, 0);
        memset (hash, 0, KEYSTORE_AUDIT_HASH_LEN);
        if (sqlite3_column_bytes (stmt, 1) == KEYSTORE_AUDIT_HASH_LEN)
            memcpy (hash, sqlite3_column_blob (stmt, 1), KEYSTORE_AUDIT_HASH_LEN);
        rc = 1;
    }
    else
    if (step != SQLITE_DONE)
        s_db_error (self, "read audit");
    sqlite3_finalize (stmt);
    return rc;
}

static int
s_audit_insert (ks_store_t *self, const keystore_audit_row_t *row)
{
    sqlite3_stmt *stmt = s_prepare (self, "INSERT INTO audit (broker, seq, record, prev, hash, sig) "
                                          "VALUES (?1, ?2, ?3, ?4, ?5, ?6)");
    if (stmt) {
        s_bind_text (stmt, 1, row->broker);
        sqlite3_bind_int64 (stmt, 2, row->seq);
        s_bind_text (stmt, 3, row->record);
        sqlite3_bind_blob (stmt, 4, row->prev, KEYSTORE_AUDIT_HASH_LEN, SQLITE_TRANSIENT);
        sqlite3_bind_blob (stmt, 5, row->hash, KEYSTORE_AUDIT_HASH_LEN, SQLITE_TRANSIENT);
        if (row->sig)
            sqlite3_bind_blob (stmt, 6, row->sig, (int) row->sig_len, SQLITE_TRANSIENT);
    }
    return s_step_done (self, stmt) == 1 ? 0 : -1;
}

static int
s_audit_sigs (ks_store_t *self, uint8_t **sigs_p, size_t *count_p)
{
    sqlite3_stmt *stmt = s_prepare (self, "SELECT sig FROM audit WHERE sig IS NOT NULL");
    size_t count = 0, room = 0;
    uint8_t *sigs = NULL;
    int step = SQLITE_ERROR;
    while (stmt && (step = sqlite3_step (stmt)) == SQLITE_ROW) {
        if (count == room) {
            uint8_t *grown = realloc (sigs, (room = 2 * room + 16) * KEYSTORE_AUDIT_SIG_LEN);
            if (!grown)
                break;
            sigs = grown;
        }
        memset (sigs + count * KEYSTORE_AUDIT_SIG_LEN, 0, KEYSTORE_AUDIT_SIG_LEN);
        if (sqlite3_column_bytes (stmt, 0) == KEYSTORE_AUDIT_SIG_LEN)
            memcpy (sigs + count * KEYSTORE_AUDIT_SIG_LEN, sqlite3_column_blob (stmt, 0), KEYSTORE_AUDIT_SIG_LEN);
        count++;
    }
    sqlite3_finalize (stmt);
    if (step != SQLITE_DONE) {
        free (sigs);
        return -1;
    }
    *sigs_p = sigs;
    *count_p = count;
    return 0;
}

//  A blob column into a fixed buffer: *len_p its stored length.
static void
s_column_fixed (sqlite3_stmt *stmt, int col, uint8_t *out, size_t room, size_t *len_p)
{
    *len_p = (size_t) sqlite3_column_bytes (stmt, col);
    memset (out, 0, room);
    if (*len_p && sqlite3_column_blob (stmt, col))
        memcpy (out, sqlite3_column_blob (stmt, col), *len_p < room ? *len_p : room);
}

static int
s_audit_list (ks_store_t *self, keystore_audit_row_t **rows_p, size_t *count_p)
{
    sqlite3_stmt *stmt = s_prepare (self, "SELECT broker, seq, record, prev, hash, sig FROM audit "
                                          "ORDER BY broker, seq");
    size_t room = 0;
    bool ok = stmt != NULL;
    int step = SQLITE_ERROR;
    while (ok && (step = sqlite3_step (stmt)) == SQLITE_ROW) {
        keystore_audit_row_t *row = ks_audit_row_add (rows_p, count_p, &room);
        const char *broker = (const char *) sqlite3_column_text (stmt, 0);
        const char *record = (const char *) sqlite3_column_text (stmt, 2);
        ok = row && (row->broker = strdup (broker ? broker : ""))
                 && (row->record = strdup (record ? record : ""));
        if (!ok)
            break;
        row->seq = sqlite3_column_int64 (stmt, 1);
        s_column_fixed (stmt, 3, row->prev, sizeof row->prev, &row->prev_len);
        s_column_fixed (stmt, 4, row->hash, sizeof row->hash, &row->hash_len);
        row->sig = s_column_blob (stmt, 5, &row->sig_len, &ok);
    }
    if (ok && step != SQLITE_DONE)
        s_db_error (self, "read audit");
    sqlite3_finalize (stmt);
    return ok && step == SQLITE_DONE ? 0 : -1;
}

/* ---- object rows (schema 4) -------------------------------------------- */

static int
s_object_read (ks_store_t *self, const char *tenant, const char *ref, ks_key_rec_t *rec)
{
    sqlite3_stmt *stmt = s_prepare (self, "SELECT ref, info, private, mac FROM objects "
                                          "WHERE tenant = ?1 AND ref = ?2");
    memset (rec, 0, sizeof *rec);
    if (!stmt)
        return -1;
    s_bind_text (stmt, 1, tenant);
    s_bind_text (stmt, 2, ref);
    int step = sqlite3_step (stmt), rc = -1;
    if (step == SQLITE_ROW)
        rc = s_key_columns (stmt, 0, rec);
    else
    if (step == SQLITE_DONE)
        rc = 0;
    else
        s_db_error (self, "read object");
    sqlite3_finalize (stmt);
    return rc;
}

static int
s_object_put (ks_store_t *self, const char *tenant, const ks_key_rec_t *rec)
{
    sqlite3_stmt *stmt = s_prepare (self, "INSERT INTO objects (tenant, ref, info, private, mac) "
                                          "VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (tenant, ref) DO UPDATE "
                                          "SET info = excluded.info, private = excluded.private, "
                                          "mac = excluded.mac");
    if (stmt) {
        s_bind_text (stmt, 1, tenant);
        s_bind_text (stmt, 2, rec->ref);
        sqlite3_bind_blob (stmt, 3, rec->info, (int) rec->info_len, SQLITE_TRANSIENT);
        s_bind_blob (stmt, 4, rec->private, rec->private_len);
        s_bind_blob (stmt, 5, rec->mac, rec->mac_len);
    }
    return s_step_done (self, stmt) == 1 ? 0 : -1;
}

static int
s_object_delete (ks_store_t *self, const char *tenant, const char *ref)
{
    return s_row_delete (self, "objects", tenant, ref);
}

static int
s_object_list (ks_store_t *self, const char *tenant, ks_key_rec_t **recs_p, size_t *count_p)
{
    return s_rows_list (self, "objects", "list objects", tenant, recs_p, count_p);
}

//  Takes the write lock once (BEGIN IMMEDIATE waits for writers) and
//  compares PRAGMA data_version with the last one seen.
static int
s_settle (ks_store_t *self)
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

const ks_backend_t ks_sqlite_backend = {
    .name = "sqlite",
    .open = s_open,
    .close = s_close,
    .where = s_where,
    .begin = s_begin,
    .end = s_end,
    .snapshot = s_snapshot,
    .migrate = s_migrate,
    .has = s_has,
    .version_get = s_version_get,
    .version_set = s_version_set,
    .meta_get = s_meta_get,
    .meta_put = s_meta_put,
    .counter_next = s_counter_next,
    .tenant_read = s_tenant_read,
    .tenant_insert = s_tenant_insert,
    .tenant_update = s_tenant_update,
    .tenant_delete = s_tenant_delete,
    .tenant_exists = s_tenant_exists,
    .tenant_list = s_tenant_list,
    .keys_version_get = s_keys_version_get,
    .keys_version_set = s_keys_version_set,
    .key_read = s_key_read,
    .key_insert = s_key_insert,
    .key_update = s_key_update,
    .key_delete = s_key_delete,
    .key_list = s_key_list,
    .key_page = s_key_page,
    .object_read = s_object_read,
    .object_put = s_object_put,
    .object_delete = s_object_delete,
    .object_list = s_object_list,
    .idem_read = s_idem_read,
    .idem_insert = s_idem_insert,
    .idem_expire = s_idem_expire,
    .issued_insert = s_issued_insert,
    .issued_read = s_issued_read,
    .issued_macs = s_issued_macs,
    .audit_head = s_audit_head,
    .audit_insert = s_audit_insert,
    .audit_list = s_audit_list,
    .audit_sigs = s_audit_sigs,
    .settle = s_settle,
    .listen = NULL,
};
