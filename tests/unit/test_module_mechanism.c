/*  test_module_mechanism.c — mechanism table, DigestInfo bytes (RFC 8017
 *  §9.2), PSS and OAEP parameter checks with their exact CK_RV codes.  */
#include <check.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "mechanism.h"

START_TEST (test_digest_info_sha256)
{
    /*  RFC 8017 §9.2 note 1, SHA-256.  */
    static const uint8_t expect [] = { 0x30, 0x31, 0x30, 0x0d, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01,
        0x65, 0x03, 0x04, 0x02, 0x01, 0x05, 0x00, 0x04, 0x20 };
    uint8_t digest [32], out [128];
    size_t len;
    const uint8_t *prefix = cs_mech_digest_info_prefix (CKM_SHA256, &len);
    ck_assert_uint_eq (len, sizeof expect);
    ck_assert_mem_eq (prefix, expect, sizeof expect);
    memset (digest, 0xab, sizeof digest);
    ck_assert_uint_eq (cs_mech_digest_info (CKM_SHA256, digest, 32, out, sizeof out), 51);
    ck_assert_mem_eq (out, expect, sizeof expect);
    ck_assert_mem_eq (out + 19, digest, 32);
    ck_assert_uint_eq (cs_mech_digest_info (CKM_SHA256, digest, 31, out, sizeof out), 0);
    ck_assert_uint_eq (cs_mech_digest_info (CKM_SHA256, digest, 32, out, 50), 0);
    ck_assert_uint_eq (cs_mech_digest_info (CKM_MD5, digest, 16, out, sizeof out), 0);
}
END_TEST

START_TEST (test_digest_info_lengths)
{
    /*  Each prefix ends with OCTET STRING of the digest size; total 19 (15 for SHA-1).  */
    static const struct { CK_MECHANISM_TYPE hash; size_t prefix; uint8_t size; } cases [] = {
        { CKM_SHA_1, 15, 20 }, { CKM_SHA384, 19, 48 }, { CKM_SHA512, 19, 64 },
    };
    for (size_t i = 0; i < 3; i++) {
        size_t len;
        const uint8_t *prefix = cs_mech_digest_info_prefix (cases [i].hash, &len);
        ck_assert_uint_eq (len, cases [i].prefix);
        ck_assert_uint_eq (prefix [len - 1], cases [i].size);
        ck_assert_uint_eq (prefix [1], len - 2 + cases [i].size);
    }
}
END_TEST

/*  Known answers: the DER DigestInfo of "abc" for every hash the module
 *  signs with under CKM_SHAx_RSA_PKCS, i.e. the prefix of RFC 8017 §9.2
 *  note 1 || the FIPS 180-4 digest of "abc".  Computed outside the project,
 *  for each x in sha1 sha224 sha256 sha384 sha512:
 *    printf abc | openssl dgst -x -sign k.pem -out s
 *    openssl pkeyutl -verifyrecover -inkey k.pem -in s -pkeyopt rsa_padding_mode:pkcs1 | xxd -p
 *  and the prefixes again with a ten-line DER encoder in python from the
 *  OIDs (1.3.14.3.2.26, 2.16.840.1.101.3.4.2.{4,1,2,3}); both match the
 *  RFC's table byte for byte.  */
