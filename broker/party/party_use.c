/*  party_use.c — every party checks a signing's use against its own row
 *  (issue #19, docs/contracts/shared-keys.md "Who reaches a shared key"):
 *  the use and wire mechanism a SIGN frame or RAW request names, the
 *  roles under keys/usage-separation and CKA_ALLOWED_MECHANISMS of this
 *  party's row (keyattrs_use_check).  Below party_sign.c, which calls it.
 */
#include <czmq.h>
#include "party_int.h"
#include "cs_wire.h"
#include "keyattrs.h"

int
party_use_refused (party_t *self, const char *tenant, const Cs__KeyInfo *info, cs_usage_use_t use,
                   CK_MECHANISM_TYPE mech, char err [PARTY_ERR_LEN])
{
    cs_usage_policy_t policy = (cs_usage_policy_t) broker_config_usage (self->config, tenant);
    CK_RV rv = use < CS_USE_COUNT ? keyattrs_use_check (info, policy, use, mech) : CKR_KEY_FUNCTION_NOT_PERMITTED;
    if (rv == CKR_OK)
        return 0;
    snprintf (err, PARTY_ERR_LEN, "%s: key %s of tenant %s at party %u does not allow %s with mechanism 0x%lx",
              cs_rv_name (rv), info->ref, tenant, self->index, use < CS_USE_COUNT ? cs_usage_use_name (use) : "no use",
              (unsigned long) mech);
    return -1;
}

const char *
party_rv_prefix (const char *text)
{
    static const char *names [] = { "CKR_KEY_FUNCTION_NOT_PERMITTED", "CKR_MECHANISM_INVALID" };
    for (size_t i = 0; text && i < sizeof names / sizeof names [0]; i++)
        if (strncmp (text, names [i], strlen (names [i])) == 0 && text [strlen (names [i])] == ':')
            return names [i];
    return "CKR_DEVICE_ERROR";
}

cs_usage_use_t
party_use_parse (const char *text)
{
    for (int use = 0; use < CS_USE_COUNT; use++)
        if (streq (text, cs_usage_use_name ((cs_usage_use_t) use)))
            return (cs_usage_use_t) use;
    return CS_USE_COUNT;
}
