/*  test_module_object.c — the object table on a fake key list: visibility,
 *  stable handles, C_GetAttributeValue semantics (PKCS#11 2.40 §5.7),
 *  template matching, token secret keys, the sign-input length rules, and what the broker's
 *  answers about a login ticket do to the login state.  */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include "object.h"
#include "sign.h"
#include "login.h"
#include "token.h"

static uint8_t s_modulus [256];
static uint8_t s_exponent [] = { 0x01, 0x00, 0x01 };
static uint8_t s_p256_oid [] = { 0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07 };
static uint8_t s_point [67];
static Cs__KeyInfo s_rsa = CS__KEY_INFO__INIT, s_ec = CS__KEY_INFO__INIT;
static Cs__KeyInfo *s_keys [2];
static Cs__ListKeysResult s_list = CS__LIST_KEYS_RESULT__INIT;

static void
s_setup (void)
{
    memset (s_modulus, 0xc5, sizeof s_modulus);
    s_rsa.id = (ProtobufCBinaryData) { 1, (uint8_t *) "\x01" };
    s_rsa.label = "rsa2048";
    s_rsa.key_type = CKK_RSA;
    s_rsa.bits = 2048;
    s_rsa.modulus = (ProtobufCBinaryData) { sizeof s_modulus, s_modulus };
    s_rsa.public_exponent = (ProtobufCBinaryData) { sizeof s_exponent, s_exponent };
    s_rsa.can_sign = s_rsa.can_decrypt = true;
    s_point [0] = 0x04;
    s_point [1] = 65;
    s_point [2] = 0x04;
    s_ec.id = (ProtobufCBinaryData) { 1, (uint8_t *) "\x03" };
    s_ec.label = "p256";
    s_ec.key_type = CKK_EC;
    s_ec.bits = 256;
    s_ec.ec_params = (ProtobufCBinaryData) { sizeof s_p256_oid, s_p256_oid };
    s_ec.ec_point = (ProtobufCBinaryData) { sizeof s_point, s_point };
    s_ec.can_sign = true;
    s_keys [0] = &s_rsa;
    s_keys [1] = &s_ec;
    s_list.keys = s_keys;
    s_list.n_keys = 2;
    ck_assert_uint_eq (cs_object_load_inlock (&s_list), CKR_OK);
}

static void
s_teardown (void)
{
    cs_object_reset_inlock ();
    cs_token_reset_inlock ();
}

static size_t
s_find (CK_ATTRIBUTE *tmpl, CK_ULONG count, CK_OBJECT_HANDLE *first)
{
    CK_OBJECT_HANDLE *handles = NULL;
    size_t found = 0;
    ck_assert_uint_eq (cs_object_find_inlock (tmpl, count, &handles, &found), CKR_OK);
    if (first && found)
        *first = handles [0];
    free (handles);
    return found;
}

static CK_OBJECT_HANDLE
s_handle (CK_OBJECT_CLASS klass, const char *id)
{
    CK_OBJECT_HANDLE handle = 0;
    CK_ATTRIBUTE tmpl [] = { { CKA_CLASS, &klass, sizeof klass }, { CKA_ID, (void *) id, 1 } };
    ck_assert_uint_eq (s_find (tmpl, 2, &handle), 1);
    return handle;
}

START_TEST (test_visibility)
{
    ck_assert_uint_eq (s_find (NULL, 0, NULL), 2);      /* public keys only */
    ck_assert_uint_eq (cs_token_login_store_inlock (CKU_USER, (const uint8_t *) "\x01ticket", 7), CKR_OK);
    ck_assert_uint_eq (s_find (NULL, 0, NULL), 4);
    cs_login_logout_inlock ();
    ck_assert_uint_eq (s_find (NULL, 0, NULL), 2);
}
END_TEST

/*  As the job runner applies the broker's answer about a ticket: a refusal
 *  that ends the login destroys the private session objects (runner.c).  */
