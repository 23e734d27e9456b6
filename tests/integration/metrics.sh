#!/bin/bash
# metrics.sh — the broker's metrics endpoint (cryptoserver-broker(8), METRICS)
# in the demo deployment, on a port the kernel picks: signatures through the
# module (pkcs11-tool, cryptoserver-bench) and one decryption the board
# refuses must show up exactly once each in cryptoserver_jobs_total of the
# boards that ran them, every histogram must be consistent (cumulative
# buckets, +Inf = _count = the board's jobs for every stage), nothing may
# stay in flight, the exit stats must agree, cryptoserver-bench --metrics
# must print the broker's CPU per operation, and a metrics address that is
# not loopback must stop the broker at start (exit 2).  No speed is asserted.
. "$(dirname "$0")/lib.sh"

cs_require curl
cs_setup
cs_start

# ---- the URL: written by the broker, exported by env.sh -------------------
# shellcheck disable=SC1091
. "$WORK/env.sh"
URL=$(cat "$WORK/broker.metrics" 2>/dev/null) || cs_fail "the broker wrote no broker.metrics"
[ "$CRYPTOSERVER_METRICS_URL" = "$URL" ] \
    || cs_fail "env.sh exports CRYPTOSERVER_METRICS_URL='$CRYPTOSERVER_METRICS_URL', the broker serves $URL"
