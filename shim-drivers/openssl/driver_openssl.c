/*  driver_openssl.c — a board made of the broker's own cores: OpenSSL EVP
 *  with key material that comes with each job (keystore keys and per-request
 *  keys, docs/DESIGN.md §1): signatures, decryption and ECDH (CS_DRV_DERIVE_KEY:
 *  the raw Z, the module applies the KDF), and key generation as PKCS#8 (the keystore and the
 *  pre-generated pool use it), and secret-key operations (CS_DRV_SYMMETRIC,
 *  drv_sym.h: AES, HMAC with the key's value in the job).  It holds no
 *  resident keys.
 *
 *  Config keys (under drivers/<name>): type = openssl, threads (the broker's),
 *  cache-size (parsed keys kept per worker session, default 256, 0 = none),
 *  key-material (default true; false = the board takes no keystore or
 *  per-request key and only generates keys: their jobs route to other
 *  boards, e.g. a gmp board), delay-ms (default 0: each sign, decrypt and
 *  derive takes at least this many ms, the thread sleeping after the
 *  computation until then (CLOCK_MONOTONIC): a stand-in for a slow
 *  accelerator in scheduling tests, issue #9) and delay-jitter-pct (default
 *  0: the delay is uniform in delay-ms x (1 +- pct/100), so that workers do
 *  not run in lockstep as a real card's do not).
 *  Each worker session keeps a bounded LRU cache of parsed EVP_PKEYs by key
 *  ref, so a keystore key is parsed once per worker, not once per job; an
 *  entry also holds the SHA-256 of the DER it was parsed from and is used
 *  only when the job's DER matches.  Per-request keys (ref NULL) are parsed,
 *  used and freed in the call.  EVP_PKEY_free wipes private components
 *  (BN_clear_free), so an evicted key leaves no copy behind.
 */
#include <errno.h>
#include <string.h>
#include <time.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/sha.h>
#include "cs_util.h"
#include "drv_key_cache.h"
#include "drv_modexp.h"
#include "drv_sym.h"
#include "cs_keyfacts.h"
#include "drv_evp.h"
#include "drv_keys.h"

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
static cs_drv_generate_material_fn s_generate;
static cs_drv_session_cached_fn s_session_cached;
static cs_drv_derive_key_fn s_derive;
static cs_drv_modexp_fn s_modexp;
static cs_drv_symmetric_fn s_symmetric;

#define S_DELAY_MAX_MS 60000

struct cs_board_s {
    char *name;
    size_t cache_size;              /* entries per session */
    bool material;                  /* key-material: sign/decrypt/derive with key material */
    bool legacy_des;                /* legacy-des: single DES listed and run (default true; needs
                                       OpenSSL's legacy provider, docs/CONTRACTS.md "Legacy DES") */
    long delay_ms;                  /* delay-ms: least time of one operation */
    long jitter_pct;                /* delay-jitter-pct */
};

struct cs_drv_session_s {
    drv_session_head_t head;        /* board, parsed keys by ref (drv_key_cache.h) */
    uint64_t random;                /* xorshift64 state of the delay's jitter */
};

/*  Frees a cached EVP_PKEY (OpenSSL wipes its private components).  */
static void
s_cached_free (void **pkey_p)
{
    EVP_PKEY_free (*pkey_p);
    *pkey_p = NULL;
}

static void s_board_close (cs_board_t **board_p);

