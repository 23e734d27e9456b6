/*  test_module_waitq.c — the link's wait queue (pkcs11-module/waitq.h)
 *  without sockets or threads: a fake send hook records each frame and
 *  answers as each broker is set to (taken, EAGAIN, a hard error), a fake
 *  finish hook counts completions, and time is a number.  What it checks
 *  (docs/CONTRACTS.md "Failover", docs/DESIGN.md §6, §7): the least loaded
 *  healthy broker takes a job, a silent one last; a job at its deadline
 *  ends CKR_DEVICE_REMOVED when no broker took it and CKR_DEVICE_ERROR when
 *  one did; the per-attempt timeout moves an idempotent job to the next
 *  broker and sends a key-management job once more to its only broker; a
 *  broker that dies gives its idempotent jobs to the next broker and fails
 *  a login at once; batchable jobs with one ticket leave as one frame to a
 *  per-job broker, each reply reaching its own waiter, a refusal of the
 *  whole frame sending each again alone; and a busy broker holds them for
 *  company up to CS_COALESCE_HOLD_MS.  */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "cs_p11.h"
#include "coalesce.h"
#include "waitq.h"
#include "test_run.h"

#define S_MAX_SENT 64

/*  The fake world: what each broker answers to a send, and what was sent.  */
static struct {
    int answer [CS_CLIENT_MAX_ENDPOINTS];       /* 0: taken; else the errno of a failure */
    size_t n_sent;
    size_t sent_to [S_MAX_SENT];
    uint64_t sent_id [S_MAX_SENT];              /* request id of the frame */
    size_t sent_jobs [S_MAX_SENT];              /* jobs in the frame */
    size_t finished;
} s_world;

static cs_assoc_t s_assocs [3];
static cs_waitq_t s_queue;

static int
s_send (void *arg, size_t assoc, const uint8_t *frame, size_t size)
{
    (void) arg;
    if (s_world.answer [assoc]) {
        errno = s_world.answer [assoc];
        return -1;
    }
    Cs__Request *req = cs__request__unpack (NULL, size, frame);
    ck_assert_ptr_nonnull (req);
    ck_assert_uint_lt (s_world.n_sent, S_MAX_SENT);
    s_world.sent_to [s_world.n_sent] = assoc;
    s_world.sent_id [s_world.n_sent] = req->request_id;
    s_world.sent_jobs [s_world.n_sent] = req->n_jobs;
    s_world.n_sent++;
    cs__request__free_unpacked (req, NULL);
    return 0;
}

static void
s_finish (void *arg, cs_waiter_t *waiter)
{
    (void) arg;
    ck_assert (waiter->done);
    s_world.finished++;
}

/*  `n` brokers, all up, speaking `version`, none answered yet.  */
static void
s_setup_n (size_t n, uint32_t version)
{
    static char *names [] = { "tcp://a", "tcp://b", "tcp://c" };
    memset (&s_world, 0, sizeof s_world);
    memset (s_assocs, 0, sizeof s_assocs);
    for (size_t i = 0; i < n; i++)
        s_assocs [i] = (cs_assoc_t) { .endpoint = names [i], .state = CS_ASSOC_UP, .peer_version = version };
    cs_waitq_init (&s_queue, s_assocs, n, 100, &(cs_waitq_io_t) { s_send, s_finish, NULL });
}

/*  One call: its request with one job of `kind` (a sign, a login or a key
 *  generation), under `ticket`, and its waiter.  */
typedef struct {
    Cs__SignJob sign;
    Cs__LoginJob login;
    Cs__GenerateKeyJob generate;
    Cs__Job job, *jobs [1];
    Cs__Request req;
    cs_waiter_t waiter;
} s_call_t;

static void
s_call (s_call_t *call, Cs__Job__KindCase kind, const char *ticket, int64_t now_ms)
{
    size_t size = 0;
    *call = (s_call_t) { .sign = CS__SIGN_JOB__INIT, .login = CS__LOGIN_JOB__INIT,
                         .generate = CS__GENERATE_KEY_JOB__INIT, .job = CS__JOB__INIT,
                         .req = CS__REQUEST__INIT };
    call->job.kind_case = kind;
    if (kind == CS__JOB__KIND_SIGN)
        call->job.sign = &call->sign;
    else
    if (kind == CS__JOB__KIND_LOGIN)
        call->job.login = &call->login;
    else
        call->job.generate_key = &call->generate;
    call->jobs [0] = &call->job;
    call->req.n_jobs = 1;
    call->req.jobs = call->jobs;
    call->req.ticket = (ProtobufCBinaryData) { strlen (ticket), (uint8_t *) ticket };
    call->req.deadline_ms = 1000;
    call->req.request_id = cs_waitq_next_id (&s_queue);
    uint8_t *frame = cs_wire_encode (&call->req.base, &size);
    ck_assert_ptr_nonnull (frame);
    cs_waiter_init (&call->waiter, &call->req, frame, size);
    cs_waitq_add (&s_queue, &call->waiter, now_ms);
}

