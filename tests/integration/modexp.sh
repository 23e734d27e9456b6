#!/bin/bash
# modexp.sh — raw modular exponentiation as a service (issue #12: the
# paper's RPCMODEXP ... RPCGETMAXMODULUSLEN as vendor mechanisms,
# cryptoserver/pkcs11v.h) end to end: cryptoserver-modexp loads the module,
# logs in and runs C_Digest with CKM_CS_MODEXP, _ARRAY, CKM_CS_RSA_CRT,
# _ARRAY and CKM_CS_MULTI_MODEXP_ARRAY on a deployment with a gmp board, a
# sim board and the openssl board "cpu" (the SoftHSM boards run none).
# Every result is checked outside the project: python3 pow() for modexp,
# and for RSA CRT `openssl pkeyutl -decrypt` raw (padding none) private operations with the PEM key
# the test made.  Arrays of 100 items (and one of 1500: two requests of at
# most 1024 jobs); the broker's stats show that the items were spread over
# gmp, sim and cpu; a CRT key with a wrong qInv is refused with
# CKR_MECHANISM_PARAM_INVALID; C_GetMechanismInfo gives the largest modulus.
. "$(dirname "$0")/lib.sh"

cs_require python3 curl
cs_setup
T=$WORK/tmp
mkdir -p "$T"
CONF=$WORK/broker.conf
MODEXP=$top_builddir/tools/cryptoserver-modexp
[ -x "$MODEXP" ] || cs_fail "cryptoserver-modexp is not built"

openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$WORK/card.pem" 2>/dev/null
"$CS_ADMIN" board add gmp --dir "$WORK" --type gmp --threads 2 > "$T/add.log" 2>&1 \
    || { cat "$T/add.log"; cs_fail "board add gmp failed"; }
"$CS_ADMIN" board add card --dir "$WORK" --type sim --threads 2 --key-file "$WORK/card.pem" --key-id 5a \
    --set label=sim-card --set tenant=demo --set latency-ms=2 --set coprocessors=2 > "$T/add.log" 2>&1 \
    || { cat "$T/add.log"; cs_fail "board add card failed"; }
# No key pool: the cpu board's job count is then exactly the modexp items it ran.
for bits in 2048 3072 4096; do "$CS_ADMIN" config set "$CONF" keys/pool-rsa-$bits 0; done
cs_expect_broker_log '(gmp|card|cpu): a raw RSA CRT result failed its check: not released'
cs_start
for board in gmp card cpu; do
    grep -Eq "board $board: .*, raw modexp\$" "$WORK/broker.log" || cs_fail "board $board does not run raw modexp"
done
for board in board0 board1; do
    grep -Eq "board $board: .*, raw modexp\$" "$WORK/broker.log" && cs_fail "SoftHSM board $board says raw modexp"
done

export CRYPTOSERVER_PIN
# shellcheck disable=SC2086
mx () { ${CS_CLIENT_WRAPPER:-} "$MODEXP" --module "$CRYPTOSERVER_MODULE" --token "$CRYPTOSERVER_TOKEN" "$@"; }
items=0
URL=$(cat "$WORK/broker.metrics")
# modexp_jobs: the modexp items the boards ran so far (metrics: every result).
modexp_jobs () {
    curl -sf --max-time 10 "$URL" | awk '/^cryptoserver_jobs_total\{.*mechanism="CKM_CS_(MODEXP|RSA_CRT)"/ { n += $NF }
                                        END { print n + 0 }'
}
# phase_items N WHAT: the boards ran exactly N more items for WHAT.
phase_items () {
    local now
    now=$(modexp_jobs)
    [ "$now" = $((items + $1)) ] || cs_fail "$2: the boards ran $((now - items)) items, not $1"
    items=$now
}

