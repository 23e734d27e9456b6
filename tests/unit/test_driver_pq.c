/*  test_driver_pq.c — the pq driver (shim-drivers/pq, Rust) through its ABI
 *  v2 dispatch table, loaded from CRYPTOSERVER_DRIVER_DIR as the broker
 *  loads it: the table and the structure layouts both sides agree on; key
 *  generation, ML-DSA sign/verify with a context and ML-KEM encapsulation
 *  and decapsulation for every parameter set, with the exact CK_RV of each
 *  refusal; and NIST ACVP vectors (keyGen from the seed, decapsulation with
 *  an expanded key, implicit rejection) given as PKCS#8 material
 *  (docs/PQ-DRIVER.md).  The vectors: shim-drivers/pq/testdata/acvp-subset.txt.
 */
#include <stddef.h>
#include "test_driver_helpers.h"
#include "test_run.h"

static td_board_t s_drv;            /* pq.so, a board, a session */
static cs_drv_generate_material_fn *s_generate;
static cs_drv_public_key_fn *s_public;
static cs_drv_verify_fn *s_verify;
static cs_drv_encapsulate_fn *s_encaps;
static cs_drv_decapsulate_fn *s_decaps;

static void
s_setup (void)
{
    zconfig_t *config = zconfig_new ("root", NULL);
    td_open (&s_drv, "pq", "pq0", config, "/tmp");
    zconfig_destroy (&config);
    s_generate = (cs_drv_generate_material_fn *) cs_driver_lookup (s_drv.driver, CS_DRV_GENERATE_MATERIAL);
    s_public = (cs_drv_public_key_fn *) cs_driver_lookup (s_drv.driver, CS_DRV_PUBLIC_KEY);
    s_verify = (cs_drv_verify_fn *) cs_driver_lookup (s_drv.driver, CS_DRV_VERIFY);
    s_encaps = (cs_drv_encapsulate_fn *) cs_driver_lookup (s_drv.driver, CS_DRV_ENCAPSULATE);
    s_decaps = (cs_drv_decapsulate_fn *) cs_driver_lookup (s_drv.driver, CS_DRV_DECAPSULATE);
    ck_assert (s_drv.sign && s_generate && s_public && s_verify && s_encaps && s_decaps);
    ck_assert_ptr_null (s_drv.decrypt);
}

static void
s_teardown (void)
{
    td_close (&s_drv);
}

/*  Sizes of FIPS 204 Table 2 and FIPS 203 Table 3, by CKP_* - 1.  */
static const size_t s_dsa_pk [3] = { 1312, 1952, 2592 };
static const size_t s_dsa_sig [3] = { 2420, 3309, 4627 };
static const size_t s_kem_ek [3] = { 800, 1184, 1568 };
static const size_t s_kem_ct [3] = { 768, 1088, 1568 };

/*  A fresh key of `mechanism` and `set`: its PKCS#8 (caller frees) and
 *  its public key in pub (capacity 2592).  */
static cs_drv_key_t
s_keygen (CK_MECHANISM_TYPE mechanism, CK_ULONG set, unsigned char **der_p, unsigned char *pub, size_t *pub_len)
{
    cs_keygen_t gen = { .mechanism = mechanism, .parameter_set = set };
    size_t der_len = 0;
    ck_assert_uint_eq (s_generate (s_drv.session, &gen, der_p, &der_len), CKR_OK);
    cs_drv_key_t key = { NULL, 0, *der_p, der_len, NULL };
    CK_KEY_TYPE type = 0;
    CK_ULONG got_set = 0;
    *pub_len = 2592;
    ck_assert_uint_eq (s_public (s_drv.session, &key, &type, &got_set, pub, pub_len), CKR_OK);
    ck_assert_uint_eq (type, mechanism == CKM_ML_DSA_KEY_PAIR_GEN ? CKK_ML_DSA : CKK_ML_KEM);
    ck_assert_uint_eq (got_set, set);
    return key;
}

