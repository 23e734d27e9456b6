/*  test_driver_gmp.c — the gmp driver (shim-drivers/gmp) through its ABI v2
 *  dispatch table, loaded from CRYPTOSERVER_DRIVER_DIR as the broker loads
 *  it, and its RSA unit (gmp_rsa.c, linked in).  Every signature is
 *  verified by OpenSSL's own RSA (EVP_PKEY_verify) and every decryption of
 *  an OpenSSL-made ciphertext must give the plaintext back, for 1024, 2048,
 *  3072 and 4096-bit keys with e = 3 and e = 65537; inputs not below the
 *  modulus are refused with the openssl board's exact CK_RV; a corrupted
 *  CRT half is caught by the check and nothing is released; the per-worker
 *  cache keeps keys and their blinding pairs and stays bounded.
 */
#include <gmp.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/param_build.h>
#include <openssl/x509.h>
#include "test_driver_helpers.h"
#include "test_run.h"
#include "gmp_rsa.h"

/*  One loaded driver with a board and a session.  */
typedef td_board_t s_drv_t;

static s_drv_t s_gmp;

/*  The test keys, made once in main (forked tests inherit them).  */
#define S_KEYS 8
static EVP_PKEY *s_keys [S_KEYS];
static const unsigned s_bits [S_KEYS] = { 1024, 1024, 2048, 2048, 3072, 3072, 4096, 4096 };
static const unsigned s_exps [S_KEYS] = { 3, 65537, 3, 65537, 3, 65537, 3, 65537 };
#define S_KEY_2048 3                    /* RSA-2048, e = 65537 */

static void
s_setup (void)
{
    td_open_cached (&s_gmp, "gmp");
}

static void
s_teardown (void)
{
    td_close (&s_gmp);
}

/*  An RSA key of `bits` with public exponent e and `primes` primes, or
 *  NULL (main calls it outside a test: no ck_assert here).  */
static EVP_PKEY *
s_rsa_gen (unsigned bits, unsigned e, unsigned primes)
{
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_name (NULL, "RSA", NULL);
    BIGNUM *exp = BN_new ();
    EVP_PKEY *pkey = NULL;
    if (!ctx || !exp || !BN_set_word (exp, e) || EVP_PKEY_keygen_init (ctx) <= 0
    ||  EVP_PKEY_CTX_set_rsa_keygen_bits (ctx, (int) bits) <= 0
    ||  EVP_PKEY_CTX_set1_rsa_keygen_pubexp (ctx, exp) <= 0
    ||  (primes > 2 && EVP_PKEY_CTX_set_rsa_keygen_primes (ctx, (int) primes) <= 0)
    ||  EVP_PKEY_generate (ctx, &pkey) <= 0)
        pkey = NULL;
    BN_free (exp);
    EVP_PKEY_CTX_free (ctx);
    return pkey;
}

/*  OpenSSL's own PKCS#1 v1.5 signature over a DigestInfo (deterministic).  */
static size_t
s_openssl_sign (EVP_PKEY *pkey, const unsigned char *di, size_t di_len, unsigned char *sig, size_t cap)
{
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new (pkey, NULL);
    size_t len = cap;
    ck_assert (ctx && EVP_PKEY_sign_init (ctx) > 0);
    ck_assert (EVP_PKEY_CTX_set_rsa_padding (ctx, RSA_PKCS1_PADDING) > 0);
    ck_assert (EVP_PKEY_sign (ctx, sig, &len, di, di_len) > 0);
    EVP_PKEY_CTX_free (ctx);
    return len;
}

/*  The public operation on a raw block: sig^e mod n, k bytes into back.  */
static size_t
s_recover_raw (EVP_PKEY *pkey, const unsigned char *sig, size_t len, unsigned char *back, size_t cap)
{
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new (pkey, NULL);
    size_t back_len = cap;
    ck_assert (ctx && EVP_PKEY_verify_recover_init (ctx) > 0);
    ck_assert (EVP_PKEY_CTX_set_rsa_padding (ctx, RSA_NO_PADDING) > 0);
    ck_assert (EVP_PKEY_verify_recover (ctx, back, &back_len, sig, len) > 0);
    EVP_PKEY_CTX_free (ctx);
    return back_len;
}

/*  The modulus of pkey as k big-endian bytes.  */
static size_t
s_modulus (EVP_PKEY *pkey, unsigned char *out, size_t k)
{
    BIGNUM *n = NULL;
    ck_assert (EVP_PKEY_get_bn_param (pkey, OSSL_PKEY_PARAM_RSA_N, &n));
    ck_assert_int_eq (BN_bn2binpad (n, out, (int) k), (int) k);
    BN_free (n);
    return k;
}

