/*  cs_admin.h — cryptoserver-admin: the verbs and the helpers they share.
 *
 *  Each verb is `int verb (int argc, char **argv)` with argv[0] the verb's own
 *  name; it returns the process exit status: 0 success, 1 failure, 2 usage.
 *  The deployment layout it writes is docs/CONTRACTS.md, "Deployment directory".
 */
#ifndef CS_ADMIN_H_INCLUDED
#define CS_ADMIN_H_INCLUDED

#include <stdbool.h>
#include <czmq.h>
#include "keystore.h"

#define CS_ADMIN_OK      0
#define CS_ADMIN_FAIL    1
#define CS_ADMIN_USAGE   2

#define CS_ADMIN_DEFAULT_ENDPOINT "tcp://127.0.0.1:5555"
#define CS_ADMIN_DEFAULT_TENANT   "demo"

/*  Verbs (cs_admin_init.c, cs_admin_board.c, cs_admin_client.c, cs_admin_util.c).  */
int cs_admin_init (int argc, char **argv);
int cs_admin_board (int argc, char **argv);
int cs_admin_client (int argc, char **argv);
int cs_admin_config (int argc, char **argv);
int cs_admin_tenant (int argc, char **argv);        /* cs_admin_tenant.c */
/*  `tenant set|show NAME ...` (argv [0] is the verb): a tenant's quotas in
 *  DIR/broker.conf (cs_admin_quota.c).  Returns a CS_ADMIN_* status.  */
int cs_admin_tenant_quota (int argc, char **argv);
int cs_admin_key (int argc, char **argv);           /* cs_admin_key.c */
int cs_admin_master_key (int argc, char **argv);    /* cs_admin_key.c */
/*  `master-key rotate` (cs_admin_rotate.c; argv [1] "rotate").  */
int cs_admin_master_rotate (int argc, char **argv);
/*  Overwrites the file at path twice (random bytes, zeros; fsync each) and
 *  unlinks it (cs_admin_key.c).  0, or -1 after printing why.  */
int cs_admin_shred (const char *path);
int cs_admin_status (int argc, char **argv);        /* cs_admin_status.c */
int cs_admin_shared (int argc, char **argv);        /* cs_admin_shared.c: shared RSA keys (issue #24) */

/*  Options shared by the keystore verbs (tenant, key, master-key); every
 *  string is borrowed from argv except the PINs (owned, wiped by
 *  cs_admin_ks_args_free).  name: the one positional argument.  */
typedef struct {
    const char *dir, *name, *tenant, *type, *label, *id, *file, *ref;
    const char *master_key;     /* --master-key FILE: another copy of the master key */
    const char *board, *public_key;
    const char *count;          /* key generate --count N */
    char *pin, *so_pin;
    bool so;
} cs_admin_ks_args_t;

/*  Parses the options after a sub-verb into *args.  Returns -1 on success,
 *  CS_ADMIN_OK for --help, CS_ADMIN_USAGE for a bad option.  */
int cs_admin_ks_parse (int argc, char **argv, cs_admin_ks_args_t *args);

/*  Wipes and frees the PINs of args.  */
void cs_admin_ks_args_free (cs_admin_ks_args_t *args);

/*  Wipes and frees one PIN string; NULL-safe; nulls *pin_p.  */
void cs_admin_ks_args_free_pin (char **pin_p);

/*  Opens the keystore of the deployment in dir: keystore/path and
 *  keystore/master-key of DIR/broker.conf (relative to DIR), or the master
 *  key file master_override when not NULL.  Returns the keystore (caller
 *  destroys), or NULL after printing why (no deployment, wrapped or wrong
 *  master key).  */
keystore_t *cs_admin_keystore_open (const char *dir, const char *master_override);

/*  Where DIR's keystore is (keystore/url or keystore/path of broker.conf,
 *  *location_p), its sealed counter file (beside the master key,
 *  *counter_p; both malloc'd, caller frees) and its master key (or the
 *  master_override file's) into key (caller wipes).  Returns 0, or -1
 *  after printing why.  */
int cs_admin_keystore_locate (const char *dir, const char *master_override, char **location_p,
                              char **counter_p, uint8_t key [KEYSTORE_MASTER_KEY_LEN]);

/*  cs_admin_audit.c (cryptoserver-audit(5)): `audit verify|show`; the
 *  audit key DIR/audit.key (Ed25519, 64 hex digits, 0600) and DIR/audit.pub (PEM, 0644)
 *  written by init (0, or -1 after printing why); the record of a change
 *  made by verb argv [1] argv [2] with exit status `status`, appended to
 *  chain "admin@HOST" with a signed checkpoint when DIR's broker.conf has
 *  audit/key (printed, not fatal, when it cannot be).  */
int cs_admin_audit (int argc, char **argv);
int cs_admin_audit_key_write (const char *dir);
void cs_admin_audit_note (int argc, char **argv, int status);

/*  `keystore upgrade|accept-rollback` (cs_admin_keystore.c).  */
int cs_admin_keystore (int argc, char **argv);
/*  cs_admin_kstools.c: `keystore copy|backup|restore` (argv [1] the verb).  */
int cs_admin_keystore_tools (int argc, char **argv);
/*  After an accepted rollback (cs_admin_keystore.c): the pre-generated keys
 *  sealed in the older copy (tenant @pool, broker/keys/pool_store.h) may have
 *  been handed out since it was made, and the copy's issued table does not
 *  know it: they go.  Returns how many, or -1 after printing why.  */
long cs_admin_pool_discard (const char *location, const uint8_t key [KEYSTORE_MASTER_KEY_LEN],
                            const char *counter);

/*  Prints "cryptoserver-admin: MESSAGE" on stderr.  */
void cs_admin_error (const char *format, ...) CHECK_PRINTF (1);

/*  True when `name` is 1..64 characters of [A-Za-z0-9_.-], not starting with
 *  '.' or '-': safe as a file name and as a ZPL name.  */
bool cs_admin_name_ok (const char *name);

/*  Joins dir and name with '/'.  Returns a malloc'd path; caller frees.
 *  Aborts on out of memory (a CLI tool, CZMQ style).  */
char *cs_admin_path (const char *dir, const char *name);

/*  Loads DIR/broker.conf.  Returns the tree (caller destroys), or NULL after
 *  printing an error when the file is missing or not valid ZPL.  */
zconfig_t *cs_admin_conf_load (const char *dir);

/*  Saves a config tree to `path` atomically (write PATH.tmp, rename), after
 *  normalising section nodes so they print as plain names.  mode is the new
 *  file's permission bits.  Returns 0, or -1 after printing an error.  */
int cs_admin_conf_save (zconfig_t *config, const char *path, mode_t mode);

/*  Writes `len` bytes to a new file `path` with permission bits `mode`
 *  (replacing any old file).  Returns 0, or -1 after printing an error.  */
int cs_admin_file_write (const char *path, const void *data, size_t len, mode_t mode);

/*  Copies file `from` to `to` with permission bits `mode`.  Returns 0 or -1
 *  after printing an error.  */
int cs_admin_file_copy (const char *from, const char *to, mode_t mode);

/*  Expresses `path` (an existing file, relative to the current directory or
 *  absolute) for a config file that lives in `dir`: relative to dir when the
 *  file is inside it, else absolute.  Returns a malloc'd string (caller frees),
 *  or NULL after printing an error when the file does not exist.  */
char *cs_admin_path_for_config (const char *dir, const char *path);

/*  True when the directory `dir` exists.  */
bool cs_admin_is_dir (const char *dir);

#endif
