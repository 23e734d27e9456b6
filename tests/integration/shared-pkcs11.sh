#!/bin/bash
# shared-pkcs11.sh — issue #24 through PKCS#11 (docs/SHARED-KEYS.md "Through
# PKCS#11"): three real brokers are the parties (lib-parties.sh), tenant
# demo opted in with keys/shared/demo = 3; an application of broker 1 uses
# only cryptoserver-pkcs11.so and pkcs11-tool:
#   - C_GenerateKeyPair (pkcs11-tool --keypairgen --key-type rsa:2048) makes
#     a shared key: a row at each of the three parties, the same (N, e);
#   - C_Sign with it (SHA256-RSA-PKCS, SHA256-RSA-PKCS-PSS) verified by
#     openssl against the token's public key; C_Decrypt (RSA-PKCS-OAEP,
#     RSA-PKCS) of openssl's ciphertexts;
#   - two C_Sign of two applications in flight at once (party 2 stopped
#     holds both at party 1, whose partial results on its board tell they
#     arrived): both answered and verified by openssl;
#   - CKA_CS_SHARED reads CK_TRUE on it and CK_FALSE on an EC key of the
#     same token (cs-p11-shell);
#   - the broker enforces the key's usage: a shared key made with
#     CKA_DECRYPT FALSE signs but refuses a decryption sent straight to the
#     broker (cs-wire-client: CKR_KEY_FUNCTION_NOT_PERMITTED);
#   - every party checks the job's use against its own row (issue #19): a
#     role turned off through broker 2 (CKA_DECRYPT of shared1, straight at
#     broker 2) holds for a decryption asked of broker 1, whose row still
#     says TRUE: CKR_KEY_FUNCTION_NOT_PERMITTED, and party 2 logs the refusal;
#     signing still works;
#   - cryptoserver-bench --key shared1 --beside plain: one run times the
#     shared key and an ordinary keystore key, every signature verified;
#   - a generation sent again with the same idempotency id to broker 2
#     (the module's failover; cs-wire-client), while the parties generate
#     and once more after, gets the same key: one row at each party;
#   - with party 2 down, C_Sign fails with CKR_DEVICE_ERROR within the
#     party deadline and broker 1 logs an E: line naming party 2, and
#     C_GenerateKeyPair fails leaving no row; once it is back, signing
#     works again.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"

cs_require openssl python3 pkcs11-tool curl
trap cs_cleanup EXIT
rm -rf "$WORK"
mkdir -p "$WORK/valgrind" "$WORK/sanitizer"
SHELL_BIN=$top_builddir/tests/integration/cs-p11-shell
WIRE=$top_builddir/tests/integration/cs-wire-client
for need in "$SHELL_BIN" "$WIRE"; do [ -x "$need" ] || cs_fail "$need is not built"; done

# shellcheck source=tests/integration/lib-parties.sh
. "$(dirname "$0")/lib-parties.sh"
parties_make
# An application of party 1; a 2048-bit generation by three parties on a
# loaded 2-core machine may take minutes: a long deadline, granted by the broker.
"$CS_ADMIN" client add app --dir "$WORK/p1" --tenant demo --endpoint tcp://127.0.0.1:1 > /dev/null \
    || cs_fail "client add"
CONF=$WORK/p1/clients/app/client.conf
"$CS_ADMIN" config set "$CONF" client/timeout-ms $((300000 * CS_TIME_FACTOR))
"$CS_ADMIN" config set "$WORK/p1/broker.conf" broker/max-deadline-ms $((300000 * CS_TIME_FACTOR))
# Broker 2 too takes the long deadline of a generation (the module's failover target).
"$CS_ADMIN" config set "$WORK/p2/broker.conf" broker/max-deadline-ms $((300000 * CS_TIME_FACTOR))
# Party 2 down: party 1 and its frontend log why (E: lines).
cs_expect_broker_log 'party: shared-key signature failed: party 2|shared key ks:[0-9a-f]*: CKR_DEVICE_ERROR: party 2'
cs_expect_broker_log 'party: generation of "down1" for tenant demo: party 2'
# A role turned off through broker 2 (issue #19): party 2 refuses, broker 1 says so.
cs_expect_broker_log 'party: refused a signature for party 1: CKR_KEY_FUNCTION_NOT_PERMITTED'
cs_expect_broker_log 'shared key ks:[0-9a-f]*: CKR_KEY_FUNCTION_NOT_PERMITTED: party 2'
cs_expect_broker_log 'party: refused a PARTIAL from party 3 \(no such signature'     # the late partial of that job

