#!/bin/bash
# keystore-rotate.sh — issue #22 item 3: `cryptoserver-admin master-key
# rotate` while a broker signs (cryptoserver-keystore(5) "The master key"):
#  1. an EC key generated in the keystore signs (openssl verifies); a copy
#     of the keystore and of the master key file are taken;
#  2. signatures go on during the rotation and after it, from the running
#     broker's cached key, every one verified with openssl;
#  3. the master key file holds a new key, FILE.new is gone; the broker
#     restarted with it signs; the old key no longer opens the keystore;
#  4. the copy from before, with the old key, is refused by the rollback
#     counter (the counter file beside the key).
. "$(dirname "$0")/lib.sh"

cs_setup
cs_require sqlite3
cs_require openssl
T=$WORK/tmp
mkdir -p "$T/loop"
DB=$WORK/keystore.db
KEY=$WORK/master.key
COUNTER=$WORK/keystore.counter
# Nothing but the clients writes: no audit checkpoints, no key pool (their
# writes at a stop would be refused after the rotation, by design).
"$CS_ADMIN" config set "$WORK/broker.conf" audit/enabled 0
for bits in 2048 3072 4096; do "$CS_ADMIN" config set "$WORK/broker.conf" keys/pool-rsa-$bits 0; done
P11L="$P11 --login --pin $CRYPTOSERVER_PIN"

# ---- 1. a key, a copy -------------------------------------------------------------------------
cs_start
cs_run_bounded 120 "$T/gen.log" $P11L --keypairgen --key-type EC:prime256v1 --label rot --id 71 \
    --usage-sign || { cat "$T/gen.log"; cs_fail "--keypairgen failed"; }
cs_pubkey_pem "$P11" 71 "$T/rot.pub.pem" || cs_fail "cannot read the public key"
cs_sign_verify "$P11" 71 ec "$T/rot.pub.pem" "$T" || cs_fail "no signature before the rotation"
sqlite3 "$DB" ".backup '$T/old.db'"
cp "$KEY" "$T/old.key"

# ---- 2. rotation while signing ------------------------------------------------------------------
( for i in $(seq 1 15); do
      cs_sign_verify "$P11" 71 ec "$T/rot.pub.pem" "$T/loop" || { echo "signature $i failed"; exit 1; }
  done ) > "$T/loop.log" 2>&1 &
loop=$!
"$CS_ADMIN" master-key rotate --dir "$WORK" > "$T/rotate.log" 2>&1 || { cat "$T/rotate.log"; cs_fail "rotate failed"; }
grep -q "^rotated the master key of $DB; the old $KEY shredded" "$T/rotate.log" \
    || { cat "$T/rotate.log"; cs_fail "rotate does not say what it did"; }
grep -q "^N: .* keystore $DB: master key rotated by the operator; its counter is [0-9]* now$" "$T/rotate.log" \
    || { cat "$T/rotate.log"; cs_fail "the rotation is not logged"; }
wait "$loop" || { cat "$T/loop.log"; cs_fail "signing failed while the master key was rotated"; }
for i in 1 2 3; do
    cs_sign_verify "$P11" 71 ec "$T/rot.pub.pem" "$T" || cs_fail "the running broker stopped signing after the rotation"
done
cs_log "15 signatures during the rotation and 3 after it, from the running broker, verify"

# ---- 3. the new key ------------------------------------------------------------------------------
[ ! -e "$KEY.new" ] || cs_fail "$KEY.new is left"
[ "$(stat -c %a "$KEY")" = 600 ] || cs_fail "the new key file is not 0600"
! cmp -s "$KEY" "$T/old.key" || cs_fail "the master key file still holds the old key"
grep -q "$(cat "$T/old.key")" "$KEY" && cs_fail "the old key is in the key file"
cs_stop
mv "$WORK/broker.log" "$WORK/broker.log.1"
cs_start
cs_sign_verify "$P11" 71 ec "$T/rot.pub.pem" "$T" || cs_fail "the broker restarted with the new key does not sign"
$P11L -O > "$T/objects.txt" 2>&1 || cs_fail "no key list after the restart"
grep -q "label: *rot$" "$T/objects.txt" || { cat "$T/objects.txt"; cs_fail "the key is not listed"; }
cs_stop
! "$CS_ADMIN" tenant list --dir "$WORK" --master-key "$T/old.key" > "$T/old-key.log" 2>&1 \
    || cs_fail "the old master key still opens the keystore"
grep -q "master key does not match" "$T/old-key.log" || { cat "$T/old-key.log"; cs_fail "the old key: no reason"; }
cs_log "the new key is in $KEY (0600), the broker restarted with it signs; the old key is refused"

# ---- 4. the copy from before, with its key ---------------------------------------------------------
db_counter () { sqlite3 "$1" "SELECT CAST (value AS TEXT) FROM meta WHERE name = 'state'" | awk '{ print $3 }'; }
rm -f "$DB-wal" "$DB-shm"
cp "$T/old.db" "$DB"
install -m 600 "$T/old.key" "$KEY"
want="^E: .* keystore $DB: rolled back: its counter is $(db_counter "$DB"), the counter file $COUNTER says $(awk '{ print $2 }' "$COUNTER"): refused"
rc=0
SOFTHSM2_CONF=$WORK/softhsm2.conf CRYPTOSERVER_DRIVER_DIR=$top_builddir/shim-drivers/.libs \
    timeout --kill-after=5 $((30 * CS_TIME_FACTOR)) "$CS_BROKER" -c "$WORK/broker.conf" -f > "$T/start.log" 2>&1 || rc=$?
[ "$rc" != 0 ] || { cat "$T/start.log"; cs_fail "the broker started on the old copy with the old key"; }
[ "$rc" -lt 124 ] || { cat "$T/start.log"; cs_fail "the broker hung or crashed (status $rc)"; }
grep -Eq "$want" "$T/start.log" || { cat "$T/start.log"; cs_fail "no line matching $want"; }
cs_log "the old copy with the old key is refused: $(grep -E "$want" "$T/start.log" | sed 's/^.*[0-9]:[0-9][0-9]:[0-9][0-9] //')"
