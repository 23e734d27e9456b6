/*  mechanism.c — the application mechanism table, DigestInfo, PSS/OAEP checks.  */
#include <stdlib.h>
#include <string.h>
#include "cs_wire.h"
#include "mechanism.h"
#include "cryptoserver/pkcs11v.h"

/*  CKF_HW: the private-key side runs on the broker's boards, not in this
 *  process (OpenSC's pkcs11-tool --test only tests signing with HW mechanisms).  */
#define S_SIGN    (CKF_HW | CKF_SIGN | CKF_VERIFY)
#define S_CRYPT   (CKF_HW | CKF_DECRYPT | CKF_ENCRYPT)
#define S_RECOVER (CKF_SIGN_RECOVER | CKF_VERIFY_RECOVER)     /* raw RSA only (recover.c) */

static const cs_mech_t s_table [] = {
    { CKM_RSA_PKCS,            CKM_RSA_PKCS,      CKK_RSA, 0,          S_SIGN | S_CRYPT | S_RECOVER },
    { CKM_RSA_X_509,           CKM_RSA_X_509,     CKK_RSA, 0,          S_SIGN | S_CRYPT | S_RECOVER },
    { CKM_SHA1_RSA_PKCS,       CKM_RSA_PKCS,      CKK_RSA, CKM_SHA_1,  S_SIGN },
    { CKM_SHA224_RSA_PKCS,     CKM_RSA_PKCS,      CKK_RSA, CKM_SHA224, S_SIGN },
    { CKM_SHA256_RSA_PKCS,     CKM_RSA_PKCS,      CKK_RSA, CKM_SHA256, S_SIGN },
    { CKM_SHA384_RSA_PKCS,     CKM_RSA_PKCS,      CKK_RSA, CKM_SHA384, S_SIGN },
    { CKM_SHA512_RSA_PKCS,     CKM_RSA_PKCS,      CKK_RSA, CKM_SHA512, S_SIGN },
    { CKM_RSA_PKCS_PSS,        CKM_RSA_PKCS_PSS,  CKK_RSA, 0,          S_SIGN },
    { CKM_SHA1_RSA_PKCS_PSS,   CKM_RSA_PKCS_PSS,  CKK_RSA, CKM_SHA_1,  S_SIGN },
    { CKM_SHA224_RSA_PKCS_PSS, CKM_RSA_PKCS_PSS,  CKK_RSA, CKM_SHA224, S_SIGN },
    { CKM_SHA256_RSA_PKCS_PSS, CKM_RSA_PKCS_PSS,  CKK_RSA, CKM_SHA256, S_SIGN },
    { CKM_SHA384_RSA_PKCS_PSS, CKM_RSA_PKCS_PSS,  CKK_RSA, CKM_SHA384, S_SIGN },
    { CKM_SHA512_RSA_PKCS_PSS, CKM_RSA_PKCS_PSS,  CKK_RSA, CKM_SHA512, S_SIGN },
    { CKM_RSA_PKCS_OAEP,       CKM_RSA_PKCS_OAEP, CKK_RSA, 0,          S_CRYPT },
    { CKM_ECDSA,               CKM_ECDSA,         CKK_EC,  0,          S_SIGN },
    { CKM_ECDSA_SHA1,          CKM_ECDSA,         CKK_EC,  CKM_SHA_1,  S_SIGN },
    { CKM_ECDSA_SHA224,        CKM_ECDSA,         CKK_EC,  CKM_SHA224, S_SIGN },
    { CKM_ECDSA_SHA256,        CKM_ECDSA,         CKK_EC,  CKM_SHA256, S_SIGN },
    { CKM_ECDSA_SHA384,        CKM_ECDSA,         CKK_EC,  CKM_SHA384, S_SIGN },
    { CKM_ECDSA_SHA512,        CKM_ECDSA,         CKK_EC,  CKM_SHA512, S_SIGN },
    { CKM_EDDSA,               CKM_EDDSA,         CKK_EC_EDWARDS, 0,   S_SIGN },
    { CKM_ECDH1_DERIVE,        CKM_ECDH1_DERIVE,  CKK_EC,  0,          CKF_HW | CKF_DERIVE },
    { CKM_RSA_PKCS_KEY_PAIR_GEN, CKM_RSA_PKCS_KEY_PAIR_GEN, CKK_RSA, 0, CKF_HW | CKF_GENERATE_KEY_PAIR },
    { CKM_EC_KEY_PAIR_GEN,     CKM_EC_KEY_PAIR_GEN, CKK_EC, 0,         CKF_HW | CKF_GENERATE_KEY_PAIR },
    { CKM_EC_EDWARDS_KEY_PAIR_GEN, CKM_EC_EDWARDS_KEY_PAIR_GEN, CKK_EC_EDWARDS, 0, CKF_HW | CKF_GENERATE_KEY_PAIR },
    { CKM_SHA_1,               0,                 CS_KEY_NONE, CKM_SHA_1,  CKF_DIGEST },
    { CKM_SHA224,              0,                 CS_KEY_NONE, CKM_SHA224, CKF_DIGEST },
    { CKM_SHA256,              0,                 CS_KEY_NONE, CKM_SHA256, CKF_DIGEST },
    { CKM_SHA384,              0,                 CS_KEY_NONE, CKM_SHA384, CKF_DIGEST },
    { CKM_SHA512,              0,                 CS_KEY_NONE, CKM_SHA512, CKF_DIGEST },
    /*  Vendor raw modexp (cryptoserver/pkcs11v.h): C_Digest on the boards.  Last:
        generic callers (pkcs11-tool --test) digest with the first CKF_DIGEST
        mechanism of the list, which must then be a real digest.  */
    { CKM_CS_MODEXP,           CKM_CS_MODEXP,     CS_KEY_NONE, 0, CKF_HW | CKF_DIGEST },
    { CKM_CS_MODEXP_ARRAY,     CKM_CS_MODEXP_ARRAY, CS_KEY_NONE, 0, CKF_HW | CKF_DIGEST },
    { CKM_CS_RSA_CRT,          CKM_CS_RSA_CRT,    CS_KEY_NONE, 0, CKF_HW | CKF_DIGEST },
    { CKM_CS_RSA_CRT_ARRAY,    CKM_CS_RSA_CRT_ARRAY, CS_KEY_NONE, 0, CKF_HW | CKF_DIGEST },
    { CKM_CS_MULTI_MODEXP_ARRAY, CKM_CS_MULTI_MODEXP_ARRAY, CS_KEY_NONE, 0, CKF_HW | CKF_DIGEST },
};

