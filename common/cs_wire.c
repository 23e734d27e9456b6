/*  cs_wire.c — decoding with limits, encoding, version choice.  */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/crypto.h>
#include <p11-kit/pkcs11.h>
#include "cryptoserver/pkcs11v.h"
#include "cs_wire.h"

static const Cs__Mechanism s_no_mechanism = CS__MECHANISM__INIT;

/*  What is wrong with a request: a static reason and the CK_RV of the
 *  request-level reply (docs/CONTRACTS.md "Limits").  */
typedef struct {
    const char *why;
    unsigned long rv;
} s_problem_t;

#define S_OK ((s_problem_t) { NULL, CKR_OK })
#define S_BAD(why, rv) ((s_problem_t) { (why), (rv) })

/*  Checks the key (a server-held key's ref or a per-request PKCS#8 key,
 *  exactly one of them), mechanism and data of a sign, decrypt or derive
 *  job; data_rv is the CK_RV of over-long data.  */
static s_problem_t
s_crypto_job (ProtobufCBinaryData key_id, ProtobufCBinaryData key_pkcs8,
              const Cs__Mechanism *mech, ProtobufCBinaryData data, unsigned long data_rv)
{
    if ((key_id.len > 0) == (key_pkcs8.len > 0))
        return S_BAD ("job needs exactly one of key_id and key_pkcs8", CKR_DEVICE_ERROR);
    if (key_id.len > CS_WIRE_MAX_REF)
        return S_BAD ("key id too long", CKR_KEY_HANDLE_INVALID);
    if (key_pkcs8.len > CS_WIRE_MAX_KEY_DER)
        return S_BAD ("per-request key over CS_WIRE_MAX_KEY_DER bytes", CKR_KEY_SIZE_RANGE);
    if (!mech)
        return S_BAD ("job without mechanism", CKR_DEVICE_ERROR);
    if (mech->oaep_label.len > CS_WIRE_MAX_LABEL)
        return S_BAD ("OAEP label too long", CKR_MECHANISM_PARAM_INVALID);
    if (mech->context.len > 255)
        return S_BAD ("context over 255 bytes", CKR_MECHANISM_PARAM_INVALID);   /* FIPS 204 §5.2 */
    if (data.len > CS_WIRE_MAX_DATA)
        return S_BAD ("job data over CS_WIRE_MAX_DATA bytes", data_rv);
    return S_OK;
}

/*  Checks the count and sizes of a template.  */
static s_problem_t
s_template (size_t count, Cs__Attribute **attributes)
{
    if (count > CS_WIRE_MAX_ATTRIBUTES)
        return S_BAD ("template over CS_WIRE_MAX_ATTRIBUTES attributes", CKR_TEMPLATE_INCONSISTENT);
    for (size_t i = 0; i < count; i++)
        if (attributes [i]->value_case == CS__ATTRIBUTE__VALUE_BYTES
        &&  attributes [i]->bytes.len > CS_WIRE_MAX_ATTR_BYTES)
            return S_BAD ("attribute value over CS_WIRE_MAX_ATTR_BYTES bytes", CKR_ATTRIBUTE_VALUE_INVALID);
    return S_OK;
}

static s_problem_t
s_ref (const char *ref, size_t count, Cs__Attribute **attributes)
{
    if (!ref || !*ref || strlen (ref) > CS_WIRE_MAX_REF)
        return S_BAD ("bad key ref", CKR_OBJECT_HANDLE_INVALID);
    return s_template (count, attributes);
}

static s_problem_t
s_generate_job (const Cs__GenerateKeyPairJob *gen)
{
    if (gen->public_exponent.len > 16)
        return S_BAD ("public exponent too long", CKR_ATTRIBUTE_VALUE_INVALID);
    if (gen->ec_params.len > 256)
        return S_BAD ("curve parameters too long", CKR_DOMAIN_PARAMS_INVALID);
    s_problem_t problem = s_template (gen->n_public_template, gen->public_template);
    return problem.why ? problem : s_template (gen->n_private_template, gen->private_template);
}

