/*  cs_modexp.c — cryptoserver-modexp: raw modular exponentiation on the
 *  cryptoserver's boards from a shell script, through the PKCS#11 module
 *  (dlopen) and its vendor mechanisms (cryptoserver/pkcs11v.h, issue #12:
 *  the paper's RPCMODEXP ... RPCGETMAXMODULUSLEN).  Operands in hex on the
 *  command line, bases as arguments or one per stdin line; one result per
 *  line in hex on stdout.  Exit status: 0 done, 1 a PKCS#11 call failed
 *  (its CKR_* on stderr), 2 usage or bad input.  Man page:
 *  cryptoserver-modexp(1).
 */
#include <ctype.h>
#include <dlfcn.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/bn.h>
#include <openssl/crypto.h>
#include <p11-kit/pkcs11.h>
#include "cryptoserver/pkcs11v.h"
#include "cs_wire.h"

typedef struct {
    unsigned char *bytes;
    size_t len;
} s_num_t;

typedef struct {
    const char *module;             /* --module */
    const char *token;              /* --token, NULL: the first slot with a token */
    const char *pin;                /* --pin / --pin-file / CRYPTOSERVER_PIN */
    const char *public_exponent;    /* --e (crt) */
    bool single;                    /* --single: one C_Digest per base */
    char pin_buf [256];
} s_options_t;

static CK_FUNCTION_LIST *s_p11;

/*  Every allocation of the program, freed (secret operands wiped) at the
 *  end of main, so that early error returns leak nothing.  */
static void **s_allocs;
static size_t *s_alloc_sizes, s_n_allocs, s_max_allocs;

static void *
s_calloc (size_t n, size_t size)
{
    if (s_n_allocs == s_max_allocs) {
        size_t max = s_max_allocs ? 2 * s_max_allocs : 64;
        void **allocs = realloc (s_allocs, max * sizeof *allocs);
        if (allocs)
            s_allocs = allocs;
        size_t *sizes = allocs ? realloc (s_alloc_sizes, max * sizeof *sizes) : NULL;
        if (!sizes)
            return NULL;
        s_alloc_sizes = sizes;
        s_max_allocs = max;
    }
    void *p = calloc (n ? n : 1, size ? size : 1);
    if (p) {
        s_allocs [s_n_allocs] = p;
        s_alloc_sizes [s_n_allocs++] = (n ? n : 1) * (size ? size : 1);
    }
    return p;
}

static char *
s_strdup (const char *text)
{
    char *copy = s_calloc (strlen (text) + 1, 1);
    if (copy)
        memcpy (copy, text, strlen (text));
    return copy;
}

static void
s_free_all (void)
{
    for (size_t i = 0; i < s_n_allocs; i++) {
        OPENSSL_cleanse (s_allocs [i], s_alloc_sizes [i]);
        free (s_allocs [i]);
    }
    free (s_allocs);
    free (s_alloc_sizes);
}

static void
s_usage (FILE *out)
{
    fprintf (out,
        "usage: cryptoserver-modexp [OPTIONS] modexp E M [BASE...]\n"
        "       cryptoserver-modexp [OPTIONS] crt P Q DP DQ QINV [BASE...]\n"
        "       cryptoserver-modexp [OPTIONS] multi [BASE:E:M...]\n"
        "       cryptoserver-modexp [OPTIONS] max-modulus\n"
        "Raw modular exponentiation on the cryptoserver's boards (cryptoserver-modexp(1)).\n"
        "Numbers are hex (an optional 0x); without BASE arguments the bases are read\n"
        "from stdin, one per line (multi: 'BASE E M' per line).  One result per line,\n"
        "hex, as long as the modulus.  Several bases go in one array call.\n"
        "  modexp       BASE^E mod M (CKM_CS_MODEXP, CKM_CS_MODEXP_ARRAY)\n"
        "  crt          BASE^d mod P*Q by CRT (CKM_CS_RSA_CRT, CKM_CS_RSA_CRT_ARRAY)\n"
        "  multi        each BASE^E mod M (CKM_CS_MULTI_MODEXP_ARRAY)\n"
        "  max-modulus  the largest modulus the boards take, in bits\n"
        "options:\n"
        "  --module SO      the PKCS#11 module (default $CRYPTOSERVER_MODULE, else\n"
        "                   cryptoserver-pkcs11.so on the loader's path)\n"
        "  --token LABEL    the token (default: the first slot with a token)\n"
        "  --pin PIN        the user PIN (or --pin-file FILE, or $CRYPTOSERVER_PIN)\n"
        "  --e E            crt: the public exponent, for the cheap check of results\n"
        "  --single         one call per base instead of one array call\n"
        "  --help           this text\n");
}

