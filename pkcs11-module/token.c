/*  token.c — the slot, the token, its mechanisms, C_Login and C_Logout.
 *
 *  One slot, id CS_SLOT_ID (0), always holding one token: the tenant's view
 *  of the broker.  Token label, model, serial and the boards' mechanisms come
 *  from one HelloJob, sent on the first call that needs them and cached
 *  until C_Finalize, and fetched again after each C_Login so that the PIN
 *  flags of CK_TOKEN_INFO (CKF_USER_PIN_COUNT_LOW, _FINAL_TRY, _LOCKED and
 *  the SO equivalents, HelloResult.token_flags) show the broker's failure
 *  count.  Login is stateless on the broker: C_Login (CKU_USER or CKU_SO)
 *  returns a ticket that every job of that login carries (docs/CONTRACTS.md);
 *  C_InitPIN needs the SO's, sign and decrypt the user's.
 *
 *  PIN functions (PKCS#11 2.40 §5.6): C_InitPIN in an SO R/W session;
 *  C_SetPIN in any R/W session, for the logged-in user type (CKU_USER when
 *  nobody is logged in).  PIN lengths outside the token's range fail
 *  locally with CKR_PIN_LEN_RANGE; CKR_PIN_INCORRECT / CKR_PIN_LOCKED come
 *  from the broker unchanged.
 */
#include <stdlib.h>
#include <string.h>
#include <openssl/crypto.h>
#include "cs_pin.h"
#include "cs_usage.h"
#include "log.h"
#include "attrs.h"
#include "mechanism.h"
#include "guard.h"
#include "login.h"
#include "runner.h"
#include "object.h"
#include "session.h"
#include "token.h"

typedef struct {
    CK_MECHANISM_TYPE type;
    CK_ULONG min_bits;
    CK_ULONG max_bits;
    CK_FLAGS flags;
} s_raw_mech_t;

static struct {
    bool have_hello;
    char label [33];
    char manufacturer [33];
    char model [17];
    char serial [17];
    s_raw_mech_t *mechs;        /* the boards' raw mechanisms */
    size_t n_mechs;
    CK_ULONG min_pin;
    CK_ULONG max_pin;
    CK_FLAGS pin_flags;         /* HelloResult.token_flags */
    CK_ULONG rsa_min_bits;      /* HelloResult.rsa_min_bits: keys/rsa-min-bits (0 = default) */
} s_token;

void
cs_token_reset_inlock (void)
{
    cs_login_logout_inlock ();
    free (s_token.mechs);
    memset (&s_token, 0, sizeof s_token);
}

static void
s_copy_text (char *out, size_t size, const char *text, const char *fallback)
{
    snprintf (out, size, "%s", text && *text ? text : fallback);
}

/*  Stores a HelloResult (under the mutex).  */
static CK_RV
s_store_hello_inlock (const Cs__HelloResult *hello)
{
    s_raw_mech_t *mechs = calloc (hello->n_mechanisms + 1, sizeof *mechs);
    if (!mechs)
        return CKR_HOST_MEMORY;
    for (size_t i = 0; i < hello->n_mechanisms; i++)
        mechs [i] = (s_raw_mech_t) { hello->mechanisms [i]->type, hello->mechanisms [i]->min_key_bits,
                                     hello->mechanisms [i]->max_key_bits, hello->mechanisms [i]->flags };
    free (s_token.mechs);
    s_token.mechs = mechs;
    s_token.n_mechs = hello->n_mechanisms;
    s_copy_text (s_token.label, sizeof s_token.label, hello->token_label, "cryptoserver");
    s_copy_text (s_token.manufacturer, sizeof s_token.manufacturer, hello->manufacturer, CS_MANUFACTURER);
    s_copy_text (s_token.model, sizeof s_token.model, hello->model, "broker");
    s_copy_text (s_token.serial, sizeof s_token.serial, hello->serial, "0");
    s_token.min_pin = hello->min_pin_len ? hello->min_pin_len : CS_PIN_MIN_LEN;
    s_token.max_pin = hello->max_pin_len ? hello->max_pin_len : CS_PIN_MAX_LEN;
    s_token.pin_flags = hello->token_flags & (CKF_USER_PIN_COUNT_LOW | CKF_USER_PIN_FINAL_TRY
        | CKF_USER_PIN_LOCKED | CKF_USER_PIN_TO_BE_CHANGED | CKF_SO_PIN_COUNT_LOW
        | CKF_SO_PIN_FINAL_TRY | CKF_SO_PIN_LOCKED | CKF_SO_PIN_TO_BE_CHANGED);
    s_token.rsa_min_bits = hello->rsa_min_bits;     /* 0 from older brokers: the default */
    cs_object_usage_set (hello->usage_separation == CS_USAGE_SPEC ? CS_USAGE_SPEC : CS_USAGE_STRICT);
    s_token.have_hello = true;
    return CKR_OK;
}

