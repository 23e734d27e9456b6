/*  verify.h — verify before release (issue #9; docs/DESIGN.md §7): a board is
 *  not trusted, so a worker checks a board's result with the key's public
 *  half before it goes back to the reactor.  A faulty RSA-CRT signature
 *  reveals a prime factor of the key (Boneh, DeMillo, Lipton 1997), so a
 *  wrong RSA signature must never leave the broker.
 *
 *  What is checked (cryptoserver-broker.conf(5), "verify"):
 *    CKM_RSA_PKCS sign       RSASSA-PKCS1-v1_5 verification of the input
 *    CKM_RSA_PKCS_PSS sign   RSASSA-PSS verification (hash, MGF1, salt length)
 *    CKM_RSA_X_509 sign      s^e mod n equals the input block
 *    CKM_RSA_X_509 decrypt   m^e mod n equals the ciphertext (re-encryption)
 *    CKM_ECDSA sign          ECDSA verification of the digest (r || s)
 *    CKM_EDDSA sign          Ed25519 verification of the message
 *  Not checked: CKM_RSA_PKCS and CKM_RSA_PKCS_OAEP decryption (the padding
 *  is random, a re-encryption cannot be compared; a faulty exponentiation
 *  almost always breaks the padding check and the board answers an error),
 *  ECDH derivation and key generation.
 *
 *  One verify_t per worker thread (no locks): it caches the parsed public
 *  keys (resident keys by board and CKA_ID, key material by its SHA-256).
 */
#ifndef VERIFY_H_INCLUDED
#define VERIFY_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include "board.h"

typedef enum {
    VERIFY_SKIPPED = 0,             /* not checked (mechanism, policy or sampling) */
    VERIFY_OK,                      /* checked: right */
    VERIFY_WRONG                    /* checked: wrong, must not be released */
} verify_outcome_t;

typedef struct _verify_t verify_t;

/*  A verifier for one worker thread; NULL when out of memory.  Caller
 *  destroys.  */
verify_t *verify_new (void);

/*  NULL-safe; nulls *self_p.  */
void verify_destroy (verify_t **self_p);

/*  Checks the result `out` (out_len bytes) of a sign (sign = true) or
 *  decrypt job with `key` (resident on `board`, or material) and `mech` on
 *  input `in` (in_len bytes), as the board's policy says (board->verify_rsa
 *  and board->verify_ec: percent of results checked, 0..100).  A public key
 *  that cannot be made (unknown key type or curve) is VERIFY_SKIPPED.  */
verify_outcome_t verify_result (verify_t *self, const board_t *board, bool sign, const cs_drv_key_t *key,
                                const cs_drv_mech_t *mech, const unsigned char *in, size_t in_len,
                                const unsigned char *out, size_t out_len);

/*  The same check whatever the board's policy says (the cross-check,
 *  cross_check.h, must know which of two results is right): VERIFY_SKIPPED
 *  only when the mechanism cannot be checked (see the table above) or the
 *  public key cannot be made.  */
verify_outcome_t verify_always (verify_t *self, const board_t *board, bool sign, const cs_drv_key_t *key,
                                const cs_drv_mech_t *mech, const unsigned char *in, size_t in_len,
                                const unsigned char *out, size_t out_len);

#endif
