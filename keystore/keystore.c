/*  keystore.c — the broker's store of server-held keys and tenants
 *  (keystore.h): the part that does not depend on where rows are stored.
 *  This file opens and closes the keystore (its back end, settle, where,
 *  listeners), seals and opens blobs, reads and creates master key files,
 *  and holds the test hook; the schema checks and the operator's upgrade
 *  are in ks_schema.c; tenants and
 *  PINs are in ks_tenant.c, keys and idempotent operations in ks_keys.c,
 *  certificates and data objects in ks_objects.c (keystore_int.h).
 *
 *  Private keys are sealed with AES-256-GCM (NIST SP 800-38D, RFC 5116
 *  AEAD_AES_256_GCM) under the master key: blob = nonce (12) || ciphertext
 *  || tag (16), associated data "cs-key-v1" || tenant || NUL || ref.  Tenant
 *  and key rows carry an HMAC-SHA256 (row_mac.h) under a key derived from
 *  the master key; PIN hashes are keyed with another derived key (cs_pin.h).
 *  Rows go to a storage back end (ks_backend.h: ks_sqlite.c, ks_pg.c) only
 *  in that form.  man cryptoserver-keystore(5) is the user-facing
 *  description.
 */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <czmq.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include "keystore_int.h"
#include "cs_secmem.h"
#include "cs_util.h"

#define GCM_NONCE_LEN    12             /* bytes, RFC 5116 §5.1 N_MIN = N_MAX */
#define GCM_TAG_LEN      16             /* bytes */

static keystore_hook_fn *s_test_hook;   /* keystore_set_test_hook; atomic */

void
keystore_set_test_hook (keystore_hook_fn *hook)
{
    __atomic_store_n (&s_test_hook, hook, __ATOMIC_SEQ_CST);
}

//  Tells the test hook, when there is one, that `call` is about to read.
void
ks_hook (const char *call)
{
    keystore_hook_fn *hook = __atomic_load_n (&s_test_hook, __ATOMIC_SEQ_CST);
    if (hook)
        hook (call);
}

//  What log lines call the database.
const char *
ks_where (keystore_t *self)
{
    return self->be->where (self->store);
}

/* ---- records ------------------------------------------------------------ */

uint8_t *
ks_dup (const void *data, size_t len)
{
    uint8_t *copy = malloc (len + 1);
    if (copy) {
        if (len)
            memcpy (copy, data, len);
        copy [len] = 0;
    }
    return copy;
}

void
ks_tenant_rec_free (ks_tenant_rec_t *rec)
{
    free (rec->row.pin [0]);
    free (rec->row.pin [1]);
    free (rec->mac);
    memset (rec, 0, sizeof *rec);
}

void
ks_idem_rec_free (ks_idem_rec_t *rec)
{
    free (rec->result);
    free (rec->mac);
    memset (rec, 0, sizeof *rec);
}

void
ks_key_rec_free (ks_key_rec_t *rec)
{
    free (rec->ref);
    free (rec->info);
    free (rec->private);
    free (rec->mac);
    memset (rec, 0, sizeof *rec);
}

/* ---- AES-256-GCM (RFC 5116) ------------------------------------------ */

