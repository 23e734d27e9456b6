/*  sign.h — signature operations: C_SignInit/C_Sign/C_SignUpdate/C_SignFinal
 *  run one SignJob per signature; the operation state (a running hash, or a
 *  buffer for raw mechanisms) stays in the session.  The same state serves
 *  the local C_Verify* (verify.c), hence the shared cs_sigop_t below.
 */
#ifndef CS_MODULE_SIGN_H_INCLUDED
#define CS_MODULE_SIGN_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <openssl/evp.h>
#include "cs_p11.h"
#include "mechanism.h"
#include "cs_wire.h"
#include "object.h"
#include "session.h"

#define CS_SIGOP_MAX_MESSAGE CS_WIRE_MAX_DATA  /* bytes of the message that gets signed
                                                (CKM_EDDSA signs the whole message) */

typedef struct {
    cs_key_t *key;              /* reference */
    const cs_mech_row_t *mech;      /* application mechanism */
    cs_mech_params_t params;    /* PSS parameters */
    EVP_MD_CTX *md_ctx;         /* hash-and-sign mechanisms */
    uint8_t *buf;               /* raw mechanisms, multi-part input */
    size_t buf_len;
    bool updated;               /* an Update call happened */
} cs_sigop_t;

/*  Starts a signature state for application mechanism `mech` (validated
 *  here: CKR_MECHANISM_INVALID when it cannot sign (`want` = CKF_SIGN) or
 *  verify (CKF_VERIFY), CKR_KEY_TYPE_INCONSISTENT, CKR_MECHANISM_PARAM_INVALID)
 *  with `key` (a new reference is taken).  On CKR_OK *op_p is the new state
 *  (free with cs_sigop_free); else CKR_HOST_MEMORY or the check's code.  */
CK_RV cs_sigop_new (const CK_MECHANISM *mech, cs_key_t *key, CK_FLAGS want, cs_sigop_t **op_p);

/*  cs_sigop_new as a cs_keyop_new_fn (keyop.h).  */
CK_RV cs_sigop_create (const CK_MECHANISM *mech, cs_key_t *key, CK_FLAGS want, void **op_p);

/*  C_SignUpdate / C_VerifyUpdate (kind CS_OP_SIGN / CS_OP_VERIFY): feeds one
 *  part to the session's signature state; an error ends the operation
 *  (PKCS#11 2.40 §5.11, §5.12).  */
CK_RV cs_sigop_session_update (CK_SESSION_HANDLE handle, cs_op_kind_t kind, const uint8_t *data, size_t len);

/*  Feeds one part (multi-part).  CKR_DATA_LEN_RANGE when raw input would
 *  exceed CS_WIRE_MAX_DATA, CKR_HOST_MEMORY, CKR_FUNCTION_FAILED.  */
CK_RV cs_sigop_update (cs_sigop_t *self, const uint8_t *data, size_t len);

/*  Produces the message to sign or verify: the DigestInfo (RSA PKCS#1 v1.5
 *  with hash), the digest (PSS, ECDSA with hash), or the application's raw
 *  bytes: `data` for single-part (final false), the buffered parts when
 *  final.  out holds CS_SIGOP_MAX_MESSAGE bytes.  CKR_DATA_LEN_RANGE when raw
 *  data does not fit the mechanism (RSA PKCS#1: more than k - 11 bytes; RSA
 *  X.509: more than k bytes, else left-padded with zeros to k bytes; raw
 *  PSS: not hLen bytes; raw ECDSA: 0 or more than 64 bytes; EdDSA: more
 *  than CS_WIRE_MAX_DATA bytes).  */
CK_RV cs_sigop_message (cs_sigop_t *self, const uint8_t *data, size_t len, bool final,
                        uint8_t *out, size_t *out_len);

/*  The end of a signature (C_Sign, C_SignFinal when final, C_SignRecover
 *  with kind CS_OP_SIGN_RECOVER): takes the session's operation of `kind`,
 *  prepares the message (cs_sigop_message) and runs one SignJob without
 *  the mutex, writing *sig_len_p bytes to sig.  NULL sig or a short buffer:
 *  the length (k for RSA) in *sig_len_p, CKR_OK or CKR_BUFFER_TOO_SMALL,
 *  and the operation stays; any other outcome ends it (PKCS#11 2.40 §5.2).
 *  Errors: those of cs_session_op_get_inlock and cs_sigop_message,
 *  CKR_OPERATION_ACTIVE (single-part after an update), the job's.  */
CK_RV cs_sigop_sign_finish (CK_SESSION_HANDLE handle, cs_op_kind_t kind, const uint8_t *data, size_t len,
                            bool final, CK_BYTE_PTR sig, CK_ULONG_PTR sig_len_p);

/*  Frees a state (cs_op_free_fn).  NULL-safe.  */
void cs_sigop_free (void *op);

/*  Bytes of the signature of `op` (its mechanism's output rule, cs_mech.h;
 *  CS_MECH_OUT_KEY: the key's, cs_key_signature_len).  */
size_t cs_sigop_sig_len (const cs_sigop_t *op);

#endif
