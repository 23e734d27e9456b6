#!/bin/bash
# coalesce.sh — the module coalesces (issue #8, the paper's ARRAY RPC): 32
# application threads x 50 ECDSA P-256 signatures through the module
# (cryptoserver-bench --verify-key: OpenSSL checks every one with the public
# key OpenSSL made with the key pair); the broker's metrics must show that its
# requests carried several jobs each (cryptoserver_request_jobs_total over
# cryptoserver_requests_total, cryptoserver-broker(8) METRICS), every job
# answered by its own per-job reply.  No speed is asserted.
. "$(dirname "$0")/lib.sh"

cs_require curl
cs_setup
cs_start
# shellcheck disable=SC1091
. "$WORK/env.sh"
URL=$(cat "$WORK/broker.metrics" 2>/dev/null) || cs_fail "the broker wrote no broker.metrics"

# counters: "requests jobs" of the broker now.
counters () {
    curl -sf --max-time 10 "$URL" > "$WORK/metrics" || cs_fail "GET $URL failed"
    awk '$1 == "cryptoserver_requests_total" { r = $2 } $1 == "cryptoserver_request_jobs_total" { j = $2 }
         END { if (r == "" || j == "") exit 1; printf "%d %d\n", r, j }' "$WORK/metrics" \
        || cs_fail "no cryptoserver_requests_total / cryptoserver_request_jobs_total in the metrics"
}

read -r req0 jobs0 < <(counters)
$CS_CLIENT_WRAPPER "$CS_BENCH" --module "$CRYPTOSERVER_MODULE" --token "$CRYPTOSERVER_TOKEN" --pin "$CRYPTOSERVER_PIN" \
    --key p256 --mechanism ecdsa --threads 32 --count 50 --verify-key "$KEYS/p256.pub.pem" --csv \
    > "$WORK/bench.csv" 2> "$WORK/bench.err" \
    || { cat "$WORK/bench.csv" "$WORK/bench.err"; cs_fail "cryptoserver-bench reported failures"; }
cat "$WORK/bench.csv"
IFS=, read -r _ _ _ _ ops _ _ _ _ _ _ verified failures _ < <(tail -n 1 "$WORK/bench.csv")
[ "$ops" = 1600 ] && [ "$verified" = 1600 ] && [ "$failures" = 0 ] \
    || cs_fail "expected 1600 signed and verified, got ops=$ops verified=$verified failures=$failures"
cs_log "32 threads x 50 ECDSA signatures: all 1600 verified by OpenSSL"

read -r req1 jobs1 < <(counters)
requests=$((req1 - req0)) jobs=$((jobs1 - jobs0))
cs_log "the broker decoded $requests requests with $jobs jobs"
[ "$jobs" -ge 1600 ] || cs_fail "the broker counted $jobs jobs for 1600 signatures"
# One request per job without coalescing; with it, many requests carry
# several (about 10 a request here; at least 1.25 on average under valgrind).
[ $((5 * requests)) -le $((4 * jobs)) ] \
    || cs_fail "$requests requests for $jobs jobs: the module did not coalesce (want 1.25 jobs a request or more)"
cs_log "the module coalesced: $jobs jobs in $requests requests"
cs_stop
