# lib.sh — shared helpers of the integration tests (sourced, bash).
#
# Each test makes its own demo deployment under the build tree
# (tests/integration/work/NAME, by tools/demo-deploy.sh), starts its own broker
# on $CS_TEST_ENDPOINT (a random free port; the bound endpoint comes back through endpoint-file)
# with its metrics on a free port too (URL in $WORK/broker.metrics), and stops it on exit.  No fixed sleeps: every wait polls with a bound.
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
# Brokers bind a random free port below Linux's ephemeral range (32768 up,
# /proc/sys/net/ipv4/ip_local_port_range; CZMQ's "!" alone picks from 49152
# up, inside it): a broker restarted on its old port (failover.sh) found it
# taken by some client's outgoing connection ("Address already in use").
# The top of that range (32000-32767) is kept for brokers that a test
# restarts on their old port (CS_RESTART_ENDPOINT, failover.sh): under
# make -j2 another test's broker picking the port in the moment between the
# kill and the restart would take it otherwise.
CS_PORT_LOW=20000 CS_PORT_HIGH=31999
CS_TEST_ENDPOINT="tcp://127.0.0.1:![$CS_PORT_LOW-$CS_PORT_HIGH]"
CS_RESTART_ENDPOINT='tcp://127.0.0.1:![32000-32767]'

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

# cs_skip MESSAGE: skips the test for something that cannot exist on this
# machine (never for a package tools/deps.sh installs: use cs_require).
# tools/check.sh lists every skip by name and accepts only these.
cs_skip () {
    echo "[$CS_TEST_NAME] SKIP (cannot exist here): $*"
    exit 77
}

# cs_missing_dependency MESSAGE: something tools/deps.sh installs is missing:
# a skip for a developer's plain `make check`, a failure under
# CS_REQUIRE_ALL=1 (tools/check.sh).
cs_missing_dependency () {
    [ "${CS_REQUIRE_ALL:-}" != 1 ] || cs_fail "$* (tools/deps.sh installs it; CS_REQUIRE_ALL=1)"
    echo "[$CS_TEST_NAME] SKIP (missing dependency): $*"
    exit 77
}

# cs_require PROGRAM...: a needed program.  Missing, it is a skip for a
# developer's plain `make check`, but a failure when CS_REQUIRE_ALL=1
# (tools/check.sh sets it: it installs every package of tools/deps.sh).
cs_require () {
    local program
    for program in "$@"; do
        command -v "$program" >/dev/null 2>&1 || cs_missing_dependency "$program not installed"
    done
}

# cs_cleanup: the EXIT trap.  Stops the broker and checks how it ended (a
# crash, a stop that needed SIGKILL, a sanitizer or valgrind report, or an
# unexpected error in its log fails the test), kills what the test left
# running, and shows the broker's log on failure.
cs_cleanup () {
    local rc=$?
    set +e
    if [ -n "${CRYPTOSERVER_BROKER_PID:-}" ] && ! cs_broker_end && [ "$rc" = 0 ]; then
        rc=1
    fi
    if [ -f "$WORK/broker.log" ] && ! cs_broker_log_check && [ "$rc" = 0 ]; then
        rc=1
    fi
    if ! cs_peers_end && [ "$rc" = 0 ]; then
        rc=1
    fi
    if [ "${CS_VALGRIND:-}" = 1 ] && ! cs_valgrind_check && [ "$rc" = 0 ]; then
        rc=1
    fi
    if [ "${CS_TSAN:-}" = 1 ] && ! cs_tsan_check && [ "$rc" = 0 ]; then
        rc=1
    fi
    cs_kill_leftovers
    [ -z "${CS_PG_DATA:-}" ] || cs_pg_stop
    if [ -d "$WORK" ]; then         # the test's own private keys: never left on disk
        local key
        for key in $(cs_private_keys_on_disk); do
            shred -u "$key" 2>/dev/null || rm -f "$key"
        done
        if [ -n "$(cs_private_keys_on_disk)" ]; then
            echo "[$CS_TEST_NAME] FAIL: private keys left on disk: $(cs_private_keys_on_disk | tr '\n' ' ')" >&2
            rc=1
        fi
    fi
    if [ "$rc" != 0 ] && [ "$rc" != 77 ] && [ -f "$WORK/broker.log" ]; then
        echo "---- $WORK/broker.log (last 40 lines) ----"
        tail -n 40 "$WORK/broker.log"
    fi
    exit "$rc"
}

