/*  keyattrs.c — the attribute templates of key-management jobs (keyattrs.h):
 *  PKCS#11 templates applied to a Cs__KeyInfo under the one table of
 *  attribute rules the module follows too (common/cs_attr_rules.h), and the
 *  bounds of a stored key object (keyjobs.h).  */
#include <string.h>
#include "cs_attr_rules.h"
#include "cs_usage.h"
#include "cs_wire.h"
#include "key_info.h"
#include "keyattrs.h"
#include "keyjobs.h"
#include "secretkeys.h"

/*  keyjobs_limit_problem: set by the last call of this thread.  */
static __thread const char *s_limit_problem;

const char *
keyjobs_limit_problem (void)
{
    return s_limit_problem;
}

/*  Reads a flag value (a flag, or one byte); -1 when not a flag.  */
static int
s_flag_of (const Cs__Attribute *attr)
{
    if (attr->value_case == CS__ATTRIBUTE__VALUE_FLAG)
        return attr->flag ? 1 : 0;
    if (attr->value_case == CS__ATTRIBUTE__VALUE_BYTES && attr->bytes.len == 1)
        return attr->bytes.data [0] ? 1 : 0;
    return -1;
}

/* ---- attribute lists of a KeyInfo ------------------------------------ */

static size_t *
s_count (Cs__KeyInfo *info, bool priv)
{
    return priv ? &info->n_private_attributes : &info->n_public_attributes;
}

static Cs__Attribute ***
s_list (Cs__KeyInfo *info, bool priv)
{
    return priv ? &info->private_attributes : &info->public_attributes;
}

static void
s_attr_free (Cs__Attribute *attr)
{
    if (attr && attr->value_case == CS__ATTRIBUTE__VALUE_BYTES)
        free (attr->bytes.data);
    free (attr);
}

/*  A deep copy of attr with its value, or NULL.  */
static Cs__Attribute *
s_attr_dup (const Cs__Attribute *attr)
{
    Cs__Attribute *copy = malloc (sizeof *copy);
    if (!copy)
        return NULL;
    *copy = *attr;
    if (attr->value_case == CS__ATTRIBUTE__VALUE_BYTES) {
        copy->bytes.data = malloc (attr->bytes.len ? attr->bytes.len : 1);
        if (!copy->bytes.data) {
            free (copy);
            return NULL;
        }
        memcpy (copy->bytes.data, attr->bytes.data, attr->bytes.len);
    }
    return copy;
}

/*  Index of type in the side's list, or -1.  */
static long
s_attr_index (Cs__KeyInfo *info, bool priv, CK_ATTRIBUTE_TYPE type)
{
    for (size_t i = 0; i < *s_count (info, priv); i++)
        if ((*s_list (info, priv)) [i]->type == type)
            return (long) i;
    return -1;
}

/*  Puts a copy of attr on the side (replacing the same type).  */
static CK_RV
s_attr_put (Cs__KeyInfo *info, bool priv, const Cs__Attribute *attr)
{
    Cs__Attribute *copy = s_attr_dup (attr);
    long at = s_attr_index (info, priv, attr->type);
    if (!copy)
        return CKR_HOST_MEMORY;
    if (at >= 0) {
        s_attr_free ((*s_list (info, priv)) [at]);
        (*s_list (info, priv)) [at] = copy;
        return CKR_OK;
    }
    size_t n = *s_count (info, priv);
    Cs__Attribute **list = realloc (*s_list (info, priv), (n + 1) * sizeof *list);
    if (!list) {
        s_attr_free (copy);
        return CKR_HOST_MEMORY;
    }
    list [n] = copy;
    *s_list (info, priv) = list;
    *s_count (info, priv) = n + 1;
    return CKR_OK;
}

/*  Removes type from the side's list, if there.  */
static void
s_attr_drop (Cs__KeyInfo *info, bool priv, CK_ATTRIBUTE_TYPE type)
{
    long at = s_attr_index (info, priv, type);
    if (at < 0)
        return;
    Cs__Attribute **list = *s_list (info, priv);
    s_attr_free (list [at]);
    memmove (&list [at], &list [at + 1], (*s_count (info, priv) - (size_t) at - 1) * sizeof *list);
    (*s_count (info, priv))--;
}

