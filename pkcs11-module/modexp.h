/*  modexp.h — the vendor mechanisms of raw modular exponentiation
 *  (cryptoserver/pkcs11v.h, issue #12: the paper's RPCMODEXP ... RPCMULTI-
 *  MODEXPARRAY) as C_DigestInit / C_Digest: the parameter is decoded and
 *  deep-copied at init (PKCS#11 lets the caller free it after the call),
 *  the data is split into bases, and the jobs go to the broker as one
 *  request per at most CS_WIRE_MAX_JOBS items and S_MAX_REQUEST_BYTES of
 *  operands (an array's exponent and modulus, or key, travel once per
 *  request: proto ModexpJob).  Lengths are known from the parameter, so a
 *  length query is answered here.
 */
#ifndef CS_MODULE_MODEXP_H_INCLUDED
#define CS_MODULE_MODEXP_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "cs_p11.h"

typedef struct cs_modexp_op_s cs_modexp_op_t;

/*  True for CKM_CS_MODEXP ... CKM_CS_MULTI_MODEXP_ARRAY.  */
bool cs_modexp_mechanism (CK_MECHANISM_TYPE type);

/*  Decodes and copies the parameter of a vendor modexp mechanism.  Returns
 *  CKR_OK with *op_p (free with cs_modexp_op_free); CKR_MECHANISM_INVALID
 *  (not one of ours); CKR_MECHANISM_PARAM_INVALID: pParameter NULL or
 *  ulParameterLen not the size of the mechanism's struct, a NULL pointer
 *  with a non-zero length, a modulus (or prime, dP, dQ, qInv) that is empty,
 *  zero or over CS_MODEXP_MAX_BYTES, an exponent over CS_MODEXP_MAX_BYTES,
 *  a CRT modulus p*q over 8192 bits, MULTI's ulCount 0 or over
 *  CS_MODEXP_MAX_ITEMS or pItems NULL; CKR_HOST_MEMORY.  */
CK_RV cs_modexp_op_new (const CK_MECHANISM *mech, cs_modexp_op_t **op_p);

/*  Wipes the copied operands and frees; NULL-safe (a cs_op_free_fn).  */
void cs_modexp_op_free (void *op);

/*  The output length for data_len bytes of input: the modulus length k
 *  (single forms), data_len (arrays).  CKR_DATA_LEN_RANGE when the input
 *  does not fit the mechanism: a single base empty or over 8192 bytes, an
 *  array not a whole number 1..CS_MODEXP_MAX_ITEMS of k-byte bases, MULTI's
 *  data not exactly the sum of its moduli's lengths.  */
CK_RV cs_modexp_out_len (const cs_modexp_op_t *op, size_t data_len, size_t *out_len_p);

/*  Items in an input of data_len bytes (after cs_modexp_out_len said OK).  */
size_t cs_modexp_items (const cs_modexp_op_t *op, size_t data_len);

/*  Runs the operation on the broker; out holds at least the length
 *  cs_modexp_out_len gave.  Without the library mutex.  Returns CKR_OK or
 *  the first failing job's CK_RV (CKR_USER_NOT_LOGGED_IN,
 *  CKR_MECHANISM_INVALID when no board runs modexp,
 *  CKR_MECHANISM_PARAM_INVALID, CKR_DATA_LEN_RANGE, CKR_DEVICE_ERROR...).  */
CK_RV cs_modexp_run (const cs_modexp_op_t *op, const uint8_t *data, size_t len, uint8_t *out);

#endif
