/*  frames_replies.c — what the broker owes to each message cs-fuzz-frames
 *  sends (frames.h), as the broker's own codec decodes it, and the check of
 *  every reply against it: matched by request id, counted, the failures
 *  shown with the message in hex.
 */
#include <inttypes.h>
#include <p11-kit/pkcs11.h>
#include "frames.h"
#include "fuzz_needs.h"

#define S_REPORT_MAX 10             /* failures shown in detail */

static const char *s_kind_names [S_KINDS] = {
    "random", "truncated", "flipped", "oversized", "multipart", "intact"
};
static const char *s_path_names [S_PATHS] = { "real-ticket", "no-ticket", "corrupt-ticket" };

/* ------------------------------------------------------------------ */
/*  What the broker owes                                               */

/*  The proto name of a job kind, for messages.  */
static const char *
s_job_name (int kind)
{
    static const char *names [] = {
        "none", "hello", "login", "list_keys", "sign", "decrypt", "generate_key_pair", "import_key",
        "destroy_key", "set_key_attributes", "copy_key", "init_pin", "set_pin", "derive", "modexp",
        "?", "put_object", "list_objects", "destroy_object", "?", "sym", "generate_key"
    };
    return kind >= 0 && kind < (int) (sizeof names / sizeof names [0]) ? names [kind] : "?";
}

/*  Predicts the answer to a one-frame message as the broker decodes it
 *  (frontend.c s_request_decode: the same codec).  Returns false when the
 *  message must not be sent (a job that checks a PIN).  */
bool
frames_predict (const frames_t *self, const uint8_t *data, size_t size, frames_expect_t *expect)
{
    Cs__Request *req = cs_wire_request_decode (data, size, NULL);
    expect->version = CS_PROTOCOL_VERSION_MIN;      /* request-level errors (fe_send_error) */
    if (!req) {
        /*  An error reply with the id found in the frame's top-level fields
            (0 when none), as for several frames (request.c s_peek_request_id).  */
        expect->id = frames_peek_id (data, size);
        return true;
    }
    if (!cs_wire_version_choose (req->version_min, req->version_max))
        expect->version = CS_PROTOCOL_VERSION;      /* a mismatch: the broker's highest */
    bool send = true;
    for (size_t i = 0; i < req->n_jobs; i++)
        send = send && !s_checks_pin (req->jobs [i]);
    expect->id = req->request_id;
    if (send && cs_wire_version_choose (req->version_min, req->version_max)) {
        expect->results = true;
        expect->ticket_ok = self->logged_in && req->ticket.len == TICKET_LEN
                         && memcmp (req->ticket.data, self->ticket, TICKET_LEN) == 0;
        expect->ticket_sent = req->ticket.len > 0;
        expect->n_jobs = req->n_jobs;
        expect->jobs = malloc (req->n_jobs);
        expect->needs = malloc (req->n_jobs);
        expect->version = cs_wire_version_choose (req->version_min, req->version_max);
        expect->per_job = req->per_job_replies
                       && cs_wire_version_choose (req->version_min, req->version_max) >= CS_PROTOCOL_PER_JOB;
        expect->answered = calloc (req->n_jobs, 1);
        assert (expect->jobs && expect->needs && expect->answered);
        for (size_t i = 0; i < req->n_jobs; i++) {
            expect->jobs [i] = (uint8_t) req->jobs [i]->kind_case;
            expect->needs [i] = (uint8_t) s_needs (req->jobs [i]);
        }
    }
    cs__request__free_unpacked (req, NULL);
    return send;
}

/*  Frees what expect owns.  */
void
frames_expect_free (frames_expect_t *expect)
{
    free (expect->jobs);
    free (expect->needs);
    free (expect->frame);
    free (expect->answered);
    expect->jobs = expect->needs = expect->frame = expect->answered = NULL;
}

/*  True when a reply to expect could be taken for the reply to a message
 *  in flight with the same request id, and judged against the wrong
 *  ticket or jobs: both are owed results, or one is.  (Error replies with
 *  no results are all alike.)  */
bool
frames_ambiguous (const frames_t *self, const frames_expect_t *expect)
{
    for (size_t i = 0; i < self->n_expect; i++)
        if (self->expect [i].id == expect->id && (expect->results || self->expect [i].results))
            return true;
    return false;
}

/*  The request id the broker reports for a refused message, or one of
 *  several frames (request.c s_peek_request_id on the first frame: the
 *  top-level request_id, read without a decode).  */
uint64_t
frames_peek_id (const uint8_t *data, size_t size)
{
    if (size == 0 || size > CS_WIRE_MAX_MESSAGE)
        return 0;
    return cs_wire_request_id (data, size);
}

