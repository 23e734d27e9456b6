#!/bin/bash
# keystore-shared.sh — two brokers on one PostgreSQL keystore (keystore/url,
# issue #11), each with its own boards, the same master key and client keys:
#  1. a key generated through broker A (pkcs11-tool --keypairgen) signs
#     through broker B at once, and openssl verifies the signature with the
#     public key read through A;
#  2. the key deleted through B: A refuses it at the next call of a session
#     that holds its handle (CKR_KEY_HANDLE_INVALID, docs/CONTRACTS.md "Key
#     refs"), though A had it in its key cache: B's commit reached A by
#     LISTEN/NOTIFY;
#  a tenant row changed with psql (no master key) is refused (row MAC);
#  3. PostgreSQL stopped: a key A knows still signs; key management fails
#     with CKR_DEVICE_ERROR and a log line naming the database; with the
#     database back, key generation works again (reconnect on next use).
# cryptoserver-admin makes the tenant in the database (keystore/url of
# broker.conf), as an operator would.
. "$(dirname "$0")/lib.sh"

cs_setup
cs_pg_start
T=$WORK/tmp
mkdir -p "$T"

# ---- the deployment's keystore moves to PostgreSQL ------------------------------
sed -i '/^    path = "keystore.db"$/d' "$WORK/broker.conf"
! "$CS_ADMIN" config get "$WORK/broker.conf" keystore/path >/dev/null 2>&1 || cs_fail "keystore/path is still set"
"$CS_ADMIN" config set "$WORK/broker.conf" keystore/url "$CS_PG_URL"
rm -f "$WORK/keystore.db"*
"$CS_ADMIN" tenant add demo --pin "$CRYPTOSERVER_PIN" --so-pin 123456 --dir "$WORK" > "$T/admin.log" 2>&1 \
    || { cat "$T/admin.log"; cs_fail "cryptoserver-admin cannot add the tenant to the PostgreSQL keystore"; }
[ "$(cs_psql cryptoserver -tAc "SELECT name FROM tenants")" = demo ] || cs_fail "no tenant row in PostgreSQL"
[ "$(cs_psql cryptoserver -tAc "SELECT string_agg (version::text, ',' ORDER BY version) FROM schema_version")" = 2,3,4,5,6,7 ] \
    || cs_fail "schema_version does not say 2,3,4,5,6,7"

# ---- broker B: a copy of the deployment (its own boards, log, endpoint) ---------
WB=$WORK/b
mkdir -p "$WB"
(cd "$WORK" && tar cf - broker.conf broker.cert broker.cert_secret ticket.key audit.key master.key board.pin metrics.token \
                       clients clients.d softhsm softhsm2.conf) | (cd "$WB" && tar xf -)
sed -i "s|$WORK/softhsm|$WB/softhsm|" "$WB/softhsm2.conf"
[ ! -e "$WB/keystore.db" ] || cs_fail "B has a keystore file"

cs_start
"$CS_DEPLOY" --run "$WB" &
PID_B=$!
CS_START_TIMEOUT=${CS_START_TIMEOUT:-30} "$CS_DEPLOY" --wait "$WB" > "$T/b-start.log" 2>&1 \
    || { cat "$T/b-start.log"; cs_fail "broker B did not start"; }
[ "$(cat "$WORK/broker.endpoint")" != "$(cat "$WB/broker.endpoint")" ] || cs_fail "A and B share an endpoint"
P11A="env CRYPTOSERVER_CONF=$WORK/clients/demo/client.conf $P11"
P11B="env CRYPTOSERVER_CONF=$WB/clients/demo/client.conf $P11"

# B and A at work: each with a session that stays logged in, B with a key
# of its own in its caches.
cs_shell_start a demo
WORK=$WB cs_shell_start b demo             # B's client config
ln -sf "$WB/shell-b.err" "$WORK/shell-b.err"
cs_shell a CKR_OK login "$CRYPTOSERVER_PIN"
cs_shell b CKR_OK login "$CRYPTOSERVER_PIN"
cs_shell b CKR_OK keygen-signer 71 from-b
cs_shell b CKR_OK sign 71

# ---- 1. generated through A, signs through B -------------------------------------
cs_run_bounded $((120 * CS_TIME_FACTOR)) "$T/gen.log" $P11A --login --pin "$CRYPTOSERVER_PIN" \
    --keypairgen --key-type rsa:2048 --label from-a --id 72 --usage-sign \
    || { cat "$T/gen.log"; cs_fail "--keypairgen through A failed"; }
