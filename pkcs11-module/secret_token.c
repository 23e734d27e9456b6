/*  secret_token.c — token secret keys made or imported through the broker
 *  (secret_token.h).  */
#include <stdlib.h>
#include <string.h>
#include "attrs.h"
#include "log.h"
#include "guard.h"
#include "login.h"
#include "runner.h"
#include "object.h"
#include "secret_token.h"
#include "session.h"

/*  A R/W session and a CKU_USER login (PKCS#11 2.40 §5.7, §6.7.1).  */
static CK_RV
s_may_write (CK_SESSION_HANDLE handle)
{
    cs_session_t *session;
    CK_RV rv;
    CS_BEGIN_SESSION_CALL (rv, handle, &session);
    if (!(cs_session_flags_inlock (session) & CKF_RW_SESSION))
        rv = CKR_SESSION_READ_ONLY;
    else
    if (!cs_login_user_logged_in_inlock ())
        rv = CKR_USER_NOT_LOGGED_IN;
    CS_END_CALL ();
    return rv;
}

/*  The template without CKA_VALUE, as wire attributes (caller frees with
 *  cs_attrs_wire_free).  */
static CK_RV
s_wire_template (const CK_ATTRIBUTE *tmpl, CK_ULONG count, Cs__Attribute ***wire_p, size_t *n_p)
{
    CK_ATTRIBUTE *kept = calloc (count + 1, sizeof *kept);
    CK_ULONG n = 0;
    CK_RV rv;
    if (!kept)
        return CKR_HOST_MEMORY;
    for (CK_ULONG i = 0; i < count; i++)
        if (tmpl [i].type != CKA_VALUE)
            kept [n++] = tmpl [i];
    rv = cs_attrs_to_wire (kept, n, wire_p, n_p);
    free (kept);
    return rv;
}

/*  Runs the job and puts the reply's key into the token objects.  */
static CK_RV
s_run (Cs__Job *job, CK_OBJECT_HANDLE_PTR key_p)
{
    Cs__Reply *reply = NULL;
    const Cs__KeyInfo *info = NULL;
    CK_RV rv = cs_runner_run_job (job, true, &reply);
    if (rv == CKR_OK) {
        const Cs__Result *result = reply->results [0];
        info = result->kind_case == CS__RESULT__KIND_KEY && result->key ? result->key->key
             : result->kind_case == CS__RESULT__KIND_IMPORTED && result->imported ? result->imported->key : NULL;
        if (!info) {
            cs_log_error ("the broker answered a secret-key job without the key");
            rv = CKR_DEVICE_ERROR;
        }
    }
    if (rv == CKR_OK) {
        cs_lock ();
        rv = cs_object_put_inlock (info, CKO_SECRET_KEY, key_p);
        cs_unlock ();
        if (rv == CKR_OK && !*key_p) {
            cs_log_error ("the broker's reply lacks the new secret key object");
            rv = CKR_DEVICE_ERROR;
        }
    }
    if (reply)
        cs__reply__free_unpacked (reply, NULL);
    return rv;
}

CK_RV
cs_secret_token_generate (CK_SESSION_HANDLE handle, CK_MECHANISM_TYPE mech, CK_ULONG len,
                          const CK_ATTRIBUTE *tmpl, CK_ULONG count, CK_OBJECT_HANDLE_PTR key_p)
{
    Cs__GenerateKeyJob gen = CS__GENERATE_KEY_JOB__INIT;
    Cs__Job job = CS__JOB__INIT;
    CK_RV rv = s_may_write (handle);
    if (rv != CKR_OK || (rv = s_wire_template (tmpl, count, &gen.template_, &gen.n_template_)) != CKR_OK)
        return rv;
    gen.mechanism = mech;
    gen.value_len = (uint32_t) len;
    job.kind_case = CS__JOB__KIND_GENERATE_KEY;
    job.generate_key = &gen;
    rv = s_run (&job, key_p);
    cs_attrs_wire_free (gen.template_, gen.n_template_);
    return rv;
}

CK_RV
cs_secret_token_import (CK_SESSION_HANDLE handle, const CK_ATTRIBUTE *tmpl, CK_ULONG count,
                        CK_OBJECT_HANDLE_PTR key_p)
{
    Cs__ImportKeyJob import = CS__IMPORT_KEY_JOB__INIT;
    Cs__Job job = CS__JOB__INIT;
    const CK_ATTRIBUTE *value = cs_template_find (tmpl, count, CKA_VALUE);
    CK_RV rv = s_may_write (handle);
    if (rv != CKR_OK || (rv = s_wire_template (tmpl, count, &import.template_, &import.n_template_)) != CKR_OK)
        return rv;
    import.secret_value = (ProtobufCBinaryData) { value->ulValueLen, value->pValue };
    job.kind_case = CS__JOB__KIND_IMPORT_KEY;
    job.import_key = &import;
    rv = s_run (&job, key_p);
    cs_attrs_wire_free (import.template_, import.n_template_);
    return rv;
}
