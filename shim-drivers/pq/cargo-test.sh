#!/bin/sh
# cargo-test.sh — runs the pq driver crate's own tests (NIST ACVP vectors of
# every parameter set, the PKCS#8 codec, the ABI layouts) from `make check`,
# with the sources in $top_srcdir and cargo's files in the build tree.
set -e
exec env CARGO_TARGET_DIR="$PQ_TARGET_DIR" "$CARGO" test --locked \
    --manifest-path "$top_srcdir/shim-drivers/pq/Cargo.toml"