# ---- GET_MAX_MODULUS_LEN ---------------------------------------------------------------
[ "$(mx max-modulus)" = 8192 ] || cs_fail "max-modulus: $(mx max-modulus 2>&1), not 8192"
cs_log "max-modulus: 8192 bits (C_GetMechanismInfo (CKM_CS_MODEXP).ulMaxKeySize)"
$P11 -M > "$T/mechs.txt" 2>&1 || { cat "$T/mechs.txt"; cs_fail "pkcs11-tool -M failed"; }
for m in 1 2 3 4 5; do
    grep -Eiq "^ *mechtype-0xC353000$m, keySize=\{1,8192\}, hw, digest\$" "$T/mechs.txt" \
        || { cat "$T/mechs.txt"; cs_fail "-M does not list vendor mechanism 0xC353000$m (hw, digest, 1..8192)"; }
done

# ---- MODEXP and MODEXP_ARRAY: 100 bases, some above the modulus ------------------------
python3 - "$T" <<'PY'
import random, sys
t = sys.argv[1]
r = random.SystemRandom()
m = r.getrandbits(2048) | (1 << 2047) | 1
e = r.getrandbits(2048)
bases = [r.getrandbits(2048) % m for _ in range(97)] + [m - 1, 0, 1]
open(t + "/m.hex", "w").write("%x" % m)
open(t + "/e.hex", "w").write("%x" % e)
open(t + "/bases.txt", "w").write("".join("%x\n" % b for b in bases))
open(t + "/want.txt", "w").write("".join("%0512x\n" % pow(b, e, m) for b in bases))
big = m + 12345                   # single form: a base above the modulus is reduced
open(t + "/big.hex", "w").write("%x" % big)
open(t + "/big.want", "w").write("%0512x\n" % pow(big, e, m))
huge = r.getrandbits(4096)        # twice the modulus' length: reduced by the board
open(t + "/huge.hex", "w").write("%x" % huge)
open(t + "/huge.want", "w").write("%0512x\n" % pow(huge, e, m))
PY
mx modexp "$(cat "$T/e.hex")" "$(cat "$T/m.hex")" < "$T/bases.txt" > "$T/got.txt" 2> "$T/err.log" \
    || { cat "$T/err.log"; cs_fail "modexp array of 100 failed"; }
cmp -s "$T/got.txt" "$T/want.txt" || { diff "$T/got.txt" "$T/want.txt" | head; cs_fail "MODEXP_ARRAY: results differ from python's pow"; }
phase_items 100 "MODEXP_ARRAY of 100"
mx modexp "$(cat "$T/e.hex")" "$(cat "$T/m.hex")" "$(cat "$T/big.hex")" > "$T/got1.txt" 2> "$T/err.log" \
    || { cat "$T/err.log"; cs_fail "single modexp failed"; }
cmp -s "$T/got1.txt" "$T/big.want" || cs_fail "MODEXP of a base above the modulus: wrong result"
mx --single modexp "$(cat "$T/e.hex")" "$(cat "$T/m.hex")" "$(cat "$T/huge.hex")" > "$T/got1.txt" 2> "$T/err.log" \
    || { cat "$T/err.log"; cs_fail "single modexp of a 4096-bit base failed"; }
cmp -s "$T/got1.txt" "$T/huge.want" || cs_fail "MODEXP of a base twice the modulus' length: wrong result"
phase_items 2 "MODEXP (twice)"
cs_log "MODEXP_ARRAY (100 x RSA-2048-sized, random 2048-bit exponent) and MODEXP equal python's pow"

