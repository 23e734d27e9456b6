/*  test_module_dataobj.c — certificates and data objects in the module
 *  (dataobj.h, issue #10): the attributes of a new certificate derived
 *  from its DER (CKA_SUBJECT, CKA_ISSUER, CKA_SERIAL_NUMBER, CKA_CHECK_VALUE,
 *  checked against OpenSSL's own encodings), the template refusals with
 *  their exact codes, and token objects from a broker's list: handles,
 *  visibility of CKA_PRIVATE ones, C_GetAttributeValue and matching.  */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/evp.h>
#include <openssl/x509.h>
#include "dataobj.h"
#include "token.h"

static uint8_t *s_der;
static int s_der_len;
static X509 *s_cert;

static void
s_setup (void)
{
    EVP_PKEY *pkey = EVP_PKEY_Q_keygen (NULL, NULL, "EC", "P-256");
    ck_assert_ptr_nonnull (pkey);
    s_cert = X509_new ();
    X509_NAME *subject = X509_NAME_new (), *issuer = X509_NAME_new ();
    X509_NAME_add_entry_by_txt (subject, "CN", MBSTRING_ASC, (const unsigned char *) "subject", -1, -1, 0);
    X509_NAME_add_entry_by_txt (issuer, "CN", MBSTRING_ASC, (const unsigned char *) "issuer", -1, -1, 0);
    X509_set_subject_name (s_cert, subject);
    X509_set_issuer_name (s_cert, issuer);
    ASN1_INTEGER_set (X509_get_serialNumber (s_cert), 0x123456);
    X509_gmtime_adj (X509_getm_notBefore (s_cert), 0);
    X509_gmtime_adj (X509_getm_notAfter (s_cert), 3600);
    X509_set_pubkey (s_cert, pkey);
    ck_assert_int_gt (X509_sign (s_cert, pkey, EVP_sha256 ()), 0);
    s_der = NULL;
    s_der_len = i2d_X509 (s_cert, &s_der);
    ck_assert_int_gt (s_der_len, 0);
    X509_NAME_free (subject);
    X509_NAME_free (issuer);
    EVP_PKEY_free (pkey);
}

static void
s_teardown (void)
{
    OPENSSL_free (s_der);
    X509_free (s_cert);
    cs_dataobj_reset_inlock ();
    cs_token_reset_inlock ();
}

//  True when attrs holds type with exactly len bytes of value.
static bool
s_has (const cs_attrs_t *attrs, CK_ATTRIBUTE_TYPE type, const void *value, size_t len)
{
    const cs_attr_t *attr = cs_attrs_find (attrs, type);
    return attr && attr->len == len && (!len || memcmp (attr->value, value, len) == 0);
}

START_TEST (test_certificate_derived)
{
    CK_OBJECT_CLASS klass = CKO_CERTIFICATE;
    CK_CERTIFICATE_TYPE type = CKC_X_509;
    CK_ATTRIBUTE tmpl [] = {
        { CKA_CLASS, &klass, sizeof klass }, { CKA_CERTIFICATE_TYPE, &type, sizeof type },
        { CKA_VALUE, s_der, (CK_ULONG) s_der_len }, { CKA_LABEL, "c", 1 },
    };
    cs_attrs_t attrs = { 0 };
    ck_assert_uint_eq (cs_dataobj_attrs_new (klass, tmpl, 4, &attrs), CKR_OK);
    unsigned char *subject = NULL, *issuer = NULL, *serial = NULL, sha1 [20];
    int subject_len = i2d_X509_NAME (X509_get_subject_name (s_cert), &subject);
    int issuer_len = i2d_X509_NAME (X509_get_issuer_name (s_cert), &issuer);
    int serial_len = i2d_ASN1_INTEGER (X509_get_serialNumber (s_cert), &serial);
    ck_assert (EVP_Digest (s_der, (size_t) s_der_len, sha1, NULL, EVP_sha1 (), NULL));
    ck_assert (s_has (&attrs, CKA_SUBJECT, subject, (size_t) subject_len));
    ck_assert (s_has (&attrs, CKA_ISSUER, issuer, (size_t) issuer_len));
    ck_assert (s_has (&attrs, CKA_SERIAL_NUMBER, serial, (size_t) serial_len));
    ck_assert (s_has (&attrs, CKA_SERIAL_NUMBER, "\x02\x03\x12\x34\x56", 5));
    ck_assert (s_has (&attrs, CKA_CHECK_VALUE, sha1, 3));
    ck_assert (s_has (&attrs, CKA_PRIVATE, "\0", 1));
    ck_assert (s_has (&attrs, CKA_MODIFIABLE, "\1", 1));
    ck_assert (s_has (&attrs, CKA_TRUSTED, "\0", 1));
    ck_assert (s_has (&attrs, CKA_ID, "", 0));
    ck_assert_ptr_null (cs_attrs_find (&attrs, CKA_CLASS));
    cs_attrs_clear (&attrs);
    //  A subject the application gives is kept as given.
    CK_ATTRIBUTE given [] = {
        { CKA_CLASS, &klass, sizeof klass }, { CKA_CERTIFICATE_TYPE, &type, sizeof type },
        { CKA_VALUE, s_der, (CK_ULONG) s_der_len }, { CKA_SUBJECT, "mine", 4 },
    };
    ck_assert_uint_eq (cs_dataobj_attrs_new (klass, given, 4, &attrs), CKR_OK);
    ck_assert (s_has (&attrs, CKA_SUBJECT, "mine", 4));
    ck_assert (s_has (&attrs, CKA_ISSUER, issuer, (size_t) issuer_len));
    cs_attrs_clear (&attrs);
    OPENSSL_free (subject);
    OPENSSL_free (issuer);
    OPENSSL_free (serial);
}
END_TEST

