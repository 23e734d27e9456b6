/*  wrap.c — C_WrapKey and C_UnwrapKey (PKCS#11 2.40 §5.18) for secret keys
 *  (CKK_AES, CKK_DES3, CKK_DES, CKK_GENERIC_SECRET) with CKM_RSA_PKCS_OAEP, AES
 *  key wrap (CKM_AES_KEY_WRAP, RFC 3394; CKM_AES_KEY_WRAP_PAD, RFC 5649) or
 *  CBC-PAD (CKM_AES_CBC_PAD, CKM_DES3_CBC_PAD: every row with CKF_WRAP), and the attribute
 *  rules that stop the known wrapping attacks (Bortolozzo, Centenaro,
 *  Focardi, Steel, "Attacking and fixing PKCS#11 security tokens", CCS
 *  2010: the Tookan attacks).  docs/CONTRACTS.md "Wrapping" is the contract.
 *
 *  C_WrapKey is the OAEP encryption of the secret key's CKA_VALUE with an
 *  RSA public key object, run in the module with OpenSSL like C_Encrypt of a
 *  public key (encrypt.c, cs_keyop_public_encrypt): no secret of the broker is
 *  needed.  C_UnwrapKey is one DecryptJob on the broker with the RSA private
 *  key (server-held, keystore or per-request), exactly as C_Decrypt with
 *  OAEP; the plaintext goes to locked memory (cs_secmem.h) and becomes a
 *  session secret key object (secret.c), or with CKA_TOKEN TRUE is imported
 *  once into a token secret key sealed by the broker (secret_token.h).
 *  With an AES or DES3 wrapping (unwrapping) key, session or token, each is one
 *  SymJob with key_wrap set (cs_secret_wrap_job, secret.h): the wrapped
 *  value of a session secret key (a token secret key's value stays on the
 *  broker: CKR_KEY_NOT_WRAPPABLE), or the plaintext that becomes the key
 *  as above.
 *
 *  The rules, checked in this order (each with the code 2.40 §5.18 names):
 *    wrapping: the wrapping key is a visible RSA public key object
 *      (CKR_WRAPPING_KEY_HANDLE_INVALID, CKR_WRAPPING_KEY_TYPE_INCONSISTENT)
 *      with CKA_WRAP TRUE (CKR_KEY_FUNCTION_NOT_PERMITTED); the key to wrap
 *      is a visible secret key with a value (CKR_KEY_HANDLE_INVALID,
 *      CKR_KEY_NOT_WRAPPABLE) with CKA_EXTRACTABLE TRUE
 *      (CKR_KEY_UNEXTRACTABLE); CKA_WRAP_WITH_TRUSTED TRUE needs a wrapping
 *      key with CKA_TRUSTED TRUE (CKR_KEY_NOT_WRAPPABLE, §4.10 table 37).
 *      Strict policy (cs_usage.h; docs/CONTRACTS.md "Usage separation";
 *      under `spec` none of these token rules apply):
 *      against the wrap/decrypt attack a CKA_SENSITIVE key is
 *      wrapped only by a CKA_TRUSTED wrapping key (any application can make
 *      a public key object whose private half it holds; CKA_TRUSTED is the
 *      SO's word that it does not), and not when a visible private key with
 *      the same modulus lacks CKA_UNWRAP TRUE (CKR_KEY_NOT_WRAPPABLE): a key
 *      with CKA_UNWRAP TRUE never decrypts (cs_object_use_inlock) and never
 *      gains a data role (object.c and the broker's keyattrs.c change
 *      rules); and a key is never wrapped under a weaker one
 *      (CKR_WRAPPING_KEY_SIZE_RANGE, s_weaker).
 *    unwrapping: the unwrapping key is a visible RSA private key
 *      (CKR_UNWRAPPING_KEY_HANDLE_INVALID,
 *      CKR_UNWRAPPING_KEY_TYPE_INCONSISTENT) with CKA_UNWRAP TRUE and —
 *      strict — no data role (CKR_KEY_FUNCTION_NOT_PERMITTED).  Strict, a
 *      secret unwrapping key takes no CBC-PAD mechanism
 *      (CKR_MECHANISM_INVALID: a padding oracle, cs_usage_unwrap_oracle).
 *      Strict, against the wrap/unwrap attack (a sensitive key wrapped,
 *      then unwrapped as a readable one): the new key is always
 *      CKA_SENSITIVE TRUE (FALSE in the template: CKR_TEMPLATE_INCONSISTENT)
 *      and never CKA_TRUSTED (TRUE: CKR_ATTRIBUTE_READ_ONLY; whoever made
 *      the ciphertext may know its value).
 *    AES key wrap: the same rules with an AES secret key in place of the
 *      RSA public (private) key; token policy, because a symmetric key is
 *      both halves (the wrap/decrypt and encrypt/unwrap attacks with one
 *      key): under strict an AES key with CKA_WRAP or CKA_UNWRAP neither
 *      encrypts nor decrypts data and never gains CKA_ENCRYPT/CKA_DECRYPT
 *      (CKR_KEY_FUNCTION_NOT_PERMITTED).  The broker checks the same of a
 *      token key (broker/keys/secretkeys.h secretkeys_usable).
 *  Both need a CKU_USER login (CKR_USER_NOT_LOGGED_IN), as the secret-key
 *  operations do.  CKM_RSA_PKCS is not offered for wrapping: a PKCS#1 v1.5
 *  C_UnwrapKey is a padding oracle (Bardou et al., CRYPTO 2012).
 */
