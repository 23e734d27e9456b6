/*  cs_bench_driver.c — cryptoserver-bench --driver-board: one board of a
 *  broker config used directly through its shim driver (dlopen, the driver
 *  ABI of shim-drivers/cs_driver.h), without broker, wire or module: the
 *  paper's local microbenchmark of each board (Berson et al. §5.1, Table 1).
 *  Each bench thread opens its own driver session, as a broker worker does;
 *  the hashing and DigestInfo the module would do are done here.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <czmq.h>
#include <openssl/bn.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/sha.h>
#include <openssl/x509.h>
#include "cs_bench.h"
#include "cs_driver.h"
#include "cs_util.h"

struct cs_bench_driver {
    void *dl;
    const cs_driver_t *driver;
    cs_board_t *board;
    cs_drv_board_close_fn *board_close;
    cs_drv_session_open_fn *session_open;
    cs_drv_session_close_fn *session_close;
    cs_drv_sign_key_fn *sign;
    cs_key_info_t *keys;            /* the board's resident keys */
    size_t n_keys;
    cs_drv_key_t key;                   /* what each signature uses */
    unsigned char *pkcs8;           /* material (--key-file): PKCS#8 DER, wiped at close */
    size_t pkcs8_len;
    EVP_PKEY *pkey;                 /* material: the key, for its public half */
    char ref [80];                  /* material: cache name of the key */
};

//  The driver directory: env CRYPTOSERVER_DRIVER_DIR, else the config's
//  broker/driver-dir (relative to the config), else the installed one.
static char *
s_driver_dir (zconfig_t *root, const char *base_dir)
{
    const char *env = getenv ("CRYPTOSERVER_DRIVER_DIR");
    if (env && *env)
        return strdup (env);
    const char *configured = zconfig_get (root, "broker/driver-dir", NULL);
    if (configured)
        return cs_path_resolve (base_dir, configured);
#ifdef CS_DRIVER_DIR
    return strdup (CS_DRIVER_DIR);
#else
    return NULL;
#endif
}

//  Loads DIR/TYPE.so and looks up the functions the bench uses.
static int
s_load (cs_bench_driver_t *self, const char *dir, const char *type, char *err, size_t err_size)
{
    char path [4096];
    snprintf (path, sizeof path, "%s/%s.so", dir, type);
    self->dl = dlopen (path, RTLD_NOW | RTLD_LOCAL);
    cs_driver_entry_fn *entry = self->dl ? (cs_driver_entry_fn *) dlsym (self->dl, CS_DRIVER_ENTRY_SYMBOL)
                                         : NULL;
    self->driver = entry ? entry () : NULL;
    if (!self->driver || self->driver->abi_version != CS_DRIVER_ABI_VERSION) {
        if (self->dl)
            snprintf (err, err_size, "%s: not a driver of ABI version %d", path, CS_DRIVER_ABI_VERSION);
        else
            snprintf (err, err_size, "%s", dlerror ());
        return -1;
    }
    self->board_close = (cs_drv_board_close_fn *) cs_driver_lookup (self->driver, CS_DRV_BOARD_CLOSE);
    self->session_open = (cs_drv_session_open_fn *) cs_driver_lookup (self->driver, CS_DRV_SESSION_OPEN);
    self->session_close = (cs_drv_session_close_fn *) cs_driver_lookup (self->driver, CS_DRV_SESSION_CLOSE);
    self->sign = (cs_drv_sign_key_fn *) cs_driver_lookup (self->driver, CS_DRV_SIGN_KEY);
    if (!self->board_close || !self->session_open || !self->session_close || !self->sign) {
        snprintf (err, err_size, "%s: the driver cannot sign", path);
        return -1;
    }
    return 0;
}

//  Reads the private key PEM `path` as key material (PKCS#8 DER).
static int
s_material (cs_bench_driver_t *self, const char *path, char *err, size_t err_size)
{
    FILE *file = fopen (path, "re");
    self->pkey = file ? PEM_read_PrivateKey (file, NULL, NULL, NULL) : NULL;
    if (file)
        fclose (file);
    PKCS8_PRIV_KEY_INFO *p8 = self->pkey ? EVP_PKEY2PKCS8 (self->pkey) : NULL;
    unsigned char *der = NULL;
    int len = p8 ? i2d_PKCS8_PRIV_KEY_INFO (p8, &der) : -1;
    PKCS8_PRIV_KEY_INFO_free (p8);
    if (len <= 0) {
        snprintf (err, err_size, "%s: not a readable PEM private key", path);
        return -1;
    }
    self->pkcs8 = der;
    self->pkcs8_len = (size_t) len;
    //  A stable cache name: drivers keep what they made of it per session.
    unsigned char digest [SHA256_DIGEST_LENGTH];
    SHA256 (der, (size_t) len, digest);
    memcpy (self->ref, "bench:", 6);
    cs_hex_encode (digest, 16, self->ref + 6);
    self->key = (cs_drv_key_t) { NULL, 0, self->pkcs8, self->pkcs8_len, self->ref };
    return 0;
}