START_TEST (test_capabilities_and_mechanisms)
{
    cs_caps_t caps = { 0 };
    cs_drv_capabilities_fn *fn = (cs_drv_capabilities_fn *) cs_driver_lookup (s_gmp.driver, CS_DRV_CAPABILITIES);
    ck_assert_ptr_nonnull (fn);
    ck_assert_int_eq (fn (s_gmp.board, &caps), 0);
    /*  RSA material only, and no generation: EC jobs and key generation
     *  route to other boards.  */
    ck_assert_uint_eq (caps.flags, CS_CAP_KEY_MATERIAL | CS_CAP_MODEXP);
    ck_assert_uint_eq (caps.material_types, CS_KT_RSA);
    ck_assert_uint_eq (caps.generate_types, 0);
    ck_assert_ptr_null (cs_driver_lookup (s_gmp.driver, CS_DRV_GENERATE_MATERIAL));
    ck_assert_ptr_null (cs_driver_lookup (s_gmp.driver, CS_DRV_GENERATE_RESIDENT));
    ck_assert_ptr_null (cs_driver_lookup (s_gmp.driver, CS_DRV_DERIVE_KEY));
    cs_drv_board_mechanisms_fn *mechs_fn
        = (cs_drv_board_mechanisms_fn *) cs_driver_lookup (s_gmp.driver, CS_DRV_BOARD_MECHANISMS);
    cs_mech_info_t *mechs = NULL;
    size_t count = 0;
    ck_assert_int_eq (mechs_fn (s_gmp.board, &mechs, &count), 0);
    ck_assert_uint_eq (count, 9);       /* 4 RSA + 5 raw modexp (test_driver_modexp) */
    CK_FLAGS seen = 0;
    for (size_t i = 0; i < count; i++) {
        if (mechs [i].type >= CKM_VENDOR_DEFINED) {
            ck_assert_uint_eq (mechs [i].flags, CKF_HW | CKF_DIGEST);
            continue;
        }
        ck_assert_uint_eq (mechs [i].min_key_bits, 1024);
        ck_assert_uint_eq (mechs [i].max_key_bits, 8192);
        ck_assert (!(mechs [i].flags & (CKF_GENERATE_KEY_PAIR | CKF_DERIVE)));
        switch (mechs [i].type) {
            case CKM_RSA_PKCS: ck_assert_uint_eq (mechs [i].flags, CKF_SIGN | CKF_DECRYPT); seen |= 1; break;
            case CKM_RSA_PKCS_PSS: ck_assert_uint_eq (mechs [i].flags, CKF_SIGN); seen |= 2; break;
            case CKM_RSA_X_509: ck_assert_uint_eq (mechs [i].flags, CKF_SIGN | CKF_DECRYPT); seen |= 4; break;
            case CKM_RSA_PKCS_OAEP: ck_assert_uint_eq (mechs [i].flags, CKF_DECRYPT); seen |= 8; break;
            default: ck_abort_msg ("unexpected mechanism 0x%lx", mechs [i].type);
        }
    }
    ck_assert_uint_eq (seen, 15);
    free (mechs);
    cs_drv_board_keys_fn *keys = (cs_drv_board_keys_fn *) cs_driver_lookup (s_gmp.driver, CS_DRV_BOARD_KEYS);
    cs_key_info_t *list = NULL;
    count = 9;
    ck_assert_int_eq (keys (s_gmp.board, &list, &count), 0);
    ck_assert_uint_eq (count, 0);
    cs_key_info_free_array (list, count);
}
END_TEST

/*  Every size and exponent, cached (odd keys) or per-request (even keys):
 *  PKCS#1 v1.5 equals OpenSSL's own signature byte for byte and verifies;
 *  PSS verifies; raw RSA gives back the left-padded input; OAEP and PKCS#1
 *  ciphertexts made by OpenSSL decrypt to the plaintext.  */
