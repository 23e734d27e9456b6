#!/bin/bash
# keystore-tools-pg.sh — issue 22 item 3 with PostgreSQL (a private cluster,
# cs_pg_start, as keystore-pg.sh): `cryptoserver-admin keystore copy` from the
# SQLite keystore into the database (every row counted with psql, audit rows
# included; a re-run writes nothing), the broker on the database signs with
# the copied key (OpenSSL verifies) and generates another; a backup of the
# database while a client signs in a loop (none fails; REPEATABLE READ
# snapshot), restored, both keys sign; an older backup refused; then the
# database copied back into a new SQLite keystore, where both keys sign.
. "$(dirname "$0")/lib.sh"

cs_setup
cs_require sqlite3
grep -q '^#define HAVE_LIBPQ 1' "$top_builddir/config.h" \
    || cs_missing_dependency "built without PostgreSQL support (libpq-dev; configure --with-postgresql)"
cs_pg_start kstools
T=$WORK/tmp
mkdir -p "$T"
COUNTER=$WORK/keystore.counter
tables="tenants keys objects issued audit"
sqlite_rows () { local t; for t in $tables; do printf '%s ' "$(sqlite3 "$1" "SELECT count (*) FROM $t")"; done; }
pg_rows () { local t; for t in $tables; do printf '%s ' "$(cs_psql kstools -tAc "SELECT count (*) FROM $t")"; done; }
keygen () {
    $P11 --login --pin "$CRYPTOSERVER_PIN" --keypairgen --key-type EC:prime256v1 --id "$1" --label "kt-$1" \
        > "$T/gen-$1.log" 2>&1 || { cat "$T/gen-$1.log"; cs_fail "key $1 not generated"; }
    cs_pubkey_pem "$P11" "$1" "$T/$1.pem" || cs_fail "no public key of $1"
}
sign () { cs_sign_verify "$P11" "$1" ec "$T/$1.pem" "$T" || cs_fail "$2: key $1 does not sign (or OpenSSL does not verify)"; }

# ---- SQLite -> PostgreSQL ------------------------------------------------------------------------
cs_start
keygen a1
cs_stop                     # audit rows (the checkpoint at the stop) to copy
"$CS_ADMIN" keystore copy --from "$WORK" --to "$CS_PG_URL" > "$T/copy.log" 2>&1 || { cat "$T/copy.log"; cs_fail "copy to PostgreSQL failed"; }
want=$(sqlite_rows "$WORK/keystore.db")
[ "$(pg_rows)" = "$want" ] || cs_fail "copy: the database has rows $(pg_rows), the file $want"
case $want in *" 0 ") cs_fail "no audit rows to copy ($want)";; esac
"$CS_ADMIN" keystore copy --from "$WORK" --to "$CS_PG_URL" > "$T/copy2.log" 2>&1 || { cat "$T/copy2.log"; cs_fail "the re-run failed"; }
grep -q "; 0 tenant, 0 key, 0 object, 0 issued, 0 audit rows written$" "$T/copy2.log" \
    || { cat "$T/copy2.log"; cs_fail "the re-run wrote rows"; }
cs_log "copy SQLite -> PostgreSQL: tenants keys objects issued audit = $want; a re-run writes nothing"

# The broker on the database: no audit checkpoints, no key pool (a stop then
# writes nothing: the newer backup stays current; keystore-rollback.sh).
cp "$WORK/broker.conf" "$T/broker.conf.sqlite"
sed -i '/^keystore$/,/^[a-z]/ { /^    path = /d }' "$WORK/broker.conf"
"$CS_ADMIN" config set "$WORK/broker.conf" keystore/url "$CS_PG_URL"
"$CS_ADMIN" config set "$WORK/broker.conf" audit/enabled 0
for bits in 2048 3072 4096; do "$CS_ADMIN" config set "$WORK/broker.conf" keys/pool-rsa-$bits 0; done
cs_start
sign a1 "the database"
"$CS_ADMIN" keystore backup --dir "$WORK" "$T/old.backup" > "$T/backup1.log" 2>&1 || { cat "$T/backup1.log"; cs_fail "backup failed"; }
keygen a2
mkdir -p "$T/load"
( n=0; while [ ! -e "$T/load.stop" ]; do
      cs_sign_verify "$P11" a1 ec "$T/a1.pem" "$T/load" > /dev/null 2>&1 || echo "failed $n" >> "$T/load.fail"
      n=$((n + 1)); echo $n > "$T/load.count"
  done ) &
LOAD=$!
cs_wait_until 60 test -s "$T/load.count" || cs_fail "the signing loop does not sign"
"$CS_ADMIN" keystore backup --dir "$WORK" "$T/new.backup" > "$T/backup2.log" 2>&1 || { cat "$T/backup2.log"; cs_fail "backup under load failed"; }
sleep 1
touch "$T/load.stop"
wait $LOAD
[ ! -e "$T/load.fail" ] || cs_fail "signatures failed during the backup: $(cat "$T/load.fail")"
cs_log "the broker on the database signs with the copied key; backup while $(cat "$T/load.count") signatures ran: none failed"
cs_stop
"$CS_ADMIN" keystore restore --dir "$WORK" "$T/new.backup" > "$T/restore.log" 2>&1 || { cat "$T/restore.log"; cs_fail "restore failed"; }
cs_start
sign a1 "after the restore"
sign a2 "after the restore"
cs_stop
counter=$(awk '{ print $2 }' "$COUNTER")
old=$(sed -n 's/.* at counter \([0-9]*\):.*/\1/p' "$T/backup1.log")
! "$CS_ADMIN" keystore restore --dir "$WORK" "$T/old.backup" > "$T/refused.log" 2>&1 || cs_fail "the older backup was restored"
want="cryptoserver-admin: restore refused: backup $T/old.backup is at counter $old, below the keystore's rollback counter $counter: it would roll the keystore back; --accept-rollback restores it anyway"
grep -qxF "$want" "$T/refused.log" || { cat "$T/refused.log"; cs_fail "no line: $want"; }
cs_log "restore of the newer backup: both keys sign; the older one refused"

# ---- PostgreSQL -> SQLite ------------------------------------------------------------------------
mkdir -p "$T/c"
cp "$T/broker.conf.sqlite" "$WORK/master.key" "$T/c/"
mv "$T/c/broker.conf.sqlite" "$T/c/broker.conf"
"$CS_ADMIN" keystore copy --from "$CS_PG_URL" --to "$T/c" --dir "$WORK" > "$T/back.log" 2>&1 || { cat "$T/back.log"; cs_fail "copy to SQLite failed"; }
[ "$(sqlite_rows "$T/c/keystore.db")" = "$(pg_rows)" ] || cs_fail "copy back: the file has rows $(sqlite_rows "$T/c/keystore.db"), the database $(pg_rows)"
cp "$T/broker.conf.sqlite" "$WORK/broker.conf"
"$CS_ADMIN" config set "$WORK/broker.conf" keystore/path "$T/c/keystore.db"
cs_start
sign a1 "the copy back"
sign a2 "the copy back"
cs_stop
cs_log "copy PostgreSQL -> SQLite: rows $(pg_rows)in both; the broker on it signs with both keys"
