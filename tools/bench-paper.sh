#!/bin/bash
# bench-paper.sh — `cryptoserver-bench paper`: the benchmarks of Berson et
# al., "Cryptography as a Network Service" (§5), reproduced on 127.0.0.1 and
# printed beside the paper's figures: Table 1 (each board alone through its
# shim driver, no broker), Table 2 (one client thread, through the broker,
# plaintext and CURVE), Table 3 (many client threads; the two-board
# efficiency), and Table 4 (TLS handshakes per second of nginx with its key in
# a file, or on our token through the OpenSSL engine).  Boards: the simulated
# AXL200 and nFast 300 (sim presets, 1024-bit RSA as in the paper) and real
# ones: SoftHSMv2 (pkcs11), openssl and gmp (RSA-2048).
#
# The method is the paper's (§5.1): the client threads start on a barrier,
# sign blocks of operations, and a block's clock stops when its last thread
# finishes (cryptoserver-bench --count --blocks); the threads share each
# block's operations (--share; one row of Table 3 also splits them per
# thread as the paper did); every signature is verified with OpenSSL against
# a public key made outside the code under test.  One
# demo deployment (tools/demo-deploy.sh) in OUT/deploy; one broker per
# configuration, started and stopped by its own PID, bound to 127.0.0.1; the
# broker's stats lines must count exactly the signatures of its runs.
# Writes OUT/paper.txt (the tables), OUT/paper.csv and OUT/paper.png (ops/s
# against client threads per configuration, gnuplot).  A benchmark, not a
# test: nothing here asserts a speed.  man cryptoserver-bench(1), "PAPER".
set -eu

usage () {
    cat <<'EOT'
usage: cryptoserver-bench paper [--quick] [--out DIR] [--scale F] [--no-tls] [--tables T] [--keep]

  --quick      short runs and fewer points (a minute or two), for development
  --out DIR    results and deployment here (default: a new /tmp/cryptoserver-paper.XXXXXX)
  --scale F    multiply every run's length by F (e.g. 0.2 for a smoke test)
  --no-tls     skip Table 4 (nginx)
  --tables T   only these tables, e.g. 1, 23 (2 and 3 run together, with the plot), 4
  --keep       keep the deployment (DIR/deploy) afterwards
Results: DIR/paper.txt (tables), DIR/paper.csv, DIR/paper.png; logs in DIR/logs.
Environment: CS_BUILD_DIR (the build tree; set by cryptoserver-bench),
             SOFTHSM2_MODULE, NGINX (the nginx program).
EOT
}

die () { echo "bench-paper: error: $*" >&2; exit 1; }

SRC_DIR=$(cd "$(dirname "$0")/.." && pwd)
BUILD_DIR=$(cd "${CS_BUILD_DIR:-$SRC_DIR}" && pwd)
export CS_BUILD_DIR=$BUILD_DIR
DEPLOY=$SRC_DIR/tools/demo-deploy.sh
ADMIN=$BUILD_DIR/tools/cryptoserver-admin
BENCH=$BUILD_DIR/tools/cryptoserver-bench
export CRYPTOSERVER_DRIVER_DIR=${CRYPTOSERVER_DRIVER_DIR:-$BUILD_DIR/shim-drivers/.libs}

QUICK= OUT= SCALE=1 TLS=1 KEEP= TABLES=1234
while [ $# -gt 0 ]; do
    case $1 in
        -h|--help) usage; exit 0 ;;
        --quick) QUICK=1 ;;
        --out) [ $# -ge 2 ] || { usage >&2; exit 2; }; OUT=$2; shift ;;
        --scale) [ $# -ge 2 ] || { usage >&2; exit 2; }; SCALE=$2; shift ;;
        --no-tls) TLS= ;;
        --tables) [ $# -ge 2 ] || { usage >&2; exit 2; }; TABLES=$2; shift ;;
        --keep) KEEP=1 ;;
        *) usage >&2; exit 2 ;;
    esac
    shift
done
awk -v s="$SCALE" 'BEGIN { exit !(s > 0 && s <= 100) }' || die "--scale: a number in (0, 100]"
case $TABLES in *[!1234]*|"") die "--tables: digits 1 to 4" ;; esac
case $TABLES in *[23]*) TABLES="${TABLES}23" ;; esac
case $TABLES in *4*) ;; *) TLS= ;; esac
want () { case $TABLES in *"$1"*) return 0 ;; esac; return 1; }
for program in "$ADMIN" "$BENCH" "$BUILD_DIR/broker/cryptoserver-broker"; do
    [ -x "$program" ] || die "$program is not built (make, or set CS_BUILD_DIR)"
done
for driver in sim openssl gmp pkcs11; do
    [ -f "$CRYPTOSERVER_DRIVER_DIR/$driver.so" ] || die "driver $driver.so not in $CRYPTOSERVER_DRIVER_DIR"
done
command -v gnuplot >/dev/null || die "gnuplot not found (Debian: gnuplot-nox; tools/deps.sh)"
NGINX=${NGINX:-$(command -v nginx || echo /usr/sbin/nginx)}
if [ -n "$TLS" ]; then
    [ -x "$NGINX" ] || die "nginx not found (nginx-light; or --no-tls)"
    openssl engine -t pkcs11 >/dev/null 2>&1 || die "OpenSSL engine pkcs11 missing (libengine-pkcs11-openssl; or --no-tls)"
fi

if [ -z "$OUT" ]; then
    OUT=$(mktemp -d /tmp/cryptoserver-paper.XXXXXX)
fi
mkdir -p "$OUT/logs"
OUT=$(cd "$OUT" && pwd)
D=$OUT/deploy
CSV=$OUT/paper.csv
TXT=$OUT/paper.txt
LOGS=$OUT/logs

