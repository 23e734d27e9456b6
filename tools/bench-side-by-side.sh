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
# config naming ipc://).  Then a board that fails C_Sign after C_SignInit
# (a fault board "flaky", stuck-every = 20, over SoftHSM token board1) is
# added and 800 RSA signatures run through the module (ours-stuck-board).
# Last, issue #25's table, from the medians over the repetitions, as a
# Markdown table (lines starting with "|"), and under it the evidence
# lines: the transport floor (cryptoserver-bench transport-floor), the CPU
# per operation of the bench client and of the broker, and the RSA ceiling.
# CSV rows are the lines that start with neither "#" nor "|".  A benchmark,
# not a test: no speed is asserted.  Run it on a quiet machine: client,
# broker and boards share the cores.  man cryptoserver-bench(1).
set -eu

usage () {
    cat <<'EOT'
usage: bench-side-by-side.sh DIR [--seconds S] [--repeat R] [--latency]

DIR          a new directory for the demo deployment (removed at the end)
--seconds S  length of each cell (default 5)
--repeat R   repetitions of each cell (default 1; report medians)
--latency    only the 1-thread ECDSA row (the "added p50" of issue #25)
             and the transport floor under it: no RSA, no stuck board, no
             openssl speed
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
trap '"$SRC/tools/demo-deploy.sh" --stop "$D" >/dev/null 2>&1 || true; { [ -z "${P11_KIT_SERVER_PID:-}" ] || kill "$P11_KIT_SERVER_PID" 2>/dev/null || true; }; rm -rf "$D" "${IPC_DIR:-}"' EXIT
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
    # Its socket goes beside the broker's, in the short directory: under a
    # deep DIR (make distcheck's tree) DIR/p11kit.sock is longer than a
    # socket's path may be (107 bytes, unix(7)) and p11-kit's server dies.
    eval "$(p11-kit server --provider "$SO" -n "$IPC_DIR/p11kit.sock" -s 'pkcs11:token=board0' 2>/dev/null)" || CLIENT=
fi

ROWS=$D/rows.csv     # every CSV row printed, for the medians of the table
: > "$ROWS"
# cell: one CSV row; without metrics broker_cpu_us_per_op is "-", so that
# client_cpu_us_per_op is the last column of every row.
cell () { # label module token pin key mechanism threads pub [metrics]
    local fill='s/,\([^,]*\)$/,-,\1/'
    [ -z "${9:-}" ] || fill=
    "$B" --module "$2" --token "$3" --pin "$4" --key "$5" --mechanism "$6" --threads "$7" --seconds "$S" \
         --verify-key "$D/keys/$8.pub.pem" --csv ${9:+--metrics "$9"} 2>/dev/null | tail -1 \
        | sed "s/^/$1,/; $fill" | tee -a "$ROWS"
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
echo "setup,mechanism,key,bits,threads,ops,seconds,ops_per_s,p50_ms,p90_ms,p99_ms,max_ms,verified,failures,broker_cpu_us_per_op,client_cpu_us_per_op"
for r in $(seq "$R"); do
    for t in 1 32; do row ecdsa p256 p256 $t; [ -z "$LATENCY" ] || break; done
    # The transport floor under the latency row, once per repetition: round
    # trips of the transports alone, in one process (tools/cs_bench_floor.c).
    "$B" transport-floor --csv 2>/dev/null | tail -n +2 >> "$D/floor.csv" || true
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
# The stuck board (issue #25's last row, tests/integration/board-fault-open.sh
# on the demo's boards): a fault board "flaky" over SoftHSM token board1,
# whose every 20th operation fails inside C_Sign after C_SignInit and leaves
# the operation open in its session, beside board0 and board1 holding the
# same rsa2048; 8 threads x 100 signatures through the module, each
# verified.  Its log lines and metrics say whether the broker counted it.
# flaky is not marked host (drivers/NAME/host): as a host board it would
# share the host-core budget with board0 and board1, which take every core
# for the key, and it got 3 of the 800 jobs in a run, none of them stuck.
stuck_board () {
    "$SRC/tools/demo-deploy.sh" --stop "$D" >/dev/null
    "$A" board add flaky --dir "$D" --type fault --threads 2 --set stuck-every=20 --set probe-max-ms=1000 \
        --set tenant=demo --set inner/type=pkcs11 --set "inner/module=$SO" \
        --set inner/token=board1 --set "inner/pin-file=$D/board.pin" >/dev/null
    LOG0=$(wc -l < "$D/broker.log" 2>/dev/null || echo 0)
    "$SRC/tools/demo-deploy.sh" --start "$D" >/dev/null
    . "$D/env.sh"
    idle
    "$B" --module "$CRYPTOSERVER_MODULE" --token "$CRYPTOSERVER_TOKEN" --pin "$CRYPTOSERVER_PIN" --key rsa2048 \
         --mechanism sha256-rsa-pkcs --threads 8 --count 100 --verify-key "$D/keys/rsa2048.pub.pem" --csv \
         --metrics "$CRYPTOSERVER_METRICS_URL" 2>"$D/stuck.err" | tail -1 | sed "s/^/ours-stuck-board,/" \
        | tee -a "$ROWS"
    curl -s "$CRYPTOSERVER_METRICS_URL" > "$D/stuck.metrics" || true
    tail -n +$((LOG0 + 1)) "$D/broker.log" > "$D/stuck.log" 2>/dev/null || true
}
# The counters of the broker that ran the repetitions, printed after the
# stuck board's row so that the CSV rows stay together.
COUNTERS=$(curl -s "$CRYPTOSERVER_METRICS_URL" \
    | grep -E '^cryptoserver_(fast_lane_jobs_total|requests_total|request_jobs_total)' | sed 's/^/# /' || true)
[ -n "$LATENCY" ] || stuck_board
echo "# broker counters:"
[ -z "$COUNTERS" ] || echo "$COUNTERS"
if [ -z "$LATENCY" ]; then
    echo "# openssl speed, one core, then -multi 2 (sign/s):"
    for m in "" "-multi 2"; do
        openssl speed -seconds 3 $m ecdsap256 rsa2048 2>/dev/null \
            | awk '/^rsa 2048 bits/ { print "# rsa2048 " $6 } /256 bits ecdsa/ { print "# p256 " $(NF-1) }' \
            | tee -a "$D/speed.txt"
    done
fi

# ---- issue #25's table --------------------------------------------------
# median: the median of the numbers on stdin, one a line ("?" for none).
median () {
    sort -g | awk '{ v [NR] = $1 } END { if (!NR) print "?"; else if (NR % 2) print v [(NR + 1) / 2]
                                          else print (v [NR / 2] + v [NR / 2 + 1]) / 2 }'
}
# med SETUP MECHANISM THREADS COLUMN: the median of a column over the
# repetitions ("?" without a number).
med () {
    awk -F, -v s="$1" -v m="$2" -v t="$3" -v c="$4" \
        '$1 == s && $2 == m && $5 == t && $c ~ /^[0-9]+(\.[0-9]+)?$/ { print $c }' "$ROWS" | median
}
# calc FORMAT EXPR VALUE...: EXPR over a, b, c (the values) printed with
# FORMAT, or "?" when a value is not a number or a divisor is 0.
calc () {
    local fmt=$1 expr=$2 out; shift 2
    out=$(awk -v a="${1:-}" -v b="${2:-}" -v c="${3:-}" -v n="$#" "
        function num (x) { return x ~ /^-?[0-9]+(\\.[0-9]+)?([eE][-+]?[0-9]+)?\$/ }
        BEGIN { if ((n >= 1 && !num(a)) || (n >= 2 && !num(b)) || (n >= 3 && !num(c))) exit 1
                printf \"$fmt\", $expr }" 2>/dev/null) || out=
    case $out in *inf*|*nan*) out= ;; esac
    echo "${out:-?}"
}
# goal RATIO OP TARGET: "≥ 1.5× (met)" and the like.
goal () {
    local verdict
    verdict=$(awk -v r="$1" -v op="$2" -v t="$3" 'BEGIN {
        if (r !~ /^-?[0-9.]+$/) print "?"; else if (op == ">=" ? r + 0 >= t : r + 0 <= t) print "met"; else print "not met" }')
    printf '%s %s× (%s)' "$([ "$2" = ">=" ] && echo ≥ || echo ≤)" "$3" "$verdict"
}
# floor TRANSPORT: the median p50 of transport-floor's runs, µs.
floor () {
    awk -F, -v t="$1" '$1 == t && $4 ~ /^[0-9.]+$/ { print $4 }' "$D/floor.csv" 2>/dev/null | median
}
# speed KEY N: sign/s of the Nth openssl speed run (1: one core, 2: -multi 2).
speed () { awk -v k="$1" -v n="$2" '$2 == k && ++i == n { print $3 }' "$D/speed.txt" 2>/dev/null || true; }
echo "# issue #25's table: medians over $R repetition(s) of ${S} s cells (a row with failures counts as measured)"
echo "| | ours | compared with | ratio | goal |"
echo "|---|---|---|---|---|"
if [ -z "$LATENCY" ]; then
    DIRECT=$(med softhsm-direct ecdsa 32 8)
    for v in ours-keystore ours-keystore-ipc; do
        OURS=$(med $v ecdsa 32 8)
        r=$(calc %.2f "a / b" "$OURS" "$DIRECT")
        echo "| ECDSA P-256, 32 threads, keystore key: ops/s ($v vs softhsm-direct)$([ $v = ours-keystore-ipc ] && echo ", over ipc://") | $(calc %.0f a "$OURS") | $(calc %.0f a "$DIRECT") | $r× | $(goal "$r" ">=" 1.5) |"
    done
    OURS=$(med ours-keystore sha256-rsa-pkcs 32 8)
    MULTI=$(speed rsa2048 2)
    r=$(calc %.2f "a / b" "$OURS" "$MULTI")
    echo "| RSA-2048 (sha256-rsa-pkcs), 32 threads, keystore key: sign/s (ours-keystore vs openssl speed -multi 2) | $(calc %.0f a "$OURS") | $(calc %.0f a "$MULTI") | $r× | $(goal "$r" ">=" 0.8) |"
fi
L_DIRECT=$(med softhsm-direct ecdsa 1 9)
L_P11KIT=$(med p11kit-remote ecdsa 1 9)
P11KIT_ADDED=$(calc %.0f "(a - b) * 1000" "$L_P11KIT" "$L_DIRECT")
for v in ours-keystore ours-keystore-ipc; do
    L_OURS=$(med $v ecdsa 1 9)
    OURS_ADDED=$(calc %.0f "(a - b) * 1000" "$L_OURS" "$L_DIRECT")
    r=$(calc %.2f "a / b" "$OURS_ADDED" "$P11KIT_ADDED")
    [ -n "$CLIENT" ] || { r="?"; P11KIT_ADDED="? (no p11-kit-client.so)"; }
    echo "| ECDSA P-256, 1 thread: added p50, µs ($v − softhsm-direct vs p11kit-remote − softhsm-direct)$([ $v = ours-keystore-ipc ] && echo ", over ipc://") | $OURS_ADDED µs ($L_OURS − $L_DIRECT ms) | $P11KIT_ADDED µs ($L_P11KIT − $L_DIRECT ms) | $r× | $(goal "$r" "<=" 0.5) |"
done
if [ -z "$LATENCY" ]; then
    IFS=, read -r _ _ _ _ _ STUCK_OPS _ _ _ _ _ _ STUCK_VERIFIED STUCK_FAILURES _ < <(awk -F, '$1 == "ours-stuck-board"' "$ROWS"; echo)
    FAULTS=$(awk '$1 == "cryptoserver_board_faults_total{board=\"flaky\",kind=\"error\"}" { print $2 }' "$D/stuck.metrics")
    FLAKY_OK=$(awk '$1 ~ /^cryptoserver_jobs_total\{board="flaky",.*result="ok"\}$/ { n += $2 } END { print n + 0 }' "$D/stuck.metrics")
    REOPENED=$(grep -c 'board flaky: worker [0-9]* reopened its driver session' "$D/stuck.log" || true)
    OUT=$(grep -c 'board flaky: .*out of rotation' "$D/stuck.log" || true)
    COUNTED=no; [ "${FAULTS:-0}" -gt 0 ] 2>/dev/null && COUNTED=yes
    # Met only when the fault happened: flaky counted faulty, no client error.
    if [ "${STUCK_FAILURES:-x}" != 0 ] || [ "${STUCK_OPS:-0}" -le 0 ] 2>/dev/null; then STUCK_GOAL="0 (not met)"
    elif [ "$COUNTED" = yes ]; then STUCK_GOAL="0 (met)"
    else STUCK_GOAL="0 (not shown: flaky had no fault)"; fi
    echo "| Stuck board (fault board flaky, stuck-every = 20, over SoftHSM board1, beside board0 and board1): client errors in ${STUCK_OPS:-?} signatures, 8 threads | ${STUCK_FAILURES:-?} errors, ${STUCK_VERIFIED:-?} verified; flaky counted faulty: $COUNTED (${FAULTS:-0} faults in cryptoserver_board_faults_total, $OUT times out of rotation, $REOPENED session reopens; $FLAKY_OK jobs ok on it) | — | — | $STUCK_GOAL |"
fi
echo "# transport floor (cryptoserver-bench transport-floor, 256-byte round trips, one process, median p50 of $R run(s)):" \
     "unix socket pair $(floor unix) µs, zmq-tcp $(floor zmq-tcp) µs, zmq-curve $(floor zmq-curve) µs," \
     "zmq-ipc $(floor zmq-ipc) µs"
echo "# floor of the latency ratio (the transport alone, the broker adding nothing): zmq-curve p50 / p11kit-remote's added p50" \
     "= $(calc %.2f "a / b" "$(floor zmq-curve)" "${P11KIT_ADDED%% *}")×, over ipc:// zmq-ipc p50 / it" \
     "= $(calc %.2f "a / b" "$(floor zmq-ipc)" "${P11KIT_ADDED%% *}")×; zmq-curve − unix = $(calc %.1f "a - b" "$(floor zmq-curve)" "$(floor unix)") µs"
# cpus SETUP MECHANISM THREADS: "client C, broker B" (µs per op, medians).
cpus () {
    local b
    b=$(med "$1" "$2" "$3" 15)
    printf '%s client %s%s' "$1" "$(calc %.1f a "$(med "$1" "$2" "$3" 16)")" "$([ "$b" = "?" ] || echo ", broker $(calc %.1f a "$b")")"
}
line () { # mechanism threads setup...
    local m=$1 t=$2 out="" v; shift 2
    for v in "$@"; do
        [ "$v" != p11kit-remote ] || [ -n "$CLIENT" ] || continue
        out="$out${out:+; }$(cpus "$v" "$m" "$t")"
    done
    echo "$out"
}
echo "# CPU per op, µs, medians (client: cryptoserver-bench's process, getrusage; broker: its process_cpu_seconds_total):"
echo "#   ECDSA P-256, 1 thread: $(line ecdsa 1 softhsm-direct p11kit-remote ours-keystore ours-keystore-ipc)"
if [ -z "$LATENCY" ]; then
    echo "#   ECDSA P-256, 32 threads: $(line ecdsa 32 softhsm-direct p11kit-remote ours-keystore ours-keystore-ipc)"
    echo "#   RSA-2048, 32 threads: $(line sha256-rsa-pkcs 32 softhsm-direct p11kit-remote ours-keystore)"
    Y=$(med ours-keystore sha256-rsa-pkcs 32 15); Z=$(med ours-keystore sha256-rsa-pkcs 32 16)
    echo "# RSA per signature: openssl sign $(calc %.1f "1e6 / a" "$(speed rsa2048 1)") µs/core," \
         "broker CPU $(calc %.1f a "$Y") µs/op, client CPU $(calc %.1f a "$Z") µs/op;" \
         "ceiling $(nproc) cores / (broker + client) = $(calc %.0f "c * 1e6 / (a + b)" "$Y" "$Z" "$(nproc)") sign/s"
fi
