#!/bin/bash
# pool-issued-once.sh — issue 19 item 7: a pre-generated key is issued once,
# ever (broker/keys/pool_store.h).  The pool (keys/pool-rsa-2048 = 1) fills and
# a stop seals its key K in the keystore (tenant @pool); an attacker with
# write access to keystore.db keeps K's row (sqlite3 .mode insert).  The
# next start restores K and gives it to tenant demo (a token key); the
# issued fingerprint is recorded.  At the next stop the attacker deletes
# the @pool rows and puts K's row back (its MAC is valid: the row is
# genuine).  The broker does not start: the rows are not those the state
# record vouches for (E: line).  The operator's accept-rollback discards
# the sealed pool keys (the keystore cannot know which were issued since),
# and tenant other's generated key is another key than demo's.  (A sealed
# row whose fingerprint is recorded is refused at restore with its own E:
# line: tests/unit/test_broker_pool.c test_store_issued_once.)
. "$(dirname "$0")/lib.sh"

cs_require curl sqlite3
CS_OTHER_PIN=1234      # cs_sign_verify signs with $CRYPTOSERVER_PIN
cs_setup --tenant other:$CS_OTHER_PIN:567890
T=$WORK/tmp
mkdir -p "$T"
DB=$WORK/keystore.db
CONF=$WORK/broker.conf
sql () { sqlite3 -cmd ".timeout 5000" "$DB" "$@"; }
"$CS_ADMIN" config set "$CONF" keys/pool-rsa-2048 1
"$CS_ADMIN" config set "$CONF" keys/pool-rsa-3072 0
"$CS_ADMIN" config set "$CONF" keys/pool-rsa-4096 0
metric () {
    curl -sf --max-time 10 "$(cat "$WORK/broker.metrics")" \
        | awk -v name="$1" '$1 == name { print $2; found = 1 } END { if (!found) print "none" }'
}
refills_done () {
    curl -sf --max-time 10 "$(cat "$WORK/broker.metrics")" \
        | awk '/^cryptoserver_jobs_total\{.*mechanism="CKM_RSA_PKCS_KEY_PAIR_GEN",result="ok"/ { n += $NF }
               END { print n + 0 }'
}
P11O="env CRYPTOSERVER_CONF=$WORK/clients/other/client.conf pkcs11-tool --module $CRYPTOSERVER_MODULE --token-label other"
keygen () {   # keygen P11 PIN ID: a token RSA-2048 key pair
    cs_run_bounded $((60 * CS_TIME_FACTOR)) "$T/gen.log" $1 --login --pin "$2" --keypairgen \
        --key-type rsa:2048 --label "k$3" --id "$3" --usage-sign || { cat "$T/gen.log"; cs_fail "--keypairgen $3 failed"; }
}
restart () { mv "$WORK/broker.log" "$WORK/broker.log.$1"; cs_start; }

# ---- the pool fills; the stop seals K; the attacker keeps K's row --------------------------
cs_start
cs_wait_until $((120 * CS_TIME_FACTOR)) eval '[ "$(refills_done)" -ge 1 ]' || cs_fail "the pool did not fill"
cs_stop
[ "$(sql "SELECT count (*) FROM keys WHERE tenant = '@pool'")" = 1 ] || cs_fail "no sealed pool row"
sql -cmd ".mode insert keys" "SELECT * FROM keys WHERE tenant = '@pool'" > "$T/replay.sql"
REF=$(sql "SELECT ref FROM keys WHERE tenant = '@pool'")

# ---- K is restored and issued to demo --------------------------------------------------------
restart 1
grep -q 'pool: 1 pre-generated RSA keys restored from the keystore' "$WORK/broker.log" || cs_fail "K was not restored"
keygen "$P11" "$CRYPTOSERVER_PIN" 71
[ "$(metric cryptoserver_pool_keys_taken_total)" = 1 ] || cs_fail "demo's key did not come from the pool"
[ "$(sql "SELECT count (*) FROM issued WHERE tenant = 'demo'")" = 1 ] || cs_fail "the issued key is not recorded"
cs_pubkey_pem "$P11" 71 "$T/k71.pem" || cs_fail "cannot read demo's public key"
cs_stop
cs_log "K restored and issued to tenant demo; its fingerprint is recorded"

# ---- the attacker replays K's row ---------------------------------------------------------------
sql "DELETE FROM keys WHERE tenant = '@pool'"
sql < "$T/replay.sql"
[ "$(sql "SELECT ref FROM keys WHERE tenant = '@pool'")" = "$REF" ] || cs_fail "the replay did not apply"
rc=0
SOFTHSM2_CONF=$WORK/softhsm2.conf CRYPTOSERVER_DRIVER_DIR=$top_builddir/shim-drivers/.libs \
    timeout --kill-after=5 $((30 * CS_TIME_FACTOR)) "$CS_BROKER" -c "$CONF" -f > "$T/start.log" 2>&1 || rc=$?
[ "$rc" != 0 ] && [ "$rc" -lt 124 ] || { cat "$T/start.log"; cs_fail "the broker started (status $rc) on the replayed row"; }
grep -Eq "^E: .* keystore $DB: its rows are not those its state record vouches for \(a row put back, deleted or added without the master key\): refused; an operator accepts them with 'cryptoserver-admin keystore accept-rollback'\$" \
    "$T/start.log" || { cat "$T/start.log"; cs_fail "no E: line for the replayed row"; }
cs_log "the replayed @pool row: the broker does not start (the rows are not those the state record vouches for)"

# ---- the operator accepts the rows: the sealed pool keys go; other gets another key -------------
"$CS_ADMIN" keystore accept-rollback "$WORK" > "$T/accept.log" 2>&1 || { cat "$T/accept.log"; cs_fail "accept-rollback failed"; }
grep -q "1 sealed pool keys discarded (they may have been issued since)" "$T/accept.log" \
    || { cat "$T/accept.log"; cs_fail "accept-rollback kept the sealed pool key"; }
restart 2
! grep -q 'pre-generated RSA keys restored from the keystore' "$WORK/broker.log" || cs_fail "the replayed key was restored"
[ "$(sql "SELECT count (*) FROM keys WHERE tenant = '@pool'")" = 0 ] || cs_fail "the replayed row is still there"
keygen "$P11O" "$CS_OTHER_PIN" 72
cs_pubkey_pem "$P11O" 72 "$T/k72.pem" || cs_fail "cannot read other's public key"
! cmp -s "$T/k71.pem" "$T/k72.pem" || cs_fail "tenant other got tenant demo's private key"
cs_sign_verify "$P11O" 72 rsa "$T/k72.pem" "$T" || cs_fail "other's key does not sign"
cs_log "accept-rollback discarded the sealed pool key; tenant other got another key than demo's"
cs_stop