[[ $URL =~ ^http://127\.0\.0\.1:[1-9][0-9]*/metrics$ ]] || cs_fail "metrics URL $URL is not on 127.0.0.1 with a real port"
cs_log "metrics at $URL (port 0 resolved)"

# scrape OUT: the metrics into OUT, with the bearer token of the
# deployment (fails the test on an HTTP error).
[ "$CRYPTOSERVER_METRICS_TOKEN_FILE" = "$WORK/metrics.token" ] && [ -s "$WORK/metrics.token" ] \
    || cs_fail "env.sh exports no metrics token file ($CRYPTOSERVER_METRICS_TOKEN_FILE)"
[ "$(stat -c %a "$WORK/metrics.token")" = 600 ] || cs_fail "metrics.token is not chmod 600"
scrape () {
    curl -sf --max-time 10 -H "Authorization: Bearer $(cat "$CRYPTOSERVER_METRICS_TOKEN_FILE")" "$URL" > "$1" \
        || cs_fail "GET $URL failed"
}

# value FILE SERIES: the value of the sample SERIES (name{labels} exactly), or "".
value () { awk -v s="$2" 'index($0, s " ") == 1 { print $2; exit }' "$1"; }

# total FILE REGEX: the sum of the samples whose line matches REGEX (awk).
total () { awk -v r="$2" '$0 ~ r { n += $NF } END { printf "%d\n", n }' "$1"; }

scrape "$WORK/m0"
for family in cryptoserver_jobs_total:counter cryptoserver_job_seconds:histogram \
              cryptoserver_queue_depth:gauge cryptoserver_inflight_jobs:gauge \
              cryptoserver_key_cache_hits_total:counter cryptoserver_key_cache_misses_total:counter \
              process_cpu_seconds_total:counter; do
    grep -q "^# HELP ${family%%:*} ." "$WORK/m0" && grep -qx "# TYPE ${family%%:*} ${family##*:}" "$WORK/m0" \
        || cs_fail "no # HELP / # TYPE ${family##*:} lines for ${family%%:*}"
done
# The cpu board may already be refilling the demo's RSA key pool (background
# key generation): only the SoftHSM boards, which run this test's jobs, count.
[ "$(total "$WORK/m0" '^cryptoserver_jobs_total[{]board="board[01]"')" = 0 ] || cs_fail "jobs counted before any job"

# ---- jobs: 5 ECDSA signatures, 1 refused decryption, 2 x 40 RSA signatures -
for i in 1 2 3 4 5; do
    cs_sign_verify "$P11" 03 ec "$KEYS/p256.pub.pem" "$WORK" || cs_fail "ECDSA signature $i"
done
head -c 256 /dev/zero > "$WORK/zero.bin"
cs_expect_refusal 'CKR_[A-Z_]+' "RSA-PKCS decryption of a zero ciphertext" "$WORK/decrypt.out" \
    $P11 --login --pin "$CRYPTOSERVER_PIN" --decrypt --mechanism RSA-PKCS --id 01 \
    -i "$WORK/zero.bin" -o "$WORK/plain.bin"
$CS_CLIENT_WRAPPER "$CS_BENCH" --module "$CRYPTOSERVER_MODULE" --token "$CRYPTOSERVER_TOKEN" \
    --pin "$CRYPTOSERVER_PIN" --key rsa2048 --threads 2 --count 20 --metrics "$CRYPTOSERVER_METRICS_URL" \
    > "$WORK/bench.out" 2>&1 || { cat "$WORK/bench.out"; cs_fail "cryptoserver-bench --metrics failed"; }
cat "$WORK/bench.out"
grep -Eq '^broker CPU per op: [0-9]+\.[0-9] µs ' "$WORK/bench.out" \
    || cs_fail "cryptoserver-bench --metrics printed no 'broker CPU per op: N µs' line"
grep -Eq '^client CPU per op: [0-9]+\.[0-9] µs ' "$WORK/bench.out" \
    || cs_fail "cryptoserver-bench printed no 'client CPU per op: N µs' line"
$CS_CLIENT_WRAPPER "$CS_BENCH" --module "$CRYPTOSERVER_MODULE" --token "$CRYPTOSERVER_TOKEN" \
    --pin "$CRYPTOSERVER_PIN" --key rsa2048 --threads 2 --count 20 --metrics "$CRYPTOSERVER_METRICS_URL" --csv \
    > "$WORK/bench.csv" 2> "$WORK/bench.err" || { cat "$WORK/bench.csv" "$WORK/bench.err"; cs_fail "bench --csv"; }
cat "$WORK/bench.csv"
head -n 1 "$WORK/bench.csv" | grep -q ',verified,failures,broker_cpu_us_per_op,client_cpu_us_per_op$' \
    || cs_fail "--csv --metrics: broker_cpu_us_per_op, client_cpu_us_per_op are not the last columns"
IFS=, read -r _ _ _ _ ops _ _ _ _ _ _ _ failures cpu client extra < <(tail -n 1 "$WORK/bench.csv")
[ "$ops" = 40 ] && [ "$failures" = 0 ] && [[ $cpu =~ ^[0-9]+\.[0-9]$ ]] && [[ $client =~ ^[0-9]+\.[0-9]$ ]] \
    && [ -z "$extra" ] \
    || cs_fail "--csv --metrics: ops=$ops failures=$failures broker_cpu_us_per_op=$cpu client_cpu_us_per_op=$client"
if "$CS_BENCH" --module "$CRYPTOSERVER_MODULE" --token "$CRYPTOSERVER_TOKEN" --pin "$CRYPTOSERVER_PIN" \
       --key rsa2048 --count 1 --metrics "${URL%/metrics}/nothing" > "$WORK/bench404.out" 2>&1; then
    cs_fail "cryptoserver-bench --metrics with a wrong path succeeded"
fi
grep -q 'HTTP status 404' "$WORK/bench404.out" || { cat "$WORK/bench404.out"; cs_fail "no 404 reported"; }

# ---- every job counted once, on the board that ran it ----------------------
scrape "$WORK/m1"
ecdsa=$(total "$WORK/m1" '^cryptoserver_jobs_total\{board="board[01]",mechanism="CKM_ECDSA",result="ok"\}')
rsa=$(total "$WORK/m1" '^cryptoserver_jobs_total\{board="board[01]",mechanism="CKM_RSA_PKCS",result="ok"\}')
refused=$(total "$WORK/m1" '^cryptoserver_jobs_total\{board="board[01]",mechanism="CKM_RSA_PKCS",result="error"\}')
all=$(total "$WORK/m1" '^cryptoserver_jobs_total\{board="board[01]",')
cs_log "jobs on board0+board1: CKM_ECDSA ok $ecdsa, CKM_RSA_PKCS ok $rsa, error $refused, all $all"
[ "$ecdsa" = 5 ] || cs_fail "CKM_ECDSA ok jobs on board0+board1: $ecdsa, expected 5"
[ "$rsa" = 80 ] || cs_fail "CKM_RSA_PKCS ok jobs on board0+board1: $rsa, expected 80"
[ "$refused" = 1 ] || cs_fail "CKM_RSA_PKCS error jobs on board0+board1: $refused, expected 1"
[ "$all" = 86 ] || cs_fail "$all jobs counted on board0+board1, expected 86 (other jobs, or counted twice)"

# ---- histograms: per board and stage, cumulative, +Inf = _count = jobs run --
# (board cpu may be refilling the key pool in the background: its stages are
# checked for shape only, not against its job count of the moment.)
for board in board0 board1 cpu; do
    ran=$(total "$WORK/m1" "^cryptoserver_jobs_total\\{board=\"$board\",.*result=\"(ok|error)\"\\}")
    for stage in queue service total; do
        labels="board=\"$board\",stage=\"$stage\""
        count=$(value "$WORK/m1" "cryptoserver_job_seconds_count{$labels}")
        inf=$(value "$WORK/m1" "cryptoserver_job_seconds_bucket{$labels,le=\"+Inf\"}")
        [ -n "$count" ] && [ "$count" = "$inf" ] && { [ "$count" = "$ran" ] || [ $board = cpu ]; } \
            || cs_fail "$board $stage: _count=$count, +Inf bucket=$inf, jobs run=$ran"
        grep -F "cryptoserver_job_seconds_bucket{$labels," "$WORK/m1" \
            | awk '{ if ($2 < last) exit 1; last = $2; n++ } END { exit n != 18 }' \
            || cs_fail "$board $stage: buckets not cumulative, or not 17 bounds and +Inf"
        sum=$(value "$WORK/m1" "cryptoserver_job_seconds_sum{$labels}")
        awk -v s="$sum" -v n="$count" 'BEGIN { exit !(s >= 0 && (n > 0 || s == 0)) }' \
            || cs_fail "$board $stage: _sum=$sum with $count observations"
    done
    cs_log "$board: $ran jobs, queue/service/total histograms agree"
done
[ "$(value "$WORK/m1" 'cryptoserver_inflight_jobs{client="demo",tenant="demo"}')" = 0 ] \
    || cs_fail "client demo still has jobs in flight: $(grep inflight "$WORK/m1")"
[ "$(value "$WORK/m1" 'cryptoserver_queue_depth{queue="client"}')" = 0 ] || cs_fail "client queue not empty"
awk -v a="$(value "$WORK/m0" process_cpu_seconds_total)" -v b="$(value "$WORK/m1" process_cpu_seconds_total)" \
    'BEGIN { exit !(b > a && a >= 0) }' || cs_fail "process_cpu_seconds_total did not grow"

# ---- client and tenant names only with the bearer token ----------------------
curl -sf --max-time 10 "$URL" > "$WORK/anon" || cs_fail "GET $URL without a token failed"
! grep -q 'tenant="demo"\|client="demo"' "$WORK/anon" || cs_fail "a scrape without the token names client or tenant demo"
[ "$(value "$WORK/anon" 'cryptoserver_inflight_jobs{client="(all)",tenant="(all)"}')" = 0 ] \
    || cs_fail "a scrape without the token has no clients' sum: $(grep inflight "$WORK/anon")"
[ "$(curl -s -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer wrong-token-0123456789' "$URL")" = 401 ] \
    || cs_fail "a wrong bearer token is not 401"
cs_log "without the token: no names, one sum; a wrong token: 401"

# ---- HTTP: only GET/HEAD of the path ------------------------------------------
[ "$(curl -s -o /dev/null -w '%{http_code}' "${URL%/metrics}/other")" = 404 ] || cs_fail "another path is not 404"
[ "$(curl -s -o /dev/null -w '%{http_code}' -X POST "$URL")" = 405 ] || cs_fail "POST is not 405"

# ---- a metrics address beyond loopback is refused at start (exit 2) ---------
cp "$WORK/broker.conf" "$WORK/public.conf"
"$CS_ADMIN" config set "$WORK/public.conf" broker/metrics "http://0.0.0.0:0/metrics"
rc=0
cs_run_bounded 30 "$WORK/public.out" "$CS_BROKER" -c "$WORK/public.conf" -f || rc=$?
[ "$rc" = 2 ] || { cat "$WORK/public.out"; cs_fail "broker with metrics on 0.0.0.0: exit $rc, expected 2"; }
grep -q 'broker/metrics: http://0.0.0.0:0/metrics is not a loopback address.*broker/metrics-public = true' \
    "$WORK/public.out" || { cat "$WORK/public.out"; cs_fail "no reason given for the refusal"; }
cs_log "metrics on 0.0.0.0 without broker/metrics-public: refused (exit 2)"

# ---- the exit stats agree ------------------------------------------------------
cs_stop
for board in board0 board1; do
    ran=$(total "$WORK/m1" "^cryptoserver_jobs_total\\{board=\"$board\",.*result=\"(ok|error)\"\\}")
    [ "$(cs_board_jobs "$board")" = "$ran" ] \
        || cs_fail "$board: exit stats say $(cs_board_jobs "$board") jobs, the metrics said $ran"
done
cs_log "exit stats match the metrics per board"
