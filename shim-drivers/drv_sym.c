/*  drv_sym.c — secret-key operations with OpenSSL EVP (drv_sym.h).  */
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include "drv_sym.h"

#define S_BLOCK 16

static const EVP_CIPHER *
s_cipher (CK_MECHANISM_TYPE mech, size_t key_len)
{
    bool ecb = mech == CKM_AES_ECB, gcm = mech == CKM_AES_GCM;
    switch (key_len) {
        case 16: return ecb ? EVP_aes_128_ecb () : gcm ? EVP_aes_128_gcm () : EVP_aes_128_cbc ();
        case 24: return ecb ? EVP_aes_192_ecb () : gcm ? EVP_aes_192_gcm () : EVP_aes_192_cbc ();
        case 32: return ecb ? EVP_aes_256_ecb () : gcm ? EVP_aes_256_gcm () : EVP_aes_256_cbc ();
        default: return NULL;
    }
}

/*  AES-GCM (NIST SP 800-38D): out = ciphertext || tag, or the plaintext
 *  after the tag checked.  */
static CK_RV
s_gcm (EVP_CIPHER_CTX *ctx, const cs_sym_t *op, unsigned char *out, size_t *out_len)
{
    bool enc = op->operation == CS_SYM_ENCRYPT;
    size_t tag_len = op->tag_length_bits / 8, in_len = op->in_len;
    int len = 0, fin = 0;
    if (op->tag_length_bits % 8 || tag_len < 12 || tag_len > 16 || op->iv_bytes == 0 || op->iv_bytes > 256)
        return CKR_MECHANISM_PARAM_INVALID;
    if (!enc && in_len < tag_len)
        return CKR_ENCRYPTED_DATA_LEN_RANGE;
    if (!enc)
        in_len -= tag_len;
    if (*out_len < in_len + (enc ? tag_len : 0))
        return CKR_BUFFER_TOO_SMALL;
    if (!EVP_CipherInit_ex (ctx, s_cipher (CKM_AES_GCM, op->key_len), NULL, NULL, NULL, enc)
    ||  !EVP_CIPHER_CTX_ctrl (ctx, EVP_CTRL_GCM_SET_IVLEN, (int) op->iv_bytes, NULL)
    ||  !EVP_CipherInit_ex (ctx, NULL, NULL, op->key, op->iv, enc)
    ||  (op->aad_bytes && !EVP_CipherUpdate (ctx, NULL, &len, op->aad, (int) op->aad_bytes))
    ||  !EVP_CipherUpdate (ctx, out, &len, op->in, (int) in_len))
        return CKR_DEVICE_ERROR;
    if (!enc && !EVP_CIPHER_CTX_ctrl (ctx, EVP_CTRL_GCM_SET_TAG, (int) tag_len,
                                      (void *) (op->in + in_len)))
        return CKR_DEVICE_ERROR;
    if (!EVP_CipherFinal_ex (ctx, out + len, &fin)) {
        OPENSSL_cleanse (out, *out_len);
        return enc ? CKR_DEVICE_ERROR : CKR_ENCRYPTED_DATA_INVALID;
    }
    len += fin;
    if (enc && !EVP_CIPHER_CTX_ctrl (ctx, EVP_CTRL_GCM_GET_TAG, (int) tag_len, out + len))
        return CKR_DEVICE_ERROR;
    *out_len = (size_t) len + (enc ? tag_len : 0);
    return CKR_OK;
}

/*  AES-ECB, AES-CBC (no padding) and AES-CBC-PAD (PKCS#7 padding).  */
static CK_RV
s_block (EVP_CIPHER_CTX *ctx, const cs_sym_t *op, unsigned char *out, size_t *out_len)
{
    bool enc = op->operation == CS_SYM_ENCRYPT, pad = op->mechanism == CKM_AES_CBC_PAD;
    int len = 0, fin = 0;
    if (op->mechanism != CKM_AES_ECB && op->iv_bytes != S_BLOCK)
        return CKR_MECHANISM_PARAM_INVALID;
    if (op->mechanism == CKM_AES_ECB && op->iv_bytes)
        return CKR_MECHANISM_PARAM_INVALID;
    if ((!pad || !enc) && op->in_len % S_BLOCK)
        return enc ? CKR_DATA_LEN_RANGE : CKR_ENCRYPTED_DATA_LEN_RANGE;
    if (pad && !enc && op->in_len == 0)
        return CKR_ENCRYPTED_DATA_LEN_RANGE;
    if (*out_len < op->in_len + S_BLOCK)
        return CKR_BUFFER_TOO_SMALL;
    if (!EVP_CipherInit_ex (ctx, s_cipher (op->mechanism, op->key_len), NULL, op->key,
                            op->iv_bytes ? op->iv : NULL, enc)
    ||  !EVP_CIPHER_CTX_set_padding (ctx, pad)
    ||  !EVP_CipherUpdate (ctx, out, &len, op->in, (int) op->in_len))
        return CKR_DEVICE_ERROR;
    if (!EVP_CipherFinal_ex (ctx, out + len, &fin)) {
        OPENSSL_cleanse (out, *out_len);
        return enc ? CKR_DEVICE_ERROR : CKR_ENCRYPTED_DATA_INVALID;
    }
    *out_len = (size_t) len + (size_t) fin;
    return CKR_OK;
}

