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
# shellcheck source=tests/integration/lib-kstools.sh
. "$(dirname "$0")/lib-kstools.sh"

# ---- SQLite -> PostgreSQL ------------------------------------------------------------------------
cs_start
kt_keygen a1
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
kt_sign a1 "the database"
"$CS_ADMIN" keystore backup --dir "$WORK" "$T/old.backup" > "$T/old.backup.log" 2>&1 || { cat "$T/old.backup.log"; cs_fail "backup failed"; }
kt_keygen a2
kt_backup_under_load a1 "$T/new.backup"
cs_log "the broker on the database signs with the copied key"
cs_stop
kt_restore_signs "$T/new.backup" a1 a2
kt_restore_refused "$T/old.backup"
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
kt_sign a1 "the copy back"
kt_sign a2 "the copy back"
cs_stop
cs_log "copy PostgreSQL -> SQLite: rows $(pg_rows)in both; the broker on it signs with both keys"
