/*  fuzz_frontend.c — libFuzzer target over the broker's request path
 *  without sockets (frontend_core_new, broker/frontend/frontend.h): a real keystore
 *  (tenant demo), one sim board with no latency holding board:01, and
 *  whole request frames in, replies out (docs/FUZZING.md).
 *
 *  Input: one or more frames, each a 2-byte big-endian length and that many
 *  bytes; what is left when a length runs past the end is the last frame
 *  (at most S_MAX_FRAMES).  Every occurrence of the 50 bytes of
 *  S_PLACEHOLDER in a frame is replaced by the real CKU_USER ticket of
 *  tenant demo, logged in once at start: the seed corpus carries it in
 *  place of a ticket, which expires and is MAC'd under a per-run key.
 *
 *  Each frame is checked as cs-fuzz-frames checks a running broker's
 *  replies (tests/fuzz/cs-fuzz-frames.c); the input aborts (a crash for
 *  libFuzzer) when:
 *   - the core has not answered it within S_SETTLE_MS;
 *   - it got no reply, or more than one (one per job with per_job_replies
 *     at protocol 2), or a reply that does not decode, or one with another
 *     request id (the frame's, as protobuf finds it; 0 when it has none) or
 *     protocol version than the broker owes;
 *   - a frame that decodes (cs_wire_request_decode) got a request-level
 *     error, or results not one per job, or a CKR_OK result of another kind
 *     than its job's; a frame that does not decode got CKR_OK or results;
 *   - a job that needs a CKU_USER ticket (docs/CONTRACTS.md "Login tickets")
 *     was answered CKR_OK, or anything but CKR_USER_NOT_LOGGED_IN, in a
 *     request whose ticket is not byte-identical to the real one; an
 *     init-PIN job (needs an SO ticket; the target has none) was answered
 *     CKR_OK; a key or object list with a ticket that is not the real one
 *     was answered anything but CKR_USER_NOT_LOGGED_IN.
 *  Frames with a job the broker checks against a PIN (login or set-PIN as
 *  CKU_USER or CKU_SO) are not sent: wrong PINs would lock the tenant and
 *  end the ticket, and each costs a key derivation.  CS_FUZZ_VERBOSE=1
 *  shows the broker's log lines, CS_FUZZ_TRACE=1 each job's CK_RV.
 */
#include <czmq.h>
#include <p11-kit/pkcs11.h>
#include "board.h"
#include "broker_config.h"
#include "cs_wire.h"
#include "frontend.h"
#include "fuzz_setup.h"
#include "health.h"
#include "ticket.h"
#include "fuzz_needs.h"

#define S_MAX_FRAMES 8
#define S_SETTLE_MS 10000
#define S_PEER "fuzz-client"

/*  Stands for the real ticket in inputs (TICKET_LEN bytes).  */
static const uint8_t S_PLACEHOLDER [TICKET_LEN] = "\x02\x01" "cs-fuzz: the real CKU_USER ticket goes here....";


static struct {
    char *dir;
    broker_config_t *config;
    board_t *board;
    keystore_t *keystore;
    health_t *health;
    frontend_args_t args;
    frontend_core_t *core;
    uint8_t ticket [TICKET_LEN];
    Cs__Reply **replies;            /* the replies of the frame being checked (decoded; NULL: did not) */
    size_t n_replies, max_replies;
    bool trace;                     /* CS_FUZZ_TRACE: print each job's CK_RV */
} s_fz;

/*  The answer the broker owes to one frame.  */
typedef struct {
    uint64_t id;
    uint32_t version;
    bool results;                   /* rv CKR_OK and one result per job; else a request-level error */
    bool ticket_ok, ticket_sent;
    bool per_job;
    size_t n_jobs;
    int kinds [64];                 /* Cs__Job__KindCase of the first 64 jobs */
    s_needs_t needs [64];           /* what each of them needs (s_needs) */
} s_expect_t;

static void
s_on_reply (void *arg, const void *peer, size_t peer_len, const uint8_t *reply, size_t size)
{
    (void) arg;
    if (peer_len != strlen (S_PEER) || memcmp (peer, S_PEER, peer_len) != 0)
        fz_fail ("a reply went to another peer");
    if (s_fz.n_replies == s_fz.max_replies) {
        s_fz.max_replies = s_fz.max_replies ? 2 * s_fz.max_replies : 16;
        s_fz.replies = realloc (s_fz.replies, s_fz.max_replies * sizeof *s_fz.replies);
        fz_setup_check (s_fz.replies != NULL, "realloc");
    }
    s_fz.replies [s_fz.n_replies++] = cs__reply__unpack (NULL, size, reply);
}

