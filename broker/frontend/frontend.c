/*  frontend.c — the frontend actor's reactor (docs/DESIGN.md §1, the paper's
 *  Figure 3): it owns the zloop, the client ROUTER (CURVE server), the
 *  backend ROUTER the workers connect to and the actor pipe, and wires the
 *  rooms of the frontend to them.  Nothing here decides about a request:
 *  a client frame goes to request.c (fe_request_handle), a worker's frame
 *  and the board sweep to dispatch.c, slow-pool results to slow_link.c.
 *  The path of one job through the rooms: docs/FRONTEND.md.
 *
 *  Owns: the sockets, the loop, the timers, start-up and tear-down of the
 *  frontend state (frontend_int.h), the pipe commands (frontend.h).
 *  May call: every room's start/handler entry points (frontend_int.h); it
 *  is the top of the pipeline and nothing calls up into it.  */
#include <inttypes.h>
#include "cs_wire.h"
#include "ks_settle.h"
#include "frontend_int.h"

#define S_ZAP_DOMAIN "cryptoserver"

bool frontend_verbose = false;
size_t frontend_max_reply = CS_WIRE_MAX_REPLY;

/*  Logs "stats board=NAME jobs=N errors=N" per board; if reply, also sends
 *  the lines to the pipe, one frame each.  */
static void
s_stats (frontend_t *self, bool reply)
{
    zmsg_t *msg = reply ? zmsg_new () : NULL;
    for (size_t i = 0; i < scheduler_boards (self->scheduler); i++) {
        char line [256];
        snprintf (line, sizeof line, "board=%s jobs=%" PRIu64 " errors=%" PRIu64,
                  scheduler_board_name (self->scheduler, i), scheduler_jobs (self->scheduler, i),
                  scheduler_errors (self->scheduler, i));
        zsys_info ("stats %s", line);
        if (msg)
            zmsg_addstr (msg, line);
    }
    if (msg)
        zmsg_send (&msg, self->pipe);
}

static int
s_on_stats_timer (zloop_t *loop, int timer_id, void *arg)
{
    s_stats (arg, false);
    return 0;
}

static int
s_on_pipe (zloop_t *loop, zsock_t *reader, void *arg)
{
    frontend_t *self = arg;
    char *command = zstr_recv (self->pipe);
    int rc = 0;
    if (!command || streq (command, "$TERM")) {
        s_stats (self, false);
        rc = -1;
    }
    else
    if (streq (command, "DRAIN")) {
        self->draining = true;
        fe_flow_control (self);
        zsys_info ("draining: no new requests; %zu in flight, %zu background items with workers",
                   self->in_flight, self->background_out);
        fe_drained_check (self);
    }
    else
    if (streq (command, "STATS"))
        s_stats (self, true);
    else
    if (streq (command, "POOL-WAIT"))
        fe_pipe_pool_wait (self);
    else
    if (streq (command, "LOAD")) {
        zstr_sendfm (self->pipe, "%zu", client_load_total (self->load));
        zstr_sendf (self->pipe, "%zu", client_load_peak (self->load));
    }
    zstr_free (&command);
    return rc;
}

