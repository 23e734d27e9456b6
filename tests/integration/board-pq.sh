#!/bin/bash
# board-pq.sh — the broker's driver loader accepts the pq board
# (shim-drivers/pq, Rust; issue #23): a deployment gets a board of type pq
# (cryptoserver-admin board add), the broker starts with it and reports it
# exactly (no resident keys, its 4 mechanisms, key material, key generation),
# and the RSA and EC work of the other boards still routes around it: a key
# generated and used through the module (pkcs11-tool, verified by openssl)
# never lands on the pq board, whose key types are ML-DSA and ML-KEM only.
# The ML-DSA/ML-KEM job kinds are tested by pq-keys.sh: this test is
# the loader's and the router's part.  Skips when pq.so is not built (no cargo).
. "$(dirname "$0")/lib.sh"

[ -e "$top_builddir/shim-drivers/.libs/pq.so" ] || cs_skip "the pq driver is not built (configure found no cargo)"
cs_setup
T=$WORK/tmp
mkdir -p "$T"
"$CS_ADMIN" board add pqc --dir "$WORK" --type pq --threads 2 > "$T/add.log" 2>&1 \
    || { cat "$T/add.log"; cs_fail "board add pqc failed"; }
cs_start

grep -Eq 'board pqc: pq driver, 0 keys, 4 mechanisms, 2 threads, key material, key generation$' "$WORK/broker.log" \
    || { grep 'board pqc' "$WORK/broker.log"; cs_fail "the broker does not report the pq board as loaded"; }

P11L="$P11 --login --pin $CRYPTOSERVER_PIN"
for kind in rsa ec; do
    case $kind in
        rsa) id=71; type=rsa:2048 ;;
        ec)  id=72; type=EC:prime256v1 ;;
    esac
    $P11L --keypairgen --key-type "$type" --id "$id" --label "pq-$kind" > "$T/gen-$kind.log" 2>&1 \
        || { cat "$T/gen-$kind.log"; cs_fail "$kind key generation failed with a pq board present"; }
    cs_pubkey_pem "$P11" "$id" "$T/pub-$kind.pem" || cs_fail "no public key for $kind"
    cs_sign_verify "$P11" "$id" "$kind" "$T/pub-$kind.pem" "$T" || cs_fail "$kind sign/verify failed with a pq board present"
done
cs_stop
[ "$(cs_board_jobs pqc)" = 0 ] || cs_fail "the pq board ran $(cs_board_jobs pqc) RSA or EC jobs"
cs_log "ok: the loader accepts pq.so; RSA and EC work routes around it"
