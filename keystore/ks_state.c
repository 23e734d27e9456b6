/*  ks_state.c — the keystore's authenticated state (schema 5, issue 19):
 *  one MAC'd meta record, 'state', that binds the schema version, the row
 *  MAC format and the master key check value to a monotonic counter, and
 *  the sealed counter file beside the master key that notices a database
 *  put back to an older copy.  cryptoserver-keystore(5) "Schema" and
 *  "Rollback" describe them; docs/CONTRACTS.md "Keystore rows" says what a
 *  writer of the database can and cannot do.
 *
 *  The record: meta 'state' = "cs-state-v1 SCHEMA COUNTER MAC" (decimal,
 *  MAC in hex: row_mac_state under HKDF (master, ROW_MAC_INFO_STATE)).
 *  Every committing write transaction raises COUNTER by one (ks_end); reads
 *  write nothing.  The file: "cs-counter-v1 COUNTER MAC\n" (row_mac_counter,
 *  bound to the keystore's identity), only ever raised, except by an
 *  operator's accept-rollback.  A keystore whose counter is below the
 *  file's was put back to an older copy: it is refused.
 */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>
#include <assert.h>
#include <czmq.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include "keystore_int.h"
#include "cs_util.h"

#define STATE_PREFIX    "cs-state-v1"
#define COUNTER_PREFIX  "cs-counter-v1"

/*  What each schema added that its rows rely on: a keystore whose stored
 *  schema says N must have all of those up to N, and one that has any of
 *  those of N says "at least N".  */
static const struct {
    int schema;
    const char *table, *column;         /* column NULL: the table itself */
} s_artefacts [] = {
    { 1, "meta", NULL },        { 1, "tenants", NULL },     { 1, "keys", NULL },
    { 2, "tenants", "user_epoch" }, { 2, "tenants", "so_epoch" },
    { 2, "tenants", "mac" },    { 2, "keys", "mac" },
    { 3, "idempotency", NULL }, { 3, "idempotency", "mac" },
    { 4, "objects", NULL },     { 4, "objects", "mac" },
    { 5, "issued", NULL },      { 5, "issued", "mac" },
    { 6, "audit", NULL },       { 6, "audit", "sig" },
};

/*  One writer of counter files at a time in this process (the slow
 *  pool's connections); flock on the directory between processes.  */
static pthread_mutex_t s_file_lock = PTHREAD_MUTEX_INITIALIZER;

int
ks_schema_inspect (keystore_t *self, int want, int *stored_p, int *shows_p, char *missing, size_t size)
{
    *shows_p = 0;
    missing [0] = 0;
    if (self->be->version_get (self->store, stored_p) != 0)
        return -1;
    for (size_t i = 0; i < sizeof s_artefacts / sizeof s_artefacts [0]; i++) {
        int has = self->be->has (self->store, s_artefacts [i].table, s_artefacts [i].column);
        if (has < 0)
            return -1;
        if (has && s_artefacts [i].schema > *shows_p)
            *shows_p = s_artefacts [i].schema;
        if (!has && s_artefacts [i].schema <= want && !missing [0])
            snprintf (missing, size, s_artefacts [i].column ? "column %s.%s" : "table %s",
                      s_artefacts [i].table, s_artefacts [i].column);
    }
    return 0;
}

/* ---- the state record --------------------------------------------------- */

