/*  cs_attr_rules.c — the attribute rules of key objects (cs_attr_rules.h).  */
#include <string.h>
#include "cs_mech.h"
#include "cs_attr_rules.h"
#include "cryptoserver/pkcs11v.h"

#define P  CS_ATTR_PUB
#define V  CS_ATTR_PRIV
#define S  CS_ATTR_SECRET_KEY
#define K  CS_ATTR_KEYS
#define CR CS_ATTR_CREATE
#define ST (CS_ATTR_CREATE | CS_ATTR_SET | CS_ATTR_COPY)       /* footnote 8 */
#define CP (CS_ATTR_CREATE | CS_ATTR_COPY)                     /* §4.4.1: copy only */
#define CO CS_ATTR_COMPUTED                                    /* footnotes 2, 4, 6 */
#define SE (CS_ATTR_CREATE | CS_ATTR_SENSITIVE)                /* footnote 7 */

/*  PKCS#11 2.40 tables 17, 25, 28, 33, 36 and the RSA / EC key tables of
 *  curr. mech. §2.1.2, §2.1.3, §2.3.3, §2.3.4; the defaults are what the
 *  module shows for a key that does not store the flag.  */
static const cs_attr_rule_t s_rules [] = {
    /* storage objects (table 17) */
    { CKA_CLASS,              "CKA_CLASS",              CS_ATTR_V_ULONG, K, CR, -1 },
    { CKA_TOKEN,              "CKA_TOKEN",              CS_ATTR_V_BOOL,  K, CP, 0 },
    { CKA_PRIVATE,            "CKA_PRIVATE",            CS_ATTR_V_BOOL,  K, CP, -1 },
    { CKA_MODIFIABLE,         "CKA_MODIFIABLE",         CS_ATTR_V_BOOL,  K, CP, 1 },
    { CKA_COPYABLE,           "CKA_COPYABLE",           CS_ATTR_V_BOOL,  K, ST | CS_ATTR_ONLY_FALSE, 1 },
    { CKA_DESTROYABLE,        "CKA_DESTROYABLE",        CS_ATTR_V_BOOL,  K, CP, 1 },
    { CKA_LABEL,              "CKA_LABEL",              CS_ATTR_V_BYTES, K, ST, -1 },
    /* keys (table 25) */
    { CKA_KEY_TYPE,           "CKA_KEY_TYPE",           CS_ATTR_V_ULONG, K, CR, -1 },
    { CKA_ID,                 "CKA_ID",                 CS_ATTR_V_BYTES, K, ST, -1 },
    { CKA_START_DATE,         "CKA_START_DATE",         CS_ATTR_V_BYTES, K, ST, -1 },
    { CKA_END_DATE,           "CKA_END_DATE",           CS_ATTR_V_BYTES, K, ST, -1 },
    { CKA_DERIVE,             "CKA_DERIVE",             CS_ATTR_V_BOOL,  K, ST, 0 },
    { CKA_LOCAL,              "CKA_LOCAL",              CS_ATTR_V_BOOL,  K, CO, 0 },
    { CKA_KEY_GEN_MECHANISM,  "CKA_KEY_GEN_MECHANISM",  CS_ATTR_V_ULONG, K, CO, -1 },
    { CKA_ALLOWED_MECHANISMS, "CKA_ALLOWED_MECHANISMS", CS_ATTR_V_MECHS, K, CR, -1 },
    /* vendor (cryptoserver/pkcs11v.h): set by the broker on a shared key's private object */
    { CKA_CS_SHARED,          "CKA_CS_SHARED",          CS_ATTR_V_BOOL,  K, CO, 0 },
    /* public keys (table 28) */
    { CKA_SUBJECT,            "CKA_SUBJECT",            CS_ATTR_V_BYTES, P | V, ST, -1 },
    { CKA_ENCRYPT,            "CKA_ENCRYPT",            CS_ATTR_V_BOOL,  P | S, ST, -1 },
    { CKA_VERIFY,             "CKA_VERIFY",             CS_ATTR_V_BOOL,  P | S, ST, -1 },
    { CKA_VERIFY_RECOVER,     "CKA_VERIFY_RECOVER",     CS_ATTR_V_BOOL,  P, ST, -1 },
    { CKA_WRAP,               "CKA_WRAP",               CS_ATTR_V_BOOL,  P | S, ST, 0 },
    { CKA_TRUSTED,            "CKA_TRUSTED",            CS_ATTR_V_BOOL,  P | S, ST | CS_ATTR_SO_TRUE, 0 },
    { CKA_PUBLIC_KEY_INFO,    "CKA_PUBLIC_KEY_INFO",    CS_ATTR_V_BYTES, P | V, CR, -1 },
    /* private and secret keys (tables 33, 36) */
    { CKA_SENSITIVE,          "CKA_SENSITIVE",          CS_ATTR_V_BOOL,  V | S, ST | CS_ATTR_ONLY_TRUE, 1 },
    { CKA_DECRYPT,            "CKA_DECRYPT",            CS_ATTR_V_BOOL,  V | S, ST, -1 },
    { CKA_SIGN,               "CKA_SIGN",               CS_ATTR_V_BOOL,  V | S, ST, -1 },
    { CKA_SIGN_RECOVER,       "CKA_SIGN_RECOVER",       CS_ATTR_V_BOOL,  V, ST, -1 },
    { CKA_UNWRAP,             "CKA_UNWRAP",             CS_ATTR_V_BOOL,  V | S, ST, 0 },  /* roles: cs_usage.h */
    { CKA_EXTRACTABLE,        "CKA_EXTRACTABLE",        CS_ATTR_V_BOOL,  V | S, ST | CS_ATTR_ONLY_FALSE, 0 },
    { CKA_ALWAYS_SENSITIVE,   "CKA_ALWAYS_SENSITIVE",   CS_ATTR_V_BOOL,  V | S, CO, -1 },
    { CKA_NEVER_EXTRACTABLE,  "CKA_NEVER_EXTRACTABLE",  CS_ATTR_V_BOOL,  V | S, CO, -1 },
    { CKA_WRAP_WITH_TRUSTED,  "CKA_WRAP_WITH_TRUSTED",  CS_ATTR_V_BOOL,  V | S, ST | CS_ATTR_ONLY_TRUE, 0 },
    { CKA_ALWAYS_AUTHENTICATE, "CKA_ALWAYS_AUTHENTICATE", CS_ATTR_V_BOOL, V, CR, 0 },
    /* key values: given at creation only; private components are sensitive */
    { CKA_MODULUS,            "CKA_MODULUS",            CS_ATTR_V_BYTES, P | V, CR, -1 },
    { CKA_MODULUS_BITS,       "CKA_MODULUS_BITS",       CS_ATTR_V_ULONG, P, CR, -1 },
    { CKA_PUBLIC_EXPONENT,    "CKA_PUBLIC_EXPONENT",    CS_ATTR_V_BYTES, P | V, CR, -1 },
    { CKA_PRIVATE_EXPONENT,   "CKA_PRIVATE_EXPONENT",   CS_ATTR_V_BYTES, V, SE, -1 },
    { CKA_PRIME_1,            "CKA_PRIME_1",            CS_ATTR_V_BYTES, V, SE, -1 },
    { CKA_PRIME_2,            "CKA_PRIME_2",            CS_ATTR_V_BYTES, V, SE, -1 },
    { CKA_EXPONENT_1,         "CKA_EXPONENT_1",         CS_ATTR_V_BYTES, V, SE, -1 },
    { CKA_EXPONENT_2,         "CKA_EXPONENT_2",         CS_ATTR_V_BYTES, V, SE, -1 },
    { CKA_COEFFICIENT,        "CKA_COEFFICIENT",        CS_ATTR_V_BYTES, V, SE, -1 },
    { CKA_EC_PARAMS,          "CKA_EC_PARAMS",          CS_ATTR_V_BYTES, P | V, CR, -1 },
    { CKA_EC_POINT,           "CKA_EC_POINT",           CS_ATTR_V_BYTES, P | V, CR, -1 },
    { CKA_VALUE,              "CKA_VALUE",              CS_ATTR_V_BYTES, V | S, SE, -1 },
    { CKA_VALUE_LEN,          "CKA_VALUE_LEN",          CS_ATTR_V_ULONG, S, CR, -1 },
    /* PKCS#11 3.2 ML-DSA and ML-KEM key objects (issue #23): the parameter set
       (required in a generation's public template) */
    { CKA_PARAMETER_SET,      "CKA_PARAMETER_SET",      CS_ATTR_V_ULONG, P | V, CR, -1 },
    /* ... and the KEM roles (ML-KEM keys; cs_usage.h) */
    { CKA_ENCAPSULATE,        "CKA_ENCAPSULATE",        CS_ATTR_V_BOOL,  P, ST, -1 },
    { CKA_DECAPSULATE,        "CKA_DECAPSULATE",        CS_ATTR_V_BOOL,  V, ST, -1 },
};

