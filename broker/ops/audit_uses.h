/*  audit_uses.h — the audit log's key-use counters: one per (tenant, key,
 *  mechanism, client) that used a key in the current interval, counted on
 *  the reactor for every job, taken as "use" records at the interval's end
 *  (cryptoserver-audit(5) "Key use"; audit.c makes the records).
 */
#ifndef AUDIT_USES_H_INCLUDED
#define AUDIT_USES_H_INCLUDED

#include <stdint.h>
#include <czmq.h>
#include <p11-kit/pkcs11.h>

/*  The key use counter of one (tenant, key, mechanism, client): found by
 *  its fields (audit_uses_new's hasher and comparator) with no string formatted and nothing
 *  allocated, so a job's use costs a hash of its names.  A counter outlives
 *  the take that turned its count into a record; one left at zero for a
 *  whole interval is freed at the next take, so steady traffic allocates
 *  nothing and idle pairs do not pile up.  */
typedef struct {
    char *tenant, *key, *mechanism, *client, *client_key;
    char *order;                    /* "tenant\x1fkey\x1fmech\x1fclient\x1fclient_key": the records' order */
    uint64_t count, failures;
    CK_RV last_failure;
} audit_use_t;

/*  A new, empty table of counters (a zhashx keyed by the counters
 *  themselves, which it owns), or NULL when out of memory.  The caller
 *  destroys it with zhashx_destroy.  */
zhashx_t *audit_uses_new (void);

/*  Counts one use of key (a record's object name) with mechanism by client
 *  (its name and its CURVE key, Z85) of tenant, and a failure when rv is not
 *  CKR_OK.  NULL tenant, client or client_key count as "".  Allocates only
 *  the first use of a (tenant, key, mechanism, client); out of memory, the
 *  use goes uncounted.  */
void audit_uses_count (zhashx_t *uses, const char *tenant, const char *key, const char *mechanism,
                       const char *client, const char *client_key, CK_RV rv);

/*  Called by audit_uses_take for each counter used in the interval, in the
 *  order of its names; arg is take's.  */
typedef void (audit_use_record_fn) (const audit_use_t *use, void *arg);

/*  Ends an interval: calls record for every counter with a count, in the
 *  order of their names (tenant, key, mechanism, client, client key; a
 *  stable order for the chain), sets those back to zero, and frees the
 *  counters that were at zero for the whole interval.  Out of memory,
 *  nothing is taken: the counts go on into the next interval.  */
void audit_uses_take (zhashx_t *uses, audit_use_record_fn *record, void *arg);

#endif
