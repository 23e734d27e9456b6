/*  tsan-zmq.c — LD_PRELOAD shim for ThreadSanitizer runs (--enable-tsan,
 *  README.md): tells TSan that a ZeroMQ send happens before the receive.
 *
 *  libzmq is not instrumented and its pipes are lock-free, so TSan cannot see
 *  that what one thread wrote before zmq_*send* is ordered before what
 *  another reads after zmq_*recv*: every pointer handed over an inproc socket
 *  (the broker's work items) and every zactor_destroy (the actor's last
 *  accesses, then its "done" signal over the pipe) looks like a race.  This
 *  shim wraps libzmq's send and receive calls with a release before the send
 *  and an acquire after a successful receive, on one address for all
 *  sockets: coarser than the truth (it may hide a race between threads that
 *  talk over ZeroMQ about something else), never finer.  Without TSan
 *  (__tsan_* absent: weak) it only forwards.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <stddef.h>
#include <stdlib.h>
#include <sys/uio.h>

void __tsan_acquire (void *addr) __attribute__ ((weak));
void __tsan_release (void *addr) __attribute__ ((weak));

static char s_zmq_order;    /* the one sync address */

static void
s_release (void)
{
    if (__tsan_release)
        __tsan_release (&s_zmq_order);
}

static int
s_acquire (int rc)
{
    if (rc >= 0 && __tsan_acquire)
        __tsan_acquire (&s_zmq_order);
    return rc;
}

/*  libzmq's `name`: the next definition, or, when libzmq is not in the
 *  global scope (a program that dlopens the module RTLD_LOCAL), the one of
 *  the libzmq already loaded.  */
static void *
s_lookup (const char *name)
{
    void *fn = dlsym (RTLD_NEXT, name);
    if (!fn) {
        void *zmq = dlopen ("libzmq.so.5", RTLD_NOW | RTLD_NOLOAD);
        fn = zmq ? dlsym (zmq, name) : NULL;
    }
    if (!fn)
        abort ();
    return fn;
}

/*  `real`: libzmq's function, looked up once (relaxed atomics: any thread
 *  may be first, and each finds the same pointer).  */
#define S_REAL(name) static __typeof__ (name) *real_; \
    __typeof__ (name) *real = __atomic_load_n (&real_, __ATOMIC_RELAXED); \
    if (!real) { real = (__typeof__ (name) *) s_lookup (#name); \
                 __atomic_store_n (&real_, real, __ATOMIC_RELAXED); }

/*  The libzmq 4.3 prototypes (zmq.h), declared here so the shim needs no
 *  header: a message is 64 opaque bytes.  */
typedef struct { unsigned char opaque [64]; } s_zmq_msg_t;
int zmq_send (void *s, const void *buf, size_t len, int flags);
int zmq_send_const (void *s, const void *buf, size_t len, int flags);
int zmq_recv (void *s, void *buf, size_t len, int flags);
int zmq_msg_send (s_zmq_msg_t *msg, void *s, int flags);
int zmq_msg_recv (s_zmq_msg_t *msg, void *s, int flags);
int zmq_sendmsg (void *s, s_zmq_msg_t *msg, int flags);
int zmq_recvmsg (void *s, s_zmq_msg_t *msg, int flags);
int zmq_sendiov (void *s, struct iovec *iov, size_t count, int flags);
int zmq_recviov (void *s, struct iovec *iov, size_t *count, int flags);

int zmq_send (void *s, const void *buf, size_t len, int flags)
{ S_REAL (zmq_send); s_release (); return real (s, buf, len, flags); }
int zmq_send_const (void *s, const void *buf, size_t len, int flags)
{ S_REAL (zmq_send_const); s_release (); return real (s, buf, len, flags); }
int zmq_msg_send (s_zmq_msg_t *msg, void *s, int flags)
{ S_REAL (zmq_msg_send); s_release (); return real (msg, s, flags); }
int zmq_sendmsg (void *s, s_zmq_msg_t *msg, int flags)
{ S_REAL (zmq_sendmsg); s_release (); return real (s, msg, flags); }
int zmq_sendiov (void *s, struct iovec *iov, size_t count, int flags)
{ S_REAL (zmq_sendiov); s_release (); return real (s, iov, count, flags); }
int zmq_recv (void *s, void *buf, size_t len, int flags)
{ S_REAL (zmq_recv); return s_acquire (real (s, buf, len, flags)); }
int zmq_msg_recv (s_zmq_msg_t *msg, void *s, int flags)
{ S_REAL (zmq_msg_recv); return s_acquire (real (msg, s, flags)); }
int zmq_recvmsg (void *s, s_zmq_msg_t *msg, int flags)
{ S_REAL (zmq_recvmsg); return s_acquire (real (s, msg, flags)); }
int zmq_recviov (void *s, struct iovec *iov, size_t *count, int flags)
{ S_REAL (zmq_recviov); return s_acquire (real (s, iov, count, flags)); }
