/*  test_module_link.c — the module's link (pkcs11-module/link.h): what it
 *  returns for a reply that fails at request level (cs_link_reply_rv: the
 *  broker's limits reach the application as their own CK_RV,
 *  docs/CONTRACTS.md "Limits", everything else as CKR_DEVICE_ERROR), and,
 *  against a fake plaintext broker in a thread, that the request frames it
 *  hands libzmq are wiped when libzmq frees them.  Failover (docs/CONTRACTS.md
 *  "Failover") against two fake brokers: an idempotent job whose broker stays
 *  silent or drops the connection is re-sent to the other and succeeds long
 *  before its deadline; a login whose broker drops fails at once.
 *  Leader/follower (docs/DESIGN.md §5): a lone caller never wakes the I/O
 *  thread, concurrent callers each get their own reply, and cs_link_stop
 *  releases a leader and its followers at once.  */
#include <check.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>
#include "cs_p11.h"
#include "link.h"
#include "test_run.h"

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

/*  The fake broker: answers each request with a request-level
 *  CKR_DEVICE_MEMORY (a limit), then one with a result carrying data.  */
typedef struct {
    void *router;
    int answered;
} s_fake_t;

static void *
s_fake_broker (void *arg)
{
    s_fake_t *fake = arg;
    for (int n = 0; n < 2; n++) {
        zmq_msg_t identity, body;
        zmq_msg_init (&identity);
        zmq_msg_init (&body);
        if (zmq_msg_recv (&identity, fake->router, 0) < 0 || zmq_msg_recv (&body, fake->router, 0) < 0)
            break;
        Cs__Request *req = cs_wire_request_decode (zmq_msg_data (&body), zmq_msg_size (&body), NULL);
        Cs__Result result = CS__RESULT__INIT, *results [] = { &result };
        Cs__Reply reply = CS__REPLY__INIT;
        reply.version = CS_PROTOCOL_VERSION;
        reply.request_id = req ? req->request_id : 0;
        if (n == 0)
            reply.rv = CKR_DEVICE_MEMORY;
        else {
            result.kind_case = CS__RESULT__KIND_DATA;
            result.data = (ProtobufCBinaryData) { 6, (uint8_t *) "secret" };
            reply.n_results = 1;
            reply.results = results;
        }
        size_t size = 0;
        uint8_t *data = cs_wire_encode (&reply.base, &size);
        zmq_msg_send (&identity, fake->router, ZMQ_SNDMORE);
        zmq_send (fake->router, data, size, 0);
        free (data);
        zmq_msg_close (&body);
        if (req)
            cs__request__free_unpacked (req, NULL);
        fake->answered++;
    }
    return NULL;
}

/*  Frames the link's libzmq released, and how many were not wiped.  */
static size_t s_frames, s_dirty;

static void
s_frame_check (void *data, size_t size)
{
    bool zero = true;
    for (size_t i = 0; i < size; i++)
        zero &= ((uint8_t *) data) [i] == 0;
    __atomic_add_fetch (&s_frames, 1, __ATOMIC_SEQ_CST);
    if (!zero)
        __atomic_add_fetch (&s_dirty, 1, __ATOMIC_SEQ_CST);
    free (data);
}

