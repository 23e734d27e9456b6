/*  driver_sim.c — a simulated board: one PEM private key signed with OpenSSL
 *  on the broker's own cores, plus an optional fixed latency per operation.
 *
 *  For scheduling experiments (the paper's boards with N coprocessors, §4.2.5)
 *  and for unit tests, which verify its signatures.  Config keys (under
 *  drivers/<name>): key-file (PEM, RSA or EC, relative to the config dir),
 *  key-id (hex CKA_ID), label, latency-ms (default 0), coprocessors
 *  (informational).  It has no key-material capabilities: only its resident
 *  key, by CKA_ID (driver ABI v2).  Thread safety: the EVP_PKEY is only read after open;
 *  every operation makes its own EVP_PKEY_CTX.
 */
#include <string.h>
#include <time.h>
#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/objects.h>
#include <openssl/pem.h>
#include "cs_util.h"
#include "drv_util.h"

struct cs_board_s {
    char *name;
    EVP_PKEY *pkey;
    cs_key_info_t key;          /* the one key: public attributes */
    long latency_ms;
    long coprocessors;
};

struct cs_session_s {
    cs_board_t *board;
};

/*  Loads the PEM key and fills the board's key description.  */
static int
s_load_key (cs_board_t *self, zconfig_t *config, const char *base_dir)
{
    char *path = cs_path_resolve (base_dir, drv_config_get (config, "key-file", NULL));
    const char *id = drv_config_get (config, "key-id", "");
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
    self->key.label = strdup (drv_config_get (config, "label", self->name));
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

static void s_board_close (cs_board_t **board_p);

static int
s_board_open (const char *name, zconfig_t *config, const char *base_dir, cs_board_t **board_p)
{
    cs_board_t *self = calloc (1, sizeof *self);
    if (!self)
        return -1;
    self->name = strdup (name);
    self->latency_ms = atol (drv_config_get (config, "latency-ms", "0"));
    self->coprocessors = atol (drv_config_get (config, "coprocessors", "1"));
    if (self->latency_ms < 0 || self->latency_ms > 60000) {
        zsys_error ("sim %s: latency-ms: must be 0..60000", name);
        s_board_close (&self);
        return -1;
    }
    if (s_load_key (self, config, base_dir)) {
        s_board_close (&self);
        return -1;
    }
    zsys_info ("sim %s: %s %lu-bit key, latency %ld ms, %ld coprocessors", name,
               self->key.key_type == CKK_RSA ? "RSA" : "EC/EdDSA", self->key.bits,
               self->latency_ms, self->coprocessors);
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
    memcpy (*mechs_p, table, count * sizeof (cs_mech_info_t));
    *count_p = count;
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

static cs_session_t *
s_session_open (cs_board_t *board)
{
    cs_session_t *self = calloc (1, sizeof *self);
    if (self)
        self->board = board;
    return self;
}

static void
s_session_close (cs_session_t **session_p)
{
    if (session_p && *session_p) {
        free (*session_p);
        *session_p = NULL;
    }
}

/*  Sleeps the simulated coprocessor latency.  */
static void
s_latency (cs_board_t *board)
{
    if (board->latency_ms > 0) {
        struct timespec ts = { board->latency_ms / 1000, (board->latency_ms % 1000) * 1000000L };
        while (nanosleep (&ts, &ts) == -1)
            ;
    }
}

/*  Checks that the key is the board's resident key.  */
static CK_RV
s_check_key (cs_board_t *board, const cs_key_t *key)
{
    if (!key->id || key->id_len != board->key.id_len || memcmp (key->id, board->key.id, key->id_len))
        return CKR_KEY_HANDLE_INVALID;
    return CKR_OK;
}

static CK_RV
s_sign (cs_session_t *session, const cs_key_t *key, const cs_mech_t *mech,
        const unsigned char *in, size_t in_len, unsigned char *out, size_t *out_len)
{
    cs_board_t *board = session->board;
    CK_RV rv = s_check_key (board, key);
    if (rv != CKR_OK)
        return rv;
    s_latency (board);
    return drv_evp_sign (board->pkey, mech, in, in_len, out, out_len);
}

static CK_RV
s_decrypt (cs_session_t *session, const cs_key_t *key, const cs_mech_t *mech,
           const unsigned char *in, size_t in_len, unsigned char *out, size_t *out_len)
{
    cs_board_t *board = session->board;
    CK_RV rv = s_check_key (board, key);
    if (rv != CKR_OK)
        return rv;
    s_latency (board);
    return drv_evp_decrypt (board->pkey, mech, in, in_len, out, out_len);
}

/*  CS_DRV_DERIVE_KEY: ECDH with the board's EC key (cs_driver.h).  */
static CK_RV
s_derive (cs_session_t *session, const cs_key_t *key, const unsigned char *point, size_t point_len,
          unsigned char *out, size_t *out_len)
{
    cs_board_t *board = session->board;
    CK_RV rv = s_check_key (board, key);
    if (rv != CKR_OK)
        return rv;
    s_latency (board);
    return drv_evp_derive (board->pkey, point, point_len, out, out_len);
}

/*  Resident key only; ECDH when that key is an EC key.  */
static int
s_capabilities (cs_board_t *self, cs_caps_t *caps)
{
    memset (caps, 0, sizeof *caps);
    caps->flags = self->key.key_type == CKK_EC ? CS_CAP_DERIVE : 0;
    return 0;
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
    { 0, NULL }
};

CS_DRIVER_EXPORT ("sim",
                  "simulated board: one PEM key, OpenSSL on the broker's cores, fixed latency",
                  s_dispatch)