for i in 1 2 3; do party_start "$i"; done
"$CS_ADMIN" config set "$CONF" client/endpoints "$(cat "$WORK/p1/broker.endpoint")"
export CRYPTOSERVER_CONF=$CONF
MODULE=$top_builddir/pkcs11-module/.libs/cryptoserver-pkcs11.so
P11="pkcs11-tool --module $MODULE --token-label demo --login --pin 1234"
cs_log "three parties on ports ${PORT[1]} ${PORT[2]} ${PORT[3]}"

# rows LABEL I: rows labelled LABEL in party I's keystore (read offline).
rows () { party_rows "$2" "$1"; }
# p11 WHAT ARGS...: pkcs11-tool through the module, bounded; output in $WORK/p11.out.
p11 () {
    local what=$1
    shift
    timeout $((600 * CS_TIME_FACTOR)) $P11 "$@" > "$WORK/p11.out" 2>&1 || { cat "$WORK/p11.out"; cs_fail "$what failed"; }
}

# ---- C_GenerateKeyPair -------------------------------------------------------
start=$(date +%s.%N)
p11 "keypairgen rsa:2048" --keypairgen --key-type rsa:2048 --label shared1 --id 51
cs_log "C_GenerateKeyPair rsa:2048 (shared) in $(echo "$(date +%s.%N) - $start" | bc) s"
for i in 1 2 3; do
    [ "$(rows shared1 "$i")" = 1 ] || cs_fail "party $i has no row of the shared key"
done
p11 "read the public key" --read-object --type pubkey --id 51 -o "$WORK/pub.der"
openssl pkey -pubin -inform DER -in "$WORK/pub.der" -out "$WORK/pub.pem" || cs_fail "the public key does not parse"
openssl pkey -pubin -in "$WORK/pub.pem" -text -noout | grep -q "Public-Key: (2048 bit)" || cs_fail "not RSA-2048"
for i in 2 3; do
    "$CS_ADMIN" shared public --tenant demo --label shared1 --dir "$WORK/p$i" --out "$WORK/pub$i.pem" \
        --timeout $((60 * CS_TIME_FACTOR)) || cs_fail "shared public at party $i"
    cmp -s "$WORK/pub.pem" "$WORK/pub$i.pem" || cs_fail "party $i holds another public key"
done
cs_log "one shared key, a row at each party, the same (N, e)"

# ---- C_Sign and C_Decrypt ------------------------------------------------------
head -c 1000 /dev/urandom > "$WORK/msg"
p11 "sign SHA256-RSA-PKCS" --sign --id 51 --mechanism SHA256-RSA-PKCS -i "$WORK/msg" -o "$WORK/sig1"
openssl dgst -sha256 -verify "$WORK/pub.pem" -signature "$WORK/sig1" "$WORK/msg" > /dev/null \
    || cs_fail "openssl does not verify the PKCS#1 v1.5 signature"
p11 "sign SHA256-RSA-PKCS-PSS" --sign --id 51 --mechanism SHA256-RSA-PKCS-PSS -i "$WORK/msg" -o "$WORK/sig2"
openssl dgst -sha256 -sigopt rsa_padding_mode:pss -sigopt rsa_pss_saltlen:-1 -verify "$WORK/pub.pem" \
    -signature "$WORK/sig2" "$WORK/msg" > /dev/null || cs_fail "openssl does not verify the PSS signature"
cs_log "PKCS#1 v1.5 and PSS signatures verified by openssl"
printf 'a secret for the three parties\n' > "$WORK/plain"
openssl pkeyutl -encrypt -pubin -inkey "$WORK/pub.pem" -pkeyopt rsa_padding_mode:oaep -in "$WORK/plain" \
    -out "$WORK/oaep.bin" || cs_fail "openssl encrypt (OAEP)"
p11 "decrypt RSA-PKCS-OAEP" --decrypt --id 51 --mechanism RSA-PKCS-OAEP --hash-algorithm SHA-1 --mgf MGF1-SHA1 \
    -i "$WORK/oaep.bin" -o "$WORK/plain.oaep"
