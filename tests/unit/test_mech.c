/*  test_mech.c — the invariants of the mechanism table (common/cs_mech.h)
 *  and of what the module builds on it (mechanism.h), the length rules, the
 *  RSA generation range, and that man/cryptoserver-pkcs11.7 lists exactly
 *  the table's mechanisms.  Needs top_srcdir (set by make check) for the
 *  man page.
 */
#include <check.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cs_mech.h"
#include "cryptoserver/pkcs11v.h"
#include "cs_wire.h"
#include "mechanism.h"
#include "test_run.h"

#define S_SIGN_FLAGS (CKF_SIGN | CKF_VERIFY)
#define S_CRYPT_FLAGS (CKF_DECRYPT | CKF_ENCRYPT)

START_TEST (test_rows_unique_and_named)
{
    size_t n;
    const cs_mech_row_t *rows = cs_mech_rows (&n);
    ck_assert_uint_gt (n, 40);
    for (size_t i = 0; i < n; i++) {
        ck_assert_msg (rows [i].name && strncmp (rows [i].name, "CKM_", 4) == 0, "row %zu: no name", i);
        ck_assert_ptr_eq (cs_mech_row (rows [i].type), &rows [i]);
        ck_assert_str_eq (cs_mech_name (rows [i].type), rows [i].name);
        ck_assert_ptr_eq (cs_mech_row (rows [i].type), &rows [i]);     /* the module's view */
        for (size_t j = i + 1; j < n; j++) {
            ck_assert_msg (rows [i].type != rows [j].type, "%s twice", rows [i].name);
            ck_assert_msg (strcmp (rows [i].name, rows [j].name) != 0, "%s twice", rows [i].name);
        }
    }
    ck_assert_ptr_null (cs_mech_row (CKM_VENDOR_DEFINED + 7));
    ck_assert_str_eq (cs_mech_name (CKM_VENDOR_DEFINED + 7), "CKM_0x80000007");
}
END_TEST

