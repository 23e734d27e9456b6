#!/bin/bash
# mechanisms.sh — every mechanism of issue #4 end to end through the broker,
# with pkcs11-tool as the application and openssl as the independent checker:
#   - the mechanism list (and its EC flags, key sizes);
#   - RSA: RSA-PKCS, RSA-X-509, SHA{1,224,256,384,512}-RSA-PKCS, RSA-PKCS-PSS
#     and SHA*-RSA-PKCS-PSS with equal and differing MGF1 hashes and salt
#     lengths 0, hLen and the maximum k - hLen - 2 (the differing ones run on
#     SoftHSM as raw RSA plus OpenSSL EMSA-PSS encoding);
#   - OAEP decryption of openssl-made ciphertexts for each hash, with equal
#     and differing MGF1 hashes; RSA-X-509 decryption;
#   - ECDSA, ECDSA-SHA{1,224,256,384,512} and ECDSA-SHA3-{224,256,384,512} on P-256 (SoftHSM boards),
#     P-384 and P-521 (generated: keystore keys, openssl and material boards);
#   - ECDH1-DERIVE (CKD_NULL, pkcs11-tool --derive): the derived secret equals
#     openssl pkeyutl -derive with the peer's private key and the token's
#     public key, on a SoftHSM resident key and on generated P-384/P-521 keys;
#     a key without CKA_DERIVE is refused;
#   - digests (SHA-1/224/256/384/512, SHA3-224/256/384/512) against openssl dgst;
#   - SHA3-{224,256,384,512}-RSA-PKCS (rows of the mechanism table, common/cs_mech.h),
#     verified by openssl;
#   - exact codes: C_Encrypt of too much data CKR_DATA_LEN_RANGE; C_Verify of a
#     short signature CKR_SIGNATURE_LEN_RANGE, of a wrong one CKR_SIGNATURE_INVALID;
#   - RSA key generation: C_GetMechanismInfo reports 2048..4096 (keys/rsa-min-bits
#     default), 1024 is CKR_KEY_SIZE_RANGE, CKA_PUBLIC_EXPONENT of 1 to 4 bytes
#     (leading zeros too) is used as given; after a restart with
#     keys/rsa-min-bits = 1024 the module reports 1024..4096, 1024 works (its
#     signature verified by openssl) and 1016 is CKR_KEY_SIZE_RANGE;
#   - pkcs11-tool --test.
# Keys: rsa2048 (01), p256 (03) of the demo boards; ecdh256 (04), a P-256 key
# with CKA_DERIVE written to both SoftHSM boards before the broker starts;
# g-rsa (71), g-p384 (72), g-p521 (73) made with --keypairgen.
# OAEP with a label is not reachable from pkcs11-tool 0.23 (no option): the
# module's unit tests and test_driver_openssl cover it.
. "$(dirname "$0")/lib.sh"

cs_setup
T=$WORK/tmp
mkdir -p "$T"
SOFTHSM=${SOFTHSM2_MODULE:-/usr/lib/softhsm/libsofthsm2.so}

# ---- a P-256 key with CKA_DERIVE on both SoftHSM boards (before the start)
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$T/ecdh256.pem" 2>/dev/null
openssl pkey -in "$T/ecdh256.pem" -outform DER -out "$T/ecdh256.der"
openssl pkey -in "$T/ecdh256.pem" -pubout -outform DER -out "$T/ecdh256.pub.der"
openssl pkey -in "$T/ecdh256.pem" -pubout -out "$T/ecdh256.pub.pem"
for board in board0 board1; do
    for part in privkey:ecdh256.der pubkey:ecdh256.pub.der; do
        pkcs11-tool --module "$SOFTHSM" --token-label "$board" --login --pin "$CRYPTOSERVER_BOARD_PIN" \
            --write-object "$T/${part#*:}" --type "${part%%:*}" --id 04 --label ecdh256 \
            --usage-sign --usage-derive >/dev/null 2>&1 || cs_fail "cannot write ecdh256 to $board"
    done
