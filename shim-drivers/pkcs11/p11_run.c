/*  p11_run.c — running an operation on a pkcs11 board (p11_int.h): sign,
 *  decrypt and derive on a resident key or imported key material, natively
 *  or through the fallbacks for what SoftHSM 2.6 lacks (OAEP other than
 *  SHA-1: raw RSA + OpenSSL unpadding; PSS whose MGF1 hash differs: OpenSSL
 *  encodes EMSA-PSS, the board runs raw RSA; ECDH: C_DeriveKey with
 *  CKD_NULL into a throw-away secret whose value is Z).
 */
#include <string.h>
#include <openssl/crypto.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include "cs_util.h"
#include "cs_wire.h"          /* cs_rv_name */
#include "p11_int.h"

/*  Runs C_XxxInit + C_Xxx once; `sign` picks C_Sign over C_Decrypt.  Empty
 *  input (in may be NULL then: protobuf-c's empty bytes) goes as a non-NULL
 *  pointer: SoftHSM 2.6 answers C_Sign/C_Decrypt (NULL, 0) with
 *  CKR_ARGUMENTS_BAD and leaves the operation active, so every later job on
 *  this worker's session failed with CKR_OPERATION_ACTIVE (found by
 *  tests/fuzz/cs-fuzz-frames).  */
static CK_RV
s_run (cs_drv_session_t *self, CK_OBJECT_HANDLE obj, CK_MECHANISM *mech, bool sign,
       const unsigned char *in, size_t in_len, unsigned char *out, size_t *out_len)
{
    static const unsigned char empty [1];
    CK_FUNCTION_LIST_PTR fl = self->board->fl;
    CK_ULONG len = *out_len;
    if (!in)
        in = empty;
    CK_RV rv = sign ? fl->C_SignInit (self->handle, mech, obj)
                    : fl->C_DecryptInit (self->handle, mech, obj);
    if (rv != CKR_OK)
        return rv;
    rv = sign ? fl->C_Sign (self->handle, (CK_BYTE_PTR) in, in_len, out, &len)
              : fl->C_Decrypt (self->handle, (CK_BYTE_PTR) in, in_len, out, &len);
    if (rv == CKR_BUFFER_TOO_SMALL) {       /* the operation stays active: end it */
        unsigned char scratch [2048];
        CK_ULONG big = sizeof scratch;
        if (sign) fl->C_Sign (self->handle, (CK_BYTE_PTR) in, in_len, scratch, &big);
        else fl->C_Decrypt (self->handle, (CK_BYTE_PTR) in, in_len, scratch, &big);
        OPENSSL_cleanse (scratch, sizeof scratch);
    }
    if (rv == CKR_OK)
        *out_len = len;
    return rv;
}

/*  How an operation runs on the board.  */
typedef enum {
    S_NATIVE,                       /* the mechanism as given */
    S_OAEP_RAW,                     /* CKM_RSA_X_509 decrypt, then OpenSSL removes OAEP */
    S_PSS_RAW,                      /* OpenSSL encodes EMSA-PSS, then CKM_RSA_X_509 sign */
    S_DERIVE                        /* CKM_ECDH1_DERIVE with CKD_NULL: the raw Z */
} s_path_t;

/*  An operation to run on a key: the mechanism, the data, and the path
 *  (native, or one of the fallbacks for what the board lacks).  */
typedef struct {
    CK_MECHANISM mech;
    bool sign;
    s_path_t path;
    const cs_drv_mech_t *params;        /* S_OAEP_RAW, S_PSS_RAW: hash, MGF, salt, label */
    const unsigned char *in;        /* S_DERIVE: the peer point 04||X||Y */
    size_t in_len;
    unsigned char *out;
    size_t *out_len;
} s_op_t;

/*  OAEP that the board cannot do natively: raw RSA on the board, then
 *  OpenSSL removes the padding.  The raw block is left-padded to k bytes.  */
