/*  frontend_int.h — what the rooms of the frontend actor share (one
 *  thread: the frontend's zloop; nothing here is locked).  The rooms, one
 *  file each, top to bottom: a room calls only rooms below it
 *  (tests/integration/broker-layers.sh); what comes back up is a slow
 *  job's or work item's completion, set by the room that made it.  The
 *  path of one job down and back: docs/FRONTEND.md.  Only the rooms
 *  include this header; the rest of the broker sees frontend.h.
 *
 *    frontend.c      the reactor: sockets, loop, timers, pipe, start/stop
 *    request.c       the head of a request: identity, decode, admission's
 *                    verdict, tenant row, login, each job to its row's start
 *    admission.c     allow-list and tenants, queued bytes, the verdict, backlog
 *    job_kinds.c     the table of job kinds: start, login needed, tenant row, worker
 *    keymgmt_jobs.c  key generation, import, destroy, attributes, copy; objects
 *    route.c         crypto, modexp and secret-key jobs: items, key reads, completions
 *    key_route.c     a crypto job's key -> its boards; a token secret key's rules
 *    shared_link.c   shared keys: generation and sign/decrypt through the party service
 *    shared_boards.c shared keys: the party's partial results on this broker's boards
 *    login.c         login, PINs, tickets
 *    pool_jobs.c     pre-generated RSA keys: refills, restore, seal
 *    inventory.c     mechanisms, resident keys and open boards; Hello, ListKeys
 *    quota_link.c    per-tenant quotas at admission: room in flight, ops/s tokens
 *    reply.c         the tail of a request: pending count, reply, free, DRAINED
 *    slow_link.c     slow-pool hand-off and return, keystore cache upkeep, audit
 *    dispatch.c      work items to workers and back, re-runs, board sweep
 *    fast_lane.c     cheap items run on the reactor itself (broker/fast-lane-us)
 */
#ifndef FRONTEND_INT_H_INCLUDED
#define FRONTEND_INT_H_INCLUDED

#include <inttypes.h>
#include <openssl/crypto.h>
#include "board_watch.h"
#include "client_load.h"
#include "cross_check.h"
#include "clients_watch.h"
#include "cs_util.h"
#include "cs_wire.h"
#include "frontend.h"
#include "key_info.h"
#include "keyjobs.h"
#include "ks_cache.h"
#include "pool.h"
#include "scheduler.h"
#include "slow_jobs.h"
#include "slow_pool.h"
#include "ticket.h"

/*  A job's result while it waits for the slow pool: never sent (the request
 *  is answered only when no job is pending), never a PKCS#11 value.  */
#define FE_CKR_PENDING (CKR_VENDOR_DEFINED | 0x5105u)

/*  What key_route.c answers for a key whose home is "shared" (issue #24),
 *  once its rules allow the job: route.c hands the item to shared_link.c
 *  instead of a board.  Never sent.  */
#define FE_CKR_SHARED (CKR_VENDOR_DEFINED | 0x5106u)

/*  The per-job storage of a request: its result and what the result points to.  */
typedef struct {
    Cs__Result result;
    work_item_t item;
    Cs__HelloResult hello;
    Cs__LoginResult login;
    Cs__ListKeysResult keys;
    Cs__GenerateKeyPairResult generated;
    Cs__ImportKeyResult imported;
    Cs__KeyResult key_result;
    Cs__KeyInfo *info;              /* owned: a key made or changed by the job */
    Cs__KeyInfo **listed;           /* owned: keystore rows of a key list */
    size_t n_listed;
    char *next;                     /* owned: a paged key list's cursor (keys.next) */
    Cs__KeyInfo *public_view;       /* owned array of shallow copies: a key list
                                       without a login (list_public_view, inventory.c) */
    unsigned char *private_pkcs8;   /* owned: a generated session key, wiped */
    size_t private_pkcs8_len;
    char ref [36];                  /* a resident key's ref while it is generated */
    unsigned char ticket [TICKET_LEN];
    objjobs_out_t objects;          /* owned: what an object job made (objjobs.h) */
    bool answered;                  /* Request.per_job_replies: its own reply has left */
} fe_slot_t;

