/*  cs_admin_client.c — `cryptoserver-admin client add|list|remove`.
 *
 *  A client is a CURVE key pair in DIR/clients/NAME/ with a ready client.conf
 *  and a pinned copy of broker.cert; its public cert in DIR/clients.d/ is the
 *  broker's allow-list entry (running brokers watch clients.d with inotify,
 *  so add and remove take effect at once, without a restart).
 */
#include <dirent.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "cs_admin.h"

typedef struct {
    const char *dir;
    const char *name;
    const char *tenant;
    const char *endpoint;
} s_client_args_t;

static int
s_client_usage (FILE *out, int status)
{
    fprintf (out,
        "usage: cryptoserver-admin client add NAME [--dir DIR] [--tenant T] [--endpoint E]\n"
        "       cryptoserver-admin client list [--dir DIR]\n"
        "       cryptoserver-admin client remove NAME [--dir DIR]\n"
        "\n"
        "add: makes DIR/clients/NAME/ (client.cert, client.cert_secret 0600,\n"
        "broker.cert, client.conf) and admits the key by writing\n"
        "DIR/clients.d/NAME.cert; prints the client.conf path as its last line.\n"
        "  --tenant T     the tenant the client acts for; it must exist in the keystore\n"
        "                 (default: the first tenant by name)\n"
        "  --endpoint E   the broker endpoint(s) to connect to, comma-separated\n"
        "                 (default: broker/endpoint of broker.conf)\n"
        "remove: deletes the allow-list entry (running brokers refuse the key from\n"
        "its next request on) and DIR/clients/NAME/.\n"
        "DIR defaults to the current directory.\n");
    return status;
}

//  Returns the tenant to use as a malloc'd string (caller frees):
//  args->tenant if it exists in DIR's keystore, the first tenant (by name)
//  if none was given, or NULL after printing why.
static char *
s_client_tenant (s_client_args_t *args)
{
    keystore_t *keystore = cs_admin_keystore_open (args->dir, NULL);
    if (!keystore)
        return NULL;
    char *tenant = NULL;
    if (args->tenant) {
        if (args->tenant [0] == '@')
            cs_admin_error ("tenant %s is reserved for the broker (names starting with '@')", args->tenant);
        else
        if (keystore_tenant_exists (keystore, args->tenant))
            tenant = strdup (args->tenant);
        else
            cs_admin_error ("no tenant %s in %s's keystore (add it with 'cryptoserver-admin "
                            "tenant add')", args->tenant, args->dir);
    }
    else {
        char **names = keystore_tenant_list (keystore);
        size_t skip = 0;
        while (names && names [skip] && names [skip][0] == '@')    /* reserved: the broker's key pool */
            skip++;
        if (names && names [skip])
            tenant = strdup (names [skip]);
        else
            cs_admin_error ("%s's keystore has no tenants", args->dir);
        for (size_t i = 0; names && names [i]; i++)
            free (names [i]);
        free (names);
    }
    keystore_destroy (&keystore);
    return tenant;
}

//  Returns the endpoint(s) a client should connect to, as a malloc'd string:
//  the broker's bind endpoint with a wildcard host ("*", 0.0.0.0) replaced by
//  127.0.0.1.  Warns when the port is only chosen at broker start.
static char *
s_client_endpoint (s_client_args_t *args, zconfig_t *config)
{
    if (args->endpoint)
        return strdup (args->endpoint);
    const char *bind = zconfig_get (config, "broker/endpoint", CS_ADMIN_DEFAULT_ENDPOINT);
    char *endpoint = NULL;
    if (strncmp (bind, "tcp://*:", 8) == 0)
        endpoint = zsys_sprintf ("tcp://127.0.0.1:%s", bind + 8);
    else
    if (strncmp (bind, "tcp://0.0.0.0:", 14) == 0)
        endpoint = zsys_sprintf ("tcp://127.0.0.1:%s", bind + 14);
    else
        endpoint = strdup (bind);
    if (strlen (endpoint) > 2 && streq (endpoint + strlen (endpoint) - 2, ":*"))
        fprintf (stderr, "cryptoserver-admin: note: the broker picks its port at start; set it "
                 "later with 'cryptoserver-admin config set CLIENT.CONF client/endpoints E'\n");
    return endpoint;
}

