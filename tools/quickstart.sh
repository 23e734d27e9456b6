#!/bin/bash
# quickstart.sh — from a fresh clone on Debian 12 to verified signatures:
# installs missing packages, builds, makes a demo deployment
# (tools/demo-deploy.sh), starts the broker on 127.0.0.1, then signs and
# decrypts through cryptoserver-pkcs11.so with pkcs11-tool and checks the
# results with openssl.  With --ha: two brokers on a local PostgreSQL
# keystore, and a failover shown (one broker killed, signing goes on).  With
# --shared: three brokers as the parties of a shared RSA key
# (tools/demo-shared.sh).
set -eu

usage () {
    cat <<'EOT'
usage: tools/quickstart.sh [DIR]          build, deploy into DIR (default ./demo), start, try it
       tools/quickstart.sh --ha [DIR]     the same with two brokers on one PostgreSQL keystore
       tools/quickstart.sh --shared [DIR] three brokers holding a shared RSA key (default
                                          ./demo-shared): generate it, sign, verify
       tools/quickstart.sh [--ha|--shared] --stop [DIR]
                                          stop DIR's broker (an --ha DIR: both brokers and
                                          PostgreSQL; a --shared DIR: the three brokers;
                                          with --ha DIR defaults to ./demo-ha, with
                                          --shared to ./demo-shared)
       tools/quickstart.sh --help

Run again on an existing DIR: keys and state are kept and the broker is
(re)started if it is not running.  Afterwards:  . DIR/env.sh  sets
CRYPTOSERVER_CONF, CRYPTOSERVER_MODULE, CRYPTOSERVER_TOKEN, CRYPTOSERVER_PIN,
SOFTHSM2_CONF, CRYPTOSERVER_BOARD_PIN, CRYPTOSERVER_BROKER_PID,
CRYPTOSERVER_METRICS_URL (the broker's Prometheus metrics, on 127.0.0.1) and
CRYPTOSERVER_METRICS_TOKEN_FILE (the bearer token that shows client and
tenant names in them).

--ha (default DIR ./demo-ha; a DIR made without --ha cannot become one):
a private PostgreSQL cluster in DIR/pg (initdb, pg_ctl; it listens only on
a Unix socket in DIR/pg/sock, no TCP; as root it runs as user postgres, so
DIR and its parents must be searchable by that user) holds the keystore;
two brokers on 127.0.0.1 (ports 5555 and 5556, metrics 9464 and 9465)
share it, the same master key, broker key pair and SoftHSM boards (the
tokens are files in DIR/softhsm); the client lists both endpoints.  Broker
1 keeps the files of the one-broker demo (DIR/broker.pid, broker.log, ...),
broker 2 has DIR/broker2.conf, broker2.pid, broker2.log, broker2.endpoint
and broker2.metrics.  DIR/env.sh exports the same variables (the first
broker's pid and metrics URL) and CRYPTOSERVER_BROKER_PIDS (both brokers'
pids, space-separated) and CRYPTOSERVER_PG_PID (PostgreSQL's).  The try-it
part then signs with both brokers up, kills broker 1 with SIGKILL, signs
again (broker 2 serves it) and starts broker 1 again.  Needs the packages
postgresql and postgresql-client (installed with the others).
--shared (default DIR ./demo-shared): three demo deployments on
127.0.0.1 whose brokers are the three parties of shared RSA keys
(docs/SHARED-KEYS.md): DIR (party 1), DIR/party2, DIR/party3, each with
its own master key and keystore; brokers on ports 5565, 5566, 5567, party
endpoints 5575, 5576, 5577, party 1's metrics on 9474.  The try-it part
generates a shared RSA-2048 key through the module (pkcs11-tool
--keypairgen: the three brokers make it together, no dealer, about a
minute), signs with it and verifies with openssl.  DIR/env.sh exports
the one-broker demo's variables (for party 1) and CRYPTOSERVER_PARTY_PIDS
(the three brokers' pids, space-separated).  tools/demo-shared.sh --help
tells the rest.
Environment: CS_BUILD_DIR     build directory (default SRC/_build, where tools/check.sh builds)
             CS_PORT          the broker's port on 127.0.0.1 (default 5555; --ha:
                              broker 2 on CS_PORT + 1)
             CS_METRICS_PORT  the metrics port on 127.0.0.1 (default 9464; 0: any
                              free port; off: no metrics endpoint; --ha: broker 2
                              on CS_METRICS_PORT + 1)
EOT
}

SRC_DIR=$(cd "$(dirname "$0")/.." && pwd)
step () { echo; echo "==> $*"; }
ok () { echo "    ok: $*"; }
die () { echo "quickstart: error: $*" >&2; exit 1; }

STOP=
HA=
SHARED=
DIR=
while [ $# -gt 0 ]; do
    case $1 in
        -h|--help) usage; exit 0 ;;
        --stop) STOP=1 ;;
        --ha) HA=1 ;;
        --shared) SHARED=1 ;;
        -*) echo "quickstart: unknown option $1" >&2; usage >&2; exit 2 ;;
        *) [ -z "$DIR" ] || { usage >&2; exit 2; }; DIR=$1 ;;
    esac
    shift
