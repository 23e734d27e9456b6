/*  drv_util.c — helpers shared by the shim drivers.  */
/*  RSA_padding_check_PKCS1_OAEP_mgf1 is deprecated in OpenSSL 3.0 but is the
 *  only public constant-time OAEP decoder that works on a raw block.  */
#define OPENSSL_SUPPRESS_DEPRECATED 1
#include <string.h>
#include <openssl/ecdsa.h>
#include <openssl/rsa.h>
#include <openssl/bn.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include "drv_util.h"

const EVP_MD *
drv_md_from_ckm (CK_MECHANISM_TYPE hash)
{
    switch (hash) {
        case CKM_SHA_1: return EVP_sha1 ();
        case CKM_SHA224: return EVP_sha224 ();
        case CKM_SHA256: return EVP_sha256 ();
        case CKM_SHA384: return EVP_sha384 ();
        case CKM_SHA512: return EVP_sha512 ();
        default: return NULL;
    }
}

const EVP_MD *
drv_md_from_mgf (CK_RSA_PKCS_MGF_TYPE mgf)
{
    switch (mgf) {
        case CKG_MGF1_SHA1: return EVP_sha1 ();
        case CKG_MGF1_SHA224: return EVP_sha224 ();
        case CKG_MGF1_SHA256: return EVP_sha256 ();
        case CKG_MGF1_SHA384: return EVP_sha384 ();
        case CKG_MGF1_SHA512: return EVP_sha512 ();
        default: return NULL;
    }
}

CK_RV
drv_ecdsa_der_to_raw (const unsigned char *der, size_t der_len, size_t half,
                      unsigned char *out, size_t *out_len)
{
    CK_RV rv = CKR_FUNCTION_FAILED;
    const unsigned char *p = der;
    ECDSA_SIG *sig = d2i_ECDSA_SIG (NULL, &p, (long) der_len);
    if (!sig)
        goto out;
    if (*out_len < 2 * half) {
        rv = CKR_BUFFER_TOO_SMALL;
        goto out;
    }
    if (BN_bn2binpad (ECDSA_SIG_get0_r (sig), out, (int) half) < 0
    ||  BN_bn2binpad (ECDSA_SIG_get0_s (sig), out + half, (int) half) < 0)
        goto out;
    *out_len = 2 * half;
    rv = CKR_OK;
out:
    ECDSA_SIG_free (sig);
    return rv;
}

CK_RV
drv_oaep_unpad (const unsigned char *em, size_t k, const cs_mech_t *mech,
                unsigned char *out, size_t *out_len)
{
    const EVP_MD *md = drv_md_from_ckm (mech->hash);
    const EVP_MD *mgf1 = drv_md_from_mgf (mech->mgf);
    if (!md || !mgf1)
        return CKR_MECHANISM_PARAM_INVALID;
    if (k == 0 || k > 2048)
        return CKR_ENCRYPTED_DATA_INVALID;
    unsigned char buf [2048];
    int len = RSA_padding_check_PKCS1_OAEP_mgf1 (buf, (int) sizeof buf, em, (int) k, (int) k,
                                                 mech->label, (int) mech->label_len, md, mgf1);
    ERR_clear_error ();
    if (len < 0) {
        OPENSSL_cleanse (buf, sizeof buf);
        return CKR_ENCRYPTED_DATA_INVALID;
    }
    CK_RV rv = CKR_OK;
    if ((size_t) len > *out_len)
        rv = CKR_BUFFER_TOO_SMALL;
    else {
        memcpy (out, buf, (size_t) len);
        *out_len = (size_t) len;
    }
    OPENSSL_cleanse (buf, sizeof buf);
    return rv;
}

const char *
drv_config_get (zconfig_t *config, const char *path, const char *fallback)
{
    return zconfig_get (config, path, fallback);
}