/*  Parses hex (optional 0x, odd length allowed) into *num.  */
static int
s_hex (const char *text, s_num_t *num)
{
    while (isspace ((unsigned char) *text))
        text++;
    if (text [0] == '0' && (text [1] == 'x' || text [1] == 'X'))
        text += 2;
    size_t digits = 0;
    while (isxdigit ((unsigned char) text [digits]))
        digits++;
    for (const char *rest = text + digits; *rest; rest++)
        if (!isspace ((unsigned char) *rest))
            return -1;
    if (digits == 0)
        return -1;
    num->len = (digits + 1) / 2;
    num->bytes = s_calloc (1, num->len);
    if (!num->bytes)
        return -1;
    for (size_t i = 0; i < digits; i++) {
        char c = text [digits - 1 - i];
        unsigned v = (unsigned) (isdigit ((unsigned char) c) ? c - '0' : tolower ((unsigned char) c) - 'a' + 10);
        num->bytes [num->len - 1 - i / 2] |= (unsigned char) (i % 2 ? v << 4 : v);
    }
    return 0;
}

/*  Length without leading zero bytes.  */
static size_t
s_significant (const s_num_t *num)
{
    size_t skip = 0;
    while (skip < num->len && num->bytes [skip] == 0)
        skip++;
    return num->len - skip;
}

/*  A k-byte big-endian copy of num (left-padded), or -1 when it is longer.  */
static int
s_pad (const s_num_t *num, size_t k, unsigned char *out)
{
    size_t len = s_significant (num);
    if (len > k)
        return -1;
    memset (out, 0, k - len);
    memcpy (out + k - len, num->bytes + num->len - len, len);
    return 0;
}

static void
s_print (const unsigned char *bytes, size_t len)
{
    for (size_t i = 0; i < len; i++)
        printf ("%02x", bytes [i]);
    putchar ('\n');
}

/*  Reads the stdin lines (non-empty) into a malloc'd array of strdup'd lines.  */
static char **
s_read_lines (size_t *count_p)
{
    char *line = NULL;
    size_t cap = 0, count = 0, max = 16;
    char **lines = s_calloc (max, sizeof *lines);
    ssize_t got;
    while (lines && (got = getline (&line, &cap, stdin)) >= 0) {
        char *p = line;
        while (isspace ((unsigned char) *p))
            p++;
        if (!*p)
            continue;
        if (count == max) {
            char **grown = s_calloc (max * 2, sizeof *lines);
            if (!grown)
                break;
            memcpy (grown, lines, max * sizeof *lines);
            lines = grown;
            max *= 2;
        }
        lines [count++] = s_strdup (p);
    }
    free (line);
    *count_p = count;
    return lines;
}

/*  Loads the module, finds the token, opens a session and logs in.  */
static int
s_open (const s_options_t *options, bool login, CK_SLOT_ID *slot_p, CK_SESSION_HANDLE *session_p)
{
    void *dl = dlopen (options->module, RTLD_NOW | RTLD_LOCAL);
    CK_C_GetFunctionList get_list = dl ? (CK_C_GetFunctionList) dlsym (dl, "C_GetFunctionList") : NULL;
    if (!get_list || get_list (&s_p11) != CKR_OK) {
        fprintf (stderr, "cryptoserver-modexp: cannot load %s: %s\n", options->module, dl ? "no C_GetFunctionList" : dlerror ());
        return -1;
    }
    CK_C_INITIALIZE_ARGS args = { .flags = CKF_OS_LOCKING_OK };
    CK_RV rv = s_p11->C_Initialize (&args);
    CK_SLOT_ID slots [64];
    CK_ULONG count = 64;
    if (rv == CKR_OK)
        rv = s_p11->C_GetSlotList (CK_TRUE, slots, &count);
    *slot_p = (CK_SLOT_ID) -1;
    for (CK_ULONG i = 0; rv == CKR_OK && i < count && *slot_p == (CK_SLOT_ID) -1; i++) {
        CK_TOKEN_INFO info;
        size_t len = options->token ? strlen (options->token) : 0;
        if (!options->token)
            *slot_p = slots [i];
        else
        if (s_p11->C_GetTokenInfo (slots [i], &info) == CKR_OK && len <= sizeof info.label
        &&  memcmp (info.label, options->token, len) == 0) {
            size_t rest = len;
            while (rest < sizeof info.label && info.label [rest] == ' ')
                rest++;
            if (rest == sizeof info.label)
                *slot_p = slots [i];
        }
    }
    if (rv == CKR_OK && *slot_p == (CK_SLOT_ID) -1) {
        fprintf (stderr, "cryptoserver-modexp: no token%s%s\n", options->token ? " labelled " : "",
                 options->token ? options->token : "");
        return -1;
    }
    if (rv == CKR_OK && login) {
        rv = s_p11->C_OpenSession (*slot_p, CKF_SERIAL_SESSION, NULL, NULL, session_p);
        if (rv == CKR_OK)
            rv = s_p11->C_Login (*session_p, CKU_USER, (CK_UTF8CHAR *) options->pin, strlen (options->pin));
    }
    if (rv != CKR_OK) {
        fprintf (stderr, "cryptoserver-modexp: %s\n", cs_rv_name (rv));
        return -1;
    }
    return 0;
}

