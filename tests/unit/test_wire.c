/*  test_wire.c — the wire codec: round trips, and rejection of truncated,
 *  oversized and garbage frames (common/cs_wire.c).  */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <p11-kit/pkcs11.h>
#include "cs_wire.h"
#include "cryptoserver/pkcs11v.h"
#include "test_run.h"

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
    unsigned long rv = CKR_OK;
    ck_assert_ptr_null (cs_wire_request_check (buf, size, &why, &rv));
    ck_assert_str_eq (why, "job data over CS_WIRE_MAX_DATA bytes");
    ck_assert_uint_eq (rv, CKR_DATA_LEN_RANGE);
    ck_assert_ptr_null (cs_wire_request_check (buf, CS_WIRE_MAX_MESSAGE + 1, &why, &rv));
    ck_assert_str_eq (why, "request over CS_WIRE_MAX_MESSAGE bytes");
    ck_assert_uint_eq (rv, CKR_DEVICE_MEMORY);
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

/*  Every limit of a request has its CK_RV (docs/CONTRACTS.md "Limits").  */
START_TEST (test_request_limit_rvs)
{
    static uint8_t big [CS_WIRE_MAX_KEY_DER + 1];
    uint8_t digest [32] = { 0 };
    Cs__Mechanism mech = CS__MECHANISM__INIT;
    Cs__SignJob sign = CS__SIGN_JOB__INIT;
    sign.mechanism = &mech;
    sign.data = (ProtobufCBinaryData) { sizeof digest, digest };
    sign.key_pkcs8 = (ProtobufCBinaryData) { sizeof big, big };
    Cs__LoginJob login = CS__LOGIN_JOB__INIT;
    login.pin = (ProtobufCBinaryData) { CS_WIRE_MAX_PIN + 1, big };
    Cs__Job job = CS__JOB__INIT, *jobs [CS_WIRE_MAX_JOBS + 1];
    job.kind_case = CS__JOB__KIND_SIGN;
    job.sign = &sign;
    for (size_t i = 0; i <= CS_WIRE_MAX_JOBS; i++)
        jobs [i] = &job;
    Cs__Request req = CS__REQUEST__INIT;
    req.version_min = req.version_max = CS_PROTOCOL_VERSION;
    req.n_jobs = 1;
    req.jobs = jobs;
    struct { const char *what; unsigned long rv; } cases [] = {
        { "key DER", CKR_KEY_SIZE_RANGE }, { "PIN", CKR_PIN_LEN_RANGE },
        { "jobs", CKR_DEVICE_MEMORY }, { "data", CKR_ENCRYPTED_DATA_LEN_RANGE },
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases [0]; c++) {
        if (c == 1) {
            job.kind_case = CS__JOB__KIND_LOGIN;
            job.login = &login;
        }
        if (c == 2) {
            job.kind_case = CS__JOB__KIND_HELLO;
            job.hello = NULL;
            req.n_jobs = CS_WIRE_MAX_JOBS + 1;
        }
        if (c == 3) {
            Cs__DecryptJob *decrypt = calloc (1, sizeof *decrypt);
            cs__decrypt_job__init (decrypt);
            decrypt->key_id = (ProtobufCBinaryData) { 1, digest };
            decrypt->mechanism = &mech;
            decrypt->data = (ProtobufCBinaryData) { CS_WIRE_MAX_DATA + 1, big };
            job.kind_case = CS__JOB__KIND_DECRYPT;
            job.decrypt = decrypt;
            req.n_jobs = 1;
        }
        size_t size = 0;
        uint8_t *buf = cs_wire_encode (&req.base, &size);
        const char *why = NULL;
        unsigned long rv = CKR_OK;
        ck_assert_ptr_null (cs_wire_request_check (buf, size, &why, &rv));
        ck_assert_msg (rv == cases [c].rv, "%s: rv 0x%lx, want 0x%lx (%s)", cases [c].what, rv,
                       cases [c].rv, why);
        free (buf);
    }
    free (job.decrypt);
}
END_TEST

/*  Checks a request of the given ModexpJobs; returns the request-level rv
 *  (CKR_OK when it decodes).  */
