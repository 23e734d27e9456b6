#!/bin/bash
# quickstart-ha.sh — the demo with two brokers (tools/quickstart.sh --ha,
# issue #11), through the steps quickstart.sh runs for it: demo-deploy.sh
# DIR --ha, demo-deploy.sh --start DIR, tools/quickstart.sh --stop DIR.
#  1. DIR/env.sh exports every variable of the one-broker demo and
#     CRYPTOSERVER_BROKER_PIDS and CRYPTOSERVER_PG_PID; the pids are live
#     brokers and a live postgres; the client lists both endpoints; the
#     keystore is in PostgreSQL on a Unix socket in DIR (no TCP).
#  2. RSA and ECDSA signatures through the module verify with openssl.
#  3. kill -9 of broker 1 (the first endpoint): signing still works (broker
#     2 serves it); --start starts broker 1 again, which signs.
#  4. --stop stops both brokers and PostgreSQL: no pid is left; a broker
#     that had died makes --stop fail, after it stopped the rest.
. "$(dirname "$0")/lib.sh"

cs_require pkcs11-tool softhsm2-util openssl psql curl
[ -x "$CS_PG_BINDIR/initdb" ] && [ -x "$CS_PG_BINDIR/pg_ctl" ] \
    || cs_missing_dependency "the PostgreSQL server (initdb, pg_ctl: package postgresql) is not installed"
for need in "$CS_ADMIN" "$CS_BROKER" "$top_builddir/pkcs11-module/.libs/cryptoserver-pkcs11.so" \
            "$top_builddir/shim-drivers/.libs/pkcs11.so"; do
    [ -e "$need" ] || cs_fail "$need is not built"
done
QUICKSTART=$top_srcdir/tools/quickstart.sh

# The EXIT trap: whatever still runs of the deployment is stopped (by its
# pid files, then by the pids env.sh gave), and both broker logs are checked.
ha_cleanup () {
    local rc=$? pid
    set +e
    "$CS_DEPLOY" --stop "$WORK" > "$WORK/cleanup-stop.log" 2>&1
    for pid in ${CRYPTOSERVER_BROKER_PIDS:-} ${CRYPTOSERVER_PG_PID:-}; do
        cs_pid_alive "$pid" && { echo "[$CS_TEST_NAME] killing leftover pid $pid" >&2; kill -KILL "$pid"; }
    done
    cs_kill_leftovers
    for log in "$WORK/broker.log" "$WORK/broker2.log"; do
        [ -f "$log" ] || continue
        cs_broker_log_check "$log" || { [ "$rc" != 0 ] || rc=1; }
    done
    if [ "${CS_VALGRIND:-}" = 1 ] && ! cs_valgrind_check && [ "$rc" = 0 ]; then
        rc=1
    fi
    if [ "${CS_TSAN:-}" = 1 ] && ! cs_tsan_check && [ "$rc" = 0 ]; then
        rc=1
    fi
    if [ -n "$(cs_private_keys_on_disk)" ]; then
        echo "[$CS_TEST_NAME] FAIL: private keys left on disk: $(cs_private_keys_on_disk | tr '\n' ' ')" >&2
        rc=1
    fi
    if [ "$rc" != 0 ] && [ "$rc" != 77 ]; then
        for log in "$WORK/broker.log" "$WORK/broker2.log" "$WORK/pg/server.log"; do
            [ -f "$log" ] && { echo "---- $log (last 30 lines) ----"; tail -n 30 "$log"; }
        done
    fi
    exit "$rc"
}
trap ha_cleanup EXIT
rm -rf "$WORK"
mkdir -p "$WORK/valgrind" "$WORK/sanitizer"
T=$WORK/tmp
mkdir -p "$T"

# ---- the deployment ---------------------------------------------------------------
"$CS_DEPLOY" "$WORK" --ha --endpoint "$CS_TEST_ENDPOINT" --metrics-port 0 > "$T/deploy.log" 2>&1 \
    || { cat "$T/deploy.log"; cs_fail "demo-deploy.sh --ha failed"; }
