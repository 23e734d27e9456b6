/*  verify.c — a worker's check of a board's result (verify.h).  */
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/param_build.h>
#include <openssl/rsa.h>
#include <openssl/sha.h>
#include <openssl/x509.h>
#include "cs_util.h"
#include "cs_mech.h"
#include "cs_keyfacts.h"
#include "drv_keys.h"
#include "verify.h"

#define S_CACHE_MAX 1024            /* public keys kept per worker; then the cache restarts */
#define S_BLOCK_MAX 1024            /* bytes: a 8192-bit RSA block */

struct _verify_t {
    zhashx_t *keys;                 /* name -> EVP_PKEY * (public) */
    uint64_t sample;                /* results seen, for sampling */
};

static void
s_pkey_free (void **item)
{
    EVP_PKEY_free (*(EVP_PKEY **) item);
    *item = NULL;
}

verify_t *
verify_new (void)
{
    verify_t *self = calloc (1, sizeof *self);
    if (self && !(self->keys = zhashx_new ()))
        verify_destroy (&self);
    if (self)
        zhashx_set_destructor (self->keys, s_pkey_free);
    return self;
}

void
verify_destroy (verify_t **self_p)
{
    verify_t *self = self_p ? *self_p : NULL;
    if (!self)
        return;
    zhashx_destroy (&self->keys);
    free (self);
    *self_p = NULL;
}

/*  An RSA public key from n and e (big-endian).  */
static EVP_PKEY *
s_rsa_public (const cs_key_info_t *info)
{
    OSSL_PARAM_BLD *bld = OSSL_PARAM_BLD_new ();
    BIGNUM *n = BN_bin2bn (info->modulus, (int) info->modulus_len, NULL);
    BIGNUM *e = BN_bin2bn (info->public_exponent, (int) info->public_exponent_len, NULL);
    OSSL_PARAM *params = NULL;
    EVP_PKEY *pkey = NULL;
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_name (NULL, "RSA", NULL);
    if (bld && n && e && ctx && OSSL_PARAM_BLD_push_BN (bld, OSSL_PKEY_PARAM_RSA_N, n)
    &&  OSSL_PARAM_BLD_push_BN (bld, OSSL_PKEY_PARAM_RSA_E, e) && (params = OSSL_PARAM_BLD_to_param (bld))
    &&  EVP_PKEY_fromdata_init (ctx) > 0)
        EVP_PKEY_fromdata (ctx, &pkey, EVP_PKEY_PUBLIC_KEY, params);
    OSSL_PARAM_free (params);
    EVP_PKEY_CTX_free (ctx);
    BN_free (n);
    BN_free (e);
    OSSL_PARAM_BLD_free (bld);
    return pkey;
}

/*  An EC or Ed25519 public key from CKA_EC_PARAMS and CKA_EC_POINT (a DER
 *  OCTET STRING of the point).  */
static EVP_PKEY *
s_ec_public (const cs_key_info_t *info)
{
    const char *curve = drv_curve_name (info->ec_params, info->ec_params_len);
    const unsigned char *p = info->ec_point;
    ASN1_OCTET_STRING *point = p ? d2i_ASN1_OCTET_STRING (NULL, &p, (long) info->ec_point_len) : NULL;
    EVP_PKEY *pkey = NULL;
    if (!curve || !point)
        goto out;
    if (drv_raw_pkey_type (curve)) {
        pkey = EVP_PKEY_new_raw_public_key (drv_raw_pkey_type (curve), NULL, ASN1_STRING_get0_data (point),
                                            (size_t) ASN1_STRING_length (point));
        goto out;
    }
    OSSL_PARAM params [] = {
        OSSL_PARAM_utf8_string (OSSL_PKEY_PARAM_GROUP_NAME, (char *) curve, 0),
        OSSL_PARAM_octet_string (OSSL_PKEY_PARAM_PUB_KEY, (void *) ASN1_STRING_get0_data (point),
                                 (size_t) ASN1_STRING_length (point)),
        OSSL_PARAM_END
    };
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_name (NULL, "EC", NULL);
    if (ctx && EVP_PKEY_fromdata_init (ctx) > 0)
        EVP_PKEY_fromdata (ctx, &pkey, EVP_PKEY_PUBLIC_KEY, params);
    EVP_PKEY_CTX_free (ctx);
out:
    ASN1_OCTET_STRING_free (point);
    return pkey;
}

