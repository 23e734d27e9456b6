/*  frontend.h — the broker's frontend actor (docs/DESIGN.md §1, the paper's
 *  Figure 3): it owns the client-facing ROUTER (CURVE server) and the
 *  backend ROUTER the workers connect to, decodes requests, answers hello,
 *  login, PIN jobs, key lists and keystore key management itself (keyjobs.h),
 *  splits sign/decrypt/generate batches into work items for the scheduler
 *  (routed by key: docs/CONTRACTS.md "Routing"), keeps the pool of
 *  pre-generated RSA keys filled with background items, and replies once per
 *  request when its last item is back.
 *
 *  Pipe protocol (zactor):
 *    after start      the actor sends one string: the bound endpoint, or ""
 *                     when it could not start (then it waits for $TERM)
 *    "DRAIN"          stop reading new requests; reply "DRAINED" once every
 *                     request in flight has been answered
 *    "STATS"          log the stats lines; reply one frame per board,
 *                     "board=NAME jobs=N errors=N"
 *    "POOL-WAIT" BITS COUNT
 *                     reply (one string: the number of ready pre-generated
 *                     RSA-BITS keys) once the pool holds at least COUNT of
 *                     them; at once with "0" when there is no pool (tests)
 *    "LOAD"           reply two strings: the bytes all clients have queued
 *                     now and the most one client has held (client_load.h;
 *                     tests)
 *    "$TERM"          log the stats lines and end
 */
#ifndef FRONTEND_H_INCLUDED
#define FRONTEND_H_INCLUDED

#include <czmq.h>
#include "board.h"
#include "broker_config.h"
#include "health.h"
#include "keystore.h"
#include "metrics.h"

/*  Arguments of frontend_actor; everything stays owned by the caller and
 *  must outlive the actor.  */
typedef struct {
    const broker_config_t *config;
    board_t **boards;
    size_t n_boards;
    const char *backend;        /* inproc endpoint the workers connect to */
    keystore_t *keystore;       /* the keystore; only the actor's thread uses it */
    metrics_t *metrics;         /* the metrics registry (metrics.h), or NULL */
    health_t *health;           /* board health and worker call states (health.h), shared with
                                   the workers */
    bool one_tenant;            /* the keystore held one tenant at start: no tenant's fast-lane
                                   time is capped (fair_queue_lane_share) */
} frontend_args_t;

/*  Debug logs (-v) of the frontend: CZMQ 4.2.1 has no log level switch in
 *  its stable API, so zsys_debug calls are gated by this flag.  */
extern bool frontend_verbose;

/*  The largest reply frame the frontend sends, in bytes: CS_WIRE_MAX_REPLY,
 *  the module's receive limit (a bigger frame would make the client's
 *  libzmq drop the connection).  A bigger reply is replaced by a
 *  request-level CKR_DEVICE_MEMORY.  Tests lower it before starting a
 *  frontend; nothing else changes it.  */
extern size_t frontend_max_reply;

/*  The actor body, for zactor_new (frontend_actor, &args).  */
void frontend_actor (zsock_t *pipe, void *args);

/*  The loopback core: the frontend's rooms without sockets, CURVE or
 *  workers, for tests that drive the request path the way p11-kit tests its
 *  RPC (tests/unit/test_frontend_loopback.c).  Requests go in as bytes,
 *  replies come out through `reply`; identity is plaintext mode's (the
 *  config must have broker/curve/enabled = false: the first tenant by
 *  name).  The slow pool and keystore cache are the real ones.  A job that
 *  would reach a worker runs at once on its board in the calling thread
 *  (worker_run_item, with a driver session of the core's own per board;
 *  no result check, no board time limit); a background item (pool refill)
 *  is answered CKR_DEVICE_ERROR.  Use it for decode, admission, routing
 *  refusals, logins, key lists, reply order, and the fuzz targets
 *  (docs/FUZZING.md).  */
typedef struct _frontend_core_t frontend_core_t;

/*  Called once per reply: peer (peer_len bytes, as given to
 *  frontend_core_handle) and the encoded Cs__Reply (size bytes), both
 *  borrowed for the call only (the reply is wiped after it).  */
typedef void (frontend_reply_fn) (void *arg, const void *peer, size_t peer_len, const uint8_t *reply,
                                  size_t size);

/*  A core over args (kept by the caller, as for frontend_actor); NULL when
 *  it could not start (logged).  Destroy with frontend_core_destroy.  */
frontend_core_t *frontend_core_new (const frontend_args_t *args, frontend_reply_fn *reply, void *arg);

/*  Handles one request frame (size bytes, copied) from peer: replies that
 *  need nothing slow are given before it returns; the others once
 *  frontend_core_settle runs the loop.  */
void frontend_core_handle (frontend_core_t *self, const void *peer, size_t peer_len, const uint8_t *request,
                           size_t size);

/*  Runs the core's loop (slow-pool results, the board sweep) until every
 *  request has been answered: 0; -1 when some are still out after
 *  timeout_ms milliseconds.  */
int frontend_core_settle (frontend_core_t *self, int timeout_ms);

void frontend_core_destroy (frontend_core_t **self_p);

#endif