static int
s_board_open (const char *name, zconfig_t *config, const char *base_dir, cs_board_t **board_p)
{
    (void) base_dir;
    cs_board_t *self = calloc (1, sizeof *self);
    const char *material = zconfig_get (config, "key-material", "true");
    char *end = NULL;
    if (!self || !(self->name = strdup (name))) {
        s_board_close (&self);
        return -1;
    }
    if (drv_key_cache_size (config, "openssl", name, 0, &self->cache_size) != 0) {
        s_board_close (&self);
        return -1;
    }
    self->material = streq (material, "true") || streq (material, "yes") || streq (material, "1");
    if (!self->material && !streq (material, "false") && !streq (material, "no") && !streq (material, "0")) {
        zsys_error ("openssl %s: key-material: must be true or false", name);
        s_board_close (&self);
        return -1;
    }
    const char *des = zconfig_get (config, "legacy-des", "true");
    self->legacy_des = streq (des, "true") || streq (des, "yes") || streq (des, "1");
    if (!self->legacy_des && !streq (des, "false") && !streq (des, "no") && !streq (des, "0")) {
        zsys_error ("openssl %s: legacy-des: must be true or false", name);
        s_board_close (&self);
        return -1;
    }
    if (self->legacy_des && self->material && !drv_sym_legacy_des ()) {
        zsys_warning ("openssl %s: OpenSSL's legacy provider is missing: single DES is not offered", name);
        self->legacy_des = false;
    }
    const char *delay = zconfig_get (config, "delay-ms", "0");
    self->delay_ms = strtol (delay, &end, 10);
    if (end == delay || *end || self->delay_ms < 0 || self->delay_ms > S_DELAY_MAX_MS) {
        zsys_error ("openssl %s: delay-ms: must be 0..%d", name, S_DELAY_MAX_MS);
        s_board_close (&self);
        return -1;
    }
    const char *jitter = zconfig_get (config, "delay-jitter-pct", "0");
    self->jitter_pct = strtol (jitter, &end, 10);
    if (end == jitter || *end || self->jitter_pct < 0 || self->jitter_pct > 100) {
        zsys_error ("openssl %s: delay-jitter-pct: must be 0..100", name);
        s_board_close (&self);
        return -1;
    }
    zsys_info ("openssl %s: %s, key cache of %zu per worker%s", name, OpenSSL_version (OPENSSL_VERSION),
               self->cache_size, self->material ? "" : ", no key material (key generation only)");
    if (self->delay_ms)
        zsys_info ("openssl %s: every operation takes at least %ld ms (delay-ms), jitter %ld%%", name,
                   self->delay_ms, self->jitter_pct);
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
        { CKM_RSA_PKCS, 1024, 8192, CKF_SIGN | CKF_DECRYPT },
        { CKM_RSA_PKCS_PSS, 1024, 8192, CKF_SIGN },
        { CKM_RSA_X_509, 1024, 8192, CKF_SIGN | CKF_DECRYPT },
        { CKM_RSA_PKCS_OAEP, 1024, 8192, CKF_DECRYPT },
        { CKM_ECDSA, 256, 521, CKF_SIGN },
        { CKM_EDDSA, 255, 448, CKF_SIGN },
        { CKM_ECDH1_DERIVE, 255, 521, CKF_DERIVE },
        { CKM_RSA_PKCS_KEY_PAIR_GEN, 1024, 8192, CKF_GENERATE_KEY_PAIR },
        { CKM_EC_KEY_PAIR_GEN, 256, 521, CKF_GENERATE_KEY_PAIR },
        { CKM_EC_EDWARDS_KEY_PAIR_GEN, 255, 448, CKF_GENERATE_KEY_PAIR },
        { CKM_EC_MONTGOMERY_KEY_PAIR_GEN, 255, 448, CKF_GENERATE_KEY_PAIR },
    };
    *mechs_p = malloc (sizeof mechs);
    if (!*mechs_p)
        return -1;
    memcpy (*mechs_p, mechs, sizeof mechs);
    *count_p = sizeof mechs / sizeof mechs [0];
    if (self->material && (drv_modexp_mechs_add (mechs_p, count_p, DRV_MODEXP_MAX_BITS)
                           || drv_sym_mechs_add (mechs_p, count_p, self->legacy_des))) {
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

/*  key-material = false leaves only generation: no sign, decrypt or derive
 *  job is routed here.  */
static int
s_capabilities (cs_board_t *self, cs_caps_t *caps)
{
    caps->flags = self->material ? CS_CAP_KEY_MATERIAL | CS_CAP_GENERATE_MATERIAL | CS_CAP_DERIVE
                                   | CS_CAP_MODEXP
                                 : CS_CAP_GENERATE_MATERIAL;
    caps->material_types = self->material ? CS_KT_RSA | CS_KT_EC | CS_KT_EC_EDWARDS | CS_KT_EC_MONTGOMERY : 0;
    caps->generate_types = CS_KT_RSA | CS_KT_EC | CS_KT_EC_EDWARDS | CS_KT_EC_MONTGOMERY;
    return 0;
}

static cs_drv_session_t *
s_session_open (cs_board_t *board)
{
    cs_drv_session_t *self = drv_session_new (sizeof *self, board, board->cache_size, s_cached_free);
    if (self)
    self->random = (uint64_t) (uintptr_t) self ^ (uint64_t) time (NULL) ^ UINT64_C (0x9e3779b97f4a7c15);
    return self;
}

static void
s_session_close (cs_drv_session_t **session_p)
{
    drv_session_destroy (session_p);
}

/*  The EVP_PKEY of key's PKCS#8 DER (drv_key_parse_fn); NULL with
 *  CKR_KEY_HANDLE_INVALID when it does not parse.  */
static void *
s_pkey_parse (const cs_drv_key_t *key, CK_RV *rv_p)
{
    EVP_PKEY *pkey = cs_pkey_from_pkcs8 (key->pkcs8, key->pkcs8_len);
    *rv_p = pkey ? CKR_OK : CKR_KEY_HANDLE_INVALID;
    return pkey;
}

/*  Returns the parsed key of `key` (cached by ref when the session caches;
 *  then *owned_p is false) or a fresh EVP_PKEY the caller frees (*owned_p
 *  true).  NULL when the DER does not parse.  */
static EVP_PKEY *
s_pkey (cs_drv_session_t *self, const cs_drv_key_t *key, bool *owned_p)
{
    CK_RV rv;
    return drv_key_cache_fetch (self->head.cache, key, s_pkey_parse, owned_p, &rv);
}

/*  The CLOCK_MONOTONIC time in ns.  */
static int64_t
s_now_ns (void)
{
    struct timespec now;
    clock_gettime (CLOCK_MONOTONIC, &now);
    return (int64_t) now.tv_sec * 1000000000LL + now.tv_nsec;
}

/*  delay-ms: sleeps until started_ns + the board's delay.  */
static void
s_delay (cs_drv_session_t *self, int64_t started_ns)
{
    const cs_board_t *board = self->head.board;
    if (board->delay_ms == 0)
        return;
    double factor = 1;
    if (board->jitter_pct) {
        self->random ^= self->random << 13;
        self->random ^= self->random >> 7;
        self->random ^= self->random << 17;
        double uniform = (double) (self->random >> 11) / (double) (UINT64_C (1) << 53);     /* [0, 1) */
        factor += (2 * uniform - 1) * (double) board->jitter_pct / 100;
    }
    int64_t done = started_ns + (int64_t) ((double) board->delay_ms * 1e6 * factor);
    struct timespec until = { (time_t) (done / 1000000000LL), (long) (done % 1000000000LL) };
    while (clock_nanosleep (CLOCK_MONOTONIC, TIMER_ABSTIME, &until, NULL) == EINTR)
        ;
}

/*  Runs a sign (sign = true) or decrypt with the key's material.  */
static CK_RV
s_run (cs_drv_session_t *self, const cs_drv_key_t *key, const cs_drv_mech_t *mech, bool sign,
       const unsigned char *in, size_t in_len, unsigned char *out, size_t *out_len)
{
    if (!key->pkcs8 || key->pkcs8_len == 0)
        return CKR_KEY_HANDLE_INVALID;          /* no resident keys here */
    int64_t started = s_now_ns ();
    bool owned = false;
    EVP_PKEY *pkey = s_pkey (self, key, &owned);
    if (!pkey)
        return CKR_KEY_HANDLE_INVALID;
    CK_RV rv = sign ? drv_evp_sign (pkey, mech, in, in_len, out, out_len)
                    : drv_evp_decrypt (pkey, mech, in, in_len, out, out_len);
    if (owned)
        EVP_PKEY_free (pkey);
    s_delay (self, started);
    return rv;
}

static CK_RV
s_sign (cs_drv_session_t *self, const cs_drv_key_t *key, const cs_drv_mech_t *mech,
        const unsigned char *in, size_t in_len, unsigned char *out, size_t *out_len)
{
    return s_run (self, key, mech, true, in, in_len, out, out_len);
}

static CK_RV
s_decrypt (cs_drv_session_t *self, const cs_drv_key_t *key, const cs_drv_mech_t *mech,
           const unsigned char *in, size_t in_len, unsigned char *out, size_t *out_len)
{
    return s_run (self, key, mech, false, in, in_len, out, out_len);
}

/*  CS_DRV_DERIVE_KEY: ECDH with the key's material (cs_driver.h).  */
static CK_RV
s_derive (cs_drv_session_t *self, const cs_drv_key_t *key, const unsigned char *point, size_t point_len,
          unsigned char *out, size_t *out_len)
{
    if (!key->pkcs8 || key->pkcs8_len == 0)
        return CKR_KEY_HANDLE_INVALID;
    int64_t started = s_now_ns ();
    bool owned = false;
    EVP_PKEY *pkey = s_pkey (self, key, &owned);
    if (!pkey)
        return CKR_KEY_HANDLE_INVALID;
    CK_RV rv = drv_evp_derive (pkey, point, point_len, out, out_len);
    if (owned)
        EVP_PKEY_free (pkey);
    s_delay (self, started);
    return rv;
}

static CK_RV
s_generate (cs_drv_session_t *self, const cs_keygen_t *gen, unsigned char **pkcs8_p, size_t *len_p)
{
    (void) self;
    return drv_evp_generate (gen, pkcs8_p, len_p);
}

static size_t
s_session_cached (cs_drv_session_t *self)
{
    return drv_key_cache_count (self->head.cache);
}

/*  CS_DRV_MODEXP (cs_driver.h): raw modexp with BIGNUM, on a board that
 *  takes key material (raw RSA with the operands as the key).  */
static CK_RV
s_modexp (cs_drv_session_t *session, const cs_modexp_t *op, unsigned char *out, size_t *out_len)
{
    if (!session->head.board->material)
        return CKR_FUNCTION_NOT_SUPPORTED;
    return drv_modexp_bn (op, session->head.board->name, out, out_len);
}

/*  CS_DRV_SYMMETRIC (cs_driver.h): secret-key operations with the key's
 *  value (drv_sym.h), on a board that takes key material.  */
static CK_RV
s_symmetric (cs_drv_session_t *session, const cs_sym_t *op, unsigned char *out, size_t *out_len)
{
    if (!session->head.board->material)
        return CKR_FUNCTION_NOT_SUPPORTED;
    if (!session->head.board->legacy_des
    &&  (op->mechanism == CKM_DES_ECB || op->mechanism == CKM_DES_CBC || op->mechanism == CKM_DES_CBC_PAD))
        return CKR_MECHANISM_INVALID;           /* legacy-des = false */
    return drv_sym_run (op, out, out_len);
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
    { CS_DRV_GENERATE_MATERIAL, (cs_driver_fn_t) s_generate },
    { CS_DRV_SESSION_CACHED, (cs_driver_fn_t) s_session_cached },
    { CS_DRV_DERIVE_KEY, (cs_driver_fn_t) s_derive },
    { CS_DRV_MODEXP, (cs_driver_fn_t) s_modexp },
    { CS_DRV_SYMMETRIC, (cs_driver_fn_t) s_symmetric },
    { 0, NULL }
};

CS_DRIVER_EXPORT ("openssl",
                  "OpenSSL on the broker's cores: keystore and per-request keys, key generation",
                  s_dispatch)
