/*  route.c — the room of the jobs that run on a board with a key or
 *  operands of the client's: sign, decrypt and derive (their key and
 *  boards: key_route.c), raw modexp, and secret-key (AES, HMAC) jobs with
 *  a session key's value or a token secret key's "ks:" ref; a keystore key
 *  not in the cache is read by the slow pool first (docs/CONTRACTS.md
 *  "Routing").
 *
 *  Owns: the per-item key material (read copies).
 *  The completions of its work items and key reads are here too (s_item_back,
 *  s_key_read_done): dispatch.c and slow_link.c call them through the
 *  item's or job's `done`.
 *
 *  May call: key_route.c, shared_link.c (fe_shared_crypto), board.h capabilities, ks_cache.h, inventory.c
 *  (fe_open_boards, fe_boards_that), slow_link.c (fe_slow_new,
 *  fe_slow_go: a key read), dispatch.c (fe_submit, fe_item_wipe_material),
 *  reply.c (fe_log_due, fe_request_job_done, fe_request_release).  */
#include "modexp_job.h"
#include "symjobs.h"
#include "frontend_int.h"

/*  Submits a routed crypto item (rv: its routing; FE_CKR_SHARED: to the
 *  party service), or sets the job's result when it cannot run.  Only boards that run its mechanism may take
 *  it: CKR_MECHANISM_INVALID when none of the key's boards does (PKCS#11
 *  2.40 §5.11 C_SignInit).  Returns true when the item is out.  */
static bool
s_crypto_submit (frontend_t *self, fe_slot_t *slot, CK_RV rv)
{
    work_item_t *item = &slot->item;
    if (rv == FE_CKR_SHARED && (rv = fe_shared_crypto (self, item)) == CKR_OK)
        return true;                        /* a shared key: out to the party service, counted */
    if (rv == CKR_OK && !(item->boards &= fe_mech_boards (self, item)))
        rv = CKR_MECHANISM_INVALID;
    int submitted = rv == CKR_OK ? fe_submit (self, item) : 0;
    if (submitted)      /* no board holds the key, or every one is out of rotation */
        rv = submitted == -2 ? CKR_DEVICE_ERROR : CKR_KEY_HANDLE_INVALID;
    if (rv == CKR_OK)
        return true;
    fe_item_wipe_material (self, item);
    slot->result.rv = rv;
    return false;
}

/*  A sign, decrypt, derive, modexp or secret-key item is back for good
 *  (its completion, called by dispatch.c): its result is the job's; with
 *  per_job_replies its reply leaves now; then the request's count of it
 *  (fe_submit).  */
static void
s_item_back (void *arg, work_item_t *item)
{
    frontend_t *self = arg;
    fe_request_t *request = item->request;
    Cs__Result *result = &request->slots [item->index].result;
    result->rv = item->rv;
    if (item->rv == CKR_OK) {
        result->kind_case = CS__RESULT__KIND_DATA;
        result->data.data = item->out;
        result->data.len = item->out_len;
    }
    fe_request_job_done (self, request, item->index);
    fe_request_release (self, request, true);
}

/*  A new work item of job `index` of request, whose completion is
 *  s_item_back.  */
static void
s_item_new (frontend_t *self, fe_request_t *request, size_t index, work_kind_t kind, work_item_t *item)
{
    *item = (work_item_t) { .request = request, .index = index, .kind = kind, .deadline = request->deadline,
                            .done = s_item_back, .done_arg = self };
}

static void s_key_read_done (void *arg, slow_job_t *job);

/*  A keystore key that is not cached (*rv FE_CKR_PENDING, its ref in
 *  item->ref): the slow pool reads it and s_key_read_done goes on; true
 *  then.  False, with *rv unchanged or CKR_HOST_MEMORY, when the job is to
 *  be finished here.  */
static bool
s_key_read (frontend_t *self, fe_request_t *request, size_t index, work_item_t *item, CK_RV *rv)
{
    if (*rv != FE_CKR_PENDING)
        return false;
    slow_job_t *read = fe_slow_new (self, request, index, SLOW_KEY, s_key_read_done);
    if (!read) {
        *rv = CKR_HOST_MEMORY;
        return false;
    }
    snprintf (read->ref, sizeof read->ref, "%s", item->ref);
    read->token = ks_cache_token (self->cache);
    fe_slow_go (self, read);
    return true;
}

