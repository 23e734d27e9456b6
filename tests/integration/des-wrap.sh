#!/bin/bash
# des-wrap.sh — single DES (legacy) and CBC-PAD wrapping (issue #21) through
# the module on the broker's openssl board.  A C client (cs-des-wrap) checks
# DES against FIPS 81's published answers, CKM_DES_KEY_GEN's parity, the
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

cs_run_bounded $((120 * CS_TIME_FACTOR)) "$T/client.log" $CS_CLIENT_WRAPPER "$CLIENT" "$CRYPTOSERVER_MODULE" \
    "$CRYPTOSERVER_TOKEN" "$CRYPTOSERVER_PIN" "$T" || { cat "$T/client.log"; cs_fail "cs-des-wrap failed"; }
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

# The policy switch: a board with legacy-des = false neither lists nor runs DES.
cs_stop
"$CS_ADMIN" config set "$WORK/broker.conf" drivers/cpu/legacy-des false
cs_start
cs_run_bounded $((60 * CS_TIME_FACTOR)) "$T/off.log" $CS_CLIENT_WRAPPER "$CLIENT" "$CRYPTOSERVER_MODULE" \
    "$CRYPTOSERVER_TOKEN" "$CRYPTOSERVER_PIN" "$T" off || { cat "$T/off.log"; cs_fail "legacy-des = false: DES ran"; }
cs_log "legacy-des = false: CKM_DES_ECB is CKR_MECHANISM_INVALID"

cs_stop
shred -u "$T"/*-key.bin 2>/dev/null || true
