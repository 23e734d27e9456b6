#!/bin/bash
# client-openssl.sh — OpenSSL 3 with the token's keys through
# libengine-pkcs11-openssl (engine "pkcs11", libp11) and cryptoserver-pkcs11.so:
#   - openssl pkeyutl -sign: RSA-PSS (rsa2048, rsa3072), PKCS#1 v1.5 and
#     ECDSA (p256); openssl dgst -sign with ECDSA; every signature verified by
#     openssl against the public PEMs of the demo keys (and a wrong message
#     must not verify);
#   - openssl req -new -x509: self-signed certificates with the token's rsa2048
#     and p256 keys, checked by openssl verify and against the public PEMs;
#   - openssl s_server (key on the token, on 127.0.0.1) and openssl s_client:
#     TLS 1.2 (RSA-PSS and PKCS#1 v1.5 signature algorithms, ECDSA) and
#     TLS 1.3 (RSA-PSS, ECDSA) handshakes with "Verify return code: 0" and an
#     HTTP answer over the connection.
# The engine finds the module through PKCS11_MODULE_PATH; keys are named by
# RFC 7512 URIs with pin-value.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/clients/common.sh"

cs_require openssl timeout
cs_pkcs11_engine_ok || cs_missing_dependency "OpenSSL engine pkcs11 not available (install libengine-pkcs11-openssl)"
cs_setup
cs_client_trap
cs_start
T=$WORK/tmp
mkdir -p "$T"
export PKCS11_MODULE_PATH=$CRYPTOSERVER_MODULE
RSA=$(cs_key_uri rsa2048)
RSA3072=$(cs_key_uri rsa3072)
EC=$(cs_key_uri p256)

# run_ok WHAT COMMAND...: COMMAND must succeed within 60 s (output in $T/run.log).
run_ok () {
    local what=$1
    shift
    cs_run_bounded 60 "$T/run.log" "$@" || { cat "$T/run.log"; cs_fail "$what failed"; }
}

# ---- pkeyutl / dgst signatures ----------------------------------------------
head -c 2000 /dev/urandom > "$T/msg.bin"
head -c 2000 /dev/urandom > "$T/other.bin"
for md in sha256 sha384; do
    openssl dgst -$md -binary "$T/msg.bin" > "$T/msg.$md"
    openssl dgst -$md -binary "$T/other.bin" > "$T/other.$md"
done

# sign_verify WHAT KEYURI PUBPEM DIGESTFILE OTHERDIGEST PKEYOPTS...: signs
# DIGESTFILE with the token key, verifies with openssl on the public PEM, and
# checks that the signature does not verify OTHERDIGEST.
sign_verify () {
    local what=$1 key=$2 pub=$3 in=$4 other=$5 opt
    shift 5
    local opts=()
    for opt in "$@"; do opts+=(-pkeyopt "$opt"); done
    rm -f "$T/sig.bin"
    run_ok "$what: pkeyutl -sign" \
        openssl pkeyutl -engine pkcs11 -keyform engine -inkey "$key" -sign \
        -in "$in" -out "$T/sig.bin" "${opts[@]}"
    openssl pkeyutl -verify -pubin -inkey "$pub" -in "$in" -sigfile "$T/sig.bin" "${opts[@]}" \
        > "$T/verify.log" 2>&1 || { cat "$T/verify.log"; cs_fail "$what: openssl does not verify the signature"; }
    grep -q "Signature Verified Successfully" "$T/verify.log" || cs_fail "$what: no verification message"
    openssl pkeyutl -verify -pubin -inkey "$pub" -in "$other" -sigfile "$T/sig.bin" "${opts[@]}" \
        >/dev/null 2>&1 && cs_fail "$what: the signature verifies another message"
    cs_log "$what: pkeyutl -sign with the token key, verified by openssl"
}