#include <stdlib.h>
#include <string.h>
#include <openssl/crypto.h>
#include "cs_keyfacts.h"
#include "cs_secmem.h"
#include "keyder.h"
#include "keymgmt.h"
#include "keyop.h"
#include "log.h"
#include "mechanism.h"
#include "guard.h"
#include "login.h"
#include "runner.h"
#include "object.h"
#include "secret.h"
#include "session.h"

/*  The mechanism of a wrap (want CKF_WRAP) or unwrap (CKF_UNWRAP) with the
 *  RSA `key`: *entry_p and its checked parameters.  CKR_MECHANISM_INVALID,
 *  CKR_MECHANISM_PARAM_INVALID, `type_rv` for a key the mechanism does not
 *  take.  */
static CK_RV
s_mechanism (const CK_MECHANISM *mech, CK_FLAGS want, const cs_key_t *key, CK_RV type_rv,
             const cs_mech_row_t **entry_p, cs_mech_params_t *params)
{
    const cs_mech_row_t *entry = cs_mech_row (mech->mechanism);
    CK_RV rv;
    if (!entry || !(entry->flags & want))
        return CKR_MECHANISM_INVALID;
    rv = cs_mech_check (entry, mech, key->key_type, key->modulus_len, params);
    if (rv == CKR_KEY_TYPE_INCONSISTENT)
        rv = type_rv;
    *entry_p = entry;
    return rv;
}

/*  Under the mutex: true when a visible private key has the modulus of the
 *  RSA public `key` and CKA_UNWRAP FALSE (it could decrypt, now or after a
 *  C_SetAttributeValue, what `key` wraps).  */
static bool
s_private_half_decrypts_inlock (const cs_key_t *key)
{
    CK_OBJECT_CLASS klass = CKO_PRIVATE_KEY;
    CK_ATTRIBUTE tmpl [] = {
        { CKA_CLASS, &klass, sizeof klass }, { CKA_MODULUS, key->modulus, key->modulus_len },
    };
    CK_OBJECT_HANDLE *handles = NULL;
    size_t count = 0;
    bool decrypts = false;
    if (cs_object_find_inlock (tmpl, 2, &handles, &count) != CKR_OK)
        return true;                    /* out of memory: refuse */
    for (size_t i = 0; i < count && !decrypts; i++)
        decrypts = !cs_object_flag_inlock (handles [i], CKA_UNWRAP, false);
    free (handles);
    return decrypts;
}

/*  The security strength in bits of a key (cs_key_strength, NIST SP 800-57
 *  Part 1 Rev. 5 §5.6.1.1 table 2).  */
static unsigned
s_strength (const cs_key_t *key)
{
    size_t bits = key->key_type == CKK_RSA ? key->modulus_len * 8
                : key->key_type == CKK_EC || key->key_type == CKK_EC_EDWARDS
                  || key->key_type == CKK_EC_MONTGOMERY ? key->field_len * 8
                : key->secret_len * 8;
    return cs_key_strength (key->key_type, bits);
}