[ -z "$(cs_pg_cluster_pid "$WORK/pg")" ] || cs_fail "the deployment step left PostgreSQL running"
for f in broker.conf broker2.conf env.sh pg/data/PG_VERSION softhsm2.conf keys/rsa2048.pub.pem; do
    [ -s "$WORK/$f" ] || cs_fail "$f is missing"
done
[ ! -e "$WORK/keystore.db" ] || cs_fail "an --ha deployment has a keystore.db"
URL=$("$CS_ADMIN" config get "$WORK/broker.conf" keystore/url) || cs_fail "broker.conf has no keystore/url"
case $URL in
    "postgresql:///cryptoserver?host=$WORK/pg/sock&user=cs"|"postgresql:///cryptoserver?host=/tmp/cs-pg."*) ;;
    *) cs_fail "keystore/url is $URL" ;;
esac
[ "$("$CS_ADMIN" config get "$WORK/broker2.conf" keystore/url)" = "$URL" ] || cs_fail "broker2.conf has another keystore"
[ "$("$CS_ADMIN" config get "$WORK/broker2.conf" broker/endpoint-file)" = broker2.endpoint ] \
    || cs_fail "broker2.conf writes no broker2.endpoint"
# A second deployment step on the same DIR keeps it (and its keys).
sum=$(md5sum < "$WORK/keys/rsa2048.pub.pem")
"$CS_DEPLOY" "$WORK" > "$T/deploy2.log" 2>&1 || { cat "$T/deploy2.log"; cs_fail "demo-deploy.sh again on the --ha DIR failed"; }
[ "$(md5sum < "$WORK/keys/rsa2048.pub.pem")" = "$sum" ] || cs_fail "a second deployment step made new keys"
grep -q CRYPTOSERVER_PG_PID "$WORK/env.sh" || cs_fail "a second deployment step without --ha wrote a one-broker env.sh"

if [ "${CS_VALGRIND:-}" = 1 ]; then      # brokers under valgrind answer slowly (as cs_setup)
    "$CS_ADMIN" config set "$WORK/clients/demo/client.conf" client/timeout-ms 120000
    "$CS_ADMIN" config set "$WORK/clients/demo/client.conf" client/heartbeat-timeout-ms 60000
    "$CS_ADMIN" config set "$WORK/clients/demo/client.conf" client/attempt-timeout-ms 60000
    "$CS_ADMIN" config set "$WORK/broker.conf" broker/max-deadline-ms 120000
fi

# ---- start, env.sh -----------------------------------------------------------------
"$CS_DEPLOY" --start "$WORK" > "$T/start.log" 2>&1 || { cat "$T/start.log"; cs_fail "demo-deploy.sh --start failed"; }
# shellcheck disable=SC1091
. "$WORK/env.sh"
for var in CRYPTOSERVER_CONF CRYPTOSERVER_MODULE CRYPTOSERVER_TOKEN CRYPTOSERVER_PIN SOFTHSM2_CONF \
           CRYPTOSERVER_BOARD_PIN CRYPTOSERVER_BROKER_PID CRYPTOSERVER_METRICS_URL \
           CRYPTOSERVER_BROKER_PIDS CRYPTOSERVER_PG_PID; do
    [ -n "${!var:-}" ] || cs_fail "env.sh does not set $var"
    cs_log "$var=${!var}"
done
[ -f "$CRYPTOSERVER_CONF" ] || cs_fail "CRYPTOSERVER_CONF names no file"
[ -f "$CRYPTOSERVER_MODULE" ] || cs_fail "CRYPTOSERVER_MODULE names no file"
[ -f "$SOFTHSM2_CONF" ] || cs_fail "SOFTHSM2_CONF names no file"
[ "$CRYPTOSERVER_BOARD_PIN" = "$(cat "$WORK/board.pin")" ] || cs_fail "CRYPTOSERVER_BOARD_PIN is not board.pin's"
read -r PID1 PID2 rest <<<"$CRYPTOSERVER_BROKER_PIDS"
[ -n "$PID2" ] && [ -z "$rest" ] && [ "$PID1" != "$PID2" ] \
    || cs_fail "CRYPTOSERVER_BROKER_PIDS is not two pids: '$CRYPTOSERVER_BROKER_PIDS'"
