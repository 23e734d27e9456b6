/*  cs_admin_kstools.c — `cryptoserver-admin keystore copy|backup|restore`
 *  (issue 22 item 3; cryptoserver-admin(8), cryptoserver-keystore(5)
 *  "Copies and backups"): the operator moves a keystore between SQLite and
 *  PostgreSQL, and keeps it in one sealed file.  The rows stay sealed
 *  under the master key throughout (keystore/keystore_dump.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <czmq.h>
#include <openssl/crypto.h>
#include "cs_admin.h"
#include "cs_util.h"
#include "keystore_dump.h"

static int
s_usage (FILE *out, int status)
{
    fprintf (out,
        "usage: cryptoserver-admin keystore copy --from DIR|URL --to DIR|URL [--dir DIR]\n"
        "       cryptoserver-admin keystore backup [--dir DIR] FILE\n"
        "       cryptoserver-admin keystore restore [--dir DIR] [--accept-rollback] FILE\n"
        "\n"
        "copy writes every tenant, key, object (pool keys included), issued pool key\n"
        "fingerprint and audit row of one keystore into another, read in one snapshot,\n"
        "then checks the target row by row (MACs, counts); a re-run writes nothing.\n"
        "DIR is a deployment (its broker.conf: keystore and master key); a URL is a\n"
        "PostgreSQL keystore that uses the master key and counter file of --dir DIR\n"
        "(default: the DIR side, else '.').  Both sides share one master key.\n"
        "\n"
        "backup writes DIR's keystore, read in one snapshot while brokers run, into\n"
        "FILE, sealed (AES-256-GCM) under its master key.  restore puts FILE back into\n"
        "DIR's keystore (rows FILE lacks go; issued fingerprints and audit rows stay);\n"
        "it is refused when FILE is older than the counter file beside the master key\n"
        "unless --accept-rollback is given (sealed pool keys then go, as with\n"
        "'keystore accept-rollback').  Stop the brokers of DIR before a restore.\n");
    return status;
}

//  One side of a copy: where, its counter file, its master key.
typedef struct {
    char *location, *counter;
    uint8_t key [KEYSTORE_MASTER_KEY_LEN];
} s_side_t;

static void
s_side_free (s_side_t *side)
{
    free (side->location);
    free (side->counter);
    OPENSSL_cleanse (side->key, sizeof side->key);
    memset (side, 0, sizeof *side);
}

//  A new SQLite target: DIR's keystore/path made as an empty file, so that
//  cs_admin_keystore_locate finds it (SQLite takes an empty file for a new
//  database).  0, or -1 after printing why.
static int
s_target_make (const char *dir)
{
    zconfig_t *config = cs_admin_conf_load (dir);
    if (!config)
        return -1;
    int rc = 0;
    if (!zconfig_get (config, "keystore/url", NULL)) {
        char *path = cs_path_resolve (dir, zconfig_get (config, "keystore/path", "keystore.db"));
        int fd = path ? open (path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600) : -1;
        if (fd < 0) {
            cs_admin_error ("%s: %s", path ? path : dir, strerror (errno));
            rc = -1;
        }
        else
            close (fd);
        free (path);
    }
    zconfig_destroy (&config);
    return rc;
}

//  Resolves one side: a URL (master key and counter file of `dir`) or a
//  deployment DIR.  0, or -1 after printing why.
static int
s_side (const char *where, const char *dir, bool target, s_side_t *side)
{
    if (keystore_is_url (where)) {
        char *location = NULL;
        if (cs_admin_keystore_locate (dir, NULL, &location, &side->counter, side->key) != 0)
            return -1;
        free (location);
        side->location = strdup (where);
        return side->location ? 0 : -1;
    }
    if (!cs_admin_is_dir (where)) {
        cs_admin_error ("%s: neither a deployment directory nor a postgresql:// URL", where);
        return -1;
    }
    if (target && s_target_make (where) != 0)
        return -1;
    return cs_admin_keystore_locate (where, NULL, &side->location, &side->counter, side->key);
}

//  Opens one side's keystore without its counter file: a new target
//  starts below it (keystore_dump_load adopts it), and a source that was
//  copied before is older than the file once a broker wrote to the copy
//  (they share the file): its state record and rows are checked, and
//  keystore_dump_load refuses an older copy over a newer one.  Caller
//  destroys.
static keystore_t *
s_open (const s_side_t *side)
{
    keystore_t *keystore = keystore_open_counted (side->location, side->key, NULL);
    if (!keystore) {
        char *name = keystore_location_name (side->location);
        cs_admin_error ("%s: cannot open the keystore (see above)", name ? name : "keystore");
        free (name);
    }
    return keystore;
}

//  Loads dump into keystore and checks the result; prints what it did.
static int
s_load (keystore_t *keystore, const keystore_dump_t *dump, bool mirror, const char *counter, const char *what)
{
    keystore_dump_counts_t changed, n = keystore_dump_counts (dump);
    if (keystore_dump_load (keystore, dump, mirror, counter, &changed) != 0
    ||  keystore_dump_check (keystore, dump, mirror) != 0) {
        cs_admin_error ("%s: not done (see above)", keystore_where (keystore));
        return CS_ADMIN_FAIL;
    }
    printf ("keystore %s: %s: %zu tenants, %zu keys, %zu objects, %zu issued, %zu audit rows verified; "
            "%zu tenant, %zu key, %zu object, %zu issued, %zu audit rows written\n",
            keystore_where (keystore), what, n.tenants, n.keys, n.objects, n.issued, n.audit,
            changed.tenants, changed.keys, changed.objects, changed.issued, changed.audit);
    return CS_ADMIN_OK;
}

static int
s_copy (const char *from, const char *to, const char *dir)
{
    s_side_t src = { 0 }, dst = { 0 };
    keystore_t *source = NULL, *target = NULL;
    keystore_dump_t *dump = NULL;
    int status = CS_ADMIN_FAIL;
    if (!dir)
        dir = !keystore_is_url (from) ? from : !keystore_is_url (to) ? to : ".";
    if (s_side (from, dir, false, &src) != 0 || s_side (to, dir, true, &dst) != 0)
        goto out;
    if (CRYPTO_memcmp (src.key, dst.key, sizeof src.key) != 0) {
        cs_admin_error ("copy: %s and %s have different master keys: the rows stay sealed under the "
                        "source's, so the target must use the same master key file", from, to);
        goto out;
    }
    if (streq (src.location, dst.location)) {
        cs_admin_error ("copy: %s and %s are the same keystore", from, to);
        goto out;
    }
    if ((source = s_open (&src)) && (dump = keystore_dump_new (source))
    &&  (target = s_open (&dst)))
        status = s_load (target, dump, false, dst.counter, "copied");
out:
    keystore_dump_destroy (&dump);
    keystore_destroy (&source);
    keystore_destroy (&target);
    s_side_free (&src);
    s_side_free (&dst);
    return status;
}

static int
s_backup (const char *dir, const char *file)
{
    keystore_t *keystore = cs_admin_keystore_open (dir, NULL);
    keystore_dump_t *dump = keystore ? keystore_dump_new (keystore) : NULL;
    size_t len = 0;
    uint8_t *image = dump ? keystore_dump_seal (keystore, dump, &len) : NULL;
    int status = image && cs_admin_file_write (file, image, len, 0600) == 0 ? CS_ADMIN_OK : CS_ADMIN_FAIL;
    if (status == CS_ADMIN_OK) {
        keystore_dump_counts_t n = keystore_dump_counts (dump);
        printf ("keystore %s: backed up to %s at counter %" PRIu64 ": %zu tenants, %zu keys, %zu objects, "
                "%zu issued, %zu audit rows\n", keystore_where (keystore), file, keystore_dump_counter (dump),
                n.tenants, n.keys, n.objects, n.issued, n.audit);
    }
    else
        cs_admin_error ("%s: no backup written (see above)", file);
    free (image);
    keystore_dump_destroy (&dump);
    keystore_destroy (&keystore);
    return status;
}

//  The backup file's bytes (malloc'd, *len_p), or NULL after printing why.
static uint8_t *
s_read_file (const char *file, size_t *len_p)
{
    zchunk_t *chunk = NULL;
    FILE *handle = fopen (file, "rb");
    if (handle) {
        chunk = zchunk_read (handle, 1 << 30);
        fclose (handle);
    }
    uint8_t *data = chunk ? malloc (zchunk_size (chunk) + 1) : NULL;
    if (data)
        memcpy (data, zchunk_data (chunk), zchunk_size (chunk));
    *len_p = chunk ? zchunk_size (chunk) : 0;
    zchunk_destroy (&chunk);
    if (!data)
        cs_admin_error ("%s: %s", file, handle ? "cannot read" : strerror (errno));
    return data;
}

static int
s_restore (const char *dir, const char *file, bool accept)
{
    keystore_t *keystore = cs_admin_keystore_open (dir, NULL);
    size_t len = 0;
    uint8_t *image = keystore ? s_read_file (file, &len) : NULL;
    keystore_dump_t *dump = image ? keystore_dump_unseal (keystore, image, len) : NULL;
    uint64_t file_counter = 0;
    int status = CS_ADMIN_FAIL;
    if (!dump || keystore_counter_file (keystore, &file_counter) != 0)
        cs_admin_error ("%s: not restored (see above)", file);
    else
    if (keystore_dump_counter (dump) < file_counter && !accept)
        cs_admin_error ("restore refused: backup %s is at counter %" PRIu64 ", below the keystore's "
                        "rollback counter %" PRIu64 ": it would roll the keystore back; "
                        "--accept-rollback restores it anyway", file, keystore_dump_counter (dump),
                        file_counter);
    else
        status = s_load (keystore, dump, true, NULL, "restored");
    keystore_dump_destroy (&dump);
    keystore_destroy (&keystore);
    free (image);
    if (status == CS_ADMIN_OK && accept) {
        uint8_t key [KEYSTORE_MASTER_KEY_LEN];
        char *location = NULL, *counter = NULL;
        long gone = cs_admin_keystore_locate (dir, NULL, &location, &counter, key) == 0
                  ? cs_admin_pool_discard (location, key, counter) : -1;
        OPENSSL_cleanse (key, sizeof key);
        if (gone >= 0)
            printf ("%ld sealed pool keys discarded (they may have been issued since the backup)\n", gone);
        status = gone >= 0 ? CS_ADMIN_OK : CS_ADMIN_FAIL;
        free (location);
        free (counter);
    }
    return status;
}

int
cs_admin_keystore_tools (int argc, char **argv)
{
    static const struct option options [] = {
        { "dir", required_argument, NULL, 'd' },    { "from", required_argument, NULL, 'f' },
        { "to", required_argument, NULL, 't' },     { "accept-rollback", no_argument, NULL, 'a' },
        { "help", no_argument, NULL, 'h' },         { NULL, 0, NULL, 0 }
    };
    const char *verb = argv [1], *dir = NULL, *from = NULL, *to = NULL, *file = NULL;
    bool accept = false;
    int opt;
    argc--, argv++;
    optind = 1;
    while ((opt = getopt_long (argc, argv, "+h", options, NULL)) != -1 || optind < argc) {
        if (opt == -1) {
            if (file)
                return s_usage (stderr, CS_ADMIN_USAGE);
            file = argv [optind++];
            continue;
        }
        switch (opt) {
            case 'd': dir = optarg; break;
            case 'f': from = optarg; break;
            case 't': to = optarg; break;
            case 'a': accept = true; break;
            case 'h': return s_usage (stdout, CS_ADMIN_OK);
            default:  return s_usage (stderr, CS_ADMIN_USAGE);
        }
    }
    if (streq (verb, "copy"))
        return from && to && !file && !accept ? s_copy (from, to, dir) : s_usage (stderr, CS_ADMIN_USAGE);
    if (!file || from || to || (accept && streq (verb, "backup")))
        return s_usage (stderr, CS_ADMIN_USAGE);
    return streq (verb, "backup") ? s_backup (dir ? dir : ".", file) : s_restore (dir ? dir : ".", file, accept);
}