/*  Without the mutex: fetches and caches the HelloResult once.  */
static CK_RV
s_hello_ensure (void)
{
    CK_RV rv;
    bool have;
    Cs__Reply *reply = NULL;
    Cs__HelloJob hello = CS__HELLO_JOB__INIT;
    Cs__Job job = CS__JOB__INIT;
    cs_lock ();
    have = s_token.have_hello;
    cs_unlock ();
    if (have)
        return CKR_OK;
    job.kind_case = CS__JOB__KIND_HELLO;
    job.hello = &hello;
    rv = cs_runner_run_job (&job, false, &reply);
    if (rv == CKR_OK && reply->results [0]->kind_case != CS__RESULT__KIND_HELLO) {
        cs_log_error ("the broker answered hello without a hello result");
        rv = CKR_DEVICE_ERROR;
    }
    if (rv == CKR_OK) {
        cs_lock ();
        rv = s_store_hello_inlock (reply->results [0]->hello);
        cs_unlock ();
    }
    else
    if (reply)
        cs_log_error ("hello failed: %s", cs_rv_name (rv));
    if (reply)
        cs__reply__free_unpacked (reply, NULL);
    return rv;
}

static const s_raw_mech_t *
s_raw_mech_inlock (CK_MECHANISM_TYPE type)
{
    for (size_t i = 0; i < s_token.n_mechs; i++)
        if (s_token.mechs [i].type == type)
            return &s_token.mechs [i];
    return NULL;
}

/*  What the module offers for `entry` given the boards' raw mechanisms:
 *  false when the boards cannot run its job mechanism.  Verify and encrypt
 *  are local, so they come with sign and decrypt.  Key sizes: the table's
 *  range narrowed by the boards'; RSA generation as cs_mech_rsa_gen_range
 *  decides with the broker's keys/rsa-min-bits (the broker checks jobs with
 *  the same function and figures).  */
