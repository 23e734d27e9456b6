/*  driver_sim.c — a simulated board: one PEM private key signed with OpenSSL
 *  on the broker's own cores, plus an optional fixed latency per operation.
 *
 *  For scheduling experiments (the paper's boards with N coprocessors, §4.2.5)
 *  and for unit tests, which verify its signatures.  Config keys (under
 *  drivers/<name>): key-file (PEM, RSA or EC, relative to the config dir),
 *  key-id (hex CKA_ID), label, latency-ms (default 0), coprocessors
 *  (informational).  Thread safety: the EVP_PKEY is only read after open;
 *  every operation makes its own EVP_PKEY_CTX.
 */
#include <string.h>
#include <time.h>
#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/objects.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>
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

/*  Wraps a byte string in a DER OCTET STRING (CKA_EC_POINT's form).  */
static unsigned char *
s_der_octet_string (const unsigned char *data, size_t len, size_t *out_len)
{
    size_t head = len < 128 ? 2 : len < 256 ? 3 : 4;
    unsigned char *out = malloc (head + len);
    if (!out)
        return NULL;
    out [0] = 0x04;
    if (len < 128)
        out [1] = (unsigned char) len;
    else
    if (len < 256) {
        out [1] = 0x81;
        out [2] = (unsigned char) len;
    }
    else {
        out [1] = 0x82;
        out [2] = (unsigned char) (len >> 8);
        out [3] = (unsigned char) len;
    }
    memcpy (out + head, data, len);
    *out_len = head + len;
    return out;
}

/*  Stores a big-number parameter of pkey as big-endian bytes.  */
static int
s_bn_param (EVP_PKEY *pkey, const char *name, unsigned char **out_p, size_t *len_p)
{
    BIGNUM *bn = NULL;
    if (!EVP_PKEY_get_bn_param (pkey, name, &bn))
        return -1;
    *len_p = (size_t) BN_num_bytes (bn);
    *out_p = malloc (*len_p ? *len_p : 1);
    if (*out_p)
        BN_bn2bin (bn, *out_p);
    BN_free (bn);
    return *out_p ? 0 : -1;
}

static int
s_rsa_info (EVP_PKEY *pkey, cs_key_info_t *key)
{
    key->key_type = CKK_RSA;
    key->can_decrypt = true;
    if (s_bn_param (pkey, OSSL_PKEY_PARAM_RSA_N, &key->modulus, &key->modulus_len)
    ||  s_bn_param (pkey, OSSL_PKEY_PARAM_RSA_E, &key->public_exponent,
                    &key->public_exponent_len))
        return -1;
    return 0;
}

static int
s_ec_info (EVP_PKEY *pkey, cs_key_info_t *key)
{
    char group [64];
    unsigned char point [256];
    size_t point_len = 0;
    key->key_type = CKK_EC;
    if (!EVP_PKEY_get_utf8_string_param (pkey, OSSL_PKEY_PARAM_GROUP_NAME, group,
                                         sizeof group, NULL)
    ||  !EVP_PKEY_get_octet_string_param (pkey, OSSL_PKEY_PARAM_PUB_KEY, point,
                                          sizeof point, &point_len))
        return -1;
    ASN1_OBJECT *oid = OBJ_nid2obj (OBJ_sn2nid (group));
    int der_len = oid ? i2d_ASN1_OBJECT (oid, NULL) : -1;
    if (der_len <= 0 || !(key->ec_params = malloc ((size_t) der_len)))
        return -1;
    unsigned char *p = key->ec_params;
    key->ec_params_len = (size_t) i2d_ASN1_OBJECT (oid, &p);
    key->ec_point = s_der_octet_string (point, point_len, &key->ec_point_len);
    return key->ec_point ? 0 : -1;
}

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
    self->key.bits = (CK_ULONG) EVP_PKEY_get_bits (self->pkey);
    self->key.can_sign = true;
    if (EVP_PKEY_is_a (self->pkey, "RSA"))
        rc = s_rsa_info (self->pkey, &self->key);
    else
    if (EVP_PKEY_is_a (self->pkey, "EC"))
        rc = s_ec_info (self->pkey, &self->key);
    if (rc)
        zsys_error ("sim %s: key-file: only RSA and EC keys are supported", self->name);
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
               self->key.key_type == CKK_RSA ? "RSA" : "EC", self->key.bits,
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
    };
    static const cs_mech_info_t ec [] = {
        { CKM_ECDSA, 256, 521, CKF_SIGN },
    };
    bool is_rsa = self->key.key_type == CKK_RSA;
    size_t count = is_rsa ? 3 : 1;
    *mechs_p = malloc (count * sizeof (cs_mech_info_t));
    if (!*mechs_p)
        return -1;
    memcpy (*mechs_p, is_rsa ? rsa : ec, count * sizeof (cs_mech_info_t));
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

