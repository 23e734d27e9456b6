#!/bin/bash
# keystore-tools.sh — issue 22 item 3: the operator's keystore tools on the
# SQLite keystore (cryptoserver-admin(8) "keystore copy|backup|restore",
# cryptoserver-keystore(5) "Copies and backups"):
#  1. copy: every tenant, key, object, issued and audit row lands in a new
#     keystore (counted with sqlite3, MACs checked by the tool); a re-run
#     writes nothing; the broker signs with the copied key (OpenSSL verifies);
#     a row changed without the master key in the source stops the copy,
#     and so does the source copied again once the broker wrote to the copy;
#  2. backup while a client signs in a loop (no signature fails), a key
#     added, another backup; restore of the newer one: the broker signs with
#     both keys; restore of the older one refused with the exact message and
#     nothing changed; --accept-rollback restores it (the newer key gone);
#  3. a backup file with one byte changed, or cut short, is refused.
# The PostgreSQL side is keystore-tools-pg.sh.
. "$(dirname "$0")/lib.sh"

cs_setup
cs_require sqlite3
T=$WORK/tmp
mkdir -p "$T"
DB=$WORK/keystore.db
COUNTER=$WORK/keystore.counter
rows () { sqlite3 "$1" "SELECT (SELECT count (*) FROM tenants) || ' ' || (SELECT count (*) FROM keys) || ' ' ||
                       (SELECT count (*) FROM objects) || ' ' || (SELECT count (*) FROM issued) || ' ' ||
                       (SELECT count (*) FROM audit)"; }
# shellcheck source=tests/integration/lib-kstools.sh
. "$(dirname "$0")/lib-kstools.sh"

# ---- 1. copy -------------------------------------------------------------------------------------
cs_start
kt_keygen a1
kt_sign a1 "the source"
cs_stop                     # the audit log's checkpoint at the stop: audit rows to copy
mkdir -p "$T/b"
cp "$WORK/broker.conf" "$WORK/master.key" "$T/b/"
"$CS_ADMIN" keystore copy --from "$WORK" --to "$T/b" > "$T/copy.log" 2>&1 || { cat "$T/copy.log"; cs_fail "copy failed"; }
want=$(rows "$DB")
[ "$(rows "$T/b/keystore.db")" = "$want" ] || cs_fail "copy: rows $(rows "$T/b/keystore.db"), the source has $want"
case $want in *" 0") cs_fail "no audit rows to copy ($want)";; esac
grep -q "copied: .* verified" "$T/copy.log" || { cat "$T/copy.log"; cs_fail "copy does not say it verified"; }
cs_log "copy: tenants keys objects issued audit = $want in both"
"$CS_ADMIN" keystore copy --from "$WORK" --to "$T/b" > "$T/copy2.log" 2>&1 || { cat "$T/copy2.log"; cs_fail "the re-run failed"; }
grep -q "; 0 tenant, 0 key, 0 object, 0 issued, 0 audit rows written$" "$T/copy2.log" \
    || { cat "$T/copy2.log"; cs_fail "the re-run wrote rows"; }
[ "$(rows "$T/b/keystore.db")" = "$want" ] || cs_fail "the re-run changed the counts"
cs_log "copy again: nothing written"
# The broker on the copy (same master key and counter file): the copied key signs.
"$CS_ADMIN" config set "$WORK/broker.conf" keystore/path "$T/b/keystore.db"
cs_start
kt_sign a1 "the copy"
cs_stop
cs_log "the broker on the copy signs with the copied key (OpenSSL verifies)"
# The copy is the same keystore moved (its identity, the same counter
# file): the broker has written to it, so the source is an older copy now.
DB=$T/b/keystore.db
mkdir -p "$T/a"
cp "$WORK/broker.conf" "$WORK/master.key" "$T/a/"
"$CS_ADMIN" config set "$T/a/broker.conf" keystore/path "$WORK/keystore.db"
! "$CS_ADMIN" keystore copy --from "$T/a" --to "$T/b" > "$T/older.log" 2>&1 || cs_fail "the older source was copied over the copy"
grep -q "^E: .* keystore $DB: the source is an older copy of it (counter [0-9]* < [0-9]*): not copied over it$" "$T/older.log" \
    || { cat "$T/older.log"; cs_fail "no E: line for the older source"; }