/*  Creates, secures and binds the client ROUTER.  */
static int
s_router_bind (frontend_t *self)
{
    const broker_config_t *config = self->config;
    self->router = zsock_new (ZMQ_ROUTER);
    if (!self->router)
        return -1;
    zsock_set_maxmsgsize (self->router, CS_WIRE_MAX_MESSAGE);
    zsock_set_linger (self->router, 1000);
    /*  Per connection: at most rcvhwm requests wait inside libzmq while the
        frontend does not read (max-queue), then TCP pushes back on the
        client; at most sndhwm replies wait for a client that does not read,
        then further replies to it are dropped (ROUTER).  */
    zsock_set_rcvhwm (self->router, config->router_rcvhwm);
    zsock_set_sndhwm (self->router, config->router_sndhwm);
    if (config->curve) {
        zcert_t *cert = zcert_load (config->secret_key);
        if (!cert)
            return -1;
        zcert_apply (cert, self->router);
        zsock_set_curve_server (self->router, 1);
        zsock_set_zap_domain (self->router, S_ZAP_DOMAIN);
        /*  The serial is the first 8 bytes of the broker key, in hex: stable
            and printable (CK_TOKEN_INFO.serialNumber is 16 characters).  */
        cs_hex_encode (zcert_public_key (cert), 8, self->serial);
        zcert_destroy (&cert);
    }
    else {
        zsys_warning ("*** CURVE IS DISABLED (broker/curve/enabled = false): requests, PINs and "
                      "plaintexts travel UNENCRYPTED and any peer can connect ***");
        snprintf (self->serial, sizeof self->serial, "plaintext");
    }
    if (zsock_bind (self->router, "%s", config->endpoint) < 0) {
        zsys_error ("broker/endpoint: cannot bind %s: %s (another broker or demo? set "
                    "broker/endpoint to another port, or tcp://127.0.0.1:! for any free one)",
                    config->endpoint, zmq_strerror (zmq_errno ()));
        return -1;
    }
    const char *bound = zsock_endpoint (self->router);
    self->endpoint = strdup (bound ? bound : config->endpoint);
    /*  Same-host clients: the same ROUTER on a UNIX socket, which skips
        the TCP stack (docs/DESIGN.md "Where one operation's time goes").  */
    if (self->endpoint && config->local_endpoint && zsock_bind (self->router, "%s", config->local_endpoint) < 0) {
        zsys_error ("broker/local-endpoint: cannot bind %s: %s", config->local_endpoint, zmq_strerror (zmq_errno ()));
        return -1;
    }
    if (config->local_endpoint)
        zsys_info ("listening for clients on this host on %s", config->local_endpoint);
    return self->endpoint ? 0 : -1;
}

static int
s_on_router (zloop_t *loop, zsock_t *reader, void *arg)
{
    frontend_t *self = arg;
    zmsg_t *msg = zmsg_recv (self->router);
    if (!msg)
        return 0;
    zframe_t *identity = zmsg_pop (msg);
    zframe_t *body = zmsg_pop (msg);
    if (identity && body)
        fe_request_handle (self, &identity, body, zmsg_size (msg) > 0);
    if (body)       /* the raw frame may hold PINs and per-request keys */
        OPENSSL_cleanse (zframe_data (body), zframe_size (body));
    zframe_destroy (&identity);
    zframe_destroy (&body);
    zmsg_destroy (&msg);
    fe_flow_control (self);
    return 0;
}

/*  A worker is ready or hands an item back (dispatch.c), then requests
 *  held in their clients' backlogs may start (request.c).  */
static int
s_on_backend (zloop_t *loop, zsock_t *reader, void *arg)
{
    fe_dispatch_backend (arg);
    fe_request_backlog_run (arg);
    return 0;
}

/*  The board sweep every BOARD_WATCH_TICK_MS (dispatch.c), then requests
 *  held in their clients' backlogs may start (request.c).  */
static int
s_on_watch_timer (zloop_t *loop, int timer_id, void *arg)
{
    fe_dispatch_sweep (arg);
    fe_request_backlog_run (arg);
    return 0;
}

/*  What the frontend needs to route and answer requests, without sockets:
 *  the queued-bytes ledger, the boards' mechanisms and keys, the pool, the
 *  board watch, the loop with the board sweep, the slow pool and keystore
 *  cache, and the allow-list (or plaintext's default tenant).  Shared by the actor (s_start) and the loopback core
 *  (frontend_core_new).  */
