/*  fair_queue.c — per-flow FIFOs served in deficit round robin
 *  (fair_queue.h).  The round is an array of the flows with items waiting
 *  and the index of the flow whose turn it is; flows that just joined
 *  (new_pending of them) sit at that index, before the flow whose turn
 *  they interrupted.  */
#include <czmq.h>
#include "fair_queue.h"

typedef struct {
    char *name;
    unsigned weight;                /* quantum per round, items */
    unsigned deficit;               /* items it may still take in its turn */
    zlistx_t *items;                /* oldest first */
    bool active;                    /* in the round (has items) */
    int64_t lane_period;            /* the period lane_ns counts in (now / period) */
    int64_t lane_ns;                /* reactor time used in it (fair_queue_lane_charge) */
} s_flow_t;

struct _fair_queue_t {
    zhashx_t *flows;                /* name -> s_flow_t (owned) */
    s_flow_t **round;               /* active flows, in round order */
    size_t n_round;
    size_t alloc;
    size_t turn;                    /* index in round of the flow whose turn it is */
    size_t new_pending;             /* new flows at [turn, turn + new_pending) not yet
                                       done with their first turn */
    size_t size;                    /* items waiting */
    bool lane_free;                 /* no flow's reactor time is capped (fair_queue_lane_share) */
};

static void
s_flow_destroy (void **item_p)
{
    s_flow_t *flow = *item_p;
    if (flow) {
        zlistx_destroy (&flow->items);
        free (flow->name);
        free (flow);
    }
    *item_p = NULL;
}

fair_queue_t *
fair_queue_new (void)
{
    fair_queue_t *self = calloc (1, sizeof *self);
    if (!self || !(self->flows = zhashx_new ())) {
        free (self);
        return NULL;
    }
    zhashx_set_destructor (self->flows, s_flow_destroy);
    return self;
}

void
fair_queue_destroy (fair_queue_t **self_p)
{
    fair_queue_t *self = self_p ? *self_p : NULL;
    if (!self)
        return;
    zhashx_destroy (&self->flows);
    free (self->round);
    free (self);
    *self_p = NULL;
}

/*  The flow called name (NULL: ""), made when new; NULL when out of memory.  */
static s_flow_t *
s_flow (fair_queue_t *self, const char *name)
{
    name = name ? name : "";
    s_flow_t *flow = zhashx_lookup (self->flows, name);
    if (flow)
        return flow;
    if (!(flow = calloc (1, sizeof *flow)))
        return NULL;
    flow->name = strdup (name);
    flow->items = zlistx_new ();
    flow->weight = 1;
    if (!flow->name || !flow->items) {
        s_flow_destroy ((void **) &flow);
        return NULL;
    }
    zhashx_insert (self->flows, name, flow);
    return flow;
}

int
fair_queue_weight_set (fair_queue_t *self, const char *name, unsigned weight)
{
    s_flow_t *flow = weight >= 1 && weight <= FAIR_QUEUE_MAX_WEIGHT ? s_flow (self, name) : NULL;
    if (!flow)
        return -1;
    flow->weight = weight;
    return 0;
}

unsigned
fair_queue_weight (fair_queue_t *self, const char *name)
{
    s_flow_t *flow = zhashx_lookup (self->flows, name ? name : "");
    return flow ? flow->weight : 1;
}

/*  Starts the turn of the flow at self->turn: its deficit is one quantum.  */
static void
s_turn_start (fair_queue_t *self)
{
    if (self->n_round > 0) {
        s_flow_t *flow = self->round [self->turn];
        flow->deficit = flow->weight;
    }
}

/*  Ends the current turn: the next flow in the round gets its quantum.  */
static void
s_turn_next (fair_queue_t *self)
{
    if (self->new_pending > 0)
        self->new_pending--;
    self->turn = (self->turn + 1) % self->n_round;
    s_turn_start (self);
}

int
fair_queue_add (fair_queue_t *self, const char *name, void *item)
{
    s_flow_t *flow = s_flow (self, name);
    if (!flow)
        return -1;
    if (!flow->active && self->n_round == self->alloc) {
        size_t alloc = self->alloc ? 2 * self->alloc : 8;
        s_flow_t **round = realloc (self->round, alloc * sizeof *round);
        if (!round)
            return -1;
        self->round = round;
        self->alloc = alloc;
    }
    if (!zlistx_add_end (flow->items, item))
        return -1;
    self->size++;
    if (!flow->active) {
        /*  A flow that had nothing waiting goes next, after the other new
         *  flows (RFC 8290 §4.1, new flows before old ones): a tenant with
         *  one request at a time waits for one item, not one round.  It
         *  cannot take more than its share: once its quantum is used it
         *  is in the round like any other.  */
        size_t at = self->n_round ? self->turn + self->new_pending : 0;
        flow->active = true;
        flow->deficit = 0;
        memmove (self->round + at + 1, self->round + at, (self->n_round - at) * sizeof *self->round);
        self->round [at] = flow;
        self->n_round++;
        if (self->n_round == 1)
            self->turn = 0;
        if (self->n_round == 1 || self->new_pending++ == 0)
            s_turn_start (self);
    }
    return 0;
}

