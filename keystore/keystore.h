/*  keystore.h — the broker's store of server-held keys and of tenants.
 *
 *  Rows live in one SQLite file (WAL, synchronous=FULL: a call that returns
 *  0 after a write has made it durable), the default, or in a PostgreSQL
 *  database that several brokers share (keystore/url; a commit returns
 *  once PostgreSQL made it durable by its own settings); keystore.c and its
 *  rooms (ks_tenant.c, ks_keys.c, ks_objects.c; keystore_int.h) hold
 *  the rules, keystore/ks_sqlite.c and keystore/ks_pg.c the storage
 *  (ks_backend.h; their rows through one row layer, ks_sql.h).  Only sealed blobs, keyed PIN hashes and MAC'd rows
 *  reach either.  Each key is a row: its public description in
 *  the clear (a packed cs.KeyInfo, so listing needs no decryption) and, for
 *  keys whose home is the keystore, its private key as PKCS#8 DER encrypted
 *  with AES-256-GCM under the master key, with "cs-key-v1" || tenant || NUL ||
 *  ref as associated data, so a row moved to another tenant or key does not
 *  decrypt.  Keys resident on a board have a row without private material
 *  (home "board:NAME").  Tenants hold keyed scrypt hashes of their user and
 *  SO PINs (common/cs_pin.h), failure counters (PKCS#11 2.40 §5.4 token
 *  flags) and PIN epochs (login tickets carry them: broker/keys/ticket.h).
 *
 *  Integrity (schema 2): every tenant row (PIN hashes, failure counters,
 *  epochs) and every key row (description, private blob) carries an
 *  HMAC-SHA256 under a key derived from the master key, over its columns and
 *  its identity (keystore/row_mac.h).  Every read verifies it; a row that
 *  does not verify (written by someone without the master key) is refused
 *  with an error log line naming it, and never rewritten.
 *
 *  Authenticated schema and rollback (schema 5, issue 19; keystore/ks_state.c):
 *  a MAC'd state record binds the schema version, the row MAC format and
 *  the master key check value to a counter that every committing write
 *  raises; a sealed counter file beside the master key keeps the highest
 *  counter seen.  A keystore whose schema is not authenticated, says less
 *  than its record or its tables, lacks a MAC column, or whose counter is
 *  below the file's, is refused at open; an older keystore is upgraded
 *  only by the operator (keystore_upgrade), an older copy accepted only by
 *  the operator (keystore_accept_rollback).
 *
 *  A keystore object is used by one thread at a time (its hot reads are
 *  prepared once and kept).  The broker's slow-pool threads have one each
 *  (keystore_open_again); cryptoserver-admin opens its own on the same file
 *  (SQLite locks make that safe) or database (row locks, ks_pg.c).  Errors: functions return 0 or -1 (or a CK_RV where the
 *  result goes to a PKCS#11 caller) and log why with zsys_error; nothing
 *  logged ever holds a PIN or key byte.
 */
#ifndef CS_KEYSTORE_H_INCLUDED
#define CS_KEYSTORE_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <p11-kit/pkcs11.h>
#include "cryptoserver.pb-c.h"

#define KEYSTORE_MASTER_KEY_LEN 32      /* bytes: AES-256 */
/*  The schema this code writes and reads (cryptoserver-keystore(5)); 7:
 *  the data key under the master key (keystore_master_rotate).  */
#define KEYSTORE_SCHEMA 7
#define KEYSTORE_PIN_MAX_FAILURES 5     /* wrong PINs in a row before CKR_PIN_LOCKED */
#define KEYSTORE_DAMAGED (-2)           /* a row does not verify or decrypt */
#define KEYSTORE_UNAVAILABLE (-3)       /* the database failed or cannot be reached (logged) */

typedef struct _keystore_t keystore_t;

/*  What the broker keeps of a tenant row (keystore_tenant_state): index 0
 *  is the user (CKU_USER), 1 the SO (CKU_SO).  */
typedef struct {
    uint64_t epoch [2];         /* PIN epochs (keystore_pin_epoch) */
    long failures [2];          /* wrong PINs in a row (keystore_tenant_flags) */
    uint64_t keys_version;      /* keystore_keys_version */
} keystore_tenant_t;

