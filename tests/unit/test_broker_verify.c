/*  test_broker_verify.c — verify before release (broker/boards/verify.h): right
 *  results of every checked mechanism pass, a result with one bit flipped is
 *  VERIFY_WRONG, unchecked mechanisms and policies are VERIFY_SKIPPED, and
 *  resident keys are checked with the public half the board listed.
 *  Results are made with OpenSSL here, not by a board.
 */
#include <openssl/core_names.h>
#include <openssl/rsa.h>
#include "test_broker_helpers.h"
#include "drv_keys.h"
#include "verify.h"
#include "test_run.h"

static EVP_PKEY *s_rsa, *s_ec, *s_ed;
static board_t s_board;
static verify_t *s_verify;

static void
s_setup (void)
{
    s_rsa = EVP_RSA_gen (2048);
    s_ec = EVP_EC_gen ("P-256");
    s_ed = EVP_PKEY_Q_keygen (NULL, NULL, "ED25519");
    ck_assert (s_rsa && s_ec && s_ed);
    s_board = (board_t) { .name = "b", .verify_rsa = 100, .verify_ec = 100 };
    s_verify = verify_new ();
    ck_assert_ptr_nonnull (s_verify);
}

static void
s_teardown (void)
{
    verify_destroy (&s_verify);
    ck_assert_ptr_null (s_verify);
    EVP_PKEY_free (s_rsa);
    EVP_PKEY_free (s_ec);
    EVP_PKEY_free (s_ed);
    cs_key_info_free_array (s_board.keys, s_board.n_keys);
}

/*  Checks a right result, then the same with one bit flipped.  */
static void
s_check (EVP_PKEY *pkey, bool sign, const cs_drv_mech_t *mech, const uint8_t *in, size_t in_len,
         uint8_t *out, size_t out_len)
{
    size_t der_len = 0;
    uint8_t *der = th_pkcs8 (pkey, &der_len);
    cs_drv_key_t key = { NULL, 0, der, der_len, "ks:t" };
    ck_assert_msg (verify_result (s_verify, &s_board, sign, &key, mech, in, in_len, out, out_len) == VERIFY_OK,
                   "mechanism 0x%lx (sign %d, %zu bytes in): not verified", mech->type, sign, in_len);
    out [out_len / 2] ^= 0x10;
    ck_assert_int_eq (verify_result (s_verify, &s_board, sign, &key, mech, in, in_len, out, out_len), VERIFY_WRONG);
    out [out_len / 2] ^= 0x10;
    OPENSSL_free (der);
}

/*  An RSA private operation with OpenSSL: sign (padding) or raw.  */
static size_t
s_rsa_op (int padding, const EVP_MD *md, int salt, const uint8_t *in, size_t in_len, uint8_t *out)
{
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new (s_rsa, NULL);
    size_t out_len = 512;
    ck_assert (ctx && EVP_PKEY_sign_init (ctx) > 0 && EVP_PKEY_CTX_set_rsa_padding (ctx, padding) > 0);
    if (md) {
        ck_assert (EVP_PKEY_CTX_set_signature_md (ctx, md) > 0);
        ck_assert (EVP_PKEY_CTX_set_rsa_mgf1_md (ctx, md) > 0);
        ck_assert (EVP_PKEY_CTX_set_rsa_pss_saltlen (ctx, salt) > 0);
    }
    ck_assert_int_gt (EVP_PKEY_sign (ctx, out, &out_len, in, in_len), 0);
    EVP_PKEY_CTX_free (ctx);
    return out_len;
}

START_TEST (test_rsa)
{
    uint8_t di [51], sig [512], digest [32] = { 7 }, block [256] = { 0 }, empty [1];
    size_t di_len = th_digest_info ("verify", di);
    cs_drv_mech_t pkcs = { .type = CKM_RSA_PKCS };
    size_t len = s_rsa_op (RSA_PKCS1_PADDING, NULL, 0, di, di_len, sig);
    s_check (s_rsa, true, &pkcs, di, di_len, sig, len);
    len = s_rsa_op (RSA_PKCS1_PADDING, NULL, 0, empty, 0, sig);       /* CKM_RSA_PKCS of no data */
    s_check (s_rsa, true, &pkcs, empty, 0, sig, len);
    cs_drv_mech_t pss = { .type = CKM_RSA_PKCS_PSS, .hash = CKM_SHA256, .mgf = CKG_MGF1_SHA256, .salt_len = 32 };
    len = s_rsa_op (RSA_PKCS1_PSS_PADDING, EVP_sha256 (), 32, digest, 32, sig);
    s_check (s_rsa, true, &pss, digest, 32, sig, len);
    /*  CKM_RSA_X_509 both ways: s = m^d, checked by s^e = m (a shorter m too).  */
    cs_drv_mech_t raw = { .type = CKM_RSA_X_509 };
    block [1] = 0x01;                                                  /* block [0] = 0: m < n */
    block [255] = 0x42;
    len = s_rsa_op (RSA_NO_PADDING, NULL, 0, block, 256, sig);
    s_check (s_rsa, true, &raw, block + 1, 255, sig, len);
    s_check (s_rsa, false, &raw, block, 256, sig, len);                 /* decrypt c = block: m^e = c */
    /*  Not checked: PKCS#1 v1.5 and OAEP decryption.  */
    size_t der_len = 0;
    uint8_t *der = th_pkcs8 (s_rsa, &der_len);
    cs_drv_key_t key = { NULL, 0, der, der_len, NULL };
    ck_assert_int_eq (verify_result (s_verify, &s_board, false, &key, &pkcs, sig, len, di, di_len), VERIFY_SKIPPED);
    cs_drv_mech_t oaep = { .type = CKM_RSA_PKCS_OAEP, .hash = CKM_SHA256, .mgf = CKG_MGF1_SHA256 };
    ck_assert_int_eq (verify_result (s_verify, &s_board, false, &key, &oaep, sig, len, di, di_len), VERIFY_SKIPPED);
    OPENSSL_free (der);
}
END_TEST

