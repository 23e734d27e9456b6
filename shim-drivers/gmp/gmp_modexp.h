/*  gmp_modexp.h — raw modular exponentiation on the gmp board: the paper's
 *  RPCMODEXP and RPCRSAPCRTEXP (Berson et al. Figure 2) in GMP, as
 *  cs_driver.h describes them (cs_modexp_t, CS_DRV_MODEXP).  Secret
 *  exponents go through mpz_powm_sec (constant time) whenever the modulus
 *  is odd and the exponent non-zero (its preconditions); an even modulus
 *  uses mpz_powm.  Every mpz_t is wiped limb by limb before it is freed.
 */
#ifndef GMP_MODEXP_H_INCLUDED
#define GMP_MODEXP_H_INCLUDED

#include "cs_driver.h"

#define GMP_MODEXP_MAX_BITS 8192    /* largest modulus (and p*q) the board takes */

/*  Runs `op` (plain or CRT form); returns the CK_RV of CS_DRV_MODEXP
 *  (cs_driver.h).  A CRT result is checked before release (cs_modexp_t):
 *  a failed check logs an error line naming `what` and returns
 *  CKR_DEVICE_ERROR when the caller gave e (a fault), or
 *  CKR_MECHANISM_PARAM_INVALID without it (the values are not an RSA key,
 *  or a fault: they cannot be told apart).  */
CK_RV gmp_modexp (const cs_modexp_t *op, const char *what, unsigned char *out, size_t *out_len);

/*  For tests only: gmp_modexp with a bit of the mod-p CRT half flipped,
 *  to show that the check catches it.  */
CK_RV gmp_modexp_fault (const cs_modexp_t *op, unsigned char *out, size_t *out_len);

#endif
