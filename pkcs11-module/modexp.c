/*  modexp.c — vendor raw modexp mechanisms as C_Digest (modexp.h).  */
#include <stdlib.h>
#include <string.h>
#include <openssl/bn.h>
#include <openssl/crypto.h>
#include "cs_wire.h"
#include "log.h"
#include "guard.h"
#include "runner.h"
#include "modexp.h"
#include "cryptoserver/pkcs11v.h"

#define S_MAX_REQUEST_BYTES (768 * 1024)   /* operand bytes per request (frame: 1 MiB) */
#define S_MAX_RSA_BYTES 1024                /* p*q of at most 8192 bits */

typedef struct {
    uint8_t *bytes;
    size_t len;
} s_num_t;

/*  One set of operands: exponent and modulus, or a CRT key.  */
typedef struct {
    s_num_t e, m;                       /* plain */
    s_num_t p, q, dp, dq, qinv, pub;    /* crt */
    size_t k;                           /* result bytes */
} s_operands_t;

struct cs_modexp_op_s {
    CK_MECHANISM_TYPE type;
    size_t n;                           /* operand sets: 1, or MULTI's count */
    s_operands_t *sets;
};

bool
cs_modexp_mechanism (CK_MECHANISM_TYPE type)
{
    return type >= CKM_CS_MODEXP && type <= CKM_CS_MULTI_MODEXP_ARRAY;
}

static bool
s_array (CK_MECHANISM_TYPE type)
{
    return type == CKM_CS_MODEXP_ARRAY || type == CKM_CS_RSA_CRT_ARRAY;
}

/*  Copies a number of at most CS_MODEXP_MAX_BYTES bytes (required: not
 *  empty and not all zeros).  */
static CK_RV
s_copy (s_num_t *num, const CK_BYTE *bytes, CK_ULONG len, bool required)
{
    if ((!bytes && len) || len > CS_MODEXP_MAX_BYTES)
        return CKR_MECHANISM_PARAM_INVALID;
    size_t skip = 0;
    while (skip < len && bytes [skip] == 0)
        skip++;
    if (required && skip == len)
        return CKR_MECHANISM_PARAM_INVALID;
    num->len = len - skip;
    if (num->len && !(num->bytes = malloc (num->len)))
        return CKR_HOST_MEMORY;
    if (num->len)
        memcpy (num->bytes, bytes + skip, num->len);
    return CKR_OK;
}

static void
s_num_wipe (s_num_t *num)
{
    if (num->bytes)
        OPENSSL_cleanse (num->bytes, num->len);
    free (num->bytes);
    num->bytes = NULL;
    num->len = 0;
}

static CK_RV
s_plain (s_operands_t *set, const CK_CS_MODEXP_PARAMS *params)
{
    CK_RV rv = s_copy (&set->e, params->pExponent, params->ulExponentLen, false);
    if (rv == CKR_OK)
        rv = s_copy (&set->m, params->pModulus, params->ulModulusLen, true);
    set->k = set->m.len;
    return rv;
}

/*  k = bytes of p*q.  */
static CK_RV
s_crt_k (s_operands_t *set)
{
    BIGNUM *p = BN_bin2bn (set->p.bytes, (int) set->p.len, NULL);
    BIGNUM *q = BN_bin2bn (set->q.bytes, (int) set->q.len, NULL);
    BN_CTX *ctx = BN_CTX_new ();
    CK_RV rv = CKR_HOST_MEMORY;
    if (p && q && ctx && BN_mul (p, p, q, ctx)) {
        set->k = (size_t) BN_num_bytes (p);
        rv = set->k <= S_MAX_RSA_BYTES ? CKR_OK : CKR_MECHANISM_PARAM_INVALID;
    }
    BN_clear_free (p);
    BN_clear_free (q);
    BN_CTX_free (ctx);
    return rv;
}

static CK_RV
s_crt (s_operands_t *set, const CK_CS_RSA_CRT_PARAMS *params)
{
    CK_RV rv = s_copy (&set->p, params->pPrime1, params->ulPrime1Len, true);
    if (rv == CKR_OK)
        rv = s_copy (&set->q, params->pPrime2, params->ulPrime2Len, true);
    if (rv == CKR_OK)
        rv = s_copy (&set->dp, params->pExponent1, params->ulExponent1Len, true);
    if (rv == CKR_OK)
        rv = s_copy (&set->dq, params->pExponent2, params->ulExponent2Len, true);
    if (rv == CKR_OK)
        rv = s_copy (&set->qinv, params->pCoefficient, params->ulCoefficientLen, true);
    if (rv == CKR_OK)
        rv = s_copy (&set->pub, params->pPublicExponent, params->ulPublicExponentLen, false);
    return rv == CKR_OK ? s_crt_k (set) : rv;
}

