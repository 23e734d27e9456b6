/*  drv_sym.c — secret-key operations with OpenSSL EVP (drv_sym.h).  */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <openssl/provider.h>
#include "drv_sym.h"

#define S_AES_BLOCK  16
#define S_DES3_BLOCK 8
#define S_DES3_KEY   24
#define S_DES_KEY    8

static bool
s_des (CK_MECHANISM_TYPE mech)
{
    return mech == CKM_DES_ECB || mech == CKM_DES_CBC || mech == CKM_DES_CBC_PAD;
}

bool
drv_sym_legacy_des (void)
{
    /*  Loaded once into the default library context, the default provider
        kept as a fallback (retain_fallbacks = 1); never unloaded.  */
    static OSSL_PROVIDER *legacy;
    if (!legacy)
        legacy = OSSL_PROVIDER_try_load (NULL, "legacy", 1);
    return legacy != NULL;
}

/*  The EVP cipher (fetched from the default provider; the caller frees it)
 *  that runs `mech` with a key of key_len bytes, or NULL (a key size the
 *  mechanism does not take, or not a cipher).  */
static EVP_CIPHER *
s_cipher (CK_MECHANISM_TYPE mech, size_t key_len)
{
    static const struct {
        CK_MECHANISM_TYPE mech;
        const char *mode;               /* "AES-<bits>-<mode>" */
    } aes [] = {
        { CKM_AES_ECB, "ECB" }, { CKM_AES_CBC, "CBC" }, { CKM_AES_CBC_PAD, "CBC" }, { CKM_AES_GCM, "GCM" },
        { CKM_AES_CTR, "CTR" }, { CKM_AES_KEY_WRAP, "WRAP" }, { CKM_AES_KEY_WRAP_PAD, "WRAP-PAD" },
    };
    char name [32];
    if (s_des (mech))
        return key_len == S_DES_KEY && drv_sym_legacy_des ()
             ? EVP_CIPHER_fetch (NULL, mech == CKM_DES_ECB ? "DES-ECB" : "DES-CBC", NULL) : NULL;
    if (mech == CKM_DES3_ECB || mech == CKM_DES3_CBC || mech == CKM_DES3_CBC_PAD)
        return key_len == S_DES3_KEY ? EVP_CIPHER_fetch (NULL, mech == CKM_DES3_ECB ? "DES-EDE3-ECB" : "DES-EDE3-CBC",
                                                         NULL) : NULL;
    if (key_len != 16 && key_len != 24 && key_len != 32)
        return NULL;
    for (size_t i = 0; i < sizeof aes / sizeof aes [0]; i++)
        if (aes [i].mech == mech) {
            snprintf (name, sizeof name, "AES-%zu-%s", key_len * 8, aes [i].mode);
            return EVP_CIPHER_fetch (NULL, name, NULL);
        }
    return NULL;
}

/*  AES-GCM (NIST SP 800-38D): out = ciphertext || tag, or the plaintext
 *  after the tag checked.  */
