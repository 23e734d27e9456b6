#!/bin/bash
# objects.sh — certificates and data objects (issue #10) with third-party
# clients:
#   - pkcs11-tool --write-object --type cert (a certificate of the token's
#     rsa2048 key made by openssl req through the pkcs11 engine) needs a
#     login; then pkcs11-tool -O lists it without login, --read-object gives
#     the same DER, and p11tool --list-all-certs lists it;
#   - --write-object --type data with --application-label round trips; a
#     data object with --private is invisible before login;
#   - PyKCS11 (clients/objects_test.py): a certificate made from CKA_VALUE
#     alone gets CKA_SUBJECT/ISSUER/SERIAL_NUMBER/CHECK_VALUE from the
#     module; the session, login and change rules with exact CKR codes;
#   - Java keytool -list -storetype PKCS11 (SunPKCS11) shows a
#     PrivateKeyEntry for rsa2048 once its certificate is on the token with
#     the key's CKA_ID, and the entry's certificate is ours (SHA-256
#     fingerprint);
#   - a data object's row changed with sqlite3 is refused by the broker and
#     no longer shown;
#   - --delete-object removes a certificate;
#   - everything survives a broker restart (keystore rows), and tenant
#     alpha sees none of demo's objects.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/clients/common.sh"

cs_require p11tool openssl timeout cmp
cs_pkcs11_engine_ok || cs_missing_dependency "OpenSSL engine pkcs11 not available (install libengine-pkcs11-openssl)"
cs_setup --tenant alpha
cs_client_trap
cs_start
T=$WORK/tmp
mkdir -p "$T"
PIN=$CRYPTOSERVER_PIN
export PKCS11_MODULE_PATH=$CRYPTOSERVER_MODULE

# run_ok WHAT OUT COMMAND...: COMMAND must succeed within 60 s (output in OUT).
run_ok () {
    local what=$1 out=$2
    shift 2
    cs_run_bounded 60 "$out" "$@" || { cat "$out"; cs_fail "$what failed"; }
}

# The CKA_ID of the demo key rsa2048 (hex), from pkcs11-tool -O.
run_ok "list keys" "$T/keys.O" $P11 -O --type pubkey
RSA_ID=$(awk '/label: *rsa2048$/ { found = 1 } found && /ID:/ { print $2; exit }' "$T/keys.O")
[ -n "$RSA_ID" ] || { cat "$T/keys.O"; cs_fail "no CKA_ID of rsa2048"; }

# ---- a certificate ---------------------------------------------------------------
run_ok "openssl req -x509 with the token key" "$T/req.log" \
    openssl req -new -x509 -engine pkcs11 -keyform engine -key "$(cs_key_uri rsa2048)" -sha256 -days 2 \
    -subj "/CN=rsa2048/O=cryptoserver objects test" -outform DER -out "$T/cert.der"
openssl x509 -inform DER -in "$T/cert.der" -noout -pubkey > "$T/cert.pub.pem"
cmp -s "$T/cert.pub.pem" "$KEYS/rsa2048.pub.pem" || cs_fail "the certificate's key is not the token key"

cs_expect_refusal CKR_USER_NOT_LOGGED_IN "--write-object cert without login" "$T/nologin.log" \
    $P11 --write-object "$T/cert.der" --type cert --id "$RSA_ID" --label rsa2048
run_ok "--write-object cert" "$T/write.log" \
    $P11 --login --pin "$PIN" --write-object "$T/cert.der" --type cert --id "$RSA_ID" --label rsa2048
run_ok "-O without login" "$T/all.O" $P11 -O
cs_expect "$T/all.O" "^Certificate Object; type = X\.509 cert" "-O does not list a certificate"
cs_expect "$T/all.O" "subject: *DN: .*CN *= *rsa2048" "-O does not show the certificate's subject"
run_ok "--read-object cert" "$T/read.log" $P11 --read-object --type cert --id "$RSA_ID" -o "$T/read.der"
cmp -s "$T/cert.der" "$T/read.der" || cs_fail "--read-object gives another certificate"
cs_log "certificate: written with a login (refused without), listed and read back without login: same DER"

timeout 60 p11tool --provider "$CRYPTOSERVER_MODULE" --list-all-certs "pkcs11:token=$CRYPTOSERVER_TOKEN" \
    > "$T/p11tool.txt" 2>&1 || { cat "$T/p11tool.txt"; cs_fail "p11tool --list-all-certs failed"; }
