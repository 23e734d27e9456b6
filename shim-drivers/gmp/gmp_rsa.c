/*  gmp_rsa.c — RSA private-key operations in GMP: CRT, mpn_sec_powm
 *  (mpz_powm_sec's core), blinding, the result checked before release
 *  (gmp_rsa.h).
 */
#include <stdatomic.h>
#include <string.h>
#include <time.h>
#include <gmp.h>
#include <czmq.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/rand.h>
#include "gmp_rsa.h"

/*  A blinding pair serves this many operations, squared after each
 *  (A' = A^2, Ai' = Ai^2: still a valid pair), then a fresh r is drawn:
 *  OpenSSL's BN_BLINDING_COUNTER.  */
#define S_BLINDING_USES 32
#define S_BLINDING_TRIES 8

/*  Workspace slots of a key.  */
enum { S_M, S_C, S_M1, S_M2, S_H, S_S, S_CHECK, S_TEMPS };

struct gmp_rsa_key_s {
    size_t bits, bytes;
    mpz_t n, e, p, q, dp, dq, qinv;
    mpz_t blind, unblind;           /* A = r^e mod n, Ai = r^-1 mod n */
    unsigned blind_uses;            /* operations since A was drawn; 0 = draw one */
    mpz_t t [S_TEMPS];              /* workspace, 2 * bits + 2 limbs each: never reallocated */
    mp_limb_t *scratch;             /* mpn_sec_powm's scratch for either half, wiped after use */
    size_t scratch_limbs;
};

static atomic_ulong s_blindings;

/*  Overwrites every allocated limb of z (not only the used ones: a value
 *  that shrank leaves old limbs behind) and sets it to 0.  GMP's mpz_clear
 *  frees without wiping.  _mp_alloc is the one field of the documented
 *  struct that has no accessor.  */
static void
s_wipe (mpz_t z)
{
    mp_size_t alloc = z->_mp_alloc;
    if (alloc > 0) {
        mp_limb_t *limbs = mpz_limbs_modify (z, alloc);
        explicit_bzero (limbs, (size_t) alloc * sizeof *limbs);
        mpz_limbs_finish (z, 0);
    }
}

/*  Overwrites the stack below the caller, where GMP's temporary space
 *  (TMP_ALLOC: alloca under 32 KB) held intermediate values of mpz_mod and
 *  mpz_mul on the secret primes.  */
static void __attribute__ ((noinline))
s_scrub_stack (void)
{
    unsigned char area [32768];
    explicit_bzero (area, sizeof area);
    __asm__ __volatile__ ("" : : "r" (area) : "memory");
}

/*  Copies an OpenSSL number parameter of pkey into z; wipes the copies.  */
static int
s_param (const EVP_PKEY *pkey, const char *name, mpz_t z)
{
    BIGNUM *bn = NULL;
    if (!EVP_PKEY_get_bn_param (pkey, name, &bn))
        return -1;
    size_t len = (size_t) BN_num_bytes (bn);
    unsigned char *bytes = len ? OPENSSL_secure_malloc (len) : NULL;
    int rc = -1;
    if (len == 0) {
        mpz_set_ui (z, 0);
        rc = 0;
    }
    else
    if (bytes && BN_bn2bin (bn, bytes) == (int) len) {
        mpz_import (z, len, 1, 1, 1, 0, bytes);
        rc = 0;
    }
    if (bytes)
        OPENSSL_secure_clear_free (bytes, len);
    BN_clear_free (bn);
    return rc;
}

