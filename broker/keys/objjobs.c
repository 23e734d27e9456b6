/*  objjobs.c — certificates and data objects on the broker (objjobs.h).  */
#include <stdlib.h>
#include <string.h>
#include <czmq.h>
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

static CK_RV
s_put (keystore_t *ks, const char *tenant, const Cs__PutObjectJob *job, objjobs_out_t *out)
{
    const Cs__ObjectInfo *object = job->object;
    char fresh [37];
    const char *ref = object->ref;
    if (ref && *ref) {
        Cs__ObjectInfo *old = NULL;
        int got = keystore_object_get (ks, tenant, ref, &old);
        if (got != 0)
            return got == -1 ? CKR_OBJECT_HANDLE_INVALID : CKR_DEVICE_ERROR;
        bool same_class = old->object_class == object->object_class;
        cs__object_info__free_unpacked (old, NULL);
        if (!same_class)
            return CKR_TEMPLATE_INCONSISTENT;
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
            rv = keystore_object_delete (ks, tenant, job->destroy_object->ref) == 0 ? CKR_OK
                                                                                  : CKR_OBJECT_HANDLE_INVALID;
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