START_TEST (test_table_and_capabilities)
{
    ck_assert_uint_eq (s_drv.driver->abi_version, CS_DRIVER_ABI_VERSION);
    int seen [64] = { 0 };
    const cs_driver_dispatch_t *d = s_drv.driver->dispatch;
    for (; d->id; d++) {
        ck_assert (d->id > 0 && d->id < 64 && d->fn);
        ck_assert_int_eq (seen [d->id]++, 0);
    }
    ck_assert_ptr_null (d->fn);
    int want [] = { CS_DRV_BOARD_OPEN, CS_DRV_BOARD_CLOSE, CS_DRV_BOARD_MECHANISMS, CS_DRV_BOARD_KEYS,
                    CS_DRV_SESSION_OPEN, CS_DRV_SESSION_CLOSE, CS_DRV_CAPABILITIES, CS_DRV_SIGN_KEY,
                    CS_DRV_GENERATE_MATERIAL, CS_DRV_PUBLIC_KEY, CS_DRV_VERIFY, CS_DRV_ENCAPSULATE,
                    CS_DRV_DECAPSULATE };
    for (size_t i = 0; i < sizeof want / sizeof want [0]; i++)
        ck_assert_int_eq (seen [want [i]], 1);
    ck_assert_int_eq (seen [CS_DRV_DECRYPT_KEY] + seen [CS_DRV_DERIVE_KEY] + seen [7] + seen [8], 0);

    cs_caps_t caps = { 0 };
    cs_drv_capabilities_fn *fn = (cs_drv_capabilities_fn *) cs_driver_lookup (s_drv.driver, CS_DRV_CAPABILITIES);
    ck_assert_int_eq (fn (s_drv.board, &caps), 0);
    ck_assert_uint_eq (caps.flags, CS_CAP_KEY_MATERIAL | CS_CAP_GENERATE_MATERIAL | CS_CAP_KEM | CS_CAP_PUBLIC_OPS);
    ck_assert_uint_eq (caps.material_types, CS_KT_ML_DSA | CS_KT_ML_KEM);
    ck_assert_uint_eq (caps.generate_types, CS_KT_ML_DSA | CS_KT_ML_KEM);
    ck_assert_uint_eq (cs_kt_bit (CKK_ML_DSA), CS_KT_ML_DSA);
    ck_assert_uint_eq (cs_kt_bit (CKK_ML_KEM), CS_KT_ML_KEM);

    cs_drv_board_mechanisms_fn *mechs_fn
        = (cs_drv_board_mechanisms_fn *) cs_driver_lookup (s_drv.driver, CS_DRV_BOARD_MECHANISMS);
    cs_mech_info_t *mechs = NULL;
    size_t n = 0;
    ck_assert_int_eq (mechs_fn (s_drv.board, &mechs, &n), 0);
    ck_assert_uint_eq (n, 4);
    ck_assert_uint_eq (mechs [0].type, CKM_ML_DSA_KEY_PAIR_GEN);
    ck_assert_uint_eq (mechs [0].flags, CKF_GENERATE_KEY_PAIR);
    ck_assert_uint_eq (mechs [1].type, CKM_ML_DSA);
    ck_assert_uint_eq (mechs [1].flags, CKF_SIGN | CKF_VERIFY);
    ck_assert_uint_eq (mechs [2].type, CKM_ML_KEM_KEY_PAIR_GEN);
    ck_assert_uint_eq (mechs [3].type, CKM_ML_KEM);
    ck_assert_uint_eq (mechs [3].flags, CKF_ENCAPSULATE | CKF_DECAPSULATE);
    ck_assert_uint_eq (mechs [3].min_key_bits, CKP_ML_KEM_512);
    ck_assert_uint_eq (mechs [3].max_key_bits, CKP_ML_KEM_1024);
    free (mechs);

    cs_drv_board_keys_fn *keys_fn = (cs_drv_board_keys_fn *) cs_driver_lookup (s_drv.driver, CS_DRV_BOARD_KEYS);
    cs_key_info_t *keys = NULL;
    ck_assert_int_eq (keys_fn (s_drv.board, &keys, &n), 0);
    ck_assert_uint_eq (n, 0);
    cs_key_info_free_array (keys, n);
}
END_TEST

