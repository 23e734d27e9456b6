/*  test_module_derive.c — CKM_ECDH1_DERIVE in the module (derive.h): the
 *  CK_ECDH1_DERIVE_PARAMS checks and the template checks with their exact
 *  CK_RV codes (PKCS#11 2.40 curr. mech. §2.3.14, §5.14), and the ANSI X9.63
 *  KDF against OpenSSL's EVP_KDF "X963KDF".  */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/core_names.h>
#include <openssl/kdf.h>
#include <openssl/params.h>
#include "derive.h"
#include "object.h"

static uint8_t s_point [65];            /* a P-256-sized uncompressed point (not checked here) */

static CK_RV
s_check (CK_MECHANISM_TYPE type, CK_ULONG kdf, void *shared, CK_ULONG shared_len, void *pub,
         CK_ULONG pub_len, size_t field_len, cs_derive_params_t *params)
{
    CK_ECDH1_DERIVE_PARAMS p = { kdf, shared_len, shared, pub_len, pub };
    CK_MECHANISM mech = { type, &p, sizeof p };
    return cs_derive_check_params (&mech, field_len, false, params);
}

START_TEST (test_params)
{
    cs_derive_params_t params;
    uint8_t der [67] = { 0x04, 65 }, shared [8] = "info";
    memset (s_point, 0x11, sizeof s_point);
    s_point [0] = 0x04;
    memcpy (der + 2, s_point, 65);
    /*  raw and DER OCTET STRING forms.  */
    ck_assert_uint_eq (s_check (CKM_ECDH1_DERIVE, CKD_NULL, NULL, 0, s_point, 65, 32, &params), CKR_OK);
    ck_assert_ptr_eq (params.point, s_point);
    ck_assert_uint_eq (params.point_len, 65);
    ck_assert_uint_eq (s_check (CKM_ECDH1_DERIVE, CKD_SHA256_KDF, shared, 4, der, 67, 32, &params), CKR_OK);
    ck_assert_ptr_eq (params.point, der + 2);
    ck_assert_uint_eq (params.shared_len, 4);
    ck_assert_uint_eq (params.kdf, CKD_SHA256_KDF);
    /*  the wrong mechanism, a missing or short block.  */
    ck_assert_uint_eq (s_check (CKM_ECDSA, CKD_NULL, NULL, 0, s_point, 65, 32, &params), CKR_MECHANISM_INVALID);
    CK_MECHANISM bare = { CKM_ECDH1_DERIVE, NULL, 0 };
    ck_assert_uint_eq (cs_derive_check_params (&bare, 32, false, &params), CKR_MECHANISM_PARAM_INVALID);
    CK_ECDH1_DERIVE_PARAMS p = { CKD_NULL, 0, NULL, 65, s_point };
    CK_MECHANISM shorter = { CKM_ECDH1_DERIVE, &p, sizeof p - 1 };
    ck_assert_uint_eq (cs_derive_check_params (&shorter, 32, false, &params), CKR_MECHANISM_PARAM_INVALID);
    /*  KDFs: unknown, the ASN.1/concatenate ones, shared data with CKD_NULL.  */
    ck_assert_uint_eq (s_check (CKM_ECDH1_DERIVE, 0x77, NULL, 0, s_point, 65, 32, &params),
                       CKR_MECHANISM_PARAM_INVALID);
    ck_assert_uint_eq (s_check (CKM_ECDH1_DERIVE, CKD_SHA1_KDF_ASN1, NULL, 0, s_point, 65, 32, &params),
                       CKR_MECHANISM_PARAM_INVALID);
    ck_assert_uint_eq (s_check (CKM_ECDH1_DERIVE, CKD_NULL, shared, 4, s_point, 65, 32, &params),
                       CKR_MECHANISM_PARAM_INVALID);
    ck_assert_uint_eq (s_check (CKM_ECDH1_DERIVE, CKD_SHA1_KDF, NULL, 4, s_point, 65, 32, &params),
                       CKR_MECHANISM_PARAM_INVALID);
    /*  points: the wrong curve size, compressed, truncated DER, missing.  */
    ck_assert_uint_eq (s_check (CKM_ECDH1_DERIVE, CKD_NULL, NULL, 0, s_point, 65, 48, &params),
                       CKR_MECHANISM_PARAM_INVALID);
    uint8_t compressed [33] = { 0x02 };
    ck_assert_uint_eq (s_check (CKM_ECDH1_DERIVE, CKD_NULL, NULL, 0, compressed, 33, 32, &params),
                       CKR_MECHANISM_PARAM_INVALID);
    ck_assert_uint_eq (s_check (CKM_ECDH1_DERIVE, CKD_NULL, NULL, 0, der, 66, 32, &params),
                       CKR_MECHANISM_PARAM_INVALID);
    ck_assert_uint_eq (s_check (CKM_ECDH1_DERIVE, CKD_NULL, NULL, 0, NULL, 0, 32, &params),
                       CKR_MECHANISM_PARAM_INVALID);
    /*  P-521: 133 bytes, DER with the long length form.  */
    uint8_t big [136] = { 0x04, 0x81, 133, 0x04 };
    ck_assert_uint_eq (s_check (CKM_ECDH1_DERIVE, CKD_NULL, NULL, 0, big, 136, 66, &params), CKR_OK);
    ck_assert_uint_eq (params.point_len, 133);
}
END_TEST

