#!/bin/bash
# board-fault-open.sh — board state never reaches a client (issue #25): a
# board "flaky" whose driver fails every 20th operation inside it and leaves
# the operation open in its session (a `fault` board, stuck-every = 20, over
# a sim board; afterwards that session answers CKR_OPERATION_ACTIVE), beside
# a healthy twin "good" holding the same RSA-2048 key.  Under 8 threads x
# 100 signatures through the module, every one verified by OpenSSL, no
# client sees an error: the worker reopens its driver session, the job is
# re-run on the twin, and the fault is counted against flaky
# (cryptoserver_board_faults_total, out of rotation).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-fault.sh"

cs_require curl
cs_setup
T=$WORK/tmp
mkdir -p "$T"
cs_fault_twin 4 stuck-every=20 probe-max-ms=1000
cs_expect_broker_log '^W: .* board flaky: the driver failed job [0-9]+ with a device-class error, and board good then ran it; out of rotation, probed again in [0-9]+ ms$'
cs_start
URL=$(cat "$WORK/broker.metrics") || cs_fail "the broker wrote no broker.metrics"

$CS_CLIENT_WRAPPER "$CS_BENCH" --module "$CRYPTOSERVER_MODULE" --token demo --pin "$CRYPTOSERVER_PIN" \
    --key shared --verify-key "$T/shared.pub.pem" --csv --threads 8 --count 100 \
    > "$T/bench.csv" 2> "$T/bench.err" || true
IFS=, read -r _ _ _ threads ops _ _ _ _ _ _ verified failures _ < <(tail -n 1 "$T/bench.csv")
[ "$threads/$ops" = "8/800" ] || { cat "$T/bench.err" "$T/bench.csv"; cs_fail "bench did not run 8 x 100 signatures"; }
if [ "$failures" != 0 ]; then
    grep -o 'CKR_[A-Z_]*' "$T/bench.err" | sort | uniq -c
    cs_fail "$failures of $ops signatures failed: board session state reached the client"
fi
[ "$verified" = 800 ] || cs_fail "$verified of 800 signatures verified"
curl -sf --max-time 10 "$URL" > "$T/metrics" || cs_fail "GET $URL failed"
faults=$(awk '$1 == "cryptoserver_board_faults_total{board=\"flaky\",kind=\"error\"}" { print $2 }' "$T/metrics")
[ "${faults:-0}" -gt 0 ] || cs_fail "no fault of board flaky was counted"
reopened=$(grep -c 'board flaky: worker [0-9]* reopened its driver session' "$WORK/broker.log" || true)
[ "$reopened" -gt 0 ] || cs_fail "no worker of flaky reopened its stuck driver session"
flaky_ok=$(awk '$1 == "cryptoserver_jobs_total{board=\"flaky\",mechanism=\"CKM_RSA_PKCS\",result=\"ok\"}" { print $2 }' "$T/metrics")
cs_log "8 x 100 signatures, all verified, 0 client errors; flaky: ${flaky_ok:-0} jobs ok, $faults faults, $reopened session reopens"
cs_stop