/*  Strict: true when `wkey` would wrap `key` under a weaker key (the
 *  Tookan "weaker key" attack: recover the wrapping key by brute force,
 *  then the wrapped one).  A secret wrapping key must be at least as
 *  strong as the key it wraps; an RSA one at least 2048 bits (SP 800-131A
 *  Rev. 2: smaller RSA keys are disallowed for key transport; RSA-2048
 *  gives 112 bits, docs/CONTRACTS.md "Usage separation").  */
static bool
s_weaker (const cs_key_t *wkey, const cs_key_t *key)
{
    if (wkey->key_type == CKK_RSA)
        return s_strength (wkey) < 112;
    return s_strength (wkey) < s_strength (key);
}

/*  True for a wrapping or unwrapping key that is an AES or DES3 secret key
 *  (AES key wrap, RFC 3394/5649, or AES/DES3 CBC-PAD: one SymJob) rather
 *  than an RSA key (OAEP).  */
static bool
s_aes (CK_OBJECT_CLASS klass, const cs_key_t *key)
{
    return klass == CKO_SECRET_KEY && (key->key_type == CKK_AES || key->key_type == CKK_DES3)
        && (key->secret || key->ref);
}

/*  Under the mutex: the rules of C_WrapKey on the two objects (file head).
 *  On CKR_OK, *wrapping_p and *key_p are new references.  */
static CK_RV
s_wrap_check_inlock (CK_OBJECT_HANDLE wrapping, CK_OBJECT_HANDLE handle, cs_key_t **wrapping_p, cs_key_t **key_p)
{
    CK_OBJECT_CLASS klass = 0, key_class = 0;
    cs_key_t *wkey = NULL, *key = NULL;
    bool trusted, aes, strict = cs_object_usage () == CS_USAGE_STRICT;
    CK_RV rv = CKR_OK;
    if (!cs_login_user_logged_in_inlock ())
        return CKR_USER_NOT_LOGGED_IN;
    if (!(wkey = cs_object_key_inlock (wrapping, &klass)))
        return CKR_WRAPPING_KEY_HANDLE_INVALID;
    trusted = cs_object_flag_inlock (wrapping, CKA_TRUSTED, false);
    aes = s_aes (klass, wkey);
    if (!aes && (klass != CKO_PUBLIC_KEY || wkey->key_type != CKK_RSA || !wkey->modulus_len))
        rv = CKR_WRAPPING_KEY_TYPE_INCONSISTENT;
    else
    if (!cs_object_flag_inlock (wrapping, CKA_WRAP, false))
        rv = CKR_KEY_FUNCTION_NOT_PERMITTED;
    else
    if (aes && cs_object_usage_check_inlock (wrapping, CS_USE_WRAP) != CKR_OK)
        rv = CKR_KEY_FUNCTION_NOT_PERMITTED;    /* strict: a wrapping key never decrypts (cs_usage.h) */
    else
    if (!(key = cs_object_key_inlock (handle, &key_class)))
        rv = CKR_KEY_HANDLE_INVALID;
    else
    if (!(key_class == CKO_SECRET_KEY && key->secret) && !(aes && key_class == CKO_PRIVATE_KEY && key->pkcs8))
        rv = CKR_KEY_NOT_WRAPPABLE;     /* a token key's value stays on the broker; PKCS#8 only
                                           under a secret key (too long for OAEP) */
    else
    if (!cs_object_flag_inlock (handle, CKA_EXTRACTABLE, false))
        rv = CKR_KEY_UNEXTRACTABLE;
    else
    if (cs_object_flag_inlock (handle, CKA_WRAP_WITH_TRUSTED, false) && !trusted)
        rv = CKR_KEY_NOT_WRAPPABLE;
    else
    if (strict && cs_object_flag_inlock (handle, CKA_SENSITIVE, true)
    &&  (!trusted || (!aes && s_private_half_decrypts_inlock (wkey))))
        rv = CKR_KEY_NOT_WRAPPABLE;     /* strict: the wrap/decrypt attack */
    else
    if (strict && s_weaker (wkey, key))
        rv = CKR_WRAPPING_KEY_SIZE_RANGE;   /* strict: a key under a weaker key */
    if (rv == CKR_OK) {
        *wrapping_p = wkey;
        *key_p = key;
        return CKR_OK;
    }
    cs_key_unref (&wkey);
    cs_key_unref (&key);
    return rv;
}

