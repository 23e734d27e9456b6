/*  secret_key.c — secret key objects (secret.h): C_CreateObject of a
 *  CKO_SECRET_KEY (cs_secret_create) and C_GenerateKey, as session
 *  keys in locked memory or as token keys the broker holds (secret_token.h).
 *  Split from secret.c, which keeps the symmetric operations.
 */
#include <stdlib.h>
#include <string.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>
#include "attrs.h"
#include "cs_mech.h"
#include "cs_secmem.h"
#include "keyop.h"
#include "log.h"
#include "guard.h"
#include "login.h"
#include "object.h"
#include "secret.h"
#include "secret_token.h"
#include "session.h"

/*  ---- objects -------------------------------------------------------- */

/*  Attributes the template may not store: computed or given separately.  */
static bool
s_not_stored (CK_ATTRIBUTE_TYPE type)
{
    return type == CKA_CLASS || type == CKA_KEY_TYPE || type == CKA_VALUE_LEN || type == CKA_VALUE
        || type == CKA_TOKEN || type == CKA_LOCAL || type == CKA_KEY_GEN_MECHANISM
        || type == CKA_ALWAYS_SENSITIVE || type == CKA_NEVER_EXTRACTABLE;
}

/*  The class, key type and size rules of a secret-key template: *type_p
 *  the key type (from the template, else `dflt`), checked against
 *  `len` bytes.  */
static CK_RV
s_check (const CK_ATTRIBUTE *tmpl, CK_ULONG count, CK_KEY_TYPE dflt, size_t len, CK_KEY_TYPE *type_p)
{
    CK_ULONG klass = CKO_SECRET_KEY, type = dflt;
    CK_RV rv = cs_object_check_create (CKO_SECRET_KEY, tmpl, count, cs_login_so_logged_in ());
    if (rv != CKR_OK)
        return rv;          /* the attribute rules (cs_attr_rules.h), the usage rules (cs_usage.h) */
    if ((cs_template_find (tmpl, count, CKA_CLASS) && (!cs_template_ulong (tmpl, count, CKA_CLASS, &klass)
                                                      || klass != CKO_SECRET_KEY))
    ||  (cs_template_find (tmpl, count, CKA_KEY_TYPE) && !cs_template_ulong (tmpl, count, CKA_KEY_TYPE, &type)))
        return CKR_TEMPLATE_INCONSISTENT;
    if (dflt != (CK_KEY_TYPE) -1 && type != dflt)
        return CKR_TEMPLATE_INCONSISTENT;
    if (!cs_mech_secret_key_type (type))
        return CKR_ATTRIBUTE_VALUE_INVALID;
    if ((type == CKK_DES3 || type == CKK_DES) && cs_template_bool (tmpl, count, CKA_TOKEN, false))
        return CKR_ATTRIBUTE_VALUE_INVALID;     /* token DES/DES3 keys: not yet (the broker holds AES
                                                   and generic secrets: secret_token.h) */
    if (!cs_mech_secret_len_ok (type, len))
        return CKR_ATTRIBUTE_VALUE_INVALID;
    *type_p = type;
    return CKR_OK;
}

/*  Adds the session object: stored attributes of the template, the usage
 *  defaults (TRUE for what the key type does, as SoftHSM), and the
 *  computed ones.  CKA_PRIVATE (default TRUE) needs a CKU_USER login.  */
static CK_RV
s_add (CK_SESSION_HANDLE handle, const CK_ATTRIBUTE *tmpl, CK_ULONG count, CK_KEY_TYPE type, const uint8_t *value,
       size_t len, CK_MECHANISM_TYPE gen_mech, CK_OBJECT_HANDLE_PTR object_p)
{
    CK_RV rv = CKR_HOST_MEMORY;
    cs_attrs_t attrs = { 0 };
    cs_key_t *key = cs_key_new_secret (type, value, len);
    bool cipher = type != CKK_GENERIC_SECRET, mac = type != CKK_DES3 && type != CKK_DES;    /* what it does */
    bool local = gen_mech != CK_UNAVAILABLE_INFORMATION;
    bool sensitive = cs_template_bool (tmpl, count, CKA_SENSITIVE, local);
    bool extractable = cs_template_bool (tmpl, count, CKA_EXTRACTABLE, !local);
    if (key
    &&  !cs_attrs_set_bool (&attrs, CKA_ENCRYPT, cipher) && !cs_attrs_set_bool (&attrs, CKA_DECRYPT, cipher)
    &&  !cs_attrs_set_bool (&attrs, CKA_SIGN, mac) && !cs_attrs_set_bool (&attrs, CKA_VERIFY, mac)
    &&  !cs_attrs_add_template (&attrs, tmpl, count, s_not_stored)
    &&  !cs_object_usage_defaults (CKO_SECRET_KEY, tmpl, count, &attrs)     /* strict: roles stay apart */
    &&  !cs_attrs_set_bool (&attrs, CKA_SENSITIVE, sensitive)
    &&  !cs_attrs_set_bool (&attrs, CKA_EXTRACTABLE, extractable)
    &&  !cs_attrs_set_bool (&attrs, CKA_LOCAL, local)
    &&  !cs_attrs_set_ulong (&attrs, CKA_KEY_GEN_MECHANISM, gen_mech)
    &&  !cs_attrs_set_bool (&attrs, CKA_ALWAYS_SENSITIVE, local && sensitive)
    &&  !cs_attrs_set_bool (&attrs, CKA_NEVER_EXTRACTABLE, local && !extractable)) {
        cs_lock ();
        rv = !cs_session_lookup_inlock (handle) ? CKR_SESSION_HANDLE_INVALID
           : cs_template_bool (tmpl, count, CKA_PRIVATE, true) && !cs_login_user_logged_in_inlock ()
           ? CKR_USER_NOT_LOGGED_IN       /* a private object needs a login (PKCS#11 2.40 §4.4) */
           : cs_object_add_session_inlock (handle, CKO_SECRET_KEY, key, &attrs, object_p);
        cs_unlock ();
    }
    cs_attrs_clear (&attrs);
    cs_key_unref (&key);
    return rv;
}

