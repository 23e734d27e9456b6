/*  mechanism.c — the application mechanism table, DigestInfo, PSS/OAEP checks.  */
#include <stdlib.h>
#include <string.h>
#include "cs_wire.h"
#include "mechanism.h"
#include "cryptoserver/pkcs11v.h"

const uint8_t *
cs_mech_digest_info_prefix (CK_MECHANISM_TYPE hash, size_t *len_p)
{
    /*  RFC 8017 §9.2, note 1.  */
    static const uint8_t sha1 [] = { 0x30, 0x21, 0x30, 0x09, 0x06, 0x05, 0x2b, 0x0e,
        0x03, 0x02, 0x1a, 0x05, 0x00, 0x04, 0x14 };
    static const uint8_t sha224 [] = { 0x30, 0x2d, 0x30, 0x0d, 0x06, 0x09, 0x60, 0x86,
        0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x04, 0x05, 0x00, 0x04, 0x1c };
    static const uint8_t sha256 [] = { 0x30, 0x31, 0x30, 0x0d, 0x06, 0x09, 0x60, 0x86,
        0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x01, 0x05, 0x00, 0x04, 0x20 };
    static const uint8_t sha384 [] = { 0x30, 0x41, 0x30, 0x0d, 0x06, 0x09, 0x60, 0x86,
        0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x02, 0x05, 0x00, 0x04, 0x30 };
    static const uint8_t sha512 [] = { 0x30, 0x51, 0x30, 0x0d, 0x06, 0x09, 0x60, 0x86,
        0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x03, 0x05, 0x00, 0x04, 0x40 };
    /*  id-sha3-* (NIST CSOR 2.16.840.1.101.3.4.2.7 .. 10), same layout.  */
    static const uint8_t sha3_224 [] = { 0x30, 0x2d, 0x30, 0x0d, 0x06, 0x09, 0x60, 0x86,
        0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x07, 0x05, 0x00, 0x04, 0x1c };
    static const uint8_t sha3_256 [] = { 0x30, 0x31, 0x30, 0x0d, 0x06, 0x09, 0x60, 0x86,
        0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x08, 0x05, 0x00, 0x04, 0x20 };
    static const uint8_t sha3_384 [] = { 0x30, 0x41, 0x30, 0x0d, 0x06, 0x09, 0x60, 0x86,
        0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x09, 0x05, 0x00, 0x04, 0x30 };
    static const uint8_t sha3_512 [] = { 0x30, 0x51, 0x30, 0x0d, 0x06, 0x09, 0x60, 0x86,
        0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x0a, 0x05, 0x00, 0x04, 0x40 };
    switch (hash) {
        case CKM_SHA3_224: *len_p = sizeof sha3_224; return sha3_224;
        case CKM_SHA3_256: *len_p = sizeof sha3_256; return sha3_256;
        case CKM_SHA3_384: *len_p = sizeof sha3_384; return sha3_384;
        case CKM_SHA3_512: *len_p = sizeof sha3_512; return sha3_512;
        case CKM_SHA_1:  *len_p = sizeof sha1;   return sha1;
        case CKM_SHA224: *len_p = sizeof sha224; return sha224;
        case CKM_SHA256: *len_p = sizeof sha256; return sha256;
        case CKM_SHA384: *len_p = sizeof sha384; return sha384;
        case CKM_SHA512: *len_p = sizeof sha512; return sha512;
        default:         *len_p = 0;             return NULL;
    }
}

size_t
cs_mech_digest_info (CK_MECHANISM_TYPE hash, const uint8_t *digest, size_t digest_len,
                     uint8_t *out, size_t max)
{
    size_t prefix_len;
    const uint8_t *prefix = cs_mech_digest_info_prefix (hash, &prefix_len);
    const EVP_MD *md = cs_mech_md (hash);
    if (!prefix || !md || (size_t) EVP_MD_get_size (md) != digest_len
    ||  prefix_len + digest_len > max)
        return 0;
    memcpy (out, prefix, prefix_len);
    memcpy (out + prefix_len, digest, digest_len);
    return prefix_len + digest_len;
}

static CK_RV
s_check_pss (const cs_mech_row_t *entry, const CK_MECHANISM *mech, size_t modulus_bytes,
             cs_mech_params_t *params)
{
    const CK_RSA_PKCS_PSS_PARAMS *pss = mech->pParameter;
    const EVP_MD *md;
    if (!pss || mech->ulParameterLen != sizeof *pss)
        return CKR_MECHANISM_PARAM_INVALID;
    /*  sLen: 0 .. emLen - hLen - 2 with emLen = k for whole-byte moduli
     *  (RFC 8017 §9.1.1 step 3; PKCS#11 2.40 curr. mech. §2.1.14).  */
    if (!(md = cs_mech_md (pss->hashAlg)) || (entry->hash && entry->hash != pss->hashAlg))
        return CKR_MECHANISM_PARAM_INVALID;
    if (!cs_mech_mgf_md (pss->mgf))
        return CKR_MECHANISM_PARAM_INVALID;
    if (modulus_bytes && pss->sLen + (size_t) EVP_MD_get_size (md) + 2 > modulus_bytes)
        return CKR_MECHANISM_PARAM_INVALID;
    params->hash = pss->hashAlg;
    params->mgf = pss->mgf;
    params->salt_len = pss->sLen;
    return CKR_OK;
}

