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
 */
#include <getopt.h>
#include <inttypes.h>
#include <czmq.h>
#include <p11-kit/pkcs11.h>
#include "cs_wire.h"
#include "ticket.h"
#include "fuzz_needs.h"

#define S_WINDOW 200                /* messages in flight (< the ROUTER's HWM of 1000) */
#define S_SEND_WAIT_MS 2000         /* a message not taken by the socket in this long is dropped */
#define S_STALL_MS 15000            /* no reply this long: stalled (> default deadline 10 s) */
#define S_CALL_WAIT_MS 10000        /* login reply */
#define S_FINAL_WAIT_MS 5000        /* final hello reply */
#define S_ID_BASE (UINT64_C (1) << 40)          /* request ids of fuzzed messages */
#define S_LOGIN_ID UINT64_C (0x5eed0f1a0)
#define S_FINAL_ID UINT64_C (0x5eed0f1a1)
#define S_MAX_JOBS 4                /* jobs in one fuzzed request */
#define S_REPORT_MAX 10             /* failures shown in detail */
#define S_MIN_SENT_PERCENT 90

typedef enum { S_RANDOM, S_TRUNCATED, S_FLIPPED, S_OVERSIZED, S_MULTIPART, S_INTACT, S_KINDS } s_kind_t;
typedef enum { S_TICKET_REAL, S_TICKET_NONE, S_TICKET_CORRUPT, S_PATHS } s_path_t;
static const char *s_kind_names [S_KINDS] = {
    "random", "truncated", "flipped", "oversized", "multipart", "intact"
};
static const char *s_path_names [S_PATHS] = { "real-ticket", "no-ticket", "corrupt-ticket" };


/*  The answer the broker owes to one message on the main association.  */
typedef struct {
    uint64_t id;                    /* request id the broker sees (0: none) */
    bool results;                   /* rv CKR_OK and one result per job; else a request-level error */
    bool ticket_ok;                 /* the ticket is byte-identical to the real one */
    bool ticket_sent;               /* the request carries a ticket (any bytes) */
    size_t n_jobs;
    uint8_t *jobs;                  /* Cs__Job__KindCase of each job (owned) */
    uint8_t *needs;                 /* s_needs_t of each job (owned) */
    uint32_t version;               /* Reply.version owed: the one the broker chooses; request-level
                                       errors the lowest, a version mismatch the highest */
    bool per_job;                   /* results: one reply per job (Request.per_job_replies) */
    uint8_t *answered;              /* per_job: the jobs answered so far (owned) */
    size_t n_answered;
    uint8_t *frame;                 /* a copy of the (first) frame sent, for reports (owned) */
    size_t frame_size;
    s_path_t path;
    s_kind_t kind;
    long seq;                       /* the message's number in the run */
} s_expect_t;

typedef struct {
    zsock_t *dealer;                /* main association */
    zsock_t *oversized;             /* second association: oversized frames only */
    zpoller_t *poller;              /* on dealer */
    uint8_t ticket [TICKET_LEN];    /* the real CKU_USER ticket */
    bool logged_in;
    uint64_t next_id;
    s_expect_t expect [S_WINDOW + 1];
    size_t n_expect;
    unsigned long sent [S_KINDS], sent_path [S_PATHS], dropped, withheld, id_waits;
    unsigned long replies, ok, errors, refused, authed_ok, bad, violations;
} s_fuzz_t;

/* ------------------------------------------------------------------ */
/*  Valid requests                                                     */

/*  The fuzzer's own random numbers (xorshift64*): random () shares its
 *  state with rand (), which libzmq and CZMQ call at times of their own,
 *  so a seed would not give the same messages twice.  */
static uint64_t s_random_state = UINT64_C (0x9e3779b97f4a7c15);

static void
s_srandom (unsigned seed)
{
    s_random_state = UINT64_C (0x9e3779b97f4a7c15) ^ ((uint64_t) seed << 1);
}

