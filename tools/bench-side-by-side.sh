#!/bin/bash
# bench-side-by-side.sh — the issue #8 table in one run: SoftHSM used
# directly, p11-kit remoting of it (p11-kit server + p11-kit-client.so), and
# cryptoserver with the same SoftHSM boards and with a keystore key (the
# demo's placement over the SoftHSM boards and the openssl board "cpu"),
# ECDSA P-256 and RSA-2048, every signature verified with OpenSSL against a
# PEM made outside the module under test; then `openssl speed` (1 core and
# -multi 2).  Prints the CSV rows of cryptoserver-bench, one per cell, with
# the broker's CPU per operation for our rows; then the RSA keystore rows
# again with the host-core budget off (broker/host-cores = 0: the SoftHSM
# boards take keystore jobs as if they had cores of their own, as before
# issue #25), the broker restarted for it.  The ECDSA rows also run over the
# broker's UNIX socket (ours-keystore-ipc: broker/local-endpoint, a client
# config naming ipc://).  A benchmark, not a test: no
# speed is asserted.  Run it on a quiet machine: client, broker and boards
# share the cores.  man cryptoserver-bench(1).
set -eu

usage () {
    cat <<'EOT'
usage: bench-side-by-side.sh DIR [--seconds S] [--repeat R] [--latency]

DIR          a new directory for the demo deployment (removed at the end)
--seconds S  length of each cell (default 5)
--repeat R   repetitions of each cell (default 1; report medians)
--latency    only the 1-thread ECDSA row (the "added p50" of issue #25)
Environment: CS_BUILD_DIR  the build tree (default SRC/_build)
EOT
}

[ $# -ge 1 ] || { usage >&2; exit 2; }
case $1 in -h|--help) usage; exit 0;; esac
D=$1; shift
S=5; R=1; LATENCY=
while [ $# -gt 0 ]; do
    case $1 in
        --seconds) S=$2; shift 2;;
        --repeat) R=$2; shift 2;;
        --latency) LATENCY=1; shift;;
        -h|--help) usage; exit 0;;
        *) echo "bench-side-by-side.sh: unknown option $1" >&2; usage >&2; exit 2;;
    esac