/*  The public half of PKCS#8 material (the private half is not kept).  */
static EVP_PKEY *
s_material_public (const unsigned char *der, size_t len)
{
    EVP_PKEY *private = cs_pkey_from_pkcs8 (der, len);
    unsigned char *spki = NULL;
    int spki_len = private ? i2d_PUBKEY (private, &spki) : -1;
    EVP_PKEY_free (private);
    if (spki_len <= 0)
        return NULL;
    const unsigned char *p = spki;
    EVP_PKEY *pkey = d2i_PUBKEY (NULL, &p, spki_len);
    OPENSSL_free (spki);
    return pkey;
}

/*  The cached public key of `key` (made on first use), or NULL.  */
static EVP_PKEY *
s_public (verify_t *self, const board_t *board, const cs_drv_key_t *key)
{
    char name [2 * SHA256_DIGEST_LENGTH + 2 * CS_KEY_ID_MAX + 256];
    unsigned char hash [SHA256_DIGEST_LENGTH];
    if (key->pkcs8) {
        SHA256 (key->pkcs8, key->pkcs8_len, hash);
        memcpy (name, "m:", 2);
        cs_hex_encode (hash, sizeof hash, name + 2);
    }
    else if (key->id && key->id_len <= CS_KEY_ID_MAX) {
        int n = snprintf (name, sizeof name, "r:%.200s:", board->name);
        cs_hex_encode (key->id, key->id_len, name + n);
    }
    else
        return NULL;
    EVP_PKEY *pkey = zhashx_lookup (self->keys, name);
    if (pkey)
        return pkey;
    if (key->pkcs8)
        pkey = s_material_public (key->pkcs8, key->pkcs8_len);
    else {
        const cs_key_info_t *info = board_key (board, key->id, key->id_len);
        if (info && info->key_type == CKK_RSA && info->modulus && info->public_exponent)
            pkey = s_rsa_public (info);
        else if (info && (info->key_type == CKK_EC || info->key_type == CKK_EC_EDWARDS))
            pkey = s_ec_public (info);
    }
    if (!pkey)
        return NULL;
    if (zhashx_size (self->keys) >= S_CACHE_MAX)
        zhashx_purge (self->keys);
    zhashx_insert (self->keys, name, pkey);
    return pkey;
}

/*  Left-pads a big-endian number to k bytes; false when it is longer.  */
static bool
s_pad (const unsigned char *in, size_t len, unsigned char *block, size_t k)
{
    while (len > k && *in == 0) {
        in++;
        len--;
    }
    if (len > k)
        return false;
    memset (block, 0, k - len);
    memcpy (block + k - len, in, len);
    return true;
}

/*  x^e mod n of x (x_len bytes) == expect (big-endian, any length).  */
static verify_outcome_t
s_rsa_raw (EVP_PKEY *pkey, const unsigned char *x, size_t x_len, const unsigned char *expect, size_t expect_len)
{
    size_t k = (size_t) EVP_PKEY_get_size (pkey);
    unsigned char block [S_BLOCK_MAX], want [S_BLOCK_MAX], got [S_BLOCK_MAX];
    size_t got_len = sizeof got;
    if (k == 0 || k > S_BLOCK_MAX || !s_pad (x, x_len, block, k))
        return VERIFY_WRONG;
    if (!s_pad (expect, expect_len, want, k))
        return VERIFY_SKIPPED;      /* the job's own input was out of range: the board's answer stands */
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new (pkey, NULL);
    bool ok = ctx && EVP_PKEY_encrypt_init (ctx) > 0
           && EVP_PKEY_CTX_set_rsa_padding (ctx, RSA_NO_PADDING) > 0
           && EVP_PKEY_encrypt (ctx, got, &got_len, block, k) > 0
           && got_len == k && CRYPTO_memcmp (got, want, k) == 0;
    EVP_PKEY_CTX_free (ctx);
    return ok ? VERIFY_OK : VERIFY_WRONG;
}

