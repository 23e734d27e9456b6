#!/bin/bash
# bench-lane-share.sh — one tenant's flood against another tenant's Hellos
# (issue 19 item 6), measured as tests/integration/lane-share.sh runs it:
# tenant flood's raw-wire client (tests/integration/cs-wire-flood --sym-pin)
# keeps C associations busy with session-key SymJobs, alternately AES-ECB
# over 16 bytes and AES-CBC over 64 KiB, while tenant quiet's client
# measures its Hello round trips alone and then during the flood, in the
# same run.  Then the flood runs alone (no Hellos) for its throughput.
# Prints each run with the 1-minute load average, and the medians.
# A benchmark, not a test: no speed is asserted.
set -eu

usage () {
    cat <<'EOT'
usage: bench-lane-share.sh DIR [--runs R] [--seconds S] [--connections C] [--hellos H]
                               [--set KEY=VALUE]...

DIR            a deployment made (or reused) by demo-deploy.sh with tenants
               flood and quiet (made here when missing)
--runs R       runs of each kind; the summary shows medians (default 3)
--seconds S    length of each flood (default 8)
--connections  the flood's associations (default 4)
--hellos H     Hellos of tenant quiet before the flood (default 200)
--set K=V      a broker.conf key for every run (e.g. broker/worker-nice=0)
EOT
}

die () { echo "bench-lane-share: error: $*" >&2; exit 1; }
say () { echo "bench-lane-share: $*" >&2; }

SRC_DIR=$(cd "$(dirname "$0")/.." && pwd)
BUILD_DIR=$(cd "${CS_BUILD_DIR:-$SRC_DIR}" && pwd)
export CS_BUILD_DIR=$BUILD_DIR
DEPLOY=$SRC_DIR/tools/demo-deploy.sh
ADMIN=$BUILD_DIR/tools/cryptoserver-admin
FLOOD=$BUILD_DIR/tests/integration/cs-wire-flood

[ $# -ge 1 ] || { usage >&2; exit 2; }
DIR=$1
shift
RUNS=3 SECONDS_RUN=8 CONNECTIONS=4 HELLOS=200 SETS=()
while [ $# -gt 0 ]; do
    case $1 in
        --runs) RUNS=$2; shift 2 ;;
        --seconds) SECONDS_RUN=$2; shift 2 ;;
        --connections) CONNECTIONS=$2; shift 2 ;;
        --hellos) HELLOS=$2; shift 2 ;;
        --set) SETS+=("$2"); shift 2 ;;
        -h|--help) usage; exit 0 ;;
        *) usage >&2; exit 2 ;;
    esac
done
[ -x "$FLOOD" ] || die "$FLOOD is not built (make tests/integration/cs-wire-flood)"

[ -f "$DIR/clients/quiet/client.cert" ] \
    || "$DEPLOY" "$DIR" --endpoint 'tcp://127.0.0.1:!' --metrics-port 0 --tenant flood --tenant quiet >/dev/null
DIR=$(cd "$DIR" && pwd)
# shellcheck disable=SC1091
. "$DIR/env.sh"
for kv in "${SETS[@]}"; do "$ADMIN" config set "$DIR/broker.conf" "${kv%%=*}" "${kv#*=}"; done

# median: the median of the numbers on standard input.
median () { sort -g | awk '{ v [NR] = $1 } END { print (NR % 2) ? v [(NR + 1) / 2] : (v [NR / 2] + v [NR / 2 + 1]) / 2 }'; }
load1 () { cut -d' ' -f1 /proc/loadavg; }
field () { sed -n "s/.* $1=\([0-9.]*\).*/\1/p"; }

RESULTS=$(mktemp)
trap 'rm -f "$RESULTS"; "$DEPLOY" --stop "$DIR" >/dev/null 2>&1 || true' EXIT
"$DEPLOY" --start "$DIR" >/dev/null
ENDPOINT=$(cat "$DIR/broker.endpoint")
flood () {
    "$FLOOD" --sym-pin "$CRYPTOSERVER_PIN" --connections "$CONNECTIONS" --seconds "$SECONDS_RUN" \
        --hellos "$HELLOS" --endpoint "$ENDPOINT" --broker-cert "$DIR/broker.cert" \
        --client-cert "$DIR/clients/flood/client.cert" "$@" | grep '^cs-wire-flood: sym summary '
}
for run in $(seq 1 "$RUNS"); do
    row=$(flood --probe-cert "$DIR/clients/quiet/client.cert") || die "run $run: cs-wire-flood failed"
    quiet=$(field quiet-p50-us <<<"$row") busy=$(field flood-p50-us <<<"$row") load=$(load1)
    echo "probe $quiet $busy $load" >> "$RESULTS"
    say "run $run: Hello p50 quiet $quiet us, during the flood $busy us ($(awk -v a="$busy" -v b="$quiet" \
        'BEGIN { printf "%.1f", a / b }')x), load $load"
done
for run in $(seq 1 "$RUNS"); do
    row=$(flood) || die "alone run $run: cs-wire-flood failed"
    rate=$(field jobs-per-s <<<"$row") load=$(load1)
    echo "alone $rate $load" >> "$RESULTS"
    say "alone run $run: $rate jobs/s, load $load"
done
q=$(awk '$1 == "probe" { print $2 }' "$RESULTS" | median)
b=$(awk '$1 == "probe" { print $3 }' "$RESULTS" | median)
lp=$(awk '$1 == "probe" { print $4 }' "$RESULTS" | median)
r=$(awk '$1 == "alone" { print $2 }' "$RESULTS" | median)
la=$(awk '$1 == "alone" { print $3 }' "$RESULTS" | median)
echo "bench-lane-share: medians of $RUNS: Hello p50 quiet $q us, during the flood $b us" \
     "($(awk -v a="$b" -v c="$q" 'BEGIN { printf "%.1f", a / c }')x, load $lp);" \
     "flood alone $r jobs/s (load $la)"
