/*  sk_num.c — the numbers of a shared-key session (sk_int.h): the public
 *  parameters every party derives alike, wiping, uniform random numbers from
 *  the party's source, and the values derived from the parties' seeds.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include "sk_int.h"

/*  GMP's mpz_clear does not wipe: overwrite every allocated limb first.  */
void
sk_wipe (mpz_t z)
{
    mp_size_t alloc = z->_mp_alloc;
    if (alloc > 0) {
        mp_limb_t *limbs = mpz_limbs_modify (z, alloc);
        OPENSSL_cleanse (limbs, (size_t) alloc * sizeof *limbs);
        mpz_limbs_finish (z, 0);
    }
}

void
sk_wipe_clear (mpz_t z)
{
    sk_wipe (z);
    mpz_clear (z);
}

/*  r uniform in [0, bound): 64 more random bits than bound has, reduced
 *  (statistical distance below 2^-64).  */
int
sk_random_below (cs_sk_party_t *self, mpz_t r, const mpz_t bound)
{
    size_t len = (mpz_sizeinbase (bound, 2) + 7) / 8 + 8;
    unsigned char *buf = malloc (len);
    if (!buf)
        return CS_SK_ENOMEM;
    int rc = self->rand (self->rand_ctx, buf, len) == 0 ? 0 : CS_SK_ERAND;
    if (rc == 0) {
        mpz_import (r, len, 1, 1, 1, 0, buf);
        mpz_mod (r, r, bound);
    }
    OPENSSL_cleanse (buf, len);
    free (buf);
    return rc;
}

/*  r uniform in Z_M^* (rejection: about e^gamma ln B draws on average).  */
int
sk_random_unit (cs_sk_party_t *self, mpz_t r)
{
    mpz_t g;
    mpz_init (g);
    int rc;
    do {
        rc = sk_random_below (self, r, self->pub.M);
        if (rc == 0)
            mpz_gcd (g, r, self->pub.M);
    } while (rc == 0 && mpz_cmp_ui (g, 1) != 0 && mpz_cmp_ui (self->pub.M, 1) != 0);
    mpz_clear (g);
    return rc;
}

/*  The field prime of a modulus size, found once per size for the process.  */
static void
s_field_prime (mpz_t P, unsigned bits)
{
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    static struct { unsigned bits; mpz_t P; } cache [16];
    static unsigned cached;
    pthread_mutex_lock (&lock);
    for (unsigned i = 0; i < cached; i++)
        if (cache [i].bits == bits) {
            mpz_set (P, cache [i].P);
            pthread_mutex_unlock (&lock);
            return;
        }
    mpz_ui_pow_ui (P, 2, bits + 2);
    mpz_nextprime (P, P);
    if (cached < 16) {
        cache [cached].bits = bits;
        mpz_init_set (cache [cached++].P, P);
    }
    pthread_mutex_unlock (&lock);
}

/*  Odd primes up to limit (sieve of Eratosthenes); caller frees.  */
static unsigned *
s_primes (unsigned limit, size_t *count)
{
    unsigned char *composite = calloc (limit + 1, 1);
    unsigned *primes = malloc ((limit / 2 + 2) * sizeof *primes);
    *count = 0;
    if (!composite || !primes) {
        free (composite);
        free (primes);
        return NULL;
    }
    for (unsigned i = 3; i <= limit; i += 2) {
        if (composite [i])
            continue;
        primes [(*count)++] = i;
        for (unsigned long j = (unsigned long) i * i; j <= limit; j += 2 * i)
            composite [j] = 1;
    }
    free (composite);
    return primes;
}

/*  P, M and the ranges (docs/SHARED-KEYS.md, "Public parameters"): M is as
 *  large as leaves 48 random bits per share above it (MWB: a larger sieve,
 *  fewer candidates, with diminishing returns); P exceeds N and every
 *  masked sieving product.  */
int
sk_public_init (sk_public_t *pub, const cs_sk_params_t *prm)
{
    unsigned half = prm->bits / 2;
    mpz_inits (pub->P, pub->M, pub->mask_a, pub->mask_b, pub->lo, pub->width, NULL);
    s_field_prime (pub->P, prm->bits);
    size_t count;
    unsigned limit = prm->td_bound > 1000 ? prm->td_bound : 1000;
    unsigned *primes = s_primes (limit, &count);
    if (!primes)
        return CS_SK_ENOMEM;
    mpz_set_ui (pub->M, 1);
    pub->sieve_bound = 2;
    size_t i = 0;
    for (; prm->sieve && i < count; i++) {
        mpz_mul_ui (pub->mask_a, pub->M, primes [i]);
        if (mpz_sizeinbase (pub->mask_a, 2) > half - 48)
            break;
        mpz_set (pub->M, pub->mask_a);
        pub->sieve_bound = primes [i];
    }
    size_t first = i;
    while (first < count && primes [first] <= pub->sieve_bound)
        first++;
    size_t n = 0;
    for (size_t k = first; k < count && primes [k] <= prm->td_bound; k++)
        primes [n++] = primes [k];
    pub->td_primes = primes;
    pub->td_count = n;
    mpz_mul (pub->mask_a, pub->M, pub->M);
    mpz_mul_2exp (pub->mask_a, pub->mask_a, SK_MASK_BITS);
    mpz_mul_ui (pub->mask_b, pub->mask_a, 3);
    mpz_setbit (pub->lo, half - 2);
    mpz_fdiv_q_ui (pub->width, pub->lo, 3);
    return 0;
}

