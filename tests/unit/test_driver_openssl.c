/*  test_driver_openssl.c — the openssl driver (shim-drivers/openssl) through
 *  its ABI v2 dispatch table, loaded from CRYPTOSERVER_DRIVER_DIR as the
 *  broker loads it: every mechanism signs or decrypts with key material and
 *  OpenSSL verifies; generated keys (RSA, P-256, P-384, Ed25519) sign through
 *  the driver and OpenSSL verifies with their public half; the per-session
 *  cache gives the same results and per-request keys leave no entry behind;
 *  the secret-key operations give the published test vectors.
 */
#include <openssl/x509.h>
#include <openssl/core_names.h>
#include "test_driver_helpers.h"
#include "test_run.h"

static td_board_t s_drv;            /* openssl.so, a board (cache-size 4), a session */

/*  Loads DRIVER_DIR/openssl.so and opens a board and a session.  */
static void
s_setup (void)
{
    td_open_cached (&s_drv, "openssl");
}

static void
s_teardown (void)
{
    td_close (&s_drv);
}

START_TEST (test_capabilities_and_mechanisms)
{
    cs_caps_t caps = { 0 };
    cs_drv_capabilities_fn *fn = (cs_drv_capabilities_fn *) cs_driver_lookup (s_drv.driver, CS_DRV_CAPABILITIES);
    ck_assert_ptr_nonnull (fn);
    ck_assert_int_eq (fn (s_drv.board, &caps), 0);
    ck_assert (caps.flags & CS_CAP_KEY_MATERIAL);
    ck_assert (caps.flags & CS_CAP_GENERATE_MATERIAL);
    ck_assert (caps.flags & CS_CAP_DERIVE);
    ck_assert (!(caps.flags & CS_CAP_GENERATE_RESIDENT));
    ck_assert_uint_eq (caps.material_types, CS_KT_RSA | CS_KT_EC | CS_KT_EC_EDWARDS | CS_KT_EC_MONTGOMERY);
    cs_drv_board_keys_fn *keys = (cs_drv_board_keys_fn *) cs_driver_lookup (s_drv.driver, CS_DRV_BOARD_KEYS);
    cs_key_info_t *list = NULL;
    size_t count = 9;
    ck_assert_int_eq (keys (s_drv.board, &list, &count), 0);
    ck_assert_uint_eq (count, 0);
    cs_key_info_free_array (list, count);
}
END_TEST

/*  key-material = false: a board that only generates (its sign, decrypt
 *  and derive jobs route elsewhere, e.g. to a gmp board); a value that is
 *  not a boolean stops the board.  */
START_TEST (test_key_material_off)
{
    cs_drv_board_open_fn *open = (cs_drv_board_open_fn *) cs_driver_lookup (s_drv.driver, CS_DRV_BOARD_OPEN);
    cs_drv_board_close_fn *close_board
        = (cs_drv_board_close_fn *) cs_driver_lookup (s_drv.driver, CS_DRV_BOARD_CLOSE);
    cs_drv_capabilities_fn *caps_fn = (cs_drv_capabilities_fn *) cs_driver_lookup (s_drv.driver, CS_DRV_CAPABILITIES);
    zconfig_t *config = zconfig_new ("root", NULL);
    cs_board_t *board = NULL;
    cs_caps_t caps = { 0 };
    zconfig_put (config, "key-material", "false");
    ck_assert_int_eq (open ("keygen", config, "/tmp", &board), 0);
    ck_assert_int_eq (caps_fn (board, &caps), 0);
    ck_assert_uint_eq (caps.flags, CS_CAP_GENERATE_MATERIAL);
    ck_assert_uint_eq (caps.material_types, 0);
    ck_assert_uint_eq (caps.generate_types, CS_KT_RSA | CS_KT_EC | CS_KT_EC_EDWARDS | CS_KT_EC_MONTGOMERY);
    close_board (&board);
    zconfig_put (config, "key-material", "maybe");
    ck_assert_int_eq (open ("keygen", config, "/tmp", &board), -1);
    ck_assert_ptr_null (board);
    zconfig_destroy (&config);
}
END_TEST