# ---- run lengths ---------------------------------------------------------
# Simulated boards: blocks of about BLOCK_S seconds each (ops per thread
# from the expected rate), BLOCKS blocks; real boards: REAL_S seconds.  The
# paper averaged 1-8 blocks of 1000 operations per thread; a block here is
# shorter, long enough that the fill and drain of the card (one latency)
# stay under 3% of it.
if [ -n "$QUICK" ]; then
    BLOCK_S=0.6 BLOCKS=1 SWEEP_S=0.3 REAL_S=0.4 TLS_S=2
    SIM_SWEEP="1 8 26 70" REAL_SWEEP="1 4 16"
else
    BLOCK_S=4 BLOCKS=2 SWEEP_S=2 REAL_S=3 TLS_S=10
    SIM_SWEEP="1 2 4 8 16 26 32 48 70" REAL_SWEEP="1 2 4 8 16"
fi
scaled () { awk -v v="$1" -v s="$SCALE" 'BEGIN { printf "%.3f", v * s }'; }
BLOCK_S=$(scaled $BLOCK_S) SWEEP_S=$(scaled $SWEEP_S) REAL_S=$(scaled $REAL_S) TLS_S=$(scaled $TLS_S)
NCPU=$(nproc 2>/dev/null || echo 1)
# Each real board gets half the host's cores, so that two of them together
# do not need more cores than the host has.
REAL_THREADS=$(( NCPU / 2 > 0 ? NCPU / 2 : 1 ))
# Broker threads per simulated board, by the paper's rule (§4.2.5): slightly
# more than the board's coprocessors.  30 for the AXL200 (26) as in the
# paper; 12 for the nFast 300 (10): more would only queue inside the card,
# whose interface is its bottleneck, and a deep queue there makes the last
# operations of a block wait while the AXL200 idles.
AXL_THREADS=30 NFAST_THREADS=12
REAL_CLIENTS=8                  # client threads of Table 3 for the real boards

# ---- progress ------------------------------------------------------------
# The plan runs twice: DRY=1 only counts the steps, then for real.
DRY= STEP=0 STEPS=0
elapsed () { printf '%dm%02ds' $((SECONDS / 60)) $((SECONDS % 60)); }
step () {
    STEP=$((STEP + 1))
    [ -n "$DRY" ] || printf 'paper: [%d/%d, %s] %s\n' "$STEP" "$STEPS" "$(elapsed)" "$*" >&2
}
note () { [ -n "$DRY" ] || printf 'paper:     %s\n' "$*" >&2; }

# ---- the deployment ------------------------------------------------------
SIM_KEY=paper-rsa1024           # resident on the sim boards (CKA_ID 5a)
REAL_KEY=paper-rsa2048          # keystore key for the real boards
TLS_KEY=paper-tls               # keystore key of nginx's certificate
SIM_BOARDS="axl nfast nfastcrt"
REAL_BOARDS="board0 cpu gmp"

conf () { "$ADMIN" config set "$D/broker.conf" "$1" "$2"; }

# new_key BITS NAME: an RSA key made by OpenSSL in D/paper (private, 0600)
# and its public half in D/keys/NAME.pub.pem.
new_key () {
    [ -f "$D/paper/$2.pem" ] && return 0
    (umask 077; openssl genpkey -algorithm RSA -pkeyopt "rsa_keygen_bits:$1" -out "$D/paper/$2.pem" 2>/dev/null)
    openssl pkey -in "$D/paper/$2.pem" -pubout -out "$D/keys/$2.pub.pem"
}

# deploy: the demo deployment, the paper's keys, and every board the
# configurations use, saved as D/base.conf (each configuration removes the
# boards it does not use).
deploy () {
    step "deployment in $D (tools/demo-deploy.sh)"
    [ -z "$DRY" ] || return 0
    "$DEPLOY" "$D" --endpoint 'tcp://127.0.0.1:!' --metrics-port 0 > "$LOGS/deploy.log" 2>&1 \
        || { cat "$LOGS/deploy.log" >&2; die "demo-deploy.sh failed"; }
    mkdir -p "$D/paper"
    chmod 700 "$D/paper"
    new_key 1024 "$SIM_KEY"
    new_key 2048 "$REAL_KEY"
    if ! "$ADMIN" key list --dir "$D" --tenant demo | grep -qw "$REAL_KEY"; then
        "$ADMIN" key import --dir "$D" --tenant demo --file "$D/paper/$REAL_KEY.pem" \
            --label "$REAL_KEY" > "$LOGS/import.log" 2>&1 || die "key import failed: $(cat "$LOGS/import.log")"
    fi
    local b
    for b in 2048 3072 4096; do conf "keys/pool-rsa-$b" 0; done
    conf drivers/board0/threads "$REAL_THREADS"
    conf drivers/cpu/threads "$REAL_THREADS"
    if "$ADMIN" config get "$D/broker.conf" drivers/board1/type >/dev/null 2>&1; then
        "$ADMIN" board remove board1 --dir "$D" >/dev/null
    fi
    sim_board axl "$AXL_THREADS" preset=axl200
    sim_board nfast "$NFAST_THREADS" preset=nfast300
    sim_board nfastcrt "$NFAST_THREADS" preset=nfast300 crt=true
    if ! "$ADMIN" config get "$D/broker.conf" drivers/gmp/type >/dev/null 2>&1; then
        "$ADMIN" board add gmp --dir "$D" --type gmp --threads "$REAL_THREADS" >/dev/null
    fi
    cp "$D/broker.conf" "$D/base.conf"
    chmod 600 "$D/base.conf"
    # shellcheck disable=SC1091
    . "$D/env.sh"
}