void
sk_public_clear (sk_public_t *pub)
{
    mpz_clears (pub->P, pub->M, pub->mask_a, pub->mask_b, pub->lo, pub->width, NULL);
    free (pub->td_primes);
    pub->td_primes = NULL;
}

int
sk_put (ProtobufCBinaryData *b, const mpz_t z)
{
    size_t len = mpz_sgn (z) ? (mpz_sizeinbase (z, 2) + 7) / 8 : 0;
    b->len = 0;
    b->data = malloc (len ? len : 1);
    if (!b->data)
        return CS_SK_ENOMEM;
    if (len)
        mpz_export (b->data, NULL, 1, 1, 1, 0, z);
    b->len = len;
    return 0;
}

int
sk_get (mpz_t z, const ProtobufCBinaryData *b, const mpz_t bound)
{
    if (b->len > 0 && b->data [0] == 0)
        return -1;                      /* leading zero: not canonical */
    if (b->len > (mpz_sizeinbase (bound, 2) + 7) / 8)
        return -1;
    if (b->len)
        mpz_import (z, b->len, 1, 1, 1, 0, b->data);
    else
        mpz_set_ui (z, 0);
    return mpz_cmp (z, bound) < 0 ? 0 : -1;
}

/*  A number in [0, N) from SHA-256 over a label, the session, the three
 *  seeds and counters, 64 bits longer than N before reduction.  */
static int
s_derive (const cs_sk_party_t *self, mpz_t z, const mpz_t N, const char *label,
          unsigned a, unsigned b, unsigned c)
{
    unsigned char buf [4096 / 8 + 8 + 32];
    size_t len = (mpz_sizeinbase (N, 2) + 7) / 8 + 8;
    if (len + 32 > sizeof buf)
        return CS_SK_EINVAL;
    for (size_t off = 0; off < len; off += 32) {
        unsigned char in [64 + CS_SK_SESSION_LEN + 3 * SK_SEED_LEN + 16];
        unsigned ctr [4] = { a, b, c, (unsigned) (off / 32) };
        size_t llen = strlen (label) + 1;
        if (llen > 64)
            return CS_SK_EINVAL;
        memcpy (in, label, llen);
        memcpy (in + llen, self->session, CS_SK_SESSION_LEN);
        memcpy (in + llen + CS_SK_SESSION_LEN, self->seed [1], 3 * SK_SEED_LEN);
        memcpy (in + llen + CS_SK_SESSION_LEN + 3 * SK_SEED_LEN, ctr, sizeof ctr);
        if (!EVP_Digest (in, llen + CS_SK_SESSION_LEN + 3 * SK_SEED_LEN + sizeof ctr,
                         buf + off, NULL, EVP_sha256 (), NULL))
            return CS_SK_ENOMEM;
    }
    mpz_import (z, len, 1, 1, 1, 0, buf);
    mpz_mod (z, z, N);
    return 0;
}

/*  BF "biprimality test": g random with Jacobi symbol (g/N) = 1; public,
 *  derived from seeds the three parties revealed with N (so no party
 *  chooses it).  Returns 0 or CS_SK_ENOMEM / CS_SK_EINVAL.  */
int
sk_test_base (const cs_sk_party_t *self, mpz_t g, const mpz_t N, unsigned cand, unsigned test)
{
    for (unsigned ctr = 0;; ctr++) {
        int rc = s_derive (self, g, N, "cs-sk test base", cand, test, ctr);
        if (rc)
            return rc;
        if (mpz_cmp_ui (g, 1) > 0 && mpz_jacobi (g, N) == 1)
            return 0;
    }
}

int
sk_trial_message (const cs_sk_party_t *self, mpz_t m, const mpz_t N)
{
    for (unsigned ctr = 0;; ctr++) {
        int rc = s_derive (self, m, N, "cs-sk trial signature", self->batch, 0, ctr);
        if (rc)
            return rc;
        if (mpz_cmp_ui (m, 1) > 0)
            return 0;
    }
}

int
sk_powm_signed (mpz_t r, const mpz_t m, const mpz_t d, const mpz_t N)
{
    if (mpz_sgn (d) == 0) {
        mpz_set_ui (r, 1);
        return 0;
    }
    if (!mpz_odd_p (N))
        return CS_SK_EINVAL;
    if (mpz_sgn (d) > 0) {
        mpz_powm_sec (r, m, d, N);
        return 0;
    }
    mpz_t t;
    mpz_init (t);
    mpz_neg (t, d);
    mpz_powm_sec (r, m, t, N);
    sk_wipe_clear (t);
    return mpz_invert (r, r, N) ? 0 : CS_SK_EINVAL;
}
