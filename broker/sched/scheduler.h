/*  scheduler.h — the job queue and routing of the broker, as a pure data
 *  structure (no threads, no sockets) so it is unit-testable.
 *
 *  The paper's rule (§4.2.5, Figure 3): worker threads, when free, pull the
 *  next work item.  Here: an item goes to an idle worker of a board that
 *  may run it when that is where it is expected to finish first (the cost
 *  model, placement.h); else it waits in its tenant's FIFO, and a worker that
 *  becomes ready takes the next item it should take (placement.h) in deficit
 *  round robin order across tenants (fair_queue.h; issue #9 "fair
 *  shares"), so one tenant's flood delays another tenant's item by at most
 *  one round.  Background items (item->low) go only when no client item
 *  the board may run waits (not even one that waits for a faster board),
 *  and otherwise by service time alone (they never wait for a busy board).
 *
 *  Where an item goes, or waits for, is the placement model's
 *  (broker/sched/placement.h, internal): service-time estimates per (board,
 *  mechanism, bits) (scheduler_service, scheduler_expected_ns), the
 *  expected finish of an item on a board, and when waiting for a faster
 *  busy board pays (SCHEDULER_SPEED_SLACK, SCHEDULER_STALE_MS).  An idle
 *  worker can coexist with waiting items (waiting for a faster board
 *  pays); scheduler_rebalance gives it the next item for which waiting no
 *  longer pays, and the caller calls it after anything that changes the
 *  balance (below).
 */
#ifndef SCHEDULER_H_INCLUDED
#define SCHEDULER_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <p11-kit/pkcs11.h>
#include "cs_driver.h"
#include "fair_queue.h"

/*  What a work item asks of a worker.  */
typedef enum {
    WORK_SIGN = 0,                  /* `mech` over `in` with `key` */
    WORK_DECRYPT,                   /* `mech` of `in` with `key` */
    WORK_GENERATE,                  /* `gen` as PKCS#8 material into out/out_len */
    WORK_GENERATE_RESIDENT,         /* `gen` on the board into `generated` */
    WORK_DESTROY_RESIDENT,          /* the resident key key.id on the board */
    WORK_DERIVE,                    /* ECDH of `key` with the point `in`: the raw secret Z into out */
    WORK_MODEXP,                    /* `modexp` (raw modular exponentiation) into out */
    WORK_SYM,                       /* `sym` (a secret-key operation, issue #10) into out */
    WORK_VERIFY,                    /* `mech` (CKM_ML_DSA) signature `sig` over `in` with the
                                       public key `pub`: rv only (issue #23) */
    WORK_ENCAPSULATE,               /* `mech` (CKM_ML_KEM) to the public key `pub`: the
                                       ciphertext and then the 32-byte secret into out */
    WORK_DECAPSULATE                /* `mech` (CKM_ML_KEM) of the ciphertext `in` with `key`:
                                       the secret into out */
} work_kind_t;

/*  One job on its way to a worker and back, in the driver ABI's types only
 *  (cs_driver.h): routing (broker/frontend/route.c and the other rooms) fills it from
 *  the wire job, and the scheduler, the workers, verification and the
 *  metrics never see a Cs__Job (issue #8 "wire types stop at routing").
 *  Ownership moves with the pointer (frontend -> worker -> frontend); the
 *  parent request, whose buffers the borrowed pointers below point into,
 *  stays with the frontend and outlives the item.  Background items (pool
 *  refills, clean-ups) have no request.  The room that makes an item sets
 *  its completion (`done`, `done_arg`): the frontend calls it once the
 *  item is back for good (docs/FRONTEND.md).  */
typedef struct _work_item_t work_item_t;

