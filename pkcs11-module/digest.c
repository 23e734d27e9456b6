/*  digest.c — C_DigestInit, C_Digest, C_DigestUpdate, C_DigestKey,
 *  C_DigestFinal (PKCS#11 2.40 §5.10), run in the module with OpenSSL 3, or
 *  as the vendor modexp mechanism (modexp.h) on the broker.  The random
 *  functions are random.c.
 */
#include <stdlib.h>
#include <string.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include "log.h"
#include "mechanism.h"
#include "modexp.h"
#include "guard.h"
#include "login.h"
#include "object.h"
#include "session.h"

/*  ---- digest -------------------------------------------------------- */

/*  A digest, or a vendor raw modexp (modexp.h) with its buffered input.  */
typedef struct {
    EVP_MD_CTX *ctx;
    bool updated;
    cs_modexp_op_t *modexp;
    uint8_t *buf;               /* modexp: C_DigestUpdate's data */
    size_t buf_len;
} cs_digest_op_t;

#define S_MODEXP_MAX_BUFFER (16 * 1024 * 1024)      /* bytes of C_DigestUpdate input */

static void
s_digest_op_free (void *op)
{
    cs_digest_op_t *self = op;
    if (self) {
        EVP_MD_CTX_free (self->ctx);
        cs_modexp_op_free (self->modexp);
        if (self->buf)
            OPENSSL_cleanse (self->buf, self->buf_len);
        free (self->buf);
    }
    free (self);
}

/*  C_DigestInit of a vendor modexp mechanism: a CKU_USER login (the
 *  boards' time is the tenant's, as for C_SignInit), then the parameter.  */
static CK_RV
s_modexp_init_inlock (const CK_MECHANISM *mech, cs_digest_op_t **op_p)
{
    if (!cs_login_user_logged_in_inlock ())
        return CKR_USER_NOT_LOGGED_IN;
    if (!(*op_p = calloc (1, sizeof **op_p)))
        return CKR_HOST_MEMORY;
    return cs_modexp_op_new (mech, &(*op_p)->modexp);
}

/*  Under the mutex, C_Digest / C_DigestFinal of a modexp: the output length
 *  from the parameter into *need_p.  A length query and CKR_BUFFER_TOO_SMALL
 *  keep the operation (*taken_p NULL); otherwise the operation is taken out
 *  of the session into *taken_p (caller runs the jobs without the mutex and
 *  frees it), with *data_p, *len_p its buffered input when `final`.  */
static CK_RV
s_modexp_take_inlock (cs_session_t *session, cs_digest_op_t *op, const uint8_t **data_p, size_t *len_p,
                      bool final, CK_BYTE_PTR out, CK_ULONG_PTR out_len_p, size_t *need_p,
                      cs_digest_op_t **taken_p)
{
    CK_RV rv;
    *need_p = 0;
    *taken_p = NULL;
    if (final) {
        *data_p = op->buf;
        *len_p = op->buf_len;
    }
    rv = !final && op->updated ? CKR_OPERATION_ACTIVE : cs_modexp_out_len (op->modexp, *len_p, need_p);
    if (rv == CKR_OK && (!out || *out_len_p < *need_p)) {
        *out_len_p = *need_p;
        return out ? CKR_BUFFER_TOO_SMALL : CKR_OK;
    }
    *taken_p = cs_session_op_take_inlock (session, CS_OP_DIGEST);
    return rv;
}

CK_RV
C_DigestInit (CK_SESSION_HANDLE handle, CK_MECHANISM_PTR mech)
{
    cs_session_t *session;
    cs_digest_op_t *op = NULL;
    const cs_mech_row_t *entry;
    CK_RV rv;
    return_val_if_fail (mech != NULL, CKR_ARGUMENTS_BAD);
    entry = cs_mech_row (mech->mechanism);
    CS_BEGIN_SESSION_CALL (rv, handle, &session);
    if (cs_session_op_inlock (session, CS_OP_DIGEST))
        rv = CKR_OPERATION_ACTIVE;
    else
    if (cs_modexp_mechanism (mech->mechanism)) {
        if ((rv = s_modexp_init_inlock (mech, &op)) == CKR_OK
        &&  (rv = cs_session_op_start_inlock (session, CS_OP_DIGEST, op, s_digest_op_free)) == CKR_OK)
            op = NULL;
    }
    else
    if (!entry || !(entry->flags & CKF_DIGEST))
        rv = CKR_MECHANISM_INVALID;
    else
    if (mech->ulParameterLen)
        rv = CKR_MECHANISM_PARAM_INVALID;
    else
    if (!(op = calloc (1, sizeof *op)) || !(op->ctx = EVP_MD_CTX_new ())
    ||  !EVP_DigestInit_ex (op->ctx, cs_mech_md (entry->hash), NULL))
        rv = CKR_HOST_MEMORY;
    else
    if ((rv = cs_session_op_start_inlock (session, CS_OP_DIGEST, op, s_digest_op_free)) == CKR_OK)
        op = NULL;
    CS_END_CALL ();
    s_digest_op_free (op);
    return rv;
}

/*  C_Digest (data given) and C_DigestFinal (final).  Length query and
 *  CKR_BUFFER_TOO_SMALL keep the operation (PKCS#11 2.40 §5.10).  */
