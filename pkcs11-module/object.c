/*  object.c — the key object table, visibility, template matching (object.h);
 *  the values of one object's attributes are objattr.c.
 *
 *  The table only grows: entry i has handle i + 1 for the life of the
 *  process.  Token entries keep their ref and class while their key is gone
 *  (key NULL), so a key that comes back gets its old handle; a chained hash
 *  index over (ref, class) finds them in O(1), so loading a list of
 *  thousands of keys is linear.  A find is one pass over the table.
 */
#include <stdlib.h>
#include <string.h>
#include <openssl/crypto.h>
#include <stdatomic.h>
#include "cs_attr_rules.h"
#include "cs_usage.h"
#include "keyder.h"
#include "log.h"
#include "login.h"
#include "object.h"
#include "object_int.h"
#include "dataobj.h"

static struct {
    cs_object_t *objects;
    size_t count;
    size_t size;
    size_t *buckets;            /* index + 1 of the first token object, 0 = none */
    size_t n_buckets;           /* = size */
    bool have_list;
    uint64_t version;
    unsigned walk;              /* the latest paged walk (cs_object_walk_begin_inlock) */
} s_table;

/*  ---- the table and its index ------------------------------------------ */

static cs_object_t *
s_object (CK_OBJECT_HANDLE handle)
{
    if (handle == 0 || handle > s_table.count)
        return NULL;
    return &s_table.objects [handle - 1];
}

static size_t
s_hash (const char *ref, CK_OBJECT_CLASS klass)
{
    uint64_t hash = 1469598103934665603ULL ^ klass;     /* FNV-1a */
    for (const char *p = ref; *p; p++)
        hash = (hash ^ (uint8_t) *p) * 1099511628211ULL;
    return (size_t) hash;
}

/*  n_buckets is a power of two (s_grow): a mask, not a division, per lookup.  */
static void
s_index_add (size_t i)
{
    size_t bucket = s_hash (s_table.objects [i].ref, s_table.objects [i].klass) & (s_table.n_buckets - 1);
    s_table.objects [i].chain = s_table.buckets [bucket];
    s_table.buckets [bucket] = i + 1;
}

/*  Grows the table (and rebuilds the index) when it is full.  */
static int
s_grow (void)
{
    size_t size = s_table.size ? 2 * s_table.size : 64;
    cs_object_t *objects;
    size_t *buckets;
    if (s_table.count < s_table.size)
        return 0;
    if (!(buckets = calloc (size, sizeof *buckets)))
        return -1;
    if (!(objects = realloc (s_table.objects, size * sizeof *objects))) {
        free (buckets);
        return -1;
    }
    free (s_table.buckets);
    s_table.objects = objects;
    s_table.buckets = buckets;
    s_table.size = s_table.n_buckets = size;
    for (size_t i = 0; i < s_table.count; i++)
        if (s_table.objects [i].ref)
            s_index_add (i);
    return 0;
}

static cs_object_t *
s_lookup (const char *ref, CK_OBJECT_CLASS klass)
{
    size_t next = s_table.n_buckets ? s_table.buckets [s_hash (ref, klass) & (s_table.n_buckets - 1)] : 0;
    while (next) {
        cs_object_t *object = &s_table.objects [next - 1];
        if (object->klass == klass && strcmp (object->ref, ref) == 0)
            return object;
        next = object->chain;
    }
    return NULL;
}

/*  The token entry of (ref, class), made when new.  */
static cs_object_t *
s_slot_for (const char *ref, CK_OBJECT_CLASS klass)
{
    cs_object_t *object = s_lookup (ref, klass);
    char *copy;
    if (object)
        return object;
    if (s_grow () || !(copy = strdup (ref)))
        return NULL;
    s_table.objects [s_table.count] = (cs_object_t) { .klass = klass, .ref = copy };
    s_index_add (s_table.count);
    return &s_table.objects [s_table.count++];
}

/*  Empties an entry (its handle stays taken).  */
static void
s_object_clear (cs_object_t *object)
{
    cs_key_unref (&object->key);
    cs_attrs_clear (&object->attrs);
}

/*  Puts one KeyInfo's objects.  An older broker sets neither has_private
 *  nor has_public: then both objects exist.  A token secret key is one
 *  CKO_SECRET_KEY object (has_private, its private_attributes).  put
 *  (NULL: not wanted) gets the handles of the objects put, 0 for a class
 *  the key has not, so that a caller does not look them up again (three
 *  lookups a key cost a 100,000-key walk 90 ms: issue #25).  */
