/*  secret.h — secret keys and symmetric mechanisms (issue #10):
 *  C_GenerateKey (CKM_AES_KEY_GEN, CKM_DES3_KEY_GEN,
 *  CKM_GENERIC_SECRET_KEY_GEN), C_CreateObject of CKO_SECRET_KEY, and the
 *  table's secret-key rows (common/cs_mech.c: AES-ECB/CBC/CBC-PAD/GCM/CTR,
 *  AES key wrap as data, AES-CMAC, DES3-ECB/CBC/CBC-PAD, SHA-1/2 HMAC and
 *  the _GENERAL MACs) as one SymJob each (proto/cryptoserver.proto).
 *
 *  A session secret key's value stays in the module's locked memory
 *  (cs_secmem.h) and travels in each job, as per-request private keys do
 *  (docs/DESIGN.md §1); a token secret key (CKA_TOKEN TRUE) is held by the
 *  broker and named by its ref in each job (secret_token.h).  Multi-part
 *  encryption and decryption with a block mode stream in parts of whole
 *  blocks (secret_stream.c); other multi-part calls (GCM, MACs) are buffered
 *  here (up to CS_MECH_SYM_MAX_DATA bytes, else CKR_DATA_LEN_RANGE) and the
 *  final call sends one job: jobs are stateless.  A private key (CKA_PRIVATE TRUE,
 *  the default) or a token key needs a CKU_USER login
 *  (CKR_USER_NOT_LOGGED_IN); a public session key (CKA_TOKEN and
 *  CKA_PRIVATE FALSE) works in a public session, as the broker runs jobs
 *  that carry their key without a ticket (docs/CONTRACTS.md "Login tickets").
 */
#ifndef CS_MODULE_SECRET_H_INCLUDED
#define CS_MODULE_SECRET_H_INCLUDED

#include <stdbool.h>
#include <stdint.h>
#include "cs_p11.h"
#include "key.h"
#include "session.h"

/*  True when `mech` is a secret-key operation mechanism of the table
 *  (cs_mech_secret_key_type, run on a board): C_*Init hands it to
 *  cs_secret_init.  */
bool cs_secret_mech (const CK_MECHANISM *mech);

/*  C_EncryptInit, C_DecryptInit, C_SignInit, C_VerifyInit with a secret-key
 *  mechanism (kind CS_OP_ENCRYPT ... with want CKF_ENCRYPT ...).  Errors:
 *  those of cs_keyop_init, CKR_USER_NOT_LOGGED_IN, CKR_KEY_TYPE_INCONSISTENT,
 *  CKR_KEY_SIZE_RANGE, CKR_MECHANISM_PARAM_INVALID (PKCS#11 2.40 curr.
 *  mech. §2.10: a CBC IV of one block (AES 16, DES3 8 bytes),
 *  CK_GCM_PARAMS with an IV of 1..256 bytes and a tag of 96..128 bits,
 *  CK_AES_CTR_PARAMS with ulCounterBits 1..128, CK_MAC_GENERAL_PARAMS of
 *  1..the full MAC length, a key-wrap IV of 0 or 8 (RFC 5649: 4) bytes).  */
CK_RV cs_secret_init (CK_SESSION_HANDLE handle, cs_op_kind_t kind, CK_FLAGS want, const CK_MECHANISM *mech,
                      CK_OBJECT_HANDLE key);

/*  True when the session's active operation of `kind` is a secret-key one
 *  (the entry points then call the functions below).  */
bool cs_secret_active (CK_SESSION_HANDLE handle, cs_op_kind_t kind);

/*  C_SignUpdate, C_VerifyUpdate (and GCM's Updates): buffers
 *  `data`; *out_len_p (when out_len_p is not NULL) is set to 0: the output
 *  comes with the final call.  */
CK_RV cs_secret_update (CK_SESSION_HANDLE handle, cs_op_kind_t kind, const CK_BYTE *data, CK_ULONG len,
                        CK_ULONG_PTR out_len_p);

/*  C_EncryptUpdate, C_DecryptUpdate (secret_stream.c): with ECB, CBC,
 *  CBC-PAD or CTR the whole blocks go out now, as partial jobs, and their
 *  output is returned (PKCS#11 two-call convention: out NULL answers the
 *  size and uses nothing; too small a buffer is CKR_BUFFER_TOO_SMALL with
 *  the size, nothing used); other mechanisms (GCM) buffer as
 *  cs_secret_update does.  Errors: those of cs_secret_update,
 *  CKR_DATA_LEN_RANGE (an AES-CTR counter leaving ulCounterBits), a job's.  */
CK_RV cs_secret_stream_update (CK_SESSION_HANDLE handle, cs_op_kind_t kind, const CK_BYTE *data, CK_ULONG len,
                               CK_BYTE_PTR out, CK_ULONG_PTR out_len_p);