START_TEST (test_sizes_and_exponents)
{
    const EVP_MD *mds [] = { EVP_sha1 (), EVP_sha256 (), EVP_sha384 () };
    const CK_MECHANISM_TYPE hashes [] = { CKM_SHA_1, CKM_SHA256, CKM_SHA384 };
    const CK_RSA_PKCS_MGF_TYPE mgfs [] = { CKG_MGF1_SHA1, CKG_MGF1_SHA256, CKG_MGF1_SHA384 };
    EVP_PKEY *pkey = s_keys [_i];
    size_t k = s_bits [_i] / 8;
    unsigned char *der = NULL, di [51], digest [32], sig [512], ref [512], ct [512], out [512];
    char name [32];
    snprintf (name, sizeof name, "ks:%u-%u", s_bits [_i], s_exps [_i]);
    cs_drv_key_t key = td_key (pkey, _i % 2 ? name : NULL, &der);
    th_digest_info (name, di);
    cs_drv_mech_t mech = { CKM_RSA_PKCS };
    size_t len = sizeof sig;
    ck_assert_uint_eq (s_gmp.sign (s_gmp.session, &key, &mech, di, 51, sig, &len), CKR_OK);
    ck_assert_uint_eq (len, k);
    ck_assert_msg (th_verify_rsa_pkcs1 (pkey, di, 51, sig, len), "RSA-%u e=%u", s_bits [_i], s_exps [_i]);
    ck_assert_uint_eq (s_openssl_sign (pkey, di, 51, ref, sizeof ref), k);
    ck_assert_mem_eq (sig, ref, k);
    di [50] ^= 1;
    ck_assert (!th_verify_rsa_pkcs1 (pkey, di, 51, sig, len));
    /*  PSS, SHA-256 / MGF1-SHA256 / 32-byte salt.  */
    SHA256 ((const unsigned char *) name, strlen (name), digest);
    mech = (cs_drv_mech_t) { CKM_RSA_PKCS_PSS, CKM_SHA256, CKG_MGF1_SHA256, 32 };
    len = sizeof sig;
    ck_assert_uint_eq (s_gmp.sign (s_gmp.session, &key, &mech, digest, 32, sig, &len), CKR_OK);
    ck_assert (th_verify_rsa_pss (pkey, digest, sig, len));
    /*  Raw: a 20-byte input comes back left-padded with zeros.  */
    mech = (cs_drv_mech_t) { CKM_RSA_X_509 };
    len = sizeof sig;
    ck_assert_uint_eq (s_gmp.sign (s_gmp.session, &key, &mech, digest, 20, sig, &len), CKR_OK);
    ck_assert_uint_eq (len, k);
    ck_assert_uint_eq (s_recover_raw (pkey, sig, len, out, sizeof out), k);
    for (size_t i = 0; i < k - 20; i++)
        ck_assert_uint_eq (out [i], 0);
    ck_assert_mem_eq (out + k - 20, digest, 20);
    /*  OAEP with three hashes (a label on one), then PKCS#1 v1.5.  */
    for (size_t i = 0; i < 3; i++) {
        const char *label = i == 1 ? "label" : NULL;
        size_t ct_len = th_rsa_encrypt (pkey, mds [i], label, "gmp secret", ct, sizeof ct);
        mech = (cs_drv_mech_t) { CKM_RSA_PKCS_OAEP, hashes [i], mgfs [i], 0, (const unsigned char *) label,
                             label ? strlen (label) : 0 };
        len = sizeof out;
        ck_assert_uint_eq (s_gmp.decrypt (s_gmp.session, &key, &mech, ct, ct_len, out, &len), CKR_OK);
        ck_assert (len == 10 && memcmp (out, "gmp secret", 10) == 0);
    }
    size_t ct_len = th_rsa_encrypt (pkey, NULL, NULL, "pkcs1 v1.5", ct, sizeof ct);
    mech = (cs_drv_mech_t) { CKM_RSA_PKCS };
    len = sizeof out;
    ck_assert_uint_eq (s_gmp.decrypt (s_gmp.session, &key, &mech, ct, ct_len, out, &len), CKR_OK);
    ck_assert (len == 10 && memcmp (out, "pkcs1 v1.5", 10) == 0);
    ck_assert_uint_eq (s_gmp.cached (s_gmp.session), _i % 2);
    OPENSSL_free (der);
}
END_TEST

START_TEST (test_sign_refusals)
{
    EVP_PKEY *pkey = s_keys [S_KEY_2048];
    unsigned char *der = NULL, di [51], digest [64], sig [512];
    cs_drv_key_t key = td_key (pkey, "ks:refusals", &der);
    th_digest_info ("x", di);
    /*  PSS: SHA-384 with MGF1-SHA1 and no salt (any pairing) verifies.  */
    SHA384 ((const uint8_t *) "pss", 3, digest);
    cs_drv_mech_t mech = { CKM_RSA_PKCS_PSS, CKM_SHA384, CKG_MGF1_SHA1, 0 };
    size_t len = sizeof sig;
    ck_assert_uint_eq (s_gmp.sign (s_gmp.session, &key, &mech, digest, 48, sig, &len), CKR_OK);
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new (pkey, NULL);
    ck_assert (EVP_PKEY_verify_init (ctx) > 0);
    ck_assert (EVP_PKEY_CTX_set_rsa_padding (ctx, RSA_PKCS1_PSS_PADDING) > 0);
    ck_assert (EVP_PKEY_CTX_set_signature_md (ctx, EVP_sha384 ()) > 0);
    ck_assert (EVP_PKEY_CTX_set_rsa_mgf1_md (ctx, EVP_sha1 ()) > 0);
    ck_assert (EVP_PKEY_CTX_set_rsa_pss_saltlen (ctx, 0) > 0);
    ck_assert_int_eq (EVP_PKEY_verify (ctx, sig, len, digest, 48), 1);
    EVP_PKEY_CTX_free (ctx);
    /*  A digest of the wrong length for the PSS hash; an unknown hash.  */
    len = sizeof sig;
    ck_assert_uint_eq (s_gmp.sign (s_gmp.session, &key, &mech, digest, 32, sig, &len), CKR_DATA_LEN_RANGE);
    mech.hash = CKM_MD5;
    ck_assert_uint_eq (s_gmp.sign (s_gmp.session, &key, &mech, digest, 16, sig, &len),
                       CKR_MECHANISM_PARAM_INVALID);
    /*  PKCS#1 input over k - 11 bytes; raw input over k bytes.  */
    unsigned char big [300] = { 0 };
    mech = (cs_drv_mech_t) { CKM_RSA_PKCS };
    ck_assert_uint_eq (s_gmp.sign (s_gmp.session, &key, &mech, big, 246, sig, &len), CKR_DATA_LEN_RANGE);
    len = sizeof sig;
    ck_assert_uint_eq (s_gmp.sign (s_gmp.session, &key, &mech, big, 245, sig, &len), CKR_OK);
    mech = (cs_drv_mech_t) { CKM_RSA_X_509 };
    len = sizeof sig;
    ck_assert_uint_eq (s_gmp.sign (s_gmp.session, &key, &mech, big, 257, sig, &len), CKR_DATA_LEN_RANGE);
    /*  EC mechanisms with an RSA key; an unknown one; a short buffer.  */
    mech = (cs_drv_mech_t) { CKM_ECDSA };
    len = 10;
    ck_assert_uint_eq (s_gmp.sign (s_gmp.session, &key, &mech, digest, 32, sig, &len), CKR_KEY_TYPE_INCONSISTENT);
    mech = (cs_drv_mech_t) { CKM_EDDSA };
    ck_assert_uint_eq (s_gmp.sign (s_gmp.session, &key, &mech, digest, 32, sig, &len), CKR_KEY_TYPE_INCONSISTENT);
    mech = (cs_drv_mech_t) { CKM_SHA256_RSA_PKCS };
    ck_assert_uint_eq (s_gmp.sign (s_gmp.session, &key, &mech, digest, 32, sig, &len), CKR_MECHANISM_INVALID);
    mech = (cs_drv_mech_t) { CKM_RSA_PKCS };
    len = 255;
    ck_assert_uint_eq (s_gmp.sign (s_gmp.session, &key, &mech, di, 51, sig, &len), CKR_BUFFER_TOO_SMALL);
    OPENSSL_free (der);
}
END_TEST

