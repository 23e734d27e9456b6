/*  cs_admin_shared.c — `cryptoserver-admin shared`: generate a shared RSA
 *  key at the three parties, export its public key, sign with it, through
 *  the control socket of the party that coordinates (party/control of
 *  DIR/broker.conf; docs/SHARED-KEYS.md "Over the network").
 */
#include <getopt.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/param_build.h>
#include <openssl/core_names.h>
#include "cs_admin.h"
#include "cs_ipc.h"
#include "cs_util.h"

typedef struct {
    const char *dir, *tenant, *label, *mech, *in, *out;
    int bits, party, timeout_s;
} s_args_t;

static void
s_usage (FILE *out)
{
    fprintf (out,
             "usage: cryptoserver-admin shared generate --tenant T --label L [--bits 1024|2048] [--dir DIR]\n"
             "       cryptoserver-admin shared public --tenant T --label L [--out PUB.pem] [--dir DIR]\n"
             "       cryptoserver-admin shared sign --tenant T --label L --mech M --in FILE --out SIG [--dir DIR]\n"
             "       cryptoserver-admin shared partial --tenant T --label L --mech M --party N --in FILE --out FILE\n"
             "  M: sha256-pkcs1 | sha256-pss (FILE is the message, hashed here), pkcs1 (FILE is a\n"
             "     DigestInfo), raw (FILE is at most k bytes)\n"
             "  --timeout S   seconds to wait for the parties (default 600)\n");
}

static int
s_parse (int argc, char **argv, s_args_t *a)
{
    static const struct option options [] = {
        { "dir", required_argument, NULL, 'd' }, { "tenant", required_argument, NULL, 't' },
        { "label", required_argument, NULL, 'l' }, { "bits", required_argument, NULL, 'b' },
        { "mech", required_argument, NULL, 'm' }, { "in", required_argument, NULL, 'i' },
        { "out", required_argument, NULL, 'o' }, { "party", required_argument, NULL, 'p' },
        { "timeout", required_argument, NULL, 'T' }, { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 }
    };
    int opt;
    *a = (s_args_t) { ".", NULL, NULL, NULL, NULL, NULL, 2048, 0, 600 };
    optind = 2;
    while ((opt = getopt_long (argc, argv, "h", options, NULL)) != -1)
        switch (opt) {
            case 'd': a->dir = optarg; break;
            case 't': a->tenant = optarg; break;
            case 'l': a->label = optarg; break;
            case 'b': a->bits = atoi (optarg); break;
            case 'm': a->mech = optarg; break;
            case 'i': a->in = optarg; break;
            case 'o': a->out = optarg; break;
            case 'p': a->party = atoi (optarg); break;
            case 'T': a->timeout_s = atoi (optarg); break;
            case 'h': s_usage (stdout); return CS_ADMIN_OK;
            default: s_usage (stderr); return CS_ADMIN_USAGE;
        }
    if (!a->tenant || !a->label || optind != argc || a->timeout_s < 1) {
        s_usage (stderr);
        return CS_ADMIN_USAGE;
    }
    return -1;
}

/*  Sends the request strings (NULL-terminated) to DIR's party control
 *  socket; the reply (caller destroys) or NULL after printing why.  */
static zmsg_t *
s_call (const s_args_t *a, const char **request)
{
    zconfig_t *conf = cs_admin_conf_load (a->dir);
    if (!conf)
        return NULL;
    const char *given = zconfig_get (conf, "party/control", NULL);
    char *endpoint = given ? strdup (given) : cs_ipc_party_control_default (a->dir);
    zconfig_destroy (&conf);
    zsock_t *req = endpoint ? zsock_new_req (endpoint) : NULL;
    zmsg_t *msg = zmsg_new (), *reply = NULL;
    for (size_t i = 0; request [i]; i++)
        zmsg_addstr (msg, request [i]);
    if (req) {
        zsock_set_rcvtimeo (req, a->timeout_s * 1000);
        zmsg_send (&msg, req);
        reply = zmsg_recv (req);
    }
    if (!reply)
        cs_admin_error ("no answer from the party service at %s within %d s (is the broker running "
                        "with a party section?)", endpoint ? endpoint : "?", a->timeout_s);
    zmsg_destroy (&msg);
    zsock_destroy (&req);
    free (endpoint);
    return reply;
}