//  Writes client.conf (docs/CONTRACTS.md, "Client config") into `home`.
static int
s_client_conf_write (const char *home, const char *endpoint, bool curve)
{
    zconfig_t *config = zconfig_new ("root", NULL);
    zconfig_set_comment (config, " client.conf: cryptoserver-pkcs11.so configuration (ZPL), made by");
    zconfig_set_comment (config, " cryptoserver-admin client add.  Point CRYPTOSERVER_CONF at this file.");
    zconfig_set_comment (config, " Relative paths are relative to this file's directory.");
    zconfig_put (config, "client/endpoints", endpoint);
    zconfig_put (config, "client/broker-cert", "broker.cert");
    zconfig_put (config, "client/certificate", "client.cert");
    zconfig_put (config, "client/curve", curve ? "true" : "false");
    zconfig_put (config, "client/timeout-ms", "10000");
    zconfig_put (config, "client/log-level", "warning");
    char *path = cs_admin_path (home, "client.conf");
    int rc = cs_admin_conf_save (config, path, 0644);
    zstr_free (&path);
    zconfig_destroy (&config);
    return rc;
}

//  Makes the client's key pair: HOME/client.cert, HOME/client.cert_secret
//  (0600) and ALLOW (the public cert in clients.d).
static int
s_client_cert_write (const char *home, const char *allow, const char *name, const char *tenant)
{
    zcert_t *cert = zcert_new ();
    if (!cert) {
        cs_admin_error ("cannot make a CURVE key pair");
        return -1;
    }
    zcert_set_meta (cert, "name", "%s", name);
    zcert_set_meta (cert, "tenant", "%s", tenant);
    char *path = cs_admin_path (home, "client.cert");
    char *secret = cs_admin_path (home, "client.cert_secret");
    mode_t old_mask = umask (077);
    int rc = zcert_save (cert, path);
    umask (old_mask);
    if (rc == 0)
        rc = chmod (secret, 0600) | chmod (path, 0644);
    if (rc == 0)
        rc = zcert_save_public (cert, allow);
    if (rc == 0)
        rc = chmod (allow, 0644);
    if (rc != 0)
        cs_admin_error ("%s: cannot save the client key pair", path);
    zstr_free (&path);
    zstr_free (&secret);
    zcert_destroy (&cert);
    return rc;
}

static int
s_client_add (s_client_args_t *args)
{
    zconfig_t *config = cs_admin_conf_load (args->dir);
    if (!config)
        return CS_ADMIN_FAIL;
    int status = CS_ADMIN_FAIL;
    char *home = zsys_sprintf ("%s/clients/%s", args->dir, args->name);
    char *allow = zsys_sprintf ("%s/clients.d/%s.cert", args->dir, args->name);
    char *from = cs_admin_path (args->dir, "broker.cert");
    char *to = cs_admin_path (home, "broker.cert");
    char *endpoint = NULL;
    char *tenant = s_client_tenant (args);
    if (!tenant)
        goto out;
    if (access (allow, F_OK) == 0 || access (home, F_OK) == 0) {
        cs_admin_error ("client %s already exists (%s or %s); remove it first", args->name, allow, home);
        goto out;
    }
    endpoint = s_client_endpoint (args, config);
    bool curve = !streq (zconfig_get (config, "broker/curve/enabled", "true"), "false");
    if (zsys_dir_create ("%s", home) != 0 || chmod (home, 0700) != 0
    ||  zsys_dir_create ("%s/clients.d", args->dir) != 0) {
        cs_admin_error ("%s: cannot create the directory", home);
        goto out;
    }
    //  The allow-list entry is written last: the client is admitted only
    //  once its config is complete.
    if (cs_admin_file_copy (from, to, 0644) != 0
    ||  s_client_conf_write (home, endpoint, curve) != 0
    ||  s_client_cert_write (home, allow, args->name, tenant) != 0)
        goto out;
    printf ("added client %s (tenant %s), allowed by %s\n", args->name, tenant, allow);
    printf ("%s/client.conf\n", home);
    status = CS_ADMIN_OK;
out:
    free (tenant);
    zstr_free (&endpoint);
    zstr_free (&home);
    zstr_free (&allow);
    zstr_free (&from);
    zstr_free (&to);
    zconfig_destroy (&config);
    return status;
}

static int
s_client_remove (s_client_args_t *args)
{
    char *home = zsys_sprintf ("%s/clients/%s", args->dir, args->name);
    char *allow = zsys_sprintf ("%s/clients.d/%s.cert", args->dir, args->name);
    bool had_allow = access (allow, F_OK) == 0, had_home = cs_admin_is_dir (home);
    int status = CS_ADMIN_OK;
    if (!had_allow && !had_home) {
        cs_admin_error ("no client %s in %s", args->name, args->dir);
        status = CS_ADMIN_FAIL;
    }
    else
    if (had_allow && unlink (allow) != 0) {
        cs_admin_error ("%s: cannot remove", allow);
        status = CS_ADMIN_FAIL;
    }
    else {
        if (had_home) {
            zdir_t *dir = zdir_new (home, NULL);
            if (dir)
                zdir_remove (dir, true);
            zdir_destroy (&dir);
        }
        if (cs_admin_is_dir (home)) {
            cs_admin_error ("%s: cannot remove the directory", home);
            status = CS_ADMIN_FAIL;
        }
        else
            printf ("removed client %s (running brokers refuse its key from its next request)\n",
                    args->name);
    }
    zstr_free (&home);
    zstr_free (&allow);
    return status;
}

