/*  job_kinds.c — the table of job kinds: one row per Cs__Job kind with the
 *  room that starts it, the login it needs, and what the request room and
 *  admission must know of it before it runs (its tenant's row, a worker).
 *  It replaces the per-kind switches of request.c and admission.c, in the
 *  manner of the driver table (shim-drivers/cs_driver.h) and the mechanism
 *  table (common/cs_mech.c).  A new job kind is one room (or a start
 *  function in the room of its kind) and one row here (docs/FRONTEND.md).
 *
 *  Owns: the table, the login contract of each kind (docs/CONTRACTS.md
 *  "Login tickets"; tests/fuzz/fuzz_needs.h checks it from outside).
 *  May call: the rooms' start functions (login.c, inventory.c, route.c,
 *  keymgmt_jobs.c), by address only: request.c calls them through a row.  */
#include "frontend_int.h"

/*  True when a sign, decrypt, decapsulate or derive job carries its key (key_pkcs8: a
 *  session key of the client's) rather than naming a server-held one.  */
static bool
s_carries_key (const Cs__Job *job)
{
    ProtobufCBinaryData der = job->kind_case == CS__JOB__KIND_SIGN ? job->sign->key_pkcs8
                            : job->kind_case == CS__JOB__KIND_DECRYPT ? job->decrypt->key_pkcs8
                            : job->kind_case == CS__JOB__KIND_DECAPSULATE ? job->decapsulate->key_pkcs8
                            : job->derive->key_pkcs8;
    return der.len > 0;
}

/*  A secret-key job with its key's value in the job (no key_id).  */
static bool
s_sym_carries_key (const Cs__Job *job)
{
    return job->sym->key_id.len == 0;
}

/*  A session key pair (token FALSE): returned to the client, stored nowhere.  */
static bool
s_session_pair (const Cs__Job *job)
{
    return !job->generate_key_pair->token;
}

#define K(KIND) CS__JOB__KIND_ ## KIND, #KIND

/*  The rows, in the wire's order of kinds.  Columns: kind, name, start,
 *  needs, public_when (the job needs no login after all: it reaches no
 *  server-held key and stores nothing), flags.  */
#define ROW FE_KIND_TENANT_ROW
#define WORKER FE_KIND_WORKER
static const fe_job_kind_t s_kinds [] = {
    { K (HELLO),              fe_job_hello,     FE_NEEDS_NOTHING, NULL,              ROW    },
    { K (LOGIN),              fe_job_login,     FE_NEEDS_PIN,     NULL,              0      },
    { K (LIST_KEYS),          fe_job_list_keys, FE_NEEDS_PUBLIC,  NULL,              ROW    },
    { K (SIGN),               fe_job_crypto,    FE_NEEDS_USER,    s_carries_key,     WORKER },
    { K (DECRYPT),            fe_job_crypto,    FE_NEEDS_USER,    s_carries_key,     WORKER },
    { K (GENERATE_KEY_PAIR),  fe_job_generate,  FE_NEEDS_USER,    s_session_pair,    WORKER },
    { K (IMPORT_KEY),         fe_job_key,       FE_NEEDS_USER,    NULL,              0      },
    { K (DESTROY_KEY),        fe_job_key,       FE_NEEDS_USER,    NULL,              0      },
    { K (SET_KEY_ATTRIBUTES), fe_job_key,       FE_NEEDS_USER,    NULL,              0      },
    { K (COPY_KEY),           fe_job_key,       FE_NEEDS_USER,    NULL,              0      },
    { K (INIT_PIN),           fe_job_init_pin,  FE_NEEDS_SO,      NULL,              0      },
    { K (SET_PIN),            fe_job_set_pin,   FE_NEEDS_PIN,     NULL,              0      },
    { K (DERIVE),             fe_job_crypto,    FE_NEEDS_USER,    s_carries_key,     WORKER },
    { K (MODEXP),             fe_job_modexp,    FE_NEEDS_USER,    NULL,              0      },
    { K (PUT_OBJECT),         fe_job_object,    FE_NEEDS_PUBLIC,  NULL,              0      },
    { K (LIST_OBJECTS),       fe_job_object,    FE_NEEDS_PUBLIC,  NULL,              0      },
    { K (DESTROY_OBJECT),     fe_job_object,    FE_NEEDS_PUBLIC,  NULL,              0      },
    { K (SYM),                fe_job_sym,       FE_NEEDS_USER,    s_sym_carries_key, WORKER },
    { K (GENERATE_KEY),       fe_job_key,       FE_NEEDS_USER,    NULL,              0      },
    { K (VERIFY),             fe_job_verify,    FE_NEEDS_PUBLIC,  NULL,              WORKER },
    { K (ENCAPSULATE),        fe_job_encapsulate, FE_NEEDS_PUBLIC, NULL,             WORKER },
    { K (DECAPSULATE),        fe_job_crypto,    FE_NEEDS_USER,    s_carries_key,     WORKER },
};
#undef ROW
#undef WORKER

/*  The row of job's kind; NULL for a kind this broker does not run
 *  (cs_wire_request_check rejects those before).  */
const fe_job_kind_t *
fe_job_kind (const Cs__Job *job)
{
    for (size_t i = 0; i < sizeof s_kinds / sizeof s_kinds [0]; i++)
        if ((int) s_kinds [i].kind == (int) job->kind_case)
            return &s_kinds [i];
    return NULL;
}

/*  What job needs of the request's login: the row's `needs`, or
 *  FE_NEEDS_PUBLIC when its public_when holds.  */
fe_needs_t
fe_job_needs (const fe_job_kind_t *kind, const Cs__Job *job)
{
    return kind->public_when && kind->public_when (job) ? FE_NEEDS_PUBLIC : kind->needs;
}

/*  True when a job of req has `flag` (FE_KIND_*) in its row.  */
bool
fe_jobs_any (const Cs__Request *req, unsigned flag)
{
    for (size_t i = 0; i < req->n_jobs; i++) {
        const fe_job_kind_t *kind = fe_job_kind (req->jobs [i]);
        if (kind && (kind->flags & flag))
            return true;
    }
    return false;
}
