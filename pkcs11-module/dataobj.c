/*  dataobj.c — certificates and data objects (dataobj.h).
 *
 *  Every attribute but CKA_CLASS and CKA_TOKEN is stored in the entry's
 *  list in its C form (CK_BBOOL, CK_ULONG, bytes), defaults included, so
 *  reading, matching and sending are one lookup each.
 */
#include <stdlib.h>
#include <string.h>
#include <openssl/evp.h>
#include <openssl/x509.h>
#include "attrs.h"
#include "log.h"
#include "module.h"
#include "session.h"
#include "token.h"
#include "dataobj.h"

typedef struct {
    bool live;
    CK_OBJECT_CLASS klass;
    char *ref;                  /* token objects (kept while gone); NULL: session object */
    CK_SESSION_HANDLE session;  /* session objects: the session that made it */
    cs_attrs_t attrs;
} s_obj_t;

static struct {
    s_obj_t *objects;
    size_t count;
    size_t size;
} s_table;

/*  ---- attributes of the two classes ------------------------------------- */

typedef enum { S_BYTES, S_BOOL, S_ULONG } s_kind_t;

/*  How one attribute may change (PKCS#11 2.40 §4.4 table 16, §4.5, §4.6).  */
typedef enum { S_FREE, S_COPY_ONLY, S_ONLY_FALSE, S_FIXED } s_rule_t;

typedef struct {
    CK_ATTRIBUTE_TYPE type;
    s_kind_t kind;
    s_rule_t rule;
    bool cert, data;            /* an attribute of certificates, of data objects */
} s_attr_def_t;

static const s_attr_def_t s_defs [] = {
    { CKA_PRIVATE, S_BOOL, S_COPY_ONLY, true, true },
    { CKA_MODIFIABLE, S_BOOL, S_COPY_ONLY, true, true },
    { CKA_COPYABLE, S_BOOL, S_ONLY_FALSE, true, true },
    { CKA_DESTROYABLE, S_BOOL, S_COPY_ONLY, true, true },
    { CKA_LABEL, S_BYTES, S_FREE, true, true },
    { CKA_APPLICATION, S_BYTES, S_FREE, false, true },
    { CKA_OBJECT_ID, S_BYTES, S_FREE, false, true },
    { CKA_VALUE, S_BYTES, S_FREE, true, true },         /* certificates: S_FIXED (s_rule) */
    { CKA_CERTIFICATE_TYPE, S_ULONG, S_FIXED, true, false },
    { CKA_TRUSTED, S_BOOL, S_FIXED, true, false },
    { CKA_CERTIFICATE_CATEGORY, S_ULONG, S_FREE, true, false },
    { CKA_CHECK_VALUE, S_BYTES, S_FIXED, true, false },
    { CKA_START_DATE, S_BYTES, S_FREE, true, false },
    { CKA_END_DATE, S_BYTES, S_FREE, true, false },
    { CKA_PUBLIC_KEY_INFO, S_BYTES, S_FIXED, true, false },
    { CKA_SUBJECT, S_BYTES, S_FREE, true, false },
    { CKA_ID, S_BYTES, S_FREE, true, false },
    { CKA_ISSUER, S_BYTES, S_FREE, true, false },
    { CKA_SERIAL_NUMBER, S_BYTES, S_FREE, true, false },
    { CKA_URL, S_BYTES, S_FREE, true, false },
    { CKA_HASH_OF_SUBJECT_PUBLIC_KEY, S_BYTES, S_FREE, true, false },
    { CKA_HASH_OF_ISSUER_PUBLIC_KEY, S_BYTES, S_FREE, true, false },
    { CKA_JAVA_MIDP_SECURITY_DOMAIN, S_ULONG, S_FREE, true, false },
    { CKA_NAME_HASH_ALGORITHM, S_ULONG, S_FREE, true, false },
};
#define S_DEFS (sizeof s_defs / sizeof s_defs [0])

static const s_attr_def_t *
s_def (CK_OBJECT_CLASS klass, CK_ATTRIBUTE_TYPE type)
{
    for (size_t i = 0; i < S_DEFS; i++)
        if (s_defs [i].type == type && (klass == CKO_CERTIFICATE ? s_defs [i].cert : s_defs [i].data))
            return &s_defs [i];
    return NULL;
}

static s_rule_t
s_rule (CK_OBJECT_CLASS klass, const s_attr_def_t *def)
{
    return klass == CKO_CERTIFICATE && def->type == CKA_VALUE ? S_FIXED : def->rule;
}

