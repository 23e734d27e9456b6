/*  cs-fuzz-frames — throws malformed frames at a running broker over a valid
 *  CURVE association and checks every reply it gets back.
 *
 *  cs-fuzz-frames --endpoint E --broker-cert F --client-cert F [--pin PIN]
 *                 [--count N (10000)] [--seed S (time)] [--time-limit SEC (40)]
 *                 [--plain]
 *
 *  With --pin it first logs in as CKU_USER (a LoginJob, as the module does
 *  for C_Login) and keeps the ticket.  Each message then starts as a valid
 *  request of 1..4 random jobs (hello, list-keys, sign, decrypt, derive,
 *  generate, import, destroy, set-attributes, copy, init-PIN; the keys are
 *  the demo deployment's board:01 and board:03) on one of three paths: the
 *  real ticket, no ticket, or a corrupted ticket (a bit flipped, a byte
 *  short or long, the SO type byte, random bytes).  It is then sent intact,
 *  or as random bytes, a truncation, bit flips, several frames, or replaced
 *  by an oversized frame (over CS_WIRE_MAX_MESSAGE; those go over a second
 *  association, since the broker drops the connection).
 *
 *  The fuzzer decodes every frame it sends with the broker's own codec, so
 *  it knows the answer the broker owes.  It fails (exit 1) when:
 *   - a reply is not one frame that decodes (cs_wire_reply_decode) with the
 *     broker's protocol version and the request id of a message in flight;
 *     a request that decodes must get rv CKR_OK and one result per job (a
 *     CKR_OK result has its job's kind; with per_job_replies, protocol 2,
 *     one reply per job naming it), anything else a request-level error
 *     and no results ("bad");
 *   - a job that needs a login (docs/CONTRACTS.md "Login tickets": sign,
 *     decrypt, derive and secret-key jobs naming a server-held key, a token
 *     key-pair generation, import, secret-key generation, destroy,
 *     set-attributes, copy, modexp, put-object and destroy-object need the
 *     CKU_USER ticket, init-PIN a CKU_SO ticket) is answered CKR_OK in a
 *     request whose ticket is not byte-identical to the real one; a public
 *     job (sign, decrypt, derive or secret-key job carrying its key, a
 *     session key-pair generation) needs none but is answered CKR_OK with a
 *     ticket sent that is not the real one; the fuzzer holds no SO ticket
 *     and sends no PIN, so init-PIN, login and set-PIN are never CKR_OK
 *     either ("violations").  Such a job refused with anything but
 *     CKR_USER_NOT_LOGGED_IN (the contract's code) is bad;
 *   - a job of an intact message (known-good parts) fails where it must
 *     succeed: hello and list-keys, and with the real ticket sign and
 *     generate, so the logged-in path really reaches the boards ("bad");
 *   - a message sent on the main association gets no reply (broker stalled
 *     or dropped it: "lost"), or under 90% of the N messages could be sent;
 *   - a HelloJob on a fresh association gets no valid reply within 5 s.
 *  Messages whose jobs the broker would check against a PIN (login or
 *  set-PIN as user or SO) are never sent: five wrong PINs lock the tenant.
 *  A message whose request id (mutations change it) is that of a message
 *  in flight waits for that one's reply, unless both are owed a plain
 *  error: else the fuzzer could not tell which one a reply answers.
 *  A seed gives the same messages on every run; each failure shown also
 *  prints the message in hex.
 *
 *  Prints one line "cs-fuzz-frames: summary seed=S requested=N sent=N
 *  dropped=N oversized=N replies=N lost=N ok=N errors=N refused=N
 *  authed-ok=N bad=N violations=N final-hello=ok|FAILED" (fuzz.sh checks
 *  it): sent = messages a socket accepted, dropped = given up after
 *  S_SEND_WAIT_MS, ok/errors = replies with rv CKR_OK / a request-level
 *  error, refused = login-only jobs without the real ticket answered
 *  CKR_USER_NOT_LOGGED_IN, authed-ok = login-only jobs with the real ticket
 *  answered CKR_OK.  Exit 0 when every check holds, 1 when one fails, 2 on
 *  bad usage or when the fuzzer cannot start.
 *
 *  This file sends (the mutations, login, the final hello, main);
 *  frames_requests.c builds the valid requests, frames_replies.c predicts
 *  and checks the answers (frames.h).
 */
