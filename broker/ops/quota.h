/*  quota.h — per-tenant quotas (issue 22 item 2): the limits an operator
 *  sets with `cryptoserver-admin tenant set NAME --max-ops-per-s N
 *  --max-inflight N --max-keys N --max-objects N` (broker.conf
 *  tenants/NAME/max-*, 0 or absent = none; docs/CONTRACTS.md "Tenant
 *  quotas"), and the token bucket that measures operations per second.
 *
 *  A token bucket (the classic traffic-shaping meter, e.g. RFC 2697's
 *  single-rate meter without colours): `rate` tokens per second flow into
 *  a bucket of `burst` tokens; a job takes one token, or reserves it and is
 *  told how many milliseconds it must wait for it.  Pure arithmetic on a clock the
 *  caller passes in (milliseconds, monotonic), so it is tested without
 *  sleeping.  Used by one thread (the frontend's).
 */
#ifndef QUOTA_H_INCLUDED
#define QUOTA_H_INCLUDED

#include <stdbool.h>
#include <stdint.h>
#include <czmq.h>
#include "keystore.h"

/*  A tenant's limits; 0 means none.  */
typedef struct {
    uint32_t max_ops_per_s;     /* jobs admitted per second (token bucket) */
    uint32_t max_inflight;      /* jobs of the tenant between admission and reply */
    uint32_t max_keys;          /* keystore keys stored (private and secret keys) */
    uint32_t max_objects;       /* keystore objects stored (certificates, data objects) */
} quota_limits_t;

/*  The broker.conf names of the four limits, in the order of quota_limits_t
 *  (tenants/NAME/<name>).  */
extern const char *const quota_names [4];

/*  Parses one limit: a decimal in 0..4294967295 (no sign, nothing after
 *  it) into *value_p.  0, or -1.  */
int quota_value_parse (const char *text, uint32_t *value_p);

/*  Reads tenants/TENANT/max-* from a parsed broker.conf (root may be NULL)
 *  into *limits (absent: 0).  Returns 0, or -1 when a value is not a
 *  decimal in 0..4294967295 (then *why_p names it: static text).  */
int quota_limits_read (zconfig_t *root, const char *tenant, quota_limits_t *limits, const char **why_p);

/*  Checks the tenants section of broker.conf: every tenants/NAME/max-*
 *  must parse (quota_limits_read).  Returns 0, or -1 with `path` (size
 *  bytes) naming the bad value.  *other_p: true when the section is empty
 *  or holds anything but audit and the four limits (the PINs of old
 *  configs), which the broker ignores with a warning.  */
int quota_tenants_check (zconfig_t *root, char *path, size_t size, bool *other_p);

/*  Whether tenant may store one more key under max_keys (0: no limit):
 *  CKR_OK, or CKR_DEVICE_MEMORY (PKCS#11 2.40 §11.1: "the token does not
 *  have sufficient memory") when it holds max_keys already, or
 *  CKR_DEVICE_ERROR when the keystore cannot list them.  Counted outside
 *  the write transaction: jobs racing on several slow-pool threads may
 *  pass the cap by at most one key per thread.  */
unsigned long quota_keys_check (keystore_t *ks, const char *tenant, uint32_t max_keys);

/*  The same for one more object (certificate, data object) under
 *  max_objects.  */
unsigned long quota_objects_check (keystore_t *ks, const char *tenant, uint32_t max_objects);

typedef struct {
    double rate;                /* tokens per second (> 0) */
    double burst;               /* bucket size in tokens (>= 1) */
    double tokens;              /* tokens now; below 0: owed by jobs already told to wait */
    int64_t last_ms;            /* when tokens was computed */
} quota_bucket_t;

/*  A full bucket of `rate` tokens per second (0 is taken as 1) and burst
 *  `burst` (0: a tenth of a second's worth, at least 1), as of now_ms.  */
void quota_bucket_init (quota_bucket_t *self, uint32_t rate, uint32_t burst, int64_t now_ms);

/*  Reserves n tokens at now_ms (monotonic milliseconds): returns 0 when
 *  they were there, else the milliseconds (>= 1) after which the caller
 *  may go, the tokens being owed meanwhile (later callers wait behind it:
 *  first come, first served).  A clock that goes back adds nothing.  */
int64_t quota_bucket_reserve (quota_bucket_t *self, int64_t now_ms, uint32_t n);

/*  Gives back n tokens reserved by a caller that did not go (refused
 *  instead), at most up to the burst.  */
void quota_bucket_refund (quota_bucket_t *self, uint32_t n);

#endif
