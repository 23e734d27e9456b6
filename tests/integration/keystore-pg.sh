#!/bin/bash
# keystore-pg.sh — the keystore's unit tests (tests/unit/test_keystore,
# test case "postgresql") against the PostgreSQL back end on a private
# cluster (cs_pg_start): the same assertions as for the SQLite file (round
# trips, master key check, moved and tampered rows refused by their MACs,
# PIN counters, locks and epochs, key versions, tenants), no plaintext
# window in any file of the cluster, schema_version, and change
# notifications (LISTEN/NOTIFY) of other processes' commits.
. "$(dirname "$0")/lib.sh"

trap cs_cleanup EXIT
rm -rf "$WORK"
mkdir -p "$WORK"
UNIT=$top_builddir/tests/unit/test_keystore
[ -x "$UNIT" ] || cs_fail "$UNIT is not built"
grep -q '^#define HAVE_LIBPQ 1' "$top_builddir/config.h" \
    || cs_missing_dependency "built without PostgreSQL support (libpq-dev; configure --with-postgresql)"
cs_pg_start keystore_unit
CK_RUN_CASE=postgresql CS_TEST_PG_URL=$CS_PG_URL CS_TEST_PG_DATA=$CS_PG_DATA \
    timeout $((600 * CS_TIME_FACTOR)) "$UNIT" > "$WORK/unit.log" 2>&1 || { cat "$WORK/unit.log"; cs_fail "test_keystore (postgresql) failed"; }
cat "$WORK/unit.log"
grep -q "100%: Checks: 20, Failures: 0, Errors: 0" "$WORK/unit.log" || cs_fail "not every PostgreSQL check ran"
cs_log "the keystore's PostgreSQL back end passes the keystore's tests"

# cryptoserver-admin init --keystore-url: a deployment whose keystore is the
# database (broker.conf keystore/url, no keystore.db), and the keystore
# verbs work on it.
cs_psql postgres -qc "CREATE DATABASE admin_init" || cs_fail "cannot create database admin_init"
URL=${CS_PG_URL/keystore_unit/admin_init}
"$CS_ADMIN" init "$WORK/dep" --keystore-url "$URL" --pin 1234 --so-pin 123456 > "$WORK/init.log" 2>&1 \
    || { cat "$WORK/init.log"; cs_fail "cryptoserver-admin init --keystore-url failed"; }
[ "$("$CS_ADMIN" config get "$WORK/dep/broker.conf" keystore/url)" = "$URL" ] || cs_fail "broker.conf has no keystore/url"
! "$CS_ADMIN" config get "$WORK/dep/broker.conf" keystore/path >/dev/null 2>&1 || cs_fail "broker.conf has a keystore/path"
[ ! -e "$WORK/dep/keystore.db" ] || cs_fail "init --keystore-url made keystore.db"
"$CS_ADMIN" tenant add second --pin 5678 --so-pin 567890 --dir "$WORK/dep" > "$WORK/init.log" 2>&1 \
    || { cat "$WORK/init.log"; cs_fail "tenant add on the database failed"; }
[ "$("$CS_ADMIN" tenant list --dir "$WORK/dep" | awk 'NR > 1 { print $1 }' | tr '\n' ' ')" = "demo second " ] \
    || cs_fail "tenant list: $("$CS_ADMIN" tenant list --dir "$WORK/dep" 2>&1)"
[ "$(cs_psql admin_init -tAc "SELECT string_agg (name, ' ' ORDER BY name) FROM tenants")" = "demo second" ] \
    || cs_fail "the tenants are not in the database"
! "$CS_ADMIN" init "$WORK/dep2" --keystore-url /not/a/url --pin 1234 --so-pin 123456 > "$WORK/init.log" 2>&1 \
    || cs_fail "init accepted a --keystore-url that is not a URL"
grep -q "must be a PostgreSQL URL" "$WORK/init.log" || { cat "$WORK/init.log"; cs_fail "no clear error for a bad --keystore-url"; }
cs_log "cryptoserver-admin init --keystore-url makes a deployment whose keystore is the database"
