#!/bin/bash
# board-cross-check.sh — the paper's cross-check (issue #9; cross_check.h):
# a board that flips one bit in every 10th result (a `fault` board,
# flip-every = 10, over a sim board) is the only other board holding an
# RSA-2048 key; both boards have `verify = never`, so only the cross-check
# (broker/cross-check = 100%) can catch a wrong result.  500 signatures
# (RSA PKCS#1 v1.5) through the module, every one verified by OpenSSL with the
# PEM the test made: none may be wrong or fail.  The mismatches must be
# counted (cryptoserver_cross_checks_total{result="mismatch"},
# cryptoserver_wrong_results_total{board="flaky"}), logged, and the faulty
# board taken out of rotation.  Then 200 RSA-PSS signatures (randomised:
# compared by verifying both results): all verified, more mismatches
# caught.  The faulty board's back-off is kept short (probe-max-ms = 200)
# so that it keeps coming back to be caught.
# Last, decryptions (CKM_RSA_PKCS: a mismatch cannot be settled by the public
# key) with a third board "good2" holding the key and flaky spoiling every
# result: each decryption gives OpenSSL's plaintext, the mismatches go to the
# third board, which settles them against flaky.
. "$(dirname "$0")/lib.sh"

cs_require curl
cs_setup
T=$WORK/tmp
mkdir -p "$T"
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$WORK/shared.pem" 2>/dev/null
openssl pkey -in "$WORK/shared.pem" -pubout -out "$T/shared.pub.pem"
"$CS_ADMIN" board add good --dir "$WORK" --type sim --threads 2 --key-file "$WORK/shared.pem" --key-id 6a \
    --set label=shared --set tenant=demo --set latency-ms=1 --set coprocessors=2 --set verify=never > "$T/add.log" 2>&1 \
    || { cat "$T/add.log"; cs_fail "board add good failed"; }
"$CS_ADMIN" board add flaky --dir "$WORK" --type fault --threads 2 --set flip-every=10 --set tenant=demo \
    --set verify=never --set probe-max-ms=200 --set inner/type=sim --set "inner/key-file=$WORK/shared.pem" --set inner/key-id=6a \
    --set inner/label=shared --set inner/latency-ms=1 --set inner/coprocessors=2 --set inner/threads=2 > "$T/add.log" 2>&1 \
    || { cat "$T/add.log"; cs_fail "board add flaky failed"; }
"$CS_ADMIN" config set "$WORK/broker.conf" broker/cross-check 100% || cs_fail "config set broker/cross-check"
cs_expect_broker_log '^W: .* board flaky: wrong result of job [0-9]+ \(cross-check: '
cs_start

$CS_CLIENT_WRAPPER "$CS_BENCH" --module "$CRYPTOSERVER_MODULE" --token demo --pin "$CRYPTOSERVER_PIN" \
    --key shared --verify-key "$T/shared.pub.pem" --threads 2 --count 250 --csv > "$T/bench.csv" 2> "$T/bench.err" \
    || { cat "$T/bench.err" "$T/bench.csv"; cs_fail "cryptoserver-bench failed"; }
IFS=, read -r _ _ _ threads ops _ _ _ _ _ _ verified failures _ < <(tail -n 1 "$T/bench.csv")
[ "$threads/$ops/$verified/$failures" = "2/500/500/0" ] \
    || cs_fail "bench (threads/ops/verified/failures): $threads/$ops/$verified/$failures, not 2/500/500/0"
cs_log "500 RSA-2048 signatures, all verified by OpenSSL, none failed"

URL=$(cat "$WORK/broker.metrics") || cs_fail "the broker wrote no broker.metrics"
curl -sf --max-time 10 "$URL" > "$T/metrics" || cs_fail "GET metrics failed"
metric () { sed -n "s/^$1 \([0-9]*\)\$/\1/p" "$T/metrics"; }
wrong=$(metric 'cryptoserver_wrong_results_total{board="flaky"}')
good_wrong=$(metric 'cryptoserver_wrong_results_total{board="good"}')
match=$(metric 'cryptoserver_cross_checks_total{result="match"}')
mismatch=$(metric 'cryptoserver_cross_checks_total{result="mismatch"}')
skipped=$(metric 'cryptoserver_cross_checks_total{result="skipped"}')
cs_log "cross-checks: $match match, $mismatch mismatch, $skipped skipped; wrong results of flaky: $wrong"
[ "${mismatch:-0}" -gt 0 ] || cs_fail "no cross-check mismatch was counted"
[ "${match:-0}" -gt 0 ] || cs_fail "no cross-check match was counted"
[ "${wrong:-0}" -gt 0 ] || cs_fail "no wrong result of board flaky was counted"
[ "$wrong" -ge "$mismatch" ] || cs_fail "$mismatch mismatches but only $wrong wrong results of flaky"
[ "$good_wrong" = 0 ] || cs_fail "board good has $good_wrong wrong results"
grep -Eq 'W: .* board flaky: wrong result of job [0-9]+ \(cross-check: [^)]*\); out of rotation, probed again in [0-9]+ ms$' \
    "$WORK/broker.log" || cs_fail "the broker did not log taking board flaky out of rotation"
