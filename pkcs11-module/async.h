/*  async.h — PKCS#11 3.2 asynchronous sessions (issue #23): the calls an
 *  async session leaves in flight, C_AsyncComplete, C_AsyncGetID and
 *  C_AsyncJoin (3.2 "Asynchronous function management functions";
 *  our reading: cryptoserver-pkcs11(7) "PKCS#11 3.2").
 *
 *  In a session opened with CKF_ASYNC_SESSION, C_Sign, C_Decrypt,
 *  C_EncapsulateKey, C_DecapsulateKey and a token key's C_GenerateKeyPair
 *  queue their job (runner.h
 *  cs_runner_submit) and return CKR_PENDING; the application asks
 *  C_AsyncComplete (hSession, "C_Sign", &result) until the answer is not
 *  CKR_PENDING.  A function name identifies the call, so a session has at
 *  most one of each in flight (a second: CKR_OPERATION_ACTIVE); one thread
 *  keeps many in flight with many sessions.  Each C_AsyncComplete drives
 *  the link once without blocking (link.h cs_link_complete).
 *
 *  A token key's generation survives C_Finalize and its process:
 *  C_AsyncGetID writes its GenerateKeyPairJob, idempotency id included
 *  (docs/contracts/module.md "Key management takes effect once"), to a
 *  file named by the ID in the join directory (cs_async_dir); C_AsyncJoin
 *  in any process of the same tenant sends that job again, and the broker
 *  answers with the key the first run made.
 *
 *  Layer (module.h): above the runner and the object and session tables,
 *  below sign, decrypt, kem and keymgmt, which start the calls.
 */
#ifndef CS_MODULE_ASYNC_H_INCLUDED
#define CS_MODULE_ASYNC_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include "cs_p11_3.h"
#include "cs_wire.h"
#include "attrs.h"
#include "session.h"

/*  The functions an async session runs without waiting.  */
typedef enum {
    CS_ASYNC_SIGN, CS_ASYNC_DECRYPT, CS_ASYNC_GENERATE_KEY_PAIR, CS_ASYNC_ENCAPSULATE, CS_ASYNC_DECAPSULATE,
    CS_ASYNC_FUNCTIONS
} cs_async_fn_t;

/*  The function called `name` (a NUL-terminated PKCS#11 function name such
 *  as "C_Sign"), or CS_ASYNC_FUNCTIONS when this module never runs it
 *  asynchronously.  */
cs_async_fn_t cs_async_fn (const char *name);

/*  Under the library mutex, before the job leaves: true when `session` is
 *  an async session; then reserves its slot for `fn` (CKR_OK), or answers
 *  CKR_OPERATION_ACTIVE in *rv_p when one is in flight.  A sign or decrypt
 *  slot also marks the session's operation of that kind busy (session.h),
 *  so C_SignInit and C_Sign answer CKR_OPERATION_ACTIVE until it ends.
 *  False, and nothing reserved, in a session that waits.  */
bool cs_async_reserve_inlock (cs_session_t *session, cs_async_fn_t fn, CK_RV *rv_p);

/*  Sends `job` (borrowed) for the slot `fn` of session `handle` reserved
 *  by cs_async_reserve_inlock, and returns CKR_PENDING.  Sign and decrypt:
 *  the result (at most `max` bytes) goes into `out` (the application's
 *  buffer, which must live until C_AsyncComplete ends the call: 3.2
 *  C_AsyncComplete).  A token key generation: `job` carries its idempotency id and
 *  can be joined later (C_AsyncGetID).  On any other return the job did
 *  not leave and the slot is free again: cs_runner_submit's errors,
 *  CKR_HOST_MEMORY, CKR_SESSION_HANDLE_INVALID (closed meanwhile).
 *  Without the library mutex.  */
CK_RV cs_async_submit (CK_SESSION_HANDLE handle, cs_async_fn_t fn, Cs__Job *job, CK_BYTE_PTR out, size_t max);

/*  cs_async_submit for C_EncapsulateKey (fn CS_ASYNC_ENCAPSULATE: the
 *  ciphertext, `ct_len` bytes, goes into `ct`, the application's buffer)
 *  and C_DecapsulateKey (ct NULL): C_AsyncComplete then makes the new
 *  session secret key of `secret_type` from the first `secret_len` bytes of
 *  the 32-byte shared secret, with the stored attributes *attrs (taken:
 *  emptied here, whatever the outcome).  Returns CKR_PENDING or
 *  cs_async_submit's errors.  */
CK_RV cs_async_submit_kem (CK_SESSION_HANDLE handle, cs_async_fn_t fn, Cs__Job *job, CK_BYTE_PTR ct, size_t ct_len,
                           CK_KEY_TYPE secret_type, size_t secret_len, cs_attrs_t *attrs);

/*  Frees a reserved slot whose job never left (an error before
 *  cs_async_submit).  Without the library mutex.  */
void cs_async_release (CK_SESSION_HANDLE handle, cs_async_fn_t fn);

/*  The directory for joinable generations: $CRYPTOSERVER_ASYNC_DIR, else
 *  $XDG_RUNTIME_DIR/cryptoserver-async, else /tmp/cryptoserver-async-UID
 *  (made mode 0700 when missing).  Writes at most `size` bytes with the
 *  NUL into `buf`; false when it does not fit.  */
bool cs_async_dir (char *buf, size_t size);