/*  One request in flight: answered once, when pending drops to 0.  */
typedef struct {
    zframe_t *identity;             /* ROUTER routing id of the client */
    Cs__Request *req;
    char *client_key;               /* Z85 public key, "" on plaintext */
    const char *client_name;        /* owned by the allow-list copy below */
    char *name_copy;
    char *tenant;                   /* the client's tenant name */
    uint32_t version;
    int64_t deadline;               /* cs_clock_ms () */
    bool ticket_ok;                 /* a valid CKU_USER ticket came with it */
    bool so_ok;                     /* a valid CKU_SO ticket came with it */
    bool renewed;                   /* Reply.ticket: renewed_ticket replaces the request's */
    unsigned char renewed_ticket [TICKET_LEN];
    fe_slot_t *slots;
    Cs__Result **results;
    size_t pending;
    client_load_t *load;            /* charged with `charged` bytes of `load_key`, or NULL */
    char *load_key;
    size_t charged;
    int64_t received_ns;            /* metrics_now_ns () when it arrived */
    metrics_client_t *metrics_client;   /* its in-flight counter, once it has a job out */
    keystore_tenant_t tenant_state; /* the tenant's row (cache or slow pool), when has_state */
    bool has_state;
    bool keystore_down;             /* its tenant row could not be read: the database is unreachable */
    struct _fe_quota_tenant_t *quota_tenant;    /* holds quota_jobs of its tenant's max-inflight, or NULL */
    size_t quota_jobs;
    void (*on_free) (void *request);    /* set by a room that holds something for the request until
                                           it is freed (quota_link.c: its tenant's room in flight);
                                           called by fe_request_destroy (reply.c) */
} fe_request_t;


/*  A resident board key as listed to its tenant: the only board keys a
 *  client job may name (docs/CONTRACTS.md "Key refs and routing").  */
typedef struct {
    Cs__KeyInfo info;
    const char *tenant;             /* the board's tenant (owned by the board) */
    uint64_t boards;                /* the boards of that tenant holding it (bit per board) */
} fe_board_key_t;

typedef struct _fe_inventory_t fe_inventory_t;
typedef struct _fe_pool_t fe_pool_t;
typedef struct _fe_admission_t fe_admission_t;
typedef struct _fe_fast_lane_t fe_fast_lane_t;
typedef struct _fe_keystore_watch_t fe_keystore_watch_t;
typedef struct _fe_shared_t fe_shared_t;

/*  The frontend's state.  Each room keeps its own state behind one pointer
 *  (fe_admission_t, fe_inventory_t, fe_pool_t: private to their file);
 *  what stays here is what several rooms read.  Writers: frontend.c the
 *  sockets, loop and draining; request.c/admission.c/reply.c in_flight and
 *  reading; dispatch.c background_out; inventory.c scheduler (built),
 *  rsa_range; pool_jobs.c home_board; slow_link.c slow, cache,
 *  keystore_watch.  */
