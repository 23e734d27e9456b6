#!/bin/bash
# bench-ab.sh — two builds of cryptoserver side by side (issue #19's "within
# 3% of before"): each build tree A and B gets a demo deployment made by its
# own source tree's demo-deploy.sh, with the same two keystore keys (ECDSA
# P-256, RSA-2048) imported into both; then cells alternate A, B, A, B, ...
# (--repeat pairs), only the measured side's broker running, so drift of the
# machine's load hits both alike.  A cell is ECDSA P-256 at 32 threads or
# RSA-2048 (sha256-rsa-pkcs) at 8 threads through that side's module, every
# signature verified with OpenSSL (--verify-key), the broker's CPU read from
# its metrics.  Prints each cell's CSV row of cryptoserver-bench with the
# setup and the 1-minute load average in front, then a table of medians with
# B/A per row.  A benchmark, not a test: run it on a quiet machine.
# man cryptoserver-bench(1), "Two builds side by side".
set -eu

usage () {
    cat <<'EOT'
usage: bench-ab.sh BUILD_A BUILD_B DIR [--seconds S] [--repeat R]
                   [--set KEY=VALUE ...] [--set-a KEY=VALUE ...] [--set-b KEY=VALUE ...]
                   [--bench PROG] [--names A,B]

BUILD_A, BUILD_B  two configured and built build trees (their source trees
                  are read from their Makefiles; A is "before", B "after")
DIR               a new directory for the two deployments (removed at the end)
--seconds S       length of each cell (default 10)
--repeat R        rounds of A then B (default 3; medians reported)
--set KEY=VALUE   a broker.conf key on both sides, written only where that
                  side's broker knows the key (its binary holds the string;
                  an unknown key is skipped with a note)
--set-a, --set-b  the same for one side only
--bench PROG      the cryptoserver-bench of both sides (default B's)
--names A,B       the setup names in the output (default before,after)
By default both sides get broker/worker-nice=0 (where known): the workers
at the reactor's priority, as before issue #19 item 6.
EOT
}

die () { echo "bench-ab.sh: $*" >&2; exit 2; }
[ $# -ge 1 ] || { usage >&2; exit 2; }
case $1 in -h|--help) usage; exit 0;; esac
[ $# -ge 3 ] || { usage >&2; exit 2; }
BA=$(cd "$1" && pwd); BB=$(cd "$2" && pwd); D=$3; shift 3
S=10; R=3; BENCH=; NAMES=before,after
SET_BOTH="broker/worker-nice=0"; SET_A=; SET_B=
while [ $# -gt 0 ]; do
    case $1 in
        --seconds) S=$2; shift 2;;
        --repeat) R=$2; shift 2;;
        --set) SET_BOTH="$SET_BOTH $2"; shift 2;;
        --set-a) SET_A="$SET_A $2"; shift 2;;
        --set-b) SET_B="$SET_B $2"; shift 2;;
        --bench) BENCH=$2; shift 2;;
        --names) NAMES=$2; shift 2;;
        -h|--help) usage; exit 0;;
        *) echo "bench-ab.sh: unknown option $1" >&2; usage >&2; exit 2;;
    esac