//  Seals plain (len bytes) with `key` and associated data aad (aad_len
//  bytes).  Returns a malloc'd blob nonce || ciphertext || tag of
//  *blob_len_p bytes (caller frees), or NULL on failure.
uint8_t *
ks_seal (const uint8_t *key, const void *aad, size_t aad_len,
         const uint8_t *plain, size_t len, size_t *blob_len_p)
{
    size_t blob_len = GCM_NONCE_LEN + len + GCM_TAG_LEN;
    uint8_t *blob = malloc (blob_len);
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new ();
    int out_len = 0, final_len = 0;
    bool ok = blob && ctx && len <= INT_MAX && aad_len <= INT_MAX
           && RAND_bytes (blob, GCM_NONCE_LEN) == 1
           && EVP_EncryptInit_ex (ctx, EVP_aes_256_gcm (), NULL, key, blob) == 1
           && EVP_EncryptUpdate (ctx, NULL, &out_len, aad, (int) aad_len) == 1
           && EVP_EncryptUpdate (ctx, blob + GCM_NONCE_LEN, &out_len, plain, (int) len) == 1
           && EVP_EncryptFinal_ex (ctx, blob + GCM_NONCE_LEN + out_len, &final_len) == 1
           && (size_t) (out_len + final_len) == len
           && EVP_CIPHER_CTX_ctrl (ctx, EVP_CTRL_GCM_GET_TAG, GCM_TAG_LEN,
                                   blob + GCM_NONCE_LEN + len) == 1;
    EVP_CIPHER_CTX_free (ctx);
    if (!ok) {
        if (blob)
            OPENSSL_cleanse (blob, blob_len);
        free (blob);
        return NULL;
    }
    *blob_len_p = blob_len;
    return blob;
}

//  Opens a blob made by ks_seal.  Returns the malloc'd plaintext of
//  *len_p bytes (caller wipes and frees; one spare NUL byte follows it), or
//  NULL when the blob is short, was sealed under another key or other
//  associated data, or was changed (the GCM tag does not verify).
uint8_t *
ks_open (const uint8_t *key, const void *aad, size_t aad_len,
         const uint8_t *blob, size_t blob_len, size_t *len_p)
{
    if (blob_len < GCM_NONCE_LEN + GCM_TAG_LEN || blob_len > INT_MAX || aad_len > INT_MAX)
        return NULL;
    size_t len = blob_len - GCM_NONCE_LEN - GCM_TAG_LEN;
    uint8_t *plain = malloc (len + 1);
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new ();
    int out_len = 0, final_len = 0;
    bool ok = plain && ctx
           && EVP_DecryptInit_ex (ctx, EVP_aes_256_gcm (), NULL, key, blob) == 1
           && EVP_DecryptUpdate (ctx, NULL, &out_len, aad, (int) aad_len) == 1
           && EVP_DecryptUpdate (ctx, plain, &out_len, blob + GCM_NONCE_LEN, (int) len) == 1
           && EVP_CIPHER_CTX_ctrl (ctx, EVP_CTRL_GCM_SET_TAG, GCM_TAG_LEN,
                                   (void *) (blob + GCM_NONCE_LEN + len)) == 1
           && EVP_DecryptFinal_ex (ctx, plain + out_len, &final_len) == 1;
    EVP_CIPHER_CTX_free (ctx);
    if (!ok) {
        if (plain)
            OPENSSL_cleanse (plain, len + 1);
        free (plain);
        return NULL;
    }
    plain [len] = 0;
    *len_p = len;
    return plain;
}

//  Builds the associated data of a row sealed under the master key:
//  prefix ("cs-key-v1" for keys, "cs-obj-v1" for objects) || tenant || NUL
//  || ref, into a malloc'd buffer of *len_p bytes (caller frees).
uint8_t *
ks_row_aad (const char *prefix, const char *tenant, const char *ref, size_t *len_p)
{
    size_t plen = strlen (prefix), tlen = strlen (tenant), rlen = strlen (ref);
    uint8_t *aad = malloc (plen + tlen + 1 + rlen);
    if (!aad)
        return NULL;
    memcpy (aad, prefix, plen);
    memcpy (aad + plen, tenant, tlen);
    aad [plen + tlen] = 0;
    memcpy (aad + plen + tlen + 1, ref, rlen);
    *len_p = plen + tlen + 1 + rlen;
    return aad;
}

/* ---- opening ------------------------------------------------------------ */

bool
keystore_is_url (const char *location)
{
    return location && (strncmp (location, "postgresql:", 11) == 0 || strncmp (location, "postgres:", 9) == 0);
}

