/*  cs_admin_board.c — `cryptoserver-admin board add|list|remove`: the boards
 *  (back-end drivers) in the `drivers` section of DIR/broker.conf.
 *
 *  Each board is one child of `drivers` whose keys are passed to the driver
 *  named by `type` (docs/CONTRACTS.md, "Broker config").  The file is edited
 *  with zconfig load/save so it stays valid ZPL; the running broker reads it
 *  at start only.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cs_admin.h"

#define MAX_THREADS 1024

typedef struct {
    const char *dir;
    const char *name;
    zlist_t *pairs;             /* "key=value" strings, borrowed from argv */
} s_board_args_t;

static int
s_board_usage (FILE *out, int status)
{
    fprintf (out,
        "usage: cryptoserver-admin board add NAME --type TYPE [--dir DIR] [--threads N]\n"
        "              [--module PATH] [--token LABEL] [--pin-file FILE]\n"
        "              [--key-file FILE] [--key-id HEX] [--set KEY=VALUE ...]\n"
        "       cryptoserver-admin board list [--dir DIR]\n"
        "       cryptoserver-admin board remove NAME [--dir DIR]\n"
        "\n"
        "Edits the drivers section of DIR/broker.conf (DIR defaults to '.');\n"
        "restart the broker to apply.  Type pkcs11 needs --module, --token and\n"
        "--pin-file.  Every option becomes the board's config key of the same name;\n"
        "--set adds any other key the driver reads.  Files named by --pin-file and\n"
        "--key-file must exist; they are written relative to DIR when inside it.\n");
    return status;
}

//  Returns the drivers section, creating it when missing.
static zconfig_t *
s_drivers (zconfig_t *config)
{
    zconfig_t *drivers = zconfig_locate (config, "drivers");
    return drivers ? drivers : zconfig_new ("drivers", config);
}

//  Returns the value of "key=value" pair `key` in args->pairs, or NULL.
static const char *
s_pair_value (s_board_args_t *args, const char *key)
{
    size_t len = strlen (key);
    for (const char *pair = zlist_first (args->pairs); pair; pair = zlist_next (args->pairs))
        if (strncmp (pair, key, len) == 0 && pair [len] == '=')
            return pair + len + 1;
    return NULL;
}

//  Checks the options a board needs.  Returns 0, or -1 after printing why.
static int
s_board_validate (s_board_args_t *args)
{
    const char *type = s_pair_value (args, "type");
    const char *threads = s_pair_value (args, "threads");
    if (!type || !cs_admin_name_ok (type)) {
        cs_admin_error ("board %s: --type TYPE is required (pkcs11, sim, ...)", args->name);
        return -1;
    }
    if (streq (type, "pkcs11")
    && (!s_pair_value (args, "module") || !s_pair_value (args, "token")
    ||  !s_pair_value (args, "pin-file"))) {
        cs_admin_error ("board %s: type pkcs11 needs --module, --token and --pin-file", args->name);
        return -1;
    }
    if (threads) {
        char *end;
        long count = strtol (threads, &end, 10);
        if (*end || count < 1 || count > MAX_THREADS) {
            cs_admin_error ("board %s: --threads must be 1..%d", args->name, MAX_THREADS);
            return -1;
        }
    }
    return 0;
}

//  Writes one "key=value" pair into the board's node; file paths are made
//  relative to DIR (or absolute).  Returns 0 or -1.
static int
s_board_put (s_board_args_t *args, zconfig_t *board, const char *pair)
{
    const char *equals = strchr (pair, '=');
    char *key = strndup (pair, (size_t) (equals - pair));
    const char *value = equals + 1;
    char *resolved = NULL;
    //  A module named by absolute path or bare name (found by dlopen) is kept
    //  as given; files are made relative to DIR when inside it.
    bool is_file = streq (key, "pin-file") || streq (key, "key-file")
                || (streq (key, "module") && value [0] != '/' && strchr (value, '/'));
    if (is_file && !(resolved = cs_admin_path_for_config (args->dir, value))) {
        free (key);
        return -1;
    }
    zconfig_put (board, key, resolved ? resolved : value);
    free (resolved);
    free (key);
    return 0;
}

