#!/bin/bash
# board-tenant-custody.sh — issue #19 item 8, two custody rules of routing:
#  1. a tenant's keystore key material never goes to a board dedicated to
#     another tenant (drivers/NAME/tenant): tenant demo's keystore RSA key
#     signs on the shared openssl board "cpu" and never on "otherbox", an
#     openssl board of tenant other, which still serves other's own key;
#  2. a key generated on the keys/home board after the broker started is
#     verified before release like any other: with keys/home a fault board
#     over SoftHSM that spoils every result, a generated key's signature is
#     refused (CKR_DEVICE_ERROR, counted in cryptoserver_wrong_results_total),
#     never handed to the client.
. "$(dirname "$0")/lib.sh"

cs_require curl
cs_setup --tenant other
T=$WORK/tmp
mkdir -p "$T"
"$CS_ADMIN" board add otherbox --dir "$WORK" --type openssl --threads 2 --set tenant=other \
    > "$T/add.log" 2>&1 || { cat "$T/add.log"; cs_fail "board add otherbox failed"; }
for who in demo other; do
    openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$T/$who.pem" 2>/dev/null
    openssl pkey -in "$T/$who.pem" -pubout -out "$T/$who.pub.pem"
    "$CS_ADMIN" key import --tenant "$who" --file "$T/$who.pem" --label "$who-ks" --dir "$WORK" \
        > "$T/import-$who.log" 2>&1 || { cat "$T/import-$who.log"; cs_fail "key import for $who failed"; }
    shred -u "$T/$who.pem"
done
# The demo's SoftHSM boards (tenant demo) take no key material here, so
# that demo's key has exactly one shared board (cpu) and one forbidden one.
for setting in drivers/board0/key-material:false drivers/board1/key-material:false \
               keys/pool-rsa-2048:0 keys/pool-rsa-3072:0; do
    "$CS_ADMIN" config set "$WORK/broker.conf" "${setting%%:*}" "${setting#*:}" || cs_fail "config set $setting"
done
cs_start
URL=$(cat "$WORK/broker.metrics")
jobs_on () { # BOARD: the board's jobs of every mechanism and result so far
    curl -sf --max-time 10 -H "Authorization: Bearer $(cat "$WORK/metrics.token")" "$URL" \
        | awk -v b="board=\"$1\"" 'index($0, "cryptoserver_jobs_total{" b ",") == 1 { n += $2 } END { print n + 0 }'
}
bench () { # CLIENT KEY PUB
    CRYPTOSERVER_CONF=$WORK/clients/$1/client.conf $CS_CLIENT_WRAPPER "$CS_BENCH" --module "$CRYPTOSERVER_MODULE" \
        --token "$1" --pin "$CRYPTOSERVER_PIN" --key "$2" --verify-key "$3" --threads 4 --count 50 --csv \
        > "$T/bench-$1.csv" 2> "$T/bench-$1.err" || { cat "$T/bench-$1.err"; cs_fail "$1: signing with $2 failed"; }
    IFS=, read -r _ _ _ threads ops _ _ _ _ _ _ verified failures _ < <(tail -n 1 "$T/bench-$1.csv")
    [ "$ops/$verified/$failures" = "200/200/0" ] || cs_fail "$1: $ops signatures, $verified verified, $failures failed"
}

bench demo demo-ks "$T/demo.pub.pem"
[ "$(jobs_on otherbox)" = 0 ] || cs_fail "tenant demo's keystore key ran $(jobs_on otherbox) jobs on otherbox (tenant other)"
[ "$(jobs_on cpu)" -ge 200 ] || cs_fail "tenant demo's 200 signatures did not run on the shared board cpu"
cs_log "demo's keystore key: 200 signatures on cpu, none on otherbox (tenant other)"
bench other other-ks "$T/other.pub.pem"
cs_log "other's keystore key: 200 signatures verified (cpu $(jobs_on cpu), otherbox $(jobs_on otherbox) jobs)"
cs_stop

# ---- 2. keys/home on a board that spoils every result -----------------------------
module=$("$CS_ADMIN" config get "$WORK/broker.conf" drivers/board0/module)
pin=$("$CS_ADMIN" config get "$WORK/broker.conf" drivers/board0/pin-file)
"$CS_ADMIN" board add homef --dir "$WORK" --type fault --threads 1 --set flip-every=1 \
    --set inner/type=pkcs11 --set "inner/module=$module" --set inner/token=board0 --set "inner/pin-file=$pin" \
    > "$T/add.log" 2>&1 || { cat "$T/add.log"; cs_fail "board add homef failed"; }
"$CS_ADMIN" config set "$WORK/broker.conf" keys/home homef
cs_expect_broker_log "^W: .* board homef: no 'tenant': its [0-9]+ resident keys are visible to no tenant\$"
cs_expect_broker_log '^W: .* board homef: wrong result of job [0-9]+ \(failed verification with the public key\)'
cs_start
cs_p11_as demo --login --pin "$CRYPTOSERVER_PIN" --keypairgen --key-type rsa:2048 --label h-key --id b7 \
    --usage-sign > "$T/gen.log" 2>&1 || { cat "$T/gen.log"; cs_fail "--keypairgen on keys/home failed"; }
cs_pubkey_pem "$P11" b7 "$T/h.pub.pem" || cs_fail "cannot read the generated key's public half"
head -c 300 /dev/urandom > "$T/msg.bin"
cs_expect_refusal CKR_DEVICE_ERROR "a signature of a board that spoils every result" "$T/h-sign.log" \
    $P11 --login --pin "$CRYPTOSERVER_PIN" --sign --id b7 --mechanism SHA256-RSA-PKCS -i "$T/msg.bin" -o "$T/h.sig"
[ ! -s "$T/h.sig" ] || cs_fail "the client got a (wrong) signature of the keys/home board"
URL=$(cat "$WORK/broker.metrics")
wrong=$(curl -sf --max-time 10 "$URL" | sed -n 's/^cryptoserver_wrong_results_total{board="homef"} \([0-9]*\)$/\1/p')
[ "${wrong:-0}" -gt 0 ] || cs_fail "no wrong result of homef was counted"
cs_log "a key generated on keys/home after the start: its spoiled signature refused (CKR_DEVICE_ERROR), $wrong wrong results caught"