done
rm -f "$T/ecdh256.der"
# pkcs11-tool --derive asks for CKA_WRAP, CKA_UNWRAP, CKA_ENCRYPT and
# CKA_DECRYPT on the derived key, a combined-role key that the default strict
# usage separation refuses (CKR_TEMPLATE_INCONSISTENT, docs/CONTRACTS.md
# "Usage separation"): this test is about mechanisms, so tenant demo runs
# spec, what PKCS#11 allows; usage-separation.sh tests the rules.
"$CS_ADMIN" config set "$WORK/broker.conf" keys/usage-separation/demo spec || cs_fail "config set usage-separation"
cs_start

P11L="$P11 --login --pin $CRYPTOSERVER_PIN"

# ---- the mechanism list ----------------------------------------------------
$P11 -M > "$T/mechs.txt" 2>&1 || { cat "$T/mechs.txt"; cs_fail "pkcs11-tool -M failed"; }
for mech in RSA-PKCS RSA-X-509 RSA-PKCS-OAEP RSA-PKCS-PSS SHA1-RSA-PKCS SHA224-RSA-PKCS SHA512-RSA-PKCS \
            SHA1-RSA-PKCS-PSS SHA224-RSA-PKCS-PSS SHA512-RSA-PKCS-PSS ECDSA ECDSA-SHA1 ECDSA-SHA224 \
            ECDSA-SHA512 ECDH1-DERIVE EDDSA SHA-1 SHA224 SHA256 SHA384 SHA512 \
            SHA3-224-RSA-PKCS SHA3-256-RSA-PKCS SHA3-384-RSA-PKCS SHA3-512-RSA-PKCS \
            SHA3-224 SHA3-256 SHA3-384 SHA3-512; do
    grep -Eq "^ *$mech[,:]" "$T/mechs.txt" || { cat "$T/mechs.txt"; cs_fail "-M does not list $mech"; }
done
grep -E "^ *ECDH1-DERIVE" "$T/mechs.txt" | grep -q "keySize={255,521}, hw, derive, EC F_P, EC OID, EC uncompressed" \
    || { grep ECDH "$T/mechs.txt"; cs_fail "ECDH1-DERIVE: wrong sizes or flags"; }
grep -E "^ *ECDSA," "$T/mechs.txt" | grep -q "keySize={256,521}, hw, sign, verify, EC F_P" \
    || { grep ECDSA "$T/mechs.txt"; cs_fail "ECDSA: wrong sizes or flags"; }
for mech in RSA-X-509 RSA-PKCS; do     # with recovery (C_SignRecover, C_VerifyRecover)
    grep -E "^ *$mech," "$T/mechs.txt" | grep -q "hw, encrypt, decrypt, sign, sign_recover, verify, verify_recover" \
        || { grep -E "^ *$mech," "$T/mechs.txt"; cs_fail "$mech: wrong flags"; }
done
grep -E "^ *SHA256-RSA-PKCS," "$T/mechs.txt" | grep -q "recover" \
    && { grep -E "^ *SHA256-RSA-PKCS," "$T/mechs.txt"; cs_fail "SHA256-RSA-PKCS: lists recovery"; }
grep -E "^ *SHA224," "$T/mechs.txt" | grep -q "digest" || cs_fail "SHA224: not a digest"
# RSA generation: the sizes generation accepts (keys/rsa-min-bits 2048 .. 4096).
grep -E "^ *RSA-PKCS-KEY-PAIR-GEN," "$T/mechs.txt" | grep -q "keySize={2048,4096}, hw, generate_key_pair" \
    || { grep KEY-PAIR "$T/mechs.txt"; cs_fail "RSA-PKCS-KEY-PAIR-GEN: not 2048..4096"; }
cs_log "mechanism list: all issue #4 mechanisms, EC sizes 256..521 with EC flags, RSA generation 2048..4096"

