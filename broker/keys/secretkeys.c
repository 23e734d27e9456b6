/*  secretkeys.c — token secret keys: their rows, made or imported
 *  (secretkeys.h).  */
#include <stdlib.h>
#include <string.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>
#include "cs_driver.h"
#include "key_info.h"
#include "keyjobs.h"
#include "keyattrs.h"
#include "cs_attr_rules.h"
#include "secretkeys.h"

bool
secretkeys_size_ok (uint64_t key_type, size_t len)
{
    if (key_type == CKK_AES)
        return len == 16 || len == 24 || len == 32;
    return key_type == CKK_GENERIC_SECRET && len >= 16 && len <= 256;
}

/*  Appends a flag or number attribute to the private side (no duplicates
 *  here: each type is added once).  Returns 0 or -1.  */
static int
s_add (Cs__KeyInfo *info, CK_ATTRIBUTE_TYPE type, bool is_flag, uint64_t value)
{
    Cs__Attribute *attr = malloc (sizeof *attr);
    Cs__Attribute **list = realloc (info->private_attributes,
                                    (info->n_private_attributes + 1) * sizeof *list);
    if (list)
        info->private_attributes = list;
    if (!attr || !list) {
        free (attr);
        return -1;
    }
    cs__attribute__init (attr);
    attr->type = type;
    attr->value_case = is_flag ? CS__ATTRIBUTE__VALUE_FLAG : CS__ATTRIBUTE__VALUE_NUMBER;
    if (is_flag)
        attr->flag = value != 0;
    else
        attr->number = value;
    list [info->n_private_attributes++] = attr;
    return 0;
}

/*  A fresh description with the defaults of secretkeys.h; gen_mech is
 *  CK_UNAVAILABLE_INFORMATION for an import.  NULL when out of memory.  */
static Cs__KeyInfo *
s_info_new (uint64_t key_type, size_t len, CK_MECHANISM_TYPE gen_mech)
{
    char ref [36];
    bool aes = key_type == CKK_AES, local = gen_mech != CK_UNAVAILABLE_INFORMATION;
    Cs__KeyInfo *info = malloc (sizeof *info);
    if (!info)
        return NULL;
    cs__key_info__init (info);
    keystore_ref_new (ref);
    info->ref = strdup (ref);
    info->label = strdup ("");
    info->home = strdup ("keystore");
    info->key_type = key_type;
    info->bits = (uint32_t) (len * 8);
    info->has_private = true;
    if (!info->ref || !info->label || !info->home
    ||  s_add (info, CKA_PRIVATE, true, 1) || s_add (info, CKA_SENSITIVE, true, 1)
    ||  s_add (info, CKA_EXTRACTABLE, true, 0)
    ||  s_add (info, CKA_ENCRYPT, true, aes) || s_add (info, CKA_DECRYPT, true, aes)
    ||  s_add (info, CKA_SIGN, true, !aes) || s_add (info, CKA_VERIFY, true, !aes)
    ||  s_add (info, CKA_WRAP, true, 0) || s_add (info, CKA_UNWRAP, true, 0)
    ||  s_add (info, CKA_DERIVE, true, 0) || s_add (info, CKA_LOCAL, true, local)
    ||  s_add (info, CKA_KEY_GEN_MECHANISM, false, gen_mech)) {
        cs__key_info__free_unpacked (info, NULL);
        return NULL;
    }
    return info;
}

/*  Describes value (len bytes) with the template and stores it.  */
static CK_RV
s_store (keystore_t *ks, const char *tenant, uint64_t key_type, const uint8_t *value, size_t len,
         CK_MECHANISM_TYPE gen_mech, Cs__Attribute **tmpl, size_t n, Cs__KeyInfo **info_p)
{
    Cs__KeyInfo *info = s_info_new (key_type, len, gen_mech);
    CK_RV rv = info ? keyjobs_secret_apply (info, tmpl, n, gen_mech != CK_UNAVAILABLE_INFORMATION)
                    : CKR_HOST_MEMORY;
    if (rv == CKR_OK && keystore_key_put (ks, tenant, info, value, len))
        rv = CKR_DEVICE_ERROR;
    if (rv != CKR_OK && info) {
        cs__key_info__free_unpacked (info, NULL);
        info = NULL;
    }
    *info_p = info;
    return rv;
}

