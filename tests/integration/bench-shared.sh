#!/bin/bash
# bench-shared.sh — `cryptoserver-bench shared-keygen` runs shared RSA key
# generations (three parties in one process) and prints Malkin, Wu and
# Boneh's table beside the seed's row, with the ablation rows; bad options
# are refused.  A smoke test of the benchmark: no speed is asserted.
. "$(dirname "$0")/lib.sh"

mkdir -p "$WORK"
"$CS_BENCH" shared-keygen --bits 512 --runs 2 --ablation > "$WORK/out.txt" 2> "$WORK/progress.txt" \
    || { cat "$WORK/out.txt" "$WORK/progress.txt"; cs_fail "shared-keygen failed"; }
grep -Eq '^ours +512 +1 +[0-9]+ +[0-9]+ +[0-9.]+ s +[0-9.]+ s +[0-9.]+ MB$' "$WORK/out.txt" \
    || { cat "$WORK/out.txt"; cs_fail "no row of ours"; }
grep -q '^seed      512             2          36         119' "$WORK/out.txt" || cs_fail "no seed row"
for off in "sieving off" "batch 1 (no threads)" "no load balancing" "serial trial division"; do
    grep -q "^$off " "$WORK/out.txt" || cs_fail "no ablation row '$off'"
done
[ "$(grep -c 'shared-keygen: .*: run [12]/2: 512 bits' "$WORK/progress.txt")" = 10 ] \
    || { cat "$WORK/progress.txt"; cs_fail "not one progress line per run"; }
rc=0
"$CS_BENCH" shared-keygen --bits 500 > /dev/null 2> "$WORK/bad.txt" || rc=$?
[ "$rc" = 2 ] && grep -q 'a multiple of 64' "$WORK/bad.txt" || cs_fail "--bits 500: status $rc, $(cat "$WORK/bad.txt")"
cs_log "$(sed -n 2p "$WORK/out.txt")"
