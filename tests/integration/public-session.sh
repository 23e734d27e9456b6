#!/bin/bash
# public-session.sh — public session objects without C_Login (issue 21;
# docs/CONTRACTS.md "Login tickets", cryptoserver-pkcs11(7) PUBLIC SESSION
# OBJECTS).  Through the module (clients/public_session_test.py, PyKCS11):
# in a read-only and a read-write public session, AES-256 (CBC-PAD, GCM),
# HMAC-SHA256, EC P-256 and RSA-2048 session keys with CKA_PRIVATE FALSE are
# generated or created and used, every result checked against OpenSSL;
# private and token objects are refused (CKR_USER_NOT_LOGGED_IN,
# CKR_SESSION_READ_ONLY), and so is a token key once logged out.  No
# keystore row is added.  Then straight to the broker (cs-wire-client
# --drop-ticket): a job naming a server-held key (a keystore key "ks:", a
# board key "board:") without the ticket is CKR_USER_NOT_LOGGED_IN, with it
# CKR_OK.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/clients/common.sh"

cs_require openssl
PY=
for candidate in ${CS_PYTHON:-} "$(command -v python3 || true)" /usr/bin/python3; do
    [ -n "$candidate" ] && [ -x "$candidate" ] || continue
    if "$candidate" -c 'import PyKCS11' >/dev/null 2>&1; then PY=$candidate; break; fi
done
[ -n "$PY" ] || cs_missing_dependency "no python3 with PyKCS11 (install python3-pykcs11)"
WIRE=$top_builddir/tests/integration/cs-wire-client
[ -x "$WIRE" ] || cs_fail "$WIRE is not built (make check builds it)"
cs_setup
cs_client_trap
cs_start
T=$WORK/tmp
mkdir -p "$T"

rows_before=$(cs_keystore_rows demo)
rc=0
timeout --kill-after=5 $((120 * CS_TIME_FACTOR)) "$PY" "$CS_CLIENTS_DIR/public_session_test.py" \
    "$CRYPTOSERVER_MODULE" "$CRYPTOSERVER_TOKEN" "$CRYPTOSERVER_PIN" "$T" || rc=$?
[ "$rc" = 0 ] || cs_fail "public_session_test.py failed (status $rc)"
rows_after=$(cs_keystore_rows demo)
[ "$rows_after" = "$rows_before" ] \
    || cs_fail "the keystore went from $rows_before to $rows_after rows: a public session key was stored"

$P11 --login --pin "$CRYPTOSERVER_PIN" --keypair --key-type EC:prime256v1 --label pub-wire-ec \
    --usage-sign >"$T/keygen.log" 2>&1 || { cat "$T/keygen.log"; cs_fail "pkcs11-tool --keypair failed"; }
DIGEST=$(printf 'public' | openssl dgst -sha256 -r | cut -d' ' -f1)
cs_wire CKR_USER_NOT_LOGGED_IN --drop-ticket sign pub-wire-ec CKM_ECDSA "$DIGEST"
cs_wire CKR_OK sign pub-wire-ec CKM_ECDSA "$DIGEST"
cs_wire CKR_USER_NOT_LOGGED_IN --drop-ticket sign p256 CKM_ECDSA "$DIGEST"
cs_wire CKR_OK sign p256 CKM_ECDSA "$DIGEST"
cs_log "public session objects work without a login; server-held keys still need the ticket"
