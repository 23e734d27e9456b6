/*  find.c — the object entry points that only read the tables:
 *  C_GetAttributeValue, C_GetObjectSize and C_FindObjectsInit /
 *  C_FindObjects / C_FindObjectsFinal (PKCS#11 2.40 §5.7), above the session table; the
 *  object table itself is object.c.  C_FindObjectsInit refreshes the key
 *  list (ListKeysJob {known_version}: an unchanged list costs one small
 *  round trip) and the data objects first, without the mutex.
 */
#include <stdlib.h>
#include <string.h>
#include "log.h"
#include "guard.h"
#include "object.h"
#include "dataobj.h"
#include "session.h"
#include "runner.h"

typedef struct {
    CK_ULONG *handles;
    size_t count;
    size_t next;
} cs_find_t;

/*  Without the mutex: refreshes the key list with one ListKeysJob carrying
 *  the cached version (0 while no list is held: the broker's versions start
 *  at 1, so it answers 0 with the whole list).  Returns CKR_OK or the job's
 *  error.  */
static CK_RV
s_refresh_keys (void)
{
    CK_RV rv;
    Cs__Reply *reply = NULL;
    Cs__ListKeysJob list = CS__LIST_KEYS_JOB__INIT;
    Cs__Job job = CS__JOB__INIT;
    cs_lock ();
    list.known_version = cs_object_list_version_inlock ();
    cs_unlock ();
    job.kind_case = CS__JOB__KIND_LIST_KEYS;
    job.list_keys = &list;
    rv = cs_runner_run_job (&job, true, &reply);
    if (rv == CKR_USER_NOT_LOGGED_IN) {
        /*  The broker no longer takes our login ticket (expired, or the
            PIN was set or locked): keep the list we have.  The session
            stays logged in as far as the application knows until its next
            private operation, which gets CKR_USER_NOT_LOGGED_IN and ends
            the login (C_FindObjectsInit may not return that code).  */
        rv = CKR_OK;
        goto out;
    }
    if (rv == CKR_OK && reply->results [0]->kind_case != CS__RESULT__KIND_KEYS) {
        cs_log_error ("the broker answered a key list without keys");
        rv = CKR_DEVICE_ERROR;
    }
    if (rv == CKR_OK) {
        cs_lock ();
        rv = cs_object_load_inlock (reply->results [0]->keys);
        cs_unlock ();
    }
out:
    if (reply)
        cs__reply__free_unpacked (reply, NULL);
    return rv;
}

static void
s_find_free (void *op)
{
    cs_find_t *find = op;
    if (find)
        free (find->handles);
    free (find);
}

/*  PKCS#11 2.40 §5.7 (cs_object_get_attributes_inlock).  */
CK_RV
C_GetAttributeValue (CK_SESSION_HANDLE handle, CK_OBJECT_HANDLE object,
                     CK_ATTRIBUTE_PTR tmpl, CK_ULONG count)
{
    cs_session_t *session;
    CK_RV rv;
    CS_BEGIN_SESSION_CALL (rv, handle, &session);
    if (!tmpl && count)
        rv = CKR_ARGUMENTS_BAD;
    else
        rv = cs_object_get_attributes_inlock (object, tmpl, count);
    CS_END_CALL ();
    return rv;
}

/*  PKCS#11 2.40 §5.7.  CKR_ARGUMENTS_BAD, CKR_CRYPTOKI_NOT_INITIALIZED,
 *  CKR_SESSION_HANDLE_INVALID, the refresh's errors, CKR_OPERATION_ACTIVE,
 *  CKR_HOST_MEMORY, CKR_OK.  */