static s_problem_t
s_import_job (const Cs__ImportKeyJob *imp)
{
    if ((imp->private_pkcs8.len > 0) + (imp->public_spki.len > 0) + (imp->secret_value.len > 0) != 1)
        return S_BAD ("import job needs exactly one key", CKR_DEVICE_ERROR);
    if (imp->private_pkcs8.len > CS_WIRE_MAX_KEY_DER || imp->public_spki.len > CS_WIRE_MAX_KEY_DER)
        return S_BAD ("imported key over CS_WIRE_MAX_KEY_DER bytes", CKR_KEY_SIZE_RANGE);
    if (imp->secret_value.len > CS_WIRE_MAX_SYM_KEY)
        return S_BAD ("imported secret key over CS_WIRE_MAX_SYM_KEY bytes", CKR_ATTRIBUTE_VALUE_INVALID);
    return s_template (imp->n_template_, imp->template_);
}

//  C_GenerateKey of a token secret key: a size that fits a SymJob.
static s_problem_t
s_generate_key_job (const Cs__GenerateKeyJob *gen)
{
    if (gen->value_len > CS_WIRE_MAX_SYM_KEY)
        return S_BAD ("secret key over CS_WIRE_MAX_SYM_KEY bytes", CKR_KEY_SIZE_RANGE);
    return s_template (gen->n_template_, gen->template_);
}

//  A certificate or data object: a known class, a ref when replacing, its
//  attributes within the limits (CKA_VALUE up to CS_WIRE_MAX_OBJECT_VALUE).
static s_problem_t
s_object (const Cs__ObjectInfo *object)
{
    if (!object || (object->object_class != CKO_CERTIFICATE && object->object_class != CKO_DATA))
        return S_BAD ("object job without a certificate or data object", CKR_TEMPLATE_INCONSISTENT);
    if (object->ref && strlen (object->ref) > CS_WIRE_MAX_REF)
        return S_BAD ("bad object ref", CKR_OBJECT_HANDLE_INVALID);
    if (object->n_attributes > CS_WIRE_MAX_ATTRIBUTES)
        return S_BAD ("template over CS_WIRE_MAX_ATTRIBUTES attributes", CKR_TEMPLATE_INCONSISTENT);
    for (size_t i = 0; i < object->n_attributes; i++) {
        const Cs__Attribute *attr = object->attributes [i];
        size_t max = attr->type == CKA_VALUE ? CS_WIRE_MAX_OBJECT_VALUE : CS_WIRE_MAX_ATTR_BYTES;
        if (attr->value_case == CS__ATTRIBUTE__VALUE_BYTES && attr->bytes.len > max)
            return S_BAD ("object attribute value too long", CKR_ATTRIBUTE_VALUE_INVALID);
    }
    return S_OK;
}

static s_problem_t
s_pin (ProtobufCBinaryData pin)
{
    return pin.len <= CS_WIRE_MAX_PIN ? S_OK : S_BAD ("PIN too long", CKR_PIN_LEN_RANGE);
}

static s_problem_t
s_key_job (const Cs__Job *job)
{
    switch (job->kind_case) {
        case CS__JOB__KIND_GENERATE_KEY_PAIR:
            return s_generate_job (job->generate_key_pair);
        case CS__JOB__KIND_IMPORT_KEY:
            return s_import_job (job->import_key);
        case CS__JOB__KIND_GENERATE_KEY:
            return s_generate_key_job (job->generate_key);
        case CS__JOB__KIND_DESTROY_KEY:
            return s_ref (job->destroy_key->ref, 0, NULL);
        case CS__JOB__KIND_SET_KEY_ATTRIBUTES:
            return s_ref (job->set_key_attributes->ref, job->set_key_attributes->n_attributes,
                          job->set_key_attributes->attributes);
        case CS__JOB__KIND_COPY_KEY:
            return s_ref (job->copy_key->ref, job->copy_key->n_attributes, job->copy_key->attributes);
        case CS__JOB__KIND_PUT_OBJECT:
            return s_object (job->put_object->object);
        case CS__JOB__KIND_DESTROY_OBJECT:
            return s_ref (job->destroy_object->ref, 0, NULL);
        case CS__JOB__KIND_LIST_OBJECTS:
            return S_OK;
        case CS__JOB__KIND_INIT_PIN:
            return s_pin (job->init_pin->pin);
        case CS__JOB__KIND_SET_PIN: {
            s_problem_t problem = s_pin (job->set_pin->old_pin);
            return problem.why ? problem : s_pin (job->set_pin->new_pin);
        }
        default:
            return S_BAD ("job of unknown kind", CKR_DEVICE_ERROR);
    }
}