static CK_RV
s_attr_put_flag (Cs__KeyInfo *info, bool priv, CK_ATTRIBUTE_TYPE type, bool value)
{
    Cs__Attribute attr = CS__ATTRIBUTE__INIT;
    attr.type = type;
    attr.value_case = CS__ATTRIBUTE__VALUE_FLAG;
    attr.flag = value;
    return s_attr_put (info, priv, &attr);
}

/*  The flag `type` of a side, or fallback when absent.  */
bool
keyattrs_flag (Cs__KeyInfo *info, bool priv, CK_ATTRIBUTE_TYPE type, bool fallback)
{
    long at = s_attr_index (info, priv, type);
    int value = at >= 0 ? s_flag_of ((*s_list (info, priv)) [at]) : -1;
    return value < 0 ? fallback : value == 1;
}

/*  A stored flag of a side (const), or fallback.  */
static bool
s_flag_const (const Cs__KeyInfo *info, bool priv, CK_ATTRIBUTE_TYPE type, bool fallback)
{
    size_t n = priv ? info->n_private_attributes : info->n_public_attributes;
    Cs__Attribute *const *list = priv ? info->private_attributes : info->public_attributes;
    for (size_t i = 0; i < n; i++)
        if (list [i]->type == type) {
            int value = s_flag_of (list [i]);
            return value < 0 ? fallback : value == 1;
        }
    return fallback;
}

unsigned
keyattrs_roles (const Cs__KeyInfo *info)
{
    static const CK_ATTRIBUTE_TYPE secret [] = { CKA_ENCRYPT, CKA_DECRYPT, CKA_SIGN, CKA_WRAP, CKA_UNWRAP, CKA_DERIVE };
    unsigned roles = 0;
    if (secretkeys_type (info->key_type)) {
        for (size_t i = 0; i < sizeof secret / sizeof secret [0]; i++)
            if (s_flag_const (info, true, secret [i], false))
                roles |= cs_usage_role_bit (secret [i]);
        return roles;
    }
    roles |= info->can_sign ? CS_ROLE_SIGN : 0;
    roles |= info->can_decrypt ? CS_ROLE_DECRYPT : 0;
    roles |= s_flag_const (info, true, CKA_SIGN_RECOVER, info->can_sign && info->key_type == CKK_RSA)
           ? CS_ROLE_SIGN_RECOVER : 0;
    roles |= s_flag_const (info, true, CKA_UNWRAP, false) ? CS_ROLE_UNWRAP : 0;
    roles |= s_flag_const (info, true, CKA_DERIVE, false) ? CS_ROLE_DERIVE : 0;
    roles |= info->has_public && s_flag_const (info, false, CKA_WRAP, false) ? CS_ROLE_WRAP : 0;
    bool kem = info->key_type == CKK_ML_KEM;        /* PKCS#11 3.2 KEM roles (issue #23) */
    roles |= s_flag_const (info, true, CKA_DECAPSULATE, kem) ? CS_ROLE_DECAPSULATE : 0;
    roles |= info->has_public && s_flag_const (info, false, CKA_ENCAPSULATE, kem) ? CS_ROLE_ENCAPSULATE : 0;
    return roles;
}

CK_RV
keyattrs_mech_allowed (const Cs__KeyInfo *info, CK_MECHANISM_TYPE mech, CK_FLAGS flag)
{
    const Cs__Attribute *attr = key_info_attribute (info, true, CKA_ALLOWED_MECHANISMS);
    if (!attr)
        return CKR_OK;
    return attr->value_case == CS__ATTRIBUTE__VALUE_BYTES
        && cs_attr_wire_mech_allowed (attr->bytes.data, attr->bytes.len, mech, flag) ? CKR_OK : CKR_MECHANISM_INVALID;
}

