#!/bin/bash
# keys-idempotent.sh — a retried key-management job takes effect once
# (issue #11, docs/CONTRACTS.md "Failover").  Two brokers, A and b2, share
# one PostgreSQL keystore; the client names A first (it gets the jobs while
# it is healthy) with client/attempt-timeout-ms 1000 and heartbeats slow
# enough that a stopped broker stays connected.
#  1. A is stopped with SIGSTOP: the C_GenerateKeyPair request waits in its
#     socket and its reply cannot come (lost on purpose).  After the
#     per-attempt timeout the module re-sends it, with the same idempotency
#     id, to b2, which generates and records the key.  A continued (SIGCONT)
#     then runs its copy of the request: it finds the id recorded and
#     replays the result.  Exactly one new key exists (cryptoserver-admin
#     key list and psql), one idempotency row, and the key signs (openssl
#     verifies with its public key read from the token).
#  2. The same for C_DestroyObject of that key's private half: the re-sent
#     destroy succeeds on b2; A's late copy replays success instead of
#     failing, and nothing else is deleted (the public half and the other
#     keys stay).
#  Both need the job to reach A first.  On a loaded machine A may answer
#  an earlier job later than the per-attempt timeout: the module marks A
#  silent and, until A's late answer comes, sends new jobs to b2 (link.c
#  s_pick); were A stopped before that answer, the job would go straight
#  to b2 and never reach A.  So the test waits for the late answers of the
#  jobs sent twice (a_heard) before it stops A, and checks in the module's
#  debug log where the destroy went first; one that went straight to b2
#  all the same is checked (its key gone, nothing else) and the scenario
#  runs again with a new key.
#  3. One endpoint (A alone) and keys/home = board0: A is stopped while a
#     generation is in flight, so the module sends it once more to A after
#     the per-attempt timeout; A, continued, runs both copies: one key in
#     the keystore and one on board0 (the replayed copy's board key is
#     removed), and it signs.
. "$(dirname "$0")/lib.sh"

cs_setup
# A broker stopped with SIGSTOP may hold the counter file's lock (ks_state.c).
cs_expect_broker_log 'counter file .* another process has held its lock for [0-9]+ ms: not raised now'
cs_pg_start
T=$WORK/tmp
mkdir -p "$T"

sed -i '/^    path = "keystore.db"$/d' "$WORK/broker.conf"
"$CS_ADMIN" config set "$WORK/broker.conf" keystore/url "$CS_PG_URL"
rm -f "$WORK/keystore.db"*
"$CS_ADMIN" tenant add demo --pin "$CRYPTOSERVER_PIN" --so-pin 123456 --dir "$WORK" > "$T/admin.log" 2>&1 \
    || { cat "$T/admin.log"; cs_fail "cryptoserver-admin cannot add the tenant to the PostgreSQL keystore"; }

cs_start
cs_peer_start b2
CONF=$WORK/clients/demo/client.conf
"$CS_ADMIN" config set "$CONF" client/endpoints "$BROKER_ENDPOINT,${CS_PEER_ENDPOINT[b2]}"
"$CS_ADMIN" config set "$CONF" client/attempt-timeout-ms 1000
"$CS_ADMIN" config set "$CONF" client/timeout-ms $((30000 * CS_TIME_FACTOR))
"$CS_ADMIN" config set "$CONF" client/heartbeat-timeout-ms 120000
"$CS_ADMIN" config set "$CONF" client/log-level debug       # logs each send and re-send
P11A="env CRYPTOSERVER_CONF=$CONF $P11"
A_PID=$CRYPTOSERVER_BROKER_PID

