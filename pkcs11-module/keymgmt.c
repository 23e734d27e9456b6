/*  keymgmt.c — C_GenerateKeyPair, C_CreateObject, C_CopyObject,
 *  C_SetAttributeValue, C_DestroyObject (keymgmt.h).
 *
 *  Each entry point checks under the library mutex, runs at most one key
 *  job without it, and puts the reply into the object table under it again.
 */
#include <stdlib.h>
#include <string.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>
#include "secret.h"
#include "cs_mech.h"
#include "cs_attr_rules.h"
#include "keyder.h"
#include "log.h"
#include "guard.h"
#include "login.h"
#include "runner.h"
#include "object.h"
#include "session.h"
#include "token.h"
#include "async.h"
#include "keymgmt.h"
#include "keymgmt_int.h"
#include "cs_secmem.h"
#include "dataobj.h"

/*  ---- checks (the rest are keymgmt_check.c) ------------------------------ */

/*  Under the mutex: may this session make or change an object that is a
 *  token object (`token`) or private (`priv`)?  PKCS#11 2.40 §5.7, §6.7.1.  */
static CK_RV
s_may_write_inlock (cs_session_t *session, bool token, bool priv)
{
    if (token && !(cs_session_flags_inlock (session) & CKF_RW_SESSION))
        return CKR_SESSION_READ_ONLY;
    if ((token || priv) && !cs_login_user_logged_in_inlock ())
        return CKR_USER_NOT_LOGGED_IN;
    return CKR_OK;
}

/*  ---- jobs ---------------------------------------------------------------- */

/*  Runs one key job with the login ticket; without the mutex.  On CKR_OK
 *  *reply_p holds a result of `kind` (caller frees).  */
static CK_RV
s_key_job (Cs__Job *job, Cs__Result__KindCase kind, Cs__Reply **reply_p)
{
    CK_RV rv = cs_runner_run_job (job, true, reply_p);
    if (rv == CKR_OK && (*reply_p)->results [0]->kind_case != kind
    &&  !(kind == CS__RESULT__KIND_KEY && (*reply_p)->results [0]->kind_case == CS__RESULT__KIND__NOT_SET)) {
        cs_log_error ("the broker answered a key job with the wrong result");
        rv = CKR_DEVICE_ERROR;
    }
    if (rv != CKR_OK && *reply_p) {
        cs_log_debug ("key job failed: %s", cs_rv_name (rv));
        cs__reply__free_unpacked (*reply_p, NULL);
        *reply_p = NULL;
    }
    return rv;
}

/*  Puts a reply's KeyInfo into the table and returns the handle of its
 *  `klass` object; CKR_DEVICE_ERROR when the reply lacks it.  */
static CK_RV
s_put_result (const Cs__KeyInfo *info, CK_OBJECT_CLASS klass, CK_OBJECT_HANDLE *handle_p)
{
    CK_RV rv;
    cs_lock ();
    rv = cs_object_put_inlock (info, klass, handle_p);
    cs_unlock ();
    if (rv == CKR_OK && handle_p && !*handle_p) {
        cs_log_error ("the broker's reply lacks the new %s object",
                      klass == CKO_PRIVATE_KEY ? "private key" : "public key");
        rv = CKR_DEVICE_ERROR;
    }
    return rv;
}

