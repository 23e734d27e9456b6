#!/bin/bash
# shared-parties.sh — issue #24: three real brokers are the three parties of a
# shared RSA key (docs/SHARED-KEYS.md "Over the network"), each with its own
# keystore and master key.  A 1024-bit key generated without a dealer signs
# (PKCS#1 v1.5 and PSS) and OpenSSL verifies against the exported (N, e); no
# party's result alone is a signature; a wrong partial result is caught
# (CKR_DEVICE_ERROR, E: line, no signature); a party down fails the job
# naming it, and it works again once the party is back; a party killed
# mid-generation leaves no row anywhere and a retry succeeds; malformed,
# replayed and out-of-order party frames and unknown keys are refused.
# Each party's partial result runs on its own board open to the tenant
# (a raw modexp job counted in its metrics), never on a board of another
# tenant, and a faulty board's wrong result is caught (CKR_DEVICE_ERROR,
# no signature); two signings in flight at once at a party are both answered and
# verified.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"

cs_require openssl python3 curl
trap cs_cleanup EXIT
rm -rf "$WORK"
mkdir -p "$WORK/valgrind" "$WORK/sanitizer"
PROBE=$top_builddir/tests/integration/cs-party-probe
[ -x "$PROBE" ] || cs_fail "$PROBE is not built"

# shellcheck source=tests/integration/lib-parties.sh
. "$(dirname "$0")/lib-parties.sh"
parties_make
# A board of another tenant at party 2: a share of demo's key must never go there.
"$CS_ADMIN" board add otherbox --type openssl --dir "$WORK/p2" --set tenant=other > /dev/null \
    || cs_fail "board add otherbox"
# A party down, killed or faulty makes the others log why (E:/W: lines).
cs_expect_broker_log 'party: (generation of|shared-key signature failed|refused)'
cs_expect_broker_log 'did not answer|not reachable|stops'

admin () { "$CS_ADMIN" shared "$@" --tenant demo --timeout $((60 * CS_TIME_FACTOR)); }
# rows LABEL I: rows labelled LABEL in party I's keystore (read offline).
rows () { party_rows "$2" "$1"; }

# A bad party section stops the broker at start (exit 1, an E: line).
cp "$WORK/p1/broker.conf" "$WORK/p1/bad.conf"
"$CS_ADMIN" config set "$WORK/p1/bad.conf" party/index 4
status=0
CRYPTOSERVER_DRIVER_DIR=$top_builddir/shim-drivers/.libs timeout 30 "$CS_BROKER" -c "$WORK/p1/bad.conf" -f \
    > "$WORK/bad.log" 2>&1 < /dev/null || status=$?
[ "$status" = 1 ] || cs_fail "a broker with party/index 4 exited with status $status"
grep -q '^E: .*party/index: must be 1, 2 or 3' "$WORK/bad.log" || cs_fail "no E: line for party/index 4"

for i in 1 2 3; do party_start "$i"; done
cs_log "three parties on ports ${PORT[1]} ${PORT[2]} ${PORT[3]}"

# ---- generation --------------------------------------------------------------
start=$(date +%s.%N)
admin generate --dir "$WORK/p1" --label shared1 --bits 1024 > "$WORK/gen.out" 2>&1 \
    || { cat "$WORK/gen.out"; cs_fail "shared generate failed"; }
cs_log "1024-bit shared key in $(echo "$(date +%s.%N) - $start" | bc) s: $(cat "$WORK/gen.out")"
REF=$(sed -n 's/.*(\(ks:[0-9a-f]*\)).*/\1/p' "$WORK/gen.out")
[ -n "$REF" ] || cs_fail "no key ref in: $(cat "$WORK/gen.out")"
for i in 1 2 3; do
    [ "$(rows shared1 "$i")" = 1 ] || cs_fail "party $i has no row of the shared key"
done
admin public --dir "$WORK/p2" --label shared1 --out "$WORK/pub.pem" || cs_fail "public"
openssl pkey -pubin -in "$WORK/pub.pem" -text -noout | grep -q "Public-Key: (1024 bit)" \
    || cs_fail "the public key is not 1024-bit RSA"
for i in 1 3; do
    admin public --dir "$WORK/p$i" --label shared1 --out "$WORK/pub$i.pem" || cs_fail "public $i"
    cmp -s "$WORK/pub.pem" "$WORK/pub$i.pem" || cs_fail "party $i has another public key"