CK_RV
keyattrs_use_check (const Cs__KeyInfo *info, cs_usage_policy_t policy, cs_usage_use_t use, CK_MECHANISM_TYPE mech)
{
    CK_RV rv = cs_usage_job_check (policy, keyattrs_roles (info), use);
    if (rv == CKR_OK && use != CS_USE_DERIVE && use != CS_USE_UNWRAP)
        rv = cs_usage_mech_check (policy, keyattrs_roles (info), mech);
    CK_FLAGS flag = use == CS_USE_SIGN ? CKF_SIGN : use == CS_USE_DECRYPT ? CKF_DECRYPT
                  : use == CS_USE_UNWRAP ? CKF_UNWRAP : use == CS_USE_DERIVE ? CKF_DERIVE : 0;
    if (rv == CKR_OK && !flag)
        rv = CKR_KEY_FUNCTION_NOT_PERMITTED;
    return rv == CKR_OK ? keyattrs_mech_allowed (info, mech, flag) : rv;
}

/*  keyattrs_usage_set: the policy of this thread's next key job.  */
static __thread cs_usage_policy_t s_usage = CS_USAGE_STRICT;

void
keyattrs_usage_set (cs_usage_policy_t policy)
{
    s_usage = policy;
}

/*  The roles a template names (*given_p) and sets TRUE (*asked_p).  */
static void
s_template_roles (Cs__Attribute **attrs, size_t n, unsigned *given_p, unsigned *asked_p)
{
    for (size_t i = 0; i < n; i++) {
        unsigned bit = cs_usage_role_bit (attrs [i]->type);
        int value = bit ? s_flag_of (attrs [i]) : -1;
        if (value < 0)
            continue;
        *given_p |= bit;
        *asked_p |= value == 1 ? bit : 0;
    }
}

static CK_RV s_attr_put_flag (Cs__KeyInfo *info, bool priv, CK_ATTRIBUTE_TYPE type, bool value);

CK_RV
keyattrs_usage_defaults (Cs__KeyInfo *info, Cs__Attribute **pub, size_t n_pub, Cs__Attribute **priv, size_t n_priv)
{
    static const CK_ATTRIBUTE_TYPE types [] = { CKA_ENCRYPT, CKA_DECRYPT, CKA_SIGN, CKA_SIGN_RECOVER,
                                                CKA_WRAP, CKA_UNWRAP };
    unsigned given = 0, asked = 0;
    s_template_roles (pub, n_pub, &given, &asked);
    s_template_roles (priv, n_priv, &given, &asked);
    unsigned off = cs_usage_default_off (s_usage, given, asked);
    bool secret = secretkeys_type (info->key_type);
    if (secret)
        off &= ~CS_ROLE_SIGN_RECOVER;           /* not an attribute of secret keys (§4.10) */
    else {
        info->can_sign = info->can_sign && !(off & CS_ROLE_SIGN);
        info->can_decrypt = info->can_decrypt && !(off & CS_ROLE_DECRYPT);
        off &= CS_ROLE_SIGN_RECOVER;            /* the others default FALSE on a pair */
    }
    for (size_t i = 0; i < sizeof types / sizeof types [0]; i++)
        if ((off & cs_usage_role_bit (types [i])) && s_attr_put_flag (info, true, types [i], false) != CKR_OK)
            return CKR_HOST_MEMORY;
    return CKR_OK;
}

CK_RV
keyattrs_usage_create (const Cs__KeyInfo *info)
{
    return cs_usage_create_check (s_usage, keyattrs_roles (info));
}

CK_RV
keyattrs_usage_change (unsigned before, const Cs__KeyInfo *info)
{
    return cs_usage_change_check (s_usage, before, keyattrs_roles (info));
}

/* ---- the rules --------------------------------------------------------- */

/*  Strips leading zero bytes (big-endian integers compare by value).  */
ProtobufCBinaryData
keyattrs_strip (ProtobufCBinaryData value)
{
    while (value.len > 1 && value.data [0] == 0) {
        value.data++;
        value.len--;
    }
    return value;
}

static bool
s_bytes_eq (ProtobufCBinaryData a, ProtobufCBinaryData b)
{
    return a.len == b.len && (a.len == 0 || memcmp (a.data, b.data, a.len) == 0);
}