START_TEST (test_rsa_sign)
{
    EVP_PKEY *pkey = EVP_RSA_gen (2048);
    unsigned char *der = NULL, sig [512], sig2 [512], di [51], digest [64];
    cs_drv_key_t key = td_key (pkey, "ks:rsa", &der);
    size_t len = sizeof sig, len2 = sizeof sig2;
    th_digest_info ("hello", di);
    /*  PKCS#1 v1.5 over a DigestInfo, twice: the cached key gives the same bytes.  */
    cs_drv_mech_t mech = { CKM_RSA_PKCS };
    ck_assert_uint_eq (s_drv.sign (s_drv.session, &key, &mech, di, 51, sig, &len), CKR_OK);
    ck_assert_uint_eq (len, 256);
    ck_assert (th_verify_rsa_pkcs1 (pkey, di, 51, sig, len));
    ck_assert_uint_eq (s_drv.cached (s_drv.session), 1);
    ck_assert_uint_eq (s_drv.sign (s_drv.session, &key, &mech, di, 51, sig2, &len2), CKR_OK);
    ck_assert (len2 == len && memcmp (sig, sig2, len) == 0);
    ck_assert_uint_eq (s_drv.cached (s_drv.session), 1);
    /*  PSS: SHA-256/MGF1-SHA256/32, then SHA-384/MGF1-SHA1/0 (any combination).  */
    SHA256 ((const uint8_t *) "pss", 3, digest);
    mech = (cs_drv_mech_t) { CKM_RSA_PKCS_PSS, CKM_SHA256, CKG_MGF1_SHA256, 32 };
    len = sizeof sig;
    ck_assert_uint_eq (s_drv.sign (s_drv.session, &key, &mech, digest, 32, sig, &len), CKR_OK);
    ck_assert (th_verify_rsa_pss (pkey, digest, sig, len));
    SHA384 ((const uint8_t *) "pss", 3, digest);
    mech = (cs_drv_mech_t) { CKM_RSA_PKCS_PSS, CKM_SHA384, CKG_MGF1_SHA1, 0 };
    len = sizeof sig;
    ck_assert_uint_eq (s_drv.sign (s_drv.session, &key, &mech, digest, 48, sig, &len), CKR_OK);
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new (pkey, NULL);
    ck_assert (EVP_PKEY_verify_init (ctx) > 0);
    ck_assert (EVP_PKEY_CTX_set_rsa_padding (ctx, RSA_PKCS1_PSS_PADDING) > 0);
    ck_assert (EVP_PKEY_CTX_set_signature_md (ctx, EVP_sha384 ()) > 0);
    ck_assert (EVP_PKEY_CTX_set_rsa_mgf1_md (ctx, EVP_sha1 ()) > 0);
    ck_assert (EVP_PKEY_CTX_set_rsa_pss_saltlen (ctx, 0) > 0);
    ck_assert_int_eq (EVP_PKEY_verify (ctx, sig, len, digest, 48), 1);
    EVP_PKEY_CTX_free (ctx);
    /*  A wrong digest length for the PSS hash.  */
    len = sizeof sig;
    ck_assert_uint_eq (s_drv.sign (s_drv.session, &key, &mech, digest, 32, sig, &len), CKR_DATA_LEN_RANGE);
    /*  Raw X.509: the public operation gives back the left-padded input.  */
    mech = (cs_drv_mech_t) { CKM_RSA_X_509 };
    len = sizeof sig;
    ck_assert_uint_eq (s_drv.sign (s_drv.session, &key, &mech, di, 51, sig, &len), CKR_OK);
    ck_assert_uint_eq (len, 256);
    unsigned char back [256];
    size_t back_len = sizeof back;
    ctx = EVP_PKEY_CTX_new (pkey, NULL);
    ck_assert (EVP_PKEY_verify_recover_init (ctx) > 0);
    ck_assert (EVP_PKEY_CTX_set_rsa_padding (ctx, RSA_NO_PADDING) > 0);
    ck_assert (EVP_PKEY_verify_recover (ctx, back, &back_len, sig, len) > 0);
    EVP_PKEY_CTX_free (ctx);
    ck_assert_uint_eq (back_len, 256);
    ck_assert (memcmp (back + 256 - 51, di, 51) == 0);
    /*  ECDSA with an RSA key; too small a buffer.  */
    mech = (cs_drv_mech_t) { CKM_ECDSA };
    len = sizeof sig;
    ck_assert_uint_eq (s_drv.sign (s_drv.session, &key, &mech, digest, 32, sig, &len), CKR_KEY_TYPE_INCONSISTENT);
    mech = (cs_drv_mech_t) { CKM_RSA_PKCS };
    len = 100;
    ck_assert_uint_eq (s_drv.sign (s_drv.session, &key, &mech, di, 51, sig, &len), CKR_BUFFER_TOO_SMALL);
    OPENSSL_free (der);
    EVP_PKEY_free (pkey);
}
END_TEST

