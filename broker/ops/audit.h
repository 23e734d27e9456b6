/*  audit.h — the broker's side of the audit log (keystore/keystore_audit.h;
 *  cryptoserver-audit(5); the keys are in cryptoserver-broker.conf(5)
 *  "audit").
 *
 *  The frontend's thread notes what its requests did when it answers them
 *  (broker_audit_job): logins, PIN changes, key and object changes, wraps
 *  and unwraps become one record each; key use (sign, decrypt, derive,
 *  symmetric, modexp) is counted in memory per (tenant, key, mechanism,
 *  client), with its failures, unless the tenant's policy asks for one
 *  record per use (tenants/NAME/audit = every-use).  Nothing there does
 *  I/O.  Every audit/interval-ms the frontend takes what was noted as a
 *  batch (broker_audit_take) and hands it to the slow pool, whose thread
 *  appends it to this broker's chain in the keystore, with a checkpoint
 *  signed by the audit key every audit/checkpoint-records records or
 *  audit/checkpoint-seconds seconds, and writes each record as a JSON line
 *  to syslog (audit/syslog-facility).  A batch that could not be stored
 *  goes back to the front of the queue (broker_audit_done) and is tried
 *  again at the next interval.
 *
 *  Used by the frontend's thread only, except broker_audit_run (a slow-pool
 *  thread, on a batch it owns).
 */
#ifndef BROKER_AUDIT_H_INCLUDED
#define BROKER_AUDIT_H_INCLUDED

#include <stdbool.h>
#include <p11-kit/pkcs11.h>
#include "broker_config.h"
#include "metrics.h"
#include "keystore.h"
#include "cryptoserver.pb-c.h"

typedef struct _broker_audit_t broker_audit_t;
typedef struct _broker_audit_batch_t broker_audit_batch_t;

/*  The audit of a broker with `config`: NULL with *off_p true when the
 *  config turns it off (audit/enabled = 0, or no audit/key: a deployment
 *  made before it; logged N:); NULL with *off_p false after an E: line
 *  (the key file unreadable, not 64 hex digits, or readable by others; a bad
 *  key).  metrics (borrowed, may be NULL) counts the chain's breaks: a
 *  change of this broker's chain by another writer, seen at an append (an
 *  E: line and cryptoserver_audit_chain_breaks_total).  Caller destroys.  */
broker_audit_t *broker_audit_new (const broker_config_t *config, metrics_t *metrics, bool *off_p);
void broker_audit_destroy (broker_audit_t **self_p);

/*  Notes one event record: action (e.g. "broker-start", "login"), the
 *  client's name and Z85 key, tenant, object (CKA_ID hex / label / ref;
 *  never key material or a PIN) and result; any string may be NULL.  */
void broker_audit_event (broker_audit_t *self, const char *client, const char *client_key,
                         const char *tenant, const char *action, const char *object,
                         const char *mechanism, CK_RV rv);

/*  Notes what job `job` of a client did, given its result: an event, a
 *  counted use, or nothing (hello, lists).  */
void broker_audit_job (broker_audit_t *self, const char *client, const char *client_key,
                       const char *tenant, const Cs__Job *job, const Cs__Result *result);

/*  The milliseconds between flushes (audit/interval-ms).  */
size_t broker_audit_interval_ms (const broker_audit_t *self);

/*  What was noted since the last take, as a batch of records (the use
 *  counts of the interval folded in), or NULL when there is nothing to
 *  store and no checkpoint is due, or a batch is out already (one at a
 *  time: a chain has one writer).  `final`: a checkpoint follows whatever
 *  the batch holds (the broker is stopping).  */
broker_audit_batch_t *broker_audit_take (broker_audit_t *self, bool final);

/*  In a slow-pool thread: appends the batch to the chain with ks, then
 *  writes its records to syslog.  */
void broker_audit_run (broker_audit_batch_t *batch, keystore_t *ks);

/*  Back in the frontend's thread: a batch that was stored is freed; one
 *  that was not (a keystore failure, or never run) goes back to the front
 *  of the queue (an E: line the first time in a row).  Takes ownership.  */
void broker_audit_done (broker_audit_t *self, broker_audit_batch_t *batch);

/*  For tests: the key-use counters held (one per (tenant, key, mechanism,
 *  client) used in this interval or the last), and record `index` of a
 *  batch as it will be appended (NULL past its last).  */
size_t broker_audit_counters (const broker_audit_t *self);
const char *broker_audit_batch_record (const broker_audit_batch_t *batch, size_t index);

#endif
