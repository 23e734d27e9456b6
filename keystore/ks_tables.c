/*  ks_tables.c — the keystore's tables described once (ks_sql.h): their
 *  columns as both back ends store them, and every statement the row layer
 *  (ks_rows.c) runs on them, written once for SQLite and PostgreSQL.  The
 *  tables are made by each back end's own schema text (ks_sqlite.c's
 *  s_schema, ks_pg.c's migrations), which these descriptions must match
 *  (test_keystore checks it on a new keystore of each).
 */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif
#include "ks_sql.h"

#define KEY   KS_COL_KEY
#define MACD  KS_COL_MACD
#define MAC   KS_COL_MAC

//  The MAC'd columns are those of cryptoserver-keystore(5) "Keystore rows"
//  (row_mac.h); keys_version is outside the MAC.  PostgreSQL's keys and
//  objects also have `seq` (identity: the order rows were stored, which
//  SQLite's rowid gives).
const ks_table_t ks_tables [] = {
    { "meta", { { "name", 't', KEY }, { "value", 'b', 0 } } },
    { "tenants", { { "name", 't', KEY | MACD }, { "user_pin", 't', MACD }, { "so_pin", 't', MACD },
                   { "user_failures", 'i', MACD }, { "so_failures", 'i', MACD },
                   { "keys_version", 'i', 0 }, { "user_epoch", 'i', MACD },
                   { "so_epoch", 'i', MACD }, { "mac", 'b', MAC } } },
    { "keys", { { "tenant", 't', KEY | MACD }, { "ref", 't', KEY | MACD }, { "info", 'b', MACD },
                { "private", 'b', MACD }, { "mac", 'b', MAC } } },
    { "objects", { { "tenant", 't', KEY | MACD }, { "ref", 't', KEY | MACD }, { "info", 'b', MACD },
                   { "private", 'b', MACD }, { "mac", 'b', MAC } } },
    { "idempotency", { { "tenant", 't', KEY | MACD }, { "id", 'b', KEY | MACD }, { "result", 'b', MACD },
                       { "created", 'i', MACD }, { "mac", 'b', MAC } } },
    { "issued", { { "fingerprint", 'b', KEY | MACD }, { "tenant", 't', MACD }, { "created", 'i', MACD },
                  { "mac", 'b', MAC } } },
    //  Hash-chained, not row-MAC'd (keystore_audit.h): sig signs checkpoints.
    { "audit", { { "broker", 't', KEY }, { "seq", 'i', KEY }, { "record", 't', 0 }, { "prev", 'b', 0 },
                 { "hash", 'b', 0 }, { "sig", 'b', 0 } } },
    { NULL, { { NULL, 0, 0 } } },
};

#define KEY_COLS    "SELECT ref, info, private, mac FROM "