static void
s_call_end (s_call_t *call)
{
    cs_waitq_remove (&s_queue, &call->waiter);
    free (call->waiter.frame);
    cs_wire_reply_free (&call->waiter.reply);
}

/*  A reply to request `id` (job `job` of it when not 0) with rv `rv`.  */
static Cs__Reply *
s_reply (uint64_t id, uint32_t job, CK_RV rv)
{
    Cs__Reply *reply = calloc (1, sizeof *reply);
    cs__reply__init (reply);
    reply->request_id = id;
    reply->job_number = job;
    reply->rv = rv;
    reply->version = CS_PROTOCOL_VERSION;
    return reply;
}

START_TEST (test_least_loaded_not_silent)
{
    s_call_t a, b, c;
    s_setup_n (2, CS_PROTOCOL_VERSION_MIN);             /* no per-job replies: each alone */
    s_call (&a, CS__JOB__KIND_SIGN, "t", 0);
    s_call (&b, CS__JOB__KIND_SIGN, "t", 0);
    ck_assert (cs_waitq_want_send (&s_queue));
    cs_waitq_send_queued (&s_queue, 5);
    ck_assert_uint_eq (s_world.n_sent, 2);              /* one each: the least loaded */
    ck_assert_uint_ne (s_world.sent_to [0], s_world.sent_to [1]);
    ck_assert_int_eq (a.waiter.sent_ms, 5);
    ck_assert (!cs_waitq_want_send (&s_queue));
    s_assocs [0].silent = true;                         /* a silent broker goes last */
    s_call (&c, CS__JOB__KIND_SIGN, "t", 10);
    cs_waitq_send_queued (&s_queue, 10);
    ck_assert_uint_eq (s_world.sent_to [2], 1);
    s_assocs [1].state = CS_ASSOC_DOWN;                 /* ... but goes when it is the only one */
    s_call_end (&c);
    s_call (&c, CS__JOB__KIND_SIGN, "t", 10);
    cs_waitq_send_queued (&s_queue, 10);
    ck_assert_uint_eq (s_world.sent_to [3], 0);
    s_call_end (&a);
    s_call_end (&b);
    s_call_end (&c);
}
END_TEST

START_TEST (test_send_would_block_or_fail)
{
    s_call_t a, b;
    s_setup_n (2, CS_PROTOCOL_VERSION_MIN);
    s_world.answer [0] = s_world.answer [1] = EAGAIN;   /* both full: stays queued */
    s_call (&a, CS__JOB__KIND_SIGN, "t", 0);
    cs_waitq_send_queued (&s_queue, 0);
    ck_assert_int_eq (a.waiter.assoc, -1);
    ck_assert (!a.waiter.done);
    s_world.answer [0] = 0;                             /* one frees up: it takes it */
    cs_waitq_send_queued (&s_queue, 1);
    ck_assert_int_eq (a.waiter.assoc, 0);
    s_world.answer [0] = s_world.answer [1] = EPIPE;    /* a hard error fails the call */
    s_call (&b, CS__JOB__KIND_SIGN, "t", 2);
    cs_waitq_send_queued (&s_queue, 2);
    ck_assert (b.waiter.done);
    ck_assert_uint_eq (b.waiter.rv, CKR_DEVICE_ERROR);
    ck_assert_uint_eq (s_world.finished, 1);
    s_call_end (&a);
    s_call_end (&b);
}
END_TEST

START_TEST (test_login_frame_dropped_once_sent)
{
    s_call_t a;
    s_setup_n (1, CS_PROTOCOL_VERSION);
    s_call (&a, CS__JOB__KIND_LOGIN, "", 0);
    ck_assert (!a.waiter.idempotent && !a.waiter.batchable);
    cs_waitq_send_queued (&s_queue, 0);
    ck_assert_uint_eq (s_world.n_sent, 1);
    ck_assert_ptr_null (a.waiter.frame);                /* no copy of a PIN kept */
    s_call_end (&a);
}
END_TEST