/*  ImportKeyJob of a private (PKCS#8) or public key with the template.  */
static CK_RV
s_import (const cs_key_t *key, CK_OBJECT_CLASS klass, Cs__Attribute **wire, size_t n_wire,
          CK_OBJECT_HANDLE *handle_p)
{
    CK_RV rv;
    Cs__ImportKeyJob import = CS__IMPORT_KEY_JOB__INIT;
    Cs__Job job = CS__JOB__INIT;
    Cs__Reply *reply = NULL;
    uint8_t *spki = NULL;
    size_t spki_len = 0;
    if (klass == CKO_PRIVATE_KEY && !key->pkcs8)
        return CKR_TEMPLATE_INCONSISTENT;
    if (klass == CKO_PRIVATE_KEY)
        import.private_pkcs8 = (ProtobufCBinaryData) { key->pkcs8_len, key->pkcs8 };
    else
    if (!(spki = cs_keyder_spki (key, &spki_len)))
        return CKR_HOST_MEMORY;
    else
        import.public_spki = (ProtobufCBinaryData) { spki_len, spki };
    import.template_ = wire;
    import.n_template_ = n_wire;
    job.kind_case = CS__JOB__KIND_IMPORT_KEY;
    job.import_key = &import;
    if ((rv = s_key_job (&job, CS__RESULT__KIND_IMPORTED, &reply)) == CKR_OK)
        rv = s_put_result (reply->results [0]->imported->key, klass, handle_p);
    if (reply)
        cs__reply__free_unpacked (reply, NULL);
    free (spki);
    return rv;
}

/*  ---- C_GenerateKeyPair ---------------------------------------------------- */

/*  The key of a session ML-DSA or ML-KEM pair (issue #23): its public facts
 *  from the broker's KeyInfo (OpenSSL 3.0 cannot read its PKCS#8), its
 *  PKCS#8 copied into locked memory; no ref (jobs carry the material).  */
static cs_key_t *
s_session_pq_key (const Cs__KeyInfo *info, ProtobufCBinaryData pkcs8)
{
    cs_key_t *key = info ? cs_key_new (info) : NULL;
    if (!key)
        return NULL;
    free (key->ref);
    key->ref = NULL;
    key->legacy_id = false;
    if (!(key->pkcs8 = cs_secmem_dup (pkcs8.data, pkcs8.len)))
        cs_key_unref (&key);
    else
        key->pkcs8_len = pkcs8.len;
    return key;
}

/*  Makes the two session objects of a per-request key from its PKCS#8
 *  (an ML-DSA or ML-KEM key: with the broker's description `info`).  */
static CK_RV
s_session_pair (CK_SESSION_HANDLE handle, const cs_keygen_t *gen, const Cs__KeyInfo *info, ProtobufCBinaryData pkcs8,
                const CK_ATTRIBUTE *pub, CK_ULONG n_pub, const CK_ATTRIBUTE *priv, CK_ULONG n_priv,
                CK_OBJECT_HANDLE *pub_p, CK_OBJECT_HANDLE *priv_p)
{
    CK_RV rv = CKR_HOST_MEMORY;
    bool pq = gen->key_type == CKK_ML_DSA || gen->key_type == CKK_ML_KEM;
    cs_key_t *key = pq ? s_session_pq_key (info, pkcs8) : cs_keyder_key_from_pkcs8 (pkcs8.data, pkcs8.len);
    cs_key_t *public_key = key ? cs_key_public_only (key) : NULL;
    cs_attrs_t pub_attrs = { 0 }, priv_attrs = { 0 };
    cs_session_t *session;
    if (!key || !public_key || key->key_type != gen->key_type) {
        rv = key && public_key ? CKR_DEVICE_ERROR : rv;
        goto out;
    }
    if (cs_keymgmt_session_attrs (CKO_PUBLIC_KEY, pub, n_pub, gen->mechanism, &pub_attrs)
    ||  cs_keymgmt_session_attrs (CKO_PRIVATE_KEY, priv, n_priv, gen->mechanism, &priv_attrs))
        goto out;
    cs_lock ();
    if (!(session = cs_session_lookup_inlock (handle)))
        rv = CKR_SESSION_HANDLE_INVALID;         /* closed meanwhile */
    else
    if ((rv = cs_object_add_session_inlock (handle, CKO_PUBLIC_KEY, public_key, &pub_attrs, pub_p)) == CKR_OK
    &&  (rv = cs_object_add_session_inlock (handle, CKO_PRIVATE_KEY, key, &priv_attrs, priv_p)) != CKR_OK)
        cs_object_destroy_local_inlock (*pub_p);
    cs_unlock ();
out:
    cs_attrs_clear (&pub_attrs);
    cs_attrs_clear (&priv_attrs);
    cs_key_unref (&public_key);
    cs_key_unref (&key);
    return rv;
}

