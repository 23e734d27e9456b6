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
 *  cs-wire-flood --sym-pin PIN --probe-cert F --endpoint E --broker-cert F
 *                --client-cert F [--connections C (4)] [--seconds S (10)]
 *                [--hellos H (50)]
 *
 *  The reactor's share (issue 19 item 6): the client of --client-cert (one
 *  tenant) logs in with PIN and, on C associations, keeps two requests each
 *  in flight, one SymJob each with a session key, alternately AES-ECB over
 *  16 bytes and AES-CBC over 64 KiB, for S seconds; the client of
 *  --probe-cert (another tenant) measures its Hello round trips alone (H)
 *  and during the flood (one after another).  Prints "cs-wire-flood: sym
 *  summary jobs=N ecb=N cbc=N errors=N quiet-p50-us=X quiet-p99-us=X
 *  hellos=K flood-p50-us=Y flood-p99-us=Y jobs-per-s=R"; exit 1 when a job
 *  or a Hello failed.  Without --probe-cert the flood runs alone (no
 *  Hellos: the p50 fields are 0), which measures the flooding tenant's
 *  throughput (jobs-per-s) for tools/bench-lane-share.sh.
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

/* ---- --sym-pin: one tenant's symmetric jobs, another's Hellos ---------- */

#define S_SYM_IN_FLIGHT 2           /* requests kept in flight per association */
#define S_ID_SYM 0x40000000         /* ids of sym requests */
#define S_ID_LOGIN 0x30000

/*  Logs in as CKU_USER with pin on dealer; the ticket into ticket [50].  */
static bool
s_login (zsock_t *dealer, const char *pin, uint8_t ticket [50])
{
    Cs__Request req = CS__REQUEST__INIT;
    Cs__LoginJob login = CS__LOGIN_JOB__INIT;
    Cs__Job job = CS__JOB__INIT, *jobs [1] = { &job };
    login.user_type = CKU_USER;
    login.pin = (ProtobufCBinaryData) { strlen (pin), (uint8_t *) pin };
    job.kind_case = CS__JOB__KIND_LOGIN;
    job.login = &login;
    req.version_min = CS_PROTOCOL_VERSION_MIN;
    req.version_max = CS_PROTOCOL_VERSION;
    req.request_id = S_ID_LOGIN;
    req.n_jobs = 1;
    req.jobs = jobs;
    size_t size = 0;
    uint8_t *data = cs_wire_encode (&req.base, &size);
    if (!data || zsock_send (dealer, "b", data, size)) {
        free (data);
        return false;
    }
    free (data);
    Cs__Reply *reply = s_recv (dealer, S_WAIT_MS);
    bool ok = reply && reply->rv == CKR_OK && reply->n_results == 1 && reply->results [0]->rv == CKR_OK
           && reply->results [0]->kind_case == CS__RESULT__KIND_LOGIN && reply->results [0]->login->ticket.len == 50;
    if (ok)
        memcpy (ticket, reply->results [0]->login->ticket.data, 50);
    if (reply)
        cs_wire_reply_free (&reply);
    return ok;
}

/*  Sends sym job number n (even: AES-ECB 16 B, odd: AES-CBC 64 KiB) on dealer.  */
static int
s_send_sym (zsock_t *dealer, const uint8_t ticket [50], uint64_t n)
{
    static uint8_t key [16] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16 }, iv [16];
    static uint8_t data [64 * 1024];
    Cs__SymJob sym = CS__SYM_JOB__INIT;
    Cs__Job job = CS__JOB__INIT, *jobs [1] = { &job };
    Cs__Request req = CS__REQUEST__INIT;
    bool cbc = n % 2;
    sym.mechanism = cbc ? CKM_AES_CBC : CKM_AES_ECB;
    sym.operation = 1;                          /* encrypt */
    sym.key_value = (ProtobufCBinaryData) { sizeof key, key };
    if (cbc)
        sym.iv = (ProtobufCBinaryData) { sizeof iv, iv };
    sym.data = (ProtobufCBinaryData) { cbc ? sizeof data : 16, data };
    job.kind_case = CS__JOB__KIND_SYM;
    job.sym = &sym;
    req.version_min = CS_PROTOCOL_VERSION_MIN;
    req.version_max = CS_PROTOCOL_VERSION;
    req.request_id = S_ID_SYM + n;
    req.ticket = (ProtobufCBinaryData) { 50, (uint8_t *) ticket };
    req.n_jobs = 1;
    req.jobs = jobs;
    size_t size = 0;
    uint8_t *bytes = cs_wire_encode (&req.base, &size);
    int rc = bytes ? zsock_send (dealer, "b", bytes, size) : -1;
    free (bytes);
    return rc;
}

/*  The p-th percentile (0..100) of n sorted times.  */
static int64_t
s_pct (const int64_t *times, size_t n, int p)
{
    return n ? times [(n - 1) * (size_t) p / 100] : 0;
}