cs_pubkey_pem "$P11A" 72 "$T/72.pub.pem" || cs_fail "cannot read key 72's public key through A"
cs_sign_verify "$P11B" 72 rsa "$T/72.pub.pem" "$T" || cs_fail "key 72 generated through A does not sign through B"
cs_shell b CKR_OK sign 72
cs_log "a key generated through A signs through B (openssl verifies)"

# ---- 2. deleted through B, refused by A at the next call --------------------------
cs_shell a CKR_OK hold 72
cs_shell a CKR_OK sign-held                 # A has it in its key cache now
cs_run_bounded $((60 * CS_TIME_FACTOR)) "$T/delete.log" $P11B --login --pin "$CRYPTOSERVER_PIN" \
    --delete-object --type privkey --id 72 || { cat "$T/delete.log"; cs_fail "delete through B failed"; }
[ "$(cs_psql cryptoserver -tAc "SELECT count (*) FROM keys WHERE private IS NOT NULL")" = 1 ] \
    || cs_fail "the private key deleted through B is still in the database"
cs_shell a CKR_KEY_HANDLE_INVALID sign-held
cs_shell a CKR_OBJECT_HANDLE_INVALID sign 72
cs_log "a key deleted through B is refused by A at the next call"

# ---- a row changed with SQL, without the master key: refused (row MAC) ------------
cs_expect_broker_log '^E: .* keystore postgresql:///cryptoserver\?host=.*: tenant demo: row does not verify \(changed without the master key\): refused$'
cs_expect_broker_log '^W: .* login: CKR_DEVICE_ERROR as user from client demo \(tenant demo\)$'
cs_psql cryptoserver -qc "UPDATE tenants SET user_failures = 3 WHERE name = 'demo'"
cs_expect_refusal CKR_DEVICE_ERROR "login through A after the tenant row was changed with psql" \
    "$T/login.log" $P11A --login --pin "$CRYPTOSERVER_PIN" -O
cs_psql cryptoserver -qc "UPDATE tenants SET user_failures = 0 WHERE name = 'demo'"
$P11A --login --pin "$CRYPTOSERVER_PIN" -O > "$T/login.log" 2>&1 \
    || { cat "$T/login.log"; cs_fail "the tenant row put back does not verify"; }
cs_log "a tenant row changed in PostgreSQL without the master key is refused"

# ---- 3. PostgreSQL stopped ------------------------------------------------------------
cs_expect_broker_log '^E: .* keystore postgresql:///cryptoserver\?host=.*: database unreachable: .*'
cs_expect_broker_log '^W: .* keystore postgresql:///cryptoserver\?host=.*: change notifications lost \(database unreachable\): cached keys and tenant rows are served until it is back$'
cs_shell a CKR_OK sign 71                   # A knows B's key now
cs_pg_stop
cs_shell a CKR_OK sign 71
cs_shell a CKR_DEVICE_ERROR keygen-signer 73 while-down
cs_expect_refusal CKR_DEVICE_ERROR "login through A while PostgreSQL is stopped" \
    "$T/login.log" $P11A --login --pin "$CRYPTOSERVER_PIN" -O
grep -Eq "^E: .* keystore postgresql:///cryptoserver\?host=$CS_PG_SOCKET&user=cs: database unreachable: " "$WORK/broker.log" \
    || cs_fail "no log line of A names the unreachable database"
cs_shell a CKR_OK sign 71
cs_log "PostgreSQL stopped: a known key signs; key generation fails with CKR_DEVICE_ERROR and a log line"
cs_pg_start
cs_shell a CKR_OK keygen-signer 73 after-restart
cs_shell a CKR_OK sign 73
cs_shell b CKR_OK sign 73
cs_log "PostgreSQL back: key generation works again, and B signs with the new key"

cs_shell_stop a
cs_shell_stop b
cs_stop
# B: stopped like A, and its log checked like A's.
cs_stop_child "$PID_B" TERM $((15 * CS_TIME_FACTOR)) || cs_fail "broker B did not stop cleanly"
WORK_A=$WORK
WORK=$WB cs_broker_log_check || cs_fail "broker B's log has unexpected warnings or errors"
WORK=$WORK_A
