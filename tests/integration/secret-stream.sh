#!/bin/bash
# secret-stream.sh — multi-part encryption and decryption of any length
# (issue #21, docs/CONTRACTS.md "Multi-part streams"): a C client (cs-stream)
# streams AES ECB/CBC/CBC-PAD/CTR and DES3-CBC-PAD in random parts up to
# 300,000 bytes and checks each result against OpenSSL's EVP, checks a token
# key limited to CKM_AES_CBC_PAD, the errors at the ends of a stream and
# GCM's 64 KiB limit, then runs 10 threads x 10 MiB (100 MiB) of
# AES-256-CBC-PAD in 1 MiB updates at once, its memory growth under 16 MiB;
# here `openssl enc` decrypts thread 0's 10 MiB ciphertext.
. "$(dirname "$0")/lib.sh"

CLIENT=$top_builddir/tests/integration/cs-stream
[ -x "$CLIENT" ] || cs_fail "$CLIENT is not built (make check builds it)"
cs_setup
cs_start
T=$WORK/tmp
mkdir -p "$T"

cs_run_bounded $((300 * CS_TIME_FACTOR)) "$T/client.log" $CS_CLIENT_WRAPPER "$CLIENT" "$CRYPTOSERVER_MODULE" \
    "$CRYPTOSERVER_TOKEN" "$CRYPTOSERVER_PIN" "$T" 10 10 || { cat "$T/client.log"; cs_fail "cs-stream failed"; }
sed 's/^/    /' "$T/client.log"

K=$(od -An -tx1 -v "$T/key.bin" | tr -d ' \n')
IV=$(od -An -tx1 -v "$T/iv.bin" | tr -d ' \n')
[ "$(stat -c %s "$T/plain.bin")" = $((10 * 1024 * 1024)) ] || cs_fail "thread 0 did not write its 10 MiB"
openssl enc -d -aes-256-cbc -K "$K" -iv "$IV" -in "$T/ct.bin" -out "$T/back.bin" \
    || cs_fail "openssl enc cannot decrypt the module's streamed AES-256-CBC-PAD ciphertext"
cmp -s "$T/back.bin" "$T/plain.bin" || cs_fail "openssl enc decrypts the streamed ciphertext to other bytes"
cs_log "openssl enc -d -aes-256-cbc gives back thread 0's 10 MiB"
shred -u "$T/key.bin" 2>/dev/null || true
