/*  placement.c — the scheduler's placement model (placement.h): the
 *  service-time estimates per (board, mechanism, bits), their staleness,
 *  the expected finish of an item on a board, and the choice between an
 *  idle board and waiting for a faster busy one, at submission and for
 *  the waiting items a worker takes (scheduler_worker_ready,
 *  scheduler_rebalance).  It decides only; scheduler.c moves the items.  */
#include <math.h>
#include "placement.h"

#define S_EWMA_WEIGHT 0.125         /* of a new sample above the estimate */
#define S_EWMA_WEIGHT_DOWN 0.5      /* ... below it (placement.h: falls fast, rises slowly) */
#define S_RISE_CAP 4.0              /* a sample above counts as at most this many estimates */

/*  The service-time class of an item: its mechanism (sign/decrypt: the
 *  mechanism; symmetric: the cs_sym_t mechanism, never one of sign's;
 *  other kinds: a vendor-defined value per kind), bits and size class
 *  (scheduler_size_class).  */
static unsigned long
s_item_mech (const work_item_t *item)
{
    if (item->kind == WORK_SIGN || item->kind == WORK_DECRYPT)
        return item->mech.type;
    if (item->kind == WORK_SYM)
        return item->sym.mechanism;
    return CKM_VENDOR_DEFINED | 0x5c00u | (unsigned long) item->kind;
}

size_t
scheduler_item_bytes (const work_item_t *item)
{
    return item->kind == WORK_SYM ? item->sym.in_len + item->sym.aad_bytes : item->in_len;
}

unsigned
scheduler_size_class (const work_item_t *item)
{
    if (item->kind != WORK_SYM)
        return 0;
    unsigned size_class = 0;
    for (size_t bytes = scheduler_item_bytes (item); bytes > 256; bytes = (bytes + 3) / 4)
        size_class++;
    return size_class;
}