static CK_RV
s_gcm (EVP_CIPHER_CTX *ctx, const EVP_CIPHER *cipher, const cs_sym_t *op, unsigned char *out, size_t *out_len)
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
    if (!EVP_CipherInit_ex (ctx, cipher, NULL, NULL, NULL, enc)
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

/*  ECB, CBC (no padding) and CBC-PAD (PKCS#7 padding) of AES, DES3 and DES, and
 *  AES-CTR (NIST SP 800-38A; the whole 16-byte counter block is
 *  incremented, the module keeps the counter inside ulCounterBits).  */
static CK_RV
s_block (EVP_CIPHER_CTX *ctx, const EVP_CIPHER *cipher, const cs_sym_t *op, unsigned char *out, size_t *out_len)
{
    bool enc = op->operation == CS_SYM_ENCRYPT;
    bool pad = (op->mechanism == CKM_AES_CBC_PAD || op->mechanism == CKM_DES3_CBC_PAD
                || op->mechanism == CKM_DES_CBC_PAD) && !op->partial;
    bool ecb = op->mechanism == CKM_AES_ECB || op->mechanism == CKM_DES3_ECB || op->mechanism == CKM_DES_ECB;
    bool ctr = op->mechanism == CKM_AES_CTR;
    bool des3 = op->mechanism == CKM_DES3_ECB || op->mechanism == CKM_DES3_CBC || op->mechanism == CKM_DES3_CBC_PAD;
    size_t block = des3 || s_des (op->mechanism) ? S_DES3_BLOCK : S_AES_BLOCK;
    int len = 0, fin = 0;
    if (ecb ? op->iv_bytes != 0 : op->iv_bytes != block)
        return CKR_MECHANISM_PARAM_INVALID;
    if ((op->partial || (!ctr && (!pad || !enc))) && op->in_len % block)
        return enc ? CKR_DATA_LEN_RANGE : CKR_ENCRYPTED_DATA_LEN_RANGE;
    if ((pad && !enc && op->in_len == 0) || (op->partial && op->in_len == 0))
        return CKR_ENCRYPTED_DATA_LEN_RANGE;
    if (*out_len < op->in_len + block)
        return CKR_BUFFER_TOO_SMALL;
    if (!EVP_CipherInit_ex (ctx, cipher, NULL, op->key, op->iv_bytes ? op->iv : NULL, enc)
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

/*  AES key wrap of data: RFC 3394 (input a multiple of 8 bytes, >= 16 to
 *  wrap, >= 24 to unwrap) and RFC 5649 (1 byte or more to wrap; a multiple
 *  of 8, >= 16, to unwrap).  A failed integrity check (RFC 3394 §2.2.3,
 *  RFC 5649 §3) is CKR_ENCRYPTED_DATA_INVALID.  */
static CK_RV
s_wrap (EVP_CIPHER_CTX *ctx, const EVP_CIPHER *cipher, const cs_sym_t *op, unsigned char *out, size_t *out_len)
{
    bool enc = op->operation == CS_SYM_ENCRYPT, padded = op->mechanism == CKM_AES_KEY_WRAP_PAD;
    size_t n = op->in_len;
    int len = 0, fin = 0;
    if (op->iv_bytes && op->iv_bytes != (padded ? 4u : 8u))
        return CKR_MECHANISM_PARAM_INVALID;
    if (enc ? (padded ? n == 0 : n % 8 || n < 16) : n % 8 || n < (padded ? 16u : 24u))
        return enc ? CKR_DATA_LEN_RANGE : CKR_ENCRYPTED_DATA_LEN_RANGE;
    if (*out_len < n + 16)
        return CKR_BUFFER_TOO_SMALL;
    EVP_CIPHER_CTX_set_flags (ctx, EVP_CIPHER_CTX_FLAG_WRAP_ALLOW);
    if (!EVP_CipherInit_ex (ctx, cipher, NULL, op->key, op->iv_bytes ? op->iv : NULL, enc))
        return CKR_DEVICE_ERROR;
    if (EVP_CipherUpdate (ctx, out, &len, op->in, (int) n) <= 0 || len < 0
    ||  !EVP_CipherFinal_ex (ctx, out + len, &fin)) {
        OPENSSL_cleanse (out, *out_len);
        return enc ? CKR_DEVICE_ERROR : CKR_ENCRYPTED_DATA_INVALID;
    }
    *out_len = (size_t) len + (size_t) fin;
    return CKR_OK;
}

/*  HMAC (RFC 2104) with the mechanism's SHA-1/SHA-2 digest, or AES-CMAC
 *  (NIST SP 800-38B) with the key's AES, through EVP_MAC: the full MAC.  */
static CK_RV
s_mac (const cs_sym_t *op, unsigned char *out, size_t *out_len)
{
    static const struct {
        CK_MECHANISM_TYPE mech;
        const char *digest;
    } hmacs [] = {
        { CKM_SHA_1_HMAC, "SHA1" }, { CKM_SHA224_HMAC, "SHA224" }, { CKM_SHA256_HMAC, "SHA256" },
        { CKM_SHA384_HMAC, "SHA384" }, { CKM_SHA512_HMAC, "SHA512" },
    };
    CK_RV rv = CKR_DEVICE_ERROR;
    bool cmac = op->mechanism == CKM_AES_CMAC;
    const char *digest = NULL;
    char cipher [32];
    size_t len = 0;
    for (size_t i = 0; i < sizeof hmacs / sizeof hmacs [0]; i++)
        if (hmacs [i].mech == op->mechanism)
            digest = hmacs [i].digest;
    if (op->operation != CS_SYM_SIGN || op->iv_bytes || op->aad_bytes || (!cmac && !digest))
        return CKR_MECHANISM_INVALID;
    if (cmac && op->key_len != 16 && op->key_len != 24 && op->key_len != 32)
        return CKR_KEY_SIZE_RANGE;
    snprintf (cipher, sizeof cipher, "AES-%zu-CBC", op->key_len * 8);
    EVP_MAC *mac = EVP_MAC_fetch (NULL, cmac ? "CMAC" : "HMAC", NULL);
    EVP_MAC_CTX *ctx = mac ? EVP_MAC_CTX_new (mac) : NULL;
    OSSL_PARAM params [] = {
        cmac ? OSSL_PARAM_construct_utf8_string (OSSL_MAC_PARAM_CIPHER, cipher, 0)
             : OSSL_PARAM_construct_utf8_string (OSSL_MAC_PARAM_DIGEST, (char *) digest, 0),
        OSSL_PARAM_construct_end ()
    };
    if (ctx && EVP_MAC_init (ctx, op->key, op->key_len, params)) {
        if (EVP_MAC_CTX_get_mac_size (ctx) > *out_len)
            rv = CKR_BUFFER_TOO_SMALL;
        else
        if (EVP_MAC_update (ctx, op->in, op->in_len) && EVP_MAC_final (ctx, out, &len, *out_len)) {
            *out_len = len;
            rv = CKR_OK;
        }
    }
    EVP_MAC_CTX_free (ctx);             /* cleanses the key */
    EVP_MAC_free (mac);
    return rv;
}

CK_RV
drv_sym_run (const cs_sym_t *op, unsigned char *out, size_t *out_len)
{
    CK_RV rv;
    EVP_CIPHER *cipher;
    EVP_CIPHER_CTX *ctx;
    if (!op->key || !op->key_len || (op->in_len && !op->in) || op->in_len > INT32_MAX / 2)
        return CKR_ARGUMENTS_BAD;
    switch (op->mechanism) {
        case CKM_SHA_1_HMAC: case CKM_SHA224_HMAC: case CKM_SHA256_HMAC: case CKM_SHA384_HMAC:
        case CKM_SHA512_HMAC: case CKM_AES_CMAC:
            return s_mac (op, out, out_len);
        case CKM_AES_ECB: case CKM_AES_CBC: case CKM_AES_CBC_PAD: case CKM_AES_GCM: case CKM_AES_CTR:
        case CKM_AES_KEY_WRAP: case CKM_AES_KEY_WRAP_PAD: case CKM_DES3_ECB: case CKM_DES3_CBC:
        case CKM_DES3_CBC_PAD: case CKM_DES_ECB: case CKM_DES_CBC: case CKM_DES_CBC_PAD:
            break;
        default:
            return CKR_MECHANISM_INVALID;
    }
    if (op->operation != CS_SYM_ENCRYPT && op->operation != CS_SYM_DECRYPT)
        return CKR_MECHANISM_INVALID;
    if (!(cipher = s_cipher (op->mechanism, op->key_len)))
        return CKR_KEY_SIZE_RANGE;
    if (!(ctx = EVP_CIPHER_CTX_new ())) {
        EVP_CIPHER_free (cipher);
        return CKR_HOST_MEMORY;
    }
    if (op->mechanism == CKM_AES_GCM)
        rv = s_gcm (ctx, cipher, op, out, out_len);
    else
    if (op->mechanism == CKM_AES_KEY_WRAP || op->mechanism == CKM_AES_KEY_WRAP_PAD)
        rv = s_wrap (ctx, cipher, op, out, out_len);
    else
        rv = s_block (ctx, cipher, op, out, out_len);
    EVP_CIPHER_CTX_free (ctx);          /* cleanses the key schedule */
    EVP_CIPHER_free (cipher);
    return rv;
}

int
drv_sym_mechs_add (cs_mech_info_t **mechs_p, size_t *count_p, bool des)
{
    static const cs_mech_info_t legacy [] = {
        { CKM_DES_ECB, S_DES_KEY, S_DES_KEY, CKF_ENCRYPT | CKF_DECRYPT },
        { CKM_DES_CBC, S_DES_KEY, S_DES_KEY, CKF_ENCRYPT | CKF_DECRYPT },
        { CKM_DES_CBC_PAD, S_DES_KEY, S_DES_KEY, CKF_ENCRYPT | CKF_DECRYPT },
    };
    static const cs_mech_info_t sym [] = {
        { CKM_AES_ECB, 16, 32, CKF_ENCRYPT | CKF_DECRYPT },
        { CKM_AES_CBC, 16, 32, CKF_ENCRYPT | CKF_DECRYPT },
        { CKM_AES_CBC_PAD, 16, 32, CKF_ENCRYPT | CKF_DECRYPT },
        { CKM_AES_GCM, 16, 32, CKF_ENCRYPT | CKF_DECRYPT },
        { CKM_AES_CTR, 16, 32, CKF_ENCRYPT | CKF_DECRYPT },
        { CKM_AES_KEY_WRAP, 16, 32, CKF_ENCRYPT | CKF_DECRYPT },
        { CKM_AES_KEY_WRAP_PAD, 16, 32, CKF_ENCRYPT | CKF_DECRYPT },
        { CKM_AES_CMAC, 16, 32, CKF_SIGN | CKF_VERIFY },
        { CKM_DES3_ECB, S_DES3_KEY, S_DES3_KEY, CKF_ENCRYPT | CKF_DECRYPT },
        { CKM_DES3_CBC, S_DES3_KEY, S_DES3_KEY, CKF_ENCRYPT | CKF_DECRYPT },
        { CKM_DES3_CBC_PAD, S_DES3_KEY, S_DES3_KEY, CKF_ENCRYPT | CKF_DECRYPT },
        { CKM_SHA_1_HMAC, 16, 256, CKF_SIGN | CKF_VERIFY },
        { CKM_SHA224_HMAC, 16, 256, CKF_SIGN | CKF_VERIFY },
        { CKM_SHA256_HMAC, 16, 256, CKF_SIGN | CKF_VERIFY },
        { CKM_SHA384_HMAC, 16, 256, CKF_SIGN | CKF_VERIFY },
        { CKM_SHA512_HMAC, 16, 256, CKF_SIGN | CKF_VERIFY },
    };
    size_t n = sizeof sym / sizeof sym [0], m = des ? sizeof legacy / sizeof legacy [0] : 0;
    cs_mech_info_t *grown = realloc (*mechs_p, (*count_p + n + m) * sizeof *grown);
    if (!grown)
        return -1;
    memcpy (grown + *count_p, sym, sizeof sym);
    memcpy (grown + *count_p + n, legacy, m * sizeof *legacy);
    *mechs_p = grown;
    *count_p += n + m;
    return 0;
}