//  C_Verify with CKM_ML_DSA (issue #23): a public key, message and
//  signature within the limits (the board checks their exact sizes).
static s_problem_t
s_verify_job (const Cs__VerifyJob *verify)
{
    if (!verify->mechanism)
        return S_BAD ("job without mechanism", CKR_DEVICE_ERROR);
    if (verify->mechanism->context.len > 255)
        return S_BAD ("context over 255 bytes", CKR_MECHANISM_PARAM_INVALID);
    if (verify->public_value.len > CS_WIRE_MAX_KEY_DER)
        return S_BAD ("verify job: public key over CS_WIRE_MAX_KEY_DER bytes", CKR_KEY_SIZE_RANGE);
    if (verify->data.len > CS_WIRE_MAX_DATA || verify->signature.len > CS_WIRE_MAX_DATA)
        return S_BAD ("verify job: data or signature over CS_WIRE_MAX_DATA bytes", CKR_DATA_LEN_RANGE);
    return S_OK;
}

static s_problem_t
s_job (const Cs__Job *job)
{
    const Cs__DeriveJob *derive = job->derive;
    switch (job->kind_case) {
        case CS__JOB__KIND_HELLO:
        case CS__JOB__KIND_LIST_KEYS:
            return S_OK;
        case CS__JOB__KIND_LOGIN:
            return s_pin (job->login->pin);
        case CS__JOB__KIND_SIGN:
            return s_crypto_job (job->sign->key_id, job->sign->key_pkcs8, job->sign->mechanism,
                                 job->sign->data, CKR_DATA_LEN_RANGE);
        case CS__JOB__KIND_DECRYPT:
            return s_crypto_job (job->decrypt->key_id, job->decrypt->key_pkcs8, job->decrypt->mechanism,
                                 job->decrypt->data, CKR_ENCRYPTED_DATA_LEN_RANGE);
        case CS__JOB__KIND_DERIVE:
            if (derive->public_data.len == 0 || derive->public_data.len > CS_WIRE_MAX_EC_POINT)
                return S_BAD ("derive job: peer point empty or too long", CKR_MECHANISM_PARAM_INVALID);
            return s_crypto_job (derive->key_id, derive->key_pkcs8, &s_no_mechanism,
                                 derive->public_data, CKR_MECHANISM_PARAM_INVALID);
        case CS__JOB__KIND_VERIFY:
            return s_verify_job (job->verify);
        case CS__JOB__KIND_ENCAPSULATE:
            if (job->encapsulate->public_value.len > CS_WIRE_MAX_KEY_DER)
                return S_BAD ("encapsulate job: public key over CS_WIRE_MAX_KEY_DER bytes", CKR_KEY_SIZE_RANGE);
            return S_OK;
        case CS__JOB__KIND_DECAPSULATE:
            return s_crypto_job (job->decapsulate->key_id, job->decapsulate->key_pkcs8, &s_no_mechanism,
                                 job->decapsulate->ciphertext, CKR_ENCRYPTED_DATA_LEN_RANGE);
        case CS__JOB__KIND_SYM:
            if ((job->sym->key_value.len > 0) == (job->sym->key_id.len > 0))
                return S_BAD ("sym job needs exactly one of key_value and key_id", CKR_DEVICE_ERROR);
            if (job->sym->key_value.len > CS_WIRE_MAX_SYM_KEY)
                return S_BAD ("sym job: key value too long", CKR_KEY_SIZE_RANGE);
            if (job->sym->key_id.len > CS_WIRE_MAX_REF)
                return S_BAD ("key id too long", CKR_KEY_HANDLE_INVALID);
            if (job->sym->data.len > CS_WIRE_MAX_SYM_DATA || job->sym->aad.len > CS_WIRE_MAX_SYM_DATA
            ||  job->sym->iv.len > 256)
                return S_BAD ("sym job: data, AAD or IV too long", CKR_DATA_LEN_RANGE);
            return S_OK;
        default:
            return s_key_job (job);
    }
}