/*  A creation template's CKA_CLASS, CKA_KEY_TYPE or key value against the
 *  key (PKCS#11 2.40 §4.1.1: inconsistent values are CKR_TEMPLATE_INCONSISTENT).  */
static CK_RV
s_key_value_agrees (Cs__KeyInfo *info, bool priv, const Cs__Attribute *attr, bool import)
{
    uint64_t number = attr->value_case == CS__ATTRIBUTE__VALUE_NUMBER ? attr->number : UINT64_MAX;
    uint64_t klass = secretkeys_type (info->key_type) ? CKO_SECRET_KEY : priv ? CKO_PRIVATE_KEY : CKO_PUBLIC_KEY;
    switch (attr->type) {
        case CKA_CLASS:
            return number == klass ? CKR_OK : CKR_TEMPLATE_INCONSISTENT;
        case CKA_KEY_TYPE:
            return number == info->key_type ? CKR_OK : CKR_TEMPLATE_INCONSISTENT;
        case CKA_PARAMETER_SET:         /* PKCS#11 3.2: the job's parameter_set made the key */
            return number == info->parameter_set ? CKR_OK : CKR_TEMPLATE_INCONSISTENT;
        default:
            break;
    }
    if (!import)                /* generation: the job's own fields carry these */
        return CKR_OK;
    if (attr->type == CKA_MODULUS_BITS)
        return number == info->bits ? CKR_OK : CKR_TEMPLATE_INCONSISTENT;
    if (attr->value_case != CS__ATTRIBUTE__VALUE_BYTES)
        return CKR_ATTRIBUTE_VALUE_INVALID;
    ProtobufCBinaryData mine = attr->type == CKA_MODULUS ? info->modulus
                             : attr->type == CKA_PUBLIC_EXPONENT ? info->public_exponent
                             : attr->type == CKA_EC_POINT ? info->ec_point : info->ec_params;
    if (attr->type == CKA_EC_PARAMS && attr->bytes.len && attr->bytes.data [0] != 0x06)
        return CKR_OK;          /* a printable curve name: the key's OID names the same curve */
    if (attr->type == CKA_MODULUS || attr->type == CKA_PUBLIC_EXPONENT)
        return s_bytes_eq (keyattrs_strip (attr->bytes), keyattrs_strip (mine)) ? CKR_OK : CKR_TEMPLATE_INCONSISTENT;
    return s_bytes_eq (attr->bytes, mine) ? CKR_OK : CKR_TEMPLATE_INCONSISTENT;
}

/*  Sets CKA_LABEL or CKA_ID of one object of the pair: the private object
 *  owns the shared field (the public one keeps its old value as an override
 *  if it had none); the public object gets an override, dropped when equal.  */
static CK_RV
s_set_name (Cs__KeyInfo *info, bool priv, const Cs__Attribute *attr)
{
    bool label = attr->type == CKA_LABEL;
    if (attr->value_case != CS__ATTRIBUTE__VALUE_BYTES || attr->bytes.len > (label ? 1024 : 256))
        return CKR_ATTRIBUTE_VALUE_INVALID;
    ProtobufCBinaryData shared = label
        ? (ProtobufCBinaryData) { strlen (info->label), (uint8_t *) info->label } : info->id;
    if (!priv) {
        if (s_bytes_eq (attr->bytes, shared))
            s_attr_drop (info, false, attr->type);
        return s_bytes_eq (attr->bytes, shared) ? CKR_OK : s_attr_put (info, false, attr);
    }
    if (info->has_public && s_attr_index (info, false, attr->type) < 0) {
        Cs__Attribute old = CS__ATTRIBUTE__INIT;
        old.type = attr->type;
        old.value_case = CS__ATTRIBUTE__VALUE_BYTES;
        old.bytes = shared;
        if (!s_bytes_eq (attr->bytes, shared) && s_attr_put (info, false, &old) != CKR_OK)
            return CKR_HOST_MEMORY;
    }
    if (label) {
        if (keyattrs_string_take (&info->label, strndup ((const char *) attr->bytes.data, attr->bytes.len)))
            return CKR_HOST_MEMORY;
    }
    else {
        uint8_t *id = malloc (attr->bytes.len ? attr->bytes.len : 1);
        if (!id)
            return CKR_HOST_MEMORY;
        memcpy (id, attr->bytes.data, attr->bytes.len);
        free (info->id.data);
        info->id = (ProtobufCBinaryData) { attr->bytes.len, id };
    }
    return CKR_OK;
}