static int
s_board_add (s_board_args_t *args)
{
    if (s_board_validate (args) != 0)
        return CS_ADMIN_USAGE;
    zconfig_t *config = cs_admin_conf_load (args->dir);
    if (!config)
        return CS_ADMIN_FAIL;
    int status = CS_ADMIN_FAIL;
    zconfig_t *drivers = s_drivers (config);
    if (zconfig_locate (drivers, args->name)) {
        cs_admin_error ("board %s already exists in %s/broker.conf (remove it first)",
                        args->name, args->dir);
        goto out;
    }
    zconfig_t *board = zconfig_new (args->name, drivers);
    for (const char *pair = zlist_first (args->pairs); pair; pair = zlist_next (args->pairs))
        if (s_board_put (args, board, pair) != 0)
            goto out;
    char *path = cs_admin_path (args->dir, "broker.conf");
    if (cs_admin_conf_save (config, path, 0600) == 0) {
        printf ("added board %s (type %s) to %s\n", args->name, s_pair_value (args, "type"), path);
        status = CS_ADMIN_OK;
    }
    zstr_free (&path);
out:
    zconfig_destroy (&config);
    return status;
}

static int
s_board_list (s_board_args_t *args)
{
    zconfig_t *config = cs_admin_conf_load (args->dir);
    if (!config)
        return CS_ADMIN_FAIL;
    printf ("%-16s %-8s %-7s %s\n", "BOARD", "TYPE", "THREADS", "DETAILS");
    zconfig_t *drivers = zconfig_locate (config, "drivers");
    for (zconfig_t *board = drivers ? zconfig_child (drivers) : NULL; board;
         board = zconfig_next (board)) {
        const char *token = zconfig_get (board, "token", NULL);
        const char *module = zconfig_get (board, "module", NULL);
        printf ("%-16s %-8s %-7s", zconfig_name (board), zconfig_get (board, "type", "?"),
                zconfig_get (board, "threads", "1"));
        if (token)
            printf (" token=%s", token);
        if (module)
            printf (" module=%s", module);
        printf ("\n");
    }
    zconfig_destroy (&config);
    return CS_ADMIN_OK;
}

//  Copies the subtree under `from` (its children, recursively) below `to`,
//  leaving out the node `skip`.  (zconfig_remove is CZMQ draft API.)
static void
s_copy_children (zconfig_t *from, zconfig_t *to, zconfig_t *skip)
{
    for (zconfig_t *node = zconfig_child (from); node; node = zconfig_next (node)) {
        if (node == skip)
            continue;
        zconfig_t *copy = zconfig_new (zconfig_name (node), to);
        if (zconfig_value (node))
            zconfig_set_value (copy, "%s", zconfig_value (node));
        s_copy_children (node, copy, skip);
    }
}

static int
s_board_remove (s_board_args_t *args)
{
    zconfig_t *config = cs_admin_conf_load (args->dir);
    if (!config)
        return CS_ADMIN_FAIL;
    int status = CS_ADMIN_FAIL;
    zconfig_t *drivers = zconfig_locate (config, "drivers");
    zconfig_t *board = drivers ? zconfig_locate (drivers, args->name) : NULL;
    if (!board)
        cs_admin_error ("no board %s in %s/broker.conf", args->name, args->dir);
    else {
        zconfig_t *copy = zconfig_new ("root", NULL);
        zlist_t *comments = zconfig_comments (config);
        for (char *line = comments ? zlist_first (comments) : NULL; line; line = zlist_next (comments))
            zconfig_set_comment (copy, "%s", line);
        s_copy_children (config, copy, board);
        char *path = cs_admin_path (args->dir, "broker.conf");
        if (cs_admin_conf_save (copy, path, 0600) == 0) {
            printf ("removed board %s from %s\n", args->name, path);
            status = CS_ADMIN_OK;
        }
        zstr_free (&path);
        zconfig_destroy (&copy);
    }
    zconfig_destroy (&config);
    return status;
}