# sim_board NAME THREADS KEY=VALUE...: a simulated board on the 1024-bit key.
sim_board () {
    local name=$1 threads=$2 pair sets=()
    shift 2
    "$ADMIN" config get "$D/broker.conf" "drivers/$name/type" >/dev/null 2>&1 && return 0
    for pair in "$@"; do sets+=(--set "$pair"); done
    "$ADMIN" board add "$name" --dir "$D" --type sim --threads "$threads" \
        --key-file "$D/paper/$SIM_KEY.pem" --key-id 5a --set "label=$SIM_KEY" --set tenant=demo \
        "${sets[@]}" >/dev/null
}

# ---- brokers -------------------------------------------------------------
BOARDS_NOW= SEC_NOW= SIGNED=0
# session_start "BOARDS" plain|curve: a broker with only these boards.
session_start () {
    BOARDS_NOW=$1 SEC_NOW=$2 SIGNED=0
    [ -z "$DRY" ] || return 0
    cp "$D/base.conf" "$D/broker.conf"
    local b
    for b in $SIM_BOARDS $REAL_BOARDS; do
        case " $BOARDS_NOW " in *" $b "*) ;; *) "$ADMIN" board remove "$b" --dir "$D" >/dev/null ;; esac
    done
    local curve=true
    [ "$SEC_NOW" = curve ] || curve=false
    conf broker/curve/enabled "$curve"
    "$ADMIN" config set "$D/clients/demo/client.conf" client/curve "$curve"
    : > "$D/broker.log"
    "$DEPLOY" --start "$D" > "$LOGS/start.log" 2>&1 \
        || { cat "$LOGS/start.log" >&2; die "the broker did not start (boards: $BOARDS_NOW)"; }
}

# jobs_of BOARD: jobs in the broker's last stats line of BOARD.
jobs_of () {
    sed -n "s/.*stats board=$1 jobs=\([0-9][0-9]*\).*/\1/p" "$D/broker.log" | tail -n 1
}

# session_stop: stops the broker (by its PID) and checks that its boards
# ran exactly the signatures of the session's runs.
session_stop () {
    [ -z "$DRY" ] || return 0
    "$DEPLOY" --stop "$D" > "$LOGS/stop.log" 2>&1 \
        || { cat "$LOGS/stop.log" >&2; die "the broker did not stop cleanly (see $D/broker.log)"; }
    cat "$D/broker.log" >> "$LOGS/broker.log"
    local b jobs total=0 split=
    for b in $BOARDS_NOW; do
        jobs=$(jobs_of "$b")
        total=$((total + ${jobs:-0}))
        split="$split $b=${jobs:-0}"
    done
    [ "$total" = "$SIGNED" ] || die "boards ran $total jobs ($split), not the $SIGNED signatures of the runs"
    note "broker stopped; jobs per board:$split"
}

# ---- measurements --------------------------------------------------------
# mean_latency_ms = threads x seconds / ops; Table 4: server_cpus = CPUs nginx
# used, server_cpu_busy_pct = how busy nginx's CPU was (all processes on it).
echo "table,config,path,security,crt,threads,ops,seconds,ops_per_s,p50_ms,p99_ms,mean_latency_ms,server_cpus,server_cpu_busy_pct" \
    > "$CSV.new"

# expected CONFIG THREADS: a rough ops/s, to size a block (the sim models).
expected () {
    local lat cap
    case ${1%-per-thread} in
        axl200) lat=92.19 cap=265 ;;
        nfast300) lat=85.68 cap=93 ;;
        nfast300-crt) lat=27.03 cap=300 ;;
        both) lat=85.68 cap=358 ;;
        both-crt) lat=27.03 cap=565 ;;
        *) die "no model for $1" ;;
    esac
    awk -v t="$2" -v l="$lat" -v c="$cap" 'BEGIN { r = t * 1000 / l; print (r < c ? r : c) }'
}

# count_for CONFIG THREADS SECONDS: operations per thread for a block of SECONDS.
count_for () {
    awk -v r="$(expected "$1" "$2")" -v t="$2" -v s="$3" \
        'BEGIN { n = int (r * s / t + 0.999); print (n < 3 ? 3 : n) }'
}

# record TABLE CONFIG PATH SECURITY CRT CSV-ROW-OF-THE-BENCH: appends a row.
record () {
    local table=$1 config=$2 path=$3 sec=$4 crt=$5 row=$6
    local threads ops seconds rate p50 p99 failures
    IFS=, read -r _ _ _ threads ops seconds rate p50 _ p99 _ _ failures _ <<<"$row"
    [ "$failures" = 0 ] || die "$config: $failures failed signatures"
    awk -v OFS=, -v a="$table" -v b="$config" -v c="$path" -v d="$sec" -v e="$crt" -v t="$threads" \
        -v o="$ops" -v s="$seconds" -v r="$rate" -v p="$p50" -v q="$p99" \
        'BEGIN { print a, b, c, d, e, t, o, s, r, p, q, sprintf ("%.3f", t * s * 1000 / o), "-", "-" }' >> "$CSV.new"
    note "$(printf '%s ops/s (%s ops in %s s, p50 %s ms)' "$rate" "$ops" "$seconds" "$p50")"
}

# run_bench LOG ARGS...: cryptoserver-bench with --csv --verify-key; the CSV row.
run_bench () {
    local log=$1
    shift
    "$BENCH" "$@" --csv > "$log" 2> "$log.err" \
        || { cat "$log.err" >&2; die "cryptoserver-bench $* failed"; }
    tail -n 1 "$log"
}

# length_args CONFIG THREADS SECONDS BLOCKS: --count/--blocks for a sim
# config, --seconds for a real one.  A block's operations come from one
# counter (--share), except for CONFIG-per-thread: each thread then signs
# its own count, as in the paper, and the block waits for the unluckiest.
length_args () {
    case $1 in
        *-per-thread) echo "--count $(count_for "$1" "$2" "$3") --blocks $4" ;;
        axl200|nfast300|nfast300-crt|both|both-crt)
            echo "--count $(count_for "$1" "$2" "$3") --blocks $4 --share" ;;
        *) echo "--seconds $REAL_S" ;;
    esac
}