bool
cs_dataobj_is_handle (CK_OBJECT_HANDLE handle)
{
    return handle > CS_DATAOBJ_HANDLE_BASE && handle <= CS_DATAOBJ_HANDLE_BASE + 0x3fffffffUL;
}

bool
cs_dataobj_is_template (const CK_ATTRIBUTE *tmpl, CK_ULONG count)
{
    CK_OBJECT_CLASS klass;
    return cs_template_ulong (tmpl, count, CKA_CLASS, &klass) && (klass == CKO_CERTIFICATE || klass == CKO_DATA);
}

static s_obj_t *
s_object (CK_OBJECT_HANDLE handle)
{
    if (!cs_dataobj_is_handle (handle) || handle - CS_DATAOBJ_HANDLE_BASE > s_table.count)
        return NULL;
    return &s_table.objects [handle - CS_DATAOBJ_HANDLE_BASE - 1];
}

static CK_OBJECT_HANDLE
s_handle (const s_obj_t *object)
{
    return CS_DATAOBJ_HANDLE_BASE + (CK_OBJECT_HANDLE) (object - s_table.objects) + 1;
}

static bool
s_visible (const s_obj_t *object)
{
    return object && object->live
        && (!cs_attrs_bool (&object->attrs, CKA_PRIVATE, false) || cs_token_user_logged_in ());
}

/*  A new entry (never moves the others' handles: the table only grows).  */
static s_obj_t *
s_add (void)
{
    if (s_table.count == s_table.size) {
        size_t size = s_table.size ? 2 * s_table.size : 16;
        s_obj_t *objects = realloc (s_table.objects, size * sizeof *objects);
        if (!objects)
            return NULL;
        s_table.objects = objects;
        s_table.size = size;
    }
    s_obj_t *object = &s_table.objects [s_table.count++];
    memset (object, 0, sizeof *object);
    return object;
}

static void
s_clear (s_obj_t *object)
{
    object->live = false;
    cs_attrs_clear (&object->attrs);
}

/*  ---- the value of one attribute ---------------------------------------- */

/*  Points *data and *len at the value of type; false when the object has none.  */
static bool
s_value (const s_obj_t *object, CK_ATTRIBUTE_TYPE type, const void **data, CK_ULONG *len,
         CK_BBOOL *flag, CK_ULONG *number)
{
    const cs_attr_t *stored;
    if (type == CKA_CLASS || type == CKA_TOKEN) {
        *number = object->klass;
        *flag = object->ref ? CK_TRUE : CK_FALSE;
        *data = type == CKA_CLASS ? (const void *) number : (const void *) flag;
        *len = type == CKA_CLASS ? sizeof *number : sizeof *flag;
        return true;
    }
    if (!s_def (object->klass, type) || !(stored = cs_attrs_find (&object->attrs, type)))
        return false;
    *data = stored->len ? stored->value : (const void *) "";
    *len = stored->len;
    return true;
}

static CK_RV
s_get_one (const s_obj_t *object, CK_ATTRIBUTE *attr)
{
    const void *data;
    CK_ULONG len, number;
    CK_BBOOL flag;
    if (!s_value (object, attr->type, &data, &len, &flag, &number)) {
        attr->ulValueLen = CK_UNAVAILABLE_INFORMATION;
        return CKR_ATTRIBUTE_TYPE_INVALID;
    }
    if (!attr->pValue)
        attr->ulValueLen = len;
    else
    if (attr->ulValueLen < len) {
        attr->ulValueLen = CK_UNAVAILABLE_INFORMATION;
        return CKR_BUFFER_TOO_SMALL;
    }
    else {
        if (len)
            memcpy (attr->pValue, data, len);
        attr->ulValueLen = len;
    }
    return CKR_OK;
}

CK_RV
cs_dataobj_get_attributes (CK_OBJECT_HANDLE handle, CK_ATTRIBUTE_PTR tmpl, CK_ULONG count)
{
    const s_obj_t *object = s_object (handle);
    CK_RV rv = CKR_OK;
    if (!s_visible (object))
        return CKR_OBJECT_HANDLE_INVALID;
    for (CK_ULONG i = 0; i < count; i++) {
        CK_RV one = s_get_one (object, &tmpl [i]);
        if (one != CKR_OK)
            rv = one;
    }
    return rv;
}

size_t
cs_dataobj_count (void)
{
    return s_table.count;
}

static bool
s_matches (const s_obj_t *object, const CK_ATTRIBUTE *tmpl, CK_ULONG count)
{
    for (CK_ULONG i = 0; i < count; i++) {
        const void *data;
        CK_ULONG len, number;
        CK_BBOOL flag;
        if (!s_value (object, tmpl [i].type, &data, &len, &flag, &number) || len != tmpl [i].ulValueLen
        ||  (len && (!tmpl [i].pValue || memcmp (data, tmpl [i].pValue, len))))
            return false;
    }
    return true;
}