sign_verify "rsa2048 RSA-PSS SHA-256 salt 32" "$RSA" "$KEYS/rsa2048.pub.pem" "$T/msg.sha256" "$T/other.sha256" \
    rsa_padding_mode:pss digest:sha256 rsa_mgf1_md:sha256 rsa_pss_saltlen:32
sign_verify "rsa3072 RSA-PSS SHA-384 salt 48" "$RSA3072" "$KEYS/rsa3072.pub.pem" "$T/msg.sha384" "$T/other.sha384" \
    rsa_padding_mode:pss digest:sha384 rsa_mgf1_md:sha384 rsa_pss_saltlen:48
sign_verify "rsa2048 PKCS#1 v1.5 SHA-256" "$RSA" "$KEYS/rsa2048.pub.pem" "$T/msg.sha256" "$T/other.sha256" \
    rsa_padding_mode:pkcs1 digest:sha256
sign_verify "p256 ECDSA (SHA-256 digest)" "$EC" "$KEYS/p256.pub.pem" "$T/msg.sha256" "$T/other.sha256"
sign_verify "p256 ECDSA (SHA-384 digest)" "$EC" "$KEYS/p256.pub.pem" "$T/msg.sha384" "$T/other.sha384"

run_ok "p256 dgst -sha256 -sign" \
    openssl dgst -sha256 -engine pkcs11 -keyform engine -sign "$EC" -out "$T/dgst.sig" "$T/msg.bin"
openssl dgst -sha256 -verify "$KEYS/p256.pub.pem" -signature "$T/dgst.sig" "$T/msg.bin" >/dev/null 2>&1 \
    || cs_fail "p256 dgst -sign: openssl does not verify the signature"
cs_log "p256 openssl dgst -sha256 -sign with the token key, verified by openssl"

# ---- self-signed certificates ----------------------------------------------------
# selfsign NAME KEYURI PUBPEM: NAME.pem, a self-signed certificate for
# 127.0.0.1 made by openssl req with the token key.
selfsign () {
    local name=$1 key=$2 pub=$3
    run_ok "$name: openssl req -new -x509" \
        openssl req -new -x509 -engine pkcs11 -keyform engine -key "$key" -sha256 -days 2 \
        -subj "/CN=127.0.0.1/O=cryptoserver client-openssl test" \
        -addext "subjectAltName=IP:127.0.0.1" -out "$T/$name.pem"
    openssl verify -CAfile "$T/$name.pem" "$T/$name.pem" > "$T/verify.log" 2>&1 \
        || { cat "$T/verify.log"; cs_fail "$name: openssl verify rejects the self-signed certificate"; }
    grep -q ": OK\$" "$T/verify.log" || cs_fail "$name: openssl verify did not say OK"
    openssl x509 -in "$T/$name.pem" -noout -pubkey > "$T/$name.pub.pem"
    cmp -s "$T/$name.pub.pem" "$pub" || cs_fail "$name: the certificate's key is not the token key"
    cs_log "$name: self-signed certificate made by openssl req with the token key; openssl verify: OK; key = $(basename "$pub")"
}
selfsign rsa-cert "$RSA" "$KEYS/rsa2048.pub.pem"
selfsign ec-cert "$EC" "$KEYS/p256.pub.pem"

# ---- TLS: s_server with the token key, s_client ---------------------------------------
SERVER_PID=
# start_server KEYURI CERT N EXTRA...: openssl s_server on 127.0.0.1 (a port
# the kernel picks), answering N connections (-www); sets PORT.
start_server () {
    local key=$1 cert=$2 n=$3
    shift 3
    rm -f "$T/server.log"
    openssl s_server -engine pkcs11 -keyform engine -key "$key" -cert "$cert" \
        -accept 127.0.0.1:0 -naccept "$n" -www "$@" > "$T/server.log" 2>&1 &
    SERVER_PID=$!
    cs_client_track "$SERVER_PID"
    cs_wait_grep 30 "$SERVER_PID" "$T/server.log" '^ACCEPT ' \
        || { cat "$T/server.log"; cs_fail "openssl s_server did not start"; }
    PORT=$(sed -n 's/^ACCEPT .*:\([0-9][0-9]*\)$/\1/p' "$T/server.log")
    [ -n "$PORT" ] || { cat "$T/server.log"; cs_fail "no port in the s_server output"; }
}

