/*  secret.c — secret keys and symmetric mechanisms (secret.h).  */
#include <stdlib.h>
#include <string.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>
#include "attrs.h"
#include "cs_mech.h"
#include "cs_secmem.h"
#include "keyop.h"
#include "log.h"
#include "guard.h"
#include "login.h"
#include "runner.h"
#include "object.h"
#include "secret.h"
#include "secret_int.h"
#include "secret_token.h"
#include "session.h"

void
cs_secret_op_free (void *arg)
{
    cs_secret_op_t *self = arg;
    if (!self)
        return;
    cs_key_unref (&self->key);
    free (self->aad);
    cs_secmem_free (self->in, self->in_cap);
    cs_secmem_free (self->out, self->out_cap);
    OPENSSL_cleanse (self, sizeof *self);
    free (self);
}

bool
cs_secret_mech (const CK_MECHANISM *mech)
{
    const cs_mech_row_t *row = mech ? cs_mech_row (mech->mechanism) : NULL;
    return row && cs_mech_secret_key_type (row->key_type) && (row->flags & CKF_HW);
}

/*  The mechanism's parameter (PKCS#11 2.40 curr. mech. §2.10.3, §2.10.5,
 *  AES-CTR, CK_MAC_GENERAL_PARAMS; 3.0 AES key wrap) as the table's
 *  parameter kind says.  */
static CK_RV
s_params (cs_secret_op_t *self, const CK_MECHANISM *mech)
{
    size_t block = cs_mech_block_bytes (self->row);
    self->mac_len = cs_mech_mac_len (self->row);
    if (self->row->param == CS_MECH_PARAM_IV) {
        if (!mech->pParameter || mech->ulParameterLen != block)
            return CKR_MECHANISM_PARAM_INVALID;
        memcpy (self->iv, mech->pParameter, block);
        self->iv_bytes = block;
        return CKR_OK;
    }
    if (self->row->param == CS_MECH_PARAM_CTR) {
        const CK_AES_CTR_PARAMS *ctr = mech->pParameter;
        if (!ctr || mech->ulParameterLen != sizeof *ctr || ctr->ulCounterBits < 1 || ctr->ulCounterBits > 128)
            return CKR_MECHANISM_PARAM_INVALID;
        memcpy (self->iv, ctr->cb, CS_MECH_AES_BLOCK);
        self->iv_bytes = CS_MECH_AES_BLOCK;
        self->counter_bits = ctr->ulCounterBits;
        return CKR_OK;
    }
    if (self->row->param == CS_MECH_PARAM_MAC_LEN) {
        CK_ULONG want;
        if (!mech->pParameter || mech->ulParameterLen != sizeof (CK_ULONG))
            return CKR_MECHANISM_PARAM_INVALID;
        memcpy (&want, mech->pParameter, sizeof want);
        if (want < 1 || want > self->mac_len)
            return CKR_MECHANISM_PARAM_INVALID;
        self->mac_len = want;
        return CKR_OK;
    }
    if (self->row->param == CS_MECH_PARAM_WRAP_IV) {
        size_t len = self->row->input == CS_MECH_IN_KW ? 8 : 4;
        if (mech->ulParameterLen == 0)
            return CKR_OK;                      /* the RFC's default IV */
        if (!mech->pParameter || mech->ulParameterLen != len)
            return CKR_MECHANISM_PARAM_INVALID;
        memcpy (self->iv, mech->pParameter, len);
        self->iv_bytes = len;
        return CKR_OK;
    }
    if (self->row->param == CS_MECH_PARAM_GCM) {
        const CK_GCM_PARAMS *gcm = mech->pParameter;
        if (!gcm || mech->ulParameterLen != sizeof *gcm || !gcm->pIv || gcm->ulIvLen < 1 || gcm->ulIvLen > 256
        ||  gcm->ulTagBits % 8 || gcm->ulTagBits < 96 || gcm->ulTagBits > 128
        ||  gcm->ulAADLen > CS_MECH_SYM_MAX_DATA || (gcm->ulAADLen && !gcm->pAAD))
            return CKR_MECHANISM_PARAM_INVALID;
        memcpy (self->iv, gcm->pIv, gcm->ulIvLen);
        self->iv_bytes = gcm->ulIvLen;
        self->tag_length_bits = gcm->ulTagBits;
        if (gcm->ulAADLen) {
            if (!(self->aad = malloc (gcm->ulAADLen)))
                return CKR_HOST_MEMORY;
            memcpy (self->aad, gcm->pAAD, gcm->ulAADLen);
            self->aad_bytes = gcm->ulAADLen;
        }
        return CKR_OK;
    }
    return mech->ulParameterLen ? CKR_MECHANISM_PARAM_INVALID : CKR_OK;
}