size_t
cs_dataobj_find (const CK_ATTRIBUTE *tmpl, CK_ULONG count, CK_OBJECT_HANDLE *out)
{
    size_t found = 0;
    for (size_t i = 0; i < s_table.count; i++)
        if (s_visible (&s_table.objects [i]) && s_matches (&s_table.objects [i], tmpl, count))
            out [found++] = s_handle (&s_table.objects [i]);
    return found;
}

void
cs_dataobj_session_closed (CK_SESSION_HANDLE session)
{
    for (size_t i = 0; i < s_table.count; i++)
        if (!s_table.objects [i].ref && (session == 0 || s_table.objects [i].session == session))
            s_clear (&s_table.objects [i]);
}

void
cs_dataobj_logged_out (void)
{
    for (size_t i = 0; i < s_table.count; i++)
        if (!s_table.objects [i].ref && cs_attrs_bool (&s_table.objects [i].attrs, CKA_PRIVATE, false))
            s_clear (&s_table.objects [i]);
}

void
cs_dataobj_reset (void)
{
    for (size_t i = 0; i < s_table.count; i++) {
        s_clear (&s_table.objects [i]);
        free (s_table.objects [i].ref);
    }
    free (s_table.objects);
    memset (&s_table, 0, sizeof s_table);
}

/*  ---- templates ---------------------------------------------------------- */

/*  Checks a template's entries for an object of klass (CKA_CLASS and
 *  CKA_TOKEN are checked by the caller).  */
static CK_RV
s_check_template (CK_OBJECT_CLASS klass, const CK_ATTRIBUTE *tmpl, CK_ULONG count)
{
    if (!tmpl && count)
        return CKR_ARGUMENTS_BAD;
    if (count > CS_WIRE_MAX_ATTRIBUTES)
        return CKR_TEMPLATE_INCONSISTENT;
    for (CK_ULONG i = 0; i < count; i++) {
        const CK_ATTRIBUTE *attr = &tmpl [i];
        const s_attr_def_t *def = s_def (klass, attr->type);
        size_t max = attr->type == CKA_VALUE ? CS_WIRE_MAX_OBJECT_VALUE : CS_WIRE_MAX_ATTR_BYTES;
        if (!attr->pValue && attr->ulValueLen)
            return CKR_ARGUMENTS_BAD;
        if (attr->type == CKA_CLASS || attr->type == CKA_TOKEN) {
            if (attr->ulValueLen != (attr->type == CKA_CLASS ? sizeof (CK_ULONG) : sizeof (CK_BBOOL)))
                return CKR_ATTRIBUTE_VALUE_INVALID;
            continue;
        }
        if (!def)
            return CKR_ATTRIBUTE_TYPE_INVALID;
        if ((def->kind == S_BOOL && (attr->ulValueLen != 1 || *(const CK_BBOOL *) attr->pValue > 1))
        ||  (def->kind == S_ULONG && attr->ulValueLen != sizeof (CK_ULONG))
        ||  attr->ulValueLen > max)
            return CKR_ATTRIBUTE_VALUE_INVALID;
    }
    return CKR_OK;
}

static bool
s_skip_class_token (CK_ATTRIBUTE_TYPE type)
{
    return type == CKA_CLASS || type == CKA_TOKEN;
}

/*  Copies the template's entries (but CKA_CLASS, CKA_TOKEN) over attrs,
 *  CKA_VALUE included (attrs.c takes it for a key component).  */
static int
s_attrs_add (cs_attrs_t *attrs, const CK_ATTRIBUTE *tmpl, CK_ULONG count)
{
    for (CK_ULONG i = 0; i < count; i++)
        if (!s_skip_class_token (tmpl [i].type) && cs_attrs_set (attrs, tmpl [i].type, tmpl [i].pValue, tmpl [i].ulValueLen))
            return -1;
    return 0;
}

static int
s_default (cs_attrs_t *attrs, CK_ATTRIBUTE_TYPE type, const s_attr_def_t *def, bool flag)
{
    if (cs_attrs_find (attrs, type))
        return 0;
    return def->kind == S_BOOL ? cs_attrs_set_bool (attrs, type, flag)
         : def->kind == S_ULONG ? cs_attrs_set_ulong (attrs, type, 0)
         : cs_attrs_set (attrs, type, NULL, 0);
}

/*  A certificate's derived attributes (§4.6.3: CKA_CHECK_VALUE is the first
 *  three bytes of the SHA-1 of CKA_VALUE) and the check of its value.  */
