/*  cs_admin_init.c — `cryptoserver-admin init DIR`: a new deployment.
 *
 *  Writes the broker key pair, the ticket key, the master key, the keystore
 *  with the first tenant, clients.d/ and broker.conf of docs/CONTRACTS.md.
 *  PINs are stored only as cs_pin_hash strings, in the keystore.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>
#include "cs_admin.h"
#include "cs_pin.h"
#include "cs_util.h"

#define TICKET_KEY_LEN 32       /* bytes; stored as 64 hex digits */

typedef struct {
    const char *dir;
    const char *tenant;
    const char *endpoint;
    const char *keystore_url;   /* --keystore-url: a PostgreSQL keystore, or NULL */
    char *pin;                  /* owned, wiped */
    char *so_pin;               /* owned, wiped */
    bool force;
} s_init_args_t;

static const char *s_broker_conf_header [] = {
    " broker.conf: cryptoserver-broker configuration (ZPL), made by cryptoserver-admin.",
    " See cryptoserver-broker(8) and docs/CONTRACTS.md.  Relative paths are",
    " relative to this file's directory.  Tenants, their PINs (PBKDF2 hashes) and",
    " server-held keys live in the keystore (man cryptoserver-keystore(5));",
    " manage them with 'cryptoserver-admin tenant' and 'cryptoserver-admin key'.",
    " keys/home: where token keys are generated (keystore or a board name);",
    " keys/pool-rsa-BITS: pre-generated RSA keys kept ready per size (0 = no pool).",
    "",
    " Boards live in the drivers section; add them with",
    "   cryptoserver-admin board add NAME --dir DIR --type pkcs11 --module PATH \\",
    "       --token LABEL --pin-file FILE [--threads N]",
    " which writes, for example:",
    "   drivers",
    "       board0",
    "           type = pkcs11",
    "           module = /usr/lib/softhsm/libsofthsm2.so",
    "           token = board0",
    "           pin-file = board.pin",
    "           threads = 2",
    NULL
};

static int
s_init_usage (FILE *out, int status)
{
    fprintf (out,
        "usage: cryptoserver-admin init DIR [--tenant NAME] [--pin PIN] [--so-pin PIN]\n"
        "                                   [--endpoint E] [--keystore-url URL] [--force]\n"
        "\n"
        "Creates a deployment in DIR: broker.cert + broker.cert_secret (0600),\n"
        "ticket.key (0600), audit.key (0600) and audit.pub, master.key (0600), keystore.db with the first tenant,\n"
        "clients.d/ and broker.conf.\n"
        "  --tenant NAME   the first tenant (default " CS_ADMIN_DEFAULT_TENANT ")\n"
        "  --pin PIN       its user PIN, %d..%d bytes (prompted twice on a terminal)\n"
        "  --so-pin PIN    its SO PIN (prompted twice on a terminal)\n"
        "  --endpoint E    where the broker listens (default " CS_ADMIN_DEFAULT_ENDPOINT ")\n"
        "  --keystore-url URL\n"
        "                  keep the keystore in PostgreSQL (postgresql://...; brokers\n"
        "                  sharing it: cryptoserver-broker.conf(5)) instead of keystore.db\n"
        "  --force         replace an existing deployment's keys and broker.conf\n"
        "                  (an existing master.key and keystore.db are kept; the\n"
        "                  tenant's PINs are set)\n",
        CS_PIN_MIN_LEN, CS_PIN_MAX_LEN);
    return status;
}

//  Reads one line from the terminal with echo off.  Returns a malloc'd string
//  (caller wipes and frees) or NULL on end of input.
static char *
s_tty_read_secret (const char *prompt)
{
    FILE *tty = fopen ("/dev/tty", "r+e");
    if (!tty)
        return NULL;
    struct termios saved, quiet;
    bool echo_off = tcgetattr (fileno (tty), &saved) == 0;
    if (echo_off) {
        quiet = saved;
        quiet.c_lflag &= (tcflag_t) ~ECHO;
        tcsetattr (fileno (tty), TCSANOW, &quiet);
    }
    fputs (prompt, tty);
    fflush (tty);
    char line [CS_PIN_MAX_LEN + 2];
    char *result = NULL;
    if (fgets (line, sizeof line, tty)) {
        line [strcspn (line, "\r\n")] = 0;
        result = strdup (line);
    }
    OPENSSL_cleanse (line, sizeof line);
    if (echo_off)
        tcsetattr (fileno (tty), TCSANOW, &saved);
    fputc ('\n', tty);
    fclose (tty);
    return result;
}

