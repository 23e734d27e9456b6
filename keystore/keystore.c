/*  keystore.c — the broker's store of server-held keys and tenants
 *  (keystore.h): the part that does not depend on where rows are stored.
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
#include <time.h>
#include <unistd.h>
#include <czmq.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include "keystore.h"
#include "ks_backend.h"
#include "cs_pin.h"
#include "row_mac.h"
#include "cs_secmem.h"
#include "cs_util.h"

#define SCHEMA_VERSION   4              /* 1: no row MACs, epochs, keyed PIN hashes;
                                           2: no idempotency table; 3: no objects table */
#define OBJ_AAD_PREFIX   "cs-obj-v1"
#define GCM_NONCE_LEN    12             /* bytes, RFC 5116 §5.1 N_MIN = N_MAX */
#define GCM_TAG_LEN      16             /* bytes */
#define TENANT_NAME_MAX  32             /* bytes: it is the token label */
#define KEY_AAD_PREFIX   "cs-key-v1"
#define CHECK_AAD        "cs-master-check-v1"
#define CHECK_PLAINTEXT  "cryptoserver keystore master key check value"

//  The keystore's secrets, kept together in one locked, no-dump page.
typedef struct {
    uint8_t master [KEYSTORE_MASTER_KEY_LEN];
    uint8_t mac_key [32];                   /* HKDF (master, ROW_MAC_INFO_ROWS) */
    uint8_t pin_key [CS_PIN_KEY_LEN];       /* HKDF (master, ROW_MAC_INFO_PINS) */
} s_keys_t;

struct _keystore_t {
    const ks_backend_t *be;     /* where rows go */
    ks_store_t *store;          /* its connection */
    char *location;             /* path or URL as given (keystore_open_again) */
    s_keys_t *keys;             /* the master key and the keys derived from it:
                                   one locked, no-dump page of its own (cs_secmem) */
    int depth;                  /* open key-write transactions: > 0 inside
                                   keystore_idem_begin .. keystore_idem_end */
    bool doomed;                /* a write inside it failed: it rolls back */
    char *idem_tenant;          /* the open idempotent operation's tenant and id */
    uint8_t idem_id [KEYSTORE_IDEM_ID_MAX];
    size_t idem_id_len;
};

static keystore_hook_fn *s_test_hook;   /* keystore_set_test_hook; atomic */

void
keystore_set_test_hook (keystore_hook_fn *hook)
{
    __atomic_store_n (&s_test_hook, hook, __ATOMIC_SEQ_CST);
}

//  Tells the test hook, when there is one, that `call` is about to read.
static void
s_hook (const char *call)
{
    keystore_hook_fn *hook = __atomic_load_n (&s_test_hook, __ATOMIC_SEQ_CST);
    if (hook)
        hook (call);
}

