/*  cs_admin_audit.c — the audit log from the operator's side
 *  (cryptoserver-audit(5)): the audit key made by `init`, `audit verify`
 *  and `audit show`, and the records of changes made with
 *  cryptoserver-admin itself (chain "admin@HOST").
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include "cs_admin.h"
#include "cs_util.h"
#include "keystore_audit.h"

int
cs_admin_audit_key_write (const char *dir)
{
    uint8_t seed [32];
    char hex [2 * sizeof seed + 2];
    EVP_PKEY *key = RAND_bytes (seed, sizeof seed) == 1
                  ? EVP_PKEY_new_raw_private_key (EVP_PKEY_ED25519, NULL, seed, sizeof seed) : NULL;
    char *path = cs_admin_path (dir, "audit.key"), *pub = cs_admin_path (dir, "audit.pub");
    BIO *mem_pub = BIO_new (BIO_s_mem ());
    char *data_pub = NULL;
    int rc = -1;
    cs_hex_encode (seed, sizeof seed, hex);
    strcat (hex, "\n");
    if (key && mem_pub && PEM_write_bio_PUBKEY (mem_pub, key) == 1) {
        long len_pub = BIO_get_mem_data (mem_pub, &data_pub);
        rc = cs_admin_file_write (path, hex, strlen (hex), 0600) == 0
          && cs_admin_file_write (pub, data_pub, (size_t) len_pub, 0644) == 0 ? 0 : -1;
    }
    else
        cs_admin_error ("cannot make an Ed25519 audit key");
    OPENSSL_cleanse (seed, sizeof seed);
    OPENSSL_cleanse (hex, sizeof hex);
    BIO_free (mem_pub);
    EVP_PKEY_free (key);
    zstr_free (&path);
    zstr_free (&pub);
    return rc;
}

//  The keystore location of DIR (keystore/url, or keystore/path resolved
//  against DIR), or url when given.  malloc'd, or NULL after printing why.
static char *
s_location (const char *dir, const char *url)
{
    if (url)
        return keystore_is_url (url) ? strdup (url) : NULL;
    zconfig_t *config = cs_admin_conf_load (dir);
    if (!config)
        return NULL;
    const char *shared = zconfig_get (config, "keystore/url", NULL);
    char *location = shared && *shared ? strdup (shared)
                   : cs_path_resolve (dir, zconfig_get (config, "keystore/path", "keystore.db"));
    zconfig_destroy (&config);
    if (location && !keystore_is_url (location) && access (location, F_OK) != 0) {
        cs_admin_error ("%s: no keystore", location);
        zstr_free (&location);
    }
    return location;
}

static EVP_PKEY *
s_public_key (const char *path)
{
    FILE *file = fopen (path, "r");
    EVP_PKEY *key = file ? PEM_read_PUBKEY (file, NULL, NULL, NULL) : NULL;
    if (file)
        fclose (file);
    if (!key || EVP_PKEY_id (key) != EVP_PKEY_ED25519) {
        cs_admin_error ("%s: not an Ed25519 public key (PEM): the audit key's public half is needed", path);
        EVP_PKEY_free (key);
        key = NULL;
    }
    return key;
}

//  The keystore opened with DIR's master key checks its rows, the audit
//  checkpoints among them, against its MAC'd state record and counter
//  file: a checkpoint deleted (the chain cut back) is refused there.
//  0 when it opens (or cannot be tried: no master key here, said), -1
//  after printing why.
static int
s_state_check (const char *dir, const char *location)
{
    uint8_t key [KEYSTORE_MASTER_KEY_LEN];
    char *located = NULL, *counter = NULL;
    if (cs_admin_keystore_locate (dir, NULL, &located, &counter, key) != 0) {
        printf ("  keystore state not checked (no master key in %s): a chain cut back behind its "
                "last checkpoint is not caught here\n", dir);
        return 0;
    }
    keystore_t *keystore = keystore_open_counted (location, key, counter);
    OPENSSL_cleanse (key, sizeof key);
    free (located);
    free (counter);
    if (!keystore) {
        printf ("  the keystore's state record does not vouch for its rows or checkpoints (see "
                "above): a checkpoint deleted or put back?\n");
        return -1;
    }
    keystore_destroy (&keystore);
    printf ("  keystore state: every checkpoint is one its state record vouches for\n");
    return 0;
}

static int
s_usage (FILE *out, int status)
{
    fprintf (out,
        "usage: cryptoserver-admin audit verify [--dir DIR] [--keystore-url URL] [--public-key FILE]\n"
        "       cryptoserver-admin audit show [--dir DIR] [--keystore-url URL] [--tenant T]\n"
        "                                     [--since TIME] [--json]\n"
        "\n"
        "verify checks every broker's audit chain in the keystore: sequence numbers\n"
        "without gaps, each record's hash of the one before, each record's own hash,\n"
        "and each checkpoint's Ed25519 signature under the audit public key\n"
        "(default DIR/audit.pub).  It prints the first broken or missing record of\n"
        "each chain and exits 1 on any break.  With DIR's master key it also opens\n"
        "the keystore, whose state record vouches for every checkpoint: a chain\n"
        "cut back behind a checkpoint is caught there.\n"
        "\n"
        "show prints the records (all chains, oldest first), of tenant T only, from\n"
        "TIME on (ISO 8601 UTC as in the records, e.g. 2026-11-28 or\n"
        "2026-11-28T04:00:00Z); --json prints each record as stored.\n"
        "See man cryptoserver-audit(5).\n");
    return status;
}

//  One record as a line of text: time broker action tenant object result (count).
static void
s_show_line (const char *record)
{
    static const char *names [] = { "time", "broker", "action", "tenant", "client", "object",
                                    "mechanism", "count", "failures", "result" };
    for (size_t i = 0; i < sizeof names / sizeof names [0]; i++) {
        char *value = keystore_audit_field (record, names [i]);
        if (value && *value)
            printf ("%s%s=%s", i ? " " : "", names [i], value);
        free (value);
    }
    printf ("\n");
}

int
cs_admin_audit (int argc, char **argv)
{
    static const struct option options [] = {
        { "dir", required_argument, NULL, 'd' },      { "keystore-url", required_argument, NULL, 'k' },
        { "public-key", required_argument, NULL, 'p' }, { "tenant", required_argument, NULL, 't' },
        { "since", required_argument, NULL, 's' },    { "json", no_argument, NULL, 'j' },
        { "help", no_argument, NULL, 'h' },           { NULL, 0, NULL, 0 }
    };
    if (argc < 2)
        return s_usage (stderr, CS_ADMIN_USAGE);
    const char *verb = argv [1], *dir = ".", *url = NULL, *pub_path = NULL, *tenant = NULL, *since = NULL;
    bool json = false;
    if (streq (verb, "--help") || streq (verb, "-h"))
        return s_usage (stdout, CS_ADMIN_OK);
    if (!streq (verb, "verify") && !streq (verb, "show")) {
        cs_admin_error ("audit: unknown verb '%s' (try --help)", verb);
        return CS_ADMIN_USAGE;
    }
    argc--, argv++;
    optind = 1;
    int opt;
    while ((opt = getopt_long (argc, argv, "h", options, NULL)) != -1) {
        switch (opt) {
            case 'd': dir = optarg; break;
            case 'k': url = optarg; break;
            case 'p': pub_path = optarg; break;
            case 't': tenant = optarg; break;
            case 's': since = optarg; break;
            case 'j': json = true; break;
            case 'h': return s_usage (stdout, CS_ADMIN_OK);
            default:  return s_usage (stderr, CS_ADMIN_USAGE);
        }
    }
    if (optind < argc)
        return s_usage (stderr, CS_ADMIN_USAGE);
    if (url && !keystore_is_url (url)) {
        cs_admin_error ("--keystore-url must be a PostgreSQL URL postgresql://...");
        return CS_ADMIN_USAGE;
    }
    char *location = s_location (dir, url);
    keystore_audit_row_t *rows = NULL;
    size_t count = 0;
    if (!location || keystore_audit_read (location, &rows, &count) != 0) {
        cs_admin_error ("cannot read the audit records (see above)");
        free (location);
        return CS_ADMIN_FAIL;
    }
    char *name = keystore_location_name (location);
    int status = CS_ADMIN_OK;
    if (streq (verb, "verify")) {
        char *path = pub_path ? strdup (pub_path) : cs_admin_path (dir, "audit.pub");
        EVP_PKEY *pub = s_public_key (path);
        char why [4096];
        keystore_audit_summary_t sum;
        if (!pub)
            status = CS_ADMIN_FAIL;
        else
        if (keystore_audit_verify (rows, count, pub, why, sizeof why, &sum) != 0) {
            printf ("audit %s: BROKEN:\n%s\n", name, why);
            status = CS_ADMIN_FAIL;
        }
        else
            printf ("audit %s: %zu chains, %zu records, %zu signed checkpoints verified; %zu records "
                    "after their chain's last checkpoint (not signed yet)\n", name, sum.brokers,
                    sum.records, sum.checkpoints, sum.unsigned_tail);
        //  The head of each chain: compare with a copy kept elsewhere (syslog).
        for (size_t i = 0; pub && i < count; i++)
            if (rows [i].sig && (i + 1 == count || !streq (rows [i].broker, rows [i + 1].broker)
                                 || !rows [i + 1].sig)) {
                bool last = true;
                for (size_t j = i + 1; j < count && streq (rows [j].broker, rows [i].broker); j++)
                    last = last && !rows [j].sig;
                if (last)
                    printf ("  chain %s: last checkpoint at record %" PRId64 "\n", rows [i].broker, rows [i].seq);
            }
        if (pub && s_state_check (dir, location) != 0)
            status = CS_ADMIN_FAIL;
        EVP_PKEY_free (pub);
        free (path);
    }
    else
        for (size_t i = 0; i < count; i++) {
            char *t = tenant ? keystore_audit_field (rows [i].record, "tenant") : NULL;
            char *when = since ? keystore_audit_field (rows [i].record, "time") : NULL;
            bool shown = (!tenant || (t && streq (t, tenant))) && (!since || (when && strcmp (when, since) >= 0));
            if (shown && json)
                printf ("%s\n", rows [i].record);
            else
            if (shown)
                s_show_line (rows [i].record);
            free (t);
            free (when);
        }
    keystore_audit_rows_free (rows, count);
    free (name);
    free (location);
    return status;
}

/* ---- changes made with cryptoserver-admin ------------------------------- */

