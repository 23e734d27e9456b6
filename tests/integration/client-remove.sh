#!/bin/bash
# client-remove.sh — `cryptoserver-admin client remove` cuts off a client
# that is connected and signing: its requests fail at once (the broker
# watches clients.d; client-admission.sh times it), and a new process with that key
# is refused too.
. "$(dirname "$0")/lib.sh"

cs_setup
cs_start
cs_expect_broker_log 'request refused: client key .* is not in the allow-list'

"$CS_ADMIN" config set "$CRYPTOSERVER_CONF" client/timeout-ms 3000
cp -a "$WORK/clients/demo" "$WORK/demo-copy"

"$CS_BENCH" --module "$CRYPTOSERVER_MODULE" --token "$CRYPTOSERVER_TOKEN" --pin "$CRYPTOSERVER_PIN" \
    --key rsa2048 --seconds 60 --progress --stop-on-error > "$WORK/bench.out" 2> "$WORK/bench.err" &
bench=$!
signing () { grep -sEq 'progress: [1-9][0-9]* signatures' "$WORK/bench.err"; }
if ! cs_wait_until $((20 * CS_TIME_FACTOR)) signing; then
    kill "$bench" 2>/dev/null || true
    cat "$WORK/bench.out" "$WORK/bench.err"; cs_fail "the client never started signing"
fi
cs_log "client connected and signing"

"$CS_ADMIN" client remove demo --dir "$WORK"
removed=$(date +%s)
gone () { ! kill -0 "$bench" 2>/dev/null; }
if ! cs_wait_until $((15 * CS_TIME_FACTOR)) gone; then
    kill "$bench" 2>/dev/null || true; wait "$bench" 2>/dev/null || true
    cat "$WORK/bench.err"; cs_fail "the removed client still signs 15 s after 'client remove'"
fi
set +e; wait "$bench"; rc=$?; set -e
elapsed=$(( $(date +%s) - removed ))
cat "$WORK/bench.out"; grep -v '^progress' "$WORK/bench.err" || true
[ "$rc" = 1 ] || cs_fail "the bench ended with status $rc, not 1 (failed signatures)"
grep -q "first failure: CKR_DEVICE_ERROR" "$WORK/bench.err" \
    || cs_fail "the cut-off client's signatures did not fail with CKR_DEVICE_ERROR"
cs_log "the connected client was cut off ${elapsed}s after 'client remove'"

started=$(date +%s)
CRYPTOSERVER_CONF=$WORK/demo-copy/client.conf cs_expect_refusal CKR_DEVICE_ERROR \
    "a new process with the removed key" "$WORK/again.txt" \
    pkcs11-tool --module "$CRYPTOSERVER_MODULE" --slot 0 --login --pin "$CRYPTOSERVER_PIN" -O
elapsed=$(( $(date +%s) - started ))
[ "$elapsed" -le $((10 * CS_TIME_FACTOR)) ] || cs_fail "the removed key waited ${elapsed}s for its refusal (timeout-ms 3000)"
cs_log "a new process with the removed key is refused in ${elapsed}s"
