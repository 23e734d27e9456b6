/*  cs_bench_pq.c — `cryptoserver-bench pq`: the throughput and latency of
 *  post-quantum operations through a PKCS#11 3.2 module (issue #23):
 *  ML-DSA-65 signatures (C_Sign, CKM_ML_DSA) or ML-KEM-768 decapsulations
 *  (C_DecapsulateKey, CKM_ML_KEM) with a token key the run makes and
 *  destroys, THREADS threads each with its own session, COUNT operations
 *  each; ops/s over the whole run and p50/p99 of the operations that
 *  succeeded.  Every ML-DSA signature is checked with C_Verify after the
 *  clock stopped; every decapsulated secret must equal the one encapsulated
 *  (the module's own secret keys, read back as CKA_VALUE: local, no round
 *  trip).  */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif
#include <getopt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dlfcn.h>
#include <openssl/crypto.h>
#include "cs_bench.h"
#include "cs_p11_3.h"
#include "cryptoserver/pkcs11v.h"
#include "cs_wire.h"

#define S_LABEL "cs-bench-pq"
#define S_MESSAGE 64                    /* bytes signed per operation */

typedef struct {
    const char *module_path, *token, *pin, *op;
    int threads;
    long count;
    bool csv;
} s_options_t;

/*  One thread's share: its session, its results.  */
typedef struct {
    const s_options_t *options;
    cs_bench_module_t *module;
    CK_FUNCTION_LIST_3_2 *p11;
    pthread_barrier_t *start, *stop;    /* the clock runs between them */
    bool kem;
    unsigned char *sigs;                /* ML-DSA: count signatures of 4627 bytes, checked later */
    CK_ULONG *sig_lens;
    unsigned char ct [1568];            /* the ciphertext every decapsulation opens */
    CK_ULONG ct_len;
    unsigned char secret [32];          /* what it must give */
    cs_bench_samples_t latency;
    long ops, failures, checked;
    CK_RV first_error;
} s_worker_t;

/*  A readable session secret key's template (the secret is compared).  */
static CK_OBJECT_CLASS s_secret_class = CKO_SECRET_KEY;
static CK_KEY_TYPE s_generic = CKK_GENERIC_SECRET;
static CK_BBOOL s_no = CK_FALSE, s_yes = CK_TRUE;
static CK_ATTRIBUTE s_secret_tmpl [] = {
    { CKA_CLASS, &s_secret_class, sizeof s_secret_class }, { CKA_KEY_TYPE, &s_generic, sizeof s_generic },
    { CKA_SENSITIVE, &s_no, 1 }, { CKA_EXTRACTABLE, &s_yes, 1 },
};

#define S_SIG_MAX 4627                  /* bytes: an ML-DSA-87 signature */
static unsigned char s_msg [S_MESSAGE] = "cryptoserver-bench pq";

/*  One operation, number i: a signature (kept for C_Verify once the clock
 *  stopped) or a decapsulation whose secret is compared now (outside the
 *  timed call; reading a session object's CKA_VALUE is local).  */
static CK_RV
s_one (s_worker_t *w, CK_SESSION_HANDLE session, CK_OBJECT_HANDLE key, long i, double *ms)
{
    unsigned char *sig = w->sigs ? w->sigs + (size_t) i * S_SIG_MAX : NULL, value [32];
    CK_ULONG sig_len = S_SIG_MAX;
    CK_MECHANISM mech = { w->kem ? CKM_ML_KEM : CKM_ML_DSA, NULL, 0 };
    CK_OBJECT_HANDLE secret = CK_INVALID_HANDLE;
    double began = cs_bench_now ();
    CK_RV rv = w->kem ? w->p11->C_DecapsulateKey (session, &mech, key, s_secret_tmpl, 4, w->ct, w->ct_len, &secret)
             : w->p11->C_SignInit (session, &mech, key);
    if (rv == CKR_OK && !w->kem)
        rv = w->p11->C_Sign (session, s_msg, sizeof s_msg, sig, &sig_len);
    *ms = (cs_bench_now () - began) * 1000.0;
    if (rv == CKR_OK && !w->kem)
        w->sig_lens [i] = sig_len;
    if (rv == CKR_OK && w->kem) {
        CK_ATTRIBUTE attr = { CKA_VALUE, value, sizeof value };
        rv = w->p11->C_GetAttributeValue (session, secret, &attr, 1);
        if (rv == CKR_OK && (attr.ulValueLen != 32 || CRYPTO_memcmp (value, w->secret, 32)))
            rv = CKR_GENERAL_ERROR;
        w->p11->C_DestroyObject (session, secret);
        OPENSSL_cleanse (value, sizeof value);
        w->checked += rv == CKR_OK;
    }
    return rv;
}