static int
s_core_start (frontend_t *self)
{
    self->ks = self->args->keystore;
    if (!(self->tickets = ticket_mac_new (self->config->ticket_key)))
        return -1;
    if (!(self->load = client_load_new ((size_t) self->config->max_client_bytes,
                                        (size_t) self->config->max_client_jobs)))
        return -1;
    if (fe_build_mechs (self) || fe_build_routing (self) || fe_keys_start (self))
        return -1;
    if (!self->args->health
    ||  !(self->watch_boards = board_watch_new (self->args->health, self->scheduler, self->args->metrics,
                                                self->args->boards, self->args->n_boards, self->n_workers))
    ||  !(self->cross = cross_check_new (self->config->cross_check, self->args->boards, self->args->n_boards,
                                         self->watch_boards, self->args->metrics))
    ||  fe_fast_lane_start (self))
        return -1;
    self->loop = zloop_new ();
    if (!self->loop)
        return -1;
    zloop_set_nonstop (self->loop, true);    /* SIGINT means drain, not stop */
    if (fe_keystore_start (self) || fe_admission_start (self) || fe_quota_start (self))
        return -1;
    zloop_timer (self->loop, BOARD_WATCH_TICK_MS, 0, s_on_watch_timer, self);
    return 0;
}

/*  The actor: the core, then the client ROUTER, the backend ROUTER the
 *  workers connect to, the pipe, the stats timer and the first pool refills.  */
static int
s_start (frontend_t *self)
{
    if (s_core_start (self) || s_router_bind (self))
        return -1;
    self->backend = zsock_new (ZMQ_ROUTER);
    if (!self->backend || zsock_bind (self->backend, "%s", self->args->backend) < 0) {
        zsys_error ("cannot bind the worker endpoint %s", self->args->backend);
        return -1;
    }
    zloop_reader (self->loop, self->pipe, s_on_pipe, self);
    zloop_reader (self->loop, self->backend, s_on_backend, self);
    zloop_reader (self->loop, self->router, s_on_router, self);
    if (fe_shared_start (self) || fe_shared_boards_start (self))
        return -1;
    self->reading = true;
    if (self->config->stats_interval_ms > 0)
        zloop_timer (self->loop, (size_t) self->config->stats_interval_ms, 0, s_on_stats_timer, self);
    fe_pool_refill (self);
    return 0;
}

static void
s_frontend_free (frontend_t *self)
{
    fe_shared_stop (self);                      /* its items' requests answered while the router is up */
    fe_shared_boards_stop (self);
    slow_pool_destroy (&self->slow);            /* before the loop it reads in */
    ks_settle_destroy (&self->settle);          /* after the threads that use it */
    fe_audit_stop (self);                       /* with this thread's keystore */
    zloop_destroy (&self->loop);
    zsock_destroy (&self->router);
    zsock_destroy (&self->backend);
    for (work_item_t *item; self->scheduler && (item = scheduler_pop_low (self->scheduler)); ) {
        if (item->out) {
            OPENSSL_cleanse (item->out, item->out_len);
            free (item->out);
        }
        free (item);
    }
    for (fe_request_t *request; self->load && (request = client_load_pop (self->load)); )
        fe_request_destroy (&request);           /* deferred, never started */
    scheduler_destroy (&self->scheduler);
    for (size_t b = 0; self->loop_sessions && b < self->args->n_boards; b++)
        if (self->loop_sessions [b])
            self->args->boards [b]->session_close (&self->loop_sessions [b]);
    free (self->loop_sessions);
    fe_fast_lane_stop (self);
    cross_check_destroy (&self->cross);
    board_watch_destroy (&self->watch_boards);
    fe_quota_free (self);                       /* after the backlogs: their requests hold quota */
    fe_admission_free (self);
    fe_inventory_free (self);
    fe_pool_stop (self);
    fe_keystore_stop (self);
    ks_cache_destroy (&self->cache);
    client_load_destroy (&self->load);
    ticket_mac_destroy (&self->tickets);
    free (self->endpoint);
}

void
frontend_actor (zsock_t *pipe, void *arg)
{
    frontend_t self = { .args = arg, .config = ((frontend_args_t *) arg)->config, .pipe = pipe };
    int rc = s_start (&self);
    zsock_signal (pipe, 0);
    zstr_send (pipe, rc == 0 ? self.endpoint : "");
    if (rc == 0)
        zloop_start (self.loop);
    else {
        char *command = zstr_recv (pipe);       /* wait for $TERM */
        zstr_free (&command);
    }
    s_frontend_free (&self);
}

/* ------------------------------------------------------------------ */
/*  The loopback core (frontend.h): the same rooms, no sockets          */