/*  PKCS#11 3.2 C_AsyncComplete: the outcome of the call of `name` in
 *  flight in async session `handle`.  CKR_PENDING while it is (pResult
 *  untouched); else the call is over and the function's own return value
 *  comes back, with pResult (may be NULL) filled: pValue the output buffer
 *  given to C_Sign or C_Decrypt (also on an error, so that it may be
 *  freed), ulValue the bytes written; hObject the new public key and
 *  hAdditionalObject the private key of a C_GenerateKeyPair; hObject the
 *  new secret key of a C_EncapsulateKey (pValue, ulValue its ciphertext)
 *  or C_DecapsulateKey.  Errors of
 *  its own: CKR_ARGUMENTS_BAD (name NULL, or a function never run
 *  asynchronously here), CKR_OPERATION_NOT_INITIALIZED (nothing of `name`
 *  in flight; always in a session that is not async),
 *  CKR_SESSION_HANDLE_INVALID, CKR_CRYPTOKI_NOT_INITIALIZED.  */
CK_RV C_AsyncComplete (CK_SESSION_HANDLE handle, CK_UTF8CHAR_PTR name, CK_ASYNC_DATA_PTR result);

/*  PKCS#11 3.2 C_AsyncGetID: *id_p gets the ID of the token key
 *  generation in flight in `handle` (name "C_GenerateKeyPair"), its job
 *  saved in the join directory (mode 0600) for C_AsyncJoin.  Errors:
 *  CKR_ARGUMENTS_BAD, CKR_OPERATION_NOT_INITIALIZED (nothing of `name` in
 *  flight), CKR_STATE_UNSAVEABLE (a sign, decrypt or KEM call: not saved
 *  past its session), CKR_FUNCTION_FAILED (the file cannot be written; logged),
 *  CKR_HOST_MEMORY, CKR_SESSION_HANDLE_INVALID,
 *  CKR_CRYPTOKI_NOT_INITIALIZED.  */
CK_RV C_AsyncGetID (CK_SESSION_HANDLE handle, CK_UTF8CHAR_PTR name, CK_ULONG_PTR id_p);

/*  PKCS#11 3.2 C_AsyncJoin: takes up the generation saved under `id`
 *  (by this process or another, before or after C_Finalize) in async
 *  session `handle`: its job is sent again with its idempotency id and
 *  C_AsyncComplete (handle, "C_GenerateKeyPair", ...) gives the key the
 *  first run made.  data, data_len are ignored (no output buffer).
 *  CKR_OK when the job left.  Errors: CKR_ARGUMENTS_BAD (name NULL or not
 *  a function run asynchronously), CKR_SAVED_STATE_INVALID (no such ID,
 *  or a name other than "C_GenerateKeyPair"), CKR_SESSION_ASYNC_NOT_SUPPORTED
 *  (a session that waits), CKR_OPERATION_ACTIVE (a generation in flight in
 *  the session), CKR_SESSION_READ_ONLY, CKR_USER_NOT_LOGGED_IN,
 *  cs_runner_submit's errors.  */
CK_RV C_AsyncJoin (CK_SESSION_HANDLE handle, CK_UTF8CHAR_PTR name, CK_ULONG id, CK_BYTE_PTR data, CK_ULONG data_len);

/*  ---- one session's table of calls (pure; the unit tests use it) ---- */

typedef struct _cs_runner_pending_t cs_async_pending_t;    /* runner.h's */

/*  One slot per function.  reserved: taken; pending: the job in flight
 *  (NULL until it left, and while a C_AsyncComplete holds it: claimed);
 *  serial: which call holds the slot.  out, max: the output buffer of a
 *  sign or decrypt.  job, job_len: a generation's packed job (for
 *  C_AsyncGetID); id: its ID (from its idempotency id), saved: its job is
 *  in the join directory (removed when the call ends well).  secret_type,
 *  secret_len, attrs: the secret key a KEM call makes.  */
typedef struct {
    bool reserved, claimed, saved;
    unsigned serial;
    cs_async_pending_t *pending;
    CK_BYTE_PTR out;
    size_t max;
    CK_KEY_TYPE secret_type;
    size_t secret_len;
    cs_attrs_t attrs;
    uint8_t *job;
    size_t job_len;
    CK_ULONG id;
} cs_async_slot_t;

typedef struct {
    cs_async_slot_t slots [CS_ASYNC_FUNCTIONS];
    unsigned serial;
} cs_async_table_t;

/*  Takes the slot of `fn`: CKR_OK, CKR_OPERATION_ACTIVE when taken.  */
CK_RV cs_async_slot_reserve (cs_async_table_t *self, cs_async_fn_t fn);

/*  A C_AsyncComplete takes the job of `fn` out of its slot: CKR_OK with
 *  *pending_p (the caller's until it gives it back) and *serial_p;
 *  CKR_PENDING when the job has not left yet or another caller holds it;
 *  CKR_OPERATION_NOT_INITIALIZED when the slot is free.  */
CK_RV cs_async_slot_claim (cs_async_table_t *self, cs_async_fn_t fn, cs_async_pending_t **pending_p,
                           unsigned *serial_p);

/*  Gives a claimed job back (still in flight).  False when the slot no
 *  longer belongs to call `serial`: the job stays the caller's.  */
bool cs_async_slot_unclaim (cs_async_table_t *self, cs_async_fn_t fn, unsigned serial,
                            cs_async_pending_t *pending);

/*  Frees the slot of `fn` (its job, if still there, is abandoned).  */
void cs_async_slot_end (cs_async_table_t *self, cs_async_fn_t fn);

/*  Frees a session's table and every call in it (their replies are
 *  dropped when they come): the session's destructor for it (session.h).
 *  NULL-safe.  */
void cs_async_table_free (void *table);

#endif
