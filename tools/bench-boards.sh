#!/bin/bash
# bench-boards.sh — compares boards on the same key with cryptoserver-bench:
# one demo deployment (tools/demo-deploy.sh), one keystore RSA key, and for
# each board under test a broker configured so that this board, and only it,
# takes key material (the others get key-material = false or are left out),
# so every signature of the run is made by that board.  The broker's stats
# lines are checked after each run: a job on another board fails the script.
# Prints one table: median ops/s and median p50 latency over the repeats,
# per board and thread count, and each board's ratio to the first one.
# A benchmark, not a test: no speed is asserted.  man cryptoserver-bench(1).
set -eu

usage () {
    cat <<'EOT'
usage: bench-boards.sh DIR [--boards "cpu gmp"] [--threads "1 8"] [--seconds S | --count N]
                           [--repeat R] [--bits B] [--board-threads T]

DIR              a deployment made (or reused) by demo-deploy.sh; the script
                 adds a gmp board (T threads), sets keys/pool-* to 0 and the
                 SoftHSM boards to key-material = false, and imports one RSA
                 key "bench-rsaB" into tenant demo's keystore (once)
--boards         boards to compare, by name: cpu (openssl) and gmp (default)
--threads        client threads per run (default "1 8")
--seconds S      length of each run (default 5); --count N signatures per thread
--repeat R       runs per board and thread count; the table shows medians (default 3)
--bits B         RSA modulus bits (default 2048)
--board-threads  worker threads of each compared board (default 2)
EOT
}

die () { echo "bench-boards: error: $*" >&2; exit 1; }
say () { echo "bench-boards: $*" >&2; }

SRC_DIR=$(cd "$(dirname "$0")/.." && pwd)
BUILD_DIR=$(cd "${CS_BUILD_DIR:-$SRC_DIR}" && pwd)
export CS_BUILD_DIR=$BUILD_DIR
DEPLOY=$SRC_DIR/tools/demo-deploy.sh
ADMIN=$BUILD_DIR/tools/cryptoserver-admin
BENCH=$BUILD_DIR/tools/cryptoserver-bench

DIR= BOARDS="cpu gmp" THREADS="1 8" SECONDS_RUN=5 COUNT= REPEAT=3 BITS=2048 BOARD_THREADS=2
while [ $# -gt 0 ]; do
    case $1 in
        -h|--help) usage; exit 0 ;;
        --boards) BOARDS=$2; shift ;;
        --threads) THREADS=$2; shift ;;
        --seconds) SECONDS_RUN=$2; COUNT=; shift ;;
        --count) COUNT=$2; SECONDS_RUN=; shift ;;
        --repeat) REPEAT=$2; shift ;;
        --bits) BITS=$2; shift ;;
        --board-threads) BOARD_THREADS=$2; shift ;;
        -*) usage >&2; exit 2 ;;
        *) [ -z "$DIR" ] || { usage >&2; exit 2; }; DIR=$1 ;;
    esac
    shift
done
[ -n "$DIR" ] || { usage >&2; exit 2; }
[ -x "$BENCH" ] || die "$BENCH not built"
for board in $BOARDS; do
    case $board in cpu|gmp) ;; *) die "unknown board '$board' (cpu, gmp)" ;; esac
done

"$DEPLOY" "$DIR" --endpoint 'tcp://127.0.0.1:!' --metrics-port 0 >/dev/null
DIR=$(cd "$DIR" && pwd)
CONF=$DIR/broker.conf
KEY=bench-rsa$BITS
PUB=$DIR/keys/$KEY.pub.pem
# shellcheck disable=SC1091
. "$DIR/env.sh"

conf () { "$ADMIN" config set "$CONF" "$1" "$2"; }

# prepare: the SoftHSM boards keep their resident keys but take no material;
# no key pool (its refills would run on cpu while gmp is measured).
prepare () {
    local b
    for b in board0 board1; do conf "drivers/$b/key-material" false; done
    for b in 2048 3072 4096; do conf "keys/pool-rsa-$b" 0; done
    if [ ! -f "$PUB" ]; then
        local tmp
        tmp=$(mktemp -d "$DIR/keys/.bench.XXXXXX")
        openssl genpkey -algorithm RSA -pkeyopt "rsa_keygen_bits:$BITS" -out "$tmp/key.pem" 2>/dev/null
        openssl pkey -in "$tmp/key.pem" -pubout -out "$tmp/pub.pem"
        "$ADMIN" key import --dir "$DIR" --tenant demo --file "$tmp/key.pem" --label "$KEY" >/dev/null \
            || { shred -u "$tmp/key.pem"; die "key import failed"; }
        shred -u "$tmp/key.pem"
        mv "$tmp/pub.pem" "$PUB"
        rmdir "$tmp"
        say "imported $KEY into tenant demo's keystore (public key $PUB)"
    fi
}