static CK_RV
s_check_oaep (const CK_MECHANISM *mech, cs_mech_params_t *params)
{
    const CK_RSA_PKCS_OAEP_PARAMS *oaep = mech->pParameter;
    if (!oaep || mech->ulParameterLen != sizeof *oaep)
        return CKR_MECHANISM_PARAM_INVALID;
    if (!cs_mech_md (oaep->hashAlg) || !cs_mech_mgf_md (oaep->mgf))
        return CKR_MECHANISM_PARAM_INVALID;
    if (oaep->source != CKZ_DATA_SPECIFIED && !(oaep->source == 0 && oaep->ulSourceDataLen == 0))
        return CKR_MECHANISM_PARAM_INVALID;
    if (oaep->ulSourceDataLen > CS_WIRE_MAX_LABEL || (oaep->ulSourceDataLen && !oaep->pSourceData))
        return CKR_MECHANISM_PARAM_INVALID;
    params->hash = oaep->hashAlg;
    params->mgf = oaep->mgf;
    if (oaep->ulSourceDataLen) {
        if (!(params->label = malloc (oaep->ulSourceDataLen)))
            return CKR_HOST_MEMORY;
        memcpy (params->label, oaep->pSourceData, oaep->ulSourceDataLen);
        params->label_len = oaep->ulSourceDataLen;
    }
    return CKR_OK;
}

/*  CKM_ML_DSA (PKCS#11 3.2): no parameter (hedged, empty context) or a
 *  CK_SIGN_ADDITIONAL_CONTEXT; FIPS 204 §5.2 limits ctx to 255 bytes.  */
static CK_RV
s_check_sign_context (const CK_MECHANISM *mech, cs_mech_params_t *params)
{
    const CK_SIGN_ADDITIONAL_CONTEXT *ctx = mech->pParameter;
    if (!mech->pParameter && mech->ulParameterLen == 0)
        return CKR_OK;
    if (!ctx || mech->ulParameterLen != sizeof *ctx || ctx->hedgeVariant > CKH_DETERMINISTIC_REQUIRED
    ||  ctx->ulContextLen > 255 || (ctx->ulContextLen && !ctx->pContext))
        return CKR_MECHANISM_PARAM_INVALID;
    params->hedge = ctx->hedgeVariant;
    if (ctx->ulContextLen) {
        if (!(params->context = malloc (ctx->ulContextLen)))
            return CKR_HOST_MEMORY;
        memcpy (params->context, ctx->pContext, ctx->ulContextLen);
        params->context_len = ctx->ulContextLen;
    }
    return CKR_OK;
}

CK_RV
cs_mech_check (const cs_mech_row_t *entry, const CK_MECHANISM *mech, CK_KEY_TYPE key_type,
               size_t modulus_bytes, cs_mech_params_t *params)
{
    memset (params, 0, sizeof *params);
    if (entry->key_type != key_type)
        return CKR_KEY_TYPE_INCONSISTENT;
    switch (entry->param) {
        case CS_MECH_PARAM_PSS:    return s_check_pss (entry, mech, modulus_bytes, params);
        case CS_MECH_PARAM_OAEP:   return s_check_oaep (mech, params);
        case CS_MECH_PARAM_SIGN_CONTEXT: return s_check_sign_context (mech, params);
        case CS_MECH_PARAM_ECDH1:  return CKR_MECHANISM_INVALID;   /* C_DeriveKey only (derive.h) */
        case CS_MECH_PARAM_MODEXP: return CKR_MECHANISM_INVALID;   /* C_DigestInit only (modexp.h) */
        case CS_MECH_PARAM_IV:
        case CS_MECH_PARAM_GCM:
        case CS_MECH_PARAM_CTR:
        case CS_MECH_PARAM_MAC_LEN:
        case CS_MECH_PARAM_WRAP_IV: return CKR_MECHANISM_INVALID;  /* secret keys only (secret.h) */
        case CS_MECH_PARAM_NONE:   break;
    }
    if (mech->ulParameterLen != 0)
        return CKR_MECHANISM_PARAM_INVALID;
    return CKR_OK;
}

void
cs_mech_params_clear (cs_mech_params_t *params)
{
    if (!params)
        return;
    free (params->label);
    free (params->context);
    memset (params, 0, sizeof *params);
}