typedef struct {
    const frontend_args_t *args;
    const broker_config_t *config;
    keystore_t *ks;                 /* owned by the server; used by this thread only */
    zsock_t *pipe;
    zsock_t *router;
    zsock_t *backend;
    zloop_t *loop;
    scheduler_t *scheduler;
    board_watch_t *watch_boards;    /* time limits, faults, probes (board_watch.h) */
    ticket_mac_t *tickets;          /* the ticket key ready for MACs (ticket.h; login.c) */
    cross_check_t *cross;           /* broker/cross-check (cross_check.h) */
    size_t n_workers;
    fe_admission_t *admission;      /* allow-list, default tenant (admission.c) */
    bool reading;                   /* the router is being polled */
    bool draining;
    bool drained;                   /* DRAINED was sent */
    size_t in_flight;               /* requests waiting for items */
    size_t background_out;          /* background items with workers (pool refills, clean-ups) */
    fe_inventory_t *inventory;      /* mechanisms and resident keys of the boards (inventory.c) */
    keyjobs_rsa_range_t rsa_range;  /* what RSA generation accepts (cs_mech_rsa_gen_range) */
    fe_pool_t *pool;                /* pre-generated RSA keys (pool_jobs.c), or NULL */
    int home_board;                 /* keys/home board index, -1 = keystore */
    char serial [17];
    char *endpoint;
    client_load_t *load;            /* bytes queued per client (broker/max-client-bytes) */
    slow_pool_t *slow;              /* PIN checks, keystore reads and writes (slow_jobs.h) */
    broker_audit_t *audit;          /* the audit log's records (audit.h), or NULL: off */
    ks_cache_t *cache;              /* keystore keys and tenant rows (keystore/key-cache) */
    fe_keystore_watch_t *keystore_watch;    /* other writers' changes of the keystore (slow_link.c) */
    struct _ks_settle_t *settle;    /* the connection that looks for others' commits (ks_settle.h) */
    fe_fast_lane_t *fast;           /* the fast lane (fast_lane.c), or NULL: off */
    fe_shared_t *shared;            /* the link to the party service (shared_link.c), or NULL */
    zsock_t *boards;                /* the party's board lane (shared_boards.c), or NULL */
    frontend_reply_fn *reply_fn;    /* the loopback core's transport (frontend_core_new), or NULL: the router */
    void *reply_arg;
    struct _fe_quota_t *quota;      /* per-tenant quotas (quota_link.c) */
    cs_drv_session_t **loop_sessions;   /* the loopback core: a driver session per board, opened when first used
                                       (dispatch.c runs items in line); NULL in the actor */
} frontend_t;

/*  What a job that needs a login answers without one: CKR_USER_NOT_LOGGED_IN,
 *  or CKR_DEVICE_ERROR when the ticket could not be checked because the
 *  keystore database is unreachable (the login is not over:
 *  docs/CONTRACTS.md "Keystore database").  */
static inline CK_RV
fe_no_login_rv (const fe_request_t *request)
{
    return request->keystore_down ? CKR_DEVICE_ERROR : CKR_USER_NOT_LOGGED_IN;
}

/*  The verdict of admission on a decoded request (fe_admission_verdict);
 *  the request room acts on it.  */
typedef enum {
    FE_ADMIT,                       /* start it now */
    FE_QUEUE,                       /* keep it in its client's backlog (fe_admission_hold) */
    FE_REFUSE,                      /* answer it with an error and free it */
    FE_QUOTA                        /* its tenant's quota took it (quota_link.c) */
} fe_verdict_t;

/*  How the quota room hands back a request that waited for its tenant's
 *  quota: the request room's admission step, given to fe_quota_admit.  */
typedef void (fe_quota_pass_fn) (frontend_t *self, fe_request_t *request);

/*  The rooms' entry points, by file, from the top of the pipeline down
 *  (docs/FRONTEND.md); each is documented where it is defined.  A file
 *  calls only files listed below it (tests/integration/broker-layers.sh);
 *  what comes back up goes through the `done` of a slow job or work item,
 *  set by the room that made it.  */
/* ---- frontend.c: the reactor (frontend.h) ---- */

/* ---- request.c ---- */
void fe_request_run (frontend_t *self, fe_request_t *request, bool counted);
void fe_request_start (frontend_t *self, fe_request_t *request, bool counted);
void fe_request_backlog_run (frontend_t *self);
void fe_request_handle (frontend_t *self, zframe_t **identity_p, zframe_t *body, bool extra_frames);

/* ---- quota_link.c ---- */
typedef struct _fe_quota_t fe_quota_t;
typedef struct _fe_quota_tenant_t fe_quota_tenant_t;
int fe_quota_start (frontend_t *self);
void fe_quota_free (frontend_t *self);
bool fe_quota_admit (frontend_t *self, fe_request_t *request, fe_quota_pass_fn *pass);

/* ---- admission.c ---- */
int fe_admission_start (frontend_t *self);
void fe_admission_free (frontend_t *self);
int fe_identify (frontend_t *self, zframe_t *body, fe_request_t *request, const char **why_p);
CK_RV fe_admission_charge (frontend_t *self, zframe_t *body, fe_request_t *request, const char **why_p);
fe_verdict_t fe_admission_verdict (frontend_t *self, fe_request_t *request, fe_quota_pass_fn *pass);
int fe_admission_hold (frontend_t *self, fe_request_t *request);
fe_request_t *fe_admission_next (frontend_t *self);
void fe_flow_control (frontend_t *self);
void fe_flow_depth (frontend_t *self);

