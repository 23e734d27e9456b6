/*  decrypt.c — decryption (PKCS#11 2.40 §5.9): C_DecryptInit, C_Decrypt,
 *  C_DecryptUpdate, C_DecryptFinal.  CKM_RSA_PKCS and CKM_RSA_PKCS_OAEP: one
 *  DecryptJob per call; a secret key's operation goes to secret.h (multi-part
 *  streams: secret_stream.c).
 *
 *  A length query answers k (the modulus length, an upper bound) locally.
 *  The plaintext length is only known after the round trip, so a result
 *  that does not fit the caller's buffer is kept (wiped on free) and handed
 *  out by the retry: CKR_BUFFER_TOO_SMALL keeps the operation (PKCS#11 2.40
 *  §5.9) without decrypting twice.
 */
#include <stdlib.h>
#include <string.h>
#include <openssl/crypto.h>
#include "cs_wire.h"
#include "log.h"
#include "mechanism.h"
#include "guard.h"
#include "runner.h"
#include "object.h"
#include "keyop.h"
#include "async.h"
#include "secret.h"
#include "session.h"

typedef struct {
    cs_key_t *key;
    const cs_mech_row_t *mech;
    cs_mech_params_t params;    /* OAEP */
    uint8_t *plain;             /* result kept after CKR_BUFFER_TOO_SMALL */
    size_t plain_len;
} cs_decrypt_op_t;

static void
s_decrypt_op_free (void *op)
{
    cs_decrypt_op_t *self = op;
    if (!self)
        return;
    cs_key_unref (&self->key);
    cs_mech_params_clear (&self->params);
    if (self->plain)
        OPENSSL_cleanse (self->plain, self->plain_len);
    free (self->plain);
    free (self);
}

static CK_RV
s_decrypt_op_new (const CK_MECHANISM *mech, cs_key_t *key, CK_FLAGS want, void **op_p)
{
    CK_RV rv;
    const cs_mech_row_t *entry = cs_mech_row (mech->mechanism);
    cs_decrypt_op_t *self;
    if (!entry || !(entry->flags & want))
        return CKR_MECHANISM_INVALID;
    if (!(self = calloc (1, sizeof *self)))
        return CKR_HOST_MEMORY;
    self->key = cs_key_ref (key);
    self->mech = entry;
    rv = cs_mech_check (entry, mech, key->key_type, key->modulus_len, &self->params);
    if (rv == CKR_OK)
        *op_p = self;
    else
        s_decrypt_op_free (self);
    return rv;
}

/*  Runs one DecryptJob; on CKR_OK the op holds the plaintext.  In an
 *  async session (`async`: its slot reserved, `out` holds k bytes) the job
 *  leaves and CKR_PENDING comes back: C_AsyncComplete writes the plaintext
 *  into out (async.h).  Without the mutex.  */
static CK_RV
s_decrypt_job (CK_SESSION_HANDLE handle, bool async, CK_BYTE_PTR out, cs_decrypt_op_t *op, const uint8_t *data,
               size_t len, const uint8_t *context, size_t context_len)
{
    CK_RV rv;
    Cs__Reply *reply = NULL;
    Cs__Mechanism mech = CS__MECHANISM__INIT;
    Cs__DecryptJob decrypt = CS__DECRYPT_JOB__INIT;
    Cs__Job job = CS__JOB__INIT;
    const Cs__Result *result;
    cs_keyop_job_mechanism (op->mech->wire, &op->params, &mech);
    cs_keyop_job_key (op->key, &decrypt.key_id, &decrypt.key_pkcs8);
    decrypt.mechanism = &mech;
    decrypt.data.data = (uint8_t *) data;
    decrypt.data.len = len;
    decrypt.context_ticket = (ProtobufCBinaryData) { context_len, (uint8_t *) context };
    job.kind_case = CS__JOB__KIND_DECRYPT;
    job.decrypt = &decrypt;
    if (async)
        return cs_async_submit (handle, CS_ASYNC_DECRYPT, &job, out, op->key->modulus_len);
    if ((rv = cs_runner_run_job (&job, true, &reply)) != CKR_OK)
        goto out;
    result = reply->results [0];
    if (result->kind_case != CS__RESULT__KIND_DATA || result->data.len > op->key->modulus_len) {
        cs_log_error ("the broker returned a malformed decryption result");
        rv = CKR_DEVICE_ERROR;
        goto out;
    }
    if (!(op->plain = malloc (result->data.len + 1))) {
        rv = CKR_HOST_MEMORY;
        goto out;
    }
    memcpy (op->plain, result->data.data, result->data.len);
    op->plain_len = result->data.len;
    OPENSSL_cleanse (result->data.data, result->data.len);
out:
    if (reply)
        cs__reply__free_unpacked (reply, NULL);
    return rv;
}