/*  Makes a work item of a sign or decrypt job and routes it; a keystore
 *  key that is not cached is read by the slow pool first.  Its login
 *  (a job naming a server-held key, ks: or board:, needs the CKU_USER
 *  ticket; one that carries its key is public) was checked before, by its
 *  row in job_kinds.c.  */
void
fe_job_crypto (frontend_t *self, fe_request_t *request, size_t index)
{
    fe_slot_t *slot = &request->slots [index];
    work_item_t *item = &slot->item;
    const Cs__Job *job = request->req->jobs [index];
    s_item_new (self, request, index, job->kind_case == CS__JOB__KIND_SIGN ? WORK_SIGN
                                    : job->kind_case == CS__JOB__KIND_DECRYPT ? WORK_DECRYPT
                                    : job->kind_case == CS__JOB__KIND_DECAPSULATE ? WORK_DECAPSULATE : WORK_DERIVE, item);
    fe_item_inputs (item, job);
    CK_RV rv = fe_route_crypto (self, request, item, job);
    if (s_key_read (self, request, index, item, &rv))
        return;
    s_crypto_submit (self, slot, rv);     /* an item out counts itself in pending (fe_submit) */
}

/*  A verification job (issue #23; public, job_kinds.c): CKM_ML_DSA, which
 *  the module cannot compute, checked by a board that lists it with
 *  CKF_VERIFY, open to the tenant (the message is the tenant's).  No key
 *  of the keystore is read: the job carries the public key.  None:
 *  CKR_MECHANISM_INVALID.  */
void
fe_job_verify (frontend_t *self, fe_request_t *request, size_t index)
{
    fe_slot_t *slot = &request->slots [index];
    work_item_t *item = &slot->item;
    const Cs__VerifyJob *job = request->req->jobs [index]->verify;
    s_item_new (self, request, index, WORK_VERIFY, item);
    item->mech = (cs_drv_mech_t) { .type = job->mechanism->type, .hedge = job->mechanism->hedge,
                                   .context = job->mechanism->context.len ? job->mechanism->context.data : NULL,
                                   .context_len = job->mechanism->context.len };
    item->in = job->data.data;
    item->in_len = job->data.len;
    item->pub = job->public_value.data;
    item->pub_len = job->public_value.len;
    item->parameter_set = job->parameter_set;
    item->sig = job->signature.data;
    item->sig_len = job->signature.len;
    item->boards = fe_boards_that (self, FE_CAN_RUN, item->mech.type, CKF_VERIFY, request->tenant);
    if (item->mech.type != CKM_ML_DSA || !item->boards || fe_submit (self, item))
        slot->result.rv = CKR_MECHANISM_INVALID;
}

/*  An encapsulation job (issue #23; public, job_kinds.c): CKM_ML_KEM to the
 *  public key the job carries, on a board that lists it with
 *  CKF_ENCAPSULATE, open to the tenant.  None: CKR_MECHANISM_INVALID.  The
 *  result is the ciphertext and the secret (proto EncapsulateJob).  */
void
fe_job_encapsulate (frontend_t *self, fe_request_t *request, size_t index)
{
    fe_slot_t *slot = &request->slots [index];
    work_item_t *item = &slot->item;
    const Cs__EncapsulateJob *job = request->req->jobs [index]->encapsulate;
    s_item_new (self, request, index, WORK_ENCAPSULATE, item);
    item->mech = (cs_drv_mech_t) { .type = CKM_ML_KEM };
    item->pub = job->public_value.data;
    item->pub_len = job->public_value.len;
    item->parameter_set = job->parameter_set;
    item->boards = fe_boards_that (self, FE_CAN_RUN, CKM_ML_KEM, CKF_ENCAPSULATE, request->tenant);
    if (!item->boards || fe_submit (self, item))
        slot->result.rv = CKR_MECHANISM_INVALID;
}

/*  A raw modexp job (issue #12; a USER ticket, job_kinds.c): one work item
 *  on any board that runs modexp (modexp_job.h).  */
