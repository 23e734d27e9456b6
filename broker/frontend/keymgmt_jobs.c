/*  keymgmt_jobs.c — key management jobs of clients: C_GenerateKeyPair
 *  (from the pool, as material on a worker, or resident on the keys/home
 *  board) and the life cycle of keystore rows (import, destroy, set
 *  attributes, copy), and certificates and data objects (objjobs.h).  Rows are written by the slow pool (keyjobs.h,
 *  slow_jobs.h); the results come back here.
 *
 *  Owns: frontend_t.home_board's use, the cache drops after a change.
 *  The completions of its slow jobs and work items are here too (the
 *  s_*_back functions): slow_link.c and dispatch.c call them through the
 *  job's or item's `done`.
 *
 *  May call: pool_jobs.c (fe_pool_take), inventory.c (fe_board_key_find,
 *  fe_boards_that, fe_board_index), dispatch.c (fe_submit),
 *  slow_link.c, reply.c (fe_key_limit_log, fe_request_release,
 *  fe_drained_check).  */
#include "frontend_int.h"

static void s_destroy_resident (frontend_t *self, const char *board_name, const char *ref);

/*  The CKA_xxx flag of a template, or fallback.  */
static bool
s_template_flag (Cs__Attribute **attrs, size_t n, CK_ATTRIBUTE_TYPE type, bool fallback)
{
    for (size_t i = 0; i < n; i++)
        if (attrs [i]->type == type && attrs [i]->value_case == CS__ATTRIBUTE__VALUE_FLAG)
            return attrs [i]->flag;
    return fallback;
}

/*  The result of a generation whose key is slot->info (and, for a session
 *  key, slot->private_pkcs8).  */
static void
s_generated_answer (fe_request_t *request, fe_slot_t *slot, const Cs__GenerateKeyPairJob *job)
{
    Cs__KeyInfo *info = slot->info;
    cs__generate_key_pair_result__init (&slot->generated);
    slot->generated.key = info;
    slot->generated.private_pkcs8 = (ProtobufCBinaryData) { slot->private_pkcs8_len, slot->private_pkcs8 };
    slot->result.kind_case = CS__RESULT__KIND_GENERATED;
    slot->result.generated = &slot->generated;
    zsys_info ("generate: %s key %s for tenant %s (%s)", job->token ? "token" : "session",
               job->token ? info->ref : "-", request->tenant, job->token ? info->home : "returned");
}

/*  A generated key's description is back from the slow pool (a token key
 *  stored durably first: keystore_key_put before the reply; a session key
 *  with its PKCS#8 for the reply, no ref).  */
static void
s_generated_result (frontend_t *self, fe_request_t *request, fe_slot_t *slot, slow_job_t *described)
{
    const Cs__GenerateKeyPairJob *job = described->job->generate_key_pair;
    fe_key_limit_log (self, request, described->rv, described->limit);
    if (described->resident_board)      /* a replayed generation: this attempt's board key goes */
        s_destroy_resident (self, described->resident_board, described->resident_ref);
    slot->info = described->info;
    described->info = NULL;
    slot->result.rv = described->rv;
    //  A failed generation stored nothing (its transaction rolled back): the
    //  cached tenant row stays, so that signing goes on while the keystore
    //  database is unreachable (docs/CONTRACTS.md "Keystore database").
    if (job->token && slot->result.rv == CKR_OK)
        ks_cache_tenant_drop (self->cache, request->tenant);        /* keys_version */
    if (slot->result.rv != CKR_OK)
        return;
    if (!job->token) {
        slot->private_pkcs8 = described->pkcs8;
        slot->private_pkcs8_len = described->pkcs8_len;
        described->pkcs8 = NULL;
    }
    s_generated_answer (request, slot, job);
}

/*  SLOW_GENERATED is back (its completion): the job's result, then the
 *  request's count of it (fe_slow_go).  */
static void
s_generated_back (void *arg, slow_job_t *described)
{
    frontend_t *self = arg;
    fe_request_t *request = described->request;
    s_generated_result (self, request, &request->slots [described->index], described);
    fe_request_release (self, request, true);
}

/*  Hands generated material (PKCS#8, owned: taken; `pooled`: from the key
 *  pool) to the slow pool for its description (s_generated_back).  Returns true when it went, false when
 *  the job failed here (its result is set).  */
static bool
s_generated_material (frontend_t *self, fe_request_t *request, fe_slot_t *slot,
                      unsigned char *pkcs8, size_t len, bool pooled)
{
    slow_job_t *describe = fe_slow_new (self, request, slot->item.index, SLOW_GENERATED, s_generated_back);
    if (!describe) {
        OPENSSL_cleanse (pkcs8, len);
        free (pkcs8);
        slot->result.rv = CKR_HOST_MEMORY;
        return false;
    }
    describe->pkcs8 = pkcs8;
    describe->pkcs8_len = len;
    describe->pooled = pooled;
    describe->pq_pub = slot->item.pub_out;              /* ML-DSA, ML-KEM (issue #23): the item, */
    describe->pq_pub_len = slot->item.pub_out_len;      /* and so the request, keeps it */
    describe->parameter_set = slot->item.parameter_set;
    fe_slow_go (self, describe);
    return true;
}

