/*  scheduler.c — job queues (per tenant, DRR), idle workers per board,
 *  key routing, service times per board for placement (the cost model:
 *  scheduler.h).  */
#include <czmq.h>
#include <math.h>
#include "cs_util.h"
#include "scheduler.h"

#define S_MAX_BOARDS 64
#define S_EWMA_WEIGHT 0.125         /* of a new sample above the estimate */
#define S_EWMA_WEIGHT_DOWN 0.5      /* ... below it (scheduler.h: falls fast, rises slowly) */

/*  The measured service time of one (mechanism, bits) class on a board.  */
typedef struct {
    unsigned long mech;
    unsigned bits;
    double ewma_ns;
    uint64_t samples;
    int64_t last_ns;                /* metrics_now_ns () of the last sample, 0 unknown */
} s_speed_t;

typedef struct {
    char *name;
    s_speed_t speeds [SCHEDULER_SPEED_CLASSES];
    size_t n_speeds;
    size_t *idle;                   /* stack of idle worker ids */
    size_t n_idle;
    size_t n_workers;
    uint64_t assigned;              /* items given to its workers */
    size_t waiting;                 /* client items waiting that it may run */
    uint64_t jobs;
    uint64_t errors;
} s_board_t;

struct _scheduler_t {
    s_board_t boards [S_MAX_BOARDS];
    size_t n_boards;
    size_t *worker_board;           /* worker id -> board */
    size_t n_workers;
    zhashx_t *keys;                 /* hex CKA_ID -> uint64_t* board set */
    fair_queue_t *queue;            /* client work_item_t *, per tenant */
    zlistx_t *low;                  /* background work_item_t *, oldest first */
    uint64_t up;                    /* boards in rotation (a bit per board) */
    uint64_t recheck;               /* boards whose idle workers scheduler_rebalance
                                       must look at (the balance changed) */
};

/*  The lowest board in set (non-empty).  */
static inline size_t
s_first (uint64_t set)
{
    return (size_t) __builtin_ctzll (set);
}

scheduler_t *
scheduler_new (void)
{
    scheduler_t *self = calloc (1, sizeof *self);
    if (!self)
        return NULL;
    self->keys = zhashx_new ();
    self->queue = fair_queue_new ();
    self->low = zlistx_new ();
    if (!self->keys || !self->queue || !self->low) {
        scheduler_destroy (&self);
        return NULL;
    }
    zhashx_set_destructor (self->keys, (zhashx_destructor_fn *) zstr_free);
    return self;
}

void
scheduler_destroy (scheduler_t **self_p)
{
    scheduler_t *self = self_p ? *self_p : NULL;
    if (!self)
        return;
    for (size_t i = 0; i < self->n_boards; i++) {
        free (self->boards [i].name);
        free (self->boards [i].idle);
    }
    free (self->worker_board);
    zhashx_destroy (&self->keys);
    fair_queue_destroy (&self->queue);
    zlistx_destroy (&self->low);
    free (self);
    *self_p = NULL;
}

int
scheduler_board_add (scheduler_t *self, const char *name)
{
    if (self->n_boards >= S_MAX_BOARDS)
        return -1;
    self->boards [self->n_boards].name = strdup (name);
    self->up |= UINT64_C (1) << self->n_boards;
    return (int) self->n_boards++;
}

/*  Returns the set of boards holding key id (a bit per board), 0 if none.  */
static uint64_t
s_key_boards (scheduler_t *self, const unsigned char *id, size_t len)
{
    char hex [2 * 64 + 1];
    if (len == 0 || len > 64)
        return 0;
    cs_hex_encode (id, len, hex);
    uint64_t *set = zhashx_lookup (self->keys, hex);
    return set ? *set : 0;
}

int
scheduler_key_add (scheduler_t *self, size_t board, const unsigned char *id, size_t len)
{
    char hex [2 * 64 + 1];
    if (board >= self->n_boards || len == 0 || len > 64)
        return -1;
    cs_hex_encode (id, len, hex);
    uint64_t *set = zhashx_lookup (self->keys, hex);
    if (!set) {
        if (!(set = calloc (1, sizeof *set)))
            return -1;
        zhashx_insert (self->keys, hex, set);
    }
    *set |= UINT64_C (1) << board;
    return 0;
}

