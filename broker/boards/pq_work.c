/*  pq_work.c — a worker's post-quantum calls on its board (pq_work.h).  */
#include <openssl/crypto.h>
#include "pq_work.h"

#define S_PUB_MAX 2592                  /* bytes: an ML-DSA-87 pk (FIPS 204 Table 2), the largest */
#define S_CT_MAX 1568                   /* bytes: an ML-KEM-1024 ciphertext (FIPS 203 Table 3) */
#define S_SECRET 32                     /* bytes: an ML-KEM shared secret */

int
pq_work_inputs_copy (pq_work_inputs_t *copy, const work_item_t *item)
{
    size_t total = item->mech.context_len + (item->pub ? item->pub_len : 0) + (item->sig ? item->sig_len : 0);
    memset (copy, 0, sizeof *copy);
    copy->parameter_set = item->parameter_set;
    if (!total)
        return 0;
    if (!(copy->buf = malloc (total)))
        return -1;
    unsigned char *at = copy->buf;
    if (item->mech.context_len)
        copy->context = memcpy (at, item->mech.context, item->mech.context_len);
    at += item->mech.context_len;
    if (item->pub) {
        copy->pub = memcpy (at, item->pub, item->pub_len);
        copy->pub_len = item->pub_len;
        at += item->pub_len;
    }
    if (item->sig) {
        copy->sig = memcpy (at, item->sig, item->sig_len);
        copy->sig_len = item->sig_len;
    }
    return 0;
}

void
pq_work_inputs_clear (pq_work_inputs_t *copy)
{
    if (!copy)
        return;
    free (copy->buf);
    memset (copy, 0, sizeof *copy);
}

CK_RV
pq_work_run (board_t *board, cs_drv_session_t *session, work_kind_t kind, const cs_drv_key_t *key,
             const cs_drv_mech_t *mech, const pq_work_inputs_t *inputs, const unsigned char *in,
             size_t in_len, unsigned char **out_p, size_t *out_len_p, size_t *cap_p)
{
    switch (kind) {
        case WORK_VERIFY:
            return pq_work_verify (board, session, mech, inputs->parameter_set, inputs->pub, inputs->pub_len,
                                   in, in_len, inputs->sig, inputs->sig_len);
        case WORK_ENCAPSULATE:
            return pq_work_encapsulate (board, session, mech, inputs->parameter_set, inputs->pub, inputs->pub_len,
                                        out_p, out_len_p, cap_p);
        case WORK_DECAPSULATE:
            return pq_work_decapsulate (board, session, key, mech, in, in_len, out_p, out_len_p, cap_p);
        default:
            return CKR_FUNCTION_NOT_SUPPORTED;
    }
}

bool
pq_work_signs (CK_MECHANISM_TYPE type)
{
    return type == CKM_ML_DSA;
}

CK_RV
pq_work_verify (board_t *board, cs_drv_session_t *session, const cs_drv_mech_t *mech,
                CK_ULONG parameter_set, const unsigned char *pub, size_t pub_len,
                const unsigned char *in, size_t in_len, const unsigned char *sig, size_t sig_len)
{
    if (!board->verify)
        return CKR_FUNCTION_NOT_SUPPORTED;
    return board->verify (session, mech, parameter_set, pub, pub_len, in, in_len, sig, sig_len);
}

bool
pq_work_sign_check (board_t *board, cs_drv_session_t *session, const cs_drv_key_t *key,
                    const cs_drv_mech_t *mech, const unsigned char *pub, size_t pub_len,
                    CK_ULONG parameter_set, const unsigned char *in, size_t in_len,
                    const unsigned char *sig, size_t sig_len)
{
    unsigned char derived [S_PUB_MAX];
    if (!pub) {                         /* a per-request key: the board derives its public half */
        CK_KEY_TYPE type = 0;
        pub_len = sizeof derived;
        if (!board->public_key || !key->pkcs8
        ||  board->public_key (session, key, &type, &parameter_set, derived, &pub_len) != CKR_OK
        ||  type != CKK_ML_DSA)
            return false;
        pub = derived;
    }
    return pq_work_verify (board, session, mech, parameter_set, pub, pub_len, in, in_len, sig, sig_len) == CKR_OK;
}