# key_of CONFIG: the key label and its public PEM.
key_of () {
    case $1 in
        axl200|nfast300|nfast300-crt|both|both-crt|*-per-thread) echo "$SIM_KEY" ;;
        *) echo "$REAL_KEY" ;;
    esac
}

# local_run TABLE CONFIG BOARD CRT THREADS: the board through its driver.
local_run () {
    local table=$1 config=$2 board=$3 crt=$4 threads=$5 key
    step "table $table: $config local (driver, no broker), $threads threads"
    [ -z "$DRY" ] || return 0
    key=$(key_of "$config")
    local keyargs=(--key "$key")
    [ "$key" = "$SIM_KEY" ] || keyargs=(--key-file "$D/paper/$key.pem")
    # shellcheck disable=SC2046
    record "$table" "$config" local - "$crt" "$(run_bench "$LOGS/local-$config-$threads.csv" \
        --driver-board "$D/base.conf:$board" "${keyargs[@]}" --verify-key "$D/keys/$key.pub.pem" \
        --threads "$threads" $(length_args "$config" "$threads" "$BLOCK_S" "$BLOCKS"))"
}

# remote_run TABLE CONFIG CRT THREADS [SECONDS BLOCKS]: through the broker
# of the current session, with our PKCS#11 module.
remote_run () {
    local table=$1 config=$2 crt=$3 threads=$4 seconds=${5:-$BLOCK_S} blocks=${6:-$BLOCKS} key row ops
    step "table $table: $config through the broker ($SEC_NOW), $threads threads"
    [ -z "$DRY" ] || return 0
    key=$(key_of "$config")
    # shellcheck disable=SC2046
    row=$(run_bench "$LOGS/remote-$config-$SEC_NOW-$threads.csv" --module "$CRYPTOSERVER_MODULE" \
        --token demo --pin "$CRYPTOSERVER_PIN" --key "$key" --verify-key "$D/keys/$key.pub.pem" \
        --threads "$threads" $(length_args "$config" "$threads" "$seconds" "$blocks"))
    ops=$(echo "$row" | cut -d, -f5)
    SIGNED=$((SIGNED + ops))
    record "$table" "$config" remote "$SEC_NOW" "$crt" "$row"
}

# ---- TLS (Table 4) ---------------------------------------------------------
NGINX_PID= TLS_CONNECTIONS=0
# RSA-3072: the server's private-key operation (about 1 ms) dominates a
# handshake, as RSA-1024 did on the paper's 440 MHz UltraSPARC.
TLS_BITS=${CS_PAPER_TLS_BITS:-3072}
TLS_WORKERS=8                   # nginx worker processes (each blocks on its signature)
TLS_CLIENTS=16                  # concurrent client connections
# CPUs: the TLS server is CPU-bound on one CPU; the broker gets others.
if [ "$NCPU" -ge 3 ]; then
    SERVER_CPUS=0 CLIENT_CPUS=1 BROKER_CPUS=2-$((NCPU - 1)) BROKER_NCPU=$((NCPU - 2))
elif [ "$NCPU" = 2 ]; then
    SERVER_CPUS=0 CLIENT_CPUS=0 BROKER_CPUS=1 BROKER_NCPU=1
else
    SERVER_CPUS= CLIENT_CPUS= BROKER_CPUS= BROKER_NCPU=1
fi
pinned () { local cpus=$1; shift; if [ -n "$cpus" ] && command -v taskset >/dev/null; then taskset -c "$cpus" "$@"; else "$@"; fi; }

tls_setup () {
    step "table 4: RSA-$TLS_BITS key and certificate for nginx, imported into the keystore"
    [ -z "$DRY" ] || return 0
    new_key "$TLS_BITS" "$TLS_KEY"
    openssl req -new -x509 -key "$D/paper/$TLS_KEY.pem" -sha256 -days 2 -subj "/CN=127.0.0.1" \
        -addext "subjectAltName=IP:127.0.0.1" -out "$D/paper/tls.cert.pem" 2>/dev/null
    if ! "$ADMIN" key list --dir "$D" --tenant demo | grep -qw "$TLS_KEY"; then
        "$ADMIN" key import --dir "$D" --tenant demo --file "$D/paper/$TLS_KEY.pem" \
            --label "$TLS_KEY" > "$LOGS/import-tls.log" 2>&1 || die "TLS key import failed"
    fi
    mkdir -p "$D/nginx/logs" "$D/nginx/tmp" "$D/nginx/html"
    echo "cryptoserver paper benchmark" > "$D/nginx/html/index.html"
}

# nginx_conf KEY-LINE ENGINE-LINES: the server's configuration.
nginx_conf () {
    local user=
    [ "$(id -u)" = 0 ] && user="user $(id -un) $(id -gn);"
    cat > "$D/nginx/nginx.conf" <<EOT
$user
worker_processes $TLS_WORKERS;
daemon off;
master_process on;
pid $D/nginx/nginx.pid;
error_log $D/nginx/logs/error.log warn;
env PKCS11_MODULE_PATH;
$2
events { worker_connections 1024; }
http {
    access_log off;
    client_body_temp_path $D/nginx/tmp/body;
    proxy_temp_path $D/nginx/tmp/proxy;
    fastcgi_temp_path $D/nginx/tmp/fastcgi;
    uwsgi_temp_path $D/nginx/tmp/uwsgi;
    scgi_temp_path $D/nginx/tmp/scgi;
    server {
        listen 127.0.0.1:$TLS_PORT ssl;
        ssl_protocols TLSv1.2 TLSv1.3;
        ssl_certificate $D/paper/tls.cert.pem;
        ssl_certificate_key $1;
        ssl_session_cache off;
        ssl_session_tickets off;
        keepalive_timeout 0;
        root $D/nginx/html;
    }
}
EOT
}

