#!/bin/bash
# quota-tenants.sh — per-tenant quotas (issue #22 item 2; docs/CONTRACTS.md
# "Tenant quotas"), set with cryptoserver-admin tenant set and shown by
# tenant show, with real processes:
#  1. alpha capped at 50 ops/s signs with 8 threads (cryptoserver-bench):
#     at most ~50/s (token bucket at admission; margin for the first burst),
#     no job fails (they wait within their deadline), and
#     cryptoserver_tenant_throttled_total counts alpha's waits only;
#  2. beta (no quota) signing meanwhile keeps its throughput: its ops/s with
#     alpha capped and busy over its ops/s alone (a ratio: the machine is
#     loaded) is at least 0.6;
#  3. gamma with max-keys 2: the third token key pair is refused with
#     CKR_DEVICE_MEMORY through the module (C_GenerateKeyPair) and straight
#     on the wire (cs-wire-client, no module), no row is added, and
#     cryptoserver_tenant_quota_refused_total{limit="keys"} counts both;
#     gamma's max-objects 1 refuses a second data object the same way;
#     delta's max-inflight 2: 20 signatures sent at once all succeed, some
#     having waited (counted);
#  4. a request that cannot get its tokens within its deadline is answered
#     with request-level CKR_DEVICE_ERROR at once (20 alpha requests sent
#     at once on the wire with a 50 ms deadline), logged and counted.
. "$(dirname "$0")/lib.sh"

cs_require curl
cs_setup --tenant alpha --tenant beta --tenant gamma --tenant delta
T=$WORK/tmp
mkdir -p "$T"
PIN=$CRYPTOSERVER_PIN           # demo-deploy gives extra tenants PIN 1234 too
WIRE=$top_builddir/tests/integration/cs-wire-client
[ -x "$WIRE" ] || cs_fail "cs-wire-client is not built (make check builds it)"

"$CS_ADMIN" tenant set alpha --max-ops-per-s 50 --dir "$WORK" > "$T/set.log" 2>&1 \
    || { cat "$T/set.log"; cs_fail "tenant set alpha failed"; }
"$CS_ADMIN" tenant set gamma --max-keys 2 --max-objects 1 --dir "$WORK" >> "$T/set.log" 2>&1 \
    || { cat "$T/set.log"; cs_fail "tenant set gamma failed"; }
"$CS_ADMIN" tenant set delta --max-inflight 2 --dir "$WORK" >> "$T/set.log" 2>&1 \
    || { cat "$T/set.log"; cs_fail "tenant set delta failed"; }
"$CS_ADMIN" tenant show alpha --dir "$WORK" > "$T/show.log" 2>&1 || { cat "$T/show.log"; cs_fail "tenant show failed"; }
grep -q '^    max-ops-per-s = 50$' "$T/show.log" && grep -q '^    max-keys = 0 (none)$' "$T/show.log" \
    || { cat "$T/show.log"; cs_fail "tenant show alpha does not show its quotas"; }
! "$CS_ADMIN" tenant set alpha --max-keys -1 --dir "$WORK" > "$T/bad.log" 2>&1 || cs_fail "--max-keys -1 accepted"
cs_log "tenant set / show: alpha max-ops-per-s 50, gamma max-keys 2"

cs_start
URL=$(cat "$WORK/broker.metrics")
# metric LINE-PREFIX: the value of the first line starting with it.
metric () {
    curl -sf --max-time 10 -H "Authorization: Bearer $(cat "$WORK/metrics.token")" "$URL" > "$T/scrape" \
        || cs_fail "GET $URL failed"
    awk -v p="$1" 'index ($0, p) == 1 { print $2; exit }' "$T/scrape" | grep . || cs_fail "no metric $1"
}

for t in alpha beta delta; do
    cs_p11_as $t --login --pin "$PIN" --keypairgen --key-type EC:prime256v1 --label "$t-bench" --id 51 \
        --usage-sign > "$T/gen-$t.log" 2>&1 || { cat "$T/gen-$t.log"; cs_fail "$t: --keypairgen failed"; }
done