/*  Hands the kept plaintext to the caller (PKCS#11 length rules).  */
static CK_RV
s_deliver (const cs_decrypt_op_t *op, CK_BYTE_PTR out, CK_ULONG_PTR out_len_p)
{
    if (*out_len_p < op->plain_len) {
        *out_len_p = op->plain_len;
        return CKR_BUFFER_TOO_SMALL;
    }
    if (op->plain_len)
        memcpy (out, op->plain, op->plain_len);
    *out_len_p = op->plain_len;
    return CKR_OK;
}

/*  PKCS#11 2.40 §5.9.  */
CK_RV
C_DecryptInit (CK_SESSION_HANDLE handle, CK_MECHANISM_PTR mech, CK_OBJECT_HANDLE key_handle)
{
    if (cs_secret_mech (mech))
        return cs_secret_init (handle, CS_OP_DECRYPT, CKF_DECRYPT, mech, key_handle);
    return cs_keyop_init (handle, CS_OP_DECRYPT, CKF_DECRYPT, mech, key_handle, s_decrypt_op_new,
                          s_decrypt_op_free);
}

CK_RV
C_Decrypt (CK_SESSION_HANDLE handle, CK_BYTE_PTR data, CK_ULONG len,
           CK_BYTE_PTR out, CK_ULONG_PTR out_len_p)
{
    cs_session_t *session;
    cs_decrypt_op_t *op;
    uint8_t context [CS_CONTEXT_TICKET_MAX];
    size_t context_len = 0;
    bool async = false;
    CK_RV rv;
    if (cs_secret_active (handle, CS_OP_DECRYPT))
        return cs_secret_finish (handle, CS_OP_DECRYPT, false, data, len, out, out_len_p);
    CS_BEGIN_OP_CALL (rv, handle, CS_OP_DECRYPT, out_len_p != NULL && (data || !len),
                          &session, (void **) &op);
    if (!out && !op->plain) {
        *out_len_p = op->key->modulus_len;      /* upper bound, locally */
        CS_END_CALL ();
        return CKR_OK;
    }
    op = cs_session_op_take_inlock (session, CS_OP_DECRYPT);
    if (!op->plain)         /* CKA_ALWAYS_AUTHENTICATE: the context login's ticket, once */
        rv = cs_session_context_take_inlock (session, CS_OP_DECRYPT, context, &context_len);
    /*  A 3.2 async session: with room for any plaintext (k bytes; a smaller
     *  buffer is answered at once, never CKR_PENDING: 3.2 C_AsyncComplete).  */
    if (rv == CKR_OK && !op->plain && out && *out_len_p >= op->key->modulus_len && len == op->key->modulus_len)
        async = cs_async_reserve_inlock (session, CS_ASYNC_DECRYPT, &rv);
    CS_END_CALL ();
    if (rv == CKR_OK && !op->plain)
        rv = len == op->key->modulus_len ? s_decrypt_job (handle, async, out, op, data, len, context, context_len)
                                         : CKR_ENCRYPTED_DATA_LEN_RANGE;
    OPENSSL_cleanse (context, sizeof context);
    if (async) {                    /* CKR_PENDING, or the job never left: either way it ends here */
        s_decrypt_op_free (op);
        return rv;
    }
    if (rv == CKR_OK && !out) {
        *out_len_p = op->plain_len;
        rv = CKR_BUFFER_TOO_SMALL;  /* internal marker: keep the op */
    }
    else
    if (rv == CKR_OK)
        rv = s_deliver (op, out, out_len_p);
    cs_lock ();
    if (rv == CKR_BUFFER_TOO_SMALL && (session = cs_session_lookup_inlock (handle))
    &&  cs_session_op_start_inlock (session, CS_OP_DECRYPT, op, s_decrypt_op_free) == CKR_OK)
        op = NULL;
    cs_unlock ();
    s_decrypt_op_free (op);
    return rv == CKR_BUFFER_TOO_SMALL && !out ? CKR_OK : rv;
}

CK_RV
C_DecryptUpdate (CK_SESSION_HANDLE handle, CK_BYTE_PTR data, CK_ULONG len, CK_BYTE_PTR out, CK_ULONG_PTR out_len_p)
{
    return cs_secret_multipart_update (handle, CS_OP_DECRYPT, data, len, out, out_len_p);
}

CK_RV
C_DecryptFinal (CK_SESSION_HANDLE handle, CK_BYTE_PTR out, CK_ULONG_PTR out_len_p)
{
    return cs_secret_multipart_final (handle, CS_OP_DECRYPT, out, out_len_p);
}
