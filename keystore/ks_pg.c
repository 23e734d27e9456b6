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
 *  notifications is in ks_pg_listen.c.
 */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <czmq.h>
#include <libpq-fe.h>
#include <openssl/rand.h>
#include "keystore.h"
#include "ks_backend.h"
#include "ks_pg.h"
#include "cs_util.h"

#define S_CONNECT_TIMEOUT "5"           /* seconds, unless the URL says otherwise */
#define S_LOCK_ID         "7161829137213491"   /* pg_advisory_xact_lock of migrations */
#define S_MAX_PARAMS      8
#define S_OID_INT8        20
#define S_OID_TEXT        25
#define S_OID_BYTEA       17

struct _ks_store_t {
    PGconn *conn;
    char *url;
    char *where;                /* url without its password */
    bool in_tx;                 /* inside BEGIN .. COMMIT/ROLLBACK */
    bool snapshot;              /* ... a read-only one (s_snapshot): no FOR UPDATE */
    bool lost;                  /* the last connection attempt failed */
};

/*  The migrations: each brings the database from the version before it to
 *  its own; their versions are the keystore's schema versions (2 is the
 *  schema of the SQLite file's version 2: the first one here).  Append,
 *  never change one that was released.  */
typedef struct {
    int version;
    const char *description;
    const char *sql;
} s_migration_t;

static const s_migration_t s_migrations [] = {
    { 2, "meta, tenants, keys with row MACs; version counter; change notifications",
      "CREATE TABLE meta (name text PRIMARY KEY, value bytea NOT NULL);"
      "CREATE SEQUENCE version_seq;"
      "CREATE TABLE tenants ("
      "  name text PRIMARY KEY,"
      "  user_pin text NOT NULL, so_pin text NOT NULL,"
      "  user_failures bigint NOT NULL DEFAULT 0,"
      "  so_failures bigint NOT NULL DEFAULT 0,"
      "  keys_version bigint NOT NULL,"
      "  user_epoch bigint NOT NULL DEFAULT 0,"
      "  so_epoch bigint NOT NULL DEFAULT 0,"
      "  mac bytea);"
      "CREATE TABLE keys ("
      "  tenant text NOT NULL REFERENCES tenants (name) ON DELETE CASCADE,"
      "  ref text NOT NULL,"
      "  info bytea NOT NULL,"
      "  private bytea,"
      "  mac bytea,"
      "  seq bigint GENERATED ALWAYS AS IDENTITY,"
      "  PRIMARY KEY (tenant, ref));"
      "CREATE FUNCTION cryptoserver_keystore_notify () RETURNS trigger LANGUAGE plpgsql AS $$"
      " BEGIN"
      "  PERFORM pg_notify ('" KS_PG_CHANNEL "', coalesce (current_setting ('cryptoserver.origin', true), ''));"
      "  RETURN NULL;"
      " END $$;"
      "CREATE TRIGGER tenants_notify AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON tenants"
      "  FOR EACH STATEMENT EXECUTE FUNCTION cryptoserver_keystore_notify ();"
      "CREATE TRIGGER keys_notify AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON keys"
      "  FOR EACH STATEMENT EXECUTE FUNCTION cryptoserver_keystore_notify ();" },
    { 3, "idempotency: results of key-management jobs by their ids",
      "CREATE TABLE idempotency ("
      "  tenant text NOT NULL REFERENCES tenants (name) ON DELETE CASCADE,"
      "  id bytea NOT NULL,"
      "  result bytea NOT NULL,"
      "  created bigint NOT NULL,"
      "  mac bytea,"
      "  PRIMARY KEY (tenant, id));"
      "CREATE INDEX idempotency_created ON idempotency (created);" },
    { 4, "objects: certificates and data objects (issue #10)",
      "CREATE TABLE objects ("
      "  tenant text NOT NULL REFERENCES tenants (name) ON DELETE CASCADE,"
      "  ref text NOT NULL,"
      "  info bytea NOT NULL,"
      "  private bytea,"
      "  mac bytea,"
      "  seq bigint GENERATED ALWAYS AS IDENTITY,"
      "  PRIMARY KEY (tenant, ref));"
      "CREATE TRIGGER objects_notify AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON objects"
      "  FOR EACH STATEMENT EXECUTE FUNCTION cryptoserver_keystore_notify ();" },
    { 5, "issued: fingerprints of pool keys handed out; the authenticated state record (issue 19)",
      "CREATE TABLE issued ("
      "  fingerprint bytea PRIMARY KEY,"
      "  tenant text NOT NULL,"
      "  created bigint NOT NULL,"
      "  mac bytea);" },
    { 6, "audit: each broker's hash-chained audit records (issue 22)",
      "CREATE TABLE audit ("
      "  broker text NOT NULL,"
      "  seq bigint NOT NULL,"
      "  record text NOT NULL,"
      "  prev bytea NOT NULL,"
      "  hash bytea NOT NULL,"
      "  sig bytea,"
      "  PRIMARY KEY (broker, seq));" },
};
#define S_MIGRATIONS (sizeof s_migrations / sizeof s_migrations [0])

