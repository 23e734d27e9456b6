/*  test_attr_rules.c — the one table of attribute rules of key objects
 *  (common/cs_attr_rules.c) that the module and the broker both follow:
 *  PKCS#11 2.40 §4.4 to §4.10 change rules, latching flags, computed
 *  flags, the SO-only CKA_TRUSTED, sensitive reads, and the
 *  CKA_ALLOWED_MECHANISMS wire form and checks.  */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cs_attr_rules.h"
#include "cs_mech.h"
#include "cs_usage.h"
#include "cryptoserver/pkcs11v.h"
#include "test_run.h"

/*  cs_attr_rule_check of one change.  */
static CK_RV
s_check (CK_OBJECT_CLASS klass, CK_ATTRIBUTE_TYPE type, cs_attr_op_t op, int now, int to, bool same, bool so)
{
    cs_attr_change_t change = { .now = now, .to = to, .same = same, .so = so };
    return cs_attr_rule_check (klass, type, op, &change);
}

#define SET CS_ATTR_OP_SET
#define COPY CS_ATTR_OP_COPY
#define CREATE CS_ATTR_OP_CREATE

START_TEST (test_table_is_whole)
{
    size_t n = 0;
    const cs_attr_rule_t *rules = cs_attr_rules (&n);
    ck_assert_uint_gt (n, 30);
    for (size_t i = 0; i < n; i++) {
        ck_assert_ptr_nonnull (rules [i].name);
        ck_assert_ptr_eq (cs_attr_rule (rules [i].type), &rules [i]);      /* one row per type */
        ck_assert_uint_ne (rules [i].classes, 0);
        /*  Computed flags are never given; latching ones are changeable.  */
        if (rules [i].rules & CS_ATTR_COMPUTED)
            ck_assert_uint_eq (rules [i].rules & (CS_ATTR_CREATE | CS_ATTR_SET | CS_ATTR_COPY), 0);
        if (rules [i].rules & (CS_ATTR_ONLY_TRUE | CS_ATTR_ONLY_FALSE | CS_ATTR_SO_TRUE))
            ck_assert (rules [i].value == CS_ATTR_V_BOOL && (rules [i].rules & CS_ATTR_SET));
        if (rules [i].dflt >= 0)
            ck_assert (rules [i].value == CS_ATTR_V_BOOL);
    }
    ck_assert_ptr_null (cs_attr_rule (CKA_VENDOR_DEFINED));
    ck_assert_int_eq (cs_attr_rule (CKA_SENSITIVE)->dflt, 1);
    ck_assert_int_eq (cs_attr_rule (CKA_EXTRACTABLE)->dflt, 0);
}
END_TEST

/*  CKA_SENSITIVE FALSE → TRUE only; CKA_EXTRACTABLE TRUE → FALSE only
 *  (table 10 footnotes 11, 12), in C_SetAttributeValue and C_CopyObject,
 *  for private and secret keys.  */