//  Finds the resident key labelled `label` among the board's keys.
static int
s_resident (cs_bench_driver_t *self, const char *label, char *err, size_t err_size)
{
    cs_drv_board_keys_fn *keys = (cs_drv_board_keys_fn *) cs_driver_lookup (self->driver, CS_DRV_BOARD_KEYS);
    if (!keys || keys (self->board, &self->keys, &self->n_keys)) {
        snprintf (err, err_size, "the board cannot list its keys");
        return -1;
    }
    for (size_t i = 0; i < self->n_keys; i++)
        if (self->keys [i].label && strcmp (self->keys [i].label, label) == 0) {
            self->key = (cs_drv_key_t) { self->keys [i].id, self->keys [i].id_len, NULL, 0, NULL };
            return 0;
        }
    snprintf (err, err_size, "the board has no key labelled '%s'", label);
    return -1;
}

cs_bench_driver_t *
cs_bench_driver_open (const char *spec, const char *label, const char *key_file,
                      char *err, size_t err_size)
{
    cs_bench_driver_t *self = calloc (1, sizeof *self);
    const char *colon = strrchr (spec, ':');
    char *file = colon ? strndup (spec, (size_t) (colon - spec)) : NULL;
    char *base_dir = file ? cs_path_dirname (file) : NULL, *dir = NULL, path [512];
    zconfig_t *root = file ? zconfig_load (file) : NULL;
    snprintf (path, sizeof path, "drivers/%s", colon ? colon + 1 : "");
    zconfig_t *section = root ? zconfig_locate (root, path) : NULL;
    const char *type = section ? zconfig_get (section, "type", NULL) : NULL;
    cs_drv_board_open_fn *open = NULL;
    if (!self || !colon || !root || !type) {
        snprintf (err, err_size, "--driver-board %s: %s", spec,
                  !colon ? "want CONF:NAME" : !root ? "cannot load the config"
                                                    : "no board of that name with a type");
        goto fail;
    }
    if (!(dir = s_driver_dir (root, base_dir)) || s_load (self, dir, type, err, err_size))
        goto fail;
    open = (cs_drv_board_open_fn *) cs_driver_lookup (self->driver, CS_DRV_BOARD_OPEN);
    if (!open || open (colon + 1, section, base_dir, &self->board)) {
        snprintf (err, err_size, "board %s (%s): cannot open it (see the log line above)", colon + 1, type);
        goto fail;
    }
    if (key_file ? s_material (self, key_file, err, err_size) : s_resident (self, label, err, err_size))
        goto fail;
    goto out;
fail:
    cs_bench_driver_close (&self);
out:
    zconfig_destroy (&root);
    free (dir);
    free (base_dir);
    free (file);
    return self;
}

void
cs_bench_driver_close (cs_bench_driver_t **self_p)
{
    cs_bench_driver_t *self = *self_p;
    if (!self)
        return;
    if (self->board)
        self->board_close (&self->board);
    cs_key_info_free_array (self->keys, self->n_keys);
    if (self->pkcs8) {
        OPENSSL_cleanse (self->pkcs8, self->pkcs8_len);
        OPENSSL_free (self->pkcs8);
    }
    EVP_PKEY_free (self->pkey);
    if (self->dl)
        dlclose (self->dl);
    free (self);
    *self_p = NULL;
}

//  Copies a byte array; false when out of memory.
static bool
s_dup (unsigned char **to, size_t *to_len, const unsigned char *from, size_t len)
{
    *to_len = len;
    *to = len ? malloc (len) : NULL;
    if (len && *to)
        memcpy (*to, from, len);
    return !len || *to;
}

