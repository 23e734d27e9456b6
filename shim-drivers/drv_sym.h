/*  drv_sym.h — secret-key operations with OpenSSL EVP (issue #10), for the
 *  boards that run them on the broker's cores (openssl): AES-ECB, AES-CBC,
 *  AES-CBC-PAD, AES-GCM and HMAC-SHA256 as cs_driver.h describes them
 *  (cs_sym_t, CS_DRV_SYMMETRIC).
 */
#ifndef DRV_SYM_H_INCLUDED
#define DRV_SYM_H_INCLUDED

#include "cs_driver.h"

/*  Runs `op` with EVP (EVP_Cipher* for AES, EVP_MAC HMAC for the MAC).
 *  Returns the CK_RV of CS_DRV_SYMMETRIC (cs_driver.h).  Temporary
 *  buffers are wiped.  */
CK_RV drv_sym_run (const cs_sym_t *op, unsigned char *out, size_t *out_len);

/*  Appends the mechanism infos of the secret-key mechanisms (sizes in
 *  bytes, as PKCS#11 reports them for AES and generic secrets) to
 *  *mechs_p (realloc'd) and grows *count_p.  Returns 0, or -1 when out of
 *  memory (the array is then unchanged).  */
int drv_sym_mechs_add (cs_mech_info_t **mechs_p, size_t *count_p);

#endif
