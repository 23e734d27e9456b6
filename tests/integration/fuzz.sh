#!/bin/bash
# fuzz.sh — 10,000 random, truncated and mutated frames on the broker's
# socket (tests/fuzz/cs-fuzz-frames): after a real user login, on the
# logged-in path (the real ticket) and the unauthenticated one (no ticket,
# a corrupted ticket).  Every reply must be well formed, no job that needs
# a login may succeed without the real ticket, and every message sent must
# be answered.  Then the broker must still be alive and sign through the
# module with a signature openssl verifies.
. "$(dirname "$0")/lib.sh"

FUZZ=$top_builddir/tests/fuzz/cs-fuzz-frames
COUNT=$((10000 / CS_TIME_FACTOR))     # fewer under valgrind (CS_TIME_FACTOR 5)
[ -x "$FUZZ" ] || cs_fail "$FUZZ is not built (a check_PROGRAM: run make check)"

cs_setup
cs_start
# Every refusal of a fuzzed frame is a logged warning naming the client.
cs_expect_broker_log 'bad request from client demo: |client demo: protocol version mismatch|login: CKR_PIN_(INCORRECT|LOCKED) .*from client demo|tenant demo: (user|SO) PIN locked after'
# A mutated deadline or key meets the broker's limits (cryptoserver-broker.conf(5) LIMITS).
cs_expect_broker_log 'client demo \(tenant demo\): (deadline of [0-9]+ ms capped|[0-9]+ bytes queued|per-request RSA key|key refused|reply to request)'

cs_run_bounded $((90 * CS_TIME_FACTOR)) "$WORK/fuzz.txt" "$FUZZ" --count $COUNT \
    --time-limit $((40 * CS_TIME_FACTOR)) --pin "$CRYPTOSERVER_PIN" --endpoint "$BROKER_ENDPOINT" \
    --broker-cert "$WORK/broker.cert" --client-cert "$WORK/clients/demo/client.cert" \
    || { tail -n 20 "$WORK/fuzz.txt"; cs_fail "cs-fuzz-frames failed"; }
cat "$WORK/fuzz.txt"

# The summary line, checked here too: a fuzzer that exits 0 without having
# sent, been answered, logged in or been refused proves nothing.
summary=$(grep '^cs-fuzz-frames: summary ' "$WORK/fuzz.txt" | tail -n 1)
[ -n "$summary" ] || cs_fail "cs-fuzz-frames printed no summary line"
# fuzz_count NAME: the number after NAME= in the summary line.
fuzz_count () {
    local value
    value=$(sed -n "s/.* $1=\([0-9][0-9]*\).*/\1/p" <<< "$summary")
    [ -n "$value" ] || cs_fail "no $1= in the summary: $summary"
    echo "$value"
}
sent=$(fuzz_count sent)
[ $((sent * 100)) -ge $((COUNT * 90)) ] || cs_fail "only $sent of $COUNT messages were sent"
[ "$(fuzz_count bad)" = 0 ] || cs_fail "the broker sent malformed replies: $summary"
[ "$(fuzz_count violations)" = 0 ] || cs_fail "a login-only job succeeded without the ticket: $summary"
[ "$(fuzz_count lost)" = 0 ] || cs_fail "messages got no reply: $summary"
[ "$(fuzz_count replies)" -eq $((sent - $(fuzz_count oversized))) ] \
    || cs_fail "replies do not match the messages sent: $summary"
[ "$(fuzz_count ok)" -gt 0 ] || cs_fail "no request was answered CKR_OK: $summary"
[ "$(fuzz_count refused)" -gt 0 ] || cs_fail "no job without the ticket was refused: $summary"
[ "$(fuzz_count authed-ok)" -gt 0 ] || cs_fail "no job with the real ticket succeeded: $summary"
grep -q ' final-hello=ok' <<< "$summary" || cs_fail "no hello after the fuzzer: $summary"
cs_log "fuzzer checks passed: $summary"

cs_broker_alive || cs_fail "the broker died under the fuzzer"
cs_log "broker alive after $sent fuzz messages"

echo "still signing after the fuzzer" > "$WORK/msg.txt"
$P11 --login --pin "$CRYPTOSERVER_PIN" --sign --id 01 --mechanism SHA256-RSA-PKCS \
    --input-file "$WORK/msg.txt" --output-file "$WORK/msg.sig" > "$WORK/sign.txt" 2>&1 \
    || { cat "$WORK/sign.txt"; cs_fail "no signature after the fuzzer"; }
openssl dgst -sha256 -verify "$KEYS/rsa2048.pub.pem" -signature "$WORK/msg.sig" "$WORK/msg.txt" \
    >/dev/null || cs_fail "the signature after the fuzzer does not verify"
cs_log "signature after the fuzzer verified by openssl"