static unsigned long
s_modexp_check (Cs__ModexpJob **mjobs, size_t n)
{
    Cs__Job jobs [4], *ptrs [4];
    Cs__Request req = CS__REQUEST__INIT;
    ck_assert_uint_le (n, 4);
    for (size_t i = 0; i < n; i++) {
        cs__job__init (&jobs [i]);
        jobs [i].kind_case = CS__JOB__KIND_MODEXP;
        jobs [i].modexp = mjobs [i];
        ptrs [i] = &jobs [i];
    }
    req.version_min = req.version_max = CS_PROTOCOL_VERSION;
    req.n_jobs = n;
    req.jobs = ptrs;
    size_t size = 0;
    uint8_t *buf = cs_wire_encode (&req.base, &size);
    unsigned long rv = CKR_OK;
    Cs__Request *decoded = cs_wire_request_check (buf, size, NULL, &rv);
    if (decoded)
        cs__request__free_unpacked (decoded, NULL);
    free (buf);
    return decoded ? CKR_OK : rv;
}

/*  The request-level rv of a one-job request (CKR_OK when it decodes).  */
static unsigned long
s_job_check (Cs__Job *job)
{
    Cs__Job *jobs [1] = { job };
    Cs__Request req = CS__REQUEST__INIT;
    req.version_min = req.version_max = CS_PROTOCOL_VERSION;
    req.n_jobs = 1;
    req.jobs = jobs;
    size_t size = 0;
    uint8_t *buf = cs_wire_encode (&req.base, &size);
    unsigned long rv = CKR_OK;
    Cs__Request *decoded = cs_wire_request_check (buf, size, NULL, &rv);
    if (decoded)
        cs__request__free_unpacked (decoded, NULL);
    free (buf);
    return decoded ? CKR_OK : rv;
}

/*  The post-quantum jobs (issue #23): an ML-DSA context of at most 255
 *  bytes (FIPS 204 §5.2) on a sign or verify job, a verify job with a
 *  mechanism, a decapsulation with exactly one key, sizes.  */
START_TEST (test_pq_job_rules)
{
    static uint8_t big [CS_WIRE_MAX_KEY_DER + 1], ref [] = "ks:0123";
    Cs__Mechanism mech = CS__MECHANISM__INIT;
    Cs__SignJob sign = CS__SIGN_JOB__INIT;
    Cs__VerifyJob verify = CS__VERIFY_JOB__INIT;
    Cs__EncapsulateJob encap = CS__ENCAPSULATE_JOB__INIT;
    Cs__DecapsulateJob decap = CS__DECAPSULATE_JOB__INIT;
    Cs__Job job = CS__JOB__INIT;
    mech.type = CKM_ML_DSA;
    mech.context = (ProtobufCBinaryData) { 255, big };
    sign.key_id = (ProtobufCBinaryData) { sizeof ref - 1, ref };
    sign.mechanism = &mech;
    job.kind_case = CS__JOB__KIND_SIGN;
    job.sign = &sign;
    ck_assert_uint_eq (s_job_check (&job), CKR_OK);
    mech.context.len = 256;
    ck_assert_uint_eq (s_job_check (&job), CKR_MECHANISM_PARAM_INVALID);
    job.kind_case = CS__JOB__KIND_VERIFY;
    job.verify = &verify;
    ck_assert_uint_eq (s_job_check (&job), CKR_DEVICE_ERROR);             /* no mechanism */
    verify.mechanism = &mech;
    ck_assert_uint_eq (s_job_check (&job), CKR_MECHANISM_PARAM_INVALID);
    mech.context.len = 0;
    verify.signature = (ProtobufCBinaryData) { CS_WIRE_MAX_DATA + 1, big };
    ck_assert_uint_eq (s_job_check (&job), CKR_DATA_LEN_RANGE);
    verify.signature.len = 4627;
    verify.public_value = (ProtobufCBinaryData) { sizeof big, big };
    ck_assert_uint_eq (s_job_check (&job), CKR_KEY_SIZE_RANGE);
    verify.public_value.len = 2592;
    ck_assert_uint_eq (s_job_check (&job), CKR_OK);
    job.kind_case = CS__JOB__KIND_ENCAPSULATE;
    job.encapsulate = &encap;
    encap.public_value = (ProtobufCBinaryData) { sizeof big, big };
    ck_assert_uint_eq (s_job_check (&job), CKR_KEY_SIZE_RANGE);
    encap.public_value.len = 1184;
    ck_assert_uint_eq (s_job_check (&job), CKR_OK);
    job.kind_case = CS__JOB__KIND_DECAPSULATE;
    job.decapsulate = &decap;
    ck_assert_uint_eq (s_job_check (&job), CKR_DEVICE_ERROR);             /* no key */
    decap.key_id = (ProtobufCBinaryData) { sizeof ref - 1, ref };
    decap.ciphertext = (ProtobufCBinaryData) { CS_WIRE_MAX_DATA + 1, big };
    ck_assert_uint_eq (s_job_check (&job), CKR_ENCRYPTED_DATA_LEN_RANGE);
    decap.ciphertext.len = 1088;
    ck_assert_uint_eq (s_job_check (&job), CKR_OK);
}
END_TEST

