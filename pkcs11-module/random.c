/*  random.c — random number generation (PKCS#11 2.40 §5.15): C_SeedRandom
 *  and C_GenerateRandom, in the module with OpenSSL 3's DRBG.
 */
#include <stdint.h>
#include <openssl/rand.h>
#include "log.h"
#include "session.h"

/*  PKCS#11 2.40 §5.15 C_SeedRandom: mixes `len` bytes of seed into
 *  OpenSSL's random generator with RAND_add, credited with no entropy, so
 *  a poor seed can do no harm (the DRBG takes it as additional input,
 *  NIST SP 800-90A).  CKR_ARGUMENTS_BAD (seed NULL with len > 0, or len
 *  over INT_MAX), CKR_SESSION_HANDLE_INVALID, CKR_OK.  */
CK_RV
C_SeedRandom (CK_SESSION_HANDLE handle, CK_BYTE_PTR seed, CK_ULONG len)
{
    CK_RV rv;
    return_val_if_fail ((seed || !len) && len <= INT32_MAX, CKR_ARGUMENTS_BAD);
    if ((rv = cs_session_check (handle)) != CKR_OK)
        return rv;
    if (len)
        RAND_add (seed, (int) len, 0.0);
    return CKR_OK;
}

/*  PKCS#11 2.40 §5.15 C_GenerateRandom: `len` bytes from OpenSSL's
 *  RAND_bytes.  CKR_ARGUMENTS_BAD (out NULL with len > 0, or len over
 *  INT_MAX), CKR_SESSION_HANDLE_INVALID, CKR_FUNCTION_FAILED, CKR_OK.  */
CK_RV
C_GenerateRandom (CK_SESSION_HANDLE handle, CK_BYTE_PTR out, CK_ULONG len)
{
    CK_RV rv;
    return_val_if_fail ((out || !len) && len <= INT32_MAX, CKR_ARGUMENTS_BAD);
    if ((rv = cs_session_check (handle)) != CKR_OK)
        return rv;
    return len == 0 || RAND_bytes (out, (int) len) == 1 ? CKR_OK : CKR_FUNCTION_FAILED;
}
