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
cs_expect_broker_log 'login: CKR_PIN_INCORRECT as user from client pin \(tenant pin\): [1-5] of 5 wrong PINs in a row$'
cs_expect_broker_log 'login: CKR_PIN_LOCKED as user from client pin \(tenant pin\)$'
cs_expect_broker_log 'tenant pin: user PIN locked after 5 wrong PINs in a row, the last from client pin; every user login'
flags () { cs_p11_as pin -T 2>&1 | sed -n 's/^ *token flags *: *//p'; }

# cryptoserver-keystore(5): 5 wrong PINs in a row lock the user PIN; the
# 4th leaves CKF_USER_PIN_FINAL_TRY; every wrong one is CKR_PIN_INCORRECT.
for i in 1 2 3 4 5; do
    cs_expect_refusal CKR_PIN_INCORRECT "wrong PIN $i of 5" "$T/login.log" \
        cs_p11_as pin --login --pin 9999 -O
    case $i in
        1) flags | grep -q "user PIN count low" || cs_fail "1 wrong PIN: no CKF_USER_PIN_COUNT_LOW ($(flags))" ;;
        4) flags | grep -q "final user PIN try" || cs_fail "4 wrong PINs: no CKF_USER_PIN_FINAL_TRY ($(flags))" ;;
    esac
    if [ $i -lt 5 ] && flags | grep -q "user PIN locked"; then
        cs_fail "the PIN is locked after $i wrong PINs, not 5 ($(flags))"
    fi
done
flags | grep -q "user PIN locked" || cs_fail "5 wrong PINs: no CKF_USER_PIN_LOCKED ($(flags))"
cs_expect_refusal CKR_PIN_LOCKED "the right PIN while locked" "$T/login.log" \
    cs_p11_as pin --login --pin 1234 -O
cs_log "PIN locked after exactly 5 wrong PINs (flags: $(flags)); the right PIN then gives CKR_PIN_LOCKED"

cs_p11_as pin --init-pin --login --login-type so --so-pin 123456 --new-pin 4321 > "$T/init.log" 2>&1 \
    || { cat "$T/init.log"; cs_fail "C_InitPIN by the SO failed"; }
login 4321 || { cat "$T/login.log"; cs_fail "the new user PIN does not log in after C_InitPIN"; }
cs_log "SO reset the user PIN with C_InitPIN; the user logs in again"

cs_p11_as pin --change-pin --login --pin 4321 --new-pin 5678 > "$T/set.log" 2>&1 \
    || { cat "$T/set.log"; cs_fail "C_SetPIN failed"; }
login 5678 || { cat "$T/login.log"; cs_fail "the changed PIN does not log in"; }
cs_expect_refusal CKR_PIN_INCORRECT "the old PIN after C_SetPIN" "$T/login.log" \
    cs_p11_as pin --login --pin 4321 -O
cs_log "C_SetPIN works"

# Master key mismatch: another key in master.key, the broker must refuse to start.
cs_stop
(umask 077; openssl rand -hex 32 > "$WORK/master.key.other")
mv "$WORK/master.key" "$WORK/master.key.good"
mv "$WORK/master.key.other" "$WORK/master.key"
set +e
SOFTHSM2_CONF=$WORK/softhsm2.conf CRYPTOSERVER_DRIVER_DIR=$top_builddir/shim-drivers/.libs \
    timeout --kill-after=5 $((30 * CS_TIME_FACTOR)) "$CS_BROKER" -c "$WORK/broker.conf" -f > "$T/mismatch.log" 2>&1
rc=$?
set -e
mv "$WORK/master.key.good" "$WORK/master.key"
cat "$T/mismatch.log" | tail -n 5
[ "$rc" != 0 ] || cs_fail "the broker started with a wrong master key"
[ "$rc" -lt 124 ] || cs_fail "the broker hung or crashed (status $rc) on a wrong master key"
grep -q "master key does not match" "$T/mismatch.log" \
    || cs_fail "no 'master key does not match' line in the broker's log"
cs_log "wrong master key: the broker exits with status $rc and says 'master key does not match'"