# ---- generated keys (keystore) ---------------------------------------------
# label:id:key type:usage
for entry in g-rsa:71:rsa:2048:"--usage-sign --usage-decrypt" g-p384:72:EC:secp384r1:"--usage-sign --usage-derive" \
             g-p521:73:EC:secp521r1:"--usage-sign --usage-derive"; do
    IFS=: read -r label id t1 t2 usage <<<"$entry"
    # shellcheck disable=SC2086
    cs_run_bounded 120 "$T/gen.log" $P11L --keypairgen --key-type "$t1:$t2" --label "$label" --id "$id" $usage \
        || { cat "$T/gen.log"; cs_fail "--keypairgen $t1:$t2 failed"; }
done
for id in 71 72 73 04; do
    cs_pubkey_pem "$P11" "$id" "$T/$id.pub.pem" || cs_fail "cannot read the public key $id"
done
cp "$KEYS/rsa2048.pub.pem" "$T/01.pub.pem"
cp "$KEYS/p256.pub.pem" "$T/03.pub.pem"
cs_log "generated g-rsa (71), g-p384 (72), g-p521 (73)"

head -c 1000 /dev/urandom > "$T/msg.bin"

# p11hash sha1|sha224...: pkcs11-tool's name of a hash mechanism.
p11hash () { if [ "$1" = sha1 ]; then echo SHA-1; else echo "${1^^}"; fi; }

# sign ID MECH OUT [pkcs11-tool options...]: signs $T/in.bin.
sign () {
    local id=$1 mech=$2 out=$3
    shift 3
    rm -f "$out"
    $P11L --sign --id "$id" -m "$mech" -i "$T/in.bin" -o "$out" "$@" > "$T/sign.log" 2>&1 \
        || { cat "$T/sign.log"; cs_fail "key $id: $mech $* failed"; }
}

# ---- RSA signatures ----------------------------------------------------------
for id in 01 71; do
    pub=$T/$id.pub.pem
    for h in sha1 sha224 sha256 sha384 sha512; do
        H=${h^^}
        cp "$T/msg.bin" "$T/in.bin"
        sign "$id" "$H-RSA-PKCS" "$T/sig.bin"
        openssl dgst "-$h" -verify "$pub" -signature "$T/sig.bin" "$T/msg.bin" >/dev/null \
            || cs_fail "key $id: $H-RSA-PKCS does not verify"
    done
    # RSA-PKCS over a DigestInfo made by openssl: pkeyutl recovers and compares it.
    openssl dgst -sha256 -binary "$T/msg.bin" > "$T/hash.bin"
    printf '\x30\x31\x30\x0d\x06\x09\x60\x86\x48\x01\x65\x03\x04\x02\x01\x05\x00\x04\x20' \
        | cat - "$T/hash.bin" > "$T/in.bin"
    sign "$id" RSA-PKCS "$T/sig.bin"
    openssl pkeyutl -verify -pubin -inkey "$pub" -in "$T/in.bin" -sigfile "$T/sig.bin" >/dev/null \
        || cs_fail "key $id: RSA-PKCS does not verify"
    # RSA-X-509: a full block (top byte 0) and a short one (left-padded by the token).
    for len in 256 100; do
        { printf '\x00'; head -c $((len - 1)) /dev/urandom; } > "$T/in.bin"
        sign "$id" RSA-X-509 "$T/sig.bin"
        openssl pkeyutl -verifyrecover -pubin -inkey "$pub" -pkeyopt rsa_padding_mode:none \
            -in "$T/sig.bin" -out "$T/rec.bin" 2>/dev/null || cs_fail "key $id: RSA-X-509 does not recover"
        { head -c $((256 - len)) /dev/zero; cat "$T/in.bin"; } | cmp -s - "$T/rec.bin" \
            || cs_fail "key $id: RSA-X-509 ($len bytes) recovers to other data"
    done
    # PSS: hash:mgf:salt ("max" = k - hLen - 2).
    for combo in sha1:sha1:20 sha224:sha224:0 sha256:sha256:32 sha384:sha384:max sha512:sha512:64 \
                 sha256:sha1:32 sha384:sha256:0 sha1:sha512:max sha512:sha224:10; do
        IFS=: read -r h m salt <<<"$combo"
        H=${h^^}; M=${m^^}
        hlen=$(openssl dgst "-$h" -binary /dev/null | wc -c)
        [ "$salt" = max ] && salt=$((256 - hlen - 2))
        # the raw mechanism over a digest of the module's caller
        openssl dgst "-$h" -binary "$T/msg.bin" > "$T/in.bin"
        sign "$id" RSA-PKCS-PSS "$T/sig.bin" --hash-algorithm "$(p11hash "$h")" --mgf "MGF1-$M" --salt-len "$salt"
        openssl pkeyutl -verify -pubin -inkey "$pub" -in "$T/in.bin" -sigfile "$T/sig.bin" \
            -pkeyopt rsa_padding_mode:pss -pkeyopt "digest:$h" -pkeyopt "rsa_mgf1_md:$m" \
            -pkeyopt "rsa_pss_saltlen:$salt" >/dev/null \
            || cs_fail "key $id: RSA-PKCS-PSS $h/mgf1-$m/salt $salt does not verify"
        # the hash-and-sign mechanism over the message
        cp "$T/msg.bin" "$T/in.bin"
        sign "$id" "$H-RSA-PKCS-PSS" "$T/sig.bin" --mgf "MGF1-$M" --salt-len "$salt"
        openssl dgst "-$h" -verify "$pub" -signature "$T/sig.bin" -sigopt rsa_padding_mode:pss \
            -sigopt "rsa_mgf1_md:$m" -sigopt "rsa_pss_saltlen:$salt" "$T/msg.bin" >/dev/null \
            || cs_fail "key $id: $H-RSA-PKCS-PSS mgf1-$m/salt $salt does not verify"
    done
    cs_log "key $id: RSA-PKCS, RSA-X-509, SHA*-RSA-PKCS, RSA-PKCS-PSS and SHA*-RSA-PKCS-PSS verify"
