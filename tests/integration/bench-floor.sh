#!/bin/bash
# bench-floor.sh — cryptoserver-bench transport-floor runs each transport
# (a UNIX socket pair, ZeroMQ over TCP without and with CURVE, CURVE over
# ipc://) to the end and reports a positive p50 for each, in CSV
# (man cryptoserver-bench(1), TRANSPORT FLOOR).  A benchmark's smoke test:
# no timing is asserted.
. "$(dirname "$0")/lib.sh"

rm -rf "$WORK"
mkdir -p "$WORK"
$CS_CLIENT_WRAPPER "$CS_BENCH" transport-floor --count 300 --bytes 512 --csv > "$WORK/floor.csv" 2> "$WORK/floor.err" \
    || { cat "$WORK/floor.csv" "$WORK/floor.err"; cs_fail "cryptoserver-bench transport-floor failed"; }
cat "$WORK/floor.csv"
for t in unix zmq-tcp zmq-curve zmq-ipc; do
    awk -F, -v t="$t" '$1 == t && $3 == 512 && $2 >= 299 && $4 > 0 { found = 1 } END { exit !found }' "$WORK/floor.csv" \
        || cs_fail "no complete $t line in the transport-floor report"
done
"$CS_BENCH" transport-floor --bytes 0 > /dev/null 2>&1 && cs_fail "--bytes 0 was accepted"
cs_log "transport-floor: four transports timed"
