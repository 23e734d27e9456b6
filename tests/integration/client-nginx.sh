#!/bin/bash
# client-nginx.sh — nginx serving HTTPS on 127.0.0.1 with its private key on
# the cryptoserver token (ssl_engine pkcs11, libengine-pkcs11-openssl), two
# worker processes: the master loads the engine and the module, the workers
# use the token after fork(), each connection a full handshake signed on the
# token.  curl fetches the page over TLS 1.2 and TLS 1.3 (certificate
# verified with --cacert), until both workers have served requests.
# Config: clients/nginx.conf.in.  nginx runs as the current user with its
# prefix in the work folder (as root, "user root" keeps the workers able to
# read the client config, mode 0600).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/clients/common.sh"

cs_require openssl curl timeout
NGINX=$(cs_find_program nginx) || cs_missing_dependency "nginx not installed (nginx-light)"
cs_pkcs11_engine_ok || cs_missing_dependency "OpenSSL engine pkcs11 not available (install libengine-pkcs11-openssl)"
cs_setup
cs_client_trap
cs_start
T=$WORK/tmp
P=$WORK/nginx
mkdir -p "$T" "$P/logs" "$P/html" "$P/tmp"
export PKCS11_MODULE_PATH=$CRYPTOSERVER_MODULE
KEY=$(cs_key_uri rsa2048)

# The certificate: self-signed by the token key (openssl req through the engine).
cs_run_bounded 60 "$T/req.log" openssl req -new -x509 -engine pkcs11 -keyform engine -key "$KEY" \
    -sha256 -days 2 -subj "/CN=127.0.0.1" -addext "subjectAltName=IP:127.0.0.1" -out "$P/cert.pem" \
    || { cat "$T/req.log"; cs_fail "openssl req could not make the certificate with the token key"; }
openssl x509 -in "$P/cert.pem" -noout -pubkey | cmp -s - "$KEYS/rsa2048.pub.pem" \
    || cs_fail "the certificate's key is not the token's rsa2048"
PAGE="cryptoserver nginx test page $RANDOM$RANDOM"
echo "$PAGE" > "$P/html/index.txt"

USER_LINE=
[ "$(id -u)" = 0 ] && USER_LINE="user $(id -un) $(id -gn);"

NGINX_PID=
# stop_nginx: graceful stop (SIGQUIT); returns nginx's exit status (137
# when it had to be killed).  A master still there 2 s (scaled) after
# SIGQUIT gets its threads' states and stacks (gdb, when installed) written
# to the test's log, then has 30 s more: under make -j the master was seen
# to take 5-12 s to exit after logging "exit" (not understood yet; see the
# closing notes of issue #13), and only a real hang should fail the test.
stop_nginx () {
    local status=0 waited=0
    [ -n "$NGINX_PID" ] || return 0
    kill -QUIT "$NGINX_PID" 2>/dev/null
    while cs_pid_alive "$NGINX_PID" && [ $waited -lt $((20 * CS_TIME_FACTOR)) ]; do
        sleep 0.1
        waited=$((waited + 1))
    done
    if cs_pid_alive "$NGINX_PID"; then
        cs_dump_threads "$NGINX_PID" "nginx master, $((waited / 10)) s after SIGQUIT,"
    fi
    cs_stop_child "$NGINX_PID" QUIT $((30 * CS_TIME_FACTOR)) || status=$?
    [ "$status" != 124 ] || status=137
    NGINX_PID=
    return $status
}
stop_nginx_on_exit () { stop_nginx || true; }
cs_client_on_exit stop_nginx_on_exit

# nginx_answers: true once nginx serves the page; false while it starts;
# ends the wait (status 2) when nginx died or logged a critical error.
nginx_answers () {
    curl -sf -o /dev/null --max-time 10 --cacert "$P/cert.pem" "https://127.0.0.1:$PORT/index.txt" && return 0
    cs_pid_alive "$NGINX_PID" || return 2
    grep -Eq '\[(crit|alert|emerg)\]' "$P/logs/error.log" && return 2
    return 1
}

