/*  drv_sym.h — secret-key operations with OpenSSL EVP (issue #10), for the
 *  boards that run them on the broker's cores (openssl): AES-ECB, AES-CBC,
 *  AES-CBC-PAD, AES-GCM, AES-CTR, AES key wrap (RFC 3394, RFC 5649) of
 *  data, AES-CMAC, DES3-ECB, DES3-CBC, DES3-CBC-PAD (DES-EDE3 of the
 *  default provider), DES-ECB, DES-CBC, DES-CBC-PAD (single DES, legacy: OpenSSL's
 *  legacy provider, docs/CONTRACTS.md "Legacy DES") and HMAC with SHA-1/224/256/384/512, as cs_driver.h
 *  describes them (cs_sym_t, CS_DRV_SYMMETRIC).  The _GENERAL MACs never
 *  reach a board: the module sends the full MAC row and cuts the MAC.
 */
#ifndef DRV_SYM_H_INCLUDED
#define DRV_SYM_H_INCLUDED

#include "cs_driver.h"

/*  Runs `op` with EVP (EVP_Cipher* for the ciphers, EVP_MAC HMAC or CMAC
 *  for the MACs).
 *  Returns the CK_RV of CS_DRV_SYMMETRIC (cs_driver.h).  Temporary
 *  buffers are wiped.  */
CK_RV drv_sym_run (const cs_sym_t *op, unsigned char *out, size_t *out_len);

/*  Appends the mechanism infos of the secret-key mechanisms (sizes in
 *  bytes, as PKCS#11 reports them for AES and generic secrets) to
 *  *mechs_p (realloc'd) and grows *count_p; the single-DES ones only when
 *  `des` (a board's legacy-des switch and drv_sym_legacy_des).  Returns 0,
 *  or -1 when out of memory (the array is then unchanged).  */
int drv_sym_mechs_add (cs_mech_info_t **mechs_p, size_t *count_p, bool des);

/*  Loads OpenSSL 3's legacy provider (single DES, FIPS 46-3 withdrawn)
 *  into the default library context once, keeping the default provider.
 *  Returns false when it is not installed (DES is then not listed and its
 *  jobs answer CKR_KEY_SIZE_RANGE ... as any cipher EVP cannot fetch).
 *  Not thread-safe on first call: call it at board open.  */
bool drv_sym_legacy_des (void);

#endif