/*  After the clock: every kept signature with C_Verify (a board job).  */
static void
s_check_signatures (s_worker_t *w, CK_SESSION_HANDLE session, CK_OBJECT_HANDLE pub)
{
    CK_MECHANISM mech = { CKM_ML_DSA, NULL, 0 };
    for (long i = 0; w->sigs && i < w->options->count; i++) {
        if (!w->sig_lens [i])
            continue;
        CK_RV rv = w->p11->C_VerifyInit (session, &mech, pub);
        if (rv == CKR_OK)
            rv = w->p11->C_Verify (session, s_msg, sizeof s_msg, w->sigs + (size_t) i * S_SIG_MAX, w->sig_lens [i]);
        if (rv == CKR_OK)
            w->checked++;
        else {
            w->failures++;
            w->first_error = w->first_error ? w->first_error : rv;
        }
    }
}

static void *
s_worker (void *arg)
{
    s_worker_t *w = arg;
    CK_SESSION_HANDLE session = CK_INVALID_HANDLE;
    CK_OBJECT_HANDLE key = CK_INVALID_HANDLE, pub = CK_INVALID_HANDLE;
    CK_RV rv = cs_bench_session_open (w->module, w->options->pin, &session);
    if (rv == CKR_OK)
        rv = cs_bench_find (w->module, session, CKO_PRIVATE_KEY, S_LABEL, &key);
    if (rv == CKR_OK)
        rv = cs_bench_find (w->module, session, CKO_PUBLIC_KEY, S_LABEL, &pub);
    if (rv == CKR_OK && !w->kem && (!(w->sigs = malloc ((size_t) w->options->count * S_SIG_MAX))
                                    || !(w->sig_lens = calloc ((size_t) w->options->count, sizeof (CK_ULONG)))))
        rv = CKR_HOST_MEMORY;
    pthread_barrier_wait (w->start);
    for (long i = 0; rv == CKR_OK && i < w->options->count; i++) {
        double ms = 0;
        CK_RV one = s_one (w, session, key, i, &ms);
        w->ops++;
        if (one == CKR_OK)
            cs_bench_samples_add (&w->latency, ms);
        else {
            w->failures++;
            w->first_error = w->first_error ? w->first_error : one;
        }
    }
    pthread_barrier_wait (w->stop);
    if (rv != CKR_OK) {
        w->failures += w->options->count;
        w->first_error = rv;
    }
    else
        s_check_signatures (w, session, pub);
    free (w->sigs);
    free (w->sig_lens);
    if (session != CK_INVALID_HANDLE)
        w->p11->C_CloseSession (session);
    return NULL;
}

/*  Makes the run's token key pair, and for ML-KEM one encapsulation (its
 *  ciphertext and secret) that every decapsulation opens.  */