/*  The table's row of a secret-key C_WrapKey (want CKF_WRAP) or
 *  C_UnwrapKey (CKF_UNWRAP) with `key`: CKR_MECHANISM_INVALID, or `type_rv`
 *  for a mechanism that does not take the key's type (RSA-OAEP; DES3-CBC-PAD
 *  with an AES key ...).  */
static CK_RV
s_aes_mechanism (const CK_MECHANISM *mech, CK_FLAGS want, const cs_key_t *key, CK_RV type_rv)
{
    const cs_mech_row_t *row = cs_mech_row (mech->mechanism);
    if (!row || !(row->flags & want))
        return CKR_MECHANISM_INVALID;
    return row->key_type == key->key_type ? CKR_OK : type_rv;
}

/*  What C_WrapKey wraps of `key`: a secret key's CKA_VALUE, or a session
 *  private key's PKCS#8 PrivateKeyInfo DER (RFC 5208; PKCS#11 2.40
 *  §5.18: private keys are wrapped as PKCS#8); *len_p its bytes.  */
static const uint8_t *
s_wrapped_value (const cs_key_t *key, size_t *len_p)
{
    *len_p = key->secret ? key->secret_len : key->pkcs8_len;
    return key->secret ? key->secret : key->pkcs8;
}

/*  C_WrapKey with an AES or DES3 wrapping key: the length rules of §5.2
 *  (the table's output size), then one SymJob encrypting the key's value
 *  (s_wrapped_value).  */
static CK_RV
s_aes_wrap (cs_key_t *wkey, const CK_MECHANISM *mech, const cs_key_t *key, CK_BYTE_PTR out, CK_ULONG_PTR out_len_p)
{
    const cs_mech_row_t *row = cs_mech_row (mech->mechanism);
    uint8_t *wrapped = NULL;
    size_t len = 0, cap = 0, want, value_len;
    const uint8_t *value = s_wrapped_value (key, &value_len);
    CK_RV rv = s_aes_mechanism (mech, CKF_WRAP, wkey, CKR_WRAPPING_KEY_TYPE_INCONSISTENT);
    if (rv != CKR_OK)
        return rv;
    if (cs_mech_input_check (row, true, value_len, 0, 0) != CKR_OK)
        return CKR_KEY_SIZE_RANGE;      /* RFC 3394: a multiple of 8 bytes */
    want = cs_mech_sym_output_len (row, true, value_len, 0);
    if (!out || *out_len_p < want) {
        *out_len_p = want;
        return out ? CKR_BUFFER_TOO_SMALL : CKR_OK;
    }
    rv = cs_secret_wrap_job (wkey, mech, true, value, value_len, &wrapped, &len, &cap);
    if (rv == CKR_OK && len > *out_len_p) {
        cs_log_error ("the broker returned a malformed key-wrap result");
        rv = CKR_DEVICE_ERROR;
    }
    if (rv == CKR_OK) {
        memcpy (out, wrapped, len);
        *out_len_p = len;
    }
    cs_secmem_free (wrapped, cap);
    return rv;
}

/*  PKCS#11 2.40 §5.18 C_WrapKey with the length rules of §5.2: pWrappedKey
 *  NULL answers k (the modulus length; AES key wrap: the RFC's output
 *  size) in *pulWrappedKeyLen; a smaller buffer gives CKR_BUFFER_TOO_SMALL
 *  with that size.  A key too long for OAEP with that hash (more than
 *  k - 2hLen - 2 bytes), or one CKM_AES_KEY_WRAP does not take (not a
 *  multiple of 8 bytes): CKR_KEY_SIZE_RANGE.  AES: the job's errors
 *  (cs_secret_wrap_job).
 *  Also CKR_ARGUMENTS_BAD, CKR_SESSION_HANDLE_INVALID, the rules of the file
 *  head, the mechanism's errors (s_mechanism).  */
