/*  association.c — one DEALER per broker endpoint and its health, read from
 *  the socket monitor.  See association.h.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>
#include "cs_wire.h"
#include "log.h"
#include "association.h"

#define S_HWM 100000

int64_t
cs_assoc_now_ms (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int
s_set_int (void *socket, int option, int value)
{
    return zmq_setsockopt (socket, option, &value, sizeof value);
}

/*  Sets the socket options (link.h, docs/DESIGN.md §3).  Heartbeats: a PING
 *  every heartbeat-ivl-ms; no traffic for heartbeat-timeout-ms closes the
 *  connection (a ZMQ_EVENT_DISCONNECTED); the broker is asked (TTL) to drop
 *  us after the same time.  */
static int
s_configure (cs_assoc_t *self, const cs_client_config_t *config)
{
    int64_t max_size = CS_WIRE_MAX_REPLY;
    int ivl = (int) (config->heartbeat_ivl_ms > 0 ? config->heartbeat_ivl_ms : CS_CLIENT_HEARTBEAT_IVL_DEFAULT);
    int timeout = (int) (config->heartbeat_timeout_ms > 0 ? config->heartbeat_timeout_ms
                                                          : CS_CLIENT_HEARTBEAT_TIMEOUT_DEFAULT);
    if (s_set_int (self->socket, ZMQ_LINGER, 0)
    ||  s_set_int (self->socket, ZMQ_SNDHWM, S_HWM)
    ||  s_set_int (self->socket, ZMQ_RCVHWM, S_HWM)
    ||  s_set_int (self->socket, ZMQ_RECONNECT_IVL, 100)
    ||  s_set_int (self->socket, ZMQ_RECONNECT_IVL_MAX, 2000)
    ||  s_set_int (self->socket, ZMQ_HEARTBEAT_IVL, ivl)
    ||  s_set_int (self->socket, ZMQ_HEARTBEAT_TIMEOUT, timeout)
    ||  s_set_int (self->socket, ZMQ_HEARTBEAT_TTL, timeout)
    ||  s_set_int (self->socket, ZMQ_IMMEDIATE, 1)
    ||  zmq_setsockopt (self->socket, ZMQ_MAXMSGSIZE, &max_size, sizeof max_size))
        return -1;
    if (config->curve
    && (zmq_setsockopt (self->socket, ZMQ_CURVE_SERVERKEY, config->broker_key, 32)
    ||  zmq_setsockopt (self->socket, ZMQ_CURVE_PUBLICKEY, config->public_key, 32)
    ||  zmq_setsockopt (self->socket, ZMQ_CURVE_SECRETKEY, config->secret_key, 32))) {
        cs_log_error ("link: cannot set CURVE keys: %s (libzmq without CURVE?)", zmq_strerror (errno));
        return -1;
    }
    return 0;
}

int
cs_assoc_open (cs_assoc_t *self, void *ctx, const cs_client_config_t *config, size_t index)
{
    int events = ZMQ_EVENT_HANDSHAKE_FAILED_AUTH | ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL
               | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL | ZMQ_EVENT_HANDSHAKE_SUCCEEDED
               | ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_CONNECTED | ZMQ_EVENT_CONNECT_RETRIED;
    char monitor [64];
    snprintf (monitor, sizeof monitor, "inproc://cs-link-monitor-%zu", index);
    memset (self, 0, sizeof *self);
    self->state = CS_ASSOC_CONNECTING;
    if (!(self->endpoint = strdup (config->endpoints [index]))) {
        cs_log_error ("link: out of memory");
        return -1;
    }
    if (!(self->socket = zmq_socket (ctx, ZMQ_DEALER))
    ||  s_configure (self, config) != 0
    ||  zmq_socket_monitor (self->socket, monitor, events) != 0
    ||  !(self->monitor = zmq_socket (ctx, ZMQ_PAIR))
    ||  s_set_int (self->monitor, ZMQ_LINGER, 0)
    ||  zmq_connect (self->monitor, monitor) != 0) {
        cs_log_error ("link: cannot create the socket for %s: %s", self->endpoint, zmq_strerror (errno));
        return -1;
    }
    if (zmq_connect (self->socket, self->endpoint) != 0) {
        cs_log_error ("%s: client/endpoints: cannot connect to %s: %s",
                      config->path ? config->path : "client config", self->endpoint, zmq_strerror (errno));
        return -1;
    }
    return 0;
}

void
cs_assoc_close (cs_assoc_t *self)
{
    if (self->socket)
        zmq_socket_monitor (self->socket, NULL, 0);
    if (self->monitor)
        zmq_close (self->monitor);
    if (self->socket)
        zmq_close (self->socket);
    self->monitor = self->socket = NULL;
    free (self->endpoint);
    self->endpoint = NULL;
}

