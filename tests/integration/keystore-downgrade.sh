#!/bin/bash
# keystore-downgrade.sh — issue 19 item 1: the schema of keystore.db is
# authenticated (cryptoserver-keystore(5) "Schema"); a writer of the file
# without the master key cannot make the broker "upgrade" forged rows.
#  1. the attack as reported: the MAC and epoch columns dropped with the
#     sqlite3 CLI, meta.schema set back to 1, an unkeyed PBKDF2 hash of a PIN
#     of the attacker's choice written: the broker does not start (E: line
#     naming the reason), cryptoserver-admin refuses, and so does the
#     operator's explicit `keystore upgrade`; the same with the state record
#     deleted as well, and with every later table dropped (the upgrade sees
#     the keystore's counter file);
#  2. the operator puts the backup back (no upgrade run): the real PIN logs
#     in, the forged one is CKR_PIN_INCORRECT;
#  3. a genuine schema 1 keystore (tests/unit/keystore-v1.sql) is refused as
#     it is and opens after `cryptoserver-admin keystore upgrade DIR` (logged).
. "$(dirname "$0")/lib.sh"

cs_setup
cs_require sqlite3
T=$WORK/tmp
mkdir -p "$T"
DB=$WORK/keystore.db
sql () { sqlite3 -cmd ".timeout 5000" "$DB" "$@"; }
FORGED_PIN=5678     # keystore-v1.sql: bob's user PIN, an unkeyed PBKDF2 hash
FORGED_HASH='pbkdf2-sha256$100000$0d9fd968ed5a2ddcf787959d0bb221a6$4ef3f09a4c2194b788fd5a12102f277c48c09b05bf1a8d8cc61df4817288c587'
login () { $P11 --login --pin "$1" -O > "$T/login.log" 2>&1; }

# start_refused WHAT REGEX: the broker, started on the deployment, exits
# (bounded) with a failure status and an E: line matching REGEX.
start_refused () {
    local rc=0
    SOFTHSM2_CONF=$WORK/softhsm2.conf CRYPTOSERVER_DRIVER_DIR=$top_builddir/shim-drivers/.libs \
        timeout --kill-after=5 $((30 * CS_TIME_FACTOR)) "$CS_BROKER" -c "$WORK/broker.conf" -f \
        > "$T/start.log" 2>&1 || rc=$?
    [ "$rc" != 0 ] || { cat "$T/start.log"; cs_fail "$1: the broker started"; }
    [ "$rc" -lt 124 ] || { cat "$T/start.log"; cs_fail "$1: the broker hung or crashed (status $rc)"; }
    grep -Eq "$2" "$T/start.log" || { cat "$T/start.log"; cs_fail "$1: no E: line matching $2"; }
    cs_log "$1: the broker exits with status $rc: $(grep -E "$2" "$T/start.log" | head -n 1 | sed "s/^.*[0-9]:[0-9][0-9]:[0-9][0-9] //")"
}

# admin_refused WHAT REGEX COMMAND...: cryptoserver-admin fails, REGEX on stderr.
admin_refused () {
    local what=$1 regex=$2
    shift 2
    ! "$@" > "$T/admin.log" 2>&1 || { cat "$T/admin.log"; cs_fail "$what: cryptoserver-admin did it"; }
    grep -Eq "$regex" "$T/admin.log" || { cat "$T/admin.log"; cs_fail "$what: no line matching $regex"; }
    cs_log "$what: cryptoserver-admin refuses"
}

cs_start
login "$CRYPTOSERVER_PIN" || { cat "$T/login.log"; cs_fail "the real PIN does not log in"; }
cs_stop
cp "$DB" "$T/backup.db"

# ---- 1. the downgrade attack ------------------------------------------------------------
sql "ALTER TABLE tenants DROP COLUMN mac; ALTER TABLE tenants DROP COLUMN user_epoch;
     ALTER TABLE tenants DROP COLUMN so_epoch; ALTER TABLE keys DROP COLUMN mac;
     UPDATE meta SET value = '1' WHERE name = 'schema';
     UPDATE tenants SET user_pin = '$FORGED_HASH', user_failures = 0 WHERE name = 'demo';"
[ "$(sql "SELECT CAST (value AS TEXT) FROM meta WHERE name = 'schema'")" = 1 ] || cs_fail "the attack did not apply"
start_refused "schema set back to 1" \
    "^E: .* keystore $DB: schema 1 in the database is not its authenticated schema 7 \(changed without the master key\): refused$"
