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
