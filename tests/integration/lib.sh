# lib.sh — shared helpers of the integration tests (sourced, bash).
#
# Each test makes its own demo deployment under the build tree
# (tests/integration/work/NAME, by tools/demo-deploy.sh), starts its own broker
# on tcp://127.0.0.1:* (the bound endpoint comes back through endpoint-file),
# and stops it on exit.  No fixed sleeps: every wait polls with a bound.
#
# make check exports top_srcdir and top_builddir (Makefile.am,
# AM_TESTS_ENVIRONMENT); run by hand, they default to the source tree.
#
# Exit statuses follow automake: 0 pass, 1 fail, 77 skip, 99 hard error.

set -eu

CS_TEST_NAME=$(basename "$0" .sh)
top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}
top_builddir=${top_builddir:-$top_srcdir}
export CS_BUILD_DIR=$top_builddir
CS_DEPLOY=$top_srcdir/tools/demo-deploy.sh
CS_ADMIN=$top_builddir/tools/cryptoserver-admin
CS_BENCH=$top_builddir/tools/cryptoserver-bench
WORK=$top_builddir/tests/integration/work/$CS_TEST_NAME

# CS_VALGRIND=1 (make memcheck-integration, tests/memcheck.am): the broker
# (demo-deploy.sh runs it after $CS_BROKER_WRAPPER) and our own clients that
# load the module (run after $CS_CLIENT_WRAPPER: cryptoserver-bench, cs-fork,
# cs-session-key) run under valgrind, one log per process in $WORK/valgrind;
# cs_cleanup fails the test when a log reports errors (definite leaks
# count).  CS_VALGRIND_FLAGS replaces the default valgrind options.
# CS_TIME_FACTOR scales the bounds of client runs (5 under valgrind).
CS_CLIENT_WRAPPER=
CS_TIME_FACTOR=1
if [ "${CS_VALGRIND:-}" = 1 ]; then
    CS_TIME_FACTOR=5
    CS_VALGRIND_FLAGS=${CS_VALGRIND_FLAGS:-"--leak-check=full --errors-for-leak-kinds=definite \
--num-callers=40 --suppressions=$top_srcdir/tests/valgrind.supp"}
    export CS_BROKER_WRAPPER="valgrind $CS_VALGRIND_FLAGS --log-file=$WORK/valgrind/broker.%p.log"
    CS_CLIENT_WRAPPER="valgrind $CS_VALGRIND_FLAGS --log-file=$WORK/valgrind/client.%p.log"
    export CS_START_TIMEOUT=${CS_START_TIMEOUT:-120} CS_STOP_TIMEOUT=${CS_STOP_TIMEOUT:-120}
elif [ "${CS_TSAN:-}" = 1 ]; then
    # CS_TSAN=1 (a configure --enable-tsan build; make check-tsan): the
    # broker and our clients run with tests/tsan-zmq.c preloaded and write
    # ThreadSanitizer reports to $WORK/sanitizer; cs_cleanup fails the test
    # when there is one.
    CS_TIME_FACTOR=3
    CS_TSAN_SHIM=${CS_TSAN_SHIM:-$top_builddir/tests/.libs/cs-tsan-zmq.so}
    export TSAN_OPTIONS="second_deadlock_stack=1 suppressions=$top_srcdir/tests/tsan.supp \
log_path=$WORK/sanitizer/tsan ${TSAN_OPTIONS:-}"
    export CS_BROKER_WRAPPER="env LD_PRELOAD=$CS_TSAN_SHIM"
    CS_CLIENT_WRAPPER="env LD_PRELOAD=$CS_TSAN_SHIM"
fi

# cs_log MESSAGE: a line in the test's log.
cs_log () { echo "[$CS_TEST_NAME] $*"; }

# cs_fail MESSAGE: fails the test (the EXIT trap stops the broker).
cs_fail () {
    echo "[$CS_TEST_NAME] FAIL: $*" >&2
    exit 1
}

