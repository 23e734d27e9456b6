/*  test_drv_sym.c — the drivers' secret-key code (shim-drivers/drv_sym.c,
 *  CS_DRV_SYMMETRIC of the openssl board) against published vectors, for
 *  the mechanisms of issue #10's second slice: AES-CTR (NIST SP 800-38A
 *  F.5.1), AES key wrap (RFC 3394 §4.1-4.3, §4.6) and with padding (RFC
 *  5649 §6), AES-CMAC (NIST SP 800-38B D.1, D.3), HMAC with SHA-1 (RFC
 *  2202 §3 case 1) and SHA-224/384/512 (RFC 4231 §4.2), and Triple-DES
 *  ECB/CBC/CBC-PAD (values checked with Python's `cryptography`, an
 *  implementation other than OpenSSL); plus the length and parameter
 *  refusals of the driver.
 */
#include <check.h>
#include <string.h>
#include "drv_sym.h"
#include "test_run.h"

/*  Hex string -> bytes; returns the length.  */
static size_t
s_hex (const char *hex, unsigned char *out)
{
    size_t n = 0;
    for (; hex [0] && hex [1]; hex += 2) {
        unsigned v;
        ck_assert (sscanf (hex, "%2x", &v) == 1);
        out [n++] = (unsigned char) v;
    }
    return n;
}

/*  Runs one operation; asserts `want_rv` and, on CKR_OK, the output `want_hex`.  */
static void
s_run (CK_MECHANISM_TYPE mech, int operation, const char *key_hex, const char *iv_hex, const char *in_hex,
       CK_RV want_rv, const char *want_hex)
{
    unsigned char key [64], iv [32], in [128], want [160], out [256];
    size_t key_len = s_hex (key_hex, key), iv_len = iv_hex ? s_hex (iv_hex, iv) : 0, in_len = s_hex (in_hex, in);
    size_t out_len = in_len + CS_SYM_OUT_EXTRA;
    cs_sym_t op = { mech, operation, key, key_len, iv_len ? iv : NULL, iv_len, NULL, 0, 0, in, in_len };
    CK_RV rv = drv_sym_run (&op, out, &out_len);
    ck_assert_msg (rv == want_rv, "mechanism 0x%lx op %d: CK_RV 0x%lx, expected 0x%lx", mech, operation, rv, want_rv);
    if (rv == CKR_OK) {
        size_t want_len = s_hex (want_hex, want);
        ck_assert_msg (out_len == want_len && memcmp (out, want, want_len) == 0,
                       "mechanism 0x%lx op %d: output differs", mech, operation);
    }
}

#define ENC CS_SYM_ENCRYPT
#define DEC CS_SYM_DECRYPT
#define MAC CS_SYM_SIGN

static const char *s_k128 = "2b7e151628aed2a6abf7158809cf4f3c";     /* SP 800-38A/B AES-128 */
static const char *s_m64 = "6bc1bee22e409f96e93d7e117393172aae2d8a571e03ac9c9eb76fac45af8e51"
                           "30c81c46a35ce411e5fbc1191a0a52eff69f2445df4f9b17ad2b417be66c3710";

START_TEST (test_ctr)
{
    const char *ctr = "874d6191b620e3261bef6864990db6ce9806f66b7970fdff8617187bb9fffdff"
                      "5ae4df3edbd5d35e5b4f09020db03eab1e031dda2fbe03d1792170a0f3009cee";
    const char *cb = "f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff";
    s_run (CKM_AES_CTR, ENC, s_k128, cb, s_m64, CKR_OK, ctr);
    s_run (CKM_AES_CTR, DEC, s_k128, cb, ctr, CKR_OK, s_m64);
    s_run (CKM_AES_CTR, ENC, s_k128, cb, "6bc1bee22e", CKR_OK, "874d6191b6");     /* a partial block */
    s_run (CKM_AES_CTR, ENC, s_k128, "f0f1f2f3f4f5f6f7", s_m64, CKR_MECHANISM_PARAM_INVALID, NULL);
}
END_TEST