/*  Token secret keys (issue #10): a SymJob carries exactly one of a key
 *  value and a key ref; an import exactly one key; sizes.  */
START_TEST (test_secret_key_job_rules)
{
    static uint8_t bytes [CS_WIRE_MAX_SYM_KEY + 1], data [16];
    Cs__SymJob sym = CS__SYM_JOB__INIT;
    Cs__Job job = CS__JOB__INIT;
    sym.mechanism = CKM_AES_ECB;
    sym.operation = 1;
    sym.data = (ProtobufCBinaryData) { sizeof data, data };
    job.kind_case = CS__JOB__KIND_SYM;
    job.sym = &sym;
    ck_assert_uint_eq (s_job_check (&job), CKR_DEVICE_ERROR);             /* neither */
    sym.key_id = (ProtobufCBinaryData) { 35, (uint8_t *) "ks:00112233445566778899aabbccddeeff" };
    ck_assert_uint_eq (s_job_check (&job), CKR_OK);
    sym.key_value = (ProtobufCBinaryData) { 16, bytes };
    ck_assert_uint_eq (s_job_check (&job), CKR_DEVICE_ERROR);             /* both */
    sym.key_id = (ProtobufCBinaryData) { 0, NULL };
    ck_assert_uint_eq (s_job_check (&job), CKR_OK);
    sym.key_value.len = CS_WIRE_MAX_SYM_KEY + 1;
    ck_assert_uint_eq (s_job_check (&job), CKR_KEY_SIZE_RANGE);
    sym.key_value = (ProtobufCBinaryData) { 0, NULL };
    sym.key_id = (ProtobufCBinaryData) { CS_WIRE_MAX_REF + 1, bytes };
    ck_assert_uint_eq (s_job_check (&job), CKR_KEY_HANDLE_INVALID);

    Cs__ImportKeyJob import = CS__IMPORT_KEY_JOB__INIT;
    job.kind_case = CS__JOB__KIND_IMPORT_KEY;
    job.import_key = &import;
    import.secret_value = (ProtobufCBinaryData) { 32, bytes };
    ck_assert_uint_eq (s_job_check (&job), CKR_OK);
    import.public_spki = (ProtobufCBinaryData) { 32, bytes };
    ck_assert_uint_eq (s_job_check (&job), CKR_DEVICE_ERROR);             /* two keys */
    import.public_spki = (ProtobufCBinaryData) { 0, NULL };
    import.secret_value.len = CS_WIRE_MAX_SYM_KEY + 1;
    ck_assert_uint_eq (s_job_check (&job), CKR_ATTRIBUTE_VALUE_INVALID);

    Cs__GenerateKeyJob gen = CS__GENERATE_KEY_JOB__INIT;
    job.kind_case = CS__JOB__KIND_GENERATE_KEY;
    job.generate_key = &gen;
    gen.mechanism = CKM_AES_KEY_GEN;
    gen.value_len = 32;
    ck_assert_uint_eq (s_job_check (&job), CKR_OK);
    gen.value_len = CS_WIRE_MAX_SYM_KEY + 1;
    ck_assert_uint_eq (s_job_check (&job), CKR_KEY_SIZE_RANGE);
}
END_TEST

/*  ModexpJob (issue #12): one form; a job without operands only after one
 *  with; sizes.  */
