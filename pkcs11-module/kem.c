/*  kem.c — C_EncapsulateKey and C_DecapsulateKey with CKM_ML_KEM (kem.h).
 *
 *  As C_DeriveKey (derive.c): the checks and the template under the
 *  library mutex, one job without it, the new key into the object table
 *  under it again (the session may have closed meanwhile:
 *  CKR_SESSION_HANDLE_INVALID and nothing is kept).  The secret lives on
 *  the stack only while needed and is wiped; the key object keeps it in
 *  locked memory.
 */
#include <stdlib.h>
#include <string.h>
#include <openssl/crypto.h>
#include "cs_wire.h"
#include "derive.h"
#include "keyop.h"
#include "log.h"
#include "guard.h"
#include "login.h"
#include "runner.h"
#include "object.h"
#include "session.h"
#include "token.h"
#include "async.h"
#include "kem.h"
#include "cryptoserver/pkcs11v.h"

#define S_SECRET 32                 /* bytes of an ML-KEM shared secret (FIPS 203 §2.4) */

/*  What a KEM call decided under the mutex, for the work without it.  */
typedef struct {
    cs_key_t *key;                  /* the ML-KEM key (reference) */
    cs_derive_key_t secret;         /* what the new secret key will be */
    cs_attrs_t attrs;               /* of the new object */
} s_request_t;

/*  The ciphertext size of an ML-KEM parameter set (FIPS 203 Table 3).  */
static size_t
s_ct_len (const cs_key_t *key)
{
    static const size_t sizes [4] = { 0, 768, 1088, 1568 };
    return key->parameter_set <= 3 ? sizes [key->parameter_set] : 0;
}

/*  Under the mutex: the key for `want` (CKF_ENCAPSULATE on a public key,
 *  CKF_DECAPSULATE on a private one), the mechanism and the template.  */
static CK_RV
s_prepare_inlock (const CK_MECHANISM *mech, CK_OBJECT_HANDLE key, CK_FLAGS want, const CK_ATTRIBUTE *tmpl,
                  CK_ULONG count, s_request_t *req)
{
    CK_RV rv;
    if (mech->mechanism != CKM_ML_KEM)
        return CKR_MECHANISM_INVALID;
    if (mech->pParameter || mech->ulParameterLen)
        return CKR_MECHANISM_PARAM_INVALID;     /* ML-KEM takes none (PKCS#11 3.2) */
    if ((rv = cs_object_login_check_inlock (key, want)) != CKR_OK)
        return rv;
    if (cs_template_bool (tmpl, count, CKA_PRIVATE, true) && !cs_login_user_logged_in_inlock ())
        return CKR_USER_NOT_LOGGED_IN;      /* a private object needs a login (PKCS#11 3.0 §4.4) */
    if ((rv = cs_object_use_inlock (key, want, &req->key)) != CKR_OK)
        return rv;
    if (!cs_object_mech_allowed_inlock (key, mech->mechanism))
        return CKR_MECHANISM_INVALID;       /* CKA_ALLOWED_MECHANISMS (PKCS#11 2.40 §4.4) */
    if (req->key->key_type != CKK_ML_KEM || !s_ct_len (req->key))
        return CKR_KEY_TYPE_INCONSISTENT;
    if ((rv = cs_derive_check_template_inlock (tmpl, count, CKD_NULL, S_SECRET, &req->secret)) != CKR_OK)
        return rv;
    bool decap = want == CKF_DECAPSULATE;
    if (cs_derive_attrs (tmpl, count, &req->secret, !decap || cs_object_flag_inlock (key, CKA_ALWAYS_SENSITIVE, false),
                         !decap || cs_object_flag_inlock (key, CKA_NEVER_EXTRACTABLE, false), &req->attrs))
        return CKR_HOST_MEMORY;
    return CKR_OK;
}

/*  One EncapsulateJob or DecapsulateJob (jobs are stateless: the public key,
 *  or the private key's ref or material, travels).  The secret into secret
 *  (S_SECRET bytes), the ciphertext of an encapsulation into ct (ct_max
 *  bytes, *ct_len_p written).  In a 3.2 async session (`async` set: the
 *  slot of its function reserved) the job leaves and CKR_PENDING comes
 *  back: C_AsyncComplete makes the key from req (its attrs taken) and
 *  writes ct (async.h).  Without the mutex.  */
static CK_RV
s_kem_job (CK_SESSION_HANDLE handle, bool async, s_request_t *req, const uint8_t *ct_in, size_t ct_in_len,
           uint8_t *ct, size_t ct_max, size_t *ct_len_p, uint8_t *secret)
{
    const cs_key_t *key = req->key;
    Cs__Reply *reply = NULL;
    Cs__EncapsulateJob encap = CS__ENCAPSULATE_JOB__INIT;
    Cs__DecapsulateJob decap = CS__DECAPSULATE_JOB__INIT;
    Cs__Job job = CS__JOB__INIT;
    bool encapsulate = ct != NULL;
    size_t want = encapsulate ? s_ct_len (key) + S_SECRET : S_SECRET;
    if (encapsulate) {
        encap.parameter_set = key->parameter_set;
        encap.public_value = (ProtobufCBinaryData) { key->value_len, key->value };
        job.kind_case = CS__JOB__KIND_ENCAPSULATE;
        job.encapsulate = &encap;
    }
    else {
        cs_keyop_job_key (key, &decap.key_id, &decap.key_pkcs8);
        decap.ciphertext = (ProtobufCBinaryData) { ct_in_len, (uint8_t *) ct_in };
        job.kind_case = CS__JOB__KIND_DECAPSULATE;
        job.decapsulate = &decap;
    }
    if (async)
        return cs_async_submit_kem (handle, encapsulate ? CS_ASYNC_ENCAPSULATE : CS_ASYNC_DECAPSULATE, &job,
                                    ct, encapsulate ? want - S_SECRET : 0, req->secret.key_type,
                                    req->secret.value_len, &req->attrs);
    CK_RV rv = cs_runner_run_job (&job, !encapsulate, &reply);
    const Cs__Result *result = rv == CKR_OK ? reply->results [0] : NULL;
    if (result && (result->kind_case != CS__RESULT__KIND_DATA || result->data.len != want
                   || (encapsulate && want - S_SECRET > ct_max))) {
        cs_log_error ("the broker returned a malformed %s result", encapsulate ? "encapsulation" : "decapsulation");
        rv = CKR_DEVICE_ERROR;
    }
    if (rv == CKR_OK) {
        memcpy (secret, result->data.data + want - S_SECRET, S_SECRET);
        if (encapsulate)
            memcpy (ct, result->data.data, *ct_len_p = want - S_SECRET);
    }
    if (reply && reply->n_results && reply->results [0]->kind_case == CS__RESULT__KIND_DATA)
        OPENSSL_cleanse (reply->results [0]->data.data, reply->results [0]->data.len);
    if (reply)
        cs__reply__free_unpacked (reply, NULL);
    return rv;
}

