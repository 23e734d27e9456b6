#!/bin/bash
# fuzz.sh — 10,000 random, truncated and mutated frames on the broker's
# socket (tests/fuzz/cs-fuzz-frames), then the broker must still be alive
# and sign through the module with a signature openssl verifies.
. "$(dirname "$0")/lib.sh"

FUZZ=$top_builddir/tests/fuzz/cs-fuzz-frames
[ -x "$FUZZ" ] || cs_fail "$FUZZ is not built (a check_PROGRAM: run make check)"

cs_setup
cs_start
# Every refusal of a fuzzed frame is a logged warning naming the client.
cs_expect_broker_log 'bad request from client demo: |client demo: protocol version mismatch|login: CKR_PIN_(INCORRECT|LOCKED) .*from client demo'
# A mutated deadline or key meets the broker's limits (cryptoserver-broker.conf(5) LIMITS).
cs_expect_broker_log 'client demo \(tenant demo\): (deadline of [0-9]+ ms capped|[0-9]+ bytes queued|per-request RSA key|key refused|reply to request)'

cs_run_bounded 300 "$WORK/fuzz.txt" "$FUZZ" --count 10000 --endpoint "$BROKER_ENDPOINT" \
    --broker-cert "$WORK/broker.cert" --client-cert "$WORK/clients/demo/client.cert" \
    || { tail -n 20 "$WORK/fuzz.txt"; cs_fail "cs-fuzz-frames failed"; }
tail -n 3 "$WORK/fuzz.txt"
cs_broker_alive || cs_fail "the broker died under the fuzzer"
cs_log "broker alive after 10000 fuzz frames"

echo "still signing after the fuzzer" > "$WORK/msg.txt"
$P11 --login --pin "$CRYPTOSERVER_PIN" --sign --id 01 --mechanism SHA256-RSA-PKCS \
    --input-file "$WORK/msg.txt" --output-file "$WORK/msg.sig" > "$WORK/sign.txt" 2>&1 \
    || { cat "$WORK/sign.txt"; cs_fail "no signature after the fuzzer"; }
openssl dgst -sha256 -verify "$KEYS/rsa2048.pub.pem" -signature "$WORK/msg.sig" "$WORK/msg.txt" \
    >/dev/null || cs_fail "the signature after the fuzzer does not verify"
cs_log "signature after the fuzzer verified by openssl"