START_TEST (test_modexp_job_rules)
{
    static uint8_t big [CS_WIRE_MAX_DATA + 1];
    uint8_t two = 2, m [] = { 0x01, 0x01 };
    Cs__ModexpJob plain = CS__MODEXP_JOB__INIT, bare = CS__MODEXP_JOB__INIT, crt = CS__MODEXP_JOB__INIT;
    plain.base_value = bare.base_value = crt.base_value = (ProtobufCBinaryData) { 1, &two };
    plain.exponent = plain.modulus = (ProtobufCBinaryData) { 2, m };
    crt.prime1 = crt.prime2 = crt.exponent1 = crt.exponent2 = crt.coefficient = (ProtobufCBinaryData) { 2, m };
    Cs__ModexpJob *ok1 [] = { &plain, &bare, &bare }, *ok2 [] = { &crt, &bare }, *no [] = { &bare, &plain };
    ck_assert_uint_eq (s_modexp_check (ok1, 3), CKR_OK);
    ck_assert_uint_eq (s_modexp_check (ok2, 2), CKR_OK);
    ck_assert_uint_eq (s_modexp_check (no, 2), CKR_MECHANISM_PARAM_INVALID);   /* nothing before it */
    Cs__ModexpJob both = crt;
    both.modulus = plain.modulus;
    Cs__ModexpJob *bad [] = { &both };
    ck_assert_uint_eq (s_modexp_check (bad, 1), CKR_MECHANISM_PARAM_INVALID);
    Cs__ModexpJob half = crt;
    half.coefficient = (ProtobufCBinaryData) { 0, NULL };
    bad [0] = &half;
    ck_assert_uint_eq (s_modexp_check (bad, 1), CKR_MECHANISM_PARAM_INVALID);
    Cs__ModexpJob large = plain;
    large.modulus = (ProtobufCBinaryData) { CS_WIRE_MAX_MODEXP_BYTES + 1, big };
    bad [0] = &large;
    ck_assert_uint_eq (s_modexp_check (bad, 1), CKR_DATA_LEN_RANGE);
    large = plain;
    large.base_value = (ProtobufCBinaryData) { CS_WIRE_MAX_DATA + 1, big };
    ck_assert_uint_eq (s_modexp_check (bad, 1), CKR_DATA_LEN_RANGE);
    large.base_value = (ProtobufCBinaryData) { 0, NULL };
    ck_assert_uint_eq (s_modexp_check (bad, 1), CKR_DATA_LEN_RANGE);
}
END_TEST

/*  The secrets of a decoded reply are wiped in place.  */
START_TEST (test_reply_wipe)
{
    uint8_t plain [] = "plaintext", pkcs8 [] = "private key", ticket [] = "ticket";
    Cs__Result r0 = CS__RESULT__INIT, r1 = CS__RESULT__INIT, r2 = CS__RESULT__INIT;
    Cs__GenerateKeyPairResult gen = CS__GENERATE_KEY_PAIR_RESULT__INIT;
    Cs__LoginResult login = CS__LOGIN_RESULT__INIT;
    r0.kind_case = CS__RESULT__KIND_DATA;
    r0.data = (ProtobufCBinaryData) { sizeof plain, plain };
    gen.private_pkcs8 = (ProtobufCBinaryData) { sizeof pkcs8, pkcs8 };
    r1.kind_case = CS__RESULT__KIND_GENERATED;
    r1.generated = &gen;
    login.ticket = (ProtobufCBinaryData) { sizeof ticket, ticket };
    r2.kind_case = CS__RESULT__KIND_LOGIN;
    r2.login = &login;
    Cs__Result *results [] = { &r0, &r1, &r2 };
    Cs__Reply reply = CS__REPLY__INIT;
    reply.n_results = 3;
    reply.results = results;
    size_t size;
    uint8_t *buf = cs_wire_encode (&reply.base, &size);
    Cs__Reply *back = cs_wire_reply_decode (buf, size, NULL);
    ck_assert_ptr_nonnull (back);
    ck_assert_mem_eq (back->results [0]->data.data, plain, sizeof plain);
    cs_wire_reply_wipe (back);
    static const uint8_t zeros [32];
    ck_assert_mem_eq (back->results [0]->data.data, zeros, sizeof plain);
    ck_assert_mem_eq (back->results [1]->generated->private_pkcs8.data, zeros, sizeof pkcs8);
    ck_assert_mem_eq (back->results [2]->login->ticket.data, zeros, sizeof ticket);
    cs_wire_reply_free (&back);
    ck_assert_ptr_null (back);
    cs_wire_reply_free (&back);             /* NULL-safe */
    free (buf);
}
END_TEST