/*  The Rust side mirrors these structures by hand (shim-drivers/pq/src/ffi.rs,
 *  test layouts_match_cs_driver_h asserts the same numbers).  LP64.  */
START_TEST (test_layout)
{
    ck_assert_uint_eq (sizeof (cs_drv_mech_t), 72);
    ck_assert_uint_eq (offsetof (cs_drv_mech_t, hedge), 48);
    ck_assert_uint_eq (offsetof (cs_drv_mech_t, context), 56);
    ck_assert_uint_eq (offsetof (cs_drv_mech_t, context_len), 64);
    ck_assert_uint_eq (sizeof (cs_mech_info_t), 32);
    ck_assert_uint_eq (sizeof (cs_drv_key_t), 40);
    ck_assert_uint_eq (offsetof (cs_drv_key_t, ref), 32);
    ck_assert_uint_eq (sizeof (cs_caps_t), 12);
    ck_assert_uint_eq (sizeof (cs_keygen_t), 88);
    ck_assert_uint_eq (offsetof (cs_keygen_t, can_sign), 72);
    ck_assert_uint_eq (offsetof (cs_keygen_t, can_decrypt), 73);
    ck_assert_uint_eq (offsetof (cs_keygen_t, parameter_set), 80);
    ck_assert_uint_eq (sizeof (cs_driver_dispatch_t), 16);
    ck_assert_uint_eq (sizeof (cs_driver_t), 32);
}
END_TEST

