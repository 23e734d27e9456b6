/*  secret_stream.c — multi-part encryption and decryption of any length
 *  (PKCS#11 2.40 §5.8, §5.9: C_EncryptUpdate ... C_DecryptFinal) with the
 *  block modes, in stateless jobs (docs/CONTRACTS.md "Multi-part streams").
 *
 *  ECB, CBC, CBC-PAD and CTR (AES, DES3) need no state beyond their
 *  chaining value, which the module keeps: each Update sends the whole
 *  blocks it has as SymJobs of at most CS_MECH_SYM_MAX_DATA bytes with
 *  SymJob.partial set (no padding) and the current IV, returns their output
 *  at once, and keeps the rest (less than a block; CBC-PAD decryption also
 *  holds the last whole block back, for its padding) for the next call.
 *  The next IV is the last ciphertext block (CBC, NIST SP 800-38A §6.2) or
 *  the counter advanced by the blocks done (CTR, §6.5, inside
 *  ulCounterBits).  Final sends the rest as an ordinary job.  Memory stays
 *  within one part whatever the length.  GCM (its tag covers the whole
 *  message) and the MACs stay buffered up to CS_MECH_SYM_MAX_DATA bytes
 *  (secret.c): CKR_DATA_LEN_RANGE beyond.
 */
#include <string.h>
#include <openssl/crypto.h>
#include "cs_secmem.h"
#include "guard.h"
#include "log.h"
#include "secret.h"
#include "secret_int.h"
#include "session.h"

/*  True when the op is encryption or decryption with a block mode that
 *  streams (not GCM, not key wrap).  */
static bool
s_streams (const cs_secret_op_t *op)
{
    return op->operation != CS_SECRET_SIGN && !op->key_wrap
        && (op->row->input == CS_MECH_IN_BLOCK || op->row->input == CS_MECH_IN_PAD
            || op->row->param == CS_MECH_PARAM_CTR);
}

bool
cs_secret_stream_done (const cs_secret_op_t *op)
{
    return s_streams (op) && op->row->input != CS_MECH_IN_PAD;
}

/*  The bytes of `total` that can go out now: whole blocks, and for CBC-PAD
 *  decryption not the last whole block (its padding is checked at Final).  */
static size_t
s_ready (const cs_secret_op_t *op, size_t total)
{
    size_t block = cs_mech_block_bytes (op->row);
    size_t n = total - total % block;
    if (n && n == total && op->row->input == CS_MECH_IN_PAD && op->operation == CS_SECRET_DECRYPT)
        n -= block;
    return n;
}

/*  Adds `blocks` to the 16-byte big-endian counter block (the caller
 *  checked with cs_mech_ctr_fits that it stays inside ulCounterBits).  */
static void
s_ctr_add (uint8_t cb [16], size_t blocks)
{
    for (int i = 15; i >= 0 && blocks; i--) {
        size_t sum = cb [i] + (blocks & 0xff);
        cb [i] = (uint8_t) sum;
        blocks = (blocks >> 8) + (sum >> 8);
    }
}

/*  After a part: the next chaining value (CBC: the last ciphertext block;
 *  CTR: the counter advanced by the part's blocks; ECB: none).  `in` and
 *  `out` are the part's input and output, `part` bytes each.  */
static void
s_chain (cs_secret_op_t *op, const uint8_t *in, const uint8_t *out, size_t part)
{
    size_t block = cs_mech_block_bytes (op->row);
    if (op->row->param == CS_MECH_PARAM_CTR) {
        op->ctr_spent = !cs_mech_ctr_fits (op->iv, op->counter_bits, part / block + 1);
        s_ctr_add (op->iv, part / block);
    }
    else
    if (op->row->param == CS_MECH_PARAM_IV)
        memcpy (op->iv, (op->operation == CS_SECRET_ENCRYPT ? out : in) + part - block, block);
}

/*  Runs the `n` ready bytes (the op's kept input, then `data`) as partial
 *  jobs of at most CS_MECH_SYM_MAX_DATA bytes into `out`, advancing the
 *  chaining value, and keeps the rest of `data` (`len` bytes in all) as the
 *  op's input.  Without the mutex: the op is taken from its session.
 *  Errors: the jobs' (cs_secret_op_run), CKR_HOST_MEMORY.  */
