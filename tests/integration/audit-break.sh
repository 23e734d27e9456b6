#!/bin/bash
# audit-break.sh — a running broker notices when another writer changes its
# audit chain (cryptoserver-audit(5) "Breaks"): records of the broker's own
# chain deleted with the sqlite3 CLI while it runs are seen at its next
# append: an E: line naming the chain and `audit verify`, and
# cryptoserver_audit_chain_breaks_total (the CryptoserverAuditChainBroken
# alert) goes to 1; before the edit it is 0.
. "$(dirname "$0")/lib.sh"

cs_setup
cs_require sqlite3 curl
T=$WORK/tmp
mkdir -p "$T"
DB=$WORK/keystore.db
"$CS_ADMIN" config set "$WORK/broker.conf" audit/interval-ms 200
"$CS_ADMIN" config set "$WORK/broker.conf" audit/broker-id broker-b
cs_expect_broker_log '^E: .* audit: the chain of broker broker-b was changed by another writer since this broker.s record [0-9]+'
cs_start
URL=$(cat "$WORK/broker.metrics") || cs_fail "the broker wrote no broker.metrics"
metric () {     # the breaks counter now
    curl -sf --max-time 10 -H "Authorization: Bearer $(cat "$WORK/metrics.token")" "$URL" \
        | awk '$1 == "cryptoserver_audit_chain_breaks_total" { print $2 }'
}
rows () { sqlite3 -cmd ".timeout 5000" "$DB" "SELECT count(*) FROM audit WHERE broker = 'broker-b'"; }
rows_at_least () { [ "$(rows)" -ge "$1" ]; }
recorded () { sqlite3 -cmd ".timeout 5000" "$DB" "SELECT record FROM audit" | grep -q "$1"; }

cs_shell_start app demo
cs_shell app CKR_OK login 1234
cs_wait_until $((10 * CS_TIME_FACTOR)) rows_at_least 2 || cs_fail "the broker stored no records of its start and the login"
[ "$(metric)" = 0 ] || cs_fail "cryptoserver_audit_chain_breaks_total is $(metric) on an untouched chain"
cs_shell app CKR_OK keygen-signer 51 first
cs_wait_until $((10 * CS_TIME_FACTOR)) recorded '"action":"generate"' \
    || cs_fail "the key generation was not recorded"
[ "$(metric)" = 0 ] || cs_fail "the broker's own appends counted as a break"
before=$(rows)
sqlite3 -cmd ".timeout 5000" "$DB" \
    "DELETE FROM audit WHERE broker = 'broker-b' AND seq = (SELECT max(seq) FROM audit WHERE broker = 'broker-b')"
cs_log "deleted the last record of broker-b's chain ($before records)"
cs_shell app CKR_OK keygen-signer 52 second
cs_wait_until $((10 * CS_TIME_FACTOR)) grep -q "audit: the chain of broker broker-b was changed by another writer" \
    "$WORK/broker.log" || cs_fail "the broker did not notice its chain was cut"
[ "$(metric)" = 1 ] || cs_fail "cryptoserver_audit_chain_breaks_total is $(metric), not 1"
cs_log "the cut chain: an E: line and cryptoserver_audit_chain_breaks_total 1"
cs_shell_stop app
