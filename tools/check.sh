#!/bin/bash
# check.sh — what CI runs (.ci/run): installs missing packages, builds in
# _build/ (VPATH, --enable-strict), runs `make check` (Check unit tests and
# the integration tests in tests/integration/), shows the logs of failures and
# ends with "N passed, N failed"; with $CI set, also `make distcheck`.  Exits
# non-zero on any failure.
set -eu

usage () {
    cat <<'EOT'
usage: tools/check.sh [--memcheck] [--help]

Builds in _build/ (or $CS_BUILD_DIR) with --enable-strict and runs make check;
with --memcheck, then also make memcheck (valgrind: many minutes; README.md).
Environment: CS_BUILD_DIR  build directory (default SRC/_build)
             CS_JOBS       parallel make jobs (default: number of CPUs)
             CS_DISTCHECK=1  also run make distcheck (the default when $CI is set)
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

step "Configure (in $BUILD_DIR)"
if [ ! -x "$SRC_DIR/configure" ] || [ "$SRC_DIR/configure.ac" -nt "$SRC_DIR/configure" ]; then
    (cd "$SRC_DIR" && autoreconf -fi)
fi
mkdir -p "$BUILD_DIR"
cd "$BUILD_DIR"
if [ ! -f Makefile ]; then
    "$SRC_DIR/configure" -q --enable-strict
fi

step "Build"
make -j"$JOBS"

step "Test (make check)"
rc=0
make -j"$JOBS" check || rc=$?

# Counts from the automake .trs files: PASS/XFAIL pass, FAIL/XPASS/ERROR fail.
passed=0 failed=0 skipped=0
while IFS= read -r trs; do
    result=$(sed -n 's/^:test-result: //p' "$trs" | head -n 1)
    case $result in
        PASS|XFAIL) passed=$((passed + 1)) ;;
        SKIP) skipped=$((skipped + 1)) ;;
        *) failed=$((failed + 1)); echo "FAILED: ${trs%.trs}" ;;
    esac
done < <(find . -name '*.trs' | sort)

if [ "$rc" != 0 ] || [ "$failed" != 0 ]; then
    for log in $(find . -name test-suite.log); do
        step "$log"
        cat "$log"
    done
    [ "$failed" != 0 ] || echo "make check failed outside the tests (build error?): see above"
fi

# Under CI (or when asked) the tarball must also build and pass on its own.
if [ "${CS_DISTCHECK:-${CI:+1}}" = 1 ] && [ "$rc" = 0 ] && [ "$failed" = 0 ]; then
    step "make distcheck"
    make -j"$JOBS" distcheck || { rc=$?; echo "make distcheck failed: see above"; }
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

[ "$skipped" = 0 ] || echo "($skipped skipped)"
echo "$passed passed, $failed failed"
[ "$rc" = 0 ] && [ "$failed" = 0 ]
