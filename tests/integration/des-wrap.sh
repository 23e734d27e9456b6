#!/bin/bash
# des-wrap.sh — single DES (legacy) and CBC-PAD wrapping (issue #21) through
# the module on the broker's openssl board.  A C client (cs-des-wrap) checks
# DES against FIPS 81's published answers, CKM_DES_KEY_GEN's parity, the
# RFC 3394/5649 vectors through C_WrapKey, an RSA private key (PKCS#8)
# unwrapped from OpenSSL's RFC 5649 bytes that signs and wraps back, the
# CBC-PAD wrap/unwrap round trips and the strict usage-separation refusals
# with their exact CKR_ codes; here `openssl enc` recomputes the module's
# DES-CBC-PAD ciphertext (legacy provider) and its wrapped keys
# (DES-EDE3-CBC, AES-256-CBC).  Then the board's policy switch
# legacy-des = false (cryptoserver-broker.conf(5)) makes DES refused.
. "$(dirname "$0")/lib.sh"

CLIENT=$top_builddir/tests/integration/cs-des-wrap
[ -x "$CLIENT" ] || cs_fail "$CLIENT is not built (make check builds it)"
cs_setup
cs_start
T=$WORK/tmp
mkdir -p "$T"
SO_PIN=123456           # demo-deploy.sh's SO PIN of tenant demo

# An RSA key's PKCS#8 wrapped by OpenSSL (RFC 5649) for the module to unwrap.
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$T/rsa.pem" 2>/dev/null
openssl pkey -in "$T/rsa.pem" -pubout -out "$T/rsa.pub.pem"
openssl pkcs8 -topk8 -nocrypt -in "$T/rsa.pem" -outform DER -out "$T/rsa.p8.der"
openssl rand -out "$T/kek.bin" 32
openssl enc -id-aes256-wrap-pad -K "$(od -An -tx1 -v "$T/kek.bin" | tr -d ' \n')" -iv A65959A6 \
    -in "$T/rsa.p8.der" -out "$T/rsa.wrapped" || cs_fail "openssl enc -id-aes256-wrap-pad failed"

cs_run_bounded $((120 * CS_TIME_FACTOR)) "$T/client.log" $CS_CLIENT_WRAPPER "$CLIENT" "$CRYPTOSERVER_MODULE" \
    "$CRYPTOSERVER_TOKEN" "$CRYPTOSERVER_PIN" "$SO_PIN" "$T" || { cat "$T/client.log"; cs_fail "cs-des-wrap failed"; }
sed 's/^/    /' "$T/client.log"

hex () { od -An -tx1 -v "$1" | tr -d ' \n'; }

openssl enc -provider legacy -provider default -des-cbc -K "$(hex "$T/des-key.bin")" -iv "$(hex "$T/des-iv.bin")" \
    -in "$T/des-in.bin" -out "$T/des-openssl.bin" || cs_fail "openssl enc -des-cbc failed"
cmp -s "$T/des-openssl.bin" "$T/des-out.bin" || cs_fail "openssl enc's DES-CBC differs from the module's DES-CBC-PAD"
cs_log "openssl enc -des-cbc (legacy provider) agrees with the module's CKM_DES_CBC_PAD"

for w in "w3 des-ede3-cbc" "wa aes-256-cbc"; do
    set -- $w
    openssl enc -"$2" -K "$(hex "$T/$1-key.bin")" -iv "$(hex "$T/$1-iv.bin")" -in "$T/$1-value.bin" \
        -out "$T/$1-openssl.bin" || cs_fail "openssl enc -$2 failed"
    cmp -s "$T/$1-openssl.bin" "$T/$1-wrapped.bin" || cs_fail "C_WrapKey's bytes are not openssl enc -$2's"
done
cs_log "C_WrapKey with CKM_DES3_CBC_PAD and CKM_AES_CBC_PAD equals openssl enc -des-ede3-cbc / -aes-256-cbc"

# The unwrapped RSA key signed; it wraps back to OpenSSL's PKCS#8.
printf 'unwrapped and signed' > "$T/msg.bin"
openssl dgst -sha256 -verify "$T/rsa.pub.pem" -signature "$T/rsa-sig.bin" "$T/msg.bin" >/dev/null \
    || cs_fail "openssl does not verify the unwrapped RSA key's signature"
openssl enc -d -id-aes256-wrap-pad -K "$(hex "$T/kek.bin")" -iv A65959A6 -in "$T/rsa-rewrapped.bin" \
    -out "$T/rsa-back.der" || cs_fail "openssl enc cannot unwrap the module's wrapped private key"
cmp -s "$T/rsa-back.der" "$T/rsa.p8.der" || cs_fail "the module wrapped other PKCS#8 than it unwrapped"
cs_log "an RSA key unwrapped from OpenSSL's RFC 5649 bytes signs (openssl dgst verifies) and wraps back"

# The policy switch: a board with legacy-des = false neither lists nor runs DES.
# Under keys/usage-separation = spec (PKCS#11's own rules) a CBC-PAD
# C_UnwrapKey runs: the round trips unwrap into keys that encrypt as the
# originals.  (Strict, above: CKR_MECHANISM_INVALID, a padding oracle.)
cs_stop
"$CS_ADMIN" config set "$WORK/broker.conf" keys/usage-separation/demo spec || cs_fail "config set usage-separation"
cs_start
cs_run_bounded $((60 * CS_TIME_FACTOR)) "$T/spec.log" $CS_CLIENT_WRAPPER "$CLIENT" "$CRYPTOSERVER_MODULE" \
    "$CRYPTOSERVER_TOKEN" "$CRYPTOSERVER_PIN" "$SO_PIN" "$T" spec || { cat "$T/spec.log"; cs_fail "spec: a CBC-PAD round trip failed"; }
cs_log "spec: CKM_DES3_CBC_PAD and CKM_AES_CBC_PAD unwrap back into keys that encrypt as the originals"
"$CS_ADMIN" config set "$WORK/broker.conf" keys/usage-separation/demo strict || cs_fail "config set usage-separation"

cs_stop
"$CS_ADMIN" config set "$WORK/broker.conf" drivers/cpu/legacy-des false
cs_start
cs_run_bounded $((60 * CS_TIME_FACTOR)) "$T/off.log" $CS_CLIENT_WRAPPER "$CLIENT" "$CRYPTOSERVER_MODULE" \
    "$CRYPTOSERVER_TOKEN" "$CRYPTOSERVER_PIN" "$SO_PIN" "$T" off || { cat "$T/off.log"; cs_fail "legacy-des = false: DES ran"; }
cs_log "legacy-des = false: CKM_DES_ECB is CKR_MECHANISM_INVALID"

cs_stop
shred -u "$T"/*-key.bin "$T"/kek.bin "$T"/rsa.pem "$T"/*.der 2>/dev/null || true
