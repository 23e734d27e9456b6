/*  association.h — the module's association with one broker endpoint.
 *
 *  One DEALER socket (CURVE client) connected to one endpoint, with ZeroMQ
 *  heartbeats and a socket monitor, and its health as the monitor tells it:
 *  up after a handshake, down after a disconnect or a heartbeat timeout,
 *  refused after a failed handshake (client not admitted; or two connections
 *  in a row closed during the handshake: another broker key;
 *  logged once until a handshake succeeds again; down again once a connect
 *  attempt finds nothing listening), silent when the link saw
 *  a job go unanswered for the per-attempt timeout with nothing received
 *  from the broker since.  Owned and used by the link's I/O thread only
 *  (link.c); never shared with application threads.  docs/DESIGN.md §5, §7.
 */
#ifndef CS_MODULE_ASSOCIATION_H_INCLUDED
#define CS_MODULE_ASSOCIATION_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "client_config.h"

typedef enum {
    CS_ASSOC_CONNECTING,        /* no handshake yet (or reconnecting after down) */
    CS_ASSOC_UP,                /* handshake succeeded, connection open */
    CS_ASSOC_DOWN,              /* disconnected, heartbeat timeout: reconnecting */
    CS_ASSOC_REFUSED            /* the CURVE handshake failed: retrying in the background */
} cs_assoc_state_t;

typedef struct {
    void *socket;               /* DEALER */
    void *monitor;              /* PAIR reading the socket's monitor events */
    char *endpoint;             /* a copy of the config's string (owned) */
    cs_assoc_state_t state;
    bool silent;                /* a job went unanswered, nothing received since */
    bool connected;             /* a TCP connection since the last connect retry */
    int failed_handshakes;      /* closed during the handshake, in a row */
    int64_t last_rx_ms;         /* monotonic ms of the last reply received */
    uint32_t peer_version;      /* Reply.version of the last reply (0: none yet); from
                                   CS_PROTOCOL_PER_JOB on, requests may be coalesced */
} cs_assoc_t;

/*  What a monitor event changed, for the link.  */
typedef enum {
    CS_ASSOC_NO_CHANGE,
    CS_ASSOC_WENT_UP,           /* a handshake succeeded: jobs may go there */
    CS_ASSOC_WENT_DOWN          /* the connection dropped or was refused: jobs on it are lost */
} cs_assoc_change_t;

/*  Creates the DEALER for endpoint `index` of `config` in context `ctx`,
 *  sets its options (CURVE keys, heartbeats from config, ZMQ_IMMEDIATE,
 *  ZMQ_MAXMSGSIZE CS_WIRE_MAX_REPLY), its monitor (inproc, named after
 *  `index`) and connects it (the connection comes up in the background).
 *  Returns 0, or -1 after logging one line naming the endpoint; the caller
 *  calls cs_assoc_close either way.  `config` is only read.  */
int cs_assoc_open (cs_assoc_t *self, void *ctx, const cs_client_config_t *config, size_t index);

/*  Closes the monitor and the socket (ZMQ_LINGER 0: unsent frames are
 *  dropped, wiped by cs_wire_frame_free) and frees the endpoint copy.  Safe on a half-opened or zeroed
 *  association.  */
void cs_assoc_close (cs_assoc_t *self);

/*  Sends a copy of `frame` (`size` bytes) without blocking, as a zero-copy
 *  message that libzmq wipes when done (a request may carry a PIN or a
 *  per-request private key).  Returns 0, or -1 with errno (EAGAIN: no
 *  connection up or the socket's high-water mark reached).  */
int cs_assoc_send (cs_assoc_t *self, const uint8_t *frame, size_t size);

/*  Reads one monitor event and updates the state (logs a refusal once, a
 *  recovery at info level).  Returns what changed.  */
cs_assoc_change_t cs_assoc_event (cs_assoc_t *self);

/*  True when jobs may be sent there: up and, unless `allow_silent`, not
 *  silent.  */
bool cs_assoc_usable (const cs_assoc_t *self, bool allow_silent);

/*  The monotonic clock in milliseconds.  */
int64_t cs_assoc_now_ms (void);

#endif
