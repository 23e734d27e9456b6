/*  cs-fuzz-frames — throws malformed frames at a running broker over a valid
 *  CURVE association, then checks that it still answers.
 *
 *  cs-fuzz-frames --endpoint E --broker-cert F --client-cert F
 *                 [--count N (10000)] [--seed S (time)] [--plain]
 *
 *  Frames: random bytes, truncations and bit-flips of a valid encoded
 *  Request, oversized frames (over CS_WIRE_MAX_MESSAGE: the broker drops the
 *  connection, the DEALER reconnects), multi-frame messages.  Replies are
 *  drained, never awaited.  Then one valid HelloJob request must get a valid
 *  reply within 5 s.  Exit 0 when it does, 1 when not, 2 on bad usage.
 */
#include <getopt.h>
#include <czmq.h>
#include <p11-kit/pkcs11.h>
#include "cs_wire.h"

#define S_FINAL_ID UINT64_C (0x5eed0f1a1)
#define S_FINAL_WAIT_MS 5000

typedef struct {
    zsock_t *dealer;
    unsigned long sent [5];         /* random, truncated, flipped, oversized, multipart */
    unsigned long replies;
    unsigned long bad_replies;
} s_fuzz_t;

/*  A valid request: hello, list-keys, sign, decrypt (no login: PBKDF2 would
 *  make the run slow).  Caller frees the returned buffer.  */
static uint8_t *
s_valid_request (size_t *size_p)
{
    static uint8_t digest [51], ct [256], key_id [] = { 1 };
    Cs__HelloJob hello = CS__HELLO_JOB__INIT;
    Cs__ListKeysJob list = CS__LIST_KEYS_JOB__INIT;
    Cs__Mechanism mech = CS__MECHANISM__INIT;
    Cs__SignJob sign = CS__SIGN_JOB__INIT;
    Cs__DecryptJob decrypt = CS__DECRYPT_JOB__INIT;
    Cs__Job jobs [4] = { CS__JOB__INIT, CS__JOB__INIT, CS__JOB__INIT, CS__JOB__INIT };
    Cs__Job *job_ptrs [4] = { &jobs [0], &jobs [1], &jobs [2], &jobs [3] };
    Cs__Request req = CS__REQUEST__INIT;
    mech.type = CKM_RSA_PKCS;
    sign.key_id = (ProtobufCBinaryData) { 1, key_id };
    sign.mechanism = &mech;
    sign.data = (ProtobufCBinaryData) { sizeof digest, digest };
    decrypt.key_id = sign.key_id;
    decrypt.mechanism = &mech;
    decrypt.data = (ProtobufCBinaryData) { sizeof ct, ct };
    jobs [0].kind_case = CS__JOB__KIND_HELLO; jobs [0].hello = &hello;
    jobs [1].kind_case = CS__JOB__KIND_LIST_KEYS; jobs [1].list_keys = &list;
    jobs [2].kind_case = CS__JOB__KIND_SIGN; jobs [2].sign = &sign;
    jobs [3].kind_case = CS__JOB__KIND_DECRYPT; jobs [3].decrypt = &decrypt;
    req.version_min = CS_PROTOCOL_VERSION_MIN;
    req.version_max = CS_PROTOCOL_VERSION;
    req.request_id = 1;
    req.deadline_ms = 1000;
    req.n_jobs = 4;
    req.jobs = job_ptrs;
    return cs_wire_encode (&req.base, size_p);
}

/*  Reads every reply already waiting; counts valid and invalid ones.  */
static void
s_drain (s_fuzz_t *self, int wait_ms)
{
    zpoller_t *poller = zpoller_new (self->dealer, NULL);
    while (zpoller_wait (poller, wait_ms) == self->dealer) {
        zmsg_t *msg = zmsg_recv (self->dealer);
        zframe_t *frame = msg ? zmsg_first (msg) : NULL;
        Cs__Reply *reply = frame ? cs_wire_reply_decode (zframe_data (frame), zframe_size (frame), NULL) : NULL;
        if (reply)
            self->replies++;
        else
            self->bad_replies++;
        if (reply)
            cs__reply__free_unpacked (reply, NULL);
        zmsg_destroy (&msg);
    }
    zpoller_destroy (&poller);
}

