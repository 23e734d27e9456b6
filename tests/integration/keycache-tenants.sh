#!/bin/bash
# keycache-tenants.sh — keystore write storms by one tenant do not drop every
# tenant's key cache (issue #19 item 8): each tenant has a change epoch in the
# keystore (docs/CONTRACTS.md "Keystore state"), and after another writer
# committed the broker drops only the tenants whose epoch moved.
#  1. beta caches 8 keys and signs with all of them in a loop while
#     cryptoserver-admin (another process) generates and deletes alpha's
#     keys: beta's lookups keep hitting the cache (at most one miss per
#     alpha write: the lookup made while the broker waits for the writer's
#     commit), and cryptoserver_key_cache_dropped_total never counts beta's;
#  2. alpha's key, cached by the broker and held by alpha's session, deleted
#     by cryptoserver-admin: the next sign with the held handle is refused
#     with CKR_KEY_HANDLE_INVALID at once (no stale key signs), and the
#     broker logs that alpha's cached key was dropped.
. "$(dirname "$0")/lib.sh"

cs_require curl
cs_setup --tenant alpha --tenant beta
cs_start
T=$WORK/tmp
mkdir -p "$T"
PIN=$CRYPTOSERVER_PIN           # demo-deploy gives extra tenants PIN 1234 too
URL=$(cat "$WORK/broker.metrics" 2>/dev/null) || cs_fail "the broker wrote no broker.metrics"

# metric NAME: its value now.
metric () {
    curl -sf --max-time 10 -H "Authorization: Bearer $(cat "$WORK/metrics.token")" "$URL" > "$T/scrape" \
        || cs_fail "GET $URL failed"
    awk -v n="$1" '$1 == n { print $2 }' "$T/scrape" | grep . || cs_fail "no metric $1"
}

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
cs_shell a CKR_OK sign-held                 # the broker has alpha's key in its cache now

# ---- 1. alpha's write storm, beta signing ---------------------------------------
ROUNDS=6
LOG0=$(wc -l < "$WORK/broker.log")
miss0=$(metric cryptoserver_key_cache_misses_total)
drop0=$(metric cryptoserver_key_cache_dropped_total)
for r in $(seq 1 $ROUNDS); do
    "$CS_ADMIN" key generate --tenant alpha --type ec:prime256v1 --label "storm-$r" --dir "$WORK" > "$T/gen-$r.log" 2>&1 \
        || { cat "$T/gen-$r.log"; cs_fail "cryptoserver-admin key generate for alpha failed"; }
    "$CS_ADMIN" key delete --tenant alpha --label "storm-$r" --dir "$WORK" > "$T/del-$r.log" 2>&1 \
        || { cat "$T/del-$r.log"; cs_fail "cryptoserver-admin key delete for alpha failed"; }
    for i in $(seq 1 $KEYS); do
        cs_shell b CKR_OK sign "b$i"
    done
done
misses=$(( $(metric cryptoserver_key_cache_misses_total) - miss0 ))
dropped=$(( $(metric cryptoserver_key_cache_dropped_total) - drop0 ))
cs_log "alpha wrote $((2 * ROUNDS)) times; beta signed $((ROUNDS * KEYS)) times: $misses cache misses, $dropped keys dropped"
[ "$misses" -le $((2 * ROUNDS)) ] \
    || cs_fail "beta's keys left the cache: $misses misses in $((ROUNDS * KEYS)) signs (old behaviour: every write drops every tenant)"
[ "$dropped" -le 1 ] || cs_fail "$dropped keys dropped, but only alpha's one cached key may be"
cs_shell a CKR_OK sign-held                 # alpha's own key still signs (read again if dropped)

# ---- 2. alpha's held key deleted by another process --------------------------------
"$CS_ADMIN" key delete --tenant alpha --label alpha-held --dir "$WORK" > "$T/del-held.log" 2>&1 \
    || { cat "$T/del-held.log"; cs_fail "cryptoserver-admin key delete alpha-held failed"; }
cs_shell a CKR_KEY_HANDLE_INVALID sign-held
cs_shell a CKR_OBJECT_HANDLE_INVALID sign a1
cs_wait_until $((10 * CS_TIME_FACTOR)) grep -q "keystore/key-cache: tenant alpha changed in the keystore: its 1 cached keys dropped" \
    "$WORK/broker.log" || cs_fail "no log line of alpha's cached key dropped"
! tail -n +$((LOG0 + 1)) "$WORK/broker.log" | grep "keystore/key-cache: tenant beta changed" \
    || cs_fail "beta's keys were dropped while alpha wrote"
cs_shell b CKR_OK sign b1
cs_log "alpha's key deleted by cryptoserver-admin is refused at once; beta's keys stayed cached"

cs_shell_stop a
cs_shell_stop b
cs_stop
cs_log "PASS"