cs_log "the source copied again over the copy the broker wrote to: refused (an older copy)"
# A key row changed without the master key: the copy refuses it.
cp "$DB" "$T/bad.db"
sqlite3 "$T/bad.db" "UPDATE keys SET info = info || x'00' WHERE rowid = (SELECT min (rowid) FROM keys)"
mkdir -p "$T/bad" "$T/c"
cp "$WORK/broker.conf" "$WORK/master.key" "$T/bad/"
cp "$WORK/broker.conf" "$WORK/master.key" "$T/c/"
"$CS_ADMIN" config set "$T/bad/broker.conf" keystore/path "$T/bad.db"
! "$CS_ADMIN" keystore copy --from "$T/bad" --to "$T/c" > "$T/bad.log" 2>&1 || cs_fail "a changed key row was copied"
grep -q "its rows are not those its state record vouches for\|row MAC does not verify" "$T/bad.log" \
    || { cat "$T/bad.log"; cs_fail "no reason for the refused copy"; }
cs_log "a key row changed without the master key: the copy is refused"

# ---- 2. backup under load, restore, rollback refused ---------------------------------------------
# No audit checkpoints and no key pool: a stop then writes nothing, so the
# newer backup is the keystore as it stays (keystore-rollback.sh).
"$CS_ADMIN" config set "$WORK/broker.conf" audit/enabled 0
for bits in 2048 3072 4096; do "$CS_ADMIN" config set "$WORK/broker.conf" keys/pool-rsa-$bits 0; done
cs_start
"$CS_ADMIN" keystore backup --dir "$WORK" "$T/old.backup" > "$T/old.backup.log" 2>&1 || { cat "$T/old.backup.log"; cs_fail "backup failed"; }
kt_keygen a2
kt_backup_under_load a1 "$T/new.backup"
[ "$(stat -c %a "$T/new.backup")" = 600 ] || cs_fail "the backup file is not 0600"
! grep -q "kt-a2" "$T/new.backup" || cs_fail "the backup file is not encrypted"
cs_stop
kt_restore_signs "$T/new.backup" a1 a2
cs_log "restore of the newer backup: both keys sign"
before=$(rows "$DB")
kt_restore_refused "$T/old.backup"
[ "$(rows "$DB")" = "$before" ] || cs_fail "the refused restore changed the keystore"
cs_log "the refused restore changed nothing"
"$CS_ADMIN" keystore restore --dir "$WORK" --accept-rollback "$T/old.backup" > "$T/accept.log" 2>&1 \
    || { cat "$T/accept.log"; cs_fail "restore --accept-rollback failed"; }
[ "$(sqlite3 "$DB" "SELECT count (*) FROM keys WHERE tenant = 'demo'")" = 1 ] || cs_fail "the older backup's keys are not the keys"
cs_start
kt_sign a1 "after the accepted rollback"
cs_stop
cs_log "restore --accept-rollback: the older backup is the keystore, its key signs"

# ---- 3. a changed backup file --------------------------------------------------------------------
cp "$T/new.backup" "$T/bad.backup"
printf '\x5a' | dd of="$T/bad.backup" bs=1 seek=200 conv=notrunc 2>/dev/null
head -c 300 "$T/new.backup" > "$T/short.backup"
for f in bad short; do
    ! "$CS_ADMIN" keystore restore --dir "$WORK" --accept-rollback "$T/$f.backup" > "$T/$f.log" 2>&1 || cs_fail "the $f backup was restored"
    grep -q "^E: .* keystore $DB: the backup does not verify (changed, cut short, not a backup, or made under another master key): refused$" \
        "$T/$f.log" || { cat "$T/$f.log"; cs_fail "no E: line for the $f backup"; }
done
cs_log "a backup file changed by one byte, or cut short, is refused"
