#!/bin/bash
# secret-token.sh — token secret keys (issue #10): AES keys held by the
# broker, sealed in the tenant's keystore, used by reference.
#   - pkcs11-tool --keygen --key-type AES:32 (CKA_TOKEN TRUE) makes one,
#     --list-objects --type secrkey lists it, and an AES-CBC-PAD
#     --encrypt/--decrypt round trip works; its CKA_VALUE is
#     CKR_ATTRIBUTE_SENSITIVE;
#   - a key written with a known value (pkcs11-tool --write-object --type
#     secrkey) encrypts to exactly what `openssl enc -aes-256-cbc` makes;
#     the value is in neither the keystore file nor the broker's log;
#   - another tenant neither lists nor uses them;
#   - destroyed: gone from the keystore (sqlite3 on keystore.db), and a
#     process that still holds its handle gets CKR_KEY_HANDLE_INVALID from
#     the broker;
#   - the keys survive a broker restart.
. "$(dirname "$0")/lib.sh"

cs_require pkcs11-tool sqlite3 openssl
cs_setup --tenant alpha --tenant beta
cs_start
T=$WORK/tmp
mkdir -p "$T"
PIN=$CRYPTOSERVER_PIN           # demo-deploy gives extra tenants PIN 1234 too
IV=000102030405060708090a0b0c0d0e0f

# rows of tenant's keys table whose ref is REF (sqlite3 on the file itself).
ks_ref_rows () {
    sqlite3 "$WORK/keystore.db" "SELECT count(*) FROM keys WHERE tenant = '$1' AND ref = '$2';"
}
ks_refs () {
    sqlite3 "$WORK/keystore.db" "SELECT ref FROM keys WHERE tenant = '$1' ORDER BY ref;"
}

# 1. Generated on the broker, listed, used.
cs_p11_as alpha --login --pin "$PIN" --keygen --key-type AES:32 --label k-gen --id 51 \
    > "$T/keygen.log" 2>&1 || { cat "$T/keygen.log"; cs_fail "alpha: --keygen --key-type AES:32 failed"; }
cs_p11_as alpha --login --pin "$PIN" --list-objects --type secrkey > "$T/list.log" 2>&1 \
    || { cat "$T/list.log"; cs_fail "alpha: --list-objects --type secrkey failed"; }
grep -q "Secret Key Object; AES length 32" "$T/list.log" && grep -q "label: *k-gen" "$T/list.log" \
    && grep -q "ID: *51" "$T/list.log" && grep -q "Usage: *encrypt, decrypt" "$T/list.log" \
    && grep -q "Access:.*local" "$T/list.log" \
    || { cat "$T/list.log"; cs_fail "alpha's listing lacks the AES-256 token key k-gen (id 51, encrypt, decrypt, local)"; }
[ "$(ks_refs alpha | wc -l)" = 1 ] || cs_fail "the keystore does not hold alpha's one key"
GEN_REF=$(ks_refs alpha)
cs_log "pkcs11-tool --keygen AES:32 made token key $GEN_REF; --list-objects --type secrkey shows it"

head -c 1000 /dev/urandom > "$T/plain.bin"
cs_p11_as alpha --login --pin "$PIN" --encrypt --id 51 -m AES-CBC-PAD --iv "$IV" \
    -i "$T/plain.bin" -o "$T/gen.ct" > "$T/enc.log" 2>&1 || { cat "$T/enc.log"; cs_fail "--encrypt with k-gen failed"; }
[ "$(stat -c %s "$T/gen.ct")" = 1008 ] || cs_fail "AES-CBC-PAD of 1000 bytes is not 1008 bytes"
cs_p11_as alpha --login --pin "$PIN" --decrypt --id 51 -m AES-CBC-PAD --iv "$IV" \
    -i "$T/gen.ct" -o "$T/gen.back" > "$T/dec.log" 2>&1 || { cat "$T/dec.log"; cs_fail "--decrypt with k-gen failed"; }
cmp -s "$T/gen.back" "$T/plain.bin" || cs_fail "k-gen: decrypt(encrypt(x)) is not x"
cmp -s "$T/gen.ct" "$T/plain.bin" && cs_fail "k-gen: the ciphertext is the plaintext"
cs_log "AES-CBC-PAD --encrypt/--decrypt round trip with the generated token key"

# 2. A known value written as a token key: the same ciphertext as openssl enc.
head -c 32 /dev/urandom > "$T/key.bin"
cs_p11_as alpha --login --pin "$PIN" --write-object "$T/key.bin" --type secrkey --key-type AES:32 \
    --label k-imp --id 52 > "$T/write.log" 2>&1 || { cat "$T/write.log"; cs_fail "--write-object of a secret key failed"; }