static void
s_replies_clear (void)
{
    for (size_t i = 0; i < s_fz.n_replies; i++)
        if (s_fz.replies [i])
            cs__reply__free_unpacked (s_fz.replies [i], NULL);
    s_fz.n_replies = 0;
}

/*  Logs in as CKU_USER of demo through the core and keeps the ticket.  */
static void
s_login (void)
{
    Cs__LoginJob login = CS__LOGIN_JOB__INIT;
    login.user_type = CKU_USER;
    login.pin = (ProtobufCBinaryData) { 4, (uint8_t *) "1234" };
    Cs__Job job = CS__JOB__INIT, *jobs [1] = { &job };
    job.kind_case = CS__JOB__KIND_LOGIN;
    job.login = &login;
    Cs__Request req = CS__REQUEST__INIT;
    req.version_min = CS_PROTOCOL_VERSION_MIN;
    req.version_max = CS_PROTOCOL_VERSION;
    req.request_id = 1;
    req.n_jobs = 1;
    req.jobs = jobs;
    size_t size = 0;
    uint8_t *data = cs_wire_encode (&req.base, &size);
    fz_setup_check (data != NULL, "encode login");
    frontend_core_handle (s_fz.core, S_PEER, strlen (S_PEER), data, size);
    free (data);
    fz_setup_check (frontend_core_settle (s_fz.core, S_SETTLE_MS) == 0 && s_fz.n_replies == 1
                    && s_fz.replies [0] && s_fz.replies [0]->n_results == 1
                    && s_fz.replies [0]->results [0]->rv == CKR_OK
                    && s_fz.replies [0]->results [0]->kind_case == CS__RESULT__KIND_LOGIN
                    && s_fz.replies [0]->results [0]->login->ticket.len == TICKET_LEN, "login");
    memcpy (s_fz.ticket, s_fz.replies [0]->results [0]->login->ticket.data, TICKET_LEN);
    s_replies_clear ();
}

static void
s_cleanup (void)
{
    frontend_core_destroy (&s_fz.core);
    s_replies_clear ();
    free (s_fz.replies);
    health_destroy (&s_fz.health);
    keystore_destroy (&s_fz.keystore);
    board_destroy (&s_fz.board);
    broker_config_destroy (&s_fz.config);
    if (s_fz.dir)
        fz_tmpdir_remove (s_fz.dir);
    free (s_fz.dir);
}

/*  The driver directory: CRYPTOSERVER_DRIVER_DIR, else the build tree's.  */
static const char *
s_driver_dir (void)
{
    const char *dir = getenv ("CRYPTOSERVER_DRIVER_DIR");
    return dir && *dir ? dir : CS_FUZZ_DRIVER_DIR;
}

int LLVMFuzzerInitialize (int *argc, char ***argv);
int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

int
LLVMFuzzerInitialize (int *argc, char ***argv)
{
    (void) argc;
    (void) argv;
    zsys_init ();
    zsys_set_logsystem (false);
    if (!getenv ("CS_FUZZ_VERBOSE"))
        zsys_set_logstream (fopen ("/dev/null", "w"));
    s_fz.trace = getenv ("CS_FUZZ_TRACE") != NULL;
    s_fz.dir = fz_tmpdir ();
    EVP_PKEY_free (fz_key_pem (s_fz.dir, "key.pem"));
    uint8_t master [KEYSTORE_MASTER_KEY_LEN];
    fz_keystore (s_fz.dir, master);
    fz_write (s_fz.dir, "broker.conf",
        "broker\n"
        "    endpoint = tcp://127.0.0.1:!\n"
        "    stats-interval-ms = 0\n"
        "    curve\n"
        "        enabled = false\n"
        "keystore\n"
        "    path = keystore.db\n"
        "    master-key = master.key\n"
        "drivers\n"
        "    sim0\n        type = sim\n        key-file = key.pem\n        key-id = 01\n"
        "        threads = 1\n        tenant = demo\n        latency-ms = 0\n");
    char path [4096], *error = NULL;
    snprintf (path, sizeof path, "%s/broker.conf", s_fz.dir);
    s_fz.config = broker_config_load (path, &error);
    if (!s_fz.config)
        fprintf (stderr, "fuzz setup: broker.conf: %s\n", error ? error : "?");
    fz_setup_check (s_fz.config && s_fz.config->n_boards == 1, "broker.conf");
    s_fz.board = board_new (&s_fz.config->boards [0], s_driver_dir (), s_fz.config->dir);
    fz_setup_check (s_fz.board != NULL, "board sim0 (CRYPTOSERVER_DRIVER_DIR)");
    s_fz.keystore = keystore_open (s_fz.config->keystore_path, master);
    OPENSSL_cleanse (master, sizeof master);
    fz_setup_check (s_fz.keystore != NULL, "keystore");
    s_fz.health = health_new (1, 1);
    fz_setup_check (s_fz.health != NULL, "health");
    s_fz.args = (frontend_args_t) { .config = s_fz.config, .boards = &s_fz.board, .n_boards = 1,
                                    .backend = "inproc://unused", .keystore = s_fz.keystore,
                                    .health = s_fz.health };
    s_fz.core = frontend_core_new (&s_fz.args, s_on_reply, NULL);
    fz_setup_check (s_fz.core != NULL, "frontend_core_new");
    s_login ();
    atexit (s_cleanup);
    return 0;
}

