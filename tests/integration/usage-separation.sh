#!/bin/bash
# usage-separation.sh — usage separation that cannot be undone, and the
# broker as the policy point for every rule on a key (issue 19 items 3, 4;
# docs/CONTRACTS.md "Usage separation").  The published key-management
# attacks (Clulow 2003; Bortolozzo, Centenaro, Focardi, Steel, CCS 2010; the
# sign-raw attack of issue 19) are scripted through the module (cs-attacks)
# under the default policy, each refused with its exact CKR_; then the same
# forbidden jobs go straight to the broker from a client that skips the
# module and holds the demo client's CURVE key (cs-wire-client): refused
# with the same codes.  Then keys/usage-separation = spec for tenant demo:
# the module learns it from Hello, and the attacks of the catalogue work
# there (PKCS#11's own rules, as SoftHSM), which is why strict is the
# default; CKA_SENSITIVE, CKA_EXTRACTABLE and CKA_ALLOWED_MECHANISMS hold
# under both.
. "$(dirname "$0")/lib.sh"

ATTACKS=$top_builddir/tests/integration/cs-attacks
WIRE=$top_builddir/tests/integration/cs-wire-client
[ -x "$ATTACKS" ] && [ -x "$WIRE" ] || cs_fail "cs-attacks or cs-wire-client is not built (make check builds them)"
cs_setup
cs_start
T=$WORK/tmp
mkdir -p "$T"

cs_run_bounded $((180 * CS_TIME_FACTOR)) "$T/strict.log" $CS_CLIENT_WRAPPER "$ATTACKS" "$CRYPTOSERVER_MODULE" \
    "$CRYPTOSERVER_TOKEN" "$CRYPTOSERVER_PIN" strict "$T" || { cat "$T/strict.log"; cs_fail "cs-attacks strict failed"; }
sed 's/^/    /' "$T/strict.log"
grep -q '^cs-attacks: every strict step answered as expected$' "$T/strict.log" || cs_fail "cs-attacks did not finish"

OAEP_HEX=$(od -An -tx1 -v "$T/oaep.bin" | tr -d ' \n')
ZERO16=00000000000000000000000000000000

