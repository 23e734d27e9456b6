/*  cross_check.h — the paper's cross-check (issue #9; docs/DESIGN.md §7: a board
 *  is not trusted): a fraction of the sign, decrypt and derive jobs
 *  (broker/cross-check, percent, default 0) also runs on a second board that
 *  may run it, in parallel, and the two results are compared before the
 *  job's result is released.  Reactor thread only.
 *
 *  When.  A client item is picked when it is first handed to a worker (its
 *  board is then known): its twin, a copy that may run on any board that may
 *  run the item except that one, is submitted at once, so both run at the
 *  same time on two workers and the client waits for the slower of the two.
 *  No twin when no other board may run it (counted "skipped").
 *
 *  Comparison (cross_check_verdict).  Deterministic mechanisms (CKM_RSA_PKCS
 *  and CKM_RSA_X_509 signatures, CKM_EDDSA, every decryption, ECDH) must give
 *  equal bytes.  Randomised ones (CKM_RSA_PKCS_PSS, CKM_ECDSA) are compared
 *  by verifying both with the key's public half (verify_always).  On a
 *  mismatch each result is verified where the mechanism allows it: when only
 *  one verifies, it is released and the other board gave a wrong result
 *  (board_watch_wrong: out of rotation, cryptoserver_wrong_results_total, a
 *  W: line).  When neither can be told right (a deterministic decryption or
 *  ECDH mismatch, or both wrong), the job runs on a third board, never one of
 *  the two: its result is released when it verifies or equals one of the
 *  two (the other board is then wrong); else, or when there is no third
 *  board, the job fails with CKR_DEVICE_ERROR (logged).  A result is never
 *  released while a mismatch is unresolved.
 *
 *  The twin is never re-run: when it fails (an error, a wrong result the
 *  worker caught, a call over its time limit, its deadline) or ran on the
 *  primary's board after a re-run of the primary, the primary's result
 *  goes out unchanged and the check counts "skipped".  Other mechanisms and
 *  key generation are not cross-checked.
 */
#ifndef CROSS_CHECK_H_INCLUDED
#define CROSS_CHECK_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include "board.h"
#include "board_watch.h"
#include "metrics.h"
#include "scheduler.h"
#include "verify.h"

/*  The outcome of comparing two results A and B.  */
typedef enum {
    CROSS_MATCH = 0,                /* they agree: release A */
    CROSS_A,                        /* only A is right: release A, B's board was wrong */
    CROSS_B,                        /* only B is right: release B, A's board was wrong */
    CROSS_UNDECIDED,                /* they disagree and neither can be told right */
    CROSS_SKIP                      /* they cannot be compared: release A unchecked */
} cross_verdict_t;

/*  The comparison rule (above), pure.  `randomised`: the mechanism gives a
 *  different valid result each time; `equal`: the two results are the same
 *  bytes; va, vb: the verification of A and B with the public key
 *  (verify_always; VERIFY_SKIPPED when it cannot be checked).  For a
 *  deterministic mechanism va and vb are only read when !equal.  */
cross_verdict_t cross_check_verdict (bool randomised, bool equal, verify_outcome_t va, verify_outcome_t vb);

/*  True for the sign mechanisms whose results are randomised
 *  (CKM_RSA_PKCS_PSS, CKM_ECDSA).  */
bool cross_check_randomised (CK_MECHANISM_TYPE mechanism);

typedef struct _cross_check_t cross_check_t;

/*  A cross-check of `percent` (0..100) of the jobs, over `boards` (n_boards,
 *  borrowed), quarantining through `watch`, counting in `metrics` (NULL:
 *  not).  NULL when out of memory.  Caller destroys (after every pair is
 *  over: the frontend drains first).  */
cross_check_t *cross_check_new (int percent, board_t **boards, size_t n_boards, board_watch_t *watch,
                                metrics_t *metrics);

/*  NULL-safe; nulls *self_p.  */
void cross_check_destroy (cross_check_t **self_p);

/*  `item`, a client item, is handed to a worker of item->board now.  When
 *  it is picked for a cross-check (a sign, decrypt or derive item of a
 *  comparable mechanism, never run before, within the percentage), returns
 *  its twin (owned by the cross-check: submit it, and hand it back through
 *  cross_check_back or cross_check_unrun); else NULL.  */
work_item_t *cross_check_twin (cross_check_t *self, work_item_t *item);

/*  The twin could not be submitted (no other board may run it): the pair
 *  is dissolved (counted "skipped") and the twin freed.  */
void cross_check_unrun (cross_check_t *self, work_item_t *twin);

/*  True when item is a twin (it must not be re-run: answer it instead).  */
bool cross_check_is_twin (const work_item_t *item);

/*  A pair member (item->cross set) is about to be answered.  Returns the
 *  primary to answer now, with its rv/out set to the released result, or
 *  NULL when nothing is to be answered yet (the other member is still out;
 *  a twin is always consumed here).  *rerun_p is set to true when the
 *  returned primary must instead be re-run on a third board
 *  (item->tried then holds both boards; its result comes back here).  */
work_item_t *cross_check_back (cross_check_t *self, work_item_t *item, bool *rerun_p);

#endif