START_TEST (test_template)
{
    CK_OBJECT_CLASS secret = CKO_SECRET_KEY, priv = CKO_PRIVATE_KEY;
    CK_KEY_TYPE generic = CKK_GENERIC_SECRET, aes = CKK_AES, des = CKK_DES3;
    CK_BBOOL yes = CK_TRUE, no = CK_FALSE;
    CK_ULONG len16 = 16, len20 = 20, len40 = 40, zero = 0;
    cs_derive_key_t key;
    /*  pkcs11-tool --derive's template.  */
    CK_ATTRIBUTE tool [] = {
        { CKA_TOKEN, &no, 1 }, { CKA_CLASS, &secret, sizeof secret }, { CKA_KEY_TYPE, &generic, sizeof generic },
        { CKA_SENSITIVE, &no, 1 }, { CKA_EXTRACTABLE, &yes, 1 }, { CKA_ENCRYPT, &yes, 1 },
        { CKA_DECRYPT, &yes, 1 }, { CKA_WRAP, &yes, 1 }, { CKA_UNWRAP, &yes, 1 },
    };
    /*  It asks for key roles and data roles together: refused by the
        strict usage separation (the default), taken under spec
        (docs/CONTRACTS.md "Usage separation").  */
    ck_assert_uint_eq (cs_derive_check_template_inlock (tool, 9, CKD_NULL, 32, &key), CKR_TEMPLATE_INCONSISTENT);
    cs_object_usage_set (CS_USAGE_SPEC);
    ck_assert_uint_eq (cs_derive_check_template_inlock (tool, 9, CKD_NULL, 32, &key), CKR_OK);
    cs_object_usage_set (CS_USAGE_STRICT);
    ck_assert_uint_eq (key.key_type, CKK_GENERIC_SECRET);
    ck_assert_uint_eq (key.value_len, 32);
    ck_assert (!key.sensitive && key.extractable);
    /*  defaults: generic, sensitive, not extractable, the KDF's hash length.  */
    ck_assert_uint_eq (cs_derive_check_template_inlock (NULL, 0, CKD_SHA384_KDF, 32, &key), CKR_OK);
    ck_assert_uint_eq (key.value_len, 48);
    ck_assert (key.sensitive && !key.extractable);
    /*  CKA_VALUE_LEN: truncation with CKD_NULL, not past Z; any length with a KDF.  */
    CK_ATTRIBUTE len_t [] = { { CKA_VALUE_LEN, &len20, sizeof len20 } };
    ck_assert_uint_eq (cs_derive_check_template_inlock (len_t, 1, CKD_NULL, 32, &key), CKR_OK);
    ck_assert_uint_eq (key.value_len, 20);
    len_t [0].pValue = &len40;
    ck_assert_uint_eq (cs_derive_check_template_inlock (len_t, 1, CKD_NULL, 32, &key), CKR_ATTRIBUTE_VALUE_INVALID);
    ck_assert_uint_eq (cs_derive_check_template_inlock (len_t, 1, CKD_SHA1_KDF, 32, &key), CKR_OK);
    ck_assert_uint_eq (key.value_len, 40);
    len_t [0].pValue = &zero;
    ck_assert_uint_eq (cs_derive_check_template_inlock (len_t, 1, CKD_SHA1_KDF, 32, &key), CKR_ATTRIBUTE_VALUE_INVALID);
    /*  AES: CKA_VALUE_LEN required, 16/24/32.  */
    CK_ATTRIBUTE aes_t [] = { { CKA_KEY_TYPE, &aes, sizeof aes }, { CKA_VALUE_LEN, &len16, sizeof len16 } };
    ck_assert_uint_eq (cs_derive_check_template_inlock (aes_t, 2, CKD_SHA256_KDF, 32, &key), CKR_OK);
    ck_assert_uint_eq (key.key_type, CKK_AES);
    ck_assert_uint_eq (key.value_len, 16);
    ck_assert_uint_eq (cs_derive_check_template_inlock (aes_t, 1, CKD_SHA256_KDF, 32, &key), CKR_TEMPLATE_INCOMPLETE);
    aes_t [1].pValue = &len20;
    ck_assert_uint_eq (cs_derive_check_template_inlock (aes_t, 2, CKD_SHA256_KDF, 32, &key), CKR_ATTRIBUTE_VALUE_INVALID);
    /*  class, key type, read-only and token attributes.  */
    CK_ATTRIBUTE bad_class [] = { { CKA_CLASS, &priv, sizeof priv } };
    ck_assert_uint_eq (cs_derive_check_template_inlock (bad_class, 1, CKD_NULL, 32, &key), CKR_TEMPLATE_INCONSISTENT);
    CK_ATTRIBUTE bad_type [] = { { CKA_KEY_TYPE, &des, sizeof des } };
    ck_assert_uint_eq (cs_derive_check_template_inlock (bad_type, 1, CKD_NULL, 32, &key), CKR_TEMPLATE_INCONSISTENT);
    uint8_t value [16] = { 0 };
    CK_ATTRIBUTE with_value [] = { { CKA_VALUE, value, sizeof value } };
    ck_assert_uint_eq (cs_derive_check_template_inlock (with_value, 1, CKD_NULL, 32, &key), CKR_ATTRIBUTE_READ_ONLY);
    CK_ATTRIBUTE local [] = { { CKA_LOCAL, &yes, 1 } };
    ck_assert_uint_eq (cs_derive_check_template_inlock (local, 1, CKD_NULL, 32, &key), CKR_ATTRIBUTE_READ_ONLY);
    CK_ATTRIBUTE token [] = { { CKA_TOKEN, &yes, 1 } };
    ck_assert_uint_eq (cs_derive_check_template_inlock (token, 1, CKD_NULL, 32, &key), CKR_ATTRIBUTE_VALUE_INVALID);
    /*  Only the SO makes a key CKA_TRUSTED (common/cs_attr_rules.h).  */
    CK_ATTRIBUTE trusted [] = { { CKA_TRUSTED, &yes, 1 } };
    ck_assert_uint_eq (cs_derive_check_template_inlock (trusted, 1, CKD_NULL, 32, &key), CKR_ATTRIBUTE_READ_ONLY);
    CK_ATTRIBUTE modulus [] = { { CKA_MODULUS, value, sizeof value } };
    ck_assert_uint_eq (cs_derive_check_template_inlock (modulus, 1, CKD_NULL, 32, &key), CKR_TEMPLATE_INCONSISTENT);
    CK_ATTRIBUTE bad_bool [] = { { CKA_SENSITIVE, &len16, sizeof len16 } };
    ck_assert_uint_eq (cs_derive_check_template_inlock (bad_bool, 1, CKD_NULL, 32, &key), CKR_ATTRIBUTE_VALUE_INVALID);
}
END_TEST

