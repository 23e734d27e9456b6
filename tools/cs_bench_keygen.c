/*  cs_bench_keygen.c — cryptoserver-bench --keygen: latency of
 *  C_GenerateKeyPair (PKCS#11 2.40 §5.14) through any module, with the
 *  standard templates pkcs11-tool --keypairgen uses (no vendor attributes).
 *  Each generated pair is destroyed right after its (timed) generation; the
 *  destroy is not timed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "cs_bench.h"
#include "cs_metrics_scrape.h"
#include "cs_wire.h"

//  DER OIDs for CKA_EC_PARAMS: prime256v1 (1.2.840.10045.3.1.7) and
//  id-Ed25519 (1.3.101.112, RFC 8410).
static const CK_BYTE s_p256_oid [] = { 0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07 };
static const CK_BYTE s_ed25519_oid [] = { 0x06, 0x03, 0x2b, 0x65, 0x70 };

bool
cs_bench_keygen_parse (const char *name, cs_bench_keygen_t *keygen)
{
    if (strcmp (name, "rsa:2048") == 0)
        *keygen = CS_BENCH_KEYGEN_RSA2048;
    else
    if (strcmp (name, "ec:prime256v1") == 0)
        *keygen = CS_BENCH_KEYGEN_P256;
    else
    if (strcmp (name, "ed25519") == 0)
        *keygen = CS_BENCH_KEYGEN_ED25519;
    else
        return false;
    return true;
}

const char *
cs_bench_keygen_name (cs_bench_keygen_t keygen)
{
    return keygen == CS_BENCH_KEYGEN_RSA2048 ? "rsa:2048"
         : keygen == CS_BENCH_KEYGEN_P256 ? "ec:prime256v1" : "ed25519";
}

static void
s_sleep_ms (long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    nanosleep (&ts, NULL);
}

//  Generates and destroys one key pair; *ms gets the C_GenerateKeyPair time.
static CK_RV
s_one (cs_bench_module_t *module, CK_SESSION_HANDLE session, cs_bench_keygen_t keygen,
       bool token, long i, double *ms)
{
    CK_BBOOL yes = CK_TRUE, on_token = token ? CK_TRUE : CK_FALSE;
    CK_ULONG bits = 2048;
    CK_BYTE exponent [] = { 0x01, 0x00, 0x01 };
    char label [64];
    snprintf (label, sizeof label, "cryptoserver-bench-keygen-%ld", i);
    CK_MECHANISM mechanism = { CKM_RSA_PKCS_KEY_PAIR_GEN, NULL, 0 };
    CK_ATTRIBUTE pub [] = {
        { CKA_TOKEN, &on_token, sizeof on_token },
        { CKA_VERIFY, &yes, sizeof yes },
        { CKA_LABEL, label, strlen (label) },
        { CKA_MODULUS_BITS, &bits, sizeof bits },
        { CKA_PUBLIC_EXPONENT, exponent, sizeof exponent }
    };
    CK_ATTRIBUTE priv [] = {
        { CKA_TOKEN, &on_token, sizeof on_token },
        { CKA_PRIVATE, &yes, sizeof yes },
        { CKA_SENSITIVE, &yes, sizeof yes },
        { CKA_SIGN, &yes, sizeof yes },
        { CKA_LABEL, label, strlen (label) }
    };
    if (keygen != CS_BENCH_KEYGEN_RSA2048) {
        bool ed = keygen == CS_BENCH_KEYGEN_ED25519;
        mechanism.mechanism = ed ? CKM_EC_EDWARDS_KEY_PAIR_GEN : CKM_EC_KEY_PAIR_GEN;
        pub [3] = (CK_ATTRIBUTE) { CKA_EC_PARAMS, (void *) (ed ? s_ed25519_oid : s_p256_oid),
                                   ed ? sizeof s_ed25519_oid : sizeof s_p256_oid };
    }
    CK_ULONG pub_count = keygen == CS_BENCH_KEYGEN_RSA2048 ? 5 : 4;
    CK_OBJECT_HANDLE pub_key = CK_INVALID_HANDLE, priv_key = CK_INVALID_HANDLE;
    double began = cs_bench_now () * 1e3;
    CK_RV rv = module->p11->C_GenerateKeyPair (session, &mechanism, pub, pub_count, priv, 5,
                                               &pub_key, &priv_key);
    *ms = cs_bench_now () * 1e3 - began;
    if (rv == CKR_OK) {
        CK_RV destroyed = module->p11->C_DestroyObject (session, priv_key);
        if (destroyed == CKR_OK)
            destroyed = module->p11->C_DestroyObject (session, pub_key);
        if (destroyed != CKR_OK)
            fprintf (stderr, "cryptoserver-bench: C_DestroyObject: %s\n", cs_rv_name (destroyed));
    }
    return rv;
}

/*  Reads the pool's taken and missed counters into pool [0..1].  */
static int
s_pool_read (const char *url, double pool [2])
{
    char err [256] = "";
    if (cs_metrics_read (url, "cryptoserver_pool_keys_taken_total", &pool [0], err, sizeof err) == 0
    &&  cs_metrics_read (url, "cryptoserver_pool_keys_missed_total", &pool [1], err, sizeof err) == 0)
        return 0;
    fprintf (stderr, "cryptoserver-bench: --metrics: %s\n", err);
    return -1;
}

