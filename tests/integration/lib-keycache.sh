# lib-keycache.sh — what keycache-tenants.sh and keycache-tenants-pg.sh share
# (sourced after lib.sh, with $T, $PIN and the broker under test started):
# tenant beta with 8 cached keys, tenant alpha with one held key, alpha's
# write storm while beta signs, and alpha's held key deleted by another
# writer (issue #19 item 8).

KC_KEYS=8

# kc_metric NAME: the value of metric NAME of the broker of $WORK now.
kc_metric () {
    local url
    url=$(cat "$WORK/broker.metrics") || cs_fail "the broker wrote no broker.metrics"
    curl -sf --max-time 10 -H "Authorization: Bearer $(cat "$WORK/metrics.token")" "$url" > "$T/scrape" \
        || cs_fail "GET $url failed"
    awk -v n="$1" '$1 == n { print $2 }' "$T/scrape" | grep . || cs_fail "no metric $1"
}

# kc_warm: shell b (beta) logs in and signs with each of its KC_KEYS new
# keys, so the broker caches them; shell a (alpha) holds and signs with
# its key a1, cached too.
kc_warm () {
    local i
    cs_shell_start b beta
    cs_shell b CKR_OK login "$PIN"
    for i in $(seq 1 $KC_KEYS); do
        cs_shell b CKR_OK keygen-signer "b$i" "beta-$i"
        cs_shell b CKR_OK sign "b$i"
    done
    cs_shell_start a alpha
    cs_shell a CKR_OK login "$PIN"
    cs_shell a CKR_OK keygen-signer a1 alpha-held
    cs_shell a CKR_OK hold a1
    cs_shell a CKR_OK sign-held
}

# kc_storm ROUNDS WRITE: ROUNDS times `WRITE R` (alpha's writes by another
# writer: one generation and one deletion), each followed by a sign with
# every beta key; fails unless beta's keys stayed cached (at most one miss
# per write, no key dropped but alpha's one, no log line of beta dropped).
kc_storm () {
    local rounds=$1 write=$2 r i log0 miss0 drop0 misses dropped
    log0=$(wc -l < "$WORK/broker.log")
    miss0=$(kc_metric cryptoserver_key_cache_misses_total)
    drop0=$(kc_metric cryptoserver_key_cache_dropped_total)
    for r in $(seq 1 "$rounds"); do
        $write "$r"
        for i in $(seq 1 $KC_KEYS); do
            cs_shell b CKR_OK sign "b$i"
        done
    done
    misses=$(( $(kc_metric cryptoserver_key_cache_misses_total) - miss0 ))
    dropped=$(( $(kc_metric cryptoserver_key_cache_dropped_total) - drop0 ))
    cs_log "alpha wrote $((2 * rounds)) times; beta signed $((rounds * KC_KEYS)) times: $misses cache misses, $dropped keys dropped"
    [ "$misses" -le $((2 * rounds)) ] \
        || cs_fail "beta's keys left the cache: $misses misses in $((rounds * KC_KEYS)) signs (every write dropped every tenant)"
    [ "$dropped" -le 1 ] || cs_fail "$dropped keys dropped, but only alpha's one cached key may be"
    ! tail -n +$((log0 + 1)) "$WORK/broker.log" | grep "keystore/key-cache: tenant beta changed" \
        || cs_fail "beta's keys were dropped while alpha wrote"
}

# kc_held_deleted DELETE [eventually]: alpha's held key a1, cached, is
# deleted by `DELETE` (another writer): the next sign with the held handle
# is refused with CKR_KEY_HANDLE_INVALID, a find does not see it, beta still
# signs.  With "eventually" (a writer on another broker, whose change comes
# by PostgreSQL NOTIFY and is settled at the start of a later request) the
# refusal may come a few signs later; without it, at once.
kc_held_deleted () {
    cs_shell a CKR_OK sign-held
    $1
    if [ "${2:-}" = eventually ]; then
        cs_shell_eventually a CKR_KEY_HANDLE_INVALID CKR_OK sign-held
    else
        cs_shell a CKR_KEY_HANDLE_INVALID sign-held
    fi
    cs_shell a CKR_OBJECT_HANDLE_INVALID sign a1
    cs_shell b CKR_OK sign b1
    cs_log "alpha's key deleted by another writer is refused; beta's keys stayed cached"
}