START_TEST (test_flags_consistent)
{
    size_t n, count;
    const cs_mech_row_t *rows = cs_mech_rows (&n);
    const cs_mech_row_t *table = cs_mech_rows (&count);
    ck_assert_ptr_eq (table, rows);         /* the module lists the table, nothing else */
    ck_assert_uint_eq (count, n);
    for (size_t i = 0; i < n; i++) {
        const cs_mech_row_t *r = &rows [i];
        CK_FLAGS ops = r->flags & (CKF_SIGN | CKF_VERIFY | CKF_DECRYPT | CKF_ENCRYPT | CKF_DIGEST
                                   | CKF_DERIVE | CKF_GENERATE_KEY_PAIR | CKF_GENERATE
                                   | CKF_ENCAPSULATE | CKF_DECAPSULATE);
        bool secret = cs_mech_secret_key_type (r->key_type);
        ck_assert_msg (ops != 0, "%s: no operation", r->name);
        /*  Verify and encrypt are local, so they come with sign and decrypt.  */
        ck_assert_msg (!(r->flags & S_SIGN_FLAGS) == !((r->flags & S_SIGN_FLAGS) == S_SIGN_FLAGS),
                       "%s: sign without verify or the reverse", r->name);
        ck_assert_msg (!(r->flags & S_CRYPT_FLAGS) == !((r->flags & S_CRYPT_FLAGS) == S_CRYPT_FLAGS),
                       "%s: decrypt without encrypt or the reverse", r->name);
        /*  A board runs it (CKF_HW; wire 0 is CKM_RSA_PKCS_KEY_PAIR_GEN) or the module does.  */
        /*  Secret-key generation runs in the module (its RNG): sizes in bytes.  */
        if (ops == CKF_GENERATE) {
            ck_assert_msg (secret && !(r->flags & CKF_HW) && r->wire == 0 && r->min_bits > 0
                           && r->min_bits <= r->max_bits && r->input == CS_MECH_IN_NONE,
                           "%s: a secret-key generator", r->name);
            continue;
        }
        if (!(r->flags & CKF_HW)) {
            ck_assert_uint_eq (r->wire, 0);
            ck_assert_msg (ops == CKF_DIGEST && r->key_type == CS_MECH_KEY_NONE && r->hash == r->type
                           && cs_mech_md (r->hash), "%s: a local row must be a digest", r->name);
            ck_assert_int_eq (r->output, CS_MECH_OUT_DIGEST);
            continue;
        }
        /*  The wire mechanism is itself a row that travels as itself.  */
        const cs_mech_row_t *w = cs_mech_row (r->wire);
        ck_assert_msg (w && w->wire == w->type && w->hash == 0, "%s: wire %s is not a raw row", r->name,
                       cs_mech_name (r->wire));
        ck_assert_msg (w->key_type == r->key_type
                       && (!secret || (w->input == r->input && w->output == r->output))
                       && (w->param == r->param
                           || (r->param == CS_MECH_PARAM_MAC_LEN && w->param == CS_MECH_PARAM_NONE
                               && r->output == CS_MECH_OUT_MAC)),
                       "%s: differs from its wire row", r->name);
        ck_assert_msg ((r->param == CS_MECH_PARAM_MAC_LEN) == (r->wire != r->type && secret),
                       "%s: only a _GENERAL MAC travels as another secret-key row", r->name);
        if (r->key_type == CS_MECH_KEY_NONE)
            ck_assert_msg (r->min_bits == 0 && r->max_bits == 0, "%s: sizes without a key", r->name);
        else
            ck_assert_msg (r->min_bits > 0 && r->min_bits <= r->max_bits, "%s: bad key sizes", r->name);
        if (r->flags & CKF_GENERATE_KEY_PAIR || r->flags & CKF_DERIVE)
            ck_assert_msg (r->input == CS_MECH_IN_NONE && r->output == CS_MECH_OUT_NONE, "%s: data rules",
                           r->name);
        if (r->flags & CKF_SIGN)
            ck_assert_msg (r->output == (secret ? CS_MECH_OUT_MAC : r->key_type == CKK_RSA ? CS_MECH_OUT_MODULUS
                                                : r->key_type == CKK_ML_DSA ? CS_MECH_OUT_KEY
                                                : CS_MECH_OUT_EC),
                           "%s: signature size rule", r->name);
        /*  Secret-key rows: ciphers sized by cs_mech_sym_output_len, MACs by
            cs_mech_mac_len; the key sizes are those C_CreateObject and
            C_GenerateKey accept (cs_mech_secret_len_ok), in bytes.  */
        if (secret) {
            bool cipher = r->output == CS_MECH_OUT_SYM;
            ck_assert_msg (cipher ? ops == S_CRYPT_FLAGS && cs_mech_block_bytes (r) > 0
                                  && r->input != CS_MECH_IN_ANY && cs_mech_mac_len (r) == 0
                                  : r->output == CS_MECH_OUT_MAC && ops == S_SIGN_FLAGS
                                  && r->input == CS_MECH_IN_SYM && cs_mech_mac_len (r) > 0,
                           "%s: secret-key cipher or MAC rules", r->name);
            ck_assert_msg (cs_mech_secret_len_ok (r->key_type, r->min_bits)
                           && cs_mech_secret_len_ok (r->key_type, r->max_bits), "%s: key sizes", r->name);
            /*  C_WrapKey/C_UnwrapKey with a secret key: exactly the AES
                key-wrap rows (RFC 3394, RFC 5649) and the AES and DES3
                CBC-PAD rows (pkcs11-module/wrap.c); never single DES.  */
            bool kw = r->input == CS_MECH_IN_KW || r->input == CS_MECH_IN_KWP
                   || (r->input == CS_MECH_IN_PAD && r->key_type != CKK_DES);
            ck_assert_msg ((r->flags & (CKF_WRAP | CKF_UNWRAP)) == (kw ? (CKF_WRAP | CKF_UNWRAP) : 0)
                           && (!kw || r->key_type == CKK_AES || r->key_type == CKK_DES3),
                           "%s: key wrap with a secret key", r->name);
        }
        ck_assert_msg ((r->param == CS_MECH_PARAM_PSS) == (r->wire == CKM_RSA_PKCS_PSS)
                       && (r->param == CS_MECH_PARAM_OAEP) == (r->wire == CKM_RSA_PKCS_OAEP),
                       "%s: parameter kind", r->name);
        /*  Hash-and-sign rows name a digest of the table and hash any input.  */
        if (r->hash) {
            const cs_mech_row_t *h = cs_mech_row (r->hash);
            ck_assert_msg (h && (h->flags & CKF_DIGEST) && !h->wire && cs_mech_md (r->hash),
                           "%s: hash %s is not a digest row", r->name, cs_mech_name (r->hash));
            ck_assert_msg (r->input == CS_MECH_IN_ANY && ops == S_SIGN_FLAGS, "%s: hash-and-sign", r->name);
            size_t len = 0;
            if (r->wire == CKM_RSA_PKCS)
                ck_assert_msg (cs_mech_digest_info_prefix (r->hash, &len) && len > 0,
                               "%s: no DigestInfo", r->name);
        }
        else
            ck_assert_msg (r->input != CS_MECH_IN_ANY, "%s: raw row without an input rule", r->name);
    }
}
END_TEST

