/*  frames_requests.c — the valid requests cs-fuzz-frames starts every
 *  message from (frames.h): the fuzzer's own random numbers, the
 *  known-good parts of each job kind, and the tickets of the three paths.
 */
#include <p11-kit/pkcs11.h>
#include "frames.h"

#define S_ID_BASE (UINT64_C (1) << 40)          /* request ids of fuzzed messages */
#define S_MAX_JOBS 4                /* jobs in one fuzzed request */

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
long
frames_random (void)
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
    switch (frames_random () % 12) {
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
s_ticket (const frames_t *self, frames_path_t path, uint8_t *out)
{
    if (path == S_TICKET_NONE)
        return 0;
    memcpy (out, self->ticket, TICKET_LEN);
    if (path == S_TICKET_REAL)
        return TICKET_LEN;
    switch (self->logged_in ? frames_random () % 5 : 4) {
        case 0:                                 /* one bit flipped */
            out [(size_t) frames_random () % TICKET_LEN] ^= (uint8_t) (1u << (frames_random () % 8));
            return TICKET_LEN;
        case 1:                                 /* a byte short */
            return TICKET_LEN - 1;
        case 2:                                 /* a byte long */
            out [TICKET_LEN] = (uint8_t) frames_random ();
            return TICKET_LEN + 1;
        case 3:                                 /* the USER ticket's MAC as SO */
            out [0] = (uint8_t) CKU_SO;
            return TICKET_LEN;
        default:                                /* random bytes */
            for (size_t i = 0; i < TICKET_LEN; i++)
                out [i] = (uint8_t) frames_random ();
            if (self->logged_in && memcmp (out, self->ticket, TICKET_LEN) == 0)
                out [1] ^= 1;
            return TICKET_LEN;
    }
}

/*  A valid request of 1..S_MAX_JOBS random jobs with a fresh request id and
 *  the ticket of path, asking for per-job replies or not.  Caller frees the returned buffer of *size_p bytes.  */
uint8_t *
frames_valid_request (frames_t *self, frames_path_t path, size_t *size_p)
{
    s_job_t jobs [S_MAX_JOBS];
    Cs__Job *job_ptrs [S_MAX_JOBS];
    uint8_t ticket [TICKET_LEN + 1];
    Cs__Request req = CS__REQUEST__INIT;
    req.n_jobs = 1 + (size_t) frames_random () % S_MAX_JOBS;
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
    req.per_job_replies = frames_random () % 2 == 0;     /* half of them: one reply per job */
    return cs_wire_encode (&req.base, size_p);
}

void
frames_random_bytes (uint8_t *buf, size_t len)
{
    for (size_t i = 0; i < len; i++)
        buf [i] = (uint8_t) frames_random ();
}

void
frames_seed (unsigned seed)
{
    s_srandom (seed);
    frames_random_bytes (s_ciphertext, sizeof s_ciphertext);
    frames_random_bytes (s_spki, sizeof s_spki);
}