done
[ ! -e "$D" ] || { echo "bench-side-by-side.sh: $D exists; give a new directory" >&2; exit 2; }
SRC=$(cd "$(dirname "$0")/.." && pwd)
export CS_BUILD_DIR=${CS_BUILD_DIR:-$SRC/_build}
B=$CS_BUILD_DIR/tools/cryptoserver-bench
A=$CS_BUILD_DIR/tools/cryptoserver-admin
SO=${SOFTHSM2_MODULE:-/usr/lib/softhsm/libsofthsm2.so}
CLIENT=$(ls /usr/lib/*/pkcs11/p11-kit-client.so 2>/dev/null | head -1)
[ -x "$B" ] && [ -x "$A" ] || { echo "bench-side-by-side.sh: build first (no $B)" >&2; exit 2; }

"$SRC/tools/demo-deploy.sh" "$D" --endpoint 'tcp://127.0.0.1:!' --metrics-port 0 >/dev/null
trap '"$SRC/tools/demo-deploy.sh" --stop "$D" >/dev/null 2>&1 || true; [ -n "${P11_KIT_SERVER_PID:-}" ] && kill "$P11_KIT_SERVER_PID" 2>/dev/null; rm -rf "$D" "${IPC_DIR:-}"' EXIT
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$D/ksp256.pem" 2>/dev/null
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$D/ksrsa.pem" 2>/dev/null
for k in ksp256 ksrsa; do
    openssl pkey -in "$D/$k.pem" -pubout -out "$D/keys/$k.pub.pem"
    "$A" key import --tenant demo --file "$D/$k.pem" --label $k --dir "$D" >/dev/null
    shred -u "$D/$k.pem" 2>/dev/null || rm -f "$D/$k.pem"
done
# The same broker also listens on a UNIX socket (broker/local-endpoint), for
# the ours-keystore-ipc row: a client config whose endpoint is that socket.
IPC_DIR=$(mktemp -d /tmp/cs-bench-ipc.XXXXXX)
"$A" config set "$D/broker.conf" broker/local-endpoint "ipc://$IPC_DIR/broker.ipc"
"$SRC/tools/demo-deploy.sh" --start "$D" >/dev/null
. "$D/env.sh"
IPC_CONF=$(dirname "$CRYPTOSERVER_CONF")/client-ipc.conf     # its key paths are relative
cp "$CRYPTOSERVER_CONF" "$IPC_CONF"
"$A" config set "$IPC_CONF" client/endpoints "ipc://$IPC_DIR/broker.ipc"
cpu () { curl -s "$CRYPTOSERVER_METRICS_URL" | awk '/^process_cpu_seconds_total/ { print $2 }'; }
idle () {
    echo "bench-side-by-side.sh: waiting until the broker is idle (key pool filled)" >&2
    for i in $(seq 60); do
        a=$(cpu); sleep 1; b=$(cpu)
        awk -v a="$a" -v b="$b" 'BEGIN { exit !(b - a < 0.03) }' && break
    done
}
# host_cores N: the broker restarted with broker/host-cores N ("" : the default).
host_cores () {
    "$SRC/tools/demo-deploy.sh" --stop "$D" >/dev/null
    if [ -n "$1" ]; then "$A" config set "$D/broker.conf" broker/host-cores "$1"
    else "$A" config set "$D/broker.conf" broker/host-cores "$(nproc)"; fi
    "$SRC/tools/demo-deploy.sh" --start "$D" >/dev/null
    . "$D/env.sh"
    idle
}
idle
export SOFTHSM2_CONF=$D/softhsm2.conf
if [ -n "$CLIENT" ]; then
    eval "$(p11-kit server --provider "$SO" -n "$D/p11kit.sock" -s 'pkcs11:token=board0' 2>/dev/null)" || CLIENT=
fi

cell () { # label module token pin key mechanism threads pub [metrics]
    "$B" --module "$2" --token "$3" --pin "$4" --key "$5" --mechanism "$6" --threads "$7" --seconds "$S" \
         --verify-key "$D/keys/$8.pub.pem" --csv ${9:+--metrics "$9"} 2>/dev/null | tail -1 | sed "s/^/$1,/"
}
row () { # mechanism key pub threads
    cell softhsm-direct "$SO" board0 "$CRYPTOSERVER_BOARD_PIN" "$2" "$1" "$4" "$3"
    [ -z "$CLIENT" ] || cell p11kit-remote "$CLIENT" board0 "$CRYPTOSERVER_BOARD_PIN" "$2" "$1" "$4" "$3"
    cell ours-softhsm "$CRYPTOSERVER_MODULE" "$CRYPTOSERVER_TOKEN" "$CRYPTOSERVER_PIN" "$2" "$1" "$4" "$3" \
         "$CRYPTOSERVER_METRICS_URL"
    cell ours-keystore "$CRYPTOSERVER_MODULE" "$CRYPTOSERVER_TOKEN" "$CRYPTOSERVER_PIN" "ks$2" "$1" "$4" \
         "ks$3" "$CRYPTOSERVER_METRICS_URL"
    CRYPTOSERVER_CONF=$IPC_CONF cell ours-keystore-ipc "$CRYPTOSERVER_MODULE" "$CRYPTOSERVER_TOKEN" \
         "$CRYPTOSERVER_PIN" "ks$2" "$1" "$4" "ks$3" "$CRYPTOSERVER_METRICS_URL"
}
echo "setup,mechanism,key,bits,threads,ops,seconds,ops_per_s,p50_ms,p90_ms,p99_ms,max_ms,verified,failures,broker_cpu_us_per_op"
for r in $(seq "$R"); do
    for t in 1 32; do row ecdsa p256 p256 $t; [ -z "$LATENCY" ] || break; done
    [ -z "$LATENCY" ] || continue
    for t in 8 32; do
        cell softhsm-direct "$SO" board0 "$CRYPTOSERVER_BOARD_PIN" rsa2048 sha256-rsa-pkcs $t rsa2048
        [ -z "$CLIENT" ] || cell p11kit-remote "$CLIENT" board0 "$CRYPTOSERVER_BOARD_PIN" rsa2048 sha256-rsa-pkcs $t rsa2048
        cell ours-softhsm "$CRYPTOSERVER_MODULE" "$CRYPTOSERVER_TOKEN" "$CRYPTOSERVER_PIN" rsa2048 sha256-rsa-pkcs \
             $t rsa2048 "$CRYPTOSERVER_METRICS_URL"
        cell ours-keystore "$CRYPTOSERVER_MODULE" "$CRYPTOSERVER_TOKEN" "$CRYPTOSERVER_PIN" ksrsa sha256-rsa-pkcs \
             $t ksrsa "$CRYPTOSERVER_METRICS_URL"
    done
    host_cores 0
    for t in 8 32; do
        cell ours-keystore-nobudget "$CRYPTOSERVER_MODULE" "$CRYPTOSERVER_TOKEN" "$CRYPTOSERVER_PIN" ksrsa \
             sha256-rsa-pkcs $t ksrsa "$CRYPTOSERVER_METRICS_URL"
    done
    host_cores ""
done
echo "# broker counters:"
curl -s "$CRYPTOSERVER_METRICS_URL" | grep -E '^cryptoserver_(fast_lane_jobs_total|requests_total|request_jobs_total)' \
    | sed 's/^/# /'
echo "# openssl speed, one core, then -multi 2 (sign/s):"
for m in "" "-multi 2"; do
    openssl speed -seconds 3 $m ecdsap256 rsa2048 2>/dev/null \
        | awk '/^rsa 2048 bits/ { print "# rsa2048 " $6 } /256 bits ecdsa/ { print "# p256 " $(NF-1) }'
done
