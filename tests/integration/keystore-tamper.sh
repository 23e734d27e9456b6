#!/bin/bash
# keystore-tamper.sh — rows of keystore.db changed with the sqlite3 CLI, by
# someone without the master key, are refused by the running broker
# (cryptoserver-keystore(5) "Integrity"), with an E: line naming the row:
#  1. a tenant row whose wrong-PIN counter was reset: C_Login gives
#     CKR_DEVICE_ERROR (the right PIN too), until the row is put back;
#  2. a tenant row whose user PIN hash was replaced by another tenant's (a
#     PIN the attacker knows): CKR_DEVICE_ERROR, not a login;
#  3. a key whose description was changed to allow decryption (can_decrypt
#     flipped): a session that knew the key gets CKR_DEVICE_ERROR for it,
#     new sessions do not see it, and nothing decrypts with it.
. "$(dirname "$0")/lib.sh"

cs_setup --tenant other:5678:567890
cs_require sqlite3
cs_start
T=$WORK/tmp
mkdir -p "$T"
DB=$WORK/keystore.db
sql () { sqlite3 -cmd ".timeout 5000" "$DB" "$@"; }
cs_expect_broker_log '^E: .* keystore .*: tenant demo: row does not verify \(changed without the master key\): refused$'
cs_expect_broker_log '^E: .* keystore .*: key ks:[0-9a-f]{32} of tenant demo: row does not verify \(changed without the master key\): refused$'
cs_expect_broker_log '^W: .* login: CKR_DEVICE_ERROR as user from client demo \(tenant demo\)$'
cs_expect_broker_log '^W: .* login: CKR_PIN_INCORRECT as user from client demo \(tenant demo\): 1 of 5 wrong PINs in a row$'
login () { $P11 --login --pin "$1" -O > "$T/login.log" 2>&1; }

# ---- 1. the wrong-PIN counter reset ------------------------------------------
cs_expect_refusal CKR_PIN_INCORRECT "a wrong PIN" "$T/login.log" $P11 --login --pin 9999 -O
[ "$(sql "SELECT user_failures FROM tenants WHERE name = 'demo'")" = 1 ] \
    || cs_fail "the wrong PIN is not counted in keystore.db"
sql "UPDATE tenants SET user_failures = 0 WHERE name = 'demo'"
cs_expect_refusal CKR_DEVICE_ERROR "login after the failure counter was reset in keystore.db" \
    "$T/login.log" $P11 --login --pin 1234 -O
grep -q "E: .* tenant demo: row does not verify" "$WORK/broker.log" \
    || cs_fail "no error line names the changed tenant row"
sql "UPDATE tenants SET user_failures = 1 WHERE name = 'demo'"
login 1234 || { cat "$T/login.log"; cs_fail "the row put back as it was does not verify"; }
cs_log "a reset failure counter is refused; the row put back verifies again"

# ---- 2. the PIN hash replaced by another tenant's ------------------------------
ORIGINAL=$(sql "SELECT user_pin FROM tenants WHERE name = 'demo'")
sql "UPDATE tenants SET user_pin = (SELECT user_pin FROM tenants WHERE name = 'other') WHERE name = 'demo'"
cs_expect_refusal CKR_DEVICE_ERROR "login with tenant other's PIN after its hash was copied" \
    "$T/login.log" $P11 --login --pin 5678 -O
sql "UPDATE tenants SET user_pin = '$ORIGINAL' WHERE name = 'demo'"
login 1234 || { cat "$T/login.log"; cs_fail "demo's own PIN hash put back does not verify"; }
cs_p11_as other --login --pin 5678 -O > "$T/other.log" 2>&1 \
    || { cat "$T/other.log"; cs_fail "tenant other suffered from demo's row"; }
cs_log "a PIN hash copied from another tenant is refused"

# ---- 3. a key's usage flags changed --------------------------------------------
cs_shell_start app demo
cs_shell app CKR_OK login 1234
cs_shell app CKR_OK keygen-signer 77 tamper      # CKA_DECRYPT FALSE
[ "$(sql "SELECT count (*) FROM keys WHERE tenant = 'demo'")" = 1 ] || cs_fail "no keystore row for the key"
cs_pubkey_pem "$P11" 77 "$T/pub.pem" || cs_fail "cannot read the public key"
echo "tamper test plaintext" > "$T/plain.txt"
openssl pkeyutl -encrypt -pubin -inkey "$T/pub.pem" -pkeyopt rsa_padding_mode:pkcs1 \
    -in "$T/plain.txt" -out "$T/cipher.bin" || cs_fail "openssl cannot encrypt"
decrypt () { $P11 --login --pin 1234 --decrypt --id 77 -m RSA-PKCS -i "$T/cipher.bin" -o "$T/out.txt"; }
cs_expect_refusal CKR_KEY_FUNCTION_NOT_PERMITTED "decrypt with a signing-only key" "$T/decrypt.log" decrypt
cs_shell app CKR_OK sign 77
sql "UPDATE keys SET info = CAST (info || x'5001' AS BLOB) WHERE tenant = 'demo'"
cs_shell app CKR_DEVICE_ERROR sign 77
rm -f "$T/out.txt"
rc=0
cs_run_bounded $((60 * CS_TIME_FACTOR)) "$T/decrypt.log" decrypt || rc=$?
[ "$rc" != 0 ] && [ "$rc" -lt 124 ] || { cat "$T/decrypt.log"; cs_fail "decrypt with the changed key: status $rc"; }
! grep -qs "tamper test plaintext" "$T/out.txt" "$T/decrypt.log" || cs_fail "the changed key decrypted"
cs_broker_alive || cs_fail "the broker died"
$P11 --login --pin 1234 -O > "$T/list.log" 2>&1 || { cat "$T/list.log"; cs_fail "listing failed"; }
! grep -q "label: *tamper" "$T/list.log" || cs_fail "the changed key is still listed"
grep -q "E: .* key ks:[0-9a-f]* of tenant demo: row does not verify" "$WORK/broker.log" \
    || cs_fail "no error line names the changed key row"
cs_shell app CKR_OK sign 01                  # the tenant's other keys still work
cs_shell_stop app
cs_log "a key whose usage flags changed is refused (CKR_DEVICE_ERROR) and no longer listed"
cs_stop