static void
s_ticket_answer (const uint8_t *sent, size_t sent_len, const uint8_t *fresh, size_t fresh_len, bool refused)
{
    if (cs_login_ticket_answer_inlock (sent, sent_len, fresh, fresh_len, refused))
        cs_object_logged_out_inlock ();
}

/*  What the broker says about a ticket (cs_login_ticket_answer_inlock,
 *  docs/CONTRACTS.md "Login tickets"): a renewed ticket replaces the one
 *  sent while that is still the current one; CKR_USER_NOT_LOGGED_IN for the
 *  current ticket logs out as C_Logout does (private objects go); answers
 *  about an older ticket change nothing, and nothing logs in.  */
START_TEST (test_ticket_answer)
{
    static const uint8_t one [] = "\x01one", two [] = "\x01two", three [] = "\x01three";
    uint8_t out [64];
    ck_assert_uint_eq (cs_token_login_store_inlock (CKU_USER, one, 4), CKR_OK);
    s_ticket_answer (one, 4, two, 4, false);
    ck_assert_uint_eq (cs_login_ticket_copy_inlock (out, sizeof out), 4);
    ck_assert_mem_eq (out, two, 4);
    s_ticket_answer (one, 4, three, 6, false);      /* late: about the old one */
    s_ticket_answer (one, 4, NULL, 0, true);
    ck_assert (cs_login_user_logged_in_inlock ());
    ck_assert_uint_eq (cs_login_ticket_copy_inlock (out, sizeof out), 4);
    ck_assert_mem_eq (out, two, 4);
    s_ticket_answer (two, 4, NULL, 0, false);       /* no renewal: kept */
    ck_assert_uint_eq (cs_login_ticket_copy_inlock (out, sizeof out), 4);
    ck_assert_uint_eq (s_find (NULL, 0, NULL), 4);
    s_ticket_answer (two, 4, NULL, 0, true);        /* refused: logged out */
    ck_assert (!cs_login_user_logged_in_inlock ());
    ck_assert_uint_eq (cs_login_ticket_copy_inlock (out, sizeof out), 0);
    ck_assert_uint_eq (s_find (NULL, 0, NULL), 2);
    s_ticket_answer (two, 4, three, 6, false);
    ck_assert (!cs_login_user_logged_in_inlock ());
}
END_TEST

START_TEST (test_stable_handles)
{
    CK_OBJECT_HANDLE rsa = s_handle (CKO_PUBLIC_KEY, "\x01");
    CK_OBJECT_HANDLE ec = s_handle (CKO_PUBLIC_KEY, "\x03");
    CK_OBJECT_CLASS klass;
    cs_key_t *key;
    ck_assert_uint_ne (rsa, ec);
    s_list.keys = &s_keys [1];          /* rsa2048 disappears */
    s_list.n_keys = 1;
    ck_assert_uint_eq (cs_object_load_inlock (&s_list), CKR_OK);
    ck_assert_ptr_null (cs_object_key_inlock (rsa, &klass));
    ck_assert_uint_eq (s_handle (CKO_PUBLIC_KEY, "\x03"), ec);
    s_list.keys = s_keys;               /* and comes back */
    s_list.n_keys = 2;
    ck_assert_uint_eq (cs_object_load_inlock (&s_list), CKR_OK);
    ck_assert_uint_eq (s_handle (CKO_PUBLIC_KEY, "\x01"), rsa);
    key = cs_object_key_inlock (rsa, &klass);
    ck_assert_ptr_nonnull (key);
    ck_assert_uint_eq (klass, CKO_PUBLIC_KEY);
    ck_assert_uint_eq (cs_key_signature_len (key), 256);
    cs_key_unref (&key);
    key = cs_object_key_inlock (ec, NULL);
    ck_assert_uint_eq (cs_key_signature_len (key), 64);
    cs_key_unref (&key);
}
END_TEST

