/*  test_module_async.c — the bookkeeping of PKCS#11 3.2 asynchronous
 *  sessions (issue #23): a session's table of calls (pkcs11-module/async.h:
 *  one slot per function name, a second call of a name refused, a claimed
 *  job given back only to the call that still holds the slot, so a
 *  C_CloseSession while a C_AsyncComplete drives the link leaves the job
 *  to the claimer), the function names, the join directory; and the link's
 *  calls that do not wait (link.h cs_link_submit, cs_link_complete): one
 *  thread keeps many requests outstanding against a fake broker that
 *  answers them in the reverse order, and each gets its own reply; an
 *  abandoned call's late reply is dropped and the link goes on; a thread
 *  blocks on a call it submitted (cs_link_wait).  No sleeps: completions
 *  are polled with a deadline.  */
#include <check.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>
#include <zmq.h>
#include "cs_p11_3.h"
#include "link.h"
#include "async.h"
#include "test_run.h"

START_TEST (test_async_names)
{
    ck_assert_int_eq (cs_async_fn ("C_Sign"), CS_ASYNC_SIGN);
    ck_assert_int_eq (cs_async_fn ("C_Decrypt"), CS_ASYNC_DECRYPT);
    ck_assert_int_eq (cs_async_fn ("C_GenerateKeyPair"), CS_ASYNC_GENERATE_KEY_PAIR);
    ck_assert_int_eq (cs_async_fn ("C_EncapsulateKey"), CS_ASYNC_ENCAPSULATE);
    ck_assert_int_eq (cs_async_fn ("C_DecapsulateKey"), CS_ASYNC_DECAPSULATE);
    ck_assert_int_eq (cs_async_fn ("C_SignInit"), CS_ASYNC_FUNCTIONS);     /* never pending here */
    ck_assert_int_eq (cs_async_fn ("C_sign"), CS_ASYNC_FUNCTIONS);
    ck_assert_int_eq (cs_async_fn (""), CS_ASYNC_FUNCTIONS);
    ck_assert_int_eq (cs_async_fn (NULL), CS_ASYNC_FUNCTIONS);
}
END_TEST

START_TEST (test_async_slots)
{
    cs_async_table_t *table = calloc (1, sizeof *table);
    cs_async_pending_t *job = (cs_async_pending_t *) &table->serial, *got = NULL;     /* any address */
    unsigned serial = 0, later = 0;
    ck_assert_ptr_nonnull (table);
    ck_assert_uint_eq (cs_async_slot_claim (table, CS_ASYNC_SIGN, &got, &serial), CKR_OPERATION_NOT_INITIALIZED);
    ck_assert_uint_eq (cs_async_slot_reserve (table, CS_ASYNC_SIGN), CKR_OK);
    ck_assert_uint_eq (cs_async_slot_reserve (table, CS_ASYNC_SIGN), CKR_OPERATION_ACTIVE);
    ck_assert_uint_eq (cs_async_slot_reserve (table, CS_ASYNC_GENERATE_KEY_PAIR), CKR_OK);  /* another name */
    /*  Reserved, its job not sent yet: pending.  */
    ck_assert_uint_eq (cs_async_slot_claim (table, CS_ASYNC_SIGN, &got, &serial), CKR_PENDING);
    table->slots [CS_ASYNC_SIGN].pending = job;
    ck_assert_uint_eq (cs_async_slot_claim (table, CS_ASYNC_SIGN, &got, &serial), CKR_OK);
    ck_assert_ptr_eq (got, job);
    ck_assert_ptr_null (table->slots [CS_ASYNC_SIGN].pending);
    /*  A second claimer while the first drives the link: pending.  */
    ck_assert_uint_eq (cs_async_slot_claim (table, CS_ASYNC_SIGN, &got, &later), CKR_PENDING);
    ck_assert_uint_eq (cs_async_slot_reserve (table, CS_ASYNC_SIGN), CKR_OPERATION_ACTIVE);
    ck_assert (!cs_async_slot_unclaim (table, CS_ASYNC_SIGN, serial + 1, job));       /* not its call */
    ck_assert (cs_async_slot_unclaim (table, CS_ASYNC_SIGN, serial, job));
    ck_assert_ptr_eq (table->slots [CS_ASYNC_SIGN].pending, job);
    /*  Claimed again, then the slot ends (its session closed) and a new
     *  call takes it: the first claimer's job is not given back to it.  */
    ck_assert_uint_eq (cs_async_slot_claim (table, CS_ASYNC_SIGN, &got, &serial), CKR_OK);
    cs_async_slot_end (table, CS_ASYNC_SIGN);           /* it holds no job: the claimer has it */
    ck_assert_uint_eq (cs_async_slot_claim (table, CS_ASYNC_SIGN, &got, &later), CKR_OPERATION_NOT_INITIALIZED);
    ck_assert_uint_eq (cs_async_slot_reserve (table, CS_ASYNC_SIGN), CKR_OK);
    ck_assert (!cs_async_slot_unclaim (table, CS_ASYNC_SIGN, serial, job));
    ck_assert_ptr_null (table->slots [CS_ASYNC_SIGN].pending);
    ck_assert_uint_ne (table->slots [CS_ASYNC_SIGN].serial, serial);
    cs_async_table_free (table);                        /* no job left in it */
    cs_async_table_free (NULL);
}
END_TEST