/*  The op of `mech` with `key` (type, size, parameter); the caller checked
 *  the login (cs_object_login_check_inlock).  */
static CK_RV
s_op_make (const CK_MECHANISM *mech, cs_key_t *key, CK_FLAGS want, cs_secret_op_t **op_p)
{
    CK_RV rv;
    cs_secret_op_t *self;
    const cs_mech_row_t *row = cs_mech_row (mech->mechanism);
    if (!row || !(row->flags & want))
        return CKR_MECHANISM_INVALID;
    if ((!key->secret && !key->ref) || key->key_type != row->key_type)   /* value, or a token key's ref */
        return CKR_KEY_TYPE_INCONSISTENT;
    if (key->secret_len < row->min_bits || key->secret_len > row->max_bits)
        return CKR_KEY_SIZE_RANGE;
    if (!(self = calloc (1, sizeof *self)))
        return CKR_HOST_MEMORY;
    self->key = cs_key_ref (key);
    self->row = row;
    self->operation = want & CKF_ENCRYPT ? CS_SECRET_ENCRYPT : want & CKF_DECRYPT ? CS_SECRET_DECRYPT : CS_SECRET_SIGN;
    rv = s_params (self, mech);
    if (rv == CKR_OK)
        *op_p = self;
    else
        cs_secret_op_free (self);
    return rv;
}

static CK_RV
s_op_new_inlock (const CK_MECHANISM *mech, cs_key_t *key, CK_FLAGS want, void **op_p)
{
    const cs_mech_row_t *row = cs_mech_row (mech->mechanism);
    if (!row || !(row->flags & want))
        return CKR_MECHANISM_INVALID;
    return s_op_make (mech, key, want, (cs_secret_op_t **) op_p);
}

CK_RV
cs_secret_init (CK_SESSION_HANDLE handle, cs_op_kind_t kind, CK_FLAGS want, const CK_MECHANISM *mech,
                CK_OBJECT_HANDLE key)
{
    return cs_keyop_init (handle, kind, want, mech, key, s_op_new_inlock, cs_secret_op_free);
}

bool
cs_secret_active (CK_SESSION_HANDLE handle, cs_op_kind_t kind)
{
    cs_session_t *session;
    bool active = false;
    if (cs_guard_check () != CKR_OK)
        return false;
    cs_lock ();
    if (cs_session_get_inlock (handle, &session) == CKR_OK)
        active = cs_session_op_free_fn_inlock (session, kind) == cs_secret_op_free;
    cs_unlock ();
    return active;
}

/*  Appends data to the op's buffer (locked memory, grown by doubling up to
 *  CS_MECH_SYM_MAX_DATA bytes; the old block is wiped).  */
CK_RV
cs_secret_op_buffer (cs_secret_op_t *op, const CK_BYTE *data, CK_ULONG len)
{
    if (len > CS_MECH_SYM_MAX_DATA - op->in_len)
        return CKR_DATA_LEN_RANGE;
    if (op->in_len + len > op->in_cap || !op->in) {
        size_t cap = op->in_cap ? op->in_cap : 256;
        while (cap < op->in_len + len)
            cap *= 2;
        if (cap > CS_MECH_SYM_MAX_DATA)
            cap = CS_MECH_SYM_MAX_DATA;
        uint8_t *grown = cs_secmem_alloc (cap);
        if (!grown)
            return CKR_HOST_MEMORY;
        if (op->in_len)
            memcpy (grown, op->in, op->in_len);
        cs_secmem_free (op->in, op->in_cap);
        op->in = grown;
        op->in_cap = cap;
    }
    if (len)
        memcpy (op->in + op->in_len, data, len);
    op->in_len += len;
    return CKR_OK;
}

CK_RV
cs_secret_op_append_inlock (cs_session_t *session, cs_op_kind_t kind, cs_secret_op_t *op,
                            const CK_BYTE *data, CK_ULONG len, CK_ULONG_PTR out_len_p)
{
    CK_RV rv;
    if (op->single || op->has_out)
        return CKR_OPERATION_ACTIVE;            /* a single-part call is under way */
    if ((rv = cs_secret_op_buffer (op, data, len)) != CKR_OK) {
        cs_session_op_end_inlock (session, kind);
        return rv;
    }
    op->updated = true;
    if (out_len_p)
        *out_len_p = 0;
    return CKR_OK;
}

CK_RV
cs_secret_update (CK_SESSION_HANDLE handle, cs_op_kind_t kind, const CK_BYTE *data, CK_ULONG len,
                  CK_ULONG_PTR out_len_p)
{
    cs_session_t *session;
    cs_secret_op_t *op;
    CK_RV rv;
    CS_BEGIN_OP_CALL (rv, handle, kind, data || !len, &session, (void **) &op);
    rv = cs_secret_op_append_inlock (session, kind, op, data, len, out_len_p);
    CS_END_CALL ();
    return rv;
}