# route_to BOARD: only BOARD takes key material (cpu keeps generating).
route_to () {
    "$ADMIN" board remove gmp --dir "$DIR" >/dev/null 2>&1 || true
    if [ "$1" = gmp ]; then
        "$ADMIN" board add gmp --dir "$DIR" --type gmp --threads "$BOARD_THREADS" >/dev/null
        conf drivers/cpu/key-material false
    else
        conf drivers/cpu/key-material true
    fi
    conf drivers/cpu/threads "$BOARD_THREADS"
}

# jobs_of BOARD: jobs in the last stats line of BOARD.
jobs_of () {
    sed -n "s/.*stats board=$1 jobs=\([0-9][0-9]*\).*/\1/p" "$DIR/broker.log" | tail -n 1
}

# median: the median of the numbers on standard input.
median () { sort -g | awk '{ v [NR] = $1 } END { print (NR % 2) ? v [(NR + 1) / 2] : (v [NR / 2] + v [NR / 2 + 1]) / 2 }'; }

prepare
RESULTS=$(mktemp)
trap 'rm -f "$RESULTS"; "$DEPLOY" --stop "$DIR" >/dev/null 2>&1 || true' EXIT
for board in $BOARDS; do
    route_to "$board"
    : > "$DIR/broker.log"
    "$DEPLOY" --start "$DIR" >/dev/null
    grep -h "gmp gmp: GMP" "$DIR/broker.log" | sed 's/.*gmp gmp:/bench-boards: gmp board:/' >&2 || true
    signed=0
    for threads in $THREADS; do
        for run in $(seq 1 "$REPEAT"); do
            args=(--threads "$threads")
            if [ -n "$COUNT" ]; then args+=(--count "$COUNT"); else args+=(--seconds "$SECONDS_RUN"); fi
            row=$("$BENCH" --module "$CRYPTOSERVER_MODULE" --token demo --pin "$CRYPTOSERVER_PIN" \
                      --key "$KEY" --verify-key "$PUB" --csv "${args[@]}" | tail -n 1) \
                || die "$board, $threads threads: cryptoserver-bench failed"
            IFS=, read -r _ _ _ _ ops _ rate p50 _ _ _ _ failures _ <<<"$row"
            [ "$failures" = 0 ] || die "$board: $failures failed signatures"
            signed=$((signed + ops))
            echo "$board $threads $rate $p50" >> "$RESULTS"
            say "$board, $threads threads, run $run: $rate ops/s, p50 $p50 ms"
        done
    done
    "$DEPLOY" --stop "$DIR" >/dev/null
    [ "$(jobs_of "$board")" = "$signed" ] \
        || die "board $board ran $(jobs_of "$board") jobs, not the $signed signatures of its runs"
    for other in board0 board1 cpu gmp; do
        [ "$other" = "$board" ] || [ "$(jobs_of "$other")" = 0 ] || [ -z "$(jobs_of "$other")" ] \
            || die "board $other ran $(jobs_of "$other") jobs during the $board runs"
    done
done

first=${BOARDS%% *}
printf '\nRSA-%s signatures (CKM_SHA256_RSA_PKCS), key %s, %s worker threads per board, median of %s runs\n' \
    "$BITS" "$KEY" "$BOARD_THREADS" "$REPEAT"
printf '%-6s %7s %10s %9s %12s %12s\n' board threads ops/s "p50 ms" "ops/s ratio" "p50 ratio"
for threads in $THREADS; do
    base_rate=$(awk -v b="$first" -v t="$threads" '$1 == b && $2 == t { print $3 }' "$RESULTS" | median)
    base_p50=$(awk -v b="$first" -v t="$threads" '$1 == b && $2 == t { print $4 }' "$RESULTS" | median)
    for board in $BOARDS; do
        rate=$(awk -v b="$board" -v t="$threads" '$1 == b && $2 == t { print $3 }' "$RESULTS" | median)
        p50=$(awk -v b="$board" -v t="$threads" '$1 == b && $2 == t { print $4 }' "$RESULTS" | median)
        awk -v b="$board" -v t="$threads" -v r="$rate" -v p="$p50" -v br="$base_rate" -v bp="$base_p50" \
            'BEGIN { printf "%-6s %7s %10.1f %9.3f %12.2f %12.2f\n", b, t, r, p, r / br, p / bp }'
    done
done
