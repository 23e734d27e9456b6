/*  sk_share.c — a party's share of a key (cs_sharedkeys.h): the record
 *  sealed at rest (sharedkeys.proto Share), the partial result m^(d_i) mod N,
 *  and the combiner that verifies with (N, e) before it releases anything.
 *  Signing with additive shares: Boneh and Franklin, "Efficient generation
 *  of shared RSA keys", introduction and "private key, small e".
 */
#include <stdlib.h>
#include <string.h>
#include <openssl/crypto.h>
#include "sk_int.h"

cs_sk_share_t *
sk_share_new (unsigned party, const mpz_t n, unsigned long e, const mpz_t d)
{
    cs_sk_share_t *self = calloc (1, sizeof *self);
    if (!self)
        return NULL;
    self->party = party;
    self->e = e;
    mpz_init_set (self->n, n);
    mpz_init_set (self->d, d);
    return self;
}

void
cs_sk_share_destroy (cs_sk_share_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    cs_sk_share_t *self = *self_p;
    sk_wipe_clear (self->d);
    mpz_clear (self->n);
    OPENSSL_cleanse (self, sizeof *self);
    free (self);
    *self_p = NULL;
}

unsigned
cs_sk_share_party (const cs_sk_share_t *self)
{
    return self ? self->party : 0;
}

/*  z into exactly k big-endian bytes (z < 2^(8k)).  */
static void
s_export (unsigned char *out, size_t k, const mpz_t z)
{
    size_t len = (mpz_sizeinbase (z, 2) + 7) / 8;
    memset (out, 0, k);
    if (mpz_sgn (z))
        mpz_export (out + k - len, NULL, 1, 1, 1, 0, z);
}

static size_t
s_bytes (const mpz_t n)
{
    return (mpz_sizeinbase (n, 2) + 7) / 8;
}

int
cs_sk_share_public (const cs_sk_share_t *self, unsigned char *n, size_t n_cap,
                    size_t *n_len, unsigned long *e)
{
    if (!self || !n || !n_len || !e || n_cap < s_bytes (self->n))
        return CS_SK_EINVAL;
    *n_len = s_bytes (self->n);
    s_export (n, *n_len, self->n);
    *e = self->e;
    return 0;
}

int
cs_sk_share_encode (const cs_sk_share_t *self, unsigned char **data, size_t *len)
{
    if (!self || !data || !len)
        return CS_SK_EINVAL;
    Cs__Sk__Share rec = CS__SK__SHARE__INIT;
    mpz_t abs;
    mpz_init (abs);
    mpz_abs (abs, self->d);
    rec.version = CS_SK_SHARE_VERSION;
    rec.party = self->party;
    rec.parties = CS_SK_PARTIES;
    rec.e = (uint32_t) self->e;
    rec.d_negative = mpz_sgn (self->d) < 0;
    int rc = sk_put (&rec.n, self->n);
    if (rc == 0)
        rc = sk_put (&rec.d, abs);
    sk_wipe_clear (abs);
    if (rc == 0) {
        *len = cs__sk__share__get_packed_size (&rec);
        *data = malloc (*len ? *len : 1);
        if (*data)
            cs__sk__share__pack (&rec, *data);
        else
            rc = CS_SK_ENOMEM;
    }
    free (rec.n.data);
    if (rec.d.data)
        OPENSSL_cleanse (rec.d.data, rec.d.len);
    free (rec.d.data);
    return rc;
}

cs_sk_share_t *
cs_sk_share_decode (const unsigned char *data, size_t len, int *err)
{
    int dummy;
    err = err ? err : &dummy;
    *err = CS_SK_EMALFORMED;
    if (!data)
        return NULL;
    Cs__Sk__Share *rec = cs__sk__share__unpack (NULL, len, data);
    if (!rec)
        return NULL;
    cs_sk_share_t *self = NULL;
    mpz_t n, d;
    mpz_inits (n, d, NULL);
    bool ok = rec->version == CS_SK_SHARE_VERSION && rec->parties == CS_SK_PARTIES
        && rec->party >= 1 && rec->party <= CS_SK_PARTIES
        && rec->e >= 3 && rec->e % 2 == 1 && rec->n.len > 0 && rec->n.data [0] != 0
        && (rec->d.len == 0 || rec->d.data [0] != 0);
    if (ok) {
        mpz_import (n, rec->n.len, 1, 1, 1, 0, rec->n.data);
        if (rec->d.len)
            mpz_import (d, rec->d.len, 1, 1, 1, 0, rec->d.data);
        if (rec->d_negative)
            mpz_neg (d, d);
        /* party 1 holds the large positive share, 2 and 3 negative ones */
        ok = mpz_odd_p (n) && mpz_sizeinbase (n, 2) >= 512
            && mpz_cmpabs (d, n) < 0
            && (rec->party == 1 ? mpz_sgn (d) > 0 : mpz_sgn (d) <= 0);
    }
    if (ok && (self = sk_share_new (rec->party, n, rec->e, d)) != NULL)
        *err = 0;
    else if (ok)
        *err = CS_SK_ENOMEM;
    sk_wipe_clear (d);
    mpz_clear (n);
    if (rec->d.data)
        OPENSSL_cleanse (rec->d.data, rec->d.len);
    cs__sk__share__free_unpacked (rec, NULL);
    return self;
}