cmp -s "$WORK/plain" "$WORK/plain.oaep" || cs_fail "the OAEP plaintext differs"
openssl pkeyutl -encrypt -pubin -inkey "$WORK/pub.pem" -in "$WORK/plain" -out "$WORK/pkcs1.bin" \
    || cs_fail "openssl encrypt (PKCS#1 v1.5)"
p11 "decrypt RSA-PKCS" --decrypt --id 51 --mechanism RSA-PKCS -i "$WORK/pkcs1.bin" -o "$WORK/plain.pkcs1"
cmp -s "$WORK/plain" "$WORK/plain.pkcs1" || cs_fail "the PKCS#1 v1.5 plaintext differs"
cs_log "OAEP and PKCS#1 v1.5 ciphertexts of openssl decrypted"

# ---- two signatures in flight at once (the frontend's lanes, the party's sessions) ---
verify_sha256 () { openssl dgst -sha256 -verify "$WORK/pub.pem" -signature "$1" "$WORK/msg" > /dev/null; }
# shellcheck disable=SC2086
parties_two_in_flight $((10 * CS_TIME_FACTOR)) verify_sha256 \
    timeout $((60 * CS_TIME_FACTOR)) $P11 --sign --id 51 --mechanism SHA256-RSA-PKCS -i "$WORK/msg" -o
cs_log "two C_Sign in flight at once through the module: both verified by openssl"

# ---- CKA_CS_SHARED; the usage rules in the broker -------------------------------
p11 "keypairgen EC" --keypairgen --key-type EC:prime256v1 --label ec1 --id 52
[ "$(rows ec1 2)" = 0 ] || cs_fail "an EC key went to the parties"
shell_out=$(printf 'login 1234\nshared 51 TRUE\nshared 52 FALSE\nkeygen-signer 53 signer\nshared 53 TRUE\nquit\n' \
            | timeout $((600 * CS_TIME_FACTOR)) "$SHELL_BIN" "$MODULE" demo 2>&1) \
    || { echo "$shell_out"; cs_fail "cs-p11-shell failed"; }
for want in "login CKR_OK" "keygen-signer CKR_OK"; do
    grep -qx "$want" <<< "$shell_out" || { echo "$shell_out"; cs_fail "cs-p11-shell: no \"$want\""; }
done
[ "$(grep -cx "shared CKR_OK" <<< "$shell_out")" = 3 ] \
    || { echo "$shell_out"; cs_fail "CKA_CS_SHARED is not TRUE on the shared keys and FALSE on the EC key"; }
[ "$(rows signer 3)" = 1 ] || cs_fail "the signer key is not at party 3"
cs_log "CKA_CS_SHARED: CK_TRUE on shared1 and signer, CK_FALSE on ec1"
wire () {
    "$WIRE" --endpoint "$(cat "$WORK/p1/broker.endpoint")" --broker-cert "$WORK/p1/clients/app/broker.cert" \
        --client-cert "$WORK/p1/clients/app/client.cert" --pin 1234 "$@" 2> "$WORK/wire.err"
}
got=$(wire sign signer CKM_RSA_PKCS 3031300d060960864801650304020105000420"$(openssl rand -hex 32)")
[ "${got%% *}" = CKR_OK ] || cs_fail "the signer key does not sign: $got $(cat "$WORK/wire.err")"
got=$(wire decrypt signer CKM_RSA_X_509 "00$(openssl rand -hex 255)")
[ "$got" = CKR_KEY_FUNCTION_NOT_PERMITTED ] \
    || cs_fail "a decryption with a CKA_DECRYPT FALSE shared key, straight to the broker, gave: $got"
cs_log "the broker refuses a decryption with the signer key (CKR_KEY_FUNCTION_NOT_PERMITTED)"

