#!/bin/bash
# monitoring.sh — the Prometheus alert rules and the Grafana dashboard of
# monitoring/ (issue #22): the rules pass `promtool check rules`, each alert
# fires on the series that should raise it and not on a healthy broker
# (`promtool test rules`), the dashboard is JSON with a query per panel, and
# every metric name that a rule or a panel queries is one a real broker
# exports (its "# TYPE" lines).  The name check is shown to fail on a query
# of a metric that does not exist.
. "$(dirname "$0")/lib.sh"

cs_require python3 curl
. "$top_srcdir/tools/deps.sh"
PROMTOOL=$(cs_promtool "$top_builddir/tests/.promtool") \
    || cs_missing_dependency "promtool (Debian's prometheus package could not be downloaded)"
M=$top_srcdir/monitoring
CHECK=$top_srcdir/tests/integration/monitoring-check.py

"$PROMTOOL" check rules "$M/cryptoserver.rules.yml" > "$WORK.promtool" 2>&1 \
    || { cat "$WORK.promtool"; cs_fail "promtool check rules failed"; }
"$PROMTOOL" test rules "$M/cryptoserver.rules.test.yml" > "$WORK.promtool" 2>&1 \
    || { cat "$WORK.promtool"; cs_fail "promtool test rules failed"; }
cs_log "promtool: $(grep -c 'alert:' "$M/cryptoserver.rules.yml") alert rules checked and tested"

cs_setup
cs_start
# One signature, so that the broker has counted a job.
echo "monitoring" > "$WORK/msg.txt"
$P11 --login --pin "$CRYPTOSERVER_PIN" --sign --id 01 --mechanism SHA256-RSA-PKCS \
    --input-file "$WORK/msg.txt" --output-file "$WORK/sig" >/dev/null 2>&1 || cs_fail "signing failed"
curl -sf --max-time 10 -H "Authorization: Bearer $(cat "$CRYPTOSERVER_METRICS_TOKEN_FILE")" \
    "$(cat "$WORK/broker.metrics")" > "$WORK/metrics.txt" || cs_fail "cannot scrape $(cat "$WORK/broker.metrics")"

python3 "$CHECK" "$WORK/metrics.txt" "$M/cryptoserver.rules.yml" "$M/cryptoserver-dashboard.json" \
    > "$WORK/check.out" 2>&1 || { cat "$WORK/check.out"; cs_fail "a rule or panel queries a metric the broker does not export"; }
cs_log "$(tail -n 1 "$WORK/check.out")"

# The check can fail: a dashboard that queries a metric nobody exports.
sed 's/cryptoserver_queue_depth/cryptoserver_queue_dept/' "$M/cryptoserver-dashboard.json" > "$WORK/bad.json"
if python3 "$CHECK" "$WORK/metrics.txt" "$M/cryptoserver.rules.yml" "$WORK/bad.json" > "$WORK/bad.out" 2>&1; then
    cs_fail "a dashboard querying cryptoserver_queue_dept passed the name check"
fi
grep -q 'dashboard: cryptoserver_queue_dept is not exported' "$WORK/bad.out" || { cat "$WORK/bad.out"; cs_fail "the name check did not name the unknown metric"; }
cs_log "an unknown metric name in the dashboard is caught"
