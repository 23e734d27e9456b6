/*  frames.h — what the parts of cs-fuzz-frames (tests/fuzz/cs-fuzz-frames.c)
 *  share: the kinds of message and ticket paths, the answer owed to one
 *  message, the fuzzer's state, and the functions each part gives the
 *  others (frames_requests.c builds valid requests, frames_replies.c
 *  predicts and checks the broker's answers).
 */
#ifndef FRAMES_H_INCLUDED
#define FRAMES_H_INCLUDED

#include <czmq.h>
#include "cs_wire.h"
#include "ticket.h"

#define FRAMES_WINDOW 200           /* messages in flight (< the ROUTER's HWM of 1000) */

/*  How a message is made from a valid request, and which ticket it carries.  */
typedef enum { S_RANDOM, S_TRUNCATED, S_FLIPPED, S_OVERSIZED, S_MULTIPART, S_INTACT, S_KINDS } frames_kind_t;
typedef enum { S_TICKET_REAL, S_TICKET_NONE, S_TICKET_CORRUPT, S_PATHS } frames_path_t;

/*  The answer the broker owes to one message on the main association.  */
typedef struct {
    uint64_t id;                    /* request id the broker sees (0: none) */
    bool results;                   /* rv CKR_OK and one result per job; else a request-level error */
    bool ticket_ok;                 /* the ticket is byte-identical to the real one */
    bool ticket_sent;               /* the request carries a ticket (any bytes) */
    size_t n_jobs;
    uint8_t *jobs;                  /* Cs__Job__KindCase of each job (owned) */
    uint8_t *needs;                 /* s_needs_t of each job (owned) */
    uint32_t version;               /* Reply.version owed: the one the broker chooses; request-level
                                       errors the lowest, a version mismatch the highest */
    bool per_job;                   /* results: one reply per job (Request.per_job_replies) */
    uint8_t *answered;              /* per_job: the jobs answered so far (owned) */
    size_t n_answered;
    uint8_t *frame;                 /* a copy of the (first) frame sent, for reports (owned) */
    size_t frame_size;
    frames_path_t path;
    frames_kind_t kind;
    long seq;                       /* the message's number in the run */
} frames_expect_t;

/*  The fuzzer: its two associations, the login, the messages in flight
 *  and the counts of the summary line.  */
typedef struct {
    zsock_t *dealer;                /* main association */
    zsock_t *oversized;             /* second association: oversized frames only */
    zpoller_t *poller;              /* on dealer */
    uint8_t ticket [TICKET_LEN];    /* the real CKU_USER ticket */
    bool logged_in;
    uint64_t next_id;
    frames_expect_t expect [FRAMES_WINDOW + 1];
    size_t n_expect;
    unsigned long sent [S_KINDS], sent_path [S_PATHS], dropped, withheld, id_waits;
    unsigned long replies, ok, errors, refused, authed_ok, bad, violations;
} frames_t;

/*  Seeds the fuzzer's own random numbers and draws the random parts of
 *  the valid requests (a ciphertext, an SPKI): a seed gives the same
 *  messages on every run.  */
void frames_seed (unsigned seed);

/*  A number in [0, 2^31), as random () gives, from the fuzzer's own
 *  generator (frames_seed).  */
long frames_random (void);

/*  Fills buf with len random bytes.  */
void frames_random_bytes (uint8_t *buf, size_t len);

/*  A valid request of 1..4 random jobs with a fresh request id and the
 *  ticket of path, asking for per-job replies or not.  Caller frees the
 *  returned buffer of *size_p bytes.  */
uint8_t *frames_valid_request (frames_t *self, frames_path_t path, size_t *size_p);

/*  Predicts the answer to a one-frame message (size bytes) as the broker
 *  decodes it, into expect (the caller frees it with frames_expect_free).
 *  Returns false when the message must not be sent (a job that checks a
 *  PIN).  */
bool frames_predict (const frames_t *self, const uint8_t *data, size_t size, frames_expect_t *expect);

/*  Frees what expect owns.  */
void frames_expect_free (frames_expect_t *expect);

/*  True when a reply to expect could be taken for the reply to a message
 *  in flight with the same request id.  */
bool frames_ambiguous (const frames_t *self, const frames_expect_t *expect);

/*  The request id the broker reports for a refused message of size bytes,
 *  or one of several frames (0 when none).  */
uint64_t frames_peek_id (const uint8_t *data, size_t size);

/*  Receives and checks one reply on the main association within wait_ms
 *  milliseconds, and counts it.  Returns false when none came.  */
bool frames_receive (frames_t *self, int wait_ms);

#endif