START_TEST (test_rsa_decrypt)
{
    EVP_PKEY *pkey = EVP_RSA_gen (2048);
    unsigned char *der = NULL, ct [256], out [512];
    cs_drv_key_t key = td_key (pkey, "ks:dec", &der);
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
        ck_assert_uint_eq (s_drv.decrypt (s_drv.session, &key, &mech, ct, ct_len, out, &len), CKR_OK);
        ck_assert (len == 11 && memcmp (out, "oaep secret", 11) == 0);
        ct [9] ^= 1;
        len = sizeof out;
        ck_assert_uint_eq (s_drv.decrypt (s_drv.session, &key, &mech, ct, ct_len, out, &len),
                           CKR_ENCRYPTED_DATA_INVALID);
    }
    size_t ct_len = th_rsa_encrypt (pkey, NULL, NULL, "pkcs1", ct, sizeof ct);
    cs_drv_mech_t mech = { CKM_RSA_PKCS };
    size_t len = sizeof out;
    ck_assert_uint_eq (s_drv.decrypt (s_drv.session, &key, &mech, ct, ct_len, out, &len), CKR_OK);
    ck_assert (len == 5 && memcmp (out, "pkcs1", 5) == 0);
    /*  Raw decryption gives the whole padded block.  */
    mech = (cs_drv_mech_t) { CKM_RSA_X_509 };
    len = sizeof out;
    ck_assert_uint_eq (s_drv.decrypt (s_drv.session, &key, &mech, ct, ct_len, out, &len), CKR_OK);
    ck_assert_uint_eq (len, 256);
    ck_assert (out [1] == 0x02 && memcmp (out + 251, "pkcs1", 5) == 0);
    len = sizeof out;
    ck_assert_uint_eq (s_drv.decrypt (s_drv.session, &key, &mech, ct, 100, out, &len), CKR_ENCRYPTED_DATA_LEN_RANGE);
    OPENSSL_free (der);
    EVP_PKEY_free (pkey);
}
END_TEST

START_TEST (test_ecdsa)
{
    static const char *curves [] = { "P-256", "P-384", "P-521" };
    static const size_t halves [] = { 32, 48, 66 };
    unsigned char digest [48], sig [200];
    SHA384 ((const uint8_t *) "ec", 2, digest);
    for (size_t i = 0; i < 3; i++) {
        EVP_PKEY *pkey = EVP_EC_gen (curves [i]);
        unsigned char *der = NULL;
        cs_drv_key_t key = td_key (pkey, curves [i], &der);
        cs_drv_mech_t mech = { CKM_ECDSA };
        size_t len = sizeof sig;
        ck_assert_uint_eq (s_drv.sign (s_drv.session, &key, &mech, digest, 48, sig, &len), CKR_OK);
        ck_assert_uint_eq (len, 2 * halves [i]);
        ck_assert_msg (th_verify_ecdsa (pkey, digest, 48, sig, len), "curve %s", curves [i]);
        len = sizeof sig;
        ck_assert_uint_eq (s_drv.decrypt (s_drv.session, &key, &mech, digest, 48, sig, &len),
                           CKR_KEY_FUNCTION_NOT_PERMITTED);
        OPENSSL_free (der);
        EVP_PKEY_free (pkey);
    }
}
END_TEST

/*  The uncompressed public point of an EC pkey.  */
static size_t
s_point (EVP_PKEY *pkey, unsigned char *out, size_t max)
{
    size_t len = 0;
    ck_assert (EVP_PKEY_get_octet_string_param (pkey, OSSL_PKEY_PARAM_PUB_KEY, out, max, &len));
    return len;
}

/*  CS_DRV_DERIVE_KEY: Z equals OpenSSL's ECDH from the peer's side on each
 *  curve; bad points, RSA keys and short buffers get their CK_RV.  */