/*  What a PIN check leaves behind (keystore_pin_check).  */
typedef struct {
    long failures;              /* wrong PINs in a row after the check */
    uint64_t epoch;             /* the PIN epoch of the user type after the check */
} keystore_pin_state_t;

/*  Opens the keystore at `location` under the 32-byte master key: a path
 *  (SQLite; the file is created, mode 0600, when absent) or a libpq URL
 *  "postgresql://[user@]host[:port]/db" or "postgresql:///db?host=/socket/dir"
 *  (keystore_is_url; its tables are created when the database is new).
 *  A new keystore records a check value of the master key and its state
 *  record (schema 5); an existing one whose check value does not match
 *  gives NULL with the log line "keystore WHERE: master key does not match"
 *  (never a crash; WHERE is the path, or the URL without its password:
 *  keystore_where), and so does one whose schema is not authenticated, not
 *  the current one, lacks a MAC column, or whose rows are not those its
 *  state record vouches for (E: lines of cryptoserver-keystore(5)
 *  "Authenticated schema" and "Rollback"): an existing keystore's tables
 *  are never changed at an open (keystore_upgrade).  NULL after a log line
 *  also when the database cannot be reached or this build has no
 *  PostgreSQL support.  Caller destroys the result.  The master key is
 *  copied into a locked, non-dumpable page of its own (cs_secmem.h); the
 *  caller wipes its own.  */
keystore_t *keystore_open (const char *location, const uint8_t master_key [KEYSTORE_MASTER_KEY_LEN]);

/*  The name of the sealed counter file (keystore_counter_path).  */
#define KEYSTORE_COUNTER_FILE "keystore.counter"

/*  keystore_open, and the rollback check against the sealed counter file
 *  at counter_path (NULL: none, as keystore_open): a keystore whose state
 *  counter is below the file's gives NULL after the line "keystore WHERE:
 *  rolled back: its counter is N, the counter file FILE says M: refused;
 *  ..." (cryptoserver-keystore(5) "Rollback"); a file that does not verify
 *  likewise.  A missing file is made (mode 0600), and every committing
 *  write raises it afterwards; a write whose counter would not pass the
 *  file's (a rollback while open) is refused and rolled back.  The
 *  schema refusals of every open (E: lines, never an implicit upgrade)
 *  are in cryptoserver-keystore(5) "Schema".  Caller destroys.  */
keystore_t *keystore_open_counted (const char *location, const uint8_t master_key [KEYSTORE_MASTER_KEY_LEN],
                                   const char *counter_path);

/*  The operator's explicit upgrade of an older keystore to the current
 *  schema (cryptoserver-admin keystore upgrade): refused (-1 after an E:
 *  line) when the stored schema is lower than the tables show, a table or
 *  column of its schema is missing, or a state record says another schema;
 *  rows of a schema 1 keystore are MACed as they stand (the operator
 *  vouches for them).  Logged ("keystore WHERE: upgraded by the operator
 *  from schema N to 5").  Returns the schema it upgraded from, 0 when it
 *  was current already, -1.  counter_path as keystore_open_counted.  */
int keystore_upgrade (const char *location, const uint8_t master_key [KEYSTORE_MASTER_KEY_LEN],
                      const char *counter_path);

/*  The operator's master key rotation (cryptoserver-admin master-key
 *  rotate, issue #22 item 3; cryptoserver-keystore(5) "The master key"):
 *  in one write transaction of self (opened with its current master key;
 *  with keystore_open_counted the counter file follows), every private key
 *  and private object, the data key (schema 7) and the master key check
 *  value are sealed again under new_master (32 bytes), every key and
 *  object row gets its new MAC, and the state record vouches for the rows
 *  at its counter raised by one; the identity (meta identity), PIN forms,
 *  other rows and change epochs are unchanged.  Afterwards self works
 *  under new_master; other handles opened with the old key serve what
 *  they cached, fail to open other sealed rows, and have every write
 *  refused (ks_end: the check value no longer opens under their key)
 *  until opened again with the new key.  The caller keeps new_master (and wipes it).
 *  Returns 0, or -1 after a log (rolled back: nothing changed).  */
int keystore_master_rotate (keystore_t *self, const uint8_t new_master [KEYSTORE_MASTER_KEY_LEN]);