/*  The request id of a frame the broker cannot take, read as the broker
 *  reads it: from the frame's top-level fields, without decoding the rest
 *  (cs_wire_request_id; docs/CONTRACTS.md "Limits").  */
static uint64_t
s_peek_id (const uint8_t *data, size_t size)
{
    if (size == 0 || size > CS_WIRE_MAX_MESSAGE)
        return 0;
    return cs_wire_request_id (data, size);
}

/*  Fills expect for frame; false when it must not be sent.  */
static bool
s_predict (const uint8_t *data, size_t size, s_expect_t *expect)
{
    memset (expect, 0, sizeof *expect);
    expect->version = CS_PROTOCOL_VERSION_MIN;  /* request-level errors */
    Cs__Request *req = cs_wire_request_decode (data, size, NULL);
    if (!req) {
        expect->id = s_peek_id (data, size);
        return true;
    }
    bool send = true;
    for (size_t i = 0; i < req->n_jobs; i++)
        send = send && !s_checks_pin (req->jobs [i]);
    expect->id = req->request_id;
    uint32_t version = cs_wire_version_choose (req->version_min, req->version_max);
    if (!version)
        expect->version = CS_PROTOCOL_VERSION;  /* a mismatch: the broker's highest */
    else {
        expect->results = true;
        expect->version = version;
        expect->ticket_ok = req->ticket.len == TICKET_LEN && memcmp (req->ticket.data, s_fz.ticket, TICKET_LEN) == 0;
        expect->ticket_sent = req->ticket.len > 0;
        expect->per_job = req->per_job_replies && version >= CS_PROTOCOL_PER_JOB;
        expect->n_jobs = req->n_jobs;
        for (size_t i = 0; i < req->n_jobs && i < 64; i++) {
            expect->kinds [i] = req->jobs [i]->kind_case;
            expect->needs [i] = s_needs (req->jobs [i]);
        }
    }
    cs__request__free_unpacked (req, NULL);
    return send;
}

/*  Checks result i against what job i of expect is owed.  */
static void
s_check_result (const Cs__Result *result, const s_expect_t *expect, size_t i)
{
    if (i >= 64)
        return;
    int kind = expect->kinds [i];
    s_needs_t needs = expect->needs [i];
    int want = kind == CS__JOB__KIND_PUT_OBJECT ? CS__RESULT__KIND_OBJECT
             : kind == CS__JOB__KIND_LIST_OBJECTS ? CS__RESULT__KIND_OBJECTS
             : s_result_kind (kind);            /* -1: any (init-PIN, set-PIN, destroy-object, sym, ...) */
    if (result->rv == CKR_OK && want >= 0 && (int) result->kind_case != want)
        fz_fail ("job %zu (kind %d): a CKR_OK result of kind %d", i, kind, (int) result->kind_case);
    if ((kind == CS__JOB__KIND_LIST_KEYS || kind == CS__JOB__KIND_LIST_OBJECTS)
    &&  expect->ticket_sent && !expect->ticket_ok && result->rv != CKR_USER_NOT_LOGGED_IN)
        fz_fail ("job %zu (list, kind %d) with a ticket that is not the real one answered %s", i, kind,
                 cs_rv_name (result->rv));
    if (needs == S_NEEDS_NOTHING || ((needs == S_NEEDS_USER || needs == S_NEEDS_PUBLIC) && expect->ticket_ok)
    ||  (needs == S_NEEDS_PUBLIC && !expect->ticket_sent))
        return;
    if (result->rv == CKR_OK)
        fz_fail ("VIOLATION: job %zu (kind %d) answered CKR_OK without %s", i, kind,
                 needs == S_NEEDS_SO ? "an SO ticket" : "the real ticket");
    if ((needs == S_NEEDS_USER || needs == S_NEEDS_PUBLIC) && result->rv != CKR_USER_NOT_LOGGED_IN)
        fz_fail ("job %zu (kind %d) without its ticket refused with %s, not CKR_USER_NOT_LOGGED_IN", i, kind,
                 cs_rv_name (result->rv));
}