START_TEST (test_get_attributes)
{
    CK_OBJECT_HANDLE handle = s_handle (CKO_PUBLIC_KEY, "\x01");
    CK_BYTE small [8];
    CK_BBOOL verify = CK_FALSE;
    CK_ULONG bits = 0;
    CK_ATTRIBUTE tmpl [] = {
        { CKA_MODULUS, NULL, 0 },
        { CKA_VERIFY, &verify, sizeof verify },
        { CKA_MODULUS_BITS, &bits, sizeof bits },
    };
    ck_assert_uint_eq (cs_object_get_attributes_inlock (handle, tmpl, 3), CKR_OK);
    ck_assert_uint_eq (tmpl [0].ulValueLen, 256);
    ck_assert_uint_eq (verify, CK_TRUE);
    ck_assert_uint_eq (bits, 2048);
    /*  Too small, then unknown: both reported, every entry processed.  */
    CK_ATTRIBUTE bad [] = {
        { CKA_MODULUS, small, sizeof small },
        { CKA_PUBLIC_EXPONENT, small, sizeof small },
        { CKA_VALUE_LEN, small, sizeof small },
    };
    ck_assert_uint_eq (cs_object_get_attributes_inlock (handle, bad, 3), CKR_ATTRIBUTE_TYPE_INVALID);
    ck_assert_uint_eq (bad [0].ulValueLen, CK_UNAVAILABLE_INFORMATION);
    ck_assert_uint_eq (bad [1].ulValueLen, 3);
    ck_assert_mem_eq (small, s_exponent, 3);
    ck_assert_uint_eq (bad [2].ulValueLen, CK_UNAVAILABLE_INFORMATION);
    bad [0].ulValueLen = sizeof small;
    ck_assert_uint_eq (cs_object_get_attributes_inlock (handle, bad, 1), CKR_BUFFER_TOO_SMALL);
    ck_assert_uint_eq (cs_object_get_attributes_inlock (999, tmpl, 1), CKR_OBJECT_HANDLE_INVALID);
}
END_TEST

START_TEST (test_private_attributes)
{
    CK_OBJECT_HANDLE handle;
    CK_BBOOL sensitive = CK_FALSE, sign = CK_FALSE, priv = CK_FALSE;
    CK_BYTE buf [512];
    CK_ATTRIBUTE tmpl [] = {
        { CKA_SENSITIVE, &sensitive, sizeof sensitive },
        { CKA_PRIVATE_EXPONENT, buf, sizeof buf },
        { CKA_SIGN, &sign, sizeof sign },
        { CKA_PRIVATE, &priv, sizeof priv },
    };
    ck_assert_uint_eq (cs_token_login_store_inlock (CKU_USER, (const uint8_t *) "\x01t", 2), CKR_OK);
    handle = s_handle (CKO_PRIVATE_KEY, "\x01");
    ck_assert_uint_eq (cs_object_get_attributes_inlock (handle, tmpl, 4), CKR_ATTRIBUTE_SENSITIVE);
    ck_assert_uint_eq (tmpl [1].ulValueLen, CK_UNAVAILABLE_INFORMATION);
    ck_assert (sensitive && sign && priv);
    cs_login_logout_inlock ();
    ck_assert_uint_eq (cs_object_get_attributes_inlock (handle, tmpl, 1), CKR_OBJECT_HANDLE_INVALID);
}
END_TEST

/*  A token secret key (issue #10): one CKO_SECRET_KEY object, visible with
 *  a login only, CKA_VALUE_LEN from its bits, CKA_VALUE sensitive even when
 *  the broker's flags say not sensitive and extractable (the module never
 *  has the value), used by its ref.  */
