/*  sign.c — C_SignInit, C_Sign, C_SignUpdate, C_SignFinal, and the shared
 *  signature state (sign.h).
 *
 *  The signature length is known from the key (RSA: k bytes, ECDSA: twice
 *  the field size), so a length query or a too-small buffer is answered
 *  locally, before any job is sent: one round trip per signature (docs/DESIGN.md
 *  §1).  The operation is detached from its session during the round trip,
 *  so no network I/O happens under the library mutex.
 */
#include <stdlib.h>
#include <string.h>
#include <openssl/crypto.h>
#include "secret.h"
#include "cs_wire.h"
#include "log.h"
#include "guard.h"
#include "runner.h"
#include "session.h"
#include "keyop.h"
#include "async.h"
#include "sign.h"

/*  ---- the signature state ------------------------------------------ */

void
cs_sigop_free (void *op)
{
    cs_sigop_t *self = op;
    if (!self)
        return;
    cs_key_unref (&self->key);
    cs_mech_params_clear (&self->params);
    EVP_MD_CTX_free (self->md_ctx);
    if (self->buf)
        OPENSSL_cleanse (self->buf, self->buf_len);
    free (self->buf);
    free (self);
}

CK_RV
cs_sigop_new (const CK_MECHANISM *mech, cs_key_t *key, CK_FLAGS want, cs_sigop_t **op_p)
{
    CK_RV rv;
    const cs_mech_row_t *entry = cs_mech_row (mech->mechanism);
    cs_sigop_t *self = NULL;
    if (!entry || !(entry->flags & want))
        return CKR_MECHANISM_INVALID;
    if (!(self = calloc (1, sizeof *self)))
        return CKR_HOST_MEMORY;
    self->key = cs_key_ref (key);
    self->mech = entry;
    if ((rv = cs_mech_check (entry, mech, key->key_type, key->modulus_len, &self->params)) != CKR_OK)
        goto out;
    if (entry->hash
    && (!(self->md_ctx = EVP_MD_CTX_new ())
    ||  !EVP_DigestInit_ex (self->md_ctx, cs_mech_md (entry->hash), NULL)))
        rv = CKR_HOST_MEMORY;
out:
    if (rv == CKR_OK)
        *op_p = self;
    else
        cs_sigop_free (self);
    return rv;
}

CK_RV
cs_sigop_create (const CK_MECHANISM *mech, cs_key_t *key, CK_FLAGS want, void **op_p)
{
    return cs_sigop_new (mech, key, want, (cs_sigop_t **) op_p);
}

CK_RV
cs_sigop_update (cs_sigop_t *self, const uint8_t *data, size_t len)
{
    uint8_t *buf;
    self->updated = true;
    if (self->md_ctx)
        return EVP_DigestUpdate (self->md_ctx, data, len) ? CKR_OK : CKR_FUNCTION_FAILED;
    if (self->buf_len + len > CS_WIRE_MAX_DATA)
        return CKR_DATA_LEN_RANGE;
    if (!len)
        return CKR_OK;
    if (!(buf = realloc (self->buf, self->buf_len + len)))
        return CKR_HOST_MEMORY;
    memcpy (buf + self->buf_len, data, len);
    self->buf = buf;
    self->buf_len += len;
    return CKR_OK;
}

size_t
cs_sigop_sig_len (const cs_sigop_t *op)
{
    return op->mech->output == CS_MECH_OUT_KEY ? cs_key_signature_len (op->key)
         : cs_mech_output_len (op->mech, op->key->modulus_len, op->key->field_len, 0);
}

/*  Checks raw input against the mechanism's input rule (cs_mech.h).  */
static CK_RV
s_raw_len_ok (const cs_sigop_t *self, size_t len)
{
    const EVP_MD *md = self->params.hash ? cs_mech_md (self->params.hash) : NULL;
    if (self->mech->input == CS_MECH_IN_ANY || self->mech->input == CS_MECH_IN_NONE)
        return CKR_MECHANISM_INVALID;
    return cs_mech_input_check (self->mech, false, len, self->key->modulus_len,
                                md ? (size_t) EVP_MD_get_size (md) : 0);
}

