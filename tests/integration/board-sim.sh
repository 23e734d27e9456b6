#!/bin/bash
# board-sim.sh — the sim board's card (shim-drivers/sim) through the broker:
# a board "card" with 2 coprocessors of 100 ms fed by 8 worker threads, and
# a board "nfast" with the paper's nfast300 preset and CRT but only 2
# threads.  Through the module: pkcs11-tool signs (SHA256-RSA-PKCS) and
# decrypts an OpenSSL-made ciphertext on both, OpenSSL checks every result;
# 8 concurrent signatures (cryptoserver-bench, 8 threads, one each, every
# signature verified with the PEM public key) take 4 x 100 ms on 2
# coprocessors, not 100 ms (the 8 broker threads do not make the card more
# parallel: the old driver's behaviour) and not 8 x 100 ms (the coprocessors
# work in parallel).  The broker logs each card's model, and warns that
# nfast has fewer threads than coprocessors.  Bounds are counts of the
# card's latency with slack, not speed targets.
. "$(dirname "$0")/lib.sh"

cs_setup
T=$WORK/tmp
mkdir -p "$T"
for name in card nfast; do
    openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$WORK/$name.pem" 2>/dev/null
    openssl pkey -in "$WORK/$name.pem" -pubout -out "$T/$name.pub.pem"
done
"$CS_ADMIN" board add card --dir "$WORK" --type sim --threads 8 --key-file "$WORK/card.pem" --key-id 5a \
    --set label=sim-card --set tenant=demo --set latency-ms=100 --set coprocessors=2 > "$T/add.log" 2>&1 \
    || { cat "$T/add.log"; cs_fail "board add card failed"; }
"$CS_ADMIN" board add nfast --dir "$WORK" --type sim --threads 2 --key-file "$WORK/nfast.pem" --key-id 5b \
    --set label=sim-nfast --set tenant=demo --set preset=nfast300 --set crt=true > "$T/add.log" 2>&1 \
    || { cat "$T/add.log"; cs_fail "board add nfast failed"; }
cs_expect_broker_log 'sim nfast: threads \(2\) < coprocessors \(10\): at most 2 operations run at once'
cs_start

grep -Eq 'sim card: RSA 2048-bit key, 2 coprocessors, modexp 100\.00 ms per operation, no interface limit, jitter 0%$' \
    "$WORK/broker.log" || cs_fail "the card board did not log its model"
# nfast300 with CRT at 2048 bits: 27.03 ms x 8 (the cube of the size ratio), 300 / 8 ops/s.
grep -Eq 'sim nfast: RSA 2048-bit key, preset nfast300, 10 coprocessors, crt 216\.24 ms per operation, card limit 37\.50 ops/s' \
    "$WORK/broker.log" || cs_fail "the nfast board did not log its scaled preset model"
grep -q 'sim nfast: threads (2) < coprocessors (10)' "$WORK/broker.log" \
    || cs_fail "no warning for a board with fewer threads than coprocessors"

# Results are real RSA: OpenSSL verifies the signatures and made the ciphertexts.
for pair in 5a:card 5b:nfast; do
    id=${pair%%:*} name=${pair#*:}
    cs_sign_verify "$P11" "$id" rsa "$T/$name.pub.pem" "$T" || cs_fail "$name: signature not verified by OpenSSL"
    echo "sim board $name $RANDOM" > "$T/plain.txt"
    openssl pkeyutl -encrypt -pubin -inkey "$T/$name.pub.pem" -pkeyopt rsa_padding_mode:pkcs1 \
        -in "$T/plain.txt" -out "$T/cipher.bin"
    $P11 --login --pin "$CRYPTOSERVER_PIN" --decrypt --id "$id" --mechanism RSA-PKCS \
        -i "$T/cipher.bin" -o "$T/decrypted.txt" > "$T/decrypt.log" 2>&1 \
        || { cat "$T/decrypt.log"; cs_fail "$name: decrypt failed"; }
    cmp -s "$T/plain.txt" "$T/decrypted.txt" || cs_fail "$name: not the plaintext OpenSSL encrypted"
done
cs_log "both sim boards sign and decrypt; OpenSSL checks every result"

# 8 concurrent signatures on 2 coprocessors of 100 ms: 4 rounds.
$CS_CLIENT_WRAPPER "$CS_BENCH" --module "$CRYPTOSERVER_MODULE" --token demo --pin "$CRYPTOSERVER_PIN" \
    --key sim-card --verify-key "$T/card.pub.pem" --threads 8 --count 1 --csv > "$T/bench.csv" 2> "$T/bench.err" \
    || { cat "$T/bench.err" "$T/bench.csv"; cs_fail "cryptoserver-bench failed"; }
IFS=, read -r _ _ _ threads ops seconds _ _ _ _ _ verified failures _ < <(tail -n 1 "$T/bench.csv")
[ "$threads/$ops/$verified/$failures" = "8/8/8/0" ] || cs_fail "bench: $(tail -n 1 "$T/bench.csv")"
slack=$(awk -v f="$CS_TIME_FACTOR" 'BEGIN { print 0.3 * f }')
awk -v s="$seconds" -v slack="$slack" 'BEGIN { exit !(s >= 0.4 && s < 0.4 + slack) }' \
    || cs_fail "8 signatures on 2 coprocessors of 100 ms took $seconds s, not 0.4 s (+ ${slack} s)"
cs_log "8 concurrent signatures took $seconds s on 2 coprocessors of 100 ms (4 rounds)"

cs_stop
[ "$(cs_board_jobs card)" = 10 ] || cs_fail "board card ran $(cs_board_jobs card) jobs, not 10"
[ "$(cs_board_jobs nfast)" = 2 ] || cs_fail "board nfast ran $(cs_board_jobs nfast) jobs, not 2"
cs_log "all sim board checks passed"
