#!/bin/bash
# fork.sh — fork() safety of the module (issue #4) with a small C client
# (cs-fork): children of an initialised, logged-in parent get
# CKR_CRYPTOKI_NOT_INITIALIZED until they call C_Initialize, which then
# works (login, 20 signatures each verified by OpenSSL); the parent keeps
# signing while they run and after; and a child forked while 4 parent
# threads are inside C_Sign initialises and signs too.
. "$(dirname "$0")/lib.sh"

CLIENT=$top_builddir/tests/integration/cs-fork
[ -x "$CLIENT" ] || cs_fail "$CLIENT is not built (make check builds it)"
cs_setup
cs_start
T=$WORK/tmp
mkdir -p "$T"

cs_run_bounded $((120 * CS_TIME_FACTOR)) "$T/client.log" $CS_CLIENT_WRAPPER "$CLIENT" \
    "$CRYPTOSERVER_MODULE" "$CRYPTOSERVER_TOKEN" "$CRYPTOSERVER_PIN" "$KEYS/rsa2048.pub.pem" rsa2048 \
    || { cat "$T/client.log"; cs_fail "cs-fork failed"; }
sed 's/^/    /' "$T/client.log"
grep -q '^ok$' "$T/client.log" || cs_fail "cs-fork did not finish"
[ "$(grep -c 'then 20 signatures verified' "$T/client.log")" = 6 ] \
    || cs_fail "expected 6 children (4 + 2 forked during C_Sign) to sign"
cs_log "4 children and 2 children forked mid-C_Sign re-initialise and sign; the parent is unaffected"
cs_stop
