/*  link_int.h — the link's inside, shared by the files of the link unit
 *  only: link.c (the I/O thread, the leader's turn, the life cycle) and
 *  link_call.c (a call's encoding, a blocking call, and the calls that do
 *  not wait: cs_link_submit, cs_link_complete; PKCS#11 3.2 asynchronous
 *  sessions, issue #23).
 */
#ifndef CS_MODULE_LINK_INT_H_INCLUDED
#define CS_MODULE_LINK_INT_H_INCLUDED

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include "association.h"
#include "waitq.h"
#include "link.h"

/*  A call: the queue's waiter and the condition its thread sleeps on
 *  (CLOCK_MONOTONIC).  A blocking call lives on its caller's stack; a
 *  detached one (cs_link_submit) on the heap, with no thread asleep on it:
 *  it is never woken to lead, and it completes when someone drives the
 *  link (cs_link_complete, or any leader's turn).  */
struct _cs_link_call_t {
    cs_waiter_t base;           /* first: the queue's hooks get &base */
    pthread_cond_t cond;
    bool detached;              /* cs_link_submit's: nobody sleeps on cond */
    cs_link_t *link;            /* detached: the link it is queued on */
    Cs__Request shape;          /* detached: what outlives the caller's request: n_jobs
                                   (cs_link_reply_rv) and the ticket (coalescing) */
    uint8_t ticket [CS_WIRE_MAX_TICKET];    /* detached: shape's ticket, wiped at the end */
    int64_t deadline_at;        /* detached: monotonic ms */
    int64_t timeout_ms;
};

struct _cs_link_t {
    void *ctx;
    cs_assoc_t *assocs;         /* one per endpoint: the DEALERs are the leader's, the
                                   monitors the I/O thread's; the health fields are
                                   read and written under the mutex */
    size_t n_assocs;
    int wake_fd;                /* eventfd: -> I/O thread (destroy only) */
    int leader_fd;              /* eventfd: -> the leader's poll */
    pthread_t thread;
    bool thread_started;
    bool abandoned;             /* inherited over fork(): never touched again */
    uint64_t io_wakeups;        /* I/O thread poll returns (atomic; for tests) */
    pthread_mutex_t mutex;      /* guards everything below */
    pthread_cond_t drained;
    cs_waitq_t queue;
    size_t callers;
    bool stopping;
    bool refused;               /* every broker refused our CURVE handshake */
    bool leader;                /* a thread owns the DEALER sockets (the token) */
    bool leader_polling;        /* ... and is in (or entering) its poll: a new frame
                                   must interrupt it; otherwise it looks at the
                                   queue before it polls again */
};

/*  Link mutex held: queues `call` and blocks until it is done or its
 *  deadline of `timeout_ms` passes, leading when nobody holds the token.  */
void cs_link_int_wait (cs_link_t *self, cs_link_call_t *call, int64_t timeout_ms);

/*  Link mutex held: blocks, as cs_link_int_wait does, until the queued
 *  detached call (cs_link_submit's) is done or its deadline passes,
 *  counted among the callers C_Finalize waits for meanwhile; the call
 *  stays queued and detached (cs_link_complete ends it).  */
void cs_link_int_wait_detached (cs_link_t *self, cs_link_call_t *call);

/*  Link mutex held: one turn of the queue and a poll of the DEALERs that
 *  does not block, when nobody holds the token (sends what is queued,
 *  hands out the replies that came); a no-op otherwise (the leader does
 *  it).  */
void cs_link_int_drive (cs_link_t *self);

/*  Link mutex held: wakes one blocking waiter still undone to lead, when
 *  nobody holds the token.  */
void cs_link_int_promote (cs_link_t *self);

/*  A new frame was queued (link mutex held): interrupts the leader's poll
 *  unless it is out of it or `call` joins waiters held for company.  */
void cs_link_int_queued (cs_link_t *self, cs_link_call_t *call);

#endif
