/*  fast_lane.c — cheap jobs run on the reactor thread itself (issue #8
 *  "fewer hand-offs per job").
 *
 *  A work item normally makes a round trip reactor -> worker -> reactor
 *  over inproc sockets: two thread wake-ups, two eventfd writes and two
 *  messages, which cost more than an ECDSA P-256 signature on the broker's
 *  own cores (~22 us).  An item whose expected service time on a board of
 *  the fast lane is at most broker/fast-lane-us runs here instead, when
 *  nothing waits in the scheduler (so it overtakes no one: the deficit
 *  round robin order of waiting items is untouched) — the paper's
 *  observation that the cost of a hand-off must stay small against the
 *  work handed off (§5, Table 3).
 *
 *  Only boards that cannot block take part: driver type `openssl` (key
 *  material on the broker's own cores; no device to hang), in rotation,
 *  whose results for the key type are not to be verified (verify.h: the
 *  check runs in workers), and only when cross-checking is off.  A failed
 *  call is not answered here: the item goes on to the scheduler and a
 *  worker, so that the re-run and board-health rules stay in one place
 *  (dispatch.c, board_watch.h).
 *
 *  What may run here is decided by scheduler_lane_fits (scheduler.h,
 *  issue 19 item 6): only an item whose cost is known and small for its
 *  class — the board's EWMA of the exact (mechanism, key bits, size class)
 *  measured at most broker/fast-lane-us, the size class counting for
 *  symmetric jobs, whose cost grows with their data — and whose input is at
 *  most SCHEDULER_LANE_MAX_BYTES (AES-CBC over 64 KiB never runs here, even
 *  on a fast board); a class not measured yet runs on workers until it is,
 *  and one whose estimate is a little over the limit but stale is measured
 *  here again (SCHEDULER_LANE_RETRY_FACTOR).  The time each item takes here
 *  is charged to its tenant (fair_queue_lane_charge): a tenant that used
 *  its share of the reactor this period (fair_queue.h) sends its items to
 *  the workers until the next one, so no tenant gets the reactor to itself.
 *  A broker whose keystore held one tenant at start caps no one
 *  (frontend_args_t.one_tenant, as broker/worker-nice auto): the cap would
 *  protect no other tenant, and it sent about 4 in 5 of that tenant's
 *  ECDSA P-256 signatures through the worker round trip (a fifth fewer
 *  signatures per second at 32 threads; tools/bench-ab.sh).
 *
 *  Owns: one driver session per fast-lane board, opened on the reactor
 *  thread when first used (cs_driver.h: a session stays on its thread).
 *  May call: the scheduler (read; scheduler_lane_charge), worker_run_item,
 *  metrics.  */
#include "frontend_int.h"
#include "worker.h"

struct _fe_fast_lane_t {
    int64_t limit_ns;               /* broker/fast-lane-us in ns; 0 = off */
    uint64_t boards;                /* boards that may take part (bit per board) */
    cs_drv_session_t **sessions;        /* per board, opened when first used */
    size_t n_boards;
};

/*  True when board b may run items on the reactor at all.  */
static bool
s_board_eligible (const board_t *board)
{
    return board->type && streq (board->type, "openssl") && board->session_open && board->session_close;
}

int
fe_fast_lane_start (frontend_t *self)
{
    int us = self->config->fast_lane_us;
    if (us <= 0 || self->config->cross_check > 0)
        return 0;                   /* off: every item goes to a worker */
    fe_fast_lane_t *lane = calloc (1, sizeof *lane);
    if (!lane || !(lane->sessions = calloc (self->args->n_boards + 1, sizeof *lane->sessions))) {
        free (lane);
        return -1;
    }
    lane->limit_ns = (int64_t) us * 1000;
    lane->n_boards = self->args->n_boards;
    for (size_t b = 0; b < self->args->n_boards && b < 64; b++)
        if (s_board_eligible (self->args->boards [b]))
            lane->boards |= UINT64_C (1) << b;
    if (!lane->boards) {
        free (lane->sessions);
        free (lane);
        return 0;
    }
    self->fast = lane;
    zsys_info ("fast lane: items up to %d us on the reactor, %s", us,
               self->args->one_tenant ? "uncapped (one tenant)" : "each tenant's share capped (fair_queue.h)");
    return 0;
}