int
scheduler_worker_add (scheduler_t *self, size_t board)
{
    if (board >= self->n_boards)
        return -1;
    s_board_t *b = &self->boards [board];
    size_t *idle = realloc (b->idle, (b->n_workers + 1) * sizeof *idle);
    size_t *map = realloc (self->worker_board, (self->n_workers + 1) * sizeof *map);
    if (idle)
        b->idle = idle;
    if (map)
        self->worker_board = map;
    if (!idle || !map)
        return -1;
    b->n_workers++;
    self->worker_board [self->n_workers] = board;
    return (int) self->n_workers++;
}

bool
scheduler_has_key (scheduler_t *self, const unsigned char *id, size_t len)
{
    return s_key_boards (self, id, len) != 0;
}

uint64_t
scheduler_key_boards (scheduler_t *self, const unsigned char *id, size_t len)
{
    return s_key_boards (self, id, len);
}

/*  The boards that may run item, in rotation or not, but not tried.  */
static uint64_t
s_item_holders (scheduler_t *self, const work_item_t *item)
{
    uint64_t set = item->boards ? item->boards : s_key_boards (self, item->key_id, item->key_id_len);
    return set & ~item->tried;
}

/*  The boards that may run item now.  */
static uint64_t
s_item_boards (scheduler_t *self, const work_item_t *item)
{
    return s_item_holders (self, item) & self->up;
}

/*  The service-time class of an item: its mechanism (sign/decrypt: the
 *  mechanism; other kinds: a vendor-defined value per kind) and bits.  */
static unsigned long
s_item_mech (const work_item_t *item)
{
    if (item->kind == WORK_SIGN || item->kind == WORK_DECRYPT)
        return item->mech.type;
    return CKM_VENDOR_DEFINED | 0x5c00u | (unsigned long) item->kind;
}

double
scheduler_expected_ns (scheduler_t *self, size_t board, const work_item_t *item)
{
    assert (board < self->n_boards);
    s_board_t *b = &self->boards [board];
    unsigned long mech = s_item_mech (item);
    const s_speed_t *near = NULL;
    for (size_t i = 0; i < b->n_speeds; i++) {
        const s_speed_t *speed = &b->speeds [i];
        if (speed->mech != mech)
            continue;
        if (speed->bits == item->bits)
            return speed->ewma_ns;
        if (!near || labs ((long) speed->bits - (long) item->bits) < labs ((long) near->bits - (long) item->bits))
            near = speed;
    }
    if (!near || near->bits == 0 || item->bits == 0)
        return near ? near->ewma_ns : 0;
    double ratio = (double) item->bits / near->bits;
    return near->ewma_ns * ratio * ratio * ratio;
}

static double s_finish (scheduler_t *self, size_t b, double s_ns, size_t extra);

/*  Board `board` got slower for item's class: flags the idle boards that
 *  items of that class wait for it instead of taking, if waiting for it
 *  may no longer pay (its expected finish times the slack is not below
 *  their service time), for scheduler_rebalance.  A cheap test per board
 *  (other classes: the sweep).  */
static void
s_recheck_slower (scheduler_t *self, size_t board, const work_item_t *item)
{
    double finish = -1;
    for (size_t i = 0; i < self->n_boards; i++) {
        s_board_t *b = &self->boards [i];
        uint64_t bit = UINT64_C (1) << i;
        if (i == board || b->n_idle == 0 || b->waiting == 0 || !(self->up & bit) || (self->recheck & bit))
            continue;
        if (finish < 0)
            finish = s_finish (self, board, scheduler_expected_ns (self, board, item), 0);
        double expected = scheduler_expected_ns (self, i, item);
        if (expected <= 0 || finish * SCHEDULER_SPEED_SLACK >= expected)
            self->recheck |= bit;
    }
}