/*  One C_Digest of a vendor mechanism: data in, out (max bytes).  */
static CK_RV
s_digest (CK_SESSION_HANDLE session, CK_MECHANISM *mech, unsigned char *data, size_t len,
          unsigned char *out, size_t max)
{
    CK_ULONG out_len = max;
    CK_RV rv = s_p11->C_DigestInit (session, mech);
    if (rv == CKR_OK)
        rv = s_p11->C_Digest (session, data, len, out, &out_len);
    if (rv == CKR_OK && out_len != max)
        rv = CKR_GENERAL_ERROR;
    return rv;
}

/*  modexp and crt: the bases (padded to k each) in one array call, or one
 *  call each (--single, or one base).  */
static CK_RV
s_run_fixed (CK_SESSION_HANDLE session, CK_MECHANISM *single, CK_MECHANISM *array, size_t k,
             s_num_t *bases, size_t n)
{
    unsigned char *data = s_calloc (n ? n : 1, k), *out = s_calloc (n ? n : 1, k);
    CK_RV rv = data && out ? CKR_OK : CKR_HOST_MEMORY;
    bool one_call = array && n > 1;
    for (size_t i = 0; rv == CKR_OK && one_call && i < n; i++)
        if (s_pad (&bases [i], k, data + i * k)) {
            fprintf (stderr, "cryptoserver-modexp: base %zu is longer than the modulus; "
                     "reduce it or use --single\n", i + 1);
            rv = CKR_DATA_LEN_RANGE;
        }
    if (rv == CKR_OK && one_call)
        rv = s_digest (session, array, data, n * k, out, n * k);
    else
    for (size_t i = 0; rv == CKR_OK && i < n; i++)
        rv = s_digest (session, single, bases [i].bytes, bases [i].len, out + i * k, k);
    for (size_t i = 0; rv == CKR_OK && i < n; i++)
        s_print (out + i * k, k);
    return rv;
}

#define S_NUM(field, num) do { params.p##field = (num).bytes; params.ul##field##Len = (num).len; } while (0)

static int
s_cmd_modexp (CK_SESSION_HANDLE session, const s_options_t *options, char **argv, int argc,
              s_num_t *bases, size_t n)
{
    s_num_t e, m;
    (void) argc;
    if (s_hex (argv [0], &e) || s_hex (argv [1], &m) || s_significant (&m) == 0) {
        fprintf (stderr, "cryptoserver-modexp: E and M must be hex, M not zero\n");
        return 2;
    }
    CK_CS_MODEXP_PARAMS params = { 0 };
    S_NUM (Exponent, e);
    S_NUM (Modulus, m);
    CK_MECHANISM single = { CKM_CS_MODEXP, &params, sizeof params };
    CK_MECHANISM array = { CKM_CS_MODEXP_ARRAY, &params, sizeof params };
    CK_RV rv = s_run_fixed (session, &single, options->single ? NULL : &array, s_significant (&m), bases, n);
    if (rv != CKR_OK)
        fprintf (stderr, "cryptoserver-modexp: %s\n", cs_rv_name (rv));
    return rv == CKR_OK ? 0 : 1;
}

/*  Bytes of a*b (the RSA modulus p*q: the length of a CRT result).  */
static size_t
s_product_bytes (const s_num_t *a, const s_num_t *b)
{
    BIGNUM *x = BN_bin2bn (a->bytes, (int) a->len, NULL), *y = BN_bin2bn (b->bytes, (int) b->len, NULL);
    BN_CTX *ctx = BN_CTX_new ();
    size_t k = x && y && ctx && BN_mul (x, x, y, ctx) ? (size_t) BN_num_bytes (x) : 0;
    BN_free (x);
    BN_free (y);
    BN_CTX_free (ctx);
    return k;
}