START_TEST (test_ecdh)
{
    static const char *curves [] = { "P-256", "P-384", "P-521" };
    static const size_t fields [] = { 32, 48, 66 };
    cs_drv_derive_key_fn *derive = (cs_drv_derive_key_fn *) cs_driver_lookup (s_drv.driver, CS_DRV_DERIVE_KEY);
    cs_drv_capabilities_fn *caps_fn = (cs_drv_capabilities_fn *) cs_driver_lookup (s_drv.driver, CS_DRV_CAPABILITIES);
    cs_caps_t caps = { 0 };
    ck_assert_ptr_nonnull (derive);
    ck_assert_int_eq (caps_fn (s_drv.board, &caps), 0);
    ck_assert (caps.flags & CS_CAP_DERIVE);
    for (size_t i = 0; i < 3; i++) {
        EVP_PKEY *own = EVP_EC_gen (curves [i]), *peer = EVP_EC_gen (curves [i]);
        unsigned char *der = NULL, point [200], z [128], ref [128];
        cs_drv_key_t key = td_key (own, i == 1 ? NULL : curves [i], &der);
        size_t point_len = s_point (peer, point, sizeof point), len = sizeof z, ref_len = sizeof ref;
        ck_assert_uint_eq (derive (s_drv.session, &key, point, point_len, z, &len), CKR_OK);
        ck_assert_uint_eq (len, fields [i]);
        EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new (peer, NULL);
        ck_assert (EVP_PKEY_derive_init (ctx) > 0 && EVP_PKEY_derive_set_peer (ctx, own) > 0
                   && EVP_PKEY_derive (ctx, ref, &ref_len) > 0);
        EVP_PKEY_CTX_free (ctx);
        ck_assert_uint_eq (ref_len, len);
        ck_assert_mem_eq (z, ref, len);
        len = fields [i] - 1;
        ck_assert_uint_eq (derive (s_drv.session, &key, point, point_len, z, &len), CKR_BUFFER_TOO_SMALL);
        len = sizeof z;
        ck_assert_uint_eq (derive (s_drv.session, &key, point, point_len - 1, z, &len), CKR_MECHANISM_PARAM_INVALID);
        point [point_len - 1] ^= 1;             /* no longer on the curve */
        len = sizeof z;
        ck_assert_uint_eq (derive (s_drv.session, &key, point, point_len, z, &len), CKR_MECHANISM_PARAM_INVALID);
        OPENSSL_free (der);
        EVP_PKEY_free (own);
        EVP_PKEY_free (peer);
    }
    EVP_PKEY *rsa = EVP_RSA_gen (2048);
    unsigned char *der = NULL, point [65] = { 0x04 }, z [64];
    cs_drv_key_t key = td_key (rsa, NULL, &der);
    size_t len = sizeof z;
    ck_assert_uint_eq (derive (s_drv.session, &key, point, sizeof point, z, &len), CKR_KEY_TYPE_INCONSISTENT);
    cs_drv_key_t none = { NULL, 0, NULL, 0, NULL };
    ck_assert_uint_eq (derive (s_drv.session, &none, point, sizeof point, z, &len), CKR_KEY_HANDLE_INVALID);
    OPENSSL_free (der);
    EVP_PKEY_free (rsa);
}
END_TEST

START_TEST (test_eddsa)
{
    EVP_PKEY *pkey = EVP_PKEY_Q_keygen (NULL, NULL, "ED25519");
    unsigned char *der = NULL, sig [64];
    cs_drv_key_t key = td_key (pkey, NULL, &der);
    static const char msg [] = "the whole message, not a digest";
    cs_drv_mech_t mech = { CKM_EDDSA };
    size_t len = sizeof sig;
    ck_assert_uint_eq (s_drv.sign (s_drv.session, &key, &mech, (const unsigned char *) msg, sizeof msg, sig, &len),
                       CKR_OK);
    ck_assert_uint_eq (len, 64);
    EVP_MD_CTX *ctx = EVP_MD_CTX_new ();
    ck_assert (EVP_DigestVerifyInit (ctx, NULL, NULL, NULL, pkey) > 0);
    ck_assert_int_eq (EVP_DigestVerify (ctx, sig, len, (const unsigned char *) msg, sizeof msg), 1);
    EVP_MD_CTX_free (ctx);
    mech.type = CKM_ECDSA;
    len = sizeof sig;
    ck_assert_uint_eq (s_drv.sign (s_drv.session, &key, &mech, sig, 32, sig, &len), CKR_KEY_TYPE_INCONSISTENT);
    OPENSSL_free (der);
    EVP_PKEY_free (pkey);
}
END_TEST