done

# ---- SHA3 hash-and-sign (added as rows of common/cs_mech.h) -------------------
for id in 01 71; do
    for b in 224 256 384 512; do
        cp "$T/msg.bin" "$T/in.bin"
        sign "$id" "SHA3-$b-RSA-PKCS" "$T/sig.bin"
        openssl dgst "-sha3-$b" -verify "$T/$id.pub.pem" -signature "$T/sig.bin" "$T/msg.bin" >/dev/null \
            || cs_fail "key $id: SHA3-$b-RSA-PKCS does not verify"
    done
done
cs_log "keys 01, 71: SHA3-224/256/384/512-RSA-PKCS verify with openssl"

# ---- exact codes: lengths --------------------------------------------------------
cp "$T/msg.bin" "$T/in.bin"
sign 01 SHA256-RSA-PKCS "$T/sig.bin"
head -c 255 "$T/sig.bin" > "$T/short.bin"
cs_expect_refusal CKR_SIGNATURE_LEN_RANGE "verify of a 255-byte RSA-2048 signature" "$T/verify.log" \
    $P11L --verify --id 01 -m SHA256-RSA-PKCS -i "$T/msg.bin" --signature-file "$T/short.bin"
sign 03 ECDSA-SHA256 "$T/esig.bin"
head -c 63 "$T/esig.bin" > "$T/short.bin"
cs_expect_refusal CKR_SIGNATURE_LEN_RANGE "verify of a 63-byte P-256 signature" "$T/verify.log" \
    $P11L --verify --id 03 -m ECDSA-SHA256 -i "$T/msg.bin" --signature-file "$T/short.bin"
# pkcs11-tool prints "Invalid signature" for exactly CKR_SIGNATURE_INVALID (and "valid" for CKR_OK).
{ head -c 10 "$T/sig.bin"; head -c 1 "$T/sig.bin" | tr '\000-\377' '\001-\377\000'; tail -c +12 "$T/sig.bin"; } \
    > "$T/bad.bin"
