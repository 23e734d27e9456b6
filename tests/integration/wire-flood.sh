#!/bin/bash
# wire-flood.sh — work bounded before it is done (issue 19 item 5): a
# raw-wire client holding the demo client's CURVE key, without a login,
# sends 40 frames of 500,000 empty jobs (~1 MB each) on one association
# while a second association sends Hellos (tests/integration/cs-wire-flood).
# Every frame is answered with the job limit's request-level
# CKR_DEVICE_MEMORY and the flooding connection still answers a Hello.  The
# broker must not decode such a frame (cs_wire_request_scan refuses it on
# its bytes): its CPU time over the whole run (utime + stime, a counter of
# the kernel, not a latency) stays under 2 s (~0.2 s measured); decoding
# each frame in full, twice, took ~7 s of the reactor (the other
# association's Hello p50 133 ms instead of 0.1 ms).  Hello latencies are
# logged for the record (speed targets belong to cryptoserver-bench).  The
# refusal is one W: line a minute per client and limit.
. "$(dirname "$0")/lib.sh"

FLOOD=$top_builddir/tests/integration/cs-wire-flood
[ -x "$FLOOD" ] || cs_fail "$FLOOD is not built (a check_PROGRAM: run make check)"

FRAMES=$((40 / CS_TIME_FACTOR))       # fewer under valgrind (CS_TIME_FACTOR 5)

cs_setup
cs_start
cs_expect_broker_log 'bad request from client demo: request over CS_WIRE_MAX_JOBS jobs: answered with CKR_DEVICE_MEMORY'

# cpu_ticks PID: user + system clock ticks of PID so far (proc(5) stat 14, 15).
cpu_ticks () { sed 's/.*) //' "/proc/$1/stat" | awk '{ print $12 + $13 }'; }

before=$(cpu_ticks "$CRYPTOSERVER_BROKER_PID")
cs_run_bounded $((120 * CS_TIME_FACTOR)) "$WORK/flood.txt" "$FLOOD" --frames $FRAMES --jobs 500000 --hellos 50 \
    --endpoint "$BROKER_ENDPOINT" --broker-cert "$WORK/broker.cert" \
    --client-cert "$WORK/clients/demo/client.cert" \
    || { cat "$WORK/flood.txt"; cs_fail "cs-wire-flood failed"; }
after=$(cpu_ticks "$CRYPTOSERVER_BROKER_PID")
cat "$WORK/flood.txt"
summary=$(grep '^cs-wire-flood: summary ' "$WORK/flood.txt" | tail -n 1)
grep -q " frames=$FRAMES refused=$FRAMES .* final-hello=ok" <<< "$summary" || cs_fail "not every frame refused: $summary"
hz=$(getconf CLK_TCK)
used_ms=$(( (after - before) * 1000 / hz ))
cs_log "broker CPU time during the flood: $used_ms ms"
[ "$used_ms" -lt $((2000 * CS_TIME_FACTOR)) ] || cs_fail "the broker spent $used_ms ms of CPU on $FRAMES refused frames"
[ "$(grep -c 'bad request from client demo: request over CS_WIRE_MAX_JOBS jobs' "$WORK/broker.log")" = 1 ] \
    || cs_fail "the refusal was not logged exactly once (rate limit: one a minute)"
cs_broker_alive || cs_fail "the broker died under the flood"
cs_stop