/*  The operator's acceptance of a rolled-back keystore (cryptoserver-admin
 *  keystore accept-rollback): its state record must verify (schema checks
 *  as at open); its counter is raised above the counter file's and the
 *  file set to it (logged: "keystore WHERE: rollback accepted by the
 *  operator: ...").  *counter_p (may be NULL) gets the new counter.
 *  Returns 0 or -1 after a log.  */
int keystore_accept_rollback (const char *location, const uint8_t master_key [KEYSTORE_MASTER_KEY_LEN],
                              const char *counter_path, uint64_t *counter_p);

/*  The counter file beside the file `beside` (the master key file, or the
 *  wrapped master key): its directory + KEYSTORE_COUNTER_FILE.  malloc'd,
 *  NULL for NULL or out of memory.  */
char *keystore_counter_path (const char *beside);

/*  Issue 19 item 7: a pre-generated (pool) key is issued once, ever.
 *  Records the SHA-256 `fingerprint` of the DER SubjectPublicKeyInfo of a
 *  key handed to `tenant`, in a MAC'd row of table issued (inside an open
 *  idempotent operation when there is one).  Returns 0 recorded, 1 it was
 *  issued before (nothing written: the caller refuses the key), -1 after a
 *  log.  */
int keystore_issued_record (keystore_t *self, const char *tenant, const uint8_t fingerprint [32]);

/*  1 when `fingerprint` was issued (a row that verifies), 0 when not,
 *  KEYSTORE_DAMAGED for a row that does not verify (logged: treat as
 *  issued), -1 after a log.  */
int keystore_issued_check (keystore_t *self, const uint8_t fingerprint [32]);

/*  True when location is a PostgreSQL URL ("postgresql:" or "postgres:"),
 *  not a path.  */
bool keystore_is_url (const char *location);

/*  What log lines may call a location: itself, or for a URL with a
 *  password ("postgresql://user:secret@host/db", "...?password=secret")
 *  the URL with "***" in its place.  malloc'd (caller frees), NULL when
 *  out of memory.  */
char *keystore_location_name (const char *location);

/*  What log lines call self's database: the path, or the URL without its
 *  password.  Owned by self.  */
const char *keystore_where (keystore_t *self);

/*  Opens another connection to self's file under the same master key (one
 *  per thread: a keystore object is used by one thread at a time).  Returns
 *  NULL after a log on failure.  Caller destroys.  */
keystore_t *keystore_open_again (keystore_t *self);

/*  Test hook: when set, keystore_pin_check ("pin_check"), keystore_key_get
 *  ("key_get"), keystore_key_list ("key_list"), keystore_keys_version
 *  ("keys_version") and every tenant row read ("tenant_read", also inside
 *  the PIN and state functions) call it with that static name, in the
 *  calling thread, before they touch the file: tests count the broker's
 *  SQLite reads, or hold a PIN check to see what else runs meanwhile.  NULL
 *  (the default) turns it off.  Any thread may set it.  */
typedef void (keystore_hook_fn) (const char *call);
void keystore_set_test_hook (keystore_hook_fn *hook);

/*  Waits until no other connection is writing: takes the write lock
 *  (BEGIN IMMEDIATE, waiting up to the busy timeout of 5 s) and gives it
 *  back at once, so a read that starts after it returns sees every
 *  transaction that was under way when it was called; and tells whether
 *  another connection (of this process or another) committed since the
 *  previous call on self, or since self was opened (SQLite's PRAGMA
 *  data_version; self's own commits do not count).  Returns 1 (another
 *  connection committed), 0 (none did), or -1 after a log (timeout,
 *  database failure: the caller assumes a change).  */
int keystore_settle (keystore_t *self);

/*  One tenant's change epoch (ks_changes.c): the state counter of the
 *  last committed transaction that changed its tenant row, keys or objects
 *  (0: none since this version wrote the keystore; UINT64_MAX: its record
 *  does not verify, so treat it as changed).  */
typedef struct {
    char *tenant;
    uint64_t epoch;
    uint64_t prev;              /* keystore_own_changes_take only: the epoch before (UINT64_MAX: unknown) */
} keystore_change_t;

