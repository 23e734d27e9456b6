#!/bin/bash
# keycache-tenants-pg.sh — keycache-tenants.sh with two brokers on one
# PostgreSQL keystore (issue #19 item 8): tenant alpha generates and deletes
# keys through broker B while beta signs through broker A with 8 cached keys.
# A learns of B's commits by LISTEN/NOTIFY and reads the tenants' change
# epochs: only alpha's cached keys are dropped (beta's signs keep hitting the
# cache, cryptoserver_key_cache_dropped_total counts alpha's key only), and
# alpha's key cached by A and deleted through B is refused by A at once with
# CKR_KEY_HANDLE_INVALID; a key row changed with psql (no master key) is
# refused by A at the next sign, though A had it cached.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-keycache.sh"

cs_require curl
cs_setup --tenant alpha --tenant beta
cs_pg_start
T=$WORK/tmp
mkdir -p "$T"
PIN=$CRYPTOSERVER_PIN           # demo-deploy gives extra tenants PIN 1234 too

# ---- the keystore moves to PostgreSQL; broker B (cs_peer_start) shares it ------
sed -i '/^    path = "keystore.db"$/d' "$WORK/broker.conf"
"$CS_ADMIN" config set "$WORK/broker.conf" keystore/url "$CS_PG_URL"
rm -f "$WORK/keystore.db"*
for t in alpha beta; do
    "$CS_ADMIN" tenant add $t --pin "$PIN" --so-pin 123456 --dir "$WORK" > "$T/admin.log" 2>&1 \
        || { cat "$T/admin.log"; cs_fail "cannot add tenant $t to the PostgreSQL keystore"; }
done
cs_start
cs_peer_start peer                           # broker B: the same deployment and keystore
cp "$WORK/clients/alpha/client.conf" "$WORK/clients/alpha/client-b.conf"
"$CS_ADMIN" config set "$WORK/clients/alpha/client-b.conf" client/endpoints "${CS_PEER_ENDPOINT[peer]}"
P11B="env CRYPTOSERVER_CONF=$WORK/clients/alpha/client-b.conf pkcs11-tool --module $CRYPTOSERVER_MODULE --token-label alpha"
kc_warm

# ---- alpha writes through B, beta signs through A ------------------------------------------
# b_write R: one key of alpha generated and deleted through broker B.
b_write () {
    cs_run_bounded $((120 * CS_TIME_FACTOR)) "$T/gen-$1.log" $P11B --login --pin "$PIN" \
        --keypairgen --key-type EC:prime256v1 --label "storm-$1" --id "c$1" --usage-sign \
        || { cat "$T/gen-$1.log"; cs_fail "alpha's key generation through B failed"; }
    cs_run_bounded $((60 * CS_TIME_FACTOR)) "$T/del-$1.log" $P11B --login --pin "$PIN" \
        --delete-object --type privkey --id "c$1" || { cat "$T/del-$1.log"; cs_fail "alpha's delete through B failed"; }
}
kc_storm 4 b_write

# ---- alpha's key cached by A, deleted through B ------------------------------------------------
b_delete_held () {
    cs_run_bounded $((60 * CS_TIME_FACTOR)) "$T/del-held.log" $P11B --login --pin "$PIN" \
        --delete-object --type privkey --id a1 || { cat "$T/del-held.log"; cs_fail "delete of a1 through B failed"; }
}
kc_held_deleted b_delete_held eventually

# ---- a key row of beta changed with psql (no master key, no origin) ----------------------
# The commit raises no state counter and comes without an origin: A drops
# every cached row, reads b1 again and refuses it (row MAC).
cs_expect_broker_log '^E: .* keystore .*: key ks:[0-9a-f]{32} of tenant beta: row does not verify \(changed without the master key\): refused$'
cs_psql cryptoserver -qc "UPDATE keys SET info = info || '\\x5001'::bytea WHERE tenant = 'beta'"
# The commit's notification reaches A asynchronously (PostgreSQL NOTIFY),
# and A settles its cache at the start of the next request: a sign that
# races the notification may still be served from the cache.  Within 10 s
# (scaled) one must be refused.
cs_shell_eventually b CKR_DEVICE_ERROR CKR_OK sign b1
cs_log "beta's key row changed with psql: A refuses it at the next sign (its cache was dropped)"

cs_shell_stop a
cs_shell_stop b
cs_stop
cs_peer_stop peer
cs_log "PASS"