static CK_RV
s_put (const Cs__KeyInfo *info, cs_key_t *key, CK_OBJECT_HANDLE put [2])
{
    bool secret = key->key_type == CKK_AES || key->key_type == CKK_GENERIC_SECRET;
    const CK_OBJECT_CLASS classes [] = { CKO_PUBLIC_KEY, secret ? CKO_SECRET_KEY : CKO_PRIVATE_KEY };
    bool legacy = !secret && !info->has_private && !info->has_public;
    bool has [2] = { !secret && (legacy || info->has_public), legacy || info->has_private };
    Cs__Attribute *const *attrs [2] = { info->public_attributes, info->private_attributes };
    size_t n_attrs [2] = { info->n_public_attributes, info->n_private_attributes };
    for (int c = 0; c < 2; c++) {
        if (put)
            put [c] = 0;
        cs_object_t *object = has [c] ? s_slot_for (key->ref, classes [c]) : s_lookup (key->ref, classes [c]);
        if (!object && has [c])
            return CKR_HOST_MEMORY;
        if (!object)
            continue;
        s_object_clear (object);
        if (!has [c])
            continue;
        object->walk = s_table.walk;
        object->key = cs_key_ref (key);
        if (cs_attrs_from_wire (&object->attrs, attrs [c], n_attrs [c]))
            return CKR_HOST_MEMORY;
        if (put)
            put [c] = (CK_OBJECT_HANDLE) (object - s_table.objects) + 1;
    }
    return CKR_OK;
}

/*  True when (ref, either class) has a live object.  */
static bool
s_live (const char *ref)
{
    cs_object_t *pub = s_lookup (ref, CKO_PUBLIC_KEY), *priv = s_lookup (ref, CKO_PRIVATE_KEY);
    cs_object_t *secret = s_lookup (ref, CKO_SECRET_KEY);
    return (pub && pub->key) || (priv && priv->key) || (secret && secret->key);
}

CK_RV
cs_object_load_inlock (const Cs__ListKeysResult *result)
{
    CK_RV rv = CKR_OK;
    if (result && result->unchanged) {     /* known_version was current: keep the cache */
        s_table.have_list = true;
        return CKR_OK;
    }
    for (size_t i = 0; i < s_table.count; i++)
        if (s_table.objects [i].ref)
            s_object_clear (&s_table.objects [i]);
    for (size_t i = 0; rv == CKR_OK && result && i < result->n_keys; i++) {
        cs_key_t *key = cs_key_new (result->keys [i]);
        if (key && key->ref && !s_live (key->ref))    /* the first of duplicate refs wins */
            rv = s_put (result->keys [i], key, NULL);
        cs_key_unref (&key);
    }
    s_table.have_list = rv == CKR_OK;
    s_table.version = result ? result->version : 0;
    return rv;
}

CK_RV
cs_object_put_inlock (const Cs__KeyInfo *info, CK_OBJECT_CLASS klass, CK_OBJECT_HANDLE *handle_p)
{
    CK_RV rv = CKR_DEVICE_ERROR;
    cs_key_t *key = info ? cs_key_new (info) : NULL;
    cs_object_t *object = NULL;
    if (key && key->ref && (rv = s_put (info, key, NULL)) == CKR_OK)
        object = s_lookup (key->ref, klass);
    else
    if (rv == CKR_DEVICE_ERROR)
        cs_log_error ("the broker described a key without a usable ref or public parts");
    cs_key_unref (&key);
    if (handle_p)
        *handle_p = object && object->key ? (CK_OBJECT_HANDLE) (object - s_table.objects) + 1 : 0;
    return rv;
}

void
cs_object_forget_inlock (CK_OBJECT_HANDLE handle)
{
    cs_object_t *object = s_object (handle);
    if (object)
        s_object_clear (object);
}

uint64_t
cs_object_list_version_inlock (void)
{
    return s_table.have_list ? s_table.version : 0;
}

void
cs_object_invalidate_inlock (void)
{
    s_table.have_list = false;
}

void
cs_object_reset_inlock (void)
{
    for (size_t i = 0; i < s_table.count; i++) {
        s_object_clear (&s_table.objects [i]);
        free (s_table.objects [i].ref);
    }
    free (s_table.objects);
    free (s_table.buckets);
    memset (&s_table, 0, sizeof s_table);
    cs_dataobj_reset_inlock ();
}

/*  ---- session objects ---------------------------------------------------- */