/*  A token key generation in a 3.2 async session (its slot reserved):
 *  the job leaves with an idempotency id of its own, which C_AsyncGetID
 *  and C_AsyncJoin reuse (async.h); CKR_PENDING.  */
static CK_RV
s_generate_async (CK_SESSION_HANDLE handle, Cs__Job *job)
{
    uint8_t idem [CS_LINK_IDEM_ID_LEN];
    if (RAND_bytes (idem, sizeof idem) != 1) {
        cs_async_release (handle, CS_ASYNC_GENERATE_KEY_PAIR);
        return CKR_GENERAL_ERROR;
    }
    job->idempotency_id = (ProtobufCBinaryData) { sizeof idem, idem };
    return cs_async_submit (handle, CS_ASYNC_GENERATE_KEY_PAIR, job, NULL, 0);
}

/*  Runs the GenerateKeyPairJob and makes the objects (or, `async`, leaves
 *  it in flight).  */
static CK_RV
s_generate (CK_SESSION_HANDLE handle, bool async, const cs_keygen_t *gen, Cs__GenerateKeyPairJob *job_gen,
            const CK_ATTRIBUTE *pub, CK_ULONG n_pub, const CK_ATTRIBUTE *priv, CK_ULONG n_priv,
            CK_OBJECT_HANDLE *pub_p, CK_OBJECT_HANDLE *priv_p)
{
    Cs__Job job = CS__JOB__INIT;
    Cs__Reply *reply = NULL;
    Cs__GenerateKeyPairResult *result;
    CK_RV rv;
    job.kind_case = CS__JOB__KIND_GENERATE_KEY_PAIR;
    job.generate_key_pair = job_gen;
    if (async)
        return s_generate_async (handle, &job);
    if ((rv = s_key_job (&job, CS__RESULT__KIND_GENERATED, &reply)) != CKR_OK)
        return rv;
    result = reply->results [0]->generated;
    if (gen->token) {
        if ((rv = s_put_result (result->key, CKO_PUBLIC_KEY, pub_p)) == CKR_OK)
            rv = s_put_result (result->key, CKO_PRIVATE_KEY, priv_p);
    }
    else
    if (!result->private_pkcs8.len) {
        cs_log_error ("the broker generated a session key without its private key");
        rv = CKR_DEVICE_ERROR;
    }
    else
        rv = s_session_pair (handle, gen, result->key, result->private_pkcs8, pub, n_pub, priv, n_priv, pub_p, priv_p);
    if (result->private_pkcs8.len)
        OPENSSL_cleanse (result->private_pkcs8.data, result->private_pkcs8.len);
    cs__reply__free_unpacked (reply, NULL);
    return rv;
}