CK_RV
cs_sigop_message (cs_sigop_t *self, const uint8_t *data, size_t len, bool final,
                  uint8_t *out, size_t *out_len)
{
    uint8_t digest [EVP_MAX_MD_SIZE];
    unsigned int digest_len = 0;
    CK_RV rv;
    if (!self->md_ctx) {
        if (final) {
            data = self->buf;
            len = self->buf_len;
        }
        if ((rv = s_raw_len_ok (self, len)) != CKR_OK)
            return rv;
        if (self->mech->wire == CKM_RSA_X_509) {    /* a k-byte integer (PKCS#11 2.40 §2.1.10) */
            size_t k = self->key->modulus_len;
            memset (out, 0, k - len);
            if (len)
                memcpy (out + k - len, data, len);
            *out_len = k;
            return CKR_OK;
        }
        if (len)
            memcpy (out, data, len);
        *out_len = len;
        return CKR_OK;
    }
    if ((!final && !EVP_DigestUpdate (self->md_ctx, data, len))
    ||  !EVP_DigestFinal_ex (self->md_ctx, digest, &digest_len))
        return CKR_FUNCTION_FAILED;
    if (self->mech->wire == CKM_RSA_PKCS) {
        *out_len = cs_mech_digest_info (self->mech->hash, digest, digest_len, out, CS_SIGOP_MAX_MESSAGE);
        return *out_len && *out_len + 11 <= self->key->modulus_len ? CKR_OK : CKR_KEY_SIZE_RANGE;
    }
    memcpy (out, digest, digest_len);
    *out_len = digest_len;
    return CKR_OK;
}

/*  ---- the job ------------------------------------------------------- */

/*  Runs one SignJob for `message`; copies the signature into sig (which
 *  holds `max` bytes).  In an async session (`async`: its slot reserved)
 *  the job leaves and CKR_PENDING comes back at once: C_AsyncComplete
 *  fills sig (async.h).  Without the mutex.  */
static CK_RV
s_sign_job (CK_SESSION_HANDLE handle, bool async, const cs_sigop_t *op, const uint8_t *message, size_t len,
            const uint8_t *context, size_t context_len, CK_BYTE_PTR sig, CK_ULONG_PTR sig_len_p, size_t max)
{
    CK_RV rv;
    Cs__Reply *reply = NULL;
    Cs__Mechanism mech = CS__MECHANISM__INIT;
    Cs__SignJob sign = CS__SIGN_JOB__INIT;
    Cs__Job job = CS__JOB__INIT;
    const Cs__Result *result;
    cs_keyop_job_mechanism (op->mech->wire, &op->params, &mech);
    cs_keyop_job_key (op->key, &sign.key_id, &sign.key_pkcs8);
    sign.mechanism = &mech;
    sign.data.data = (uint8_t *) message;
    sign.data.len = len;
    sign.context_ticket = (ProtobufCBinaryData) { context_len, (uint8_t *) context };
    job.kind_case = CS__JOB__KIND_SIGN;
    job.sign = &sign;
    if (async)
        return cs_async_submit (handle, CS_ASYNC_SIGN, &job, sig, max);
    if ((rv = cs_runner_run_job (&job, true, &reply)) != CKR_OK)
        goto out;
    result = reply->results [0];
    if (result->kind_case != CS__RESULT__KIND_DATA || result->data.len == 0 || result->data.len > max) {
        cs_log_error ("the broker returned a signature of %zu bytes (expected %zu)",
                      result->kind_case == CS__RESULT__KIND_DATA ? result->data.len : 0, max);
        rv = CKR_DEVICE_ERROR;
        goto out;
    }
    memcpy (sig, result->data.data, result->data.len);
    *sig_len_p = result->data.len;
out:
    if (rv != CKR_OK && reply)
        cs_log_debug ("sign job failed: %s", cs_rv_name (rv));
    if (reply)
        cs__reply__free_unpacked (reply, NULL);
    return rv;
}

/*  C_Sign (final false) and C_SignFinal (final true), and C_SignRecover
 *  (kind CS_OP_SIGN_RECOVER).  PKCS#11 2.40 §5.11, §5.13: a length query or
 *  CKR_BUFFER_TOO_SMALL keeps the operation; anything else ends it.  */
