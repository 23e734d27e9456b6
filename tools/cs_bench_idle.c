/*  cs_bench_idle.c — `cryptoserver-bench idle-associations`: opens N client
 *  associations to a broker (each a CurveZMQ DEALER with an admitted client
 *  key, as the module opens one, sending one Hello and then nothing) and
 *  reports the broker's resident memory (VmRSS of /proc/PID/status) before,
 *  after and per association, and the time to open them (issue #25:
 *  10,000 idle associations under 500 MB).
 *
 *  A process holds at most ~RLIMIT_NOFILE / 2 sockets (each DEALER is a
 *  TCP connection and a libzmq mailbox), so the associations are spread
 *  over --processes children, forked before any ZeroMQ context exists;
 *  each reports its batches on a pipe and holds its sockets until the
 *  parent has measured.
 */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <czmq.h>
#include "cs_bench.h"
#include "cs_wire.h"

#define S_BATCH 100                 /* associations opened before waiting for their Hellos */
#define S_PER_PROCESS 4000          /* default associations per child */
#define S_MAX_PROCESSES 64
#define S_WAIT_MS 30000             /* for one batch's Hello replies */

typedef struct {
    long count, processes;
    double hold_s, after_close_s;
    const char *endpoint, *broker_cert, *client_cert;
    char endpoint_buf [256], broker_cert_buf [1024], client_cert_buf [1024];
    long pid;
    bool csv;
} s_options_t;

/*  What a child reports after each batch (and once more, done, at the end).  */
typedef struct {
    long opened, answered, failed;
    bool done;
} s_report_t;

static int
s_usage (FILE *out, int status)
{
    fprintf (out,
        "usage: cryptoserver-bench idle-associations --count N [--dir DIR [--client NAME]]\n"
        "                          [--endpoint E --broker-cert F --client-cert F] [--pid PID]\n"
        "                          [--processes P] [--hold-seconds S] [--after-close-seconds S] [--csv]\n"
        "\n"
        "Opens N idle client associations (CurveZMQ DEALER, one Hello each) to a broker and\n"
        "prints its RSS before, after and per association, and the time to open them.\n"
        "  --dir DIR        a deployment (demo-deploy.sh, cryptoserver-admin init): its\n"
        "                   broker.endpoint, broker.cert, broker.pid and clients/NAME/client.cert\n"
        "  --client NAME    the admitted client whose key every association uses (default demo)\n"
        "  --endpoint E, --broker-cert F, --client-cert F, --pid PID   the same, one by one\n"
        "  --processes P    children holding the sockets (default N / %d, rounded up; a\n"
        "                   process holds about RLIMIT_NOFILE / 2)\n"
        "  --hold-seconds S idle time before the RSS is read after opening (default 1)\n"
        "  --after-close-seconds S  also read the RSS S seconds after they all closed\n"
        "                   (the broker gives freed heap back every 5 s)\n"
        "  --csv            the summary as CSV (header and one row)\n"
        "Exit status: 0 every Hello answered CKR_OK, 1 otherwise, 2 usage.\n", S_PER_PROCESS);
    return status;
}

/*  A field of the broker's /proc/PID/status in KiB ("VmRSS: %ld kB": all
 *  resident pages; "RssAnon: %ld kB": its heap and stacks, without mapped
 *  files such as the keystore), or -1.  */
static long
s_status_kib (long pid, const char *format)
{
    char path [64], line [256];
    long kib = -1;
    snprintf (path, sizeof path, "/proc/%ld/status", pid);
    FILE *file = fopen (path, "r");
    while (file && fgets (line, sizeof line, file))
        if (sscanf (line, format, &kib) == 1)
            break;
    if (file)
        fclose (file);
    return kib;
}

static long
s_rss_kib (long pid)
{
    return s_status_kib (pid, "VmRSS: %ld kB");
}

static long
s_anon_kib (long pid)
{
    return s_status_kib (pid, "RssAnon: %ld kB");
}

/*  Reads the first line of DIR/NAME into buf; false when it cannot.  */
static bool
s_read_line (const char *dir, const char *name, char *buf, size_t size)
{
    char path [1024];
    snprintf (path, sizeof path, "%s/%s", dir, name);
    FILE *file = fopen (path, "r");
    bool ok = file && fgets (buf, (int) size, file);
    if (file)
        fclose (file);
    if (ok)
        buf [strcspn (buf, "\r\n")] = 0;
    return ok && *buf;
}

