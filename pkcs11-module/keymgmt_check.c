/*  keymgmt_check.c — the checks of key management (keymgmt.h): templates
 *  of C_GenerateKeyPair and C_CreateObject against the attribute rules
 *  (common/cs_attr_rules.h), and the attributes a session key object
 *  stores.  Split from keymgmt.c.
 */
#include <stdlib.h>
#include <string.h>
#include <openssl/crypto.h>
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
#include "keymgmt.h"
#include "keymgmt_int.h"
#include "dataobj.h"

/*  Attributes only the token sets (cs_attr_rules.h: CS_ATTR_COMPUTED).  */
bool
cs_keymgmt_token_only (CK_ATTRIBUTE_TYPE type)
{
    const cs_attr_rule_t *rule = cs_attr_rule (type);
    return rule && (rule->rules & CS_ATTR_COMPUTED);
}

/*  Key material a generation template must not carry (footnote 3).  */
static bool
s_generated_material (CK_ATTRIBUTE_TYPE type, bool public_template)
{
    if (cs_attr_kind (type) == CS_ATTR_SECRET || type == CKA_MODULUS || type == CKA_EC_POINT)
        return true;
    return !public_template && (type == CKA_MODULUS_BITS || type == CKA_PUBLIC_EXPONENT);
}

/*  One generation template: its own checks, class, key type, material;
 *  `so`: CKU_SO is logged in (the attribute rules, cs_object_check_create).  */
static CK_RV
s_check_gen_template (const CK_ATTRIBUTE *tmpl, CK_ULONG count, CK_OBJECT_CLASS klass, CK_KEY_TYPE key_type,
                      bool so)
{
    CK_ULONG value;
    CK_RV rv = cs_template_check (tmpl, count);
    if (rv != CKR_OK || (rv = cs_object_check_create (klass, tmpl, count, so)) != CKR_OK)
        return rv;
    if ((cs_template_ulong (tmpl, count, CKA_CLASS, &value) && value != klass)
    ||  (cs_template_ulong (tmpl, count, CKA_KEY_TYPE, &value) && value != key_type))
        return CKR_TEMPLATE_INCONSISTENT;
    for (CK_ULONG i = 0; i < count; i++)
        if (s_generated_material (tmpl [i].type, klass == CKO_PUBLIC_KEY))
            return CKR_TEMPLATE_INCONSISTENT;
    return CKR_OK;
}

static CK_RV
s_check_rsa_gen (const CK_ATTRIBUTE *pub, CK_ULONG n_pub, cs_keygen_t *gen)
{
    const CK_ATTRIBUTE *e = cs_template_find (pub, n_pub, CKA_PUBLIC_EXPONENT);
    const uint8_t *bytes;
    if (!cs_template_ulong (pub, n_pub, CKA_MODULUS_BITS, &gen->modulus_bits))
        return CKR_TEMPLATE_INCOMPLETE;
    /*  No policy allows these (cs_mech.h); the broker's keys/rsa-min-bits and
        the boards narrow the range in C_GenerateKeyPair (s_rsa_size_ok).  */
    if (!cs_mech_rsa_gen_ok (gen->modulus_bits, CS_MECH_RSA_GEN_FLOOR, 0, 0))
        return CKR_KEY_SIZE_RANGE;
    if (!e)
        return CKR_OK;
    bytes = e->pValue;
    while (e->ulValueLen && gen->exponent_len < e->ulValueLen && !bytes [gen->exponent_len])
        gen->exponent_len++;       /* leading zeros */
    gen->exponent = bytes + gen->exponent_len;
    gen->exponent_len = e->ulValueLen - gen->exponent_len;
    if (gen->exponent_len == 0 || gen->exponent_len > 16 || !(gen->exponent [gen->exponent_len - 1] & 1)
    ||  (gen->exponent_len == 1 && gen->exponent [0] < 3))
        return CKR_ATTRIBUTE_VALUE_INVALID;
    return CKR_OK;
}