CK_RV
pq_work_encapsulate (board_t *board, cs_drv_session_t *session, const cs_drv_mech_t *mech,
                     CK_ULONG parameter_set, const unsigned char *pub, size_t pub_len,
                     unsigned char **out_p, size_t *out_len_p, size_t *cap_p)
{
    size_t ct_len = S_CT_MAX, secret_len = S_SECRET;
    unsigned char secret [S_SECRET];
    if (!board->encapsulate)
        return CKR_FUNCTION_NOT_SUPPORTED;
    unsigned char *out = malloc (S_CT_MAX + S_SECRET);
    if (!out)
        return CKR_HOST_MEMORY;
    CK_RV rv = board->encapsulate (session, mech, parameter_set, pub, pub_len, out, &ct_len, secret, &secret_len);
    if (rv == CKR_OK && (ct_len > S_CT_MAX || secret_len != S_SECRET))
        rv = CKR_DEVICE_ERROR;
    if (rv == CKR_OK)
        memcpy (out + ct_len, secret, S_SECRET);
    OPENSSL_cleanse (secret, sizeof secret);
    if (rv != CKR_OK) {
        OPENSSL_cleanse (out, S_CT_MAX + S_SECRET);
        free (out);
        return rv;
    }
    *out_p = out;
    *out_len_p = ct_len + S_SECRET;
    *cap_p = S_CT_MAX + S_SECRET;
    return CKR_OK;
}

CK_RV
pq_work_decapsulate (board_t *board, cs_drv_session_t *session, const cs_drv_key_t *key,
                     const cs_drv_mech_t *mech, const unsigned char *ct, size_t ct_len,
                     unsigned char **out_p, size_t *out_len_p, size_t *cap_p)
{
    size_t len = S_SECRET;
    if (!board->decapsulate)
        return CKR_FUNCTION_NOT_SUPPORTED;
    unsigned char *out = malloc (S_SECRET);
    if (!out)
        return CKR_HOST_MEMORY;
    CK_RV rv = board->decapsulate (session, key, mech, ct, ct_len, out, &len);
    if (rv == CKR_OK && len != S_SECRET)
        rv = CKR_DEVICE_ERROR;
    if (rv != CKR_OK) {
        OPENSSL_cleanse (out, S_SECRET);
        free (out);
        return rv;
    }
    *out_p = out;
    *out_len_p = S_SECRET;
    *cap_p = S_SECRET;
    return CKR_OK;
}

CK_RV
pq_work_public (board_t *board, cs_drv_session_t *session, const unsigned char *pkcs8, size_t len,
                unsigned char **pub_p, size_t *pub_len_p, CK_ULONG *parameter_set_p)
{
    cs_drv_key_t key = { NULL, 0, pkcs8, len, NULL };
    CK_KEY_TYPE type = 0;
    size_t pub_len = S_PUB_MAX;
    *pub_p = NULL;
    *pub_len_p = 0;
    if (!board->public_key)
        return CKR_FUNCTION_NOT_SUPPORTED;
    unsigned char *pub = malloc (S_PUB_MAX);
    if (!pub)
        return CKR_HOST_MEMORY;
    CK_RV rv = board->public_key (session, &key, &type, parameter_set_p, pub, &pub_len);
    if (rv == CKR_OK && (type != CKK_ML_DSA && type != CKK_ML_KEM))
        rv = CKR_DEVICE_ERROR;
    if (rv != CKR_OK) {
        free (pub);
        return rv;
    }
    *pub_p = pub;
    *pub_len_p = pub_len;
    return CKR_OK;
}
