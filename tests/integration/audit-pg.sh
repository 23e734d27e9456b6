#!/bin/bash
# audit-pg.sh — the audit log in a PostgreSQL keystore (cryptoserver-audit(5)):
#  1. two brokers on one database keep a chain each (default chain ids:
#     HOST:/path/of/their/broker.conf), and `audit verify --keystore-url`
#     checks both and the admin chain;
#  2. rows edited, deleted or swapped with psql are caught: `audit verify`
#     exits 1 naming the first broken record of the chain.
. "$(dirname "$0")/lib.sh"

cs_setup
cs_pg_start
T=$WORK/tmp
mkdir -p "$T"
sed -i '/^    path = "keystore.db"$/d' "$WORK/broker.conf"
"$CS_ADMIN" config set "$WORK/broker.conf" keystore/url "$CS_PG_URL"
"$CS_ADMIN" config set "$WORK/broker.conf" audit/interval-ms 200
rm -f "$WORK/keystore.db"*
"$CS_ADMIN" tenant add demo --pin "$CRYPTOSERVER_PIN" --so-pin 123456 --dir "$WORK" > "$T/admin.log" 2>&1 \
    || { cat "$T/admin.log"; cs_fail "cryptoserver-admin cannot add the tenant to the PostgreSQL keystore"; }
psql_q () { cs_psql cryptoserver -tAc "$1"; }
cs_expect_broker_log '^W: .* login: CKR_PIN_INCORRECT as user from client demo \(tenant demo\): 1 of 5 wrong PINs in a row$'

cs_start
cs_peer_start b
cs_shell_start a demo
cs_shell a CKR_PIN_INCORRECT login 9999
cs_shell a CKR_OK login "$CRYPTOSERVER_PIN"
cs_shell a CKR_OK sign 01
cs_shell_stop a
cs_peer_stop b
cs_stop

A="$(hostname):$(realpath "$WORK/broker.conf")"
B="$(hostname):$(realpath "$WORK/b.conf")"
[ "$(psql_q "SELECT count (*) FROM audit WHERE broker = '$A' AND record LIKE '%\"action\":\"broker-stop\"%'")" = 1 ] \
    || cs_fail "broker A's chain has no broker-stop record"
[ "$(psql_q "SELECT count (*) FROM audit WHERE broker = '$B' AND record LIKE '%\"action\":\"broker-stop\"%'")" = 1 ] \
    || cs_fail "broker B's chain has no broker-stop record"
"$CS_ADMIN" audit verify --dir "$WORK" --keystore-url "$CS_PG_URL" > "$T/verify.log" 2>&1 \
    || { cat "$T/verify.log"; cs_fail "audit verify failed on an untouched log"; }
grep -q ": 3 chains, " "$T/verify.log" || { cat "$T/verify.log"; cs_fail "audit verify does not see 3 chains"; }
cs_log "two brokers on one PostgreSQL keystore keep a chain each; audit verify --keystore-url checks them"

SEQ=$(psql_q "SELECT seq FROM audit WHERE broker = '$A' AND record LIKE '%CKR_PIN_INCORRECT%'")
[ -n "$SEQ" ] || cs_fail "no wrong-PIN record in A's chain"
tamper () {     # tamper WHAT SQL REGEX: SQL in one transaction, then put back
    psql_q "CREATE TABLE audit_saved AS SELECT * FROM audit" > /dev/null
    cs_psql cryptoserver -qc "$2" > /dev/null || cs_fail "$1: psql failed"
    local rc=0
    "$CS_ADMIN" audit verify --dir "$WORK" --keystore-url "$CS_PG_URL" > "$T/tamper.log" 2>&1 || rc=$?
    cs_psql cryptoserver -qc "DELETE FROM audit; INSERT INTO audit SELECT * FROM audit_saved; DROP TABLE audit_saved" > /dev/null
    [ "$rc" = 1 ] || { cat "$T/tamper.log"; cs_fail "$1: audit verify exited $rc, not 1"; }
    grep -qF "$3" "$T/tamper.log" || { cat "$T/tamper.log"; cs_fail "$1: audit verify does not say: $3"; }
    cs_log "$1: caught: $3"
}
Q="broker = '$A'"
tamper "a wrong PIN edited into a success" \
    "UPDATE audit SET record = replace (record, 'CKR_PIN_INCORRECT', 'CKR_OK') WHERE $Q AND seq = $SEQ" \
    "broker $A record $SEQ: its hash does not match its contents (edited)"
tamper "the wrong-PIN record deleted" "DELETE FROM audit WHERE $Q AND seq = $SEQ" \
    "broker $A record $SEQ: missing (deleted)"
tamper "two records swapped" \
    "UPDATE audit SET seq = -1 WHERE $Q AND seq = $SEQ; UPDATE audit SET seq = $SEQ WHERE $Q AND seq = $((SEQ + 1)); UPDATE audit SET seq = $((SEQ + 1)) WHERE $Q AND seq = -1" \
    "broker $A record $SEQ: its previous-record hash is not the hash of the record before"
"$CS_ADMIN" audit verify --dir "$WORK" --keystore-url "$CS_PG_URL" > "$T/verify.log" 2>&1 \
    || { cat "$T/verify.log"; cs_fail "the rows put back do not verify"; }
cs_log "records edited, deleted or swapped with psql are caught"
