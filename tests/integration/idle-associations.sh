#!/bin/bash
# idle-associations.sh — many idle client associations cost the broker a
# bounded amount of memory, and give it back when they close (issue #25;
# the 10,000-association figure is a benchmark, not this test:
# cryptoserver-bench idle-associations --count 10000).
#
# cryptoserver-bench idle-associations opens 300 CurveZMQ DEALERs with the
# demo client's key, one Hello each (all must be answered CKR_OK), and reads
# the broker's VmRSS before, with them open, and 12 s after they closed.
#  - Per association at most 56 KiB: libzmq 4.3 allocates about 51 KiB per
#    CURVE connection (heaptrack: its decoder's 9 KiB and encoder's 8 KiB
#    batch buffers, the session's pipe pair and the ZAP request's pipe pair,
#    each ~8.5 KiB per direction), of which 36-42 KiB are touched; the
#    broker keeps no per-connection state of its own (its per-client state
#    is per CURVE key).  56 KiB leaves room for heap growth at this small N
#    and fails if the broker added a buffer of its own per connection; the
#    bound also keeps 10,000 associations under 500 MB with the ~18 MiB a
#    fresh broker holds.
#  - After they close, at least half of what they took is back with the
#    system (host_limits_trim every 5 s; without it glibc keeps the freed
#    arena and the RSS stays at its peak).
. "$(dirname "$0")/lib.sh"

N=300
cs_setup
cs_start
T=$WORK/tmp
mkdir -p "$T"
cs_run_bounded 120 "$T/idle.csv" "$CS_BENCH" idle-associations --count "$N" --dir "$WORK" \
    --after-close-seconds 12 --csv || { cat "$T/idle.csv"; cs_fail "idle-associations failed"; }
IFS=, read -r count answered failed _ open_s before after per closed _ < <(tail -1 "$T/idle.csv")
cs_log "$count associations: $answered answered, $failed failed, opened in $open_s s; RSS $before KiB" \
    "before, $after KiB open ($per KiB each), $closed KiB 12 s after closing"
[ "$answered" = "$N" ] && [ "$failed" = 0 ] || cs_fail "not every association got its Hello answered"
awk -v per="$per" 'BEGIN { exit !(per > 0 && per <= 56) }' \
    || cs_fail "$per KiB of broker RSS per idle association (bound 56 KiB)"
[ $((closed - before)) -lt $(((after - before) / 2)) ] \
    || cs_fail "the broker kept $((closed - before)) KiB of the $((after - before)) KiB the associations took"
cs_broker_alive || cs_fail "the broker died"
cs_stop
cs_log "PASS"
