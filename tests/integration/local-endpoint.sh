#!/bin/bash
# local-endpoint.sh — broker/local-endpoint (cryptoserver-broker.conf(5)):
# the broker's client ROUTER listens on a UNIX socket (ipc://) beside its
# TCP endpoint, with the same CURVE and admission.  A client whose only
# endpoint is that socket signs (openssl verifies), and so does one on TCP
# at the same time; a local-endpoint that is not ipc:// with an absolute
# path stops the broker at start, naming the setting.
. "$(dirname "$0")/lib.sh"

cs_setup
T=$WORK/tmp
mkdir -p "$T"
# A UNIX socket path has at most 107 bytes: a short directory of its own
# (make distcheck's build tree is deep), removed at the end.
SOCK_DIR=$(mktemp -d /tmp/cs-ipc.XXXXXX)
IPC="ipc://$SOCK_DIR/broker.ipc"
"$CS_ADMIN" config set "$WORK/broker.conf" broker/local-endpoint "$IPC"
cs_start
grep -q "listening for clients on this host on $IPC" "$WORK/broker.log" || cs_fail "the broker does not say it listens on $IPC"
[ -S "$SOCK_DIR/broker.ipc" ] || cs_fail "no UNIX socket at $SOCK_DIR/broker.ipc"

cs_sign_verify "$P11" 01 rsa "$KEYS/rsa2048.pub.pem" "$T" || cs_fail "no signature over TCP"
"$CS_ADMIN" config set "$CRYPTOSERVER_CONF" client/endpoints "$IPC"
cs_sign_verify "$P11" 01 rsa "$KEYS/rsa2048.pub.pem" "$T" || cs_fail "no signature over $IPC"
cs_sign_verify "$P11" 03 ec "$KEYS/p256.pub.pem" "$T" || cs_fail "no ECDSA signature over $IPC"
cs_log "signed over TCP and over $IPC, verified by openssl"

# The UNIX socket has the TCP endpoint's CURVE handshake and ZAP allow-list
# (issue #19): a client key the broker does not list gets no answer over
# it and is logged as denied; the listed key's raw-wire request is answered.
WIRE=$top_builddir/tests/integration/cs-wire-client
"$CS_ADMIN" client add stray --dir "$WORK" > /dev/null
cp -a "$WORK/clients/stray" "$WORK/stray"
"$CS_ADMIN" client remove stray --dir "$WORK" > /dev/null
stray_key=$(sed -n 's/^ *public-key = "\(.*\)"$/\1/p' "$WORK/stray/client.cert")
rc=0
timeout $((5 * CS_TIME_FACTOR)) "$WIRE" --endpoint "$IPC" --broker-cert "$WORK/broker.cert" \
    --client-cert "$WORK/stray/client.cert" list 10 > "$T/stray.out" 2>&1 || rc=$?
[ "$rc" != 0 ] && ! grep -q '^CKR_' "$T/stray.out" || cs_fail "an unlisted client key was answered over $IPC: $(cat "$T/stray.out")"
cs_wait_until $((10 * CS_TIME_FACTOR)) grep -qF -- "denied (CURVE) client_key=$stray_key" "$WORK/broker.log" \
    || cs_fail "the broker log does not show the unlisted key denied over $IPC"
got=$("$WIRE" --endpoint "$IPC" --broker-cert "$WORK/broker.cert" --client-cert "$WORK/clients/demo/client.cert" \
      list 10 2> "$T/wire.err") || { cat "$T/wire.err"; cs_fail "the listed client's list over $IPC failed"; }
[ "${got%% *}" = CKR_OK ] || cs_fail "the listed client's list over $IPC: $got"
cs_log "over $IPC an unlisted CURVE key is denied by ZAP; the listed one is answered"

"$CS_ADMIN" config set "$CRYPTOSERVER_CONF" client/endpoints "$BROKER_ENDPOINT"
cs_stop
for bad in "tcp://127.0.0.1:0" "ipc://relative.ipc"; do
    "$CS_ADMIN" config set "$WORK/broker.conf" broker/local-endpoint "$bad"
    rc=0
    SOFTHSM2_CONF=$WORK/softhsm2.conf CRYPTOSERVER_DRIVER_DIR=$top_builddir/shim-drivers/.libs \
        timeout --kill-after=5 $((30 * CS_TIME_FACTOR)) "$CS_BROKER" -c "$WORK/broker.conf" -f \
        > "$T/bad.log" 2>&1 || rc=$?
    [ "$rc" != 0 ] && [ "$rc" -lt 124 ] || { cat "$T/bad.log"; cs_fail "broker/local-endpoint $bad: status $rc"; }
    grep -q "broker/local-endpoint.*must be ipc:// with an absolute path" "$T/bad.log" \
        || { cat "$T/bad.log"; cs_fail "broker/local-endpoint $bad: no line naming the setting"; }
done
cs_log "a local-endpoint that is not ipc:///PATH stops the broker at start, naming the setting"
rm -rf "$SOCK_DIR"