static bool
s_offer_inlock (const cs_mech_row_t *entry, CK_MECHANISM_INFO *info)
{
    const s_raw_mech_t *raw = NULL;
    memset (info, 0, sizeof *info);
    info->flags = entry->flags;
    if (cs_usage_unwrap_oracle (cs_object_usage (), entry->type))
        info->flags &= ~(CK_FLAGS) CKF_UNWRAP;  /* strict: no CBC-PAD unwrap (cs_usage.h) */
    info->ulMinKeySize = entry->min_bits;       /* local rows: the table's (0 for digests; */
    info->ulMaxKeySize = entry->max_bits;       /* secret-key generation: bytes) */
    if (!(entry->flags & CKF_HW))
        return true;    /* local digests, secret-key generation (wire 0 is also CKM_RSA_PKCS_KEY_PAIR_GEN) */
    if (!(raw = s_raw_mech_inlock (entry->wire)))
        return false;
    if (raw->flags & (CKF_SIGN | CKF_DECRYPT | CKF_GENERATE_KEY_PAIR)) {
        if (!(raw->flags & CKF_SIGN))
            info->flags &= ~(CK_FLAGS) (CKF_SIGN | CKF_SIGN_RECOVER);
        if (!(raw->flags & CKF_DECRYPT))
            info->flags &= ~(CK_FLAGS) CKF_DECRYPT;
    }
    info->ulMinKeySize = raw->min_bits > entry->min_bits ? raw->min_bits : entry->min_bits;
    info->ulMaxKeySize = raw->max_bits && raw->max_bits < entry->max_bits ? raw->max_bits : entry->max_bits;
    if (!entry->max_bits) {                 /* no key (vendor modexp): the boards' figures */
        info->ulMinKeySize = raw->min_bits;
        info->ulMaxKeySize = raw->max_bits;
    }
    if (entry->type == CKM_RSA_PKCS_KEY_PAIR_GEN)
        cs_mech_rsa_gen_range (s_token.rsa_min_bits, raw->min_bits, raw->max_bits,
                               &info->ulMinKeySize, &info->ulMaxKeySize);
    if (entry->key_type == CKK_EC)
        info->flags |= CKF_EC_F_P | CKF_EC_NAMEDCURVE | CKF_EC_UNCOMPRESS;
    return true;
}

/*  ---- entry points -------------------------------------------------- */

CK_RV
C_GetSlotList (CK_BBOOL token_present, CK_SLOT_ID_PTR slots, CK_ULONG_PTR count_p)
{
    CK_RV rv = cs_guard_check ();
    if (rv != CKR_OK)
        return rv;
    return_val_if_fail (count_p != NULL, CKR_ARGUMENTS_BAD);
    if (slots && *count_p < 1)
        rv = CKR_BUFFER_TOO_SMALL;
    else
    if (slots)
        slots [0] = CS_SLOT_ID;
    *count_p = 1;
    return rv;
}

CK_RV
C_GetSlotInfo (CK_SLOT_ID slot, CK_SLOT_INFO_PTR info)
{
    CK_RV rv = cs_guard_check ();
    if (rv != CKR_OK)
        return rv;
    return_val_if_fail (info != NULL, CKR_ARGUMENTS_BAD);
    if (slot != CS_SLOT_ID)
        return CKR_SLOT_ID_INVALID;
    memset (info, 0, sizeof *info);
    cs_pad (info->slotDescription, sizeof info->slotDescription, "cryptoserver broker");
    cs_pad (info->manufacturerID, sizeof info->manufacturerID, CS_MANUFACTURER);
    info->flags = CKF_TOKEN_PRESENT | CKF_HW_SLOT;
    info->hardwareVersion.minor = 1;
    info->firmwareVersion.minor = 1;
    return CKR_OK;
}

/*  The common start of the token calls: initialised, argument, slot, hello.  */
static CK_RV
s_slot_enter (CK_SLOT_ID slot, const void *arg)
{
    CK_RV rv = cs_guard_check ();
    if (rv != CKR_OK)
        return rv;
    return_val_if_fail (arg != NULL, CKR_ARGUMENTS_BAD);
    if (slot != CS_SLOT_ID)
        return CKR_SLOT_ID_INVALID;
    return s_hello_ensure ();
}

