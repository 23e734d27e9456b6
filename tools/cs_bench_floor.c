/*  cs_bench_floor.c — `cryptoserver-bench transport-floor`: the round-trip
 *  time of the transports alone, with no PKCS#11 and no crypto, in one
 *  process on this host: one client thread sends a request of --bytes
 *  bytes, one server thread echoes it, --count times per transport.
 *
 *    unix      a UNIX stream socket pair, blocking read/write (what p11-kit's
 *              remoting runs over: one hand-off per direction)
 *    zmq-tcp   a ZeroMQ DEALER to a ROUTER over tcp://127.0.0.1, no security
 *    zmq-curve the same with CURVE (RFC 26, what the module and the broker
 *              speak)
 *    zmq-ipc   CURVE over ipc:// (a UNIX socket under /tmp)
 *
 *  A ZeroMQ round trip passes libzmq's I/O thread on each side, in each
 *  direction: four thread hand-offs that a socket pair does not have.  The
 *  p50 of each transport is the floor of the latency any design on it can
 *  reach; the difference between `zmq-curve` and `unix` is what the
 *  transport alone adds to cryptoserver beside p11-kit (issue #25).
 *  Prints one line per transport (p50, p99, mean, in µs), or CSV.
 */
#include <getopt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <czmq.h>
#include "cs_bench.h"

#define S_MAX_BYTES 65536

typedef struct {
    long count, bytes;
    bool csv;
} s_options_t;

static int
s_usage (FILE *out, int status)
{
    fprintf (out,
        "usage: cryptoserver-bench transport-floor [--count N] [--bytes B] [--csv]\n"
        "\n"
        "Round trips of the transports alone (no PKCS#11, no crypto), one client thread and\n"
        "one echo thread in this process: a UNIX socket pair (p11-kit's kind), ZeroMQ\n"
        "DEALER/ROUTER over TCP loopback without and with CURVE, and CURVE over ipc://.\n"
        "  --count N   round trips per transport (default 20000)\n"
        "  --bytes B   request and reply size in bytes (default 256, at most %d)\n"
        "  --csv       transport,count,bytes,p50_us,p99_us,mean_us lines\n",
        S_MAX_BYTES);
    return status;
}

/*  ---- a UNIX socket pair --------------------------------------------- */

typedef struct {
    int fd;
    long count, bytes;
} s_unix_echo_t;

/*  Reads exactly len bytes; false at EOF or on an error.  */
static bool
s_read_all (int fd, unsigned char *buf, size_t len)
{
    while (len) {
        ssize_t n = read (fd, buf, len);
        if (n <= 0)
            return false;
        buf += n;
        len -= (size_t) n;
    }
    return true;
}

static bool
s_write_all (int fd, const unsigned char *buf, size_t len)
{
    while (len) {
        ssize_t n = write (fd, buf, len);
        if (n <= 0)
            return false;
        buf += n;
        len -= (size_t) n;
    }
    return true;
}

static void *
s_unix_echo (void *arg)
{
    s_unix_echo_t *echo = arg;
    unsigned char buf [S_MAX_BYTES];
    for (long i = 0; i < echo->count; i++)
        if (!s_read_all (echo->fd, buf, (size_t) echo->bytes) || !s_write_all (echo->fd, buf, (size_t) echo->bytes))
            break;
    return NULL;
}

/*  The socket pair's round trips into samples; false on a failure.  */
static bool
s_run_unix (const s_options_t *options, cs_bench_samples_t *samples)
{
    int fds [2];
    if (socketpair (AF_UNIX, SOCK_STREAM, 0, fds) != 0)
        return false;
    s_unix_echo_t echo = { fds [1], options->count, options->bytes };
    pthread_t thread;
    bool ok = pthread_create (&thread, NULL, s_unix_echo, &echo) == 0;
    unsigned char buf [S_MAX_BYTES] = { 0 };
    for (long i = 0; ok && i < options->count; i++) {
        double t0 = cs_bench_now ();
        ok = s_write_all (fds [0], buf, (size_t) options->bytes) && s_read_all (fds [0], buf, (size_t) options->bytes)
          && cs_bench_samples_add (samples, (cs_bench_now () - t0) * 1e3);
    }
    close (fds [0]);
    if (echo.count)
        pthread_join (thread, NULL);
    close (fds [1]);
    return ok;
}

/*  ---- ZeroMQ DEALER to ROUTER ----------------------------------------- */

/*  The echo actor: a ROUTER bound to `args` (an endpoint, and a server
 *  certificate or NULL) that returns every message to its sender.  It
 *  sets `port` (the port it bound, tcp://; -1 when the bind failed)
 *  before it signals that it runs.  */
typedef struct {
    const char *endpoint;
    zcert_t *server;
    int port;
} s_zmq_echo_args_t;

static void
s_zmq_echo (zsock_t *pipe, void *arg)
{
    s_zmq_echo_args_t *args = arg;
    zsock_t *router = zsock_new (ZMQ_ROUTER);
    if (args->server) {
        zcert_apply (args->server, router);
        zsock_set_curve_server (router, 1);
    }
    int rc = router ? zsock_bind (router, "%s", args->endpoint) : -1;
    args->port = rc;
    zsock_signal (pipe, 0);
    zpoller_t *poller = rc < 0 ? NULL : zpoller_new (pipe, router, NULL);
    while (poller) {
        void *which = zpoller_wait (poller, -1);
        if (which != router)
            break;                      /* $TERM on the pipe, or interrupted */
        zmsg_t *msg = zmsg_recv (router);
        if (msg)
            zmsg_send (&msg, router);
    }
    zpoller_destroy (&poller);
    zsock_destroy (&router);
}