/*  Sends one frame (more = another frame follows) without blocking forever:
 *  at the high-water mark, drains replies and retries.  */
static void
s_send (s_fuzz_t *self, const void *data, size_t size, bool more)
{
    void *handle = zsock_resolve (self->dealer);
    int flags = ZMQ_DONTWAIT | (more ? ZMQ_SNDMORE : 0);
    for (int tries = 0; tries < 1000; tries++) {
        if (zmq_send (handle, data, size, flags) >= 0 || zmq_errno () != EAGAIN)
            return;
        s_drain (self, 10);
    }
}

static void
s_random_bytes (uint8_t *buf, size_t len)
{
    for (size_t i = 0; i < len; i++)
        buf [i] = (uint8_t) random ();
}

/*  Sends one fuzzed message of kind (0..4) derived from the valid request.  */
static void
s_fuzz_one (s_fuzz_t *self, int kind, const uint8_t *valid, size_t valid_size)
{
    static uint8_t buf [CS_WIRE_MAX_MESSAGE + 64];
    size_t len = 0;
    switch (kind) {
        case 0:                                 /* random bytes */
            len = (size_t) random () % 600;
            s_random_bytes (buf, len);
            break;
        case 1:                                 /* truncation */
            len = (size_t) random () % valid_size;
            memcpy (buf, valid, len);
            break;
        case 2:                                 /* bit flips */
            memcpy (buf, valid, valid_size);
            len = valid_size;
            for (int flips = 1 + (int) (random () % 8); flips > 0; flips--)
                buf [(size_t) random () % len] ^= (uint8_t) (1u << (random () % 8));
            break;
        case 3:                                 /* oversized */
            len = CS_WIRE_MAX_MESSAGE + 1 + (size_t) random () % 32;
            memset (buf, 0x0a, len);
            break;
        default:                                /* multi-frame */
            s_send (self, valid, valid_size, true);
            len = (size_t) random () % 64;
            s_random_bytes (buf, len);
            if (random () % 2)
                s_send (self, buf, len, true);
    }
    s_send (self, buf, len, false);
    self->sent [kind]++;
}

/*  Sends a valid HelloJob and waits for its valid reply.  It goes over a
 *  fresh association: an oversized frame near the end makes the broker drop
 *  the old connection, and whatever followed it in the stream is lost.  */
static bool
s_final_hello (zsock_t *dealer)
{
    Cs__HelloJob hello = CS__HELLO_JOB__INIT;
    Cs__Job job = CS__JOB__INIT, *jobs [1] = { &job };
    Cs__Request req = CS__REQUEST__INIT;
    job.kind_case = CS__JOB__KIND_HELLO;
    job.hello = &hello;
    req.version_min = CS_PROTOCOL_VERSION_MIN;
    req.version_max = CS_PROTOCOL_VERSION;
    req.request_id = S_FINAL_ID;
    req.n_jobs = 1;
    req.jobs = jobs;
    size_t size = 0;
    uint8_t *data = cs_wire_encode (&req.base, &size);
    zframe_t *frame = zframe_new (data, size);
    free (data);
    zframe_send (&frame, dealer, 0);
    zpoller_t *poller = zpoller_new (dealer, NULL);
    int64_t end = zclock_mono () + S_FINAL_WAIT_MS;
    bool ok = false;
    while (!ok && zclock_mono () < end && zpoller_wait (poller, (int) (end - zclock_mono ())) == dealer) {
        zframe_t *reply_frame = zframe_recv (dealer);
        Cs__Reply *reply = reply_frame
            ? cs_wire_reply_decode (zframe_data (reply_frame), zframe_size (reply_frame), NULL) : NULL;
        ok = reply && reply->request_id == S_FINAL_ID && reply->rv == CKR_OK && reply->n_results == 1
          && reply->results [0]->rv == CKR_OK && reply->results [0]->kind_case == CS__RESULT__KIND_HELLO;
        if (reply)
            cs__reply__free_unpacked (reply, NULL);
        zframe_destroy (&reply_frame);
    }
    zpoller_destroy (&poller);
    return ok;
}

