/*  async.c — PKCS#11 3.2 asynchronous sessions (async.h, issue #23): each
 *  session's table of calls in flight, C_AsyncComplete, C_AsyncGetID and
 *  C_AsyncJoin.
 *
 *  A call's job belongs to its slot under the library mutex; a
 *  C_AsyncComplete claims it, drives the link without the mutex
 *  (cs_runner_complete) and gives it back while it is still out, so a
 *  C_CloseSession meanwhile cannot free what it holds (it frees the rest,
 *  and the claimer the job).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <openssl/crypto.h>
#include "log.h"
#include "guard.h"
#include "login.h"
#include "key.h"
#include "object.h"
#include "session.h"
#include "runner.h"
#include "async.h"

/*  ---- the table --------------------------------------------------------- */

cs_async_fn_t
cs_async_fn (const char *name)
{
    static const char *const names [CS_ASYNC_FUNCTIONS] = {
        [CS_ASYNC_SIGN] = "C_Sign", [CS_ASYNC_DECRYPT] = "C_Decrypt",
        [CS_ASYNC_GENERATE_KEY_PAIR] = "C_GenerateKeyPair", [CS_ASYNC_ENCAPSULATE] = "C_EncapsulateKey",
        [CS_ASYNC_DECAPSULATE] = "C_DecapsulateKey",
    };
    for (int fn = 0; name && fn < CS_ASYNC_FUNCTIONS; fn++)
        if (strcmp (name, names [fn]) == 0)
            return (cs_async_fn_t) fn;
    return CS_ASYNC_FUNCTIONS;
}

CK_RV
cs_async_slot_reserve (cs_async_table_t *self, cs_async_fn_t fn)
{
    cs_async_slot_t *slot = &self->slots [fn];
    if (slot->reserved)
        return CKR_OPERATION_ACTIVE;
    *slot = (cs_async_slot_t) { .reserved = true, .serial = ++self->serial };
    return CKR_OK;
}

CK_RV
cs_async_slot_claim (cs_async_table_t *self, cs_async_fn_t fn, cs_async_pending_t **pending_p, unsigned *serial_p)
{
    cs_async_slot_t *slot = &self->slots [fn];
    if (!slot->reserved)
        return CKR_OPERATION_NOT_INITIALIZED;
    if (slot->claimed || !slot->pending)
        return CKR_PENDING;
    slot->claimed = true;
    *pending_p = slot->pending;
    *serial_p = slot->serial;
    slot->pending = NULL;
    return CKR_OK;
}

bool
cs_async_slot_unclaim (cs_async_table_t *self, cs_async_fn_t fn, unsigned serial, cs_async_pending_t *pending)
{
    cs_async_slot_t *slot = &self->slots [fn];
    if (!slot->reserved || !slot->claimed || slot->serial != serial)
        return false;
    slot->claimed = false;
    slot->pending = pending;
    return true;
}

void
cs_async_slot_end (cs_async_table_t *self, cs_async_fn_t fn)
{
    cs_async_slot_t *slot = &self->slots [fn];
    cs_runner_pending_free (&slot->pending);
    free (slot->job);
    cs_attrs_clear (&slot->attrs);
    *slot = (cs_async_slot_t) { 0 };
}

void
cs_async_table_free (void *table)
{
    cs_async_table_t *self = table;
    for (int fn = 0; self && fn < CS_ASYNC_FUNCTIONS; fn++)
        cs_async_slot_end (self, (cs_async_fn_t) fn);
    free (self);
}

/*  ---- starting a call ----------------------------------------------------- */

/*  The session operation a call keeps busy, or CS_OP_KINDS.  */
static cs_op_kind_t
s_kind (cs_async_fn_t fn)
{
    return fn == CS_ASYNC_SIGN ? CS_OP_SIGN : fn == CS_ASYNC_DECRYPT ? CS_OP_DECRYPT : CS_OP_KINDS;
}