/*  Round trips over `endpoint` (tcp://127.0.0.1:* or ipc://PATH), CURVE
 *  when `curve`, into samples; false on a failure.  */
static bool
s_run_zmq (const s_options_t *options, const char *endpoint, bool curve, cs_bench_samples_t *samples)
{
    zcert_t *server = curve ? zcert_new () : NULL, *client = curve ? zcert_new () : NULL;
    s_zmq_echo_args_t args = { endpoint, server, -1 };
    zactor_t *echo = zactor_new (s_zmq_echo, &args);
    bool ok = echo != NULL && args.port >= 0;
    char connect [128];
    if (strncmp (endpoint, "tcp://", 6) == 0)
        snprintf (connect, sizeof connect, "tcp://127.0.0.1:%d", args.port);
    else
        snprintf (connect, sizeof connect, "%s", endpoint);
    zsock_t *dealer = ok ? zsock_new (ZMQ_DEALER) : NULL;
    if (dealer && curve) {
        zcert_apply (client, dealer);
        zsock_set_curve_serverkey (dealer, zcert_public_txt (server));
    }
    ok = dealer && zsock_connect (dealer, "%s", connect) == 0;
    if (dealer)
        zsock_set_rcvtimeo (dealer, 10000);     /* a failed bind or handshake ends the run */
    zframe_t *frame = zframe_new (NULL, (size_t) options->bytes);
    ok = ok && frame;
    if (frame)
        memset (zframe_data (frame), 0x5a, zframe_size (frame));
    for (long i = 0; ok && i < options->count; i++) {
        double t0 = cs_bench_now ();
        zframe_t *out = zframe_dup (frame);
        ok = out && zframe_send (&out, dealer, 0) == 0;
        zframe_t *back = ok ? zframe_recv (dealer) : NULL;
        ok = back && zframe_size (back) == (size_t) options->bytes
          && (i == 0 || cs_bench_samples_add (samples, (cs_bench_now () - t0) * 1e3));    /* the first sets up CURVE */
        zframe_destroy (&back);
    }
    zframe_destroy (&frame);
    zsock_destroy (&dealer);
    zactor_destroy (&echo);
    zcert_destroy (&client);
    zcert_destroy (&server);
    return ok;
}

/*  ---- main ------------------------------------------------------------ */

static void
s_report (const s_options_t *options, const char *name, cs_bench_samples_t *samples)
{
    double sum = 0;
    for (size_t i = 0; i < samples->count; i++)
        sum += samples->ms [i];
    double mean = samples->count ? sum / (double) samples->count : 0;
    double p50 = cs_bench_percentile (samples, 50), p99 = cs_bench_percentile (samples, 99);
    if (options->csv)
        printf ("%s,%zu,%ld,%.1f,%.1f,%.1f\n", name, samples->count, options->bytes, p50 * 1e3, p99 * 1e3, mean * 1e3);
    else
        printf ("%-10s %7zu round trips of %ld bytes: p50 %7.1f us  p99 %7.1f us  mean %7.1f us\n", name,
                samples->count, options->bytes, p50 * 1e3, p99 * 1e3, mean * 1e3);
    fflush (stdout);
}

int
cs_bench_floor_main (int argc, char **argv)
{
    static const struct option longs [] = {
        { "count", required_argument, NULL, 'n' }, { "bytes", required_argument, NULL, 'b' },
        { "csv", no_argument, NULL, 'c' }, { "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 },
    };
    s_options_t options = { .count = 20000, .bytes = 256 };
    int c;
    optind = 1;
    while ((c = getopt_long (argc, argv, "h", longs, NULL)) != -1)
        switch (c) {
            case 'n': options.count = strtol (optarg, NULL, 10); break;
            case 'b': options.bytes = strtol (optarg, NULL, 10); break;
            case 'c': options.csv = true; break;
            case 'h': return s_usage (stdout, 0);
            default:  return s_usage (stderr, 2);
        }
    if (optind != argc || options.count < 2 || options.count > 10000000 || options.bytes < 1
    ||  options.bytes > S_MAX_BYTES)
        return s_usage (stderr, 2);
    zsys_init ();
    zsys_set_logstream (NULL);
    if (options.csv)
        printf ("transport,count,bytes,p50_us,p99_us,mean_us\n");
    char ipc [96];
    snprintf (ipc, sizeof ipc, "ipc:///tmp/cs-bench-floor-%ld", (long) getpid ());
    const char *names [] = { "unix", "zmq-tcp", "zmq-curve", "zmq-ipc" };
    int status = 0;
    for (size_t t = 0; t < sizeof names / sizeof names [0]; t++) {
        cs_bench_samples_t samples = { 0 };
        bool ok;
        if (t == 0)
            ok = s_run_unix (&options, &samples);
        else if (t == 3)
            ok = s_run_zmq (&options, ipc, true, &samples);
        else
            ok = s_run_zmq (&options, "tcp://127.0.0.1:*", t == 2, &samples);
        if (ok)
            s_report (&options, names [t], &samples);
        else {
            fprintf (stderr, "cryptoserver-bench transport-floor: the %s run failed\n", names [t]);
            status = 1;
        }
        cs_bench_samples_free (&samples);
    }
    unlink (ipc + strlen ("ipc://"));
    return status;
}
