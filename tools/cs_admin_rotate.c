/*  cs_admin_rotate.c — `cryptoserver-admin master-key rotate`: the
 *  keystore's master key replaced by a new random one (issue #22 item 3;
 *  cryptoserver-keystore(5) "The master key").
 *
 *  Order, so that no crash loses the key the keystore is under: the new
 *  key is written to FILE.new (0600) first; the keystore is re-sealed
 *  under it in one transaction (keystore_master_rotate); only then is the
 *  old FILE shredded and FILE.new renamed to FILE.  A crash before the
 *  commit leaves FILE in force (FILE.new unused); after it, FILE.new is
 *  the key.  */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>
#include "cs_admin.h"
#include "cs_util.h"

static int
s_usage (FILE *out, int status)
{
    fprintf (out,
        "usage: cryptoserver-admin master-key rotate [--dir DIR]\n"
        "\n"
        "Replaces the keystore's master key DIR/master.key (keystore/master-key\n"
        "of broker.conf) by a new random key: every private key, private object,\n"
        "the data key and the check value are sealed again under it in one\n"
        "transaction, the old key file is shredded.  Running brokers go on\n"
        "signing with the keys they hold; restart each with the new key file.\n"
        "A master key wrapped by a board is not rotated by this verb.\n");
    return status;
}

//  Writes key as 64 hex digits and a newline to path (0600).  0 or -1.
static int
s_key_write (const char *path, const uint8_t key [KEYSTORE_MASTER_KEY_LEN])
{
    char hex [2 * KEYSTORE_MASTER_KEY_LEN + 2];
    cs_hex_encode (key, KEYSTORE_MASTER_KEY_LEN, hex);
    strcat (hex, "\n");
    int rc = cs_admin_file_write (path, hex, strlen (hex), 0600);
    OPENSSL_cleanse (hex, sizeof hex);
    return rc;
}

//  The rotation of args->dir's master key file.
static int
s_rotate (const char *dir)
{
    zconfig_t *config = cs_admin_conf_load (dir);
    if (!config)
        return CS_ADMIN_FAIL;
    const char *current = zconfig_get (config, "keystore/master-key", "master.key");
    char *key_path = cs_path_resolve (dir, current), *location = NULL, *counter = NULL;
    char *new_path = key_path ? zsys_sprintf ("%s.new", key_path) : NULL;
    uint8_t key [KEYSTORE_MASTER_KEY_LEN], next [KEYSTORE_MASTER_KEY_LEN];
    keystore_t *ks = NULL;
    int status = CS_ADMIN_FAIL;
    if (strncmp (current, "board:", 6) == 0)
        cs_admin_error ("the master key is wrapped by a board (%s): not rotated by this verb", current);
    else
    if (!key_path || !new_path || RAND_priv_bytes (next, sizeof next) != 1)
        cs_admin_error ("out of memory or random bytes");
    else
    if (cs_admin_keystore_locate (dir, NULL, &location, &counter, key) == 0
    &&  (ks = keystore_open_counted (location, key, counter))
    &&  s_key_write (new_path, next) == 0) {
        if (keystore_master_rotate (ks, next) != 0)
            cs_admin_error ("%s: the master key was not rotated (nothing changed); %s is not used",
                            location, new_path);
        else
        if (cs_admin_shred (key_path) == 0 && rename (new_path, key_path) != 0)
            cs_admin_error ("%s: the keystore is under the key in %s now, but it could not be renamed "
                            "to %s: %s", location, new_path, key_path, strerror (errno));
        else {
            printf ("rotated the master key of %s; the old %s shredded, the new key is in it; "
                    "restart every broker of this keystore\n", location, key_path);
            status = CS_ADMIN_OK;
        }
    }
    keystore_destroy (&ks);
    OPENSSL_cleanse (key, sizeof key);
    OPENSSL_cleanse (next, sizeof next);
    free (location);
    free (counter);
    free (key_path);
    zstr_free (&new_path);
    zconfig_destroy (&config);
    return status;
}

int
cs_admin_master_rotate (int argc, char **argv)
{
    cs_admin_ks_args_t args = { .dir = "." };
    int status = cs_admin_ks_parse (argc - 1, argv + 1, &args);
    if (status >= 0)
        status = s_usage (status == CS_ADMIN_OK ? stdout : stderr, status);
    else
    if (args.name || args.board || args.label || args.public_key || args.master_key)
        status = s_usage (stderr, CS_ADMIN_USAGE);
    else
        status = s_rotate (args.dir);
    cs_admin_ks_args_free (&args);
    return status;
}