/*  The session's table, made when `create` and missing; NULL without it.  */
static cs_async_table_t *
s_table_inlock (cs_session_t *session, bool create)
{
    cs_async_table_t *table = cs_session_async_inlock (session);
    if (!table && create && (table = calloc (1, sizeof *table)))
        cs_session_async_set_inlock (session, table, cs_async_table_free);
    return table;
}

/*  Frees slot `fn` of `session` when call `serial` (0: any) still holds it,
 *  and frees its operation of the kind.  */
static void
s_end_inlock (cs_session_t *session, cs_async_fn_t fn, unsigned serial)
{
    cs_async_table_t *table = session ? s_table_inlock (session, false) : NULL;
    if (!table || !table->slots [fn].reserved || (serial && table->slots [fn].serial != serial))
        return;
    cs_async_slot_end (table, fn);
    if (s_kind (fn) != CS_OP_KINDS)
        cs_session_async_busy_inlock (session, s_kind (fn), false);
}

bool
cs_async_reserve_inlock (cs_session_t *session, cs_async_fn_t fn, CK_RV *rv_p)
{
    cs_async_table_t *table;
    if (!(cs_session_flags_inlock (session) & CKF_ASYNC_SESSION))
        return false;
    if (!(table = s_table_inlock (session, true)))
        *rv_p = CKR_HOST_MEMORY;
    else
    if ((*rv_p = cs_async_slot_reserve (table, fn)) == CKR_OK && s_kind (fn) != CS_OP_KINDS)
        cs_session_async_busy_inlock (session, s_kind (fn), true);
    return true;
}

void
cs_async_release (CK_SESSION_HANDLE handle, cs_async_fn_t fn)
{
    cs_lock ();
    s_end_inlock (cs_session_lookup_inlock (handle), fn, 0);
    cs_unlock ();
}

/*  The ID of a generation job: its idempotency id's first bytes, odd (never 0).  */
static CK_ULONG
s_job_id (const Cs__Job *job)
{
    CK_ULONG id = 0;
    memcpy (&id, job->idempotency_id.data,
            job->idempotency_id.len < sizeof id ? job->idempotency_id.len : sizeof id);
    return id | 1;
}

/*  cs_async_submit and cs_async_submit_kem: where the result goes (`out`,
 *  its attrs taken); `saved`: the job is in the join directory already.  */
static CK_RV
s_submit (CK_SESSION_HANDLE handle, cs_async_fn_t fn, Cs__Job *job, cs_async_slot_t *out, bool saved)
{
    cs_runner_pending_t *pending = NULL;
    cs_async_table_t *table;
    cs_session_t *session;
    uint8_t *packed = NULL;
    size_t packed_len = 0;
    CK_RV rv = CKR_OK;
    if (fn == CS_ASYNC_GENERATE_KEY_PAIR) {
        packed_len = cs__job__get_packed_size (job);
        if (!job->idempotency_id.len || !(packed = malloc (packed_len)))
            rv = CKR_HOST_MEMORY;
        else
            cs__job__pack (job, packed);
    }
    if (rv == CKR_OK)
        rv = cs_runner_submit (job, true, &pending);
    cs_lock ();
    session = cs_session_lookup_inlock (handle);
    table = session ? s_table_inlock (session, false) : NULL;
    if (rv == CKR_OK && !(table && table->slots [fn].reserved && !table->slots [fn].pending))
        rv = CKR_SESSION_HANDLE_INVALID;            /* closed meanwhile */
    if (rv == CKR_OK) {
        cs_async_slot_t *slot = &table->slots [fn];
        slot->pending = pending;
        slot->out = out->out;
        slot->max = out->max;
        slot->secret_type = out->secret_type;
        slot->secret_len = out->secret_len;
        slot->attrs = out->attrs;
        out->attrs = (cs_attrs_t) { 0 };
        slot->job = packed;
        slot->job_len = packed_len;
        slot->id = packed ? s_job_id (job) : 0;
        slot->saved = saved;
        pending = NULL;
        packed = NULL;
    }
    else
        s_end_inlock (session, fn, 0);
    cs_unlock ();
    cs_runner_pending_free (&pending);
    cs_attrs_clear (&out->attrs);
    free (packed);
    return rv == CKR_OK ? CKR_PENDING : rv;
}

