/*  session.c — the session table, C_OpenSession, C_CloseSession,
 *  C_CloseAllSessions, C_GetSessionInfo (PKCS#11 2.40 §5.6).
 *
 *  Login state is per token, not per session (login.c); closing the last
 *  session logs the user out, as §5.6 C_CloseSession requires.  Closing a
 *  session destroys the session objects it made, wiping per-request keys
 *  (§6.7.4, docs/DESIGN.md §1).
 */
#include <stdlib.h>
#include <string.h>
#include <openssl/crypto.h>
#include "log.h"
#include "guard.h"
#include "object.h"
#include "login.h"
#include "session.h"
#include "cs_p11_3.h"

struct _cs_session_t {
    CK_SESSION_HANDLE handle;
    CK_FLAGS flags;
    void *ops [CS_OP_KINDS];
    cs_op_free_fn *op_free [CS_OP_KINDS];
    uint8_t *verify_sig;            /* C_VerifySignatureInit's signature, or NULL */
    size_t verify_sig_len;          /* bytes */
    cs_session_context_t context [CS_OP_KINDS];     /* CKA_ALWAYS_AUTHENTICATE, per operation */
    void *async;                    /* async.h's table of calls in flight, or NULL */
    cs_op_free_fn *async_free;
    bool async_busy [CS_OP_KINDS];  /* a C_Sign or C_Decrypt returned CKR_PENDING */
};

static struct {
    cs_session_t **sessions;
    size_t count;
    size_t size;
    CK_SESSION_HANDLE next_handle;
} s_sessions;

/*  Forgets a signature-first verification's signature.  */
static void
s_verify_sig_clear_inlock (cs_session_t *self)
{
    free (self->verify_sig);
    self->verify_sig = NULL;
    self->verify_sig_len = 0;
}

static void
s_session_destroy_inlock (cs_session_t **self_p)
{
    cs_session_t *self = *self_p;
    if (!self)
        return;
    for (int kind = 0; kind < CS_OP_KINDS; kind++)
        cs_session_op_end_inlock (self, kind);
    if (self->async)
        self->async_free (self->async);     /* its jobs' replies are dropped */
    cs_object_session_closed_inlock (self->handle);
    s_verify_sig_clear_inlock (self);
    OPENSSL_cleanse (self->context, sizeof self->context);
    free (self);
    *self_p = NULL;
}

cs_session_t *
cs_session_lookup_inlock (CK_SESSION_HANDLE handle)
{
    for (size_t i = 0; i < s_sessions.count; i++)
        if (s_sessions.sessions [i]->handle == handle)
            return s_sessions.sessions [i];
    return NULL;
}

CK_RV
cs_session_get_inlock (CK_SESSION_HANDLE handle, cs_session_t **session_p)
{
    CK_RV rv = cs_guard_check ();
    if (rv == CKR_OK && !(*session_p = cs_session_lookup_inlock (handle)))
        rv = CKR_SESSION_HANDLE_INVALID;
    return rv;
}

CK_RV
cs_session_check (CK_SESSION_HANDLE handle)
{
    cs_session_t *session;
    CK_RV rv;
    CS_BEGIN_CALL (rv);
    rv = cs_session_get_inlock (handle, &session);
    CS_END_CALL ();
    return rv;
}

CK_FLAGS
cs_session_flags_inlock (const cs_session_t *self)
{
    return self->flags;
}

void *
cs_session_async_inlock (cs_session_t *self)
{
    return self->async;
}

void
cs_session_async_set_inlock (cs_session_t *self, void *table, cs_op_free_fn *free_fn)
{
    self->async = table;
    self->async_free = free_fn;
}

void
cs_session_async_busy_inlock (cs_session_t *self, cs_op_kind_t kind, bool busy)
{
    self->async_busy [kind] = busy;
}

void *
cs_session_op_inlock (cs_session_t *self, cs_op_kind_t kind)
{
    return self->ops [kind];
}

cs_op_free_fn *
cs_session_op_free_fn_inlock (cs_session_t *self, cs_op_kind_t kind)
{
    return self->ops [kind] ? self->op_free [kind] : NULL;
}

