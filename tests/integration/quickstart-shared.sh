#!/bin/bash
# quickstart-shared.sh — the three-party demo (tools/quickstart.sh --shared,
# issue #24), through the steps quickstart.sh runs for it: demo-shared.sh
# DIR, --start DIR, --try DIR, then tools/quickstart.sh --stop DIR.
#  1. DIR/env.sh exports every variable of the one-broker demo and
#     CRYPTOSERVER_PARTY_PIDS: three live brokers, of DIR, DIR/party2 and
#     DIR/party3, each with its own master key; the parties' ports are
#     CS_PORT.. and CS_PARTY_PORT.. as documented.
#  2. --try makes a shared RSA-2048 key through the module (a row at each
#     party), signs, and openssl verifies the signature (checked again here
#     with the public key it wrote).
#  3. tools/quickstart.sh --stop DIR stops the three brokers: no pid is left.
. "$(dirname "$0")/lib.sh"

cs_require pkcs11-tool softhsm2-util openssl python3
for need in "$CS_ADMIN" "$CS_BROKER" "$top_builddir/pkcs11-module/.libs/cryptoserver-pkcs11.so" \
            "$top_builddir/shim-drivers/.libs/pkcs11.so"; do
    [ -e "$need" ] || cs_fail "$need is not built"
done
SHARED=$top_srcdir/tools/demo-shared.sh
QUICKSTART=$top_srcdir/tools/quickstart.sh

# The EXIT trap: the brokers still running are stopped, their logs checked.
shared_cleanup () {
    local rc=$? pid log
    set +e
    "$SHARED" --stop "$WORK" > "$WORK/cleanup-stop.log" 2>&1
    for pid in ${CRYPTOSERVER_PARTY_PIDS:-}; do
        cs_pid_alive "$pid" && { echo "[$CS_TEST_NAME] killing leftover pid $pid" >&2; kill -KILL "$pid"; }
    done
    cs_kill_leftovers
    for log in "$WORK/broker.log" "$WORK/party2/broker.log" "$WORK/party3/broker.log"; do
        [ -f "$log" ] || continue
        cs_broker_log_check "$log" || { [ "$rc" != 0 ] || rc=1; }
        [ "$rc" = 0 ] || { echo "---- $log (last 20 lines) ----"; tail -n 20 "$log"; }
    done
    exit "$rc"
}
trap shared_cleanup EXIT
rm -rf "$WORK"
mkdir -p "$WORK/valgrind" "$WORK/sanitizer"

# free3: a port P below the ephemeral range with P, P+1, P+2 free.
free3 () {
    python3 -c 'import random, socket, sys
while True:
    p = random.randint(int(sys.argv[1]), int(sys.argv[2]) - 2)
    ok = True
    for q in range(p, p + 3):
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", q))
        except OSError:
            ok = False
        finally:
            s.close()
    if ok:
        print(p); break' "$CS_PORT_LOW" "$CS_PORT_HIGH"
}
export CS_PORT CS_PARTY_PORT CS_METRICS_PORT=0
CS_PORT=$(free3)
CS_PARTY_PORT=$(free3)

# ---- the deployments, started ------------------------------------------------------
"$SHARED" "$WORK" > "$WORK/deploy.log" 2>&1 || { cat "$WORK/deploy.log"; cs_fail "demo-shared.sh failed"; }
"$SHARED" --start "$WORK" > "$WORK/start.log" 2>&1 || { cat "$WORK/start.log"; cs_fail "demo-shared.sh --start failed"; }
# shellcheck disable=SC1091
. "$WORK/env.sh"
for var in CRYPTOSERVER_CONF CRYPTOSERVER_MODULE CRYPTOSERVER_TOKEN CRYPTOSERVER_PIN SOFTHSM2_CONF \
           CRYPTOSERVER_BOARD_PIN CRYPTOSERVER_BROKER_PID CRYPTOSERVER_METRICS_URL CRYPTOSERVER_PARTY_PIDS; do
    [ -n "${!var:-}" ] || cs_fail "env.sh does not set $var"
    cs_log "$var=${!var}"