START_TEST (test_token_secret_key)
{
    Cs__KeyInfo aes = CS__KEY_INFO__INIT;
    Cs__Attribute not_sensitive = CS__ATTRIBUTE__INIT, extractable = CS__ATTRIBUTE__INIT;
    Cs__Attribute encrypt = CS__ATTRIBUTE__INIT;
    Cs__Attribute *attrs [] = { &not_sensitive, &extractable, &encrypt };
    Cs__KeyInfo *keys [] = { &s_rsa, &aes };
    Cs__ListKeysResult list = CS__LIST_KEYS_RESULT__INIT;
    CK_ATTRIBUTE_TYPE types [] = { CKA_SENSITIVE, CKA_EXTRACTABLE, CKA_ENCRYPT };
    for (size_t i = 0; i < 3; i++) {
        attrs [i]->type = types [i];
        attrs [i]->value_case = CS__ATTRIBUTE__VALUE_FLAG;
        attrs [i]->flag = i > 0;            /* not sensitive, extractable, encrypts */
    }
    aes.ref = "ks:00112233445566778899aabbccddeeff";
    aes.id = (ProtobufCBinaryData) { 1, (uint8_t *) "\x07" };
    aes.label = "aes";
    aes.key_type = CKK_AES;
    aes.bits = 256;
    aes.has_private = true;
    aes.private_attributes = attrs;
    aes.n_private_attributes = 3;
    list.keys = keys;
    list.n_keys = 2;
    ck_assert_uint_eq (cs_object_load_inlock (&list), CKR_OK);
    CK_OBJECT_CLASS secret = CKO_SECRET_KEY;
    CK_ATTRIBUTE by_class [] = { { CKA_CLASS, &secret, sizeof secret } };
    ck_assert_uint_eq (s_find (by_class, 1, NULL), 0);          /* CKA_PRIVATE: not before a login */
    ck_assert_uint_eq (cs_token_login_store_inlock (CKU_USER, (const uint8_t *) "\x01t", 2), CKR_OK);
    CK_OBJECT_HANDLE handle = s_handle (CKO_SECRET_KEY, "\x07");
    CK_OBJECT_CLASS pub = CKO_PUBLIC_KEY;
    CK_ATTRIBUTE pub_aes [] = { { CKA_CLASS, &pub, sizeof pub }, { CKA_ID, "\x07", 1 } };
    ck_assert_uint_eq (s_find (pub_aes, 2, NULL), 0);
    CK_ULONG value_len = 0, type = 0;
    CK_BBOOL token = CK_FALSE;
    CK_BYTE value [64];
    CK_ATTRIBUTE get [] = { { CKA_VALUE_LEN, &value_len, sizeof value_len }, { CKA_KEY_TYPE, &type, sizeof type },
                            { CKA_TOKEN, &token, sizeof token }, { CKA_VALUE, value, sizeof value } };
    ck_assert_uint_eq (cs_object_get_attributes_inlock (handle, get, 4), CKR_ATTRIBUTE_SENSITIVE);
    ck_assert_uint_eq (value_len, 32);
    ck_assert_uint_eq (type, CKK_AES);
    ck_assert (token);
    ck_assert_uint_eq (get [3].ulValueLen, CK_UNAVAILABLE_INFORMATION);
    cs_key_t *key = NULL;
    ck_assert_uint_eq (cs_object_use_inlock (handle, CKF_SIGN, &key), CKR_KEY_FUNCTION_NOT_PERMITTED);
    ck_assert_uint_eq (cs_object_use_inlock (handle, CKF_ENCRYPT, &key), CKR_OK);
    ck_assert_ptr_null (key->secret);
    ck_assert_uint_eq (key->secret_len, 32);
    ck_assert_str_eq (key->ref, aes.ref);
    cs_key_unref (&key);
}
END_TEST

START_TEST (test_find_template)
{
    CK_KEY_TYPE ec = CKK_EC;
    CK_BBOOL yes = CK_TRUE;
    CK_ATTRIBUTE by_type [] = { { CKA_KEY_TYPE, &ec, sizeof ec } };
    CK_ATTRIBUTE by_label [] = { { CKA_LABEL, "rsa2048", 7 } };
    CK_ATTRIBUTE by_prefix [] = { { CKA_LABEL, "rsa", 3 } };
    CK_ATTRIBUTE encrypt_ec [] = { { CKA_KEY_TYPE, &ec, sizeof ec }, { CKA_ENCRYPT, &yes, 1 } };
    CK_ATTRIBUTE unknown [] = { { CKA_VALUE_LEN, &yes, 1 } };
    ck_assert_uint_eq (s_find (by_type, 1, NULL), 1);
    ck_assert_uint_eq (s_find (by_label, 1, NULL), 1);
    ck_assert_uint_eq (s_find (by_prefix, 1, NULL), 0);
    ck_assert_uint_eq (s_find (encrypt_ec, 2, NULL), 0);
    ck_assert_uint_eq (s_find (unknown, 1, NULL), 0);
}
END_TEST

