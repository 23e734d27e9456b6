#!/bin/bash
# secret-mechs.sh — the secret-key mechanisms of issue #10's second slice:
# AES-CTR, AES key wrap (RFC 3394, RFC 5649) of data, AES-CMAC(_GENERAL),
# DES3-ECB/CBC/CBC-PAD with CKM_DES3_KEY_GEN, and SHA-1/224/256/384/512 HMAC
# with their _GENERAL forms, run on the broker's openssl board.  A C client
# (cs-sym-mechs) checks every result against OpenSSL's EVP and published
# vectors, single- and multi-part, and the refusals the spec names; here
# `openssl enc` and `openssl mac` recompute some of the module's results
# from the files it wrote, and pkcs11-tool lists the mechanisms.
. "$(dirname "$0")/lib.sh"

CLIENT=$top_builddir/tests/integration/cs-sym-mechs
[ -x "$CLIENT" ] || cs_fail "$CLIENT is not built (make check builds it)"
cs_require pkcs11-tool
cs_setup
cs_start
T=$WORK/tmp
mkdir -p "$T"

# pkcs11-tool lists the new rows: by OpenSC's name, or as mechtype-0x... for
# those OpenSC 0.23 has no name for (CKM_AES_KEY_WRAP_PAD 0x210A,
# CKM_AES_CMAC_GENERAL 0x108B, CKM_SHA224_HMAC_GENERAL 0x257,
# CKM_SHA256_HMAC_GENERAL 0x252, CKM_SHA384_HMAC_GENERAL 0x262,
# CKM_SHA512_HMAC_GENERAL 0x272).
mechs=$(pkcs11-tool --module "$CRYPTOSERVER_MODULE" --token-label "$CRYPTOSERVER_TOKEN" -M 2>&1)
for m in AES-CTR AES-CMAC "AES-CMAC-GENERAL|mechtype-0x108B" AES-KEY-WRAP "AES-KEY-WRAP-PAD|mechtype-0x210A" \
         DES3-ECB DES3-CBC DES3-CBC-PAD DES3-KEY-GEN SHA-1-HMAC SHA-1-HMAC-GENERAL SHA224-HMAC \
         "SHA224-HMAC-GENERAL|mechtype-0x257" "SHA256-HMAC-GENERAL|mechtype-0x252" SHA384-HMAC \
         "SHA384-HMAC-GENERAL|mechtype-0x262" SHA512-HMAC "SHA512-HMAC-GENERAL|mechtype-0x272"; do
    grep -qE "^ *($m)[ ,]" <<<"$mechs" || { echo "$mechs"; cs_fail "pkcs11-tool -M does not list $m"; }
done
# Key wrap is data and a C_WrapKey/C_UnwrapKey mechanism (wrap-keys.sh).
for m in AES-KEY-WRAP "AES-KEY-WRAP-PAD|mechtype-0x210A"; do
    line=$(grep -E "^ *($m)," <<<"$mechs")
    grep -qE ", wrap(,|$)" <<<"$line" && grep -qE ", unwrap(,|$)" <<<"$line" \
        || { echo "$line"; cs_fail "$m is not listed with CKF_WRAP and CKF_UNWRAP"; }
done
cs_log "pkcs11-tool -M lists CTR, CMAC, key wrap (with wrap/unwrap), DES3 and the HMAC family"

cs_run_bounded $((120 * CS_TIME_FACTOR)) "$T/client.log" $CS_CLIENT_WRAPPER "$CLIENT" "$CRYPTOSERVER_MODULE" \
    "$CRYPTOSERVER_TOKEN" "$CRYPTOSERVER_PIN" "$T" || { cat "$T/client.log"; cs_fail "cs-sym-mechs failed"; }
sed 's/^/    /' "$T/client.log"

hex () { od -An -tx1 -v "$1" | tr -d ' \n'; }

# AES-128-CTR (SP 800-38A F.5.1 through the module) recomputed by openssl enc.
openssl enc -aes-128-ctr -K "$(hex "$T/ctr-key.bin")" -iv "$(hex "$T/ctr-iv.bin")" -in "$T/ctr-in.bin" \
    -out "$T/ctr-openssl.bin" || cs_fail "openssl enc -aes-128-ctr failed"
cmp -s "$T/ctr-openssl.bin" "$T/ctr-out.bin" || cs_fail "openssl enc's AES-128-CTR differs from the module's"
cs_log "openssl enc -aes-128-ctr agrees with the module's CKM_AES_CTR"

# DES3-CBC-PAD: openssl enc decrypts the module's ciphertext and encrypts to the same bytes.
DK=$(hex "$T/des3-key.bin") DIV=$(hex "$T/des3-iv.bin")
openssl enc -d -des-ede3-cbc -K "$DK" -iv "$DIV" -in "$T/des3-out.bin" -out "$T/des3-back.bin" \
    || cs_fail "openssl enc cannot decrypt the module's DES3-CBC-PAD ciphertext"
cmp -s "$T/des3-back.bin" "$T/des3-in.bin" || cs_fail "openssl enc decrypts the module's DES3 ciphertext to other bytes"
openssl enc -des-ede3-cbc -K "$DK" -iv "$DIV" -in "$T/des3-in.bin" -out "$T/des3-openssl.bin"
cmp -s "$T/des3-openssl.bin" "$T/des3-out.bin" || cs_fail "openssl enc's DES-EDE3-CBC differs from the module's"
cs_log "openssl enc -des-ede3-cbc agrees with the module's CKM_DES3_CBC_PAD"

# HMAC-SHA512 and CMAC (AES-128) recomputed by openssl mac.
want=$(openssl mac -digest SHA512 -macopt "hexkey:$(hex "$T/hmac-key.bin")" -in "$T/hmac-in.bin" HMAC \
       | tr 'A-F' 'a-f')
got=$(hex "$T/hmac-out.bin")
[ -n "$want" ] && [ "$got" = "$want" ] || cs_fail "the module's HMAC-SHA512 $got is not openssl mac's $want"
want=$(openssl mac -cipher AES-128-CBC -macopt "hexkey:$(hex "$T/cmac-key.bin")" -in "$T/cmac-in.bin" CMAC \
       | tr 'A-F' 'a-f')
got=$(hex "$T/cmac-out.bin")
[ -n "$want" ] && [ "$got" = "$want" ] || cs_fail "the module's AES-CMAC $got is not openssl mac's $want"
cs_log "openssl mac agrees with the module's CKM_SHA512_HMAC and CKM_AES_CMAC"

cs_stop
shred -u "$T"/*-key.bin 2>/dev/null || true
