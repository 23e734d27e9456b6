/*  test_wire.c — the wire codec: round trips, and rejection of truncated,
 *  oversized and garbage frames (common/cs_wire.c).  */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <p11-kit/pkcs11.h>
#include "cs_wire.h"

/*  Builds a request with one sign job and one hello job; caller frees *buf_p.  */
static uint8_t *
s_encode_sample (size_t *size_p, size_t data_len)
{
    static uint8_t key_id [] = { 0x01 };
    static uint8_t data [CS_WIRE_MAX_DATA + 16];
    memset (data, 0xab, sizeof data);
    Cs__Mechanism mech = CS__MECHANISM__INIT;
    mech.type = CKM_RSA_PKCS_PSS;
    mech.hash = CKM_SHA256;
    mech.mgf = CKG_MGF1_SHA256;
    mech.salt_len = 32;
    Cs__SignJob sign = CS__SIGN_JOB__INIT;
    sign.key_id.data = key_id;
    sign.key_id.len = sizeof key_id;
    sign.mechanism = &mech;
    sign.data.data = data;
    sign.data.len = data_len;
    Cs__HelloJob hello = CS__HELLO_JOB__INIT;
    Cs__Job job0 = CS__JOB__INIT, job1 = CS__JOB__INIT;
    job0.kind_case = CS__JOB__KIND_SIGN;
    job0.sign = &sign;
    job1.kind_case = CS__JOB__KIND_HELLO;
    job1.hello = &hello;
    Cs__Job *jobs [] = { &job0, &job1 };
    Cs__Request req = CS__REQUEST__INIT;
    req.version_min = 1;
    req.version_max = 1;
    req.request_id = 42;
    req.deadline_ms = 1500;
    req.n_jobs = 2;
    req.jobs = jobs;
    return cs_wire_encode (&req.base, size_p);
}

START_TEST (test_request_round_trip)
{
    size_t size;
    uint8_t *buf = s_encode_sample (&size, 32);
    const char *why = "unset";
    Cs__Request *req = cs_wire_request_decode (buf, size, &why);
    ck_assert_ptr_nonnull (req);
    ck_assert_ptr_null (why);
    ck_assert_uint_eq (req->request_id, 42);
    ck_assert_uint_eq (req->deadline_ms, 1500);
    ck_assert_uint_eq (req->n_jobs, 2);
    ck_assert_int_eq (req->jobs [0]->kind_case, CS__JOB__KIND_SIGN);
    ck_assert_uint_eq (req->jobs [0]->sign->mechanism->type, CKM_RSA_PKCS_PSS);
    ck_assert_uint_eq (req->jobs [0]->sign->mechanism->salt_len, 32);
    ck_assert_uint_eq (req->jobs [0]->sign->data.len, 32);
    ck_assert_int_eq (req->jobs [1]->kind_case, CS__JOB__KIND_HELLO);
    cs__request__free_unpacked (req, NULL);
    free (buf);
}
END_TEST

START_TEST (test_request_truncated_rejected)
{
    size_t size;
    uint8_t *buf = s_encode_sample (&size, 32);
    size_t rejected = 0;
    for (size_t cut = 0; cut < size; cut++) {
        const char *why = NULL;
        Cs__Request *req = cs_wire_request_decode (buf, cut, &why);
        if (!req) {
            ck_assert_ptr_nonnull (why);
            rejected++;
        }
        else
            cs__request__free_unpacked (req, NULL);
    }
    /*  Protobuf accepts a prefix that ends on a field boundary, but a prefix
        that cuts the jobs field never decodes into a request with both jobs.  */
    ck_assert_uint_gt (rejected, size / 2);
    free (buf);
}
END_TEST

START_TEST (test_request_oversized_rejected)
{
    size_t size;
    uint8_t *buf = s_encode_sample (&size, CS_WIRE_MAX_DATA + 1);
    const char *why = NULL;
    ck_assert_ptr_null (cs_wire_request_decode (buf, size, &why));
    ck_assert_str_eq (why, "bad sign job (key id, mechanism or data size)");
    ck_assert_ptr_null (cs_wire_request_decode (buf, CS_WIRE_MAX_MESSAGE + 1, &why));
    ck_assert_str_eq (why, "request too large");
    free (buf);
}
END_TEST

