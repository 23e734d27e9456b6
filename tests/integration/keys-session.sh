#!/bin/bash
# keys-session.sh — per-request keys (session objects, CKA_TOKEN=FALSE) from
# a small C client (cs-session-key): a generated P-256 pair and an RSA key
# made with C_CreateObject sign, OpenSSL verifies, the keystore gets no new
# row, and after C_CloseSession the handles are CKR_OBJECT_HANDLE_INVALID.
. "$(dirname "$0")/lib.sh"

CLIENT=$top_builddir/tests/integration/cs-session-key
[ -x "$CLIENT" ] || cs_fail "$CLIENT is not built (make check builds it)"
cs_setup
cs_start
T=$WORK/tmp
mkdir -p "$T"
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$T/rsa.pem" 2>/dev/null
openssl pkey -in "$T/rsa.pem" -outform DER -out "$T/rsa.der"

rows_before=$(cs_keystore_rows demo)
cs_run_bounded $((120 * CS_TIME_FACTOR)) "$T/client.log" $CS_CLIENT_WRAPPER "$CLIENT" "$CRYPTOSERVER_MODULE" "$CRYPTOSERVER_TOKEN" \
    "$CRYPTOSERVER_PIN" "$T/rsa.der" || { cat "$T/client.log"; cs_fail "cs-session-key failed"; }
sed 's/^/    /' "$T/client.log"
rows_after=$(cs_keystore_rows demo)
[ "$rows_after" = "$rows_before" ] \
    || cs_fail "the keystore went from $rows_before to $rows_after rows: a session key was stored"
cs_log "per-request keys sign and verify; no keystore row; gone after C_CloseSession"

# The per-request RSA key travelled inside jobs: it must not be on disk or in the log.
cs_stop
cs_no_secret_in "$T/rsa.pem" "$WORK/keystore.db" "$WORK/keystore.db-wal" "$WORK/broker.log"
shred -u "$T/rsa.pem" "$T/rsa.der" 2>/dev/null || true