done
# Each party's keystore is sealed under its own master key: party 2's
# cannot open party 1's database.
"$CS_ADMIN" key list --dir "$WORK/p1" --tenant demo --master-key "$WORK/p2/master.key" > /dev/null 2>&1 \
    && cs_fail "party 1's keystore opens with party 2's master key"

# ---- signing -----------------------------------------------------------------
head -c 1000 /dev/urandom > "$WORK/msg"
verify_pkcs1 () { openssl dgst -sha256 -verify "$WORK/pub.pem" -signature "$1" "$WORK/msg" > /dev/null 2>&1; }
admin sign --dir "$WORK/p1" --label shared1 --mech sha256-pkcs1 --in "$WORK/msg" --out "$WORK/sig1" \
    || cs_fail "sign (PKCS#1 v1.5) failed"
verify_pkcs1 "$WORK/sig1" || cs_fail "OpenSSL does not verify the PKCS#1 v1.5 signature"
admin sign --dir "$WORK/p3" --label shared1 --mech sha256-pss --in "$WORK/msg" --out "$WORK/sig2" \
    || cs_fail "sign (PSS, party 3 coordinating) failed"
openssl dgst -sha256 -sigopt rsa_padding_mode:pss -sigopt rsa_pss_saltlen:32 -verify "$WORK/pub.pem" \
    -signature "$WORK/sig2" "$WORK/msg" > /dev/null 2>&1 || cs_fail "OpenSSL does not verify the PSS signature"
cs_log "PKCS#1 v1.5 and PSS signatures verified by OpenSSL"
for i in 1 2 3; do
    admin partial --dir "$WORK/p1" --label shared1 --mech sha256-pkcs1 --party "$i" --in "$WORK/msg" \
        --out "$WORK/partial$i" || cs_fail "partial $i"
    [ "$(stat -c %s "$WORK/partial$i")" = 128 ] || cs_fail "partial $i is not 128 bytes"
    verify_pkcs1 "$WORK/partial$i" && cs_fail "party $i's result alone verifies as a signature"
done
cs_log "no party's result alone is a signature"

# ---- partial results on the boards (the raw modexp path) -----------------------
declare -A before
for i in 1 2 3; do before[$i]=$(party_modexps "$i"); done
admin sign --dir "$WORK/p2" --label shared1 --mech sha256-pkcs1 --in "$WORK/msg" --out "$WORK/sig-boards" \
    || cs_fail "sign (party 2 coordinating) failed"
verify_pkcs1 "$WORK/sig-boards" || cs_fail "OpenSSL does not verify the signature made on the boards"
for i in 1 2 3; do
    [ "$(party_modexps "$i")" = $((before[$i] + 1)) ] \
        || cs_fail "party $i's partial result did not run on its board cpu (modexp jobs ${before[$i]} -> $(party_modexps "$i"))"
done
[ "$(party_jobs 2 otherbox)" = 0 ] || cs_fail "party 2 ran $(party_jobs 2 otherbox) jobs on otherbox (tenant other)"
cs_log "one signature: one modexp job on each party's board cpu, none on otherbox (tenant other)"

# ---- two signings in flight at once at one party ---------------------------------
# Party 2 stopped (SIGSTOP: connected, silent) holds both signings at party 1
# until it runs again: both are in flight there at once (party 1's own partial
# results on its board tell they arrived), then both are answered.
parties_two_in_flight $((5 * CS_TIME_FACTOR)) verify_pkcs1 \
    admin sign --dir "$WORK/p1" --label shared1 --mech sha256-pkcs1 --in "$WORK/msg" --out
cs_log "two signings in flight at party 1 at once: both verified by OpenSSL"

# ---- a wrong partial result --------------------------------------------------
cs_peer_stop p3
cp "$WORK/p3/broker.conf" "$WORK/p3/faulty.conf"
"$CS_ADMIN" config set "$WORK/p3/faulty.conf" party/test-fault wrong-partial
party_start 3 "$WORK/p3/faulty.conf"
rm -f "$WORK/sig3"
admin sign --dir "$WORK/p1" --label shared1 --mech sha256-pkcs1 --in "$WORK/msg" --out "$WORK/sig3" \
    > "$WORK/wrong.out" 2>&1 && cs_fail "a signature with a wrong partial result was released"
