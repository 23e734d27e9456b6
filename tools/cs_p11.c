/*  cs_p11.c — cryptoserver-p11: what Debian 12's pkcs11-tool cannot do with
 *  PKCS#11 3.2 keys (issue #23): ML-DSA and ML-KEM key pairs on the token,
 *  their raw public keys, pure ML-DSA signatures with a context, and ML-KEM
 *  encapsulation and decapsulation, through any module that offers the 3.2
 *  interface (C_GetInterface "PKCS 11" 3.2, dlopen).  Exit status: 0 done
 *  (verify: valid), 1 a PKCS#11 call failed or a signature is invalid (its
 *  CKR_* on stderr), 2 usage or bad input.  Man page: cryptoserver-p11(1).
 */
#include <dlfcn.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/crypto.h>
#include "cs_p11_3.h"
#include "cryptoserver/pkcs11v.h"
#include "cs_util.h"
#include "cs_wire.h"

#define S_FILE_MAX (1024 * 1024)    /* bytes of an input file */
#define S_SECRET_MAX 64             /* bytes of a shared secret (ML-KEM: 32) */

typedef struct {
    const char *command;
    const char *module, *token, *pin;   /* --module, --token, --pin (defaults: $CRYPTOSERVER_*) */
    const char *type, *label;           /* keygen --type; every key command --label */
    const char *in, *out, *sig;         /* sign/verify: message, signature out / in */
    const char *out_ct, *out_secret, *in_ct;
    const char *context;                /* --context HEX (ML-DSA, 0..255 bytes) */
    bool deterministic;                 /* --deterministic: CKH_DETERMINISTIC_REQUIRED */
    bool session;                       /* keygen --session: a session key pair (tests) */
    bool no_usage;                      /* keygen --no-usage: CKA_SIGN / CKA_DECAPSULATE FALSE */
    const char *parameter_set;          /* keygen --parameter-set N: instead of --type's */
} s_options_t;

static CK_FUNCTION_LIST_3_2 *s_p11;

static void
s_usage (FILE *out)
{
    fputs ("usage: cryptoserver-p11 [OPTIONS] COMMAND\n"
           "  keygen --type ml-dsa-44|ml-dsa-65|ml-dsa-87|ml-kem-512|ml-kem-768|ml-kem-1024 --label L\n"
           "         [--session] [--no-usage] [--parameter-set N]\n"
           "  pubkey --label L --out FILE            the raw FIPS 204 pk / FIPS 203 ek\n"
           "  sign --label L --in FILE --out FILE [--context HEX] [--deterministic]\n"
           "  verify --label L --in FILE --sig FILE [--context HEX]\n"
           "  encapsulate --label L --out-ct FILE --out-secret FILE\n"
           "  decapsulate --label L --in-ct FILE --out-secret FILE\n"
           "options:\n"
           "  --module PATH    the PKCS#11 module (default $CRYPTOSERVER_MODULE)\n"
           "  --token LABEL    the token (default $CRYPTOSERVER_TOKEN, else the first)\n"
           "  --pin PIN        the user PIN (default $CRYPTOSERVER_PIN)\n"
           "  --help           this text\n", out);
}

static int
s_fail (const char *what, CK_RV rv)
{
    fprintf (stderr, "cryptoserver-p11: %s: %s\n", what, cs_rv_name (rv));
    return 1;
}

/*  Reads a whole file (at most S_FILE_MAX bytes) into *data_p (caller frees).  */
static int
s_read (const char *path, unsigned char **data_p, size_t *len_p)
{
    FILE *file = path ? fopen (path, "rb") : NULL;
    unsigned char *data = file ? malloc (S_FILE_MAX) : NULL;
    size_t len = data ? fread (data, 1, S_FILE_MAX, file) : 0;
    bool ok = data && !ferror (file) && feof (file);
    if (file)
        fclose (file);
    if (!ok) {
        fprintf (stderr, "cryptoserver-p11: cannot read %s (at most %d bytes)\n", path ? path : "(none)", S_FILE_MAX);
        free (data);
        return -1;
    }
    *data_p = data;
    *len_p = len;
    return 0;
}

static int
s_write (const char *path, const void *data, size_t len)
{
    FILE *file = path ? fopen (path, "wb") : NULL;
    bool ok = file && fwrite (data, 1, len, file) == len;
    if (file && fclose (file))
        ok = false;
    if (!ok)
        fprintf (stderr, "cryptoserver-p11: cannot write %s\n", path ? path : "(none)");
    return ok ? 0 : -1;
}