static CK_RV
s_check_curve_gen (const CK_ATTRIBUTE *pub, CK_ULONG n_pub, const CK_ATTRIBUTE *priv, CK_ULONG n_priv,
                   cs_keygen_t *gen)
{
    const CK_ATTRIBUTE *params = cs_template_find (pub, n_pub, CKA_EC_PARAMS);
    const CK_ATTRIBUTE *other = cs_template_find (priv, n_priv, CKA_EC_PARAMS);
    CK_RV rv;
    if (!params && !(params = other))
        return CKR_TEMPLATE_INCOMPLETE;
    if (other && (other->ulValueLen != params->ulValueLen
                  || memcmp (other->pValue, params->pValue, params->ulValueLen)))
        return CKR_TEMPLATE_INCONSISTENT;
    if ((rv = cs_curve_parse (params->pValue, params->ulValueLen, &gen->curve)) != CKR_OK)
        return rv;
    return gen->curve->key_type == gen->key_type ? CKR_OK : CKR_TEMPLATE_INCONSISTENT;
}

/*  PKCS#11 3.2 ML-DSA / ML-KEM key pair generation: CKA_PARAMETER_SET in
 *  the public template (or the private one; both must agree) is required,
 *  a CKP_* of 1..3 (CKP_ML_DSA_44..87, CKP_ML_KEM_512..1024).  */
static CK_RV
s_check_pq_gen (const CK_ATTRIBUTE *pub, CK_ULONG n_pub, const CK_ATTRIBUTE *priv, CK_ULONG n_priv,
                cs_keygen_t *gen)
{
    CK_ULONG other = 0;
    bool in_pub = cs_template_ulong (pub, n_pub, CKA_PARAMETER_SET, &gen->parameter_set);
    bool in_priv = cs_template_ulong (priv, n_priv, CKA_PARAMETER_SET, &other);
    if (!in_pub && !in_priv)
        return cs_template_find (pub, n_pub, CKA_PARAMETER_SET) || cs_template_find (priv, n_priv, CKA_PARAMETER_SET)
             ? CKR_ATTRIBUTE_VALUE_INVALID : CKR_TEMPLATE_INCOMPLETE;
    if (!in_pub)
        gen->parameter_set = other;
    if (in_pub && in_priv && other != gen->parameter_set)
        return CKR_TEMPLATE_INCONSISTENT;
    return gen->parameter_set >= 1 && gen->parameter_set <= 3 ? CKR_OK : CKR_ATTRIBUTE_VALUE_INVALID;
}

CK_RV
cs_keygen_check (const CK_MECHANISM *mech, const CK_ATTRIBUTE *pub, CK_ULONG n_pub,
                 const CK_ATTRIBUTE *priv, CK_ULONG n_priv, cs_keygen_t *gen)
{
    CK_RV rv;
    memset (gen, 0, sizeof *gen);
    gen->mechanism = mech->mechanism;
    switch (mech->mechanism) {
        case CKM_RSA_PKCS_KEY_PAIR_GEN:   gen->key_type = CKK_RSA; break;
        case CKM_EC_KEY_PAIR_GEN:         gen->key_type = CKK_EC; break;
        case CKM_EC_EDWARDS_KEY_PAIR_GEN: gen->key_type = CKK_EC_EDWARDS; break;
        case CKM_EC_MONTGOMERY_KEY_PAIR_GEN: gen->key_type = CKK_EC_MONTGOMERY; break;
        case CKM_ML_DSA_KEY_PAIR_GEN:     gen->key_type = CKK_ML_DSA; break;
        case CKM_ML_KEM_KEY_PAIR_GEN:     gen->key_type = CKK_ML_KEM; break;
        default:                          return CKR_MECHANISM_INVALID;
    }
    if (mech->ulParameterLen)
        return CKR_MECHANISM_PARAM_INVALID;
    bool so = cs_login_so_logged_in ();     /* CKA_TRUSTED TRUE: the SO's to set */
    if ((rv = s_check_gen_template (pub, n_pub, CKO_PUBLIC_KEY, gen->key_type, so)) != CKR_OK
    ||  (rv = s_check_gen_template (priv, n_priv, CKO_PRIVATE_KEY, gen->key_type, so)) != CKR_OK)
        return rv;
    gen->token = cs_template_bool (pub, n_pub, CKA_TOKEN, false) || cs_template_bool (priv, n_priv, CKA_TOKEN, false);
    gen->private_private = cs_template_bool (priv, n_priv, CKA_PRIVATE, true);
    gen->public_private = cs_template_bool (pub, n_pub, CKA_PRIVATE, false);
    if (gen->key_type == CKK_RSA)
        return s_check_rsa_gen (pub, n_pub, gen);
    if (gen->key_type == CKK_ML_DSA || gen->key_type == CKK_ML_KEM)
        return s_check_pq_gen (pub, n_pub, priv, n_priv, gen);
    return s_check_curve_gen (pub, n_pub, priv, n_priv, gen);
}