/*  Storage of one attribute: how s_apply keeps it once the rules allow it.  */
typedef enum {
    S_STORE,            /* in the side's attribute list */
    S_NAME,             /* CKA_LABEL, CKA_ID: shared field, per-object override */
    S_USAGE,            /* CKA_SIGN / CKA_DECRYPT of the private object: KeyInfo fields */
    S_TOKEN,            /* CKA_TOKEN: must agree with the job */
    S_KEY_VALUE,        /* the key's class, type and public values: must agree */
    S_NOT_STORED        /* private components: in the material, never in the list */
} s_store_t;

static s_store_t
s_store (const cs_attr_rule_t *rule)
{
    switch (rule->type) {
        case CKA_LABEL: case CKA_ID: return S_NAME;
        case CKA_SIGN: case CKA_DECRYPT: return S_USAGE;
        case CKA_TOKEN: return S_TOKEN;
        case CKA_CLASS: case CKA_KEY_TYPE: case CKA_MODULUS: case CKA_MODULUS_BITS:
        case CKA_PUBLIC_EXPONENT: case CKA_EC_PARAMS: case CKA_EC_POINT: case CKA_PARAMETER_SET:
            return S_KEY_VALUE;
        default:
            return rule->rules & CS_ATTR_SENSITIVE ? S_NOT_STORED : S_STORE;
    }
}

/*  The current CK_BBOOL of `type` on a side as the module shows it (stored,
 *  else the KeyInfo field or the table's default); -1 when unknown.  */
static int
s_now (Cs__KeyInfo *info, bool priv, const cs_attr_rule_t *rule, bool token)
{
    int dflt = rule->type == CKA_SIGN ? info->can_sign : rule->type == CKA_DECRYPT ? info->can_decrypt
             : rule->type == CKA_TOKEN ? token : rule->type == CKA_PRIVATE ? priv : rule->dflt;
    long at = s_attr_index (info, priv, rule->type);
    int value = at >= 0 ? s_flag_of ((*s_list (info, priv)) [at]) : -1;
    return value >= 0 && rule->type != CKA_SIGN && rule->type != CKA_DECRYPT ? value : dflt;
}

/*  True when a non-flag attribute gives the side's current value.  */
static bool
s_same_value (Cs__KeyInfo *info, bool priv, const Cs__Attribute *attr, s_store_t store)
{
    if (store == S_KEY_VALUE)
        return s_key_value_agrees (info, priv, attr, true) == CKR_OK;
    long at = s_attr_index (info, priv, attr->type);
    const Cs__Attribute *stored = at >= 0 ? (*s_list (info, priv)) [at] : NULL;
    if (!stored && store == S_NAME && attr->value_case == CS__ATTRIBUTE__VALUE_BYTES)
        return s_bytes_eq (attr->bytes, attr->type == CKA_LABEL
                           ? (ProtobufCBinaryData) { strlen (info->label), (uint8_t *) info->label } : info->id);
    if (!stored || stored->value_case != attr->value_case)
        return false;
    return attr->value_case == CS__ATTRIBUTE__VALUE_BYTES ? s_bytes_eq (attr->bytes, stored->bytes)
         : attr->value_case == CS__ATTRIBUTE__VALUE_NUMBER ? attr->number == stored->number
         : attr->flag == stored->flag;
}

/*  Applies one attribute to a side of info: first the one table of rules
 *  (cs_attr_rules.h, the module's too), then its storage.  */
