#!/bin/bash
# board-gmp.sh — the gmp board (shim-drivers/gmp) end to end: a deployment
# gets a board of type gmp (cryptoserver-admin board add), the other boards
# stop taking key material (key-material = false: the SoftHSM boards keep
# their resident keys, the openssl board "cpu" only generates), so every
# keystore RSA job must run on the gmp board.  Through the module with
# pkcs11-tool, openssl checks the results: imported RSA-2048 (e = 65537) and
# RSA-3072 (e = 3) keys sign (SHA256-RSA-PKCS, SHA256-RSA-PKCS-PSS) and
# decrypt (OAEP, PKCS#1 v1.5) openssl-made ciphertexts; a raw input above
# the modulus is refused with CKR_DATA_INVALID; a generated key is made by
# the cpu board (the gmp board generates nothing) and signs on the gmp
# board.  The broker's stats lines show who did the work: board=gmp ran
# exactly the sign and decrypt jobs of this test, cpu exactly the one
# generation, board0 and board1 nothing.
. "$(dirname "$0")/lib.sh"

cs_setup
[ -e "$top_builddir/shim-drivers/.libs/gmp.so" ] || cs_fail "the gmp driver is not built"
T=$WORK/tmp
mkdir -p "$T"
CONF=$WORK/broker.conf

"$CS_ADMIN" board add gmp --dir "$WORK" --type gmp --threads 2 > "$T/add.log" 2>&1 \
    || { cat "$T/add.log"; cs_fail "board add gmp failed"; }
for board in board0 board1 cpu; do
    "$CS_ADMIN" config set "$CONF" "drivers/$board/key-material" false
done
# No key pool: the cpu board's job count is then exactly the generations of this test.
"$CS_ADMIN" config set "$CONF" keys/pool-rsa-2048 0
"$CS_ADMIN" config set "$CONF" keys/pool-rsa-3072 0
"$CS_ADMIN" board list --dir "$WORK" | grep -Eq '^gmp +gmp +2' || cs_fail "board list does not show the gmp board"
cs_start

grep -Eq 'gmp gmp: GMP [0-9.]+, RSA 1024\.\.8192 bits .*self-test ok: RSA-2048 [0-9]+ us per private operation' \
    "$WORK/broker.log" || cs_fail "the gmp board logged no self-test and speed"
grep -Eq 'board gmp: gmp driver, 0 keys, 9 mechanisms, 2 threads, key material, raw modexp$' "$WORK/broker.log" \
    || cs_fail "the gmp board does not report RSA key material only, without key generation"
grep -Eq 'board cpu: openssl driver, .*threads, key generation$' "$WORK/broker.log" \
    || cs_fail "the cpu board still takes key material"
sed -n 's/.*\(gmp gmp: GMP.*\)/\1/p' "$WORK/broker.log" | head -n 1

P11L="$P11 --login --pin $CRYPTOSERVER_PIN"
jobs=0

# ---- imported keys: RSA-2048 e=65537 (61), RSA-3072 e=3 (62) ----------------
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$T/k61.pem" 2>/dev/null
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:3072 -pkeyopt rsa_keygen_pubexp:3 \
    -out "$T/k62.pem" 2>/dev/null
for id in 61 62; do
    openssl pkey -in "$T/k$id.pem" -outform DER -out "$T/k$id.der"
    openssl pkey -in "$T/k$id.pem" -pubout -out "$T/k$id.pub.pem"
    $P11L --write-object "$T/k$id.der" --type privkey --id "$id" --label "gmp-$id" \
        --usage-sign --usage-decrypt > "$T/w.log" 2>&1 || { cat "$T/w.log"; cs_fail "import of key $id failed"; }
done
shred -u "$T/k61.der" "$T/k62.der" 2>/dev/null || rm -f "$T/k61.der" "$T/k62.der"
cs_log "imported RSA-2048 e=65537 (61) and RSA-3072 e=3 (62) as keystore keys"