/*  Leaves the round: flow (at index i) had no item left at its turn.  */
static void
s_flow_leave (fair_queue_t *self, size_t i)
{
    s_flow_t *flow = self->round [i];
    flow->active = false;
    flow->deficit = 0;
    memmove (self->round + i, self->round + i + 1, (self->n_round - i - 1) * sizeof *self->round);
    self->n_round--;
    if (i < self->turn)
        self->turn--;
    else
    if (i == self->turn) {          /* the next flow's turn begins */
        if (self->new_pending > 0)
            self->new_pending--;
        if (self->turn >= self->n_round)
            self->turn = 0;
        s_turn_start (self);
    }
}

/*  The oldest item of flow that matches, its cursor left on it; or NULL.  */
static void *
s_find (s_flow_t *flow, fair_queue_match_fn *match, void *arg)
{
    for (void *item = zlistx_first (flow->items); item; item = zlistx_next (flow->items))
        if (!match || match (item, arg))
            return item;
    return NULL;
}

void *
fair_queue_take (fair_queue_t *self, fair_queue_match_fn *match, void *arg)
{
    /*  The current flow, then every other one with a fresh quantum, then
     *  the current one again with a fresh quantum: n + 1 visits.  */
    size_t visits = 0;
    while (self->n_round > 0 && visits <= self->n_round) {
        size_t i = self->turn;
        s_flow_t *flow = self->round [i];
        if (zlistx_size (flow->items) == 0) {
            s_flow_leave (self, i);     /* emptied a round ago: it leaves now */
            continue;
        }
        void *item = flow->deficit > 0 ? s_find (flow, match, arg) : NULL;
        if (item) {
            zlistx_detach_cur (flow->items);
            self->size--;
            flow->deficit--;
            /*  A flow that emptied stays in the round until its next turn
             *  (RFC 8290 §4.2): an item it gets before then waits for its
             *  turn, so a tenant cannot jump the round by emptying and
             *  coming back as a new flow, again and again.  */
            if (flow->deficit == 0 || zlistx_size (flow->items) == 0)
                s_turn_next (self);
            return item;
        }
        s_turn_next (self);
        visits++;
    }
    return NULL;
}

void *
fair_queue_peek (fair_queue_t *self, fair_queue_match_fn *match, void *arg)
{
    for (size_t k = 0; k < self->n_round; k++) {
        s_flow_t *flow = self->round [(self->turn + k) % self->n_round];
        for (void *item = zlistx_first (flow->items); item; item = zlistx_next (flow->items))
            if (!match || match (item, arg))
                return item;
    }
    return NULL;
}

void *
fair_queue_remove_if (fair_queue_t *self, fair_queue_match_fn *match, void *arg)
{
    for (size_t i = 0; i < self->n_round; i++) {
        s_flow_t *flow = self->round [i];
        void *item = s_find (flow, match, arg);
        if (item) {
            zlistx_detach_cur (flow->items);
            self->size--;
            return item;
        }
    }
    return NULL;
}

void
fair_queue_lane_charge (fair_queue_t *self, const char *name, int64_t ns, int64_t now_ns)
{
    s_flow_t *flow = s_flow (self, name);
    if (!flow || ns <= 0)
        return;
    int64_t period = now_ns / FAIR_QUEUE_LANE_PERIOD_NS;
    if (flow->lane_period != period) {
        flow->lane_period = period;
        flow->lane_ns = 0;
    }
    flow->lane_ns += ns;
}

void
fair_queue_lane_share (fair_queue_t *self, bool on)
{
    self->lane_free = !on;
}

bool
fair_queue_lane_spent (fair_queue_t *self, const char *name, int64_t now_ns)
{
    s_flow_t *flow = self->lane_free ? NULL : zhashx_lookup (self->flows, name ? name : "");
    if (!flow || flow->lane_period != now_ns / FAIR_QUEUE_LANE_PERIOD_NS)
        return false;
    int64_t share = (int64_t) flow->weight * FAIR_QUEUE_LANE_PERIOD_NS / FAIR_QUEUE_LANE_SHARE;
    if (share > FAIR_QUEUE_LANE_PERIOD_NS / 2)
        share = FAIR_QUEUE_LANE_PERIOD_NS / 2;
    return flow->lane_ns >= share;
}

size_t
fair_queue_size (fair_queue_t *self)
{
    return self->size;
}

size_t
fair_queue_flow_size (fair_queue_t *self, const char *name)
{
    s_flow_t *flow = zhashx_lookup (self->flows, name ? name : "");
    return flow ? zlistx_size (flow->items) : 0;
}

size_t
fair_queue_active (fair_queue_t *self)
{
    return self->n_round;
}
