/*  slow_jobs.c — the keystore and PIN work of requests, run in a slow-pool
 *  thread (slow_jobs.h).  Nothing here touches the frontend's state.  */
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include "key_info.h"
#include "keyjobs.h"
#include "secretkeys.h"
#include "slow_jobs.h"
#include "quota.h"
#include "metrics_quota.h"
#include "keyattrs.h"
#include "pool_store.h"

slow_job_t *
slow_job_new (slow_kind_t kind, void *request, size_t index, const Cs__Job *job, const char *tenant)
{
    slow_job_t *self = calloc (1, sizeof *self);
    if (!self)
        return NULL;
    self->base.run = slow_job_run;
    self->base.heavy = kind == SLOW_LOGIN || kind == SLOW_INIT_PIN || kind == SLOW_SET_PIN;
    self->base.owner = tenant;
    self->kind = kind;
    self->request = request;
    self->index = index;
    self->job = job;
    self->tenant = tenant;
    return self;
}

void
slow_job_destroy (slow_job_t **self_p)
{
    slow_job_t *self = *self_p;
    if (!self)
        return;
    if (self->info)
        cs__key_info__free_unpacked (self->info, NULL);
    if (self->pkcs8) {
        OPENSSL_cleanse (self->pkcs8, self->pkcs8_len);
        free (self->pkcs8);
    }
    for (size_t i = 0; i < self->n_listed; i++)
        cs__key_info__free_unpacked (self->listed [i], NULL);
    free (self->listed);
    free (self->next);
    free (self->resident_board);
    objjobs_out_free (&self->objects);
    broker_audit_done (NULL, self->audit);     //  not handed back: freed
    keystore_changes_free (&self->changes, self->n_changes);
    keystore_changes_free (&self->own, self->n_own);
    free (self);
    *self_p = NULL;
}

/*  C_SetPIN: the old PIN (counted like a login), then the new one.  */
static void
s_set_pin (slow_job_t *self, keystore_t *ks)
{
    const Cs__SetPinJob *job = self->job->set_pin;
    self->rv = keystore_pin_check (ks, self->tenant, job->user_type, job->old_pin.data, job->old_pin.len,
                                   &self->pin);
    self->refused = self->rv != CKR_OK;
    if (self->rv == CKR_OK)
        self->rv = keystore_pin_set (ks, self->tenant, job->user_type, job->new_pin.data,
                                     job->new_pin.len, &self->epoch);
}

/*  Import, destroy, set attributes, copy (keyjobs.h); token secret keys
 *  (secretkeys.h).  */
static void
s_key_job (slow_job_t *self, keystore_t *ks)
{
    const Cs__Job *job = self->job;
    keyattrs_usage_set ((cs_usage_policy_t) self->usage);
    if (job->kind_case == CS__JOB__KIND_IMPORT_KEY || job->kind_case == CS__JOB__KIND_GENERATE_KEY)
        self->rv = quota_keys_check (ks, self->tenant, self->max_keys);
    if (self->rv != CKR_OK) {
        self->quota_refused = self->rv == CKR_DEVICE_MEMORY ? 1 + METRICS_QUOTA_KEYS : 0;
        return;
    }
    switch (job->kind_case) {
        case CS__JOB__KIND_IMPORT_KEY:
            self->rv = job->import_key->secret_value.len
                     ? secretkeys_import (ks, self->tenant, job->import_key, &self->info)
                     : keyjobs_import (ks, self->tenant, job->import_key, &self->info);
            break;
        case CS__JOB__KIND_GENERATE_KEY:
            self->rv = secretkeys_generate (ks, self->tenant, job->generate_key, &self->info);
            break;
        case CS__JOB__KIND_DESTROY_KEY:
            self->rv = keyjobs_destroy (ks, self->tenant, job->destroy_key, &self->info,
                                        &self->resident_board);
            break;
        case CS__JOB__KIND_SET_KEY_ATTRIBUTES:
            self->rv = keyjobs_set (ks, self->tenant, job->set_key_attributes, &self->info);
            break;
        default:
            self->rv = keyjobs_copy (ks, self->tenant, job->copy_key, &self->info);
    }
    self->limit = self->rv != CKR_OK ? keyjobs_limit_problem () : NULL;
}

/*  A key from the pool is issued once, ever (issue 19): its fingerprint is
 *  recorded before the reply (in the job's idempotent transaction when it
 *  has one; pool_store_fingerprint).  A fingerprint recorded before (the pool held a key already
 *  issued) is refused with CKR_DEVICE_ERROR and an E: line; so is a key
 *  whose record cannot be written (fail closed).  */
static CK_RV
s_issue_once (slow_job_t *self, keystore_t *ks)
{
    uint8_t fp [32];
    char hex [17];
    int got = pool_store_fingerprint (self->pkcs8, self->pkcs8_len, fp, hex) == 0
            ? keystore_issued_record (ks, self->tenant, fp) : -1;
    if (got == 1)
        zsys_error ("pool: a pre-generated key (public key SHA-256 %s...) was issued before: "
                    "refused for tenant %s", hex, self->tenant);
    else
    if (got < 0)
        zsys_error ("pool: cannot record a pre-generated key issued to tenant %s: refused", self->tenant);
    return got == 0 ? CKR_OK : CKR_DEVICE_ERROR;
}