keys () { cs_keystore_rows demo; }
idem_rows () { cs_psql cryptoserver -tAc "SELECT count (*) FROM idempotency"; }
replayed () { grep -c "idempotent job $1 of tenant demo: done before" "$WORK/broker.log" || true; }
# The module of shell s has every answer of a job it sent twice (the late
# copy is dropped): a broker that was silent has been heard from since.
a_heard () {
    [ "$(grep -c "link: dropping late or unknown reply" "$WORK/shell-s.err")" -ge \
      "$(grep -c "link: re-sending request" "$WORK/shell-s.err")" ]
}
wait_a_heard () {
    cs_wait_until $((20 * CS_TIME_FACTOR)) a_heard || cs_log "some late answers still missing; going on"
}
# first_send FROM: "ID ENDPOINT" of the first request shell s sent after
# line FROM of its log.
first_send () {
    sed -n "$1,\$ s|.*link: request \([0-9][0-9]*\) sent to \(.*\)$|\1 \2|p" "$WORK/shell-s.err" | head -n 1
}
lines () { wc -l < "$WORK/shell-s.err"; }

cs_shell_start s demo
cs_shell s CKR_OK login "$CRYPTOSERVER_PIN"
cs_shell s CKR_OK keygen-signer 61 other        # a key that must survive
KEYS0=$(keys)
[ "$KEYS0" = 1 ] || cs_fail "expected 1 key before the test, found $KEYS0"

# ---- 1. a key generation whose reply is lost ---------------------------------
a_generations () { grep -c "generate: token key" "$WORK/broker.log" || true; }
A_GEN=$(a_generations)      # 61 went to A or to b2 (the least busy broker)
wait_a_heard
kill -STOP "$A_PID"
cs_log "broker A (pid $A_PID) stopped with SIGSTOP"
cs_shell s CKR_OK keygen-signer 5a idem
grep -q "re-sending request .* to another broker" "$WORK/shell-s.err" \
    || { kill -CONT "$A_PID"; cs_fail "the module did not re-send the key generation"; }
[ "$(keys)" = 2 ] || { kill -CONT "$A_PID"; cs_fail "b2 did not store the key"; }
kill -CONT "$A_PID"
# A answers its copy of 5a's generation (a new key or a replay): one more line.
cs_wait_until $((30 * CS_TIME_FACTOR)) eval '[ "$(a_generations)" -gt "$A_GEN" ]' \
    || cs_fail "broker A did not answer its copy of the generation"
KEYS1=$(keys)
[ "$KEYS1" = 2 ] || cs_fail "the retried generation made $((KEYS1 - KEYS0)) keys, expected exactly 1"
[ "$(replayed 6)" = 1 ] || cs_fail "broker A did not replay the recorded generation"
[ "$(cs_psql cryptoserver -tAc "SELECT count (*) FROM keys")" = 2 ] || cs_fail "psql counts another number of keys"
[ "$(idem_rows)" -ge 2 ] || cs_fail "no idempotency rows recorded"
cs_pubkey_pem "$P11A" 5a "$T/5a.pem" || cs_fail "cannot read the public key of 5a from the token"
cs_sign_verify "$P11A" 5a rsa "$T/5a.pem" "$T" || cs_fail "the generated key does not sign (openssl)"
cs_log "generation re-sent to b2, replayed by A: exactly one new key, which signs"

# ---- 2. a destroy whose reply is lost -----------------------------------------
id=5a try=1
while true; do
    KEYS_T=$(keys)
    REPLAYED_T=$(replayed 8)
    cs_shell s CKR_OK hold "$id"
    wait_a_heard
    kill -STOP "$A_PID"
    from=$(( $(lines) + 1 ))
    cs_shell s CKR_OK destroy-held
    read -r req first <<< "$(first_send "$from")"
    [ "$first" = "$BROKER_ENDPOINT" ] && break
    kill -CONT "$A_PID"
    [ -n "$first" ] || cs_fail "the module logged no send of the destroy"
    cs_log "attempt $try: the destroy (request $req) went to $first first, not to A (A still silent)"
    [ "$(keys)" = "$KEYS_T" ] || cs_fail "a key row went away: the destroy of a private half keeps the public one"
    cs_shell s CKR_OBJECT_HANDLE_INVALID sign "$id"
    [ $try -lt 5 ] || cs_fail "the destroy never went to A first in $try attempts"
    try=$((try + 1)) id=7$try
    cs_shell s CKR_OK keygen-signer "$id" "retry-$try"