#include <getopt.h>
#include <inttypes.h>
#include <czmq.h>
#include <p11-kit/pkcs11.h>
#include "frames.h"

#define S_SEND_WAIT_MS 2000         /* a message not taken by the socket in this long is dropped */
#define S_STALL_MS 15000            /* no reply this long: stalled (> default deadline 10 s) */
#define S_CALL_WAIT_MS 10000        /* login reply */
#define S_FINAL_WAIT_MS 5000        /* final hello reply */
#define S_LOGIN_ID UINT64_C (0x5eed0f1a0)
#define S_FINAL_ID UINT64_C (0x5eed0f1a1)
#define S_MIN_SENT_PERCENT 90

/* ------------------------------------------------------------------ */
/*  Sending                                                            */

/*  Sends a message of n frames on sock without blocking: while the socket
 *  cannot take a frame, reads replies and retries, for S_SEND_WAIT_MS at
 *  most.  Returns true when every frame went out.  (ZeroMQ checks the
 *  high-water mark on a message's first frame only: the rest never wait.)  */
static bool
s_send (frames_t *self, zsock_t *sock, uint8_t *const *data, const size_t *size, size_t n)
{
    void *handle = zsock_resolve (sock);
    int64_t end = zclock_mono () + S_SEND_WAIT_MS;
    for (size_t i = 0; i < n; i++) {
        int flags = ZMQ_DONTWAIT | (i + 1 < n ? ZMQ_SNDMORE : 0);
        while (zmq_send (handle, data [i], size [i], flags) < 0) {
            if (zmq_errno () != EAGAIN || zclock_mono () > end)
                return false;
            frames_receive (self, 10);
        }
    }
    return true;
}

/*  Builds a one-frame message of kind from valid into buf; returns its
 *  length.  */
static size_t
s_mutate (frames_kind_t kind, const uint8_t *valid, size_t valid_size, uint8_t *buf)
{
    size_t len = valid_size;
    switch (kind) {
        case S_RANDOM:
            len = (size_t) frames_random () % 600;
            frames_random_bytes (buf, len);
            break;
        case S_TRUNCATED:
            len = (size_t) frames_random () % valid_size;
            memcpy (buf, valid, len);
            break;
        case S_FLIPPED:
            memcpy (buf, valid, valid_size);
            for (int flips = 1 + (int) (frames_random () % 8); flips > 0; flips--)
                buf [(size_t) frames_random () % len] ^= (uint8_t) (1u << (frames_random () % 8));
            break;
        default:                                /* intact */
            memcpy (buf, valid, valid_size);
    }
    return len;
}

/*  Sends one oversized frame on the second association (the broker drops
 *  the connection: no reply).  */
static void
s_fuzz_oversized (frames_t *self, uint8_t *buf)
{
    size_t len = CS_WIRE_MAX_MESSAGE + 1 + (size_t) frames_random () % 32;
    memset (buf, 0x0a, len);
    if (s_send (self, self->oversized, &buf, &len, 1))
        self->sent [S_OVERSIZED]++;
    else
        self->dropped++;
}

/*  Builds, predicts and sends one message of kind on path (seq: its
 *  number); records the answer owed.  */
