/*  gmp_rsa.h — the RSA private-key operation of the gmp board, in GMP:
 *  CRT with the key's p, q, dP, dQ, qInv, each half a constant-time
 *  exponentiation (mpn_sec_powm, the core of mpz_powm_sec, run on the key's
 *  own scratch so that it can be wiped), the base blinded (m' = m * r^e
 *  mod n, s = s' * r^-1 mod n) and the result checked (s^e mod n == m)
 *  before it is released, so that a fault in one CRT half can never give
 *  away a factor of n (Boneh, DeMillo, Lipton 1997).  The reductions mod
 *  p and q and the recombination use GMP's ordinary functions: they only
 *  ever see blinded values.  The key lives as mpz_t with its blinding pair,
 *  a workspace and the exponentiation's scratch allocated once, so a cached
 *  key costs no allocation per operation (seed 003: caching); every limb is
 *  wiped before it is freed (mpz_clear does not wipe), the workspace and
 *  scratch after every operation.  GMP's public API has no way to keep
 *  Montgomery constants: mpn_sec_powm derives them per call (a few us of
 *  the ~250 us of an RSA-2048 half).
 *
 *  A key object is not thread-safe: the driver keeps one per worker session.
 *  Padding is not here: the driver pads and unpads with OpenSSL.
 */
#ifndef GMP_RSA_H_INCLUDED
#define GMP_RSA_H_INCLUDED

#include <stddef.h>
#include <openssl/evp.h>
#include <p11-kit/pkcs11.h>

#define GMP_RSA_MIN_BITS 1024       /* the range the gmp board offers (mechanism info) */
#define GMP_RSA_MAX_BITS 8192

typedef struct gmp_rsa_key_s gmp_rsa_key_t;

/*  Makes a GMP key from an OpenSSL RSA private key with two primes and all
 *  its CRT values (PKCS#1 RSAPrivateKey, RFC 8017 §A.1.2), modulus of
 *  GMP_RSA_MIN_BITS..GMP_RSA_MAX_BITS bits.  The values are checked once
 *  (n = p*q, e*dP = 1 mod p-1, e*dQ = 1 mod q-1, q*qInv = 1 mod p, e odd and
 *  > 1), so a wrong key is refused here and not mistaken for a fault later.
 *  Returns a new key (caller destroys), or NULL for anything else (not RSA,
 *  multi-prime, out of range, inconsistent, out of memory).  pkey is only
 *  read; the temporary copies of its numbers are wiped.  */
gmp_rsa_key_t *gmp_rsa_key_new (const EVP_PKEY *pkey);

/*  Wipes every limb of the key, its blinding pair and its workspace, then
 *  frees it; NULL-safe; nulls *self_p.  */
void gmp_rsa_key_destroy (gmp_rsa_key_t **self_p);

/*  Modulus length in bits, and in bytes (k of RFC 8017).  */
size_t gmp_rsa_key_bits (const gmp_rsa_key_t *self);
size_t gmp_rsa_key_bytes (const gmp_rsa_key_t *self);

/*  The RSA private-key primitive RSADP/RSASP1 (RFC 8017 §5.1.2, §5.2.1):
 *  `in` is exactly k bytes, big-endian, unsigned (OS2IP: an octet string
 *  cannot be negative), the caller left-pads shorter input with zeros;
 *  `out` receives exactly k bytes, big-endian, left-padded with zeros
 *  (I2OSP).  Returns CKR_OK; CKR_DATA_INVALID when the input, as an integer,
 *  is not below the modulus (it is refused, never reduced: PKCS#11 2.40
 *  curr. mech. §2.1.7 wants the integer below the modulus); CKR_DEVICE_ERROR
 *  when the result failed its check (logged; `out` is then zero-filled, the
 *  faulty value never leaves) or no blinding value could be drawn.  */
CK_RV gmp_rsa_private (gmp_rsa_key_t *self, const unsigned char *in, unsigned char *out);

/*  Faults a test can inject into one operation.  */
typedef enum {
    GMP_RSA_FAULT_NONE = 0,
    GMP_RSA_FAULT_P,                /* flip a bit of the mod-p half after its exponentiation */
    GMP_RSA_FAULT_Q                 /* the same in the mod-q half */
} gmp_rsa_fault_t;

/*  For tests only (tests/unit/test_driver_gmp.c): gmp_rsa_private with a
 *  corrupted CRT half, to show that the check catches it and that nothing
 *  is released.  The driver never calls it.  */
CK_RV gmp_rsa_private_fault (gmp_rsa_key_t *self, const unsigned char *in, unsigned char *out,
                             gmp_rsa_fault_t fault);

/*  Keys whose blinding pair was drawn afresh, and operations, since the
 *  start of the process (all threads; for tests and logs).  */
unsigned long gmp_rsa_blindings_drawn (void);

/*  Power-on self-test and speed: a built-in RSA-2048 test key (public test
 *  primes, used for nothing else) signs a few fixed values; each result
 *  must equal m^d mod n computed the plain way (no CRT, no blinding).
 *  Stores in *us_p the median time of one private operation in
 *  microseconds.  Returns 0, or -1 (logged) when a result is wrong.  */
int gmp_rsa_self_test (double *us_p);

#endif
