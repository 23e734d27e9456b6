/*  test_sharedkeys_sign.c — whole shared generations (512 and 1024 bits,
 *  OpenSSL's DRBG) and signatures with the three shares: PKCS#1 v1.5
 *  signatures verified by OpenSSL (EVP_PKEY_verify with (N, e)), no share
 *  or pair of shares alone signs, a tampered partial result is caught.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/core_names.h>
#include <openssl/bn.h>
#include <openssl/evp.h>
#include <openssl/param_build.h>
#include <openssl/rsa.h>
#include "test_sharedkeys.h"
#include "test_run.h"

/*  The public key (N, e) of a share, as OpenSSL's.  */
static EVP_PKEY *
s_pkey (const cs_sk_share_t *sh)
{
    unsigned char n [512];
    size_t nlen;
    unsigned long e;
    ck_assert_int_eq (cs_sk_share_public (sh, n, sizeof n, &nlen, &e), 0);
    BIGNUM *bn = BN_bin2bn (n, (int) nlen, NULL), *be = BN_new ();
    BN_set_word (be, e);
    OSSL_PARAM_BLD *bld = OSSL_PARAM_BLD_new ();
    OSSL_PARAM_BLD_push_BN (bld, OSSL_PKEY_PARAM_RSA_N, bn);
    OSSL_PARAM_BLD_push_BN (bld, OSSL_PKEY_PARAM_RSA_E, be);
    OSSL_PARAM *params = OSSL_PARAM_BLD_to_param (bld);
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_name (NULL, "RSA", NULL);
    EVP_PKEY *pkey = NULL;
    ck_assert_int_eq (EVP_PKEY_fromdata_init (ctx), 1);
    ck_assert_int_eq (EVP_PKEY_fromdata (ctx, &pkey, EVP_PKEY_PUBLIC_KEY, params), 1);
    EVP_PKEY_CTX_free (ctx);
    OSSL_PARAM_free (params);
    OSSL_PARAM_BLD_free (bld);
    BN_free (bn);
    BN_free (be);
    return pkey;
}

/*  EMSA-PKCS1-v1_5 of SHA-256 (RFC 8017 §9.2) into em (k bytes); the digest into h.  */
static void
s_pad (const char *msg, unsigned char *em, size_t k, unsigned char h [32])
{
    static const unsigned char info [] = { 0x30, 0x31, 0x30, 0x0d, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01,
                                           0x65, 0x03, 0x04, 0x02, 0x01, 0x05, 0x00, 0x04, 0x20 };
    ck_assert_int_eq (EVP_Digest (msg, strlen (msg), h, NULL, EVP_sha256 (), NULL), 1);
    size_t t = sizeof info + 32;
    em [0] = 0;
    em [1] = 1;
    memset (em + 2, 0xff, k - t - 3);
    em [k - t - 1] = 0;
    memcpy (em + k - t, info, sizeof info);
    memcpy (em + k - 32, h, 32);
}

static int
s_verify (EVP_PKEY *pkey, const unsigned char *sig, size_t k, const unsigned char h [32])
{
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new (pkey, NULL);
    ck_assert_int_eq (EVP_PKEY_verify_init (ctx), 1);
    ck_assert_int_gt (EVP_PKEY_CTX_set_rsa_padding (ctx, RSA_PKCS1_PADDING), 0);
    ck_assert_int_gt (EVP_PKEY_CTX_set_signature_md (ctx, EVP_sha256 ()), 0);
    int ok = EVP_PKEY_verify (ctx, sig, k, h, 32);
    EVP_PKEY_CTX_free (ctx);
    return ok;
}

/*  Signs with the shares and checks everything a signer may get wrong.  */
/*  The board path: base^exp mod N from cs_sk_partial_operands, computed
 *  with OpenSSL's BN_mod_exp (as a board would), equals cs_sk_partial's.  */
static void
s_check_operands (const cs_sk_share_t *sh, const unsigned char *n, size_t k, const unsigned char *em,
                  const unsigned char *part)
{
    unsigned char base [512], exp [512], out [512];
    size_t exp_len = 0;
    ck_assert_int_eq (cs_sk_partial_operands (sh, em, k, base, exp, &exp_len), 0);
    ck_assert_uint_le (exp_len, k);
    ck_assert_uint_gt (exp_len, k / 4);             /* BF: |d_j| has at least h bits */
    BIGNUM *b = BN_bin2bn (base, (int) k, NULL), *x = BN_bin2bn (exp, (int) exp_len, NULL);
    BIGNUM *N = BN_bin2bn (n, (int) k, NULL), *r = BN_new ();
    BN_CTX *ctx = BN_CTX_new ();
    ck_assert_int_eq (BN_mod_exp (r, b, x, N, ctx), 1);
    ck_assert_int_eq (BN_bn2binpad (r, out, (int) k), (int) k);
    ck_assert_mem_eq (out, part, k);
    BN_free (b);
    BN_clear_free (x);
    BN_free (N);
    BN_free (r);
    BN_CTX_free (ctx);
    /* a block >= N, or 0, has no operands */
    memset (out, 0xff, k);
    ck_assert_int_eq (cs_sk_partial_operands (sh, out, k, base, exp, &exp_len), CS_SK_EINVAL);
    memset (out, 0, k);
    ck_assert_int_eq (cs_sk_partial_operands (sh, out, k, base, exp, &exp_len), CS_SK_EINVAL);
    ck_assert_int_eq (cs_sk_partial_operands (sh, em, k - 1, base, exp, &exp_len), CS_SK_EINVAL);
}

