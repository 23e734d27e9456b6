#!/bin/bash
# admin-status.sh — `cryptoserver-admin status` (issue #11) against the demo
# broker: the boards it shows are the deployment's (board list), and after a
# known load — 2 x 20 RSA signatures by cryptoserver-bench and one RSA
# decryption the board refuses — board0 + board1 show exactly 40 jobs ok and
# 1 error (health "errors" on the board that refused), the client queue is
# empty and client demo (tenant demo) has 0 jobs in flight.  The URL comes
# from the deployment (broker/metrics-file) or --metrics, repeated for
# several brokers; a broker that does not answer is named, with the reason,
# and the status is 1 while the others are still shown.
. "$(dirname "$0")/lib.sh"

cs_setup
cs_start
T=$WORK/tmp
mkdir -p "$T"
URL=$(cat "$WORK/broker.metrics")

# column FILE BOARD N: field N of BOARD's row in a status output.
column () { awk -v b="$2" -v n="$3" '$1 == b { print $n; exit }' "$1"; }

"$CS_ADMIN" status --dir "$WORK" > "$T/idle.out" || { cat "$T/idle.out"; cs_fail "status --dir failed"; }
cat "$T/idle.out"
grep -qx "broker $URL: up, queue depth client 0, background [0-9]*; cpu [0-9.]* s" "$T/idle.out" \
    || cs_fail "status --dir did not show the broker at $URL (broker/metrics-file) as up"
boards=$("$CS_ADMIN" board list --dir "$WORK" | awk 'NR > 1 { print $1 }' | sort | tr '\n' ' ')
shown=$(awk '/^  BOARD /{ on = 1; next } /^  CLIENT |^  \(no/{ on = 0 } on { print $1 }' "$T/idle.out" | sort | tr '\n' ' ')
[ -n "$boards" ] && [ "$boards" = "$shown" ] || cs_fail "status shows boards '$shown', the deployment has '$boards'"
for board in board0 board1; do
    [ "$(column "$T/idle.out" "$board" 2)" = idle ] && [ "$(column "$T/idle.out" "$board" 3)" = 0 ] \
        || cs_fail "$board is not idle with 0 jobs before any job"
done
cs_log "status --dir: boards $shown, board0 and board1 idle"

# ---- a known load ---------------------------------------------------------------
$CS_CLIENT_WRAPPER "$CS_BENCH" --module "$CRYPTOSERVER_MODULE" --token "$CRYPTOSERVER_TOKEN" \
    --pin "$CRYPTOSERVER_PIN" --key rsa2048 --threads 2 --count 20 > "$T/bench.out" 2>&1 \
    || { cat "$T/bench.out"; cs_fail "cryptoserver-bench failed"; }
head -c 256 /dev/zero > "$T/zero.bin"
cs_expect_refusal 'CKR_[A-Z_]+' "RSA-PKCS decryption of a zero ciphertext" "$T/decrypt.out" \
    $P11 --login --pin "$CRYPTOSERVER_PIN" --decrypt --mechanism RSA-PKCS --id 01 \
    -i "$T/zero.bin" -o "$T/plain.bin"

"$CS_ADMIN" status --metrics "$URL" > "$T/anon.out" || { cat "$T/anon.out"; cs_fail "status --metrics failed"; }
grep -q '^  all clients: 0 jobs in flight (names need the bearer token' "$T/anon.out" \
    || { cat "$T/anon.out"; cs_fail "status without the token does not show the clients' sum"; }
! grep -q '^  demo ' "$T/anon.out" || cs_fail "status without the token shows client names"
"$CS_ADMIN" status --metrics "$URL" --token-file "$WORK/metrics.token" > "$T/load.out" \
    || { cat "$T/load.out"; cs_fail "status --metrics --token-file failed"; }
cat "$T/load.out"
ok=$(( $(column "$T/load.out" board0 3) + $(column "$T/load.out" board1 3) ))
errors=$(( $(column "$T/load.out" board0 4) + $(column "$T/load.out" board1 4) ))
[ "$ok" = 40 ] || cs_fail "board0 + board1 show $ok jobs ok, the bench signed 40 times"
[ "$errors" = 1 ] || cs_fail "board0 + board1 show $errors errors, one decryption was refused"
refuser=$(awk '$1 ~ /^board[01]$/ && $4 == 1 { print $1 }' "$T/load.out")
[ "$(column "$T/load.out" "$refuser" 2)" = errors ] || cs_fail "the board that refused ($refuser) is not shown with health 'errors'"
other=$([ "$refuser" = board0 ] && echo board1 || echo board0)
case $(column "$T/load.out" "$other" 2) in ok|idle) ;; *) cs_fail "$other: health $(column "$T/load.out" "$other" 2)";; esac
grep -q "^broker $URL: up, queue depth client 0," "$T/load.out" || cs_fail "the client queue is not shown empty"
[ "$(awk '$1 == "demo" && $2 == "demo" { print $3 }' "$T/load.out")" = 0 ] \
    || cs_fail "client demo (tenant demo) is not shown with 0 jobs in flight"
cs_log "status after the load: board0 + board1 $ok jobs ok, $errors error ($refuser: errors); client demo 0 in flight"

# ---- several brokers, one unreachable -------------------------------------------
closed=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
rc=0
"$CS_ADMIN" status --metrics "$URL" --metrics "http://127.0.0.1:$closed/metrics" --metrics "$URL" \
    > "$T/three.out" 2> "$T/three.err" || rc=$?
cat "$T/three.out" "$T/three.err"
[ "$rc" = 1 ] || cs_fail "status with an unreachable broker exited $rc, not 1"
[ "$(grep -c "^broker $URL: up" "$T/three.out")" = 2 ] || cs_fail "the reachable broker was not shown twice"
grep -qx "broker http://127.0.0.1:$closed/metrics: unreachable" "$T/three.out" \
    || cs_fail "the unreachable broker is not shown as unreachable"
grep -q "broker http://127.0.0.1:$closed/metrics: connect to 127.0.0.1 port $closed: Connection refused" "$T/three.err" \
    || cs_fail "no clear reason for the unreachable broker"
rc=0
"$CS_ADMIN" status --metrics "ftp://127.0.0.1/metrics" > /dev/null 2> "$T/ftp.err" || rc=$?
[ "$rc" = 1 ] && grep -q 'not http://HOST\[:PORT\]\[/PATH\]' "$T/ftp.err" || cs_fail "a non-http URL: status $rc, $(cat "$T/ftp.err")"
cs_log "three --metrics: two shown, the unreachable one named with its reason (exit 1)"
