/*  worker_call.c — the copies a worker's driver call works on: the item's
 *  key, mechanism, data, generation, modexp and secret-key operands copied
 *  in, the results moved back out, key material wiped (worker_call.h).  */
#include <openssl/crypto.h>
#include "worker_call.h"

/*  A malloc'd copy of len bytes (1 byte when len is 0), or NULL.  */
static unsigned char *
s_dup (const void *data, size_t len)
{
    unsigned char *copy = malloc (len ? len : 1);
    if (copy && len)
        memcpy (copy, data, len);
    return copy;
}

/*  Copies gen with its four borrowed buffers into one allocation.  */
static int
s_copy_gen (worker_call_t *call, const cs_keygen_t *gen)
{
    size_t label_len = gen->label ? strlen (gen->label) + 1 : 0;
    size_t total = gen->public_exponent_len + gen->ec_params_len + gen->id_len + label_len;
    call->gen = *gen;
    if (!(call->gen_buf = malloc (total ? total : 1)))
        return -1;
    unsigned char *p = call->gen_buf;
    if (gen->public_exponent) {
        call->gen.public_exponent = memcpy (p, gen->public_exponent, gen->public_exponent_len);
        p += gen->public_exponent_len;
    }
    if (gen->ec_params) {
        call->gen.ec_params = memcpy (p, gen->ec_params, gen->ec_params_len);
        p += gen->ec_params_len;
    }
    if (gen->id) {
        call->gen.id = memcpy (p, gen->id, gen->id_len);
        p += gen->id_len;
    }
    if (gen->label)
        call->gen.label = memcpy (p, gen->label, label_len);
    return 0;
}

/*  Copies the operands of a raw modexp item into one allocation.  */
static CK_RV
s_copy_modexp (worker_call_t *call, const cs_modexp_t *modexp)
{
    const unsigned char **parts [] = { &call->modexp.base, &call->modexp.exponent, &call->modexp.modulus,
                                       &call->modexp.p, &call->modexp.q, &call->modexp.dp, &call->modexp.dq,
                                       &call->modexp.qinv, &call->modexp.public_exponent };
    size_t *lens [] = { &call->modexp.base_len, &call->modexp.exponent_len, &call->modexp.modulus_len,
                        &call->modexp.p_len, &call->modexp.q_len, &call->modexp.dp_len, &call->modexp.dq_len,
                        &call->modexp.qinv_len, &call->modexp.public_exponent_len };
    size_t total = 0;
    call->modexp = *modexp;
    for (size_t i = 0; i < sizeof parts / sizeof parts [0]; i++)
        total += *parts [i] ? *lens [i] : 0;
    if (!(call->modexp_buf = malloc (total ? total : 1)))
        return CKR_HOST_MEMORY;
    call->modexp_buf_len = total;
    unsigned char *at = call->modexp_buf;
    for (size_t i = 0; i < sizeof parts / sizeof parts [0]; i++) {
        if (!*parts [i])
            continue;
        memcpy (at, *parts [i], *lens [i]);
        *parts [i] = at;
        at += *lens [i];
    }
    return CKR_OK;
}

/*  Copies a secret-key operation (key, IV, AAD, input) into one allocation.  */
static CK_RV
s_copy_sym (worker_call_t *call, const cs_sym_t *sym)
{
    const unsigned char **parts [] = { &call->sym.key, &call->sym.iv, &call->sym.aad, &call->sym.in };
    size_t *lens [] = { &call->sym.key_len, &call->sym.iv_bytes, &call->sym.aad_bytes, &call->sym.in_len };
    size_t total = 0;
    call->sym = *sym;
    for (size_t i = 0; i < 4; i++)
        total += *parts [i] ? *lens [i] : 0;
    if (!(call->sym_buf = malloc (total ? total : 1)))
        return CKR_HOST_MEMORY;
    call->sym_buf_len = total;
    unsigned char *at = call->sym_buf;
    for (size_t i = 0; i < 4; i++) {
        if (!*parts [i])
            continue;
        memcpy (at, *parts [i], *lens [i]);
        *parts [i] = at;
        at += *lens [i];
    }
    return CKR_OK;
}

