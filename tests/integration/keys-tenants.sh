#!/bin/bash
# keys-tenants.sh — tenants are separate tokens: a new tenant has no objects
# at all, and tenant alpha's keys cannot be found, used or destroyed by
# tenant beta (nor the demo tenant's board keys by either).
. "$(dirname "$0")/lib.sh"

cs_setup --tenant alpha --tenant beta
cs_start
T=$WORK/tmp
mkdir -p "$T"
PIN=$CRYPTOSERVER_PIN           # demo-deploy gives extra tenants PIN 1234 too

# A new tenant: no objects, logged in or not.
for who in alpha beta; do
    cs_p11_as $who -L > "$T/$who.L" 2>&1 || { cat "$T/$who.L"; cs_fail "$who: -L failed"; }
    grep -Eq "token label *: *$who\$" "$T/$who.L" || { cat "$T/$who.L"; cs_fail "$who: token label is not $who"; }
    cs_p11_as $who --login --pin "$PIN" -O > "$T/$who.O" 2>&1 || { cat "$T/$who.O"; cs_fail "$who: -O failed"; }
    if grep -q "Object" "$T/$who.O"; then cat "$T/$who.O"; cs_fail "new tenant $who has objects"; fi
done
cs_log "new tenants alpha and beta: own token labels, no objects at all"

cs_p11_as alpha --login --pin "$PIN" --keypairgen --key-type EC:prime256v1 --label a-key --id a1 \
    --usage-sign > "$T/gen.log" 2>&1 || { cat "$T/gen.log"; cs_fail "alpha: --keypairgen failed"; }
cs_pubkey_pem "cs_p11_as alpha" a1 "$T/a.pub.pem" || cs_fail "alpha: cannot read its public key"
cs_sign_verify "cs_p11_as alpha" a1 ec "$T/a.pub.pem" "$T" || cs_fail "alpha cannot use its own key"
cs_log "alpha generated a-key and signs with it"

cs_p11_as beta --login --pin "$PIN" -O > "$T/beta.O" 2>&1 || cs_fail "beta: -O failed"
grep -q "a-key\|Object" "$T/beta.O" && { cat "$T/beta.O"; cs_fail "beta sees objects (alpha's key?)"; }
# beta's token has no object with alpha's CKA_ID: signing and deleting end
# in pkcs11-tool's "not found", an ordinary error exit, never a crash.
rc=0
cs_run_bounded 60 "$T/beta-sign.log" cs_p11_as beta --login --pin "$PIN" --sign --id a1 \
    --mechanism ECDSA-SHA256 -i "$T/gen.log" -o "$T/beta.sig" || rc=$?
[ "$rc" = 1 ] && grep -q "Private key not found" "$T/beta-sign.log" \
    || { cat "$T/beta-sign.log"; cs_fail "beta signing with alpha's CKA_ID: status $rc, not 'Private key not found'"; }
[ ! -s "$T/beta.sig" ] || cs_fail "beta got a signature with alpha's key"
rc=0
cs_run_bounded 60 "$T/del.log" cs_p11_as beta --login --pin "$PIN" --delete-object --type privkey --id a1 || rc=$?
[ "$rc" = 1 ] && grep -q "object not found" "$T/del.log" \
    || { cat "$T/del.log"; cs_fail "beta deleting alpha's CKA_ID: status $rc, not 'object not found'"; }
cs_broker_alive || cs_fail "the broker died"
cs_sign_verify "cs_p11_as alpha" a1 ec "$T/a.pub.pem" "$T" \
    || cs_fail "alpha's key is gone or unusable after beta tried to delete it"
[ "$(cs_keystore_rows beta)" = 0 ] || cs_fail "the keystore has rows for beta"
[ "$(cs_keystore_rows alpha)" = 1 ] || cs_fail "the keystore does not have alpha's one key"
cs_log "beta cannot list, use or delete alpha's key"

# The demo tenant's board keys (boards have tenant = demo) are not alpha's.
cs_p11_as alpha --login --pin "$PIN" -O > "$T/alpha.O" 2>&1 || cs_fail "alpha: -O failed"
grep -q "rsa2048\|rsa3072\|p256" "$T/alpha.O" && { cat "$T/alpha.O"; cs_fail "alpha sees demo's board keys"; }
$P11 --login --pin "$CRYPTOSERVER_PIN" -O > "$T/demo.O" 2>&1 || cs_fail "demo: -O failed"
grep -q "a-key" "$T/demo.O" && cs_fail "demo sees alpha's key"
grep -q "rsa2048" "$T/demo.O" || { cat "$T/demo.O"; cs_fail "demo no longer sees its board keys"; }
cs_log "board keys belong to demo only; demo does not see alpha's key"

"$CS_ADMIN" tenant remove alpha --dir "$WORK" >/dev/null || cs_fail "tenant remove alpha failed"
[ "$(cs_keystore_rows beta)" = 0 ] || cs_fail "removing alpha touched beta"
cs_log "tenant remove alpha: done"