/*  The consistency checks of gmp_rsa_key_new, with t as scratch.  */
static bool
s_consistent (gmp_rsa_key_t *self)
{
    mpz_t *t = self->t;
    bool ok = mpz_odd_p (self->n) && mpz_odd_p (self->p) && mpz_odd_p (self->q)
           && mpz_odd_p (self->e) && mpz_cmp_ui (self->e, 1) > 0
           && mpz_cmp_ui (self->p, 1) > 0 && mpz_cmp_ui (self->q, 1) > 0
           && mpz_sgn (self->dp) > 0 && mpz_sgn (self->dq) > 0 && mpz_sgn (self->qinv) > 0;
    if (ok) {
        mpz_mul (t [S_M], self->p, self->q);
        ok = mpz_cmp (t [S_M], self->n) == 0;
    }
    if (ok) {                               /* e * dP = 1 mod (p - 1) */
        mpz_sub_ui (t [S_H], self->p, 1);
        mpz_mul (t [S_M], self->e, self->dp);
        mpz_mod (t [S_M], t [S_M], t [S_H]);
        ok = mpz_cmp_ui (t [S_M], 1) == 0;
    }
    if (ok) {                               /* e * dQ = 1 mod (q - 1) */
        mpz_sub_ui (t [S_H], self->q, 1);
        mpz_mul (t [S_M], self->e, self->dq);
        mpz_mod (t [S_M], t [S_M], t [S_H]);
        ok = mpz_cmp_ui (t [S_M], 1) == 0;
    }
    if (ok) {                               /* q * qInv = 1 mod p */
        mpz_mul (t [S_M], self->q, self->qinv);
        mpz_mod (t [S_M], t [S_M], self->p);
        ok = mpz_cmp_ui (t [S_M], 1) == 0;
    }
    s_wipe (t [S_M]);
    s_wipe (t [S_H]);
    return ok;
}

/*  A key with every number allocated for `bits`, all zero.  */
static gmp_rsa_key_t *
s_key_alloc (size_t bits)
{
    gmp_rsa_key_t *self = calloc (1, sizeof *self);
    if (!self)
        return NULL;
    self->bits = bits;
    self->bytes = (bits + 7) / 8;
    mp_bitcnt_t room = (mp_bitcnt_t) (2 * bits + 2 * GMP_NUMB_BITS);
    mpz_init2 (self->n, room / 2);
    mpz_init2 (self->e, room / 2);
    mpz_init2 (self->p, room / 2);
    mpz_init2 (self->q, room / 2);
    mpz_init2 (self->dp, room / 2);
    mpz_init2 (self->dq, room / 2);
    mpz_init2 (self->qinv, room / 2);
    mpz_init2 (self->blind, room);
    mpz_init2 (self->unblind, room);
    for (int i = 0; i < S_TEMPS; i++)
        mpz_init2 (self->t [i], room);
    return self;
}

/*  Checks the numbers just set and the modulus size; destroys the key and
 *  returns NULL when they are wrong.  */
static gmp_rsa_key_t *
s_key_checked (gmp_rsa_key_t *self)
{
    size_t bits = mpz_sizeinbase (self->n, 2);
    if (bits != self->bits || !s_consistent (self)) {
        gmp_rsa_key_destroy (&self);
        return NULL;
    }
    mp_size_t np = (mp_size_t) mpz_size (self->p), nq = (mp_size_t) mpz_size (self->q);
    mp_size_t itch_p = mpn_sec_powm_itch (np, mpz_sizeinbase (self->dp, 2), np);
    mp_size_t itch_q = mpn_sec_powm_itch (nq, mpz_sizeinbase (self->dq, 2), nq);
    self->scratch_limbs = (size_t) (itch_p > itch_q ? itch_p : itch_q);
    if (!(self->scratch = calloc (self->scratch_limbs, sizeof (mp_limb_t))))
        gmp_rsa_key_destroy (&self);
    return self;
}

gmp_rsa_key_t *
gmp_rsa_key_new (const EVP_PKEY *pkey)
{
    BIGNUM *third = NULL;
    if (!pkey || !EVP_PKEY_is_a (pkey, "RSA"))
        return NULL;
    int bits = EVP_PKEY_get_bits (pkey);
    if (bits < GMP_RSA_MIN_BITS || bits > GMP_RSA_MAX_BITS)
        return NULL;
    if (EVP_PKEY_get_bn_param (pkey, OSSL_PKEY_PARAM_RSA_FACTOR3, &third)) {
        BN_clear_free (third);              /* multi-prime (RFC 8017 §3.2): not here */
        return NULL;
    }
    ERR_clear_error ();
    gmp_rsa_key_t *self = s_key_alloc ((size_t) bits);
    if (!self)
        return NULL;
    if (s_param (pkey, OSSL_PKEY_PARAM_RSA_N, self->n)
    ||  s_param (pkey, OSSL_PKEY_PARAM_RSA_E, self->e)
    ||  s_param (pkey, OSSL_PKEY_PARAM_RSA_FACTOR1, self->p)
    ||  s_param (pkey, OSSL_PKEY_PARAM_RSA_FACTOR2, self->q)
    ||  s_param (pkey, OSSL_PKEY_PARAM_RSA_EXPONENT1, self->dp)
    ||  s_param (pkey, OSSL_PKEY_PARAM_RSA_EXPONENT2, self->dq)
    ||  s_param (pkey, OSSL_PKEY_PARAM_RSA_COEFFICIENT1, self->qinv))
        gmp_rsa_key_destroy (&self);
    ERR_clear_error ();
    return self ? s_key_checked (self) : NULL;
}