CK_RV
cs_sigop_sign_finish (CK_SESSION_HANDLE handle, cs_op_kind_t kind, const uint8_t *data, size_t len, bool final,
                      CK_BYTE_PTR sig, CK_ULONG_PTR sig_len_p)
{
    uint8_t message [CS_SIGOP_MAX_MESSAGE], context [CS_CONTEXT_TICKET_MAX];
    size_t message_len = 0, need, context_len = 0;
    cs_session_t *session;
    cs_sigop_t *op = NULL;
    bool async = false;
    CK_RV rv;
    CS_BEGIN_OP_CALL (rv, handle, kind, sig_len_p != NULL && (data || !len), &session, (void **) &op);
    /*  The output-size rule of the mechanism's row (cs_mech.h), from the key.  */
    need = cs_sigop_sig_len (op);
    if (!sig || *sig_len_p < need) {
        rv = sig ? CKR_BUFFER_TOO_SMALL : CKR_OK;
        *sig_len_p = need;
        CS_END_CALL ();
        return rv;
    }
    op = cs_session_op_take_inlock (session, kind);
    if (!final && op->updated)
        rv = CKR_OPERATION_ACTIVE;      /* C_Sign cannot finish a multi-part signature */
    else
    if ((rv = cs_session_context_take_inlock (session, kind, context, &context_len)) == CKR_OK)
        rv = cs_sigop_message (op, data, len, final, message, &message_len);    /* CKA_ALWAYS_AUTHENTICATE */
    if (rv == CKR_OK && kind == CS_OP_SIGN && !final)          /* C_Sign in a 3.2 async session */
        async = cs_async_reserve_inlock (session, CS_ASYNC_SIGN, &rv);
    CS_END_CALL ();
    if (rv == CKR_OK)
        rv = s_sign_job (handle, async, op, message, message_len, context, context_len, sig, sig_len_p, need);
    OPENSSL_cleanse (message, sizeof message);
    OPENSSL_cleanse (context, sizeof context);
    cs_sigop_free (op);
    return rv;
}

/*  ---- entry points ------------------------------------------------ */

/*  PKCS#11 2.40 §5.11.  */
CK_RV
C_SignInit (CK_SESSION_HANDLE handle, CK_MECHANISM_PTR mech, CK_OBJECT_HANDLE key_handle)
{
    if (cs_secret_mech (mech))
        return cs_secret_init (handle, CS_OP_SIGN, CKF_SIGN, mech, key_handle);
    return cs_keyop_init (handle, CS_OP_SIGN, CKF_SIGN, mech, key_handle, cs_sigop_create, cs_sigop_free);
}

CK_RV
C_Sign (CK_SESSION_HANDLE handle, CK_BYTE_PTR data, CK_ULONG len,
        CK_BYTE_PTR sig, CK_ULONG_PTR sig_len_p)
{
    if (cs_secret_active (handle, CS_OP_SIGN))
        return cs_secret_finish (handle, CS_OP_SIGN, false, data, len, sig, sig_len_p);
    return cs_sigop_sign_finish (handle, CS_OP_SIGN, data, len, false, sig, sig_len_p);
}

CK_RV
cs_sigop_session_update (CK_SESSION_HANDLE handle, cs_op_kind_t kind, const uint8_t *data, size_t len)
{
    cs_session_t *session;
    cs_sigop_t *op;
    CK_RV rv;
    return_val_if_fail (data || !len, CKR_ARGUMENTS_BAD);
    CS_BEGIN_SESSION_CALL (rv, handle, &session);
    if (!(op = cs_session_op_inlock (session, kind)))
        rv = CKR_OPERATION_NOT_INITIALIZED;
    else
    if ((rv = cs_sigop_update (op, data, len)) != CKR_OK)
        cs_session_op_end_inlock (session, kind);
    CS_END_CALL ();
    return rv;
}

CK_RV
C_SignUpdate (CK_SESSION_HANDLE handle, CK_BYTE_PTR data, CK_ULONG len)
{
    if (cs_secret_active (handle, CS_OP_SIGN))
        return cs_secret_update (handle, CS_OP_SIGN, data, len, NULL);
    return cs_sigop_session_update (handle, CS_OP_SIGN, data, len);
}

CK_RV
C_SignFinal (CK_SESSION_HANDLE handle, CK_BYTE_PTR sig, CK_ULONG_PTR sig_len_p)
{
    if (cs_secret_active (handle, CS_OP_SIGN))
        return cs_secret_finish (handle, CS_OP_SIGN, true, NULL, 0, sig, sig_len_p);
    return cs_sigop_sign_finish (handle, CS_OP_SIGN, NULL, 0, true, sig, sig_len_p);
}
