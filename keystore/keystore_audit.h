/*  keystore_audit.h — the hash-chained audit log in the keystore database
 *  (schema 6, table audit; issue 22 item 1; the user's view is
 *  cryptoserver-audit(5)).
 *
 *  Each broker keeps its own chain (rows keyed (broker, seq), seq 1, 2,
 *  ...).  A row's record is one JSON object, the same text that goes to
 *  syslog: {"seq":N,"prev":"HEX",BODY} where BODY is what the caller gave
 *  (time, broker, client, tenant, action, object, result, ...) and prev is
 *  the hash of the row before it (64 zeros for seq 1).  The row's hash is
 *  SHA-256 ("cs-audit-v1" || prev || record).  Every so often the writer
 *  appends a checkpoint record (action "checkpoint") and signs
 *  "cs-audit-ckpt-v1" || broker || NUL || seq (8 bytes, big endian) ||
 *  its hash with the audit key (Ed25519, RFC 8032): the signature covers
 *  every record of the chain up to it.
 *
 *  Verifying needs no master key: only the rows and the audit key's
 *  public half (keystore_audit_read, keystore_audit_verify).
 */
#ifndef CS_KEYSTORE_AUDIT_H_INCLUDED
#define CS_KEYSTORE_AUDIT_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <openssl/evp.h>

typedef struct _keystore_t keystore_t;

#define KEYSTORE_AUDIT_HASH_LEN 32
#define KEYSTORE_AUDIT_SIG_LEN 64

/*  One row of table audit as stored.  broker, record, sig malloc'd
 *  (keystore_audit_rows_free).  prev_len/hash_len: the stored lengths (a
 *  row edited to another length reads as broken, not as a crash).  */
typedef struct {
    char *broker;
    int64_t seq;
    char *record;
    uint8_t prev [KEYSTORE_AUDIT_HASH_LEN];
    size_t prev_len;
    uint8_t hash [KEYSTORE_AUDIT_HASH_LEN];
    size_t hash_len;
    uint8_t *sig;               /* NULL: not a checkpoint */
    size_t sig_len;
} keystore_audit_row_t;

/*  A chain's head as its one writer left it: the seq and hash of its last
 *  row (known false before the writer's first append).  keystore_audit_append
 *  sets moved when the database's head is not the one given: another
 *  writer deleted, edited or added rows of this chain since.  */
typedef struct {
    bool known;
    int64_t seq;
    uint8_t hash [KEYSTORE_AUDIT_HASH_LEN];
    bool moved;
} keystore_audit_head_t;

/*  Called with each record appended, after the commit (the JSON line for
 *  syslog).  */
typedef void (keystore_audit_emit_fn) (const char *record, void *arg);

/*  Appends `count` records to broker's chain in one write transaction,
 *  then, with `key` (an Ed25519 private key) and `checkpoint`, a signed
 *  checkpoint record.  bodies [i] is the inside of a JSON object without
 *  its braces ("\"time\":\"...\",\"action\":\"login\",..."): the caller
 *  escapes it; it must not hold key material or PINs.  emit (NULL: none)
 *  gets every record once committed.  head (NULL: not checked) is the
 *  chain's head as this writer left it: moved is set when the database's
 *  head differs (the new rows still follow the database's head, so the
 *  chain stays verifiable from there; the caller reports the break), and
 *  on 0 it becomes the new head.  Returns 0, or -1 after a log line
 *  (nothing appended).  */
int keystore_audit_append (keystore_t *self, const char *broker, char *const *bodies, size_t count,
                           EVP_PKEY *key, bool checkpoint, keystore_audit_head_t *head,
                           keystore_audit_emit_fn *emit, void *arg);

/*  Every audit row of the database at `location` (a path or a
 *  postgresql:// URL), ordered by broker then seq, without the master key:
 *  *rows_p malloc'd array of *count_p (NULL, 0 when none).  0, or -1 after
 *  a log (no such table: the keystore is below schema 6).  */
int keystore_audit_read (const char *location, keystore_audit_row_t **rows_p, size_t *count_p);
void keystore_audit_rows_free (keystore_audit_row_t *rows, size_t count);

/*  What keystore_audit_verify found, per database.  */
typedef struct {
    size_t brokers;             /* chains */
    size_t records;             /* rows checked */
    size_t checkpoints;         /* signatures verified */
    size_t unsigned_tail;       /* rows after the last checkpoint of their chain, summed */
} keystore_audit_summary_t;

/*  Checks rows (as keystore_audit_read returns them): per broker, seq
 *  runs 1, 2, ... without a gap; each row's prev is the hash of the row
 *  before; its hash is that of its prev and record; its record names its
 *  own seq, prev and broker; each checkpoint's signature verifies under
 *  `pub` (an Ed25519 public key).  Returns 0 when all hold, else -1 with
 *  `why` (size bytes) naming the first broken or missing record
 *  ("broker B record N: ..."), at the first break of each chain (one line
 *  per broken chain, separated by newlines).  summary (NULL-safe) gets
 *  the counts.  */
int keystore_audit_verify (const keystore_audit_row_t *rows, size_t count, EVP_PKEY *pub, char *why,
                           size_t size, keystore_audit_summary_t *summary);

/*  The record's hash, SHA-256 ("cs-audit-v1" || prev || record).  */
void keystore_audit_hash (const uint8_t prev [KEYSTORE_AUDIT_HASH_LEN], const char *record,
                          uint8_t hash [KEYSTORE_AUDIT_HASH_LEN]);

/*  Signs (key) or verifies (pub) checkpoint (broker, seq, hash) with
 *  Ed25519.  sign: 0 and sig filled, or -1.  check: true when it verifies.  */
int keystore_audit_sign (EVP_PKEY *key, const char *broker, int64_t seq,
                         const uint8_t hash [KEYSTORE_AUDIT_HASH_LEN], uint8_t sig [KEYSTORE_AUDIT_SIG_LEN]);
bool keystore_audit_check (EVP_PKEY *pub, const char *broker, int64_t seq,
                           const uint8_t hash [KEYSTORE_AUDIT_HASH_LEN], const uint8_t *sig, size_t sig_len);

/*  Reads the audit key file at path: 64 hex digits, the 32-byte Ed25519
 *  private key (RFC 8032 5.1.5), a private file (cs_file_check_private),
 *  kept like the ticket key.  Returns the key (caller frees), or NULL with
 *  a one-line reason in why ("PATH can be read by group or others (mode
 *  0644): chmod 600 PATH", "cannot read PATH: ...", "PATH must hold 64 hex
 *  digits").  */
EVP_PKEY *keystore_audit_key_read (const char *path, char *why, size_t size);

/*  The value of a string member "name" of a record made by this code (its
 *  bodies' values are JSON strings without escaped quotes or numbers):
 *  malloc'd, or NULL when absent.  */
char *keystore_audit_field (const char *record, const char *name);

#endif