static CK_RV
s_decode (cs_modexp_op_t *self, const CK_MECHANISM *mech)
{
    const void *param = mech->pParameter;
    size_t len = mech->ulParameterLen;
    if (!param)
        return CKR_MECHANISM_PARAM_INVALID;
    if (self->type == CKM_CS_MULTI_MODEXP_ARRAY) {
        const CK_CS_MULTI_MODEXP_PARAMS *multi = param;
        if (len != sizeof *multi || multi->ulCount == 0 || multi->ulCount > CS_MODEXP_MAX_ITEMS
        ||  !multi->pItems)
            return CKR_MECHANISM_PARAM_INVALID;
        if (!(self->sets = calloc (multi->ulCount, sizeof *self->sets)))
            return CKR_HOST_MEMORY;
        self->n = multi->ulCount;
        for (size_t i = 0; i < self->n; i++) {
            CK_RV rv = s_plain (&self->sets [i], &multi->pItems [i]);
            if (rv != CKR_OK)
                return rv;
        }
        return CKR_OK;
    }
    if (!(self->sets = calloc (1, sizeof *self->sets)))
        return CKR_HOST_MEMORY;
    self->n = 1;
    if (self->type == CKM_CS_MODEXP || self->type == CKM_CS_MODEXP_ARRAY)
        return len == sizeof (CK_CS_MODEXP_PARAMS) ? s_plain (self->sets, param) : CKR_MECHANISM_PARAM_INVALID;
    return len == sizeof (CK_CS_RSA_CRT_PARAMS) ? s_crt (self->sets, param) : CKR_MECHANISM_PARAM_INVALID;
}

CK_RV
cs_modexp_op_new (const CK_MECHANISM *mech, cs_modexp_op_t **op_p)
{
    if (!cs_modexp_mechanism (mech->mechanism))
        return CKR_MECHANISM_INVALID;
    cs_modexp_op_t *self = calloc (1, sizeof *self);
    if (!self)
        return CKR_HOST_MEMORY;
    self->type = mech->mechanism;
    CK_RV rv = s_decode (self, mech);
    if (rv == CKR_OK)
        *op_p = self;
    else
        cs_modexp_op_free (self);
    return rv;
}

void
cs_modexp_op_free (void *op)
{
    cs_modexp_op_t *self = op;
    if (!self)
        return;
    for (size_t i = 0; self->sets && i < self->n; i++) {
        s_operands_t *set = &self->sets [i];
        s_num_t *all [] = { &set->e, &set->m, &set->p, &set->q, &set->dp, &set->dq, &set->qinv, &set->pub };
        for (size_t k = 0; k < sizeof all / sizeof all [0]; k++)
            s_num_wipe (all [k]);
    }
    free (self->sets);
    free (self);
}

CK_RV
cs_modexp_out_len (const cs_modexp_op_t *op, size_t data_len, size_t *out_len_p)
{
    size_t k = op->sets [0].k;
    if (op->type == CKM_CS_MULTI_MODEXP_ARRAY) {
        size_t sum = 0;
        for (size_t i = 0; i < op->n; i++)
            sum += op->sets [i].k;
        if (data_len != sum)
            return CKR_DATA_LEN_RANGE;
    }
    else
    if (s_array (op->type)) {
        if (data_len == 0 || data_len % k || data_len / k > CS_MODEXP_MAX_ITEMS)
            return CKR_DATA_LEN_RANGE;
    }
    else {
        if (data_len == 0 || data_len > CS_WIRE_MAX_DATA)
            return CKR_DATA_LEN_RANGE;
        data_len = k;
    }
    *out_len_p = data_len;
    return CKR_OK;
}

size_t
cs_modexp_items (const cs_modexp_op_t *op, size_t data_len)
{
    return op->type == CKM_CS_MULTI_MODEXP_ARRAY ? op->n
         : s_array (op->type) ? data_len / op->sets [0].k : 1;
}

#define S_BIN(num) ((ProtobufCBinaryData) { (num).len, (num).bytes })

/*  Puts a set's operands into a job.  */
static size_t
s_job_operands (Cs__ModexpJob *job, const s_operands_t *set, bool crt)
{
    if (!crt) {
        job->exponent = S_BIN (set->e);
        job->modulus = S_BIN (set->m);
        return set->e.len + set->m.len;
    }
    job->prime1 = S_BIN (set->p);
    job->prime2 = S_BIN (set->q);
    job->exponent1 = S_BIN (set->dp);
    job->exponent2 = S_BIN (set->dq);
    job->coefficient = S_BIN (set->qinv);
    job->public_exponent = S_BIN (set->pub);
    return set->p.len + set->q.len + set->dp.len + set->dq.len + set->qinv.len + set->pub.len;
}