/* ------------------------------------------------------------------ */
/*  Replies                                                            */

/*  True when job kind of an intact message (built from known-good parts)
 *  must succeed: hello and list-keys always, sign (board:01 over a
 *  DigestInfo) and generate (a P-256 session key) with the real ticket.  */
static bool
s_must_succeed (const frames_expect_t *expect, int kind)
{
    if (expect->kind != S_INTACT)
        return false;
    return kind == CS__JOB__KIND_HELLO
        || (kind == CS__JOB__KIND_LIST_KEYS && (expect->ticket_ok || !expect->ticket_sent))
        || (expect->ticket_ok && (kind == CS__JOB__KIND_SIGN || kind == CS__JOB__KIND_GENERATE_KEY_PAIR));
}

/*  A key list that carries a ticket which is not the real one must be
 *  refused with CKR_USER_NOT_LOGGED_IN (docs/CONTRACTS.md "Key lists"):
 *  the broker says that the login is gone rather than answer with the
 *  public view.  */
static bool
s_list_refused_owed (const frames_expect_t *expect, int kind)
{
    return kind == CS__JOB__KIND_LIST_KEYS && expect->ticket_sent && !expect->ticket_ok;
}

/*  Why result i is not what the broker owes for job i of expect, or NULL;
 *  sets *violation as s_reply_problem does.  why: room for the reason.  */
static const char *
s_result_problem (const Cs__Result *result, const frames_expect_t *expect, size_t i, bool *violation,
                  char *why, size_t why_size)
{
    int kind = expect->jobs [i];
    s_needs_t needs = (s_needs_t) expect->needs [i];
    int want = s_result_kind (kind);
    if (want < 0)
        want = CS__RESULT__KIND__NOT_SET;       /* the others (init-PIN, set-PIN): no result */
    if (result->rv == CKR_OK && (int) result->kind_case != want)
        snprintf (why, why_size, "job %zu (%s): a CKR_OK result of the wrong kind", i, s_job_name (kind));
    else
    if (result->rv != CKR_OK && s_must_succeed (expect, kind))
        snprintf (why, why_size, "job %zu (%s) of a valid request answered %s", i, s_job_name (kind),
                  cs_rv_name (result->rv));
    else
    if (s_list_refused_owed (expect, kind) && result->rv != CKR_USER_NOT_LOGGED_IN)
        snprintf (why, why_size, "job %zu (%s) with a ticket that is not the real one answered %s, "
                  "not CKR_USER_NOT_LOGGED_IN", i, s_job_name (kind), cs_rv_name (result->rv));
    else
    if (needs == S_NEEDS_NOTHING || ((needs == S_NEEDS_USER || needs == S_NEEDS_PUBLIC) && expect->ticket_ok)
    ||  (needs == S_NEEDS_PUBLIC && !expect->ticket_sent))
        return NULL;
    else
    if (result->rv == CKR_OK) {
        *violation = true;
        snprintf (why, why_size, "job %zu (%s) answered CKR_OK without %s", i, s_job_name (kind),
                  needs == S_NEEDS_PIN ? "a PIN" : needs == S_NEEDS_SO ? "an SO ticket" : "the real ticket");
    }
    else
    if (needs != S_NEEDS_PIN && result->rv != CKR_USER_NOT_LOGGED_IN)
        snprintf (why, why_size, "job %zu (%s) without its ticket refused with %s, not "
                  "CKR_USER_NOT_LOGGED_IN", i, s_job_name (kind), cs_rv_name (result->rv));
    else
        return NULL;
    return why;
}

/*  Why reply is not the answer owed to expect, or NULL when it is; sets
 *  *violation when the reason is a job that needs a login answered CKR_OK
 *  without the real ticket.  The reason may be in a static buffer.  */
static const char *
s_reply_problem (const Cs__Reply *reply, const frames_expect_t *expect, bool *violation)
{
    static char why [200];
    *violation = false;
    if (reply->version != expect->version)
        return "wrong protocol version";
    if (!expect->results)
        return reply->rv != CKR_OK && reply->n_results == 0
             ? NULL : "a frame the broker cannot take was answered CKR_OK or with results";
    if (reply->rv != CKR_OK)
        return "a valid request got a request-level error";
    if (expect->per_job) {
        size_t i = reply->job_number - 1;
        if (reply->job_number == 0 || i >= expect->n_jobs || expect->answered [i] || reply->n_results != 1)
            return "a per-job reply names no job owed a reply, or has not one result";
        return s_result_problem (reply->results [0], expect, i, violation, why, sizeof why);
    }
    if (reply->job_number)
        return "a request without per_job_replies got a per-job reply";
    if (reply->n_results != expect->n_jobs)
        return "the number of results is not the number of jobs";
    const char *problem = NULL;
    for (size_t i = 0; !problem && i < expect->n_jobs; i++)
        problem = s_result_problem (reply->results [i], expect, i, violation, why, sizeof why);
    return problem;
}