/*  --dir DIR --client NAME: the deployment's files, where not given one by one.  */
static int
s_from_dir (s_options_t *self, const char *dir, const char *client)
{
    char pid [32];
    if (!self->endpoint && s_read_line (dir, "broker.endpoint", self->endpoint_buf, sizeof self->endpoint_buf))
        self->endpoint = self->endpoint_buf;
    if (!self->broker_cert) {
        snprintf (self->broker_cert_buf, sizeof self->broker_cert_buf, "%s/broker.cert", dir);
        self->broker_cert = self->broker_cert_buf;
    }
    if (!self->client_cert) {
        snprintf (self->client_cert_buf, sizeof self->client_cert_buf, "%s/clients/%s/client.cert", dir, client);
        self->client_cert = self->client_cert_buf;
    }
    if (!self->pid && s_read_line (dir, "broker.pid", pid, sizeof pid))
        self->pid = strtol (pid, NULL, 10);
    return 0;
}

static int
s_parse (int argc, char **argv, s_options_t *self)
{
    static const struct option longs [] = {
        { "count", required_argument, NULL, 'n' },      { "dir", required_argument, NULL, 'd' },
        { "client", required_argument, NULL, 'c' },     { "endpoint", required_argument, NULL, 'e' },
        { "broker-cert", required_argument, NULL, 'b' }, { "client-cert", required_argument, NULL, 'C' },
        { "pid", required_argument, NULL, 'p' },        { "processes", required_argument, NULL, 'P' },
        { "hold-seconds", required_argument, NULL, 'H' }, { "csv", no_argument, NULL, 'v' },
        { "after-close-seconds", required_argument, NULL, 'A' },
        { "help", no_argument, NULL, 'h' },             { NULL, 0, NULL, 0 }
    };
    const char *dir = NULL, *client = "demo";
    char *end = NULL;
    int opt;
    while ((opt = getopt_long (argc, argv, "h", longs, NULL)) != -1) {
        switch (opt) {
            case 'n': self->count = strtol (optarg, &end, 10); break;
            case 'd': dir = optarg; break;
            case 'c': client = optarg; break;
            case 'e': self->endpoint = optarg; break;
            case 'b': self->broker_cert = optarg; break;
            case 'C': self->client_cert = optarg; break;
            case 'p': self->pid = strtol (optarg, &end, 10); break;
            case 'P': self->processes = strtol (optarg, &end, 10); break;
            case 'H': self->hold_s = strtod (optarg, &end); break;
            case 'A': self->after_close_s = strtod (optarg, &end); break;
            case 'v': self->csv = true; break;
            case 'h': return s_usage (stdout, 0);
            default:  return s_usage (stderr, 2);
        }
        if (end && *end) {
            fprintf (stderr, "cryptoserver-bench: '%s' is not a number\n", optarg);
            return 2;
        }
        end = NULL;
    }
    if (dir)
        s_from_dir (self, dir, client);
    if (!self->processes)
        self->processes = (self->count + S_PER_PROCESS - 1) / S_PER_PROCESS;
    if (optind < argc || self->count < 1 || !self->endpoint || !self->broker_cert || !self->client_cert
    ||  self->pid < 1 || self->processes < 1 || self->processes > S_MAX_PROCESSES || self->hold_s < 0
    ||  self->after_close_s < 0)
        return s_usage (stderr, 2);
    return -1;
}

/*  The soft file limit raised to the hard one; returns the soft limit.  */
static rlim_t
s_raise_nofile (void)
{
    struct rlimit limit;
    if (getrlimit (RLIMIT_NOFILE, &limit))
        return 1024;
    limit.rlim_cur = limit.rlim_max;
    setrlimit (RLIMIT_NOFILE, &limit);
    getrlimit (RLIMIT_NOFILE, &limit);
    return limit.rlim_cur;
}

/*  A DEALER with the client's key, connected; NULL on failure.  */
static zsock_t *
s_dealer (const s_options_t *options, zcert_t *client, const char *broker_key)
{
    zsock_t *dealer = zsock_new (ZMQ_DEALER);
    if (!dealer)
        return NULL;
    zsock_set_linger (dealer, 0);
    zcert_apply (client, dealer);
    zsock_set_curve_serverkey (dealer, broker_key);
    if (zsock_connect (dealer, "%s", options->endpoint))
        zsock_destroy (&dealer);
    return dealer;
}

/*  Sends a Hello request with id on dealer; 0 or -1.  */
static int
s_send_hello (zsock_t *dealer, uint64_t id)
{
    Cs__HelloJob hello = CS__HELLO_JOB__INIT;
    Cs__Job job = CS__JOB__INIT, *jobs [1] = { &job };
    Cs__Request req = CS__REQUEST__INIT;
    job.kind_case = CS__JOB__KIND_HELLO;
    job.hello = &hello;
    req.version_min = CS_PROTOCOL_VERSION_MIN;
    req.version_max = CS_PROTOCOL_VERSION;
    req.request_id = id;
    req.deadline_ms = S_WAIT_MS;
    req.n_jobs = 1;
    req.jobs = jobs;
    size_t size = 0;
    uint8_t *data = cs_wire_encode (&req.base, &size);
    zframe_t *frame = data ? zframe_new (data, size) : NULL;
    free (data);
    if (!frame || zframe_send (&frame, dealer, 0)) {
        zframe_destroy (&frame);
        return -1;
    }
    return 0;
}