//  What log lines call the database.
static const char *
s_where (keystore_t *self)
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
static uint8_t *
s_seal (const uint8_t *key, const void *aad, size_t aad_len,
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

//  Opens a blob made by s_seal.  Returns the malloc'd plaintext of
//  *len_p bytes (caller wipes and frees; one spare NUL byte follows it), or
//  NULL when the blob is short, was sealed under another key or other
//  associated data, or was changed (the GCM tag does not verify).
static uint8_t *
s_open (const uint8_t *key, const void *aad, size_t aad_len,
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
static uint8_t *
s_row_aad (const char *prefix, const char *tenant, const char *ref, size_t *len_p)
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

/* ---- tenant rows (integrity) ------------------------------------------- */

typedef row_mac_tenant_t s_tenant_row_t;

//  Index of a user type in a tenant row: 0 CKU_USER, 1 CKU_SO, -1 other.
static int
s_role (CK_USER_TYPE user_type)
{
    return user_type == CKU_USER ? 0 : user_type == CKU_SO ? 1 : -1;
}

static void
s_tenant_row_free (s_tenant_row_t *row)
{
    free (row->pin [0]);
    free (row->pin [1]);
    memset (row, 0, sizeof *row);
}

//  Reads tenant row `name` into *row (caller frees with s_tenant_row_free)
//  and, when keys_version_p is not NULL, its keys_version (outside the
//  MAC).  With `verify`, its MAC must match (else an error line naming the
//  tenant).  `lock`: inside a write transaction, the row stays locked
//  until its end.  Returns 1 found, 0 unknown, -1 on a database error,
//  KEYSTORE_DAMAGED when it does not verify.
static int
s_tenant_read (keystore_t *self, const char *name, bool verify, bool lock, s_tenant_row_t *row,
               uint64_t *keys_version_p)
{
    ks_tenant_rec_t rec;
    uint8_t mac [ROW_MAC_LEN];
    memset (row, 0, sizeof *row);
    memset (&rec, 0, sizeof rec);
    s_hook ("tenant_read");
    int rc = self->be->tenant_read (self->store, name, lock, &rec);
    if (rc == 1 && verify
    &&  (row_mac_tenant (self->keys->mac_key, name, &rec.row, mac) != 0
         || !row_mac_equal (mac, rec.mac, rec.mac_len))) {
        zsys_error ("keystore %s: tenant %s: row does not verify (changed without the master "
                    "key): refused", s_where (self), name);
        rc = KEYSTORE_DAMAGED;
    }
    if (rc == 1) {
        *row = rec.row;
        memset (&rec.row, 0, sizeof rec.row);
        if (keys_version_p)
            *keys_version_p = rec.keys_version;
    }
    ks_tenant_rec_free (&rec);
    return rc;
}

//  Writes the PIN columns of tenant row `name` and their MAC.  Call inside
//  a write transaction.  Returns 0, or -1 (also for an unknown tenant).
static int
s_tenant_write (keystore_t *self, const char *name, const s_tenant_row_t *row)
{
    uint8_t mac [ROW_MAC_LEN];
    if (row_mac_tenant (self->keys->mac_key, name, row, mac) != 0)
        return -1;
    return self->be->tenant_update (self->store, name, row, mac) == 1 ? 0 : -1;
}

//  Takes the next value of the database-wide version counter.  Returns
//  it, or 0 on failure.
static uint64_t
s_version_next (keystore_t *self)
{
    uint64_t value = 0;
    return self->be->counter_next (self->store, &value) == 0 ? value : 0;
}

//  A new PIN epoch after `old`: the next value of the database-wide
//  counter, and above `old` whatever that counter holds.  Call inside a
//  write transaction.  Returns 0 on failure.
static int64_t
s_epoch_next (keystore_t *self, int64_t old)
{
    uint64_t next = s_version_next (self);
    if (next == 0 || next >= INT64_MAX)
        return 0;
    return (int64_t) next > old ? (int64_t) next : old + 1;
}

//  The MAC of a key row (row_mac_key) under the keystore's row key.
static int
s_key_mac (keystore_t *self, const char *tenant, const char *ref, const uint8_t *info,
           size_t info_len, const uint8_t *private, size_t private_len, uint8_t mac [ROW_MAC_LEN])
{
    return row_mac_key (self->keys->mac_key, tenant, ref, info, info_len, private, private_len, mac);
}

/* ---- opening ------------------------------------------------------------ */

//  Schema 1 to 2 (SQLite only; the back end added the columns), inside the
//  open's write transaction: gives every tenant fresh epochs, wraps its
//  unkeyed PBKDF2 hashes under the PIN key (cs_pin_wrap: a copy of the
//  file no longer allows guessing them offline), and MACs every tenant and
//  key row as it is now (trust on first use: the upgrade cannot tell an
//  earlier change).  Returns 0, or -1 after a log.
static int
s_upgrade_1_to_2 (keystore_t *self)
{
    char **names = self->be->tenant_list (self->store);
    size_t keys = 0;
    int rc = names ? 0 : -1;
    for (size_t i = 0; rc == 0 && names [i]; i++) {
        s_tenant_row_t row;
        if (s_tenant_read (self, names [i], false, true, &row, NULL) != 1) {
            rc = -1;
            break;
        }
        bool ok = true;
        for (int role = 0; role < 2 && ok; role++) {
            char *wrapped = cs_pin_wrap (row.pin [role], self->keys->pin_key);
            free (row.pin [role]);
            row.pin [role] = wrapped;
            row.epoch [role] = s_epoch_next (self, 0);
            ok = wrapped && row.epoch [role] > 0;
        }
        ok = ok && s_tenant_write (self, names [i], &row) == 0;
        s_tenant_row_free (&row);
        if (!ok) {
            zsys_error ("keystore %s: upgrade: tenant %s has a malformed PIN hash", s_where (self), names [i]);
            rc = -1;
            break;
        }
        ks_key_rec_t *recs = NULL;
        size_t count = 0;
        if (self->be->key_list (self->store, names [i], &recs, &count) != 0) {
            rc = -1;
            break;
        }
        for (size_t k = 0; k < count; k++) {
            uint8_t mac [ROW_MAC_LEN];
            if (rc == 0
            &&  (s_key_mac (self, names [i], recs [k].ref, recs [k].info, recs [k].info_len,
                            recs [k].private, recs [k].private_len, mac) != 0
                 || self->be->key_update (self->store, names [i], recs [k].ref, recs [k].info,
                                          recs [k].info_len, mac) != 1))
                rc = -1;
            ks_key_rec_free (&recs [k]);
        }
        free (recs);
        keys += count;
    }
    if (rc == 0)
        rc = self->be->version_set (self->store, 2);
    if (rc == 0)
        zsys_info ("keystore %s: upgraded from schema 1 to 2 (row MACs, PIN epochs, keyed PIN "
                   "hashes; %zu key rows)", s_where (self), keys);
    for (size_t i = 0; names && names [i]; i++)
        free (names [i]);
    free (names);
    return rc;
}

//  Brings the tables to the current schema; on a new database writes the
//  schema version and the master key check value; a schema 1 file is
//  upgraded.  Returns 0, or -1 after a log (the documented "master key
//  does not match" line included).
static int
s_check_or_init (keystore_t *self)
{
    if (self->be->begin (self->store) != 0)
        return -1;
    uint8_t *value = NULL, *plain = NULL;
    size_t len = 0, plain_len = 0;
    int rc = -1, schema = 0;
    if (self->be->migrate (self->store, &schema) != 0)
        goto out;
    int found = self->be->meta_get (self->store, "master_check", &value, &len);
    if (found < 0)
        goto out;
    if (found == 0) {                           //  a new keystore
        uint8_t *check = s_seal (self->keys->master, CHECK_AAD, strlen (CHECK_AAD),
                                 (const uint8_t *) CHECK_PLAINTEXT, strlen (CHECK_PLAINTEXT), &len);
        rc = check && self->be->version_set (self->store, SCHEMA_VERSION) == 0
                   && self->be->meta_put (self->store, "master_check", check, len) == 0 ? 0 : -1;
        free (check);
        goto out;
    }
    plain = s_open (self->keys->master, CHECK_AAD, strlen (CHECK_AAD), value, len, &plain_len);
    if (!plain || plain_len != strlen (CHECK_PLAINTEXT) || memcmp (plain, CHECK_PLAINTEXT, plain_len)) {
        zsys_error ("keystore %s: master key does not match", s_where (self));
        goto out;
    }
    if (schema >= 1 && schema < SCHEMA_VERSION) {
        //  2 to 3 (the idempotency table) and 3 to 4 (the objects table):
        //  the back end made the tables (migrate); nothing to rewrite.
        rc = schema == 1 ? s_upgrade_1_to_2 (self) : 0;
        if (rc == 0)
            rc = self->be->version_set (self->store, SCHEMA_VERSION);
        if (rc == 0)
            zsys_info ("keystore %s: schema %d upgraded to %d (idempotency and objects tables)",
                       s_where (self), schema, SCHEMA_VERSION);
    }
    else
    if (schema != SCHEMA_VERSION)
        zsys_error ("keystore %s: schema version %d is not %d (made by another version?)",
                    s_where (self), schema, SCHEMA_VERSION);
    else
        rc = 0;
out:
    free (value);
    free (plain);
    if (self->be->end (self->store, rc == 0) != 0)
        rc = -1;
    return rc;
}

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
static const ks_backend_t *
s_backend (const char *location)
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

keystore_t *
keystore_open (const char *location, const uint8_t master_key [KEYSTORE_MASTER_KEY_LEN])
{
    if (!location || !master_key)
        return NULL;
    keystore_t *self = calloc (1, sizeof *self);
    if (!self)
        return NULL;
    self->be = s_backend (location);
    self->location = strdup (location);
    self->keys = cs_secmem_alloc (sizeof *self->keys);
    if (self->keys)
        memcpy (self->keys->master, master_key, KEYSTORE_MASTER_KEY_LEN);
    if (!self->be || !self->location || !self->keys
    ||  row_mac_derive (self->keys->master, ROW_MAC_INFO_ROWS, self->keys->mac_key) != 0
    ||  row_mac_derive (self->keys->master, ROW_MAC_INFO_PINS, self->keys->pin_key) != 0
    ||  !(self->store = self->be->open (location))
    ||  s_check_or_init (self) != 0)
        goto fail;
    return self;
fail:
    keystore_destroy (&self);
    return NULL;
}

keystore_t *
keystore_open_again (keystore_t *self)
{
    return self ? keystore_open (self->location, self->keys->master) : NULL;
}

int
keystore_settle (keystore_t *self)
{
    return self->be->settle (self->store);
}

const char *
keystore_where (keystore_t *self)
{
    return s_where (self);
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

/* ---- tenants ------------------------------------------------------------- */

static bool
s_pin_len_ok (size_t len)
{
    return len >= CS_PIN_MIN_LEN && len <= CS_PIN_MAX_LEN;
}

int
keystore_tenant_add (keystore_t *self, const char *name,
                     const void *user_pin, size_t user_pin_len,
                     const void *so_pin, size_t so_pin_len)
{
    if (!self || !name || !*name || strlen (name) > TENANT_NAME_MAX
    ||  !user_pin || !so_pin || !s_pin_len_ok (user_pin_len) || !s_pin_len_ok (so_pin_len)) {
        zsys_error ("keystore: tenant name must be 1..%d bytes and PINs %d..%d bytes",
                    TENANT_NAME_MAX, CS_PIN_MIN_LEN, CS_PIN_MAX_LEN);
        return -1;
    }
    if (keystore_tenant_exists (self, name)) {
        zsys_error ("keystore %s: tenant %s exists", s_where (self), name);
        return -1;
    }
    ks_tenant_rec_t rec = { .row = { { cs_pin_hash (self->keys->pin_key, user_pin, user_pin_len),
                                       cs_pin_hash (self->keys->pin_key, so_pin, so_pin_len) } } };
    uint8_t mac [ROW_MAC_LEN];
    int rc = -1;
    if (!rec.row.pin [0] || !rec.row.pin [1] || self->be->begin (self->store) != 0)
        goto out;
    rec.keys_version = s_version_next (self);
    rec.row.epoch [0] = s_epoch_next (self, 0);
    rec.row.epoch [1] = s_epoch_next (self, 0);
    if (rec.keys_version && rec.row.epoch [0] && rec.row.epoch [1]
    &&  row_mac_tenant (self->keys->mac_key, name, &rec.row, mac) == 0) {
        rec.mac = mac;
        rec.mac_len = ROW_MAC_LEN;
        rc = self->be->tenant_insert (self->store, name, &rec);
        rec.mac = NULL;
    }
    if (self->be->end (self->store, rc == 0) != 0)
        rc = -1;
out:
    ks_tenant_rec_free (&rec);
    return rc;
}

int
keystore_tenant_remove (keystore_t *self, const char *name)
{
    return self && name && self->be->tenant_delete (self->store, name) == 1 ? 0 : -1;
}

char **
keystore_tenant_list (keystore_t *self)
{
    return self ? self->be->tenant_list (self->store) : NULL;
}

bool
keystore_tenant_exists (keystore_t *self, const char *name)
{
    return self && name && self->be->tenant_exists (self->store, name) == 1;
}

/* ---- PINs ------------------------------------------------------------- */

//  Ends a PIN transaction: COMMIT when `commit` (the row was written), else
//  ROLLBACK.  Returns rv, or CKR_DEVICE_ERROR when the commit fails.
static CK_RV
s_pin_end (keystore_t *self, CK_RV rv, bool commit)
{
    if (self->be->end (self->store, commit) != 0 && commit)
        return CKR_DEVICE_ERROR;
    return rv;
}

CK_RV
keystore_pin_check (keystore_t *self, const char *tenant, CK_USER_TYPE user_type,
                    const void *pin, size_t pin_len, keystore_pin_state_t *state_p)
{
    int role = s_role (user_type);
    s_tenant_row_t row;
    if (state_p)
        *state_p = (keystore_pin_state_t) { 0, 0 };
    if (role < 0)
        return CKR_USER_TYPE_INVALID;
    s_hook ("pin_check");
    //  One write transaction around read, hash and update (the tenant row
    //  locked): two concurrent wrong PINs (two brokers, or the broker and
    //  the administrator) both count, and the row written is the row verified.
    if (!self || !tenant || self->be->begin (self->store) != 0)
        return CKR_DEVICE_ERROR;
    if (s_tenant_read (self, tenant, true, true, &row, NULL) != 1)
        return s_pin_end (self, CKR_DEVICE_ERROR, false);
    CK_RV rv = CKR_PIN_LOCKED;
    bool changed = false;
    if (row.failures [role] < KEYSTORE_PIN_MAX_FAILURES) {
        bool match = cs_pin_verify (row.pin [role], self->keys->pin_key, pin, pin_len);
        char *rehash = match && !cs_pin_current (row.pin [role])
                     ? cs_pin_hash (self->keys->pin_key, pin, pin_len) : NULL;
        changed = !match || row.failures [role] != 0 || rehash;
        if (rehash) {
            free (row.pin [role]);
            row.pin [role] = rehash;
        }
        row.failures [role] = match ? 0 : row.failures [role] + 1;
        bool locks = row.failures [role] >= KEYSTORE_PIN_MAX_FAILURES;
        if (locks)          //  every login ticket of this user type ends
            row.epoch [role] = s_epoch_next (self, row.epoch [role]);
        rv = match ? CKR_OK : CKR_PIN_INCORRECT;
        if ((locks && row.epoch [role] == 0) || (changed && s_tenant_write (self, tenant, &row) != 0))
            rv = CKR_DEVICE_ERROR;
    }
    if (state_p)
        *state_p = (keystore_pin_state_t) { (long) row.failures [role], (uint64_t) row.epoch [role] };
    s_tenant_row_free (&row);
    return s_pin_end (self, rv, changed && rv != CKR_DEVICE_ERROR);
}

CK_RV
keystore_pin_set (keystore_t *self, const char *tenant, CK_USER_TYPE user_type,
                  const void *pin, size_t pin_len, uint64_t *epoch_p)
{
    int role = s_role (user_type);
    s_tenant_row_t row;
    if (role < 0)
        return CKR_USER_TYPE_INVALID;
    if (!pin || !s_pin_len_ok (pin_len))
        return CKR_PIN_LEN_RANGE;
    char *hash = self && tenant ? cs_pin_hash (self->keys->pin_key, pin, pin_len) : NULL;
    if (!hash || self->be->begin (self->store) != 0) {
        free (hash);
        return CKR_DEVICE_ERROR;
    }
    if (s_tenant_read (self, tenant, true, true, &row, NULL) != 1) {
        free (hash);
        return s_pin_end (self, CKR_DEVICE_ERROR, false);
    }
    free (row.pin [role]);
    row.pin [role] = hash;
    row.failures [role] = 0;
    row.epoch [role] = s_epoch_next (self, row.epoch [role]);
    CK_RV rv = row.epoch [role] && s_tenant_write (self, tenant, &row) == 0 ? CKR_OK : CKR_DEVICE_ERROR;
    if (rv == CKR_OK && epoch_p)
        *epoch_p = (uint64_t) row.epoch [role];
    s_tenant_row_free (&row);
    return s_pin_end (self, rv, rv == CKR_OK);
}

int
keystore_pin_epoch (keystore_t *self, const char *tenant, CK_USER_TYPE user_type, uint64_t *epoch_p)
{
    int role = s_role (user_type);
    s_tenant_row_t row;
    if (role < 0 || !self || !tenant || s_tenant_read (self, tenant, true, false, &row, NULL) != 1)
        return -1;
    *epoch_p = (uint64_t) row.epoch [role];
    s_tenant_row_free (&row);
    return 0;
}

//  The PKCS#11 2.40 §5.4 CK_TOKEN_INFO flags for `failures` wrong PINs in a
//  row: COUNT_LOW after one, FINAL_TRY when one try is left, LOCKED at the
//  maximum.
static CK_FLAGS
s_pin_flags (long failures, CK_FLAGS count_low, CK_FLAGS final_try, CK_FLAGS locked)
{
    CK_FLAGS flags = 0;
    if (failures >= 1)
        flags |= count_low;
    if (failures == KEYSTORE_PIN_MAX_FAILURES - 1)
        flags |= final_try;
    if (failures >= KEYSTORE_PIN_MAX_FAILURES)
        flags |= locked;
    return flags;
}

CK_FLAGS
keystore_pin_flags (keystore_t *self, const char *tenant)
{
    keystore_tenant_t state;
    return keystore_tenant_state (self, tenant, &state) == 0 ? keystore_tenant_flags (&state) : 0;
}

CK_FLAGS
keystore_tenant_flags (const keystore_tenant_t *state)
{
    return s_pin_flags (state->failures [0], CKF_USER_PIN_COUNT_LOW, CKF_USER_PIN_FINAL_TRY,
                        CKF_USER_PIN_LOCKED)
         | s_pin_flags (state->failures [1], CKF_SO_PIN_COUNT_LOW, CKF_SO_PIN_FINAL_TRY,
                        CKF_SO_PIN_LOCKED);
}

int
keystore_tenant_state (keystore_t *self, const char *tenant, keystore_tenant_t *state)
{
    s_tenant_row_t row;
    uint64_t keys_version = 0;
    memset (state, 0, sizeof *state);
    int got = self && tenant ? s_tenant_read (self, tenant, true, false, &row, &keys_version) : 0;
    if (got != 1)
        return got == KEYSTORE_DAMAGED ? KEYSTORE_DAMAGED : got < 0 ? KEYSTORE_UNAVAILABLE : -1;
    for (int i = 0; i < 2; i++) {
        state->epoch [i] = (uint64_t) row.epoch [i];
        state->failures [i] = (long) row.failures [i];
    }
    state->keys_version = keys_version;
    s_tenant_row_free (&row);
    return 0;
}

/* ---- keys --------------------------------------------------------------- */

//  Gives the tenant a new keys_version.  Call inside a write transaction.
static int
s_version_bump (keystore_t *self, const char *tenant)
{
    uint64_t version = s_version_next (self);
    return version && self->be->keys_version_set (self->store, tenant, version) == 1 ? 0 : -1;
}

//  Packs a KeyInfo into a malloc'd buffer of *len_p bytes (caller frees).
static uint8_t *
s_info_pack (const Cs__KeyInfo *info, size_t *len_p)
{
    size_t len = cs__key_info__get_packed_size (info);
    uint8_t *packed = malloc (len ? len : 1);
    if (packed)
        *len_p = cs__key_info__pack (info, packed);
    return packed;
}

//  True when key row rec of (tenant, ref) carries its MAC; otherwise logs
//  an error naming it.
static bool
s_key_row_verified (keystore_t *self, const ks_key_rec_t *rec, const char *tenant, const char *ref)
{
    uint8_t mac [ROW_MAC_LEN];
    if (s_key_mac (self, tenant, ref, rec->info, rec->info_len, rec->private, rec->private_len, mac) == 0
    &&  row_mac_equal (mac, rec->mac, rec->mac_len))
        return true;
    zsys_error ("keystore %s: key %s of tenant %s: row does not verify (changed without the "
                "master key): refused", s_where (self), ref, tenant);
    return false;
}

//  Begins a key write: a transaction of its own, or a part of the open
//  idempotent operation's (keystore_idem_begin).  Returns 0 or -1.
static int
s_key_write_begin (keystore_t *self)
{
    if (self->depth > 0) {
        self->depth++;
        return 0;
    }
    if (self->be->begin (self->store) != 0)
        return -1;
    self->depth = 1;
    self->doomed = false;
    return 0;
}

//  Ends a key write: bumps the tenant's version when rc is 0, commits
//  (rc 0) or rolls back; inside an idempotent operation only marks it to
//  roll back when rc is not 0 (keystore_idem_end ends it).  Returns rc,
//  or -1 when the commit fails.
static int
s_key_write_end (keystore_t *self, const char *tenant, int rc)
{
    if (rc == 0)
        rc = s_version_bump (self, tenant);
    if (self->depth > 1) {
        self->depth--;
        self->doomed = self->doomed || rc != 0;
        return rc;
    }
    self->depth = 0;
    if (self->be->end (self->store, rc == 0) != 0 && rc == 0)
        rc = -1;
    return rc;
}

//  True when `ref` is a usable key reference.
static bool
s_ref_ok (const char *ref)
{
    return ref && *ref && strlen (ref) <= 128;
}

int
keystore_key_put (keystore_t *self, const char *tenant, const Cs__KeyInfo *info,
                  const uint8_t *pkcs8, size_t pkcs8_len)
{
    if (!self || !tenant || !info || !s_ref_ok (info->ref) || (pkcs8 && !pkcs8_len))
        return -1;
    int exists = self->be->tenant_exists (self->store, tenant);
    if (exists != 1) {
        if (exists == 0)
            zsys_error ("keystore %s: no tenant %s", s_where (self), tenant);
        return -1;          //  or a database failure, logged
    }
    uint8_t *aad = NULL, mac [ROW_MAC_LEN];
    size_t aad_len = 0;
    ks_key_rec_t rec = { .ref = info->ref };
    int rc = -1;
    if (pkcs8) {
        aad = s_row_aad (KEY_AAD_PREFIX, tenant, info->ref, &aad_len);
        rec.private = aad ? s_seal (self->keys->master, aad, aad_len, pkcs8, pkcs8_len, &rec.private_len)
                          : NULL;
        if (!rec.private)
            goto out;
    }
    rec.info = s_info_pack (info, &rec.info_len);
    if (!rec.info
    ||  s_key_mac (self, tenant, info->ref, rec.info, rec.info_len, rec.private, rec.private_len, mac) != 0
    ||  s_key_write_begin (self) != 0)
        goto out;
    rec.mac = mac;
    rec.mac_len = ROW_MAC_LEN;
    rc = s_key_write_end (self, tenant, self->be->key_insert (self->store, tenant, &rec));
out:
    if (rc != 0)
        zsys_error ("keystore %s: cannot store key %s of tenant %s", s_where (self), info->ref, tenant);
    free (aad);
    free (rec.private);     //  ciphertext: no wipe needed
    free (rec.info);
    return rc;
}

int
keystore_key_update (keystore_t *self, const char *tenant, const Cs__KeyInfo *info)
{
    if (!self || !tenant || !info || !s_ref_ok (info->ref))
        return -1;
    size_t packed_len = 0;
    uint8_t *packed = s_info_pack (info, &packed_len), mac [ROW_MAC_LEN];
    ks_key_rec_t rec;
    memset (&rec, 0, sizeof rec);
    if (!packed || s_key_write_begin (self) != 0) {
        free (packed);
        return -1;
    }
    //  The stored row must verify; the new MAC covers its private blob.
    int rc = self->be->key_read (self->store, tenant, info->ref, true, &rec) == 1 ? 0 : -1;
    if (rc == 0 && !s_key_row_verified (self, &rec, tenant, info->ref))
        rc = KEYSTORE_DAMAGED;
    if (rc == 0
    &&  (s_key_mac (self, tenant, info->ref, packed, packed_len, rec.private, rec.private_len, mac) != 0
         || self->be->key_update (self->store, tenant, info->ref, packed, packed_len, mac) != 1))
        rc = -1;
    rc = s_key_write_end (self, tenant, rc);
    ks_key_rec_free (&rec);
    free (packed);
    return rc;
}

int
keystore_key_delete (keystore_t *self, const char *tenant, const char *ref)
{
    if (!self || !tenant || !s_ref_ok (ref) || s_key_write_begin (self) != 0)
        return -1;
    int rc = self->be->key_delete (self->store, tenant, ref) == 1 ? 0 : -1;
    return s_key_write_end (self, tenant, rc);
}

//  Unpacks a stored description (caller frees with
//  cs__key_info__free_unpacked), or NULL after a log when it is damaged.
static Cs__KeyInfo *
s_info_unpack (keystore_t *self, const ks_key_rec_t *rec)
{
    Cs__KeyInfo *info = cs__key_info__unpack (NULL, rec->info_len, rec->info);
    if (!info)
        zsys_error ("keystore %s: a key description does not decode", s_where (self));
    return info;
}

//  Decrypts the private blob of rec into *pkcs8_p / *len_p (NULL and 0
//  when the row has none).  Returns 0, or -1 after a log when it does not
//  decrypt.
static int
s_private_open (keystore_t *self, const ks_key_rec_t *rec, const char *tenant, const char *ref,
                uint8_t **pkcs8_p, size_t *len_p)
{
    *pkcs8_p = NULL;
    *len_p = 0;
    if (!rec->private)
        return 0;
    size_t aad_len = 0;
    uint8_t *aad = s_row_aad (KEY_AAD_PREFIX, tenant, ref, &aad_len);
    if (aad)
        *pkcs8_p = s_open (self->keys->master, aad, aad_len, rec->private, rec->private_len, len_p);
    free (aad);
    if (*pkcs8_p)
        return 0;
    zsys_error ("keystore %s: key %s of tenant %s does not decrypt (changed, moved, "
                "or another master key)", s_where (self), ref, tenant);
    return -1;
}

int
keystore_key_get (keystore_t *self, const char *tenant, const char *ref,
                  Cs__KeyInfo **info_p, uint8_t **pkcs8_p, size_t *pkcs8_len_p)
{
    if (!self || !tenant || !s_ref_ok (ref) || !info_p)
        return -1;
    s_hook ("key_get");
    ks_key_rec_t rec;
    memset (&rec, 0, sizeof rec);
    Cs__KeyInfo *info = NULL;
    int rc = -1;
    int got = self->be->key_read (self->store, tenant, ref, false, &rec);
    if (got != 1) {
        rc = got < 0 ? KEYSTORE_UNAVAILABLE : -1;
        goto out;
    }
    rc = KEYSTORE_DAMAGED;
    if (!s_key_row_verified (self, &rec, tenant, ref) || !(info = s_info_unpack (self, &rec)))
        goto out;
    if (pkcs8_p && s_private_open (self, &rec, tenant, ref, pkcs8_p, pkcs8_len_p) != 0)
        goto out;
    *info_p = info;
    info = NULL;
    rc = 0;
out:
    if (info)
        cs__key_info__free_unpacked (info, NULL);
    ks_key_rec_free (&rec);
    return rc;
}

/* ---- idempotent operations --------------------------------------------- */

//  Reads the idempotency row (tenant, id) of self's open operation and
//  verifies its MAC.  Returns 1 (*result_p malloc'd), 0 absent, -1, or
//  KEYSTORE_DAMAGED after an error log line.
static int
s_idem_read (keystore_t *self, uint8_t **result_p, size_t *len_p)
{
    ks_idem_rec_t rec;
    uint8_t mac [ROW_MAC_LEN];
    int got = self->be->idem_read (self->store, self->idem_tenant, self->idem_id, self->idem_id_len, &rec);
    if (got != 1)
        return got;
    if (row_mac_idem (self->keys->mac_key, self->idem_tenant, self->idem_id, self->idem_id_len,
                      rec.result, rec.result_len, rec.created, mac) != 0
    ||  !row_mac_equal (mac, rec.mac, rec.mac_len)) {
        zsys_error ("keystore %s: an idempotency row of tenant %s does not verify (changed without "
                    "the master key): refused", s_where (self), self->idem_tenant);
        ks_idem_rec_free (&rec);
        return KEYSTORE_DAMAGED;
    }
    *result_p = rec.result;
    *len_p = rec.result_len;
    rec.result = NULL;
    ks_idem_rec_free (&rec);
    return 1;
}

int
keystore_idem_begin (keystore_t *self, const char *tenant, const uint8_t *id, size_t id_len,
                     uint8_t **result_p, size_t *result_len_p)
{
    if (!self || !tenant || !id || id_len == 0 || id_len > KEYSTORE_IDEM_ID_MAX || !result_p
    ||  !result_len_p || self->depth > 0)
        return -1;
    *result_p = NULL;
    *result_len_p = 0;
    free (self->idem_tenant);
    self->idem_tenant = strdup (tenant);
    memcpy (self->idem_id, id, id_len);
    self->idem_id_len = id_len;
    if (!self->idem_tenant || self->be->begin (self->store) != 0)
        return -1;
    int got = s_idem_read (self, result_p, result_len_p);
    if (got != 0) {
        self->be->end (self->store, false);
        return got;
    }
    self->depth = 1;
    self->doomed = false;
    return 0;
}

int
keystore_idem_end (keystore_t *self, const uint8_t *result, size_t result_len,
                   uint8_t **recorded_p, size_t *recorded_len_p)
{
    if (!self || self->depth != 1)
        return -1;
    self->depth = 0;
    if (!result || self->doomed) {
        self->be->end (self->store, false);
        return result ? -1 : 0;
    }
    ks_idem_rec_t rec = { .result = (uint8_t *) result, .result_len = result_len,
                          .created = (int64_t) time (NULL) };
    uint8_t mac [ROW_MAC_LEN];
    rec.mac = mac;
    rec.mac_len = ROW_MAC_LEN;
    int rc = row_mac_idem (self->keys->mac_key, self->idem_tenant, self->idem_id, self->idem_id_len,
                           result, result_len, rec.created, mac);
    int inserted = rc == 0 ? self->be->idem_insert (self->store, self->idem_tenant, self->idem_id,
                                                    self->idem_id_len, &rec) : -1;
    if (inserted == 1 && self->be->idem_expire (self->store, rec.created - KEYSTORE_IDEM_TTL_S) < 0)
        inserted = -1;
    if (self->be->end (self->store, inserted == 1) != 0 || inserted < 0) {
        if (inserted == 1)
            zsys_error ("keystore %s: cannot record an idempotent operation of tenant %s",
                        s_where (self), self->idem_tenant);
        return -1;
    }
    if (inserted == 1)
        return 0;
    //  Another connection recorded the id first (its transaction committed
    //  while this one ran): this one rolled back; the first one's result stands.
    if (!recorded_p || !recorded_len_p)
        return 1;
    int got = s_idem_read (self, recorded_p, recorded_len_p);
    return got == 1 ? 1 : got == 0 ? -1 : got;
}

int
keystore_idem_expire (keystore_t *self, int64_t now)
{
    if (!self || self->depth > 0)
        return -1;
    return self->be->idem_expire (self->store, now - KEYSTORE_IDEM_TTL_S);
}

int
keystore_key_list (keystore_t *self, const char *tenant,
                   Cs__KeyInfo ***infos_p, size_t *count_p)
{
    if (!self || !tenant || !infos_p || !count_p)
        return -1;
    s_hook ("key_list");
    ks_key_rec_t *recs = NULL;
    size_t n = 0, count = 0;
    if (self->be->key_list (self->store, tenant, &recs, &n) != 0)
        return -1;
    Cs__KeyInfo **infos = malloc ((n ? n : 1) * sizeof *infos);
    for (size_t i = 0; i < n; i++) {
        //  A row that does not verify or decode is left out (logged).
        if (infos && s_key_row_verified (self, &recs [i], tenant, recs [i].ref)
        &&  (infos [count] = s_info_unpack (self, &recs [i])))
            count++;
        ks_key_rec_free (&recs [i]);
    }
    free (recs);
    if (!infos)
        return -1;
    *infos_p = infos;
    *count_p = count;
    return 0;
}

uint64_t
keystore_keys_version (keystore_t *self, const char *tenant)
{
    uint64_t version = 0;
    if (!self || !tenant)
        return 0;
    s_hook ("keys_version");
    return self->be->keys_version_get (self->store, tenant, &version) == 1 ? version : 0;
}

void
keystore_ref_new (char ref [36])
{
    uint8_t random [16];
    if (RAND_bytes (random, sizeof random) != 1) {
        //  Practically never; refs must still differ, so fall back to
        //  time and counter rather than returning a constant.
        static uint64_t counter;
        uint64_t now = (uint64_t) zclock_time (), next = ++counter;
        memcpy (random, &now, 8);
        memcpy (random + 8, &next, 8);
    }
    memcpy (ref, "ks:", 3);
    cs_hex_encode (random, sizeof random, ref + 3);
}

/* ---- certificates and data objects (schema 4) ------------------------- */

static uint8_t *
s_obj_pack (const Cs__ObjectInfo *info, size_t *len_p)
{
    size_t len = cs__object_info__get_packed_size (info);
    uint8_t *packed = malloc (len ? len : 1);
    if (packed)
        *len_p = cs__object_info__pack (info, packed);
    return packed;
}

int
keystore_object_put (keystore_t *self, const char *tenant, const Cs__ObjectInfo *info)
{
    if (!self || !tenant || !info || !s_ref_ok (info->ref))
        return -1;
    int exists = self->be->tenant_exists (self->store, tenant);
    if (exists != 1) {
        if (exists == 0)
            zsys_error ("keystore %s: no tenant %s", s_where (self), tenant);
        return -1;
    }
    uint8_t *aad = NULL, *whole = NULL, mac [ROW_MAC_LEN];
    size_t aad_len = 0, whole_len = 0;
    ks_key_rec_t rec = { .ref = info->ref };
    int rc = -1;
    if (info->is_private) {
        //  Only what the broker needs to filter is in the clear.
        Cs__ObjectInfo stub = CS__OBJECT_INFO__INIT;
        stub.ref = info->ref;
        stub.object_class = info->object_class;
        stub.is_private = true;
        whole = s_obj_pack (info, &whole_len);
        aad = whole ? s_row_aad (OBJ_AAD_PREFIX, tenant, info->ref, &aad_len) : NULL;
        rec.private = aad ? s_seal (self->keys->master, aad, aad_len, whole, whole_len, &rec.private_len) : NULL;
        rec.info = rec.private ? s_obj_pack (&stub, &rec.info_len) : NULL;
    }
    else
        rec.info = s_obj_pack (info, &rec.info_len);
    if (!rec.info
    ||  row_mac_object (self->keys->mac_key, tenant, info->ref, rec.info, rec.info_len, rec.private,
                        rec.private_len, mac) != 0
    ||  self->be->begin (self->store) != 0)
        goto out;
    rec.mac = mac;
    rec.mac_len = ROW_MAC_LEN;
    rc = self->be->object_put (self->store, tenant, &rec);
    if (self->be->end (self->store, rc == 0) != 0)
        rc = -1;
out:
    if (rc != 0)
        zsys_error ("keystore %s: cannot store object %s of tenant %s", s_where (self), info->ref, tenant);
    if (whole)
        OPENSSL_cleanse (whole, whole_len);
    free (whole);
    free (aad);
    free (rec.private);
    free (rec.info);
    return rc;
}

//  The object of a row: verified, decoded, opened when sealed.  NULL after
//  an error log line naming it.
static Cs__ObjectInfo *
s_obj_from_row (keystore_t *self, const char *tenant, const ks_key_rec_t *rec)
{
    uint8_t mac [ROW_MAC_LEN], *aad = NULL, *plain = NULL;
    size_t aad_len = 0, plain_len = 0;
    Cs__ObjectInfo *info = NULL;
    const char *why = "row does not verify (changed without the master key)";
    if (row_mac_object (self->keys->mac_key, tenant, rec->ref, rec->info, rec->info_len, rec->private,
                        rec->private_len, mac) == 0
    &&  row_mac_equal (mac, rec->mac, rec->mac_len)) {
        why = "does not decode or decrypt";
        if (!rec->private)
            info = cs__object_info__unpack (NULL, rec->info_len, rec->info);
        else
        if ((aad = s_row_aad (OBJ_AAD_PREFIX, tenant, rec->ref, &aad_len))
        &&  (plain = s_open (self->keys->master, aad, aad_len, rec->private, rec->private_len, &plain_len)))
            info = cs__object_info__unpack (NULL, plain_len, plain);
        if (info && (!info->ref || strcmp (info->ref, rec->ref) != 0)) {
            cs__object_info__free_unpacked (info, NULL);
            info = NULL;
        }
    }
    if (plain)
        OPENSSL_cleanse (plain, plain_len);
    free (plain);
    free (aad);
    if (!info)
        zsys_error ("keystore %s: object %s of tenant %s: %s: refused", s_where (self), rec->ref, tenant, why);
    return info;
}

int
keystore_object_get (keystore_t *self, const char *tenant, const char *ref, Cs__ObjectInfo **info_p)
{
    if (!self || !tenant || !s_ref_ok (ref) || !info_p)
        return -1;
    ks_key_rec_t rec;
    int got = self->be->object_read (self->store, tenant, ref, &rec);
    if (got != 1)
        return got < 0 ? KEYSTORE_UNAVAILABLE : -1;
    *info_p = s_obj_from_row (self, tenant, &rec);
    ks_key_rec_free (&rec);
    return *info_p ? 0 : KEYSTORE_DAMAGED;
}

int
keystore_object_list (keystore_t *self, const char *tenant, Cs__ObjectInfo ***infos_p, size_t *count_p)
{
    if (!self || !tenant || !infos_p || !count_p)
        return -1;
    ks_key_rec_t *recs = NULL;
    size_t n = 0, count = 0;
    if (self->be->object_list (self->store, tenant, &recs, &n) != 0)
        return -1;
    Cs__ObjectInfo **infos = malloc ((n ? n : 1) * sizeof *infos);
    for (size_t i = 0; i < n; i++) {
        if (infos && (infos [count] = s_obj_from_row (self, tenant, &recs [i])))
            count++;
        ks_key_rec_free (&recs [i]);
    }
    free (recs);
    if (!infos)
        return -1;
    *infos_p = infos;
    *count_p = count;
    return 0;
}

int
keystore_object_delete (keystore_t *self, const char *tenant, const char *ref)
{
    if (!self || !tenant || !s_ref_ok (ref) || self->be->begin (self->store) != 0)
        return -1;
    int rc = self->be->object_delete (self->store, tenant, ref) == 1 ? 0 : -1;
    if (self->be->end (self->store, rc == 0) != 0)
        rc = -1;
    return rc;
}

void
keystore_object_ref_new (char ref [37])
{
    char key_ref [36];
    keystore_ref_new (key_ref);             //  "ks:" + 32 hex
    memcpy (ref, "obj:", 4);
    memcpy (ref + 4, key_ref + 3, 33);
}

#ifndef HAVE_LIBPQ
/*  Without PostgreSQL there are no listeners (keystore_listener_new gives
 *  NULL): these are never reached with one.  */
uint64_t ks_listener_changes (keystore_listener_t *self) { return 0; }
bool ks_listener_connected (keystore_listener_t *self) { return false; }
void ks_listener_destroy (keystore_listener_t **self_p) { if (self_p) *self_p = NULL; }
#endif
