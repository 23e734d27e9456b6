/*  cs_bench_sign.c — cryptoserver-bench's signing run (cs_bench.h): the
 *  threads, each with its own session, sign blocks of messages started on a
 *  barrier, keep their signatures for OpenSSL to verify once the clock has
 *  stopped, and the totals are reported (with the broker's CPU per operation
 *  read from --metrics, and this process's own CPU per operation from
 *  getrusage).  */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include <openssl/evp.h>
#include "cs_bench.h"
#include "cs_metrics_scrape.h"
#include "cs_wire.h"

#define MAX_SIGNATURE 1024          /* bytes: RSA-8192 */
#define MESSAGE_LEN   64            /* bytes signed per operation */

//  A signature kept for verification once signing has stopped, so OpenSSL
//  does not compete with the module for the CPU while the clock runs.
typedef struct {
    long index;                     /* the message number */
    CK_ULONG len;
    unsigned char *bytes;           /* malloc'd */
} s_signature_t;

typedef struct {
    int index;
    const cs_bench_options_t *options;
    cs_bench_module_t *module;
    cs_bench_driver_t *driver;      /* --driver-board, else NULL */
    void *driver_session;           /* this thread's driver session */
    const cs_bench_verifier_t *verifier;
    pthread_barrier_t *ready;       /* every session open (main then reads --metrics) */
    pthread_barrier_t *start;       /* the first block: all threads and main */
    pthread_barrier_t *block;       /* the next blocks: all threads */
    pthread_barrier_t *signed_all;  /* the last block done: all threads (then verification) */
    double *cpu_after;              /* set by the barrier's serial thread: s_cpu_seconds () */
    double began [CS_BENCH_MAX_BLOCKS], ended [CS_BENCH_MAX_BLOCKS];  /* cs_bench_now () when this thread
                                       started/stopped signing each block */
    double deadline;                /* cs_bench_now () when --seconds ends; set by the thread */
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
    double started = cs_bench_now ();
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
    double ms = (cs_bench_now () - started) * 1000.0;
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

//  The CPU time of this process (every thread: the bench's and the module's,
//  e.g. its libzmq I/O threads), user and system, in seconds.
static double
s_cpu_seconds (void)
{
    struct rusage usage;
    if (getrusage (RUSAGE_SELF, &usage) != 0)
        return 0;
    return (double) usage.ru_utime.tv_sec + (double) usage.ru_utime.tv_usec / 1e6
         + (double) usage.ru_stime.tv_sec + (double) usage.ru_stime.tv_usec / 1e6;
}

//  Thread body: open a session (login), find the key, wait for the others,
//  then sign until the count or the deadline, block after block.
static void *
s_worker_run (void *arg)
{
    s_worker_t *worker = arg;
    const cs_bench_options_t *options = worker->options;
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
        worker->began [b] = cs_bench_now ();
        worker->deadline = worker->began [b] + options->seconds;
        long block_ops = options->count * options->threads;
        for (long i = 0; !worker->setup_failed; i++) {
            //  --share: the next operation of the block, whoever takes it.
            long op = options->share ? atomic_fetch_add (&worker->taken [b], 1) : i;
            if (options->share ? op >= block_ops
                               : options->count ? i >= options->count : cs_bench_now () >= worker->deadline)
                break;
            if (atomic_load (worker->stop))
                break;
            s_worker_sign (worker, session, key, (long) b * (options->share ? block_ops : options->count) + op);
        }
        worker->ended [b] = cs_bench_now ();
    }
    //  Every thread has stopped signing: the process's CPU time is read
    //  once here, before any verification or session close.
    if (pthread_barrier_wait (worker->signed_all) == PTHREAD_BARRIER_SERIAL_THREAD)
        *worker->cpu_after = s_cpu_seconds ();
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
        double rate = (double) ops / (cs_bench_now () - started);
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

//  CPU time per operation, in µs, from a CPU time in seconds before and
//  after the run (the broker's process_cpu_seconds_total of --metrics, or
//  this process's getrusage); every op counts, failed or not; negative
//  when there were no ops.
static double
s_cpu_per_op (const s_totals_t *totals, double cpu_before, double cpu_after)
{
    return totals->ops > 0 ? (cpu_after - cpu_before) * 1e6 / (double) totals->ops : -1;
}

static void
s_report (const cs_bench_options_t *options, s_totals_t *totals, double seconds, int bits, double cpu_us,
          double client_cpu_us)
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
    if (options->ops_per_s)
        *options->ops_per_s = rate;
    char count [32];
    snprintf (count, sizeof count, "%ld", totals->verified);
    char cpu [32] = "-";
    if (cpu_us >= 0)
        snprintf (cpu, sizeof cpu, "%.1f", cpu_us);
    char client_cpu [32] = "-";
    if (client_cpu_us >= 0)
        snprintf (client_cpu, sizeof client_cpu, "%.1f", client_cpu_us);
    if (options->csv) {
        //  New columns go at the end (--metrics: broker_cpu_us_per_op, then
        //  always client_cpu_us_per_op): scripts read the others by position.
        if (!options->csv_no_header)
            printf ("mechanism,key,bits,threads,ops,seconds,ops_per_s,p50_ms,p90_ms,p99_ms,max_ms,verified,failures%s"
                    ",client_cpu_us_per_op\n", options->metrics ? ",broker_cpu_us_per_op" : "");
        printf ("%s,%s,%d,%d,%ld,%.3f,%.1f,%.3f,%.3f,%.3f,%.3f,%s,%ld%s%s,%s\n",
                cs_bench_mech_name (options->mech), options->key ? options->key : "file", bits,
                options->threads,
                totals->ops, seconds, rate, p50, p90, p99, max, verified ? verified : count,
                totals->failures, options->metrics ? "," : "", options->metrics ? cpu : "", client_cpu);
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
    printf ("client CPU per op: %s µs (getrusage of this process, user + system, over %ld ops)\n",
            client_cpu, totals->ops);
}

//  Runs the threads and reports.  Returns the exit status.
int
cs_bench_sign_run (const cs_bench_options_t *options, cs_bench_module_t *module, cs_bench_driver_t *driver,
       const cs_bench_verifier_t *verifier, int bits)
{
    s_worker_t *workers = calloc ((size_t) options->threads, sizeof *workers);
    pthread_t *threads = calloc ((size_t) options->threads, sizeof *threads);
    pthread_barrier_t ready, start, block, signed_all;
    atomic_long progress = 0, taken [CS_BENCH_MAX_BLOCKS];
    atomic_bool stop = false;
    char err [512] = "";
    double cpu_before = 0, cpu_after = 0, client_before = 0, client_after = 0;
    for (int b = 0; b < CS_BENCH_MAX_BLOCKS; b++)
        atomic_init (&taken [b], 0);
    pthread_barrier_init (&ready, NULL, (unsigned) options->threads + 1);
    pthread_barrier_init (&start, NULL, (unsigned) options->threads + 1);
    pthread_barrier_init (&block, NULL, (unsigned) options->threads);
    pthread_barrier_init (&signed_all, NULL, (unsigned) options->threads);
    for (int i = 0; i < options->threads; i++) {
        workers [i] = (s_worker_t) { .index = i, .options = options, .module = driver ? NULL : module,
                                     .driver = driver, .verifier = verifier, .ready = &ready,
                                     .start = &start,
                                     .block = &block, .signed_all = &signed_all,
                                     .cpu_after = &client_after, .progress = &progress, .taken = taken,
                                     .stop = &stop };
        pthread_create (&threads [i], NULL, s_worker_run, &workers [i]);
    }
    pthread_barrier_wait (&ready);      //  all sessions open (logins are not measured)
    int metrics_rc = options->metrics ? cs_metrics_read (options->metrics, "process_cpu_seconds_total",
                                                               &cpu_before, err, sizeof err) : 0;
    if (metrics_rc)
        atomic_store (&stop, true);     //  no run: the threads stop before their first op
    client_before = s_cpu_seconds ();   //  after the logins and the --metrics read
    pthread_barrier_wait (&start);      //  the clock starts
    double started = cs_bench_now ();
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
                  options->metrics ? s_cpu_per_op (&totals, cpu_before, cpu_after) : -1,
                  s_cpu_per_op (&totals, client_before, client_after));
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
    pthread_barrier_destroy (&signed_all);
    free (threads);
    free (workers);
    return status;
}
