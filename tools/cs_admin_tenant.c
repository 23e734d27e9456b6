/*  cs_admin_tenant.c — `cryptoserver-admin tenant add|list|remove|set-pin`,
 *  and the helpers every keystore verb shares: the common options and
 *  opening DIR's keystore (keystore/path and keystore/master-key of
 *  broker.conf, man cryptoserver-keystore(5)).
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <openssl/crypto.h>
#include "cs_admin.h"
#include "cs_pin.h"
#include "cs_util.h"

/* ---- shared: options and opening the keystore ------------------------- */

void
cs_admin_ks_args_free (cs_admin_ks_args_t *args)
{
    cs_admin_ks_args_free_pin (&args->pin);
    cs_admin_ks_args_free_pin (&args->so_pin);
}

int
cs_admin_ks_parse (int argc, char **argv, cs_admin_ks_args_t *args)
{
    static const struct option options [] = {
        { "dir", required_argument, NULL, 'd' },    { "tenant", required_argument, NULL, 't' },
        { "pin", required_argument, NULL, 'p' },    { "so-pin", required_argument, NULL, 's' },
        { "so", no_argument, NULL, 'S' },           { "type", required_argument, NULL, 'y' },
        { "label", required_argument, NULL, 'l' },  { "id", required_argument, NULL, 'i' },
        { "file", required_argument, NULL, 'f' },   { "ref", required_argument, NULL, 'r' },
        { "master-key", required_argument, NULL, 'm' },
        { "board", required_argument, NULL, 'b' },  { "public-key", required_argument, NULL, 'P' },
        { "count", required_argument, NULL, 'n' },
        { "help", no_argument, NULL, 'h' },         { NULL, 0, NULL, 0 }
    };
    int opt;
    while ((opt = getopt_long (argc, argv, "+h", options, NULL)) != -1 || optind < argc) {
        if (opt == -1) {
            if (args->name)
                return CS_ADMIN_USAGE;
            args->name = argv [optind++];
            continue;
        }
        switch (opt) {
            case 'd': args->dir = optarg; break;
            case 't': args->tenant = optarg; break;
            case 'p': cs_admin_ks_args_free_pin (&args->pin); args->pin = strdup (optarg); break;
            case 's': cs_admin_ks_args_free_pin (&args->so_pin); args->so_pin = strdup (optarg); break;
            case 'S': args->so = true; break;
            case 'y': args->type = optarg; break;
            case 'l': args->label = optarg; break;
            case 'i': args->id = optarg; break;
            case 'f': args->file = optarg; break;
            case 'r': args->ref = optarg; break;
            case 'm': args->master_key = optarg; break;
            case 'b': args->board = optarg; break;
            case 'P': args->public_key = optarg; break;
            case 'n': args->count = optarg; break;
            case 'h': return CS_ADMIN_OK;
            default:  return CS_ADMIN_USAGE;
        }
    }
    return -1;
}

void
cs_admin_ks_args_free_pin (char **pin_p)
{
    if (*pin_p) {
        OPENSSL_cleanse (*pin_p, strlen (*pin_p));
        free (*pin_p);
        *pin_p = NULL;
    }
}

//  Reads the master key named by keystore/master-key (or the override
//  file).  Returns 0, or -1 after printing why.
static int
s_master_key (const char *dir, zconfig_t *config, const char *override,
              uint8_t key [KEYSTORE_MASTER_KEY_LEN])
{
    const char *name = override ? override : zconfig_get (config, "keystore/master-key", NULL);
    if (!name) {
        cs_admin_error ("%s/broker.conf has no keystore/master-key (made before issue 3? "
                        "run 'cryptoserver-admin init' again)", dir);
        return -1;
    }
    if (!override && strncmp (name, "board:", 6) == 0) {
        cs_admin_error ("the master key is wrapped by %s; the admin cannot unwrap it: give a "
                        "backup copy with --master-key FILE", name);
        return -1;
    }
    char *path = override ? strdup (override) : cs_path_resolve (dir, name);
    int rc = keystore_master_key_read (path, key);
    if (rc != 0)
        cs_admin_error ("%s: cannot read the master key (see above)", path);
    free (path);
    return rc;
}

//  The counter file of DIR's deployment: beside keystore/master-key, or
//  beside keystore/master-key-wrapped for a board-wrapped one (as the
//  broker's), relative to DIR.  malloc'd, or NULL.
static char *
s_counter_path (const char *dir, zconfig_t *config)
{
    const char *name = zconfig_get (config, "keystore/master-key", "master.key");
    if (strncmp (name, "board:", 6) == 0)
        name = zconfig_get (config, "keystore/master-key-wrapped", "master.key.wrapped");
    char *beside = cs_path_resolve (dir, name);
    char *path = keystore_counter_path (beside);
    free (beside);
    return path;
}

