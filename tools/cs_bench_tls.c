/*  cs_bench_tls.c — `cryptoserver-bench tls`: full TLS handshakes per second
 *  of a server, the client of the paper's Table 4 (Berson et al. §5.2, after
 *  the client of Boneh, Malkin and Wu) in the manner of `openssl s_time
 *  -new`: each connection is a new TCP connection and a full handshake (no
 *  session resumption, no tickets), sends the 19-byte "HEAD / HTTP/1.0",
 *  reads the answer until the server closes, and closes.  N threads start
 *  on a barrier; the clock runs from the first thread's start to the last
 *  thread's end.  With --cafile the server's certificate chain and IP
 *  address are verified by OpenSSL, so every handshake's signature made
 *  with the server's key (in a file or on a token) is checked.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include "cs_bench.h"

#define MAX_THREADS 256
#define S_REQUEST "HEAD / HTTP/1.0\r\n\r\n"     /* 19 bytes, as in the paper */

typedef struct {
    char host [64];                 /* IPv4 literal */
    int port;
    int threads;
    long count;                     /* connections per thread; 0 = seconds */
    double seconds;
    const char *cafile;
    bool tls12, csv, progress;
} s_tls_options_t;

typedef struct {
    const s_tls_options_t *options;
    SSL_CTX *ctx;
    struct sockaddr_in address;
    pthread_barrier_t *start;
    atomic_long *progress;
    double began, ended;
    long connections, failures;
    char first_error [160];
    const char *protocol;           /* of the last handshake (static) */
    cs_bench_samples_t latency;     /* ms per connection that succeeded */
} s_tls_worker_t;

static int
s_usage (FILE *out, int status)
{
    fprintf (out,
        "usage: cryptoserver-bench tls --connect HOST:PORT [--threads N]\n"
        "                              [--count M | --seconds S] [--cafile PEM]\n"
        "                              [--tls12] [--csv] [--progress]\n"
        "\n"
        "Full TLS handshakes per second of a server (openssl s_time -new style):\n"
        "each connection is new (no resumption), sends \"HEAD / HTTP/1.0\" and\n"
        "reads the answer until the server closes.\n"
        "  --connect HOST:PORT  the server (IPv4 address)\n"
        "  --threads N      concurrent connections (default 1, max %d)\n"
        "  --count M        connections per thread (default 100)\n"
        "  --seconds S      run for S seconds instead of a count\n"
        "  --cafile PEM     verify the server's certificate (and its IP address)\n"
        "  --tls12          TLS 1.2 at most (default: TLS 1.3 when the server has it)\n"
        "  --csv            CSV header and one row\n"
        "  --progress       a progress line on stderr every second\n"
        "Exit status: 0 every connection succeeded, 1 any failure, 2 usage.\n", MAX_THREADS);
    return status;
}

static int
s_parse (int argc, char **argv, s_tls_options_t *options)
{
    static const struct option longs [] = {
        { "connect", required_argument, NULL, 'c' }, { "threads", required_argument, NULL, 'n' },
        { "count", required_argument, NULL, 'm' },   { "seconds", required_argument, NULL, 's' },
        { "cafile", required_argument, NULL, 'a' },  { "tls12", no_argument, NULL, '2' },
        { "csv", no_argument, NULL, 'C' },           { "progress", no_argument, NULL, 'P' },
        { "help", no_argument, NULL, 'h' },          { NULL, 0, NULL, 0 }
    };
    const char *connect_to = NULL;
    char *end = NULL;
    int opt;
    while ((opt = getopt_long (argc, argv, "h", longs, NULL)) != -1) {
        switch (opt) {
            case 'c': connect_to = optarg; break;
            case 'n': options->threads = (int) strtol (optarg, &end, 10); break;
            case 'm': options->count = strtol (optarg, &end, 10); break;
            case 's': options->seconds = strtod (optarg, &end); break;
            case 'a': options->cafile = optarg; break;
            case '2': options->tls12 = true; break;
            case 'C': options->csv = true; break;
            case 'P': options->progress = true; break;
            case 'h': return s_usage (stdout, 0);
            default:  return s_usage (stderr, 2);
        }
        if (end && *end) {
            fprintf (stderr, "cryptoserver-bench tls: '%s' is not a number\n", optarg);
            return 2;
        }
        end = NULL;
    }
    const char *colon = connect_to ? strrchr (connect_to, ':') : NULL;
    if (optind < argc || !colon || (size_t) (colon - connect_to) >= sizeof options->host)
        return s_usage (stderr, 2);
    memcpy (options->host, connect_to, (size_t) (colon - connect_to));
    options->port = atoi (colon + 1);
    if (options->port < 1 || options->port > 65535 || options->threads < 1
    ||  options->threads > MAX_THREADS || options->count < 0 || options->seconds < 0
    ||  (options->count > 0 && options->seconds > 0))
        return s_usage (stderr, 2);
    if (options->count == 0 && options->seconds == 0)
        options->count = 100;
    return -1;
}