CK_RV
C_GetTokenInfo (CK_SLOT_ID slot, CK_TOKEN_INFO_PTR info)
{
    CK_RV rv = s_slot_enter (slot, info);
    if (rv != CKR_OK)
        return rv;
    memset (info, 0, sizeof *info);
    cs_lock ();
    cs_pad (info->label, sizeof info->label, s_token.label);
    cs_pad (info->manufacturerID, sizeof info->manufacturerID, s_token.manufacturer);
    cs_pad (info->model, sizeof info->model, s_token.model);
    cs_pad (info->serialNumber, sizeof info->serialNumber, s_token.serial);
    info->flags = CKF_TOKEN_INITIALIZED | CKF_LOGIN_REQUIRED | CKF_USER_PIN_INITIALIZED | CKF_RNG
                | CKF_ASYNC_SESSION_SUPPORTED       /* PKCS#11 3.2: async.h */
                | s_token.pin_flags;
    info->ulMaxSessionCount = CK_EFFECTIVELY_INFINITE;
    info->ulSessionCount = cs_session_count_inlock (0);
    info->ulMaxRwSessionCount = CK_EFFECTIVELY_INFINITE;
    info->ulRwSessionCount = cs_session_count_inlock (CKF_RW_SESSION);
    info->ulMinPinLen = s_token.min_pin;
    info->ulMaxPinLen = s_token.max_pin;
    info->ulTotalPublicMemory = CK_UNAVAILABLE_INFORMATION;
    info->ulFreePublicMemory = CK_UNAVAILABLE_INFORMATION;
    info->ulTotalPrivateMemory = CK_UNAVAILABLE_INFORMATION;
    info->ulFreePrivateMemory = CK_UNAVAILABLE_INFORMATION;
    info->hardwareVersion.minor = 1;
    info->firmwareVersion.minor = 1;
    cs_pad (info->utcTime, sizeof info->utcTime, "");
    cs_unlock ();
    return CKR_OK;
}

CK_RV
C_GetMechanismList (CK_SLOT_ID slot, CK_MECHANISM_TYPE_PTR list, CK_ULONG_PTR count_p)
{
    size_t n_table, count = 0;
    const cs_mech_row_t *table = cs_mech_rows (&n_table);
    CK_MECHANISM_INFO info;
    CK_RV rv = s_slot_enter (slot, count_p);
    if (rv != CKR_OK)
        return rv;
    cs_lock ();
    for (size_t i = 0; i < n_table; i++)
        if (s_offer_inlock (&table [i], &info)) {
            if (list && count < *count_p)
                list [count] = table [i].type;
            count++;
        }
    cs_unlock ();
    if (list && count > *count_p)
        rv = CKR_BUFFER_TOO_SMALL;
    *count_p = count;
    return rv;
}

CK_RV
cs_token_mechanism (CK_MECHANISM_TYPE type, CK_MECHANISM_INFO *info)
{
    const cs_mech_row_t *entry = cs_mech_row (type);
    CK_MECHANISM_INFO scratch;
    CK_RV rv = s_hello_ensure ();
    if (rv != CKR_OK)
        return rv;
    cs_lock ();
    if (!entry || !s_offer_inlock (entry, info ? info : &scratch))
        rv = CKR_MECHANISM_INVALID;
    cs_unlock ();
    return rv;
}

CK_RV
C_GetMechanismInfo (CK_SLOT_ID slot, CK_MECHANISM_TYPE type, CK_MECHANISM_INFO_PTR info)
{
    CK_RV rv = s_slot_enter (slot, info);
    return rv != CKR_OK ? rv : cs_token_mechanism (type, info);
}

/*  Under the mutex: may `user_type` log in now?  PKCS#11 2.40 §5.6 C_Login.  */
static CK_RV
s_login_allowed_inlock (CK_USER_TYPE user_type)
{
    bool user = cs_login_user_logged_in_inlock (), so = cs_login_so_logged_in_inlock ();
    bool same = user_type == CKU_USER ? user : so;
    bool other = user_type == CKU_USER ? so : user;
    if (same)
        return CKR_USER_ALREADY_LOGGED_IN;
    if (other)
        return CKR_USER_ANOTHER_ALREADY_LOGGED_IN;
    if (user_type == CKU_SO && cs_session_count_inlock (0) != cs_session_count_inlock (CKF_RW_SESSION))
        return CKR_SESSION_READ_ONLY_EXISTS;
    return CKR_OK;
}

