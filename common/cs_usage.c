/*  cs_usage.c — the usage rules of keys (cs_usage.h).  */
#include <string.h>
#include "cs_usage.h"
#include "cryptoserver/pkcs11v.h"

/*  One row per use: the role it needs, its name.  */
static const struct {
    unsigned needs;
    const char *name;
} s_uses [CS_USE_COUNT] = {
    [CS_USE_SIGN]         = { CS_ROLE_SIGN, "sign" },
    [CS_USE_SIGN_RECOVER] = { CS_ROLE_SIGN_RECOVER, "sign-recover" },
    [CS_USE_DECRYPT]      = { CS_ROLE_DECRYPT, "decrypt" },
    [CS_USE_ENCRYPT]      = { CS_ROLE_ENCRYPT, "encrypt" },
    [CS_USE_WRAP]         = { CS_ROLE_WRAP, "wrap" },
    [CS_USE_UNWRAP]       = { CS_ROLE_UNWRAP, "unwrap" },
    [CS_USE_DERIVE]       = { CS_ROLE_DERIVE, "derive" },
    [CS_USE_ENCAPSULATE]  = { CS_ROLE_ENCAPSULATE, "encapsulate" },
    [CS_USE_DECAPSULATE]  = { CS_ROLE_DECAPSULATE, "decapsulate" },
};

unsigned
cs_usage_role_bit (CK_ATTRIBUTE_TYPE type)
{
    switch (type) {
        case CKA_ENCRYPT:       return CS_ROLE_ENCRYPT;
        case CKA_DECRYPT:       return CS_ROLE_DECRYPT;
        case CKA_SIGN:          return CS_ROLE_SIGN;
        case CKA_SIGN_RECOVER:  return CS_ROLE_SIGN_RECOVER;
        case CKA_WRAP:          return CS_ROLE_WRAP;
        case CKA_UNWRAP:        return CS_ROLE_UNWRAP;
        case CKA_DERIVE:        return CS_ROLE_DERIVE;
        case CKA_ENCAPSULATE:   return CS_ROLE_ENCAPSULATE;
        case CKA_DECAPSULATE:   return CS_ROLE_DECAPSULATE;
        default:                return 0;
    }
}

unsigned
cs_usage_needs (cs_usage_use_t use)
{
    return (unsigned) use < CS_USE_COUNT ? s_uses [use].needs : 0;
}

const char *
cs_usage_use_name (cs_usage_use_t use)
{
    return (unsigned) use < CS_USE_COUNT ? s_uses [use].name : "?";
}

bool
cs_usage_combined (unsigned roles)
{
    return (roles & CS_ROLE_KEYS) && (roles & CS_ROLE_DATA);
}

bool
cs_usage_unwrap_oracle (cs_usage_policy_t policy, CK_MECHANISM_TYPE mechanism)
{
    return policy == CS_USAGE_STRICT
        && (mechanism == CKM_AES_CBC_PAD || mechanism == CKM_DES3_CBC_PAD || mechanism == CKM_DES_CBC_PAD);
}

CK_RV
cs_usage_mech_check (cs_usage_policy_t policy, unsigned roles, CK_MECHANISM_TYPE mechanism)
{
    if (policy != CS_USAGE_STRICT || mechanism != CKM_RSA_X_509)
        return CKR_OK;
    return (roles & CS_ROLE_DECRYPT) && (roles & (CS_ROLE_SIGN | CS_ROLE_SIGN_RECOVER))
         ? CKR_OK : CKR_KEY_FUNCTION_NOT_PERMITTED;
}

CK_RV
cs_usage_job_check (cs_usage_policy_t policy, unsigned roles, cs_usage_use_t use)
{
    unsigned needs = cs_usage_needs (use);
    if (!needs || !(roles & needs))
        return CKR_KEY_FUNCTION_NOT_PERMITTED;
    if (policy == CS_USAGE_SPEC)
        return CKR_OK;
    if ((needs & CS_ROLE_DATA) && (roles & CS_ROLE_KEYS))
        return CKR_KEY_FUNCTION_NOT_PERMITTED;      /* wrap/decrypt, wrap/sign-raw, encrypt/unwrap */
    if ((needs & CS_ROLE_KEYS) && (roles & CS_ROLE_DATA))
        return CKR_KEY_FUNCTION_NOT_PERMITTED;
    return CKR_OK;
}

CK_RV
cs_usage_create_check (cs_usage_policy_t policy, unsigned roles)
{
    return policy == CS_USAGE_STRICT && cs_usage_combined (roles) ? CKR_TEMPLATE_INCONSISTENT : CKR_OK;
}

/*  The data uses (those on caller-chosen data) a key with `roles` may run
 *  under strict, as a bit set.  */
static unsigned
s_can_data (unsigned roles)
{
    unsigned can = 0;
    for (int use = 0; use < CS_USE_COUNT; use++)
        if ((cs_usage_needs ((cs_usage_use_t) use) & CS_ROLE_DATA)
        &&  cs_usage_job_check (CS_USAGE_STRICT, roles, (cs_usage_use_t) use) == CKR_OK)
            can |= 1u << use;
    return can;
}

CK_RV
cs_usage_change_check (cs_usage_policy_t policy, unsigned before, unsigned after)
{
    if (policy == CS_USAGE_SPEC)
        return CKR_OK;
    if (after & ~before)
        return CKR_ATTRIBUTE_READ_ONLY;             /* a role only goes TRUE -> FALSE */
    return s_can_data (after) & ~s_can_data (before) ? CKR_ATTRIBUTE_READ_ONLY : CKR_OK;
}

unsigned
cs_usage_default_off (cs_usage_policy_t policy, unsigned given, unsigned asked)
{
    if (policy == CS_USAGE_SPEC)
        return 0;
    unsigned off = 0;
    if (asked & CS_ROLE_KEYS)
        off |= CS_ROLE_DATA & ~given;
    if (asked & CS_ROLE_DATA)
        off |= CS_ROLE_KEYS & ~given;
    return off;
}

const char *
cs_usage_policy_name (cs_usage_policy_t policy)
{
    return policy == CS_USAGE_SPEC ? "spec" : "strict";
}

int
cs_usage_policy_parse (const char *text)
{
    return !text ? -1 : strcmp (text, "strict") == 0 ? CS_USAGE_STRICT
         : strcmp (text, "spec") == 0 ? CS_USAGE_SPEC : -1;
}
