#!/bin/bash
# keys-home-board.sh — issue #7: with keys/home = board0 (a board of tenant
# demo), tenant alpha's generated keys live on board0 as keystore ("ks:")
# objects.  After a broker restart they are in board0's key list, yet they
# stay alpha's: demo, the board's tenant, neither finds nor uses them, alpha
# still does, and neither tenant reaches the other's keys.
. "$(dirname "$0")/lib.sh"

cs_setup --tenant alpha
"$CS_ADMIN" config set "$WORK/broker.conf" keys/home board0
cs_start
T=$WORK/tmp
mkdir -p "$T"
PIN=$CRYPTOSERVER_PIN           # demo-deploy gives extra tenants PIN 1234 too
SOFTHSM=${SOFTHSM2_MODULE:-/usr/lib/softhsm/libsofthsm2.so}

cs_p11_as alpha --login --pin "$PIN" --keypairgen --key-type rsa:2048 --label a-key --id a1 \
    --usage-sign > "$T/gen.log" 2>&1 || { cat "$T/gen.log"; cs_fail "alpha: --keypairgen failed"; }
pkcs11-tool --module "$SOFTHSM" --token-label board0 --login --pin "$CRYPTOSERVER_BOARD_PIN" -O \
    --type privkey > "$T/board0.O" 2>&1 || { cat "$T/board0.O"; cs_fail "cannot list board0"; }
resident_id=$(awk '/label: *ks:/ { found = 1 } found && /ID:/ { print $2; exit }' "$T/board0.O")
[ -n "$resident_id" ] || { cat "$T/board0.O"; cs_fail "alpha's key is not on board0 as a ks: object"; }
cs_log "alpha's key a-key lives on board0 (tenant demo) with CKA_ID $resident_id there"

# A restart: the broker now finds alpha's key in board0's key list.
cs_stop
cs_start
cs_pubkey_pem "cs_p11_as alpha" a1 "$T/a.pub.pem" || cs_fail "alpha: cannot read its public key"
cs_sign_verify "cs_p11_as alpha" a1 rsa "$T/a.pub.pem" "$T" || cs_fail "alpha cannot sign with its key after a restart"
cs_log "after a restart alpha still signs with a-key"

$P11 --login --pin "$PIN" -O > "$T/demo.O" 2>&1 || { cat "$T/demo.O"; cs_fail "demo: -O failed"; }
if grep -Eqi "a-key|label: *ks:|ID: *($resident_id|a1)\$" "$T/demo.O"; then
    cat "$T/demo.O"
    cs_fail "demo (board0's tenant) finds alpha's key"
fi
for id in "$resident_id" a1; do
    rc=0
    cs_run_bounded $((60 * CS_TIME_FACTOR)) "$T/demo-sign.log" $P11 --login --pin "$PIN" --sign \
        --id "$id" --mechanism SHA256-RSA-PKCS -i "$T/gen.log" -o "$T/demo.sig" || rc=$?
    [ "$rc" = 1 ] && grep -q "Private key not found" "$T/demo-sign.log" \
        || { cat "$T/demo-sign.log"; cs_fail "demo signing with CKA_ID $id: status $rc, not 'Private key not found'"; }
    [ ! -s "$T/demo.sig" ] || cs_fail "demo got a signature with alpha's key"
done
cs_sign_verify "$P11" 01 rsa "$KEYS/rsa2048.pub.pem" "$T" || cs_fail "demo cannot sign with its board key"
cs_log "demo neither finds nor uses alpha's key on its board; its own board keys work"

cs_p11_as alpha --login --pin "$PIN" -O > "$T/alpha.O" 2>&1 || cs_fail "alpha: -O failed"
grep -q "rsa2048\|rsa3072\|p256" "$T/alpha.O" && { cat "$T/alpha.O"; cs_fail "alpha sees demo's board keys"; }
cs_log "alpha does not see demo's board keys"
