/*  pq_work.h — a worker's post-quantum calls on its board (issue #23): an
 *  ML-DSA verification job, the check of an ML-DSA signature before it is
 *  released, and the public key of freshly generated ML-DSA or ML-KEM
 *  material.  The board is not trusted (docs/DESIGN.md §7): a signature is
 *  checked against the public key the keystore row holds, never against one
 *  the signing board reports, when the row is known.
 *
 *  May call: board.h (the driver's functions), scheduler.h (the work item's
 *  type only).  Called by worker.c only.
 */
#ifndef PQ_WORK_H_INCLUDED
#define PQ_WORK_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include "board.h"
#include "scheduler.h"

/*  A worker's own copies of an item's post-quantum inputs (the reactor may
 *  abandon the item while the call runs, health.h).  */
typedef struct {
    unsigned char *buf;             /* one allocation: context, pub, sig */
    const unsigned char *context;   /* ML-DSA context, context_len bytes of item->mech; NULL when none */
    const unsigned char *pub;       /* the public key (ML-DSA check, verify, encapsulate), or NULL */
    size_t pub_len;
    CK_ULONG parameter_set;         /* CKP_* of pub (or, after a generation, of the new key) */
    const unsigned char *sig;       /* WORK_VERIFY: the signature, or NULL */
    size_t sig_len;
} pq_work_inputs_t;

/*  Copies item->mech.context, item->pub and item->sig into *copy (zeroed
 *  first).  Returns 0, or -1 when out of memory.  */
int pq_work_inputs_copy (pq_work_inputs_t *copy, const work_item_t *item);

/*  Frees the copies and zeroes *copy; NULL-safe.  */
void pq_work_inputs_clear (pq_work_inputs_t *copy);

/*  Runs a WORK_VERIFY (rv only), WORK_ENCAPSULATE or WORK_DECAPSULATE call
 *  (pq_work_verify, pq_work_encapsulate, pq_work_decapsulate below) with
 *  `key` (decapsulation), mech (its context from `in` copies) and the
 *  input `in` (the message or the ciphertext).  Returns the CK_RV of the
 *  call; CKR_FUNCTION_NOT_SUPPORTED for another kind.  */
CK_RV pq_work_run (board_t *board, cs_drv_session_t *session, work_kind_t kind, const cs_drv_key_t *key,
                   const cs_drv_mech_t *mech, const pq_work_inputs_t *inputs, const unsigned char *in,
                   size_t in_len, unsigned char **out_p, size_t *out_len_p, size_t *cap_p);

/*  True for a mechanism whose sign result pq_work_sign_check checks:
 *  CKM_ML_DSA.  */
bool pq_work_signs (CK_MECHANISM_TYPE type);

/*  CS_DRV_VERIFY of `board` (FIPS 204 Alg. 3, pure ML-DSA with mech's
 *  context): signature sig (sig_len bytes) over in (in_len bytes) with the
 *  public key pub (pub_len bytes, FIPS 204 pk) of `parameter_set`.  Returns
 *  the driver's CK_RV (CKR_OK valid, CKR_SIGNATURE_INVALID,
 *  CKR_SIGNATURE_LEN_RANGE, CKR_PUBLIC_KEY_INVALID, CKR_DOMAIN_PARAMS_INVALID
 *  ...), or CKR_FUNCTION_NOT_SUPPORTED when the driver has no verify.  */
CK_RV pq_work_verify (board_t *board, cs_drv_session_t *session, const cs_drv_mech_t *mech,
                      CK_ULONG parameter_set, const unsigned char *pub, size_t pub_len,
                      const unsigned char *in, size_t in_len, const unsigned char *sig, size_t sig_len);

/*  Checks an ML-DSA signature `sig` by `key` before release: with `pub` (the
 *  row's CKA_VALUE, pub_len bytes, of parameter_set) when given, else with
 *  the public key the board derives from the key material (a per-request
 *  key: nobody else knows it).  True when the signature verifies; false
 *  when it does not or cannot be checked (the result must not leave).  */
bool pq_work_sign_check (board_t *board, cs_drv_session_t *session, const cs_drv_key_t *key,
                         const cs_drv_mech_t *mech, const unsigned char *pub, size_t pub_len,
                         CK_ULONG parameter_set, const unsigned char *in, size_t in_len,
                         const unsigned char *sig, size_t sig_len);

/*  CS_DRV_ENCAPSULATE of `board` (FIPS 203 Alg. 20) to pub (pub_len bytes,
 *  an ML-KEM ek of parameter_set): the ciphertext and then the shared
 *  secret into a malloc'd *out_p (*out_len_p bytes, *cap_p allocated;
 *  caller wipes and frees).  Returns the driver's CK_RV (CKR_PUBLIC_KEY_INVALID,
 *  CKR_DOMAIN_PARAMS_INVALID ...), CKR_HOST_MEMORY, or
 *  CKR_FUNCTION_NOT_SUPPORTED.  */
CK_RV pq_work_encapsulate (board_t *board, cs_drv_session_t *session, const cs_drv_mech_t *mech,
                           CK_ULONG parameter_set, const unsigned char *pub, size_t pub_len,
                           unsigned char **out_p, size_t *out_len_p, size_t *cap_p);

/*  CS_DRV_DECAPSULATE of `board` (FIPS 203 Alg. 21) of ct (ct_len bytes)
 *  with `key`: the 32-byte secret into a malloc'd *out_p as above.  A
 *  ciphertext that was changed gives the implicit-rejection secret: no
 *  check here can tell (FIPS 203 §6.3), so the result is not verified.  */
CK_RV pq_work_decapsulate (board_t *board, cs_drv_session_t *session, const cs_drv_key_t *key,
                           const cs_drv_mech_t *mech, const unsigned char *ct, size_t ct_len,
                           unsigned char **out_p, size_t *out_len_p, size_t *cap_p);

/*  The public key of generated material (PKCS#8 pkcs8, len bytes) of an
 *  ML-DSA or ML-KEM key pair (CS_DRV_PUBLIC_KEY): malloc'd into *pub_p
 *  (*pub_len_p bytes; caller frees), its CKP_* into *parameter_set_p.
 *  Returns CKR_OK, the driver's CK_RV, CKR_HOST_MEMORY, or
 *  CKR_FUNCTION_NOT_SUPPORTED when the driver has no public-key function.  */
CK_RV pq_work_public (board_t *board, cs_drv_session_t *session, const unsigned char *pkcs8, size_t len,
                      unsigned char **pub_p, size_t *pub_len_p, CK_ULONG *parameter_set_p);

#endif
