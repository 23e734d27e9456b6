#!/bin/bash
# check.sh — what CI runs (.ci/run): installs missing packages, builds in
# _build/ (VPATH, --enable-strict), runs `make check` (Check unit tests and
# the integration tests in tests/integration/), then `make check-packages`
# (the Debian packages: tests/integration/packages.sh) and a time-bounded run
# of each libFuzzer target (tools/fuzz.sh check), shows the logs of failures and
# ends with "N passed, N failed"; with $CI set, also `make distcheck`, and the
# quickstart demo runs beside all of it (as on a user's machine that ran the
# README's first command).  Exits non-zero on any failure.
set -eu

usage () {
    cat <<'EOT'
usage: tools/check.sh [--memcheck] [--help]

Builds in _build/ (or $CS_BUILD_DIR) with --enable-strict and runs make check,
then make check-packages (builds and checks the Debian packages), then
tools/fuzz.sh check (the libFuzzer targets, clang, in _build-fuzz/: 60 s each);
with --memcheck, then also make memcheck (valgrind: many minutes; README.md).
Environment: CS_BUILD_DIR  build directory (default SRC/_build)
             CS_JOBS       parallel make jobs (default: number of CPUs)
             CS_FUZZ_SECONDS  how long each libFuzzer target runs (default 60)
             CS_DISTCHECK=1  also run make distcheck (the default when $CI is set)
             CS_WITH_DEMO=1  first start the quickstart demo (tools/quickstart.sh, its
                             fixed ports 5555 and 9464) in a temporary folder and keep it
                             running while every test runs, then stop it: a test that
                             collides with a user's running demo fails here (the default
                             when $CI is set; skipped when both ports are already taken,
                             by the user's own demo say)
EOT
}
MEMCHECK=
case ${1:-} in
    -h|--help) usage; exit 0 ;;
    --memcheck) MEMCHECK=1 ;;
    "") ;;
    *) usage >&2; exit 2 ;;
esac

SRC_DIR=$(cd "$(dirname "$0")/.." && pwd)
BUILD_DIR=${CS_BUILD_DIR:-$SRC_DIR/_build}
JOBS=${CS_JOBS:-$(nproc 2>/dev/null || echo 2)}
step () { echo; echo "==> $*"; }

step "Packages"
# shellcheck source=tools/deps.sh
. "$SRC_DIR/tools/deps.sh"
cs_deps_install
cs_deps_rust

step "Configure (in $BUILD_DIR)"
if [ ! -x "$SRC_DIR/configure" ] || [ "$SRC_DIR/configure.ac" -nt "$SRC_DIR/configure" ]; then
    (cd "$SRC_DIR" && autoreconf -fi)
fi
# A source tree configured in place (an older tools/quickstart.sh) cannot
# also have a VPATH build: clean it first.
if [ "$BUILD_DIR" != "$SRC_DIR" ] && [ -f "$SRC_DIR/config.status" ]; then
    echo "the source tree is configured in place: make distclean there first"
    make -C "$SRC_DIR" distclean >/dev/null
fi
mkdir -p "$BUILD_DIR"
cd "$BUILD_DIR"
# configure looks for optional things (SoftHSMv2 for the tests, ...): a build
# configured before a package came or went is configured again, so that no
# test stays skipped for a dependency installed since.
deps_stamp=$(cs_deps_versions | cksum)
if [ ! -f Makefile ] || [ "$(cat .cs-deps-stamp 2>/dev/null)" != "$deps_stamp" ]; then
    [ -f Makefile ] && echo "installed packages changed since the last configure: configuring again"
    # --with-postgresql: the PostgreSQL keystore is optional for a build,
    # not for CI (tests/integration/keystore-pg.sh, keystore-shared.sh).
    "$SRC_DIR/configure" -q --enable-strict --with-postgresql
    echo "$deps_stamp" > .cs-deps-stamp
fi

step "Build"
make -j"$JOBS"

