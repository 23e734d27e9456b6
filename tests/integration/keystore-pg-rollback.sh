#!/bin/bash
# keystore-pg-rollback.sh — issue 19 item 2 on PostgreSQL (keystore/url;
# cryptoserver-keystore(5) "Rollback"): the state counter lives in the
# database, each broker keeps its own counter file beside its master key.
#  1. a copy of the database taken (CREATE DATABASE ... TEMPLATE), the user
#     PIN changed through the broker, the copy put back: the broker, whose
#     counter file saw the later state, does not start (E: line naming both
#     counters);
#  2. what is not detected, as documented: a second deployment (broker B's
#     directory, its own counter file) that neither wrote nor opened the
#     keystore since the copy was taken opens it;
#  3. `cryptoserver-admin keystore accept-rollback DIR`: the broker starts
#     and the PIN of the copy logs in.
. "$(dirname "$0")/lib.sh"

cs_setup
grep -q '^#define HAVE_LIBPQ 1' "$top_builddir/config.h" \
    || cs_missing_dependency "built without PostgreSQL support (libpq-dev; configure --with-postgresql)"
cs_pg_start
T=$WORK/tmp
mkdir -p "$T"
COUNTER=$WORK/keystore.counter
sed -i '/^    path = "keystore.db"$/d' "$WORK/broker.conf"
"$CS_ADMIN" config set "$WORK/broker.conf" keystore/url "$CS_PG_URL"
for bits in 2048 3072 4096; do "$CS_ADMIN" config set "$WORK/broker.conf" keys/pool-rsa-$bits 0; done
rm -f "$WORK/keystore.db"* "$COUNTER"
"$CS_ADMIN" tenant add demo --pin "$CRYPTOSERVER_PIN" --so-pin 123456 --dir "$WORK" > "$T/admin.log" 2>&1 \
    || { cat "$T/admin.log"; cs_fail "cryptoserver-admin cannot add the tenant to the PostgreSQL keystore"; }
WB=$WORK/b                      # broker B's deployment: the same keystore, its own counter file
mkdir -p "$WB"
cp "$WORK/broker.conf" "$WORK/master.key" "$WB/"
login () { $P11 --login --pin "$1" -O > "$T/login.log" 2>&1; }
db_counter () { cs_psql cryptoserver -tAc "SELECT convert_from (value, 'UTF8') FROM meta WHERE name = 'state'" | awk '{ print $3 }'; }
file_counter () { awk '{ print $2 }' "$COUNTER"; }

cs_start
login "$CRYPTOSERVER_PIN" || { cat "$T/login.log"; cs_fail "the PIN does not log in"; }
cs_stop
cs_psql postgres -qc "CREATE DATABASE snapshot TEMPLATE cryptoserver"

# ---- 1. the PIN changed, then the copy put back -----------------------------------------------
mv "$WORK/broker.log" "$WORK/broker.log.1"
cs_start
$P11 --login --pin "$CRYPTOSERVER_PIN" --change-pin --new-pin 4321 > "$T/set.log" 2>&1 \
    || { cat "$T/set.log"; cs_fail "C_SetPIN failed"; }
cs_stop
cs_psql postgres -qc "DROP DATABASE cryptoserver" -c "CREATE DATABASE cryptoserver TEMPLATE snapshot"
[ "$(db_counter)" -lt "$(file_counter)" ] || cs_fail "the copy's counter $(db_counter) is not below the file's $(file_counter)"
want="^E: .* keystore postgresql:///cryptoserver\\?host=.*: rolled back: its counter is $(db_counter), the counter file $COUNTER says $(file_counter): refused; an operator accepts an older copy with 'cryptoserver-admin keystore accept-rollback'\$"
rc=0
SOFTHSM2_CONF=$WORK/softhsm2.conf CRYPTOSERVER_DRIVER_DIR=$top_builddir/shim-drivers/.libs \
    timeout --kill-after=5 $((30 * CS_TIME_FACTOR)) "$CS_BROKER" -c "$WORK/broker.conf" -f > "$T/start.log" 2>&1 || rc=$?
[ "$rc" != 0 ] && [ "$rc" -lt 124 ] || { cat "$T/start.log"; cs_fail "the broker started (status $rc) on the older database"; }
grep -Eq "$want" "$T/start.log" || { cat "$T/start.log"; cs_fail "no line matching $want"; }
cs_log "the database put back to a copy from before a PIN change: the broker does not start"

# ---- 2. a deployment that did not see the later state does not notice ------------------------------
"$CS_ADMIN" tenant list --dir "$WB" > "$T/b.log" 2>&1 || { cat "$T/b.log"; cs_fail "B's first open failed"; }
grep -q "counter file $WB/keystore.counter started at $(db_counter)" "$T/b.log" \
    || { cat "$T/b.log"; cs_fail "B's counter file did not start at the database's counter"; }
cs_log "a deployment whose counter file never saw the later state opens the older database (documented)"

# ---- 3. the operator accepts the copy -----------------------------------------------------------------
"$CS_ADMIN" keystore accept-rollback "$WORK" > "$T/accept.log" 2>&1 || { cat "$T/accept.log"; cs_fail "accept-rollback failed"; }
grep -q "^N: .* rollback accepted by the operator: its counter was [0-9]*, the counter file $COUNTER said [0-9]*; both are [0-9]* now$" \
    "$T/accept.log" || { cat "$T/accept.log"; cs_fail "accept-rollback is not logged"; }
mv "$WORK/broker.log" "$WORK/broker.log.2"
cs_start
login "$CRYPTOSERVER_PIN" || { cat "$T/login.log"; cs_fail "the accepted copy's PIN does not log in"; }
cs_stop
cs_log "accept-rollback: the broker starts; the copy's PIN logs in"
