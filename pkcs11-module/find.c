/*  find.c — the object entry points that only read the tables:
 *  C_GetAttributeValue, C_GetObjectSize and C_FindObjectsInit /
 *  C_FindObjects / C_FindObjectsFinal (PKCS#11 2.40 §5.7), above the session table; the
 *  object table itself is object.c.  C_FindObjectsInit refreshes the key
 *  list (ListKeysJob {known_version}: an unchanged list costs one small
 *  round trip) and the data objects first, without the mutex.  A list
 *  longer than one page (client/list-page) is walked lazily: C_FindObjects
 *  takes the next page when the application wants more handles than the
 *  pages so far gave; each page, once it is back, asks for the one after
 *  it before the module files its keys, so that the broker reads a page
 *  while the module files the one before (docs/CONTRACTS.md "Key lists
 *  in pages"; issue #25).
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
    /*  A paged walk of the key list (docs/CONTRACTS.md "Key lists in
        pages"): the template (values after the array), the next page's
        cursor (NULL: no page left), the walk and its first page's version.  */
    CK_ATTRIBUTE *tmpl;
    CK_ULONG n_tmpl;
    char *cursor;
    unsigned walk;
    uint64_t version;
    /*  The page after `ahead_after` asked for ahead (s_list_ahead), or
        NULL; freed with the find when it is never taken.  */
    cs_runner_pending_t *ahead;
    char *ahead_after;
} cs_find_t;

/*  A ListKeysJob for the page after `after` ("" for the first, which
 *  carries known_version) into *list and *job, which point into each
 *  other and at `after` (borrowed).  */
static void
s_list_job (const char *after, uint64_t known_version, Cs__ListKeysJob *list, Cs__Job *job)
{
    cs__list_keys_job__init (list);
    cs__job__init (job);
    list->known_version = known_version;
    list->after = (char *) after;
    list->page_size = cs_object_list_page ();
    job->kind_case = CS__JOB__KIND_LIST_KEYS;
    job->list_keys = list;
}

/*  rv, or CKR_DEVICE_ERROR when an answer rv CKR_OK has no keys; *reply_p
 *  freed and nulled unless CKR_OK.  */
static CK_RV
s_list_checked (CK_RV rv, Cs__Reply **reply_p)
{
    if (rv == CKR_OK && (*reply_p)->results [0]->kind_case != CS__RESULT__KIND_KEYS) {
        cs_log_error ("the broker answered a key list without keys");
        rv = CKR_DEVICE_ERROR;
    }
    if (rv != CKR_OK && *reply_p)
        cs__reply__free_unpacked (*reply_p, NULL);
    if (rv != CKR_OK)
        *reply_p = NULL;
    return rv;
}

/*  Without the mutex: one ListKeysJob page after `after` ("" for the
 *  first, which carries the cached version: 0 while no list is held, and
 *  the broker's versions start at 1, so it answers 0 with the list).
 *  client/list-page 0 asks for the whole list.  Returns CKR_OK with *reply_p
 *  (caller frees) holding the keys result, or the job's error.  */
static CK_RV
s_list_keys (const char *after, Cs__Reply **reply_p)
{
    Cs__ListKeysJob list;
    Cs__Job job;
    uint64_t known_version = 0;
    if (!*after) {
        cs_lock ();
        known_version = cs_object_list_version_inlock ();
        cs_unlock ();
    }
    s_list_job (after, known_version, &list, &job);
    return s_list_checked (cs_runner_run_job (&job, true, reply_p), reply_p);
}

/*  Without the mutex: when `page` says more follow, sends the ListKeysJob
 *  for the page after it without waiting (cs_runner_submit) into
 *  *ahead_p; else, or when it cannot leave, *ahead_p is NULL and the page
 *  is asked for when it is wanted.  */
static void
s_list_ahead (const Cs__ListKeysResult *page, cs_runner_pending_t **ahead_p)
{
    Cs__ListKeysJob list;
    Cs__Job job;
    *ahead_p = NULL;
    if (!page || page->unchanged || !page->more || !page->next || !*page->next)
        return;
    s_list_job (page->next, 0, &list, &job);
    if (cs_runner_submit (&job, true, ahead_p) != CKR_OK)
        *ahead_p = NULL;
    else
        cs_log_debug ("key list: the page after '%s' asked for ahead", page->next);
}

/*  Without the mutex: the page asked for ahead (*ahead_p, taken) into
 *  *reply_p, as s_list_keys gives it.  Any failure but a login gone asks
 *  for the page after `after` again at once: a page asked for ahead may
 *  have outlived its deadline while the application waited.  */
static CK_RV
s_list_taken (cs_runner_pending_t **ahead_p, const char *after, Cs__Reply **reply_p)
{
    CK_RV rv = s_list_checked (cs_runner_wait (ahead_p, reply_p), reply_p);
    return rv == CKR_OK || rv == CKR_USER_NOT_LOGGED_IN ? rv : s_list_keys (after, reply_p);
}

/*  Under the mutex: the find keeps `ahead`, the page after `after` asked
 *  for ahead, when that is the page its walk wants next; else it is
 *  abandoned.  *ahead_p nulled.  */