/*  The reply's status: true for OK; else prints "RV: why".  */
static bool
s_ok (zmsg_t *reply)
{
    char *status = zmsg_popstr (reply);
    bool ok = status && streq (status, "OK");
    if (!ok) {
        char *rv = zmsg_popstr (reply), *why = zmsg_popstr (reply);
        cs_admin_error ("%s: %s", rv ? rv : "?", why ? why : "malformed answer");
        zstr_free (&rv);
        zstr_free (&why);
    }
    zstr_free (&status);
    return ok;
}

/*  Hex of data; caller frees (aborts on out of memory, a CLI tool).  */
static char *
s_hex (const unsigned char *data, size_t len)
{
    char *hex = zmalloc (2 * len + 1);
    cs_hex_encode (data, len, hex);
    return hex;
}

/*  Writes the bytes of hex to path.  */
static int
s_write_hex (const char *path, const char *hex)
{
    size_t cap = strlen (hex) / 2 + 1;
    unsigned char *bin = zmalloc (cap);
    long len = cs_hex_decode (hex, bin, cap);
    int rc = len < 0 ? -1 : cs_admin_file_write (path, bin, (size_t) len, 0644);
    if (len < 0)
        cs_admin_error ("malformed answer");
    free (bin);
    return rc;
}

/*  The hex of what the party pads: a SHA-256 DigestInfo (RFC 8017 §9.2
 *  note 1) or digest of the file for the sha256-* mechanisms, else the
 *  file; *mech_p gets the party's mechanism name.  NULL after printing why.  */
static char *
s_input (const s_args_t *a, const char **mech_p)
{
    static const unsigned char prefix [19] = { 0x30, 0x31, 0x30, 0x0d, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01,
                                               0x65, 0x03, 0x04, 0x02, 0x01, 0x05, 0x00, 0x04, 0x20 };
    zchunk_t *data = a->in ? zchunk_slurp (a->in, 0) : NULL;
    if (!data || !a->mech) {
        cs_admin_error ("--mech and a readable --in FILE are required");
        zchunk_destroy (&data);
        return NULL;
    }
    unsigned char buf [19 + 32];
    unsigned int md_len = 0;
    char *hex = NULL;
    bool hashed = strncmp (a->mech, "sha256-", 7) == 0;
    if (hashed)
        EVP_Digest (zchunk_data (data), zchunk_size (data), buf + 19, &md_len, EVP_sha256 (), NULL);
    memcpy (buf, prefix, sizeof prefix);
    if (streq (a->mech, "sha256-pkcs1")) {
        *mech_p = "pkcs1";
        hex = s_hex (buf, sizeof buf);
    }
    else
    if (streq (a->mech, "sha256-pss")) {
        *mech_p = "pss-sha256";
        hex = s_hex (buf + 19, 32);
    }
    else
    if (streq (a->mech, "pkcs1") || streq (a->mech, "raw")) {
        *mech_p = a->mech;
        hex = s_hex (zchunk_data (data), zchunk_size (data));
    }
    else
        cs_admin_error ("--mech must be sha256-pkcs1, sha256-pss, pkcs1 or raw");
    zchunk_destroy (&data);
    return hex;
}