/* ---- the origin of this process's writes --------------------------------- */

static char s_origin [48];
static pid_t s_origin_pid;                      /* the process s_origin was made for */
static pthread_mutex_t s_origin_lock = PTHREAD_MUTEX_INITIALIZER;

const char *
ks_pg_origin (void)
{
    pthread_mutex_lock (&s_origin_lock);
    if (s_origin_pid != getpid ()) {
        uint8_t random [8] = { 0 };
        char hex [17];
        if (RAND_bytes (random, sizeof random) != 1)
            memcpy (random, &(int64_t) { zclock_time () }, 8);
        cs_hex_encode (random, sizeof random, hex);
        s_origin_pid = getpid ();
        snprintf (s_origin, sizeof s_origin, "%d-%s", (int) s_origin_pid, hex);
    }
    pthread_mutex_unlock (&s_origin_lock);
    return s_origin;
}

/* ---- connections --------------------------------------------------------- */

const char *
ks_pg_message (PGconn *conn)
{
    const char *message = conn ? PQerrorMessage (conn) : NULL;
    return message && *message ? message : "failed";
}

//  Drops notices (CREATE ... IF NOT EXISTS and the like): nothing to log.
static void
s_notice (void *arg, const char *message)
{
}

PGconn *
ks_pg_connect (const char *url, const char *where)
{
    const char *keys [] = { "connect_timeout", "application_name", "dbname", NULL };
    const char *values [] = { S_CONNECT_TIMEOUT, "cryptoserver", url, NULL };
    PGconn *conn = PQconnectdbParams (keys, values, 1);
    if (!conn || PQstatus (conn) != CONNECTION_OK) {
        zsys_error ("keystore %s: database unreachable: %.*s", where, KS_PG_MSG (conn));
        PQfinish (conn);
        return NULL;
    }
    PQsetNoticeProcessor (conn, s_notice, NULL);
    char sql [128];
    snprintf (sql, sizeof sql, "SET cryptoserver.origin = '%s'", ks_pg_origin ());
    PGresult *res = PQexec (conn, sql);
    bool ok = PQresultStatus (res) == PGRES_COMMAND_OK;
    PQclear (res);
    if (!ok) {
        zsys_error ("keystore %s: %.*s", where, KS_PG_MSG (conn));
        PQfinish (conn);
        return NULL;
    }
    return conn;
}

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

