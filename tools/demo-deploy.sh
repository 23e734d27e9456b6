#!/bin/bash
# demo-deploy.sh — makes (and starts/stops the broker of) a demo deployment:
# the one copy of this logic, used by tools/quickstart.sh and by the
# integration tests (tests/integration/lib.sh).  Layout: docs/CONTRACTS.md,
# "Deployment directory" and "Demo keys".
set -eu

usage () {
    cat <<'EOT'
usage: demo-deploy.sh DIR [--ha] [--port P | --endpoint E] [--metrics-port M]
                         [--tenant NAME[:PIN:SOPIN] ...]  make or refresh a deployment
       demo-deploy.sh --start DIR [--broker N]         start its broker(s) in the background
       demo-deploy.sh --run DIR [--broker N]           run its broker in the foreground (exec)
       demo-deploy.sh --wait DIR [--broker N]          wait until a --run broker listens
       demo-deploy.sh --stop DIR [--broker N]          stop its broker(s)
       demo-deploy.sh --help

DIR gets: broker and client key pairs and configs (cryptoserver-admin), two
SoftHSMv2 tokens board0 and board1 (DIR/softhsm2.conf, PIN in DIR/board.pin)
holding the same keys rsa2048 (CKA_ID 01), rsa3072 (02) and p256 (03), their
public keys in DIR/keys/LABEL.pub.pem, tenant demo (PIN 1234, SO PIN 123456)
in DIR/keystore.db (master key DIR/master.key), client demo, and DIR/env.sh
to source.  The boards are registered with tenant = demo: their keys belong
to tenant demo only; an openssl board "cpu" (2 threads) signs with keystore
keys and generates keys.  Each --tenant NAME[:PIN:SOPIN] adds a tenant (default
PINs 1234 and 123456) with no keys and a client NAME
(DIR/clients/NAME/client.conf).  An existing DIR keeps its keys and
state; only what is missing is made.  The broker listens on --endpoint E
(default on a new DIR: a free port, tcp://127.0.0.1:![20000-32767]; --port
P means tcp://127.0.0.1:P; "tcp://127.0.0.1:*" picks the lowest free port
from 49152 and "tcp://127.0.0.1:!" a random free one; "![20000-32767]"
after either picks from that range: below Linux's ephemeral ports, so a
dead broker's port is taken neither by another broker nor by a client's
outgoing connection); --start writes the bound port into the client
configs and says which it is.  Only tools/quickstart.sh asks for the
demo's fixed ports (5555, metrics 9464), so that tools and tests that make
deployments of their own run beside a running demo.

The broker serves its metrics (cryptoserver-broker(8), METRICS) at
http://127.0.0.1:M/metrics: --metrics-port M, else $CS_METRICS_PORT, else
a free port on a new DIR (an existing DIR keeps its setting unless one of
them is given); M = 0 picks a free port, "off" turns the endpoint off.  Client
and tenant names are shown only to a scraper with the bearer token of
DIR/metrics.token (made with the endpoint; env.sh exports its path as
CRYPTOSERVER_METRICS_TOKEN_FILE; cryptoserver-admin status --dir DIR
sends it).
--start refuses to start a broker whose fixed port (endpoint or metrics)
another program holds, naming the port and what changes it.  The broker
writes the URL it serves to DIR/broker.metrics, and DIR/env.sh exports it
as CRYPTOSERVER_METRICS_URL (read when env.sh is sourced).

--start runs the broker with its log in DIR/broker.log and its pid in
DIR/broker.pid and waits (bounded) until it listens.  --run execs the
broker in the foreground (same log and pid file) so that the caller owns
the process and its exit status; --wait then waits until it listens and
points the client configs at it (the tests: "--run DIR &", "--wait DIR").
--stop sends SIGTERM and waits; it fails when the broker had to be killed
with SIGKILL or had died before.

--ha (on a new DIR) makes a deployment with two brokers on one PostgreSQL
keystore: a private cluster in DIR/pg (tools/demo-pg.sh: initdb, pg_ctl,
listening only on the Unix socket directory DIR/pg/sock, no TCP; as root
it runs as user postgres) holding the keystore (broker.conf keystore/url,
"cryptoserver-admin init --keystore-url"), and a second broker with
DIR/broker2.conf: broker.conf (same keystore, master key, ticket key,
broker key pair and SoftHSM boards) with its own endpoint (P+1 for a fixed
port P, else the same "*" or "!"), metrics port (M+1, or the same 0, or
off) and files DIR/broker2.endpoint, broker2.metrics, broker2.pid and
broker2.log; --start rewrites it from broker.conf, keeping those.  The
client configs list both endpoints (client/endpoints: the module fails
over between them).  DIR/env.sh then also exports
CRYPTOSERVER_BROKER_PIDS (both brokers' pids, space-separated) and
CRYPTOSERVER_PG_PID (the postmaster's).  A DIR made with --ha stays one:
every action knows it by DIR/pg.  On it, --start starts PostgreSQL and
then each broker that is not running (a broker killed on purpose is
started again), --stop stops both brokers and then PostgreSQL (it fails
when one of them had died or had to be killed, after stopping the rest),
and --broker N (1 or 2) makes --start, --run, --wait or --stop act on
broker N alone (--run and --wait: broker 1 without it).  The deployment
step starts PostgreSQL when it is not running and stops it again at its
end.

Environment:
  CS_BUILD_DIR       top build directory holding the built programs
                     (default: the source tree this script lives in)
  SOFTHSM2_MODULE    SoftHSMv2 library (default: the Debian path)
  CS_START_TIMEOUT   seconds --start waits for the broker (default 30)
  CS_STOP_TIMEOUT    seconds --stop waits after SIGTERM before SIGKILL (default 15)
  CS_METRICS_PORT    the metrics port when --metrics-port is not given
  CS_BROKER_WRAPPER  command words put before the broker by --start, e.g.
                     "valgrind --log-file=..." (tests/integration/lib.sh, CS_VALGRIND)
EOT
}

die () { echo "demo-deploy: error: $*" >&2; exit 1; }
say () { echo "demo-deploy: $*"; }

TENANT=demo
USER_PIN=1234
SO_PIN=123456
CLIENT=demo
BOARDS="board0 board1"
# label id bits-or-curve
KEYS="rsa2048:01:rsa:2048 rsa3072:02:rsa:3072 p256:03:ec:P-256"

SRC_DIR=$(cd "$(dirname "$0")/.." && pwd)
BUILD_DIR=$(cd "${CS_BUILD_DIR:-$SRC_DIR}" && pwd)
ADMIN=$BUILD_DIR/tools/cryptoserver-admin
BROKER=$BUILD_DIR/broker/cryptoserver-broker
MODULE=$BUILD_DIR/pkcs11-module/.libs/cryptoserver-pkcs11.so
DRIVER_DIR=$BUILD_DIR/shim-drivers/.libs
# shellcheck source=tools/demo-pg.sh
. "$SRC_DIR/tools/demo-pg.sh"

find_softhsm () {
    if [ -n "${SOFTHSM2_MODULE:-}" ]; then echo "$SOFTHSM2_MODULE"; return; fi
    for f in /usr/lib/softhsm/libsofthsm2.so /usr/lib/x86_64-linux-gnu/softhsm/libsofthsm2.so \
             /usr/local/lib/softhsm/libsofthsm2.so; do
        if [ -f "$f" ]; then echo "$f"; return; fi
    done
    die "SoftHSMv2 not found (install softhsm2 or set SOFTHSM2_MODULE)"
}

# ---- deployment --------------------------------------------------------

# p11 BOARD ARGS...: pkcs11-tool on one SoftHSM board, logged in.
p11 () {
    local board=$1; shift
    pkcs11-tool --module "$SOFTHSM" --token-label "$board" --login --pin "$BOARD_PIN" "$@"
}

make_admin_deployment () {
    if [ ! -f "$DIR/broker.conf" ]; then
        # shellcheck disable=SC2046
        "$ADMIN" init "$DIR" --tenant "$TENANT" --pin "$USER_PIN" --so-pin "$SO_PIN" \
            --endpoint "$ENDPOINT" $(is_ha && echo --keystore-url "$CS_PG_URL") >/dev/null
        say "created broker key pair, ticket key and broker.conf$(is_ha && echo " (keystore in PostgreSQL)")"
    elif [ -n "$ENDPOINT_GIVEN" ]; then
        "$ADMIN" config set "$DIR/broker.conf" broker/endpoint "$ENDPOINT"
    fi
    "$ADMIN" config set "$DIR/broker.conf" broker/endpoint-file broker.endpoint
}

# configure_metrics: broker/metrics on 127.0.0.1 (METRICS_PORT; "off": none)
# and broker/metrics-file, unless DIR already has a setting and no port was
# asked for.
configure_metrics () {
    local conf=$DIR/broker.conf
    if [ -z "$METRICS_PORT" ] && "$ADMIN" config get "$conf" broker/metrics >/dev/null 2>&1; then
        return 0
    fi
    METRICS_PORT=${METRICS_PORT:-0}
    if [ "$METRICS_PORT" = off ]; then
        "$ADMIN" config set "$conf" broker/metrics ""
        return 0
    fi
    case $METRICS_PORT in
        ''|*[!0-9]*) die "--metrics-port must be a port number, 0 or off (got $METRICS_PORT)" ;;
    esac
    "$ADMIN" config set "$conf" broker/metrics "http://127.0.0.1:$METRICS_PORT/metrics"
    "$ADMIN" config set "$conf" broker/metrics-file broker.metrics
    # Client and tenant names only to a scraper with this bearer token.
    if [ ! -s "$DIR/metrics.token" ]; then
        (umask 077 && openssl rand -hex 32 > "$DIR/metrics.token")
    fi
    "$ADMIN" config set "$conf" broker/metrics-token-file metrics.token
}

make_softhsm_config () {
    mkdir -p "$DIR/softhsm/tokens"
    # Always rewritten: it holds DIR's absolute path (a copied DIR stays valid).
    printf 'directories.tokendir = %s/softhsm/tokens\nobjectstore.backend = file\nlog.level = ERROR\nslots.removable = false\n' \
        "$DIR" > "$DIR/softhsm2.conf"
    if [ ! -s "$DIR/board.pin" ]; then
        (umask 077; openssl rand -hex 8 > "$DIR/board.pin"; openssl rand -hex 8 > "$DIR/board.so-pin")
    fi
    BOARD_PIN=$(cat "$DIR/board.pin")
}

# Makes both tokens afresh (deleting half-made ones) and imports the keys.
make_boards () {
    local board
    for board in $BOARDS; do
        softhsm2-util --delete-token --token "$board" >/dev/null 2>&1 || true
        softhsm2-util --init-token --free --label "$board" --pin "$BOARD_PIN" \
            --so-pin "$(cat "$DIR/board.so-pin")" >/dev/null
    done
    say "initialised SoftHSMv2 tokens: $BOARDS"
}

# gen_key KIND SIZE OUT.pem: a fresh private key made by OpenSSL.
gen_key () {
    if [ "$1" = rsa ]; then
        openssl genpkey -algorithm RSA -pkeyopt "rsa_keygen_bits:$2" -out "$3" 2>/dev/null
    else
        openssl genpkey -algorithm EC -pkeyopt "ec_paramgen_curve:$2" \
            -pkeyopt ec_param_enc:named_curve -out "$3"
    fi
}

# import_key LABEL ID KIND DIR: the key pair in DIR/LABEL.der (private,
# PKCS#8 DER) and DIR/LABEL.pub.der into every board.
import_key () {
    local label=$1 id=$2 kind=$3 tmp=$4 board usage="--usage-sign"
    [ "$kind" = rsa ] && usage="--usage-sign --usage-decrypt"
    for board in $BOARDS; do
        # shellcheck disable=SC2086
        p11 "$board" --write-object "$tmp/$label.der" --type privkey --id "$id" --label "$label" \
            $usage >/dev/null
        # shellcheck disable=SC2086
        p11 "$board" --write-object "$tmp/$label.pub.der" --type pubkey --id "$id" --label "$label" \
            $usage >/dev/null
    done
}

# check_keys BOARD: every private key can sign (RSA: decrypt), is sensitive,
# and has its public key object.
check_keys () {
    local board=$1 entry label kind objects
    objects=$(p11 "$board" -O 2>/dev/null)
    for entry in $KEYS; do
        label=${entry%%:*}
        kind=$(echo "$entry" | cut -d: -f3)
        echo "$objects" | awk -v label="$label" -v kind="$kind" '
            /^[A-Z].*Object/ { cls = $0; lab = ""; use = ""; acc = "" }
            /label:/ { lab = $2 }
            /Usage:/ { use = $0 }
            /Access:/ { acc = $0 }
            /Access:/ && lab == label && cls ~ /Private Key/ {
                if (use ~ /sign/ && (kind != "rsa" || use ~ /decrypt/) && acc ~ /sensitive/) priv = 1 }
            /Access:/ && lab == label && cls ~ /Public Key/ { pub = 1 }
            END { exit !(priv && pub) }' \
            || die "board $board: key $label is missing, cannot sign/decrypt, or is not sensitive"
    done
}

# Makes the demo keys with OpenSSL, imports them into both boards, keeps the
# public PEMs and shreds the private ones.  Skipped once done (stamp file).
make_keys () {
    if [ -f "$DIR/keys/.imported" ]; then
        return 0
    fi
    make_boards
    mkdir -p "$DIR/keys"
    local tmp entry label id kind size
    tmp=$(mktemp -d "$DIR/keys/.private.XXXXXX")
    chmod 700 "$tmp"
    for entry in $KEYS; do
        IFS=: read -r label id kind size <<<"$entry"
        gen_key "$kind" "$size" "$tmp/$label.pem"
        openssl pkey -in "$tmp/$label.pem" -outform DER -out "$tmp/$label.der"
        openssl pkey -in "$tmp/$label.pem" -pubout -outform DER -out "$tmp/$label.pub.der"
        openssl pkey -in "$tmp/$label.pem" -pubout -out "$DIR/keys/$label.pub.pem"
        import_key "$label" "$id" "$kind" "$tmp"
    done
    shred -u "$tmp"/*.pem "$tmp"/*.der 2>/dev/null || rm -f "$tmp"/*
    rmdir "$tmp"
    for board in $BOARDS; do check_keys "$board"; done
    touch "$DIR/keys/.imported"
    say "imported rsa2048 (id 01), rsa3072 (02), p256 (03) into $BOARDS; private PEMs shredded"
}

register_boards () {
    local board
    for board in $BOARDS; do
        if ! "$ADMIN" config get "$DIR/broker.conf" "drivers/$board/type" >/dev/null 2>&1; then
            "$ADMIN" board add "$board" --dir "$DIR" --type pkcs11 --module "$SOFTHSM" \
                --token "$board" --pin-file "$DIR/board.pin" --threads 2 \
                --set "tenant=$TENANT" >/dev/null
            say "registered board $board (pkcs11, 2 threads, tenant $TENANT, host cores)"
        elif ! "$ADMIN" config get "$DIR/broker.conf" "drivers/$board/tenant" >/dev/null 2>&1; then
            "$ADMIN" config set "$DIR/broker.conf" "drivers/$board/tenant" "$TENANT"
        fi
        # SoftHSMv2 computes on this host's cores (placement.h, "Host boards").
        "$ADMIN" config set "$DIR/broker.conf" "drivers/$board/host" true
    done
}

# register_cpu_board: an openssl board "cpu" (EVP on the broker's cores):
# it signs with keystore and per-request keys and generates keys as
# material for the keystore and the key pool (keys/home = keystore).
register_cpu_board () {
    [ -f "$DRIVER_DIR/openssl.so" ] || { say "no openssl driver built: no cpu board"; return 0; }
    if ! "$ADMIN" config get "$DIR/broker.conf" drivers/cpu/type >/dev/null 2>&1; then
        "$ADMIN" board add cpu --dir "$DIR" --type openssl --threads 2 >/dev/null
        say "registered board cpu (openssl, 2 threads)"
    fi
}

# make_tenants: the extra tenants of --tenant, each with a client of its name.
make_tenants () {
    local spec name pin so_pin
    for spec in $EXTRA_TENANTS; do
        IFS=: read -r name pin so_pin <<<"$spec"
        if ! "$ADMIN" tenant list --dir "$DIR" | awk 'NR > 1 { print $1 }' | grep -qx "$name"; then
            "$ADMIN" tenant add "$name" --dir "$DIR" --pin "${pin:-1234}" --so-pin "${so_pin:-123456}" >/dev/null
            say "added tenant $name"
        fi
        if [ ! -f "$DIR/clients/$name/client.conf" ]; then
            "$ADMIN" client add "$name" --dir "$DIR" --tenant "$name" >/dev/null
            say "created client $name (tenant $name)"
        fi
    done
}

make_client () {
    if [ ! -f "$DIR/clients/$CLIENT/client.conf" ]; then
        "$ADMIN" client add "$CLIENT" --dir "$DIR" --tenant "$TENANT" >/dev/null
        say "created client $CLIENT"
    fi
}

write_env () {
    local metrics
    metrics=$("$ADMIN" config get "$DIR/broker.conf" broker/metrics 2>/dev/null || true)
    {
        if is_ha; then
            cat <<EOT
# Source me: the demo deployment in $DIR (written by tools/demo-deploy.sh --ha:
# two brokers on one PostgreSQL keystore).
EOT
        else
            echo "# Source me: the demo deployment in $DIR (written by tools/demo-deploy.sh)."
        fi
        cat <<EOT
export CRYPTOSERVER_CONF='$DIR/clients/$CLIENT/client.conf'
export CRYPTOSERVER_MODULE='$MODULE'
export CRYPTOSERVER_TOKEN='$TENANT'
export CRYPTOSERVER_PIN='$USER_PIN'
export SOFTHSM2_CONF='$DIR/softhsm2.conf'
export CRYPTOSERVER_BOARD_PIN='$BOARD_PIN'
export CRYPTOSERVER_BROKER_PID="\$(cat '$DIR/broker.pid' 2>/dev/null || true)"
export CRYPTOSERVER_METRICS_URL="\$(cat '$DIR/broker.metrics' 2>/dev/null || echo '$metrics')"
export CRYPTOSERVER_METRICS_TOKEN_FILE='$DIR/metrics.token'
EOT
        if is_ha; then
            cat <<EOT
export CRYPTOSERVER_BROKER_PIDS="\$(cat '$DIR/broker.pid' '$DIR/broker2.pid' 2>/dev/null | tr '\n' ' ' | sed 's/ \$//')"
export CRYPTOSERVER_PG_PID="\$(head -n 1 '$DIR/pg/data/postmaster.pid' 2>/dev/null || true)"
EOT
        fi
    } > "$DIR/env.sh"
}

deploy () {
    [ -x "$ADMIN" ] || die "$ADMIN not built (run make, or set CS_BUILD_DIR)"
    command -v softhsm2-util >/dev/null || die "softhsm2-util not found (install softhsm2)"
    command -v pkcs11-tool >/dev/null || die "pkcs11-tool not found (install opensc)"
    SOFTHSM=$(find_softhsm)
    export SOFTHSM2_CONF=$DIR/softhsm2.conf
    if [ -n "$HA" ] && ! is_ha; then
        [ ! -f "$DIR/broker.conf" ] \
            || die "$DIR is a deployment with one broker (SQLite keystore): --ha needs a new DIR"
        mkdir -p "$DIR/pg"
    fi
    if is_ha; then
        deploy_pg_start
        trap deploy_pg_stop EXIT
    fi
    make_admin_deployment
    configure_metrics
    make_softhsm_config
    make_keys
    register_boards
    register_cpu_board
    make_client
    make_tenants
    if is_ha; then
        make_broker2_conf
    fi
    write_env
    say "deployment ready in $DIR (source $DIR/env.sh)"
}

# ---- two brokers on PostgreSQL (--ha) ------------------------------------

# is_ha: DIR is a deployment with two brokers on its own PostgreSQL cluster.
is_ha () { [ -d "$DIR/pg" ]; }

PG_STARTED=

# pg_start: starts DIR's cluster (tools/demo-pg.sh) unless it runs; sets
# CS_PG_URL and CS_PG_PID.
pg_start () {
    local rc=0 running
    running=$(cs_pg_cluster_pid "$DIR/pg")
    cs_pg_cluster_start "$DIR/pg" cryptoserver "${CS_START_TIMEOUT:-30}" || rc=$?
    case $rc in
        0) ;;
        2) die "--ha needs the PostgreSQL server and client (apt-get install postgresql postgresql-client)" ;;
        *) die "PostgreSQL did not start in $DIR/pg (log $DIR/pg/server.log)" ;;
    esac
    if [ -z "$running" ]; then
        PG_STARTED=1
        say "PostgreSQL started (pid $CS_PG_PID) on $CS_PG_SOCKET, no TCP"
    fi
}

deploy_pg_start () { pg_start; }

# deploy_pg_stop: the deployment step's EXIT trap: stops the cluster when
# this step started it (--start starts it again).
deploy_pg_stop () {
    local rc=$?
    if [ -n "$PG_STARTED" ]; then
        cs_pg_cluster_stop "$DIR/pg" "${CS_STOP_TIMEOUT:-15}" || rc=1
        say "PostgreSQL stopped again (--start starts it)"
    fi
    exit $rc
}

# pg_stop: stops DIR's cluster if it runs.
pg_stop () {
    local pid
    pid=$(cs_pg_cluster_pid "$DIR/pg")
    if [ -z "$pid" ]; then
        say "PostgreSQL not running"
        return 0
    fi
    cs_pg_cluster_stop "$DIR/pg" "${CS_STOP_TIMEOUT:-15}" || return 1
    say "PostgreSQL (pid $pid) stopped"
}

# next_port URL-OR-ENDPOINT: the same with a fixed port P made P+1 ("*",
# "!" and 0 stay).
next_port () {
    local head port tail
    if [[ $1 =~ ^(.*:)([0-9]+)(/.*)?$ ]]; then
        head=${BASH_REMATCH[1]} port=${BASH_REMATCH[2]} tail=${BASH_REMATCH[3]}
        [ "$port" = 0 ] || port=$((port + 1))
        echo "$head$port$tail"
    else
        echo "$1"
    fi
}

# make_broker2_conf: DIR/broker2.conf, the second broker: broker.conf with
# its own broker/endpoint and broker/metrics (those of an existing
# broker2.conf, unless the deployment step was given an endpoint or a
# metrics port: then derived from broker.conf's, next_port) and its own
# endpoint and metrics files.
make_broker2_conf () {
    local conf=$DIR/broker2.conf endpoint metrics new
    endpoint=$("$ADMIN" config get "$DIR/broker.conf" broker/endpoint)
    endpoint=$(next_port "$endpoint")
    metrics=$("$ADMIN" config get "$DIR/broker.conf" broker/metrics 2>/dev/null || true)
    metrics=$(next_port "$metrics")
    if [ -f "$conf" ]; then
        [ -n "$ENDPOINT_GIVEN" ] || endpoint=$("$ADMIN" config get "$conf" broker/endpoint)
        [ -n "$METRICS_PORT" ] || metrics=$("$ADMIN" config get "$conf" broker/metrics 2>/dev/null || true)
    fi
    new=$(mktemp "$DIR/.broker2.conf.XXXXXX")
    cp "$DIR/broker.conf" "$new"
    chmod 600 "$new"
    "$ADMIN" config set "$new" broker/endpoint "$endpoint"
    "$ADMIN" config set "$new" broker/endpoint-file broker2.endpoint
    "$ADMIN" config set "$new" broker/metrics "$metrics"
    "$ADMIN" config set "$new" broker/metrics-file broker2.metrics
    mv "$new" "$conf"
}

# ---- broker ------------------------------------------------------------

# Broker N's files: broker.EXT for broker 1, broker2.EXT for broker 2 (--ha).
bfile () { if [ "$1" = 1 ]; then echo "$DIR/broker.$2"; else echo "$DIR/broker$1.$2"; fi; }
bname () { if is_ha; then echo "broker $1"; else echo broker; fi; }

# alive PID: the process exists and is not a zombie.
alive () {
    [ -n "$1" ] && kill -0 "$1" 2>/dev/null \
        && ! grep -q '^State:.*Z' "/proc/$1/status" 2>/dev/null
}

broker_pid () { cat "$(bfile "${1:-1}" pid)" 2>/dev/null || true; }

# run_broker N: replaces this script with broker N in the foreground, its
# log appended to DIR/broker.log (broker2.log) and its pid (this script's,
# kept by exec) in DIR/broker.pid (broker2.pid).  A caller that starts
# "demo-deploy.sh --run DIR &" owns the broker as its child and can wait for
# its exit status (the tests do).
run_broker () {
    local n=$1 pid conf
    conf=$(bfile "$n" conf)
    [ -f "$DIR/broker.conf" ] || die "$DIR is not a deployment (run demo-deploy.sh $DIR first)"
    [ -f "$conf" ] || die "$DIR has no broker $n (make it with demo-deploy.sh --ha)"
    [ -x "$BROKER" ] || die "$BROKER not built"
    pid=$(broker_pid "$n")
    if alive "$pid"; then
        die "a broker already runs (pid $pid) on $(cat "$(bfile "$n" endpoint)" 2>/dev/null)"
    fi
    rm -f "$(bfile "$n" endpoint)" "$(bfile "$n" metrics)"
    echo "$$" > "$(bfile "$n" pid)"
    export SOFTHSM2_CONF=$DIR/softhsm2.conf CRYPTOSERVER_DRIVER_DIR=$DRIVER_DIR
    # shellcheck disable=SC2086
    exec ${CS_BROKER_WRAPPER:-} "$BROKER" -c "$conf" -f >>"$(bfile "$n" log)" 2>&1 </dev/null
}

# point_clients: the client configs list the endpoints the brokers bound
# (broker 1's, then broker 2's of an --ha DIR; a broker that is down stays
# listed: the module fails over and reconnects when it is back).
point_clients () {
    local endpoints conf n
    endpoints=
    for n in 1 2; do
        [ "$n" = 1 ] || is_ha || continue
        [ -s "$(bfile "$n" endpoint)" ] || continue
        endpoints="${endpoints:+$endpoints,}$(cat "$(bfile "$n" endpoint)")"
    done
    [ -n "$endpoints" ] || return 0
    for conf in "$DIR"/clients/*/client.conf; do
        [ -f "$conf" ] && "$ADMIN" config set "$conf" client/endpoints "$endpoints"
    done
    return 0
}

# wait_broker N: waits (bounded) until broker N (of DIR/broker.pid or
# broker2.pid) listens, then points the client configs at the endpoints bound.
wait_broker () {
    local n=$1 pid waited=0 limit=$(( ${CS_START_TIMEOUT:-30} * 10 )) log endpoint_file
    log=$(bfile "$n" log)
    endpoint_file=$(bfile "$n" endpoint)
    while pid=$(broker_pid "$n"); [ -z "$pid" ] && [ $waited -lt 50 ]; do
        sleep 0.1; waited=$((waited + 1))
    done
    while [ ! -s "$endpoint_file" ]; do
        if ! alive "$pid" || [ $waited -ge $limit ]; then
            echo "---- last lines of $log ----" >&2
            tail -n 20 "$log" >&2 || true
            alive "$pid" || die "the $(bname "$n") (pid ${pid:-?}) exited before it listened"
            die "the $(bname "$n") (pid $pid) did not listen within ${CS_START_TIMEOUT:-30} s"
        fi
        sleep 0.1
        waited=$((waited + 1))
    done
    # The clients connect where the brokers really listen (a port may be "*").
    point_clients
    say "$(bname "$n") started (pid $pid) on $(cat "$endpoint_file"), log $log"
    if [ -s "$(bfile "$n" metrics)" ]; then
        say "metrics at $(cat "$(bfile "$n" metrics)")"
    fi
}

# start_broker N: --run in the background, detached from this script, then
# wait_broker; a broker that does not listen in time is stopped.
start_broker () {
    local n=$1 pid
    pid=$(broker_pid "$n")
    if alive "$pid"; then
        say "$(bname "$n") already running (pid $pid) on $(cat "$(bfile "$n" endpoint)" 2>/dev/null)"
        return 0
    fi
    rm -f "$(bfile "$n" pid)"
    check_ports "$n"
    nohup "$0" --run "$DIR" --broker "$n" >/dev/null 2>&1 </dev/null &
    if ! (wait_broker "$n"); then
        pid=$(broker_pid "$n")
        alive "$pid" && kill "$pid" 2>/dev/null
        rm -f "$(bfile "$n" pid)"
        exit 1
    fi
}

# port_taken PORT: something accepts TCP connections on 127.0.0.1:PORT.
port_taken () {
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# check_ports N: broker N's fixed ports (broker/endpoint and broker/metrics
# with a port number other than 0) are free, or the start is refused with
# the port and the setting that changes it (a broker that cannot bind would
# only exit with its log saying why).
check_ports () {
    local conf endpoint metrics port
    conf=$(bfile "$1" conf)
    endpoint=$("$ADMIN" config get "$conf" broker/endpoint 2>/dev/null || true)
    metrics=$("$ADMIN" config get "$conf" broker/metrics 2>/dev/null || true)
    if [[ $endpoint =~ ^tcp://127\.0\.0\.1:([0-9]+)$ ]] && [ "${BASH_REMATCH[1]}" != 0 ]; then
        port=${BASH_REMATCH[1]}
        port_taken "$port" && die "port $port (broker/endpoint $endpoint of $conf) is in use by another program: stop it, or choose another port (demo-deploy.sh --port P or --endpoint 'tcp://127.0.0.1:!'; quickstart: CS_PORT=P)"
    fi
    if [[ $metrics =~ ^http://127\.0\.0\.1:([0-9]+)(/.*)?$ ]] && [ "${BASH_REMATCH[1]}" != 0 ]; then
        port=${BASH_REMATCH[1]}
        port_taken "$port" && die "port $port (broker/metrics $metrics of $conf) is in use by another program: stop it, or choose another port (demo-deploy.sh --metrics-port M, 0 for any free port, off for none; quickstart: CS_METRICS_PORT=M)"
    fi
    return 0
}

# stop_broker N: SIGTERM and a bounded wait.  Fails (status 1) when the
# broker had to be killed with SIGKILL, or when its pid file names a broker
# that is no longer running (it died: see its log).
stop_broker () {
    local n=$1 pid waited=0 limit=$(( ${CS_STOP_TIMEOUT:-15} * 10 )) pidfile
    pidfile=$(bfile "$n" pid)
    pid=$(broker_pid "$n")
    if [ -z "$pid" ]; then
        say "$(bname "$n") not running"
        return 0
    fi
    if ! alive "$pid"; then
        rm -f "$pidfile"
        echo "demo-deploy: error: the $(bname "$n") (pid $pid) was not running: it died, see $(bfile "$n" log)" >&2
        return 1
    fi
    kill -TERM "$pid"
    while alive "$pid" && [ $waited -lt $limit ]; do sleep 0.1; waited=$((waited + 1)); done
    rm -f "$pidfile"
    if alive "$pid"; then
        kill -KILL "$pid" 2>/dev/null || true
        echo "demo-deploy: error: the $(bname "$n") (pid $pid) did not stop in ${CS_STOP_TIMEOUT:-15} s: killed" >&2
        return 1
    fi
    say "$(bname "$n") (pid $pid) stopped"
}

# start_all [N]: an --ha DIR's PostgreSQL and both brokers (those not
# running), or broker N alone; broker 1 alone otherwise.
start_all () {
    if ! is_ha; then
        start_broker 1
        return
    fi
    [ -f "$DIR/broker.conf" ] || die "$DIR is not a deployment (run demo-deploy.sh --ha $DIR first)"
    [ -x "$ADMIN" ] || die "$ADMIN not built (run make, or set CS_BUILD_DIR)"
    pg_start
    make_broker2_conf
    if [ -n "${1:-}" ]; then
        start_broker "$1"
    else
        start_broker 1
        start_broker 2
    fi
}

# stop_all: an --ha DIR's brokers (2, then 1) and then PostgreSQL, each
# even when stopping another failed; broker 1 alone otherwise.
stop_all () {
    local rc=0
    if ! is_ha; then
        stop_broker 1
        return
    fi
    stop_broker 2 || rc=1
    stop_broker 1 || rc=1
    pg_stop || rc=1
    return $rc
}

# ---- command line ------------------------------------------------------

ACTION=deploy
DIR=
HA=
BROKER_N=
ENDPOINT='tcp://127.0.0.1:![20000-32767]'
ENDPOINT_GIVEN=
EXTRA_TENANTS=
METRICS_PORT=${CS_METRICS_PORT:-}
while [ $# -gt 0 ]; do
    case $1 in
        -h|--help) usage; exit 0 ;;
        --start) ACTION=start ;;
        --run) ACTION=run ;;
        --wait) ACTION=wait ;;
        --stop) ACTION=stop ;;
        --ha) HA=1 ;;
        --broker) [ $# -ge 2 ] || { usage >&2; exit 2; }
                BROKER_N=$2; shift ;;
        --port) [ $# -ge 2 ] || { usage >&2; exit 2; }
                ENDPOINT=tcp://127.0.0.1:$2; ENDPOINT_GIVEN=1; shift ;;
        --endpoint) [ $# -ge 2 ] || { usage >&2; exit 2; }
                ENDPOINT=$2; ENDPOINT_GIVEN=1; shift ;;
        --metrics-port) [ $# -ge 2 ] || { usage >&2; exit 2; }
                METRICS_PORT=$2; shift ;;
        --tenant) [ $# -ge 2 ] || { usage >&2; exit 2; }
                EXTRA_TENANTS="$EXTRA_TENANTS $2"; shift ;;
        -*) echo "demo-deploy: unknown option $1" >&2; usage >&2; exit 2 ;;
        *) [ -z "$DIR" ] || { usage >&2; exit 2; }; DIR=$1 ;;
    esac
    shift
done
[ -n "$DIR" ] || { usage >&2; exit 2; }
[ "$ACTION" = deploy ] && mkdir -p "$DIR"
[ -d "$DIR" ] || die "$DIR: no such directory"
DIR=$(cd "$DIR" && pwd)
case $BROKER_N in
    ''|1) ;;
    2) is_ha || die "--broker 2: $DIR has one broker (make an --ha deployment)" ;;
    *) die "--broker must be 1 or 2 (got $BROKER_N)" ;;
esac
[ -z "$BROKER_N" ] || [ "$ACTION" != deploy ] || die "--broker goes with --start, --run, --wait or --stop"

case $ACTION in
    deploy) deploy ;;
    start) start_all "$BROKER_N" ;;
    run) run_broker "${BROKER_N:-1}" ;;
    wait) wait_broker "${BROKER_N:-1}" ;;
    stop) if [ -n "$BROKER_N" ]; then stop_broker "$BROKER_N"; else stop_all; fi ;;
esac