# free_port: a free TCP port on 127.0.0.1.
free_port () {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

nginx_stop () {
    [ -n "$NGINX_PID" ] || return 0
    kill -QUIT "$NGINX_PID" 2>/dev/null || true
    local waited=0
    while kill -0 "$NGINX_PID" 2>/dev/null && [ $waited -lt 100 ]; do sleep 0.1; waited=$((waited + 1)); done
    kill -KILL "$NGINX_PID" 2>/dev/null || true
    wait "$NGINX_PID" 2>/dev/null || true
    NGINX_PID=
}

# nginx_start: nginx on CPU SERVER_CPUS; waits until it answers HTTPS.
nginx_start () {
    : > "$D/nginx/logs/error.log"
    local pin=()
    [ -z "$SERVER_CPUS" ] || ! command -v taskset >/dev/null || pin=(taskset -c "$SERVER_CPUS")
    # Started directly (taskset execs nginx): $! is nginx's master.
    "${pin[@]}" "$NGINX" -p "$D/nginx" -c "$D/nginx/nginx.conf" -e "$D/nginx/logs/error.log" \
        > "$LOGS/nginx.out" 2>&1 &
    NGINX_PID=$!
    local try
    for try in $(seq 1 100); do
        if "$BENCH" tls --connect "127.0.0.1:$TLS_PORT" --count 1 --cafile "$D/paper/tls.cert.pem" \
               > /dev/null 2>&1; then
            return 0
        fi
        kill -0 "$NGINX_PID" 2>/dev/null || break
        sleep 0.2
    done
    cat "$LOGS/nginx.out" "$D/nginx/logs/error.log" >&2
    nginx_stop
    die "nginx did not serve HTTPS on 127.0.0.1:$TLS_PORT"
}

# cpu_ticks PID: utime + stime of PID and its children (nginx's workers).
cpu_ticks () {
    local pid total=0
    for pid in $1 $(ps -o pid= --ppid "$1"); do
        total=$((total + $(awk '{ print $14 + $15 }' "/proc/$pid/stat" 2>/dev/null || echo 0)))
    done
    echo $total
}

# cpu_jiffies CPU: "busy total" jiffies of one CPU (/proc/stat), or "0 0".
cpu_jiffies () {
    awk -v c="cpu$1" '$1 == c { t = 0; for (i = 2; i <= NF; i++) t += $i; print t - $5 - $6, t; f = 1 }
                      END { if (!f) print 0, 0 }' /proc/stat
}

# tls_case NAME KEY-LINE ENGINE-LINES: Table 4's measurement of one server.
tls_case () {
    local name=$1 row before after
    step "table 4: nginx ($TLS_WORKERS workers on CPU ${SERVER_CPUS:-any}), key $name, $TLS_CLIENTS clients"
    [ -z "$DRY" ] || return 0
    TLS_PORT=$(free_port)
    nginx_conf "$2" "$3"
    nginx_start
    before=$(cpu_ticks "$NGINX_PID")
    local busy_before busy_after
    busy_before=$(cpu_jiffies "${SERVER_CPUS:-x}")
    row=$(pinned "$CLIENT_CPUS" "$BENCH" tls --connect "127.0.0.1:$TLS_PORT" --threads "$TLS_CLIENTS" \
              --seconds "$TLS_S" --cafile "$D/paper/tls.cert.pem" --csv 2> "$LOGS/tls-$name.err" | tail -n 1) \
        || { cat "$LOGS/tls-$name.err" >&2; nginx_stop; die "TLS client failed ($name)"; }
    after=$(cpu_ticks "$NGINX_PID")
    busy_after=$(cpu_jiffies "${SERVER_CPUS:-x}")
    nginx_stop
    local threads conns seconds rate p50 failures protocol
    IFS=, read -r threads conns seconds rate p50 _ _ _ failures protocol <<<"$row"
    local cpu busy
    cpu=$(awk -v t=$((after - before)) -v hz="$(getconf CLK_TCK)" -v s="$seconds" \
              'BEGIN { printf "%.2f", t / hz / s }')
    # How busy the server's CPU was (nginx and anything else on it).
    busy=$(echo "$busy_before $busy_after" | awk '{ t = $4 - $2; print (t > 0 ? sprintf ("%.0f", 100 * ($3 - $1) / t) : "-") }')
    echo "4,tls-$name,tls,-,-,$threads,$conns,$seconds,$rate,$p50,-,-,$cpu,$busy" >> "$CSV.new"
    TLS_CONNECTIONS=$((conns - failures))
    note "$rate connections/s ($protocol, $conns in $seconds s, p50 $p50 ms); nginx used $cpu CPUs, its CPU was $busy% busy"
}

tls_runs () {
    tls_setup
    local uri="pkcs11:token=demo;object=$TLS_KEY;type=private?pin-value=1234"
    tls_case file "$D/paper/$TLS_KEY.pem" ""
    local sec
    for sec in curve plain; do
        step "table 4: broker with an openssl board ($BROKER_NCPU threads on CPU ${BROKER_CPUS:-any}), $sec"
        if [ -z "$DRY" ]; then
            cp "$D/base.conf" "$D/base-tls.conf"
            "$ADMIN" config set "$D/base.conf" drivers/cpu/threads "$BROKER_NCPU"
            CS_BROKER_WRAPPER=${BROKER_CPUS:+taskset -c $BROKER_CPUS} session_start cpu "$sec"
            mv "$D/base-tls.conf" "$D/base.conf"
            export PKCS11_MODULE_PATH=$CRYPTOSERVER_MODULE
        fi
        tls_case "token-$sec" "\"engine:pkcs11:$uri\"" "ssl_engine pkcs11;"
        [ -z "$DRY" ] || continue
        "$DEPLOY" --stop "$D" > "$LOGS/stop.log" 2>&1 || die "the broker did not stop cleanly"
        cat "$D/broker.log" >> "$LOGS/broker.log"
        # Every handshake signed on the token: at least one job per connection.
        [ "$(jobs_of cpu)" -ge "$TLS_CONNECTIONS" ] \
            || die "the openssl board ran $(jobs_of cpu) jobs for $TLS_CONNECTIONS TLS connections"
        note "broker stopped; the openssl board ran $(jobs_of cpu) signatures"
    done
}

# ---- the plan --------------------------------------------------------------
plan () {
    deploy
    # Table 1: each board alone through its shim driver (the paper's local
    # microbenchmark).
    local t
    want 1 && for t in 1 25; do local_run 1 axl200 axl no "$t"; done
    want 1 && for t in 1 10 30 32; do local_run 1 nfast300 nfast no "$t"; done
    want 1 && for t in 1 10 30 32; do local_run 1 nfast300-crt nfastcrt yes "$t"; done
    want 1 && for t in 1 2 4; do
        local_run 1 softhsm board0 yes "$t"
        local_run 1 openssl cpu yes "$t"
        local_run 1 gmp gmp yes "$t"
    done
    # Tables 2 and 3 and the plot's sweep, through the broker.
    local sec
    want 2 && for sec in plain curve; do
        session_start axl "$sec"
        remote_run 2 axl200 no 1
        remote_run 3 axl200 no 26
        [ "$sec" = plain ] || for t in $SIM_SWEEP; do remote_run sweep axl200 no "$t" "$SWEEP_S" 1; done
        session_stop
        session_start nfast "$sec"
        remote_run 2 nfast300 no 1
        remote_run 3 nfast300 no 26
        [ "$sec" = plain ] || for t in $SIM_SWEEP; do remote_run sweep nfast300 no "$t" "$SWEEP_S" 1; done
        session_stop
        session_start nfastcrt "$sec"
        remote_run 2 nfast300-crt yes 1
        remote_run 3 nfast300-crt yes 26
        [ "$sec" = plain ] || for t in $SIM_SWEEP; do remote_run sweep nfast300-crt yes "$t" "$SWEEP_S" 1; done
        session_stop
        session_start "axl nfast" "$sec"
        remote_run 3 both no 70
        [ "$sec" = plain ] || remote_run 3 both-per-thread no 70
        [ "$sec" = plain ] || for t in $SIM_SWEEP; do remote_run sweep both no "$t" "$SWEEP_S" 1; done
        session_stop
        session_start "axl nfastcrt" "$sec"
        remote_run 3 both-crt yes 70
        [ "$sec" = plain ] || for t in $SIM_SWEEP; do remote_run sweep both-crt yes "$t" "$SWEEP_S" 1; done
        session_stop
        local config boards
        for config in softhsm:board0 openssl:cpu gmp:gmp openssl+softhsm:"cpu board0"; do
            boards=${config#*:} config=${config%%:*}
            session_start "$boards" "$sec"
            remote_run 2 "$config" yes 1
            remote_run 3 "$config" yes "$REAL_CLIENTS"
            [ "$sec" = plain ] || for t in $REAL_SWEEP; do remote_run sweep "$config" yes "$t"; done
            session_stop
        done
    done
    [ -z "$TLS" ] || tls_runs
    step "tables, CSV and plot"
}

# ---- the report ------------------------------------------------------------
# val TABLE CONFIG PATH SECURITY COLUMN [THREADS]: a value of the CSV.
val () {
    awk -F, -v t="$1" -v c="$2" -v p="$3" -v s="$4" -v col="$5" -v n="${6:-}" '
        NR == 1 { for (i = 1; i <= NF; i++) idx [$i] = i; next }
        $1 == t && $2 == c && $3 == p && $4 == s && (n == "" || $6 == n) { v = $idx [col] }
        END { print (v == "" ? "-" : v) }' "$CSV"
}
# fmt VALUE [PAPER]: "value (paper)" with 2 decimals.
fmt () {
    awk -v v="$1" -v p="${2:-}" 'BEGIN {
        s = (v == "-" ? "-" : sprintf ("%.2f", v))
        if (p != "") s = s " (" p ")"
        printf "%s", s }'
}

table1 () {
    echo "Table 1. Local accelerator throughput (ops/s): each board alone through its shim driver, no broker"
    echo "         (ours; the paper's in parentheses).  Sim boards: RSA-1024; real boards: RSA-2048 with CRT."
    printf '%-22s %7s %22s %22s\n' Board Threads "no CRT (paper)" "w/CRT (paper)"
    local row board config threads nocrt crt
    for row in "AXL200 (sim):axl200:1:10.85:" "AXL200 (sim):axl200:25:265.98:" \
               "nFast 300 (sim):nfast300:1:11.67:37.00" "nFast 300 (sim):nfast300:10:92.40:288.92" \
               "nFast 300 (sim):nfast300:30:93.28:297.74" "nFast 300 (sim):nfast300:32:93.30:299.97"; do
        IFS=: read -r board config threads nocrt crt <<<"$row"
        local ours_crt=-
        [ -z "$crt" ] || ours_crt=$(fmt "$(val 1 nfast300-crt local - ops_per_s "$threads")" "$crt")
        printf '%-22s %7s %22s %22s\n' "$board" "$threads" \
            "$(fmt "$(val 1 "$config" local - ops_per_s "$threads")" "$nocrt")" "$ours_crt"
    done
    for row in "SoftHSMv2 (pkcs11):softhsm" "openssl:openssl" "gmp:gmp"; do
        IFS=: read -r board config <<<"$row"
        for threads in 1 2 4; do
            printf '%-22s %7s %22s %22s\n' "$board" "$threads" - \
                "$(fmt "$(val 1 "$config" local - ops_per_s "$threads")")"
        done
    done
}

table2 () {
    echo "Table 2. Single-threaded performance: mean latency (ms) and throughput (ops/s), ours (paper)."
    echo "         Paper: insecure = plaintext, secure = triple DES; ours: plaintext and CURVE."
    printf '%-30s %18s %18s %18s %18s\n' "Machine/Board" "Latency" "Throughput" "Latency w/CRT" "Throughput w/CRT"
    echo "Local accelerator:"
    # row LABEL TABLE CONFIG PATH SECURITY PAPER-LAT PAPER-OPS CRT-CONFIG PAPER-LAT PAPER-OPS
    row () {
        local l=- t=- lc=- tc=-
        if [ -n "$3" ]; then
            l=$(fmt "$(val "$2" "$3" "$4" "$5" mean_latency_ms 1)" "$6")
            t=$(fmt "$(val "$2" "$3" "$4" "$5" ops_per_s 1)" "$7")
        fi
        if [ -n "$8" ]; then
            lc=$(fmt "$(val "$2" "$8" "$4" "$5" mean_latency_ms 1)" "$9")
            tc=$(fmt "$(val "$2" "$8" "$4" "$5" ops_per_s 1)" "${10}")
        fi
        printf '  %-28s %18s %18s %18s %18s\n' "$1" "$l" "$t" "$lc" "$tc"
    }
    row "AXL200 (sim)" 1 axl200 local - 92.19 10.85 "" "" ""
    row "nFast 300 (sim)" 1 nfast300 local - 85.68 11.67 nfast300-crt 27.03 37.00
    row "SoftHSMv2" 1 "" local - "" "" softhsm "" ""
    row "openssl" 1 "" local - "" "" openssl "" ""
    row "gmp" 1 "" local - "" "" gmp "" ""
    echo "Remote cryptoserver:"
    row "AXL200 only (plaintext)" 2 axl200 remote plain 93.08 10.74 "" "" ""
    row "AXL200 only (CURVE)" 2 axl200 remote curve 94.12 10.62 "" "" ""
    row "nFast 300 only (plaintext)" 2 nfast300 remote plain 86.78 11.52 nfast300-crt 28.27 35.37
    row "nFast 300 only (CURVE)" 2 nfast300 remote curve 88.12 11.35 nfast300-crt 29.86 33.49
    local c
    for c in softhsm openssl gmp; do
        row "$c only (plaintext)" 2 "" remote plain "" "" "$c" "" ""
        row "$c only (CURVE)" 2 "" remote curve "" "" "$c" "" ""
    done
}

table3 () {
    echo "Table 3. Multi-threaded performance through the broker (ops/s), ours (paper).  A block's"
    echo "         operations are shared by its threads; 'per-thread counts' is the paper's split, where"
    echo "         threads that met the slower board finish last and the others wait idle."
    echo "         The paper's 'multi' rows sent batches of 3 per RPC; PKCS#11 has no batch C_Sign, so"
    echo "         ours are single requests (the paper's multi figure is shown where it has no other)."
    printf '%-36s %8s %22s\n' "Cryptoserver configuration" Threads Throughput
    local row label config sec threads paper
    for row in "AXL200 only (plaintext):axl200:plain:26:265.73" "AXL200 only (CURVE):axl200:curve:26:265.58" \
               "nFast 300 only (plaintext):nfast300:plain:26:93.20" "nFast 300 only (CURVE):nfast300:curve:26:93.21" \
               "nFast 300 (plaintext, CRT):nfast300-crt:plain:26:299.41" \
               "nFast 300 (CURVE, CRT):nfast300-crt:curve:26:299.34" \
               "Both (plaintext):both:plain:70:354.01" "Both (CURVE):both:curve:70:354.17" \
               "Both (CURVE), per-thread counts:both-per-thread:curve:70:354.17" \
               "Both (plaintext, CRT):both-crt:plain:70:560.60" \
               "Both (CURVE, CRT):both-crt:curve:70:562.25 multi" \
               "SoftHSMv2 only (plaintext):softhsm:plain:$REAL_CLIENTS:" \
               "SoftHSMv2 only (CURVE):softhsm:curve:$REAL_CLIENTS:" \
               "openssl only (plaintext):openssl:plain:$REAL_CLIENTS:" \
               "openssl only (CURVE):openssl:curve:$REAL_CLIENTS:" \
               "gmp only (plaintext):gmp:plain:$REAL_CLIENTS:" "gmp only (CURVE):gmp:curve:$REAL_CLIENTS:" \
               "openssl + SoftHSMv2 (plaintext):openssl+softhsm:plain:$REAL_CLIENTS:" \
               "openssl + SoftHSMv2 (CURVE):openssl+softhsm:curve:$REAL_CLIENTS:"; do
        IFS=: read -r label config sec threads paper <<<"$row"
        printf '%-36s %8s %22s\n' "$label" "$threads" "$(fmt "$(val 3 "$config" remote "$sec" ops_per_s)" "$paper")"
    done
}

# efficiency PAIR-CONFIG A B SECURITY LABEL: the pair over the sum of each alone.
efficiency () {
    local both a b
    both=$(val 3 "$1" remote "$4" ops_per_s) a=$(val 3 "$2" remote "$4" ops_per_s) b=$(val 3 "$3" remote "$4" ops_per_s)
    awk -v x="$both" -v a="$a" -v b="$b" -v label="$5" \
        'BEGIN { printf "two-board efficiency: %.1f%% (%s)\n", 100 * x / (a + b), label }'
}

table4 () {
    echo "Table 4. TLS performance (connections/s): nginx ($TLS_WORKERS workers on CPU ${SERVER_CPUS:-any}), RSA-$TLS_BITS key,"
    echo "         a full handshake per connection (no resumption), $TLS_CLIENTS client threads on CPU ${CLIENT_CPUS:-any},"
    echo "         the broker's openssl board on CPU ${BROKER_CPUS:-any}; ours (the paper's, AXL200, RSA-1024)."
    printf '%-30s %9s %11s %9s  %s\n' "Configuration" "conn/s" "nginx CPUs" "CPU busy" "(paper)"
    local row label name paper
    for row in "key in a file:file:Local AXL200 187.38" \
               "key on our token, CURVE:token-curve:Remote AXL200 (secure) 244.68" \
               "key on our token, plaintext:token-plain:Remote AXL200 (insecure) 261.64"; do
        IFS=: read -r label name paper <<<"$row"
        printf '%-30s %9s %11s %8s%%  %s\n' "$label" "$(val 4 "tls-$name" tls - ops_per_s)" \
            "$(val 4 "tls-$name" tls - server_cpus)" "$(val 4 "tls-$name" tls - server_cpu_busy_pct)" "($paper)"
    done
    awk -v f="$(val 4 tls-file tls - ops_per_s)" -v t="$(val 4 tls-token-curve tls - ops_per_s)" \
        -v b="$(val 4 tls-file tls - server_cpu_busy_pct)" -v cpu="${SERVER_CPUS:-?}" \
        'BEGIN { printf "token (CURVE) / file: %.2f; with its key in a file the server'"'"'s CPU %s was %s%% busy (CPU-bound: %s)\n",
                 t / f, cpu, b, (b + 0 >= 90 ? "yes" : "no") }'
}