const ks_stmt_t ks_stmts [KS_Q_COUNT] = {
    /* ---- meta ---- */
    //  In a write transaction PostgreSQL keeps the row locked until its
    //  end: the state record (ks_state.c) is read, raised and written by
    //  one broker at a time.
    [KS_Q_META_GET] = { "SELECT value FROM meta WHERE name = ?1", .cols = "b", .what = "read meta",
                        .lock = KS_LOCK_IN_WRITE },
    [KS_Q_META_PUT] = { "INSERT INTO meta (name, value) VALUES (?1, ?2) "
                        "ON CONFLICT (name) DO UPDATE SET value = excluded.value" },

    /* ---- tenants ---- */
    [KS_Q_TENANT_READ] = { "SELECT user_pin, so_pin, user_failures, so_failures, user_epoch, so_epoch, "
                           "mac, keys_version FROM tenants WHERE name = ?1",
                           .cols = "ttiiiibi", .what = "read tenant", .hot = 1, .lock = KS_LOCK_ASKED },
    [KS_Q_TENANT_INSERT] = { "INSERT INTO tenants (name, user_pin, so_pin, keys_version, user_epoch, "
                             "so_epoch, mac) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)" },
    [KS_Q_TENANT_UPDATE] = { "UPDATE tenants SET user_pin = ?2, so_pin = ?3, user_failures = ?4, "
                             "so_failures = ?5, user_epoch = ?6, so_epoch = ?7, mac = ?8 WHERE name = ?1" },
    [KS_Q_TENANT_DELETE] = { "DELETE FROM tenants WHERE name = ?1" },
    [KS_Q_TENANT_EXISTS] = { "SELECT 1 FROM tenants WHERE name = ?1", .cols = "i", .hot = 4 },
    //  Byte order in both (SQLite's BINARY collation is PostgreSQL's "C").
    [KS_Q_TENANT_LIST] = { "SELECT name FROM tenants ORDER BY name",
                           .pg = "SELECT name FROM tenants ORDER BY name COLLATE \"C\"", .cols = "t" },
    [KS_Q_KEYS_VERSION_GET] = { "SELECT keys_version FROM tenants WHERE name = ?1", .cols = "i", .hot = 3 },
    [KS_Q_KEYS_VERSION_SET] = { "UPDATE tenants SET keys_version = ?2 WHERE name = ?1" },

    /* ---- keys ---- */
    [KS_Q_KEY_READ] = { KEY_COLS "keys WHERE tenant = ?1 AND ref = ?2", .cols = "tbbb", .what = "read key",
                        .hot = 2, .lock = KS_LOCK_ASKED },
    [KS_Q_KEY_INSERT] = { "INSERT INTO keys (tenant, ref, info, private, mac) VALUES (?1, ?2, ?3, ?4, ?5)" },
    [KS_Q_KEY_UPDATE] = { "UPDATE keys SET info = ?3, mac = ?4 WHERE tenant = ?1 AND ref = ?2" },
    [KS_Q_KEY_RESEAL] = { "UPDATE keys SET private = ?3, mac = ?4 WHERE tenant = ?1 AND ref = ?2" },
    [KS_Q_KEY_DELETE] = { "DELETE FROM keys WHERE tenant = ?1 AND ref = ?2" },
    [KS_Q_KEY_LIST] = { KEY_COLS "keys WHERE tenant = ?1 ORDER BY rowid",
                        .pg = KEY_COLS "keys WHERE tenant = ?1 ORDER BY seq", .cols = "tbbb",
                        .what = "list keys" },
    //  Keyset pagination over the primary key (tenant, ref): one index
    //  range scan of `limit` rows whatever the page's place (issue #25).
    [KS_Q_KEY_PAGE] = { KEY_COLS "keys WHERE tenant = ?1 AND ref > ?2 ORDER BY ref LIMIT ?3", .cols = "tbbb",
                        .what = "list a page of keys" },

    /* ---- objects ---- */
    //  In a write transaction the row stays locked: the row digest
    //  (ks_state.c) takes out the MAC that is replaced, not a stale one.
    [KS_Q_OBJECT_READ] = { KEY_COLS "objects WHERE tenant = ?1 AND ref = ?2", .cols = "tbbb",
                           .what = "read object", .lock = KS_LOCK_IN_WRITE },
    [KS_Q_OBJECT_PUT] = { "INSERT INTO objects (tenant, ref, info, private, mac) VALUES (?1, ?2, ?3, ?4, ?5) "
                          "ON CONFLICT (tenant, ref) DO UPDATE SET info = excluded.info, "
                          "private = excluded.private, mac = excluded.mac" },
    [KS_Q_OBJECT_DELETE] = { "DELETE FROM objects WHERE tenant = ?1 AND ref = ?2" },
    [KS_Q_OBJECT_LIST] = { KEY_COLS "objects WHERE tenant = ?1 ORDER BY rowid",
                           .pg = KEY_COLS "objects WHERE tenant = ?1 ORDER BY seq", .cols = "tbbb",
                           .what = "list objects" },

    /* ---- idempotency ---- */
    [KS_Q_IDEM_READ] = { "SELECT result, created, mac FROM idempotency WHERE tenant = ?1 AND id = ?2",
                         .cols = "bib", .what = "read idempotency" },
    //  A transaction of another broker that recorded the same id first
    //  makes PostgreSQL's insert wait for its commit, then change nothing
    //  (0), with no error to log.
    [KS_Q_IDEM_INSERT] = { "INSERT INTO idempotency (tenant, id, result, created, mac) "
                           "VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT DO NOTHING",
                           .sqlite = "INSERT OR IGNORE INTO idempotency (tenant, id, result, created, mac) "
                                     "VALUES (?1, ?2, ?3, ?4, ?5)" },
    [KS_Q_IDEM_EXPIRE] = { "DELETE FROM idempotency WHERE created < ?1" },

    /* ---- issued ---- */
    [KS_Q_ISSUED_INSERT] = { "INSERT INTO issued (fingerprint, tenant, created, mac) "
                             "VALUES (?1, ?2, ?3, ?4) ON CONFLICT DO NOTHING",
                             .sqlite = "INSERT OR IGNORE INTO issued (fingerprint, tenant, created, mac) "
                                       "VALUES (?1, ?2, ?3, ?4)" },
    [KS_Q_ISSUED_READ] = { "SELECT tenant, created, mac FROM issued WHERE fingerprint = ?1", .cols = "tib",
                           .what = "read issued" },
    [KS_Q_ISSUED_MACS] = { "SELECT mac, fingerprint FROM issued", .cols = "bb" },

    /* ---- audit ---- */
    [KS_Q_AUDIT_HEAD] = { "SELECT seq, hash FROM audit WHERE broker = ?1 ORDER BY seq DESC LIMIT 1",
                          .cols = "ib", .what = "read audit" },
    [KS_Q_AUDIT_INSERT] = { "INSERT INTO audit (broker, seq, record, prev, hash, sig) "
                            "VALUES (?1, ?2, ?3, ?4, ?5, ?6)" },
    [KS_Q_AUDIT_LIST] = { "SELECT broker, seq, record, prev, hash, sig FROM audit ORDER BY broker, seq",
                          .cols = "titbbb", .what = "read audit" },
    [KS_Q_AUDIT_SIGS] = { "SELECT sig FROM audit WHERE sig IS NOT NULL", .cols = "b" },
};