#undef P
#undef V
#undef S
#undef K
#undef CR
#undef ST
#undef CP
#undef CO
#undef SE

const cs_attr_rule_t *
cs_attr_rules (size_t *count_p)
{
    *count_p = sizeof s_rules / sizeof s_rules [0];
    return s_rules;
}

const cs_attr_rule_t *
cs_attr_rule (CK_ATTRIBUTE_TYPE type)
{
    for (size_t i = 0; i < sizeof s_rules / sizeof s_rules [0]; i++)
        if (s_rules [i].type == type)
            return &s_rules [i];
    return NULL;
}

unsigned
cs_attr_class_bit (CK_OBJECT_CLASS klass)
{
    return klass == CKO_PUBLIC_KEY ? CS_ATTR_PUB : klass == CKO_PRIVATE_KEY ? CS_ATTR_PRIV
         : klass == CKO_SECRET_KEY ? CS_ATTR_SECRET_KEY : 0;
}

bool
cs_attr_rule_has (CK_OBJECT_CLASS klass, CK_ATTRIBUTE_TYPE type)
{
    const cs_attr_rule_t *rule = cs_attr_rule (type);
    return rule && (rule->classes & cs_attr_class_bit (klass));
}

CK_RV
cs_attr_rule_check (CK_OBJECT_CLASS klass, CK_ATTRIBUTE_TYPE type, cs_attr_op_t op,
                    const cs_attr_change_t *change)
{
    const cs_attr_rule_t *rule = cs_attr_rule (type);
    if (!rule || !(rule->classes & cs_attr_class_bit (klass)))
        return CKR_ATTRIBUTE_TYPE_INVALID;
    if (rule->rules & CS_ATTR_COMPUTED)
        return op == CS_ATTR_OP_COPY && change->same ? CKR_OK : CKR_ATTRIBUTE_READ_ONLY;
    if ((rule->rules & CS_ATTR_SO_TRUE) && change->to == 1 && !change->so && !(op == CS_ATTR_OP_COPY && change->same))
        return CKR_ATTRIBUTE_READ_ONLY;
    switch (op) {
        case CS_ATTR_OP_CREATE:
            return rule->rules & CS_ATTR_CREATE ? CKR_OK : CKR_ATTRIBUTE_READ_ONLY;
        case CS_ATTR_OP_COPY:
            if (change->same)
                return CKR_OK;
            if (!(rule->rules & (CS_ATTR_SET | CS_ATTR_COPY)))
                return CKR_ATTRIBUTE_READ_ONLY;
            break;
        default:
            if (!(rule->rules & CS_ATTR_SET))
                return CKR_ATTRIBUTE_READ_ONLY;
            break;
    }
    if ((rule->rules & CS_ATTR_ONLY_TRUE) && change->now == 1 && change->to == 0)
        return CKR_ATTRIBUTE_READ_ONLY;
    if ((rule->rules & CS_ATTR_ONLY_FALSE) && change->now == 0 && change->to == 1)
        return CKR_ATTRIBUTE_READ_ONLY;
    return CKR_OK;
}

