#!/bin/bash
# curves.sh — Ed448, X25519/X448 and the unlisted-curve answer through the
# module (cs-curves, issue #21): RFC 8032 §7.4 and generated keys checked
# by C_Verify and OpenSSL; RFC 7748 §6 and generated X25519/X448 keys
# through C_DeriveKey; secp256k1 is CKR_CURVE_NOT_SUPPORTED; pkcs11-tool -M
# lists CKM_EC_MONTGOMERY_KEY_PAIR_GEN and the Ed448/X448 sizes.
. "$(dirname "$0")/lib.sh"

CLIENT=$top_builddir/tests/integration/cs-curves
[ -x "$CLIENT" ] || cs_fail "$CLIENT is not built (make check builds it)"
cs_setup
cs_start
T=$WORK/tmp
mkdir -p "$T"

$P11 -M > "$T/mechs.txt" 2>&1 || { cat "$T/mechs.txt"; cs_fail "pkcs11-tool -M failed"; }
for want in "EC-MONTGOMERY-KEY-PAIR-GEN, keySize={255,448}, hw, generate_key_pair" \
            "EDDSA, keySize={255,448}, hw, sign, verify" "EC-EDWARDS-KEY-PAIR-GEN, keySize={255,448}" \
            "ECDH1-DERIVE, keySize={255,521}"; do
    grep -q "^ *$want" "$T/mechs.txt" || { cat "$T/mechs.txt"; cs_fail "-M does not list: $want"; }
done

cs_run_bounded $((120 * CS_TIME_FACTOR)) "$T/client.log" $CS_CLIENT_WRAPPER "$CLIENT" "$CRYPTOSERVER_MODULE" \
    "$CRYPTOSERVER_TOKEN" "$CRYPTOSERVER_PIN" || { cat "$T/client.log"; cs_fail "cs-curves failed"; }
sed 's/^/    /' "$T/client.log"
cs_stop
cs_log "every listed curve works through the module; an unlisted one is CKR_CURVE_NOT_SUPPORTED"