START_TEST (test_latching)
{
    static const CK_OBJECT_CLASS classes [] = { CKO_PRIVATE_KEY, CKO_SECRET_KEY };
    for (int c = 0; c < 2; c++) {
        CK_OBJECT_CLASS k = classes [c];
        for (int op = SET; op <= COPY; op++) {
            ck_assert_uint_eq (s_check (k, CKA_SENSITIVE, op, 1, 0, false, false), CKR_ATTRIBUTE_READ_ONLY);
            ck_assert_uint_eq (s_check (k, CKA_SENSITIVE, op, 0, 1, false, false), CKR_OK);
            ck_assert_uint_eq (s_check (k, CKA_SENSITIVE, op, 1, 1, true, false), CKR_OK);
            ck_assert_uint_eq (s_check (k, CKA_EXTRACTABLE, op, 0, 1, false, false), CKR_ATTRIBUTE_READ_ONLY);
            ck_assert_uint_eq (s_check (k, CKA_EXTRACTABLE, op, 1, 0, false, false), CKR_OK);
            ck_assert_uint_eq (s_check (k, CKA_WRAP_WITH_TRUSTED, op, 1, 0, false, false),
                               CKR_ATTRIBUTE_READ_ONLY);
            ck_assert_uint_eq (s_check (k, CKA_WRAP_WITH_TRUSTED, op, 0, 1, false, false), CKR_OK);
            /*  CKA_UNWRAP follows footnote 8 here; the roles' own rules
                are cs_usage.h's (test_usage_*).  */
            ck_assert_uint_eq (s_check (k, CKA_UNWRAP, op, 1, 0, false, false), CKR_OK);
            ck_assert_uint_eq (s_check (k, CKA_UNWRAP, op, 0, 1, false, false), CKR_OK);
        }
        /*  Any value at creation.  */
        ck_assert_uint_eq (s_check (k, CKA_SENSITIVE, CREATE, -1, 0, false, false), CKR_OK);
        ck_assert_uint_eq (s_check (k, CKA_EXTRACTABLE, CREATE, -1, 1, false, false), CKR_OK);
    }
    /*  CKA_COPYABLE: once FALSE stays FALSE (table 17).  */
    ck_assert_uint_eq (s_check (CKO_PUBLIC_KEY, CKA_COPYABLE, SET, 0, 1, false, false), CKR_ATTRIBUTE_READ_ONLY);
    ck_assert_uint_eq (s_check (CKO_PUBLIC_KEY, CKA_COPYABLE, SET, 1, 0, false, false), CKR_OK);
}
END_TEST

/*  Footnotes 2, 4, 6: CKA_LOCAL, CKA_KEY_GEN_MECHANISM, CKA_ALWAYS_SENSITIVE,
 *  CKA_NEVER_EXTRACTABLE are the token's: never given, never changed (a
 *  copy may repeat the current value).  */
START_TEST (test_computed)
{
    static const CK_ATTRIBUTE_TYPE types [] = { CKA_LOCAL, CKA_KEY_GEN_MECHANISM, CKA_ALWAYS_SENSITIVE,
                                                CKA_NEVER_EXTRACTABLE };
    for (int i = 0; i < 4; i++) {
        ck_assert_uint_eq (s_check (CKO_PRIVATE_KEY, types [i], CREATE, -1, 1, false, true), CKR_ATTRIBUTE_READ_ONLY);
        ck_assert_uint_eq (s_check (CKO_PRIVATE_KEY, types [i], SET, 1, 1, true, true), CKR_ATTRIBUTE_READ_ONLY);
        ck_assert_uint_eq (s_check (CKO_PRIVATE_KEY, types [i], COPY, 1, 0, false, true), CKR_ATTRIBUTE_READ_ONLY);
        ck_assert_uint_eq (s_check (CKO_PRIVATE_KEY, types [i], COPY, 1, 1, true, false), CKR_OK);
    }
    /*  Kept right when CKA_SENSITIVE / CKA_EXTRACTABLE change: never TRUE again.  */
    bool always = true, never = true;
    cs_attr_follow (true, false, &always, &never);
    ck_assert (always && never);
    cs_attr_follow (false, true, &always, &never);
    ck_assert (!always && !never);
    cs_attr_follow (true, false, &always, &never);
    ck_assert (!always && !never);
}
END_TEST

/*  Read-only after creation: class, key type, key values; storage
 *  attributes a copy may change; footnote 8 ones anywhere.  */
