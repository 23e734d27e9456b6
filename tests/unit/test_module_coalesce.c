/*  test_module_coalesce.c — the module coalesces (pkcs11-module/coalesce.h,
 *  link.c; the paper's ARRAY RPC, issue #8) against fake plaintext brokers
 *  in threads that answer each job of a request with its own reply
 *  (Reply.job_number, in reverse job order) whose data echoes the job's:
 *    - 16 application threads signing at once: requests carry several
 *      jobs (with Request.per_job_replies; a lone request never has it),
 *      every job reaches the broker once and every caller gets its own
 *      result;
 *    - a broker that drops the connection when a coalesced request arrives:
 *      each of its jobs is re-sent alone to the other broker and every call
 *      still succeeds with its own result (docs/CONTRACTS.md "Failover").  */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>
#include "cs_p11.h"
#include "coalesce.h"
#include "link.h"
#include "test_run.h"

#define S_THREADS 16
#define S_CALLS 40

typedef struct {
    void *router;
    bool drop_batch;            /* close the socket when a coalesced request arrives */
    int delay_ms;               /* before answering a request */
    int requests, jobs, batches, flagged_singles;   /* atomic */
    bool dropped;               /* atomic */
    bool stop;                  /* atomic */
    char endpoint [256];
    pthread_t thread;
} s_broker_t;

static void
s_send_reply (void *router, zmq_msg_t *identity, const Cs__Reply *reply)
{
    size_t size = 0;
    uint8_t *data = cs_wire_encode (&reply->base, &size);
    zmq_msg_t copy;
    zmq_msg_init (&copy);
    zmq_msg_copy (&copy, identity);
    zmq_msg_send (&copy, router, ZMQ_SNDMORE);
    zmq_send (router, data, size, 0);
    free (data);
}

/*  Answers one request: per job (reverse order) when it asks so, else once.  */
static void
s_answer (s_broker_t *b, zmq_msg_t *identity, const Cs__Request *req)
{
    Cs__Result results [CS_COALESCE_MAX_JOBS + 1], *pointers [CS_COALESCE_MAX_JOBS + 1];
    size_t n = req->n_jobs <= CS_COALESCE_MAX_JOBS ? req->n_jobs : 0;
    for (size_t i = 0; i < n; i++) {
        cs__result__init (&results [i]);
        results [i].kind_case = CS__RESULT__KIND_DATA;
        results [i].data = req->jobs [i]->kind_case == CS__JOB__KIND_SIGN ? req->jobs [i]->sign->data
                                                                           : (ProtobufCBinaryData) { 0, NULL };
        pointers [i] = &results [i];
    }
    Cs__Reply reply = CS__REPLY__INIT;
    reply.version = CS_PROTOCOL_VERSION;
    reply.request_id = req->request_id;
    if (!req->per_job_replies) {
        reply.n_results = n;
        reply.results = pointers;
        s_send_reply (b->router, identity, &reply);
        return;
    }
    for (size_t i = n; i-- > 0; ) {
        reply.job_number = (uint32_t) i + 1;
        reply.n_results = 1;
        reply.results = &pointers [i];
        s_send_reply (b->router, identity, &reply);
    }
}

static void *
s_broker_run (void *arg)
{
    s_broker_t *b = arg;
    while (!__atomic_load_n (&b->stop, __ATOMIC_SEQ_CST)) {
        zmq_pollitem_t item = { b->router, 0, ZMQ_POLLIN, 0 };
        if (zmq_poll (&item, 1, 20) <= 0)
            continue;
        zmq_msg_t identity, body;
        zmq_msg_init (&identity);
        zmq_msg_init (&body);
        zmq_msg_recv (&identity, b->router, 0);
        zmq_msg_recv (&body, b->router, 0);
        Cs__Request *req = cs_wire_request_decode (zmq_msg_data (&body), zmq_msg_size (&body), NULL);
        zmq_msg_close (&body);
        ck_assert_ptr_nonnull (req);
        __atomic_add_fetch (&b->requests, 1, __ATOMIC_SEQ_CST);
        __atomic_add_fetch (&b->jobs, (int) req->n_jobs, __ATOMIC_SEQ_CST);
        if (req->n_jobs > 1)
            __atomic_add_fetch (&b->batches, 1, __ATOMIC_SEQ_CST);
        else
        if (req->per_job_replies)
            __atomic_add_fetch (&b->flagged_singles, 1, __ATOMIC_SEQ_CST);
        if (b->drop_batch && req->n_jobs > 1) {
            __atomic_store_n (&b->dropped, true, __ATOMIC_SEQ_CST);
            zmq_msg_close (&identity);
            cs__request__free_unpacked (req, NULL);
            zmq_close (b->router);
            b->router = NULL;
            break;
        }
        if (b->delay_ms)
            usleep ((useconds_t) b->delay_ms * 1000);
        s_answer (b, &identity, req);
        zmq_msg_close (&identity);
        cs__request__free_unpacked (req, NULL);
    }
    return NULL;
}

