/*  driver_gmp.c — a board made of the broker's own cores with GMP doing the
 *  modular exponentiation (gmp_rsa.c: CRT, mpn_sec_powm, blinding, every
 *  result checked before release) and OpenSSL doing only the padding:
 *  PKCS#1 v1.5 type 1 and PSS to sign, PKCS#1 v1.5 type 2 and OAEP checks
 *  to decrypt (OpenSSL's constant-time decoders), raw RSA both ways.  RSA
 *  key material only (keystore and per-request keys, docs/DESIGN.md §1): it
 *  exports only RSA mechanisms and CS_KT_RSA, so routing never sends it an
 *  EC job, and no key generation (generation routes to other boards).
 *
 *  Normalisation (the paper's shims, §4.2.4): input is big-endian bytes,
 *  shorter raw input is left-padded to the modulus length; an input whose
 *  integer is not below the modulus is refused, never reduced
 *  (CKR_DATA_INVALID to sign, CKR_ENCRYPTED_DATA_INVALID to decrypt: the
 *  CK_RV of the openssl board, so a job's answer does not depend on the
 *  board that ran it); a negative input cannot be written (PKCS#11 octet
 *  strings are unsigned); output is left-padded to the modulus length.
 *
 *  Config keys (under drivers/<name>): type = gmp, threads (the broker's),
 *  cache-size (keys kept per worker session, default 256, 0 = none).  Each
 *  worker session keeps a bounded LRU cache of keys in GMP form (n, e, p, q,
 *  dP, dQ, qInv as mpz_t, the blinding pair, the workspace) by key ref,
 *  checked against the SHA-256 of the DER; per-request keys (ref NULL) are
 *  made, used and wiped in the call.  At open the board runs a self-test
 *  and logs its measured RSA-2048 speed.
 */
#include <string.h>
#include <gmp.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/rsa.h>
#include <openssl/sha.h>
#include "drv_key_cache.h"
#include "cs_mech.h"
#include "cs_keyfacts.h"
#include "drv_pad.h"
#include "gmp_modexp.h"
#include "gmp_rsa.h"
#include "drv_modexp.h"

/*  The dispatch table's functions, declared with the ABI's types (cs_driver.h):
 *  a definition that does not match its type does not compile.  */
static cs_drv_board_open_fn s_board_open;
static cs_drv_board_close_fn s_board_close;
static cs_drv_board_mechanisms_fn s_board_mechanisms;
static cs_drv_board_keys_fn s_board_keys;
static cs_drv_session_open_fn s_session_open;
static cs_drv_session_close_fn s_session_close;
static cs_drv_capabilities_fn s_capabilities;
static cs_drv_sign_key_fn s_sign;
static cs_drv_decrypt_key_fn s_decrypt;
static cs_drv_session_cached_fn s_session_cached;
static cs_drv_modexp_fn s_modexp;

#define S_BLOCK_MAX (GMP_RSA_MAX_BITS / 8)

struct cs_board_s {
    char *name;
    size_t cache_size;              /* entries per session */
};

struct cs_drv_session_s {
    drv_session_head_t head;        /* board, parsed keys by ref (drv_key_cache.h) */
};

/*  Destroys a cached GMP key (its limbs are wiped).  */
static void
s_cached_free (void **key_p)
{
    gmp_rsa_key_destroy ((gmp_rsa_key_t **) key_p);
}

static void s_board_close (cs_board_t **board_p);

static int
s_board_open (const char *name, zconfig_t *config, const char *base_dir, cs_board_t **board_p)
{
    (void) base_dir;
    cs_board_t *self = calloc (1, sizeof *self);
    double us = 0;
    if (!self || !(self->name = strdup (name))) {
        s_board_close (&self);
        return -1;
    }
    if (drv_key_cache_size (config, "gmp", name, 0, &self->cache_size) != 0) {
        s_board_close (&self);
        return -1;
    }
    if (gmp_rsa_self_test (&us) != 0) {
        zsys_error ("gmp %s: self-test failed: board not opened", name);
        s_board_close (&self);
        return -1;
    }
    zsys_info ("gmp %s: GMP %s, RSA %d..%d bits (CRT, constant-time mpn_sec_powm, blinding, checked results), "
               "no key generation, key cache of %zu per worker; self-test ok: RSA-2048 %.0f us "
               "per private operation (%.0f/s per thread)", name, gmp_version, GMP_RSA_MIN_BITS,
               GMP_RSA_MAX_BITS, self->cache_size, us, us > 0 ? 1e6 / us : 0.0);
    *board_p = self;
    return 0;
}

static void
s_board_close (cs_board_t **board_p)
{
    cs_board_t *self = board_p ? *board_p : NULL;
    if (!self)
        return;
    free (self->name);
    free (self);
    *board_p = NULL;
}