/*  Counts an answer that is what the broker owed.  */
static void
s_count_answer (frames_t *self, const Cs__Reply *reply, const frames_expect_t *expect)
{
    if (reply->rv == CKR_OK)
        self->ok++;
    else
        self->errors++;
    for (size_t i = 0; i < expect->n_jobs; i++) {
        s_needs_t needs = (s_needs_t) expect->needs [i];
        if (needs == S_NEEDS_NOTHING || (needs == S_NEEDS_PUBLIC && !expect->ticket_sent)
        ||  (expect->per_job && i != reply->job_number - 1))
            continue;
        if ((needs == S_NEEDS_USER || needs == S_NEEDS_PUBLIC) && expect->ticket_ok)
            self->authed_ok += reply->results [expect->per_job ? 0 : i]->rv == CKR_OK;
        else
            self->refused++;
    }
}

/*  Counts and (the first S_REPORT_MAX) shows a failure.  */
static void
s_report (frames_t *self, bool violation, const frames_expect_t *expect, uint64_t id, const char *why)
{
    unsigned long n = violation ? ++self->violations : ++self->bad;
    if (n > S_REPORT_MAX)
        return;
    if (expect) {
        fprintf (stderr, "cs-fuzz-frames: %s: message %ld (%s, %s), request id %" PRIu64 ": %s\n"
                 "    the message (first frame, %zu bytes): ", violation ? "VIOLATION" : "BAD REPLY",
                 expect->seq, s_kind_names [expect->kind], s_path_names [expect->path], id, why,
                 expect->frame_size);
        for (size_t i = 0; i < expect->frame_size; i++)
            fprintf (stderr, "%02x", expect->frame [i]);
        fprintf (stderr, "\n");
    }
    else
        fprintf (stderr, "cs-fuzz-frames: BAD REPLY (request id %" PRIu64 "): %s\n", id, why);
}

/*  Matches reply to the messages in flight with its request id: the first
 *  one it answers correctly, else the first one (a failure).  */
static void
s_match (frames_t *self, const Cs__Reply *reply)
{
    size_t first = self->n_expect;
    const char *first_why = NULL;
    bool first_violation = false;
    for (size_t i = 0; i < self->n_expect; i++) {
        if (self->expect [i].id != reply->request_id)
            continue;
        bool violation;
        const char *why = s_reply_problem (reply, &self->expect [i], &violation);
        if (!why || first == self->n_expect) {
            first = i;
            first_why = why;
            first_violation = violation;
        }
        if (!why)
            break;
    }
    if (first == self->n_expect) {
        s_report (self, false, NULL, reply->request_id, "the request id matches no message in flight");
        return;
    }
    frames_expect_t *expect = &self->expect [first];
    if (first_why)
        s_report (self, first_violation, expect, reply->request_id, first_why);
    else
        s_count_answer (self, reply, expect);
    if (!first_why && expect->per_job) {           /* the message is over with its last job's reply */
        expect->answered [reply->job_number - 1] = 1;
        if (++expect->n_answered < expect->n_jobs) {
            self->replies--;                        /* a message's replies count once */
            return;
        }
    }
    frames_expect_free (expect);
    *expect = self->expect [--self->n_expect];
}

/*  Receives and checks one reply on the main association within wait_ms.
 *  Returns false when none came.  */
bool
frames_receive (frames_t *self, int wait_ms)
{
    if (zpoller_wait (self->poller, wait_ms) != self->dealer)
        return false;
    zmsg_t *msg = zmsg_recv (self->dealer);
    if (!msg)
        return false;
    self->replies++;
    zframe_t *frame = zmsg_first (msg);
    Cs__Reply *reply = zmsg_size (msg) == 1
        ? cs_wire_reply_decode (zframe_data (frame), zframe_size (frame), NULL) : NULL;
    if (reply)
        s_match (self, reply);
    else
        s_report (self, false, NULL, 0, zmsg_size (msg) == 1 ? "the reply does not decode"
                                                              : "the reply is not one frame");
    if (reply)
        cs__reply__free_unpacked (reply, NULL);
    zmsg_destroy (&msg);
    return true;
}