CK_RV
cs_keymgmt_create_check (const CK_ATTRIBUTE *tmpl, CK_ULONG count, CK_OBJECT_CLASS *class_p,
                         CK_KEY_TYPE *key_type_p, bool *token_p)
{
    CK_RV rv = cs_template_check (tmpl, count);
    if (rv != CKR_OK)
        return rv;
    bool so = cs_login_so_logged_in ();     /* CKA_TRUSTED TRUE: the SO's to set */
    if (!cs_template_ulong (tmpl, count, CKA_CLASS, class_p)
    ||  !cs_template_ulong (tmpl, count, CKA_KEY_TYPE, key_type_p))
        return cs_object_check_create (CKO_PRIVATE_KEY, tmpl, count, so) ?: CKR_TEMPLATE_INCOMPLETE;
    if ((rv = cs_object_check_create (*class_p, tmpl, count, so)) != CKR_OK)
        return rv;
    if ((*class_p != CKO_PUBLIC_KEY && *class_p != CKO_PRIVATE_KEY)
    ||  (*key_type_p != CKK_RSA && *key_type_p != CKK_EC && *key_type_p != CKK_EC_EDWARDS
         && *key_type_p != CKK_EC_MONTGOMERY))
        return CKR_ATTRIBUTE_VALUE_INVALID;
    *token_p = cs_template_bool (tmpl, count, CKA_TOKEN, false);
    return CKR_OK;
}

/*  What a session object never stores: it comes from its key or entry.  */
bool
cs_keymgmt_not_stored (CK_ATTRIBUTE_TYPE type)
{
    return type == CKA_CLASS || type == CKA_KEY_TYPE || type == CKA_TOKEN || type == CKA_MODULUS
        || type == CKA_PUBLIC_EXPONENT || type == CKA_MODULUS_BITS || type == CKA_EC_PARAMS
        || type == CKA_EC_POINT || cs_keymgmt_token_only (type);
}

int
cs_keymgmt_session_attrs (CK_OBJECT_CLASS klass, const CK_ATTRIBUTE *tmpl, CK_ULONG count,
                          CK_MECHANISM_TYPE gen_mech, cs_attrs_t *attrs)
{
    bool generated = gen_mech != CK_UNAVAILABLE_INFORMATION;
    bool sensitive = cs_template_bool (tmpl, count, CKA_SENSITIVE, true);
    bool extractable = cs_template_bool (tmpl, count, CKA_EXTRACTABLE, false);
    if (cs_attrs_add_template (attrs, tmpl, count, cs_keymgmt_not_stored)
    ||  cs_object_usage_defaults (klass, tmpl, count, attrs)        /* strict: roles stay apart */
    ||  cs_attrs_set_bool (attrs, CKA_LOCAL, generated)
    ||  cs_attrs_set_ulong (attrs, CKA_KEY_GEN_MECHANISM, gen_mech))
        return -1;
    if (klass == CKO_PUBLIC_KEY)
        return cs_attrs_set_bool (attrs, CKA_PRIVATE, cs_template_bool (tmpl, count, CKA_PRIVATE, false));
    if (cs_attrs_set_bool (attrs, CKA_PRIVATE, cs_template_bool (tmpl, count, CKA_PRIVATE, true))
    ||  cs_attrs_set_bool (attrs, CKA_SENSITIVE, sensitive)
    ||  cs_attrs_set_bool (attrs, CKA_EXTRACTABLE, extractable)
    ||  cs_attrs_set_bool (attrs, CKA_ALWAYS_SENSITIVE, generated && sensitive)
    ||  cs_attrs_set_bool (attrs, CKA_NEVER_EXTRACTABLE, generated && !extractable))
        return -1;
    return 0;
}
