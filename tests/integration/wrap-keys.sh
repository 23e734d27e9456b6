#!/bin/bash
# wrap-keys.sh — C_WrapKey and C_UnwrapKey with CKM_RSA_PKCS_OAEP (issue #10)
# from a small C client (cs-wrap), every value checked by OpenSSL with key
# pairs this test made: the module's wrapped bytes decrypt with `openssl
# pkeyutl` to the key's value; OpenSSL's OAEP ciphertext of an AES key
# unwraps (a DecryptJob with a keystore key) into a key whose AES-ECB and
# AES-CBC ciphertexts equal `openssl enc`'s; every refusal of the wrapping
# rules has its exact CKR_ code, and the Tookan attacks (wrap/decrypt,
# wrap/unwrap, attribute changes) fail; an unwrapped token key (sealed by
# the broker) encrypts as the session one.  AES key wrap (RFC 3394/5649):
# C_WrapKey's bytes equal `openssl enc -id-aes128-wrap(-pad)`'s, the
# unwrapped keys (session and token KEK) encrypt as `openssl enc`.  Not with pkcs11-tool: OpenSC
# 0.23's --wrap wraps token secret keys (whose value only the broker holds)
# and its --unwrap passes no CK_RSA_PKCS_OAEP_PARAMS
# (CKR_MECHANISM_PARAM_INVALID here).
. "$(dirname "$0")/lib.sh"

CLIENT=$top_builddir/tests/integration/cs-wrap
[ -x "$CLIENT" ] || cs_fail "$CLIENT is not built (make check builds it)"
cs_setup
cs_start
T=$WORK/tmp
mkdir -p "$T"
SO_PIN=123456           # demo-deploy.sh's SO PIN of tenant demo
OAEP=(-pkeyopt rsa_padding_mode:oaep -pkeyopt rsa_oaep_md:sha256 -pkeyopt rsa_mgf1_md:sha256)

# The pairs (private halves stay in this test's directory) and OpenSSL's
# ciphertexts to unwrap.
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$T/wrap.pem" 2>/dev/null
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$T/attack.pem" 2>/dev/null
openssl pkey -in "$T/wrap.pem" -pubout -out "$T/wrap.pub.pem"
openssl rand -out "$T/k2.bin" 16
openssl rand -out "$T/k20.bin" 20
openssl rand -out "$T/plain.bin" 32
openssl rand -out "$T/iv.bin" 16
for k in k2 k20; do
    openssl pkeyutl -encrypt -pubin -inkey "$T/wrap.pub.pem" "${OAEP[@]}" -in "$T/$k.bin" -out "$T/$k.wrapped" \
        || cs_fail "openssl pkeyutl -encrypt"
done


cs_run_bounded $((120 * CS_TIME_FACTOR)) "$T/client.log" $CS_CLIENT_WRAPPER "$CLIENT" "$CRYPTOSERVER_MODULE" \
    "$CRYPTOSERVER_TOKEN" "$CRYPTOSERVER_PIN" "$SO_PIN" "$T" || { cat "$T/client.log"; cs_fail "cs-wrap failed"; }
sed 's/^/    /' "$T/client.log"

# openssl pkeyutl decrypts the module's wrapped bytes to the key's value.
for k in k1 k3; do
    openssl pkeyutl -decrypt -inkey "$T/wrap.pem" "${OAEP[@]}" -in "$T/$k.wrapped" -out "$T/$k.back" \
        || cs_fail "openssl pkeyutl cannot decrypt the module's wrapped $k"
    cmp -s "$T/$k.back" "$T/$k.bin" || cs_fail "the module's wrapped $k decrypts to other bytes"
done
cs_log "openssl pkeyutl -decrypt (OAEP SHA-256) gives the wrapped keys' values"

# The unwrapped key encrypts as openssl enc does with OpenSSL's key value.
K=$(od -An -tx1 -v "$T/k2.bin" | tr -d ' \n')
IV=$(od -An -tx1 -v "$T/iv.bin" | tr -d ' \n')
openssl enc -aes-128-ecb -nopad -K "$K" -in "$T/plain.bin" -out "$T/ecb.openssl"
openssl enc -aes-128-cbc -nopad -K "$K" -iv "$IV" -in "$T/plain.bin" -out "$T/cbc.openssl"
cmp -s "$T/ecb.openssl" "$T/k2-ecb.bin" || cs_fail "the unwrapped key's AES-128-ECB differs from openssl enc's"
cmp -s "$T/cbc.openssl" "$T/k2-cbc.bin" || cs_fail "the unwrapped key's AES-128-CBC differs from openssl enc's"
cmp -s "$T/ecb.openssl" "$T/k2-ecb-token.bin" || cs_fail "the unwrapped token key's AES-128-ECB differs from openssl enc's"
cs_log "openssl enc -aes-128-ecb and -aes-128-cbc agree with the unwrapped key"

# AES key wrap (RFC 3394 / RFC 5649): the module's wrapped bytes are
# OpenSSL's, and the unwrapped keys (session KEK, token KEK) encrypt as
# openssl enc does with the key's value.
RFC_KEK=000102030405060708090A0B0C0D0E0F
RFC_KEY=00112233445566778899AABBCCDDEEFF
printf "$(printf '%s' "$RFC_KEY" | sed 's/../\\x&/g')" > "$T/rfc-key.bin"
openssl enc -id-aes128-wrap -iv A6A6A6A6A6A6A6A6 -K "$RFC_KEK" -in "$T/rfc-key.bin" -out "$T/kw.openssl" \
    || cs_fail "openssl enc -id-aes128-wrap"
openssl enc -id-aes128-wrap-pad -iv A65959A6 -K "$RFC_KEK" -in "$T/rfc-key.bin" -out "$T/kwp.openssl" \
    || cs_fail "openssl enc -id-aes128-wrap-pad"
cmp -s "$T/kw.openssl" "$T/kw.wrapped" || cs_fail "CKM_AES_KEY_WRAP's wrapped bytes differ from openssl enc's"
cmp -s "$T/kwp.openssl" "$T/kwp.wrapped" || cs_fail "CKM_AES_KEY_WRAP_PAD's wrapped bytes differ from openssl enc's"
openssl enc -aes-128-ecb -nopad -K "$RFC_KEY" -in "$T/plain.bin" -out "$T/kw-ecb.openssl"
cmp -s "$T/kw-ecb.openssl" "$T/kw-ecb.bin" || cs_fail "the AES-unwrapped key's AES-128-ECB differs from openssl enc's"
cmp -s "$T/kw-ecb.openssl" "$T/kw-token-ecb.bin" \
    || cs_fail "the key unwrapped with the token KEK encrypts other than openssl enc"
cs_log "openssl enc -id-aes128-wrap/-wrap-pad agree with C_WrapKey; the unwrapped keys encrypt as openssl enc"

# The key values travelled inside jobs only.
cs_stop
python3 - "$T/k2.bin" "$T/k3.bin" "$WORK/keystore.db" "$WORK/broker.log" <<'PY' \
    || cs_fail "a wrapped key's value is on disk or in the log"
import sys
keys = [open(p, "rb").read() for p in sys.argv[1:3]]
for path in sys.argv[3:]:
    try:
        data = open(path, "rb").read()
    except FileNotFoundError:
        continue
    for key in keys:
        if key in data or key.hex().encode() in data:
            sys.exit(1)
PY
shred -u "$T/k2.bin" "$T/k3.bin" "$T/k20.bin" 2>/dev/null || true