# ---- 1500 items: more than one request (CS_WIRE_MAX_JOBS = 1024) ------------------------
python3 - "$T" <<'PY'
import random, sys
t = sys.argv[1]
r = random.SystemRandom()
m = r.getrandbits(256) | (1 << 255)
m &= ~1                           # an even modulus
e = r.getrandbits(64)
bases = [r.getrandbits(255) for _ in range(1500)]
open(t + "/m2.hex", "w").write("%x" % m)
open(t + "/e2.hex", "w").write("%x" % e)
open(t + "/bases2.txt", "w").write("".join("%x\n" % b for b in bases))
open(t + "/want2.txt", "w").write("".join("%064x\n" % pow(b, e, m) for b in bases))
PY
mx modexp "$(cat "$T/e2.hex")" "$(cat "$T/m2.hex")" < "$T/bases2.txt" > "$T/got2.txt" 2> "$T/err.log" \
    || { cat "$T/err.log"; cs_fail "modexp array of 1500 failed"; }
cmp -s "$T/got2.txt" "$T/want2.txt" || cs_fail "MODEXP_ARRAY of 1500 (even modulus): results differ from python's pow"
phase_items 1500 "MODEXP_ARRAY of 1500"
cs_log "MODEXP_ARRAY of 1500 items (even 256-bit modulus, two requests) equals python's pow"

