/*  ks_sqlite.c — the SQLite back end of the keystore (ks_backend.h): one
 *  file in WAL mode with synchronous=FULL and secure_delete, seven tables
 *  (schema below; their rows go through the row layer, ks_sql.h), the
 *  schema version in meta 'schema' and the version counter in meta
 *  'version_seq'.  What is its own: the connection, transactions, the
 *  prepared hot statements, the schema and change detection
 *  (data_version).  The default: one broker (and cryptoserver-admin, SQLite
 *  locks make that safe) per file.
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
#include "ks_sql.h"

#define BUSY_TIMEOUT_MS  5000           /* admin and broker share the file */

//  The statements of the hot reads (ks_stmt_t.hot), prepared once per
//  connection and reset after each use (s_stmt, s_stmt_done): a key job or
//  a ticket check must not compile SQL every time.
#define S_STMTS KS_HOT_SLOTS

static const ks_dialect_t s_dialect;

struct _ks_store_t {
    const ks_dialect_t *dialect;    /* first: the row layer's (ks_sql.h) */
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

//  Binds text (NUL-terminated) at position `index`.
static void
s_bind_text (sqlite3_stmt *stmt, int index, const char *text)
{
    sqlite3_bind_text (stmt, index, text, -1, SQLITE_TRANSIENT);
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
    self->dialect = &s_dialect;
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

/* ---- schema, version, counter ----------------------------------------- */

//  Creates the tables (IF NOT EXISTS) and adds the columns schema 1 did
//  not have; *found_p gets meta 'schema' as it was (0: a new file).
static int
s_migrate (ks_store_t *self, int *found_p)
{
    uint8_t *value = NULL;
    size_t len = 0;
    if (s_exec (self, s_schema) != 0)
        return -1;
    int got = ks_rows_meta_get (self, "schema", &value, &len);
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
    int got = has == 1 ? ks_rows_meta_get (self, "schema", &value, &len) : has;
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
    return ks_rows_meta_put (self, "schema", text, strlen (text));
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

/* ---- the dialect: one statement of the row layer ------------------------ */

//  Binds parameter `index` (from 1): text and blob NULL bind SQL NULL.
static void
s_bind (sqlite3_stmt *stmt, int index, const ks_val_t *v)
{
    if (v->type == KS_INT)
        sqlite3_bind_int64 (stmt, index, v->i);
    else
    if (v->type == KS_TEXT)
        s_bind_text (stmt, index, v->data);
    else
    if (v->data)
        sqlite3_bind_blob (stmt, index, v->data, (int) v->len, SQLITE_TRANSIENT);
    else
        sqlite3_bind_null (stmt, index);
}

//  Column col of the current row as type `type` ('t', 'b', 'i').
static ks_val_t
s_column (sqlite3_stmt *stmt, int col, char type)
{
    ks_val_t v = { .type = KS_NULL, .data = "" };
    if (sqlite3_column_type (stmt, col) == SQLITE_NULL)
        return v;
    if (type == 'i')
        return (ks_val_t) { .type = KS_INT, .i = sqlite3_column_int64 (stmt, col) };
    v.type = type == 't' ? KS_TEXT : KS_BLOB;
    v.data = type == 't' ? (const void *) sqlite3_column_text (stmt, col) : sqlite3_column_blob (stmt, col);
    v.len = (size_t) sqlite3_column_bytes (stmt, col);
    return v;
}

//  ks_dialect_t.run: SQLite runs the statements as written (?N); its write
//  transaction holds the file's write lock, so `lock` changes nothing.
static int
s_run (ks_store_t *self, const ks_stmt_t *st, const ks_val_t *params, size_t count, bool lock,
       ks_row_fn *row, void *arg)
{
    const char *sql = st->sqlite ? st->sqlite : st->sql;
    sqlite3_stmt *stmt = st->hot ? s_stmt (self, st->hot - 1, sql) : s_prepare (self, sql);
    if (!stmt)
        return -1;
    for (size_t i = 0; i < count; i++)
        s_bind (stmt, (int) i + 1, &params [i]);
    int ncols = st->cols ? (int) strlen (st->cols) : 0, rows = 0, step;
    while ((step = sqlite3_step (stmt)) == SQLITE_ROW) {
        ks_val_t cols [8];
        for (int c = 0; c < ncols && c < 8; c++)
            cols [c] = s_column (stmt, c, st->cols [c]);
        if (row && row (arg, cols) != 0)
            break;
        rows++;
    }
    int rc = step != SQLITE_DONE ? -1 : ncols ? rows : sqlite3_changes (self->db);
    if (step != SQLITE_DONE && step != SQLITE_ROW && (!ncols || st->what))
        s_db_error (self, ncols ? st->what : "write");
    s_stmt_done (self, stmt);
    return rc;
}

static const ks_dialect_t s_dialect = {
    .run = s_run,
    .chain_lock = NULL,
};

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
    .counter_next = s_counter_next,
    KS_ROWS_SLOTS,
    .settle = s_settle,
    .listen = NULL,
};
