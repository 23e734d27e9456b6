# lib-kstools.sh — what keystore-tools.sh and keystore-tools-pg.sh share
# (sourced after lib.sh and cs_setup, with $T a scratch directory): EC keys
# made and signed with through the module (OpenSSL verifies), a backup taken
# while a client signs in a loop, and the older backup's refused restore
# (issue #22 item 3).

# kt_keygen ID: an EC P-256 key pair CKA_ID ID on the token; its public key
# in $T/ID.pem.
kt_keygen () {
    $P11 --login --pin "$CRYPTOSERVER_PIN" --keypairgen --key-type EC:prime256v1 --id "$1" --label "kt-$1" \
        > "$T/gen-$1.log" 2>&1 || { cat "$T/gen-$1.log"; cs_fail "key $1 not generated"; }
    cs_pubkey_pem "$P11" "$1" "$T/$1.pem" || cs_fail "no public key of $1"
}

# kt_sign ID WHAT: key ID signs and OpenSSL verifies, else the test fails.
kt_sign () { cs_sign_verify "$P11" "$1" ec "$T/$1.pem" "$T" || cs_fail "$2: key $1 does not sign (or OpenSSL does not verify)"; }

# kt_backup_under_load ID FILE: `keystore backup --dir $WORK FILE` while a
# client signs with key ID in a loop (the broker running); fails the test
# when the backup or any signature fails.  The backup's output: $T/FILE's
# name .log.
kt_backup_under_load () {
    local id=$1 file=$2 load
    rm -rf "$T/load" "$T/load.stop" "$T/load.fail" "$T/load.count"
    mkdir -p "$T/load"
    ( n=0; while [ ! -e "$T/load.stop" ]; do
          cs_sign_verify "$P11" "$id" ec "$T/$id.pem" "$T/load" > /dev/null 2>&1 || echo "failed $n" >> "$T/load.fail"
          n=$((n + 1)); echo $n > "$T/load.count"
      done ) &
    load=$!
    cs_wait_until 60 test -s "$T/load.count" || cs_fail "the signing loop does not sign"
    "$CS_ADMIN" keystore backup --dir "$WORK" "$file" > "$file.log" 2>&1 || { cat "$file.log"; cs_fail "backup under load failed"; }
    sleep 1
    touch "$T/load.stop"
    wait $load
    [ ! -e "$T/load.fail" ] || cs_fail "signatures failed during the backup: $(cat "$T/load.fail")"
    cs_log "backup while $(cat "$T/load.count") signatures ran: none failed; $(cat "$file.log")"
}

# kt_restore_signs FILE ID...: `keystore restore --dir $WORK FILE` (the
# broker stopped), then the broker started: each key ID signs.
kt_restore_signs () {
    local file=$1 id
    shift
    "$CS_ADMIN" keystore restore --dir "$WORK" "$file" > "$T/restore.log" 2>&1 || { cat "$T/restore.log"; cs_fail "restore failed"; }
    cs_start
    for id in "$@"; do kt_sign "$id" "after the restore"; done
    cs_stop
}

# kt_restore_refused OLD: `keystore restore` of backup OLD (taken with
# `keystore backup`, its output in OLD.log) fails with the documented line.
kt_restore_refused () {
    local old=$1 counter at want
    counter=$(awk '{ print $2 }' "$WORK/keystore.counter")
    at=$(sed -n 's/.* at counter \([0-9]*\):.*/\1/p' "$old.log")
    ! "$CS_ADMIN" keystore restore --dir "$WORK" "$old" > "$T/refused.log" 2>&1 || cs_fail "the older backup was restored"
    want="cryptoserver-admin: restore refused: backup $old is at counter $at, below the keystore's rollback counter $counter: it would roll the keystore back; --accept-rollback restores it anyway"
    grep -qxF "$want" "$T/refused.log" || { cat "$T/refused.log"; cs_fail "no line: $want"; }
    cs_log "restore of the older backup refused: $want"
}