/* ---- job_kinds.c: the table of job kinds ---- */
/*  What a job needs of the request's login before its room starts it
 *  (docs/CONTRACTS.md "Login tickets"; checked by request.c).  */
typedef enum {
    FE_NEEDS_NOTHING,               /* Hello */
    FE_NEEDS_PUBLIC,                /* no ticket, or one that holds (a stale one ends the login) */
    FE_NEEDS_USER,                  /* a valid CKU_USER ticket */
    FE_NEEDS_SO,                    /* a valid CKU_SO ticket */
    FE_NEEDS_PIN                    /* none: the job checks a PIN (C_Login, C_SetPIN) */
} fe_needs_t;

/*  A room's start of job `index` of request: it sets the job's result, or
 *  FE_CKR_PENDING with a slow job or work item out whose completion will.  */
typedef void (fe_job_start_fn) (frontend_t *self, fe_request_t *request, size_t index);

/*  What the request room and admission must know of a kind before it runs
 *  (fe_job_kind_t.flags).  */
#define FE_KIND_TENANT_ROW  1u      /* its request reads the tenant's row first */
#define FE_KIND_WORKER      2u      /* it goes to a worker (admission: broker/max-queue) */

/*  One row of the table: a job kind and what the frontend knows of it.  */
typedef struct {
    Cs__Job__KindCase kind;
    const char *name;               /* "SIGN" */
    fe_job_start_fn *start;         /* its room's entry */
    fe_needs_t needs;               /* the login it needs ... */
    bool (*public_when) (const Cs__Job *job);   /* ... unless this holds (it carries its key,
                                                   or its key pair is only returned): public */
    unsigned flags;                 /* FE_KIND_* */
} fe_job_kind_t;

const fe_job_kind_t *fe_job_kind (const Cs__Job *job);
fe_needs_t fe_job_needs (const fe_job_kind_t *kind, const Cs__Job *job);
bool fe_jobs_any (const Cs__Request *req, unsigned flag);

/* ---- login.c ---- */
void fe_job_login (frontend_t *self, fe_request_t *request, size_t index);
void fe_job_init_pin (frontend_t *self, fe_request_t *request, size_t index);
void fe_job_set_pin (frontend_t *self, fe_request_t *request, size_t index);
void fe_ticket_check (frontend_t *self, fe_request_t *request);

/* ---- keymgmt_jobs.c ---- */
void fe_job_generate (frontend_t *self, fe_request_t *request, size_t index);
void fe_job_key (frontend_t *self, fe_request_t *request, size_t index);
void fe_job_object (frontend_t *self, fe_request_t *request, size_t index);

/* ---- pool_jobs.c ---- */
void fe_pool_refill (frontend_t *self);
int fe_keys_start (frontend_t *self);
void fe_pool_stop (frontend_t *self);
unsigned char *fe_pool_take (frontend_t *self, const Cs__GenerateKeyPairJob *job, CK_KEY_TYPE type, size_t *len_p);
void fe_pipe_pool_wait (frontend_t *self);

/* ---- route.c ---- */
void fe_job_crypto (frontend_t *self, fe_request_t *request, size_t index);
void fe_job_modexp (frontend_t *self, fe_request_t *request, size_t index);
void fe_job_sym (frontend_t *self, fe_request_t *request, size_t index);
/*  route.c: a CKM_ML_DSA verification job on a board (issue #23).  */
void fe_job_verify (frontend_t *self, fe_request_t *request, size_t index);
/*  route.c: a CKM_ML_KEM encapsulation job on a board (issue #23).  */
void fe_job_encapsulate (frontend_t *self, fe_request_t *request, size_t index);

