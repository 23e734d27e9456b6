#!/bin/bash
# keystore-rollback.sh — issue 19 item 2: an older copy of keystore.db put
# back is noticed (cryptoserver-keystore(5) "Rollback"): the sealed counter
# file beside the master key (keystore.counter) keeps the highest state
# counter seen, and every state change raises it.
#  1. a copy taken, the user PIN changed (C_SetPIN), the copy put back: the
#     broker does not start (E: line naming both counters) and
#     cryptoserver-admin refuses; `cryptoserver-admin keystore
#     accept-rollback DIR` (logged) accepts it: the broker starts and the
#     old PIN is the PIN again;
#  1b. one row: the tenant row from before a PIN change put back (its MAC
#     is valid) is refused too (the state record's row digest);
#  2. the same after one wrong PIN (the failure counter: no lockout reset by
#     putting a copy back);
#  3. signing and a right PIN write nothing: a copy taken before them and
#     put back after them starts (no key pool configured: its seal and
#     restore are state changes).
. "$(dirname "$0")/lib.sh"

cs_setup
cs_require sqlite3
# Section 3 counts the keystore writes of signing itself: the audit log's
# checkpoints (each stop writes one, raising the counter: cryptoserver-audit(5),
# tests/integration/audit-log.sh) are off here.
"$CS_ADMIN" config set "$WORK/broker.conf" audit/enabled 0
T=$WORK/tmp
mkdir -p "$T"
DB=$WORK/keystore.db
COUNTER=$WORK/keystore.counter
login () { $P11 --login --pin "$1" -O > "$T/login.log" 2>&1; }
# No key pool: its seal at a stop and restore at a start are state changes
# (pool-issued-once.sh); here only the clients' acts change the keystore.
for bits in 2048 3072 4096; do "$CS_ADMIN" config set "$WORK/broker.conf" keys/pool-rsa-$bits 0; done
cs_expect_broker_log '^W: .* login: CKR_PIN_INCORRECT as user from client demo \(tenant demo\): 1 of 5 wrong PINs in a row$'

# db_counter FILE: the state counter of a keystore file (meta 'state').
db_counter () { sqlite3 "$1" "SELECT CAST (value AS TEXT) FROM meta WHERE name = 'state'" | awk '{ print $3 }'; }
file_counter () { awk '{ print $2 }' "$COUNTER"; }

# put_back: the copy goes back over keystore.db (the broker stopped).
put_back () { rm -f "$DB-wal" "$DB-shm"; cp "$T/copy.db" "$DB"; }

# start_refused_rollback WHAT: the broker exits with the rollback E: line.
start_refused_rollback () {
    local rc=0 want
    want="^E: .* keystore $DB: rolled back: its counter is $(db_counter "$DB"), the counter file $COUNTER says $(file_counter): refused; an operator accepts an older copy with 'cryptoserver-admin keystore accept-rollback'\$"
    [ "$(db_counter "$DB")" -lt "$(file_counter)" ] || cs_fail "$1: the copy's counter is not below the file's"
    SOFTHSM2_CONF=$WORK/softhsm2.conf CRYPTOSERVER_DRIVER_DIR=$top_builddir/shim-drivers/.libs \
        timeout --kill-after=5 $((30 * CS_TIME_FACTOR)) "$CS_BROKER" -c "$WORK/broker.conf" -f \
        > "$T/start.log" 2>&1 || rc=$?
    [ "$rc" != 0 ] || { cat "$T/start.log"; cs_fail "$1: the broker started on an older copy"; }
    [ "$rc" -lt 124 ] || { cat "$T/start.log"; cs_fail "$1: the broker hung or crashed (status $rc)"; }
    grep -Eq "$want" "$T/start.log" || { cat "$T/start.log"; cs_fail "$1: no line matching $want"; }
    cs_log "$1: refused: $(grep -E "$want" "$T/start.log" | sed "s/^.*[0-9]:[0-9][0-9]:[0-9][0-9] //")"
}

# restart: a fresh broker log, and the broker started.
restart () { mv "$WORK/broker.log" "$WORK/broker.log.$1"; cs_start; }

cs_start
login "$CRYPTOSERVER_PIN" || { cat "$T/login.log"; cs_fail "the PIN does not log in"; }
cs_stop
[ -s "$COUNTER" ] || cs_fail "no counter file beside the master key"
cp "$DB" "$T/copy.db"

# ---- 1. a PIN change, then the copy back --------------------------------------------------
restart 1
$P11 --login --pin "$CRYPTOSERVER_PIN" --change-pin --new-pin 4321 > "$T/set.log" 2>&1 \
    || { cat "$T/set.log"; cs_fail "C_SetPIN failed"; }