struct _frontend_core_t {
    frontend_t fe;
    frontend_reply_fn *reply;       /* the caller's (frontend_core_new) */
    void *reply_arg;
    int64_t settle_end;             /* cs_clock_ms () when frontend_core_settle gives up */
    bool settling;                  /* frontend_core_settle runs the loop */
    int check_timer;                /* s_on_settle_check's, or -1 */
};

/*  Ends the loop when the reply just given was the last one owed; the
 *  timer of s_core_reply, at the loop's next turn (in_flight drops after
 *  the reply is given: fe_request_release).  */
static int
s_on_settle_check (zloop_t *loop, int timer_id, void *arg)
{
    frontend_core_t *self = arg;
    if (self->fe.in_flight == 0)
        return -1;                  /* frontend_core_settle ends the timer */
    self->check_timer = -1;         /* its one turn is over */
    return 0;
}

/*  The core's transport: the caller's, then while the loop runs a check
 *  at its next turn, so frontend_core_settle returns as soon as the last
 *  reply is out, not at its next 1 ms tick.  */
static void
s_core_reply (void *arg, const void *peer, size_t peer_len, const uint8_t *reply, size_t size)
{
    frontend_core_t *self = arg;
    self->reply (self->reply_arg, peer, peer_len, reply, size);
    if (self->settling && self->check_timer == -1)
        self->check_timer = zloop_timer (self->fe.loop, 0, 1, s_on_settle_check, self);
}

frontend_core_t *
frontend_core_new (const frontend_args_t *args, frontend_reply_fn *reply, void *arg)
{
    frontend_core_t *self = calloc (1, sizeof *self);
    if (!self)
        return NULL;
    self->reply = reply;
    self->reply_arg = arg;
    self->check_timer = -1;
    self->fe = (frontend_t) { .args = args, .config = args->config, .reply_fn = s_core_reply, .reply_arg = self };
    snprintf (self->fe.serial, sizeof self->fe.serial, "loopback");
    if (!(self->fe.loop_sessions = calloc (args->n_boards ? args->n_boards : 1, sizeof (cs_drv_session_t *)))
    ||  s_core_start (&self->fe)) {
        frontend_core_destroy (&self);
        return NULL;
    }
    for (size_t worker = 0; worker < self->fe.n_workers; worker++)
        scheduler_worker_ready (self->fe.scheduler, worker);    /* no threads: every worker is idle */
    self->fe.reading = true;
    return self;
}

void
frontend_core_handle (frontend_core_t *self, const void *peer, size_t peer_len, const uint8_t *request,
                      size_t size)
{
    zframe_t *identity = zframe_new (peer, peer_len);
    zframe_t *body = zframe_new (request, size);
    if (identity && body)
        fe_request_handle (&self->fe, &identity, body, false);
    if (body)
        OPENSSL_cleanse (zframe_data (body), zframe_size (body));
    zframe_destroy (&identity);
    zframe_destroy (&body);
    fe_flow_control (&self->fe);
}

/*  Ends the loop once no request is in flight, or at the time limit.  */
static int
s_on_settle_timer (zloop_t *loop, int timer_id, void *arg)
{
    frontend_core_t *self = arg;
    return self->fe.in_flight == 0 || cs_clock_ms () >= self->settle_end ? -1 : 0;
}

int
frontend_core_settle (frontend_core_t *self, int timeout_ms)
{
    self->settle_end = cs_clock_ms () + timeout_ms;
    if (self->fe.in_flight == 0)
        return 0;
    int timer = zloop_timer (self->fe.loop, 1, 0, s_on_settle_timer, self);
    self->settling = true;
    zloop_start (self->fe.loop);
    self->settling = false;
    zloop_timer_end (self->fe.loop, timer);
    if (self->check_timer != -1)
        zloop_timer_end (self->fe.loop, self->check_timer);
    self->check_timer = -1;
    return self->fe.in_flight == 0 ? 0 : -1;
}

void
frontend_core_destroy (frontend_core_t **self_p)
{
    if (*self_p) {
        s_frontend_free (&(*self_p)->fe);
        free (*self_p);
        *self_p = NULL;
    }
}
