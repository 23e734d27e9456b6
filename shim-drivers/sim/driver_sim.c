/*  driver_sim.c — a simulated board: one PEM private key signed with OpenSSL
 *  on the broker's own cores (so every result is real and verifiable), timed
 *  by the model of a card with N coprocessors (sim_card.h).
 *
 *  For scheduling experiments and the paper's benchmarks (the AXL200 and
 *  nFast 300 boards of Berson et al. §4.2.5, §5.1: `preset`) and for unit
 *  tests, which verify its signatures.  Config keys (under drivers/<name>):
 *  key-file (PEM, RSA or EC, relative to the config dir), key-id (hex
 *  CKA_ID), label, mechanisms (the job mechanisms the card has, names of
 *  common/cs_mech.h separated by spaces or commas, e.g. "CKM_RSA_PKCS": a
 *  card with fewer mechanisms than the key allows, for routing tests; default
 *  all), and the card's keys of sim_card.h (preset, coprocessors,
 *  crt, latency-ms, latency-KIND-BITS-ms, max-rate-KIND-BITS, jitter-pct).
 *  An operation computes its result, then sleeps (CLOCK_MONOTONIC, absolute)
 *  until the card says it is done: the worker thread is blocked for its own
 *  operation only, like the paper's synchronous shim, so the board needs
 *  `threads` >= coprocessors to keep the card busy (a warning says so).
 *  It has no key-material capabilities: only its resident key, by CKA_ID
 *  (driver ABI v2).  Thread safety: the EVP_PKEY is only read after open;
 *  every operation makes its own EVP_PKEY_CTX; the card has its own lock.
 */
#include <errno.h>
#include <string.h>
#include <time.h>
#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/objects.h>
#include <openssl/pem.h>
#include "cs_mech.h"
#include "cs_util.h"
#include "drv_modexp.h"
#include "drv_evp.h"
#include "drv_keys.h"
#include "sim_card.h"

/*  The dispatch table's functions, declared with the ABI's types (cs_driver.h):
 *  a definition that does not match its type does not compile.  */
static cs_drv_board_open_fn s_board_open;
static cs_drv_board_close_fn s_board_close;
static cs_drv_board_mechanisms_fn s_board_mechanisms;
static cs_drv_board_keys_fn s_board_keys;
static cs_drv_session_open_fn s_session_open;
static cs_drv_session_close_fn s_session_close;
static cs_drv_sign_key_fn s_sign;
static cs_drv_decrypt_key_fn s_decrypt;
static cs_drv_capabilities_fn s_capabilities;
static cs_drv_derive_key_fn s_derive;
static cs_drv_modexp_fn s_modexp;

struct cs_board_s {
    char *name;
    EVP_PKEY *pkey;
    cs_key_info_t key;          /* the one key: public attributes */
    sim_card_params_t params;   /* the card's model for that key */
    sim_card_t *card;
    unsigned sessions;          /* sessions opened: seeds their jitter */
    CK_MECHANISM_TYPE only [16];    /* "mechanisms": the card's only ones; n_only 0 = all */
    size_t n_only;
};

struct cs_drv_session_s {
    cs_board_t *board;
    uint64_t random;            /* xorshift64 state for the jitter */
};

/*  Loads the PEM key and fills the board's key description.  */
static int
s_load_key (cs_board_t *self, zconfig_t *config, const char *base_dir)
{
    char *path = cs_path_resolve (base_dir, zconfig_get (config, "key-file", NULL));
    const char *id = zconfig_get (config, "key-id", "");
    FILE *file = path ? fopen (path, "re") : NULL;
    int rc = -1;
    if (!file) {
        zsys_error ("sim %s: key-file: cannot open %s", self->name, path ? path : "(missing)");
        goto out;
    }
    self->pkey = PEM_read_PrivateKey (file, NULL, NULL, NULL);
    long id_len = cs_hex_decode (id, self->key.id, sizeof self->key.id);
    if (!self->pkey || id_len <= 0) {
        zsys_error ("sim %s: %s", self->name,
                    self->pkey ? "key-id: must be 1..64 bytes of hex" : "key-file: not a PEM private key");
        goto out;
    }
    self->key.id_len = (size_t) id_len;
    self->key.label = strdup (zconfig_get (config, "label", self->name));
    rc = drv_key_info_from_pkey (self->pkey, &self->key);
    self->key.can_sign = true;
    self->key.can_decrypt = self->key.key_type == CKK_RSA;
    self->key.can_derive = self->key.key_type == CKK_EC;
    if (rc)
        zsys_error ("sim %s: key-file: only RSA, EC and Ed25519 keys are supported", self->name);
out:
    if (file)
        fclose (file);
    free (path);
    return rc;
}

