/*  objjobs.h — certificates and data objects on the broker (issue #10):
 *  PutObjectJob, ListObjectsJob, DestroyObjectJob (proto/cryptoserver.proto)
 *  against the tenant's rows of the keystore's objects table
 *  (keystore_object_*).  The frontend admits a job (objjobs_admit), runs
 *  it in a slow-pool thread (objjobs_run) and puts what it made into the
 *  job's result (objjobs_result).  Who may do what (docs/CONTRACTS.md
 *  "Certificates and data objects"): listing needs no login and then
 *  gives the public objects only; writing and destroying need a CKU_USER
 *  ticket (PKCS#11 2.40 §4.6: token objects are written in R/W user
 *  sessions; the module checks the session kind).  */
#ifndef OBJJOBS_H_INCLUDED
#define OBJJOBS_H_INCLUDED

#include <stdbool.h>
#include "keystore.h"

/*  What an object job made; owned by its holder (objjobs_out_free).  */
typedef struct {
    Cs__ObjectInfo *object;         /* PutObjectJob: the object as stored */
    Cs__ObjectInfo **listed;        /* ListObjectsJob: the rows shown to the client */
    size_t n_listed;
    Cs__ObjectList list;            /* the result's list; points into listed */
} objjobs_out_t;

/*  True when job is one of the object jobs.  */
bool objjobs_is_object_job (const Cs__Job *job);

/*  CKR_OK when a request with (user true) or without a valid CKU_USER
 *  ticket may run job, else CKR_USER_NOT_LOGGED_IN.  */
CK_RV objjobs_admit (const Cs__Job *job, bool user);

/*  Runs job for tenant on ks (a slow-pool thread) into *out (zeroed
 *  first).  Returns CKR_OK; CKR_OBJECT_HANDLE_INVALID for a ref the tenant
 *  has no object of (put with a ref, destroy); CKR_TEMPLATE_INCONSISTENT
 *  when a put would change an object's class; CKR_DEVICE_ERROR when the
 *  keystore fails or the row does not verify (logged there);
 *  CKR_HOST_MEMORY.  */
CK_RV objjobs_run (keystore_t *ks, const char *tenant, const Cs__Job *job, bool user, objjobs_out_t *out);

/*  Moves what a job made (from, then zeroed) into a slot's storage (to)
 *  and points result at it: rv, and for CKR_OK the object or the list.  */
void objjobs_result (Cs__Result *result, CK_RV rv, objjobs_out_t *to, objjobs_out_t *from);

/*  Frees what out owns; NULL-safe.  */
void objjobs_out_free (objjobs_out_t *out);

#endif
