#!/bin/bash
# keys-generate.sh — token keys made with pkcs11-tool --keypairgen (RSA-2048,
# P-256, Ed25519: standard templates, no vendor attributes) sign
# (SHA256-RSA-PKCS, ECDSA-SHA256, EDDSA), openssl verifies, and after a
# broker restart they are still listed and still sign.
. "$(dirname "$0")/lib.sh"

cs_setup
cs_start
T=$WORK/tmp
mkdir -p "$T"
P11L="$P11 --login --pin $CRYPTOSERVER_PIN"
# label:id:pkcs11-tool key type:kind
KEYS="g-rsa:61:rsa:2048:rsa g-p256:62:EC:prime256v1:ec g-ed:63:EC:edwards25519:ed"

for entry in $KEYS; do
    IFS=: read -r label id t1 t2 kind <<<"$entry"
    cs_run_bounded 120 "$T/gen.log" $P11L --keypairgen --key-type "$t1:$t2" --label "$label" --id "$id" \
        --usage-sign || { cat "$T/gen.log"; cs_fail "--keypairgen $t1:$t2 failed"; }
    cs_pubkey_pem "$P11" "$id" "$T/$label.pub.pem" || cs_fail "$label: cannot read its public key"
    cs_sign_verify "$P11" "$id" "$kind" "$T/$label.pub.pem" "$T" || cs_fail "$label: sign/verify failed"
    cs_log "$label ($t1:$t2) generated; its signature verifies"
done

rows=$(cs_keystore_rows demo)
[ "$rows" -ge 3 ] || cs_fail "the keystore holds $rows keys of tenant demo, not the 3 generated"

cs_stop
cs_start
$P11L -O > "$T/objects.txt" 2>&1 || cs_fail "pkcs11-tool -O failed after the restart"
for entry in $KEYS; do
    IFS=: read -r label id t1 t2 kind <<<"$entry"
    grep -A1 "Private Key Object" "$T/objects.txt" | grep -q "label: *$label\$" \
        || { cat "$T/objects.txt"; cs_fail "$label is not listed after the restart"; }
    cs_sign_verify "$P11" "$id" "$kind" "$T/$label.pub.pem" "$T" \
        || cs_fail "$label: sign/verify failed after the restart"
done
cs_log "after a broker restart all three keys are listed and sign"