START_TEST (test_ml_dsa)
{
    static const unsigned char msg [] = "a message to sign";
    unsigned char ctx [256];
    memset (ctx, 0x33, sizeof ctx);
    for (CK_ULONG set = CKP_ML_DSA_44; set <= CKP_ML_DSA_87; set++) {
        unsigned char *der = NULL, pub [2592], sig [4700], sig2 [4700];
        size_t pub_len = 0;
        cs_drv_key_t key = s_keygen (CKM_ML_DSA_KEY_PAIR_GEN, set, &der, pub, &pub_len);
        ck_assert_uint_eq (pub_len, s_dsa_pk [set - 1]);
        cs_drv_mech_t mech = { .type = CKM_ML_DSA, .context = ctx, .context_len = 255 };
        size_t len = 10;
        ck_assert_uint_eq (s_drv.sign (s_drv.session, &key, &mech, msg, sizeof msg, sig, &len),
                           CKR_BUFFER_TOO_SMALL);
        ck_assert_uint_eq (len, s_dsa_sig [set - 1]);
        len = sizeof sig;
        ck_assert_uint_eq (s_drv.sign (s_drv.session, &key, &mech, msg, sizeof msg, sig, &len), CKR_OK);
        ck_assert_uint_eq (len, s_dsa_sig [set - 1]);
        ck_assert_uint_eq (s_verify (s_drv.session, &mech, set, pub, pub_len, msg, sizeof msg, sig, len), CKR_OK);
        /* Another context, message or signature byte, or parameter set. */
        cs_drv_mech_t other = mech;
        other.context_len = 254;
        ck_assert_uint_eq (s_verify (s_drv.session, &other, set, pub, pub_len, msg, sizeof msg, sig, len),
                           CKR_SIGNATURE_INVALID);
        ck_assert_uint_eq (s_verify (s_drv.session, &mech, set, pub, pub_len, msg, sizeof msg - 1, sig, len),
                           CKR_SIGNATURE_INVALID);
        sig [100] ^= 1;
        ck_assert_uint_eq (s_verify (s_drv.session, &mech, set, pub, pub_len, msg, sizeof msg, sig, len),
                           CKR_SIGNATURE_INVALID);
        ck_assert_uint_eq (s_verify (s_drv.session, &mech, set, pub, pub_len, msg, sizeof msg, sig, len - 1),
                           CKR_SIGNATURE_LEN_RANGE);
        ck_assert_uint_eq (s_verify (s_drv.session, &mech, set % 3 + 1, pub, pub_len, msg, sizeof msg, sig, len),
                           CKR_PUBLIC_KEY_INVALID);
        ck_assert_uint_eq (s_verify (s_drv.session, &mech, 4, pub, pub_len, msg, sizeof msg, sig, len),
                           CKR_DOMAIN_PARAMS_INVALID);
        /* Deterministic signing gives the same bytes twice; hedged does not. */
        mech.hedge = CKH_DETERMINISTIC_REQUIRED;
        len = sizeof sig;
        ck_assert_uint_eq (s_drv.sign (s_drv.session, &key, &mech, msg, sizeof msg, sig, &len), CKR_OK);
        size_t len2 = sizeof sig2;
        ck_assert_uint_eq (s_drv.sign (s_drv.session, &key, &mech, msg, sizeof msg, sig2, &len2), CKR_OK);
        ck_assert_mem_eq (sig, sig2, len);
        mech.hedge = CKH_HEDGE_REQUIRED;
        ck_assert_uint_eq (s_drv.sign (s_drv.session, &key, &mech, msg, sizeof msg, sig2, &len2), CKR_OK);
        ck_assert (memcmp (sig, sig2, len) != 0);
        /* Refusals: context over 255 bytes, unknown hedge, other mechanisms,
         * a resident id, material that is not a key. */
        mech.context_len = 256;
        ck_assert_uint_eq (s_drv.sign (s_drv.session, &key, &mech, msg, sizeof msg, sig, &len),
                           CKR_MECHANISM_PARAM_INVALID);
        mech.context_len = 0;
        mech.hedge = 3;
        ck_assert_uint_eq (s_drv.sign (s_drv.session, &key, &mech, msg, sizeof msg, sig, &len),
                           CKR_MECHANISM_PARAM_INVALID);
        mech.hedge = CKH_HEDGE_PREFERRED;
        mech.type = CKM_EDDSA;
        ck_assert_uint_eq (s_drv.sign (s_drv.session, &key, &mech, msg, sizeof msg, sig, &len), CKR_MECHANISM_INVALID);
        mech.type = CKM_ML_DSA;
        cs_drv_key_t resident = { (const unsigned char *) "id", 2, NULL, 0, NULL };
        ck_assert_uint_eq (s_drv.sign (s_drv.session, &resident, &mech, msg, sizeof msg, sig, &len),
                           CKR_KEY_HANDLE_INVALID);
        cs_drv_key_t junk = { NULL, 0, msg, sizeof msg, NULL };
        ck_assert_uint_eq (s_drv.sign (s_drv.session, &junk, &mech, msg, sizeof msg, sig, &len),
                           CKR_KEY_HANDLE_INVALID);
        unsigned char secret [32];
        size_t secret_len = sizeof secret;
        cs_drv_mech_t kem = { .type = CKM_ML_KEM };
        ck_assert_uint_eq (s_decaps (s_drv.session, &key, &kem, sig, s_kem_ct [0], secret, &secret_len),
                           CKR_KEY_TYPE_INCONSISTENT);
        free (der);
    }
    cs_keygen_t gen = { .mechanism = CKM_ML_DSA_KEY_PAIR_GEN, .parameter_set = 0 };
    unsigned char *der = NULL;
    size_t der_len = 0;
    ck_assert_uint_eq (s_generate (s_drv.session, &gen, &der, &der_len), CKR_ATTRIBUTE_VALUE_INVALID);
    gen.mechanism = CKM_EC_KEY_PAIR_GEN;
    ck_assert_uint_eq (s_generate (s_drv.session, &gen, &der, &der_len), CKR_MECHANISM_INVALID);
    ck_assert_ptr_null (der);
}
END_TEST

