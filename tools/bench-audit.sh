#!/bin/bash
# bench-audit.sh — the cost of the audit log (cryptoserver-audit(5)): ECDSA
# P-256 signatures at 32 threads through cryptoserver with the audit on and
# off, alternating in one run (the broker restarted with audit/enabled 1 or
# 0 before each cell, so drift of the machine's load hits both alike), the
# same key (board0's p256 on the demo's SoftHSM boards), every signature
# verified.  Prints the CSV rows of cryptoserver-bench with the setting in
# front, then the median ops/s and broker CPU per op of each, their ratios,
# the spread of each setting's cells, and the load average before and after.  The pairs alternate which setting
# goes first (on off, off on, ...) so that a trend in the load does not favour
# one.  A benchmark, not a test: run it on a quiet machine.
# man cryptoserver-bench(1).
set -eu

usage () {
    cat <<'EOT'
usage: bench-audit.sh DIR [--seconds S] [--repeat R] [--threads T] [--key K]

DIR          a new directory for the demo deployment (removed at the end)
--seconds S  length of each cell (default 5)
--repeat R   pairs of cells (default 3; medians reported)
--threads T  client threads (default 32)
--key K      p256 (board key, default) or ksp256 (a keystore key)
Environment: CS_BUILD_DIR  the build tree (default SRC/_build)
EOT
}

[ $# -ge 1 ] || { usage >&2; exit 2; }
case $1 in -h|--help) usage; exit 0;; esac
D=$1; shift
S=5; R=3; T=32; K=p256
while [ $# -gt 0 ]; do
    case $1 in
        --seconds) S=$2; shift 2;;
        --repeat) R=$2; shift 2;;
        --threads) T=$2; shift 2;;
        --key) K=$2; shift 2;;
        -h|--help) usage; exit 0;;
        *) echo "bench-audit.sh: unknown option $1" >&2; usage >&2; exit 2;;
    esac
done
[ ! -e "$D" ] || { echo "bench-audit.sh: $D exists; give a new directory" >&2; exit 2; }
SRC=$(cd "$(dirname "$0")/.." && pwd)
export CS_BUILD_DIR=${CS_BUILD_DIR:-$SRC/_build}
B=$CS_BUILD_DIR/tools/cryptoserver-bench
A=$CS_BUILD_DIR/tools/cryptoserver-admin
[ -x "$B" ] && [ -x "$A" ] || { echo "bench-audit.sh: build first (no $B)" >&2; exit 2; }

"$SRC/tools/demo-deploy.sh" "$D" --endpoint 'tcp://127.0.0.1:!' --metrics-port 0 >/dev/null
trap '"$SRC/tools/demo-deploy.sh" --stop "$D" >/dev/null 2>&1 || true; rm -rf "$D"' EXIT
if [ "$K" = ksp256 ]; then
    openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$D/ksp256.pem" 2>/dev/null
    openssl pkey -in "$D/ksp256.pem" -pubout -out "$D/keys/ksp256.pub.pem"
    "$A" key import --tenant demo --file "$D/ksp256.pem" --label ksp256 --dir "$D" >/dev/null
    rm -f "$D/ksp256.pem"
fi
cpu () { curl -s "$CRYPTOSERVER_METRICS_URL" | awk '/^process_cpu_seconds_total/ { print $2 }'; }
# audit ON: the broker restarted with audit/enabled ON (1 or 0), then idle.
audit () {
    "$SRC/tools/demo-deploy.sh" --stop "$D" >/dev/null 2>&1 || true
    "$A" config set "$D/broker.conf" audit/enabled "$1"
    "$SRC/tools/demo-deploy.sh" --start "$D" >/dev/null
    . "$D/env.sh"
    for _ in $(seq 60); do
        a=$(cpu); sleep 1; b=$(cpu)
        awk -v a="$a" -v b="$b" 'BEGIN { exit !(b - a < 0.03) }' && break
    done
}
cell () { # label
    SOFTHSM2_CONF=$D/softhsm2.conf "$B" --module "$CRYPTOSERVER_MODULE" --token "$CRYPTOSERVER_TOKEN" \
        --pin "$CRYPTOSERVER_PIN" --key "$K" --mechanism ecdsa --threads "$T" --seconds "$S" \
        --verify-key "$D/keys/$K.pub.pem" --csv --metrics "$CRYPTOSERVER_METRICS_URL" 2>/dev/null \
        | tail -1 | sed "s/^/$1,/"
}
echo "audit,mechanism,key,bits,threads,ops,seconds,ops_per_s,p50_ms,p90_ms,p99_ms,max_ms,verified,failures,broker_cpu_us_per_op,client_cpu_us_per_op"
: > "$D/rows.csv"
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
for r in $(seq "$R"); do
    for on in $([ $((r % 2)) = 1 ] && echo 1 0 || echo 0 1); do
        audit $on
        cell "$([ $on = 1 ] && echo on || echo off)" | tee -a "$D/rows.csv"
    done
done
LOAD1=$(cut -d' ' -f1-3 /proc/loadavg)
median () { # setting column
    awk -F, -v s="$1" -v c="$2" '$1 == s && $c != "" { print $c }' "$D/rows.csv" | sort -n \
        | awk '{ v [NR] = $1 } END { if (!NR) print "?"; else print (NR % 2) ? v [(NR + 1) / 2] : (v [NR / 2] + v [NR / 2 + 1]) / 2 }'
}
ratio () { awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.3f", a / b; else print "?" }'; }
ON=$(median on 8); OFF=$(median off 8)
CON=$(median on 15); COFF=$(median off 15)
echo "# median ops/s: audit on $ON, off $OFF; on/off = $(ratio "$ON" "$OFF")"
echo "# median broker CPU us/op: audit on $CON, off $COFF; on/off = $(ratio "$CON" "$COFF")"
# The spread of a setting's cells, (max - min) / median: an on/off ratio
# nearer 1 than that is not a difference this run could see.
spread () { awk -F, -v s="$1" -v m="$2" '$1 == s { v = $8 + 0; if (n++ == 0 || v < lo) lo = v; if (v > hi) hi = v }
    END { if (n && m + 0 > 0) printf "%.1f%%", 100 * (hi - lo) / m; else print "?" }' "$D/rows.csv"; }
echo "# spread of the cells' ops/s: audit on $(spread on "$ON"), off $(spread off "$OFF")"
echo "# load average (1 5 15 min): before $LOAD0, after $LOAD1"
if [ -f "$D/keystore.db" ]; then
    echo "# audit rows written: $(sqlite3 "$D/keystore.db" 'SELECT count (*) FROM audit' 2>/dev/null || echo '?')"
fi