/*  Checks the replies the core gave to one frame.  */
static void
s_check_replies (const s_expect_t *expect)
{
    size_t owed = expect->results && expect->per_job ? expect->n_jobs : 1;
    if (s_fz.n_replies != owed)
        fz_fail ("%zu replies to a frame owed %zu", s_fz.n_replies, owed);
    uint8_t answered [4096] = { 0 };
    for (size_t r = 0; r < s_fz.n_replies; r++) {
        const Cs__Reply *reply = s_fz.replies [r];
        if (!reply)
            fz_fail ("a reply does not decode");
        if (reply->request_id != expect->id)
            fz_fail ("reply to request id %" PRIu64 " carries id %" PRIu64, expect->id, reply->request_id);
        if (reply->version != expect->version)
            fz_fail ("reply version %u, owed %u", reply->version, expect->version);
        if (!expect->results) {
            if (reply->rv == CKR_OK || reply->n_results != 0)
                fz_fail ("a frame the broker cannot take was answered CKR_OK or with results");
            continue;
        }
        if (s_fz.trace)
            for (size_t i = 0; i < reply->n_results; i++)
                fprintf (stderr, "fuzz: request %" PRIu64 " job %zu: %s\n", reply->request_id,
                         reply->job_number ? reply->job_number - 1 : i, cs_rv_name (reply->results [i]->rv));
        if (reply->rv != CKR_OK)
            fz_fail ("a request that decodes got a request-level error %s (%s)", cs_rv_name (reply->rv),
                     reply->error ? reply->error : "");
        if (expect->per_job) {
            size_t i = reply->job_number - 1;
            if (reply->job_number == 0 || i >= expect->n_jobs || reply->n_results != 1
            ||  (i < sizeof answered && answered [i]++))
                fz_fail ("a per-job reply names no job owed a reply (%u), or has not one result",
                         reply->job_number);
            s_check_result (reply->results [0], expect, i);
            continue;
        }
        if (reply->job_number)
            fz_fail ("a request without per_job_replies got a per-job reply");
        if (reply->n_results != expect->n_jobs)
            fz_fail ("%zu results for %zu jobs", reply->n_results, expect->n_jobs);
        for (size_t i = 0; i < reply->n_results; i++)
            s_check_result (reply->results [i], expect, i);
    }
}

/*  Sends one frame (the placeholder replaced) and checks its replies.  */
static void
s_frame (const uint8_t *data, size_t size)
{
    uint8_t *frame = malloc (size ? size : 1);
    fz_setup_check (frame != NULL, "malloc");
    memcpy (frame, data, size);
    for (size_t i = 0; i + TICKET_LEN <= size; i++)
        if (frame [i] == S_PLACEHOLDER [0] && memcmp (frame + i, S_PLACEHOLDER, TICKET_LEN) == 0)
            memcpy (frame + i, s_fz.ticket, TICKET_LEN);
    s_expect_t expect;
    if (s_predict (frame, size, &expect)) {
        s_replies_clear ();
        frontend_core_handle (s_fz.core, S_PEER, strlen (S_PEER), frame, size);
        if (frontend_core_settle (s_fz.core, S_SETTLE_MS) != 0)
            fz_fail ("the core did not answer within %d ms", S_SETTLE_MS);
        s_check_replies (&expect);
        s_replies_clear ();
    }
    free (frame);
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
    for (int n = 0; n < S_MAX_FRAMES && size > 0; n++) {
        size_t len = size >= 2 ? (size_t) data [0] << 8 | data [1] : size;
        size_t skip = size >= 2 ? 2 : 0;
        if (n == S_MAX_FRAMES - 1 || len > size - skip)
            len = size - skip;          /* the rest is the last frame */
        s_frame (data + skip, len);
        data += skip + len;
        size -= skip + len;
    }
    return 0;
}