CK_RV
cs_async_submit (CK_SESSION_HANDLE handle, cs_async_fn_t fn, Cs__Job *job, CK_BYTE_PTR out, size_t max)
{
    cs_async_slot_t where = { .out = out, .max = max };
    return s_submit (handle, fn, job, &where, false);
}

CK_RV
cs_async_submit_kem (CK_SESSION_HANDLE handle, cs_async_fn_t fn, Cs__Job *job, CK_BYTE_PTR ct, size_t ct_len,
                     CK_KEY_TYPE secret_type, size_t secret_len, cs_attrs_t *attrs)
{
    cs_async_slot_t where = { .out = ct, .max = ct_len, .secret_type = secret_type, .secret_len = secret_len,
                              .attrs = *attrs };
    *attrs = (cs_attrs_t) { 0 };
    return s_submit (handle, fn, job, &where, false);
}

/*  ---- the join directory ------------------------------------------------- */

bool
cs_async_dir (char *buf, size_t size)
{
    const char *dir = getenv ("CRYPTOSERVER_ASYNC_DIR"), *run = getenv ("XDG_RUNTIME_DIR");
    int n = dir && *dir ? snprintf (buf, size, "%s", dir)
          : run && *run ? snprintf (buf, size, "%s/cryptoserver-async", run)
          : snprintf (buf, size, "/tmp/cryptoserver-async-%u", (unsigned) getuid ());
    if (n < 0 || (size_t) n >= size)
        return false;
    if (mkdir (buf, 0700) != 0 && errno != EEXIST)
        cs_log_warning ("async: cannot make %s: %s", buf, strerror (errno));
    return true;
}

/*  The file of ID `id`, in `buf` of `size` bytes.  */
static bool
s_id_path (CK_ULONG id, char *buf, size_t size)
{
    char dir [512];
    int n;
    if (!cs_async_dir (dir, sizeof dir))
        return false;
    n = snprintf (buf, size, "%s/%016lx.job", dir, (unsigned long) id);
    return n > 0 && (size_t) n < size;
}

/*  Writes `len` bytes of `data` as the file of `id` (mode 0600).  */
static CK_RV
s_save (CK_ULONG id, const uint8_t *data, size_t len)
{
    char path [600];
    int fd = s_id_path (id, path, sizeof path) ? open (path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600) : -1;
    bool ok = fd >= 0 && write (fd, data, len) == (ssize_t) len;
    if (fd >= 0 && close (fd) != 0)
        ok = false;
    if (!ok)
        cs_log_error ("async: cannot save generation %016lx: %s", (unsigned long) id, strerror (errno));
    return ok ? CKR_OK : CKR_FUNCTION_FAILED;
}

/*  Reads the job saved as `id`: a token key generation of that ID, or NULL
 *  (caller frees with cs__job__free_unpacked).  */
static Cs__Job *
s_load (CK_ULONG id)
{
    char path [600];
    uint8_t *buf = malloc (CS_WIRE_MAX_MESSAGE);
    ssize_t len = -1;
    Cs__Job *job = NULL;
    int fd = buf && s_id_path (id, path, sizeof path) ? open (path, O_RDONLY | O_CLOEXEC) : -1;
    if (fd >= 0) {
        len = read (fd, buf, CS_WIRE_MAX_MESSAGE);
        close (fd);
    }
    if (len > 0 && (job = cs__job__unpack (NULL, (size_t) len, buf))
    &&  (job->kind_case != CS__JOB__KIND_GENERATE_KEY_PAIR || !job->generate_key_pair->token
    ||   !job->idempotency_id.len || s_job_id (job) != id)) {
        cs__job__free_unpacked (job, NULL);
        job = NULL;
    }
    free (buf);
    return job;
}