# The sign-raw attack and the role changes, as a client without the module.
cs_wire CKR_KEY_FUNCTION_NOT_PERMITTED sign cs-attack-unwrap CKM_RSA_X_509 "$OAEP_HEX"
cs_wire CKR_ATTRIBUTE_READ_ONLY set cs-attack-unwrap private CKA_SIGN 1
cs_wire CKR_ATTRIBUTE_READ_ONLY set cs-attack-unwrap private CKA_SIGN_RECOVER 1
cs_wire CKR_ATTRIBUTE_READ_ONLY set cs-attack-unwrap private CKA_DECRYPT 1
cs_wire CKR_ATTRIBUTE_READ_ONLY copy cs-attack-unwrap private CKA_SIGN 1
cs_wire CKR_ATTRIBUTE_READ_ONLY set cs-attack-unwrap public CKA_WRAP 1
cs_wire CKR_KEY_FUNCTION_NOT_PERMITTED sign cs-attack-unwrap CKM_RSA_X_509 "$OAEP_HEX"
cs_wire CKR_KEY_FUNCTION_NOT_PERMITTED decrypt cs-attack-unwrap CKM_RSA_PKCS_OAEP "$OAEP_HEX"
cs_wire CKR_KEY_FUNCTION_NOT_PERMITTED decrypt cs-attack-unwrap CKM_RSA_X_509 "$OAEP_HEX"
# An unwrap job takes C_UnwrapKey's mechanism only: no raw RSA, no PKCS#1 v1.5
# padding oracle.  (Its plaintext does return to the client: docs/CONTRACTS.md.)
cs_wire CKR_MECHANISM_INVALID unwrap cs-attack-unwrap CKM_RSA_X_509 "$OAEP_HEX"
cs_wire CKR_MECHANISM_INVALID unwrap cs-attack-unwrap CKM_RSA_PKCS "$OAEP_HEX"
cs_wire CKR_OK unwrap cs-attack-unwrap CKM_RSA_PKCS_OAEP "$OAEP_HEX"
# Raw RSA is sign and decrypt at once: a one-role key runs neither raw.
cs_wire CKR_KEY_FUNCTION_NOT_PERMITTED decrypt cs-attack-dec CKM_RSA_X_509 "$OAEP_HEX"
cs_wire CKR_KEY_FUNCTION_NOT_PERMITTED sign cs-attack-sig CKM_RSA_X_509 "$OAEP_HEX"
cs_wire CKR_OK decrypt cs-attack-dec CKM_RSA_PKCS_OAEP "$(od -An -tx1 -v "$T/dec-oaep.bin" | tr -d ' \n')"
# Item 4: a GCM-only token key answers no ECB (ECB of a zero block is GCM's hash key).
cs_wire CKR_MECHANISM_INVALID sym cs-attack-gcm CKM_AES_ECB encrypt "$ZERO16"
cs_wire CKR_MECHANISM_INVALID sym cs-attack-gcm CKM_AES_CBC decrypt "$ZERO16"
cs_wire CKR_OK sym cs-attack-gcm CKM_AES_GCM encrypt "$ZERO16"
cs_wire CKR_ATTRIBUTE_READ_ONLY set cs-attack-gcm secret CKA_SENSITIVE 0
cs_wire CKR_ATTRIBUTE_READ_ONLY set cs-attack-gcm secret CKA_EXTRACTABLE 1
cs_wire CKR_ATTRIBUTE_READ_ONLY set cs-attack-gcm secret CKA_WRAP 1
# The token KEK: wraps, never en/decrypts data, gains no data role, wraps no
# stronger key (32 bytes under AES-128).
cs_wire CKR_KEY_FUNCTION_NOT_PERMITTED sym cs-attack-kek CKM_AES_ECB decrypt "$ZERO16"
cs_wire CKR_KEY_FUNCTION_NOT_PERMITTED sym cs-attack-kek CKM_AES_ECB encrypt "$ZERO16"
cs_wire CKR_ATTRIBUTE_READ_ONLY set cs-attack-kek secret CKA_DECRYPT 1
cs_wire CKR_WRAPPING_KEY_SIZE_RANGE keywrap cs-attack-kek CKM_AES_KEY_WRAP encrypt "$ZERO16$ZERO16"
cs_wire CKR_OK keywrap cs-attack-kek CKM_AES_KEY_WRAP encrypt "$ZERO16"
# A private key (PKCS#8, C_WrapKey of a session key) is judged by its own
# strength (NIST SP 800-57 table 2), not its length: RSA-2048 (112 bits)
# goes under the AES-128 KEK, P-384 (192 bits) does not.
pkcs8_hex () { openssl genpkey "$@" 2>/dev/null | openssl pkcs8 -topk8 -nocrypt -outform DER | od -An -tx1 -v | tr -d ' \n'; }
cs_wire CKR_OK keywrap cs-attack-kek CKM_AES_KEY_WRAP_PAD encrypt "$(pkcs8_hex -algorithm RSA -pkeyopt rsa_keygen_bits:2048)"
cs_wire CKR_WRAPPING_KEY_SIZE_RANGE keywrap cs-attack-kek CKM_AES_KEY_WRAP_PAD encrypt \
    "$(pkcs8_hex -algorithm EC -pkeyopt ec_paramgen_curve:P-384)"
cs_wire CKR_OK keywrap cs-attack-kek CKM_AES_KEY_WRAP_PAD encrypt "$(pkcs8_hex -algorithm ED25519)"
# ... and with CBC-PAD (issue 21): the same rules at the broker, a round trip.
cs_wire CKR_WRAPPING_KEY_SIZE_RANGE keywrap cs-attack-kek CKM_AES_CBC_PAD encrypt "$ZERO16$ZERO16"
cs_wire CKR_KEY_FUNCTION_NOT_PERMITTED keywrap cs-attack-gcm CKM_AES_CBC_PAD encrypt "$ZERO16"   # a data key
cs_wire CKR_MECHANISM_INVALID keywrap cs-attack-kek CKM_AES_CBC encrypt "$ZERO16"
wrapped=$("$WIRE" --endpoint "$BROKER_ENDPOINT" --broker-cert "$WORK/broker.cert" \
          --client-cert "$WORK/clients/demo/client.cert" --pin "$CRYPTOSERVER_PIN" \
          keywrap cs-attack-kek CKM_AES_CBC_PAD encrypt "$ZERO16" 2> "$T/wire.err")