START_TEST (test_length_rules)
{
    const cs_mech_row_t *pkcs = cs_mech_row (CKM_RSA_PKCS), *x509 = cs_mech_row (CKM_RSA_X_509);
    const cs_mech_row_t *oaep = cs_mech_row (CKM_RSA_PKCS_OAEP), *pss = cs_mech_row (CKM_RSA_PKCS_PSS);
    const cs_mech_row_t *ecdsa = cs_mech_row (CKM_ECDSA), *sha = cs_mech_row (CKM_SHA3_256);
    ck_assert_uint_eq (cs_mech_input_check (pkcs, true, 245, 256, 0), CKR_OK);
    ck_assert_uint_eq (cs_mech_input_check (pkcs, true, 246, 256, 0), CKR_DATA_LEN_RANGE);
    ck_assert_uint_eq (cs_mech_input_check (x509, false, 256, 256, 0), CKR_OK);
    ck_assert_uint_eq (cs_mech_input_check (x509, false, 257, 256, 0), CKR_DATA_LEN_RANGE);
    ck_assert_uint_eq (cs_mech_input_check (oaep, true, 256 - 66, 256, 32), CKR_OK);
    ck_assert_uint_eq (cs_mech_input_check (oaep, true, 256 - 65, 256, 32), CKR_DATA_LEN_RANGE);
    ck_assert_uint_eq (cs_mech_input_check (pss, false, 32, 256, 32), CKR_OK);
    ck_assert_uint_eq (cs_mech_input_check (pss, false, 31, 256, 32), CKR_DATA_LEN_RANGE);
    ck_assert_uint_eq (cs_mech_input_check (ecdsa, false, 0, 0, 0), CKR_DATA_LEN_RANGE);
    ck_assert_uint_eq (cs_mech_input_check (ecdsa, false, 65, 0, 0), CKR_DATA_LEN_RANGE);
    ck_assert_uint_eq (cs_mech_output_len (pkcs, 256, 0, 0), 256);
    ck_assert_uint_eq (cs_mech_output_len (ecdsa, 0, 66, 0), 132);
    ck_assert_uint_eq (cs_mech_output_len (sha, 0, 0, 32), 32);
    /*  Secret-key ciphers (PKCS#11 2.40 curr. mech. §2.10): ECB/CBC whole
        blocks, CBC-PAD encrypts any length to the next whole block above it,
        GCM appends the tag.  */
    const cs_mech_row_t *cbc = cs_mech_row (CKM_AES_CBC), *pad = cs_mech_row (CKM_AES_CBC_PAD);
    const cs_mech_row_t *gcm = cs_mech_row (CKM_AES_GCM);
    ck_assert_uint_eq (cs_mech_input_check (cbc, true, 32, 0, 0), CKR_OK);
    ck_assert_uint_eq (cs_mech_input_check (cbc, true, 33, 0, 0), CKR_DATA_LEN_RANGE);
    ck_assert_uint_eq (cs_mech_input_check (pad, true, 33, 0, 0), CKR_OK);
    ck_assert_uint_eq (cs_mech_input_check (pad, false, 33, 0, 0), CKR_DATA_LEN_RANGE);
    ck_assert_uint_eq (cs_mech_input_check (pad, false, 0, 0, 0), CKR_DATA_LEN_RANGE);
    ck_assert_uint_eq (cs_mech_input_check (gcm, true, CS_MECH_SYM_MAX_DATA + 1, 0, 0), CKR_DATA_LEN_RANGE);
    ck_assert_uint_eq (cs_mech_sym_output_len (pad, true, 32, 0), 48);
    ck_assert_uint_eq (cs_mech_sym_output_len (pad, true, 31, 0), 32);
    ck_assert_uint_eq (cs_mech_sym_output_len (pad, false, 48, 0), 48);
    ck_assert_uint_eq (cs_mech_sym_output_len (gcm, true, 10, 16), 26);
    ck_assert_uint_eq (cs_mech_sym_output_len (gcm, false, 26, 16), 10);
    ck_assert_uint_eq (cs_mech_sym_output_len (gcm, false, 10, 16), 0);
}
END_TEST

