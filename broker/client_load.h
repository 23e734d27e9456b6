/*  client_load.h — bytes each client has queued in the broker (requests
 *  decoded and not yet answered), against broker/max-client-bytes, so that
 *  one client can never make the broker hold unbounded memory or starve
 *  the others (DESIGN.md §7; issue #7 item 5).  Also the rate limit of the
 *  log lines that name a client over a limit.
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

/*  Creates a table where each client may hold at most max_bytes.  NULL when
 *  out of memory.  Caller destroys.  */
client_load_t *client_load_new (size_t max_bytes);

/*  NULL-safe; nulls *self_p.  */
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

/*  True when a log line about `client` and `limit` (a static name) is due
 *  at time now_ms: the first time, then once per CLIENT_LOAD_LOG_PERIOD_MS,
 *  so a flooding client cannot flood the log.  */
bool client_load_log_due (client_load_t *self, const char *client, const char *limit, int64_t now_ms);

#endif
