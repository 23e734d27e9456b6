/*  cs_bench_find.c — `cryptoserver-bench find-objects`: times
 *  C_FindObjectsInit / C_FindObjects / C_FindObjectsFinal over every
 *  private key of a token (issue #25: a tenant with 100,000 keys listed in
 *  pages in under 1 s).  The first run reads the list from the broker (in
 *  pages, client/list-page); later ones find it unchanged.  With --label,
 *  also a find of one key by CKA_LABEL, as an application looks a key up.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <czmq.h>
#include "cs_bench.h"
#include "cs_wire.h"

#define S_BATCH 1024            /* handles per C_FindObjects call */
#define S_MAX_RUNS 100

static int
s_usage (FILE *out, int status)
{
    fprintf (out,
        "usage: cryptoserver-bench find-objects --module SO --token LABEL --pin PIN [--runs N] [--label L]\n"
        "\n"
        "Times a find of every private key object (C_FindObjectsInit, C_FindObjects in calls of %d\n"
        "handles, C_FindObjectsFinal), N runs (default 3; the first reads the list from the broker),\n"
        "and with --label a find of the one private key labelled L (first handle only).\n"
        "Exit status: 0, 1 a call failed or the label was not found, 2 usage.\n", S_BATCH);
    return status;
}

/*  One find with template tmpl (n attributes), taking at most `max`
 *  handles; *found_p gets how many.  Returns the first error or CKR_OK.  */
static CK_RV
s_find (cs_bench_module_t *module, CK_SESSION_HANDLE session, CK_ATTRIBUTE *tmpl, CK_ULONG n, size_t max,
        size_t *found_p)
{
    CK_OBJECT_HANDLE handles [S_BATCH];
    CK_ULONG got = 0;
    *found_p = 0;
    CK_RV rv = module->p11->C_FindObjectsInit (session, tmpl, n);
    while (rv == CKR_OK && *found_p < max) {
        rv = module->p11->C_FindObjects (session, handles, S_BATCH, &got);
        if (rv != CKR_OK || got == 0)
            break;
        *found_p += got;
    }
    CK_RV final = module->p11->C_FindObjectsFinal (session);
    return rv != CKR_OK ? rv : final;
}

/*  Times one find; prints a line.  Returns CKR_OK or the error.  */
static CK_RV
s_timed (cs_bench_module_t *module, CK_SESSION_HANDLE session, CK_ATTRIBUTE *tmpl, CK_ULONG n, size_t max,
         const char *what, size_t *found_p)
{
    int64_t start = zclock_usecs ();
    CK_RV rv = s_find (module, session, tmpl, n, max, found_p);
    double ms = (double) (zclock_usecs () - start) / 1000;
    if (rv == CKR_OK)
        printf ("%s: %zu objects in %.1f ms\n", what, *found_p, ms);
    else
        fprintf (stderr, "cryptoserver-bench: %s: %s\n", what, cs_rv_name (rv));
    return rv;
}

int
cs_bench_find_main (int argc, char **argv)
{
    static const struct option longs [] = {
        { "module", required_argument, NULL, 'm' }, { "token", required_argument, NULL, 't' },
        { "pin", required_argument, NULL, 'p' },    { "runs", required_argument, NULL, 'r' },
        { "label", required_argument, NULL, 'l' },  { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 }
    };
    const char *path = NULL, *token = NULL, *pin = NULL, *label = NULL;
    long runs = 3;
    int opt;
    while ((opt = getopt_long (argc, argv, "h", longs, NULL)) != -1)
        switch (opt) {
            case 'm': path = optarg; break;
            case 't': token = optarg; break;
            case 'p': pin = optarg; break;
            case 'r': runs = strtol (optarg, NULL, 10); break;
            case 'l': label = optarg; break;
            case 'h': return s_usage (stdout, 0);
            default:  return s_usage (stderr, 2);
        }
    if (optind < argc || !path || !token || !pin || runs < 1 || runs > S_MAX_RUNS)
        return s_usage (stderr, 2);
    char err [256] = "";
    cs_bench_module_t module;
    CK_SESSION_HANDLE session = CK_INVALID_HANDLE;
    CK_OBJECT_CLASS klass = CKO_PRIVATE_KEY;
    CK_ATTRIBUTE tmpl [2] = { { CKA_CLASS, &klass, sizeof klass }, { CKA_LABEL, (void *) label,
                                                                      label ? strlen (label) : 0 } };
    int status = 1;
    CK_RV rv = CKR_OK;
    size_t found = 0;
    if (cs_bench_module_open (&module, path, token, err, sizeof err) != 0)
        goto out;
    if ((rv = cs_bench_session_open (&module, pin, &session)) != CKR_OK) {
        snprintf (err, sizeof err, "C_OpenSession/C_Login: %s", cs_rv_name (rv));
        goto out;
    }
    for (long r = 1; r <= runs && rv == CKR_OK; r++) {
        char what [64];
        snprintf (what, sizeof what, "run %ld: every private key", r);
        rv = s_timed (&module, session, tmpl, 1, SIZE_MAX, what, &found);
    }
    if (rv == CKR_OK && label)
        rv = s_timed (&module, session, tmpl, 2, 1, "one private key by label", &found);
    status = rv == CKR_OK && (!label || found == 1) ? 0 : 1;
out:
    if (*err)
        fprintf (stderr, "cryptoserver-bench: %s\n", err);
    if (session != CK_INVALID_HANDLE)
        module.p11->C_CloseSession (session);
    cs_bench_module_close (&module);
    return status;
}