void
scheduler_service (scheduler_t *self, const work_item_t *item, int64_t service_ns)
{
    if (item->board >= self->n_boards || item->rv != CKR_OK || service_ns < 0)
        return;
    s_board_t *b = &self->boards [item->board];
    unsigned long mech = s_item_mech (item);
    s_speed_t *speed = NULL;
    for (size_t i = 0; !speed && i < b->n_speeds; i++)
        if (b->speeds [i].mech == mech && b->speeds [i].bits == item->bits)
            speed = &b->speeds [i];
    if (!speed && b->n_speeds == SCHEDULER_SPEED_CLASSES)
        return;                     /* full: the classes seen first are kept */
    if (!speed) {
        speed = &b->speeds [b->n_speeds++];
        *speed = (s_speed_t) { .mech = mech, .bits = item->bits, .ewma_ns = (double) service_ns };
    }
    else {
        bool slower = (double) service_ns > speed->ewma_ns;
        speed->ewma_ns += (slower ? S_EWMA_WEIGHT : S_EWMA_WEIGHT_DOWN) * ((double) service_ns - speed->ewma_ns);
        if (slower)
            s_recheck_slower (self, item->board, item);
    }
    speed->samples++;
    speed->last_ns = item->given_ns > 0 ? item->given_ns + service_ns : 0;
}

/*  True when board's estimate for item's class is stale: its last sample is
 *  more than SCHEDULER_STALE_MS older than item->submitted_ns (both
 *  metrics_now_ns; never when either is unknown).  */
static bool
s_stale (scheduler_t *self, size_t board, const work_item_t *item)
{
    const s_board_t *b = &self->boards [board];
    unsigned long mech = s_item_mech (item);
    for (size_t i = 0; i < b->n_speeds; i++) {
        const s_speed_t *speed = &b->speeds [i];
        if (speed->mech == mech && speed->bits == item->bits)
            return item->submitted_ns > 0 && speed->last_ns > 0
                && item->submitted_ns - speed->last_ns > (int64_t) SCHEDULER_STALE_MS * 1000000;
    }
    return false;
}

/*  True when board i of the candidates is preferred to board `best` by the
 *  old rule: more idle workers, then fewer items assigned.  */
static bool
s_less_loaded (scheduler_t *self, size_t i, size_t best)
{
    s_board_t *b = &self->boards [i], *cur = &self->boards [best];
    return b->n_idle > cur->n_idle || (b->n_idle == cur->n_idle && b->assigned < cur->assigned);
}

/*  Fills expected [b] (scheduler_expected_ns) for every board b in set.  */
static void
s_expect (scheduler_t *self, uint64_t set, const work_item_t *item, double *expected)
{
    for (; set; set &= set - 1)
        expected [s_first (set)] = scheduler_expected_ns (self, s_first (set), item);
}

/*  The expected finish (ns from now) of an item on board b whose expected
 *  service time is s_ns, with `extra` items more waiting for b than it
 *  counts (1 for an item not yet queued): s_ns on an idle board; on a busy
 *  one, the item starts after the items waiting that b may run and itself
 *  have left the queue, one every s_ns / workers on average, so
 *  s_ns * (1 + (waiting + extra) / workers).  INFINITY for a busy board
 *  without a sample (it is never waited for).  */
static double
s_finish (scheduler_t *self, size_t b, double s_ns, size_t extra)
{
    const s_board_t *board = &self->boards [b];
    if (board->n_idle > 0)
        return s_ns;
    if (s_ns <= 0 || board->n_workers == 0)
        return INFINITY;
    return s_ns * (1 + (double) (board->waiting + extra) / (double) board->n_workers);
}

/*  Picks the board in `set` with idle workers where item is expected to
 *  finish first: the smallest expected service time; among boards within
 *  SCHEDULER_SPEED_SLACK of it, most idle, then fewest assigned.  Returns
 *  -1 when none of them has an idle worker.  */
static int
s_pick_board (scheduler_t *self, uint64_t set, const double *expected)
{
    double fastest = -1;
    for (size_t i = 0; i < self->n_boards; i++) {
        if (!(set & (UINT64_C (1) << i)) || self->boards [i].n_idle == 0)
            continue;
        if (fastest < 0 || expected [i] < fastest)
            fastest = expected [i];
    }
    int best = -1;
    for (size_t i = 0; fastest >= 0 && i < self->n_boards; i++) {
        if (!(set & (UINT64_C (1) << i)) || self->boards [i].n_idle == 0
        ||  expected [i] > fastest * SCHEDULER_SPEED_SLACK)
            continue;
        if (best < 0 || s_less_loaded (self, i, (size_t) best))
            best = (int) i;
    }
    return best;
}