int
ks_state_get (keystore_t *self, uint64_t *schema_p, uint64_t *counter_p, uint8_t digest [32])
{
    uint8_t *value = NULL, mac [ROW_MAC_LEN];
    size_t len = 0;
    char hex [2 * ROW_MAC_LEN + 1], stored [2 * ROW_MAC_LEN + 2] = "", rows [2 * 32 + 2] = "";
    int got = self->be->meta_get (self->store, "state", &value, &len);
    if (got != 1)
        return got;
    uint64_t schema = 0, counter = 0;
    bool ok = sscanf ((char *) value, STATE_PREFIX " %" SCNu64 " %" SCNu64 " %65s %65s", &schema, &counter,
                      rows, stored) == 4
           && cs_hex_decode (rows, digest, 32) == 32
           && row_mac_state (self->keys->state_key, schema, counter, self->id, digest, mac) == 0;
    free (value);
    if (ok) {
        cs_hex_encode (mac, ROW_MAC_LEN, hex);
        ok = strlen (stored) == 2 * ROW_MAC_LEN && CRYPTO_memcmp (hex, stored, 2 * ROW_MAC_LEN) == 0;
    }
    if (!ok) {
        zsys_error ("keystore %s: the state record does not verify (changed without the master "
                    "key): refused", ks_where (self));
        return KEYSTORE_DAMAGED;
    }
    *schema_p = schema;
    *counter_p = counter;
    return 1;
}

int
ks_state_put (keystore_t *self, uint64_t schema, uint64_t counter, const uint8_t digest [32])
{
    uint8_t mac [ROW_MAC_LEN];
    char hex [2 * ROW_MAC_LEN + 1], rows [2 * 32 + 1], text [200];
    if (row_mac_state (self->keys->state_key, schema, counter, self->id, digest, mac) != 0)
        return -1;
    cs_hex_encode (mac, ROW_MAC_LEN, hex);
    cs_hex_encode (digest, 32, rows);
    snprintf (text, sizeof text, STATE_PREFIX " %" PRIu64 " %" PRIu64 " %s %s", schema, counter, rows, hex);
    return self->be->meta_put (self->store, "state", text, strlen (text));
}

/* ---- the row digest ----------------------------------------------------- */

//  XORs SHA-256 ("cs-digest-v1" || table || NUL || mac) into digest.
static void
s_digest_add (uint8_t digest [32], const char *table, const uint8_t *mac, size_t len)
{
    uint8_t hash [32];
    EVP_MD_CTX *ctx = EVP_MD_CTX_new ();
    bool ok = ctx && EVP_DigestInit_ex (ctx, EVP_sha256 (), NULL) == 1
           && EVP_DigestUpdate (ctx, "cs-digest-v1", 12) == 1
           && EVP_DigestUpdate (ctx, table, strlen (table) + 1) == 1
           && (!len || EVP_DigestUpdate (ctx, mac, len) == 1)
           && EVP_DigestFinal_ex (ctx, hash, NULL) == 1;
    EVP_MD_CTX_free (ctx);
    assert (ok);            //  SHA-256 of memory does not fail but for lack of memory
    for (int i = 0; i < 32; i++)
        digest [i] ^= hash [i];
}

void
ks_digest_note (keystore_t *self, const char *tenant, const char *table, const uint8_t *old,
                size_t old_len, const uint8_t *new, size_t new_len)
{
    if (tenant)
        ks_changes_touch (self, tenant);
    if (old)
        s_digest_add (self->delta, table, old, old_len);
    if (new)
        s_digest_add (self->delta, table, new, new_len);
}

//  Adds the MACs of a list of key or object rows (and frees them).
static void
s_digest_recs (uint8_t digest [32], const char *table, ks_key_rec_t *recs, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        if (recs [i].mac)
            s_digest_add (digest, table, recs [i].mac, recs [i].mac_len);
        ks_key_rec_free (&recs [i]);
    }
    free (recs);
}

