/*  test_module_modexp.c — decoding of the vendor modexp mechanism
 *  parameters (pkcs11-module/modexp.c; cryptoserver/pkcs11v.h): the
 *  struct sizes, the required and optional operands, the length of each
 *  result (the modulus without leading zeros; p*q for CRT), the data
 *  layouts of the single, array and multi forms, and that the parameter is
 *  copied (PKCS#11 lets the caller free it after C_DigestInit).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "modexp.h"
#include "cryptoserver/pkcs11v.h"
#include "test_run.h"

static unsigned char s_e [] = { 0x01, 0x00, 0x01 };
static unsigned char s_m [] = { 0x00, 0x00, 0xc5, 0x01, 0x02, 0x03 };     /* k = 4 */

static CK_RV
s_new (CK_MECHANISM_TYPE type, void *param, CK_ULONG len, cs_modexp_op_t **op_p)
{
    CK_MECHANISM mech = { type, param, len };
    *op_p = NULL;
    return cs_modexp_op_new (&mech, op_p);
}

START_TEST (test_mechanism_numbers)
{
    /*  CKM_VENDOR_DEFINED + 'C' 'S' 0 n, n = the paper's RPC number.  */
    ck_assert_uint_eq (CKM_CS_MODEXP, 0xC3530001UL);
    ck_assert_uint_eq (CKM_CS_MODEXP_ARRAY, 0xC3530002UL);
    ck_assert_uint_eq (CKM_CS_RSA_CRT, 0xC3530003UL);
    ck_assert_uint_eq (CKM_CS_RSA_CRT_ARRAY, 0xC3530004UL);
    ck_assert_uint_eq (CKM_CS_MULTI_MODEXP_ARRAY, 0xC3530005UL);
    ck_assert (cs_modexp_mechanism (CKM_CS_MODEXP) && cs_modexp_mechanism (CKM_CS_MULTI_MODEXP_ARRAY));
    ck_assert (!cs_modexp_mechanism (CKM_CS_MODEXP - 1) && !cs_modexp_mechanism (CKM_CS_MULTI_MODEXP_ARRAY + 1));
    ck_assert (!cs_modexp_mechanism (CKM_SHA256));
}
END_TEST

START_TEST (test_plain_params)
{
    CK_CS_MODEXP_PARAMS params = { s_e, sizeof s_e, s_m, sizeof s_m };
    cs_modexp_op_t *op;
    size_t out = 0;
    ck_assert_uint_eq (s_new (CKM_CS_MODEXP, &params, sizeof params, &op), CKR_OK);
    /*  Copied: changing the caller's bytes after init changes nothing.  */
    s_m [2] = 0;
    ck_assert_uint_eq (cs_modexp_out_len (op, 1, &out), CKR_OK);
    ck_assert_uint_eq (out, 4);
    ck_assert_uint_eq (cs_modexp_out_len (op, 8192, &out), CKR_OK);
    ck_assert_uint_eq (out, 4);
    ck_assert_uint_eq (cs_modexp_out_len (op, 0, &out), CKR_DATA_LEN_RANGE);
    ck_assert_uint_eq (cs_modexp_out_len (op, 8193, &out), CKR_DATA_LEN_RANGE);
    ck_assert_uint_eq (cs_modexp_items (op, 7), 1);
    cs_modexp_op_free (op);
    s_m [2] = 0xc5;
    /*  Exponent absent (0) is allowed.  */
    params.pExponent = NULL;
    params.ulExponentLen = 0;
    ck_assert_uint_eq (s_new (CKM_CS_MODEXP, &params, sizeof params, &op), CKR_OK);
    cs_modexp_op_free (op);
}
END_TEST