static int
s_board_mechanisms (cs_board_t *self, cs_mech_info_t **mechs_p, size_t *count_p)
{
    static const cs_mech_info_t mechs [] = {
        { CKM_RSA_PKCS, GMP_RSA_MIN_BITS, GMP_RSA_MAX_BITS, CKF_SIGN | CKF_DECRYPT },
        { CKM_RSA_PKCS_PSS, GMP_RSA_MIN_BITS, GMP_RSA_MAX_BITS, CKF_SIGN },
        { CKM_RSA_X_509, GMP_RSA_MIN_BITS, GMP_RSA_MAX_BITS, CKF_SIGN | CKF_DECRYPT },
        { CKM_RSA_PKCS_OAEP, GMP_RSA_MIN_BITS, GMP_RSA_MAX_BITS, CKF_DECRYPT },
    };
    (void) self;
    *mechs_p = malloc (sizeof mechs);
    if (!*mechs_p)
        return -1;
    memcpy (*mechs_p, mechs, sizeof mechs);
    *count_p = sizeof mechs / sizeof mechs [0];
    if (drv_modexp_mechs_add (mechs_p, count_p, GMP_MODEXP_MAX_BITS)) {
        free (*mechs_p);
        return -1;
    }
    return 0;
}

/*  No resident keys: an empty list.  */
static int
s_board_keys (cs_board_t *self, cs_key_info_t **keys_p, size_t *count_p)
{
    (void) self;
    *keys_p = calloc (1, sizeof (cs_key_info_t));
    *count_p = 0;
    return *keys_p ? 0 : -1;
}

/*  RSA key material only; no generation of any kind.  */
static int
s_capabilities (cs_board_t *self, cs_caps_t *caps)
{
    (void) self;
    caps->flags = CS_CAP_KEY_MATERIAL | CS_CAP_MODEXP;
    caps->material_types = CS_KT_RSA;
    caps->generate_types = 0;
    return 0;
}

static cs_drv_session_t *
s_session_open (cs_board_t *board)
{
    cs_drv_session_t *self = drv_session_new (sizeof *self, board, board->cache_size, s_cached_free);
    return self;
}

/*  Wipes and frees every cached key.  */
static void
s_session_close (cs_drv_session_t **session_p)
{
    drv_session_destroy (session_p);
}

/*  A GMP key made from PKCS#8 DER.  *rv_p: CKR_KEY_HANDLE_INVALID when the
 *  DER does not parse or the RSA key is unusable (multi-prime,
 *  inconsistent), CKR_KEY_TYPE_INCONSISTENT when it is not RSA,
 *  CKR_KEY_SIZE_RANGE outside the board's sizes.  */
static void *
s_key_parse (const cs_drv_key_t *key, CK_RV *rv_p)
{
    EVP_PKEY *pkey = cs_pkey_from_pkcs8 (key->pkcs8, key->pkcs8_len);
    gmp_rsa_key_t *parsed = NULL;
    int bits = pkey ? EVP_PKEY_get_bits (pkey) : 0;
    if (!pkey)
        *rv_p = CKR_KEY_HANDLE_INVALID;
    else
    if (cs_pkey_key_type (pkey) != CKK_RSA)
        *rv_p = CKR_KEY_TYPE_INCONSISTENT;
    else
    if (bits < GMP_RSA_MIN_BITS || bits > GMP_RSA_MAX_BITS)
        *rv_p = CKR_KEY_SIZE_RANGE;
    else
        *rv_p = (parsed = gmp_rsa_key_new (pkey)) ? CKR_OK : CKR_KEY_HANDLE_INVALID;
    EVP_PKEY_free (pkey);                   /* clears the private numbers */
    ERR_clear_error ();
    return parsed;
}

/*  Returns the GMP key of `key`: cached by ref when the session caches
 *  (then *owned_p is false), else a fresh one the caller destroys (*owned_p
 *  true).  NULL with *rv_p set as s_key_parse does.  */
static gmp_rsa_key_t *
s_key (cs_drv_session_t *self, const cs_drv_key_t *key, bool *owned_p, CK_RV *rv_p)
{
    *owned_p = true;
    if (!key->pkcs8 || key->pkcs8_len == 0) {
        *rv_p = CKR_KEY_HANDLE_INVALID;     /* no resident keys here */
        return NULL;
    }
    return drv_key_cache_fetch (self->head.cache, key, s_key_parse, owned_p, rv_p);
}

/*  Checks a signature's mechanism before the buffer: an EC mechanism with
 *  this RSA key is CKR_KEY_TYPE_INCONSISTENT, as on the openssl board.  */
static CK_RV
s_sign_mech (const cs_drv_mech_t *mech)
{
    switch (mech->type) {
        case CKM_RSA_PKCS:
        case CKM_RSA_PKCS_PSS:
        case CKM_RSA_X_509:
            return CKR_OK;
        case CKM_ECDSA:
        case CKM_EDDSA:
            return CKR_KEY_TYPE_INCONSISTENT;
        default:
            return CKR_MECHANISM_INVALID;
    }
}

/*  CS_DRV_SIGN_KEY (cs_driver.h): CKM_RSA_PKCS over a DigestInfo,
 *  CKM_RSA_PKCS_PSS over a digest, CKM_RSA_X_509 raw.  */