//  Column col as a malloc'd copy (*len_p bytes), NULL for SQL NULL; *ok
//  turns false when out of memory.
static uint8_t *
s_get_blob (PGresult *res, int row, int col, size_t *len_p, bool *ok)
{
    *len_p = 0;
    if (PQgetisnull (res, row, col))
        return NULL;
    *len_p = (size_t) PQgetlength (res, row, col);
    uint8_t *copy = ks_dup (PQgetvalue (res, row, col), *len_p);
    if (!copy)
        *ok = false;
    return copy;
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
    for (size_t i = 0; i < S_MIGRATIONS; i++) {
        if (s_migrations [i].version <= version)
            continue;
        s_params_t p = { .count = 0 };
        s_int8 (&p, s_migrations [i].version);
        s_text (&p, s_migrations [i].description);
        if (s_script (self, s_migrations [i].sql) != 0 || s_run_changes (self, "INSERT INTO schema_version (version, description) "
                                         "VALUES ($1::bigint::integer, $2)", &p) != 1)
            return -1;
        zsys_info ("keystore %s: schema migrated to version %d (%s)", self->where,
                   s_migrations [i].version, s_migrations [i].description);
        if (version > 0)
            *found_p = s_migrations [i].version;
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

/* ---- meta rows, counter -------------------------------------------------- */

static int
s_meta_get (ks_store_t *self, const char *name, uint8_t **value_p, size_t *len_p)
{
    s_params_t p = { .count = 0 };
    s_text (&p, name);
    //  In a write transaction the row stays locked until its end: the
    //  state record (ks_state.c) is read, raised and written by one
    //  broker at a time.
    PGresult *res = s_run (self, self->in_tx && !self->snapshot ? "SELECT value FROM meta WHERE name = $1 FOR UPDATE"
                                             : "SELECT value FROM meta WHERE name = $1", &p);
    bool ok = true;
    int rc = !res ? -1 : PQntuples (res) == 0 ? 0 : 1;
    if (rc == 1) {
        *value_p = s_get_blob (res, 0, 0, len_p, &ok);
        rc = ok && *value_p ? 1 : -1;
    }
    PQclear (res);
    return rc;
}

static int
s_meta_put (ks_store_t *self, const char *name, const void *value, size_t len)
{
    s_params_t p = { .count = 0 };
    s_text (&p, name);
    s_bytea (&p, value, len);
    return s_run_changes (self, "INSERT INTO meta (name, value) VALUES ($1, $2) "
                                "ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value", &p) == 1 ? 0 : -1;
}

static int
s_counter_next (ks_store_t *self, uint64_t *value_p)
{
    PGresult *res = s_run (self, "SELECT nextval ('version_seq')", NULL);
    *value_p = res && PQntuples (res) == 1 ? (uint64_t) s_get_int8 (res, 0, 0) : 0;
    PQclear (res);
    return *value_p ? 0 : -1;
}

/* ---- tenant rows ---------------------------------------------------------- */

static int
s_tenant_read (ks_store_t *self, const char *name, bool lock, ks_tenant_rec_t *rec)
{
    s_params_t p = { .count = 0 };
    s_text (&p, name);
    memset (rec, 0, sizeof *rec);
    PGresult *res = s_run (self, lock
        ? "SELECT user_pin, so_pin, user_failures, so_failures, user_epoch, so_epoch, mac, keys_version "
          "FROM tenants WHERE name = $1 FOR UPDATE"
        : "SELECT user_pin, so_pin, user_failures, so_failures, user_epoch, so_epoch, mac, keys_version "
          "FROM tenants WHERE name = $1", &p);
    if (!res)
        return -1;
    int rc = PQntuples (res) == 0 ? 0 : 1;
    if (rc == 1) {
        bool ok = true;
        for (int i = 0; i < 2; i++) {
            rec->row.pin [i] = strdup (PQgetvalue (res, 0, i));
            ok = ok && rec->row.pin [i];
            rec->row.failures [i] = s_get_int8 (res, 0, 2 + i);
            rec->row.epoch [i] = s_get_int8 (res, 0, 4 + i);
        }
        rec->mac = s_get_blob (res, 0, 6, &rec->mac_len, &ok);
        rec->keys_version = (uint64_t) s_get_int8 (res, 0, 7);
        if (!ok) {
            ks_tenant_rec_free (rec);
            rc = -1;
        }
    }
    PQclear (res);
    return rc;
}

static int
s_tenant_insert (ks_store_t *self, const char *name, const ks_tenant_rec_t *rec)
{
    s_params_t p = { .count = 0 };
    s_text (&p, name);
    s_text (&p, rec->row.pin [0]);
    s_text (&p, rec->row.pin [1]);
    s_int8 (&p, (int64_t) rec->keys_version);
    s_int8 (&p, rec->row.epoch [0]);
    s_int8 (&p, rec->row.epoch [1]);
    s_bytea (&p, rec->mac, rec->mac_len);
    return s_run_changes (self, "INSERT INTO tenants (name, user_pin, so_pin, keys_version, user_epoch, "
                                "so_epoch, mac) VALUES ($1, $2, $3, $4, $5, $6, $7)", &p) == 1 ? 0 : -1;
}

static int
s_tenant_update (ks_store_t *self, const char *name, const row_mac_tenant_t *row,
                 const uint8_t mac [ROW_MAC_LEN])
{
    s_params_t p = { .count = 0 };
    s_text (&p, name);
    s_text (&p, row->pin [0]);
    s_text (&p, row->pin [1]);
    s_int8 (&p, row->failures [0]);
    s_int8 (&p, row->failures [1]);
    s_int8 (&p, row->epoch [0]);
    s_int8 (&p, row->epoch [1]);
    s_bytea (&p, mac, ROW_MAC_LEN);
    return s_run_changes (self, "UPDATE tenants SET user_pin = $2, so_pin = $3, user_failures = $4, "
                                "so_failures = $5, user_epoch = $6, so_epoch = $7, mac = $8 "
                                "WHERE name = $1", &p);
}

static int
s_tenant_delete (ks_store_t *self, const char *name)
{
    s_params_t p = { .count = 0 };
    s_text (&p, name);
    int changed = s_run_changes (self, "DELETE FROM tenants WHERE name = $1", &p);
    return changed < 0 ? -1 : changed > 0 ? 1 : 0;
}

static int
s_tenant_exists (ks_store_t *self, const char *name)
{
    s_params_t p = { .count = 0 };
    s_text (&p, name);
    PGresult *res = s_run (self, "SELECT 1 FROM tenants WHERE name = $1", &p);
    int rc = !res ? -1 : PQntuples (res) > 0 ? 1 : 0;
    PQclear (res);
    return rc;
}

static char **
s_tenant_list (ks_store_t *self)
{
    PGresult *res = s_run (self, "SELECT name FROM tenants ORDER BY name COLLATE \"C\"", NULL);
    int n = res ? PQntuples (res) : 0;
    char **names = res ? calloc ((size_t) n + 1, sizeof *names) : NULL;
    for (int i = 0; names && i < n; i++)
        if (!(names [i] = strdup (PQgetvalue (res, i, 0)))) {
            for (int j = 0; j < i; j++)
                free (names [j]);
            free (names);
            names = NULL;
        }
    PQclear (res);
    return names;
}

static int
s_keys_version_get (ks_store_t *self, const char *tenant, uint64_t *version_p)
{
    s_params_t p = { .count = 0 };
    s_text (&p, tenant);
    PGresult *res = s_run (self, "SELECT keys_version FROM tenants WHERE name = $1", &p);
    int rc = !res ? -1 : PQntuples (res) > 0 ? 1 : 0;
    if (rc == 1)
        *version_p = (uint64_t) s_get_int8 (res, 0, 0);
    PQclear (res);
    return rc;
}

static int
s_keys_version_set (ks_store_t *self, const char *tenant, uint64_t version)
{
    s_params_t p = { .count = 0 };
    s_text (&p, tenant);
    s_int8 (&p, (int64_t) version);
    return s_run_changes (self, "UPDATE tenants SET keys_version = $2 WHERE name = $1", &p);
}

/* ---- key rows ---------------------------------------------------------------- */

//  Row `row` of res (ref, info, private, mac) into *rec: 1, or -1 when out of memory.
static int
s_key_columns (PGresult *res, int row, ks_key_rec_t *rec)
{
    bool ok = true;
    memset (rec, 0, sizeof *rec);
    rec->ref = strdup (PQgetvalue (res, row, 0));
    rec->info = s_get_blob (res, row, 1, &rec->info_len, &ok);
    rec->private = s_get_blob (res, row, 2, &rec->private_len, &ok);
    rec->mac = s_get_blob (res, row, 3, &rec->mac_len, &ok);
    if (ok && rec->ref && rec->info)
        return 1;
    ks_key_rec_free (rec);
    return -1;
}

static int
s_key_read (ks_store_t *self, const char *tenant, const char *ref, bool lock, ks_key_rec_t *rec)
{
    s_params_t p = { .count = 0 };
    s_text (&p, tenant);
    s_text (&p, ref);
    memset (rec, 0, sizeof *rec);
    PGresult *res = s_run (self, lock
        ? "SELECT ref, info, private, mac FROM keys WHERE tenant = $1 AND ref = $2 FOR UPDATE"
        : "SELECT ref, info, private, mac FROM keys WHERE tenant = $1 AND ref = $2", &p);
    int rc = !res ? -1 : PQntuples (res) == 0 ? 0 : s_key_columns (res, 0, rec);
    PQclear (res);
    return rc;
}

static int
s_key_insert (ks_store_t *self, const char *tenant, const ks_key_rec_t *rec)
{
    s_params_t p = { .count = 0 };
    s_text (&p, tenant);
    s_text (&p, rec->ref);
    s_bytea (&p, rec->info, rec->info_len);
    s_bytea (&p, rec->private, rec->private_len);
    s_bytea (&p, rec->mac, rec->mac_len);
    return s_run_changes (self, "INSERT INTO keys (tenant, ref, info, private, mac) "
                                "VALUES ($1, $2, $3, $4, $5)", &p) == 1 ? 0 : -1;
}

static int
s_key_update (ks_store_t *self, const char *tenant, const char *ref, const uint8_t *info,
              size_t info_len, const uint8_t mac [ROW_MAC_LEN])
{
    s_params_t p = { .count = 0 };
    s_text (&p, tenant);
    s_text (&p, ref);
    s_bytea (&p, info, info_len);
    s_bytea (&p, mac, ROW_MAC_LEN);
    return s_run_changes (self, "UPDATE keys SET info = $3, mac = $4 WHERE tenant = $1 AND ref = $2", &p);
}

/*  Deletes row (tenant, ref) of `table` (keys or objects): 1, 0 when there
 *  is none, -1 on failure.  */
static int
s_row_delete (ks_store_t *self, const char *table, const char *tenant, const char *ref)
{
    char sql [64];
    s_params_t p = { .count = 0 };
    s_text (&p, tenant);
    s_text (&p, ref);
    snprintf (sql, sizeof sql, "DELETE FROM %s WHERE tenant = $1 AND ref = $2", table);
    int changed = s_run_changes (self, sql, &p);
    return changed < 0 ? -1 : changed > 0 ? 1 : 0;
}

static int
s_key_delete (ks_store_t *self, const char *tenant, const char *ref)
{
    return s_row_delete (self, "keys", tenant, ref);
}

static int
s_idem_read (ks_store_t *self, const char *tenant, const uint8_t *id, size_t id_len, ks_idem_rec_t *rec)
{
    s_params_t p = { .count = 0 };
    s_text (&p, tenant);
    s_bytea (&p, id, id_len);
    memset (rec, 0, sizeof *rec);
    PGresult *res = s_run (self, "SELECT result, created, mac FROM idempotency "
                                 "WHERE tenant = $1 AND id = $2", &p);
    int rc = !res ? -1 : PQntuples (res) == 0 ? 0 : 1;
    bool ok = true;
    if (rc == 1) {
        rec->result = s_get_blob (res, 0, 0, &rec->result_len, &ok);
        rec->created = s_get_int8 (res, 0, 1);
        rec->mac = s_get_blob (res, 0, 2, &rec->mac_len, &ok);
        if (!ok || !rec->result) {
            ks_idem_rec_free (rec);
            rc = -1;
        }
    }
    PQclear (res);
    return rc;
}

//  ON CONFLICT DO NOTHING: a transaction of another broker that recorded
//  the same id first makes this insert wait for its commit, then change
//  nothing (0), with no error to log.
static int
s_idem_insert (ks_store_t *self, const char *tenant, const uint8_t *id, size_t id_len,
               const ks_idem_rec_t *rec)
{
    s_params_t p = { .count = 0 };
    s_text (&p, tenant);
    s_bytea (&p, id, id_len);
    s_bytea (&p, rec->result, rec->result_len);
    s_int8 (&p, rec->created);
    s_bytea (&p, rec->mac, rec->mac_len);
    int changed = s_run_changes (self, "INSERT INTO idempotency (tenant, id, result, created, mac) "
                                       "VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING", &p);
    return changed < 0 ? -1 : changed > 0 ? 1 : 0;
}

static int
s_issued_insert (ks_store_t *self, const uint8_t fingerprint [32], const char *tenant,
                 int64_t created, const uint8_t mac [ROW_MAC_LEN])
{
    s_params_t p = { .count = 0 };
    s_bytea (&p, fingerprint, 32);
    s_text (&p, tenant);
    s_int8 (&p, created);
    s_bytea (&p, mac, ROW_MAC_LEN);
    int changed = s_run_changes (self, "INSERT INTO issued (fingerprint, tenant, created, mac) "
                                       "VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING", &p);
    return changed < 0 ? -1 : changed > 0 ? 1 : 0;
}

static int
s_issued_read (ks_store_t *self, const uint8_t fingerprint [32], char **tenant_p,
               int64_t *created_p, uint8_t **mac_p, size_t *mac_len_p)
{
    s_params_t p = { .count = 0 };
    s_bytea (&p, fingerprint, 32);
    PGresult *res = s_run (self, "SELECT tenant, created, mac FROM issued WHERE fingerprint = $1", &p);
    int rc = !res ? -1 : PQntuples (res) == 0 ? 0 : 1;
    bool ok = true;
    if (rc == 1) {
        *tenant_p = strndup (PQgetvalue (res, 0, 0), (size_t) PQgetlength (res, 0, 0));
        *created_p = s_get_int8 (res, 0, 1);
        *mac_p = s_get_blob (res, 0, 2, mac_len_p, &ok);
        rc = ok && *tenant_p ? 1 : -1;
    }
    PQclear (res);
    return rc;
}

/* ---- audit chains (schema 6) ------------------------------------------- */

//  Takes the chain's advisory lock for the transaction (two writers of one
//  chain, e.g. two cryptoserver-admin runs, take turns), then reads its head.
static int
s_audit_head (ks_store_t *self, const char *broker, int64_t *seq_p, uint8_t hash [KEYSTORE_AUDIT_HASH_LEN])
{
    s_params_t p = { .count = 0 };
    s_text (&p, broker);
    PGresult *res = s_run (self, "SELECT pg_advisory_xact_lock (hashtext ('cs-audit:' || $1))", &p);
    PQclear (res);
    res = res ? s_run (self, "SELECT seq, hash FROM audit WHERE broker = $1 ORDER BY seq DESC LIMIT 1", &p) : NULL;
    int rc = !res ? -1 : PQntuples (res) == 0 ? 0 : 1;
    if (rc == 1) {
        *seq_p = s_get_int8 (res, 0, 0);
        memset (hash, 0, KEYSTORE_AUDIT_HASH_LEN);
        if (PQgetlength (res, 0, 1) == KEYSTORE_AUDIT_HASH_LEN)
            memcpy (hash, PQgetvalue (res, 0, 1), KEYSTORE_AUDIT_HASH_LEN);
    }
    PQclear (res);
    return rc;
}

static int
s_audit_insert (ks_store_t *self, const keystore_audit_row_t *row)
{
    s_params_t p = { .count = 0 };
    s_text (&p, row->broker);
    s_int8 (&p, row->seq);
    s_text (&p, row->record);
    s_bytea (&p, row->prev, KEYSTORE_AUDIT_HASH_LEN);
    s_bytea (&p, row->hash, KEYSTORE_AUDIT_HASH_LEN);
    s_bytea (&p, row->sig, row->sig ? row->sig_len : 0);
    return s_run_changes (self, "INSERT INTO audit (broker, seq, record, prev, hash, sig) "
                                "VALUES ($1, $2, $3, $4, $5, $6)", &p) == 1 ? 0 : -1;
}

static int
s_audit_sigs (ks_store_t *self, uint8_t **sigs_p, size_t *count_p)
{
    PGresult *res = s_run (self, "SELECT sig FROM audit WHERE sig IS NOT NULL", NULL);
    if (!res)
        return -1;
    size_t count = (size_t) PQntuples (res);
    uint8_t *sigs = count ? calloc (count, KEYSTORE_AUDIT_SIG_LEN) : NULL;
    for (size_t i = 0; sigs && i < count; i++)
        if (PQgetlength (res, (int) i, 0) == KEYSTORE_AUDIT_SIG_LEN)
            memcpy (sigs + i * KEYSTORE_AUDIT_SIG_LEN, PQgetvalue (res, (int) i, 0), KEYSTORE_AUDIT_SIG_LEN);
    PQclear (res);
    if (count && !sigs)
        return -1;
    *sigs_p = sigs;
    *count_p = count;
    return 0;
}

//  Column col into a fixed buffer: *len_p its stored length.
static void
s_get_fixed (PGresult *res, int row, int col, uint8_t *out, size_t room, size_t *len_p)
{
    *len_p = (size_t) PQgetlength (res, row, col);
    memset (out, 0, room);
    memcpy (out, PQgetvalue (res, row, col), *len_p < room ? *len_p : room);
}

static int
s_audit_list (ks_store_t *self, keystore_audit_row_t **rows_p, size_t *count_p)
{
    PGresult *res = s_run (self, "SELECT broker, seq, record, prev, hash, sig FROM audit "
                                 "ORDER BY broker, seq", NULL);
    size_t room = 0;
    bool ok = res != NULL;
    for (int i = 0; ok && i < PQntuples (res); i++) {
        keystore_audit_row_t *row = ks_audit_row_add (rows_p, count_p, &room);
        ok = row && (row->broker = strndup (PQgetvalue (res, i, 0), (size_t) PQgetlength (res, i, 0)))
                 && (row->record = strndup (PQgetvalue (res, i, 2), (size_t) PQgetlength (res, i, 2)));
        if (!ok)
            break;
        row->seq = s_get_int8 (res, i, 1);
        s_get_fixed (res, i, 3, row->prev, sizeof row->prev, &row->prev_len);
        s_get_fixed (res, i, 4, row->hash, sizeof row->hash, &row->hash_len);
        row->sig = s_get_blob (res, i, 5, &row->sig_len, &ok);
    }
    PQclear (res);
    return ok ? 0 : -1;
}

static int
s_issued_macs (ks_store_t *self, uint8_t **macs_p, uint8_t **fps_p, size_t *count_p)
{
    PGresult *res = s_run (self, "SELECT mac, fingerprint FROM issued", NULL);
    if (!res)
        return -1;
    size_t count = (size_t) PQntuples (res);
    uint8_t *macs = count ? calloc (count, ROW_MAC_LEN) : NULL, *fps = count ? calloc (count, 32) : NULL;
    for (size_t i = 0; macs && fps && i < count; i++) {
        if (PQgetlength (res, (int) i, 0) == ROW_MAC_LEN)
            memcpy (macs + i * ROW_MAC_LEN, PQgetvalue (res, (int) i, 0), ROW_MAC_LEN);
        if (PQgetlength (res, (int) i, 1) == 32)
            memcpy (fps + i * 32, PQgetvalue (res, (int) i, 1), 32);
    }
    PQclear (res);
    if (count && (!macs || !fps)) {
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

static int
s_idem_expire (ks_store_t *self, int64_t before)
{
    s_params_t p = { .count = 0 };
    s_int8 (&p, before);
    return s_run_changes (self, "DELETE FROM idempotency WHERE created < $1", &p);
}

/*  The rows that sql selects with parameters p, as key_list returns them.  */
static int
s_rows_read (ks_store_t *self, const char *sql, const s_params_t *p, ks_key_rec_t **recs_p, size_t *count_p)
{
    PGresult *res = s_run (self, sql, p);
    if (!res)
        return -1;
    int n = PQntuples (res);
    ks_key_rec_t *recs = calloc ((size_t) n + 1, sizeof *recs);
    int i = 0;
    while (recs && i < n && s_key_columns (res, i, &recs [i]) == 1)
        i++;
    PQclear (res);
    if (!recs || i < n) {
        for (int j = 0; recs && j < i; j++)
            ks_key_rec_free (&recs [j]);
        free (recs);
        return -1;
    }
    *recs_p = recs;
    *count_p = (size_t) n;
    return 0;
}

/*  The rows of `table` (keys or objects: the same columns) of the tenant
 *  in the order stored, as key_list returns them.  */
static int
s_rows_list (ks_store_t *self, const char *table, const char *tenant, ks_key_rec_t **recs_p, size_t *count_p)
{
    char sql [96];
    s_params_t p = { .count = 0 };
    s_text (&p, tenant);
    snprintf (sql, sizeof sql, "SELECT ref, info, private, mac FROM %s WHERE tenant = $1 ORDER BY seq", table);
    return s_rows_read (self, sql, &p, recs_p, count_p);
}

static int
s_key_list (ks_store_t *self, const char *tenant, ks_key_rec_t **recs_p, size_t *count_p)
{
    return s_rows_list (self, "keys", tenant, recs_p, count_p);
}

/*  Keyset pagination over the primary key (tenant, ref): one index range
 *  scan of `limit` rows whatever the page's place.  */
static int
s_key_page (ks_store_t *self, const char *tenant, const char *after, size_t limit,
            ks_key_rec_t **recs_p, size_t *count_p)
{
    s_params_t p = { .count = 0 };
    s_text (&p, tenant);
    s_text (&p, after);
    s_int8 (&p, limit > INT64_MAX ? INT64_MAX : (int64_t) limit);
    return s_rows_read (self, "SELECT ref, info, private, mac FROM keys WHERE tenant = $1 AND ref > $2 "
                              "ORDER BY ref LIMIT $3", &p, recs_p, count_p);
}

/* ---- object rows (schema 4) ------------------------------------------------- */

static int
s_object_read (ks_store_t *self, const char *tenant, const char *ref, ks_key_rec_t *rec)
{
    s_params_t p = { .count = 0 };
    s_text (&p, tenant);
    s_text (&p, ref);
    memset (rec, 0, sizeof *rec);
    //  In a write transaction the row stays locked: the row digest
    //  (ks_state.c) takes out the MAC that is replaced, not a stale one.
    PGresult *res = s_run (self, self->in_tx && !self->snapshot ? "SELECT ref, info, private, mac FROM objects WHERE tenant = $1 "
                                               "AND ref = $2 FOR UPDATE"
                                             : "SELECT ref, info, private, mac FROM objects WHERE tenant = $1 "
                                               "AND ref = $2", &p);
    int rc = !res ? -1 : PQntuples (res) == 0 ? 0 : s_key_columns (res, 0, rec);
    PQclear (res);
    return rc;
}

static int
s_object_put (ks_store_t *self, const char *tenant, const ks_key_rec_t *rec)
{
    s_params_t p = { .count = 0 };
    s_text (&p, tenant);
    s_text (&p, rec->ref);
    s_bytea (&p, rec->info, rec->info_len);
    s_bytea (&p, rec->private, rec->private_len);
    s_bytea (&p, rec->mac, rec->mac_len);
    return s_run_changes (self, "INSERT INTO objects (tenant, ref, info, private, mac) "
                                "VALUES ($1, $2, $3, $4, $5) ON CONFLICT (tenant, ref) DO UPDATE "
                                "SET info = EXCLUDED.info, private = EXCLUDED.private, mac = EXCLUDED.mac",
                          &p) == 1 ? 0 : -1;
}

static int
s_object_delete (ks_store_t *self, const char *tenant, const char *ref)
{
    return s_row_delete (self, "objects", tenant, ref);
}

static int
s_object_list (ks_store_t *self, const char *tenant, ks_key_rec_t **recs_p, size_t *count_p)
{
    return s_rows_list (self, "objects", tenant, recs_p, count_p);
}

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
    .listen = s_listen,
};
