/*  cs-wire-flood — a raw-wire client that holds a client's CURVE key and
 *  floods the broker with frames of empty jobs, without a login, while a
 *  second association of the same client measures Hello round trips
 *  (issue 19 item 5: work bounded before it is done).
 *
 *  cs-wire-flood --endpoint E --broker-cert F --client-cert F
 *                [--frames N (40)] [--jobs J (500000)] [--hellos H (50)]
 *
 *  First H Hellos alone on the probe association (quiet), then the N
 *  frames of J empty jobs each (Request.jobs, field 6, length 0: two bytes
 *  a job, ~1 MB a frame for 500,000) are queued on the flood association,
 *  and the probe sends one Hello after another until every frame is
 *  answered (at least H).  Every frame must be answered with a
 *  request-level CKR_DEVICE_MEMORY (the job limit, docs/CONTRACTS.md
 *  "Limits"), its request id and no results; every Hello with CKR_OK;
 *  then a Hello on the flood association itself must succeed (the
 *  connection stays usable).
 *
 *  Prints "cs-wire-flood: summary frames=N refused=N quiet-p50-us=X
 *  flood-hellos=K flood-p50-us=Y flood-max-us=Z final-hello=ok|FAILED".
 *  Latencies are printed, not judged (wire-flood.sh judges the broker's CPU
 *  time).  Exit 0 when every check holds, 1 when one fails, 2 on bad usage
 *  or when it cannot start.
 */
#include <getopt.h>
#include <inttypes.h>
#include <czmq.h>
#include <p11-kit/pkcs11.h>
#include "cs_wire.h"

#define S_ID_FLOOD 0x10000          /* request ids of the flood frames: S_ID_FLOOD + i */
#define S_ID_HELLO 0x20000          /* ... of the probe's Hellos */
#define S_WAIT_MS 60000             /* the most any one reply may take */

static zsock_t *
s_dealer (const char *endpoint, const char *broker_cert, const char *client_cert)
{
    zsock_t *dealer = zsock_new (ZMQ_DEALER);
    zcert_t *broker = zcert_load (broker_cert), *client = zcert_load (client_cert);
    if (!dealer || !broker || !client) {
        fprintf (stderr, "cs-wire-flood: cannot load %s or %s\n", broker_cert, client_cert);
        zcert_destroy (&broker);
        zcert_destroy (&client);
        zsock_destroy (&dealer);
        return NULL;
    }
    zsock_set_linger (dealer, 0);
    zsock_set_sndhwm (dealer, 0);
    zcert_apply (client, dealer);
    zsock_set_curve_serverkey (dealer, zcert_public_txt (broker));
    zcert_destroy (&broker);
    zcert_destroy (&client);
    if (zsock_connect (dealer, "%s", endpoint)) {
        fprintf (stderr, "cs-wire-flood: cannot connect to %s\n", endpoint);
        zsock_destroy (&dealer);
    }
    return dealer;
}

/*  Sends the encoded request (head) followed by `jobs` empty jobs.  */
static int
s_send_frame (zsock_t *dealer, uint64_t id, size_t jobs)
{
    Cs__Request req = CS__REQUEST__INIT;
    Cs__HelloJob hello = CS__HELLO_JOB__INIT;
    Cs__Job job = CS__JOB__INIT, *one [1] = { &job };
    req.version_min = CS_PROTOCOL_VERSION_MIN;
    req.version_max = CS_PROTOCOL_VERSION;
    req.request_id = id;
    if (jobs == 0) {                /* a Hello */
        job.kind_case = CS__JOB__KIND_HELLO;
        job.hello = &hello;
        req.n_jobs = 1;
        req.jobs = one;
    }
    size_t head = 0;
    uint8_t *head_bytes = cs_wire_encode (&req.base, &head);
    zframe_t *frame = head_bytes ? zframe_new (NULL, head + 2 * jobs) : NULL;
    if (!frame) {
        free (head_bytes);
        return -1;
    }
    uint8_t *data = zframe_data (frame);
    memcpy (data, head_bytes, head);
    for (size_t i = 0; i < jobs; i++) {
        data [head + 2 * i] = (6 << 3) | 2;
        data [head + 2 * i + 1] = 0;
    }
    free (head_bytes);
    return zframe_send (&frame, dealer, 0);
}

/*  Receives one reply on dealer within wait_ms (NULL when none came).  */
static Cs__Reply *
s_recv (zsock_t *dealer, int wait_ms)
{
    zsock_set_rcvtimeo (dealer, wait_ms);
    zframe_t *frame = zframe_recv (dealer);
    if (!frame)
        return NULL;
    Cs__Reply *reply = cs_wire_reply_decode (zframe_data (frame), zframe_size (frame), NULL);
    zframe_destroy (&frame);
    return reply;
}

/*  One Hello round trip on dealer: its time in us, or -1 when it failed.  */
static int64_t
s_hello (zsock_t *dealer, uint64_t id)
{
    int64_t start = zclock_usecs ();
    if (s_send_frame (dealer, id, 0))
        return -1;
    Cs__Reply *reply = s_recv (dealer, S_WAIT_MS);
    bool ok = reply && reply->request_id == id && reply->rv == CKR_OK && reply->n_results == 1
           && reply->results [0]->rv == CKR_OK;
    if (reply)
        cs__reply__free_unpacked (reply, NULL);
    return ok ? zclock_usecs () - start : -1;
}