done
[ ! -e "$D" ] || die "$D exists; give a new directory"
NAME_A=${NAMES%%,*}; NAME_B=${NAMES#*,}
BENCH=${BENCH:-$BB/tools/cryptoserver-bench}
[ -x "$BENCH" ] || die "no $BENCH (build B first)"
srcdir () { sed -n 's/^abs_top_srcdir = //p' "$1/Makefile"; }
for side in A B; do
    eval "b=\$B$side"
    [ -x "$b/tools/cryptoserver-admin" ] && [ -x "$b/broker/cryptoserver-broker" ] || die "$b: build first"
    s=$(srcdir "$b"); [ -x "$s/tools/demo-deploy.sh" ] || die "$b: no source tree in its Makefile"
    eval "SRC_$side=\$s"
done

mkdir -p "$D"; D=$(cd "$D" && pwd)
# deploy SIDE (A or B): $D/SIDE, made and driven by that side's tree.
dd () { local side=$1; shift; eval "CS_BUILD_DIR=\$B$side \"\$SRC_$side/tools/demo-deploy.sh\" \"\$@\""; }
trap 'for x in A B; do dd $x --stop "$D/$x" >/dev/null 2>&1 || true; done; rm -rf "$D"' EXIT
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$D/ksp256.pem" 2>/dev/null
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$D/ksrsa.pem" 2>/dev/null
for side in A B; do
    eval "b=\$B$side; sets=\"\$SET_BOTH \$SET_$side\""
    dd $side "$D/$side" --endpoint 'tcp://127.0.0.1:!' --metrics-port 0 >/dev/null
    for k in ksp256 ksrsa; do
        openssl pkey -in "$D/$k.pem" -pubout -out "$D/$side/keys/$k.pub.pem"
        "$b/tools/cryptoserver-admin" key import --tenant demo --file "$D/$k.pem" --label $k \
            --dir "$D/$side" >/dev/null
    done
    for kv in $sets; do
        key=${kv%%=*}
        if grep -qaF "$key" "$b/broker/cryptoserver-broker"; then
            "$b/tools/cryptoserver-admin" config set "$D/$side/broker.conf" "$key" "${kv#*=}"
        else
            echo "# side $side: its broker does not know $key; not set" >&2
        fi
    done
done
rm -f "$D/ksp256.pem" "$D/ksrsa.pem"

cpu () { curl -s "$CRYPTOSERVER_METRICS_URL" | awk '/^process_cpu_seconds_total/ { print $2 }'; }
# start SIDE: the other side's broker stopped, this one started, then idle
# (its key pools filled) so that the cells measure signatures only.
start () {
    local other=A; [ "$1" = A ] && other=B
    dd $other --stop "$D/$other" >/dev/null 2>&1 || true
    dd "$1" --start "$D/$1" >/dev/null
    . "$D/$1/env.sh"
    for _ in $(seq 60); do
        a=$(cpu); sleep 1; b=$(cpu)
        awk -v a="$a" -v b="$b" 'BEGIN { exit !(b - a < 0.03) }' && break
    done
}
cell () { # name side key mechanism threads
    local load
    load=$(cut -d' ' -f1 /proc/loadavg)
    SOFTHSM2_CONF=$D/$2/softhsm2.conf "$BENCH" --module "$CRYPTOSERVER_MODULE" --token "$CRYPTOSERVER_TOKEN" \
        --pin "$CRYPTOSERVER_PIN" --key "$3" --mechanism "$4" --threads "$5" --seconds "$S" \
        --verify-key "$D/$2/keys/$3.pub.pem" --csv --metrics "$CRYPTOSERVER_METRICS_URL" 2>/dev/null \
        | tail -1 | sed "s/^/$1,/; s/\$/,$load/"
}
echo "setup,mechanism,key,bits,threads,ops,seconds,ops_per_s,p50_ms,p90_ms,p99_ms,max_ms,verified,failures,broker_cpu_us_per_op,client_cpu_us_per_op,load1"
: > "$D/rows.csv"
for _ in $(seq "$R"); do
    for side in A B; do
        eval "name=\$NAME_$side"
        start $side
        cell "$name" $side ksp256 ecdsa 32 | tee -a "$D/rows.csv"
        cell "$name" $side ksrsa sha256-rsa-pkcs 8 | tee -a "$D/rows.csv"
    done
done
# The medians of each setup and row; B/A of each; a failed signature or a
# cell that printed nothing is said.  load1 is the last column (a --bench
# from before client_cpu_us_per_op prints one column fewer).
awk -F, -v a="$NAME_A" -v b="$NAME_B" '
function median (list,   n, v, i, j, t) {
    n = split (list, v, " ")
    for (i = 2; i <= n; i++) for (j = i; j > 1 && v [j - 1] + 0 > v [j] + 0; j--) { t = v [j]; v [j] = v [j - 1]; v [j - 1] = t }
    return n == 0 ? 0 : (n % 2) ? v [(n + 1) / 2] : (v [n / 2] + v [n / 2 + 1]) / 2
}
{   row = $2 "," $5; rows [row] = 1; k = $1 SUBSEP row
    ops [k] = ops [k] " " $8; p50 [k] = p50 [k] " " $9; us [k] = us [k] " " $15; load [k] = load [k] " " $NF
    fail += $14 }
END {
    printf "# medians of each cell\n# %-8s %-16s %7s %10s %8s %13s %6s %8s\n", "setup", "mechanism", "threads", "ops/s", "p50_ms", "broker_us/op", "load1", "B/A"
    for (row in rows) {
        split (row, rt, ",")
        for (s = 0; s < 2; s++) {
            n = s ? b : a; k = n SUBSEP row
            m [s] = median (ops [k])
            printf "# %-8s %-16s %7s %10.1f %8.3f %13.1f %6.2f %8s\n", n, rt [1], rt [2], m [s], median (p50 [k]),
                   median (us [k]), median (load [k]), s ? sprintf ("%.3f", m [0] ? m [1] / m [0] : 0) : ""
        }
    }
    if (fail) printf "# %d failed signatures\n", fail
}' "$D/rows.csv"
[ "$(wc -l < "$D/rows.csv")" -eq $((R * 4)) ] || echo "# some cells printed no row (bench failed)" >&2
