/*  row_mac.c — HKDF-derived keys and HMAC-SHA256 of keystore rows
 *  (row_mac.h), with OpenSSL's EVP_KDF "HKDF" and EVP_MAC "HMAC".  */
#include <pthread.h>
#include <string.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/params.h>
#include "row_mac.h"

int
row_mac_derive (const uint8_t master [32], const char *info, uint8_t out [32])
{
    EVP_KDF *kdf = EVP_KDF_fetch (NULL, "HKDF", NULL);
    EVP_KDF_CTX *ctx = kdf ? EVP_KDF_CTX_new (kdf) : NULL;
    OSSL_PARAM params [] = {
        OSSL_PARAM_construct_utf8_string (OSSL_KDF_PARAM_DIGEST, (char *) "SHA256", 0),
        OSSL_PARAM_construct_octet_string (OSSL_KDF_PARAM_KEY, (void *) master, 32),
        OSSL_PARAM_construct_octet_string (OSSL_KDF_PARAM_INFO, (void *) info, strlen (info)),
        OSSL_PARAM_construct_end ()
    };
    int rc = ctx && EVP_KDF_derive (ctx, out, 32, params) == 1 ? 0 : -1;
    EVP_KDF_CTX_free (ctx);
    EVP_KDF_free (kdf);
    return rc;
}

/*  A MAC being computed; `ok` turns false at the first failure.  */
typedef struct {
    EVP_MAC_CTX *ctx;
    bool ok;
} s_mac_t;

/*  The HMAC-SHA256 context every MAC starts from, made once per process:
 *  fetching HMAC and its digest cost more than hashing a whole key row
 *  (1.9 us a row, 1.1 us from this; issue #25, a listing verifies every
 *  row).  It is never keyed, so it holds no secret; threads only read it
 *  (EVP_MAC_CTX_dup).  NULL when OpenSSL cannot make it: every MAC fails.  */
static EVP_MAC_CTX *s_template;
static pthread_once_t s_template_once = PTHREAD_ONCE_INIT;

static void
s_template_make (void)
{
    EVP_MAC *mac = EVP_MAC_fetch (NULL, "HMAC", NULL);
    OSSL_PARAM params [] = {
        OSSL_PARAM_construct_utf8_string (OSSL_MAC_PARAM_DIGEST, (char *) "SHA256", 0),
        OSSL_PARAM_construct_end ()
    };
    s_template = mac ? EVP_MAC_CTX_new (mac) : NULL;
    EVP_MAC_free (mac);
    if (s_template && EVP_MAC_CTX_set_params (s_template, params) != 1) {
        EVP_MAC_CTX_free (s_template);
        s_template = NULL;
    }
}

static void
s_start (s_mac_t *self, const uint8_t key [32], const char *label)
{
    pthread_once (&s_template_once, s_template_make);
    self->ctx = s_template ? EVP_MAC_CTX_dup (s_template) : NULL;
    self->ok = self->ctx && EVP_MAC_init (self->ctx, key, 32, NULL) == 1
            && EVP_MAC_update (self->ctx, (const unsigned char *) label, strlen (label)) == 1;
}

static void
s_bytes (s_mac_t *self, const void *data, size_t len)
{
    if (self->ok && len)
        self->ok = EVP_MAC_update (self->ctx, data, len) == 1;
}

//  An 8-byte big-endian integer.
static void
s_u64 (s_mac_t *self, uint64_t value)
{
    unsigned char be [8];
    for (int i = 0; i < 8; i++)
        be [i] = (unsigned char) (value >> (56 - 8 * i));
    s_bytes (self, be, 8);
}

//  A 4-byte big-endian length, then the bytes.
static void
s_lp (s_mac_t *self, const void *data, size_t len)
{
    unsigned char be [4] = { (unsigned char) (len >> 24), (unsigned char) (len >> 16),
                             (unsigned char) (len >> 8), (unsigned char) len };
    if (len > UINT32_MAX)
        self->ok = false;
    s_bytes (self, be, 4);
    s_bytes (self, data, len);
}

static int
s_finish (s_mac_t *self, uint8_t mac [ROW_MAC_LEN])
{
    size_t len = 0;
    bool ok = self->ok && EVP_MAC_final (self->ctx, mac, &len, ROW_MAC_LEN) == 1 && len == ROW_MAC_LEN;
    EVP_MAC_CTX_free (self->ctx);
    return ok ? 0 : -1;
}

