/*  board_watch.c — time limits, faults and probes of boards (board_watch.h).  */
#include <czmq.h>
#include "cs_util.h"
#include "cs_wire.h"
#include "board_watch.h"

typedef struct {
    work_item_t *item;              /* the item it runs, or NULL */
    size_t board;
    int64_t given_ms;
    int limit_ms;
} s_worker_t;

struct _board_watch_t {
    health_t *health;
    scheduler_t *scheduler;
    metrics_t *metrics;
    board_t **boards;
    size_t n_boards;
    s_worker_t *workers;
    size_t n_workers;
    int64_t *service_us;            /* per board: moving average of good calls, 0 = none yet */
};

board_watch_t *
board_watch_new (health_t *health, scheduler_t *scheduler, metrics_t *metrics,
                 board_t **boards, size_t n_boards, size_t n_workers)
{
    board_watch_t *self = calloc (1, sizeof *self);
    if (!self)
        return NULL;
    *self = (board_watch_t) { health, scheduler, metrics, boards, n_boards, NULL, n_workers, NULL };
    self->workers = calloc (n_workers + 1, sizeof *self->workers);
    self->service_us = calloc (n_boards + 1, sizeof *self->service_us);
    if (!self->workers || !self->service_us) {
        board_watch_destroy (&self);
        return NULL;
    }
    for (size_t b = 0; b < n_boards; b++)
        health_board_backoff (health, b, boards [b]->probe_min_ms, boards [b]->probe_max_ms);
    return self;
}

void
board_watch_destroy (board_watch_t **self_p)
{
    board_watch_t *self = self_p ? *self_p : NULL;
    if (!self)
        return;
    free (self->workers);
    free (self->service_us);
    free (self);
    *self_p = NULL;
}

int
board_watch_limit_ms (board_watch_t *self, size_t board, work_kind_t kind)
{
    const board_t *b = self->boards [board];
    if (kind == WORK_GENERATE || kind == WORK_GENERATE_RESIDENT)
        return b->generate_timeout_ms;
    if (b->call_timeout_ms > 0)
        return b->call_timeout_ms;
    int64_t us = self->service_us [board];
    if (us == 0)
        return BOARD_WATCH_CEILING_MS;
    int64_t ms = us * BOARD_WATCH_FACTOR / 1000;
    return ms < BOARD_WATCH_FLOOR_MS ? BOARD_WATCH_FLOOR_MS
         : ms > BOARD_WATCH_CEILING_MS ? BOARD_WATCH_CEILING_MS : (int) ms;
}

void
board_watch_given (board_watch_t *self, size_t worker, work_item_t *item)
{
    if (worker >= self->n_workers)
        return;
    s_worker_t *w = &self->workers [worker];
    w->item = item;
    w->board = item->board;
    w->given_ms = cs_clock_ms ();
    w->limit_ms = board_watch_limit_ms (self, item->board, item->kind);
    health_call_start (self->health, worker);
}

/*  A fault of board `board`: counted, and when it takes the board out of
 *  rotation, logged (why: what happened).  */
static void
s_fault (board_watch_t *self, size_t board, metrics_fault_t kind, const char *why)
{
    metrics_board_fault (self->metrics, board, kind);
    int backoff = health_board_next_backoff (self->health, board);
    if (health_board_fault (self->health, board, cs_clock_ms ())) {
        scheduler_board_set_up (self->scheduler, board, false);
        metrics_board_up (self->metrics, board, false);
        zsys_warning ("board %s: %s; out of rotation, probed again in %d ms",
                      self->boards [board]->name, why, backoff);
    }
    else
    if (kind == METRICS_FAULT_WRONG)
        zsys_warning ("board %s: %s (out of rotation already)", self->boards [board]->name, why);
}

void
board_watch_wrong (board_watch_t *self, size_t board, const char *why)
{
    if (self && board < self->n_boards)
        s_fault (self, board, METRICS_FAULT_WRONG, why);
}

bool
board_watch_back (board_watch_t *self, size_t worker, work_item_t *item)
{
    if (worker >= self->n_workers)
        return false;
    if (!item) {
        if (health_worker_back (self->health, worker))
            zsys_info ("board %s: worker %zu is back from its abandoned driver call",
                       self->boards [self->workers [worker].board]->name, worker);
        return false;
    }
    s_worker_t *w = &self->workers [worker];
    size_t board = item->board;
    int64_t service_ms = cs_clock_ms () - w->given_ms;
    w->item = NULL;
    char why [160];
    if (item->wrong) {
        snprintf (why, sizeof why, "wrong result of job %zu (failed verification with the public key)",
                  item->index);
        s_fault (self, board, METRICS_FAULT_WRONG, why);
        return true;
    }
    if (health_rv_is_fault (item->rv)) {
        if (!item->suspect) {                   /* re-run it: whose fault is it? */
            item->suspect = UINT64_C (1) << board;
            return true;
        }
        /*  A second board failed it the same way: the job's fault.  */
        item->suspect = 0;
        if (health_rv_needs_session (item->rv))
            item->rv = CKR_DEVICE_ERROR;        /* the client's session is not the problem */
        return false;
    }
    for (size_t b = 0; item->suspect && b < self->n_boards; b++)
        if (item->suspect & (UINT64_C (1) << b)) {
            snprintf (why, sizeof why, "the driver failed job %zu with a device-class error, "
                      "and board %s then ran it", item->index, self->boards [board]->name);
            s_fault (self, b, METRICS_FAULT_ERROR, why);
        }
    item->suspect = 0;
    if (item->kind != WORK_GENERATE && item->kind != WORK_GENERATE_RESIDENT) {
        int64_t us = service_ms * 1000 + 500;
        self->service_us [board] = self->service_us [board] ? (7 * self->service_us [board] + us) / 8 : us;
    }
    if (health_board_ok (self->health, board)) {
        metrics_board_up (self->metrics, board, true);
        zsys_info ("board %s: a probe succeeded; back in rotation", self->boards [board]->name);
    }
    return false;
}

work_item_t *
board_watch_overrun (board_watch_t *self, int64_t now_ms, bool *fault_p)
{
    for (size_t i = 0; i < self->n_workers; i++) {
        s_worker_t *w = &self->workers [i];
        if (!w->item)
            continue;
        if (now_ms - w->given_ms <= w->limit_ms || !health_call_abandon (self->health, i))
            continue;
        work_item_t *item = w->item;
        w->item = NULL;
        *fault_p = true;
        char why [160];
        snprintf (why, sizeof why, "worker %zu: a driver call over its time limit of %d ms; worker lost",
                  i, w->limit_ms);
        s_fault (self, w->board, METRICS_FAULT_TIMEOUT, why);
        return item;
    }
    return NULL;
}

uint64_t
board_watch_probe (board_watch_t *self, int64_t now_ms)
{
    uint64_t back = 0;
    for (size_t b = 0; b < self->n_boards; b++) {
        if (health_board_state (self->health, b) != HEALTH_DOWN
        ||  scheduler_idle (self->scheduler, b) == 0 || !health_probe_due (self->health, b, now_ms))
            continue;
        scheduler_board_set_up (self->scheduler, b, true);
        zsys_info ("board %s: probing (back in rotation on probation)", self->boards [b]->name);
        back |= UINT64_C (1) << b;
    }
    return back;
}