/*  Copies the inputs of a sign/decrypt/derive/verify item (mechanism, OAEP
 *  label, ML-DSA context and keys, input or peer point).  */
static CK_RV
s_copy_job (worker_call_t *call, const work_item_t *item)
{
    if (item->kind != WORK_DERIVE) {
        call->mech = item->mech;
        call->mech.label = NULL;
        if (item->mech.label_len) {
            if (!(call->label = s_dup (item->mech.label, item->mech.label_len)))
                return CKR_HOST_MEMORY;
            call->mech.label = call->label;
        }
        if (pq_work_inputs_copy (&call->pq, item))
            return CKR_HOST_MEMORY;
        call->mech.context = call->pq.context;
    }
    call->in_len = item->in_len;
    return (call->in = s_dup (item->in, item->in_len)) ? CKR_OK : CKR_HOST_MEMORY;
}

/*  Fills call with copies of item's inputs.  Returns CKR_OK, or the CK_RV
 *  the item fails with unrun.  */
CK_RV
worker_call_prepare (worker_call_t *call, const work_item_t *item)
{
    memset (call, 0, sizeof *call);
    call->kind = item->kind;
    call->key = item->key;
    if (item->key.id) {
        memcpy (call->id, item->key.id, item->key.id_len <= CS_KEY_ID_MAX ? item->key.id_len : 0);
        call->key.id = call->id;
    }
    if (item->key.ref) {
        snprintf (call->ref, sizeof call->ref, "%s", item->key.ref);
        call->key.ref = call->ref;
    }
    if (item->key.pkcs8) {
        if (!(call->material = s_dup (item->key.pkcs8, item->key.pkcs8_len)))
            return CKR_HOST_MEMORY;
        call->material_len = item->key.pkcs8_len;
        call->key.pkcs8 = call->material;
    }
    switch (item->kind) {
        case WORK_SIGN:
        case WORK_DECRYPT:
        case WORK_DERIVE:
        case WORK_VERIFY:
        case WORK_ENCAPSULATE:
        case WORK_DECAPSULATE:
            return s_copy_job (call, item);
        case WORK_GENERATE:
        case WORK_GENERATE_RESIDENT:
            return s_copy_gen (call, &item->gen) ? CKR_HOST_MEMORY : CKR_OK;
        case WORK_MODEXP:
            return s_copy_modexp (call, &item->modexp);
        case WORK_SYM:
            return s_copy_sym (call, &item->sym);
        default:
            return CKR_OK;
    }
}

/*  Frees the call's copies (wiping key material and any result left).  */
void
worker_call_clear (worker_call_t *call)
{
    if (call->material) {
        OPENSSL_cleanse (call->material, call->material_len);
        free (call->material);
    }
    if (call->out) {
        OPENSSL_cleanse (call->out, call->out_cap);
        free (call->out);
    }
    if (call->modexp_buf) {
        OPENSSL_cleanse (call->modexp_buf, call->modexp_buf_len);
        free (call->modexp_buf);
    }
    if (call->sym_buf) {
        OPENSSL_cleanse (call->sym_buf, call->sym_buf_len);
        free (call->sym_buf);
    }
    cs_key_info_free_members (&call->generated);
    pq_work_inputs_clear (&call->pq);
    free (call->pub_out);
    free (call->label);
    free (call->in);
    free (call->gen_buf);
    memset (call, 0, sizeof *call);
}

/*  Moves the call's results into item and frees the rest.  */
void
worker_call_finish (worker_call_t *call, work_item_t *item)
{
    item->rv = call->rv;
    item->wrong = call->wrong;
    if (call->rv == CKR_OK) {
        item->out = call->out;
        item->out_len = call->out_len;
        item->generated = call->generated;
        item->pub_out = call->pub_out;
        item->pub_out_len = call->pub_out_len;
        if (call->pub_out)
            item->parameter_set = call->pq.parameter_set;
        call->pub_out = NULL;
        call->out = NULL;
        memset (&call->generated, 0, sizeof call->generated);
    }
    worker_call_clear (call);
}
