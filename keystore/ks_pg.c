/*  ks_pg.c — the PostgreSQL back end of the keystore (ks_backend.h), with
 *  libpq: the same tables as the SQLite file (meta, tenants, keys; bytea
 *  for blobs, bigint for counters), a sequence for the version counter, a
 *  schema_version table that records each migration applied, and a trigger
 *  on tenants and keys that notifies channel "cryptoserver_keystore" with
 *  the writing process's origin (the session setting cryptoserver.origin)
 *  at each commit, so that brokers sharing the database drop their caches
 *  (keystore_listener_new).
 *
 *  Write transactions are READ COMMITTED with row locks: a read made with
 *  `lock` is SELECT ... FOR UPDATE, so a PIN check or a key update reads,
 *  checks and writes a row no other broker changes meanwhile.  A lost
 *  connection is opened again at the next use (PQreset; a statement that
 *  failed outside a transaction because the connection had dropped is
 *  sent once more); until then every call fails after the log line
 *  "keystore WHERE: database unreachable: ...".  The listener of change
 *  notifications is in ks_pg_listen.c.  The rows themselves go through the
 *  row layer (ks_sql.h); what is this file's own: the connection and its
 *  recovery, transactions and row locks, the migrations, the counter
 *  sequence.
 */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <czmq.h>
#include <libpq-fe.h>
#include "keystore.h"
#include "ks_sql.h"
#include "ks_pg.h"

#define S_LOCK_ID         "7161829137213491"   /* pg_advisory_xact_lock of migrations */
#define S_MAX_PARAMS      8
#define S_OID_INT8        20
#define S_OID_TEXT        25
#define S_OID_BYTEA       17

static const ks_dialect_t s_dialect;

struct _ks_store_t {
    const ks_dialect_t *dialect;    /* first: the row layer's (ks_sql.h) */
    PGconn *conn;
    char *url;
    char *where;                /* url without its password */
    bool in_tx;                 /* inside BEGIN .. COMMIT/ROLLBACK */
    bool snapshot;              /* ... a read-only one (s_snapshot): no FOR UPDATE */
    bool lost;                  /* the last connection attempt failed */
};


/* ---- connections --------------------------------------------------------- */

//  Makes sure the connection is up: opens it again when it dropped (also
//  after the database came back).  Returns 0, or -1 after a log.
static int
s_ensure (ks_store_t *self)
{
    if (self->conn && PQstatus (self->conn) == CONNECTION_OK)
        return 0;
    if (self->conn) {
        PQfinish (self->conn);
        self->conn = NULL;
    }
    self->conn = ks_pg_connect (self->url, self->where);
    if (self->conn && self->lost)
        zsys_info ("keystore %s: connected again", self->where);
    self->lost = !self->conn;
    return self->conn ? 0 : -1;
}

/*  Statement parameters: text, bytea (NULL: SQL NULL) and int8 values,
 *  sent in the binary format except text.  */
typedef struct {
    const char *values [S_MAX_PARAMS];
    int lengths [S_MAX_PARAMS];
    int formats [S_MAX_PARAMS];
    Oid types [S_MAX_PARAMS];
    char ints [S_MAX_PARAMS][8];
    int count;
} s_params_t;

static void
s_text (s_params_t *p, const char *text)
{
    p->values [p->count] = text;
    p->lengths [p->count] = 0;
    p->formats [p->count] = 0;
    p->types [p->count++] = S_OID_TEXT;
}

static void
s_bytea (s_params_t *p, const void *data, size_t len)
{
    p->values [p->count] = data;
    p->lengths [p->count] = (int) len;
    p->formats [p->count] = 1;
    p->types [p->count++] = S_OID_BYTEA;
}

static void
s_int8 (s_params_t *p, int64_t value)
{
    uint64_t v = (uint64_t) value;
    for (int i = 7; i >= 0; i--, v >>= 8)
        p->ints [p->count][i] = (char) (v & 0xff);
    p->values [p->count] = p->ints [p->count];
    p->lengths [p->count] = 8;
    p->formats [p->count] = 1;
    p->types [p->count++] = S_OID_INT8;
}