void
gmp_rsa_key_destroy (gmp_rsa_key_t **self_p)
{
    gmp_rsa_key_t *self = self_p ? *self_p : NULL;
    if (!self)
        return;
    mpz_ptr all [] = { self->n, self->e, self->p, self->q, self->dp, self->dq, self->qinv,
                       self->blind, self->unblind };
    for (size_t i = 0; i < sizeof all / sizeof all [0]; i++) {
        s_wipe (all [i]);
        mpz_clear (all [i]);
    }
    for (int i = 0; i < S_TEMPS; i++) {
        s_wipe (self->t [i]);
        mpz_clear (self->t [i]);
    }
    if (self->scratch) {
        explicit_bzero (self->scratch, self->scratch_limbs * sizeof (mp_limb_t));
        free (self->scratch);
    }
    explicit_bzero (self, sizeof *self);
    free (self);
    *self_p = NULL;
}

size_t
gmp_rsa_key_bits (const gmp_rsa_key_t *self)
{
    return self->bits;
}

size_t
gmp_rsa_key_bytes (const gmp_rsa_key_t *self)
{
    return self->bytes;
}

unsigned long
gmp_rsa_blindings_drawn (void)
{
    return atomic_load (&s_blindings);
}

/*  Draws r uniformly enough in [1, n-1] (k + 8 random bytes reduced mod n:
 *  bias below 2^-64) with an inverse mod n, and sets A = r^e, Ai = r^-1.
 *  Returns 0, or -1 when the random generator fails or no r was invertible
 *  in S_BLINDING_TRIES draws (n would then have a small factor).  */
static int
s_blinding_draw (gmp_rsa_key_t *self)
{
    size_t len = self->bytes + 8;
    unsigned char bytes [GMP_RSA_MAX_BITS / 8 + 8];
    mpz_ptr r = self->t [S_H];
    int rc = -1;
    for (int i = 0; i < S_BLINDING_TRIES && rc != 0; i++) {
        if (RAND_priv_bytes (bytes, (int) len) != 1)
            break;
        mpz_import (r, len, 1, 1, 1, 0, bytes);
        mpz_mod (r, r, self->n);
        if (mpz_sgn (r) != 0 && mpz_invert (self->unblind, r, self->n) != 0) {
            mpz_powm (self->blind, r, self->e, self->n);
            rc = 0;
        }
    }
    explicit_bzero (bytes, sizeof bytes);
    s_wipe (r);
    ERR_clear_error ();
    if (rc == 0) {
        self->blind_uses = 0;
        atomic_fetch_add (&s_blindings, 1);
    }
    return rc;
}

/*  The blinding pair for the next operation: squared from the last one, or
 *  drawn afresh every S_BLINDING_USES operations.  */
static int
s_blinding_next (gmp_rsa_key_t *self)
{
    if (self->blind_uses == 0 || self->blind_uses >= S_BLINDING_USES) {
        if (s_blinding_draw (self) != 0)
            return -1;
    }
    else {
        mpz_mul (self->blind, self->blind, self->blind);
        mpz_mod (self->blind, self->blind, self->n);
        mpz_mul (self->unblind, self->unblind, self->unblind);
        mpz_mod (self->unblind, self->unblind, self->n);
    }
    self->blind_uses++;
    return 0;
}

/*  r = b^e mod m, constant-time in e: mpz_powm_sec's own core
 *  (mpn_sec_powm) with the key's scratch, so that no intermediate value is
 *  left in memory we do not wipe (mpz_powm_sec takes its scratch from the
 *  stack, or from the heap past 32 KB, and frees it unwiped).  b < m, r is
 *  not b.  A zero base (an input of 0) is answered directly.  */