/*  True when waiting for a busy board in set (other than b) pays for an
 *  item whose expected service time on board b is expected [b]: its
 *  expected finish there, times SCHEDULER_SPEED_SLACK, is below
 *  expected [b] (so boards about as fast never make an item wait).  `extra`
 *  as for s_finish.  A board without a sample (expected 0) never waits.  */
static bool
s_waiting_pays (scheduler_t *self, uint64_t set, size_t b, const double *expected, size_t extra)
{
    if (expected [b] <= 0)
        return false;
    for (set &= ~(UINT64_C (1) << b); set; set &= set - 1) {
        size_t c = s_first (set);
        if (s_finish (self, c, expected [c], extra) * SCHEDULER_SPEED_SLACK < expected [b])
            return true;
    }
    return false;
}

/*  Gives item to worker `worker` of board `board`.  */
static void
s_assign (scheduler_t *self, work_item_t *item, size_t board, size_t worker)
{
    item->board = board;
    item->worker = worker;
    self->boards [board].assigned++;
}

/*  Queues a client item in its tenant's FIFO, counted as waiting on the
 *  boards that may run it.  Returns 0, or -1 when out of memory.  */
static int
s_enqueue (scheduler_t *self, work_item_t *item)
{
    if (fair_queue_add (self->queue, item->tenant, item))
        return -1;
    item->queued_on = s_item_holders (self, item);
    for (uint64_t set = item->queued_on; set; set &= set - 1)
        self->boards [s_first (set)].waiting++;
    return 0;
}

/*  A client item left the queue (item may be NULL): no longer waiting.  */
static work_item_t *
s_dequeued (scheduler_t *self, work_item_t *item)
{
    for (uint64_t set = item ? item->queued_on : 0; set; set &= set - 1)
        self->boards [s_first (set)].waiting--;
    return item;
}

static bool s_peek_worth (scheduler_t *self, size_t board, size_t extra);

scheduler_outcome_t
scheduler_submit (scheduler_t *self, work_item_t *item, size_t *worker_p)
{
    uint64_t holders = s_item_holders (self, item);
    uint64_t set = holders & self->up;
    if (!holders)
        return SCHEDULER_NO_BOARD;
    if (!set)
        return SCHEDULER_NO_BOARD_UP;
    double expected [S_MAX_BOARDS];
    s_expect (self, set, item, expected);
    /*  An idle board whose estimate is stale counts as unmeasured: it gets
     *  the item and is measured again (else a board that once looked slow,
     *  e.g. a first call that parsed the key, might never be tried again).  */
    for (uint64_t idle = set; idle; idle &= idle - 1)
        if (self->boards [s_first (idle)].n_idle > 0 && s_stale (self, s_first (idle), item))
            expected [s_first (idle)] = 0;
    int board = s_pick_board (self, set, expected);
    if (board >= 0 && item->low && self->boards [board].waiting > 0)
        board = -1;                 /* client items it may run wait (for a faster board) */
    if (board >= 0 && !item->low) {
        /*  A client item waits for a busy board when that pays.  Else, if
         *  items wait that the idle board should take now that the queue
         *  grows, it would overtake them: it queues and scheduler_rebalance
         *  gives the idle board the next of them in DRR order (the oldest
         *  of its tenant; the same model decides, this item counted).  */
        if (s_waiting_pays (self, set, (size_t) board, expected, 1))
            board = -1;
        else
        if (s_peek_worth (self, (size_t) board, 1)) {
            self->recheck |= UINT64_C (1) << board;
            board = -1;
        }
    }
    if (board < 0) {
        if (item->low)
            zlistx_add_end (self->low, item);           /* CZMQ aborts on OOM */
        else
        if (s_enqueue (self, item))
            return SCHEDULER_NO_BOARD;
        return SCHEDULER_QUEUED;
    }
    s_board_t *b = &self->boards [board];
    size_t worker = b->idle [--b->n_idle];
    s_assign (self, item, (size_t) board, worker);
    *worker_p = worker;
    return SCHEDULER_ASSIGNED;
}