CK_RV
C_WrapKey (CK_SESSION_HANDLE handle, CK_MECHANISM_PTR mech, CK_OBJECT_HANDLE wrapping, CK_OBJECT_HANDLE key_handle,
           CK_BYTE_PTR out, CK_ULONG_PTR out_len_p)
{
    cs_session_t *session;
    cs_key_t *wkey = NULL, *key = NULL;
    cs_mech_params_t params = { 0 };
    const cs_mech_row_t *entry = NULL;
    CK_RV rv;
    return_val_if_fail (mech && out_len_p, CKR_ARGUMENTS_BAD);
    CS_BEGIN_SESSION_CALL (rv, handle, &session);
    rv = s_wrap_check_inlock (wrapping, key_handle, &wkey, &key);
    CS_END_CALL ();
    if (rv == CKR_OK && !wkey->modulus_len) {   /* an AES wrapping key */
        rv = s_aes_wrap (wkey, mech, key, out, out_len_p);
        goto out;
    }
    if (rv == CKR_OK)
        rv = s_mechanism (mech, CKF_WRAP, wkey, CKR_WRAPPING_KEY_TYPE_INCONSISTENT, &entry, &params);
    if (rv == CKR_OK) {
        const EVP_MD *md = cs_mech_md (params.hash);
        if (cs_mech_input_check (entry, true, key->secret_len, wkey->modulus_len,
                                 md ? (size_t) EVP_MD_get_size (md) : 0) != CKR_OK)
            rv = CKR_KEY_SIZE_RANGE;
    }
    if (rv == CKR_OK && (!out || *out_len_p < wkey->modulus_len)) {
        rv = out ? CKR_BUFFER_TOO_SMALL : CKR_OK;
        *out_len_p = wkey->modulus_len;
    }
    else
    if (rv == CKR_OK)
        rv = cs_keyop_public_encrypt (wkey, entry, &params, key->secret, key->secret_len, out, out_len_p);
out:
    cs_mech_params_clear (&params);
    cs_key_unref (&wkey);
    cs_key_unref (&key);
    return rv;
}

/*  ---- C_UnwrapKey ---------------------------------------------------------- */

/*  The new key's template (before the job): CKA_KEY_TYPE given
 *  (CKR_TEMPLATE_INCOMPLETE), a secret-key class or a private key of
 *  CKK_RSA, CKK_EC, CKK_EC_EDWARDS (*class_p; CKR_TEMPLATE_INCONSISTENT),
 *  no value and not CKA_SENSITIVE FALSE (CKR_TEMPLATE_INCONSISTENT), none
 *  of the attributes only the token sets nor CKA_TRUSTED TRUE
 *  (CKR_ATTRIBUTE_READ_ONLY).  */
static CK_RV
s_template_check (const CK_ATTRIBUTE *tmpl, CK_ULONG count, CK_OBJECT_CLASS *class_p, CK_KEY_TYPE *type_p)
{
    CK_ULONG klass = CKO_SECRET_KEY;
    for (CK_ULONG i = 0; i < count; i++)
        if (tmpl [i].type == CKA_LOCAL || tmpl [i].type == CKA_ALWAYS_SENSITIVE
        ||  tmpl [i].type == CKA_NEVER_EXTRACTABLE || tmpl [i].type == CKA_KEY_GEN_MECHANISM)
            return CKR_ATTRIBUTE_READ_ONLY;
    if (cs_template_bool (tmpl, count, CKA_TRUSTED, false))
        return CKR_ATTRIBUTE_READ_ONLY;
    if (!cs_template_ulong (tmpl, count, CKA_KEY_TYPE, type_p))
        return CKR_TEMPLATE_INCOMPLETE;
    if (cs_template_find (tmpl, count, CKA_VALUE)
    ||  (cs_object_usage () == CS_USAGE_STRICT && !cs_template_bool (tmpl, count, CKA_SENSITIVE, true))
    ||  (cs_template_find (tmpl, count, CKA_CLASS) && (!cs_template_ulong (tmpl, count, CKA_CLASS, &klass)
                                                      || (klass != CKO_SECRET_KEY && klass != CKO_PRIVATE_KEY))))
        return CKR_TEMPLATE_INCONSISTENT;
    *class_p = klass;
    if (klass == CKO_PRIVATE_KEY)
        return *type_p == CKK_RSA || *type_p == CKK_EC || *type_p == CKK_EC_EDWARDS ? CKR_OK
                                                                                   : CKR_TEMPLATE_INCONSISTENT;
    if (!cs_mech_secret_key_type (*type_p))
        return CKR_TEMPLATE_INCONSISTENT;
    return CKR_OK;
}

