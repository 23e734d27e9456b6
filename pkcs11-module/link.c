/*  link.c — one DEALER association per process, owned by one I/O thread.
 *
 *  Waiters live on the calling thread's stack and sit in a FIFO list guarded
 *  by the link's own mutex; the I/O thread sends their frames, matches
 *  replies by request id and signals the waiter.  A waiter always removes
 *  itself, so the I/O thread never frees one.  See link.h.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <zmq.h>
#include <openssl/crypto.h>
#include "log.h"
#include "link.h"

#define S_MONITOR_ENDPOINT "inproc://cs-link-monitor"
#define S_HWM 100000

typedef struct _cs_waiter_t {
    struct _cs_waiter_t *next;
    uint64_t request_id;
    uint8_t *frame;             /* encoded request until sent (then NULL) */
    size_t frame_size;
    bool done;
    CK_RV rv;                   /* meaningful when done */
    Cs__Reply *reply;           /* set with rv CKR_OK */
    pthread_cond_t cond;
} cs_waiter_t;

struct _cs_link_t {
    void *ctx;
    void *socket;               /* DEALER, CURVE client */
    void *monitor;              /* PAIR reading the socket's monitor events */
    int wake_fd;                /* eventfd: app threads -> I/O thread */
    pthread_t thread;
    bool thread_started;
    pthread_mutex_t mutex;      /* guards everything below */
    pthread_cond_t drained;
    cs_waiter_t *waiters;
    size_t callers;
    bool stopping;
    bool refused;               /* the broker refused our CURVE key */
    uint64_t next_id;           /* atomic */
};

static void
s_wake (cs_link_t *self)
{
    uint64_t one = 1;
    if (write (self->wake_fd, &one, sizeof one) < 0 && errno != EAGAIN)
        cs_log_debug ("link: cannot wake the I/O thread: %s", strerror (errno));
}

/*  Completes a waiter (under the mutex) and wakes its thread.  */
static void
s_waiter_finish (cs_waiter_t *waiter, CK_RV rv, Cs__Reply *reply)
{
    waiter->done = true;
    waiter->rv = rv;
    waiter->reply = reply;
    pthread_cond_signal (&waiter->cond);
}

/*  Completes every pending waiter with `rv` (under the mutex).  */
static void
s_fail_all (cs_link_t *self, CK_RV rv)
{
    for (cs_waiter_t *waiter = self->waiters; waiter; waiter = waiter->next)
        if (!waiter->done)
            s_waiter_finish (waiter, rv, NULL);
}

static bool
s_has_unsent (cs_link_t *self)
{
    for (cs_waiter_t *waiter = self->waiters; waiter; waiter = waiter->next)
        if (waiter->frame && !waiter->done)
            return true;
    return false;
}

/*  Sends a copy of frame without blocking as a zero-copy message whose
 *  buffer libzmq wipes when it is done with it (cs_wire_frame_free): a
 *  request may carry a PIN or a per-request private key, and zmq_send would
 *  leave an unwiped copy in libzmq's heap.  Returns 0, or -1 with errno
 *  (EAGAIN when the socket would block).  */
static int
s_send_frame (void *socket, const uint8_t *frame, size_t size)
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
    if (zmq_msg_send (&msg, socket, ZMQ_DONTWAIT) < 0) {
        int error = errno;
        zmq_msg_close (&msg);                   /* wipes and frees the copy */
        errno = error;
        return -1;
    }
    return 0;
}

/*  I/O thread: sends queued frames until the socket would block.  */
static void
s_send_queued (cs_link_t *self)
{
    pthread_mutex_lock (&self->mutex);
    for (cs_waiter_t *waiter = self->waiters; waiter; waiter = waiter->next) {
        if (!waiter->frame || waiter->done)
            continue;
        if (s_send_frame (self->socket, waiter->frame, waiter->frame_size) < 0) {
            if (errno != EAGAIN) {
                cs_log_error ("link: cannot send request: %s", zmq_strerror (errno));
                s_waiter_finish (waiter, CKR_DEVICE_ERROR, NULL);
                continue;
            }
            break;
        }
        OPENSSL_cleanse (waiter->frame, waiter->frame_size);   /* may hold a PIN */
        free (waiter->frame);
        waiter->frame = NULL;
    }
    pthread_mutex_unlock (&self->mutex);
}