static CK_RV
s_certificate (cs_attrs_t *attrs)
{
    const cs_attr_t *type = cs_attrs_find (attrs, CKA_CERTIFICATE_TYPE);
    const cs_attr_t *value = cs_attrs_find (attrs, CKA_VALUE);
    const cs_attr_t *check = cs_attrs_find (attrs, CKA_CHECK_VALUE);
    if (!type || !value || !value->len)
        return CKR_TEMPLATE_INCOMPLETE;
    if (*(const CK_ULONG *) type->value != CKC_X_509)
        return CKR_ATTRIBUTE_VALUE_INVALID;
    if (cs_attrs_bool (attrs, CKA_TRUSTED, false))
        return CKR_ATTRIBUTE_READ_ONLY;         /* §4.6.1: only the SO sets it (not supported) */
    const unsigned char *p = value->value;
    X509 *cert = d2i_X509 (NULL, &p, (long) value->len);
    if (!cert || p != value->value + value->len) {
        X509_free (cert);
        return CKR_ATTRIBUTE_VALUE_INVALID;
    }
    unsigned char sha1 [EVP_MAX_MD_SIZE];
    unsigned int sha1_len = 0;
    CK_RV rv = EVP_Digest (value->value, value->len, sha1, &sha1_len, EVP_sha1 (), NULL) == 1
             ? CKR_OK : CKR_DEVICE_ERROR;
    if (rv == CKR_OK && check && (check->len != 3 || memcmp (check->value, sha1, 3) != 0))
        rv = CKR_ATTRIBUTE_VALUE_INVALID;
    struct { CK_ATTRIBUTE_TYPE type; unsigned char *der; int len; } derived [] = {
        { CKA_SUBJECT, NULL, 0 }, { CKA_ISSUER, NULL, 0 }, { CKA_SERIAL_NUMBER, NULL, 0 },
        { CKA_PUBLIC_KEY_INFO, NULL, 0 },
    };
    derived [0].len = i2d_X509_NAME (X509_get_subject_name (cert), &derived [0].der);
    derived [1].len = i2d_X509_NAME (X509_get_issuer_name (cert), &derived [1].der);
    derived [2].len = i2d_ASN1_INTEGER (X509_get_serialNumber (cert), &derived [2].der);
    derived [3].len = i2d_X509_PUBKEY (X509_get_X509_PUBKEY (cert), &derived [3].der);
    for (size_t i = 0; i < 4; i++) {
        if (rv == CKR_OK && derived [i].len <= 0)
            rv = CKR_ATTRIBUTE_VALUE_INVALID;
        if (rv == CKR_OK && !cs_attrs_find (attrs, derived [i].type)
        &&  cs_attrs_set (attrs, derived [i].type, derived [i].der, (size_t) derived [i].len))
            rv = CKR_HOST_MEMORY;
        OPENSSL_free (derived [i].der);
    }
    if (rv == CKR_OK && !check && cs_attrs_set (attrs, CKA_CHECK_VALUE, sha1, 3))
        rv = CKR_HOST_MEMORY;
    X509_free (cert);
    return rv;
}

static CK_RV s_build (CK_OBJECT_CLASS klass, const cs_attrs_t *base, const CK_ATTRIBUTE *tmpl, CK_ULONG count,
                      cs_attrs_t *attrs);

CK_RV
cs_dataobj_attrs_new (CK_OBJECT_CLASS klass, const CK_ATTRIBUTE *tmpl, CK_ULONG count, cs_attrs_t *attrs)
{
    CK_RV rv = s_check_template (klass, tmpl, count);
    return rv != CKR_OK ? rv : s_build (klass, NULL, tmpl, count, attrs);
}

/*  The full attribute list of a new object of klass: base (a copied
 *  object's, or empty) with the template over it, the defaults, and for a
 *  certificate the derived values.  */
static CK_RV
s_build (CK_OBJECT_CLASS klass, const cs_attrs_t *base, const CK_ATTRIBUTE *tmpl, CK_ULONG count,
         cs_attrs_t *attrs)
{
    memset (attrs, 0, sizeof *attrs);
    if ((base && cs_attrs_copy (attrs, base)) || s_attrs_add (attrs, tmpl, count))
        return CKR_HOST_MEMORY;
    for (size_t i = 0; i < S_DEFS; i++) {
        const s_attr_def_t *def = &s_defs [i];
        bool dflt = def->type == CKA_MODIFIABLE || def->type == CKA_COPYABLE || def->type == CKA_DESTROYABLE;
        if ((klass == CKO_CERTIFICATE ? def->cert : def->data) && def->type != CKA_CERTIFICATE_TYPE
        &&  def->type != CKA_CHECK_VALUE && def->type != CKA_PUBLIC_KEY_INFO
        &&  !(klass == CKO_CERTIFICATE && def->type == CKA_VALUE)
        &&  !(klass == CKO_CERTIFICATE && (def->type == CKA_SUBJECT || def->type == CKA_ISSUER
                                           || def->type == CKA_SERIAL_NUMBER))
        &&  s_default (attrs, def->type, def, dflt))
            return CKR_HOST_MEMORY;
    }
    return klass == CKO_CERTIFICATE ? s_certificate (attrs) : CKR_OK;
}