/*  Under the mutex: the rules of C_UnwrapKey on the unwrapping key (file
 *  head).  On CKR_OK *key_p is a new reference.  */
static CK_RV
s_unwrap_check_inlock (CK_OBJECT_HANDLE unwrapping, cs_key_t **key_p)
{
    CK_OBJECT_CLASS klass = 0;
    cs_key_t *key;
    CK_RV rv = CKR_OK;
    if (!cs_login_user_logged_in_inlock ())
        return CKR_USER_NOT_LOGGED_IN;
    if (!(key = cs_object_key_inlock (unwrapping, &klass)))
        return CKR_UNWRAPPING_KEY_HANDLE_INVALID;
    if (!s_aes (klass, key) && (klass != CKO_PRIVATE_KEY || key->key_type != CKK_RSA || !key->modulus_len))
        rv = CKR_UNWRAPPING_KEY_TYPE_INCONSISTENT;
    else
    if (cs_object_usage_check_inlock (unwrapping, CS_USE_UNWRAP) != CKR_OK)
        rv = CKR_KEY_FUNCTION_NOT_PERMITTED;    /* CKA_UNWRAP; strict: no data role (encrypt/unwrap) */
    if (rv == CKR_OK)
        *key_p = key;
    else
        cs_key_unref (&key);
    return rv;
}

/*  One DecryptJob (as C_Decrypt): on CKR_OK *plain_p (locked memory,
 *  *cap_p bytes allocated, caller frees with cs_secmem_free) holds
 *  *plain_len_p bytes.  A ciphertext the board refuses (bad OAEP padding):
 *  CKR_WRAPPED_KEY_INVALID.  Without the mutex.  */
static CK_RV
s_unwrap_job (cs_key_t *key, const cs_mech_row_t *entry, const cs_mech_params_t *params, const uint8_t *data,
              size_t len, uint8_t **plain_p, size_t *plain_len_p, size_t *cap_p)
{
    CK_RV rv;
    Cs__Reply *reply = NULL;
    Cs__Mechanism mech = CS__MECHANISM__INIT;
    Cs__DecryptJob decrypt = CS__DECRYPT_JOB__INIT;
    Cs__Job job = CS__JOB__INIT;
    const Cs__Result *result;
    cs_keyop_job_mechanism (entry->wire, params, &mech);
    cs_keyop_job_key (key, &decrypt.key_id, &decrypt.key_pkcs8);
    decrypt.mechanism = &mech;
    decrypt.unwrap = true;              /* the broker checks CKA_UNWRAP, not CKA_DECRYPT */
    decrypt.data.data = (uint8_t *) data;
    decrypt.data.len = len;
    job.kind_case = CS__JOB__KIND_DECRYPT;
    job.decrypt = &decrypt;
    if ((rv = cs_runner_run_job (&job, true, &reply)) != CKR_OK) {
        if (rv == CKR_ENCRYPTED_DATA_INVALID || rv == CKR_ENCRYPTED_DATA_LEN_RANGE)
            rv = CKR_WRAPPED_KEY_INVALID;
        goto out;
    }
    result = reply->results [0];
    if (result->kind_case != CS__RESULT__KIND_DATA || result->data.len > key->modulus_len) {
        cs_log_error ("the broker returned a malformed decryption result");
        rv = CKR_DEVICE_ERROR;
        goto out;
    }
    *cap_p = result->data.len ? result->data.len : 1;
    if (!(*plain_p = cs_secmem_alloc (*cap_p)))
        rv = CKR_HOST_MEMORY;
    else {
        memcpy (*plain_p, result->data.data, result->data.len);
        *plain_len_p = result->data.len;
    }
    OPENSSL_cleanse (result->data.data, result->data.len);
out:
    if (reply)
        cs__reply__free_unpacked (reply, NULL);
    return rv;
}

/*  The unwrapped value against the template: CKA_VALUE_LEN, when given,
 *  equal to its length (CKR_TEMPLATE_INCONSISTENT); a length the key type
 *  takes (cs_mech_secret_len_ok: AES 16, 24 or 32 bytes; DES3 24; DES 8;
 *  generic secret 16..256), else
 *  CKR_WRAPPED_KEY_INVALID.  */
