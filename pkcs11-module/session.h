/*  session.h — the session table and per-session operations.
 *
 *  A session holds at most one active operation of each kind (find, sign,
 *  verify, decrypt, encrypt, digest, sign and verify with recovery);
 *  PKCS#11 2.40 §5.6, §5.7.  The functions named *_inlock run under the
 *  library mutex (guard.h); the others are entry points, which take it.
 *  Session handles are never reused within the life of the process.
 */
#ifndef CS_MODULE_SESSION_H_INCLUDED
#define CS_MODULE_SESSION_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "cs_p11_3.h"
#include "guard.h"

typedef enum {
    CS_OP_FIND, CS_OP_SIGN, CS_OP_VERIFY, CS_OP_DECRYPT, CS_OP_ENCRYPT, CS_OP_DIGEST,
    CS_OP_SIGN_RECOVER, CS_OP_VERIFY_RECOVER,
    CS_OP_KINDS
} cs_op_kind_t;

/*  Frees one operation object (its kind's own destructor).  */
typedef void (cs_op_free_fn) (void *op);

typedef struct _cs_session_t cs_session_t;

/*  What an operation on a key with CKA_ALWAYS_AUTHENTICATE needs (PKCS#11
 *  2.40 §4.9, §5.6): a C_Login (CKU_CONTEXT_SPECIFIC) for it, whose ticket
 *  (docs/CONTRACTS.md "Context-specific login") the job carries.  */
#define CS_CONTEXT_REF_MAX 64           /* bytes of a key's job id */
#define CS_CONTEXT_TICKET_MAX 64        /* bytes of a context ticket */
typedef struct {
    bool needed;                        /* the operation's key has CKA_ALWAYS_AUTHENTICATE */
    uint8_t ref [CS_CONTEXT_REF_MAX];   /* its job id (cs_key_job_id) */
    size_t ref_len;
    uint8_t ticket [CS_CONTEXT_TICKET_MAX];     /* the context login's, once given */
    size_t ticket_len;
} cs_session_context_t;

/*  Under the mutex, for entry points (which call cs_guard_check before
 *  cs_lock): checks C_Initialize again and looks up `handle`.  CKR_OK with
 *  *session_p set (borrowed, valid while the mutex is held),
 *  CKR_CRYPTOKI_NOT_INITIALIZED or CKR_SESSION_HANDLE_INVALID.  */
CK_RV cs_session_get_inlock (CK_SESSION_HANDLE handle, cs_session_t **session_p);

/*  For entry points that only need `handle` to be an open session (the
 *  session's state is not used): cs_guard_check, then the lookup under the
 *  mutex, taken and released here.  CKR_OK, CKR_CRYPTOKI_NOT_INITIALIZED
 *  or CKR_SESSION_HANDLE_INVALID (PKCS#11 2.40 §5.1).  Call it WITHOUT the
 *  mutex.  */
CK_RV cs_session_check (CK_SESSION_HANDLE handle);

/*  Looks up an open session (under the mutex), or NULL.  */
cs_session_t *cs_session_lookup_inlock (CK_SESSION_HANDLE handle);

/*  CKF_RW_SESSION | CKF_SERIAL_SESSION | CKF_ASYNC_SESSION as opened.  */
CK_FLAGS cs_session_flags_inlock (const cs_session_t *self);

/*  The active operation of `kind`, or NULL.  The session keeps ownership.  */
void *cs_session_op_inlock (cs_session_t *self, cs_op_kind_t kind);

/*  The destructor of the active operation of `kind` (which tells its
 *  family: secret.h), or NULL when none is active.  */
cs_op_free_fn *cs_session_op_free_fn_inlock (cs_session_t *self, cs_op_kind_t kind);

/*  Installs `op` (ownership moves to the session, freed with free_fn) as the
 *  active operation of `kind`.  Returns CKR_OPERATION_ACTIVE, leaving `op`
 *  with the caller, when one is already active.  */
CK_RV cs_session_op_start_inlock (cs_session_t *self, cs_op_kind_t kind, void *op, cs_op_free_fn *free_fn);

/*  Detaches the active operation of `kind` and returns it (caller owns it;
 *  free it with the kind's destructor or install it again), or NULL.  Used
 *  around network I/O, which happens without the mutex.  */
void *cs_session_op_take_inlock (cs_session_t *self, cs_op_kind_t kind);

/*  Ends (frees) the active operation of `kind`, if any.  */
void cs_session_op_end_inlock (cs_session_t *self, cs_op_kind_t kind);

/*  Under the mutex, the preamble of a single-part or final call (C_Sign,
 *  C_Decrypt, ...): finds the session and its operation of `kind`.  When
 *  args_ok is false the operation is ended, as any error other than
 *  CKR_BUFFER_TOO_SMALL ends it (PKCS#11 2.40 §5.2), and CKR_ARGUMENTS_BAD
 *  is returned.  On CKR_OK *session_p and *op_p are set (borrowed, valid
 *  while the mutex is held).  Errors: those of cs_session_get_inlock,
 *  CKR_OPERATION_NOT_INITIALIZED, CKR_ARGUMENTS_BAD.  The caller releases
 *  the mutex in any case.  */
CK_RV cs_session_op_get_inlock (CK_SESSION_HANDLE handle, cs_op_kind_t kind, bool args_ok,
                              cs_session_t **session_p, void **op_p);