done
[ -z "$HA" ] || [ -z "$SHARED" ] || { echo "quickstart: --ha and --shared do not go together" >&2; exit 2; }
if [ -n "$HA" ]; then
    DIR=${DIR:-demo-ha}
elif [ -n "$SHARED" ]; then
    DIR=${DIR:-demo-shared}
else
    DIR=${DIR:-demo}
fi
# The build goes where tools/check.sh builds (_build), so the README's two
# commands share one build; a source tree configured in place by an older
# quickstart keeps building in place.
if [ -z "${CS_BUILD_DIR:-}" ] && [ -f "$SRC_DIR/config.status" ]; then
    CS_BUILD_DIR=$SRC_DIR
fi
export CS_BUILD_DIR=${CS_BUILD_DIR:-$SRC_DIR/_build}

if [ -n "$STOP" ]; then
    if [ -n "$SHARED" ] || [ -f "$DIR/party2/broker.conf" ]; then
        exec "$SRC_DIR/tools/demo-shared.sh" --stop "$DIR"
    fi
    exec "$SRC_DIR/tools/demo-deploy.sh" --stop "$DIR"
fi

build () {
    step "Build (in $CS_BUILD_DIR)"
    if [ ! -x "$SRC_DIR/configure" ]; then
        (cd "$SRC_DIR" && autoreconf -fi >/dev/null 2>&1) || (cd "$SRC_DIR" && autoreconf -fi)
    fi
    mkdir -p "$CS_BUILD_DIR"
    cd "$CS_BUILD_DIR"
    if [ ! -f Makefile ]; then
        "$SRC_DIR/configure" -q
    fi
    make -s -j"$(nproc 2>/dev/null || echo 2)" >/dev/null
    cd - >/dev/null
    ok "built cryptoserver-pkcs11.so, cryptoserver-broker, drivers, cryptoserver-admin"
}