static int
s_cmd_crt (CK_SESSION_HANDLE session, const s_options_t *options, char **argv, int argc,
           s_num_t *bases, size_t n)
{
    s_num_t v [6] = { { 0 } };
    (void) argc;
    for (int i = 0; i < 5; i++)
        if (s_hex (argv [i], &v [i])) {
            fprintf (stderr, "cryptoserver-modexp: P Q DP DQ QINV must be hex\n");
            return 2;
        }
    if (options->public_exponent && s_hex (options->public_exponent, &v [5])) {
        fprintf (stderr, "cryptoserver-modexp: --e must be hex\n");
        return 2;
    }
    CK_CS_RSA_CRT_PARAMS params = { 0 };
    S_NUM (Prime1, v [0]);
    S_NUM (Prime2, v [1]);
    S_NUM (Exponent1, v [2]);
    S_NUM (Exponent2, v [3]);
    S_NUM (Coefficient, v [4]);
    S_NUM (PublicExponent, v [5]);
    size_t k = s_product_bytes (&v [0], &v [1]);
    if (k == 0) {
        fprintf (stderr, "cryptoserver-modexp: P and Q must not be zero\n");
        return 2;
    }
    CK_MECHANISM single = { CKM_CS_RSA_CRT, &params, sizeof params };
    CK_MECHANISM array = { CKM_CS_RSA_CRT_ARRAY, &params, sizeof params };
    CK_RV rv = s_run_fixed (session, &single, options->single ? NULL : &array, k, bases, n);
    if (rv != CKR_OK)
        fprintf (stderr, "cryptoserver-modexp: %s\n", cs_rv_name (rv));
    return rv == CKR_OK ? 0 : 1;
}

/*  multi: "BASE:E:M" arguments or "BASE E M" lines.  */
static int
s_cmd_multi (CK_SESSION_HANDLE session, char **items, size_t n)
{
    CK_CS_MODEXP_PARAMS *params = s_calloc (n ? n : 1, sizeof *params);
    s_num_t *nums = s_calloc (3 * (n ? n : 1), sizeof *nums);
    size_t total = 0;
    if (!params || !nums)
        return 1;
    for (size_t i = 0; i < n; i++) {
        char *save = NULL, *f [3];
        f [0] = strtok_r (items [i], ": \t\n", &save);
        f [1] = f [0] ? strtok_r (NULL, ": \t\n", &save) : NULL;
        f [2] = f [1] ? strtok_r (NULL, ": \t\n", &save) : NULL;
        if (!f [2] || s_hex (f [0], &nums [3 * i]) || s_hex (f [1], &nums [3 * i + 1])
        ||  s_hex (f [2], &nums [3 * i + 2]) || s_significant (&nums [3 * i + 2]) == 0) {
            fprintf (stderr, "cryptoserver-modexp: item %zu: want BASE E M in hex, M not zero\n", i + 1);
            return 2;
        }
        params [i] = (CK_CS_MODEXP_PARAMS) { nums [3 * i + 1].bytes, nums [3 * i + 1].len,
                                             nums [3 * i + 2].bytes, nums [3 * i + 2].len };
        total += s_significant (&nums [3 * i + 2]);
    }
    unsigned char *data = s_calloc (1, total + 1), *out = s_calloc (1, total + 1);
    CK_CS_MULTI_MODEXP_PARAMS multi = { n, params };
    CK_MECHANISM mech = { CKM_CS_MULTI_MODEXP_ARRAY, &multi, sizeof multi };
    CK_RV rv = data && out ? CKR_OK : CKR_HOST_MEMORY;
    for (size_t i = 0, at = 0; rv == CKR_OK && i < n; i++) {
        size_t k = s_significant (&nums [3 * i + 2]);
        if (s_pad (&nums [3 * i], k, data + at)) {
            fprintf (stderr, "cryptoserver-modexp: item %zu: base longer than its modulus\n", i + 1);
            return 2;
        }
        at += k;
    }
    if (rv == CKR_OK)
        rv = s_digest (session, &mech, data, total, out, total);
    for (size_t i = 0, at = 0; rv == CKR_OK && i < n; i++) {
        size_t k = s_significant (&nums [3 * i + 2]);
        s_print (out + at, k);
        at += k;
    }
    if (rv != CKR_OK)
        fprintf (stderr, "cryptoserver-modexp: %s\n", cs_rv_name (rv));
    return rv == CKR_OK ? 0 : 1;
}

static int
s_cmd_max (CK_SLOT_ID slot)
{
    CK_MECHANISM_INFO info;
    CK_RV rv = s_p11->C_GetMechanismInfo (slot, CKM_CS_MODEXP, &info);
    if (rv != CKR_OK) {
        fprintf (stderr, "cryptoserver-modexp: C_GetMechanismInfo (CKM_CS_MODEXP): %s\n", cs_rv_name (rv));
        return 1;
    }
    printf ("%lu\n", (unsigned long) info.ulMaxKeySize);
    return 0;
}