done
read -r PID1 PID2 PID3 rest <<<"$CRYPTOSERVER_PARTY_PIDS"
[ -n "$PID3" ] && [ -z "$rest" ] || cs_fail "CRYPTOSERVER_PARTY_PIDS is not three pids: '$CRYPTOSERVER_PARTY_PIDS'"
[ "$PID1" = "$CRYPTOSERVER_BROKER_PID" ] || cs_fail "CRYPTOSERVER_BROKER_PID is not party 1's"
i=1
for pid in $PID1 $PID2 $PID3; do
    dir=$WORK
    [ "$i" = 1 ] || dir=$WORK/party$i
    cs_pid_alive "$pid" || cs_fail "party $i (pid $pid) is not running"
    tr '\0' ' ' < "/proc/$pid/cmdline" | grep -q "cryptoserver-broker -c $dir/broker.conf" \
        || cs_fail "pid $pid is not the broker of $dir"
    [ "$(cat "$dir/broker.endpoint")" = "tcp://127.0.0.1:$((CS_PORT + i - 1))" ] \
        || cs_fail "party $i listens on $(cat "$dir/broker.endpoint"), not on port $((CS_PORT + i - 1))"
    grep -q "party $i of 3 on tcp://127.0.0.1:$((CS_PARTY_PORT + i - 1))" "$dir/broker.log" \
        || cs_fail "party $i's service is not on port $((CS_PARTY_PORT + i - 1))"
    i=$((i + 1))
done
cmp -s "$WORK/master.key" "$WORK/party2/master.key" && cs_fail "parties 1 and 2 share a master key"
cs_log "three parties: brokers on $CS_PORT.., party endpoints on $CS_PARTY_PORT.."

# ---- --try ---------------------------------------------------------------------------
"$SHARED" --try "$WORK" > "$WORK/try.log" 2>&1 || { cat "$WORK/try.log"; cs_fail "demo-shared.sh --try failed"; }
cat "$WORK/try.log"
label=$(sed -n 's/.*generating shared RSA-2048 key \([^ ]*\) .*/\1/p' "$WORK/try.log")
id=$(sed -n 's/.*(CKA_ID \([0-9a-f]*\)) verified.*/\1/p' "$WORK/try.log")
[ -n "$label" ] && [ -n "$id" ] || cs_fail "--try named no key"
for dir in "$WORK" "$WORK/party2" "$WORK/party3"; do
    "$CS_ADMIN" key list --dir "$dir" --tenant demo | awk -v l="$label" 'NR > 1 && $2 == l { f = 1 } END { exit !f }' \
        || cs_fail "$dir has no row of $label"
done
head -c 300 /dev/urandom > "$WORK/msg"
pkcs11-tool --module "$CRYPTOSERVER_MODULE" --token-label "$CRYPTOSERVER_TOKEN" --login --pin "$CRYPTOSERVER_PIN" \
    --sign --mechanism SHA256-RSA-PKCS --id "$id" -i "$WORK/msg" -o "$WORK/sig" > /dev/null 2>&1 \
    || cs_fail "signing with $label after --try failed"
openssl dgst -sha256 -verify "$WORK/$label.pub.pem" -signature "$WORK/sig" "$WORK/msg" > /dev/null \
    || cs_fail "the signature does not verify with $WORK/$label.pub.pem"
openssl pkey -pubin -in "$WORK/$label.pub.pem" -text -noout | grep -q "Public-Key: (2048 bit)" \
    || cs_fail "$label is not RSA-2048"
cs_log "--try: shared key $label at the three parties; openssl verifies its signature"

# ---- --stop ----------------------------------------------------------------------------
"$QUICKSTART" --stop "$WORK" > "$WORK/stop.log" 2>&1 || { cat "$WORK/stop.log"; cs_fail "quickstart.sh --stop failed"; }
for pid in $PID1 $PID2 $PID3; do
    cs_pid_alive "$pid" && cs_fail "broker pid $pid still runs after --stop"
done
cs_log "quickstart.sh --stop $WORK stopped the three brokers"
exit 0
