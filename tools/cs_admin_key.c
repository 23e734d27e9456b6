/*  cs_admin_key.c — `cryptoserver-admin key list|generate|import|delete` (a
 *  tenant's server-held keys in DIR's keystore) and `master-key wrap`.
 *
 *  Keys are made and parsed with OpenSSL in this process and stored
 *  encrypted (keystore.h); their descriptions come from key_info_from_pkey,
 *  the same builder the broker uses, so admin-made and module-made keys
 *  look alike.  Private key bytes are wiped as soon as they are stored.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include "cs_admin.h"
#include "cs_util.h"
#include "key_info.h"
#include "cryptoserver/pkcs11v.h"

#define MAX_ID 64                       /* bytes of a CKA_ID (CS_WIRE_MAX_KEY_ID) */

static int
s_key_usage (FILE *out, int status)
{
    fprintf (out,
        "usage: cryptoserver-admin key list --tenant T [--dir DIR]\n"
        "       cryptoserver-admin key generate --tenant T --type TYPE --label L [--id HEX | --count N] [--dir DIR]\n"
        "       cryptoserver-admin key import --tenant T --file KEY.pem --label L [--id HEX] [--dir DIR]\n"
        "       cryptoserver-admin key delete --tenant T (--ref REF | --label L) [--dir DIR]\n"
        "\n"
        "The tenant's server-held keys in DIR's keystore (keystore.db).  TYPE is\n"
        "rsa:2048, rsa:3072, rsa:4096, ec:prime256v1, ec:secp384r1, ec:secp521r1\n"
        "or ed25519.  --id sets CKA_ID (hex); without it CKA_ID is the SHA-1 of the\n"
        "public key (RFC 5280 4.2.1.2, the certificate's Subject Key Identifier).\n"
        "--count N generates N keys labelled L-1 .. L-N (a large tenant for a test or\n"
        "a benchmark) and prints one line at the end.\n"
        "import reads an unencrypted PEM private key (PKCS#8 or traditional).\n"
        "All verbs take --master-key FILE to use another copy of the master key.\n"
        "The running broker sees the changes at once.  DIR defaults to '.'.\n");
    return status;
}

//  Makes a fresh key of TYPE (see usage).  Returns it (caller frees) or
//  NULL after printing why.
static EVP_PKEY *
s_generate (const char *type)
{
    EVP_PKEY *pkey = NULL;
    if (streq (type, "rsa:2048") || streq (type, "rsa:3072") || streq (type, "rsa:4096"))
        pkey = EVP_PKEY_Q_keygen (NULL, NULL, "RSA", (size_t) atoi (type + 4));
    else
    if (streq (type, "ec:prime256v1") || streq (type, "ec:secp384r1") || streq (type, "ec:secp521r1"))
        pkey = EVP_PKEY_Q_keygen (NULL, NULL, "EC", type + 3);
    else
    if (streq (type, "ed25519"))
        pkey = EVP_PKEY_Q_keygen (NULL, NULL, "ED25519");
    else {
        cs_admin_error ("unknown key type '%s' (rsa:2048|rsa:3072|rsa:4096|ec:prime256v1|"
                        "ec:secp384r1|ec:secp521r1|ed25519)", type);
        return NULL;
    }
    if (!pkey)
        cs_admin_error ("OpenSSL could not generate a %s key", type);
    return pkey;
}

//  Reads an unencrypted PEM private key.  Returns it or NULL after printing.
static EVP_PKEY *
s_import (const char *file)
{
    FILE *in = fopen (file, "r");
    if (!in) {
        cs_admin_error ("%s: %s", file, strerror (errno));
        return NULL;
    }
    EVP_PKEY *pkey = PEM_read_PrivateKey (in, NULL, NULL, (void *) "");
    fclose (in);
    if (!pkey)
        cs_admin_error ("%s: not an unencrypted PEM private key", file);
    else
    if (!EVP_PKEY_is_a (pkey, "RSA") && !EVP_PKEY_is_a (pkey, "EC") && !EVP_PKEY_is_a (pkey, "ED25519")) {
        cs_admin_error ("%s: only RSA, EC (named curves) and Ed25519 keys are supported", file);
        EVP_PKEY_free (pkey);
        pkey = NULL;
    }
    return pkey;
}