# cs_skip MESSAGE: skips the test.
cs_skip () {
    echo "[$CS_TEST_NAME] SKIP: $*"
    exit 77
}

# cs_require PROGRAM...: skips when a needed program is not installed.
cs_require () {
    local program
    for program in "$@"; do
        command -v "$program" >/dev/null 2>&1 || cs_skip "$program not installed"
    done
}

# cs_cleanup: the EXIT trap; stops the broker and shows its log on failure.
cs_cleanup () {
    local rc=$?
    set +e
    if [ -f "$WORK/broker.pid" ]; then
        "$CS_DEPLOY" --stop "$WORK" >/dev/null 2>&1
    fi
    if [ "${CS_VALGRIND:-}" = 1 ] && ! cs_valgrind_check && [ "$rc" = 0 ]; then
        rc=1
    fi
    if [ "${CS_TSAN:-}" = 1 ] && ! cs_tsan_check && [ "$rc" = 0 ]; then
        rc=1
    fi
    if [ "$rc" != 0 ] && [ "$rc" != 77 ] && [ -f "$WORK/broker.log" ]; then
        echo "---- $WORK/broker.log (last 40 lines) ----"
        tail -n 40 "$WORK/broker.log"
    fi
    exit "$rc"
}

# cs_valgrind_check: with CS_VALGRIND=1, reports each valgrind log of
# $WORK/valgrind; returns 1 when one has errors (shown in the test's log).  A
# log with no summary belongs to a process killed on purpose (cs_kill9).
cs_valgrind_check () {
    local log errors bad=0 n=0
    for log in "$WORK"/valgrind/*.log; do
        [ -f "$log" ] || continue
        n=$((n + 1))
        errors=$(sed -n 's/.*ERROR SUMMARY: \([0-9][0-9]*\) errors.*/\1/p' "$log" | tail -n 1)
        if [ -z "$errors" ]; then
            echo "[$CS_TEST_NAME] valgrind: $(basename "$log"): no summary (killed)"
        elif [ "$errors" != 0 ]; then
            bad=1
            echo "[$CS_TEST_NAME] valgrind: $(basename "$log"): $errors errors ----"
            cat "$log"
        fi
    done
    echo "[$CS_TEST_NAME] valgrind: $n process logs, $( [ $bad = 0 ] && echo clean || echo ERRORS)"
    return $bad
}

# cs_tsan_check: with CS_TSAN=1, shows the ThreadSanitizer reports of
# $WORK/sanitizer; returns 1 when there is one.
cs_tsan_check () {
    local log n=0
    for log in "$WORK"/sanitizer/tsan.*; do
        [ -f "$log" ] || continue
        n=$((n + 1))
        echo "[$CS_TEST_NAME] ThreadSanitizer: $(basename "$log") ----"
        cat "$log"
    done
    echo "[$CS_TEST_NAME] ThreadSanitizer: $n process(es) with reports"
    [ "$n" = 0 ]
}