static void
s_secret_free (char **secret_p)
{
    if (*secret_p) {
        OPENSSL_cleanse (*secret_p, strlen (*secret_p));
        free (*secret_p);
        *secret_p = NULL;
    }
}

static bool
s_pin_length_ok (const char *what, const char *pin)
{
    size_t len = strlen (pin);
    if (len >= CS_PIN_MIN_LEN && len <= CS_PIN_MAX_LEN)
        return true;
    cs_admin_error ("%s must be %d..%d bytes long", what, CS_PIN_MIN_LEN, CS_PIN_MAX_LEN);
    return false;
}

//  Makes sure *pin_p holds a PIN: given on the command line (checked by
//  s_init_parse), or prompted twice on a terminal.  Returns 0, or -1 after
//  printing why.
static int
s_pin_obtain (const char *what, char **pin_p)
{
    if (*pin_p)
        return 0;
    char *prompt = zsys_sprintf ("New %s: ", what);
    char *again = zsys_sprintf ("Repeat %s: ", what);
    char *first = s_tty_read_secret (prompt);
    char *second = first ? s_tty_read_secret (again) : NULL;
    int rc = -1;
    if (!first || !second)
        cs_admin_error ("no %s entered", what);
    else
    if (!streq (first, second))
        cs_admin_error ("the two %ss differ", what);
    else
    if (s_pin_length_ok (what, first)) {
        *pin_p = first;
        first = NULL;
        rc = 0;
    }
    s_secret_free (&first);
    s_secret_free (&second);
    zstr_free (&prompt);
    zstr_free (&again);
    return rc;
}

//  Writes DIR/broker.cert and DIR/broker.cert_secret (0600).
static int
s_write_broker_cert (const char *dir)
{
    zcert_t *cert = zcert_new ();
    if (!cert) {
        cs_admin_error ("cannot make a CURVE key pair");
        return -1;
    }
    zcert_set_meta (cert, "name", "broker");
    char *path = cs_admin_path (dir, "broker.cert");
    char *secret = cs_admin_path (dir, "broker.cert_secret");
    mode_t old_mask = umask (077);
    unlink (secret);
    int rc = zcert_save (cert, path);
    umask (old_mask);
    if (rc == 0)
        rc = chmod (secret, 0600) | chmod (path, 0644);
    if (rc != 0)
        cs_admin_error ("%s: cannot save the broker key pair", path);
    zstr_free (&path);
    zstr_free (&secret);
    zcert_destroy (&cert);
    return rc;
}

//  Writes DIR/ticket.key: 32 random bytes as 64 hex digits and a newline, 0600.
static int
s_write_ticket_key (const char *dir)
{
    unsigned char key [TICKET_KEY_LEN];
    char hex [2 * TICKET_KEY_LEN + 2];
    if (RAND_bytes (key, sizeof key) != 1) {
        cs_admin_error ("no random bytes for the ticket key");
        return -1;
    }
    cs_hex_encode (key, sizeof key, hex);
    strcat (hex, "\n");
    char *path = cs_admin_path (dir, "ticket.key");
    int rc = cs_admin_file_write (path, hex, strlen (hex), 0600);
    OPENSSL_cleanse (key, sizeof key);
    OPENSSL_cleanse (hex, sizeof hex);
    zstr_free (&path);
    return rc;
}

//  Writes the keystore and keys sections (man cryptoserver-broker.conf(5)).
static void
s_put_keystore_sections (zconfig_t *config, const char *url)
{
    if (url)
        zconfig_put (config, "keystore/url", url);
    else
        zconfig_put (config, "keystore/path", "keystore.db");
    zconfig_put (config, "keystore/master-key", "master.key");
    zconfig_put (config, "keys/home", "keystore");
    zconfig_put (config, "keys/pool-rsa-2048", "4");
    zconfig_put (config, "keys/pool-rsa-3072", "2");
    zconfig_put (config, "keys/pool-rsa-4096", "0");
}

