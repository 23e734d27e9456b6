/*  key.c — the key type shared by objects, operations and jobs (key.h).  */
#include <stdlib.h>
#include <string.h>
#include "cs_secmem.h"
#include "cs_util.h"
#include "log.h"
#include "key.h"

bool
cs_key_ec_point_raw (const cs_key_t *key, const uint8_t **raw_p, size_t *len_p)
{
    const uint8_t *der = key->ec_point;
    size_t len = key->ec_point_len, header = 2, content;
    /*  Edwards and Montgomery points are raw strings (RFC 8032, RFC 7748 §5:
        X25519 32 bytes, X448 56).  */
    bool edwards = key->key_type == CKK_EC_EDWARDS, montgomery = key->key_type == CKK_EC_MONTGOMERY;
    if (!der || len < 3)
        return false;
    content = der [1];
    if (der [1] == 0x81 && len > 3) {
        content = der [2];
        header = 3;
    }
    if (der [0] == 0x04 && header + content == len
    && (edwards ? content == 32 || content == 57 : montgomery ? content == 32 || content == 56
        : content % 2 == 1 && der [header] == 0x04)) {
        *raw_p = der + header;
        *len_p = content;
        return true;
    }
    if (edwards ? len == 32 || len == 57 : montgomery ? len == 32 || len == 56 : der [0] == 0x04 && len % 2 == 1) {
        *raw_p = der;
        *len_p = len;
        return true;
    }
    return false;
}

size_t
cs_key_signature_len (const cs_key_t *key)
{
    static const size_t ml_dsa [4] = { 0, 2420, 3309, 4627 };      /* FIPS 204 Table 2 */
    if (key->key_type == CKK_ML_DSA)
        return key->parameter_set <= 3 ? ml_dsa [key->parameter_set] : 0;
    return key->key_type == CKK_RSA ? key->modulus_len : 2 * key->field_len;
}

const uint8_t *
cs_key_job_id (const cs_key_t *key, size_t *len_p)
{
    if (key->legacy_id) {
        *len_p = key->id_len;
        return key->id;
    }
    *len_p = key->ref ? strlen (key->ref) : 0;
    return (const uint8_t *) key->ref;
}

cs_key_t *
cs_key_ref (cs_key_t *key)
{
    if (key)
        __atomic_add_fetch (&key->refs, 1, __ATOMIC_SEQ_CST);
    return key;
}

void
cs_key_unref (cs_key_t **key_p)
{
    cs_key_t *key = key_p ? *key_p : NULL;
    if (!key)
        return;
    *key_p = NULL;
    if (__atomic_sub_fetch (&key->refs, 1, __ATOMIC_SEQ_CST) > 0)
        return;
    cs_secmem_free (key->pkcs8, key->pkcs8_len);
    cs_secmem_free (key->secret, key->secret_len);
    free (key->ref);
    free (key->label);
    free (key->modulus);
    free (key->exponent);
    free (key->ec_params);
    free (key->ec_point);
    free (key->value);
    free (key);
}

static int
s_copy_bytes (uint8_t **out, size_t *out_len, ProtobufCBinaryData in, bool strip_zeros)
{
    while (strip_zeros && in.len > 1 && in.data [0] == 0) {
        in.data++;
        in.len--;
    }
    *out_len = in.len;
    if (in.len == 0)
        return 0;
    if (!(*out = malloc (in.len)))
        return -1;
    memcpy (*out, in.data, in.len);
    return 0;
}

/*  The ref of a KeyInfo; "board:<hex id>" (legacy) when the broker sent none.  */
static int
s_key_ref (cs_key_t *key, const Cs__KeyInfo *info)
{
    if (info->ref && *info->ref)
        return (key->ref = strdup (info->ref)) ? 0 : -1;
    if (info->id.len == 0)
        return 0;               /* a local key (keyder): no ref */
    if (!(key->ref = malloc (6 + 2 * info->id.len + 1)))
        return -1;
    memcpy (key->ref, "board:", 6);
    cs_hex_encode (info->id.data, info->id.len, key->ref + 6);
    key->legacy_id = true;
    return 0;
}

