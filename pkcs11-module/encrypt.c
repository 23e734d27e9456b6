/*  encrypt.c — encryption (PKCS#11 2.40 §5.8): C_EncryptInit, C_Encrypt,
 *  C_EncryptUpdate, C_EncryptFinal.  A public key (RSA) encrypts here with
 *  OpenSSL 3, in the module: it needs no secret (docs/DESIGN.md §1); a
 *  secret key's operation goes to the broker (secret.h, multi-part streams
 *  in secret_stream.c).  The decryption functions are decrypt.c.
 */
#include <stdlib.h>
#include <string.h>
#include <openssl/evp.h>
#include <openssl/rsa.h>
#include "guard.h"
#include "keyder.h"
#include "keyop.h"
#include "log.h"
#include "mechanism.h"
#include "secret.h"
#include "session.h"

typedef struct {
    cs_key_t *key;
    const cs_mech_row_t *mech;
    cs_mech_params_t params;
} cs_encrypt_op_t;

static void
s_encrypt_op_free (void *op)
{
    cs_encrypt_op_t *self = op;
    if (!self)
        return;
    cs_key_unref (&self->key);
    cs_mech_params_clear (&self->params);
    free (self);
}

static CK_RV
s_encrypt_op_new (const CK_MECHANISM *mech, cs_key_t *key, CK_FLAGS want, void **op_p)
{
    CK_RV rv;
    const cs_mech_row_t *entry = cs_mech_row (mech->mechanism);
    cs_encrypt_op_t *op;
    if (!entry || !(entry->flags & want))
        return CKR_MECHANISM_INVALID;
    if (!(op = calloc (1, sizeof *op)))
        return CKR_HOST_MEMORY;
    op->key = cs_key_ref (key);
    op->mech = entry;
    if ((rv = cs_mech_check (entry, mech, key->key_type, key->modulus_len, &op->params)) == CKR_OK)
        *op_p = op;
    else
        s_encrypt_op_free (op);
    return rv;
}

/*  PKCS#11 2.40 §5.8.  */
CK_RV
C_EncryptInit (CK_SESSION_HANDLE handle, CK_MECHANISM_PTR mech, CK_OBJECT_HANDLE key_handle)
{
    if (cs_secret_mech (mech))
        return cs_secret_init (handle, CS_OP_ENCRYPT, CKF_ENCRYPT, mech, key_handle);
    return cs_keyop_init (handle, CS_OP_ENCRYPT, CKF_ENCRYPT, mech, key_handle, s_encrypt_op_new,
                          s_encrypt_op_free);
}

/*  The plaintext length against the row's input rule (cs_mech.h; RFC 8017
 *  §7.1.1, §7.2.1): CKR_OK or CKR_DATA_LEN_RANGE.  */
static CK_RV
s_encrypt_len_ok (const cs_encrypt_op_t *op, size_t len)
{
    const EVP_MD *md = op->params.hash ? cs_mech_md (op->params.hash) : NULL;
    return cs_mech_input_check (op->mech, true, len, op->key->modulus_len,
                                md ? (size_t) EVP_MD_get_size (md) : 0);
}