/*  ---- the wire ---------------------------------------------------------- */

static void
s_wire_free (Cs__ObjectInfo *info)
{
    for (size_t i = 0; i < info->n_attributes; i++)
        free (info->attributes [i]);
    free (info->attributes);
    info->attributes = NULL;
    info->n_attributes = 0;
}

/*  info (ref and class set by the caller) gets attrs: shallow, borrowing
 *  the values; free with s_wire_free.  */
static CK_RV
s_to_wire (CK_OBJECT_CLASS klass, const cs_attrs_t *attrs, Cs__ObjectInfo *info)
{
    info->object_class = klass;
    info->is_private = cs_attrs_bool (attrs, CKA_PRIVATE, false);
    info->attributes = calloc (attrs->count + 1, sizeof *info->attributes);
    if (!info->attributes)
        return CKR_HOST_MEMORY;
    for (size_t i = 0; i < attrs->count; i++) {
        const cs_attr_t *attr = &attrs->items [i];
        const s_attr_def_t *def = s_def (klass, attr->type);
        Cs__Attribute *wire = malloc (sizeof *wire);
        if (!wire)
            return CKR_HOST_MEMORY;
        cs__attribute__init (wire);
        info->attributes [info->n_attributes++] = wire;
        wire->type = attr->type;
        if (def && def->kind == S_BOOL && attr->len == 1) {
            wire->value_case = CS__ATTRIBUTE__VALUE_FLAG;
            wire->flag = attr->value [0] != 0;
        }
        else
        if (def && def->kind == S_ULONG && attr->len == sizeof (CK_ULONG)) {
            wire->value_case = CS__ATTRIBUTE__VALUE_NUMBER;
            wire->number = *(const CK_ULONG *) attr->value;
        }
        else {
            wire->value_case = CS__ATTRIBUTE__VALUE_BYTES;
            wire->bytes.data = attr->value;
            wire->bytes.len = attr->len;
        }
    }
    return CKR_OK;
}

/*  Puts an object from the broker into the table under its ref (its old
 *  handle when it had one).  NULL when out of memory or malformed.  */
static s_obj_t *
s_put_token (const Cs__ObjectInfo *info)
{
    s_obj_t *object = NULL;
    if (!info->ref || !*info->ref
    ||  (info->object_class != CKO_CERTIFICATE && info->object_class != CKO_DATA))
        return NULL;
    for (size_t i = 0; i < s_table.count && !object; i++)
        if (s_table.objects [i].ref && strcmp (s_table.objects [i].ref, info->ref) == 0)
            object = &s_table.objects [i];
    if (!object) {
        char *ref = strdup (info->ref);
        if (!ref || !(object = s_add ())) {
            free (ref);
            return NULL;
        }
        object->ref = ref;
    }
    s_clear (object);
    object->klass = info->object_class;
    int rc = cs_attrs_set_bool (&object->attrs, CKA_PRIVATE, info->is_private);
    for (size_t i = 0; rc == 0 && i < info->n_attributes; i++) {
        const Cs__Attribute *attr = info->attributes [i];
        CK_BBOOL flag = attr->flag ? CK_TRUE : CK_FALSE;
        CK_ULONG number = (CK_ULONG) attr->number;
        if (attr->type == CKA_PRIVATE || !s_def (object->klass, attr->type))
            continue;           /* from a newer peer, or never stored: skipped */
        rc = attr->value_case == CS__ATTRIBUTE__VALUE_FLAG ? cs_attrs_set (&object->attrs, attr->type, &flag, 1)
           : attr->value_case == CS__ATTRIBUTE__VALUE_NUMBER ? cs_attrs_set (&object->attrs, attr->type, &number,
                                                                              sizeof number)
           : cs_attrs_set (&object->attrs, attr->type, attr->bytes.data, attr->bytes.len);
    }
    if (rc) {
        s_clear (object);
        return NULL;
    }
    object->live = true;
    return object;
}