/*  A ModexpJob's sizes and form; `has_operands`: an earlier ModexpJob of
 *  the request carries operands (proto: a job without takes those).  */
static s_problem_t
s_modexp_job (const Cs__ModexpJob *job, bool has_operands)
{
    const ProtobufCBinaryData *numbers [] = { &job->exponent, &job->modulus, &job->prime1, &job->prime2,
                                              &job->exponent1, &job->exponent2, &job->coefficient,
                                              &job->public_exponent };
    for (size_t i = 0; i < sizeof numbers / sizeof numbers [0]; i++)
        if (numbers [i]->len > CS_WIRE_MAX_MODEXP_BYTES)
            return S_BAD ("modexp job: operand over CS_WIRE_MAX_MODEXP_BYTES", CKR_DATA_LEN_RANGE);
    if (job->base_value.len == 0 || job->base_value.len > CS_WIRE_MAX_DATA)
        return S_BAD ("modexp job: base empty or over CS_WIRE_MAX_DATA bytes", CKR_DATA_LEN_RANGE);
    if (job->modulus.len && job->prime1.len)
        return S_BAD ("modexp job: both a modulus and primes", CKR_MECHANISM_PARAM_INVALID);
    if (job->prime1.len && (!job->prime2.len || !job->exponent1.len || !job->exponent2.len
                            || !job->coefficient.len))
        return S_BAD ("modexp job: incomplete CRT key", CKR_MECHANISM_PARAM_INVALID);
    if (!job->modulus.len && !job->prime1.len && !has_operands)
        return S_BAD ("modexp job: no operands", CKR_MECHANISM_PARAM_INVALID);
    return S_OK;
}

/*  The request-level checks, then every job's.  */
static s_problem_t
s_request (const Cs__Request *req)
{
    if (req->n_jobs == 0)
        return S_BAD ("request has no jobs", CKR_DEVICE_ERROR);
    if (req->n_jobs > CS_WIRE_MAX_JOBS)
        return S_BAD ("request over CS_WIRE_MAX_JOBS jobs", CKR_DEVICE_MEMORY);
    if (req->ticket.len > CS_WIRE_MAX_TICKET)
        return S_BAD ("ticket too long", CKR_DEVICE_ERROR);
    bool modexp_operands = false;
    for (size_t i = 0; i < req->n_jobs; i++) {
        const Cs__Job *job = req->jobs [i];
        s_problem_t problem = job->kind_case == CS__JOB__KIND_MODEXP
                            ? s_modexp_job (job->modexp, modexp_operands) : s_job (job);
        if (problem.why)
            return problem;
        if (job->kind_case == CS__JOB__KIND_MODEXP && (job->modexp->modulus.len || job->modexp->prime1.len))
            modexp_operands = true;
    }
    return S_OK;
}

Cs__Request *
cs_wire_request_check (const void *data, size_t size, const char **why_p, unsigned long *rv_p)
{
    s_problem_t problem = S_OK;
    Cs__Request *req = NULL;
    if (!data || size == 0)
        problem = S_BAD ("empty request", CKR_DEVICE_ERROR);
    else
    if (size > CS_WIRE_MAX_MESSAGE)
        problem = S_BAD ("request over CS_WIRE_MAX_MESSAGE bytes", CKR_DEVICE_MEMORY);
    else
    if (!cs_wire_request_scan (data, size, &problem.why, &problem.rv))
        ;                               /* refused before anything is allocated */
    else
    if (!(req = cs_wire_request_unpack (data, size)))
        problem = S_BAD ("request is not a valid message", CKR_DEVICE_ERROR);
    else
        problem = s_request (req);
    if (problem.why && req) {
        cs__request__free_unpacked (req, NULL);
        req = NULL;
    }
    if (why_p)
        *why_p = problem.why;
    if (rv_p)
        *rv_p = problem.rv;
    return req;
}

Cs__Request *
cs_wire_request_decode (const void *data, size_t size, const char **why_p)
{
    return cs_wire_request_check (data, size, why_p, NULL);
}

