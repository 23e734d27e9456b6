/*  coalesce.h — the module's side of the paper's ARRAY RPC (issue #8): which
 *  requests of application threads may share one frame, and that frame.
 *
 *  Several waiters queued for the same broker whose requests are one
 *  stateless crypto job each, with the same login ticket, leave as one
 *  Request with N jobs and Request.per_job_replies; the broker answers each
 *  job as it finishes (Reply.job_number).  The frame is the waiters' own
 *  encoded frames concatenated, then a trailer: protobuf merges a message
 *  encoded twice (repeated fields append, the last scalar wins), so nothing
 *  is decoded or encoded again.  Used by the wait queue (waitq.c).
 */
#ifndef CS_COALESCE_H_INCLUDED
#define CS_COALESCE_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "cs_wire.h"

#define CS_COALESCE_MAX_JOBS 32         /* jobs in one coalesced request */
#define CS_COALESCE_TRAILER_MAX 32      /* bytes of the trailer (three varints) */
#define CS_COALESCE_LOW_JOBS 8          /* jobs of ours on a broker from which it is busy:
                                           new ones wait there for company (waitq.c s_hold) */
#define CS_COALESCE_HOLD_MS 2           /* ms a job waits for company at most */

/*  True when req (as the module sends it) may share a frame with others:
 *  exactly one job, of a kind that changes nothing on the broker and needs
 *  no other job (sign, decrypt, derive, sym, and a modexp job that carries
 *  its own operands: one without them would take another waiter's).
 *  Logins, PIN changes, key lists and key management always go alone.  */
bool cs_coalesce_batchable (const Cs__Request *req);

/*  True when two batchable requests may share a frame: the same login
 *  ticket (bytes), so that the broker checks one ticket for all.  */
bool cs_coalesce_compatible (const Cs__Request *a, const Cs__Request *b);

/*  The coalesced frame: frames [0..n) (each one encoded single-job
 *  Request of the same version range and ticket; sizes in bytes) one after
 *  the other, then a trailer setting request_id, deadline_ms (ms) and
 *  per_job_replies.  The jobs keep the order of frames: job i is frames [i]'s
 *  job.  Returns a malloc'd buffer of *size_p bytes (caller wipes and
 *  frees: jobs may hold per-request keys), or NULL when out of memory.  */
uint8_t *cs_coalesce_frame (const uint8_t *const *frames, const size_t *sizes, size_t n,
                            uint64_t request_id, uint32_t deadline_ms, size_t *size_p);

#endif