/*  Runs one object job with the login ticket; without the mutex.  On
 *  CKR_OK *reply_p holds a result of `kind` (or none for a destroy).  */
static CK_RV
s_job (Cs__Job *job, Cs__Result__KindCase kind, Cs__Reply **reply_p)
{
    CK_RV rv = cs_module_run_job (job, true, reply_p);
    if (rv == CKR_OK && kind != CS__RESULT__KIND__NOT_SET && (*reply_p)->results [0]->kind_case != kind) {
        cs_log_error ("the broker answered an object job with the wrong result");
        rv = CKR_DEVICE_ERROR;
    }
    if (rv != CKR_OK && *reply_p) {
        cs__reply__free_unpacked (*reply_p, NULL);
        *reply_p = NULL;
    }
    return rv;
}

CK_RV
cs_dataobj_load (const Cs__ObjectList *objects)
{
    CK_RV rv = CKR_OK;
    for (size_t i = 0; i < s_table.count; i++)
        if (s_table.objects [i].ref)
            s_clear (&s_table.objects [i]);
    for (size_t i = 0; objects && i < objects->n_objects && rv == CKR_OK; i++)
        if (!s_put_token (objects->objects [i]))
            rv = CKR_HOST_MEMORY;
    return rv;
}

CK_RV
cs_dataobj_refresh (const CK_ATTRIBUTE *tmpl, CK_ULONG count)
{
    Cs__ListObjectsJob list = CS__LIST_OBJECTS_JOB__INIT;
    Cs__Job job = CS__JOB__INIT;
    Cs__Reply *reply = NULL;
    CK_OBJECT_CLASS klass;
    CK_RV rv = CKR_OK;
    if (cs_template_ulong (tmpl, count, CKA_CLASS, &klass) && klass != CKO_CERTIFICATE && klass != CKO_DATA)
        return CKR_OK;          /* a key search: no round trip for objects */
    job.kind_case = CS__JOB__KIND_LIST_OBJECTS;
    job.list_objects = &list;
    if (s_job (&job, CS__RESULT__KIND_OBJECTS, &reply) != CKR_OK) {
        cs_log_debug ("no token objects from the broker: the list stays as it was");
        return CKR_OK;
    }
    cs_module_lock ();
    rv = cs_dataobj_load (reply->results [0]->objects);
    cs_module_unlock ();
    cs__reply__free_unpacked (reply, NULL);
    return rv;
}

/*  ---- entry points --------------------------------------------------------- */

/*  Under the mutex: may this session make or change an object that is a
 *  token object or private?  PKCS#11 2.40 §5.7, §6.7.1.  */
static CK_RV
s_may_write (cs_session_t *session, bool token, bool priv)
{
    if (token && !(cs_session_flags (session) & CKF_RW_SESSION))
        return CKR_SESSION_READ_ONLY;
    if ((token || priv) && !cs_token_user_logged_in ())
        return CKR_USER_NOT_LOGGED_IN;
    return CKR_OK;
}

/*  Stores attrs as a token object (ref NULL: a new one) and puts the reply
 *  into the table; *handle_p (if given) gets its handle.  Without the mutex.  */
static CK_RV
s_store (CK_OBJECT_CLASS klass, const char *ref, const cs_attrs_t *attrs, CK_OBJECT_HANDLE *handle_p)
{
    Cs__ObjectInfo info = CS__OBJECT_INFO__INIT;
    Cs__PutObjectJob put = CS__PUT_OBJECT_JOB__INIT;
    Cs__Job job = CS__JOB__INIT;
    Cs__Reply *reply = NULL;
    CK_RV rv = s_to_wire (klass, attrs, &info);
    info.ref = (char *) (ref ? ref : "");
    put.object = &info;
    job.kind_case = CS__JOB__KIND_PUT_OBJECT;
    job.put_object = &put;
    if (rv == CKR_OK)
        rv = s_job (&job, CS__RESULT__KIND_OBJECT, &reply);
    s_wire_free (&info);
    if (rv != CKR_OK)
        return rv;
    cs_module_lock ();
    s_obj_t *object = s_put_token (reply->results [0]->object);
    if (object && handle_p)
        *handle_p = s_handle (object);
    cs_module_unlock ();
    cs__reply__free_unpacked (reply, NULL);
    if (!object)
        cs_log_error ("the broker's reply lacks the stored object");
    return object ? CKR_OK : CKR_DEVICE_ERROR;
}