START_TEST (test_async_dir)
{
    char dir [64], path [] = "/tmp/cs-test-async-XXXXXX", sub [128], tiny [4];
    struct stat st;
    ck_assert_ptr_nonnull (mkdtemp (path));
    snprintf (sub, sizeof sub, "%s/joins", path);
    setenv ("CRYPTOSERVER_ASYNC_DIR", sub, 1);
    ck_assert (cs_async_dir (dir, sizeof dir));
    ck_assert_str_eq (dir, sub);
    ck_assert_int_eq (stat (sub, &st), 0);
    ck_assert_uint_eq (st.st_mode & 0777, 0700);
    ck_assert (!cs_async_dir (tiny, sizeof tiny));      /* does not fit */
    unsetenv ("CRYPTOSERVER_ASYNC_DIR");
    setenv ("XDG_RUNTIME_DIR", path, 1);
    ck_assert (cs_async_dir (dir, sizeof dir));
    snprintf (sub, sizeof sub, "%s/cryptoserver-async", path);
    ck_assert_str_eq (dir, sub);
    rmdir (sub);
    snprintf (sub, sizeof sub, "%s/joins", path);
    rmdir (sub);
    rmdir (path);
}
END_TEST

/*  ---- calls that do not wait, against a fake broker -------------------- */

#define S_CALLS 64

/*  Reads `hold` requests, then answers them in the reverse order, each
 *  with its own sign job's data; then answers whatever comes at once until
 *  `stop`.  */
typedef struct {
    void *router;
    int hold;
    int answered;           /* atomic */
    bool stop;              /* atomic */
} s_fake_t;

static void
s_answer (s_fake_t *fake, zmq_msg_t *identity, Cs__Request *req)
{
    Cs__Result result = CS__RESULT__INIT, *results [] = { &result };
    Cs__Reply reply = CS__REPLY__INIT;
    size_t size = 0;
    reply.version = CS_PROTOCOL_VERSION;
    reply.request_id = req->request_id;
    result.kind_case = CS__RESULT__KIND_DATA;
    result.data = req->jobs [0]->sign->data;
    reply.n_results = 1;
    reply.results = results;
    uint8_t *data = cs_wire_encode (&reply.base, &size);
    zmq_msg_send (identity, fake->router, ZMQ_SNDMORE);
    zmq_send (fake->router, data, size, 0);
    free (data);
    __atomic_add_fetch (&fake->answered, 1, __ATOMIC_SEQ_CST);
}

/*  One request, or NULL after 20 ms without one.  */
static Cs__Request *
s_receive (s_fake_t *fake, zmq_msg_t *identity)
{
    zmq_pollitem_t item = { fake->router, 0, ZMQ_POLLIN, 0 };
    zmq_msg_t body;
    Cs__Request *req;
    if (zmq_poll (&item, 1, 20) <= 0)
        return NULL;
    zmq_msg_init (identity);
    zmq_msg_init (&body);
    zmq_msg_recv (identity, fake->router, 0);
    zmq_msg_recv (&body, fake->router, 0);
    req = cs_wire_request_decode (zmq_msg_data (&body), zmq_msg_size (&body), NULL);
    zmq_msg_close (&body);
    return req;
}

static void *
s_fake_run (void *arg)
{
    s_fake_t *fake = arg;
    zmq_msg_t ids [S_CALLS];
    Cs__Request *reqs [S_CALLS];
    int n = 0;
    while (n < fake->hold && !__atomic_load_n (&fake->stop, __ATOMIC_SEQ_CST))
        if ((reqs [n] = s_receive (fake, &ids [n])))
            n++;
    while (n-- > 0) {
        s_answer (fake, &ids [n], reqs [n]);
        cs__request__free_unpacked (reqs [n], NULL);
    }
    while (!__atomic_load_n (&fake->stop, __ATOMIC_SEQ_CST)) {
        zmq_msg_t id;
        Cs__Request *req = s_receive (fake, &id);
        if (req) {
            s_answer (fake, &id, req);
            cs__request__free_unpacked (req, NULL);
        }
    }
    return NULL;
}