static CK_RV
s_run_parts (cs_secret_op_t *op, const CK_BYTE *data, size_t len, size_t n, CK_BYTE_PTR out)
{
    size_t block = cs_mech_block_bytes (op->row);
    size_t max = CS_MECH_SYM_MAX_DATA - CS_MECH_SYM_MAX_DATA % block;
    size_t used = 0, done = 0;
    CK_RV rv = CKR_OK;
    op->partial = true;
    while (done < n) {
        size_t part = n - done < max ? n - done : max;
        size_t take = part - op->in_len;        /* only the first part starts with kept bytes */
        if ((rv = cs_secret_op_buffer (op, data + used, take)) != CKR_OK || (rv = cs_secret_op_run (op)) != CKR_OK)
            break;
        memcpy (out + done, op->out, part);
        s_chain (op, op->in, op->out, part);
        used += take;
        done += part;
        op->in_len = 0;
    }
    op->partial = false;
    cs_secmem_free (op->out, op->out_cap);
    op->out = NULL;
    op->out_cap = op->out_len = 0;
    op->has_out = false;                        /* the parts went to the caller */
    if (rv == CKR_OK)
        rv = cs_secret_op_buffer (op, data + used, len - used);
    return rv;
}

CK_RV
cs_secret_stream_update (CK_SESSION_HANDLE handle, cs_op_kind_t kind, const CK_BYTE *data, CK_ULONG len,
                         CK_BYTE_PTR out, CK_ULONG_PTR out_len_p)
{
    cs_session_t *session;
    cs_secret_op_t *op;
    size_t n = 0;
    bool run = false;
    CK_RV rv;
    CS_BEGIN_OP_CALL (rv, handle, kind, data || !len, &session, (void **) &op);
    if (s_streams (op))
        n = s_ready (op, op->in_len + len);
    if (op->single || op->has_out)
        rv = CKR_OPERATION_ACTIVE;              /* a single-part call is under way */
    else
    if (!out || *out_len_p < n) {               /* the two-call convention: nothing is used */
        rv = out ? CKR_BUFFER_TOO_SMALL : CKR_OK;
        *out_len_p = n;
    }
    else
    if (n && op->row->param == CS_MECH_PARAM_CTR
    &&  (op->ctr_spent || !cs_mech_ctr_fits (op->iv, op->counter_bits, n / cs_mech_block_bytes (op->row)))) {
        rv = CKR_DATA_LEN_RANGE;                /* the counter would leave ulCounterBits */
        cs_session_op_end_inlock (session, kind);
    }
    else
    if (n == 0)                                 /* not a whole block yet, or GCM: kept for later */
        rv = cs_secret_op_append_inlock (session, kind, op, data, len, out_len_p);
    else {
        op = cs_session_op_take_inlock (session, kind);
        run = true;
    }
    CS_END_CALL ();
    if (!run)
        return rv;
    if ((rv = s_run_parts (op, data, len, n, out)) != CKR_OK) {
        cs_secret_op_free (op);                 /* an error ends the operation (2.40 §5.2) */
        return rv;
    }
    op->updated = true;
    *out_len_p = n;
    cs_lock ();
    if ((session = cs_session_lookup_inlock (handle)) && cs_session_op_start_inlock (session, kind, op, cs_secret_op_free) == CKR_OK)
        op = NULL;
    cs_unlock ();
    cs_secret_op_free (op);                     /* the session closed meanwhile */
    return CKR_OK;
}

/*  Why an Update or Final fails without a secret-key operation of `kind`:
 *  one (RSA) with no multi-part form, or none.  */
static CK_RV
s_refused (CK_SESSION_HANDLE handle, cs_op_kind_t kind)
{
    cs_session_t *session;
    CK_RV rv;
    CS_BEGIN_SESSION_CALL (rv, handle, &session);
    rv = cs_session_op_inlock (session, kind) ? CKR_FUNCTION_NOT_SUPPORTED : CKR_OPERATION_NOT_INITIALIZED;
    CS_END_CALL ();
    return rv;
}

CK_RV
cs_secret_multipart_update (CK_SESSION_HANDLE handle, cs_op_kind_t kind, const CK_BYTE *data, CK_ULONG len,
                            CK_BYTE_PTR out, CK_ULONG_PTR out_len_p)
{
    return_val_if_fail (out_len_p != NULL, CKR_ARGUMENTS_BAD);
    return cs_secret_active (handle, kind) ? cs_secret_stream_update (handle, kind, data, len, out, out_len_p)
                                           : s_refused (handle, kind);
}

CK_RV
cs_secret_multipart_final (CK_SESSION_HANDLE handle, cs_op_kind_t kind, CK_BYTE_PTR out, CK_ULONG_PTR out_len_p)
{
    return cs_secret_active (handle, kind) ? cs_secret_finish (handle, kind, true, NULL, 0, out, out_len_p)
                                           : s_refused (handle, kind);
}
