/*  frontend.h — the broker's frontend actor (DESIGN.md §1, the paper's
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

#endif