# ---- a role turned off at one broker holds at the others (issue #19) -------------
# Another client at broker 1 (its E: lines are rate-limited apart from app's)
# and one at broker 2, straight at the brokers.
"$CS_ADMIN" client add app2 --dir "$WORK/p1" --tenant demo --endpoint tcp://127.0.0.1:1 > /dev/null || cs_fail "client add app2"
"$CS_ADMIN" client add app --dir "$WORK/p2" --tenant demo --endpoint tcp://127.0.0.1:1 > /dev/null || cs_fail "client add at p2"
wire_at () {
    local i=$1 client=$2
    shift 2
    "$WIRE" --endpoint "$(cat "$WORK/p$i/broker.endpoint")" --broker-cert "$WORK/p$i/clients/$client/broker.cert" \
        --client-cert "$WORK/p$i/clients/$client/client.cert" --pin 1234 "$@" 2> "$WORK/wire.err"
}
openssl pkeyutl -encrypt -pubin -inkey "$WORK/pub.pem" -pkeyopt rsa_padding_mode:oaep -pkeyopt rsa_oaep_md:sha256 \
    -pkeyopt rsa_mgf1_md:sha256 -in "$WORK/plain" -out "$WORK/oaep256.bin" || cs_fail "openssl encrypt (OAEP SHA-256)"
OAEP256=$(od -An -tx1 -v "$WORK/oaep256.bin" | tr -d ' \n')
got=$(wire_at 1 app2 decrypt shared1 CKM_RSA_PKCS_OAEP "$OAEP256")
[ "${got%% *}" = CKR_OK ] || cs_fail "shared1 does not decrypt at broker 1: $got $(cat "$WORK/wire.err")"
got=$(wire_at 2 app set shared1 private CKA_DECRYPT 0)
[ "$got" = CKR_OK ] || cs_fail "CKA_DECRYPT off through broker 2: $got $(cat "$WORK/wire.err")"
got=$(wire_at 1 app2 decrypt shared1 CKM_RSA_PKCS_OAEP "$OAEP256")
[ "$got" = CKR_KEY_FUNCTION_NOT_PERMITTED ] \
    || cs_fail "a decryption at broker 1 after CKA_DECRYPT went off through broker 2 gave: ${got:0:40}"
cs_wait_until $((10 * CS_TIME_FACTOR)) grep -q \
    "^W: .*party: refused a signature for party 1: CKR_KEY_FUNCTION_NOT_PERMITTED" "$WORK/p2.log" \
    || cs_fail "party 2 does not log its refusal"
got=$(wire_at 1 app2 sign shared1 CKM_RSA_PKCS 3031300d060960864801650304020105000420"$(openssl rand -hex 32)")
[ "${got%% *}" = CKR_OK ] || cs_fail "shared1 no longer signs: $got $(cat "$WORK/wire.err")"
cs_log "CKA_DECRYPT off through broker 2: broker 1's decryption CKR_KEY_FUNCTION_NOT_PERMITTED (party 2 refuses), signing works"

# ---- cryptoserver-bench: the shared key beside an ordinary keystore key ---------------
"$CS_ADMIN" key generate --tenant demo --type rsa:2048 --label plain --dir "$WORK/p1" > /dev/null \
    || cs_fail "an ordinary keystore key"
timeout $((300 * CS_TIME_FACTOR)) "$CS_BENCH" --module "$MODULE" --token demo --pin 1234 --key shared1 \
    --beside plain --count 20 --verify --csv > "$WORK/bench.csv" 2> "$WORK/bench.err" \
    || { cat "$WORK/bench.csv" "$WORK/bench.err"; cs_fail "cryptoserver-bench --beside failed"; }
[ "$(grep -c '^mechanism,' "$WORK/bench.csv")" = 1 ] || cs_fail "not one CSV header: $(cat "$WORK/bench.csv")"
for key in shared1 plain; do
    grep -Eq "^sha256-rsa-pkcs,$key,2048,1,20,[0-9.]+,[0-9.]+,[0-9.]+,[0-9.]+,[0-9.]+,[0-9.]+,20,0,[0-9.]+\$" "$WORK/bench.csv" \
        || cs_fail "no row of 20 verified signatures with $key: $(cat "$WORK/bench.csv")"
done
cs_log "bench: $(tr '\n' ' ' < "$WORK/bench.csv")"

# ---- a generation sent again at another broker (the module's failover) ------------
# The attempt at broker 1 goes again, with the same idempotency id, to broker 2
# while the parties generate (party 2 answers it once its row is sealed) and
# once more afterwards (party 2 finds the id recorded with its row): one key.
unlabelled () { "$CS_ADMIN" key list --dir "$WORK/p$1" --tenant demo | grep -c -- "shared-[0-9a-f]\{8\}" || true; }
joined () { grep -c 'generating 2048-bit shared key "shared-[0-9a-f]*" for tenant demo, coordinator party 1' "$WORK/p2.log" || true; }
declare -A had
for i in 1 2 3; do had[$i]=$(unlabelled "$i"); done
idem=$(openssl rand -hex 16)
seen=$(joined)
long=$((300000 * CS_TIME_FACTOR))
timeout $((600 * CS_TIME_FACTOR)) bash -c "$(declare -f wire_at); WORK='$WORK' WIRE='$WIRE' \
    wire_at 1 app --deadline-ms $long genkp-rsa 2048 $idem" > "$WORK/idem1.out" 2> "$WORK/idem1.err" &
