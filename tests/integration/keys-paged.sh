#!/bin/bash
# keys-paged.sh — key lists in pages (issue #25, docs/CONTRACTS.md "Key
# lists in pages"): a tenant with CS_PAGED_KEYS (default 2,000) keystore
# keys, made through the keystore API ('cryptoserver-admin key generate
# --count', not raw SQL).
#  - Straight to the broker (cs-wire-client list): pages of at most the
#    asked size, capped at broker/max-list-page (500 here), hold every key
#    once; page size 0 (an old module) still gets the whole list in one reply.
#  - Through the module with client/list-page 300: pkcs11-tool -O finds every
#    private and public key object (C_FindObjects walks the pages lazily:
#    its debug log names each page; each page but the last, once back,
#    asks for the next one ahead, before the module files its keys: issue #25),
#    and a key found by its CKA_ID on a late page signs (verified by OpenSSL).
. "$(dirname "$0")/lib.sh"

N=${CS_PAGED_KEYS:-2000}
WIRE=$top_builddir/tests/integration/cs-wire-client
[ -x "$WIRE" ] || cs_fail "$WIRE is not built (make check builds it)"
cs_setup --tenant big
T=$WORK/tmp
mkdir -p "$T"
PIN=$CRYPTOSERVER_PIN           # demo-deploy gives extra tenants PIN 1234 too

start=$(date +%s%N)
"$CS_ADMIN" key generate --tenant big --type ec:prime256v1 --label k --count "$N" --dir "$WORK" \
    > "$T/gen.log" 2>&1 || { cat "$T/gen.log"; cs_fail "key generate --count $N failed"; }
cs_log "$N keys stored in $(( ($(date +%s%N) - start) / 1000000 )) ms"
[ "$(cs_keystore_rows big)" = "$N" ] || cs_fail "the keystore holds $(cs_keystore_rows big) rows for big, not $N"
"$CS_ADMIN" config set "$WORK/broker.conf" broker/max-list-page 500
"$CS_ADMIN" config set "$WORK/clients/big/client.conf" client/list-page 300
"$CS_ADMIN" config set "$WORK/clients/big/client.conf" client/log-level debug
cs_start

# list PAGE EXPECTED: the pages of a walk straight to the broker.
list () {
    local got
    got=$("$WIRE" --endpoint "$BROKER_ENDPOINT" --broker-cert "$WORK/broker.cert" \
          --client-cert "$WORK/clients/big/client.cert" --pin "$PIN" list "$1" 2> "$T/wire.err") \
        || { cat "$T/wire.err"; cs_fail "cs-wire-client list $1 failed: $got"; }
    [ "$got" = "$2" ] || cs_fail "list in pages of $1: '$got', expected '$2'"
    cs_log "list in pages of $1: $got"
}
list 300 "CKR_OK pages $(( (N + 299) / 300 )) keys $N largest 300"
list 5000 "CKR_OK pages $(( (N + 499) / 500 )) keys $N largest 500"
list 0 "CKR_OK pages 1 keys $N largest $N"

# Through the module: every object found, each label once per class.
# The module's log (stderr) apart, so that its lines cannot split pkcs11-tool's.
objects () { cs_p11_as big --login --pin "$PIN" -O 2> "$T/objects.log"; }
start=$(date +%s%N)
cs_run_bounded 300 "$T/objects" objects \
    || { tail -20 "$T/objects" "$T/objects.log"; cs_fail "pkcs11-tool -O failed"; }
cs_log "pkcs11-tool -O over $N key pairs: $(( ($(date +%s%N) - start) / 1000000 )) ms"
for class in "Private Key Object" "Public Key Object"; do
    got=$(grep -c "^$class" "$T/objects")
    [ "$got" = "$N" ] || cs_fail "pkcs11-tool -O found $got '$class' lines, not $N"
done
labels=$(awk '/^ *label:/ { print $2 }' "$T/objects" | sort | uniq -c | awk '$1 == 2' | wc -l)
[ "$labels" = "$N" ] || cs_fail "$labels labels appear once as private and once as public key, not $N"
# The module walked the list in pages (its debug log), not in one reply.
pages=$(grep -c "key list: a page of" "$T/objects.log" || true)
[ "$pages" = $(( (N + 299) / 300 )) ] || cs_fail "the module read $pages pages, not $(( (N + 299) / 300 ))"
grep -q "key list: a page of .*, the last" "$T/objects.log" || cs_fail "the module's walk never reached the last page"
ahead=$(grep -c "key list: the page after .* asked for ahead" "$T/objects.log" || true)
[ "$ahead" = $(( (N + 299) / 300 - 1 )) ] \
    || cs_fail "the module asked for $ahead pages ahead, not $(( (N + 299) / 300 - 1 )) (one after each page but the last)"
cs_log "C_FindObjects in pages of 300 found all $N private and $N public key objects"

# A key of a late page: found by CKA_ID (the find walks to its page) and used.
id=$(awk -v want="k-$((N - 7))" '/^ *label:/ { label = $2 } /^ *ID:/ && label == want { print $2; exit }' \
     "$T/objects")
[ -n "$id" ] || cs_fail "no CKA_ID for label k-$((N - 7))"
cs_pubkey_pem "cs_p11_as big" "$id" "$T/pub.pem" || cs_fail "cannot read the public key of k-$((N - 7))"
cs_sign_verify "cs_p11_as big" "$id" ec "$T/pub.pem" "$T" || cs_fail "k-$((N - 7)) does not sign"
cs_log "k-$((N - 7)) (CKA_ID $id) found and signs; OpenSSL verifies"
cs_stop
cs_log "PASS"