# The demo: list, sign + verify (RSA and EC), OAEP decrypt.
try_it () {
    # shellcheck disable=SC1091
    . "$DIR/env.sh"
    local tmp p11
    tmp=$(mktemp -d "$DIR/.quickstart.XXXXXX")
    p11="pkcs11-tool --module $CRYPTOSERVER_MODULE --token-label $CRYPTOSERVER_TOKEN"

    step "List the token through the module ($CRYPTOSERVER_MODULE)"
    $p11 -L | sed -n 's/^ *\(token label\|token manufacturer\|token model\) *: */    \1: /p'
    $p11 -O --login --pin "$CRYPTOSERVER_PIN" | grep -E '^(Private|Public) Key Object|label:' \
        | paste - - | sed 's/ \+/ /g; s/^/    /'

    step "Sign with rsa2048 (SHA256-RSA-PKCS) and verify with openssl"
    printf 'Hello from cryptoserver quickstart, %s\n' "$(date)" > "$tmp/message.txt"
    $p11 --login --pin "$CRYPTOSERVER_PIN" --sign --mechanism SHA256-RSA-PKCS --id 01 \
        --input-file "$tmp/message.txt" --output-file "$tmp/rsa.sig" 2>/dev/null
    openssl dgst -sha256 -verify "$DIR/keys/rsa2048.pub.pem" -signature "$tmp/rsa.sig" \
        "$tmp/message.txt" >/dev/null || die "the RSA signature does not verify"
    ok "$(wc -c < "$tmp/rsa.sig") byte signature verified by openssl dgst -sha256 -verify"

    step "Sign with p256 (ECDSA-SHA256) and verify with openssl"
    $p11 --login --pin "$CRYPTOSERVER_PIN" --sign --mechanism ECDSA-SHA256 --id 03 \
        --signature-format openssl --input-file "$tmp/message.txt" \
        --output-file "$tmp/ec.sig" 2>/dev/null
    openssl dgst -sha256 -verify "$DIR/keys/p256.pub.pem" -signature "$tmp/ec.sig" \
        "$tmp/message.txt" >/dev/null || die "the ECDSA signature does not verify"
    ok "DER ECDSA signature verified by openssl dgst -sha256 -verify"

    step "Decrypt an RSA-OAEP ciphertext made by openssl (SHA-1, openssl's default)"
    printf 'a secret for rsa2048\n' > "$tmp/plain.txt"
    openssl pkeyutl -encrypt -pubin -inkey "$DIR/keys/rsa2048.pub.pem" \
        -pkeyopt rsa_padding_mode:oaep -in "$tmp/plain.txt" -out "$tmp/cipher.bin"
    $p11 --login --pin "$CRYPTOSERVER_PIN" --decrypt --mechanism RSA-PKCS-OAEP \
        --hash-algorithm SHA-1 --mgf MGF1-SHA1 --id 01 \
        --input-file "$tmp/cipher.bin" --output-file "$tmp/decrypted.txt" 2>/dev/null
    cmp -s "$tmp/plain.txt" "$tmp/decrypted.txt" || die "the decrypted text differs"
    ok "decrypted: $(cat "$tmp/decrypted.txt")"
    rm -rf "$tmp"
    [ -z "$HA" ] || try_failover

    if [ -n "$HA" ] && [ -n "${CRYPTOSERVER_METRICS_URL:-}" ]; then
        show_metrics "Broker 1's metrics" "$CRYPTOSERVER_METRICS_URL"
        show_metrics "Broker 2's metrics" "$(cat "$DIR/broker2.metrics" 2>/dev/null)"
    elif [ -n "${CRYPTOSERVER_METRICS_URL:-}" ]; then
        show_metrics "The broker's metrics" "$CRYPTOSERVER_METRICS_URL"
    fi
}

# show_metrics TITLE URL: the job counters and CPU time of a broker.
show_metrics () {
    [ -n "$2" ] || return 0
    step "$1 ($2)"
    curl -sf --max-time 10 "$2" \
        | grep -E '^(cryptoserver_jobs_total\{.*\} [1-9]|process_cpu_seconds_total )' | sed 's/^/    /' \
        || die "no metrics at $2"
}