START_TEST (test_decrypt_refusals)
{
    EVP_PKEY *pkey = s_keys [S_KEY_2048];
    unsigned char *der = NULL, ct [256], out [512];
    cs_drv_key_t key = td_key (pkey, NULL, &der);
    static const struct { CK_MECHANISM_TYPE hash; CK_RSA_PKCS_MGF_TYPE mgf; const char *label; } oaep [] = {
        { CKM_SHA_1, CKG_MGF1_SHA1, NULL }, { CKM_SHA224, CKG_MGF1_SHA224, "l" },
        { CKM_SHA256, CKG_MGF1_SHA256, "label" }, { CKM_SHA384, CKG_MGF1_SHA384, NULL },
        { CKM_SHA512, CKG_MGF1_SHA512, "lbl" },
    };
    const EVP_MD *mds [] = { EVP_sha1 (), EVP_sha224 (), EVP_sha256 (), EVP_sha384 (), EVP_sha512 () };
    for (size_t i = 0; i < 5; i++) {
        size_t ct_len = th_rsa_encrypt (pkey, mds [i], oaep [i].label, "oaep secret", ct, sizeof ct);
        cs_drv_mech_t mech = { CKM_RSA_PKCS_OAEP, oaep [i].hash, oaep [i].mgf, 0,
                           (const unsigned char *) oaep [i].label, oaep [i].label ? strlen (oaep [i].label) : 0 };
        size_t len = sizeof out;
        ck_assert_uint_eq (s_gmp.decrypt (s_gmp.session, &key, &mech, ct, ct_len, out, &len), CKR_OK);
        ck_assert (len == 11 && memcmp (out, "oaep secret", 11) == 0);
        len = 10;                                       /* decoded, but does not fit */
        ck_assert_uint_eq (s_gmp.decrypt (s_gmp.session, &key, &mech, ct, ct_len, out, &len),
                           CKR_BUFFER_TOO_SMALL);
        mech.label_len = oaep [i].label ? 0 : 1;        /* another label: bad padding */
        mech.label = (const unsigned char *) "x";
        len = sizeof out;
        ck_assert_uint_eq (s_gmp.decrypt (s_gmp.session, &key, &mech, ct, ct_len, out, &len),
                           CKR_ENCRYPTED_DATA_INVALID);
        ct [9] ^= 1;
        mech.label_len = oaep [i].label ? strlen (oaep [i].label) : 0;
        mech.label = (const unsigned char *) oaep [i].label;
        len = sizeof out;
        ck_assert_uint_eq (s_gmp.decrypt (s_gmp.session, &key, &mech, ct, ct_len, out, &len),
                           CKR_ENCRYPTED_DATA_INVALID);
    }
    /*  PKCS#1 v1.5: good, tampered, and an OAEP ciphertext (wrong padding).  */
    size_t ct_len = th_rsa_encrypt (pkey, NULL, NULL, "pkcs1", ct, sizeof ct);
    cs_drv_mech_t mech = { CKM_RSA_PKCS };
    size_t len = sizeof out;
    ck_assert_uint_eq (s_gmp.decrypt (s_gmp.session, &key, &mech, ct, ct_len, out, &len), CKR_OK);
    ck_assert (len == 5 && memcmp (out, "pkcs1", 5) == 0);
    /*  Raw: the whole padded block (00 02 ... 00 "pkcs1").  */
    mech = (cs_drv_mech_t) { CKM_RSA_X_509 };
    len = sizeof out;
    ck_assert_uint_eq (s_gmp.decrypt (s_gmp.session, &key, &mech, ct, ct_len, out, &len), CKR_OK);
    ck_assert_uint_eq (len, 256);
    ck_assert (out [0] == 0 && out [1] == 0x02 && memcmp (out + 251, "pkcs1", 5) == 0);
    len = 255;
    ck_assert_uint_eq (s_gmp.decrypt (s_gmp.session, &key, &mech, ct, ct_len, out, &len), CKR_BUFFER_TOO_SMALL);
    ct_len = th_rsa_encrypt (pkey, EVP_sha256 (), NULL, "oaep", ct, sizeof ct);
    mech = (cs_drv_mech_t) { CKM_RSA_PKCS };
    len = sizeof out;
    ck_assert_uint_eq (s_gmp.decrypt (s_gmp.session, &key, &mech, ct, ct_len, out, &len),
                       CKR_ENCRYPTED_DATA_INVALID);
    /*  Wrong ciphertext length; unknown OAEP hash; sign-only mechanisms.  */
    len = sizeof out;
    ck_assert_uint_eq (s_gmp.decrypt (s_gmp.session, &key, &mech, ct, 255, out, &len),
                       CKR_ENCRYPTED_DATA_LEN_RANGE);
    mech = (cs_drv_mech_t) { CKM_RSA_PKCS_OAEP, CKM_MD5, CKG_MGF1_SHA1 };
    ck_assert_uint_eq (s_gmp.decrypt (s_gmp.session, &key, &mech, ct, ct_len, out, &len),
                       CKR_MECHANISM_PARAM_INVALID);
    mech = (cs_drv_mech_t) { CKM_RSA_PKCS_PSS, CKM_SHA256, CKG_MGF1_SHA256, 32 };
    ck_assert_uint_eq (s_gmp.decrypt (s_gmp.session, &key, &mech, ct, ct_len, out, &len),
                       CKR_KEY_FUNCTION_NOT_PERMITTED);
    mech = (cs_drv_mech_t) { CKM_ECDSA };
    ck_assert_uint_eq (s_gmp.decrypt (s_gmp.session, &key, &mech, ct, ct_len, out, &len),
                       CKR_KEY_FUNCTION_NOT_PERMITTED);
    mech = (cs_drv_mech_t) { CKM_AES_CBC };
    ck_assert_uint_eq (s_gmp.decrypt (s_gmp.session, &key, &mech, ct, ct_len, out, &len),
                       CKR_MECHANISM_INVALID);
    OPENSSL_free (der);
}
END_TEST

