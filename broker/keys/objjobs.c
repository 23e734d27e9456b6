/*  objjobs.c — certificates and data objects on the broker (objjobs.h),
 *  under the attribute rules of common/cs_obj_rules.h, which the module
 *  applies first: a client that skips it meets them here (issue #19).  */
#include <stdlib.h>
#include <string.h>
#include <czmq.h>
#include "cs_obj_rules.h"
#include "cs_wire.h"
#include "objjobs.h"

bool
objjobs_is_object_job (const Cs__Job *job)
{
    return job->kind_case == CS__JOB__KIND_PUT_OBJECT || job->kind_case == CS__JOB__KIND_LIST_OBJECTS
        || job->kind_case == CS__JOB__KIND_DESTROY_OBJECT;
}

CK_RV
objjobs_admit (const Cs__Job *job, bool user)
{
    return job->kind_case == CS__JOB__KIND_LIST_OBJECTS || user ? CKR_OK : CKR_USER_NOT_LOGGED_IN;
}

//  A deep copy of object with ref in place of its own, or NULL.
static Cs__ObjectInfo *
s_copy (const Cs__ObjectInfo *object, const char *ref)
{
    Cs__ObjectInfo tmp = *object;
    tmp.ref = (char *) ref;
    size_t len = cs__object_info__get_packed_size (&tmp);
    uint8_t *packed = malloc (len ? len : 1);
    Cs__ObjectInfo *copy = NULL;
    if (packed) {
        cs__object_info__pack (&tmp, packed);
        copy = cs__object_info__unpack (NULL, len, packed);
        free (packed);
    }
    return copy;
}

//  The attribute `type` of an object, or NULL.
static const Cs__Attribute *
s_attr (const Cs__ObjectInfo *object, CK_ATTRIBUTE_TYPE type)
{
    for (size_t i = 0; i < object->n_attributes; i++)
        if (object->attributes [i]->type == type)
            return object->attributes [i];
    return NULL;
}

//  A flag of an object: its value, else the table's default (cs_obj_flag_default).
static bool
s_flag (const Cs__ObjectInfo *object, CK_ATTRIBUTE_TYPE type)
{
    const Cs__Attribute *attr = s_attr (object, type);
    return attr && attr->value_case == CS__ATTRIBUTE__VALUE_FLAG ? attr->flag : cs_obj_flag_default (type);
}

//  True when attribute `def` has the same value in a and b.
static bool
s_same (const cs_obj_def_t *def, const Cs__ObjectInfo *a, const Cs__ObjectInfo *b)
{
    if (def->kind == CS_OBJ_BOOL)
        return s_flag (a, def->type) == s_flag (b, def->type);
    const Cs__Attribute *x = s_attr (a, def->type), *y = s_attr (b, def->type);
    if (!x || !y || x->value_case != y->value_case)
        return x == y;
    return x->value_case == CS__ATTRIBUTE__VALUE_NUMBER ? x->number == y->number
         : x->value_case == CS__ATTRIBUTE__VALUE_FLAG ? x->flag == y->flag
         : x->bytes.len == y->bytes.len && (!x->bytes.len || memcmp (x->bytes.data, y->bytes.data, x->bytes.len) == 0);
}

/*  A new object: CKA_TRUSTED TRUE is the SO's alone (PKCS#11 2.40 §4.6.1,
 *  and object jobs run for CKU_USER tickets: objjobs_admit), so
 *  CKR_ATTRIBUTE_READ_ONLY; a CKA_PRIVATE attribute other than is_private
 *  (the module sends is_private alone) is CKR_TEMPLATE_INCONSISTENT.  */
static CK_RV
s_check_new (const Cs__ObjectInfo *object)
{
    if (s_flag (object, CKA_TRUSTED))
        return CKR_ATTRIBUTE_READ_ONLY;
    return !s_attr (object, CKA_PRIVATE) || s_flag (object, CKA_PRIVATE) == object->is_private
         ? CKR_OK : CKR_TEMPLATE_INCONSISTENT;
}

/*  `object` replacing `old` (C_SetAttributeValue, §5.7): CKR_ACTION_PROHIBITED
 *  when old has CKA_MODIFIABLE FALSE; CKR_ATTRIBUTE_READ_ONLY when an
 *  attribute the table fixes (CKA_TRUSTED, a certificate's CKA_VALUE, ...)
 *  or leaves to C_CopyObject (CKA_PRIVATE, CKA_MODIFIABLE, CKA_DESTROYABLE)
 *  changes, or CKA_COPYABLE goes back TRUE (cs_obj_rules.h).  */
static CK_RV
s_check_replace (const Cs__ObjectInfo *old, const Cs__ObjectInfo *object)
{
    if (old->object_class != object->object_class)
        return CKR_TEMPLATE_INCONSISTENT;
    if (!s_flag (old, CKA_MODIFIABLE))
        return CKR_ACTION_PROHIBITED;
    size_t n = 0;
    const cs_obj_def_t *defs = cs_obj_defs (&n);
    for (size_t i = 0; i < n; i++) {
        const cs_obj_def_t *def = &defs [i];
        cs_obj_rule_t rule = cs_obj_rule (old->object_class, def);
        bool has = old->object_class == CKO_CERTIFICATE ? def->cert : def->data;
        if (!has || rule == CS_OBJ_FREE || s_same (def, old, object))
            continue;
        if (rule != CS_OBJ_ONLY_FALSE || s_flag (object, def->type))
            return CKR_ATTRIBUTE_READ_ONLY;
    }
    return old->is_private == object->is_private ? CKR_OK : CKR_ATTRIBUTE_READ_ONLY;
}

