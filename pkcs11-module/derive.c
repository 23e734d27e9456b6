/*  derive.c — C_DeriveKey with CKM_ECDH1_DERIVE (derive.h).
 *
 *  One DeriveJob per call, sent without the library mutex: the checks and
 *  the template are done under it first, the derived key goes into the
 *  object table under it afterwards (the session may have closed meanwhile:
 *  then CKR_SESSION_HANDLE_INVALID and nothing is kept).  Z and the derived
 *  value live on the stack only while needed and are wiped with
 *  OPENSSL_cleanse; the key object keeps its value in locked memory.
 */
#include <stdlib.h>
#include <string.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include "cs_wire.h"
#include "derive.h"
#include "keyop.h"
#include "log.h"
#include "mechanism.h"
#include "guard.h"
#include "login.h"
#include "runner.h"
#include "object.h"
#include "session.h"

/*  cs_wire.h (protobuf) came first, so DeriveJob.public_data keeps its
 *  name; p11-kit's compatibility macro would turn it into pPublicData.  */
#undef public_data

#define S_Z_MAX 66                  /* bytes of Z on P-521 */

/*  ---- checks --------------------------------------------------------- */

/*  The digest of a CKD_SHAx_KDF, or NULL (CKD_NULL and unknown ones).  */
static const EVP_MD *
s_kdf_md (CK_ULONG kdf)
{
    switch (kdf) {
        case CKD_SHA1_KDF:   return EVP_sha1 ();
        case CKD_SHA224_KDF: return EVP_sha224 ();
        case CKD_SHA256_KDF: return EVP_sha256 ();
        case CKD_SHA384_KDF: return EVP_sha384 ();
        case CKD_SHA512_KDF: return EVP_sha512 ();
        default:             return NULL;
    }
}

/*  The raw point in pPublicData: itself, or the content of a DER OCTET
 *  STRING (short or one-byte long form).  PKCS#11 2.40 §2.3.14 lets a token
 *  take either; pkcs11-tool sends raw (DER with --derive-pass-der).  */
static bool
s_point (const uint8_t *data, size_t len, size_t field_len, bool montgomery, const uint8_t **point_p)
{
    size_t want = montgomery ? field_len : 2 * field_len + 1, header = 0;
    if (!data || !field_len)
        return false;
    if (montgomery && len == want) {            /* PKCS#11 3.0 §2.3.7: the raw u (RFC 7748 §5) */
        *point_p = data;
        return true;
    }
    if (len == want && data [0] == 0x04) {
        *point_p = data;
        return true;
    }
    if (len >= 2 && data [0] == 0x04 && data [1] < 0x80 && data [1] == want && len == want + 2)
        header = 2;
    else
    if (len >= 3 && data [0] == 0x04 && data [1] == 0x81 && data [2] == want && len == want + 3)
        header = 3;
    if (!header || (!montgomery && data [header] != 0x04))
        return false;
    *point_p = data + header;
    return true;
}

CK_RV
cs_derive_check_params (const CK_MECHANISM *mech, size_t field_len, bool montgomery, cs_derive_params_t *params)
{
    const CK_ECDH1_DERIVE_PARAMS *p = mech->pParameter;
    memset (params, 0, sizeof *params);
    if (mech->mechanism != CKM_ECDH1_DERIVE)
        return CKR_MECHANISM_INVALID;
    if (!p || mech->ulParameterLen != sizeof *p)
        return CKR_MECHANISM_PARAM_INVALID;
    if (p->kdf != CKD_NULL && !s_kdf_md (p->kdf))
        return CKR_MECHANISM_PARAM_INVALID;
    if ((p->ulSharedDataLen && !p->pSharedData) || p->ulSharedDataLen > CS_DERIVE_MAX_SHARED
    ||  (p->kdf == CKD_NULL && (p->ulSharedDataLen || p->pSharedData)))
        return CKR_MECHANISM_PARAM_INVALID;     /* §2.3.14: CKD_NULL takes no shared data */
    if (!s_point (p->pPublicData, p->ulPublicDataLen, field_len, montgomery, &params->point))
        return CKR_MECHANISM_PARAM_INVALID;
    params->kdf = p->kdf;
    params->shared = p->ulSharedDataLen ? p->pSharedData : NULL;
    params->shared_len = p->ulSharedDataLen;
    params->point_len = montgomery ? field_len : 2 * field_len + 1;
    return CKR_OK;
}