START_TEST (test_request_garbage_rejected)
{
    uint8_t garbage [512];
    unsigned seed = 7;
    for (int round = 0; round < 2000; round++) {
        size_t len = 1 + rand_r (&seed) % sizeof garbage;
        for (size_t i = 0; i < len; i++)
            garbage [i] = (uint8_t) rand_r (&seed);
        const char *why = NULL;
        Cs__Request *req = cs_wire_request_decode (garbage, len, &why);
        /*  Whatever decodes must respect every limit.  */
        if (req) {
            ck_assert_uint_ge (req->n_jobs, 1);
            ck_assert_uint_le (req->n_jobs, CS_WIRE_MAX_JOBS);
            cs__request__free_unpacked (req, NULL);
        }
        else
            ck_assert_ptr_nonnull (why);
    }
    const char *why = NULL;
    ck_assert_ptr_null (cs_wire_request_decode (NULL, 0, &why));
    ck_assert_str_eq (why, "empty request");
}
END_TEST

START_TEST (test_request_without_jobs_rejected)
{
    Cs__Request req = CS__REQUEST__INIT;
    req.request_id = 1;
    size_t size;
    uint8_t *buf = cs_wire_encode (&req.base, &size);
    const char *why = NULL;
    ck_assert_ptr_null (cs_wire_request_decode (buf, size ? size : 1, &why));
    free (buf);
}
END_TEST

START_TEST (test_reply_round_trip)
{
    uint8_t sig [] = { 1, 2, 3, 4 };
    Cs__Result result = CS__RESULT__INIT;
    result.rv = CKR_OK;
    result.kind_case = CS__RESULT__KIND_DATA;
    result.data.data = sig;
    result.data.len = sizeof sig;
    Cs__Result *results [] = { &result };
    Cs__Reply reply = CS__REPLY__INIT;
    reply.version = CS_PROTOCOL_VERSION;
    reply.request_id = 9;
    reply.n_results = 1;
    reply.results = results;
    size_t size;
    uint8_t *buf = cs_wire_encode (&reply.base, &size);
    Cs__Reply *back = cs_wire_reply_decode (buf, size, NULL);
    ck_assert_ptr_nonnull (back);
    ck_assert_uint_eq (back->request_id, 9);
    ck_assert_uint_eq (back->n_results, 1);
    ck_assert_mem_eq (back->results [0]->data.data, sig, sizeof sig);
    cs__reply__free_unpacked (back, NULL);
    free (buf);
}
END_TEST

START_TEST (test_version_choose)
{
    ck_assert_uint_eq (cs_wire_version_choose (1, 1), 1);
    ck_assert_uint_eq (cs_wire_version_choose (1, 99), CS_PROTOCOL_VERSION);
    ck_assert_uint_eq (cs_wire_version_choose (CS_PROTOCOL_VERSION + 1, 99), 0);
    ck_assert_uint_eq (cs_wire_version_choose (0, 0), 0);
}
END_TEST

START_TEST (test_rv_names)
{
    ck_assert_str_eq (cs_rv_name (CKR_PIN_INCORRECT), "CKR_PIN_INCORRECT");
    ck_assert_str_eq (cs_rv_name (0x7777), "CKR_0x7777");
    ck_assert_str_eq (cs_rv_name (CKR_ACTION_PROHIBITED), "CKR_ACTION_PROHIBITED");
    ck_assert_str_eq (cs_rv_name (CKR_USER_PIN_NOT_INITIALIZED), "CKR_USER_PIN_NOT_INITIALIZED");
}
END_TEST

int
main (void)
{
    Suite *suite = suite_create ("wire");
    TCase *tc = tcase_create ("codec");
    tcase_add_test (tc, test_request_round_trip);
    tcase_add_test (tc, test_request_truncated_rejected);
    tcase_add_test (tc, test_request_oversized_rejected);
    tcase_add_test (tc, test_request_garbage_rejected);
    tcase_add_test (tc, test_request_without_jobs_rejected);
    tcase_add_test (tc, test_reply_round_trip);
    tcase_add_test (tc, test_version_choose);
    tcase_add_test (tc, test_rv_names);
    suite_add_tcase (suite, tc);
    SRunner *runner = srunner_create (suite);
    srunner_run_all (runner, CK_NORMAL);
    int failed = srunner_ntests_failed (runner);
    srunner_free (runner);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