START_TEST (test_ml_kem)
{
    for (CK_ULONG set = CKP_ML_KEM_512; set <= CKP_ML_KEM_1024; set++) {
        unsigned char *der = NULL, pub [2592], ct [1600], k1 [32], k2 [32], k3 [32];
        size_t pub_len = 0;
        cs_drv_key_t key = s_keygen (CKM_ML_KEM_KEY_PAIR_GEN, set, &der, pub, &pub_len);
        ck_assert_uint_eq (pub_len, s_kem_ek [set - 1]);
        cs_drv_mech_t mech = { .type = CKM_ML_KEM };
        size_t ct_len = 16, k_len = sizeof k1;
        ck_assert_uint_eq (s_encaps (s_drv.session, &mech, set, pub, pub_len, ct, &ct_len, k1, &k_len),
                           CKR_BUFFER_TOO_SMALL);
        ck_assert_uint_eq (ct_len, s_kem_ct [set - 1]);
        ct_len = sizeof ct;
        ck_assert_uint_eq (s_encaps (s_drv.session, &mech, set, pub, pub_len, ct, &ct_len, k1, &k_len), CKR_OK);
        ck_assert_uint_eq (ct_len, s_kem_ct [set - 1]);
        ck_assert_uint_eq (k_len, 32);
        size_t k2_len = sizeof k2;
        ck_assert_uint_eq (s_decaps (s_drv.session, &key, &mech, ct, ct_len, k2, &k2_len), CKR_OK);
        ck_assert_uint_eq (k2_len, 32);
        ck_assert_mem_eq (k1, k2, 32);
        /* A changed ciphertext decapsulates to FIPS 203's rejection secret. */
        ct [5] ^= 1;
        ck_assert_uint_eq (s_decaps (s_drv.session, &key, &mech, ct, ct_len, k3, &k2_len), CKR_OK);
        ck_assert (memcmp (k1, k3, 32) != 0);
        ck_assert_uint_eq (s_decaps (s_drv.session, &key, &mech, ct, ct_len - 1, k3, &k2_len),
                           CKR_ENCRYPTED_DATA_LEN_RANGE);
        k2_len = 31;
        ck_assert_uint_eq (s_decaps (s_drv.session, &key, &mech, ct, ct_len, k3, &k2_len), CKR_BUFFER_TOO_SMALL);
        ck_assert_uint_eq (k2_len, 32);
        /* FIPS 203 §7.2: an encapsulation key with a coefficient >= q. */
        pub [0] = 0xff;
        pub [1] |= 0x0f;
        ct_len = sizeof ct;
        ck_assert_uint_eq (s_encaps (s_drv.session, &mech, set, pub, pub_len, ct, &ct_len, k1, &k_len),
                           CKR_PUBLIC_KEY_INVALID);
        ck_assert_uint_eq (s_encaps (s_drv.session, &mech, set, pub, pub_len - 1, ct, &ct_len, k1, &k_len),
                           CKR_PUBLIC_KEY_INVALID);
        ck_assert_uint_eq (s_encaps (s_drv.session, &mech, 0, pub, pub_len, ct, &ct_len, k1, &k_len),
                           CKR_DOMAIN_PARAMS_INVALID);
        mech.type = CKM_ML_DSA;
        ck_assert_uint_eq (s_encaps (s_drv.session, &mech, set, pub, pub_len, ct, &ct_len, k1, &k_len),
                           CKR_MECHANISM_INVALID);
        size_t sig_len = sizeof ct;
        ck_assert_uint_eq (s_drv.sign (s_drv.session, &key, &mech, ct, 4, ct, &sig_len), CKR_KEY_TYPE_INCONSISTENT);
        free (der);
    }
}
END_TEST

/*  ---- NIST ACVP vectors through the C ABI ----  */