/*  Under the mutex: records a successful login and its ticket.  */
static CK_RV
s_login_store_inlock (CK_USER_TYPE user_type, const Cs__Result *result)
{
    if (result->kind_case != CS__RESULT__KIND_LOGIN || !result->login
    ||  result->login->ticket.len == 0 || result->login->ticket.len > CS_WIRE_MAX_TICKET) {
        cs_log_error ("the broker answered login without a usable ticket");
        return CKR_DEVICE_ERROR;
    }
    return cs_token_login_store_inlock (user_type, result->login->ticket.data, result->login->ticket.len);
}

CK_RV
cs_token_login_store_inlock (CK_USER_TYPE user_type, const uint8_t *ticket, size_t len)
{
    CK_RV rv = cs_login_store_inlock (user_type, ticket, len);
    if (rv == CKR_OK)
        cs_object_invalidate_inlock ();        /* the key list may differ once logged in */
    return rv;
}

/*  PKCS#11 2.40 §5.6 C_Login (CKU_CONTEXT_SPECIFIC): the user's PIN again
 *  for the session's sign, decrypt or sign-recover operation whose key has
 *  CKA_ALWAYS_AUTHENTICATE (§4.9).  The broker checks it like a user login
 *  (wrong PINs count) and answers a context ticket for that key, which the
 *  operation's job carries once (session.h, docs/CONTRACTS.md
 *  "Context-specific login").  CKR_USER_NOT_LOGGED_IN (no user login),
 *  CKR_OPERATION_NOT_INITIALIZED (no operation needs it), CKR_ARGUMENTS_BAD,
 *  CKR_PIN_LEN_RANGE, CKR_PIN_INCORRECT, CKR_PIN_LOCKED, the job's.  */
static CK_RV
s_login_context (CK_SESSION_HANDLE handle, CK_UTF8CHAR_PTR pin, CK_ULONG pin_len)
{
    cs_session_t *session;
    cs_session_context_t asked;
    cs_op_kind_t kind = CS_OP_SIGN;
    Cs__Reply *reply = NULL;
    Cs__LoginJob login = CS__LOGIN_JOB__INIT;
    Cs__Job job = CS__JOB__INIT;
    CK_RV rv;
    CS_BEGIN_SESSION_CALL (rv, handle, &session);
    if (!cs_login_user_logged_in_inlock ())
        rv = CKR_USER_NOT_LOGGED_IN;
    else
    if ((rv = cs_session_context_find_inlock (session, &kind, &asked)) != CKR_OK)
        ;
    else
    if (!pin)
        rv = CKR_ARGUMENTS_BAD;
    else
    if (pin_len == 0 || pin_len > CS_PIN_MAX_LEN)
        rv = CKR_PIN_LEN_RANGE;
    CS_END_CALL ();
    if (rv != CKR_OK)
        return rv;
    login.user_type = CKU_CONTEXT_SPECIFIC;
    login.pin = (ProtobufCBinaryData) { pin_len, pin };
    login.key_id = (ProtobufCBinaryData) { asked.ref_len, asked.ref };
    job.kind_case = CS__JOB__KIND_LOGIN;
    job.login = &login;
    rv = cs_runner_run_job (&job, true, &reply);       /* the user's ticket: a context login needs one */
    const Cs__Result *result = rv == CKR_OK ? reply->results [0] : NULL;
    if (result && (result->kind_case != CS__RESULT__KIND_LOGIN || !result->login
                   || result->login->ticket.len == 0 || result->login->ticket.len > CS_CONTEXT_TICKET_MAX))
        rv = CKR_DEVICE_ERROR;
    cs_lock ();
    if (rv == CKR_OK && (session = cs_session_lookup_inlock (handle)))
        cs_session_context_put_inlock (session, kind, &asked, result->login->ticket.data, result->login->ticket.len);
    if (reply)
        s_token.have_hello = false;     /* the PIN flags may have changed */
    cs_unlock ();
    if (reply)
        cs__reply__free_unpacked (reply, NULL);
    OPENSSL_cleanse (&asked, sizeof asked);
    return rv;
}