CK_RV
cs_object_add_session_inlock (CK_SESSION_HANDLE session, CK_OBJECT_CLASS klass, cs_key_t *key,
                       cs_attrs_t *attrs, CK_OBJECT_HANDLE *handle_p)
{
    if (s_grow ())
        return CKR_HOST_MEMORY;
    s_table.objects [s_table.count] = (cs_object_t) {
        .klass = klass, .key = cs_key_ref (key), .attrs = *attrs, .session = session };
    memset (attrs, 0, sizeof *attrs);
    *handle_p = ++s_table.count;
    return CKR_OK;
}

void
cs_object_session_closed_inlock (CK_SESSION_HANDLE session)
{
    for (size_t i = 0; i < s_table.count; i++)
        if (!s_table.objects [i].ref && (session == 0 || s_table.objects [i].session == session))
            s_object_clear (&s_table.objects [i]);
    cs_dataobj_session_closed_inlock (session);
}

static bool
s_visible_inlock (const cs_object_t *object)
{
    return object && object->key && (cs_login_user_logged_in_inlock () || !cs_objattr_flag (object, CKA_PRIVATE, true));
}

void
cs_object_logged_out_inlock (void)
{
    for (size_t i = 0; i < s_table.count; i++)
        if (!s_table.objects [i].ref && s_table.objects [i].key
        &&  cs_objattr_flag (&s_table.objects [i], CKA_PRIVATE, true))
            s_object_clear (&s_table.objects [i]);
    cs_dataobj_logged_out_inlock ();
}

/*  ---- looking at objects --------------------------------------------------- */

cs_key_t *
cs_object_key_inlock (CK_OBJECT_HANDLE handle, CK_OBJECT_CLASS *class_p)
{
    cs_object_t *object = s_object (handle);
    if (!s_visible_inlock (object))
        return NULL;
    if (class_p)
        *class_p = object->klass;
    return cs_key_ref (object->key);
}

/*  HelloResult.usage_separation (cs_object_usage_set).  */
static _Atomic int s_usage = CS_USAGE_STRICT;

void
cs_object_usage_set (cs_usage_policy_t policy)
{
    atomic_store_explicit (&s_usage, (int) policy, memory_order_relaxed);
}

cs_usage_policy_t
cs_object_usage (void)
{
    return (cs_usage_policy_t) atomic_load_explicit (&s_usage, memory_order_relaxed);
}

unsigned
cs_object_roles_inlock (CK_OBJECT_HANDLE handle)
{
    const cs_object_t *object = s_object (handle);
    return s_visible_inlock (object) ? cs_objattr_roles (object) : 0;
}

CK_RV
cs_object_usage_check_inlock (CK_OBJECT_HANDLE handle, cs_usage_use_t use)
{
    return cs_usage_job_check (cs_object_usage (), cs_object_roles_inlock (handle), use);
}

int
cs_object_usage_defaults (CK_OBJECT_CLASS klass, const CK_ATTRIBUTE *tmpl, CK_ULONG count, cs_attrs_t *attrs)
{
    return cs_objattr_usage_defaults (cs_object_usage (), klass, tmpl, count, attrs);
}

/*  The use (cs_usage.h) of an operation flag on a private or secret key;
 *  false for the public operations (CKF_VERIFY, CKF_VERIFY_RECOVER).  */
static bool
s_use_of (CK_FLAGS want, cs_usage_use_t *use_p)
{
    *use_p = want & CKF_SIGN ? CS_USE_SIGN : want & CKF_DECRYPT ? CS_USE_DECRYPT
           : want & CKF_DERIVE ? CS_USE_DERIVE : want & CKF_SIGN_RECOVER ? CS_USE_SIGN_RECOVER
           : want & CKF_DECAPSULATE ? CS_USE_DECAPSULATE : CS_USE_ENCRYPT;
    return !(want & (CKF_VERIFY | CKF_VERIFY_RECOVER | CKF_ENCAPSULATE));
}

CK_RV
cs_object_login_check_inlock (CK_OBJECT_HANDLE handle, CK_FLAGS want)
{
    cs_object_t *object = s_object (handle);
    if (!object || !object->key || cs_login_user_logged_in_inlock ())
        return CKR_OK;
    bool held = object->ref && (object->klass == CKO_SECRET_KEY
                                || (want & (CKF_SIGN | CKF_SIGN_RECOVER | CKF_DECRYPT | CKF_DERIVE | CKF_DECAPSULATE)));
    return held || cs_objattr_flag (object, CKA_PRIVATE, true) ? CKR_USER_NOT_LOGGED_IN : CKR_OK;
}