const cs_mech_t *
cs_mech_table (size_t *count_p)
{
    *count_p = sizeof s_table / sizeof s_table [0];
    return s_table;
}

const cs_mech_t *
cs_mech_lookup (CK_MECHANISM_TYPE type)
{
    for (size_t i = 0; i < sizeof s_table / sizeof s_table [0]; i++)
        if (s_table [i].type == type)
            return &s_table [i];
    return NULL;
}

const EVP_MD *
cs_mech_md (CK_MECHANISM_TYPE hash)
{
    switch (hash) {
        case CKM_SHA_1:  return EVP_sha1 ();
        case CKM_SHA224: return EVP_sha224 ();
        case CKM_SHA256: return EVP_sha256 ();
        case CKM_SHA384: return EVP_sha384 ();
        case CKM_SHA512: return EVP_sha512 ();
        default:         return NULL;
    }
}

const EVP_MD *
cs_mech_mgf_md (CK_RSA_PKCS_MGF_TYPE mgf)
{
    switch (mgf) {
        case CKG_MGF1_SHA1:   return EVP_sha1 ();
        case CKG_MGF1_SHA224: return EVP_sha224 ();
        case CKG_MGF1_SHA256: return EVP_sha256 ();
        case CKG_MGF1_SHA384: return EVP_sha384 ();
        case CKG_MGF1_SHA512: return EVP_sha512 ();
        default:              return NULL;
    }
}

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
    switch (hash) {
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
s_check_pss (const cs_mech_t *entry, const CK_MECHANISM *mech, size_t modulus_bytes,
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

CK_RV
cs_mech_check (const cs_mech_t *entry, const CK_MECHANISM *mech, CK_KEY_TYPE key_type,
               size_t modulus_bytes, cs_mech_params_t *params)
{
    memset (params, 0, sizeof *params);
    if (entry->key_type != key_type)
        return CKR_KEY_TYPE_INCONSISTENT;
    if (entry->wire == CKM_RSA_PKCS_PSS)
        return s_check_pss (entry, mech, modulus_bytes, params);
    if (entry->wire == CKM_RSA_PKCS_OAEP)
        return s_check_oaep (mech, params);
    if (entry->wire == CKM_ECDH1_DERIVE)
        return CKR_MECHANISM_INVALID;       /* C_DeriveKey only (derive.h) */
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
    memset (params, 0, sizeof *params);
}