/*  True when the blank-padded token label equals `want`.  */
static bool
s_label_is (const CK_UTF8CHAR label [32], const char *want)
{
    size_t len = strlen (want);
    if (len > 32 || memcmp (label, want, len))
        return false;
    while (len < 32 && label [len] == ' ')
        len++;
    return len == 32;
}

/*  Loads the 3.2 interface of the module, opens a session on the token and
 *  logs in.  Returns 0, 1 (a PKCS#11 failure, said) or 2.  */
static int
s_open (const s_options_t *o, CK_SESSION_HANDLE *session_p)
{
    void *dl = dlopen (o->module, RTLD_NOW | RTLD_LOCAL);
    CK_RV (*get) (CK_UTF8CHAR_PTR, CK_VERSION_PTR, CK_INTERFACE_PTR_PTR, CK_FLAGS)
        = dl ? (CK_RV (*) (CK_UTF8CHAR_PTR, CK_VERSION_PTR, CK_INTERFACE_PTR_PTR, CK_FLAGS)) dlsym (dl, "C_GetInterface")
             : NULL;
    CK_VERSION version = { 3, 2 };
    CK_INTERFACE *iface = NULL;
    if (!get || get ((CK_UTF8CHAR *) "PKCS 11", &version, &iface, 0) != CKR_OK || !iface) {
        fprintf (stderr, "cryptoserver-p11: %s has no PKCS#11 3.2 interface (%s)\n", o->module,
                 dl ? "C_GetInterface" : dlerror ());
        return 2;
    }
    s_p11 = iface->pFunctionList;
    CK_C_INITIALIZE_ARGS args = { .flags = CKF_OS_LOCKING_OK };
    CK_SLOT_ID slots [64], slot = (CK_SLOT_ID) -1;
    CK_ULONG count = 64;
    CK_RV rv = s_p11->C_Initialize (&args);
    if (rv == CKR_OK)
        rv = s_p11->C_GetSlotList (CK_TRUE, slots, &count);
    for (CK_ULONG i = 0; rv == CKR_OK && i < count && slot == (CK_SLOT_ID) -1; i++) {
        CK_TOKEN_INFO info;
        if (!o->token || (s_p11->C_GetTokenInfo (slots [i], &info) == CKR_OK && s_label_is (info.label, o->token)))
            slot = slots [i];
    }
    if (rv == CKR_OK && slot == (CK_SLOT_ID) -1) {
        fprintf (stderr, "cryptoserver-p11: no token%s%s\n", o->token ? " labelled " : "", o->token ? o->token : "");
        return 1;
    }
    if (rv == CKR_OK)
        rv = s_p11->C_OpenSession (slot, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, session_p);
    if (rv == CKR_OK && o->pin)
        rv = s_p11->C_Login (*session_p, CKU_USER, (CK_UTF8CHAR *) o->pin, strlen (o->pin));
    return rv == CKR_OK ? 0 : s_fail ("open", rv);
}

/*  The one object of `klass` labelled `label`; CKR_KEY_HANDLE_INVALID when
 *  there is none.  */
static CK_RV
s_find (CK_SESSION_HANDLE session, CK_OBJECT_CLASS klass, const char *label, CK_OBJECT_HANDLE *object_p)
{
    CK_ATTRIBUTE tmpl [] = { { CKA_CLASS, &klass, sizeof klass }, { CKA_LABEL, (void *) label, strlen (label) } };
    CK_ULONG found = 0;
    CK_RV rv = s_p11->C_FindObjectsInit (session, tmpl, 2);
    if (rv == CKR_OK)
        rv = s_p11->C_FindObjects (session, object_p, 1, &found);
    if (rv == CKR_OK)
        rv = s_p11->C_FindObjectsFinal (session);
    return rv == CKR_OK && !found ? CKR_KEY_HANDLE_INVALID : rv;
}