/* ---- shared_link.c: shared keys through the party service (issue #24) ---- */
/*  fe_shared_start connects the lanes (one for generations, eight for
 *  private-key operations) to party/control when broker.conf
 *  has a party section (0, or -1 after an E: line); fe_shared_stop fails
 *  what is queued with CKR_DEVICE_ERROR (through the items' completions).
 *  fe_shared_tenant: the tenant's C_GenerateKeyPair of a token RSA pair
 *  makes a shared key (keys/shared = 3 and a party section).
 *  fe_shared_generate queues a GenerateKeyPair item (its `done` set):
 *  CKR_OK, counted in the request's pending, the new key's ref in item->out
 *  when it is back; or CKR_TEMPLATE_INCONSISTENT (an exponent other than
 *  65537), CKR_DEVICE_ERROR without a party service.  fe_shared_crypto
 *  queues a sign or decrypt item that key_route.c answered FE_CKR_SHARED
 *  (item->ref, ->bits, ->mech, ->in set): CKR_OK, counted; or
 *  CKR_MECHANISM_INVALID (sign: CKM_RSA_PKCS, _PSS, _X_509; decrypt:
 *  CKM_RSA_PKCS, _OAEP, _X_509), CKR_ENCRYPTED_DATA_LEN_RANGE (a
 *  ciphertext that is not k bytes).  Its completion gets the signature or
 *  plaintext in item->out, or item->rv: CKR_DEVICE_ERROR when a party is
 *  down or a result does not verify with (N, e) (an E: line names why),
 *  the padding's errors (drv_pad.h).  */
int fe_shared_start (frontend_t *self);
void fe_shared_stop (frontend_t *self);
bool fe_shared_tenant (frontend_t *self, const char *tenant);
CK_RV fe_shared_generate (frontend_t *self, work_item_t *item);
CK_RV fe_shared_crypto (frontend_t *self, work_item_t *item);

/* ---- shared_boards.c: the party's partial results on the boards (issue #24) ---- */
/*  fe_shared_boards_start connects the board lane to party/control and
 *  says BOARDS with the lane token, when broker.conf has a party section
 *  (0, or -1 after an E: line): from then on the party's MODEXP requests
 *  run as work items on boards open to their tenant (fe_boards_that FE_CAN_MODEXP).
 *  fe_shared_boards_stop closes the lane; items still out are freed by
 *  their completion (their answer is dropped).  */
int fe_shared_boards_start (frontend_t *self);
void fe_shared_boards_stop (frontend_t *self);

/* ---- key_route.c ---- */
void fe_item_inputs (work_item_t *item, const Cs__Job *job);
CK_RV fe_route_crypto (frontend_t *self, fe_request_t *request, work_item_t *item, const Cs__Job *job);
CK_RV fe_route_keystore_key (frontend_t *self, fe_request_t *request, work_item_t *item, const char *ref,
                             const Cs__KeyInfo *info, const uint8_t *pkcs8, size_t len);
uint64_t fe_mech_boards (frontend_t *self, const work_item_t *item);
CK_RV fe_sym_key (frontend_t *self, work_item_t *item, const Cs__KeyInfo *info, const uint8_t *value, size_t len);
CK_RV fe_route_sym_ref (frontend_t *self, fe_request_t *request, work_item_t *item);

/* ---- inventory.c ---- */
/*  Boards that may see `tenant`'s key material and data: those dedicated
 *  to no tenant (drivers/NAME/tenant unset) or to this one; NULL (a
 *  background job for no tenant yet, a pool key): the shared ones only.  */
uint64_t fe_open_boards (frontend_t *self, const char *tenant);
/*  What a board is asked it can do (board.h): generate key material of a
 *  key type; take key material of a key type to sign or decrypt with;
 *  run ECDH with a resident key or with EC key material; run a mechanism
 *  with a CKF_ flag (CKF_SIGN, CKF_DECRYPT, CKF_DERIVE); run raw modexp
 *  (CS_CAP_MODEXP: a raw modexp job's operands, or a shared key's exponent
 *  share, are the tenant's).  */