/*  True when one reply waiting on dealer answers Hello `id` with CKR_OK.  */
static bool
s_hello_ok (zsock_t *dealer, uint64_t id)
{
    zframe_t *frame = zframe_recv (dealer);
    Cs__Reply *reply = frame ? cs_wire_reply_decode (zframe_data (frame), zframe_size (frame), NULL) : NULL;
    bool ok = reply && reply->request_id == id && reply->rv == CKR_OK && reply->n_results == 1
           && reply->results [0]->rv == CKR_OK && reply->results [0]->kind_case == CS__RESULT__KIND_HELLO;
    if (reply)
        cs__reply__free_unpacked (reply, NULL);
    zframe_destroy (&frame);
    return ok;
}

/*  Opens one batch (sockets [from, to)) and waits for its Hellos.  */
static void
s_batch (const s_options_t *options, zcert_t *client, const char *broker_key, zsock_t **sockets,
         long from, long to, s_report_t *report)
{
    zpoller_t *poller = zpoller_new (NULL);
    long waiting = 0;
    for (long i = from; i < to; i++) {
        sockets [i] = s_dealer (options, client, broker_key);
        report->opened += sockets [i] != NULL;
        if (sockets [i] && s_send_hello (sockets [i], (uint64_t) i + 1) == 0 && zpoller_add (poller, sockets [i]) == 0)
            waiting++;
        else
            report->failed++;
    }
    int64_t end = zclock_mono () + S_WAIT_MS;
    while (waiting > 0 && zclock_mono () < end) {
        zsock_t *ready = zpoller_wait (poller, (int) (end - zclock_mono ()));
        if (!ready)
            break;
        long i = 0;
        for (i = from; i < to && sockets [i] != ready; i++)
            ;
        if (s_hello_ok (ready, (uint64_t) i + 1))
            report->answered++;
        else
            report->failed++;
        zpoller_remove (poller, ready);
        waiting--;
    }
    report->failed += waiting;
    zpoller_destroy (&poller);
}

/*  A child: opens `count` associations in batches, reporting each on out,
 *  then holds them until the parent closes `hold`.  */
static int
s_child (const s_options_t *options, long count, int out, int hold)
{
    s_raise_nofile ();
    zsys_set_max_sockets ((size_t) count + 64);
    zsys_init ();
    zcert_t *broker = zcert_load (options->broker_cert), *client = zcert_load (options->client_cert);
    zsock_t **sockets = calloc ((size_t) count + 1, sizeof *sockets);
    s_report_t report = { 0 };
    if (!broker || !client || !sockets)
        report.failed = count;
    for (long from = 0; broker && client && sockets && from < count; from += S_BATCH) {
        s_batch (options, client, zcert_public_txt (broker), sockets, from,
                 from + S_BATCH < count ? from + S_BATCH : count, &report);
        if (write (out, &report, sizeof report) != (ssize_t) sizeof report)
            break;
    }
    report.done = true;
    if (write (out, &report, sizeof report) == (ssize_t) sizeof report) {
        char byte;
        while (read (hold, &byte, 1) > 0)
            ;
    }
    for (long i = 0; sockets && i < count; i++)
        zsock_destroy (&sockets [i]);
    free (sockets);
    zcert_destroy (&broker);
    zcert_destroy (&client);
    return report.answered == count ? 0 : 1;
}

/*  The children and what they last reported.  */
typedef struct {
    pid_t pid [S_MAX_PROCESSES];
    int out [S_MAX_PROCESSES];
    s_report_t last [S_MAX_PROCESSES];
    int hold;                           /* write end: closed to release them */
    long n;
} s_children_t;

static int
s_fork_children (const s_options_t *options, s_children_t *kids)
{
    int hold [2];
    if (pipe (hold))
        return -1;
    kids->hold = hold [1];
    for (long k = 0; k < options->processes; k++) {
        long count = options->count / options->processes + (k < options->count % options->processes);
        int out [2];
        if (pipe (out))
            return -1;
        pid_t pid = fork ();
        if (pid < 0)
            return -1;
        if (pid == 0) {
            close (out [0]);
            close (hold [1]);
            _exit (s_child (options, count, out [1], hold [0]));
        }
        close (out [1]);
        kids->pid [k] = pid;
        kids->out [k] = out [0];
        kids->n++;
    }
    close (hold [0]);
    return 0;
}