static void
s_ahead_keep_inlock (cs_find_t *find, const char *after, cs_runner_pending_t **ahead_p)
{
    if (find && !find->ahead && find->cursor && after && strcmp (find->cursor, after) == 0
    &&  (find->ahead_after = strdup (after))) {
        find->ahead = *ahead_p;
        *ahead_p = NULL;
    }
    cs_runner_pending_free (ahead_p);
}

/*  Without the mutex: the first page of the key list into *reply_p, or
 *  NULL when the cached list stays (the broker no longer takes our login
 *  ticket: expired, or the PIN was set or locked; the session stays logged
 *  in as far as the application knows until its next private operation,
 *  which gets CKR_USER_NOT_LOGGED_IN and ends the login:
 *  C_FindObjectsInit may not return that code).  CKR_OK or the job's
 *  error.  */
static CK_RV
s_refresh_keys (Cs__Reply **reply_p)
{
    CK_RV rv = s_list_keys ("", reply_p);
    return rv == CKR_USER_NOT_LOGGED_IN ? CKR_OK : rv;
}

static void
s_find_free (void *op)
{
    cs_find_t *find = op;
    if (find) {
        free (find->handles);
        free (find->tmpl);
        free (find->cursor);
        cs_runner_pending_free (&find->ahead);
        free (find->ahead_after);
    }
    free (find);
}

/*  A find with a copy of the template (one block: the attributes, then
 *  their values), or NULL when out of memory.  */
static cs_find_t *
s_find_new (const CK_ATTRIBUTE *tmpl, CK_ULONG count)
{
    size_t bytes = count * sizeof (CK_ATTRIBUTE);
    for (CK_ULONG i = 0; i < count; i++)
        bytes += tmpl [i].pValue ? tmpl [i].ulValueLen : 0;
    cs_find_t *find = calloc (1, sizeof *find);
    if (!find || !(find->tmpl = malloc (bytes ? bytes : 1))) {
        free (find);
        return NULL;
    }
    unsigned char *value = (unsigned char *) (find->tmpl + count);
    for (CK_ULONG i = 0; i < count; i++) {
        find->tmpl [i] = tmpl [i];
        if (tmpl [i].pValue) {
            find->tmpl [i].pValue = memcpy (value, tmpl [i].pValue, tmpl [i].ulValueLen);
            value += tmpl [i].ulValueLen;
        }
    }
    find->n_tmpl = count;
    return find;
}

/*  Takes a page's cursor into the find: the next one, or none after the
 *  last page (which ends the walk: the list is held).  */
static CK_RV
s_walk_next_inlock (cs_find_t *find, const Cs__ListKeysResult *page)
{
    cs_log_debug ("key list: a page of %zu keys after '%s'%s", page->n_keys, find->cursor ? find->cursor : "",
                  page->more ? ", more follow" : ", the last");
    free (find->cursor);
    find->cursor = NULL;
    if (!page->more || !*page->next) {
        cs_object_walk_end_inlock (find->walk, find->version);
        return CKR_OK;
    }
    return (find->cursor = strdup (page->next)) ? CKR_OK : CKR_HOST_MEMORY;
}

/*  The find's handles: over the whole table when the list fits one reply
 *  (loaded first when it changed) or stayed (page NULL or unchanged), else
 *  a paged walk from this first page.  */
static CK_RV
s_find_start_inlock (cs_find_t *find, const Cs__ListKeysResult *page)
{
    CK_RV rv;
    if (!page || page->unchanged || !page->more) {
        if (page && (rv = cs_object_load_inlock (page)) != CKR_OK)
            return rv;
        return cs_object_find_inlock (find->tmpl, find->n_tmpl, &find->handles, &find->count);
    }
    if (!(find->walk = cs_object_walk_begin_inlock (find->tmpl, find->n_tmpl, &find->handles, &find->count)))
        return CKR_HOST_MEMORY;
    find->version = page->version;
    if ((rv = cs_object_walk_page_inlock (page, find->tmpl, find->n_tmpl, &find->handles, &find->count)) != CKR_OK)
        return rv;
    return s_walk_next_inlock (find, page);
}

/*  Without the mutex: fetches the page after `after` for the find of
 *  session `handle` (the one asked for ahead when *ahead_p, taken), asks
 *  for the page after it ahead, and adds its matches.  The login gone
 *  meanwhile (CKR_USER_NOT_LOGGED_IN) ends the walk where it is; another
 *  error stays the call's, and the next C_FindObjects asks for that page
 *  again.  */
