/*  keyjobs.c — key-management jobs on keystore rows (keyjobs.h), under
 *  the one table of attribute rules the module follows too
 *  (common/cs_attr_rules.h).  */
#include <string.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/param_build.h>
#include <openssl/x509.h>
#include <czmq.h>
#include "cs_attr_rules.h"
#include "cs_util.h"
#include "cs_wire.h"
#include "drv_util.h"
#include "key_info.h"
#include "keyjobs.h"
#include "secretkeys.h"

typedef enum { S_CREATE, S_SET, S_COPY } s_mode_t;

static CK_RV s_origin (Cs__KeyInfo *info, bool generated);

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
static bool
s_flag (Cs__KeyInfo *info, bool priv, CK_ATTRIBUTE_TYPE type, bool fallback)
{
    long at = s_attr_index (info, priv, type);
    int value = at >= 0 ? s_flag_of ((*s_list (info, priv)) [at]) : -1;
    return value < 0 ? fallback : value == 1;
}

/* ---- the rules --------------------------------------------------------- */

/*  Strips leading zero bytes (big-endian integers compare by value).  */
static ProtobufCBinaryData
s_strip (ProtobufCBinaryData value)
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
        return s_bytes_eq (s_strip (attr->bytes), s_strip (mine)) ? CKR_OK : CKR_TEMPLATE_INCONSISTENT;
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
        char *text = strndup ((const char *) attr->bytes.data, attr->bytes.len);
        if (!text)
            return CKR_HOST_MEMORY;
        free (info->label);
        info->label = text;
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
        case CKA_PUBLIC_EXPONENT: case CKA_EC_PARAMS: case CKA_EC_POINT:
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
s_apply (Cs__KeyInfo *info, bool priv, const Cs__Attribute *attr, s_mode_t mode, bool token, bool import)
{
    bool secret = secretkeys_type (info->key_type);    /* a token secret key: its one object */
    CK_OBJECT_CLASS klass = secret ? CKO_SECRET_KEY : priv ? CKO_PRIVATE_KEY : CKO_PUBLIC_KEY;
    const cs_attr_rule_t *rule = cs_attr_rule (attr->type);
    if (!rule)
        return CKR_ATTRIBUTE_TYPE_INVALID;
    if (secret && attr->type == CKA_VALUE_LEN)         /* a secret key's size (§4.10) */
        return mode != S_CREATE ? CKR_ATTRIBUTE_READ_ONLY
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
        if (mode != S_CREATE)
            return CKR_ATTRIBUTE_TYPE_INVALID;
        /*  A generation or import template with an attribute of the other
            class: usage flags contradict it, others are not kept.  */
        return store == S_USAGE ? CKR_TEMPLATE_INCONSISTENT : CKR_OK;
    }
    if (mode != S_CREATE) {
        change.now = flag ? s_now (info, priv, rule, token) : -1;
        change.same = flag ? change.now == change.to : s_same_value (info, priv, attr, store);
    }
    CK_RV rv = cs_attr_rule_check (klass, attr->type, mode == S_CREATE ? CS_ATTR_OP_CREATE
                                                    : mode == S_SET ? CS_ATTR_OP_SET : CS_ATTR_OP_COPY, &change);
    if (rv != CKR_OK || (mode == S_COPY && change.same && store != S_NAME))
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

/*  Keeps CKA_ALWAYS_SENSITIVE / CKA_NEVER_EXTRACTABLE of the private side
 *  right after a change (cs_attr_follow).  */
static CK_RV
s_follow (Cs__KeyInfo *info)
{
    if (!info->has_private)
        return CKR_OK;
    bool always = s_flag (info, true, CKA_ALWAYS_SENSITIVE, false);
    bool never = s_flag (info, true, CKA_NEVER_EXTRACTABLE, false);
    cs_attr_follow (s_flag (info, true, CKA_SENSITIVE, true), s_flag (info, true, CKA_EXTRACTABLE, false),
                    &always, &never);
    if (s_attr_put_flag (info, true, CKA_ALWAYS_SENSITIVE, always)
    ||  s_attr_put_flag (info, true, CKA_NEVER_EXTRACTABLE, never))
        return CKR_HOST_MEMORY;
    return CKR_OK;
}