static CK_RV
s_setup (CK_FUNCTION_LIST_3_2 *p11, CK_SESSION_HANDLE session, bool kem, s_worker_t *proto,
         CK_OBJECT_HANDLE *pub_p, CK_OBJECT_HANDLE *priv_p)
{
    CK_ULONG set = kem ? CKP_ML_KEM_768 : CKP_ML_DSA_65;
    CK_ATTRIBUTE pub [] = { { CKA_TOKEN, &s_yes, 1 }, { CKA_LABEL, S_LABEL, sizeof S_LABEL - 1 },
                            { CKA_PARAMETER_SET, &set, sizeof set } };
    CK_ATTRIBUTE priv [] = { { CKA_TOKEN, &s_yes, 1 }, { CKA_LABEL, S_LABEL, sizeof S_LABEL - 1 },
                             { kem ? CKA_DECAPSULATE : CKA_SIGN, &s_yes, 1 } };
    CK_MECHANISM gen = { kem ? CKM_ML_KEM_KEY_PAIR_GEN : CKM_ML_DSA_KEY_PAIR_GEN, NULL, 0 };
    CK_MECHANISM mech = { CKM_ML_KEM, NULL, 0 };
    CK_OBJECT_HANDLE secret;
    CK_RV rv = p11->C_GenerateKeyPair (session, &gen, pub, 3, priv, 3, pub_p, priv_p);
    if (rv != CKR_OK || !kem)
        return rv;
    proto->ct_len = sizeof proto->ct;
    rv = p11->C_EncapsulateKey (session, &mech, *pub_p, s_secret_tmpl, 4, proto->ct, &proto->ct_len, &secret);
    CK_ATTRIBUTE attr = { CKA_VALUE, proto->secret, sizeof proto->secret };
    if (rv == CKR_OK)
        rv = p11->C_GetAttributeValue (session, secret, &attr, 1);
    return rv;
}

/*  Runs the threads and prints the report; the exit status.  */
static int
s_run (const s_options_t *o, bool kem, s_worker_t *proto)
{
    s_worker_t *workers = calloc ((size_t) o->threads, sizeof *workers);
    pthread_t *tids = calloc ((size_t) o->threads, sizeof *tids);
    pthread_barrier_t start, stop;
    cs_bench_samples_t all = { 0 };
    long ops = 0, failures = 0, checked = 0;
    CK_RV first = CKR_OK;
    if (!workers || !tids || pthread_barrier_init (&start, NULL, (unsigned) o->threads + 1)
    ||  pthread_barrier_init (&stop, NULL, (unsigned) o->threads + 1)) {
        free (workers);
        free (tids);
        return 1;
    }
    for (int i = 0; i < o->threads; i++) {
        workers [i] = *proto;
        workers [i].start = &start;
        workers [i].stop = &stop;
        pthread_create (&tids [i], NULL, s_worker, &workers [i]);
    }
    pthread_barrier_wait (&start);
    double began = cs_bench_now ();
    pthread_barrier_wait (&stop);
    double seconds = cs_bench_now () - began;
    for (int i = 0; i < o->threads; i++)
        pthread_join (tids [i], NULL);
    for (int i = 0; i < o->threads; i++) {
        ops += workers [i].ops;
        failures += workers [i].failures;
        checked += workers [i].checked;
        first = first ? first : workers [i].first_error;
        cs_bench_samples_merge (&all, &workers [i].latency);
        cs_bench_samples_free (&workers [i].latency);
    }
    const char *name = kem ? "ml-kem-768-decapsulate" : "ml-dsa-65-sign";
    if (o->csv)
        printf ("op,threads,ops,seconds,ops_per_s,p50_ms,p99_ms,checked,failures\n%s,%d,%ld,%.3f,%.1f,%.3f,%.3f,%ld,%ld\n",
                name, o->threads, ops, seconds, seconds > 0 ? (double) (ops - failures) / seconds : 0,
                cs_bench_percentile (&all, 50), cs_bench_percentile (&all, 99), checked, failures);
    else
        printf ("%s: %d threads, %ld ops in %.3f s: %.1f ops/s, p50 %.3f ms, p99 %.3f ms; %ld checked, %ld failed%s%s\n",
                name, o->threads, ops, seconds, seconds > 0 ? (double) (ops - failures) / seconds : 0,
                cs_bench_percentile (&all, 50), cs_bench_percentile (&all, 99), checked, failures,
                first ? ", first error " : "", first ? cs_rv_name (first) : "");
    cs_bench_samples_free (&all);
    pthread_barrier_destroy (&start);
    pthread_barrier_destroy (&stop);
    free (workers);
    free (tids);
    return failures || checked != ops ? 1 : 0;
}