/*  What a board's worker may take: items whose boards include `bit`; with
 *  `worth`, only those for which waiting for another board does not pay
 *  (s_waiting_pays), or, with now_ns > 0, that have waited longer than
 *  their expected service time on this board.  The expected service times
 *  of the last item's class are kept (items of one class share them).  */
typedef struct {
    scheduler_t *self;
    size_t board;
    uint64_t bit;
    int64_t now_ns;
    size_t extra;                   /* items about to wait, not counted yet */
    bool known;                     /* expected [] holds the class below */
    unsigned long mech;
    unsigned bits;
    double expected [S_MAX_BOARDS];
} s_match_t;

static bool
s_match (void *item, void *arg)
{
    s_match_t *match = arg;
    return (s_item_boards (match->self, item) & match->bit) != 0;
}

/*  s_match for a queued client item, by the cost model (s_match_t).  */
static bool
s_match_worth (void *arg_item, void *arg)
{
    s_match_t *match = arg;
    work_item_t *item = arg_item;
    scheduler_t *self = match->self;
    uint64_t set = item->queued_on & self->up;
    if (!(set & match->bit))
        return false;
    unsigned long mech = s_item_mech (item);
    if (!match->known || mech != match->mech || item->bits != match->bits) {
        s_expect (self, self->up, item, match->expected);
        match->known = true;
        match->mech = mech;
        match->bits = item->bits;
    }
    if (match->now_ns > 0 && item->submitted_ns > 0
    &&  (double) (match->now_ns - item->submitted_ns) > match->expected [match->board])
        return true;
    return !s_waiting_pays (self, set, match->board, match->expected, match->extra);
}

/*  True when a client item waits that `board` should take by the cost
 *  model (s_match_worth), counting `extra` items more waiting (1: an item
 *  about to be queued).  */
static bool
s_peek_worth (scheduler_t *self, size_t board, size_t extra)
{
    if (self->boards [board].waiting == 0)
        return false;
    s_match_t match = { .self = self, .board = board, .bit = UINT64_C (1) << board, .extra = extra };
    return fair_queue_peek (self->queue, s_match_worth, &match) != NULL;
}

/*  Takes the next queued client item (DRR order) that worker of `board`
 *  should take by the cost model (s_match_worth; now_ns as there), or
 *  NULL.  Looks first, so that a board finding nothing leaves the round
 *  as it is.  */
static work_item_t *
s_take_worth (scheduler_t *self, size_t board, int64_t now_ns)
{
    if (self->boards [board].waiting == 0)
        return NULL;
    s_match_t match = { .self = self, .board = board, .bit = UINT64_C (1) << board,
                        .now_ns = now_ns };
    if (!fair_queue_peek (self->queue, s_match_worth, &match))
        return NULL;
    return s_dequeued (self, fair_queue_take (self->queue, s_match_worth, &match));
}

/*  Takes the oldest background item for which `match` holds, or NULL.  */
static work_item_t *
s_take_low_if (scheduler_t *self, bool (*match) (void *, void *), void *arg)
{
    for (work_item_t *item = zlistx_first (self->low); item; item = zlistx_next (self->low))
        if (match (item, arg)) {
            zlistx_delete (self->low, zlistx_cursor (self->low));
            return item;
        }
    return NULL;
}

work_item_t *
scheduler_worker_ready (scheduler_t *self, size_t worker)
{
    assert (worker < self->n_workers);
    size_t board = self->worker_board [worker];
    s_match_t match = { .self = self, .board = board, .bit = UINT64_C (1) << board };
    work_item_t *item = NULL;
    if (self->up & match.bit) {             /* a board out of rotation takes nothing */
        item = s_take_worth (self, board, 0);
        /*  Background items only when no client item it may run waits,
         *  not even one that waits for a faster board.  */
        if (!item && self->boards [board].waiting == 0)
            item = s_take_low_if (self, s_match, &match);
    }
    if (item) {
        s_assign (self, item, board, worker);
        return item;
    }
    s_board_t *b = &self->boards [board];
    assert (b->n_idle < b->n_workers);
    b->idle [b->n_idle++] = worker;
    return NULL;
}

