#!/bin/bash
# board-fault-hang.sh — driver-call time limits (issue #9): tenant acme has
# a healthy sim board "good" with key sa, a board "hanga" whose every call
# hangs (a `fault` board, hang = true, over a sim board with the same key
# sa) and a board "hangb" that hangs too and alone holds key sb; both have
# call-timeout-ms = 500.  While their workers are stuck in driver calls:
#   - jobs for sb (only on a hanging board) fail with CKR_DEVICE_ERROR, each
#     well within its deadline (10 s), not when the client gives up;
#   - jobs for sa (on good and hanga) all succeed, verified by OpenSSL;
#   - tenant demo's signatures (SoftHSM boards) and a Hello (pkcs11-tool -L)
#     answer within 1 s each (x CS_TIME_FACTOR);
# the broker logs the overruns, and it still stops cleanly (status 0),
# leaving the stuck threads behind with a warning.
. "$(dirname "$0")/lib.sh"

cs_require curl
cs_setup --tenant acme
T=$WORK/tmp
mkdir -p "$T"
for k in sa sb; do
    openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$WORK/$k.pem" 2>/dev/null
    openssl pkey -in "$WORK/$k.pem" -pubout -out "$T/$k.pub.pem"
done
"$CS_ADMIN" board add good --dir "$WORK" --type sim --threads 2 --key-file "$WORK/sa.pem" --key-id 7a \
    --set label=sa --set tenant=acme --set latency-ms=1 --set coprocessors=2 > "$T/add.log" 2>&1 \
    || { cat "$T/add.log"; cs_fail "board add good failed"; }
for pair in hanga:sa:7a hangb:sb:7b; do
    IFS=: read -r name key id <<< "$pair"
    "$CS_ADMIN" board add "$name" --dir "$WORK" --type fault --threads 2 --set hang=true \
        --set call-timeout-ms=500 --set tenant=acme --set inner/type=sim \
        --set "inner/key-file=$WORK/$key.pem" --set "inner/key-id=$id" --set "inner/label=$key" \
        --set inner/latency-ms=1 --set inner/coprocessors=2 --set inner/threads=2 > "$T/add.log" 2>&1 \
        || { cat "$T/add.log"; cs_fail "board add $name failed"; }
done
cs_expect_broker_log '^W: .* board hang[ab]: worker [0-9]+: a driver call over its time limit of 500 ms; worker lost; out of rotation, probed again in [0-9]+ ms$'
cs_expect_broker_log '^W: .* board hang[ab]: worker [0-9]+ is stuck in a driver call; the broker stops without it$'
cs_start

ACME=$WORK/clients/acme/client.conf
limit_ms=$(( 1000 * CS_TIME_FACTOR ))

# bench CONF TOKEN KEY THREADS COUNT [--verify-key PEM]: one CSV row into $T/bench.csv.
bench () {
    local conf=$1 token=$2 key=$3 threads=$4 count=$5
    shift 5
    CRYPTOSERVER_CONF=$conf $CS_CLIENT_WRAPPER "$CS_BENCH" --module "$CRYPTOSERVER_MODULE" --token "$token" \
        --pin "$CRYPTOSERVER_PIN" --key "$key" --threads "$threads" --count "$count" --csv "$@" \
        > "$T/bench.csv" 2> "$T/bench.err"
}

# ---- sb: only on a hanging board: every job fails, within its deadline -----
first_ms=
for count in 1 3; do
    start=$(date +%s%N)
    bench "$ACME" acme sb 1 $count && cs_fail "signatures with sb (only on a hanging board) succeeded"
    elapsed_ms=$(( ($(date +%s%N) - start) / 1000000 ))
    first_ms=${first_ms:-$elapsed_ms}
    IFS=, read -r _ _ _ _ ops _ _ _ _ _ _ _ failures _ < <(tail -n 1 "$T/bench.csv")
    [ "$ops/$failures" = "$count/$count" ] || { cat "$T/bench.err"; cs_fail "sb: ops/failures $ops/$failures"; }
    grep -q "first failure: CKR_DEVICE_ERROR" "$T/bench.err" || { cat "$T/bench.err"; cs_fail "sb: not CKR_DEVICE_ERROR"; }
    # The deadline is 10 s: the failure must come from the 500 ms time limit.
    [ "$elapsed_ms" -lt $(( count * 3000 * CS_TIME_FACTOR )) ] \
        || cs_fail "sb: $count failed jobs took $elapsed_ms ms (deadline 10 s each)"