//  Stores pkey for the tenant (quiet: no line).  Returns the exit status.
static int
s_store (keystore_t *keystore, cs_admin_ks_args_t *args, EVP_PKEY *pkey, bool generated, bool quiet)
{
    uint8_t id [MAX_ID];
    long id_len = 0;
    if (args->id && (id_len = cs_hex_decode (args->id, id, sizeof id)) <= 0) {
        cs_admin_error ("--id must be 1..%d bytes of hex", MAX_ID);
        return CS_ADMIN_USAGE;
    }
    key_info_params_t params = { .label = args->label, .generated = generated,
                                 .id = args->id ? id : NULL, .id_len = (size_t) id_len };
    Cs__KeyInfo *info = key_info_from_pkey (pkey, &params);
    size_t der_len = 0;
    uint8_t *der = info ? cs_pkey_to_pkcs8 (pkey, &der_len) : NULL;
    int status = CS_ADMIN_FAIL;
    if (!der)
        cs_admin_error ("cannot describe or encode the key (unsupported curve?)");
    else
    if (keystore_key_put (keystore, args->tenant, info, der, der_len) != 0)
        cs_admin_error ("cannot store the key (see above)");
    else
    if (quiet)
        status = CS_ADMIN_OK;
    else {
        char hex [2 * MAX_ID + 1];
        cs_hex_encode (info->id.data, info->id.len < MAX_ID ? info->id.len : MAX_ID, hex);
        printf ("stored key %s (label %s, id %s) for tenant %s\n", info->ref, info->label, hex,
                args->tenant);
        status = CS_ADMIN_OK;
    }
    if (der) {
        OPENSSL_cleanse (der, der_len);
        free (der);
    }
    if (info)
        cs__key_info__free_unpacked (info, NULL);
    return status;
}

//  The printable type of a KeyInfo: rsa, ec, ed25519, aes, generic, and the
//  PKCS#11 3.2 keys by parameter set (ml-dsa-65, ml-kem-768; issue #23).
static const char *
s_type_name (const Cs__KeyInfo *info)
{
    static const char *const dsa [] = { "ml-dsa-?", "ml-dsa-44", "ml-dsa-65", "ml-dsa-87" };
    static const char *const kem [] = { "ml-kem-?", "ml-kem-512", "ml-kem-768", "ml-kem-1024" };
    size_t set = info->parameter_set <= 3 ? (size_t) info->parameter_set : 0;
    if (info->key_type == CKK_ML_DSA || info->key_type == CKK_ML_KEM)
        return info->key_type == CKK_ML_DSA ? dsa [set] : kem [set];
    return info->key_type == CKK_RSA ? "rsa" : info->key_type == CKK_EC ? "ec"
         : info->key_type == CKK_EC_EDWARDS ? "ed25519" : info->key_type == CKK_AES ? "aes"
         : info->key_type == CKK_GENERIC_SECRET ? "generic" : "?";
}

static int
s_list (keystore_t *keystore, cs_admin_ks_args_t *args)
{
    Cs__KeyInfo **infos = NULL;
    size_t count = 0;
    if (keystore_key_list (keystore, args->tenant, &infos, &count) != 0)
        return CS_ADMIN_FAIL;
    printf ("%-35s %-20s %-40s %-8s %5s %s\n", "REF", "LABEL", "ID", "TYPE", "BITS", "HOME");
    for (size_t i = 0; i < count; i++) {
        char hex [2 * MAX_ID + 1];
        size_t len = infos [i]->id.len < MAX_ID ? infos [i]->id.len : MAX_ID;
        cs_hex_encode (infos [i]->id.data, len, hex);
        printf ("%-35s %-20s %-40s %-8s %5u %s\n", infos [i]->ref,
                *infos [i]->label ? infos [i]->label : "-", len ? hex : "-",
                s_type_name (infos [i]), infos [i]->bits, infos [i]->home);
        cs__key_info__free_unpacked (infos [i], NULL);
    }
    free (infos);
    return CS_ADMIN_OK;
}

