#!/bin/bash
# failover.sh — two brokers on one deployment (the same keystore, ticket key,
# broker key pair and SoftHSM boards) and a client config naming both.
# 8 threads sign with rsa2048 for a few seconds (cryptoserver-bench
# --verify-key: OpenSSL checks every signature with the PEM the deployment
# made); broker b2 is killed with SIGKILL while jobs are in flight on it and
# restarted on the same endpoint.  Every operation must succeed and verify,
# the longest must take under 2 s (scaled by CS_TIME_FACTOR), and the
# restarted broker must take work again.  docs/CONTRACTS.md "Failover".
. "$(dirname "$0")/lib.sh"

cs_require curl
cs_setup
cs_start
cs_peer_start b2 "$CS_RESTART_ENDPOINT"    # a port no other test's broker picks
B2=${CS_PEER_ENDPOINT[b2]}
"$CS_ADMIN" config set "$CRYPTOSERVER_CONF" client/endpoints "$BROKER_ENDPOINT,$B2"
"$CS_ADMIN" config set "$CRYPTOSERVER_CONF" client/log-level info     # logs each re-send
cs_log "client endpoints: $BROKER_ENDPOINT,$B2"

# b2_jobs: jobs the running b2 finished (its metrics; "" when unreachable).
b2_jobs () {
    curl -sf --max-time 5 "$(cat "$WORK/b2.metrics")" 2>/dev/null \
        | awk '/^cryptoserver_jobs_total[{]/ { n += $NF } END { if (NR) printf "%d\n", n }'
}
b2_busy () { [ "$(b2_jobs)" -ge "${1:-20}" ] 2>/dev/null; }

RUN=$((10 * CS_TIME_FACTOR))
$CS_CLIENT_WRAPPER "$CS_BENCH" --module "$CRYPTOSERVER_MODULE" --token "$CRYPTOSERVER_TOKEN" \
    --pin "$CRYPTOSERVER_PIN" --key rsa2048 --mechanism sha256-rsa-pkcs --threads 8 --seconds "$RUN" \
    --verify-key "$KEYS/rsa2048.pub.pem" --csv > "$WORK/bench.csv" 2> "$WORK/bench.err" &
bench=$!
cs_wait_until $((20 * CS_TIME_FACTOR)) b2_busy 20 || cs_fail "broker b2 got no work from the bench"
cs_log "b2 has finished $(b2_jobs) jobs; killing it with SIGKILL"
cs_peer_kill9 b2
killed=$(date +%s.%N)
cs_peer_start b2 "$B2"
[ "${CS_PEER_ENDPOINT[b2]}" = "$B2" ] || cs_fail "b2 restarted on ${CS_PEER_ENDPOINT[b2]}, not $B2"
cs_log "b2 restarted on $B2, $(awk -v k="$killed" -v n="$(date +%s.%N)" 'BEGIN { printf "%.1f", n - k }') s after the kill"
kill -0 "$bench" 2>/dev/null || cs_fail "the bench ended before b2 was back: raise RUN"
cs_wait_until $((20 * CS_TIME_FACTOR)) b2_busy 1 || cs_fail "the restarted broker b2 took no work"
cs_log "the restarted b2 has finished $(b2_jobs) jobs while the bench runs"

rc=0
cs_wait_until $((RUN + 60 * CS_TIME_FACTOR)) eval '! kill -0 $bench 2>/dev/null' || cs_fail "the bench did not end"
wait "$bench" || rc=$?
cat "$WORK/bench.csv" "$WORK/bench.err"
[ "$rc" = 0 ] || cs_fail "cryptoserver-bench failed (status $rc)"
IFS=, read -r _ _ _ threads ops _ _ _ _ _ max verified failures _ < <(tail -n 1 "$WORK/bench.csv")
[ "$threads" = 8 ] && [ "$ops" -gt 0 ] && [ "$failures" = 0 ] && [ "$verified" = "$ops" ] \
    || cs_fail "expected every operation signed and verified: ops=$ops verified=$verified failures=$failures"
# Under valgrind every operation takes seconds (three processes on
# valgrind's one core each): there the bound is that no operation waited
# for a deadline (lib.sh: 120 s), rather than 2 s scaled.
LIMIT=$((2000 * CS_TIME_FACTOR))
[ "${CS_VALGRIND:-}" != 1 ] || LIMIT=60000
awk -v m="$max" -v l="$LIMIT" 'BEGIN { exit !(m < l) }' \
    || cs_fail "the longest operation took $max ms (limit $LIMIT ms)"
resent=$(grep -c 're-sending request' "$WORK/bench.err" || true)
[ "$resent" -gt 0 ] || cs_fail "no job was in flight on b2 when it was killed (nothing re-sent)"
cs_log "failover: $ops signatures, 0 failed, $verified verified by OpenSSL, longest ${max} ms; $resent jobs re-sent"

cs_peer_stop b2
jobs=$(sed -n '/^---- start/h; /^---- start/!H; ${x; p}' "$WORK/b2.log" \
       | sed -n 's/.*stats board=\([a-z0-9]*\) jobs=\([0-9]*\).*/\1 \2/p' \
       | awk '{ last[$1] = $2 } END { for (b in last) n += last[b]; print n + 0 }')
[ "$jobs" -gt 0 ] || cs_fail "the restarted b2's exit stats show no jobs"
cs_log "the restarted b2 ran $jobs jobs (its exit stats)"
cs_stop
