/*  test_broker_symjobs.c — the broker's check of a SymJob against the
 *  mechanism table (broker/keys/symjobs.h, issue #10): the IV sizes of the CBC
 *  rows by key type (AES 16, DES3 8 bytes), the CTR counter block, the
 *  key-wrap IV (none, 8 or 4 bytes), the key sizes of cs_mech_secret_len_ok,
 *  a _GENERAL MAC row refused (the module sends its full MAC row), and the
 *  parts of a stream (SymJob.partial: block modes, whole blocks only).
 */
#include <check.h>
#include <string.h>
#include "cs_mech.h"
#include "symjobs.h"
#include "test_run.h"

static unsigned char s_key [32], s_iv [16], s_data [48];

static CK_RV
s_prepare_part (CK_MECHANISM_TYPE mech, uint64_t operation, size_t key_len, size_t iv_len, size_t data_len,
                bool partial)
{
    Cs__SymJob job = CS__SYM_JOB__INIT;
    cs_sym_t op;
    job.partial = partial;
    job.mechanism = mech;
    job.operation = operation;
    job.key_value = (ProtobufCBinaryData) { key_len, s_key };
    job.iv = (ProtobufCBinaryData) { iv_len, s_iv };
    job.data = (ProtobufCBinaryData) { data_len, s_data };
    CK_RV rv = symjob_prepare (&job, &op);
    if (rv == CKR_OK) {
        ck_assert_uint_eq (op.mechanism, mech);
        ck_assert_uint_eq (op.key_len, key_len);
        ck_assert_uint_eq (op.iv_bytes, iv_len);
        ck_assert_ptr_eq (op.iv, iv_len ? s_iv : NULL);
        ck_assert_int_eq (op.partial, partial);
    }
    return rv;
}

static CK_RV
s_prepare (CK_MECHANISM_TYPE mech, uint64_t operation, size_t key_len, size_t iv_len, size_t data_len)
{
    return s_prepare_part (mech, operation, key_len, iv_len, data_len, false);
}

START_TEST (test_new_rows)
{
    /*  CBC IVs: one block of the key type.  */
    ck_assert_uint_eq (s_prepare (CKM_DES3_CBC, CS_SYM_ENCRYPT, 24, 8, 16), CKR_OK);
    ck_assert_uint_eq (s_prepare (CKM_DES3_CBC, CS_SYM_ENCRYPT, 24, 16, 16), CKR_MECHANISM_PARAM_INVALID);
    ck_assert_uint_eq (s_prepare (CKM_DES3_CBC_PAD, CS_SYM_DECRYPT, 24, 8, 16), CKR_OK);
    ck_assert_uint_eq (s_prepare (CKM_DES3_ECB, CS_SYM_ENCRYPT, 24, 8, 16), CKR_MECHANISM_PARAM_INVALID);
    ck_assert_uint_eq (s_prepare (CKM_DES3_ECB, CS_SYM_ENCRYPT, 16, 0, 16), CKR_KEY_SIZE_RANGE);
    ck_assert_uint_eq (s_prepare (CKM_AES_CBC, CS_SYM_ENCRYPT, 16, 8, 16), CKR_MECHANISM_PARAM_INVALID);
    ck_assert_uint_eq (s_prepare (CKM_AES_CBC, CS_SYM_ENCRYPT, 20, 16, 16), CKR_KEY_SIZE_RANGE);
    /*  CTR: the 16-byte counter block.  */
    ck_assert_uint_eq (s_prepare (CKM_AES_CTR, CS_SYM_ENCRYPT, 32, 16, 7), CKR_OK);
    ck_assert_uint_eq (s_prepare (CKM_AES_CTR, CS_SYM_ENCRYPT, 32, 0, 7), CKR_MECHANISM_PARAM_INVALID);
    /*  Key wrap: none or 8 bytes (RFC 3394), none or 4 bytes (RFC 5649).  */
    ck_assert_uint_eq (s_prepare (CKM_AES_KEY_WRAP, CS_SYM_ENCRYPT, 16, 0, 16), CKR_OK);
    ck_assert_uint_eq (s_prepare (CKM_AES_KEY_WRAP, CS_SYM_ENCRYPT, 16, 8, 16), CKR_OK);
    ck_assert_uint_eq (s_prepare (CKM_AES_KEY_WRAP, CS_SYM_ENCRYPT, 16, 4, 16), CKR_MECHANISM_PARAM_INVALID);
    ck_assert_uint_eq (s_prepare (CKM_AES_KEY_WRAP_PAD, CS_SYM_DECRYPT, 16, 4, 16), CKR_OK);
    ck_assert_uint_eq (s_prepare (CKM_AES_KEY_WRAP_PAD, CS_SYM_DECRYPT, 16, 8, 16), CKR_MECHANISM_PARAM_INVALID);
    /*  MACs: sign only; no parameter; _GENERAL rows never travel.  */
    ck_assert_uint_eq (s_prepare (CKM_SHA512_HMAC, CS_SYM_SIGN, 64, 0, 48), CKR_OK);
    ck_assert_uint_eq (s_prepare (CKM_SHA512_HMAC, CS_SYM_ENCRYPT, 64, 0, 48), CKR_MECHANISM_INVALID);
    ck_assert_uint_eq (s_prepare (CKM_AES_CMAC, CS_SYM_SIGN, 24, 0, 0), CKR_OK);
    ck_assert_uint_eq (s_prepare (CKM_AES_CMAC, CS_SYM_SIGN, 24, 16, 0), CKR_MECHANISM_PARAM_INVALID);
    ck_assert_uint_eq (s_prepare (CKM_SHA256_HMAC_GENERAL, CS_SYM_SIGN, 32, 0, 48), CKR_MECHANISM_INVALID);
    ck_assert_uint_eq (s_prepare (CKM_AES_CMAC_GENERAL, CS_SYM_SIGN, 16, 0, 48), CKR_MECHANISM_INVALID);
    /*  Not secret-key rows.  */
    ck_assert_uint_eq (s_prepare (CKM_DES3_KEY_GEN, CS_SYM_ENCRYPT, 24, 0, 16), CKR_MECHANISM_INVALID);
    ck_assert_uint_eq (s_prepare (CKM_RSA_PKCS, CS_SYM_ENCRYPT, 24, 0, 16), CKR_MECHANISM_INVALID);
}
END_TEST