START_TEST (test_read_only_and_copy)
{
    static const CK_ATTRIBUTE_TYPE fixed [] = { CKA_CLASS, CKA_KEY_TYPE, CKA_MODULUS, CKA_PUBLIC_EXPONENT,
                                                CKA_EC_PARAMS, CKA_VALUE, CKA_PRIVATE_EXPONENT,
                                                CKA_ALLOWED_MECHANISMS, CKA_ALWAYS_AUTHENTICATE };
    for (size_t i = 0; i < sizeof fixed / sizeof fixed [0]; i++) {
        ck_assert_uint_eq (s_check (CKO_PRIVATE_KEY, fixed [i], CREATE, -1, -1, false, false), CKR_OK);
        ck_assert_uint_eq (s_check (CKO_PRIVATE_KEY, fixed [i], SET, -1, -1, true, false), CKR_ATTRIBUTE_READ_ONLY);
        ck_assert_uint_eq (s_check (CKO_PRIVATE_KEY, fixed [i], COPY, -1, -1, false, false), CKR_ATTRIBUTE_READ_ONLY);
        ck_assert_uint_eq (s_check (CKO_PRIVATE_KEY, fixed [i], COPY, -1, -1, true, false), CKR_OK);
    }
    static const CK_ATTRIBUTE_TYPE copy_only [] = { CKA_TOKEN, CKA_PRIVATE, CKA_MODIFIABLE, CKA_DESTROYABLE };
    for (size_t i = 0; i < 4; i++) {
        ck_assert_uint_eq (s_check (CKO_PUBLIC_KEY, copy_only [i], SET, 0, 1, false, false), CKR_ATTRIBUTE_READ_ONLY);
        ck_assert_uint_eq (s_check (CKO_PUBLIC_KEY, copy_only [i], COPY, 0, 1, false, false), CKR_OK);
    }
    static const CK_ATTRIBUTE_TYPE free_ [] = { CKA_LABEL, CKA_ID, CKA_SUBJECT, CKA_START_DATE, CKA_SIGN,
                                                CKA_DECRYPT, CKA_DERIVE };
    for (size_t i = 0; i < sizeof free_ / sizeof free_ [0]; i++)
        ck_assert_uint_eq (s_check (CKO_PRIVATE_KEY, free_ [i], SET, -1, -1, false, false), CKR_OK);
}
END_TEST

/*  Which class has what: CKR_ATTRIBUTE_TYPE_INVALID otherwise.  */
START_TEST (test_classes)
{
    ck_assert_uint_eq (s_check (CKO_PUBLIC_KEY, CKA_SENSITIVE, SET, -1, 1, false, false), CKR_ATTRIBUTE_TYPE_INVALID);
    ck_assert_uint_eq (s_check (CKO_PUBLIC_KEY, CKA_SIGN, SET, -1, 1, false, false), CKR_ATTRIBUTE_TYPE_INVALID);
    ck_assert_uint_eq (s_check (CKO_PRIVATE_KEY, CKA_VERIFY, SET, -1, 1, false, false), CKR_ATTRIBUTE_TYPE_INVALID);
    ck_assert_uint_eq (s_check (CKO_PRIVATE_KEY, CKA_TRUSTED, SET, -1, 0, false, false), CKR_ATTRIBUTE_TYPE_INVALID);
    ck_assert_uint_eq (s_check (CKO_SECRET_KEY, CKA_MODULUS, CREATE, -1, -1, false, false),
                       CKR_ATTRIBUTE_TYPE_INVALID);
    ck_assert_uint_eq (s_check (CKO_DATA, CKA_LABEL, SET, -1, -1, false, false), CKR_ATTRIBUTE_TYPE_INVALID);
    ck_assert_uint_eq (s_check (CKO_PRIVATE_KEY, CKA_VENDOR_DEFINED, CREATE, -1, -1, false, false),
                       CKR_ATTRIBUTE_TYPE_INVALID);
    ck_assert (cs_attr_rule_has (CKO_SECRET_KEY, CKA_VALUE_LEN));
    ck_assert (!cs_attr_rule_has (CKO_PRIVATE_KEY, CKA_VALUE_LEN));
}
END_TEST