CK_RV
C_FindObjectsInit (CK_SESSION_HANDLE handle, CK_ATTRIBUTE_PTR tmpl, CK_ULONG count)
{
    cs_session_t *session;
    cs_find_t *find = NULL;
    CK_RV rv;
    return_val_if_fail (tmpl || count == 0, CKR_ARGUMENTS_BAD);
    /*  The session is checked first, so that a broker problem cannot hide
        CKR_SESSION_HANDLE_INVALID; the refresh runs outside the mutex.  */
    CS_BEGIN_SESSION_CALL (rv, handle, &session);
    CS_END_CALL ();
    if ((rv = s_refresh_keys ()) != CKR_OK || (rv = cs_dataobj_refresh (tmpl, count)) != CKR_OK)
        return rv;
    CS_BEGIN_SESSION_CALL (rv, handle, &session);
    if (cs_session_op_inlock (session, CS_OP_FIND))
        rv = CKR_OPERATION_ACTIVE;
    else
    if (!(find = calloc (1, sizeof *find)))
        rv = CKR_HOST_MEMORY;
    else
    if ((rv = cs_object_find_inlock (tmpl, count, &find->handles, &find->count)) == CKR_OK)
        rv = cs_session_op_start_inlock (session, CS_OP_FIND, find, s_find_free);
    if (rv == CKR_OK)
        find = NULL;
    CS_END_CALL ();
    s_find_free (find);
    return rv;
}

/*  PKCS#11 2.40 §5.7.  CKR_ARGUMENTS_BAD, CKR_CRYPTOKI_NOT_INITIALIZED,
 *  CKR_SESSION_HANDLE_INVALID, CKR_OPERATION_NOT_INITIALIZED, CKR_OK.  */
CK_RV
C_FindObjects (CK_SESSION_HANDLE handle, CK_OBJECT_HANDLE_PTR objects, CK_ULONG max, CK_ULONG_PTR count_p)
{
    cs_session_t *session;
    cs_find_t *find;
    CK_RV rv;
    return_val_if_fail (objects && count_p, CKR_ARGUMENTS_BAD);
    CS_BEGIN_SESSION_CALL (rv, handle, &session);
    if (!(find = cs_session_op_inlock (session, CS_OP_FIND)))
        rv = CKR_OPERATION_NOT_INITIALIZED;
    else {
        *count_p = 0;
        while (*count_p < max && find->next < find->count)
            objects [(*count_p)++] = find->handles [find->next++];
    }
    CS_END_CALL ();
    return rv;
}

/*  PKCS#11 2.40 §5.7.  CKR_CRYPTOKI_NOT_INITIALIZED,
 *  CKR_SESSION_HANDLE_INVALID, CKR_OPERATION_NOT_INITIALIZED, CKR_OK.  */
CK_RV
C_FindObjectsFinal (CK_SESSION_HANDLE handle)
{
    cs_session_t *session;
    CK_RV rv;
    CS_BEGIN_SESSION_CALL (rv, handle, &session);
    if (!cs_session_op_inlock (session, CS_OP_FIND))
        rv = CKR_OPERATION_NOT_INITIALIZED;
    cs_session_op_end_inlock (session, CS_OP_FIND);
    CS_END_CALL ();
    return rv;
}

/*  Under the mutex: our estimate of an object's size in bytes (PKCS#11
 *  2.40 §5.7 leaves the meaning open): its stored attributes (type, length
 *  and value each) plus the key material the module holds for it.  */
static CK_ULONG
s_object_size_inlock (const cs_object_info_t *info)
{
    const cs_key_t *key = info->key;
    CK_ULONG size = 0;
    for (size_t i = 0; i < info->attrs.count; i++)
        size += sizeof (CK_ATTRIBUTE) + info->attrs.items [i].len;
    if (key)
        size += key->modulus_len + key->exponent_len + key->ec_params_len + key->ec_point_len
              + key->pkcs8_len + key->id_len + (key->label ? strlen (key->label) : 0);
    return size;
}

/*  PKCS#11 2.40 §5.7 C_GetObjectSize: an estimate (s_object_size_inlock).
 *  CKR_ARGUMENTS_BAD, CKR_SESSION_HANDLE_INVALID, CKR_OBJECT_HANDLE_INVALID,
 *  CKR_HOST_MEMORY, CKR_OK.  */
CK_RV
C_GetObjectSize (CK_SESSION_HANDLE handle, CK_OBJECT_HANDLE object, CK_ULONG_PTR size_p)
{
    cs_session_t *session;
    cs_object_info_t info;
    CK_RV rv;
    return_val_if_fail (size_p != NULL, CKR_ARGUMENTS_BAD);
    CS_BEGIN_SESSION_CALL (rv, handle, &session);
    if ((rv = cs_object_info_inlock (object, &info)) == CKR_OK) {
        *size_p = s_object_size_inlock (&info);
        cs_object_info_clear (&info);
    }
    CS_END_CALL ();
    return rv;
}
