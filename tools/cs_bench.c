/*  cs_bench.c — cryptoserver-bench: N threads, each with its own session,
 *  sign messages through any PKCS#11 module (or one board through its shim
 *  driver, --driver-board) and (optionally) every signature is verified with
 *  OpenSSL.  Prints throughput and latency percentiles.  The paper's method
 *  (Berson et al. §5.1): the threads start on a barrier, sign blocks of
 *  --count operations each, and a block's clock stops when its last thread
 *  finishes; the rate is all operations over the sum of the block times.
 *  Subcommands: `tls` (cs_bench_tls.c) and `paper` (cs_bench_paper.c).
 *
 *  Exit status: 0 all signatures made (and verified); 1 a sign or verify
 *  failed, or the module/token/key could not be used; 2 usage.
 */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif
#include <getopt.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <openssl/evp.h>
#include "cs_bench.h"
#include "cs_metrics_scrape.h"
#include "cs_wire.h"

#define MAX_THREADS   256
#define MAX_BLOCKS    64
#define MAX_SIGNATURE 1024          /* bytes: RSA-8192 */
#define MESSAGE_LEN   64            /* bytes signed per operation */

typedef struct {
    const char *module_path, *token, *pin, *key;
    const char *driver_board;       /* --driver-board CONF:NAME, or NULL: the module */
    const char *key_file;           /* --key-file PEM: key material for --driver-board */
    cs_bench_mech_t mech;
    int threads;
    long count;                     /* signatures per thread and block; 0 = use seconds */
    int blocks;                     /* --blocks: timed blocks of count signatures */
    double seconds;
    bool verify, csv;
    const char *verify_key;         /* --verify-key PEM, or NULL: the token's */
    const char *metrics;            /* --metrics URL: the broker's CPU per op, or NULL */
    bool progress;                  /* progress lines even when stderr is no terminal */
    bool stop_on_error;             /* all threads stop at the first failure */
    bool share;                     /* --share: a block's threads x count operations
                                       come from one counter */
    bool keygen;                    /* --keygen: time C_GenerateKeyPair instead */
    cs_bench_keygen_options_t gen;
} s_options_t;

//  A signature kept for verification once signing has stopped, so OpenSSL
//  does not compete with the module for the CPU while the clock runs.
typedef struct {
    long index;                     /* the message number */
    CK_ULONG len;
    unsigned char *bytes;           /* malloc'd */
} s_signature_t;

typedef struct {
    int index;
    const s_options_t *options;
    cs_bench_module_t *module;
    cs_bench_driver_t *driver;      /* --driver-board, else NULL */
    void *driver_session;           /* this thread's driver session */
    const cs_bench_verifier_t *verifier;
    pthread_barrier_t *ready;       /* every session open (main then reads --metrics) */
    pthread_barrier_t *start;       /* the first block: all threads and main */
    pthread_barrier_t *block;       /* the next blocks: all threads */
    double began [MAX_BLOCKS], ended [MAX_BLOCKS];  /* s_now () when this thread
                                       started/stopped signing each block */
    double deadline;                /* s_now () when --seconds ends; set by the thread */
    s_signature_t *signatures;      /* kept for verification after the timed part */
    size_t kept, room;
    atomic_long *progress;          /* ops done by all threads */
    atomic_long *taken;             /* --share: operations taken, per block */
    atomic_bool *stop;              /* set at the first failure with --stop-on-error */
    cs_bench_samples_t latency;     /* ms per signature that succeeded */
    long ops, verified, failures;
    CK_RV first_error;              /* CKR_OK if none */
    bool setup_failed;
} s_worker_t;