/*  Attributes a derive template may not set (only the token does).  */
static bool
s_token_only (CK_ATTRIBUTE_TYPE type)
{
    return type == CKA_VALUE || type == CKA_LOCAL || type == CKA_ALWAYS_SENSITIVE
        || type == CKA_NEVER_EXTRACTABLE || type == CKA_KEY_GEN_MECHANISM;
}

/*  Attributes of key pairs, never of a secret key.  */
static bool
s_pair_only (CK_ATTRIBUTE_TYPE type)
{
    return type == CKA_MODULUS || type == CKA_PUBLIC_EXPONENT || type == CKA_MODULUS_BITS
        || type == CKA_EC_PARAMS || type == CKA_EC_POINT || type == CKA_PRIVATE_EXPONENT
        || type == CKA_PRIME_1 || type == CKA_PRIME_2 || type == CKA_EXPONENT_1
        || type == CKA_EXPONENT_2 || type == CKA_COEFFICIENT;
}

/*  The length of the derived key (CKA_VALUE_LEN or its default).  */
static CK_RV
s_value_len (const CK_ATTRIBUTE *tmpl, CK_ULONG count, CK_ULONG kdf, size_t z_len, cs_derive_key_t *key)
{
    CK_ULONG len = 0;
    bool given = cs_template_ulong (tmpl, count, CKA_VALUE_LEN, &len);
    if (key->key_type == CKK_AES && !given)
        return CKR_TEMPLATE_INCOMPLETE;
    if (!given)
        len = kdf == CKD_NULL ? z_len : (CK_ULONG) EVP_MD_get_size (s_kdf_md (kdf));
    if (len == 0 || len > CS_DERIVE_MAX_VALUE || (kdf == CKD_NULL && len > z_len)
    ||  (key->key_type == CKK_AES && len != 16 && len != 24 && len != 32))
        return CKR_ATTRIBUTE_VALUE_INVALID;
    key->value_len = len;
    return CKR_OK;
}

CK_RV
cs_derive_check_template_inlock (const CK_ATTRIBUTE *tmpl, CK_ULONG count, CK_ULONG kdf, size_t z_len,
                          cs_derive_key_t *key)
{
    CK_ULONG value;
    CK_RV rv;
    memset (key, 0, sizeof *key);
    if (kdf != CKD_NULL && !s_kdf_md (kdf))
        return CKR_MECHANISM_PARAM_INVALID;
    for (CK_ULONG i = 0; i < count; i++) {
        if (tmpl [i].type == CKA_VALUE || s_token_only (tmpl [i].type))
            return CKR_ATTRIBUTE_READ_ONLY;
        if (s_pair_only (tmpl [i].type))
            return CKR_TEMPLATE_INCONSISTENT;
    }
    if ((rv = cs_template_check (tmpl, count)) != CKR_OK
    ||  (rv = cs_object_check_create (CKO_SECRET_KEY, tmpl, count, cs_login_so_logged_in_inlock ())) != CKR_OK)    /* cs_attr_rules.h */
        return rv;
    if (cs_template_ulong (tmpl, count, CKA_CLASS, &value) && value != CKO_SECRET_KEY)
        return CKR_TEMPLATE_INCONSISTENT;
    key->key_type = CKK_GENERIC_SECRET;
    if (cs_template_ulong (tmpl, count, CKA_KEY_TYPE, &value))
        key->key_type = value;
    if (key->key_type != CKK_GENERIC_SECRET && key->key_type != CKK_AES)
        return CKR_TEMPLATE_INCONSISTENT;
    if (cs_template_bool (tmpl, count, CKA_TOKEN, false))
        return CKR_ATTRIBUTE_VALUE_INVALID;
    key->sensitive = cs_template_bool (tmpl, count, CKA_SENSITIVE, true);
    key->extractable = cs_template_bool (tmpl, count, CKA_EXTRACTABLE, false);
    return s_value_len (tmpl, count, kdf, z_len, key);
}

/*  ---- the KDF --------------------------------------------------------- */