START_TEST (test_per_request_keys_not_cached)
{
    unsigned char di [51], sig [256];
    th_digest_info ("x", di);
    cs_drv_mech_t mech = { CKM_RSA_PKCS };
    EVP_PKEY *pkey = EVP_RSA_gen (2048);
    unsigned char *der = NULL;
    cs_drv_key_t key = td_key (pkey, NULL, &der);
    ck_assert_uint_eq (s_drv.cached (s_drv.session), 0);
    for (int i = 0; i < 3; i++) {
        size_t len = sizeof sig;
        ck_assert_uint_eq (s_drv.sign (s_drv.session, &key, &mech, di, 51, sig, &len), CKR_OK);
        ck_assert (th_verify_rsa_pkcs1 (pkey, di, 51, sig, len));
    }
    ck_assert_uint_eq (s_drv.cached (s_drv.session), 0);
    /*  The cache is bounded (cache-size = 4): six refs leave four entries,
        and an evicted key still works when it comes back.  */
    for (int i = 0; i < 6; i++) {
        char ref [16];
        snprintf (ref, sizeof ref, "ks:%d", i);
        key.ref = ref;
        size_t len = sizeof sig;
        ck_assert_uint_eq (s_drv.sign (s_drv.session, &key, &mech, di, 51, sig, &len), CKR_OK);
    }
    ck_assert_uint_eq (s_drv.cached (s_drv.session), 4);
    key.ref = "ks:0";
    size_t len = sizeof sig;
    ck_assert_uint_eq (s_drv.sign (s_drv.session, &key, &mech, di, 51, sig, &len), CKR_OK);
    ck_assert (th_verify_rsa_pkcs1 (pkey, di, 51, sig, len));
    /*  Garbage material, and a resident id the board does not have.  */
    unsigned char junk [] = { 0x30, 0x03, 0x02, 0x01, 0x00 };
    cs_drv_key_t bad = { NULL, 0, junk, sizeof junk, NULL };
    len = sizeof sig;
    ck_assert_uint_eq (s_drv.sign (s_drv.session, &bad, &mech, di, 51, sig, &len), CKR_KEY_HANDLE_INVALID);
    cs_drv_key_t resident = { (const unsigned char *) "\x01", 1, NULL, 0, NULL };
    len = sizeof sig;
    ck_assert_uint_eq (s_drv.sign (s_drv.session, &resident, &mech, di, 51, sig, &len), CKR_KEY_HANDLE_INVALID);
    OPENSSL_free (der);
    EVP_PKEY_free (pkey);
}
END_TEST

/*  Signs with the driver, using `der` (PKCS#8) as a per-request key, and
 *  verifies with OpenSSL against `pub` (a public-only key): CKM_RSA_PKCS
 *  over a SHA-256 DigestInfo (RFC 8017 §9.2), CKM_ECDSA over a SHA-256
 *  digest (raw r||s, each half the field size), CKM_EDDSA over the message.  */
static void
s_sign_verify (const unsigned char *der, size_t der_len, EVP_PKEY *pub)
{
    static const char msg [] = "a freshly generated key";
    unsigned char di [51], digest [32], sig [1024];
    size_t len = sizeof sig;
    cs_drv_key_t key = { NULL, 0, der, der_len, NULL };
    cs_drv_mech_t mech = { CKM_RSA_PKCS };
    th_digest_info (msg, di);
    SHA256 ((const unsigned char *) msg, strlen (msg), digest);
    if (EVP_PKEY_is_a (pub, "RSA")) {
        ck_assert_uint_eq (s_drv.sign (s_drv.session, &key, &mech, di, 51, sig, &len), CKR_OK);
        ck_assert_uint_eq (len, (size_t) EVP_PKEY_get_size (pub));
        ck_assert (th_verify_rsa_pkcs1 (pub, di, 51, sig, len));
        di [50] ^= 1;                                   /* and not another digest */
        ck_assert (!th_verify_rsa_pkcs1 (pub, di, 51, sig, len));
    }
    else
    if (EVP_PKEY_is_a (pub, "EC")) {
        mech.type = CKM_ECDSA;
        ck_assert_uint_eq (s_drv.sign (s_drv.session, &key, &mech, digest, 32, sig, &len), CKR_OK);
        ck_assert_uint_eq (len, 2 * (size_t) ((EVP_PKEY_get_bits (pub) + 7) / 8));
        ck_assert (th_verify_ecdsa (pub, digest, 32, sig, len));
        digest [0] ^= 1;
        ck_assert (!th_verify_ecdsa (pub, digest, 32, sig, len));
    }
    else {
        ck_assert (EVP_PKEY_is_a (pub, "ED25519"));
        mech.type = CKM_EDDSA;
        ck_assert_uint_eq (s_drv.sign (s_drv.session, &key, &mech, (const unsigned char *) msg, sizeof msg,
                                   sig, &len), CKR_OK);
        ck_assert_uint_eq (len, 64);
        EVP_MD_CTX *ctx = EVP_MD_CTX_new ();
        ck_assert (EVP_DigestVerifyInit (ctx, NULL, NULL, NULL, pub) > 0);
        ck_assert_int_eq (EVP_DigestVerify (ctx, sig, len, (const unsigned char *) msg, sizeof msg), 1);
        EVP_MD_CTX_free (ctx);
    }
}

/*  Generates with gen, checks the key signs (s_sign_verify, against the
 *  public half of the generated PKCS#8) and returns it (caller frees).  */