static cs_drv_board_close_fn s_board_close;

/*  Reads "mechanisms": names of the table (cs_mech.h).  Returns 0, or -1
 *  after logging an unknown name or too many.  */
static int
s_read_mechanisms (cs_board_t *self, zconfig_t *config)
{
    const char *value = zconfig_get (config, "mechanisms", NULL);
    char *copy = value ? strdup (value) : NULL, *save = NULL;
    int rc = 0;
    for (char *name = copy ? strtok_r (copy, " ,", &save) : NULL; name && rc == 0;
         name = strtok_r (NULL, " ,", &save)) {
        size_t n_rows;
        const cs_mech_row_t *rows = cs_mech_rows (&n_rows), *row = NULL;
        for (size_t i = 0; i < n_rows && !row; i++)
            if (streq (rows [i].name, name))
                row = &rows [i];
        if (!row || self->n_only == sizeof self->only / sizeof self->only [0]) {
            zsys_error ("sim %s: mechanisms: %s %s", self->name, name, row ? "is one too many" : "is unknown");
            rc = -1;
        }
        else
            self->only [self->n_only++] = row->type;
    }
    if (value && !copy)
        rc = -1;
    free (copy);
    return rc;
}

/*  True when the card has job mechanism `type` ("mechanisms").  */
static bool
s_card_has (const cs_board_t *self, CK_MECHANISM_TYPE type)
{
    for (size_t i = 0; i < self->n_only; i++)
        if (self->only [i] == type)
            return true;
    return self->n_only == 0;
}

/*  Resolves the card's model for the loaded key and makes the card.  */
static int
s_make_card (cs_board_t *self, zconfig_t *config)
{
    char err [256] = "";
    if (sim_card_params_resolve (config, self->key.key_type, self->key.bits, &self->params,
                                 err, sizeof err)) {
        zsys_error ("sim %s: %s", self->name, err);
        return -1;
    }
    self->card = sim_card_new (&self->params);
    if (!self->card)
        return -1;
    long threads = atol (zconfig_get (config, "threads", "1"));
    if (threads < self->params.coprocessors)
        zsys_warning ("sim %s: threads (%ld) < coprocessors (%ld): at most %ld operations run at "
                      "once; give the board threads >= coprocessors to load the card",
                      self->name, threads, self->params.coprocessors, threads);
    return 0;
}

static int
s_board_open (const char *name, zconfig_t *config, const char *base_dir, cs_board_t **board_p)
{
    cs_board_t *self = calloc (1, sizeof *self);
    if (!self)
        return -1;
    self->name = strdup (name);
    if (!self->name || s_load_key (self, config, base_dir) || s_read_mechanisms (self, config)
    ||  s_make_card (self, config)) {
        s_board_close (&self);
        return -1;
    }
    const sim_card_params_t *p = &self->params;
    char rate [64] = "no interface limit";
    if (p->max_rate > 0)
        snprintf (rate, sizeof rate, "card limit %.2f ops/s", p->max_rate);
    zsys_info ("sim %s: %s %lu-bit key, %s%s%s%ld coprocessors, %s %.2f ms per operation, %s, "
               "jitter %.0f%%", name, self->key.key_type == CKK_RSA ? "RSA" : "EC/EdDSA",
               self->key.bits, p->preset ? "preset " : "", p->preset ? p->preset : "",
               p->preset ? ", " : "", p->coprocessors, p->kind, p->latency_ms, rate, p->jitter_pct);
    *board_p = self;
    return 0;
}

static void
s_board_close (cs_board_t **board_p)
{
    cs_board_t *self = board_p ? *board_p : NULL;
    if (!self)
        return;
    EVP_PKEY_free (self->pkey);
    sim_card_destroy (&self->card);
    free (self->key.label);
    free (self->key.modulus);
    free (self->key.public_exponent);
    free (self->key.ec_params);
    free (self->key.ec_point);
    free (self->name);
    free (self);
    *board_p = NULL;
}