//  Finds the ref of the one key labelled label.  Returns a malloc'd ref, or
//  NULL after printing why (none, or several).
static char *
s_ref_by_label (keystore_t *keystore, const char *tenant, const char *label)
{
    Cs__KeyInfo **infos = NULL;
    size_t count = 0, matches = 0;
    char *ref = NULL;
    if (keystore_key_list (keystore, tenant, &infos, &count) != 0)
        return NULL;
    for (size_t i = 0; i < count; i++) {
        if (streq (infos [i]->label, label) && matches++ == 0)
            ref = strdup (infos [i]->ref);
        cs__key_info__free_unpacked (infos [i], NULL);
    }
    free (infos);
    if (matches != 1) {
        cs_admin_error (matches ? "%zu keys are labelled '%s': delete by --ref (see key list)"
                                : "%zu keys labelled '%s'", matches, label);
        free (ref);
        ref = NULL;
    }
    return ref;
}

static int
s_delete (keystore_t *keystore, cs_admin_ks_args_t *args)
{
    if (!args->ref == !args->label) {
        cs_admin_error ("key delete needs --ref REF or --label L");
        return CS_ADMIN_USAGE;
    }
    char *ref = args->ref ? strdup (args->ref) : s_ref_by_label (keystore, args->tenant, args->label);
    int status = CS_ADMIN_FAIL;
    if (ref && keystore_key_delete (keystore, args->tenant, ref) == 0) {
        printf ("deleted key %s of tenant %s\n", ref, args->tenant);
        status = CS_ADMIN_OK;
    }
    else
    if (ref)
        cs_admin_error ("no key %s in tenant %s", ref, args->tenant);
    free (ref);
    return status;
}

//  Checks the options a sub-verb needs.  Returns -1 when fine, else the status.
static int
s_key_check (const char *verb, cs_admin_ks_args_t *args)
{
    if (!args->tenant || args->name) {
        cs_admin_error ("key %s needs --tenant T and no other arguments", verb);
        return CS_ADMIN_USAGE;
    }
    if (streq (verb, "generate") && (!args->type || !args->label)) {
        cs_admin_error ("key generate needs --type TYPE and --label L");
        return CS_ADMIN_USAGE;
    }
    if (args->count && (!streq (verb, "generate") || args->id || strtol (args->count, NULL, 10) < 1
                        || strspn (args->count, "0123456789") != strlen (args->count))) {
        cs_admin_error ("--count N (1 or more) goes with 'key generate' without --id");
        return CS_ADMIN_USAGE;
    }
    if (streq (verb, "import") && (!args->file || !args->label)) {
        cs_admin_error ("key import needs --file KEY.pem and --label L");
        return CS_ADMIN_USAGE;
    }
    if (!streq (verb, "list") && !streq (verb, "generate") && !streq (verb, "import")
    &&  !streq (verb, "delete")) {
        cs_admin_error ("unknown key verb '%s' (list, generate, import, delete)", verb);
        return CS_ADMIN_USAGE;
    }
    return -1;
}

//  key generate --count N: N fresh keys labelled LABEL-1 .. LABEL-N, each
//  stored as 'key generate' stores one.  Returns the exit status.
static int
s_generate_many (keystore_t *keystore, cs_admin_ks_args_t *args)
{
    const char *label = args->label;
    char name [256];
    long n = strtol (args->count, NULL, 10);
    int status = CS_ADMIN_OK;
    for (long i = 1; i <= n && status == CS_ADMIN_OK; i++) {
        EVP_PKEY *pkey = s_generate (args->type);
        snprintf (name, sizeof name, "%s-%ld", label, i);
        args->label = name;
        status = pkey ? s_store (keystore, args, pkey, true, true) : CS_ADMIN_FAIL;
        EVP_PKEY_free (pkey);
    }
    args->label = label;
    if (status == CS_ADMIN_OK)
        printf ("stored %ld %s keys (labels %s-1 .. %s-%ld) for tenant %s\n", n, args->type, label, label, n,
                args->tenant);
    return status;
}

//  Runs the sub-verb against the opened keystore.
static int
s_key_run (const char *verb, cs_admin_ks_args_t *args, keystore_t *keystore)
{
    if (!keystore_tenant_exists (keystore, args->tenant)) {
        cs_admin_error ("no tenant %s (see 'cryptoserver-admin tenant list')", args->tenant);
        return CS_ADMIN_FAIL;
    }
    if (streq (verb, "list"))
        return s_list (keystore, args);
    if (streq (verb, "delete"))
        return s_delete (keystore, args);
    bool generated = streq (verb, "generate");
    if (generated && args->count)
        return s_generate_many (keystore, args);
    EVP_PKEY *pkey = generated ? s_generate (args->type) : s_import (args->file);
    int status = pkey ? s_store (keystore, args, pkey, generated, false) : CS_ADMIN_FAIL;
    EVP_PKEY_free (pkey);
    return status;
}