# cs_kill_leftovers: kills every process this test started that still runs
# (its background jobs and their children), so that no test leaves anything
# running, also when it fails.
cs_kill_leftovers () {
    local pid
    for pid in $(jobs -p); do
        pkill -KILL -P "$pid" 2>/dev/null
        kill -KILL "$pid" 2>/dev/null
    done
    wait 2>/dev/null
}

# cs_stop_child PID SIGNAL SECONDS: sends SIGNAL to our child PID, waits up
# to SECONDS for it to exit, then SIGKILLs it.  Returns its exit status
# (128+N when it died of signal N; 0 when it is not our child), or 124 when
# it had to be killed.
# cs_threads_dump PID: what each thread of a process that will not stop is
# doing, into the test's log (stderr): its name, state and kernel wait
# channel, then gdb's backtraces when gdb is there (the broker forbids
# ptrace by its own user, PR_SET_DUMPABLE; root may still attach).
cs_threads_dump () {
    local pid=$1 task
    echo "[$CS_TEST_NAME] pid $pid: threads (name state wchan):" >&2
    for task in /proc/"$pid"/task/*; do
        echo "    $(cat "$task/comm" 2>/dev/null) $(sed -n 's/^State:\t//p' "$task/status" 2>/dev/null)" \
             "$(cat "$task/wchan" 2>/dev/null)" >&2
    done
    if command -v gdb > /dev/null; then
        timeout 30 gdb -q -batch -p "$pid" -ex 'thread apply all bt 12' 2>&1 | grep -E '^(Thread|#)' | head -n 150 >&2
    fi
}

cs_stop_child () {
    local pid=$1 sig=$2 limit=$(( $3 * 10 )) waited=0 status=0
    if cs_pid_alive "$pid"; then
        kill "-$sig" "$pid" 2>/dev/null
        while cs_pid_alive "$pid" && [ $waited -lt $limit ]; do
            sleep 0.1
            waited=$((waited + 1))
        done
        if cs_pid_alive "$pid"; then
            cs_threads_dump "$pid"
            kill -KILL "$pid" 2>/dev/null
            wait "$pid" 2>/dev/null
            return 124
        fi
    fi
    wait "$pid" 2>/dev/null || status=$?
    [ "$status" != 127 ] || status=0       # not our child (or reaped already)
    return "$status"
}

# cs_broker_end: stops the test's broker if it still runs and checks its
# exit: status 0 after SIGTERM within the (scaled) stop timeout.  Returns 1,
# with the reason in the test's log, on a crash (killed by a signal), a
# non-zero status, an exit before the stop, or a stop that needed SIGKILL.
cs_broker_end () {
    local pid=$CRYPTOSERVER_BROKER_PID status=0 seconds=$(( ${CS_STOP_TIMEOUT:-15} * CS_TIME_FACTOR ))
    CRYPTOSERVER_BROKER_PID=
    rm -f "$WORK/broker.pid"
    if ! cs_pid_alive "$pid"; then
        wait "$pid" 2>/dev/null || status=$?
        echo "[$CS_TEST_NAME] FAIL: the broker (pid $pid) exited on its own (status $status) before the test stopped it" >&2
        return 1
    fi
    cs_stop_child "$pid" TERM "$seconds" || status=$?
    case $status in
        0) echo "[$CS_TEST_NAME] broker (pid $pid) stopped cleanly (status 0)"; return 0 ;;
        124) echo "[$CS_TEST_NAME] FAIL: the broker (pid $pid) did not stop within $seconds s of SIGTERM: killed" >&2 ;;
        12[89]|1[3-9][0-9]|2[0-5][0-9])
            echo "[$CS_TEST_NAME] FAIL: the broker (pid $pid) died of signal $((status - 128)) ($(kill -l "$status" 2>/dev/null))" >&2 ;;
        *) echo "[$CS_TEST_NAME] FAIL: the broker (pid $pid) exited with status $status" >&2 ;;
    esac
    return 1
}

# cs_pid_alive PID: the process runs and is not a zombie.
cs_pid_alive () {
    [ -n "$1" ] && kill -0 "$1" 2>/dev/null \
        && ! grep -q '^State:.*Z' "/proc/$1/status" 2>/dev/null
}

# cs_expect_broker_log REGEX: lines of the broker log at warning or error
# level (W:, E:) matching REGEX (grep -E) are expected by this test.  Any
# other W:/E: line, or a sanitizer or assertion report, fails the test at
# exit (cs_broker_log_check).
CS_EXPECTED_LOG=
cs_expect_broker_log () {
    CS_EXPECTED_LOG="${CS_EXPECTED_LOG:+$CS_EXPECTED_LOG|}$1"
}

# cs_broker_log_check [LOG]: the broker log's (default $WORK/broker.log)
# warnings and errors that no cs_expect_broker_log pattern covers; returns 1
# (and shows them) when there is one.
cs_broker_log_check () {
    local unexpected log=${1:-$WORK/broker.log}
    unexpected=$(grep -E '^(W|E|F): |ERROR: (Address|Thread|Leak|Undefined)Sanitizer|runtime error:|Assertion .* failed|Segmentation fault' \
                     "$log" \
                 | { if [ -n "$CS_EXPECTED_LOG" ]; then grep -Ev -- "$CS_EXPECTED_LOG"; else cat; fi; } \
                 | head -n 20)
    [ -z "$unexpected" ] && return 0
    echo "[$CS_TEST_NAME] FAIL: $(basename "$log") has warnings or errors this test does not expect:" >&2
    echo "$unexpected" >&2
    return 1
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
    "$CS_DEPLOY" "$WORK" --endpoint "$CS_TEST_ENDPOINT" --metrics-port 0 "$@" || cs_fail "demo-deploy.sh failed"
    if [ "${CS_VALGRIND:-}" = 1 ]; then      # a broker under valgrind answers slowly
        local conf
        for conf in "$WORK"/clients/*/client.conf; do
            "$CS_ADMIN" config set "$conf" client/timeout-ms 120000
            # ... and stalls of seconds are no sign of a dead broker there.
            "$CS_ADMIN" config set "$conf" client/heartbeat-timeout-ms 60000
            "$CS_ADMIN" config set "$conf" client/attempt-timeout-ms 60000
        done
        # ... and the broker grants such deadlines (broker/max-deadline-ms).
        "$CS_ADMIN" config set "$WORK/broker.conf" broker/max-deadline-ms 120000
    fi
    # shellcheck disable=SC1091
    . "$WORK/env.sh"
    P11="pkcs11-tool --module $CRYPTOSERVER_MODULE --token-label $CRYPTOSERVER_TOKEN"
    KEYS=$WORK/keys
}