CK_RV
cs_session_op_start_inlock (cs_session_t *self, cs_op_kind_t kind, void *op, cs_op_free_fn *free_fn)
{
    if (self->ops [kind] || self->async_busy [kind])
        return CKR_OPERATION_ACTIVE;
    self->ops [kind] = op;
    self->op_free [kind] = free_fn;
    return CKR_OK;
}

CK_RV
cs_session_op_get_inlock (CK_SESSION_HANDLE handle, cs_op_kind_t kind, bool args_ok,
                          cs_session_t **session_p, void **op_p)
{
    CK_RV rv = cs_session_get_inlock (handle, session_p);
    if (rv != CKR_OK)
        return rv;
    if ((*session_p)->async_busy [kind])
        rv = CKR_OPERATION_ACTIVE;              /* its C_AsyncComplete ends it (3.2 "Asynchronous function management") */
    else
    if (!(*op_p = cs_session_op_inlock (*session_p, kind)))
        rv = CKR_OPERATION_NOT_INITIALIZED;
    else
    if (!args_ok) {
        cs_session_op_end_inlock (*session_p, kind);
        rv = CKR_ARGUMENTS_BAD;
    }
    return rv;
}

void *
cs_session_op_take_inlock (cs_session_t *self, cs_op_kind_t kind)
{
    void *op = self->ops [kind];
    self->ops [kind] = NULL;
    return op;
}

void
cs_session_op_end_inlock (cs_session_t *self, cs_op_kind_t kind)
{
    void *op = cs_session_op_take_inlock (self, kind);
    if (op && self->op_free [kind])
        self->op_free [kind] (op);
}

size_t
cs_session_count_inlock (CK_FLAGS flags)
{
    size_t count = 0;
    for (size_t i = 0; i < s_sessions.count; i++)
        if ((s_sessions.sessions [i]->flags & flags) == flags)
            count++;
    return count;
}

void
cs_session_reset_all_inlock (void)
{
    for (size_t i = 0; i < s_sessions.count; i++)
        s_session_destroy_inlock (&s_sessions.sessions [i]);
    free (s_sessions.sessions);
    memset (&s_sessions, 0, sizeof s_sessions);
}

static CK_RV
s_session_add (CK_FLAGS flags, CK_SESSION_HANDLE *handle_p)
{
    cs_session_t *self;
    if (s_sessions.count == s_sessions.size) {
        size_t size = s_sessions.size ? 2 * s_sessions.size : 16;
        cs_session_t **sessions = realloc (s_sessions.sessions, size * sizeof *sessions);
        if (!sessions)
            return CKR_HOST_MEMORY;
        s_sessions.sessions = sessions;
        s_sessions.size = size;
    }
    if (!(self = calloc (1, sizeof *self)))
        return CKR_HOST_MEMORY;
    self->handle = ++s_sessions.next_handle;
    self->flags = flags;
    s_sessions.sessions [s_sessions.count++] = self;
    *handle_p = self->handle;
    return CKR_OK;
}

/*  Removes session `handle`; logs out when it was the last one.  */
static CK_RV
s_session_remove_inlock (CK_SESSION_HANDLE handle)
{
    for (size_t i = 0; i < s_sessions.count; i++)
        if (s_sessions.sessions [i]->handle == handle) {
            s_session_destroy_inlock (&s_sessions.sessions [i]);
            s_sessions.sessions [i] = s_sessions.sessions [--s_sessions.count];
            if (s_sessions.count == 0)
                cs_login_logout_inlock ();
            return CKR_OK;
        }
    return CKR_SESSION_HANDLE_INVALID;
}

CK_RV
C_OpenSession (CK_SLOT_ID slot, CK_FLAGS flags, CK_VOID_PTR application,
               CK_NOTIFY notify, CK_SESSION_HANDLE_PTR handle_p)
{
    CK_RV rv = cs_guard_check ();
    if (rv != CKR_OK)
        return rv;
    return_val_if_fail (handle_p != NULL, CKR_ARGUMENTS_BAD);
    if (slot != CS_SLOT_ID)
        return CKR_SLOT_ID_INVALID;
    if (!(flags & CKF_SERIAL_SESSION))
        return CKR_SESSION_PARALLEL_NOT_SUPPORTED;
    cs_lock ();
    if (cs_login_so_logged_in_inlock () && !(flags & CKF_RW_SESSION))
        rv = CKR_SESSION_READ_WRITE_SO_EXISTS;
    else
        rv = s_session_add (flags & (CKF_SERIAL_SESSION | CKF_RW_SESSION | CKF_ASYNC_SESSION), handle_p);
    cs_unlock ();
    return rv;
}