/*  Every tenant's change epoch, read from meta rows "changes:TENANT", each
 *  MAC'd under the state key (docs/CONTRACTS.md "Keystore state"): a cache
 *  of one tenant's rows is stale when its epoch moved.  *counter_p gets
 *  the state counter (read first, verified): every committing write of
 *  cryptoserver raises it, so a commit that left it where it was came from
 *  a writer without the master key (sqlite3, psql) and may have changed
 *  any row.  *changes_p gets a malloc'd array of *count_p entries (free
 *  with keystore_changes_free).  Returns 0, or -1 after a log (the caller
 *  assumes every tenant changed).  */
int keystore_tenant_changes (keystore_t *self, keystore_change_t **changes_p, size_t *count_p,
                             uint64_t *counter_p);

/*  The tenants whose rows the commits made on self changed since the last
 *  call, each with the epoch its last commit gave it and the one it had
 *  before (so a cache that saw `prev` knows nobody else wrote between;
 *  several commits of one tenant merge while they follow each other).
 *  *changes_p gets a malloc'd array of *count_p (NULL and 0: none; free
 *  with keystore_changes_free).  Returns 0.  */
int keystore_own_changes_take (keystore_t *self, keystore_change_t **changes_p, size_t *count_p);

/*  Frees what keystore_tenant_changes or keystore_own_changes_take gave;
 *  NULL-safe; nulls *changes_p.  */
void keystore_changes_free (keystore_change_t **changes_p, size_t count);

/*  PostgreSQL: SQLite's write lock and data_version have no equivalent
 *  here, so keystore_settle always says 1 ("assume a change"); brokers
 *  sharing a database learn of changes from a listener instead.  */

/*  A listener of the commits that other processes make to self's database
 *  (PostgreSQL LISTEN/NOTIFY: every write transaction on tenants and keys
 *  notifies channel "cryptoserver_keystore" from a trigger, with the
 *  writing process's origin as payload).  It owns a connection of its own
 *  and a thread that waits on it; when the connection drops it reconnects
 *  once a second.  NULL for a SQLite keystore (watch the file:
 *  broker/ops/ks_watch.h) or after a log line on failure.  Caller destroys.  */
typedef struct _keystore_listener_t keystore_listener_t;
keystore_listener_t *keystore_listener_new (keystore_t *self);

/*  A counter that moves at each commit of another process (or a writer
 *  without an origin, such as psql) seen since the listener started, and
 *  when the listener connects again after losing its connection (changes
 *  may have been missed meanwhile).  A caller that cached rows drops them
 *  when it moves.  Any thread may call it (an atomic load).  */
uint64_t keystore_listener_changes (keystore_listener_t *self);

/*  A counter that moves at each of those commits made without an origin
 *  (psql, any writer that is not cryptoserver: it raised no state counter
 *  and may have changed any row) and at each reconnection; it moves
 *  before keystore_listener_changes does.  Any thread.  */
uint64_t keystore_listener_foreign (keystore_listener_t *self);

/*  True while the listener's connection is up.  */
bool keystore_listener_connected (keystore_listener_t *self);

/*  Stops the thread and closes the connection; NULL-safe; nulls *self_p.  */
void keystore_listener_destroy (keystore_listener_t **self_p);

/*  Closes the keystore, wiping the master key copy; NULL-safe; nulls *self_p.  */
void keystore_destroy (keystore_t **self_p);

/*  Reads a master key file: 64 hex digits (created 0600 by cryptoserver-admin
 *  init).  Returns 0, or -1 when unreadable, malformed, or readable by group
 *  or others (then the log says so).  */
int keystore_master_key_read (const char *path, uint8_t key [KEYSTORE_MASTER_KEY_LEN]);

/*  Writes a fresh random master key file with mode 0600; refuses to
 *  overwrite.  Returns 0 or -1.  */
int keystore_master_key_create (const char *path, uint8_t key [KEYSTORE_MASTER_KEY_LEN]);

/* ---- tenants ------------------------------------------------------- */

/*  Adds a tenant with its user and SO PINs (bytes; hashed here).  Returns 0,
 *  or -1 when the name exists, is empty or longer than 32 bytes (it becomes
 *  the token label), or a PIN is out of CS_PIN_MIN_LEN..CS_PIN_MAX_LEN.  */
