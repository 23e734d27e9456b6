/*  cs_bench_shared.c — `cryptoserver-bench shared-keygen`: times shared RSA
 *  key generations (Boneh–Franklin with Malkin, Wu and Boneh's
 *  optimisations; docs/SHARED-KEYS.md) with the three parties in this
 *  process (cs_sk_local_run) and prints the columns of Malkin, Wu and
 *  Boneh's performance table beside their figures: key size, threads,
 *  primality tests, iterations, total time, network traffic.  With
 *  --ablation, the effect of each of their optimisations (sieving, batching
 *  as their threads, load balancing, parallel trial division), one turned
 *  off at a time.  A benchmark: nothing is asserted.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cs_bench.h"
#include "cs_sharedkeys.h"

/*  Malkin, Wu, Boneh, "Experimenting with Shared Generation of RSA Keys"
 *  (NDSS 1999), performance table: three 300 MHz Pentium II, Solaris 2.6.  */
static const struct {
    unsigned bits, threads, tests, iterations;
    const char *time, *traffic;
} s_seed [] = {
    { 512, 2, 36, 119, "0.15 min", "0.18 Mb" },
    { 1024, 6, 49, 130, "1.5 min", "1.16 Mb" },
    { 2048, 6, 234, 495, "18 min", "7.48 Mb" },
};

/*  What the runs of one setting measured.  */
typedef struct {
    unsigned runs;
    double wall_median, machines_median;    /* s */
    double tests_median, candidates_median;
    double candidates_mean, bytes_median, cpu_per_candidate_ms, machines_per_candidate_ms;
} s_result_t;

static int
s_cmp (const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;
    return x < y ? -1 : x > y;
}

static double
s_median (double *values, unsigned n)
{
    qsort (values, n, sizeof *values, s_cmp);
    return n % 2 ? values [n / 2] : (values [n / 2 - 1] + values [n / 2]) / 2;
}

/*  Runs `runs` generations with `params`; progress on stderr.  Returns 0,
 *  or -1 after printing the protocol's error.  */
static int
s_measure (const cs_sk_params_t *params, unsigned runs, const char *label, s_result_t *out)
{
    double *v = calloc (5 * (size_t) runs, sizeof *v);
    double cpu = 0, machines = 0, candidates = 0;
    if (!v)
        return -1;
    double *wall = v, *crit = v + runs, *tests = v + 2 * runs, *cands = v + 3 * runs, *bytes = v + 4 * runs;
    for (unsigned r = 0; r < runs; r++) {
        cs_sk_share_t *share [CS_SK_PARTIES];
        cs_sk_run_stats_t st;
        int rc = cs_sk_local_run (params, share, &st);
        if (rc) {
            fprintf (stderr, "cryptoserver-bench: shared-keygen: %s run %u: %s\n", label, r + 1,
                     cs_sk_strerror (rc));
            free (v);
            return -1;
        }
        for (unsigned i = 0; i < CS_SK_PARTIES; i++)
            cs_sk_share_destroy (&share [i]);
        wall [r] = st.seconds;
        crit [r] = st.critical_seconds;
        tests [r] = (double) st.party [0].biprime_tests;
        cands [r] = (double) st.party [0].candidates;
        bytes [r] = (double) st.bytes;
        cpu += st.cpu_seconds;
        machines += st.critical_seconds;
        candidates += cands [r];
        fprintf (stderr, "shared-keygen: %s: run %u/%u: %u bits, %.0f candidates, %.0f biprimality tests, "
                 "%.2f s\n", label, r + 1, runs, params->bits, cands [r], tests [r], wall [r]);
    }
    out->runs = runs;
    out->candidates_mean = candidates / runs;
    out->cpu_per_candidate_ms = cpu * 1e3 / candidates;
    out->machines_per_candidate_ms = machines * 1e3 / candidates;
    out->wall_median = s_median (wall, runs);
    out->machines_median = s_median (crit, runs);
    out->tests_median = s_median (tests, runs);
    out->candidates_median = s_median (cands, runs);
    out->bytes_median = s_median (bytes, runs);
    free (v);
    return 0;
}