CK_RV
C_CloseSession (CK_SESSION_HANDLE handle)
{
    CK_RV rv;
    CS_BEGIN_CALL (rv);
    rv = s_session_remove_inlock (handle);
    CS_END_CALL ();
    return rv;
}

CK_RV
C_CloseAllSessions (CK_SLOT_ID slot)
{
    CK_RV rv = cs_guard_check ();
    if (rv != CKR_OK)
        return rv;
    if (slot != CS_SLOT_ID)
        return CKR_SLOT_ID_INVALID;
    cs_lock ();
    cs_session_reset_all_inlock ();
    cs_login_logout_inlock ();
    cs_unlock ();
    return CKR_OK;
}

/*  Session state from the token's login state (PKCS#11 2.40 §5.6 table 8).  */
static CK_STATE
s_state_inlock (const cs_session_t *self)
{
    bool rw = self->flags & CKF_RW_SESSION;
    if (cs_login_so_logged_in_inlock ())
        return CKS_RW_SO_FUNCTIONS;
    if (cs_login_user_logged_in_inlock ())
        return rw ? CKS_RW_USER_FUNCTIONS : CKS_RO_USER_FUNCTIONS;
    return rw ? CKS_RW_PUBLIC_SESSION : CKS_RO_PUBLIC_SESSION;
}

CK_RV
C_GetSessionInfo (CK_SESSION_HANDLE handle, CK_SESSION_INFO_PTR info)
{
    cs_session_t *session;
    CK_RV rv;
    return_val_if_fail (info != NULL, CKR_ARGUMENTS_BAD);
    CS_BEGIN_SESSION_CALL (rv, handle, &session);
    memset (info, 0, sizeof *info);
    info->slotID = CS_SLOT_ID;
    info->state = s_state_inlock (session);
    info->flags = session->flags;
    CS_END_CALL ();
    return CKR_OK;
}

/*  PKCS#11 3.0 §5.6 C_SessionCancel: ends the operations named by `flags`
 *  (CKF_ENCRYPT, CKF_DECRYPT, CKF_DIGEST, CKF_SIGN, CKF_VERIFY,
 *  CKF_SIGN_RECOVER, CKF_VERIFY_RECOVER, CKF_FIND_OBJECTS); flags of
 *  operations that are not active, or that this module never has
 *  (message-based, dual-function), are ignored, as the spec says.  An operation is never stuck, so CKR_OPERATION_CANCEL_FAILED
 *  does not occur.  CKR_SESSION_HANDLE_INVALID or CKR_OK.  */
CK_RV
cs_session_cancel (CK_SESSION_HANDLE handle, CK_FLAGS flags)
{
    static const struct { CK_FLAGS flag; cs_op_kind_t kind; } map [] = {
        { CKF_FIND_OBJECTS, CS_OP_FIND }, { CKF_SIGN, CS_OP_SIGN }, { CKF_VERIFY, CS_OP_VERIFY },
        { CKF_DECRYPT, CS_OP_DECRYPT }, { CKF_ENCRYPT, CS_OP_ENCRYPT }, { CKF_DIGEST, CS_OP_DIGEST },
        { CKF_SIGN_RECOVER, CS_OP_SIGN_RECOVER }, { CKF_VERIFY_RECOVER, CS_OP_VERIFY_RECOVER },
    };
    cs_session_t *session;
    CK_RV rv;
    CS_BEGIN_SESSION_CALL (rv, handle, &session);
    for (size_t i = 0; i < sizeof map / sizeof map [0]; i++)
        if (flags & map [i].flag)
            cs_session_op_end_inlock (session, map [i].kind);
    if (flags & CKF_VERIFY)
        s_verify_sig_clear_inlock (session);
    CS_END_CALL ();
    return CKR_OK;
}

/*  ---- signature-first verification (PKCS#11 3.2) ----------------------- */

