/*  dispatch.c — work items between the frontend and the workers: submit
 *  to the scheduler, hand to a worker over the backend ROUTER, take back,
 *  re-run on another board when a board failed it (jobs are stateless,
 *  docs/DESIGN.md §1), run a share of jobs twice and compare (cross_check.h),
 *  answer stranded and expired items, and the board sweep (time limits,
 *  faults, probes: board_watch.h).
 *
 *  An item that is back for good goes to its completion (`done`, set by
 *  the room that made it): dispatch sits below the job rooms and calls
 *  none of them.
 *
 *  Owns: the backend protocol ("w<N>" + item pointer), background_out,
 *  the in-flight metrics of a request's jobs.
 *  May call: the scheduler, board_watch.h, cross_check.h, metrics.h,
 *  worker.h (the loopback core), fast_lane.c.  */
#include <inttypes.h>
#include "frontend_int.h"
#include "worker.h"

static void s_give (frontend_t *self, size_t worker, work_item_t *item);

/*  Counts the request's jobs out with workers (cryptoserver_inflight_jobs):
 *  delta +1 when one goes out, -1 when it is back.  */
static void
s_metrics_inflight (frontend_t *self, fe_request_t *request, long delta)
{
    if (request && !request->metrics_client)
        request->metrics_client = metrics_client (self->args->metrics, request->client_name, request->tenant);
    if (request)
        metrics_inflight_add (request->metrics_client, delta);
}

/*  Wipes and frees the key material an item carried, or unpins the cached
 *  key it used.  */
void
fe_item_wipe_material (frontend_t *self, work_item_t *item)
{
    ks_cache_key_release (self->cache, (ks_key_t **) &item->cached);
    if (item->material) {
        OPENSSL_cleanse (item->material, item->material_len);
        free (item->material);
        item->material = NULL;
        item->material_len = 0;
    }
    item->key.pkcs8 = NULL;
    item->key.pkcs8_len = 0;
}

static void s_item_rerun (frontend_t *self, work_item_t *item);

/*  An item is back for good: counted out of its request's jobs (or of the
 *  background items), its key material wiped or unpinned, then handed to
 *  its completion (item->done), which stores the result and releases the
 *  request.  A member of a cross-check pair goes through cross_check_back
 *  first: answered once the pair is decided, or re-run on a third board.  */
static void
s_item_finish (frontend_t *self, work_item_t *item)
{
    bool third = false;
    if (item->cross && !(item = cross_check_back (self->cross, item, &third)))
        return;                             /* the other run of a cross-check is still out */
    if (third) {
        s_item_rerun (self, item);          /* two boards disagree: a third decides */
        return;
    }
    fe_request_t *request = item->request;
    if (!request) {
        assert (self->background_out > 0);
        self->background_out--;
    }
    else {
        s_metrics_inflight (self, request, -1);
        client_load_jobs_add (self->load, request->load_key, -1);
        fe_item_wipe_material (self, item);
    }
    item->done (item->done_arg, item);
}

/*  Answers an item that did not run (or whose result is dropped) with
 *  CKR_DEVICE_ERROR; `expired`: its deadline passed (counted so).  */
static void
s_item_fail (frontend_t *self, work_item_t *item, bool expired)
{
    if (item->out) {
        OPENSSL_cleanse (item->out, item->out_len);
        free (item->out);
    }
    item->out = NULL;
    item->out_len = 0;
    free (item->pub_out);
    item->pub_out = NULL;
    item->rv = CKR_DEVICE_ERROR;
    if (expired)
        metrics_item_expired (self->args->metrics, item);
    s_item_finish (self, item);
}

/*  Re-runs an item whose board failed it on another board that may run it
 *  (jobs are stateless, docs/DESIGN.md §1), or answers it with CKR_DEVICE_ERROR
 *  when there is none or its deadline passed (docs/CONTRACTS.md).  */
static void
s_item_rerun (frontend_t *self, work_item_t *item)
{
    size_t worker = 0;
    if (cross_check_is_twin (item)) {       /* a twin is not re-run: the check is skipped */
        s_item_fail (self, item, false);
        return;
    }
    item->tried |= UINT64_C (1) << item->board;
    item->wrong = false;
    if (item->out) {
        OPENSSL_cleanse (item->out, item->out_len);
        free (item->out);
        item->out = NULL;
        item->out_len = 0;
    }
    cs_key_info_free_members (&item->generated);
    free (item->pub_out);
    item->pub_out = NULL;
    scheduler_outcome_t outcome = cs_clock_ms () > item->deadline ? SCHEDULER_NO_BOARD
                                : scheduler_submit (self->scheduler, item, &worker);
    if (outcome == SCHEDULER_ASSIGNED || outcome == SCHEDULER_QUEUED)
        metrics_rerun (self->args->metrics);
    if (outcome == SCHEDULER_ASSIGNED)
        s_give (self, worker, item);
    else
    if (outcome != SCHEDULER_QUEUED)
        s_item_fail (self, item, false);
}

