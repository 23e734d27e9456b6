# lib-fault.sh — sourced by the board-health tests (issue #9) after lib.sh,
# cs_setup and T=$WORK/tmp: a healthy sim board and a faulty twin (the fault
# driver) holding the same key.

# cs_fault_twin THREADS SETTING...: makes an RSA-2048 key ($WORK/shared.pem,
# its public half $T/shared.pub.pem) and adds two boards of tenant demo that
# hold it as key id 6a, label shared: "good", a sim board, and "flaky", a
# fault board with the fault settings ("name=value" each) over a sim board.
# Both have THREADS workers and THREADS coprocessors, and 1 ms latency.
cs_fault_twin () {
    local threads=$1 setting faults=()
    shift
    for setting in "$@"; do
        faults+=(--set "$setting")
    done
    openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$WORK/shared.pem" 2>/dev/null
    openssl pkey -in "$WORK/shared.pem" -pubout -out "$T/shared.pub.pem"
    "$CS_ADMIN" board add good --dir "$WORK" --type sim --threads "$threads" --key-file "$WORK/shared.pem" \
        --key-id 6a --set label=shared --set tenant=demo --set latency-ms=1 --set "coprocessors=$threads" \
        > "$T/add.log" 2>&1 || { cat "$T/add.log"; cs_fail "board add good failed"; }
    "$CS_ADMIN" board add flaky --dir "$WORK" --type fault --threads "$threads" "${faults[@]}" --set tenant=demo \
        --set inner/type=sim --set "inner/key-file=$WORK/shared.pem" --set inner/key-id=6a \
        --set inner/label=shared --set inner/latency-ms=1 --set "inner/coprocessors=$threads" \
        --set "inner/threads=$threads" > "$T/add.log" 2>&1 || { cat "$T/add.log"; cs_fail "board add flaky failed"; }
}