bool
cs_attr_read_sensitive (CK_OBJECT_CLASS klass, CK_ATTRIBUTE_TYPE type, bool sensitive, bool extractable)
{
    const cs_attr_rule_t *rule = cs_attr_rule (type);
    return rule && (rule->classes & cs_attr_class_bit (klass)) && (rule->rules & CS_ATTR_SENSITIVE)
        && (sensitive || !extractable);
}

void
cs_attr_follow (bool sensitive, bool extractable, bool *always_sensitive, bool *never_extractable)
{
    *always_sensitive = *always_sensitive && sensitive;
    *never_extractable = *never_extractable && !extractable;
}

/*  ---- CKA_ALLOWED_MECHANISMS ------------------------------------------------ */

bool
cs_attr_mechs_len_ok (size_t len)
{
    return len % sizeof (CK_MECHANISM_TYPE) == 0;
}

size_t
cs_attr_mechs_wire_len (size_t len)
{
    return len / sizeof (CK_MECHANISM_TYPE) * CS_ATTR_MECH_WIRE_BYTES;
}

size_t
cs_attr_mechs_to_wire (const void *mechs, size_t len, uint8_t *out)
{
    size_t n = len / sizeof (CK_MECHANISM_TYPE);
    for (size_t i = 0; i < n; i++) {
        CK_MECHANISM_TYPE mech;
        memcpy (&mech, (const uint8_t *) mechs + i * sizeof mech, sizeof mech);
        for (int b = 0; b < CS_ATTR_MECH_WIRE_BYTES; b++)
            out [i * CS_ATTR_MECH_WIRE_BYTES + b] = (uint8_t) ((uint64_t) mech >> (8 * b));
    }
    return n * CS_ATTR_MECH_WIRE_BYTES;
}

