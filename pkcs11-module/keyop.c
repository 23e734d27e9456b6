/*  keyop.c — the shared start of key operations (keyop.h).  */
#include "log.h"
#include "guard.h"
#include "login.h"
#include "keyop.h"

/*  A sign, decrypt or sign-recover operation on a key with
 *  CKA_ALWAYS_AUTHENTICATE needs a C_Login (CKU_CONTEXT_SPECIFIC) before its
 *  job (session.h).  A key the module holds (a per-request key) has no job
 *  id: its login checks the PIN, and the module alone keeps the rule (the
 *  key is in the application's process anyway).  */
static void
s_context_start_inlock (cs_session_t *session, cs_op_kind_t kind, CK_OBJECT_HANDLE key_handle, const cs_key_t *key)
{
    static const uint8_t module_held [] = "module";
    size_t len = 0;
    const uint8_t *ref = NULL;
    if (kind != CS_OP_SIGN && kind != CS_OP_DECRYPT && kind != CS_OP_SIGN_RECOVER)
        return;
    if (cs_object_flag_inlock (key_handle, CKA_ALWAYS_AUTHENTICATE, false)) {
        ref = key->pkcs8 ? NULL : cs_key_job_id (key, &len);
        if (!ref || !len) {
            ref = module_held;
            len = sizeof module_held - 1;
        }
    }
    cs_session_context_start_inlock (session, kind, ref, len);
}

/*  Under the mutex: a raw RSA sign, sign-recover or decrypt needs both
 *  roles under the strict policy (cs_usage_mech_check); public operations
 *  pass.  */
static CK_RV
s_raw_check_inlock (CK_OBJECT_HANDLE key_handle, CK_FLAGS want, CK_MECHANISM_TYPE mechanism)
{
    if (!(want & (CKF_SIGN | CKF_SIGN_RECOVER | CKF_DECRYPT)))
        return CKR_OK;
    return cs_usage_mech_check (cs_object_usage (), cs_object_roles_inlock (key_handle), mechanism);
}

CK_RV
cs_keyop_init (CK_SESSION_HANDLE handle, cs_op_kind_t kind, CK_FLAGS want, const CK_MECHANISM *mech,
               CK_OBJECT_HANDLE key_handle, cs_keyop_new_fn *new_fn, cs_op_free_fn *free_fn)
{
    cs_session_t *session;
    cs_key_t *key = NULL;
    void *op = NULL;
    CK_RV rv;
    return_val_if_fail (mech != NULL, CKR_ARGUMENTS_BAD);
    CS_BEGIN_SESSION_CALL (rv, handle, &session);
    if (cs_session_op_inlock (session, kind))
        rv = CKR_OPERATION_ACTIVE;
    else
    if ((rv = cs_object_login_check_inlock (key_handle, want)) == CKR_OK     /* private, or held by the broker */
    &&  (rv = cs_object_use_inlock (key_handle, want, &key)) == CKR_OK
    &&  (rv = s_raw_check_inlock (key_handle, want, mech->mechanism)) == CKR_OK
    &&  (rv = cs_object_mech_allowed_inlock (key_handle, mech->mechanism) ? CKR_OK : CKR_MECHANISM_INVALID) == CKR_OK
    &&  (rv = new_fn (mech, key, want, &op)) == CKR_OK
    &&  (rv = cs_session_op_start_inlock (session, kind, op, free_fn)) == CKR_OK) {
        op = NULL;
        s_context_start_inlock (session, kind, key_handle, key);
    }
    CS_END_CALL ();
    if (op)
        free_fn (op);
    cs_key_unref (&key);
    return rv;
}

void
cs_keyop_job_key (const cs_key_t *key, ProtobufCBinaryData *key_id, ProtobufCBinaryData *key_pkcs8)
{
    size_t len = 0;
    if (key->pkcs8) {
        key_pkcs8->data = key->pkcs8;
        key_pkcs8->len = key->pkcs8_len;
        return;
    }
    key_id->data = (uint8_t *) cs_key_job_id (key, &len);
    key_id->len = len;
}

void
cs_keyop_job_mechanism (CK_MECHANISM_TYPE wire, const cs_mech_params_t *params, Cs__Mechanism *mech)
{
    mech->type = wire;
    mech->hash = params->hash;
    mech->mgf = params->mgf;
    mech->salt_len = params->salt_len;
    mech->oaep_label.data = params->label;
    mech->oaep_label.len = params->label_len;
    mech->hedge = params->hedge;                    /* CKM_ML_DSA (issue #23) */
    mech->context.data = params->context;
    mech->context.len = params->context_len;
}