typedef enum {
    FE_CAN_GENERATE, FE_CAN_TAKE_MATERIAL, FE_CAN_DERIVE_RESIDENT, FE_CAN_DERIVE_MATERIAL, FE_CAN_RUN,
    FE_CAN_MODEXP
} fe_can_t;
/*  The boards (bit b: board b) that can do `what` with `type` (a key
 *  type, or for FE_CAN_RUN a mechanism with `flag`; flag is 0 otherwise);
 *  those that take key material (generate, take, derive with material,
 *  modexp)
 *  narrowed to the boards open to `tenant` (fe_open_boards; NULL: pool
 *  keys, for any tenant later).  */
uint64_t fe_boards_that (frontend_t *self, fe_can_t what, unsigned long type, CK_FLAGS flag, const char *tenant);
int fe_board_index (frontend_t *self, const char *name);
const fe_board_key_t * fe_board_key_find (frontend_t *self, const char *tenant, const char *ref, unsigned char id [CS_KEY_ID_MAX],
                  size_t *id_len_p);
void fe_job_hello (frontend_t *self, fe_request_t *request, size_t index);
void fe_job_list_keys (frontend_t *self, fe_request_t *request, size_t index);
int fe_build_mechs (frontend_t *self);
int fe_build_routing (frontend_t *self);
void fe_inventory_free (frontend_t *self);

/* ---- reply.c ---- */
void fe_send_error (frontend_t *self, zframe_t *identity, uint64_t request_id, CK_RV rv,
              const char *error);
void fe_send_error_version (frontend_t *self, zframe_t *identity, uint64_t request_id, uint32_t version,
                            CK_RV rv, const char *error);
void fe_request_destroy (fe_request_t **self_p);
bool fe_log_due (frontend_t *self, fe_request_t *request, const char *limit);
void fe_key_limit_log (frontend_t *self, fe_request_t *request, CK_RV rv, const char *why);
void fe_request_release (frontend_t *self, fe_request_t *request, bool counted);
void fe_request_job_done (frontend_t *self, fe_request_t *request, size_t index);
void fe_drained_check (frontend_t *self);

/* ---- slow_link.c ---- */
/*  The completion of a slow job: called on the frontend's thread with the
 *  `arg` the room gave (the frontend) once the job is back; the job is
 *  freed after it returns.  */
typedef void (fe_slow_done_fn) (void *arg, slow_job_t *job);
slow_job_t * fe_slow_new (frontend_t *self, fe_request_t *request, size_t index, slow_kind_t kind,
                          fe_slow_done_fn *done);
CK_RV fe_slow_go (frontend_t *self, slow_job_t *job);
void fe_keystore_check (frontend_t *self);
int fe_keystore_start (frontend_t *self);
void fe_keystore_stop (frontend_t *self);
/*  The audit log (slow_link.c, audit.h): fe_audit_start makes it (off when
 *  broker.conf says so), notes "broker-start" and starts its flush timer
 *  (0, or -1 after the E: line); fe_audit_stop, once the slow pool is
 *  gone, notes "broker-stop" and appends what is left with a final signed
 *  checkpoint.  */
int fe_audit_start (frontend_t *self);
void fe_audit_stop (frontend_t *self);

/* ---- dispatch.c ---- */
void fe_item_wipe_material (frontend_t *self, work_item_t *item);
int fe_submit (frontend_t *self, work_item_t *item);
void fe_dispatch_backend (frontend_t *self);
void fe_dispatch_sweep (frontend_t *self);

/*  fast_lane.c: cheap items on the reactor thread (issue #8).
 *  fe_fast_lane_start reads broker/fast-lane-us and finds the boards that
 *  may take part (driver openssl); 0, or -1 when out of memory.
 *  fe_fast_lane_run runs a submitted client item here when nothing waits
 *  in the scheduler and its expected service time on such a board (in
 *  rotation, results not to be verified) is at most the limit: true with
 *  item->rv CKR_OK, out, board and service_ns set (the caller finishes it
 *  as if a worker had handed it back); false, with the item untouched
 *  but for its board fields, when it must go to a worker (also after a
 *  failed call: workers apply the re-run and health rules).
 *  fe_fast_lane_stop closes its driver sessions.  */
int fe_fast_lane_start (frontend_t *self);
bool fe_fast_lane_run (frontend_t *self, work_item_t *item);
void fe_fast_lane_stop (frontend_t *self);

#endif