/*  PKCS#11 2.40 §5.14.  */
CK_RV
C_GenerateKeyPair (CK_SESSION_HANDLE handle, CK_MECHANISM_PTR mech,
                   CK_ATTRIBUTE_PTR pub, CK_ULONG n_pub, CK_ATTRIBUTE_PTR priv, CK_ULONG n_priv,
                   CK_OBJECT_HANDLE_PTR pub_p, CK_OBJECT_HANDLE_PTR priv_p)
{
    Cs__GenerateKeyPairJob job = CS__GENERATE_KEY_PAIR_JOB__INIT;
    cs_session_t *session;
    cs_keygen_t gen;
    CK_MECHANISM_INFO info;
    bool async = false;
    CK_RV rv;
    return_val_if_fail (mech && pub_p && priv_p && (pub || !n_pub) && (priv || !n_priv), CKR_ARGUMENTS_BAD);
    if ((rv = cs_keygen_check (mech, pub, n_pub, priv, n_priv, &gen)) != CKR_OK)
        return cs_guard_check () ?: rv;
    CS_BEGIN_SESSION_CALL (rv, handle, &session);
    rv = s_may_write_inlock (session, gen.token, gen.private_private || gen.public_private);
    CS_END_CALL ();
    if (rv != CKR_OK || (rv = cs_token_mechanism (mech->mechanism, &info)) != CKR_OK)
        return rv;
    /*  The sizes C_GetMechanismInfo reports are the sizes generation takes.  */
    if (gen.mechanism == CKM_RSA_PKCS_KEY_PAIR_GEN
    &&  !cs_mech_rsa_gen_ok (gen.modulus_bits, info.ulMinKeySize, 0, info.ulMaxKeySize))
        return CKR_KEY_SIZE_RANGE;
    job.mechanism = gen.mechanism;
    job.modulus_bits = (uint32_t) gen.modulus_bits;
    job.public_exponent = (ProtobufCBinaryData) { gen.exponent_len, (uint8_t *) gen.exponent };
    if (gen.curve)
        job.ec_params = (ProtobufCBinaryData) { gen.curve->oid_len, (uint8_t *) gen.curve->oid };
    job.token = gen.token;
    job.parameter_set = gen.parameter_set;
    if ((rv = cs_attrs_to_wire (pub, n_pub, &job.public_template, &job.n_public_template)) == CKR_OK
    &&  (rv = cs_attrs_to_wire (priv, n_priv, &job.private_template, &job.n_private_template)) == CKR_OK
    &&  gen.token) {
        /*  A token key in a 3.2 async session: CKR_PENDING (a session key,
         *  gone with its session, is made at once).  */
        if ((rv = cs_guard_check ()) == CKR_OK) {
            cs_lock ();
            if ((session = cs_session_lookup_inlock (handle)))
                async = cs_async_reserve_inlock (session, CS_ASYNC_GENERATE_KEY_PAIR, &rv);
            cs_unlock ();
        }
    }
    if (rv == CKR_OK)
        rv = s_generate (handle, async, &gen, &job, pub, n_pub, priv, n_priv, pub_p, priv_p);
    cs_attrs_wire_free (job.public_template, job.n_public_template);
    cs_attrs_wire_free (job.private_template, job.n_private_template);
    return rv;
}

/*  ---- C_CreateObject -------------------------------------------------------- */

/*  PKCS#11 2.40 §5.7; key components per curr. mech. §2.1.3, §2.1.4, §2.3.3,
 *  §2.3.4.  The template's private values are only read (the application
 *  owns and wipes them); every copy made here is cleared (keyder.h).  */
CK_RV
C_CreateObject (CK_SESSION_HANDLE handle, CK_ATTRIBUTE_PTR tmpl, CK_ULONG count, CK_OBJECT_HANDLE_PTR object_p)
{
    CK_OBJECT_CLASS klass;
    CK_KEY_TYPE key_type;
    bool token, priv;
    cs_session_t *session;
    cs_key_t *key = NULL;
    cs_attrs_t attrs = { 0 };
    Cs__Attribute **wire = NULL;
    size_t n_wire = 0;
    CK_RV rv;
    return_val_if_fail (object_p && (tmpl || !count), CKR_ARGUMENTS_BAD);
    if (cs_guard_check () == CKR_OK && cs_dataobj_is_template (tmpl, count))
        return cs_dataobj_create (handle, tmpl, count, object_p);     /* certificates, data objects */
    if ((rv = cs_guard_check ()) == CKR_OK && cs_template_ulong (tmpl, count, CKA_CLASS, &klass)
    &&  klass == CKO_SECRET_KEY)
        return cs_secret_create (handle, tmpl, count, object_p);        /* secret.h */
    if (rv != CKR_OK
    ||  (rv = cs_keymgmt_create_check (tmpl, count, &klass, &key_type, &token)) != CKR_OK)
        return rv;
    priv = cs_template_bool (tmpl, count, CKA_PRIVATE, klass == CKO_PRIVATE_KEY);
    CS_BEGIN_SESSION_CALL (rv, handle, &session);
    rv = s_may_write_inlock (session, token, priv);
    CS_END_CALL ();
    if (rv != CKR_OK)
        return rv;
    rv = klass == CKO_PRIVATE_KEY ? cs_keyder_private_from_template (key_type, tmpl, count, &key)
                                  : cs_keyder_public_from_template (key_type, tmpl, count, &key, NULL, NULL);
    if (rv == CKR_OK && token && (rv = cs_attrs_to_wire (tmpl, count, &wire, &n_wire)) == CKR_OK)
        rv = s_import (key, klass, wire, n_wire, object_p);
    else
    if (rv == CKR_OK && cs_keymgmt_session_attrs (klass, tmpl, count, CK_UNAVAILABLE_INFORMATION, &attrs))
        rv = CKR_HOST_MEMORY;
    else
    if (rv == CKR_OK) {
        cs_lock ();
        rv = cs_session_lookup_inlock (handle) ? cs_object_add_session_inlock (handle, klass, key, &attrs, object_p)
                                        : CKR_SESSION_HANDLE_INVALID;
        cs_unlock ();
    }
    cs_attrs_wire_free (wire, n_wire);
    cs_attrs_clear (&attrs);
    cs_key_unref (&key);
    return rv;
}