[ "$PID1" = "$CRYPTOSERVER_BROKER_PID" ] || cs_fail "CRYPTOSERVER_BROKER_PID is not the first broker's"
for pid in $PID1 $PID2; do
    cs_pid_alive "$pid" || cs_fail "broker pid $pid is not running"
    tr '\0' ' ' < "/proc/$pid/cmdline" | grep -q "cryptoserver-broker -c $WORK/broker2\?.conf" \
        || cs_fail "pid $pid is not a broker of $WORK: $(tr '\0' ' ' < "/proc/$pid/cmdline")"
done
cs_pid_alive "$CRYPTOSERVER_PG_PID" || cs_fail "CRYPTOSERVER_PG_PID $CRYPTOSERVER_PG_PID is not running"
[ "$(cat "/proc/$CRYPTOSERVER_PG_PID/comm")" = postgres ] || cs_fail "CRYPTOSERVER_PG_PID is not a postgres"
E1=$(cat "$WORK/broker.endpoint")
E2=$(cat "$WORK/broker2.endpoint")
[ "$E1" != "$E2" ] || cs_fail "both brokers on $E1"
[ "$("$CS_ADMIN" config get "$CRYPTOSERVER_CONF" client/endpoints)" = "$E1,$E2" ] \
    || cs_fail "the client does not list both endpoints: $("$CS_ADMIN" config get "$CRYPTOSERVER_CONF" client/endpoints)"
[ "$CRYPTOSERVER_METRICS_URL" = "$(cat "$WORK/broker.metrics")" ] || cs_fail "CRYPTOSERVER_METRICS_URL is not broker 1's"
[ "$CRYPTOSERVER_METRICS_URL" != "$(cat "$WORK/broker2.metrics")" ] || cs_fail "both brokers serve one metrics URL"
curl -sf --max-time 10 "$CRYPTOSERVER_METRICS_URL" | grep -q '^process_cpu_seconds_total ' \
    || cs_fail "no metrics at $CRYPTOSERVER_METRICS_URL"
cs_pg_paths "$WORK/pg"
[ "$(cs_psql cryptoserver -tAc "SELECT name FROM tenants")" = demo ] || cs_fail "tenant demo is not in PostgreSQL"
[ "$(cs_psql postgres -tAc "SHOW listen_addresses")" = "" ] || cs_fail "PostgreSQL listens on TCP"
cs_log "two brokers ($E1, $E2) on PostgreSQL (pid $CRYPTOSERVER_PG_PID); env.sh complete"

# ---- sign ----------------------------------------------------------------------------------
P11="pkcs11-tool --module $CRYPTOSERVER_MODULE --token-label $CRYPTOSERVER_TOKEN"
cs_sign_verify "$P11" 01 rsa "$WORK/keys/rsa2048.pub.pem" "$T" || cs_fail "RSA signature with both brokers up"
cs_sign_verify "$P11" 03 ec "$WORK/keys/p256.pub.pem" "$T" || cs_fail "ECDSA signature with both brokers up"
cs_log "RSA and ECDSA signatures verify with both brokers up"

# broker2_jobs: the jobs broker 2 ran (sum of cryptoserver_jobs_total).
broker2_jobs () {
    curl -sf --max-time 10 "$(cat "$WORK/broker2.metrics")" \
        | awk '/^cryptoserver_jobs_total[{ ]/ { n += $NF } END { print n + 0 }'
}

# ---- kill -9 of broker 1, sign, start it again ---------------------------------------------
before=$(broker2_jobs)
kill -KILL "$PID1"
cs_wait_until 10 eval '! cs_pid_alive "$PID1"' || cs_fail "broker 1 (pid $PID1) survived SIGKILL"
cs_pid_alive "$PID2" || cs_fail "broker 2 died with broker 1"
cs_sign_verify "$P11" 01 rsa "$WORK/keys/rsa2048.pub.pem" "$T" || cs_fail "RSA signature with broker 1 killed"
cs_sign_verify "$P11" 03 ec "$WORK/keys/p256.pub.pem" "$T" || cs_fail "ECDSA signature with broker 1 killed"
after=$(broker2_jobs)
[ "$after" -gt "$before" ] || cs_fail "broker 2 ran no job while broker 1 was dead ($before, $after)"
cs_log "broker 1 killed: signatures verify (broker 2 ran $((after - before)) jobs)"