static EVP_PKEY *
s_generate (const cs_keygen_t *gen)
{
    cs_drv_generate_material_fn *fn
        = (cs_drv_generate_material_fn *) cs_driver_lookup (s_drv.driver, CS_DRV_GENERATE_MATERIAL);
    unsigned char *der = NULL, *spki = NULL;
    size_t len = 0;
    ck_assert_ptr_nonnull (fn);
    ck_assert_uint_eq (fn (s_drv.session, gen, &der, &len), CKR_OK);
    const unsigned char *p = der;
    PKCS8_PRIV_KEY_INFO *p8 = d2i_PKCS8_PRIV_KEY_INFO (NULL, &p, (long) len);
    EVP_PKEY *pkey = p8 ? EVP_PKCS82PKEY (p8) : NULL;
    PKCS8_PRIV_KEY_INFO_free (p8);
    ck_assert_ptr_nonnull (pkey);
    int spki_len = i2d_PUBKEY (pkey, &spki);
    ck_assert_int_gt (spki_len, 0);
    p = spki;
    EVP_PKEY *pub = d2i_PUBKEY (NULL, &p, spki_len);
    ck_assert_ptr_nonnull (pub);
    s_sign_verify (der, len, pub);
    EVP_PKEY_free (pub);
    OPENSSL_free (spki);
    OPENSSL_cleanse (der, len);
    free (der);
    return pkey;
}

START_TEST (test_generate)
{
    static const unsigned char e3 [] = { 0x03 }, p256 [] = { 0x06, 0x08, 0x2a, 0x86, 0x48, 0xce,
        0x3d, 0x03, 0x01, 0x07 }, ed [] = { 0x13, 0x0c, 'e', 'd', 'w', 'a', 'r', 'd', 's', '2',
        '5', '5', '1', '9' };
    cs_keygen_t gen = { CKM_RSA_PKCS_KEY_PAIR_GEN, 2048 };
    EVP_PKEY *pkey = s_generate (&gen);
    BIGNUM *e = NULL;
    ck_assert (EVP_PKEY_is_a (pkey, "RSA") && EVP_PKEY_get_bits (pkey) == 2048);
    ck_assert (EVP_PKEY_get_bn_param (pkey, "e", &e) && BN_get_word (e) == 65537);
    BN_free (e);
    e = NULL;
    EVP_PKEY_free (pkey);
    gen.public_exponent = e3;
    gen.public_exponent_len = 1;
    pkey = s_generate (&gen);
    ck_assert (EVP_PKEY_get_bn_param (pkey, "e", &e) && BN_get_word (e) == 3);
    BN_free (e);
    EVP_PKEY_free (pkey);
    gen = (cs_keygen_t) { CKM_EC_KEY_PAIR_GEN, 0, NULL, 0, p256, sizeof p256 };
    pkey = s_generate (&gen);
    ck_assert (EVP_PKEY_is_a (pkey, "EC") && EVP_PKEY_get_bits (pkey) == 256);
    EVP_PKEY_free (pkey);
    gen = (cs_keygen_t) { CKM_EC_KEY_PAIR_GEN, 0, NULL, 0, (const unsigned char *) "secp384r1", 9 };
    pkey = s_generate (&gen);
    ck_assert (EVP_PKEY_get_bits (pkey) == 384);
    EVP_PKEY_free (pkey);
    gen = (cs_keygen_t) { CKM_EC_EDWARDS_KEY_PAIR_GEN, 0, NULL, 0, ed, sizeof ed };
    pkey = s_generate (&gen);
    ck_assert (EVP_PKEY_is_a (pkey, "ED25519"));
    EVP_PKEY_free (pkey);
    /*  Refusals.  */
    cs_drv_generate_material_fn *fn
        = (cs_drv_generate_material_fn *) cs_driver_lookup (s_drv.driver, CS_DRV_GENERATE_MATERIAL);
    unsigned char *der = NULL;
    size_t len = 0;
    static const unsigned char even [] = { 0x01, 0x00, 0x00 };
    gen = (cs_keygen_t) { CKM_RSA_PKCS_KEY_PAIR_GEN, 512 };
    ck_assert_uint_eq (fn (s_drv.session, &gen, &der, &len), CKR_KEY_SIZE_RANGE);
    gen = (cs_keygen_t) { CKM_RSA_PKCS_KEY_PAIR_GEN, 2048, even, sizeof even };
    ck_assert_uint_eq (fn (s_drv.session, &gen, &der, &len), CKR_ATTRIBUTE_VALUE_INVALID);
    gen = (cs_keygen_t) { CKM_EC_KEY_PAIR_GEN, 0, NULL, 0, ed, sizeof ed };
    ck_assert_uint_eq (fn (s_drv.session, &gen, &der, &len), CKR_DOMAIN_PARAMS_INVALID);
    gen = (cs_keygen_t) { CKM_DSA_KEY_PAIR_GEN };
    ck_assert_uint_eq (fn (s_drv.session, &gen, &der, &len), CKR_MECHANISM_INVALID);
    ck_assert_ptr_null (der);
}
END_TEST

