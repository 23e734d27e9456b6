/*  fuzz_needs.h — what a job needs before the broker may answer it CKR_OK
 *  (docs/CONTRACTS.md "Login tickets"), and the kind of result a CKR_OK
 *  answer carries: the contract both frame fuzzers check (cs-fuzz-frames.c
 *  over a socket, fuzz_frontend.c in-process).
 */
#ifndef FUZZ_NEEDS_H_INCLUDED
#define FUZZ_NEEDS_H_INCLUDED

#include <stdbool.h>
#include <stdint.h>
#include <p11-kit/pkcs11.h>
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

/*  True when the broker would check job against a PIN: login and set-PIN
 *  as CKU_SO or CKU_USER (other user types fail before the check).  */
static inline bool
s_checks_pin (const Cs__Job *job)
{
    uint64_t user_type = job->kind_case == CS__JOB__KIND_LOGIN ? job->login->user_type
                       : job->kind_case == CS__JOB__KIND_SET_PIN ? job->set_pin->user_type : UINT64_MAX;
    return user_type == CKU_SO || user_type == CKU_USER;
}

/*  The kind of a CKR_OK result of a job of kind (proto/cryptoserver.proto,
 *  Result), for the kinds both frame fuzzers pin the same way; -1 for the
 *  others, which each fuzzer settles itself (cs-fuzz-frames expects no
 *  result kind, fuzz_frontend.c pins the object jobs and accepts any for
 *  the rest).  */
static inline int
s_result_kind (int kind)
{
    switch (kind) {
        case CS__JOB__KIND_HELLO: return CS__RESULT__KIND_HELLO;
        case CS__JOB__KIND_LOGIN: return CS__RESULT__KIND_LOGIN;
        case CS__JOB__KIND_LIST_KEYS: return CS__RESULT__KIND_KEYS;
        case CS__JOB__KIND_SIGN:
        case CS__JOB__KIND_DECRYPT:
        case CS__JOB__KIND_DERIVE:
        case CS__JOB__KIND_MODEXP: return CS__RESULT__KIND_DATA;
        case CS__JOB__KIND_GENERATE_KEY_PAIR: return CS__RESULT__KIND_GENERATED;
        case CS__JOB__KIND_IMPORT_KEY: return CS__RESULT__KIND_IMPORTED;
        case CS__JOB__KIND_DESTROY_KEY:
        case CS__JOB__KIND_SET_KEY_ATTRIBUTES:
        case CS__JOB__KIND_COPY_KEY: return CS__RESULT__KIND_KEY;
        default: return -1;
    }
}

#endif