/*  A number in [0, 2^31), as random () gives.  */
static long
s_random (void)
{
    s_random_state ^= s_random_state >> 12;
    s_random_state ^= s_random_state << 25;
    s_random_state ^= s_random_state >> 27;
    return (long) ((s_random_state * UINT64_C (0x2545f4914f6cdd1d)) >> 33);
}

/*  SHA-256 DigestInfo of the empty string: what C_Sign with
 *  CKM_SHA256_RSA_PKCS sends for CKM_RSA_PKCS (docs/CONTRACTS.md "Wire").  */
static uint8_t s_digest_info [51] = {
    0x30, 0x31, 0x30, 0x0d, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x01,
    0x05, 0x00, 0x04, 0x20, 0xe3, 0xb0, 0xc4, 0x42, 0x98, 0xfc, 0x1c, 0x14, 0x9a, 0xfb, 0xf4,
    0xc8, 0x99, 0x6f, 0xb9, 0x24, 0x27, 0xae, 0x41, 0xe4, 0x64, 0x9b, 0x93, 0x4c, 0xa4, 0x95,
    0x99, 0x1b, 0x78, 0x52, 0xb8, 0x55
};
/*  The P-256 base point, uncompressed: a valid ECDH peer point.  */
static uint8_t s_p256_g [65] = {
    0x04, 0x6b, 0x17, 0xd1, 0xf2, 0xe1, 0x2c, 0x42, 0x47, 0xf8, 0xbc, 0xe6, 0xe5, 0x63, 0xa4,
    0x40, 0xf2, 0x77, 0x03, 0x7d, 0x81, 0x2d, 0xeb, 0x33, 0xa0, 0xf4, 0xa1, 0x39, 0x45, 0xd8,
    0x98, 0xc2, 0x96, 0x4f, 0xe3, 0x42, 0xe2, 0xfe, 0x1a, 0x7f, 0x9b, 0x8e, 0xe7, 0xeb, 0x4a,
    0x7c, 0x0f, 0x9e, 0x16, 0x2b, 0xce, 0x33, 0x57, 0x6b, 0x31, 0x5e, 0xce, 0xcb, 0xb6, 0x40,
    0x68, 0x37, 0xbf, 0x51, 0xf5
};
static uint8_t s_p256_oid [] = { 0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07 };
static uint8_t s_rsa_ref [] = "board:01", s_ec_ref [] = "board:03";     /* demo-deploy.sh keys */
static char s_unknown_ref [] = "ks:00000000000000000000000000000000";
static uint8_t s_ciphertext [256], s_spki [91], s_label [] = "fuzz", s_new_pin [] = "1234";
static uint8_t s_modexp_base [] = { 2 }, s_modexp_e [] = { 1, 0, 1 }, s_modexp_m [] = { 0x03, 0xe8 };

/*  Storage of one job of a request being built.  */
typedef struct {
    Cs__Job job;
    Cs__HelloJob hello;
    Cs__ListKeysJob list;
    Cs__Mechanism mech;
    Cs__SignJob sign;
    Cs__DecryptJob decrypt;
    Cs__DeriveJob derive;
    Cs__GenerateKeyPairJob gen;
    Cs__ImportKeyJob import;
    Cs__DestroyKeyJob destroy;
    Cs__SetKeyAttributesJob set;
    Cs__CopyKeyJob copy;
    Cs__InitPinJob init_pin;
    Cs__ModexpJob modexp;
    Cs__Attribute attr;
    Cs__Attribute *attrs [1];
} s_job_t;

/*  Fills one job of a random kind: every kind but login and set-PIN (they
 *  check a PIN).  A job with the real ticket may succeed (sign with
 *  board:01, hello, list, generate a P-256 session key) or fail on its own
 *  terms (a garbage ciphertext or SPKI, an unknown or read-only ref); it
 *  never changes the deployment (init-PIN sets the PIN it already has).  */