static void
s_usage (FILE *out)
{
    fputs ("usage: cryptoserver-bench pq [--module PATH] [--token LABEL] [--pin PIN]\n"
           "                             [--op ml-dsa-65-sign|ml-kem-768-decapsulate] [--threads N] [--count N] [--csv]\n"
           "  defaults: $CRYPTOSERVER_MODULE, $CRYPTOSERVER_TOKEN, $CRYPTOSERVER_PIN, ml-dsa-65-sign, 1 thread,\n"
           "  100 operations per thread\n", out);
}

int
cs_bench_pq_main (int argc, char **argv)
{
    static const struct option longs [] = {
        { "module", required_argument, NULL, 'm' }, { "token", required_argument, NULL, 't' },
        { "pin", required_argument, NULL, 'p' }, { "op", required_argument, NULL, 'o' },
        { "threads", required_argument, NULL, 'n' }, { "count", required_argument, NULL, 'c' },
        { "csv", no_argument, NULL, 'v' }, { "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 }
    };
    s_options_t o = { getenv ("CRYPTOSERVER_MODULE"), getenv ("CRYPTOSERVER_TOKEN"), getenv ("CRYPTOSERVER_PIN"),
                      "ml-dsa-65-sign", 1, 100, false };
    optind = 1;
    for (int c; (c = getopt_long (argc, argv, "", longs, NULL)) != -1; )
        switch (c) {
            case 'm': o.module_path = optarg; break;
            case 't': o.token = optarg; break;
            case 'p': o.pin = optarg; break;
            case 'o': o.op = optarg; break;
            case 'n': o.threads = atoi (optarg); break;
            case 'c': o.count = atol (optarg); break;
            case 'v': o.csv = true; break;
            case 'h': s_usage (stdout); return 0;
            default: s_usage (stderr); return 2;
        }
    bool kem = o.op && strcmp (o.op, "ml-kem-768-decapsulate") == 0;
    if (optind < argc || !o.module_path || !o.token || !o.pin || o.threads < 1 || o.threads > CS_BENCH_MAX_THREADS
    ||  o.count < 1 || !o.op || (!kem && strcmp (o.op, "ml-dsa-65-sign"))) {
        s_usage (stderr);
        return 2;
    }
    cs_bench_module_t module = { 0 };
    char err [256];
    CK_SESSION_HANDLE session = CK_INVALID_HANDLE;
    CK_OBJECT_HANDLE pub = CK_INVALID_HANDLE, priv = CK_INVALID_HANDLE;
    s_worker_t proto = { .options = &o, .module = &module, .kem = kem };
    int status = 1;
    CK_RV rv = CKR_OK;
    if (cs_bench_module_open (&module, o.module_path, o.token, err, sizeof err)) {
        fprintf (stderr, "cryptoserver-bench pq: %s\n", err);
        goto out;
    }
    if (!(proto.p11 = cs_bench_list_3_2 (&module))) {
        fprintf (stderr, "cryptoserver-bench pq: %s has no PKCS#11 3.2 interface\n", o.module_path);
        goto out;
    }
    if ((rv = cs_bench_session_open (&module, o.pin, &session)) != CKR_OK
    ||  (rv = s_setup (proto.p11, session, kem, &proto, &pub, &priv)) != CKR_OK) {
        fprintf (stderr, "cryptoserver-bench pq: setup: %s\n", cs_rv_name (rv));
        goto out;
    }
    status = s_run (&o, kem, &proto);
out:
    if (priv != CK_INVALID_HANDLE)
        proto.p11->C_DestroyObject (session, priv);
    if (pub != CK_INVALID_HANDLE)
        proto.p11->C_DestroyObject (session, pub);
    OPENSSL_cleanse (proto.secret, sizeof proto.secret);
    cs_bench_module_close (&module);
    return status;
}