/*  A generated key: its description with the application's templates
 *  (keyjobs_info_new), stored durably before the reply when it is a token
 *  key (keystore_key_put; a key on a board has a row without material).
 *  A session key keeps no ref; its PKCS#8 stays in pkcs8 for the reply.  */
static void
s_generated (slow_job_t *self, keystore_t *ks)
{
    const Cs__GenerateKeyPairJob *job = self->job->generate_key_pair;
    bool resident = self->board_key != NULL;
    keyattrs_usage_set ((cs_usage_policy_t) self->usage);
    if (job->token && (self->rv = quota_keys_check (ks, self->tenant, self->max_keys)) != CKR_OK) {
        self->quota_refused = self->rv == CKR_DEVICE_MEMORY ? 1 + METRICS_QUOTA_KEYS : 0;
        return;
    }
    bool pq = self->pq_pub && !resident;        /* ML-DSA, ML-KEM: OpenSSL 3.0 reads neither (issue #23) */
    EVP_PKEY *pkey = pq ? NULL : resident ? keyjobs_pkey_from_board_key (self->board_key)
                                          : cs_pkey_from_pkcs8 (self->pkcs8, self->pkcs8_len);
    if (pq)
        self->rv = keyjobs_info_new_pq (job->mechanism == CKM_ML_DSA_KEY_PAIR_GEN ? CKK_ML_DSA : CKK_ML_KEM,
                                        self->parameter_set, self->pq_pub, self->pq_pub_len,
                                        job->token ? "keystore" : "", job->token, job->public_template,
                                        job->n_public_template, job->private_template,
                                        job->n_private_template, &self->info);
    else
        self->rv = pkey ? keyjobs_info_new (pkey, resident ? self->resident_ref : NULL,
                                        resident ? self->home : job->token ? "keystore" : "", true,
                                        resident || job->token, false, job->public_template,
                                        job->n_public_template, job->private_template,
                                        job->n_private_template, &self->info)
                    : CKR_DEVICE_ERROR;
    self->limit = (pkey || pq) && self->rv != CKR_OK ? keyjobs_limit_problem () : NULL;
    if (self->rv == CKR_OK && self->pooled)
        self->rv = s_issue_once (self, ks);
    EVP_PKEY_free (pkey);
    if (self->rv == CKR_OK && job->token
    &&  keystore_key_put (ks, self->tenant, self->info, resident ? NULL : self->pkcs8,
                          resident ? 0 : self->pkcs8_len))
        self->rv = CKR_DEVICE_ERROR;
    if (self->rv == CKR_OK && !job->token) {    /* a session key: nothing stored, no ref */
        free (self->info->ref);
        self->info->ref = strdup ("");
        if (!self->info->ref)
            self->rv = CKR_HOST_MEMORY;
    }
    if ((self->rv != CKR_OK || job->token) && self->pkcs8) {
        OPENSSL_cleanse (self->pkcs8, self->pkcs8_len);
        free (self->pkcs8);
        self->pkcs8 = NULL;
        self->pkcs8_len = 0;
    }
}

/*  Takes the result a keystore recorded for this job's idempotency id
 *  (a packed cs.Result) as this job's.  */
static void
s_replay (slow_job_t *self, const uint8_t *recorded, size_t len)
{
    Cs__Result *result = cs__result__unpack (NULL, len, recorded);
    if (self->info)
        cs__key_info__free_unpacked (self->info, NULL);
    self->info = NULL;
    self->limit = NULL;
    free (self->resident_board);        /* nothing to remove from a board: the first attempt did */
    self->resident_board = NULL;
    if (!result) {
        zsys_error ("idempotent job of tenant %s: the recorded result does not decode", self->tenant);
        self->rv = CKR_DEVICE_ERROR;
        return;
    }
    self->rv = (CK_RV) result->rv;
    if (result->kind_case == CS__RESULT__KIND_KEY && result->key) {
        self->info = result->key->key;  /* taken: protobuf-c frees each message on its own */
        result->key->key = NULL;
    }
    self->replayed = true;
    cs__result__free_unpacked (result, NULL);
}

/*  The result to record for this job: its rv and the key after it (absent
 *  after the destroy of a whole pair), packed; NULL when out of memory.  */
static uint8_t *
s_result_pack (slow_job_t *self, size_t *len_p)
{
    Cs__Result result = CS__RESULT__INIT;
    Cs__KeyResult key = CS__KEY_RESULT__INIT;
    result.rv = self->rv;
    key.key = self->info;
    result.kind_case = CS__RESULT__KIND_KEY;
    result.key = &key;
    size_t len = cs__result__get_packed_size (&result);
    uint8_t *packed = malloc (len ? len : 1);
    if (packed)
        *len_p = cs__result__pack (&result, packed);
    return packed;
}