int keystore_tenant_add (keystore_t *self, const char *name,
                         const void *user_pin, size_t user_pin_len,
                         const void *so_pin, size_t so_pin_len);

/*  Removes a tenant and every key row of it.  Returns 0, or -1 if unknown.  */
int keystore_tenant_remove (keystore_t *self, const char *name);

/*  Returns a malloc'd, NULL-terminated array of malloc'd tenant names, in
 *  name order (caller frees each and the array), or NULL on error.  */
char **keystore_tenant_list (keystore_t *self);

/*  True when the tenant exists.  */
bool keystore_tenant_exists (keystore_t *self, const char *name);

/*  Checks a C_Login PIN of user_type (CKU_USER or CKU_SO) for the tenant and
 *  counts failures durably: CKR_OK (and the count reset; a hash of an older
 *  form or cost is replaced by a current one), CKR_PIN_INCORRECT,
 *  CKR_PIN_LOCKED after KEYSTORE_PIN_MAX_FAILURES wrong PINs in a row (also
 *  for the right PIN, until reset), CKR_USER_TYPE_INVALID, CKR_DEVICE_ERROR
 *  for an unknown tenant, a tenant row that does not verify, or a database
 *  failure.  The wrong PIN that reaches the maximum also moves the PIN epoch
 *  of user_type, so every login ticket of that user type ends.  When
 *  state_p is not NULL it gets, read in the same transaction, the count of
 *  wrong PINs in a row after this check (0 after CKR_OK;
 *  KEYSTORE_PIN_MAX_FAILURES with CKR_PIN_INCORRECT means this check locked
 *  the PIN) and the PIN epoch of user_type (the one a ticket of this login
 *  carries).  PKCS#11 2.40 §5.6 C_Login.  */
CK_RV keystore_pin_check (keystore_t *self, const char *tenant, CK_USER_TYPE user_type,
                          const void *pin, size_t pin_len, keystore_pin_state_t *state_p);

/*  Sets the PIN of user_type, clears its failure count and lock, and moves
 *  its PIN epoch, which ends every login ticket of that user type
 *  (C_InitPIN for CKU_USER by the SO, C_SetPIN, admin tenant set-pin); the
 *  new epoch goes to *epoch_p when it is not NULL.  Returns CKR_OK,
 *  CKR_PIN_LEN_RANGE, CKR_USER_TYPE_INVALID or CKR_DEVICE_ERROR (also for a
 *  tenant row that does not verify).  */
CK_RV keystore_pin_set (keystore_t *self, const char *tenant, CK_USER_TYPE user_type,
                        const void *pin, size_t pin_len, uint64_t *epoch_p);

/*  The tenant's PIN epoch of user_type (CKU_USER or CKU_SO) into *epoch_p: a
 *  value that changes, and never returns to an earlier value, whenever that
 *  PIN is set or locked (values come from the file-wide counter, so a
 *  tenant removed and added again never repeats one).  Returns 0, or -1 for
 *  an unknown tenant or user type, a database failure, or a row that does
 *  not verify (then with an error log line).  */
int keystore_pin_epoch (keystore_t *self, const char *tenant, CK_USER_TYPE user_type,
                        uint64_t *epoch_p);

/*  The tenant's CKF_USER_PIN_COUNT_LOW / _FINAL_TRY / _LOCKED and the CKF_SO_PIN_*
 *  equivalents for CK_TOKEN_INFO.flags; 0 for an unknown tenant or a row
 *  that does not verify.  */
CK_FLAGS keystore_pin_flags (keystore_t *self, const char *tenant);

/*  The tenant row as the broker caches it (its PIN epochs, failure counts
 *  and key-list version) into *state, read with one statement and its MAC
 *  verified (keys_version is outside the MAC).  Returns 0; -1 for an
 *  unknown tenant; KEYSTORE_UNAVAILABLE (logged) on a database failure;
 *  KEYSTORE_DAMAGED (with an error log line) when the row does not verify.
 *  *state is zeroed on failure.  */
int keystore_tenant_state (keystore_t *self, const char *tenant, keystore_tenant_t *state);

