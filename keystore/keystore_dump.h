/*  keystore_dump.h — the operator's keystore tools (issue 22 item 3,
 *  cryptoserver-admin(8) "keystore copy|backup|restore"): every row of a
 *  keystore read in one snapshot, checked, written into another keystore
 *  (SQLite or PostgreSQL) or into one sealed backup file.
 *
 *  Rows stay sealed under the master key all the way: a dump holds them as
 *  stored (sealed private keys, keyed PIN hashes, row MACs), so source and
 *  target must share the master key.  What a load does to the target's
 *  state record and rollback counter is in cryptoserver-keystore(5)
 *  "Copies and backups".
 */
#ifndef KEYSTORE_DUMP_H_INCLUDED
#define KEYSTORE_DUMP_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "keystore.h"

typedef struct _keystore_dump_t keystore_dump_t;

/*  Row counts of a dump, or of what a load changed.  */
typedef struct {
    size_t tenants, keys, objects, issued, audit;
} keystore_dump_counts_t;

/*  Reads every tenant, key, object (pool keys: tenant @pool), issued
 *  fingerprint and audit row of self in one read-only snapshot (the back
 *  end's snapshot: brokers keep signing and writing meanwhile), with the
 *  state record's counter, and checks every row's MAC
 *  (keystore_dump_verify).  Returns a new dump (caller destroys), or NULL
 *  after an E: line (a row or state record that does not verify included).  */
keystore_dump_t *keystore_dump_new (keystore_t *self);

/*  Frees the dump (NULL-safe) and nulls *self_p.  */
void keystore_dump_destroy (keystore_dump_t **self_p);

/*  The state counter of the keystore the dump was read from, at its snapshot.  */
uint64_t keystore_dump_counter (const keystore_dump_t *self);

/*  The dump's row counts.  */
keystore_dump_counts_t keystore_dump_counts (const keystore_dump_t *self);

/*  Checks every row MAC of dump under self's master key (tenant, key,
 *  object and issued rows: row_mac.h).  0, or -1 after an E: line naming
 *  the first row that does not verify.  */
int keystore_dump_verify (keystore_t *self, const keystore_dump_t *dump);

/*  Writes dump's rows into self in one write transaction: a row missing or
 *  different (its MAC) is written as the dump has it; with `mirror`, the
 *  tenants, keys and objects self has and the dump has not are deleted too
 *  (issued fingerprints and audit rows are only ever added: a restore
 *  forgets neither a handed-out pool key nor an audit record).  Audit rows
 *  are appended per chain after the target's head.  The state record then
 *  vouches for the rows as they are, with a counter above self's, the
 *  dump's and self's counter file's; the file follows after the commit.
 *  counter_path (may be NULL): a counter file self adopts for this (a
 *  target opened without one because it is new, keystore_open_counted).
 *  Without mirror (a copy) the dump may not change a target that is the
 *  same keystore at a later counter (an older copy over a newer one).
 *  *changed_p (may be NULL) gets how many rows were written or deleted:
 *  all zero on a re-run.  0, or -1 after an E: line (rolled back).  */
int keystore_dump_load (keystore_t *self, const keystore_dump_t *dump, bool mirror,
                        const char *counter_path, keystore_dump_counts_t *changed_p);

/*  Checks that every row of dump is in self with the same MAC, and with
 *  `exact` that self has no other tenant, key or object: the check after a
 *  copy or restore.  0, or -1 after an E: line naming the first difference.  */
int keystore_dump_check (keystore_t *self, const keystore_dump_t *dump, bool exact);

/*  The value of self's counter file (beside the master key) when it
 *  verifies, else 0 (no file, or none given at open).  0, or -1 after a
 *  log when it cannot be read.  */
int keystore_counter_file (keystore_t *self, uint64_t *value_p);

/*  The dump as one sealed file image: "cs-backup-v1\n" then AES-256-GCM
 *  (RFC 5116) under HKDF (master key, "cryptoserver keystore backup v1")
 *  of the serialised rows.  Returns a malloc'd image of *len_p bytes
 *  (caller frees), or NULL.  */
uint8_t *keystore_dump_seal (keystore_t *self, const keystore_dump_t *dump, size_t *len_p);

/*  Opens a keystore_dump_seal image under self's master key: a new dump
 *  (caller destroys, its rows checked as keystore_dump_verify), or NULL
 *  after an E: line ("backup does not verify" for a changed, truncated or
 *  foreign file).  */
keystore_dump_t *keystore_dump_unseal (keystore_t *self, const uint8_t *image, size_t len);

#endif