static void
s_forget (CK_ULONG id)
{
    char path [600];
    if (s_id_path (id, path, sizeof path))
        (void) unlink (path);
}

/*  ---- completion ------------------------------------------------------------ */

/*  A sign or decrypt result into the application's buffer.  */
static CK_RV
s_finish_data (const cs_async_slot_t *slot, const Cs__Result *res, CK_ASYNC_DATA *result, bool sign)
{
    if (res->kind_case != CS__RESULT__KIND_DATA || res->data.len > slot->max || (sign && !res->data.len)) {
        cs_log_error ("the broker returned %zu bytes for at most %zu",
                      res->kind_case == CS__RESULT__KIND_DATA ? res->data.len : 0, slot->max);
        return CKR_DEVICE_ERROR;
    }
    if (res->data.len)
        memcpy (slot->out, res->data.data, res->data.len);
    OPENSSL_cleanse (res->data.data, res->data.len);
    if (result)
        result->ulValue = res->data.len;
    return CKR_OK;
}

/*  A token key generation's objects (keymgmt.c s_generate's, for the key
 *  the broker made or replayed).  */
static CK_RV
s_finish_keys (const Cs__Result *res, CK_ASYNC_DATA *result)
{
    CK_OBJECT_HANDLE pub = 0, priv = 0;
    CK_RV rv;
    if (res->kind_case != CS__RESULT__KIND_GENERATED || !res->generated->key) {
        cs_log_error ("the broker answered a key generation with the wrong result");
        return CKR_DEVICE_ERROR;
    }
    cs_lock ();
    if ((rv = cs_object_put_inlock (res->generated->key, CKO_PUBLIC_KEY, &pub)) == CKR_OK)
        rv = cs_object_put_inlock (res->generated->key, CKO_PRIVATE_KEY, &priv);
    cs_unlock ();
    if (rv == CKR_OK && (!pub || !priv)) {
        cs_log_error ("the broker's reply lacks the new key's objects");
        rv = CKR_DEVICE_ERROR;
    }
    if (rv == CKR_OK && result) {
        result->hObject = pub;
        result->hAdditionalObject = priv;
    }
    return rv;
}

#define S_KEM_SECRET 32             /* bytes of an ML-KEM shared secret (FIPS 203 §2.4) */

/*  A KEM call's new session secret key (kem.c s_kem's, for the secret the
 *  broker sent after the ciphertext of an encapsulation), in the session of
 *  `handle`; the ciphertext into the application's buffer.  */
static CK_RV
s_finish_kem (CK_SESSION_HANDLE handle, cs_async_slot_t *slot, const Cs__Result *res, CK_ASYNC_DATA *result)
{
    size_t ct_len = slot->out ? slot->max : 0;
    CK_OBJECT_HANDLE object = 0;
    cs_key_t *key = NULL;
    CK_RV rv;
    if (res->kind_case != CS__RESULT__KIND_DATA || res->data.len != ct_len + S_KEM_SECRET
    ||  slot->secret_len > S_KEM_SECRET) {
        cs_log_error ("the broker returned a malformed key encapsulation result");
        return CKR_DEVICE_ERROR;
    }
    if (!(key = cs_key_new_secret (slot->secret_type, res->data.data + ct_len, slot->secret_len)))
        rv = CKR_HOST_MEMORY;
    else {
        cs_lock ();
        rv = cs_session_lookup_inlock (handle)
           ? cs_object_add_session_inlock (handle, CKO_SECRET_KEY, key, &slot->attrs, &object)
           : CKR_SESSION_HANDLE_INVALID;
        cs_unlock ();
    }
    OPENSSL_cleanse (res->data.data + ct_len, S_KEM_SECRET);
    cs_key_unref (&key);
    if (rv == CKR_OK && ct_len)
        memcpy (slot->out, res->data.data, ct_len);
    if (rv == CKR_OK && result) {
        result->ulValue = ct_len;
        result->hObject = object;
    }
    return rv;
}

