/*  recover.c — C_SignRecoverInit/C_SignRecover and C_VerifyRecoverInit/
 *  C_VerifyRecover for raw RSA: CKM_RSA_PKCS and CKM_RSA_X_509 (PKCS#11 2.40
 *  §5.13, §5.14; curr. mech. §2.1.6, §2.1.10).  Both are single-part.
 *
 *  For these two mechanisms signing with recovery is the same RSA private
 *  operation as C_Sign (PKCS#1 v1.5 type 1 padding of the data, or the data
 *  as a k-byte integer), so it runs as a SignJob on the broker (sign.h).
 *  Verifying with recovery needs only the public key and runs here with
 *  OpenSSL, without the library mutex.
 */
#include <string.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rsa.h>
#include "keyder.h"
#include "keyop.h"
#include "log.h"
#include "guard.h"
#include "session.h"
#include "sign.h"

/*  PKCS#11 2.40 §5.13: a CKU_USER login and a private RSA key with
 *  CKA_SIGN_RECOVER TRUE (cs_keyop_init).  Mechanisms other than
 *  CKM_RSA_PKCS and CKM_RSA_X_509: CKR_MECHANISM_INVALID.  */
CK_RV
C_SignRecoverInit (CK_SESSION_HANDLE handle, CK_MECHANISM_PTR mech, CK_OBJECT_HANDLE key_handle)
{
    return cs_keyop_init (handle, CS_OP_SIGN_RECOVER, CKF_SIGN_RECOVER, mech, key_handle, cs_sigop_create,
                          cs_sigop_free);
}

/*  The signature (k bytes) of `data`: at most k - 11 bytes for
 *  CKM_RSA_PKCS, k for CKM_RSA_X_509, else CKR_DATA_LEN_RANGE.  The
 *  two-call convention as for C_Sign.  */
CK_RV
C_SignRecover (CK_SESSION_HANDLE handle, CK_BYTE_PTR data, CK_ULONG len, CK_BYTE_PTR sig, CK_ULONG_PTR sig_len_p)
{
    return cs_sigop_sign_finish (handle, CS_OP_SIGN_RECOVER, data, len, false, sig, sig_len_p);
}

/*  PKCS#11 2.40 §5.14: a public RSA key with CKA_VERIFY_RECOVER TRUE.  */
CK_RV
C_VerifyRecoverInit (CK_SESSION_HANDLE handle, CK_MECHANISM_PTR mech, CK_OBJECT_HANDLE key_handle)
{
    return cs_keyop_init (handle, CS_OP_VERIFY_RECOVER, CKF_VERIFY_RECOVER, mech, key_handle, cs_sigop_create,
                          cs_sigop_free);
}

/*  RSA public operation on `sig` (exactly k bytes, else
 *  CKR_SIGNATURE_LEN_RANGE), then the padding check: PKCS#1 v1.5 type 1 for
 *  CKM_RSA_PKCS (the data), none for CKM_RSA_X_509 (the k-byte integer).
 *  out holds CS_MAX_RSA_BYTES.  CKR_SIGNATURE_INVALID when the signature is
 *  not below the modulus or the padding is wrong.  */
static CK_RV
s_recover (const cs_sigop_t *op, const uint8_t *sig, size_t sig_len, uint8_t *out, size_t *out_len)
{
    CK_RV rv = CKR_FUNCTION_FAILED;
    EVP_PKEY *pkey = NULL;
    EVP_PKEY_CTX *ctx = NULL;
    int padding = op->mech->wire == CKM_RSA_X_509 ? RSA_NO_PADDING : RSA_PKCS1_PADDING;
    if (sig_len != op->key->modulus_len)
        return CKR_SIGNATURE_LEN_RANGE;
    if (!(pkey = cs_keyder_public_pkey (op->key)) || !(ctx = EVP_PKEY_CTX_new_from_pkey (NULL, pkey, NULL))
    ||  EVP_PKEY_verify_recover_init (ctx) <= 0 || EVP_PKEY_CTX_set_rsa_padding (ctx, padding) <= 0)
        goto out;
    *out_len = CS_MAX_RSA_BYTES;
    rv = EVP_PKEY_verify_recover (ctx, out, out_len, sig, sig_len) > 0 ? CKR_OK : CKR_SIGNATURE_INVALID;
out:
    EVP_PKEY_CTX_free (ctx);
    EVP_PKEY_free (pkey);
    return rv;
}

/*  Puts a verify-recover operation back into its session after
 *  CKR_BUFFER_TOO_SMALL (the session may have closed meanwhile: then it is
 *  freed).  */
static void
s_restore (CK_SESSION_HANDLE handle, cs_sigop_t *op)
{
    cs_session_t *session;
    cs_lock ();
    if ((session = cs_session_lookup_inlock (handle))
    &&  cs_session_op_start_inlock (session, CS_OP_VERIFY_RECOVER, op, cs_sigop_free) == CKR_OK)
        op = NULL;
    cs_unlock ();
    cs_sigop_free (op);
}

/*  The data a signature recovers.  Length query (data NULL): an upper bound,
 *  k - 11 bytes for CKM_RSA_PKCS, k for CKM_RSA_X_509 (PKCS#11 2.40 §5.2
 *  allows "somewhat" more than needed).  A buffer shorter than the data:
 *  CKR_BUFFER_TOO_SMALL with the exact length, and the operation stays.
 *  Anything else ends it: CKR_SIGNATURE_LEN_RANGE, CKR_SIGNATURE_INVALID,
 *  CKR_OK.  */
CK_RV
C_VerifyRecover (CK_SESSION_HANDLE handle, CK_BYTE_PTR sig, CK_ULONG sig_len, CK_BYTE_PTR data,
                 CK_ULONG_PTR data_len_p)
{
    uint8_t recovered [CS_MAX_RSA_BYTES];
    size_t recovered_len = 0, k;
    cs_session_t *session;
    cs_sigop_t *op;
    CK_RV rv;
    CS_BEGIN_OP_CALL (rv, handle, CS_OP_VERIFY_RECOVER, data_len_p != NULL && (sig || !sig_len),
                          &session, (void **) &op);
    if (!data) {
        k = op->key->modulus_len;
        *data_len_p = op->mech->wire == CKM_RSA_X_509 ? k : k > 11 ? k - 11 : 0;
        CS_END_CALL ();
        return CKR_OK;
    }
    op = cs_session_op_take_inlock (session, CS_OP_VERIFY_RECOVER);
    CS_END_CALL ();
    rv = s_recover (op, sig, sig_len, recovered, &recovered_len);
    if (rv == CKR_OK && *data_len_p < recovered_len) {
        *data_len_p = recovered_len;
        s_restore (handle, op);
        OPENSSL_cleanse (recovered, sizeof recovered);
        return CKR_BUFFER_TOO_SMALL;
    }
    if (rv == CKR_OK) {
        memcpy (data, recovered, recovered_len);
        *data_len_p = recovered_len;
    }
    OPENSSL_cleanse (recovered, sizeof recovered);
    cs_sigop_free (op);
    return rv;
}
