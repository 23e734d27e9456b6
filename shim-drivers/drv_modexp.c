/*  drv_modexp.c — raw modular exponentiation with OpenSSL's BIGNUM
 *  (drv_modexp.h), for the openssl and sim boards.
 */
#include <openssl/bn.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include "drv_modexp.h"
#include "cryptoserver/pkcs11v.h"

/*  A secure BIGNUM of a big-endian string, or NULL.  */
static BIGNUM *
s_bn (const unsigned char *bytes, size_t len)
{
    BIGNUM *bn = BN_secure_new ();
    if (bn && len && !BN_bin2bn (bytes, (int) len, bn)) {
        BN_clear_free (bn);
        return NULL;
    }
    return bn;
}

/*  base^exp mod m, in constant time for odd m (BN_FLG_CONSTTIME).  */
static int
s_powm (BIGNUM *r, const BIGNUM *base, const BIGNUM *exp, const BIGNUM *m, BN_CTX *ctx)
{
    if (BN_is_odd (m))
        return BN_mod_exp_mont_consttime (r, base, exp, m, ctx, NULL);
    return BN_mod_exp (r, base, exp, m, ctx);
}

/*  Writes r left-padded to k bytes.  */
static CK_RV
s_write (const BIGNUM *r, size_t k, unsigned char *out, size_t *out_len)
{
    if (*out_len < k)
        return CKR_BUFFER_TOO_SMALL;
    if (BN_bn2binpad (r, out, (int) k) != (int) k)
        return CKR_DEVICE_ERROR;
    *out_len = k;
    return CKR_OK;
}

static CK_RV
s_plain (const cs_modexp_t *op, BN_CTX *ctx, unsigned char *out, size_t *out_len)
{
    BIGNUM *base = s_bn (op->base, op->base_len), *e = s_bn (op->exponent, op->exponent_len);
    BIGNUM *m = s_bn (op->modulus, op->modulus_len), *r = BN_secure_new ();
    CK_RV rv = CKR_HOST_MEMORY;
    if (!base || !e || !m || !r)
        goto out;
    rv = CKR_MECHANISM_PARAM_INVALID;
    if (BN_is_zero (m))
        goto out;
    rv = CKR_DATA_LEN_RANGE;
    if (BN_num_bits (m) > DRV_MODEXP_MAX_BITS)
        goto out;
    rv = CKR_DEVICE_ERROR;
    if (!BN_nnmod (base, base, m, ctx) || !s_powm (r, base, e, m, ctx))
        goto out;
    rv = s_write (r, (size_t) BN_num_bytes (m), out, out_len);
out:
    BN_clear_free (base);
    BN_clear_free (e);
    BN_free (m);
    BN_clear_free (r);
    return rv;
}

/*  The check of a CRT result m of c mod prime: m^check = c (mod prime).  */
static int
s_half_ok (const BIGNUM *m, const BIGNUM *c, const BIGNUM *check, const BIGNUM *prime, BN_CTX *ctx)
{
    BIGNUM *a = BN_secure_new (), *b = BN_secure_new ();
    int ok = a && b && BN_nnmod (a, m, prime, ctx) && s_powm (a, a, check, prime, ctx)
          && BN_nnmod (b, c, prime, ctx) && BN_cmp (a, b) == 0;
    BN_clear_free (a);
    BN_clear_free (b);
    return ok;
}

/*  dx^-1 mod (prime - 1), or NULL when there is none.  */
static BIGNUM *
s_inverse_exp (const BIGNUM *dx, const BIGNUM *prime, BN_CTX *ctx)
{
    BIGNUM *pm1 = BN_dup (prime), *inv = BN_secure_new ();
    if (!pm1 || !inv || !BN_sub_word (pm1, 1) || !BN_mod_inverse (inv, dx, pm1, ctx)) {
        ERR_clear_error ();
        BN_free (pm1);
        BN_clear_free (inv);
        return NULL;
    }
    BN_free (pm1);
    return inv;
}

/*  Is m the right result for c?  See cs_driver.h (cs_modexp_t).  */
static bool
s_crt_ok (const cs_modexp_t *op, const BIGNUM *m, const BIGNUM *c, const BIGNUM *n,
          const BIGNUM *p, const BIGNUM *q, const BIGNUM *dp, const BIGNUM *dq, BN_CTX *ctx)
{
    bool ok = false;
    if (op->public_exponent_len) {
        BIGNUM *e = s_bn (op->public_exponent, op->public_exponent_len), *t = BN_secure_new ();
        ok = e && t && s_powm (t, m, e, n, ctx) && BN_cmp (t, c) == 0;
        BN_free (e);
        BN_clear_free (t);
        return ok;
    }
    BIGNUM *ep = s_inverse_exp (dp, p, ctx), *eq = s_inverse_exp (dq, q, ctx);
    ok = ep && eq && s_half_ok (m, c, ep, p, ctx) && s_half_ok (m, c, eq, q, ctx);
    BN_clear_free (ep);
    BN_clear_free (eq);
    return ok;
}