struct _work_item_t {
    void *request;                  /* parent request, or NULL; not owned */
    size_t index;                   /* the job's index in the parent */
    work_kind_t kind;
    cs_drv_mech_t mech;                 /* sign/decrypt: the mechanism and its parameters (the OAEP
                                       label borrowed from the request) */
    const unsigned char *in;        /* sign/decrypt: the input; derive: the peer's public
                                       point; borrowed from the request */
    size_t in_len;                  /* bytes */
    const unsigned char *key_id;    /* routing when `boards` is 0: boards holding this CKA_ID */
    size_t key_id_len;
    uint64_t boards;                /* boards that may run it (bit per board); 0 = by key_id */
    bool low;                       /* background: runs only when no client item waits */
    const char *tenant;             /* client items: the tenant whose queue it waits in
                                       (fair_queue.h); borrowed from the request */
    cs_drv_key_t key;                   /* sign/decrypt/destroy: the key as drivers see it */
    unsigned char id [CS_KEY_ID_MAX];   /* storage for key.id */
    unsigned char *material;        /* storage for key.pkcs8 when owned (a keystore key read
                                       but not cached): malloc'd, wiped and freed by the frontend */
    size_t material_len;
    void *cached;                   /* the cached keystore key key.pkcs8 points into, pinned
                                       until the item is back (ks_cache.h), or NULL */
    char ref [129];                 /* storage for key.ref (a ref is at most 128 bytes) */
    cs_keygen_t gen;                /* generation parameters (borrow from job or ctx) */
    cs_modexp_t modexp;             /* WORK_MODEXP operands (borrowed from the request's jobs) */
    cs_sym_t sym;                   /* WORK_SYM operation (borrowed from the request's job) */
    cs_key_info_t generated;        /* WORK_GENERATE_RESIDENT result (members owned) */
    const unsigned char *pub;       /* ML-DSA sign (the check before release) and WORK_VERIFY:
                                       the public key, FIPS 204 pk (CKA_VALUE), borrowed from
                                       the request or the cached key; NULL on a sign: the
                                       board derives it from the material (issue #23) */
    size_t pub_len;                 /* bytes */
    CK_ULONG parameter_set;         /* CKP_* of pub */
    const unsigned char *sig;       /* WORK_VERIFY: the signature, borrowed from the request */
    size_t sig_len;
    unsigned char *pub_out;         /* WORK_GENERATE of an ML-DSA/ML-KEM key: its public key
                                       as the board encodes it (malloc'd, owned), with its
                                       CKP_* in parameter_set */
    size_t pub_out_len;
    unsigned bits;                  /* key size in bits (pool refills: RSA modulus bits), 0 when
                                       unknown: with the mechanism, the service-time class */
    int64_t deadline;               /* cs_clock_ms() time after which it must not run */
    size_t board;                   /* board it was given to */
    size_t worker;                  /* worker it was given to */
    CK_RV rv;                       /* result */
    unsigned char *out;             /* result bytes (signature, plaintext, PKCS#8),
                                       malloc'd, owned by the item; wiped when freed */
    size_t out_len;
    int64_t submitted_ns;           /* metrics_now_ns () when submitted (metrics.h) */
    int64_t given_ns;               /* ... when handed to a worker */
    int64_t service_ns;             /* set by the worker: ns its driver call took */
    uint64_t tried;                 /* boards it ran on and failed (a bit per board): a re-run
                                       goes to another board (issue #9; 0 when new) */
    uint64_t suspect;               /* of those, boards that failed it with a device-class error
                                       (board_watch.h): blamed when it then runs elsewhere */
    bool wrong;                     /* the worker found the result wrong (verify.h): rv is
                                       CKR_DEVICE_ERROR and out is NULL */
    void *cross;                    /* its cross-check pair (cross_check.h), or NULL */
    uint64_t queued_on;             /* scheduler's own: while it waits, the boards it is
                                       counted as waiting for */
    void (*done) (void *done_arg, work_item_t *self);   /* completion, set by the room that made it */
    void *done_arg;
};

/*  What scheduler_submit did with an item.  */
typedef enum {
    SCHEDULER_ASSIGNED,             /* given to *worker_p now */
    SCHEDULER_QUEUED,               /* waiting for a worker (its tenant's FIFO) */
    SCHEDULER_NO_BOARD,             /* no board holds the key: not kept */
    SCHEDULER_NO_BOARD_UP           /* boards hold it, but every one not yet tried is out of
                                       rotation (scheduler_board_set_up): not kept */
} scheduler_outcome_t;

typedef struct _scheduler_t scheduler_t;

#define SCHEDULER_SPEED_SLACK 1.25      /* boards this close to the fastest count as equal */
#define SCHEDULER_SPEED_CLASSES 64      /* (mechanism, bits, size) classes measured per board */
#define SCHEDULER_LANE_MAX_BYTES 4096   /* input of an item the fast lane may run at most */
#define SCHEDULER_LANE_RETRY_FACTOR 4   /* a stale estimate this close to the lane's limit is
                                           measured on the lane again */
#define SCHEDULER_STALE_MS 1000         /* an estimate this old is measured again (submit) */
#define SCHEDULER_WARM_SAMPLES 4        /* an estimate counts after more samples than this
                                           or than the board has workers (placement.h) */

/*  Creates an empty scheduler; NULL when out of memory.  Caller destroys.  */
scheduler_t *scheduler_new (void);

/*  Destroys the scheduler; queued items are NOT freed (their owner is the
 *  frontend).  NULL-safe; nulls *self_p.  */
void scheduler_destroy (scheduler_t **self_p);

/*  Adds a board; returns its index (0, 1, ...) or -1 past 64 boards.  */
int scheduler_board_add (scheduler_t *self, const char *name);

