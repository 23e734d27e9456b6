/*  verify.c — verification (PKCS#11 2.40 §5.11, verify.h): C_VerifyInit,
 *  C_Verify, C_VerifyUpdate, C_VerifyFinal and the PKCS#11 3.2
 *  signature-first C_VerifySignature*.  Public-key signatures are checked
 *  here with OpenSSL 3, in the module: they need no secret (docs/DESIGN.md
 *  §1); MACs go to the broker (secret.h).  C_VerifyRecover* is recover.c.
 *
 *  Public keys are rebuilt from CKA_MODULUS/CKA_PUBLIC_EXPONENT or
 *  CKA_EC_PARAMS/CKA_EC_POINT (keyder.h).  ECDSA signatures are raw r||s in
 *  PKCS#11 and DER for OpenSSL; Ed25519 (CKM_EDDSA) verifies the whole
 *  message (RFC 8032 §5.1.7, no prehash).
 */
#include <stdlib.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/rsa.h>
#include "guard.h"
#include "keyder.h"
#include "keyop.h"
#include "log.h"
#include "runner.h"
#include "secret.h"
#include "session.h"
#include "sign.h"
#include "verify.h"

/*  RSA PKCS#1 v1.5 (padding RSA_PKCS1_PADDING) or raw CKM_RSA_X_509
 *  (RSA_NO_PADDING, the k-byte message): recovers what the signature
 *  encodes and compares it with `message` in constant time.  */
static CK_RV
s_verify_recover (EVP_PKEY_CTX *ctx, int padding, const uint8_t *message, size_t len,
                  const uint8_t *sig, size_t sig_len)
{
    uint8_t recovered [CS_MAX_RSA_BYTES];
    size_t recovered_len = sizeof recovered;
    if (EVP_PKEY_verify_recover_init (ctx) <= 0
    ||  EVP_PKEY_CTX_set_rsa_padding (ctx, padding) <= 0)
        return CKR_FUNCTION_FAILED;
    if (EVP_PKEY_verify_recover (ctx, recovered, &recovered_len, sig, sig_len) <= 0
    ||  recovered_len != len || CRYPTO_memcmp (recovered, message, len) != 0)
        return CKR_SIGNATURE_INVALID;
    return CKR_OK;
}

static CK_RV
s_verify_pss (EVP_PKEY_CTX *ctx, const cs_mech_params_t *params, const uint8_t *digest, size_t len,
              const uint8_t *sig, size_t sig_len)
{
    if (EVP_PKEY_verify_init (ctx) <= 0
    ||  EVP_PKEY_CTX_set_rsa_padding (ctx, RSA_PKCS1_PSS_PADDING) <= 0
    ||  EVP_PKEY_CTX_set_signature_md (ctx, cs_mech_md (params->hash)) <= 0
    ||  EVP_PKEY_CTX_set_rsa_mgf1_md (ctx, cs_mech_mgf_md (params->mgf)) <= 0
    ||  EVP_PKEY_CTX_set_rsa_pss_saltlen (ctx, (int) params->salt_len) <= 0)
        return CKR_FUNCTION_FAILED;
    return EVP_PKEY_verify (ctx, sig, sig_len, digest, len) == 1 ? CKR_OK : CKR_SIGNATURE_INVALID;
}

/*  ECDSA: raw r||s (PKCS#11) to DER (OpenSSL), then verify the digest.  */
static CK_RV
s_verify_ecdsa (EVP_PKEY_CTX *ctx, const uint8_t *digest, size_t len, const uint8_t *sig, size_t sig_len)
{
    CK_RV rv = CKR_HOST_MEMORY;
    ECDSA_SIG *ecsig = ECDSA_SIG_new ();
    BIGNUM *r = BN_bin2bn (sig, (int) sig_len / 2, NULL);
    BIGNUM *s = BN_bin2bn (sig + sig_len / 2, (int) sig_len / 2, NULL);
    unsigned char *der = NULL;
    int der_len;
    if (!ecsig || !r || !s || !ECDSA_SIG_set0 (ecsig, r, s))
        goto out;
    r = s = NULL;
    if ((der_len = i2d_ECDSA_SIG (ecsig, &der)) <= 0)
        goto out;
    if (EVP_PKEY_verify_init (ctx) <= 0) {
        rv = CKR_FUNCTION_FAILED;
        goto out;
    }
    rv = EVP_PKEY_verify (ctx, der, (size_t) der_len, digest, len) == 1 ? CKR_OK : CKR_SIGNATURE_INVALID;
out:
    BN_free (r);
    BN_free (s);
    ECDSA_SIG_free (ecsig);
    OPENSSL_free (der);
    return rv;
}