int
ks_digest_compute (keystore_t *self, uint8_t digest [32])
{
    char **names = self->be->tenant_list (self->store);
    uint8_t *macs = NULL;
    size_t count = 0;
    int rc = names ? 0 : -1;
    memset (digest, 0, 32);
    for (size_t i = 0; names && names [i]; i++) {
        ks_tenant_rec_t rec;
        ks_key_rec_t *recs = NULL;
        if (rc == 0 && self->be->tenant_read (self->store, names [i], false, &rec) == 1) {
            if (rec.mac)
                s_digest_add (digest, "tenants", rec.mac, rec.mac_len);
            ks_tenant_rec_free (&rec);
        }
        else
            rc = -1;
        if (rc == 0 && self->be->key_list (self->store, names [i], &recs, &count) == 0)
            s_digest_recs (digest, "keys", recs, count);
        else
            rc = -1;
        if (rc == 0 && self->be->object_list (self->store, names [i], &recs, &count) == 0)
            s_digest_recs (digest, "objects", recs, count);
        else
            rc = -1;
        free (names [i]);
    }
    free (names);
    if (rc == 0 && self->be->issued_macs (self->store, &macs, NULL, &count) == 0)
        for (size_t i = 0; i < count; i++)
            s_digest_add (digest, "issued", macs + i * ROW_MAC_LEN, ROW_MAC_LEN);
    else
        rc = -1;
    free (macs);
    macs = NULL;
    //  Schema 6: the audit chains' checkpoints (keystore_audit.h), so that
    //  a chain cut back behind its last checkpoint is a row deleted.
    int audit = rc == 0 ? self->be->has (self->store, "audit", NULL) : 0;
    if (audit == 1 && self->be->audit_sigs (self->store, &macs, &count) == 0)
        for (size_t i = 0; i < count; i++)
            s_digest_add (digest, "audit", macs + i * KEYSTORE_AUDIT_SIG_LEN, KEYSTORE_AUDIT_SIG_LEN);
    else
    if (audit != 0)
        rc = -1;
    free (macs);
    return rc;
}

/* ---- the counter file --------------------------------------------------- */

//  Reads the counter file into *value_p.  Returns 1, 0 when there is none,
//  KEYSTORE_DAMAGED when it does not parse or verify, -1 after a log when
//  it cannot be read.
static int
s_file_read (keystore_t *self, uint64_t *value_p)
{
    char text [160] = "", stored [2 * ROW_MAC_LEN + 2] = "", hex [2 * ROW_MAC_LEN + 1];
    uint8_t mac [ROW_MAC_LEN];
    FILE *file = fopen (self->counter_path, "re");
    if (!file && errno == ENOENT)
        return 0;
    if (!file) {
        zsys_error ("keystore %s: counter file %s: %s", ks_where (self), self->counter_path, strerror (errno));
        return -1;
    }
    size_t got = fread (text, 1, sizeof text - 1, file);
    fclose (file);
    text [got] = 0;
    uint64_t value = 0;
    if (sscanf (text, COUNTER_PREFIX " %" SCNu64 " %65s", &value, stored) != 2
    ||  strlen (stored) != 2 * ROW_MAC_LEN
    ||  row_mac_counter (self->keys->state_key, self->id, value, mac) != 0)
        return KEYSTORE_DAMAGED;
    cs_hex_encode (mac, ROW_MAC_LEN, hex);
    if (CRYPTO_memcmp (hex, stored, 2 * ROW_MAC_LEN) != 0)
        return KEYSTORE_DAMAGED;
    *value_p = value;
    return 1;
}

#define S_FLOCK_WAIT_MS 5000            /* longest wait for another process's write */

//  Takes the flock of the counter file's directory (dfd), waiting at most
//  S_FLOCK_WAIT_MS: a process stopped or stuck while it writes the file
//  must not stop every other process that opens the keystore.  Returns 0,
//  1 when another process still holds it, or -1 (errno).
static int
s_flock_bounded (int dfd)
{
    for (int waited = 0; ; waited += 10) {
        if (flock (dfd, LOCK_EX | LOCK_NB) == 0)
            return 0;
        if (errno != EWOULDBLOCK && errno != EINTR)
            return -1;
        if (waited >= S_FLOCK_WAIT_MS)
            return 1;
        struct timespec ts = { 0, 10000000 };
        nanosleep (&ts, NULL);
    }
}