void
fe_fast_lane_stop (frontend_t *self)
{
    fe_fast_lane_t *lane = self->fast;
    if (!lane)
        return;
    for (size_t b = 0; b < lane->n_boards; b++)
        if (lane->sessions [b])
            self->args->boards [b]->session_close (&lane->sessions [b]);
    free (lane->sessions);
    free (lane);
    self->fast = NULL;
}

/*  The verify percentage that applies to item's result on board (verify.h):
 *  a checked result must come from a worker.  */
static int
s_verify_pct (const board_t *board, const work_item_t *item)
{
    switch (item->kind) {
        case WORK_SIGN:
        case WORK_DECRYPT:
            switch (item->mech.type) {
                case CKM_ECDSA:
                case CKM_EDDSA:
                    return board->verify_ec;
                case CKM_ML_DSA:
                    return 100;     /* always checked, on a worker (pq_work.h) */
                default:
                    return board->verify_rsa;
            }
        case WORK_DERIVE:
        case WORK_SYM:
            return 0;               /* nothing to verify (verify.h) */
        default:
            return 100;             /* other kinds never take the lane */
    }
}

/*  The board of the lane that may run item, or -1.  */
static int
s_pick (frontend_t *self, const work_item_t *item)
{
    fe_fast_lane_t *lane = self->fast;
    uint64_t set = item->boards & lane->boards & ~item->tried;
    for (size_t b = 0; set && b < lane->n_boards; b++) {
        if (!(set & (UINT64_C (1) << b)) || !scheduler_board_up (self->scheduler, b))
            continue;
        if (s_verify_pct (self->args->boards [b], item) > 0)
            continue;
        if (scheduler_lane_fits (self->scheduler, b, item, lane->limit_ns, item->submitted_ns))
            return (int) b;
    }
    return -1;
}

bool
fe_fast_lane_run (frontend_t *self, work_item_t *item)
{
    fe_fast_lane_t *lane = self->fast;
    if (!lane || !item->request || item->low || item->cross || !item->boards
    ||  scheduler_queued (self->scheduler) > 0)
        return false;
    if (item->kind != WORK_SIGN && item->kind != WORK_DECRYPT && item->kind != WORK_DERIVE
    &&  item->kind != WORK_SYM)
        return false;
    int b = s_pick (self, item);
    if (b < 0)
        return false;
    board_t *board = self->args->boards [b];
    if (!lane->sessions [b] && !(lane->sessions [b] = board->session_open (board->handle)))
        return false;
    item->board = (size_t) b;
    item->worker = SIZE_MAX;        /* no worker (board_watch.h does not see it) */
    item->given_ns = metrics_now_ns ();
    worker_run_item (board, lane->sessions [b], item);
    int64_t done_ns = metrics_now_ns ();
    item->service_ns = done_ns - item->given_ns;
    scheduler_lane_charge (self->scheduler, item->tenant, done_ns - item->submitted_ns, done_ns);
    if (item->rv != CKR_OK) {       /* a worker runs it again, under the health rules */
        if (item->out) {
            OPENSSL_cleanse (item->out, item->out_len);
            free (item->out);
        }
        item->out = NULL;
        item->out_len = 0;
        if (health_rv_needs_session (item->rv))
            board->session_close (&lane->sessions [b]);     /* a fresh session next time */
        item->rv = CKR_OK;
        return false;
    }
    metrics_observe (self->args->metrics, item->board, METRICS_SERVICE, item->service_ns);
    metrics_fast_lane (self->args->metrics);
    return true;
}