static void
s_fuzz_one (frames_t *self, frames_kind_t kind, frames_path_t path, long seq)
{
    static uint8_t buf [CS_WIRE_MAX_MESSAGE + 64], extra [2][64];
    if (kind == S_OVERSIZED) {
        s_fuzz_oversized (self, buf);
        return;
    }
    frames_expect_t expect;
    uint8_t *frames [3] = { buf, extra [0], extra [1] };
    size_t sizes [3], n = 1;
    for (int tries = 0; ; tries++) {
        size_t valid_size = 0;
        uint8_t *valid = frames_valid_request (self, path, &valid_size);
        assert (valid);
        sizes [0] = s_mutate (kind == S_MULTIPART ? (frames_random () % 2 ? S_INTACT : S_FLIPPED) : kind,
                              valid, valid_size, buf);
        free (valid);
        expect = (frames_expect_t) { .path = path, .kind = kind, .seq = seq,
                                .version = CS_PROTOCOL_VERSION_MIN };     /* multipart: an error */
        if (kind == S_MULTIPART)
            expect.id = frames_peek_id (buf, sizes [0]);
        if (kind == S_MULTIPART || frames_predict (self, buf, sizes [0], &expect))
            break;
        frames_expect_free (&expect);           /* a PIN check: build another */
        self->withheld++;
        assert (tries < 1000);
    }
    /*  A request id in flight: first the reply to that message.  Waiting
        draws no random numbers, so a seed gives the same messages.  */
    if (frames_ambiguous (self, &expect))
        self->id_waits++;
    while (frames_ambiguous (self, &expect))
        if (!frames_receive (self, S_STALL_MS)) {
            frames_expect_free (&expect);
            self->dropped++;
            return;
        }
    expect.frame = malloc (sizes [0] ? sizes [0] : 1);
    assert (expect.frame);
    memcpy (expect.frame, buf, sizes [0]);
    expect.frame_size = sizes [0];
    if (kind == S_MULTIPART) {
        n = 2 + (size_t) frames_random () % 2;
        for (size_t i = 1; i < n; i++) {
            sizes [i] = (size_t) frames_random () % 64;
            frames_random_bytes (frames [i], sizes [i]);
        }
    }
    if (!s_send (self, self->dealer, frames, sizes, n)) {
        frames_expect_free (&expect);
        self->dropped++;
        return;
    }
    self->sent [kind]++;
    self->sent_path [path]++;
    self->expect [self->n_expect++] = expect;
}

/* ------------------------------------------------------------------ */
/*  Login, final hello                                                 */

/*  Sends req on dealer and waits up to wait_ms for the reply with its
 *  request id (other replies are skipped).  Returns the reply (caller frees
 *  with cs__reply__free_unpacked) or NULL.  */
static Cs__Reply *
s_call (zsock_t *dealer, Cs__Request *req, int wait_ms)
{
    size_t size = 0;
    uint8_t *data = cs_wire_encode (&req->base, &size);
    zframe_t *frame = data ? zframe_new (data, size) : NULL;
    free (data);
    if (!frame || zframe_send (&frame, dealer, 0)) {
        zframe_destroy (&frame);
        return NULL;
    }
    zpoller_t *poller = zpoller_new (dealer, NULL);
    int64_t end = zclock_mono () + wait_ms;
    Cs__Reply *reply = NULL;
    while (!reply && zclock_mono () < end && zpoller_wait (poller, (int) (end - zclock_mono ())) == dealer) {
        zframe_t *reply_frame = zframe_recv (dealer);
        reply = reply_frame
              ? cs_wire_reply_decode (zframe_data (reply_frame), zframe_size (reply_frame), NULL) : NULL;
        if (reply && reply->request_id != req->request_id)
            cs__reply__free_unpacked (reply, NULL), reply = NULL;
        zframe_destroy (&reply_frame);
    }
    zpoller_destroy (&poller);
    return reply;
}

/*  A request of one job with request id id and no ticket.  */
static void
s_one_job_request (Cs__Request *req, Cs__Job **jobs, uint64_t id)
{
    cs__request__init (req);
    req->version_min = CS_PROTOCOL_VERSION_MIN;
    req->version_max = CS_PROTOCOL_VERSION;
    req->request_id = id;
    req->n_jobs = 1;
    req->jobs = jobs;
}

/*  Logs in as CKU_USER with pin on the main association, as the module's
 *  C_Login does (pkcs11-module/token.c), and keeps the ticket.  Returns
 *  false (after saying why) when there is no ticket.  */
static bool
s_login (frames_t *self, const char *pin)
{
    Cs__LoginJob login = CS__LOGIN_JOB__INIT;
    Cs__Job job = CS__JOB__INIT, *jobs [1] = { &job };
    Cs__Request req;
    login.user_type = CKU_USER;
    login.pin = (ProtobufCBinaryData) { strlen (pin), (uint8_t *) pin };
    job.kind_case = CS__JOB__KIND_LOGIN;
    job.login = &login;
    s_one_job_request (&req, jobs, S_LOGIN_ID);
    Cs__Reply *reply = s_call (self->dealer, &req, S_CALL_WAIT_MS);
    const Cs__Result *result = reply && reply->rv == CKR_OK && reply->n_results == 1 ? reply->results [0] : NULL;
    self->logged_in = result && result->rv == CKR_OK && result->kind_case == CS__RESULT__KIND_LOGIN
                   && result->login && result->login->ticket.len == TICKET_LEN;
    if (self->logged_in)
        memcpy (self->ticket, result->login->ticket.data, TICKET_LEN);
    else
        fprintf (stderr, "cs-fuzz-frames: login as user failed: %s\n", !reply ? "no reply"
                 : reply->rv != CKR_OK ? cs_rv_name (reply->rv)
                 : result ? cs_rv_name (result->rv) : "malformed reply");
    if (reply)
        cs__reply__free_unpacked (reply, NULL);
    return self->logged_in;
}

