#!/bin/bash
# client-admission.sh — admission at once (issue #11), with two brokers
# running on the same deployment (the same clients.d, keystore and boards):
# a client added with `cryptoserver-admin client add` signs on its very first
# request (no sleep, no retry) through each broker, three times in a row;
# and once removed with `client remove`, a connected client's next request
# is refused with CKR_DEVICE_ERROR by each broker within 1 s (scaled).  The
# brokers watch clients.d with inotify (broker/ops/clients_watch.h); re-reading
# it on a 2 s timer, as before, refused most first requests.
. "$(dirname "$0")/lib.sh"

cs_setup
cs_start
cs_expect_broker_log 'request refused: client key .* is not in the allow-list'
T=$WORK/tmp
mkdir -p "$T"

now_ms () { echo $(( $(date +%s%N) / 1000000 )); }

# The second broker: the same broker.conf but its own endpoint and files.
cp "$WORK/broker.conf" "$WORK/broker2.conf"
"$CS_ADMIN" config set "$WORK/broker2.conf" broker/endpoint-file broker2.endpoint
"$CS_ADMIN" config set "$WORK/broker2.conf" broker/metrics-file broker2.metrics
${CS_BROKER_WRAPPER:-} "$CS_BROKER" -c "$WORK/broker2.conf" -f > "$WORK/broker2.log" 2>&1 < /dev/null &
BROKER2_PID=$!
cs_wait_until $((30 * CS_TIME_FACTOR)) test -s "$WORK/broker2.endpoint" \
    || { cat "$WORK/broker2.log"; cs_fail "the second broker did not start"; }
BROKER2_ENDPOINT=$(cat "$WORK/broker2.endpoint")
cs_log "two brokers on one deployment: $BROKER_ENDPOINT and $BROKER2_ENDPOINT"

# via NAME N: the client folder (under $WORK/clients) of client NAME for
# broker N: its own for broker 1; for broker 2 a copy, NAME-b2, whose
# client.conf names broker 2 (the same key: admitted with NAME's cert).
via () {
    if [ "$2" = 2 ]; then
        [ -d "$WORK/clients/$1-b2" ] || {
            cp -a "$WORK/clients/$1" "$WORK/clients/$1-b2"
            "$CS_ADMIN" config set "$WORK/clients/$1-b2/client.conf" client/endpoints "$BROKER2_ENDPOINT"
        }
        echo "$1-b2"
    else
        echo "$1"
    fi
}
# p11_via NAME N: pkcs11-tool as client NAME through broker N.
p11_via () {
    echo "env CRYPTOSERVER_CONF=$WORK/clients/$(via "$1" "$2")/client.conf pkcs11-tool --module $CRYPTOSERVER_MODULE --token-label $CRYPTOSERVER_TOKEN"
}

for i in 1 2 3; do
    "$CS_ADMIN" client add "fresh$i" --dir "$WORK" --tenant demo --endpoint "$BROKER_ENDPOINT" \
        > "$T/add$i.out" || { cat "$T/add$i.out"; cs_fail "client add fresh$i failed"; }
    if [ "${CS_VALGRIND:-}" = 1 ]; then      # as cs_setup does: a broker under valgrind is slow
        "$CS_ADMIN" config set "$WORK/clients/fresh$i/client.conf" client/timeout-ms 120000
    fi
    first=$(( i % 2 + 1 ))                   # the broker asked first alternates
    for n in $first $(( 3 - first )); do
        cs_sign_verify "$(p11_via "fresh$i" $n)" 01 rsa "$KEYS/rsa2048.pub.pem" "$T" \
            || cs_fail "client fresh$i, added just before, could not sign on its first request to broker $n"
    done
    cs_log "client fresh$i: added, then signed at once through broker $first, then broker $(( 3 - first )) (verified by openssl)"
done

# A connected, logged-in client on each broker; its first request after the
# removal fails on both.
# The time of a signature before the removal (the slowest of the two) is
# allowed on top of the 1 s: the refused request has to travel too.
round_trip=0
for n in 1 2; do
    cs_shell_start "app$n" "$(via fresh1 $n)" "$CRYPTOSERVER_TOKEN"
    cs_shell "app$n" CKR_OK login "$CRYPTOSERVER_PIN"
    started=$(now_ms)
    cs_shell "app$n" CKR_OK sign 01
    took=$(( $(now_ms) - started ))
    [ "$took" -le "$round_trip" ] || round_trip=$took
done
"$CS_ADMIN" client remove fresh1 --dir "$WORK" > "$T/remove.out" \
    || { cat "$T/remove.out"; cs_fail "client remove fresh1 failed"; }
removed=$(now_ms)
limit=$(( 1000 * CS_TIME_FACTOR + 2 * round_trip ))
for n in 1 2; do
    cs_shell "app$n" CKR_DEVICE_ERROR sign 01
    elapsed=$(( $(now_ms) - removed ))
    [ "$elapsed" -le "$limit" ] \
        || cs_fail "broker $n refused the removed client's request only after $elapsed ms (limit $limit ms: 1 s, scaled, and the signatures' time)"
    cs_log "client fresh1 removed: broker $n refused its next request with CKR_DEVICE_ERROR after $elapsed ms (a signature took $round_trip ms)"
done
cs_shell_stop app1
cs_shell_stop app2

# The other clients are not affected.
for n in 1 2; do
    cs_sign_verify "$(p11_via fresh2 $n)" 01 rsa "$KEYS/rsa2048.pub.pem" "$T" || cs_fail "client fresh2 no longer signs through broker $n"
done
for log in broker.log broker2.log; do
    grep -q 'client fresh1 removed from the allow-list' "$WORK/$log" \
        || cs_fail "$log does not log the removal of fresh1"
done
cs_log "client fresh2 still signs through both; both brokers logged the removal"

# The second broker ends as the first must (lib.sh cs_broker_end): status 0
# after SIGTERM, no unexpected warning.
status=0
cs_stop_child "$BROKER2_PID" TERM $(( 15 * CS_TIME_FACTOR )) || status=$?
[ "$status" = 0 ] || { tail -n 20 "$WORK/broker2.log"; cs_fail "the second broker ended with status $status"; }
unexpected=$(grep -E '^(W|E|F): |Sanitizer|runtime error:|Assertion .* failed' "$WORK/broker2.log" \
                 | grep -Ev -- "$CS_EXPECTED_LOG" || true)
[ -z "$unexpected" ] || cs_fail "the second broker's log has unexpected warnings: $unexpected"