//  Seconds on the monotonic clock.
static double
s_now (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

static int
s_usage (FILE *out, int status)
{
    fprintf (out,
        "usage: cryptoserver-bench --module SO --token LABEL --pin PIN --key LABEL\n"
        "                          [--mechanism M] [--threads N]\n"
        "                          [--count M [--blocks B] | --seconds S] [--verify] [--csv]\n"
        "                          [--metrics URL]\n"
        "       cryptoserver-bench --driver-board CONF:NAME (--key LABEL | --key-file PEM) ...\n"
        "       cryptoserver-bench tls --connect HOST:PORT ...    (cryptoserver-bench tls --help)\n"
        "       cryptoserver-bench paper [--quick] [--out DIR]   (cryptoserver-bench paper --help)\n"
        "\n"
        "  --module SO      any PKCS#11 library (cryptoserver-pkcs11.so, libsofthsm2.so)\n"
        "  --token LABEL    the token's label\n"
        "  --pin PIN        the user PIN\n"
        "  --key LABEL      the private key's CKA_LABEL\n"
        "  --mechanism M    sha256-rsa-pkcs (default), rsa-pkcs-pss-sha256, ecdsa-sha256,\n"
        "                   ecdsa (CKM_ECDSA over a SHA-256 digest made by the bench)\n"
        "  --threads N      threads, each with its own session (default 1, max %d)\n"
        "  --count M        signatures per thread (and block; default 100)\n"
        "  --blocks B       B timed blocks of --count signatures per thread, each started\n"
        "                   on a barrier and ended by its last thread; ops/s is all the\n"
        "                   signatures over the sum of the block times (default 1, max %d)\n"
        "  --share          the block's threads x count signatures come from one counter:\n"
        "                   every thread works until the block is done, so no thread idles\n"
        "                   while slower ones finish their own count\n"
        "  --driver-board CONF:NAME  no module: board NAME of broker config CONF through\n"
        "                   its shim driver (the board's local speed); each thread opens\n"
        "                   a driver session.  --key LABEL names a resident key of the\n"
        "                   board, --key-file PEM an RSA private key used as key material\n"
        "  --seconds S      run for S seconds instead of a count\n"
        "  --verify         verify every signature with OpenSSL and the token's public key\n"
        "  --verify-key PEM verify every signature with OpenSSL and this public key (PEM),\n"
        "                   made outside the module under test (implies --verify)\n"
        "  --csv            print the result as CSV (header and one row)\n"
        "  --progress       a progress line on stderr every second, even when it is\n"
        "                   not a terminal (on a terminal it is always shown)\n"
        "  --stop-on-error  stop every thread at the first failed signature\n"
        "  --metrics URL    read the broker's process_cpu_seconds_total at URL (http:// only,\n"
        "                   e.g. $CRYPTOSERVER_METRICS_URL) before and after the run and\n"
        "                   print the broker's CPU time per operation\n"
        "\n"
        "\n"
        "       cryptoserver-bench --module SO --token LABEL --pin PIN\n"
        "                          --keygen TYPE [--count N] [--interval-ms MS]\n"
        "                          [--session-keys] [--metrics URL] [--csv]\n"
        "  --keygen TYPE    time C_GenerateKeyPair of TYPE = rsa:2048, ec:prime256v1 or\n"
        "                   ed25519 (token keys; each pair is destroyed after it is timed)\n"
        "                   and print p50/p90/p99/max latency.  --count N pairs (default 100)\n"
        "  --interval-ms MS pause between generations (lets a broker key pool refill)\n"
        "  --session-keys   generate session objects (per-request keys) instead\n"
        "  --metrics URL    also count the pairs the broker's pre-generated key pool\n"
        "                   served (cryptoserver_pool_keys_taken_total, _missed_total)\n"
        "\n"
        "Exit status: 0 all signed (and verified), 1 any failure, 2 usage.\n",
        MAX_THREADS, MAX_BLOCKS);
    return status;
}

//  Parses the command line.  Returns -1 on success, else the exit status.
static int
s_parse (int argc, char **argv, s_options_t *options)
{
    static const struct option longs [] = {
        { "module", required_argument, NULL, 'm' }, { "token", required_argument, NULL, 't' },
        { "pin", required_argument, NULL, 'p' },    { "key", required_argument, NULL, 'k' },
        { "mechanism", required_argument, NULL, 'M' }, { "threads", required_argument, NULL, 'n' },
        { "count", required_argument, NULL, 'c' },  { "seconds", required_argument, NULL, 's' },
        { "verify", no_argument, NULL, 'v' },       { "csv", no_argument, NULL, 'C' },
        { "progress", no_argument, NULL, 'P' },     { "stop-on-error", no_argument, NULL, 'S' },
        { "keygen", required_argument, NULL, 'g' }, { "interval-ms", required_argument, NULL, 'i' },
        { "session-keys", no_argument, NULL, 'T' }, { "verify-key", required_argument, NULL, 'K' },
        { "blocks", required_argument, NULL, 'B' }, { "driver-board", required_argument, NULL, 'D' },
        { "key-file", required_argument, NULL, 'F' }, { "share", no_argument, NULL, 'H' },
        { "metrics", required_argument, NULL, 'u' },
        { "help", no_argument, NULL, 'h' },         { NULL, 0, NULL, 0 }
    };
    int opt;
    char *end = NULL;
    while ((opt = getopt_long (argc, argv, "h", longs, NULL)) != -1) {
        switch (opt) {
            case 'm': options->module_path = optarg; break;
            case 't': options->token = optarg; break;
            case 'p': options->pin = optarg; break;
            case 'k': options->key = optarg; break;
            case 'M':
                if (!cs_bench_mech_parse (optarg, &options->mech)) {
                    fprintf (stderr, "cryptoserver-bench: unknown mechanism '%s'\n", optarg);
                    return 2;
                }
                break;
            case 'n': options->threads = (int) strtol (optarg, &end, 10); break;
            case 'c': options->count = strtol (optarg, &end, 10); break;
            case 'B': options->blocks = (int) strtol (optarg, &end, 10); break;
            case 'D': options->driver_board = optarg; break;
            case 'F': options->key_file = optarg; break;
            case 'H': options->share = true; break;
            case 's': options->seconds = strtod (optarg, &end); break;
            case 'v': options->verify = true; break;
            case 'K': options->verify = true; options->verify_key = optarg; break;
            case 'u': options->metrics = optarg; break;
            case 'C': options->csv = true; break;
            case 'P': options->progress = true; break;
            case 'S': options->stop_on_error = true; break;
            case 'g':
                options->keygen = true;
                if (!cs_bench_keygen_parse (optarg, &options->gen.keygen)) {
                    fprintf (stderr, "cryptoserver-bench: unknown key type '%s'\n", optarg);
                    return 2;
                }
                break;
            case 'i': options->gen.interval_ms = strtol (optarg, &end, 10); break;
            case 'T': options->gen.token = false; break;
            case 'h': return s_usage (stdout, 0);
            default:  return s_usage (stderr, 2);
        }
        if (end && *end) {
            fprintf (stderr, "cryptoserver-bench: '%s' is not a number\n", optarg);
            return 2;
        }
        end = NULL;
    }
    bool driver = options->driver_board != NULL;
    if (optind < argc || (driver ? options->module_path || options->keygen
                                   || !options->key == !options->key_file
                                 : !options->module_path || !options->token || !options->pin
                                   || (!options->key && !options->keygen) || options->key_file)
    ||  options->gen.interval_ms < 0)
        return s_usage (stderr, 2);
    if (options->blocks < 1 || options->blocks > MAX_BLOCKS
    ||  ((options->blocks > 1 || options->share) && options->seconds > 0)) {
        fprintf (stderr, "cryptoserver-bench: --blocks must be 1..%d; --blocks and --share need --count\n",
                 MAX_BLOCKS);
        return 2;
    }
    if (options->threads < 1 || options->threads > MAX_THREADS
    ||  options->count < 0 || options->seconds < 0 || (options->count > 0 && options->seconds > 0)) {
        fprintf (stderr, "cryptoserver-bench: need 1..%d threads and either --count M or --seconds S\n",
                 MAX_THREADS);
        return 2;
    }
    if (options->count == 0 && options->seconds == 0)
        options->count = 100;
    if (options->metrics && options->driver_board) {
        fprintf (stderr, "cryptoserver-bench: --metrics measures runs through a broker, "
                 "not --driver-board\n");
        return 2;
    }
    return -1;
}

//  Records a failed signature or verification.
static void
s_worker_fail (s_worker_t *worker, CK_RV rv)
{
    worker->failures++;
    if (worker->first_error == CKR_OK)
        worker->first_error = rv;
    if (worker->options->stop_on_error)
        atomic_store (worker->stop, true);
}

//  Fills message (MESSAGE_LEN bytes) with the i-th message of a thread.
static void
s_message (unsigned char *message, int thread, long i)
{
    memset (message, 0, MESSAGE_LEN);
    snprintf ((char *) message, MESSAGE_LEN, "cryptoserver-bench thread %d signature %ld", thread, i);
}

//  Keeps a copy of a signature for s_worker_verify.  Returns false when out
//  of memory (the signature then counts as a failure).
static bool
s_worker_keep (s_worker_t *worker, long i, const unsigned char *signature, CK_ULONG len)
{
    if (worker->kept == worker->room) {
        size_t room = worker->room ? worker->room * 2 : 256;
        s_signature_t *grown = realloc (worker->signatures, room * sizeof *grown);
        if (!grown)
            return false;
        worker->signatures = grown;
        worker->room = room;
    }
    unsigned char *bytes = malloc (len);
    if (!bytes)
        return false;
    memcpy (bytes, signature, len);
    worker->signatures [worker->kept++] = (s_signature_t) { i, len, bytes };
    return true;
}

//  Verifies the kept signatures with OpenSSL and frees them.
static void
s_worker_verify (s_worker_t *worker)
{
    unsigned char message [MESSAGE_LEN];
    for (size_t k = 0; k < worker->kept; k++) {
        s_signature_t *kept = &worker->signatures [k];
        s_message (message, worker->index, kept->index);
        if (cs_bench_verify (worker->verifier, message, sizeof message, kept->bytes, kept->len))
            worker->verified++;
        else
            s_worker_fail (worker, CKR_SIGNATURE_INVALID);
        free (kept->bytes);
    }
    free (worker->signatures);
    worker->signatures = NULL;
    worker->kept = worker->room = 0;
}

//  Signs one message; records latency and counts, and keeps the signature
//  when it is to be verified.
static void
s_worker_sign (s_worker_t *worker, CK_SESSION_HANDLE session, CK_OBJECT_HANDLE key, long i)
{
    CK_FUNCTION_LIST *p11 = worker->module ? worker->module->p11 : NULL;
    unsigned char message [MESSAGE_LEN], signature [MAX_SIGNATURE];
    s_message (message, worker->index, i);
    CK_MECHANISM mechanism;
    CK_RSA_PKCS_PSS_PARAMS pss;
    cs_bench_mech_fill (worker->options->mech, &mechanism, &pss);
    CK_ULONG sig_len = sizeof signature;
    unsigned char digest [EVP_MAX_MD_SIZE];
    unsigned digest_len = 0;
    double started = s_now ();
    //  Raw CKM_ECDSA signs a digest: the bench hashes, as an application would.
    bool hashed = worker->options->mech == CS_BENCH_ECDSA;
    if (hashed && EVP_Digest (message, sizeof message, digest, &digest_len, EVP_sha256 (), NULL) != 1) {
        worker->ops++;
        s_worker_fail (worker, CKR_GENERAL_ERROR);
        return;
    }
    CK_RV rv;
    if (worker->driver)
        rv = cs_bench_driver_sign (worker->driver, worker->driver_session, worker->options->mech,
                                   hashed ? digest : message, hashed ? digest_len : sizeof message,
                                   signature, &sig_len);
    else {
        rv = p11->C_SignInit (session, &mechanism, key);
        if (rv == CKR_OK)
            rv = p11->C_Sign (session, hashed ? digest : message,
                              hashed ? digest_len : sizeof message, signature, &sig_len);
    }
    double ms = (s_now () - started) * 1000.0;
    worker->ops++;
    atomic_fetch_add (worker->progress, 1);
    if (rv != CKR_OK) {
        s_worker_fail (worker, rv);
        return;
    }
    cs_bench_samples_add (&worker->latency, ms);
    if (worker->verifier && !s_worker_keep (worker, i, signature, sig_len))
        s_worker_fail (worker, CKR_HOST_MEMORY);
}

//  Opens this thread's session: a logged-in PKCS#11 session with the key
//  found, or a driver session.  Records a failure in the worker.
static void
s_worker_open (s_worker_t *worker, CK_SESSION_HANDLE *session, CK_OBJECT_HANDLE *key)
{
    CK_RV rv = CKR_OK;
    if (worker->driver) {
        worker->driver_session = cs_bench_driver_session_open (worker->driver);
        rv = worker->driver_session ? CKR_OK : CKR_DEVICE_ERROR;
    }
    else {
        rv = cs_bench_session_open (worker->module, worker->options->pin, session);
        if (rv == CKR_OK)
            rv = cs_bench_find (worker->module, *session, CKO_PRIVATE_KEY, worker->options->key, key);
    }
    if (rv != CKR_OK) {
        worker->setup_failed = true;
        worker->first_error = rv;
    }
}

//  Thread body: open a session (login), find the key, wait for the others,
//  then sign until the count or the deadline, block after block.
static void *
s_worker_run (void *arg)
{
    s_worker_t *worker = arg;
    const s_options_t *options = worker->options;
    CK_SESSION_HANDLE session = CK_INVALID_HANDLE;
    CK_OBJECT_HANDLE key = CK_INVALID_HANDLE;
    s_worker_open (worker, &session, &key);
    pthread_barrier_wait (worker->ready);
    for (int b = 0; b < options->blocks; b++) {
        //  Every thread waits for the others (even one that failed), so a
        //  block's clock starts when every session is open.  Each thread
        //  takes its own deadline so no thread reads a value another one is
        //  still writing.
        pthread_barrier_wait (b == 0 ? worker->start : worker->block);
        worker->began [b] = s_now ();
        worker->deadline = worker->began [b] + options->seconds;
        long block_ops = options->count * options->threads;
        for (long i = 0; !worker->setup_failed; i++) {
            //  --share: the next operation of the block, whoever takes it.
            long op = options->share ? atomic_fetch_add (&worker->taken [b], 1) : i;
            if (options->share ? op >= block_ops
                               : options->count ? i >= options->count : s_now () >= worker->deadline)
                break;
            if (atomic_load (worker->stop))
                break;
            s_worker_sign (worker, session, key, (long) b * (options->share ? block_ops : options->count) + op);
        }
        worker->ended [b] = s_now ();
    }
    if (session != CK_INVALID_HANDLE)
        worker->module->p11->C_CloseSession (session);
    if (worker->driver)
        cs_bench_driver_session_close (worker->driver, &worker->driver_session);
    if (worker->verifier)
        s_worker_verify (worker);
    return NULL;
}

//  Waits for the threads, printing a progress line each second on a terminal.
static void
s_wait (pthread_t *threads, int count, atomic_long *progress, double started, bool forced)
{
    bool tty = isatty (STDERR_FILENO);
    for (int joined = 0; joined < count; ) {
        struct timespec until;
        clock_gettime (CLOCK_REALTIME, &until);
        until.tv_sec += 1;
        if (pthread_timedjoin_np (threads [joined], NULL, &until) == 0) {
            joined++;
            continue;
        }
        long ops = atomic_load (progress);
        double rate = (double) ops / (s_now () - started);
        if (tty)
            fprintf (stderr, "\r  %ld signatures, %.0f/s ...", ops, rate);
        else
        if (forced)
            fprintf (stderr, "progress: %ld signatures, %.0f/s\n", ops, rate);
        fflush (stderr);
    }
    if (tty)
        fprintf (stderr, "\r\033[K");
}

typedef struct {
    long ops, verified, failures, setup_failures;
    CK_RV first_error;
    cs_bench_samples_t latency;
} s_totals_t;

static void
s_totals_collect (s_worker_t *workers, int count, s_totals_t *totals)
{
    memset (totals, 0, sizeof *totals);
    for (int i = 0; i < count; i++) {
        totals->ops += workers [i].ops;
        totals->verified += workers [i].verified;
        totals->failures += workers [i].failures;
        totals->setup_failures += workers [i].setup_failed;
        if (totals->first_error == CKR_OK)
            totals->first_error = workers [i].first_error;
        cs_bench_samples_merge (&totals->latency, &workers [i].latency);
    }
}

//  The broker's CPU time per operation, in µs, from the process_cpu_seconds_total
//  of --metrics before and after the run (every op counts, failed or not);
//  negative when there were no ops.
static double
s_cpu_per_op (const s_totals_t *totals, double cpu_before, double cpu_after)
{
    return totals->ops > 0 ? (cpu_after - cpu_before) * 1e6 / (double) totals->ops : -1;
}

static void
s_report (const s_options_t *options, s_totals_t *totals, double seconds, int bits, double cpu_us)
{
    if (totals->first_error != CKR_OK)
        fprintf (stderr, "cryptoserver-bench: first failure: %s\n",
                 totals->first_error == CKR_SIGNATURE_INVALID ? "a signature did not verify"
                                                                : cs_rv_name (totals->first_error));
    double p50 = cs_bench_percentile (&totals->latency, 50);
    double p90 = cs_bench_percentile (&totals->latency, 90);
    double p99 = cs_bench_percentile (&totals->latency, 99);
    double max = cs_bench_percentile (&totals->latency, 100);
    double rate = seconds > 0 ? (double) (totals->ops - totals->failures) / seconds : 0;
    const char *verified = options->verify ? NULL : "-";
    char count [32];
    snprintf (count, sizeof count, "%ld", totals->verified);
    char cpu [32] = "-";
    if (cpu_us >= 0)
        snprintf (cpu, sizeof cpu, "%.1f", cpu_us);
    if (options->csv) {
        //  --metrics adds one column at the end: scripts read the others by position.
        printf ("mechanism,key,bits,threads,ops,seconds,ops_per_s,p50_ms,p90_ms,p99_ms,max_ms,verified,failures%s\n",
                options->metrics ? ",broker_cpu_us_per_op" : "");
        printf ("%s,%s,%d,%d,%ld,%.3f,%.1f,%.3f,%.3f,%.3f,%.3f,%s,%ld%s%s\n",
                cs_bench_mech_name (options->mech), options->key ? options->key : "file", bits,
                options->threads,
                totals->ops, seconds, rate, p50, p90, p99, max, verified ? verified : count,
                totals->failures, options->metrics ? "," : "", options->metrics ? cpu : "");
        return;
    }
    if (options->driver_board)
        printf ("board %s (driver, no broker), key %s (%d bits), %s\n", options->driver_board,
                options->key ? options->key : options->key_file, bits, cs_bench_mech_name (options->mech));
    else
        printf ("module %s, token %s, key %s (%d bits), %s\n", options->module_path, options->token,
                options->key, bits, cs_bench_mech_name (options->mech));
    printf ("%7s %8s %9s %9s %8s %8s %8s %8s %9s %8s\n", "threads", "ops", "seconds", "ops/s",
            "p50 ms", "p90 ms", "p99 ms", "max ms", "verified", "failures");
    printf ("%7d %8ld %9.3f %9.1f %8.3f %8.3f %8.3f %8.3f %9s %8ld\n", options->threads,
            totals->ops, seconds, rate, p50, p90, p99, max, verified ? verified : count,
            totals->failures);
    if (options->metrics)
        printf ("broker CPU per op: %s µs (process_cpu_seconds_total of %s over %ld ops)\n", cpu,
                options->metrics, totals->ops);
}

//  Runs the threads and reports.  Returns the exit status.
static int
s_run (const s_options_t *options, cs_bench_module_t *module, cs_bench_driver_t *driver,
       const cs_bench_verifier_t *verifier, int bits)
{
    s_worker_t *workers = calloc ((size_t) options->threads, sizeof *workers);
    pthread_t *threads = calloc ((size_t) options->threads, sizeof *threads);
    pthread_barrier_t ready, start, block;
    atomic_long progress = 0, taken [MAX_BLOCKS];
    atomic_bool stop = false;
    char err [512] = "";
    double cpu_before = 0, cpu_after = 0;
    for (int b = 0; b < MAX_BLOCKS; b++)
        atomic_init (&taken [b], 0);
    pthread_barrier_init (&ready, NULL, (unsigned) options->threads + 1);
    pthread_barrier_init (&start, NULL, (unsigned) options->threads + 1);
    pthread_barrier_init (&block, NULL, (unsigned) options->threads);
    for (int i = 0; i < options->threads; i++) {
        workers [i] = (s_worker_t) { .index = i, .options = options, .module = driver ? NULL : module,
                                     .driver = driver, .verifier = verifier, .ready = &ready,
                                     .start = &start,
                                     .block = &block, .progress = &progress, .taken = taken,
                                     .stop = &stop };
        pthread_create (&threads [i], NULL, s_worker_run, &workers [i]);
    }
    pthread_barrier_wait (&ready);      //  all sessions open (logins are not measured)
    int metrics_rc = options->metrics ? cs_metrics_read (options->metrics, "process_cpu_seconds_total",
                                                               &cpu_before, err, sizeof err) : 0;
    if (metrics_rc)
        atomic_store (&stop, true);     //  no run: the threads stop before their first op
    pthread_barrier_wait (&start);      //  the clock starts
    double started = s_now ();
    s_wait (threads, options->threads, &progress, started, options->progress);
    if (options->metrics && metrics_rc == 0)
        metrics_rc = cs_metrics_read (options->metrics, "process_cpu_seconds_total", &cpu_after,
                                            err, sizeof err);
    //  Wall time of the signing only: per block from the first thread's start
    //  to the last thread's end (verification comes after and is not timed).
    double seconds = 0;
    for (int b = 0; b < options->blocks; b++) {
        double first = workers [0].began [b], last = workers [0].ended [b];
        for (int i = 1; i < options->threads; i++) {
            first = workers [i].began [b] < first ? workers [i].began [b] : first;
            last = workers [i].ended [b] > last ? workers [i].ended [b] : last;
        }
        seconds += last - first;
    }
    s_totals_t totals;
    s_totals_collect (workers, options->threads, &totals);
    if (metrics_rc == 0)
        s_report (options, &totals, seconds, bits,
                  options->metrics ? s_cpu_per_op (&totals, cpu_before, cpu_after) : -1);
    else
        fprintf (stderr, "cryptoserver-bench: --metrics: %s\n", err);
    if (totals.setup_failures)
        fprintf (stderr, "cryptoserver-bench: %ld threads could not open a session or find the key\n",
                 totals.setup_failures);
    int status = (totals.failures || totals.setup_failures || metrics_rc) ? 1 : 0;
    for (int i = 0; i < options->threads; i++)
        cs_bench_samples_free (&workers [i].latency);
    cs_bench_samples_free (&totals.latency);
    pthread_barrier_destroy (&ready);
    pthread_barrier_destroy (&start);
    pthread_barrier_destroy (&block);
    free (threads);
    free (workers);
    return status;
}

//  --driver-board: one board through its shim driver, no broker.
static int
s_main_driver (const s_options_t *options)
{
    char err [256] = "";
    cs_bench_pubkey_t pubkey = { 0 };
    cs_bench_verifier_t *verifier = NULL;
    int status = 1;
    cs_bench_driver_t *driver = cs_bench_driver_open (options->driver_board, options->key,
                                                      options->key_file, err, sizeof err);
    if (!driver)
        goto out;
    CK_RV rv = cs_bench_driver_pubkey (driver, &pubkey);
    if (rv != CKR_OK) {
        snprintf (err, sizeof err, "cannot read the key's public half: %s", cs_rv_name (rv));
        goto out;
    }
    verifier = options->verify_key
             ? cs_bench_verifier_from_pem (options->verify_key, &pubkey, options->mech, err, sizeof err)
             : cs_bench_verifier_new (&pubkey, options->mech, err, sizeof err);
    if (!verifier)
        goto out;
    status = s_run (options, NULL, driver, options->verify ? verifier : NULL,
                    cs_bench_verifier_bits (verifier));
out:
    if (*err)
        fprintf (stderr, "cryptoserver-bench: %s\n", err);
    cs_bench_verifier_destroy (&verifier);
    cs_bench_pubkey_clear (&pubkey);
    cs_bench_driver_close (&driver);
    return status;
}

int
main (int argc, char **argv)
{
    if (argc > 1 && strcmp (argv [1], "tls") == 0)
        return cs_bench_tls_main (argc - 1, argv + 1);
    if (argc > 1 && strcmp (argv [1], "paper") == 0)
        return cs_bench_paper_main (argc - 1, argv + 1);
    s_options_t options = { .threads = 1, .blocks = 1, .mech = CS_BENCH_SHA256_RSA_PKCS,
                            .gen.token = true };
    int status = s_parse (argc, argv, &options);
    if (status >= 0)
        return status;
    if (options.driver_board)
        return s_main_driver (&options);
    char err [256] = "";
    cs_bench_module_t module;
    cs_bench_pubkey_t pubkey = { 0 };
    cs_bench_verifier_t *verifier = NULL;
    CK_SESSION_HANDLE session = CK_INVALID_HANDLE;
    status = 1;
    if (cs_bench_module_open (&module, options.module_path, options.token, err, sizeof err) != 0)
        goto out;
    //  This session stays open through the run, so the login lasts.
    CK_RV rv = cs_bench_session_open (&module, options.pin, &session);
    if (rv != CKR_OK) {
        snprintf (err, sizeof err, "C_OpenSession/C_Login: %s", cs_rv_name (rv));
        goto out;
    }
    if (options.keygen) {
        options.gen.count = options.count;
        options.gen.csv = options.csv;
        options.gen.metrics = options.metrics;
        status = cs_bench_keygen_run (&module, session, &options.gen);
        goto out;
    }
    rv = cs_bench_pubkey_read (&module, session, options.key, &pubkey);
    if (rv != CKR_OK) {
        snprintf (err, sizeof err, "key '%s': cannot read its public key: %s",
                  options.key, cs_rv_name (rv));
        goto out;
    }
    verifier = options.verify_key
             ? cs_bench_verifier_from_pem (options.verify_key, &pubkey, options.mech, err, sizeof err)
             : cs_bench_verifier_new (&pubkey, options.mech, err, sizeof err);
    if (!verifier)
        goto out;
    status = s_run (&options, &module, NULL, options.verify ? verifier : NULL,
                    cs_bench_verifier_bits (verifier));
out:
    if (*err)
        fprintf (stderr, "cryptoserver-bench: %s\n", err);
    cs_bench_verifier_destroy (&verifier);
    cs_bench_pubkey_clear (&pubkey);
    if (session != CK_INVALID_HANDLE)
        module.p11->C_CloseSession (session);
    cs_bench_module_close (&module);
    return status;
}
