#!/bin/bash
# unknown-client.sh — a client whose key is not in the broker's allow-list
# (clients.d) gets an error within its timeout and signs nothing.
. "$(dirname "$0")/lib.sh"

cs_setup
# A real key pair made by the admin tool, then taken off the allow-list.
"$CS_ADMIN" client add stray --dir "$WORK" >/dev/null
cp -a "$WORK/clients/stray" "$WORK/stray"
"$CS_ADMIN" client remove stray --dir "$WORK" >/dev/null
[ ! -e "$WORK/clients.d/stray.cert" ] || cs_fail "stray.cert still in clients.d"
cs_start
"$CS_ADMIN" config set "$WORK/stray/client.conf" client/endpoints "$BROKER_ENDPOINT"
"$CS_ADMIN" config set "$WORK/stray/client.conf" client/timeout-ms 3000

echo "data to sign" > "$WORK/msg.txt"
started=$(date +%s)
set +e
CRYPTOSERVER_CONF=$WORK/stray/client.conf cs_run_bounded 30 "$WORK/stray.txt" \
    $P11 --login --pin "$CRYPTOSERVER_PIN" --sign --id 01 --mechanism SHA256-RSA-PKCS \
    --input-file "$WORK/msg.txt" --output-file "$WORK/stray.sig"
rc=$?
set -e
elapsed=$(( $(date +%s) - started ))
cat "$WORK/stray.txt"
[ "$rc" != 0 ] || cs_fail "an unknown client signed"
[ "$rc" != 124 ] && [ "$rc" != 137 ] || cs_fail "an unknown client hung (killed after 30 s)"
[ "$elapsed" -le 10 ] || cs_fail "an unknown client waited ${elapsed}s for its error (timeout-ms 3000)"
[ ! -s "$WORK/stray.sig" ] || cs_fail "an unknown client got a signature"
cs_log "unknown client: refused with an error after ${elapsed}s"

# The known client still works, so the refusal was about the key.
$P11 --login --pin "$CRYPTOSERVER_PIN" --sign --id 01 --mechanism SHA256-RSA-PKCS \
    --input-file "$WORK/msg.txt" --output-file "$WORK/demo.sig" > "$WORK/demo.txt" 2>&1 \
    || { cat "$WORK/demo.txt"; cs_fail "the allowed client could not sign"; }
openssl dgst -sha256 -verify "$KEYS/rsa2048.pub.pem" -signature "$WORK/demo.sig" "$WORK/msg.txt" \
    >/dev/null || cs_fail "the allowed client's signature does not verify"

cs_stop
jobs0=$(cs_board_jobs board0)
jobs1=$(cs_board_jobs board1)
[ -n "$jobs0" ] && [ -n "$jobs1" ] || cs_fail "no 'stats board=NAME jobs=N' lines in the broker log"
[ $((jobs0 + jobs1)) = 1 ] || cs_fail "boards ran $((jobs0 + jobs1)) jobs; only the allowed client's 1 signature expected"
cs_log "the boards ran only the allowed client's signature (board0 $jobs0, board1 $jobs1)"