static const struct {
    CK_MECHANISM_TYPE hash;
    size_t prefix_len;
    const char *hex;
} s_digest_info_kat [] = {
    { CKM_SHA_1, 15, "3021300906052b0e03021a05000414"
        "a9993e364706816aba3e25717850c26c9cd0d89d" },
    { CKM_SHA224, 19, "302d300d06096086480165030402040500041c"
        "23097d223405d8228642a477bda255b32aadbce4bda0b3f7e36c9da7" },
    { CKM_SHA256, 19, "3031300d060960864801650304020105000420"
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" },
    { CKM_SHA384, 19, "3041300d060960864801650304020205000430"
        "cb00753f45a35e8bb5a03d699ac65007272c32ab0eded1631a8b605a43ff5bed"
        "8086072ba1e7cc2358baeca134c825a7" },
    { CKM_SHA512, 19, "3051300d060960864801650304020305000440"
        "ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a"
        "2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f" },
    /*  id-sha3-* (checked with openssl asn1parse: OBJECT :sha3-224 ...).  */
    { CKM_SHA3_224, 19, "302d300d06096086480165030402070500041c"
        "e642824c3f8cf24ad09234ee7d3c766fc9a3a5168d0c94ad73b46fdf" },
    { CKM_SHA3_256, 19, "3031300d060960864801650304020805000420"
        "3a985da74fe225b2045c172d6bd390bd855f086e3e9d525b46bfe24511431532" },
    { CKM_SHA3_384, 19, "3041300d060960864801650304020905000430"
        "ec01498288516fc926459f58e2c6ad8df9b473cb0fc08c2596da7cf0e49be4b2"
        "98d88cea927ac7f539f1edf228376d25" },
    { CKM_SHA3_512, 19, "3051300d060960864801650304020a05000440"
        "b751850b1a57168a5693cd924b6b096e08f621827444f70d884f5d0240d2712e"
        "10e116e9192af3c91a7ec57647e3934057340b4cf408d5a56592f8274eec53f0" },
};
#define S_DIGEST_INFO_KATS (sizeof s_digest_info_kat / sizeof s_digest_info_kat [0])

/*  Decodes lower-case hex into out; returns the byte count.  */
static size_t
s_unhex (const char *hex, uint8_t *out)
{
    size_t n = strlen (hex) / 2;
    for (size_t i = 0; i < n; i++) {
        unsigned byte = 0;
        ck_assert_int_eq (sscanf (hex + 2 * i, "%2x", &byte), 1);
        out [i] = (uint8_t) byte;
    }
    return n;
}

START_TEST (test_digest_info_kat)
{
    uint8_t expect [128], out [128];
    for (size_t i = 0; i < S_DIGEST_INFO_KATS; i++) {
        size_t len = s_unhex (s_digest_info_kat [i].hex, expect), prefix_len = 0;
        size_t plen = s_digest_info_kat [i].prefix_len;
        const uint8_t *prefix = cs_mech_digest_info_prefix (s_digest_info_kat [i].hash, &prefix_len);
        ck_assert_ptr_nonnull (prefix);
        ck_assert_uint_eq (prefix_len, plen);
        ck_assert_msg (memcmp (prefix, expect, plen) == 0, "prefix of hash 0x%lx differs from RFC 8017",
                       s_digest_info_kat [i].hash);
        ck_assert_uint_eq (cs_mech_digest_info (s_digest_info_kat [i].hash, expect + plen, len - plen,
                                                out, sizeof out), len);
        ck_assert_mem_eq (out, expect, len);
    }
    /*  Every hash-and-sign RSA PKCS#1 v1.5 mechanism of the table has a vector.  */
    size_t count = 0, covered = 0;
    const cs_mech_row_t *table = cs_mech_rows (&count);
    for (size_t m = 0; m < count; m++) {
        if (table [m].wire != CKM_RSA_PKCS || !table [m].hash)
            continue;
        bool found = false;
        for (size_t i = 0; i < S_DIGEST_INFO_KATS; i++)
            found |= s_digest_info_kat [i].hash == table [m].hash;
        ck_assert_msg (found, "mechanism 0x%lx: no DigestInfo vector for hash 0x%lx",
                       table [m].type, table [m].hash);
        covered++;
    }
    ck_assert_uint_eq (covered, 9);
}
END_TEST

START_TEST (test_table)
{
    const cs_mech_row_t *m = cs_mech_row (CKM_SHA384_RSA_PKCS);
    ck_assert_ptr_nonnull (m);
    ck_assert_uint_eq (m->wire, CKM_RSA_PKCS);
    ck_assert_uint_eq (m->hash, CKM_SHA384);
    m = cs_mech_row (CKM_ECDSA_SHA256);
    ck_assert_uint_eq (m->wire, CKM_ECDSA);
    ck_assert_uint_eq (m->key_type, CKK_EC);
    m = cs_mech_row (CKM_RSA_PKCS_OAEP);
    ck_assert (m->flags & CKF_DECRYPT);
    ck_assert (!(m->flags & CKF_SIGN));
    ck_assert_ptr_null (cs_mech_row (CKM_MD5_RSA_PKCS));
    ck_assert_ptr_null (cs_mech_row (CKM_DES_MAC));     /* single DES: ciphers only (legacy) */
    ck_assert_uint_eq (cs_mech_row (CKM_DES_ECB)->key_type, CKK_DES);
    ck_assert_uint_eq (cs_mech_row (CKM_AES_CTR)->param, CS_MECH_PARAM_CTR);
    ck_assert_uint_eq (cs_mech_row (CKM_AES_CBC)->key_type, CKK_AES);
}
END_TEST

static CK_RV
s_pss (CK_MECHANISM_TYPE type, CK_MECHANISM_TYPE hash, CK_ULONG mgf, CK_ULONG salt, size_t k)
{
    CK_RSA_PKCS_PSS_PARAMS pss = { hash, mgf, salt };
    CK_MECHANISM mech = { type, &pss, sizeof pss };
    cs_mech_params_t params;
    CK_RV rv = cs_mech_check (cs_mech_row (type), &mech, CKK_RSA, k, &params);
    if (rv == CKR_OK)
        ck_assert_uint_eq (params.salt_len, salt);
    cs_mech_params_clear (&params);
    return rv;
}

START_TEST (test_pss)
{
    ck_assert_uint_eq (s_pss (CKM_SHA256_RSA_PKCS_PSS, CKM_SHA256, CKG_MGF1_SHA256, 32, 256), CKR_OK);
    ck_assert_uint_eq (s_pss (CKM_RSA_PKCS_PSS, CKM_SHA384, CKG_MGF1_SHA1, 0, 256), CKR_OK);
    /*  hashAlg must be the mechanism's own hash.  */
    ck_assert_uint_eq (s_pss (CKM_SHA256_RSA_PKCS_PSS, CKM_SHA512, CKG_MGF1_SHA256, 32, 256),
                       CKR_MECHANISM_PARAM_INVALID);
    ck_assert_uint_eq (s_pss (CKM_RSA_PKCS_PSS, CKM_MD5, CKG_MGF1_SHA256, 32, 256), CKR_MECHANISM_PARAM_INVALID);
    ck_assert_uint_eq (s_pss (CKM_RSA_PKCS_PSS, CKM_SHA256, 0x77, 32, 256), CKR_MECHANISM_PARAM_INVALID);
    /*  sLen <= k - hLen - 2: 256 - 32 - 2 = 222.  */
    ck_assert_uint_eq (s_pss (CKM_SHA256_RSA_PKCS_PSS, CKM_SHA256, CKG_MGF1_SHA256, 222, 256), CKR_OK);
    ck_assert_uint_eq (s_pss (CKM_SHA256_RSA_PKCS_PSS, CKM_SHA256, CKG_MGF1_SHA256, 223, 256),
                       CKR_MECHANISM_PARAM_INVALID);
}
END_TEST

START_TEST (test_pss_block)
{
    CK_RSA_PKCS_PSS_PARAMS pss = { CKM_SHA256, CKG_MGF1_SHA256, 32 };
    CK_MECHANISM mech = { CKM_SHA256_RSA_PKCS_PSS, &pss, sizeof pss - 1 };
    cs_mech_params_t params;
    const cs_mech_row_t *entry = cs_mech_row (CKM_SHA256_RSA_PKCS_PSS);
    ck_assert_uint_eq (cs_mech_check (entry, &mech, CKK_RSA, 256, &params), CKR_MECHANISM_PARAM_INVALID);
    mech.pParameter = NULL;
    mech.ulParameterLen = 0;
    ck_assert_uint_eq (cs_mech_check (entry, &mech, CKK_RSA, 256, &params), CKR_MECHANISM_PARAM_INVALID);
    mech.pParameter = &pss;
    mech.ulParameterLen = sizeof pss;
    ck_assert_uint_eq (cs_mech_check (entry, &mech, CKK_EC, 0, &params), CKR_KEY_TYPE_INCONSISTENT);
}
END_TEST

static CK_RV
s_oaep (CK_MECHANISM_TYPE hash, CK_ULONG mgf, CK_ULONG source, void *label, CK_ULONG label_len,
        cs_mech_params_t *params)
{
    CK_RSA_PKCS_OAEP_PARAMS oaep = { hash, mgf, source, label, label_len };
    CK_MECHANISM mech = { CKM_RSA_PKCS_OAEP, &oaep, sizeof oaep };
    return cs_mech_check (cs_mech_row (CKM_RSA_PKCS_OAEP), &mech, CKK_RSA, 256, params);
}

START_TEST (test_oaep)
{
    cs_mech_params_t params;
    char label [] = "my label";
    ck_assert_uint_eq (s_oaep (CKM_SHA256, CKG_MGF1_SHA256, CKZ_DATA_SPECIFIED, label, 8, &params), CKR_OK);
    ck_assert_uint_eq (params.hash, CKM_SHA256);
    ck_assert_uint_eq (params.label_len, 8);
    ck_assert_mem_eq (params.label, "my label", 8);
    cs_mech_params_clear (&params);
    ck_assert_ptr_null (params.label);
    ck_assert_uint_eq (s_oaep (CKM_SHA_1, CKG_MGF1_SHA1, CKZ_DATA_SPECIFIED, NULL, 0, &params), CKR_OK);
    ck_assert_ptr_null (params.label);
    ck_assert_uint_eq (s_oaep (CKM_MD5, CKG_MGF1_SHA1, CKZ_DATA_SPECIFIED, NULL, 0, &params),
                       CKR_MECHANISM_PARAM_INVALID);
    ck_assert_uint_eq (s_oaep (CKM_SHA256, 0, CKZ_DATA_SPECIFIED, NULL, 0, &params),
                       CKR_MECHANISM_PARAM_INVALID);
    ck_assert_uint_eq (s_oaep (CKM_SHA256, CKG_MGF1_SHA256, 2, label, 8, &params),
                       CKR_MECHANISM_PARAM_INVALID);
    ck_assert_uint_eq (s_oaep (CKM_SHA256, CKG_MGF1_SHA256, CKZ_DATA_SPECIFIED, NULL, 8, &params),
                       CKR_MECHANISM_PARAM_INVALID);
}
END_TEST

START_TEST (test_no_params)
{
    cs_mech_params_t params;
    CK_ULONG junk = 1;
    CK_MECHANISM mech = { CKM_SHA256_RSA_PKCS, NULL, 0 };
    const cs_mech_row_t *entry = cs_mech_row (CKM_SHA256_RSA_PKCS);
    ck_assert_uint_eq (cs_mech_check (entry, &mech, CKK_RSA, 256, &params), CKR_OK);
    mech.pParameter = &junk;
    mech.ulParameterLen = sizeof junk;
    ck_assert_uint_eq (cs_mech_check (entry, &mech, CKK_RSA, 256, &params), CKR_MECHANISM_PARAM_INVALID);
    mech = (CK_MECHANISM) { CKM_ECDSA, NULL, 0 };
    ck_assert_uint_eq (cs_mech_check (cs_mech_row (CKM_ECDSA), &mech, CKK_RSA, 256, &params),
                       CKR_KEY_TYPE_INCONSISTENT);
}
END_TEST

/*  Issue #4: every hash-and-sign variant maps to its raw mechanism and hash;
 *  RSA-X.509 takes no parameters; ECDH is C_DeriveKey only.  */
START_TEST (test_table_issue4)
{
    static const struct { CK_MECHANISM_TYPE type, wire, hash; } cases [] = {
        { CKM_SHA1_RSA_PKCS, CKM_RSA_PKCS, CKM_SHA_1 }, { CKM_SHA224_RSA_PKCS, CKM_RSA_PKCS, CKM_SHA224 },
        { CKM_SHA1_RSA_PKCS_PSS, CKM_RSA_PKCS_PSS, CKM_SHA_1 },
        { CKM_SHA224_RSA_PKCS_PSS, CKM_RSA_PKCS_PSS, CKM_SHA224 },
        { CKM_ECDSA_SHA1, CKM_ECDSA, CKM_SHA_1 }, { CKM_ECDSA_SHA224, CKM_ECDSA, CKM_SHA224 },
        { CKM_ECDSA_SHA512, CKM_ECDSA, CKM_SHA512 }, { CKM_RSA_X_509, CKM_RSA_X_509, 0 },
        { CKM_SHA224, 0, CKM_SHA224 },
    };
    cs_mech_params_t params;
    for (size_t i = 0; i < sizeof cases / sizeof cases [0]; i++) {
        const cs_mech_row_t *m = cs_mech_row (cases [i].type);
        ck_assert_ptr_nonnull (m);
        ck_assert_uint_eq (m->wire, cases [i].wire);
        ck_assert_uint_eq (m->hash, cases [i].hash);
    }
    const cs_mech_row_t *x509 = cs_mech_row (CKM_RSA_X_509);
    ck_assert ((x509->flags & (CKF_SIGN | CKF_VERIFY | CKF_ENCRYPT | CKF_DECRYPT | CKF_HW))
               == (CKF_SIGN | CKF_VERIFY | CKF_ENCRYPT | CKF_DECRYPT | CKF_HW));
    CK_ULONG junk = 0;
    CK_MECHANISM mech = { CKM_RSA_X_509, &junk, sizeof junk };
    ck_assert_uint_eq (cs_mech_check (x509, &mech, CKK_RSA, 256, &params), CKR_MECHANISM_PARAM_INVALID);
    mech = (CK_MECHANISM) { CKM_RSA_X_509, NULL, 0 };
    ck_assert_uint_eq (cs_mech_check (x509, &mech, CKK_EC, 0, &params), CKR_KEY_TYPE_INCONSISTENT);
    ck_assert_uint_eq (cs_mech_check (x509, &mech, CKK_RSA, 256, &params), CKR_OK);
    const cs_mech_row_t *ecdh = cs_mech_row (CKM_ECDH1_DERIVE);
    ck_assert_uint_eq (ecdh->flags, CKF_HW | CKF_DERIVE);
    mech = (CK_MECHANISM) { CKM_ECDH1_DERIVE, NULL, 0 };
    ck_assert_uint_eq (cs_mech_check (ecdh, &mech, CKK_EC, 0, &params), CKR_MECHANISM_INVALID);
}
END_TEST

/*  PSS salt bounds for every hash on 2048- and 3072-bit keys: 0 and
 *  k - hLen - 2 pass, one more is CKR_MECHANISM_PARAM_INVALID; any MGF1 hash.  */
START_TEST (test_pss_all_hashes)
{
    static const struct { CK_MECHANISM_TYPE type, hash; size_t hlen; } cases [] = {
        { CKM_SHA1_RSA_PKCS_PSS, CKM_SHA_1, 20 }, { CKM_SHA224_RSA_PKCS_PSS, CKM_SHA224, 28 },
        { CKM_SHA256_RSA_PKCS_PSS, CKM_SHA256, 32 }, { CKM_SHA384_RSA_PKCS_PSS, CKM_SHA384, 48 },
        { CKM_SHA512_RSA_PKCS_PSS, CKM_SHA512, 64 },
    };
    static const CK_ULONG mgfs [] = { CKG_MGF1_SHA1, CKG_MGF1_SHA224, CKG_MGF1_SHA256, CKG_MGF1_SHA384,
                                      CKG_MGF1_SHA512 };
    for (size_t k = 256; k <= 384; k += 128)
        for (size_t i = 0; i < 5; i++)
            for (size_t m = 0; m < 5; m++) {
                CK_ULONG max = k - cases [i].hlen - 2;
                ck_assert_uint_eq (s_pss (cases [i].type, cases [i].hash, mgfs [m], 0, k), CKR_OK);
                ck_assert_uint_eq (s_pss (CKM_RSA_PKCS_PSS, cases [i].hash, mgfs [m], max, k), CKR_OK);
                ck_assert_uint_eq (s_pss (cases [i].type, cases [i].hash, mgfs [m], max + 1, k),
                                   CKR_MECHANISM_PARAM_INVALID);
            }
}
END_TEST

int
main (void)
{
    Suite *suite = suite_create ("module_mechanism");
    TCase *tc = tcase_create ("mechanism");
    SRunner *runner;
    int failed;
    tcase_add_test (tc, test_digest_info_sha256);
    tcase_add_test (tc, test_digest_info_lengths);
    tcase_add_test (tc, test_digest_info_kat);
    tcase_add_test (tc, test_table);
    tcase_add_test (tc, test_pss);
    tcase_add_test (tc, test_pss_block);
    tcase_add_test (tc, test_oaep);
    tcase_add_test (tc, test_no_params);
    tcase_add_test (tc, test_table_issue4);
    tcase_add_test (tc, test_pss_all_hashes);
    suite_add_tcase (suite, tc);
    runner = srunner_create (suite);
    srunner_run_all (runner, CK_NORMAL);
    failed = srunner_ntests_failed (runner);
    srunner_free (runner);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
