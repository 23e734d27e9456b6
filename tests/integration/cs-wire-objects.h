/*  cs-wire-objects.h — the certificate and data-object jobs of
 *  cs-wire-client (PutObjectJob, ListObjectsJob, DestroyObjectJob), sent
 *  straight to the broker as a client that skips the module would
 *  (tests/integration/object-rules.sh, issue #19).  */
#ifndef CS_WIRE_OBJECTS_H_INCLUDED
#define CS_WIRE_OBJECTS_H_INCLUDED

#include <stdbool.h>
#include "proto/cryptoserver.pb-c.h"

/*  Sends job and waits for its reply (NULL on timeout; caller frees).  */
typedef Cs__Reply *cs_wire_call_fn (void *client, Cs__Job *job);

/*  True when argv [0] names an object command.  */
bool cs_wire_objects_kind (const char *kind);

/*  Runs one object command (argv after the options) and prints its
 *  result's CKR_ name:
 *    obj-new cert|data LABEL HEX [CKA_NAME=0|1 ...]   a new token object
 *        (a certificate: CKA_CERTIFICATE_TYPE CKC_X_509, CKA_VALUE the DER
 *        of HEX; data: CKA_VALUE HEX), CKA_PRIVATE FALSE, with the flags;
 *    obj-set LABEL CKA_NAME 0|1|HEX   the object labelled LABEL stored again
 *        whole with that one attribute changed (C_SetAttributeValue);
 *    obj-destroy LABEL                C_DestroyObject of it.
 *  Returns the exit status: 0 when the broker answered, 1 when no object
 *  has the label, 2 on usage or no reply.  */
int cs_wire_objects_run (void *client, cs_wire_call_fn *call, int argc, char **argv);

#endif