/*  Raw RSA of an input whose integer is not below n (n itself, n with its
 *  low half all ones, all 0xff) is refused, never reduced: CKR_DATA_INVALID to sign and
 *  CKR_ENCRYPTED_DATA_INVALID to decrypt, exactly what the openssl board
 *  answers for the same key and input.  0, 1 and n - 1 are fine.  */
START_TEST (test_input_not_below_modulus)
{
    s_drv_t ossl = { 0 };
    td_open_cached (&ossl, "openssl");
    EVP_PKEY *pkey = s_keys [S_KEY_2048];
    unsigned char *der = NULL, n [256], in [256], sig [256], back [256], ones [256];
    cs_drv_key_t key = td_key (pkey, "ks:range", &der);
    s_modulus (pkey, n, sizeof n);
    memset (ones, 0xff, sizeof ones);
    cs_drv_mech_t raw = { CKM_RSA_X_509 };
    const unsigned char *bad [3] = { n, in, ones };
    memcpy (in, n, sizeof in);
    memset (in + 128, 0xff, 128);               /* above n: its low half all ones */
    for (size_t i = 0; i < 3; i++) {
        size_t len = sizeof sig, len2 = sizeof sig;
        CK_RV ours = s_gmp.sign (s_gmp.session, &key, &raw, bad [i], 256, sig, &len);
        ck_assert_uint_eq (ours, CKR_DATA_INVALID);
        ck_assert_uint_eq (ossl.sign (ossl.session, &key, &raw, bad [i], 256, sig, &len2), ours);
        len = len2 = sizeof sig;
        ours = s_gmp.decrypt (s_gmp.session, &key, &raw, bad [i], 256, sig, &len);
        ck_assert_uint_eq (ours, CKR_ENCRYPTED_DATA_INVALID);
        ck_assert_uint_eq (ossl.decrypt (ossl.session, &key, &raw, bad [i], 256, sig, &len2), ours);
    }
    /*  n - 1 = -1 mod n signs to itself (d is odd); 0 and 1 likewise; a
     *  one-byte input is left-padded and gives OpenSSL's answer.  */
    memcpy (in, n, sizeof in);
    in [255] -= 1;
    size_t len = sizeof sig;
    ck_assert_uint_eq (s_gmp.sign (s_gmp.session, &key, &raw, in, 256, sig, &len), CKR_OK);
    ck_assert_mem_eq (sig, in, 256);
    memset (in, 0, sizeof in);
    len = sizeof sig;
    ck_assert_uint_eq (s_gmp.sign (s_gmp.session, &key, &raw, in, 256, sig, &len), CKR_OK);
    ck_assert_mem_eq (sig, in, 256);
    in [255] = 1;
    len = sizeof sig;
    ck_assert_uint_eq (s_gmp.sign (s_gmp.session, &key, &raw, in + 255, 1, sig, &len), CKR_OK);
    ck_assert_uint_eq (len, 256);
    ck_assert_mem_eq (sig, in, 256);
    in [255] = 2;
    len = sizeof sig;
    ck_assert_uint_eq (s_gmp.sign (s_gmp.session, &key, &raw, in + 255, 1, sig, &len), CKR_OK);
    size_t len2 = sizeof back;
    ck_assert_uint_eq (ossl.sign (ossl.session, &key, &raw, in + 255, 1, back, &len2), CKR_OK);
    ck_assert_mem_eq (sig, back, 256);
    OPENSSL_free (der);
    td_close (&ossl);
}
END_TEST