cs_expect "$T/p11tool.txt" "URL: pkcs11:.*object=rsa2048;type=cert" "p11tool --list-all-certs does not list the certificate"
timeout 60 p11tool --provider "$CRYPTOSERVER_MODULE" --export "pkcs11:token=$CRYPTOSERVER_TOKEN;object=rsa2048;type=cert" \
    --outder --outfile "$T/p11tool.der" > "$T/p11tool-export.txt" 2>&1 \
    || { cat "$T/p11tool-export.txt"; cs_fail "p11tool --export of the certificate failed"; }
cmp -s "$T/cert.der" "$T/p11tool.der" || cs_fail "p11tool exports another certificate"
cs_log "p11tool --list-all-certs lists it; --export gives the same DER"

# ---- PyKCS11: derived attributes, session and login rules ----------------------
PY=
for candidate in ${CS_PYTHON:-} "$(command -v python3 || true)" /usr/bin/python3; do
    [ -n "$candidate" ] && [ -x "$candidate" ] || continue
    if "$candidate" -c 'import PyKCS11' >/dev/null 2>&1; then PY=$candidate; break; fi
done
[ -n "$PY" ] || cs_missing_dependency "no python3 with PyKCS11 (install python3-pykcs11)"
SERIAL=$(openssl x509 -inform DER -in "$T/cert.der" -noout -serial | sed 's/^serial=//')
timeout --kill-after=5 $((120 * CS_TIME_FACTOR)) "$PY" "$CS_CLIENTS_DIR/objects_test.py" "$CRYPTOSERVER_MODULE" \
    "$CRYPTOSERVER_TOKEN" "$PIN" "$T/cert.der" "$SERIAL" > "$T/py.log" 2>&1 \
    || { cat "$T/py.log"; cs_fail "objects_test.py failed"; }
sed 's/^/  /' "$T/py.log"
cs_log "PyKCS11: derived X.509 attributes, session objects, R/O and login rules, label change, destroy"

