/*  object.c — key objects, their attributes, and template matching.
 *
 *  The table only grows: entry i has handle i + 1 for the life of the
 *  process; an entry whose key disappeared from the broker keeps its handle
 *  with key NULL (then CKR_OBJECT_HANDLE_INVALID).
 */
#include <stdlib.h>
#include <string.h>
#include "log.h"
#include "module.h"
#include "token.h"
#include "session.h"
#include "object.h"

typedef struct {
    CK_OBJECT_CLASS klass;
    cs_key_t *key;              /* NULL: gone */
} cs_object_t;

typedef struct {
    CK_ULONG *handles;
    size_t count;
    size_t next;
} cs_find_t;

static struct {
    cs_object_t *objects;
    size_t count;
    size_t size;
    bool fetched;
} s_table;

/*  ---- keys ------------------------------------------------------------ */

bool
cs_key_ec_point_raw (const cs_key_t *key, const uint8_t **raw_p, size_t *len_p)
{
    const uint8_t *der = key->ec_point;
    size_t len = key->ec_point_len, header = 2, content;
    if (!der || len < 3)
        return false;
    content = der [1];
    if (der [1] == 0x81 && len > 3) {
        content = der [2];
        header = 3;
    }
    if (der [0] == 0x04 && header + content == len && content % 2 == 1 && der [header] == 0x04) {
        *raw_p = der + header;
        *len_p = content;
        return true;
    }
    if (der [0] == 0x04 && len % 2 == 1) {
        *raw_p = der;
        *len_p = len;
        return true;
    }
    return false;
}

