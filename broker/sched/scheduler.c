/*  scheduler.c — the scheduler's bookkeeping: boards, workers and their
 *  idle lists, key routing, the tenants' fair queue (DRR) and background
 *  items, rotation, stranded and expired items.  Which board an item goes
 *  to, or waits for, is the placement model's (placement.c).  */
#include "cs_util.h"
#include "placement.h"

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
    free (self->worker_busy);
    zhashx_destroy (&self->keys);
    fair_queue_destroy (&self->queue);
    zlistx_destroy (&self->low);
    free (self);
    *self_p = NULL;
}

int
scheduler_board_add (scheduler_t *self, const char *name)
{
    if (self->n_boards >= SCHED_MAX_BOARDS)
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
    sched_board_t *b = &self->boards [board];
    size_t *idle = realloc (b->idle, (b->n_workers + 1) * sizeof *idle);
    size_t *map = realloc (self->worker_board, (self->n_workers + 1) * sizeof *map);
    bool *busy = realloc (self->worker_busy, (self->n_workers + 1) * sizeof *busy);
    if (idle)
        b->idle = idle;
    if (map)
        self->worker_board = map;
    if (busy)
        self->worker_busy = busy;
    if (!idle || !map || !busy)
        return -1;
    b->n_workers++;
    self->worker_board [self->n_workers] = board;
    self->worker_busy [self->n_workers] = false;
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

/*  Gives item to worker `worker` of board `board`.  */
static void
s_assign (scheduler_t *self, work_item_t *item, size_t board, size_t worker)
{
    item->board = board;
    item->worker = worker;
    self->boards [board].assigned++;
    self->worker_busy [worker] = true;
    if (self->boards [board].host)
        self->host_running++;
}

/*  Worker `worker` has no item any more: a host board's worker gives its
 *  core back, and the idle workers of every host board may now take a
 *  waiting item (scheduler_rebalance).  */
static void
s_unassign (scheduler_t *self, size_t worker)
{
    if (!self->worker_busy [worker])
        return;
    self->worker_busy [worker] = false;
    if (self->boards [self->worker_board [worker]].host) {
        self->host_running--;
        self->recheck |= sched_host_set (self);
    }
}

void
scheduler_worker_lost (scheduler_t *self, size_t worker)
{
    if (worker < self->n_workers)
        s_unassign (self, worker);
}

void
scheduler_host_cores (scheduler_t *self, size_t cores)
{
    self->host_cores = cores;
}

int
scheduler_board_host (scheduler_t *self, size_t board, bool host)
{
    if (board >= self->n_boards)
        return -1;
    self->boards [board].host = host;
    return 0;
}

size_t
scheduler_host_running (scheduler_t *self)
{
    return self->host_running;
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
        self->boards [sched_first (set)].waiting++;
    return 0;
}

/*  A client item left the queue (item may be NULL): no longer waiting.  */
static work_item_t *
s_dequeued (scheduler_t *self, work_item_t *item)
{
    for (uint64_t set = item ? item->queued_on : 0; set; set &= set - 1)
        self->boards [sched_first (set)].waiting--;
    return item;
}

scheduler_outcome_t
scheduler_submit (scheduler_t *self, work_item_t *item, size_t *worker_p)
{
    uint64_t holders = s_item_holders (self, item);
    uint64_t set = holders & self->up;
    if (!holders)
        return SCHEDULER_NO_BOARD;
    if (!set)
        return SCHEDULER_NO_BOARD_UP;
    int board = placement_choose (self, item, set);
    if (board < 0) {
        if (item->low)
            zlistx_add_end (self->low, item);           /* CZMQ aborts on OOM */
        else
        if (s_enqueue (self, item))
            return SCHEDULER_NO_BOARD;
        return SCHEDULER_QUEUED;
    }
    sched_board_t *b = &self->boards [board];
    size_t worker = b->idle [--b->n_idle];
    s_assign (self, item, (size_t) board, worker);
    *worker_p = worker;
    return SCHEDULER_ASSIGNED;
}

/*  For s_match: the items a board's worker may take regardless of the
 *  placement model (background items; a board back in rotation).  */
typedef struct {
    scheduler_t *self;
    uint64_t bit;                   /* the board (UINT64_C (1) << board) */
} s_match_t;

/*  True when board match->bit may run item now (a fair_queue match).  */
static bool
s_match (void *item, void *arg)
{
    s_match_t *match = arg;
    return (s_item_boards (match->self, item) & match->bit) != 0;
}

/*  Takes the next queued client item (DRR order) that worker of `board`
 *  should take by the cost model (placement_worth; now_ns as there), or
 *  NULL.  Looks first, so that a board finding nothing leaves the round
 *  as it is.  */
static work_item_t *
s_take_worth (scheduler_t *self, size_t board, int64_t now_ns)
{
    if (self->boards [board].waiting == 0)
        return NULL;
    placement_match_t match = { .self = self, .board = board, .bit = UINT64_C (1) << board,
                                .now_ns = now_ns };
    if (!fair_queue_peek (self->queue, placement_worth, &match))
        return NULL;
    return s_dequeued (self, fair_queue_take (self->queue, placement_worth, &match));
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
    s_unassign (self, worker);
    size_t board = self->worker_board [worker];
    s_match_t match = { .self = self, .bit = UINT64_C (1) << board };
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
    sched_board_t *b = &self->boards [board];
    assert (b->n_idle < b->n_workers);
    b->idle [b->n_idle++] = worker;
    return NULL;
}

work_item_t *
scheduler_rebalance (scheduler_t *self, int64_t now_ns, size_t *worker_p)
{
    uint64_t boards = now_ns > 0 ? self->up : self->recheck & self->up;
    for (; boards; boards &= boards - 1) {
        size_t board = sched_first (boards);
        sched_board_t *b = &self->boards [board];
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
    sched_board_t *b = &self->boards [board];
    uint64_t bit = UINT64_C (1) << board;
    if (!(self->up & bit) || b->n_idle == 0)
        return NULL;
    s_match_t match = { .self = self, .bit = bit };
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