/*  CS_DRV_SYMMETRIC against published vectors: NIST SP 800-38A F.1.1
 *  (ECB-AES128) and F.2.1 (CBC-AES128), the GCM specification's test case 2
 *  (McGrew & Viega), RFC 4231 test case 1 (HMAC-SHA256); a flipped GCM tag
 *  and bad sizes are refused.  */
START_TEST (test_symmetric)
{
    cs_drv_symmetric_fn *fn = (cs_drv_symmetric_fn *) cs_driver_lookup (s_drv.driver, CS_DRV_SYMMETRIC);
    ck_assert_ptr_nonnull (fn);
    static const unsigned char key [16] = { 0x2b, 0x7e, 0x15, 0x16, 0x28, 0xae, 0xd2, 0xa6,
                                            0xab, 0xf7, 0x15, 0x88, 0x09, 0xcf, 0x4f, 0x3c };
    static const unsigned char iv [16] = { 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15 };
    static const unsigned char plain [32] = {
        0x6b, 0xc1, 0xbe, 0xe2, 0x2e, 0x40, 0x9f, 0x96, 0xe9, 0x3d, 0x7e, 0x11, 0x73, 0x93, 0x17, 0x2a,
        0xae, 0x2d, 0x8a, 0x57, 0x1e, 0x03, 0xac, 0x9c, 0x9e, 0xb7, 0x6f, 0xac, 0x45, 0xaf, 0x8e, 0x51 };
    static const unsigned char ecb [16] = { 0x3a, 0xd7, 0x7b, 0xb4, 0x0d, 0x7a, 0x36, 0x60,
                                            0xa8, 0x9e, 0xca, 0xf3, 0x24, 0x66, 0xef, 0x97 };
    static const unsigned char cbc [32] = {
        0x76, 0x49, 0xab, 0xac, 0x81, 0x19, 0xb2, 0x46, 0xce, 0xe9, 0x8e, 0x9b, 0x12, 0xe9, 0x19, 0x7d,
        0x50, 0x86, 0xcb, 0x9b, 0x50, 0x72, 0x19, 0xee, 0x95, 0xdb, 0x11, 0x3a, 0x91, 0x76, 0x78, 0xb2 };
    static const unsigned char zero [16] = { 0 };
    static const unsigned char gcm [32] = {
        0x03, 0x88, 0xda, 0xce, 0x60, 0xb6, 0xa3, 0x92, 0xf3, 0x28, 0xc2, 0xb9, 0x71, 0xb2, 0xfe, 0x78,
        0xab, 0x6e, 0x47, 0xd4, 0x2c, 0xec, 0x13, 0xbd, 0xf5, 0x3a, 0x67, 0xb2, 0x12, 0x57, 0xbd, 0xdf };
    static const unsigned char hmac [32] = {
        0xb0, 0x34, 0x4c, 0x61, 0xd8, 0xdb, 0x38, 0x53, 0x5c, 0xa8, 0xaf, 0xce, 0xaf, 0x0b, 0xf1, 0x2b,
        0x88, 0x1d, 0xc2, 0x00, 0xc9, 0x83, 0x3d, 0xa7, 0x26, 0xe9, 0x37, 0x6c, 0x2e, 0x32, 0xcf, 0xf7 };
    unsigned char hkey [20], out [96], tampered [32];
    size_t len = sizeof out;
    memset (hkey, 0x0b, sizeof hkey);
    cs_sym_t op = { CKM_AES_ECB, CS_SYM_ENCRYPT, key, 16, NULL, 0, NULL, 0, 0, plain, 16 };
    ck_assert_uint_eq (fn (s_drv.session, &op, out, &len), CKR_OK);
    ck_assert (len == 16 && memcmp (out, ecb, 16) == 0);
    op = (cs_sym_t) { CKM_AES_CBC, CS_SYM_ENCRYPT, key, 16, iv, 16, NULL, 0, 0, plain, 32 };
    len = sizeof out;
    ck_assert_uint_eq (fn (s_drv.session, &op, out, &len), CKR_OK);
    ck_assert (len == 32 && memcmp (out, cbc, 32) == 0);
    op = (cs_sym_t) { CKM_AES_CBC, CS_SYM_DECRYPT, key, 16, iv, 16, NULL, 0, 0, cbc, 32 };
    len = sizeof out;
    ck_assert_uint_eq (fn (s_drv.session, &op, out, &len), CKR_OK);
    ck_assert (len == 32 && memcmp (out, plain, 32) == 0);
    op = (cs_sym_t) { CKM_AES_GCM, CS_SYM_ENCRYPT, zero, 16, zero, 12, NULL, 0, 128, zero, 16 };
    len = sizeof out;
    ck_assert_uint_eq (fn (s_drv.session, &op, out, &len), CKR_OK);
    ck_assert (len == 32 && memcmp (out, gcm, 32) == 0);
    memcpy (tampered, gcm, 32);
    op = (cs_sym_t) { CKM_AES_GCM, CS_SYM_DECRYPT, zero, 16, zero, 12, NULL, 0, 128, tampered, 32 };
    len = sizeof out;
    ck_assert_uint_eq (fn (s_drv.session, &op, out, &len), CKR_OK);
    ck_assert (len == 16 && memcmp (out, zero, 16) == 0);
    tampered [31] ^= 1;
    len = sizeof out;
    ck_assert_uint_eq (fn (s_drv.session, &op, out, &len), CKR_ENCRYPTED_DATA_INVALID);
    op = (cs_sym_t) { CKM_SHA256_HMAC, CS_SYM_SIGN, hkey, 20, NULL, 0, NULL, 0, 0,
                      (const unsigned char *) "Hi There", 8 };
    len = sizeof out;
    ck_assert_uint_eq (fn (s_drv.session, &op, out, &len), CKR_OK);
    ck_assert (len == 32 && memcmp (out, hmac, 32) == 0);
    /*  Refusals: a 20-byte AES key, a short CBC IV, a partial block, a 64-bit GCM tag.  */
    op = (cs_sym_t) { CKM_AES_CBC, CS_SYM_ENCRYPT, hkey, 20, iv, 16, NULL, 0, 0, plain, 32 };
    len = sizeof out;
    ck_assert_uint_eq (fn (s_drv.session, &op, out, &len), CKR_KEY_SIZE_RANGE);
    op = (cs_sym_t) { CKM_AES_CBC, CS_SYM_ENCRYPT, key, 16, iv, 8, NULL, 0, 0, plain, 32 };
    ck_assert_uint_eq (fn (s_drv.session, &op, out, &len), CKR_MECHANISM_PARAM_INVALID);
    op = (cs_sym_t) { CKM_AES_CBC, CS_SYM_ENCRYPT, key, 16, iv, 16, NULL, 0, 0, plain, 20 };
    ck_assert_uint_eq (fn (s_drv.session, &op, out, &len), CKR_DATA_LEN_RANGE);
    op = (cs_sym_t) { CKM_AES_GCM, CS_SYM_ENCRYPT, zero, 16, zero, 12, NULL, 0, 64, zero, 16 };
    ck_assert_uint_eq (fn (s_drv.session, &op, out, &len), CKR_MECHANISM_PARAM_INVALID);
}
END_TEST