/*  The CK_TOKEN_INFO flags of a tenant state: what keystore_pin_flags
 *  gives for that row (PKCS#11 2.40 §5.4: COUNT_LOW after one wrong PIN,
 *  FINAL_TRY when one try is left, LOCKED at KEYSTORE_PIN_MAX_FAILURES).  */
CK_FLAGS keystore_tenant_flags (const keystore_tenant_t *state);

/* ---- keys ---------------------------------------------------------- */

/*  Stores a new key of the tenant: `info` (its ref must be set and unique in
 *  the tenant; see keystore_ref_new) and, for home "keystore", the private key
 *  as PKCS#8 DER (pkcs8_len bytes, encrypted here; NULL for public-only keys
 *  and board-resident keys).  Durable when it returns 0; -1 on failure.  */
int keystore_key_put (keystore_t *self, const char *tenant, const Cs__KeyInfo *info,
                      const uint8_t *pkcs8, size_t pkcs8_len);

/*  Replaces the public description of an existing key (C_SetAttributeValue).
 *  Returns 0, -1 if the key is unknown or on failure, or KEYSTORE_DAMAGED
 *  (logged) when the stored row does not verify.  */
int keystore_key_update (keystore_t *self, const char *tenant, const Cs__KeyInfo *info);

/*  Loads one key by ref.  *info_p gets the description (caller frees with
 *  cs__key_info__free_unpacked (info, NULL)); if pkcs8_p is not NULL it gets
 *  the decrypted private key (malloc'd, *pkcs8_len_p bytes; caller wipes with
 *  OPENSSL_cleanse and frees; NULL with length 0 for keys without private
 *  material).  Returns 0, -1 when unknown, KEYSTORE_UNAVAILABLE (logged) on
 *  a database failure, or KEYSTORE_DAMAGED with an error log line when the
 *  row does not verify or does not decrypt (changed outside cryptoserver,
 *  other master key).  */
int keystore_key_get (keystore_t *self, const char *tenant, const char *ref,
                      Cs__KeyInfo **info_p, uint8_t **pkcs8_p, size_t *pkcs8_len_p);

/*  Lists the tenant's keys: *infos_p gets a malloc'd array of *count_p
 *  descriptions (free each with cs__key_info__free_unpacked, then the array).
 *  A row that does not verify is left out, with an error log line naming
 *  it, so that one damaged row does not hide the tenant's other keys.
 *  Returns 0 or -1.  */
int keystore_key_list (keystore_t *self, const char *tenant,
                       Cs__KeyInfo ***infos_p, size_t *count_p);

/*  One page of the tenant's keys, for paged key lists (docs/CONTRACTS.md
 *  "Key lists in pages", issue #25): at most `limit` (1 .. SIZE_MAX - 1)
 *  rows whose ref sorts after `after` in byte order ("" for the first
 *  page), read with keyset pagination (an index range, not OFFSET), in ref
 *  order.  *infos_p and *count_p as keystore_key_list (a row that does not
 *  verify is left out, logged); *next_p gets the ref to pass as `after` for
 *  the next page (malloc'd, caller frees) when more rows follow, else NULL.
 *  Returns 0 or -1 (bad arguments, database error, out of memory).  */
int keystore_key_page (keystore_t *self, const char *tenant, const char *after, size_t limit,
                       Cs__KeyInfo ***infos_p, size_t *count_p, char **next_p);

/*  Deletes a key row.  Returns 0, or -1 if unknown.  */
int keystore_key_delete (keystore_t *self, const char *tenant, const char *ref);

/*  The tenant's key-list version: a counter that every put, update and
 *  delete of one of its keys increments (ListKeysResult.version).  0 for an
 *  unknown tenant.  */
uint64_t keystore_keys_version (keystore_t *self, const char *tenant);

/* ---- idempotent operations ------------------------------------------- */

#define KEYSTORE_IDEM_ID_MAX 64         /* bytes of an idempotency id (the module sends 16) */
#define KEYSTORE_IDEM_TTL_S  86400      /* seconds an idempotency row is kept: 24 h */