double
scheduler_expected_ns (scheduler_t *self, size_t board, const work_item_t *item)
{
    assert (board < self->n_boards);
    sched_board_t *b = &self->boards [board];
    unsigned long mech = s_item_mech (item);
    unsigned size_class = scheduler_size_class (item);
    const sched_speed_t *near = NULL;
    for (size_t i = 0; i < b->n_speeds; i++) {
        const sched_speed_t *speed = &b->speeds [i];
        if (speed->mech != mech || speed->size_class != size_class)
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
        sched_board_t *b = &self->boards [i];
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

/*  Board's estimate of item's exact class (mechanism and bits), or NULL
 *  when it has no sample of it.  */
static sched_speed_t *
s_speed (sched_board_t *b, const work_item_t *item)
{
    unsigned long mech = s_item_mech (item);
    unsigned size_class = scheduler_size_class (item);
    for (size_t i = 0; i < b->n_speeds; i++)
        if (b->speeds [i].mech == mech && b->speeds [i].bits == item->bits
        &&  b->speeds [i].size_class == size_class)
            return &b->speeds [i];
    return NULL;
}

void
scheduler_service (scheduler_t *self, const work_item_t *item, int64_t service_ns)
{
    if (item->board >= self->n_boards || item->rv != CKR_OK || service_ns < 0)
        return;
    sched_board_t *b = &self->boards [item->board];
    unsigned long mech = s_item_mech (item);
    sched_speed_t *speed = s_speed (b, item);
    if (!speed && b->n_speeds == SCHEDULER_SPEED_CLASSES)
        return;                     /* full: the classes seen first are kept */
    if (!speed) {
        speed = &b->speeds [b->n_speeds++];
        *speed = (sched_speed_t) { .mech = mech, .bits = item->bits, .size_class = scheduler_size_class (item),
                                   .ewma_ns = (double) service_ns };
    }
    else {
        bool slower = (double) service_ns > speed->ewma_ns;
        if ((double) service_ns * 2 < speed->ewma_ns)
            speed->ewma_ns = (double) service_ns;   /* the estimate came from a cold call (a
                                                       key parsed, caches cold): dropped */
        else {
            /*  One sample moves it up by at most a factor of 1 + 3/8: a call
                preempted by another thread (the cores are shared) is an
                outlier, a board that got slower shows it in a few calls.  */
            double sample = slower && (double) service_ns > S_RISE_CAP * speed->ewma_ns
                          ? S_RISE_CAP * speed->ewma_ns : (double) service_ns;
            speed->ewma_ns += (slower ? S_EWMA_WEIGHT : S_EWMA_WEIGHT_DOWN) * (sample - speed->ewma_ns);
        }
        if (slower)
            s_recheck_slower (self, item->board, item);
    }
    speed->samples++;
    speed->last_ns = item->given_ns > 0 ? item->given_ns + service_ns : 0;
}

/*  True when `speed` (an estimate of item's class, or NULL) is stale: its
 *  last sample is more than SCHEDULER_STALE_MS older than
 *  item->submitted_ns (both metrics_now_ns; never when either is unknown).  */
static bool
s_speed_stale (const sched_speed_t *speed, const work_item_t *item)
{
    return speed && item->submitted_ns > 0 && speed->last_ns > 0
        && item->submitted_ns - speed->last_ns > (int64_t) SCHEDULER_STALE_MS * 1000000;
}

/*  True when board's estimate for item's class may not keep item from it
 *  while it is idle (it counts as unmeasured, placement.h): stale, or
 *  still warming up: no more samples than min (its workers,
 *  SCHEDULER_WARM_SAMPLES).  Each worker's first call of a class may be
 *  cold (the pkcs11 driver opens a session and finds the key per worker):
 *  a board whose first calls were all cold would otherwise look slow and
 *  get nothing more until its estimate went stale.  A class it has no
 *  sample of counts as unmeasured anyway (expected 0, or scaled from
 *  another key size).  */
static bool
s_unproven (scheduler_t *self, size_t board, const work_item_t *item)
{
    sched_board_t *b = &self->boards [board];
    const sched_speed_t *speed = s_speed (b, item);
    size_t warm = b->n_workers < SCHEDULER_WARM_SAMPLES ? b->n_workers : SCHEDULER_WARM_SAMPLES;
    return speed && (speed->samples <= warm || s_speed_stale (speed, item));
}

bool
scheduler_estimate_stale (scheduler_t *self, size_t board, const work_item_t *item)
{
    return board < self->n_boards && s_speed_stale (s_speed (&self->boards [board], item), item);
}

bool
scheduler_lane_fits (scheduler_t *self, size_t board, const work_item_t *item, int64_t limit_ns,
                     int64_t now_ns)
{
    assert (board < self->n_boards);
    if (scheduler_item_bytes (item) > SCHEDULER_LANE_MAX_BYTES
    ||  fair_queue_lane_spent (self->queue, item->tenant, now_ns))
        return false;
    const sched_speed_t *speed = s_speed (&self->boards [board], item);
    if (!speed)
        return false;               /* not measured: its cost is not known */
    return speed->ewma_ns <= (double) limit_ns
        || (speed->ewma_ns <= SCHEDULER_LANE_RETRY_FACTOR * (double) limit_ns && s_speed_stale (speed, item));
}

void
scheduler_lane_charge (scheduler_t *self, const char *tenant, int64_t ns, int64_t now_ns)
{
    fair_queue_lane_charge (self->queue, tenant, ns, now_ns);
}

void
scheduler_lane_share (scheduler_t *self, bool on)
{
    fair_queue_lane_share (self->queue, on);
}

/*  True when board i of the candidates is preferred to board `best` by the
 *  old rule: more idle workers, then fewer items assigned.  */
static bool
s_less_loaded (scheduler_t *self, size_t i, size_t best)
{
    sched_board_t *b = &self->boards [i], *cur = &self->boards [best];
    return b->n_idle > cur->n_idle || (b->n_idle == cur->n_idle && b->assigned < cur->assigned);
}

/*  Fills expected [b] (scheduler_expected_ns) for every board b in set.  */
static void
s_expect (scheduler_t *self, uint64_t set, const work_item_t *item, double *expected)
{
    for (; set; set &= set - 1)
        expected [sched_first (set)] = scheduler_expected_ns (self, sched_first (set), item);
}

/*  The workers of board b that can run at once: all of them, but no more
 *  than the host's cores for a host board under a budget.  */
static size_t
s_parallel (const scheduler_t *self, size_t b)
{
    const sched_board_t *board = &self->boards [b];
    if (board->host && self->host_cores > 0 && self->host_cores < board->n_workers)
        return self->host_cores;
    return board->n_workers;
}

/*  True when host board b may not start an item of the class of expected []
 *  now (placement.h, "Host boards"): every core of the host budget is
 *  taken, or the host boards in `set` that are cheaper for the class
 *  (measured, and below expected [b] / SCHEDULER_SPEED_SLACK) have at
 *  least as many workers as the host has cores, so whatever core b would
 *  take is one a cheaper board can use.  Never for a board that is not a
 *  host board, or without a budget.  */
static bool
s_host_blocked (const scheduler_t *self, size_t b, uint64_t set, const double *expected)
{
    if (!self->boards [b].host || self->host_cores == 0)
        return false;
    if (self->host_running >= self->host_cores)
        return true;
    size_t cheaper = 0;
    for (set &= ~(UINT64_C (1) << b) & self->up; set; set &= set - 1) {
        size_t c = sched_first (set);
        if (self->boards [c].host && expected [c] > 0 && expected [c] * SCHEDULER_SPEED_SLACK < expected [b])
            cheaper += self->boards [c].n_workers;
    }
    return cheaper >= self->host_cores;
}

/*  True when board b has an idle worker that may start an item of the
 *  class of expected [] now (not blocked by the host budget).  */
static bool
s_can_start (const scheduler_t *self, size_t b, uint64_t set, const double *expected)
{
    return self->boards [b].n_idle > 0 && !s_host_blocked (self, b, set, expected);
}

/*  The expected finish (ns from now) of an item on board b whose expected
 *  service time is s_ns, with `extra` items more waiting for b than it
 *  counts (1 for an item not yet queued): s_ns on an idle board; on a busy
 *  one, the item starts after the items waiting that b may run and itself
 *  have left the queue, one every s_ns / workers on average, so
 *  s_ns * (1 + (waiting + extra) / workers), where a host board's workers
 *  count for no more than the host's cores (s_parallel) and a host board
 *  whose cores are all taken counts as busy.  INFINITY for a busy board
 *  without a sample (it is never waited for).  */
static double
s_finish (scheduler_t *self, size_t b, double s_ns, size_t extra)
{
    const sched_board_t *board = &self->boards [b];
    bool cores_free = !board->host || self->host_cores == 0 || self->host_running < self->host_cores;
    if (board->n_idle > 0 && cores_free)
        return s_ns;
    if (s_ns <= 0 || board->n_workers == 0)
        return INFINITY;
    return s_ns * (1 + (double) (board->waiting + extra) / (double) s_parallel (self, b));
}

/*  Picks the board in `set` with idle workers that may start the item
 *  (s_can_start) where it is expected to finish first: the smallest
 *  expected service time; among boards within SCHEDULER_SPEED_SLACK of it,
 *  most idle, then fewest assigned.  Returns -1 when none of them can.  */
static int
s_pick_board (scheduler_t *self, uint64_t set, const double *expected)
{
    double fastest = -1;
    for (size_t i = 0; i < self->n_boards; i++) {
        if (!(set & (UINT64_C (1) << i)) || !s_can_start (self, i, set, expected))
            continue;
        if (fastest < 0 || expected [i] < fastest)
            fastest = expected [i];
    }
    int best = -1;
    for (size_t i = 0; fastest >= 0 && i < self->n_boards; i++) {
        if (!(set & (UINT64_C (1) << i)) || !s_can_start (self, i, set, expected)
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
        size_t c = sched_first (set);
        if (s_finish (self, c, expected [c], extra) * SCHEDULER_SPEED_SLACK < expected [b])
            return true;
    }
    return false;
}

bool
placement_worth (void *arg_item, void *arg)
{
    placement_match_t *match = arg;
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
    const sched_board_t *b = &self->boards [match->board];
    if (b->host && self->host_cores > 0 && self->host_running >= self->host_cores)
        return false;               /* every host core is taken */
    if (match->now_ns > 0 && item->submitted_ns > 0
    &&  (double) (match->now_ns - item->submitted_ns) > match->expected [match->board])
        return true;
    if (s_unproven (self, match->board, item))
        return true;                /* its estimate cannot tell yet: measured on this item */
    if (s_host_blocked (self, match->board, set, match->expected))
        return false;               /* a cheaper host board can use that core */
    return !s_waiting_pays (self, set, match->board, match->expected, match->extra);
}

/*  True when a client item waits that `board` should take by the cost
 *  model (placement_worth), counting `extra` items more waiting (1: an item
 *  about to be queued).  */
static bool
s_peek_worth (scheduler_t *self, size_t board, size_t extra)
{
    if (self->boards [board].waiting == 0)
        return false;
    placement_match_t match = { .self = self, .board = board, .bit = UINT64_C (1) << board, .extra = extra };
    return fair_queue_peek (self->queue, placement_worth, &match) != NULL;
}

int
placement_choose (scheduler_t *self, const work_item_t *item, uint64_t set)
{
    double expected [SCHED_MAX_BOARDS];
    s_expect (self, set, item, expected);
    /*  An idle board whose estimate is stale or still warming up counts as
     *  unmeasured: it gets the item and is measured (again) (else a board
     *  that once looked slow, e.g. first calls that parsed the key, might
     *  never be tried again).  */
    for (uint64_t idle = set; idle; idle &= idle - 1)
        if (self->boards [sched_first (idle)].n_idle > 0 && s_unproven (self, sched_first (idle), item))
            expected [sched_first (idle)] = 0;
    /*  The unproven boards measured at 0 block no one (s_host_blocked
     *  counts measured boards only), and may start when a core is free.  */
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
    return board;
}