START_TEST (test_attrs)
{
    CK_BBOOL yes = CK_TRUE;
    CK_ATTRIBUTE tmpl [] = { { CKA_ENCRYPT, &yes, 1 }, { CKA_LABEL, "z", 1 } };
    cs_derive_key_t key = { CKK_GENERIC_SECRET, 32, true, false };
    cs_attrs_t attrs = { 0 };
    ck_assert_int_eq (cs_derive_attrs (tmpl, 2, &key, true, true, &attrs), 0);
    ck_assert (cs_attrs_bool (&attrs, CKA_ENCRYPT, false));
    ck_assert (cs_attrs_bool (&attrs, CKA_SENSITIVE, false));
    ck_assert (!cs_attrs_bool (&attrs, CKA_EXTRACTABLE, true));
    ck_assert (cs_attrs_bool (&attrs, CKA_ALWAYS_SENSITIVE, false));
    ck_assert (cs_attrs_bool (&attrs, CKA_NEVER_EXTRACTABLE, false));
    ck_assert (!cs_attrs_bool (&attrs, CKA_LOCAL, true));
    cs_attrs_clear (&attrs);
    /*  an extractable derived key is not CKA_NEVER_EXTRACTABLE; a base key that
     *  was not always sensitive passes that on (§5.14).  */
    key.sensitive = false;
    key.extractable = true;
    ck_assert_int_eq (cs_derive_attrs (NULL, 0, &key, false, true, &attrs), 0);
    ck_assert (!cs_attrs_bool (&attrs, CKA_ALWAYS_SENSITIVE, true));
    ck_assert (!cs_attrs_bool (&attrs, CKA_NEVER_EXTRACTABLE, true));
    cs_attrs_clear (&attrs);
}
END_TEST

