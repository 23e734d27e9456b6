#!/bin/bash
# context-login.sh — keys with CKA_ALWAYS_AUTHENTICATE (PKCS#11 2.40 §4.9):
# each sign or decrypt operation needs C_Login (CKU_CONTEXT_SPECIFIC) with
# the user's PIN, and the broker enforces it (docs/CONTRACTS.md
# "Context-specific login").  cs-context-login checks the module's side with
# exact CKR_* codes; then cs-wire-client, a client that holds the demo
# client's CURVE key and a user login but skips the module, is refused a
# signature without a context ticket and with one made for another key,
# and gets one with the key's own; the broker logs the refusal.
. "$(dirname "$0")/lib.sh"

CLIENT=$top_builddir/tests/integration/cs-context-login
WIRE=$top_builddir/tests/integration/cs-wire-client
[ -x "$CLIENT" ] && [ -x "$WIRE" ] || cs_fail "cs-context-login or cs-wire-client is not built (make check builds them)"
cs_expect_broker_log 'login: CKR_PIN_INCORRECT as user from client demo \(tenant demo\): 1 of 5 wrong PINs'
cs_expect_broker_log 'has CKA_ALWAYS_AUTHENTICATE and the job no valid context ticket \(C_Login CKU_CONTEXT_SPECIFIC\): CKR_USER_NOT_LOGGED_IN'
cs_setup
cs_start
T=$WORK/tmp
mkdir -p "$T"

cs_run_bounded $((180 * CS_TIME_FACTOR)) "$T/client.log" $CS_CLIENT_WRAPPER "$CLIENT" "$CRYPTOSERVER_MODULE" \
    "$CRYPTOSERVER_TOKEN" "$CRYPTOSERVER_PIN" || { cat "$T/client.log"; cs_fail "cs-context-login failed"; }
sed 's/^/    /' "$T/client.log"

DIGEST=000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f
cs_wire CKR_USER_NOT_LOGGED_IN sign cs-aa-ec CKM_ECDSA "$DIGEST"
cs_wire CKR_USER_NOT_LOGGED_IN --context cs-plain-ec sign cs-aa-ec CKM_ECDSA "$DIGEST"
cs_wire CKR_USER_NOT_LOGGED_IN --context cs-aa-rsa sign cs-aa-ec CKM_ECDSA "$DIGEST"
cs_wire CKR_OK --context cs-aa-ec sign cs-aa-ec CKM_ECDSA "$DIGEST"
cs_wire CKR_OK sign cs-plain-ec CKM_ECDSA "$DIGEST"
grep -q "key ks:[0-9a-f]* has CKA_ALWAYS_AUTHENTICATE and the job no valid context ticket" "$WORK/broker.log" \
    || cs_fail "the broker did not log the refused job"
grep -q "context-specific for key ks:" "$WORK/broker.log" || cs_fail "the broker did not log the context logins"
cs_log "the broker refuses a key with CKA_ALWAYS_AUTHENTICATE to a client without its context ticket"