/*  The rules of the secret-key rows added for issue #10 (CTR, CMAC, key
    wrap, DES3, the HMAC family and the _GENERAL MACs).  */
START_TEST (test_secret_rules)
{
    const cs_mech_row_t *kw = cs_mech_row (CKM_AES_KEY_WRAP), *kwp = cs_mech_row (CKM_AES_KEY_WRAP_PAD);
    const cs_mech_row_t *ctr = cs_mech_row (CKM_AES_CTR), *des_cbc = cs_mech_row (CKM_DES3_CBC);
    const cs_mech_row_t *des_pad = cs_mech_row (CKM_DES3_CBC_PAD), *des_gen = cs_mech_row (CKM_DES3_KEY_GEN);
    ck_assert (kw && kwp && ctr && des_cbc && des_pad && des_gen);
    /*  RFC 3394 §2.2.1: n >= 2 semiblocks of 8 bytes; the result one more.  */
    ck_assert_uint_eq (cs_mech_input_check (kw, true, 16, 0, 0), CKR_OK);
    ck_assert_uint_eq (cs_mech_input_check (kw, true, 8, 0, 0), CKR_DATA_LEN_RANGE);
    ck_assert_uint_eq (cs_mech_input_check (kw, true, 20, 0, 0), CKR_DATA_LEN_RANGE);
    ck_assert_uint_eq (cs_mech_input_check (kw, false, 16, 0, 0), CKR_DATA_LEN_RANGE);
    ck_assert_uint_eq (cs_mech_input_check (kw, false, 24, 0, 0), CKR_OK);
    ck_assert_uint_eq (cs_mech_sym_output_len (kw, true, 16, 0), 24);
    ck_assert_uint_eq (cs_mech_sym_output_len (kw, false, 24, 0), 16);
    /*  RFC 5649 §4.1: any non-empty input, padded to 8, plus the AIV block.  */
    ck_assert_uint_eq (cs_mech_input_check (kwp, true, 1, 0, 0), CKR_OK);
    ck_assert_uint_eq (cs_mech_input_check (kwp, true, 0, 0, 0), CKR_DATA_LEN_RANGE);
    ck_assert_uint_eq (cs_mech_input_check (kwp, false, 15, 0, 0), CKR_DATA_LEN_RANGE);
    ck_assert_uint_eq (cs_mech_input_check (kwp, false, 16, 0, 0), CKR_OK);
    ck_assert_uint_eq (cs_mech_sym_output_len (kwp, true, 20, 0), 32);
    ck_assert_uint_eq (cs_mech_sym_output_len (kwp, true, 7, 0), 16);
    /*  CTR: any length, output as long.  */
    ck_assert_uint_eq (cs_mech_input_check (ctr, true, 17, 0, 0), CKR_OK);
    ck_assert_uint_eq (cs_mech_sym_output_len (ctr, true, 17, 0), 17);
    /*  DES3: 8-byte blocks, 24-byte keys, generation reports 24..24.  */
    ck_assert_uint_eq (cs_mech_block_bytes (des_cbc), 8);
    ck_assert_uint_eq (cs_mech_input_check (des_cbc, true, 24, 0, 0), CKR_OK);
    ck_assert_uint_eq (cs_mech_input_check (des_cbc, true, 20, 0, 0), CKR_DATA_LEN_RANGE);
    ck_assert_uint_eq (cs_mech_input_check (des_pad, false, 20, 0, 0), CKR_DATA_LEN_RANGE);
    ck_assert_uint_eq (cs_mech_sym_output_len (des_pad, true, 20, 0), 24);
    ck_assert_uint_eq (cs_mech_sym_output_len (des_pad, true, 24, 0), 32);
    ck_assert_uint_eq (des_gen->min_bits, 24);
    ck_assert_uint_eq (des_gen->max_bits, 24);
    ck_assert (cs_mech_secret_len_ok (CKK_DES3, 24) && !cs_mech_secret_len_ok (CKK_DES3, 16));
    ck_assert (!cs_mech_secret_len_ok (CKK_AES, 20) && cs_mech_secret_len_ok (CKK_AES, 24));
    /*  MAC lengths: the hash size, CMAC a block; _GENERAL as its wire.  */
    ck_assert_uint_eq (cs_mech_mac_len (cs_mech_row (CKM_SHA_1_HMAC)), 20);
    ck_assert_uint_eq (cs_mech_mac_len (cs_mech_row (CKM_SHA224_HMAC)), 28);
    ck_assert_uint_eq (cs_mech_mac_len (cs_mech_row (CKM_SHA384_HMAC_GENERAL)), 48);
    ck_assert_uint_eq (cs_mech_mac_len (cs_mech_row (CKM_SHA512_HMAC)), 64);
    ck_assert_uint_eq (cs_mech_mac_len (cs_mech_row (CKM_AES_CMAC_GENERAL)), 16);
    ck_assert_uint_eq (cs_mech_row (CKM_SHA256_HMAC_GENERAL)->wire, CKM_SHA256_HMAC);
    ck_assert_uint_le (64, CS_MECH_SYM_OUT_EXTRA);
    /*  Every generator's range is what its key type's rows take.  */
    size_t n;
    const cs_mech_row_t *rows = cs_mech_rows (&n);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++)
            if ((rows [i].flags & CKF_GENERATE) && (rows [j].flags & CKF_HW) && rows [j].key_type == rows [i].key_type)
                ck_assert_msg (rows [j].min_bits == rows [i].min_bits && rows [j].max_bits == rows [i].max_bits,
                               "%s and %s report other key sizes", rows [i].name, rows [j].name);
}
END_TEST

