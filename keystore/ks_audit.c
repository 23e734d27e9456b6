/*  ks_audit.c — the hash-chained audit log (keystore_audit.h; schema 6;
 *  cryptoserver-audit(5) is the user's view): appending records and signed
 *  checkpoints to a broker's chain, reading and verifying every chain.
 */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <czmq.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include "cs_util.h"
#include "keystore_int.h"
#include "keystore_audit.h"

#define HASH_DOMAIN  "cs-audit-v1"
#define CKPT_DOMAIN  "cs-audit-ckpt-v1"

void
keystore_audit_hash (const uint8_t prev [KEYSTORE_AUDIT_HASH_LEN], const char *record,
                     uint8_t hash [KEYSTORE_AUDIT_HASH_LEN])
{
    EVP_MD_CTX *ctx = EVP_MD_CTX_new ();
    bool ok = ctx && EVP_DigestInit_ex (ctx, EVP_sha256 (), NULL) == 1
           && EVP_DigestUpdate (ctx, HASH_DOMAIN, strlen (HASH_DOMAIN)) == 1
           && EVP_DigestUpdate (ctx, prev, KEYSTORE_AUDIT_HASH_LEN) == 1
           && EVP_DigestUpdate (ctx, record, strlen (record)) == 1
           && EVP_DigestFinal_ex (ctx, hash, NULL) == 1;
    if (!ok)
        memset (hash, 0, KEYSTORE_AUDIT_HASH_LEN);      //  never matches a real record's
    EVP_MD_CTX_free (ctx);
}

//  The signed message of a checkpoint into buf (room for it): its length.
static size_t
s_ckpt_message (const char *broker, int64_t seq, const uint8_t hash [KEYSTORE_AUDIT_HASH_LEN], uint8_t *buf)
{
    size_t n = 0, blen = strlen (broker);
    memcpy (buf, CKPT_DOMAIN, strlen (CKPT_DOMAIN));
    n += strlen (CKPT_DOMAIN);
    memcpy (buf + n, broker, blen + 1);
    n += blen + 1;
    for (int i = 7; i >= 0; i--)
        buf [n++] = (uint8_t) ((uint64_t) seq >> (8 * i));
    memcpy (buf + n, hash, KEYSTORE_AUDIT_HASH_LEN);
    return n + KEYSTORE_AUDIT_HASH_LEN;
}

int
keystore_audit_sign (EVP_PKEY *key, const char *broker, int64_t seq,
                     const uint8_t hash [KEYSTORE_AUDIT_HASH_LEN], uint8_t sig [KEYSTORE_AUDIT_SIG_LEN])
{
    uint8_t *msg = malloc (strlen (broker) + 64 + KEYSTORE_AUDIT_HASH_LEN);
    EVP_MD_CTX *ctx = EVP_MD_CTX_new ();
    size_t sig_len = KEYSTORE_AUDIT_SIG_LEN;
    int rc = -1;
    if (msg && ctx && EVP_DigestSignInit (ctx, NULL, NULL, NULL, key) == 1) {
        size_t len = s_ckpt_message (broker, seq, hash, msg);
        if (EVP_DigestSign (ctx, sig, &sig_len, msg, len) == 1 && sig_len == KEYSTORE_AUDIT_SIG_LEN)
            rc = 0;
    }
    EVP_MD_CTX_free (ctx);
    free (msg);
    return rc;
}

bool
keystore_audit_check (EVP_PKEY *pub, const char *broker, int64_t seq,
                      const uint8_t hash [KEYSTORE_AUDIT_HASH_LEN], const uint8_t *sig, size_t sig_len)
{
    uint8_t *msg = malloc (strlen (broker) + 64 + KEYSTORE_AUDIT_HASH_LEN);
    EVP_MD_CTX *ctx = EVP_MD_CTX_new ();
    bool ok = false;
    if (msg && ctx && sig && sig_len == KEYSTORE_AUDIT_SIG_LEN
    &&  EVP_DigestVerifyInit (ctx, NULL, NULL, NULL, pub) == 1) {
        size_t len = s_ckpt_message (broker, seq, hash, msg);
        ok = EVP_DigestVerify (ctx, sig, sig_len, msg, len) == 1;
    }
    EVP_MD_CTX_free (ctx);
    free (msg);
    return ok;
}