done
kill -CONT "$A_PID"
cs_wait_until $((30 * CS_TIME_FACTOR)) eval '[ "$(replayed 8)" -gt "$REPLAYED_T" ]' \
    || cs_fail "broker A did not replay the recorded destroy"
[ "$(replayed 8)" = $((REPLAYED_T + 1)) ] || cs_fail "broker A replayed the destroy $(( $(replayed 8) - REPLAYED_T )) times, expected once"
grep -q "re-sending request $req to another broker" "$WORK/shell-s.err" \
    || cs_fail "the module did not re-send the destroy (request $req)"
[ "$(keys)" = "$KEYS_T" ] || cs_fail "a key row went away: the destroy of a private half keeps the public one"
cs_shell s CKR_OK sign 61
cs_shell s CKR_OBJECT_HANDLE_INVALID sign 5a
cs_shell s CKR_OBJECT_HANDLE_INVALID sign "$id"
"$CS_ADMIN" key list --dir "$WORK" --tenant demo > "$T/keys.txt"
cs_log "destroy re-sent to b2, replayed by A: the private half gone once, nothing else deleted"

cs_shell_stop s
cs_peer_stop b2

# ---- 3. one broker: the same request twice on it ------------------------------
cs_stop
"$CS_ADMIN" config set "$WORK/broker.conf" keys/home board0
cs_start
A_PID=$CRYPTOSERVER_BROKER_PID
"$CS_ADMIN" config set "$CONF" client/endpoints "$BROKER_ENDPOINT"
SOFTHSM=${SOFTHSM2_MODULE:-/usr/lib/softhsm/libsofthsm2.so}
board_ks_keys () {
    pkcs11-tool --module "$SOFTHSM" --token-label board0 --login --pin "$CRYPTOSERVER_BOARD_PIN" -O \
        --type privkey 2>/dev/null | grep -c "label: *ks:" || true
}
cs_shell_start s1 demo
cs_shell s1 CKR_OK login "$CRYPTOSERVER_PIN"
# A first generation: the module's other requests of a first generation in
# a session (they are not key management: not sent twice) are done.
cs_shell s1 CKR_OK keygen-signer 5c warm-up
ON_BOARD0=$(board_ks_keys)
KEYS2=$(keys)
REPLAYED=$(replayed 6)
kill -STOP "$A_PID"
( sleep $((3 * CS_TIME_FACTOR)); kill -CONT "$A_PID" ) &
cont=$!
cs_shell s1 CKR_OK keygen-signer 5b on-board
wait "$cont"
grep -q "re-sending request .* to the same broker" "$WORK/shell-s1.err" \
    || { cat "$WORK/shell-s1.err"; cs_fail "the module did not send the generation again to its only broker"; }
cs_wait_until $((30 * CS_TIME_FACTOR)) eval '[ "$(replayed 6)" -gt "$REPLAYED" ]' \
    || cs_fail "broker A did not replay the second copy of the generation"
[ "$(keys)" = $((KEYS2 + 1)) ] || cs_fail "the twice-sent generation made $(( $(keys) - KEYS2 )) keystore rows, expected 1"
cs_wait_until $((30 * CS_TIME_FACTOR)) eval '[ "$(board_ks_keys)" = $((ON_BOARD0 + 1)) ]' \
    || cs_fail "board0 holds $(( $(board_ks_keys) - ON_BOARD0 )) new keys, expected 1 (the replayed copy's key stays)"
cs_pubkey_pem "$P11A" 5b "$T/5b.pem" || cs_fail "cannot read the public key of 5b from the token"
cs_sign_verify "$P11A" 5b rsa "$T/5b.pem" "$T" || cs_fail "the key on board0 does not sign (openssl)"
cs_log "generation sent twice to one broker: one keystore row, one key on board0, which signs"
cs_shell_stop s1
cs_stop