int
cs_admin_keystore_locate (const char *dir, const char *master_override, char **location_p,
                          char **counter_p, uint8_t key [KEYSTORE_MASTER_KEY_LEN])
{
    zconfig_t *config = cs_admin_conf_load (dir);
    if (!config)
        return -1;
    int rc = -1;
    //  keystore/url (PostgreSQL, as the broker's) or keystore/path (SQLite).
    const char *url = zconfig_get (config, "keystore/url", NULL);
    bool shared = url && *url;
    char *path = shared ? strdup (url)
                        : cs_path_resolve (dir, zconfig_get (config, "keystore/path", "keystore.db"));
    if (shared && !keystore_is_url (path))
        cs_admin_error ("%s/broker.conf: keystore/url must be a postgresql:// URL", dir);
    else
    if (!shared && access (path, F_OK) != 0)
        cs_admin_error ("%s: no keystore (is %s a deployment made by 'cryptoserver-admin init'?)",
                        path, dir);
    else
    if (s_master_key (dir, config, master_override, key) == 0)
        rc = 0;
    *location_p = rc == 0 ? path : NULL;
    *counter_p = rc == 0 ? s_counter_path (dir, config) : NULL;
    if (rc != 0)
        free (path);
    zconfig_destroy (&config);
    return rc;
}

keystore_t *
cs_admin_keystore_open (const char *dir, const char *master_override)
{
    uint8_t key [KEYSTORE_MASTER_KEY_LEN];
    char *path = NULL, *counter = NULL;
    if (cs_admin_keystore_locate (dir, master_override, &path, &counter, key) != 0)
        return NULL;
    keystore_t *keystore = keystore_open_counted (path, key, counter);
    OPENSSL_cleanse (key, sizeof key);
    if (!keystore) {
        char *name = keystore_location_name (path);
        cs_admin_error ("%s: cannot open the keystore (see above)", name ? name : "keystore");
        free (name);
    }
    free (path);
    free (counter);
    return keystore;
}

/* ---- tenant verbs ------------------------------------------------------- */

static int
s_tenant_usage (FILE *out, int status)
{
    fprintf (out,
        "usage: cryptoserver-admin tenant add NAME --pin PIN --so-pin SOPIN [--dir DIR]\n"
        "       cryptoserver-admin tenant list [--dir DIR]\n"
        "       cryptoserver-admin tenant remove NAME [--dir DIR]\n"
        "       cryptoserver-admin tenant set-pin NAME [--so] --pin PIN [--dir DIR]\n"
        "       cryptoserver-admin tenant set NAME [--max-ops-per-s N] [--max-inflight N]\n"
        "                          [--max-keys N] [--max-objects N] [--dir DIR]\n"
        "       cryptoserver-admin tenant show NAME [--dir DIR]\n"
        "\n"
        "Tenants live in DIR's keystore (keystore.db); each is one token (label =\n"
        "NAME, 1..32 characters) with a user PIN and an SO PIN (%d..%d bytes).\n"
        "remove deletes the tenant and every key of it.  set-pin sets the user\n"
        "PIN (or with --so the SO PIN) and clears its failure count and lock.\n"
        "All verbs take --master-key FILE to use another copy of the master key.\n"
        "The running broker sees the changes at once.  DIR defaults to '.'.\n",
        CS_PIN_MIN_LEN, CS_PIN_MAX_LEN);
    return status;
}

//  True when pin is given and of a valid length; prints why not.
static bool
s_pin_ok (const char *what, const char *pin)
{
    size_t len = pin ? strlen (pin) : 0;
    if (pin && len >= CS_PIN_MIN_LEN && len <= CS_PIN_MAX_LEN)
        return true;
    cs_admin_error ("%s: give %d..%d bytes", what, CS_PIN_MIN_LEN, CS_PIN_MAX_LEN);
    return false;
}

static int
s_tenant_add (keystore_t *keystore, cs_admin_ks_args_t *args)
{
    if (!s_pin_ok ("--pin", args->pin) || !s_pin_ok ("--so-pin", args->so_pin))
        return CS_ADMIN_USAGE;
    if (keystore_tenant_exists (keystore, args->name)) {
        cs_admin_error ("tenant %s already exists", args->name);
        return CS_ADMIN_FAIL;
    }
    if (keystore_tenant_add (keystore, args->name, args->pin, strlen (args->pin),
                             args->so_pin, strlen (args->so_pin)) != 0) {
        cs_admin_error ("cannot add tenant %s (see above)", args->name);
        return CS_ADMIN_FAIL;
    }
    printf ("added tenant %s (no keys yet); add clients with "
            "'cryptoserver-admin client add NAME --tenant %s'\n", args->name, args->name);
    return CS_ADMIN_OK;
}