/*  Answers queued items that no board in rotation may run any more.  */
static void
s_fail_stranded (frontend_t *self)
{
    for (work_item_t *item; (item = scheduler_take_stranded (self->scheduler)); )
        s_item_fail (self, item, false);
}

static void s_item_back (frontend_t *self, work_item_t *item, bool rerun);

/*  The loopback core (frontend.h) has no worker threads: it runs a client
 *  item at once on its board, in the calling thread, with a session of its
 *  own per board (worker_run_item; no result check, no time limit), hands
 *  it back as a worker would and lets the worker take the next waiting
 *  item.  A background item (pool refill) is failed unrun.  */
static void
s_loop_run (frontend_t *self, size_t worker, work_item_t *item)
{
    while (item) {
        if (!item->request) {
            self->background_out++;
            item->rv = CKR_DEVICE_ERROR;
            s_item_finish (self, item);
        }
        else {
            board_t *board = self->args->boards [item->board];
            cs_drv_session_t **session = self->loop_sessions ? &self->loop_sessions [item->board] : NULL;
            if (session && !*session)
                *session = board->session_open (board->handle);
            item->given_ns = metrics_now_ns ();
            if (session && *session)
                worker_run_item (board, *session, item);
            else
                item->rv = CKR_DEVICE_ERROR;
            item->service_ns = metrics_now_ns () - item->given_ns;
            s_item_back (self, item, false);
        }
        item = scheduler_worker_ready (self->scheduler, worker);
    }
}

/*  Hands item to worker, or fails it unrun if its deadline passed (and then
 *  offers the worker the next waiting item).  */
static void
s_give (frontend_t *self, size_t worker, work_item_t *item)
{
    while (item && cs_clock_ms () > item->deadline) {
        item->rv = CKR_DEVICE_ERROR;
        metrics_item_expired (self->args->metrics, item);
        if (frontend_verbose)
            zsys_debug ("job %zu of request %" PRIu64 ": deadline passed before a worker took it",
                        item->index, ((fe_request_t *) item->request)->req->request_id);
        s_item_finish (self, item);
        item = scheduler_worker_ready (self->scheduler, worker);
    }
    if (item && !self->backend) {           /* the loopback core has no workers (frontend.h) */
        s_loop_run (self, worker, item);
        return;
    }
    if (item) {
        if (!item->request)
            self->background_out++;
        item->given_ns = metrics_now_ns ();
        board_watch_given (self->watch_boards, worker, item);
        zstr_sendfm (self->backend, "w%zu", worker);
        zsock_send (self->backend, "p", item);
        work_item_t *twin = cross_check_twin (self->cross, item);
        scheduler_outcome_t outcome = twin ? scheduler_submit (self->scheduler, twin, &worker) : SCHEDULER_QUEUED;
        if (outcome == SCHEDULER_ASSIGNED)
            s_give (self, worker, twin);    /* both run at once (cross_check.h) */
        else
        if (outcome != SCHEDULER_QUEUED)
            cross_check_unrun (self->cross, twin);
    }
}

/*  An item is back from its board (a worker, or the fast lane): counted,
 *  its service time fed to the scheduler's estimate, then re-run
 *  elsewhere (`rerun`: board_watch_back found a board fault) or finished.  */
static void
s_item_back (frontend_t *self, work_item_t *item, bool rerun)
{
    scheduler_done (self->scheduler, item->board, item->rv != CKR_OK);
    scheduler_service (self->scheduler, item, item->service_ns);
    metrics_item_done (self->args->metrics, item,
                       item->request ? ((fe_request_t *) item->request)->received_ns : 0);
    if (rerun)
        s_item_rerun (self, item);
    else
        s_item_finish (self, item);
}

/*  Gives idle workers the waiting items that should no longer wait for a
 *  busy faster board (scheduler_rebalance; now_ns > 0 on the sweep: also
 *  items that have waited longer than an idle board's service time).  */