static CK_RV
s_value_check (const CK_ATTRIBUTE *tmpl, CK_ULONG count, CK_KEY_TYPE type, size_t len)
{
    CK_ULONG want = 0;
    if (cs_template_find (tmpl, count, CKA_VALUE_LEN)
    &&  (!cs_template_ulong (tmpl, count, CKA_VALUE_LEN, &want) || want != len))
        return CKR_TEMPLATE_INCONSISTENT;
    if (!cs_mech_secret_len_ok (type, len))
        return CKR_WRAPPED_KEY_INVALID;
    return CKR_OK;
}

/*  C_UnwrapKey of a private key: `der` (the unwrapped PKCS#8
 *  PrivateKeyInfo, RFC 5208) becomes a session private key object as
 *  C_CreateObject makes one (keymgmt.h) with the template's attributes
 *  and CKA_SENSITIVE TRUE unless the template says (spec) FALSE.  DER that
 *  is no key of a supported type, or of another type than CKA_KEY_TYPE:
 *  CKR_WRAPPED_KEY_INVALID; CKA_TOKEN TRUE: CKR_TEMPLATE_INCONSISTENT
 *  (token private keys come from C_CreateObject or the keystore); the
 *  attribute rules (cs_object_check_create); CKR_SESSION_HANDLE_INVALID,
 *  CKR_HOST_MEMORY.  */
static CK_RV
s_private_create (CK_SESSION_HANDLE handle, const CK_ATTRIBUTE *tmpl, CK_ULONG count, CK_KEY_TYPE type,
                  const uint8_t *der, size_t len, CK_OBJECT_HANDLE_PTR key_p)
{
    static const CK_BBOOL yes = CK_TRUE;
    cs_key_t *key = NULL;
    cs_attrs_t attrs = { 0 };
    CK_ATTRIBUTE *full = calloc (count + 1, sizeof *full);
    CK_ULONG n = count;
    CK_RV rv = full ? CKR_OK : CKR_HOST_MEMORY;
    if (rv == CKR_OK && cs_template_bool (tmpl, count, CKA_TOKEN, false))
        rv = CKR_TEMPLATE_INCONSISTENT;
    if (rv == CKR_OK) {
        if (count)
            memcpy (full, tmpl, count * sizeof *full);
        if (!cs_template_find (tmpl, count, CKA_SENSITIVE))
            full [n++] = (CK_ATTRIBUTE) { CKA_SENSITIVE, (void *) &yes, sizeof yes };
        rv = cs_object_check_create (CKO_PRIVATE_KEY, full, n, false);
    }
    if (rv == CKR_OK && (!(key = cs_keyder_key_from_pkcs8 (der, len)) || key->key_type != type))
        rv = CKR_WRAPPED_KEY_INVALID;
    if (rv == CKR_OK && cs_keymgmt_session_attrs (CKO_PRIVATE_KEY, full, n, CK_UNAVAILABLE_INFORMATION, &attrs))
        rv = CKR_HOST_MEMORY;
    if (rv == CKR_OK) {
        cs_lock ();
        rv = cs_session_lookup_inlock (handle) ? cs_object_add_session_inlock (handle, CKO_PRIVATE_KEY, key, &attrs,
                                                                               key_p)
                                               : CKR_SESSION_HANDLE_INVALID;
        cs_unlock ();
    }
    cs_attrs_clear (&attrs);
    cs_key_unref (&key);
    free (full);
    return rv;
}

/*  PKCS#11 2.40 §5.18 C_UnwrapKey: a secret key object made as
 *  C_CreateObject makes one (secret.c: a session object, or with CKA_TOKEN
 *  TRUE a token key the broker seals, secret_token.h) with the template's
 *  attributes, CKA_LOCAL, CKA_ALWAYS_SENSITIVE and CKA_NEVER_EXTRACTABLE
 *  FALSE (§4.10 table 37 footnotes), CKA_SENSITIVE TRUE, CKA_EXTRACTABLE as
 *  the template says (default: TRUE for a session key, FALSE for a token
 *  key).
 *  A wrapped key of other than k bytes (AES key wrap: a length the RFC
 *  refuses): CKR_WRAPPED_KEY_LEN_RANGE; an AES integrity failure:
 *  CKR_WRAPPED_KEY_INVALID.  Also
 *  CKR_ARGUMENTS_BAD, CKR_SESSION_HANDLE_INVALID, the rules of the file head,
 *  the template's (s_template_check, s_value_check), the mechanism's
 *  (s_mechanism), the job's (CKR_DEVICE_ERROR ...), CKR_HOST_MEMORY.  */
