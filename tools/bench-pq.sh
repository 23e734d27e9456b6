#!/bin/bash
# bench-pq.sh — post-quantum operations through the broker beside the
# classic ones, in one run (issue #23's table): ML-DSA-65 signatures and
# ML-KEM-768 decapsulations (cryptoserver-bench pq) at 1 and 32 threads,
# beside ECDSA P-256 and RSA-2048 signatures (cryptoserver-bench) at 1 and
# 32 threads, and P-256 with one thread keeping N signatures in flight
# through PKCS#11 3.2 asynchronous sessions (--async N) beside 32 threads.
# It makes a demo deployment in DIR (tools/demo-deploy.sh, free ports) with
# a pq board (docs/PQ-DRIVER.md), runs every cell, stops the broker and
# removes DIR.  Client, broker and boards share the machine's cores: run
# it on a quiet machine.  See cryptoserver-bench(1), "Post-quantum".
set -eu

usage () {
    cat <<'EOT'
usage: bench-pq.sh DIR [--count N] [--seconds S] [--async N]
DIR          a new directory for the demo deployment (removed at the end)
--count N    operations per thread of each post-quantum cell (default 200)
--seconds S  length of each classic cell (default 3)
--async N    signatures in flight from one thread in the async row (default 64)
Needs a build with the pq driver (cargo; CS_BUILD_DIR, default SRC/_build).
Prints one line per cell: operation, threads (async-N: one thread, N in flight),
ops/s, p50 ms, failed operations.
EOT
}
[ $# -ge 1 ] || { usage >&2; exit 2; }
case $1 in -h|--help) usage; exit 0;; esac
D=$1; shift
N=200 S=3 ASYNC=64
while [ $# -gt 0 ]; do
    case $1 in
        --count) N=$2; shift 2;;
        --seconds) S=$2; shift 2;;
        --async) ASYNC=$2; shift 2;;
        -h|--help) usage; exit 0;;
        *) echo "bench-pq.sh: unknown option $1" >&2; usage >&2; exit 2;;
    esac
done
[ ! -e "$D" ] || { echo "bench-pq.sh: $D exists; give a new directory" >&2; exit 2; }
SRC=$(cd "$(dirname "$0")/.." && pwd)
export CS_BUILD_DIR=${CS_BUILD_DIR:-$SRC/_build}
B=$CS_BUILD_DIR/tools/cryptoserver-bench
A=$CS_BUILD_DIR/tools/cryptoserver-admin
[ -x "$B" ] && [ -x "$A" ] || { echo "bench-pq.sh: build first (no $B)" >&2; exit 2; }
[ -e "$CS_BUILD_DIR/shim-drivers/.libs/pq.so" ] \
    || { echo "bench-pq.sh: no pq driver in $CS_BUILD_DIR (configure found no cargo?)" >&2; exit 2; }

"$SRC/tools/demo-deploy.sh" "$D" --endpoint 'tcp://127.0.0.1:!' --metrics-port 0 >/dev/null
trap '"$SRC/tools/demo-deploy.sh" --stop "$D" >/dev/null 2>&1 || true; rm -rf "$D"' EXIT
"$SRC/tools/demo-deploy.sh" --stop "$D" >/dev/null 2>&1 || true
"$A" board add pqc --dir "$D" --type pq --threads 2 >/dev/null
"$SRC/tools/demo-deploy.sh" --start "$D" >/dev/null
. "$D/env.sh"
export SOFTHSM2_CONF=$D/softhsm2.conf

echo "operation,threads,ops_per_s,p50_ms,failures   (load at start: $(cut -d' ' -f1-3 /proc/loadavg))"
# One line of a --csv result (header, then rows) as LABEL,threads,ops/s,p50,failures.
row () { # label
    awk -F, -v l="$1" 'NR == 1 { for (i = 1; i <= NF; i++) c [$i] = i; next }
        { printf "%s,%s,%s,%s,%s\n", l, $c["threads"], $c["ops_per_s"], $c["p50_ms"], $c["failures"] }'
}
pq () { # op threads
    "$B" pq --op "$1" --threads "$2" --count "$N" --csv 2>/dev/null | row "$1"
}
classic () { # label key mechanism threads [more options]
    local label=$1 key=$2 mech=$3 t=$4; shift 4
    "$B" --module "$CRYPTOSERVER_MODULE" --token "$CRYPTOSERVER_TOKEN" --pin "$CRYPTOSERVER_PIN" \
        --key "$key" --mechanism "$mech" --threads "$t" --seconds "$S" --verify --csv "$@" 2>/dev/null \
        | row "$label"
}
for t in 1 32; do
    pq ml-dsa-65-sign "$t"
    pq ml-kem-768-decapsulate "$t"
    classic ecdsa-p256 p256 ecdsa-sha256 "$t"
    classic rsa-2048 rsa2048 sha256-rsa-pkcs "$t"
done
classic ecdsa-p256 p256 ecdsa-sha256 32 --async "$ASYNC"