[ "$(ks_refs alpha | wc -l)" = 2 ] || cs_fail "the keystore does not hold alpha's two keys"
K=$(od -An -tx1 -v "$T/key.bin" | tr -d ' \n')
openssl enc -aes-256-cbc -K "$K" -iv "$IV" -in "$T/plain.bin" -out "$T/openssl.ct"
cs_p11_as alpha --login --pin "$PIN" --encrypt --id 52 -m AES-CBC-PAD --iv "$IV" \
    -i "$T/plain.bin" -o "$T/imp.ct" > "$T/enc2.log" 2>&1 || { cat "$T/enc2.log"; cs_fail "--encrypt with k-imp failed"; }
cmp -s "$T/imp.ct" "$T/openssl.ct" || cs_fail "the token key's AES-256-CBC-PAD ciphertext differs from openssl enc's"
cs_log "a token key written with a known value encrypts exactly as openssl enc -aes-256-cbc"

# Its value is sealed: CKA_VALUE is sensitive, and no copy is in the clear.
cs_shell_start holder alpha
cs_shell holder CKR_OK login "$PIN"
cs_shell holder CKR_OK hold-secret 52
cs_shell holder CKR_ATTRIBUTE_SENSITIVE value-held
cs_shell holder CKR_OK hold-secret 51
cs_shell holder CKR_OK encrypt-held

# 3. Another tenant neither lists nor uses them.
cs_p11_as beta --login --pin "$PIN" --list-objects --type secrkey > "$T/beta.log" 2>&1 || cs_fail "beta: -O failed"
grep -q "k-gen\|k-imp\|Secret Key" "$T/beta.log" && { cat "$T/beta.log"; cs_fail "beta sees alpha's secret keys"; }
rc=0
cs_run_bounded $((60 * CS_TIME_FACTOR)) "$T/beta-enc.log" cs_p11_as beta --login --pin "$PIN" --encrypt --id 52 \
    -m AES-CBC-PAD --iv "$IV" -i "$T/plain.bin" -o "$T/beta.ct" || rc=$?
[ "$rc" = 1 ] || { cat "$T/beta-enc.log"; cs_fail "beta encrypting with alpha's CKA_ID: status $rc"; }
[ ! -s "$T/beta.ct" ] || cs_fail "beta got a ciphertext with alpha's key"
[ "$(ks_refs beta | wc -l)" = 0 ] || cs_fail "the keystore has rows for beta"
cs_log "beta neither lists nor uses alpha's secret keys"

# 4. Destroyed: the row is gone, and a job naming its ref fails at the broker.
cs_p11_as alpha --login --pin "$PIN" --delete-object --type secrkey --id 51 > "$T/del.log" 2>&1 \
    || { cat "$T/del.log"; cs_fail "--delete-object --type secrkey failed"; }
[ "$(ks_ref_rows alpha "$GEN_REF")" = 0 ] || cs_fail "the destroyed key's row $GEN_REF is still in the keystore"
[ "$(ks_refs alpha | wc -l)" = 1 ] || cs_fail "destroying k-gen took other rows with it"
cs_shell holder CKR_KEY_HANDLE_INVALID encrypt-held
cs_shell_stop holder
cs_p11_as alpha --login --pin "$PIN" --list-objects --type secrkey > "$T/list2.log" 2>&1 || cs_fail "alpha: -O failed"
grep -q "k-gen" "$T/list2.log" && { cat "$T/list2.log"; cs_fail "the destroyed key is still listed"; }
cs_log "destroyed: row $GEN_REF gone from keystore.db; a held handle gets CKR_KEY_HANDLE_INVALID"

# 5. The keys survive a broker restart (the cache is gone: read from the file).
cs_stop
cs_start
rm -f "$T/imp.ct"
cs_p11_as alpha --login --pin "$PIN" --encrypt --id 52 -m AES-CBC-PAD --iv "$IV" \
    -i "$T/plain.bin" -o "$T/imp.ct" > "$T/enc3.log" 2>&1 || { cat "$T/enc3.log"; cs_fail "--encrypt after a restart failed"; }
cmp -s "$T/imp.ct" "$T/openssl.ct" || cs_fail "after a restart the token key encrypts differently"
cs_log "after a broker restart k-imp still encrypts as openssl enc does"

cs_stop
python3 - "$T/key.bin" "$WORK/keystore.db" "$WORK/broker.log" <<'PY' || cs_fail "the imported AES key value is on disk or in the log"
import sys
key = open(sys.argv[1], "rb").read()
for path in sys.argv[2:]:
    data = open(path, "rb").read()
    for i in range(len(key) - 15):
        if key[i:i + 16] in data or key[i:i + 16].hex().encode() in data:
            sys.exit(1)
PY
shred -u "$T/key.bin" 2>/dev/null || true
cs_log "the imported value is neither in keystore.db nor in the broker log"