/*  Marks board `board` as a host board (drivers/NAME/host): it computes on
 *  the broker host's own cores (OpenSSL, GMP, a software token), so its
 *  workers share the host's budget of cores with every other host board
 *  (scheduler_host_cores; placement.h, "Host boards").  Returns 0, or -1
 *  for an unknown board.  */
int scheduler_board_host (scheduler_t *self, size_t board, bool host);

/*  The number of cores the host boards share (broker/host-cores; 0: no
 *  budget, every board counts as hardware of its own).  */
void scheduler_host_cores (scheduler_t *self, size_t cores);

/*  Worker `worker`'s item was abandoned (its call overran, health.h): the
 *  worker stays out of use until it is ready again, but a host board's
 *  worker gives its core back now (a call stuck in a driver must not keep
 *  the host boards' budget).  */
void scheduler_worker_lost (scheduler_t *self, size_t worker);

/*  Items out with workers of host boards now (tests).  */
size_t scheduler_host_running (scheduler_t *self);

/*  Notes that board `board` holds the key with CKA_ID id (len bytes).  */
int scheduler_key_add (scheduler_t *self, size_t board, const unsigned char *id, size_t len);

/*  Adds a worker of board `board`; it is busy until scheduler_worker_ready.
 *  Returns the worker id (0, 1, ...) or -1.  */
int scheduler_worker_add (scheduler_t *self, size_t board);

/*  Returns true when some board holds key id (len bytes).  */
bool scheduler_has_key (scheduler_t *self, const unsigned char *id, size_t len);

/*  The set of boards holding key id (a bit per board), 0 if none.  */
uint64_t scheduler_key_boards (scheduler_t *self, const unsigned char *id, size_t len);

/*  Sets the DRR weight of `tenant` (1..FAIR_QUEUE_MAX_WEIGHT; default 1):
 *  items it may take per round while it has items waiting.  Returns 0, or
 *  -1 when out of range or out of memory.  */
int scheduler_tenant_weight (scheduler_t *self, const char *tenant, unsigned weight);

/*  Routes an item to one of its boards (item->boards, or the boards holding
 *  item->key_id when that is 0; never a board in item->tried nor one out of
 *  rotation); ownership stays with the caller until a worker gets it:
 *  ASSIGNED sets *worker_p, item->worker and item->board (the idle board
 *  where it is expected to finish first, by the cost model, placement.h);
 *  QUEUED keeps it in the FIFO of item->tenant (client items: no board
 *  idle, waiting for a busy one pays, or older items wait that the idle
 *  board takes first: then call scheduler_rebalance) or of background
 *  items (item->low); NO_BOARD means no board may run it.  item->submitted_ns
 *  is taken as the time now (stale estimates; 0: none is stale).  */
scheduler_outcome_t scheduler_submit (scheduler_t *self, work_item_t *item, size_t *worker_p);

/*  Worker `worker` is free: returns the next queued client item its board
 *  may run and should take by the cost model (waiting for a busy faster
 *  board does not pay; placement.h) in DRR order across tenants (within a
 *  tenant the oldest); else, when no client item its board may run waits,
 *  the oldest background item it may run (now assigned to it); or NULL,
 *  and then the worker is idle.  Client items always go first (issue #3:
 *  the pool is filled only when boards are idle).  */
work_item_t *scheduler_worker_ready (scheduler_t *self, size_t worker);

/*  Gives an idle worker the next waiting client item (DRR order) that its
 *  board should take by the cost model now, or with now_ns > 0
 *  (metrics_now_ns, ns) also any item that has waited (since
 *  item->submitted_ns) longer than its expected service time on that
 *  board; returns it (*worker_p, item->worker and item->board set), or
 *  NULL.  Call until NULL after scheduler_submit queued an item, after a
 *  board left rotation or a worker was back (scheduler_service), and with
 *  now_ns on the periodic sweep; without now_ns only the boards whose
 *  balance changed since are looked at.  */
work_item_t *scheduler_rebalance (scheduler_t *self, int64_t now_ns, size_t *worker_p);

/*  Background items waiting.  */
size_t scheduler_queued_low (scheduler_t *self);

/*  Removes and returns the oldest waiting background item, or NULL (to free
 *  them at shutdown: their owner is the frontend).  */
work_item_t *scheduler_pop_low (scheduler_t *self);

/*  Counts one finished job on `board`, as an error when `error`.  */
void scheduler_done (scheduler_t *self, size_t board, bool error);

/*  Feeds the EWMA of item's class (mechanism, item->bits) on item->board
 *  with the service time service_ns (ns, the driver call as the worker
 *  measured it), dated item->given_ns + service_ns (metrics_now_ns; 0 =
 *  undated, never stale).  Only successful items count: a board that fails
 *  fast must not look fast.  */
void scheduler_service (scheduler_t *self, const work_item_t *item, int64_t service_ns);