# cs_start: starts the broker as a child of this test (demo-deploy.sh --run,
# which execs it), waits (bounded) until it listens and points the client
# configs at its endpoint.  The test owns the process: cs_stop and the EXIT
# trap check its exit status.
cs_start () {
    "$CS_DEPLOY" --run "$WORK" &
    CRYPTOSERVER_BROKER_PID=$!
    CS_START_TIMEOUT=${CS_START_TIMEOUT:-30} "$CS_DEPLOY" --wait "$WORK" \
        || cs_fail "the broker did not start"
    [ "$(cat "$WORK/broker.pid")" = "$CRYPTOSERVER_BROKER_PID" ] \
        || cs_fail "broker.pid ($(cat "$WORK/broker.pid")) is not the broker this test started ($CRYPTOSERVER_BROKER_PID)"
    BROKER_ENDPOINT=$(cat "$WORK/broker.endpoint")
}

# cs_stop: stops the broker (SIGTERM, bounded wait) and fails the test
# unless it exits with status 0 in time.
cs_stop () {
    [ -n "${CRYPTOSERVER_BROKER_PID:-}" ] || cs_fail "cs_stop: no broker is running"
    cs_broker_end || cs_fail "the broker did not stop cleanly"
}

# cs_wire EXPECTED [OPTIONS] JOB ARGS...: one job sent straight to the
# broker by tests/integration/cs-wire-client as the demo client, logged in
# with its PIN (a client that skips the module: the broker is the policy
# point); the job's CKR_ name must be EXPECTED.  Its stderr goes to
# $WORK/wire.err.
cs_wire () {
    local want=$1 got shown
    shift
    got=$("$top_builddir/tests/integration/cs-wire-client" --endpoint "$BROKER_ENDPOINT" \
          --broker-cert "$WORK/broker.cert" --client-cert "$WORK/clients/demo/client.cert" \
          --pin "$CRYPTOSERVER_PIN" "$@" 2> "$WORK/wire.err") \
        || { cat "$WORK/wire.err"; cs_fail "cs-wire-client $* failed: $got"; }
    got=${got%% *}
    [ "$got" = "$want" ] || cs_fail "wire: $*: $got, expected $want"
    shown=$*
    cs_log "wire: ${shown:0:80} -> $got"
}