/*  Applies a template to one side; stops at the first failure.  */
static CK_RV
s_apply_all (Cs__KeyInfo *info, bool priv, Cs__Attribute **attrs, size_t n, s_mode_t mode,
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
static CK_RV
s_limits (Cs__KeyInfo *info)
{
    if (info->key_type == CKK_RSA && info->bits > CS_WIRE_MAX_RSA_BITS) {
        s_limit_problem = "RSA key over CS_WIRE_MAX_RSA_BITS bits";
        return CKR_KEY_SIZE_RANGE;
    }
    CK_RV rv = s_side_limits (info, true);
    return rv == CKR_OK ? s_side_limits (info, false) : rv;
}

CK_RV
keyjobs_secret_apply (Cs__KeyInfo *info, Cs__Attribute **tmpl, size_t n, bool generated)
{
    s_limit_problem = NULL;
    CK_RV rv = s_apply_all (info, true, tmpl, n, S_CREATE, true, true);
    if (rv == CKR_OK)
        rv = s_origin (info, generated);
    return rv == CKR_OK ? s_limits (info) : rv;
}

/* ---- generation --------------------------------------------------------- */

CK_RV
keyjobs_keygen (const Cs__GenerateKeyPairJob *job, const keyjobs_rsa_range_t *rsa, cs_keygen_t *gen,
                CK_KEY_TYPE *key_type_p)
{
    memset (gen, 0, sizeof *gen);
    gen->mechanism = job->mechanism;
    switch (job->mechanism) {
        case CKM_RSA_PKCS_KEY_PAIR_GEN:
            if (job->modulus_bits == 0)
                return CKR_TEMPLATE_INCOMPLETE;
            if (!cs_mech_rsa_gen_ok (job->modulus_bits, rsa->policy_min, rsa->board_min, rsa->board_max))
                return CKR_KEY_SIZE_RANGE;
            if (job->public_exponent.len > 8)
                return CKR_ATTRIBUTE_VALUE_INVALID;
            gen->modulus_bits = job->modulus_bits;
            gen->public_exponent = job->public_exponent.len ? job->public_exponent.data : NULL;
            gen->public_exponent_len = job->public_exponent.len;
            *key_type_p = CKK_RSA;
            return CKR_OK;
        case CKM_EC_KEY_PAIR_GEN:
        case CKM_EC_EDWARDS_KEY_PAIR_GEN: {
            if (job->ec_params.len == 0)
                return CKR_TEMPLATE_INCOMPLETE;
            const char *curve = drv_curve_name (job->ec_params.data, job->ec_params.len);
            bool edwards = job->mechanism == CKM_EC_EDWARDS_KEY_PAIR_GEN;
            if (!curve || edwards != streq (curve, "ED25519"))
                return CKR_DOMAIN_PARAMS_INVALID;
            gen->ec_params = job->ec_params.data;
            gen->ec_params_len = job->ec_params.len;
            *key_type_p = edwards ? CKK_EC_EDWARDS : CKK_EC;
            return CKR_OK;
        }
        default:
            return CKR_MECHANISM_INVALID;
    }
}

bool
keyjobs_default_exponent (const Cs__GenerateKeyPairJob *job)
{
    ProtobufCBinaryData e = s_strip (job->public_exponent);
    static const uint8_t f4 [] = { 0x01, 0x00, 0x01 };
    return job->public_exponent.len == 0 || (e.len == 3 && memcmp (e.data, f4, 3) == 0);
}

/*  Sets the "how it was made" flags after the templates: CKA_ALWAYS_SENSITIVE
 *  and CKA_NEVER_EXTRACTABLE are TRUE only for keys generated sensitive and
 *  not extractable (PKCS#11 2.40 §4.8 table 41 footnotes).  */
static CK_RV
s_origin (Cs__KeyInfo *info, bool generated)
{
    bool sensitive = s_flag (info, true, CKA_SENSITIVE, true);
    bool extractable = s_flag (info, true, CKA_EXTRACTABLE, false);
    if (s_attr_put_flag (info, true, CKA_ALWAYS_SENSITIVE, generated && sensitive)
    ||  s_attr_put_flag (info, true, CKA_NEVER_EXTRACTABLE, generated && !extractable))
        return CKR_HOST_MEMORY;
    return CKR_OK;
}

CK_RV
keyjobs_info_new (EVP_PKEY *pkey, const char *ref, const char *home, bool generated,
                  bool token, bool import,
                  Cs__Attribute **public_template, size_t n_public,
                  Cs__Attribute **private_template, size_t n_private,
                  Cs__KeyInfo **info_p)
{
    key_info_params_t params = { ref, NULL, NULL, 0, home, generated };
    Cs__KeyInfo *info = key_info_from_pkey (pkey, &params);
    s_limit_problem = NULL;
    if (!info)
        return CKR_ATTRIBUTE_VALUE_INVALID;
    CK_RV rv = s_apply_all (info, false, public_template, n_public, S_CREATE, token, import);
    if (rv == CKR_OK)
        rv = s_apply_all (info, true, private_template, n_private, S_CREATE, token, import);
    if (home && strncmp (home, "board:", 6) == 0)
        info->has_private = true;       /* the private half lives on the board */
    if (rv == CKR_OK && info->has_private)
        rv = s_origin (info, generated);
    if (rv == CKR_OK)
        rv = s_limits (info);
    if (rv != CKR_OK) {
        cs__key_info__free_unpacked (info, NULL);
        info = NULL;
    }
    *info_p = info;
    return rv;
}

/*  Unwraps a DER OCTET STRING (CKA_EC_POINT) into *data_p and *len_p.  */
static int
s_octet_string (const unsigned char *der, size_t len, const unsigned char **data_p, size_t *len_p)
{
    const unsigned char *p = der;
    ASN1_OCTET_STRING *os = d2i_ASN1_OCTET_STRING (NULL, &p, (long) len);
    if (!os)
        return -1;
    size_t head = (size_t) (p - der) - (size_t) ASN1_STRING_length (os);
    *data_p = der + head;
    *len_p = (size_t) ASN1_STRING_length (os);
    ASN1_OCTET_STRING_free (os);
    return 0;
}

EVP_PKEY *
keyjobs_pkey_from_board_key (const cs_key_info_t *key)
{
    EVP_PKEY *pkey = NULL;
    const unsigned char *point = NULL;
    size_t point_len = 0;
    if (key->key_type == CKK_EC_EDWARDS)
        return s_octet_string (key->ec_point, key->ec_point_len, &point, &point_len) ? NULL
             : EVP_PKEY_new_raw_public_key (EVP_PKEY_ED25519, NULL, point, point_len);
    OSSL_PARAM_BLD *bld = OSSL_PARAM_BLD_new ();
    BIGNUM *n = NULL, *e = NULL;
    const char *curve = NULL;
    bool ok = bld != NULL;
    if (ok && key->key_type == CKK_RSA) {
        n = BN_bin2bn (key->modulus, (int) key->modulus_len, NULL);
        e = BN_bin2bn (key->public_exponent, (int) key->public_exponent_len, NULL);
        ok = n && e && OSSL_PARAM_BLD_push_BN (bld, OSSL_PKEY_PARAM_RSA_N, n)
          && OSSL_PARAM_BLD_push_BN (bld, OSSL_PKEY_PARAM_RSA_E, e);
    }
    else
    if (ok && key->key_type == CKK_EC) {
        curve = drv_curve_name (key->ec_params, key->ec_params_len);
        ok = curve && !s_octet_string (key->ec_point, key->ec_point_len, &point, &point_len)
          && OSSL_PARAM_BLD_push_utf8_string (bld, OSSL_PKEY_PARAM_GROUP_NAME, curve, 0)
          && OSSL_PARAM_BLD_push_octet_string (bld, OSSL_PKEY_PARAM_PUB_KEY, point, point_len);
    }
    else
        ok = false;
    OSSL_PARAM *params = ok ? OSSL_PARAM_BLD_to_param (bld) : NULL;
    EVP_PKEY_CTX *ctx = params ? EVP_PKEY_CTX_new_from_name (NULL, key->key_type == CKK_RSA
                                                              ? "RSA" : "EC", NULL) : NULL;
    if (ctx && EVP_PKEY_fromdata_init (ctx) > 0)
        EVP_PKEY_fromdata (ctx, &pkey, EVP_PKEY_PUBLIC_KEY, params);
    EVP_PKEY_CTX_free (ctx);
    OSSL_PARAM_free (params);
    OSSL_PARAM_BLD_free (bld);
    BN_free (n);
    BN_free (e);
    ERR_clear_error ();
    return pkey;
}

/* ---- import, set, copy, destroy ---------------------------------------- */

/*  The CKA_CLASS a template names, or fallback.  */
static uint64_t
s_template_class (Cs__Attribute **attrs, size_t n, uint64_t fallback)
{
    for (size_t i = 0; i < n; i++)
        if (attrs [i]->type == CKA_CLASS && attrs [i]->value_case == CS__ATTRIBUTE__VALUE_NUMBER)
            return attrs [i]->number;
    return fallback;
}

CK_RV
keyjobs_import (keystore_t *ks, const char *tenant, const Cs__ImportKeyJob *job, Cs__KeyInfo **info_p)
{
    bool priv = job->private_pkcs8.len > 0;
    const unsigned char *p = job->public_spki.data;
    EVP_PKEY *pkey = priv ? key_info_pkey_from_pkcs8 (job->private_pkcs8.data, job->private_pkcs8.len)
                          : d2i_PUBKEY (NULL, &p, (long) job->public_spki.len);
    Cs__KeyInfo *info = NULL;
    CK_RV rv = CKR_OK;
    *info_p = NULL;
    s_limit_problem = NULL;
    ERR_clear_error ();
    if (!pkey)
        return CKR_ATTRIBUTE_VALUE_INVALID;
    if (s_template_class (job->template_, job->n_template_, priv ? CKO_PRIVATE_KEY : CKO_PUBLIC_KEY)
        != (priv ? CKO_PRIVATE_KEY : CKO_PUBLIC_KEY))
        rv = CKR_TEMPLATE_INCONSISTENT;
    if (rv == CKR_OK)
        rv = keyjobs_info_new (pkey, NULL, NULL, false, true, true,
                               priv ? NULL : job->template_, priv ? 0 : job->n_template_,
                               priv ? job->template_ : NULL, priv ? job->n_template_ : 0, &info);
    if (rv == CKR_OK && !priv)
        info->has_private = false;
    if (rv == CKR_OK && keystore_key_put (ks, tenant, info, priv ? job->private_pkcs8.data : NULL,
                                          priv ? job->private_pkcs8.len : 0))
        rv = CKR_DEVICE_ERROR;
    EVP_PKEY_free (pkey);
    if (rv != CKR_OK && info)
        cs__key_info__free_unpacked (info, NULL);
    else
        *info_p = info;
    return rv;
}

/*  Loads a key of the tenant with or without its material; a ref the
 *  tenant does not have is CKR_OBJECT_HANDLE_INVALID, a row that does not
 *  verify CKR_DEVICE_ERROR (cryptoserver-keystore(5)).  */
static CK_RV
s_load (keystore_t *ks, const char *tenant, const char *ref, uint64_t object, Cs__KeyInfo **info_p,
        uint8_t **pkcs8_p, size_t *len_p)
{
    if (object != CKO_PRIVATE_KEY && object != CKO_PUBLIC_KEY && object != CKO_SECRET_KEY)
        return CKR_OBJECT_HANDLE_INVALID;
    int got = keystore_key_get (ks, tenant, ref, info_p, pkcs8_p, len_p);
    if (got)
        return got == KEYSTORE_DAMAGED || got == KEYSTORE_UNAVAILABLE ? CKR_DEVICE_ERROR
                                                                       : CKR_OBJECT_HANDLE_INVALID;
    bool priv = object != CKO_PUBLIC_KEY;       /* a secret key's object is its "private" side */
    if (secretkeys_type ((*info_p)->key_type) != (object == CKO_SECRET_KEY)
    ||  !(priv ? (*info_p)->has_private : (*info_p)->has_public)) {
        cs__key_info__free_unpacked (*info_p, NULL);
        *info_p = NULL;
        if (pkcs8_p && *pkcs8_p) {
            OPENSSL_cleanse (*pkcs8_p, *len_p);
            free (*pkcs8_p);
            *pkcs8_p = NULL;
        }
        return CKR_OBJECT_HANDLE_INVALID;
    }
    return CKR_OK;
}

CK_RV
keyjobs_set (keystore_t *ks, const char *tenant, const Cs__SetKeyAttributesJob *job,
             Cs__KeyInfo **info_p)
{
    bool priv = job->object != CKO_PUBLIC_KEY;
    Cs__KeyInfo *info = NULL;
    CK_RV rv = s_load (ks, tenant, job->ref, job->object, &info, NULL, NULL);
    *info_p = NULL;
    s_limit_problem = NULL;
    if (rv != CKR_OK)
        return rv;
    if (!s_flag (info, priv, CKA_MODIFIABLE, true))
        rv = CKR_ACTION_PROHIBITED;
    if (rv == CKR_OK)
        rv = s_apply_all (info, priv, job->attributes, job->n_attributes, S_SET, true, false);
    if (rv == CKR_OK)
        rv = s_follow (info);
    if (rv == CKR_OK)
        rv = s_limits (info);
    if (rv == CKR_OK && keystore_key_update (ks, tenant, info))
        rv = CKR_DEVICE_ERROR;
    if (rv == CKR_OK)
        *info_p = info;
    else
        cs__key_info__free_unpacked (info, NULL);
    return rv;
}

/*  Replaces a string field with a copy of text.  */
static CK_RV
s_string_set (char **field, const char *text)
{
    char *copy = strdup (text);
    if (!copy)
        return CKR_HOST_MEMORY;
    if (*field && *field != protobuf_c_empty_string)
        free (*field);
    *field = copy;
    return CKR_OK;
}

CK_RV
keyjobs_copy (keystore_t *ks, const char *tenant, const Cs__CopyKeyJob *job, Cs__KeyInfo **info_p)
{
    bool priv = job->object != CKO_PUBLIC_KEY;
    Cs__KeyInfo *info = NULL;
    uint8_t *pkcs8 = NULL;
    size_t len = 0;
    char ref [36];
    CK_RV rv = s_load (ks, tenant, job->ref, job->object, &info, &pkcs8, &len);
    *info_p = NULL;
    s_limit_problem = NULL;
    if (rv != CKR_OK)
        return rv;
    if (!s_flag (info, priv, CKA_COPYABLE, true) || strcmp (info->home, "keystore"))
        rv = CKR_ACTION_PROHIBITED;
    if (rv == CKR_OK && !priv) {            /* a copy of the public object alone */
        info->has_private = false;
        OPENSSL_cleanse (pkcs8, len);
        free (pkcs8);
        pkcs8 = NULL;
        len = 0;
    }
    keystore_ref_new (ref);
    if (rv == CKR_OK)
        rv = s_string_set (&info->ref, ref);
    if (rv == CKR_OK)
        rv = s_apply_all (info, priv, job->attributes, job->n_attributes, S_COPY, true, false);
    if (rv == CKR_OK)
        rv = s_follow (info);
    if (rv == CKR_OK)
        rv = s_limits (info);
    if (rv == CKR_OK && keystore_key_put (ks, tenant, info, pkcs8, len))
        rv = CKR_DEVICE_ERROR;
    if (pkcs8) {
        OPENSSL_cleanse (pkcs8, len);
        free (pkcs8);
    }
    if (rv == CKR_OK)
        *info_p = info;
    else
        cs__key_info__free_unpacked (info, NULL);
    return rv;
}

/*  Drops the private half: the row is stored again without its material.  */
static CK_RV
s_drop_private (keystore_t *ks, const char *tenant, Cs__KeyInfo *info)
{
    info->has_private = false;
    if (keystore_key_delete (ks, tenant, info->ref) || keystore_key_put (ks, tenant, info, NULL, 0))
        return CKR_DEVICE_ERROR;
    return CKR_OK;
}

CK_RV
keyjobs_destroy (keystore_t *ks, const char *tenant, const Cs__DestroyKeyJob *job,
                 Cs__KeyInfo **info_p, char **resident_board_p)
{
    bool priv = job->object != CKO_PUBLIC_KEY;
    Cs__KeyInfo *info = NULL;
    CK_RV rv = s_load (ks, tenant, job->ref, job->object, &info, NULL, NULL);
    *info_p = NULL;
    *resident_board_p = NULL;
    if (rv != CKR_OK)
        return rv;
    bool other = priv ? info->has_public : info->has_private;
    bool on_board = priv && strncmp (info->home, "board:", 6) == 0;
    if (!s_flag (info, priv, CKA_DESTROYABLE, true))
        rv = CKR_ACTION_PROHIBITED;
    else
    if (!other)
        rv = keystore_key_delete (ks, tenant, info->ref) ? CKR_DEVICE_ERROR : CKR_OK;
    else
    if (priv)
        rv = s_drop_private (ks, tenant, info);
    else {
        info->has_public = false;
        rv = keystore_key_update (ks, tenant, info) ? CKR_DEVICE_ERROR : CKR_OK;
    }
    if (rv == CKR_OK && on_board)
        *resident_board_p = strdup (info->home + 6);
    if (rv == CKR_OK && other)
        *info_p = info;
    else
        cs__key_info__free_unpacked (info, NULL);
    return rv;
}

int
keyjobs_resident_id (const char *ref, unsigned char id [16])
{
    if (!ref || strncmp (ref, "ks:", 3) || strlen (ref) != 35)
        return -1;
    return cs_hex_decode (ref + 3, id, 16) == 16 ? 0 : -1;
}