CK_RV
cs_session_verify_sig_put (CK_SESSION_HANDLE handle, const uint8_t *sig, size_t len)
{
    cs_session_t *session;
    uint8_t *copy = NULL;
    CK_RV rv = cs_guard_check ();
    if (rv != CKR_OK)
        return rv;
    if (sig && !(copy = malloc (len ? len : 1)))
        return CKR_HOST_MEMORY;
    if (copy)
        memcpy (copy, sig, len);
    cs_lock ();
    if ((rv = cs_session_get_inlock (handle, &session)) == CKR_OK) {
        s_verify_sig_clear_inlock (session);
        session->verify_sig = copy;
        session->verify_sig_len = copy ? len : 0;
        copy = NULL;
    }
    cs_unlock ();
    free (copy);
    return rv;
}

CK_RV
cs_session_verify_sig_take (CK_SESSION_HANDLE handle, uint8_t **sig_p, size_t *len_p)
{
    cs_session_t *session;
    CK_RV rv;
    CS_BEGIN_SESSION_CALL (rv, handle, &session);
    if (!session->verify_sig)
        rv = CKR_OPERATION_NOT_INITIALIZED;
    else
    if (sig_p) {
        *sig_p = session->verify_sig;
        *len_p = session->verify_sig_len;
        session->verify_sig = NULL;
        session->verify_sig_len = 0;
    }
    CS_END_CALL ();
    return rv;
}

/*  PKCS#11 3.2 C_GetSessionValidationFlags: the token has no validation
 *  objects, so no operation of a session is ever validated and the flags
 *  are 0 (cryptoserver-pkcs11(7) "PKCS#11 3.2").  */
CK_RV
C_GetSessionValidationFlags (CK_SESSION_HANDLE handle, CK_SESSION_VALIDATION_FLAGS_TYPE type, CK_FLAGS_PTR flags_p)
{
    CK_RV rv = cs_session_check (handle);
    if (rv != CKR_OK)
        return rv;
    return_val_if_fail (flags_p != NULL && type == CKS_LAST_VALIDATION_OK, CKR_ARGUMENTS_BAD);
    *flags_p = 0;
    return CKR_OK;
}

/*  ---- context-specific login (CKA_ALWAYS_AUTHENTICATE) ------------------ */

void
cs_session_context_start_inlock (cs_session_t *self, cs_op_kind_t kind, const uint8_t *ref, size_t ref_len)
{
    cs_session_context_t *context = &self->context [kind];
    OPENSSL_cleanse (context, sizeof *context);
    if (!ref)
        return;
    context->needed = true;
    context->ref_len = ref_len < sizeof context->ref ? ref_len : sizeof context->ref;
    memcpy (context->ref, ref, context->ref_len);
}

CK_RV
cs_session_context_find_inlock (cs_session_t *self, cs_op_kind_t *kind_p, cs_session_context_t *copy)
{
    static const cs_op_kind_t kinds [] = { CS_OP_SIGN, CS_OP_DECRYPT, CS_OP_SIGN_RECOVER };
    for (size_t i = 0; i < sizeof kinds / sizeof kinds [0]; i++)
        if (self->ops [kinds [i]] && self->context [kinds [i]].needed) {
            *kind_p = kinds [i];
            *copy = self->context [kinds [i]];
            return CKR_OK;
        }
    return CKR_OPERATION_NOT_INITIALIZED;
}

void
cs_session_context_put_inlock (cs_session_t *self, cs_op_kind_t kind, const cs_session_context_t *asked,
                               const uint8_t *ticket, size_t len)
{
    cs_session_context_t *context = &self->context [kind];
    if (!self->ops [kind] || !context->needed || context->ref_len != asked->ref_len
    ||  memcmp (context->ref, asked->ref, asked->ref_len) || len > sizeof context->ticket)
        return;                                 /* the operation changed meanwhile */
    memcpy (context->ticket, ticket, len);
    context->ticket_len = len;
}

CK_RV
cs_session_context_take_inlock (cs_session_t *self, cs_op_kind_t kind, uint8_t *ticket, size_t *len_p)
{
    cs_session_context_t *context = &self->context [kind];
    *len_p = 0;
    if (!context->needed)
        return CKR_OK;
    if (!context->ticket_len)
        return CKR_USER_NOT_LOGGED_IN;
    memcpy (ticket, context->ticket, context->ticket_len);
    *len_p = context->ticket_len;
    OPENSSL_cleanse (context->ticket, sizeof context->ticket);
    context->ticket_len = 0;
    return CKR_OK;
}