"$CS_DEPLOY" --start "$WORK" > "$T/restart.log" 2>&1 || { cat "$T/restart.log"; cs_fail "--start after the kill failed"; }
grep -q "broker 2 already running (pid $PID2)" "$T/restart.log" || { cat "$T/restart.log"; cs_fail "--start touched broker 2"; }
# shellcheck disable=SC1091
. "$WORK/env.sh"
read -r NEW1 NEW2 <<<"$CRYPTOSERVER_BROKER_PIDS"
[ "$NEW2" = "$PID2" ] && [ "$NEW1" != "$PID1" ] && cs_pid_alive "$NEW1" \
    || cs_fail "after --start, CRYPTOSERVER_BROKER_PIDS is '$CRYPTOSERVER_BROKER_PIDS' (was $PID1 $PID2)"
[ "$("$CS_ADMIN" config get "$CRYPTOSERVER_CONF" client/endpoints)" = "$(cat "$WORK/broker.endpoint"),$E2" ] \
    || cs_fail "the client does not list the restarted broker"
cs_sign_verify "$P11" 01 rsa "$WORK/keys/rsa2048.pub.pem" "$T" || cs_fail "RSA signature after the restart"
cs_log "broker 1 started again (pid $NEW1); signatures verify"

# ---- stop: nothing left ----------------------------------------------------------------------
PG_PID=$CRYPTOSERVER_PG_PID
"$QUICKSTART" --stop "$WORK" > "$T/stop.log" 2>&1 || { cat "$T/stop.log"; cs_fail "quickstart.sh --stop failed"; }
for pid in $NEW1 $PID2 $PG_PID; do
    ! cs_pid_alive "$pid" || cs_fail "pid $pid still runs after --stop"
done
for f in broker.pid broker2.pid pg/data/postmaster.pid; do
    [ ! -e "$WORK/$f" ] || cs_fail "$f is left after --stop"
done
# shellcheck disable=SC1091
. "$WORK/env.sh"
[ -z "$CRYPTOSERVER_BROKER_PIDS$CRYPTOSERVER_PG_PID" ] || cs_fail "env.sh names pids of a stopped deployment"
cs_log "quickstart.sh --stop: both brokers and PostgreSQL stopped, no pid left"

# ---- a broker that died: --stop stops the rest and says so ------------------------------------
"$CS_DEPLOY" --start "$WORK" > "$T/start2.log" 2>&1 || { cat "$T/start2.log"; cs_fail "the second --start failed"; }
# shellcheck disable=SC1091
. "$WORK/env.sh"
read -r PID1 PID2 <<<"$CRYPTOSERVER_BROKER_PIDS"
PG_PID=$CRYPTOSERVER_PG_PID
kill -KILL "$PID2"
cs_wait_until 10 eval '! cs_pid_alive "$PID2"' || cs_fail "broker 2 (pid $PID2) survived SIGKILL"
rc=0
"$QUICKSTART" --stop "$WORK" > "$T/stop2.log" 2>&1 || rc=$?
[ "$rc" = 1 ] || { cat "$T/stop2.log"; cs_fail "--stop with a dead broker returned $rc, not 1"; }
grep -q "the broker 2 (pid $PID2) was not running: it died" "$T/stop2.log" || { cat "$T/stop2.log"; cs_fail "--stop does not name the dead broker"; }
for pid in $PID1 $PG_PID; do
    ! cs_pid_alive "$pid" || cs_fail "pid $pid still runs after --stop with a dead broker"
done
cs_log "--stop with broker 2 dead: fails (status 1) naming it, and stops broker 1 and PostgreSQL"