/*  Hands a key generated on a board to the slow pool for its description
 *  and its row (s_generated_back).  Returns as s_generated_material.  */
static bool
s_generated_resident (frontend_t *self, fe_request_t *request, fe_slot_t *slot)
{
    work_item_t *item = &slot->item;
    slow_job_t *describe = fe_slow_new (self, request, item->index, SLOW_GENERATED, s_generated_back);
    if (!describe) {
        slot->result.rv = CKR_HOST_MEMORY;
        return false;
    }
    snprintf (describe->home, sizeof describe->home, "board:%s", self->args->boards [item->board]->name);
    describe->board_key = &item->generated;
    describe->resident_ref = slot->ref;
    fe_slow_go (self, describe);
    return true;
}

/*  A generation item is back for good (its completion, called by
 *  dispatch.c): the key goes to the slow pool for its description (that
 *  job holds the request), or the job failed; then the request's count of
 *  the item (fe_submit).  */
static void
s_generate_back (void *arg, work_item_t *item)
{
    frontend_t *self = arg;
    fe_request_t *request = item->request;
    fe_slot_t *slot = &request->slots [item->index];
    if (item->rv != CKR_OK)
        slot->result.rv = item->rv;
    else
    if (item->kind == WORK_GENERATE) {
        unsigned char *pkcs8 = item->out;
        item->out = NULL;
        s_generated_material (self, request, slot, pkcs8, item->out_len, false);
    }
    else
        s_generated_resident (self, request, slot);
    fe_request_release (self, request, true);
}

/*  The row of a new shared key is read (SLOW_KEY's completion): its
 *  KeyInfo is the reply; the tenant's cached row goes (keys_version).  */
static void
s_shared_read_back (void *arg, slow_job_t *read)
{
    frontend_t *self = arg;
    fe_request_t *request = read->request;
    fe_slot_t *slot = &request->slots [read->index];
    slot->result.rv = read->rc == 0 && read->info ? CKR_OK : CKR_DEVICE_ERROR;
    ks_cache_tenant_drop (self->cache, request->tenant);
    if (slot->result.rv == CKR_OK) {
        slot->info = read->info;
        read->info = NULL;
        s_generated_answer (request, slot, request->req->jobs [read->index]->generate_key_pair);
    }
    fe_request_release (self, request, true);
}

/*  A shared key's generation is back from the party service (its
 *  completion, called by shared_link.c): the three parties stored their
 *  rows; this broker's row (ref in item->out) is read for the reply.  */
static void
s_shared_back (void *arg, work_item_t *item)
{
    frontend_t *self = arg;
    fe_request_t *request = item->request;
    fe_slot_t *slot = &request->slots [item->index];
    slow_job_t *read = item->rv == CKR_OK ? fe_slow_new (self, request, item->index, SLOW_KEY, s_shared_read_back)
                                          : NULL;
    slot->result.rv = item->rv == CKR_OK && !read ? CKR_HOST_MEMORY : item->rv;
    if (read) {
        snprintf (read->ref, sizeof read->ref, "%.*s", (int) item->out_len, (const char *) item->out);
        read->token = ks_cache_token (self->cache);
        fe_slow_go (self, read);
    }
    free (item->out);
    item->out = NULL;
    fe_request_release (self, request, true);
}

/*  Token key on the board of keys/home: a fresh ref whose random bytes are
 *  the key's CKA_ID there (its user-visible CKA_ID/label live in the row).  */
static CK_RV
s_generate_on_board (frontend_t *self, fe_request_t *request, fe_slot_t *slot, CK_KEY_TYPE type)
{
    work_item_t *item = &slot->item;
    const Cs__GenerateKeyPairJob *job = request->req->jobs [item->index]->generate_key_pair;
    board_t *board = self->args->boards [self->home_board];
    if (!board_generates (board, type, true)) {
        zsys_warning ("generate: board %s (keys/home) cannot generate this key type", board->name);
        return CKR_MECHANISM_INVALID;
    }
    keystore_ref_new (slot->ref);
    keyjobs_resident_id (slot->ref, item->id);
    item->kind = WORK_GENERATE_RESIDENT;
    item->gen.id = item->id;
    item->gen.id_len = 16;
    item->gen.label = slot->ref;
    item->gen.can_sign = s_template_flag (job->private_template, job->n_private_template, CKA_SIGN, true);
    item->gen.can_decrypt = s_template_flag (job->private_template, job->n_private_template,
                                             CKA_DECRYPT, type == CKK_RSA);
    item->boards = UINT64_C (1) << self->home_board;
    return fe_submit (self, item) ? CKR_DEVICE_ERROR : CKR_OK;
}