/*  Fault attack defence (Boneh, DeMillo, Lipton): a bit flipped in either
 *  CRT half is caught by the check, the call fails with CKR_DEVICE_ERROR
 *  and the output holds zeros, not the faulty value (from which
 *  gcd (s^e - m, n) would give a prime).  The key keeps working after.  */
START_TEST (test_fault_caught)
{
    EVP_PKEY *pkey = s_keys [_i == 0 ? S_KEY_2048 : 0];
    gmp_rsa_key_t *key = gmp_rsa_key_new (pkey);
    ck_assert_ptr_nonnull (key);
    size_t k = gmp_rsa_key_bytes (key);
    unsigned char in [512], out [512], back [512], di [51];
    th_digest_info ("fault", di);
    in [0] = 0x00;                              /* EMSA-PKCS1-v1_5 (RFC 8017 §9.2) */
    in [1] = 0x01;
    memset (in + 2, 0xff, k - 51 - 3);
    in [k - 52] = 0x00;
    memcpy (in + k - 51, di, 51);
    for (gmp_rsa_fault_t fault = GMP_RSA_FAULT_P; fault <= GMP_RSA_FAULT_Q; fault++) {
        memset (out, 0xa5, sizeof out);
        ck_assert_uint_eq (gmp_rsa_private_fault (key, in, out, fault), CKR_DEVICE_ERROR);
        for (size_t i = 0; i < k; i++)
            ck_assert_uint_eq (out [i], 0);
        ck_assert_uint_eq (out [k], 0xa5);      /* and nothing past k */
    }
    ck_assert_uint_eq (gmp_rsa_private_fault (key, in, out, GMP_RSA_FAULT_NONE), CKR_OK);
    ck_assert (th_verify_rsa_pkcs1 (pkey, di, 51, out, k));
    ck_assert_uint_eq (gmp_rsa_private (key, in, out), CKR_OK);
    ck_assert_uint_eq (s_recover_raw (pkey, out, k, back, sizeof back), k);
    ck_assert_mem_eq (back, in, k);
    gmp_rsa_key_destroy (&key);
    ck_assert_ptr_null (key);
}
END_TEST

/*  The cache: a keystore key is made once per worker session and kept; a
 *  per-request key leaves no entry; the cache is bounded (4) and an
 *  evicted key works when it comes back; a new DER under an old ref is
 *  remade, never signed with the old key.  */
START_TEST (test_cache)
{
    EVP_PKEY *pkey = s_keys [2], *other = s_keys [S_KEY_2048];
    unsigned char *der = NULL, *der2 = NULL, di [51], sig [256], sig2 [256];
    cs_drv_key_t key = td_key (pkey, "ks:cached", &der);
    cs_drv_mech_t mech = { CKM_RSA_PKCS };
    th_digest_info ("cache", di);
    for (int i = 0; i < 3; i++) {
        size_t len = sizeof sig;
        ck_assert_uint_eq (s_gmp.sign (s_gmp.session, &key, &mech, di, 51, i ? sig2 : sig, &len), CKR_OK);
        if (i)
            ck_assert_mem_eq (sig, sig2, 256);
        ck_assert_uint_eq (s_gmp.cached (s_gmp.session), 1);
    }
    ck_assert (th_verify_rsa_pkcs1 (pkey, di, 51, sig, 256));
    /*  Per-request: nothing kept.  */
    key.ref = NULL;
    for (int i = 0; i < 2; i++) {
        size_t len = sizeof sig;
        ck_assert_uint_eq (s_gmp.sign (s_gmp.session, &key, &mech, di, 51, sig, &len), CKR_OK);
        ck_assert (th_verify_rsa_pkcs1 (pkey, di, 51, sig, len));
    }
    ck_assert_uint_eq (s_gmp.cached (s_gmp.session), 1);
    /*  Same ref, another key's DER: signed with the new key.  */
    cs_drv_key_t swapped = td_key (other, "ks:cached", &der2);
    size_t len = sizeof sig;
    ck_assert_uint_eq (s_gmp.sign (s_gmp.session, &swapped, &mech, di, 51, sig, &len), CKR_OK);
    ck_assert (th_verify_rsa_pkcs1 (other, di, 51, sig, len));
    ck_assert (!th_verify_rsa_pkcs1 (pkey, di, 51, sig, len));
    ck_assert_uint_eq (s_gmp.cached (s_gmp.session), 1);
    /*  Bounded: six refs leave four; the first comes back and works.  */
    for (int i = 0; i < 6; i++) {
        char ref [16];
        snprintf (ref, sizeof ref, "ks:%d", i);
        key.ref = ref;
        len = sizeof sig;
        ck_assert_uint_eq (s_gmp.sign (s_gmp.session, &key, &mech, di, 51, sig, &len), CKR_OK);
    }
    ck_assert_uint_eq (s_gmp.cached (s_gmp.session), 4);
    key.ref = "ks:0";
    len = sizeof sig;
    ck_assert_uint_eq (s_gmp.sign (s_gmp.session, &key, &mech, di, 51, sig, &len), CKR_OK);
    ck_assert (th_verify_rsa_pkcs1 (pkey, di, 51, sig, len));
    OPENSSL_free (der);
    OPENSSL_free (der2);
}
END_TEST