//  Records a failed connection with the first reason.
static void
s_fail (s_tls_worker_t *worker, const char *what)
{
    worker->failures++;
    if (!*worker->first_error) {
        unsigned long code = ERR_peek_last_error ();
        const char *reason = code ? ERR_reason_error_string (code) : errno ? strerror (errno) : NULL;
        snprintf (worker->first_error, sizeof worker->first_error, "%s%s%s", what,
                  reason || code ? ": " : "", reason ? reason : code ? "an OpenSSL error" : "");
    }
    ERR_clear_error ();
}

//  One connection: TCP, full handshake, request, answer until close.
//  Returns true when the answer is an HTTP status line.
static bool
s_connection (s_tls_worker_t *worker)
{
    int fd = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    SSL *ssl = NULL;
    bool ok = false;
    char answer [512];
    size_t got = 0;
    errno = 0;
    if (fd < 0 || connect (fd, (struct sockaddr *) &worker->address, sizeof worker->address)) {
        s_fail (worker, "connect");
        goto out;
    }
    int one = 1;
    setsockopt (fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    ssl = SSL_new (worker->ctx);
    if (!ssl || !SSL_set_fd (ssl, fd)
    ||  (worker->options->cafile && !X509_VERIFY_PARAM_set1_ip_asc (SSL_get0_param (ssl),
                                                                    worker->options->host))) {
        s_fail (worker, "SSL_new");
        goto out;
    }
    if (SSL_connect (ssl) != 1) {
        s_fail (worker, "handshake");
        goto out;
    }
    worker->protocol = SSL_get_version (ssl);
    if (SSL_write (ssl, S_REQUEST, (int) strlen (S_REQUEST)) != (int) strlen (S_REQUEST)) {
        s_fail (worker, "write");
        goto out;
    }
    for (;;) {
        int n = SSL_read (ssl, answer + got, (int) (sizeof answer - 1 - got));
        if (n <= 0)
            break;
        got += (size_t) n;
        if (got == sizeof answer - 1)
            got = 16;                   //  keep the status line, drop the rest
    }
    answer [got] = 0;
    ok = got >= 8 && strncmp (answer, "HTTP/1.", 7) == 0;
    if (!ok)
        s_fail (worker, "no HTTP answer");
out:
    if (ssl) {
        SSL_shutdown (ssl);
        SSL_free (ssl);
    }
    if (fd >= 0)
        close (fd);
    return ok;
}

static void *
s_tls_worker_run (void *arg)
{
    s_tls_worker_t *worker = arg;
    const s_tls_options_t *options = worker->options;
    pthread_barrier_wait (worker->start);
    worker->began = cs_bench_now ();
    double deadline = worker->began + options->seconds;
    for (long i = 0; options->count ? i < options->count : cs_bench_now () < deadline; i++) {
        double started = cs_bench_now ();
        bool ok = s_connection (worker);
        worker->connections++;
        atomic_fetch_add (worker->progress, 1);
        if (ok)
            cs_bench_samples_add (&worker->latency, (cs_bench_now () - started) * 1000.0);
    }
    worker->ended = cs_bench_now ();
    return NULL;
}

//  The client context: no session cache or tickets (every handshake is
//  full), optional verification against cafile.
static SSL_CTX *
s_context (const s_tls_options_t *options)
{
    SSL_CTX *ctx = SSL_CTX_new (TLS_client_method ());
    if (!ctx)
        return NULL;
    SSL_CTX_set_session_cache_mode (ctx, SSL_SESS_CACHE_OFF);
    SSL_CTX_set_options (ctx, SSL_OP_NO_TICKET);
    SSL_CTX_set_min_proto_version (ctx, TLS1_2_VERSION);
    if (options->tls12)
        SSL_CTX_set_max_proto_version (ctx, TLS1_2_VERSION);
    if (options->cafile) {
        if (SSL_CTX_load_verify_locations (ctx, options->cafile, NULL) != 1) {
            fprintf (stderr, "cryptoserver-bench tls: %s: not a readable certificate file\n",
                     options->cafile);
            SSL_CTX_free (ctx);
            return NULL;
        }
        SSL_CTX_set_verify (ctx, SSL_VERIFY_PEER, NULL);
    }
    return ctx;
}

static void
s_report (const s_tls_options_t *options, s_tls_worker_t *workers, double seconds)
{
    long connections = 0, failures = 0;
    cs_bench_samples_t latency = { 0 };
    const char *protocol = "-", *error = NULL;
    for (int i = 0; i < options->threads; i++) {
        connections += workers [i].connections;
        failures += workers [i].failures;
        cs_bench_samples_merge (&latency, &workers [i].latency);
        if (workers [i].protocol)
            protocol = workers [i].protocol;
        if (!error && *workers [i].first_error)
            error = workers [i].first_error;
    }
    if (error)
        fprintf (stderr, "cryptoserver-bench tls: first failure: %s\n", error);
    double rate = seconds > 0 ? (double) (connections - failures) / seconds : 0;
    double p50 = cs_bench_percentile (&latency, 50), p90 = cs_bench_percentile (&latency, 90);
    double p99 = cs_bench_percentile (&latency, 99), max = cs_bench_percentile (&latency, 100);
    if (options->csv) {
        printf ("threads,connections,seconds,conn_per_s,p50_ms,p90_ms,p99_ms,max_ms,failures,protocol\n");
        printf ("%d,%ld,%.3f,%.1f,%.3f,%.3f,%.3f,%.3f,%ld,%s\n", options->threads, connections,
                seconds, rate, p50, p90, p99, max, failures, protocol);
    }
    else {
        printf ("TLS server %s:%d, %s, new session per connection%s\n", options->host, options->port,
                protocol, options->cafile ? ", certificate verified" : "");
        printf ("%7s %11s %9s %9s %8s %8s %8s %8s %8s\n", "threads", "connections", "seconds",
                "conn/s", "p50 ms", "p90 ms", "p99 ms", "max ms", "failures");
        printf ("%7d %11ld %9.3f %9.1f %8.3f %8.3f %8.3f %8.3f %8ld\n", options->threads, connections,
                seconds, rate, p50, p90, p99, max, failures);
    }
    cs_bench_samples_free (&latency);
}

int
cs_bench_tls_main (int argc, char **argv)
{
    s_tls_options_t options = { .threads = 1 };
    int status = s_parse (argc, argv, &options);
    if (status >= 0)
        return status;
    signal (SIGPIPE, SIG_IGN);
    struct sockaddr_in address = { .sin_family = AF_INET, .sin_port = htons ((uint16_t) options.port) };
    if (inet_pton (AF_INET, options.host, &address.sin_addr) != 1) {
        fprintf (stderr, "cryptoserver-bench tls: %s: not an IPv4 address\n", options.host);
        return 2;
    }
    SSL_CTX *ctx = s_context (&options);
    if (!ctx)
        return 1;
    s_tls_worker_t *workers = calloc ((size_t) options.threads, sizeof *workers);
    pthread_t *threads = calloc ((size_t) options.threads, sizeof *threads);
    pthread_barrier_t start;
    atomic_long progress = 0;
    pthread_barrier_init (&start, NULL, (unsigned) options.threads + 1);
    for (int i = 0; i < options.threads; i++) {
        workers [i] = (s_tls_worker_t) { .options = &options, .ctx = ctx, .address = address,
                                         .start = &start, .progress = &progress };
        pthread_create (&threads [i], NULL, s_tls_worker_run, &workers [i]);
    }
    pthread_barrier_wait (&start);
    double started = cs_bench_now ();
    for (int joined = 0; joined < options.threads; ) {
        struct timespec until;
        clock_gettime (CLOCK_REALTIME, &until);
        until.tv_sec += 1;
        if (pthread_timedjoin_np (threads [joined], NULL, &until) == 0) {
            joined++;
            continue;
        }
        if (options.progress)
            fprintf (stderr, "progress: %ld connections, %.0f/s\n", atomic_load (&progress),
                     (double) atomic_load (&progress) / (cs_bench_now () - started));
    }
    double first = workers [0].began, last = workers [0].ended;
    long failures = 0;
    for (int i = 0; i < options.threads; i++) {
        first = workers [i].began < first ? workers [i].began : first;
        last = workers [i].ended > last ? workers [i].ended : last;
        failures += workers [i].failures;
    }
    s_report (&options, workers, last - first);
    for (int i = 0; i < options.threads; i++)
        cs_bench_samples_free (&workers [i].latency);
    pthread_barrier_destroy (&start);
    free (threads);
    free (workers);
    SSL_CTX_free (ctx);
    return failures ? 1 : 0;
}