START_TEST (test_template_refusals)
{
    CK_OBJECT_CLASS cert = CKO_CERTIFICATE, data = CKO_DATA;
    CK_CERTIFICATE_TYPE x509 = CKC_X_509, attr_cert = CKC_X_509_ATTR_CERT;
    CK_BBOOL yes = CK_TRUE;
    uint8_t garbage [4] = { 1, 2, 3, 4 }, *longer = malloc ((size_t) s_der_len + 1);
    memcpy (longer, s_der, (size_t) s_der_len);
    longer [s_der_len] = 0;
    struct { CK_OBJECT_CLASS klass; CK_ATTRIBUTE extra; CK_RV rv; bool no_value; } cases [] = {
        { CKO_CERTIFICATE, { CKA_LABEL, "x", 1 }, CKR_TEMPLATE_INCOMPLETE, true },
        { CKO_CERTIFICATE, { CKA_TRUSTED, &yes, 1 }, CKR_ATTRIBUTE_READ_ONLY, false },
        { CKO_CERTIFICATE, { CKA_CHECK_VALUE, "abc", 3 }, CKR_ATTRIBUTE_VALUE_INVALID, false },
        { CKO_CERTIFICATE, { CKA_MODULUS, "abc", 3 }, CKR_ATTRIBUTE_TYPE_INVALID, false },
        { CKO_CERTIFICATE, { CKA_APPLICATION, "abc", 3 }, CKR_ATTRIBUTE_TYPE_INVALID, false },
        { CKO_CERTIFICATE, { CKA_PRIVATE, "ab", 2 }, CKR_ATTRIBUTE_VALUE_INVALID, false },
        { CKO_DATA, { CKA_SUBJECT, "abc", 3 }, CKR_ATTRIBUTE_TYPE_INVALID, true },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases [0]; i++) {
        CK_ATTRIBUTE tmpl [] = {
            { CKA_CLASS, &cases [i].klass, sizeof cert }, { CKA_CERTIFICATE_TYPE, &x509, sizeof x509 },
            cases [i].extra, { CKA_VALUE, s_der, (CK_ULONG) s_der_len },
        };
        cs_attrs_t attrs = { 0 };
        CK_ULONG n = cases [i].no_value ? 3 : 4;
        if (cases [i].klass == CKO_DATA) {
            tmpl [1] = tmpl [2];
            n = 2;
        }
        ck_assert_msg (cs_dataobj_attrs_new (cases [i].klass, tmpl, n, &attrs) == cases [i].rv, "case %zu", i);
        cs_attrs_clear (&attrs);
    }
    struct { CK_CERTIFICATE_TYPE *type; void *value; CK_ULONG len; CK_RV rv; } values [] = {
        { &x509, garbage, sizeof garbage, CKR_ATTRIBUTE_VALUE_INVALID },
        { &x509, longer, (CK_ULONG) s_der_len + 1, CKR_ATTRIBUTE_VALUE_INVALID },   /* trailing byte */
        { &attr_cert, s_der, (CK_ULONG) s_der_len, CKR_ATTRIBUTE_VALUE_INVALID },
    };
    for (size_t i = 0; i < sizeof values / sizeof values [0]; i++) {
        CK_ATTRIBUTE tmpl [] = {
            { CKA_CLASS, &cert, sizeof cert }, { CKA_CERTIFICATE_TYPE, values [i].type, sizeof x509 },
            { CKA_VALUE, values [i].value, values [i].len },
        };
        cs_attrs_t attrs = { 0 };
        ck_assert_msg (cs_dataobj_attrs_new (cert, tmpl, 3, &attrs) == values [i].rv, "value %zu", i);
        cs_attrs_clear (&attrs);
    }
    //  A data object needs nothing but its class.
    CK_ATTRIBUTE plain [] = { { CKA_CLASS, &data, sizeof data }, { CKA_APPLICATION, "app", 3 } };
    cs_attrs_t attrs = { 0 };
    ck_assert_uint_eq (cs_dataobj_attrs_new (data, plain, 2, &attrs), CKR_OK);
    ck_assert (s_has (&attrs, CKA_VALUE, "", 0) && s_has (&attrs, CKA_OBJECT_ID, "", 0));
    cs_attrs_clear (&attrs);
    free (longer);
}
END_TEST

