/*  cs_p11.h — the PKCS#11 2.40 header (p11-kit's, CRYPTOKI_COMPAT names) and
 *  the module-wide constants.  */
#ifndef CS_MODULE_P11_H_INCLUDED
#define CS_MODULE_P11_H_INCLUDED

#include <p11-kit/pkcs11.h>

/*  p11-kit's compatibility mode leaves member-name macros such as hash_alg
 *  and s_len defined; the module's own code must not use those names.  */
#undef hash_alg
#undef s_len

#define CS_SLOT_ID          0       /* the one slot of the module */
#define CS_MANUFACTURER     "cryptoserver"
#define CS_LIBRARY_DESC     "cryptoserver PKCS#11 module"
#define CS_MAX_RSA_BYTES    1024    /* 8192-bit modulus */

#endif