cmp -s "$T/bad.bin" "$T/sig.bin" && cs_fail "the altered signature is the signature"
$P11L --verify --id 01 -m SHA256-RSA-PKCS -i "$T/msg.bin" --signature-file "$T/bad.bin" > "$T/verify.log" 2>&1 || true
grep -qx "Invalid signature" "$T/verify.log" || { cat "$T/verify.log"; cs_fail "a wrong signature: not CKR_SIGNATURE_INVALID"; }
$P11L --verify --id 01 -m SHA256-RSA-PKCS -i "$T/msg.bin" --signature-file "$T/sig.bin" > "$T/verify.log" 2>&1 \
    && grep -qx "Signature is valid" "$T/verify.log" || { cat "$T/verify.log"; cs_fail "the signature does not verify"; }
cs_log "C_Verify: short signature CKR_SIGNATURE_LEN_RANGE, wrong one CKR_SIGNATURE_INVALID"
# C_Encrypt with the public key (pkcs11-tool 0.23 encrypts with secret keys only).
cs_shell_start app demo
cs_shell app CKR_OK login "$CRYPTOSERVER_PIN"
cs_shell app CKR_OK encrypt 01 245
cs_shell app CKR_DATA_LEN_RANGE encrypt 01 246
cs_shell app CKR_DATA_LEN_RANGE encrypt 01 300
# RSA generation: exponents of 1 to 4 bytes, used as given; 1024 below the policy.
for e in 03 0101 010001 00010001 01000001; do
    cs_shell app CKR_OK keygen-rsa 2048 "$e"
done
cs_shell app CKR_KEY_SIZE_RANGE keygen-rsa 1024 010001
cs_shell app CKR_KEY_SIZE_RANGE keygen-rsa 2052 010001
cs_shell_stop app
cs_expect_refusal CKR_KEY_SIZE_RANGE "--keypairgen rsa:1024 (keys/rsa-min-bits 2048)" "$T/gen.log" \
    $P11L --keypairgen --key-type rsa:1024 --label small --id 7a
cs_log "C_Encrypt over k-11 bytes CKR_DATA_LEN_RANGE; exponents of 1..4 bytes; RSA-1024 refused"

# ---- ECDSA -------------------------------------------------------------------
for id in 03 72 73; do
    pub=$T/$id.pub.pem
    for h in sha1 sha224 sha256 sha384 sha512; do
        H=${h^^}
        cp "$T/msg.bin" "$T/in.bin"
        sign "$id" "ECDSA-$H" "$T/sig.bin" --signature-format openssl
        openssl dgst "-$h" -verify "$pub" -signature "$T/sig.bin" "$T/msg.bin" >/dev/null \
            || cs_fail "key $id: ECDSA-$H does not verify"
        # raw CKM_ECDSA over the digest (longer than the order: the board truncates, X9.62)
        openssl dgst "-$h" -binary "$T/msg.bin" > "$T/in.bin"
        sign "$id" ECDSA "$T/sig.bin" --signature-format openssl
        openssl pkeyutl -verify -pubin -inkey "$pub" -in "$T/in.bin" -sigfile "$T/sig.bin" >/dev/null \
            || cs_fail "key $id: ECDSA over a $h digest does not verify"
    done
    cs_log "key $id: ECDSA and ECDSA-SHA1/224/256/384/512 verify"
    # ECDSA-SHA3-* (rows of common/cs_mech.h; by number, pkcs11-tool 0.23 has no names):
    # raw r||s made DER here for openssl.
    for hm in 224:0x1047 256:0x1048 384:0x1049 512:0x104a; do
        cp "$T/msg.bin" "$T/in.bin"
        sign "$id" "${hm#*:}" "$T/sig.raw"
        python3 -c 'import sys
raw = open(sys.argv[1], "rb").read(); n = len(raw) // 2
def der_int(b):
    b = b.lstrip(b"\0") or b"\0"
    b = b"\0" + b if b[0] & 0x80 else b
    return b"\x02" + bytes([len(b)]) + b