# cs_broker_alive: true while the broker process runs.
cs_broker_alive () { cs_pid_alive "${CRYPTOSERVER_BROKER_PID:-}"; }

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

# cs_run_bounded SECONDS OUTFILE COMMAND...: runs COMMAND (a program or a
# shell function) with a time limit, output to OUTFILE; returns its status
# (124 when it ran out of time and was killed, with its children).
cs_run_bounded () {
    local seconds=$1 out=$2 pid waited=0 rc=0
    shift 2
    if [ "$(type -t "$1")" != function ]; then
        timeout --kill-after=5 "$seconds" "$@" >"$out" 2>&1 || rc=$?
        return $rc
    fi
    "$@" >"$out" 2>&1 &
    pid=$!
    while kill -0 "$pid" 2>/dev/null && [ $waited -lt $((seconds * 10)) ]; do
        sleep 0.1
        waited=$((waited + 1))
    done
    if kill -0 "$pid" 2>/dev/null; then
        pkill -KILL -P "$pid" 2>/dev/null
        kill -KILL "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
        return 124
    fi
    wait "$pid" || rc=$?
    return $rc
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

# cs_kill9: kills the broker with SIGKILL on purpose and reaps it.
cs_kill9 () {
    kill -KILL "$CRYPTOSERVER_BROKER_PID" 2>/dev/null || true
    wait "$CRYPTOSERVER_BROKER_PID" 2>/dev/null || true
    cs_wait_until 10 eval '! cs_broker_alive' || cs_fail "the broker survived kill -9"
    CRYPTOSERVER_BROKER_PID=
    rm -f "$WORK/broker.pid"
}

# ---- refusals ----------------------------------------------------------------

# cs_expect_refusal CKR WHAT OUT COMMAND...: COMMAND (bounded: 60 s, scaled
# for valgrind) must fail the way a PKCS#11 application fails on a refusal:
# an ordinary error exit (1..123: not a crash, a kill or a time-out) with
# exactly CKR (e.g. CKR_PIN_INCORRECT; an alternation "CKR_A|CKR_B" when the
# spec allows either) in its output, and the broker must still be alive.
# Output goes to OUT.  Fails the test otherwise.
cs_expect_refusal () {
    local ckr=$1 what=$2 out=$3 rc=0
    shift 3
    cs_run_bounded $((60 * CS_TIME_FACTOR)) "$out" "$@" || rc=$?
    [ "$rc" != 0 ] || { cat "$out"; cs_fail "$what: succeeded"; }
    [ "$rc" -lt 124 ] || { cat "$out"; cs_fail "$what: crashed, was killed or hung (status $rc)"; }
    grep -Eq "(^|[^A-Z_])($ckr)([^A-Z_]|\$)" "$out" \
        || { cat "$out"; cs_fail "$what: refused, but not with $ckr"; }
    if [ -n "${CRYPTOSERVER_BROKER_PID:-}" ]; then
        cs_broker_alive || cs_fail "$what: the broker died"
    fi
    cs_log "$what: refused with $(grep -Eo "(^|[^A-Z_])($ckr)([^A-Z_]|\$)" "$out" | head -n 1 | tr -d ' ():')"
}

# cs_private_keys_on_disk: lists files under $WORK that hold a private key
# in the clear (PEM "PRIVATE KEY" blocks, or DER that OpenSSL parses as a
# private key).  The boards' token files and the sealed keystore are not in
# the clear and are not listed.
cs_private_keys_on_disk () {
    local f
    grep -rlI -- '-----BEGIN .*PRIVATE KEY-----' "$WORK" 2>/dev/null
    find "$WORK" -name '*.der' -type f 2>/dev/null | while read -r f; do
        openssl pkey -inform DER -in "$f" -noout >/dev/null 2>&1 && echo "$f"
    done
    return 0
}

# ---- long-lived PKCS#11 clients (cs-p11-shell) -----------------------------

CS_P11_SHELL=$top_builddir/tests/integration/cs-p11-shell
declare -A CS_SHELL_IN CS_SHELL_OUT CS_SHELL_PID

# cs_shell_start NAME CLIENT [TOKEN]: starts cs-p11-shell (one PKCS#11
# application process that keeps its session) as client CLIENT
# (DIR/clients/CLIENT/client.conf) on token TOKEN (default: CLIENT), fed
# through FIFOs under $WORK; cs_shell talks to it.
cs_shell_start () {
    local name=$1 client=$2 token=${3:-$2} fd
    [ -x "$CS_P11_SHELL" ] || cs_fail "$CS_P11_SHELL is not built"
    rm -f "$WORK/shell-$name.in" "$WORK/shell-$name.out"
    mkfifo "$WORK/shell-$name.in" "$WORK/shell-$name.out"
    CRYPTOSERVER_CONF=$WORK/clients/$client/client.conf $CS_CLIENT_WRAPPER "$CS_P11_SHELL" \
        "$CRYPTOSERVER_MODULE" "$token" < "$WORK/shell-$name.in" > "$WORK/shell-$name.out" \
        2> "$WORK/shell-$name.err" &
    CS_SHELL_PID[$name]=$!
    exec {fd}> "$WORK/shell-$name.in"
    CS_SHELL_IN[$name]=$fd
    exec {fd}< "$WORK/shell-$name.out"
    CS_SHELL_OUT[$name]=$fd
}

# cs_shell NAME EXPECTED COMMAND...: sends COMMAND to shell NAME and fails
# the test unless it answers EXPECTED (a CKR_* name) within 60 s (scaled).
cs_shell () {
    local name=$1 want=$2 line
    shift 2
    echo "$*" >&"${CS_SHELL_IN[$name]}"
    read -r -t $((60 * CS_TIME_FACTOR)) line <&"${CS_SHELL_OUT[$name]}" \
        || { cat "$WORK/shell-$name.err" >&2 || true; cs_fail "$name: no answer to '$*'"; }
    [ "$line" = "$1 $want" ] || { cat "$WORK/shell-$name.err" >&2 || true; cs_fail "$name: '$*' gave '$line', expected $want"; }
    cs_log "$name: $* -> $want"
}

# cs_shell_eventually NAME WANT MEANWHILE CMD...: sends CMD to shell NAME
# every 0.2 s until it answers WANT, within 10 s (scaled); any answer but
# WANT or MEANWHILE fails the test at once, as does no WANT in time.  For a
# change that reaches the broker asynchronously (PostgreSQL NOTIFY), where
# a call may still be served as before the change for a moment.
cs_shell_eventually () {
    local name=$1 want=$2 meanwhile=$3 line
    shift 3
    for _ in $(seq $((50 * CS_TIME_FACTOR))); do
        echo "$*" >&"${CS_SHELL_IN[$name]}"
        read -r -t $((60 * CS_TIME_FACTOR)) line <&"${CS_SHELL_OUT[$name]}" \
            || { cat "$WORK/shell-$name.err" >&2 || true; cs_fail "$name: no answer to '$*'"; }
        [ "$line" = "$1 $want" ] && { cs_log "$name: $* -> $want"; return 0; }
        [ "$line" = "$1 $meanwhile" ] || { cat "$WORK/shell-$name.err" >&2 || true; cs_fail "$name: '$*' gave '$line', expected $want or $meanwhile"; }
        sleep 0.2
    done
    cs_fail "$name: '$*' still gave $meanwhile after $((10 * CS_TIME_FACTOR)) s, expected $want"
}

# cs_shell_stop NAME: ends shell NAME (quit, bounded wait) and fails the test
# unless it exits 0.
cs_shell_stop () {
    local name=$1 rc=0 fd_in=${CS_SHELL_IN[$1]} fd_out=${CS_SHELL_OUT[$1]}
    echo quit >&"$fd_in"
    exec {fd_in}>&- {fd_out}<&-
    cs_wait_until $((30 * CS_TIME_FACTOR)) eval "! kill -0 ${CS_SHELL_PID[$name]} 2>/dev/null" \
        || cs_fail "$name did not end"
    wait "${CS_SHELL_PID[$name]}" || rc=$?
    [ "$rc" = 0 ] || { cat "$WORK/shell-$name.err" >&2; cs_fail "$name exited with status $rc"; }
}

# ---- a private PostgreSQL cluster (keystore/url tests) -----------------------

# The cluster's logic is tools/demo-pg.sh (shared with demo-deploy.sh --ha):
# CS_PG_BINDIR (configure's PG_BINDIR, exported by make check, or the newest
# /usr/lib/postgresql/*/bin), cs_pg_as, cs_psql.
# shellcheck source=tools/demo-pg.sh
. "$top_srcdir/tools/demo-pg.sh"

# cs_pg_start [DBNAME]: starts a private cluster under $WORK/pg (made by
# initdb on first use; trust authentication, superuser "cs"), listening on no
# TCP address, only on the Unix socket directory $CS_PG_SOCKET in the build
# tree; creates database DBNAME (default cryptoserver) when missing.  Sets
# CS_PG_URL (postgresql:///DBNAME?host=SOCKET&user=cs) and CS_PG_PID.  A
# second call after cs_pg_stop starts the same cluster again (same URL).  The
# EXIT trap stops it (cs_pg_stop).
cs_pg_start () {
    local rc=0
    cs_pg_cluster_start "$WORK/pg" "${1:-cryptoserver}" $((60 * CS_TIME_FACTOR)) || rc=$?
    case $rc in
        0) ;;
        2) cs_missing_dependency "the PostgreSQL server (initdb, pg_ctl: package postgresql) or psql is not installed" ;;
        *) cs_fail "PostgreSQL did not start (tools/demo-pg.sh)" ;;
    esac
    cs_log "PostgreSQL (pid $CS_PG_PID) on $CS_PG_SOCKET, database ${1:-cryptoserver}"
}