//  Writes `value` to the counter file (a new file renamed over it,
//  fsync'd), unless it already holds as much and `lower` is false: read
//  first without a lock (the file is only ever replaced whole), then under
//  the process lock and a flock of its directory.  When another process
//  holds that flock past S_FLOCK_WAIT_MS it is raising the file itself:
//  this raise is skipped with a warning (the database is ahead of the file,
//  which is the safe side; the next write raises it).  *before_p gets what
//  s_file_read said before (1, 0, KEYSTORE_DAMAGED).  Returns 0, or -1
//  after a log.
static int
s_file_write (keystore_t *self, uint64_t value, bool lower, int *before_p)
{
    uint64_t held = 0;
    int first = s_file_read (self, &held);
    if (first == 1 && held >= value && !lower) {
        if (before_p)
            *before_p = first;
        return 0;
    }
    uint8_t mac [ROW_MAC_LEN];
    char hex [2 * ROW_MAC_LEN + 1], text [160];
    char *dir = strdup (self->counter_path), *tmp = NULL;
    char *slash = dir ? strrchr (dir, '/') : NULL;
    int rc = -1, dfd = -1, fd = -1;
    pthread_mutex_lock (&s_file_lock);
    if (!dir || asprintf (&tmp, "%s.tmp", self->counter_path) < 0) {
        tmp = NULL;
        goto out;
    }
    if (slash)
        *slash = 0;
    dfd = open (slash ? (*dir ? dir : "/") : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int locked = dfd < 0 ? -1 : s_flock_bounded (dfd);
    if (locked < 0)
        goto fail;
    if (locked == 1) {
        zsys_warning ("keystore %s: counter file %s: another process has held its lock for %d ms: "
                      "not raised now (the next write raises it)", ks_where (self), self->counter_path,
                      S_FLOCK_WAIT_MS);
        if (before_p)
            *before_p = first;
        rc = 0;
        goto out;
    }
    uint64_t old = 0;
    int before = s_file_read (self, &old);
    if (before_p)
        *before_p = before;
    if (before < 0 && before != KEYSTORE_DAMAGED)
        goto out;
    if (before == 1 && old >= value && !lower) {
        rc = 0;
        goto out;
    }
    if (row_mac_counter (self->keys->state_key, self->id, value, mac) != 0)
        goto out;
    cs_hex_encode (mac, ROW_MAC_LEN, hex);
    int len = snprintf (text, sizeof text, COUNTER_PREFIX " %" PRIu64 " %s\n", value, hex);
    unlink (tmp);
    fd = open (tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0 || write (fd, text, (size_t) len) != len || fsync (fd) != 0 || close (fd) != 0) {
        fd = -1;
        goto fail;
    }
    fd = -1;
    if (rename (tmp, self->counter_path) != 0 || fsync (dfd) != 0)
        goto fail;
    rc = 0;
    goto out;
fail:
    zsys_error ("keystore %s: counter file %s: cannot write: %s", ks_where (self), self->counter_path,
                strerror (errno));
out:
    if (fd >= 0)
        close (fd);
    if (dfd >= 0)
        close (dfd);        //  also releases the flock
    pthread_mutex_unlock (&s_file_lock);
    free (tmp);
    free (dir);
    return rc;
}

int
ks_counter_base (keystore_t *self, uint64_t *base_p)
{
    uint64_t value = 0;
    *base_p = 0;
    int got = self->counter_path ? s_file_read (self, &value) : 0;
    if (got == 1)
        *base_p = value;
    return got < 0 && got != KEYSTORE_DAMAGED ? -1 : 0;
}

int
ks_counter_check (keystore_t *self, uint64_t schema, uint64_t counter, const uint8_t digest [32],
                  ks_open_mode_t mode)
{
    uint64_t file = 0;
    uint8_t rows [32];
    self->counter = counter;
    int got = self->counter_path ? s_file_read (self, &file) : 0;
    if (got == -1 || ks_digest_compute (self, rows) != 0)
        return -1;
    if (mode == KS_OPEN_ACCEPT_ROLLBACK) {
        uint64_t next = (got == 1 && file > counter ? file : counter) + 1;
        if (ks_state_put (self, schema, next, rows) != 0)
            return -1;
        if (CRYPTO_memcmp (rows, digest, 32) != 0)
            zsys_notice ("keystore %s: rows put back, deleted or added without the master key "
                         "accepted by the operator", ks_where (self));
        char said [32];
        snprintf (said, sizeof said, got == 1 ? "%" PRIu64 : got == 0 ? "nothing" : "nothing valid", file);
        zsys_notice ("keystore %s: rollback accepted by the operator: its counter was %" PRIu64
                     ", the counter file %s said %s; both are %" PRIu64 " now", ks_where (self),
                     counter, self->counter_path ? self->counter_path : "(none)", said, next);
        self->counter = next;
        return 0;
    }
    if (got == KEYSTORE_DAMAGED) {
        zsys_error ("keystore %s: counter file %s does not verify (changed, or made for another "
                    "keystore or master key): refused; an operator who trusts the keystore runs "
                    "'cryptoserver-admin keystore accept-rollback'", ks_where (self), self->counter_path);
        return -1;
    }
    if (CRYPTO_memcmp (rows, digest, 32) != 0) {
        zsys_error ("keystore %s: its rows are not those its state record vouches for (a row put "
                    "back, deleted or added without the master key): refused; an operator accepts "
                    "them with 'cryptoserver-admin keystore accept-rollback'", ks_where (self));
        return -1;
    }
    if (got == 1 && file > counter) {
        zsys_error ("keystore %s: rolled back: its counter is %" PRIu64 ", the counter file %s "
                    "says %" PRIu64 ": refused; an operator accepts an older copy with "
                    "'cryptoserver-admin keystore accept-rollback'", ks_where (self), counter,
                    self->counter_path, file);
        return -1;
    }
    return 0;
}

int
ks_state_opened (keystore_t *self, ks_open_mode_t mode)
{
    int before = 1;
    if (!self->counter_path)
        return 0;
    if (s_file_write (self, self->counter, mode == KS_OPEN_ACCEPT_ROLLBACK, &before) != 0)
        return -1;
    if (before == 0)
        zsys_info ("keystore %s: counter file %s started at %" PRIu64, ks_where (self),
                   self->counter_path, self->counter);
    return 0;
}

/* ---- write transactions ------------------------------------------------- */

//  Raises the state counter inside the write transaction.  *next_p gets
//  the new value.  Returns 0, or -1 after a log.
static int
s_bump (keystore_t *self, uint64_t *next_p)
{
    uint64_t schema = 0, counter = 0, file = 0;
    uint8_t digest [32];
    int got = ks_state_get (self, &schema, &counter, digest);
    if (got == 0)
        zsys_error ("keystore %s: the state record is gone (changed without the master key): "
                    "write refused", ks_where (self));
    if (got != 1)
        return -1;
    *next_p = counter + 1;
    //  A process whose master key was rotated away must not seal new rows
    //  under it (schema 7, ks_master.c).
    if (ks_master_current (self) != 0)
        return -1;
    if (self->counter_path && s_file_read (self, &file) == 1 && file >= *next_p) {
        zsys_error ("keystore %s: rolled back while open: its counter is %" PRIu64 ", the counter "
                    "file %s says %" PRIu64 ": write refused", ks_where (self), counter,
                    self->counter_path, file);
        return -1;
    }
    for (int i = 0; i < 32; i++)
        digest [i] ^= self->delta [i];
    if (ks_changes_write (self, *next_p) != 0)
        return -1;
    return ks_state_put (self, schema, *next_p, digest);
}

int
ks_end (keystore_t *self, bool commit)
{
    uint64_t next = 0;
    bool bumped = !commit || s_bump (self, &next) == 0;
    memset (self->delta, 0, sizeof self->delta);
    if (!bumped) {
        ks_changes_reset (self, false);
        self->be->end (self->store, false);
        return -1;
    }
    if (self->be->end (self->store, commit) != 0) {
        ks_changes_reset (self, false);
        return -1;
    }
    ks_changes_reset (self, commit);
    if (commit) {
        self->counter = next;
        if (self->counter_path)
            s_file_write (self, next, false, NULL);     //  logged; the database is ahead: safe
    }
    return 0;
}
