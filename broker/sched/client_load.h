/*  client_load.h — bytes each client has queued in the broker (requests
 *  decoded and not yet answered), against broker/max-client-bytes, so that
 *  one client can never make the broker hold unbounded memory or starve
 *  the others (docs/DESIGN.md §7; issue #7 item 5).  Also the rate limit of the
 *  log lines that name a client over a limit.
 *
 *  Back-pressure per client (issue #9 "fair shares"): the jobs each client
 *  has out with workers, against broker/max-client-jobs.  A request of a
 *  client at its cap (or, for requests that need workers, while the job
 *  queue is at broker/max-queue) waits in that client's backlog, FIFO; the
 *  backlogs are served round robin across clients as jobs come back.  The
 *  backlog's requests stay charged in bytes, so max-client-bytes bounds it:
 *  past it a request is refused (CKR_DEVICE_MEMORY).  The frontend never
 *  stops reading its socket for everyone because of one client.
 *
 *  A pure data structure (no threads, no sockets), used by the frontend
 *  thread only.  A client is a string: its CURVE public key (Z85), or its
 *  ROUTER routing id in hex on a plaintext broker.
 */
#ifndef CLIENT_LOAD_H_INCLUDED
#define CLIENT_LOAD_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CLIENT_LOAD_LOG_PERIOD_MS 60000     /* one "over a limit" line per client and limit */
#define CLIENT_LOAD_LOG_CLIENTS   1024      /* clients remembered for that; then forgotten */

typedef struct _client_load_t client_load_t;

/*  Creates a table where each client may hold at most max_bytes and have
 *  max_jobs jobs out (at least 1).  NULL when out of memory.  Caller
 *  destroys.  */
client_load_t *client_load_new (size_t max_bytes, size_t max_jobs);

/*  NULL-safe; nulls *self_p.  The backlog must be empty (client_load_pop):
 *  its requests belong to the caller.  */
void client_load_destroy (client_load_t **self_p);

/*  Charges `bytes` to `client`.  Returns 0; or -1, charging nothing, when
 *  the client would then hold more than max_bytes (a request bigger than
 *  max_bytes on its own is always refused) or out of memory.  */
int client_load_charge (client_load_t *self, const char *client, size_t bytes);

/*  Gives back `bytes` charged to `client` (when its request is answered).  */
void client_load_release (client_load_t *self, const char *client, size_t bytes);

/*  Bytes `client` holds now.  */
size_t client_load_bytes (client_load_t *self, const char *client);

/*  Bytes all clients hold now.  */
size_t client_load_total (client_load_t *self);

/*  The most bytes any one client has held since the table was made.  */
size_t client_load_peak (client_load_t *self);

/*  Counts delta (+1 or -1) jobs of `client` going out to workers / coming
 *  back.  Returns 0, or -1 when out of memory (nothing counted).  */
int client_load_jobs_add (client_load_t *self, const char *client, int delta);

/*  Jobs `client` has out now.  */
size_t client_load_jobs (client_load_t *self, const char *client);

/*  True when a new request of `client` may start now: it has fewer than
 *  max_jobs jobs out and nothing in its backlog (its requests keep their
 *  order).  */
bool client_load_may_start (client_load_t *self, const char *client);

/*  Appends request (opaque, owned by the caller) to the backlog of
 *  `client`.  Returns 0, or -1 when out of memory (nothing kept).  */
int client_load_defer (client_load_t *self, const char *client, void *request);

/*  Removes and returns the oldest backlog request of the next client, in
 *  round robin order, that has fewer than max_jobs jobs out; NULL when
 *  there is none.  */
void *client_load_next (client_load_t *self);

/*  Removes and returns any backlog request (to free them at shutdown), or
 *  NULL.  */
void *client_load_pop (client_load_t *self);

/*  Requests in all backlogs, and in the backlog of `client`.  */
size_t client_load_deferred (client_load_t *self);
size_t client_load_client_deferred (client_load_t *self, const char *client);

/*  True when a log line about `client` and `limit` (a static name) is due
 *  at time now_ms: the first time, then once per CLIENT_LOAD_LOG_PERIOD_MS,
 *  so a flooding client cannot flood the log.  */
bool client_load_log_due (client_load_t *self, const char *client, const char *limit, int64_t now_ms);

#endif
