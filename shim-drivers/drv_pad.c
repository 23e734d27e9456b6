/*  drv_pad.c — the encodings around raw private-key operations (drv_pad.h):
 *  ECDSA DER to r||s, EME-OAEP decoding, EMSA-PSS encoding.  */
/*  RSA_padding_check_PKCS1_OAEP_mgf1 is deprecated in OpenSSL 3.0 but is the
 *  only public constant-time OAEP decoder that works on a raw block.  */
#define OPENSSL_SUPPRESS_DEPRECATED 1
#include <string.h>
#include <openssl/bn.h>
#include <openssl/crypto.h>
#include <openssl/ecdsa.h>
#include <openssl/err.h>
#include <openssl/rsa.h>
#include "cs_mech.h"
#include "drv_pad.h"

#define S_BLOCK_MAX 1024        /* bytes: an RSA-8192 block */

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
drv_oaep_unpad (const unsigned char *em, size_t k, const cs_drv_mech_t *mech,
                unsigned char *out, size_t *out_len)
{
    const EVP_MD *md = cs_mech_md (mech->hash);
    const EVP_MD *mgf1 = cs_mech_mgf_md (mech->mgf);
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

CK_RV
drv_pss_encode (const cs_drv_mech_t *mech, const unsigned char *digest, size_t digest_len,
                size_t modulus_bits, unsigned char *em, size_t k)
{
    const EVP_MD *md = cs_mech_md (mech->hash);
    const EVP_MD *mgf1 = cs_mech_mgf_md (mech->mgf);
    if (!md || !mgf1 || k == 0 || k > S_BLOCK_MAX || (modulus_bits + 7) / 8 != k)
        return CKR_MECHANISM_PARAM_INVALID;
    if (digest_len != (size_t) EVP_MD_get_size (md))
        return CKR_DATA_LEN_RANGE;
    /*  emLen = ceil((modBits - 1) / 8), RFC 8017 §8.1.1; sLen <= emLen - hLen - 2.  */
    size_t em_len = (modulus_bits - 1 + 7) / 8;
    if (mech->salt_len + digest_len + 2 > em_len)
        return CKR_MECHANISM_PARAM_INVALID;
    RSA *rsa = RSA_new ();
    BIGNUM *n = BN_new (), *e = BN_new ();
    CK_RV rv = CKR_FUNCTION_FAILED;
    /*  Only the modulus size matters to the encoder: a dummy modulus of
     *  modulus_bits bits (top bit set).  */
    if (rsa && n && e && BN_set_bit (n, (int) modulus_bits - 1) && BN_set_bit (n, 0)
    &&  BN_set_word (e, 65537) && RSA_set0_key (rsa, n, e, NULL)) {
        n = e = NULL;
        if (RSA_padding_add_PKCS1_PSS_mgf1 (rsa, em, digest, md, mgf1, (int) mech->salt_len) == 1)
            rv = CKR_OK;
    }
    BN_free (n);
    BN_free (e);
    RSA_free (rsa);
    ERR_clear_error ();
    return rv;
}

CK_RV
drv_rsa_sign_block (const cs_drv_mech_t *mech, const unsigned char *in, size_t in_len,
                    size_t modulus_bits, unsigned char *em, size_t k)
{
    switch (mech->type) {
        case CKM_RSA_PKCS:
            if (in_len + 11 > k)
                return CKR_DATA_LEN_RANGE;
            return RSA_padding_add_PKCS1_type_1 (em, (int) k, in, (int) in_len) == 1
                   ? CKR_OK : CKR_FUNCTION_FAILED;
        case CKM_RSA_PKCS_PSS:
            return drv_pss_encode (mech, in, in_len, modulus_bits, em, k);
        case CKM_RSA_X_509:
            if (in_len > k)
                return CKR_DATA_LEN_RANGE;
            memset (em, 0, k - in_len);
            memcpy (em + k - in_len, in, in_len);
            return CKR_OK;
        default:
            return CKR_MECHANISM_INVALID;
    }
}

CK_RV
drv_rsa_unpad (const cs_drv_mech_t *mech, const unsigned char *em, size_t k,
               unsigned char *out, size_t *out_len)
{
    if (mech->type == CKM_RSA_PKCS_OAEP)
        return drv_oaep_unpad (em, k, mech, out, out_len);
    if (mech->type == CKM_RSA_X_509) {
        if (*out_len < k)
            return CKR_BUFFER_TOO_SMALL;
        memcpy (out, em, k);
        *out_len = k;
        return CKR_OK;
    }
    unsigned char buf [S_BLOCK_MAX];
    int len = k <= sizeof buf ? RSA_padding_check_PKCS1_type_2 (buf, (int) sizeof buf, em, (int) k, (int) k) : -1;
    ERR_clear_error ();
    CK_RV rv = len < 0 ? CKR_ENCRYPTED_DATA_INVALID
             : (size_t) len > *out_len ? CKR_BUFFER_TOO_SMALL : CKR_OK;
    if (rv == CKR_OK) {
        memcpy (out, buf, (size_t) len);
        *out_len = (size_t) len;
    }
    OPENSSL_cleanse (buf, sizeof buf);
    return rv;
}