/*  Checks the key id and that the mechanism suits the key type.  */
static CK_RV
s_check_key (cs_board_t *board, const unsigned char *key_id, size_t key_id_len,
             CK_MECHANISM_TYPE mech)
{
    if (key_id_len != board->key.id_len || memcmp (key_id, board->key.id, key_id_len))
        return CKR_KEY_HANDLE_INVALID;
    bool rsa_mech = mech == CKM_RSA_PKCS || mech == CKM_RSA_PKCS_PSS || mech == CKM_RSA_PKCS_OAEP;
    if (mech == CKM_ECDSA)
        return board->key.key_type == CKK_EC ? CKR_OK : CKR_KEY_TYPE_INCONSISTENT;
    if (rsa_mech)
        return board->key.key_type == CKK_RSA ? CKR_OK : CKR_KEY_TYPE_INCONSISTENT;
    return CKR_MECHANISM_INVALID;
}

/*  Sets RSA padding and PSS/OAEP digests on a sign or decrypt context.  */
static CK_RV
s_set_rsa_params (EVP_PKEY_CTX *ctx, const cs_mech_t *mech, size_t in_len)
{
    if (mech->type == CKM_RSA_PKCS)
        return EVP_PKEY_CTX_set_rsa_padding (ctx, RSA_PKCS1_PADDING) > 0
               ? CKR_OK : CKR_FUNCTION_FAILED;
    const EVP_MD *md = drv_md_from_ckm (mech->hash);
    const EVP_MD *mgf1 = drv_md_from_mgf (mech->mgf);
    if (!md || !mgf1)
        return CKR_MECHANISM_PARAM_INVALID;
    if (mech->type == CKM_RSA_PKCS_PSS) {
        if (in_len != (size_t) EVP_MD_get_size (md))
            return CKR_DATA_LEN_RANGE;
        return EVP_PKEY_CTX_set_rsa_padding (ctx, RSA_PKCS1_PSS_PADDING) > 0
            && EVP_PKEY_CTX_set_signature_md (ctx, md) > 0
            && EVP_PKEY_CTX_set_rsa_mgf1_md (ctx, mgf1) > 0
            && EVP_PKEY_CTX_set_rsa_pss_saltlen (ctx, (int) mech->salt_len) > 0
               ? CKR_OK : CKR_MECHANISM_PARAM_INVALID;
    }
    unsigned char *label = mech->label_len ? OPENSSL_memdup (mech->label, mech->label_len) : NULL;
    if (EVP_PKEY_CTX_set_rsa_padding (ctx, RSA_PKCS1_OAEP_PADDING) <= 0
    ||  EVP_PKEY_CTX_set_rsa_oaep_md (ctx, md) <= 0
    ||  EVP_PKEY_CTX_set_rsa_mgf1_md (ctx, mgf1) <= 0
    ||  (label && EVP_PKEY_CTX_set0_rsa_oaep_label (ctx, label, (int) mech->label_len) <= 0)) {
        OPENSSL_free (label);
        return CKR_MECHANISM_PARAM_INVALID;
    }
    return CKR_OK;
}