first=$!
party2_in () { [ "$(joined)" -gt "$seen" ]; }
cs_wait_until $((60 * CS_TIME_FACTOR)) party2_in || cs_fail "party 2 did not join the generation of broker 1"
got2=$(wire_at 2 app --deadline-ms $long genkp-rsa 2048 "$idem") || cs_fail "broker 2: $(cat "$WORK/wire.err")"
wait "$first" || cs_fail "broker 1: $(cat "$WORK/idem1.out" "$WORK/idem1.err")"
got1=$(cat "$WORK/idem1.out")
[ "${got1%% *}" = CKR_OK ] && [ "$got2" = "$got1" ] \
    || cs_fail "one idempotency id, two attempts: \"$got1\" at broker 1, \"$got2\" at broker 2"
got3=$(wire_at 2 app --deadline-ms $long genkp-rsa 2048 "$idem")
[ "$got3" = "$got1" ] || cs_fail "the attempt after the generation at broker 2 got \"$got3\", not \"$got1\""
for i in 1 2 3; do
    [ "$(unlabelled "$i")" = $((had[$i] + 1)) ] \
        || cs_fail "party $i has $(unlabelled "$i") unlabelled shared keys, not ${had[$i]} + 1"
done
cs_log "one idempotency id at brokers 1 and 2 (during and after the generation): one key, $got1"

# ---- a party down ----------------------------------------------------------------
cs_peer_stop p2
start=$(date +%s)
timeout $((60 * CS_TIME_FACTOR)) $P11 --sign --id 51 --mechanism SHA256-RSA-PKCS -i "$WORK/msg" -o "$WORK/sig3" \
    > "$WORK/down.out" 2>&1 && cs_fail "signed with party 2 down"
took=$(( $(date +%s) - start ))
[ $took -le $CS_ROUND_BOUND ] || cs_fail "the failure took $took s, over the party deadline"
grep -q CKR_DEVICE_ERROR "$WORK/down.out" || cs_fail "not CKR_DEVICE_ERROR: $(cat "$WORK/down.out")"
grep -q "^E: .*shared key ks:[0-9a-f]*: CKR_DEVICE_ERROR: party 2 (tcp://127.0.0.1:${PORT[2]})" "$WORK/p1.log" \
    || cs_fail "broker 1 has no E: line naming party 2"
cs_log "party 2 down: CKR_DEVICE_ERROR in $took s; $(grep -m1 "^E: .*shared key ks:[0-9a-f]*: CKR_DEVICE_ERROR" "$WORK/p1.log")"
timeout $((60 * CS_TIME_FACTOR)) $P11 --keypairgen --key-type rsa:2048 --label down1 --id 54 > "$WORK/down-gen.out" 2>&1 \
    && cs_fail "generated a shared key with party 2 down"
grep -q CKR_DEVICE_ERROR "$WORK/down-gen.out" || cs_fail "generation: not CKR_DEVICE_ERROR: $(cat "$WORK/down-gen.out")"
for i in 1 3; do
    [ "$(rows down1 "$i")" = 0 ] || cs_fail "party $i kept a row of the generation with party 2 down"
done
cs_log "party 2 down: C_GenerateKeyPair fails with CKR_DEVICE_ERROR, no row anywhere"
party_start 2
cs_wait_until $((10 * CS_TIME_FACTOR)) $P11 --sign --id 51 --mechanism SHA256-RSA-PKCS -i "$WORK/msg" \
    -o "$WORK/sig4" > /dev/null 2>&1 || cs_fail "no signature once party 2 is back"
openssl dgst -sha256 -verify "$WORK/pub.pem" -signature "$WORK/sig4" "$WORK/msg" > /dev/null \
    || cs_fail "the signature after party 2's return does not verify"
cs_log "party 2 back: signing works again"
exit 0