static void
s_job_fill (s_job_t *s)
{
    cs__job__init (&s->job);
    cs__mechanism__init (&s->mech);
    cs__attribute__init (&s->attr);
    s->mech.type = CKM_RSA_PKCS;
    s->attr.type = CKA_LABEL;
    s->attr.value_case = CS__ATTRIBUTE__VALUE_BYTES;
    s->attr.bytes = (ProtobufCBinaryData) { sizeof s_label - 1, s_label };
    s->attrs [0] = &s->attr;
    switch (s_random () % 12) {
        case 0:
            cs__hello_job__init (&s->hello);
            s->job.kind_case = CS__JOB__KIND_HELLO;
            s->job.hello = &s->hello;
            break;
        case 1:
            cs__list_keys_job__init (&s->list);
            s->job.kind_case = CS__JOB__KIND_LIST_KEYS;
            s->job.list_keys = &s->list;
            break;
        case 2:
            cs__sign_job__init (&s->sign);
            s->sign.key_id = (ProtobufCBinaryData) { sizeof s_rsa_ref - 1, s_rsa_ref };
            s->sign.mechanism = &s->mech;
            s->sign.data = (ProtobufCBinaryData) { sizeof s_digest_info, s_digest_info };
            s->job.kind_case = CS__JOB__KIND_SIGN;
            s->job.sign = &s->sign;
            break;
        case 3:
            cs__decrypt_job__init (&s->decrypt);
            s->decrypt.key_id = (ProtobufCBinaryData) { sizeof s_rsa_ref - 1, s_rsa_ref };
            s->decrypt.mechanism = &s->mech;
            s->decrypt.data = (ProtobufCBinaryData) { sizeof s_ciphertext, s_ciphertext };
            s->job.kind_case = CS__JOB__KIND_DECRYPT;
            s->job.decrypt = &s->decrypt;
            break;
        case 4:
            cs__derive_job__init (&s->derive);
            s->derive.key_id = (ProtobufCBinaryData) { sizeof s_ec_ref - 1, s_ec_ref };
            s->derive.public_data = (ProtobufCBinaryData) { sizeof s_p256_g, s_p256_g };
            s->job.kind_case = CS__JOB__KIND_DERIVE;
            s->job.derive = &s->derive;
            break;
        case 5:
            cs__generate_key_pair_job__init (&s->gen);
            s->gen.mechanism = CKM_EC_KEY_PAIR_GEN;
            s->gen.ec_params = (ProtobufCBinaryData) { sizeof s_p256_oid, s_p256_oid };
            s->job.kind_case = CS__JOB__KIND_GENERATE_KEY_PAIR;
            s->job.generate_key_pair = &s->gen;
            break;
        case 6:
            cs__import_key_job__init (&s->import);
            s->import.public_spki = (ProtobufCBinaryData) { sizeof s_spki, s_spki };
            s->import.n_template_ = 1;
            s->import.template_ = s->attrs;
            s->job.kind_case = CS__JOB__KIND_IMPORT_KEY;
            s->job.import_key = &s->import;
            break;
        case 7:
            cs__destroy_key_job__init (&s->destroy);
            s->destroy.ref = s_unknown_ref;
            s->destroy.object = CKO_PRIVATE_KEY;
            s->job.kind_case = CS__JOB__KIND_DESTROY_KEY;
            s->job.destroy_key = &s->destroy;
            break;
        case 8:
            cs__set_key_attributes_job__init (&s->set);
            s->set.ref = (char *) s_rsa_ref;
            s->set.object = CKO_PRIVATE_KEY;
            s->set.n_attributes = 1;
            s->set.attributes = s->attrs;
            s->job.kind_case = CS__JOB__KIND_SET_KEY_ATTRIBUTES;
            s->job.set_key_attributes = &s->set;
            break;
        case 9:
            cs__copy_key_job__init (&s->copy);
            s->copy.ref = s_unknown_ref;
            s->copy.object = CKO_PUBLIC_KEY;
            s->copy.n_attributes = 1;
            s->copy.attributes = s->attrs;
            s->job.kind_case = CS__JOB__KIND_COPY_KEY;
            s->job.copy_key = &s->copy;
            break;
        case 10:                        /* raw modexp: 2^65537 mod 1000 (issue #12) */
            cs__modexp_job__init (&s->modexp);
            s->modexp.base_value = (ProtobufCBinaryData) { sizeof s_modexp_base, s_modexp_base };
            s->modexp.exponent = (ProtobufCBinaryData) { sizeof s_modexp_e, s_modexp_e };
            s->modexp.modulus = (ProtobufCBinaryData) { sizeof s_modexp_m, s_modexp_m };
            s->job.kind_case = CS__JOB__KIND_MODEXP;
            s->job.modexp = &s->modexp;
            break;
        default:
            cs__init_pin_job__init (&s->init_pin);
            s->init_pin.pin = (ProtobufCBinaryData) { sizeof s_new_pin - 1, s_new_pin };
            s->job.kind_case = CS__JOB__KIND_INIT_PIN;
            s->job.init_pin = &s->init_pin;
    }
}