START_TEST (test_deadline)
{
    s_call_t a, b;
    s_setup_n (1, CS_PROTOCOL_VERSION_MIN);
    s_assocs [0].state = CS_ASSOC_DOWN;
    s_call (&a, CS__JOB__KIND_SIGN, "t", 0);
    cs_waitq_send_queued (&s_queue, 0);                 /* nobody up to take it */
    cs_waiter_expire (&a.waiter, 1000);
    ck_assert (a.waiter.done);
    ck_assert_uint_eq (a.waiter.rv, CKR_DEVICE_REMOVED);
    s_assocs [0].state = CS_ASSOC_UP;
    s_call (&b, CS__JOB__KIND_SIGN, "t", 0);
    cs_waitq_send_queued (&s_queue, 0);                 /* taken, never answered */
    ck_assert_int_eq (b.waiter.assoc, 0);
    cs_waiter_expire (&b.waiter, 1000);
    ck_assert_uint_eq (b.waiter.rv, CKR_DEVICE_ERROR);
    ck_assert_uint_eq (s_world.finished, 0);            /* the caller ends itself */
    s_call_end (&a);
    s_call_end (&b);
}
END_TEST

START_TEST (test_attempt_timeout_fails_over)
{
    s_call_t a;
    s_setup_n (2, CS_PROTOCOL_VERSION_MIN);
    s_world.answer [1] = EAGAIN;                        /* it goes to broker 0 */
    s_call (&a, CS__JOB__KIND_SIGN, "t", 0);
    cs_waitq_send_queued (&s_queue, 0);
    ck_assert_int_eq (a.waiter.assoc, 0);
    s_world.answer [1] = 0;
    ck_assert_int_eq (cs_waitq_next_timeout (&s_queue, 40), 60);   /* attempt_ms 100 */
    cs_waitq_heard (&s_queue, 0, 50);                   /* a word from it pushes it back */
    ck_assert_int_eq (cs_waitq_next_timeout (&s_queue, 60), 90);
    cs_waitq_check_attempts (&s_queue, 149);
    ck_assert_int_eq (a.waiter.assoc, 0);               /* not yet */
    cs_waitq_check_attempts (&s_queue, 150);
    ck_assert (s_assocs [0].silent);
    ck_assert_int_eq (a.waiter.assoc, -1);              /* queued again, alone */
    ck_assert (a.waiter.alone);
    cs_waitq_send_queued (&s_queue, 150);
    ck_assert_int_eq (a.waiter.assoc, 1);               /* to the next broker */
    ck_assert_uint_eq (s_world.n_sent, 2);
    ck_assert_uint_eq (s_world.sent_id [1], a.waiter.request_id);
    cs_waitq_heard (&s_queue, 0, 160);
    ck_assert (!s_assocs [0].silent);
    Cs__Reply *reply = s_reply (a.waiter.request_id, 0, CKR_OK);
    ck_assert (!cs_waitq_deliver (&s_queue, &reply));
    ck_assert_ptr_null (reply);
    ck_assert (a.waiter.done);
    ck_assert_uint_eq (a.waiter.rv, CKR_OK);
    ck_assert_int_eq (cs_waitq_next_timeout (&s_queue, 200), -1);
    s_call_end (&a);
}
END_TEST

START_TEST (test_attempt_timeout_one_broker)
{
    s_call_t sign, gen;
    s_setup_n (1, CS_PROTOCOL_VERSION_MIN);
    s_call (&sign, CS__JOB__KIND_SIGN, "t", 0);
    s_call (&gen, CS__JOB__KIND_GENERATE_KEY, "t", 0);
    ck_assert (gen.waiter.keyed && gen.waiter.idempotent);
    cs_waitq_send_queued (&s_queue, 0);
    ck_assert_uint_eq (s_world.n_sent, 2);
    cs_waitq_check_attempts (&s_queue, 100);
    ck_assert_uint_eq (s_world.n_sent, 3);              /* the key job once more, same broker */
    ck_assert_uint_eq (s_world.sent_to [2], 0);
    ck_assert_uint_eq (s_world.sent_id [2], gen.waiter.request_id);
    ck_assert (gen.waiter.retried_same);
    ck_assert_int_eq (sign.waiter.assoc, 0);            /* a sign stays: no other broker */
    cs_waitq_check_attempts (&s_queue, 500);
    ck_assert_uint_eq (s_world.n_sent, 3);              /* once only */
    ck_assert_int_eq (cs_waitq_next_timeout (&s_queue, 500), -1);
    ck_assert (!sign.waiter.done && !gen.waiter.done);  /* their deadlines decide */
    s_call_end (&sign);
    s_call_end (&gen);
}
END_TEST