static int
s_board_mechanisms (cs_board_t *self, cs_mech_info_t **mechs_p, size_t *count_p)
{
    static const cs_mech_info_t rsa [] = {
        { CKM_RSA_PKCS, 512, 16384, CKF_SIGN | CKF_DECRYPT },
        { CKM_RSA_PKCS_PSS, 512, 16384, CKF_SIGN },
        { CKM_RSA_PKCS_OAEP, 512, 16384, CKF_DECRYPT },
        { CKM_RSA_X_509, 512, 16384, CKF_SIGN | CKF_DECRYPT },
    };
    static const cs_mech_info_t ec [] = {
        { CKM_ECDSA, 256, 521, CKF_SIGN },
        { CKM_ECDH1_DERIVE, 256, 521, CKF_DERIVE },
    };
    static const cs_mech_info_t ed [] = {
        { CKM_EDDSA, 255, 255, CKF_SIGN },
    };
    bool is_rsa = self->key.key_type == CKK_RSA;
    const cs_mech_info_t *table = is_rsa ? rsa : self->key.key_type == CKK_EC ? ec : ed;
    size_t count = is_rsa ? 4 : self->key.key_type == CKK_EC ? 2 : 1;
    *mechs_p = malloc (count * sizeof (cs_mech_info_t));
    if (!*mechs_p)
        return -1;
    *count_p = 0;
    for (size_t i = 0; i < count; i++)
        if (s_card_has (self, table [i].type))
            (*mechs_p) [(*count_p)++] = table [i];
    if (drv_modexp_mechs_add (mechs_p, count_p, DRV_MODEXP_MAX_BITS)) {
        free (*mechs_p);
        return -1;
    }
    return 0;
}

/*  Deep-copies a byte array; NULL stays NULL.  */
static unsigned char *
s_memdup (const unsigned char *data, size_t len)
{
    unsigned char *copy = data ? malloc (len ? len : 1) : NULL;
    if (copy)
        memcpy (copy, data, len);
    return copy;
}

static int
s_board_keys (cs_board_t *self, cs_key_info_t **keys_p, size_t *count_p)
{
    cs_key_info_t *key = calloc (1, sizeof *key);
    if (!key)
        return -1;
    *key = self->key;
    key->label = self->key.label ? strdup (self->key.label) : NULL;
    key->modulus = s_memdup (self->key.modulus, self->key.modulus_len);
    key->public_exponent = s_memdup (self->key.public_exponent, self->key.public_exponent_len);
    key->ec_params = s_memdup (self->key.ec_params, self->key.ec_params_len);
    key->ec_point = s_memdup (self->key.ec_point, self->key.ec_point_len);
    *keys_p = key;
    *count_p = 1;
    return 0;
}

static cs_drv_session_t *
s_session_open (cs_board_t *board)
{
    cs_drv_session_t *self = calloc (1, sizeof *self);
    if (self) {
        self->board = board;
        //  Any non-zero seed; distinct per session so jitters differ.
        unsigned n = __atomic_add_fetch (&board->sessions, 1, __ATOMIC_RELAXED);
        self->random = 0x9e3779b97f4a7c15ull * n ^ (uint64_t) time (NULL);
        if (!self->random)
            self->random = 1;
    }
    return self;
}

static void
s_session_close (cs_drv_session_t **session_p)
{
    if (session_p && *session_p) {
        free (*session_p);
        *session_p = NULL;
    }
}

/*  A uniform number in [-1, 1] from the session's xorshift64.  */
static double
s_uniform (cs_drv_session_t *session)
{
    uint64_t x = session->random;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    session->random = x;
    return (double) (x >> 11) / (double) (1ull << 53) * 2.0 - 1.0;
}

/*  Queues the operation on the card: returns when it will be done
 *  (nanoseconds on CLOCK_MONOTONIC).  Call before computing the result, so
 *  the host's work overlaps the card's latency.  */
static int64_t
s_card_begin (cs_drv_session_t *session)
{
    struct timespec now;
    clock_gettime (CLOCK_MONOTONIC, &now);
    int64_t now_ns = (int64_t) now.tv_sec * 1000000000LL + now.tv_nsec;
    return sim_card_reserve (session->board->card, now_ns, s_uniform (session));
}

/*  Sleeps until `done` (CLOCK_MONOTONIC nanoseconds): the card's answer.  */
static void
s_card_wait (int64_t done)
{
    struct timespec until = { (time_t) (done / 1000000000LL), (long) (done % 1000000000LL) };
    while (clock_nanosleep (CLOCK_MONOTONIC, TIMER_ABSTIME, &until, NULL) == EINTR)
        ;
}

