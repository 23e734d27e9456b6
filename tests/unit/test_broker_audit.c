/*  test_broker_audit.c — the broker's side of the audit log
 *  (broker/ops/audit.h, cryptoserver-audit(5)): key use counted per
 *  (tenant, key, mechanism, client) becomes one record each per interval,
 *  in the order of those names, with its count, failures and last failure;
 *  an every-use tenant gets a record per use; the counters outlive the take
 *  that reported them and go after an idle interval; a key is named by its
 *  id as text, as hex, or "(session key)"; the batch appends to a keystore
 *  chain.
 */
#include "test_broker_helpers.h"
#include "audit.h"
#include "keystore_audit.h"
#include "test_run.h"

static char *s_dir;
static broker_config_t s_config;
static keystore_t *s_ks;

static void
s_setup (void)
{
    s_dir = th_tmpdir ();
    th_keystore (s_dir);
    th_write (s_dir, "audit.key", "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60\n");
    th_write (s_dir, "broker.conf",
              "audit\n    key = audit.key\n    broker-id = test\n    syslog-facility = none\n"
              "tenants\n    demo\n        audit = aggregate\n    loud\n        audit = every-use\n");
    static char file [4096];
    snprintf (file, sizeof file, "%s/broker.conf", s_dir);
    s_config = (broker_config_t) { .file = file, .dir = s_dir };
    s_ks = th_keystore_open (s_dir);
}

static void
s_teardown (void)
{
    keystore_destroy (&s_ks);
    th_tmpdir_remove (&s_dir);
}

static broker_audit_t *
s_audit (void)
{
    bool off = true;
    broker_audit_t *audit = broker_audit_new (&s_config, NULL, &off);
    ck_assert_ptr_nonnull (audit);
    ck_assert (!off);
    return audit;
}

//  Notes one sign job of client (key "K-client") with key id (len bytes) and mech, result rv.
static void
s_sign_id (broker_audit_t *audit, const char *client, const char *tenant, const uint8_t *id, size_t len,
           unsigned long mech, CK_RV rv)
{
    Cs__Mechanism m = CS__MECHANISM__INIT;
    Cs__SignJob sign = CS__SIGN_JOB__INIT;
    Cs__Job job = CS__JOB__INIT;
    Cs__Result result = CS__RESULT__INIT;
    char client_key [64];
    snprintf (client_key, sizeof client_key, "K-%s", client);
    m.type = mech;
    sign.mechanism = &m;
    sign.key_id = (ProtobufCBinaryData) { len, (uint8_t *) id };
    job.kind_case = CS__JOB__KIND_SIGN;
    job.sign = &sign;
    result.rv = rv;
    broker_audit_job (audit, client, client_key, tenant, &job, &result);
}

static void
s_sign (broker_audit_t *audit, const char *client, const char *tenant, const char *key,
        unsigned long mech, CK_RV rv)
{
    s_sign_id (audit, client, tenant, (const uint8_t *) key, strlen (key), mech, rv);
}

//  Record i of batch from its "broker" member on (the time varies).
static const char *
s_record (const broker_audit_batch_t *batch, size_t i)
{
    const char *record = broker_audit_batch_record (batch, i);
    ck_assert_msg (record, "no record %zu", i);
    const char *rest = strstr (record, ",\"broker\":");
    ck_assert_ptr_nonnull (rest);
    return rest + 1;
}

//  Appends the batch to the keystore's chain and hands it back.
static void
s_store (broker_audit_t *audit, broker_audit_batch_t *batch)
{
    broker_audit_run (batch, s_ks);
    broker_audit_done (audit, batch);
}

#define S_USE(client, key, mech, count, failures, result) \
    "\"broker\":\"test\",\"client\":\"" client "\",\"client_key\":\"K-" client "\",\"tenant\":\"demo\"," \
    "\"action\":\"use\",\"object\":\"" key "\",\"mechanism\":\"" mech "\",\"count\":\"" #count "\"," \
    "\"failures\":\"" #failures "\",\"result\":\"" result "\""