char *
keystore_audit_field (const char *record, const char *name)
{
    char key [80];
    snprintf (key, sizeof key, "\"%s\":", name);
    const char *at = record ? strstr (record, key) : NULL;
    if (!at)
        return NULL;
    at += strlen (key);
    size_t len = 0;
    if (*at == '"') {
        at++;
        while (at [len] && at [len] != '"')
            len += at [len] == '\\' && at [len + 1] ? 2 : 1;
    }
    else
        len = strcspn (at, ",}");
    return strndup (at, len);
}

static void
s_hex (const uint8_t *data, size_t len, char *out)
{
    for (size_t i = 0; i < len; i++)
        sprintf (out + 2 * i, "%02x", data [i]);
}

//  One row after (seq - 1, prev): its record and hash.  0 or -1.
static int
s_row_make (keystore_audit_row_t *row, const char *broker, int64_t seq,
            const uint8_t prev [KEYSTORE_AUDIT_HASH_LEN], const char *body)
{
    char hex [2 * KEYSTORE_AUDIT_HASH_LEN + 1];
    s_hex (prev, KEYSTORE_AUDIT_HASH_LEN, hex);
    memset (row, 0, sizeof *row);
    row->broker = (char *) broker;
    row->seq = seq;
    if (asprintf (&row->record, "{\"seq\":%" PRId64 ",\"prev\":\"%s\",%s}", seq, hex, body) < 0) {
        row->record = NULL;
        return -1;
    }
    memcpy (row->prev, prev, KEYSTORE_AUDIT_HASH_LEN);
    row->prev_len = row->hash_len = KEYSTORE_AUDIT_HASH_LEN;
    keystore_audit_hash (prev, row->record, row->hash);
    return 0;
}

