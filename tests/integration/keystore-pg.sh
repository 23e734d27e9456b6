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
grep -q "100%: Checks: 13, Failures: 0, Errors: 0" "$WORK/unit.log" || cs_fail "not every PostgreSQL check ran"
cs_log "the keystore's PostgreSQL back end passes the keystore's tests"