/*  Writes the ticket of path into out (TICKET_LEN + 1 bytes); returns its
 *  length.  A corrupted ticket is never the real one.  */
static size_t
s_ticket (const s_fuzz_t *self, s_path_t path, uint8_t *out)
{
    if (path == S_TICKET_NONE)
        return 0;
    memcpy (out, self->ticket, TICKET_LEN);
    if (path == S_TICKET_REAL)
        return TICKET_LEN;
    switch (self->logged_in ? s_random () % 5 : 4) {
        case 0:                                 /* one bit flipped */
            out [(size_t) s_random () % TICKET_LEN] ^= (uint8_t) (1u << (s_random () % 8));
            return TICKET_LEN;
        case 1:                                 /* a byte short */
            return TICKET_LEN - 1;
        case 2:                                 /* a byte long */
            out [TICKET_LEN] = (uint8_t) s_random ();
            return TICKET_LEN + 1;
        case 3:                                 /* the USER ticket's MAC as SO */
            out [0] = (uint8_t) CKU_SO;
            return TICKET_LEN;
        default:                                /* random bytes */
            for (size_t i = 0; i < TICKET_LEN; i++)
                out [i] = (uint8_t) s_random ();
            if (self->logged_in && memcmp (out, self->ticket, TICKET_LEN) == 0)
                out [1] ^= 1;
            return TICKET_LEN;
    }
}

/*  A valid request of 1..S_MAX_JOBS random jobs with a fresh request id and
 *  the ticket of path, asking for per-job replies or not.  Caller frees the returned buffer of *size_p bytes.  */
static uint8_t *
s_valid_request (s_fuzz_t *self, s_path_t path, size_t *size_p)
{
    s_job_t jobs [S_MAX_JOBS];
    Cs__Job *job_ptrs [S_MAX_JOBS];
    uint8_t ticket [TICKET_LEN + 1];
    Cs__Request req = CS__REQUEST__INIT;
    req.n_jobs = 1 + (size_t) s_random () % S_MAX_JOBS;
    for (size_t i = 0; i < req.n_jobs; i++) {
        s_job_fill (&jobs [i]);
        job_ptrs [i] = &jobs [i].job;
    }
    req.version_min = CS_PROTOCOL_VERSION_MIN;
    req.version_max = CS_PROTOCOL_VERSION;
    req.request_id = S_ID_BASE + self->next_id++;
    req.deadline_ms = 10000;
    req.ticket = (ProtobufCBinaryData) { s_ticket (self, path, ticket), ticket };
    req.jobs = job_ptrs;
    req.per_job_replies = s_random () % 2 == 0;     /* half of them: one reply per job */
    return cs_wire_encode (&req.base, size_p);
}

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

