#!/bin/bash
# object-rules.sh — the attribute rules of certificates and data objects
# (common/cs_obj_rules.h; PKCS#11 2.40 §4.4 to §4.6, §5.7) hold at the
# broker, not only in the module (issue #19; docs/contracts/keys.md
# "Certificates and data objects").  A logged-in tenant user that speaks the
# wire itself (cs-wire-client with the demo client's CURVE key) once could:
# store a certificate with CKA_TRUSTED TRUE (the SO's alone: a trust anchor
# for the tenant's other applications), swap the CKA_VALUE of a certificate
# the module shows as fixed, make a private object public, and replace or
# destroy an object made with CKA_MODIFIABLE or CKA_DESTROYABLE FALSE.  Each
# is now refused with the module's own CKR_ and the broker's line "object
# put|destroy REF (tenant demo): CKR_..."; the changes the rules allow still
# work, and the module (pkcs11-tool) meets the same refusal.
. "$(dirname "$0")/lib.sh"

cs_require openssl pkcs11-tool
WIRE=$top_builddir/tests/integration/cs-wire-client
[ -x "$WIRE" ] || cs_fail "cs-wire-client is not built (make check builds it)"
cs_setup
cs_start
T=$WORK/tmp
mkdir -p "$T"
cert_hex () {
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout /dev/null -subj "/CN=$1" \
        -days 1 -outform DER 2>/dev/null | od -An -tx1 -v | tr -d ' \n'
}
C1=$(cert_hex c1)
C2=$(cert_hex c2)
[ -n "$C1" ] && [ -n "$C2" ] || cs_fail "openssl made no certificate"
hex () { printf '%s' "$1" | od -An -tx1 -v | tr -d ' \n'; }

# An object the user pins: not modifiable, not destroyable.
cs_wire CKR_OK obj-new cert pinned "$C1" CKA_MODIFIABLE=0 CKA_DESTROYABLE=0
cs_wire CKR_ACTION_PROHIBITED obj-destroy pinned
cs_wire CKR_ACTION_PROHIBITED obj-set pinned CKA_LABEL "$(hex renamed)"
# pkcs11-tool prints CKR_ACTION_PROHIBITED as "unknown PKCS11 error (0x1b)".
cs_expect_refusal "CKR_ACTION_PROHIBITED|0x1b" "C_DestroyObject of a CKA_DESTROYABLE FALSE certificate (module)" \
    "$T/p11-destroy.txt" $P11 --login --pin "$CRYPTOSERVER_PIN" --delete-object --type cert --label pinned
grep -q "object destroy obj:[0-9a-f]* (tenant demo): CKR_ACTION_PROHIBITED" "$WORK/broker.log" \
    || cs_fail "no broker line for the refused destroy"

# A certificate's value, its trust and the copy-only flags do not change.
cs_wire CKR_OK obj-new cert plain "$C1"
cs_wire CKR_ATTRIBUTE_READ_ONLY obj-set plain CKA_VALUE "$C2"
cs_wire CKR_ATTRIBUTE_READ_ONLY obj-set plain CKA_TRUSTED 1
cs_wire CKR_ATTRIBUTE_READ_ONLY obj-set plain CKA_PRIVATE 1
cs_wire CKR_ATTRIBUTE_READ_ONLY obj-set plain CKA_DESTROYABLE 0
cs_wire CKR_ATTRIBUTE_READ_ONLY obj-new cert anchor "$C2" CKA_TRUSTED=1
grep -q "object put obj:[0-9a-f]* (tenant demo): CKR_ATTRIBUTE_READ_ONLY" "$WORK/broker.log" \
    || cs_fail "no broker line for a refused replacement"
grep -q "object put  (tenant demo): CKR_ATTRIBUTE_READ_ONLY" "$WORK/broker.log" \
    || cs_fail "no broker line for the refused trusted certificate"
# ... what the rules allow still works.
cs_wire CKR_OK obj-set plain CKA_COPYABLE 0
cs_wire CKR_ATTRIBUTE_READ_ONLY obj-set plain CKA_COPYABLE 1
cs_wire CKR_OK obj-set plain CKA_LABEL "$(hex plain2)"
cs_wire CKR_OK obj-new data note "$(hex 'a note')"
cs_wire CKR_OK obj-set note CKA_VALUE "$(hex 'another note')"
cs_wire CKR_OK obj-destroy note

# The module still lists what the broker kept: the pinned certificate, the
# renamed one, no trusted anchor.
$P11 --login --pin "$CRYPTOSERVER_PIN" --list-objects --type cert > "$T/list.txt" 2>&1 \
    || { cat "$T/list.txt"; cs_fail "pkcs11-tool --list-objects failed"; }
grep -q 'label: *pinned' "$T/list.txt" || { cat "$T/list.txt"; cs_fail "the pinned certificate is gone"; }
grep -q 'label: *plain2' "$T/list.txt" || { cat "$T/list.txt"; cs_fail "the renamed certificate is not listed"; }
! grep -q 'label: *anchor' "$T/list.txt" || cs_fail "the trusted certificate was stored"
cs_log "pinned, renamed and refused objects as the rules say"
cs_stop
