#!/bin/bash
# client-no-tenant.sh — issue #7: a client whose certificate in clients.d
# names no tenant (an old or hand-made cert) is refused with a clear error
# and a broker log line naming it, not mapped to the keystore's first tenant.
# `cryptoserver-admin client add` always writes the tenant.
. "$(dirname "$0")/lib.sh"

cs_setup
T=$WORK/tmp
mkdir -p "$T"
"$CS_ADMIN" client add notenant --dir "$WORK" > "$T/add.log" 2>&1 || { cat "$T/add.log"; cs_fail "client add failed"; }
grep -Eq '^ *tenant = "?demo"?$' "$WORK/clients.d/notenant.cert" \
    || { cat "$WORK/clients.d/notenant.cert"; cs_fail "client add wrote no tenant into the cert"; }
sed -i '/^ *tenant = /d' "$WORK/clients.d/notenant.cert"
cs_expect_broker_log "client notenant has no tenant in its certificate"
cs_start

CRYPTOSERVER_CONF=$WORK/clients/notenant/client.conf cs_expect_refusal CKR_DEVICE_ERROR \
    "a client without a tenant" "$T/refused.log" \
    pkcs11-tool --module "$CRYPTOSERVER_MODULE" --slot 0 --login --pin "$CRYPTOSERVER_PIN" -O
grep -q "W: .*request refused: client notenant has no tenant in its certificate" "$WORK/broker.log" \
    || cs_fail "no broker log line refusing client notenant"
cs_log "a client without a tenant: CKR_DEVICE_ERROR, and the broker log names it"

# The demo client (cert with its tenant) still works.
cs_sign_verify "$P11" 01 rsa "$KEYS/rsa2048.pub.pem" "$T" || cs_fail "the demo client cannot sign"
cs_log "the demo client still signs"