//  Turns "--option value" into a "option=value" pair for the board; the
//  string is also appended to `owned`, whose strings the caller frees.
static void
s_pair_add (s_board_args_t *args, const char *key, const char *value, zlist_t *owned)
{
    char *pair = zsys_sprintf ("%s=%s", key, value);
    zlist_append (owned, pair);
    zlist_append (args->pairs, pair);
}

//  Parses the options after the sub-verb.  Returns -1 on success, else the
//  exit status.  Positional arguments (the board name) go to args->name.
static int
s_board_parse (int argc, char **argv, s_board_args_t *args, zlist_t *owned)
{
    static const struct option options [] = {
        { "dir", required_argument, NULL, 'd' },
        { "type", required_argument, NULL, 'k' },
        { "module", required_argument, NULL, 'k' },
        { "token", required_argument, NULL, 'k' },
        { "pin-file", required_argument, NULL, 'k' },
        { "threads", required_argument, NULL, 'k' },
        { "key-file", required_argument, NULL, 'k' },
        { "key-id", required_argument, NULL, 'k' },
        { "set", required_argument, NULL, 's' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 }
    };
    int opt, index = 0;
    while ((opt = getopt_long (argc, argv, "+h", options, &index)) != -1 || optind < argc) {
        if (opt == -1) {
            if (args->name)
                return s_board_usage (stderr, CS_ADMIN_USAGE);
            args->name = argv [optind++];
            continue;
        }
        if (opt == 'd')
            args->dir = optarg;
        else
        if (opt == 'k')
            s_pair_add (args, options [index].name, optarg, owned);
        else
        if (opt == 's') {
            const char *equals = strchr (optarg, '=');
            if (!equals || equals == optarg) {
                cs_admin_error ("--set needs KEY=VALUE, not '%s'", optarg);
                return CS_ADMIN_USAGE;
            }
            zlist_append (args->pairs, optarg);
        }
        else
            return s_board_usage (opt == 'h' ? stdout : stderr, opt == 'h' ? CS_ADMIN_OK : CS_ADMIN_USAGE);
    }
    return -1;
}

int
cs_admin_board (int argc, char **argv)
{
    if (argc < 2)
        return s_board_usage (stderr, CS_ADMIN_USAGE);
    const char *verb = argv [1];
    if (streq (verb, "--help") || streq (verb, "-h"))
        return s_board_usage (stdout, CS_ADMIN_OK);
    s_board_args_t args = { .dir = "." };
    args.pairs = zlist_new ();
    zlist_t *kept = zlist_new ();
    int status = s_board_parse (argc - 1, argv + 1, &args, kept);
    bool needs_name = streq (verb, "add") || streq (verb, "remove");
    if (status < 0 && needs_name != (args.name != NULL))
        status = s_board_usage (stderr, CS_ADMIN_USAGE);
    if (status < 0 && needs_name && !cs_admin_name_ok (args.name)) {
        cs_admin_error ("bad board name '%s' (letters, digits, _ . - only)", args.name);
        status = CS_ADMIN_USAGE;
    }
    if (status < 0) {
        if (streq (verb, "add"))
            status = s_board_add (&args);
        else
        if (streq (verb, "list"))
            status = s_board_list (&args);
        else
        if (streq (verb, "remove"))
            status = s_board_remove (&args);
        else {
            cs_admin_error ("unknown board verb '%s' (add, list, remove)", verb);
            status = CS_ADMIN_USAGE;
        }
    }
    for (char *pair = zlist_first (kept); pair; pair = zlist_next (kept))
        free (pair);
    zlist_destroy (&kept);
    zlist_destroy (&args.pairs);
    return status;
}