/*  RSASSA-PKCS1-v1_5 of any input, the empty one too (CKM_RSA_PKCS signs
 *  the bytes it is given): the recovered payload equals the input.  */
static verify_outcome_t
s_rsa_pkcs1 (EVP_PKEY *pkey, const unsigned char *in, size_t in_len, const unsigned char *sig, size_t sig_len)
{
    unsigned char payload [S_BLOCK_MAX];
    size_t payload_len = sizeof payload;
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new (pkey, NULL);
    bool ok = ctx && (size_t) EVP_PKEY_get_size (pkey) <= S_BLOCK_MAX
           && EVP_PKEY_verify_recover_init (ctx) > 0
           && EVP_PKEY_CTX_set_rsa_padding (ctx, RSA_PKCS1_PADDING) > 0
           && EVP_PKEY_verify_recover (ctx, payload, &payload_len, sig, sig_len) > 0
           && payload_len == in_len && CRYPTO_memcmp (payload, in, in_len) == 0;
    EVP_PKEY_CTX_free (ctx);
    return ok ? VERIFY_OK : VERIFY_WRONG;
}

/*  RSASSA-PSS.  */
static verify_outcome_t
s_rsa_sign (EVP_PKEY *pkey, const cs_drv_mech_t *mech, const unsigned char *in, size_t in_len,
            const unsigned char *sig, size_t sig_len)
{
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new (pkey, NULL);
    bool pss = mech->type == CKM_RSA_PKCS_PSS;
    const EVP_MD *md = pss ? cs_mech_md (mech->hash) : NULL;
    const EVP_MD *mgf = pss ? cs_mech_mgf_md (mech->mgf) : NULL;
    verify_outcome_t outcome = VERIFY_SKIPPED;
    if (!ctx || EVP_PKEY_verify_init (ctx) <= 0 || (pss && (!md || !mgf)))
        goto out;
    if (pss ? EVP_PKEY_CTX_set_rsa_padding (ctx, RSA_PKCS1_PSS_PADDING) <= 0
              || EVP_PKEY_CTX_set_signature_md (ctx, md) <= 0
              || EVP_PKEY_CTX_set_rsa_mgf1_md (ctx, mgf) <= 0
              || EVP_PKEY_CTX_set_rsa_pss_saltlen (ctx, (int) mech->salt_len) <= 0
            : EVP_PKEY_CTX_set_rsa_padding (ctx, RSA_PKCS1_PADDING) <= 0)
        goto out;
    outcome = EVP_PKEY_verify (ctx, sig, sig_len, in, in_len) == 1 ? VERIFY_OK : VERIFY_WRONG;
out:
    EVP_PKEY_CTX_free (ctx);
    return outcome;
}

/*  ECDSA over a digest: the board's r || s as DER.  */
static verify_outcome_t
s_ecdsa (EVP_PKEY *pkey, const unsigned char *in, size_t in_len, const unsigned char *sig, size_t sig_len)
{
    ECDSA_SIG *der_sig = ECDSA_SIG_new ();
    BIGNUM *r = BN_bin2bn (sig, (int) (sig_len / 2), NULL);
    BIGNUM *s = BN_bin2bn (sig + sig_len / 2, (int) (sig_len / 2), NULL);
    unsigned char *der = NULL;
    int der_len = -1;
    if (der_sig && r && s && sig_len % 2 == 0 && ECDSA_SIG_set0 (der_sig, r, s)) {
        r = s = NULL;
        der_len = i2d_ECDSA_SIG (der_sig, &der);
    }
    BN_free (r);
    BN_free (s);
    ECDSA_SIG_free (der_sig);
    EVP_PKEY_CTX *ctx = der_len > 0 ? EVP_PKEY_CTX_new (pkey, NULL) : NULL;
    bool ok = ctx && EVP_PKEY_verify_init (ctx) > 0
           && EVP_PKEY_verify (ctx, der, (size_t) der_len, in, in_len) == 1;
    EVP_PKEY_CTX_free (ctx);
    OPENSSL_free (der);
    return ok ? VERIFY_OK : VERIFY_WRONG;
}