START_TEST (test_sign_input_lengths)
{
    uint8_t data [300] = { 0 }, out [CS_SIGOP_MAX_MESSAGE];
    size_t out_len;
    cs_key_t *rsa = cs_object_key_inlock (s_handle (CKO_PUBLIC_KEY, "\x01"), NULL);
    cs_key_t *ec = cs_object_key_inlock (s_handle (CKO_PUBLIC_KEY, "\x03"), NULL);
    CK_MECHANISM pkcs = { CKM_RSA_PKCS, NULL, 0 }, ecdsa = { CKM_ECDSA, NULL, 0 };
    CK_MECHANISM sha256 = { CKM_SHA256_RSA_PKCS, NULL, 0 };
    cs_sigop_t *op;
    /*  CKM_RSA_PKCS: at most k - 11 = 245 bytes.  */
    ck_assert_uint_eq (cs_sigop_new (&pkcs, rsa, CKF_SIGN, &op), CKR_OK);
    ck_assert_uint_eq (cs_sigop_message (op, data, 245, false, out, &out_len), CKR_OK);
    ck_assert_uint_eq (out_len, 245);
    ck_assert_uint_eq (cs_sigop_message (op, data, 246, false, out, &out_len), CKR_DATA_LEN_RANGE);
    cs_sigop_free (op);
    /*  Hash-and-sign: the DigestInfo of SHA-256 (51 bytes), multi-part.  */
    ck_assert_uint_eq (cs_sigop_new (&sha256, rsa, CKF_SIGN, &op), CKR_OK);
    ck_assert_uint_eq (cs_sigop_update (op, data, 100), CKR_OK);
    ck_assert_uint_eq (cs_sigop_message (op, NULL, 0, true, out, &out_len), CKR_OK);
    ck_assert_uint_eq (out_len, 51);
    cs_sigop_free (op);
    /*  Raw ECDSA: 1..64 bytes.  */
    ck_assert_uint_eq (cs_sigop_new (&ecdsa, ec, CKF_SIGN, &op), CKR_OK);
    ck_assert_uint_eq (cs_sigop_message (op, data, 64, false, out, &out_len), CKR_OK);
    ck_assert_uint_eq (cs_sigop_message (op, data, 65, false, out, &out_len), CKR_DATA_LEN_RANGE);
    cs_sigop_free (op);
    ck_assert_uint_eq (cs_sigop_new (&ecdsa, rsa, CKF_SIGN, &op), CKR_KEY_TYPE_INCONSISTENT);
    ck_assert_uint_eq (cs_sigop_new (&(CK_MECHANISM) { CKM_SHA256, NULL, 0 }, rsa, CKF_SIGN, &op),
                       CKR_MECHANISM_INVALID);
    cs_key_unref (&rsa);
    cs_key_unref (&ec);
}
END_TEST

int
main (void)
{
    Suite *suite = suite_create ("module_object");
    TCase *tc = tcase_create ("object");
    SRunner *runner;
    int failed;
    tcase_add_checked_fixture (tc, s_setup, s_teardown);
    tcase_add_test (tc, test_visibility);
    tcase_add_test (tc, test_ticket_answer);
    tcase_add_test (tc, test_stable_handles);
    tcase_add_test (tc, test_get_attributes);
    tcase_add_test (tc, test_private_attributes);
    tcase_add_test (tc, test_find_template);
    tcase_add_test (tc, test_token_secret_key);
    tcase_add_test (tc, test_sign_input_lengths);
    suite_add_tcase (suite, tc);
    runner = srunner_create (suite);
    srunner_run_all (runner, CK_NORMAL);
    failed = srunner_ntests_failed (runner);
    srunner_free (runner);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
