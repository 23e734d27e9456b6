#!/bin/bash
# attr-rules.sh — the one table of attribute rules (common/cs_attr_rules.h,
# PKCS#11 2.40 §4.4 to §4.10) through the real module and broker, from a
# small C client (cs-attr-rules): a P-256 key made here with OpenSSL is
# imported as a session key and as a server-held token key, each with
# CKA_ALLOWED_MECHANISMS { CKM_ECDSA }; on both CKA_SENSITIVE cannot go back
# to FALSE nor CKA_EXTRACTABLE to TRUE (C_SetAttributeValue, C_CopyObject:
# CKR_ATTRIBUTE_READ_ONLY), CKA_ALWAYS_SENSITIVE stays FALSE, the value is
# CKR_ATTRIBUTE_SENSITIVE, CKM_ECDSA_SHA256 is CKR_MECHANISM_INVALID and the
# CKM_ECDSA signatures verify with OpenSSL and this test's PEM; an AES-256
# session key follows the same rules, with CKA_ALLOWED_MECHANISMS
# { CKM_AES_CBC_PAD } (openssl enc decrypts its ciphertext).  The broker's
# own enforcement (jobs without a module) is tests/unit/test_broker_keys.
. "$(dirname "$0")/lib.sh"

CLIENT=$top_builddir/tests/integration/cs-attr-rules
[ -x "$CLIENT" ] || cs_fail "$CLIENT is not built (make check builds it)"
cs_setup
cs_start
T=$WORK/tmp
mkdir -p "$T"
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$T/ec.pem" 2>/dev/null
openssl pkey -in "$T/ec.pem" -outform DER -out "$T/ec.der"
openssl pkey -in "$T/ec.pem" -pubout -out "$T/ec.pub.pem"
echo "signed under CKA_ALLOWED_MECHANISMS = { CKM_ECDSA }" > "$T/msg.txt"
openssl rand -out "$T/aes.bin" 32

cs_run_bounded $((120 * CS_TIME_FACTOR)) "$T/client.log" $CS_CLIENT_WRAPPER "$CLIENT" "$CRYPTOSERVER_MODULE" \
    "$CRYPTOSERVER_TOKEN" "$CRYPTOSERVER_PIN" "$T/ec.der" "$T/msg.txt" "$T/ecdsa" "$T/aes.bin" \
    || { cat "$T/client.log"; cs_fail "cs-attr-rules failed"; }
sed 's/^/    /' "$T/client.log"

for kind in session token; do
    openssl dgst -sha256 -verify "$T/ec.pub.pem" -signature "$T/ecdsa.$kind.sig" "$T/msg.txt" >/dev/null \
        || cs_fail "the $kind key's CKM_ECDSA signature does not verify with the test's PEM"
done
K=$(od -An -tx1 -v "$T/aes.bin" | tr -d ' \n')
openssl enc -d -aes-256-cbc -K "$K" -iv 00000000000000000000000000000000 -in "$T/ecdsa.aes.ct" -out "$T/back.txt" \
    || cs_fail "openssl enc cannot decrypt the AES key's CKM_AES_CBC_PAD ciphertext"
cmp -s "$T/back.txt" "$T/msg.txt" || cs_fail "openssl enc decrypts the AES key's ciphertext to other bytes"
cs_log "session and token keys: latching rules, sensitive value, CKA_ALLOWED_MECHANISMS enforced; signatures verified by OpenSSL"
cs_stop
shred -u "$T/ec.pem" "$T/ec.der" "$T/aes.bin" 2>/dev/null || true