START_TEST (test_link_end_to_end)
{
    void (*saved) (void *, size_t) = cs_wire_frame_release;
    cs_wire_frame_release = s_frame_check;
    void *ctx = zmq_ctx_new ();
    s_fake_t fake = { zmq_socket (ctx, ZMQ_ROUTER), 0 };
    ck_assert_int_eq (zmq_bind (fake.router, "tcp://127.0.0.1:*"), 0);
    char endpoint [256];
    size_t len = sizeof endpoint;
    ck_assert_int_eq (zmq_getsockopt (fake.router, ZMQ_LAST_ENDPOINT, endpoint, &len), 0);
    pthread_t thread;
    ck_assert_int_eq (pthread_create (&thread, NULL, s_fake_broker, &fake), 0);

    char *endpoints [] = { endpoint };
    cs_client_config_t config = { .endpoints = endpoints, .n_endpoints = 1, .curve = false,
                                  .timeout_ms = 15000 };
    CK_RV rv = CKR_OK;
    cs_link_t *link = cs_link_new (&config, &rv);
    ck_assert_ptr_nonnull (link);
    /*  A request with a PIN in it, as a login would send.  */
    Cs__LoginJob login = CS__LOGIN_JOB__INIT;
    login.user_type = CKU_USER;
    login.pin = (ProtobufCBinaryData) { 8, (uint8_t *) "87654321" };
    Cs__Job job = CS__JOB__INIT, *jobs [] = { &job };
    job.kind_case = CS__JOB__KIND_LOGIN;
    job.login = &login;
    Cs__Request req = CS__REQUEST__INIT;
    req.n_jobs = 1;
    req.jobs = jobs;
    Cs__Reply *reply = NULL;
    ck_assert_uint_eq (cs_link_call (link, &req, 15000, &reply), CKR_DEVICE_MEMORY);
    ck_assert_ptr_null (reply);
    ck_assert_uint_eq (cs_link_call (link, &req, 15000, &reply), CKR_OK);
    ck_assert_mem_eq (reply->results [0]->data.data, "secret", 6);
    cs_wire_reply_free (&reply);
    cs_link_destroy (&link);                /* libzmq has released every frame now */
    pthread_join (thread, NULL);
    ck_assert_int_eq (fake.answered, 2);
    ck_assert_uint_ge (__atomic_load_n (&s_frames, __ATOMIC_SEQ_CST), 2);
    ck_assert_uint_eq (__atomic_load_n (&s_dirty, __ATOMIC_SEQ_CST), 0);
    cs_wire_frame_release = saved;
    zmq_close (fake.router);
    zmq_ctx_term (ctx);
}
END_TEST

/*  ---- failover against two fake plaintext brokers ---------------------- */

typedef enum { S_ANSWER, S_SILENT, S_DROP, S_SILENT_FIRST } s_mode_t;

typedef struct {
    void *router;
    s_mode_t mode;
    int received;               /* atomic */
    pthread_mutex_t lock;       /* guards ids */
    uint8_t ids [4][32];        /* the idempotency ids of the first jobs received */
    size_t id_len [4];
    bool lost_one;              /* S_SILENT_FIRST: the first key job went unanswered */
    bool stop;                  /* atomic */
    char endpoint [256];
    pthread_t thread;
} s_broker_t;

/*  Answers every request with one data result (S_ANSWER), never answers
 *  (S_SILENT), closes its socket on the first request (S_DROP), or answers
 *  every request but the first with an idempotency id (S_SILENT_FIRST: its
 *  reply is lost).  Keeps
 *  the idempotency ids of the first four requests' jobs.  */
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
        pthread_mutex_lock (&b->lock);
        int n = __atomic_load_n (&b->received, __ATOMIC_SEQ_CST);
        if (req && n < 4 && req->n_jobs && req->jobs [0]->idempotency_id.len <= 32) {
            b->id_len [n] = req->jobs [0]->idempotency_id.len;
            memcpy (b->ids [n], req->jobs [0]->idempotency_id.data, b->id_len [n]);
        }
        pthread_mutex_unlock (&b->lock);
        __atomic_add_fetch (&b->received, 1, __ATOMIC_SEQ_CST);
        bool keyed = req && req->n_jobs && req->jobs [0]->idempotency_id.len;
        bool lost = b->mode == S_SILENT_FIRST && keyed && !b->lost_one;
        b->lost_one = b->lost_one || lost;
        if (b->mode == S_ANSWER || (b->mode == S_SILENT_FIRST && !lost)) {
            Cs__Result result = CS__RESULT__INIT, *results [] = { &result };
            Cs__Reply reply = CS__REPLY__INIT;
            reply.version = CS_PROTOCOL_VERSION;
            reply.request_id = req ? req->request_id : 0;
            result.kind_case = CS__RESULT__KIND_DATA;
            result.data = (ProtobufCBinaryData) { 6, (uint8_t *) "signed" };
            reply.n_results = 1;
            reply.results = results;
            size_t size = 0;
            uint8_t *data = cs_wire_encode (&reply.base, &size);
            zmq_msg_send (&identity, b->router, ZMQ_SNDMORE);
            zmq_send (b->router, data, size, 0);
            free (data);
        }
        zmq_msg_close (&identity);
        if (req)
            cs__request__free_unpacked (req, NULL);
        if (b->mode == S_DROP) {
            zmq_close (b->router);
            b->router = NULL;
            break;
        }
    }
    return NULL;
}

