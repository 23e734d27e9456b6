/*  cs_bench_async.c — cryptoserver-bench --async N (cs_bench.h): one
 *  application thread keeps N signatures in flight through the module's
 *  PKCS#11 3.2 asynchronous sessions (issue #23), one async session per
 *  signature in flight (a session has one C_Sign at a time: the function
 *  name identifies the call).  A sweep asks C_AsyncComplete of every
 *  session; each finished signature is timed, kept for OpenSSL and followed
 *  at once by the next C_SignInit and C_Sign of that session.  A sweep that
 *  finds nothing finished yields the CPU for 20 µs, so that on a small
 *  machine the broker is not starved by the poller.  */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <openssl/evp.h>
#include "cs_p11_3.h"
#include "cs_bench.h"
#include "cs_wire.h"

#define S_MAX_SIG 1024              /* bytes: RSA-8192 */
#define S_MESSAGE 64                /* bytes signed per operation */
#define S_MAX_INFLIGHT 1024

typedef struct {
    CK_SESSION_HANDLE session;
    CK_OBJECT_HANDLE key;
    long index;                     /* the message in flight, -1: none */
    double started;
    unsigned char sig [S_MAX_SIG];
    CK_ULONG sig_len;
} s_slot_t;

typedef struct {
    long index;
    CK_ULONG len;
    unsigned char *bytes;
} s_kept_t;

typedef struct {
    const cs_bench_options_t *options;
    CK_FUNCTION_LIST_3_2 *p11;
    s_slot_t *slots;
    int n;
    long next, ops, failures, verified;
    CK_RV first_error;
    s_kept_t *kept;
    size_t n_kept, room;
    cs_bench_samples_t latency;
} s_run_t;

static void
s_message (unsigned char *message, long i)
{
    memset (message, 0, S_MESSAGE);
    snprintf ((char *) message, S_MESSAGE, "cryptoserver-bench async signature %ld", i);
}

static void
s_fail (s_run_t *run, CK_RV rv)
{
    run->failures++;
    if (run->first_error == CKR_OK)
        run->first_error = rv;
}

/*  Starts signature `i` in `slot`: CKR_PENDING (or CKR_OK: the module
 *  answered at once).  */
static CK_RV
s_start (s_run_t *run, s_slot_t *slot, long i)
{
    unsigned char message [S_MESSAGE], digest [EVP_MAX_MD_SIZE];
    unsigned digest_len = 0;
    CK_MECHANISM mech;
    CK_RSA_PKCS_PSS_PARAMS pss;
    bool hashed = run->options->mech == CS_BENCH_ECDSA;     /* CKM_ECDSA signs a digest */
    CK_RV rv;
    s_message (message, i);
    cs_bench_mech_fill (run->options->mech, &mech, &pss);
    if (hashed && EVP_Digest (message, sizeof message, digest, &digest_len, EVP_sha256 (), NULL) != 1)
        return CKR_GENERAL_ERROR;
    slot->index = i;
    slot->sig_len = sizeof slot->sig;
    slot->started = cs_bench_now ();
    if ((rv = run->p11->C_SignInit (slot->session, &mech, slot->key)) != CKR_OK)
        return rv;
    return run->p11->C_Sign (slot->session, hashed ? digest : message, hashed ? digest_len : sizeof message,
                             slot->sig, &slot->sig_len);
}

/*  A signature of `len` bytes in `slot` is done: timed and kept.  */
static void
s_done (s_run_t *run, s_slot_t *slot, CK_ULONG len)
{
    unsigned char *bytes = malloc (len);
    run->ops++;
    cs_bench_samples_add (&run->latency, (cs_bench_now () - slot->started) * 1000);
    if (run->n_kept == run->room) {
        size_t room = run->room ? run->room * 2 : 1024;
        s_kept_t *grown = realloc (run->kept, room * sizeof *grown);
        if (grown) {
            run->kept = grown;
            run->room = room;
        }
    }
    if (!bytes || run->n_kept == run->room) {
        free (bytes);
        s_fail (run, CKR_HOST_MEMORY);
        return;
    }
    memcpy (bytes, slot->sig, len);
    run->kept [run->n_kept++] = (s_kept_t) { slot->index, len, bytes };
}

/*  True while signatures are to be started: a total, or until `deadline`.  */
static bool
s_more (const s_run_t *run, long total, double deadline)
{
    return total > 0 ? run->next < total : cs_bench_now () < deadline;
}

/*  One sweep over the slots; returns how many finished.  */
static int
s_sweep (s_run_t *run, long total, double deadline)
{
    int finished = 0;
    for (int k = 0; k < run->n; k++) {
        s_slot_t *slot = &run->slots [k];
        CK_ASYNC_DATA result = { 0 };
        CK_RV rv;
        if (slot->index < 0
        ||  (rv = run->p11->C_AsyncComplete (slot->session, (CK_UTF8CHAR_PTR) "C_Sign", &result)) == CKR_PENDING)
            continue;
        finished++;
        if (rv == CKR_OK)
            s_done (run, slot, result.ulValue);
        else {
            run->ops++;
            s_fail (run, rv);
        }
        slot->index = -1;
        while (slot->index < 0 && s_more (run, total, deadline)) {
            long i = run->next++;
            if ((rv = s_start (run, slot, i)) == CKR_OK) {
                s_done (run, slot, slot->sig_len);      /* answered at once: not an async session? */
                slot->index = -1;
            }
            else
            if (rv != CKR_PENDING) {
                run->ops++;
                s_fail (run, rv);
                slot->index = -1;
                if (run->options->stop_on_error)
                    return finished;
            }
        }
    }
    return finished;
}