static int
s_tenant_list (keystore_t *keystore)
{
    char **names = keystore_tenant_list (keystore);
    if (!names)
        return CS_ADMIN_FAIL;
    printf ("%-32s %5s %s\n", "TENANT", "KEYS", "PIN FLAGS");
    for (size_t i = 0; names [i]; i++) {
        Cs__KeyInfo **infos = NULL;
        size_t count = 0;
        if (keystore_key_list (keystore, names [i], &infos, &count) == 0) {
            for (size_t k = 0; k < count; k++)
                cs__key_info__free_unpacked (infos [k], NULL);
            free (infos);
        }
        CK_FLAGS flags = keystore_pin_flags (keystore, names [i]);
        printf ("%-32s %5zu%s%s%s%s%s\n", names [i], count,
                flags ? "" : " -",
                flags & CKF_USER_PIN_LOCKED ? " user-locked" :
                flags & CKF_USER_PIN_FINAL_TRY ? " user-final-try" :
                flags & CKF_USER_PIN_COUNT_LOW ? " user-count-low" : "",
                flags & CKF_SO_PIN_LOCKED ? " so-locked" : "",
                flags & CKF_SO_PIN_FINAL_TRY ? " so-final-try" : "",
                (flags & CKF_SO_PIN_COUNT_LOW) && !(flags & (CKF_SO_PIN_LOCKED | CKF_SO_PIN_FINAL_TRY))
                    ? " so-count-low" : "");
        free (names [i]);
    }
    free (names);
    return CS_ADMIN_OK;
}

static int
s_tenant_remove (keystore_t *keystore, cs_admin_ks_args_t *args)
{
    if (keystore_tenant_remove (keystore, args->name) != 0) {
        cs_admin_error ("no tenant %s", args->name);
        return CS_ADMIN_FAIL;
    }
    printf ("removed tenant %s and its keys (its clients can no longer log in: remove them "
            "with 'cryptoserver-admin client remove')\n", args->name);
    return CS_ADMIN_OK;
}

static int
s_tenant_set_pin (keystore_t *keystore, cs_admin_ks_args_t *args)
{
    if (!s_pin_ok ("--pin", args->pin))
        return CS_ADMIN_USAGE;
    CK_RV rv = keystore_pin_set (keystore, args->name, args->so ? CKU_SO : CKU_USER,
                                 args->pin, strlen (args->pin), NULL);
    if (rv != CKR_OK) {
        cs_admin_error ("cannot set the PIN of tenant %s (no such tenant, or its row does not "
                        "verify: see above)", args->name);
        return CS_ADMIN_FAIL;
    }
    printf ("set the %s PIN of tenant %s (failure count cleared, unlocked, its logins ended)\n",
            args->so ? "SO" : "user", args->name);
    return CS_ADMIN_OK;
}

//  Runs the sub-verb on the opened keystore.
static int
s_tenant_run (const char *verb, cs_admin_ks_args_t *args)
{
    bool needs_name = !streq (verb, "list");
    if (needs_name != (args->name != NULL))
        return s_tenant_usage (stderr, CS_ADMIN_USAGE);
    if (needs_name && (!cs_admin_name_ok (args->name) || strlen (args->name) > 32)) {
        cs_admin_error ("bad tenant name '%s' (1..32 of letters, digits, _ . -)", args->name);
        return CS_ADMIN_USAGE;
    }
    if (!streq (verb, "add") && !streq (verb, "list") && !streq (verb, "remove")
    &&  !streq (verb, "set-pin")) {
        cs_admin_error ("unknown tenant verb '%s' (add, list, remove, set-pin)", verb);
        return CS_ADMIN_USAGE;
    }
    keystore_t *keystore = cs_admin_keystore_open (args->dir, args->master_key);
    if (!keystore)
        return CS_ADMIN_FAIL;
    int status = streq (verb, "add") ? s_tenant_add (keystore, args)
               : streq (verb, "list") ? s_tenant_list (keystore)
               : streq (verb, "remove") ? s_tenant_remove (keystore, args)
               : s_tenant_set_pin (keystore, args);
    keystore_destroy (&keystore);
    return status;
}

int
cs_admin_tenant (int argc, char **argv)
{
    if (argc < 2)
        return s_tenant_usage (stderr, CS_ADMIN_USAGE);
    const char *verb = argv [1];
    if (streq (verb, "--help") || streq (verb, "-h"))
        return s_tenant_usage (stdout, CS_ADMIN_OK);
    if (streq (verb, "set") || streq (verb, "show"))       /* quotas: cs_admin_quota.c */
        return cs_admin_tenant_quota (argc - 1, argv + 1);
    cs_admin_ks_args_t args = { .dir = "." };
    int status = cs_admin_ks_parse (argc - 1, argv + 1, &args);
    if (status >= 0)
        status = s_tenant_usage (status == CS_ADMIN_OK ? stdout : stderr, status);
    else
        status = s_tenant_run (verb, &args);
    cs_admin_ks_args_free (&args);
    return status;
}
