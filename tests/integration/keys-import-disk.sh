#!/bin/bash
# keys-import-disk.sh — a known RSA and EC private key imported as token
# objects through the module (pkcs11-tool --write-object ... --type privkey)
# sign correctly, and neither the raw keystore.db, its -wal file nor the
# broker's log holds a 16-byte window of p, q, d (or the EC scalar).
. "$(dirname "$0")/lib.sh"

cs_setup
cs_start
T=$WORK/tmp
mkdir -p "$T"
P11L="$P11 --login --pin $CRYPTOSERVER_PIN"

openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$T/rsa.pem" 2>/dev/null
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -pkeyopt ec_param_enc:named_curve \
    -out "$T/ec.pem"
rows_before=$(cs_keystore_rows demo)
for key in rsa ec; do
    openssl pkey -in "$T/$key.pem" -outform DER -out "$T/$key.der"
    openssl pkey -in "$T/$key.pem" -pubout -out "$T/$key.pub.pem"
done
$P11L --write-object "$T/rsa.der" --type privkey --id 51 --label imp-rsa --usage-sign \
    > "$T/w.log" 2>&1 || { cat "$T/w.log"; cs_fail "import of the RSA key failed"; }
$P11L --write-object "$T/ec.der" --type privkey --id 52 --label imp-ec --usage-sign \
    > "$T/w.log" 2>&1 || { cat "$T/w.log"; cs_fail "import of the EC key failed"; }
cs_log "imported RSA-2048 (id 51) and P-256 (id 52) as token keys"

[ "$(cs_keystore_rows demo)" -ge $((rows_before + 2)) ] \
    || cs_fail "the keystore does not hold the two imported keys"
$P11L -O > "$T/objects.txt" 2>&1 || cs_fail "pkcs11-tool -O failed"
for label in imp-rsa imp-ec; do
    grep -A1 "Private Key Object" "$T/objects.txt" | grep -q "label: *$label\$" \
        || { cat "$T/objects.txt"; cs_fail "imported key $label is not listed"; }
done
cs_sign_verify "$P11" 51 rsa "$T/rsa.pub.pem" "$T" || cs_fail "imported RSA key: sign/verify failed"
cs_sign_verify "$P11" 52 ec "$T/ec.pub.pem" "$T" || cs_fail "imported EC key: sign/verify failed"
cs_log "both imported keys sign; openssl verifies"

# While the broker runs the rows may sit in the WAL; after a clean stop, in the file.
for key in rsa ec; do
    cs_no_secret_in "$T/$key.pem" "$WORK/keystore.db" "$WORK/keystore.db-wal" "$WORK/broker.log"
done
cs_stop
for key in rsa ec; do
    cs_no_secret_in "$T/$key.pem" "$WORK/keystore.db" "$WORK/keystore.db-wal" "$WORK/broker.log"
done
shred -u "$T"/*.pem "$T"/*.der 2>/dev/null || true
cs_log "no private window in keystore.db, keystore.db-wal or broker.log"