CK_RV
C_UnwrapKey (CK_SESSION_HANDLE handle, CK_MECHANISM_PTR mech, CK_OBJECT_HANDLE unwrapping, CK_BYTE_PTR wrapped,
             CK_ULONG wrapped_len, CK_ATTRIBUTE_PTR tmpl, CK_ULONG count, CK_OBJECT_HANDLE_PTR key_p)
{
    cs_session_t *session;
    cs_key_t *ukey = NULL;
    cs_mech_params_t params = { 0 };
    const cs_mech_row_t *entry = NULL;
    CK_ATTRIBUTE *full = NULL;
    CK_KEY_TYPE type = 0;
    CK_OBJECT_CLASS klass = CKO_SECRET_KEY;
    uint8_t *plain = NULL;
    size_t plain_len = 0, cap = 0;
    CK_RV rv;
    return_val_if_fail (mech && wrapped && key_p && (tmpl || !count), CKR_ARGUMENTS_BAD);
    CS_BEGIN_SESSION_CALL (rv, handle, &session);
    rv = s_unwrap_check_inlock (unwrapping, &ukey);
    CS_END_CALL ();
    if (rv == CKR_OK && !ukey->modulus_len)    /* an AES unwrapping key; strict: no CBC-PAD (a padding oracle) */
        rv = cs_usage_unwrap_oracle (cs_object_usage (), mech->mechanism) ? CKR_MECHANISM_INVALID
           : s_aes_mechanism (mech, CKF_UNWRAP, ukey, CKR_UNWRAPPING_KEY_TYPE_INCONSISTENT);
    else
    if (rv == CKR_OK)
        rv = s_mechanism (mech, CKF_UNWRAP, ukey, CKR_UNWRAPPING_KEY_TYPE_INCONSISTENT, &entry, &params);
    if (rv == CKR_OK)
        rv = s_template_check (tmpl, count, &klass, &type);
    if (rv == CKR_OK && !ukey->modulus_len)
        rv = cs_secret_wrap_job (ukey, mech, false, wrapped, wrapped_len, &plain, &plain_len, &cap);
    else
    if (rv == CKR_OK && wrapped_len != ukey->modulus_len)
        rv = CKR_WRAPPED_KEY_LEN_RANGE;
    else
    if (rv == CKR_OK)
        rv = s_unwrap_job (ukey, entry, &params, wrapped, wrapped_len, &plain, &plain_len, &cap);
    if (rv == CKR_OK && klass == CKO_PRIVATE_KEY) {
        rv = s_private_create (handle, tmpl, count, type, plain, plain_len, key_p);
        goto out;
    }
    if (rv == CKR_OK)
        rv = s_value_check (tmpl, count, type, plain_len);
    if (rv == CKR_OK && !(full = calloc (count + 2, sizeof *full)))
        rv = CKR_HOST_MEMORY;
    if (rv == CKR_OK) {
        /*  The caller's template with the value (borrowed from locked
            memory; the key object copies it into locked memory) and
            CKA_SENSITIVE TRUE.  */
        static const CK_BBOOL yes = CK_TRUE;
        CK_ULONG n = count;
        if (count)
            memcpy (full, tmpl, count * sizeof *full);
        full [n++] = (CK_ATTRIBUTE) { CKA_VALUE, plain, plain_len };
        if (!cs_template_find (tmpl, count, CKA_SENSITIVE))
            full [n++] = (CK_ATTRIBUTE) { CKA_SENSITIVE, (void *) &yes, sizeof yes };
        rv = cs_secret_create (handle, full, n, key_p);
    }
out:
    free (full);
    cs_secmem_free (plain, cap);
    cs_mech_params_clear (&params);
    cs_key_unref (&ukey);
    return rv;
}
