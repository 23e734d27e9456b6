#!/bin/bash
# fuzz.sh — builds and runs the libFuzzer targets (docs/FUZZING.md) in a
# second build tree, _build-fuzz/ (or $CS_FUZZ_BUILD_DIR), configured with
# CC=clang --enable-fuzzers: the main build uses gcc, which has no
# libFuzzer, and every source the targets link must carry clang's coverage
# and sanitizers, so the whole tree is built with them, apart from _build/.
set -eu

usage () {
    cat <<'EOT'
usage: tools/fuzz.sh build
       tools/fuzz.sh run TARGET [LIBFUZZER-OPTION...]
       tools/fuzz.sh check [SECONDS]
       tools/fuzz.sh merge TARGET
       tools/fuzz.sh seeds

build   configure (CC=clang --enable-fuzzers) and build the targets in _build-fuzz
run     run target TARGET (frontend or keystore) under nice -n 19 on its corpus:
        the repository's seeds and regression inputs (tests/fuzz/corpus/TARGET,
        tests/fuzz/regress/TARGET) and the inputs it found before
        (_build-fuzz/corpus/TARGET, where new ones go); crashes are saved in
        _build-fuzz/crashes/TARGET/; options go to libFuzzer (-runs=N,
        -max_total_time=S, -fork=N ...)
check   build, then run each target for SECONDS (default $CS_FUZZ_SECONDS or 60),
        one after the other; fails when one finds a crash (tools/check.sh)
merge   add to tests/fuzz/corpus/TARGET the inputs of _build-fuzz/corpus/TARGET that
        reach new coverage (libFuzzer -merge=1)
seeds   write the seed inputs again (tests/fuzz/fuzz_seeds.c) into tests/fuzz/corpus/
Environment: CS_FUZZ_BUILD_DIR (default SRC/_build-fuzz), CS_JOBS (make jobs, default 2),
             CC (default clang)
EOT
}

SRC_DIR=$(cd "$(dirname "$0")/.." && pwd)
BUILD_DIR=${CS_FUZZ_BUILD_DIR:-$SRC_DIR/_build-fuzz}
JOBS=${CS_JOBS:-2}
TARGETS="frontend keystore"

build () {
    if ! command -v "${CC:-clang}" >/dev/null 2>&1; then
        echo "fuzz.sh: ${CC:-clang} not found: apt-get install clang (tools/deps.sh)" >&2
        return 1
    fi
    if [ ! -x "$SRC_DIR/configure" ] || [ "$SRC_DIR/configure.ac" -nt "$SRC_DIR/configure" ]; then
        (cd "$SRC_DIR" && autoreconf -fi)
    fi
    mkdir -p "$BUILD_DIR"
    cd "$BUILD_DIR"
    if [ ! -f Makefile ] || [ "$SRC_DIR/configure" -nt Makefile ]; then
        CC=${CC:-clang} CFLAGS="-g -O1" "$SRC_DIR/configure" -q --enable-fuzzers
    fi
    # The generated protobuf header first: `make TARGET` does not build
    # BUILT_SOURCES.  The sim driver is the targets' board (dlopen).
    make -j"$JOBS" proto/cryptoserver.pb-c.h >/dev/null
    make -j"$JOBS" shim-drivers/sim.la tests/fuzz/fuzz-seeds \
        $(for t in $TARGETS; do printf 'tests/fuzz/cs-libfuzz-%s ' "$t"; done)
}

target_ok () {
    case " $TARGETS " in *" $1 "*) return 0 ;; esac
    echo "fuzz.sh: unknown target $1 (one of: $TARGETS)" >&2
    exit 2
}

# A target's own libFuzzer options, before the caller's (the last one
# given wins).  frontend keeps state from input to input (keystore rows, the
# key cache: docs/FUZZING.md), so most inputs end with more mallocs than
# frees and libFuzzer's leak check after each one (-detect_leaks) runs the
# input again and scans the whole heap: a quarter of its CPU.  LeakSanitizer
# still checks the process at exit (ASAN_OPTIONS detect_leaks=1), with
# -fork=N at the end of every job.
target_options () {
    case $1 in
        frontend) echo -detect_leaks=0 ;;
    esac
}

# run TARGET OPTION...: one fuzzing process (or -fork=N's), at the lowest priority.
run () {
    target=$1; shift
    target_ok "$target"
    mkdir -p "$BUILD_DIR/corpus/$target" "$BUILD_DIR/crashes/$target"
    CRYPTOSERVER_DRIVER_DIR="$BUILD_DIR/shim-drivers/.libs" \
    ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1} \
    UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
        nice -n 19 "$BUILD_DIR/tests/fuzz/cs-libfuzz-$target" \
        -artifact_prefix="$BUILD_DIR/crashes/$target/" -print_final_stats=1 $(target_options "$target") "$@" \
        "$BUILD_DIR/corpus/$target" "$SRC_DIR/tests/fuzz/corpus/$target" "$SRC_DIR/tests/fuzz/regress/$target"
}

case ${1:-} in
    build) build ;;
    run)
        [ $# -ge 2 ] || { usage >&2; exit 2; }
        shift
        run "$@" ;;
    check)
        seconds=${2:-${CS_FUZZ_SECONDS:-60}}
        (build)
        rc=0
        for t in $TARGETS; do
            echo "==> fuzz target $t: $seconds s"
            run "$t" -max_total_time="$seconds" || { rc=1; echo "FAILED: fuzz target $t (crash in $BUILD_DIR/crashes/$t/)"; }
        done
        exit $rc ;;
    merge)
        [ $# -eq 2 ] || { usage >&2; exit 2; }
        target_ok "$2"
        CRYPTOSERVER_DRIVER_DIR="$BUILD_DIR/shim-drivers/.libs" nice -n 19 \
            "$BUILD_DIR/tests/fuzz/cs-libfuzz-$2" -merge=1 \
            "$SRC_DIR/tests/fuzz/corpus/$2" "$BUILD_DIR/corpus/$2" ;;
    seeds)
        (build)
        mkdir -p "$SRC_DIR/tests/fuzz/corpus/frontend" "$SRC_DIR/tests/fuzz/corpus/keystore"
        "$BUILD_DIR/tests/fuzz/fuzz-seeds" "$SRC_DIR/tests/fuzz/corpus/frontend" \
            "$SRC_DIR/tests/fuzz/corpus/keystore" ;;
    -h|--help) usage ;;
    *) usage >&2; exit 2 ;;
esac