/*  The public key (hex N, decimal e) as PEM (SubjectPublicKeyInfo) to path or stdout.  */
static int
s_write_public (const char *path, const char *n_hex, const char *e_dec)
{
    BIGNUM *n = NULL, *e = NULL;
    EVP_PKEY *pkey = NULL;
    OSSL_PARAM_BLD *bld = OSSL_PARAM_BLD_new ();
    OSSL_PARAM *params = NULL;
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_name (NULL, "RSA", NULL);
    if (BN_hex2bn (&n, n_hex) && BN_dec2bn (&e, e_dec) && bld && ctx
    &&  OSSL_PARAM_BLD_push_BN (bld, OSSL_PKEY_PARAM_RSA_N, n) && OSSL_PARAM_BLD_push_BN (bld, OSSL_PKEY_PARAM_RSA_E, e)
    &&  (params = OSSL_PARAM_BLD_to_param (bld)) && EVP_PKEY_fromdata_init (ctx) > 0)
        (void) EVP_PKEY_fromdata (ctx, &pkey, EVP_PKEY_PUBLIC_KEY, params);
    FILE *file = path ? fopen (path, "w") : stdout;
    int rc = pkey && file && PEM_write_PUBKEY (file, pkey) ? 0 : -1;
    if (path && file)
        rc = fclose (file) ? -1 : rc;
    if (rc)
        cs_admin_error ("cannot write the public key%s%s", path ? " to " : "", path ? path : "");
    EVP_PKEY_free (pkey);
    EVP_PKEY_CTX_free (ctx);
    OSSL_PARAM_free (params);
    OSSL_PARAM_BLD_free (bld);
    BN_free (n);
    BN_free (e);
    return rc;
}

int
cs_admin_shared (int argc, char **argv)
{
    s_args_t a;
    int status = argc >= 2 ? s_parse (argc, argv, &a) : (s_usage (stderr), CS_ADMIN_USAGE);
    if (status >= 0)
        return status;
    const char *sub = argv [1], *mech = NULL;
    char bits [16], party [16], *hex = NULL;
    snprintf (bits, sizeof bits, "%d", a.bits);
    snprintf (party, sizeof party, "%d", a.party);
    const char *request [8] = { NULL };
    if (streq (sub, "generate"))
        memcpy (request, (const char *[]) { "GENERATE", a.tenant, a.label, bits, NULL }, 5 * sizeof (char *));
    else
    if (streq (sub, "public"))
        memcpy (request, (const char *[]) { "PUBLIC", a.tenant, a.label, NULL }, 4 * sizeof (char *));
    else
    if ((streq (sub, "sign") || streq (sub, "partial")) && a.out && (hex = s_input (&a, &mech))) {
        bool sign = streq (sub, "sign");
        memcpy (request, (const char *[]) { sign ? "SIGN" : "PARTIAL", a.tenant, a.label, mech, hex,
                                            sign ? NULL : party, NULL }, 7 * sizeof (char *));
    }
    else {
        if (!hex && (streq (sub, "sign") || streq (sub, "partial")) && !a.out)
            cs_admin_error ("--out FILE is required");
        else
        if (!streq (sub, "sign") && !streq (sub, "partial"))
            s_usage (stderr);
        return CS_ADMIN_USAGE;
    }
    zmsg_t *reply = s_call (&a, request);
    free (hex);
    status = CS_ADMIN_FAIL;
    if (reply && s_ok (reply)) {
        char *first = zmsg_popstr (reply), *second = zmsg_popstr (reply);
        if (streq (sub, "generate")) {
            printf ("generated shared key \"%s\" (%s) for tenant %s at the three parties\n", a.label, first, a.tenant);
            status = CS_ADMIN_OK;
        }
        else
        if (streq (sub, "public"))
            status = s_write_public (a.out, first, second ? second : "65537") ? CS_ADMIN_FAIL : CS_ADMIN_OK;
        else
            status = s_write_hex (a.out, first) ? CS_ADMIN_FAIL : CS_ADMIN_OK;
        zstr_free (&first);
        zstr_free (&second);
    }
    zmsg_destroy (&reply);
    return status;
}
