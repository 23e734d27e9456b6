#!/bin/bash
# party-control.sh — the party service's control socket (party/control,
# docs/SHARED-KEYS.md "Over the network") has no authentication: whoever
# connects signs and decrypts with every tenant's shared key, without a PIN
# or the master key (its RAW verb is what the frontend sends after its
# checks).  Issue #19: it must be reachable by the broker's own user (and
# root) only, whatever the umask and the directory's mode, and never on a
# network endpoint.  Three real parties (lib-parties.sh), party 1 started
# with umask 000 in a world-readable directory:
#   - party 1's socket file is mode 600;
#   - a process of another user (nobody) that points cryptoserver-admin
#     shared sign at it gets no answer and no signature (the kernel's peer
#     credentials are checked at accept, ZMQ_IPC_FILTER_UID), while the
#     broker's user still signs (openssl verifies);
#   - party/control = tcp://127.0.0.1:PORT stops the broker at start with an
#     E: line naming the setting;
#   - a deployment whose DIR/party.ipc is longer than a socket path holds
#     (107 bytes, unix(7); a distcheck tree is that deep) binds its socket in
#     TMPDIR/cryptoserver-UID (mode 700) instead, mode 600, and
#     cryptoserver-admin shared reaches it there; that directory made by
#     someone else (mode 777) stops the broker with an E: line, as does a
#     party/control path that is too long.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"

cs_require openssl setpriv
[ "$(id -u)" = 0 ] || cs_skip "needs root to run a client as another user (nobody)"
trap cs_cleanup EXIT
rm -rf "$WORK"
mkdir -p "$WORK/valgrind" "$WORK/sanitizer"
# shellcheck source=tests/integration/lib-parties.sh
. "$(dirname "$0")/lib-parties.sh"
parties_make
admin () { "$CS_ADMIN" shared "$@" --tenant demo --timeout $((60 * CS_TIME_FACTOR)); }

# A deployment directory as init makes it (0755) and a permissive umask: neither may
# open the control socket to other users.
chmod 0755 "$WORK"     # WORK/p1 is 0755 as cryptoserver-admin init makes it
old_umask=$(umask)
umask 000
party_start 1
umask "$old_umask"
for i in 2 3; do party_start "$i"; done
# The socket the log names: DIR/party.ipc, or in TMPDIR/cryptoserver-UID when
# the build tree is too deep for that path (a distcheck tree can be).
SOCK=$(sed -n 's/.*party 1 of 3 on .* (control ipc:\/\/\(.*\))$/\1/p' "$WORK/p1.log" | tail -n 1)
[ -S "$SOCK" ] || cs_fail "no control socket at $SOCK"
mode=$(stat -c %a "$SOCK")
[ "$mode" = 600 ] || cs_fail "the control socket $SOCK has mode $mode (umask 000), not 600"
cs_log "control socket $SOCK: mode $mode under umask 000"

admin generate --dir "$WORK/p1" --label ctl1 --bits 1024 > "$WORK/gen.out" 2>&1 \
    || { cat "$WORK/gen.out"; cs_fail "shared generate failed"; }
admin public --dir "$WORK/p1" --label ctl1 --out "$WORK/pub.pem" || cs_fail "public"
OUT=$WORK/out
mkdir -p "$OUT"
chmod 1777 "$OUT"
head -c 100 /dev/urandom > "$OUT/msg"
chmod 0644 "$OUT/msg"

# Another user with only the socket's path (its own broker.conf naming it):
# no PIN, no master key, no CURVE key.
mkdir -p "$WORK/stranger"
printf 'party\n    control = "ipc://%s"\n' "$SOCK" > "$WORK/stranger/broker.conf"
chmod -R a+rX "$WORK/stranger"
rc=0
setpriv --reuid=65534 --regid=65534 --clear-groups -- "$CS_ADMIN" shared sign --dir "$WORK/stranger" \
    --tenant demo --label ctl1 --mech sha256-pkcs1 --in "$OUT/msg" --out "$OUT/stranger.sig" --timeout 3 \
    > "$WORK/stranger.out" 2>&1 || rc=$?
cat "$WORK/stranger.out"
[ ! -s "$OUT/stranger.sig" ] || cs_fail "another user signed with tenant demo's shared key through party/control"
[ "$rc" != 0 ] || cs_fail "another user's shared sign exited 0"
grep -q "no answer from the party service" "$WORK/stranger.out" \
    || cs_fail "another user's request was answered: $(cat "$WORK/stranger.out")"
cs_log "user nobody: no answer on $SOCK, no signature"

admin sign --dir "$WORK/p1" --label ctl1 --mech sha256-pkcs1 --in "$OUT/msg" --out "$OUT/own.sig" \
    || cs_fail "the broker's own user cannot sign through party/control"
openssl dgst -sha256 -verify "$WORK/pub.pem" -signature "$OUT/own.sig" "$OUT/msg" > /dev/null \
    || cs_fail "the broker's user's signature does not verify"
cs_log "the broker's user signs through $SOCK (openssl verifies)"

# A network endpoint for the control socket is refused at start.
cs_peer_stop p1
cp "$WORK/p1/broker.conf" "$WORK/p1/tcp.conf"
"$CS_ADMIN" config set "$WORK/p1/tcp.conf" party/control "tcp://127.0.0.1:$(free_port)"
status=0
CRYPTOSERVER_DRIVER_DIR=$top_builddir/shim-drivers/.libs timeout $((30 * CS_TIME_FACTOR)) "$CS_BROKER" \
    -c "$WORK/p1/tcp.conf" -f > "$WORK/tcp.log" 2>&1 < /dev/null || status=$?