grep -q CKR_DEVICE_ERROR "$WORK/wrong.out" || cs_fail "no CKR_DEVICE_ERROR: $(cat "$WORK/wrong.out")"
[ ! -e "$WORK/sig3" ] || cs_fail "a signature file was written"
grep -q '^E: .*does not verify with (N, e)' "$WORK/p1.log" || cs_fail "no E: line for the wrong result"
cs_log "wrong partial result: $(cat "$WORK/wrong.out")"
cs_peer_stop p3
# The same from a board: party 3's board cpu is a fault board over openssl
# that flips a bit of every result, so its partial result (computed there)
# is wrong and the combiner's check refuses the product.
cp "$WORK/p3/broker.conf" "$WORK/p3/faulty-board.conf"
for setting in drivers/cpu/type:fault drivers/cpu/inner/type:openssl drivers/cpu/flip-every:1; do
    "$CS_ADMIN" config set "$WORK/p3/faulty-board.conf" "${setting%%:*}" "${setting#*:}" || cs_fail "config set $setting"
done
party_start 3 "$WORK/p3/faulty-board.conf"
m3=$(party_modexps 3)
rm -f "$WORK/sig3"
admin sign --dir "$WORK/p1" --label shared1 --mech sha256-pkcs1 --in "$WORK/msg" --out "$WORK/sig3" \
    > "$WORK/wrong-board.out" 2>&1 && cs_fail "a signature with a partial result of a faulty board was released"
grep -q CKR_DEVICE_ERROR "$WORK/wrong-board.out" || cs_fail "no CKR_DEVICE_ERROR: $(cat "$WORK/wrong-board.out")"
[ ! -e "$WORK/sig3" ] || cs_fail "a signature file was written"
[ "$(party_modexps 3)" = $((m3 + 1)) ] || cs_fail "party 3's partial result did not run on its (faulty) board"
cs_log "a faulty board's partial result: $(cat "$WORK/wrong-board.out")"
cs_peer_stop p3
party_start 3

# ---- a party down ------------------------------------------------------------
cs_peer_stop p2
start=$(date +%s)
admin sign --dir "$WORK/p1" --label shared1 --mech sha256-pkcs1 --in "$WORK/msg" --out "$WORK/sig4" \
    > "$WORK/down.out" 2>&1 && cs_fail "signed with party 2 down"
[ $(( $(date +%s) - start )) -le $CS_ROUND_BOUND ] || cs_fail "the failure took longer than its deadline"
grep -q "CKR_DEVICE_ERROR.*party 2 (tcp://127.0.0.1:${PORT[2]})" "$WORK/down.out" \
    || cs_fail "the error does not name party 2: $(cat "$WORK/down.out")"
cs_log "party 2 down: $(cat "$WORK/down.out")"
party_start 2
cs_wait_until $((10 * CS_TIME_FACTOR)) admin sign --dir "$WORK/p1" --label shared1 --mech sha256-pkcs1 \
    --in "$WORK/msg" --out "$WORK/sig5" 2> /dev/null || cs_fail "no signature once party 2 is back"
verify_pkcs1 "$WORK/sig5" || cs_fail "the signature after party 2's return does not verify"

# ---- malformed, replayed, out-of-order frames ----------------------------------
cs_peer_stop p3
"$PROBE" "tcp://127.0.0.1:${PORT[1]}" "$(sed -n 's/.*public-key = "\(.*\)"/\1/p' "$WORK/p1/broker.cert")" \
    "tcp://127.0.0.1:${PORT[3]}" "$WORK/p3/broker.cert_secret" demo "$REF" 128 > "$WORK/probe.out" 2>&1 \
    || { cat "$WORK/probe.out"; cs_fail "the probe's first SIGN was not answered, or its replay was"; }
cat "$WORK/probe.out"
cs_wait_until 5 grep -q "refused a round message of a closed session from party 3" "$WORK/p1.log" \
    || cs_fail "the out-of-order round frame was not refused"
[ "$(grep -c "refused a malformed frame from party 3" "$WORK/p1.log")" = 2 ] \
    || cs_fail "the malformed frames (garbage, other version) were not both refused"
grep -q "refused a signature for party 3: replayed session id" "$WORK/p1.log" || cs_fail "no replay refusal"
"$PROBE" --stranger "tcp://127.0.0.1:${PORT[1]}" "$(sed -n 's/.*public-key = "\(.*\)"/\1/p' "$WORK/p1/broker.cert")" \
    > "$WORK/stranger.out" 2>&1 || cs_fail "a key no party pinned got through: $(cat "$WORK/stranger.out")"
grep -qF "refused a connection with CURVE key $(sed -n 's/stranger key: //p' "$WORK/stranger.out")" "$WORK/p1.log" \
    || cs_fail "party 1 did not log the refused key"
party_start 3

