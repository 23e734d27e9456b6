/*  sk_local.c — three parties in one process (cs_sharedkeys.h): an
 *  in-memory FIFO transport for the tests and the benchmark, with the time a
 *  generation would take on three machines (a discrete-event clock per
 *  party: a message leaves at its sender's clock, the receiver starts on it
 *  no earlier, and each call adds the thread CPU time it took).
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <openssl/rand.h>
#include "sk_int.h"

typedef struct {
    unsigned from, to;
    unsigned char *data;
    size_t len;
    double at;              /* sender's clock when it left */
} s_item_t;

typedef struct {
    s_item_t *item;
    size_t head, count, cap;
} s_queue_t;

static double
s_clock (clockid_t id)
{
    struct timespec ts;
    clock_gettime (id, &ts);
    return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

/*  Moves the messages of out into the queue, stamped `at`.  */
static int
s_enqueue (s_queue_t *q, unsigned from, cs_sk_outbox_t *out, double at)
{
    for (size_t i = 0; i < out->count; i++) {
        if (q->head + q->count == q->cap) {
            if (q->head > 0) {
                memmove (q->item, q->item + q->head, q->count * sizeof *q->item);
                q->head = 0;
            }
            else {
                size_t cap = q->cap ? 2 * q->cap : 64;
                s_item_t *item = realloc (q->item, cap * sizeof *item);
                if (!item)
                    return CS_SK_ENOMEM;
                q->item = item;
                q->cap = cap;
            }
        }
        q->item [q->head + q->count++] = (s_item_t) { from, out->msg [i].receiver, out->msg [i].data,
                                                      out->msg [i].len, at };
        out->msg [i].data = NULL;
    }
    cs_sk_outbox_clear (out);
    return 0;
}

static void
s_queue_free (s_queue_t *q)
{
    for (size_t i = 0; i < q->count; i++)
        free (q->item [q->head + i].data);
    free (q->item);
}

/*  Delivers queued messages until every party is done or one fails.  */
static int
s_pump (cs_sk_party_t *party [CS_SK_PARTIES], s_queue_t *q, double clock [CS_SK_PARTIES])
{
    cs_sk_outbox_t out = { 0 };
    int rc = 0;
    while (rc == 0 && q->count > 0) {
        s_item_t it = q->item [q->head++];
        q->count--;
        unsigned j = it.to - 1;
        if (clock [j] < it.at)
            clock [j] = it.at;
        double t0 = s_clock (CLOCK_THREAD_CPUTIME_ID);
        rc = cs_sk_party_receive (party [j], it.from, it.data, it.len, &out);
        clock [j] += s_clock (CLOCK_THREAD_CPUTIME_ID) - t0;
        free (it.data);
        if (rc == 0)
            rc = s_enqueue (q, j + 1, &out, clock [j]);
    }
    cs_sk_outbox_clear (&out);
    for (unsigned i = 0; rc == 0 && i < CS_SK_PARTIES; i++)
        if (!cs_sk_party_done (party [i]))
            rc = CS_SK_EPROTO;              /* nothing left to deliver: stuck */
    return rc;
}

int
cs_sk_local_run_with (const cs_sk_params_t *params, const unsigned char *session,
                      cs_sk_rand_fn rand [CS_SK_PARTIES], void *rand_ctx [CS_SK_PARTIES],
                      cs_sk_share_t *shares [CS_SK_PARTIES], cs_sk_party_t *parties [CS_SK_PARTIES],
                      cs_sk_run_stats_t *stats)
{
    if (!params || !shares)
        return CS_SK_EINVAL;
    unsigned char sid [CS_SK_SESSION_LEN];
    if (session)
        memcpy (sid, session, sizeof sid);
    else if (RAND_bytes (sid, sizeof sid) != 1)
        return CS_SK_ERAND;
    cs_sk_party_t *party [CS_SK_PARTIES] = { NULL };
    double clock [CS_SK_PARTIES] = { 0 };
    s_queue_t q = { 0 };
    cs_sk_outbox_t out = { 0 };
    double start = s_clock (CLOCK_MONOTONIC), cpu = s_clock (CLOCK_THREAD_CPUTIME_ID);
    int rc = 0;
    for (unsigned i = 0; i < CS_SK_PARTIES && rc == 0; i++) {
        shares [i] = NULL;
        party [i] = cs_sk_party_new (i + 1, sid, params, rand ? rand [i] : NULL,
                                     rand_ctx ? rand_ctx [i] : NULL);
        rc = party [i] ? 0 : CS_SK_EINVAL;
    }
    for (unsigned i = 0; i < CS_SK_PARTIES && rc == 0; i++) {
        double t0 = s_clock (CLOCK_THREAD_CPUTIME_ID);
        rc = cs_sk_party_start (party [i], &out);
        clock [i] += s_clock (CLOCK_THREAD_CPUTIME_ID) - t0;
        if (rc == 0)
            rc = s_enqueue (&q, i + 1, &out, clock [i]);
    }
    if (rc == 0)
        rc = s_pump (party, &q, clock);
    for (unsigned i = 0; i < CS_SK_PARTIES && rc == 0; i++)
        if (!(shares [i] = cs_sk_party_share (party [i])))
            rc = CS_SK_ENOMEM;
    if (stats) {
        memset (stats, 0, sizeof *stats);
        stats->seconds = s_clock (CLOCK_MONOTONIC) - start;
        stats->cpu_seconds = s_clock (CLOCK_THREAD_CPUTIME_ID) - cpu;
        for (unsigned i = 0; i < CS_SK_PARTIES; i++) {
            if (party [i])
                cs_sk_party_stats (party [i], &stats->party [i]);
            stats->bytes += stats->party [i].bytes_sent;
            if (clock [i] > stats->critical_seconds)
                stats->critical_seconds = clock [i];
        }
    }
    for (unsigned i = 0; i < CS_SK_PARTIES; i++) {
        if (rc)
            cs_sk_share_destroy (&shares [i]);
        if (parties && rc == 0)
            parties [i] = party [i];
        else
            cs_sk_party_destroy (&party [i]);
    }
    s_queue_free (&q);
    cs_sk_outbox_clear (&out);
    return rc;
}

int
cs_sk_local_run (const cs_sk_params_t *params, cs_sk_share_t *shares [CS_SK_PARTIES],
                 cs_sk_run_stats_t *stats)
{
    return cs_sk_local_run_with (params, NULL, NULL, NULL, shares, NULL, stats);
}