static CK_RV
s_sign (cs_session_t *session, const unsigned char *key_id, size_t key_id_len,
        const cs_mech_t *mech, const unsigned char *in, size_t in_len,
        unsigned char *out, size_t *out_len)
{
    cs_board_t *board = session->board;
    CK_RV rv = s_check_key (board, key_id, key_id_len, mech->type);
    if (rv == CKR_OK && mech->type == CKM_RSA_PKCS_OAEP)
        rv = CKR_MECHANISM_INVALID;
    if (rv != CKR_OK)
        return rv;
    s_latency (board);
    unsigned char der [256];
    size_t der_len = sizeof der;
    bool ec = mech->type == CKM_ECDSA;
    size_t k = (board->key.bits + 7) / 8;
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new (board->pkey, NULL);
    if (!ctx || EVP_PKEY_sign_init (ctx) <= 0)
        rv = CKR_DEVICE_ERROR;
    else
    if (!ec)
        rv = s_set_rsa_params (ctx, mech, in_len);
    if (rv == CKR_OK && !ec && mech->type == CKM_RSA_PKCS && in_len + 11 > k)
        rv = CKR_DATA_LEN_RANGE;
    if (rv == CKR_OK && !ec && *out_len < k)
        rv = CKR_BUFFER_TOO_SMALL;
    if (rv == CKR_OK && EVP_PKEY_sign (ctx, ec ? der : out, ec ? &der_len : out_len, in, in_len) <= 0)
        rv = CKR_FUNCTION_FAILED;
    if (rv == CKR_OK && ec)
        rv = drv_ecdsa_der_to_raw (der, der_len, k, out, out_len);
    ERR_clear_error ();
    EVP_PKEY_CTX_free (ctx);
    return rv;
}

static CK_RV
s_decrypt (cs_session_t *session, const unsigned char *key_id, size_t key_id_len,
           const cs_mech_t *mech, const unsigned char *in, size_t in_len,
           unsigned char *out, size_t *out_len)
{
    cs_board_t *board = session->board;
    CK_RV rv = s_check_key (board, key_id, key_id_len, mech->type);
    if (rv == CKR_OK && mech->type != CKM_RSA_PKCS && mech->type != CKM_RSA_PKCS_OAEP)
        rv = mech->type == CKM_ECDSA ? CKR_KEY_TYPE_INCONSISTENT : CKR_MECHANISM_INVALID;
    if (rv != CKR_OK)
        return rv;
    s_latency (board);
    size_t k = (board->key.bits + 7) / 8;
    if (in_len != k)
        return CKR_ENCRYPTED_DATA_LEN_RANGE;
    unsigned char buf [2048];
    size_t len = sizeof buf;
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new (board->pkey, NULL);
    if (!ctx || EVP_PKEY_decrypt_init (ctx) <= 0)
        rv = CKR_DEVICE_ERROR;
    else
        rv = s_set_rsa_params (ctx, mech, in_len);
    if (rv == CKR_OK && EVP_PKEY_decrypt (ctx, buf, &len, in, in_len) <= 0)
        rv = CKR_ENCRYPTED_DATA_INVALID;
    if (rv == CKR_OK && len > *out_len)
        rv = CKR_BUFFER_TOO_SMALL;
    if (rv == CKR_OK) {
        memcpy (out, buf, len);
        *out_len = len;
    }
    OPENSSL_cleanse (buf, sizeof buf);
    ERR_clear_error ();
    EVP_PKEY_CTX_free (ctx);
    return rv;
}

static const cs_driver_dispatch_t s_dispatch [] = {
    { CS_DRV_BOARD_OPEN, (cs_driver_fn_t) s_board_open },
    { CS_DRV_BOARD_CLOSE, (cs_driver_fn_t) s_board_close },
    { CS_DRV_BOARD_MECHANISMS, (cs_driver_fn_t) s_board_mechanisms },
    { CS_DRV_BOARD_KEYS, (cs_driver_fn_t) s_board_keys },
    { CS_DRV_SESSION_OPEN, (cs_driver_fn_t) s_session_open },
    { CS_DRV_SESSION_CLOSE, (cs_driver_fn_t) s_session_close },
    { CS_DRV_SIGN, (cs_driver_fn_t) s_sign },
    { CS_DRV_DECRYPT, (cs_driver_fn_t) s_decrypt },
    { 0, NULL }
};

static const cs_driver_t s_driver = {
    CS_DRIVER_ABI_VERSION, "sim",
    "simulated board: one PEM key, OpenSSL on the broker's cores, fixed latency",
    s_dispatch
};

/*  The driver's one exported symbol (cs_driver.h).  */
const cs_driver_t *cs_driver_entry (void);

const cs_driver_t *
cs_driver_entry (void)
{
    return &s_driver;
}