/*  The kind of a CKR_OK result of a job of kind (frontend.c).  */
static Cs__Result__KindCase
s_result_kind (int kind)
{
    switch (kind) {
        case CS__JOB__KIND_HELLO: return CS__RESULT__KIND_HELLO;
        case CS__JOB__KIND_LOGIN: return CS__RESULT__KIND_LOGIN;
        case CS__JOB__KIND_LIST_KEYS: return CS__RESULT__KIND_KEYS;
        case CS__JOB__KIND_SIGN:
        case CS__JOB__KIND_DECRYPT:
        case CS__JOB__KIND_DERIVE:
        case CS__JOB__KIND_MODEXP: return CS__RESULT__KIND_DATA;
        case CS__JOB__KIND_GENERATE_KEY_PAIR: return CS__RESULT__KIND_GENERATED;
        case CS__JOB__KIND_IMPORT_KEY: return CS__RESULT__KIND_IMPORTED;
        case CS__JOB__KIND_DESTROY_KEY:
        case CS__JOB__KIND_SET_KEY_ATTRIBUTES:
        case CS__JOB__KIND_COPY_KEY: return CS__RESULT__KIND_KEY;
        default: return CS__RESULT__KIND__NOT_SET;     /* init-PIN, set-PIN */
    }
}

/*  True when the broker would check job against a PIN: login and set-PIN
 *  as CKU_SO or CKU_USER (other user types fail before the check).  */
static bool
s_checks_pin (const Cs__Job *job)
{
    uint64_t user_type = job->kind_case == CS__JOB__KIND_LOGIN ? job->login->user_type
                       : job->kind_case == CS__JOB__KIND_SET_PIN ? job->set_pin->user_type : UINT64_MAX;
    return user_type == CKU_SO || user_type == CKU_USER;
}

static uint64_t s_peek_id (const uint8_t *data, size_t size);

/*  Predicts the answer to a one-frame message as the broker decodes it
 *  (frontend.c s_request_decode: the same codec).  Returns false when the
 *  message must not be sent (a job that checks a PIN).  */