/*  Runs the op's SymJob on its buffered input; on CKR_OK the op holds the
 *  result.  Without the mutex.  */
CK_RV
cs_secret_op_run (cs_secret_op_t *op)
{
    CK_RV rv;
    Cs__Reply *reply = NULL;
    Cs__SymJob sym = CS__SYM_JOB__INIT;
    Cs__Job job = CS__JOB__INIT;
    const Cs__Result *result;
    size_t max = op->in_len + CS_MECH_SYM_OUT_EXTRA;
    sym.mechanism = op->row->wire;              /* a _GENERAL MAC travels as its full MAC */
    sym.operation = (uint64_t) op->operation;
    if (op->key->secret)
        sym.key_value = (ProtobufCBinaryData) { op->key->secret_len, op->key->secret };
    else        /* a token secret key: the broker holds the value (secret_token.h) */
        sym.key_id.data = (uint8_t *) cs_key_job_id (op->key, &sym.key_id.len);
    sym.iv.data = op->iv;
    sym.iv.len = op->iv_bytes;
    sym.aad.data = op->aad;
    sym.aad.len = op->aad_bytes;
    sym.tag_length_bits = (uint32_t) op->tag_length_bits;
    sym.data.data = op->in ? op->in : op->iv;     /* a non-NULL pointer for an empty input */
    sym.data.len = op->in_len;
    sym.key_wrap = op->key_wrap;
    sym.partial = op->partial;
    job.kind_case = CS__JOB__KIND_SYM;
    job.sym = &sym;
    if ((rv = cs_runner_run_job (&job, true, &reply)) != CKR_OK)
        goto out;
    result = reply->results [0];
    if (result->kind_case != CS__RESULT__KIND_DATA || result->data.len > max
    ||  (op->partial && result->data.len != op->in_len)
    ||  (op->row->output == CS_MECH_OUT_MAC && result->data.len != cs_mech_mac_len (op->row))) {
        cs_log_error ("the broker returned a malformed result of a secret-key job");
        rv = CKR_DEVICE_ERROR;
        goto out;
    }
    cs_secmem_free (op->out, op->out_cap);
    op->out = NULL;
    op->out_cap = 0;
    if (!(op->out = cs_secmem_alloc (result->data.len ? result->data.len : 1))) {
        rv = CKR_HOST_MEMORY;
        goto out;
    }
    op->out_cap = result->data.len ? result->data.len : 1;
    memcpy (op->out, result->data.data, result->data.len);
    op->out_len = result->data.len;
    if (op->row->output == CS_MECH_OUT_MAC)
        op->out_len = op->mac_len;              /* CK_MAC_GENERAL_PARAMS: the leftmost bytes */
    op->has_out = true;
    OPENSSL_cleanse (result->data.data, result->data.len);
out:
    if (reply)
        cs__reply__free_unpacked (reply, NULL);
    return rv;
}

/*  The table's input-length rule, and for AES-CTR a counter that must not
 *  carry out of its ulCounterBits.  CKR_OK or CKR_DATA_LEN_RANGE.  */
static CK_RV
s_input_check (const cs_secret_op_t *op)
{
    CK_RV rv = cs_mech_input_check (op->row, op->operation == CS_SECRET_ENCRYPT, op->in_len, 0, 0);
    if (rv == CKR_OK && op->row->param == CS_MECH_PARAM_CTR
    &&  ((op->ctr_spent && op->in_len)
         || !cs_mech_ctr_fits (op->iv, op->counter_bits, (op->in_len + CS_MECH_AES_BLOCK - 1) / CS_MECH_AES_BLOCK)))
        rv = CKR_DATA_LEN_RANGE;
    return rv;
}

/*  The size a length query answers (decryption: an upper bound).  */
static size_t
s_size (const cs_secret_op_t *op)
{
    if (op->row->output == CS_MECH_OUT_MAC)
        return op->mac_len;
    return cs_mech_sym_output_len (op->row, op->operation == CS_SECRET_ENCRYPT, op->in_len, op->tag_length_bits / 8);
}

