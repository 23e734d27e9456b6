/*  scheduler.h — the job queue and routing of the broker, as a pure data
 *  structure (no threads, no sockets) so it is unit-testable.
 *
 *  The paper's rule (§4.2.5, Figure 3): worker threads, when free, pull the
 *  next work item.  Here: an item goes to an idle worker of a board that holds
 *  its key (the board with the most idle workers, then the fewest jobs
 *  assigned, so load spreads); if none is idle it waits in FIFO order, and a
 *  worker that becomes ready takes the oldest waiting item its board can run.
 */
#ifndef SCHEDULER_H_INCLUDED
#define SCHEDULER_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <p11-kit/pkcs11.h>
#include "cryptoserver.pb-c.h"

/*  One sign or decrypt job on its way to a worker and back.  Ownership moves
 *  with the pointer (frontend -> worker -> frontend); the parent request and
 *  the job it points into stay with the frontend and outlive the item.  */
typedef struct {
    void *request;                  /* parent request; not owned */
    size_t index;                   /* the job's index in the parent */
    const Cs__Job *job;             /* owned by the parent */
    const unsigned char *key_id;    /* points into job */
    size_t key_id_len;
    int64_t deadline;               /* cs_clock_ms() time after which it must not run */
    size_t board;                   /* board it was given to */
    size_t worker;                  /* worker it was given to */
    CK_RV rv;                       /* result */
    unsigned char *out;             /* result bytes, malloc'd, owned by the item */
    size_t out_len;
} work_item_t;

/*  What scheduler_submit did with an item.  */
typedef enum {
    SCHEDULER_ASSIGNED,             /* given to *worker_p now */
    SCHEDULER_QUEUED,               /* waiting for a worker (FIFO) */
    SCHEDULER_NO_BOARD              /* no board holds the key: not kept */
} scheduler_outcome_t;

typedef struct _scheduler_t scheduler_t;

/*  Creates an empty scheduler; NULL when out of memory.  Caller destroys.  */
scheduler_t *scheduler_new (void);

/*  Destroys the scheduler; queued items are NOT freed (their owner is the
 *  frontend).  NULL-safe; nulls *self_p.  */
void scheduler_destroy (scheduler_t **self_p);

/*  Adds a board; returns its index (0, 1, ...) or -1 past 64 boards.  */
int scheduler_board_add (scheduler_t *self, const char *name);

/*  Notes that board `board` holds the key with CKA_ID id (len bytes).  */
int scheduler_key_add (scheduler_t *self, size_t board, const unsigned char *id, size_t len);

/*  Adds a worker of board `board`; it is busy until scheduler_worker_ready.
 *  Returns the worker id (0, 1, ...) or -1.  */
int scheduler_worker_add (scheduler_t *self, size_t board);

/*  Returns true when some board holds key id (len bytes).  */
bool scheduler_has_key (scheduler_t *self, const unsigned char *id, size_t len);

/*  Routes an item (ownership stays with the caller until a worker gets it):
 *  ASSIGNED sets *worker_p, item->worker and item->board; QUEUED keeps it
 *  in FIFO order; NO_BOARD means no board holds its key.  */
scheduler_outcome_t scheduler_submit (scheduler_t *self, work_item_t *item, size_t *worker_p);

/*  Worker `worker` is free: returns the oldest queued item its board holds
 *  the key of (now assigned to it), or NULL, and then the worker is idle.  */
work_item_t *scheduler_worker_ready (scheduler_t *self, size_t worker);

/*  Counts one finished job on `board`, as an error when `error`.  */
void scheduler_done (scheduler_t *self, size_t board, bool error);

size_t scheduler_queued (scheduler_t *self);                 /* items waiting */
size_t scheduler_boards (scheduler_t *self);                 /* boards added */
size_t scheduler_idle (scheduler_t *self, size_t board);     /* idle workers of board */
const char *scheduler_board_name (scheduler_t *self, size_t board);
uint64_t scheduler_jobs (scheduler_t *self, size_t board);   /* jobs done */
uint64_t scheduler_errors (scheduler_t *self, size_t board); /* of which failed */

#endif