/*  Field `field` of the nth (0-based) case of `set`/`test` in the vector
 *  file, decoded from hex into a malloc'd buffer of *len bytes; NULL when
 *  absent.  Lines: "<set> <test> <tcId> <field> <hex>".  */
static unsigned char *
s_kat (const char *set, const char *test, int nth, const char *field, size_t *len)
{
    FILE *file = fopen (PQ_KAT_FILE, "r");
    ck_assert_msg (file != NULL, "%s", PQ_KAT_FILE);
    char *line = NULL, last_tc [16] = "";
    size_t cap = 0;
    int index = -1;
    unsigned char *out = NULL;
    while (!out && getline (&line, &cap, file) > 0) {
        char s [32], t [16], tc [16], f [16];
        int hex_at = 0;
        if (line [0] == '#' || sscanf (line, "%31s %15s %15s %15s %n", s, t, tc, f, &hex_at) != 4
        ||  strcmp (s, set) || strcmp (t, test))
            continue;
        if (strcmp (tc, last_tc)) {
            index++;
            snprintf (last_tc, sizeof last_tc, "%s", tc);
        }
        if (index != nth || strcmp (f, field))
            continue;
        const char *hex = line + hex_at;
        *len = strcspn (hex, "\n") / 2;
        out = malloc (*len + 1);
        for (size_t i = 0; i < *len; i++)
            ck_assert_int_eq (sscanf (hex + 2 * i, "%2hhx", &out [i]), 1);
    }
    free (line);
    fclose (file);
    return out;
}

/*  Appends DER tag, length and content to buf at *at (capacity is the caller's).  */
static void
s_der (unsigned char *buf, size_t *at, unsigned char tag, const unsigned char *content, size_t len)
{
    buf [(*at)++] = tag;
    if (len >= 256) {
        buf [(*at)++] = 0x82;
        buf [(*at)++] = (unsigned char) (len >> 8);
    }
    else if (len >= 128)
        buf [(*at)++] = 0x81;
    buf [(*at)++] = (unsigned char) len;
    memcpy (buf + *at, content, len);
    *at += len;
}

/*  PKCS#8 of a key whose OID ends in oid7.oid8 (2.16.840.1.101.3.4.oid7.oid8)
 *  and whose private key CHOICE has tag `tag` (0x80 seed, 0x04 expanded):
 *  the shapes of docs/PQ-DRIVER.md, built here independently of the driver.  */
static cs_drv_key_t
s_pkcs8 (unsigned char *out, int oid7, int oid8, unsigned char tag, const unsigned char *key, size_t key_len)
{
    unsigned char oid [] = { 0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04,
                             (unsigned char) oid7, (unsigned char) oid8 };
    unsigned char inner [5000], body [5100];
    size_t inner_len = 0, body_len = 0, len = 0;
    s_der (inner, &inner_len, tag, key, key_len);
    s_der (body, &body_len, 0x02, (const unsigned char *) "\0", 1);
    s_der (body, &body_len, 0x30, oid, sizeof oid);
    s_der (body, &body_len, 0x04, inner, inner_len);
    s_der (out, &len, 0x30, body, body_len);
    return (cs_drv_key_t) { NULL, 0, out, len, NULL };
}

