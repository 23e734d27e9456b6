#!/bin/bash
# keys-crash.sh — crash safety of the keystore: 4 clients import and
# generate token keys in bounded loops, each logging the keys whose creation
# it saw acknowledged; the broker is killed with SIGKILL in the middle.  On
# restart the keystore opens and every acknowledged key is listed and signs.
. "$(dirname "$0")/lib.sh"

CLIENTS=4
ROUNDS=${CS_CRASH_ROUNDS:-12}
cs_setup
cs_start
"$CS_ADMIN" config set "$CRYPTOSERVER_CONF" client/timeout-ms 5000
T=$WORK/tmp
mkdir -p "$T"
P11L="$P11 --login --pin $CRYPTOSERVER_PIN"

# client N: alternately imports an OpenSSL-made P-256 key and generates one
# with --keypairgen; appends "id kind" to ack.N after each success; stops at
# the first failure, writing when it happened and what it said to fail.N
# (checked below: only after the kill, and only "the broker is gone").
# failed N STATUS: client N's operation failed with STATUS (output in op.N.log).
failed () {
    { date +%s.%N; echo "status $2"; cat "$T/op.$1.log"; } > "$T/fail.$1"
}

client () {
    local n=$1 i id
    for i in $(seq 1 "$ROUNDS"); do
        id=$(printf 'c%d%02d' "$n" "$i")
        if [ $((i % 2)) = 1 ]; then
            openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 \
                -out "$T/$id.pem" 2>/dev/null
            openssl pkey -in "$T/$id.pem" -outform DER -out "$T/$id.der"
            timeout $((30 * CS_TIME_FACTOR)) $P11L --write-object "$T/$id.der" --type privkey --id "$id" \
                --label "crash-$id" --usage-sign > "$T/op.$n.log" 2>&1 || { failed "$n" $?; return 0; }
            cat "$T/op.$n.log" >> "$T/client.$n.log"
            openssl pkey -in "$T/$id.pem" -pubout -out "$T/$id.pub.pem"
            echo "$id imported" >> "$T/ack.$n"
        else
            timeout $((30 * CS_TIME_FACTOR)) $P11L --keypairgen --key-type EC:prime256v1 --id "$id" \
                --label "crash-$id" --usage-sign > "$T/op.$n.log" 2>&1 || { failed "$n" $?; return 0; }
            cat "$T/op.$n.log" >> "$T/client.$n.log"
            echo "$id generated" >> "$T/ack.$n"
        fi
    done
}

pids=
for n in $(seq 1 $CLIENTS); do
    : > "$T/ack.$n"
    client "$n" &
    pids="$pids $!"
done
acked () { [ "$(cat "$T"/ack.* | wc -l)" -ge $((CLIENTS * 2)) ]; }
# clients_done: every client loop has ended (then waiting longer is pointless).
clients_done () {
    local pid
    for pid in $pids; do kill -0 "$pid" 2>/dev/null && return 1; done
    return 0
}
acked_or_done () { acked || clients_done; }
if ! cs_wait_until $((120 * CS_TIME_FACTOR)) acked_or_done || ! acked; then
    kill $pids 2>/dev/null || true
    tail -n 5 "$T"/client.*.log
    cs_fail "the clients did not get $((CLIENTS * 2)) keys acknowledged in $((120 * CS_TIME_FACTOR)) s"
fi
killed_at=$(date +%s.%N)
cs_kill9
cs_log "broker killed with SIGKILL after $(cat "$T"/ack.* | wc -l) acknowledged keys"
for pid in $pids; do wait "$pid" || true; done
# A failure before the kill is a real one; after it, the module must say
# that the broker is gone (DESIGN §6), never crash or hang.
for f in "$T"/fail.*; do
    [ -f "$f" ] || continue
    at=$(head -n 1 "$f")
    awk -v at="$at" -v k="$killed_at" 'BEGIN { exit !(at >= k) }' \
        || { cat "$f"; cs_fail "client ${f##*.} failed before the broker was killed"; }
    sed -n 2p "$f" | grep -Eq '^status (1|3)$' \
        || { cat "$f"; cs_fail "client ${f##*.}: pkcs11-tool crashed or hung when the broker died"; }
    grep -Eq 'CKR_DEVICE_ERROR|CKR_DEVICE_REMOVED|No slot with token named' "$f" \
        || { cat "$f"; cs_fail "client ${f##*.} failed for another reason than the broker's death"; }
done
cs_log "clients that failed did so after the kill, with the broker gone ($(ls "$T"/fail.* 2>/dev/null | wc -l) of $CLIENTS)"
total=$(cat "$T"/ack.* | wc -l)
cs_log "$total keys acknowledged in all"

cs_start
"$CS_ADMIN" key list --dir "$WORK" --tenant demo > "$T/list.txt" \
    || cs_fail "the keystore does not open after the crash"
$P11L -O > "$T/objects.txt" 2>&1 || cs_fail "pkcs11-tool -O failed after the restart"
while read -r id kind; do
    grep -q "crash-$id" "$T/list.txt" || cs_fail "acknowledged key $id ($kind) is not in the keystore"
    grep -q "label: *crash-$id\$" "$T/objects.txt" || cs_fail "acknowledged key $id is not listed by the module"
    if [ "$kind" = imported ]; then
        cs_sign_verify "$P11" "$id" ec "$T/$id.pub.pem" "$T" || cs_fail "key $id does not sign after the crash"
    else
        cs_pubkey_pem "$P11" "$id" "$T/$id.pub.pem" || cs_fail "key $id: no public key after the crash"
        cs_sign_verify "$P11" "$id" ec "$T/$id.pub.pem" "$T" || cs_fail "key $id does not sign after the crash"
    fi
done < <(cat "$T"/ack.*)
rm -f "$T"/*.pem "$T"/*.der
cs_log "after the restart every one of the $total acknowledged keys is present and signs"