CK_RV
cs_object_use_inlock (CK_OBJECT_HANDLE handle, CK_FLAGS want, cs_key_t **key_p)
{
    cs_object_t *object = s_object (handle);
    bool need_private = want & (CKF_SIGN | CKF_SIGN_RECOVER | CKF_DECRYPT | CKF_DERIVE | CKF_DECAPSULATE);
    CK_ATTRIBUTE_TYPE usage = want & CKF_SIGN ? CKA_SIGN : want & CKF_DECRYPT ? CKA_DECRYPT
                            : want & CKF_DERIVE ? CKA_DERIVE
                            : want & CKF_DECAPSULATE ? CKA_DECAPSULATE
                            : want & CKF_ENCAPSULATE ? CKA_ENCAPSULATE
                            : want & CKF_SIGN_RECOVER ? CKA_SIGN_RECOVER
                            : want & CKF_VERIFY_RECOVER ? CKA_VERIFY_RECOVER
                            : want & CKF_VERIFY ? CKA_VERIFY : CKA_ENCRYPT;
    if (!s_visible_inlock (object))
        return CKR_KEY_HANDLE_INVALID;
    if ((object->klass != CKO_SECRET_KEY && object->klass != (need_private ? CKO_PRIVATE_KEY : CKO_PUBLIC_KEY))
    ||  !cs_objattr_flag (object, usage, false))
        return CKR_KEY_FUNCTION_NOT_PERMITTED;
    cs_usage_use_t use;
    if (object->klass != CKO_PUBLIC_KEY && s_use_of (want, &use)
    &&  cs_usage_job_check (cs_object_usage (), cs_objattr_roles (object), use) != CKR_OK)
        return CKR_KEY_FUNCTION_NOT_PERMITTED;  /* docs/CONTRACTS.md "Usage separation" */
    *key_p = cs_key_ref (object->key);
    return CKR_OK;
}

bool
cs_object_flag_inlock (CK_OBJECT_HANDLE handle, CK_ATTRIBUTE_TYPE type, bool dflt)
{
    cs_object_t *object = s_object (handle);
    return s_visible_inlock (object) ? cs_objattr_flag (object, type, dflt) : dflt;
}

CK_RV
cs_object_info_inlock (CK_OBJECT_HANDLE handle, cs_object_info_t *info)
{
    cs_object_t *object = s_object (handle);
    memset (info, 0, sizeof *info);
    if (!s_visible_inlock (object))
        return CKR_OBJECT_HANDLE_INVALID;
    if (cs_attrs_copy (&info->attrs, &object->attrs))
        return CKR_HOST_MEMORY;
    info->klass = object->klass;
    info->key = cs_key_ref (object->key);
    info->token = object->ref != NULL;
    return CKR_OK;
}

void
cs_object_info_clear (cs_object_info_t *info)
{
    cs_key_unref (&info->key);
    cs_attrs_clear (&info->attrs);
}

/*  Fills one template entry; returns its own CK_RV (PKCS#11 2.40 §5.7).  */
static CK_RV
s_get_one (const cs_object_t *object, CK_ATTRIBUTE *attr)
{
    CK_RV rv = CKR_OK;
    cs_objattr_value_t value = { 0 };
    cs_objattr_result_t kind = cs_objattr_get (object, attr->type, &value);
    if (kind != CS_OBJATTR_OK) {
        attr->ulValueLen = CK_UNAVAILABLE_INFORMATION;
        return kind == CS_OBJATTR_SENSITIVE ? CKR_ATTRIBUTE_SENSITIVE : CKR_ATTRIBUTE_TYPE_INVALID;
    }
    if (!attr->pValue)
        attr->ulValueLen = value.len;
    else
    if (attr->ulValueLen < value.len) {
        attr->ulValueLen = CK_UNAVAILABLE_INFORMATION;
        rv = CKR_BUFFER_TOO_SMALL;
    }
    else {
        if (value.len)
            memcpy (attr->pValue, value.data, value.len);
        attr->ulValueLen = value.len;
    }
    cs_objattr_value_wipe (&value);
    return rv;
}

CK_RV
cs_object_get_attributes_inlock (CK_OBJECT_HANDLE handle, CK_ATTRIBUTE_PTR tmpl, CK_ULONG count)
{
    CK_RV rv = CKR_OK;
    const cs_object_t *object = s_object (handle);
    if (cs_dataobj_is_handle (handle))
        return cs_dataobj_get_attributes_inlock (handle, tmpl, count);
    if (!s_visible_inlock (object))
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
        cs_objattr_value_t value = { 0 };
        bool same = cs_attr_kind (tmpl [i].type) != CS_ATTR_SECRET
                 && cs_objattr_get (object, tmpl [i].type, &value) == CS_OBJATTR_OK && value.len == tmpl [i].ulValueLen
                 && (!value.len || (tmpl [i].pValue && !memcmp (value.data, tmpl [i].pValue, value.len)));
        if (!same)
            return false;
    }
    return true;
}