/*  cs_wire_frame_free wipes a frame before releasing it.  */
static size_t s_released;
static bool s_released_zero;

static void
s_release_check (void *data, size_t size)
{
    s_released_zero = true;
    for (size_t i = 0; i < size; i++)
        s_released_zero &= ((uint8_t *) data) [i] == 0;
    s_released += size;
    free (data);
}

START_TEST (test_frame_free_wipes)
{
    void (*saved) (void *, size_t) = cs_wire_frame_release;
    cs_wire_frame_release = s_release_check;
    uint8_t *frame = malloc (100);
    memset (frame, 0xa5, 100);
    cs_wire_frame_free (frame, (void *) (uintptr_t) 100);
    cs_wire_frame_release = saved;
    ck_assert_uint_eq (s_released, 100);
    ck_assert (s_released_zero);
}
END_TEST

/*  The pre-scan (cs_wire_request_scan) and the id peek
 *  (cs_wire_request_id): limits seen on the wire bytes, no decode.  */
START_TEST (test_request_scan)
{
    size_t size;
    uint8_t *buf = s_encode_sample (&size, 32);
    const char *why = "unset";
    unsigned long rv = 0;
    ck_assert (cs_wire_request_scan (buf, size, &why, &rv));
    ck_assert_ptr_null (why);
    ck_assert_uint_eq (rv, CKR_OK);
    ck_assert_uint_eq (cs_wire_request_id (buf, size), 42);
    //  Two frames one after the other (the module's coalescing): the
    //  last request_id wins, as in a decode.
    uint8_t *two = malloc (2 * size + 2);
    memcpy (two, buf, size);
    memcpy (two + size, buf, size);
    two [2 * size] = 3 << 3;                /* request_id = 7 */
    two [2 * size + 1] = 7;
    ck_assert (cs_wire_request_scan (two, 2 * size + 2, NULL, NULL));
    ck_assert_uint_eq (cs_wire_request_id (two, 2 * size + 2), 7);
    //  Cut short inside a job: not a message.
    ck_assert (!cs_wire_request_scan (buf, size - 1, &why, &rv));
    ck_assert_str_eq (why, "request is not a valid message");
    ck_assert_uint_eq (rv, CKR_DEVICE_ERROR);
    free (two);
    free (buf);
    //  A singular field 2,000 times: refused, nothing decoded.
    uint8_t many [4000];
    for (size_t i = 0; i < sizeof many; i += 2) {
        many [i] = 3 << 3;
        many [i + 1] = 1;
    }
    ck_assert (!cs_wire_request_scan (many, sizeof many, &why, &rv));
    ck_assert_str_eq (why, "field repeated too often");
    ck_assert_uint_eq (rv, CKR_DEVICE_ERROR);
    ck_assert_uint_eq (cs_wire_request_id (many, sizeof many), 1);
    //  300,000 unknown fields (field 99, varint 0): over CS_WIRE_MAX_DECODED
    //  as protobuf-c would keep them, refused with CKR_DEVICE_MEMORY.
    size_t n = 300000, len = 3 * n;
    uint8_t *unknown = malloc (len);
    for (size_t i = 0; i < len; i += 3) {
        unknown [i] = (99 << 3) & 0xff;
        unknown [i] |= 0x80;
        unknown [i + 1] = 99 >> 4;
        unknown [i + 2] = 0;
    }
    ck_assert (!cs_wire_request_scan (unknown, len, &why, &rv));
    ck_assert_str_eq (why, "request over CS_WIRE_MAX_DECODED bytes decoded");
    ck_assert_uint_eq (rv, CKR_DEVICE_MEMORY);
    ck_assert_ptr_null (cs_wire_request_check (unknown, len, &why, &rv));
    ck_assert_uint_eq (rv, CKR_DEVICE_MEMORY);
    free (unknown);
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
    tcase_add_test (tc, test_request_limit_rvs);
    tcase_add_test (tc, test_modexp_job_rules);
    tcase_add_test (tc, test_pq_job_rules);
    tcase_add_test (tc, test_secret_key_job_rules);
    tcase_add_test (tc, test_reply_wipe);
    tcase_add_test (tc, test_frame_free_wipes);
    tcase_add_test (tc, test_request_scan);
    tcase_add_test (tc, test_version_choose);
    tcase_add_test (tc, test_rv_names);
    suite_add_tcase (suite, tc);
    return tr_run (suite);
}