static CK_RV
s_digest_finish (CK_SESSION_HANDLE handle, const uint8_t *data, size_t len, bool final,
                 CK_BYTE_PTR out, CK_ULONG_PTR out_len_p)
{
    cs_session_t *session;
    cs_digest_op_t *op;
    unsigned int out_len = 0;
    size_t need;
    CK_RV rv;
    CS_BEGIN_OP_CALL (rv, handle, CS_OP_DIGEST, out_len_p != NULL && (data || !len),
                          &session, (void **) &op);
    if (op->modexp) {
        cs_digest_op_t *taken;
        rv = s_modexp_take_inlock (session, op, &data, &len, final, out, out_len_p, &need, &taken);
        CS_END_CALL ();
        if (taken && rv == CKR_OK && (rv = cs_modexp_run (taken->modexp, data, len, out)) == CKR_OK)
            *out_len_p = need;
        s_digest_op_free (taken);
        return rv;
    }
    need = (size_t) EVP_MD_CTX_get_size (op->ctx);
    if (!out || *out_len_p < need) {
        rv = out ? CKR_BUFFER_TOO_SMALL : CKR_OK;
        *out_len_p = need;
        CS_END_CALL ();
        return rv;
    }
    op = cs_session_op_take_inlock (session, CS_OP_DIGEST);
    CS_END_CALL ();
    if (!final && op->updated)
        rv = CKR_OPERATION_ACTIVE;
    else
    if ((!final && !EVP_DigestUpdate (op->ctx, data, len)) || !EVP_DigestFinal_ex (op->ctx, out, &out_len))
        rv = CKR_FUNCTION_FAILED;
    else
        *out_len_p = out_len;
    s_digest_op_free (op);
    return rv;
}

CK_RV
C_Digest (CK_SESSION_HANDLE handle, CK_BYTE_PTR data, CK_ULONG len, CK_BYTE_PTR out, CK_ULONG_PTR out_len_p)
{
    return s_digest_finish (handle, data, len, false, out, out_len_p);
}

/*  Appends C_DigestUpdate's data to a modexp's input.  */
static CK_RV
s_modexp_buffer (cs_digest_op_t *op, const uint8_t *data, size_t len)
{
    if (len > S_MODEXP_MAX_BUFFER - op->buf_len)
        return CKR_DATA_LEN_RANGE;
    uint8_t *grown = malloc (op->buf_len + len + 1);
    if (!grown)
        return CKR_HOST_MEMORY;
    if (op->buf_len)
        memcpy (grown, op->buf, op->buf_len);
    if (len)
        memcpy (grown + op->buf_len, data, len);
    if (op->buf)
        OPENSSL_cleanse (op->buf, op->buf_len);
    free (op->buf);
    op->buf = grown;
    op->buf_len += len;
    op->updated = true;
    return CKR_OK;
}

CK_RV
C_DigestUpdate (CK_SESSION_HANDLE handle, CK_BYTE_PTR data, CK_ULONG len)
{
    cs_session_t *session;
    cs_digest_op_t *op;
    CK_RV rv;
    return_val_if_fail (data || !len, CKR_ARGUMENTS_BAD);
    CS_BEGIN_SESSION_CALL (rv, handle, &session);
    if (!(op = cs_session_op_inlock (session, CS_OP_DIGEST)))
        rv = CKR_OPERATION_NOT_INITIALIZED;
    else
    if (op->modexp) {
        rv = s_modexp_buffer (op, data, len);
        if (rv != CKR_OK)
            cs_session_op_end_inlock (session, CS_OP_DIGEST);
    }
    else
    if (!EVP_DigestUpdate (op->ctx, data, len)) {
        rv = CKR_FUNCTION_FAILED;
        cs_session_op_end_inlock (session, CS_OP_DIGEST);
    }
    else
        op->updated = true;
    CS_END_CALL ();
    return rv;
}

/*  PKCS#11 2.40 §5.10 C_DigestKey: digests the value of a secret key as the
 *  next part of the running digest (interleaved with C_DigestUpdate in any
 *  order).  Only secret keys whose value the module holds (C_DeriveKey's)
 *  have one to digest; public and private keys, and a vendor modexp
 *  operation, give CKR_KEY_INDIGESTIBLE.  A handle naming no visible
 *  object: CKR_KEY_HANDLE_INVALID.  As for C_DigestUpdate, an error ends
 *  the operation.  Also CKR_SESSION_HANDLE_INVALID,
 *  CKR_OPERATION_NOT_INITIALIZED, CKR_FUNCTION_FAILED.  */
CK_RV
C_DigestKey (CK_SESSION_HANDLE handle, CK_OBJECT_HANDLE key_handle)
{
    cs_session_t *session;
    cs_digest_op_t *op;
    cs_key_t *key = NULL;
    CK_OBJECT_CLASS klass = 0;
    CK_RV rv;
    CS_BEGIN_SESSION_CALL (rv, handle, &session);
    if (!(op = cs_session_op_inlock (session, CS_OP_DIGEST))) {
        CS_END_CALL ();
        return CKR_OPERATION_NOT_INITIALIZED;
    }
    if (!(key = cs_object_key_inlock (key_handle, &klass)))
        rv = CKR_KEY_HANDLE_INVALID;
    else
    if (op->modexp || klass != CKO_SECRET_KEY || !key->secret)
        rv = CKR_KEY_INDIGESTIBLE;
    else
    if (!EVP_DigestUpdate (op->ctx, key->secret, key->secret_len))
        rv = CKR_FUNCTION_FAILED;
    else
        op->updated = true;
    if (rv != CKR_OK)
        cs_session_op_end_inlock (session, CS_OP_DIGEST);
    CS_END_CALL ();
    cs_key_unref (&key);
    return rv;
}

CK_RV
C_DigestFinal (CK_SESSION_HANDLE handle, CK_BYTE_PTR out, CK_ULONG_PTR out_len_p)
{
    return s_digest_finish (handle, NULL, 0, true, out, out_len_p);
}
