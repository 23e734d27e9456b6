#!/bin/bash
# bench-side-by-side.sh — smoke test of tools/bench-side-by-side.sh --latency
# (issue #25): 1-second cells of 1-thread ECDSA P-256 (SoftHSM directly,
# p11-kit remoting when p11-kit-client.so is installed, ours), every row
# with client_cpu_us_per_op last, then, after the CSV, issue #25's table as
# Markdown with the added-p50 rows over tcp and ipc, and under it the
# transport floor and the CPU per op.  Asserts the shape, never a speed.
# man cryptoserver-bench(1), "Side by side with SoftHSM and p11-kit".
. "$(dirname "$0")/lib.sh"

cs_require openssl curl softhsm2-util pkcs11-tool
rm -rf "$WORK"
mkdir -p "$WORK"
OUT=$WORK/out.txt
timeout $((300 * CS_TIME_FACTOR)) "$top_srcdir/tools/bench-side-by-side.sh" "$WORK/deploy" --seconds 1 --latency \
    > "$OUT" 2> "$WORK/err.txt" \
    || { cat "$OUT"; tail -n 20 "$WORK/err.txt"; cs_fail "bench-side-by-side.sh --latency failed"; }
cat "$OUT"
[ ! -e "$WORK/deploy" ] || cs_fail "the deployment was left behind"

# The CSV: a header and one 16-column row per setup, no failures, a number
# for the client's CPU per op (the last column), "-" for the broker's on
# rows that do not go through it.
head -n 1 "$OUT" | grep -qx 'setup,mechanism,key,bits,threads,ops,seconds,ops_per_s,p50_ms,p90_ms,p99_ms,max_ms,verified,failures,broker_cpu_us_per_op,client_cpu_us_per_op' \
    || cs_fail "no CSV header ending in broker_cpu_us_per_op,client_cpu_us_per_op"
setups="softhsm-direct ours-softhsm ours-keystore ours-keystore-ipc"
P11KIT=$(command -v p11-kit >/dev/null && ls /usr/lib/*/pkcs11/p11-kit-client.so 2>/dev/null | head -1 || true)
[ -z "$P11KIT" ] || setups="$setups p11kit-remote"
for s in $setups; do
    awk -F, -v s="$s" '$1 == s && $2 == "ecdsa" && $5 == 1 && NF == 16 && $14 == 0 && $16 ~ /^[0-9]+\.[0-9]$/ \
        && ($15 ~ /^[0-9]+\.[0-9]$/) == (s ~ /^ours/) { n++ } END { exit n != 1 }' "$OUT" \
        || cs_fail "no single complete 1-thread ECDSA row of $s"
done
grep -q '^[a-z-]*,sha256-rsa-pkcs,' "$OUT" && cs_fail "--latency ran RSA rows"
grep -q '^ours-stuck-board,' "$OUT" && cs_fail "--latency ran the stuck board"

# The table comes after every CSV row, and only "#" lines follow it.
table=$(grep -n '^| | ours | compared with | ratio | goal |$' "$OUT" | cut -d: -f1)
[ -n "$table" ] || cs_fail "no table header '| | ours | compared with | ratio | goal |'"
last_csv=$(grep -vn '^[#|]' "$OUT" | tail -n 1 | cut -d: -f1)
[ "$last_csv" -lt "$table" ] || cs_fail "a CSV row after the table (line $last_csv)"
tail -n +"$table" "$OUT" | grep -qv '^[#|]' && cs_fail "a line after the table that is neither '|' nor '#'"
sed -n "$((table + 1))p" "$OUT" | grep -qx '|---|---|---|---|---|' || cs_fail "no Markdown separator under the table header"
ratio='[0-9]+\.[0-9]{2}×'
[ -n "$P11KIT" ] || ratio='\?×'
for via in "ours-keystore −" "ours-keystore-ipc −"; do
    grep -F "| ECDSA P-256, 1 thread: added p50, µs ($via softhsm-direct vs p11kit-remote − softhsm-direct)" "$OUT" \
        | grep -Eq "^\|[^|]+\| -?[0-9]+ µs [^|]+\| [^|]+ \| $ratio \| ≤ 0\.5× \((met|not met|\?)\) \|$" \
        || cs_fail "no added-p50 row of ${via% −} in the table"
done
[ "$(grep -c '^| ' "$OUT")" = 3 ] || cs_fail "--latency: not the header and two rows in the table"
grep -Eq '^# transport floor .*unix socket pair [0-9.]+ µs, zmq-tcp [0-9.]+ µs, zmq-curve [0-9.]+ µs, zmq-ipc [0-9.]+ µs$' "$OUT" \
    || cs_fail "no transport floor line under the table"
grep -Eq '^#   ECDSA P-256, 1 thread: softhsm-direct client [0-9.]+;.* ours-keystore client [0-9.]+, broker [0-9.]+' "$OUT" \
    || cs_fail "no CPU per op line under the table"
cs_log "table printed after $(grep -c '^[a-z]' "$OUT") CSV lines, with the transport floor and the CPU per op"