static int
s_compare (void *item1, void *item2)
{
    return strcmp ((const char *) item1, (const char *) item2);
}

//  Prints one allow-list entry: name, tenant, public key, config path.
static void
s_client_print (const char *dir, const char *file)
{
    char *path = zsys_sprintf ("%s/clients.d/%s", dir, file);
    zcert_t *cert = zcert_load (path);
    char *name = strndup (file, strlen (file) - 5);
    char *conf = zsys_sprintf ("%s/clients/%s/client.conf", dir, name);
    const char *tenant = cert ? zcert_meta (cert, "tenant") : NULL;
    printf ("%-16s %-12s %-40s %s\n", name, tenant ? tenant : "?",
            cert ? zcert_public_txt (cert) : "(unreadable)",
            access (conf, F_OK) == 0 ? conf : "-");
    zcert_destroy (&cert);
    zstr_free (&path);
    zstr_free (&conf);
    free (name);
}

static int
s_client_list (s_client_args_t *args)
{
    char *allow_dir = cs_admin_path (args->dir, "clients.d");
    DIR *handle = opendir (allow_dir);
    if (!handle) {
        cs_admin_error ("%s: cannot open (is %s a deployment?)", allow_dir, args->dir);
        zstr_free (&allow_dir);
        return CS_ADMIN_FAIL;
    }
    zlist_t *files = zlist_new ();
    zlist_autofree (files);
    zlist_comparefn (files, s_compare);
    struct dirent *entry;
    while ((entry = readdir (handle))) {
        size_t len = strlen (entry->d_name);
        if (len > 5 && streq (entry->d_name + len - 5, ".cert") && entry->d_name [0] != '.')
            zlist_append (files, entry->d_name);
    }
    closedir (handle);
    zlist_sort (files, NULL);
    printf ("%-16s %-12s %-40s %s\n", "CLIENT", "TENANT", "PUBLIC KEY", "CONFIG");
    for (char *file = zlist_first (files); file; file = zlist_next (files))
        s_client_print (args->dir, file);
    zlist_destroy (&files);
    zstr_free (&allow_dir);
    return CS_ADMIN_OK;
}

//  Parses the options after the sub-verb.  Returns -1 on success, else the
//  exit status.
static int
s_client_parse (int argc, char **argv, s_client_args_t *args)
{
    static const struct option options [] = {
        { "dir", required_argument, NULL, 'd' },
        { "tenant", required_argument, NULL, 't' },
        { "endpoint", required_argument, NULL, 'e' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 }
    };
    int opt;
    while ((opt = getopt_long (argc, argv, "+h", options, NULL)) != -1 || optind < argc) {
        if (opt == -1) {
            if (args->name)
                return s_client_usage (stderr, CS_ADMIN_USAGE);
            args->name = argv [optind++];
            continue;
        }
        switch (opt) {
            case 'd': args->dir = optarg; break;
            case 't': args->tenant = optarg; break;
            case 'e': args->endpoint = optarg; break;
            case 'h': return s_client_usage (stdout, CS_ADMIN_OK);
            default:  return s_client_usage (stderr, CS_ADMIN_USAGE);
        }
    }
    return -1;
}

int
cs_admin_client (int argc, char **argv)
{
    if (argc < 2)
        return s_client_usage (stderr, CS_ADMIN_USAGE);
    const char *verb = argv [1];
    if (streq (verb, "--help") || streq (verb, "-h"))
        return s_client_usage (stdout, CS_ADMIN_OK);
    s_client_args_t args = { .dir = "." };
    int status = s_client_parse (argc - 1, argv + 1, &args);
    if (status >= 0)
        return status;
    bool needs_name = streq (verb, "add") || streq (verb, "remove");
    if (needs_name != (args.name != NULL))
        return s_client_usage (stderr, CS_ADMIN_USAGE);
    if (needs_name && !cs_admin_name_ok (args.name)) {
        cs_admin_error ("bad client name '%s' (letters, digits, _ . - only)", args.name);
        return CS_ADMIN_USAGE;
    }
    if (streq (verb, "add"))
        return s_client_add (&args);
    if (streq (verb, "list"))
        return s_client_list (&args);
    if (streq (verb, "remove"))
        return s_client_remove (&args);
    cs_admin_error ("unknown client verb '%s' (add, list, remove)", verb);
    return CS_ADMIN_USAGE;
}
