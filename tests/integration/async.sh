#!/bin/bash
# async.sh — PKCS#11 3.2 asynchronous sessions through the module against a
# real broker (issue #23, pkcs11-module/async.h), with tests/integration/cs-async:
#
# 1. 100 P-256 signatures (CKM_ECDSA_SHA256, key p256) in flight at once
#    from one application thread, each C_Sign answering CKR_PENDING and
#    each completed signature verified by OpenSSL with p256.pub.pem;
# 2. a token P-256 generation started in an async session, saved with
#    C_AsyncGetID, the process calling C_Finalize and exiting before it
#    completes; a second process joins it (C_AsyncJoin), gets the key the
#    first run made (the broker replays its idempotency record: one key
#    so labelled, no second keystore row) and signs with it (OpenSSL checks);
#    then once more with the join sent at once, maybe while the first run
#    still goes on;
# 3. the exact CKR_* of misuse: C_AsyncComplete in a session that waits,
#    an unknown function name, a second C_SignInit, C_Sign or
#    C_GenerateKeyPair while one is in flight, C_AsyncGetID of a C_Sign, a
#    join of an unknown or finished ID, a session closed (and the module
#    finalized) with calls in flight;
# 4. with a pq board (when the pq driver is built): C_EncapsulateKey and
#    C_DecapsulateKey of an ML-KEM-768 session pair each CKR_PENDING, then
#    completed, the two secrets equal.
. "$(dirname "$0")/lib.sh"

cs_setup
cs_start

CLIENT=$top_builddir/tests/integration/cs-async
[ -x "$CLIENT" ] || cs_fail "cs-async is not built (make check builds it)"
export CRYPTOSERVER_ASYNC_DIR=$WORK/async
run () {    # run NAME ARGS...: one cs-async process (bounded), its log in $WORK/NAME.log
    local name=$1
    shift
    cs_run_bounded $((120 * CS_TIME_FACTOR)) "$WORK/$name.log" $CS_CLIENT_WRAPPER "$CLIENT" "$CRYPTOSERVER_MODULE" \
        "$CRYPTOSERVER_TOKEN" "$CRYPTOSERVER_PIN" "$@" || { cat "$WORK/$name.log"; cs_fail "cs-async $* failed"; }
    grep -q '^cs-async: every step as expected$' "$WORK/$name.log" || { cat "$WORK/$name.log"; cs_fail "cs-async $* did not finish"; }
}

run sign sign 100 "$KEYS/p256.pub.pem"
grep -q '^cs-async: 100 signatures in flight from one thread: ok$' "$WORK/sign.log" || cs_fail "not 100 in flight"
grep -q '^cs-async: 100 signatures completed, each verified by OpenSSL: ok$' "$WORK/sign.log" || cs_fail "not 100 verified"
cs_log "100 P-256 signatures in flight from one thread, each verified by OpenSSL"

rows_before=$(cs_keystore_rows demo)
run keygen keygen async-joined
id=$(sed -n 's/^id \([0-9a-f]*\)$/\1/p' "$WORK/keygen.log")
[ -n "$id" ] || { cat "$WORK/keygen.log"; cs_fail "no ID from C_AsyncGetID"; }
[ -f "$CRYPTOSERVER_ASYNC_DIR/$(printf %016x "0x$id").job" ] || cs_fail "no saved job for ID $id"
# The first process is gone; the broker still runs (or ran) its job.
cs_wait_until 30 eval '[ "$(cs_keystore_rows demo)" -gt "$rows_before" ]' \
    || cs_fail "the first process's generation never reached the keystore"
run join join "$id" async-joined
# The join found one key so labelled and destroyed it: a second generation
# would have left a row.
[ "$(cs_keystore_rows demo)" = "$rows_before" ] || cs_fail "the join made another key ($(cs_keystore_rows demo) rows, $rows_before before)"
[ ! -e "$CRYPTOSERVER_ASYNC_DIR/$(printf %016x "0x$id").job" ] || cs_fail "the joined ID's file stayed"
grep -q 'done before, its recorded result replayed' "$WORK/broker.log" \
    || cs_fail "the join was not answered from the first run's idempotency record"
cs_log "a generation left by a finalized process was joined from another: its key, which signs"
# Again without waiting: the join may reach the broker while the first
# run is still under way; still one key (the broker's idempotency record,
# docs/contracts/module.md "Key management takes effect once").
run keygen2 keygen async-raced
id=$(sed -n 's/^id \([0-9a-f]*\)$/\1/p' "$WORK/keygen2.log")
run join2 join "$id" async-raced
[ "$(cs_keystore_rows demo)" = "$rows_before" ] || cs_fail "the raced join made another key"
cs_log "joined at once, maybe while the first run was still going: one key"

run misuse misuse
cs_log "misuse answers the exact codes (cryptoserver-pkcs11(7) \"PKCS#11 3.2\")"
cs_stop

# 4. With a pq board: C_EncapsulateKey and C_DecapsulateKey pend too.
if [ -e "$top_builddir/shim-drivers/.libs/pq.so" ]; then
    "$CS_ADMIN" board add pqc --dir "$WORK" --type pq --threads 2 > "$WORK/add.log" 2>&1 \
        || { cat "$WORK/add.log"; cs_fail "board add pqc failed"; }
    cs_start
    run kem kem
    cs_log "ML-KEM-768 encapsulation and decapsulation in flight and completed: the secrets agree"
    cs_stop
else
    cs_log "no pq driver built (no cargo): the KEM calls are not tested here"
fi
