/*  objattr.c — the attribute values of one key object (object_int.h):
 *  key material, private components and secret values as far as they may
 *  be read, stored attributes, and the defaults of each class.  Split from
 *  object.c.
 */
#include <stdlib.h>
#include <string.h>
#include <openssl/crypto.h>
#include "cs_attr_rules.h"
#include "cryptoserver/pkcs11v.h"
#include "keyder.h"
#include "object_int.h"

static cs_objattr_result_t
s_bool (cs_objattr_value_t *value, bool flag)
{
    value->flag = flag ? CK_TRUE : CK_FALSE;
    value->data = &value->flag;
    value->len = sizeof value->flag;
    return CS_OBJATTR_OK;
}

static cs_objattr_result_t
s_ulong (cs_objattr_value_t *value, CK_ULONG number)
{
    value->number = number;
    value->data = &value->number;
    value->len = sizeof value->number;
    return CS_OBJATTR_OK;
}

static cs_objattr_result_t
s_bytes (cs_objattr_value_t *value, const void *data, size_t len)
{
    value->data = len ? data : "";
    value->len = len;
    return CS_OBJATTR_OK;
}

void
cs_objattr_value_wipe (cs_objattr_value_t *value)
{
    if (value->data == value->secret)
        OPENSSL_cleanse (value->secret, sizeof value->secret);
}

/*  True for the PKCS#11 3.2 key types with a CKA_PARAMETER_SET.  */
static bool
s_pq (const cs_key_t *key)
{
    return key->key_type == CKK_ML_DSA || key->key_type == CKK_ML_KEM;
}

/*  The key material (never stored, never changed); an ML-DSA or ML-KEM
 *  key has no CKA_EC_PARAMS or CKA_EC_POINT but CKA_PARAMETER_SET.  */
static cs_objattr_result_t
s_attr_material (const cs_object_t *object, CK_ATTRIBUTE_TYPE type, cs_objattr_value_t *value)
{
    const cs_key_t *key = object->key;
    bool rsa = key->key_type == CKK_RSA, secret = object->klass == CKO_SECRET_KEY;
    if (secret && type != CKA_CLASS && type != CKA_KEY_TYPE)
        return type == CKA_VALUE_LEN ? s_ulong (value, key->secret_len) : CS_OBJATTR_INVALID;
    switch (type) {
        case CKA_CLASS:           return s_ulong (value, object->klass);
        case CKA_KEY_TYPE:        return s_ulong (value, key->key_type);
        case CKA_MODULUS:         return rsa ? s_bytes (value, key->modulus, key->modulus_len) : CS_OBJATTR_INVALID;
        case CKA_PUBLIC_EXPONENT: return rsa ? s_bytes (value, key->exponent, key->exponent_len) : CS_OBJATTR_INVALID;
        case CKA_MODULUS_BITS:
            return rsa && object->klass == CKO_PUBLIC_KEY ? s_ulong (value, key->bits) : CS_OBJATTR_INVALID;
        case CKA_EC_PARAMS:       return rsa || s_pq (key) ? CS_OBJATTR_INVALID : s_bytes (value, key->ec_params, key->ec_params_len);
        case CKA_EC_POINT:        return rsa || s_pq (key) ? CS_OBJATTR_INVALID : s_bytes (value, key->ec_point, key->ec_point_len);
        case CKA_PARAMETER_SET:   return s_pq (key) ? s_ulong (value, key->parameter_set) : CS_OBJATTR_INVALID;
        default:                  return CS_OBJATTR_INVALID;
    }
}

bool
cs_objattr_is_material (CK_ATTRIBUTE_TYPE type)
{
    return type == CKA_CLASS || type == CKA_KEY_TYPE || type == CKA_MODULUS || type == CKA_PUBLIC_EXPONENT
        || type == CKA_MODULUS_BITS || type == CKA_EC_PARAMS || type == CKA_EC_POINT || type == CKA_VALUE_LEN
        || type == CKA_PARAMETER_SET;
}

/*  Defaults of every key object (PKCS#11 2.40 §4.4, §4.5, §4.7).  Board
 *  keys are neither modifiable nor destroyable here; keystore and session
 *  keys are.  */