//  One wire attribute of bytes.
static Cs__Attribute *
s_wire (uint64_t type, const char *value)
{
    Cs__Attribute *attr = calloc (1, sizeof *attr);
    cs__attribute__init (attr);
    attr->type = type;
    attr->value_case = CS__ATTRIBUTE__VALUE_BYTES;
    attr->bytes.data = (uint8_t *) value;
    attr->bytes.len = strlen (value);
    return attr;
}

START_TEST (test_token_objects)
{
    Cs__ObjectInfo cert = CS__OBJECT_INFO__INIT, data = CS__OBJECT_INFO__INIT;
    Cs__Attribute *cert_attrs [] = { s_wire (CKA_LABEL, "c"), s_wire (CKA_VALUE, "der"), s_wire (CKA_MODULUS, "x") };
    Cs__Attribute *data_attrs [] = { s_wire (CKA_LABEL, "d"), s_wire (CKA_VALUE, "secret") };
    Cs__ObjectInfo *objects [] = { &cert, &data };
    Cs__ObjectList list = CS__OBJECT_LIST__INIT;
    cert.ref = "obj:1";
    cert.object_class = CKO_CERTIFICATE;
    cert.attributes = cert_attrs;
    cert.n_attributes = 3;
    data.ref = "obj:2";
    data.object_class = CKO_DATA;
    data.is_private = true;
    data.attributes = data_attrs;
    data.n_attributes = 2;
    list.objects = objects;
    list.n_objects = 2;
    ck_assert_uint_eq (cs_dataobj_load_inlock (&list), CKR_OK);
    CK_OBJECT_HANDLE found [4];
    ck_assert_uint_eq (cs_dataobj_find_inlock (NULL, 0, found), 1);       /* the private one is hidden */
    CK_OBJECT_HANDLE cert_handle = found [0];
    ck_assert (cs_dataobj_is_handle (cert_handle));
    CK_OBJECT_CLASS klass = 0;
    CK_BBOOL token = CK_FALSE;
    char value [8];
    CK_ATTRIBUTE get [] = {
        { CKA_CLASS, &klass, sizeof klass }, { CKA_TOKEN, &token, 1 }, { CKA_VALUE, value, sizeof value },
        { CKA_MODULUS, NULL, 0 },
    };
    ck_assert_uint_eq (cs_dataobj_get_attributes_inlock (cert_handle, get, 4), CKR_ATTRIBUTE_TYPE_INVALID);
    ck_assert_uint_eq (klass, CKO_CERTIFICATE);
    ck_assert (token);
    ck_assert_uint_eq (get [2].ulValueLen, 3);
    ck_assert (memcmp (value, "der", 3) == 0);
    ck_assert_uint_eq (get [3].ulValueLen, CK_UNAVAILABLE_INFORMATION);    /* skipped from the wire */
    ck_assert_uint_eq (cs_dataobj_get_attributes_inlock (cert_handle + 1, get, 1), CKR_OBJECT_HANDLE_INVALID);
    ck_assert_uint_eq (cs_token_login_store_inlock (CKU_USER, (const uint8_t *) "\x01ticket", 7), CKR_OK);
    ck_assert_uint_eq (cs_dataobj_find_inlock (NULL, 0, found), 2);
    CK_OBJECT_CLASS want = CKO_DATA;
    CK_ATTRIBUTE match [] = { { CKA_CLASS, &want, sizeof want }, { CKA_LABEL, "d", 1 } };
    ck_assert_uint_eq (cs_dataobj_find_inlock (match, 2, found), 1);
    ck_assert_uint_eq (found [0], cert_handle + 1);
    //  Loaded again: the same handles; an object gone is gone.
    list.n_objects = 1;
    ck_assert_uint_eq (cs_dataobj_load_inlock (&list), CKR_OK);
    ck_assert_uint_eq (cs_dataobj_find_inlock (NULL, 0, found), 1);
    ck_assert_uint_eq (found [0], cert_handle);
    for (size_t i = 0; i < 3; i++)
        free (cert_attrs [i]);
    for (size_t i = 0; i < 2; i++)
        free (data_attrs [i]);
}
END_TEST

int
main (void)
{
    Suite *suite = suite_create ("module_dataobj");
    TCase *tc = tcase_create ("dataobj");
    tcase_add_checked_fixture (tc, s_setup, s_teardown);
    tcase_add_test (tc, test_certificate_derived);
    tcase_add_test (tc, test_template_refusals);
    tcase_add_test (tc, test_token_objects);
    suite_add_tcase (suite, tc);
    SRunner *runner = srunner_create (suite);
    srunner_run_all (runner, CK_NORMAL);
    int failed = srunner_ntests_failed (runner);
    srunner_free (runner);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
