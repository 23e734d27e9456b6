/*  gmp_modexp.c — raw modular exponentiation in GMP (gmp_modexp.h).  */
#include <string.h>
#include <gmp.h>
#include "gmp_modexp.h"

enum { S_BASE, S_E, S_M, S_P, S_Q, S_DP, S_DQ, S_QINV, S_N, S_M1, S_M2, S_H, S_T, S_U, S_COUNT };

/*  Overwrites every allocated limb of z (as gmp_rsa.c does: mpz_clear does
 *  not wipe) and clears it.  */
static void
s_wipe_clear (mpz_t z)
{
    mp_size_t alloc = z->_mp_alloc;
    if (alloc > 0) {
        mp_limb_t *limbs = mpz_limbs_modify (z, alloc);
        explicit_bzero (limbs, (size_t) alloc * sizeof *limbs);
        mpz_limbs_finish (z, 0);
    }
    mpz_clear (z);
}

static void
s_import (mpz_t z, const unsigned char *bytes, size_t len)
{
    if (bytes && len)
        mpz_import (z, len, 1, 1, 1, 0, bytes);
    else
        mpz_set_ui (z, 0);
}

/*  r = b^e mod m: constant time when its preconditions hold.  */
static void
s_powm (mpz_t r, const mpz_t b, const mpz_t e, const mpz_t m)
{
    if (mpz_odd_p (m) && mpz_sgn (e) > 0)
        mpz_powm_sec (r, b, e, m);
    else
        mpz_powm (r, b, e, m);
}

/*  Writes r left-padded to k bytes.  */
static CK_RV
s_write (const mpz_t r, size_t k, unsigned char *out, size_t *out_len)
{
    size_t len = (mpz_sizeinbase (r, 2) + 7) / 8;
    if (*out_len < k)
        return CKR_BUFFER_TOO_SMALL;
    if (mpz_sgn (r) == 0)
        len = 0;
    if (len > k)
        return CKR_DEVICE_ERROR;
    memset (out, 0, k - len);
    if (len)
        mpz_export (out + k - len, NULL, 1, 1, 1, 0, r);
    *out_len = k;
    return CKR_OK;
}

static CK_RV
s_plain (mpz_t *t, unsigned char *out, size_t *out_len)
{
    if (mpz_sgn (t [S_M]) == 0)
        return CKR_MECHANISM_PARAM_INVALID;
    if (mpz_sizeinbase (t [S_M], 2) > GMP_MODEXP_MAX_BITS)
        return CKR_DATA_LEN_RANGE;
    mpz_mod (t [S_BASE], t [S_BASE], t [S_M]);
    s_powm (t [S_T], t [S_BASE], t [S_E], t [S_M]);
    return s_write (t [S_T], (mpz_sizeinbase (t [S_M], 2) + 7) / 8, out, out_len);
}

/*  m^(dx^-1 mod prime-1) = c (mod prime)?  Uses S_U and S_H.  */
static bool
s_half_ok (mpz_t *t, const mpz_t m, const mpz_t dx, const mpz_t prime)
{
    mpz_sub_ui (t [S_U], prime, 1);
    if (!mpz_invert (t [S_U], dx, t [S_U]))
        return false;
    mpz_mod (t [S_H], m, prime);
    s_powm (t [S_H], t [S_H], t [S_U], prime);
    mpz_mod (t [S_U], t [S_BASE], prime);
    return mpz_cmp (t [S_H], t [S_U]) == 0;
}

static CK_RV
s_crt (mpz_t *t, const cs_modexp_t *op, const char *what, bool fault, unsigned char *out, size_t *out_len)
{
    if (mpz_cmp_ui (t [S_P], 1) <= 0 || mpz_cmp_ui (t [S_Q], 1) <= 0
    ||  !mpz_odd_p (t [S_P]) || !mpz_odd_p (t [S_Q]))
        return CKR_MECHANISM_PARAM_INVALID;
    mpz_mul (t [S_N], t [S_P], t [S_Q]);
    if (mpz_sizeinbase (t [S_N], 2) > GMP_MODEXP_MAX_BITS)
        return CKR_DATA_LEN_RANGE;
    /*  RFC 8017 §5.1.2 2.b.  */
    mpz_mod (t [S_BASE], t [S_BASE], t [S_N]);
    mpz_mod (t [S_T], t [S_BASE], t [S_P]);
    s_powm (t [S_M1], t [S_T], t [S_DP], t [S_P]);
    if (fault)
        mpz_combit (t [S_M1], 0);
    mpz_mod (t [S_T], t [S_BASE], t [S_Q]);
    s_powm (t [S_M2], t [S_T], t [S_DQ], t [S_Q]);
    mpz_sub (t [S_H], t [S_M1], t [S_M2]);
    mpz_mul (t [S_H], t [S_H], t [S_QINV]);
    mpz_mod (t [S_H], t [S_H], t [S_P]);
    mpz_mul (t [S_H], t [S_H], t [S_Q]);
    mpz_add (t [S_T], t [S_M2], t [S_H]);
    bool ok;
    if (op->public_exponent_len) {
        s_import (t [S_E], op->public_exponent, op->public_exponent_len);
        mpz_powm (t [S_U], t [S_T], t [S_E], t [S_N]);          /* e is public */
        ok = mpz_cmp (t [S_U], t [S_BASE]) == 0;
    }
    else
        ok = s_half_ok (t, t [S_T], t [S_DP], t [S_P]) && s_half_ok (t, t [S_T], t [S_DQ], t [S_Q]);
    if (!ok) {
        zsys_error ("%s: a raw RSA CRT result failed its check: not released", what);
        return op->public_exponent_len ? CKR_DEVICE_ERROR : CKR_MECHANISM_PARAM_INVALID;
    }
    return s_write (t [S_T], (mpz_sizeinbase (t [S_N], 2) + 7) / 8, out, out_len);
}

static CK_RV
s_run (const cs_modexp_t *op, const char *what, bool fault, unsigned char *out, size_t *out_len)
{
    mpz_t t [S_COUNT];
    for (size_t i = 0; i < S_COUNT; i++)
        mpz_init (t [i]);
    s_import (t [S_BASE], op->base, op->base_len);
    CK_RV rv = CKR_MECHANISM_PARAM_INVALID;
    if (op->modulus) {
        s_import (t [S_E], op->exponent, op->exponent_len);
        s_import (t [S_M], op->modulus, op->modulus_len);
        rv = s_plain (t, out, out_len);
    }
    else
    if (op->p) {
        s_import (t [S_P], op->p, op->p_len);
        s_import (t [S_Q], op->q, op->q_len);
        s_import (t [S_DP], op->dp, op->dp_len);
        s_import (t [S_DQ], op->dq, op->dq_len);
        s_import (t [S_QINV], op->qinv, op->qinv_len);
        rv = s_crt (t, op, what, fault, out, out_len);
    }
    for (size_t i = 0; i < S_COUNT; i++)
        s_wipe_clear (t [i]);
    return rv;
}

CK_RV
gmp_modexp (const cs_modexp_t *op, const char *what, unsigned char *out, size_t *out_len)
{
    return s_run (op, what, false, out, out_len);
}

CK_RV
gmp_modexp_fault (const cs_modexp_t *op, unsigned char *out, size_t *out_len)
{
    return s_run (op, "gmp_modexp_fault", true, out, out_len);
}