# --ha: sign with both brokers up, kill broker 1 (SIGKILL), sign again,
# start it again (demo-deploy.sh --start starts what is not running).
try_failover () {
    local tmp p11 pid1 pid2 start end
    tmp=$(mktemp -d "$DIR/.quickstart.XXXXXX")
    p11="pkcs11-tool --module $CRYPTOSERVER_MODULE --token-label $CRYPTOSERVER_TOKEN"
    read -r pid1 pid2 <<<"$CRYPTOSERVER_BROKER_PIDS"
    printf 'Hello from two brokers, %s\n' "$(date)" > "$tmp/message.txt"

    step "Two brokers (pids $CRYPTOSERVER_BROKER_PIDS) on PostgreSQL (pid $CRYPTOSERVER_PG_PID)"
    echo "    client/endpoints = $("$CS_BUILD_DIR/tools/cryptoserver-admin" config get "$CRYPTOSERVER_CONF" client/endpoints)"
    ha_sign "$p11" "$tmp" "both brokers up"

    step "Failover: kill -9 broker 1 (pid $pid1), then sign again"
    kill -KILL "$pid1"
    start=$(date +%s%N)
    ha_sign "$p11" "$tmp" "broker 1 dead: broker 2 (pid $pid2) signed"
    end=$(date +%s%N)
    ok "the signature took $(( (end - start) / 1000000 )) ms with broker 1 dead"

    step "Start broker 1 again"
    "$SRC_DIR/tools/demo-deploy.sh" --start "$DIR" | sed 's/^/    /'
    # shellcheck disable=SC1091
    . "$DIR/env.sh"
    ha_sign "$p11" "$tmp" "both brokers up again (pids $CRYPTOSERVER_BROKER_PIDS)"
    rm -rf "$tmp"
}

# ha_sign P11 TMP WHAT: one SHA256-RSA-PKCS signature through the module,
# verified with openssl.
ha_sign () {
    local p11=$1 tmp=$2
    rm -f "$tmp/rsa.sig"
    $p11 --login --pin "$CRYPTOSERVER_PIN" --sign --mechanism SHA256-RSA-PKCS --id 01 \
        --input-file "$tmp/message.txt" --output-file "$tmp/rsa.sig" 2>/dev/null \
        || die "signing failed ($3)"
    openssl dgst -sha256 -verify "$DIR/keys/rsa2048.pub.pem" -signature "$tmp/rsa.sig" \
        "$tmp/message.txt" >/dev/null || die "the RSA signature does not verify ($3)"
    ok "$3: signature verified by openssl"
}

step "Packages"
# shellcheck source=tools/deps.sh
. "$SRC_DIR/tools/deps.sh"
cs_deps_install
cs_deps_rust
build

if [ -n "$SHARED" ]; then
    step "Three parties in $DIR, $DIR/party2, $DIR/party3"
    "$SRC_DIR/tools/demo-shared.sh" "$DIR"
    DIR=$(cd "$DIR" && pwd)
    step "Brokers"
    "$SRC_DIR/tools/demo-shared.sh" --start "$DIR"
    step "A shared RSA-2048 key through the module, a signature verified by openssl"
    "$SRC_DIR/tools/demo-shared.sh" --try "$DIR"
    step "Done"
    echo "    . $DIR/env.sh          # then use \$CRYPTOSERVER_MODULE: RSA token keys you generate are shared"
    echo "    tools/quickstart.sh --stop $DIR    # stops the three brokers"
    exit 0
fi

step "Deployment in $DIR"
# The demo's documented fixed ports (the README, env.sh users script against
# them); demo-deploy.sh alone picks free ones.  An existing DIR keeps its own.
if [ ! -f "$DIR/broker.conf" ]; then
    CS_PORT=${CS_PORT:-5555}
    CS_METRICS_PORT=${CS_METRICS_PORT:-9464}
fi
"$SRC_DIR/tools/demo-deploy.sh" "$DIR" ${HA:+--ha} ${CS_PORT:+--port "$CS_PORT"} \
    ${CS_METRICS_PORT:+--metrics-port "$CS_METRICS_PORT"}
DIR=$(cd "$DIR" && pwd)

step "Broker${HA:+s}"
"$SRC_DIR/tools/demo-deploy.sh" --start "$DIR"

try_it

step "Done"
echo "    . $DIR/env.sh          # then use \$CRYPTOSERVER_MODULE with any PKCS#11 application"
if [ -n "${CRYPTOSERVER_METRICS_URL:-}" ]; then
    echo "    curl -s \"\$CRYPTOSERVER_METRICS_URL\"   # the broker's metrics (Prometheus text)"
fi
if [ -n "$HA" ]; then
    echo "    tools/quickstart.sh --stop $DIR    # stops both brokers and PostgreSQL"
else
    echo "    tools/quickstart.sh --stop $DIR    # stops the broker"
fi
