#!/bin/bash
# client-p11tool.sh — GnuTLS's p11tool with cryptoserver-pkcs11.so
# (--provider, so no p11-kit registration is needed):
#   - --list-tokens shows token "demo";
#   - --list-all --login shows the private and public objects of rsa2048,
#     rsa3072 and p256, and --list-all without login no private key;
#   - --export-pubkey gives exactly the demo public keys;
#   - --test-sign (sign on the token, verify with GnuTLS against the key's
#     parameters and with the token's public key) on rsa2048 (RSA-SHA256),
#     rsa3072 (RSA-PSS) and p256 (ECDSA-SHA256);
#   - --generate-privkey rsa --bits 2048 --label gen1 (then --test-sign and
#     --delete): needs C_GenerateKeyPair in the module.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/clients/common.sh"

cs_require p11tool openssl
cs_setup
cs_client_trap
cs_start
T=$WORK/tmp
mkdir -p "$T"
TOKEN_URI="pkcs11:token=$CRYPTOSERVER_TOKEN"

# p11 OUT ARGS...: p11tool through our module (bounded), output to OUT.
p11 () {
    local out=$1
    shift
    timeout --kill-after=5 $((60 * CS_TIME_FACTOR)) p11tool --provider "$CRYPTOSERVER_MODULE" "$@" > "$out" 2>&1
}
p11_ok () {
    local what=$1 out=$2
    shift 2
    p11 "$out" "$@" || { cat "$out"; cs_fail "$what: p11tool $* failed"; }
}

p11_ok "list tokens" "$T/tokens.txt" --list-tokens
cs_expect "$T/tokens.txt" "^[[:space:]]*Label: $CRYPTOSERVER_TOKEN\$" "--list-tokens does not show token $CRYPTOSERVER_TOKEN"
cs_expect "$T/tokens.txt" "URL: pkcs11:.*token=$CRYPTOSERVER_TOKEN" "--list-tokens gives no URL for the token"
cs_log "--list-tokens: token $CRYPTOSERVER_TOKEN ($(grep -m1 'URL:' "$T/tokens.txt" | sed 's/^[[:space:]]*//'))"

p11_ok "list objects without login" "$T/public.txt" --list-all "$TOKEN_URI"
grep -q "type=private" "$T/public.txt" && cs_fail "private keys listed without login"
p11_ok "list objects" "$T/all.txt" --login --set-pin "$CRYPTOSERVER_PIN" --list-all "$TOKEN_URI"
for label in rsa2048 rsa3072 p256; do
    for type in private public; do
        cs_expect "$T/all.txt" "URL: pkcs11:.*object=$label;type=$type" "--list-all --login does not show the $type key $label"
    done
done
cs_expect "$T/all.txt" "Type: Private key \(RSA-2048\)" "rsa2048 is not shown as an RSA-2048 private key"
cs_expect "$T/all.txt" "Type: Private key \(EC/ECDSA-SECP256R1\)" "p256 is not shown as an EC P-256 private key"
cs_log "--list-all --login: private and public keys rsa2048, rsa3072, p256 (no private key before login)"

for label in rsa2048 rsa3072 p256; do
    p11_ok "$label: export public key" "$T/$label.export.log" --login --set-pin "$CRYPTOSERVER_PIN" --export-pubkey --outfile "$T/$label.export" "$TOKEN_URI;object=$label;type=public"
    openssl pkey -pubin -in "$T/$label.export" -out "$T/$label.pub.pem" 2>/dev/null \
        || { cat "$T/$label.export"; cs_fail "$label: openssl cannot read p11tool's exported key"; }
    cmp -s "$T/$label.pub.pem" "$KEYS/$label.pub.pem" || cs_fail "$label: exported public key differs from $label.pub.pem"
done
cs_log "--export-pubkey: rsa2048, rsa3072, p256 equal the demo public keys"

# test_sign LABEL EXPECT [OPTIONS...]: --test-sign on the private key LABEL.
test_sign () {
    local label=$1 expect=$2
    shift 2
    p11_ok "$label: --test-sign" "$T/sign.txt" --login --set-pin "$CRYPTOSERVER_PIN" --test-sign "$@" \
        "$TOKEN_URI;object=$label;type=private"
    cs_expect "$T/sign.txt" "^Signing using $expect\.\.\. ok" "$label: p11tool did not sign with $expect"
    cs_expect "$T/sign.txt" "^Verifying against private key parameters\.\.\. ok" "$label: GnuTLS does not verify the signature"
    cs_expect "$T/sign.txt" "^Verifying against public key in the token\.\.\. ok" "$label: the token's public key does not verify the signature"
    cs_log "$label: --test-sign $expect: signed on the token, verified by GnuTLS"
}
test_sign rsa2048 RSA-SHA256
test_sign rsa3072 RSA-PSS-SHA256 --sign-params RSA-PSS
test_sign p256 ECDSA-SHA256

# ---- key generation ----------------------------------------------------------
if ! p11 "$T/gen.txt" --login --set-pin "$CRYPTOSERVER_PIN" --generate-privkey rsa --bits 2048 \
        --label gen1 --outfile "$T/gen1.pub.pem" "$TOKEN_URI"; then
    cat "$T/gen.txt"
    if grep -qiE "unsupported feature|not supported|FUNCTION_NOT_SUPPORTED" "$T/gen.txt"; then
        cs_fail "listing and signing passed, but --generate-privkey fails: the module has no C_GenerateKeyPair yet (CKR_FUNCTION_NOT_SUPPORTED)"
    fi
    cs_fail "p11tool --generate-privkey rsa --bits 2048 --label gen1 failed"
fi
p11_ok "gen1: list" "$T/gen-list.txt" --login --set-pin "$CRYPTOSERVER_PIN" --list-all "$TOKEN_URI;object=gen1"
cs_expect "$T/gen-list.txt" "object=gen1;type=private" "gen1: the generated private key is not listed"
cs_expect "$T/gen-list.txt" "Type: Private key \(RSA-2048\)" "gen1: not an RSA-2048 private key"
test_sign gen1 RSA-SHA256
p11_ok "gen1: delete" "$T/delete.txt" --login --set-pin "$CRYPTOSERVER_PIN" --batch --delete "$TOKEN_URI;object=gen1"
# p11tool exits 2 ("No matching objects found") when nothing is left.
p11 "$T/gen-list.txt" --login --set-pin "$CRYPTOSERVER_PIN" --list-all "$TOKEN_URI;object=gen1" || true
grep -q "object=gen1" "$T/gen-list.txt" && { cat "$T/gen-list.txt"; cs_fail "gen1 is still listed after --delete"; }
cs_expect "$T/delete.txt" "2 objects deleted" "gen1: --delete did not delete the key pair"
cs_log "gen1: generated (RSA 2048), listed, signed and verified, deleted"
cs_log "all p11tool checks passed"
