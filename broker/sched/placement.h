/*  placement.h — the scheduler's placement model: where a work item is
 *  expected to finish first, so which idle board takes it now, or whether
 *  it waits for a faster busy board; and which waiting items a free worker
 *  takes.  Internal to the scheduler (scheduler.c and placement.c); the
 *  rest of the broker sees scheduler.h (scheduler_submit,
 *  scheduler_worker_ready, scheduler_rebalance, scheduler_service,
 *  scheduler_expected_ns).  Times are ns (metrics_now_ns) unless said;
 *  SCHEDULER_STALE_MS is ms.
 *
 *  Service times (seed 003's cost models; docs/DESIGN.md §1): the scheduler
 *  keeps an EWMA of the measured service time per (board, mechanism, key
 *  bits, size class: scheduler_size_class, for symmetric items whose cost
 *  grows with their data) of successful items (scheduler_service) that falls fast and rises
 *  slowly: weight 1/2 for a sample below the estimate, 1/8 above, and a
 *  sample under half the estimate replaces it (the estimate came from a
 *  cold call: one slow first call must not keep a fast board unused), and
 *  a sample above it counts as at most 4 estimates (a call preempted on the
 *  shared cores is an outlier; a board that got slower shows it within a
 *  few calls: each may raise the estimate by 3/8).  A call
 *  cannot be faster than its work, but one-time costs (a first call that
 *  parses the key, cold caches) and preemption make calls slower, so the
 *  estimate follows the fast calls.
 *  A board with no sample for that (mechanism, bits) is estimated from its
 *  samples of the same mechanism and size class scaled by the cube of the key size ratio
 *  (the cost of RSA grows with the cube of the modulus), else counts as 0
 *  so that it gets measured.  At submission an idle board whose sample of
 *  the class is older than SCHEDULER_STALE_MS counts as 0 too, so it is
 *  measured again (a first call that parsed the key, or a board that was
 *  slow for a while, would otherwise keep it looking slow and unused);
 *  so does an idle board whose estimate is still warming up: no more
 *  samples of the class than it has workers (at most
 *  SCHEDULER_WARM_SAMPLES), since each worker's first call may be cold
 *  (a board whose first calls were all cold got no more items: issue #8,
 *  board-fault-flip.sh on CI).  Its workers also take waiting items then.
 *
 *  The cost model (issue #8, "placement that may wait for a faster
 *  board"): the expected finish of an item on board b with expected
 *  service time s is s when b has an idle worker; when all its workers are
 *  busy, the item starts after the W client items waiting that b may run
 *  and itself have left the queue, one every s / workers on average:
 *  s * (1 + (W + 1) / workers) (W counts the item itself once it waits).
 *  A busy board without a sample is never waited for.  An item waits for
 *  a busy board only when that finish, times SCHEDULER_SPEED_SLACK, is
 *  below its service time on the best idle board ("waiting pays"); among
 *  idle boards, the smallest service time wins (within the slack of the
 *  fastest, the old rule decides: most idle workers, then fewest items
 *  assigned, so equal boards share the load).  So a fast board that is
 *  busy keeps the items that a slow idle board would finish later, until
 *  its queue is so long that it no longer pays.  Background items
 *  (item->low) go by service time alone (they never wait for a busy board)
 *  and only when no client item the board may run waits.
 *
 *  Host boards (scheduler_board_host; issue #25): boards that compute on
 *  the broker host's own cores (OpenSSL, GMP, SoftHSM and other software
 *  tokens) are not independent hardware: together they have the host's
 *  cores (scheduler_host_cores), and an item one of them runs takes a core
 *  from the others.  So a host board starts an item only while fewer host
 *  items run than there are cores, and only when the host boards that are
 *  cheaper for the item's class (measured, below its service time divided
 *  by SCHEDULER_SPEED_SLACK) have fewer workers than there are cores: else
 *  every core it would use is one a cheaper board can use, so the host's
 *  cores go to the cheapest board for that key and mechanism (an RSA
 *  keystore key signs on the openssl board, not on a SoftHSM board that
 *  imports the key for each job and signs 1.6 times slower on the same
 *  cores).  In the expected finish on a busy host board its workers count
 *  for no more than the cores.  Real accelerators (not host boards) keep
 *  their own capacity and the model above.  When a host worker gives its
 *  core back, the idle workers of every host board are looked at again
 *  (scheduler_rebalance).
 *
 *  The same test decides which waiting items a worker takes: a worker of
 *  board b takes the next item it may run for which waiting for another
 *  board does not pay (the fastest board's workers take any), else it
 *  goes idle.  An idle worker can thus coexist with waiting items; they
 *  are not stranded: scheduler_rebalance gives an idle worker the next
 *  item for which waiting no longer pays, and the caller calls it after
 *  anything that changes the balance (the scheduler notes which boards to
 *  look at, self->recheck): a submission that queued an item an idle
 *  board would have taken (it takes the oldest waiting item instead, so it
 *  never overtakes them), a board leaving rotation, a service time that
 *  grew; and on the reactor's sweep (with now_ns), also every item that
 *  has waited longer than its service time on an idle board, whatever the
 *  model says.
 */
#ifndef PLACEMENT_H_INCLUDED
#define PLACEMENT_H_INCLUDED

#include "scheduler_int.h"

/*  The board in `set` (boards in rotation that may run item, non-empty)
 *  whose idle worker should take item now, or -1 when it should wait (be
 *  queued): no board in set is idle; item is a background item and client
 *  items that board may run wait; item is a client item and waiting for a
 *  busy board pays; or client items wait that the idle board should take
 *  first (then the board is flagged in self->recheck, so that
 *  scheduler_rebalance gives it the next of them).  item->submitted_ns
 *  (metrics_now_ns, ns) dates the stale estimates (SCHEDULER_STALE_MS;
 *  0: none is stale).  Decides only: takes no worker, queues nothing.  */
int placement_choose (scheduler_t *self, const work_item_t *item, uint64_t set);

/*  What a board's worker may take of the queued client items, for
 *  placement_worth (a fair_queue match): items whose boards in rotation
 *  (item->queued_on) include `bit`, and for which waiting for another
 *  board does not pay, or, with now_ns > 0 (metrics_now_ns, ns), that
 *  have waited (since item->submitted_ns) longer than their expected
 *  service time on this board.  Set self, board, bit and now_ns (0: the
 *  model alone); the rest is placement_worth's own (the expected service
 *  times of the last item's class, shared by items of one class).  */
typedef struct {
    scheduler_t *self;
    size_t board;
    uint64_t bit;                   /* UINT64_C (1) << board */
    int64_t now_ns;
    size_t extra;                   /* items about to wait, not counted yet (0 or 1) */
    bool known;                     /* expected [] holds the class below */
    unsigned long mech;
    unsigned bits;
    double expected [SCHED_MAX_BOARDS];     /* ns */
} placement_match_t;

/*  True when the worker of match->board should take the queued client
 *  item `item` by the cost model (placement_match_t; arg is one).  A
 *  fair_queue_peek / fair_queue_take match function.  */
bool placement_worth (void *item, void *arg);

#endif
