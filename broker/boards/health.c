/*  health.c — board health and worker call states (health.h).  */
#include <stdatomic.h>
#include <stdlib.h>
#include "health.h"

enum { S_IDLE = 0, S_GIVEN, S_BUSY, S_LOST };

typedef struct {
    health_state_t state;
    int64_t probe_at;               /* cs_clock_ms when DOWN ends */
    int backoff_ms;                 /* the last back-off given, 0 = none since the reset */
    unsigned good;                  /* good results since the last fault */
    int min_ms, max_ms;
} s_board_t;

struct _health_t {
    s_board_t *boards;
    size_t n_boards;
    _Atomic int *calls;             /* per worker: S_IDLE, S_GIVEN, S_BUSY, S_LOST */
    size_t n_workers;
};

health_t *
health_new (size_t n_boards, size_t n_workers)
{
    health_t *self = calloc (1, sizeof *self);
    if (!self)
        return NULL;
    self->boards = calloc (n_boards + 1, sizeof *self->boards);
    self->calls = calloc (n_workers + 1, sizeof *self->calls);
    if (!self->boards || !self->calls) {
        health_destroy (&self);
        return NULL;
    }
    self->n_boards = n_boards;
    self->n_workers = n_workers;
    for (size_t b = 0; b < n_boards; b++)
        health_board_backoff (self, b, 100, 30000);
    for (size_t w = 0; w < n_workers; w++)
        atomic_init (&self->calls [w], S_IDLE);
    return self;
}

void
health_destroy (health_t **self_p)
{
    health_t *self = self_p ? *self_p : NULL;
    if (!self)
        return;
    free (self->boards);
    free ((void *) self->calls);
    free (self);
    *self_p = NULL;
}

void
health_board_backoff (health_t *self, size_t board, int probe_min_ms, int probe_max_ms)
{
    if (board >= self->n_boards)
        return;
    s_board_t *b = &self->boards [board];
    b->min_ms = probe_min_ms > 0 ? probe_min_ms : 1;
    b->max_ms = probe_max_ms > b->min_ms ? probe_max_ms : b->min_ms;
}

bool
health_rv_is_fault (CK_RV rv)
{
    switch (rv) {
        case CKR_DEVICE_ERROR:
        case CKR_DEVICE_MEMORY:
        case CKR_TOKEN_NOT_RECOGNIZED:
        case CKR_CRYPTOKI_NOT_INITIALIZED:
            return true;
        default:
            return health_rv_needs_session (rv);
    }
}

bool
health_rv_needs_session (CK_RV rv)
{
    switch (rv) {
        case CKR_DEVICE_REMOVED:
        case CKR_TOKEN_NOT_PRESENT:
        case CKR_SESSION_CLOSED:
        case CKR_SESSION_COUNT:
        case CKR_SESSION_HANDLE_INVALID:
        case CKR_SESSION_PARALLEL_NOT_SUPPORTED:
        case CKR_SESSION_READ_ONLY:
        case CKR_SESSION_EXISTS:
        case CKR_USER_NOT_LOGGED_IN:
        case CKR_OPERATION_ACTIVE:
        case CKR_OPERATION_NOT_INITIALIZED:
            return true;
        default:
            return false;
    }
}

/*  The back-off after the current one: doubled, capped.  */
static int
s_next_backoff (const s_board_t *b)
{
    if (b->backoff_ms <= 0 || (b->state == HEALTH_UP && b->good >= HEALTH_GOOD_RESET))
        return b->min_ms;
    return b->backoff_ms > b->max_ms / 2 ? b->max_ms : 2 * b->backoff_ms;
}

bool
health_board_fault (health_t *self, size_t board, int64_t now_ms)
{
    if (board >= self->n_boards)
        return false;
    s_board_t *b = &self->boards [board];
    if (b->state == HEALTH_DOWN)
        return false;
    b->backoff_ms = s_next_backoff (b);
    b->probe_at = now_ms + b->backoff_ms;
    b->state = HEALTH_DOWN;
    b->good = 0;
    return true;
}

bool
health_board_ok (health_t *self, size_t board)
{
    if (board >= self->n_boards)
        return false;
    s_board_t *b = &self->boards [board];
    if (b->good < HEALTH_GOOD_RESET)
        b->good++;
    if (b->state != HEALTH_PROBING)
        return false;
    b->state = HEALTH_UP;
    return true;
}

bool
health_probe_due (health_t *self, size_t board, int64_t now_ms)
{
    if (board >= self->n_boards)
        return false;
    s_board_t *b = &self->boards [board];
    if (b->state != HEALTH_DOWN || now_ms < b->probe_at)
        return false;
    b->state = HEALTH_PROBING;
    return true;
}

health_state_t
health_board_state (health_t *self, size_t board)
{
    return board < self->n_boards ? self->boards [board].state : HEALTH_DOWN;
}

int
health_board_next_backoff (health_t *self, size_t board)
{
    return board < self->n_boards ? s_next_backoff (&self->boards [board]) : 0;
}

void
health_call_start (health_t *self, size_t worker)
{
    if (worker < self->n_workers)
        atomic_store (&self->calls [worker], S_GIVEN);
}

void
health_call_running (health_t *self, size_t worker)
{
    int given = S_GIVEN;
    if (worker < self->n_workers)
        atomic_compare_exchange_strong (&self->calls [worker], &given, S_BUSY);
}

bool
health_call_end (health_t *self, size_t worker)
{
    int busy = S_BUSY, given = S_GIVEN;
    return worker >= self->n_workers
        || atomic_compare_exchange_strong (&self->calls [worker], &busy, S_IDLE)
        || atomic_compare_exchange_strong (&self->calls [worker], &given, S_IDLE);
}

bool
health_call_abandon (health_t *self, size_t worker)
{
    int busy = S_BUSY;
    return worker < self->n_workers && atomic_compare_exchange_strong (&self->calls [worker], &busy, S_LOST);
}

bool
health_worker_back (health_t *self, size_t worker)
{
    int lost = S_LOST;
    return worker < self->n_workers && atomic_compare_exchange_strong (&self->calls [worker], &lost, S_IDLE);
}

bool
health_worker_lost (health_t *self, size_t worker)
{
    return worker < self->n_workers && atomic_load (&self->calls [worker]) == S_LOST;
}
