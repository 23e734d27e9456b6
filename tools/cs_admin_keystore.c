/*  cs_admin_keystore.c — `cryptoserver-admin keystore upgrade|accept-rollback`:
 *  the operator's two explicit acts on a keystore that the broker refuses
 *  to open as it is (cryptoserver-keystore(5) "Schema" and "Rollback"):
 *  upgrading an older schema, and accepting an older copy of the database.
 *  Neither ever happens implicitly at a start.  Both are logged (stderr and
 *  the keystore's log lines) and printed.
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/crypto.h>
#include "cs_admin.h"

static int
s_usage (FILE *out, int status)
{
    fprintf (out,
        "usage: cryptoserver-admin keystore upgrade [DIR] [--master-key FILE] [--keystore-url URL]\n"
        "       cryptoserver-admin keystore accept-rollback [DIR] [--master-key FILE]\n"
        "                                                  [--keystore-url URL]\n"
        "\n"
        "upgrade brings a keystore made by an earlier version (schema 1 to 6) to\n"
        "schema 7 (6 adds the audit table, 7 the data key that master-key rotate\n"
        "re-seals): the schema version, row MAC format and master key check are\n"
        "then bound to a MAC'd state record.  The broker refuses such a keystore\n"
        "until this is run; run it only on a keystore you trust (schema 1 rows\n"
        "get their MACs as they stand).  A keystore whose stored schema is lower\n"
        "than its tables show, that lacks a MAC column of its schema, whose state\n"
        "record says otherwise, or whose counter file shows it was at schema 5 or later, is\n"
        "refused: it was changed without the master key.\n"
        "\n"
        "accept-rollback accepts a keystore whose counter is below the sealed\n"
        "counter file beside the master key (DIR/keystore.counter): an older copy\n"
        "put back (a restored backup), rows put back, deleted or added without the\n"
        "master key, or a counter file that does not verify.  The keystore's rows\n"
        "are then vouched for as they are, its counter moves above both, and the\n"
        "file with it.  Its sealed pre-generated keys (tenant @pool) are discarded:\n"
        "they may have been issued since the copy was made.\n"
        "\n"
        "DIR (or --dir DIR) is the deployment (default '.'): keystore/path or\n"
        "keystore/url and keystore/master-key of DIR/broker.conf.  --keystore-url\n"
        "names a PostgreSQL keystore instead of DIR's; --master-key another copy\n"
        "of the master key.  Stop every broker of the keystore first.\n"
        "\n"
        "keystore copy|backup|restore: see 'cryptoserver-admin keystore copy --help'.\n");
    return status;
}

long
cs_admin_pool_discard (const char *location, const uint8_t key [KEYSTORE_MASTER_KEY_LEN], const char *counter)
{
    keystore_t *keystore = keystore_open_counted (location, key, counter);
    Cs__KeyInfo **infos = NULL;
    size_t count = 0;
    long gone = 0;
    if (!keystore)
        return -1;
    if (keystore_tenant_exists (keystore, "@pool") && keystore_key_list (keystore, "@pool", &infos, &count) != 0)
        gone = -1;
    for (size_t i = 0; i < count; i++) {
        if (gone >= 0 && keystore_key_delete (keystore, "@pool", infos [i]->ref) == 0)
            gone++;
        else
            gone = -1;
        cs__key_info__free_unpacked (infos [i], NULL);
    }
    free (infos);
    keystore_destroy (&keystore);
    return gone;
}

int
cs_admin_keystore (int argc, char **argv)
{
    static const struct option options [] = {
        { "dir", required_argument, NULL, 'd' },    { "master-key", required_argument, NULL, 'm' },
        { "keystore-url", required_argument, NULL, 'k' },
        { "help", no_argument, NULL, 'h' },         { NULL, 0, NULL, 0 }
    };
    if (argc < 2)
        return s_usage (stderr, CS_ADMIN_USAGE);
    const char *verb = argv [1], *dir = NULL, *master = NULL, *url = NULL;
    if (streq (verb, "--help") || streq (verb, "-h"))
        return s_usage (stdout, CS_ADMIN_OK);
    if (streq (verb, "copy") || streq (verb, "backup") || streq (verb, "restore"))
        return cs_admin_keystore_tools (argc, argv);
    if (!streq (verb, "upgrade") && !streq (verb, "accept-rollback")) {
        cs_admin_error ("keystore: unknown verb '%s' (try --help)", verb);
        return CS_ADMIN_USAGE;
    }
    int opt;
    argc--, argv++;
    optind = 1;
    while ((opt = getopt_long (argc, argv, "+h", options, NULL)) != -1 || optind < argc) {
        if (opt == -1) {
            if (dir)
                return s_usage (stderr, CS_ADMIN_USAGE);
            dir = argv [optind++];
            continue;
        }
        switch (opt) {
            case 'd': dir = optarg; break;
            case 'm': master = optarg; break;
            case 'k': url = optarg; break;
            case 'h': return s_usage (stdout, CS_ADMIN_OK);
            default:  return s_usage (stderr, CS_ADMIN_USAGE);
        }
    }
    if (url && !keystore_is_url (url)) {
        cs_admin_error ("--keystore-url must be a PostgreSQL URL postgresql://...");
        return CS_ADMIN_USAGE;
    }
    uint8_t key [KEYSTORE_MASTER_KEY_LEN];
    char *location = NULL, *counter = NULL;
    if (cs_admin_keystore_locate (dir ? dir : ".", master, &location, &counter, key) != 0)
        return CS_ADMIN_FAIL;
    if (url) {
        free (location);
        location = strdup (url);
    }
    char *name = keystore_location_name (location);
    int status = CS_ADMIN_FAIL;
    if (streq (verb, "upgrade")) {
        int from = location ? keystore_upgrade (location, key, counter) : -1;
        if (from > 0)
            printf ("keystore %s: upgraded from schema %d to %d\n", name, from, KEYSTORE_SCHEMA);
        else
        if (from == 0)
            printf ("keystore %s: schema %d already: nothing to upgrade\n", name, KEYSTORE_SCHEMA);
        else
            cs_admin_error ("%s: not upgraded (see above)", name ? name : "keystore");
        status = from >= 0 ? CS_ADMIN_OK : CS_ADMIN_FAIL;
    }
    else {
        uint64_t value = 0;
        long gone = -1;
        if (location && keystore_accept_rollback (location, key, counter, &value) == 0
        &&  (gone = cs_admin_pool_discard (location, key, counter)) >= 0) {
            printf ("keystore %s: rollback accepted: its counter and %s are %" PRIu64 " now; "
                    "%ld sealed pool keys discarded (they may have been issued since)\n",
                    name, counter, value, gone);
            status = CS_ADMIN_OK;
        }
        else
            cs_admin_error ("%s: rollback not accepted (see above)", name ? name : "keystore");
    }
    OPENSSL_cleanse (key, sizeof key);
    free (name);
    free (location);
    free (counter);
    return status;
}