static void
s_broker_start (void *ctx, s_broker_t *b, s_mode_t mode)
{
    int zero = 0;
    size_t len = sizeof b->endpoint;
    memset (b, 0, sizeof *b);
    pthread_mutex_init (&b->lock, NULL);
    b->mode = mode;
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
    pthread_mutex_destroy (&b->lock);
}

static int64_t
s_now_ms (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/*  Calls until the faulty broker (the first endpoint, preferred while it is
 *  healthy) got a request, at most 40 times.  Each call must end with
 *  `want` (CKR_OK when the other broker served it) well before the 10 s
 *  deadline.  Returns how many requests the faulty broker got.  */
static int
s_failover_run (s_mode_t faulty_mode, Cs__Job *job, CK_RV want)
{
    void *ctx = zmq_ctx_new ();
    s_broker_t faulty, good;
    s_broker_start (ctx, &faulty, faulty_mode);
    s_broker_start (ctx, &good, S_ANSWER);
    char *endpoints [] = { faulty.endpoint, good.endpoint };
    cs_client_config_t config = { .endpoints = endpoints, .n_endpoints = 2, .curve = false,
                                  .timeout_ms = 10000, .heartbeat_ivl_ms = 200,
                                  .heartbeat_timeout_ms = 600, .attempt_timeout_ms = 300 };
    CK_RV rv = CKR_OK;
    cs_link_t *link = cs_link_new (&config, &rv);
    ck_assert_ptr_nonnull (link);
    Cs__Job *jobs [] = { job };
    Cs__Request req = CS__REQUEST__INIT;
    req.n_jobs = 1;
    req.jobs = jobs;
    for (int i = 0; i < 40 && __atomic_load_n (&faulty.received, __ATOMIC_SEQ_CST) == 0; i++) {
        Cs__Reply *reply = NULL;
        int before = __atomic_load_n (&faulty.received, __ATOMIC_SEQ_CST);
        int64_t started = s_now_ms ();
        rv = cs_link_call (link, &req, 10000, &reply);
        int64_t took = s_now_ms () - started;
        bool faulty_took_it = __atomic_load_n (&faulty.received, __ATOMIC_SEQ_CST) > before;
        ck_assert_msg (took < 5000, "call %d took %lld ms", i, (long long) took);
        ck_assert_uint_eq (rv, faulty_took_it ? want : CKR_OK);
        if (rv == CKR_OK)
            ck_assert_mem_eq (reply->results [0]->data.data, "signed", 6);
        cs_wire_reply_free (&reply);
        usleep (50 * 1000);
    }
    int received = __atomic_load_n (&faulty.received, __ATOMIC_SEQ_CST);
    cs_link_destroy (&link);
    s_broker_stop (&faulty);
    s_broker_stop (&good);
    zmq_ctx_term (ctx);
    return received;
}

/*  An idempotent job (a hello: as a signature, it changes nothing on the
 *  broker) sent to a broker that never answers is re-sent after the
 *  per-attempt timeout to the other broker.  */
START_TEST (test_link_silent_broker)
{
    Cs__HelloJob hello = CS__HELLO_JOB__INIT;
    Cs__Job job = CS__JOB__INIT;
    job.kind_case = CS__JOB__KIND_HELLO;
    job.hello = &hello;
    ck_assert_int_ge (s_failover_run (S_SILENT, &job, CKR_OK), 1);
}
END_TEST

/*  An idempotent job whose broker drops the connection is re-sent at once.  */
START_TEST (test_link_dropped_broker)
{
    Cs__HelloJob hello = CS__HELLO_JOB__INIT;
    Cs__Job job = CS__JOB__INIT;
    job.kind_case = CS__JOB__KIND_HELLO;
    job.hello = &hello;
    ck_assert_int_ge (s_failover_run (S_DROP, &job, CKR_OK), 1);
}
END_TEST

/*  A login (not idempotent: a wrong PIN counts) whose broker drops the
 *  connection is not re-sent: CKR_DEVICE_ERROR at once.  */
START_TEST (test_link_dropped_login)
{
    Cs__LoginJob login = CS__LOGIN_JOB__INIT;
    Cs__Job job = CS__JOB__INIT;
    job.kind_case = CS__JOB__KIND_LOGIN;
    job.login = &login;
    ck_assert_int_ge (s_failover_run (S_DROP, &job, CKR_DEVICE_ERROR), 1);
}
END_TEST

/*  A key-management job (a destroy) whose broker drops the connection is
 *  re-sent to the other broker with the same idempotency id (16 bytes);
 *  the caller's job is left without one, and the next call draws another.  */
START_TEST (test_link_key_job_resent)
{
    void *ctx = zmq_ctx_new ();
    s_broker_t faulty, good;
    s_broker_start (ctx, &faulty, S_DROP);
    s_broker_start (ctx, &good, S_ANSWER);
    char *endpoints [] = { faulty.endpoint, good.endpoint };
    cs_client_config_t config = { .endpoints = endpoints, .n_endpoints = 2, .curve = false,
                                  .timeout_ms = 10000, .heartbeat_ivl_ms = 200,
                                  .heartbeat_timeout_ms = 600, .attempt_timeout_ms = 300 };
    CK_RV rv = CKR_OK;
    cs_link_t *link = cs_link_new (&config, &rv);
    ck_assert_ptr_nonnull (link);
    Cs__DestroyKeyJob destroy = CS__DESTROY_KEY_JOB__INIT;
    destroy.ref = (char *) "ks:00";
    Cs__Job job = CS__JOB__INIT, *jobs [] = { &job };
    job.kind_case = CS__JOB__KIND_DESTROY_KEY;
    job.destroy_key = &destroy;
    Cs__Request req = CS__REQUEST__INIT;
    req.n_jobs = 1;
    req.jobs = jobs;
    //  Until the faulty broker (preferred while healthy) took one.
    for (int i = 0; i < 40 && __atomic_load_n (&faulty.received, __ATOMIC_SEQ_CST) == 0; i++) {
        Cs__Reply *reply = NULL;
        int good_before = __atomic_load_n (&good.received, __ATOMIC_SEQ_CST);
        ck_assert_uint_eq (cs_link_call (link, &req, 10000, &reply), CKR_OK);
        cs_wire_reply_free (&reply);
        ck_assert_uint_eq (job.idempotency_id.len, 0);
        if (__atomic_load_n (&faulty.received, __ATOMIC_SEQ_CST) == 0)
            continue;
        //  The faulty broker's request went on to the good one: same id.
        int at = __atomic_load_n (&good.received, __ATOMIC_SEQ_CST) - 1;
        ck_assert_int_ge (at, good_before);
        ck_assert_int_lt (at, 4);
        pthread_mutex_lock (&faulty.lock);
        pthread_mutex_lock (&good.lock);
        ck_assert_uint_eq (faulty.id_len [0], CS_LINK_IDEM_ID_LEN);
        ck_assert_uint_eq (good.id_len [at], CS_LINK_IDEM_ID_LEN);
        ck_assert_mem_eq (faulty.ids [0], good.ids [at], CS_LINK_IDEM_ID_LEN);
        if (at > 0)         //  an earlier call (served by the good broker) had another id
            ck_assert (memcmp (good.ids [0], good.ids [at], CS_LINK_IDEM_ID_LEN) != 0);
        pthread_mutex_unlock (&good.lock);
        pthread_mutex_unlock (&faulty.lock);
    }
    ck_assert_int_eq (__atomic_load_n (&faulty.received, __ATOMIC_SEQ_CST), 1);
    cs_link_destroy (&link);
    s_broker_stop (&faulty);
    s_broker_stop (&good);
    zmq_ctx_term (ctx);
}
END_TEST

/*  With one endpoint, a key-management job whose reply is lost (the broker
 *  answers nothing to the first request) is sent once more to the same
 *  broker after the per-attempt timeout, with the same id, and succeeds.  */
START_TEST (test_link_key_job_same_broker)
{
    void *ctx = zmq_ctx_new ();
    s_broker_t broker;
    s_broker_start (ctx, &broker, S_SILENT_FIRST);
    char *endpoints [] = { broker.endpoint };
    cs_client_config_t config = { .endpoints = endpoints, .n_endpoints = 1, .curve = false,
                                  .timeout_ms = 10000, .heartbeat_ivl_ms = 200,
                                  .heartbeat_timeout_ms = 5000, .attempt_timeout_ms = 300 };
    CK_RV rv = CKR_OK;
    cs_link_t *link = cs_link_new (&config, &rv);
    ck_assert_ptr_nonnull (link);
    //  A hello first: answered (the broker is not silent before the key job).
    Cs__HelloJob hello = CS__HELLO_JOB__INIT;
    Cs__Job hello_job = CS__JOB__INIT, *hello_jobs [] = { &hello_job };
    hello_job.kind_case = CS__JOB__KIND_HELLO;
    hello_job.hello = &hello;
    Cs__Request hello_req = CS__REQUEST__INIT;
    hello_req.n_jobs = 1;
    hello_req.jobs = hello_jobs;
    Cs__Reply *reply = NULL;
    ck_assert_uint_eq (cs_link_call (link, &hello_req, 10000, &reply), CKR_OK);
    cs_wire_reply_free (&reply);
    Cs__GenerateKeyPairJob generate = CS__GENERATE_KEY_PAIR_JOB__INIT;
    Cs__Job job = CS__JOB__INIT, *jobs [] = { &job };
    job.kind_case = CS__JOB__KIND_GENERATE_KEY_PAIR;
    job.generate_key_pair = &generate;
    Cs__Request req = CS__REQUEST__INIT;
    req.n_jobs = 1;
    req.jobs = jobs;
    int64_t started = s_now_ms ();
    ck_assert_uint_eq (cs_link_call (link, &req, 10000, &reply), CKR_OK);
    ck_assert_int_lt (s_now_ms () - started, 5000);
    cs_wire_reply_free (&reply);
    ck_assert_int_eq (__atomic_load_n (&broker.received, __ATOMIC_SEQ_CST), 3);
    pthread_mutex_lock (&broker.lock);
    ck_assert_uint_eq (broker.id_len [0], 0);
    ck_assert_uint_eq (broker.id_len [1], CS_LINK_IDEM_ID_LEN);
    ck_assert_uint_eq (broker.id_len [2], CS_LINK_IDEM_ID_LEN);
    ck_assert_mem_eq (broker.ids [1], broker.ids [2], CS_LINK_IDEM_ID_LEN);
    pthread_mutex_unlock (&broker.lock);
    cs_link_destroy (&link);
    s_broker_stop (&broker);
    zmq_ctx_term (ctx);
}
END_TEST

/*  ---- leader/follower (docs/DESIGN.md §5) ------------------------------ */

typedef struct {
    cs_link_t *link;
    int calls;
    int ok;                     /* calls whose reply carried their own request id */
    CK_RV last;
} s_caller_t;

static void *
s_caller_run (void *arg)
{
    s_caller_t *c = arg;
    Cs__HelloJob hello = CS__HELLO_JOB__INIT;
    Cs__Job job = CS__JOB__INIT, *jobs [] = { &job };
    job.kind_case = CS__JOB__KIND_HELLO;
    job.hello = &hello;
    for (int i = 0; i < c->calls; i++) {
        Cs__Request req = CS__REQUEST__INIT;
        req.n_jobs = 1;
        req.jobs = jobs;
        Cs__Reply *reply = NULL;
        c->last = cs_link_call (c->link, &req, 10000, &reply);
        c->ok += c->last == CKR_OK && reply->request_id == req.request_id
              && !memcmp (reply->results [0]->data.data, "signed", 6);
        cs_wire_reply_free (&reply);
    }
    return NULL;
}

/*  One fake broker in `mode` and a link to it with calls of `timeout_ms`.  */
typedef struct {
    void *ctx;
    s_broker_t broker;
    cs_link_t *link;
} s_one_t;

static void
s_one_up (s_one_t *f, s_mode_t mode, int64_t timeout_ms)
{
    f->ctx = zmq_ctx_new ();
    s_broker_start (f->ctx, &f->broker, mode);
    char *endpoints [] = { f->broker.endpoint };
    cs_client_config_t config = { .endpoints = endpoints, .n_endpoints = 1, .curve = false,
                                  .timeout_ms = timeout_ms };
    CK_RV rv = CKR_OK;
    f->link = cs_link_new (&config, &rv);
    ck_assert_ptr_nonnull (f->link);
}

static void
s_one_down (s_one_t *f)
{
    cs_link_destroy (&f->link);
    s_broker_stop (&f->broker);
    zmq_ctx_term (f->ctx);
}

/*  Starts `n` threads, each making `calls` calls on `link`.  */
static void
s_callers_start (cs_link_t *link, int calls, s_caller_t *callers, pthread_t *threads, int n)
{
    for (int i = 0; i < n; i++) {
        callers [i] = (s_caller_t) { link, calls, 0, CKR_OK };
        ck_assert_int_eq (pthread_create (&threads [i], NULL, s_caller_run, &callers [i]), 0);
    }
}

/*  A lone thread receives its own reply: once the connection is up, its
 *  calls never wake the I/O thread (it used to be woken once per call).  */
START_TEST (test_link_lone_caller_no_io_wakeup)
{
    s_one_t f;
    s_one_up (&f, S_ANSWER, 10000);
    s_caller_t warm = { f.link, 1, 0, 0 };
    s_caller_run (&warm);                       /* the connection comes up */
    ck_assert_int_eq (warm.ok, 1);
    usleep (100 * 1000);                        /* late monitor events (handshake) settle */
    uint64_t before = cs_link_io_wakeups (f.link);
    s_caller_t c = { f.link, 50, 0, 0 };
    s_caller_run (&c);
    ck_assert_int_eq (c.ok, 50);
    ck_assert_uint_eq (cs_link_io_wakeups (f.link) - before, 0);
    s_one_down (&f);
}
END_TEST

/*  Several threads at once: whichever leads hands every other thread its
 *  own reply (matched by request id), and leadership passes on as leaders
 *  leave; no call is lost or answered twice.  */
START_TEST (test_link_followers_get_their_replies)
{
    s_one_t f;
    s_one_up (&f, S_ANSWER, 10000);
    enum { THREADS = 6, CALLS = 40 };
    s_caller_t callers [THREADS];
    pthread_t threads [THREADS];
    s_callers_start (f.link, CALLS, callers, threads, THREADS);
    for (int i = 0; i < THREADS; i++) {
        pthread_join (threads [i], NULL);
        ck_assert_int_eq (callers [i].ok, CALLS);
    }
    ck_assert_int_eq (__atomic_load_n (&f.broker.received, __ATOMIC_SEQ_CST), THREADS * CALLS);
    s_one_down (&f);
}
END_TEST

/*  C_Finalize racing blocked threads: cs_link_stop wakes the leader out of
 *  its poll and every follower, all with CKR_CRYPTOKI_NOT_INITIALIZED, long
 *  before their deadline.  */
START_TEST (test_link_stop_wakes_leader_and_followers)
{
    s_one_t f;
    s_one_up (&f, S_SILENT, 20000);
    enum { THREADS = 3 };
    s_caller_t callers [THREADS];
    pthread_t threads [THREADS];
    s_callers_start (f.link, 1, callers, threads, THREADS);
    while (__atomic_load_n (&f.broker.received, __ATOMIC_SEQ_CST) < THREADS)
        usleep (10 * 1000);
    int64_t started = s_now_ms ();
    cs_link_stop (f.link);
    for (int i = 0; i < THREADS; i++) {
        pthread_join (threads [i], NULL);
        ck_assert_uint_eq (callers [i].last, CKR_CRYPTOKI_NOT_INITIALIZED);
    }
    ck_assert_int_lt (s_now_ms () - started, 2000);
    s_one_down (&f);
}
END_TEST

int
main (void)
{
    Suite *suite = suite_create ("module-link");
    TCase *tc = tcase_create ("link");
    tcase_add_test (tc, test_reply_rv);
    tcase_add_test (tc, test_link_end_to_end);
    tcase_add_test (tc, test_link_silent_broker);
    tcase_add_test (tc, test_link_dropped_broker);
    tcase_add_test (tc, test_link_dropped_login);
    tcase_add_test (tc, test_link_key_job_resent);
    tcase_add_test (tc, test_link_key_job_same_broker);
    tcase_add_test (tc, test_link_lone_caller_no_io_wakeup);
    tcase_add_test (tc, test_link_followers_get_their_replies);
    tcase_add_test (tc, test_link_stop_wakes_leader_and_followers);
    tcase_set_timeout (tc, 60);
    suite_add_tcase (suite, tc);
    return tr_run (suite);
}