# The README's first command, left running beside the suite as a new user
# leaves it (tools/quickstart.sh): tools and tests must pick their own ports.
DEMO_DIR= demo_failed=
port_taken () { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
stop_demo () {
    [ -n "$DEMO_DIR" ] || return 0
    step "Stop the quickstart demo ($DEMO_DIR)"
    "$SRC_DIR/tools/quickstart.sh" --stop "$DEMO_DIR/demo" || demo_failed=1
    rm -rf "$DEMO_DIR"
    DEMO_DIR=
}
if [ "${CS_WITH_DEMO:-${CI:+1}}" = 1 ]; then
    step "The quickstart demo, running beside the tests"
    if port_taken 5555 && port_taken 9464; then
        echo "ports 5555 and 9464 are taken (a running demo?): the tests run beside it"
    else
        DEMO_DIR=$(mktemp -d /tmp/cryptoserver-check-demo.XXXXXX)
        trap stop_demo EXIT
        if CS_BUILD_DIR=$BUILD_DIR "$SRC_DIR/tools/quickstart.sh" "$DEMO_DIR/demo" \
                > "$DEMO_DIR/quickstart.log" 2>&1; then
            echo "tools/quickstart.sh $DEMO_DIR/demo: running (pid $(cat "$DEMO_DIR/demo/broker.pid"))"
        else
            demo_failed=1
            echo "FAILED: tools/quickstart.sh $DEMO_DIR/demo"
            tail -n 30 "$DEMO_DIR/quickstart.log" | sed 's/^/    /'
        fi
    fi
fi

step "Test (make check)"
# Every dependency is installed above: a test that finds one missing fails
# instead of skipping (tests/integration/lib.sh, cs_require).
export CS_REQUIRE_ALL=1
rc=0
make -j"$JOBS" check || rc=$?

# The Debian packages (tests/integration/packages.sh): built from the
# distribution files in the test's work folder and checked, alone after the
# other tests (a package build takes the machine's cores for about a minute).
step "Packages (make check-packages)"
make check-packages || rc=$?

# The libFuzzer targets (tools/fuzz.sh, docs/FUZZING.md): built with clang in
# _build-fuzz/ and run CS_FUZZ_SECONDS (60) each, one after the other; a
# crash fails the run (its input is in _build-fuzz/crashes/TARGET/).  Their
# corpora and regression inputs are replayed in make check as well
# (tests/fuzz/replay-*).
step "Fuzz (tools/fuzz.sh check)"
fuzz_failed=
CS_JOBS=$JOBS "$SRC_DIR/tools/fuzz.sh" check || { rc=1; fuzz_failed=1; }

# Counts from the automake .trs files: PASS/XFAIL pass, FAIL/XPASS/ERROR
# fail.  A SKIP passes only when the test said that what it needs cannot
# exist on this machine ("SKIP (cannot exist here): ..." in its log, lib.sh's
# cs_skip); any other skip is a failure: check.sh installed everything.
passed=0 failed=0 skipped=0 skip_names=
while IFS= read -r trs; do
    result=$(sed -n 's/^:test-result: //p' "$trs" | head -n 1)
    case $result in
        PASS|XFAIL) passed=$((passed + 1)) ;;
        SKIP)
            if grep -q 'SKIP (cannot exist here)' "${trs%.trs}.log" 2>/dev/null; then
                skipped=$((skipped + 1))
                skip_names="$skip_names ${trs%.trs}"
            else
                failed=$((failed + 1))
                echo "FAILED (skipped, but its dependencies are installed): ${trs%.trs}"
                tail -n 5 "${trs%.trs}.log" 2>/dev/null | sed 's/^/    /'
            fi ;;
        *) failed=$((failed + 1)); echo "FAILED: ${trs%.trs}" ;;
    esac
done < <(find . -path ./cryptoserver-\* -prune -o -name '*.trs' -print | sort)

if [ "$rc" != 0 ] || [ "$failed" != 0 ]; then
    for log in $(find . -name test-suite.log -o -name packages-suite.log); do
        step "$log"
        cat "$log"
    done
    [ "$failed" != 0 ] || echo "make check failed outside the tests (build error?): see above"
fi

# Under CI (or when asked) the tarball must also build and pass on its own.
if [ "${CS_DISTCHECK:-${CI:+1}}" = 1 ] && [ "$rc" = 0 ] && [ "$failed" = 0 ]; then
    step "make distcheck"
    distcheck_failed=
    make -j"$JOBS" distcheck || { rc=$?; distcheck_failed=1; }
fi

# Opt-in: the unit and integration tests under valgrind (tests/memcheck.am).
if [ -n "$MEMCHECK" ]; then
    step "make memcheck"
    if ! make -j"$JOBS" memcheck; then
        rc=1
        for log in tests/memcheck-unit.log tests/memcheck-integration.log; do
            [ -f "$log" ] && { step "$log"; cat "$log"; }
        done
    fi
fi

stop_demo
trap - EXIT
if [ -n "$fuzz_failed" ]; then
    failed=$((failed + 1))
    echo "FAILED: tools/fuzz.sh check (see above)"
fi
if [ -n "$demo_failed" ]; then
    failed=$((failed + 1)); rc=1
    echo "FAILED: the quickstart demo beside the tests (see above)"
fi

# A test that failed in the distcheck tree: its name and its log's end,
# last, where a CI excerpt of the output's tail shows them.
if [ -n "${distcheck_failed:-}" ]; then
    while IFS= read -r trs; do
        case $(sed -n 's/^:test-result: //p' "$trs" | head -n 1) in
            PASS|XFAIL|SKIP) ;;
            *) step "make distcheck: ${trs%.trs}.log (last 40 lines)"
               tail -n 40 "${trs%.trs}.log" 2>/dev/null ;;
        esac
    done < <(find . -path './cryptoserver-*/_build/*' -name '*.trs' -print | sort)
    echo "FAILED: make distcheck (see above)"
fi
for name in $skip_names; do
    echo "skipped: $name: $(grep -h 'SKIP (cannot exist here)' "$name.log" | head -n 1)"
done
if [ "$skipped" = 0 ]; then
    echo "$passed passed, $failed failed"
else
    echo "$passed passed, $failed failed, $skipped skipped"
fi
[ "$rc" = 0 ] && [ "$failed" = 0 ]