/*  Both calls: prepare (encapsulate: after the length query), the job, the
 *  new object.  */
static CK_RV
s_kem (CK_SESSION_HANDLE handle, CK_MECHANISM_PTR mech, CK_OBJECT_HANDLE key, CK_FLAGS want,
       CK_ATTRIBUTE_PTR tmpl, CK_ULONG count, const uint8_t *ct_in, size_t ct_in_len,
       CK_BYTE_PTR ct, CK_ULONG_PTR ct_len_p, CK_OBJECT_HANDLE_PTR key_p)
{
    s_request_t req = { 0 };
    cs_session_t *session;
    cs_key_t *secret_key = NULL;
    uint8_t secret [S_SECRET];
    size_t ct_len = 0;
    bool async = false;
    CK_RV rv;
    return_val_if_fail (mech && (tmpl || !count), CKR_ARGUMENTS_BAD);
    if (mech->mechanism == CKM_ML_KEM && cs_guard_check () == CKR_OK && cs_token_mechanism (CKM_ML_KEM, NULL) != CKR_OK)
        return CKR_MECHANISM_INVALID;       /* no board offers it (C_GetMechanismList) */
    CS_BEGIN_SESSION_CALL (rv, handle, &session);
    rv = s_prepare_inlock (mech, key, want, tmpl, count, &req);
    if (rv == CKR_OK && want == CKF_ENCAPSULATE && (!ct || *ct_len_p < s_ct_len (req.key))) {
        rv = ct ? CKR_BUFFER_TOO_SMALL : CKR_OK;        /* the length query (PKCS#11 3.2 §5.2) */
        *ct_len_p = s_ct_len (req.key);
        CS_END_CALL ();
        goto out;
    }
    if (rv == CKR_OK)                       /* a 3.2 async session: CKR_PENDING (async.h) */
        async = cs_async_reserve_inlock (session, want == CKF_ENCAPSULATE ? CS_ASYNC_ENCAPSULATE
                                                                          : CS_ASYNC_DECAPSULATE, &rv);
    CS_END_CALL ();
    if (rv == CKR_OK)
        rv = s_kem_job (handle, async, &req, ct_in, ct_in_len, ct, ct_len_p ? *ct_len_p : 0, &ct_len, secret);
    if (async)
        goto out;
    if (rv == CKR_OK && !(secret_key = cs_key_new_secret (req.secret.key_type, secret, req.secret.value_len)))
        rv = CKR_HOST_MEMORY;
    OPENSSL_cleanse (secret, sizeof secret);
    if (rv == CKR_OK) {
        cs_lock ();
        rv = cs_session_lookup_inlock (handle)
           ? cs_object_add_session_inlock (handle, CKO_SECRET_KEY, secret_key, &req.attrs, key_p)
           : CKR_SESSION_HANDLE_INVALID;
        cs_unlock ();
    }
    if (rv == CKR_OK && ct_len_p)
        *ct_len_p = ct_len;
out:
    cs_key_unref (&secret_key);
    cs_key_unref (&req.key);
    cs_attrs_clear (&req.attrs);
    return rv;
}

CK_RV
C_EncapsulateKey (CK_SESSION_HANDLE handle, CK_MECHANISM_PTR mech, CK_OBJECT_HANDLE key,
                  CK_ATTRIBUTE_PTR tmpl, CK_ULONG count, CK_BYTE_PTR ct, CK_ULONG_PTR ct_len_p,
                  CK_OBJECT_HANDLE_PTR key_p)
{
    return_val_if_fail (ct_len_p && (key_p || !ct), CKR_ARGUMENTS_BAD);
    return s_kem (handle, mech, key, CKF_ENCAPSULATE, tmpl, count, NULL, 0, ct, ct_len_p, key_p);
}

CK_RV
C_DecapsulateKey (CK_SESSION_HANDLE handle, CK_MECHANISM_PTR mech, CK_OBJECT_HANDLE key,
                  CK_ATTRIBUTE_PTR tmpl, CK_ULONG count, CK_BYTE_PTR ct, CK_ULONG ct_len,
                  CK_OBJECT_HANDLE_PTR key_p)
{
    return_val_if_fail (key_p && (ct || !ct_len), CKR_ARGUMENTS_BAD);
    return s_kem (handle, mech, key, CKF_DECAPSULATE, tmpl, count, ct, ct_len, NULL, NULL, key_p);
}