static CK_RV
s_sign (cs_drv_session_t *self, const cs_drv_key_t *key, const cs_drv_mech_t *mech,
        const unsigned char *in, size_t in_len, unsigned char *out, size_t *out_len)
{
    unsigned char em [S_BLOCK_MAX];
    bool owned = false;
    CK_RV rv;
    gmp_rsa_key_t *rsa = s_key (self, key, &owned, &rv);
    if (!rsa)
        return rv;
    size_t k = gmp_rsa_key_bytes (rsa);
    rv = s_sign_mech (mech);
    if (rv == CKR_OK && *out_len < k)
        rv = CKR_BUFFER_TOO_SMALL;
    if (rv == CKR_OK)
        rv = drv_rsa_sign_block (mech, in, in_len, gmp_rsa_key_bits (rsa), em, k);
    if (rv == CKR_OK)
        rv = gmp_rsa_private (rsa, em, out);
    if (rv == CKR_OK)
        *out_len = k;
    OPENSSL_cleanse (em, sizeof em);
    ERR_clear_error ();
    if (owned)
        gmp_rsa_key_destroy (&rsa);
    return rv;
}

/*  Checks a decryption's mechanism and parameters before any arithmetic.  */
static CK_RV
s_decrypt_mech (const cs_drv_mech_t *mech)
{
    switch (mech->type) {
        case CKM_RSA_PKCS:
        case CKM_RSA_X_509:
            return CKR_OK;
        case CKM_RSA_PKCS_OAEP:
            return cs_mech_md (mech->hash) && cs_mech_mgf_md (mech->mgf)
                   ? CKR_OK : CKR_MECHANISM_PARAM_INVALID;
        case CKM_ECDSA:
        case CKM_EDDSA:
        case CKM_RSA_PKCS_PSS:
            return CKR_KEY_FUNCTION_NOT_PERMITTED;
        default:
            return CKR_MECHANISM_INVALID;
    }
}

/*  CS_DRV_DECRYPT_KEY (cs_driver.h): CKM_RSA_PKCS, CKM_RSA_PKCS_OAEP (any
 *  SHA-1/SHA-2 hash and MGF1, optional label), CKM_RSA_X_509 (k bytes out).
 *  The ciphertext must be exactly k bytes (CKR_ENCRYPTED_DATA_LEN_RANGE).  */
static CK_RV
s_decrypt (cs_drv_session_t *self, const cs_drv_key_t *key, const cs_drv_mech_t *mech,
           const unsigned char *in, size_t in_len, unsigned char *out, size_t *out_len)
{
    unsigned char em [S_BLOCK_MAX];
    bool owned = false;
    CK_RV rv;
    gmp_rsa_key_t *rsa = s_key (self, key, &owned, &rv);
    if (!rsa)
        return rv;
    size_t k = gmp_rsa_key_bytes (rsa);
    rv = s_decrypt_mech (mech);
    if (rv == CKR_OK && in_len != k)
        rv = CKR_ENCRYPTED_DATA_LEN_RANGE;
    if (rv == CKR_OK) {
        rv = gmp_rsa_private (rsa, in, em);
        if (rv == CKR_DATA_INVALID)
            rv = CKR_ENCRYPTED_DATA_INVALID;        /* not below the modulus */
    }
    if (rv == CKR_OK)
        rv = drv_rsa_unpad (mech, em, k, out, out_len);
    OPENSSL_cleanse (em, sizeof em);
    if (owned)
        gmp_rsa_key_destroy (&rsa);
    return rv;
}

static size_t
s_session_cached (cs_drv_session_t *self)
{
    return drv_key_cache_count (self->head.cache);
}

/*  CS_DRV_MODEXP (cs_driver.h): raw modexp in GMP (gmp_modexp.h).  */
static CK_RV
s_modexp (cs_drv_session_t *self, const cs_modexp_t *op, unsigned char *out, size_t *out_len)
{
    return gmp_modexp (op, self->head.board->name, out, out_len);
}

static const cs_driver_dispatch_t s_dispatch [] = {
    { CS_DRV_BOARD_OPEN, (cs_driver_fn_t) s_board_open },
    { CS_DRV_BOARD_CLOSE, (cs_driver_fn_t) s_board_close },
    { CS_DRV_BOARD_MECHANISMS, (cs_driver_fn_t) s_board_mechanisms },
    { CS_DRV_BOARD_KEYS, (cs_driver_fn_t) s_board_keys },
    { CS_DRV_SESSION_OPEN, (cs_driver_fn_t) s_session_open },
    { CS_DRV_SESSION_CLOSE, (cs_driver_fn_t) s_session_close },
    { CS_DRV_CAPABILITIES, (cs_driver_fn_t) s_capabilities },
    { CS_DRV_SIGN_KEY, (cs_driver_fn_t) s_sign },
    { CS_DRV_DECRYPT_KEY, (cs_driver_fn_t) s_decrypt },
    { CS_DRV_SESSION_CACHED, (cs_driver_fn_t) s_session_cached },
    { CS_DRV_MODEXP, (cs_driver_fn_t) s_modexp },
    { 0, NULL }
};

CS_DRIVER_EXPORT ("gmp",
                  "GMP on the broker's cores: RSA with keystore and per-request keys "
                  "(CRT, constant-time exponentiation, blinding, checked results)",
                  s_dispatch)
