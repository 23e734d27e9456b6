/*  dataobj_jobs.c — certificates and data objects (dataobj.h): token
 *  objects from and to the broker (ListObjectsJob, PutObjectJob,
 *  DestroyObjectJob) and the entry points' work.  */
#include <stdlib.h>
#include <string.h>
#include "attrs.h"
#include "log.h"
#include "guard.h"
#include "login.h"
#include "runner.h"
#include "session.h"
#include "dataobj.h"
#include "dataobj_int.h"

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
        const cs_obj_def_t *def = cs_obj_def (klass, attr->type);
        Cs__Attribute *wire = malloc (sizeof *wire);
        if (!wire)
            return CKR_HOST_MEMORY;
        cs__attribute__init (wire);
        info->attributes [info->n_attributes++] = wire;
        wire->type = attr->type;
        if (def && def->kind == CS_OBJ_BOOL && attr->len == 1) {
            wire->value_case = CS__ATTRIBUTE__VALUE_FLAG;
            wire->flag = attr->value [0] != 0;
        }
        else
        if (def && def->kind == CS_OBJ_ULONG && attr->len == sizeof (CK_ULONG)) {
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
static dataobj_t *
s_put_token_inlock (const Cs__ObjectInfo *info)
{
    dataobj_t *object = NULL;
    if (!info->ref || !*info->ref
    ||  (info->object_class != CKO_CERTIFICATE && info->object_class != CKO_DATA))
        return NULL;
    if (!(object = dataobj_by_ref_inlock (info->ref))) {
        char *ref = strdup (info->ref);
        if (!ref || !(object = dataobj_add_inlock ())) {
            free (ref);
            return NULL;
        }
        object->ref = ref;
    }
    dataobj_clear_inlock (object);
    object->klass = info->object_class;
    int rc = cs_attrs_set_bool (&object->attrs, CKA_PRIVATE, info->is_private);
    for (size_t i = 0; rc == 0 && i < info->n_attributes; i++) {
        const Cs__Attribute *attr = info->attributes [i];
        CK_BBOOL flag = attr->flag ? CK_TRUE : CK_FALSE;
        CK_ULONG number = (CK_ULONG) attr->number;
        if (attr->type == CKA_PRIVATE || !cs_obj_def (object->klass, attr->type))
            continue;           /* from a newer peer, or never stored: skipped */
        rc = attr->value_case == CS__ATTRIBUTE__VALUE_FLAG ? cs_attrs_set (&object->attrs, attr->type, &flag, 1)
           : attr->value_case == CS__ATTRIBUTE__VALUE_NUMBER ? cs_attrs_set (&object->attrs, attr->type, &number,
                                                                              sizeof number)
           : cs_attrs_set (&object->attrs, attr->type, attr->bytes.data, attr->bytes.len);
    }
    if (rc) {
        dataobj_clear_inlock (object);
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
    CK_RV rv = cs_runner_run_job (job, true, reply_p);
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
cs_dataobj_load_inlock (const Cs__ObjectList *objects)
{
    CK_RV rv = CKR_OK;
    dataobj_clear_tokens_inlock ();
    for (size_t i = 0; objects && i < objects->n_objects && rv == CKR_OK; i++)
        if (!s_put_token_inlock (objects->objects [i]))
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
    if (dataobj_template_class (tmpl, count, &klass) && klass != CKO_CERTIFICATE && klass != CKO_DATA)
        return CKR_OK;          /* a key search: no round trip for objects */
    job.kind_case = CS__JOB__KIND_LIST_OBJECTS;
    job.list_objects = &list;
    if (s_job (&job, CS__RESULT__KIND_OBJECTS, &reply) != CKR_OK) {
        cs_log_debug ("no token objects from the broker: the list stays as it was");
        return CKR_OK;
    }
    cs_lock ();
    rv = cs_dataobj_load_inlock (reply->results [0]->objects);
    cs_unlock ();
    cs__reply__free_unpacked (reply, NULL);
    return rv;
}

/*  ---- entry points --------------------------------------------------------- */

/*  Under the mutex: may this session make or change an object that is a
 *  token object or private?  PKCS#11 2.40 §5.7, §6.7.1.  */
static CK_RV
s_may_write_inlock (cs_session_t *session, bool token, bool priv)
{
    if (token && !(cs_session_flags_inlock (session) & CKF_RW_SESSION))
        return CKR_SESSION_READ_ONLY;
    if ((token || priv) && !cs_login_user_logged_in_inlock ())
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
    cs_lock ();
    dataobj_t *object = s_put_token_inlock (reply->results [0]->object);
    if (object && handle_p)
        *handle_p = dataobj_handle (object);
    cs_unlock ();
    cs__reply__free_unpacked (reply, NULL);
    if (!object)
        cs_log_error ("the broker's reply lacks the stored object");
    return object ? CKR_OK : CKR_DEVICE_ERROR;
}

/*  A session object of klass with attrs (taken).  Under the mutex.  */
static CK_RV
s_add_session_inlock (CK_SESSION_HANDLE session, CK_OBJECT_CLASS klass, cs_attrs_t *attrs, CK_OBJECT_HANDLE *handle_p)
{
    dataobj_t *object = dataobj_add_inlock ();
    if (!object)
        return CKR_HOST_MEMORY;
    object->klass = klass;
    object->session = session;
    object->attrs = *attrs;
    object->live = true;
    memset (attrs, 0, sizeof *attrs);
    *handle_p = dataobj_handle (object);
    return CKR_OK;
}

CK_RV
cs_dataobj_create (CK_SESSION_HANDLE handle, const CK_ATTRIBUTE *tmpl, CK_ULONG count, CK_OBJECT_HANDLE *object_p)
{
    CK_OBJECT_CLASS klass = 0;
    cs_session_t *session;
    cs_attrs_t attrs = { 0 };
    CK_RV rv = dataobj_template_class (tmpl, count, &klass) ? dataobj_check_template (klass, tmpl, count)
                                                           : CKR_TEMPLATE_INCOMPLETE;
    if (rv != CKR_OK)
        return rv;
    bool token = cs_template_bool (tmpl, count, CKA_TOKEN, false);      /* checked: safe */
    CS_BEGIN_SESSION_CALL (rv, handle, &session);
    rv = s_may_write_inlock (session, token, cs_template_bool (tmpl, count, CKA_PRIVATE, false));
    CS_END_CALL ();
    if (rv == CKR_OK)
        rv = cs_dataobj_attrs_new (klass, tmpl, count, &attrs);
    if (rv == CKR_OK && token)
        rv = s_store (klass, NULL, &attrs, object_p);
    else
    if (rv == CKR_OK) {
        cs_lock ();
        rv = cs_session_lookup_inlock (handle) ? s_add_session_inlock (handle, klass, &attrs, object_p)
                                        : CKR_SESSION_HANDLE_INVALID;
        cs_unlock ();
    }
    cs_attrs_clear (&attrs);
    return rv;
}

static void
s_snapshot_clear (dataobj_t *snapshot)
{
    free (snapshot->ref);
    cs_attrs_clear (&snapshot->attrs);
}

/*  Under the mutex: a copy of visible object handle into *snapshot.  */
static CK_RV
s_take_inlock (CK_OBJECT_HANDLE handle, dataobj_t *snapshot)
{
    const dataobj_t *object = dataobj_object_inlock (handle);
    memset (snapshot, 0, sizeof *snapshot);
    if (!dataobj_visible_inlock (object))
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

/*  Under the mutex: the object's snapshot and the session's right to change
 *  it (flag: CKA_DESTROYABLE, CKA_MODIFIABLE).  On an error the snapshot is
 *  cleared.  */
static CK_RV
s_prepare_inlock (CK_SESSION_HANDLE handle, CK_OBJECT_HANDLE object, dataobj_t *snapshot, CK_ATTRIBUTE_TYPE flag)
{
    cs_session_t *session;
    CK_RV rv = cs_session_get_inlock (handle, &session);
    if (rv != CKR_OK)
        return rv;
    if ((rv = s_take_inlock (object, snapshot)) == CKR_OK && snapshot->ref)
        rv = s_may_write_inlock (session, true, false);
    if (rv == CKR_OK && !cs_attrs_bool (&snapshot->attrs, flag, true))
        rv = CKR_ACTION_PROHIBITED;
    if (rv != CKR_OK)
        s_snapshot_clear (snapshot);
    return rv;
}

CK_RV
cs_dataobj_destroy (CK_SESSION_HANDLE handle, CK_OBJECT_HANDLE object)
{
    Cs__DestroyObjectJob destroy = CS__DESTROY_OBJECT_JOB__INIT;
    Cs__Job job = CS__JOB__INIT;
    Cs__Reply *reply = NULL;
    dataobj_t snapshot;
    CK_RV rv;
    CS_BEGIN_CALL (rv);
    if ((rv = s_prepare_inlock (handle, object, &snapshot, CKA_DESTROYABLE)) != CKR_OK) {
        CS_END_CALL ();
        return rv;
    }
    if (!snapshot.ref)
        dataobj_clear_inlock (dataobj_object_inlock (object));
    CS_END_CALL ();
    if (snapshot.ref) {
        destroy.ref = snapshot.ref;
        job.kind_case = CS__JOB__KIND_DESTROY_OBJECT;
        job.destroy_object = &destroy;
        if ((rv = s_job (&job, CS__RESULT__KIND__NOT_SET, &reply)) == CKR_OK) {
            cs__reply__free_unpacked (reply, NULL);
            cs_lock ();
            dataobj_clear_inlock (dataobj_object_inlock (object));
            cs_unlock ();
        }
    }
    s_snapshot_clear (&snapshot);
    return rv;
}

/*  Checks a change (copy: C_CopyObject) of snapshot by tmpl.  */
static CK_RV
s_check_change (const dataobj_t *snapshot, const CK_ATTRIBUTE *tmpl, CK_ULONG count, bool copy)
{
    CK_RV rv = dataobj_check_template (snapshot->klass, tmpl, count);
    for (CK_ULONG i = 0; rv == CKR_OK && i < count; i++) {
        const void *data;
        CK_ULONG len, number;
        CK_BBOOL flag;
        const cs_obj_def_t *def = cs_obj_def (snapshot->klass, tmpl [i].type);
        bool same = dataobj_value (snapshot, tmpl [i].type, &data, &len, &flag, &number) && len == tmpl [i].ulValueLen
                 && (!len || memcmp (data, tmpl [i].pValue, len) == 0);
        bool to_true = tmpl [i].ulValueLen == 1 && *(const CK_BBOOL *) tmpl [i].pValue;
        cs_obj_rule_t rule = tmpl [i].type == CKA_TOKEN ? CS_OBJ_COPY_ONLY
                      : tmpl [i].type == CKA_CLASS ? CS_OBJ_FIXED : cs_obj_rule (snapshot->klass, def);
        if (same || rule == CS_OBJ_FREE || (rule == CS_OBJ_COPY_ONLY && copy) || (rule == CS_OBJ_ONLY_FALSE && !to_true))
            continue;
        rv = CKR_ATTRIBUTE_READ_ONLY;
    }
    return rv;
}

CK_RV
cs_dataobj_set (CK_SESSION_HANDLE handle, CK_OBJECT_HANDLE object, const CK_ATTRIBUTE *tmpl, CK_ULONG count)
{
    dataobj_t snapshot;
    cs_attrs_t attrs = { 0 };
    CK_RV rv;
    CS_BEGIN_CALL (rv);
    if ((rv = s_prepare_inlock (handle, object, &snapshot, CKA_MODIFIABLE)) != CKR_OK) {
        CS_END_CALL ();
        return rv;
    }
    if ((rv = s_check_change (&snapshot, tmpl, count, false)) == CKR_OK
    &&  (cs_attrs_copy (&attrs, &snapshot.attrs) || dataobj_attrs_add (&attrs, tmpl, count)))
        rv = CKR_HOST_MEMORY;
    if (rv == CKR_OK && !snapshot.ref) {
        dataobj_t *live = dataobj_object_inlock (object);
        cs_attrs_clear (&live->attrs);
        live->attrs = attrs;
        memset (&attrs, 0, sizeof attrs);
    }
    CS_END_CALL ();
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
    dataobj_t snapshot;
    cs_attrs_t attrs = { 0 };
    cs_session_t *session;
    bool token = false;
    CK_RV rv;
    CS_BEGIN_SESSION_CALL (rv, handle, &session);
    if ((rv = s_take_inlock (object, &snapshot)) == CKR_OK && !cs_attrs_bool (&snapshot.attrs, CKA_COPYABLE, true))
        rv = CKR_ACTION_PROHIBITED;
    if (rv == CKR_OK)
        rv = s_check_change (&snapshot, tmpl, count, true);
    if (rv == CKR_OK)               /* the template is checked now */
        token = cs_template_bool (tmpl, count, CKA_TOKEN, snapshot.ref != NULL);
    if (rv == CKR_OK)
        rv = s_may_write_inlock (session, token, cs_template_bool (tmpl, count, CKA_PRIVATE,
                                                           cs_attrs_bool (&snapshot.attrs, CKA_PRIVATE, false)));
    if (rv == CKR_OK && (cs_attrs_copy (&attrs, &snapshot.attrs) || dataobj_attrs_add (&attrs, tmpl, count)))
        rv = CKR_HOST_MEMORY;
    if (rv == CKR_OK && !token)
        rv = s_add_session_inlock (handle, snapshot.klass, &attrs, object_p);
    CS_END_CALL ();
    if (rv == CKR_OK && token)
        rv = s_store (snapshot.klass, NULL, &attrs, object_p);
    s_snapshot_clear (&snapshot);
    cs_attrs_clear (&attrs);
    return rv;
}