/*  docs/CONTRACTS.md "Multi-part streams": a part is a non-zero number of
 *  whole blocks of ECB, CBC, CBC-PAD or CTR; nothing else is ever partial.  */
START_TEST (test_partial)
{
    ck_assert_uint_eq (s_prepare_part (CKM_AES_CBC_PAD, CS_SYM_ENCRYPT, 16, 16, 48, true), CKR_OK);
    ck_assert_uint_eq (s_prepare_part (CKM_AES_CBC_PAD, CS_SYM_DECRYPT, 16, 16, 32, true), CKR_OK);
    ck_assert_uint_eq (s_prepare_part (CKM_DES3_CBC_PAD, CS_SYM_DECRYPT, 24, 8, 8, true), CKR_OK);
    ck_assert_uint_eq (s_prepare_part (CKM_AES_ECB, CS_SYM_ENCRYPT, 16, 0, 16, true), CKR_OK);
    ck_assert_uint_eq (s_prepare_part (CKM_AES_CTR, CS_SYM_ENCRYPT, 16, 16, 32, true), CKR_OK);
    ck_assert_uint_eq (s_prepare_part (CKM_AES_CBC_PAD, CS_SYM_ENCRYPT, 16, 16, 47, true), CKR_DATA_LEN_RANGE);
    ck_assert_uint_eq (s_prepare_part (CKM_AES_CTR, CS_SYM_DECRYPT, 16, 16, 7, true),
                       CKR_ENCRYPTED_DATA_LEN_RANGE);
    ck_assert_uint_eq (s_prepare_part (CKM_AES_CBC, CS_SYM_ENCRYPT, 16, 16, 0, true), CKR_DATA_LEN_RANGE);
    ck_assert_uint_eq (s_prepare_part (CKM_AES_GCM, CS_SYM_ENCRYPT, 16, 12, 32, true), CKR_MECHANISM_INVALID);
    ck_assert_uint_eq (s_prepare_part (CKM_SHA256_HMAC, CS_SYM_SIGN, 32, 0, 32, true), CKR_MECHANISM_INVALID);
    ck_assert_uint_eq (s_prepare_part (CKM_AES_KEY_WRAP, CS_SYM_ENCRYPT, 16, 0, 32, true), CKR_MECHANISM_INVALID);
}
END_TEST

int
main (void)
{
    Suite *suite = suite_create ("broker_symjobs");
    TCase *tc = tcase_create ("prepare");
    tcase_add_test (tc, test_new_rows);
    tcase_add_test (tc, test_partial);
    suite_add_tcase (suite, tc);
    return tr_run (suite);
}