/*  ---- changes of existing objects ------------------------------------------- */

/*  Under the mutex, from an entry point: the session (CKR_SESSION_HANDLE_INVALID,
 *  CKR_CRYPTOKI_NOT_INITIALIZED), the snapshot of `object` and the
 *  session's right to change it.  */
static CK_RV
s_object_prepare_inlock (CK_SESSION_HANDLE handle, CK_OBJECT_HANDLE object, cs_object_info_t *info)
{
    cs_session_t *session;
    CK_RV rv = cs_session_get_inlock (handle, &session);
    if (rv != CKR_OK)
        return rv;
    if ((rv = cs_object_info_inlock (object, info)) == CKR_OK && info->token)
        rv = s_may_write_inlock (session, true, false);
    return rv;
}

/*  Runs a job on a token key that answers with a KeyResult and puts its key;
 *  *handle_p (if given) gets the `klass` object of the reply's key.  */
static CK_RV
s_key_change (Cs__Job *job, CK_OBJECT_CLASS klass, CK_OBJECT_HANDLE *handle_p)
{
    Cs__Reply *reply = NULL;
    const Cs__KeyResult *result;
    CK_RV rv = s_key_job (job, CS__RESULT__KIND_KEY, &reply);
    if (rv != CKR_OK)
        return rv;
    result = reply->results [0]->kind_case == CS__RESULT__KIND_KEY ? reply->results [0]->key : NULL;
    if (result && result->key)
        rv = s_put_result (result->key, klass, handle_p);
    else
    if (handle_p) {
        cs_log_error ("the broker's reply lacks the changed key");
        rv = CKR_DEVICE_ERROR;
    }
    cs__reply__free_unpacked (reply, NULL);
    return rv;
}

/*  PKCS#11 2.40 §5.7: CKA_DESTROYABLE FALSE → CKR_ACTION_PROHIBITED.  */
CK_RV
C_DestroyObject (CK_SESSION_HANDLE handle, CK_OBJECT_HANDLE object)
{
    Cs__DestroyKeyJob destroy = CS__DESTROY_KEY_JOB__INIT;
    Cs__Job job = CS__JOB__INIT;
    cs_object_info_t info;
    CK_RV rv;
    if (cs_dataobj_is_handle (object))
        return cs_dataobj_destroy (handle, object);
    CS_BEGIN_CALL (rv);
    rv = s_object_prepare_inlock (handle, object, &info);
    if (rv == CKR_CRYPTOKI_NOT_INITIALIZED || rv == CKR_SESSION_HANDLE_INVALID) {
        CS_END_CALL ();
        return rv;
    }
    if (rv == CKR_OK && !cs_object_flag_inlock (object, CKA_DESTROYABLE, true))
        rv = CKR_ACTION_PROHIBITED;
    else
    if (rv == CKR_OK && !info.token)
        rv = cs_object_destroy_local_inlock (object);
    CS_END_CALL ();
    if (rv == CKR_OK && info.token) {
        destroy.ref = info.key->ref;
        destroy.object = info.klass;
        job.kind_case = CS__JOB__KIND_DESTROY_KEY;
        job.destroy_key = &destroy;
        if ((rv = s_key_change (&job, info.klass, NULL)) == CKR_OK) {
            cs_lock ();
            cs_object_forget_inlock (object);
            cs_unlock ();
        }
    }
    cs_object_info_clear (&info);
    return rv;
}