START_TEST (test_plain_refusals)
{
    unsigned char zero [] = { 0, 0 }, big [CS_MODEXP_MAX_BYTES + 1];
    memset (big, 1, sizeof big);
    CK_CS_MODEXP_PARAMS params = { s_e, sizeof s_e, s_m, sizeof s_m };
    cs_modexp_op_t *op;
    ck_assert_uint_eq (s_new (CKM_CS_MODEXP, NULL, sizeof params, &op), CKR_MECHANISM_PARAM_INVALID);
    ck_assert_uint_eq (s_new (CKM_CS_MODEXP, &params, sizeof params - 1, &op), CKR_MECHANISM_PARAM_INVALID);
    ck_assert_uint_eq (s_new (CKM_CS_MODEXP, &params, sizeof (CK_CS_RSA_CRT_PARAMS), &op),
                       CKR_MECHANISM_PARAM_INVALID);
    ck_assert_uint_eq (s_new (CKM_SHA256, &params, sizeof params, &op), CKR_MECHANISM_INVALID);
    params.pModulus = zero;
    params.ulModulusLen = sizeof zero;
    ck_assert_uint_eq (s_new (CKM_CS_MODEXP, &params, sizeof params, &op), CKR_MECHANISM_PARAM_INVALID);
    params.ulModulusLen = 0;
    ck_assert_uint_eq (s_new (CKM_CS_MODEXP, &params, sizeof params, &op), CKR_MECHANISM_PARAM_INVALID);
    params.pModulus = NULL;
    params.ulModulusLen = 4;
    ck_assert_uint_eq (s_new (CKM_CS_MODEXP, &params, sizeof params, &op), CKR_MECHANISM_PARAM_INVALID);
    params.pModulus = big;
    params.ulModulusLen = sizeof big;
    ck_assert_uint_eq (s_new (CKM_CS_MODEXP, &params, sizeof params, &op), CKR_MECHANISM_PARAM_INVALID);
    params.pModulus = s_m;
    params.ulModulusLen = sizeof s_m;
    params.pExponent = big;
    params.ulExponentLen = sizeof big;
    ck_assert_uint_eq (s_new (CKM_CS_MODEXP, &params, sizeof params, &op), CKR_MECHANISM_PARAM_INVALID);
    params.pExponent = NULL;
    params.ulExponentLen = 3;
    ck_assert_uint_eq (s_new (CKM_CS_MODEXP, &params, sizeof params, &op), CKR_MECHANISM_PARAM_INVALID);
}
END_TEST

START_TEST (test_array_layout)
{
    CK_CS_MODEXP_PARAMS params = { s_e, sizeof s_e, s_m, sizeof s_m };
    cs_modexp_op_t *op;
    size_t out = 0;
    ck_assert_uint_eq (s_new (CKM_CS_MODEXP_ARRAY, &params, sizeof params, &op), CKR_OK);
    ck_assert_uint_eq (cs_modexp_out_len (op, 400, &out), CKR_OK);      /* 100 bases of 4 bytes */
    ck_assert_uint_eq (out, 400);
    ck_assert_uint_eq (cs_modexp_items (op, 400), 100);
    ck_assert_uint_eq (cs_modexp_out_len (op, 6, &out), CKR_DATA_LEN_RANGE);    /* not whole bases */
    ck_assert_uint_eq (cs_modexp_out_len (op, 0, &out), CKR_DATA_LEN_RANGE);
    ck_assert_uint_eq (cs_modexp_out_len (op, 4 * (CS_MODEXP_MAX_ITEMS + 1), &out), CKR_DATA_LEN_RANGE);
    cs_modexp_op_free (op);
}
END_TEST