int
cs_admin_key (int argc, char **argv)
{
    if (argc < 2)
        return s_key_usage (stderr, CS_ADMIN_USAGE);
    const char *verb = argv [1];
    if (streq (verb, "--help") || streq (verb, "-h"))
        return s_key_usage (stdout, CS_ADMIN_OK);
    cs_admin_ks_args_t args = { .dir = "." };
    int status = cs_admin_ks_parse (argc - 1, argv + 1, &args);
    if (status >= 0)
        status = s_key_usage (status == CS_ADMIN_OK ? stdout : stderr, status);
    else
        status = s_key_check (verb, &args);
    if (status < 0) {
        keystore_t *keystore = cs_admin_keystore_open (args.dir, args.master_key);
        status = keystore ? s_key_run (verb, &args, keystore) : CS_ADMIN_FAIL;
        keystore_destroy (&keystore);
    }
    cs_admin_ks_args_free (&args);
    return status;
}

/* ---- master-key wrap ------------------------------------------------------ */

static int
s_wrap_usage (FILE *out, int status)
{
    fprintf (out,
        "usage: cryptoserver-admin master-key wrap --board NAME --label LABEL\n"
        "                                      --public-key PUB.pem [--dir DIR]\n"
        "\n"
        "Encrypts DIR/master.key with RSA-OAEP (SHA-256, MGF1-SHA256, no label)\n"
        "under PUB.pem, the public half of the RSA key labelled LABEL on board\n"
        "NAME; writes DIR/master.key.wrapped, sets keystore/master-key =\n"
        "board:NAME:LABEL and keystore/master-key-wrapped in broker.conf, then\n"
        "shreds DIR/master.key.  The broker unwraps it at start with that board.\n"
        "Keep an offline copy of master.key first: without the board key the\n"
        "keystore cannot be opened, by the broker or by this tool.\n");
    return status;
}

//  Overwrites a file with random bytes, then zeros, syncs and unlinks it.
//  Returns 0 or -1 after printing why.
int
cs_admin_shred (const char *path)
{
    struct stat st;
    int fd = open (path, O_WRONLY | O_CLOEXEC);
    if (fd < 0 || fstat (fd, &st) != 0) {
        cs_admin_error ("%s: %s", path, strerror (errno));
        if (fd >= 0)
            close (fd);
        return -1;
    }
    uint8_t noise [256];
    int rc = 0;
    for (int pass = 0; pass < 2 && rc == 0; pass++) {
        if (pass == 0)
            RAND_bytes (noise, sizeof noise);
        else
            memset (noise, 0, sizeof noise);
        off_t done = 0;
        lseek (fd, 0, SEEK_SET);
        while (done < st.st_size && rc == 0) {
            size_t chunk = (size_t) (st.st_size - done) < sizeof noise ? (size_t) (st.st_size - done)
                                                                      : sizeof noise;
            ssize_t n = write (fd, noise, chunk);
            rc = n > 0 ? 0 : -1;
            done += n > 0 ? n : 0;
        }
        if (rc == 0)
            rc = fsync (fd);
    }
    close (fd);
    if (rc == 0)
        rc = unlink (path);
    if (rc != 0)
        cs_admin_error ("%s: cannot shred: %s", path, strerror (errno));
    return rc;
}

