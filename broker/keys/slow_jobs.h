/*  slow_jobs.h — the frontend's work for the slow pool (slow_pool.h): every
 *  keystore read and write and every PIN check of a request, run in a pool
 *  thread with that thread's keystore connection, never in the frontend's
 *  (docs/DESIGN.md §5).  A slow job carries its inputs (borrowed from the parent
 *  request, which outlives it) and comes back with its results; the
 *  frontend turns them into the job's result, logs, drops what the job
 *  changed from its cache (ks_cache.h), and answers the request when its
 *  last job is done, in job order, as before.
 */
#ifndef SLOW_JOBS_H_INCLUDED
#define SLOW_JOBS_H_INCLUDED

#include "cs_driver.h"
#include "keystore.h"
#include "objjobs.h"
#include "slow_pool.h"
#include "audit.h"
#include "ks_settle.h"

typedef enum {
    SLOW_TENANT,        /* keystore_tenant_state -> rc, state */
    SLOW_KEY,           /* keystore_key_get of ref with its material -> rc, info, pkcs8 */
    SLOW_LOGIN,         /* keystore_pin_check (job->login) -> rv, pin */
    SLOW_INIT_PIN,      /* keystore_pin_set of the user PIN (job->init_pin) -> rv */
    SLOW_SET_PIN,       /* job->set_pin: the old PIN checked, then the new one set
                           -> rv, refused (the check failed), pin, epoch */
    SLOW_KEY_JOB,       /* import, destroy, set attributes, copy (keyjobs.h),
                           token secret keys made or imported (secretkeys.h)
                           -> rv, info, resident_board, limit.  With a
                           Job.idempotency_id (this and a token SLOW_GENERATED)
                           once per id: keystore_idem_begin -> replayed */
    SLOW_GENERATED,     /* a generated key (pkcs8 material, or board_key on a board):
                           its description, stored when it is a token key
                           -> rv, info, pkcs8 (kept only for a session key), limit */
    SLOW_LIST_KEYS,     /* keystore_keys_version, then keystore_key_list (page 0) or
                           keystore_key_page (job's after, page rows)
                           -> rc, keys_version, listed, next */
    SLOW_OBJECT_JOB,    /* certificates and data objects (objjobs.h), for `user`
                           -> rv, objects */
    SLOW_AUDIT,         /* a batch of audit records appended to the chain (audit.h) -> audit */
    SLOW_SETTLE         /* ks_settle_look: returns once no writer holds the file (ks_watch.h)
                           -> rc: 1 another connection committed (changes, foreign),
                           0 none did, -1 error */
} slow_kind_t;

typedef struct _slow_job_t slow_job_t;

struct _slow_job_t {
    slow_item_t base;               /* first: the slow pool's part */
    slow_kind_t kind;
    /* completion, set by the room that made it: called with done_arg on the
       frontend's thread when the job is back (docs/FRONTEND.md), which
       frees the job after it returns */
    void (*done) (void *done_arg, slow_job_t *self);
    void *done_arg;
    /* inputs, borrowed from the parent request */
    void *request;                  /* the frontend's request, not owned; NULL for SLOW_SETTLE */
    size_t index;                   /* the job's index in it */
    const Cs__Job *job;
    const char *tenant;
    char ref [129];                 /* SLOW_KEY: the ref read */
    uint64_t token;                 /* ks_cache_token when submitted (SLOW_TENANT, SLOW_KEY) */
    const cs_key_info_t *board_key; /* SLOW_GENERATED on a board: the key there, else NULL */
    char home [300];                /* ... its home "board:NAME" */
    const char *resident_ref;       /* ... and its ref */
    const unsigned char *pq_pub;    /* SLOW_GENERATED of an ML-DSA/ML-KEM pair: its public key
                                       as the board gave it (borrowed from the work item, which
                                       the request holds), else NULL (issue #23) */
    size_t pq_pub_len;
    CK_ULONG parameter_set;         /* ... its CKP_* */
    bool pooled;                    /* SLOW_GENERATED: the material came from the key pool:
                                       its fingerprint is recorded before the reply
                                       (keystore_issued_record, issue 19) */
    /* results (and SLOW_GENERATED's pkcs8 input), owned */
    int rc;                         /* keystore reads: 0, -1, KEYSTORE_DAMAGED */
    CK_RV rv;
    bool refused;                   /* SLOW_SET_PIN: the old PIN was not accepted */
    keystore_tenant_t state;
    keystore_pin_state_t pin;
    uint64_t epoch;                 /* SLOW_SET_PIN: the new PIN epoch */
    Cs__KeyInfo *info;
    unsigned char *pkcs8;           /* wiped when freed */
    size_t pkcs8_len;
    Cs__KeyInfo **listed;
    size_t n_listed;
    size_t page;                    /* SLOW_LIST_KEYS input: rows in a page, 0 = the whole list */
    char *next;                     /* SLOW_LIST_KEYS paged: the next page's cursor, or NULL */
    uint64_t keys_version;
    char *resident_board;           /* SLOW_KEY_JOB destroy: the board holding the private key;
                                       SLOW_GENERATED replayed: the board holding the
                                       key this attempt made (resident_ref), unused */
    const char *limit;              /* keyjobs_limit_problem after a refusal, or NULL (static) */
    bool replayed;                  /* SLOW_KEY_JOB, SLOW_GENERATED with an idempotency id
                                       recorded before: rv and info are the recorded result */

    int usage;                      /* the tenant's cs_usage_policy_t (fe_slow_go): SLOW_KEY_JOB,
                                       SLOW_GENERATED follow it (keyattrs_usage_set) */
    bool user;                      /* SLOW_OBJECT_JOB: the request has a CKU_USER ticket */
    objjobs_out_t objects;          /* SLOW_OBJECT_JOB: what it made */
    broker_audit_batch_t *audit;    /* SLOW_AUDIT: the batch (owned until broker_audit_done) */
    uint32_t max_keys;              /* the tenant's quotas (quota.h, fe_slow_go): SLOW_KEY_JOB
                                       imports and generations, token SLOW_GENERATED */
    uint32_t max_objects;           /* ... SLOW_OBJECT_JOB puts of a new object */
    int quota_refused;              /* 1 + metrics_quota_limit_t when a quota refused it, else 0 */
    ks_settle_t *settle;            /* SLOW_SETTLE: the connection that looks (ks_settle.h), borrowed */
    keystore_change_t *changes;     /* ... every tenant's change epoch */
    size_t n_changes;
    bool foreign;                   /* ... a commit that raised no state counter */
    keystore_change_t *own;         /* every kind: what its commits changed (keystore_own_changes_take) */
    size_t n_own;
};

/*  A job of `kind` for job `index` of a request (request, its job and its
 *  tenant are borrowed and must outlive it), ready for slow_pool_submit.
 *  NULL when out of memory.  Caller destroys.  */
slow_job_t *slow_job_new (slow_kind_t kind, void *request, size_t index, const Cs__Job *job,
                          const char *tenant);

/*  Frees a job and what it still owns, wiping pkcs8.  NULL-safe; nulls
 *  *self_p.  */
void slow_job_destroy (slow_job_t **self_p);

/*  The slow pool's run function of every slow job (item is a slow_job_t).  */
void slow_job_run (slow_item_t *item, keystore_t *ks);

#endif