/*  The seed's row for `bits` beside ours.  */
static void
s_print_table (unsigned bits, const s_result_t *r)
{
    printf ("%-9s %-8s %8s %11s %11s %14s %16s %10s\n", "", "key size", "threads", "prim.tests",
            "iterations", "total time", "3 machines", "traffic");
    printf ("%-9s %-8u %8d %11.0f %11.0f %12.2f s %14.2f s %7.2f MB\n", "ours", bits, 1,
            r->tests_median, r->candidates_median, r->wall_median, r->machines_median, r->bytes_median / 1e6);
    for (size_t i = 0; i < sizeof s_seed / sizeof s_seed [0]; i++)
        if (s_seed [i].bits == bits)
            printf ("%-9s %-8u %8u %11u %11u %14s %16s %10s\n", "seed", bits, s_seed [i].threads,
                    s_seed [i].tests, s_seed [i].iterations, s_seed [i].time, "-", s_seed [i].traffic);
    printf ("(medians of %u runs; ours: the three parties in one thread of this machine, \"3 machines\" the\n"
            " longest chain of party computations as on three machines without network latency;\n"
            " iterations: candidate moduli N computed; the seed's traffic is as it gives it)\n", r->runs);
}

static int
s_usage (FILE *out, int status)
{
    fprintf (out,
        "usage: cryptoserver-bench shared-keygen [--bits N] [--runs N] [--ablation]\n"
        "\n"
        "Times shared RSA key generation between three parties (docs/SHARED-KEYS.md),\n"
        "run in this process, and prints Malkin, Wu and Boneh's table beside theirs.\n"
        "  --bits N     modulus bits: 512, 1024 (default), 2048, ... (multiple of 64)\n"
        "  --runs N     generations to time (default 5): medians are reported\n"
        "  --ablation   also each optimisation turned off in turn: sieving, batching\n"
        "               (their threads: candidates carried together), load balancing,\n"
        "               parallel trial division\n"
        "Progress lines go to standard error.  Exit status 0, 1 when a generation failed.\n");
    return status;
}

int
cs_bench_shared_main (int argc, char **argv)
{
    static struct option options [] = {
        { "bits", required_argument, NULL, 'b' }, { "runs", required_argument, NULL, 'r' },
        { "ablation", no_argument, NULL, 'a' }, { "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 }
    };
    unsigned bits = 1024, runs = 5;
    bool ablation = false;
    int opt;
    optind = 1;
    while ((opt = getopt_long (argc, argv, "b:r:ah", options, NULL)) != -1)
        switch (opt) {
            case 'b': bits = (unsigned) strtoul (optarg, NULL, 10); break;
            case 'r': runs = (unsigned) strtoul (optarg, NULL, 10); break;
            case 'a': ablation = true; break;
            case 'h': return s_usage (stdout, 0);
            default: return s_usage (stderr, 2);
        }
    if (optind < argc || bits < 512 || bits > 4096 || bits % 64 || runs < 1 || runs > 1000) {
        fprintf (stderr, "cryptoserver-bench: shared-keygen: --bits 512..4096 (a multiple of 64), "
                 "--runs 1..1000\n");
        return 2;
    }
    cs_sk_params_t params;
    cs_sk_params_default (&params, bits);
    s_result_t base;
    if (s_measure (&params, runs, "all optimisations", &base))
        return 1;
    s_print_table (bits, &base);
    if (!ablation)
        return 0;
    static const char *const names [] = { "sieving off", "batch 1 (no threads)", "no load balancing",
                                          "serial trial division" };
    printf ("\n%-24s %13s %18s %22s %12s %14s\n", "optimisation off", "candidates", "median time",
            "3 machines/candidate", "x per cand.", "x candidates");
    printf ("%-24s %13.1f %16.2f s %19.3f ms %12s %14s\n", "(none)", base.candidates_mean, base.wall_median,
            base.machines_per_candidate_ms, "1.00", "1.00");
    for (size_t i = 0; i < 4; i++) {
        cs_sk_params_t off = params;
        if (i == 0) off.sieve = false;
        if (i == 1) off.batch = 1;
        if (i == 2) off.load_balance = false;
        if (i == 3) off.parallel_td = false;
        s_result_t r;
        if (s_measure (&off, runs, names [i], &r))
            return 1;
        /*  The candidates per key are geometric, so a few runs vary a lot:
            the cost per candidate is the steady figure; only sieving
            changes how many candidates a key takes (the slowdown of a
            key is the product of the two columns).  */
        printf ("%-24s %13.1f %16.2f s %19.3f ms %12.2f %14.2f\n", names [i], r.candidates_mean, r.wall_median,
                r.machines_per_candidate_ms, r.machines_per_candidate_ms / base.machines_per_candidate_ms,
                r.candidates_mean / base.candidates_mean);
    }
    printf ("(x: the setting over all optimisations on; a key's slowdown is their product, the candidates\n"
            " column meaningful for sieving only.  The seed: sieving x10, threads x6, load balancing x1.3,\n"
            " parallel trial division x1.3)\n");
    return 0;
}