/*  Footnote 10: only the SO sets CKA_TRUSTED to TRUE.  */
START_TEST (test_trusted)
{
    static const CK_OBJECT_CLASS classes [] = { CKO_PUBLIC_KEY, CKO_SECRET_KEY };
    for (int c = 0; c < 2; c++) {
        for (int op = CREATE; op <= COPY; op++) {
            ck_assert_uint_eq (s_check (classes [c], CKA_TRUSTED, op, op == CREATE ? -1 : 0, 1, false, false),
                               CKR_ATTRIBUTE_READ_ONLY);
            ck_assert_uint_eq (s_check (classes [c], CKA_TRUSTED, op, op == CREATE ? -1 : 0, 1, false, true),
                               CKR_OK);
            ck_assert_uint_eq (s_check (classes [c], CKA_TRUSTED, op, op == CREATE ? -1 : 0, 0, op != CREATE,
                                        false), CKR_OK);
        }
        /*  A copy of a trusted key keeps it.  */
        ck_assert_uint_eq (s_check (classes [c], CKA_TRUSTED, COPY, 1, 1, true, false), CKR_OK);
    }
}
END_TEST

/*  Footnote 7: private components and secret values of a sensitive or
 *  unextractable key are CKR_ATTRIBUTE_SENSITIVE.  */
START_TEST (test_read_sensitive)
{
    ck_assert (cs_attr_read_sensitive (CKO_PRIVATE_KEY, CKA_VALUE, true, true));
    ck_assert (cs_attr_read_sensitive (CKO_PRIVATE_KEY, CKA_PRIME_1, false, false));
    ck_assert (!cs_attr_read_sensitive (CKO_PRIVATE_KEY, CKA_PRIVATE_EXPONENT, false, true));
    ck_assert (cs_attr_read_sensitive (CKO_SECRET_KEY, CKA_VALUE, false, false));
    ck_assert (!cs_attr_read_sensitive (CKO_SECRET_KEY, CKA_VALUE, false, true));
    ck_assert (!cs_attr_read_sensitive (CKO_PRIVATE_KEY, CKA_MODULUS, true, false));
    ck_assert (!cs_attr_read_sensitive (CKO_PUBLIC_KEY, CKA_EC_POINT, true, false));
}
END_TEST

/*  CKA_ALLOWED_MECHANISMS: host ↔ wire (8 bytes little-endian each), the
 *  module's check by application mechanism, the broker's by wire
 *  mechanism and direction.  */
START_TEST (test_allowed_mechanisms)
{
    CK_MECHANISM_TYPE host [] = { CKM_ECDSA, CKM_SHA256_RSA_PKCS, 0x80001234UL }, back [3];
    uint8_t wire [3 * CS_ATTR_MECH_WIRE_BYTES];
    ck_assert (cs_attr_mechs_len_ok (sizeof host));
    ck_assert (!cs_attr_mechs_len_ok (sizeof host - 1));
    ck_assert_uint_eq (cs_attr_mechs_wire_len (sizeof host), sizeof wire);
    ck_assert_uint_eq (cs_attr_mechs_to_wire (host, sizeof host, wire), sizeof wire);
    static const uint8_t ecdsa [8] = { 0x41, 0x10, 0, 0, 0, 0, 0, 0 };         /* CKM_ECDSA 0x1041 */
    ck_assert_mem_eq (wire, ecdsa, 8);
    ck_assert_uint_eq (cs_attr_mechs_host_len (sizeof wire), sizeof host);
    ck_assert_uint_eq (cs_attr_mechs_from_wire (wire, sizeof wire, back), sizeof host);
    ck_assert_mem_eq (back, host, sizeof host);
    ck_assert_uint_eq (cs_attr_mechs_from_wire (wire, 7, back), 0);
    /*  Module: by the application's mechanism; empty allows all.  */
    ck_assert (cs_attr_mech_allowed (host, sizeof host, CKM_ECDSA));
    ck_assert (!cs_attr_mech_allowed (host, sizeof host, CKM_ECDSA_SHA256));
    ck_assert (!cs_attr_mech_allowed (host, sizeof host, CKM_RSA_PKCS));
    ck_assert (cs_attr_mech_allowed (host, 0, CKM_RSA_PKCS));
    /*  Broker: by the wire mechanism of the job and its direction.  */
    ck_assert (cs_attr_wire_mech_allowed (wire, sizeof wire, CKM_ECDSA, CKF_SIGN));
    ck_assert (cs_attr_wire_mech_allowed (wire, sizeof wire, CKM_RSA_PKCS, CKF_SIGN));    /* SHA256_RSA_PKCS */
    ck_assert (!cs_attr_wire_mech_allowed (wire, sizeof wire, CKM_RSA_PKCS, CKF_DECRYPT));
    ck_assert (!cs_attr_wire_mech_allowed (wire, sizeof wire, CKM_RSA_PKCS_PSS, CKF_SIGN));
    ck_assert (!cs_attr_wire_mech_allowed (wire, sizeof wire, CKM_ECDH1_DERIVE, CKF_DERIVE));
    ck_assert (cs_attr_wire_mech_allowed (wire, sizeof wire, 0x80001234UL, CKF_SIGN));   /* unknown: by number */
    ck_assert (!cs_attr_wire_mech_allowed (wire, sizeof wire - 1, CKM_ECDSA, CKF_SIGN)); /* not whole */
    ck_assert (cs_attr_wire_mech_allowed (wire, 0, CKM_RSA_PKCS_PSS, CKF_SIGN));
}
END_TEST

