#!/bin/bash
# multithread.sh — 8 threads x 200 SHA256-RSA-PKCS signatures with rsa2048
# through the module (cryptoserver-bench --verify-key: OpenSSL checks every one with the
# public key OpenSSL made with the key pair),
# then the broker's exit stats must show that both boards did part of them.
. "$(dirname "$0")/lib.sh"

cs_setup
cs_start

$CS_CLIENT_WRAPPER "$CS_BENCH" --module "$CRYPTOSERVER_MODULE" --token "$CRYPTOSERVER_TOKEN" --pin "$CRYPTOSERVER_PIN" \
    --key rsa2048 --mechanism sha256-rsa-pkcs --threads 8 --count 200 --verify-key "$KEYS/rsa2048.pub.pem" --csv \
    > "$WORK/bench.csv" 2> "$WORK/bench.err" \
    || { cat "$WORK/bench.csv" "$WORK/bench.err"; cs_fail "cryptoserver-bench reported failures"; }
cat "$WORK/bench.csv"
IFS=, read -r _ _ _ threads ops _ _ _ _ _ _ verified failures _ < <(tail -n 1 "$WORK/bench.csv")
[ "$ops" = 1600 ] && [ "$verified" = 1600 ] && [ "$failures" = 0 ] \
    || cs_fail "expected 1600 signed and verified, got ops=$ops verified=$verified failures=$failures"
cs_log "8 threads x 200 signatures: all 1600 verified by OpenSSL"

cs_stop
jobs0=$(cs_board_jobs board0)
jobs1=$(cs_board_jobs board1)
cs_log "broker stats: board0 jobs=${jobs0:-none}, board1 jobs=${jobs1:-none}"
[ -n "$jobs0" ] && [ -n "$jobs1" ] || cs_fail "no 'stats board=NAME jobs=N' lines for both boards in the broker log"
[ "$jobs0" -gt 0 ] && [ "$jobs1" -gt 0 ] || cs_fail "both boards should have served jobs"
[ $((jobs0 + jobs1)) -ge 1600 ] || cs_fail "the boards served $((jobs0 + jobs1)) jobs, fewer than 1600 signatures"
cs_log "both boards served part of the work"
