/*  fair_queue.h — one FIFO per flow (a tenant), served in deficit round
 *  robin (Shreedhar & Varghese, "Efficient fair queuing using deficit
 *  round robin", 1995) so that a flow with many items waiting cannot hold
 *  back a flow with few (docs/DESIGN.md §7: tenants share boards fairly).
 *
 *  Every item costs 1; a flow's quantum is its weight (1..FAIR_QUEUE_MAX_WEIGHT,
 *  default 1), so in each round a flow of weight w takes up to w items
 *  while it has items waiting.  A flow's unused deficit is not carried to
 *  the next round (with unit costs DRR is weighted round robin).  A flow
 *  that had nothing waiting and gets an item goes next, before the flows
 *  that stay backlogged (RFC 8290 §4.1's "new flows"): a tenant sending one
 *  request at a time waits for one item in service, not one round.  A flow
 *  that empties stays in the round until its next turn (RFC 8290 §4.2), so
 *  flows that empty and come back often cannot starve a backlogged one.  A
 *  take may be restricted by a match function (the scheduler: "items this
 *  board can run"): a flow with no matching item ends its turn.
 *
 *  A pure data structure (no threads, no sockets); items are opaque
 *  pointers the queue does not own.  Flows are kept once seen (one per
 *  tenant name, a few dozen bytes).
 */
#ifndef FAIR_QUEUE_H_INCLUDED
#define FAIR_QUEUE_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FAIR_QUEUE_MAX_WEIGHT 1000

typedef struct _fair_queue_t fair_queue_t;

/*  True when `item` may be taken now (arg: the caller's).  */
typedef bool (fair_queue_match_fn) (void *item, void *arg);

/*  Creates an empty queue; NULL when out of memory.  Caller destroys.  */
fair_queue_t *fair_queue_new (void);

/*  Destroys the queue, not the items (their owner is the caller).
 *  NULL-safe; nulls *self_p.  */
void fair_queue_destroy (fair_queue_t **self_p);

/*  Sets the weight of `flow` (1..FAIR_QUEUE_MAX_WEIGHT) for its next turns.
 *  Returns 0, or -1 for a weight out of range or out of memory.  */
int fair_queue_weight_set (fair_queue_t *self, const char *flow, unsigned weight);

/*  The weight of `flow` (1 unless set).  */
unsigned fair_queue_weight (fair_queue_t *self, const char *flow);

/*  Appends item to the FIFO of `flow` (NULL: the flow ""); a flow that
 *  had nothing waiting joins the round as the next flow to serve (after
 *  other such new flows).  Returns 0, or -1 when
 *  out of memory (nothing queued).  */
int fair_queue_add (fair_queue_t *self, const char *flow, void *item);

/*  Removes and returns the next item in DRR order for which match (NULL:
 *  any) is true: the oldest matching item of the flow whose turn it is,
 *  if that flow has deficit left, else of the next flows in the round;
 *  NULL when no waiting item matches.  Visits each flow at most once
 *  (plus the current one twice).  */
void *fair_queue_take (fair_queue_t *self, fair_queue_match_fn *match, void *arg);

/*  Returns, without removing it and without touching the round, the oldest
 *  waiting item of the first flow in round order (from the flow whose turn
 *  it is) that has one for which match (NULL: any) is true; NULL when none
 *  matches.  A take with the same match then returns some matching item:
 *  use it to skip a take that would find nothing (a take that finds
 *  nothing ends every flow's turn).  */
void *fair_queue_peek (fair_queue_t *self, fair_queue_match_fn *match, void *arg);

/*  Removes and returns the oldest item of any flow (flows in round order)
 *  for which match is true, without spending any flow's deficit: for items
 *  leaving the queue unrun (expired, or no board left to run them).  NULL
 *  when none matches.  A flow emptied this way leaves the round at its next
 *  turn, as after fair_queue_take.  */
void *fair_queue_remove_if (fair_queue_t *self, fair_queue_match_fn *match, void *arg);

/*  Reactor time (issue 19 item 6).  Items a flow runs on the frontend's
 *  own thread (broker/frontend/fast_lane.c) cost that thread's time, which every
 *  tenant's requests share; each flow may use at most its share of it per
 *  FAIR_QUEUE_LANE_PERIOD_NS: weight x period / FAIR_QUEUE_LANE_SHARE, at
 *  most half the period.  Periods are aligned on multiples of the period
 *  (metrics_now_ns clock); a new period starts every flow at 0.  */
#define FAIR_QUEUE_LANE_PERIOD_NS 100000000     /* 100 ms */
#define FAIR_QUEUE_LANE_SHARE 10                /* weight 1: 1/10 of the period (10 ms) */

/*  With on false no flow's reactor time is capped: fair_queue_lane_spent
 *  is false whatever a flow used.  For a broker serving one tenant, whose
 *  cap would protect no other tenant and sends most of its cheap items
 *  (ECDSA P-256) through the worker round trip the lane exists to skip.
 *  On by default.  */
void fair_queue_lane_share (fair_queue_t *self, bool on);

/*  Charges ns of reactor time to `flow` (NULL: "") in the period of now_ns.
 *  Out of memory: charges nothing.  */
void fair_queue_lane_charge (fair_queue_t *self, const char *flow, int64_t ns, int64_t now_ns);

/*  True when `flow` has used its share of reactor time in the period of
 *  now_ns (its next item goes to a worker).  */
bool fair_queue_lane_spent (fair_queue_t *self, const char *flow, int64_t now_ns);

/*  Items waiting, in all flows / in `flow`.  */
size_t fair_queue_size (fair_queue_t *self);
size_t fair_queue_flow_size (fair_queue_t *self, const char *flow);

/*  Flows in the round: with items waiting, or emptied since their last turn.  */
size_t fair_queue_active (fair_queue_t *self);

#endif
