#!/bin/bash
# curves.sh — Ed448, X25519/X448 and the unlisted-curve answer through the
# module (cs-curves, issue #21): RFC 8032 §7.4 and generated keys checked
# by C_Verify and OpenSSL; secp256k1 is CKR_CURVE_NOT_SUPPORTED.
. "$(dirname "$0")/lib.sh"

CLIENT=$top_builddir/tests/integration/cs-curves
[ -x "$CLIENT" ] || cs_fail "$CLIENT is not built (make check builds it)"
cs_setup
cs_start
T=$WORK/tmp
mkdir -p "$T"

cs_run_bounded $((120 * CS_TIME_FACTOR)) "$T/client.log" $CS_CLIENT_WRAPPER "$CLIENT" "$CRYPTOSERVER_MODULE" \
    "$CRYPTOSERVER_TOKEN" "$CRYPTOSERVER_PIN" || { cat "$T/client.log"; cs_fail "cs-curves failed"; }
sed 's/^/    /' "$T/client.log"
cs_stop
cs_log "every listed curve works through the module; an unlisted one is CKR_CURVE_NOT_SUPPORTED"