/*  Ed25519 over the whole message.  */
static verify_outcome_t
s_eddsa (EVP_PKEY *pkey, const unsigned char *in, size_t in_len, const unsigned char *sig, size_t sig_len)
{
    EVP_MD_CTX *ctx = EVP_MD_CTX_new ();
    bool ok = ctx && EVP_DigestVerifyInit (ctx, NULL, NULL, NULL, pkey) > 0
           && EVP_DigestVerify (ctx, sig, sig_len, in, in_len) == 1;
    EVP_MD_CTX_free (ctx);
    return ok ? VERIFY_OK : VERIFY_WRONG;
}

/*  True when this result is in the sample of `pct` percent.  */
static bool
s_sampled (verify_t *self, int pct)
{
    if (pct >= 100)
        return true;
    return pct > 0 && (self->sample++ % 100) < (uint64_t) pct;
}

verify_outcome_t
verify_result (verify_t *self, const board_t *board, bool sign, const cs_drv_key_t *key,
               const cs_drv_mech_t *mech, const unsigned char *in, size_t in_len,
               const unsigned char *out, size_t out_len)
{
    bool rsa = mech->type == CKM_RSA_PKCS || mech->type == CKM_RSA_PKCS_PSS || mech->type == CKM_RSA_X_509;
    if (!s_sampled (self, rsa ? board->verify_rsa : board->verify_ec))
        return VERIFY_SKIPPED;
    return verify_always (self, board, sign, key, mech, in, in_len, out, out_len);
}

verify_outcome_t
verify_always (verify_t *self, const board_t *board, bool sign, const cs_drv_key_t *key,
               const cs_drv_mech_t *mech, const unsigned char *in, size_t in_len,
               const unsigned char *out, size_t out_len)
{
    bool rsa = mech->type == CKM_RSA_PKCS || mech->type == CKM_RSA_PKCS_PSS || mech->type == CKM_RSA_X_509;
    bool ec = mech->type == CKM_ECDSA || mech->type == CKM_EDDSA;
    if ((!rsa && !ec) || (!sign && mech->type != CKM_RSA_X_509))
        return VERIFY_SKIPPED;
    EVP_PKEY *pkey = s_public (self, board, key);
    if (!pkey)
        return VERIFY_SKIPPED;
    if (rsa && EVP_PKEY_get_base_id (pkey) != EVP_PKEY_RSA)
        return VERIFY_SKIPPED;      /* the board answered a key-type error before this */
    if (mech->type == CKM_RSA_X_509)
        return s_rsa_raw (pkey, out, out_len, in, in_len);    /* sign: s^e = m; decrypt: m^e = c */
    if (mech->type == CKM_RSA_PKCS)
        return s_rsa_pkcs1 (pkey, in, in_len, out, out_len);
    if (rsa)
        return s_rsa_sign (pkey, mech, in, in_len, out, out_len);
    if (mech->type == CKM_ECDSA && EVP_PKEY_get_base_id (pkey) == EVP_PKEY_EC)
        return s_ecdsa (pkey, in, in_len, out, out_len);
    if (mech->type == CKM_EDDSA && (EVP_PKEY_get_base_id (pkey) == EVP_PKEY_ED25519
                                    || EVP_PKEY_get_base_id (pkey) == EVP_PKEY_ED448))
        return s_eddsa (pkey, in, in_len, out, out_len);
    return VERIFY_SKIPPED;
}