/*  Ed25519: one-shot verification of the whole message.  */
static CK_RV
s_verify_eddsa (EVP_PKEY *pkey, const uint8_t *message, size_t len, const uint8_t *sig, size_t sig_len)
{
    CK_RV rv = CKR_HOST_MEMORY;
    EVP_MD_CTX *md_ctx = EVP_MD_CTX_new ();
    if (md_ctx && EVP_DigestVerifyInit (md_ctx, NULL, NULL, NULL, pkey) <= 0)
        rv = CKR_FUNCTION_FAILED;
    else
    if (md_ctx)
        rv = EVP_DigestVerify (md_ctx, sig, sig_len, message, len) == 1 ? CKR_OK : CKR_SIGNATURE_INVALID;
    EVP_MD_CTX_free (md_ctx);
    return rv;
}

/*  ML-DSA (PKCS#11 3.2; FIPS 204 Alg. 3): the module has no ML-DSA code,
 *  so a VerifyJob with the public key's CKA_VALUE asks a board that lists
 *  CKM_ML_DSA with CKF_VERIFY.  Without the mutex.  CKR_OK,
 *  CKR_SIGNATURE_INVALID, CKR_SIGNATURE_LEN_RANGE or the broker's CK_RV
 *  (CKR_MECHANISM_INVALID when no board verifies).  */
static CK_RV
s_verify_job (const cs_sigop_t *op, const uint8_t *message, size_t len, const uint8_t *sig, size_t sig_len)
{
    Cs__Reply *reply = NULL;
    Cs__Mechanism mech = CS__MECHANISM__INIT;
    Cs__VerifyJob verify = CS__VERIFY_JOB__INIT;
    Cs__Job job = CS__JOB__INIT;
    cs_keyop_job_mechanism (CKM_ML_DSA, &op->params, &mech);
    verify.mechanism = &mech;
    verify.parameter_set = op->key->parameter_set;
    verify.public_value = (ProtobufCBinaryData) { op->key->value_len, op->key->value };
    verify.data = (ProtobufCBinaryData) { len, (uint8_t *) message };
    verify.signature = (ProtobufCBinaryData) { sig_len, (uint8_t *) sig };
    job.kind_case = CS__JOB__KIND_VERIFY;
    job.verify = &verify;
    CK_RV rv = cs_runner_run_job (&job, false, &reply);
    if (reply)
        cs__reply__free_unpacked (reply, NULL);
    return rv;
}

/*  Checks `sig` over the prepared message (cs_sigop_message).  */
static CK_RV
s_verify (const cs_sigop_t *op, const uint8_t *message, size_t len, const uint8_t *sig, size_t sig_len)
{
    CK_RV rv = CKR_FUNCTION_FAILED;
    EVP_PKEY *pkey = NULL;
    EVP_PKEY_CTX *ctx = NULL;
    /*  PKCS#11 2.40 §5.13 C_Verify: invalid by its length alone.  */
    if (sig_len != cs_sigop_sig_len (op))
        return CKR_SIGNATURE_LEN_RANGE;
    if (op->mech->wire == CKM_ML_DSA)
        return s_verify_job (op, message, len, sig, sig_len);
    if (!(pkey = cs_keyder_public_pkey (op->key)))
        goto out;
    if (op->mech->wire == CKM_EDDSA)
        rv = s_verify_eddsa (pkey, message, len, sig, sig_len);
    else
    if (!(ctx = EVP_PKEY_CTX_new_from_pkey (NULL, pkey, NULL)))
        goto out;
    else
    if (op->mech->wire == CKM_RSA_PKCS)
        rv = s_verify_recover (ctx, RSA_PKCS1_PADDING, message, len, sig, sig_len);
    else
    if (op->mech->wire == CKM_RSA_X_509)
        rv = s_verify_recover (ctx, RSA_NO_PADDING, message, len, sig, sig_len);
    else
    if (op->mech->wire == CKM_RSA_PKCS_PSS)
        rv = s_verify_pss (ctx, &op->params, message, len, sig, sig_len);
    else
        rv = s_verify_ecdsa (ctx, message, len, sig, sig_len);
out:
    EVP_PKEY_CTX_free (ctx);
    EVP_PKEY_free (pkey);
    return rv;
}