# cs_pg_stop: stops the private cluster (pg_ctl stop -m fast on its data
# directory; SIGKILL of its postmaster pid when that fails) and waits until
# it is gone.  Keeps the data: cs_pg_start starts it again.
cs_pg_stop () {
    [ -n "${CS_PG_DATA:-}" ] && [ -n "${CS_PG_PID:-}" ] || return 0
    cs_pg_cluster_stop "$WORK/pg" 30 || echo "[$CS_TEST_NAME] PostgreSQL did not stop cleanly" >&2
    CS_PG_PID=
}

# ---- more brokers on the same deployment (failover tests) -------------------

declare -A CS_PEER_PID CS_PEER_ENDPOINT

# cs_peer_start NAME [ENDPOINT]: starts another broker NAME on this
# deployment as the test's child: $WORK/NAME.conf is a copy of broker.conf
# (same keystore, master key, ticket key, broker key pair and boards) that
# binds ENDPOINT (default $CS_TEST_ENDPOINT; give the old endpoint to restart
# it on the same port), writes NAME.endpoint and NAME.metrics, and logs to
# $WORK/NAME.log (appended; each start begins with a "---- start" line).
# Waits (bounded) until it listens; CS_PEER_ENDPOINT[NAME] is its endpoint.
# Its W:/E: lines are checked like the broker's (cs_expect_broker_log), and
# the EXIT trap stops it and checks its exit.  Set CS_PEER_SECRET_KEY to a
# zcert secret file to give it another key pair than the deployment's.
cs_peer_start () {
    local name=$1 endpoint=${2:-$CS_TEST_ENDPOINT} conf=$WORK/$1.conf waited=0
    cp "$WORK/broker.conf" "$conf"
    "$CS_ADMIN" config set "$conf" broker/endpoint "$endpoint"
    "$CS_ADMIN" config set "$conf" broker/endpoint-file "$name.endpoint"
    "$CS_ADMIN" config set "$conf" broker/metrics-file "$name.metrics"
    if [ -n "${CS_PEER_SECRET_KEY:-}" ]; then
        "$CS_ADMIN" config set "$conf" broker/curve/secret-key "$CS_PEER_SECRET_KEY"
    fi
    rm -f "$WORK/$name.endpoint" "$WORK/$name.metrics"
    echo "---- start $(date +%s.%N)" >> "$WORK/$name.log"
    # shellcheck disable=SC2086
    SOFTHSM2_CONF=$WORK/softhsm2.conf CRYPTOSERVER_DRIVER_DIR=$top_builddir/shim-drivers/.libs \
        ${CS_BROKER_WRAPPER:-} "$CS_BROKER" -c "$conf" -f >> "$WORK/$name.log" 2>&1 </dev/null &
    CS_PEER_PID[$name]=$!
    until [ -s "$WORK/$name.endpoint" ]; do
        cs_pid_alive "${CS_PEER_PID[$name]}" || { tail -n 20 "$WORK/$name.log"; cs_fail "broker $name exited before it listened"; }
        [ $waited -lt $(( ${CS_START_TIMEOUT:-30} * 10 )) ] || cs_fail "broker $name did not listen in time"
        sleep 0.1
        waited=$((waited + 1))
    done
    CS_PEER_ENDPOINT[$name]=$(cat "$WORK/$name.endpoint")
    cs_log "broker $name (pid ${CS_PEER_PID[$name]}) listens on ${CS_PEER_ENDPOINT[$name]}"
}