body = der_int(raw[:n]) + der_int(raw[n:])
head = b"\x30" + (bytes([len(body)]) if len(body) < 128 else b"\x81" + bytes([len(body)]))
open(sys.argv[2], "wb").write(head + body)' "$T/sig.raw" "$T/sig.bin"
        openssl dgst "-sha3-${hm%%:*}" -verify "$pub" -signature "$T/sig.bin" "$T/msg.bin" >/dev/null \
            || cs_fail "key $id: ECDSA-SHA3-${hm%%:*} does not verify"
    done
    cs_log "key $id: ECDSA-SHA3-224/256/384/512 verify"
done

# ---- decryption ------------------------------------------------------------
head -c 32 /dev/urandom > "$T/plain.bin"
for id in 01 71; do
    pub=$T/$id.pub.pem
    for combo in sha1:sha1 sha224:sha224 sha256:sha256 sha384:sha384 sha512:sha512 sha256:sha1 sha512:sha256; do
        IFS=: read -r h m <<<"$combo"
        H=${h^^}; M=${m^^}
        openssl pkeyutl -encrypt -pubin -inkey "$pub" -in "$T/plain.bin" -out "$T/ct.bin" \
            -pkeyopt rsa_padding_mode:oaep -pkeyopt "rsa_oaep_md:$h" -pkeyopt "rsa_mgf1_md:$m"
        rm -f "$T/dec.bin"
        $P11L --decrypt --id "$id" -m RSA-PKCS-OAEP --hash-algorithm "$(p11hash "$h")" --mgf "MGF1-$M" \
            -i "$T/ct.bin" -o "$T/dec.bin" > "$T/dec.log" 2>&1 \
            || { cat "$T/dec.log"; cs_fail "key $id: OAEP $h/mgf1-$m decryption failed"; }
        cmp -s "$T/plain.bin" "$T/dec.bin" || cs_fail "key $id: OAEP $h/mgf1-$m: wrong plaintext"
    done
    { printf '\x00'; head -c 255 /dev/urandom; } > "$T/block.bin"
    openssl pkeyutl -encrypt -pubin -inkey "$pub" -in "$T/block.bin" -out "$T/ct.bin" -pkeyopt rsa_padding_mode:none
    rm -f "$T/dec.bin"
    $P11L --decrypt --id "$id" -m RSA-X-509 -i "$T/ct.bin" -o "$T/dec.bin" > "$T/dec.log" 2>&1 \
        || { cat "$T/dec.log"; cs_fail "key $id: RSA-X-509 decryption failed"; }
    cmp -s "$T/block.bin" "$T/dec.bin" || cs_fail "key $id: RSA-X-509: wrong plaintext"
    cs_log "key $id: OAEP (SHA-1..SHA-512, equal and differing MGF1) and RSA-X-509 decrypt"
done

# ---- ECDH --------------------------------------------------------------------
for entry in 04:P-256 72:P-384 73:P-521; do
    IFS=: read -r id curve <<<"$entry"
    openssl genpkey -algorithm EC -pkeyopt "ec_paramgen_curve:$curve" -out "$T/peer.pem" 2>/dev/null
    openssl pkey -in "$T/peer.pem" -pubout -outform DER -out "$T/peer_pub.der"
    openssl pkeyutl -derive -inkey "$T/peer.pem" -peerkey "$T/$id.pub.pem" -out "$T/z_ref.bin"
    rm -f "$T/z.bin"
    $P11L --derive -m ECDH1-DERIVE --id "$id" --input-file "$T/peer_pub.der" --output-file "$T/z.bin" \
        > "$T/derive.log" 2>&1 || { cat "$T/derive.log"; cs_fail "key $id: ECDH1-DERIVE failed"; }
    cmp -s "$T/z.bin" "$T/z_ref.bin" || cs_fail "key $id ($curve): the derived secret differs from openssl's"
    cs_log "key $id ($curve): ECDH1-DERIVE gives openssl's shared secret"