int
row_mac_tenant (const uint8_t key [32], const char *name, const row_mac_tenant_t *row,
                uint8_t mac [ROW_MAC_LEN])
{
    s_mac_t self;
    if (!name || !row->pin [0] || !row->pin [1])
        return -1;
    s_start (&self, key, "cs-tenant-v1");
    s_lp (&self, name, strlen (name));
    s_lp (&self, row->pin [0], strlen (row->pin [0]));
    s_lp (&self, row->pin [1], strlen (row->pin [1]));
    s_u64 (&self, (uint64_t) row->failures [0]);
    s_u64 (&self, (uint64_t) row->failures [1]);
    s_u64 (&self, (uint64_t) row->epoch [0]);
    s_u64 (&self, (uint64_t) row->epoch [1]);
    return s_finish (&self, mac);
}

//  The MAC of a row of the keys or objects table, with its prefix.
static int
s_row_mac (const uint8_t key [32], const char *prefix, const char *tenant, const char *ref,
           const uint8_t *info, size_t info_len, const uint8_t *private, size_t private_len,
           uint8_t mac [ROW_MAC_LEN])
{
    s_mac_t self;
    unsigned char has_private = private ? 1 : 0;
    s_start (&self, key, prefix);
    s_lp (&self, tenant, strlen (tenant));
    s_lp (&self, ref, strlen (ref));
    s_lp (&self, info, info_len);
    s_bytes (&self, &has_private, 1);
    s_lp (&self, private, private ? private_len : 0);
    return s_finish (&self, mac);
}

int
row_mac_key (const uint8_t key [32], const char *tenant, const char *ref,
             const uint8_t *info, size_t info_len, const uint8_t *private, size_t private_len,
             uint8_t mac [ROW_MAC_LEN])
{
    return s_row_mac (key, "cs-keyrow-v1", tenant, ref, info, info_len, private, private_len, mac);
}

int
row_mac_object (const uint8_t key [32], const char *tenant, const char *ref,
                const uint8_t *info, size_t info_len, const uint8_t *private, size_t private_len,
                uint8_t mac [ROW_MAC_LEN])
{
    return s_row_mac (key, "cs-objrow-v1", tenant, ref, info, info_len, private, private_len, mac);
}

bool
row_mac_equal (const uint8_t expected [ROW_MAC_LEN], const void *stored, size_t stored_len)
{
    return stored && stored_len == ROW_MAC_LEN && CRYPTO_memcmp (expected, stored, ROW_MAC_LEN) == 0;
}

int
row_mac_idem (const uint8_t key [32], const char *tenant, const uint8_t *id, size_t id_len,
              const uint8_t *result, size_t result_len, int64_t created, uint8_t mac [ROW_MAC_LEN])
{
    s_mac_t self;
    if (!tenant || !id)
        return -1;
    s_start (&self, key, "cs-idem-v1");
    s_lp (&self, tenant, strlen (tenant));
    s_lp (&self, id, id_len);
    s_lp (&self, result, result_len);
    s_u64 (&self, (uint64_t) created);
    return s_finish (&self, mac);
}

int
row_mac_state (const uint8_t key [32], uint64_t schema, uint64_t counter, const uint8_t id [32],
               const uint8_t digest [32], uint8_t mac [ROW_MAC_LEN])
{
    s_mac_t self;
    s_start (&self, key, "cs-state-v1");
    s_u64 (&self, schema);
    s_u64 (&self, counter);
    s_lp (&self, ROW_MAC_INFO_ROWS, strlen (ROW_MAC_INFO_ROWS));
    s_lp (&self, id, 32);
    s_lp (&self, digest, 32);
    return s_finish (&self, mac);
}

int
row_mac_counter (const uint8_t key [32], const uint8_t id [32], uint64_t counter,
                 uint8_t mac [ROW_MAC_LEN])
{
    s_mac_t self;
    s_start (&self, key, "cs-counter-v1");
    s_lp (&self, id, 32);
    s_u64 (&self, counter);
    return s_finish (&self, mac);
}

int
row_mac_changes (const uint8_t key [32], const uint8_t id [32], const char *tenant, uint64_t counter,
                 uint8_t mac [ROW_MAC_LEN])
{
    s_mac_t self;
    s_start (&self, key, "cs-changes-v1");
    s_lp (&self, id, 32);
    s_lp (&self, tenant, strlen (tenant));
    s_u64 (&self, counter);
    return s_finish (&self, mac);
}

int
row_mac_issued (const uint8_t key [32], const uint8_t fingerprint [32], const char *tenant,
                int64_t created, uint8_t mac [ROW_MAC_LEN])
{
    s_mac_t self;
    if (!tenant)
        return -1;
    s_start (&self, key, "cs-issued-v1");
    s_lp (&self, fingerprint, 32);
    s_lp (&self, tenant, strlen (tenant));
    s_u64 (&self, (uint64_t) created);
    return s_finish (&self, mac);
}