/*  A session object of klass with attrs (taken).  Under the mutex.  */
static CK_RV
s_add_session (CK_SESSION_HANDLE session, CK_OBJECT_CLASS klass, cs_attrs_t *attrs, CK_OBJECT_HANDLE *handle_p)
{
    s_obj_t *object = s_add ();
    if (!object)
        return CKR_HOST_MEMORY;
    object->klass = klass;
    object->session = session;
    object->attrs = *attrs;
    object->live = true;
    memset (attrs, 0, sizeof *attrs);
    *handle_p = s_handle (object);
    return CKR_OK;
}

CK_RV
cs_dataobj_create (CK_SESSION_HANDLE handle, const CK_ATTRIBUTE *tmpl, CK_ULONG count, CK_OBJECT_HANDLE *object_p)
{
    CK_OBJECT_CLASS klass = 0;
    cs_session_t *session;
    cs_attrs_t attrs = { 0 };
    CK_RV rv = cs_template_ulong (tmpl, count, CKA_CLASS, &klass) ? s_check_template (klass, tmpl, count)
                                                                 : CKR_TEMPLATE_INCOMPLETE;
    bool token = cs_template_bool (tmpl, count, CKA_TOKEN, false);
    if (rv != CKR_OK)
        return rv;
    if ((rv = cs_session_enter (handle, &session)) != CKR_OK)
        return rv;
    rv = s_may_write (session, token, cs_template_bool (tmpl, count, CKA_PRIVATE, false));
    cs_module_unlock ();
    if (rv == CKR_OK)
        rv = cs_dataobj_attrs_new (klass, tmpl, count, &attrs);
    if (rv == CKR_OK && token)
        rv = s_store (klass, NULL, &attrs, object_p);
    else
    if (rv == CKR_OK) {
        cs_module_lock ();
        rv = cs_session_lookup (handle) ? s_add_session (handle, klass, &attrs, object_p)
                                        : CKR_SESSION_HANDLE_INVALID;
        cs_module_unlock ();
    }
    cs_attrs_clear (&attrs);
    return rv;
}

static void
s_snapshot_clear (s_obj_t *snapshot)
{
    free (snapshot->ref);
    cs_attrs_clear (&snapshot->attrs);
}

/*  Under the mutex: a copy of visible object handle into *snapshot.  */
static CK_RV
s_take (CK_OBJECT_HANDLE handle, s_obj_t *snapshot)
{
    const s_obj_t *object = s_object (handle);
    memset (snapshot, 0, sizeof *snapshot);
    if (!s_visible (object))
        return CKR_OBJECT_HANDLE_INVALID;
    snapshot->klass = object->klass;
    snapshot->live = true;
    snapshot->ref = object->ref ? strdup (object->ref) : NULL;
    if (cs_attrs_copy (&snapshot->attrs, &object->attrs) || (object->ref && !snapshot->ref)) {
        s_snapshot_clear (snapshot);
        return CKR_HOST_MEMORY;
    }
    return CKR_OK;
}

/*  Takes the mutex (held on return when CKR_OK): the object's snapshot and
 *  the session's right to change it (flag: CKA_DESTROYABLE, CKA_MODIFIABLE).  */
static CK_RV
s_enter (CK_SESSION_HANDLE handle, CK_OBJECT_HANDLE object, s_obj_t *snapshot, CK_ATTRIBUTE_TYPE flag)
{
    cs_session_t *session;
    CK_RV rv = cs_session_enter (handle, &session);
    if (rv != CKR_OK)
        return rv;
    if ((rv = s_take (object, snapshot)) == CKR_OK && snapshot->ref)
        rv = s_may_write (session, true, false);
    if (rv == CKR_OK && !cs_attrs_bool (&snapshot->attrs, flag, true))
        rv = CKR_ACTION_PROHIBITED;
    if (rv != CKR_OK) {
        s_snapshot_clear (snapshot);
        cs_module_unlock ();
    }
    return rv;
}

CK_RV
cs_dataobj_destroy (CK_SESSION_HANDLE handle, CK_OBJECT_HANDLE object)
{
    Cs__DestroyObjectJob destroy = CS__DESTROY_OBJECT_JOB__INIT;
    Cs__Job job = CS__JOB__INIT;
    Cs__Reply *reply = NULL;
    s_obj_t snapshot;
    CK_RV rv = s_enter (handle, object, &snapshot, CKA_DESTROYABLE);
    if (rv != CKR_OK)
        return rv;
    if (!snapshot.ref)
        s_clear (s_object (object));
    cs_module_unlock ();
    if (snapshot.ref) {
        destroy.ref = snapshot.ref;
        job.kind_case = CS__JOB__KIND_DESTROY_OBJECT;
        job.destroy_object = &destroy;
        if ((rv = s_job (&job, CS__RESULT__KIND__NOT_SET, &reply)) == CKR_OK) {
            cs__reply__free_unpacked (reply, NULL);
            cs_module_lock ();
            s_clear (s_object (object));
            cs_module_unlock ();
        }
    }
    s_snapshot_clear (&snapshot);
    return rv;
}