/*  A request being filled: its jobs and each result's length.  */
typedef struct {
    Cs__ModexpJob *mjobs;
    Cs__Job *jobs;
    Cs__Job **ptrs;
    size_t *k;
    size_t count;               /* jobs in the request */
    size_t bytes;               /* operand bytes in it */
} s_batch_t;

/*  Sends the batch as one request; the results go to *out_p, which moves
 *  past them.  */
static CK_RV
s_send (s_batch_t *batch, uint8_t **out_p)
{
    Cs__Reply *reply = NULL;
    CK_RV rv = cs_runner_run_jobs (batch->ptrs, batch->count, true, &reply);
    for (size_t i = 0; rv == CKR_OK && i < batch->count; i++) {
        const Cs__Result *result = reply->results [i];
        if (result->kind_case != CS__RESULT__KIND_DATA || result->data.len != batch->k [i]) {
            cs_log_error ("the broker returned a modexp result of %zu bytes (expected %zu)",
                          result->kind_case == CS__RESULT__KIND_DATA ? result->data.len : 0, batch->k [i]);
            rv = CKR_DEVICE_ERROR;
            break;
        }
        memcpy (*out_p, result->data.data, batch->k [i]);
        *out_p += batch->k [i];
    }
    if (rv != CKR_OK)
        cs_log_debug ("modexp request of %zu jobs failed: %s", batch->count, cs_rv_name (rv));
    if (reply)
        cs_wire_reply_free (&reply);
    batch->count = 0;
    batch->bytes = 0;
    return rv;
}

/*  The base of item i: its bytes in data.  */
static ProtobufCBinaryData
s_base (const cs_modexp_op_t *op, const uint8_t *data, size_t len, size_t i, size_t *offset_p)
{
    size_t base_len = op->type == CKM_CS_MULTI_MODEXP_ARRAY ? op->sets [i].k
                    : s_array (op->type) ? op->sets [0].k : len;
    ProtobufCBinaryData base = { base_len, (uint8_t *) data + *offset_p };
    *offset_p += base_len;
    return base;
}

CK_RV
cs_modexp_run (const cs_modexp_op_t *op, const uint8_t *data, size_t len, uint8_t *out)
{
    size_t items = cs_modexp_items (op, len), per = items < CS_WIRE_MAX_JOBS ? items : CS_WIRE_MAX_JOBS;
    bool crt = op->type == CKM_CS_RSA_CRT || op->type == CKM_CS_RSA_CRT_ARRAY;
    s_batch_t batch = { calloc (per, sizeof (Cs__ModexpJob)), calloc (per, sizeof (Cs__Job)),
                        calloc (per, sizeof (Cs__Job *)), calloc (per, sizeof (size_t)), 0, 0 };
    CK_RV rv = CKR_HOST_MEMORY;
    size_t offset = 0;
    if (!batch.mjobs || !batch.jobs || !batch.ptrs || !batch.k)
        goto out;
    rv = CKR_OK;
    for (size_t i = 0; rv == CKR_OK && i < items; i++) {
        const s_operands_t *set = &op->sets [op->type == CKM_CS_MULTI_MODEXP_ARRAY ? i : 0];
        size_t j = batch.count;
        cs__modexp_job__init (&batch.mjobs [j]);
        cs__job__init (&batch.jobs [j]);
        batch.mjobs [j].base_value = s_base (op, data, len, i, &offset);
        /*  Operands once per request, unless every item has its own.  */
        if (j == 0 || op->type == CKM_CS_MULTI_MODEXP_ARRAY)
            batch.bytes += s_job_operands (&batch.mjobs [j], set, crt);
        batch.bytes += batch.mjobs [j].base_value.len + 16;
        batch.jobs [j].kind_case = CS__JOB__KIND_MODEXP;
        batch.jobs [j].modexp = &batch.mjobs [j];
        batch.ptrs [j] = &batch.jobs [j];
        batch.k [j] = set->k;
        batch.count++;
        if (batch.count == per || batch.bytes > S_MAX_REQUEST_BYTES || i + 1 == items)
            rv = s_send (&batch, &out);
    }
out:
    free (batch.mjobs);
    free (batch.jobs);
    free (batch.ptrs);
    free (batch.k);
    return rv;
}
