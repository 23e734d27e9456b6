#!/bin/bash
# wrong-pin.sh — C_Login with a wrong user PIN gives exactly CKR_PIN_INCORRECT,
# and the right PIN still works afterwards.
. "$(dirname "$0")/lib.sh"

cs_setup
cs_start

if $P11 --login --pin 9999 -O > "$WORK/wrong.txt" 2>&1; then
    cat "$WORK/wrong.txt"; cs_fail "login with a wrong PIN succeeded"
fi
cat "$WORK/wrong.txt"
grep -q "CKR_PIN_INCORRECT" "$WORK/wrong.txt" || cs_fail "a wrong PIN did not give CKR_PIN_INCORRECT"
cs_log "wrong PIN: CKR_PIN_INCORRECT"

$P11 --login --pin "$CRYPTOSERVER_PIN" -O > "$WORK/right.txt" 2>&1 \
    || { cat "$WORK/right.txt"; cs_fail "login with the right PIN failed after a wrong one"; }
grep -q "Private Key Object" "$WORK/right.txt" || cs_fail "no private keys after the right login"
cs_log "right PIN: logged in, private keys visible"