[ "$status" != 0 ] && [ "$status" -lt 124 ] || { cat "$WORK/tcp.log"; cs_fail "party/control tcp://: status $status"; }
grep -q '^E: .*party/control: must be ipc:// with an absolute path' "$WORK/tcp.log" \
    || { cat "$WORK/tcp.log"; cs_fail "party/control tcp://: no E: line naming the setting"; }
# Said once, where the setting is read: no second E: line naming no socket.
grep -Eq 'control socket *$' "$WORK/tcp.log" \
    && { cat "$WORK/tcp.log"; cs_fail "party/control tcp://: an E: line naming an empty control socket"; }
cs_log "party/control = tcp://... stops the broker at start: $(grep -m1 'party/control' "$WORK/tcp.log")"

# A deployment too deep for DIR/party.ipc: its socket goes to TMPDIR/cryptoserver-UID.
DEEP=$WORK/deep/$(printf 'd%.0s' $(seq 1 60))/p1
mkdir -p "$(dirname "$DEEP")"
mv "$WORK/p1" "$DEEP"
[ ${#DEEP} -gt 98 ] || cs_fail "$DEEP/party.ipc is not too long for a socket"
RUN_TMP=$(mktemp -d /tmp/cs-party-control.XXXXXX)
RUN_DIR=$RUN_TMP/cryptoserver-$(id -u)
# The EXIT trap: cs_cleanup, with the exit status it reads, after the run directory goes.
party_control_cleanup () { local rc=$?; set +e; rm -rf "$RUN_TMP"; (exit "$rc"); cs_cleanup; }
trap party_control_cleanup EXIT
# deep_start CONF [LOG]: the deep broker, in the background (DEEP_PID), logging to WORK/LOG.log.
deep_start () {
    rm -f "$DEEP/broker.endpoint"
    TMPDIR=$RUN_TMP CRYPTOSERVER_DRIVER_DIR=$top_builddir/shim-drivers/.libs "$CS_BROKER" -c "$1" -f \
        > "$WORK/${2:-deep}.log" 2>&1 < /dev/null &
    DEEP_PID=$!
}
deep_start "$DEEP/broker.conf"
CS_PEER_PID[deep]=$DEEP_PID
CS_PEER_ENDPOINT[deep]=party
s_deep_up () { grep -q "party 1 of 3" "$WORK/deep.log"; }
cs_wait_until $((30 * CS_TIME_FACTOR)) s_deep_up || { cat "$WORK/deep.log"; cs_fail "the deep deployment did not start"; }
DEEP_SOCK=$(sed -n 's/.*party 1 of 3 on .* (control ipc:\/\/\(.*\))$/\1/p' "$WORK/deep.log")
case $DEEP_SOCK in
    "$RUN_DIR"/party-*.ipc) ;;
    *) cat "$WORK/deep.log"; cs_fail "the deep deployment's control socket is '$DEEP_SOCK', not in $RUN_DIR" ;;
esac
[ -S "$DEEP_SOCK" ] && [ "$(stat -c %a "$DEEP_SOCK")" = 600 ] && [ "$(stat -c %a "$RUN_DIR")" = 700 ] \
    || cs_fail "$DEEP_SOCK is not a socket of mode 600 in a directory of mode 700"
TMPDIR=$RUN_TMP admin public --dir "$DEEP" --label ctl1 --out "$WORK/deep-pub.pem" \
    || cs_fail "cryptoserver-admin shared does not reach the deep deployment's socket"
cmp -s "$WORK/pub.pem" "$WORK/deep-pub.pem" || cs_fail "the deep deployment gave another public key"
cs_log "a deployment $((${#DEEP} + 10)) bytes deep: control socket $DEEP_SOCK (mode 600), reached by the admin"
cs_peer_stop deep
[ ! -e "$DEEP_SOCK" ] || cs_fail "$DEEP_SOCK is left after the broker stopped"

# That directory made by someone else (here: mode 777) is refused, so is a long party/control.
chmod 0777 "$RUN_DIR"
deep_start "$DEEP/broker.conf" refused
wait "$DEEP_PID" && cs_fail "the broker started with $RUN_DIR mode 777"
grep -q "^E: .*party/control: $RUN_DIR must be a directory of this user with mode 700" "$WORK/refused.log" \
    || { cat "$WORK/refused.log"; cs_fail "$RUN_DIR mode 777: no E: line"; }
cp "$DEEP/broker.conf" "$DEEP/long.conf"
"$CS_ADMIN" config set "$DEEP/long.conf" party/control "ipc://$DEEP/party.ipc"
deep_start "$DEEP/long.conf" refused
wait "$DEEP_PID" && cs_fail "the broker started with a party/control path too long for a socket"
grep -q '^E: .*party/control: the path of .* is [0-9]* bytes, over the 107' "$WORK/refused.log" \
    || { cat "$WORK/refused.log"; cs_fail "a long party/control: no E: line"; }
cs_log "$RUN_DIR of mode 777, and a party/control path too long for a socket, stop the broker with an E: line"
cs_log "ok"