int
cs_assoc_send (cs_assoc_t *self, const uint8_t *frame, size_t size)
{
    zmq_msg_t msg;
    void *hint = (void *) (uintptr_t) size;
    uint8_t *copy = malloc (size ? size : 1);
    if (!copy) {
        errno = ENOMEM;
        return -1;
    }
    memcpy (copy, frame, size);
    if (zmq_msg_init_data (&msg, copy, size, cs_wire_frame_free, hint)) {
        cs_wire_frame_free (copy, hint);
        return -1;
    }
    if (zmq_msg_send (&msg, self->socket, ZMQ_DONTWAIT) < 0) {
        int error = errno;
        zmq_msg_close (&msg);                   /* wipes and frees the copy */
        errno = error;
        return -1;
    }
    return 0;
}

bool
cs_assoc_usable (const cs_assoc_t *self, bool allow_silent)
{
    return self->state == CS_ASSOC_UP && (allow_silent || !self->silent);
}

/*  A failed handshake: refused, logged once until a handshake succeeds.  */
static cs_assoc_change_t
s_refused (cs_assoc_t *self, uint16_t id)
{
    bool was_up = self->state == CS_ASSOC_UP;
    if (self->state != CS_ASSOC_REFUSED)
        cs_log_error ("%s (%s); retrying in the background, other brokers serve meanwhile",
                      id == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH
                      ? "broker refused this client's key"
                      : id == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL
                      ? "handshake with the broker failed (protocol error)"
                      : "CURVE handshake failed: broker refused this client's key or client/broker-cert is not this broker's",
                      self->endpoint);
    self->state = CS_ASSOC_REFUSED;
    self->silent = false;
    return was_up ? CS_ASSOC_WENT_DOWN : CS_ASSOC_NO_CHANGE;
}

cs_assoc_change_t
cs_assoc_event (cs_assoc_t *self)
{
    zmq_msg_t event, address;
    uint16_t id = 0;
    cs_assoc_change_t change = CS_ASSOC_NO_CHANGE;
    zmq_msg_init (&event);
    zmq_msg_init (&address);
    if (zmq_msg_recv (&event, self->monitor, ZMQ_DONTWAIT) < 0)
        goto out;
    if (zmq_msg_more (&event))
        zmq_msg_recv (&address, self->monitor, 0);
    if (zmq_msg_size (&event) >= 2)
        memcpy (&id, zmq_msg_data (&event), 2);
    cs_log_debug ("link: monitor event 0x%x on %s", id, self->endpoint);
    if (id == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH || id == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL
    ||  (id == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL && ++self->failed_handshakes >= 2))
        change = s_refused (self, id);
    else
    if (id == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL) {
        /*  The connection closed during the handshake: a broker that cannot
            read our HELLO (another broker key) or one stopping.  Refused
            when it happens again on the next connection.  */
        change = self->state == CS_ASSOC_UP ? CS_ASSOC_WENT_DOWN : CS_ASSOC_NO_CHANGE;
        if (self->state != CS_ASSOC_REFUSED)
            self->state = CS_ASSOC_DOWN;
    }
    else
    if (id == ZMQ_EVENT_HANDSHAKE_SUCCEEDED) {
        if (self->state == CS_ASSOC_REFUSED || self->state == CS_ASSOC_DOWN)
            cs_log_info ("handshake with the broker %s succeeded", self->endpoint);
        self->state = CS_ASSOC_UP;
        self->silent = false;
        self->failed_handshakes = 0;
        change = CS_ASSOC_WENT_UP;
    }
    else
    if (id == ZMQ_EVENT_CONNECTED)
        self->connected = true;
    else
    if (id == ZMQ_EVENT_CONNECT_RETRIED) {
        /*  A retry with no TCP connection since the last one: nothing
            listens there now, so a refusal seen before (a failed handshake
            may also be a broker closing as it stops) no longer holds.  */
        if (!self->connected && self->state == CS_ASSOC_REFUSED) {
            cs_log_debug ("link: %s no longer answers: down, not refusing", self->endpoint);
            self->state = CS_ASSOC_DOWN;
        }
        if (!self->connected)
            self->failed_handshakes = 0;
        self->connected = false;
    }
    else
    if (id == ZMQ_EVENT_DISCONNECTED && self->state != CS_ASSOC_REFUSED) {
        cs_log_debug ("link: disconnected from %s", self->endpoint);
        change = self->state == CS_ASSOC_UP ? CS_ASSOC_WENT_DOWN : CS_ASSOC_NO_CHANGE;
        self->state = CS_ASSOC_DOWN;
        self->silent = false;
    }
out:
    zmq_msg_close (&event);
    zmq_msg_close (&address);
    return change;
}