/*  True when `text` names `name` as a whole word (CKA_VALUE is not
 *  CKA_VALUE_LEN).  */
static bool
s_names (const char *text, const char *name)
{
    size_t len = strlen (name);
    for (const char *at = strstr (text, name); at; at = strstr (at + 1, name)) {
        char next = at [len];
        if (!(next == '_' || (next >= 'A' && next <= 'Z') || (next >= '0' && next <= '9')))
            return true;
    }
    return false;
}

/*  Usage separation, strict (common/cs_usage.h; Clulow 2003, Bortolozzo
 *  et al. CCS 2010): a key role and a data role never together, on a job,
 *  at creation or after a change.  */
START_TEST (test_usage_strict)
{
    const cs_usage_policy_t P = CS_USAGE_STRICT;
    const unsigned unwrap = CS_ROLE_UNWRAP, wrap = CS_ROLE_WRAP;
    /*  The role the job needs, both policies.  */
    ck_assert_uint_eq (cs_usage_job_check (P, CS_ROLE_SIGN, CS_USE_SIGN), CKR_OK);
    ck_assert_uint_eq (cs_usage_job_check (P, CS_ROLE_SIGN, CS_USE_DECRYPT), CKR_KEY_FUNCTION_NOT_PERMITTED);
    ck_assert_uint_eq (cs_usage_job_check (P, unwrap, CS_USE_UNWRAP), CKR_OK);
    ck_assert_uint_eq (cs_usage_job_check (P, wrap, CS_USE_WRAP), CKR_OK);
    ck_assert_uint_eq (cs_usage_job_check (P, CS_ROLE_DERIVE | unwrap, CS_USE_DERIVE), CKR_OK);
    /*  A combined key (an old row) does neither class: wrap/decrypt,
        encrypt/unwrap, wrap/sign-raw, sign-recover.  */
    for (unsigned data = CS_ROLE_ENCRYPT; data <= CS_ROLE_SIGN_RECOVER; data <<= 1)
        for (unsigned key = CS_ROLE_WRAP; key <= CS_ROLE_UNWRAP; key <<= 1) {
            for (int use = 0; use < CS_USE_COUNT; use++)
                if (use != CS_USE_DERIVE)
                    ck_assert_uint_eq (cs_usage_job_check (P, data | key, (cs_usage_use_t) use),
                                       CKR_KEY_FUNCTION_NOT_PERMITTED);
            ck_assert_uint_eq (cs_usage_create_check (P, data | key), CKR_TEMPLATE_INCONSISTENT);
            ck_assert_uint_eq (cs_usage_create_check (P, data), CKR_OK);
            ck_assert_uint_eq (cs_usage_create_check (P, key | CS_ROLE_DERIVE), CKR_OK);
            /*  Never on after creation; off unless a combined key regains a data use.  */
            ck_assert_uint_eq (cs_usage_change_check (P, key, key | data), CKR_ATTRIBUTE_READ_ONLY);
            ck_assert_uint_eq (cs_usage_change_check (P, data, data | key), CKR_ATTRIBUTE_READ_ONLY);
            ck_assert_uint_eq (cs_usage_change_check (P, 0, data), CKR_ATTRIBUTE_READ_ONLY);
            ck_assert_uint_eq (cs_usage_change_check (P, key, 0), CKR_OK);
            ck_assert_uint_eq (cs_usage_change_check (P, data | key, data), CKR_ATTRIBUTE_READ_ONLY);
            ck_assert_uint_eq (cs_usage_change_check (P, data | key, key), CKR_OK);    /* sheds its data roles */
            ck_assert_uint_eq (cs_usage_change_check (P, data | key, 0), CKR_OK);
        }
    ck_assert_uint_eq (cs_usage_change_check (P, CS_ROLE_DERIVE, 0), CKR_OK);
    ck_assert_uint_eq (cs_usage_change_check (P, 0, CS_ROLE_DERIVE), CKR_ATTRIBUTE_READ_ONLY);
    /*  Defaults: a template asking for a key role leaves unnamed data roles FALSE.  */
    ck_assert_uint_eq (cs_usage_default_off (P, unwrap, unwrap), CS_ROLE_DATA);
    ck_assert_uint_eq (cs_usage_default_off (P, unwrap | CS_ROLE_SIGN, unwrap), CS_ROLE_DATA & ~CS_ROLE_SIGN);
    ck_assert_uint_eq (cs_usage_default_off (P, CS_ROLE_SIGN, CS_ROLE_SIGN), CS_ROLE_KEYS);
    ck_assert_uint_eq (cs_usage_default_off (P, CS_ROLE_SIGN, 0), 0);
    ck_assert_uint_eq (cs_usage_role_bit (CKA_SIGN_RECOVER), CS_ROLE_SIGN_RECOVER);
    ck_assert_uint_eq (cs_usage_role_bit (CKA_VERIFY), 0);
    ck_assert_int_eq (cs_usage_policy_parse ("strict"), CS_USAGE_STRICT);
    ck_assert_int_eq (cs_usage_policy_parse ("spec"), CS_USAGE_SPEC);
    ck_assert_int_eq (cs_usage_policy_parse ("loose"), -1);
}
END_TEST