# handshake WHAT CERT VERSION PEERSIG CLIENTOPTS...: s_client with -VERSION
# to the running server: the handshake must succeed with that protocol,
# verify the server certificate against CERT, show peer signature type
# PEERSIG, and fetch s_server's -www page.
handshake () {
    local what=$1 cert=$2 version=$3 peersig=$4
    shift 4
    printf 'GET / HTTP/1.0\r\n\r\n' | timeout --kill-after=5 $((30 * CS_TIME_FACTOR)) openssl s_client \
        -connect "127.0.0.1:$PORT" -CAfile "$cert" -verify_return_error -verify_ip 127.0.0.1 \
        "-$version" -ign_eof "$@" > "$T/client.log" 2>&1 \
        || { cat "$T/client.log"; echo "---- server ----"; cat "$T/server.log"; cs_fail "$what: s_client failed"; }
    local proto
    proto=$(echo "$version" | sed 's/tls1_\([0-9]\)/TLSv1.\1/')
    cs_expect "$T/client.log" "^New, $proto, Cipher is " "$what: not a $proto handshake"
    cs_expect "$T/client.log" "Verify return code: 0 \(ok\)" "$what: the server certificate did not verify"
    cs_expect "$T/client.log" "^Peer signature type: $peersig\$" "$what: peer signature type is not $peersig"
    cs_expect "$T/client.log" "^HTTP/1.0 200 ok" "$what: no HTTP answer over the connection"
    cs_log "$what: $(grep -m1 '^New, ' "$T/client.log"), peer signature $peersig, Verify return code: 0 (ok), page fetched"
}

# wait_server: the server must exit by itself (-naccept) with status 0.  A
# server still there 2 s (scaled) after its last connection gets its
# threads' stacks written to the log (cs_dump_threads), then has 30 s more:
# only a real hang fails the test.
wait_server () {
    local waited=0
    while cs_pid_alive "$SERVER_PID" && [ $waited -lt $((20 * CS_TIME_FACTOR)) ]; do sleep 0.1; waited=$((waited + 1)); done
    if cs_pid_alive "$SERVER_PID"; then
        cs_dump_threads "$SERVER_PID" "openssl s_server, $((waited / 10)) s after its last connection,"
    fi
    waited=0
    while cs_pid_alive "$SERVER_PID" && [ $waited -lt $((300 * CS_TIME_FACTOR)) ]; do sleep 0.1; waited=$((waited + 1)); done
    cs_pid_alive "$SERVER_PID" && { cat "$T/server.log"; cs_fail "s_server did not exit after its connections"; }
    local rc=0
    wait "$SERVER_PID" || rc=$?
    cs_client_untrack "$SERVER_PID"
    [ $rc = 0 ] || { cat "$T/server.log"; cs_fail "s_server exited with status $rc"; }
}

start_server "$RSA" "$T/rsa-cert.pem" 3
handshake "RSA TLS 1.2 (RSA-PSS)" "$T/rsa-cert.pem" tls1_2 RSA-PSS
handshake "RSA TLS 1.2 (PKCS#1 v1.5, sigalgs RSA+SHA256)" "$T/rsa-cert.pem" tls1_2 RSA -sigalgs RSA+SHA256
handshake "RSA TLS 1.3" "$T/rsa-cert.pem" tls1_3 RSA-PSS
wait_server

start_server "$EC" "$T/ec-cert.pem" 2
handshake "ECDSA TLS 1.2" "$T/ec-cert.pem" tls1_2 ECDSA
handshake "ECDSA TLS 1.3" "$T/ec-cert.pem" tls1_3 ECDSA
wait_server

cs_log "all OpenSSL engine checks passed"
