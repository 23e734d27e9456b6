#!/bin/bash
# board-fault-flip.sh — verify before release (issue #9): a board that flips
# one bit in every 10th result (a `fault` board, flip-every = 10, over a sim
# board) beside a healthy sim board holding the same RSA-2048 key.  2,000
# signatures through the module (cryptoserver-bench, 4 threads), every one
# verified by OpenSSL with the PEM the test made: none may be wrong or fail.
# The broker must have caught wrong results (W: lines,
# cryptoserver_wrong_results_total{board="flaky"} > 0) and re-run them, and
# the faulty board must have been taken out of rotation.
# Then the same over a SoftHSM token: the demo's board1 becomes a fault board
# (flip-every = 2: every board gets its first calls while warming up, at
# least 3 here, placement.h) over its pkcs11 token, beside board0 with the same keys:
# 400 rsa2048 signatures, all verified, the wrong ones caught.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-fault.sh"

cs_require curl
cs_setup
T=$WORK/tmp
mkdir -p "$T"
cs_fault_twin 2 flip-every=10
cs_expect_broker_log '^W: .* board flaky: wrong result of job [0-9]+ \(failed verification with the public key\)'
cs_start

$CS_CLIENT_WRAPPER "$CS_BENCH" --module "$CRYPTOSERVER_MODULE" --token demo --pin "$CRYPTOSERVER_PIN" \
    --key shared --verify-key "$T/shared.pub.pem" --threads 4 --count 500 --csv > "$T/bench.csv" 2> "$T/bench.err" \
    || { cat "$T/bench.err" "$T/bench.csv"; cs_fail "cryptoserver-bench failed"; }
IFS=, read -r _ _ _ threads ops _ _ _ _ _ _ verified failures _ < <(tail -n 1 "$T/bench.csv")
[ "$threads/$ops/$verified/$failures" = "4/2000/2000/0" ] \
    || cs_fail "bench (threads/ops/verified/failures): $threads/$ops/$verified/$failures, not 4/2000/2000/0"
cs_log "2000 RSA-2048 signatures, all verified by OpenSSL, none failed"

URL=$(cat "$WORK/broker.metrics") || cs_fail "the broker wrote no broker.metrics"
curl -sf --max-time 10 "$URL" > "$T/metrics" || cs_fail "GET metrics failed"
wrong=$(sed -n 's/^cryptoserver_wrong_results_total{board="flaky"} \([0-9]*\)$/\1/p' "$T/metrics")
good_wrong=$(sed -n 's/^cryptoserver_wrong_results_total{board="good"} \([0-9]*\)$/\1/p' "$T/metrics")
reruns=$(sed -n 's/^cryptoserver_job_reruns_total \([0-9]*\)$/\1/p' "$T/metrics")
[ "${wrong:-0}" -gt 0 ] || cs_fail "no wrong result of board flaky was counted"
[ "$good_wrong" = 0 ] || cs_fail "board good has $good_wrong wrong results"
[ "${reruns:-0}" -ge "$wrong" ] || cs_fail "$wrong wrong results but only ${reruns:-0} re-runs"
grep -Eq 'W: .* board flaky: wrong result of job [0-9]+ \(failed verification with the public key\); out of rotation, probed again in [0-9]+ ms$' \
    "$WORK/broker.log" || cs_fail "the broker did not log taking board flaky out of rotation"
cs_log "board flaky: $wrong wrong results caught and re-run ($reruns re-runs), taken out of rotation"

cs_stop
flaky=$(cs_board_jobs flaky) good=$(cs_board_jobs good)
cs_log "jobs: good $good, flaky $flaky (the faulty board ran fewer while out of rotation)"
[ "$good" -gt "$flaky" ] || cs_fail "the faulty board ran $flaky jobs, the healthy one only $good"

# ---- a fault board over a SoftHSM token (the pkcs11 driver) -----------------
module=$("$CS_ADMIN" config get "$WORK/broker.conf" drivers/board1/module)
token=$("$CS_ADMIN" config get "$WORK/broker.conf" drivers/board1/token)
pin=$("$CS_ADMIN" config get "$WORK/broker.conf" drivers/board1/pin-file)
"$CS_ADMIN" board remove board1 --dir "$WORK" > "$T/add.log" 2>&1 || { cat "$T/add.log"; cs_fail "board remove board1"; }
"$CS_ADMIN" board add board1 --dir "$WORK" --type fault --threads 2 --set flip-every=2 --set tenant=demo \
    --set inner/type=pkcs11 --set "inner/module=$module" --set "inner/token=$token" \
    --set "inner/pin-file=$pin" > "$T/add.log" 2>&1 || { cat "$T/add.log"; cs_fail "board add board1 (fault) failed"; }
cs_expect_broker_log '^W: .* board board1: wrong result of job [0-9]+ \(failed verification with the public key\)'
cs_start
$CS_CLIENT_WRAPPER "$CS_BENCH" --module "$CRYPTOSERVER_MODULE" --token demo --pin "$CRYPTOSERVER_PIN" \
    --key rsa2048 --verify-key "$KEYS/rsa2048.pub.pem" --threads 4 --count 100 --csv > "$T/bench.csv" 2> "$T/bench.err" \
    || { cat "$T/bench.err" "$T/bench.csv"; cs_fail "cryptoserver-bench (rsa2048) failed"; }
IFS=, read -r _ _ _ threads ops _ _ _ _ _ _ verified failures _ < <(tail -n 1 "$T/bench.csv")
[ "$threads/$ops/$verified/$failures" = "4/400/400/0" ] \
    || cs_fail "rsa2048 bench (threads/ops/verified/failures): $threads/$ops/$verified/$failures, not 4/400/400/0"
URL=$(cat "$WORK/broker.metrics") || cs_fail "the broker wrote no broker.metrics"
curl -sf --max-time 10 "$URL" > "$T/metrics" || cs_fail "GET metrics failed"
wrong=$(sed -n 's/^cryptoserver_wrong_results_total{board="board1"} \([0-9]*\)$/\1/p' "$T/metrics")
[ "${wrong:-0}" -gt 0 ] || cs_fail "no wrong result of the SoftHSM fault board board1 was counted"
cs_stop
cs_log "over SoftHSM: 400 rsa2048 signatures verified, none failed; board1's $wrong wrong results caught"
cs_log "all bit-flip checks passed"
