#!/bin/bash
# secret-keys.sh — secret keys and symmetric mechanisms (issue #10, first
# slice) from a small C client (cs-sym), every result checked by OpenSSL:
# AES-ECB/CBC/CBC-PAD/GCM and SHA256-HMAC with imported and generated session
# keys run on the broker's openssl board; the AES-256-CBC-PAD ciphertext of
# the module is also decrypted by `openssl enc`; pkcs11-tool lists the
# mechanisms; the key values never reach the broker's log or keystore.
. "$(dirname "$0")/lib.sh"

CLIENT=$top_builddir/tests/integration/cs-sym
[ -x "$CLIENT" ] || cs_fail "$CLIENT is not built (make check builds it)"
cs_require pkcs11-tool
cs_setup
cs_start
T=$WORK/tmp
mkdir -p "$T"

# The table's mechanisms reach the application (pkcs11-tool names them).
mechs=$(pkcs11-tool --module "$CRYPTOSERVER_MODULE" --token-label "$CRYPTOSERVER_TOKEN" -M 2>&1)
for m in AES-ECB AES-CBC AES-CBC-PAD AES-GCM SHA256-HMAC AES-KEY-GEN GENERIC-SECRET-KEY-GEN; do
    grep -q "^ *$m[ ,]" <<<"$mechs" || { echo "$mechs"; cs_fail "pkcs11-tool -M does not list $m"; }
done
cs_log "pkcs11-tool -M lists the AES, HMAC and secret-key generation mechanisms"

cs_run_bounded $((120 * CS_TIME_FACTOR)) "$T/client.log" $CS_CLIENT_WRAPPER "$CLIENT" "$CRYPTOSERVER_MODULE" \
    "$CRYPTOSERVER_TOKEN" "$CRYPTOSERVER_PIN" "$T" || { cat "$T/client.log"; cs_fail "cs-sym failed"; }
sed 's/^/    /' "$T/client.log"

# openssl enc decrypts what the module encrypted, and encrypts to the same bytes.
K=$(od -An -tx1 -v "$T/key.bin" | tr -d ' \n')
IV=$(od -An -tx1 -v "$T/iv.bin" | tr -d ' \n')
openssl enc -d -aes-256-cbc -K "$K" -iv "$IV" -in "$T/ct.bin" -out "$T/back.bin" \
    || cs_fail "openssl enc cannot decrypt the module's AES-256-CBC-PAD ciphertext"
cmp -s "$T/back.bin" "$T/plain.bin" || cs_fail "openssl enc decrypts the module's ciphertext to other bytes"
openssl enc -aes-256-cbc -K "$K" -iv "$IV" -in "$T/plain.bin" -out "$T/ct-openssl.bin"
cmp -s "$T/ct-openssl.bin" "$T/ct.bin" || cs_fail "openssl enc's AES-256-CBC ciphertext differs from the module's"
cs_log "openssl enc -aes-256-cbc agrees with the module's CKM_AES_CBC_PAD"

# openssl dgst computes the module's CKM_SHA256_HMAC.
HK=$(od -An -tx1 -v "$T/hmac-key.bin" | tr -d ' \n')
want=$(openssl dgst -sha256 -mac HMAC -macopt "hexkey:$HK" -r "$T/hmac-msg.bin" | cut -d' ' -f1)
got=$(od -An -tx1 -v "$T/hmac.bin" | tr -d ' \n')
[ -n "$want" ] && [ "$got" = "$want" ] || cs_fail "the module's HMAC $got is not openssl dgst's $want"
cs_log "openssl dgst -sha256 -mac HMAC agrees with the module's CKM_SHA256_HMAC"

# The key values travelled inside jobs only.
cs_stop
python3 - "$T/key.bin" "$WORK/keystore.db" "$WORK/broker.log" <<'PY' || cs_fail "an AES key value is on disk or in the log"
import sys
key = open(sys.argv[1], "rb").read()
for path in sys.argv[2:]:
    try:
        data = open(path, "rb").read()
    except FileNotFoundError:
        continue
    for i in range(len(key) - 15):
        if key[i:i + 16] in data or key[i:i + 16].hex().encode() in data:
            sys.exit(1)
PY
shred -u "$T/key.bin" "$T/hmac-key.bin" 2>/dev/null || true