static int
s_run_sym (zsock_t *probe, zsock_t **flood, size_t n_flood, const char *pin, int seconds, size_t hellos)
{
    uint8_t ticket [50];
    if (!s_login (flood [0], pin, ticket)) {
        fprintf (stderr, "cs-wire-flood: login failed\n");
        return 1;
    }
    size_t max = hellos + 1000000, n = 0, errors = 0, counts [2] = { 0, 0 };
    int64_t *times = calloc (max, sizeof *times);
    uint64_t id = S_ID_HELLO, next = 0;
    for (size_t i = 0; times && probe && i < hellos; i++)
        if ((times [i] = s_hello (probe, id++)) < 0)
            errors++;
    if (!times || errors) {
        fprintf (stderr, "cs-wire-flood: a Hello alone failed\n");
        free (times);
        return 1;
    }
    qsort (times, hellos, sizeof *times, s_cmp);
    size_t quiet = probe ? hellos : 0;
    int64_t quiet50 = s_pct (times, quiet, 50), quiet99 = s_pct (times, quiet, 99);
    zpoller_t *poller = zpoller_new (NULL);
    if (probe)
        zpoller_add (poller, probe);
    for (size_t c = 0; c < n_flood; c++) {
        zpoller_add (poller, flood [c]);
        for (int k = 0; k < S_SYM_IN_FLIGHT; k++)
            s_send_sym (flood [c], ticket, next++);
    }
    int64_t begin = zclock_mono (), end = begin + (int64_t) seconds * 1000, sent_at = zclock_usecs ();
    if (probe)
        s_send_frame (probe, id, 0);
    n = 0;
    while (zclock_mono () < end && n < max && !zsys_interrupted) {
        zsock_t *which = zpoller_wait (poller, 1000);
        if (!which)
            continue;
        Cs__Reply *reply = s_recv (which, 0);
        if (probe && which == probe) {
            if (reply && reply->request_id == id && reply->rv == CKR_OK)
                times [n++] = zclock_usecs () - sent_at;
            else
                errors++;
            sent_at = zclock_usecs ();
            s_send_frame (probe, ++id, 0);
        }
        else {
            bool ok = reply && reply->rv == CKR_OK && reply->n_results == 1 && reply->results [0]->rv == CKR_OK;
            if (ok)
                counts [(reply->request_id - S_ID_SYM) % 2]++;
            else
                errors++;
            s_send_sym (which, ticket, next++);
        }
        if (reply)
            cs_wire_reply_free (&reply);
    }
    zpoller_destroy (&poller);
    int64_t elapsed_ms = zclock_mono () - begin;
    qsort (times, n, sizeof *times, s_cmp);
    printf ("cs-wire-flood: sym summary jobs=%zu ecb=%zu cbc=%zu errors=%zu quiet-p50-us=%" PRId64
            " quiet-p99-us=%" PRId64 " hellos=%zu flood-p50-us=%" PRId64 " flood-p99-us=%" PRId64
            " jobs-per-s=%.0f\n", counts [0] + counts [1], counts [0], counts [1], errors, quiet50, quiet99, n,
            s_pct (times, n, 50), s_pct (times, n, 99),
            elapsed_ms > 0 ? (double) (counts [0] + counts [1]) * 1000.0 / (double) elapsed_ms : 0.0);
    free (times);
    return errors ? 1 : 0;
}

int
main (int argc, char **argv)
{
    static const struct option options [] = {
        { "endpoint", required_argument, NULL, 'e' }, { "broker-cert", required_argument, NULL, 'b' },
        { "client-cert", required_argument, NULL, 'c' }, { "frames", required_argument, NULL, 'f' },
        { "jobs", required_argument, NULL, 'j' }, { "hellos", required_argument, NULL, 'h' },
        { "sym-pin", required_argument, NULL, 'P' }, { "probe-cert", required_argument, NULL, 'p' },
        { "connections", required_argument, NULL, 'C' }, { "seconds", required_argument, NULL, 's' },
        { NULL, 0, NULL, 0 }
    };
    const char *endpoint = NULL, *broker_cert = NULL, *client_cert = NULL, *pin = NULL, *probe_cert = NULL;
    long frames = 40, jobs = 500000, hellos = 50, connections = 4, seconds = 10;
    for (int opt; (opt = getopt_long (argc, argv, "e:b:c:f:j:h:P:p:C:s:", options, NULL)) != -1; )
        switch (opt) {
            case 'P': pin = optarg; break;
            case 'p': probe_cert = optarg; break;
            case 'C': connections = atol (optarg); break;
            case 's': seconds = atol (optarg); break;
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
    if (pin) {
        zsock_t *probe = probe_cert ? s_dealer (endpoint, broker_cert, probe_cert) : NULL;
        zsock_t *flood [16] = { NULL };
        size_t n = connections < 1 ? 1 : connections > 16 ? 16 : (size_t) connections;
        bool ok = probe != NULL || !probe_cert;
        for (size_t c = 0; ok && c < n; c++)
            ok = (flood [c] = s_dealer (endpoint, broker_cert, client_cert)) != NULL;
        int rc = ok ? s_run_sym (probe, flood, n, pin, (int) seconds, (size_t) hellos) : 2;
        for (size_t c = 0; c < n; c++)
            zsock_destroy (&flood [c]);
        zsock_destroy (&probe);
        return rc;
    }
    zsock_t *probe = s_dealer (endpoint, broker_cert, client_cert);
    zsock_t *flood = probe ? s_dealer (endpoint, broker_cert, client_cert) : NULL;
    int rc = flood ? s_run (probe, flood, (size_t) frames, (size_t) jobs, (size_t) hellos) : 2;
    zsock_destroy (&probe);
    zsock_destroy (&flood);
    return rc;
}