static CK_RV
s_run_oaep_raw (cs_drv_session_t *self, CK_OBJECT_HANDLE obj, size_t k, const s_op_t *op)
{
    if (op->in_len != k || k == 0 || k > 1024)
        return CKR_ENCRYPTED_DATA_LEN_RANGE;
    unsigned char raw [1024], em [1024];
    size_t raw_len = sizeof raw;
    CK_MECHANISM m = { CKM_RSA_X_509, NULL, 0 };
    CK_RV rv = s_run (self, obj, &m, false, op->in, op->in_len, raw, &raw_len);
    if (rv == CKR_OK && raw_len > k)
        rv = CKR_ENCRYPTED_DATA_INVALID;
    if (rv == CKR_OK) {
        memset (em, 0, k - raw_len);
        memcpy (em + k - raw_len, raw, raw_len);
        rv = drv_oaep_unpad (em, k, op->params, op->out, op->out_len);
    }
    OPENSSL_cleanse (raw, sizeof raw);
    OPENSSL_cleanse (em, sizeof em);
    return rv;
}

/*  PSS that the board cannot do natively (SoftHSM 2.6 wants the MGF1 hash
 *  equal to the hash): OpenSSL makes EM (RFC 8017 §9.1.1) and the board
 *  runs the RSA private-key primitive on it (CKM_RSA_X_509).  */
static CK_RV
s_run_pss_raw (cs_drv_session_t *self, CK_OBJECT_HANDLE obj, size_t bits, const s_op_t *op)
{
    size_t k = (bits + 7) / 8;
    unsigned char em [1024];
    if (k == 0 || k > sizeof em)
        return CKR_KEY_SIZE_RANGE;
    CK_MECHANISM m = { CKM_RSA_X_509, NULL, 0 };
    CK_RV rv = drv_pss_encode (op->params, op->in, op->in_len, bits, em, k);
    if (rv == CKR_OK)
        rv = s_run (self, obj, &m, true, em, k, op->out, op->out_len);
    OPENSSL_cleanse (em, sizeof em);
    return rv;
}

/*  Reads CKA_VALUE of a derived secret into op->out and destroys it.  */
static CK_RV
s_take_secret (cs_drv_session_t *self, CK_OBJECT_HANDLE secret, const s_op_t *op)
{
    CK_FUNCTION_LIST_PTR fl = self->board->fl;
    unsigned char value [256];
    CK_ATTRIBUTE attr = { CKA_VALUE, value, sizeof value };
    CK_RV rv = fl->C_GetAttributeValue (self->handle, secret, &attr, 1);
    fl->C_DestroyObject (self->handle, secret);
    if (rv == CKR_OK && attr.ulValueLen > *op->out_len)
        rv = CKR_BUFFER_TOO_SMALL;
    if (rv == CKR_OK) {
        memcpy (op->out, value, attr.ulValueLen);
        *op->out_len = attr.ulValueLen;
    }
    else
    if (rv != CKR_BUFFER_TOO_SMALL)
        rv = CKR_DEVICE_ERROR;
    OPENSSL_cleanse (value, sizeof value);
    return rv;
}

/*  ECDH on the board: C_DeriveKey with CKD_NULL into a session secret key
 *  of the field size (not sensitive, extractable: it must come out, as Z),
 *  read and destroyed at once.  The peer point goes as a DER OCTET STRING
 *  (PKCS#11 2.40 §2.3.14 allows either form; SoftHSM takes both); a token
 *  that refuses it gets the raw point.  */
