/*  cs_bench_verify.c — checks each benchmark signature with OpenSSL, using
 *  only the public key read from the token: the module's own code is not
 *  trusted to judge its own output (docs/DESIGN.md §7).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/objects.h>
#include <openssl/param_build.h>
#include <openssl/rsa.h>
#include "cs_bench.h"

struct cs_bench_verifier {
    EVP_PKEY *pkey;
    cs_bench_mech_t mech;
};

//  RSA public key from big-endian n and e.
static EVP_PKEY *
s_rsa_key (const cs_bench_pubkey_t *pubkey)
{
    EVP_PKEY *pkey = NULL;
    BIGNUM *n = BN_bin2bn (pubkey->modulus, (int) pubkey->modulus_len, NULL);
    BIGNUM *e = BN_bin2bn (pubkey->exponent, (int) pubkey->exponent_len, NULL);
    OSSL_PARAM_BLD *build = OSSL_PARAM_BLD_new ();
    OSSL_PARAM *params = NULL;
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_name (NULL, "RSA", NULL);
    if (n && e && build && ctx
    &&  OSSL_PARAM_BLD_push_BN (build, OSSL_PKEY_PARAM_RSA_N, n)
    &&  OSSL_PARAM_BLD_push_BN (build, OSSL_PKEY_PARAM_RSA_E, e)
    &&  (params = OSSL_PARAM_BLD_to_param (build))
    &&  EVP_PKEY_fromdata_init (ctx) == 1)
        EVP_PKEY_fromdata (ctx, &pkey, EVP_PKEY_PUBLIC_KEY, params);
    EVP_PKEY_CTX_free (ctx);
    OSSL_PARAM_free (params);
    OSSL_PARAM_BLD_free (build);
    BN_free (n);
    BN_free (e);
    return pkey;
}

//  The uncompressed point inside CKA_EC_POINT: PKCS#11 says a DER OCTET
//  STRING, some modules give the raw point.  Sets *point and *len into the
//  attribute's buffer.  Returns false when neither form fits.
static bool
s_ec_point_raw (const cs_bench_pubkey_t *pubkey, const unsigned char **point, size_t *len)
{
    const unsigned char *der = pubkey->ec_point;
    ASN1_OCTET_STRING *octets = d2i_ASN1_OCTET_STRING (NULL, &der, (long) pubkey->ec_point_len);
    if (octets && der == pubkey->ec_point + pubkey->ec_point_len) {
        *len = (size_t) ASN1_STRING_length (octets);
        *point = pubkey->ec_point + (pubkey->ec_point_len - *len);
    }
    else {
        *point = pubkey->ec_point;
        *len = pubkey->ec_point_len;
    }
    ASN1_OCTET_STRING_free (octets);
    return *len > 0 && (*point) [0] == 0x04;
}

//  EC public key from CKA_EC_PARAMS (a named-curve OID) and CKA_EC_POINT.
static EVP_PKEY *
s_ec_key (const cs_bench_pubkey_t *pubkey)
{
    const unsigned char *der = pubkey->ec_params, *point;
    size_t point_len;
    ASN1_OBJECT *oid = d2i_ASN1_OBJECT (NULL, &der, (long) pubkey->ec_params_len);
    const char *group = oid ? OBJ_nid2sn (OBJ_obj2nid (oid)) : NULL;
    EVP_PKEY *pkey = NULL;
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_name (NULL, "EC", NULL);
    if (group && ctx && s_ec_point_raw (pubkey, &point, &point_len)) {
        OSSL_PARAM params [] = {
            OSSL_PARAM_utf8_string (OSSL_PKEY_PARAM_GROUP_NAME, (char *) group, 0),
            OSSL_PARAM_octet_string (OSSL_PKEY_PARAM_PUB_KEY, (void *) point, point_len),
            OSSL_PARAM_END
        };
        if (EVP_PKEY_fromdata_init (ctx) == 1)
            EVP_PKEY_fromdata (ctx, &pkey, EVP_PKEY_PUBLIC_KEY, params);
    }
    EVP_PKEY_CTX_free (ctx);
    ASN1_OBJECT_free (oid);
    return pkey;
}

cs_bench_verifier_t *
cs_bench_verifier_new (const cs_bench_pubkey_t *pubkey, cs_bench_mech_t mech,
                       char *err, size_t err_size)
{
    bool want_rsa = !cs_bench_mech_is_ec (mech);
    if (want_rsa != (pubkey->key_type == CKK_RSA)) {
        snprintf (err, err_size, "the key is %s, mechanism %s needs %s",
                  pubkey->key_type == CKK_RSA ? "RSA" : "EC", cs_bench_mech_name (mech),
                  want_rsa ? "RSA" : "EC");
        return NULL;
    }
    EVP_PKEY *pkey = want_rsa ? s_rsa_key (pubkey) : s_ec_key (pubkey);
    if (!pkey) {
        snprintf (err, err_size, "OpenSSL cannot use the token's public key");
        return NULL;
    }
    cs_bench_verifier_t *self = calloc (1, sizeof *self);
    if (!self) {
        EVP_PKEY_free (pkey);
        snprintf (err, err_size, "out of memory");
        return NULL;
    }
    self->pkey = pkey;
    self->mech = mech;
    return self;
}

cs_bench_verifier_t *
cs_bench_verifier_from_pem (const char *path, const cs_bench_pubkey_t *token_key,
                            cs_bench_mech_t mech, char *err, size_t err_size)
{
    cs_bench_verifier_t *self = cs_bench_verifier_new (token_key, mech, err, err_size);
    if (!self)
        return NULL;
    FILE *file = fopen (path, "re");
    EVP_PKEY *pkey = file ? PEM_read_PUBKEY (file, NULL, NULL, NULL) : NULL;
    if (file)
        fclose (file);
    if (!pkey) {
        snprintf (err, err_size, "%s: not a readable PEM public key", path);
        cs_bench_verifier_destroy (&self);
        return NULL;
    }
    if (EVP_PKEY_eq (pkey, self->pkey) != 1) {
        snprintf (err, err_size, "%s is not the public key of the token's key", path);
        EVP_PKEY_free (pkey);
        cs_bench_verifier_destroy (&self);
        return NULL;
    }
    EVP_PKEY_free (self->pkey);
    self->pkey = pkey;
    return self;
}

void
cs_bench_verifier_destroy (cs_bench_verifier_t **self_p)
{
    if (*self_p) {
        EVP_PKEY_free ((*self_p)->pkey);
        free (*self_p);
        *self_p = NULL;
    }
}

int
cs_bench_verifier_bits (const cs_bench_verifier_t *self)
{
    return EVP_PKEY_get_bits (self->pkey);
}

//  Converts a PKCS#11 ECDSA signature (r||s, equal halves) to DER.  Returns
//  a malloc'd buffer of *der_len bytes (caller frees) or NULL.
static unsigned char *
s_ecdsa_der (const unsigned char *sig, size_t sig_len, size_t *der_len)
{
    if (sig_len == 0 || sig_len % 2)
        return NULL;
    ECDSA_SIG *ecdsa = ECDSA_SIG_new ();
    BIGNUM *r = BN_bin2bn (sig, (int) sig_len / 2, NULL);
    BIGNUM *s = BN_bin2bn (sig + sig_len / 2, (int) sig_len / 2, NULL);
    unsigned char *der = NULL;
    if (ecdsa && r && s && ECDSA_SIG_set0 (ecdsa, r, s) == 1) {
        r = s = NULL;           //  owned by ecdsa now
        int len = i2d_ECDSA_SIG (ecdsa, &der);
        *der_len = len > 0 ? (size_t) len : 0;
    }
    BN_free (r);
    BN_free (s);
    ECDSA_SIG_free (ecdsa);
    return der;
}

//  Sets RSA-PSS padding as the mechanism says: MGF1-SHA256, salt 32 bytes.
static bool
s_pss_setup (EVP_PKEY_CTX *pctx)
{
    return EVP_PKEY_CTX_set_rsa_padding (pctx, RSA_PKCS1_PSS_PADDING) > 0
        && EVP_PKEY_CTX_set_rsa_pss_saltlen (pctx, 32) > 0
        && EVP_PKEY_CTX_set_rsa_mgf1_md (pctx, EVP_sha256 ()) > 0;
}

bool
cs_bench_verify (const cs_bench_verifier_t *self, const void *msg, size_t msg_len,
                 const void *sig, size_t sig_len)
{
    unsigned char *der = NULL;
    size_t der_len = 0;
    if (cs_bench_mech_is_ec (self->mech)) {
        if (!(der = s_ecdsa_der (sig, sig_len, &der_len)))
            return false;
        sig = der;
        sig_len = der_len;
    }
    EVP_MD_CTX *md = EVP_MD_CTX_new ();
    EVP_PKEY_CTX *pctx = NULL;
    bool ok = md
           && EVP_DigestVerifyInit (md, &pctx, EVP_sha256 (), NULL, self->pkey) == 1
           && (self->mech != CS_BENCH_RSA_PSS_SHA256 || s_pss_setup (pctx))
           && EVP_DigestVerify (md, sig, sig_len, msg, msg_len) == 1;
    EVP_MD_CTX_free (md);
    OPENSSL_free (der);
    return ok;
}