/*  PKCS#11 2.40 §5.7, §4.1.2: the rules are cs_object_check_change_inlock's.  */
CK_RV
C_SetAttributeValue (CK_SESSION_HANDLE handle, CK_OBJECT_HANDLE object, CK_ATTRIBUTE_PTR tmpl, CK_ULONG count)
{
    Cs__SetKeyAttributesJob set = CS__SET_KEY_ATTRIBUTES_JOB__INIT;
    Cs__Job job = CS__JOB__INIT;
    cs_object_info_t info;
    CK_RV rv;
    return_val_if_fail (tmpl || !count, CKR_ARGUMENTS_BAD);
    if (cs_dataobj_is_handle (object))
        return cs_dataobj_set (handle, object, tmpl, count);
    CS_BEGIN_CALL (rv);
    rv = s_object_prepare_inlock (handle, object, &info);
    if (rv == CKR_CRYPTOKI_NOT_INITIALIZED || rv == CKR_SESSION_HANDLE_INVALID) {
        CS_END_CALL ();
        return rv;
    }
    if (rv == CKR_OK)
        rv = cs_object_check_change_inlock (object, tmpl, count, false);
    if (rv == CKR_OK && !info.token)
        rv = cs_object_set_local_inlock (object, tmpl, count);
    CS_END_CALL ();
    if (rv == CKR_OK && info.token
    &&  (rv = cs_attrs_to_wire (tmpl, count, &set.attributes, &set.n_attributes)) == CKR_OK) {
        set.ref = info.key->ref;
        set.object = info.klass;
        job.kind_case = CS__JOB__KIND_SET_KEY_ATTRIBUTES;
        job.set_key_attributes = &set;
        rv = s_key_change (&job, info.klass, NULL);
        cs_attrs_wire_free (set.attributes, set.n_attributes);
    }
    cs_object_info_clear (&info);
    return rv;
}

/*  A session copy of a visible object: the same key (a token public key:
 *  its public facts), the stored attributes with the template over them.  */
static CK_RV
s_copy_local (CK_SESSION_HANDLE handle, const cs_object_info_t *info, const CK_ATTRIBUTE *tmpl,
              CK_ULONG count, CK_OBJECT_HANDLE *object_p)
{
    CK_RV rv = CKR_HOST_MEMORY;
    cs_key_t *key = info->token ? cs_key_public_only (info->key) : cs_key_ref (info->key);
    cs_attrs_t attrs = { 0 };
    if (info->token && (info->klass == CKO_PRIVATE_KEY || info->klass == CKO_SECRET_KEY))
        rv = CKR_TEMPLATE_INCONSISTENT;     /* a server-held private or secret key never leaves */
    else
    if (key && !cs_attrs_copy (&attrs, &info->attrs) && !cs_attrs_add_template (&attrs, tmpl, count, cs_keymgmt_not_stored)) {
        cs_lock ();
        rv = cs_session_lookup_inlock (handle) ? cs_object_add_session_inlock (handle, info->klass, key, &attrs, object_p)
                                        : CKR_SESSION_HANDLE_INVALID;
        cs_unlock ();
    }
    cs_attrs_clear (&attrs);
    cs_key_unref (&key);
    return rv;
}

/*  Drops the computed attributes of a stored list (the broker computes its
 *  own for the import, cs_attr_rules.h).  Returns 0.  */