static int
s_options (int argc, char **argv, s_options_t *options)
{
    static const struct option longs [] = {
        { "module", required_argument, NULL, 'm' }, { "token", required_argument, NULL, 't' },
        { "pin", required_argument, NULL, 'p' }, { "pin-file", required_argument, NULL, 'f' },
        { "e", required_argument, NULL, 'e' }, { "single", no_argument, NULL, 's' },
        { "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 }
    };
    options->module = getenv ("CRYPTOSERVER_MODULE") ? getenv ("CRYPTOSERVER_MODULE") : "cryptoserver-pkcs11.so";
    options->pin = getenv ("CRYPTOSERVER_PIN");
    int c;
    while ((c = getopt_long (argc, argv, "+", longs, NULL)) != -1) {
        FILE *file;
        switch (c) {
            case 'm': options->module = optarg; break;
            case 't': options->token = optarg; break;
            case 'p': options->pin = optarg; break;
            case 'e': options->public_exponent = optarg; break;
            case 's': options->single = true; break;
            case 'f':
                if (!(file = fopen (optarg, "re")) || !fgets (options->pin_buf, sizeof options->pin_buf, file)) {
                    fprintf (stderr, "cryptoserver-modexp: cannot read --pin-file %s\n", optarg);
                    if (file)
                        fclose (file);
                    return -1;
                }
                fclose (file);
                options->pin_buf [strcspn (options->pin_buf, "\r\n")] = 0;
                options->pin = options->pin_buf;
                break;
            case 'h': s_usage (stdout); exit (0);
            default: return -1;
        }
    }
    return 0;
}

static int
s_main (int argc, char **argv)
{
    s_options_t options = { 0 };
    if (s_options (argc, argv, &options) || optind >= argc) {
        s_usage (stderr);
        return 2;
    }
    const char *cmd = argv [optind++];
    int fixed = strcmp (cmd, "modexp") == 0 ? 2 : strcmp (cmd, "crt") == 0 ? 5
              : strcmp (cmd, "multi") == 0 || strcmp (cmd, "max-modulus") == 0 ? 0 : -1;
    if (fixed < 0 || argc - optind < fixed || (strcmp (cmd, "max-modulus") == 0 && argc > optind)) {
        fprintf (stderr, "cryptoserver-modexp: %s: wrong command or operands\n", cmd);
        s_usage (stderr);
        return 2;
    }
    bool login = strcmp (cmd, "max-modulus") != 0;
    if (login && !options.pin) {
        fprintf (stderr, "cryptoserver-modexp: give the user PIN (--pin, --pin-file or CRYPTOSERVER_PIN)\n");
        return 2;
    }
    //  The bases (multi: the items): the arguments after the operands, or stdin.
    char **items = argv + optind + fixed;
    size_t n = (size_t) (argc - optind - fixed);
    char **lines = NULL;
    if (login && n == 0) {
        lines = s_read_lines (&n);
        items = lines;
    }
    if (login && (!items || n == 0)) {
        fprintf (stderr, "cryptoserver-modexp: no bases\n");
        return 2;
    }
    s_num_t *bases = s_calloc (n ? n : 1, sizeof *bases);
    if (strcmp (cmd, "modexp") == 0 || strcmp (cmd, "crt") == 0)
        for (size_t i = 0; bases && i < n; i++)
            if (s_hex (items [i], &bases [i])) {
                fprintf (stderr, "cryptoserver-modexp: base %zu is not hex\n", i + 1);
                return 2;
            }
    CK_SLOT_ID slot;
    CK_SESSION_HANDLE session = CK_INVALID_HANDLE;
    if (!bases || s_open (&options, login, &slot, &session))
        return 1;
    int status = strcmp (cmd, "modexp") == 0 ? s_cmd_modexp (session, &options, argv + optind, fixed, bases, n)
               : strcmp (cmd, "crt") == 0 ? s_cmd_crt (session, &options, argv + optind, fixed, bases, n)
               : strcmp (cmd, "multi") == 0 ? s_cmd_multi (session, items, n) : s_cmd_max (slot);
    if (session != CK_INVALID_HANDLE)
        s_p11->C_CloseSession (session);
    s_p11->C_Finalize (NULL);
    fflush (stdout);
    return status;
}

int
main (int argc, char **argv)
{
    int status = s_main (argc, argv);
    s_free_all ();
    return status;
}