# ---- a party that stops answering (SIGSTOP: connected, silent) ---------------
kill -STOP "${CS_PEER_PID[p2]}"
start=$(date +%s)
admin sign --dir "$WORK/p1" --label shared1 --mech sha256-pkcs1 --in "$WORK/msg" --out "$WORK/sig7" \
    > "$WORK/silent.out" 2>&1 && cs_fail "signed with party 2 silent"
kill -CONT "${CS_PEER_PID[p2]}"
[ $(( $(date +%s) - start )) -le $CS_ROUND_BOUND ] || cs_fail "the failure took longer than its deadline"
grep -q "CKR_DEVICE_ERROR.*party 2 (tcp://127.0.0.1:${PORT[2]}) did not answer within $CS_ROUND_MS ms" "$WORK/silent.out" \
    || cs_fail "the error does not name the silent party 2: $(cat "$WORK/silent.out")"
cs_log "party 2 silent: $(cat "$WORK/silent.out")"

# ---- a party killed mid-generation -------------------------------------------
# 2048 bits: the rounds last seconds, so the kill lands inside them.
admin generate --dir "$WORK/p1" --label shared2 --bits 2048 > "$WORK/gen2.out" 2>&1 &
gen=$!
cs_wait_until $((20 * CS_TIME_FACTOR)) grep -q 'generating 2048-bit shared key "shared2"' "$WORK/p3.log" \
    || cs_fail "party 3 never joined the generation"
cs_peer_kill9 p3
wait "$gen" && cs_fail "the generation succeeded with party 3 killed: $(cat "$WORK/gen2.out")"
grep -q "party 3" "$WORK/gen2.out" || cs_fail "the failure does not name party 3: $(cat "$WORK/gen2.out")"
cs_log "killed mid-generation: $(cat "$WORK/gen2.out")"
for i in 1 2 3; do
    [ "$(rows shared2 "$i")" = 0 ] || cs_fail "party $i kept a row of the failed generation"
done
party_start 3

# ---- a party silent mid-generation (SIGSTOP) ----------------------------------
admin generate --dir "$WORK/p1" --label shared3 --bits 2048 > "$WORK/gen4.out" 2>&1 &
gen=$!
cs_wait_until $((20 * CS_TIME_FACTOR)) grep -q 'generating 2048-bit shared key "shared3"' "$WORK/p3.log" \
    || cs_fail "party 3 never joined the generation of shared3"
kill -STOP "${CS_PEER_PID[p3]}"
wait "$gen" && { kill -CONT "${CS_PEER_PID[p3]}"; cs_fail "the generation succeeded with party 3 silent"; }
kill -CONT "${CS_PEER_PID[p3]}"
# The coordinator or party 2 notices first: silent, or cut off by the
# heartbeat (ZMQ_HEARTBEAT_TIMEOUT); either way party 3 is named.
grep -Eq "party 3 \(tcp://127.0.0.1:${PORT[3]}\) (did not answer within $CS_ROUND_MS ms|is not reachable)" "$WORK/gen4.out" \
    || cs_fail "the failure does not name the silent party 3: $(cat "$WORK/gen4.out")"
cs_wait_until $((10 * CS_TIME_FACTOR)) grep -q 'generation of "shared3" for tenant demo dropped' "$WORK/p3.log" \
    || cs_fail "party 3 did not drop the session once it ran again"
for i in 1 2 3; do
    [ "$(rows shared3 "$i")" = 0 ] || cs_fail "party $i kept a row of the generation with a silent party"
done
cs_log "silent mid-generation: $(cat "$WORK/gen4.out"); no rows"

admin generate --dir "$WORK/p2" --label shared2 --bits 1024 > "$WORK/gen3.out" 2>&1 \
    || cs_fail "the retry failed: $(cat "$WORK/gen3.out")"
for i in 1 2 3; do
    [ "$(rows shared2 "$i")" = 1 ] || cs_fail "party $i has no row after the retry"
done
admin public --dir "$WORK/p1" --label shared2 --out "$WORK/pub2.pem" || cs_fail "public shared2"
admin sign --dir "$WORK/p2" --label shared2 --mech sha256-pkcs1 --in "$WORK/msg" --out "$WORK/sig6" \
    || cs_fail "sign with the retried key"
openssl dgst -sha256 -verify "$WORK/pub2.pem" -signature "$WORK/sig6" "$WORK/msg" > /dev/null 2>&1 \
    || cs_fail "the retried key's signature does not verify"
cs_log "killed mid-generation: no rows; the retry made a key that signs"
exit 0
