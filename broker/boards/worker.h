/*  worker.h — one worker thread of a board (the paper's per-board thread
 *  pool, §4.2.5).  Each worker owns its own driver session, opened in its own
 *  thread (cs_driver.h: a session is used only by the thread that opened it).
 *
 *  Protocol over inproc (docs/DESIGN.md §5): the worker's DEALER (routing id
 *  "w<ID>") connects to the frontend's backend ROUTER and sends "ip"
 *  (id, NULL) when ready; the frontend sends "p" (a work_item_t *) and the
 *  worker answers "ip" (id, item) with item->rv/out set.  Ownership of the
 *  item moves with the pointer.
 */
#ifndef WORKER_H_INCLUDED
#define WORKER_H_INCLUDED

#include <czmq.h>
#include "board.h"
#include "health.h"
#include "metrics.h"
#include "scheduler.h"

typedef struct _worker_t worker_t;

/*  Starts worker `id` of `board`, connecting to backend endpoint `backend`;
 *  it records the service time of each item in `metrics` (metrics.h: stage
 *  service of the item's board; NULL: none).  Each item runs on the
 *  worker's own copies of its inputs, its sign/decrypt result is checked
 *  (verify.h: a wrong one becomes CKR_DEVICE_ERROR with item->wrong), and
 *  it is handed back only when `health` says the reactor has not abandoned
 *  it (health_call_end); else the worker reports back with no item.  After
 *  a session-class error (health_rv_needs_session) the worker reopens its
 *  driver session.  Returns NULL (after logging) when its driver session
 *  cannot be opened.  The worker's thread runs `nice` steps below the
 *  caller's thread (0..19, clamped at 19) and under SCHED_BATCH when
 *  nice > 0 (broker/worker-nice, cryptoserver-broker.conf(5): the reactor
 *  keeps its CPU against a flood's workers, issue 19 item 6); a thread
 *  that cannot be lowered logs a warning and runs on.  The board, the
 *  registry and health must outlive the worker.  Caller destroys.  */
worker_t *worker_new (board_t *board, size_t id, const char *backend, metrics_t *metrics, health_t *health,
                      int nice);

/*  Stops the thread (after its current item) and closes its session;
 *  NULL-safe; nulls *self_p.  */
void worker_destroy (worker_t **self_p);

/*  Asks the worker's thread to end after its current item, without
 *  waiting; then poll worker_stopped and worker_destroy it.  NULL-safe.  */
void worker_stop (worker_t *self);

/*  True when the worker's thread has ended (after worker_stop), waiting up
 *  to timeout_ms.  */
bool worker_stopped (worker_t *self, int timeout_ms);

/*  Leaves a worker whose thread is stuck in a driver call (health.h: LOST)
 *  behind: frees nothing it might still use and does not wait for it (the
 *  process is about to exit).  NULL-safe; nulls *self_p.  */
void worker_abandon (worker_t **self_p);

/*  Runs one item with a driver session, in the calling thread, without the
 *  result check: sets item->rv and, on CKR_OK, item->out/out_len
 *  (signature, plaintext or generated PKCS#8; malloc'd, owned by the item)
 *  or item->generated.  Exposed for tests.  */
void worker_run_item (board_t *board, cs_drv_session_t *session, work_item_t *item);

#endif
