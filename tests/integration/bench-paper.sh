#!/bin/bash
# bench-paper.sh — smoke test of `cryptoserver-bench paper` (tools/bench-paper.sh):
# --quick at a tiny scale, so every table is made through every path (each
# board through its driver, brokers with the simulated and real boards in
# plaintext and CURVE, nginx with its key in a file and on the token) with
# every signature verified by OpenSSL (the bench exits non-zero otherwise),
# and the broker's stats lines matching the signatures of each run (the
# script fails otherwise).  Asserts what was produced, never a speed:
# Tables 1-4 in paper.txt with the paper's figures beside ours, the three
# "two-board efficiency: NN.N% (PAIR)" lines, a CSV with rows of every table
# and of the plot's sweep, a PNG, progress lines while it ran, only the
# expected warnings in the brokers' logs, and no broker or nginx left
# running.
. "$(dirname "$0")/lib.sh"

cs_require openssl gnuplot softhsm2-util pkcs11-tool python3
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
[ -x "$NGINX" ] || cs_missing_dependency "nginx not installed (nginx-light)"
openssl engine -t pkcs11 >/dev/null 2>&1 || cs_missing_dependency "OpenSSL engine pkcs11 not available"
rm -rf "$WORK"
mkdir -p "$WORK"
OUT=$WORK/out

# The work folder is under the build tree; the run's deployment is OUT/deploy.
"$CS_BENCH" paper --quick --scale 0.3 --out "$OUT" > "$WORK/stdout.txt" 2> "$WORK/stderr.txt" \
    || { tail -n 30 "$WORK/stderr.txt"; cs_fail "cryptoserver-bench paper --quick failed"; }
cs_log "cryptoserver-bench paper --quick ran: $(grep -c '^paper: \[' "$WORK/stderr.txt") progress lines"

# Progress: numbered steps with the elapsed time, to the last one.
grep -Eq '^paper: \[1/[0-9]+, 0m[0-9]{2}s\] deployment' "$WORK/stderr.txt" || cs_fail "no first progress line"
last=$(grep -E '^paper: \[[0-9]+/[0-9]+,' "$WORK/stderr.txt" | tail -n 1 | sed 's/^paper: \[\([0-9]*\)\/\([0-9]*\),.*/\1 \2/')
read -r done_steps all_steps <<<"$last"
[ "$done_steps" = "$all_steps" ] && [ "$all_steps" -gt 50 ] || cs_fail "progress stopped at $last"

# The tables, each with the paper's figures beside ours.
TXT=$OUT/paper.txt
cmp -s "$TXT" "$WORK/stdout.txt" || cs_fail "stdout is not paper.txt"
for table in 1 2 3 4; do
    grep -q "^Table $table\. " "$TXT" || cs_fail "no Table $table in paper.txt"
done
grep -Eq '^AXL200 \(sim\) +25 +[0-9]+\.[0-9]{2} \(265\.98\) ' "$TXT" || cs_fail "Table 1: no AXL200 25-thread row with the paper's 265.98"
grep -Eq '^nFast 300 \(sim\) +10 +[0-9.]+ \(92\.40\) +[0-9.]+ \(288\.92\)$' "$TXT" \
    || cs_fail "Table 1: no nFast 300 10-thread row with the paper's 92.40 and 288.92"
grep -Eq '^  AXL200 only \(CURVE\) +[0-9.]+ \(94\.12\) +[0-9.]+ \(10\.62\)' "$TXT" \
    || cs_fail "Table 2: no remote AXL200 CURVE row with the paper's 94.12 ms and 10.62 ops/s"
grep -Eq '^Both \(plaintext, CRT\) +70 +[0-9.]+ \(560\.60\)$' "$TXT" || cs_fail "Table 3: no Both (plaintext, CRT) row"
grep -Eq '^openssl \+ SoftHSMv2 \(CURVE\) +8 +[0-9.]+$' "$TXT" || cs_fail "Table 3: no openssl + SoftHSMv2 row"
grep -Eq '^key on our token, CURVE +[0-9.]+ +[0-9.]+ +[0-9-]+%  \(Remote AXL200 \(secure\) 244\.68\)$' "$TXT" \
    || cs_fail "Table 4: no token (CURVE) row with the paper's 244.68"
grep -Eq '^token \(CURVE\) / file: [0-9]+\.[0-9]{2}; ' "$TXT" || cs_fail "Table 4: no token / file ratio"

# The efficiency lines: one per pair, NN.N% each.
grep -E '^two-board efficiency: ' "$TXT" > "$WORK/efficiency.txt" || true
[ "$(wc -l < "$WORK/efficiency.txt")" = 3 ] || cs_fail "not 3 efficiency lines: $(cat "$WORK/efficiency.txt")"
for pair in 'axl200\+nfast300 sim, CURVE' 'axl200\+nfast300 sim CRT, CURVE' 'openssl\+softhsm, CURVE'; do
    grep -Eq "^two-board efficiency: [0-9]{1,3}\.[0-9]% \($pair\)\$" "$WORK/efficiency.txt" \
        || cs_fail "no parsable efficiency line for $pair: $(cat "$WORK/efficiency.txt")"
done
cs_log "efficiency lines: $(tr '\n' ';' < "$WORK/efficiency.txt")"

# The CSV: its header, rows of every table and of the sweep, numbers where numbers go.
CSV=$OUT/paper.csv
head -n 1 "$CSV" | grep -qx 'table,config,path,security,crt,threads,ops,seconds,ops_per_s,p50_ms,p99_ms,mean_latency_ms,server_cpus,server_cpu_busy_pct' \
    || cs_fail "paper.csv: unexpected header: $(head -n 1 "$CSV")"
for table in 1 2 3 sweep 4; do
    [ "$(awk -F, -v t="$table" '$1 == t' "$CSV" | wc -l)" -gt 0 ] || cs_fail "paper.csv: no rows of table $table"
done
awk -F, 'NR > 1 && ($9 !~ /^[0-9]+(\.[0-9]+)?$/ || $9 <= 0 || NF != 14) { bad = 1 } END { exit bad }' "$CSV" \
    || cs_fail "paper.csv: a row without a positive ops/s or with the wrong number of fields"
for config in axl200 nfast300 nfast300-crt both both-crt softhsm openssl gmp openssl+softhsm; do
    awk -F, -v c="$config" '$1 == "sweep" && $2 == c { n++ } END { exit n < 3 }' "$CSV" \
        || cs_fail "paper.csv: fewer than 3 sweep points for $config"
done

# The plot: a PNG image of some size.
PNG=$OUT/paper.png
[ "$(head -c 8 "$PNG" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] || cs_fail "paper.png is not a PNG"
[ "$(stat -c %s "$PNG")" -gt 20000 ] || cs_fail "paper.png is suspiciously small"

# The brokers: only the plaintext runs' warning; nothing left running.
LOG=$OUT/logs/broker.log
grep -q 'stats board=axl jobs=' "$LOG" || cs_fail "the brokers' logs were not kept"
unexpected=$(grep -E '^(W|E|F): ' "$LOG" | grep -v 'CURVE IS DISABLED' | head -n 5)
[ -z "$unexpected" ] || cs_fail "unexpected warnings or errors in the brokers' logs: $unexpected"
[ ! -d "$OUT/deploy" ] || cs_fail "the deployment was kept without --keep"
if pgrep -f "$OUT/" >/dev/null; then
    cs_fail "processes of the run are still running: $(pgrep -af "$OUT/")"
fi
cs_log "all bench-paper checks passed"
