/*  symjobs.h — secret-key jobs (issue #10; proto/cryptoserver.proto SymJob)
 *  as a work item sees them: one stateless job with the key's value, the
 *  parameters and the whole input, run by a board whose driver has
 *  CS_DRV_SYMMETRIC and lists the mechanism (board_runs_sym).
 */
#ifndef SYMJOBS_H_INCLUDED
#define SYMJOBS_H_INCLUDED

#include "cryptoserver.pb-c.h"
#include "cs_driver.h"
#include "cs_mech.h"

/*  Checks a key value of len bytes for the mechanism of row (the table's
 *  range, in bytes; AES: a multiple of 8) and, when op is not NULL, makes
 *  it op's key (borrowed).  CKR_OK or CKR_KEY_SIZE_RANGE.  */
CK_RV symjob_key (const cs_mech_row_t *row, const uint8_t *value, size_t len, cs_sym_t *op);

/*  Checks a SymJob and fills *op with pointers into it (borrowed: valid
 *  while the request lives).  Returns CKR_OK; CKR_MECHANISM_INVALID (a
 *  mechanism that is not a secret-key mechanism of the table, a _GENERAL
 *  MAC row (the module sends its full MAC row and cuts the MAC), or an
 *  operation it does not do); CKR_KEY_SIZE_RANGE (a key outside the
 *  table's range, bytes); CKR_MECHANISM_PARAM_INVALID (IV, AAD or tag bits
 *  for the mechanism, PKCS#11 2.40 curr. mech. §2.10); CKR_DATA_LEN_RANGE
 *  (more than CS_MECH_SYM_MAX_DATA bytes; a partial job: not a non-zero
 *  multiple of the block; decryption: CKR_ENCRYPTED_DATA_LEN_RANGE), and
 *  CKR_MECHANISM_INVALID for a partial job of a mode that is not ECB, CBC,
 *  CBC-PAD or CTR.  Rules: common/cs_mech.h.  A
 *  job that names a token key (key_id) leaves op->key NULL: the router
 *  sets it with symjob_key once it has read the key.  */
CK_RV symjob_prepare (const Cs__SymJob *job, cs_sym_t *op);

/*  Wipes the key values and data of the request's SymJobs in place, before
 *  protobuf-c frees it.  */
void symjob_wipe (Cs__Request *req);

#endif