[ "${wrapped%% *}" = CKR_OK ] && [ ${#wrapped} -eq $((7 + 64)) ] || cs_fail "keywrap CKM_AES_CBC_PAD: $wrapped"
# A CBC-PAD unwrap is a padding oracle (common/cs_usage.h): refused under
# strict, whatever the padding; it runs under spec (below).
cs_wire CKR_MECHANISM_INVALID keywrap cs-attack-kek CKM_AES_CBC_PAD decrypt "${wrapped#* }"
cs_log "wire: keywrap CKM_AES_CBC_PAD wraps with the token KEK and does not unwrap (strict)"
cs_log "strict: every attack refused through the module and straight at the broker"

# spec for tenant demo: PKCS#11's rules; the module follows the broker's Hello.
cs_stop
"$CS_ADMIN" config set "$WORK/broker.conf" keys/usage-separation/demo spec || cs_fail "config set usage-separation"
cs_start
cs_run_bounded $((180 * CS_TIME_FACTOR)) "$T/spec.log" $CS_CLIENT_WRAPPER "$ATTACKS" "$CRYPTOSERVER_MODULE" \
    "$CRYPTOSERVER_TOKEN" "$CRYPTOSERVER_PIN" spec "$T" || { cat "$T/spec.log"; cs_fail "cs-attacks spec failed"; }
sed 's/^/    /' "$T/spec.log"
got=$("$WIRE" --endpoint "$BROKER_ENDPOINT" --broker-cert "$WORK/broker.cert" \
      --client-cert "$WORK/clients/demo/client.cert" --pin "$CRYPTOSERVER_PIN" \
      keywrap cs-attack-kek CKM_AES_CBC_PAD decrypt "${wrapped#* }" 2> "$T/wire.err")
[ "$got" = "CKR_OK $ZERO16" ] || cs_fail "spec: keywrap CKM_AES_CBC_PAD decrypt: $got"
cs_log "spec: wire keywrap CKM_AES_CBC_PAD round trip with the token KEK"
cs_wire CKR_OK set cs-attack-kek secret CKA_DECRYPT 1
cs_wire CKR_OK sym cs-attack-kek CKM_AES_ECB decrypt "$ZERO16"
cs_wire CKR_MECHANISM_INVALID sym cs-attack-gcm CKM_AES_ECB encrypt "$ZERO16"
cs_wire CKR_ATTRIBUTE_READ_ONLY set cs-attack-gcm secret CKA_SENSITIVE 0
cs_log "spec: the combined-role keys of PKCS#11 work (open to the attacks); sensitivity and allowed mechanisms hold"

# Back to strict: the KEK given CKA_DECRYPT under spec keeps both roles and
# now runs neither; the broker says so in its log.
cs_stop
"$CS_ADMIN" config set "$WORK/broker.conf" keys/usage-separation/demo strict || cs_fail "config set usage-separation"
cs_start
cs_expect_broker_log 'W: .* client demo \(tenant demo\): decrypt job on a key that both wraps or unwraps and works on data refused \(keys/usage-separation = strict\): answered with CKR_KEY_FUNCTION_NOT_PERMITTED'
cs_wire CKR_KEY_FUNCTION_NOT_PERMITTED sym cs-attack-kek CKM_AES_ECB decrypt "$ZERO16"
# Its key roles may go off while it stays combined, not the last one: it
# would decrypt again.
cs_wire CKR_OK set cs-attack-kek secret CKA_UNWRAP 0
cs_wire CKR_ATTRIBUTE_READ_ONLY set cs-attack-kek secret CKA_WRAP 0
cs_wire CKR_KEY_FUNCTION_NOT_PERMITTED sym cs-attack-kek CKM_AES_ECB decrypt "$ZERO16"
# Shedding its data roles makes it a wrapping key again.
cs_wire CKR_OK set cs-attack-kek secret CKA_DECRYPT 0
cs_wire CKR_OK set cs-attack-kek secret CKA_ENCRYPT 0
cs_wire CKR_OK keywrap cs-attack-kek CKM_AES_KEY_WRAP encrypt "$ZERO16"
cs_wait_until 5 grep -q 'client demo (tenant demo): decrypt job on a key that both wraps or unwraps' "$WORK/broker.log" \
    || cs_fail "no warning for the refused job on a combined key"
cs_stop