# ---- MULTI_MODEXP_ARRAY: 100 items, each its own exponent and modulus -----------------
python3 - "$T" <<'PY'
import random, sys
t = sys.argv[1]
r = random.SystemRandom()
lines, want = [], []
for i in range(100):
    bits = r.choice([64, 512, 1024, 2048, 3072])
    m = r.getrandbits(bits) | (1 << (bits - 1))
    e = r.getrandbits(r.choice([1, 17, bits]))
    b = r.getrandbits(bits) % m
    lines.append("%x %x %x\n" % (b, e, m))
    want.append("%0*x\n" % ((bits + 7) // 8 * 2, pow(b, e, m)))
open(t + "/multi.txt", "w").write("".join(lines))
open(t + "/multi.want", "w").write("".join(want))
PY
mx multi < "$T/multi.txt" > "$T/multi.got" 2> "$T/err.log" || { cat "$T/err.log"; cs_fail "multi failed"; }
cmp -s "$T/multi.got" "$T/multi.want" || cs_fail "MULTI_MODEXP_ARRAY: results differ from python's pow"
phase_items 100 "MULTI_MODEXP_ARRAY of 100"
cs_log "MULTI_MODEXP_ARRAY (100 items, 64..3072-bit moduli, odd and even) equals python's pow"

# ---- RSA_CRT and RSA_CRT_ARRAY against openssl's raw RSA private operation ---------------
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$T/crt.pem" 2>/dev/null
python3 - "$T" <<'PY'
import random, re, subprocess, sys
t = sys.argv[1]
text = subprocess.run(["openssl", "pkey", "-in", t + "/crt.pem", "-text", "-noout"],
                      capture_output=True, text=True, check=True).stdout
def field(name):
    m = re.search(name + r":\s*\n((?:\s+[0-9a-f:]+\n)+)", text)
    return int(re.sub(r"[\s:]", "", m.group(1)), 16)
n = field("modulus")
for name in ("prime1", "prime2", "exponent1", "exponent2", "coefficient"):
    open("%s/%s.hex" % (t, name), "w").write("%x" % field(name))
r = random.SystemRandom()
bases = [r.getrandbits(2047) for _ in range(100)]
open(t + "/cbases.txt", "w").write("".join("%x\n" % b for b in bases))
for i, b in enumerate(bases):
    open("%s/c%d.bin" % (t, i), "wb").write(b.to_bytes(256, "big"))
PY
: > "$T/crt.want"
for i in $(seq 0 99); do
    openssl pkeyutl -decrypt -inkey "$T/crt.pem" -pkeyopt rsa_padding_mode:none -in "$T/c$i.bin" -out "$T/s.bin" \
        || cs_fail "openssl raw RSA of base $i failed"
    od -An -v -tx1 "$T/s.bin" | tr -d ' \n' >> "$T/crt.want"
    echo >> "$T/crt.want"
done
crt_args () { echo "$(cat "$T/prime1.hex") $(cat "$T/prime2.hex") $(cat "$T/exponent1.hex") $(cat "$T/exponent2.hex") $(cat "$T/coefficient.hex")"; }
# shellcheck disable=SC2046
mx --e 10001 crt $(crt_args) < "$T/cbases.txt" > "$T/crt.got" 2> "$T/err.log" \
    || { cat "$T/err.log"; cs_fail "RSA_CRT_ARRAY (with e) failed"; }
cmp -s "$T/crt.got" "$T/crt.want" || cs_fail "RSA_CRT_ARRAY (with e): results differ from openssl's raw RSA"
phase_items 100 "RSA_CRT_ARRAY of 100"
# shellcheck disable=SC2046
mx crt $(crt_args) < "$T/cbases.txt" > "$T/crt.got" 2> "$T/err.log" \
    || { cat "$T/err.log"; cs_fail "RSA_CRT_ARRAY (without e) failed"; }
cmp -s "$T/crt.got" "$T/crt.want" || cs_fail "RSA_CRT_ARRAY (without e): results differ from openssl's raw RSA"
phase_items 100 "RSA_CRT_ARRAY of 100 without e"
# shellcheck disable=SC2046
mx --single crt $(crt_args) $(head -n 3 "$T/cbases.txt") > "$T/crt.got" 2> "$T/err.log" \
    || { cat "$T/err.log"; cs_fail "RSA_CRT (single) failed"; }
head -n 3 "$T/crt.want" | cmp -s "$T/crt.got" - || cs_fail "RSA_CRT: results differ from openssl's raw RSA"
phase_items 3 "three RSA_CRT calls"
cs_log "RSA_CRT_ARRAY (100, checked with e and per prime) and RSA_CRT equal openssl pkeyutl's raw RSA"

# ---- refusals ------------------------------------------------------------------------------
python3 -c "import sys; q=int(open(sys.argv[1]).read(),16); print('%x' % (q ^ 2))" "$T/coefficient.hex" > "$T/badq.hex"
cs_expect_refusal CKR_MECHANISM_PARAM_INVALID "RSA_CRT with a wrong qInv" "$T/bad.log" \
    mx --single crt "$(cat "$T/prime1.hex")" "$(cat "$T/prime2.hex")" "$(cat "$T/exponent1.hex")" \
        "$(cat "$T/exponent2.hex")" "$(cat "$T/badq.hex")" 1234
phase_items 1 "the refused RSA_CRT"
cs_expect_broker_log 'login: CKR_PIN_INCORRECT as user from client demo'
# shellcheck disable=SC2086
cs_expect_refusal CKR_PIN_INCORRECT "a wrong PIN" "$T/pin.log" env CRYPTOSERVER_PIN=99999999 ${CS_CLIENT_WRAPPER:-} "$MODEXP" \
    --module "$CRYPTOSERVER_MODULE" --token "$CRYPTOSERVER_TOKEN" modexp 3 65 2
rm -f "$T"/c*.bin

cs_stop
cs_no_secret_in "$T/crt.pem" "$WORK/broker.log"
shred -u "$T/crt.pem" "$WORK/card.pem" 2>/dev/null || rm -f "$T/crt.pem" "$WORK/card.pem"
grep 'stats board=' "$WORK/broker.log" | tail -n 5
total=0
for board in gmp card cpu; do
    n=$(cs_board_jobs "$board")
    [ "${n:-0}" -gt 0 ] || cs_fail "board $board ran no modexp item"
    total=$((total + n))
done
for board in board0 board1; do
    [ "$(cs_board_jobs "$board")" = 0 ] || cs_fail "SoftHSM board $board ran $(cs_board_jobs "$board") jobs"
done
[ "$total" = "$items" ] || cs_fail "the boards ran $total items, not the $items of this test"
cs_log "stats: gmp $(cs_board_jobs gmp), card $(cs_board_jobs card), cpu $(cs_board_jobs cpu) items ($items in all)"