static CK_RV
s_crt (const cs_modexp_t *op, const char *what, BN_CTX *ctx, unsigned char *out, size_t *out_len)
{
    BIGNUM *c = s_bn (op->base, op->base_len), *p = s_bn (op->p, op->p_len), *q = s_bn (op->q, op->q_len);
    BIGNUM *dp = s_bn (op->dp, op->dp_len), *dq = s_bn (op->dq, op->dq_len);
    BIGNUM *qinv = s_bn (op->qinv, op->qinv_len);
    BIGNUM *n = BN_secure_new (), *m1 = BN_secure_new (), *m2 = BN_secure_new (), *h = BN_secure_new ();
    CK_RV rv = CKR_HOST_MEMORY;
    if (!c || !p || !q || !dp || !dq || !qinv || !n || !m1 || !m2 || !h)
        goto out;
    rv = CKR_MECHANISM_PARAM_INVALID;
    if (BN_cmp (p, BN_value_one ()) <= 0 || BN_cmp (q, BN_value_one ()) <= 0
    ||  !BN_is_odd (p) || !BN_is_odd (q))
        goto out;
    rv = CKR_DEVICE_ERROR;
    if (!BN_mul (n, p, q, ctx))
        goto out;
    if (BN_num_bits (n) > DRV_MODEXP_MAX_BITS) {
        rv = CKR_DATA_LEN_RANGE;
        goto out;
    }
    BN_set_flags (dp, BN_FLG_CONSTTIME);
    BN_set_flags (dq, BN_FLG_CONSTTIME);
    /*  RFC 8017 §5.1.2 2.b: m1 = c^dP mod p, m2 = c^dQ mod q,
        h = (m1 - m2) qInv mod p, m = m2 + q h.  */
    if (!BN_nnmod (c, c, n, ctx)
    ||  !BN_nnmod (m1, c, p, ctx) || !BN_mod_exp_mont_consttime (m1, m1, dp, p, ctx, NULL)
    ||  !BN_nnmod (m2, c, q, ctx) || !BN_mod_exp_mont_consttime (m2, m2, dq, q, ctx, NULL)
    ||  !BN_mod_sub (h, m1, m2, p, ctx) || !BN_mod_mul (h, h, qinv, p, ctx)
    ||  !BN_mul (h, h, q, ctx) || !BN_add (m1, m2, h))
        goto out;
    if (!s_crt_ok (op, m1, c, n, p, q, dp, dq, ctx)) {
        /*  A wrong key (no inverse, qInv wrong) and a fault look alike
            here: both are refused, and logged without any value.  */
        zsys_error ("%s: a raw RSA CRT result failed its check: not released", what);
        rv = op->public_exponent_len ? CKR_DEVICE_ERROR : CKR_MECHANISM_PARAM_INVALID;
        goto out;
    }
    rv = s_write (m1, (size_t) BN_num_bytes (n), out, out_len);
out:
    BN_clear_free (c);
    BN_clear_free (p);
    BN_clear_free (q);
    BN_clear_free (dp);
    BN_clear_free (dq);
    BN_clear_free (qinv);
    BN_free (n);
    BN_clear_free (m1);
    BN_clear_free (m2);
    BN_clear_free (h);
    return rv;
}

CK_RV
drv_modexp_bn (const cs_modexp_t *op, const char *what, unsigned char *out, size_t *out_len)
{
    BN_CTX *ctx = BN_CTX_secure_new ();
    CK_RV rv = CKR_HOST_MEMORY;
    if (ctx)
        rv = op->modulus ? s_plain (op, ctx, out, out_len)
           : op->p ? s_crt (op, what, ctx, out, out_len) : CKR_MECHANISM_PARAM_INVALID;
    BN_CTX_free (ctx);
    return rv;
}

int
drv_modexp_mechs_add (cs_mech_info_t **mechs_p, size_t *count_p, unsigned long max_bits)
{
    static const CK_MECHANISM_TYPE types [] = {
        CKM_CS_MODEXP, CKM_CS_MODEXP_ARRAY, CKM_CS_RSA_CRT, CKM_CS_RSA_CRT_ARRAY,
        CKM_CS_MULTI_MODEXP_ARRAY
    };
    size_t n = sizeof types / sizeof types [0];
    cs_mech_info_t *mechs = realloc (*mechs_p, (*count_p + n) * sizeof *mechs);
    if (!mechs)
        return -1;
    for (size_t i = 0; i < n; i++)
        mechs [*count_p + i] = (cs_mech_info_t) { types [i], DRV_MODEXP_MIN_BITS, max_bits,
                                                   CKF_HW | CKF_DIGEST };
    *mechs_p = mechs;
    *count_p += n;
    return 0;
}
