/*  cs_bench_stats.c — latency samples and their percentiles for
 *  cryptoserver-bench's report (the paper's Tables 1-3 give the same view).
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "cs_bench.h"

double
cs_bench_now (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

bool
cs_bench_samples_add (cs_bench_samples_t *samples, double ms)
{
    if (samples->count == samples->size) {
        size_t size = samples->size ? samples->size * 2 : 1024;
        double *grown = realloc (samples->ms, size * sizeof *grown);
        if (!grown)
            return false;
        samples->ms = grown;
        samples->size = size;
    }
    samples->ms [samples->count++] = ms;
    return true;
}

bool
cs_bench_samples_merge (cs_bench_samples_t *to, const cs_bench_samples_t *from)
{
    for (size_t i = 0; i < from->count; i++)
        if (!cs_bench_samples_add (to, from->ms [i]))
            return false;
    return true;
}

static int
s_compare (const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;
    return (x > y) - (x < y);
}

double
cs_bench_percentile (cs_bench_samples_t *samples, double p)
{
    if (samples->count == 0)
        return 0;
    qsort (samples->ms, samples->count, sizeof *samples->ms, s_compare);
    //  Nearest rank: the smallest sample with at least p% of samples <= it.
    size_t rank = (size_t) ((p / 100.0) * (double) samples->count + 0.999999);
    if (rank < 1)
        rank = 1;
    if (rank > samples->count)
        rank = samples->count;
    return samples->ms [rank - 1];
}

void
cs_bench_samples_free (cs_bench_samples_t *samples)
{
    free (samples->ms);
    memset (samples, 0, sizeof *samples);
}