START_TEST (test_ec)
{
    uint8_t digest [32] = { 9 }, der [80], sig [64], msg [] = "an EdDSA message";
    size_t der_len = sizeof der, sig_len = 64;
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new (s_ec, NULL);
    ck_assert (ctx && EVP_PKEY_sign_init (ctx) > 0 && EVP_PKEY_sign (ctx, der, &der_len, digest, 32) > 0);
    EVP_PKEY_CTX_free (ctx);
    const uint8_t *p = der;
    ECDSA_SIG *ecdsa = d2i_ECDSA_SIG (NULL, &p, (long) der_len);
    ck_assert_ptr_nonnull (ecdsa);
    BN_bn2binpad (ECDSA_SIG_get0_r (ecdsa), sig, 32);
    BN_bn2binpad (ECDSA_SIG_get0_s (ecdsa), sig + 32, 32);
    ECDSA_SIG_free (ecdsa);
    cs_drv_mech_t mech = { .type = CKM_ECDSA };
    s_check (s_ec, true, &mech, digest, 32, sig, 64);
    EVP_MD_CTX *md = EVP_MD_CTX_new ();
    ck_assert (md && EVP_DigestSignInit (md, NULL, NULL, NULL, s_ed) > 0
               && EVP_DigestSign (md, sig, &sig_len, msg, sizeof msg) > 0);
    EVP_MD_CTX_free (md);
    cs_drv_mech_t ed = { .type = CKM_EDDSA };
    s_check (s_ed, true, &ed, msg, sizeof msg, sig, sig_len);
    /*  verify = never for EC (a trusted board's default): not checked.  */
    s_board.verify_ec = 0;
    size_t key_len = 0;
    uint8_t *key_der = th_pkcs8 (s_ed, &key_len);
    cs_drv_key_t key = { NULL, 0, key_der, key_len, NULL };
    sig [3] ^= 1;
    ck_assert_int_eq (verify_result (s_verify, &s_board, true, &key, &ed, msg, sizeof msg, sig, sig_len),
                      VERIFY_SKIPPED);
    OPENSSL_free (key_der);
}
END_TEST

/*  A resident key: checked with the public half in the board's key list.  */
START_TEST (test_resident_and_sampling)
{
    s_board.keys = calloc (1, sizeof (cs_key_info_t));
    s_board.n_keys = 1;
    ck_assert_int_eq (drv_key_info_from_pkey (s_rsa, &s_board.keys [0]), 0);
    s_board.keys [0].id [0] = 0x5a;
    s_board.keys [0].id_len = 1;
    uint8_t di [51], sig [512];
    size_t di_len = th_digest_info ("resident", di);
    size_t len = s_rsa_op (RSA_PKCS1_PADDING, NULL, 0, di, di_len, sig);
    cs_drv_key_t key = { s_board.keys [0].id, 1, NULL, 0, NULL };
    cs_drv_mech_t pkcs = { .type = CKM_RSA_PKCS };
    ck_assert_int_eq (verify_result (s_verify, &s_board, true, &key, &pkcs, di, di_len, sig, len), VERIFY_OK);
    sig [10] ^= 4;
    ck_assert_int_eq (verify_result (s_verify, &s_board, true, &key, &pkcs, di, di_len, sig, len), VERIFY_WRONG);
    /*  sample 25%: 25 of 100 results are checked.  */
    s_board.verify_rsa = 25;
    int checked = 0;
    for (int i = 0; i < 100; i++)
        checked += verify_result (s_verify, &s_board, true, &key, &pkcs, di, di_len, sig, len) != VERIFY_SKIPPED;
    ck_assert_int_eq (checked, 25);
    /*  An unknown CKA_ID: nothing to check with.  */
    s_board.verify_rsa = 100;
    uint8_t other = 0x77;
    cs_drv_key_t unknown = { &other, 1, NULL, 0, NULL };
    ck_assert_int_eq (verify_result (s_verify, &s_board, true, &unknown, &pkcs, di, di_len, sig, len), VERIFY_SKIPPED);
}
END_TEST

int
main (void)
{
    Suite *suite = suite_create ("broker_verify");
    TCase *tc = tr_tcase ("verify", s_setup, s_teardown);
    tcase_add_test (tc, test_rsa);
    tcase_add_test (tc, test_ec);
    tcase_add_test (tc, test_resident_and_sampling);
    suite_add_tcase (suite, tc);
    return tr_run (suite);
}
