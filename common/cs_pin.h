/*  cs_pin.h — salted slow hashes of PINs (PBKDF2-HMAC-SHA256, RFC 8018 §5.2).
 *
 *  Stored form: "pbkdf2-sha256$ITERATIONS$SALT_HEX$HASH_HEX" (16-byte salt,
 *  32-byte hash).  Used by cryptoserver-admin to write PINs and by the broker
 *  to check C_Login.  PINs are bytes; they are never logged.
 */
#ifndef CS_PIN_H_INCLUDED
#define CS_PIN_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>

#define CS_PIN_ITERATIONS 100000   /* ~50 ms on one core */
#define CS_PIN_MIN_LEN 4           /* bytes */
#define CS_PIN_MAX_LEN 64          /* bytes */

/*  Hashes pin (pin_len bytes) with a fresh random salt.  Returns the stored
 *  form as a malloc'd string (caller frees), or NULL on failure.  */
char *cs_pin_hash (const void *pin, size_t pin_len);

/*  Checks pin (pin_len bytes) against a stored form in constant time.  Returns
 *  true when it matches; false when it does not or `stored` is malformed.  */
bool cs_pin_verify (const char *stored, const void *pin, size_t pin_len);

#endif
