/*  scheduler.c — job queue, idle workers per board, key routing.  */
#include <czmq.h>
#include "cs_util.h"
#include "scheduler.h"

#define S_MAX_BOARDS 64

typedef struct {
    char *name;
    size_t *idle;                   /* stack of idle worker ids */
    size_t n_idle;
    size_t n_workers;
    uint64_t assigned;              /* items given to its workers */
    uint64_t jobs;
    uint64_t errors;
} s_board_t;

struct _scheduler_t {
    s_board_t boards [S_MAX_BOARDS];
    size_t n_boards;
    size_t *worker_board;           /* worker id -> board */
    size_t n_workers;
    zhashx_t *keys;                 /* hex CKA_ID -> uint64_t* board set */
    zlistx_t *queue;                /* work_item_t *, oldest first */
    zlistx_t *low;                  /* background work_item_t *, oldest first */
    uint64_t up;                    /* boards in rotation (a bit per board) */
};

scheduler_t *
scheduler_new (void)
{
    scheduler_t *self = calloc (1, sizeof *self);
    if (!self)
        return NULL;
    self->keys = zhashx_new ();
    self->queue = zlistx_new ();
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
    zlistx_destroy (&self->queue);
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

/*  Picks the board in `set` with idle workers: most idle, then fewest
 *  assigned.  Returns -1 when none of them has an idle worker.  */
static int
s_pick_board (scheduler_t *self, uint64_t set)
{
    int best = -1;
    for (size_t i = 0; i < self->n_boards; i++) {
        s_board_t *b = &self->boards [i];
        if (!(set & (UINT64_C (1) << i)) || b->n_idle == 0)
            continue;
        s_board_t *cur = best >= 0 ? &self->boards [best] : NULL;
        if (!cur || b->n_idle > cur->n_idle
        ||  (b->n_idle == cur->n_idle && b->assigned < cur->assigned))
            best = (int) i;
    }
    return best;
}

/*  Gives item to worker `worker` of board `board`.  */
static void
s_assign (scheduler_t *self, work_item_t *item, size_t board, size_t worker)
{
    item->board = board;
    item->worker = worker;
    self->boards [board].assigned++;
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
    /*  An idle worker never coexists with a queued item its board can run
     *  (scheduler_worker_ready takes such an item first), so picking an idle
     *  worker here cannot overtake an older item that worker could serve.  */
    int board = s_pick_board (self, set);
    if (board < 0) {
        zlistx_add_end (item->low ? self->low : self->queue, item);
        return SCHEDULER_QUEUED;
    }
    s_board_t *b = &self->boards [board];
    size_t worker = b->idle [--b->n_idle];
    s_assign (self, item, (size_t) board, worker);
    *worker_p = worker;
    return SCHEDULER_ASSIGNED;
}

/*  Takes the oldest item of queue that board (bit) may run, or NULL.  */
static work_item_t *
s_take (scheduler_t *self, zlistx_t *queue, uint64_t bit)
{
    for (work_item_t *item = zlistx_first (queue); item; item = zlistx_next (queue))
        if (s_item_boards (self, item) & bit) {
            zlistx_delete (queue, zlistx_cursor (queue));
            return item;
        }
    return NULL;
}

work_item_t *
scheduler_worker_ready (scheduler_t *self, size_t worker)
{
    assert (worker < self->n_workers);
    size_t board = self->worker_board [worker];
    uint64_t bit = UINT64_C (1) << board;
    work_item_t *item = (self->up & bit) ? s_take (self, self->queue, bit) : NULL;
    if (!item && (self->up & bit))
        item = s_take (self, self->low, bit);
    if (item) {
        s_assign (self, item, board, worker);
        return item;
    }
    s_board_t *b = &self->boards [board];
    assert (b->n_idle < b->n_workers);
    b->idle [b->n_idle++] = worker;
    return NULL;
}

void
scheduler_done (scheduler_t *self, size_t board, bool error)
{
    assert (board < self->n_boards);
    self->boards [board].jobs++;
    if (error)
        self->boards [board].errors++;
}

size_t scheduler_queued (scheduler_t *self) { return zlistx_size (self->queue); }
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
    else
        self->up &= ~(UINT64_C (1) << board);
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
    work_item_t *item = s_take (self, self->queue, bit);
    if (!item)
        item = s_take (self, self->low, bit);
    if (!item)
        return NULL;
    size_t worker = b->idle [--b->n_idle];
    s_assign (self, item, board, worker);
    *worker_p = worker;
    return item;
}

/*  Takes the first item of queue for which `match` holds, or NULL.  */
static work_item_t *
s_take_if (scheduler_t *self, zlistx_t *queue, bool (*match) (scheduler_t *, const work_item_t *, int64_t),
           int64_t arg)
{
    for (work_item_t *item = zlistx_first (queue); item; item = zlistx_next (queue))
        if (match (self, item, arg)) {
            zlistx_delete (queue, zlistx_cursor (queue));
            return item;
        }
    return NULL;
}

static bool
s_stranded (scheduler_t *self, const work_item_t *item, int64_t unused)
{
    (void) unused;
    return s_item_boards (self, item) == 0;
}

static bool
s_expired (scheduler_t *self, const work_item_t *item, int64_t now_ms)
{
    (void) self;
    return item->deadline < now_ms;
}

work_item_t *
scheduler_take_stranded (scheduler_t *self)
{
    work_item_t *item = s_take_if (self, self->queue, s_stranded, 0);
    return item ? item : s_take_if (self, self->low, s_stranded, 0);
}

work_item_t *
scheduler_take_expired (scheduler_t *self, int64_t now_ms)
{
    work_item_t *item = s_take_if (self, self->queue, s_expired, now_ms);
    return item ? item : s_take_if (self, self->low, s_expired, now_ms);
}
