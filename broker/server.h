/*  server.h — a running broker: boards, zauth, the frontend actor and the
 *  worker threads, started and stopped in the right order.  main.c is a thin
 *  shell around it, and the actor unit test starts the same thing in-process
 *  (docs/DESIGN.md §5).
 */
#ifndef SERVER_H_INCLUDED
#define SERVER_H_INCLUDED

#include <czmq.h>
#include "broker_config.h"

typedef struct _server_t server_t;

/*  Makes the process non-dumpable (cs_secmem_protect_process: no core
 *  file, no ptrace attach by the same user), opens every board, the keystore
 *  (its master key from a file or unwrapped by a board key:
 *  keystore/master-key; a wrong key fails the start; the key is kept in a
 *  locked page of its own; a wrapping key is reserved for the broker: no
 *  client lists or uses it, and the start fails when it is also a client
 *  key, issue #7), starts zauth (CURVE, allow-list = clients dir; verbose
 *  so refused keys are logged), the metrics registry and, with
 *  broker/metrics, its HTTP endpoint (metrics_http.h: a bind failure fails
 *  the start), the frontend and threads workers per board.
 *  `config` must outlive the server.  Returns NULL after logging on failure.
 *  Caller destroys.  */
server_t *server_new (const broker_config_t *config, bool verbose);

/*  The endpoint the frontend bound (a "*" port resolved); owned by self.  */
const char *server_endpoint (server_t *self);

/*  The URL the metrics endpoint serves (broker/metrics, with a "*" or 0
 *  port resolved), or NULL when it is off; owned by self.  */
const char *server_metrics_url (server_t *self);

/*  The frontend actor, to poll it or send it commands (frontend.h).  */
zactor_t *server_frontend (server_t *self);

/*  Stops reading new requests and waits up to timeout_ms for the requests in
 *  flight to be answered.  Returns 0 when drained, -1 on timeout.  */
int server_drain (server_t *self, int timeout_ms);

/*  Stops the frontend (which logs the stats lines), the workers, zauth, and
 *  closes the boards; NULL-safe; nulls *self_p.  A worker stuck in a driver
 *  call (health.h: LOST) is left behind with a warning, and so is its
 *  board (not closed, its driver not unloaded): they are counted in
 *  server_stuck_workers, and the caller must then end the process without
 *  the exit handlers (main.c: _exit), which would wait for the thread's
 *  sockets.  */
void server_destroy (server_t **self_p);

/*  Workers left behind by server_destroy calls (0 normally).  */
extern size_t server_stuck_workers;

#endif
