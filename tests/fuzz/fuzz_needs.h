/*  fuzz_needs.h — what a job needs before the broker may answer it CKR_OK
 *  (docs/CONTRACTS.md "Login tickets"): the one contract both frame fuzzers
 *  check (cs-fuzz-frames.c over a socket, fuzz_frontend.c in-process).
 */
#ifndef FUZZ_NEEDS_H_INCLUDED
#define FUZZ_NEEDS_H_INCLUDED

#include "cs_wire.h"

/*  S_NEEDS_PUBLIC: no ticket, or the real one (a public job).  */
typedef enum { S_NEEDS_NOTHING, S_NEEDS_PUBLIC, S_NEEDS_USER, S_NEEDS_SO, S_NEEDS_PIN } s_needs_t;

/*  What job needs before CKR_OK (docs/CONTRACTS.md "Login tickets";
 *  broker/frontend/job_kinds.c, the table the broker reads): jobs naming a server-held key or storing
 *  something the CKU_USER ticket; jobs carrying their key material (key_pkcs8,
 *  a SymJob without key_id) and session key-pair generation (token FALSE)
 *  no ticket, or the real one.  */
static inline s_needs_t
s_needs (const Cs__Job *job)
{
    switch (job->kind_case) {
        case CS__JOB__KIND_SIGN:
            return job->sign->key_pkcs8.len ? S_NEEDS_PUBLIC : S_NEEDS_USER;
        case CS__JOB__KIND_DECRYPT:
            return job->decrypt->key_pkcs8.len ? S_NEEDS_PUBLIC : S_NEEDS_USER;
        case CS__JOB__KIND_DERIVE:
            return job->derive->key_pkcs8.len ? S_NEEDS_PUBLIC : S_NEEDS_USER;
        case CS__JOB__KIND_SYM:
            return job->sym->key_id.len ? S_NEEDS_USER : S_NEEDS_PUBLIC;
        case CS__JOB__KIND_DECAPSULATE:         /* issue #23 */
            return job->decapsulate->key_pkcs8.len ? S_NEEDS_PUBLIC : S_NEEDS_USER;
        case CS__JOB__KIND_VERIFY:
        case CS__JOB__KIND_ENCAPSULATE:         /* a public key, no secret */
            return S_NEEDS_PUBLIC;
        case CS__JOB__KIND_GENERATE_KEY_PAIR:
            return job->generate_key_pair->token ? S_NEEDS_USER : S_NEEDS_PUBLIC;
        case CS__JOB__KIND_GENERATE_KEY:
        case CS__JOB__KIND_PUT_OBJECT:
        case CS__JOB__KIND_DESTROY_OBJECT:
        case CS__JOB__KIND_IMPORT_KEY:
        case CS__JOB__KIND_DESTROY_KEY:
        case CS__JOB__KIND_SET_KEY_ATTRIBUTES:
        case CS__JOB__KIND_COPY_KEY:
        case CS__JOB__KIND_MODEXP:
            return S_NEEDS_USER;
        case CS__JOB__KIND_INIT_PIN:
            return S_NEEDS_SO;
        case CS__JOB__KIND_LOGIN:
        case CS__JOB__KIND_SET_PIN:
            return S_NEEDS_PIN;
        default:
            return S_NEEDS_NOTHING;             /* hello, list-keys, list-objects */
    }
}

#endif