/*  The PKCS#11 3.2 KEM roles (issue #23) follow the key roles' rules under
 *  strict: a decapsulation needs CKA_DECAPSULATE, never runs on a key that
 *  also decrypts or signs, never combines with a data role at creation, and
 *  the roles only go TRUE -> FALSE.  */
START_TEST (test_usage_kem)
{
    const cs_usage_policy_t P = CS_USAGE_STRICT;
    const unsigned decap = CS_ROLE_DECAPSULATE, encap = CS_ROLE_ENCAPSULATE;
    ck_assert_uint_eq (cs_usage_role_bit (CKA_DECAPSULATE), decap);
    ck_assert_uint_eq (cs_usage_role_bit (CKA_ENCAPSULATE), encap);
    ck_assert_uint_eq (cs_usage_needs (CS_USE_DECAPSULATE), decap);
    ck_assert_str_eq (cs_usage_use_name (CS_USE_DECAPSULATE), "decapsulate");
    ck_assert_uint_eq (cs_usage_job_check (P, decap | encap, CS_USE_DECAPSULATE), CKR_OK);
    ck_assert_uint_eq (cs_usage_job_check (P, encap, CS_USE_DECAPSULATE), CKR_KEY_FUNCTION_NOT_PERMITTED);
    ck_assert_uint_eq (cs_usage_job_check (P, decap | CS_ROLE_DECRYPT, CS_USE_DECAPSULATE),
                       CKR_KEY_FUNCTION_NOT_PERMITTED);
    ck_assert_uint_eq (cs_usage_job_check (P, decap | CS_ROLE_SIGN, CS_USE_SIGN), CKR_KEY_FUNCTION_NOT_PERMITTED);
    ck_assert_uint_eq (cs_usage_create_check (P, decap | CS_ROLE_SIGN), CKR_TEMPLATE_INCONSISTENT);
    ck_assert_uint_eq (cs_usage_create_check (P, decap | encap), CKR_OK);
    ck_assert_uint_eq (cs_usage_change_check (P, 0, decap), CKR_ATTRIBUTE_READ_ONLY);
    ck_assert_uint_eq (cs_usage_change_check (P, decap | encap, encap), CKR_OK);
    ck_assert_uint_eq (cs_usage_default_off (P, decap, decap), CS_ROLE_DATA);
    ck_assert_uint_eq (cs_usage_job_check (CS_USAGE_SPEC, decap | CS_ROLE_DECRYPT, CS_USE_DECAPSULATE), CKR_OK);
}
END_TEST

