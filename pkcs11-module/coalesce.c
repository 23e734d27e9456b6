/*  coalesce.c — which requests share a frame, and the frame (coalesce.h).  */
#include <stdlib.h>
#include <string.h>
#include "coalesce.h"

bool
cs_coalesce_batchable (const Cs__Request *req)
{
    if (!req || req->n_jobs != 1)
        return false;
    const Cs__Job *job = req->jobs [0];
    switch (job->kind_case) {
        case CS__JOB__KIND_SIGN: case CS__JOB__KIND_DECRYPT: case CS__JOB__KIND_DERIVE:
        case CS__JOB__KIND_SYM:
            return true;
        case CS__JOB__KIND_MODEXP:
            return job->modexp->modulus.len > 0 || job->modexp->prime1.len > 0;
        default:
            return false;
    }
}

bool
cs_coalesce_compatible (const Cs__Request *a, const Cs__Request *b)
{
    return a->ticket.len == b->ticket.len
        && (a->ticket.len == 0 || memcmp (a->ticket.data, b->ticket.data, a->ticket.len) == 0);
}

uint8_t *
cs_coalesce_frame (const uint8_t *const *frames, const size_t *sizes, size_t n,
                   uint64_t request_id, uint32_t deadline_ms, size_t *size_p)
{
    Cs__Request trailer = CS__REQUEST__INIT;
    size_t total = 0, at = 0;
    trailer.request_id = request_id;
    trailer.deadline_ms = deadline_ms;
    trailer.per_job_replies = true;
    for (size_t i = 0; i < n; i++)
        total += sizes [i];
    size_t tail = cs__request__get_packed_size (&trailer);
    uint8_t *frame = tail <= CS_COALESCE_TRAILER_MAX ? malloc (total + tail) : NULL;
    if (!frame)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        memcpy (frame + at, frames [i], sizes [i]);
        at += sizes [i];
    }
    at += cs__request__pack (&trailer, frame + at);
    *size_p = at;
    return frame;
}
