# lib-parties.sh — three real brokers as the three parties of shared RSA
# keys (docs/SHARED-KEYS.md "Over the network"), each with its own
# deployment WORK/pI (keystore, master key, CURVE key pair), tenant demo
# opted in (keys/shared/demo = 3), one openssl board "cpu", its metrics on
# a free port (the URL in WORK/pI/broker.metrics).  Sourced after lib.sh by
# shared-parties.sh and shared-pkcs11.sh.
#
#   parties_make        makes the three deployments with their party sections
#   party_start I [CONF]  starts party I (lib.sh's peer p$I: stopped and its
#                       log checked at exit), waits until it listens
#   PORT[I]             the party endpoint's port of party I
#   party_modexps I [BOARD]  raw modexp jobs that ran ok on party I's board
#                       BOARD (default cpu): a partial result each (metrics)
#   party_jobs I BOARD  every job of party I's board BOARD (metrics)
#   party_rows I LABEL  how many keys of tenant demo party I's keystore holds
#                       with exactly this CKA_LABEL (the LABEL column: a grep
#                       of the whole line would also count a ref whose hex
#                       happens to hold LABEL, as ks:...3ec1ca... holds ec1)
#   parties_two_in_flight SECONDS VERIFY CMD...  two signatures at party 1
#                       at once (below)
#   CS_ROUND_MS         the parties' party/round-timeout-ms; CS_ROUND_BOUND the
#                       seconds a failure for a silent or missing party may take
#
# The round deadline is 10 s, not less: a loaded 2-core machine (CI, or the
# suite's own parallel tests) can keep a party's thread off the CPU for
# seconds mid-generation, and a shorter deadline then drops a generation
# that was only slow.
CS_ROUND_MS=$((10000 * CS_TIME_FACTOR))
CS_ROUND_BOUND=$((CS_ROUND_MS / 1000 + 10 * CS_TIME_FACTOR))

# A free loopback port below the ephemeral range (see CS_TEST_ENDPOINT).
free_port () {
    python3 -c 'import random, socket, sys
while True:
    p = random.randint(int(sys.argv[1]), int(sys.argv[2]))
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", p)); print(p); break
    except OSError:
        pass
    finally:
        s.close()' "$CS_PORT_LOW" "$CS_PORT_HIGH"
}

declare -A PORT
parties_make () {
    local i j conf
    for i in 1 2 3; do
        PORT[$i]=$(free_port)
        "$CS_ADMIN" init "$WORK/p$i" --tenant demo --pin 1234 --so-pin 123456 \
            --endpoint "$CS_TEST_ENDPOINT" > /dev/null || cs_fail "init p$i"
        "$CS_ADMIN" board add cpu --type openssl --dir "$WORK/p$i" > /dev/null || cs_fail "board p$i"
    done
    for i in 1 2 3; do
        conf=$WORK/p$i/broker.conf
        set_conf () { "$CS_ADMIN" config set "$conf" "$1" "$2" || cs_fail "config set $1"; }
        for b in 2048 3072; do set_conf keys/pool-rsa-$b 0; done
        set_conf broker/endpoint-file broker.endpoint
        set_conf broker/metrics "http://127.0.0.1:0/metrics"
        set_conf broker/metrics-file broker.metrics
        set_conf keys/shared/demo 3
        set_conf party/index "$i"
        set_conf party/endpoint "tcp://127.0.0.1:${PORT[$i]}"
        set_conf party/secret-key broker.cert_secret
        set_conf party/round-timeout-ms "$CS_ROUND_MS"
        for j in 1 2 3; do
            [ "$j" = "$i" ] && continue
            set_conf "party/peers/$j/endpoint" "tcp://127.0.0.1:${PORT[$j]}"
            set_conf "party/peers/$j/public-key" "$(sed -n 's/.*public-key = "\(.*\)"/\1/p' "$WORK/p$j/broker.cert")"
        done
    done
}

party_start () {
    local i=$1 conf=${2:-$WORK/p$1/broker.conf} waited=0
    rm -f "$WORK/p$i/broker.endpoint"
    echo "---- start $(date +%s.%N)" >> "$WORK/p$i.log"
    # shellcheck disable=SC2086
    CRYPTOSERVER_DRIVER_DIR=$top_builddir/shim-drivers/.libs ${CS_BROKER_WRAPPER:-} "$CS_BROKER" -c "$conf" -f >> "$WORK/p$i.log" 2>&1 < /dev/null &
    CS_PEER_PID[p$i]=$!
    CS_PEER_ENDPOINT[p$i]=party
    until [ -s "$WORK/p$i/broker.endpoint" ] && grep -q "party $i of 3" "$WORK/p$i.log"; do
        cs_pid_alive "${CS_PEER_PID[p$i]}" || { tail -n 20 "$WORK/p$i.log"; cs_fail "party $i exited"; }
        [ $waited -lt $(( 30 * 10 * CS_TIME_FACTOR )) ] || cs_fail "party $i did not start"
        sleep 0.1
        waited=$((waited + 1))
    done
}

# the sum of party $1's cryptoserver_jobs_total lines that start with $2
s_party_metric () {
    curl -sf --max-time 10 "$(cat "$WORK/p$1/broker.metrics")" \
        | awk -v p="cryptoserver_jobs_total{$2" 'index($0, p) == 1 { n += $NF } END { print n + 0 }'
}
party_modexps () { s_party_metric "$1" "board=\"${2:-cpu}\",mechanism=\"CKM_CS_MODEXP\",result=\"ok\"}"; }
party_jobs () { s_party_metric "$1" "board=\"$2\","; }

# parties_two_in_flight SECONDS VERIFY CMD...: with party 2 stopped
# (SIGSTOP: connected, silent), runs CMD... twice in the background, each
# with its output file WORK/flightJ as its last argument; waits (at most
# SECONDS) until party 1 has both its own partial results out on its board,
# so that both signatures are in flight there at once; lets party 2 run
# again; fails unless both commands succeed and VERIFY FILE accepts both.
parties_two_in_flight () {
    local limit=$1 verify=$2 j m1 in_flight=0
    local -A signer
    shift 2
    m1=$(party_modexps 1)
    s_both_out () { [ "$(party_modexps 1)" -ge $((m1 + 2)) ]; }
    kill -STOP "${CS_PEER_PID[p2]}"
    for j in 1 2; do
        "$@" "$WORK/flight$j" > "$WORK/flight$j.out" 2>&1 &
        signer[$j]=$!
    done
    cs_wait_until "$limit" s_both_out && in_flight=1
    kill -CONT "${CS_PEER_PID[p2]}"
    for j in 1 2; do
        wait "${signer[$j]}" || cs_fail "signature $j of two in flight failed: $(cat "$WORK/flight$j.out")"
        "$verify" "$WORK/flight$j" || cs_fail "signature $j of two in flight does not verify"
    done
    [ "$in_flight" = 1 ] || cs_fail "the two signatures were not in flight at party 1 at once"
}

party_rows () {
    "$CS_ADMIN" key list --dir "$WORK/p$1" --tenant demo | awk -v l="$2" 'NR > 1 && $2 == l { n++ } END { print n + 0 }'
}