/*  AES-CTR: the counter field of ulCounterBits must not carry out.  */
START_TEST (test_ctr_fits)
{
    unsigned char cb [16];
    memset (cb, 0, sizeof cb);
    ck_assert (cs_mech_ctr_fits (cb, 1, 2));                    /* counters 0, 1 */
    ck_assert (!cs_mech_ctr_fits (cb, 1, 3));
    ck_assert (cs_mech_ctr_fits (cb, 12, 4096));
    ck_assert (!cs_mech_ctr_fits (cb, 12, 4097));
    cb [15] = 0xff;
    ck_assert (cs_mech_ctr_fits (cb, 8, 1));
    ck_assert (!cs_mech_ctr_fits (cb, 8, 2));                   /* 0xff + 1 leaves 8 bits */
    ck_assert (cs_mech_ctr_fits (cb, 9, 2));
    cb [14] = 0x01;                                             /* 0x1ff: the 9-bit field is full */
    ck_assert (!cs_mech_ctr_fits (cb, 9, 2));
    ck_assert (cs_mech_ctr_fits (cb, 10, 2));
    memset (cb, 0xff, sizeof cb);
    ck_assert (!cs_mech_ctr_fits (cb, 64, 2));
    ck_assert (!cs_mech_ctr_fits (cb, 127, 2));
    ck_assert (cs_mech_ctr_fits (cb, 128, 2));                  /* the whole block: wraps alike */
    ck_assert (cs_mech_ctr_fits (cb, 64, 1));
    ck_assert (cs_mech_ctr_fits (cb, 64, 0));
    ck_assert (!cs_mech_ctr_fits (cb, 0, 1));
    ck_assert (!cs_mech_ctr_fits (cb, 129, 1));
}
END_TEST