work_item_t *
scheduler_rebalance (scheduler_t *self, int64_t now_ns, size_t *worker_p)
{
    uint64_t boards = now_ns > 0 ? self->up : self->recheck & self->up;
    for (; boards; boards &= boards - 1) {
        size_t board = s_first (boards);
        s_board_t *b = &self->boards [board];
        work_item_t *item = b->n_idle > 0 ? s_take_worth (self, board, now_ns) : NULL;
        if (!item) {
            self->recheck &= ~(UINT64_C (1) << board);
            continue;
        }
        size_t worker = b->idle [--b->n_idle];
        s_assign (self, item, board, worker);
        *worker_p = worker;
        return item;
    }
    return NULL;
}

int
scheduler_tenant_weight (scheduler_t *self, const char *tenant, unsigned weight)
{
    return fair_queue_weight_set (self->queue, tenant, weight);
}

void
scheduler_done (scheduler_t *self, size_t board, bool error)
{
    assert (board < self->n_boards);
    self->boards [board].jobs++;
    if (error)
        self->boards [board].errors++;
}

size_t scheduler_queued (scheduler_t *self) { return fair_queue_size (self->queue); }
size_t scheduler_queued_tenant (scheduler_t *self, const char *tenant)
{
    return fair_queue_flow_size (self->queue, tenant);
}
size_t scheduler_queued_low (scheduler_t *self) { return zlistx_size (self->low); }
size_t scheduler_boards (scheduler_t *self) { return self->n_boards; }

size_t
scheduler_idle (scheduler_t *self, size_t board)
{
    return board < self->n_boards ? self->boards [board].n_idle : 0;
}

const char *
scheduler_board_name (scheduler_t *self, size_t board)
{
    return board < self->n_boards ? self->boards [board].name : NULL;
}

uint64_t
scheduler_jobs (scheduler_t *self, size_t board)
{
    return board < self->n_boards ? self->boards [board].jobs : 0;
}

uint64_t
scheduler_errors (scheduler_t *self, size_t board)
{
    return board < self->n_boards ? self->boards [board].errors : 0;
}

work_item_t *
scheduler_pop_low (scheduler_t *self)
{
    return zlistx_detach (self->low, NULL);
}

void
scheduler_board_set_up (scheduler_t *self, size_t board, bool up)
{
    assert (board < self->n_boards);
    if (up)
        self->up |= UINT64_C (1) << board;
    else {
        /*  Items that waited for it may now be better on idle boards.  */
        self->up &= ~(UINT64_C (1) << board);
        self->recheck = self->up;
    }
}

bool
scheduler_board_up (scheduler_t *self, size_t board)
{
    return board < self->n_boards && (self->up & (UINT64_C (1) << board));
}

work_item_t *
scheduler_board_kick (scheduler_t *self, size_t board, size_t *worker_p)
{
    assert (board < self->n_boards);
    s_board_t *b = &self->boards [board];
    uint64_t bit = UINT64_C (1) << board;
    if (!(self->up & bit) || b->n_idle == 0)
        return NULL;
    s_match_t match = { .self = self, .board = board, .bit = bit };
    work_item_t *item = s_dequeued (self, fair_queue_take (self->queue, s_match, &match));
    if (!item)
        item = s_take_low_if (self, s_match, &match);
    if (!item)
        return NULL;
    size_t worker = b->idle [--b->n_idle];
    s_assign (self, item, board, worker);
    *worker_p = worker;
    return item;
}

/*  No board in rotation may run the item (arg: the scheduler).  */
static bool
s_stranded (void *item, void *arg)
{
    return s_item_boards (arg, item) == 0;
}

/*  The item's deadline is before *(int64_t *) arg.  */
static bool
s_expired (void *item, void *arg)
{
    return ((work_item_t *) item)->deadline < *(int64_t *) arg;
}

work_item_t *
scheduler_take_stranded (scheduler_t *self)
{
    work_item_t *item = s_dequeued (self, fair_queue_remove_if (self->queue, s_stranded, self));
    return item ? item : s_take_low_if (self, s_stranded, self);
}

work_item_t *
scheduler_take_expired (scheduler_t *self, int64_t now_ms)
{
    work_item_t *item = s_dequeued (self, fair_queue_remove_if (self->queue, s_expired, &now_ms));
    return item ? item : s_take_low_if (self, s_expired, &now_ms);
}
