#!/bin/bash
# board-fault-die.sh — a board whose driver dies inside a call (issue #9; the
# `fault` driver's die-after, driver_fault.c): the 6th operation of board
# "dying" never returns and from then on the device is gone (every call
# answers CKR_DEVICE_REMOVED, no session opens).  Beside it a healthy sim
# board "good" holds the same RSA-2048 key.  With call-timeout-ms = 500:
#   - 200 signatures (4 threads) all succeed, verified by OpenSSL: the job
#     in the dying call is re-run on good after the time limit, the jobs
#     that hit the dead device are re-run on good;
#   - board dying is out of rotation (cryptoserver_board_up 0), its time-out
#     counted; a second round of 100 signatures (while probes of the dead
#     board fail) also all succeed;
#   - the broker stops cleanly (status 0), leaving the stuck worker behind
#     with a warning.
. "$(dirname "$0")/lib.sh"

cs_require curl
cs_setup
T=$WORK/tmp
mkdir -p "$T"
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$WORK/shared.pem" 2>/dev/null
openssl pkey -in "$WORK/shared.pem" -pubout -out "$T/shared.pub.pem"
"$CS_ADMIN" board add good --dir "$WORK" --type sim --threads 2 --key-file "$WORK/shared.pem" --key-id 6a \
    --set label=shared --set tenant=demo --set latency-ms=1 --set coprocessors=2 > "$T/add.log" 2>&1 \
    || { cat "$T/add.log"; cs_fail "board add good failed"; }
"$CS_ADMIN" board add dying --dir "$WORK" --type fault --threads 2 --set die-after=5 --set call-timeout-ms=500 \
    --set tenant=demo --set inner/type=sim --set "inner/key-file=$WORK/shared.pem" --set inner/key-id=6a \
    --set inner/label=shared --set inner/latency-ms=1 --set inner/coprocessors=2 --set inner/threads=2 > "$T/add.log" 2>&1 \
    || { cat "$T/add.log"; cs_fail "board add dying failed"; }
cs_expect_broker_log '^W: .* board dying: '
cs_start

# bench THREADS COUNT: all verified by OpenSSL, none failed.
bench () {
    $CS_CLIENT_WRAPPER "$CS_BENCH" --module "$CRYPTOSERVER_MODULE" --token demo --pin "$CRYPTOSERVER_PIN" \
        --key shared --verify-key "$T/shared.pub.pem" --threads "$1" --count "$2" --csv > "$T/bench.csv" 2> "$T/bench.err" \
        || { cat "$T/bench.err" "$T/bench.csv"; cs_fail "cryptoserver-bench ($1 x $2) failed"; }
    IFS=, read -r _ _ _ threads ops _ _ _ _ _ max_ms verified failures _ < <(tail -n 1 "$T/bench.csv")
    local total=$(( $1 * $2 ))
    [ "$threads/$ops/$verified/$failures" = "$1/$total/$total/0" ] \
        || cs_fail "bench (threads/ops/verified/failures): $threads/$ops/$verified/$failures, not $1/$total/$total/0"
}
bench 4 50
cs_log "200 signatures verified, none failed (slowest $max_ms ms: the one re-run after the dying call's time limit)"
grep -q 'fault dying: operation 6 dies' "$WORK/broker.log" || cs_fail "the driver of board dying did not die"
grep -Eq 'W: .* board dying: worker [0-9]+: a driver call over its time limit of 500 ms; worker lost' "$WORK/broker.log" \
    || cs_fail "the dying call was not abandoned after its time limit"

URL=$(cat "$WORK/broker.metrics") || cs_fail "the broker wrote no broker.metrics"
curl -sf --max-time 10 "$URL" > "$T/metrics" || cs_fail "GET $URL failed"
up=$(awk '$1 == "cryptoserver_board_up{board=\"dying\"}" { print $2 }' "$T/metrics")
timeouts=$(awk '$1 == "cryptoserver_board_faults_total{board=\"dying\",kind=\"timeout\"}" { print $2 }' "$T/metrics")
[ "$up" = 0 ] || cs_fail "board dying is in rotation (cryptoserver_board_up $up)"
[ "${timeouts:-0}" = 1 ] || cs_fail "board dying: ${timeouts:-0} time-outs counted, not 1"
cs_log "board dying out of rotation, its time-out counted"

sleep 1         # probes of the dead board come and fail meanwhile
bench 2 50
cs_log "100 more signatures verified, none failed, while the dead board is probed"

cs_stop
grep -Eq 'W: .* board dying: worker [0-9]+ is stuck in a driver call; the broker stops without it' "$WORK/broker.log" \
    || cs_fail "the broker did not say it left the stuck worker behind"
good=$(cs_board_jobs good) dying=$(cs_board_jobs dying)
cs_log "jobs: good $good, dying $dying"
cs_log "all dying-board checks passed"
