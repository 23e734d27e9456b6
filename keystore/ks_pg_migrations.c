/*  ks_pg_migrations.c — the PostgreSQL keystore's schema, as the migrations
 *  that made it (ks_pg.h; applied by ks_pg.c's s_migrate, recorded in table
 *  schema_version).  Append, never change one that was released.
 */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif
#include "ks_pg.h"

const ks_pg_migration_t ks_pg_migrations [] = {
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
    { 7, "data_key: the row, PIN and state keys' base, sealed under the master key (issue 22)",
      "SELECT 1" },                 //  a meta row, written by keystore.c
};

const size_t ks_pg_migrations_count = sizeof ks_pg_migrations / sizeof ks_pg_migrations [0];