static void
s_rebalance (frontend_t *self, int64_t now_ns)
{
    size_t worker = 0;
    for (work_item_t *item; (item = scheduler_rebalance (self->scheduler, now_ns, &worker)); )
        s_give (self, worker, item);
}

/*  Submits a prepared item: given to a worker now, queued, or failed with
 *  `none_rv` when no board may run it.  Returns 0 when it is out.  A client
 *  item counts in its request's `pending` before it can be given: s_give
 *  finishes at once an item whose deadline has passed, and that must not
 *  answer (and free) the request while its jobs are still being routed.  */
int
fe_submit (frontend_t *self, work_item_t *item)
{
    fe_request_t *request = item->request;
    size_t worker = 0;
    item->submitted_ns = metrics_now_ns ();
    item->tenant = request ? request->tenant : item->tenant;     /* a party's partial result: its tenant */
    bool fast = fe_fast_lane_run (self, item);
    scheduler_outcome_t outcome = fast ? SCHEDULER_ASSIGNED : scheduler_submit (self->scheduler, item, &worker);
    if (outcome == SCHEDULER_NO_BOARD)
        return -1;
    if (outcome == SCHEDULER_NO_BOARD_UP)
        return -2;
    if (request) {
        request->pending++;
        client_load_jobs_add (self->load, request->load_key, 1);
    }
    s_metrics_inflight (self, request, 1);
    if (fast)
        s_item_back (self, item, false);    /* ran on the reactor (fast_lane.c) */
    else
    if (outcome == SCHEDULER_ASSIGNED)
        s_give (self, worker, item);
    else
        s_rebalance (self, 0);              /* an idle board may take an older item */
    return 0;
}

/*  A worker is ready ("ip" id, NULL) or returns an item ("ip" id, item):
 *  the item back, the worker given the next one, stranded items answered,
 *  waiting items rebalanced.  Called by the reactor's backend reader,
 *  which then lets held requests start (fe_request_backlog_run).  */
void
fe_dispatch_backend (frontend_t *self)
{
    char *identity = NULL;
    int id = -1;
    work_item_t *item = NULL;
    if (zsock_recv (self->backend, "sip", &identity, &id, &item) || id < 0
    ||  (size_t) id >= self->n_workers) {
        zstr_free (&identity);
        return;
    }
    zstr_free (&identity);
    bool rerun = board_watch_back (self->watch_boards, (size_t) id, item);
    if (item)
        s_item_back (self, item, rerun);
    s_give (self, (size_t) id, scheduler_worker_ready (self->scheduler, (size_t) id));
    if (rerun)
        s_fail_stranded (self);
    s_rebalance (self, 0);                  /* a board out of rotation, a service time grew */
}

/*  The reactor's sweep (every BOARD_WATCH_TICK_MS): calls over their time
 *  limit or deadline are abandoned (re-run or answered), queued items whose
 *  deadline passed are answered at once, boards whose back-off passed are
 *  probed (issue #9), idle workers get items that have waited longer than
 *  their board's service time (scheduler_rebalance).  Called by the
 *  reactor's timer, which then lets held requests start
 *  (fe_request_backlog_run).  */
void
fe_dispatch_sweep (frontend_t *self)
{
    int64_t now = cs_clock_ms ();
    bool fault = false, stranded = false;
    for (work_item_t *item; (item = board_watch_overrun (self->watch_boards, now, &fault)); ) {
        item->rv = CKR_DEVICE_ERROR;            /* counted as a failed job of its board */
        scheduler_done (self->scheduler, item->board, true);
        scheduler_worker_lost (self->scheduler, item->worker);
        metrics_item_done (self->args->metrics, item,
                           item->request ? ((fe_request_t *) item->request)->received_ns : 0);
        if (fault) {
            s_item_rerun (self, item);
            stranded = true;
        }
        else
            s_item_fail (self, item, true);
    }
    for (work_item_t *item; (item = scheduler_take_expired (self->scheduler, now)); )
        s_item_fail (self, item, true);
    if (stranded)
        s_fail_stranded (self);
    uint64_t back = board_watch_probe (self->watch_boards, now);
    for (size_t b = 0; back; b++, back >>= 1) {
        size_t worker = 0;
        for (work_item_t *item; (back & 1) && (item = scheduler_board_kick (self->scheduler, b, &worker)); )
            s_give (self, worker, item);
    }
    s_rebalance (self, metrics_now_ns ());  /* items waiting longer than a slow board takes */
}