static CK_RV
s_walk_fetch (CK_SESSION_HANDLE handle, const cs_find_t *expected, const char *after,
              cs_runner_pending_t **ahead_p)
{
    cs_session_t *session;
    cs_find_t *find = NULL;
    Cs__Reply *reply = NULL;
    cs_runner_pending_t *next = NULL;
    CK_RV got = *ahead_p ? s_list_taken (ahead_p, after, &reply) : s_list_keys (after, &reply), rv;
    if (got == CKR_OK)
        s_list_ahead (reply->results [0]->keys, &next);
    cs_lock ();
    if ((rv = cs_session_get_inlock (handle, &session)) != CKR_OK)
        ;
    else
    if ((find = cs_session_op_inlock (session, CS_OP_FIND)) != expected)
        rv = CKR_OPERATION_NOT_INITIALIZED;
    else
    if (got == CKR_USER_NOT_LOGGED_IN) {
        free (find->cursor);
        find->cursor = NULL;
    }
    else
    if ((rv = got) == CKR_OK
    &&  (rv = cs_object_walk_page_inlock (reply->results [0]->keys, find->tmpl, find->n_tmpl, &find->handles,
                                          &find->count)) == CKR_OK)
        rv = s_walk_next_inlock (find, reply->results [0]->keys);
    if (next)
        s_ahead_keep_inlock (rv == CKR_OK ? find : NULL, reply->results [0]->keys->next, &next);
    cs_unlock ();
    if (reply)
        cs__reply__free_unpacked (reply, NULL);
    return rv;
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

/*  Starts the find on session `handle` from the list's first page (NULL:
 *  the cached list stays); the session takes `find` on CKR_OK.  */
static CK_RV
s_find_begin (CK_SESSION_HANDLE handle, cs_find_t *find, const Cs__ListKeysResult *page,
              cs_runner_pending_t **ahead_p)
{
    cs_session_t *session;
    CK_RV rv;
    CS_BEGIN_SESSION_CALL (rv, handle, &session);
    if (cs_session_op_inlock (session, CS_OP_FIND))
        rv = CKR_OPERATION_ACTIVE;
    else
    if ((rv = s_find_start_inlock (find, page)) == CKR_OK) {
        if (*ahead_p)
            s_ahead_keep_inlock (find, page->next, ahead_p);
        rv = cs_session_op_start_inlock (session, CS_OP_FIND, find, s_find_free);
    }
    cs_runner_pending_free (ahead_p);
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
    Cs__Reply *reply = NULL;
    cs_runner_pending_t *ahead = NULL;
    CK_RV rv;
    return_val_if_fail (tmpl || count == 0, CKR_ARGUMENTS_BAD);
    /*  The session is checked first, so that a broker problem cannot hide
        CKR_SESSION_HANDLE_INVALID; the refresh runs outside the mutex.  */
    CS_BEGIN_SESSION_CALL (rv, handle, &session);
    CS_END_CALL ();
    if ((rv = s_refresh_keys (&reply)) != CKR_OK)
        return rv;
    if (reply)
        s_list_ahead (reply->results [0]->keys, &ahead);
    if ((rv = cs_dataobj_refresh (tmpl, count)) == CKR_OK)
        rv = (find = s_find_new (tmpl, count)) ? s_find_begin (handle, find, reply ? reply->results [0]->keys : NULL,
                                                               &ahead)
                                               : CKR_HOST_MEMORY;
    if (rv == CKR_OK)
        find = NULL;
    cs_runner_pending_free (&ahead);
    s_find_free (find);
    if (reply)
        cs__reply__free_unpacked (reply, NULL);
    return rv;
}

/*  PKCS#11 2.40 §5.7.  CKR_ARGUMENTS_BAD, CKR_CRYPTOKI_NOT_INITIALIZED,
 *  CKR_SESSION_HANDLE_INVALID, CKR_OPERATION_NOT_INITIALIZED, CKR_OK; in a
 *  paged walk also the next page's errors (CKR_DEVICE_ERROR, ...) and
 *  CKR_HOST_MEMORY.  */
CK_RV
C_FindObjects (CK_SESSION_HANDLE handle, CK_OBJECT_HANDLE_PTR objects, CK_ULONG max, CK_ULONG_PTR count_p)
{
    cs_session_t *session;
    cs_find_t *find = NULL;
    char *after = NULL;
    cs_runner_pending_t *ahead = NULL;
    CK_RV rv;
    return_val_if_fail (objects && count_p, CKR_ARGUMENTS_BAD);
    *count_p = 0;
    do {
        free (after);
        after = NULL;
        CS_BEGIN_SESSION_CALL (rv, handle, &session);
        if (!(find = cs_session_op_inlock (session, CS_OP_FIND)))
            rv = CKR_OPERATION_NOT_INITIALIZED;
        else {
            while (*count_p < max && find->next < find->count)
                objects [(*count_p)++] = find->handles [find->next++];
            if (*count_p < max && find->cursor && !(after = strdup (find->cursor)))
                rv = CKR_HOST_MEMORY;
            if (after && find->ahead && strcmp (find->ahead_after, after) == 0) {
                ahead = find->ahead;            /* ours now: waited on outside the mutex */
                find->ahead = NULL;
                free (find->ahead_after);
                find->ahead_after = NULL;
            }
        }
        CS_END_CALL ();
        /*  A paged walk takes the next page only when the application
            wants more than the pages so far hold.  */
    } while (rv == CKR_OK && after && (rv = s_walk_fetch (handle, find, after, &ahead)) == CKR_OK);
    cs_runner_pending_free (&ahead);
    free (after);
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