for id in 61 62; do
    for i in 1 2 3; do                  # the same key again: the worker's cached key
        cs_sign_verify "$P11" "$id" rsa "$T/k$id.pub.pem" "$T" || cs_fail "key $id: SHA256-RSA-PKCS ($i)"
        jobs=$((jobs + 1))
    done
    head -c 1000 /dev/urandom > "$T/msg.bin"
    $P11L --sign --id "$id" -m SHA256-RSA-PKCS-PSS --mgf MGF1-SHA256 --salt-len 32 \
        -i "$T/msg.bin" -o "$T/sig.bin" > "$T/sign.log" 2>&1 || { cat "$T/sign.log"; cs_fail "key $id: PSS sign"; }
    jobs=$((jobs + 1))
    openssl dgst -sha256 -verify "$T/k$id.pub.pem" -signature "$T/sig.bin" -sigopt rsa_padding_mode:pss \
        -sigopt rsa_mgf1_md:sha256 -sigopt rsa_pss_saltlen:32 "$T/msg.bin" >/dev/null \
        || cs_fail "key $id: the PSS signature does not verify"
    head -c 32 /dev/urandom > "$T/plain.bin"
    openssl pkeyutl -encrypt -pubin -inkey "$T/k$id.pub.pem" -in "$T/plain.bin" -out "$T/ct.bin" \
        -pkeyopt rsa_padding_mode:oaep -pkeyopt rsa_oaep_md:sha256 -pkeyopt rsa_mgf1_md:sha256
    rm -f "$T/dec.bin"
    $P11L --decrypt --id "$id" -m RSA-PKCS-OAEP --hash-algorithm SHA256 --mgf MGF1-SHA256 \
        -i "$T/ct.bin" -o "$T/dec.bin" > "$T/dec.log" 2>&1 || { cat "$T/dec.log"; cs_fail "key $id: OAEP"; }
    jobs=$((jobs + 1))
    cmp -s "$T/plain.bin" "$T/dec.bin" || cs_fail "key $id: OAEP gave another plaintext"
    openssl pkeyutl -encrypt -pubin -inkey "$T/k$id.pub.pem" -in "$T/plain.bin" -out "$T/ct.bin" \
        -pkeyopt rsa_padding_mode:pkcs1
    rm -f "$T/dec.bin"
    $P11L --decrypt --id "$id" -m RSA-PKCS -i "$T/ct.bin" -o "$T/dec.bin" > "$T/dec.log" 2>&1 \
        || { cat "$T/dec.log"; cs_fail "key $id: PKCS#1 v1.5 decryption"; }
    jobs=$((jobs + 1))
    cmp -s "$T/plain.bin" "$T/dec.bin" || cs_fail "key $id: PKCS#1 v1.5 gave another plaintext"
    cs_log "key $id: SHA256-RSA-PKCS (x3), SHA256-RSA-PKCS-PSS, OAEP and PKCS#1 v1.5 decryption verified by openssl"
done

# ---- raw RSA of an input above the modulus ------------------------------------
head -c 256 /dev/zero | tr '\0' '\377' > "$T/ones.bin"
cs_expect_refusal CKR_DATA_INVALID "RSA-X-509 of 0xff...ff (above the modulus)" "$T/raw.log" \
    $P11L --sign --id 61 -m RSA-X-509 -i "$T/ones.bin" -o "$T/sig.bin"
jobs=$((jobs + 2))          # pkcs11-tool tries C_Sign, then C_SignUpdate/C_SignFinal: two refused jobs

# ---- generation routes to cpu, signing with the new key to gmp ------------------
cs_run_bounded 120 "$T/gen.log" $P11L --keypairgen --key-type rsa:2048 --label gmp-gen --id 63 --usage-sign \
    || { cat "$T/gen.log"; cs_fail "--keypairgen rsa:2048 failed"; }
cs_pubkey_pem "$P11" 63 "$T/k63.pub.pem" || cs_fail "cannot read the public key 63"
cs_sign_verify "$P11" 63 rsa "$T/k63.pub.pem" "$T" || cs_fail "generated key 63: SHA256-RSA-PKCS"
jobs=$((jobs + 1))
cs_log "a key generated on the cpu board signs on the gmp board"

cs_stop
cs_no_secret_in "$T/k61.pem" "$WORK/broker.log"
cs_no_secret_in "$T/k62.pem" "$WORK/broker.log"
shred -u "$T"/k61.pem "$T"/k62.pem 2>/dev/null || rm -f "$T"/k61.pem "$T"/k62.pem
grep 'stats board=' "$WORK/broker.log" | tail -n 4
[ "$(cs_board_jobs gmp)" = "$jobs" ] || cs_fail "board gmp ran $(cs_board_jobs gmp) jobs, not the $jobs of this test"
[ "$(cs_board_jobs cpu)" = 1 ] || cs_fail "board cpu ran $(cs_board_jobs cpu) jobs, not the one generation"
for board in board0 board1; do
    [ "$(cs_board_jobs "$board")" = 0 ] || cs_fail "board $board ran $(cs_board_jobs "$board") jobs"
done
grep -q "stats board=gmp jobs=$jobs errors=2\$" "$WORK/broker.log" \
    || cs_fail "board gmp: not exactly two errors (the refused raw input)"
cs_log "stats: gmp ran all $jobs sign/decrypt jobs (2 refused), cpu the generation, board0/board1 nothing"