int
cs_bench_keygen_run (cs_bench_module_t *module, CK_SESSION_HANDLE session,
                     const cs_bench_keygen_options_t *options)
{
    cs_bench_samples_t latency = { 0 };
    long failures = 0;
    CK_RV first = CKR_OK;
    double before [2] = { 0, 0 }, after [2] = { 0, 0 };
    int metrics_rc = options->metrics ? s_pool_read (options->metrics, before) : 0;
    for (long i = 0; i < options->count; i++) {
        double ms = 0;
        CK_RV rv = s_one (module, session, options->keygen, options->token, i, &ms);
        if (rv == CKR_OK)
            cs_bench_samples_add (&latency, ms);
        else {
            failures++;
            first = first == CKR_OK ? rv : first;
        }
        if (options->interval_ms > 0 && i + 1 < options->count)
            s_sleep_ms (options->interval_ms);
    }
    if (first != CKR_OK)
        fprintf (stderr, "cryptoserver-bench: first C_GenerateKeyPair failure: %s\n", cs_rv_name (first));
    if (options->metrics && metrics_rc == 0)
        metrics_rc = s_pool_read (options->metrics, after);
    long taken = (long) (after [0] - before [0]), missed = (long) (after [1] - before [1]);
    double p50 = cs_bench_percentile (&latency, 50), p90 = cs_bench_percentile (&latency, 90);
    double p99 = cs_bench_percentile (&latency, 99), max = cs_bench_percentile (&latency, 100);
    const char *kind = options->token ? "token" : "session";
    if (options->csv) {
        printf ("keygen,objects,count,interval_ms,p50_ms,p90_ms,p99_ms,max_ms,failures%s\n",
                options->metrics ? ",from_pool,pool_empty" : "");
        printf ("%s,%s,%zu,%ld,%.3f,%.3f,%.3f,%.3f,%ld", cs_bench_keygen_name (options->keygen),
                kind, latency.count, options->interval_ms, p50, p90, p99, max, failures);
        if (options->metrics)
            printf (",%ld,%ld", taken, missed);
        printf ("\n");
    }
    else {
        printf ("C_GenerateKeyPair %s (%s keys), %ld pairs, %ld ms between\n",
                cs_bench_keygen_name (options->keygen), kind, options->count, options->interval_ms);
        printf ("%8s %8s %8s %8s %8s %8s\n", "made", "p50 ms", "p90 ms", "p99 ms", "max ms", "failures");
        printf ("%8zu %8.3f %8.3f %8.3f %8.3f %8ld\n", latency.count, p50, p90, p99, max, failures);
        if (options->metrics && metrics_rc == 0)
            printf ("from the broker's key pool: %ld of %ld (%ld found it empty; other generations "
                    "ran on a board)\n", taken, options->count, missed);
    }
    cs_bench_samples_free (&latency);
    return failures || metrics_rc ? 1 : 0;
}
