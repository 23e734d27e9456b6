#!/bin/bash
# copy-objects.sh — C_CopyObject of token objects (PKCS#11 2.40 §5.7) through
# the module (cs-copy): AES and generic secret keys, an EC key pair and a
# data object, each copy checked by what it does (same ciphertext, same
# HMAC, a signature the original public key verifies, same value), and the
# refusals.  The first copy, of a token key made without a label, once
# crashed the broker (it freed the absent label of the row it copied): the
# broker must still be running, and stop cleanly, after all of it.
. "$(dirname "$0")/lib.sh"

CLIENT=$top_builddir/tests/integration/cs-copy
[ -x "$CLIENT" ] || cs_fail "$CLIENT is not built (make check builds it)"
cs_setup
cs_start
T=$WORK/tmp
mkdir -p "$T"

cs_run_bounded $((120 * CS_TIME_FACTOR)) "$T/client.log" $CS_CLIENT_WRAPPER "$CLIENT" "$CRYPTOSERVER_MODULE" \
    "$CRYPTOSERVER_TOKEN" "$CRYPTOSERVER_PIN" || { cat "$T/client.log"; cs_fail "cs-copy failed"; }
sed 's/^/    /' "$T/client.log"
cs_broker_alive || cs_fail "the broker died while objects were copied"
cs_stop
cs_log "the broker ran through every copy and stopped cleanly"