//  RSA-OAEP-SHA256 encryption of the master key under the PEM public key
//  in file.  Returns a malloc'd ciphertext of *len_p bytes, or NULL after
//  printing why.
static uint8_t *
s_wrap (const char *file, const uint8_t key [KEYSTORE_MASTER_KEY_LEN], size_t *len_p)
{
    FILE *in = fopen (file, "r");
    EVP_PKEY *pub = in ? PEM_read_PUBKEY (in, NULL, NULL, NULL) : NULL;
    if (in)
        fclose (in);
    if (!pub || !EVP_PKEY_is_a (pub, "RSA")) {
        cs_admin_error ("%s: not a PEM RSA public key", file);
        EVP_PKEY_free (pub);
        return NULL;
    }
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_pkey (NULL, pub, NULL);
    size_t len = 0;
    uint8_t *out = NULL;
    if (ctx && EVP_PKEY_encrypt_init (ctx) == 1
    &&  EVP_PKEY_CTX_set_rsa_padding (ctx, RSA_PKCS1_OAEP_PADDING) == 1
    &&  EVP_PKEY_CTX_set_rsa_oaep_md (ctx, EVP_sha256 ()) == 1
    &&  EVP_PKEY_CTX_set_rsa_mgf1_md (ctx, EVP_sha256 ()) == 1
    &&  EVP_PKEY_encrypt (ctx, NULL, &len, key, KEYSTORE_MASTER_KEY_LEN) == 1
    &&  (out = malloc (len))
    &&  EVP_PKEY_encrypt (ctx, out, &len, key, KEYSTORE_MASTER_KEY_LEN) == 1)
        *len_p = len;
    else {
        cs_admin_error ("%s: RSA-OAEP encryption failed", file);
        free (out);
        out = NULL;
    }
    EVP_PKEY_CTX_free (ctx);
    EVP_PKEY_free (pub);
    return out;
}

//  Wraps, writes master.key.wrapped, updates broker.conf, shreds master.key.
static int
s_wrap_run (cs_admin_ks_args_t *args)
{
    zconfig_t *config = cs_admin_conf_load (args->dir);
    if (!config)
        return CS_ADMIN_FAIL;
    uint8_t key [KEYSTORE_MASTER_KEY_LEN];
    uint8_t *wrapped = NULL;
    size_t wrapped_len = 0;
    int status = CS_ADMIN_FAIL;
    const char *current = zconfig_get (config, "keystore/master-key", "master.key");
    char *key_path = cs_path_resolve (args->dir, current);
    char *out_path = cs_admin_path (args->dir, "master.key.wrapped");
    char *conf_path = cs_admin_path (args->dir, "broker.conf");
    char *board_path = zsys_sprintf ("drivers/%s", args->board);
    char *value = zsys_sprintf ("board:%s:%s", args->board, args->label);
    if (strncmp (current, "board:", 6) == 0)
        cs_admin_error ("the master key is already wrapped (%s)", current);
    else
    if (!zconfig_locate (config, board_path))
        cs_admin_error ("no board %s in %s (see 'cryptoserver-admin board list')", args->board, conf_path);
    else
    if (keystore_master_key_read (key_path, key) == 0
    &&  (wrapped = s_wrap (args->public_key, key, &wrapped_len))
    &&  cs_admin_file_write (out_path, wrapped, wrapped_len, 0600) == 0) {
        zconfig_put (config, "keystore/master-key", value);
        zconfig_put (config, "keystore/master-key-wrapped", "master.key.wrapped");
        if (cs_admin_conf_save (config, conf_path, 0600) == 0 && cs_admin_shred (key_path) == 0) {
            printf ("wrapped the master key under %s (%zu bytes in %s); %s shredded\n",
                    value, wrapped_len, out_path, key_path);
            status = CS_ADMIN_OK;
        }
    }
    OPENSSL_cleanse (key, sizeof key);
    free (wrapped);
    free (key_path);
    zstr_free (&out_path);
    zstr_free (&conf_path);
    zstr_free (&board_path);
    zstr_free (&value);
    zconfig_destroy (&config);
    return status;
}

int
cs_admin_master_key (int argc, char **argv)
{
    if (argc >= 2 && streq (argv [1], "rotate"))
        return cs_admin_master_rotate (argc, argv);
    if (argc < 2 || !streq (argv [1], "wrap"))
        return s_wrap_usage (argc >= 2 && (streq (argv [1], "--help") || streq (argv [1], "-h"))
                             ? stdout : stderr,
                             argc >= 2 && (streq (argv [1], "--help") || streq (argv [1], "-h"))
                             ? CS_ADMIN_OK : CS_ADMIN_USAGE);
    cs_admin_ks_args_t args = { .dir = "." };
    int status = cs_admin_ks_parse (argc - 1, argv + 1, &args);
    if (status >= 0)
        status = s_wrap_usage (status == CS_ADMIN_OK ? stdout : stderr, status);
    else
    if (!args.board || !args.label || !args.public_key || args.name
    ||  !cs_admin_name_ok (args.board) || strchr (args.label, ':'))
        status = s_wrap_usage (stderr, CS_ADMIN_USAGE);
    else
        status = s_wrap_run (&args);
    cs_admin_ks_args_free (&args);
    return status;
}