Cs__Reply *
cs_wire_reply_decode (const void *data, size_t size, const char **why_p)
{
    const char *why = NULL;
    Cs__Reply *reply = NULL;
    if (!data || size == 0)
        why = "empty reply";
    else
    if (size > CS_WIRE_MAX_REPLY)
        why = "reply too large";
    else
    if (!(reply = cs__reply__unpack (NULL, size, data)))
        why = "reply is not a valid message";
    else
    if (reply->n_results > CS_WIRE_MAX_JOBS)
        why = "reply has too many results";
    else
    if (reply->ticket.len > CS_WIRE_MAX_TICKET)
        why = "reply ticket too long";
    if (why && reply) {
        cs__reply__free_unpacked (reply, NULL);
        reply = NULL;
    }
    if (why_p)
        *why_p = why;
    return reply;
}

static void
s_wipe_bytes (ProtobufCBinaryData bytes)
{
    if (bytes.data && bytes.len)
        OPENSSL_cleanse (bytes.data, bytes.len);
}

void
cs_wire_reply_wipe (Cs__Reply *reply)
{
    for (size_t i = 0; reply && i < reply->n_results; i++) {
        const Cs__Result *result = reply->results [i];
        if (result->kind_case == CS__RESULT__KIND_DATA)
            s_wipe_bytes (result->data);
        else
        if (result->kind_case == CS__RESULT__KIND_GENERATED && result->generated)
            s_wipe_bytes (result->generated->private_pkcs8);
        else
        if (result->kind_case == CS__RESULT__KIND_LOGIN && result->login)
            s_wipe_bytes (result->login->ticket);
    }
}

void
cs_wire_reply_free (Cs__Reply **reply_p)
{
    if (!reply_p || !*reply_p)
        return;
    cs_wire_reply_wipe (*reply_p);
    cs__reply__free_unpacked (*reply_p, NULL);
    *reply_p = NULL;
}

static void
s_frame_release (void *data, size_t size)
{
    (void) size;
    free (data);
}

void (*cs_wire_frame_release) (void *data, size_t size) = s_frame_release;

void
cs_wire_frame_free (void *data, void *hint)
{
    size_t size = (size_t) (uintptr_t) hint;
    if (data && size)
        OPENSSL_cleanse (data, size);
    cs_wire_frame_release (data, size);
}

uint8_t *
cs_wire_encode (const ProtobufCMessage *msg, size_t *size_p)
{
    size_t size = protobuf_c_message_get_packed_size (msg);
    uint8_t *buf = malloc (size ? size : 1);
    if (!buf)
        return NULL;
    *size_p = protobuf_c_message_pack (msg, buf);
    return buf;
}

uint32_t
cs_wire_version_choose (uint32_t peer_min, uint32_t peer_max)
{
    uint32_t high = peer_max < CS_PROTOCOL_VERSION ? peer_max : CS_PROTOCOL_VERSION;
    uint32_t low = peer_min > CS_PROTOCOL_VERSION_MIN ? peer_min : CS_PROTOCOL_VERSION_MIN;
    return high >= low ? high : 0;
}