CK_RV
cs_secret_finish (CK_SESSION_HANDLE handle, cs_op_kind_t kind, bool final, const CK_BYTE *data, CK_ULONG len,
                  CK_BYTE_PTR out, CK_ULONG_PTR out_len_p)
{
    cs_session_t *session;
    cs_secret_op_t *op;
    CK_RV rv;
    CS_BEGIN_OP_CALL (rv, handle, kind, out_len_p != NULL && (final || data || !len),
                          &session, (void **) &op);
    if (!final && op->updated)
        rv = CKR_OPERATION_ACTIVE;              /* C_Encrypt after C_EncryptUpdate */
    else
    if (!final && !op->has_out && !op->single && (rv = cs_secret_op_buffer (op, data, len)) == CKR_OK)
        op->single = true;      /* kept for the call after a length query */
    if (rv != CKR_OK) {
        cs_session_op_end_inlock (session, kind);
        CS_END_CALL ();
        return rv;
    }
    if (!op->has_out && final && op->in_len == 0 && cs_secret_stream_done (op)) {
        op->has_out = true;                     /* a stream's parts are all out */
        op->out_len = 0;
    }
    if (!op->has_out && (rv = s_input_check (op)) != CKR_OK) {
        if (op->operation == CS_SECRET_DECRYPT)
            rv = CKR_ENCRYPTED_DATA_LEN_RANGE;  /* read before op_end frees op */
        cs_session_op_end_inlock (session, kind);
        CS_END_CALL ();
        return rv;
    }
    if (!out && !op->has_out) {
        *out_len_p = s_size (op);               /* locally */
        CS_END_CALL ();
        return CKR_OK;
    }
    op = cs_session_op_take_inlock (session, kind);
    CS_END_CALL ();
    if (!op->has_out)
        rv = cs_secret_op_run (op);
    if (rv == CKR_OK && (!out || *out_len_p < op->out_len)) {
        rv = out ? CKR_BUFFER_TOO_SMALL : CKR_OK;
        *out_len_p = op->out_len;
        cs_lock ();
        if ((session = cs_session_lookup_inlock (handle)) && cs_session_op_start_inlock (session, kind, op, cs_secret_op_free) == CKR_OK)
            op = NULL;
        cs_unlock ();
    }
    else
    if (rv == CKR_OK) {
        if (op->out_len)
            memcpy (out, op->out, op->out_len);
        *out_len_p = op->out_len;
    }
    cs_secret_op_free (op);
    return rv;
}

CK_RV
cs_secret_verify (CK_SESSION_HANDLE handle, bool final, const CK_BYTE *data, CK_ULONG len,
                  const CK_BYTE *sig, CK_ULONG sig_len)
{
    cs_session_t *session;
    cs_secret_op_t *op;
    CK_RV rv;
    CS_BEGIN_OP_CALL (rv, handle, CS_OP_VERIFY, sig != NULL && (final || data || !len),
                          &session, (void **) &op);
    op = cs_session_op_take_inlock (session, CS_OP_VERIFY);
    CS_END_CALL ();
    if (!final)
        rv = cs_secret_op_buffer (op, data, len);
    if (rv == CKR_OK && sig_len != op->mac_len)
        rv = CKR_SIGNATURE_LEN_RANGE;
    if (rv == CKR_OK)
        rv = cs_secret_op_run (op);
    if (rv == CKR_OK && (op->out_len != sig_len || CRYPTO_memcmp (op->out, sig, sig_len) != 0))
        rv = CKR_SIGNATURE_INVALID;
    cs_secret_op_free (op);
    return rv;
}

CK_RV
cs_secret_wrap_job (cs_key_t *key, const CK_MECHANISM *mech, bool wrap, const uint8_t *data, size_t len,
                    uint8_t **out_p, size_t *out_len_p, size_t *cap_p)
{
    cs_secret_op_t *op = NULL;
    CK_RV rv = s_op_make (mech, key, wrap ? CKF_ENCRYPT : CKF_DECRYPT, &op);
    if (rv == CKR_OK && !(op->row->flags & CKF_WRAP))
        rv = CKR_MECHANISM_INVALID;         /* key wrap, CBC-PAD (cs_mech.c) */
    if (rv == CKR_OK && (cs_secret_op_buffer (op, data, len) != CKR_OK || s_input_check (op) != CKR_OK))
        rv = wrap ? CKR_KEY_SIZE_RANGE : CKR_WRAPPED_KEY_LEN_RANGE;
    if (rv == CKR_OK) {
        op->key_wrap = true;
        rv = cs_secret_op_run (op);
        if (!wrap && rv == CKR_ENCRYPTED_DATA_INVALID)
            rv = CKR_WRAPPED_KEY_INVALID;       /* the RFC's integrity check failed */
        else
        if (!wrap && rv == CKR_ENCRYPTED_DATA_LEN_RANGE)
            rv = CKR_WRAPPED_KEY_LEN_RANGE;
    }
    if (rv == CKR_OK) {
        *out_p = op->out;
        *out_len_p = op->out_len;
        *cap_p = op->out_cap;
        op->out = NULL;
        op->out_cap = 0;
    }
    cs_secret_op_free (op);
    return rv;
}