/*  Checks the public parts of a new key and derives bits and field size.  */
static bool
s_key_complete (cs_key_t *key)
{
    const uint8_t *raw;
    size_t raw_len;
    if (key->key_type == CKK_AES || key->key_type == CKK_GENERIC_SECRET) {
        key->secret_len = key->bits / 8;        /* a token secret key: the broker holds the value */
        return key->ref && key->bits % 8 == 0 && key->secret_len > 0 && key->secret_len <= CS_WIRE_MAX_SYM_KEY;
    }
    if (key->key_type == CKK_ML_DSA || key->key_type == CKK_ML_KEM)     /* PKCS#11 3.2 */
        return key->value_len && key->parameter_set >= 1 && key->parameter_set <= 3;
    if (key->key_type == CKK_RSA) {
        if (!key->modulus_len || !key->exponent_len || key->modulus_len > CS_MAX_RSA_BYTES)
            return false;
        if (!key->bits)
            key->bits = key->modulus_len * 8;
        return true;
    }
    if (!key->ec_params_len || !cs_key_ec_point_raw (key, &raw, &raw_len))
        return false;
    /*  Edwards points are the raw encoding (RFC 8032 §5.1.2: 32 bytes for
        Ed25519, §5.2.2: 57 for Ed448); signatures are twice that.  */
    if (key->key_type == CKK_EC_MONTGOMERY) {
        key->field_len = raw_len;               /* the shared secret is as long (RFC 7748 §6) */
        key->bits = raw_len == 56 ? 448 : 255;
        return true;
    }
    key->field_len = key->key_type == CKK_EC_EDWARDS ? raw_len : (raw_len - 1) / 2;
    if (!key->bits)
        key->bits = key->key_type == CKK_EC_EDWARDS ? (raw_len == 57 ? 448 : 256) : key->field_len * 8;
    return true;
}

cs_key_t *
cs_key_new (const Cs__KeyInfo *info)
{
    cs_key_t *key = NULL;
    if (info->id.len > CS_WIRE_MAX_KEY_ID
    || (info->key_type != CKK_RSA && info->key_type != CKK_EC && info->key_type != CKK_EC_EDWARDS
        && info->key_type != CKK_EC_MONTGOMERY && info->key_type != CKK_ML_DSA && info->key_type != CKK_ML_KEM
        && info->key_type != CKK_AES && info->key_type != CKK_GENERIC_SECRET))
        return NULL;
    if (!(key = calloc (1, sizeof *key)))
        return NULL;
    key->refs = 1;
    if (info->id.len)
        memcpy (key->id, info->id.data, info->id.len);
    key->id_len = info->id.len;
    key->key_type = info->key_type;
    key->bits = info->bits;
    key->can_sign = info->can_sign;
    key->can_decrypt = info->can_decrypt;
    key->parameter_set = info->parameter_set;
    if (s_key_ref (key, info)
    ||  s_copy_bytes (&key->value, &key->value_len, info->public_value, false)
    ||  !(key->label = strdup (info->label ? info->label : ""))
    ||  s_copy_bytes (&key->modulus, &key->modulus_len, info->modulus, true)
    ||  s_copy_bytes (&key->exponent, &key->exponent_len, info->public_exponent, true)
    ||  s_copy_bytes (&key->ec_params, &key->ec_params_len, info->ec_params, false)
    ||  s_copy_bytes (&key->ec_point, &key->ec_point_len, info->ec_point, false))
        goto fail;
    if (s_key_complete (key))
        return key;
    cs_log_warning ("ignoring key '%s': incomplete public attributes", info->label ? info->label : "");
fail:
    cs_key_unref (&key);
    return NULL;
}

cs_key_t *
cs_key_new_secret (CK_KEY_TYPE key_type, const uint8_t *value, size_t len)
{
    cs_key_t *key;
    if (len == 0 || len > CS_MAX_RSA_BYTES || !(key = calloc (1, sizeof *key)))
        return NULL;
    key->refs = 1;
    key->key_type = key_type;
    key->bits = len * 8;
    if (!(key->label = strdup ("")) || !(key->secret = cs_secmem_dup (value, len))) {
        cs_key_unref (&key);
        return NULL;
    }
    key->secret_len = len;
    return key;
}

cs_key_t *
cs_key_public_only (const cs_key_t *key)
{
    Cs__KeyInfo info = CS__KEY_INFO__INIT;
    info.key_type = key->key_type;
    info.bits = (uint32_t) key->bits;
    info.label = key->label;
    info.modulus = (ProtobufCBinaryData) { key->modulus_len, key->modulus };
    info.public_exponent = (ProtobufCBinaryData) { key->exponent_len, key->exponent };
    info.ec_params = (ProtobufCBinaryData) { key->ec_params_len, key->ec_params };
    info.ec_point = (ProtobufCBinaryData) { key->ec_point_len, key->ec_point };
    info.can_sign = key->can_sign;
    info.can_decrypt = key->can_decrypt;
    info.parameter_set = key->parameter_set;
    info.public_value = (ProtobufCBinaryData) { key->value_len, key->value };
    return cs_key_new (&info);
}