done
cs_log "sb: jobs failed with CKR_DEVICE_ERROR: the first (into the hang) in $first_ms ms, 3 more in $elapsed_ms ms"

# ---- while workers hang: a Hello and tenant demo's jobs answer at once -----
start=$(date +%s%N)
pkcs11-tool --module "$CRYPTOSERVER_MODULE" -L > "$T/hello.log" 2>&1 || { cat "$T/hello.log"; cs_fail "pkcs11-tool -L failed"; }
hello_ms=$(( ($(date +%s%N) - start) / 1000000 ))
[ "$hello_ms" -lt "$limit_ms" ] || cs_fail "a Hello (pkcs11-tool -L) took $hello_ms ms while boards hang"
bench "$CRYPTOSERVER_CONF" "$CRYPTOSERVER_TOKEN" rsa2048 1 20 --verify-key "$KEYS/rsa2048.pub.pem" \
    || { cat "$T/bench.err"; cs_fail "tenant demo's signatures failed while acme's boards hang"; }
IFS=, read -r _ _ _ _ ops _ _ p50 _ _ max_ms verified failures _ < <(tail -n 1 "$T/bench.csv")
[ "$ops/$verified/$failures" = "20/20/0" ] || cs_fail "demo: ops/verified/failures $ops/$verified/$failures"
awk -v m="$max_ms" -v l="$limit_ms" 'BEGIN { exit !(m < l) }' || cs_fail "demo: a signature took $max_ms ms"
cs_log "while boards hang: Hello in $hello_ms ms, tenant demo's 20 signatures p50 $p50 ms, max $max_ms ms"

# ---- sa: on good and on hanga: every job succeeds (re-run on good) ---------
bench "$ACME" acme sa 4 25 --verify-key "$T/sa.pub.pem" || { cat "$T/bench.err"; cs_fail "signatures with sa failed"; }
IFS=, read -r _ _ _ _ ops _ _ _ _ _ max_ms verified failures _ < <(tail -n 1 "$T/bench.csv")
[ "$ops/$verified/$failures" = "100/100/0" ] || cs_fail "sa: ops/verified/failures $ops/$verified/$failures"
grep -Eq 'board hanga: worker [0-9]+: a driver call over its time limit of 500 ms' "$WORK/broker.log" \
    || cs_fail "no job of sa went to the hanging board hanga (or its overrun was not logged)"
cs_log "sa: 100 signatures verified, none failed (slowest $max_ms ms: re-run after hanga's time limit)"

URL=$(cat "$WORK/broker.metrics") || cs_fail "the broker wrote no broker.metrics"
curl -sf --max-time 10 "$URL" > "$T/metrics" || cs_fail "GET $URL failed"
for board in hanga hangb; do
    up=$(awk -v s="cryptoserver_board_up{board=\"$board\"}" '$1 == s { print $2 }' "$T/metrics")
    timeouts=$(awk -v s="cryptoserver_board_faults_total{board=\"$board\",kind=\"timeout\"}" '$1 == s { print $2 }' "$T/metrics")
    [ "$up" = 0 ] || cs_fail "board $board is in rotation (cryptoserver_board_up $up)"
    [ "${timeouts:-0}" -gt 0 ] || cs_fail "no time-out of board $board was counted"
done
cs_log "metrics: hanga and hangb out of rotation, their time-outs counted"

cs_stop
grep -q 'is stuck in a driver call; the broker stops without it' "$WORK/broker.log" \
    || cs_fail "the broker did not say it left stuck workers behind"
cs_log "all hanging-board checks passed"