/*  Runs a key-management job that carries an idempotency id exactly once
 *  per id and tenant (keystore_idem_begin): a recorded id replays the
 *  recorded result; otherwise the job's keystore writes and the record of
 *  its result commit in one transaction, and a job that failed records
 *  nothing (its changes roll back; a retry runs it again).  */
static void
s_idempotent (slow_job_t *self, keystore_t *ks, void (*run) (slow_job_t *, keystore_t *))
{
    const ProtobufCBinaryData *id = &self->job->idempotency_id;
    uint8_t *recorded = NULL, *packed = NULL;
    size_t recorded_len = 0, packed_len = 0;
    if (id->len > KEYSTORE_IDEM_ID_MAX) {
        self->rv = CKR_ARGUMENTS_BAD;           /* docs/CONTRACTS.md "Failover" */
        return;
    }
    int got = keystore_idem_begin (ks, self->tenant, id->data, id->len, &recorded, &recorded_len);
    if (got == 0) {
        run (self, ks);
        packed = self->rv == CKR_OK ? s_result_pack (self, &packed_len) : NULL;
        if (self->rv == CKR_OK && !packed)
            self->rv = CKR_HOST_MEMORY;
        got = keystore_idem_end (ks, packed, packed_len, &recorded, &recorded_len);
        free (packed);
        if (got < 0 && self->rv == CKR_OK) {
            self->rv = CKR_DEVICE_ERROR;        /* rolled back: nothing changed */
            free (self->resident_board);
            self->resident_board = NULL;
        }
    }
    else
    if (got < 0)
        self->rv = CKR_DEVICE_ERROR;
    if (got == 1) {
        zsys_info ("idempotent job %d of tenant %s: done before, its recorded result replayed",
                   (int) self->job->kind_case, self->tenant);
        s_replay (self, recorded, recorded_len);
        //  A key this attempt made on a board is nobody's: the frontend
        //  removes it (resident_ref names it there).
        if (self->kind == SLOW_GENERATED && self->board_key)
            self->resident_board = strdup (self->home + 6);
    }
    free (recorded);
}

void
slow_job_run (slow_item_t *item, keystore_t *ks)
{
    slow_job_t *self = (slow_job_t *) item;
    switch (self->kind) {
        case SLOW_AUDIT:
            broker_audit_run (self->audit, ks);
            break;
        case SLOW_TENANT:
            self->rc = keystore_tenant_state (ks, self->tenant, &self->state);
            break;
        case SLOW_KEY:
            self->rc = keystore_key_get (ks, self->tenant, self->ref, &self->info, &self->pkcs8,
                                         &self->pkcs8_len);
            break;
        case SLOW_LOGIN:
            self->rv = keystore_pin_check (ks, self->tenant,        /* a context login: the user's PIN */
                                           self->job->login->user_type == CKU_CONTEXT_SPECIFIC
                                           ? CKU_USER : self->job->login->user_type,
                                           self->job->login->pin.data, self->job->login->pin.len,
                                           &self->pin);
            break;
        case SLOW_INIT_PIN:
            self->rv = keystore_pin_set (ks, self->tenant, CKU_USER, self->job->init_pin->pin.data,
                                         self->job->init_pin->pin.len, NULL);
            break;
        case SLOW_SET_PIN:
            s_set_pin (self, ks);
            break;
        case SLOW_KEY_JOB:
            if (self->job->idempotency_id.len)
                s_idempotent (self, ks, s_key_job);
            else
                s_key_job (self, ks);
            break;
        case SLOW_GENERATED:
            if (self->job->idempotency_id.len && self->job->generate_key_pair->token)
                s_idempotent (self, ks, s_generated);
            else
                s_generated (self, ks);
            break;
        case SLOW_LIST_KEYS:
            self->keys_version = keystore_keys_version (ks, self->tenant);
            self->rc = self->page ? keystore_key_page (ks, self->tenant, self->job->list_keys->after, self->page,
                                                       &self->listed, &self->n_listed, &self->next)
                                  : keystore_key_list (ks, self->tenant, &self->listed, &self->n_listed);
            break;
        case SLOW_OBJECT_JOB:
            self->rv = self->job->kind_case == CS__JOB__KIND_PUT_OBJECT && self->job->put_object->object
                       && !(self->job->put_object->object->ref && *self->job->put_object->object->ref)
                     ? quota_objects_check (ks, self->tenant, self->max_objects) : CKR_OK;
            self->quota_refused = self->rv == CKR_DEVICE_MEMORY ? 1 + METRICS_QUOTA_OBJECTS : 0;
            if (self->rv == CKR_OK)
                self->rv = objjobs_run (ks, self->tenant, self->job, self->user, &self->objects);
            break;
        case SLOW_SETTLE:
            self->rc = ks_settle_look (self->settle, &self->changes, &self->n_changes, &self->foreign);
            break;
    }
    keystore_own_changes_take (ks, &self->own, &self->n_own);   //  the cache follows them (ks_cache.h)
}