static void
s_sign_and_check (cs_sk_share_t *sh [CS_SK_PARTIES], unsigned bits)
{
    size_t k = bits / 8;
    unsigned char em [512], part [CS_SK_PARTIES][512], sig [512], h [32], n [512];
    size_t nlen;
    unsigned long e;
    ck_assert_int_eq (cs_sk_share_public (sh [0], n, sizeof n, &nlen, &e), 0);
    ck_assert_uint_eq (nlen, k);
    s_pad ("a message no single party can sign", em, k, h);
    for (unsigned i = 0; i < CS_SK_PARTIES; i++)
        ck_assert_int_eq (cs_sk_partial (sh [i], em, k, part [i], k), 0);
    for (unsigned i = 0; i < CS_SK_PARTIES; i++)
        s_check_operands (sh [i], n, k, em, part [i]);
    const unsigned char *const parts [CS_SK_PARTIES] = { part [0], part [1], part [2] };
    ck_assert_int_eq (cs_sk_combine (n, k, e, em, parts, sig), 0);
    EVP_PKEY *pkey = s_pkey (sh [0]);
    ck_assert_int_eq (s_verify (pkey, sig, k, h), 1);

    /* one share alone, or two, is no signature: padded with 1s for the others */
    unsigned char one [512];
    memset (one, 0, k);
    one [k - 1] = 1;
    for (unsigned mask = 1; mask < 7; mask++) {
        const unsigned char *const some [CS_SK_PARTIES] = {
            mask & 1 ? part [0] : one, mask & 2 ? part [1] : one, mask & 4 ? part [2] : one };
        ck_assert_int_eq (cs_sk_combine (n, k, e, em, some, sig), CS_SK_EVERIFY);
        ck_assert_int_eq (s_verify (pkey, part [mask % 3], k, h), 0);
    }
    /* a tampered partial result is caught, and nothing is released */
    part [1][k / 2] ^= 0x10;
    ck_assert_int_eq (cs_sk_combine (n, k, e, em, parts, sig), CS_SK_EVERIFY);
    for (size_t i = 0; i < k; i++)
        ck_assert_uint_eq (sig [i], 0);
    /* a block >= N is refused before any exponentiation */
    memset (em, 0xff, k);
    ck_assert_int_eq (cs_sk_partial (sh [0], em, k, part [0], k), CS_SK_EINVAL);
    EVP_PKEY_free (pkey);
}

START_TEST (test_sign_512)
{
    cs_sk_params_t prm;
    cs_sk_params_default (&prm, 512);
    cs_sk_share_t *sh [CS_SK_PARTIES];
    cs_sk_run_stats_t st;
    ck_assert_int_eq (cs_sk_local_run (&prm, sh, &st), 0);
    ck_assert_uint_gt (st.bytes, 0);
    ck_assert_uint_ge (st.party [0].candidates, st.party [0].biprime_tests);
    s_sign_and_check (sh, 512);
    /* the shares sealed and opened again still sign */
    for (unsigned i = 0; i < CS_SK_PARTIES; i++) {
        unsigned char *data;
        size_t len;
        ck_assert_int_eq (cs_sk_share_encode (sh [i], &data, &len), 0);
        cs_sk_share_destroy (&sh [i]);
        sh [i] = cs_sk_share_decode (data, len, NULL);
        ck_assert_ptr_nonnull (sh [i]);
        free (data);
    }
    s_sign_and_check (sh, 512);
    for (unsigned i = 0; i < CS_SK_PARTIES; i++)
        cs_sk_share_destroy (&sh [i]);
}
END_TEST

START_TEST (test_sign_1024)
{
    cs_sk_params_t prm;
    cs_sk_params_default (&prm, 1024);
    cs_sk_share_t *sh [CS_SK_PARTIES];
    th_reveal_t rv;
    th_reveal_init (&rv);
    ck_assert_int_eq (th_run (&prm, NULL, sh, &rv), 0);
    mpz_t p, q;
    mpz_inits (p, q, NULL);
    for (unsigned i = 0; i < CS_SK_PARTIES; i++) {
        mpz_add (p, p, rv.p [i]);
        mpz_add (q, q, rv.q [i]);
    }
    ck_assert (mpz_probab_prime_p (p, 40));
    ck_assert (mpz_probab_prime_p (q, 40));
    mpz_mul (p, p, q);
    ck_assert_int_eq (mpz_cmp (p, rv.N), 0);
    mpz_clears (p, q, NULL);
    th_reveal_clear (&rv);
    s_sign_and_check (sh, 1024);
    for (unsigned i = 0; i < CS_SK_PARTIES; i++)
        cs_sk_share_destroy (&sh [i]);
}
END_TEST

int
main (void)
{
    Suite *s = suite_create ("sharedkeys_sign");
    TCase *tc = tcase_create ("sign");
    tcase_set_timeout (tc, 120);
    tcase_add_test (tc, test_sign_512);
    tcase_add_test (tc, test_sign_1024);
    suite_add_tcase (s, tc);
    return tr_run (s);
}