static CK_RV
s_apply (Cs__KeyInfo *info, bool priv, const Cs__Attribute *attr, keyattrs_mode_t mode, bool token, bool import)
{
    bool secret = secretkeys_type (info->key_type);    /* a token secret key: its one object */
    CK_OBJECT_CLASS klass = secret ? CKO_SECRET_KEY : priv ? CKO_PRIVATE_KEY : CKO_PUBLIC_KEY;
    const cs_attr_rule_t *rule = cs_attr_rule (attr->type);
    if (!rule)
        return CKR_ATTRIBUTE_TYPE_INVALID;
    if (secret && attr->type == CKA_VALUE_LEN)         /* a secret key's size (§4.10) */
        return mode != KEYATTRS_CREATE ? CKR_ATTRIBUTE_READ_ONLY
             : attr->value_case == CS__ATTRIBUTE__VALUE_NUMBER && attr->number * 8 == info->bits
             ? CKR_OK : CKR_TEMPLATE_INCONSISTENT;
    bool flag = rule->value == CS_ATTR_V_BOOL;
    s_store_t store = s_store (rule);
    if (secret && store == S_USAGE)                     /* stored as given, like CKA_ENCRYPT */
        store = S_STORE;
    cs_attr_change_t change = { .now = -1, .to = flag ? s_flag_of (attr) : -1 };
    if (flag && change.to < 0)
        return CKR_ATTRIBUTE_VALUE_INVALID;
    if (rule->value == CS_ATTR_V_MECHS
    &&  (attr->value_case != CS__ATTRIBUTE__VALUE_BYTES || attr->bytes.len % CS_ATTR_MECH_WIRE_BYTES))
        return CKR_ATTRIBUTE_VALUE_INVALID;
    if (!(rule->classes & cs_attr_class_bit (klass))) {
        if (mode != KEYATTRS_CREATE)
            return CKR_ATTRIBUTE_TYPE_INVALID;
        /*  A generation or import template with an attribute of the other
            class: usage flags contradict it, others are not kept.  */
        return store == S_USAGE ? CKR_TEMPLATE_INCONSISTENT : CKR_OK;
    }
    if (mode != KEYATTRS_CREATE) {
        change.now = flag ? s_now (info, priv, rule, token) : -1;
        change.same = flag ? change.now == change.to : s_same_value (info, priv, attr, store);
    }
    CK_RV rv = cs_attr_rule_check (klass, attr->type, mode == KEYATTRS_CREATE ? CS_ATTR_OP_CREATE
                                                    : mode == KEYATTRS_SET ? CS_ATTR_OP_SET : CS_ATTR_OP_COPY, &change);
    if (rv != CKR_OK || (mode == KEYATTRS_COPY && change.same && store != S_NAME))
        return rv;
    switch (store) {
        case S_NAME:
            return s_set_name (info, priv, attr);
        case S_USAGE:
            if (attr->type == CKA_SIGN)
                info->can_sign = change.to == 1;
            else
                info->can_decrypt = change.to == 1 && info->key_type == CKK_RSA;
            return CKR_OK;
        case S_TOKEN:
            return (change.to == 1) == token ? CKR_OK : CKR_TEMPLATE_INCONSISTENT;
        case S_KEY_VALUE:
            return s_key_value_agrees (info, priv, attr, import);
        case S_NOT_STORED:
            return CKR_OK;
        default:
            return s_attr_put (info, priv, attr);
    }
}

CK_RV
keyattrs_string_take (char **field, char *text)
{
    if (!text)
        return CKR_HOST_MEMORY;
    if (*field && *field != protobuf_c_empty_string)
        free (*field);
    *field = text;
    return CKR_OK;
}

/*  Keeps CKA_ALWAYS_SENSITIVE / CKA_NEVER_EXTRACTABLE of the private side
 *  right after a change (cs_attr_follow).  */
CK_RV
keyattrs_follow (Cs__KeyInfo *info)
{
    if (!info->has_private)
        return CKR_OK;
    bool always = keyattrs_flag (info, true, CKA_ALWAYS_SENSITIVE, false);
    bool never = keyattrs_flag (info, true, CKA_NEVER_EXTRACTABLE, false);
    cs_attr_follow (keyattrs_flag (info, true, CKA_SENSITIVE, true), keyattrs_flag (info, true, CKA_EXTRACTABLE, false),
                    &always, &never);
    if (s_attr_put_flag (info, true, CKA_ALWAYS_SENSITIVE, always)
    ||  s_attr_put_flag (info, true, CKA_NEVER_EXTRACTABLE, never))
        return CKR_HOST_MEMORY;
    return CKR_OK;
}