static int
s_cmp (const void *a, const void *b)
{
    int64_t x = *(const int64_t *) a, y = *(const int64_t *) b;
    return x < y ? -1 : x > y;
}

/*  Reads the flood's replies that arrived (or arrive within wait_ms each);
 *  counts the refusals it owes.  True when every frame is answered.  */
static bool
s_flood_replies (zsock_t *flood, size_t frames, size_t *answered, size_t *refused, int wait_ms)
{
    Cs__Reply *reply;
    while (*answered < frames && (reply = s_recv (flood, wait_ms))) {
        (*answered)++;
        if (reply->rv == CKR_DEVICE_MEMORY && reply->n_results == 0 && reply->request_id >= S_ID_FLOOD
        &&  reply->request_id < S_ID_FLOOD + frames)
            (*refused)++;
        else
            fprintf (stderr, "cs-wire-flood: frame %" PRIu64 " answered %s with %zu results\n",
                     reply->request_id, cs_rv_name (reply->rv), reply->n_results);
        cs__reply__free_unpacked (reply, NULL);
    }
    return *answered == frames;
}

static int
s_run (zsock_t *probe, zsock_t *flood, size_t frames, size_t jobs, size_t hellos)
{
    size_t max = hellos + 100000, n = 0, answered = 0, refused = 0;
    int64_t *times = calloc (max, sizeof *times);
    uint64_t id = S_ID_HELLO;
    bool bad = !times;
    for (size_t i = 0; !bad && i < hellos; i++)
        bad = (times [i] = s_hello (probe, id++)) < 0;
    if (bad) {
        fprintf (stderr, "cs-wire-flood: a Hello alone failed\n");
        free (times);
        return 1;
    }
    qsort (times, hellos, sizeof *times, s_cmp);
    int64_t quiet = times [hellos / 2];
    for (size_t i = 0; i < frames; i++)
        if (s_send_frame (flood, S_ID_FLOOD + i, jobs)) {
            fprintf (stderr, "cs-wire-flood: cannot send frame %zu\n", i);
            free (times);
            return 1;
        }
    int64_t until = zclock_mono () + (int64_t) S_WAIT_MS * 2;
    while (!bad && (n < hellos || !s_flood_replies (flood, frames, &answered, &refused, 0))
           && n < max && zclock_mono () < until)
        bad = (times [n++] = s_hello (probe, id++)) < 0;
    while (!s_flood_replies (flood, frames, &answered, &refused, 100) && zclock_mono () < until
           && !zsys_interrupted)
        ;
    bool final = s_hello (flood, id++) >= 0;
    qsort (times, n, sizeof *times, s_cmp);
    printf ("cs-wire-flood: summary frames=%zu refused=%zu quiet-p50-us=%" PRId64 " flood-hellos=%zu "
            "flood-p50-us=%" PRId64 " flood-max-us=%" PRId64 " final-hello=%s\n", frames, refused, quiet,
            n, n ? times [n / 2] : 0, n ? times [n - 1] : 0, final ? "ok" : "FAILED");
    free (times);
    if (bad)
        fprintf (stderr, "cs-wire-flood: a Hello during the flood failed\n");
    return bad || refused != frames || !final ? 1 : 0;
}

int
main (int argc, char **argv)
{
    static const struct option options [] = {
        { "endpoint", required_argument, NULL, 'e' }, { "broker-cert", required_argument, NULL, 'b' },
        { "client-cert", required_argument, NULL, 'c' }, { "frames", required_argument, NULL, 'f' },
        { "jobs", required_argument, NULL, 'j' }, { "hellos", required_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 }
    };
    const char *endpoint = NULL, *broker_cert = NULL, *client_cert = NULL;
    long frames = 40, jobs = 500000, hellos = 50;
    for (int opt; (opt = getopt_long (argc, argv, "e:b:c:f:j:h:", options, NULL)) != -1; )
        switch (opt) {
            case 'e': endpoint = optarg; break;
            case 'b': broker_cert = optarg; break;
            case 'c': client_cert = optarg; break;
            case 'f': frames = atol (optarg); break;
            case 'j': jobs = atol (optarg); break;
            case 'h': hellos = atol (optarg); break;
            default: return 2;
        }
    if (!endpoint || !broker_cert || !client_cert || frames < 1 || jobs < 1 || hellos < 1
    ||  (size_t) jobs * 2 + 32 > CS_WIRE_MAX_MESSAGE) {
        fprintf (stderr, "usage: cs-wire-flood --endpoint E --broker-cert F --client-cert F "
                 "[--frames N] [--jobs J (2 J + 32 <= %d)] [--hellos H]\n", CS_WIRE_MAX_MESSAGE);
        return 2;
    }
    zsys_init ();
    zsock_t *probe = s_dealer (endpoint, broker_cert, client_cert);
    zsock_t *flood = probe ? s_dealer (endpoint, broker_cert, client_cert) : NULL;
    int rc = flood ? s_run (probe, flood, (size_t) frames, (size_t) jobs, (size_t) hellos) : 2;
    zsock_destroy (&probe);
    zsock_destroy (&flood);
    return rc;
}
