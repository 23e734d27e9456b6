#!/bin/bash
# secret-files.sh — the broker refuses to start on a secret file that group
# or others can read (issue #7 item 7): ticket.key, audit.key, master.key, metrics.token,
# broker.cert_secret and a board's pin-file.  Each one at mode 0644 makes it
# exit non-zero with an E: line naming the file and the fix (chmod 600),
# never a crash; demo-deploy.sh / cryptoserver-admin make them 0600; back at
# 0600 the broker starts and signs.
. "$(dirname "$0")/lib.sh"

cs_setup
T=$WORK/tmp
mkdir -p "$T"
SECRETS="ticket.key audit.key master.key broker.cert_secret board.pin metrics.token"

for name in $SECRETS; do
    mode=$(stat -c %a "$WORK/$name")
    [ "$mode" = 600 ] || cs_fail "demo-deploy.sh made $name with mode $mode, not 600"
done
cs_log "demo-deploy.sh made $SECRETS with mode 600"

# refused NAME: the broker with NAME at 0644 must exit non-zero, in time,
# saying "NAME can be read by group or others (mode 0644): chmod 600 NAME".
refused () {
    local name=$1 rc
    chmod 644 "$WORK/$name"
    set +e
    SOFTHSM2_CONF=$WORK/softhsm2.conf CRYPTOSERVER_DRIVER_DIR=$top_builddir/shim-drivers/.libs \
        timeout --kill-after=5 $((30 * CS_TIME_FACTOR)) "$CS_BROKER" -c "$WORK/broker.conf" -f \
        > "$T/$name.log" 2>&1
    rc=$?
    set -e
    chmod 600 "$WORK/$name"
    tail -n 3 "$T/$name.log"
    [ "$rc" != 0 ] || cs_fail "the broker started with $name at mode 0644"
    [ "$rc" -lt 124 ] || cs_fail "the broker hung or crashed (status $rc) on $name at mode 0644"
    grep -Eq "^E: .*/$name can be read by group or others \(mode 0644\): chmod 600 .*/$name" "$T/$name.log" \
        || cs_fail "no E: line naming $name and 'chmod 600' in the broker's log"
    cs_log "$name at mode 0644: the broker exits with status $rc and says chmod 600"
}

for name in $SECRETS; do
    refused "$name"
done

cs_start
cs_sign_verify "$P11" 01 rsa "$KEYS/rsa2048.pub.pem" "$T" || cs_fail "no signature once the files are 0600"
cs_log "at mode 0600 the broker starts and signs"