/*  The function's own outcome from the job's rv and reply.  */
static CK_RV
s_finish (CK_SESSION_HANDLE handle, cs_async_fn_t fn, cs_async_slot_t *slot, CK_RV rv, const Cs__Reply *reply,
          CK_ASYNC_DATA *result)
{
    if (result && slot->out)
        result->pValue = slot->out;         /* also on an error: it may be freed */
    if (rv != CKR_OK)
        return rv;
    switch (fn) {
        case CS_ASYNC_GENERATE_KEY_PAIR: return s_finish_keys (reply->results [0], result);
        case CS_ASYNC_ENCAPSULATE: case CS_ASYNC_DECAPSULATE: return s_finish_kem (handle, slot, reply->results [0], result);
        default: return s_finish_data (slot, reply->results [0], result, fn == CS_ASYNC_SIGN);
    }
}

/*  Gives a claimed job back, or frees it when its session went.  */
static CK_RV
s_unclaim (CK_SESSION_HANDLE handle, cs_async_fn_t fn, unsigned serial, cs_runner_pending_t *pending)
{
    cs_session_t *session;
    cs_async_table_t *table;
    bool kept;
    cs_lock ();
    session = cs_session_lookup_inlock (handle);
    table = session ? s_table_inlock (session, false) : NULL;
    kept = table && cs_async_slot_unclaim (table, fn, serial, pending);
    cs_unlock ();
    if (!kept)
        cs_runner_pending_free (&pending);
    return kept ? CKR_PENDING : CKR_SESSION_CLOSED;
}

CK_RV
C_AsyncComplete (CK_SESSION_HANDLE handle, CK_UTF8CHAR_PTR name, CK_ASYNC_DATA_PTR result)
{
    cs_async_fn_t fn = cs_async_fn ((const char *) name);
    cs_runner_pending_t *pending = NULL;
    cs_async_table_t *table;
    cs_async_slot_t slot = { 0 };
    cs_session_t *session;
    Cs__Reply *reply = NULL;
    unsigned serial = 0;
    CK_RV rv;
    return_val_if_fail (fn != CS_ASYNC_FUNCTIONS, CKR_ARGUMENTS_BAD);
    CS_BEGIN_SESSION_CALL (rv, handle, &session);
    table = s_table_inlock (session, false);
    if ((rv = table ? cs_async_slot_claim (table, fn, &pending, &serial) : CKR_OPERATION_NOT_INITIALIZED) == CKR_OK)
        slot = table->slots [fn];
    CS_END_CALL ();
    if (rv != CKR_OK)
        return rv;
    if ((rv = cs_runner_complete (&pending, &reply)) == CKR_PENDING)
        return s_unclaim (handle, fn, serial, pending);
    cs_lock ();
    session = cs_session_lookup_inlock (handle);
    table = session ? s_table_inlock (session, false) : NULL;
    if (table && table->slots [fn].reserved && table->slots [fn].serial == serial) {
        slot.attrs = table->slots [fn].attrs;       /* the new key's: ours now */
        table->slots [fn].attrs = (cs_attrs_t) { 0 };
    }
    else
        slot.attrs = (cs_attrs_t) { 0 };            /* freed with the closed session */
    s_end_inlock (session, fn, serial);
    cs_unlock ();
    rv = s_finish (handle, fn, &slot, rv, reply, result);
    if (slot.saved && rv == CKR_OK)
        s_forget (slot.id);
    cs_attrs_clear (&slot.attrs);
    cs_wire_reply_free (&reply);
    return rv;
}

