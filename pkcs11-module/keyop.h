/*  keyop.h — starting an operation with a key: the one place for the checks
 *  that C_SignInit, C_VerifyInit, C_DecryptInit and C_EncryptInit share
 *  (PKCS#11 2.40 §5.9 to §5.12), and for naming the key inside a job.
 */
#ifndef CS_MODULE_KEYOP_H_INCLUDED
#define CS_MODULE_KEYOP_H_INCLUDED

#include "cs_p11.h"
#include "cs_wire.h"
#include "mechanism.h"
#include "object.h"
#include "session.h"

/*  Makes the state of an operation for mechanism `mech` with `key` (the
 *  constructor takes its own reference).  On CKR_OK *op_p is the state.  */
typedef CK_RV (cs_keyop_new_fn) (const CK_MECHANISM *mech, cs_key_t *key, CK_FLAGS want, void **op_p);

/*  C_*Init: checks the session, that no operation of `kind` is active
 *  (CKR_OPERATION_ACTIVE), a CKU_USER login for a private key object or a
 *  key the broker holds (cs_object_login_check_inlock: CKR_USER_NOT_LOGGED_IN;
 *  public session objects need none, PKCS#11 3.0 §4.4), the key object
 *  (cs_object_use_inlock: CKR_KEY_HANDLE_INVALID, CKR_KEY_FUNCTION_NOT_PERMITTED),
 *  the key's CKA_ALLOWED_MECHANISMS (cs_object_mech_allowed_inlock: CKR_MECHANISM_INVALID),
 *  then makes the state with new_fn and installs it with free_fn.  */
CK_RV cs_keyop_init (CK_SESSION_HANDLE handle, cs_op_kind_t kind, CK_FLAGS want, const CK_MECHANISM *mech,
                     CK_OBJECT_HANDLE key_handle, cs_keyop_new_fn *new_fn, cs_op_free_fn *free_fn);

/*  Names the key of a sign or decrypt job: a per-request key travels as
 *  key_pkcs8 (borrowed from the key, docs/DESIGN.md §1), a server-held one as
 *  key_id (its ref).  */
void cs_keyop_job_key (const cs_key_t *key, ProtobufCBinaryData *key_id, ProtobufCBinaryData *key_pkcs8);

/*  Fills the wire mechanism of a job from the raw mechanism `wire` and the
 *  checked parameters (PSS hash, MGF, salt; OAEP hash, MGF, label borrowed).  */
void cs_keyop_job_mechanism (CK_MECHANISM_TYPE wire, const cs_mech_params_t *params, Cs__Mechanism *mech);

/*  The module's local public-key encryption (encrypt.c, the C_Encrypt of an
 *  RSA public key) of `len` bytes of `data` with `key` (RSA, its modulus k
 *  bytes) under the checked table row `mech` (CKM_RSA_PKCS, CKM_RSA_X_509,
 *  CKM_RSA_PKCS_OAEP) and `params` (OAEP hash, MGF, label; borrowed).
 *  `out` holds at least k bytes; *out_len_p gets the ciphertext length.
 *  CKR_OK, CKR_DATA_LEN_RANGE (RFC 8017 §7.1.1, §7.2.1), CKR_DATA_INVALID
 *  (raw), CKR_FUNCTION_FAILED.  Without the mutex (the key is immutable).
 *  C_WrapKey (wrap.c) uses it.  */
CK_RV cs_keyop_public_encrypt (cs_key_t *key, const cs_mech_row_t *mech, const cs_mech_params_t *params,
                               const uint8_t *data, size_t len, uint8_t *out, CK_ULONG_PTR out_len_p);

#endif
