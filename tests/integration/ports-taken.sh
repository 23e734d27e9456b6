#!/bin/bash
# ports-taken.sh — a deployment made by demo-deploy.sh without port options
# (as tools and tests make theirs: cryptoserver-bench paper, bench-boards.sh)
# starts while the quickstart demo's fixed ports 5555 and 9464 are taken;
# and a fixed port that is taken is refused with the port and the setting
# that changes it, by demo-deploy.sh --start and by the broker itself, which
# then exits with status 1 before it serves anything (issue #18).
. "$(dirname "$0")/lib.sh"

cs_setup
cs_expect_broker_log 'broker/(endpoint|metrics): cannot (bind|serve)'

# hold PORT: a listener on 127.0.0.1:PORT (0: a free one), a background job
# of this test (cs_cleanup kills it); sets HELD to the port it holds, or to
# nothing when PORT was taken already.
hold () {
    local out=$WORK/hold.$1.$RANDOM
    python3 -c '
import socket, sys, time
s = socket.socket ()
try:
    s.bind (("127.0.0.1", int (sys.argv [1])))
except OSError:
    print ("taken", flush = True); sys.exit (0)
s.listen ()
print (s.getsockname () [1], flush = True)
time.sleep (300)' "$1" > "$out" &
    cs_wait_until 10 test -s "$out" || cs_fail "the port holder did not start"
    HELD=$(head -n 1 "$out")
    [ "$HELD" != taken ] || HELD=
}

# The demo's ports, taken (by us, or already by a running demo).
for port in 5555 9464; do
    hold $port
    if [ -n "$HELD" ]; then cs_log "holding 127.0.0.1:$port"; else cs_log "127.0.0.1:$port is already taken"; fi
done

# 1. A new deployment with no port options picks free ones and starts.
D=$WORK/plain
"$CS_DEPLOY" "$D" > "$WORK/plain-deploy.log" 2>&1 || { cat "$WORK/plain-deploy.log"; cs_fail "demo-deploy.sh $D failed"; }
endpoint=$("$CS_ADMIN" config get "$D/broker.conf" broker/endpoint)
metrics=$("$CS_ADMIN" config get "$D/broker.conf" broker/metrics)
case $endpoint in *:5555) cs_fail "demo-deploy.sh without options chose the demo's port: $endpoint" ;; esac
case $metrics in *:9464/*) cs_fail "demo-deploy.sh without options chose the demo's metrics port: $metrics" ;; esac
"$CS_DEPLOY" --start "$D" > "$WORK/plain-start.log" 2>&1 \
    || { cat "$WORK/plain-start.log"; tail -n 20 "$D/broker.log"; cs_fail "a deployment without port options did not start beside the demo's ports"; }
grep -q 'started (pid [0-9]*) on tcp://127.0.0.1:[0-9]*' "$WORK/plain-start.log" \
    || { cat "$WORK/plain-start.log"; cs_fail "demo-deploy.sh --start does not say which port it picked"; }
grep -q 'metrics at http://127.0.0.1:[0-9]*/metrics' "$WORK/plain-start.log" \
    || { cat "$WORK/plain-start.log"; cs_fail "demo-deploy.sh --start does not say which metrics port it picked"; }
"$CS_DEPLOY" --stop "$D" > "$WORK/plain-stop.log" 2>&1 || { cat "$WORK/plain-stop.log"; cs_fail "the broker of $D did not stop cleanly"; }
cs_log "a deployment without port options started on $(grep -o 'tcp://[0-9.:]*' "$WORK/plain-start.log" | head -n 1) beside 5555/9464"

# 2. A fixed endpoint port that is taken: demo-deploy.sh --start names it.
hold 0
port=$HELD
[ -n "$port" ] || cs_fail "could not hold a free port"
"$CS_DEPLOY" "$WORK" --port "$port" --metrics-port 0 >/dev/null
if "$CS_DEPLOY" --start "$WORK" > "$WORK/start-endpoint.log" 2>&1; then
    cs_fail "demo-deploy.sh --start started a broker on a taken port $port"
fi
grep -q "port $port (broker/endpoint .*) is in use by another program.*--port" "$WORK/start-endpoint.log" \
    || { cat "$WORK/start-endpoint.log"; cs_fail "demo-deploy.sh --start does not name the taken port $port and how to change it"; }
[ ! -s "$WORK/broker.pid" ] || ! cs_pid_alive "$(cat "$WORK/broker.pid")" || cs_fail "a broker runs after the refusal"

# ... and the broker itself, started without that check, exits with status 1
# and an E: line naming broker/endpoint; it wrote no endpoint file.
status=0
cs_run_bounded 30 "$WORK/run-endpoint.log" "$CS_DEPLOY" --run "$WORK" || status=$?
[ "$status" = 1 ] || { tail -n 20 "$WORK/broker.log"; cs_fail "a broker whose endpoint port is taken exited with status $status, not 1"; }
grep -q "^E: .*broker/endpoint: cannot bind tcp://127.0.0.1:$port: Address already in use (.*broker/endpoint" "$WORK/broker.log" \
    || { tail -n 20 "$WORK/broker.log"; cs_fail "the broker log does not name broker/endpoint and port $port"; }
[ ! -s "$WORK/broker.endpoint" ] || cs_fail "a broker that could not bind wrote broker.endpoint"
cs_log "endpoint port $port taken: refused by demo-deploy.sh and by the broker (status 1)"

# 3. The same for a fixed metrics port.
hold 0
mport=$HELD
"$CS_DEPLOY" "$WORK" --endpoint "$CS_TEST_ENDPOINT" --metrics-port "$mport" >/dev/null
if "$CS_DEPLOY" --start "$WORK" > "$WORK/start-metrics.log" 2>&1; then
    cs_fail "demo-deploy.sh --start started a broker on a taken metrics port $mport"
fi
grep -q "port $mport (broker/metrics .*) is in use by another program.*--metrics-port" "$WORK/start-metrics.log" \
    || { cat "$WORK/start-metrics.log"; cs_fail "demo-deploy.sh --start does not name the taken metrics port $mport"; }
status=0
cs_run_bounded 30 "$WORK/run-metrics.log" "$CS_DEPLOY" --run "$WORK" || status=$?
[ "$status" = 1 ] || { tail -n 20 "$WORK/broker.log"; cs_fail "a broker whose metrics port is taken exited with status $status, not 1"; }
grep -q "^E: .*broker/metrics: cannot serve http://127.0.0.1:$mport/metrics: its port is in use.*set broker/metrics" "$WORK/broker.log" \
    || { tail -n 20 "$WORK/broker.log"; cs_fail "the broker log does not name broker/metrics and port $mport"; }
[ ! -s "$WORK/broker.endpoint" ] || cs_fail "a broker whose metrics port is taken listened on its endpoint"
cs_log "metrics port $mport taken: refused by demo-deploy.sh and by the broker (status 1), nothing served"