# bench TENANT SECONDS OUT: 8 threads of ECDSA P-256 signatures in the background.
bench () {
    CRYPTOSERVER_CONF=$WORK/clients/$1/client.conf $CS_CLIENT_WRAPPER "$CS_BENCH" --module "$CRYPTOSERVER_MODULE" \
        --token "$1" --pin "$PIN" --key "$1-bench" --mechanism ecdsa-sha256 --threads 8 --seconds "$2" --csv \
        > "$3" 2> "$3.err" &
}
# rate OUT: ops/s of a finished bench (failures must be 0).
rate () {
    local ops_s failures
    IFS=, read -r _ _ _ _ _ _ ops_s _ _ _ _ _ failures _ < <(tail -n 1 "$1")
    [ "$failures" = 0 ] || { cat "$1" "$1.err"; cs_fail "$1: $failures signatures failed"; }
    echo "${ops_s%.*}"
}

# ---- 1, 2. alpha capped, beta alone then beside it ---------------------------------
bench beta 5 "$T/beta-alone.csv"
wait $! || { cat "$T/beta-alone.csv.err"; cs_fail "beta's bench failed"; }
beta_alone=$(rate "$T/beta-alone.csv")
bench alpha 6 "$T/alpha.csv"
PA=$!
bench beta 5 "$T/beta-with.csv"
PB=$!
wait $PB || { cat "$T/beta-with.csv.err"; cs_fail "beta's bench failed"; }
wait $PA || { cat "$T/alpha.csv.err"; cs_fail "alpha's bench failed"; }
alpha_rate=$(rate "$T/alpha.csv")
beta_with=$(rate "$T/beta-with.csv")
cs_log "alpha (max-ops-per-s 50, 8 threads): $alpha_rate ops/s; beta alone $beta_alone ops/s, beside alpha $beta_with ops/s"
[ "$alpha_rate" -le 60 ] || cs_fail "alpha capped at 50 ops/s did $alpha_rate ops/s"
[ "$alpha_rate" -ge 35 ] || cs_fail "alpha capped at 50 ops/s did only $alpha_rate ops/s"
[ $((beta_with * 10)) -ge $((beta_alone * 6)) ] \
    || cs_fail "beta's throughput fell from $beta_alone to $beta_with ops/s beside capped alpha"
throttled=$(metric 'cryptoserver_tenant_throttled_total{tenant="alpha",limit="ops-per-s"}')
[ "$throttled" -gt 0 ] || cs_fail "no throttled jobs counted for alpha"
! grep -q 'cryptoserver_tenant_throttled_total{tenant="beta",limit="ops-per-s"} [1-9]' "$T/scrape" \
    || cs_fail "beta's jobs counted as throttled"
cs_log "alpha's waits counted: $throttled jobs throttled"

# ---- 3. gamma's max-keys 2, through the module and on the wire -----------------------
cs_shell_start g gamma
cs_shell g CKR_OK login "$PIN"
cs_shell g CKR_OK keygen-signer 61 g1
cs_shell g CKR_OK keygen-signer 62 g2
cs_shell g CKR_DEVICE_MEMORY keygen-signer 63 g3
cs_shell_stop g
got=$("$WIRE" --endpoint "$BROKER_ENDPOINT" --broker-cert "$WORK/broker.cert" \
      --client-cert "$WORK/clients/gamma/client.cert" --pin "$PIN" genkp-ec g4 2> "$T/wire.err") \
    || { cat "$T/wire.err"; cs_fail "cs-wire-client genkp-ec failed: $got"; }
[ "$got" = CKR_DEVICE_MEMORY ] || cs_fail "a third key pair on the wire: $got, not CKR_DEVICE_MEMORY"
[ "$(cs_keystore_rows gamma)" = 2 ] || cs_fail "gamma has $(cs_keystore_rows gamma) key rows, not 2"
refused=$(metric 'cryptoserver_tenant_quota_refused_total{tenant="gamma",limit="keys"}')
[ "$refused" = 2 ] || cs_fail "gamma's refused keys counted $refused, not 2"
cs_expect_broker_log 'tenant gamma: quota max-keys = 2 reached'
cs_log "gamma's third key pair: CKR_DEVICE_MEMORY through the module and on the wire"