/*  A sign job whose data is `data` (8 bytes).  */
static void
s_request (Cs__Request *req, Cs__Job *job, Cs__Job **jobs, Cs__SignJob *sign, uint8_t *data)
{
    static Cs__Mechanism mech = CS__MECHANISM__INIT;
    mech.type = CKM_ECDSA;
    *sign = (Cs__SignJob) CS__SIGN_JOB__INIT;
    sign->mechanism = &mech;
    sign->key_id = (ProtobufCBinaryData) { 2, (uint8_t *) "k1" };
    sign->data = (ProtobufCBinaryData) { 8, data };
    *job = (Cs__Job) CS__JOB__INIT;
    job->kind_case = CS__JOB__KIND_SIGN;
    job->sign = sign;
    jobs [0] = job;
    *req = (Cs__Request) CS__REQUEST__INIT;
    req->n_jobs = 1;
    req->jobs = jobs;
}

static int64_t
s_now_ms (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/*  Binds fake's ROUTER on 127.0.0.1, starts its thread (*thread) and
 *  returns a link to it without CURVE (20 s timeout).  */
static cs_link_t *
s_fake_link (s_fake_t *fake, pthread_t *thread)
{
    char endpoint [256], *endpoints [] = { endpoint };
    size_t len = sizeof endpoint;
    ck_assert_int_eq (zmq_bind (fake->router, "tcp://127.0.0.1:*"), 0);
    ck_assert_int_eq (zmq_getsockopt (fake->router, ZMQ_LAST_ENDPOINT, endpoint, &len), 0);
    ck_assert_int_eq (pthread_create (thread, NULL, s_fake_run, fake), 0);
    cs_client_config_t config = { .endpoints = endpoints, .n_endpoints = 1, .curve = false, .timeout_ms = 20000 };
    CK_RV rv = CKR_OK;
    cs_link_t *link = cs_link_new (&config, &rv);
    ck_assert_ptr_nonnull (link);
    return link;
}

START_TEST (test_link_many_outstanding)
{
    void *ctx = zmq_ctx_new ();
    s_fake_t fake = { zmq_socket (ctx, ZMQ_ROUTER), S_CALLS, 0, false };
    pthread_t thread;
    cs_link_t *link = s_fake_link (&fake, &thread);
    CK_RV rv = CKR_OK;
    cs_link_call_t *calls [S_CALLS];
    uint8_t data [S_CALLS][8];
    /*  One thread, S_CALLS requests out: the fake answers none until it has
     *  them all, so all are outstanding at once.  */
    for (int i = 0; i < S_CALLS; i++) {
        Cs__Request req;
        Cs__Job job, *jobs [1];
        Cs__SignJob sign;
        snprintf ((char *) data [i], sizeof data [i], "call%03d", i);
        s_request (&req, &job, jobs, &sign, data [i]);
        ck_assert_uint_eq (cs_link_submit (link, &req, 20000, &calls [i]), CKR_OK);    /* req dies here */
    }
    int left = S_CALLS;
    int64_t until = s_now_ms () + 20000;
    while (left > 0 && s_now_ms () < until) {
        for (int i = 0; i < S_CALLS; i++) {
            Cs__Reply *reply = NULL;
            if (!calls [i] || (rv = cs_link_complete (&calls [i], &reply)) == CKR_PENDING)
                continue;
            ck_assert_uint_eq (rv, CKR_OK);
            ck_assert_ptr_null (calls [i]);
            ck_assert_uint_eq (reply->results [0]->data.len, 8);
            ck_assert_mem_eq (reply->results [0]->data.data, data [i], 8);   /* its own reply */
            cs_wire_reply_free (&reply);
            left--;
        }
        sched_yield ();
    }
    ck_assert_int_eq (left, 0);
    ck_assert_int_eq (__atomic_load_n (&fake.answered, __ATOMIC_SEQ_CST), S_CALLS);
    /*  An abandoned call: its late reply is dropped, and a blocking call
     *  after it gets its own.  */
    Cs__Request req;
    Cs__Job job, *jobs [1];
    Cs__SignJob sign;
    Cs__Reply *reply = NULL;
    cs_link_call_t *gone = NULL;
    s_request (&req, &job, jobs, &sign, (uint8_t *) "abandon");
    ck_assert_uint_eq (cs_link_submit (link, &req, 20000, &gone), CKR_OK);
    cs_link_call_free (&gone);
    ck_assert_ptr_null (gone);
    cs_link_call_free (&gone);                          /* NULL-safe */
    s_request (&req, &job, jobs, &sign, (uint8_t *) "blocking");
    ck_assert_uint_eq (cs_link_call (link, &req, 20000, &reply), CKR_OK);
    ck_assert_mem_eq (reply->results [0]->data.data, "blocking", 8);
    cs_wire_reply_free (&reply);
    /*  A call still out when the link stops ends with
     *  CKR_CRYPTOKI_NOT_INITIALIZED, and new ones are refused.  */
    __atomic_store_n (&fake.stop, true, __ATOMIC_SEQ_CST);
    pthread_join (thread, NULL);
    s_request (&req, &job, jobs, &sign, (uint8_t *) "stopping");
    ck_assert_uint_eq (cs_link_submit (link, &req, 20000, &gone), CKR_OK);
    cs_link_stop (link);
    ck_assert_uint_eq (cs_link_complete (&gone, &reply), CKR_CRYPTOKI_NOT_INITIALIZED);
    ck_assert_ptr_null (gone);
    ck_assert_uint_eq (cs_link_submit (link, &req, 20000, &gone), CKR_CRYPTOKI_NOT_INITIALIZED);
    ck_assert_ptr_null (gone);
    cs_link_destroy (&link);
    zmq_close (fake.router);
    zmq_ctx_term (ctx);
}
END_TEST

/*  cs_link_wait (issue #25: a key list's next page asked for ahead): a
 *  thread blocks on a call it submitted, leading the link meanwhile, so
 *  the replies of the calls submitted with it are taken too; a done call
 *  returns at once; a call no broker answers ends at its deadline
 *  (counted from the submit) with CKR_DEVICE_ERROR, not later.  */
START_TEST (test_link_wait)
{
    enum { N = 3 };
    void *ctx = zmq_ctx_new ();
    s_fake_t fake = { zmq_socket (ctx, ZMQ_ROUTER), N, 0, false };
    pthread_t thread;
    cs_link_t *link = s_fake_link (&fake, &thread);
    cs_link_call_t *calls [N];
    uint8_t data [N][8];
    Cs__Request req;
    Cs__Job job, *jobs [1];
    Cs__SignJob sign;
    Cs__Reply *reply = NULL;
    for (int i = 0; i < N; i++) {
        snprintf ((char *) data [i], sizeof data [i], "wait%03d", i);
        s_request (&req, &job, jobs, &sign, data [i]);
        ck_assert_uint_eq (cs_link_submit (link, &req, 20000, &calls [i]), CKR_OK);
    }
    /*  The fake answers 2, 1, then 0: waiting on 0 takes all three.  */
    ck_assert_uint_eq (cs_link_wait (&calls [0], &reply), CKR_OK);
    ck_assert_ptr_null (calls [0]);
    ck_assert_mem_eq (reply->results [0]->data.data, data [0], 8);
    cs_wire_reply_free (&reply);
    for (int i = N - 1; i > 0; i--) {
        ck_assert_uint_eq (cs_link_complete (&calls [i], &reply), CKR_OK);   /* already done */
        ck_assert_mem_eq (reply->results [0]->data.data, data [i], 8);
        cs_wire_reply_free (&reply);
    }
    ck_assert_uint_eq (cs_link_wait (&calls [0], &reply), CKR_ARGUMENTS_BAD);  /* no call */
    /*  A call nobody answers (the fake stopped): its deadline ends the wait.  */
    __atomic_store_n (&fake.stop, true, __ATOMIC_SEQ_CST);
    pthread_join (thread, NULL);
    s_request (&req, &job, jobs, &sign, (uint8_t *) "unheard");
    ck_assert_uint_eq (cs_link_submit (link, &req, 300, &calls [0]), CKR_OK);
    int64_t started = s_now_ms ();
    ck_assert_uint_eq (cs_link_wait (&calls [0], &reply), CKR_DEVICE_ERROR);
    ck_assert_ptr_null (calls [0]);
    ck_assert_ptr_null (reply);
    ck_assert_int_lt (s_now_ms () - started, 5000);
    cs_link_destroy (&link);
    zmq_close (fake.router);
    zmq_ctx_term (ctx);
}
END_TEST

int
main (void)
{
    Suite *suite = suite_create ("module-async");
    TCase *tc = tcase_create ("async");
    tcase_add_test (tc, test_async_names);
    tcase_add_test (tc, test_async_slots);
    tcase_add_test (tc, test_async_dir);
    tcase_add_test (tc, test_link_many_outstanding);
    tcase_add_test (tc, test_link_wait);
    tcase_set_timeout (tc, 60);
    suite_add_tcase (suite, tc);
    return tr_run (suite);
}