/*  Sums the children's last reports; true when all are done.  */
static bool
s_sum (const s_children_t *kids, s_report_t *sum)
{
    bool done = true;
    memset (sum, 0, sizeof *sum);
    for (long k = 0; k < kids->n; k++) {
        sum->opened += kids->last [k].opened;
        sum->answered += kids->last [k].answered;
        sum->failed += kids->last [k].failed;
        done = done && kids->last [k].done;
    }
    return done;
}

/*  Reads the children's reports until all are done (or gone), with a
 *  progress line each second.  */
static void
s_follow (const s_options_t *options, s_children_t *kids, int64_t start)
{
    struct pollfd fds [S_MAX_PROCESSES];
    s_report_t sum;
    int64_t next_line = start + 1000;
    while (!s_sum (kids, &sum)) {
        nfds_t n = 0;
        for (long k = 0; k < kids->n; k++)
            if (!kids->last [k].done)
                fds [n++] = (struct pollfd) { .fd = kids->out [k], .events = POLLIN };
        if (poll (fds, n, 1000) < 0 && errno != EINTR)
            break;
        for (long k = 0; k < kids->n; k++)
            for (nfds_t f = 0; f < n; f++)
                if (fds [f].fd == kids->out [k] && (fds [f].revents & (POLLIN | POLLHUP))) {
                    s_report_t got;
                    if (read (kids->out [k], &got, sizeof got) == (ssize_t) sizeof got)
                        kids->last [k] = got;
                    else
                        kids->last [k].done = true;      /* the child is gone */
                }
        if (zclock_mono () >= next_line) {
            s_sum (kids, &sum);
            fprintf (stderr, "idle-associations: %ld/%ld open, %ld answered, %ld failed, %.1f s, "
                     "broker RSS %.1f MiB\n", sum.opened, options->count, sum.answered, sum.failed,
                     (double) (zclock_mono () - start) / 1000, (double) s_rss_kib (options->pid) / 1024);
            next_line += 1000;
        }
    }
}

/*  Releases the children and reaps them.  */
static void
s_release (s_children_t *kids)
{
    close (kids->hold);
    for (long k = 0; k < kids->n; k++) {
        waitpid (kids->pid [k], NULL, 0);
        close (kids->out [k]);
    }
}

int
cs_bench_idle_main (int argc, char **argv)
{
    s_options_t options = { .hold_s = 1 };
    int status = s_parse (argc, argv, &options);
    if (status >= 0)
        return status;
    long before = s_rss_kib (options.pid), anon_before = s_anon_kib (options.pid);
    if (before < 0) {
        fprintf (stderr, "cryptoserver-bench: no process %ld (/proc/%ld/status)\n", options.pid, options.pid);
        return 1;
    }
    signal (SIGPIPE, SIG_IGN);
    s_children_t kids = { .n = 0 };
    int64_t start = zclock_mono ();
    if (s_fork_children (&options, &kids)) {
        fprintf (stderr, "cryptoserver-bench: cannot start the children: %s\n", strerror (errno));
        s_release (&kids);
        return 1;
    }
    s_follow (&options, &kids, start);
    double open_s = (double) (zclock_mono () - start) / 1000;
    s_report_t sum;
    s_sum (&kids, &sum);
    zclock_sleep ((int) (options.hold_s * 1000));
    long after = s_rss_kib (options.pid), anon_after = s_anon_kib (options.pid);
    s_release (&kids);
    long closed = -1;
    if (options.after_close_s > 0) {
        zclock_sleep ((int) (options.after_close_s * 1000));
        closed = s_rss_kib (options.pid);
    }
    double per = (double) (after - before) / (double) options.count;
    if (options.csv)
        printf ("associations,answered,failed,processes,open_s,rss_before_kib,rss_after_kib,kib_per_association,"
                "rss_closed_kib,anon_before_kib,anon_after_kib\n%ld,%ld,%ld,%ld,%.2f,%ld,%ld,%.1f,%ld,%ld,%ld\n",
                options.count, sum.answered, sum.failed, options.processes, open_s, before, after, per, closed,
                anon_before, anon_after);
    else {
        printf ("idle associations: %ld (%ld answered, %ld failed) in %.2f s from %ld processes\n"
                "broker RSS: %.1f MiB before, %.1f MiB after, %.1f KiB per association "
                "(anonymous: %.1f MiB before, %.1f MiB after)\n",
                options.count, sum.answered, sum.failed, open_s, options.processes,
                (double) before / 1024, (double) after / 1024, per, (double) anon_before / 1024,
                (double) anon_after / 1024);
        if (closed >= 0)
            printf ("broker RSS %.0f s after they closed: %.1f MiB\n", options.after_close_s,
                    (double) closed / 1024);
    }
    return sum.answered == options.count && sum.failed == 0 ? 0 : 1;
}