//  Writes DIR/broker.conf (0600).
static int
s_write_broker_conf (const s_init_args_t *args)
{
    zconfig_t *config = zconfig_new ("root", NULL);
    for (int i = 0; s_broker_conf_header [i]; i++)
        zconfig_set_comment (config, "%s", s_broker_conf_header [i]);
    zconfig_put (config, "broker/endpoint", args->endpoint);
    zconfig_put (config, "broker/ticket-key", "ticket.key");
    zconfig_put (config, "broker/default-deadline-ms", "10000");
    zconfig_put (config, "broker/max-queue", "10000");
    zconfig_put (config, "broker/stats-interval-ms", "10000");
    zconfig_put (config, "broker/curve/enabled", "true");
    zconfig_put (config, "broker/curve/secret-key", "broker.cert_secret");
    zconfig_put (config, "broker/curve/clients", "clients.d");
    s_put_keystore_sections (config, args->keystore_url);
    zconfig_put (config, "audit/key", "audit.key");
    zconfig_new ("drivers", config);
    char *path = cs_admin_path (args->dir, "broker.conf");
    int rc = cs_admin_conf_save (config, path, 0600);
    zstr_free (&path);
    zconfig_destroy (&config);
    return rc;
}

//  Reads DIR/master.key when it exists (--force on a deployment), else
//  creates it (0600).  Returns 0, or -1 after printing why.
static int
s_init_master_key (const s_init_args_t *args, uint8_t key [KEYSTORE_MASTER_KEY_LEN])
{
    char *path = cs_admin_path (args->dir, "master.key");
    int rc = access (path, F_OK) == 0 ? keystore_master_key_read (path, key)
                                      : keystore_master_key_create (path, key);
    if (rc != 0)
        cs_admin_error ("%s: cannot make or read the master key (see above)", path);
    zstr_free (&path);
    return rc;
}

//  Makes DIR/keystore.db (or opens the kept one) and adds the first
//  tenant, or sets its PINs when it exists.  Returns 0, or -1 after printing.
static int
s_init_keystore (const s_init_args_t *args)
{
    uint8_t key [KEYSTORE_MASTER_KEY_LEN];
    if (s_init_master_key (args, key) != 0)
        return -1;
    char *path = args->keystore_url ? keystore_location_name (args->keystore_url)
                                    : cs_admin_path (args->dir, "keystore.db");
    char *key_path = cs_admin_path (args->dir, "master.key");
    char *counter = keystore_counter_path (key_path);
    keystore_t *keystore = keystore_open_counted (args->keystore_url ? args->keystore_url : path, key, counter);
    OPENSSL_cleanse (key, sizeof key);
    free (counter);
    zstr_free (&key_path);
    int rc = -1;
    if (!keystore)
        cs_admin_error ("%s: cannot open the keystore (see above)", path);
    else
    if (!keystore_tenant_exists (keystore, args->tenant))
        rc = keystore_tenant_add (keystore, args->tenant, args->pin, strlen (args->pin),
                                  args->so_pin, strlen (args->so_pin));
    else
    if (keystore_pin_set (keystore, args->tenant, CKU_USER, args->pin, strlen (args->pin), NULL) == CKR_OK
    &&  keystore_pin_set (keystore, args->tenant, CKU_SO, args->so_pin, strlen (args->so_pin), NULL) == CKR_OK)
        rc = 0;
    if (keystore && rc != 0)
        cs_admin_error ("%s: cannot add tenant %s (see above)", path, args->tenant);
    keystore_destroy (&keystore);
    zstr_free (&path);
    return rc;
}