static cs_objattr_result_t
s_attr_common (const cs_object_t *object, CK_ATTRIBUTE_TYPE type, cs_objattr_value_t *value)
{
    const cs_key_t *key = object->key;
    bool managed = !object->ref || (!key->legacy_id && strncmp (object->ref, "ks:", 3) == 0);
    switch (type) {
        case CKA_ID:             return s_bytes (value, key->id, key->id_len);
        case CKA_LABEL:          return s_bytes (value, key->label, strlen (key->label));
        case CKA_TOKEN:          return s_bool (value, object->ref != NULL);
        case CKA_PRIVATE:        return s_bool (value, object->klass != CKO_PUBLIC_KEY);
        case CKA_MODIFIABLE:
        case CKA_COPYABLE:
        case CKA_DESTROYABLE:    return s_bool (value, managed);
        case CKA_LOCAL:
        case CKA_DERIVE:
        case CKA_CS_SHARED:      return s_bool (value, false);     /* TRUE only when stored: a shared key */
        case CKA_KEY_GEN_MECHANISM: return s_ulong (value, CK_UNAVAILABLE_INFORMATION);
        case CKA_ALLOWED_MECHANISMS:        /* empty: every mechanism (§4.4 table 25) */
        case CKA_START_DATE:
        case CKA_END_DATE:
        case CKA_SUBJECT:        return s_bytes (value, "", 0);
        default:                 return CS_OBJATTR_INVALID;
    }
}

static cs_objattr_result_t
s_attr_public (const cs_key_t *key, CK_ATTRIBUTE_TYPE type, cs_objattr_value_t *value)
{
    switch (type) {
        case CKA_VERIFY:         return s_bool (value, key->key_type != CKK_ML_KEM);
        case CKA_ENCAPSULATE:    return s_bool (value, key->key_type == CKK_ML_KEM);     /* PKCS#11 3.2 */
        case CKA_ENCRYPT:
        case CKA_VERIFY_RECOVER: return s_bool (value, key->key_type == CKK_RSA);
        case CKA_WRAP:
        case CKA_TRUSTED:        return s_bool (value, false);
        default:                 return CS_OBJATTR_INVALID;
    }
}

static cs_objattr_result_t
s_attr_private (const cs_key_t *key, CK_ATTRIBUTE_TYPE type, cs_objattr_value_t *value)
{
    switch (type) {
        case CKA_SIGN:              return s_bool (value, key->can_sign);
        case CKA_SIGN_RECOVER:      return s_bool (value, key->can_sign && key->key_type == CKK_RSA);
        case CKA_DECRYPT:           return s_bool (value, key->can_decrypt && key->key_type == CKK_RSA);
        case CKA_DECAPSULATE:       return s_bool (value, key->key_type == CKK_ML_KEM);    /* PKCS#11 3.2 */
        case CKA_SENSITIVE:
        case CKA_ALWAYS_SENSITIVE:
        case CKA_NEVER_EXTRACTABLE: return s_bool (value, true);
        case CKA_EXTRACTABLE:
        case CKA_UNWRAP:
        case CKA_WRAP_WITH_TRUSTED:
        case CKA_ALWAYS_AUTHENTICATE: return s_bool (value, false);
        default:                    return CS_OBJATTR_INVALID;
    }
}

/*  Defaults of a secret key (PKCS#11 2.40 §4.10); C_DeriveKey stores the
 *  template's values and the derived CKA_ALWAYS_SENSITIVE and
 *  CKA_NEVER_EXTRACTABLE over these.  */
static cs_objattr_result_t
s_attr_secret_key (CK_ATTRIBUTE_TYPE type, cs_objattr_value_t *value)
{
    switch (type) {
        case CKA_SENSITIVE:
        case CKA_ALWAYS_SENSITIVE:
        case CKA_NEVER_EXTRACTABLE: return s_bool (value, true);
        case CKA_EXTRACTABLE:
        case CKA_ENCRYPT: case CKA_DECRYPT: case CKA_SIGN: case CKA_VERIFY:
        case CKA_WRAP: case CKA_UNWRAP: case CKA_WRAP_WITH_TRUSTED: case CKA_TRUSTED:
                                    return s_bool (value, false);
        default:                    return CS_OBJATTR_INVALID;
    }
}

bool
cs_objattr_flag (const cs_object_t *object, CK_ATTRIBUTE_TYPE type, bool dflt)
{
    cs_objattr_value_t value = { 0 };
    return cs_objattr_get (object, type, &value) == CS_OBJATTR_OK && value.len == 1 ? *(const CK_BBOOL *) value.data != 0 : dflt;
}

/*  Private components and secret values: sensitive while the key is
 *  CKA_SENSITIVE or not CKA_EXTRACTABLE (cs_attr_read_sensitive: PKCS#11
 *  2.40 table 10 footnote 7), and always for a server-held private key
 *  (its material never leaves the broker).  */
