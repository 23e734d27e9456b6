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
stray_key=$(sed -n 's/^ *public-key = "\(.*\)"$/\1/p' "$WORK/stray/client.cert")
[ -n "$stray_key" ] || cs_fail "no public-key in $WORK/stray/client.cert"
# DESIGN §6 / docs/CONTRACTS.md: a broker that refuses the client's key is a
# device error (CKR_DEVICE_REMOVED is only for "no broker reachable").
started=$(date +%s)
CRYPTOSERVER_CONF=$WORK/stray/client.conf cs_expect_refusal CKR_DEVICE_ERROR \
    "an unknown client's login and sign" "$WORK/stray.txt" \
    pkcs11-tool --module "$CRYPTOSERVER_MODULE" --slot 0 --login --pin "$CRYPTOSERVER_PIN" \
    --sign --id 01 --mechanism SHA256-RSA-PKCS --input-file "$WORK/msg.txt" --output-file "$WORK/stray.sig"
elapsed=$(( $(date +%s) - started ))
[ "$elapsed" -le $((10 * CS_TIME_FACTOR)) ] \
    || cs_fail "an unknown client waited ${elapsed}s for its error (timeout-ms 3000)"
[ ! -s "$WORK/stray.sig" ] || cs_fail "an unknown client got a signature"
grep -qF -- "denied (CURVE) client_key=$stray_key" "$WORK/broker.log" \
    || cs_fail "the broker log does not show the unknown key ($stray_key) denied"
cs_log "unknown client: CKR_DEVICE_ERROR after ${elapsed}s; the broker log shows its key denied"

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