static void
s_broker_start (void *ctx, s_broker_t *b, bool drop_batch, int delay_ms)
{
    int zero = 0;
    size_t len = sizeof b->endpoint;
    memset (b, 0, sizeof *b);
    b->drop_batch = drop_batch;
    b->delay_ms = delay_ms;
    b->router = zmq_socket (ctx, ZMQ_ROUTER);
    zmq_setsockopt (b->router, ZMQ_LINGER, &zero, sizeof zero);
    ck_assert_int_eq (zmq_bind (b->router, "tcp://127.0.0.1:*"), 0);
    ck_assert_int_eq (zmq_getsockopt (b->router, ZMQ_LAST_ENDPOINT, b->endpoint, &len), 0);
    ck_assert_int_eq (pthread_create (&b->thread, NULL, s_broker_run, b), 0);
}

static void
s_broker_stop (s_broker_t *b)
{
    __atomic_store_n (&b->stop, true, __ATOMIC_SEQ_CST);
    pthread_join (b->thread, NULL);
    if (b->router)
        zmq_close (b->router);
}

/*  One application thread: S_CALLS sign calls, each with data naming the
 *  thread and call; each reply must carry exactly that data.  */
typedef struct {
    cs_link_t *link;
    int index;
    int wrong;                  /* calls that failed or got another's result */
} s_caller_t;

static void *
s_caller_run (void *arg)
{
    s_caller_t *caller = arg;
    for (int c = 0; c < S_CALLS; c++) {
        char data [32];
        int len = snprintf (data, sizeof data, "thread %d call %d", caller->index, c);
        Cs__Mechanism mech = CS__MECHANISM__INIT;
        Cs__SignJob sign = CS__SIGN_JOB__INIT;
        Cs__Job job = CS__JOB__INIT, *jobs [] = { &job };
        Cs__Request req = CS__REQUEST__INIT;
        mech.type = CKM_ECDSA;
        sign.key_id = (ProtobufCBinaryData) { 2, (uint8_t *) "k1" };
        sign.mechanism = &mech;
        sign.data = (ProtobufCBinaryData) { (size_t) len, (uint8_t *) data };
        job.kind_case = CS__JOB__KIND_SIGN;
        job.sign = &sign;
        req.ticket = (ProtobufCBinaryData) { 6, (uint8_t *) "ticket" };
        req.n_jobs = 1;
        req.jobs = jobs;
        Cs__Reply *reply = NULL;
        CK_RV rv = cs_link_call (caller->link, &req, 10000, &reply);
        if (rv != CKR_OK || reply->n_results != 1 || reply->results [0]->data.len != (size_t) len
        ||  memcmp (reply->results [0]->data.data, data, (size_t) len) != 0)
            caller->wrong++;
        cs_wire_reply_free (&reply);
    }
    return NULL;
}

/*  S_THREADS callers at once through one link to the endpoints; returns
 *  the calls that failed or got another's result.  */
static int
s_callers_run (char **endpoints, size_t n_endpoints)
{
    cs_client_config_t config = { .endpoints = endpoints, .n_endpoints = n_endpoints, .curve = false,
                                  .timeout_ms = 10000, .heartbeat_ivl_ms = 200,
                                  .heartbeat_timeout_ms = 600, .attempt_timeout_ms = 2000 };
    CK_RV rv = CKR_OK;
    cs_link_t *link = cs_link_new (&config, &rv);
    ck_assert_ptr_nonnull (link);
    s_caller_t callers [S_THREADS];
    pthread_t threads [S_THREADS];
    int wrong = 0;
    for (int t = 0; t < S_THREADS; t++) {
        callers [t] = (s_caller_t) { link, t, 0 };
        ck_assert_int_eq (pthread_create (&threads [t], NULL, s_caller_run, &callers [t]), 0);
    }
    for (int t = 0; t < S_THREADS; t++) {
        pthread_join (threads [t], NULL);
        wrong += callers [t].wrong;
    }
    cs_link_destroy (&link);
    return wrong;
}

START_TEST (test_coalesced_each_gets_its_own)
{
    void *ctx = zmq_ctx_new ();
    s_broker_t broker;
    s_broker_start (ctx, &broker, false, 2);
    char *endpoints [] = { broker.endpoint };
    ck_assert_int_eq (s_callers_run (endpoints, 1), 0);
    s_broker_stop (&broker);
    zmq_ctx_term (ctx);
    ck_assert_int_eq (broker.jobs, S_THREADS * S_CALLS);           /* each job once */
    ck_assert_int_gt (broker.batches, 0);
    ck_assert_int_lt (broker.requests, broker.jobs);
    ck_assert_int_eq (broker.flagged_singles, 0);
}
END_TEST

START_TEST (test_coalesced_batch_dropped)
{
    void *ctx = zmq_ctx_new ();
    s_broker_t faulty, good;
    s_broker_start (ctx, &faulty, true, 2);
    s_broker_start (ctx, &good, false, 2);
    char *endpoints [] = { faulty.endpoint, good.endpoint };
    ck_assert_int_eq (s_callers_run (endpoints, 2), 0);
    s_broker_stop (&faulty);
    s_broker_stop (&good);
    zmq_ctx_term (ctx);
    ck_assert (faulty.dropped);                 /* a coalesced request was lost there */
    ck_assert_int_ge (faulty.jobs + good.jobs, S_THREADS * S_CALLS + 2);
}
END_TEST

int
main (void)
{
    Suite *suite = suite_create ("module-coalesce");
    TCase *tc = tcase_create ("coalesce");
    tcase_add_test (tc, test_coalesced_each_gets_its_own);
    tcase_add_test (tc, test_coalesced_batch_dropped);
    tcase_set_timeout (tc, 60);
    suite_add_tcase (suite, tc);
    return tr_run (suite);
}
