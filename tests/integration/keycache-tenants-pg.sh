#!/bin/bash
# keycache-tenants-pg.sh — keycache-tenants.sh with two brokers on one
# PostgreSQL keystore (issue #19 item 8): tenant alpha generates and deletes
# keys through broker B while beta signs through broker A with 8 cached keys.
# A learns of B's commits by LISTEN/NOTIFY and reads the tenants' change
# epochs: only alpha's cached keys are dropped (beta's signs keep hitting the
# cache, cryptoserver_key_cache_dropped_total counts alpha's key only), and
# alpha's key cached by A and deleted through B is refused by A at once with
# CKR_KEY_HANDLE_INVALID; a key row changed with psql (no master key) is
# refused by A at the next sign, though A had it cached.
. "$(dirname "$0")/lib.sh"

cs_require curl
cs_setup --tenant alpha --tenant beta
cs_pg_start
T=$WORK/tmp
mkdir -p "$T"
PIN=$CRYPTOSERVER_PIN           # demo-deploy gives extra tenants PIN 1234 too

# ---- the keystore moves to PostgreSQL; broker B is a copy of the deployment ------
sed -i '/^    path = "keystore.db"$/d' "$WORK/broker.conf"
"$CS_ADMIN" config set "$WORK/broker.conf" keystore/url "$CS_PG_URL"
rm -f "$WORK/keystore.db"*
for t in alpha beta; do
    "$CS_ADMIN" tenant add $t --pin "$PIN" --so-pin 123456 --dir "$WORK" > "$T/admin.log" 2>&1 \
        || { cat "$T/admin.log"; cs_fail "cannot add tenant $t to the PostgreSQL keystore"; }
done
WB=$WORK/b
mkdir -p "$WB"
(cd "$WORK" && tar cf - broker.conf broker.cert broker.cert_secret ticket.key audit.key master.key board.pin metrics.token \
                       clients clients.d softhsm softhsm2.conf) | (cd "$WB" && tar xf -)
sed -i "s|$WORK/softhsm|$WB/softhsm|" "$WB/softhsm2.conf"
cs_start
"$CS_DEPLOY" --run "$WB" &
PID_B=$!
CS_START_TIMEOUT=${CS_START_TIMEOUT:-30} "$CS_DEPLOY" --wait "$WB" > "$T/b-start.log" 2>&1 \
    || { cat "$T/b-start.log"; cs_fail "broker B did not start"; }
P11B="env CRYPTOSERVER_CONF=$WB/clients/alpha/client.conf pkcs11-tool --module $CRYPTOSERVER_MODULE --token-label alpha"
URL=$(cat "$WORK/broker.metrics")
metric () {
    curl -sf --max-time 10 -H "Authorization: Bearer $(cat "$WORK/metrics.token")" "$URL" > "$T/scrape" \
        || cs_fail "GET $URL failed"
    awk -v n="$1" '$1 == n { print $2 }' "$T/scrape" | grep . || cs_fail "no metric $1"
}

# ---- beta caches 8 keys in A; alpha caches one in A ------------------------------------
KEYS=8
cs_shell_start b beta
cs_shell b CKR_OK login "$PIN"
for i in $(seq 1 $KEYS); do
    cs_shell b CKR_OK keygen-signer "b$i" "beta-$i"
    cs_shell b CKR_OK sign "b$i"
done
cs_shell_start a alpha
cs_shell a CKR_OK login "$PIN"
cs_shell a CKR_OK keygen-signer a1 alpha-held
cs_shell a CKR_OK hold a1
cs_shell a CKR_OK sign-held

# ---- alpha writes through B, beta signs through A ------------------------------------------
ROUNDS=4
LOG0=$(wc -l < "$WORK/broker.log")
miss0=$(metric cryptoserver_key_cache_misses_total)
drop0=$(metric cryptoserver_key_cache_dropped_total)
for r in $(seq 1 $ROUNDS); do
    cs_run_bounded $((120 * CS_TIME_FACTOR)) "$T/gen-$r.log" $P11B --login --pin "$PIN" \
        --keypairgen --key-type EC:prime256v1 --label "storm-$r" --id "c$r" --usage-sign \
        || { cat "$T/gen-$r.log"; cs_fail "alpha's key generation through B failed"; }
    cs_run_bounded $((60 * CS_TIME_FACTOR)) "$T/del-$r.log" $P11B --login --pin "$PIN" \
        --delete-object --type privkey --id "c$r" || { cat "$T/del-$r.log"; cs_fail "alpha's delete through B failed"; }
    for i in $(seq 1 $KEYS); do
        cs_shell b CKR_OK sign "b$i"
    done
done
misses=$(( $(metric cryptoserver_key_cache_misses_total) - miss0 ))
dropped=$(( $(metric cryptoserver_key_cache_dropped_total) - drop0 ))
cs_log "alpha wrote through B $((2 * ROUNDS)) times; beta signed $((ROUNDS * KEYS)) times through A: $misses misses, $dropped keys dropped"
[ "$misses" -le $((2 * ROUNDS)) ] || cs_fail "beta's keys left A's cache: $misses misses in $((ROUNDS * KEYS)) signs"
[ "$dropped" -le 1 ] || cs_fail "$dropped keys dropped by A, but only alpha's one cached key may be"
! tail -n +$((LOG0 + 1)) "$WORK/broker.log" | grep "keystore/key-cache: tenant beta changed" \
    || cs_fail "A dropped beta's keys while alpha wrote through B"

# ---- alpha's key cached by A, deleted through B ------------------------------------------------
cs_shell a CKR_OK sign-held
cs_run_bounded $((60 * CS_TIME_FACTOR)) "$T/del-held.log" $P11B --login --pin "$PIN" \
    --delete-object --type privkey --id a1 || { cat "$T/del-held.log"; cs_fail "delete of a1 through B failed"; }
cs_shell a CKR_KEY_HANDLE_INVALID sign-held
cs_shell a CKR_OBJECT_HANDLE_INVALID sign a1
cs_shell b CKR_OK sign b1
cs_log "alpha's key deleted through B is refused by A at once; beta's keys stayed in A's cache"

# ---- a key row of beta changed with psql (no master key, no origin) ----------------------
# The commit raises no state counter and comes without an origin: A drops
# every cached row, reads b1 again and refuses it (row MAC).
cs_expect_broker_log '^E: .* keystore .*: key ks:[0-9a-f]{32} of tenant beta: row does not verify \(changed without the master key\): refused$'
cs_psql cryptoserver -qc "UPDATE keys SET info = info || '\\x5001'::bytea WHERE tenant = 'beta'"
cs_shell b CKR_DEVICE_ERROR sign b1
cs_log "beta's key row changed with psql: A refuses it at the next sign (its cache was dropped)"

cs_shell_stop a
cs_shell_stop b
cs_stop
cs_stop_child "$PID_B" TERM $((15 * CS_TIME_FACTOR)) || cs_fail "broker B did not stop cleanly"
WORK_A=$WORK
WORK=$WB cs_broker_log_check || cs_fail "broker B's log has unexpected warnings or errors"
WORK=$WORK_A
cs_log "PASS"
