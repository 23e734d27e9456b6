/*  cs_admin.c — cryptoserver-admin: make and manage a cryptoserver deployment.
 *
 *  main() only dispatches to a verb: init, board, client, config, tenant,
 *  key, master-key, keystore, audit, status.  The
 *  deployment layout is docs/CONTRACTS.md; the user manual is
 *  man/cryptoserver-admin.1.
 */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif
#include <stdio.h>
#include <string.h>
#include "cs_admin.h"

static void
s_usage (FILE *out)
{
    fprintf (out,
        "usage: cryptoserver-admin VERB ...\n"
        "\n"
        "  init DIR [--tenant NAME] [--pin PIN] [--so-pin PIN] [--endpoint E] [--force]\n"
        "      create a deployment: broker key pair, ticket key, master key, keystore\n"
        "      with the first tenant, clients.d/, broker.conf\n"
        "  board add NAME --type T [--module PATH --token LABEL --pin-file FILE]\n"
        "            [--threads N] [--set KEY=VALUE ...] [--dir DIR]\n"
        "  board list [--dir DIR]\n"
        "  board remove NAME [--dir DIR]\n"
        "      manage the back-end boards in DIR/broker.conf (section drivers)\n"
        "  tenant add NAME --pin PIN --so-pin SOPIN [--dir DIR]\n"
        "  tenant list [--dir DIR]\n"
        "  tenant remove NAME [--dir DIR]\n"
        "  tenant set-pin NAME [--so] --pin PIN [--dir DIR]\n"
        "  tenant set NAME [--max-ops-per-s N] [--max-inflight N] [--max-keys N] [--max-objects N] [--dir DIR]\n"
        "  tenant show NAME [--dir DIR]\n"
        "      manage tenants (tokens) and their PINs in the keystore\n"
        "  key list --tenant T [--dir DIR]\n"
        "  key generate --tenant T --type TYPE --label L [--id HEX | --count N] [--dir DIR]\n"
        "  key import --tenant T --file KEY.pem --label L [--id HEX] [--dir DIR]\n"
        "  key delete --tenant T (--ref REF | --label L) [--dir DIR]\n"
        "      manage a tenant's server-held keys in the keystore\n"
        "  master-key wrap --board NAME --label LABEL --public-key PUB.pem [--dir DIR]\n"
        "      wrap the keystore master key with a board's RSA key\n"
        "  master-key rotate [--dir DIR]\n"
        "      re-seal the keystore under a new master key; the old key file is shredded\n"
        "  keystore upgrade [DIR] [--master-key FILE] [--keystore-url URL]\n"
        "  keystore accept-rollback [DIR] [--master-key FILE] [--keystore-url URL]\n"
        "      the operator's explicit upgrade of an older keystore, or acceptance of\n"
        "      an older copy put back (the broker refuses both at start)\n"
        "  keystore copy --from DIR|URL --to DIR|URL [--dir DIR]\n"
        "  keystore backup [--dir DIR] FILE\n"
        "  keystore restore [--dir DIR] [--accept-rollback] FILE\n"
        "      copy a keystore (SQLite <-> PostgreSQL), back it up to one sealed file,\n"
        "      put a backup back (an older one only with --accept-rollback)\n"
        "  client add NAME [--dir DIR] [--tenant T] [--endpoint E]\n"
        "  client list [--dir DIR]\n"
        "  client remove NAME [--dir DIR]\n"
        "      manage client key pairs, the allow-list DIR/clients.d and client configs\n"
        "  audit verify [--dir DIR] [--keystore-url URL] [--public-key FILE]\n"
        "  audit show [--dir DIR] [--keystore-url URL] [--tenant T] [--since TIME] [--json]\n"
        "      check every audit chain and checkpoint signature; print the records\n"
        "  shared generate|public|sign|partial --tenant T --label L [--dir DIR] ...\n"
        "      a shared RSA key of three party brokers (docs/SHARED-KEYS.md)\n"
        "  status [--metrics URL]... [--dir DIR]\n"
        "      each running broker's boards (health, jobs), queue depth and clients,\n"
        "      from its metrics endpoint\n"
        "  config get FILE PATH\n"
        "  config set FILE PATH VALUE\n"
        "      read or change one value of a ZPL config file (e.g. broker/endpoint)\n"
        "\n"
        "DIR defaults to the current directory.  'cryptoserver-admin VERB --help'\n"
        "shows a verb's options; man cryptoserver-admin has the details.\n"
        "Exit status: 0 success, 1 failure, 2 usage error.\n");
}

int
main (int argc, char **argv)
{
    if (argc < 2) {
        s_usage (stderr);
        return CS_ADMIN_USAGE;
    }
    const char *verb = argv [1];
    if (streq (verb, "--help") || streq (verb, "-h") || streq (verb, "help")) {
        s_usage (stdout);
        return CS_ADMIN_OK;
    }
    if (streq (verb, "--version")) {
        printf ("cryptoserver-admin %s\n", PACKAGE_VERSION);
        return CS_ADMIN_OK;
    }
    if (streq (verb, "init"))
        return cs_admin_init (argc - 1, argv + 1);
    int status = -1;
    if (streq (verb, "board"))
        status = cs_admin_board (argc - 1, argv + 1);
    if (streq (verb, "client"))
        status = cs_admin_client (argc - 1, argv + 1);
    if (streq (verb, "tenant"))
        status = cs_admin_tenant (argc - 1, argv + 1);
    if (streq (verb, "key"))
        status = cs_admin_key (argc - 1, argv + 1);
    if (streq (verb, "shared"))
        status = cs_admin_shared (argc - 1, argv + 1);
    if (status >= 0) {                  //  a change: recorded in the audit log
        cs_admin_audit_note (argc, argv, status);
        return status;
    }
    if (streq (verb, "config"))
        return cs_admin_config (argc - 1, argv + 1);
    if (streq (verb, "audit"))
        return cs_admin_audit (argc - 1, argv + 1);
    if (streq (verb, "master-key"))
        return cs_admin_master_key (argc - 1, argv + 1);
    if (streq (verb, "keystore"))
        return cs_admin_keystore (argc - 1, argv + 1);
    if (streq (verb, "status"))
        return cs_admin_status (argc - 1, argv + 1);
    cs_admin_error ("unknown verb '%s' (try --help)", verb);
    return CS_ADMIN_USAGE;
}