! grep -q 'board good: wrong result' "$WORK/broker.log" || cs_fail "board good was blamed"

# ---- RSA-PSS: randomised, compared by verification -------------------------
$CS_CLIENT_WRAPPER "$CS_BENCH" --module "$CRYPTOSERVER_MODULE" --token demo --pin "$CRYPTOSERVER_PIN" \
    --key shared --mechanism rsa-pkcs-pss-sha256 --verify-key "$T/shared.pub.pem" --threads 2 --count 100 \
    --csv > "$T/bench.csv" 2> "$T/bench.err" \
    || { cat "$T/bench.err" "$T/bench.csv"; cs_fail "cryptoserver-bench (PSS) failed"; }
IFS=, read -r _ _ _ threads ops _ _ _ _ _ _ verified failures _ < <(tail -n 1 "$T/bench.csv")
[ "$threads/$ops/$verified/$failures" = "2/200/200/0" ] \
    || cs_fail "PSS bench (threads/ops/verified/failures): $threads/$ops/$verified/$failures, not 2/200/200/0"
curl -sf --max-time 10 "$URL" > "$T/metrics" || cs_fail "GET metrics failed"
match2=$(metric 'cryptoserver_cross_checks_total{result="match"}')
mismatch2=$(metric 'cryptoserver_cross_checks_total{result="mismatch"}')
cs_log "PSS: 200 signatures verified; cross-checks now $match2 match, $mismatch2 mismatch"
[ "$match2" -gt "$match" ] || cs_fail "no PSS cross-check matched"
[ "$mismatch2" -gt "$mismatch" ] || cs_fail "no PSS cross-check mismatch was counted"
[ "$(metric 'cryptoserver_wrong_results_total{board="good"}')" = 0 ] || cs_fail "board good was blamed (PSS)"
cs_stop

# ---- decryptions: a third board settles a mismatch -------------------------
"$CS_ADMIN" board add good2 --dir "$WORK" --type sim --threads 2 --key-file "$WORK/shared.pem" --key-id 6a \
    --set label=shared --set tenant=demo --set latency-ms=1 --set coprocessors=2 --set verify=never > "$T/add.log" 2>&1 \
    || { cat "$T/add.log"; cs_fail "board add good2 failed"; }
"$CS_ADMIN" config set "$WORK/broker.conf" drivers/flaky/flip-every 1 || cs_fail "config set flip-every"
cs_start
URL=$(cat "$WORK/broker.metrics") || cs_fail "the broker wrote no broker.metrics"
third=0
for i in $(seq 1 30); do
    echo "cross-check $i $RANDOM" > "$T/plain.txt"
    openssl pkeyutl -encrypt -pubin -inkey "$T/shared.pub.pem" -pkeyopt rsa_padding_mode:pkcs1 \
        -in "$T/plain.txt" -out "$T/cipher.bin"
    $P11 --login --pin "$CRYPTOSERVER_PIN" --decrypt --id 6a --mechanism RSA-PKCS \
        -i "$T/cipher.bin" -o "$T/decrypted.txt" > "$T/decrypt.log" 2>&1 \
        || { cat "$T/decrypt.log"; cs_fail "decryption $i failed"; }
    cmp -s "$T/plain.txt" "$T/decrypted.txt" || cs_fail "decryption $i: not the plaintext OpenSSL encrypted"
    third=$(grep -c 'cross-check: boards [a-z0-9]* and [a-z0-9]* disagree; running it on a third board' "$WORK/broker.log")
    [ "$i" -lt 10 ] || [ "$third" = 0 ] || break
done
cs_log "$i decryptions, all OpenSSL's plaintext; $third settled by a third board"
[ "$third" -gt 0 ] || cs_fail "no decryption mismatch went to a third board"
grep -Eq 'W: .* board flaky: wrong result of job [0-9]+ \(cross-check: a third board agreed with the other\)' \
    "$WORK/broker.log" || cs_fail "the third board did not settle a mismatch against flaky"
! grep -Eq 'board good2?: wrong result' "$WORK/broker.log" || cs_fail "a healthy board was blamed"
cs_stop
cs_log "all cross-check checks passed"
