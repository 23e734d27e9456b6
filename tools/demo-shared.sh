#!/bin/bash
# demo-shared.sh — the three-party demo of shared RSA keys (issue #24,
# docs/SHARED-KEYS.md): three demo deployments (tools/demo-deploy.sh) on
# 127.0.0.1 whose brokers are the three parties, tenant demo opted in.
# Used by tools/quickstart.sh --shared and tests/integration/quickstart-shared.sh.
set -eu

usage () {
    cat <<'EOT'
usage: demo-shared.sh DIR          make or refresh the three deployments
       demo-shared.sh --start DIR  start the three brokers (those not running)
       demo-shared.sh --try DIR    generate a shared RSA-2048 key through the module
                                   (pkcs11-tool --keypairgen), sign, verify with openssl
       demo-shared.sh --stop DIR   stop the three brokers
       demo-shared.sh --help

Party 1 is the demo deployment DIR itself (its client demo, DIR/env.sh);
parties 2 and 3 are the deployments DIR/party2 and DIR/party3, each with
its own master key, keystore and CURVE key pair (the shares never sit under
one key or in one database).  Each broker.conf gets a party section
(cryptoserver-broker.conf(5), SHARED KEYS) naming the other two by
endpoint and pinned public key, and keys/shared/demo = 3: a token RSA
C_GenerateKeyPair of tenant demo at any of them makes a shared key.
DIR/env.sh exports what the one-broker demo's does and
CRYPTOSERVER_PARTY_PIDS (the three brokers' pids, space-separated).

Ports on 127.0.0.1 (fixed, for a demo beside the one-broker demo's 5555):
the brokers CS_PORT, +1, +2 (default 5565); the party endpoints
CS_PARTY_PORT, +1, +2 (default 5575); party 1's metrics CS_METRICS_PORT
(default 9474; 0 any free port, off none), none for parties 2 and 3.
EOT
}

SRC_DIR=$(cd "$(dirname "$0")/.." && pwd)
BUILD_DIR=$(cd "${CS_BUILD_DIR:-$SRC_DIR}" && pwd)
export CS_BUILD_DIR=$BUILD_DIR
ADMIN=$BUILD_DIR/tools/cryptoserver-admin
DEPLOY=$SRC_DIR/tools/demo-deploy.sh
die () { echo "demo-shared: error: $*" >&2; exit 1; }
say () { echo "demo-shared: $*"; }

# pdir I: the deployment of party I.
pdir () { if [ "$1" = 1 ]; then echo "$DIR"; else echo "$DIR/party$1"; fi; }

# party_conf I: the party section of party I's broker.conf, keys/shared/demo
# = 3, and deadlines that a 2048-bit generation fits in (minutes on a loaded
# 2-core machine: docs/SHARED-KEYS.md "Figures").
party_conf () {
    local i=$1 j conf
    conf=$(pdir "$i")/broker.conf
    set_conf () { "$ADMIN" config set "$conf" "$1" "$2"; }
    set_conf keys/shared/demo 3
    set_conf broker/max-deadline-ms 600000
    set_conf party/index "$i"
    set_conf party/endpoint "tcp://127.0.0.1:$((PARTY_PORT + i - 1))"
    set_conf party/secret-key broker.cert_secret
    for j in 1 2 3; do
        [ "$j" = "$i" ] && continue
        set_conf "party/peers/$j/endpoint" "tcp://127.0.0.1:$((PARTY_PORT + j - 1))"
        set_conf "party/peers/$j/public-key" "$(sed -n 's/.*public-key = "\(.*\)"/\1/p' "$(pdir "$j")/broker.cert")"
    done
    "$ADMIN" config set "$(pdir "$i")/clients/demo/client.conf" client/timeout-ms 600000
}

deploy () {
    local i
    mkdir -p "$DIR"
    DIR=$(cd "$DIR" && pwd)
    for i in 1 2 3; do
        if [ -f "$(pdir "$i")/broker.conf" ]; then
            "$DEPLOY" "$(pdir "$i")" > /dev/null
        else
            "$DEPLOY" "$(pdir "$i")" --port $((PORT + i - 1)) \
                --metrics-port "$(if [ "$i" = 1 ]; then echo "$METRICS_PORT"; else echo off; fi)" > /dev/null
        fi
        say "party $i: deployment $(pdir "$i")"
    done
    for i in 1 2 3; do party_conf "$i"; done
    cat >> "$DIR/env.sh" <<EOT
# The three parties of shared keys (tools/demo-shared.sh): party 1 is this
# deployment, parties 2 and 3 are in $DIR/party2 and $DIR/party3.
export CRYPTOSERVER_PARTY_PIDS="\$(cat '$DIR/broker.pid' '$DIR/party2/broker.pid' '$DIR/party3/broker.pid' 2>/dev/null | tr '\n' ' ' | sed 's/ \$//')"
EOT
    say "three parties configured (party endpoints tcp://127.0.0.1:$PARTY_PORT..$((PARTY_PORT + 2)))"
}

start () {
    local i
    for i in 1 2 3; do
        [ -f "$(pdir "$i")/broker.conf" ] || die "$(pdir "$i") is not a deployment (run demo-shared.sh $DIR first)"
        "$DEPLOY" --start "$(pdir "$i")" | sed "s/^demo-deploy: /demo-shared: party $i: /"
    done
}

stop () {
    local i rc=0
    for i in 3 2 1; do
        [ -f "$(pdir "$i")/broker.conf" ] || continue
        "$DEPLOY" --stop "$(pdir "$i")" | sed "s/^demo-deploy: /demo-shared: party $i: /" || rc=1
    done
    return $rc
}

# try: a shared RSA-2048 key made through the module, a SHA256-RSA-PKCS
# signature, verified by openssl with the public key read from the token.
try () {
    local tmp p11 label id start
    # shellcheck disable=SC1091
    . "$DIR/env.sh"
    tmp=$(mktemp -d "$DIR/.shared.XXXXXX")
    p11="pkcs11-tool --module $CRYPTOSERVER_MODULE --token-label $CRYPTOSERVER_TOKEN --login --pin $CRYPTOSERVER_PIN"
    label=shared-$(date +%Y%m%d%H%M%S)
    id=$(printf '%x' "$(date +%s)")       # pkcs11-tool picks a key to sign by its CKA_ID
    say "generating shared RSA-2048 key $label (three parties, no dealer: about a minute)"
    start=$(date +%s)
    $p11 --keypairgen --key-type rsa:2048 --label "$label" --id "$id" > "$tmp/gen.log" 2>&1 \
        || { cat "$tmp/gen.log" >&2; die "C_GenerateKeyPair of the shared key failed"; }
    say "generated in $(( $(date +%s) - start )) s; rows at the three parties:"
    for i in 1 2 3; do
        "$ADMIN" key list --dir "$(pdir "$i")" --tenant demo | grep -- "$label" | sed "s/^/    party $i: /"
    done
    $p11 --read-object --type pubkey --id "$id" -o "$tmp/pub.der" > /dev/null 2>&1 \
        || die "cannot read the public key of $label"
    openssl pkey -pubin -inform DER -in "$tmp/pub.der" -out "$DIR/$label.pub.pem"
    printf 'Hello from three parties, %s\n' "$(date)" > "$tmp/message.txt"
    $p11 --sign --mechanism SHA256-RSA-PKCS --id "$id" --input-file "$tmp/message.txt" \
        --output-file "$tmp/sig" > /dev/null 2>&1 || die "signing with $label failed"
    openssl dgst -sha256 -verify "$DIR/$label.pub.pem" -signature "$tmp/sig" "$tmp/message.txt" > /dev/null \
        || die "the shared-key signature does not verify"
    say "ok: $(wc -c < "$tmp/sig") byte signature of $label (CKA_ID $id) verified by openssl dgst -sha256 -verify $DIR/$label.pub.pem"
    rm -rf "$tmp"
}

ACTION=deploy
DIR=
while [ $# -gt 0 ]; do
    case $1 in
        -h|--help) usage; exit 0 ;;
        --start) ACTION=start ;;
        --stop) ACTION=stop ;;
        --try) ACTION=try ;;
        -*) echo "demo-shared: unknown option $1" >&2; usage >&2; exit 2 ;;
        *) [ -z "$DIR" ] || { usage >&2; exit 2; }; DIR=$1 ;;
    esac
    shift
done
[ -n "$DIR" ] || { usage >&2; exit 2; }
PORT=${CS_PORT:-5565}
PARTY_PORT=${CS_PARTY_PORT:-5575}
METRICS_PORT=${CS_METRICS_PORT:-9474}
if [ "$ACTION" != deploy ]; then
    [ -d "$DIR" ] || die "no directory $DIR"
    DIR=$(cd "$DIR" && pwd)
fi
"$ACTION"