/*  PKCS#11 2.40 §5.6.  The LoginJob runs without the mutex; if the session
 *  was closed meanwhile the login is not kept and the answer is
 *  CKR_SESSION_CLOSED (the spec's code for a session closed during the
 *  call): had it been the last session, keeping the login would outlive
 *  the logout that closing it means.  */
CK_RV
C_Login (CK_SESSION_HANDLE handle, CK_USER_TYPE user_type, CK_UTF8CHAR_PTR pin, CK_ULONG pin_len)
{
    cs_session_t *session;
    Cs__Reply *reply = NULL;
    Cs__LoginJob login = CS__LOGIN_JOB__INIT;
    Cs__Job job = CS__JOB__INIT;
    CK_RV rv;
    if (user_type == CKU_CONTEXT_SPECIFIC)
        return s_login_context (handle, pin, pin_len);
    CS_BEGIN_SESSION_CALL (rv, handle, &session);
    if (user_type != CKU_USER && user_type != CKU_SO)
        rv = CKR_USER_TYPE_INVALID;
    else
    if (!pin)
        rv = CKR_ARGUMENTS_BAD;     /* no protected authentication path */
    else
    if (pin_len == 0 || pin_len > CS_PIN_MAX_LEN)
        rv = CKR_PIN_LEN_RANGE;
    else
        rv = s_login_allowed_inlock (user_type);
    CS_END_CALL ();
    if (rv != CKR_OK)
        return rv;
    login.user_type = user_type;
    login.pin.data = pin;
    login.pin.len = pin_len;
    job.kind_case = CS__JOB__KIND_LOGIN;
    job.login = &login;
    rv = cs_runner_run_job (&job, false, &reply);
    cs_lock ();
    if (rv == CKR_OK && !cs_session_lookup_inlock (handle))
        rv = CKR_SESSION_CLOSED;    /* closed meanwhile: perhaps the last one, which logged out (§5.6) */
    else
    if (rv == CKR_OK && (rv = s_login_allowed_inlock (user_type)) != CKR_OK)
        ;       /* another thread logged in meanwhile: its login stands */
    else
    if (rv == CKR_OK)
        rv = s_login_store_inlock (user_type, reply->results [0]);
    if (reply)
        s_token.have_hello = false;     /* the PIN flags may have changed */
    cs_unlock ();
    if (reply)
        cs__reply__free_unpacked (reply, NULL);
    return rv;
}

/*  PKCS#11 3.0 §5.6 C_LoginUser.  The token has one user per role (the
 *  tenant of this client's key), so there are no user names: an absent or
 *  empty one is C_Login; any other is CKR_ARGUMENTS_BAD after the session
 *  check.  */
CK_RV
cs_token_login_user (CK_SESSION_HANDLE handle, CK_USER_TYPE user_type, CK_UTF8CHAR_PTR pin, CK_ULONG pin_len,
                     CK_UTF8CHAR_PTR username, CK_ULONG username_len)
{
    CK_RV rv;
    if (!username || username_len == 0)
        return C_Login (handle, user_type, pin, pin_len);
    if ((rv = cs_session_check (handle)) != CKR_OK)
        return rv;
    cs_log_debug ("C_LoginUser: this token has no user names");
    return CKR_ARGUMENTS_BAD;
}

CK_RV
C_Logout (CK_SESSION_HANDLE handle)
{
    cs_session_t *session;
    CK_RV rv;
    CS_BEGIN_SESSION_CALL (rv, handle, &session);
    if (!cs_login_user_logged_in_inlock () && !cs_login_so_logged_in_inlock ())
        rv = CKR_USER_NOT_LOGGED_IN;
    else {
        cs_login_logout_inlock ();
        cs_object_logged_out_inlock ();
    }
    CS_END_CALL ();
    return rv;
}

