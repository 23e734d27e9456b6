/*  modexp_job.h — the operands of a ModexpJob as a work item sees them
 *  (issue #12: the paper's raw modexp RPCs as jobs; proto/cryptoserver.proto
 *  ModexpJob).  A job without operands takes those of the nearest earlier
 *  ModexpJob of its request that has them, so that an array sends its
 *  exponent and modulus (or its key) once and still becomes one stateless
 *  work item per base.
 */
#ifndef MODEXP_JOB_H_INCLUDED
#define MODEXP_JOB_H_INCLUDED

#include <stddef.h>
#include "cryptoserver.pb-c.h"
#include "cs_driver.h"

/*  Fills *op for job `index` of `req` (a ModexpJob) with pointers into the
 *  request (borrowed: valid while the request lives).  Returns CKR_OK, or
 *  CKR_MECHANISM_PARAM_INVALID when no operands can be found (cs_wire
 *  refuses such requests already) or the job is not a ModexpJob.  */
CK_RV modexp_job_operands (const Cs__Request *req, size_t index, cs_modexp_t *op);

/*  Wipes every operand of the request's ModexpJobs (exponents, CRT values,
 *  bases) in place, before protobuf-c frees it.  */
void modexp_job_wipe (Cs__Request *req);

#endif