START_TEST (test_rsa_gen_range)
{
    CK_ULONG min = 0, max = 0;
    cs_mech_rsa_gen_range (0, 512, 8192, &min, &max);           /* an old broker: the default */
    ck_assert_uint_eq (min, CS_MECH_RSA_MIN_BITS_DEFAULT);
    ck_assert_uint_eq (max, CS_MECH_RSA_GEN_MAX);
    cs_mech_rsa_gen_range (1024, 512, 8192, &min, &max);
    ck_assert_uint_eq (min, 1024);
    cs_mech_rsa_gen_range (512, 0, 3072, &min, &max);           /* never below the floor */
    ck_assert_uint_eq (min, CS_MECH_RSA_GEN_FLOOR);
    ck_assert_uint_eq (max, 3072);
    ck_assert (cs_mech_rsa_gen_ok (2048, 0, 0, 0));
    ck_assert (!cs_mech_rsa_gen_ok (1024, 0, 0, 0));
    ck_assert (!cs_mech_rsa_gen_ok (2047, 0, 0, 0));
    ck_assert (!cs_mech_rsa_gen_ok (2056 + 4, 0, 0, 0));
    ck_assert (cs_mech_rsa_gen_ok (1024, 1024, 0, 0));
    ck_assert (!cs_mech_rsa_gen_ok (1016, 1024, 0, 0));
    ck_assert (!cs_mech_rsa_gen_ok (4104, 0, 0, 0));
}
END_TEST

/*  Every CKM_ name on the line after a ".TP" in the sections from
 *  "Mechanisms" up to "Login and PINs" of the man page.  */
START_TEST (test_man_page_lists_the_table)
{
    char path [4096], line [4096], seen [128][64];
    size_t n_seen = 0, n;
    const char *top = getenv ("top_srcdir");
    snprintf (path, sizeof path, "%s/man/cryptoserver-pkcs11.7", top ? top : "..");
    FILE *file = fopen (path, "re");
    ck_assert_msg (file != NULL, "cannot open %s", path);
    bool in = false, after_tp = false;
    regex_t re;
    ck_assert_int_eq (regcomp (&re, "CKM_[A-Z0-9_]+", REG_EXTENDED), 0);
    while (fgets (line, sizeof line, file)) {
        if (strncmp (line, ".SS Mechanisms", 14) == 0)
            in = true;
        else
        if (strncmp (line, ".SS Login", 9) == 0)
            in = false;
        if (in && after_tp) {
            regmatch_t m;
            for (const char *p = line; regexec (&re, p, 1, &m, 0) == 0; p += m.rm_eo) {
                int len = (int) (m.rm_eo - m.rm_so);
                ck_assert (n_seen < 128 && len < 64);
                snprintf (seen [n_seen++], 64, "%.*s", len, p + m.rm_so);
            }
        }
        after_tp = strncmp (line, ".TP", 3) == 0;
    }
    regfree (&re);
    fclose (file);
    const cs_mech_row_t *rows = cs_mech_rows (&n);
    for (size_t i = 0; i < n; i++) {
        bool found = false;
        for (size_t j = 0; j < n_seen && !found; j++)
            found = strcmp (seen [j], rows [i].name) == 0;
        ck_assert_msg (found, "the man page does not list %s", rows [i].name);
    }
    for (size_t j = 0; j < n_seen; j++) {
        bool found = false;
        for (size_t i = 0; i < n && !found; i++)
            found = strcmp (seen [j], rows [i].name) == 0;
        ck_assert_msg (found, "the man page lists %s, which the table does not have", seen [j]);
    }
}
END_TEST

int
main (void)
{
    Suite *suite = suite_create ("mech");
    TCase *tc = tcase_create ("table");
    tcase_add_test (tc, test_rows_unique_and_named);
    tcase_add_test (tc, test_flags_consistent);
    tcase_add_test (tc, test_length_rules);
    tcase_add_test (tc, test_secret_rules);
    tcase_add_test (tc, test_ctr_fits);
    tcase_add_test (tc, test_rsa_gen_range);
    tcase_add_test (tc, test_man_page_lists_the_table);
    suite_add_tcase (suite, tc);
    return tr_run (suite);
}