static void
s_powm_sec (gmp_rsa_key_t *self, mpz_ptr r, mpz_srcptr b, mpz_srcptr e, mpz_srcptr m)
{
    mp_size_t n = (mp_size_t) mpz_size (m), bn = (mp_size_t) mpz_size (b);
    if (bn == 0) {
        mpz_set_ui (r, 0);
        return;
    }
    mp_limb_t *rp = mpz_limbs_write (r, n);
    mpn_sec_powm (rp, mpz_limbs_read (b), bn, mpz_limbs_read (e), mpz_sizeinbase (e, 2),
                  mpz_limbs_read (m), n, self->scratch);
    mpz_limbs_finish (r, n);
}

/*  s = c^d mod n by CRT (RFC 8017 §5.1.2, 2.b): m1 = c^dP mod p,
 *  m2 = c^dQ mod q, h = qInv (m1 - m2) mod p, s = m2 + q h.  Both
 *  exponentiations are constant-time in the exponent (mpn_sec_powm, the
 *  core of mpz_powm_sec).  */
static void
s_crt (gmp_rsa_key_t *self, mpz_srcptr c, mpz_ptr s, gmp_rsa_fault_t fault)
{
    mpz_ptr m1 = self->t [S_M1], m2 = self->t [S_M2], h = self->t [S_H];
    mpz_mod (h, c, self->p);
    s_powm_sec (self, m1, h, self->dp, self->p);
    mpz_mod (h, c, self->q);
    s_powm_sec (self, m2, h, self->dq, self->q);
    if (fault == GMP_RSA_FAULT_P)
        mpz_combit (m1, 7);
    if (fault == GMP_RSA_FAULT_Q)
        mpz_combit (m2, 7);
    mpz_sub (h, m1, m2);
    mpz_mul (h, h, self->qinv);
    mpz_mod (h, h, self->p);
    mpz_mul (s, h, self->q);
    mpz_add (s, s, m2);
}

/*  Writes z as exactly k big-endian bytes (z < 256^k).  */
static void
s_export (mpz_srcptr z, unsigned char *out, size_t k)
{
    size_t len = mpz_sgn (z) ? (mpz_sizeinbase (z, 2) + 7) / 8 : 0;
    memset (out, 0, k - len);
    if (len)
        mpz_export (out + k - len, NULL, 1, 1, 1, 0, z);
}

/*  Wipes the workspace after an operation: values, the exponentiation's
 *  scratch, and the stack GMP's other functions used (mpz_mod, mpz_mul).  */
static void
s_clean (gmp_rsa_key_t *self)
{
    for (int i = 0; i < S_TEMPS; i++)
        s_wipe (self->t [i]);
    explicit_bzero (self->scratch, self->scratch_limbs * sizeof (mp_limb_t));
    s_scrub_stack ();
}

CK_RV
gmp_rsa_private_fault (gmp_rsa_key_t *self, const unsigned char *in, unsigned char *out,
                       gmp_rsa_fault_t fault)
{
    mpz_ptr m = self->t [S_M], c = self->t [S_C], s = self->t [S_S], check = self->t [S_CHECK];
    CK_RV rv = CKR_OK;
    mpz_import (m, self->bytes, 1, 1, 1, 0, in);
    if (mpz_cmp (m, self->n) >= 0)
        rv = CKR_DATA_INVALID;
    else
    if (s_blinding_next (self) != 0) {
        zsys_error ("gmp: RSA-%zu: no blinding value could be drawn", self->bits);
        rv = CKR_DEVICE_ERROR;
    }
    if (rv == CKR_OK) {
        mpz_mul (c, m, self->blind);        /* c = m * r^e mod n */
        mpz_mod (c, c, self->n);
        s_crt (self, c, s, fault);          /* s = c^d = m^d * r mod n */
        mpz_mul (s, s, self->unblind);      /* s = m^d mod n */
        mpz_mod (s, s, self->n);
        mpz_powm (check, s, self->e, self->n);
        if (mpz_cmp (check, m) != 0) {
            /*  A fault in either half: s - m^d is a multiple of only one of
             *  p, q, and gcd (s^e - m, n) would factor n.  Never released.  */
            zsys_error ("gmp: RSA-%zu: the result failed its check (s^e mod n != m): "
                        "a computation fault; result withheld", self->bits);
            self->blind_uses = 0;           /* draw a fresh pair next time */
            rv = CKR_DEVICE_ERROR;
        }
    }
    if (rv == CKR_OK)
        s_export (s, out, self->bytes);
    else
        memset (out, 0, self->bytes);
    s_clean (self);
    return rv;
}