/*  Sends a valid HelloJob and waits for its valid reply.  It goes over a
 *  fresh association, so an association the fuzzing broke proves nothing.  */
static bool
s_final_hello (zsock_t *dealer)
{
    Cs__HelloJob hello = CS__HELLO_JOB__INIT;
    Cs__Job job = CS__JOB__INIT, *jobs [1] = { &job };
    Cs__Request req;
    job.kind_case = CS__JOB__KIND_HELLO;
    job.hello = &hello;
    s_one_job_request (&req, jobs, S_FINAL_ID);
    Cs__Reply *reply = s_call (dealer, &req, S_FINAL_WAIT_MS);
    bool ok = reply && reply->rv == CKR_OK && reply->n_results == 1 && reply->results [0]->rv == CKR_OK
           && reply->results [0]->kind_case == CS__RESULT__KIND_HELLO;
    if (reply)
        cs__reply__free_unpacked (reply, NULL);
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

/* ------------------------------------------------------------------ */
/*  Main                                                               */

/*  The kind of message seq: oversized every 997th (1 MiB each), else
 *  random (2/9), truncated (2/9), flipped (3/9), multipart or intact (1/9).  */
static frames_kind_t
s_pick_kind (long seq)
{
    static const frames_kind_t kinds [9] = {
        S_RANDOM, S_RANDOM, S_TRUNCATED, S_TRUNCATED, S_FLIPPED, S_FLIPPED, S_FLIPPED, S_MULTIPART, S_INTACT
    };
    return seq % 997 == 996 ? S_OVERSIZED : kinds [frames_random () % 9];
}

/*  The path of the next message: with a ticket, real 1/2, none 1/5,
 *  corrupted 3/10; without, none or random bytes.  */
static frames_path_t
s_pick_path (const frames_t *self)
{
    long r = frames_random () % 10;
    if (!self->logged_in)
        return r < 6 ? S_TICKET_NONE : S_TICKET_CORRUPT;
    return r < 5 ? S_TICKET_REAL : r < 7 ? S_TICKET_NONE : S_TICKET_CORRUPT;
}

/*  Sends count messages (or as many as fit in time_limit_ms), keeping at
 *  most FRAMES_WINDOW in flight, then waits for the last replies.  Stops when
 *  no reply comes for S_STALL_MS: what is in flight then is lost.  */
static void
s_run (frames_t *self, long count, int64_t time_limit_ms)
{
    int64_t end = zclock_mono () + time_limit_ms;
    bool stalled = false;
    for (long seq = 0; seq < count && !stalled && zclock_mono () < end; seq++) {
        frames_kind_t kind = s_pick_kind (seq);
        s_fuzz_one (self, kind, s_pick_path (self), seq);
        while (self->n_expect >= FRAMES_WINDOW && !stalled)
            stalled = !frames_receive (self, S_STALL_MS);
        while (frames_receive (self, 0))
            ;
    }
    while (self->n_expect > 0 && !stalled)
        stalled = !frames_receive (self, S_STALL_MS);
}

static void
s_usage (void)
{
    fprintf (stderr, "usage: cs-fuzz-frames --endpoint E --broker-cert F --client-cert F [--pin PIN] "
             "[--count N] [--seed S] [--time-limit SEC] [--plain]\n");
}

int
main (int argc, char **argv)
{
    static const struct option options [] = {
        { "endpoint", required_argument, NULL, 'e' }, { "broker-cert", required_argument, NULL, 'b' },
        { "client-cert", required_argument, NULL, 'c' }, { "count", required_argument, NULL, 'n' },
        { "seed", required_argument, NULL, 's' }, { "plain", no_argument, NULL, 'p' },
        { "pin", required_argument, NULL, 'P' }, { "time-limit", required_argument, NULL, 't' },
        { NULL, 0, NULL, 0 }
    };
    const char *endpoint = NULL, *broker_cert = NULL, *client_cert = NULL, *pin = NULL;
    long count = 10000, time_limit = 40;
    unsigned seed = (unsigned) time (NULL);
    bool plain = false;
    int opt;
    while ((opt = getopt_long (argc, argv, "e:b:c:n:s:pP:t:", options, NULL)) != -1)
        switch (opt) {
            case 'e': endpoint = optarg; break;
            case 'b': broker_cert = optarg; break;
            case 'c': client_cert = optarg; break;
            case 'n': count = atol (optarg); break;
            case 's': seed = (unsigned) strtoul (optarg, NULL, 0); break;
            case 'p': plain = true; break;
            case 'P': pin = optarg; break;
            case 't': time_limit = atol (optarg); break;
            default: s_usage (); return 2;
        }
    if (!endpoint || (!plain && (!broker_cert || !client_cert)) || count < 0 || time_limit <= 0) {
        s_usage ();
        return 2;
    }
    zsys_init ();
    frames_seed (seed);
    static frames_t self;
    self.dealer = s_dealer (endpoint, broker_cert, client_cert, plain);
    self.oversized = s_dealer (endpoint, broker_cert, client_cert, plain);
    self.poller = self.dealer ? zpoller_new (self.dealer, NULL) : NULL;
    if (!self.dealer || !self.oversized || !self.poller)
        return 2;
    bool ok = !pin || s_login (&self, pin);
    if (ok)
        s_run (&self, count, time_limit * 1000);
    unsigned long sent = 0, lost = self.n_expect;
    for (int kind = 0; kind < S_KINDS; kind++)
        sent += self.sent [kind];
    zsock_t *fresh = s_dealer (endpoint, broker_cert, client_cert, plain);
    bool hello = fresh && s_final_hello (fresh);
    zsock_destroy (&fresh);
    printf ("cs-fuzz-frames: seed=%u login=%s kinds: random=%lu truncated=%lu flipped=%lu oversized=%lu "
            "multipart=%lu intact=%lu; paths: real-ticket=%lu no-ticket=%lu corrupt-ticket=%lu; "
            "withheld (PIN checks)=%lu, waits for a request id in flight=%lu\n", seed, self.logged_in ? "user" : "none",
            self.sent [S_RANDOM], self.sent [S_TRUNCATED], self.sent [S_FLIPPED], self.sent [S_OVERSIZED],
            self.sent [S_MULTIPART], self.sent [S_INTACT], self.sent_path [S_TICKET_REAL],
            self.sent_path [S_TICKET_NONE], self.sent_path [S_TICKET_CORRUPT], self.withheld,
            self.id_waits);
    printf ("cs-fuzz-frames: summary seed=%u requested=%ld sent=%lu dropped=%lu oversized=%lu replies=%lu "
            "lost=%lu ok=%lu errors=%lu refused=%lu authed-ok=%lu bad=%lu violations=%lu final-hello=%s\n",
            seed, count, sent, self.dropped, self.sent [S_OVERSIZED], self.replies, lost, self.ok,
            self.errors, self.refused, self.authed_ok, self.bad, self.violations, hello ? "ok" : "FAILED");
    if (self.bad)
        fprintf (stderr, "cs-fuzz-frames: FAIL: %lu bad replies\n", self.bad);
    if (self.violations)
        fprintf (stderr, "cs-fuzz-frames: FAIL: %lu login-only jobs answered CKR_OK without the real "
                 "ticket\n", self.violations);
    if (lost)
        fprintf (stderr, "cs-fuzz-frames: FAIL: %lu messages got no reply within %d ms\n", lost, S_STALL_MS);
    if (sent * 100 < (unsigned long) count * S_MIN_SENT_PERCENT)
        fprintf (stderr, "cs-fuzz-frames: FAIL: only %lu of %ld messages sent\n", sent, count);
    if (!hello)
        fprintf (stderr, "cs-fuzz-frames: FAIL: no valid reply to a hello on a fresh association\n");
    ok = ok && !self.bad && !self.violations && !lost && hello
      && sent * 100 >= (unsigned long) count * S_MIN_SENT_PERCENT;
    for (size_t i = 0; i < self.n_expect; i++)
        frames_expect_free (&self.expect [i]);
    zpoller_destroy (&self.poller);
    zsock_destroy (&self.oversized);
    zsock_destroy (&self.dealer);
    return ok ? 0 : 1;
}