done
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$T/peer.pem" 2>/dev/null
openssl pkey -in "$T/peer.pem" -pubout -outform DER -out "$T/peer_pub.der"
if $P11L --derive -m ECDH1-DERIVE --id 03 --input-file "$T/peer_pub.der" --output-file "$T/z.bin" \
        > "$T/derive.log" 2>&1; then
    cs_fail "key 03 (no CKA_DERIVE) derived a secret"
fi
grep -q "CKR_KEY_FUNCTION_NOT_PERMITTED" "$T/derive.log" \
    || { cat "$T/derive.log"; cs_fail "key 03: not refused with CKR_KEY_FUNCTION_NOT_PERMITTED"; }
cs_log "a key without CKA_DERIVE is refused"

# ---- digests -----------------------------------------------------------------
for h in sha1 sha224 sha256 sha384 sha512 sha3-224 sha3-256 sha3-384 sha3-512; do
    H=${h^^}
    $P11 --hash -m "$(p11hash "$h")" -i "$T/msg.bin" -o "$T/digest.bin" > "$T/hash.log" 2>&1 \
        || { cat "$T/hash.log"; cs_fail "digest $H failed"; }
    openssl dgst "-$h" -binary "$T/msg.bin" | cmp -s - "$T/digest.bin" || cs_fail "digest $H differs"
done
cs_log "digests SHA-1/224/256/384/512 and SHA3-224/256/384/512 match openssl"

# ---- pkcs11-tool --test --------------------------------------------------------
cs_run_bounded 300 "$T/test.log" $P11 --test --login --pin "$CRYPTOSERVER_PIN" \
    || { cat "$T/test.log"; cs_fail "pkcs11-tool --test failed"; }
grep -q "RSA-X-509: OK" "$T/test.log" && grep -q "SHA256-RSA-PKCS: OK" "$T/test.log" \
    || { cat "$T/test.log"; cs_fail "--test tested no signature"; }
cs_log "pkcs11-tool --test passes"

# ---- keys/rsa-min-bits = 1024: reported and enforced -----------------------------
cs_stop
"$CS_ADMIN" config set "$WORK/broker.conf" keys/rsa-min-bits 1024 >/dev/null \
    || cs_fail "cannot set keys/rsa-min-bits"
cs_start
$P11 -M > "$T/mechs.txt" 2>&1 || { cat "$T/mechs.txt"; cs_fail "pkcs11-tool -M failed"; }
grep -E "^ *RSA-PKCS-KEY-PAIR-GEN," "$T/mechs.txt" | grep -q "keySize={1024,4096}" \
    || { grep KEY-PAIR "$T/mechs.txt"; cs_fail "RSA-PKCS-KEY-PAIR-GEN: not 1024..4096 with keys/rsa-min-bits 1024"; }
cs_run_bounded 120 "$T/gen.log" $P11L --keypairgen --key-type rsa:1024 --label g-rsa1024 --id 74 --usage-sign \
    || { cat "$T/gen.log"; cs_fail "--keypairgen rsa:1024 failed with keys/rsa-min-bits 1024"; }
cs_pubkey_pem "$P11" 74 "$T/74.pub.pem" || cs_fail "cannot read the public key 74"
openssl pkey -pubin -in "$T/74.pub.pem" -text -noout | grep -q "(1024 bit)" || cs_fail "key 74 is not RSA-1024"
cp "$T/msg.bin" "$T/in.bin"
sign 74 SHA256-RSA-PKCS "$T/sig.bin"
openssl dgst -sha256 -verify "$T/74.pub.pem" -signature "$T/sig.bin" "$T/msg.bin" >/dev/null \
    || cs_fail "key 74: SHA256-RSA-PKCS does not verify"
cs_expect_refusal CKR_KEY_SIZE_RANGE "--keypairgen rsa:1016 (keys/rsa-min-bits 1024)" "$T/gen.log" \
    $P11L --keypairgen --key-type rsa:1016 --label small --id 7a
cs_log "keys/rsa-min-bits 1024: reported 1024..4096, RSA-1024 generated and verified, 1016 refused"