# cs_peer_kill9 NAME: kills broker NAME with SIGKILL on purpose and reaps it.
cs_peer_kill9 () {
    local pid=${CS_PEER_PID[$1]}
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    CS_PEER_PID[$1]=
}

# cs_peer_stop NAME: stops broker NAME (SIGTERM, bounded wait); fails the
# test unless it exits with status 0 in time.
cs_peer_stop () {
    local pid=${CS_PEER_PID[$1]} status=0
    [ -n "$pid" ] || cs_fail "cs_peer_stop: broker $1 is not running"
    CS_PEER_PID[$1]=
    cs_stop_child "$pid" TERM $(( ${CS_STOP_TIMEOUT:-15} * CS_TIME_FACTOR )) || status=$?
    [ "$status" = 0 ] || cs_fail "broker $1 (pid $pid) did not stop cleanly (status $status)"
}

# cs_peers_end: the EXIT trap's part: stops every peer still running and
# checks each peer log; returns 1 when one did not stop cleanly or its log
# has unexpected warnings or errors.
cs_peers_end () {
    local name pid status bad=0
    for name in "${!CS_PEER_PID[@]}"; do
        pid=${CS_PEER_PID[$name]}
        [ -n "$pid" ] || continue
        CS_PEER_PID[$name]=
        status=0
        kill -CONT "$pid" 2>/dev/null      # a test may have stopped it (SIGSTOP)
        cs_stop_child "$pid" TERM $(( ${CS_STOP_TIMEOUT:-15} * CS_TIME_FACTOR )) || status=$?
        [ "$status" = 0 ] || { echo "[$CS_TEST_NAME] FAIL: broker $name (pid $pid) exit status $status" >&2; bad=1; }
    done
    for name in "${!CS_PEER_ENDPOINT[@]}"; do
        [ -f "$WORK/$name.log" ] || continue
        cs_broker_log_check "$WORK/$name.log" || bad=1
    done
    return $bad
}