static int
s_drop_computed (cs_attrs_t *attrs)
{
    size_t kept = 0;
    for (size_t i = 0; i < attrs->count; i++)
        if (cs_keymgmt_token_only (attrs->items [i].type))
            free (attrs->items [i].value);
        else
            attrs->items [kept++] = attrs->items [i];
    attrs->count = kept;
    return 0;
}

/*  A session object becomes a token object: an import with its attributes.  */
static CK_RV
s_copy_import (const cs_object_info_t *info, const CK_ATTRIBUTE *tmpl, CK_ULONG count, CK_OBJECT_HANDLE *object_p)
{
    CK_RV rv = CKR_HOST_MEMORY;
    cs_attrs_t attrs = { 0 };
    Cs__Attribute **wire = NULL;
    size_t n_wire = 0;
    if (info->klass == CKO_SECRET_KEY)
        return CKR_ATTRIBUTE_VALUE_INVALID;     /* a session secret key does not become a token one
                                                   by a copy (token keys: C_GenerateKey, C_CreateObject) */
    if (!cs_attrs_copy (&attrs, &info->attrs) && !cs_attrs_add_template (&attrs, tmpl, count, cs_keymgmt_token_only)
    &&  !s_drop_computed (&attrs) && (rv = cs_attrs_list_to_wire (&attrs, &wire, &n_wire)) == CKR_OK)
        rv = s_import (info->key, info->klass, wire, n_wire, object_p);
    cs_attrs_wire_free (wire, n_wire);
    cs_attrs_clear (&attrs);
    return rv;
}

/*  PKCS#11 2.40 §5.7: CKA_COPYABLE FALSE → CKR_ACTION_PROHIBITED; a copy
 *  may change CKA_TOKEN (session → token is an import), CKA_PRIVATE,
 *  CKA_MODIFIABLE, CKA_DESTROYABLE and what C_SetAttributeValue may.  */
CK_RV
C_CopyObject (CK_SESSION_HANDLE handle, CK_OBJECT_HANDLE object, CK_ATTRIBUTE_PTR tmpl, CK_ULONG count,
              CK_OBJECT_HANDLE_PTR object_p)
{
    Cs__CopyKeyJob copy = CS__COPY_KEY_JOB__INIT;
    Cs__Job job = CS__JOB__INIT;
    cs_object_info_t info;
    cs_session_t *session;
    bool token, priv;
    CK_RV rv;
    return_val_if_fail (object_p && (tmpl || !count), CKR_ARGUMENTS_BAD);
    if (cs_dataobj_is_handle (object))
        return cs_dataobj_copy (handle, object, tmpl, count, object_p);
    CS_BEGIN_SESSION_CALL (rv, handle, &session);
    if ((rv = cs_object_info_inlock (object, &info)) == CKR_OK
    &&  (rv = cs_object_check_change_inlock (object, tmpl, count, true)) == CKR_OK) {
        token = cs_template_bool (tmpl, count, CKA_TOKEN, info.token);
        priv = cs_template_bool (tmpl, count, CKA_PRIVATE, cs_object_flag_inlock (object, CKA_PRIVATE, false));
        rv = s_may_write_inlock (session, token, priv);
    }
    CS_END_CALL ();
    if (rv != CKR_OK)
        ;
    else
    if (!token)
        rv = s_copy_local (handle, &info, tmpl, count, object_p);
    else
    if (!info.token)
        rv = s_copy_import (&info, tmpl, count, object_p);
    else
    if ((rv = cs_attrs_to_wire (tmpl, count, &copy.attributes, &copy.n_attributes)) == CKR_OK) {
        copy.ref = info.key->ref;
        copy.object = info.klass;
        job.kind_case = CS__JOB__KIND_COPY_KEY;
        job.copy_key = &copy;
        rv = s_key_change (&job, info.klass, object_p);
        cs_attrs_wire_free (copy.attributes, copy.n_attributes);
    }
    cs_object_info_clear (&info);
    return rv;
}
