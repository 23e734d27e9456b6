/*  modexp_job.c — the operands of ModexpJobs (modexp_job.h).  */
#include <openssl/crypto.h>
#include "modexp_job.h"

static bool
s_has_operands (const Cs__ModexpJob *job)
{
    return job->modulus.len > 0 || job->prime1.len > 0;
}

#define S_SET(field, bytes) do { op->field = (bytes).data; op->field##_len = (bytes).len; } while (0)

CK_RV
modexp_job_operands (const Cs__Request *req, size_t index, cs_modexp_t *op)
{
    const Cs__ModexpJob *own = index < req->n_jobs && req->jobs [index]->kind_case == CS__JOB__KIND_MODEXP
                             ? req->jobs [index]->modexp : NULL;
    const Cs__ModexpJob *from = own;
    memset (op, 0, sizeof *op);
    if (!own)
        return CKR_MECHANISM_PARAM_INVALID;
    for (size_t i = index + 1; i-- > 0 && !s_has_operands (from); )
        if (req->jobs [i]->kind_case == CS__JOB__KIND_MODEXP)
            from = req->jobs [i]->modexp;
    if (!s_has_operands (from))
        return CKR_MECHANISM_PARAM_INVALID;
    S_SET (base, own->base_value);
    if (from->modulus.len) {
        S_SET (exponent, from->exponent);
        S_SET (modulus, from->modulus);
        if (!op->exponent)
            op->exponent = (const unsigned char *) "";     /* exponent 0: not NULL */
        return CKR_OK;
    }
    S_SET (p, from->prime1);
    S_SET (q, from->prime2);
    S_SET (dp, from->exponent1);
    S_SET (dq, from->exponent2);
    S_SET (qinv, from->coefficient);
    S_SET (public_exponent, from->public_exponent);
    return CKR_OK;
}

void
modexp_job_wipe (Cs__Request *req)
{
    for (size_t i = 0; i < req->n_jobs; i++) {
        if (req->jobs [i]->kind_case != CS__JOB__KIND_MODEXP)
            continue;
        Cs__ModexpJob *job = req->jobs [i]->modexp;
        ProtobufCBinaryData *all [] = { &job->base_value, &job->exponent, &job->prime1, &job->prime2,
                                        &job->exponent1, &job->exponent2, &job->coefficient };
        for (size_t k = 0; k < sizeof all / sizeof all [0]; k++)
            if (all [k]->data && all [k]->len)
                OPENSSL_cleanse (all [k]->data, all [k]->len);
    }
}
