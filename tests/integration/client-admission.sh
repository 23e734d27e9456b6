#!/bin/bash
# client-admission.sh — admission at once (issue #11): a client added with
# `cryptoserver-admin client add` while the broker runs signs on its very
# first request (no sleep, no retry), three times in a row; and once
# removed with `client remove`, a connected client's next request is refused
# with CKR_DEVICE_ERROR within 1 s (scaled).  The broker watches clients.d
# with inotify (broker/clients_watch.h); re-reading it on a 2 s timer, as
# before, refused most first requests.
. "$(dirname "$0")/lib.sh"

cs_setup
cs_start
cs_expect_broker_log 'request refused: client key .* is not in the allow-list'
T=$WORK/tmp
mkdir -p "$T"

now_ms () { echo $(( $(date +%s%N) / 1000000 )); }

for i in 1 2 3; do
    "$CS_ADMIN" client add "fresh$i" --dir "$WORK" --tenant demo --endpoint "$BROKER_ENDPOINT" \
        > "$T/add$i.out" || { cat "$T/add$i.out"; cs_fail "client add fresh$i failed"; }
    p11="env CRYPTOSERVER_CONF=$WORK/clients/fresh$i/client.conf pkcs11-tool --module $CRYPTOSERVER_MODULE --token-label $CRYPTOSERVER_TOKEN"
    cs_sign_verify "$p11" 01 rsa "$KEYS/rsa2048.pub.pem" "$T" \
        || cs_fail "client fresh$i, added just before, could not sign on its first request"
    cs_log "client fresh$i: added, then signed at once (verified by openssl)"
done

# A connected, logged-in client; its first request after the removal fails.
cs_shell_start app fresh1 "$CRYPTOSERVER_TOKEN"
cs_shell app CKR_OK login "$CRYPTOSERVER_PIN"
cs_shell app CKR_OK sign 01
"$CS_ADMIN" client remove fresh1 --dir "$WORK" > "$T/remove.out" \
    || { cat "$T/remove.out"; cs_fail "client remove fresh1 failed"; }
removed=$(now_ms)
cs_shell app CKR_DEVICE_ERROR sign 01
elapsed=$(( $(now_ms) - removed ))
[ "$elapsed" -le $((1000 * CS_TIME_FACTOR)) ] \
    || cs_fail "the removed client's request was refused only after $elapsed ms (limit $((1000 * CS_TIME_FACTOR)) ms)"
cs_log "client fresh1 removed: its next request was refused with CKR_DEVICE_ERROR after $elapsed ms"
cs_shell_stop app

# The other clients are not affected.
p11="env CRYPTOSERVER_CONF=$WORK/clients/fresh2/client.conf pkcs11-tool --module $CRYPTOSERVER_MODULE --token-label $CRYPTOSERVER_TOKEN"
cs_sign_verify "$p11" 01 rsa "$KEYS/rsa2048.pub.pem" "$T" || cs_fail "client fresh2 no longer signs"
grep -q 'client fresh1 removed from the allow-list' "$WORK/broker.log" \
    || cs_fail "the broker did not log the removal of fresh1"
cs_log "client fresh2 still signs; the broker logged the removal"
