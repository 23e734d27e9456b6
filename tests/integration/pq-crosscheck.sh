#!/bin/sh
# pq-crosscheck.sh — the pq driver against dilithium-py and kyber-py (pure
# Python ML-DSA and ML-KEM from the Python package registry), installed in a
# virtualenv in the build tree (tests/integration/work/pq-venv, made once).
# Skips (77) when the virtualenv cannot be made or the packages cannot be
# installed (no network): the driver's own tests do not need them.
set -e
: "${top_srcdir:?}" "${top_builddir:?}" "${CRYPTOSERVER_DRIVER_DIR:?}"
venv=$top_builddir/tests/integration/work/pq-venv
if ! "$venv/bin/python" -c 'import dilithium_py, kyber_py' 2>/dev/null; then
    mkdir -p "$top_builddir/tests/integration/work"
    python3 -m venv "$venv" >/dev/null 2>&1 || { echo "SKIP: python3 -m venv failed"; exit 77; }
    "$venv/bin/pip" install -q 'dilithium-py==1.5.1' 'kyber-py==1.2.0' \
        || { echo "SKIP: cannot install dilithium-py and kyber-py"; exit 77; }
fi
exec "$venv/bin/python" "$top_srcdir/tests/integration/pq-crosscheck.py" "$CRYPTOSERVER_DRIVER_DIR"