# ---- Java keytool: a PrivateKeyEntry for the key with its certificate ------------
find_keytool () {
    local k
    for k in "${CS_KEYTOOL:-}" "$(command -v keytool || true)" "${JAVA_HOME:+$JAVA_HOME/bin/keytool}" \
             /usr/lib/jvm/default-java/bin/keytool /usr/lib/jvm/*/bin/keytool; do
        [ -n "$k" ] && [ -x "$k" ] && { echo "$k"; return 0; }
    done
    return 1
}
KEYTOOL=$(find_keytool) || cs_missing_dependency "keytool not found (install openjdk-17-jre-headless)"
sed "s|@MODULE@|$CRYPTOSERVER_MODULE|" "$CS_CLIENTS_DIR/sunpkcs11.cfg.in" > "$T/sunpkcs11.cfg"
timeout --kill-after=5 $((120 * CS_TIME_FACTOR)) "$KEYTOOL" -list -v -storetype PKCS11 \
    -providerClass sun.security.pkcs11.SunPKCS11 -providerArg "$T/sunpkcs11.cfg" -storepass "$PIN" \
    > "$T/keytool.txt" 2>&1 || { cat "$T/keytool.txt"; cs_fail "keytool -list -storetype PKCS11 failed"; }
FPR=$(openssl x509 -inform DER -in "$T/cert.der" -noout -fingerprint -sha256 | sed 's/.*=//')
awk '/^Alias name: rsa2048$/ { a = 1 } a && /^Entry type:/ { print; exit }' "$T/keytool.txt" > "$T/entry.txt"
grep -q "PrivateKeyEntry" "$T/entry.txt" || { cat "$T/keytool.txt"; cs_fail "keytool shows no PrivateKeyEntry rsa2048"; }
grep -q "SHA256: $FPR" "$T/keytool.txt" || { cat "$T/keytool.txt"; cs_fail "keytool's rsa2048 entry has another certificate"; }
cs_log "keytool -list -storetype PKCS11: PrivateKeyEntry rsa2048 with our certificate (SHA256 $FPR)"

# ---- data objects ----------------------------------------------------------------
head -c 3000 /dev/urandom > "$T/data.bin"
head -c 100 /dev/urandom > "$T/secret.bin"
run_ok "--write-object data" "$T/wdata.log" $P11 --login --pin "$PIN" --write-object "$T/data.bin" \
    --type data --label mydata --application-label app
run_ok "--write-object private data" "$T/wsecret.log" $P11 --login --pin "$PIN" --write-object "$T/secret.bin" \
    --type data --label mysecret --application-label app --private
run_ok "--read-object data" "$T/rdata.log" $P11 --read-object --type data --label mydata -o "$T/data.out"
cmp -s "$T/data.bin" "$T/data.out" || cs_fail "--read-object gives other data"
run_ok "-O data without login" "$T/data.O" $P11 -O --type data
cs_expect "$T/data.O" "label: *'mydata'" "-O does not list the data object"
cs_expect "$T/data.O" "application: *'app'" "-O does not show the data object's application"
grep -q mysecret "$T/data.O" && { cat "$T/data.O"; cs_fail "a private data object is visible without login"; }
run_ok "-O data with login" "$T/data-login.O" $P11 --login --pin "$PIN" -O --type data
cs_expect "$T/data-login.O" "label: *'mysecret'" "the private data object is not visible after login"
run_ok "--read-object private data" "$T/rsecret.log" $P11 --login --pin "$PIN" --read-object --type data \
    --label mysecret -o "$T/secret.out"
cmp -s "$T/secret.bin" "$T/secret.out" || cs_fail "--read-object gives other private data"
# No 16-byte window of the private data in any keystore file.
python3 - "$T/secret.bin" $(find "$WORK" -name 'keystore.db*') <<'EOF' || cs_fail "private data in the clear in the keystore"
import sys
secret = open(sys.argv[1], "rb").read()
for path in sys.argv[2:]:
    data = open(path, "rb").read()
    if any(secret[i:i + 16] in data for i in range(len(secret) - 15)):
        sys.exit("%s holds private data" % path)
EOF
cs_log "data objects: round trip; the private one invisible before login, not in the clear in the keystore"

# ---- a broker restart, another tenant -------------------------------------------
cs_stop
cs_start
run_ok "--read-object cert after restart" "$T/read2.log" $P11 --read-object --type cert --id "$RSA_ID" -o "$T/read2.der"
cmp -s "$T/cert.der" "$T/read2.der" || cs_fail "the certificate changed across a broker restart"
run_ok "--read-object data after restart" "$T/rdata2.log" $P11 --read-object --type data --label mydata -o "$T/data2.out"
cmp -s "$T/data.bin" "$T/data2.out" || cs_fail "the data object changed across a broker restart"
cs_log "the objects survive a broker restart"

run_ok "alpha -O" "$T/alpha.O" cs_p11_as alpha --login --pin "$PIN" -O
grep -q "Certificate Object\|Data object\|mydata\|rsa2048" "$T/alpha.O" \
    && { cat "$T/alpha.O"; cs_fail "tenant alpha sees demo's objects"; }
cs_log "tenant alpha sees none of demo's objects"

# ---- a row changed with SQL -------------------------------------------------------
# The data object's label in keystore.db changed without the master key: the
# broker refuses the row (E: line) and the token no longer shows it.
cs_require sqlite3
cs_expect_broker_log '^E: .* keystore .*: object obj:[0-9a-f]{32} of tenant demo: row does not verify \(changed without the master key\): refused$'
sqlite3 -cmd ".timeout 5000" "$WORK/keystore.db" \
    "UPDATE objects SET info = CAST (replace (CAST (info AS TEXT), 'mydata', 'yours!') AS BLOB) WHERE tenant = 'demo' AND instr (info, CAST ('mydata' AS BLOB)) > 0" \
    || cs_fail "sqlite3 could not change the object row"
run_ok "-O after tampering" "$T/tampered.O" $P11 -O --type data
grep -q "mydata\|yours!" "$T/tampered.O" && { cat "$T/tampered.O"; cs_fail "a tampered data object is still shown"; }
cs_broker_alive || cs_fail "the broker died on a tampered object row"
grep -Eq 'object obj:[0-9a-f]{32} of tenant demo: row does not verify' "$WORK/broker.log" \
    || cs_fail "the broker did not log the tampered object row"
cs_log "an object row changed with SQL is refused (and logged), not shown"

# ---- delete ----------------------------------------------------------------------
cs_expect_refusal CKR_USER_NOT_LOGGED_IN "--delete-object cert without login" "$T/del-nologin.log" \
    $P11 --delete-object --type cert --id "$RSA_ID"
run_ok "--delete-object cert" "$T/del.log" $P11 --login --pin "$PIN" --delete-object --type cert --id "$RSA_ID"
run_ok "-O after delete" "$T/after.O" $P11 -O
grep -q "Certificate Object" "$T/after.O" && { cat "$T/after.O"; cs_fail "the certificate is still listed"; }
cs_log "--delete-object removes the certificate"

cs_stop
cs_log "all object checks passed"
