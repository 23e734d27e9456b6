/*  board_watch.h — the reactor's side of board health (issue #9): it knows
 *  which item each worker runs and since when, applies the per-board time
 *  limits of driver calls, turns faults into health.h transitions, takes
 *  boards out of and back into rotation (scheduler_board_set_up), logs and
 *  counts it all (metrics.h).  The frontend calls it and re-runs or answers
 *  the items it hands back.  Reactor thread only.
 *
 *  Time limit of a driver call on board B (cryptoserver-broker.conf(5)):
 *  key generation: generate-timeout-ms; anything else: call-timeout-ms, or
 *  when that is 0 (the default) BOARD_WATCH_FACTOR times the board's
 *  measured service time (a moving average of its good calls), at least
 *  BOARD_WATCH_FLOOR_MS and at most BOARD_WATCH_CEILING_MS (the ceiling
 *  until the first good call).  A call that ends after its item's deadline
 *  but within its limit still answers (the broker caps deadlines,
 *  broker/max-deadline-ms, and the client may wait longer).
 */
#ifndef BOARD_WATCH_H_INCLUDED
#define BOARD_WATCH_H_INCLUDED

#include "board.h"
#include "health.h"
#include "metrics.h"
#include "scheduler.h"

#define BOARD_WATCH_FACTOR 10
#define BOARD_WATCH_FLOOR_MS 2000
#define BOARD_WATCH_CEILING_MS 10000
#define BOARD_WATCH_TICK_MS 50          /* the reactor's sweep timer */

typedef struct _board_watch_t board_watch_t;

/*  A watch over n_boards boards (borrowed; their health settings are read)
 *  and n_workers workers, using `health`, `scheduler` and `metrics`
 *  (borrowed, NULL metrics allowed).  NULL when out of memory.  Caller
 *  destroys.  */
board_watch_t *board_watch_new (health_t *health, scheduler_t *scheduler, metrics_t *metrics,
                                board_t **boards, size_t n_boards, size_t n_workers);

/*  NULL-safe; nulls *self_p.  */
void board_watch_destroy (board_watch_t **self_p);

/*  Worker `worker` is handed `item` now (before the send).  */
void board_watch_given (board_watch_t *self, size_t worker, work_item_t *item);

/*  Worker `worker` reported back with `item` (NULL: it is ready, maybe
 *  back from an abandoned call).  Accounts the result of its board:
 *    - a wrong result (item->wrong) is the board's fault at once: logged,
 *      counted, the board out of rotation, the item to be re-run;
 *    - a device- or session-class error (health_rv_is_fault) makes the
 *      board a suspect (item->suspect) and the item is re-run: when it then
 *      runs on another board (any result that is not such an error), every
 *      suspect is blamed (a fault); when a second board fails it the same
 *      way, the job itself is at fault (a request can make a board answer
 *      an error of that class): nobody is blamed and its error is the answer
 *      (session-class errors as CKR_DEVICE_ERROR).  So no client can take
 *      boards out of rotation with a crafted job, and a board alone with a
 *      key is never taken out for errors (its errors reach the clients);
 *    - a good result may end a probe.
 *  Returns true when the item should be re-run on another board.  */
bool board_watch_back (board_watch_t *self, size_t worker, work_item_t *item);

/*  A wrong result of board `board` found outside the worker (the
 *  cross-check, cross_check.h): the board's fault at once, counted in
 *  cryptoserver_wrong_results_total, logged (W:, with `why`) and out of
 *  rotation, as a wrong result found by the worker.  */
void board_watch_wrong (board_watch_t *self, size_t board, const char *why);

/*  The next running item whose call overran its time limit at now_ms
 *  (cs_clock_ms), abandoned now (health_call_abandon; the board's fault,
 *  logged and counted): re-run it elsewhere.  *fault_p is set to true (a
 *  kind of overrun that is not a fault may come later).  NULL when none.  */
work_item_t *board_watch_overrun (board_watch_t *self, int64_t now_ms, bool *fault_p);

/*  Puts boards whose back-off has passed at now_ms back in rotation (on
 *  probation); returns a bit per board put back (then kick each:
 *  scheduler_board_kick).  A board none of whose workers is free stays out.  */
uint64_t board_watch_probe (board_watch_t *self, int64_t now_ms);

/*  The time limit (ms) of a driver call of `kind` on board `board` now.  */
int board_watch_limit_ms (board_watch_t *self, size_t board, work_kind_t kind);

#endif