# gamma's max-objects 1: a second data object is refused the same way.
echo "one" > "$T/obj1"
cs_p11_as gamma --login --pin "$PIN" --write-object "$T/obj1" --type data --label d1 > "$T/obj1.log" 2>&1 \
    || { cat "$T/obj1.log"; cs_fail "gamma's first data object failed"; }
if cs_p11_as gamma --login --pin "$PIN" --write-object "$T/obj1" --type data --label d2 > "$T/obj2.log" 2>&1; then
    cs_fail "gamma's second data object was stored past max-objects 1"
fi
grep -q CKR_DEVICE_MEMORY "$T/obj2.log" || { cat "$T/obj2.log"; cs_fail "the second data object: not CKR_DEVICE_MEMORY"; }
cs_expect_broker_log 'tenant gamma: quota max-objects = 1 reached'
cs_log "gamma's second data object: CKR_DEVICE_MEMORY"

# ---- delta's max-inflight 2: 20 signatures at once all succeed, having waited ---------
"$WIRE" --endpoint "$BROKER_ENDPOINT" --broker-cert "$WORK/broker.cert" --client-cert "$WORK/clients/delta/client.cert" \
    --pin "$PIN" --burst 20 sign delta-bench CKM_ECDSA "$(printf '%064d' 0)" \
    > "$T/inflight.out" 2> "$T/inflight.err" || { cat "$T/inflight.out" "$T/inflight.err"; cs_fail "cs-wire-client --burst failed"; }
[ "$(grep -c '^CKR_OK' "$T/inflight.out")" = 20 ] || { cat "$T/inflight.out"; cs_fail "delta's 20 signatures did not all succeed"; }
waited=$(metric 'cryptoserver_tenant_throttled_total{tenant="delta",limit="inflight"}')
[ "$waited" -gt 0 ] || cs_fail "none of delta's 20 signatures waited for max-inflight 2"
cs_log "delta (max-inflight 2): 20 signatures at once all CKR_OK, $waited waited for room in flight"

# ---- 4. a deadline too short for alpha's tokens ---------------------------------------
# 20 signatures sent at once with a 50 ms deadline: the burst (5) goes, the
# next ones would wait 20, 40, 60 ... ms for their tokens: those past 50 ms
# are answered at once with request-level CKR_DEVICE_ERROR.
"$WIRE" --endpoint "$BROKER_ENDPOINT" --broker-cert "$WORK/broker.cert" --client-cert "$WORK/clients/alpha/client.cert" \
    --pin "$PIN" --deadline-ms 50 --burst 20 sign alpha-bench CKM_ECDSA "$(printf '%064d' 0)" \
    > "$T/burst.out" 2> "$T/burst.err" || { cat "$T/burst.out" "$T/burst.err"; cs_fail "cs-wire-client --burst failed"; }
ok=$(grep -c '^CKR_OK' "$T/burst.out" || true)
late=$(grep -c '^CKR_DEVICE_ERROR$' "$T/burst.out" || true)
[ "$((ok + late))" = 20 ] && [ "$ok" -ge 5 ] && [ "$late" -ge 10 ] \
    || { cat "$T/burst.out"; cs_fail "20 signatures at once with a 50 ms deadline: $ok CKR_OK, $late CKR_DEVICE_ERROR"; }
grep -q "tenant alpha): request [0-9]* cannot start within its deadline under the tenant's quota max-ops-per-s = 50" \
    "$WORK/broker.log" || cs_fail "no W: line of the refusal naming the quota"
refused=$(metric 'cryptoserver_tenant_quota_refused_total{tenant="alpha",limit="ops-per-s"}')
[ "$refused" = "$late" ] || cs_fail "alpha's refused jobs counted $refused, not $late"
cs_expect_broker_log "tenant alpha\\): request [0-9]+ cannot start within its deadline under the tenant's quota max-ops-per-s"
cs_log "20 signatures at once, 50 ms deadline: $ok CKR_OK, $late CKR_DEVICE_ERROR (counted)"

cs_stop
cs_log "PASS"