//  Runs sql with params (NULL: none), results in the binary format.
//  Returns the result (caller PQclears) when it succeeded, or NULL after a
//  log line.  Outside a transaction, a statement that failed because the
//  connection had dropped is sent once more on a new connection.
static PGresult *
s_run (ks_store_t *self, const char *sql, const s_params_t *p)
{
    if (self->in_tx && (!self->conn || PQstatus (self->conn) != CONNECTION_OK)) {
        //  Never on a new connection: the statement would run outside the
        //  transaction, whose earlier statements are lost.
        zsys_error ("keystore %s: database unreachable: the connection dropped in a transaction",
                    self->where);
        return NULL;
    }
    for (int attempt = 0; attempt < 2; attempt++) {
        if (s_ensure (self) != 0)
            return NULL;
        PGresult *res = PQexecParams (self->conn, sql, p ? p->count : 0, p ? p->types : NULL,
                                      p ? p->values : NULL, p ? p->lengths : NULL,
                                      p ? p->formats : NULL, 1);
        ExecStatusType status = PQresultStatus (res);
        if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK)
            return res;
        PQclear (res);
        bool dropped = PQstatus (self->conn) != CONNECTION_OK;
        self->lost = self->lost || dropped;
        if (dropped && !self->in_tx && attempt == 0)
            continue;                   //  the database may be back: once more
        zsys_error ("keystore %s: %s%.*s", self->where, dropped ? "database unreachable: " : "",
                    KS_PG_MSG (self->conn));
        return NULL;
    }
    return NULL;
}

//  Runs statements without parameters (several, separated by ";": the
//  migrations) on the connection as it is.  Returns 0, or -1 after a log.
static int
s_script (ks_store_t *self, const char *sql)
{
    PGresult *res = PQexec (self->conn, sql);
    bool ok = PQresultStatus (res) == PGRES_COMMAND_OK || PQresultStatus (res) == PGRES_TUPLES_OK;
    PQclear (res);
    if (!ok)
        zsys_error ("keystore %s: migration: %.*s", self->where, KS_PG_MSG (self->conn));
    return ok ? 0 : -1;
}

//  Runs a statement without results; returns the rows it changed, or -1.
static int
s_run_changes (ks_store_t *self, const char *sql, const s_params_t *p)
{
    PGresult *res = s_run (self, sql, p);
    int changed = res ? atoi (PQcmdTuples (res)) : -1;
    PQclear (res);
    return changed;
}

static int64_t
s_get_int8 (PGresult *res, int row, int col)
{
    const uint8_t *v = (const uint8_t *) PQgetvalue (res, row, col);
    uint64_t value = 0;
    for (int i = 0; PQgetlength (res, row, col) == 8 && i < 8; i++)
        value = value << 8 | v [i];
    return (int64_t) value;
}


static void
s_close (ks_store_t **self_p)
{
    ks_store_t *self = *self_p;
    if (!self)
        return;
    PQfinish (self->conn);
    free (self->url);
    free (self->where);
    free (self);
    *self_p = NULL;
}

static ks_store_t *
s_open (const char *url)
{
    ks_store_t *self = calloc (1, sizeof *self);
    if (self)
        self->dialect = &s_dialect;
    if (!self || !(self->url = strdup (url)) || !(self->where = keystore_location_name (url))
    ||  s_ensure (self) != 0)
        s_close (&self);
    return self;
}

static const char *
s_where (ks_store_t *self)
{
    return self->where;
}

static int
s_begin (ks_store_t *self)
{
    PGresult *res = s_run (self, "BEGIN", NULL);
    PQclear (res);
    self->in_tx = res != NULL;
    return res ? 0 : -1;
}

static int
s_end (ks_store_t *self, bool commit)
{
    PGresult *res = s_run (self, commit ? "COMMIT" : "ROLLBACK", NULL);
    //  A COMMIT of a failed transaction "succeeds" as ROLLBACK.
    bool ok = res && (!commit || strcmp (PQcmdStatus (res), "COMMIT") == 0);
    if (res && !ok)
        zsys_error ("keystore %s: the transaction was rolled back", self->where);
    PQclear (res);
    self->in_tx = false;
    self->snapshot = false;
    return ok ? 0 : -1;
}

