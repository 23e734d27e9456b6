#!/bin/bash
# keys-pin.sh — PIN life cycle of a tenant: a wrong PIN gives
# CKR_PIN_INCORRECT, repeated wrong PINs lock it (CKR_PIN_LOCKED even for the
# right PIN), the SO unlocks with C_InitPIN and the user logs in again,
# C_SetPIN changes the PIN; a master key that does not match the keystore
# makes the broker exit non-zero with a clear log line, never a crash.
. "$(dirname "$0")/lib.sh"

cs_setup --tenant pin
cs_start
T=$WORK/tmp
mkdir -p "$T"
login () { cs_p11_as pin --login --pin "$1" -O > "$T/login.log" 2>&1; }

login 9999 && cs_fail "a wrong PIN logged in"
grep -q CKR_PIN_INCORRECT "$T/login.log" || { cat "$T/login.log"; cs_fail "wrong PIN: not CKR_PIN_INCORRECT"; }
cs_log "wrong PIN: CKR_PIN_INCORRECT"

locked=
for i in 1 2 3 4 5 6 7 8 9 10; do
    login 9999 && cs_fail "a wrong PIN logged in"
    if grep -q CKR_PIN_LOCKED "$T/login.log"; then locked=$i; break; fi
    grep -q CKR_PIN_INCORRECT "$T/login.log" || { cat "$T/login.log"; cs_fail "wrong PIN $i: neither INCORRECT nor LOCKED"; }
done
[ -n "$locked" ] || cs_fail "10 more wrong PINs did not lock the PIN"
login 1234 && cs_fail "the right PIN logged in while locked"
grep -q CKR_PIN_LOCKED "$T/login.log" || { cat "$T/login.log"; cs_fail "right PIN while locked: not CKR_PIN_LOCKED"; }
cs_p11_as pin -T > "$T/flags.txt" 2>&1 || true
grep -qi "locked" "$T/flags.txt" && cs_log "token flags show the lock: $(grep -i flags "$T/flags.txt" | head -1)"
cs_log "PIN locked after $locked wrong PINs in a row; the right PIN then gives CKR_PIN_LOCKED"

cs_p11_as pin --init-pin --login --login-type so --so-pin 123456 --new-pin 4321 > "$T/init.log" 2>&1 \
    || { cat "$T/init.log"; cs_fail "C_InitPIN by the SO failed"; }
login 4321 || { cat "$T/login.log"; cs_fail "the new user PIN does not log in after C_InitPIN"; }
cs_log "SO reset the user PIN with C_InitPIN; the user logs in again"

cs_p11_as pin --change-pin --login --pin 4321 --new-pin 5678 > "$T/set.log" 2>&1 \
    || { cat "$T/set.log"; cs_fail "C_SetPIN failed"; }
login 5678 || { cat "$T/login.log"; cs_fail "the changed PIN does not log in"; }
login 4321 && cs_fail "the old PIN still logs in after C_SetPIN"
cs_log "C_SetPIN works"

# Master key mismatch: another key in master.key, the broker must refuse to start.
cs_stop
(umask 077; openssl rand -hex 32 > "$WORK/master.key.other")
mv "$WORK/master.key" "$WORK/master.key.good"
mv "$WORK/master.key.other" "$WORK/master.key"
set +e
SOFTHSM2_CONF=$WORK/softhsm2.conf CRYPTOSERVER_DRIVER_DIR=$top_builddir/shim-drivers/.libs \
    timeout --kill-after=5 30 "$CS_BROKER" -c "$WORK/broker.conf" -f > "$T/mismatch.log" 2>&1
rc=$?
set -e
mv "$WORK/master.key.good" "$WORK/master.key"
cat "$T/mismatch.log" | tail -n 5
[ "$rc" != 0 ] || cs_fail "the broker started with a wrong master key"
[ "$rc" -lt 124 ] || cs_fail "the broker hung or crashed (status $rc) on a wrong master key"
grep -q "master key does not match" "$T/mismatch.log" \
    || cs_fail "no 'master key does not match' line in the broker's log"
cs_log "wrong master key: the broker exits with status $rc and says 'master key does not match'"