/*  Under the mutex: is a new PIN of `len` bytes within the token's range?  */
static bool
s_pin_len_ok_inlock (CK_ULONG len)
{
    CK_ULONG min = s_token.have_hello ? s_token.min_pin : CS_PIN_MIN_LEN;
    CK_ULONG max = s_token.have_hello ? s_token.max_pin : CS_PIN_MAX_LEN;
    return len >= min && len <= max;
}

/*  Runs a PIN job with the current login's ticket; without the mutex.  */
static CK_RV
s_pin_job (Cs__Job *job)
{
    Cs__Reply *reply = NULL;
    CK_RV rv = cs_runner_run_job (job, true, &reply);
    if (reply) {
        cs_lock ();
        s_token.have_hello = false;     /* the PIN flags may have changed */
        cs_unlock ();
        cs__reply__free_unpacked (reply, NULL);
    }
    return rv;
}

/*  PKCS#11 2.40 §5.6: the SO sets the user's PIN (and so clears its lock).  */
CK_RV
C_InitPIN (CK_SESSION_HANDLE handle, CK_UTF8CHAR_PTR pin, CK_ULONG pin_len)
{
    cs_session_t *session;
    Cs__InitPinJob init = CS__INIT_PIN_JOB__INIT;
    Cs__Job job = CS__JOB__INIT;
    CK_RV rv;
    CS_BEGIN_SESSION_CALL (rv, handle, &session);
    if (!pin && pin_len)
        rv = CKR_ARGUMENTS_BAD;
    else
    if (!(cs_session_flags_inlock (session) & CKF_RW_SESSION))
        rv = CKR_SESSION_READ_ONLY;
    else
    if (!cs_login_so_logged_in_inlock ())
        rv = CKR_USER_NOT_LOGGED_IN;
    else
    if (!s_pin_len_ok_inlock (pin_len))
        rv = CKR_PIN_LEN_RANGE;
    CS_END_CALL ();
    if (rv != CKR_OK)
        return rv;
    init.pin = (ProtobufCBinaryData) { pin_len, pin };
    job.kind_case = CS__JOB__KIND_INIT_PIN;
    job.init_pin = &init;
    return s_pin_job (&job);
}

/*  PKCS#11 2.40 §5.6: changes the PIN of the logged-in user type, or of
 *  CKU_USER when nobody is logged in.  */
CK_RV
C_SetPIN (CK_SESSION_HANDLE handle, CK_UTF8CHAR_PTR old_pin, CK_ULONG old_len,
          CK_UTF8CHAR_PTR new_pin, CK_ULONG new_len)
{
    cs_session_t *session;
    Cs__SetPinJob set = CS__SET_PIN_JOB__INIT;
    Cs__Job job = CS__JOB__INIT;
    CK_RV rv;
    CS_BEGIN_SESSION_CALL (rv, handle, &session);
    if ((!old_pin && old_len) || (!new_pin && new_len))
        rv = CKR_ARGUMENTS_BAD;
    else
    if (!(cs_session_flags_inlock (session) & CKF_RW_SESSION))
        rv = CKR_SESSION_READ_ONLY;
    else
    if (old_len > CS_WIRE_MAX_PIN || !s_pin_len_ok_inlock (new_len))
        rv = CKR_PIN_LEN_RANGE;
    set.user_type = cs_login_so_logged_in_inlock () ? CKU_SO : CKU_USER;
    CS_END_CALL ();
    if (rv != CKR_OK)
        return rv;
    set.old_pin = (ProtobufCBinaryData) { old_len, old_pin };
    set.new_pin = (ProtobufCBinaryData) { new_len, new_pin };
    job.kind_case = CS__JOB__KIND_SET_PIN;
    job.set_pin = &set;
    return s_pin_job (&job);
}