static int
s_snapshot (ks_store_t *self)
{
    PGresult *res = s_run (self, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", NULL);
    PQclear (res);
    self->in_tx = self->snapshot = res != NULL;
    return res ? 0 : -1;
}

/* ---- schema ------------------------------------------------------------- */

//  Inside the opening transaction (an advisory lock keeps two brokers
//  that start together from both creating the tables): applies every
//  migration newer than the database's schema_version and records it.
//  *found_p: 0 for a database that had no tables, else its version now.
static int
s_migrate (ks_store_t *self, int *found_p)
{
    PGresult *res = s_run (self, "SELECT pg_advisory_xact_lock (" S_LOCK_ID ")", NULL);
    PQclear (res);
    if (!res)
        return -1;
    res = s_run (self, "CREATE TABLE IF NOT EXISTS schema_version ("
                       "  version integer PRIMARY KEY, description text NOT NULL,"
                       "  applied timestamptz NOT NULL DEFAULT now ())", NULL);
    PQclear (res);
    res = res ? s_run (self, "SELECT coalesce (max (version), 0)::bigint FROM schema_version", NULL) : NULL;
    if (!res)
        return -1;
    int64_t version = s_get_int8 (res, 0, 0);
    PQclear (res);
    *found_p = (int) version;
    for (size_t i = 0; i < ks_pg_migrations_count; i++) {
        if (ks_pg_migrations [i].version <= version)
            continue;
        s_params_t p = { .count = 0 };
        s_int8 (&p, ks_pg_migrations [i].version);
        s_text (&p, ks_pg_migrations [i].description);
        if (s_script (self, ks_pg_migrations [i].sql) != 0 || s_run_changes (self, "INSERT INTO schema_version (version, description) "
                                         "VALUES ($1::bigint::integer, $2)", &p) != 1)
            return -1;
        zsys_info ("keystore %s: schema migrated to version %d (%s)", self->where,
                   ks_pg_migrations [i].version, ks_pg_migrations [i].description);
        if (version > 0)
            *found_p = ks_pg_migrations [i].version;
    }
    return 0;
}

static int
s_has (ks_store_t *self, const char *table, const char *column)
{
    s_params_t p = { .count = 0 };
    s_text (&p, table);
    if (column)
        s_text (&p, column);
    PGresult *res = s_run (self, column ? "SELECT 1 FROM information_schema.columns WHERE "
                                          "table_schema = current_schema () AND table_name = $1 "
                                          "AND column_name = $2"
                                        : "SELECT 1 FROM information_schema.tables WHERE "
                                          "table_schema = current_schema () AND table_name = $1", &p);
    int rc = !res ? -1 : PQntuples (res) > 0 ? 1 : 0;
    PQclear (res);
    return rc;
}

//  Takes the migrations' advisory lock (two brokers that start together
//  do not both create the tables), then reads max (schema_version).
static int
s_version_get (ks_store_t *self, int *version_p)
{
    *version_p = 0;
    PGresult *res = s_run (self, "SELECT pg_advisory_xact_lock (" S_LOCK_ID ")", NULL);
    PQclear (res);
    int has = res ? s_has (self, "schema_version", NULL) : -1;
    if (has != 1)
        return has;
    res = s_run (self, "SELECT coalesce (max (version), 0)::bigint FROM schema_version", NULL);
    if (res)
        *version_p = (int) s_get_int8 (res, 0, 0);
    PQclear (res);
    return res ? 0 : -1;
}

static int
s_version_set (ks_store_t *self, int version)
{
    s_params_t p = { .count = 0 };
    s_int8 (&p, version);
    s_text (&p, "recorded");
    return s_run_changes (self, "INSERT INTO schema_version (version, description) "
                                "VALUES ($1::bigint::integer, $2) ON CONFLICT DO NOTHING", &p) >= 0 ? 0 : -1;
}

/* ---- counter ---------------------------------------------------------------- */

static int
s_counter_next (ks_store_t *self, uint64_t *value_p)
{
    PGresult *res = s_run (self, "SELECT nextval ('version_seq')", NULL);
    *value_p = res && PQntuples (res) == 1 ? (uint64_t) s_get_int8 (res, 0, 0) : 0;
    PQclear (res);
    return *value_p ? 0 : -1;
}

/* ---- the dialect: one statement of the row layer ------------------------------ */

//  The text PostgreSQL runs for stmt: ?N become $N, and FOR UPDATE is
//  added when the read takes row locks.  Returns 0, or -1 after a log when
//  it does not fit.
static int
s_sql (ks_store_t *self, const ks_stmt_t *st, bool lock, char *out, size_t size)
{
    const char *sql = st->pg ? st->pg : st->sql;
    bool for_update = st->lock == KS_LOCK_ASKED ? lock
                    : st->lock == KS_LOCK_IN_WRITE && self->in_tx && !self->snapshot;
    int len = snprintf (out, size, "%s%s", sql, for_update ? " FOR UPDATE" : "");
    if (len < 0 || (size_t) len >= size) {
        zsys_error ("keystore %s: statement too long: %.40s", self->where, sql);
        return -1;
    }
    for (char *q = out; (q = strchr (q, '?')); q++)
        *q = '$';
    return 0;
}

//  Column col of row `row` of res as type `type` ('t', 'b', 'i': bigint).
static ks_val_t
s_column (PGresult *res, int row, int col, char type)
{
    if (PQgetisnull (res, row, col))
        return (ks_val_t) { .type = KS_NULL, .data = "" };
    if (type == 'i')
        return (ks_val_t) { .type = KS_INT, .i = s_get_int8 (res, row, col) };
    return (ks_val_t) { .type = type == 't' ? KS_TEXT : KS_BLOB, .data = PQgetvalue (res, row, col),
                        .len = (size_t) PQgetlength (res, row, col) };
}

//  ks_dialect_t.run.
static int
s_run_stmt (ks_store_t *self, const ks_stmt_t *st, const ks_val_t *params, size_t count, bool lock,
            ks_row_fn *row, void *arg)
{
    char sql [512];
    s_params_t p = { .count = 0 };
    if (count > S_MAX_PARAMS || s_sql (self, st, lock, sql, sizeof sql) != 0)
        return -1;
    for (size_t i = 0; i < count; i++)
        if (params [i].type == KS_INT)
            s_int8 (&p, params [i].i);
        else
        if (params [i].type == KS_TEXT)
            s_text (&p, params [i].data);
        else
            s_bytea (&p, params [i].data, params [i].len);
    PGresult *res = s_run (self, sql, &p);
    if (!res)
        return -1;
    int ncols = st->cols ? (int) strlen (st->cols) : 0, rows = PQntuples (res);
    int rc = ncols ? rows : atoi (PQcmdTuples (res));
    for (int i = 0; ncols && row && i < rows && rc >= 0; i++) {
        ks_val_t cols [8];
        for (int c = 0; c < ncols && c < 8; c++)
            cols [c] = s_column (res, i, c, st->cols [c]);
        if (row (arg, cols) != 0)
            rc = -1;
    }
    PQclear (res);
    return rc;
}

//  ks_dialect_t.chain_lock: the chain's advisory lock for the transaction
//  (two writers of one chain, e.g. two cryptoserver-admin runs, take turns).
static int
s_chain_lock (ks_store_t *self, const char *broker)
{
    s_params_t p = { .count = 0 };
    s_text (&p, broker);
    PGresult *res = s_run (self, "SELECT pg_advisory_xact_lock (hashtext ('cs-audit:' || $1))", &p);
    PQclear (res);
    return res ? 0 : -1;
}

static const ks_dialect_t s_dialect = {
    .run = s_run_stmt,
    .chain_lock = s_chain_lock,
};

//  Nothing like SQLite's data_version: "assume a change" (keystore.h).
static int
s_settle (ks_store_t *self)
{
    return 1;
}

static keystore_listener_t *
s_listen (ks_store_t *store)
{
    return ks_pg_listen (store->url, store->where);
}

const ks_backend_t ks_pg_backend = {
    .name = "postgresql",
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
    .listen = s_listen,
};
