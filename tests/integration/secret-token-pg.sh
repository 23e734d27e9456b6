#!/bin/bash
# secret-token-pg.sh — token secret keys (issue #10) in a PostgreSQL
# keystore (keystore/url, private cluster): pkcs11-tool --keygen
# --key-type AES:32 makes a row in the database's keys table, an
# AES-CBC-PAD round trip works, a key written with a known value encrypts
# as `openssl enc` does also after a broker restart, the value is in no
# file of the cluster, and --delete-object removes the row.
. "$(dirname "$0")/lib.sh"

cs_require pkcs11-tool openssl
cs_setup
cs_pg_start
T=$WORK/tmp
mkdir -p "$T"
PIN=$CRYPTOSERVER_PIN
IV=0f0e0d0c0b0a09080706050403020100

# The deployment's keystore moves to PostgreSQL (as keystore-shared.sh does).
sed -i '/^    path = "keystore.db"$/d' "$WORK/broker.conf"
"$CS_ADMIN" config set "$WORK/broker.conf" keystore/url "$CS_PG_URL"
rm -f "$WORK/keystore.db"*
"$CS_ADMIN" tenant add demo --pin "$PIN" --so-pin 123456 --dir "$WORK" > "$T/admin.log" 2>&1 \
    || { cat "$T/admin.log"; cs_fail "cryptoserver-admin cannot add the tenant to the PostgreSQL keystore"; }
cs_start
rows () { cs_psql cryptoserver -tAc "SELECT count(*) FROM keys WHERE tenant = 'demo'"; }

$P11 --login --pin "$PIN" --keygen --key-type AES:32 --label pg-gen --id 61 > "$T/keygen.log" 2>&1 \
    || { cat "$T/keygen.log"; cs_fail "--keygen --key-type AES:32 failed on a PostgreSQL keystore"; }
[ "$(rows)" = 1 ] || cs_fail "no row in PostgreSQL for the generated AES key"
head -c 777 /dev/urandom > "$T/plain.bin"
$P11 --login --pin "$PIN" --encrypt --id 61 -m AES-CBC-PAD --iv "$IV" -i "$T/plain.bin" -o "$T/ct" > "$T/e.log" 2>&1 \
    || { cat "$T/e.log"; cs_fail "--encrypt failed"; }
$P11 --login --pin "$PIN" --decrypt --id 61 -m AES-CBC-PAD --iv "$IV" -i "$T/ct" -o "$T/back" > "$T/d.log" 2>&1 \
    || { cat "$T/d.log"; cs_fail "--decrypt failed"; }
cmp -s "$T/back" "$T/plain.bin" || cs_fail "decrypt(encrypt(x)) is not x"
cs_log "a token AES key generated into PostgreSQL: AES-CBC-PAD round trip"

head -c 24 /dev/urandom > "$T/key.bin"
$P11 --login --pin "$PIN" --write-object "$T/key.bin" --type secrkey --key-type AES:24 --label pg-imp --id 62 \
    > "$T/w.log" 2>&1 || { cat "$T/w.log"; cs_fail "--write-object of a secret key failed"; }
[ "$(rows)" = 2 ] || cs_fail "no row in PostgreSQL for the written AES key"
K=$(od -An -tx1 -v "$T/key.bin" | tr -d ' \n')
openssl enc -aes-192-cbc -K "$K" -iv "$IV" -in "$T/plain.bin" -out "$T/openssl.ct"
cs_stop
cs_start
$P11 --login --pin "$PIN" --encrypt --id 62 -m AES-CBC-PAD --iv "$IV" -i "$T/plain.bin" -o "$T/imp.ct" > "$T/e2.log" 2>&1 \
    || { cat "$T/e2.log"; cs_fail "--encrypt with the written key failed after a restart"; }
cmp -s "$T/imp.ct" "$T/openssl.ct" || cs_fail "the written AES-192 key encrypts differently from openssl enc"
cs_log "a written AES-192 key, read from PostgreSQL after a restart, encrypts as openssl enc"

$P11 --login --pin "$PIN" --delete-object --type secrkey --id 61 > "$T/del.log" 2>&1 \
    || { cat "$T/del.log"; cs_fail "--delete-object failed"; }
[ "$(rows)" = 1 ] || cs_fail "the destroyed key's row is still in PostgreSQL"
cs_stop
python3 - "$T/key.bin" "$WORK/pg" "$WORK/broker.log" <<'PY' || cs_fail "the written AES key value is in a file of the cluster or the log"
import os, sys
key = open(sys.argv[1], "rb").read()
paths = [sys.argv[3]]
for root, _, files in os.walk(sys.argv[2]):
    paths += [os.path.join(root, f) for f in files]
for path in paths:
    try:
        data = open(path, "rb").read()
    except OSError:
        continue
    for i in range(len(key) - 15):
        if key[i:i + 16] in data or key[i:i + 16].hex().encode() in data:
            sys.exit(1)
PY
shred -u "$T/key.bin" 2>/dev/null || true
cs_log "destroyed: the row left PostgreSQL; the written value is in no file of the cluster"