int
cs_sk_partial (const cs_sk_share_t *self, const unsigned char *m, size_t m_len,
               unsigned char *out, size_t out_len)
{
    size_t k = self ? s_bytes (self->n) : 0;
    if (!self || !m || !out || m_len != k || out_len != k)
        return CS_SK_EINVAL;
    mpz_t x, r;
    mpz_inits (x, r, NULL);
    mpz_import (x, m_len, 1, 1, 1, 0, m);
    int rc = mpz_cmp (x, self->n) < 0 && mpz_sgn (x) > 0 ? 0 : CS_SK_EINVAL;
    if (rc == 0)
        rc = sk_powm_signed (r, x, self->d, self->n);
    if (rc == 0)
        s_export (out, k, r);
    sk_wipe_clear (x);
    sk_wipe_clear (r);
    return rc;
}

int
cs_sk_partial_operands (const cs_sk_share_t *self, const unsigned char *m, size_t m_len,
                        unsigned char *base, unsigned char *exp, size_t *exp_len)
{
    size_t k = self ? s_bytes (self->n) : 0;
    if (!self || !m || !base || !exp || !exp_len || m_len != k)
        return CS_SK_EINVAL;
    mpz_t x, a;
    mpz_inits (x, a, NULL);
    mpz_import (x, m_len, 1, 1, 1, 0, m);
    int rc = mpz_cmp (x, self->n) < 0 && mpz_sgn (x) > 0 ? 0 : CS_SK_EINVAL;
    if (rc == 0 && mpz_sgn (self->d) < 0 && !mpz_invert (x, x, self->n))
        rc = CS_SK_EINVAL;
    if (rc == 0) {
        s_export (base, k, x);
        mpz_abs (a, self->d);
        *exp_len = mpz_sgn (a) ? (mpz_sizeinbase (a, 2) + 7) / 8 : 0;
        if (*exp_len)
            s_export (exp, *exp_len, a);
    }
    sk_wipe_clear (x);
    sk_wipe_clear (a);
    return rc;
}

int
cs_sk_combine (const unsigned char *n, size_t k, unsigned long e,
               const unsigned char *m, const unsigned char *const partial [CS_SK_PARTIES],
               unsigned char *sig)
{
    if (!n || !k || !m || !partial || !sig || e < 3)
        return CS_SK_EINVAL;
    for (unsigned i = 0; i < CS_SK_PARTIES; i++)
        if (!partial [i])
            return CS_SK_EINVAL;
    mpz_t N, x, s, t;
    mpz_inits (N, x, s, t, NULL);
    mpz_import (N, k, 1, 1, 1, 0, n);
    mpz_import (x, k, 1, 1, 1, 0, m);
    int rc = mpz_odd_p (N) && mpz_cmp (x, N) < 0 ? 0 : CS_SK_EINVAL;
    mpz_set_ui (s, 1);
    for (unsigned i = 0; i < CS_SK_PARTIES && rc == 0; i++) {
        mpz_import (t, k, 1, 1, 1, 0, partial [i]);
        if (mpz_cmp (t, N) >= 0)
            rc = CS_SK_EINVAL;
        mpz_mul (s, s, t);
        mpz_mod (s, s, N);
    }
    if (rc == 0) {
        mpz_powm_ui (t, s, e, N);
        rc = mpz_cmp (t, x) == 0 ? 0 : CS_SK_EVERIFY;
    }
    if (rc == 0)
        s_export (sig, k, s);
    else
        memset (sig, 0, k);
    mpz_clears (N, x, s, t, NULL);
    return rc;
}