# start_nginx: nginx on a free port (a new one when another process took it
# first); sets PORT and NGINX_PID once it answers HTTPS.
start_nginx () {
    local try
    for try in 1 2 3 4 5; do
        PORT=$(cs_free_port)
        sed -e "s|@PREFIX@|$P|g" -e "s|@PORT@|$PORT|g" -e "s|@CERT@|$P/cert.pem|g" \
            -e "s|@KEY_URI@|$KEY|g" -e "s|@USER@|$USER_LINE|g" \
            "$CS_CLIENTS_DIR/nginx.conf.in" > "$P/nginx.conf"
        : > "$P/logs/error.log"
        "$NGINX" -p "$P" -c "$P/nginx.conf" -e "$P/logs/error.log" > "$P/logs/stderr.log" 2>&1 &
        NGINX_PID=$!
        cs_wait_for 30 nginx_answers && return 0
        stop_nginx || true
        grep -q "Address already in use" "$P/logs/error.log" "$P/logs/stderr.log" && continue
        break
    done
    cat "$P/logs/stderr.log"
    grep -E '\[(crit|alert|emerg)\]|cryptoserver' "$P/logs/error.log" | head -n 10
    echo "(nginx log: $P/logs/error.log)"
    cs_fail "nginx did not serve HTTPS on 127.0.0.1:$PORT"
}

start_nginx
cs_log "nginx (master pid $NGINX_PID) serves https://127.0.0.1:$PORT/ with the key on the token"
# The master answers once one worker runs; the second may still be forking.
nginx_workers () { ps -o pid= --ppid "$NGINX_PID" | tr -d ' ' | sort; }
two_workers () { [ "$(nginx_workers | wc -l)" = 2 ]; }
cs_wait_until $((10 * CS_TIME_FACTOR)) two_workers \
    || cs_fail "nginx does not run two worker processes: $(nginx_workers | tr '\n' ' ')"
WORKERS=$(nginx_workers)

# fetch TLSOPTS...: one HTTPS request; the page must come back verified.
fetch () {
    curl -sS --max-time 20 --cacert "$P/cert.pem" "$@" "https://127.0.0.1:$PORT/index.txt" \
        -o "$T/page.txt" 2> "$T/curl.log" || { cat "$T/curl.log"; tail -n 20 "$P/logs/error.log"; cs_fail "curl $* failed"; }
    [ "$(cat "$T/page.txt")" = "$PAGE" ] || cs_fail "curl $*: not the page"
}

n=0
while [ $n -lt 60 ]; do
    fetch --tlsv1.2 --tls-max 1.2
    fetch --tlsv1.3
    n=$((n + 2))
    served=$(awk '$NF == 200 { print $1 }' "$P/logs/access.log" | sort -u | wc -l)
    [ $n -ge 10 ] && [ "$served" -ge 2 ] && break
done
awk '$NF == 200 { print $1 }' "$P/logs/access.log" | sort | uniq -c > "$T/per-worker.txt"
cs_log "$n requests, per worker pid: $(tr -s ' \n' ' ' < "$T/per-worker.txt")"
served=$(awk '{ print $2 }' "$T/per-worker.txt" | sort)
[ "$served" = "$WORKERS" ] || cs_fail "not both workers ($WORKERS) served requests: $(cat "$T/per-worker.txt")"
grep -q ' TLSv1.2 .* 200$' "$P/logs/access.log" || cs_fail "no TLSv1.2 request in the access log"
grep -q ' TLSv1.3 .* 200$' "$P/logs/access.log" || cs_fail "no TLSv1.3 request in the access log"
grep -E '\[(crit|alert|emerg)\]' "$P/logs/error.log" && cs_fail "nginx logged errors"
cs_log "curl fetched the page $n times over TLS 1.2 and 1.3 (--cacert verified); both workers served"

rc=0
stop_nginx || rc=$?
[ "$rc" = 0 ] || cs_fail "nginx (with the module loaded in master and workers) exited with status $rc on SIGQUIT"
cs_broker_alive || cs_fail "the broker died"
cs_log "nginx stopped; all nginx checks passed"