/*  C_GenerateKeyPair (issue #3): from the pool, on a worker as material, or
 *  resident on the keys/home board; a token RSA pair of a tenant with
 *  keys/shared = 3 is a shared key, made by the three parties (issue #24,
 *  shared_link.c).  A token pair is stored: a USER ticket;
 *  a session pair (token FALSE) is only returned to the client: public
 *  (both checked by its row in job_kinds.c), a pool key taken is charged to
 *  the tenant.  */
void
fe_job_generate (frontend_t *self, fe_request_t *request, size_t index)
{
    fe_slot_t *slot = &request->slots [index];
    work_item_t *item = &slot->item;
    const Cs__GenerateKeyPairJob *job = request->req->jobs [index]->generate_key_pair;
    CK_KEY_TYPE type = CKK_RSA;
    *item = (work_item_t) { .request = request, .index = index, .kind = WORK_GENERATE,
                            .deadline = request->deadline, .done = s_generate_back, .done_arg = self };
    CK_RV rv = keyjobs_keygen (job, &self->rsa_range, &item->gen, &type);
    if (rv == CKR_OK && job->token && type == CKK_RSA && fe_shared_tenant (self, request->tenant)) {
        item->done = s_shared_back;         /* issue #24: the three parties make it */
        rv = fe_shared_generate (self, item);
    }
    else
    if (rv == CKR_OK && job->token && self->home_board >= 0)
        rv = s_generate_on_board (self, request, slot, type);
    else
    if (rv == CKR_OK) {
        size_t len = 0;
        unsigned char *pkcs8 = fe_pool_take (self, job, type, &len);
        if (pkcs8) {
            s_generated_material (self, request, slot, pkcs8, len, true);   /* pending, or failed */
            return;
        }
        item->boards = fe_boards_that (self, FE_CAN_GENERATE, type, 0, request->tenant);
        rv = item->boards && fe_submit (self, item) == 0 ? CKR_OK : CKR_MECHANISM_INVALID;
    }
    if (rv != CKR_OK)           /* else the item sets it (s_generate_back), maybe already */
        slot->result.rv = rv;
}

/*  Sets a key job's result: the key after the change (NULL: gone).  */
static void
s_key_result (fe_slot_t *slot, CK_RV rv, Cs__KeyInfo *info, bool import)
{
    slot->result.rv = rv;
    slot->info = info;
    if (rv != CKR_OK)
        return;
    if (import) {
        cs__import_key_result__init (&slot->imported);
        slot->imported.key = info;
        slot->result.kind_case = CS__RESULT__KIND_IMPORTED;
        slot->result.imported = &slot->imported;
        return;
    }
    cs__key_result__init (&slot->key_result);
    slot->key_result.key = info;
    slot->result.kind_case = CS__RESULT__KIND_KEY;
    slot->result.key = &slot->key_result;
}

/*  Refs of key jobs: a keystore row of the tenant, or a resident key found
 *  on one of its boards (those cannot change: CKR_ACTION_PROHIBITED).  */
static CK_RV
s_key_ref_check (frontend_t *self, fe_request_t *request, const char *ref)
{
    if (strncmp (ref, "ks:", 3) == 0)
        return CKR_OK;
    unsigned char id [CS_KEY_ID_MAX];
    size_t len = 0;
    return fe_board_key_find (self, request->tenant, ref, id, &len) ? CKR_ACTION_PROHIBITED
                                                                   : CKR_OBJECT_HANDLE_INVALID;
}

/*  A background clean-up (WORK_DESTROY_RESIDENT) is back (its completion):
 *  a failure is logged, the item freed; a worker is free again, so the key
 *  pool's refills may go out (as after any background item).  */
static void
s_destroy_back (void *arg, work_item_t *item)
{
    frontend_t *self = arg;
    if (item->rv != CKR_OK)
        zsys_warning ("destroy: board %s could not remove a resident key: %s",
                      self->args->boards [item->board]->name, cs_rv_name (item->rv));
    free (item->out);           /* a clean-up has no result bytes */
    free (item);
    fe_pool_refill (self);
    fe_drained_check (self);
}

/*  Destroys the resident copy of a keystore key on its board, in the
 *  background (the row is already gone; failures are logged).  */