/*  cache-size (drv_key_cache_size): a whole number 0..100000 opens the
 *  board, anything else refuses it (man/cryptoserver-broker.conf.5).  */
START_TEST (test_cache_size_option)
{
    const char *bad [] = { "-1", "100001", "abc", "4x", "" };
    const char *good [] = { "0", "100000" };
    cs_drv_board_open_fn *open = (cs_drv_board_open_fn *) cs_driver_lookup (s_drv.driver, CS_DRV_BOARD_OPEN);
    cs_drv_board_close_fn *close = (cs_drv_board_close_fn *) cs_driver_lookup (s_drv.driver, CS_DRV_BOARD_CLOSE);
    for (size_t i = 0; i < sizeof bad / sizeof bad [0] + sizeof good / sizeof good [0]; i++) {
        bool ok = i >= sizeof bad / sizeof bad [0];
        zconfig_t *config = zconfig_new ("root", NULL);
        zconfig_put (config, "cache-size", ok ? good [i - sizeof bad / sizeof bad [0]] : bad [i]);
        cs_board_t *board = NULL;
        ck_assert_int_eq (open ("sized", config, "/tmp", &board), ok ? 0 : -1);
        close (&board);
        zconfig_destroy (&config);
    }
}
END_TEST

int
main (void)
{
    if (!tr_driver_dir_set ())
        return 77;
    Suite *suite = suite_create ("driver_openssl");
    TCase *tc = tr_tcase ("openssl", s_setup, s_teardown);
    tcase_add_test (tc, test_capabilities_and_mechanisms);
    tcase_add_test (tc, test_key_material_off);
    tcase_add_test (tc, test_rsa_sign);
    tcase_add_test (tc, test_rsa_decrypt);
    tcase_add_test (tc, test_ecdsa);
    tcase_add_test (tc, test_eddsa);
    tcase_add_test (tc, test_ecdh);
    tcase_add_test (tc, test_per_request_keys_not_cached);
    tcase_add_test (tc, test_generate);
    tcase_add_test (tc, test_symmetric);
    tcase_add_test (tc, test_cache_size_option);
    suite_add_tcase (suite, tc);
    return tr_run (suite);
}
