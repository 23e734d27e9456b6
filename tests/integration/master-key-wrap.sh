#!/bin/bash
# master-key-wrap.sh — issue #7: the keystore master key wrapped by a board
# key (cryptoserver-admin master-key wrap).  The broker unwraps it at start,
# then the wrapping key serves no client: the tenant of its board neither
# finds it nor decrypts master.key.wrapped with it through the module, and
# a copy of it on a board with a tenant makes the broker refuse to start.
. "$(dirname "$0")/lib.sh"

cs_setup --tenant alpha
T=$WORK/tmp
mkdir -p "$T"
SOFTHSM=${SOFTHSM2_MODULE:-/usr/lib/softhsm/libsofthsm2.so}
PIN=$CRYPTOSERVER_PIN           # demo-deploy gives extra tenants PIN 1234 too

# board BOARD ARGS...: pkcs11-tool on a SoftHSM board itself, logged in.
board () {
    local name=$1
    shift
    pkcs11-tool --module "$SOFTHSM" --token-label "$name" --login --pin "$CRYPTOSERVER_BOARD_PIN" "$@"
}

# A dedicated RSA key "wrapper" (CKA_ID 77) on board0 (tenant demo), made by
# OpenSSL so that a copy can go to board1 later.
(umask 077; openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$T/wrapper.pem" 2>/dev/null)
openssl pkey -in "$T/wrapper.pem" -outform DER -out "$T/wrapper.der"
openssl pkey -in "$T/wrapper.pem" -pubout -out "$T/wrapper.pub.pem"
openssl pkey -in "$T/wrapper.pem" -pubout -outform DER -out "$T/wrapper.pub.der"
shred -u "$T/wrapper.pem"
import_wrapper () {
    board "$1" --write-object "$T/wrapper.der" --type privkey --id 77 --label wrapper --usage-decrypt \
        > "$T/import.log" 2>&1 || { cat "$T/import.log"; cs_fail "cannot import the wrapper into $1"; }
    board "$1" --write-object "$T/wrapper.pub.der" --type pubkey --id 77 --label wrapper \
        > "$T/import.log" 2>&1 || { cat "$T/import.log"; cs_fail "cannot import the wrapper's public key into $1"; }
}
import_wrapper board0
master=$(cat "$WORK/master.key")
"$CS_ADMIN" master-key wrap --board board0 --label wrapper --public-key "$T/wrapper.pub.pem" --dir "$WORK" \
    > "$T/wrap.log" 2>&1 || { cat "$T/wrap.log"; cs_fail "master-key wrap failed"; }
[ ! -e "$WORK/master.key" ] || cs_fail "master.key is still on disk after the wrap"
cs_start
cs_log "master key wrapped by board0's key 'wrapper' (CKA_ID 77); the broker unwrapped it and started"

# The attack: a client of the board's tenant decrypts the wrapped master key
# with the wrapping key, through the module.  It must not find the key.
for who in demo alpha; do
    cs_p11_as $who --login --pin "$PIN" -O > "$T/$who.O" 2>&1 || { cat "$T/$who.O"; cs_fail "$who: -O failed"; }
    if grep -Eq "label: *wrapper|ID: *77\$" "$T/$who.O"; then
        cat "$T/$who.O"
        cs_fail "$who finds the wrapping key"
    fi
    rm -f "$T/stolen.bin"
    rc=0
    cs_run_bounded $((60 * CS_TIME_FACTOR)) "$T/$who-decrypt.log" cs_p11_as $who --login --pin "$PIN" \
        --decrypt --id 77 --mechanism RSA-PKCS-OAEP --hash-algorithm SHA256 --mgf MGF1-SHA256 \
        -i "$WORK/master.key.wrapped" -o "$T/stolen.bin" || rc=$?
    if [ -s "$T/stolen.bin" ]; then
        [ "$(od -An -tx1 "$T/stolen.bin" | tr -d ' \n')" = "$master" ] \
            && cs_fail "$who decrypted master.key.wrapped: it holds the keystore master key"
        cs_fail "$who decrypted master.key.wrapped"
    fi
    [ "$rc" = 1 ] && grep -Eq "key not found|CKR_KEY_HANDLE_INVALID" "$T/$who-decrypt.log" \
        || { cat "$T/$who-decrypt.log"; cs_fail "$who decrypting with CKA_ID 77: status $rc, not 'not found'"; }
done
cs_broker_alive || cs_fail "the broker died"
grep -q "key 'wrapper' (CKA_ID 77) of board board0 is reserved" "$WORK/broker.log" \
    || cs_fail "the broker log does not say the wrapping key is reserved"
cs_log "neither demo (board0's tenant) nor alpha finds the wrapping key or decrypts master.key.wrapped"

# The board's other keys still serve its tenant.
cs_sign_verify "$P11" 01 rsa "$KEYS/rsa2048.pub.pem" "$T" || cs_fail "demo cannot sign with board key 01"
cs_log "demo still signs with its board keys"

# A copy of the wrapping key on board1 (tenant demo) is a client key there:
# the broker refuses to start, naming it.
cs_stop
import_wrapper board1
shred -u "$T/wrapper.der"
rc=0
SOFTHSM2_CONF=$WORK/softhsm2.conf CRYPTOSERVER_DRIVER_DIR=$top_builddir/shim-drivers/.libs \
    timeout --kill-after=5 $((30 * CS_TIME_FACTOR)) "$CS_BROKER" -c "$WORK/broker.conf" -f \
    > "$T/refused.log" 2>&1 || rc=$?
tail -n 5 "$T/refused.log"
[ "$rc" != 0 ] || cs_fail "the broker started with a copy of the wrapping key on board1"
[ "$rc" -lt 124 ] || cs_fail "the broker hung or crashed (status $rc)"
grep -q "board board1 holds a copy of the wrapping key 'wrapper' of board board0" "$T/refused.log" \
    || cs_fail "no log line naming the copy on board1"
cs_log "a copy of the wrapping key on board1 (tenant demo): the broker exits with status $rc"