/*  Checks a change (copy: C_CopyObject) of snapshot by tmpl.  */
static CK_RV
s_check_change (const s_obj_t *snapshot, const CK_ATTRIBUTE *tmpl, CK_ULONG count, bool copy)
{
    CK_RV rv = s_check_template (snapshot->klass, tmpl, count);
    for (CK_ULONG i = 0; rv == CKR_OK && i < count; i++) {
        const void *data;
        CK_ULONG len, number;
        CK_BBOOL flag;
        const s_attr_def_t *def = s_def (snapshot->klass, tmpl [i].type);
        bool same = s_value (snapshot, tmpl [i].type, &data, &len, &flag, &number) && len == tmpl [i].ulValueLen
                 && (!len || memcmp (data, tmpl [i].pValue, len) == 0);
        bool to_true = tmpl [i].ulValueLen == 1 && *(const CK_BBOOL *) tmpl [i].pValue;
        s_rule_t rule = tmpl [i].type == CKA_TOKEN ? S_COPY_ONLY
                      : tmpl [i].type == CKA_CLASS ? S_FIXED : s_rule (snapshot->klass, def);
        if (same || rule == S_FREE || (rule == S_COPY_ONLY && copy) || (rule == S_ONLY_FALSE && !to_true))
            continue;
        rv = CKR_ATTRIBUTE_READ_ONLY;
    }
    return rv;
}

CK_RV
cs_dataobj_set (CK_SESSION_HANDLE handle, CK_OBJECT_HANDLE object, const CK_ATTRIBUTE *tmpl, CK_ULONG count)
{
    s_obj_t snapshot;
    cs_attrs_t attrs = { 0 };
    CK_RV rv = s_enter (handle, object, &snapshot, CKA_MODIFIABLE);
    if (rv != CKR_OK)
        return rv;
    if ((rv = s_check_change (&snapshot, tmpl, count, false)) == CKR_OK
    &&  (cs_attrs_copy (&attrs, &snapshot.attrs) || s_attrs_add (&attrs, tmpl, count)))
        rv = CKR_HOST_MEMORY;
    if (rv == CKR_OK && !snapshot.ref) {
        s_obj_t *live = s_object (object);
        cs_attrs_clear (&live->attrs);
        live->attrs = attrs;
        memset (&attrs, 0, sizeof attrs);
    }
    cs_module_unlock ();
    if (rv == CKR_OK && snapshot.ref)
        rv = s_store (snapshot.klass, snapshot.ref, &attrs, NULL);
    cs_attrs_clear (&attrs);
    s_snapshot_clear (&snapshot);
    return rv;
}

CK_RV
cs_dataobj_copy (CK_SESSION_HANDLE handle, CK_OBJECT_HANDLE object, const CK_ATTRIBUTE *tmpl, CK_ULONG count,
                 CK_OBJECT_HANDLE *object_p)
{
    s_obj_t snapshot;
    cs_attrs_t attrs = { 0 };
    cs_session_t *session;
    bool token = false;
    CK_RV rv = cs_session_enter (handle, &session);
    if (rv != CKR_OK)
        return rv;
    if ((rv = s_take (object, &snapshot)) == CKR_OK && !cs_attrs_bool (&snapshot.attrs, CKA_COPYABLE, true))
        rv = CKR_ACTION_PROHIBITED;
    if (rv == CKR_OK)
        rv = s_check_change (&snapshot, tmpl, count, true);
    token = cs_template_bool (tmpl, count, CKA_TOKEN, snapshot.ref != NULL);
    if (rv == CKR_OK)
        rv = s_may_write (session, token, cs_template_bool (tmpl, count, CKA_PRIVATE,
                                                           cs_attrs_bool (&snapshot.attrs, CKA_PRIVATE, false)));
    if (rv == CKR_OK && (cs_attrs_copy (&attrs, &snapshot.attrs) || s_attrs_add (&attrs, tmpl, count)))
        rv = CKR_HOST_MEMORY;
    if (rv == CKR_OK && !token)
        rv = s_add_session (handle, snapshot.klass, &attrs, object_p);
    cs_module_unlock ();
    if (rv == CKR_OK && token)
        rv = s_store (snapshot.klass, NULL, &attrs, object_p);
    s_snapshot_clear (&snapshot);
    cs_attrs_clear (&attrs);
    return rv;
}
