/*  symjobs.c — secret-key jobs (symjobs.h).  */
#include <openssl/crypto.h>
#include "cs_mech.h"
#include "symjobs.h"

_Static_assert (CS_SYM_OUT_EXTRA == CS_MECH_SYM_OUT_EXTRA, "the driver ABI and the table agree on the output room");

CK_RV
symjob_key (const cs_mech_row_t *row, const uint8_t *value, size_t len, cs_sym_t *op)
{
    if (len < row->min_bits || len > row->max_bits || !cs_mech_secret_len_ok (row->key_type, len))
        return CKR_KEY_SIZE_RANGE;
    if (op) {
        op->key = value;
        op->key_len = len;
    }
    return CKR_OK;
}

CK_RV
symjob_prepare (const Cs__SymJob *job, cs_sym_t *op)
{
    const cs_mech_row_t *row = cs_mech_row ((CK_MECHANISM_TYPE) job->mechanism);
    bool mac = row && row->output == CS_MECH_OUT_MAC;
    memset (op, 0, sizeof *op);
    if (!row || !cs_mech_secret_key_type (row->key_type) || !(row->flags & CKF_HW) || row->wire != row->type)
        return CKR_MECHANISM_INVALID;           /* _GENERAL MACs travel as their full MAC */
    if (mac ? job->operation != CS_SYM_SIGN
            : job->operation != CS_SYM_ENCRYPT && job->operation != CS_SYM_DECRYPT)
        return CKR_MECHANISM_INVALID;
    if (job->key_wrap && !(row->flags & CKF_WRAP))
        return CKR_MECHANISM_INVALID;           /* C_WrapKey/C_UnwrapKey: wrapping rows only */
    if (job->key_value.len && symjob_key (row, job->key_value.data, job->key_value.len, NULL) != CKR_OK)
        return CKR_KEY_SIZE_RANGE;
    if (job->data.len > CS_MECH_SYM_MAX_DATA)
        return CKR_DATA_LEN_RANGE;
    /*  A part of a stream: a block mode, a whole number of blocks, the
     *  chaining state in the IV (docs/CONTRACTS.md "Multi-part streams").  */
    if (job->partial
    &&  (mac || job->key_wrap || (row->input != CS_MECH_IN_BLOCK && row->input != CS_MECH_IN_PAD
                                  && row->param != CS_MECH_PARAM_CTR)))
        return CKR_MECHANISM_INVALID;
    if (job->partial && (job->data.len == 0 || job->data.len % cs_mech_block_bytes (row)))
        return job->operation == CS_SYM_ENCRYPT ? CKR_DATA_LEN_RANGE : CKR_ENCRYPTED_DATA_LEN_RANGE;
    switch (row->param) {
        case CS_MECH_PARAM_IV:
        case CS_MECH_PARAM_CTR:         /* the counter block; ulCounterBits is checked in the module */
            if (job->iv.len != cs_mech_block_bytes (row) || job->aad.len || job->tag_length_bits)
                return CKR_MECHANISM_PARAM_INVALID;
            break;
        case CS_MECH_PARAM_WRAP_IV:     /* none: the RFC's default IV */
            if ((job->iv.len && job->iv.len != (row->input == CS_MECH_IN_KW ? 8u : 4u))
            ||  job->aad.len || job->tag_length_bits)
                return CKR_MECHANISM_PARAM_INVALID;
            break;
        case CS_MECH_PARAM_GCM:
            if (job->iv.len < 1 || job->iv.len > 256 || job->aad.len > CS_MECH_SYM_MAX_DATA
            ||  job->tag_length_bits % 8 || job->tag_length_bits < 96 || job->tag_length_bits > 128)
                return CKR_MECHANISM_PARAM_INVALID;
            break;
        default:
            if (job->iv.len || job->aad.len || job->tag_length_bits)
                return CKR_MECHANISM_PARAM_INVALID;
            break;
    }
    op->mechanism = row->type;
    op->operation = (int) job->operation;
    op->partial = job->partial;
    op->key = job->key_value.len ? job->key_value.data : NULL;     /* else symjob_key */
    op->key_len = job->key_value.len;
    op->iv = job->iv.len ? job->iv.data : NULL;
    op->iv_bytes = job->iv.len;
    op->aad = job->aad.len ? job->aad.data : NULL;
    op->aad_bytes = job->aad.len;
    op->tag_length_bits = job->tag_length_bits;
    op->in = job->data.data;
    op->in_len = job->data.len;
    return CKR_OK;
}

void
symjob_wipe (Cs__Request *req)
{
    for (size_t i = 0; req && i < req->n_jobs; i++) {
        const Cs__Job *job = req->jobs [i];
        if (!job || job->kind_case != CS__JOB__KIND_SYM || !job->sym)
            continue;
        if (job->sym->key_value.data)
            OPENSSL_cleanse (job->sym->key_value.data, job->sym->key_value.len);
        if (job->sym->data.data)
            OPENSSL_cleanse (job->sym->data.data, job->sym->data.len);
    }
}