START_TEST (test_key_wrap)
{
    const char *data = "00112233445566778899aabbccddeeff";
    const char *k192 = "000102030405060708090a0b0c0d0e0f1011121314151617";
    const char *k256 = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";
    s_run (CKM_AES_KEY_WRAP, ENC, "000102030405060708090a0b0c0d0e0f", NULL, data, CKR_OK,
           "1fa68b0a8112b447aef34bd8fb5a7b829d3e862371d2cfe5");
    s_run (CKM_AES_KEY_WRAP, ENC, k192, NULL, data, CKR_OK, "96778b25ae6ca435f92b5b97c050aed2468ab8a17ad84e5d");
    s_run (CKM_AES_KEY_WRAP, ENC, k256, NULL, data, CKR_OK, "64e8c3f9ce0f5ba263e9777905818a2a93c8191e7d6e8ae7");
    s_run (CKM_AES_KEY_WRAP, ENC, k256, NULL, "00112233445566778899aabbccddeeff000102030405060708090a0b0c0d0e0f",
           CKR_OK, "28c9f404c4b810f4cbccb35cfb87f8263f5786e2d80ed326cbc7f0e71a99f43bfb988b9b7a02dd21");
    s_run (CKM_AES_KEY_WRAP, DEC, k256, NULL, "64e8c3f9ce0f5ba263e9777905818a2a93c8191e7d6e8ae7", CKR_OK, data);
    /*  The RFC's default IV given explicitly; a flipped bit fails the check.  */
    s_run (CKM_AES_KEY_WRAP, DEC, k256, "a6a6a6a6a6a6a6a6", "64e8c3f9ce0f5ba263e9777905818a2a93c8191e7d6e8ae7",
           CKR_OK, data);
    s_run (CKM_AES_KEY_WRAP, DEC, k256, NULL, "64e8c3f9ce0f5ba263e9777905818a2a93c8191e7d6e8ae6",
           CKR_ENCRYPTED_DATA_INVALID, NULL);
    s_run (CKM_AES_KEY_WRAP, ENC, k256, NULL, "0011223344556677", CKR_DATA_LEN_RANGE, NULL);
    s_run (CKM_AES_KEY_WRAP, ENC, k256, NULL, "00112233445566778899aabbccddeeff00", CKR_DATA_LEN_RANGE, NULL);
    s_run (CKM_AES_KEY_WRAP, DEC, k256, NULL, data, CKR_ENCRYPTED_DATA_LEN_RANGE, NULL);
    s_run (CKM_AES_KEY_WRAP, ENC, k256, "a6a6a6a6", data, CKR_MECHANISM_PARAM_INVALID, NULL);
    /*  RFC 5649 §6: a 20-byte and a 7-byte key with a 192-bit KEK.  */
    const char *kek = "5840df6e29b02af1ab493b705bf16ea1ae8338f4dcc176a8";
    s_run (CKM_AES_KEY_WRAP_PAD, ENC, kek, NULL, "c37b7e6492584340bed12207808941155068f738", CKR_OK,
           "138bdeaa9b8fa7fc61f97742e72248ee5ae6ae5360d1ae6a5f54f373fa543b6a");
    s_run (CKM_AES_KEY_WRAP_PAD, ENC, kek, NULL, "466f7250617369", CKR_OK, "afbeb0f07dfbf5419200f2ccb50bb24f");
    s_run (CKM_AES_KEY_WRAP_PAD, DEC, kek, NULL, "138bdeaa9b8fa7fc61f97742e72248ee5ae6ae5360d1ae6a5f54f373fa543b6a",
           CKR_OK, "c37b7e6492584340bed12207808941155068f738");
    s_run (CKM_AES_KEY_WRAP_PAD, DEC, kek, NULL, "afbeb0f07dfbf5419200f2ccb50bb24f", CKR_OK, "466f7250617369");
    s_run (CKM_AES_KEY_WRAP_PAD, DEC, kek, NULL, "afbeb0f07dfbf5419200f2ccb50bb24e", CKR_ENCRYPTED_DATA_INVALID,
           NULL);
    s_run (CKM_AES_KEY_WRAP_PAD, DEC, kek, NULL, "afbeb0f07dfbf541", CKR_ENCRYPTED_DATA_LEN_RANGE, NULL);
    s_run (CKM_AES_KEY_WRAP_PAD, ENC, kek, NULL, "", CKR_DATA_LEN_RANGE, NULL);
}
END_TEST