static cs_objattr_result_t
s_attr_secret (const cs_object_t *object, CK_ATTRIBUTE_TYPE type, cs_objattr_value_t *value)
{
    size_t len;
    bool rsa = object->key->key_type == CKK_RSA;
    bool sensitive = cs_attr_read_sensitive (object->klass, type, cs_objattr_flag (object, CKA_SENSITIVE, true),
                                             cs_objattr_flag (object, CKA_EXTRACTABLE, false));
    if (object->klass == CKO_PUBLIC_KEY && type == CKA_VALUE && s_pq (object->key))
        return s_bytes (value, object->key->value, object->key->value_len);    /* PKCS#11 3.2: pk / ek */
    if (object->klass == CKO_SECRET_KEY && type == CKA_VALUE) {
        if (!object->key->secret        /* a token secret key: its value never leaves the broker */
        ||  sensitive || object->key->secret_len > sizeof value->secret)
            return CS_OBJATTR_SENSITIVE;
        memcpy (value->secret, object->key->secret, object->key->secret_len);
        value->data = value->secret;
        value->len = object->key->secret_len;
        return CS_OBJATTR_OK;
    }
    if (object->klass != CKO_PRIVATE_KEY || (!rsa && type != CKA_VALUE) || (rsa && type == CKA_VALUE))
        return CS_OBJATTR_INVALID;
    if (object->ref || !object->key->pkcs8 || sensitive)
        return CS_OBJATTR_SENSITIVE;
    if (!(len = cs_keyder_component (object->key, type, value->secret, sizeof value->secret)))
        return CS_OBJATTR_SENSITIVE;
    value->data = value->secret;
    value->len = len;
    return CS_OBJATTR_OK;
}

/*  The value of one attribute of a (live) object: key material, secrets,
 *  then the stored attributes, then the defaults of its class.  */
cs_objattr_result_t
cs_objattr_get (const cs_object_t *object, CK_ATTRIBUTE_TYPE type, cs_objattr_value_t *value)
{
    const cs_attr_t *stored;
    cs_objattr_result_t kind;
    if (cs_objattr_is_material (type))
        return s_attr_material (object, type, value);
    if (cs_attr_kind (type) == CS_ATTR_SECRET)
        return s_attr_secret (object, type, value);
    if ((stored = cs_attrs_find (&object->attrs, type)))
        return s_bytes (value, stored->value, stored->len);
    if ((kind = s_attr_common (object, type, value)) != CS_OBJATTR_INVALID)
        return kind;
    if (object->klass == CKO_PUBLIC_KEY)
        return s_attr_public (object->key, type, value);
    if (object->klass == CKO_SECRET_KEY)
        return s_attr_secret_key (type, value);
    return s_attr_private (object->key, type, value);
}

/*  ---- roles (common/cs_usage.h) ---------------------------------------------- */

/*  The role attributes of cs_usage.h.  */
static const CK_ATTRIBUTE_TYPE s_role_types [] = {
    CKA_ENCRYPT, CKA_DECRYPT, CKA_SIGN, CKA_SIGN_RECOVER, CKA_WRAP, CKA_UNWRAP, CKA_DERIVE,
    CKA_ENCAPSULATE, CKA_DECAPSULATE
};

bool
cs_objattr_role_of (CK_OBJECT_CLASS klass, CK_ATTRIBUTE_TYPE type)
{
    switch (klass) {        /* a switch, not the attribute table's scan: C_SignInit pays seven */
        case CKO_PUBLIC_KEY:  return type == CKA_WRAP || type == CKA_ENCAPSULATE;
        case CKO_PRIVATE_KEY: return type == CKA_DECRYPT || type == CKA_SIGN || type == CKA_SIGN_RECOVER
                                  || type == CKA_UNWRAP || type == CKA_DERIVE || type == CKA_DECAPSULATE;
        case CKO_SECRET_KEY:  return cs_usage_role_bit (type) && type != CKA_SIGN_RECOVER
                                  && type != CKA_ENCAPSULATE && type != CKA_DECAPSULATE;
        default:              return false;
    }
}

unsigned
cs_objattr_roles (const cs_object_t *object)
{
    unsigned roles = 0;
    for (size_t i = 0; i < sizeof s_role_types / sizeof s_role_types [0]; i++)
        if (cs_objattr_role_of (object->klass, s_role_types [i]) && cs_objattr_flag (object, s_role_types [i], false))
            roles |= cs_usage_role_bit (s_role_types [i]);
    return roles;
}

int
cs_objattr_usage_defaults (cs_usage_policy_t policy, CK_OBJECT_CLASS klass, const CK_ATTRIBUTE *tmpl,
                           CK_ULONG count, cs_attrs_t *attrs)
{
    unsigned given = 0, asked = 0;
    for (CK_ULONG i = 0; tmpl && i < count; i++) {
        unsigned bit = cs_objattr_role_of (klass, tmpl [i].type) ? cs_usage_role_bit (tmpl [i].type) : 0;
        given |= bit;
        asked |= bit && tmpl [i].pValue && tmpl [i].ulValueLen == 1 && *(const CK_BBOOL *) tmpl [i].pValue ? bit : 0;
    }
    unsigned off = cs_usage_default_off (policy, given, asked);
    for (size_t i = 0; i < sizeof s_role_types / sizeof s_role_types [0]; i++)
        if ((off & cs_usage_role_bit (s_role_types [i])) && cs_objattr_role_of (klass, s_role_types [i])
        &&  cs_attrs_set_bool (attrs, s_role_types [i], false))
            return -1;
    return 0;
}