login 4321 || { cat "$T/login.log"; cs_fail "the new PIN does not log in"; }
cs_stop
put_back
start_refused_rollback "the copy from before the PIN change"
! "$CS_ADMIN" tenant list --dir "$WORK" > "$T/admin.log" 2>&1 || cs_fail "cryptoserver-admin opened the older copy"
grep -q "rolled back: its counter is" "$T/admin.log" || { cat "$T/admin.log"; cs_fail "cryptoserver-admin does not say why"; }
"$CS_ADMIN" keystore accept-rollback "$WORK" > "$T/accept.log" 2>&1 || { cat "$T/accept.log"; cs_fail "accept-rollback failed"; }
grep -q "^N: .* keystore $DB: rollback accepted by the operator: its counter was [0-9]*, the counter file $COUNTER said [0-9]*; both are [0-9]* now$" \
    "$T/accept.log" || { cat "$T/accept.log"; cs_fail "accept-rollback is not logged"; }
[ "$(db_counter "$DB")" = "$(file_counter)" ] || cs_fail "after accept-rollback the counters differ"
restart 2
login "$CRYPTOSERVER_PIN" || { cat "$T/login.log"; cs_fail "the accepted copy's PIN does not log in"; }
cs_log "accept-rollback: the broker starts on the accepted copy; its PIN logs in"
cs_stop

# ---- 1b. one row: the tenant row from before a PIN change put back ------------------------------
sqlite3 "$DB" "CREATE TABLE saved AS SELECT * FROM tenants WHERE name = 'demo'"
restart 2b
$P11 --login --pin "$CRYPTOSERVER_PIN" --change-pin --new-pin 4321 > "$T/set.log" 2>&1 \
    || { cat "$T/set.log"; cs_fail "C_SetPIN failed"; }
cs_stop
sqlite3 "$DB" "UPDATE tenants SET (user_pin, user_failures, user_epoch, mac) =
               (SELECT user_pin, user_failures, user_epoch, mac FROM saved) WHERE name = 'demo'; DROP TABLE saved"
rc=0
SOFTHSM2_CONF=$WORK/softhsm2.conf CRYPTOSERVER_DRIVER_DIR=$top_builddir/shim-drivers/.libs \
    timeout --kill-after=5 $((30 * CS_TIME_FACTOR)) "$CS_BROKER" -c "$WORK/broker.conf" -f > "$T/start.log" 2>&1 || rc=$?
[ "$rc" != 0 ] && [ "$rc" -lt 124 ] || { cat "$T/start.log"; cs_fail "the broker started (status $rc) on a replayed tenant row"; }
grep -Eq "^E: .* keystore $DB: its rows are not those its state record vouches for \(a row put back, deleted or added without the master key\): refused; an operator accepts them with 'cryptoserver-admin keystore accept-rollback'\$" \
    "$T/start.log" || { cat "$T/start.log"; cs_fail "no E: line for the replayed tenant row"; }
cs_log "the tenant row from before a PIN change put back (its MAC valid): the broker does not start"
"$CS_ADMIN" keystore accept-rollback "$WORK" > "$T/accept.log" 2>&1 || { cat "$T/accept.log"; cs_fail "accept-rollback failed"; }

# ---- 2. one wrong PIN, then the copy back -------------------------------------------------------
cp "$DB" "$T/copy.db"
restart 3
cs_expect_refusal CKR_PIN_INCORRECT "a wrong PIN" "$T/login.log" $P11 --login --pin 9999 -O
cs_stop
put_back
start_refused_rollback "the copy from before a wrong PIN"
"$CS_ADMIN" keystore accept-rollback "$WORK" > "$T/accept.log" 2>&1 || { cat "$T/accept.log"; cs_fail "accept-rollback failed"; }

# ---- 3. signatures write nothing ----------------------------------------------------------------
restart 4
cs_shell_start app demo
cs_shell app CKR_OK login "$CRYPTOSERVER_PIN"
cs_shell app CKR_OK keygen-signer 77 rollback
cs_shell_stop app
cs_stop
cp "$DB" "$T/copy.db"
restart 5
cs_shell_start app demo
cs_shell app CKR_OK login "$CRYPTOSERVER_PIN"
cs_shell app CKR_OK sign 77
cs_shell app CKR_OK sign 77
cs_shell_stop app
cs_stop
[ "$(db_counter "$DB")" = "$(db_counter "$T/copy.db")" ] || cs_fail "signing (or a right PIN) raised the counter"
put_back
restart 6
cs_log "signing and a right PIN write nothing: the copy from before them starts"
cs_stop