plot () {
    local dat=$OUT/plot config
    mkdir -p "$dat"
    for config in axl200 nfast300 nfast300-crt both both-crt softhsm openssl gmp openssl+softhsm; do
        awk -F, -v c="$config" '$1 == "sweep" && $2 == c { print $6, $9 }' "$CSV" > "$dat/$config.dat"
    done
    gnuplot > "$LOGS/gnuplot.log" 2>&1 <<EOT || die "gnuplot failed: $(cat "$LOGS/gnuplot.log")"
set terminal pngcairo size 1400,600 font "sans,11"
set output "$OUT/paper.png"
set multiplot layout 1,2 title "cryptoserver: ops/s against client threads (through the broker, CURVE; every signature verified)"
set grid
set key top left opaque box
set xlabel "client threads"
set ylabel "ops/s"
set title "simulated boards (RSA-1024), the paper's presets"
set logscale x 2
set yrange [0:*]
plot "$dat/axl200.dat" w lp lw 2 t "AXL200 (26 coprocessors)", \
     "$dat/nfast300.dat" w lp lw 2 t "nFast 300", \
     "$dat/nfast300-crt.dat" w lp lw 2 t "nFast 300 CRT", \
     "$dat/both.dat" w lp lw 2 t "AXL200 + nFast 300", \
     "$dat/both-crt.dat" w lp lw 2 t "AXL200 + nFast 300 CRT", \
     265.98 w l dt 2 lc rgb "gray" t "paper: AXL200 (Table 1)", \
     354.01 w l dt 3 lc rgb "gray" t "paper: both (Table 3)", \
     560.60 w l dt 4 lc rgb "gray" t "paper: both, CRT (Table 3)"
set title "real boards on this host ($NCPU CPUs; broker threads per board: $REAL_THREADS), RSA-2048"
plot "$dat/softhsm.dat" w lp lw 2 t "SoftHSMv2", \
     "$dat/openssl.dat" w lp lw 2 t "openssl", \
     "$dat/gmp.dat" w lp lw 2 t "gmp", \
     "$dat/openssl+softhsm.dat" w lp lw 2 t "openssl + SoftHSMv2"
unset multiplot
EOT
}