/*  The prologue of an entry point on a session (guard.h CS_BEGIN_CALL):
 *  CS_BEGIN_SESSION_CALL (rv, handle, &session) checks C_Initialize, takes
 *  the mutex and looks the session up (cs_session_get_inlock);
 *  CS_BEGIN_OP_CALL (rv, handle, kind, args_ok, &session, &op) finds its
 *  operation of `kind` as well (cs_session_op_get_inlock, `op` a void **).
 *  On an error they release the mutex and return it from the calling
 *  function; on CKR_OK `rv` is CKR_OK and the caller holds the mutex until
 *  its CS_END_CALL ().  */
#define CS_BEGIN_SESSION_CALL(rv, handle, session_p) \
    do { \
        CS_BEGIN_CALL (rv); \
        if (((rv) = cs_session_get_inlock ((handle), (session_p))) != CKR_OK) { \
            CS_END_CALL (); \
            return (rv); \
        } \
    } while (0)
#define CS_BEGIN_OP_CALL(rv, handle, kind, args_ok, session_p, op_p) \
    do { \
        CS_BEGIN_CALL (rv); \
        if (((rv) = cs_session_op_get_inlock ((handle), (kind), (args_ok), (session_p), (op_p))) != CKR_OK) { \
            CS_END_CALL (); \
            return (rv); \
        } \
    } while (0)

/*  PKCS#11 3.2 asynchronous sessions (async.h): the session's table of
 *  calls in flight, or NULL.  _set gives the session `table` (it frees it
 *  with free_fn when it closes).  _busy marks the operation of `kind` as
 *  having a call in flight (C_Sign, C_Decrypt returned CKR_PENDING): until
 *  it is cleared, starting one (cs_session_op_start_inlock) or finishing
 *  one (cs_session_op_get_inlock) answers CKR_OPERATION_ACTIVE.  */
void *cs_session_async_inlock (cs_session_t *self);
void cs_session_async_set_inlock (cs_session_t *self, void *table, cs_op_free_fn *free_fn);
void cs_session_async_busy_inlock (cs_session_t *self, cs_op_kind_t kind, bool busy);

/*  Number of open sessions; with CKF_RW_SESSION only the read-write ones.  */
size_t cs_session_count_inlock (CK_FLAGS flags);

/*  PKCS#11 3.0 §5.6 C_SessionCancel (the 3.0 list runs it in the call
 *  guard): ends the session's operations named by `flags`.  */
CK_RV cs_session_cancel (CK_SESSION_HANDLE handle, CK_FLAGS flags);

/*  PKCS#11 3.2 signature-first verification (verify.c): the session
 *  keeps the signature given to C_VerifySignatureInit until the operation
 *  ends.  _put stores a copy of `len` bytes of `sig` (NULL forgets the one
 *  stored: C_VerifyInit, C_SessionCancel with CKF_VERIFY and C_CloseSession
 *  forget it too).  _take hands it over (*sig_p, *len_p: the caller frees
 *  it with free()) and forgets it; with sig_p NULL it only says whether one
 *  is stored.  Entry-point helpers (they take the mutex).  Errors:
 *  CKR_CRYPTOKI_NOT_INITIALIZED, CKR_SESSION_HANDLE_INVALID, CKR_HOST_MEMORY
 *  (_put), CKR_OPERATION_NOT_INITIALIZED (_take: none stored).  */
CK_RV cs_session_verify_sig_put (CK_SESSION_HANDLE handle, const uint8_t *sig, size_t len);
CK_RV cs_session_verify_sig_take (CK_SESSION_HANDLE handle, uint8_t **sig_p, size_t *len_p);

/*  PKCS#11 3.2 C_GetSessionValidationFlags: CKR_ARGUMENTS_BAD unless flags_p
 *  is set and type is CKS_LAST_VALIDATION_OK; *flags_p = 0 (no validation
 *  objects).  Also CKR_CRYPTOKI_NOT_INITIALIZED, CKR_SESSION_HANDLE_INVALID.  */
CK_RV C_GetSessionValidationFlags (CK_SESSION_HANDLE handle, CK_SESSION_VALIDATION_FLAGS_TYPE type,
                                   CK_FLAGS_PTR flags_p);

/*  Context-specific login, under the mutex (token.c C_Login, keyop.c, the
 *  sign and decrypt paths).  _start: a new operation of `kind` whose key
 *  needs it (ref, ref_len bytes: its job id) or not (ref NULL); forgets an
 *  earlier ticket.  _find: the first active sign, decrypt or sign-recover
 *  operation that needs it (*kind_p, and a copy of its state);
 *  CKR_OPERATION_NOT_INITIALIZED when none does.  _put: keeps the ticket
 *  (len bytes) of the login made for `asked`, unless the operation changed
 *  meanwhile.  _take: for the job that uses the key: CKR_OK with *len_p 0
 *  when no login is needed, the ticket (copied to `ticket`, which holds
 *  CS_CONTEXT_TICKET_MAX bytes, then forgotten: one use) when one was given,
 *  CKR_USER_NOT_LOGGED_IN otherwise.  */
void cs_session_context_start_inlock (cs_session_t *self, cs_op_kind_t kind, const uint8_t *ref, size_t ref_len);
CK_RV cs_session_context_find_inlock (cs_session_t *self, cs_op_kind_t *kind_p, cs_session_context_t *copy);
void cs_session_context_put_inlock (cs_session_t *self, cs_op_kind_t kind, const cs_session_context_t *asked,
                                    const uint8_t *ticket, size_t len);
CK_RV cs_session_context_take_inlock (cs_session_t *self, cs_op_kind_t kind, uint8_t *ticket, size_t *len_p);

/*  Closes every session without logging out (C_Finalize, fork).  */
void cs_session_reset_all_inlock (void);

#endif