/*  Builds the DEALER: CURVE client with the pinned broker key, or plaintext.  */
static zsock_t *
s_dealer (const char *endpoint, const char *broker_cert, const char *client_cert, bool plain)
{
    zsock_t *dealer = zsock_new (ZMQ_DEALER);
    if (!dealer)
        return NULL;
    zsock_set_linger (dealer, 0);
    zsock_set_sndhwm (dealer, 10000);
    if (!plain) {
        zcert_t *broker = zcert_load (broker_cert), *client = zcert_load (client_cert);
        if (!broker || !client) {
            fprintf (stderr, "cs-fuzz-frames: cannot load %s\n", broker ? client_cert : broker_cert);
            zcert_destroy (&broker);
            zcert_destroy (&client);
            zsock_destroy (&dealer);
            return NULL;
        }
        zcert_apply (client, dealer);
        zsock_set_curve_serverkey (dealer, zcert_public_txt (broker));
        zcert_destroy (&broker);
        zcert_destroy (&client);
    }
    if (zsock_connect (dealer, "%s", endpoint)) {
        fprintf (stderr, "cs-fuzz-frames: cannot connect to %s\n", endpoint);
        zsock_destroy (&dealer);
    }
    return dealer;
}

static void
s_usage (void)
{
    fprintf (stderr, "usage: cs-fuzz-frames --endpoint E --broker-cert F --client-cert F "
             "[--count N] [--seed S] [--plain]\n");
}

int
main (int argc, char **argv)
{
    static const struct option options [] = {
        { "endpoint", required_argument, NULL, 'e' }, { "broker-cert", required_argument, NULL, 'b' },
        { "client-cert", required_argument, NULL, 'c' }, { "count", required_argument, NULL, 'n' },
        { "seed", required_argument, NULL, 's' }, { "plain", no_argument, NULL, 'p' },
        { NULL, 0, NULL, 0 }
    };
    const char *endpoint = NULL, *broker_cert = NULL, *client_cert = NULL;
    long count = 10000;
    unsigned seed = (unsigned) time (NULL);
    bool plain = false;
    int opt;
    while ((opt = getopt_long (argc, argv, "e:b:c:n:s:p", options, NULL)) != -1)
        switch (opt) {
            case 'e': endpoint = optarg; break;
            case 'b': broker_cert = optarg; break;
            case 'c': client_cert = optarg; break;
            case 'n': count = atol (optarg); break;
            case 's': seed = (unsigned) strtoul (optarg, NULL, 0); break;
            case 'p': plain = true; break;
            default: s_usage (); return 2;
        }
    if (!endpoint || (!plain && (!broker_cert || !client_cert)) || count < 0) {
        s_usage ();
        return 2;
    }
    zsys_init ();
    srandom (seed);
    s_fuzz_t self = { .dealer = s_dealer (endpoint, broker_cert, client_cert, plain) };
    if (!self.dealer)
        return 2;
    size_t valid_size = 0;
    uint8_t *valid = s_valid_request (&valid_size);
    for (long i = 0; i < count; i++) {
        int pick = (int) (random () % 4);             /* 0..2 as is, 3 = multi-frame */
        int kind = i % 997 == 996 ? 3 : pick == 3 ? 4 : pick;   /* oversized: rare, 1 MiB each */
        s_fuzz_one (&self, kind, valid, valid_size);
        if (i % 64 == 0)
            s_drain (&self, 0);
    }
    s_drain (&self, 200);
    zsock_t *fresh = s_dealer (endpoint, broker_cert, client_cert, plain);
    bool ok = fresh && s_final_hello (fresh);
    zsock_destroy (&fresh);
    printf ("cs-fuzz-frames: seed=%u sent=%ld (random=%lu truncated=%lu flipped=%lu oversized=%lu "
            "multipart=%lu) replies=%lu bad-replies=%lu final-hello=%s\n", seed, count,
            self.sent [0], self.sent [1], self.sent [2], self.sent [3], self.sent [4],
            self.replies, self.bad_replies, ok ? "ok" : "FAILED");
    free (valid);
    zsock_destroy (&self.dealer);
    return ok ? 0 : 1;
}