report () {
    {
        echo "cryptoserver-bench paper: $(date -u '+%Y-%m-%d %H:%M UTC'), $NCPU CPUs ($(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)),"
        echo "${QUICK:+quick mode, }scale $SCALE; client and broker on 127.0.0.1; every signature verified by OpenSSL."
        echo "Simulated boards: $BLOCKS block(s) of about $BLOCK_S s per measurement, threads x count operations"
        echo "shared by the threads; broker threads per board: AXL200 $AXL_THREADS, nFast 300 $NFAST_THREADS, real boards $REAL_THREADS."
        if want 1; then echo; table1; fi
        if want 2; then
            echo
            table2
            echo
            table3
            echo
            efficiency both axl200 nfast300 curve "axl200+nfast300 sim, CURVE"
            efficiency both-crt axl200 nfast300-crt curve "axl200+nfast300 sim CRT, CURVE"
            efficiency openssl+softhsm openssl softhsm curve "openssl+softhsm, CURVE"
            echo "(the paper: Both (insecure) 354.01 of 265.73 + 93.20 ops/s, 98.6%)"
        fi
        if [ -n "$TLS" ]; then
            echo
            table4
        fi
        echo
        echo "CSV: $CSV"
        want 2 && echo "plot: $OUT/paper.png"
        echo "duration: $(elapsed)"
    } > "$TXT"
    cat "$TXT"
}

cleanup () {
    local rc=$?
    nginx_stop
    if [ -f "$D/broker.pid" ]; then "$DEPLOY" --stop "$D" >/dev/null 2>&1 || true; fi
    if [ -z "$KEEP" ] && [ -d "$D" ]; then
        shred -u "$D"/paper/*.pem 2>/dev/null || true
        rm -rf "$D"
    fi
    exit $rc
}

DRY=1
plan
STEPS=$STEP STEP=0 DRY=
trap cleanup EXIT
trap 'exit 130' INT TERM
echo "paper: $STEPS steps; results in $OUT" >&2
plan
mv "$CSV.new" "$CSV"
if want 2; then plot; fi
report