START_TEST (test_crt_params)
{
    /*  p = 0xfb (251), q = 0x00 0xf1 (241): p*q = 60491 = 2 bytes.  */
    unsigned char p [] = { 0xfb }, q [] = { 0x00, 0xf1 }, dp [] = { 7 }, dq [] = { 11 }, qinv [] = { 5 };
    CK_CS_RSA_CRT_PARAMS params = { p, 1, q, 2, dp, 1, dq, 1, qinv, 1, NULL, 0 };
    cs_modexp_op_t *op;
    size_t out = 0;
    ck_assert_uint_eq (s_new (CKM_CS_RSA_CRT, &params, sizeof params, &op), CKR_OK);
    ck_assert_uint_eq (cs_modexp_out_len (op, 5, &out), CKR_OK);
    ck_assert_uint_eq (out, 2);
    cs_modexp_op_free (op);
    ck_assert_uint_eq (s_new (CKM_CS_RSA_CRT_ARRAY, &params, sizeof params, &op), CKR_OK);
    ck_assert_uint_eq (cs_modexp_out_len (op, 200, &out), CKR_OK);
    ck_assert_uint_eq (cs_modexp_items (op, 200), 100);
    ck_assert_uint_eq (cs_modexp_out_len (op, 201, &out), CKR_DATA_LEN_RANGE);
    cs_modexp_op_free (op);
    params.pPublicExponent = s_e;
    params.ulPublicExponentLen = sizeof s_e;
    ck_assert_uint_eq (s_new (CKM_CS_RSA_CRT, &params, sizeof params, &op), CKR_OK);
    cs_modexp_op_free (op);
    /*  Every CRT value is required.  */
    params.pCoefficient = NULL;
    params.ulCoefficientLen = 0;
    ck_assert_uint_eq (s_new (CKM_CS_RSA_CRT, &params, sizeof params, &op), CKR_MECHANISM_PARAM_INVALID);
    params.pCoefficient = qinv;
    params.ulCoefficientLen = 1;
    ck_assert_uint_eq (s_new (CKM_CS_RSA_CRT, &params, sizeof (CK_CS_MODEXP_PARAMS), &op),
                       CKR_MECHANISM_PARAM_INVALID);
    /*  p*q over 8192 bits.  */
    unsigned char big [CS_MODEXP_MAX_BYTES];
    memset (big, 0xff, sizeof big);
    params.pPrime1 = big;
    params.ulPrime1Len = sizeof big;
    ck_assert_uint_eq (s_new (CKM_CS_RSA_CRT, &params, sizeof params, &op), CKR_MECHANISM_PARAM_INVALID);
}
END_TEST

START_TEST (test_multi_layout)
{
    unsigned char m2 [] = { 0x01, 0x00, 0x01 }, m3 [] = { 0x00, 0x07 };
    CK_CS_MODEXP_PARAMS items [3] = { { s_e, sizeof s_e, s_m, sizeof s_m }, { NULL, 0, m2, sizeof m2 },
                                      { s_e, 1, m3, sizeof m3 } };
    CK_CS_MULTI_MODEXP_PARAMS multi = { 3, items };
    cs_modexp_op_t *op;
    size_t out = 0;
    ck_assert_uint_eq (s_new (CKM_CS_MULTI_MODEXP_ARRAY, &multi, sizeof multi, &op), CKR_OK);
    ck_assert_uint_eq (cs_modexp_out_len (op, 4 + 3 + 1, &out), CKR_OK);
    ck_assert_uint_eq (out, 8);
    ck_assert_uint_eq (cs_modexp_items (op, 8), 3);
    ck_assert_uint_eq (cs_modexp_out_len (op, 9, &out), CKR_DATA_LEN_RANGE);
    cs_modexp_op_free (op);
    multi.ulCount = 0;
    ck_assert_uint_eq (s_new (CKM_CS_MULTI_MODEXP_ARRAY, &multi, sizeof multi, &op), CKR_MECHANISM_PARAM_INVALID);
    multi.ulCount = CS_MODEXP_MAX_ITEMS + 1;
    ck_assert_uint_eq (s_new (CKM_CS_MULTI_MODEXP_ARRAY, &multi, sizeof multi, &op), CKR_MECHANISM_PARAM_INVALID);
    multi = (CK_CS_MULTI_MODEXP_PARAMS) { 3, NULL };
    ck_assert_uint_eq (s_new (CKM_CS_MULTI_MODEXP_ARRAY, &multi, sizeof multi, &op), CKR_MECHANISM_PARAM_INVALID);
    items [1].ulModulusLen = 0;         /* one bad item spoils the call */
    multi = (CK_CS_MULTI_MODEXP_PARAMS) { 3, items };
    ck_assert_uint_eq (s_new (CKM_CS_MULTI_MODEXP_ARRAY, &multi, sizeof multi, &op), CKR_MECHANISM_PARAM_INVALID);
}
END_TEST

int
main (void)
{
    Suite *suite = suite_create ("module_modexp");
    TCase *tc = tcase_create ("params");
    tcase_add_test (tc, test_mechanism_numbers);
    tcase_add_test (tc, test_plain_params);
    tcase_add_test (tc, test_plain_refusals);
    tcase_add_test (tc, test_array_layout);
    tcase_add_test (tc, test_crt_params);
    tcase_add_test (tc, test_multi_layout);
    suite_add_tcase (suite, tc);
    return tr_run (suite);
}
