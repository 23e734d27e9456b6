/*  cs_pin.h — salted, slow and keyed hashes of PINs.
 *
 *  Stored forms (all hex lower case, 16-byte salt, 32-byte hash or tag):
 *    "scrypt-hmac$LOGN$R$P$SALT$TAG"   written now:
 *        TAG = HMAC-SHA256 (key, scrypt (PIN, SALT, N = 2^LOGN, r = R, p = P,
 *        dkLen = 32))   (RFC 7914, RFC 2104)
 *    "pbkdf2-sha256-hmac$ITER$SALT$TAG"   an old hash wrapped by the keystore
 *        upgrade (cs_pin_wrap): TAG = HMAC-SHA256 (key, PBKDF2-HMAC-SHA256
 *        (PIN, SALT, ITER, 32))   (RFC 8018 §5.2)
 *    "pbkdf2-sha256$ITER$SALT$HASH"   schema 1 keystores, verified only
 *  `key` (CS_PIN_KEY_LEN bytes) is a secret the keystore derives from its
 *  master key, so a copy of the stored forms alone does not allow guessing
 *  PINs offline.  Used by the keystore to write and check C_Login PINs; PINs
 *  are bytes and are never logged.
 */
#ifndef CS_PIN_H_INCLUDED
#define CS_PIN_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CS_PIN_SCRYPT_LOG_N 15      /* N = 32768: 32 MiB, ~70 ms on one core (keystore(5)) */
#define CS_PIN_SCRYPT_R 8
#define CS_PIN_SCRYPT_P 1
#define CS_PIN_KEY_LEN 32           /* bytes of the hash key */
#define CS_PIN_MIN_LEN 4            /* bytes */
#define CS_PIN_MAX_LEN 64           /* bytes */

/*  Hashes pin (pin_len bytes) with a fresh random salt in the current form
 *  ("scrypt-hmac", the cost above) under `key`.  Returns the stored form as
 *  a malloc'd string (caller frees), or NULL on failure.  */
char *cs_pin_hash (const uint8_t key [CS_PIN_KEY_LEN], const void *pin, size_t pin_len);

/*  Checks pin (pin_len bytes) against any stored form above in constant
 *  time; `key` is used by the keyed forms.  Returns true when it matches;
 *  false when it does not, or `stored` is malformed or has a cost outside
 *  the accepted bounds (PBKDF2 1000..10000000 iterations; scrypt LOGN
 *  10..20, R 1..32, P 1..16).  */
bool cs_pin_verify (const char *stored, const uint8_t key [CS_PIN_KEY_LEN],
                    const void *pin, size_t pin_len);

/*  True when `stored` is in the form and at the cost cs_pin_hash writes now;
 *  false for older forms, which the keystore re-hashes after the next right
 *  PIN.  */
bool cs_pin_current (const char *stored);

/*  Wraps an unkeyed "pbkdf2-sha256" stored form into "pbkdf2-sha256-hmac"
 *  under `key` without knowing the PIN (the keystore's schema upgrade).
 *  Returns a malloc'd stored form (caller frees), a copy of `stored` when
 *  it is not in the unkeyed form, or NULL when it is malformed or out of
 *  memory.  */
char *cs_pin_wrap (const char *stored, const uint8_t key [CS_PIN_KEY_LEN]);

#endif