START_TEST (test_broker_dies)
{
    s_call_t sign, login, queued;
    s_setup_n (2, CS_PROTOCOL_VERSION_MIN);
    s_world.answer [1] = EAGAIN;
    s_call (&sign, CS__JOB__KIND_SIGN, "t", 0);
    s_call (&login, CS__JOB__KIND_LOGIN, "", 0);
    cs_waitq_send_queued (&s_queue, 0);
    ck_assert_int_eq (sign.waiter.assoc, 0);
    ck_assert_int_eq (login.waiter.assoc, 0);
    s_world.answer [0] = EAGAIN;
    s_call (&queued, CS__JOB__KIND_SIGN, "t", 0);       /* on no broker yet */
    cs_waitq_send_queued (&s_queue, 0);
    s_world.answer [1] = 0;
    s_assocs [0].state = CS_ASSOC_DOWN;
    cs_waitq_broker_down (&s_queue, 0, "dropped the connection");
    ck_assert (login.waiter.done);                      /* may have taken effect */
    ck_assert_uint_eq (login.waiter.rv, CKR_DEVICE_ERROR);
    ck_assert (!sign.waiter.done);
    ck_assert_int_eq (sign.waiter.assoc, -1);
    ck_assert (!queued.waiter.done);
    cs_waitq_send_queued (&s_queue, 1);
    ck_assert_int_eq (sign.waiter.assoc, 1);            /* the next broker */
    ck_assert_int_eq (queued.waiter.assoc, 1);
    cs_waitq_fail_all (&s_queue, CKR_DEVICE_ERROR, true);   /* queued only: none left */
    ck_assert (!sign.waiter.done);
    cs_waitq_fail_all (&s_queue, CKR_CRYPTOKI_NOT_INITIALIZED, false);
    ck_assert_uint_eq (sign.waiter.rv, CKR_CRYPTOKI_NOT_INITIALIZED);
    ck_assert_uint_eq (s_world.finished, 3);
    s_call_end (&sign);
    s_call_end (&login);
    s_call_end (&queued);
}
END_TEST

START_TEST (test_coalesced)
{
    s_call_t a, b, c, other;
    s_setup_n (1, CS_PROTOCOL_PER_JOB);
    s_call (&a, CS__JOB__KIND_SIGN, "t", 0);
    s_call (&b, CS__JOB__KIND_SIGN, "t", 0);
    s_call (&other, CS__JOB__KIND_SIGN, "u", 0);        /* another ticket: not with them */
    s_call (&c, CS__JOB__KIND_SIGN, "t", 0);
    cs_waitq_send_queued (&s_queue, 0);
    ck_assert_uint_eq (s_world.n_sent, 2);
    ck_assert_uint_eq (s_world.sent_jobs [0], 3);       /* a, b, c in one frame */
    ck_assert_uint_eq (s_world.sent_id [0], a.waiter.batch_id);
    ck_assert_uint_eq (c.waiter.batch_job, 3);
    ck_assert_uint_eq (s_world.sent_jobs [1], 1);
    ck_assert_uint_eq (s_world.sent_id [1], other.waiter.request_id);
    Cs__Reply *reply = s_reply (a.waiter.batch_id, 2, CKR_OK);
    cs_waitq_deliver (&s_queue, &reply);
    ck_assert_ptr_null (reply);
    ck_assert (b.waiter.done && !a.waiter.done && !c.waiter.done);
    reply = s_reply (a.waiter.batch_id, 0, CKR_DEVICE_MEMORY);     /* the rest refused whole */
    ck_assert (cs_waitq_deliver (&s_queue, &reply));
    ck_assert_ptr_nonnull (reply);                      /* nobody's: the caller frees it */
    cs_wire_reply_free (&reply);
    ck_assert (a.waiter.alone && c.waiter.alone);
    ck_assert_int_eq (a.waiter.assoc, -1);
    cs_waitq_send_queued (&s_queue, 1);
    ck_assert_uint_eq (s_world.n_sent, 4);              /* each alone now */
    ck_assert_uint_eq (s_world.sent_id [2], a.waiter.request_id);
    ck_assert_uint_eq (s_world.sent_id [3], c.waiter.request_id);
    reply = s_reply (12345, 0, CKR_OK);                 /* late or unknown: dropped */
    ck_assert (!cs_waitq_deliver (&s_queue, &reply));
    ck_assert_ptr_nonnull (reply);
    cs_wire_reply_free (&reply);
    s_call_end (&a);
    s_call_end (&b);
    s_call_end (&c);
    s_call_end (&other);
}
END_TEST