START_TEST (test_macs)
{
    /*  SP 800-38B D.1 examples 1-4 (AES-128) and D.3 examples 9-10 (AES-256).  */
    s_run (CKM_AES_CMAC, MAC, s_k128, NULL, "", CKR_OK, "bb1d6929e95937287fa37d129b756746");
    s_run (CKM_AES_CMAC, MAC, s_k128, NULL, "6bc1bee22e409f96e93d7e117393172a", CKR_OK,
           "070a16b46b4d4144f79bdd9dd04a287c");
    s_run (CKM_AES_CMAC, MAC, s_k128, NULL, "6bc1bee22e409f96e93d7e117393172aae2d8a571e03ac9c9eb76fac45af8e51"
           "30c81c46a35ce411", CKR_OK, "dfa66747de9ae63030ca32611497c827");
    s_run (CKM_AES_CMAC, MAC, s_k128, NULL, s_m64, CKR_OK, "51f0bebf7e3b9d92fc49741779363cfe");
    const char *k256 = "603deb1015ca71be2b73aef0857d77811f352c073b6108d72d9810a30914dff4";
    s_run (CKM_AES_CMAC, MAC, k256, NULL, "", CKR_OK, "028962f61b7bf89efc6b551f4667d983");
    s_run (CKM_AES_CMAC, MAC, k256, NULL, "6bc1bee22e409f96e93d7e117393172a", CKR_OK,
           "28a7023f452e8f82bd4bf28d8c37c35c");
    s_run (CKM_AES_CMAC, ENC, s_k128, NULL, "", CKR_MECHANISM_INVALID, NULL);
    /*  HMAC: key 0x0b x 20, "Hi There".  */
    const char *k = "0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b", *hi = "4869205468657265";
    s_run (CKM_SHA_1_HMAC, MAC, k, NULL, hi, CKR_OK, "b617318655057264e28bc0b6fb378c8ef146be00");
    s_run (CKM_SHA224_HMAC, MAC, k, NULL, hi, CKR_OK, "896fb1128abbdf196832107cd49df33f47b4b1169912ba4f53684b22");
    s_run (CKM_SHA384_HMAC, MAC, k, NULL, hi, CKR_OK, "afd03944d84895626b0825f4ab46907f15f9dadbe4101ec6"
           "82aa034c7cebc59cfaea9ea9076ede7f4af152e8b2fa9cb6");
    s_run (CKM_SHA512_HMAC, MAC, k, NULL, hi, CKR_OK, "87aa7cdea5ef619d4ff0b4241a1d6cb02379f4e2ce4ec2787ad0b30545e17cde"
           "daa833b7d6b8a702038b274eaea3f4e4be9d914eeb61f1702e696c203a126854");
    /*  The _GENERAL rows never reach a board.  */
    s_run (CKM_SHA256_HMAC_GENERAL, MAC, k, NULL, hi, CKR_MECHANISM_INVALID, NULL);
}
END_TEST

START_TEST (test_des3)
{
    const char *key = "0123456789abcdeffedcba987654321089abcdef01234567", *iv = "0001020304050607";
    const char *plain = "68656c6c6f20776f726c643132333435";         /* "hello world12345" */
    s_run (CKM_DES3_ECB, ENC, key, NULL, plain, CKR_OK, "b7bf131b336ea699602b147f2a1b64ca");
    s_run (CKM_DES3_ECB, DEC, key, NULL, "b7bf131b336ea699602b147f2a1b64ca", CKR_OK, plain);
    s_run (CKM_DES3_CBC, ENC, key, iv, plain, CKR_OK, "bfc9bb8fb95cd4f65f369c940ed75517");
    s_run (CKM_DES3_CBC_PAD, ENC, key, iv, plain, CKR_OK, "bfc9bb8fb95cd4f65f369c940ed755173464b779f1bf09ba");
    s_run (CKM_DES3_CBC_PAD, DEC, key, iv, "bfc9bb8fb95cd4f65f369c940ed755173464b779f1bf09ba", CKR_OK, plain);
    s_run (CKM_DES3_CBC, ENC, key, iv, "68656c6c6f20776f726c6431", CKR_DATA_LEN_RANGE, NULL);
    s_run (CKM_DES3_CBC, DEC, key, iv, "68656c6c6f20776f726c6431", CKR_ENCRYPTED_DATA_LEN_RANGE, NULL);
    s_run (CKM_DES3_CBC, ENC, key, "000102030405060708090a0b0c0d0e0f", plain, CKR_MECHANISM_PARAM_INVALID, NULL);
    s_run (CKM_DES3_CBC, ENC, "0123456789abcdeffedcba9876543210", iv, plain, CKR_KEY_SIZE_RANGE, NULL);
}
END_TEST

int
main (void)
{
    Suite *suite = suite_create ("drv_sym");
    TCase *tc = tcase_create ("vectors");
    tcase_add_test (tc, test_ctr);
    tcase_add_test (tc, test_key_wrap);
    tcase_add_test (tc, test_macs);
    tcase_add_test (tc, test_des3);
    suite_add_tcase (suite, tc);
    return tr_run (suite);
}