void
fe_job_modexp (frontend_t *self, fe_request_t *request, size_t index)
{
    fe_slot_t *slot = &request->slots [index];
    work_item_t *item = &slot->item;
    s_item_new (self, request, index, WORK_MODEXP, item);
    CK_RV rv = modexp_job_operands (request->req, index, &item->modexp);
    item->boards = fe_boards_that (self, FE_CAN_MODEXP, 0, 0, request->tenant);
    if (rv == CKR_OK && !item->boards)
        rv = CKR_MECHANISM_INVALID;
    if (rv == CKR_OK && fe_submit (self, item))
        rv = CKR_MECHANISM_INVALID;
    if (rv != CKR_OK)
        slot->result.rv = rv;
}

/*  Submits a prepared SymJob item (rv: its preparation), or sets the
 *  job's result (and drops the key it pinned) when it cannot run.  */
static void
s_sym_submit (frontend_t *self, fe_slot_t *slot, CK_RV rv)
{
    work_item_t *item = &slot->item;
    if (rv == CKR_OK && (!item->boards || fe_submit (self, item)))
        rv = CKR_MECHANISM_INVALID;
    if (rv == CKR_OK)
        return;
    fe_item_wipe_material (self, item);
    slot->result.rv = rv;
}

/*  A secret-key job (issue #10, symjobs.h): the key (its value in the
 *  job: public; or a token secret key of the tenant read through the key
 *  cache, the slow pool on a miss: a USER ticket; job_kinds.c checked
 *  which), then one work item on any board that runs the mechanism.  */
void
fe_job_sym (frontend_t *self, fe_request_t *request, size_t index)
{
    fe_slot_t *slot = &request->slots [index];
    work_item_t *item = &slot->item;
    s_item_new (self, request, index, WORK_SYM, item);
    const Cs__SymJob *sym = request->req->jobs [index]->sym;
    CK_RV rv = symjob_prepare (sym, &item->sym);
    for (size_t b = 0; rv == CKR_OK && b < self->args->n_boards; b++)
        if (board_runs_sym (self->args->boards [b], item->sym.mechanism))
            item->boards |= UINT64_C (1) << b;
    item->boards &= fe_open_boards (self, request->tenant);     /* the key and data are the tenant's */
    if (rv == CKR_OK && !item->boards)
        rv = CKR_MECHANISM_INVALID;
    if (rv == CKR_OK && request->req->jobs [index]->sym->key_id.len)
        rv = fe_route_sym_ref (self, request, item);
    if (s_key_read (self, request, index, item, &rv))
        return;
    s_sym_submit (self, slot, rv);
}

/*  The slow pool read a keystore key for a crypto or secret-key job (the
 *  SLOW_KEY job's completion): cached (unless a drop happened meanwhile:
 *  then the item owns the copy), routed and submitted; or the job fails.  */
static void
s_key_read_done (void *arg, slow_job_t *job)
{
    frontend_t *self = arg;
    fe_request_t *request = job->request;
    fe_slot_t *slot = &request->slots [job->index];
    work_item_t *item = &slot->item;
    CK_RV rv = job->rc == KEYSTORE_DAMAGED || job->rc == KEYSTORE_UNAVAILABLE ? CKR_DEVICE_ERROR
                                                                              : CKR_KEY_HANDLE_INVALID;
    if (job->rc == 0) {
        ks_key_t *key = ks_cache_key_put (self->cache, job->token, request->tenant, job->ref, &job->info,
                                          job->pkcs8, job->pkcs8_len);
        const Cs__KeyInfo *info = job->info;
        const uint8_t *pkcs8 = job->pkcs8;
        size_t len = job->pkcs8_len;
        if (key) {
            item->cached = key;
            info = ks_key_info (key);
            pkcs8 = ks_key_pkcs8 (key, &len);
        }
        else {                      /* the item owns the read copy */
            item->material = job->pkcs8;
            item->material_len = job->pkcs8_len;
            job->pkcs8 = NULL;
        }
        rv = item->kind == WORK_SYM ? fe_sym_key (self, item, info, pkcs8, len)
           : fe_route_keystore_key (self, request, item, job->ref, info, pkcs8, len);
        if (!key)
            item->pub = NULL;       /* it pointed into job->info, freed with this job: the board
                                       derives the public key of the material (pq_work.h) */
    }
    if (item->kind == WORK_SYM)
        s_sym_submit (self, slot, rv);
    else
        s_crypto_submit (self, slot, rv);     /* an item out counts itself in pending (fe_submit) */
    fe_request_release (self, request, true);      /* the slow read's count (fe_slow_go) */
}
