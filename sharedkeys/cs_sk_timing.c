/*  cs_sk_timing.c — times shared RSA key generations with the three parties
 *  in this process (cs_sk_local_run) and prints the columns of Malkin, Wu
 *  and Boneh's table: key size, biprimality tests, candidates, time, traffic;
 *  with switches that turn each of their optimisations off.
 *
 *  cs-sk-timing [--bits N] [--runs N] [--batch N] [--tests N] [--td-bound N]
 *               [--no-sieve] [--serial-td] [--no-load-balance]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cs_sharedkeys.h"

static int
s_cmp (const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;
    return x < y ? -1 : x > y;
}

static int
s_usage (void)
{
    fprintf (stderr, "usage: cs-sk-timing [--bits N] [--runs N] [--batch N] [--tests N] "
             "[--td-bound N] [--no-sieve] [--serial-td] [--no-load-balance]\n");
    return 2;
}

int
main (int argc, char **argv)
{
    cs_sk_params_t prm;
    unsigned bits = 1024, runs = 5;
    for (int i = 1; i < argc; i++)
        if (!strcmp (argv [i], "--bits") && i + 1 < argc)
            bits = (unsigned) atoi (argv [++i]);
    cs_sk_params_default (&prm, bits);
    for (int i = 1; i < argc; i++) {
        const char *a = argv [i];
        unsigned v = i + 1 < argc ? (unsigned) atoi (argv [i + 1]) : 0;
        if (!strcmp (a, "--bits"))
            i++;
        else if (!strcmp (a, "--runs") && v)
            runs = v, i++;
        else if (!strcmp (a, "--batch") && v)
            prm.batch = v, i++;
        else if (!strcmp (a, "--tests") && v)
            prm.tests = v, i++;
        else if (!strcmp (a, "--td-bound") && v)
            prm.td_bound = v, i++;
        else if (!strcmp (a, "--no-sieve"))
            prm.sieve = false;
        else if (!strcmp (a, "--serial-td"))
            prm.parallel_td = false;
        else if (!strcmp (a, "--no-load-balance"))
            prm.load_balance = false;
        else
            return s_usage ();
    }
    double *wall = calloc (runs, sizeof *wall), *crit = calloc (runs, sizeof *crit);
    double *cpu = calloc (runs, sizeof *cpu);
    if (!wall || !crit || !cpu)
        return 1;
    printf ("# bits=%u batch=%u tests=%u td_bound=%u sieve=%d parallel_td=%d load_balance=%d\n",
            prm.bits, prm.batch, prm.tests, prm.td_bound, prm.sieve, prm.parallel_td, prm.load_balance);
    printf ("%-4s %6s %10s %11s %7s %9s %9s %12s %10s\n", "run", "bits", "bip.tests", "candidates",
            "rounds", "wall_s", "cpu_s", "3machines_s", "traffic_MB");
    uint64_t tests = 0, cands = 0, bytes = 0, rounds = 0;
    double cpu_sum = 0, crit_sum = 0;
    for (unsigned r = 0; r < runs; r++) {
        cs_sk_share_t *share [CS_SK_PARTIES];
        cs_sk_run_stats_t st;
        int rc = cs_sk_local_run (&prm, share, &st);
        if (rc) {
            fprintf (stderr, "run %u: %s\n", r + 1, cs_sk_strerror (rc));
            return 1;
        }
        for (unsigned i = 0; i < CS_SK_PARTIES; i++)
            cs_sk_share_destroy (&share [i]);
        wall [r] = st.seconds;
        crit [r] = st.critical_seconds;
        cpu [r] = st.cpu_seconds;
        cpu_sum += st.cpu_seconds;
        crit_sum += st.critical_seconds;
        tests += st.party [0].biprime_tests;
        cands += st.party [0].candidates;
        bytes += st.bytes;
        rounds += st.party [0].rounds;
        printf ("%-4u %6u %10llu %11llu %7llu %9.2f %9.2f %12.2f %10.2f\n", r + 1, bits,
                (unsigned long long) st.party [0].biprime_tests,
                (unsigned long long) st.party [0].candidates,
                (unsigned long long) st.party [0].rounds, st.seconds, st.cpu_seconds,
                st.critical_seconds,
                (double) st.bytes / 1e6);
        fflush (stdout);
    }
    qsort (wall, runs, sizeof *wall, s_cmp);
    qsort (crit, runs, sizeof *crit, s_cmp);
    qsort (cpu, runs, sizeof *cpu, s_cmp);
    printf ("mean: %.1f tests, %.1f candidates, %.1f rounds, %.2f MB; median wall %.2f s, cpu %.2f s, "
            "3-machine %.2f s\n", (double) tests / runs, (double) cands / runs, (double) rounds / runs,
            (double) bytes / runs / 1e6, wall [runs / 2], cpu [runs / 2], crit [runs / 2]);
    /* the number of candidates is geometric: compare settings per candidate */
    printf ("per candidate: cpu %.3f ms, 3-machine %.3f ms; mean cpu %.2f s, mean 3-machine %.2f s\n",
            cpu_sum * 1e3 / (double) cands, crit_sum * 1e3 / (double) cands,
            cpu_sum / runs, crit_sum / runs);
    free (cpu);
    free (wall);
    free (crit);
    return 0;
}