/*  What a cached key saves: its blinding pair is drawn on first use, then
 *  squared per use and drawn afresh every 32 uses (a new key object, as a
 *  per-request key gets, draws on its first use).  The unit, not the
 *  driver: the counter is per copy of gmp_rsa.c.  */
START_TEST (test_blinding_reuse)
{
    EVP_PKEY *pkey = s_keys [0];
    gmp_rsa_key_t *key = gmp_rsa_key_new (pkey);
    ck_assert_ptr_nonnull (key);
    unsigned char in [128] = { 0 }, out [128], back [128];
    unsigned long drawn = gmp_rsa_blindings_drawn ();
    for (int i = 0; i < 65; i++) {
        in [127] = (unsigned char) i;
        in [1] = 0x5a;
        ck_assert_uint_eq (gmp_rsa_private (key, in, out), CKR_OK);
        ck_assert_uint_eq (s_recover_raw (pkey, out, 128, back, sizeof back), 128);
        ck_assert_mem_eq (back, in, 128);
    }
    ck_assert_uint_eq (gmp_rsa_blindings_drawn () - drawn, 3);  /* uses 1, 33 and 65 */
    gmp_rsa_key_destroy (&key);
    key = gmp_rsa_key_new (pkey);
    ck_assert_uint_eq (gmp_rsa_private (key, in, out), CKR_OK);
    ck_assert_uint_eq (gmp_rsa_blindings_drawn () - drawn, 4);
    gmp_rsa_key_destroy (&key);
}
END_TEST

/*  pkey with its CRT coefficient replaced by qInv + 1 (OpenSSL takes it).  */
static EVP_PKEY *
s_bad_crt (EVP_PKEY *pkey)
{
    static const char *names [] = { OSSL_PKEY_PARAM_RSA_N, OSSL_PKEY_PARAM_RSA_E, OSSL_PKEY_PARAM_RSA_D,
        OSSL_PKEY_PARAM_RSA_FACTOR1, OSSL_PKEY_PARAM_RSA_FACTOR2, OSSL_PKEY_PARAM_RSA_EXPONENT1,
        OSSL_PKEY_PARAM_RSA_EXPONENT2, OSSL_PKEY_PARAM_RSA_COEFFICIENT1 };
    BIGNUM *bn [8] = { NULL };
    OSSL_PARAM_BLD *bld = OSSL_PARAM_BLD_new ();
    for (size_t i = 0; i < 8; i++) {
        ck_assert (EVP_PKEY_get_bn_param (pkey, names [i], &bn [i]));
        if (i == 7)
            ck_assert (BN_add_word (bn [i], 1));
        ck_assert (OSSL_PARAM_BLD_push_BN (bld, names [i], bn [i]));
    }
    OSSL_PARAM *params = OSSL_PARAM_BLD_to_param (bld);
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_name (NULL, "RSA", NULL);
    EVP_PKEY *bad = NULL;
    ck_assert (ctx && EVP_PKEY_fromdata_init (ctx) > 0);
    ck_assert (EVP_PKEY_fromdata (ctx, &bad, EVP_PKEY_KEYPAIR, params) > 0);
    EVP_PKEY_CTX_free (ctx);
    OSSL_PARAM_free (params);
    OSSL_PARAM_BLD_free (bld);
    for (size_t i = 0; i < 8; i++)
        BN_clear_free (bn [i]);
    return bad;
}

/*  Material the board cannot use: junk, a resident id, an EC key, an RSA
 *  key out of range, a three-prime key, a key with a wrong CRT value (refused
 *  when made, not reported as a fault later).  */
