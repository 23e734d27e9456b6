/*  drv_modexp.h — raw modular exponentiation with OpenSSL's BIGNUM, for the
 *  boards that run it on the broker's cores with OpenSSL (openssl, sim):
 *  the paper's RPCMODEXP and RPCRSAPCRTEXP (Berson et al. Figure 2) as
 *  cs_driver.h describes them (cs_modexp_t, CS_DRV_MODEXP).  The gmp board
 *  has its own in GMP (shim-drivers/gmp/gmp_modexp.h).
 */
#ifndef DRV_MODEXP_H_INCLUDED
#define DRV_MODEXP_H_INCLUDED

#include "cs_driver.h"

#define DRV_MODEXP_MAX_BITS 8192    /* largest modulus (and p*q) the boards take */
#define DRV_MODEXP_MIN_BITS 1       /* mechanism info: any modulus > 0 */

/*  Runs `op` (cs_modexp_t: plain or CRT form) with BIGNUM: the plain form
 *  with BN_mod_exp_mont_consttime for odd moduli (the exponent may be a
 *  secret) and BN_mod_exp for even ones; the CRT form with both halves in
 *  constant time and the result checked before it is written (cs_driver.h).
 *  Every temporary is a secure BIGNUM freed with BN_clear_free.  Returns
 *  the CK_RV of CS_DRV_MODEXP (cs_driver.h); `what` names the board in the
 *  error line of a failed check.  */
CK_RV drv_modexp_bn (const cs_modexp_t *op, const char *what, unsigned char *out, size_t *out_len);

/*  Mechanism infos of the raw modexp mechanisms a CS_CAP_MODEXP board
 *  offers (CKM_CS_MODEXP ... CKM_CS_MULTI_MODEXP_ARRAY, cryptoserver/pkcs11v.h,
 *  with CKF_DIGEST: they run as C_Digest, cryptoserver-pkcs11(7)) for
 *  moduli of 1..max_bits bits: appends them to *mechs_p (realloc'd) and
 *  grows *count_p.  Returns 0, or -1 when out of memory (the array is then
 *  unchanged).  */
int drv_modexp_mechs_add (cs_mech_info_t **mechs_p, size_t *count_p, unsigned long max_bits);

#endif