size_t
cs_attr_mechs_host_len (size_t len)
{
    return len % CS_ATTR_MECH_WIRE_BYTES ? 0 : len / CS_ATTR_MECH_WIRE_BYTES * sizeof (CK_MECHANISM_TYPE);
}

/*  Mechanism i of a wire list.  */
static uint64_t
s_wire_mech (const uint8_t *wire, size_t i)
{
    uint64_t mech = 0;
    for (int b = CS_ATTR_MECH_WIRE_BYTES - 1; b >= 0; b--)
        mech = mech << 8 | wire [i * CS_ATTR_MECH_WIRE_BYTES + (size_t) b];
    return mech;
}

size_t
cs_attr_mechs_from_wire (const uint8_t *wire, size_t len, void *out)
{
    if (len % CS_ATTR_MECH_WIRE_BYTES)
        return 0;
    for (size_t i = 0; i < len / CS_ATTR_MECH_WIRE_BYTES; i++) {
        CK_MECHANISM_TYPE mech = (CK_MECHANISM_TYPE) s_wire_mech (wire, i);
        memcpy ((uint8_t *) out + i * sizeof mech, &mech, sizeof mech);
    }
    return cs_attr_mechs_host_len (len);
}

bool
cs_attr_mech_allowed (const void *mechs, size_t len, CK_MECHANISM_TYPE mech)
{
    size_t n = len / sizeof (CK_MECHANISM_TYPE);
    if (len == 0)
        return true;
    for (size_t i = 0; i < n; i++) {
        CK_MECHANISM_TYPE listed;
        memcpy (&listed, (const uint8_t *) mechs + i * sizeof listed, sizeof listed);
        if (listed == mech)
            return true;
    }
    return false;
}

bool
cs_attr_wire_mech_allowed (const uint8_t *wire, size_t len, CK_MECHANISM_TYPE wire_mech, CK_FLAGS flag)
{
    if (len == 0)
        return true;
    if (len % CS_ATTR_MECH_WIRE_BYTES)
        return false;
    for (size_t i = 0; i < len / CS_ATTR_MECH_WIRE_BYTES; i++) {
        uint64_t listed = s_wire_mech (wire, i);
        const cs_mech_row_t *row = listed == (CK_MECHANISM_TYPE) listed ? cs_mech_row ((CK_MECHANISM_TYPE) listed)
                                                                        : NULL;
        if (!row && listed == wire_mech)
            return true;            /* a mechanism the table does not know: by its number */
        if (row && (row->flags & flag) && (listed == wire_mech || ((row->flags & CKF_HW) && row->wire == wire_mech)))
            return true;
    }
    return false;
}