START_TEST (test_use_counted)
{
    broker_audit_t *audit = s_audit ();
    for (int i = 0; i < 3; i++)
        s_sign (audit, "alice", "demo", "p256", CKM_ECDSA, CKR_OK);
    s_sign (audit, "alice", "demo", "p256", CKM_ECDSA, CKR_KEY_HANDLE_INVALID);
    s_sign (audit, "alice", "demo", "p256", CKM_ECDSA, CKR_OK);
    s_sign (audit, "bob", "demo", "p256", CKM_ECDSA, CKR_OK);
    s_sign (audit, "alice", "demo", "p256", CKM_ECDSA_SHA256, CKR_OK);
    s_sign (audit, "alice", "demo", "a-key", CKM_ECDSA, CKR_DATA_LEN_RANGE);
    s_sign (audit, "alice", "demo", "a-key", CKM_ECDSA, CKR_FUNCTION_FAILED);
    ck_assert_int_eq (broker_audit_counters (audit), 4);
    broker_audit_batch_t *batch = broker_audit_take (audit, false);
    ck_assert_ptr_nonnull (batch);
    //  In the order of "tenant 1f key 1f mechanism 1f client 1f client_key".
    ck_assert_str_eq (s_record (batch, 0), S_USE ("alice", "a-key", "CKM_ECDSA", 2, 2, "CKR_FUNCTION_FAILED"));
    ck_assert_str_eq (s_record (batch, 1), S_USE ("alice", "p256", "CKM_ECDSA", 5, 1, "CKR_KEY_HANDLE_INVALID"));
    ck_assert_str_eq (s_record (batch, 2), S_USE ("bob", "p256", "CKM_ECDSA", 1, 0, "CKR_OK"));
    ck_assert_str_eq (s_record (batch, 3), S_USE ("alice", "p256", "CKM_ECDSA_SHA256", 1, 0, "CKR_OK"));
    ck_assert_ptr_null (broker_audit_batch_record (batch, 4));
    s_store (audit, batch);
    broker_audit_destroy (&audit);
}
END_TEST

START_TEST (test_counters_kept_then_freed)
{
    broker_audit_t *audit = s_audit ();
    s_sign (audit, "alice", "demo", "p256", CKM_ECDSA, CKR_KEY_HANDLE_INVALID);
    s_sign (audit, "bob", "demo", "p256", CKM_ECDSA, CKR_OK);
    s_store (audit, broker_audit_take (audit, false));
    //  The counters stay for the next interval's jobs (nothing allocated for them).
    ck_assert_int_eq (broker_audit_counters (audit), 2);
    s_sign (audit, "alice", "demo", "p256", CKM_ECDSA, CKR_OK);
    s_sign (audit, "alice", "demo", "p256", CKM_ECDSA, CKR_OK);
    ck_assert_int_eq (broker_audit_counters (audit), 2);
    broker_audit_batch_t *batch = broker_audit_take (audit, false);
    ck_assert_ptr_nonnull (batch);
    //  Counted from zero again, the last interval's failure forgotten; bob's idle counter gives no record.
    ck_assert_str_eq (s_record (batch, 0), S_USE ("alice", "p256", "CKM_ECDSA", 2, 0, "CKR_OK"));
    ck_assert_ptr_null (broker_audit_batch_record (batch, 1));
    s_store (audit, batch);
    ck_assert_int_eq (broker_audit_counters (audit), 1);     //  bob's, idle a whole interval, went
    //  An interval without use: no record, and the last counter goes.
    batch = broker_audit_take (audit, true);
    ck_assert_ptr_nonnull (batch);                            //  final: the checkpoint
    ck_assert_ptr_null (broker_audit_batch_record (batch, 0));
    s_store (audit, batch);
    ck_assert_int_eq (broker_audit_counters (audit), 0);
    broker_audit_destroy (&audit);
}
END_TEST