char *
keystore_location_name (const char *location)
{
    if (!location)
        return NULL;
    const char *scheme = strstr (location, "://");
    const char *at = scheme ? strchr (scheme + 3, '@') : NULL;
    const char *colon = scheme ? strchr (scheme + 3, ':') : NULL;
    char *out = NULL;
    if (keystore_is_url (location) && at && colon && colon < at) {
        if (asprintf (&out, "%.*s:***%s", (int) (colon - location), location, at) < 0)
            out = NULL;
    }
    else
        out = strdup (location);
    char *password = out && keystore_is_url (out) ? strstr (out, "password=") : NULL;
    if (password)                       //  in the query: the rest goes too
        strcpy (password + 9, "***");
    return out;
}

//  The back end of a location: PostgreSQL for a postgresql:// URL, SQLite
//  for a path; NULL (logged) for a URL this build cannot open.
const ks_backend_t *
ks_backend_for (const char *location)
{
    if (!keystore_is_url (location))
        return &ks_sqlite_backend;
#ifdef HAVE_LIBPQ
    return &ks_pg_backend;
#else
    zsys_error ("keystore: %.*s: this build has no PostgreSQL support (configure --with-postgresql)",
                (int) strcspn (location, "@?"), location);
    return NULL;
#endif
}

//  Opens the keystore at location in `mode` (ks_open_mode_t).
static keystore_t *
s_open (const char *location, const uint8_t master_key [KEYSTORE_MASTER_KEY_LEN],
        const char *counter_path, ks_open_mode_t mode)
{
    if (!location || !master_key)
        return NULL;
    keystore_t *self = calloc (1, sizeof *self);
    if (!self)
        return NULL;
    self->be = ks_backend_for (location);
    self->location = strdup (location);
    if (counter_path && !(self->counter_path = strdup (counter_path)))
        goto fail;
    self->keys = cs_secmem_alloc (sizeof *self->keys);
    if (self->keys)
        memcpy (self->keys->master, master_key, KEYSTORE_MASTER_KEY_LEN);
    if (!self->be || !self->location || !self->keys
    ||  ks_keys_derive (self->keys, self->keys->master) != 0
    ||  !(self->store = self->be->open (location))
    ||  ks_schema_open (self, mode) != 0)
        goto fail;
    return self;
fail:
    keystore_destroy (&self);
    return NULL;
}

keystore_t *
keystore_open (const char *location, const uint8_t master_key [KEYSTORE_MASTER_KEY_LEN])
{
    return s_open (location, master_key, NULL, KS_OPEN_NORMAL);
}

keystore_t *
keystore_open_counted (const char *location, const uint8_t master_key [KEYSTORE_MASTER_KEY_LEN],
                       const char *counter_path)
{
    return s_open (location, master_key, counter_path, KS_OPEN_NORMAL);
}

int
keystore_upgrade (const char *location, const uint8_t master_key [KEYSTORE_MASTER_KEY_LEN],
                  const char *counter_path)
{
    keystore_t *self = s_open (location, master_key, counter_path, KS_OPEN_UPGRADE);
    int rc = !self ? -1 : self->upgraded_from ? self->upgraded_from : 0;
    keystore_destroy (&self);
    return rc;
}

int
keystore_accept_rollback (const char *location, const uint8_t master_key [KEYSTORE_MASTER_KEY_LEN],
                          const char *counter_path, uint64_t *counter_p)
{
    keystore_t *self = s_open (location, master_key, counter_path, KS_OPEN_ACCEPT_ROLLBACK);
    if (self && counter_p)
        *counter_p = self->counter;
    int rc = self ? 0 : -1;
    keystore_destroy (&self);
    return rc;
}

char *
keystore_counter_path (const char *beside)
{
    const char *slash = beside ? strrchr (beside, '/') : NULL;
    char *path = NULL;
    if (!beside)
        return NULL;
    if (asprintf (&path, "%.*s%s", slash ? (int) (slash - beside + 1) : 0, beside,
                  KEYSTORE_COUNTER_FILE) < 0)
        path = NULL;
    return path;
}