CK_RV
cs_secret_create (CK_SESSION_HANDLE handle, const CK_ATTRIBUTE *tmpl, CK_ULONG count, CK_OBJECT_HANDLE_PTR object_p)
{
    CK_KEY_TYPE type;
    CK_RV rv;
    const CK_ATTRIBUTE *value = cs_template_find (tmpl, count, CKA_VALUE);
    if (!value || !value->pValue || !cs_template_find (tmpl, count, CKA_KEY_TYPE))
        return CKR_TEMPLATE_INCOMPLETE;
    if ((rv = s_check (tmpl, count, (CK_KEY_TYPE) -1, value->ulValueLen, &type)) != CKR_OK)
        return rv;
    if (cs_template_bool (tmpl, count, CKA_TOKEN, false))
        return cs_secret_token_import (handle, tmpl, count, object_p);      /* held by the broker */
    return s_add (handle, tmpl, count, type, value->pValue, value->ulValueLen, CK_UNAVAILABLE_INFORMATION,
                  object_p);
}

/*  DES keys: the low bit of each byte makes the byte's number of ones odd
 *  (FIPS 46-3 §"The Algorithm"; PKCS#11 2.40 curr. mech. Triple-DES key
 *  generation sets the parity bits).  */
static void
s_des_odd_parity (uint8_t *value, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        unsigned v = value [i] >> 1, ones = 0;
        for (unsigned b = v; b; b >>= 1)
            ones += b & 1;
        value [i] = (uint8_t) (v << 1 | (ones % 2 == 0));
    }
}

/*  PKCS#11 2.40 §5.14 C_GenerateKey: a session object's value from the
 *  module's RNG (OpenSSL RAND_priv_bytes), kept in locked memory; a token
 *  object's from the broker's, kept there (secret_token.h).  */
CK_RV
C_GenerateKey (CK_SESSION_HANDLE handle, CK_MECHANISM_PTR mech, CK_ATTRIBUTE_PTR tmpl, CK_ULONG count,
               CK_OBJECT_HANDLE_PTR key_p)
{
    CK_ULONG len = 0;
    CK_KEY_TYPE type;
    CK_RV rv;
    uint8_t *value;
    const cs_mech_row_t *row;
    return_val_if_fail (mech && key_p && (tmpl || !count), CKR_ARGUMENTS_BAD);
    if ((rv = cs_session_check (handle)) != CKR_OK)
        return rv;
    if (!(row = cs_mech_row (mech->mechanism)) || !(row->flags & CKF_GENERATE))
        return CKR_MECHANISM_INVALID;
    if (mech->ulParameterLen)
        return CKR_MECHANISM_PARAM_INVALID;
    if (cs_template_find (tmpl, count, CKA_VALUE))
        return CKR_TEMPLATE_INCONSISTENT;
    if (row->min_bits == row->max_bits && !cs_template_find (tmpl, count, CKA_VALUE_LEN))
        len = row->min_bits;                    /* DES3: the one size, CKA_VALUE_LEN optional */
    else
    if (!cs_template_ulong (tmpl, count, CKA_VALUE_LEN, &len))
        return CKR_TEMPLATE_INCOMPLETE;
    if ((rv = s_check (tmpl, count, row->key_type, len, &type)) != CKR_OK)
        return rv;
    if (cs_template_bool (tmpl, count, CKA_TOKEN, false))
        return cs_secret_token_generate (handle, mech->mechanism, len, tmpl, count, key_p);    /* by the broker */
    if (!(value = cs_secmem_alloc (len)))
        return CKR_HOST_MEMORY;
    if (RAND_priv_bytes (value, (int) len) != 1)
        rv = CKR_FUNCTION_FAILED;
    else {
        if (type == CKK_DES3 || type == CKK_DES)
            s_des_odd_parity (value, len);
        rv = s_add (handle, tmpl, count, type, value, len, mech->mechanism, key_p);
    }
    cs_secmem_free (value, len);
    return rv;
}