/*  --type: the key-pair mechanism and CKP_* parameter set; -1 unknown.  */
static int
s_type (const char *type, CK_MECHANISM_TYPE *mech_p, CK_ULONG *set_p)
{
    static const struct { const char *name; CK_MECHANISM_TYPE mech; CK_ULONG set; } types [] = {
        { "ml-dsa-44", CKM_ML_DSA_KEY_PAIR_GEN, CKP_ML_DSA_44 }, { "ml-dsa-65", CKM_ML_DSA_KEY_PAIR_GEN, CKP_ML_DSA_65 },
        { "ml-dsa-87", CKM_ML_DSA_KEY_PAIR_GEN, CKP_ML_DSA_87 }, { "ml-kem-512", CKM_ML_KEM_KEY_PAIR_GEN, CKP_ML_KEM_512 },
        { "ml-kem-768", CKM_ML_KEM_KEY_PAIR_GEN, CKP_ML_KEM_768 },
        { "ml-kem-1024", CKM_ML_KEM_KEY_PAIR_GEN, CKP_ML_KEM_1024 },
    };
    for (size_t i = 0; type && i < sizeof types / sizeof types [0]; i++)
        if (strcmp (type, types [i].name) == 0) {
            *mech_p = types [i].mech;
            *set_p = types [i].set;
            return 0;
        }
    return -1;
}

/*  keygen: a token key pair (PKCS#11 3.2 CKM_ML_DSA_KEY_PAIR_GEN,
 *  CKM_ML_KEM_KEY_PAIR_GEN with CKA_PARAMETER_SET) labelled --label.  */
static int
s_keygen (const s_options_t *o, CK_SESSION_HANDLE session)
{
    CK_MECHANISM_TYPE type = 0;
    CK_ULONG set = 0;
    if (s_type (o->type, &type, &set)) {
        fprintf (stderr, "cryptoserver-p11: keygen needs --type ml-dsa-44|65|87 or ml-kem-512|768|1024\n");
        return 2;
    }
    if (o->parameter_set)
        set = strtoul (o->parameter_set, NULL, 0);
    CK_BBOOL yes = CK_TRUE, use = o->no_usage ? CK_FALSE : CK_TRUE, token = o->session ? CK_FALSE : CK_TRUE;
    bool dsa = type == CKM_ML_DSA_KEY_PAIR_GEN;
    CK_ATTRIBUTE pub [] = { { CKA_TOKEN, &token, 1 }, { CKA_LABEL, (void *) o->label, strlen (o->label) },
                            { CKA_PARAMETER_SET, &set, sizeof set },
                            { dsa ? CKA_VERIFY : CKA_ENCAPSULATE, &yes, 1 } };
    CK_ATTRIBUTE priv [] = { { CKA_TOKEN, &token, 1 }, { CKA_LABEL, (void *) o->label, strlen (o->label) },
                             { CKA_PRIVATE, &yes, 1 }, { CKA_SENSITIVE, &yes, 1 },
                             { dsa ? CKA_SIGN : CKA_DECAPSULATE, &use, 1 } };
    CK_MECHANISM mech = { type, NULL, 0 };
    CK_OBJECT_HANDLE pub_h, priv_h;
    CK_RV rv = s_p11->C_GenerateKeyPair (session, &mech, pub, 4, priv, 5, &pub_h, &priv_h);
    return rv == CKR_OK ? 0 : s_fail ("C_GenerateKeyPair", rv);
}

/*  pubkey: CKA_VALUE of the public key (PKCS#11 3.2: the raw pk / ek).  */
static int
s_pubkey (const s_options_t *o, CK_SESSION_HANDLE session)
{
    unsigned char value [4096];
    CK_OBJECT_HANDLE key;
    CK_ATTRIBUTE attr = { CKA_VALUE, value, sizeof value };
    CK_RV rv = s_find (session, CKO_PUBLIC_KEY, o->label, &key);
    if (rv == CKR_OK)
        rv = s_p11->C_GetAttributeValue (session, key, &attr, 1);
    if (rv != CKR_OK)
        return s_fail ("public key", rv);
    return s_write (o->out, value, attr.ulValueLen) ? 2 : 0;
}

/*  The CKM_ML_DSA mechanism of --context / --deterministic into *mech
 *  (ctx holds its parameter; its context in ctx_bytes, 255 bytes).  */
static int
s_ml_dsa (const s_options_t *o, CK_MECHANISM *mech, CK_SIGN_ADDITIONAL_CONTEXT *ctx, unsigned char *ctx_bytes)
{
    long len = o->context ? cs_hex_decode (o->context, ctx_bytes, 255) : 0;
    *mech = (CK_MECHANISM) { CKM_ML_DSA, NULL, 0 };
    if (len < 0) {
        fprintf (stderr, "cryptoserver-p11: --context: at most 255 bytes in hex\n");
        return 2;
    }
    if (!o->context && !o->deterministic)
        return 0;                       /* no parameter: hedged, empty context */
    *ctx = (CK_SIGN_ADDITIONAL_CONTEXT) { o->deterministic ? CKH_DETERMINISTIC_REQUIRED : CKH_HEDGE_PREFERRED,
                                          len ? ctx_bytes : NULL, (CK_ULONG) len };
    *mech = (CK_MECHANISM) { CKM_ML_DSA, ctx, sizeof *ctx };
    return 0;
}

