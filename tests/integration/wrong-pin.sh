#!/bin/bash
# wrong-pin.sh — C_Login with a wrong user PIN gives exactly CKR_PIN_INCORRECT,
# and the right PIN still works afterwards.
. "$(dirname "$0")/lib.sh"

cs_setup
cs_start

cs_expect_broker_log 'login: CKR_PIN_INCORRECT as user from client demo \(tenant demo\): [1-5] of 5 wrong PINs in a row$'
cs_expect_refusal CKR_PIN_INCORRECT "login with a wrong PIN" "$WORK/wrong.txt" \
    $P11 --login --pin 9999 -O
grep -q 'login: CKR_PIN_INCORRECT as user from client demo (tenant demo): 1 of 5 wrong PINs in a row$' "$WORK/broker.log" \
    || cs_fail "the broker log does not name the client that gave a wrong PIN"

$P11 --login --pin "$CRYPTOSERVER_PIN" -O > "$WORK/right.txt" 2>&1 \
    || { cat "$WORK/right.txt"; cs_fail "login with the right PIN failed after a wrong one"; }
grep -q "Private Key Object" "$WORK/right.txt" || cs_fail "no private keys after the right login"
cs_log "right PIN: logged in, private keys visible"
