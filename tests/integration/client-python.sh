#!/bin/bash
# client-python.sh — Python PyKCS11 (Debian python3-pykcs11) with
# cryptoserver-pkcs11.so: clients/pykcs11_test.py finds the token by label,
# logs in, lists the objects, signs (SHA256-RSA-PKCS, ECDSA-SHA256) and
# verifies through the module and with openssl, decrypts openssl-made OAEP
# ciphertexts, checks that closing the last session logs out and
# C_SeedRandom/C_GenerateRandom, then generates RSA and EC key pairs, signs,
# verifies, decrypts with them, digests an ECDH-derived secret key with
# C_DigestKey (checked against openssl's value) and destroys them.
# The interpreter: $CS_PYTHON, else the first of python3 in $PATH and
# /usr/bin/python3 that can import PyKCS11 (a pyenv python3 in $PATH does not
# see Debian's dist-packages).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/clients/common.sh"

cs_require openssl
PY=
for candidate in ${CS_PYTHON:-} "$(command -v python3 || true)" /usr/bin/python3; do
    [ -n "$candidate" ] && [ -x "$candidate" ] || continue
    if "$candidate" -c 'import PyKCS11' >/dev/null 2>&1; then PY=$candidate; break; fi
done
[ -n "$PY" ] || cs_missing_dependency "no python3 with PyKCS11 (install python3-pykcs11)"
cs_setup
cs_client_trap
cs_start
T=$WORK/tmp
mkdir -p "$T"
cs_log "python: $PY (PyKCS11 $("$PY" -c 'import PyKCS11, importlib.metadata as m; print(m.version("PyKCS11"))' 2>/dev/null || echo '?'))"

rc=0
timeout --kill-after=5 $((60 * CS_TIME_FACTOR)) "$PY" "$CS_CLIENTS_DIR/pykcs11_test.py" "$CRYPTOSERVER_MODULE" \
    "$CRYPTOSERVER_TOKEN" "$CRYPTOSERVER_PIN" "$KEYS" "$T" || rc=$?
case $rc in
    0) cs_log "all PyKCS11 checks passed" ;;
    3) cs_fail "PyKCS11: the demo-key checks passed, but C_GenerateKeyPair is not supported by the module (CKR_FUNCTION_NOT_SUPPORTED): generate/destroy cannot run" ;;
    124|137) cs_fail "pykcs11_test.py ran out of time" ;;
    *) cs_fail "pykcs11_test.py failed (status $rc)" ;;
esac