//  The public half of an RSA material key, as a token's CKA_MODULUS and
//  CKA_PUBLIC_EXPONENT would give it.  CKR_KEY_TYPE_INCONSISTENT for others.
static CK_RV
s_pubkey_from_pkey (EVP_PKEY *pkey, cs_bench_pubkey_t *pubkey)
{
    CK_RV rv = CKR_HOST_MEMORY;
    if (EVP_PKEY_get_base_id (pkey) == EVP_PKEY_RSA) {
        BIGNUM *n = NULL, *e = NULL;
        if (EVP_PKEY_get_bn_param (pkey, "n", &n) && EVP_PKEY_get_bn_param (pkey, "e", &e)) {
            pubkey->key_type = CKK_RSA;
            pubkey->modulus_len = (size_t) BN_num_bytes (n);
            pubkey->exponent_len = (size_t) BN_num_bytes (e);
            pubkey->modulus = malloc (pubkey->modulus_len);
            pubkey->exponent = malloc (pubkey->exponent_len);
            if (pubkey->modulus && pubkey->exponent) {
                BN_bn2bin (n, pubkey->modulus);
                BN_bn2bin (e, pubkey->exponent);
                rv = CKR_OK;
            }
        }
        BN_free (n);
        BN_free (e);
        return rv;
    }
    return CKR_KEY_TYPE_INCONSISTENT;
}

CK_RV
cs_bench_driver_pubkey (cs_bench_driver_t *self, cs_bench_pubkey_t *pubkey)
{
    memset (pubkey, 0, sizeof *pubkey);
    if (self->pkey)
        return s_pubkey_from_pkey (self->pkey, pubkey);
    for (size_t i = 0; i < self->n_keys; i++) {
        const cs_key_info_t *key = &self->keys [i];
        if (key->id != self->key.id)
            continue;
        pubkey->key_type = key->key_type == CKK_RSA ? CKK_RSA : CKK_EC;
        bool ok = s_dup (&pubkey->modulus, &pubkey->modulus_len, key->modulus, key->modulus_len)
               && s_dup (&pubkey->exponent, &pubkey->exponent_len, key->public_exponent,
                         key->public_exponent_len)
               && s_dup (&pubkey->ec_params, &pubkey->ec_params_len, key->ec_params, key->ec_params_len)
               && s_dup (&pubkey->ec_point, &pubkey->ec_point_len, key->ec_point, key->ec_point_len);
        return ok ? CKR_OK : CKR_HOST_MEMORY;
    }
    return CKR_KEY_HANDLE_INVALID;
}

void *
cs_bench_driver_session_open (cs_bench_driver_t *self)
{
    return self->session_open (self->board);
}

void
cs_bench_driver_session_close (cs_bench_driver_t *self, void **session_p)
{
    cs_drv_session_t *session = *session_p;
    if (session)
        self->session_close (&session);
    *session_p = NULL;
}

CK_RV
cs_bench_driver_sign (cs_bench_driver_t *self, void *session, cs_bench_mech_t mech,
                      const unsigned char *data, size_t data_len,
                      unsigned char *sig, CK_ULONG *sig_len)
{
    //  DigestInfo prefix of SHA-256 (RFC 8017 §9.2 note 1).
    static const unsigned char prefix [19] = { 0x30, 0x31, 0x30, 0x0d, 0x06, 0x09, 0x60, 0x86,
        0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x01, 0x05, 0x00, 0x04, 0x20 };
    unsigned char in [19 + SHA256_DIGEST_LENGTH];
    size_t in_len = SHA256_DIGEST_LENGTH;
    cs_drv_mech_t raw = { .type = CKM_RSA_PKCS };
    switch (mech) {
        case CS_BENCH_SHA256_RSA_PKCS:
            memcpy (in, prefix, sizeof prefix);
            SHA256 (data, data_len, in + sizeof prefix);
            in_len = sizeof in;
            break;
        case CS_BENCH_RSA_PSS_SHA256:
            raw = (cs_drv_mech_t) { .type = CKM_RSA_PKCS_PSS, .hash = CKM_SHA256, .mgf = CKG_MGF1_SHA256,
                                .salt_len = 32 };
            SHA256 (data, data_len, in);
            break;
        case CS_BENCH_ECDSA_SHA256:
            raw.type = CKM_ECDSA;
            SHA256 (data, data_len, in);
            break;
        case CS_BENCH_ECDSA:                //  data is the digest already
            if (data_len > sizeof in)
                return CKR_DATA_LEN_RANGE;
            raw.type = CKM_ECDSA;
            memcpy (in, data, data_len);
            in_len = data_len;
            break;
    }
    size_t out_len = *sig_len;
    CK_RV rv = self->sign (session, &self->key, &raw, in, in_len, sig, &out_len);
    *sig_len = (CK_ULONG) out_len;
    return rv;
}