/*  Starts an idempotent operation: a key-management job with an
 *  idempotency id (Job.idempotency_id; 1..KEYSTORE_IDEM_ID_MAX bytes) of
 *  the tenant.  Opens a write transaction and looks (tenant, id) up in the
 *  table idempotency (cryptoserver-keystore(5)).  Returns 1 when it is
 *  recorded: *result_p gets the recorded result (malloc'd, *result_len_p
 *  bytes, its row MAC verified; caller frees) and no transaction stays
 *  open; 0 when it is not: the transaction stays open, and every
 *  keystore_key_put, keystore_key_update and keystore_key_delete on self
 *  joins it until keystore_idem_end (one operation at a time per keystore
 *  object); -1 on failure (bad arguments, an operation already open,
 *  database failure; logged); KEYSTORE_DAMAGED (with an error log line)
 *  when the recorded row does not verify.  */
int keystore_idem_begin (keystore_t *self, const char *tenant, const uint8_t *id, size_t id_len,
                         uint8_t **result_p, size_t *result_len_p);

/*  Ends the operation keystore_idem_begin opened.  result NULL: rolls back
 *  every change made in it (the job failed) and returns 0.  Otherwise, when
 *  no key write in it failed, records (tenant, id, result bytes, now) with
 *  its row MAC, deletes the rows of every tenant older than
 *  KEYSTORE_IDEM_TTL_S and commits, all in the one transaction: returns 0.
 *  Returns 1 when another connection (another broker on a shared
 *  PostgreSQL database) recorded the same id first: this transaction rolled
 *  back, and *recorded_p (when not NULL) gets the recorded result as
 *  keystore_idem_begin gives it.  -1 when a key write in it failed or on a
 *  database failure (rolled back, logged), KEYSTORE_DAMAGED as above.  */
int keystore_idem_end (keystore_t *self, const uint8_t *result, size_t result_len,
                       uint8_t **recorded_p, size_t *recorded_len_p);

/*  Deletes the idempotency rows created before now - KEYSTORE_IDEM_TTL_S
 *  (now: seconds since the epoch), as keystore_idem_end does at each
 *  record.  Returns the count deleted, or -1.  Not inside an operation.  */
int keystore_idem_expire (keystore_t *self, int64_t now);

/* ---- certificates and data objects (schema 4) -------------------------- */

/*  Stores object `info` of the tenant (issue #10; cryptoserver-keystore(5)
 *  "objects"): inserts it, or replaces the row of the same ref whole
 *  (C_SetAttributeValue).  info->ref must be set (keystore_object_ref_new).
 *  A public object (is_private false) is stored in the clear, MAC'd
 *  (row_mac_object); a CKA_PRIVATE one keeps only ref, class and flag in
 *  the clear, the whole object sealed like a private key (AES-256-GCM,
 *  associated data "cs-obj-v1" || tenant || NUL || ref).  Durable when it
 *  returns 0; -1 (logged) for an unknown tenant, a bad ref or a database
 *  failure.  */
int keystore_object_put (keystore_t *self, const char *tenant, const Cs__ObjectInfo *info);

/*  Loads one object by ref into *info_p (caller frees with
 *  cs__object_info__free_unpacked).  Returns 0, -1 when unknown,
 *  KEYSTORE_UNAVAILABLE (logged) on a database failure, KEYSTORE_DAMAGED
 *  (logged) when the row does not verify, decode or decrypt.  */
int keystore_object_get (keystore_t *self, const char *tenant, const char *ref, Cs__ObjectInfo **info_p);

/*  The tenant's objects in the order stored: *infos_p a malloc'd array of
 *  *count_p (free each with cs__object_info__free_unpacked, then the
 *  array).  A row that does not verify, decode or decrypt is left out with
 *  an error log line naming it.  Returns 0 or -1.  */
int keystore_object_list (keystore_t *self, const char *tenant, Cs__ObjectInfo ***infos_p, size_t *count_p);

/*  Deletes an object row.  Returns 0, or -1 if unknown or on failure.  */
int keystore_object_delete (keystore_t *self, const char *tenant, const char *ref);

/*  Writes a fresh object ref "obj:" + 32 hex digits into ref (at least 37
 *  bytes).  */
void keystore_object_ref_new (char ref [37]);

/*  Writes a fresh ref "ks:" + 32 hex digits (16 random bytes) into
 *  ref (at least 36 bytes).  */
void keystore_ref_new (char ref [36]);

#endif