/*  OpenSSL's X9.63 KDF (EVP_KDF "X963KDF") as the reference.  */
static void
s_reference (const char *digest, const uint8_t *z, size_t z_len, const uint8_t *info, size_t info_len,
             uint8_t *out, size_t out_len)
{
    EVP_KDF *kdf = EVP_KDF_fetch (NULL, "X963KDF", NULL);
    EVP_KDF_CTX *ctx = EVP_KDF_CTX_new (kdf);
    OSSL_PARAM params [4], *p = params;
    *p++ = OSSL_PARAM_construct_utf8_string (OSSL_KDF_PARAM_DIGEST, (char *) digest, 0);
    *p++ = OSSL_PARAM_construct_octet_string (OSSL_KDF_PARAM_KEY, (void *) z, z_len);
    if (info_len)
        *p++ = OSSL_PARAM_construct_octet_string (OSSL_KDF_PARAM_INFO, (void *) info, info_len);
    *p = OSSL_PARAM_construct_end ();
    ck_assert_int_eq (EVP_KDF_derive (ctx, out, out_len, params), 1);
    EVP_KDF_CTX_free (ctx);
    EVP_KDF_free (kdf);
}

START_TEST (test_kdf)
{
    static const struct { CK_ULONG kdf; const char *digest; } cases [] = {
        { CKD_SHA1_KDF, "SHA1" }, { CKD_SHA224_KDF, "SHA224" }, { CKD_SHA256_KDF, "SHA256" },
        { CKD_SHA384_KDF, "SHA384" }, { CKD_SHA512_KDF, "SHA512" },
    };
    static const size_t lengths [] = { 1, 16, 20, 32, 48, 64, 65, 100, 200 };
    uint8_t z [66], info [] = "shared info", out [256], ref [256];
    for (size_t i = 0; i < sizeof z; i++)
        z [i] = (uint8_t) (i * 7 + 3);
    for (size_t c = 0; c < 5; c++)
        for (size_t l = 0; l < sizeof lengths / sizeof lengths [0]; l++)
            for (int with_info = 0; with_info < 2; with_info++) {
                size_t z_len = c % 2 ? 66 : 32, info_len = with_info ? sizeof info - 1 : 0;
                ck_assert_int_eq (cs_derive_kdf (cases [c].kdf, z, z_len, with_info ? info : NULL, info_len,
                                                 out, lengths [l]), 0);
                s_reference (cases [c].digest, z, z_len, info, info_len, ref, lengths [l]);
                ck_assert_mem_eq (out, ref, lengths [l]);
            }
    /*  CKD_NULL: Z itself, or its trailing bytes.  */
    ck_assert_int_eq (cs_derive_kdf (CKD_NULL, z, 32, NULL, 0, out, 32), 0);
    ck_assert_mem_eq (out, z, 32);
    ck_assert_int_eq (cs_derive_kdf (CKD_NULL, z, 32, NULL, 0, out, 16), 0);
    ck_assert_mem_eq (out, z + 16, 16);
    ck_assert_int_eq (cs_derive_kdf (CKD_NULL, z, 32, NULL, 0, out, 33), -1);
    ck_assert_int_eq (cs_derive_kdf (0x77, z, 32, NULL, 0, out, 16), -1);
    ck_assert_int_eq (cs_derive_kdf (CKD_SHA256_KDF, z, 32, NULL, 0, out, 0), -1);
}
END_TEST

int
main (void)
{
    SRunner *runner;
    Suite *suite = suite_create ("module_derive");
    TCase *tc = tcase_create ("derive");
    int failed;
    tcase_add_test (tc, test_params);
    tcase_add_test (tc, test_template);
    tcase_add_test (tc, test_attrs);
    tcase_add_test (tc, test_kdf);
    suite_add_tcase (suite, tc);
    runner = srunner_create (suite);
    srunner_run_all (runner, CK_NORMAL);
    failed = srunner_ntests_failed (runner);
    srunner_free (runner);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