/*  The expected service time in ns of item on `board` (the EWMA of its
 *  class, or scaled from the same mechanism's other key sizes), 0 when
 *  the board has no sample for that mechanism.  */
double scheduler_expected_ns (scheduler_t *self, size_t board, const work_item_t *item);


/*  The bytes an item's cost grows with: a WORK_SYM item's data plus AAD
 *  (cs_sym_t in_len + aad_bytes); other kinds' input (in_len: the digest
 *  to sign, the ciphertext, the peer point), whose cost is the key's.  */
size_t scheduler_item_bytes (const work_item_t *item);

/*  The size class of an item's input, part of its service-time class for
 *  WORK_SYM items (whose cost grows with the data, not the key): 0 for at
 *  most 256 bytes (scheduler_item_bytes), then one class per factor of 4
 *  (1: up to 1 KiB, 2: 4 KiB, 3: 16 KiB, 4: 64 KiB, ...).  0 for other
 *  kinds.  */
unsigned scheduler_size_class (const work_item_t *item);

/*  The fast lane's admission rule (broker/frontend/fast_lane.c, issue 19 item 6):
 *  true when item may run on board's session on the reactor thread at
 *  now_ns (metrics_now_ns): its input is at most SCHEDULER_LANE_MAX_BYTES;
 *  board has measured item's exact class (mechanism, bits, size class; no
 *  scaling from other sizes: the cost must be known) at most limit_ns, or
 *  at most SCHEDULER_LANE_RETRY_FACTOR x limit_ns with the estimate stale
 *  (measured again, at most once a SCHEDULER_STALE_MS); and item's tenant
 *  has not used its share of reactor time this period
 *  (fair_queue_lane_spent).  Board must be < the boards added.  */
bool scheduler_lane_fits (scheduler_t *self, size_t board, const work_item_t *item, int64_t limit_ns,
                          int64_t now_ns);

/*  Charges ns of reactor time (an item run on the fast lane, failed or
 *  not) to the tenant `tenant` (fair_queue_lane_charge).  */
void scheduler_lane_charge (scheduler_t *self, const char *tenant, int64_t ns, int64_t now_ns);

/*  on false: no tenant's fast-lane time is capped (fair_queue_lane_share:
 *  a broker serving one tenant).  On by default.  */
void scheduler_lane_share (scheduler_t *self, bool on);

/*  True when board's estimate for item's class (scheduler_expected_ns) is
 *  older than SCHEDULER_STALE_MS at item->submitted_ns (metrics_now_ns):
 *  placement measures such a board again (placement.h); the fast lane
 *  (broker/frontend/fast_lane.c) may too.  False when never measured.  */
bool scheduler_estimate_stale (scheduler_t *self, size_t board, const work_item_t *item);

/*  Board health (issue #9; broker/boards/health.h decides): a board out of
 *  rotation (up = false) gets no new item and its workers take none from the
 *  queue; boards start in rotation.  Putting it back does not hand it any
 *  item: call scheduler_board_kick.  Taking it out: call
 *  scheduler_take_stranded, then scheduler_rebalance (items that waited
 *  for it).  */
void scheduler_board_set_up (scheduler_t *self, size_t board, bool up);
bool scheduler_board_up (scheduler_t *self, size_t board);

/*  A board back in rotation: gives the oldest queued item it may run to
 *  one of its idle workers and returns it (*worker_p set), or NULL when it
 *  has no idle worker or no such item.  Call until NULL.  (A probe: the
 *  cost model does not apply, the board has to be tried.)  */
work_item_t *scheduler_board_kick (scheduler_t *self, size_t board, size_t *worker_p);

/*  Removes and returns a queued item (client or background) that no board
 *  in rotation may run any more (all its boards out of rotation or tried),
 *  or NULL.  Call until NULL after a board leaves rotation.  */
work_item_t *scheduler_take_stranded (scheduler_t *self);

/*  Removes and returns a queued item (client or background) whose deadline
 *  is before now_ms (cs_clock_ms), or NULL.  The deadline sweep calls it
 *  until NULL.  */
work_item_t *scheduler_take_expired (scheduler_t *self, int64_t now_ms);


size_t scheduler_queued (scheduler_t *self);                 /* client items waiting */
size_t scheduler_queued_tenant (scheduler_t *self, const char *tenant);  /* ... of tenant */
size_t scheduler_boards (scheduler_t *self);                 /* boards added */
size_t scheduler_idle (scheduler_t *self, size_t board);     /* idle workers of board */
const char *scheduler_board_name (scheduler_t *self, size_t board);
uint64_t scheduler_jobs (scheduler_t *self, size_t board);   /* jobs done */
uint64_t scheduler_errors (scheduler_t *self, size_t board); /* of which failed */

#endif