int
keystore_audit_append (keystore_t *self, const char *broker, char *const *bodies, size_t count,
                       EVP_PKEY *key, bool checkpoint, keystore_audit_head_t *head,
                       keystore_audit_emit_fn *emit, void *arg)
{
    size_t total = count + (key && checkpoint ? 1 : 0), made = 0;
    if (total == 0)
        return 0;
    keystore_audit_row_t *rows = calloc (total, sizeof *rows);
    uint8_t sig [KEYSTORE_AUDIT_SIG_LEN];
    uint8_t prev [KEYSTORE_AUDIT_HASH_LEN] = { 0 };
    int64_t seq = 0;
    int rc = rows ? self->be->begin (self->store) : -1;
    if (rc == 0 && self->be->audit_head (self->store, broker, &seq, prev) < 0)
        rc = -1;
    if (rc == 0 && head && head->known
    &&  (seq != head->seq || memcmp (prev, head->hash, KEYSTORE_AUDIT_HASH_LEN) != 0))
        head->moved = true;                     /* another writer changed this chain */
    for (size_t i = 0; rc == 0 && i < total; i++, made++) {
        char *ckpt = NULL;
        const char *body = i < count ? bodies [i] : NULL;
        if (!body) {
            char when [32];
            time_t now = time (NULL);
            struct tm tm;
            strftime (when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", gmtime_r (&now, &tm));
            if (asprintf (&ckpt, "\"time\":\"%s\",\"broker\":\"%s\",\"action\":\"checkpoint\","
                                 "\"result\":\"CKR_OK\"", when, broker) < 0)
                ckpt = NULL;
            body = ckpt;
        }
        rc = body && s_row_make (&rows [i], broker, seq + 1 + (int64_t) i, prev, body) == 0 ? 0 : -1;
        free (ckpt);
        if (rc == 0 && i == count) {
            if (keystore_audit_sign (key, broker, rows [i].seq, rows [i].hash, sig) != 0) {
                zsys_error ("keystore %s: audit: cannot sign a checkpoint", ks_where (self));
                rc = -1;
            }
            rows [i].sig = sig;
            rows [i].sig_len = sizeof sig;
        }
        if (rc == 0)
            rc = self->be->audit_insert (self->store, &rows [i]);
        if (rc == 0 && rows [i].sig)        //  the state record vouches for it (ks_end)
            ks_digest_note (self, NULL, "audit", NULL, 0, sig, sizeof sig);
        if (rc == 0)
            memcpy (prev, rows [i].hash, KEYSTORE_AUDIT_HASH_LEN);
    }
    //  With a checkpoint: the state counter goes up and the record's digest
    //  takes it (ks_end); without one the rows alone.
    if (rows && (total > count ? ks_end (self, rc == 0) : self->be->end (self->store, rc == 0)) != 0)
        rc = -1;
    if (rc == 0 && head) {
        head->known = true;
        head->seq = seq + (int64_t) total;
        memcpy (head->hash, prev, KEYSTORE_AUDIT_HASH_LEN);
    }
    for (size_t i = 0; i < made; i++) {
        if (rc == 0 && emit)
            emit (rows [i].record, arg);
        free (rows [i].record);
    }
    free (rows);
    return rc;
}

EVP_PKEY *
keystore_audit_key_read (const char *path, char *why, size_t size)
{
    uint8_t seed [32];
    if (cs_file_check_private (path, why, size) != 0)
        return NULL;
    int rc = cs_file_read_hex (path, seed, sizeof seed);
    EVP_PKEY *key = rc == 0 ? EVP_PKEY_new_raw_private_key (EVP_PKEY_ED25519, NULL, seed, sizeof seed) : NULL;
    OPENSSL_cleanse (seed, sizeof seed);
    if (!key)
        snprintf (why, size, rc == -2 ? "%s must hold 64 hex digits" : "cannot read %s", path);
    return key;
}

keystore_audit_row_t *
ks_audit_row_add (keystore_audit_row_t **rows_p, size_t *count_p, size_t *room_p)
{
    if (*count_p == *room_p) {
        size_t room = *room_p * 2 + 64;
        keystore_audit_row_t *grown = realloc (*rows_p, room * sizeof *grown);
        if (!grown)
            return NULL;
        *rows_p = grown;
        *room_p = room;
    }
    keystore_audit_row_t *row = &(*rows_p) [(*count_p)++];
    memset (row, 0, sizeof *row);
    return row;
}

void
keystore_audit_rows_free (keystore_audit_row_t *rows, size_t count)
{
    for (size_t i = 0; rows && i < count; i++) {
        free (rows [i].broker);
        free (rows [i].record);
        free (rows [i].sig);
    }
    free (rows);
}

int
keystore_audit_read (const char *location, keystore_audit_row_t **rows_p, size_t *count_p)
{
    *rows_p = NULL;
    *count_p = 0;
    const ks_backend_t *be = ks_backend_for (location);
    ks_store_t *store = be ? be->open (location) : NULL;
    if (!store)
        return -1;
    int rc = be->has (store, "audit", NULL);
    if (rc == 0)
        zsys_error ("keystore %s: no audit table (schema below 6: 'cryptoserver-admin keystore "
                    "upgrade' adds it)", be->where (store));
    rc = rc == 1 ? be->audit_list (store, rows_p, count_p) : -1;
    be->close (&store);
    return rc;
}

//  Appends one line to why (size bytes).
static void
s_why (char *why, size_t size, const char *format, ...)
{
    size_t used = strlen (why);
    if (used + 1 >= size)
        return;
    if (used)
        why [used++] = '\n', why [used] = 0;
    va_list args;
    va_start (args, format);
    vsnprintf (why + used, size - used, format, args);
    va_end (args);
}

//  Checks one row against the chain so far; NULL when it holds, else what
//  is wrong (static text).
static const char *
s_row_check (const keystore_audit_row_t *row, int64_t expect, const uint8_t prev [KEYSTORE_AUDIT_HASH_LEN],
             EVP_PKEY *pub)
{
    char hex [2 * KEYSTORE_AUDIT_HASH_LEN + 1], mine [32];
    uint8_t hash [KEYSTORE_AUDIT_HASH_LEN];
    if (row->seq != expect)
        return row->seq < expect ? "repeated (a record moved or duplicated)" : "missing (deleted)";
    if (row->prev_len != KEYSTORE_AUDIT_HASH_LEN || CRYPTO_memcmp (row->prev, prev, KEYSTORE_AUDIT_HASH_LEN))
        return "its previous-record hash is not the hash of the record before (a record before it "
               "deleted, edited or reordered)";
    keystore_audit_hash (row->prev, row->record ? row->record : "", hash);
    if (row->hash_len != KEYSTORE_AUDIT_HASH_LEN || CRYPTO_memcmp (row->hash, hash, KEYSTORE_AUDIT_HASH_LEN))
        return "its hash does not match its contents (edited)";
    s_hex (prev, KEYSTORE_AUDIT_HASH_LEN, hex);
    snprintf (mine, sizeof mine, "{\"seq\":%" PRId64 ",\"prev\":\"", row->seq);
    char *broker = keystore_audit_field (row->record, "broker");
    bool named = strncmp (row->record, mine, strlen (mine)) == 0
              && strncmp (row->record + strlen (mine), hex, strlen (hex)) == 0
              && broker && streq (broker, row->broker);
    free (broker);
    if (!named)
        return "its record does not name its own sequence number, previous hash and broker (moved or edited)";
    char *action = keystore_audit_field (row->record, "action");
    bool ckpt = action && streq (action, "checkpoint");
    free (action);
    if (ckpt != (row->sig != NULL))
        return ckpt ? "a checkpoint without its signature" : "a signature on a record that is no checkpoint";
    if (ckpt && (!pub || !keystore_audit_check (pub, row->broker, row->seq, row->hash, row->sig, row->sig_len)))
        return "checkpoint signature does not verify under the audit public key";
    return NULL;
}

int
keystore_audit_verify (const keystore_audit_row_t *rows, size_t count, EVP_PKEY *pub, char *why,
                       size_t size, keystore_audit_summary_t *summary)
{
    keystore_audit_summary_t sum = { 0 };
    uint8_t prev [KEYSTORE_AUDIT_HASH_LEN];
    int64_t expect = 1;
    bool broken = false;
    size_t since = 0;
    why [0] = 0;
    for (size_t i = 0; i < count; i++) {
        const keystore_audit_row_t *row = &rows [i];
        if (i == 0 || !streq (row->broker, rows [i - 1].broker)) {
            sum.brokers++;
            sum.unsigned_tail += since;
            memset (prev, 0, sizeof prev);
            expect = 1;
            broken = false;
            since = 0;
        }
        if (broken)
            continue;
        sum.records++;
        const char *wrong = s_row_check (row, expect, prev, pub);
        if (wrong) {
            //  A gap names the first record missing, not the one after it.
            int64_t first = row->seq > expect ? expect : row->seq;
            s_why (why, size, "broker %s record %" PRId64 ": %s", row->broker, first, wrong);
            broken = true;
            since = 0;
            continue;
        }
        if (row->sig) {
            sum.checkpoints++;
            since = 0;
        }
        else
            since++;
        memcpy (prev, row->hash, KEYSTORE_AUDIT_HASH_LEN);
        expect++;
    }
    sum.unsigned_tail += since;
    if (summary)
        *summary = sum;
    return why [0] ? -1 : 0;
}