/*  Opens the async sessions and finds the key in each.  */
static CK_RV
s_open (s_run_t *run, cs_bench_module_t *module)
{
    CK_RV rv = CKR_OK;
    for (int k = 0; rv == CKR_OK && k < run->n; k++) {
        s_slot_t *slot = &run->slots [k];
        slot->index = -1;
        rv = run->p11->C_OpenSession (module->slot, CKF_SERIAL_SESSION | CKF_ASYNC_SESSION, NULL, NULL,
                                      &slot->session);
        if (rv == CKR_OK)
            rv = cs_bench_find (module, slot->session, CKO_PRIVATE_KEY, run->options->key, &slot->key);
    }
    return rv;
}

static void
s_report (const s_run_t *run, cs_bench_samples_t *latency, double seconds, int bits, double threaded)
{
    const cs_bench_options_t *o = run->options;
    double rate = seconds > 0 ? (double) (run->ops - run->failures) / seconds : 0;
    char verified [32] = "-";
    if (o->verify)
        snprintf (verified, sizeof verified, "%ld", run->verified);
    if (run->first_error != CKR_OK)
        fprintf (stderr, "cryptoserver-bench: --async: first failure: %s\n",
                 run->first_error == CKR_SIGNATURE_INVALID ? "a signature did not verify" : cs_rv_name (run->first_error));
    if (o->csv) {
        printf ("%s,%s,%d,async-%d,%ld,%.3f,%.1f,%.3f,%.3f,%.3f,%.3f,%s,%ld\n", cs_bench_mech_name (o->mech),
                o->key, bits, run->n, run->ops, seconds, rate, cs_bench_percentile (latency, 50),
                cs_bench_percentile (latency, 90), cs_bench_percentile (latency, 99),
                cs_bench_percentile (latency, 100), verified, run->failures);
        return;
    }
    printf ("one thread, %d in flight (PKCS#11 3.2 asynchronous sessions), key %s (%d bits), %s\n", run->n,
            o->key, bits, cs_bench_mech_name (o->mech));
    printf ("%7s %8s %9s %9s %8s %8s %8s %8s %9s %8s\n", "async", "ops", "seconds", "ops/s",
            "p50 ms", "p90 ms", "p99 ms", "max ms", "verified", "failures");
    printf ("%7d %8ld %9.3f %9.1f %8.3f %8.3f %8.3f %8.3f %9s %8ld\n", run->n, run->ops, seconds, rate,
            cs_bench_percentile (latency, 50), cs_bench_percentile (latency, 90),
            cs_bench_percentile (latency, 99), cs_bench_percentile (latency, 100), verified, run->failures);
    if (threaded > 0)
        printf ("async/threads: %.2f (one thread with %d in flight over %d threads)\n", rate / threaded, run->n,
                o->threads);
}

int
cs_bench_async_run (const cs_bench_options_t *options, cs_bench_module_t *module,
                    const cs_bench_verifier_t *verifier, int bits, double threaded_ops_per_s)
{
    s_run_t run = { .options = options, .n = options->async };
    long total = options->count > 0 ? options->count * options->threads : 0;
    double started, ended, deadline;
    CK_RV rv;
    int status = 1;
    if (run.n < 1 || run.n > S_MAX_INFLIGHT || !(run.p11 = cs_bench_list_3_2 (module))
    ||  !(run.slots = calloc ((size_t) run.n, sizeof *run.slots))) {
        fprintf (stderr, "cryptoserver-bench: --async needs 1..%d and a module with the 3.2 interface\n",
                 S_MAX_INFLIGHT);
        return 1;
    }
    if ((rv = s_open (&run, module)) != CKR_OK) {
        fprintf (stderr, "cryptoserver-bench: --async: an async session with key '%s': %s\n", options->key,
                 cs_rv_name (rv));
        goto out;
    }
    started = cs_bench_now ();
    deadline = started + options->seconds;
    for (int k = 0; k < run.n && s_more (&run, total, deadline); k++)
        if ((rv = s_start (&run, &run.slots [k], run.next++)) != CKR_PENDING) {
            run.ops++;
            s_fail (&run, rv == CKR_OK ? CKR_FUNCTION_FAILED : rv);     /* an async session pends */
            run.slots [k].index = -1;
        }
    for (bool busy = true; busy && !(options->stop_on_error && run.failures); ) {
        if (s_sweep (&run, total, deadline) == 0)
            nanosleep (&(struct timespec) { 0, 20000 }, NULL);
        busy = false;
        for (int k = 0; k < run.n; k++)
            busy |= run.slots [k].index >= 0;
    }
    ended = cs_bench_now ();
    for (size_t i = 0; i < run.n_kept; i++) {
        unsigned char message [S_MESSAGE];
        s_message (message, run.kept [i].index);
        if (verifier && cs_bench_verify (verifier, message, sizeof message, run.kept [i].bytes, run.kept [i].len))
            run.verified++;
        else
        if (verifier)
            s_fail (&run, CKR_SIGNATURE_INVALID);
    }
    s_report (&run, &run.latency, ended - started, bits, threaded_ops_per_s);
    status = run.failures ? 1 : 0;
out:
    for (int k = 0; k < run.n; k++)
        if (run.slots [k].session)
            run.p11->C_CloseSession (run.slots [k].session);
    for (size_t i = 0; i < run.n_kept; i++)
        free (run.kept [i].bytes);
    free (run.kept);
    free (run.slots);
    cs_bench_samples_free (&run.latency);
    return status;
}