START_TEST (test_old_broker_not_coalesced)
{
    s_call_t a, b;
    s_setup_n (1, CS_PROTOCOL_VERSION_MIN);             /* no per-job replies */
    s_call (&a, CS__JOB__KIND_SIGN, "t", 0);
    s_call (&b, CS__JOB__KIND_SIGN, "t", 0);
    cs_waitq_send_queued (&s_queue, 0);
    ck_assert_uint_eq (s_world.n_sent, 2);
    ck_assert_uint_eq (s_world.sent_jobs [0], 1);
    ck_assert_uint_eq (a.waiter.batch_id, 0);
    s_call_end (&a);
    s_call_end (&b);
}
END_TEST

START_TEST (test_hold_for_company)
{
    s_call_t busy [CS_COALESCE_LOW_JOBS], a, b;
    s_setup_n (1, CS_PROTOCOL_PER_JOB);
    for (size_t i = 0; i < CS_COALESCE_LOW_JOBS; i++) {     /* the broker is busy */
        s_call (&busy [i], CS__JOB__KIND_SIGN, i % 2 ? "x" : "y", 0);
        busy [i].waiter.alone = true;
    }
    cs_waitq_send_queued (&s_queue, 0);
    ck_assert_uint_eq (s_world.n_sent, CS_COALESCE_LOW_JOBS);
    s_call (&a, CS__JOB__KIND_SIGN, "t", 10);
    ck_assert (!cs_waitq_joins_hold (&s_queue, &a.waiter));     /* no hold yet: wake */
    cs_waitq_send_queued (&s_queue, 10);
    ck_assert_uint_eq (s_world.n_sent, CS_COALESCE_LOW_JOBS);    /* held */
    ck_assert_int_eq (s_queue.hold_until_ms, 10 + CS_COALESCE_HOLD_MS);
    ck_assert (!cs_waitq_want_send (&s_queue));
    ck_assert_int_eq (cs_waitq_next_timeout (&s_queue, 11), CS_COALESCE_HOLD_MS - 1);
    s_call (&b, CS__JOB__KIND_SIGN, "t", 11);
    ck_assert (cs_waitq_joins_hold (&s_queue, &b.waiter));      /* it need not wake */
    cs_waitq_send_queued (&s_queue, 10 + CS_COALESCE_HOLD_MS);  /* the hold ends */
    ck_assert_uint_eq (s_world.n_sent, CS_COALESCE_LOW_JOBS + 1);
    ck_assert_uint_eq (s_world.sent_jobs [CS_COALESCE_LOW_JOBS], 2);
    ck_assert_int_eq (s_queue.hold_until_ms, 0);
    for (size_t i = 0; i < CS_COALESCE_LOW_JOBS; i++)
        s_call_end (&busy [i]);
    s_call_end (&a);
    s_call_end (&b);
}
END_TEST

int
main (void)
{
    Suite *suite = suite_create ("module-waitq");
    TCase *tc = tr_tcase ("waitq", NULL, NULL);
    tcase_add_test (tc, test_least_loaded_not_silent);
    tcase_add_test (tc, test_send_would_block_or_fail);
    tcase_add_test (tc, test_login_frame_dropped_once_sent);
    tcase_add_test (tc, test_deadline);
    tcase_add_test (tc, test_attempt_timeout_fails_over);
    tcase_add_test (tc, test_attempt_timeout_one_broker);
    tcase_add_test (tc, test_broker_dies);
    tcase_add_test (tc, test_coalesced);
    tcase_add_test (tc, test_old_broker_not_coalesced);
    tcase_add_test (tc, test_hold_for_company);
    suite_add_tcase (suite, tc);
    return tr_run (suite);
}