static CK_RV
s_encrypt (const cs_encrypt_op_t *op, const uint8_t *data, size_t len, uint8_t *out, CK_ULONG_PTR out_len_p)
{
    CK_RV rv = CKR_FUNCTION_FAILED;
    EVP_PKEY *pkey = cs_keyder_public_pkey (op->key);
    EVP_PKEY_CTX *ctx = pkey ? EVP_PKEY_CTX_new_from_pkey (NULL, pkey, NULL) : NULL;
    size_t out_len = op->key->modulus_len;
    bool oaep = op->mech->wire == CKM_RSA_PKCS_OAEP, raw = op->mech->wire == CKM_RSA_X_509;
    uint8_t block [CS_MAX_RSA_BYTES];
    if (!ctx || EVP_PKEY_encrypt_init (ctx) <= 0
    ||  EVP_PKEY_CTX_set_rsa_padding (ctx, oaep ? RSA_PKCS1_OAEP_PADDING
                                      : raw ? RSA_NO_PADDING : RSA_PKCS1_PADDING) <= 0)
        goto out;
    if (raw) {                      /* a k-byte integer, left-padded (PKCS#11 2.40 §2.1.10) */
        if (len > out_len || out_len > sizeof block)
            goto out;
        memset (block, 0, out_len - len);
        if (len)
            memcpy (block + out_len - len, data, len);
        data = block;
        len = out_len;
    }
    if (oaep && (EVP_PKEY_CTX_set_rsa_oaep_md (ctx, cs_mech_md (op->params.hash)) <= 0
              || EVP_PKEY_CTX_set_rsa_mgf1_md (ctx, cs_mech_mgf_md (op->params.mgf)) <= 0))
        goto out;
    if (oaep && op->params.label_len) {
        void *label = OPENSSL_memdup (op->params.label, op->params.label_len);
        if (!label || EVP_PKEY_CTX_set0_rsa_oaep_label (ctx, label, (int) op->params.label_len) <= 0) {
            OPENSSL_free (label);
            goto out;
        }
    }
    if (EVP_PKEY_encrypt (ctx, out, &out_len, data, len) <= 0) {
        rv = raw ? CKR_DATA_INVALID : CKR_FUNCTION_FAILED;     /* raw: not below the modulus */
        goto out;
    }
    *out_len_p = out_len;
    rv = CKR_OK;
out:
    EVP_PKEY_CTX_free (ctx);
    EVP_PKEY_free (pkey);
    return rv;
}

CK_RV
cs_keyop_public_encrypt (cs_key_t *key, const cs_mech_row_t *mech, const cs_mech_params_t *params,
                         const uint8_t *data, size_t len, uint8_t *out, CK_ULONG_PTR out_len_p)
{
    cs_encrypt_op_t op = { .key = key, .mech = mech, .params = *params };
    CK_RV rv = s_encrypt_len_ok (&op, len);
    return rv == CKR_OK ? s_encrypt (&op, data, len, out, out_len_p) : rv;
}

CK_RV
C_Encrypt (CK_SESSION_HANDLE handle, CK_BYTE_PTR data, CK_ULONG len, CK_BYTE_PTR out, CK_ULONG_PTR out_len_p)
{
    if (cs_secret_active (handle, CS_OP_ENCRYPT))
        return cs_secret_finish (handle, CS_OP_ENCRYPT, false, data, len, out, out_len_p);
    cs_session_t *session;
    cs_encrypt_op_t *op;
    CK_RV rv;
    CS_BEGIN_OP_CALL (rv, handle, CS_OP_ENCRYPT, out_len_p != NULL && (data || !len),
                          &session, (void **) &op);
    if (!out || *out_len_p < op->key->modulus_len) {
        rv = out ? CKR_BUFFER_TOO_SMALL : CKR_OK;
        *out_len_p = op->key->modulus_len;
        CS_END_CALL ();
        return rv;
    }
    op = cs_session_op_take_inlock (session, CS_OP_ENCRYPT);
    CS_END_CALL ();
    if ((rv = s_encrypt_len_ok (op, len)) == CKR_OK)
        rv = s_encrypt (op, data, len, out, out_len_p);
    s_encrypt_op_free (op);
    return rv;
}

CK_RV
C_EncryptUpdate (CK_SESSION_HANDLE handle, CK_BYTE_PTR data, CK_ULONG len, CK_BYTE_PTR out, CK_ULONG_PTR out_len_p)
{
    return cs_secret_multipart_update (handle, CS_OP_ENCRYPT, data, len, out, out_len_p);
}

CK_RV
C_EncryptFinal (CK_SESSION_HANDLE handle, CK_BYTE_PTR out, CK_ULONG_PTR out_len_p)
{
    return cs_secret_multipart_final (handle, CS_OP_ENCRYPT, out, out_len_p);
}
