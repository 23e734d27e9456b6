/*  verify_sig.c — PKCS#11 3.2 signature-first verification (verify_sig.h):
 *  C_VerifyInit, C_Verify, C_VerifyUpdate and C_VerifyFinal with the
 *  signature given first and kept by the session until the data is in.
 */
#include <stdlib.h>
#include "log.h"
#include "session.h"
#include "verify_sig.h"

CK_RV
C_VerifySignatureInit (CK_SESSION_HANDLE handle, CK_MECHANISM_PTR mech, CK_OBJECT_HANDLE key,
                       CK_BYTE_PTR sig, CK_ULONG sig_len)
{
    CK_RV rv;
    return_val_if_fail (sig || !sig_len, CKR_ARGUMENTS_BAD);
    if ((rv = C_VerifyInit (handle, mech, key)) != CKR_OK)
        return rv;
    /*  An empty signature is kept as one: it fails as C_Verify would fail it.  */
    static const CK_BYTE none [1];
    if ((rv = cs_session_verify_sig_put (handle, sig ? sig : none, sig_len)) != CKR_OK)
        cs_session_cancel (handle, CKF_VERIFY);
    return rv;
}

/*  Takes the kept signature and ends the operation with `data` (single
 *  part) or with the parts (final).  */
static CK_RV
s_verify_sig_finish (CK_SESSION_HANDLE handle, const CK_BYTE *data, CK_ULONG len, bool final)
{
    uint8_t *sig = NULL;
    size_t sig_len = 0;
    CK_RV rv = cs_session_verify_sig_take (handle, &sig, &sig_len);
    if (rv != CKR_OK)
        return rv;
    if (final)
        rv = C_VerifyFinal (handle, sig, sig_len);
    else
        rv = C_Verify (handle, (CK_BYTE_PTR) data, len, sig, sig_len);
    free (sig);
    return rv;
}

CK_RV
C_VerifySignature (CK_SESSION_HANDLE handle, CK_BYTE_PTR data, CK_ULONG len)
{
    return_val_if_fail (data || !len, CKR_ARGUMENTS_BAD);
    return s_verify_sig_finish (handle, data, len, false);
}

CK_RV
C_VerifySignatureUpdate (CK_SESSION_HANDLE handle, CK_BYTE_PTR part, CK_ULONG len)
{
    CK_RV rv = cs_session_verify_sig_take (handle, NULL, NULL);
    if (rv != CKR_OK)
        return rv;
    return C_VerifyUpdate (handle, part, len);
}

CK_RV
C_VerifySignatureFinal (CK_SESSION_HANDLE handle)
{
    return s_verify_sig_finish (handle, NULL, 0, true);
}