START_TEST (test_unusable_keys)
{
    unsigned char di [51], sig [512], *der = NULL;
    cs_drv_mech_t mech = { CKM_RSA_PKCS };
    th_digest_info ("x", di);
    unsigned char junk [] = { 0x30, 0x03, 0x02, 0x01, 0x00 };
    cs_drv_key_t bad = { NULL, 0, junk, sizeof junk, NULL };
    size_t len = sizeof sig;
    ck_assert_uint_eq (s_gmp.sign (s_gmp.session, &bad, &mech, di, 51, sig, &len), CKR_KEY_HANDLE_INVALID);
    cs_drv_key_t resident = { (const unsigned char *) "\x01", 1, NULL, 0, NULL };
    ck_assert_uint_eq (s_gmp.sign (s_gmp.session, &resident, &mech, di, 51, sig, &len), CKR_KEY_HANDLE_INVALID);
    ck_assert_uint_eq (s_gmp.decrypt (s_gmp.session, &resident, &mech, di, 51, sig, &len), CKR_KEY_HANDLE_INVALID);
    EVP_PKEY *ec = EVP_EC_gen ("P-256");
    cs_drv_key_t key = td_key (ec, "ks:ec", &der);
    ck_assert_uint_eq (s_gmp.sign (s_gmp.session, &key, &mech, di, 51, sig, &len), CKR_KEY_TYPE_INCONSISTENT);
    mech.type = CKM_ECDSA;
    ck_assert_uint_eq (s_gmp.sign (s_gmp.session, &key, &mech, di, 32, sig, &len), CKR_KEY_TYPE_INCONSISTENT);
    mech.type = CKM_RSA_PKCS;
    OPENSSL_free (der);
    EVP_PKEY_free (ec);
    EVP_PKEY *small = s_rsa_gen (512, 65537, 2);
    ck_assert_ptr_nonnull (small);
    key = td_key (small, NULL, &der);
    ck_assert_uint_eq (s_gmp.sign (s_gmp.session, &key, &mech, di, 51, sig, &len), CKR_KEY_SIZE_RANGE);
    OPENSSL_free (der);
    EVP_PKEY_free (small);
    EVP_PKEY *three = s_rsa_gen (2048, 65537, 3);
    ck_assert_ptr_nonnull (three);
    key = td_key (three, "ks:three", &der);
    ck_assert_uint_eq (s_gmp.sign (s_gmp.session, &key, &mech, di, 51, sig, &len), CKR_KEY_HANDLE_INVALID);
    ck_assert_ptr_null (gmp_rsa_key_new (three));
    OPENSSL_free (der);
    EVP_PKEY_free (three);
    EVP_PKEY *wrong = s_bad_crt (s_keys [S_KEY_2048]);
    key = td_key (wrong, "ks:wrong", &der);
    ck_assert_uint_eq (s_gmp.sign (s_gmp.session, &key, &mech, di, 51, sig, &len), CKR_KEY_HANDLE_INVALID);
    ck_assert_ptr_null (gmp_rsa_key_new (wrong));
    ck_assert_uint_eq (s_gmp.cached (s_gmp.session), 0);
    OPENSSL_free (der);
    EVP_PKEY_free (wrong);
}
END_TEST

/*  GMP memory functions that count the blocks freed with a non-zero byte
 *  while s_watch is set (they wrap malloc, like GMP's own).  */
static bool s_watch;
static int s_freed, s_dirty;

static void *
s_gmp_alloc (size_t size)
{
    return malloc (size);
}

static void *
s_gmp_realloc (void *ptr, size_t old, size_t size)
{
    (void) old;
    return realloc (ptr, size);
}

static void
s_gmp_free (void *ptr, size_t size)
{
    if (s_watch) {
        s_freed++;
        for (size_t i = 0; i < size; i++)
            if (((unsigned char *) ptr) [i]) {
                s_dirty++;
                break;
            }
    }
    free (ptr);
}

/*  Every limb of a key (its numbers, blinding pair and workspace, after an
 *  operation filled them) is overwritten before GMP frees it.  */
START_TEST (test_key_wiped)
{
    void *(*alloc) (size_t), *(*realloc_fn) (void *, size_t, size_t);
    void (*free_fn) (void *, size_t);
    mp_get_memory_functions (&alloc, &realloc_fn, &free_fn);
    mp_set_memory_functions (s_gmp_alloc, s_gmp_realloc, s_gmp_free);
    gmp_rsa_key_t *key = gmp_rsa_key_new (s_keys [S_KEY_2048]);
    ck_assert_ptr_nonnull (key);
    unsigned char in [256] = { 0x00, 0x42, 0x17 }, out [256];
    ck_assert_uint_eq (gmp_rsa_private (key, in, out), CKR_OK);
    s_watch = true;
    gmp_rsa_key_destroy (&key);
    s_watch = false;
    mp_set_memory_functions (alloc, realloc_fn, free_fn);
    ck_assert_int_ge (s_freed, 9);          /* n e p q dP dQ qInv A Ai, and the workspace */
    ck_assert_int_eq (s_dirty, 0);
}
END_TEST

START_TEST (test_self_test)
{
    double us = 0;
    ck_assert_int_eq (gmp_rsa_self_test (&us), 0);
    ck_assert (us > 0);
}
END_TEST

int
main (void)
{
    if (!tr_driver_dir_set ())
        return 77;
    for (size_t i = 0; i < S_KEYS; i++)
        if (!(s_keys [i] = s_rsa_gen (s_bits [i], s_exps [i], 2))) {
            fprintf (stderr, "cannot generate RSA-%u with e = %u\n", s_bits [i], s_exps [i]);
            return 99;
        }
    Suite *suite = suite_create ("driver_gmp");
    TCase *tc = tr_tcase ("gmp", s_setup, s_teardown);
    tcase_add_test (tc, test_capabilities_and_mechanisms);
    tcase_add_loop_test (tc, test_sizes_and_exponents, 0, S_KEYS);
    tcase_add_test (tc, test_sign_refusals);
    tcase_add_test (tc, test_decrypt_refusals);
    tcase_add_test (tc, test_input_not_below_modulus);
    tcase_add_loop_test (tc, test_fault_caught, 0, 2);
    tcase_add_test (tc, test_cache);
    tcase_add_test (tc, test_blinding_reuse);
    tcase_add_test (tc, test_unusable_keys);
    tcase_add_test (tc, test_key_wiped);
    tcase_add_test (tc, test_self_test);
    suite_add_tcase (suite, tc);
    int status = tr_run (suite);
    for (size_t i = 0; i < S_KEYS; i++)
        EVP_PKEY_free (s_keys [i]);
    return status;
}
