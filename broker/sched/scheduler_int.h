/*  scheduler_int.h — the scheduler's state, shared by its two rooms (one
 *  thread: the caller's; nothing here is locked).  Only they include this
 *  header; the rest of the broker sees scheduler.h.
 *
 *    scheduler.c     the bookkeeping: boards, workers and their idle lists,
 *                    key routing, the tenants' fair queue and background
 *                    items, rotation, stranded and expired items
 *    placement.c     the placement model: service-time estimates and which
 *                    board an item should go to, or wait for (placement.h)
 */
#ifndef SCHEDULER_INT_H_INCLUDED
#define SCHEDULER_INT_H_INCLUDED

#include <czmq.h>
#include "scheduler.h"

#define SCHED_MAX_BOARDS 64         /* a bit per board in a uint64_t */

/*  The measured service time of one (mechanism, bits, size class) class
 *  on a board (placement.c keeps it).  */
typedef struct {
    unsigned long mech;             /* the item's class (placement.c: s_item_mech) */
    unsigned bits;                  /* key size in bits, 0 unknown */
    unsigned size_class;            /* scheduler_size_class of its input */
    double ewma_ns;                 /* the estimate, ns */
    uint64_t samples;
    int64_t last_ns;                /* metrics_now_ns () of the last sample, 0 unknown */
} sched_speed_t;

typedef struct {
    char *name;
    sched_speed_t speeds [SCHEDULER_SPEED_CLASSES];
    size_t n_speeds;
    size_t *idle;                   /* stack of idle worker ids */
    size_t n_idle;
    size_t n_workers;
    uint64_t assigned;              /* items given to its workers */
    size_t waiting;                 /* client items waiting that it may run */
    bool host;                      /* runs on the broker host's cores (scheduler_board_host) */
    uint64_t jobs;
    uint64_t errors;
} sched_board_t;

struct _scheduler_t {
    sched_board_t boards [SCHED_MAX_BOARDS];
    size_t n_boards;
    size_t *worker_board;           /* worker id -> board */
    bool *worker_busy;              /* worker id -> has an item (assigned, not ready again) */
    size_t n_workers;
    size_t host_cores;              /* the host boards' shared budget of cores, 0: none */
    size_t host_running;            /* items out with workers of host boards */
    zhashx_t *keys;                 /* hex CKA_ID -> uint64_t* board set */
    fair_queue_t *queue;            /* client work_item_t *, per tenant */
    zlistx_t *low;                  /* background work_item_t *, oldest first */
    uint64_t up;                    /* boards in rotation (a bit per board) */
    uint64_t recheck;               /* boards whose idle workers scheduler_rebalance
                                       must look at (the balance changed) */
};

/*  The host boards (a bit per board).  */
static inline uint64_t
sched_host_set (const scheduler_t *self)
{
    uint64_t set = 0;
    for (size_t b = 0; b < self->n_boards; b++)
        if (self->boards [b].host)
            set |= UINT64_C (1) << b;
    return set;
}

/*  The lowest board in set (non-empty).  */
static inline size_t
sched_first (uint64_t set)
{
    return (size_t) __builtin_ctzll (set);
}

#endif