static void
s_emit (const char *record, void *arg)
{
    syslog (LOG_AUTHPRIV | LOG_INFO, "%s", record);
}

void
cs_admin_audit_note (int argc, char **argv, int status)
{
    //  Only verbs that change something; DIR as the verb takes it.
    if (argc < 3 || status == CS_ADMIN_USAGE)
        return;
    const char *verb = argv [1], *sub = argv [2];
    bool change = (streq (verb, "tenant") && (streq (sub, "add") || streq (sub, "remove") || streq (sub, "set-pin")))
               || (streq (verb, "key") && (streq (sub, "generate") || streq (sub, "import") || streq (sub, "delete")))
               || (streq (verb, "client") && (streq (sub, "add") || streq (sub, "remove")))
               || (streq (verb, "board") && (streq (sub, "add") || streq (sub, "remove")));
    if (!change)
        return;
    const char *dir = ".", *object = "", *tenant = "";
    for (int i = 3; i < argc; i++) {
        if (streq (argv [i], "--dir") && i + 1 < argc)
            dir = argv [i + 1];
        else
        if (strncmp (argv [i], "--dir=", 6) == 0)
            dir = argv [i] + 6;
        else
        if (streq (argv [i], "--tenant") && i + 1 < argc)
            tenant = argv [i + 1];
        else
        if ((streq (argv [i], "--label") || streq (argv [i], "--ref")) && i + 1 < argc)
            object = argv [i + 1];
        else
        if (argv [i][0] != '-' && i == 3)
            object = argv [i];              //  NAME of tenant, client, board
    }
    if (streq (verb, "tenant"))
        tenant = object;
    zconfig_t *config = cs_admin_conf_load (dir);
    const char *key_file = config ? zconfig_get (config, "audit/key", NULL) : NULL;
    if (!key_file || !*key_file) {
        zconfig_destroy (&config);
        return;                             //  no audit in this deployment
    }
    char *path = cs_path_resolve (dir, key_file), why [600] = "";
    EVP_PKEY *key = path ? keystore_audit_key_read (path, why, sizeof why) : NULL;
    keystore_t *keystore = key ? cs_admin_keystore_open (dir, NULL) : NULL;
    char host [200] = "localhost", broker [256], when [32], action [64], *body = NULL;
    gethostname (host, sizeof host - 1);
    snprintf (broker, sizeof broker, "admin@%s", host);
    snprintf (action, sizeof action, "admin-%s-%s", verb, sub);
    time_t now = time (NULL);
    struct tm tm;
    strftime (when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", gmtime_r (&now, &tm));
    zchunk_t *buf = zchunk_new (NULL, 256);
    const char *pairs [][2] = { { "time", when }, { "broker", broker }, { "client", "cryptoserver-admin" },
                                { "tenant", tenant }, { "action", action }, { "object", object },
                                { "result", status == CS_ADMIN_OK ? "CKR_OK" : "CKR_FUNCTION_FAILED" } };
    for (size_t i = 0; i < sizeof pairs / sizeof pairs [0]; i++) {
        zchunk_extend (buf, i ? ",\"" : "\"", i ? 2 : 1);
        zchunk_extend (buf, pairs [i][0], strlen (pairs [i][0]));
        zchunk_extend (buf, "\":\"", 3);
        for (const char *c = pairs [i][1]; *c; c++)
            if (*c != '"' && *c != '\\' && (unsigned char) *c >= 0x20)
                zchunk_extend (buf, c, 1);
        zchunk_extend (buf, "\"", 1);
    }
    zchunk_extend (buf, "", 1);
    body = (char *) zchunk_data (buf);
    if (!key)
        cs_admin_error ("audit: %s: the change is not recorded", why [0] ? why : key_file);
    else
    if (!keystore || keystore_audit_append (keystore, broker, &body, 1, key, true, NULL, s_emit, NULL) != 0)
        cs_admin_error ("audit: the change could not be recorded in the keystore");
    zchunk_destroy (&buf);
    keystore_destroy (&keystore);
    EVP_PKEY_free (key);
    free (path);
    zconfig_destroy (&config);
}