/*  sign / verify with CKM_ML_DSA (pure ML-DSA, FIPS 204 §5.2).  */
static int
s_sign_verify (const s_options_t *o, CK_SESSION_HANDLE session, bool sign)
{
    unsigned char ctx_bytes [255], *message = NULL, *sig = NULL, out [8192];
    size_t len = 0, sig_len = 0;
    CK_SIGN_ADDITIONAL_CONTEXT ctx;
    CK_MECHANISM mech;
    CK_OBJECT_HANDLE key;
    CK_ULONG out_len = sizeof out;
    int status = s_ml_dsa (o, &mech, &ctx, ctx_bytes);
    if (status || s_read (o->in, &message, &len) || (!sign && s_read (o->sig, &sig, &sig_len))) {
        free (message);
        return 2;
    }
    CK_RV rv = s_find (session, sign ? CKO_PRIVATE_KEY : CKO_PUBLIC_KEY, o->label, &key);
    if (rv == CKR_OK)
        rv = sign ? s_p11->C_SignInit (session, &mech, key) : s_p11->C_VerifyInit (session, &mech, key);
    if (rv == CKR_OK)
        rv = sign ? s_p11->C_Sign (session, message, len, out, &out_len)
                  : s_p11->C_Verify (session, message, len, sig, sig_len);
    status = rv != CKR_OK ? s_fail (sign ? "C_Sign" : "C_Verify", rv)
           : sign && s_write (o->out, out, out_len) ? 2 : 0;
    free (message);
    free (sig);
    return status;
}

/*  The template of the secret key a KEM makes: a session CKK_GENERIC_SECRET
 *  that can be read (CKA_SENSITIVE FALSE, CKA_EXTRACTABLE TRUE), which is
 *  what --out-secret needs (PKCS#11 3.2: the application's template).  */
static CK_BBOOL s_false = CK_FALSE, s_true = CK_TRUE;
static CK_OBJECT_CLASS s_secret_class = CKO_SECRET_KEY;
static CK_KEY_TYPE s_generic = CKK_GENERIC_SECRET;
static CK_ATTRIBUTE s_secret_tmpl [] = {
    { CKA_CLASS, &s_secret_class, sizeof s_secret_class }, { CKA_KEY_TYPE, &s_generic, sizeof s_generic },
    { CKA_TOKEN, &s_false, 1 }, { CKA_SENSITIVE, &s_false, 1 }, { CKA_EXTRACTABLE, &s_true, 1 },
};

/*  Writes CKA_VALUE of the secret key `secret` to --out-secret (wiped).  */
static int
s_secret_out (const s_options_t *o, CK_SESSION_HANDLE session, CK_OBJECT_HANDLE secret)
{
    unsigned char value [S_SECRET_MAX];
    CK_ATTRIBUTE attr = { CKA_VALUE, value, sizeof value };
    CK_RV rv = s_p11->C_GetAttributeValue (session, secret, &attr, 1);
    int status = rv != CKR_OK ? s_fail ("the shared secret", rv) : s_write (o->out_secret, value, attr.ulValueLen) ? 2 : 0;
    OPENSSL_cleanse (value, sizeof value);
    s_p11->C_DestroyObject (session, secret);
    return status;
}

/*  encapsulate (C_EncapsulateKey to the public key) / decapsulate
 *  (C_DecapsulateKey with the private key), CKM_ML_KEM (FIPS 203).  */