CK_RV
secretkeys_generate (keystore_t *ks, const char *tenant, const Cs__GenerateKeyJob *job, Cs__KeyInfo **info_p)
{
    uint64_t key_type = job->mechanism == CKM_AES_KEY_GEN ? CKK_AES
                      : job->mechanism == CKM_GENERIC_SECRET_KEY_GEN ? CKK_GENERIC_SECRET : CKK_VENDOR_DEFINED;
    size_t len = job->value_len;
    *info_p = NULL;
    if (key_type == CKK_VENDOR_DEFINED)
        return CKR_MECHANISM_INVALID;
    if (!secretkeys_size_ok (key_type, len))
        return CKR_KEY_SIZE_RANGE;
    uint8_t *value = malloc (len);
    if (!value)
        return CKR_HOST_MEMORY;
    CK_RV rv = RAND_priv_bytes (value, (int) len) == 1
             ? s_store (ks, tenant, key_type, value, len, job->mechanism, job->template_, job->n_template_, info_p)
             : CKR_DEVICE_ERROR;
    OPENSSL_cleanse (value, len);
    free (value);
    return rv;
}

CK_RV
secretkeys_import (keystore_t *ks, const char *tenant, const Cs__ImportKeyJob *job, Cs__KeyInfo **info_p)
{
    uint64_t key_type = CKK_VENDOR_DEFINED;
    *info_p = NULL;
    for (size_t i = 0; i < job->n_template_; i++)
        if (job->template_ [i]->type == CKA_KEY_TYPE && job->template_ [i]->value_case == CS__ATTRIBUTE__VALUE_NUMBER)
            key_type = job->template_ [i]->number;
    if (key_type == CKK_VENDOR_DEFINED)
        return CKR_TEMPLATE_INCOMPLETE;
    if (!secretkeys_type (key_type) || !secretkeys_size_ok (key_type, job->secret_value.len))
        return CKR_ATTRIBUTE_VALUE_INVALID;
    return s_store (ks, tenant, key_type, job->secret_value.data, job->secret_value.len, CK_UNAVAILABLE_INFORMATION,
                    job->template_, job->n_template_, info_p);
}

CK_RV
secretkeys_usable (const Cs__KeyInfo *info, cs_usage_policy_t policy, const cs_mech_row_t *row, int operation,
                   bool key_wrap)
{
    if (!secretkeys_type (info->key_type) || !info->has_private || info->key_type != row->key_type)
        return CKR_KEY_TYPE_INCONSISTENT;
    cs_usage_use_t use = key_wrap ? (operation == CS_SYM_ENCRYPT ? CS_USE_WRAP : CS_USE_UNWRAP)
                       : operation == CS_SYM_ENCRYPT ? CS_USE_ENCRYPT
                       : operation == CS_SYM_DECRYPT ? CS_USE_DECRYPT : CS_USE_SIGN;
    CK_FLAGS flag = key_wrap ? (operation == CS_SYM_ENCRYPT ? CKF_WRAP : CKF_UNWRAP)
                  : operation == CS_SYM_ENCRYPT ? CKF_ENCRYPT : operation == CS_SYM_DECRYPT ? CKF_DECRYPT : CKF_SIGN;
    if ((key_wrap && operation != CS_SYM_ENCRYPT && operation != CS_SYM_DECRYPT)
    ||  (!key_wrap && operation != CS_SYM_ENCRYPT && operation != CS_SYM_DECRYPT && operation != CS_SYM_SIGN))
        return CKR_KEY_FUNCTION_NOT_PERMITTED;
    CK_RV rv = cs_usage_job_check (policy, keyattrs_roles (info), use);
    if (rv != CKR_OK)
        return rv;
    if (use == CS_USE_UNWRAP && cs_usage_unwrap_oracle (policy, row->type))
        return CKR_MECHANISM_INVALID;       /* CBC-PAD unwrap: a padding oracle (cs_usage.h) */
    const Cs__Attribute *mechs = key_info_attribute (info, true, CKA_ALLOWED_MECHANISMS);
    if (mechs && (mechs->value_case != CS__ATTRIBUTE__VALUE_BYTES
                  || !cs_attr_wire_mech_allowed (mechs->bytes.data, mechs->bytes.len, row->type, flag)))
        return CKR_MECHANISM_INVALID;       /* PKCS#11 2.40 §4.4 table 25: whatever the client sent */
    return CKR_OK;
}