const char *
cs_rv_name (unsigned long rv)
{
    static const struct { unsigned long rv; const char *name; } names [] = {
#define N(x) { x, #x }
        N (CKR_OK), N (CKR_CANCEL), N (CKR_HOST_MEMORY), N (CKR_SLOT_ID_INVALID),
        N (CKR_GENERAL_ERROR), N (CKR_FUNCTION_FAILED), N (CKR_ARGUMENTS_BAD),
        N (CKR_ATTRIBUTE_READ_ONLY), N (CKR_ATTRIBUTE_SENSITIVE),
        N (CKR_ATTRIBUTE_TYPE_INVALID), N (CKR_ATTRIBUTE_VALUE_INVALID),
        N (CKR_DATA_INVALID), N (CKR_DATA_LEN_RANGE), N (CKR_DEVICE_ERROR),
        N (CKR_DEVICE_MEMORY), N (CKR_DEVICE_REMOVED), N (CKR_ENCRYPTED_DATA_INVALID),
        N (CKR_ENCRYPTED_DATA_LEN_RANGE), N (CKR_FUNCTION_CANCELED),
        N (CKR_FUNCTION_NOT_SUPPORTED), N (CKR_KEY_HANDLE_INVALID), N (CKR_KEY_SIZE_RANGE),
        N (CKR_KEY_TYPE_INCONSISTENT), N (CKR_KEY_FUNCTION_NOT_PERMITTED),
        N (CKR_MECHANISM_INVALID), N (CKR_MECHANISM_PARAM_INVALID),
        N (CKR_OBJECT_HANDLE_INVALID), N (CKR_OPERATION_ACTIVE),
        N (CKR_OPERATION_NOT_INITIALIZED), N (CKR_PIN_INCORRECT), N (CKR_PIN_INVALID),
        N (CKR_PIN_LEN_RANGE), N (CKR_PIN_LOCKED), N (CKR_SESSION_CLOSED),
        N (CKR_SESSION_HANDLE_INVALID), N (CKR_SESSION_READ_ONLY), N (CKR_SIGNATURE_INVALID),
        N (CKR_SIGNATURE_LEN_RANGE), N (CKR_TEMPLATE_INCOMPLETE),
        N (CKR_TEMPLATE_INCONSISTENT), N (CKR_TOKEN_NOT_PRESENT),
        N (CKR_USER_ALREADY_LOGGED_IN), N (CKR_USER_NOT_LOGGED_IN),
        N (CKR_USER_TYPE_INVALID), N (CKR_BUFFER_TOO_SMALL),
        N (CKR_CRYPTOKI_NOT_INITIALIZED), N (CKR_CRYPTOKI_ALREADY_INITIALIZED),
        N (CKR_ACTION_PROHIBITED), N (CKR_KEY_NOT_NEEDED),
        N (CKR_KEY_CHANGED), N (CKR_KEY_NEEDED), N (CKR_KEY_INDIGESTIBLE),
        N (CKR_KEY_NOT_WRAPPABLE), N (CKR_KEY_UNEXTRACTABLE), N (CKR_PIN_EXPIRED),
        N (CKR_SESSION_COUNT), N (CKR_SESSION_EXISTS), N (CKR_SESSION_PARALLEL_NOT_SUPPORTED),
        N (CKR_SESSION_READ_ONLY_EXISTS), N (CKR_SESSION_READ_WRITE_SO_EXISTS),
        N (CKR_TOKEN_WRITE_PROTECTED), N (CKR_UNWRAPPING_KEY_HANDLE_INVALID),
        N (CKR_USER_PIN_NOT_INITIALIZED), N (CKR_USER_ANOTHER_ALREADY_LOGGED_IN),
        N (CKR_USER_TOO_MANY_TYPES), N (CKR_WRAPPED_KEY_INVALID), N (CKR_WRAPPING_KEY_HANDLE_INVALID),
        N (CKR_WRAPPING_KEY_SIZE_RANGE), N (CKR_WRAPPING_KEY_TYPE_INCONSISTENT), N (CKR_WRAPPED_KEY_LEN_RANGE),
        N (CKR_UNWRAPPING_KEY_SIZE_RANGE), N (CKR_UNWRAPPING_KEY_TYPE_INCONSISTENT),
        N (CKR_RANDOM_SEED_NOT_SUPPORTED), N (CKR_RANDOM_NO_RNG), N (CKR_DOMAIN_PARAMS_INVALID),
        N (CKR_CURVE_NOT_SUPPORTED), N (CKR_SAVED_STATE_INVALID), N (CKR_INFORMATION_SENSITIVE),
        N (CKR_STATE_UNSAVEABLE), N (CKR_MUTEX_BAD), N (CKR_MUTEX_NOT_LOCKED),
        N (CKR_FUNCTION_NOT_PARALLEL), N (CKR_NEED_TO_CREATE_THREADS), N (CKR_CANT_LOCK),
        N (CKR_NO_EVENT), N (CKR_FUNCTION_REJECTED),
#undef N
    };
    for (size_t i = 0; i < sizeof names / sizeof names [0]; i++)
        if (names [i].rv == rv)
            return names [i].name;
    static __thread char buf [32];
    snprintf (buf, sizeof buf, "CKR_0x%lx", rv);
    return buf;
}
