/*  dataobj.c — certificates and data objects (dataobj.h): the table, the
 *  attributes of the two classes, templates; dataobj_jobs.c has the
 *  broker's jobs and the entry points.
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
#include "login.h"
#include "dataobj.h"
#include "dataobj_int.h"


static struct {
    dataobj_t *objects;
    size_t count;
    size_t size;
} s_table;

/*  ---- attributes of the two classes ------------------------------------- */




bool
cs_dataobj_is_handle (CK_OBJECT_HANDLE handle)
{
    return handle > CS_DATAOBJ_HANDLE_BASE && handle <= CS_DATAOBJ_HANDLE_BASE + 0x3fffffffUL;
}

bool
dataobj_template_class (const CK_ATTRIBUTE *tmpl, CK_ULONG count, CK_OBJECT_CLASS *klass_p)
{
    const CK_ATTRIBUTE *attr = tmpl ? cs_template_find (tmpl, count, CKA_CLASS) : NULL;
    if (!attr || !attr->pValue || attr->ulValueLen != sizeof (CK_ULONG))
        return false;
    memcpy (klass_p, attr->pValue, sizeof (CK_ULONG));
    return true;
}

bool
cs_dataobj_is_template (const CK_ATTRIBUTE *tmpl, CK_ULONG count)
{
    CK_OBJECT_CLASS klass;
    return dataobj_template_class (tmpl, count, &klass) && (klass == CKO_CERTIFICATE || klass == CKO_DATA);
}

dataobj_t *
dataobj_object_inlock (CK_OBJECT_HANDLE handle)
{
    if (!cs_dataobj_is_handle (handle) || handle - CS_DATAOBJ_HANDLE_BASE > s_table.count)
        return NULL;
    return &s_table.objects [handle - CS_DATAOBJ_HANDLE_BASE - 1];
}

CK_OBJECT_HANDLE
dataobj_handle (const dataobj_t *object)
{
    return CS_DATAOBJ_HANDLE_BASE + (CK_OBJECT_HANDLE) (object - s_table.objects) + 1;
}

bool
dataobj_visible_inlock (const dataobj_t *object)
{
    return object && object->live
        && (!cs_attrs_bool (&object->attrs, CKA_PRIVATE, false) || cs_login_user_logged_in_inlock ());
}

/*  A new entry (never moves the others' handles: the table only grows).  */
dataobj_t *
dataobj_add_inlock (void)
{
    if (s_table.count == s_table.size) {
        size_t size = s_table.size ? 2 * s_table.size : 16;
        dataobj_t *objects = realloc (s_table.objects, size * sizeof *objects);
        if (!objects)
            return NULL;
        s_table.objects = objects;
        s_table.size = size;
    }
    dataobj_t *object = &s_table.objects [s_table.count++];
    memset (object, 0, sizeof *object);
    return object;
}

void
dataobj_clear_inlock (dataobj_t *object)
{
    object->live = false;
    cs_attrs_clear (&object->attrs);
}

dataobj_t *
dataobj_by_ref_inlock (const char *ref)
{
    for (size_t i = 0; i < s_table.count; i++)
        if (s_table.objects [i].ref && strcmp (s_table.objects [i].ref, ref) == 0)
            return &s_table.objects [i];
    return NULL;
}

void
dataobj_clear_tokens_inlock (void)
{
    for (size_t i = 0; i < s_table.count; i++)
        if (s_table.objects [i].ref)
            dataobj_clear_inlock (&s_table.objects [i]);
}

/*  ---- the value of one attribute ---------------------------------------- */

/*  Points *data and *len at the value of type; false when the object has none.  */
bool
dataobj_value (const dataobj_t *object, CK_ATTRIBUTE_TYPE type, const void **data, CK_ULONG *len,
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
    if (!cs_obj_def (object->klass, type) || !(stored = cs_attrs_find (&object->attrs, type)))
        return false;
    *data = stored->len ? stored->value : (const void *) "";
    *len = stored->len;
    return true;
}