/*  PKCS#11 2.40 §5.12.  */
CK_RV
C_VerifyInit (CK_SESSION_HANDLE handle, CK_MECHANISM_PTR mech, CK_OBJECT_HANDLE key_handle)
{
    CK_RV rv;
    if (cs_secret_mech (mech))
        rv = cs_secret_init (handle, CS_OP_VERIFY, CKF_VERIFY, mech, key_handle);
    else
        rv = cs_keyop_init (handle, CS_OP_VERIFY, CKF_VERIFY, mech, key_handle, cs_sigop_create, cs_sigop_free);
    /*  A new operation: a signature kept by an earlier, ended
     *  C_VerifySignatureInit (below) must not be taken for this one's.  */
    if (rv == CKR_OK)
        rv = cs_session_verify_sig_put (handle, NULL, 0);
    return rv;
}

/*  C_Verify (final false) and C_VerifyFinal (final true): both end the
 *  operation whatever the outcome (PKCS#11 2.40 §5.12).  */
static CK_RV
s_verify_finish (CK_SESSION_HANDLE handle, const uint8_t *data, size_t len, bool final,
                 const uint8_t *sig, size_t sig_len)
{
    uint8_t message [CS_SIGOP_MAX_MESSAGE];
    size_t message_len = 0;
    cs_session_t *session;
    cs_sigop_t *op;
    CK_RV rv;
    return_val_if_fail ((data || !len) && (sig || !sig_len), CKR_ARGUMENTS_BAD);
    CS_BEGIN_SESSION_CALL (rv, handle, &session);
    if (!(op = cs_session_op_take_inlock (session, CS_OP_VERIFY)))
        rv = CKR_OPERATION_NOT_INITIALIZED;
    else
    if (!final && op->updated)
        rv = CKR_OPERATION_ACTIVE;
    else
        rv = cs_sigop_message (op, data, len, final, message, &message_len);
    CS_END_CALL ();
    if (rv == CKR_OK)
        rv = s_verify (op, message, message_len, sig, sig_len);
    cs_sigop_free (op);
    return rv;
}

CK_RV
C_Verify (CK_SESSION_HANDLE handle, CK_BYTE_PTR data, CK_ULONG len, CK_BYTE_PTR sig, CK_ULONG sig_len)
{
    if (cs_secret_active (handle, CS_OP_VERIFY))
        return cs_secret_verify (handle, false, data, len, sig, sig_len);
    return s_verify_finish (handle, data, len, false, sig, sig_len);
}

CK_RV
C_VerifyUpdate (CK_SESSION_HANDLE handle, CK_BYTE_PTR data, CK_ULONG len)
{
    if (cs_secret_active (handle, CS_OP_VERIFY))
        return cs_secret_update (handle, CS_OP_VERIFY, data, len, NULL);
    return cs_sigop_session_update (handle, CS_OP_VERIFY, data, len);
}

CK_RV
C_VerifyFinal (CK_SESSION_HANDLE handle, CK_BYTE_PTR sig, CK_ULONG sig_len)
{
    if (cs_secret_active (handle, CS_OP_VERIFY))
        return cs_secret_verify (handle, true, NULL, 0, sig, sig_len);
    return s_verify_finish (handle, NULL, 0, true, sig, sig_len);
}


/*  ---- signature first (PKCS#11 3.2) ------------------------------------ */

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