# cs_setup [demo-deploy options...]: a fresh deployment in $WORK with the
# built binaries (extra options, e.g. --tenant NAME, go to demo-deploy.sh);
# sources its env.sh.  Needs the module, broker and drivers built (make check
# builds them).
cs_setup () {
    cs_require pkcs11-tool softhsm2-util openssl
    local need
    for need in "$top_builddir/tools/cryptoserver-admin" "$top_builddir/broker/cryptoserver-broker" \
                "$top_builddir/pkcs11-module/.libs/cryptoserver-pkcs11.so" \
                "$top_builddir/shim-drivers/.libs/pkcs11.so"; do
        [ -e "$need" ] || cs_fail "$need is not built"
    done
    trap cs_cleanup EXIT
    rm -rf "$WORK"
    mkdir -p "$WORK/valgrind" "$WORK/sanitizer"
    "$CS_DEPLOY" "$WORK" --endpoint 'tcp://127.0.0.1:*' "$@" || cs_fail "demo-deploy.sh failed"
    if [ "${CS_VALGRIND:-}" = 1 ]; then      # a broker under valgrind answers slowly
        local conf
        for conf in "$WORK"/clients/*/client.conf; do
            "$CS_ADMIN" config set "$conf" client/timeout-ms 120000
        done
    fi
    # shellcheck disable=SC1091
    . "$WORK/env.sh"
    P11="pkcs11-tool --module $CRYPTOSERVER_MODULE --token-label $CRYPTOSERVER_TOKEN"
    KEYS=$WORK/keys
}

# cs_start: starts the broker (bounded wait until it listens) and points the
# client configs at its endpoint.
cs_start () {
    CS_START_TIMEOUT=${CS_START_TIMEOUT:-30} "$CS_DEPLOY" --start "$WORK" \
        || cs_fail "the broker did not start"
    CRYPTOSERVER_BROKER_PID=$(cat "$WORK/broker.pid")
    BROKER_ENDPOINT=$(cat "$WORK/broker.endpoint")
}

# cs_stop: stops the broker (SIGTERM, bounded wait).
cs_stop () {
    "$CS_DEPLOY" --stop "$WORK" || cs_fail "could not stop the broker"
}

# cs_broker_alive: true while the broker process runs.
cs_broker_alive () {
    kill -0 "$CRYPTOSERVER_BROKER_PID" 2>/dev/null \
        && ! grep -q '^State:.*Z' "/proc/$CRYPTOSERVER_BROKER_PID/status" 2>/dev/null
}

# cs_wait_until SECONDS COMMAND...: polls COMMAND every 0.1 s until it
# succeeds; returns 1 when SECONDS pass first.
cs_wait_until () {
    local limit=$(( $1 * 10 )) waited=0
    shift
    until "$@"; do
        [ $waited -lt $limit ] || return 1
        sleep 0.1
        waited=$((waited + 1))
    done
}

# cs_board_jobs BOARD: N of the last "stats board=BOARD jobs=N" line of the
# broker log (empty when there is none).
cs_board_jobs () {
    sed -n "s/.*stats board=$1 jobs=\([0-9][0-9]*\).*/\1/p" "$WORK/broker.log" | tail -n 1
}

# cs_run_bounded SECONDS OUTFILE COMMAND...: runs COMMAND with a time limit,
# output to OUTFILE; returns its status (124 when it ran out of time).
cs_run_bounded () {
    local seconds=$1 out=$2
    shift 2
    timeout --kill-after=5 "$seconds" "$@" >"$out" 2>&1
}

# ---- keystore tests (keys-*.sh) ----------------------------------------------

CS_KEYS_PY=$top_srcdir/tests/integration/keys-lib.py
CS_BROKER=$top_builddir/broker/cryptoserver-broker

# cs_p11_as CLIENT ARGS...: pkcs11-tool through the module as client CLIENT
# (DIR/clients/CLIENT/client.conf) on the token of the same name (the
# tenant; demo-deploy.sh --tenant makes client NAME for tenant NAME).
cs_p11_as () {
    local client=$1
    shift
    CRYPTOSERVER_CONF=$WORK/clients/$client/client.conf \
        pkcs11-tool --module "$CRYPTOSERVER_MODULE" --token-label "$client" "$@"
}

