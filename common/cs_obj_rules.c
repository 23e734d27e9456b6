/*  cs_obj_rules.c — the attribute table of certificates and data objects
 *  (cs_obj_rules.h).  */
#include "cs_obj_rules.h"

static const cs_obj_def_t s_defs [] = {
    { CKA_PRIVATE, CS_OBJ_BOOL, CS_OBJ_COPY_ONLY, true, true },
    { CKA_MODIFIABLE, CS_OBJ_BOOL, CS_OBJ_COPY_ONLY, true, true },
    { CKA_COPYABLE, CS_OBJ_BOOL, CS_OBJ_ONLY_FALSE, true, true },
    { CKA_DESTROYABLE, CS_OBJ_BOOL, CS_OBJ_COPY_ONLY, true, true },
    { CKA_LABEL, CS_OBJ_BYTES, CS_OBJ_FREE, true, true },
    { CKA_APPLICATION, CS_OBJ_BYTES, CS_OBJ_FREE, false, true },
    { CKA_OBJECT_ID, CS_OBJ_BYTES, CS_OBJ_FREE, false, true },
    { CKA_VALUE, CS_OBJ_BYTES, CS_OBJ_FREE, true, true },         /* certificates: CS_OBJ_FIXED (cs_obj_rule) */
    { CKA_CERTIFICATE_TYPE, CS_OBJ_ULONG, CS_OBJ_FIXED, true, false },
    { CKA_TRUSTED, CS_OBJ_BOOL, CS_OBJ_FIXED, true, false },
    { CKA_CERTIFICATE_CATEGORY, CS_OBJ_ULONG, CS_OBJ_FREE, true, false },
    { CKA_CHECK_VALUE, CS_OBJ_BYTES, CS_OBJ_FIXED, true, false },
    { CKA_START_DATE, CS_OBJ_BYTES, CS_OBJ_FREE, true, false },
    { CKA_END_DATE, CS_OBJ_BYTES, CS_OBJ_FREE, true, false },
    { CKA_PUBLIC_KEY_INFO, CS_OBJ_BYTES, CS_OBJ_FIXED, true, false },
    { CKA_SUBJECT, CS_OBJ_BYTES, CS_OBJ_FREE, true, false },
    { CKA_ID, CS_OBJ_BYTES, CS_OBJ_FREE, true, false },
    { CKA_ISSUER, CS_OBJ_BYTES, CS_OBJ_FREE, true, false },
    { CKA_SERIAL_NUMBER, CS_OBJ_BYTES, CS_OBJ_FREE, true, false },
    { CKA_URL, CS_OBJ_BYTES, CS_OBJ_FREE, true, false },
    { CKA_HASH_OF_SUBJECT_PUBLIC_KEY, CS_OBJ_BYTES, CS_OBJ_FREE, true, false },
    { CKA_HASH_OF_ISSUER_PUBLIC_KEY, CS_OBJ_BYTES, CS_OBJ_FREE, true, false },
    { CKA_JAVA_MIDP_SECURITY_DOMAIN, CS_OBJ_ULONG, CS_OBJ_FREE, true, false },
    { CKA_NAME_HASH_ALGORITHM, CS_OBJ_ULONG, CS_OBJ_FREE, true, false },
};
#define S_DEFS (sizeof s_defs / sizeof s_defs [0])

const cs_obj_def_t *
cs_obj_defs (size_t *n_p)
{
    *n_p = S_DEFS;
    return s_defs;
}

const cs_obj_def_t *
cs_obj_def (CK_OBJECT_CLASS klass, CK_ATTRIBUTE_TYPE type)
{
    for (size_t i = 0; i < S_DEFS; i++)
        if (s_defs [i].type == type && (klass == CKO_CERTIFICATE ? s_defs [i].cert : s_defs [i].data))
            return &s_defs [i];
    return NULL;
}

cs_obj_rule_t
cs_obj_rule (CK_OBJECT_CLASS klass, const cs_obj_def_t *def)
{
    return klass == CKO_CERTIFICATE && def->type == CKA_VALUE ? CS_OBJ_FIXED : def->rule;
}

bool
cs_obj_flag_default (CK_ATTRIBUTE_TYPE type)
{
    return type == CKA_MODIFIABLE || type == CKA_COPYABLE || type == CKA_DESTROYABLE;
}