START_TEST (test_acvp_keygen)
{
    static const char *dsa [] = { "ML-DSA-44", "ML-DSA-65", "ML-DSA-87" };
    static const char *kem [] = { "ML-KEM-512", "ML-KEM-768", "ML-KEM-1024" };
    for (int i = 0; i < 3; i++) {
        for (int nth = 0; nth < 2; nth++) {
            size_t seed_len, pk_len, d_len, z_len, pub_len = 2592;
            unsigned char der [5200], pub [2592], seed [64];
            CK_KEY_TYPE type;
            CK_ULONG set;
            unsigned char *xi = s_kat (dsa [i], "keyGen", nth, "seed", &seed_len);
            unsigned char *pk = s_kat (dsa [i], "keyGen", nth, "pk", &pk_len);
            ck_assert (xi && pk && seed_len == 32);
            cs_drv_key_t key = s_pkcs8 (der, 3, 0x11 + i, 0x80, xi, seed_len);
            ck_assert_uint_eq (s_public (s_drv.session, &key, &type, &set, pub, &pub_len), CKR_OK);
            ck_assert_uint_eq (type, CKK_ML_DSA);
            ck_assert_uint_eq (set, (CK_ULONG) i + 1);
            ck_assert_uint_eq (pub_len, pk_len);
            ck_assert_mem_eq (pub, pk, pk_len);
            free (xi);
            free (pk);

            unsigned char *d = s_kat (kem [i], "keyGen", nth, "d", &d_len);
            unsigned char *z = s_kat (kem [i], "keyGen", nth, "z", &z_len);
            unsigned char *ek = s_kat (kem [i], "keyGen", nth, "ek", &pk_len);
            ck_assert (d && z && ek && d_len == 32 && z_len == 32);
            memcpy (seed, d, 32);
            memcpy (seed + 32, z, 32);
            key = s_pkcs8 (der, 4, 1 + i, 0x80, seed, 64);
            pub_len = sizeof pub;
            ck_assert_uint_eq (s_public (s_drv.session, &key, &type, &set, pub, &pub_len), CKR_OK);
            ck_assert_uint_eq (type, CKK_ML_KEM);
            ck_assert_uint_eq (pub_len, pk_len);
            ck_assert_mem_eq (pub, ek, pk_len);
            free (d);
            free (z);
            free (ek);
        }
    }
}
END_TEST

START_TEST (test_acvp_decapsulation)
{
    static const char *kem [] = { "ML-KEM-512", "ML-KEM-768", "ML-KEM-1024" };
    cs_drv_mech_t mech = { .type = CKM_ML_KEM };
    for (int i = 0; i < 3; i++) {
        /* Case 0 is unmodified, case 1 a modified ciphertext (implicit rejection). */
        for (int nth = 0; nth < 2; nth++) {
            size_t dk_len, c_len, k_len, out_len = 32;
            unsigned char der [3300], out [32];
            unsigned char *dk = s_kat (kem [i], "decap", nth, "dk", &dk_len);
            unsigned char *c = s_kat (kem [i], "decap", nth, "c", &c_len);
            unsigned char *k = s_kat (kem [i], "decap", nth, "k", &k_len);
            ck_assert (dk && c && k && k_len == 32);
            cs_drv_key_t key = s_pkcs8 (der, 4, 1 + i, 0x04, dk, dk_len);
            ck_assert_uint_eq (s_decaps (s_drv.session, &key, &mech, c, c_len, out, &out_len), CKR_OK);
            ck_assert_mem_eq (out, k, 32);
            /* The expanded key with one byte of H(ek) changed fails FIPS 203 §7.3. */
            dk [dk_len - 40] ^= 1;
            key = s_pkcs8 (der, 4, 1 + i, 0x04, dk, dk_len);
            ck_assert_uint_eq (s_decaps (s_drv.session, &key, &mech, c, c_len, out, &out_len),
                               CKR_KEY_HANDLE_INVALID);
            free (dk);
            free (c);
            free (k);
        }
    }
}
END_TEST

int
main (void)
{
    if (!tr_driver_dir_set ())
        return 77;
    Suite *suite = suite_create ("driver_pq");
    TCase *tc = tr_tcase ("pq", s_setup, s_teardown);
    tcase_add_test (tc, test_table_and_capabilities);
    tcase_add_test (tc, test_layout);
    tcase_add_test (tc, test_ml_dsa);
    tcase_add_test (tc, test_ml_kem);
    tcase_add_test (tc, test_acvp_keygen);
    tcase_add_test (tc, test_acvp_decapsulation);
    suite_add_tcase (suite, tc);
    return tr_run (suite);
}
