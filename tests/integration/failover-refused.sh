#!/bin/bash
# failover-refused.sh — a client config naming two brokers, one of which
# has another key pair than the pinned client/broker-cert (so the CURVE
# handshake with it fails), listed first.  Every operation must succeed
# through the good broker (one-shot pkcs11-tool processes and 8 bench
# threads, signatures checked by OpenSSL), and the module's log must name
# the refused endpoint.  docs/CONTRACTS.md "Failover".
. "$(dirname "$0")/lib.sh"

cs_setup
cs_start
# A key pair that is not the deployment's broker key: a client's, made and
# removed again (client add writes a zcert pair).
"$CS_ADMIN" client add rogue --dir "$WORK" >/dev/null
cp "$WORK/clients/rogue/client.cert_secret" "$WORK/rogue.cert_secret"
"$CS_ADMIN" client remove rogue --dir "$WORK" >/dev/null
CS_PEER_SECRET_KEY=$WORK/rogue.cert_secret cs_peer_start rogue
BAD=${CS_PEER_ENDPOINT[rogue]}
"$CS_ADMIN" config set "$CRYPTOSERVER_CONF" client/endpoints "$BAD,$BROKER_ENDPOINT"
cs_log "client endpoints: $BAD (another broker key) then $BROKER_ENDPOINT"

echo "data to sign" > "$WORK/msg.txt"
for i in 1 2 3 4 5; do
    rm -f "$WORK/sig.bin"
    $P11 --login --pin "$CRYPTOSERVER_PIN" --sign --id 01 --mechanism SHA256-RSA-PKCS \
        --input-file "$WORK/msg.txt" --output-file "$WORK/sig.bin" > "$WORK/p11.$i.log" 2>&1 \
        || { cat "$WORK/p11.$i.log"; cs_fail "pkcs11-tool sign $i failed beside a refusing endpoint"; }
    openssl dgst -sha256 -verify "$KEYS/rsa2048.pub.pem" -signature "$WORK/sig.bin" "$WORK/msg.txt" \
        > /dev/null || cs_fail "signature $i does not verify"
done
cs_log "5 pkcs11-tool logins and signatures succeeded and verify"

$CS_CLIENT_WRAPPER "$CS_BENCH" --module "$CRYPTOSERVER_MODULE" --token "$CRYPTOSERVER_TOKEN" \
    --pin "$CRYPTOSERVER_PIN" --key rsa2048 --mechanism sha256-rsa-pkcs --threads 8 --count 50 \
    --verify-key "$KEYS/rsa2048.pub.pem" --csv > "$WORK/bench.csv" 2> "$WORK/bench.err" \
    || { cat "$WORK/bench.csv" "$WORK/bench.err"; cs_fail "cryptoserver-bench reported failures"; }
IFS=, read -r _ _ _ _ ops _ _ _ _ _ _ verified failures _ < <(tail -n 1 "$WORK/bench.csv")
[ "$ops" = 400 ] && [ "$verified" = 400 ] && [ "$failures" = 0 ] \
    || cs_fail "expected 400 signed and verified, got ops=$ops verified=$verified failures=$failures"
cs_log "8 threads x 50 signatures: all 400 verified by OpenSSL"

grep -F "$BAD" "$WORK/bench.err" | grep -q "CURVE handshake failed" \
    || { cat "$WORK/bench.err"; cs_fail "the module's log does not name the refused endpoint $BAD"; }
[ "$(grep -cF "$BAD" "$WORK/bench.err")" = 1 ] \
    || { cat "$WORK/bench.err"; cs_fail "the refused endpoint is reported more than once"; }
cs_log "the module logged the refusal of $BAD once: $(grep -F "$BAD" "$WORK/bench.err")"
cs_peer_stop rogue
cs_stop