int
cs_derive_kdf (CK_ULONG kdf, const uint8_t *z, size_t z_len, const uint8_t *shared,
               size_t shared_len, uint8_t *out, size_t out_len)
{
    const EVP_MD *md = s_kdf_md (kdf);
    EVP_MD_CTX *ctx = NULL;
    uint8_t block [EVP_MAX_MD_SIZE];
    unsigned int block_len = 0;
    int rc = -1;
    if (out_len == 0 || out_len > CS_DERIVE_MAX_VALUE || (shared_len && !shared))
        return -1;
    if (kdf == CKD_NULL) {
        if (out_len > z_len)
            return -1;
        memcpy (out, z + z_len - out_len, out_len);
        return 0;
    }
    if (!md || !(ctx = EVP_MD_CTX_new ()))
        goto out;
    for (uint32_t counter = 1, done = 0; done < out_len; counter++) {
        uint8_t c [4] = { (uint8_t) (counter >> 24), (uint8_t) (counter >> 16),
                          (uint8_t) (counter >> 8), (uint8_t) counter };
        if (!EVP_DigestInit_ex (ctx, md, NULL) || !EVP_DigestUpdate (ctx, z, z_len)
        ||  !EVP_DigestUpdate (ctx, c, sizeof c)
        ||  (shared_len && !EVP_DigestUpdate (ctx, shared, shared_len))
        ||  !EVP_DigestFinal_ex (ctx, block, &block_len))
            goto out;
        size_t take = out_len - done < block_len ? out_len - done : block_len;
        memcpy (out + done, block, take);
        done += (uint32_t) take;
    }
    rc = 0;
out:
    OPENSSL_cleanse (block, sizeof block);
    EVP_MD_CTX_free (ctx);
    if (rc)
        OPENSSL_cleanse (out, out_len);
    return rc;
}

/*  ---- the object ------------------------------------------------------ */

/*  Types the stored list never holds: they come from the key or are set here.  */
static bool
s_not_stored (CK_ATTRIBUTE_TYPE type)
{
    return type == CKA_CLASS || type == CKA_KEY_TYPE || type == CKA_VALUE_LEN || type == CKA_TOKEN
        || s_token_only (type) || s_pair_only (type);
}

int
cs_derive_attrs (const CK_ATTRIBUTE *tmpl, CK_ULONG count, const cs_derive_key_t *key,
                 bool base_always_sensitive, bool base_never_extractable, cs_attrs_t *attrs)
{
    if (cs_attrs_add_template (attrs, tmpl, count, s_not_stored)
    ||  cs_attrs_set_bool (attrs, CKA_SENSITIVE, key->sensitive)
    ||  cs_attrs_set_bool (attrs, CKA_EXTRACTABLE, key->extractable)
    ||  cs_attrs_set_bool (attrs, CKA_LOCAL, false)
    ||  cs_attrs_set_bool (attrs, CKA_ALWAYS_SENSITIVE, base_always_sensitive && key->sensitive)
    ||  cs_attrs_set_bool (attrs, CKA_NEVER_EXTRACTABLE, base_never_extractable && !key->extractable)) {
        cs_attrs_clear (attrs);
        return -1;
    }
    return 0;
}

/*  ---- the job --------------------------------------------------------- */

/*  One DeriveJob: Z into z (field_len bytes).  Without the mutex.  */
static CK_RV
s_derive_job (const cs_key_t *key, const cs_derive_params_t *params, uint8_t *z)
{
    CK_RV rv;
    Cs__Reply *reply = NULL;
    Cs__DeriveJob derive = CS__DERIVE_JOB__INIT;
    Cs__Job job = CS__JOB__INIT;
    const Cs__Result *result;
    cs_keyop_job_key (key, &derive.key_id, &derive.key_pkcs8);
    derive.public_data.data = (uint8_t *) params->point;
    derive.public_data.len = params->point_len;
    job.kind_case = CS__JOB__KIND_DERIVE;
    job.derive = &derive;
    if ((rv = cs_runner_run_job (&job, true, &reply)) != CKR_OK)
        goto out;
    result = reply->results [0];
    if (result->kind_case != CS__RESULT__KIND_DATA || result->data.len != key->field_len
    ||  key->field_len > S_Z_MAX) {
        cs_log_error ("the broker returned a malformed ECDH secret");
        rv = CKR_DEVICE_ERROR;
        goto out;
    }
    memcpy (z, result->data.data, result->data.len);
out:
    if (reply && reply->n_results && reply->results [0]->kind_case == CS__RESULT__KIND_DATA)
        OPENSSL_cleanse (reply->results [0]->data.data, reply->results [0]->data.len);
    if (reply)
        cs__reply__free_unpacked (reply, NULL);
    return rv;
}