static CK_RV
s_get_one (const dataobj_t *object, CK_ATTRIBUTE *attr)
{
    const void *data;
    CK_ULONG len, number;
    CK_BBOOL flag;
    if (!dataobj_value (object, attr->type, &data, &len, &flag, &number)) {
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
cs_dataobj_get_attributes_inlock (CK_OBJECT_HANDLE handle, CK_ATTRIBUTE_PTR tmpl, CK_ULONG count)
{
    const dataobj_t *object = dataobj_object_inlock (handle);
    CK_RV rv = CKR_OK;
    if (!dataobj_visible_inlock (object))
        return CKR_OBJECT_HANDLE_INVALID;
    for (CK_ULONG i = 0; i < count; i++) {
        CK_RV one = s_get_one (object, &tmpl [i]);
        if (one != CKR_OK)
            rv = one;
    }
    return rv;
}

size_t
cs_dataobj_count_inlock (void)
{
    return s_table.count;
}

static bool
s_matches (const dataobj_t *object, const CK_ATTRIBUTE *tmpl, CK_ULONG count)
{
    for (CK_ULONG i = 0; i < count; i++) {
        const void *data;
        CK_ULONG len, number;
        CK_BBOOL flag;
        if (!dataobj_value (object, tmpl [i].type, &data, &len, &flag, &number) || len != tmpl [i].ulValueLen
        ||  (len && (!tmpl [i].pValue || memcmp (data, tmpl [i].pValue, len))))
            return false;
    }
    return true;
}

size_t
cs_dataobj_find_inlock (const CK_ATTRIBUTE *tmpl, CK_ULONG count, CK_OBJECT_HANDLE *out)
{
    size_t found = 0;
    for (size_t i = 0; i < s_table.count; i++)
        if (dataobj_visible_inlock (&s_table.objects [i]) && s_matches (&s_table.objects [i], tmpl, count))
            out [found++] = dataobj_handle (&s_table.objects [i]);
    return found;
}

void
cs_dataobj_session_closed_inlock (CK_SESSION_HANDLE session)
{
    for (size_t i = 0; i < s_table.count; i++)
        if (!s_table.objects [i].ref && (session == 0 || s_table.objects [i].session == session))
            dataobj_clear_inlock (&s_table.objects [i]);
}

void
cs_dataobj_logged_out_inlock (void)
{
    for (size_t i = 0; i < s_table.count; i++)
        if (!s_table.objects [i].ref && cs_attrs_bool (&s_table.objects [i].attrs, CKA_PRIVATE, false))
            dataobj_clear_inlock (&s_table.objects [i]);
}

void
cs_dataobj_reset_inlock (void)
{
    for (size_t i = 0; i < s_table.count; i++) {
        dataobj_clear_inlock (&s_table.objects [i]);
        free (s_table.objects [i].ref);
    }
    free (s_table.objects);
    memset (&s_table, 0, sizeof s_table);
}

/*  ---- templates ---------------------------------------------------------- */

/*  Checks a template's entries for an object of klass (CKA_CLASS and
 *  CKA_TOKEN are checked by the caller).  */
CK_RV
dataobj_check_template (CK_OBJECT_CLASS klass, const CK_ATTRIBUTE *tmpl, CK_ULONG count)
{
    if (!tmpl && count)
        return CKR_ARGUMENTS_BAD;
    if (count > CS_WIRE_MAX_ATTRIBUTES)
        return CKR_TEMPLATE_INCONSISTENT;
    for (CK_ULONG i = 0; i < count; i++) {
        const CK_ATTRIBUTE *attr = &tmpl [i];
        const cs_obj_def_t *def = cs_obj_def (klass, attr->type);
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
        if ((def->kind == CS_OBJ_BOOL && (attr->ulValueLen != 1 || *(const CK_BBOOL *) attr->pValue > 1))
        ||  (def->kind == CS_OBJ_ULONG && attr->ulValueLen != sizeof (CK_ULONG))
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
int
dataobj_attrs_add (cs_attrs_t *attrs, const CK_ATTRIBUTE *tmpl, CK_ULONG count)
{
    for (CK_ULONG i = 0; i < count; i++)
        if (!s_skip_class_token (tmpl [i].type) && cs_attrs_set (attrs, tmpl [i].type, tmpl [i].pValue, tmpl [i].ulValueLen))
            return -1;
    return 0;
}

static int
s_default (cs_attrs_t *attrs, CK_ATTRIBUTE_TYPE type, const cs_obj_def_t *def, bool flag)
{
    if (cs_attrs_find (attrs, type))
        return 0;
    return def->kind == CS_OBJ_BOOL ? cs_attrs_set_bool (attrs, type, flag)
         : def->kind == CS_OBJ_ULONG ? cs_attrs_set_ulong (attrs, type, 0)
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

/*  The full attribute list of a new object of klass: base (a copied
 *  object's, or empty) with the template over it, the defaults, and for a
 *  certificate the derived values.  */
static CK_RV
s_build (CK_OBJECT_CLASS klass, const cs_attrs_t *base, const CK_ATTRIBUTE *tmpl, CK_ULONG count,
         cs_attrs_t *attrs)
{
    memset (attrs, 0, sizeof *attrs);
    if ((base && cs_attrs_copy (attrs, base)) || dataobj_attrs_add (attrs, tmpl, count))
        return CKR_HOST_MEMORY;
    size_t n_defs = 0;
    const cs_obj_def_t *defs = cs_obj_defs (&n_defs);
    for (size_t i = 0; i < n_defs; i++) {
        const cs_obj_def_t *def = &defs [i];
        bool dflt = cs_obj_flag_default (def->type);
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

CK_RV
cs_dataobj_attrs_new (CK_OBJECT_CLASS klass, const CK_ATTRIBUTE *tmpl, CK_ULONG count, cs_attrs_t *attrs)
{
    CK_RV rv = dataobj_check_template (klass, tmpl, count);
    return rv != CKR_OK ? rv : s_build (klass, NULL, tmpl, count, attrs);
}