/*  ---- persisting past C_Finalize ------------------------------------------- */

CK_RV
C_AsyncGetID (CK_SESSION_HANDLE handle, CK_UTF8CHAR_PTR name, CK_ULONG_PTR id_p)
{
    cs_async_fn_t fn = cs_async_fn ((const char *) name);
    cs_async_table_t *table;
    cs_session_t *session;
    uint8_t *job = NULL;
    size_t job_len = 0;
    CK_ULONG id = 0;
    bool saved = false;
    CK_RV rv;
    return_val_if_fail (fn != CS_ASYNC_FUNCTIONS && id_p, CKR_ARGUMENTS_BAD);
    CS_BEGIN_SESSION_CALL (rv, handle, &session);
    table = s_table_inlock (session, false);
    if (!table || !table->slots [fn].reserved)
        rv = CKR_OPERATION_NOT_INITIALIZED;
    else
    if (fn != CS_ASYNC_GENERATE_KEY_PAIR)
        rv = CKR_STATE_UNSAVEABLE;          /* a signature or plaintext ends with its session */
    else
    if (!table->slots [fn].job)
        rv = CKR_OPERATION_NOT_INITIALIZED; /* not sent yet */
    else {
        id = table->slots [fn].id;
        saved = table->slots [fn].saved;
        job_len = table->slots [fn].job_len;
        if (!saved && !(job = malloc (job_len)))
            rv = CKR_HOST_MEMORY;
        else
        if (!saved)
            memcpy (job, table->slots [fn].job, job_len);
    }
    CS_END_CALL ();
    if (rv == CKR_OK && !saved && (rv = s_save (id, job, job_len)) == CKR_OK) {
        cs_lock ();
        if ((session = cs_session_lookup_inlock (handle)) && (table = s_table_inlock (session, false))
        &&  table->slots [fn].id == id)
            table->slots [fn].saved = true;
        cs_unlock ();
    }
    free (job);
    if (rv == CKR_OK)
        *id_p = id;
    return rv;
}

CK_RV
C_AsyncJoin (CK_SESSION_HANDLE handle, CK_UTF8CHAR_PTR name, CK_ULONG id, CK_BYTE_PTR data, CK_ULONG data_len)
{
    cs_async_fn_t fn = cs_async_fn ((const char *) name);
    cs_session_t *session;
    Cs__Job *job;
    CK_RV rv;
    (void) data;
    (void) data_len;                        /* no output buffer: 3.2 C_AsyncJoin */
    return_val_if_fail (fn != CS_ASYNC_FUNCTIONS, CKR_ARGUMENTS_BAD);
    CS_BEGIN_SESSION_CALL (rv, handle, &session);
    if (!(cs_session_flags_inlock (session) & CKF_ASYNC_SESSION))
        rv = CKR_SESSION_ASYNC_NOT_SUPPORTED;
    CS_END_CALL ();
    if (rv != CKR_OK)
        return rv;
    if (fn != CS_ASYNC_GENERATE_KEY_PAIR || !(job = s_load (id)))
        return CKR_SAVED_STATE_INVALID;
    cs_lock ();
    if (!(session = cs_session_lookup_inlock (handle)))
        rv = CKR_SESSION_HANDLE_INVALID;
    else
    if (!(cs_session_flags_inlock (session) & CKF_RW_SESSION))
        rv = CKR_SESSION_READ_ONLY;
    else
    if (!cs_login_user_logged_in_inlock ())
        rv = CKR_USER_NOT_LOGGED_IN;
    else
        (void) cs_async_reserve_inlock (session, fn, &rv);
    cs_unlock ();
    if (rv == CKR_OK)
        rv = s_submit (handle, fn, job, &(cs_async_slot_t) { 0 }, true);
    cs__job__free_unpacked (job, NULL);
    return rv == CKR_PENDING ? CKR_OK : rv;
}
