/*  cs_wire.c — decoding with limits, encoding, version choice.  */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <p11-kit/pkcs11.h>
#include "cs_wire.h"

static const Cs__Mechanism s_no_mechanism = CS__MECHANISM__INIT;

static bool
s_mechanism_ok (const Cs__Mechanism *mech)
{
    return mech && mech->oaep_label.len <= CS_WIRE_MAX_LABEL;
}

/*  Checks the key (a server-held key's ref or a per-request PKCS#8 key,
 *  exactly one of them), mechanism and data of a sign or decrypt job.  */
static bool
s_crypto_job_ok (ProtobufCBinaryData key_id, ProtobufCBinaryData key_pkcs8,
                 const Cs__Mechanism *mech, ProtobufCBinaryData data)
{
    bool by_ref = key_id.len > 0 && key_id.len <= CS_WIRE_MAX_REF && key_pkcs8.len == 0;
    bool by_value = key_id.len == 0 && key_pkcs8.len > 0 && key_pkcs8.len <= CS_WIRE_MAX_KEY_DER;
    return (by_ref || by_value) && s_mechanism_ok (mech) && data.len <= CS_WIRE_MAX_DATA;
}

/*  Checks the count and sizes of a template.  */
static bool
s_template_ok (size_t count, Cs__Attribute **attributes)
{
    if (count > CS_WIRE_MAX_ATTRIBUTES)
        return false;
    for (size_t i = 0; i < count; i++)
        if (attributes [i]->value_case == CS__ATTRIBUTE__VALUE_BYTES
        &&  attributes [i]->bytes.len > CS_WIRE_MAX_ATTR_BYTES)
            return false;
    return true;
}

static bool
s_ref_ok (const char *ref)
{
    return ref && *ref && strlen (ref) <= CS_WIRE_MAX_REF;
}

static const char *
s_key_job_problem (const Cs__Job *job)
{
    const Cs__GenerateKeyPairJob *gen = job->generate_key_pair;
    const Cs__ImportKeyJob *imp = job->import_key;
    switch (job->kind_case) {
        case CS__JOB__KIND_GENERATE_KEY_PAIR:
            return gen->public_exponent.len <= 16 && gen->ec_params.len <= 256
                && s_template_ok (gen->n_public_template, gen->public_template)
                && s_template_ok (gen->n_private_template, gen->private_template)
                   ? NULL : "bad generate job (exponent, curve or template size)";
        case CS__JOB__KIND_IMPORT_KEY:
            return (imp->private_pkcs8.len > 0) != (imp->public_spki.len > 0)
                && imp->private_pkcs8.len <= CS_WIRE_MAX_KEY_DER
                && imp->public_spki.len <= CS_WIRE_MAX_KEY_DER
                && s_template_ok (imp->n_template_, imp->template_)
                   ? NULL : "bad import job (needs one key of bounded size)";
        case CS__JOB__KIND_DESTROY_KEY:
            return s_ref_ok (job->destroy_key->ref) ? NULL : "bad destroy job";
        case CS__JOB__KIND_SET_KEY_ATTRIBUTES:
            return s_ref_ok (job->set_key_attributes->ref)
                && s_template_ok (job->set_key_attributes->n_attributes,
                                  job->set_key_attributes->attributes)
                   ? NULL : "bad set-attributes job";
        case CS__JOB__KIND_COPY_KEY:
            return s_ref_ok (job->copy_key->ref)
                && s_template_ok (job->copy_key->n_attributes, job->copy_key->attributes)
                   ? NULL : "bad copy job";
        case CS__JOB__KIND_DERIVE:
            return s_crypto_job_ok (job->derive->key_id, job->derive->key_pkcs8,
                                    &s_no_mechanism, job->derive->public_data)
                && job->derive->public_data.len > 0 && job->derive->public_data.len <= 1024
                   ? NULL : "bad derive job (key or public data size)";
        case CS__JOB__KIND_INIT_PIN:
            return job->init_pin->pin.len <= CS_WIRE_MAX_PIN ? NULL : "PIN too long";
        case CS__JOB__KIND_SET_PIN:
            return job->set_pin->old_pin.len <= CS_WIRE_MAX_PIN
                && job->set_pin->new_pin.len <= CS_WIRE_MAX_PIN ? NULL : "PIN too long";
        default:
            return "job of unknown kind";
    }
}

static const char *
s_job_problem (const Cs__Job *job)
{
    switch (job->kind_case) {
        case CS__JOB__KIND_HELLO:
        case CS__JOB__KIND_LIST_KEYS:
            return NULL;
        case CS__JOB__KIND_LOGIN:
            return job->login->pin.len <= CS_WIRE_MAX_PIN ? NULL : "PIN too long";
        case CS__JOB__KIND_SIGN:
            return s_crypto_job_ok (job->sign->key_id, job->sign->key_pkcs8,
                                    job->sign->mechanism, job->sign->data)
                   ? NULL : "bad sign job (key id, mechanism or data size)";
        case CS__JOB__KIND_DECRYPT:
            return s_crypto_job_ok (job->decrypt->key_id, job->decrypt->key_pkcs8,
                                    job->decrypt->mechanism, job->decrypt->data)
                   ? NULL : "bad decrypt job (key id, mechanism or data size)";
        default:
            return s_key_job_problem (job);
    }
}

Cs__Request *
cs_wire_request_decode (const void *data, size_t size, const char **why_p)
{
    const char *why = NULL;
    Cs__Request *req = NULL;
    if (!data || size == 0)
        why = "empty request";
    else
    if (size > CS_WIRE_MAX_MESSAGE)
        why = "request too large";
    else
    if (!(req = cs__request__unpack (NULL, size, data)))
        why = "request is not a valid message";
    else
    if (req->n_jobs == 0)
        why = "request has no jobs";
    else
    if (req->n_jobs > CS_WIRE_MAX_JOBS)
        why = "request has too many jobs";
    else
    if (req->ticket.len > CS_WIRE_MAX_TICKET)
        why = "ticket too long";
    for (size_t i = 0; req && !why && i < req->n_jobs; i++)
        why = s_job_problem (req->jobs [i]);
    if (why && req) {
        cs__request__free_unpacked (req, NULL);
        req = NULL;
    }
    if (why_p)
        *why_p = why;
    return req;
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