size_t
cs_key_signature_len (const cs_key_t *key)
{
    return key->key_type == CKK_RSA ? key->modulus_len : 2 * key->field_len;
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
    free (key->label);
    free (key->modulus);
    free (key->exponent);
    free (key->ec_params);
    free (key->ec_point);
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

cs_key_t *
cs_key_new (const Cs__KeyInfo *info)
{
    const uint8_t *raw;
    size_t raw_len;
    cs_key_t *key = NULL;
    if (info->id.len == 0 || info->id.len > CS_WIRE_MAX_KEY_ID
    || (info->key_type != CKK_RSA && info->key_type != CKK_EC))
        return NULL;
    if (!(key = calloc (1, sizeof *key)))
        return NULL;
    key->refs = 1;
    memcpy (key->id, info->id.data, info->id.len);
    key->id_len = info->id.len;
    key->key_type = info->key_type;
    key->bits = info->bits;
    key->can_sign = info->can_sign;
    key->can_decrypt = info->can_decrypt;
    if (!(key->label = strdup (info->label ? info->label : ""))
    ||  s_copy_bytes (&key->modulus, &key->modulus_len, info->modulus, true)
    ||  s_copy_bytes (&key->exponent, &key->exponent_len, info->public_exponent, true)
    ||  s_copy_bytes (&key->ec_params, &key->ec_params_len, info->ec_params, false)
    ||  s_copy_bytes (&key->ec_point, &key->ec_point_len, info->ec_point, false))
        goto fail;
    if (key->key_type == CKK_RSA) {
        if (!key->modulus_len || !key->exponent_len || key->modulus_len > CS_MAX_RSA_BYTES)
            goto fail;
        if (!key->bits)
            key->bits = key->modulus_len * 8;
    }
    else {
        if (!key->ec_params_len || !cs_key_ec_point_raw (key, &raw, &raw_len))
            goto fail;
        key->field_len = (raw_len - 1) / 2;
        if (!key->bits)
            key->bits = key->field_len * 8;
    }
    return key;
fail:
    cs_log_warning ("ignoring key '%s' from the broker: incomplete public attributes",
                    info->label ? info->label : "");
    cs_key_unref (&key);
    return NULL;
}

/*  ---- the table ------------------------------------------------------- */

static cs_object_t *
s_object (CK_OBJECT_HANDLE handle)
{
    if (handle == 0 || handle > s_table.count)
        return NULL;
    return &s_table.objects [handle - 1];
}

static bool
s_visible (const cs_object_t *object)
{
    return object && object->key
        && (object->klass == CKO_PUBLIC_KEY || cs_token_user_logged_in ());
}

/*  Remembers (id, class) -> handle even while the key is gone.  */
typedef struct { uint8_t id [CS_WIRE_MAX_KEY_ID]; size_t id_len; } s_id_t;
static s_id_t *s_ids;

static cs_object_t *
s_slot_for (const cs_key_t *key, CK_OBJECT_CLASS klass)
{
    for (size_t i = 0; i < s_table.count; i++)
        if (s_table.objects [i].klass == klass && s_ids [i].id_len == key->id_len
        &&  memcmp (s_ids [i].id, key->id, key->id_len) == 0)
            return &s_table.objects [i];
    if (s_table.count == s_table.size) {
        size_t size = s_table.size ? 2 * s_table.size : 16;
        cs_object_t *objects = realloc (s_table.objects, size * sizeof *objects);
        s_id_t *ids;
        if (!objects)
            return NULL;
        s_table.objects = objects;
        if (!(ids = realloc (s_ids, size * sizeof *ids)))
            return NULL;
        s_ids = ids;
        s_table.size = size;
    }
    s_table.objects [s_table.count] = (cs_object_t) { klass, NULL };
    memcpy (s_ids [s_table.count].id, key->id, key->id_len);
    s_ids [s_table.count].id_len = key->id_len;
    return &s_table.objects [s_table.count++];
}

CK_RV
cs_object_load (const Cs__ListKeysResult *result)
{
    static const CK_OBJECT_CLASS classes [] = { CKO_PUBLIC_KEY, CKO_PRIVATE_KEY };
    for (size_t i = 0; i < s_table.count; i++)
        cs_key_unref (&s_table.objects [i].key);
    for (size_t i = 0; result && i < result->n_keys; i++) {
        cs_key_t *key = cs_key_new (result->keys [i]);
        if (!key)
            continue;
        for (int c = 0; c < 2; c++) {
            cs_object_t *object = s_slot_for (key, classes [c]);
            if (!object) {
                cs_key_unref (&key);
                return CKR_HOST_MEMORY;
            }
            if (!object->key)       /* the first of duplicate ids wins */
                object->key = cs_key_ref (key);
        }
        cs_key_unref (&key);
    }
    s_table.fetched = true;
    return CKR_OK;
}

CK_RV
cs_object_ensure (void)
{
    CK_RV rv;
    bool fetched;
    Cs__Reply *reply = NULL;
    Cs__ListKeysJob list = CS__LIST_KEYS_JOB__INIT;
    Cs__Job job = CS__JOB__INIT;
    cs_module_lock ();
    fetched = s_table.fetched;
    cs_module_unlock ();
    if (fetched)
        return CKR_OK;
    job.kind_case = CS__JOB__KIND_LIST_KEYS;
    job.list_keys = &list;
    rv = cs_module_run_job (&job, true, &reply);
    if (rv == CKR_OK && reply->results [0]->kind_case != CS__RESULT__KIND_KEYS) {
        cs_log_error ("the broker answered a key list without keys");
        rv = CKR_DEVICE_ERROR;
    }
    if (rv == CKR_OK) {
        cs_module_lock ();
        rv = cs_object_load (reply->results [0]->keys);
        cs_module_unlock ();
    }
    if (reply)
        cs__reply__free_unpacked (reply, NULL);
    return rv;
}

cs_key_t *
cs_object_key (CK_OBJECT_HANDLE handle, CK_OBJECT_CLASS *class_p)
{
    cs_object_t *object = s_object (handle);
    if (!s_visible (object))
        return NULL;
    if (class_p)
        *class_p = object->klass;
    return cs_key_ref (object->key);
}

void
cs_object_invalidate (void)
{
    s_table.fetched = false;
}

void
cs_object_reset (void)
{
    for (size_t i = 0; i < s_table.count; i++)
        cs_key_unref (&s_table.objects [i].key);
    free (s_table.objects);
    free (s_ids);
    s_ids = NULL;
    memset (&s_table, 0, sizeof s_table);
}

/*  ---- attributes ------------------------------------------------------ */

typedef enum { S_OK, S_SENSITIVE, S_INVALID } s_attr_kind_t;

typedef struct {
    const void *data;
    CK_ULONG len;
    CK_BBOOL flag;              /* storage for booleans */
    CK_ULONG number;            /* storage for CK_ULONG values */
} s_value_t;

static s_attr_kind_t
s_bool (s_value_t *value, bool flag)
{
    value->flag = flag ? CK_TRUE : CK_FALSE;
    value->data = &value->flag;
    value->len = sizeof value->flag;
    return S_OK;
}

static s_attr_kind_t
s_ulong (s_value_t *value, CK_ULONG number)
{
    value->number = number;
    value->data = &value->number;
    value->len = sizeof value->number;
    return S_OK;
}

static s_attr_kind_t
s_bytes (s_value_t *value, const void *data, size_t len)
{
    if (!data && len)
        return S_INVALID;
    value->data = data;
    value->len = len;
    return S_OK;
}

static s_attr_kind_t
s_attr_common (const cs_object_t *object, CK_ATTRIBUTE_TYPE type, s_value_t *value)
{
    const cs_key_t *key = object->key;
    bool is_private = object->klass == CKO_PRIVATE_KEY;
    switch (type) {
        case CKA_CLASS:          return s_ulong (value, object->klass);
        case CKA_KEY_TYPE:       return s_ulong (value, key->key_type);
        case CKA_ID:             return s_bytes (value, key->id, key->id_len);
        case CKA_LABEL:          return s_bytes (value, key->label, strlen (key->label));
        case CKA_TOKEN:          return s_bool (value, true);
        case CKA_PRIVATE:        return s_bool (value, is_private);
        case CKA_MODIFIABLE:     return s_bool (value, false);
        case CKA_COPYABLE:       return s_bool (value, false);
        case CKA_DESTROYABLE:    return s_bool (value, false);
        case CKA_LOCAL:          return s_bool (value, false);
        case CKA_DERIVE:         return s_bool (value, false);
        case CKA_KEY_GEN_MECHANISM: return s_ulong (value, CK_UNAVAILABLE_INFORMATION);
        case CKA_START_DATE:
        case CKA_END_DATE:
        case CKA_SUBJECT:        return s_bytes (value, "", 0);
        default:                 return S_INVALID;
    }
}

static s_attr_kind_t
s_attr_rsa (const cs_key_t *key, CK_ATTRIBUTE_TYPE type, s_value_t *value)
{
    if (key->key_type != CKK_RSA)
        return S_INVALID;
    switch (type) {
        case CKA_MODULUS:         return s_bytes (value, key->modulus, key->modulus_len);
        case CKA_PUBLIC_EXPONENT: return s_bytes (value, key->exponent, key->exponent_len);
        case CKA_MODULUS_BITS:    return s_ulong (value, key->bits);
        default:                  return S_INVALID;
    }
}

static s_attr_kind_t
s_attr_ec (const cs_key_t *key, CK_ATTRIBUTE_TYPE type, s_value_t *value)
{
    if (key->key_type != CKK_EC)
        return S_INVALID;
    switch (type) {
        case CKA_EC_PARAMS: return s_bytes (value, key->ec_params, key->ec_params_len);
        case CKA_EC_POINT:  return s_bytes (value, key->ec_point, key->ec_point_len);
        default:            return S_INVALID;
    }
}

static s_attr_kind_t
s_attr_public (const cs_key_t *key, CK_ATTRIBUTE_TYPE type, s_value_t *value)
{
    switch (type) {
        case CKA_VERIFY:         return s_bool (value, true);
        case CKA_ENCRYPT:        return s_bool (value, key->key_type == CKK_RSA);
        case CKA_WRAP:
        case CKA_VERIFY_RECOVER:
        case CKA_TRUSTED:        return s_bool (value, false);
        case CKA_MODULUS_BITS:
        case CKA_MODULUS:
        case CKA_PUBLIC_EXPONENT: return s_attr_rsa (key, type, value);
        default:                 return s_attr_ec (key, type, value);
    }
}

static s_attr_kind_t
s_attr_private (const cs_key_t *key, CK_ATTRIBUTE_TYPE type, s_value_t *value)
{
    switch (type) {
        case CKA_SIGN:              return s_bool (value, key->can_sign);
        case CKA_DECRYPT:           return s_bool (value, key->can_decrypt && key->key_type == CKK_RSA);
        case CKA_SENSITIVE:
        case CKA_ALWAYS_SENSITIVE:
        case CKA_NEVER_EXTRACTABLE: return s_bool (value, true);
        case CKA_EXTRACTABLE:
        case CKA_UNWRAP:
        case CKA_SIGN_RECOVER:
        case CKA_WRAP_WITH_TRUSTED:
        case CKA_ALWAYS_AUTHENTICATE: return s_bool (value, false);
        case CKA_PRIVATE_EXPONENT:
        case CKA_PRIME_1:
        case CKA_PRIME_2:
        case CKA_EXPONENT_1:
        case CKA_EXPONENT_2:
        case CKA_COEFFICIENT:
        case CKA_VALUE:             return S_SENSITIVE;
        case CKA_MODULUS:
        case CKA_PUBLIC_EXPONENT:   return s_attr_rsa (key, type, value);
        default:                    return s_attr_ec (key, type, value);
    }
}

/*  The value of one attribute of a (visible) object.  */
static s_attr_kind_t
s_attr (const cs_object_t *object, CK_ATTRIBUTE_TYPE type, s_value_t *value)
{
    s_attr_kind_t kind = s_attr_common (object, type, value);
    if (kind != S_INVALID)
        return kind;
    if (object->klass == CKO_PUBLIC_KEY)
        return s_attr_public (object->key, type, value);
    return s_attr_private (object->key, type, value);
}

/*  Fills one template entry; returns its own CK_RV (PKCS#11 2.40 §5.7).  */
static CK_RV
s_get_one (const cs_object_t *object, CK_ATTRIBUTE *attr)
{
    s_value_t value = { 0 };
    s_attr_kind_t kind = s_attr (object, attr->type, &value);
    if (kind != S_OK) {
        attr->ulValueLen = CK_UNAVAILABLE_INFORMATION;
        return kind == S_SENSITIVE ? CKR_ATTRIBUTE_SENSITIVE : CKR_ATTRIBUTE_TYPE_INVALID;
    }
    if (!attr->pValue) {
        attr->ulValueLen = value.len;
        return CKR_OK;
    }
    if (attr->ulValueLen < value.len) {
        attr->ulValueLen = CK_UNAVAILABLE_INFORMATION;
        return CKR_BUFFER_TOO_SMALL;
    }
    if (value.len)
        memcpy (attr->pValue, value.data, value.len);
    attr->ulValueLen = value.len;
    return CKR_OK;
}

CK_RV
cs_object_get_attributes (CK_OBJECT_HANDLE handle, CK_ATTRIBUTE_PTR tmpl, CK_ULONG count)
{
    CK_RV rv = CKR_OK;
    const cs_object_t *object = s_object (handle);
    if (!s_visible (object))
        return CKR_OBJECT_HANDLE_INVALID;
    for (CK_ULONG i = 0; i < count; i++) {
        CK_RV one = s_get_one (object, &tmpl [i]);
        if (one != CKR_OK)
            rv = one;
    }
    return rv;
}

static bool
s_matches (const cs_object_t *object, const CK_ATTRIBUTE *tmpl, CK_ULONG count)
{
    for (CK_ULONG i = 0; i < count; i++) {
        s_value_t value = { 0 };
        if (s_attr (object, tmpl [i].type, &value) != S_OK || value.len != tmpl [i].ulValueLen
        ||  (value.len && (!tmpl [i].pValue || memcmp (value.data, tmpl [i].pValue, value.len))))
            return false;
    }
    return true;
}

CK_RV
cs_object_find (const CK_ATTRIBUTE *tmpl, CK_ULONG count, CK_OBJECT_HANDLE **handles_p, size_t *count_p)
{
    CK_OBJECT_HANDLE *handles = calloc (s_table.count + 1, sizeof *handles);
    size_t found = 0;
    if (!handles)
        return CKR_HOST_MEMORY;
    for (size_t i = 0; i < s_table.count; i++)
        if (s_visible (&s_table.objects [i]) && s_matches (&s_table.objects [i], tmpl, count))
            handles [found++] = i + 1;
    *handles_p = handles;
    *count_p = found;
    return CKR_OK;
}

/*  ---- entry points ---------------------------------------------------- */

static void
s_find_free (void *op)
{
    cs_find_t *find = op;
    if (find)
        free (find->handles);
    free (find);
}

CK_RV
C_GetAttributeValue (CK_SESSION_HANDLE handle, CK_OBJECT_HANDLE object,
                     CK_ATTRIBUTE_PTR tmpl, CK_ULONG count)
{
    cs_session_t *session;
    CK_RV rv = cs_session_enter (handle, &session);
    if (rv != CKR_OK)
        return rv;
    if (!tmpl && count)
        rv = CKR_ARGUMENTS_BAD;
    else
        rv = cs_object_get_attributes (object, tmpl, count);
    cs_module_unlock ();
    return rv;
}

CK_RV
C_FindObjectsInit (CK_SESSION_HANDLE handle, CK_ATTRIBUTE_PTR tmpl, CK_ULONG count)
{
    cs_session_t *session;
    cs_find_t *find = NULL;
    CK_RV rv;
    return_val_if_fail (tmpl || count == 0, CKR_ARGUMENTS_BAD);
    if ((rv = cs_module_check ()) != CKR_OK || (rv = cs_object_ensure ()) != CKR_OK)
        return rv;
    if ((rv = cs_session_enter (handle, &session)) != CKR_OK)
        return rv;
    if (cs_session_op (session, CS_OP_FIND))
        rv = CKR_OPERATION_ACTIVE;
    else
    if (!(find = calloc (1, sizeof *find)))
        rv = CKR_HOST_MEMORY;
    else
    if ((rv = cs_object_find (tmpl, count, &find->handles, &find->count)) == CKR_OK)
        rv = cs_session_op_start (session, CS_OP_FIND, find, s_find_free);
    if (rv == CKR_OK)
        find = NULL;
    cs_module_unlock ();
    s_find_free (find);
    return rv;
}

CK_RV
C_FindObjects (CK_SESSION_HANDLE handle, CK_OBJECT_HANDLE_PTR objects, CK_ULONG max, CK_ULONG_PTR count_p)
{
    cs_session_t *session;
    cs_find_t *find;
    CK_RV rv;
    return_val_if_fail (objects && count_p, CKR_ARGUMENTS_BAD);
    if ((rv = cs_session_enter (handle, &session)) != CKR_OK)
        return rv;
    if (!(find = cs_session_op (session, CS_OP_FIND)))
        rv = CKR_OPERATION_NOT_INITIALIZED;
    else {
        *count_p = 0;
        while (*count_p < max && find->next < find->count)
            objects [(*count_p)++] = find->handles [find->next++];
    }
    cs_module_unlock ();
    return rv;
}

CK_RV
C_FindObjectsFinal (CK_SESSION_HANDLE handle)
{
    cs_session_t *session;
    CK_RV rv = cs_session_enter (handle, &session);
    if (rv != CKR_OK)
        return rv;
    if (!cs_session_op (session, CS_OP_FIND))
        rv = CKR_OPERATION_NOT_INITIALIZED;
    cs_session_op_end (session, CS_OP_FIND);
    cs_module_unlock ();
    return rv;
}