/*  I/O thread: hands one decoded reply to its waiter, or drops it.  */
static void
s_deliver (cs_link_t *self, Cs__Reply *reply)
{
    cs_waiter_t *waiter;
    pthread_mutex_lock (&self->mutex);
    for (waiter = self->waiters; waiter; waiter = waiter->next)
        if (waiter->request_id == reply->request_id && !waiter->done)
            break;
    if (waiter) {
        s_waiter_finish (waiter, CKR_OK, reply);
        reply = NULL;
    }
    pthread_mutex_unlock (&self->mutex);
    if (reply) {
        cs_log_debug ("link: dropping late or unknown reply %llu",
                      (unsigned long long) reply->request_id);
        cs_wire_reply_free (&reply);        /* a late plaintext or private key */
    }
}

/*  Wipes a received frame (a reply may carry a plaintext, an ECDH secret or
 *  a generated private key; its decoded copy is the caller's) and closes it.  */
static void
s_msg_wipe_close (zmq_msg_t *msg)
{
    if (zmq_msg_size (msg))
        OPENSSL_cleanse (zmq_msg_data (msg), zmq_msg_size (msg));
    zmq_msg_close (msg);
}

/*  I/O thread: reads every reply waiting on the socket.  */
static void
s_receive_all (cs_link_t *self)
{
    while (true) {
        zmq_msg_t msg;
        const char *why = NULL;
        Cs__Reply *reply;
        zmq_msg_init (&msg);
        if (zmq_msg_recv (&msg, self->socket, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close (&msg);
            return;
        }
        if (zmq_msg_more (&msg)) {
            cs_log_warning ("link: dropping a multi-frame message from the broker");
            s_msg_wipe_close (&msg);
            continue;
        }
        reply = cs_wire_reply_decode (zmq_msg_data (&msg), zmq_msg_size (&msg), &why);
        s_msg_wipe_close (&msg);
        if (!reply)
            cs_log_warning ("link: dropping a bad reply from the broker: %s", why);
        else
            s_deliver (self, reply);
    }
}

/*  I/O thread: reacts to one socket monitor event (two frames).  */
static void
s_monitor_event (cs_link_t *self)
{
    zmq_msg_t event, address;
    uint16_t id = 0;
    zmq_msg_init (&event);
    zmq_msg_init (&address);
    if (zmq_msg_recv (&event, self->monitor, ZMQ_DONTWAIT) < 0)
        goto out;
    if (zmq_msg_more (&event))
        zmq_msg_recv (&address, self->monitor, 0);
    if (zmq_msg_size (&event) >= 2)
        memcpy (&id, zmq_msg_data (&event), 2);
    cs_log_debug ("link: monitor event 0x%x on %.*s", id, (int) zmq_msg_size (&address),
                  (const char *) zmq_msg_data (&address));
    pthread_mutex_lock (&self->mutex);
    if (id == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH || id == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL) {
        if (!self->refused)
            cs_log_error ("%s (%.*s); retrying in the background",
                          id == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH
                          ? "broker refused this client's key"
                          : "CURVE handshake failed: broker refused this client's key or client/broker-cert is not this broker's",
                          (int) zmq_msg_size (&address), (const char *) zmq_msg_data (&address));
        self->refused = true;
        s_fail_all (self, CKR_DEVICE_ERROR);
    }
    else
    if (id == ZMQ_EVENT_HANDSHAKE_SUCCEEDED) {
        if (self->refused)
            cs_log_info ("handshake with the broker succeeded");
        self->refused = false;
    }
    else
    if (id == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL)
        cs_log_warning ("link: handshake with the broker failed (protocol error)");
    else
    if (id == ZMQ_EVENT_DISCONNECTED)
        cs_log_debug ("link: disconnected from %.*s", (int) zmq_msg_size (&address),
                      (const char *) zmq_msg_data (&address));
    pthread_mutex_unlock (&self->mutex);
out:
    zmq_msg_close (&event);
    zmq_msg_close (&address);
}

static void *
s_io_thread (void *arg)
{
    cs_link_t *self = arg;
    while (true) {
        bool stopping, want_out;
        uint64_t count;
        pthread_mutex_lock (&self->mutex);
        stopping = self->stopping;
        want_out = s_has_unsent (self);
        pthread_mutex_unlock (&self->mutex);
        if (stopping)
            break;
        zmq_pollitem_t items [] = {
            { self->socket, 0, (short) (ZMQ_POLLIN | (want_out ? ZMQ_POLLOUT : 0)), 0 },
            { self->monitor, 0, ZMQ_POLLIN, 0 },
            { NULL, self->wake_fd, ZMQ_POLLIN, 0 },
        };
        if (zmq_poll (items, 3, -1) < 0) {
            if (errno == EINTR)
                continue;
            cs_log_error ("link: poll failed: %s", zmq_strerror (errno));
            break;
        }
        if (items [2].revents & ZMQ_POLLIN)
            (void) !read (self->wake_fd, &count, sizeof count);
        if (items [1].revents & ZMQ_POLLIN)
            s_monitor_event (self);
        if (items [0].revents & ZMQ_POLLIN)
            s_receive_all (self);
        if (items [0].revents & ZMQ_POLLOUT)
            s_send_queued (self);
    }
    return NULL;
}

static int
s_set_int (void *socket, int option, int value)
{
    return zmq_setsockopt (socket, option, &value, sizeof value);
}

/*  Sets the socket options of the DEALER (link.h, DESIGN.md §3).  */
static int
s_configure (cs_link_t *self, const cs_client_config_t *config)
{
    int64_t max_size = CS_WIRE_MAX_REPLY;
    if (s_set_int (self->socket, ZMQ_LINGER, 0)
    ||  s_set_int (self->socket, ZMQ_SNDHWM, S_HWM)
    ||  s_set_int (self->socket, ZMQ_RCVHWM, S_HWM)
    ||  s_set_int (self->socket, ZMQ_RECONNECT_IVL, 100)
    ||  s_set_int (self->socket, ZMQ_RECONNECT_IVL_MAX, 2000)
    ||  s_set_int (self->socket, ZMQ_HEARTBEAT_IVL, 5000)
    ||  s_set_int (self->socket, ZMQ_HEARTBEAT_TIMEOUT, 15000)
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

/*  Creates the sockets and connects them; the caller blocks signals.  */
static CK_RV
s_open (cs_link_t *self, const cs_client_config_t *config)
{
    int events = ZMQ_EVENT_HANDSHAKE_FAILED_AUTH | ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL
               | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL | ZMQ_EVENT_HANDSHAKE_SUCCEEDED
               | ZMQ_EVENT_DISCONNECTED;
    if (!(self->ctx = zmq_ctx_new ()))
        return CKR_GENERAL_ERROR;
    zmq_ctx_set (self->ctx, ZMQ_IO_THREADS, 1);
    zmq_ctx_set (self->ctx, ZMQ_BLOCKY, 0);
    if (!(self->socket = zmq_socket (self->ctx, ZMQ_DEALER))
    ||  s_configure (self, config) != 0
    ||  zmq_socket_monitor (self->socket, S_MONITOR_ENDPOINT, events) != 0
    ||  !(self->monitor = zmq_socket (self->ctx, ZMQ_PAIR))
    ||  s_set_int (self->monitor, ZMQ_LINGER, 0)
    ||  zmq_connect (self->monitor, S_MONITOR_ENDPOINT) != 0) {
        cs_log_error ("link: cannot create the broker socket: %s", zmq_strerror (errno));
        return CKR_GENERAL_ERROR;
    }
    for (size_t i = 0; i < config->n_endpoints; i++)
        if (zmq_connect (self->socket, config->endpoints [i]) != 0) {
            cs_log_error ("%s: client/endpoints: cannot connect to %s: %s",
                          config->path, config->endpoints [i], zmq_strerror (errno));
            return CKR_GENERAL_ERROR;
        }
    if ((self->wake_fd = eventfd (0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0)
        return CKR_GENERAL_ERROR;
    if (pthread_create (&self->thread, NULL, s_io_thread, self) != 0) {
        cs_log_error ("link: cannot start the I/O thread");
        return CKR_GENERAL_ERROR;
    }
    self->thread_started = true;
    return CKR_OK;
}

cs_link_t *
cs_link_new (const cs_client_config_t *config, CK_RV *rv_p)
{
    CK_RV rv = CKR_HOST_MEMORY;
    sigset_t all, old;
    cs_link_t *self = calloc (1, sizeof *self);
    if (!self)
        goto out;
    self->wake_fd = -1;
    pthread_mutex_init (&self->mutex, NULL);
    pthread_cond_init (&self->drained, NULL);
    /*  Threads started here (ours and libzmq's) must not take the
     *  application's signals: nginx and JVMs rely on that.  */
    sigfillset (&all);
    pthread_sigmask (SIG_BLOCK, &all, &old);
    rv = s_open (self, config);
    pthread_sigmask (SIG_SETMASK, &old, NULL);
    if (rv != CKR_OK)
        cs_link_destroy (&self);
out:
    if (rv_p)
        *rv_p = rv;
    return self;
}

void
cs_link_stop (cs_link_t *self)
{
    if (!self)
        return;
    pthread_mutex_lock (&self->mutex);
    self->stopping = true;
    s_fail_all (self, CKR_CRYPTOKI_NOT_INITIALIZED);
    pthread_mutex_unlock (&self->mutex);
}

void
cs_link_destroy (cs_link_t **self_p)
{
    cs_link_t *self = self_p ? *self_p : NULL;
    if (!self)
        return;
    cs_link_stop (self);
    if (self->thread_started) {
        s_wake (self);
        pthread_join (self->thread, NULL);
    }
    pthread_mutex_lock (&self->mutex);
    while (self->callers > 0)
        pthread_cond_wait (&self->drained, &self->mutex);
    pthread_mutex_unlock (&self->mutex);
    if (self->socket)
        zmq_socket_monitor (self->socket, NULL, 0);
    if (self->monitor)
        zmq_close (self->monitor);
    if (self->socket)
        zmq_close (self->socket);
    if (self->ctx)
        zmq_ctx_term (self->ctx);
    if (self->wake_fd >= 0)
        close (self->wake_fd);
    pthread_cond_destroy (&self->drained);
    pthread_mutex_destroy (&self->mutex);
    free (self);
    *self_p = NULL;
}

/*  Links abandoned in forked children: kept reachable, never freed (their
 *  I/O thread and sockets belong to the parent), so leak checkers see them
 *  as still referenced rather than lost.  */
static cs_link_t *s_abandoned [8];

void
cs_link_abandon (cs_link_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    for (size_t i = 0; i < sizeof s_abandoned / sizeof s_abandoned [0]; i++)
        if (!s_abandoned [i]) {
            s_abandoned [i] = *self_p;
            break;
        }
    *self_p = NULL;
}

static void
s_deadline (int64_t timeout_ms, struct timespec *ts)
{
    clock_gettime (CLOCK_MONOTONIC, ts);
    ts->tv_sec += timeout_ms / 1000;
    ts->tv_nsec += (timeout_ms % 1000) * 1000000;
    if (ts->tv_nsec >= 1000000000) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000;
    }
}

static void
s_unlink_waiter (cs_link_t *self, cs_waiter_t *waiter)
{
    for (cs_waiter_t **p = &self->waiters; *p; p = &(*p)->next)
        if (*p == waiter) {
            *p = waiter->next;
            return;
        }
}

static void
s_append_waiter (cs_link_t *self, cs_waiter_t *waiter)
{
    cs_waiter_t **p = &self->waiters;
    while (*p)
        p = &(*p)->next;
    *p = waiter;
}

/*  Queues the waiter and blocks until it is done or its deadline passes.
 *  Called with the mutex held.  */
static void
s_wait (cs_link_t *self, cs_waiter_t *waiter, int64_t timeout_ms)
{
    struct timespec deadline;
    s_deadline (timeout_ms, &deadline);
    s_append_waiter (self, waiter);
    self->callers++;
    s_wake (self);
    while (!waiter->done)
        if (pthread_cond_timedwait (&waiter->cond, &self->mutex, &deadline) == ETIMEDOUT
        &&  !waiter->done) {
            cs_log_error ("no reply from the broker within %lld ms (request %llu)%s",
                          (long long) timeout_ms, (unsigned long long) waiter->request_id,
                          waiter->frame ? "; no broker connection is up" : "");
            waiter->done = true;
            /*  A frame still held here was never sent: with ZMQ_IMMEDIATE
                no broker connection was up to take it all along, so every
                broker is gone (DESIGN.md §6).  Otherwise the broker took
                the job and did not answer in time.  */
            waiter->rv = waiter->frame ? CKR_DEVICE_REMOVED : CKR_DEVICE_ERROR;
        }
    s_unlink_waiter (self, waiter);
    if (--self->callers == 0 && self->stopping)
        pthread_cond_broadcast (&self->drained);
}

CK_RV
cs_link_reply_rv (const Cs__Request *req, const Cs__Reply *reply)
{
    if (reply->rv != CKR_OK) {
        if (reply->version < CS_PROTOCOL_VERSION_MIN || reply->version > CS_PROTOCOL_VERSION) {
            cs_log_error ("protocol version mismatch: this module speaks %u..%u, the broker speaks %u (%s)",
                          CS_PROTOCOL_VERSION_MIN, CS_PROTOCOL_VERSION, reply->version,
                          reply->error ? reply->error : "");
            return CKR_DEVICE_ERROR;
        }
        cs_log_error ("the broker failed the request: %s%s%s", cs_rv_name (reply->rv),
                      reply->error && *reply->error ? ": " : "", reply->error ? reply->error : "");
        switch (reply->rv) {                /* the broker's limits (docs/CONTRACTS.md "Limits") */
            case CKR_DEVICE_MEMORY: case CKR_KEY_SIZE_RANGE: case CKR_DATA_LEN_RANGE:
            case CKR_ENCRYPTED_DATA_LEN_RANGE: case CKR_TEMPLATE_INCONSISTENT:
            case CKR_ATTRIBUTE_VALUE_INVALID: case CKR_PIN_LEN_RANGE: case CKR_MECHANISM_PARAM_INVALID:
            case CKR_DOMAIN_PARAMS_INVALID: case CKR_KEY_HANDLE_INVALID: case CKR_OBJECT_HANDLE_INVALID:
                return (CK_RV) reply->rv;
            default:
                return CKR_DEVICE_ERROR;
        }
    }
    if (reply->n_results != req->n_jobs) {
        cs_log_error ("the broker sent %zu results for %zu jobs", reply->n_results, req->n_jobs);
        return CKR_DEVICE_ERROR;
    }
    return CKR_OK;
}

CK_RV
cs_link_call (cs_link_t *self, Cs__Request *req, int64_t timeout_ms, Cs__Reply **reply_p)
{
    CK_RV rv = CKR_OK;
    cs_waiter_t waiter = { 0 };
    pthread_condattr_t attr;
    return_val_if_fail (self && req && reply_p && timeout_ms > 0, CKR_ARGUMENTS_BAD);
    *reply_p = NULL;
    req->version_min = CS_PROTOCOL_VERSION_MIN;
    req->version_max = CS_PROTOCOL_VERSION;
    req->deadline_ms = (uint32_t) timeout_ms;
    req->request_id = waiter.request_id = __atomic_add_fetch (&self->next_id, 1, __ATOMIC_SEQ_CST);
    if (!(waiter.frame = cs_wire_encode (&req->base, &waiter.frame_size)))
        return CKR_HOST_MEMORY;
    pthread_condattr_init (&attr);
    pthread_condattr_setclock (&attr, CLOCK_MONOTONIC);
    pthread_cond_init (&waiter.cond, &attr);
    pthread_condattr_destroy (&attr);
    pthread_mutex_lock (&self->mutex);
    if (self->stopping)
        rv = CKR_CRYPTOKI_NOT_INITIALIZED;
    else
    if (self->refused) {
        cs_log_debug ("link: failing fast: the broker refused this client's key");
        rv = CKR_DEVICE_ERROR;
    }
    else {
        s_wait (self, &waiter, timeout_ms);
        rv = waiter.rv;
    }
    pthread_mutex_unlock (&self->mutex);
    pthread_cond_destroy (&waiter.cond);
    if (waiter.frame)
        OPENSSL_cleanse (waiter.frame, waiter.frame_size);
    free (waiter.frame);
    if (rv == CKR_OK && (rv = cs_link_reply_rv (req, waiter.reply)) != CKR_OK)
        goto out;
    *reply_p = waiter.reply;
    waiter.reply = NULL;
out:
    cs_wire_reply_free (&waiter.reply);
    return rv;
}