static void
s_destroy_resident (frontend_t *self, const char *board_name, const char *ref)
{
    int board = fe_board_index (self, board_name);
    work_item_t *item = board >= 0 ? calloc (1, sizeof *item) : NULL;
    if (!item || keyjobs_resident_id (ref, item->id)
    ||  board_id_reserved (self->args->boards [board], item->id, 16)) {
        zsys_warning ("destroy: cannot remove key %s from board %s", ref, board_name);
        free (item);
        return;
    }
    item->kind = WORK_DESTROY_RESIDENT;
    item->low = true;
    item->done = s_destroy_back;
    item->done_arg = self;
    item->key = (cs_drv_key_t) { item->id, 16, NULL, 0, NULL };
    item->boards = UINT64_C (1) << board;
    item->deadline = INT64_MAX;
    if (fe_submit (self, item))
        free (item);
}

/*  The ref a key job names ("ks:" for an import or a secret-key generation).  */
static const char *
s_key_job_ref (const Cs__Job *job)
{
    return job->kind_case == CS__JOB__KIND_DESTROY_KEY ? job->destroy_key->ref
         : job->kind_case == CS__JOB__KIND_SET_KEY_ATTRIBUTES ? job->set_key_attributes->ref
         : job->kind_case == CS__JOB__KIND_COPY_KEY ? job->copy_key->ref : "ks:";
}

static void s_key_job_back (void *arg, slow_job_t *change);

/*  Import, destroy, set attributes, copy, token secret keys: a USER
 *  ticket (job_kinds.c) and a key ref of the tenant; the rows change in
 *  the slow pool (s_key_job_back).  */
void
fe_job_key (frontend_t *self, fe_request_t *request, size_t index)
{
    const Cs__Job *job = request->req->jobs [index];
    fe_slot_t *slot = &request->slots [index];
    CK_RV rv = s_key_ref_check (self, request, s_key_job_ref (job));
    slow_job_t *change = rv == CKR_OK ? fe_slow_new (self, request, index, SLOW_KEY_JOB, s_key_job_back) : NULL;
    if (rv == CKR_OK)
        rv = change ? fe_slow_go (self, change) : CKR_HOST_MEMORY;
    if (rv != FE_CKR_PENDING)
        s_key_result (slot, rv, NULL, false);
}

/*  A key job is back from the slow pool (SLOW_KEY_JOB's completion): what
 *  it changed leaves the cache (the key, and the tenant's keys_version),
 *  the resident copy of a destroyed key goes from its board; then the
 *  request's count of it (fe_slow_go).  */
static void
s_key_job_back (void *arg, slow_job_t *change)
{
    frontend_t *self = arg;
    fe_request_t *request = change->request;
    fe_slot_t *slot = &request->slots [change->index];
    const Cs__Job *job = change->job;
    const char *ref = s_key_job_ref (job);
    CK_RV rv = change->rv;
    Cs__KeyInfo *info = change->info;
    change->info = NULL;
    ks_cache_key_drop (self->cache, request->tenant, ref);
    ks_cache_tenant_drop (self->cache, request->tenant);
    fe_key_limit_log (self, request, rv, change->limit);
    if (change->resident_board)
        s_destroy_resident (self, change->resident_board, ref);
    if (rv == CKR_OK || frontend_verbose)
        zsys_info ("key job %d on %s (tenant %s): %s", (int) job->kind_case,
                   info ? info->ref : ref, request->tenant, cs_rv_name (rv));
    s_key_result (slot, rv, info, job->kind_case == CS__JOB__KIND_IMPORT_KEY);
    fe_request_release (self, request, true);
}

/*  SLOW_OBJECT_JOB is back (its completion): the job's result, then the
 *  request's count of it (fe_slow_go).  */
static void
s_object_back (void *arg, slow_job_t *run)
{
    fe_request_t *request = run->request;
    fe_slot_t *slot = &request->slots [run->index];
    objjobs_result (&slot->result, run->rv, &slot->objects, &run->objects);
    fe_request_release (arg, request, true);
}

/*  Certificates and data objects (objjobs.h): run in the slow pool.  A
 *  ticket that no longer holds has ended the login before (FE_NEEDS_PUBLIC,
 *  job_kinds.c), as for key lists; which objects need the CKU_USER ticket
 *  is objjobs_admit's.  */
void
fe_job_object (frontend_t *self, fe_request_t *request, size_t index)
{
    const Cs__Job *job = request->req->jobs [index];
    fe_slot_t *slot = &request->slots [index];
    CK_RV rv = objjobs_admit (job, request->ticket_ok);
    slow_job_t *run = rv == CKR_OK ? fe_slow_new (self, request, index, SLOW_OBJECT_JOB, s_object_back) : NULL;
    if (rv == CKR_USER_NOT_LOGGED_IN)
        rv = fe_no_login_rv (request);
    if (run)
        run->user = request->ticket_ok;
    slot->result.rv = rv != CKR_OK ? rv : run ? fe_slow_go (self, run) : CKR_HOST_MEMORY;
}
