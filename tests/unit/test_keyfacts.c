/*  test_keyfacts.c — the key facts of common/cs_keyfacts.c: DER OCTET STRING
 *  lengths (X.690 §8.1.3), curve OIDs and points (PKCS#11 2.40 curr. mech.
 *  §2.3.3), big numbers and PKCS#8 both ways, and the hash lookup of
 *  common/cs_mech.c.  */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include "cs_keyfacts.h"
#include "cs_mech.h"
#include "test_run.h"

START_TEST (test_octet_string_lengths)
{
    static uint8_t data [300];
    size_t len = 0;
    uint8_t *der = cs_der_octet_string (data, 127, &len);
    ck_assert_uint_eq (len, 129);
    ck_assert_uint_eq (der [0], 0x04);
    ck_assert_uint_eq (der [1], 127);
    free (der);
    der = cs_der_octet_string (data, 128, &len);
    ck_assert_uint_eq (len, 131);
    ck_assert (der [1] == 0x81 && der [2] == 128);
    free (der);
    der = cs_der_octet_string (data, 300, &len);
    ck_assert_uint_eq (len, 304);
    ck_assert (der [1] == 0x82 && der [2] == 0x01 && der [3] == 0x2c);
    free (der);
    ck_assert_ptr_null (cs_der_octet_string (data, 65536, &len));
}
END_TEST

START_TEST (test_ec_facts)
{
    static const uint8_t p256_oid [] = { 0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07 };
    static const uint8_t ed25519_oid [] = { 0x06, 0x03, 0x2b, 0x65, 0x70 };
    EVP_PKEY *ec = EVP_PKEY_Q_keygen (NULL, NULL, "EC", "P-256");
    EVP_PKEY *ed = EVP_PKEY_Q_keygen (NULL, NULL, "ED25519");
    size_t len = 0;
    ck_assert_int_eq (cs_pkey_key_type (ec), CKK_EC);
    ck_assert_int_eq (cs_pkey_key_type (ed), CKK_EC_EDWARDS);
    uint8_t *der = cs_pkey_ec_params (ec, &len);
    ck_assert (der && len == sizeof p256_oid && !memcmp (der, p256_oid, len));
    free (der);
    der = cs_pkey_ec_params (ed, &len);
    ck_assert (der && len == sizeof ed25519_oid && !memcmp (der, ed25519_oid, len));
    free (der);
    der = cs_pkey_ec_point (ec, &len);          //  04 41 04 || X || Y
    ck_assert (der && len == 67 && der [0] == 0x04 && der [1] == 65 && der [2] == 0x04);
    free (der);
    der = cs_pkey_ec_point (ed, &len);          //  04 20 || 32 bytes
    ck_assert (der && len == 34 && der [0] == 0x04 && der [1] == 32);
    free (der);
    EVP_PKEY_free (ec);
    EVP_PKEY_free (ed);
}
END_TEST

START_TEST (test_rsa_facts_and_pkcs8)
{
    EVP_PKEY *rsa = EVP_PKEY_Q_keygen (NULL, NULL, "RSA", (size_t) 2048);
    uint8_t *n = NULL, *e = NULL;
    size_t n_len = 0, e_len = 0, der_len = 0;
    ck_assert_int_eq (cs_pkey_key_type (rsa), CKK_RSA);
    ck_assert_int_eq (cs_pkey_bn (rsa, OSSL_PKEY_PARAM_RSA_N, &n, &n_len), 0);
    ck_assert_int_eq (cs_pkey_bn (rsa, OSSL_PKEY_PARAM_RSA_E, &e, &e_len), 0);
    ck_assert_uint_eq (n_len, 256);
    ck_assert (e_len == 3 && e [0] == 0x01 && e [1] == 0x00 && e [2] == 0x01);
    ck_assert_ptr_null (cs_pkey_ec_point (rsa, &der_len));
    uint8_t *der = cs_pkey_to_pkcs8 (rsa, &der_len);
    ck_assert_ptr_nonnull (der);
    EVP_PKEY *back = cs_pkey_from_pkcs8 (der, der_len);
    ck_assert_ptr_nonnull (back);
    ck_assert_int_eq (EVP_PKEY_eq (rsa, back), 1);
    ck_assert_ptr_null (cs_pkey_from_pkcs8 (der, der_len - 1));   //  truncated
    EVP_PKEY_free (back);
    free (der);
    free (n);
    free (e);
    EVP_PKEY_free (rsa);
}
END_TEST

/*  NIST SP 800-57 Part 1 Rev. 5 §5.6.1.1 table 2, by PKCS#11 type and size
 *  and by OpenSSL key.  */
START_TEST (test_security_strength)
{
    ck_assert_uint_eq (cs_key_strength (CKK_RSA, 1024), 80);
    ck_assert_uint_eq (cs_key_strength (CKK_RSA, 2048), 112);
    ck_assert_uint_eq (cs_key_strength (CKK_RSA, 4096), 128);
    ck_assert_uint_eq (cs_key_strength (CKK_RSA, 15360), 256);
    ck_assert_uint_eq (cs_key_strength (CKK_EC, 256), 128);
    ck_assert_uint_eq (cs_key_strength (CKK_EC, 528), 256);     /* P-521: 66 field bytes */
    ck_assert_uint_eq (cs_key_strength (CKK_DES3, 192), 112);
    ck_assert_uint_eq (cs_key_strength (CKK_DES, 64), 56);
    ck_assert_uint_eq (cs_key_strength (CKK_AES, 128), 128);
    ck_assert_uint_eq (cs_key_strength (CKK_GENERIC_SECRET, 512), 256);
    static const struct { const char *type; const char *param; unsigned bits; } keys [] = {
        { "RSA", NULL, 112 }, { "EC", "P-384", 192 }, { "EC", "P-521", 256 },
        { "ED25519", NULL, 128 }, { "X448", NULL, 224 },
    };
    for (size_t i = 0; i < sizeof keys / sizeof keys [0]; i++) {
        EVP_PKEY *pkey = keys [i].param ? EVP_PKEY_Q_keygen (NULL, NULL, keys [i].type, keys [i].param)
                       : strcmp (keys [i].type, "RSA") == 0 ? EVP_PKEY_Q_keygen (NULL, NULL, "RSA", (size_t) 2048)
                       : EVP_PKEY_Q_keygen (NULL, NULL, keys [i].type);
        ck_assert_ptr_nonnull (pkey);
        ck_assert_uint_eq (cs_pkey_strength (pkey), keys [i].bits);
        EVP_PKEY_free (pkey);
    }
}
END_TEST

START_TEST (test_hash_lookup)
{
    ck_assert_ptr_eq (cs_mech_md (CKM_SHA256), EVP_sha256 ());
    ck_assert_ptr_eq (cs_mech_md (CKM_SHA3_512), EVP_sha3_512 ());
    ck_assert_ptr_null (cs_mech_md (CKM_MD5));
    ck_assert_ptr_eq (cs_mech_mgf_md (CKG_MGF1_SHA384), EVP_sha384 ());
    ck_assert_ptr_null (cs_mech_mgf_md (0));
}
END_TEST

int
main (void)
{
    Suite *suite = suite_create ("keyfacts");
    TCase *tc = tcase_create ("keyfacts");
    tcase_set_timeout (tc, 60);
    tcase_add_test (tc, test_octet_string_lengths);
    tcase_add_test (tc, test_ec_facts);
    tcase_add_test (tc, test_rsa_facts_and_pkcs8);
    tcase_add_test (tc, test_hash_lookup);
    tcase_add_test (tc, test_security_strength);
    suite_add_tcase (suite, tc);
    return tr_run (suite);
}