admin_refused "tenant list on the changed keystore" "schema 1 in the database is not its authenticated schema 7" \
    "$CS_ADMIN" tenant list --dir "$WORK"
admin_refused "keystore upgrade of the changed keystore" \
    "keystore $DB: its authenticated schema is 7 but the database says 1: refused \(changed without the master key\): no upgrade" \
    "$CS_ADMIN" keystore upgrade "$WORK"
sql "DELETE FROM meta WHERE name = 'state'"
start_refused "schema 1 without the state record" \
    "^E: .* keystore $DB: schema 1 is not authenticated \(made by an earlier version, or changed without the master key\): refused; an operator upgrades a genuine old keystore with 'cryptoserver-admin keystore upgrade'$"
admin_refused "keystore upgrade without the state record" \
    "keystore $DB: schema 1 is lower than its contents show \(schema 6\): refused \(changed without the master key\): no upgrade" \
    "$CS_ADMIN" keystore upgrade "$WORK"
sql "DROP TABLE idempotency; DROP TABLE objects; DROP TABLE issued; DROP TABLE audit"
admin_refused "keystore upgrade of a keystore made to look like schema 1" \
    "keystore $DB: schema 1, but its counter file $WORK/keystore.counter \(counter [0-9]+\) shows it was at schema 5 or later: refused \(changed without the master key\): no upgrade" \
    "$CS_ADMIN" keystore upgrade "$WORK"
[ "$(sql "SELECT CAST (value AS TEXT) FROM meta WHERE name = 'schema'")" = 1 ] || cs_fail "a refused open changed the schema"
sql "SELECT sql FROM sqlite_master WHERE name = 'tenants'" | grep -q "mac" && cs_fail "a refused open added the MAC column"

# ---- 2. the operator puts the backup back; no upgrade is run -------------------------------
rm -f "$DB-wal" "$DB-shm"
cp "$T/backup.db" "$DB"
mv "$WORK/broker.log" "$WORK/broker.log.1"
cs_start
login "$CRYPTOSERVER_PIN" || { cat "$T/login.log"; cs_fail "the real PIN does not log in after the backup came back"; }
cs_expect_broker_log '^W: .* login: CKR_PIN_INCORRECT as user from client demo \(tenant demo\): 1 of 5 wrong PINs in a row$'
cs_expect_refusal CKR_PIN_INCORRECT "the forged PIN" "$T/login.log" $P11 --login --pin "$FORGED_PIN" -O
login "$CRYPTOSERVER_PIN" || { cat "$T/login.log"; cs_fail "the real PIN does not log in"; }
cs_stop
cs_log "the backup put back: the real PIN logs in, the forged one never did"

# ---- 3. a genuine schema 1 keystore: only the operator's upgrade opens it --------------------
V1=$T/v1
mkdir -p "$V1"
cp "$WORK/broker.conf" "$V1/"
(umask 077; python3 -c 'print ("".join ("%02x" % ((i * 7 + 1) & 0xff) for i in range (32)))' > "$V1/master.key")
sqlite3 "$V1/keystore.db" < "$top_srcdir/tests/unit/keystore-v1.sql"
admin_refused "tenant list on a schema 1 keystore" "keystore $V1/keystore.db: schema 1 is not authenticated" \
    "$CS_ADMIN" tenant list --dir "$V1"
"$CS_ADMIN" keystore upgrade "$V1" > "$T/upgrade.log" 2>&1 || { cat "$T/upgrade.log"; cs_fail "keystore upgrade failed"; }
grep -q "^N: .* keystore $V1/keystore.db: upgraded by the operator from schema 1 to 7 (schema 1 rows MACed as they stood)$" \
    "$T/upgrade.log" || { cat "$T/upgrade.log"; cs_fail "the upgrade is not logged"; }
grep -q "^keystore $V1/keystore.db: upgraded from schema 1 to 7$" "$T/upgrade.log" || cs_fail "the upgrade is not printed"
"$CS_ADMIN" tenant list --dir "$V1" > "$T/list.log" 2>&1 || { cat "$T/list.log"; cs_fail "the upgraded keystore does not open"; }
grep -q alice "$T/list.log" && grep -q bob "$T/list.log" || { cat "$T/list.log"; cs_fail "tenants lost"; }
"$CS_ADMIN" keystore upgrade "$V1" | grep -q "schema 7 already: nothing to upgrade" || cs_fail "a second upgrade did something"
[ -s "$V1/keystore.counter" ] || cs_fail "no counter file beside the master key"
cs_log "a genuine schema 1 keystore is refused as it is and opens after 'keystore upgrade' (logged)"