/*  What C_DeriveKey decided under the mutex, for the work without it.  */
typedef struct {
    cs_key_t *base;                 /* reference */
    cs_derive_params_t params;      /* points into the application's mechanism */
    cs_derive_key_t key;
    cs_attrs_t attrs;               /* of the new object */
} s_request_t;

/*  Under the mutex: the base key, the mechanism and the template.  */
static CK_RV
s_prepare_inlock (const CK_MECHANISM *mech, CK_OBJECT_HANDLE base, const CK_ATTRIBUTE *tmpl, CK_ULONG count,
           s_request_t *req)
{
    CK_RV rv;
    if (mech->mechanism != CKM_ECDH1_DERIVE)
        return CKR_MECHANISM_INVALID;
    if ((rv = cs_object_login_check_inlock (base, CKF_DERIVE)) != CKR_OK)
        return rv;
    if (cs_template_bool (tmpl, count, CKA_PRIVATE, true) && !cs_login_user_logged_in_inlock ())
        return CKR_USER_NOT_LOGGED_IN;      /* a private object needs a login (PKCS#11 3.0 §4.4) */
    if ((rv = cs_object_use_inlock (base, CKF_DERIVE, &req->base)) != CKR_OK)
        return rv;
    if (!cs_object_mech_allowed_inlock (base, mech->mechanism))
        return CKR_MECHANISM_INVALID;       /* CKA_ALLOWED_MECHANISMS (PKCS#11 2.40 §4.4) */
    if (req->base->key_type != CKK_EC && req->base->key_type != CKK_EC_MONTGOMERY)
        return CKR_KEY_TYPE_INCONSISTENT;
    if ((rv = cs_derive_check_params (mech, req->base->field_len, req->base->key_type == CKK_EC_MONTGOMERY,
                                      &req->params)) != CKR_OK
    ||  (rv = cs_derive_check_template_inlock (tmpl, count, req->params.kdf, req->base->field_len, &req->key)) != CKR_OK)
        return rv;
    if (cs_derive_attrs (tmpl, count, &req->key, cs_object_flag_inlock (base, CKA_ALWAYS_SENSITIVE, false),
                         cs_object_flag_inlock (base, CKA_NEVER_EXTRACTABLE, false), &req->attrs))
        return CKR_HOST_MEMORY;
    return CKR_OK;
}

/*  Without the mutex: Z from the board, then the KDF; the new secret key
 *  in *key_p.  */
static CK_RV
s_make_key (const s_request_t *req, cs_key_t **key_p)
{
    uint8_t z [S_Z_MAX], value [CS_DERIVE_MAX_VALUE];
    CK_RV rv = s_derive_job (req->base, &req->params, z);
    if (rv == CKR_OK
    &&  cs_derive_kdf (req->params.kdf, z, req->base->field_len, req->params.shared, req->params.shared_len,
                       value, req->key.value_len))
        rv = CKR_FUNCTION_FAILED;
    if (rv == CKR_OK && !(*key_p = cs_key_new_secret (req->key.key_type, value, req->key.value_len)))
        rv = CKR_HOST_MEMORY;
    OPENSSL_cleanse (z, sizeof z);
    OPENSSL_cleanse (value, sizeof value);
    return rv;
}

/*  PKCS#11 2.40 §5.14 C_DeriveKey.  */
CK_RV
C_DeriveKey (CK_SESSION_HANDLE handle, CK_MECHANISM_PTR mech, CK_OBJECT_HANDLE base,
             CK_ATTRIBUTE_PTR tmpl, CK_ULONG count, CK_OBJECT_HANDLE_PTR key_p)
{
    s_request_t req = { 0 };
    cs_session_t *session;
    cs_key_t *key = NULL;
    CK_RV rv;
    return_val_if_fail (mech && key_p && (tmpl || !count), CKR_ARGUMENTS_BAD);
    CS_BEGIN_SESSION_CALL (rv, handle, &session);
    rv = s_prepare_inlock (mech, base, tmpl, count, &req);
    CS_END_CALL ();
    if (rv == CKR_OK)
        rv = s_make_key (&req, &key);
    if (rv == CKR_OK) {
        cs_lock ();
        rv = cs_session_lookup_inlock (handle)
           ? cs_object_add_session_inlock (handle, CKO_SECRET_KEY, key, &req.attrs, key_p)
           : CKR_SESSION_HANDLE_INVALID;
        cs_unlock ();
    }
    cs_key_unref (&key);
    cs_key_unref (&req.base);
    cs_attrs_clear (&req.attrs);
    return rv;
}