static CK_RV
s_put (keystore_t *ks, const char *tenant, const Cs__PutObjectJob *job, objjobs_out_t *out)
{
    const Cs__ObjectInfo *object = job->object;
    char fresh [37];
    const char *ref = object->ref;
    CK_RV rv = s_check_new (object);
    if (rv != CKR_OK)
        return rv;
    if (ref && *ref) {
        Cs__ObjectInfo *old = NULL;
        int got = keystore_object_get (ks, tenant, ref, &old);
        if (got != 0)
            return got == -1 ? CKR_OBJECT_HANDLE_INVALID : CKR_DEVICE_ERROR;
        rv = s_check_replace (old, object);
        cs__object_info__free_unpacked (old, NULL);
        if (rv != CKR_OK)
            return rv;
    }
    else {
        keystore_object_ref_new (fresh);
        ref = fresh;
    }
    if (!(out->object = s_copy (object, ref)))
        return CKR_HOST_MEMORY;
    return keystore_object_put (ks, tenant, out->object) == 0 ? CKR_OK : CKR_DEVICE_ERROR;
}

static CK_RV
s_list (keystore_t *ks, const char *tenant, bool user, objjobs_out_t *out)
{
    Cs__ObjectInfo **infos = NULL;
    size_t count = 0, shown = 0;
    if (keystore_object_list (ks, tenant, &infos, &count) != 0)
        return CKR_DEVICE_ERROR;
    for (size_t i = 0; i < count; i++)
        if (user || !infos [i]->is_private)
            infos [shown++] = infos [i];
        else
            cs__object_info__free_unpacked (infos [i], NULL);
    out->listed = infos;
    out->n_listed = shown;
    return CKR_OK;
}

/*  C_DestroyObject (§5.7): CKR_ACTION_PROHIBITED for an object with
 *  CKA_DESTROYABLE FALSE; CKR_OBJECT_HANDLE_INVALID for no such object.  */
static CK_RV
s_destroy (keystore_t *ks, const char *tenant, const char *ref)
{
    Cs__ObjectInfo *old = NULL;
    int got = keystore_object_get (ks, tenant, ref, &old);
    if (got != 0)
        return got == -1 ? CKR_OBJECT_HANDLE_INVALID : CKR_DEVICE_ERROR;
    bool destroyable = s_flag (old, CKA_DESTROYABLE);
    cs__object_info__free_unpacked (old, NULL);
    if (!destroyable)
        return CKR_ACTION_PROHIBITED;
    return keystore_object_delete (ks, tenant, ref) == 0 ? CKR_OK : CKR_OBJECT_HANDLE_INVALID;
}

CK_RV
objjobs_run (keystore_t *ks, const char *tenant, const Cs__Job *job, bool user, objjobs_out_t *out)
{
    CK_RV rv;
    memset (out, 0, sizeof *out);
    switch (job->kind_case) {
        case CS__JOB__KIND_PUT_OBJECT:
            rv = s_put (ks, tenant, job->put_object, out);
            zsys_info ("object put %s (tenant %s): %s", out->object ? out->object->ref
                       : job->put_object->object->ref ? job->put_object->object->ref : "", tenant, cs_rv_name (rv));
            return rv;
        case CS__JOB__KIND_LIST_OBJECTS:
            return s_list (ks, tenant, user, out);
        case CS__JOB__KIND_DESTROY_OBJECT:
            rv = s_destroy (ks, tenant, job->destroy_object->ref);
            zsys_info ("object destroy %s (tenant %s): %s", job->destroy_object->ref, tenant, cs_rv_name (rv));
            return rv;
        default:
            return CKR_FUNCTION_NOT_SUPPORTED;
    }
}

void
objjobs_result (Cs__Result *result, CK_RV rv, objjobs_out_t *to, objjobs_out_t *from)
{
    objjobs_out_free (to);
    *to = *from;
    memset (from, 0, sizeof *from);
    result->rv = rv;
    result->kind_case = CS__RESULT__KIND__NOT_SET;
    if (rv != CKR_OK)
        return;
    if (to->object) {
        result->kind_case = CS__RESULT__KIND_OBJECT;
        result->object = to->object;
    }
    else
    if (to->listed) {
        cs__object_list__init (&to->list);
        to->list.objects = to->listed;
        to->list.n_objects = to->n_listed;
        result->kind_case = CS__RESULT__KIND_OBJECTS;
        result->objects = &to->list;
    }
}

void
objjobs_out_free (objjobs_out_t *out)
{
    if (!out)
        return;
    if (out->object)
        cs__object_info__free_unpacked (out->object, NULL);
    for (size_t i = 0; i < out->n_listed; i++)
        cs__object_info__free_unpacked (out->listed [i], NULL);
    free (out->listed);
    memset (out, 0, sizeof *out);
}