# cs_pubkey_pem P11CMD ID OUT.pem: the public key with CKA_ID ID as PEM
# (pkcs11-tool 0.23 writes DER for RSA/EC and PEM for Ed25519; for an EC
# point whose X starts with zero bytes its --read-object fails with "cannot
# create EVP_PKEY", so EC keys fall back to CKA_EC_PARAMS/CKA_EC_POINT of -O).
cs_pubkey_pem () {
    local p11=$1 id=$2 out=$3
    if ! $p11 --read-object --type pubkey --id "$id" -o "$out.raw" >/dev/null 2>&1; then
        local fields
        fields=$($p11 -O --type pubkey 2>/dev/null | awk -v id="$id" '
            /^[A-Z].*Object/ { point = ""; params = "" }
            /EC_POINT:/ { point = $2 }
            /EC_PARAMS:/ { params = $2 }
            /^ *ID:/ && $2 == id && point != "" { print params, point; exit }')
        # shellcheck disable=SC2086
        [ -n "${fields// /}" ] && python3 "$CS_KEYS_PY" ec-pem $fields "$out" 2>/dev/null
        return
    fi
    if head -c 11 "$out.raw" | grep -q -- '-----BEGIN'; then
        mv "$out.raw" "$out"
    else
        openssl pkey -pubin -inform DER -in "$out.raw" -out "$out" 2>/dev/null || return 1
        rm -f "$out.raw"
    fi
}

# cs_sign_verify P11CMD ID KIND PUB.pem WORKDIR: signs a fresh message with
# the key CKA_ID ID (KIND rsa: SHA256-RSA-PKCS, ec: ECDSA-SHA256, ed: EDDSA)
# and verifies the signature with openssl.  Returns 1 (with output) when
# either fails.
cs_sign_verify () {
    local p11=$1 id=$2 kind=$3 pub=$4 tmp=$5
    head -c 300 /dev/urandom > "$tmp/msg.bin"
    rm -f "$tmp/sig.bin"
    case $kind in
        rsa) $p11 --login --pin "$CRYPTOSERVER_PIN" --sign --id "$id" --mechanism SHA256-RSA-PKCS \
                 -i "$tmp/msg.bin" -o "$tmp/sig.bin" > "$tmp/sign.log" 2>&1 \
             && openssl dgst -sha256 -verify "$pub" -signature "$tmp/sig.bin" "$tmp/msg.bin" \
                 >> "$tmp/sign.log" 2>&1 ;;
        ec)  $p11 --login --pin "$CRYPTOSERVER_PIN" --sign --id "$id" --mechanism ECDSA-SHA256 \
                 --signature-format openssl -i "$tmp/msg.bin" -o "$tmp/sig.bin" > "$tmp/sign.log" 2>&1 \
             && openssl dgst -sha256 -verify "$pub" -signature "$tmp/sig.bin" "$tmp/msg.bin" \
                 >> "$tmp/sign.log" 2>&1 ;;
        ed)  $p11 --login --pin "$CRYPTOSERVER_PIN" --sign --id "$id" --mechanism EDDSA \
                 -i "$tmp/msg.bin" -o "$tmp/sig.bin" > "$tmp/sign.log" 2>&1 \
             && openssl pkeyutl -verify -pubin -inkey "$pub" -rawin -in "$tmp/msg.bin" \
                 -sigfile "$tmp/sig.bin" >> "$tmp/sign.log" 2>&1 ;;
        *) return 1 ;;
    esac || { cat "$tmp/sign.log"; return 1; }
}

# cs_no_secret_in KEY.pem FILE...: fails the test when any FILE holds a
# 16-byte window of the private numbers of KEY.pem (RSA d, p, q, dP, dQ,
# qInv; the EC or Ed25519 private scalar).
cs_no_secret_in () {
    local key=$1
    shift
    python3 "$CS_KEYS_PY" scan "$key" "$@" || cs_fail "a private key window of $key is on disk or in a log"
}

# cs_keystore_rows TENANT: how many keys the tenant has in the keystore.
cs_keystore_rows () {
    "$CS_ADMIN" key list --dir "$WORK" --tenant "$1" | awk 'NR > 1' | wc -l
}

# cs_kill9: kills the broker with SIGKILL and waits (bounded) until it is gone.
cs_kill9 () {
    kill -KILL "$CRYPTOSERVER_BROKER_PID" 2>/dev/null || true
    cs_wait_until 10 eval '! cs_broker_alive' || cs_fail "the broker survived kill -9"
    rm -f "$WORK/broker.pid"
}