static int
s_kem (const s_options_t *o, CK_SESSION_HANDLE session, bool encapsulate)
{
    unsigned char ct [4096], *in = NULL;
    size_t in_len = 0;
    CK_ULONG ct_len = sizeof ct;
    CK_MECHANISM mech = { CKM_ML_KEM, NULL, 0 };
    CK_OBJECT_HANDLE key, secret = CK_INVALID_HANDLE;
    CK_ULONG n = sizeof s_secret_tmpl / sizeof s_secret_tmpl [0];
    if (!encapsulate && s_read (o->in_ct, &in, &in_len))
        return 2;
    CK_RV rv = s_find (session, encapsulate ? CKO_PUBLIC_KEY : CKO_PRIVATE_KEY, o->label, &key);
    if (rv == CKR_OK)
        rv = encapsulate ? s_p11->C_EncapsulateKey (session, &mech, key, s_secret_tmpl, n, ct, &ct_len, &secret)
                         : s_p11->C_DecapsulateKey (session, &mech, key, s_secret_tmpl, n, in, in_len, &secret);
    free (in);
    if (rv != CKR_OK)
        return s_fail (encapsulate ? "C_EncapsulateKey" : "C_DecapsulateKey", rv);
    if (encapsulate && s_write (o->out_ct, ct, ct_len))
        return 2;
    return s_secret_out (o, session, secret);
}

/*  Parses the options; 0, or 2 after a usage message.  */
static int
s_options (int argc, char **argv, s_options_t *o)
{
    static const struct option longs [] = {
        { "module", required_argument, NULL, 'm' }, { "token", required_argument, NULL, 't' },
        { "pin", required_argument, NULL, 'p' }, { "type", required_argument, NULL, 'y' },
        { "label", required_argument, NULL, 'l' }, { "in", required_argument, NULL, 'i' },
        { "out", required_argument, NULL, 'o' }, { "sig", required_argument, NULL, 's' },
        { "context", required_argument, NULL, 'c' }, { "out-ct", required_argument, NULL, 'C' },
        { "out-secret", required_argument, NULL, 'S' }, { "in-ct", required_argument, NULL, 'I' },
        { "deterministic", no_argument, NULL, 'd' }, { "session", no_argument, NULL, 'e' },
        { "no-usage", no_argument, NULL, 'n' }, { "parameter-set", required_argument, NULL, 'P' },
        { "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 }
    };
    const char **args [128] = { 0 };
    args ['m'] = &o->module; args ['t'] = &o->token; args ['p'] = &o->pin; args ['y'] = &o->type;
    args ['l'] = &o->label; args ['i'] = &o->in; args ['o'] = &o->out; args ['s'] = &o->sig;
    args ['c'] = &o->context; args ['C'] = &o->out_ct; args ['S'] = &o->out_secret; args ['I'] = &o->in_ct;
    args ['P'] = &o->parameter_set;
    o->module = getenv ("CRYPTOSERVER_MODULE") ? getenv ("CRYPTOSERVER_MODULE") : "cryptoserver-pkcs11.so";
    o->token = getenv ("CRYPTOSERVER_TOKEN");
    o->pin = getenv ("CRYPTOSERVER_PIN");
    for (int c; (c = getopt_long (argc, argv, "", longs, NULL)) != -1; ) {
        if (c == 'h') {
            s_usage (stdout);
            exit (0);
        }
        if (c == 'd' || c == 'e' || c == 'n')
            *(c == 'd' ? &o->deterministic : c == 'e' ? &o->session : &o->no_usage) = true;
        else
        if (c > 0 && c < 128 && args [c])
            *args [c] = optarg;
        else {
            s_usage (stderr);
            return 2;
        }
    }
    o->command = optind + 1 == argc ? argv [optind] : NULL;
    if (!o->command || !o->label) {
        s_usage (stderr);
        return 2;
    }
    return 0;
}

int
main (int argc, char **argv)
{
    s_options_t o = { 0 };
    CK_SESSION_HANDLE session = CK_INVALID_HANDLE;
    int status = s_options (argc, argv, &o);
    const char *c = o.command;
    if (status == 0 && strcmp (c, "keygen") && strcmp (c, "pubkey") && strcmp (c, "sign") && strcmp (c, "verify")
    &&  strcmp (c, "encapsulate") && strcmp (c, "decapsulate")) {
        s_usage (stderr);
        status = 2;
    }
    if (status == 0)
        status = s_open (&o, &session);
    if (status == 0)
        status = strcmp (c, "keygen") == 0 ? s_keygen (&o, session)
               : strcmp (c, "pubkey") == 0 ? s_pubkey (&o, session)
               : strcmp (c, "sign") == 0 ? s_sign_verify (&o, session, true)
               : strcmp (c, "verify") == 0 ? s_sign_verify (&o, session, false)
               : s_kem (&o, session, strcmp (c, "encapsulate") == 0);
    if (s_p11)
        s_p11->C_Finalize (NULL);
    return status;
}