/*  Applies a template to one side; stops at the first failure.  */
CK_RV
keyattrs_apply_all (Cs__KeyInfo *info, bool priv, Cs__Attribute **attrs, size_t n, keyattrs_mode_t mode,
             bool token, bool import)
{
    CK_RV rv = CKR_OK;
    for (size_t i = 0; rv == CKR_OK && i < n; i++)
        rv = s_apply (info, priv, attrs [i], mode, token, import);
    return rv;
}

/*  Checks one object's attributes against KEYJOBS_MAX_ATTRIBUTES and
 *  KEYJOBS_MAX_ATTR_BYTES (keyjobs.h); records why in s_limit_problem.  */
static CK_RV
s_side_limits (Cs__KeyInfo *info, bool priv)
{
    size_t bytes = 0;
    if (*s_count (info, priv) > KEYJOBS_MAX_ATTRIBUTES) {
        s_limit_problem = priv ? "private object over KEYJOBS_MAX_ATTRIBUTES attributes"
                               : "public object over KEYJOBS_MAX_ATTRIBUTES attributes";
        return CKR_TEMPLATE_INCONSISTENT;
    }
    for (size_t i = 0; i < *s_count (info, priv); i++)
        if ((*s_list (info, priv)) [i]->value_case == CS__ATTRIBUTE__VALUE_BYTES)
            bytes += (*s_list (info, priv)) [i]->bytes.len;
    if (bytes > KEYJOBS_MAX_ATTR_BYTES) {
        s_limit_problem = priv ? "private object over KEYJOBS_MAX_ATTR_BYTES bytes of attributes"
                               : "public object over KEYJOBS_MAX_ATTR_BYTES bytes of attributes";
        return CKR_ATTRIBUTE_VALUE_INVALID;
    }
    return CKR_OK;
}

/*  The bounds of a key about to be stored (keyjobs.h).  */
CK_RV
keyattrs_limits (Cs__KeyInfo *info)
{
    if (info->key_type == CKK_RSA && info->bits > CS_WIRE_MAX_RSA_BITS) {
        s_limit_problem = "RSA key over CS_WIRE_MAX_RSA_BITS bits";
        return CKR_KEY_SIZE_RANGE;
    }
    CK_RV rv = s_side_limits (info, true);
    return rv == CKR_OK ? s_side_limits (info, false) : rv;
}

/*  Sets the "how it was made" flags after the templates: CKA_ALWAYS_SENSITIVE
 *  and CKA_NEVER_EXTRACTABLE are TRUE only for keys generated sensitive and
 *  not extractable (PKCS#11 2.40 §4.8 table 41 footnotes).  */
CK_RV
keyattrs_origin (Cs__KeyInfo *info, bool generated)
{
    bool sensitive = keyattrs_flag (info, true, CKA_SENSITIVE, true);
    bool extractable = keyattrs_flag (info, true, CKA_EXTRACTABLE, false);
    if (s_attr_put_flag (info, true, CKA_ALWAYS_SENSITIVE, generated && sensitive)
    ||  s_attr_put_flag (info, true, CKA_NEVER_EXTRACTABLE, generated && !extractable))
        return CKR_HOST_MEMORY;
    return CKR_OK;
}

CK_RV
keyjobs_secret_apply (Cs__KeyInfo *info, Cs__Attribute **tmpl, size_t n, bool generated)
{
    s_limit_problem = NULL;
    CK_RV rv = keyattrs_usage_defaults (info, NULL, 0, tmpl, n);
    if (rv == CKR_OK)
        rv = keyattrs_apply_all (info, true, tmpl, n, KEYATTRS_CREATE, true, true);
    if (rv == CKR_OK)
        rv = keyattrs_usage_create (info);
    if (rv == CKR_OK)
        rv = keyattrs_origin (info, generated);
    return rv == CKR_OK ? keyattrs_limits (info) : rv;
}

void
keyattrs_limit_reset (void)
{
    s_limit_problem = NULL;
}