//  Parses init's options into *args.  Returns -1 on success, else the exit status.
static int
s_init_parse (int argc, char **argv, s_init_args_t *args)
{
    static const struct option options [] = {
        { "tenant", required_argument, NULL, 't' },
        { "pin", required_argument, NULL, 'p' },
        { "so-pin", required_argument, NULL, 's' },
        { "endpoint", required_argument, NULL, 'e' },
        { "keystore-url", required_argument, NULL, 'k' },
        { "force", no_argument, NULL, 'f' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 }
    };
    int opt;
    while ((opt = getopt_long (argc, argv, "+h", options, NULL)) != -1 || optind < argc) {
        if (opt == -1) {        //  a positional argument: the directory
            if (args->dir)
                return s_init_usage (stderr, CS_ADMIN_USAGE);
            args->dir = argv [optind++];
            continue;
        }
        switch (opt) {
            case 't': args->tenant = optarg; break;
            case 'p': free (args->pin); args->pin = strdup (optarg); break;
            case 's': free (args->so_pin); args->so_pin = strdup (optarg); break;
            case 'e': args->endpoint = optarg; break;
            case 'k': args->keystore_url = optarg; break;
            case 'f': args->force = true; break;
            case 'h': return s_init_usage (stdout, CS_ADMIN_OK);
            default:  return s_init_usage (stderr, CS_ADMIN_USAGE);
        }
    }
    if (!args->dir)
        return s_init_usage (stderr, CS_ADMIN_USAGE);
    if (!cs_admin_name_ok (args->tenant) || strlen (args->tenant) > 32) {
        cs_admin_error ("bad tenant name '%s' (letters, digits, _ . - only)", args->tenant);
        return CS_ADMIN_USAGE;
    }
    if (args->keystore_url && !keystore_is_url (args->keystore_url)) {
        cs_admin_error ("--keystore-url must be a PostgreSQL URL postgresql://...");
        return CS_ADMIN_USAGE;
    }
    if ((args->pin && !s_pin_length_ok ("user PIN", args->pin))
    ||  (args->so_pin && !s_pin_length_ok ("SO PIN", args->so_pin)))
        return CS_ADMIN_USAGE;
    if ((!args->pin || !args->so_pin) && !isatty (STDIN_FILENO)) {
        cs_admin_error ("stdin is not a terminal: give the PINs with --pin and --so-pin");
        return CS_ADMIN_USAGE;
    }
    return -1;
}

//  Refuses a directory that already holds a deployment, unless forced.
//  Returns 0, or -1 after printing why.
static int
s_init_refuse_existing (const s_init_args_t *args)
{
    char *conf = cs_admin_path (args->dir, "broker.conf");
    char *cert = cs_admin_path (args->dir, "broker.cert");
    int rc = 0;
    if (!args->force && (access (conf, F_OK) == 0 || access (cert, F_OK) == 0)) {
        cs_admin_error ("%s already holds a deployment (use --force to replace its keys and config)",
                        args->dir);
        rc = -1;
    }
    zstr_free (&conf);
    zstr_free (&cert);
    return rc;
}

//  Creates DIR and DIR/clients.d.  Returns 0, or -1 after printing why.
static int
s_init_dirs (const s_init_args_t *args)
{
    char *clients = cs_admin_path (args->dir, "clients.d");
    int rc = 0;
    if (zsys_dir_create ("%s", args->dir) != 0 || zsys_dir_create ("%s", clients) != 0) {
        cs_admin_error ("%s: cannot create the directory", args->dir);
        rc = -1;
    }
    zstr_free (&clients);
    return rc;
}

int
cs_admin_init (int argc, char **argv)
{
    s_init_args_t args = {
        .tenant = CS_ADMIN_DEFAULT_TENANT,
        .endpoint = CS_ADMIN_DEFAULT_ENDPOINT
    };
    int status = s_init_parse (argc, argv, &args);
    if (status >= 0)
        goto out;
    status = CS_ADMIN_FAIL;
    if (s_init_refuse_existing (&args) != 0
    ||  s_pin_obtain ("user PIN", &args.pin) != 0
    ||  s_pin_obtain ("SO PIN", &args.so_pin) != 0
    ||  s_init_dirs (&args) != 0
    ||  s_write_broker_cert (args.dir) != 0
    ||  s_write_ticket_key (args.dir) != 0
    ||  cs_admin_audit_key_write (args.dir) != 0
    ||  s_init_keystore (&args) != 0
    ||  s_write_broker_conf (&args) != 0)
        goto out;
    printf ("initialised deployment %s (tenant %s, endpoint %s)\n",
            args.dir, args.tenant, args.endpoint);
    status = CS_ADMIN_OK;
out:
    s_secret_free (&args.pin);
    s_secret_free (&args.so_pin);
    return status;
}