keystore_t *
keystore_open_again (keystore_t *self)
{
    return self ? s_open (self->location, self->keys->master, self->counter_path, KS_OPEN_NORMAL) : NULL;
}

int
keystore_settle (keystore_t *self)
{
    return self->be->settle (self->store);
}

const char *
keystore_where (keystore_t *self)
{
    return ks_where (self);
}

keystore_listener_t *
keystore_listener_new (keystore_t *self)
{
    return self && self->be->listen ? self->be->listen (self->store) : NULL;
}

uint64_t
keystore_listener_changes (keystore_listener_t *self)
{
    return ks_listener_changes (self);
}

uint64_t
keystore_listener_foreign (keystore_listener_t *self)
{
    return ks_listener_foreign (self);
}

bool
keystore_listener_connected (keystore_listener_t *self)
{
    return ks_listener_connected (self);
}

void
keystore_listener_destroy (keystore_listener_t **self_p)
{
    ks_listener_destroy (self_p);
}

void
keystore_destroy (keystore_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    keystore_t *self = *self_p;
    if (self->store)
        self->be->close (&self->store);
    free (self->idem_tenant);
    ks_changes_reset (self, false);
    keystore_changes_free (&self->own, self->n_own);
    free (self->counter_path);
    if (self->keys)
        cs_secmem_free (self->keys, sizeof *self->keys);
    free (self->location);
    free (self);
    *self_p = NULL;
}

/* ---- master key files ---------------------------------------------------- */

int
keystore_master_key_read (const char *path, uint8_t key [KEYSTORE_MASTER_KEY_LEN])
{
    char why [512];
    if (cs_file_check_private (path, why, sizeof why)) {
        zsys_error ("master key: %s", why);
        return -1;
    }
    int got = cs_file_read_hex (path, key, KEYSTORE_MASTER_KEY_LEN);
    if (got == -1)
        zsys_error ("master key %s: cannot read", path);
    else
    if (got == -2)
        zsys_error ("master key %s: not %d hex digits", path, 2 * KEYSTORE_MASTER_KEY_LEN);
    return got == 0 ? 0 : -1;
}

//  Writes all of data to fd.  Returns 0 or -1.
static int
s_write_all (int fd, const char *data, size_t len)
{
    while (len > 0) {
        ssize_t n = write (fd, data, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        data += n;
        len -= (size_t) n;
    }
    return 0;
}

int
keystore_master_key_create (const char *path, uint8_t key [KEYSTORE_MASTER_KEY_LEN])
{
    char hex [2 * KEYSTORE_MASTER_KEY_LEN + 2];
    int rc = -1;
    int fd = open (path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        zsys_error ("master key %s: cannot create: %s", path, strerror (errno));
        return -1;
    }
    if (RAND_bytes (key, KEYSTORE_MASTER_KEY_LEN) != 1)
        zsys_error ("master key %s: no random bytes", path);
    else {
        cs_hex_encode (key, KEYSTORE_MASTER_KEY_LEN, hex);
        strcat (hex, "\n");
        if (fchmod (fd, 0600) == 0 && s_write_all (fd, hex, strlen (hex)) == 0 && fsync (fd) == 0)
            rc = 0;
        else
            zsys_error ("master key %s: write failed: %s", path, strerror (errno));
    }
    if (close (fd) != 0)
        rc = -1;
    OPENSSL_cleanse (hex, sizeof hex);
    if (rc != 0) {
        OPENSSL_cleanse (key, KEYSTORE_MASTER_KEY_LEN);
        unlink (path);
    }
    return rc;
}

#ifndef HAVE_LIBPQ
/*  Without PostgreSQL there are no listeners (keystore_listener_new gives
 *  NULL): these are never reached with one.  */
uint64_t ks_listener_changes (keystore_listener_t *self) { return 0; }
uint64_t ks_listener_foreign (keystore_listener_t *self) { return 0; }
bool ks_listener_connected (keystore_listener_t *self) { return false; }
void ks_listener_destroy (keystore_listener_t **self_p) { if (self_p) *self_p = NULL; }
#endif