static CK_RV
s_run_derive (cs_drv_session_t *self, CK_OBJECT_HANDLE obj, const s_op_t *op)
{
    size_t der_len = 0;
    unsigned char *der = cs_der_octet_string (op->in, op->in_len, &der_len);
    CK_ECDH1_DERIVE_PARAMS params = { CKD_NULL, 0, NULL, der_len, der };
    CK_MECHANISM mech = { CKM_ECDH1_DERIVE, &params, sizeof params };
    CK_OBJECT_CLASS cls = CKO_SECRET_KEY;
    CK_KEY_TYPE type = CKK_GENERIC_SECRET;
    CK_ULONG len = (op->in_len - 1) / 2;
    CK_BBOOL yes = CK_TRUE, no = CK_FALSE;
    CK_ATTRIBUTE tmpl [] = {
        { CKA_CLASS, &cls, sizeof cls }, { CKA_KEY_TYPE, &type, sizeof type },
        { CKA_TOKEN, &no, sizeof no }, { CKA_PRIVATE, &yes, sizeof yes },
        { CKA_SENSITIVE, &no, sizeof no }, { CKA_EXTRACTABLE, &yes, sizeof yes },
        { CKA_VALUE_LEN, &len, sizeof len },
    };
    CK_OBJECT_HANDLE secret = CK_INVALID_HANDLE;
    if (!der)
        return CKR_HOST_MEMORY;
    CK_RV rv = self->board->fl->C_DeriveKey (self->handle, &mech, obj, tmpl, 7, &secret);
    if (rv == CKR_MECHANISM_PARAM_INVALID || rv == CKR_ARGUMENTS_BAD) {
        params.ulPublicDataLen = op->in_len;
        params.pPublicData = (CK_BYTE_PTR) op->in;
        rv = self->board->fl->C_DeriveKey (self->handle, &mech, obj, tmpl, 7, &secret);
    }
    free (der);
    if (rv != CKR_OK)
        return rv == CKR_ARGUMENTS_BAD ? CKR_MECHANISM_PARAM_INVALID : rv;
    return s_take_secret (self, secret, op);
}

/*  Refuses what the board may mis-report: a mechanism for another key type
 *  (PKCS#11 2.40 §5.11 C_SignInit, §5.9 C_DecryptInit:
 *  CKR_KEY_TYPE_INCONSISTENT), and PSS input that is not one hash long
 *  (PKCS#11 2.40 curr. mech. "PKCS #1 RSA PSS": the input is the hash;
 *  C_Sign: CKR_DATA_LEN_RANGE), as the openssl driver does (drv_evp.c).
 *  SoftHSM 2.6 takes both and fails in C_Sign with
 *  CKR_GENERAL_ERROR.  `type` CKK_VENDOR_DEFINED (unknown) leaves the type
 *  to the board.  */
static CK_RV
s_op_check (const s_op_t *op, CK_KEY_TYPE type)
{
    CK_KEY_TYPE want = CKK_VENDOR_DEFINED;
    switch (op->mech.mechanism) {
        case CKM_RSA_PKCS: case CKM_RSA_PKCS_PSS: case CKM_RSA_X_509: case CKM_RSA_PKCS_OAEP:
            want = CKK_RSA;
            break;
        case CKM_ECDSA: case CKM_ECDH1_DERIVE:
            want = CKK_EC;
            break;
        case CKM_EDDSA:
            want = CKK_EC_EDWARDS;
            break;
    }
    if (type != CKK_VENDOR_DEFINED && want != CKK_VENDOR_DEFINED && type != want)
        return CKR_KEY_TYPE_INCONSISTENT;
    if (op->sign && op->mech.mechanism == CKM_RSA_PKCS_PSS
    &&  op->in_len != (size_t) EVP_MD_get_size (cs_mech_md (op->params->hash)))
        return CKR_DATA_LEN_RANGE;
    return CKR_OK;
}

static CK_RV
s_run_op (cs_drv_session_t *self, CK_OBJECT_HANDLE obj, size_t bits, s_op_t *op)
{
    switch (op->path) {
        case S_OAEP_RAW: return s_run_oaep_raw (self, obj, (bits + 7) / 8, op);
        case S_PSS_RAW:  return s_run_pss_raw (self, obj, bits, op);
        case S_DERIVE:   return s_run_derive (self, obj, op);
        default:
            return s_run (self, obj, &op->mech, op->sign, op->in, op->in_len, op->out, op->out_len);
    }
}

/*  Bits of a big-endian modulus.  */
static size_t
s_modulus_bits (const unsigned char *m, size_t len)
{
    while (len && !*m) {
        m++;
        len--;
    }
    size_t bits = len ? (len - 1) * 8 : 0;
    for (unsigned c = len ? m [0] : 0; c; c >>= 1)
        bits++;
    return bits;
}

/*  The RSA fallbacks need the modulus size.  */
static bool
s_needs_bits (const s_op_t *op)
{
    return op->path == S_OAEP_RAW || op->path == S_PSS_RAW;
}

/*  A resident key not found: CKR_USER_NOT_LOGGED_IN when the session lost
 *  its login (private objects are invisible then; the worker reopens its
 *  session and s_login_again logs in, issue #9), else CKR_KEY_HANDLE_INVALID.  */