/*  Checks that the key is the board's resident key.  */
static CK_RV
s_check_key (cs_board_t *board, const cs_drv_key_t *key)
{
    if (!key->id || key->id_len != board->key.id_len || memcmp (key->id, board->key.id, key->id_len))
        return CKR_KEY_HANDLE_INVALID;
    return CKR_OK;
}

static CK_RV
s_sign (cs_drv_session_t *session, const cs_drv_key_t *key, const cs_drv_mech_t *mech,
        const unsigned char *in, size_t in_len, unsigned char *out, size_t *out_len)
{
    cs_board_t *board = session->board;
    CK_RV rv = s_check_key (board, key);
    if (rv != CKR_OK)
        return rv;
    if (!s_card_has (board, mech->type))
        return CKR_MECHANISM_INVALID;
    int64_t done = s_card_begin (session);
    rv = drv_evp_sign (board->pkey, mech, in, in_len, out, out_len);
    s_card_wait (done);
    return rv;
}

static CK_RV
s_decrypt (cs_drv_session_t *session, const cs_drv_key_t *key, const cs_drv_mech_t *mech,
           const unsigned char *in, size_t in_len, unsigned char *out, size_t *out_len)
{
    cs_board_t *board = session->board;
    CK_RV rv = s_check_key (board, key);
    if (rv != CKR_OK)
        return rv;
    if (!s_card_has (board, mech->type))
        return CKR_MECHANISM_INVALID;
    int64_t done = s_card_begin (session);
    rv = drv_evp_decrypt (board->pkey, mech, in, in_len, out, out_len);
    s_card_wait (done);
    return rv;
}

/*  CS_DRV_DERIVE_KEY: ECDH with the board's EC key (cs_driver.h).  */
static CK_RV
s_derive (cs_drv_session_t *session, const cs_drv_key_t *key, const unsigned char *point, size_t point_len,
          unsigned char *out, size_t *out_len)
{
    cs_board_t *board = session->board;
    CK_RV rv = s_check_key (board, key);
    if (rv != CKR_OK)
        return rv;
    int64_t done = s_card_begin (session);
    rv = drv_evp_derive (board->pkey, point, point_len, out, out_len);
    s_card_wait (done);
    return rv;
}

/*  Resident key only; ECDH when that key is an EC key.  */
static int
s_capabilities (cs_board_t *self, cs_caps_t *caps)
{
    memset (caps, 0, sizeof *caps);
    caps->flags = (self->key.key_type == CKK_EC ? CS_CAP_DERIVE : 0) | CS_CAP_MODEXP;
    return 0;
}

/*  CS_DRV_MODEXP (cs_driver.h): the result with BIGNUM on the host, the
 *  time of one card operation (the card's model for its key: kind and
 *  size), as for a signature.  */
static CK_RV
s_modexp (cs_drv_session_t *session, const cs_modexp_t *op, unsigned char *out, size_t *out_len)
{
    int64_t done = s_card_begin (session);
    CK_RV rv = drv_modexp_bn (op, session->board->name, out, out_len);
    s_card_wait (done);
    return rv;
}

static const cs_driver_dispatch_t s_dispatch [] = {
    { CS_DRV_BOARD_OPEN, (cs_driver_fn_t) s_board_open },
    { CS_DRV_BOARD_CLOSE, (cs_driver_fn_t) s_board_close },
    { CS_DRV_BOARD_MECHANISMS, (cs_driver_fn_t) s_board_mechanisms },
    { CS_DRV_BOARD_KEYS, (cs_driver_fn_t) s_board_keys },
    { CS_DRV_SESSION_OPEN, (cs_driver_fn_t) s_session_open },
    { CS_DRV_SESSION_CLOSE, (cs_driver_fn_t) s_session_close },
    { CS_DRV_SIGN_KEY, (cs_driver_fn_t) s_sign },
    { CS_DRV_DECRYPT_KEY, (cs_driver_fn_t) s_decrypt },
    { CS_DRV_CAPABILITIES, (cs_driver_fn_t) s_capabilities },
    { CS_DRV_DERIVE_KEY, (cs_driver_fn_t) s_derive },
    { CS_DRV_MODEXP, (cs_driver_fn_t) s_modexp },
    { 0, NULL }
};

CS_DRIVER_EXPORT ("sim",
                  "simulated board: one PEM key, OpenSSL on the broker's cores, a card of N coprocessors",
                  s_dispatch)
