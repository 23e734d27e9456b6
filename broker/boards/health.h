/*  health.h — board health (issue #9; docs/DESIGN.md §7: a board is not
 *  trusted): which boards are in rotation, when an out-of-rotation board is
 *  probed again, and the hand-over of a work item between the reactor and a
 *  worker whose driver call may overrun its time limit.
 *
 *  Boards.  A board is UP (in rotation), DOWN (out of rotation after a
 *  fault: a failed driver call of the device or session class, a call over
 *  its time limit, or a wrong result) or PROBING (back in rotation on
 *  probation after its back-off: the next result decides).  A good result
 *  while PROBING makes it UP.  A fault puts it DOWN for twice its last
 *  back-off (at most probe-max-ms), or for probe-min-ms when it had none or
 *  when it gave HEALTH_GOOD_RESET good results in a row since its last
 *  fault: so a board that is wrong one time in ten stays out longer and
 *  longer, and one that had a single glitch is back soon.  Probing is "re-admit jobs":
 *  jobs are stateless (docs/DESIGN.md §1), so a job that fails on probation is
 *  simply re-run elsewhere.  Reactor thread only.
 *
 *  Workers.  Each worker has an atomic call state, IDLE, GIVEN, BUSY or
 *  LOST.  The reactor sets GIVEN when it hands an item over; the worker
 *  copies the item's inputs and sets BUSY (from then on it reads nothing of
 *  the item); after its driver call it claims the item back with
 *  BUSY -> IDLE and only then writes the item's results.  The reactor's
 *  time-limit sweep abandons a call with BUSY -> LOST (never while GIVEN:
 *  the worker may be reading the item): from then on the item is the reactor's again (re-run or
 *  answered) and the worker must not touch it (it ran on its own copies of
 *  the inputs, worker.c); when its call ends it reports back with no item
 *  and the reactor makes it IDLE (health_worker_back).  Exactly one of the
 *  two compare-and-swaps succeeds, so the item has one owner at a time.
 */
#ifndef HEALTH_H_INCLUDED
#define HEALTH_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <p11-kit/pkcs11.h>

typedef enum { HEALTH_UP = 0, HEALTH_DOWN, HEALTH_PROBING } health_state_t;

#define HEALTH_GOOD_RESET 100       /* good results in a row that reset the back-off */

typedef struct _health_t health_t;

/*  Board health for n_boards boards and call states for n_workers workers,
 *  all UP and IDLE.  NULL when out of memory.  Caller destroys after every
 *  worker has stopped (or been abandoned: the memory of a LOST worker's
 *  state must outlive it, so an abandoned worker's health is never freed:
 *  see server.c).  */
health_t *health_new (size_t n_boards, size_t n_workers);

/*  NULL-safe; nulls *self_p.  */
void health_destroy (health_t **self_p);

/*  Back-off of board `board`: probe_min_ms after the first fault, doubled
 *  after each failed probe, at most probe_max_ms (milliseconds, >= 1).  */
void health_board_backoff (health_t *self, size_t board, int probe_min_ms, int probe_max_ms);

/*  True when rv, from a driver call, says the board (not the job) may be
 *  at fault: CKR_DEVICE_ERROR, CKR_DEVICE_REMOVED, CKR_DEVICE_MEMORY,
 *  CKR_TOKEN_NOT_PRESENT, CKR_TOKEN_NOT_RECOGNIZED, CKR_SESSION_* (closed,
 *  handle invalid, count, ...), CKR_USER_NOT_LOGGED_IN (the board's session
 *  lost its login), CKR_OPERATION_ACTIVE and CKR_OPERATION_NOT_INITIALIZED
 *  (the board's session kept or lost an operation: a job is stateless and
 *  always starts and ends its operation, so these describe the board, never
 *  the client), CKR_CRYPTOKI_NOT_INITIALIZED.  Not CKR_GENERAL_ERROR:
 *  SoftHSMv2 answers it for bad input (a zero RSA ciphertext, empty data).  */
bool health_rv_is_fault (CK_RV rv);

/*  True when rv is of the session class (CKR_SESSION_*, CKR_USER_NOT_LOGGED_IN,
 *  CKR_OPERATION_ACTIVE, CKR_OPERATION_NOT_INITIALIZED, CKR_DEVICE_REMOVED,
 *  CKR_TOKEN_NOT_PRESENT): the worker reopens its driver session before its
 *  next call, and such an rv never reaches a client (a job that fails so on
 *  two boards answers CKR_DEVICE_ERROR).  */
bool health_rv_needs_session (CK_RV rv);

/*  A fault of board `board` at now_ms (cs_clock_ms).  Returns true when it
 *  took the board out of rotation now (it was UP or PROBING); false when it
 *  was DOWN already (a late result of a call started before).  */
bool health_board_fault (health_t *self, size_t board, int64_t now_ms);

/*  A good result of board `board` (counted towards HEALTH_GOOD_RESET).
 *  Returns true when it brought the board from PROBING back to UP.  */
bool health_board_ok (health_t *self, size_t board);

/*  When board `board` is DOWN and its back-off has passed at now_ms: makes
 *  it PROBING and returns true (put it back in rotation).  */
bool health_probe_due (health_t *self, size_t board, int64_t now_ms);

health_state_t health_board_state (health_t *self, size_t board);

/*  The back-off (ms) the board's next fault would give it.  */
int health_board_next_backoff (health_t *self, size_t board);

/*  Call states (see above).  health_call_start: reactor, before sending an
 *  item (the worker must be IDLE).  health_call_running: worker, after it
 *  copied the item's inputs, before the driver call.  health_call_end:
 *  worker, after its call; true = the item is still the worker's, false =
 *  abandoned (LOST).
 *  health_call_abandon: reactor; true = abandoned now, the item is the
 *  reactor's.  health_worker_back: reactor, when a LOST worker reports back
 *  with no item; true when it was LOST (now IDLE).  */
void health_call_start (health_t *self, size_t worker);
void health_call_running (health_t *self, size_t worker);
bool health_call_end (health_t *self, size_t worker);
bool health_call_abandon (health_t *self, size_t worker);
bool health_worker_back (health_t *self, size_t worker);
bool health_worker_lost (health_t *self, size_t worker);

#endif