/*  HMAC-SHA256 (RFC 2104) with EVP_MAC.  */
static CK_RV
s_hmac (const cs_sym_t *op, unsigned char *out, size_t *out_len)
{
    CK_RV rv = CKR_DEVICE_ERROR;
    EVP_MAC *mac = EVP_MAC_fetch (NULL, "HMAC", NULL);
    EVP_MAC_CTX *ctx = mac ? EVP_MAC_CTX_new (mac) : NULL;
    OSSL_PARAM params [] = {
        OSSL_PARAM_construct_utf8_string (OSSL_MAC_PARAM_DIGEST, (char *) "SHA256", 0),
        OSSL_PARAM_construct_end ()
    };
    size_t len = 0;
    if (op->operation != CS_SYM_SIGN)
        rv = CKR_MECHANISM_INVALID;
    else
    if (*out_len < 32)
        rv = CKR_BUFFER_TOO_SMALL;
    else
    if (ctx && EVP_MAC_init (ctx, op->key, op->key_len, params)
    &&  EVP_MAC_update (ctx, op->in, op->in_len) && EVP_MAC_final (ctx, out, &len, *out_len)) {
        *out_len = len;
        rv = CKR_OK;
    }
    EVP_MAC_CTX_free (ctx);
    EVP_MAC_free (mac);
    return rv;
}

CK_RV
drv_sym_run (const cs_sym_t *op, unsigned char *out, size_t *out_len)
{
    CK_RV rv;
    EVP_CIPHER_CTX *ctx;
    if (!op->key || !op->key_len || (op->in_len && !op->in) || op->in_len > INT32_MAX / 2)
        return CKR_ARGUMENTS_BAD;
    if (op->mechanism == CKM_SHA256_HMAC)
        return s_hmac (op, out, out_len);
    if (op->mechanism != CKM_AES_ECB && op->mechanism != CKM_AES_CBC && op->mechanism != CKM_AES_CBC_PAD
    &&  op->mechanism != CKM_AES_GCM)
        return CKR_MECHANISM_INVALID;
    if (op->operation != CS_SYM_ENCRYPT && op->operation != CS_SYM_DECRYPT)
        return CKR_MECHANISM_INVALID;
    if (!s_cipher (op->mechanism, op->key_len))
        return CKR_KEY_SIZE_RANGE;
    if (!(ctx = EVP_CIPHER_CTX_new ()))
        return CKR_HOST_MEMORY;
    rv = op->mechanism == CKM_AES_GCM ? s_gcm (ctx, op, out, out_len) : s_block (ctx, op, out, out_len);
    EVP_CIPHER_CTX_free (ctx);          /* cleanses the key schedule */
    return rv;
}

int
drv_sym_mechs_add (cs_mech_info_t **mechs_p, size_t *count_p)
{
    static const cs_mech_info_t sym [] = {
        { CKM_AES_ECB, 16, 32, CKF_ENCRYPT | CKF_DECRYPT },
        { CKM_AES_CBC, 16, 32, CKF_ENCRYPT | CKF_DECRYPT },
        { CKM_AES_CBC_PAD, 16, 32, CKF_ENCRYPT | CKF_DECRYPT },
        { CKM_AES_GCM, 16, 32, CKF_ENCRYPT | CKF_DECRYPT },
        { CKM_SHA256_HMAC, 16, 256, CKF_SIGN | CKF_VERIFY },
    };
    size_t n = sizeof sym / sizeof sym [0];
    cs_mech_info_t *grown = realloc (*mechs_p, (*count_p + n) * sizeof *grown);
    if (!grown)
        return -1;
    memcpy (grown + *count_p, sym, sizeof sym);
    *mechs_p = grown;
    *count_p += n;
    return 0;
}
