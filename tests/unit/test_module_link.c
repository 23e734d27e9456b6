/*  test_module_link.c — what the module returns for a reply that fails at
 *  request level (pkcs11-module/link.h cs_link_reply_rv): the broker's
 *  limits reach the application as their own CK_RV (docs/CONTRACTS.md
 *  "Limits"), everything else as CKR_DEVICE_ERROR.  */
#include <check.h>
#include <stdlib.h>
#include "cs_p11.h"
#include "link.h"

START_TEST (test_reply_rv)
{
    Cs__Job job = CS__JOB__INIT, *jobs [] = { &job };
    Cs__Request req = CS__REQUEST__INIT;
    req.n_jobs = 1;
    req.jobs = jobs;
    Cs__Result result = CS__RESULT__INIT, *results [] = { &result };
    Cs__Reply reply = CS__REPLY__INIT;
    reply.version = CS_PROTOCOL_VERSION;
    reply.n_results = 1;
    reply.results = results;
    ck_assert_uint_eq (cs_link_reply_rv (&req, &reply), CKR_OK);
    reply.n_results = 0;                                /* a result missing */
    ck_assert_uint_eq (cs_link_reply_rv (&req, &reply), CKR_DEVICE_ERROR);
    static const CK_RV limits [] = {
        CKR_DEVICE_MEMORY, CKR_KEY_SIZE_RANGE, CKR_DATA_LEN_RANGE, CKR_ENCRYPTED_DATA_LEN_RANGE,
        CKR_TEMPLATE_INCONSISTENT, CKR_ATTRIBUTE_VALUE_INVALID, CKR_PIN_LEN_RANGE,
        CKR_MECHANISM_PARAM_INVALID, CKR_DOMAIN_PARAMS_INVALID, CKR_KEY_HANDLE_INVALID,
        CKR_OBJECT_HANDLE_INVALID,
    };
    for (size_t i = 0; i < sizeof limits / sizeof limits [0]; i++) {
        reply.rv = limits [i];
        reply.error = (char *) "a limit";
        ck_assert_uint_eq (cs_link_reply_rv (&req, &reply), limits [i]);
    }
    reply.rv = CKR_GENERAL_ERROR;               /* not a limit */
    ck_assert_uint_eq (cs_link_reply_rv (&req, &reply), CKR_DEVICE_ERROR);
    reply.rv = CKR_USER_NOT_LOGGED_IN;
    ck_assert_uint_eq (cs_link_reply_rv (&req, &reply), CKR_DEVICE_ERROR);
    reply.rv = CKR_DEVICE_MEMORY;               /* a broker of another protocol */
    reply.version = CS_PROTOCOL_VERSION + 1;
    ck_assert_uint_eq (cs_link_reply_rv (&req, &reply), CKR_DEVICE_ERROR);
}
END_TEST

int
main (void)
{
    Suite *suite = suite_create ("module-link");
    TCase *tc = tcase_create ("link");
    tcase_add_test (tc, test_reply_rv);
    suite_add_tcase (suite, tc);
    SRunner *runner = srunner_create (suite);
    srunner_run_all (runner, CK_NORMAL);
    int failed = srunner_ntests_failed (runner);
    srunner_free (runner);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