static CK_RV
s_not_found (cs_drv_session_t *self)
{
    CK_SESSION_INFO info;
    CK_RV rv = self->board->fl->C_GetSessionInfo (self->handle, &info);
    if (rv != CKR_OK)
        return rv;
    return info.state == CKS_RW_USER_FUNCTIONS || info.state == CKS_RO_USER_FUNCTIONS
         ? CKR_KEY_HANDLE_INVALID : CKR_USER_NOT_LOGGED_IN;
}

/*  Runs op on a resident key, re-finding the key once if its cached handle
 *  went stale (a token re-imported the key).  */
static CK_RV
s_run_resident (cs_drv_session_t *self, const cs_drv_key_t *key, s_op_t *op)
{
    const cs_key_info_t *info = p11_key_info (self->board, key->id, key->id_len);
    CK_RV rv = CKR_KEY_HANDLE_INVALID;
    for (int attempt = 0; attempt < 2; attempt++) {
        CK_OBJECT_HANDLE obj = p11_object (self, key->id, key->id_len, attempt > 0);
        if (obj == CK_INVALID_HANDLE)
            return s_not_found (self);
        CK_KEY_TYPE type = info ? info->key_type : CKK_VENDOR_DEFINED;
        if (!info && !p11_attr_get (self->board, self->handle, obj, CKA_KEY_TYPE, &type, sizeof type))
            type = CKK_VENDOR_DEFINED;
        if ((rv = s_op_check (op, type)) != CKR_OK)
            return rv;
        size_t bits = info && info->key_type == CKK_RSA ? s_modulus_bits (info->modulus, info->modulus_len) : 0;
        if (s_needs_bits (op) && !info) {   /* generated after open: ask the object */
            size_t len = 0;
            unsigned char *modulus = p11_attr_alloc (self->board, self->handle, obj, CKA_MODULUS, &len);
            bits = modulus ? s_modulus_bits (modulus, len) : 0;
            free (modulus);
        }
        if (s_needs_bits (op) && !bits)
            return CKR_KEY_TYPE_INCONSISTENT;
        rv = s_run_op (self, obj, bits, op);
        if (rv != CKR_OBJECT_HANDLE_INVALID && rv != CKR_KEY_HANDLE_INVALID)
            break;
    }
    return rv == CKR_OBJECT_HANDLE_INVALID || rv == CKR_KEY_HANDLE_INVALID ? s_not_found (self) : rv;
}

/*  Runs op on key material: a cached session object for a keystore key, a
 *  throw-away one for a per-request key.  */
static CK_RV
s_run_material (cs_drv_session_t *self, const cs_drv_key_t *key, s_op_t *op)
{
    CK_OBJECT_HANDLE obj = CK_INVALID_HANDLE;
    size_t bits = 0;
    CK_KEY_TYPE type = CKK_VENDOR_DEFINED;
    bool cached = key->ref && *key->ref;
    if (!(self->board->caps.flags & CS_CAP_KEY_MATERIAL))
        return CKR_KEY_HANDLE_INVALID;
    CK_RV rv = cached ? p11_import_cached (self, key, &obj, &bits, &type)
                      : p11_import (self, key, &obj, &bits, &type);
    if (rv != CKR_OK)
        return rv;
    if ((rv = s_op_check (op, type)) == CKR_OK)
        rv = s_needs_bits (op) && !bits ? CKR_KEY_TYPE_INCONSISTENT : s_run_op (self, obj, bits, op);
    if (!cached)
        self->board->fl->C_DestroyObject (self->handle, obj);
    return rv;
}

static CK_RV
s_run_key (cs_drv_session_t *self, const cs_drv_key_t *key, s_op_t *op)
{
    if (key->pkcs8 && key->pkcs8_len)
        return s_run_material (self, key, op);
    return s_run_resident (self, key, op);
}

/*  The MGF1 id that goes with hash (the only MGF SoftHSM 2.6 accepts).  */
static CK_RSA_PKCS_MGF_TYPE
s_mgf_of (CK_MECHANISM_TYPE hash)
{
    switch (hash) {
        case CKM_SHA_1:  return CKG_MGF1_SHA1;
        case CKM_SHA224: return CKG_MGF1_SHA224;
        case CKM_SHA256: return CKG_MGF1_SHA256;
        case CKM_SHA384: return CKG_MGF1_SHA384;
        case CKM_SHA512: return CKG_MGF1_SHA512;
        default:         return 0;
    }
}

