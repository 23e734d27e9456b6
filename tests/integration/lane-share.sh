#!/bin/bash
# lane-share.sh — no tenant gets the reactor to itself (issue 19 item 6).
# Tenant flood's client, over the raw wire (tests/integration/cs-wire-flood
# --sym-pin), keeps 4 associations busy with session-key SymJobs,
# alternately AES-ECB over 16 bytes and AES-CBC over 64 KiB, for 8 s, while
# tenant quiet's client measures its Hello round trips alone and during the
# flood.  The fast lane runs on the reactor only jobs whose cost is known
# and small for their class (scheduler_lane_fits: per mechanism and size
# class, at most 4 KiB of input): no 64 KiB CBC job may run there, so
# cryptoserver_fast_lane_jobs_total grows by at most the ECB jobs answered
# (before issue 19 every one of the jobs ran on the reactor).  A counter,
# not a latency: the Hello latencies are printed for the record
# (cryptoserver-bench territory).
. "$(dirname "$0")/lib.sh"

FLOOD=$top_builddir/tests/integration/cs-wire-flood
[ -x "$FLOOD" ] || cs_fail "$FLOOD is not built (a check_PROGRAM: run make check)"
cs_require curl
cs_setup --tenant flood --tenant quiet
cs_start
# broker/worker-nice is "auto" (unset): with two tenants (and the demo's) the
# workers run 10 nice steps below the reactor, the rule that keeps tenant
# quiet's replies from waiting behind tenant flood's workers.  The threads'
# nice values are the kernel's (field 19 of /proc/PID/task/TID/stat).
grep -Eq 'workers: 10 nice steps below the reactor \(broker/worker-nice auto, [2-9][0-9]* tenants\)' "$WORK/broker.log" \
    || cs_fail "the broker did not put its workers 10 nice steps down for several tenants: $(grep 'workers:' "$WORK/broker.log")"
base=$(sed "s/^.*) //" "/proc/$CRYPTOSERVER_BROKER_PID/stat" | awk "{ print \$17 }")
lowered=0
for stat in /proc/"$CRYPTOSERVER_BROKER_PID"/task/*/stat; do
    # the fields after the command name, which may hold spaces: state is 1, nice is 17
    nice=$(sed 's/^.*) //' "$stat" | awk '{ print $17 }')
    [ "$nice" = $((base + 10 > 19 ? 19 : base + 10)) ] && lowered=$((lowered + 1))
done
[ "$lowered" -ge 2 ] || cs_fail "$lowered broker threads run 10 nice steps down, not the workers"
cs_log "workers: $lowered threads at nice $((base + 10)) (the broker's main thread at $base)"
URL=$(cat "$WORK/broker.metrics")
lane_jobs () {
    curl -sf --max-time 10 "$URL" | awk '/^cryptoserver_fast_lane_jobs_total / { print $2 }'
}

before=$(lane_jobs)
[ -n "$before" ] || cs_fail "no cryptoserver_fast_lane_jobs_total in the metrics"
cs_run_bounded $((60 * CS_TIME_FACTOR)) "$WORK/sym.txt" "$FLOOD" --sym-pin "$CRYPTOSERVER_PIN" \
    --connections 4 --seconds 8 --hellos 200 --endpoint "$BROKER_ENDPOINT" --broker-cert "$WORK/broker.cert" \
    --client-cert "$WORK/clients/flood/client.cert" --probe-cert "$WORK/clients/quiet/client.cert" \
    || { cat "$WORK/sym.txt"; cs_fail "cs-wire-flood --sym-pin failed"; }
after=$(lane_jobs)
cat "$WORK/sym.txt"
summary=$(grep '^cs-wire-flood: sym summary ' "$WORK/sym.txt" | tail -n 1)
ecb=$(sed -n 's/.* ecb=\([0-9]*\) .*/\1/p' <<< "$summary")
cbc=$(sed -n 's/.* cbc=\([0-9]*\) .*/\1/p' <<< "$summary")
[ "${ecb:-0}" -gt 0 ] && [ "${cbc:-0}" -gt 0 ] || cs_fail "no ECB or CBC job answered: $summary"
lane=$((after - before))
cs_log "fast lane: $lane of $((ecb + cbc)) jobs ($ecb ECB 16 B, $cbc CBC 64 KiB)"
[ "$lane" -le "$ecb" ] || cs_fail "$lane jobs ran on the reactor: more than the $ecb ECB jobs (64 KiB CBC jobs took the fast lane)"
cs_broker_alive || cs_fail "the broker died"
cs_stop