START_TEST (test_key_names)
{
    broker_audit_t *audit = s_audit ();
    const uint8_t binary [] = { 0x01, 0xab, 0x7f, 0x00, 0xff };
    uint8_t long_id [200];
    memset (long_id, 'k', sizeof long_id);
    s_sign_id (audit, "alice", "demo", binary, sizeof binary, CKM_ECDSA, CKR_OK);
    s_sign_id (audit, "alice", "demo", NULL, 0, CKM_ECDSA, CKR_OK);
    s_sign_id (audit, "alice", "demo", long_id, sizeof long_id, CKM_ECDSA, CKR_OK);
    broker_audit_batch_t *batch = broker_audit_take (audit, false);
    ck_assert_ptr_nonnull (batch);
    ck_assert_str_eq (s_record (batch, 0), S_USE ("alice", "(session key)", "CKM_ECDSA", 1, 0, "CKR_OK"));
    ck_assert_str_eq (s_record (batch, 1), S_USE ("alice", "01ab7f00ff", "CKM_ECDSA", 1, 0, "CKR_OK"));
    char object [200] = "\"object\":\"";            //  S_OBJECT_MAX - 1 bytes of it kept
    memset (object + strlen (object), 'k', 159);
    strcat (object, "\",");
    ck_assert_ptr_nonnull (strstr (s_record (batch, 2), object));
    s_store (audit, batch);
    broker_audit_destroy (&audit);
}
END_TEST

START_TEST (test_every_use)
{
    broker_audit_t *audit = s_audit ();
    s_sign (audit, "carol", "loud", "p256", CKM_ECDSA, CKR_OK);
    s_sign (audit, "carol", "loud", "p256", CKM_ECDSA, CKR_SIGNATURE_INVALID);
    ck_assert_int_eq (broker_audit_counters (audit), 0);
    broker_audit_batch_t *batch = broker_audit_take (audit, false);
    ck_assert_ptr_nonnull (batch);
    const char *first = "\"broker\":\"test\",\"client\":\"carol\",\"client_key\":\"K-carol\",\"tenant\":\"loud\","
                        "\"action\":\"use\",\"object\":\"p256\",\"mechanism\":\"CKM_ECDSA\",\"result\":\"CKR_OK\"";
    ck_assert_str_eq (s_record (batch, 0), first);
    ck_assert_ptr_nonnull (strstr (s_record (batch, 1), "\"result\":\"CKR_SIGNATURE_INVALID\""));
    ck_assert_ptr_null (broker_audit_batch_record (batch, 2));
    s_store (audit, batch);
    broker_audit_destroy (&audit);
}
END_TEST

START_TEST (test_stored_in_chain)
{
    broker_audit_t *audit = s_audit ();
    s_sign (audit, "alice", "demo", "p256", CKM_ECDSA, CKR_OK);
    s_sign (audit, "alice", "demo", "p256", CKM_ECDSA, CKR_OK);
    s_store (audit, broker_audit_take (audit, true));
    broker_audit_destroy (&audit);
    char path [4096], why [600] = "";
    snprintf (path, sizeof path, "%s/audit.key", s_dir);
    EVP_PKEY *key = keystore_audit_key_read (path, why, sizeof why);
    ck_assert_msg (key, "%s", why);
    snprintf (path, sizeof path, "%s/keystore.db", s_dir);
    keystore_audit_row_t *rows = NULL;
    size_t count = 0;
    ck_assert_int_eq (keystore_audit_read (path, &rows, &count), 0);
    ck_assert_int_eq (count, 2);                                    //  the use, its checkpoint
    ck_assert_int_eq (keystore_audit_verify (rows, count, key, why, sizeof why, NULL), 0);
    ck_assert_ptr_nonnull (strstr (rows [0].record, S_USE ("alice", "p256", "CKM_ECDSA", 2, 0, "CKR_OK") "}"));
    ck_assert_ptr_nonnull (rows [1].sig);
    keystore_audit_rows_free (rows, count);
    EVP_PKEY_free (key);
}
END_TEST

int
main (void)
{
    Suite *suite = suite_create ("broker_audit");
    TCase *tc = tr_tcase ("audit", s_setup, s_teardown);
    tcase_add_test (tc, test_use_counted);
    tcase_add_test (tc, test_counters_kept_then_freed);
    tcase_add_test (tc, test_key_names);
    tcase_add_test (tc, test_every_use);
    tcase_add_test (tc, test_stored_in_chain);
    suite_add_tcase (suite, tc);
    return tr_run (suite);
}