/*  C_EncryptUpdate / C_DecryptUpdate (kind CS_OP_ENCRYPT / CS_OP_DECRYPT):
 *  cs_secret_stream_update on the session's secret-key operation;
 *  CKR_ARGUMENTS_BAD without out_len_p.  C_EncryptFinal / C_DecryptFinal:
 *  cs_secret_finish (final) of it.  Without a secret-key operation of
 *  `kind` both answer CKR_FUNCTION_NOT_SUPPORTED when another one (RSA:
 *  single-part only, curr. mech. §2.1) is active, CKR_OPERATION_NOT_INITIALIZED
 *  when none is; also CKR_CRYPTOKI_NOT_INITIALIZED, CKR_SESSION_HANDLE_INVALID.  */
CK_RV cs_secret_multipart_update (CK_SESSION_HANDLE handle, cs_op_kind_t kind, const CK_BYTE *data, CK_ULONG len,
                                  CK_BYTE_PTR out, CK_ULONG_PTR out_len_p);
CK_RV cs_secret_multipart_final (CK_SESSION_HANDLE handle, cs_op_kind_t kind, CK_BYTE_PTR out,
                                 CK_ULONG_PTR out_len_p);

/*  C_Encrypt, C_Decrypt, C_Sign (final = false: `data` is the whole input)
 *  and C_EncryptFinal, C_DecryptFinal, C_SignFinal (final = true: the
 *  buffered input).  PKCS#11 length rules: out NULL answers the size
 *  (decryption: an upper bound); a result that does not fit is kept for
 *  the retry (CKR_BUFFER_TOO_SMALL).  */
CK_RV cs_secret_finish (CK_SESSION_HANDLE handle, cs_op_kind_t kind, bool final, const CK_BYTE *data,
                        CK_ULONG len, CK_BYTE_PTR out, CK_ULONG_PTR out_len_p);

/*  C_Verify (final = false) and C_VerifyFinal: the MAC computed by the
 *  broker (cut to the CK_MAC_GENERAL_PARAMS length) compared with `sig` in
 *  constant time (CRYPTO_memcmp).  CKR_SIGNATURE_LEN_RANGE (sig_len is
 *  not the MAC length), CKR_SIGNATURE_INVALID.  */
CK_RV cs_secret_verify (CK_SESSION_HANDLE handle, bool final, const CK_BYTE *data, CK_ULONG len,
                        const CK_BYTE *sig, CK_ULONG sig_len);

/*  C_WrapKey (wrap true) and C_UnwrapKey (false) with an AES key-wrap row
 *  (CKM_AES_KEY_WRAP, RFC 3394; CKM_AES_KEY_WRAP_PAD, RFC 5649; parameter:
 *  none or the IV, as for C_EncryptInit): one SymJob with key_wrap set,
 *  encrypting or decrypting `data` (len bytes) with `key` (a session key's
 *  value or a token key's ref).  The caller checked the login and the
 *  attributes (wrap.c).  On CKR_OK *out_p (locked memory of *cap_p bytes,
 *  caller frees with cs_secmem_free) holds *out_len_p bytes.  Errors:
 *  CKR_MECHANISM_INVALID (not a key-wrap row), CKR_MECHANISM_PARAM_INVALID,
 *  CKR_KEY_TYPE_INCONSISTENT, CKR_KEY_SIZE_RANGE (wrap: a value the RFC's
 *  input rule refuses), CKR_WRAPPED_KEY_LEN_RANGE (unwrap: a length the
 *  RFC's rule refuses), CKR_WRAPPED_KEY_INVALID (the integrity check
 *  failed), the job's (CKR_KEY_FUNCTION_NOT_PERMITTED from the broker for a
 *  token key, CKR_DEVICE_ERROR ...), CKR_HOST_MEMORY.  Without the mutex.  */
CK_RV cs_secret_wrap_job (cs_key_t *key, const CK_MECHANISM *mech, bool wrap, const uint8_t *data, size_t len,
                          uint8_t **out_p, size_t *out_len_p, size_t *cap_p);

/*  C_CreateObject of a CKO_SECRET_KEY (CKK_AES with CKA_VALUE of 16, 24 or
 *  32 bytes; CKK_DES3 of 24 bytes, parity bits not checked (DES ignores
 *  them); CKK_GENERIC_SECRET of 16..256 bytes: cs_mech_secret_len_ok): a
 *  session object, or with CKA_TOKEN TRUE a token object the broker keeps
 *  (cs_secret_token_import; AES and generic secrets only).
 *  CKR_TEMPLATE_INCOMPLETE, CKR_ATTRIBUTE_VALUE_INVALID (bad size or type),
 *  CKR_HOST_MEMORY.  */
CK_RV cs_secret_create (CK_SESSION_HANDLE handle, const CK_ATTRIBUTE *tmpl, CK_ULONG count,
                        CK_OBJECT_HANDLE_PTR object_p);

#endif