static bool
s_predict (const s_fuzz_t *self, const uint8_t *data, size_t size, s_expect_t *expect)
{
    Cs__Request *req = cs_wire_request_decode (data, size, NULL);
    expect->version = CS_PROTOCOL_VERSION_MIN;      /* request-level errors (fe_send_error) */
    if (!req) {
        /*  An error reply with the id found in the frame's top-level fields
            (0 when none), as for several frames (request.c s_peek_request_id).  */
        expect->id = s_peek_id (data, size);
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
static void
s_expect_free (s_expect_t *expect)
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
static bool
s_ambiguous (const s_fuzz_t *self, const s_expect_t *expect)
{
    for (size_t i = 0; i < self->n_expect; i++)
        if (self->expect [i].id == expect->id && (expect->results || self->expect [i].results))
            return true;
    return false;
}

/*  The request id the broker reports for a refused message, or one of
 *  several frames (request.c s_peek_request_id on the first frame: the
 *  top-level request_id, read without a decode).  */
static uint64_t
s_peek_id (const uint8_t *data, size_t size)
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
s_must_succeed (const s_expect_t *expect, int kind)
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
s_list_refused_owed (const s_expect_t *expect, int kind)
{
    return kind == CS__JOB__KIND_LIST_KEYS && expect->ticket_sent && !expect->ticket_ok;
}

/*  Why result i is not what the broker owes for job i of expect, or NULL;
 *  sets *violation as s_reply_problem does.  why: room for the reason.  */
static const char *
s_result_problem (const Cs__Result *result, const s_expect_t *expect, size_t i, bool *violation,
                  char *why, size_t why_size)
{
    int kind = expect->jobs [i];
    s_needs_t needs = (s_needs_t) expect->needs [i];
    if (result->rv == CKR_OK && result->kind_case != s_result_kind (kind))
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
s_reply_problem (const Cs__Reply *reply, const s_expect_t *expect, bool *violation)
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
s_count_answer (s_fuzz_t *self, const Cs__Reply *reply, const s_expect_t *expect)
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
s_report (s_fuzz_t *self, bool violation, const s_expect_t *expect, uint64_t id, const char *why)
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
s_match (s_fuzz_t *self, const Cs__Reply *reply)
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
    s_expect_t *expect = &self->expect [first];
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
    s_expect_free (expect);
    *expect = self->expect [--self->n_expect];
}

/*  Receives and checks one reply on the main association within wait_ms.
 *  Returns false when none came.  */
static bool
s_receive (s_fuzz_t *self, int wait_ms)
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

/* ------------------------------------------------------------------ */
/*  Sending                                                            */

/*  Sends a message of n frames on sock without blocking: while the socket
 *  cannot take a frame, reads replies and retries, for S_SEND_WAIT_MS at
 *  most.  Returns true when every frame went out.  (ZeroMQ checks the
 *  high-water mark on a message's first frame only: the rest never wait.)  */
static bool
s_send (s_fuzz_t *self, zsock_t *sock, uint8_t *const *data, const size_t *size, size_t n)
{
    void *handle = zsock_resolve (sock);
    int64_t end = zclock_mono () + S_SEND_WAIT_MS;
    for (size_t i = 0; i < n; i++) {
        int flags = ZMQ_DONTWAIT | (i + 1 < n ? ZMQ_SNDMORE : 0);
        while (zmq_send (handle, data [i], size [i], flags) < 0) {
            if (zmq_errno () != EAGAIN || zclock_mono () > end)
                return false;
            s_receive (self, 10);
        }
    }
    return true;
}

/*  Fills buf with len random bytes.  */
static void
s_random_bytes (uint8_t *buf, size_t len)
{
    for (size_t i = 0; i < len; i++)
        buf [i] = (uint8_t) s_random ();
}

/*  Builds a one-frame message of kind from valid into buf; returns its
 *  length.  */
static size_t
s_mutate (s_kind_t kind, const uint8_t *valid, size_t valid_size, uint8_t *buf)
{
    size_t len = valid_size;
    switch (kind) {
        case S_RANDOM:
            len = (size_t) s_random () % 600;
            s_random_bytes (buf, len);
            break;
        case S_TRUNCATED:
            len = (size_t) s_random () % valid_size;
            memcpy (buf, valid, len);
            break;
        case S_FLIPPED:
            memcpy (buf, valid, valid_size);
            for (int flips = 1 + (int) (s_random () % 8); flips > 0; flips--)
                buf [(size_t) s_random () % len] ^= (uint8_t) (1u << (s_random () % 8));
            break;
        default:                                /* intact */
            memcpy (buf, valid, valid_size);
    }
    return len;
}

/*  Sends one oversized frame on the second association (the broker drops
 *  the connection: no reply).  */
static void
s_fuzz_oversized (s_fuzz_t *self, uint8_t *buf)
{
    size_t len = CS_WIRE_MAX_MESSAGE + 1 + (size_t) s_random () % 32;
    memset (buf, 0x0a, len);
    if (s_send (self, self->oversized, &buf, &len, 1))
        self->sent [S_OVERSIZED]++;
    else
        self->dropped++;
}

/*  Builds, predicts and sends one message of kind on path (seq: its
 *  number); records the answer owed.  */
static void
s_fuzz_one (s_fuzz_t *self, s_kind_t kind, s_path_t path, long seq)
{
    static uint8_t buf [CS_WIRE_MAX_MESSAGE + 64], extra [2][64];
    if (kind == S_OVERSIZED) {
        s_fuzz_oversized (self, buf);
        return;
    }
    s_expect_t expect;
    uint8_t *frames [3] = { buf, extra [0], extra [1] };
    size_t sizes [3], n = 1;
    for (int tries = 0; ; tries++) {
        size_t valid_size = 0;
        uint8_t *valid = s_valid_request (self, path, &valid_size);
        assert (valid);
        sizes [0] = s_mutate (kind == S_MULTIPART ? (s_random () % 2 ? S_INTACT : S_FLIPPED) : kind,
                              valid, valid_size, buf);
        free (valid);
        expect = (s_expect_t) { .path = path, .kind = kind, .seq = seq,
                                .version = CS_PROTOCOL_VERSION_MIN };     /* multipart: an error */
        if (kind == S_MULTIPART)
            expect.id = s_peek_id (buf, sizes [0]);
        if (kind == S_MULTIPART || s_predict (self, buf, sizes [0], &expect))
            break;
        s_expect_free (&expect);                /* a PIN check: build another */
        self->withheld++;
        assert (tries < 1000);
    }
    /*  A request id in flight: first the reply to that message.  Waiting
        draws no random numbers, so a seed gives the same messages.  */
    if (s_ambiguous (self, &expect))
        self->id_waits++;
    while (s_ambiguous (self, &expect))
        if (!s_receive (self, S_STALL_MS)) {
            s_expect_free (&expect);
            self->dropped++;
            return;
        }
    expect.frame = malloc (sizes [0] ? sizes [0] : 1);
    assert (expect.frame);
    memcpy (expect.frame, buf, sizes [0]);
    expect.frame_size = sizes [0];
    if (kind == S_MULTIPART) {
        n = 2 + (size_t) s_random () % 2;
        for (size_t i = 1; i < n; i++) {
            sizes [i] = (size_t) s_random () % 64;
            s_random_bytes (frames [i], sizes [i]);
        }
    }
    if (!s_send (self, self->dealer, frames, sizes, n)) {
        s_expect_free (&expect);
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
s_login (s_fuzz_t *self, const char *pin)
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
static s_kind_t
s_pick_kind (long seq)
{
    static const s_kind_t kinds [9] = {
        S_RANDOM, S_RANDOM, S_TRUNCATED, S_TRUNCATED, S_FLIPPED, S_FLIPPED, S_FLIPPED, S_MULTIPART, S_INTACT
    };
    return seq % 997 == 996 ? S_OVERSIZED : kinds [s_random () % 9];
}

/*  The path of the next message: with a ticket, real 1/2, none 1/5,
 *  corrupted 3/10; without, none or random bytes.  */
static s_path_t
s_pick_path (const s_fuzz_t *self)
{
    long r = s_random () % 10;
    if (!self->logged_in)
        return r < 6 ? S_TICKET_NONE : S_TICKET_CORRUPT;
    return r < 5 ? S_TICKET_REAL : r < 7 ? S_TICKET_NONE : S_TICKET_CORRUPT;
}

/*  Sends count messages (or as many as fit in time_limit_ms), keeping at
 *  most S_WINDOW in flight, then waits for the last replies.  Stops when
 *  no reply comes for S_STALL_MS: what is in flight then is lost.  */
static void
s_run (s_fuzz_t *self, long count, int64_t time_limit_ms)
{
    int64_t end = zclock_mono () + time_limit_ms;
    bool stalled = false;
    for (long seq = 0; seq < count && !stalled && zclock_mono () < end; seq++) {
        s_kind_t kind = s_pick_kind (seq);
        s_fuzz_one (self, kind, s_pick_path (self), seq);
        while (self->n_expect >= S_WINDOW && !stalled)
            stalled = !s_receive (self, S_STALL_MS);
        while (s_receive (self, 0))
            ;
    }
    while (self->n_expect > 0 && !stalled)
        stalled = !s_receive (self, S_STALL_MS);
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
    s_srandom (seed);
    s_random_bytes (s_ciphertext, sizeof s_ciphertext);
    s_random_bytes (s_spki, sizeof s_spki);
    static s_fuzz_t self;
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
        s_expect_free (&self.expect [i]);
    zpoller_destroy (&self.poller);
    zsock_destroy (&self.oversized);
    zsock_destroy (&self.dealer);
    return ok ? 0 : 1;
}
