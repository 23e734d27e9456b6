#!/bin/bash
# pool-restart.sh — the pre-generated RSA key pool survives a restart
# (issue #12, seed 002; broker/keys/pool_store.h): the broker fills the pool
# (keys/pool-rsa-2048 = 3), a clean stop seals the 3 keys in the keystore
# (reserved tenant @pool, listed by cryptoserver-admin), the next start
# restores them (cryptoserver_pool_keys_restored_total 3, the rows gone from
# the keystore: a key is never in both) and the first generations after the
# restart, a per-request (session) key and a token key, are served from it
# (cryptoserver-bench --keygen --metrics: from the pool 1 of 1, no board
# job before them).  The token key from the pool signs and openssl verifies
# it with the public key the token gives.  No client can be mapped to the
# reserved tenant, and it does not count as a tenant: after the restart the
# broker still serves one (workers at the reactor's priority, the fast lane
# uncapped).
. "$(dirname "$0")/lib.sh"

cs_require curl
cs_setup
T=$WORK/tmp
mkdir -p "$T"
CONF=$WORK/broker.conf
"$CS_ADMIN" config set "$CONF" keys/pool-rsa-2048 3
"$CS_ADMIN" config set "$CONF" keys/pool-rsa-3072 0
"$CS_ADMIN" config set "$CONF" keys/pool-rsa-4096 0

metric () {
    curl -sf --max-time 10 "$(cat "$WORK/broker.metrics")" \
        | awk -v name="$1" '$1 == name { print $2; found = 1 } END { if (!found) print "none" }'
}
# refills_done: RSA-2048 generations the boards finished (the pool's refills).
refills_done () {
    curl -sf --max-time 10 "$(cat "$WORK/broker.metrics")" \
        | awk '/^cryptoserver_jobs_total\{.*mechanism="CKM_RSA_PKCS_KEY_PAIR_GEN",result="ok"/ { n += $NF }
               END { print n + 0 }'
}

# ---- first run: the pool fills, the stop seals it -------------------------------------
cs_start
cs_wait_until $((120 * CS_TIME_FACTOR)) eval '[ "$(refills_done)" -ge 3 ]' \
    || cs_fail "the pool did not fill (refills done: $(refills_done))"
[ "$(metric cryptoserver_pool_keys_restored_total)" = 0 ] || cs_fail "keys restored at the first start"
cs_stop
grep -q 'pool: 3 pre-generated RSA keys sealed in the keystore for the next start' "$WORK/broker.log" \
    || cs_fail "the stop did not seal the 3 pool keys"
[ "$(cs_keystore_rows @pool)" = 3 ] || cs_fail "the keystore holds $(cs_keystore_rows @pool) pool rows, not 3"
cs_log "first run: 3 keys pre-generated; the clean stop sealed them in the keystore (tenant @pool)"

# ---- the reserved tenant serves no client -------------------------------------------------
cs_expect_refusal "reserved for the broker" "client add --tenant @pool" "$T/client.log" \
    "$CS_ADMIN" client add intruder --dir "$WORK" --tenant @pool
cs_expect_refusal "bad tenant name" "tenant add @x" "$T/tenant.log" \
    "$CS_ADMIN" tenant add @x --dir "$WORK" --pin 123456 --so-pin 12345678

# ---- second run: restored, and the first generations come from it ---------------------------
mv "$WORK/broker.log" "$WORK/broker.log.1"
cs_start
grep -q 'pool: 3 pre-generated RSA keys restored from the keystore' "$WORK/broker.log" \
    || cs_fail "the start did not restore the 3 sealed keys"
[ "$(metric cryptoserver_pool_keys_restored_total)" = 3 ] || cs_fail "restored_total is not 3"
[ "$(cs_keystore_rows @pool)" = 0 ] || cs_fail "restored keys are still in the keystore ($(cs_keystore_rows @pool) rows)"
[ "$(refills_done)" = 0 ] || cs_fail "the boards generated keys although the pool was full"
# The keystore now holds @pool's rows beside tenant demo's: still one tenant
# for broker/worker-nice auto and the fast lane (the broker's own tenant is
# not one to be fair to).
grep -q 'workers: 0 nice steps below the reactor (broker/worker-nice auto, 1 tenants)' "$WORK/broker.log" \
    || { grep 'workers:' "$WORK/broker.log"; cs_fail "with @pool's rows the broker counted more than one tenant"; }
grep -q 'fast lane: .* uncapped (one tenant)' "$WORK/broker.log" \
    || { grep 'fast lane:' "$WORK/broker.log"; cs_fail "with @pool's rows the fast lane capped its one tenant"; }
# shellcheck disable=SC2086
${CS_CLIENT_WRAPPER:-} "$CS_BENCH" --module "$CRYPTOSERVER_MODULE" --token "$CRYPTOSERVER_TOKEN" --pin "$CRYPTOSERVER_PIN" \
    --keygen rsa:2048 --session-keys --count 1 --metrics "$(cat "$WORK/broker.metrics")" > "$T/bench.log" 2>&1 \
    || { cat "$T/bench.log"; cs_fail "cryptoserver-bench --keygen --session-keys failed"; }
cat "$T/bench.log"
grep -q "from the broker's key pool: 1 of 1 (0 found it empty" "$T/bench.log" \
    || cs_fail "the session key did not come from the pool"
cs_run_bounded $((60 * CS_TIME_FACTOR)) "$T/gen.log" $P11 --login --pin "$CRYPTOSERVER_PIN" --keypairgen \
    --key-type rsa:2048 --label from-pool --id 71 --usage-sign || { cat "$T/gen.log"; cs_fail "--keypairgen failed"; }
[ "$(metric cryptoserver_pool_keys_taken_total)" = 2 ] || cs_fail "taken_total is not 2"
[ "$(metric cryptoserver_pool_keys_missed_total)" = 0 ] || cs_fail "a generation missed the pool"
cs_pubkey_pem "$P11" 71 "$T/k71.pub.pem" || cs_fail "cannot read the public key 71"
cs_sign_verify "$P11" 71 rsa "$T/k71.pub.pem" "$T" || cs_fail "the key from the pool does not sign"
cs_log "restart: 3 keys restored (rows deleted); a session key and a token key came from the pool; the token key signs"
cs_stop