CK_RV
gmp_rsa_private (gmp_rsa_key_t *self, const unsigned char *in, unsigned char *out)
{
    return gmp_rsa_private_fault (self, in, out, GMP_RSA_FAULT_NONE);
}

/* ---- self-test --------------------------------------------------------- */

/*  The primes of a public RSA-2048 test key: used only by the self-test.  */
static const char s_test_p [] =
    "fdc9722717664de4ecbd47b36e81edd47acc807f7bac4482801b836f93f9d19b"
    "fbe5c106b66c11770144831c23a5c1e241395bffdad86c5a03fdc86758931414"
    "375ad2d1f691153810d2f62680c555809ecebb68879e192243036226e8d77af8"
    "70d152b523f143aac34da096481c99ff6f253b606ae8b7527990c09463cac37d";
static const char s_test_q [] =
    "b8a4f1ceec7b918386244565b0d0defeaaf75aad3340919116a5183852285310"
    "3ce39e2d32565db957e28dc87d57ee9c139a45341da2ca4bc83f42a48ba765d2"
    "f2b195876cb4ab2764cf801bbf8c8311c9751a16edb046a0653cb5c8285e9244"
    "f39ebf24b4b80aed623af1f6743f69741031bc72505afd9a5c0d0a09232b126b";

/*  The test key from its primes and e = 65537; *d gets d = e^-1 mod
 *  lcm (p-1, q-1) (the caller clears it).  */
static gmp_rsa_key_t *
s_test_key (mpz_t d)
{
    gmp_rsa_key_t *self = s_key_alloc (2048);
    if (!self)
        return NULL;
    mpz_t p1, q1, lambda;
    mpz_inits (p1, q1, lambda, NULL);
    mpz_set_str (self->p, s_test_p, 16);
    mpz_set_str (self->q, s_test_q, 16);
    mpz_set_ui (self->e, 65537);
    mpz_mul (self->n, self->p, self->q);
    mpz_sub_ui (p1, self->p, 1);
    mpz_sub_ui (q1, self->q, 1);
    mpz_lcm (lambda, p1, q1);
    mpz_invert (d, self->e, lambda);
    mpz_invert (self->dp, self->e, p1);
    mpz_invert (self->dq, self->e, q1);
    mpz_invert (self->qinv, self->q, self->p);
    mpz_clears (p1, q1, lambda, NULL);
    return s_key_checked (self);
}

static double
s_now_us (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec * 1e6 + (double) ts.tv_nsec / 1e3;
}

static int
s_double_cmp (const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;
    return x < y ? -1 : x > y;
}

int
gmp_rsa_self_test (double *us_p)
{
    enum { RUNS = 5 };
    unsigned char in [256], out [256];
    double times [RUNS];
    mpz_t d, m, want, got;
    mpz_inits (d, m, want, got, NULL);
    gmp_rsa_key_t *key = s_test_key (d);
    int rc = key ? 0 : -1;
    for (int i = 0; i < RUNS && rc == 0; i++) {
        for (size_t j = 0; j < sizeof in; j++)
            in [j] = (unsigned char) (j * 31 + (size_t) i * 7 + 1);
        in [0] = 0x01;                      /* below n (top byte 0xb7) */
        double start = s_now_us ();
        CK_RV rv = gmp_rsa_private (key, in, out);
        times [i] = s_now_us () - start;
        mpz_import (m, sizeof in, 1, 1, 1, 0, in);
        mpz_powm (want, m, d, key->n);      /* the plain way: no CRT, no blinding */
        mpz_import (got, sizeof out, 1, 1, 1, 0, out);
        if (rv != CKR_OK || mpz_cmp (want, got) != 0)
            rc = -1;
    }
    if (rc != 0)
        zsys_error ("gmp: self-test failed: the RSA-2048 test key gave a wrong result (GMP %s)",
                    gmp_version);
    else {
        qsort (times, RUNS, sizeof times [0], s_double_cmp);
        *us_p = times [RUNS / 2];
    }
    gmp_rsa_key_destroy (&key);
    mpz_clears (d, m, want, got, NULL);
    return rc;
}