/*  spec: what PKCS#11 allows, the job's own role only.  */
START_TEST (test_usage_spec)
{
    const cs_usage_policy_t P = CS_USAGE_SPEC;
    unsigned all = CS_ROLE_DATA | CS_ROLE_KEYS | CS_ROLE_DERIVE;
    for (int use = 0; use < CS_USE_COUNT; use++) {
        ck_assert_uint_eq (cs_usage_job_check (P, all, (cs_usage_use_t) use), CKR_OK);
        ck_assert_uint_eq (cs_usage_job_check (P, all & ~cs_usage_needs ((cs_usage_use_t) use), (cs_usage_use_t) use),
                           CKR_KEY_FUNCTION_NOT_PERMITTED);
    }
    ck_assert_uint_eq (cs_usage_create_check (P, all), CKR_OK);
    ck_assert_uint_eq (cs_usage_change_check (P, CS_ROLE_UNWRAP, CS_ROLE_UNWRAP | CS_ROLE_SIGN), CKR_OK);
    ck_assert_uint_eq (cs_usage_default_off (P, CS_ROLE_UNWRAP, CS_ROLE_UNWRAP), 0);
}
END_TEST

/*  The man page's "Attribute rules" section and docs/contracts/keys.md name
 *  every attribute of the table.  Needs top_srcdir (set by make check).  */
START_TEST (test_documented)
{
    static const char *files [] = { "man/cryptoserver-pkcs11.7", "docs/contracts/keys.md" };
    static const char *starts [] = { ".SS Attribute rules", "## Attribute rules" };
    static const char *ends [] = { "\n.SS ", "\n## " };
    const char *top = getenv ("top_srcdir");
    static char text [1 << 20];
    for (int f = 0; f < 2; f++) {
        char path [4096];
        snprintf (path, sizeof path, "%s/%s", top ? top : "..", files [f]);
        FILE *file = fopen (path, "r");
        ck_assert_msg (file != NULL, "cannot open %s", path);
        size_t len = fread (text, 1, sizeof text - 1, file);
        fclose (file);
        text [len] = 0;
        char *section = strstr (text, starts [f]);
        ck_assert_msg (section != NULL, "%s has no attribute rules section", files [f]);
        char *end = strstr (section + 1, ends [f]);
        if (end)
            *end = 0;
        size_t n = 0;
        const cs_attr_rule_t *rules = cs_attr_rules (&n);
        for (size_t i = 0; i < n; i++)
            ck_assert_msg (s_names (section, rules [i].name), "%s does not name %s", files [f], rules [i].name);
    }
}
END_TEST

int
main (void)
{
    Suite *suite = suite_create ("attr_rules");
    TCase *tc = tr_tcase ("rules", NULL, NULL);
    tcase_add_test (tc, test_table_is_whole);
    tcase_add_test (tc, test_latching);
    tcase_add_test (tc, test_computed);
    tcase_add_test (tc, test_read_only_and_copy);
    tcase_add_test (tc, test_classes);
    tcase_add_test (tc, test_trusted);
    tcase_add_test (tc, test_read_sensitive);
    tcase_add_test (tc, test_allowed_mechanisms);
    tcase_add_test (tc, test_documented);
    tcase_add_test (tc, test_usage_strict);
    tcase_add_test (tc, test_usage_spec);
    tcase_add_test (tc, test_usage_kem);
    suite_add_tcase (suite, tc);
    return tr_run (suite);
}