/*  cs_object_find_inlock, of the session objects only when !token.  */
static CK_RV
s_find_inlock (const CK_ATTRIBUTE *tmpl, CK_ULONG count, bool token, CK_OBJECT_HANDLE **handles_p, size_t *count_p)
{
    CK_OBJECT_HANDLE *handles = calloc (s_table.count + cs_dataobj_count_inlock () + 1, sizeof *handles);
    size_t found = 0;
    if (!handles)
        return CKR_HOST_MEMORY;
    for (size_t i = 0; i < s_table.count; i++)
        if ((token || !s_table.objects [i].ref)
        &&  s_visible_inlock (&s_table.objects [i]) && s_matches (&s_table.objects [i], tmpl, count))
            handles [found++] = i + 1;
    found += cs_dataobj_find_inlock (tmpl, count, handles + found);
    *handles_p = handles;
    *count_p = found;
    return CKR_OK;
}

CK_RV
cs_object_find_inlock (const CK_ATTRIBUTE *tmpl, CK_ULONG count, CK_OBJECT_HANDLE **handles_p, size_t *count_p)
{
    return s_find_inlock (tmpl, count, true, handles_p, count_p);
}

/*  ---- paged key lists (docs/CONTRACTS.md "Key lists in pages") ----------- */

/*  client/list-page (cs_object_list_page_set).  */
static _Atomic uint32_t s_list_page = CS_OBJECT_LIST_PAGE_DEFAULT;

void
cs_object_list_page_set (uint32_t keys)
{
    atomic_store_explicit (&s_list_page, keys, memory_order_relaxed);
}

uint32_t
cs_object_list_page (void)
{
    return atomic_load_explicit (&s_list_page, memory_order_relaxed);
}

unsigned
cs_object_walk_begin_inlock (const CK_ATTRIBUTE *tmpl, CK_ULONG count, CK_OBJECT_HANDLE **handles_p,
                             size_t *count_p)
{
    s_table.have_list = false;
    if (++s_table.walk == 0)            /* after 2^32 walks: older marks read as newer, kept */
        s_table.walk = 1;
    return s_find_inlock (tmpl, count, false, handles_p, count_p) == CKR_OK ? s_table.walk : 0;
}

CK_RV
cs_object_walk_page_inlock (const Cs__ListKeysResult *page, const CK_ATTRIBUTE *tmpl, CK_ULONG count,
                            CK_OBJECT_HANDLE **handles_p, size_t *count_p)
{
    CK_OBJECT_HANDLE *handles = realloc (*handles_p, (*count_p + 2 * page->n_keys + 1) * sizeof *handles);
    CK_RV rv = handles ? CKR_OK : CKR_HOST_MEMORY;
    if (handles)
        *handles_p = handles;
    for (size_t i = 0; rv == CKR_OK && i < page->n_keys; i++) {
        cs_key_t *key = cs_key_new (page->keys [i]);
        CK_OBJECT_HANDLE put [2];
        if (key && key->ref && (rv = s_put (page->keys [i], key, put)) == CKR_OK)
            for (size_t c = 0; c < 2; c++) {
                cs_object_t *object = s_object (put [c]);
                if (s_visible_inlock (object) && s_matches (object, tmpl, count))
                    handles [(*count_p)++] = put [c];
            }
        cs_key_unref (&key);
    }
    return rv;
}

void
cs_object_walk_end_inlock (unsigned walk, uint64_t version)
{
    for (size_t i = 0; walk && i < s_table.count; i++)
        if (s_table.objects [i].ref && s_table.objects [i].key && s_table.objects [i].walk < walk)
            s_object_clear (&s_table.objects [i]);
    if (walk && walk == s_table.walk) {
        s_table.have_list = true;
        s_table.version = version;
    }
}

cs_object_t *
cs_object_entry_inlock (CK_OBJECT_HANDLE handle)
{
    return s_object (handle);
}

bool
cs_object_visible_inlock (const cs_object_t *object)
{
    return s_visible_inlock (object);
}

void
cs_object_entry_clear_inlock (cs_object_t *object)
{
    s_object_clear (object);
}