/*  PSS runs natively when the board has CKM_RSA_PKCS_PSS and the MGF1 hash
 *  is the hash; otherwise EMSA-PSS is encoded here and the board runs raw
 *  RSA (when it has CKM_RSA_X_509 signing).  */
CK_RV
p11_sign (cs_drv_session_t *self, const cs_drv_key_t *key, const cs_drv_mech_t *mech,
        const unsigned char *in, size_t in_len, unsigned char *out, size_t *out_len)
{
    CK_RSA_PKCS_PSS_PARAMS pss = { mech->hash, mech->mgf, mech->salt_len };
    s_op_t op = { { mech->type, NULL, 0 }, true, S_NATIVE, mech, in, in_len, out, out_len };
    if (mech->type == CKM_RSA_PKCS_PSS) {
        if (!cs_mech_md (mech->hash) || !cs_mech_mgf_md (mech->mgf))
            return CKR_MECHANISM_PARAM_INVALID;
        bool native = self->board->native_pss && s_mgf_of (mech->hash) == mech->mgf;
        if (!native && self->board->raw_sign)
            op.path = S_PSS_RAW;
        op.mech.pParameter = &pss;
        op.mech.ulParameterLen = sizeof pss;
    }
    else
    if (mech->type != CKM_RSA_PKCS && mech->type != CKM_ECDSA && mech->type != CKM_RSA_X_509
    &&  mech->type != CKM_EDDSA)
        return CKR_MECHANISM_INVALID;
    return s_run_key (self, key, &op);
}

CK_RV
p11_decrypt (cs_drv_session_t *self, const cs_drv_key_t *key, const cs_drv_mech_t *mech,
           const unsigned char *in, size_t in_len, unsigned char *out, size_t *out_len)
{
    CK_RSA_PKCS_OAEP_PARAMS oaep = { CKM_SHA_1, CKG_MGF1_SHA1, CKZ_DATA_SPECIFIED, NULL, 0 };
    s_op_t op = { { mech->type, NULL, 0 }, false, S_NATIVE, mech, in, in_len, out, out_len };
    if (mech->type == CKM_RSA_PKCS || mech->type == CKM_RSA_X_509)
        return s_run_key (self, key, &op);
    if (mech->type != CKM_RSA_PKCS_OAEP)
        return CKR_MECHANISM_INVALID;
    if (!cs_mech_md (mech->hash) || !cs_mech_mgf_md (mech->mgf))
        return CKR_MECHANISM_PARAM_INVALID;
    bool sha1_plain = mech->hash == CKM_SHA_1 && mech->mgf == CKG_MGF1_SHA1 && mech->label_len == 0;
    if (sha1_plain && self->board->native_oaep) {
        op.mech.pParameter = &oaep;
        op.mech.ulParameterLen = sizeof oaep;
        return s_run_key (self, key, &op);
    }
    if (!self->board->raw_rsa)
        return CKR_MECHANISM_PARAM_INVALID;
    op.path = S_OAEP_RAW;
    return s_run_key (self, key, &op);
}

/*  CS_DRV_DERIVE_KEY (cs_driver.h): ECDH on the board, resident or material.  */
CK_RV
p11_derive (cs_drv_session_t *self, const cs_drv_key_t *key, const unsigned char *point, size_t point_len,
          unsigned char *out, size_t *out_len)
{
    s_op_t op = { { CKM_ECDH1_DERIVE, NULL, 0 }, false, S_DERIVE, NULL, point, point_len, out, out_len };
    if (!(self->board->caps.flags & CS_CAP_DERIVE))
        return CKR_FUNCTION_NOT_SUPPORTED;
    if (!point || point_len < 65 || point_len > 133 || point_len % 2 == 0 || point [0] != 0x04)
        return CKR_MECHANISM_PARAM_INVALID;
    if (*out_len < (point_len - 1) / 2)
        return CKR_BUFFER_TOO_SMALL;
    return s_run_key (self, key, &op);
}

